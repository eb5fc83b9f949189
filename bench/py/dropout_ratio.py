#!/usr/bin/env python3
"""Attention with dropout against the same case without, and against
PyTorch's SDPA with the same dropout_p, from JSON files of fa-bench and
torch_sdpa.py (--json): one line a row with dropout, its time over that of
the case (op, impl, batch, heads, lengths, head dims, dtype, causal) without
dropout, and flashcl's rows over each PyTorch backend's row with dropout.

usage: bench/py/dropout_ratio.py FILE.json [FILE.json ...]
"""
import json
import sys


def case(r):
    return (r["op"], r["batch"], r["heads"], r["heads_kv"], r["seqlen_q"], r["seqlen_k"],
            r["head_dim"], r["head_dim_v"], r["dtype"], r["causal"])


def main(paths):
    rows = []
    for path in paths:
        with open(path) as f:
            rows += json.load(f)
    plain = {(r["impl"],) + case(r): r["ms"] for r in rows if not r.get("dropout")}
    torch = {}
    for r in rows:
        if r.get("dropout") and r["impl"].startswith("sdpa"):
            torch.setdefault(case(r) + (r["dropout"],), []).append(r)
    print(f"{'op':<4} {'impl':<12} {'B':>3} {'H':>3} {'N':>6} {'D':>4} {'dtype':>5} {'causal':>6} "
          f"{'p':>5} {'ms':>9} {'x no dropout':>12}  over PyTorch (same p)")
    for r in rows:
        if not r.get("dropout") or r["ms"] is None:
            continue
        base = plain.get((r["impl"],) + case(r))
        ratio = f"{r['ms'] / base:.3f}" if base else "-"
        vs = ""
        if not r["impl"].startswith("sdpa"):
            vs = " ".join(f"{t['impl']} {t['ms'] / r['ms']:.2f}x"
                          for t in torch.get(case(r) + (r["dropout"],), []) if t["ms"])
        print(f"{r['op']:<4} {r['impl']:<12} {r['batch']:>3} {r['heads']:>3} {r['seqlen_q']:>6} "
              f"{r['head_dim']:>4} {r['dtype']:>5} {r['causal']:>6} {r['dropout']:>5g} "
              f"{r['ms']:>9.3f} {ratio:>12}  {vs}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
