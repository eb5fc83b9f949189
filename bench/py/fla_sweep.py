"""The command line and the loop shared by the fla anchor scripts
(fla_rwkv6.py, fla_rwkv7.py): their shape and timing options, and one row
a (T, dtype, impl), printed as a table line or dumped as JSON."""
import json
import sys

import torch


def add_args(ap):
    """The options both scripts take; a script adds its own after."""
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--seqlen", default="4096", help="comma-separated T values")
    ap.add_argument("--head-dim", type=int, default=64, help="K")
    ap.add_argument("--head-dim-v", type=int, default=0, help="V (default K)")
    ap.add_argument("--dtype", default="bf16,f32")
    ap.add_argument("--impl", default="chunk,fused_recurrent")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--json", action="store_true", help="JSON rows instead of the table")


def sweep(a, script, times_head, run, times):
    """Calls run(impl, t, dtype name, v) for each T, dtype and impl of a.
    times_head: the table's heads of the timing columns; times(row): a row's
    timing columns."""
    if not torch.cuda.is_available():
        sys.exit(f"{script}: no CUDA device")
    v = a.head_dim_v or a.head_dim
    rows = []
    if not a.json:
        print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}")
        print(f"{'impl':<20} {'dtype':<5} {'B':>3} {'T':>6} {'H':>3} {'K':>4} {'V':>4} "
              + times_head)
    for t in (int(x) for x in a.seqlen.split(",")):
        for dtn in a.dtype.split(","):
            for impl in a.impl.split(","):
                row = run(impl, t, dtn, v)
                rows.append(row)
                if not a.json:
                    print(f"{row['impl']:<20} {dtn:<5} {a.batch:>3} {t:>6} {a.heads:>3} "
                          f"{a.head_dim:>4} {v:>4} " + times(row), flush=True)
    if a.json:
        json.dump(rows, sys.stdout, indent=1)
        print()
