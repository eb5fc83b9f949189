# Sourced by bench/h100_ring.sh and bench/multi_gpu_ring.sh after
# h100_common.sh: fa-ring-bench's path and mpirun checked, the ranks'
# OpenCL driver, the mpirun command line (array `mpi`), a two-rank smoke
# run that falls back from Open MPI's single-copy transport where a
# container refuses it, and run_tee.
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
# ranks saw no GPU), and the device machine's ICD loader found no platform
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

# ring_smoke [ARGS...]: a tiny two-rank run first (ARGS added, e.g. the
# device). Open MPI's shared-memory single copy (CMA) is refused in some
# containers; then it runs without it (slower transfers, said here).
ring_smoke() {
  local smoke=(--op fwd --seqlen 256 --heads 2 --head-dim 64 --iters 1 --warmup 0 "$@")
  "${mpi[@]}" -np 2 "$ring" "${smoke[@]}" >/dev/null 2>&1 && return
  export OMPI_MCA_btl_vader_single_copy_mechanism=none
  echo "$me: 2 ranks failed with Open MPI's defaults; using btl_vader_single_copy_mechanism=none"
  "${mpi[@]}" -np 2 "$ring" "${smoke[@]}" || { echo "$me: 2 ranks do not run here" >&2; exit 1; }
}

# run_tee FILE LIMIT_S CMD...: one step, its output shown and kept in FILE,
# stopped after LIMIT_S seconds (0: no limit); a failure sets status=1.
run_tee() {
  local file=$1 limit=$2
  shift 2
  echo
  echo "== $* | tee $file"
  timeout "$limit" "$@" | tee "$file"
  ((PIPESTATUS[0] == 0)) || { echo "$me: failed or timed out: $*"; status=1; }
}
