#!/usr/bin/env python3
"""Times PyTorch's scaled_dot_product_attention on CUDA (or, with --device
cpu, on the CPU), for side-by-side runs with fa-bench on the same machine.
Prints the same table (or CSV / JSON).

Each backend (flash, cudnn, efficient, math) is forced with
torch.nn.attention.sdpa_kernel; a backend that cannot run a case is listed
as "unsupported". Time: median of per-iteration CUDA-event timings after a
warmup (on the CPU: wall time of each call, time.perf_counter, on
torch.get_num_threads() threads, set with --threads). TFLOP/s counts
2*B*H*N*N*(D+Dv) (= 4*B*H*N^2*D), halved when causal, as fa-bench does. err(o) is the largest error against a float64 computation
of 64 sampled rows of the output (lse is not returned by SDPA).

--bwd (op bwd) times the backward instead: one forward with the backend,
then torch.autograd.grad of o with a random dout for q, k, v (graph kept),
timed alone; TFLOP/s counts 2.5 times the forward's FLOPs, as fa-bench does.
err(grad) is max over dq, dk, dv of max|got - ref| / max|ref| on the last
(batch, kv head) slice, ref from float64 autograd of the same inputs.

--deterministic asks PyTorch for deterministic algorithms
(torch.use_deterministic_algorithms; cuBLAS, used by the float64 check,
gets CUBLAS_WORKSPACE_CONFIG=:4096:8 where unset): flash's backward then
runs in FlashAttention-2's deterministic mode, the guarantee flashcl's
backward always gives; a backend without one shows as unsupported.

--compare FILE.json (fa-bench --json output, any number of times) prints
fa-bench's rows in the same table first and, after PyTorch's, the ratio
of flashcl's TFLOP/s to each PyTorch backend's on the same case.

Only seqlen_q == seqlen_k is offered: for other lengths PyTorch's is_causal
aligns the mask top-left, flashcl bottom-right.

  python3 bench/py/torch_sdpa.py --batch 4 --heads 32 --seqlen 4096 --head-dim 64 \\
      --dtype f16 --causal 0,1 --backend flash,cudnn
  python3 bench/py/torch_sdpa.py --bwd --batch 4 --heads 32 --seqlen 4096 --head-dim 128 \\
      --dtype f16 --causal 1 --backend flash
  fa-bench --device pocl --batch 1 --heads 8 --seqlen 2048 --dtype f32 --causal 0 \\
      --json > pocl.json
  python3 bench/py/torch_sdpa.py --device cpu --batch 1 --heads 8 --seqlen 2048 --head-dim 64 \\
      --dtype f32 --causal 0 --backend flash,math --compare pocl.json

--decode (op decode) times attention against a KV cache, the counterpart of
fa-bench --op decode: q of shape (B, H, n, D), n = --seqlen new tokens per
sequence (1), against K/V of (B, Hkv, C, D), C = --context cached tokens,
the queries the last n keys (bottom-right). The SDPA backends run with
enable_gqa=True, or, where a backend refuses it, on K/V repeated to H heads
(repeat_interleave, outside the timing; algorithm "repeat-kv"). Causal is
irrelevant for n = 1 (the one query sees every key) and runs unmasked; for
n > 1 SDPA's is_causal aligns top-left, so the efficient backend gets the
bottom-right mask as an explicit attn_mask and flash and cuDNN are listed
as unsupported. Where `import flash_attn` works, flash-attn's
flash_attn_with_kvcache (impl flash-attn) runs too, with its own causal,
on the contiguous cache (B, C, Hkv, D) and, for each --page-size > 0, on a
paged one with shuffled pages through block_table (FlashAttention-2 takes
pages of a multiple of 256 tokens: others show as unsupported);
--num-splits is passed to it. --append (flash-attn) also writes the n new
tokens' k and v to the cache in the call, as fa-bench --append does; the
SDPA rows then attend to C + n keys. GB/s counts the bytes fa-bench counts
(the cache read once; q, o and an f32 lse; with --append k_new and v_new
read and written), so a ratio of GB/s is a ratio of times; --compare (the
JSON of fa-bench --op decode) prints PyTorch's time over flashcl's, case by
case, for each of flashcl's cache layouts.

--decode times each call two ways in the same run, as a model's decode step
makes them (fa-bench --layers is the counterpart):
  us (ms, GB/s, TFLOP/s; also device_us): the GPU's time per call, without
    PyTorch's launch cost: GRAPH_CALLS (20) calls on one layer's cache
    captured in a torch.cuda.CUDAGraph, the median over --iters replays
    (after --warmup) of a replay's CUDA-event time, / 20. The output of the
    last captured call is checked too. Where capture fails, us is empty (the
    reason on stderr).
  wall_us: --layers L (32) layers, each with its own cache of the case's
    shape (random values; the same q), called eagerly back to back with one
    torch.cuda.synchronize a step; the median over --steps N (10) steps
    (after one warm-up step) of the step's wall time / L, host and launch
    costs included. --device cpu has no graph: us is this time.
  --event-timing adds event_us, each call alone between two CUDA events
    (the median of --iters after --warmup): PyTorch's launch gaps between
    the events count as GPU time, so it is like neither figure above (nor
    fa-bench's) and is left out unless asked for.
A layer's cache (cloned and paged for flash-attn, repeated to H heads for
repeat-kv) is made before any timing; L caches must fit in the GPU's memory.
The rows carry layers, steps, wall_us and device_us, fa-bench --layers's
names (CSV: its columns, in its order, then event_us with --event-timing).

  fa-bench --op decode --batch 1 --heads 32 --heads-kv 8 --context 32768 --head-dim 128 \\
      --dtype f16 --page-size 0,16 --json > decode.json
  python3 bench/py/torch_sdpa.py --decode --batch 1 --heads 32 --heads-kv 8 \\
      --context 32768 --head-dim 128 --dtype f16 --page-size 16,256 --compare decode.json
  fa-bench --op decode --layers 32 --steps 20 --batch 1 --heads 32 --heads-kv 8 \\
      --context 4096 --head-dim 128 --dtype f16 --json > loop.json
  python3 bench/py/torch_sdpa.py --decode --layers 32 --steps 20 --batch 1 --heads 32 \\
      --heads-kv 8 --context 4096 --head-dim 128 --dtype f16 --backend cudnn,flash \\
      --compare loop.json
"""
import argparse
import json
import math
import os
import platform
import re
import statistics
import sys
import time
import warnings

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from cuda_timing import graph_per_call_us, loop_per_call_us

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
BACKENDS = {
    "flash": SDPBackend.FLASH_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "math": SDPBackend.MATH,
}
# fa-bench's CSV columns, in its order, so that the two outputs concatenate.
FIELDS = ["op", "impl", "device", "batch", "heads", "heads_kv", "seqlen_q", "seqlen_k",
          "head_dim", "head_dim_v", "dtype", "causal", "algorithm", "ms", "tflops", "gbps",
          "err_o", "err_lse", "err_grad", "check", "wall_ms", "alu_pct", "bw_pct", "gain",
          "peak_gflops", "peak_gbps"]
