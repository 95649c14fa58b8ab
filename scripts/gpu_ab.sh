#!/usr/bin/env bash
# gpu_ab.sh - one call on the GPU machine for builds made elsewhere (nvcc
# here, binaries carried there): unpack them, optionally run one build's test
# suite (plain, under memcheck and under racecheck), Nsight Compute summaries,
# and interleaved A/B timings of several kfuse binaries (scripts/ab_bench.sh)
# or libkfuse builds in the PyTorch harness (scripts/py_ab.py).
# Every log ends up in $OUT/ab-all.tgz (default OUT=./out).
#   BIN=dir        the carried binaries, plain, .xz or .gz (default gpubin/k)
#   SUITE=name     a test_suite binary in BIN: `--backend gpu`, then
#                  test_tools from BIN if there
#   MEMCHECK_OPS="all | OP..."  memcheck with leak check of SUITE --quick [--op OP]
#   RACECHECK=1    racecheck of SUITE --quick
#   NCU="bin,op,shape[,kernel-regex] ..."  ncu sections and memory counters of one
#                  launch of `bin bench --op op --shape shape` (kernels matching
#                  the regex, default kf_: name the op's kernel, the bench's
#                  own helper kernels match kf_ too)
#   NCUSRC="bin,op,shape,kernel-regex ..."  per-instruction source counters of one
#                  launch, summarized by scripts/ncu_source_summary.py --listing
#   VARIANTS="bin[:ENV=V]..." OPS="op[@dtype]..." ROUNDS=n   one A/B table per op
#   AB_ARGS="..."  more `kfuse bench` arguments for the A/B runs (e.g. --timing graph)
#   PYVARIANTS="lib[:ENV=V]..." PYOPS="op..." ROUNDS=n   one A/B table of libkfuse
#                  builds in the PyTorch harness (scripts/py_ab.py; harness args
#                  PYAB_ARGS, default "--quick --no-compile --impl kfuse --impl
#                  liger", then --op per PYOPS); wheels in .whl/ (liger-kernel)
#                  are installed first
# e.g. SUITE=test_suite MEMCHECK_OPS=all RACECHECK=1 VARIANTS="kfuse kfuse-new" \
#      OPS="rms_norm rope@f32" ROUNDS=3 scripts/gpu_ab.sh
#      PYVARIANTS="libkfuse.so libkfuse.so:KFUSE_ROW_CHUNKS=2" PYOPS="layer_norm softmax" \
#      ROUNDS=3 scripts/gpu_ab.sh     (gpubin/ab and .whl/ copied to the GPU machine)
set -uo pipefail
cd "$(dirname "$0")/.."
O=${OUT:-$PWD/out}
BIN=${BIN:-gpubin/k}
K=/tmp/kfuse-ab-bin
mkdir -p "$O" "$K"
for f in "$BIN"/*; do
    [ -f "$f" ] || continue
    case "$f" in
    *.xz) xz -dc "$f" > "$K/$(basename "$f" .xz)" ;;
    *.gz) gzip -dc "$f" > "$K/$(basename "$f" .gz)" ;;
    *) cp "$f" "$K/" ;;
    esac
done
chmod +x "$K"/* 2>/dev/null
info="$O/info.txt"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > "$info"
if [ -n "${SUITE:-}" ]; then
    timeout 300 "$K/$SUITE" --backend gpu > "$O/suite.txt" 2>&1
    echo "suite rc=$?" >> "$info"; tail -3 "$O/suite.txt" >> "$info"
    if [ -x "$K/test_tools" ]; then
        timeout 100 "$K/test_tools" > "$O/tools.txt" 2>&1
        echo "test_tools rc=$?" >> "$info"; tail -1 "$O/tools.txt" >> "$info"
    fi
    for op in ${MEMCHECK_OPS:-}; do
        a="--op $op"; [ "$op" = all ] && a=""
        timeout 300 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 3 \
            "$K/$SUITE" --backend gpu --quick $a > "$O/memcheck-$op.txt" 2>&1
        echo "memcheck $op rc=$?" >> "$info"; tail -2 "$O/memcheck-$op.txt" >> "$info"
    done
    if [ -n "${RACECHECK:-}" ]; then
        timeout 300 compute-sanitizer --tool racecheck --error-exitcode 3 \
            "$K/$SUITE" --backend gpu --quick > "$O/racecheck.txt" 2>&1
        echo "racecheck rc=$?" >> "$info"; tail -3 "$O/racecheck.txt" >> "$info"
    fi
fi
NCU_BIN=/usr/local/cuda/bin/ncu
for spec in ${NCU:-}; do
    IFS=, read -r b op sh kr <<< "$spec"
    timeout 90 $NCU_BIN --section SpeedOfLight --section Occupancy --section WarpStateStats \
        --section LaunchStats --section SchedulerStats --section InstructionStats \
        --section MemoryWorkloadAnalysis \
        --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_op_read.sum,lts__t_sectors_op_write.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum \
        -k "regex:${kr:-kf_}" --launch-skip 3 --launch-count 1 \
        "$K/$b" bench --backend gpu --op "$op" --shape "$sh" --quick > "$O/ncu-$b-$op-$sh.txt" 2>&1
done
for spec in ${NCUSRC:-}; do
    IFS=, read -r b op sh kr <<< "$spec"
    rep="/tmp/rep-$b-$op-$sh"
    log="$O/ncusrc-$b-$op-$sh.log"
    timeout 120 $NCU_BIN --section SourceCounters -k "regex:$kr" --launch-skip 3 --launch-count 1 \
        -o "$rep" "$K/$b" bench --backend gpu --op "$op" --shape "$sh" --quick > "$log" 2>&1
    $NCU_BIN -i "$rep.ncu-rep" --page source --csv --print-source sass > /tmp/src.csv 2>> "$log"
    python3 scripts/ncu_source_summary.py /tmp/src.csv --listing > "$O/ncusrc-$b-$op-$sh.txt" 2>&1
    gzip -c /tmp/src.csv > "$O/ncusrc-$b-$op-$sh.csv.gz"
done
if [ -n "${PYVARIANTS:-}" ]; then
    if ls .whl/*.whl > /dev/null 2>&1; then
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --target /tmp/site .whl/*.whl
    fi
    PV=()
    for v in $PYVARIANTS; do PV+=("$K/$v"); done
    PO=()
    for op in ${PYOPS:-}; do PO+=(--op "$op"); done
    OUT="$O/pyab" PYTHONPATH="$PWD/python:/tmp/site" timeout 500 python3 scripts/py_ab.py \
        ${ROUNDS:+-r "$ROUNDS"} "${PV[@]}" -- \
        ${PYAB_ARGS:---quick --no-compile --impl kfuse --impl liger} "${PO[@]}" > "$O/pyab.txt" 2>&1
    echo "pyab rc=$?" >> "$info"
fi
V=()
for v in ${VARIANTS:-}; do V+=("$K/$v"); done
for spec in ${OPS:-}; do
    op=${spec%@*}
    dt=()
    [ "$spec" != "$op" ] && dt=(--dtype "${spec#*@}")
    OUT="$O/ab-$spec" timeout 300 scripts/ab_bench.sh ${ROUNDS:+-r "$ROUNDS"} "${V[@]}" -- \
        --backend gpu --quick --op "$op" "${dt[@]}" ${AB_ARGS:-} > "$O/ab-$spec.txt" 2>&1
done
echo finished >> "$info"
tar czf /tmp/ab-all.tgz -C "$O" . && rm -rf "${O:?}"/* && mv /tmp/ab-all.tgz "$O/"
