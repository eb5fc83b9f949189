#!/usr/bin/env python3
"""Runs one of flashcl's tensor-core attention kernels from NVIDIA's own PTX
through the CUDA driver API, so that Nsight Compute can profile it: ncu does
not see kernels launched through NVIDIA's OpenCL ("No kernels were
profiled"). --kernel fwd (the default): the forward, fcl_attention_fwd_tf32
for f32 and fcl_attention_fwd_mma for f16 and bf16; --kernel dkdv or dq: the
Hopper backward's fcl_attention_bwd_wgmma_dkdv or _dq (f16, bf16), given the
lse and delta that PyTorch computes in f32, its dK, dV or dQ checked on
batch 0, head 0 against PyTorch's autograd in double; --kernel decode: the
tensor-core decode fcl_kv_decode_mma (f16, bf16) of one new token against a
contiguous cache of --context keys, its splits (--splits, --split-keys)
merged in the kernel, checked against PyTorch in double.

The PTX is what NVIDIA's OpenCL compiler wrote for the program (the payload
of a flashcl binary-cache entry, after its 48-byte header: see
src/core/binary_cache.c), or a directory of such entries (FCL_CACHE_DIR), from
which the smallest program holding the kernel is taken: the build without
the non-finite handling (FCL_NONFINITE=0), which runs when the inputs are
finite. Fill the directory with one fa-bench run of the shape's dtype and
head dim only (f16 and bf16 share the kernel's name); a program built for
other warps is refused, and one that writes nothing fails the check (o
starts as NaN). The launch is the library's (src/attention/attention_fwd_mma.c,
attention_bwd_mma.c): one work-group of WARPS warps per 16 WARPS query rows
(keys for dkdv) and (batch, head), arguments in the kernel's order. For
the backward, fill the directory with a backward run (fa-bench --op bwd)
and give --warps the kernel's WK_WARPS or WQ_WARPS.

  ncu -k regex:fcl -c 1 --set full python3 bench/py/ncu_ptx.py FILE.ptx --warps 4 [--head-dim 128]
      [--batch 4 --heads 32 --seqlen 4096 --causal 0] [--maxnreg N]

Without ncu it times the kernel (median of --timed runs), checks batch 0
against PyTorch in double, and prints what the JIT reports (registers,
spills); --maxnreg caps the registers, to see what an occupancy that the
OpenCL build cannot ask for would give.

  ncu ... python3 bench/py/ncu_ptx.py --torch flash --dtype f16 ...   PyTorch's kernel
  ncu -k regex:dq_dk_dv ... python3 bench/py/ncu_ptx.py --torch flash --bwd ...   its backward

Needs PyTorch with CUDA (for the buffers and the CUDA context)."""
import argparse
import ctypes
import math
import os
import re
import struct
import sys

import torch


def run_torch(a):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    dt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[a.dtype]
    backend = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
               "cudnn": SDPBackend.CUDNN_ATTENTION}[a.torch]
    q, k, v = (torch.randn(a.batch, a.heads, a.seqlen, a.head_dim, device="cuda", dtype=dt)
               for _ in range(3))
    if a.bwd:
        for x in (q, k, v):
            x.requires_grad_()
    with sdpa_kernel(backend):
        for _ in range(a.runs + a.timed):
            o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=bool(a.causal))
            if a.bwd:
                torch.autograd.grad(o, (q, k, v), torch.ones_like(o))
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
    ap.add_argument("--kernel", default="fwd", choices=["fwd", "dkdv", "dq", "decode"],
                    help="the forward, the Hopper backward's dK/dV or dQ kernel, or the "
                         "tensor-core decode")
    ap.add_argument("--heads-kv", type=int, default=8, help="--kernel decode: kv heads")
    ap.add_argument("--context", type=int, default=1024, help="--kernel decode: cached keys")
    ap.add_argument("--splits", type=int, default=16,
                    help="--kernel decode: num_splits (at most; the kernel takes fewer for "
                         "short sequences, as --split-keys says)")
    ap.add_argument("--split-keys", type=int, default=64,
                    help="--kernel decode: fewest keys a split (the host's SPLIT_KEYS; 0: none)")
    ap.add_argument("--bwd", action="store_true", help="with --torch: run its backward")
    a = ap.parse_args()
    if a.torch:
        return run_torch(a)
    if not a.ptx:
        ap.error("a PTX file or cache directory is needed (or --torch)")
    if a.kernel != "fwd" and a.dtype == "f32":
        ap.error("the wgmma backward takes f16 or bf16")
    a.name = {"fwd": "fcl_attention_fwd_tf32" if a.dtype == "f32" else "fcl_attention_fwd_mma",
              "dkdv": "fcl_attention_bwd_wgmma_dkdv",
              "dq": "fcl_attention_bwd_wgmma_dq", "decode": "fcl_kv_decode_mma"}[a.kernel]
    ptx, kinds = load_ptx(a)
    torch.cuda.init()
    torch.zeros(1, device="cuda")  # the primary context, current
    cuda = ctypes.CDLL("libcuda.so.1")
    fn = load_function(cuda, ptx, a.name)
    {"fwd": run_fwd, "decode": run_decode}.get(a.kernel, run_bwd)(a, cuda, fn, kinds)


