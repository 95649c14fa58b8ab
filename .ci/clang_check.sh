#!/bin/sh
# clang_check.sh - the CPU library built by Clang (the GPU backend off), and
# its copies of the CPU kernels (baseline, AVX2, AVX-512 where this CPU runs
# them) checked as GCC's are: test_cpu_isa (each copy bitwise against the
# baseline over the quick suite), the quick suite on the default copy, and
# random cases. Clang orders operands its own way (a NaN's sign once differed
# between its copies), so GCC's passing says nothing about Clang's build.
#   usage: .ci/clang_check.sh         CC=clang-16 .ci/clang_check.sh
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cc=${CC:-clang}
build=${CLANG_BUILD:-$root/build-clang}
if ! command -v "$cc" >/dev/null 2>&1; then
    echo "clang_check: $cc not found"
    exit 1
fi
CC=$cc cmake -S "$root" -B "$build" -DKF_GPU=OFF -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" \
    --target test_cpu_isa test_suite >/dev/null
status=0
run() { # a test program and its arguments: its last line, and its failure counted
    log="$build/clang_check.log"
    if "$@" >"$log" 2>&1; then tail -1 "$log"; else grep FAIL "$log" | head -20; tail -1 "$log"; status=1; fi
}
run "$build/test_cpu_isa" --quick
run "$build/test_suite" --backend cpu --quick
run "$build/test_suite" --backend cpu --fuzz 300 --seed 1
[ "$status" = 0 ] && echo "clang_check: passed" || echo "clang_check: FAILED"
exit "$status"
