# shellcheck shell=bash
# Sourced by every suite in bench/suites/ after it has set `suite_arg` (a
# function taking a suite-specific option and its value; returns 1 for an
# option it does not know) where it has options of its own. It parses the
# options every suite takes:
#   --device SEL   the device: passed to fa-bench (and fa-ring-bench) as
#                  --device SEL and exported as FCL_DEVICE for the library
#                  and the tools it runs; default: the library's default
#                  device ($FCL_DEVICE, else the first GPU, else the CPU)
#   --build DIR    the build tree holding bench/fa-bench (default: build)
#   --out DIR      where the JSON, CSV and plots go (default:
#                  results/<device>, the device's name as fa-bench prints it
#                  on its "device:" line, made a file name: "NVIDIA H100 80GB
#                  HBM3" -> results/nvidia-h100-80gb-hbm3)
#   --dry-run      print each step's command line instead of running it
#   -h, --help     the suite's own header
# and, for a suite that sets suite_shapes (how many numbered shapes it has)
# before sourcing this file:
#   --shapes 1,3   those shapes only, as shapes_sel ("1 3"; default: the
#                  SHAPES environment variable, else all)
# and sets: me, here (bench/), py (bench/py), build, out, fab (fa-bench and
# its --device, an array), dev_args (--device SEL, or nothing), dry,
# status; and the step functions: a failing step is reported, the others
# still run, and `status` becomes 1.
#
# No suite registers an OpenCL driver: the device must be visible to the
# OpenCL ICD loader already (docs/benchmarks.md, "The environment").
set -uo pipefail
me=$(basename "$0")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck disable=SC2034 # py, dry: for the suites
py=$here/py
build=build
out=
device=${suite_device:-} # a suite's own default (ring_multi_gpu.sh: 0:%r)
dry=0

suite_help() { # the suite's header comment, without the #!
  sed -n '2,/^[^#]/{/^# shellcheck/d;/^#/{s/^# \{0,1\}//;p}}' "$0"
}
if [[ -n ${suite_shapes:-} ]]; then
  shapes_sel=${SHAPES:-$(seq -s ' ' 1 "$suite_shapes")}
  suite_arg() {
    case $1 in
      --shapes) shapes_sel=${2//,/ } ;;
      *) return 1 ;;
    esac
  }
