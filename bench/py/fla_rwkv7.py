#!/usr/bin/env python3
"""flash-linear-attention's RWKV7 (chunk_rwkv7, fused_recurrent_rwkv7) timed
on the shapes of fa-bench's rwkv7-fwd and rwkv7-bwd, for side-by-side rows.

The inputs are those of bench/rwkv7_bench.c (fla's tests/ops/test_rwkv7.py
makes them so): dense [B, T, H, K] tensors, r, k, v and dout uniform on
[-1, 1), w uniform on [-exp(-0.5), 0) (log decay, the models' range, as fla
takes it), a = -kk and b = kk * U(0, 0.1) with kk L2-normalised over K; an
initial state h0 (f32 [B, H, K, V], U(-1, 1)) and the final state returned;
the scale 1/sqrt(K), as fa-bench's default.

  fwd  the forward call, under torch.no_grad();
  bwd  the backward alone: torch.autograd.grad(o, (r, w, k, v, a, b, h0),
       dout, retain_graph=True) after one forward with gradients (chunk
       only: fused_recurrent has no backward in fla);
each the median of --iters CUDA-event timings after --warmup calls. With
--graph N, also the forward's GPU time a call without the host's launch
cost (N calls replayed from a CUDA graph; the T = 1 decode step's target).

fla runs from bench/vendor (bench/suites/rwkv7.sh unpacks the wheels
downloaded there and puts them on PYTHONPATH), or from an installed
flash-linear-attention / fla-core.

  python3 bench/py/fla_rwkv7.py --batch 8 --heads 32 --seqlen 4096 --head-dim 64 \
      --dtype bf16,f32 [--impl chunk,fused_recurrent] [--graph 100] [--no-bwd] [--json]
"""
import argparse
import math
import sys

import torch

import fla_sweep
from cuda_timing import graph_per_call_us, timed

try:
    from fla.ops.rwkv7 import chunk_rwkv7, fused_recurrent_rwkv7
except ImportError as e:  # the message says where fla is looked for
    sys.exit(f"fla_rwkv7.py: cannot import fla ({e}); PYTHONPATH={sys.path[:3]}...")

IMPLS = {"chunk": chunk_rwkv7, "fused_recurrent": fused_recurrent_rwkv7}
# fla's fused_recurrent_rwkv7 is for inference: its backward raises
# NotImplementedError, so its rows have no bwd time.
HAS_BWD = {"chunk"}
DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def inputs(b, t, h, k, v, dt, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)

    def uni(*shape, lo=-1.0, hi=1.0):
        return torch.rand(*shape, generator=g, device="cuda") * (hi - lo) + lo

    r, kk, vv, do = uni(b, t, h, k), uni(b, t, h, k), uni(b, t, h, v), uni(b, t, h, v)
    w = uni(b, t, h, k, lo=-math.exp(-0.5), hi=0.0)
    kn = torch.nn.functional.normalize(uni(b, t, h, k), dim=-1)
    a, bb = -kn, kn * uni(b, t, h, k, lo=0.0, hi=0.1)
    h0 = uni(b, h, k, v)
    return [x.to(dt) for x in (r, w, kk, vv, a, bb)], h0, do.to(dt)


def call(f, xs, h0, scale):
    r, w, k, v, a, b = xs
    return f(r=r, w=w, k=k, v=v, a=a, b=b, scale=scale, initial_state=h0,
             output_final_state=True)


def run(impl, b, t, h, k, v, dtn, iters, warmup, graph, bwd):
    f = IMPLS[impl]
    xs, h0, do = inputs(b, t, h, k, v, DTYPES[dtn])
    scale = 1.0 / math.sqrt(k)
    row = {"impl": "fla_" + impl, "dtype": dtn, "batch": b, "seqlen": t, "heads": h,
           "head_dim": k, "head_dim_v": v}
    with torch.no_grad():
        row["fwd_ms"] = timed(lambda: call(f, xs, h0, scale), iters, warmup)
        if graph:
            row["fwd_graph_us"], _ = graph_per_call_us(lambda: call(f, xs, h0, scale), graph,
                                                       iters, warmup)
    if bwd and impl in HAS_BWD:
        gx = [x.detach().clone().requires_grad_(True) for x in xs + [h0]]
        o, _ = call(f, gx[:6], gx[6], scale)
        row["bwd_ms"] = timed(lambda: torch.autograd.grad(o, gx, do, retain_graph=True),
                              iters, warmup)
        del o, gx
    torch.cuda.empty_cache()
    return row


def fmt(x, spec):
    return format(x, spec) if x is not None else format("-", spec[:-3] if "." in spec else spec)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    fla_sweep.add_args(ap)
    ap.add_argument("--graph", type=int, default=0,
                    help="also the forward's GPU time a call from N calls in a CUDA graph")
    ap.add_argument("--no-bwd", action="store_true", help="the forward only")
    a = ap.parse_args()
    fla_sweep.sweep(
        a, "fla_rwkv7.py", f"{'fwd ms':>9} {'fwd us/graph':>12} {'bwd ms':>9}",
        lambda impl, t, dtn, v: run(impl, a.batch, t, a.heads, a.head_dim, v, dtn, a.iters,
                                    a.warmup, a.graph, not a.no_bwd),
        lambda row: f"{fmt(row['fwd_ms'], '>9.3f')} {fmt(row.get('fwd_graph_us'), '>12.2f')} "
                    f"{fmt(row.get('bwd_ms'), '>9.3f')}")


if __name__ == "__main__":
    main()
