# Sourced by bench/h100.sh and bench/h100_decode.sh: their arguments
# (BUILD_DIR, OUT_DIR), fa-bench's path, NVIDIA's OpenCL driver registered
# through a private ICD directory (the container's /etc/OpenCL/vendors may
# not list it), and the step functions: a failing step is reported, the
# others still run, and `status` becomes 1.
set -uo pipefail
me=$(basename "$0")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=${1:-build}
out=${2:-h100-results}
fab=$build/bench/fa-bench
if [[ ! -x $fab ]]; then
  echo "$me: $fab not found; build first: cmake -S . -B $build && cmake --build $build -j" >&2
  exit 2
fi
mkdir -p "$out"

mkdir -p /tmp/icd
echo /usr/local/nvidia/lib64/libnvidia-opencl.so.1 >/tmp/icd/nvidia.icd
cp /etc/OpenCL/vendors/*.icd /tmp/icd/ 2>/dev/null || true
export OCL_ICD_VENDORS=/tmp/icd
export FCL_DEVICE=nvidia

status=0
step() {
  echo
  echo "== $*"
  "$@" || { echo "$me: failed (exit $?): $*"; status=1; }
}
# step_json FILE CMD...: runs CMD with --json into FILE (the table comes from
# torch_sdpa.py --compare FILE, or from the JSON by hand).
step_json() {
  local file=$1
  shift
  echo
  echo "== $* --json > $file"
  "$@" --json >"$file" || { echo "$me: failed (exit $?): $*"; status=1; }
}
