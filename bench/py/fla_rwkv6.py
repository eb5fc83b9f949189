#!/usr/bin/env python3
"""flash-linear-attention's RWKV6 (chunk_rwkv6, fused_recurrent_rwkv6) timed
on the shapes of fa-bench's rwkv6-fwd and rwkv6-bwd, for side-by-side rows.

The inputs are those of bench/rwkv6_bench.c: dense [B, T, H, K] tensors,
r, k, v, u and dout uniform on [-1, 1), w = -exp(N(-3, 1)) (log decay, as
fla takes it), no initial or final state, the default scale 1/sqrt(K).

  fwd  the forward call, under torch.no_grad();
  bwd  the backward alone: torch.autograd.grad(o, (r, k, v, w, u), dout,
       retain_graph=True) after one forward with gradients (fla's backward
       recomputes its chunk states, as flashcl's does);
each the median of --iters CUDA-event timings after --warmup calls.

fla runs from bench/vendor (bench/suites/rwkv6.sh unpacks the wheels downloaded
there and puts them on PYTHONPATH), or from an installed
flash-linear-attention / fla-core.

  python3 bench/py/fla_rwkv6.py --batch 8 --heads 32 --seqlen 4096 --head-dim 64 \
      --dtype bf16,f32 [--impl chunk,fused_recurrent] [--json]
"""
import argparse
import sys

import torch

import fla_sweep
from cuda_timing import timed

try:
    from fla.ops.rwkv6 import chunk_rwkv6, fused_recurrent_rwkv6
except ImportError as e:  # the message says where fla is looked for
    sys.exit(f"fla_rwkv6.py: cannot import fla ({e}); PYTHONPATH={sys.path[:3]}...")

IMPLS = {"chunk": chunk_rwkv6, "fused_recurrent": fused_recurrent_rwkv6}
DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def inputs(b, t, h, k, v, dt, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)

    def uni(*shape):
        return (torch.rand(*shape, generator=g, device="cuda") * 2 - 1).to(dt)

    r, kk, vv, do = uni(b, t, h, k), uni(b, t, h, k), uni(b, t, h, v), uni(b, t, h, v)
    w = (-torch.exp(torch.randn(b, t, h, k, generator=g, device="cuda") - 3.0)).to(dt)
    return r, kk, vv, w, uni(h, k), do


def run(impl, b, t, h, k, v, dtn, iters, warmup):
    f = IMPLS[impl]
    r, kk, vv, w, u, do = inputs(b, t, h, k, v, DTYPES[dtn])
    with torch.no_grad():
        fwd = timed(lambda: f(r, kk, vv, w, u), iters, warmup)
    xs = [x.detach().clone().requires_grad_(True) for x in (r, kk, vv, w, u)]
    o, _ = f(*xs)
    bwd = timed(lambda: torch.autograd.grad(o, xs, do, retain_graph=True), iters, warmup)
    del o, xs
    torch.cuda.empty_cache()
    return {"impl": "fla_" + impl, "dtype": dtn, "batch": b, "seqlen": t, "heads": h,
            "head_dim": k, "head_dim_v": v, "fwd_ms": fwd, "bwd_ms": bwd}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    fla_sweep.add_args(ap)
    a = ap.parse_args()
    fla_sweep.sweep(
        a, "fla_rwkv6.py", f"{'fwd ms':>9} {'bwd ms':>9}",
        lambda impl, t, dtn, v: run(impl, a.batch, t, a.heads, a.head_dim, v, dtn, a.iters,
                                    a.warmup),
        lambda row: f"{row['fwd_ms']:>9.3f} {row['bwd_ms']:>9.3f}")


if __name__ == "__main__":
    main()
