#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR disable=SC2054 # commas separate fa-bench's lists
# RWKV6, flashcl against flash-linear-attention (fla) in one run:
#   fa-bench rwkv6-fwd, rwkv6-bwd  algorithms recurrent, chunked and auto,
#                       bf16 and f32:
#                         1: B=8  H=32 T=4096  K=V=64
#                         2: B=32 H=16 T=512   K=V=128
#                         3: B=2  H=16 T=16384 K=V=128
#   fla_rwkv6.py        fla's chunk_rwkv6 and fused_recurrent_rwkv6, forward
#                       and backward, on the same shapes and dtypes
# Every table goes to stdout (fa-bench checks its outputs against the
# double reference as it times them).
#
# usage: bench/suites/rwkv6.sh [--device SEL] [--build DIR] [--out DIR]
#                              [--shapes 1,2,3] [--dry-run]
#   defaults: the library's default device, build, results/<device name>,
#   all three shapes (bench/suites/common.sh has the details); --shapes 1,3
#   runs only those (to stay under a time limit per command; the SHAPES
#   environment variable, "1 3", does the same)
#
# The fla steps need PyTorch with Triton and CUDA, no network: fla comes
# from the wheels in bench/vendor (fla-core, einops, packaging; downloaded
# with
#   pip download fla-core einops packaging --no-deps -d bench/vendor
# ), unpacked to OUT/fla-site and put first on PYTHONPATH; without them an
# installed fla is used. A failing step is reported and the others still
# run; the exit status is 1 if any failed.
suite_shapes=3 # common.sh: --shapes, as shapes_sel
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

shapes=("--batch 8 --heads 32 --seqlen 4096 --head-dim 64"
        "--batch 32 --heads 16 --seqlen 512 --head-dim 128"
        "--batch 2 --heads 16 --seqlen 16384 --head-dim 128")

fla_site
for n in $shapes_sel; do
  s=${shapes[n - 1]}
  # shellcheck disable=SC2086 # each shape is a list of arguments
  step "${fab[@]}" --op rwkv6-fwd,rwkv6-bwd $s --dtype bf16,f32 --algorithm recurrent,chunked,auto
  # shellcheck disable=SC2086
  step python3 "$py/fla_rwkv6.py" $s --dtype bf16,f32
done
finish
