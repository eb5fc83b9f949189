#!/usr/bin/env bash
# Where the decode kernels' time goes on an NVIDIA GPU (written for an
# H200): f16 and f32 decode, B=1 Hq=32 Hkv=8 D=128, one new token,
#   tiny      16 .. 1024 cached keys in one split: the kernel's fixed cost
#   splits    1024, 4096, 32768 keys at --num-splits 0 (auto) .. 64: the
#             split count against the merge inside the kernel
#   mma, portable  the tensor-core and the portable kernel at other
#             parameters (the tuning override, --params)
#   f32paged  f32 32768 keys, contiguous and paged (16), by split count
#   floors    a tiny attention forward and RWKV6's T=1 step
# Each part's CSV goes to OUT/sweep_PART*.csv; OUT/sweep_params.txt names
# the parameters of the numbered mma_N and portable_N files.
#
# usage: bench/h200_decode_sweep.sh [BUILD_DIR [OUT_DIR]]   (defaults: build, h100-results)
source "$(dirname "${BASH_SOURCE[0]}")/h100_common.sh"
base=(--op decode --batch 1 --heads 32 --heads-kv 8 --head-dim 128 --iters 50 --warmup 10
      --peak 0 --check 0)
step_csv() { local file=$1; shift; echo "== $* --csv > $file"; "$@" --csv >"$file" || status=1; }
step_csv "$out/sweep_tiny.csv" "$fab" "${base[@]}" --dtype f16,f32 --context 16,64,256,1024 \
  --num-splits 1
step_csv "$out/sweep_splits.csv" "$fab" "${base[@]}" --dtype f16 --context 1024,4096,32768 \
  --num-splits 0,1,2,4,8,16,32,64
i=0
for p in WG=128,KSUB=2,WAVES=3,SPLIT_KEYS=256 WG=128,KSUB=1,WAVES=3,SPLIT_KEYS=128 \
         WG=64,KSUB=1,WAVES=4,SPLIT_KEYS=128 WG=256,KSUB=1,WAVES=2,SPLIT_KEYS=256; do
  echo "mma_$i $p" >>"$out/sweep_params.txt"
  step_csv "$out/sweep_mma_$i.csv" "$fab" "${base[@]}" --dtype f16 --context 1024,4096,32768 \
    --params "attention_decode_mma:$p"
  i=$((i + 1))
done
i=0
for p in WG=128,TPK=16,KPW=2,MAX_ROWS=16,WAVES=4,SPLIT_KEYS=256 \
         WG=128,TPK=16,KPW=4,MAX_ROWS=16,WAVES=4,SPLIT_KEYS=256 \
         WG=128,TPK=8,KPW=4,MAX_ROWS=16,WAVES=4,SPLIT_KEYS=128; do
  echo "portable_$i $p" >>"$out/sweep_params.txt"
  step_csv "$out/sweep_portable_$i.csv" "$fab" "${base[@]}" --dtype f16,f32 --context 1024,32768 \
    --page-size 0,16 --params "attention_decode:$p"
  i=$((i + 1))
done
step_csv "$out/sweep_f32paged.csv" "$fab" "${base[@]}" --dtype f32 --context 32768 \
  --page-size 0,16 --num-splits 0,16,32,64,128
step_csv "$out/sweep_floors.csv" "$fab" --op fwd,rwkv6-fwd --batch 1 --heads 32 --head-dim 64 \
  --seqlen 1 --dtype f16,f32 --causal 0 --iters 50 --warmup 10 --peak 0 --check 0
exit $status
