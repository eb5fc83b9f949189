#!/usr/bin/env python3
"""FlashAttention-2's varlen attention in PyTorch, the anchor of fa-bench
--varlen: aten::_flash_attention_forward and _flash_attention_backward with
cumulative sequence offsets (what flash_attn_varlen_func calls), on one
packed batch of sequences of the given lengths: q of shape (total, H, D),
k and v (total, Hkv, D), every sequence attending to itself (causal
aligned as fa-bench's, the lengths of queries and keys being equal).

Rows print as bench/py/torch_sdpa.py's (impl flash-varlen): B is the number of
sequences, Nq = Nk the longest; TFLOP/s counts 2*H*L^2*(D+Dv) per sequence
of length L, halved when causal, 2.5 times that for --bwd, as fa-bench
does. err(o): the largest |o - ref| over 16 sampled rows of each sequence,
ref in float64; err(grad): max over dq, dk, dv of max|got - ref| / max|ref|
on the last sequence's last kv head, ref from float64 autograd. A case the
op refuses is listed as unsupported with its error.

  fa-bench --op fwd,bwd --varlen 512,1024,4096,768,2048,3072,1536,512 --heads 32 \\
      --heads-kv 8 --head-dim 128 --dtype f16 --causal 0,1
  python3 bench/py/torch_varlen.py --varlen 512,1024,4096,768,2048,3072,1536,512 \\
      --heads 32 --heads-kv 8 --head-dim 128 --dtype f16 --causal 0,1 [--bwd]
"""
import argparse
import itertools
import math
import statistics
import sys

import torch

import torch_sdpa as ts

ROWS_PER_SEQ = 16


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--varlen", type=ts.int_list, required=True, help="sequence lengths")
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--heads-kv", "--kv-heads", type=int, default=None, help="(= --heads)")
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--dtype", type=ts.name_list(["f16", "bf16"]), default=["f16"])
    p.add_argument("--causal", type=ts.int_list, default=[0, 1])
    p.add_argument("--bwd", action="store_true", help="time the backward")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    out = p.add_mutually_exclusive_group()
    out.add_argument("--csv", action="store_true")
    out.add_argument("--json", action="store_true")
    a = p.parse_args()
    a.heads_kv = a.heads_kv or a.heads
    if a.heads % a.heads_kv or min(a.varlen) < 1 or any(c not in (0, 1) for c in a.causal):
        p.error("--heads a multiple of --heads-kv, lengths >= 1, --causal 0 or 1")
    return a


def reference_grads(q, k, v, causal, dout):
    """Float64 gradients of q (G, L, D), k (L, D), v (L, Dv) of the attention of one
    sequence and kv head, for dout (G, L, Dv)."""
    q, k, v = (x.double().requires_grad_(True) for x in (q, k, v))
    s = (q @ k.T) / math.sqrt(q.shape[-1])
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1),
                          float("-inf"))
    o = torch.softmax(s, dim=-1) @ v
    return torch.autograd.grad(o, (q, k, v), dout.double())


