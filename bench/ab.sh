#!/usr/bin/env bash
# Before/after: builds fa-bench at two commits and runs both on the same
# cases, in alternating rounds (OLD, NEW, OLD, NEW, ...) so that a drift of
# the machine (clocks, other load) falls on both, then prints each case's
# median time at OLD and NEW and their ratio (bench/py/ab_table.py).
#
# usage: bench/ab.sh OLD NEW [--rounds N] [--work DIR] -- FA-BENCH-ARGS...
#   OLD, NEW   commits (anything git rev-parse takes; NEW may be "worktree",
#              the checkout as it is, uncommitted changes included)
#   --rounds   rounds of the two runs (default 3)
#   --work     where the two checkouts, builds and JSON go (default: a
#              temporary folder, removed at the end)
# e.g.  bench/ab.sh HEAD~1 HEAD -- --op decode --batch 1 --context 1024,32768 --dtype f16
#
# The device is fa-bench's (--device in FA-BENCH-ARGS, or FCL_DEVICE); no
# OpenCL driver is registered here (docs/benchmarks.md, "The environment").
set -euo pipefail
me=$(basename "$0")
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
(($# >= 2)) || { sed -n '2,/^set/{/^set/d;s/^# \{0,1\}//;p}' "$0"; exit 2; }
old=$1 new=$2
shift 2
rounds=3 work=
while (($#)) && [[ $1 != -- ]]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    *) echo "$me: unknown option $1 (before --)" >&2; exit 2 ;;
  esac
done
[[ ${1:-} == -- ]] || { echo "$me: the fa-bench arguments follow --" >&2; exit 2; }
shift
if [[ -z $work ]]; then
  work=$(mktemp -d)
  trap 'git -C "$repo" worktree prune; rm -rf "$work"' EXIT
fi
mkdir -p "$work"

# side NAME REV: the checkout of REV (or the worktree itself) built in
# $work/NAME-build; prints fa-bench's path.
side() {
  local name=$1 rev=$2 src
  if [[ $rev == worktree ]]; then
    src=$repo
  else
    src=$work/$name-src
    rm -rf "$src"
    git -C "$repo" worktree add -q --detach "$src" "$(git -C "$repo" rev-parse "$rev")" >&2
  fi
  cmake -S "$src" -B "$work/$name-build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$work/$name-build" --target fa-bench -j"$(nproc)" >/dev/null
  echo "$work/$name-build/bench/fa-bench"
}
echo "$me: building $old and $new" >&2
bin_old=$(side old "$old")
bin_new=$(side new "$new")

for ((r = 0; r < rounds; r++)); do
  for side in old new; do
    bin=bin_$side
    echo "$me: round $((r + 1)) of $rounds: $side" >&2
    "${!bin}" "$@" --json >"$work/$side-$r.json"
  done
done
python3 "$repo/bench/py/ab_table.py" --old-name "$old" --new-name "$new" \
  --old "$work"/old-*.json --new "$work"/new-*.json
