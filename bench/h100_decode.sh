#!/usr/bin/env bash
# Benchmarks flashcl's attention against a KV cache (fa-bench --op decode)
# beside PyTorch (torch_sdpa.py --decode: SDPA flash, cuDNN, efficient, and
# flash-attn's flash_attn_with_kvcache where it imports) on an NVIDIA GPU
# (written for an H100), in f16, bf16 and f32, head dim 128:
#   gqa32k     B=1 Hq=32 Hkv=8, 32768 cached tokens, one new token: contiguous
#              cache and paged with pages of 16 and 256 tokens
#   batch8     B=8 Hq=32 Hkv=8, 8192 cached tokens, one new token
#   mha4k      B=1 H=32 (MHA), 4096 cached tokens, one new token
#   prefill    B=1 Hq=32 Hkv=8, 512 new tokens (causal) on 8192 cached ones
#   sweep      B=1 Hq=32 Hkv=8 f16, 1024 .. 65536 cached tokens, drawn by
#              plot.py to OUT/decode_sweep.svg (where python3 imports matplotlib)
# Each case's fa-bench JSON goes to OUT/decode_CASE.json; torch_sdpa.py
# prints fa-bench's rows above its own and the time ratios.
#
# usage: bench/h100_decode.sh [BUILD_DIR [OUT_DIR]]   (defaults: build, h100-results)
#
# NVIDIA's OpenCL driver is registered through a private ICD directory, as
# in h100.sh. A failing step is reported and the others still run; the exit
# status is 1 if any failed.
source "$(dirname "${BASH_SOURCE[0]}")/h100_common.sh"
export PYTHONUNBUFFERED=1

common=(--head-dim 128 --iters 50 --warmup 10)
declare -A cases=(
  [gqa32k]="--batch 1 --heads 32 --heads-kv 8 --context 32768 --page-size 0,16,256"
  [batch8]="--batch 8 --heads 32 --heads-kv 8 --context 8192"
  [mha4k]="--batch 1 --heads 32 --heads-kv 32 --context 4096"
  [prefill]="--batch 1 --heads 32 --heads-kv 8 --context 8192 --seqlen 512 --causal 1"
)

command -v nvidia-smi >/dev/null && nvidia-smi -L
for name in gqa32k batch8 mha4k prefill; do
  read -ra args <<<"${cases[$name]}"
  step_json "$out/decode_$name.json" "$fab" --op decode "${args[@]}" "${common[@]}" \
    --dtype f16,bf16,f32
  step python3 "$here/torch_sdpa.py" --decode "${args[@]}" "${common[@]}" \
    --dtype f16,bf16,f32 --compare "$out/decode_$name.json"
done

sweep=(--batch 1 --heads 32 --heads-kv 8 --context 1024,4096,16384,65536 --dtype f16
       "${common[@]}")
step_json "$out/decode_sweep.json" "$fab" --op decode "${sweep[@]}"
step_json "$out/torch_decode_sweep.json" python3 "$here/torch_sdpa.py" --decode "${sweep[@]}"
if python3 -c "import matplotlib" 2>/dev/null; then
  step python3 "$here/plot.py" "$out/decode_sweep.svg" "$out/decode_sweep.json" \
    "$out/torch_decode_sweep.json"
else
  echo
  echo "h100_decode.sh: python3 cannot import matplotlib: no plot; elsewhere, draw it with"
  echo "  python3 bench/plot.py decode_sweep.svg $out/decode_sweep.json $out/torch_decode_sweep.json"
fi
echo
echo "h100_decode.sh: the JSON files are in $out/"
exit $status
