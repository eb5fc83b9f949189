#!/usr/bin/env python3
"""Runs flashcl's tensor-core attention forward (fcl_attention_fwd_tf32 for
f32, fcl_attention_fwd_mma for f16 and bf16) from NVIDIA's own PTX through the
CUDA driver API, so that Nsight Compute can profile it: ncu does not see
kernels launched through NVIDIA's OpenCL ("No kernels were profiled").

The PTX is what NVIDIA's OpenCL compiler wrote for the program (the payload
of a flashcl binary-cache entry, after its 48-byte header: see
src/binary_cache.c), or a directory of such entries (FCL_CACHE_DIR), from
which the smallest program holding the kernel is taken: the build without
the non-finite handling (FCL_NONFINITE=0), which runs when the inputs are
finite. Fill the directory with one fa-bench run of the shape's dtype and
head dim only (f16 and bf16 share the kernel's name); a program built for
other warps is refused, and one that writes nothing fails the check (o
starts as NaN). The launch is the
library's (src/attention_fastpath.c): one work-group of WARPS warps per 16
WARPS query rows and (batch, head), arguments in the kernel's order.

  ncu -k regex:fcl -c 1 --set full python3 bench/ncu_ptx.py FILE.ptx --warps 4 [--head-dim 128]
      [--batch 4 --heads 32 --seqlen 4096 --causal 0] [--maxnreg N]

Without ncu it times the kernel (median of --timed runs), checks batch 0
against PyTorch in double, and prints what the JIT reports (registers,
spills); --maxnreg caps the registers, to see what an occupancy that the
OpenCL build cannot ask for would give.

  ncu ... python3 bench/ncu_ptx.py --torch flash --dtype f16 ...   PyTorch's kernel

Needs PyTorch with CUDA (for the buffers and the CUDA context)."""
import argparse
import ctypes
import math
import os
import re
import sys

import torch


