#!/usr/bin/env bash
# Benchmarks flashcl against PyTorch on an NVIDIA GPU (written for an H100),
# printing every table to stdout:
#   fa-bench fwd        B=4 H=32 N=4096, D=64 and 128, f16 and f32, causal 0 and 1
#   fa-bench bwd        the same shapes, f16, causal 1
#   fa-bench rwkv6-fwd, rwkv6-bwd  B=8 H=32 T=4096 K=V=64, bf16 and f32,
#                       recurrent and chunked
#   torch_sdpa.py       the same attention shapes (flash, cuDNN, efficient), then
#                       --bwd: the backward of the flash and cuDNN backends, f16
#
# usage: bench/h100.sh [BUILD_DIR]   (default: build; fa-bench must be built there)
#
# NVIDIA's OpenCL driver is registered through a private ICD directory, since
# the container's /etc/OpenCL/vendors may not list it. A failing step is
# reported and the others still run; the exit status is 1 if any failed.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=${1:-build}
fab=$build/bench/fa-bench
if [[ ! -x $fab ]]; then
  echo "h100.sh: $fab not found; build first: cmake -S . -B $build && cmake --build $build -j" >&2
  exit 2
fi

mkdir -p /tmp/icd
echo /usr/local/nvidia/lib64/libnvidia-opencl.so.1 >/tmp/icd/nvidia.icd
cp /etc/OpenCL/vendors/*.icd /tmp/icd/ 2>/dev/null || true
export OCL_ICD_VENDORS=/tmp/icd
export FCL_DEVICE=nvidia

status=0
step() {
  echo
  echo "== $*"
  "$@" || { echo "h100.sh: failed (exit $?): $*"; status=1; }
}

attn=(--batch 4 --heads 32 --seqlen 4096)
rwkv=(--batch 8 --heads 32 --seqlen 4096 --head-dim 64 --dtype "bf16,f32"
      --algorithm "recurrent,chunked")

command -v nvidia-smi >/dev/null && nvidia-smi -L
for d in 64 128; do
  step "$fab" --op fwd "${attn[@]}" --head-dim $d --dtype f16,f32 --causal 0,1
done
for d in 64 128; do
  step "$fab" --op bwd "${attn[@]}" --head-dim $d --dtype f16 --causal 1
done
step "$fab" --op rwkv6-fwd,rwkv6-bwd "${rwkv[@]}"

export PYTHONUNBUFFERED=1
for d in 64 128; do
  step python3 "$here/torch_sdpa.py" "${attn[@]}" --head-dim $d --dtype f16,f32 --causal 0,1
done
for d in 64 128; do
  step python3 "$here/torch_sdpa.py" --bwd "${attn[@]}" --head-dim $d --dtype f16 --causal 1 \
    --backend flash,cudnn
done
exit $status
