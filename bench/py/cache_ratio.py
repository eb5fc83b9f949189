#!/usr/bin/env python3
"""Decode time on each KV-cache format against the cache in q's dtype, from
fa-bench --op decode --cache-dtype ... --json files: one line a row, with
its time over that of the row of the same case (batch, new tokens, keys,
page size, append, dtype) whose cache is in q's dtype.

usage: bench/py/cache_ratio.py FILE.json [FILE.json ...]
"""
import json
import sys


def case(r):
    return (r["batch"], r["seqlen_q"], r["context"], r["page_size"], r["append"], r["dtype"])


def main(paths):
    rows = []
    for path in paths:
        with open(path) as f:
            rows += json.load(f)
    base = {case(r): r["us"] for r in rows if r["cache_dtype"] == r["dtype"]}
    print(f"{'B':>3} {'new':>4} {'keys':>6} {'page':>4} {'append':>6} {'dtype':>5} "
          f"{'cache':>14} {'us':>9} {'GB/s':>7} {'x of q dtype':>12}  check")
    for r in rows:
        b = base.get(case(r))
        ratio = f"{r['us'] / b:.3f}" if b else "-"
        print(f"{r['batch']:>3} {r['seqlen_q']:>4} {r['context']:>6} {r['page_size']:>4} "
              f"{r['append']:>6} {r['dtype']:>5} {r['cache_dtype']:>14} {r['us']:>9.2f} "
              f"{r['gbps']:>7.0f} {ratio:>12}  {r['check']}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