# fa-bench --op decode's extra members (CSV: extra columns when it runs decode).
DECODE_FIELDS = ["page_size", "num_splits", "append", "context", "us"]
# fa-bench --layers's extra members (CSV: after the decode columns); --decode fills
# layers, steps, wall_us (the eager loop) and device_us (the CUDA graph).
LOOP_FIELDS = ["layers", "steps", "kernels_per_call", "timing_events", "wall_us", "device_us",
               "host_us", "launch_us", "launch_event_us", "lib_host_us"]
GRAPH_CALLS = 20  # --decode: calls captured in one CUDA graph
CHECK_ROWS = 64
_FLASH_ATTN = []


def flash_attn_with_kvcache():
    """flash-attn's flash_attn_with_kvcache, or None where `import flash_attn` fails."""
    if not _FLASH_ATTN:
        try:
            from flash_attn import flash_attn_with_kvcache as fn
        except Exception as e:  # ImportError, or a build that does not match this torch
            print(f"torch_sdpa: flash-attn is not used: {e}", file=sys.stderr)
            fn = None
        _FLASH_ATTN.append(fn)
    return _FLASH_ATTN[0]


def int_list(s):
    return [int(x) for x in s.split(",") if x]


def name_list(choices):
    def parse(s):
        names = [x for x in s.split(",") if x]
        bad = [x for x in names if x not in choices]
        if bad or not names:
            raise argparse.ArgumentTypeError(f"expected a list of {', '.join(choices)}")
        return names
    return parse


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--decode", action="store_true",
                   help="attention of --seqlen new tokens against a KV cache of --context")
    p.add_argument("--context", type=int_list, default=[4096],
                   help="--decode: cached tokens per sequence (comma list)")
    p.add_argument("--page-size", type=int_list, default=[0],
                   help="--decode: flash-attn also on a paged cache of this page size")
    p.add_argument("--num-splits", type=int, default=0, help="--decode: flash-attn's num_splits")
    p.add_argument("--append", action="store_true",
                   help="--decode: flash-attn appends the new tokens' k, v to the cache")
    p.add_argument("--layers", type=int, default=32,
                   help="--decode: layers of the eager loop, each with its own cache (32)")
    p.add_argument("--steps", type=int, default=10,
                   help="--decode: timed steps of the eager loop (10)")
    p.add_argument("--event-timing", action="store_true",
                   help="--decode: also each call timed alone with CUDA events (event_us), "
                   "PyTorch's launch cost included")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--heads-kv", "--kv-heads", type=int, default=None,
                   help="GQA: kv heads (= --heads)")
    p.add_argument("--seqlen", type=int_list, default=None,
                   help="comma list (4096; --decode: new tokens, 1)")
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--head-dim-v", type=int, default=None, help="(= --head-dim)")
    p.add_argument("--dtype", type=name_list(DTYPES), default=["f16"], help="f32,f16,bf16")
    p.add_argument("--causal", type=int_list, default=None, help="0 and/or 1 (0,1; --decode: 1)")
    p.add_argument("--backend", type=name_list(list(BACKENDS) + ["flash-attn"]), default=None,
                   help="flash,cudnn,efficient,math (CUDA: flash,cudnn,efficient; CPU: "
                   "flash,math); --decode: also flash-attn (the default where it imports)")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--threads", type=int, default=None, help="CPU threads (torch's default)")
    p.add_argument("--compare", action="append", default=[], metavar="FILE.json",
                   help="fa-bench --json output: print its rows and the ratios")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--dropout", type=float, default=0.0, metavar="P",
                   help="SDPA's dropout_p (flash: FA2's dropout); outputs are then not checked "
                        "against a reference (the mask is PyTorch's own)")
    p.add_argument("--bwd", action="store_true",
                   help="time the backward (dq, dk, dv) instead of the forward")
    p.add_argument("--deterministic", action="store_true",
                   help="torch.use_deterministic_algorithms(True) (impl sdpa-NAME-det): the "
                   "backends' deterministic backward, where they have one, as flashcl's always is")
    p.add_argument("--f32-precision", choices=["highest", "high", "medium"], default="highest",
                   help="torch.set_float32_matmul_precision for f32 rows (and TF32 in cuDNN "
                   "from high on), as fa-bench --f32-precision")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--csv", action="store_true")
    out.add_argument("--json", action="store_true")
    a = p.parse_args()
    a.heads_kv = a.heads_kv or a.heads
    if a.seqlen is None:
        a.seqlen = [1] if a.decode else [4096]
    if a.causal is None:
        a.causal = [1] if a.decode else [0, 1]
    if a.backend is None:
        a.backend = ["flash", "cudnn", "efficient"] if a.device == "cuda" else ["flash", "math"]
        if a.decode and a.device == "cuda" and flash_attn_with_kvcache():
            a.backend.append("flash-attn")
    if "flash-attn" in a.backend and not a.decode:
        p.error("--backend flash-attn is for --decode only")
    if a.decode and a.bwd:
        p.error("--decode times a forward call: no --bwd")
    if any(c < 0 for c in a.context) or any(x < 0 for x in a.page_size) or a.num_splits < 0:
        p.error("--context, --page-size and --num-splits take values >= 0")
    a.head_dim_v = a.head_dim_v or a.head_dim
    if a.heads % a.heads_kv:
        p.error("--heads must be a multiple of --heads-kv")
    if a.iters < 1 or a.warmup < 0 or any(c not in (0, 1) for c in a.causal):
        p.error("--iters >= 1, --warmup >= 0, --causal 0 or 1")
    if a.layers < 1 or a.steps < 1:
        p.error("--layers and --steps take values >= 1")
    return a


