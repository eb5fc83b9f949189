#!/usr/bin/env python3
"""Tables of ring attention across GPUs (issue 24) from fa-ring-bench --json
lines and bench/py/ring_anchor.py lines: correctness against the one-GPU call,
strong scaling (fixed sequence) and weak scaling (fixed tokens per GPU),
each beside PyTorch FlashAttention-2's per-GPU bound.

  python3 bench/py/ring_table.py [--weak TOKENS_PER_GPU] FILE...
"""
import argparse
import json


def load(files):
    ring, anchor = {}, {}
    for f in files:
        for line in open(f):
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            if r.get("anchor"):
                anchor[(r["seqlen"], r["dtype"], r["ranks"])] = r
            elif r.get("op", "").startswith("ring-"):
                ring[(r["seqlen"], r["dtype"], r["op"][5:], r["ranks"])] = r
    return ring, anchor


def bound(anchor, n, dt, op, ranks):
    a = anchor.get((n, dt, ranks))
    return a and a["%s_ms" % op]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--weak", type=int, default=32768)
    p.add_argument("files", nargs="+")
    a = p.parse_args()
    ring, anchor = load(a.files)
    if not ring:
        print("no fa-ring-bench lines")
        return
    one = next(iter(ring.values()))
    print("device: %s; B%d H%d/%d D%d, causal, zig-zag\n" % (
        one["device"], one["batch"], one["heads"], one["heads_kv"], one["head_dim"]))

    print("Correctness: largest |ring - one-GPU call| over o (fwd) or dq, dk, dv (bwd)\n")
    print("| tokens | dtype | GPUs | fwd | bwd |")
    print("|---|---|---|---|---|")
    for (n, dt, op, r) in sorted(k for k in ring if k[2] == "fwd"):
        b = ring.get((n, dt, "bwd", r))
        print("| %d | %s | %d | %.3g | %s |" % (n, dt, r, ring[(n, dt, op, r)]["err"],
                                             "%.3g" % b["err"] if b else "-"))

    print("\nStrong scaling (ms per call; 1 GPU is fcl_attention_* on the whole sequence; "
          "wait: share of the wall time the host waited on MPI; FA2 bound: "
          "bench/py/ring_anchor.py; ratio = bound / flashcl)\n")
    print("| tokens | dtype | pass | GPUs | flashcl ms | speedup | efficiency | wait | "
          "FA2 bound ms | ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for (n, dt, op) in sorted({k[:3] for k in ring}):
        rows = sorted((k[3], ring[k]) for k in ring if k[:3] == (n, dt, op))
        single = rows[0][1]["single_ms"]
        entries = [(1, single, 0.0)] + [(r, x["ms"], x["wait_ms"] / x["ms"]) for r, x in rows]
        for r, ms, wait in entries:
            b = bound(anchor, n, dt, op, r)
            print("| %d | %s | %s | %d | %.2f | %.2f | %.0f%% | %.0f%% | %s | %s |" % (
                n, dt, op, r, ms, single / ms, 100 * single / ms / r, 100 * wait,
                "%.1f" % b if b else "-", "%.2f" % (b / ms) if b else "-"))

    print("\nWeak scaling (%d tokens per GPU)\n" % a.weak)
    print("| GPUs | tokens | dtype | pass | flashcl ms | wait | FA2 bound ms | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for dt in sorted({k[1] for k in ring}):
        for op in ("fwd", "bwd"):
            for r in (1, 2, 4, 8):
                n = a.weak * r
                if r == 1:
                    x = next((v for k, v in ring.items() if k[0] == n and k[1] == dt and k[2] == op),
                             None)
                    ms, wait = (x["single_ms"], 0.0) if x else (None, None)
                else:
                    x = ring.get((n, dt, op, r))
                    ms, wait = (x["ms"], x["wait_ms"] / x["ms"]) if x else (None, None)
                if ms is None:
                    continue
                b = bound(anchor, n, dt, op, r)
                print("| %d | %d | %s | %s | %.2f | %.0f%% | %s | %s |" % (
                    r, n, dt, op, ms, 100 * wait, "%.1f" % b if b else "-",
                    "%.2f" % (b / ms) if b else "-"))


if __name__ == "__main__":
    main()
