#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2054 # commas separate fa-bench's lists
# Ring attention across the GPUs of one host, one MPI rank per GPU:
# correctness against the one-GPU call, strong scaling (RANKS at each of
# SEQLENS) and weak scaling (WEAK tokens per GPU), beside PyTorch
# FlashAttention-2's per-GPU bound (bench/py/ring_anchor.py). B1 H32 (MHA)
# D128, causal, zig-zag, forward and backward. The GPUs are counted with
# nvidia-smi (NVIDIA only).
#
# usage: bench/suites/ring_multi_gpu.sh [--device SEL] [--build DIR] [--out DIR] [--dry-run]
#   defaults: --device 0:%r (platform 0, the device of the rank's index on
#   its node), build, results/<device name> (bench/suites/common.sh has the
#   details)
#   env: RANKS="2 4"  SEQLENS=32768,131072  DTYPES=f16,bf16  WEAK=32768
#        ITERS=3  HEADS=32  HEADS_KV=32  ANCHOR=1
# Writes OUT/ring_multi_np<R>.json, ring_weak_np<R>.json, ring_anchor.json
# and ring_tables.md; each step has a time limit, a failing one is reported
# and the others still run (exit 1 if any failed, 2 if mpirun or
# fa-ring-bench is missing). Under Open MPI, OCL_ICD_FILENAMES reaches the
# ranks cut at its first ':' (docs/benchmarks.md, "The environment").
suite_device='0:%r'
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
ring_setup
RANKS=${RANKS:-2 4} SEQLENS=${SEQLENS:-32768,131072} DTYPES=${DTYPES:-f16,bf16}
WEAK=${WEAK:-32768} ITERS=${ITERS:-3} HEADS=${HEADS:-32} HEADS_KV=${HEADS_KV:-32}
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
nvidia-smi topo -m 2>/dev/null | head -8
mpi+=(--bind-to none)
ring_smoke
shape=(--op fwd,bwd --causal 1 --batch 1 --heads "$HEADS" --heads-kv "$HEADS_KV"
       --head-dim 128 --iters "$ITERS" --warmup 1 --json)
for r in $RANKS; do
  ((r <= gpus)) || { echo "$me: $r ranks need $r GPUs; $gpus here"; continue; }
  run_tee "$out/ring_multi_np$r.json" $((r == 2 ? 220 : 180)) "${mpi[@]}" -np "$r" "${ring[@]}" \
    --seqlen "$SEQLENS" --dtype "$DTYPES" "${shape[@]}"
done
if [[ ${ANCHOR:-1} == 1 ]]; then
  ranks=1
  for r in $RANKS; do ((r <= gpus)) && ranks+=",$r"; done
  weak=""
  for r in $RANKS; do weak+=",$((WEAK * r))"; done
  run_tee "$out/ring_anchor.json" 110 python3 "$py/ring_anchor.py" --seqlen "$SEQLENS$weak" \
    --dtype "$DTYPES" --ranks "$ranks" --heads "$HEADS" --iters "$ITERS"
fi
for r in $RANKS; do # weak scaling: WEAK tokens per GPU, where SEQLENS lacks it
  n=$((WEAK * r))
  if ((r > gpus)) || [[ ",$SEQLENS," == *",$n,"* ]]; then continue; fi
  run_tee "$out/ring_weak_np$r.json" 70 "${mpi[@]}" -np "$r" "${ring[@]}" --seqlen "$n" \
    --dtype "${DTYPES%%,*}" "${shape[@]}"
done
shopt -s nullglob # the files the steps above wrote, none that is not there
tables=("$out"/ring_multi_np*.json "$out"/ring_weak_np*.json)
[[ -f $out/ring_anchor.json ]] && tables+=("$out/ring_anchor.json")
echo
echo "== python3 $py/ring_table.py --weak $WEAK ${tables[*]} | tee $out/ring_tables.md"
((dry)) || python3 "$py/ring_table.py" --weak "$WEAK" "${tables[@]}" 2>&1 | tee "$out/ring_tables.md"
finish