def flops(r):
    f = 2.0 * r["batch"] * r["heads"] * r["seqlen_q"] * r["seqlen_k"] * (
        r["head_dim"] + r["head_dim_v"])
    return f / 2 if r["causal"] else f


def max_error(q, k, v, o, causal, gen):
    """Largest |o - ref| over sampled rows; ref computed in float64."""
    b_, h_, n, _ = q.shape
    group = h_ // k.shape[1]
    err = 0.0
    for j in range(CHECK_ROWS):
        b = int(torch.randint(b_, (1,), generator=gen))
        h = int(torch.randint(h_, (1,), generator=gen))
        i = j * (n - 1) // (CHECK_ROWS - 1)
        keys = i + 1 if causal else n
        qi = q[b, h, i].double()
        kk, vv = k[b, h // group, :keys].double(), v[b, h // group, :keys].double()
        p = torch.softmax((kk @ qi) / math.sqrt(q.shape[-1]), dim=0)
        err = max(err, (o[b, h, i].double() - p @ vv).abs().max().item())
    return err


def grad_error(q, k, v, dout, grads, causal):
    """Max over dq, dk, dv of max|got - ref| / max|ref| on the last (batch, kv head)
    slice: its query heads and its key/value head, ref from float64 autograd."""
    b, hk = q.shape[0] - 1, k.shape[1] - 1
    group = q.shape[1] // k.shape[1]
    heads = slice(hk * group, (hk + 1) * group)
    qs = q[b, heads].detach().double().requires_grad_(True)  # [group, N, D]
    ks = k[b, hk].detach().double().requires_grad_(True)     # [N, D]
    vs = v[b, hk].detach().double().requires_grad_(True)     # [N, Dv]
    s = (qs @ ks.T) / math.sqrt(q.shape[-1])
    if causal:  # seqlen_q == seqlen_k: top-left and bottom-right alignment agree
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1),
                          float("-inf"))
    o = torch.softmax(s, dim=-1) @ vs
    ref = torch.autograd.grad(o, (qs, ks, vs), dout[b, heads].double())
    got = (grads[0][b, heads], grads[1][b, hk], grads[2][b, hk])
    return max(((g.double() - r).abs().max() / r.abs().max()).item() for g, r in zip(got, ref))


