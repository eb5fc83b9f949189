#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2054 # commas separate fa-bench's lists
# RWKV7, flashcl against flash-linear-attention (fla) in one run:
#   fa-bench rwkv7-fwd, rwkv7-bwd  bf16 and f32, with h0 (and ht, dh0):
#                         1: B=8 H=32 T=4096  K=V=64
#                         2: B=2 H=32 T=16384 K=V=64
#                         3: the decode step, B=1 H=32 T=1 K=V=64, forward
#                            only (device time of 100 calls, and in loop
#                            mode: 32 layers back to back)
#   fla_rwkv7.py        fla's chunk_rwkv7 and fused_recurrent_rwkv7, forward
#                       and backward, on the same shapes and dtypes (shape 3:
#                       fused_recurrent, the forward's GPU time a call from
#                       a CUDA graph of 100 calls)
# Every table goes to stdout (fa-bench checks its outputs against the
# double reference as it times them).
#
# usage: bench/suites/rwkv7.sh [--device SEL] [--build DIR] [--out DIR]
#                              [--shapes 1,2,3] [--dry-run]
#   defaults: the library's default device, build, results/<device name>,
#   all three shapes (bench/suites/common.sh has the details); --shapes 1,3
#   runs only those (the SHAPES environment variable, "1 3", does the same)
#
# The fla steps need PyTorch with Triton and CUDA, no network: fla comes
# from the wheels in bench/vendor, as for bench/suites/rwkv6.sh. A failing
# step is reported and the others still run; the exit status is 1 if any
# failed.
suite_shapes=3 # common.sh: --shapes, as shapes_sel
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

shapes=("--batch 8 --heads 32 --seqlen 4096 --head-dim 64"
        "--batch 2 --heads 32 --seqlen 16384 --head-dim 64"
        "--batch 1 --heads 32 --seqlen 1 --head-dim 64")

fla_site
for n in $shapes_sel; do
  s=${shapes[n - 1]}
  if ((n == 3)); then
    # shellcheck disable=SC2086 # each shape is a list of arguments
    step "${fab[@]}" --op rwkv7-fwd $s --dtype bf16,f32 --iters 100 --warmup 10
    # ... and as a model's step: 32 layers back to back (b2b_us: a call's
    # device time without the launches' gaps, as fla's graph replay)
    # shellcheck disable=SC2086
    step "${fab[@]}" --op rwkv7-fwd $s --dtype bf16,f32 --layers 32 --steps 20 --peak 0
    # shellcheck disable=SC2086
    step python3 "$py/fla_rwkv7.py" $s --dtype bf16,f32 --impl fused_recurrent,chunk \
      --no-bwd --iters 100 --warmup 10 --graph 100
  else
    # shellcheck disable=SC2086
    step "${fab[@]}" --op rwkv7-fwd,rwkv7-bwd $s --dtype bf16,f32
    # shellcheck disable=SC2086
    step python3 "$py/fla_rwkv7.py" $s --dtype bf16,f32
  fi
done
finish
