#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2054 # commas separate fa-bench's lists
# Attention dropout beside the same calls without it and beside PyTorch's
# SDPA with the same dropout_p (its flash backend is FlashAttention-2's
# dropout), in one run: B4 H32 N4096, D=64 and 128, f16 and bf16, causal 0
# and 1, forward and backward, p = 0.1. fa-bench's rows with dropout are not
# checked (test_attention_dropout checks dropout against the reference);
# those without are. Each table's JSON goes to OUT/dropout_*.json, and
# bench/py/dropout_ratio.py prints each time with dropout over the time
# without, and flashcl's over PyTorch's.
#
# usage: bench/suites/dropout.sh [--device SEL] [--build DIR] [--out DIR] [--dry-run]
#   defaults: the library's default device, build, results/<device name>
#   (bench/suites/common.sh has the details)
# The PyTorch steps need PyTorch with CUDA (an NVIDIA GPU). A failing step is
# reported and the others still run; the exit status is 1 if any failed.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

attn=(--batch 4 --heads 32 --seqlen 4096 --dtype f16,bf16 --causal 0,1)
files=()
for d in 64 128; do
  for p in 0 0.1; do
    step_json "$out/dropout_d${d}_p$p.json" "${fab[@]}" --op fwd,bwd "${attn[@]}" \
      --head-dim $d --dropout $p --peak 0
    files+=("$out/dropout_d${d}_p$p.json")
  done
  for bwd in "" --bwd; do
    # shellcheck disable=SC2206 # an empty $bwd is no argument
    step_json "$out/dropout_torch_d$d${bwd:+_bwd}.json" python3 "$py/torch_sdpa.py" $bwd \
      "${attn[@]}" --head-dim $d --dropout 0.1 --backend flash
    files+=("$out/dropout_torch_d$d${bwd:+_bwd}.json")
  done
done
step python3 "$py/dropout_ratio.py" "${files[@]}"
finish