fi
while (($#)); do
  case $1 in
    --device | --build | --out)
      (($# >= 2)) || { echo "$me: $1 needs a value" >&2; exit 2; }
      case $1 in
        --device) device=$2 ;;
        --build) build=$2 ;;
        --out) out=$2 ;;
      esac
      shift 2 ;;
    --device=*) device=${1#*=}; shift ;;
    --build=*) build=${1#*=}; shift ;;
    --out=*) out=${1#*=}; shift ;;
    --dry-run) dry=1; shift ;;
    -h | --help) suite_help; exit 0 ;;
    --*=*)
      if declare -F suite_arg >/dev/null && suite_arg "${1%%=*}" "${1#*=}"; then
        shift
      else
        echo "$me: unknown option ${1%%=*} (--help lists them)" >&2; exit 2
      fi ;;
    *)
      if [[ $1 == --* ]] && (($# >= 2)) && declare -F suite_arg >/dev/null &&
         suite_arg "$1" "$2"; then
        shift 2
      else
        echo "$me: unknown option or missing value: $1 (--help lists them)" >&2; exit 2
      fi ;;
  esac
done
if [[ -n ${suite_shapes:-} ]]; then
  for n in $shapes_sel; do
    if ! [[ $n =~ ^[0-9]+$ ]] || ((n < 1 || n > suite_shapes)); then
      echo "$me: shape $n is not $(seq -s ', ' 1 $((suite_shapes - 1))) or $suite_shapes" >&2
      exit 2
    fi
  done
fi

fab=("$build/bench/fa-bench")
dev_args=()
if [[ $device == *%r* ]]; then # fa-ring-bench's per-rank selector: rank 0's for fa-bench
  dev_args=(--device "$device")
  fab+=(--device "${device//%r/0}")
elif [[ -n $device ]]; then
  dev_args=(--device "$device")
  fab+=("${dev_args[@]}")
  export FCL_DEVICE=$device
fi
if [[ ! -x ${fab[0]} ]]; then
  echo "$me: ${fab[0]} not found; build first: cmake -S . -B $build && cmake --build $build -j" >&2
  exit 2
fi

# device_slug SEL...: the device's name (the middle field of fa-bench's
# "device: platform / device / driver" line) as a file name. A tiny case
# runs for it (fa-bench prints the line before its first case).
device_slug() {
  local line name
  line=$("$build/bench/fa-bench" "$@" --op fwd --batch 1 --heads 1 --seqlen 16 --head-dim 16 \
         --dtype f32 --causal 0 --iters 1 --warmup 0 --peak 0 --check 0 2>&1 |
         sed -n 's/^device: //p' | head -1)
  [[ -n $line ]] || return 1
  name=$line
  [[ $line == *" / "*" / "* ]] && { name=${line#* / }; name=${name% / *}; }
  name=$(printf '%s' "$name" | tr '[:upper:]' '[:lower:]' | tr -cs 'a-z0-9' '-')
  name=${name#-}
  printf '%s\n' "${name%-}"
}
if [[ -z $out ]]; then
  slug=$(device_slug "${fab[@]:1}") || {
    echo "$me: fa-bench cannot open the device${device:+ $device}; see docs/benchmarks.md" \
         "(The environment), or give --out DIR" >&2
    exit 2
  }
  out=results/$slug
fi
mkdir -p "$out"
if [[ -n $device ]]; then
  echo "$me: device $device, results in $out/"
else
  echo "$me: the library's default device, results in $out/"
fi
export PYTHONUNBUFFERED=1
command -v nvidia-smi >/dev/null && nvidia-smi -L

status=0
# step CMD...: runs CMD, its output to stdout.
step() {
  echo
  echo "== $*"
  ((dry)) && return 0
  "$@" || { echo "$me: failed (exit $?): $*"; status=1; }
}
# step_to FILE FLAG CMD...: runs CMD FLAG with its output into FILE.
step_to() {
  local file=$1 flag=$2
  shift 2
  echo
  echo "== $* $flag > $file"
  ((dry)) && return 0
  "$@" "$flag" >"$file" || { echo "$me: failed (exit $?): $*"; status=1; }
}
# step_json FILE CMD...: CMD --json into FILE (the table comes from
# torch_sdpa.py --compare FILE, or from the JSON by hand); step_csv likewise.
step_json() { step_to "$1" --json "${@:2}"; }
step_csv() { step_to "$1" --csv "${@:2}"; }
# have_matplotlib: python3 imports matplotlib (for plot.py).
have_matplotlib() { python3 -c "import matplotlib" 2>/dev/null; }
# fla_site: puts fla on PYTHONPATH from the wheels in bench/vendor
# (fla-core, einops, packaging; not in git: on a machine with a network,
#   pip download fla-core einops packaging --no-deps -d bench/vendor
# ), unpacked to OUT/fla-site; without them an installed fla is used.
fla_site() {
  local site=$out/fla-site
  if compgen -G "$here/vendor/*.whl" >/dev/null; then
    ((dry)) && { echo "$me: would unpack $here/vendor/*.whl to $site"; return; }
    rm -rf "$site" && mkdir -p "$site"
    python3 -c 'import sys, zipfile; [zipfile.ZipFile(w).extractall(sys.argv[1]) for w in sys.argv[2:]]' \
      "$site" "$here"/vendor/*.whl || { echo "$me: cannot unpack the wheels"; status=1; }
    export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
  else
    echo "$me: no wheels in $here/vendor: fla must be installed"
  fi
}
# ring_setup: for ring.sh and ring_multi_gpu.sh: fa-ring-bench's path and
# mpirun checked (exit 2 where either is missing), the mpirun command line
# (array `mpi`) and `ring` (fa-ring-bench and its --device, an array).
ring_setup() {
  ring=("$build/bench/fa-ring-bench" "${dev_args[@]}")
  if ! command -v mpirun >/dev/null; then
    echo "$me: mpirun not found: MPI is not installed here." >&2
    echo "$me: install it (Debian: apt-get install -y libopenmpi-dev openmpi-bin), rebuild" >&2
    echo "$me: (cmake -S . -B $build && cmake --build $build -j) and run this again." >&2
    exit 2
  fi
  if [[ ! -x ${ring[0]} ]]; then
    echo "$me: ${ring[0]} not found: CMake did not find MPI when $build was configured." >&2
    echo "$me: install libopenmpi-dev, then: cmake -S . -B $build && cmake --build $build -j" >&2
    exit 2
  fi
  mpi=(mpirun)
  if mpirun --version 2>&1 | grep -q "Open MPI"; then
    mpi+=(--oversubscribe)
    # Open MPI refuses root without these; harmless otherwise.
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    # Open MPI passes OCL_ICD_FILENAMES to the ranks cut at its first ':'
    # (docs/benchmarks.md, "The environment").
    if [[ ${OCL_ICD_FILENAMES:-} == *:* ]]; then
      echo "$me: warning: OCL_ICD_FILENAMES=$OCL_ICD_FILENAMES holds several files;" \
           "Open MPI gives the ranks only the first"
    fi
  fi
  mpirun --version 2>&1 | head -1
}
# ring_smoke: a tiny two-rank run first, on the suite's device. Open MPI's
# shared-memory single copy (CMA) is refused in some containers; then it
# runs without it (slower transfers, said here).
ring_smoke() {
  local smoke=(--op fwd --seqlen 256 --heads 2 --head-dim 64 --iters 1 --warmup 0)
  echo
  echo "== ${mpi[*]} -np 2 ${ring[*]} ${smoke[*]}   (smoke)"
  ((dry)) && return 0
  "${mpi[@]}" -np 2 "${ring[@]}" "${smoke[@]}" >/dev/null 2>&1 && return
  export OMPI_MCA_btl_vader_single_copy_mechanism=none
  echo "$me: 2 ranks failed with Open MPI's defaults; using btl_vader_single_copy_mechanism=none"
  "${mpi[@]}" -np 2 "${ring[@]}" "${smoke[@]}" || { echo "$me: 2 ranks do not run here" >&2; exit 1; }
}
# run_tee FILE LIMIT_S CMD...: one step, its output shown and kept in FILE,
# stopped after LIMIT_S seconds (0: no limit); a failure sets status=1.
run_tee() {
  local file=$1 limit=$2
  shift 2
  echo
  echo "== $* | tee $file"
  ((dry)) && return 0
  timeout "$limit" "$@" | tee "$file"
  ((PIPESTATUS[0] == 0)) || { echo "$me: failed or timed out: $*"; status=1; }
}
# finish: the closing line and the exit status (1 if a step failed).
finish() {
  echo
  echo "$me: the results are in $out/"
  exit "$status"
}
