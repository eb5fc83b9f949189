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

ring=$build/bench/fa-ring-bench
[[ -x $ring ]] || { echo "$me: $ring not found (CMake did not find MPI)" >&2; exit 2; }
command -v mpirun >/dev/null || { echo "$me: mpirun not found" >&2; exit 2; }
RANKS=${RANKS:-2 4} SEQLENS=${SEQLENS:-32768,131072} DTYPES=${DTYPES:-f16,bf16}
WEAK=${WEAK:-32768} ITERS=${ITERS:-3} HEADS=${HEADS:-32} HEADS_KV=${HEADS_KV:-32}
# The ranks get NVIDIA's driver alone (bench/h100_ring.sh says why).
export OCL_ICD_FILENAMES=/usr/local/nvidia/lib64/libnvidia-opencl.so.1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
mpirun --version 2>&1 | head -1
nvidia-smi -L
nvidia-smi topo -m 2>/dev/null | head -8
mpi=(mpirun --oversubscribe --bind-to none)
smoke=(--device 0:%r --op fwd --seqlen 256 --heads 2 --head-dim 64 --iters 1 --warmup 0)
if ! "${mpi[@]}" -np 2 "$ring" "${smoke[@]}" >/dev/null 2>&1; then
  export OMPI_MCA_btl_vader_single_copy_mechanism=none
  echo "$me: 2 ranks failed with Open MPI's defaults; using btl_vader_single_copy_mechanism=none"
fi
shape=(--device 0:%r --op fwd,bwd --causal 1 --batch 1 --heads "$HEADS" --heads-kv "$HEADS_KV"
       --head-dim 128 --iters "$ITERS" --warmup 1 --json)
run() { # run FILE LIMIT_S ARGS...: one fa-ring-bench step, its lines kept in FILE
  local file=$1 limit=$2
  shift 2
  echo
  echo "== $* > $file"
  timeout "$limit" "$@" | tee "$file"
  ((PIPESTATUS[0] == 0)) || { echo "$me: failed or timed out: $*"; status=1; }
}
for r in $RANKS; do
  ((r <= gpus)) || { echo "$me: $r ranks need $r GPUs; $gpus here"; continue; }
  run "$out/ring_multi_np$r.json" $((r == 2 ? 220 : 180)) "${mpi[@]}" -np "$r" "$ring" --seqlen "$SEQLENS" \
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
  run "$out/ring_weak_np$r.json" 70 "${mpi[@]}" -np "$r" "$ring" --seqlen "$n" \
      --dtype "${DTYPES%%,*}" "${shape[@]}"
done
python3 "$here/ring_table.py" --weak "$WEAK" "$out"/ring_multi_np*.json "$out"/ring_weak_np*.json \
    "$out/ring_anchor.json" 2>&1 | tee "$out/ring_tables.md"
exit $status