def sync(dev):
    if dev == "cuda":
        torch.cuda.synchronize()


def time_ms(fn, dev):
    """One call's time in ms: CUDA events on the GPU, wall time on the CPU."""
    if dev == "cpu":
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def run_case(a, backend, seqlen, dtype, causal, device):
    r = dict(op="bwd" if a.bwd else "fwd",
             impl=f"sdpa-{backend}" + ("-det" if a.deterministic else ""), device=device,
             batch=a.batch, heads=a.heads, heads_kv=a.heads_kv, seqlen_q=seqlen,
             seqlen_k=seqlen, head_dim=a.head_dim, head_dim_v=a.head_dim_v, dtype=dtype,
             causal=causal, algorithm=None, ms=None, tflops=None, gbps=None, err_o=None,
             err_lse=None, err_grad=None, check="-" if a.dropout == 0 else "dropout",
             dropout=a.dropout, wall_ms=None, alu_pct=None, bw_pct=None,
             gain=None, peak_gflops=None, peak_gbps=None)
    dev = a.device
    gen = torch.Generator(device=dev).manual_seed(1)
    t = DTYPES[dtype]
    q = torch.randn(a.batch, a.heads, seqlen, a.head_dim, device=dev, dtype=t, generator=gen)
    k = torch.randn(a.batch, a.heads_kv, seqlen, a.head_dim, device=dev, dtype=t,
                    generator=gen)
    v = torch.randn(a.batch, a.heads_kv, seqlen, a.head_dim_v, device=dev, dtype=t,
                    generator=gen)
    extra = {"enable_gqa": True} if a.heads_kv != a.heads else {}
    if a.dropout > 0:
        extra["dropout_p"] = a.dropout
    if a.bwd:
        for x in (q, k, v):
            x.requires_grad_(True)

    def call():
        return F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal), **extra)

    try:
        with sdpa_kernel([BACKENDS[backend]]), warnings.catch_warnings(record=True) as why:
            warnings.simplefilter("always")
            o = call()
            sync(dev)
            if a.bwd:
                dout = torch.randn(o.shape, device=dev, dtype=t, generator=gen)
                grads = torch.autograd.grad(o, (q, k, v), dout, retain_graph=True)
                sync(dev)
                if a.dropout == 0:
                    r["err_grad"] = grad_error(q, k, v, dout, grads, causal)
                del grads

                def timed():
                    torch.autograd.grad(o, (q, k, v), dout, retain_graph=True)
            else:
                if a.dropout == 0:
                    r["err_o"] = max_error(q, k, v, o, causal,
                                           torch.Generator().manual_seed(4))
                timed = call
            for _ in range(a.warmup):
                timed()
            times = [time_ms(timed, dev) for _ in range(a.iters)]
    except RuntimeError as e:
        # PyTorch gives the reasons a backend refused as warnings, the error says only
        # "No available kernel".
        reasons = [re.sub(r"\s*\(Triggered internally.*", "", str(w.message)) for w in why]
        reasons = [x for x in reasons if "not used because" not in x and "disabled" not in x]
        print(f"torch_sdpa: {backend} {dtype} causal={causal}: unsupported: "
              f"{'; '.join(reasons) or str(e).splitlines()[0]}", file=sys.stderr)
        r["check"] = "unsupported"
        return r
    finally:
        del q, k, v
        o = dout = timed = None
        if dev == "cuda":
            torch.cuda.empty_cache()
    r["ms"] = statistics.median(times)
    r["tflops"] = (2.5 if a.bwd else 1.0) * flops(r) / (r["ms"] * 1e9)
    for f in ("ms", "tflops", "err_o", "err_grad"):  # six significant digits, as fa-bench
        if r[f] is not None:
            r[f] = float(f"{r[f]:.6g}")
    return r


def decode_pairs(n, keys, causal):
    """(query, key) pairs visible to the n last positions of `keys` (bottom-right)."""
    if not causal:
        return n * keys
    return sum(min(max(i + keys - n + 1, 0), keys) for i in range(n))


