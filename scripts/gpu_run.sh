#!/usr/bin/env bash
# gpu_run.sh - everything the GPU machine does in one call: build with nvcc,
# run the whole C test suite on the GPU and FUZZ (default 3000) random cases
# (a clock seed, printed), run the quick suite and a few random cases under
# compute-sanitizer (memcheck + racecheck), the Python tests (on CUDA
# tensors too), `kfuse info`,
# `kfuse bench` and the Python peer benchmark. Logs go to $OUT (default
# ./out): gpu.log (all text), bench.svg, pybench.json, e2e.json.
#   STEPS="build test sanitize pytest bench tune pybench e2e" scripts/gpu_run.sh
# BUILD=dir uses (or makes) that build folder: a folder built elsewhere can be
# carried in and STEPS can leave out "build". Each step is capped by
# STEP_TIMEOUT seconds (default 600) so that one slow step leaves the rest.
# Carry wheels for liger-kernel / diffusers in .whl/ (see README).
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
STEPS=${STEPS:-"build test sanitize pytest bench pybench"}
BUILD=${BUILD:-build-gpu}
LOG="$OUT/gpu.log"
JOBS=$(nproc)
status=0
say() { echo "== $(date +%T) $*" | tee -a "$LOG"; }
run() { say "$*"; timeout "${STEP_TIMEOUT:-600}" "$@" 2>&1 | tee -a "$LOG"; local rc=${PIPESTATUS[0]}; [ "$rc" = 0 ] || { say "FAILED ($rc): $*"; status=1; }; return $rc; }
has() { case " $STEPS " in *" $1 "*) return 0;; esac; return 1; }

nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv >>"$LOG" 2>&1

if has build; then
  run cmake -S . -B "$BUILD" -DKF_GPU=ON -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_FLAGS=-Xptxas=-warn-spills >/dev/null
  run cmake --build "$BUILD" -j "$JOBS" || exit 1
fi
if has test; then
  run "$BUILD/test_suite" ${SUITE_ARGS:-}
  run "$BUILD/test_suite" --backend gpu --fuzz "${FUZZ:-3000}"
  run "$BUILD/test_tools"
fi
if has sanitize; then
  run compute-sanitizer --tool memcheck --leak-check full --error-exitcode 3 "$BUILD/test_suite" --backend gpu --quick
  run compute-sanitizer --tool racecheck --error-exitcode 3 "$BUILD/test_suite" --backend gpu --quick
  run compute-sanitizer --tool memcheck --error-exitcode 3 "$BUILD/test_suite" --backend gpu --fuzz 200
fi
if has bench; then
  run "$BUILD/kfuse" info
  run "$BUILD/kfuse" bench --plot "$OUT/bench.svg" ${BENCH_ARGS:-}
fi
if has tune; then
  run "$BUILD/kfuse" tune --quick ${TUNE_ARGS:-}
fi
if has pytest || has pybench || has e2e; then
  if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
    export PYTHONPATH=/tmp/site
  fi
  lib=$(ls "$PWD/$BUILD"/libkfuse.so.*.*.* 2>/dev/null | head -1)
  export PYTHONPATH=$PWD/python:${PYTHONPATH:-} KFUSE_LIBRARY=${lib:-$PWD/$BUILD/libkfuse.so} PYTHONUNBUFFERED=1
  has pytest && run python3 -m pytest -q -p no:cacheprovider python/tests
  has pybench && run python3 -m kfuse.bench --json "$OUT/pybench.json" ${PYBENCH_ARGS:-}
  has e2e && run python3 -m kfuse.bench --e2e --json "$OUT/e2e.json" ${E2E_ARGS:-}
fi
say "done, status $status"
exit $status
