#!/usr/bin/env bash
# A model's decode step on an NVIDIA GPU (written for an H200): flashcl's
# decode and RWKV6 T=1 step in fa-bench's loop mode (--layers 32: 32 calls
# back to back, each on its own cache or state, one clFinish a step) beside
# PyTorch's SDPA cuDNN and flash backends (torch_sdpa.py --decode: per-call
# GPU time from a CUDA graph replay, wall time from an eager loop), in one
# run, f16, head dim 128, Hq=32 Hkv=8:
#   b1         B=1, 1024, 4096 and 32768 cached tokens
#   b8         B=8, 8192 cached tokens
#   b64        B=64, 2048 cached tokens, contiguous and paged (16)
#   paged32k   B=1, 32768 cached tokens, f16 and f32, contiguous and paged (16)
#   rwkv6      RWKV6 T=1 step, B=1 H=32 K=V=64 bf16, state in and out
# Each case's fa-bench JSON goes to OUT/loop_CASE.json.
#
# usage: bench/h200_loop.sh [BUILD_DIR [OUT_DIR]]   (defaults: build, h100-results)
source "$(dirname "${BASH_SOURCE[0]}")/h100_common.sh"
export PYTHONUNBUFFERED=1

loop=(--layers 32 --steps 20 --head-dim 128 --heads 32 --heads-kv 8 --peak 0 --plans)
declare -A cases=(
  [b1]="--batch 1 --context 1024,4096,32768 --dtype f16"
  [b8]="--batch 8 --context 8192 --dtype f16"
  [b64]="--batch 64 --context 2048 --page-size 0,16 --dtype f16"
  [paged32k]="--batch 1 --context 32768 --page-size 0,16 --dtype f16,f32"
)
command -v nvidia-smi >/dev/null && nvidia-smi -L
for name in b1 b8 b64 paged32k; do
  read -ra args <<<"${cases[$name]}"
  step_json "$out/loop_$name.json" "$fab" --op decode "${args[@]}" "${loop[@]}"
  step python3 "$here/torch_sdpa.py" --decode "${args[@]}" --layers 32 --steps 20 \
    --head-dim 128 --heads 32 --heads-kv 8 --backend cudnn,flash \
    --compare "$out/loop_$name.json"
done
step_json "$out/loop_rwkv6.json" "$fab" --op rwkv6-fwd --layers 32 --steps 20 \
  --batch 1 --heads 32 --head-dim 64 --dtype bf16,f16,f32 --peak 0 --plans
echo
echo "h200_loop.sh: the JSON files are in $out/"
exit $status
