#!/usr/bin/env bash
# Ring attention across the GPUs of one host (issue 24), one MPI rank per
# GPU over NVIDIA's OpenCL: correctness against the one-GPU call, strong
# scaling (RANKS at each of SEQLENS) and weak scaling (WEAK tokens per GPU),
# beside PyTorch FlashAttention-2's per-GPU bound (bench/ring_anchor.py).
# B1 H32 (MHA) D128, causal, zig-zag, forward and backward.
#
# usage: bench/multi_gpu_ring.sh [BUILD_DIR [OUT_DIR]]   (defaults: build, h100-results)
#   env: RANKS="2 4"  SEQLENS=32768,131072  DTYPES=f16,bf16  WEAK=32768
#        ITERS=3  HEADS=32  HEADS_KV=32  ANCHOR=1
# Writes OUT/ring_multi_np<R>.json, ring_weak_np<R>.json, ring_anchor.json
# and ring_tables.md; each step has a time limit, a failing one is reported
# and the others still run (exit 1 if any failed).
source "$(dirname "${BASH_SOURCE[0]}")/h100_common.sh"

source "$(dirname "${BASH_SOURCE[0]}")/ring_common.sh"
RANKS=${RANKS:-2 4} SEQLENS=${SEQLENS:-32768,131072} DTYPES=${DTYPES:-f16,bf16}
WEAK=${WEAK:-32768} ITERS=${ITERS:-3} HEADS=${HEADS:-32} HEADS_KV=${HEADS_KV:-32}
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
nvidia-smi topo -m 2>/dev/null | head -8
mpi+=(--bind-to none)
ring_smoke --device 0:%r
shape=(--device 0:%r --op fwd,bwd --causal 1 --batch 1 --heads "$HEADS" --heads-kv "$HEADS_KV"
       --head-dim 128 --iters "$ITERS" --warmup 1 --json)
for r in $RANKS; do
  ((r <= gpus)) || { echo "$me: $r ranks need $r GPUs; $gpus here"; continue; }
  run_tee "$out/ring_multi_np$r.json" $((r == 2 ? 220 : 180)) "${mpi[@]}" -np "$r" "$ring" --seqlen "$SEQLENS" \
      --dtype "$DTYPES" "${shape[@]}"
done
if [[ ${ANCHOR:-1} == 1 ]]; then
  ranks=1
  for r in $RANKS; do ((r <= gpus)) && ranks+=",$r"; done
  weak=""
  for r in $RANKS; do weak+=",$((WEAK * r))"; done
  echo
  echo "== bench/ring_anchor.py"
  timeout 110 python3 "$here/ring_anchor.py" --seqlen "$SEQLENS$weak" --dtype "$DTYPES" \
      --ranks "$ranks" --heads "$HEADS" --iters "$ITERS" | tee "$out/ring_anchor.json" ||
    { echo "$me: the anchor failed"; status=1; }
fi
for r in $RANKS; do # weak scaling: WEAK tokens per GPU, where SEQLENS lacks it
  n=$((WEAK * r))
  ((r <= gpus)) && [[ ",$SEQLENS," != *",$n,"* ]] || continue
  run_tee "$out/ring_weak_np$r.json" 70 "${mpi[@]}" -np "$r" "$ring" --seqlen "$n" \
      --dtype "${DTYPES%%,*}" "${shape[@]}"
done
shopt -s nullglob # the files the steps above wrote, none that is not there
tables=("$out"/ring_multi_np*.json "$out"/ring_weak_np*.json)
[[ -f $out/ring_anchor.json ]] && tables+=("$out/ring_anchor.json")
python3 "$here/ring_table.py" --weak "$WEAK" "${tables[@]}" 2>&1 | tee "$out/ring_tables.md"
exit $status
