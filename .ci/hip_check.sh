#!/bin/sh
# hip_check.sh - compile every GPU kernel file (src/gpu/*.cu) with hipcc as
# HIP for AMD targets: gfx90a and gfx940 (CDNA, wave64) and gfx1030 (RDNA,
# wave32). Fails on any error; prints the warnings. Needs only hipcc (no GPU).
#   usage: .ci/hip_check.sh            (from anywhere)
#   HIPCC=/opt/rocm/bin/hipcc .ci/hip_check.sh
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
hipcc=${HIPCC:-hipcc}
archs=${KF_HIP_ARCHS:-"gfx90a gfx940 gfx1030"}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
flags=""
for a in $archs; do flags="$flags --offload-arch=$a"; done
status=0
for f in "$root"/src/gpu/*.cu; do
    name=$(basename "$f" .cu)
    echo "hipcc $name.cu ($archs)"
    # shellcheck disable=SC2086
    if ! "$hipcc" -x hip -std=c++17 -O2 -Wall $flags -I "$root/include" -I "$root/src" \
            -DKF_WITH_HIP=1 -c "$f" -o "$out/$name.o"; then
        echo "FAILED: $name.cu" >&2
        status=1
    fi
done
if [ $status -eq 0 ]; then echo "hip_check: all GPU sources compile for $archs"; fi
exit $status
