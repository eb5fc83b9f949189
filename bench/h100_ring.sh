#!/usr/bin/env bash
# Benchmarks ring attention across MPI ranks (flashcl_mpi, fa-ring-bench)
# on one NVIDIA GPU (written for an H100) shared by 1 and 2 ranks: forward
# and backward, f16 and bf16, causal and not, B=1 Hq=32 Hkv=8 head dim 128,
# whole sequences of 8192, 16384 and 32768 tokens (zig-zag layout), and the
# contiguous layout beside it for the causal case (its ranks' work is
# unbalanced). Per case: ms per call and per ring step, the device time of
# the compute, the overlap achieved (compute / wall: 1 when the transfers
# hide behind the compute), the host's wait on transfers, the transfers
# alone (comm), the single-process call on the whole sequence, and the
# largest difference from it. JSON lines in OUT/ring_np{1,2}[_contiguous].json,
# and a table of them all at the end (where python3 runs).
#
# usage: bench/h100_ring.sh [BUILD_DIR [OUT_DIR]]   (defaults: build, h100-results)
#
# Needs MPI at build time (CMake found it: BUILD_DIR/bench/fa-ring-bench
# exists) and mpirun at run time (Debian: apt-get install libopenmpi-dev
# openmpi-bin, then rebuild). Two processes on one GPU time-slice it
# (without MPS), so a rank's compute includes waiting for the other's
# kernels. NVIDIA's OpenCL driver is registered as in h100.sh. A failing
# step is reported and the others still run; the exit status is 1 if any
# failed, 2 if mpirun or fa-ring-bench is missing.
source "$(dirname "${BASH_SOURCE[0]}")/h100_common.sh"

source "$(dirname "${BASH_SOURCE[0]}")/ring_common.sh"
ring_smoke

common=(--batch 1 --heads 32 --heads-kv 8 --head-dim 128 --iters 20 --warmup 3 --json)
cases=(--op fwd,bwd --seqlen 8192,16384,32768 --dtype f16,bf16 --causal 0,1)
contig=(--op fwd,bwd --seqlen 32768 --dtype f16 --causal 1 --layout contiguous)
run_tee "$out/ring_np1.json" 0 "${mpi[@]}" -np 1 "$ring" "${cases[@]}" "${common[@]}"
run_tee "$out/ring_np2.json" 0 "${mpi[@]}" -np 2 "$ring" "${cases[@]}" "${common[@]}"
run_tee "$out/ring_np2_contiguous.json" 0 "${mpi[@]}" -np 2 "$ring" "${contig[@]}" "${common[@]}"
if command -v python3 >/dev/null; then
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
echo
echo "$me: the JSON files are in $out/"
exit $status
