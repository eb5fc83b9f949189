#!/usr/bin/env bash
# RWKV6 on an NVIDIA GPU (written for an H100), flashcl against
# flash-linear-attention (fla) in one run, issue 21's shapes:
#   fa-bench rwkv6-fwd, rwkv6-bwd  algorithms recurrent, chunked and auto,
#                       bf16 and f32:
#                         B=8  H=32 T=4096  K=V=64
#                         B=32 H=16 T=512   K=V=128
#                         B=2  H=16 T=16384 K=V=128
#   fla_rwkv6.py        fla's chunk_rwkv6 and fused_recurrent_rwkv6, forward
#                       and backward, on the same shapes and dtypes
# Every table goes to stdout (fa-bench checks its outputs against the
# double reference as it times them).
#
# usage: bench/h100_rwkv6.sh [BUILD_DIR [OUT_DIR]]   (defaults: build, h100-results)
#        SHAPES="1 3" bench/h100_rwkv6.sh ...   only those of the three shapes
#        (to stay under a time limit per command; default all)
#
# The machine needs PyTorch with Triton and CUDA, no network: fla comes from
# the wheels in bench/vendor (fla-core, einops, packaging; downloaded with
#   pip download fla-core einops packaging --no-deps -d bench/vendor
# ), unpacked to OUT/fla-site and put first on PYTHONPATH; without them an
# installed fla is used. A failing step is reported and the others still
# run; the exit status is 1 if any failed.
source "$(dirname "${BASH_SOURCE[0]}")/h100_common.sh"

shapes=("--batch 8 --heads 32 --seqlen 4096 --head-dim 64"
        "--batch 32 --heads 16 --seqlen 512 --head-dim 128"
        "--batch 2 --heads 16 --seqlen 16384 --head-dim 128")

site=$out/fla-site
if compgen -G "$here/vendor/*.whl" >/dev/null; then
  rm -rf "$site" && mkdir -p "$site"
  python3 - "$site" "$here"/vendor/*.whl <<'EOF'
import sys, zipfile
for w in sys.argv[2:]:
    zipfile.ZipFile(w).extractall(sys.argv[1])
EOF
  export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
else
  echo "$me: no wheels in $here/vendor: fla must be installed"
fi
export PYTHONUNBUFFERED=1

command -v nvidia-smi >/dev/null && nvidia-smi -L
for n in ${SHAPES:-1 2 3}; do
  s=${shapes[n - 1]}
  # shellcheck disable=SC2086 # each shape is a list of arguments
  step "$fab" --op rwkv6-fwd,rwkv6-bwd $s --dtype bf16,f32 --algorithm recurrent,chunked,auto
  # shellcheck disable=SC2086
  step python3 "$here/fla_rwkv6.py" $s --dtype bf16,f32
done
exit $status
