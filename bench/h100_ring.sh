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

ring=$build/bench/fa-ring-bench
if ! command -v mpirun >/dev/null; then
  echo "$me: mpirun not found: MPI is not installed here." >&2
  echo "$me: install it (Debian: apt-get install -y libopenmpi-dev openmpi-bin), rebuild" >&2
  echo "$me: (cmake -S . -B $build && cmake --build $build -j) and run this again." >&2
  exit 2
fi
if [[ ! -x $ring ]]; then
  echo "$me: $ring not found: CMake did not find MPI when $build was configured." >&2
  echo "$me: install libopenmpi-dev, then: cmake -S . -B $build && cmake --build $build -j" >&2
  exit 2
fi
# Open MPI passes OCL_ICD_FILENAMES to the ranks cut at its first ':'
# ("libpocl.so.2:libnvidia-opencl.so.1" arrived as "libpocl.so.2", so the
# ranks saw no GPU), and this machine's ICD loader found no platform
# without it: the ranks get NVIDIA's driver alone.
export OCL_ICD_FILENAMES=/usr/local/nvidia/lib64/libnvidia-opencl.so.1
mpi=(mpirun)
if mpirun --version 2>&1 | grep -q "Open MPI"; then
  mpi+=(--oversubscribe)
  # Open MPI refuses root without these; harmless otherwise.
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
mpirun --version 2>&1 | head -1
command -v nvidia-smi >/dev/null && nvidia-smi -L
# A tiny run first: Open MPI's shared-memory single copy (CMA) is refused in
# some containers; then it runs without it (slower transfers, said here).
smoke=(--op fwd --seqlen 256 --heads 2 --head-dim 64 --iters 1 --warmup 0)
if ! "${mpi[@]}" -np 2 "$ring" "${smoke[@]}" >/dev/null 2>&1; then
  export OMPI_MCA_btl_vader_single_copy_mechanism=none
  echo "$me: 2 ranks failed with Open MPI's defaults; using btl_vader_single_copy_mechanism=none"
  "${mpi[@]}" -np 2 "$ring" "${smoke[@]}" || { echo "$me: 2 ranks do not run here" >&2; exit 1; }
fi

common=(--batch 1 --heads 32 --heads-kv 8 --head-dim 128 --iters 20 --warmup 3)
cases=(--op fwd,bwd --seqlen 8192,16384,32768 --dtype f16,bf16 --causal 0,1)
contig=(--op fwd,bwd --seqlen 32768 --dtype f16 --causal 1 --layout contiguous)
# run_json FILE ARGS...: fa-ring-bench --json, its lines shown and kept in FILE.
run_json() {
  local file=$1
  shift
  echo
  echo "== $* --json | tee $file"
  "$@" --json | tee "$file"
  ((PIPESTATUS[0] == 0)) || { echo "$me: failed: $*"; status=1; }
}
run_json "$out/ring_np1.json" "${mpi[@]}" -np 1 "$ring" "${cases[@]}" "${common[@]}"
run_json "$out/ring_np2.json" "${mpi[@]}" -np 2 "$ring" "${cases[@]}" "${common[@]}"
run_json "$out/ring_np2_contiguous.json" "${mpi[@]}" -np 2 "$ring" "${contig[@]}" "${common[@]}"
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
