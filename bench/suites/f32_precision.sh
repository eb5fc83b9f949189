#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2054 # commas separate fa-bench's lists
# f32 at each FCL_OPTION_F32_PRECISION level beside its anchors in one run:
#   attention forward B4 H32 N4096 D128, causal 0 and 1: flashcl f32 at
#     highest and high, flashcl f16; PyTorch's SDPA (efficient) f32 at
#     torch.set_float32_matmul_precision highest and high, and f16
#     (efficient and cuDNN)
#   RWKV6 chunked forward and backward, B32 H16 T512 and B2 H16 T16384,
#     K=V=128: flashcl f32 at highest and medium, bf16; fla's chunk_rwkv6 f32
#     (its products are one TF32 dot) and bf16
# Each fa-bench table goes to OUT/prec_*.json (stdout keeps the anchors'
# tables), and fa-bench checks every output against the double reference
# with the level's tolerance (flashcl.h).
#
# usage: bench/suites/f32_precision.sh [--device SEL] [--build DIR] [--out DIR] [--dry-run]
#   defaults: the library's default device, build, results/<device name>
#   (bench/suites/common.sh has the details)
# The PyTorch and fla steps need PyTorch with CUDA (an NVIDIA GPU); fla as
# for bench/suites/rwkv6.sh: wheels in bench/vendor, else installed. A
# failing step is reported and the others still run; the exit status is 1
# if any failed.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
fla_site

att=(--op fwd --batch 4 --heads 32 --seqlen 4096 --head-dim 128 --causal 0,1 --peak 0)
for p in highest high; do
  step_json "$out/prec_fwd_f32_$p.json" "${fab[@]}" "${att[@]}" --dtype f32 --f32-precision $p
  step python3 "$py/torch_sdpa.py" --batch 4 --heads 32 --seqlen 4096 --head-dim 128 \
    --causal 0,1 --dtype f32 --backend efficient --f32-precision $p
done
step_json "$out/prec_fwd_f16.json" "${fab[@]}" "${att[@]}" --dtype f16
step python3 "$py/torch_sdpa.py" --batch 4 --heads 32 --seqlen 4096 --head-dim 128 \
  --causal 0,1 --dtype f16 --backend efficient,cudnn

shapes=("--batch 32 --heads 16 --seqlen 512 --head-dim 128"
        "--batch 2 --heads 16 --seqlen 16384 --head-dim 128")
for i in 0 1; do
  # shellcheck disable=SC2086 # each shape is a list of arguments
  for p in highest medium; do
    step_json "$out/prec_rwkv6_${i}_f32_$p.json" "${fab[@]}" --op rwkv6-fwd,rwkv6-bwd ${shapes[i]} \
      --dtype f32 --algorithm chunked --peak 0 --f32-precision $p
  done
  # shellcheck disable=SC2086
  step_json "$out/prec_rwkv6_${i}_bf16.json" "${fab[@]}" --op rwkv6-fwd,rwkv6-bwd ${shapes[i]} \
    --dtype bf16 --algorithm chunked --peak 0
  # shellcheck disable=SC2086
  step python3 "$py/fla_rwkv6.py" ${shapes[i]} --dtype f32,bf16 --impl chunk
done
finish
