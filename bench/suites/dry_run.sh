#!/usr/bin/env bash
# Checks every suite of bench/suites without running a measurement: each
# parses (bash -n) and prints its steps' command lines (--dry-run; decode.sh
# with all its parts). The ring suites may stop with exit 2 where mpirun or
# fa-ring-bench is missing. CTest runs it as bench_suites_dry_run.
#
# usage: bench/suites/dry_run.sh BUILD_DIR OUT_DIR
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=${1:?usage: dry_run.sh BUILD_DIR OUT_DIR} out=${2:?usage: dry_run.sh BUILD_DIR OUT_DIR}
mkdir -p "$out"
status=0
bash -n "$here/common.sh" || status=1
for s in attention decode dropout rwkv6 rwkv7 f32_precision ring ring_multi_gpu; do
  bash -n "$here/$s.sh" || { status=1; continue; }
  args=(--build "$build" --out "$out" --dry-run)
  [[ $s == decode ]] && args+=(--part 'table,loop,sweep')
  bash "$here/$s.sh" "${args[@]}" >"$out/$s.dry-run.txt" 2>&1
  rc=$?
  if ((rc != 0)) && ! [[ $rc == 2 && $s == ring* ]]; then
    echo "$s.sh --dry-run: exit $rc"
    tail -5 "$out/$s.dry-run.txt"
    status=1
  else
    echo "$s.sh: $(grep -c '^== ' "$out/$s.dry-run.txt") steps (exit $rc)"
  fi
done
exit $status
