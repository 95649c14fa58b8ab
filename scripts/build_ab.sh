#!/usr/bin/env bash
# build_ab.sh - build the GPU binaries that scripts/gpu_ab.sh carries to the
# GPU machine, here (nvcc, no GPU needed): the working tree's kfuse,
# test_suite and test_tools, and kfuse of each git revision named, each in a
# build of its own (sm_90 machine code only, Release), gzip'd into BIN:
#   kfuse.gz, test_suite.gz, test_tools.gz   the working tree
#   kfuse-REV.gz                             revision REV (a detached worktree)
#   usage: scripts/build_ab.sh [REV ...]     e.g. scripts/build_ab.sh 6435d73
#   BIN=dir (default gpubin/ab), JOBS=n (default: the CPU count)
# then, on the GPU machine: BIN=gpubin/ab VARIANTS="kfuse-REV kfuse" OPS=...
# scripts/gpu_ab.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${BIN:-gpubin/ab}
jobs=${JOBS:-$(nproc)}
mkdir -p "$bin"

build() { # source dir, build dir, targets...
    local src=$1 dir=$2
    shift 2
    mkdir -p "$dir"
    local log=$dir/build_ab.log
    cmake -S "$src" -B "$dir" -DKF_GPU=ON -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_CUDA_ARCHITECTURES=90-real > "$log" 2>&1 || { cat "$log" >&2; exit 1; }
    cmake --build "$dir" -j "$jobs" --target "$@" >> "$log" 2>&1 || { tail -30 "$log" >&2; exit 1; }
}

build . build-ab-tree kfuse_cli test_suite test_tools
for b in kfuse test_suite test_tools; do gzip -c "build-ab-tree/$b" > "$bin/$b.gz"; done
echo "working tree ($(git rev-parse --short HEAD)$(git diff --quiet || echo ', modified')) -> $bin/{kfuse,test_suite,test_tools}.gz"

for rev in "$@"; do
    short=$(git rev-parse --short "$rev")
    wt=/tmp/kfuse-ab-$short
    [ -d "$wt" ] || git worktree add --detach "$wt" "$rev" > /dev/null
    build "$wt" "$wt/build" kfuse_cli
    gzip -c "$wt/build/kfuse" > "$bin/kfuse-$rev.gz"
    echo "$rev ($short) -> $bin/kfuse-$rev.gz"
done
