#!/usr/bin/env bash
# f32 at each FCL_OPTION_F32_PRECISION level on an NVIDIA GPU, beside its
# anchors in one run:
#   attention forward B4 H32 N4096 D128, causal 0 and 1: flashcl f32 at
#     highest and high, flashcl f16; PyTorch's SDPA (efficient) f32 at
#     torch.set_float32_matmul_precision highest and high, and f16
#   RWKV6 chunked forward and backward, B32 H16 T512 and B2 H16 T16384,
#     K=V=128: flashcl f32 at highest and medium, bf16; fla's chunk_rwkv6 f32
#     (its products are one TF32 dot) and bf16
# Each fa-bench table goes to OUT/prec_*.json as well as stdout, and fa-bench
# checks every output against the double reference with the level's
# tolerance (flashcl.h).
#
# usage: bench/f32_precision.sh [BUILD_DIR [OUT_DIR]]   (defaults: build, h100-results)
# fla as for bench/h100_rwkv6.sh: wheels in bench/vendor, else installed.
source "$(dirname "${BASH_SOURCE[0]}")/h100_common.sh"
site=$out/fla-site
if compgen -G "$here/vendor/*.whl" >/dev/null; then
  rm -rf "$site" && mkdir -p "$site"
  python3 -c 'import sys, zipfile; [zipfile.ZipFile(w).extractall(sys.argv[1]) for w in sys.argv[2:]]' \
    "$site" "$here"/vendor/*.whl
  export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1
command -v nvidia-smi >/dev/null && nvidia-smi -L

att=(--op fwd --batch 4 --heads 32 --seqlen 4096 --head-dim 128 --causal 0,1 --peak 0)
for p in highest high; do
  step_json "$out/prec_fwd_f32_$p.json" "$fab" "${att[@]}" --dtype f32 --f32-precision $p
  step python3 "$here/torch_sdpa.py" --batch 4 --heads 32 --seqlen 4096 --head-dim 128 \
    --causal 0,1 --dtype f32 --backend efficient --f32-precision $p
done
step_json "$out/prec_fwd_f16.json" "$fab" "${att[@]}" --dtype f16
step python3 "$here/torch_sdpa.py" --batch 4 --heads 32 --seqlen 4096 --head-dim 128 \
  --causal 0,1 --dtype f16 --backend efficient,cudnn

shapes=("--batch 32 --heads 16 --seqlen 512 --head-dim 128"
        "--batch 2 --heads 16 --seqlen 16384 --head-dim 128")
for i in 0 1; do
  # shellcheck disable=SC2086 # each shape is a list of arguments
  for p in highest medium; do
    step_json "$out/prec_rwkv6_${i}_f32_$p.json" "$fab" --op rwkv6-fwd,rwkv6-bwd ${shapes[i]} \
      --dtype f32 --algorithm chunked --peak 0 --f32-precision $p
  done
  # shellcheck disable=SC2086
  step_json "$out/prec_rwkv6_${i}_bf16.json" "$fab" --op rwkv6-fwd,rwkv6-bwd ${shapes[i]} \
    --dtype bf16 --algorithm chunked --peak 0
  # shellcheck disable=SC2086
  step python3 "$here/fla_rwkv6.py" ${shapes[i]} --dtype f32,bf16 --impl chunk
done
exit $status
