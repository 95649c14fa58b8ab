#!/bin/sh
# spill_check.sh - compile every GPU kernel file (src/gpu/*.cu) with nvcc for
# sm_80 and sm_90 with ptxas's spill warnings on, and fail if any kernel
# spills registers to local memory (a spill is a bug here). Needs only
# nvcc (no GPU); without nvcc it says so and does nothing.
#   usage: .ci/spill_check.sh            (from anywhere)
#   NVCC=/usr/local/cuda/bin/nvcc KF_CUDA_ARCHS="80 90" .ci/spill_check.sh
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
nvcc=${NVCC:-nvcc}
if ! command -v "$nvcc" >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
    nvcc=/usr/local/cuda/bin/nvcc
fi
archs=${KF_CUDA_ARCHS:-"80 90"}
if ! command -v "$nvcc" >/dev/null 2>&1; then
    echo "spill_check: no nvcc here: not checked"
    exit 0
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
status=0
for a in $archs; do
    for f in "$root"/src/gpu/*.cu; do
        name=$(basename "$f" .cu)
        echo "nvcc $name.cu (sm_$a)"
        if ! "$nvcc" -O3 -std=c++17 -arch=sm_$a -I "$root/include" -I "$root/src" \
                -DKF_WITH_CUDA=1 --expt-relaxed-constexpr -Xptxas -warn-spills \
                -c "$f" -o "$out/$name.o" > "$out/log" 2>&1; then
            cat "$out/log" >&2
            echo "FAILED: $name.cu (sm_$a)" >&2
            status=1
        elif grep -i "spill" "$out/log" >&2; then
            echo "SPILLS: $name.cu (sm_$a)" >&2
            status=1
        fi
    done
done
if [ $status -eq 0 ]; then echo "spill_check: no kernel spills on sm_$(echo $archs | sed 's/ /, sm_/g')"; fi
exit $status
