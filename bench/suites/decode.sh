#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2054 # commas separate fa-bench's lists
# Attention against a KV cache (fa-bench --op decode) beside PyTorch, in
# parts (--part, a comma list; default table,loop):
#
# table: flashcl's decode beside PyTorch (torch_sdpa.py --decode: SDPA flash,
# cuDNN, efficient, and flash-attn's flash_attn_with_kvcache where it
# imports), in f16, bf16 and f32, head dim 128:
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
# loop: a model's decode step: flashcl's decode and RWKV6 T=1 step in
# fa-bench's loop mode (--layers 32: 32 calls back to back, each on its own
# cache or state, one clFinish a step) beside PyTorch's SDPA cuDNN and flash
# backends (torch_sdpa.py --decode: per-call GPU time from a CUDA graph
# replay, wall time from an eager loop), f16, head dim 128, Hq=32 Hkv=8:
#   b1         B=1, 1024, 4096 and 32768 cached tokens
#   b8         B=8, 8192 cached tokens
#   b64        B=64, 2048 cached tokens, contiguous and paged (16)
#   paged32k   B=1, 32768 cached tokens, f16 and f32, contiguous and paged (16)
#   rwkv6      RWKV6 T=1 step, B=1 H=32 K=V=64 bf16, f16, f32, state in and out
#   b1_cmdbuf  b1 with FCL_COMMAND_BUFFER=1: the plans' runs from a
#              recorded command buffer (if the device offers
#              cl_khr_command_buffer), where b1's enqueue their launches
# Each case's fa-bench JSON goes to OUT/loop_CASE.json.
#
# sweep: where the decode kernels' time goes, f16 and f32, B=1 Hq=32 Hkv=8
# D=128, one new token (fa-bench only):
#   tiny      16 .. 4096 cached keys in one split, in loop mode (32 layers,
#             the calls also timed back to back): the kernel's fixed cost
#             and a split's time a block of keys
#   splits    1024, 4096, 32768 keys at --num-splits 0 (auto) .. 64: the
#             split count against the merge inside the kernel
#   mma, portable  the tensor-core and the portable kernel at other
#             parameters (the tuning override, --params)
#   f32paged  f32 32768 keys, contiguous and paged (16), by split count
#   floors    a tiny attention forward and RWKV6's T=1 step
# Each part's CSV goes to OUT/sweep_PART*.csv; OUT/sweep_params.txt names
# the parameters of the numbered mma_N and portable_N files.
#
# quant: decode on quantized caches (--cache-dtype q8_0, q4_0, fp8_e4m3,
# fp8_e5m2, q8_0:q4_0) beside the f16 cache in the same run, f16 queries,
# head dim 128, Hq=32 Hkv=8 (fa-bench only; bench/py/cache_ratio.py prints
# each time over the f16 cache's):
#   b1        B=1, 32768, 4096 and 1024 cached tokens
#   b8        B=8, 8192 cached tokens
#   append    B=1, 32768 cached tokens, the new token appended in the call
#   prefill   B=1, 512 new tokens (causal) on 8192 cached ones, q8_0
# Each case's JSON goes to OUT/quant_CASE.json.
#
# usage: bench/suites/decode.sh [--device SEL] [--build DIR] [--out DIR]
#                               [--part table,loop,sweep,quant] [--dry-run]
#   defaults: the library's default device, build, results/<device name>,
#   --part table,loop (bench/suites/common.sh has the details)
#
# The PyTorch steps need PyTorch with CUDA (an NVIDIA GPU). A failing step
# is reported and the others still run; the exit status is 1 if any failed.
parts=table,loop
suite_arg() {
  case $1 in
    --part)
      parts=$2
      for p in ${parts//,/ }; do
        case $p in
          table | loop | sweep | quant) ;;
          *) echo "decode.sh: --part $p: not table, loop, sweep or quant" >&2; exit 2 ;;
        esac
      done ;;
    *) return 1 ;;
  esac
}
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
part() { [[ ",$parts," == *",$1,"* ]]; }

common=(--head-dim 128 --iters 50 --warmup 10)
if part table; then
  declare -A cases=(
    [gqa32k]="--batch 1 --heads 32 --heads-kv 8 --context 32768 --page-size 0,16,256"
    [batch8]="--batch 8 --heads 32 --heads-kv 8 --context 8192"
    [mha4k]="--batch 1 --heads 32 --heads-kv 32 --context 4096"
    [prefill]="--batch 1 --heads 32 --heads-kv 8 --context 8192 --seqlen 512 --causal 1"
  )
  for name in gqa32k batch8 mha4k prefill; do
    read -ra args <<<"${cases[$name]}"
    step_json "$out/decode_$name.json" "${fab[@]}" --op decode "${args[@]}" "${common[@]}" \
      --dtype f16,bf16,f32
    step python3 "$py/torch_sdpa.py" --decode "${args[@]}" "${common[@]}" \
      --dtype f16,bf16,f32 --compare "$out/decode_$name.json"
  done

  sweep=(--batch 1 --heads 32 --heads-kv 8 --context 1024,4096,16384,65536 --dtype f16
         "${common[@]}")
  step_json "$out/decode_sweep.json" "${fab[@]}" --op decode "${sweep[@]}"
  step_json "$out/torch_decode_sweep.json" python3 "$py/torch_sdpa.py" --decode "${sweep[@]}"
  if have_matplotlib; then
    step python3 "$py/plot.py" "$out/decode_sweep.svg" "$out/decode_sweep.json" \
      "$out/torch_decode_sweep.json"
  else
    echo
    echo "$me: python3 cannot import matplotlib: no plot; elsewhere, draw it with"
    echo "  python3 bench/py/plot.py decode_sweep.svg $out/decode_sweep.json $out/torch_decode_sweep.json"
  fi