def decode_error(q, k, v, o, causal, gen):
    """Largest |o - ref| over sampled rows; all (B, seq, heads, dim); ref in float64."""
    b_, n, h_, d = q.shape
    keys, group = k.shape[1], h_ // k.shape[2]
    err = 0.0
    for j in range(CHECK_ROWS):
        b = int(torch.randint(b_, (1,), generator=gen))
        h = int(torch.randint(h_, (1,), generator=gen))
        i = j * (n - 1) // (CHECK_ROWS - 1)
        seen = min(max(i + keys - n + 1, 0), keys) if causal else keys
        ref = torch.zeros(v.shape[-1], dtype=torch.float64, device=v.device)
        if seen:
            kk, vv = k[b, :seen, h // group].double(), v[b, :seen, h // group].double()
            ref = torch.softmax((kk @ q[b, i, h].double()) / math.sqrt(d), dim=0) @ vv
        err = max(err, (o[b, i, h].double() - ref).abs().max().item())
    return err


def flash_attn_maker(a, fa, q, context, new, causal, page):
    """make(k, v) -> a call of flash_attn_with_kvcache on that layer's cache ((B, keys,
    Hkv, D) tensors: copied, and packed into shuffled pages with --page-size, here,
    outside any timing); the same q, cache_seqlens and block table for every layer."""
    b_, keys, dev = q.shape[0], context + new if a.append else context, q.device
    extra = {"cache_seqlens": torch.full((b_,), context, dtype=torch.int32, device=dev),
             "causal": bool(causal), "num_splits": a.num_splits, "return_softmax_lse": True}
    pps = max(1, -(-keys // page)) if page else 0
    if page:  # pages in shuffled order: sequence b's page p is block_table[b, p]
        perm = torch.randperm(b_ * pps, generator=torch.Generator().manual_seed(8))
        extra["block_table"] = perm.view(b_, pps).to(device=dev, dtype=torch.int32)
        perm = perm.to(dev)

    def make(k, v):
        kc, vc = k.clone(), v.clone()
        if a.append:  # the call writes them: what is there before must not count
            kc[:, context:] = 0
            vc[:, context:] = 0
        if page:
            pad = lambda x: F.pad(x, (0, 0, 0, 0, 0, pps * page - keys))
            kp = torch.empty(b_ * pps, page, *k.shape[2:], device=dev, dtype=k.dtype)
            vp = torch.empty(b_ * pps, page, *v.shape[2:], device=dev, dtype=v.dtype)
            kp[perm] = pad(kc).reshape(kp.shape)
            vp[perm] = pad(vc).reshape(vp.shape)
            kc, vc = kp, vp
        kn = k[:, context:].contiguous() if a.append else None
        vn = v[:, context:].contiguous() if a.append else None

        def call():
            out = fa(q, kc, vc, k=kn, v=vn, **extra)
            return out[0] if isinstance(out, tuple) else out
        return call
    return make


def sdpa_maker(q, mask, kv_heads):
    """make(k, v) -> a call of SDPA (under the caller's sdpa_kernel) on that layer's
    cache ((B, keys, Hkv, D)); its output is (B, H, new, D). kv_heads "gqa":
    enable_gqa=True; "repeat-kv": K/V repeated to every query head here, outside any
    timing; "mha"."""
    qs = q.transpose(1, 2)
    gqa = {"enable_gqa": True} if kv_heads == "gqa" else {}

    def make(k, v):
        if kv_heads == "repeat-kv":
            group = q.shape[2] // k.shape[2]
            k, v = k.repeat_interleave(group, 2), v.repeat_interleave(group, 2)
        kt, vt = k.transpose(1, 2), v.transpose(1, 2)
        return lambda: F.scaled_dot_product_attention(qs, kt, vt, attn_mask=mask, **gqa)
    return make


def decode_case(a, impl, device, context, new, dtype, causal, page):
    """One row of --decode: impl sdpa-BACKEND (page 0) or flash-attn (page >= 0)."""
    keys = context + new if a.append else context
    b_, h_, hkv, d, dv = a.batch, a.heads, a.heads_kv, a.head_dim, a.head_dim_v
    r = dict(op="decode", impl=impl, device=device, batch=b_, heads=h_, heads_kv=hkv,
             seqlen_q=new, seqlen_k=keys, head_dim=d, head_dim_v=dv, dtype=dtype,
             causal=causal, algorithm=None, ms=None, tflops=None, gbps=None, err_o=None,
             err_lse=None, err_grad=None, check="-", wall_ms=None, alu_pct=None, bw_pct=None,
             gain=None, peak_gflops=None, peak_gbps=None, page_size=page,
             num_splits=a.num_splits if impl == "flash-attn" else None,
             append=int(a.append), context=context, us=None, layers=a.layers,
             steps=a.steps, wall_us=None, device_us=None)
    if a.event_timing:
        r["event_us"] = None
    dev, t = a.device, DTYPES[dtype]
    es = torch.empty((), dtype=t).element_size()
    nbytes = es * (b_ * hkv * (context + 2 * new * a.append) * (d + dv) + b_ * new * h_ * (d + dv)) \
        + 4 * b_ * h_ * new  # as fa-bench: the cache once, q, o, an f32 lse, the append
    flop = 2.0 * (d + dv) * decode_pairs(new, keys, causal) * b_ * h_
    gen = torch.Generator(device=dev).manual_seed(1)
    # (batch, seq, heads, dim), as flash-attn takes them; SDPA gets transposed views.
    q = torch.randn(b_, new, h_, d, device=dev, dtype=t, generator=gen)
    k = torch.randn(b_, keys, hkv, d, device=dev, dtype=t, generator=gen)
    v = torch.randn(b_, keys, hkv, dv, device=dev, dtype=t, generator=gen)
    calls = []

    def unsupported(why):
        print(f"torch_sdpa: decode {impl} {dtype} new={new} context={context} page={page} "
              f"causal={causal}: unsupported: {why}", file=sys.stderr)
        r["check"] = "unsupported"
        return r

    def measure(make, to_bshd):
        """Checks layer 0's call (k, v), then times it: CUDA graph replay, the eager loop
        over --layers layers (layer 0 and others of fresh random values), and with
        --event-timing the per-call CUDA events. to_bshd: the output as (B, new, H, D)."""
        def error_of(o):
            return decode_error(q, k, v, to_bshd(o), causal, torch.Generator().manual_seed(4))
        call = make(k, v)
        o = call()
        sync(dev)
        r["err_o"] = error_of(o)
        del o
        if dev == "cuda":
            try:
                r["device_us"], err = graph_per_call_us(call, GRAPH_CALLS, a.iters, a.warmup,
                                                        error_of)
                r["err_o"] = max(r["err_o"], err)
            except RuntimeError as e:  # the call cannot be captured: the loop's time stays
                print(f"torch_sdpa: decode {impl} {dtype} context={context} page={page}: "
                      f"no CUDA graph: {str(e).splitlines()[0]}", file=sys.stderr)
        if a.event_timing:
            for _ in range(a.warmup):
                call()
            r["event_us"] = statistics.median(time_ms(call, dev) for _ in range(a.iters)) * 1e3
        layer_gen = torch.Generator(device=dev).manual_seed(2)
        calls.append(call)
        for _ in range(a.layers - 1):  # each layer's own cache, made outside the timing
            calls.append(make(torch.randn(k.shape, device=dev, dtype=t, generator=layer_gen),
                              torch.randn(v.shape, device=dev, dtype=t, generator=layer_gen)))
        r["wall_us"] = loop_per_call_us(calls, a.steps, lambda: sync(dev))

    try:
        if impl == "flash-attn":
            fa = flash_attn_with_kvcache()
            if fa is None:
                return unsupported("import flash_attn failed")
            measure(flash_attn_maker(a, fa, q, context, new, causal, page), lambda o: o)
        else:
            if causal and new > 1 and impl != "sdpa-efficient":
                return unsupported("SDPA's is_causal aligns top-left; bottom-right needs "
                                   "an attn_mask, which only the efficient backend is given")
            mask = None
            if causal and new > 1:  # bottom-right: query i sees keys j <= i + keys - new
                seen = torch.ones(new, keys, dtype=torch.bool, device=dev).tril(keys - new)
                mask = torch.zeros(new, keys, dtype=t, device=dev).masked_fill(~seen,
                                                                             float("-inf"))
            backend = BACKENDS[impl[len("sdpa-"):]]
            with sdpa_kernel([backend]), warnings.catch_warnings(record=True) as why:
                warnings.simplefilter("always")
                kv_heads = "gqa" if hkv != h_ else "mha"
                try:
                    sdpa_maker(q, mask, kv_heads)(k, v)()
                    sync(dev)
                except RuntimeError:
                    if hkv == h_:
                        raise
                    # The backend refused GQA: K/V repeated to every query head.
                    kv_heads = r["algorithm"] = "repeat-kv"
                measure(sdpa_maker(q, mask, kv_heads), lambda o: o.transpose(1, 2))
    except (RuntimeError, TypeError, ValueError) as e:
        reasons = []
        if impl != "flash-attn" and "why" in locals():
            reasons = [re.sub(r"\s*\(Triggered internally.*", "", str(w.message)) for w in why]
            reasons = [x for x in reasons if "not used because" not in x and "disabled" not in x]
        return unsupported("; ".join(dict.fromkeys(reasons)) or str(e).splitlines()[0])
    finally:
        del q, k, v, calls
        if dev == "cuda":
            torch.cuda.empty_cache()
    # us (and the rates): the GPU's time per call from the graph; on the CPU, the loop's.
    us = r["device_us"] if dev == "cuda" else r["wall_us"]
    if us is not None:
        r.update(ms=us * 1e-3, us=us, gbps=nbytes / (us * 1e3), tflops=flop / (us * 1e6))
    for f in ("ms", "us", "gbps", "tflops", "err_o", "wall_us", "device_us", "event_us"):
        if r.get(f) is not None:  # six significant digits, as fa-bench
            r[f] = float(f"{r[f]:.6g}")
    return r


def decode_rows(a, device):
    """Every --decode case: the SDPA backends, then flash-attn contiguous and paged."""
    for context in a.context:
        for new in a.seqlen:
            for dtype in a.dtype:
                for causal in a.causal:
                    for backend in a.backend:
                        if backend != "flash-attn":
                            yield decode_case(a, f"sdpa-{backend}", device, context, new,
                                              dtype, causal, 0)
                            continue
                        for page in dict.fromkeys([0] + [p for p in a.page_size if p]):
                            yield decode_case(a, "flash-attn", device, context, new, dtype,
                                              causal, page)


def fmt(x, spec, width):
    return format(x, spec).rjust(width) if x is not None else "-".rjust(width)


HEADER = (f"{'op':<9} {'impl':<14} {'B':>4} {'H':>4} {'Hkv':>4} {'Nq':>6} {'Nk':>6} "
          f"{'D':>4} {'Dv':>4} {'dtype':<5} {'causal':>6} {'algo':<9} {'ms':>10} "
          f"{'TFLOP/s':>9} {'GB/s':>9} {'%alu':>6} {'%bw':>6} {'gain':>7} "
          f"{'err(o)':>9} {'err(lse)':>9} {'err(grad)':>9}  check")


def decode_header(a):
    return (f"{'op':<9} {'impl':<14} {'B':>4} {'H':>4} {'Hkv':>4} {'new':>6} {'keys':>7} "
            f"{'D':>4} {'Dv':>4} {'dtype':<5} {'causal':>6} {'cache':<14} {'splits':>6} "
            f"{'us':>10} {'wall_us':>10} " + (f"{'event_us':>10} " if a.event_timing else "") +
            f"{'GB/s':>9} {'%bw':>6} {'TFLOP/s':>9} {'err(o)':>9} {'err(lse)':>9}  check")


def decode_fields(a, r=None):
    """The members of a decode row: every column for CSV (r None), else those r has."""
    extra = LOOP_FIELDS + ["event_us"]
    if r is None:
        return DECODE_FIELDS + LOOP_FIELDS + (["event_us"] if a.event_timing else [])
    return DECODE_FIELDS + [f for f in extra if f in r]


def print_row(a, r, first):
    decode = r.get("op") == "decode"
    if a.csv:
        fields = FIELDS + decode_fields(a) if a.decode else FIELDS
    else:
        fields = FIELDS + decode_fields(a, r) if decode else FIELDS
    if a.json and r.get("dropout"):  # as fa-bench's JSON: only where there is dropout
        fields = fields + ["dropout"]
    r = {f: r.get(f) for f in fields}
    if a.csv:
        vals = ["" if r[f] is None else f'"{r[f]}"' if f == "device" else r[f] for f in fields]
        print(",".join(str(x) for x in vals))
    elif a.json:
        print(("" if first else ",\n") + "  " + json.dumps(r), end="")
    elif decode:
        cache = (f"page{r['page_size']}" if r["page_size"] else "contig") + \
            ("+append" if r["append"] else "") + \
            ("+repeat-kv" if r["algorithm"] == "repeat-kv" else "")
        splits = "-" if r["num_splits"] is None else str(r["num_splits"] or "auto")
        print(f"{r['op']:<9} {r['impl']:<14} {r['batch']:4d} {r['heads']:4d} "
              f"{r['heads_kv']:4d} {r['seqlen_q']:6d} {r['seqlen_k']:7d} {r['head_dim']:4d} "
              f"{r['head_dim_v']:4d} {r['dtype']:<5} {r['causal']:6d} {cache:<14} {splits:>6} "
              f"{fmt(r['us'], '.2f', 10)} {fmt(r.get('wall_us'), '.2f', 10)} " +
              (f"{fmt(r.get('event_us'), '.2f', 10)} " if a.event_timing else "") +
              f"{fmt(r['gbps'], '.2f', 9)} "
              f"{fmt(r['bw_pct'], '.1f', 6)} {fmt(r['tflops'], '.4f', 9)} "
              f"{fmt(r['err_o'], '.2e', 9)} {fmt(r['err_lse'], '.2e', 9)}  {r['check']}")
    else:
        causal = "-" if r["causal"] is None else str(r["causal"])
        gain = "-" if r["gain"] is None else f"{r['gain']:.2f}x"
        print(f"{r['op']:<9} {r['impl']:<14} {r['batch']:4d} {r['heads']:4d} "
              f"{r['heads_kv']:4d} {r['seqlen_q']:6d} {r['seqlen_k']:6d} {r['head_dim']:4d} "
              f"{r['head_dim_v']:4d} {r['dtype']:<5} {causal:>6} "
              f"{r['algorithm'] or '-':<9} {fmt(r['ms'], '.3f', 10)} "
              f"{fmt(r['tflops'], '.4f', 9)} {fmt(r['gbps'], '.2f', 9)} "
              f"{fmt(r['alu_pct'], '.1f', 6)} {fmt(r['bw_pct'], '.1f', 6)} {gain:>7} "
              f"{fmt(r['err_o'], '.2e', 9)} {fmt(r['err_lse'], '.2e', 9)} "
              f"{fmt(r['err_grad'], '.2e', 9)}  {r['check']}")
    sys.stdout.flush()


CASE = ("op", "batch", "heads", "heads_kv", "seqlen_q", "seqlen_k", "head_dim", "head_dim_v",
        "dtype", "causal")


def print_decode_ratios(a, fab_rows, torch_rows, out):
    """flashcl's time against each PyTorch row's on the same case, every cache layout."""
    key = CASE + ("append",)
    flashcl = {}
    for r in fab_rows:
        if r.get("op") == "decode" and r.get("impl") == "flashcl" and r.get("us"):
            flashcl.setdefault(tuple(r.get(f) for f in key), []).append(r)
    lines = []
    layout = lambda r: (f"page {r['page_size']}" if r.get("page_size") else "contiguous") + (
        f", splits {r['num_splits']}" if r.get("num_splits") else "") + (
        f", {r['layers']} layers" if r.get("layers") else "")
    for r in torch_rows:
        for f in flashcl.get(tuple(r.get(x) for x in key), []) if r["us"] else []:
            line = (f"decode {r['dtype']} B={r['batch']} H={r['heads']} Hkv={r['heads_kv']} "
                    f"new={r['seqlen_q']} keys={r['seqlen_k']} D={r['head_dim']}: flashcl "
                    f"({layout(f)}) {f['us']:.4g} us, {r['impl']} ({layout(r)}) "
                    f"{r['us']:.4g} us -> {r['us'] / f['us']:.3f}x")
            if f.get("device_b2b_us"):  # flashcl's calls back to back, as a graph replays
                line += (f"; flashcl back to back {f['device_b2b_us']:.4g} us -> "
                         f"{r['us'] / f['device_b2b_us']:.3f}x")
            if f.get("wall_us") and r.get("wall_us"):  # both looped over layers
                line += (f"; wall per call {f['wall_us']:.4g} / {r['wall_us']:.4g} us -> "
                         f"{r['wall_us'] / f['wall_us']:.3f}x")
            lines.append(line)
    if lines:
        print("\nratios (PyTorch us / flashcl us = flashcl GB/s / PyTorch GB/s, device "
              "time per call; with fa-bench --layers also the wall time per call of the "
              "loops; above 1: flashcl is faster)", file=out)
        print("\n".join(lines), file=out)
    elif a.compare:
        print("torch_sdpa: no decode case of --compare matches PyTorch's rows", file=sys.stderr)
    out.flush()


def print_ratios(a, fab_rows, torch_rows):
    """flashcl's TFLOP/s over each PyTorch backend's, case by case."""
    out = sys.stderr if a.csv or a.json else sys.stdout
    if a.decode:
        return print_decode_ratios(a, fab_rows, torch_rows, out)
    flashcl = {tuple(r[f] for f in CASE): r for r in fab_rows
               if r.get("impl") == "flashcl" and r.get("tflops")}
    lines = []
    for r in torch_rows:
        f = flashcl.get(tuple(r[k] for k in CASE))
        if f is None or not r["tflops"]:
            continue
        lines.append(f"{r['op']} {r['dtype']} B={r['batch']} H={r['heads']} N={r['seqlen_q']} "
                     f"D={r['head_dim']} causal={r['causal']}: flashcl {f['tflops']:.4g}, "
                     f"{r['impl']} {r['tflops']:.4g} TFLOP/s -> {f['tflops'] / r['tflops']:.3f}x")
    if lines:
        print("\nratios (flashcl TFLOP/s / PyTorch TFLOP/s; above 1: flashcl is faster)", file=out)
        print("\n".join(lines), file=out)
    elif a.compare:
        print("torch_sdpa: no case of --compare matches PyTorch's rows", file=sys.stderr)
    out.flush()


def device_name(a):
    if a.device == "cuda":
        return f"{torch.cuda.get_device_name()} / torch {torch.__version__}"
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(x.split(":", 1)[1].strip() for x in f if x.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{cpu}, {torch.get_num_threads()} threads / torch {torch.__version__}"


def main():
    a = parse_args()
    torch.set_float32_matmul_precision(a.f32_precision)
    torch.backends.cudnn.allow_tf32 = a.f32_precision != "highest"
    if a.device == "cuda" and not torch.cuda.is_available():
        sys.exit("torch_sdpa: CUDA is not available (--device cpu for the CPU)")
    if a.threads:
        torch.set_num_threads(a.threads)
    if a.deterministic:  # an error, not a warning, where a backend has no such algorithm
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True)
    fab_rows = []
    for path in a.compare:
        with open(path) as f:
            fab_rows += json.load(f)
    device = device_name(a)
    header = decode_header(a) if a.decode else HEADER
    if a.csv:
        print(",".join(FIELDS + decode_fields(a) if a.decode else FIELDS))
    elif a.json:
        print("[")
    first = True
    if not a.csv and not a.json and fab_rows:
        print(f"device: {fab_rows[0]['device']} (fa-bench, from {', '.join(a.compare)})")
        print(header)
    for r in fab_rows:
        print_row(a, r, first)
        first = False
    if not a.csv and not a.json:
        print(f"device: {device}")
        print(header)
    torch_rows = []
    for r in decode_rows(a, device) if a.decode else ():
        torch_rows.append(r)
        print_row(a, r, first)
        first = False
    for seqlen in a.seqlen if not a.decode else ():
        for dtype in a.dtype:
            for causal in a.causal:
                for backend in a.backend:
                    r = run_case(a, backend, seqlen, dtype, causal, device)
                    torch_rows.append(r)
                    print_row(a, r, first)
                    first = False
    if a.json:
        print("\n]")
    print_ratios(a, fab_rows, torch_rows)


if __name__ == "__main__":
    main()
