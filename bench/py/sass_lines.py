#!/usr/bin/env python3
"""Where a kernel's SASS instructions come from, without the GPU: the
program's files concatenated as the library builds them, compiled with
clang to PTX with line information, assembled for sm_90 by CUDA's ptxas
and disassembled by nvdisasm, then counted by source line. A proxy for
NVIDIA's own compiler (its PTX differs), but where a change adds or removes
instructions shows the same way, and with one warp a scheduler (a decode
of a short context) the instructions of a work-item's chain are its time.

  python3 bench/py/sass_lines.py --ptxas /usr/local/cuda/bin/ptxas \\
      --nvdisasm DIR/nvdisasm [--kernel fcl_kv_decode_mma] [--before-mma] \\
      [--top 30] [-D NAME=VALUE ...]

prints the kernel's instruction count, the index of its first HMMA, the
counts of a few opcodes and the source lines with the most instructions
(--before-mma: only those before the first HMMA, the prologue). The files
and build options default to the f16 tensor-core decode at D=128 with 4
query rows, as tests/ptx_check.cmake's decode_mma_f16 builds it.
nvdisasm comes with the CUDA toolkit, or from PyPI's
nvidia-cuda-nvdisasm wheel (its nvidia/cu13/bin)."""
import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DECODE_FILES = ("attention/attention_abi.h common/dtype.cl common/mma_warp.cl "
                "common/mma_common.cl attention/attention_common.cl attention/kvcache_common.cl "
                "attention/kvcache_format.cl attention/kvcache_append.cl attention/kvcache_tile.cl "
                "attention/kvcache_split_merge.cl attention/kvcache_decode_mma.cl").split()
DECODE_DEFS = ("FCL_DTYPE=1 HEAD_DIM=128 HEAD_DIM_V=128 WG=128 KSUB=1 ROWS=4 VEC=8 "
               "FCL_UNROLL_HINTS=1 KV_PART_PTX=1").split()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clang", default="clang")
    ap.add_argument("--ptxas", required=True)
    ap.add_argument("--nvdisasm", required=True)
    ap.add_argument("--kernel", default="fcl_kv_decode_mma")
    ap.add_argument("--files", nargs="+", default=DECODE_FILES, help="under cl/, in order")
    ap.add_argument("--cl-dir", default=os.path.join(ROOT, "cl"))
    ap.add_argument("-D", dest="defs", action="append", default=[],
                    help="a build option (NAME=VALUE), after the defaults")
    ap.add_argument("--before-mma", action="store_true", help="count the prologue only")
    ap.add_argument("--top", type=int, default=30)
    a = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "k.cl")
        with open(src, "w") as out:
            out.write(open(os.path.join(ROOT, "tests", "ptx_prelude.cl")).read())
            for f in a.files:
                out.write(open(os.path.join(a.cl_dir, f)).read() + "\n")
        ptx = os.path.join(tmp, "k.ptx")
        defs = ["-D" + d for d in DECODE_DEFS + a.defs]
        subprocess.run([a.clang, "-x", "cl", "-cl-std=CL1.2", "-target", "nvptx64-nvidia-nvcl",
                        "-O2", "-gline-tables-only", "-Xclang", "-finclude-default-header",
                        "-Xclang", "-cl-ext=+cl_khr_fp16", "-DFCL_ASM=__asm__", *defs,
                        "-S", "-o", ptx, src], check=True, stderr=subprocess.DEVNULL)
        text = open(ptx).read()
        # ptxas takes the .file and .loc lines but not clang's DWARF sections,
        # nor its nvcl target line.
        text = text[:text.find("\t.section\t.debug_abbrev")] if ".debug_abbrev" in text else text
        text = re.sub(r"\.version .*", ".version 8.0", text, count=1)
        text = re.sub(r"\.target .*", ".target sm_90", text, count=1)
        text = re.sub(r'(\.file\s+\d+)\s+"[^"]*"\s+"[^"]*k\.cl"', r'\1 "%s"' % src, text)
        open(ptx, "w").write(text)
        cubin = os.path.join(tmp, "k.cubin")
        subprocess.run([a.ptxas, "-lineinfo", "-arch=sm_90", "-o", cubin, ptx], check=True)
        dis = subprocess.run([a.nvdisasm, "-g", cubin], check=True, capture_output=True,
                             text=True).stdout
        lines = open(src).read().split("\n")

    counts, ops = collections.Counter(), collections.Counter()
    inside, line, n, first_mma = False, None, 0, None
    for row in dis.splitlines():
        if row.startswith(".text." + a.kernel + ":"):
            inside = True
            continue
        if inside and row.startswith(".text."):
            break
        if not inside:
            continue
        m = re.search(r"line (\d+)", row)
        if m:
            line = int(m.group(1))
            continue
        m = re.search(r"/\*[0-9a-f]{4,5}\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_]+)", row)
        if not m:
            continue
        n += 1
        op = m.group(1)
        if first_mma is None and op == "HMMA":
            first_mma = n
        if not (a.before_mma and first_mma is not None):
            counts[line] += 1
        ops[op] += 1
    if not n:
        sys.exit(f"sass_lines.py: no function {a.kernel} in the cubin")
    print(f"{a.kernel}: {n} instructions, the first HMMA at {first_mma}; " +
          ", ".join(f"{k} {ops[k]}" for k in ("IMAD", "ISETP", "BRA", "I2F", "MUFU", "BAR",
                                               "LDG", "LDS", "STS")))
    for ln, k in counts.most_common(a.top):
        text = lines[ln - 1].strip()[:100] if ln else "?"
        print(f"{k:6d}  {text}")


if __name__ == "__main__":
    main()
