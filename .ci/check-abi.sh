#!/usr/bin/env bash
# Compares the ABI of the shared libraries in BUILD_DIR (built with debug
# information) with the committed reference of the last release (abi/*.abi,
# written by libabigail's abidw from that release's build), as DPDK's
# devtools/check-abi.sh does. Only what the public headers declare counts.
#   new functions; fields appended to a descriptor     pass (abi/suppressions.ini)
#   any other change with the same SONAME               fails
#   any other change with a new SONAME                  passes: a new release;
#       its CHANGELOG.md entry says what broke, and abi/ gets its reference
#
# usage: .ci/check-abi.sh BUILD_DIR            compare
#        .ci/check-abi.sh BUILD_DIR --update   write abi/ from BUILD_DIR (at a release)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${1:?usage: .ci/check-abi.sh BUILD_DIR [--update]}
status=0
for lib in flashcl flashcl_mpi; do
  so=$(find "$build" -maxdepth 1 -name "lib$lib.so.*.*.*" -print -quit)
  ref=abi/lib$lib.abi
  if [[ -z $so ]]; then
    echo "check-abi: lib$lib.so not found in $build" >&2
    exit 2
  fi
  if [[ ${2:-} == --update ]]; then
    abidw --headers-dir include --drop-private-types --no-corpus-path "$so" >"$ref"
    echo "check-abi: wrote $ref from $so"
    continue
  fi
  soname=$(objdump -p "$so" | awk '$1 == "SONAME" { print $2 }')
  ref_soname=$(grep -o "soname='[^']*'" "$ref" | head -1 | cut -d"'" -f2)
  rc=0
  report=$(abidiff --headers-dir2 include --drop-private-types --no-added-syms \
             --suppressions abi/suppressions.ini "$ref" "$so") || rc=$?
  if ((rc & 1)); then
    echo "check-abi: abidiff failed on $so (exit $rc):" >&2
    echo "$report" >&2
    exit 2
  fi
  if ((rc & 12)); then
    if [[ $soname != "$ref_soname" ]]; then
      echo "check-abi: lib$lib: ABI changes with a new SONAME ($ref_soname -> $soname):"
      echo "  a new release; say what broke in CHANGELOG.md and renew $ref (--update)"
    else
      echo "check-abi: lib$lib: the ABI changed, SONAME still $soname:" >&2
      echo "$report" >&2
      status=1
    fi
  else
    echo "check-abi: lib$lib: no change against $ref ($soname) but additions"
  fi
done
exit $status