def run(a, dtype, causal, lens):
    cu_list = [0] + list(itertools.accumulate(lens))
    longest, group, t = max(lens), a.heads // a.heads_kv, ts.DTYPES[dtype]
    flops = sum(2.0 * a.heads * n * n * 2 * a.head_dim for n in lens) / (2 if causal else 1)
    r = dict(op="bwd" if a.bwd else "fwd", impl="flash-varlen", device=ts.device_name(a),
             batch=len(lens), heads=a.heads, heads_kv=a.heads_kv, seqlen_q=longest,
             seqlen_k=longest, head_dim=a.head_dim, head_dim_v=a.head_dim, dtype=dtype,
             causal=causal, algorithm="varlen", ms=None, tflops=None, gbps=None, err_o=None,
             err_lse=None, err_grad=None, check="-", wall_ms=None, alu_pct=None, bw_pct=None,
             gain=None, peak_gflops=None, peak_gbps=None)
    gen = torch.Generator(device="cuda").manual_seed(1)
    cu = torch.tensor(cu_list, dtype=torch.int32, device="cuda")
    total = cu_list[-1]
    q = torch.randn(total, a.heads, a.head_dim, device="cuda", dtype=t, generator=gen)
    k = torch.randn(total, a.heads_kv, a.head_dim, device="cuda", dtype=t, generator=gen)
    v = torch.randn(total, a.heads_kv, a.head_dim, device="cuda", dtype=t, generator=gen)
    scale = 1.0 / math.sqrt(a.head_dim)

    def forward():
        return torch.ops.aten._flash_attention_forward(
            q, k, v, cu, cu, longest, longest, 0.0, bool(causal), False, scale=scale)

    try:
        o, lse, seed, offset = forward()[:4]
        torch.cuda.synchronize()
        last = slice(cu_list[-2], cu_list[-1])  # the last sequence, its last kv head
        hk = a.heads_kv - 1
        heads = slice(hk * group, (hk + 1) * group)
        if a.bwd:
            dout = torch.randn(o.shape, device="cuda", dtype=t, generator=gen)

            def timed():
                return torch.ops.aten._flash_attention_backward(
                    dout, q, k, v, o, lse, cu, cu, longest, longest, 0.0, bool(causal), seed,
                    offset, scale=scale)

            dq, dk, dv = timed()[:3]
            ref = reference_grads(q[last, heads].transpose(0, 1), k[last, hk], v[last, hk],
                                  causal, dout[last, heads].transpose(0, 1))
            got = (dq[last, heads].transpose(0, 1), dk[last, hk], dv[last, hk])
            r["err_grad"] = max(((g.double() - x).abs().max() / x.abs().max()).item()
                                for g, x in zip(got, ref))
        else:
            timed = forward
            err, pick = 0.0, torch.Generator().manual_seed(4)
            for b, n in enumerate(lens):
                for j in range(ROWS_PER_SEQ):
                    h = int(torch.randint(a.heads, (1,), generator=pick))
                    i = j * (n - 1) // (ROWS_PER_SEQ - 1)
                    keys = slice(cu_list[b], cu_list[b] + (i + 1 if causal else n))
                    qi = q[cu_list[b] + i, h].double()
                    p = torch.softmax((k[keys, h // group].double() @ qi) * scale, dim=0)
                    ref = p @ v[keys, h // group].double()
                    err = max(err, (o[cu_list[b] + i, h].double() - ref).abs().max().item())
            r["err_o"] = err
        for _ in range(a.warmup):
            timed()
        times = [ts.time_ms(timed, "cuda") for _ in range(a.iters)]
    except RuntimeError as e:
        print(f"torch_varlen: {dtype} causal={causal}: unsupported: {str(e).splitlines()[0]}",
              file=sys.stderr)
        r["check"] = "unsupported"
        return r
    r["ms"] = statistics.median(times)
    r["tflops"] = (2.5 if a.bwd else 1.0) * flops / (r["ms"] * 1e9)
    for f in ("ms", "tflops", "err_o", "err_grad"):  # six significant digits, as fa-bench
        if r[f] is not None:
            r[f] = float(f"{r[f]:.6g}")
    return r


def main():
    a = parse_args()
    if not torch.cuda.is_available():
        sys.exit("torch_varlen: CUDA is not available (FlashAttention runs on CUDA only)")
    a.device, a.decode = "cuda", False  # what torch_sdpa's printers read
    if a.csv:
        print(",".join(ts.FIELDS))
    elif a.json:
        print("[")
    else:
        print(f"device: {ts.device_name(a)}")
        print(ts.HEADER)
    first = True
    for dtype in a.dtype:
        for causal in a.causal:
            ts.print_row(a, run(a, dtype, causal, a.varlen), first)
            first = False
    if a.json:
        print("\n]")


if __name__ == "__main__":
    main()