def load_ptx(a):
    """The PTX of the program holding a.name (rewritten for a CUDA launch) and
    its entry's parameter kinds."""
    path = a.ptx
    if os.path.isdir(path):
        entry = b".entry " + a.name.encode() + b"("
        found = [os.path.join(path, f) for f in os.listdir(path)]
        found = [f for f in found if entry in open(f, "rb").read()]
        if not found:
            sys.exit(f"ncu_ptx.py: no program in {path} holds {a.name}")
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
        ptx = re.sub(rb"(\.entry\s+" + a.name.encode() + rb"\s*\(.*?\)\s*)",
                     lambda mt: mt.group(1) + b".maxnreg %d\n" % a.maxnreg, ptx, count=1, flags=re.S)
    m = re.search(rb"\.entry\s+" + a.name.encode() + rb"\s*\((.*?)\)", ptx, re.S)
    if not m:
        sys.exit(f"ncu_ptx.py: no .entry {a.name} in {path}")
    kinds = re.findall(rb"\.param\s+\.(\w+)", m.group(1))
    ntid = re.search(rb"\.reqntid\s+(\d+)", ptx[m.end():m.end() + 200])
    if ntid and int(ntid.group(1)) != 32 * a.warps:
        sys.exit(f"ncu_ptx.py: the program was built for {int(ntid.group(1)) // 32} warps, "
                 f"not --warps {a.warps}")
    return ptx, kinds


def load_function(cuda, ptx, name):
    mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
    # The JIT's info log (ptxas -v: registers and spills).
    log = ctypes.create_string_buffer(8192)
    opts = (ctypes.c_int * 3)(3, 4, 12)  # INFO_LOG_BUFFER(_SIZE_BYTES), LOG_VERBOSE
    optv = (ctypes.c_void_p * 3)(ctypes.addressof(log), len(log), 1)
    err = cuda.cuModuleLoadDataEx(ctypes.byref(mod), ctypes.c_char_p(ptx), 3, opts, optv)
    if err:
        sys.exit(f"ncu_ptx.py: cuModuleLoadDataEx: error {err}")
    # A program's log covers each of its functions in turn: keep the lines of
    # the one launched (its registers and spills, and notes naming it).
    fun = None
    for line in log.value.decode(errors="replace").splitlines():
        m = re.search(r"(?:Compiling entry function|Function properties for) '?(\w+)", line)
        if m:
            fun = m.group(1)
        elif name in line or (fun == name and ("registers" in line or "spill" in line)):
            print("ncu_ptx.py: jit:", line.strip())
    if cuda.cuModuleGetFunction(ctypes.byref(fn), mod, name.encode()):
        sys.exit("ncu_ptx.py: cuModuleGetFunction failed")
    return fn


