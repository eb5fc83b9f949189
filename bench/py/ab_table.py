#!/usr/bin/env python3
"""The table of bench/ab.sh: each case's median time (us) over the rounds of
fa-bench JSON at OLD and at NEW, and OLD / NEW (above 1: NEW is faster)."""
import argparse
import json
import statistics

# The fields that name a case (those a row has); the rest are measurements.
CASE = ("op", "impl", "dtype", "batch", "heads", "heads_kv", "seqlen_q", "seqlen_k",
        "head_dim", "head_dim_v", "causal", "algorithm", "page_size", "num_splits",
        "append", "context", "layers", "cache_dtype")


def cases(paths):
    times = {}
    for path in paths:
        with open(path) as f:
            for row in json.load(f):
                if row.get("us") is None:
                    continue
                key = tuple((k, row[k]) for k in CASE if row.get(k) is not None)
                times.setdefault(key, []).append(row["us"])
    return times


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--old", nargs="+", required=True)
    ap.add_argument("--new", nargs="+", required=True)
    ap.add_argument("--old-name", default="old")
    ap.add_argument("--new-name", default="new")
    a = ap.parse_args()
    old, new = cases(a.old), cases(a.new)
    print(f"{'case':<70} {a.old_name[:12]:>12} {a.new_name[:12]:>12} {'old/new':>8}")
    for key in old:
        if key not in new:
            continue
        o, n = statistics.median(old[key]), statistics.median(new[key])
        name = " ".join(f"{k}={v}" for k, v in key)
        print(f"{name:<70} {o:12.2f} {n:12.2f} {o / n:8.3f}")


if __name__ == "__main__":
    main()