def run_torch(a):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    dt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[a.dtype]
    backend = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
               "cudnn": SDPBackend.CUDNN_ATTENTION}[a.torch]
    q, k, v = (torch.randn(a.batch, a.heads, a.seqlen, a.head_dim, device="cuda", dtype=dt)
               for _ in range(3))
    with sdpa_kernel(backend):
        for _ in range(a.runs + a.timed):
            torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=bool(a.causal))
    torch.cuda.synchronize()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ptx", nargs="?", help="a cache entry or FCL_CACHE_DIR")
    ap.add_argument("--torch", choices=["flash", "efficient", "cudnn"],
                    help="run PyTorch's SDPA backend on the same shape instead (to profile "
                         "it beside flashcl's kernel)")
    ap.add_argument("--dtype", default="f32", choices=["f32", "f16", "bf16"])
    ap.add_argument("--warps", type=int, default=4)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--seqlen", type=int, default=4096)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--causal", type=int, default=0)
    ap.add_argument("--runs", type=int, default=2, help="untimed runs first")
    ap.add_argument("--timed", type=int, default=5, help="timed runs (median)")
    ap.add_argument("--maxnreg", type=int, default=0,
                    help="registers at most, as .maxnreg in the PTX (the JIT's own "
                         "option, like -cl-nv-maxrregcount, is ignored beside .reqntid)")
    a = ap.parse_args()
    if a.torch:
        return run_torch(a)
    if not a.ptx:
        ap.error("a PTX file or cache directory is needed (or --torch)")
    a.kernel = "fcl_attention_fwd_tf32" if a.dtype == "f32" else "fcl_attention_fwd_mma"
    path = a.ptx
    if os.path.isdir(path):
        entry = b".entry " + a.kernel.encode()
        found = [os.path.join(path, f) for f in os.listdir(path)]
        found = [f for f in found if entry in open(f, "rb").read()]
        if not found:
            sys.exit(f"ncu_ptx.py: no program in {path} holds {a.kernel}")
        path = min(found, key=os.path.getsize)
        print(f"ncu_ptx.py: {path}")
    text = open(path, "rb").read()
    if text.startswith(b"FCLBIN01"):  # a cache entry: its 48-byte header first
        text = text[48:]
    ptx = text.rstrip(b"\0") + b"\0"
    # NVIDIA's OpenCL passes the work-group offsets (%envreg0-2) and the
    # number of work-groups (%envreg6-8) in registers that a CUDA launch leaves
    # at 0: read them from the grid instead.
    def envreg(mt):
        n = int(mt.group(2))
        src = {6: b"%nctaid.x", 7: b"%nctaid.y", 8: b"%nctaid.z"}.get(n, b"0")
        if n not in (0, 1, 2, 6, 7, 8):
            sys.exit(f"ncu_ptx.py: the PTX reads %envreg{n}, which this launcher does not set")
        return b"mov.u32 \t" + mt.group(1) + b", " + src + b";"
    ptx = re.sub(rb"mov\.[bu]32\s+(%r\d+),\s*%envreg(\d+);", envreg, ptx)
    if b"%envreg" in ptx:
        sys.exit("ncu_ptx.py: the PTX reads %envreg in a form this launcher does not rewrite")
    if a.maxnreg:  # a cap the JIT honours even beside .reqntid
        ptx = re.sub(rb"(\.entry\s+" + a.kernel.encode() + rb"\s*\(.*?\)\s*)", 
                     lambda mt: mt.group(1) + b".maxnreg %d\n" % a.maxnreg, ptx, count=1, flags=re.S)
    m = re.search(rb"\.entry\s+" + a.kernel.encode() + rb"\s*\((.*?)\)", ptx, re.S)
    if not m:
        sys.exit(f"ncu_ptx.py: no .entry {a.kernel} in {path}")
    kinds = re.findall(rb"\.param\s+\.(\w+)", m.group(1))
    ntid = re.search(rb"\.reqntid\s+(\d+)", ptx[m.end():m.end() + 200])
    if ntid and int(ntid.group(1)) != 32 * a.warps:
        sys.exit(f"ncu_ptx.py: the program was built for {int(ntid.group(1)) // 32} warps, "
                 f"not --warps {a.warps}")

    torch.cuda.init()
    torch.zeros(1, device="cuda")  # the primary context, current
    cuda = ctypes.CDLL("libcuda.so.1")
    mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
    # The JIT's info log (ptxas -v: registers and spills).
    log = ctypes.create_string_buffer(8192)
    opts = (ctypes.c_int * 3)(3, 4, 12)  # INFO_LOG_BUFFER(_SIZE_BYTES), LOG_VERBOSE
    optv = (ctypes.c_void_p * 3)(ctypes.addressof(log), len(log), 1)
    err = cuda.cuModuleLoadDataEx(ctypes.byref(mod), ctypes.c_char_p(ptx), 3, opts, optv)
    if err:
        sys.exit(f"ncu_ptx.py: cuModuleLoadDataEx: error {err}")
    for line in log.value.decode(errors="replace").splitlines():
        if "registers" in line or "spill" in line:
            print("ncu_ptx.py: jit:", line.strip())
    if cuda.cuModuleGetFunction(ctypes.byref(fn), mod, a.kernel.encode()):
        sys.exit("ncu_ptx.py: cuModuleGetFunction failed")

    B, H, N, D = a.batch, a.heads, a.seqlen, a.head_dim
    g = torch.Generator(device="cuda").manual_seed(1)
    dt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[a.dtype]
    q, k, v = (torch.randn(B, N, H, D, device="cuda", generator=g).to(dt) for _ in range(3))
    # NaN until written: a build that returns at once (FCL_NONFINITE=1 with
    # no flag set, or the wrong program) shows in the check below.
    o = torch.full_like(q, float("nan"))
    lse = torch.empty(B, H, N, device="cuda")  # f32 in every dtype
    nf = torch.zeros(H, dtype=torch.int32, device="cuda")
    sb, ss, sh = N * H * D, H * D, D
    scale = 1.0 / math.sqrt(D) * 1.4426950408889634
    wl, wr = N + N, (0 if a.causal else N + N)
    vals = ([q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), lse.data_ptr(),
             q.data_ptr(), q.data_ptr(), q.data_ptr()] +
            [0, sb, ss, sh] * 4 + [H * N, N] +
            [N, N, H, 1, wl, wr, scale, 0.0, 1, nf.data_ptr()])
    if len(vals) != len(kinds):
        sys.exit(f"ncu_ptx.py: the entry has {len(kinds)} parameters, expected {len(vals)}")
    cargs = []
    for kind, val in zip(kinds, vals):
        kind = kind.decode()
        if kind == "f32":
            cargs.append(ctypes.c_float(val))
        elif kind.endswith("64"):
            cargs.append(ctypes.c_uint64(val))
        else:
            cargs.append(ctypes.c_int32(val))
    params = (ctypes.c_void_p * len(cargs))(*[ctypes.addressof(c) for c in cargs])
    wg, bm = 32 * a.warps, 16 * a.warps
    grid = ((N + bm - 1) // bm, 1, B * H)
    for _ in range(a.runs):
        err = cuda.cuLaunchKernel(fn, grid[0], grid[1], grid[2], wg, 1, 1, 0, None, params, None)
        if err:
            sys.exit(f"ncu_ptx.py: cuLaunchKernel: error {err}")
    torch.cuda.synchronize()
    times = []
    for _ in range(a.timed):
        ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        ev0.record()
        err = cuda.cuLaunchKernel(fn, grid[0], grid[1], grid[2], wg, 1, 1, 0, None, params, None)
        ev1.record()
        if err:
            sys.exit(f"ncu_ptx.py: cuLaunchKernel: error {err}")
        torch.cuda.synchronize()
        times.append(ev0.elapsed_time(ev1))
    ms = sorted(times)[len(times) // 2] if times else float("nan")
    ref = torch.nn.functional.scaled_dot_product_attention(
        q[:1].transpose(1, 2).double(), k[:1].transpose(1, 2).double(),
        v[:1].transpose(1, 2).double(), is_causal=bool(a.causal)).transpose(1, 2)
    err = (o[:1].double() - ref).abs().max().item()
    flop = 4 * B * H * N * N * D / (2 if a.causal else 1)
    print(f"ncu_ptx.py: {a.kernel} grid {grid} x {wg}: {ms:.3f} ms, "
          f"{flop / ms / 1e9:.2f} TFLOP/s, max |o - ref| (batch 0) {err:.2e}")
    if not math.isfinite(err) or err > {"f32": 1e-5, "f16": 1e-2, "bf16": 5e-2}[a.dtype]:
        sys.exit("ncu_ptx.py: the output does not match the reference (wrong program?)")


if __name__ == "__main__":
    main()
