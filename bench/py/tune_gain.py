#!/usr/bin/env python3
"""Speed-up of fa-tune's parameters over the built-in defaults, in one run.

For each group of fa-bench cases it runs fa-bench with the built-in defaults
(FCL_TUNING_DB=off) and with the tuning database, alternating --rounds times
so that drift of the device (clocks, other load) falls on both alike, and
prints per case the median time of each and their ratio (defaults / tuned:
above 1 means the tuned parameters are faster), the parameters the tuned run
used (from FCL_LOG=1) and the geometric mean.

  bench/py/tune_gain.py --db h100.db --device nvidia [--rounds 2] [--cpu]
                     [--case "--op fwd --batch 4 ..."] [--json OUT.json]

Without --case the groups are the shapes of issue 5: attention B=4 H=32
N=4096, D=64 and 128, f16 and f32, causal and not (forward; also backward
unless --cpu), and RWKV6 B=8 T=4096 H=32 K=V=64 in bf16 and f32, forward and
backward.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys

ATTN = "--batch 4 --heads 32 --seqlen 4096 --head-dim {d} --dtype f16,f32 --causal 0,1"
RWKV = "--batch 8 --heads 32 --seqlen 4096 --head-dim 64 --dtype bf16,f32"


def default_cases(cpu):
    cases = []
    for d in (64, 128):
        cases.append("--op fwd " + ATTN.format(d=d))
        if not cpu:
            cases.append("--op bwd " + ATTN.format(d=d))
    cases.append("--op rwkv6-fwd,rwkv6-bwd " + RWKV)
    return cases


def key(row):
    return (row["op"], row["dtype"], row["head_dim"], row["causal"], row["batch"],
            row["heads"], row["seqlen_q"], row["seqlen_k"], row["algorithm"])


def run(fab, args, device, db, iters, warmup, check):
    env = dict(os.environ, FCL_TUNING_DB=db, FCL_LOG="1")
    cmd = [fab, "--device", device, "--peak", "0", "--json", "--iters", str(iters),
           "--warmup", str(warmup), "--check", "1" if check else "0"] + args.split()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode not in (0, 1):
        sys.stderr.write(p.stderr)
        raise SystemExit(f"tune_gain: {' '.join(cmd)} exited {p.returncode}")
    rows = json.loads(p.stdout)
    # "[flashcl] KERNEL ...: PARAMS from tuning database ..." lines, in order
    picks = [l.split("] ", 1)[1] for l in p.stderr.splitlines()
             if l.startswith("[flashcl]") and (" from " in l)]
    return rows, picks


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fa-bench", default="build/bench/fa-bench")
    ap.add_argument("--db", required=True, help="tuning database written by fa-tune")
    ap.add_argument("--device", default=os.environ.get("FCL_DEVICE", ""))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--cpu", action="store_true", help="no attention backward cases")
    ap.add_argument("--case", action="append", help="fa-bench arguments of one group")
    ap.add_argument("--json", help="write every measurement here")
    a = ap.parse_args()
    if not os.path.exists(a.db):
        raise SystemExit(f"tune_gain: no database at {a.db}")
    cases = a.case or default_cases(a.cpu)

    times = {}  # key -> {"off": [ms], "db": [ms]}
    checks, picks_all = {}, []
    for args in cases:
        for r in range(a.rounds):
            for which, db in (("off", "off"), ("db", a.db)):
                # The tuned parameters are checked against the reference once
                # (fa-tune checked them too); the defaults by the test suite.
                check = which == "db" and r == 0
                rows, picks = run(a.fa_bench, args, a.device, db, a.iters, a.warmup, check)
                if which == "db" and r == 0:
                    picks_all += [p for p in picks if "tuning database" in p]
                for row in rows:
                    k = key(row)
                    times.setdefault(k, {"off": [], "db": []})[which].append(row["ms"])
                    if check:
                        checks[k] = row["check"]
                print(f"tune_gain: round {r + 1}/{a.rounds} {which:3s} {args}", file=sys.stderr,
                      flush=True)

    print(f"{'op':10s} {'dtype':5s} {'D':>4s} {'causal':>6s} {'alg':9s} "
          f"{'defaults ms':>11s} {'tuned ms':>9s} {'gain':>6s}  check")
    logs, out = [], []
    for k, t in times.items():
        op, dtype, d, causal, *_, alg = k
        off, db = statistics.median(t["off"]), statistics.median(t["db"])
        gain = off / db if db > 0 else float("nan")
        logs.append(math.log(gain))
        print(f"{op:10s} {dtype:5s} {d:4d} {'' if causal is None else causal:>6} "
              f"{alg or '':9s} {off:11.3f} {db:9.3f} {gain:6.3f}x  "
              f"{checks.get(k, '?')}")
        out.append(dict(zip(("op", "dtype", "head_dim", "causal", "batch", "heads",
                             "seqlen_q", "seqlen_k", "algorithm"), k),
                        defaults_ms=t["off"], tuned_ms=t["db"], gain=gain))
    if logs:
        print(f"geometric mean gain {math.exp(sum(logs) / len(logs)):.3f}x over {len(logs)} "
              f"cases, min {math.exp(min(logs)):.3f}x, max {math.exp(max(logs)):.3f}x")
    print("tuned parameters used (first round):")
    for p in dict.fromkeys(picks_all):
        print("  " + p)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
