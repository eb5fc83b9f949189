#!/usr/bin/env python3
"""The anchor for ring attention across GPUs (fa-ring-bench): what one GPU
of R spends in PyTorch's FlashAttention-2 on the pieces it would compute,
the lower bound that a ring implementation approaches.

In the zig-zag layout a sequence of N tokens is cut into 2R chunks of
C = N / 2R, and a rank holds chunks i and 2R-1-i. Over the ring, the causal
lower triangle of 2R x 2R chunk pairs is shared evenly: each rank computes
2 diagonal pairs (causal C x C) and 2R-1 full pairs (C x C). So the per-GPU
time is 2 t_causal(C) + (2R-1) t_full(C), each timed alone with SDPA's
flash backend (forward; backward from a kept graph). No transfers, no merge:
a bound, not a ring. For R = 1 it is the whole causal sequence, which is
timed too (fa2_whole_ms).

One JSON line per (seqlen, dtype, ranks):
  python3 bench/py/ring_anchor.py --seqlen 32768,131072 --dtype f16,bf16 \
      --ranks 1,2,4 --heads 32 --head-dim 128
"""
import argparse
import json

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from cuda_timing import timed


def fa2_times(tokens, heads, head_dim, dtype, causal, iters, warmup):
    """(forward ms, backward ms) of FlashAttention-2 on one [1, H, tokens, D] square."""
    shape = (1, heads, tokens, head_dim)
    q, k, v = (torch.randn(shape, device="cuda", dtype=dtype, requires_grad=True) for _ in range(3))
    grad = torch.randn(shape, device="cuda", dtype=dtype)
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        fwd = timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal), iters, warmup)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        bwd = timed(lambda: torch.autograd.grad(out, (q, k, v), grad, retain_graph=True), iters,
                    warmup)
    del q, k, v, grad, out
    torch.cuda.empty_cache()
    return fwd, bwd


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seqlen", default="32768,131072")
    p.add_argument("--dtype", default="f16,bf16")
    p.add_argument("--ranks", default="1,2,4")
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--iters", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    a = p.parse_args()
    dtypes = {"f16": torch.float16, "bf16": torch.bfloat16}
    device = torch.cuda.get_device_name()
    memo = {}

    def piece(tokens, dt, causal):
        key = (tokens, dt, causal)
        if key not in memo:
            memo[key] = fa2_times(tokens, a.heads, a.head_dim, dtypes[dt], causal, a.iters,
                                  a.warmup)
        return memo[key]

    for n in (int(x) for x in a.seqlen.split(",")):
        for dt in a.dtype.split(","):
            whole = piece(n, dt, True)
            for r in (int(x) for x in a.ranks.split(",")):
                c = n // (2 * r)
                diag, full = piece(c, dt, True), piece(c, dt, False)
                lb = [2 * diag[i] + (2 * r - 1) * full[i] for i in range(2)]
                print(json.dumps({"anchor": "fa2-ring-bound", "seqlen": n, "dtype": dt, "ranks": r,
                                  "heads": a.heads, "head_dim": a.head_dim, "chunk": c,
                                  "fwd_ms": round(lb[0], 4), "bwd_ms": round(lb[1], 4),
                                  "fa2_whole_fwd_ms": round(whole[0], 4),
                                  "fa2_whole_bwd_ms": round(whole[1], 4), "device": device}),
                      flush=True)


if __name__ == "__main__":
    main()