fi

if part loop; then
  loop=(--layers 32 --steps 20 --head-dim 128 --heads 32 --heads-kv 8 --peak 0 --plans)
  declare -A loops=(
    [b1]="--batch 1 --context 1024,4096,32768 --dtype f16"
    [b8]="--batch 8 --context 8192 --dtype f16"
    [b64]="--batch 64 --context 2048 --page-size 0,16 --dtype f16"
    [paged32k]="--batch 1 --context 32768 --page-size 0,16 --dtype f16,f32"
  )
  for name in b1 b8 b64 paged32k; do
    read -ra args <<<"${loops[$name]}"
    step_json "$out/loop_$name.json" "${fab[@]}" --op decode "${args[@]}" "${loop[@]}"
    step python3 "$py/torch_sdpa.py" --decode "${args[@]}" --layers 32 --steps 20 \
      --head-dim 128 --heads 32 --heads-kv 8 --backend cudnn,flash \
      --compare "$out/loop_$name.json"
  done
  # The public plans' runs from a recorded command buffer, beside the b1
  # case's launch by launch (where the device offers cl_khr_command_buffer;
  # elsewhere the two are the same).
  step_json "$out/loop_b1_cmdbuf.json" env FCL_COMMAND_BUFFER=1 "${fab[@]}" --op decode \
    --batch 1 --context 1024,4096,32768 --dtype f16 "${loop[@]}"
  step_json "$out/loop_rwkv6.json" "${fab[@]}" --op rwkv6-fwd --layers 32 --steps 20 \
    --batch 1 --heads 32 --head-dim 64 --dtype bf16,f16,f32 --peak 0 --plans
fi

if part quant; then
  quant=(--op decode --heads 32 --heads-kv 8 --head-dim 128 --dtype f16 --iters 50 --warmup 10
         --peak 0)
  declare -A qcases=(
    [b1]="--batch 1 --context 32768,4096,1024 --cache-dtype same,q8_0,q4_0,fp8_e4m3,fp8_e5m2,q8_0:q4_0"
    [b8]="--batch 8 --context 8192 --cache-dtype same,q8_0,q4_0,fp8_e4m3,fp8_e5m2"
    [append]="--batch 1 --context 32768 --append --cache-dtype same,q8_0,q4_0,fp8_e4m3"
    [prefill]="--batch 1 --context 8192 --seqlen 512 --causal 1 --cache-dtype same,q8_0"
  )
  for name in b1 b8 append prefill; do
    read -ra args <<<"${qcases[$name]}"
    step_json "$out/quant_$name.json" "${fab[@]}" "${quant[@]}" "${args[@]}"
  done
  step python3 "$py/cache_ratio.py" "$out/quant_b1.json" "$out/quant_b8.json" \
    "$out/quant_append.json" "$out/quant_prefill.json"
fi

if part sweep; then
  base=(--op decode --batch 1 --heads 32 --heads-kv 8 --head-dim 128 --iters 50 --warmup 10
        --peak 0 --check 0)
  ((dry)) || : >"$out/sweep_params.txt"
  step_csv "$out/sweep_tiny.csv" "${fab[@]}" "${base[@]}" --dtype f16,f32 \
    --context 16,64,256,1024,4096 --num-splits 1 --layers 32 --steps 10
  step_csv "$out/sweep_splits.csv" "${fab[@]}" "${base[@]}" --dtype f16 \
    --context 1024,4096,32768 --num-splits 0,1,2,4,8,16,32,64
  i=0
  for p in WG=128,KSUB=2,WAVES=3,SPLIT_KEYS=256 WG=128,KSUB=1,WAVES=3,SPLIT_KEYS=128 \
           WG=64,KSUB=1,WAVES=4,SPLIT_KEYS=128 WG=256,KSUB=1,WAVES=2,SPLIT_KEYS=256; do
    ((dry)) || echo "mma_$i $p" >>"$out/sweep_params.txt"
    step_csv "$out/sweep_mma_$i.csv" "${fab[@]}" "${base[@]}" --dtype f16 \
      --context 1024,4096,32768 --params "attention_decode_mma:$p"
    i=$((i + 1))
  done
  i=0
  for p in WG=128,TPK=16,KPW=2,MAX_ROWS=16,WAVES=4,SPLIT_KEYS=256 \
           WG=128,TPK=16,KPW=4,MAX_ROWS=16,WAVES=4,SPLIT_KEYS=256 \
           WG=128,TPK=8,KPW=4,MAX_ROWS=16,WAVES=4,SPLIT_KEYS=128; do
    ((dry)) || echo "portable_$i $p" >>"$out/sweep_params.txt"
    step_csv "$out/sweep_portable_$i.csv" "${fab[@]}" "${base[@]}" --dtype f16,f32 \
      --context 1024,32768 --page-size 0,16 --params "attention_decode:$p"
    i=$((i + 1))
  done
  step_csv "$out/sweep_f32paged.csv" "${fab[@]}" "${base[@]}" --dtype f32 --context 32768 \
    --page-size 0,16 --num-splits 0,16,32,64,128
  step_csv "$out/sweep_floors.csv" "${fab[@]}" --op fwd,rwkv6-fwd --batch 1 --heads 32 \
    --head-dim 64 --seqlen 1 --dtype f16,f32 --causal 0 --iters 50 --warmup 10 --peak 0 --check 0
fi
finish