def launch_timed(a, cuda, fn, kinds, vals, grid, wg):
    """Launches fn a.runs times, then a.timed times timed: the median in ms."""
    if len(vals) != len(kinds):
        sys.exit(f"ncu_ptx.py: the entry has {len(kinds)} parameters, expected {len(vals)}")
    cargs = []
    for kind, val in zip(kinds, vals):
        kind = kind.decode()
        if kind == "align":  # a struct argument (.param .align 8 .b8 name[size]): its bytes
            cargs.append(ctypes.create_string_buffer(val, len(val)))
        elif kind == "f32":
            cargs.append(ctypes.c_float(val))
        elif kind.endswith("64"):
            cargs.append(ctypes.c_uint64(val))
        else:
            cargs.append(ctypes.c_int32(val))
    params = (ctypes.c_void_p * len(cargs))(*[ctypes.addressof(c) for c in cargs])
    def go():
        err = cuda.cuLaunchKernel(fn, grid[0], grid[1], grid[2], wg, 1, 1, 0, None, params, None)
        if err:
            sys.exit(f"ncu_ptx.py: cuLaunchKernel: error {err}")
    for _ in range(a.runs):
        go()
    torch.cuda.synchronize()
    times = []
    for _ in range(a.timed):
        ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        ev0.record()
        go()
        ev1.record()
        torch.cuda.synchronize()
        times.append(ev0.elapsed_time(ev1))
    return sorted(times)[len(times) // 2] if times else float("nan")


def run_fwd(a, cuda, fn, kinds):
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
    wl, wr = N - 1, (0 if a.causal else N - 1)
    # fcl_attn_fwd_scalars (cl/attention/attention_abi.h): the views and lse's
    # strides, seqlen_q, seqlen_k, heads_q, group, the window, diag_shift,
    # qk_scale, softcap_l2, flags (FCL_ATTN_LSE), dropout (none).
    sc = struct.pack("<18q7i2fi5if", *([0, sb, ss, sh] * 4), H * N, N,
                     N, N, H, 1, wl, wr, 0, scale, 0.0, 1, 0, 0, 0, 0, 0, 1.0)
    vals = [q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), lse.data_ptr(),
            0, 0, 0, sc, nf.data_ptr()]
    wg, bm = 32 * a.warps, 16 * a.warps
    grid = ((N + bm - 1) // bm, 1, B * H)
    ms = launch_timed(a, cuda, fn, kinds, vals, grid, wg)
    ref = torch.nn.functional.scaled_dot_product_attention(
        q[:1].transpose(1, 2).double(), k[:1].transpose(1, 2).double(),
        v[:1].transpose(1, 2).double(), is_causal=bool(a.causal)).transpose(1, 2)
    err = (o[:1].double() - ref).abs().max().item()
    flop = 4 * B * H * N * N * D / (2 if a.causal else 1)
    print(f"ncu_ptx.py: {a.name} grid {grid} x {wg}: {ms:.3f} ms, "
          f"{flop / ms / 1e9:.2f} TFLOP/s, max |o - ref| (batch 0) {err:.2e}")
    if not math.isfinite(err) or err > {"f32": 1e-5, "f16": 1e-2, "bf16": 5e-2}[a.dtype]:
        sys.exit("ncu_ptx.py: the output does not match the reference (wrong program?)")


def fastdiv(d):
    """The multiplier and shift of kvcache_decode.c's fastdiv (KV_DIV)."""
    if d < 1:
        return 1, 0
    s = 0
    while (1 << s) < d:
        s += 1
    return (((1 << 32) * ((1 << s) - d)) // d + 1) & 0xffffffff, s


def run_decode(a, cuda, fn, kinds):
    """One new token a sequence (q: batch, 1, heads, head_dim) against a
    contiguous cache of --context keys (cache_seqlens on the device), causal,
    with lse, as src/attention/kvcache_decode.c launches the tensor-core
    kernel: one work-group of --warps warps a (split, kv head), tile and
    sequence; the splits' partial rows in a scratch buffer, their counts in
    a zeroed one. --splits is the launch's num_splits (the host's choice
    shows in FCL_LOG=1's "kvcache:" line)."""
    B, H, Hkv, C, D = a.batch, a.heads, a.heads_kv, a.context, a.head_dim
    g = torch.Generator(device="cuda").manual_seed(1)
    dt = {"f16": torch.float16, "bf16": torch.bfloat16}[a.dtype]
    q = torch.randn(B, 1, H, D, device="cuda", generator=g).to(dt)
    kc, vc = (torch.randn(B, C, Hkv, D, device="cuda", generator=g).to(dt) for _ in range(2))
    o = torch.full_like(q, float("nan"))
    lse = torch.empty(B, H, 1, device="cuda")
    seqlens = torch.full((B,), C, dtype=torch.int32, device="cuda")
    group, ns = H // Hkv, a.splits
    tiles = (group + 15) // 16  # tiles of 16 rows at most (MMA_ROWS)
    counters = torch.zeros(B * Hkv * tiles, dtype=torch.int32, device="cuda")
    parts = torch.empty(ns * B * H * (D + 1), device="cuda")
    scale = 1.0 / math.sqrt(D) * 1.4426950408889634
    views = [0, H * D, H * D, D, 0, C * Hkv * D, Hkv * D, D,
             0, C * Hkv * D, Hkv * D, D, 0, H * D, H * D, D]
    # batch .. rotary_positions (page_size 1, no pages, no rotary), the
    # window (causal), qk_scale, softcap_l2, num_splits .. scale_heads
    # (flags: FCL_ATTN_LSE), the fast divisions.
    ints = [B, 1, H, group, Hkv, C, B, 1, 0, 0, 0, 0, C, 0]
    tail = [ns, a.split_keys, 0, 0, 1, 0]
    for d in (group, Hkv, 1, a.split_keys):
        tail += list(fastdiv(d))
    sc = struct.pack("<26q14i2f14I", *views, B, B * H, *([0] * 8), *ints, scale, 0.0, *tail)
    vals = [q.data_ptr(), kc.data_ptr(), vc.data_ptr(), o.data_ptr(), lse.data_ptr(),
            counters.data_ptr(), parts.data_ptr(), 0, seqlens.data_ptr()] + [0] * 10 + [sc]
    grid = (ns * Hkv, tiles, B)
    ms = launch_timed(a, cuda, fn, kinds, vals, grid, 32 * a.warps)
    qd = q[:, 0].double().view(B, Hkv, group, D)
    s = torch.einsum("bhgd,bchd->bhgc", qd, kc.double()) / math.sqrt(D)
    ref = torch.einsum("bhgc,bchd->bhgd", torch.softmax(s, -1), vc.double()).reshape(B, H, D)
    err = (o[:, 0].double() - ref).abs().max().item()
    gbs = 2 * B * C * Hkv * D * q.element_size() / ms / 1e6
    print(f"ncu_ptx.py: {a.name} grid {grid} x {32 * a.warps}: {ms * 1e3:.2f} us, "
          f"{gbs:.0f} GB/s of K and V, max |o - ref| {err:.2e}")
    if not math.isfinite(err) or err > {"f16": 1e-2, "bf16": 5e-2}[a.dtype]:
        sys.exit("ncu_ptx.py: the output does not match the reference (wrong program?)")


def run_bwd(a, cuda, fn, kinds):
    """The wgmma dK/dV or dQ kernel on lse and delta from PyTorch (f32, per
    batch), as src/attention/attention_bwd_mma.c launches it: dK/dV one
    work-group per 16 * warps keys and (batch, kv head), dQ per 16 * warps
    rows and (batch, head). Heads are not grouped (GQA 1)."""
    B, H, N, D = a.batch, a.heads, a.seqlen, a.head_dim
    g = torch.Generator(device="cuda").manual_seed(1)
    dt = {"f16": torch.float16, "bf16": torch.bfloat16}[a.dtype]
    q, k, v, do = (torch.randn(B, N, H, D, device="cuda", generator=g).to(dt) for _ in range(4))
    scale = 1.0 / math.sqrt(D)
    lse = torch.empty(B, H, N, device="cuda")
    delta = torch.empty(B, H, N, device="cuda")
    mask = torch.ones(N, N, device="cuda", dtype=torch.bool).tril() if a.causal else None
    for b in range(B):  # o in dtype, as the library's forward leaves it
        s = torch.einsum("nhd,mhd->hnm", q[b].float(), k[b].float()) * scale
        if mask is not None:
            s.masked_fill_(~mask, float("-inf"))
        lse[b] = torch.logsumexp(s, -1)
        o = torch.einsum("hnm,mhd->nhd", torch.softmax(s, -1), v[b].float()).to(dt)
        delta[b] = (do[b].float() * o.float()).sum(-1).transpose(0, 1)
        del s, o
    outs = [torch.full_like(q, float("nan")) for _ in range(2 if a.kernel == "dkdv" else 1)]
    nf = torch.zeros(H, dtype=torch.int32, device="cuda")
    t = [0, N * H * D, H * D, D]
    vals = ([x.data_ptr() for x in (q, k, v, do, lse, delta, q, q, q)] + t * 4 + [H * N, N] +
            [N, N, H, 1, N - 1, 0 if a.causal else N - 1, 0, scale * 1.4426950408889634, 0.0,
             scale, 0, nf.data_ptr()])
    for x in outs:
        vals += [x.data_ptr()] + t
    wg, rows = 32 * a.warps, 16 * a.warps
    grid = ((N + rows - 1) // rows, 1, B * H)
    ms = launch_timed(a, cuda, fn, kinds, vals, grid, wg)
    # The reference: batch 0, head 0, in double.
    x0 = [x[:1, :, :1].transpose(1, 2).double().requires_grad_() for x in (q, k, v)]
    o0 = torch.nn.functional.scaled_dot_product_attention(*x0, is_causal=bool(a.causal))
    gq, gk, gv = torch.autograd.grad(o0, x0, do[:1, :, :1].transpose(1, 2).double())
    refs = [gk, gv] if a.kernel == "dkdv" else [gq]
    err = max(((x[:1, :, :1].transpose(1, 2).double() - r).abs().max() / r.abs().max()).item()
              for x, r in zip(outs, refs))
    flop = (8 if a.kernel == "dkdv" else 6) * B * H * N * N * D / (2 if a.causal else 1)
    print(f"ncu_ptx.py: {a.name} grid {grid} x {wg}: {ms:.3f} ms, "
          f"{flop / ms / 1e9:.2f} TFLOP/s, max |got - ref| / max |ref| (batch 0, head 0) {err:.2e}")
    if not math.isfinite(err) or err > 2e-2:
        sys.exit("ncu_ptx.py: the output does not match the reference (wrong program?)")


if __name__ == "__main__":
    main()
