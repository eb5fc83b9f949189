#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2054 # commas separate fa-bench's lists
# Attention against PyTorch in one run, printing every table to stdout and
# keeping the JSON and the plots:
#   fa-bench fwd        B=4 H=32 N=4096, D=64 and 128, f16 and f32, causal 0 and 1,
#                       with the unfused baseline (--baseline, fusion gain)
#   fa-bench bwd        the same shapes, f16, causal 1
#   fa-bench rwkv6-fwd, rwkv6-bwd  B=8 H=32 T=4096 K=V=64, bf16 and f32,
#                       recurrent and chunked
#   fa-bench sweep      fwd f16 B=1 H=32, N = 1024 .. 16384, D=64 and 128, causal 0
#                       and 1, flashcl and unfused (skipped, with a message, where S
#                       exceeds the largest allocation), to OUT/fwd_sweep_dD.json
#   torch_sdpa.py       the same attention shapes (flash, cuDNN, efficient), then
#                       --bwd: the backward of the flash and cuDNN backends, f16;
#                       each prints fa-bench's rows (from the JSON) above its own
#                       and the ratios flashcl / PyTorch; then the sweep's shapes,
#                       to OUT/torch_sweep_dD.json
#   fa-bench --varlen   one packed batch of 8 sequences of 512 .. 4096 tokens, Hq=32
#                       Hkv=8, D=64 and 128, f16 and bf16, fwd and bwd, causal 0 and 1,
#                       then torch_varlen.py: FlashAttention-2's varlen kernels on it
#   plot.py             each sweep beside PyTorch's, to OUT/fwd_sweep_dD.svg (where
#                       python3 imports matplotlib; else a message says so)
# The PyTorch steps need PyTorch with CUDA (an NVIDIA GPU).
#
# usage: bench/suites/attention.sh [--device SEL] [--build DIR] [--out DIR] [--dry-run]
#   defaults: the library's default device, build, results/<device name>
#   (bench/suites/common.sh has the details)
#
# A failing step is reported and the others still run; the exit status is 1
# if any failed.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

attn=(--batch 4 --heads 32 --seqlen 4096)
sweep=(--batch 1 --heads 32 --seqlen "1024,2048,4096,8192,16384")
varlen=(--varlen 512,1024,4096,768,2048,3072,1536,512 --heads 32 --heads-kv 8)
rwkv=(--batch 8 --heads 32 --seqlen 4096 --head-dim 64 --dtype "bf16,f32"
      --algorithm "recurrent,chunked")

for d in 64 128; do
  step_json "$out/fwd_d$d.json" "${fab[@]}" --op fwd "${attn[@]}" --head-dim $d --dtype f16,f32 \
    --causal 0,1 --baseline
  step_json "$out/bwd_d$d.json" "${fab[@]}" --op bwd "${attn[@]}" --head-dim $d --dtype f16 \
    --causal 1
done
step "${fab[@]}" --op rwkv6-fwd,rwkv6-bwd "${rwkv[@]}"
for d in 64 128; do
  step_json "$out/fwd_sweep_d$d.json" "${fab[@]}" --op fwd "${sweep[@]}" --head-dim $d --dtype f16 \
    --causal 0,1 --baseline --iters 5
done

for d in 64 128; do
  step python3 "$py/torch_sdpa.py" "${attn[@]}" --head-dim $d --dtype f16,f32 --causal 0,1 \
    --compare "$out/fwd_d$d.json"
done
for d in 64 128; do
  step python3 "$py/torch_sdpa.py" --bwd "${attn[@]}" --head-dim $d --dtype f16 --causal 1 \
    --backend flash,cudnn --compare "$out/bwd_d$d.json"
done
for d in 64 128; do
  step_json "$out/torch_sweep_d$d.json" python3 "$py/torch_sdpa.py" "${sweep[@]}" \
    --head-dim $d --dtype f16 --causal 0,1
done
for d in 64 128; do
  step "${fab[@]}" --op fwd,bwd "${varlen[@]}" --head-dim $d --dtype f16,bf16 --causal 0,1
  step python3 "$py/torch_varlen.py" "${varlen[@]}" --head-dim $d --dtype f16,bf16 --causal 0,1
  step python3 "$py/torch_varlen.py" --bwd "${varlen[@]}" --head-dim $d --dtype f16,bf16 \
    --causal 0,1
done

if have_matplotlib; then
  for d in 64 128; do
    runs=()
    for f in "$out/fwd_sweep_d$d.json" "$out/torch_sweep_d$d.json"; do
      if [[ -s $f ]] || ((dry)); then runs+=("$f"); fi
    done
    ((${#runs[@]})) && step python3 "$py/plot.py" "$out/fwd_sweep_d$d.svg" "${runs[@]}"
  done
else
  echo
  echo "$me: python3 cannot import matplotlib: no plots; elsewhere, draw the sweeps with"
  echo "  python3 bench/py/plot.py fwd_sweep_d64.svg $out/fwd_sweep_d64.json $out/torch_sweep_d64.json"
fi
finish
