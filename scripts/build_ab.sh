#!/usr/bin/env bash
# build_ab.sh - build the GPU binaries that scripts/gpu_ab.sh carries to the
# GPU machine, here (nvcc, no GPU needed): the working tree's kfuse,
# test_suite, test_tools and libkfuse.so, and kfuse and libkfuse.so of each
# git revision named, each in a build of its own (sm_90 machine code only,
# Release), gzip'd into BIN:
#   kfuse.gz, test_suite.gz, test_tools.gz, libkfuse.so.gz   the working tree
#   kfuse-REV.gz, libkfuse-REV.so.gz         revision REV (a detached worktree)
#   usage: scripts/build_ab.sh [REV ...]     e.g. scripts/build_ab.sh 6435d73
#   BIN=dir (default gpubin/ab), JOBS=n (default: the CPU count)
# then, on the GPU machine: BIN=gpubin/ab VARIANTS="kfuse-REV kfuse" OPS=...
# scripts/gpu_ab.sh (kfuse bench), or PYVARIANTS="libkfuse-REV.so libkfuse.so"
# PYOPS=... (the PyTorch harness, scripts/py_ab.py)
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

build . build-ab-tree kfuse_cli test_suite test_tools kfuse
for b in kfuse test_suite test_tools; do gzip -c "build-ab-tree/$b" > "$bin/$b.gz"; done
gzip -c < build-ab-tree/libkfuse.so > "$bin/libkfuse.so.gz"
echo "working tree ($(git rev-parse --short HEAD)$(git diff --quiet || echo ', modified')) -> $bin/{kfuse,test_suite,test_tools,libkfuse.so}.gz"

for rev in "$@"; do
    short=$(git rev-parse --short "$rev")
    wt=/tmp/kfuse-ab-$short
    [ -d "$wt" ] || git worktree add --detach "$wt" "$rev" > /dev/null
    build "$wt" "$wt/build" kfuse_cli kfuse
    gzip -c "$wt/build/kfuse" > "$bin/kfuse-$rev.gz"
    gzip -c < "$wt/build/libkfuse.so" > "$bin/libkfuse-$rev.so.gz"
    echo "$rev ($short) -> $bin/kfuse-$rev.gz, $bin/libkfuse-$rev.so.gz"
done
