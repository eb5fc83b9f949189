#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2054 # commas separate fa-bench's lists
# Ring attention across MPI ranks (flashcl_mpi, fa-ring-bench) on one GPU
# shared by 1 and 2 ranks: forward and backward, f16 and bf16, causal and
# not, B=1 Hq=32 Hkv=8 head dim 128, whole sequences of 8192, 16384 and
# 32768 tokens (zig-zag layout), and the contiguous layout beside it for the
# causal case (its ranks' work is unbalanced). Per case: ms per call and per
# ring step, the device time of the compute, the overlap achieved (compute /
# wall: 1 when the transfers hide behind the compute), the host's wait on
# transfers, the transfers alone (comm), the single-process call on the
# whole sequence, and the largest difference from it. JSON lines in
# OUT/ring_np{1,2}[_contiguous].json, and a table of them all at the end
# (where python3 runs). One rank a GPU across the GPUs of a host:
# bench/suites/ring_multi_gpu.sh.
#
# usage: bench/suites/ring.sh [--device SEL] [--build DIR] [--out DIR] [--dry-run]
#   defaults: the library's default device, build, results/<device name>
#   (bench/suites/common.sh has the details); SEL may hold fa-ring-bench's
#   %r (the rank's index on its node)
#
# Needs MPI at build time (CMake found it: BUILD_DIR/bench/fa-ring-bench
# exists) and mpirun at run time (Debian: apt-get install libopenmpi-dev
# openmpi-bin, then rebuild). Two processes on one GPU time-slice it
# (without MPS), so a rank's compute includes waiting for the other's
# kernels. Under Open MPI, OCL_ICD_FILENAMES reaches the ranks cut at its
# first ':' (docs/benchmarks.md, "The environment"). A failing step is
# reported and the others still run; the exit status is 1 if any failed, 2
# if mpirun or fa-ring-bench is missing.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
ring_setup
ring_smoke

common=(--batch 1 --heads 32 --heads-kv 8 --head-dim 128 --iters 20 --warmup 3 --json)
cases=(--op fwd,bwd --seqlen 8192,16384,32768 --dtype f16,bf16 --causal 0,1)
contig=(--op fwd,bwd --seqlen 32768 --dtype f16 --causal 1 --layout contiguous)
run_tee "$out/ring_np1.json" 0 "${mpi[@]}" -np 1 "${ring[@]}" "${cases[@]}" "${common[@]}"
run_tee "$out/ring_np2.json" 0 "${mpi[@]}" -np 2 "${ring[@]}" "${cases[@]}" "${common[@]}"
run_tee "$out/ring_np2_contiguous.json" 0 "${mpi[@]}" -np 2 "${ring[@]}" "${contig[@]}" \
  "${common[@]}"
if command -v python3 >/dev/null && ((!dry)); then
  echo
  python3 - "$out"/ring_np*.json <<'PY'
import json, sys
print("%-4s %-4s %-6s %-10s %6s %3s %9s %8s %9s %7s %8s %8s %9s %8s" % ("op", "dt", "causal",
      "layout", "seqlen", "R", "ms", "step_ms", "compute", "overlap", "wait", "comm", "single",
      "err"))
for f in sys.argv[1:]:
    for line in open(f):
        if not line.startswith("{"): continue
        r = json.loads(line)
        print("%-4s %-4s %-6d %-10s %6d %3d %9.3f %8.3f %9.3f %7.2f %8.3f %8.3f %9.3f %8.2g" % (
              r["op"][5:], r["dtype"], r["causal"], r["layout"], r["seqlen"], r["ranks"], r["ms"],
              r["step_ms"], r["compute_ms"], r["overlap"], r["wait_ms"], r["comm_ms"],
              r["single_ms"], r["err"]))
PY
fi
finish
