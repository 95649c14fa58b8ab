#!/bin/sh
# cli_test.sh - shell-level checks of the `kfuse` executable: exit codes
# (0 ok, 1 failures, 2 usage errors), help and version, JSON / CSV / SVG output
# of info and of a short CPU bench, and KFUSE_CPU_ISA (the CPU kernel copy).
#   usage: tests/cli_test.sh [path/to/kfuse]      (default: build/kfuse)
# Prints one line per check and "N passed, N failed"; exit 1 on any failure.
KFUSE=${1:-build/kfuse}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/kfuse_cli_test.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
pass=0
fail=0

ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }

# expect_rc WANT DESCRIPTION -- COMMAND...
expect_rc() {
    want=$1; what=$2; shift 3
    "$@" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    if [ "$rc" -eq "$want" ]; then ok "$what (exit $rc)"; else bad "$what: exit $rc, expected $want"; cat "$TMP/err"; fi
}

valid_json() {
    if command -v python3 >/dev/null 2>&1; then
        python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$1" 2>/dev/null
    else
        grep -q '^{' "$1"
    fi
}

[ -x "$KFUSE" ] || { echo "cli_test.sh: $KFUSE is not an executable"; exit 1; }

expect_rc 0 "kfuse --help" -- "$KFUSE" --help
grep -q "usage: kfuse" "$TMP/out" && ok "help text" || bad "help text"
expect_rc 0 "kfuse --version" -- "$KFUSE" --version
grep -q "^kfuse [0-9]" "$TMP/out" && ok "version line" || bad "version line"
expect_rc 0 "kfuse bench --help" -- "$KFUSE" bench --help
expect_rc 2 "no command" -- "$KFUSE"
expect_rc 2 "unknown command" -- "$KFUSE" frobnicate
grep -q "unknown command" "$TMP/err" && ok "unknown command message" || bad "unknown command message"
expect_rc 2 "unknown --op" -- "$KFUSE" bench --op no_such_op
grep -q "unknown op" "$TMP/err" && ok "unknown op message" || bad "unknown op message"
expect_rc 2 "bad --dtype" -- "$KFUSE" verify --dtype f64
expect_rc 2 "missing value" -- "$KFUSE" bench --shape
expect_rc 2 "unknown option" -- "$KFUSE" info --frobnicate
expect_rc 2 "no matching case" -- "$KFUSE" bench --op softmax --shape 7x7
expect_rc 2 "bad --timing" -- "$KFUSE" bench --timing fast
grep -q "not auto, stream or graph" "$TMP/err" && ok "bad --timing message" || bad "bad --timing message"
expect_rc 2 "bad --inputs" -- "$KFUSE" bench --inputs fresh
grep -q "not replicated or distinct" "$TMP/err" && ok "bad --inputs message" || bad "bad --inputs message"
expect_rc 2 "--inputs is a bench option" -- "$KFUSE" tune --inputs distinct
expect_rc 0 "--inputs replicated on the CPU" -- "$KFUSE" bench --backend cpu --op rms_norm \
    --shape 1x4096 --quick --min-ms 1 --samples 2 --inputs replicated --json
valid_json "$TMP/out" && grep -q '"inputs": "replicated"' "$TMP/out" \
    && grep -q '"status": "timed"' "$TMP/out" \
    && ok "--inputs replicated: timed, named in the JSON" || bad "--inputs replicated: timed, named in the JSON"
expect_rc 0 "--timing auto on the CPU" -- "$KFUSE" bench --backend cpu --op softmax \
    --shape 32768 --quick --timing auto
grep -q "^timing: " "$TMP/out" && ! grep -q "graph replays" "$TMP/out" \
    && ok "--timing auto is stream timing on the CPU" || bad "--timing auto is stream timing on the CPU"
grep -q "rounded up to 4 KiB" "$TMP/out" && ok "copy rounding in the header" \
    || bad "copy rounding in the header"
grep -q "^inputs: every set its own random data" "$TMP/out" \
    && ok "distinct inputs in the header" || bad "distinct inputs in the header"
expect_rc 1 "--timing graph on the CPU" -- "$KFUSE" bench --backend cpu --op softmax \
    --shape 32768 --quick --timing graph
grep -q "timing graph needs the GPU backend" "$TMP/err" && ok "--timing graph CPU message" \
    || bad "--timing graph CPU message"
expect_rc 2 "tune of an op without row kernels" -- "$KFUSE" tune --op gelu --backend cpu
grep -q "no case of an op with row kernels" "$TMP/err" && ok "tune message" || bad "tune message"
expect_rc 0 "tune on the CPU" -- "$KFUSE" tune --backend cpu --op softmax --shape 32768 --quick \
    --min-ms 1 --samples 2
grep -Eq "^softmax +- +32768x1024 +bf16( +[0-9.]+){9} +n/a$" "$TMP/out" \
    && ok "tune row: 9 timed settings, no best on the CPU" \
    || bad "tune row: 9 timed settings, no best on the CPU"

expect_rc 0 "info --backend cpu --json" -- "$KFUSE" info --backend cpu --json
valid_json "$TMP/out" && ok "info JSON parses" || bad "info JSON parses"
grep -Eq '"cpu_kernels": "(baseline|avx2)"' "$TMP/out" && ok "info JSON names the CPU kernels" \
    || bad "info JSON names the CPU kernels"
expect_rc 0 "KFUSE_CPU_ISA=baseline" -- env KFUSE_CPU_ISA=baseline "$KFUSE" verify --backend cpu \
    --quick --op silu --dtype f32
grep -q "baseline kernels" "$TMP/out" && ok "the baseline kernels ran" \
    || bad "the baseline kernels ran"
expect_rc 0 "verify --fuzz" -- "$KFUSE" verify --backend cpu --fuzz 40 --seed 3
grep -q "^40 passed, 0 failed" "$TMP/out" && ok "verify --fuzz ran 40 random cases" \
    || bad "verify --fuzz ran 40 random cases"
expect_rc 1 "unknown KFUSE_CPU_ISA" -- env KFUSE_CPU_ISA=sse9 "$KFUSE" verify --backend cpu --quick
grep -q "KFUSE_CPU_ISA='sse9' is not" "$TMP/err" && ok "unknown KFUSE_CPU_ISA message" \
    || bad "unknown KFUSE_CPU_ISA message"

expect_rc 0 "bench json" -- "$KFUSE" bench --backend cpu --op softmax --shape 32768 --quick \
    --min-ms 1 --samples 2 --json --plot "$TMP/plot.svg"
valid_json "$TMP/out" && ok "bench JSON parses" || bad "bench JSON parses"
grep -q '"status": "timed"' "$TMP/out" && ok "bench case timed" || bad "bench case timed"
grep -q '"inputs": "distinct"' "$TMP/out" && ok "bench JSON: inputs distinct by default" \
    || bad "bench JSON: inputs distinct by default"
python3 -c 'import json, sys
cs = [c for c in json.load(open(sys.argv[1]))["cases"] if c["status"] == "timed"]
sys.exit(0 if cs and all(c["copy_batch"] == c["batch"] for c in cs) else 1)' "$TMP/out" \
    && ok "the copy is timed with the op's batch" || bad "the copy is timed with the op's batch"
grep -q '</svg>' "$TMP/plot.svg" && ok "plot written" || bad "plot written"

expect_rc 0 "bench csv" -- "$KFUSE" bench --backend cpu --op rms_norm --shape 1x4096 --quick \
    --min-ms 1 --csv
grep -q '^op,variant,shape,dtype,bytes' "$TMP/out" && ok "csv header" || bad "csv header"
grep -q '^rms_norm,llama,1x4096,bf16,24576,timed' "$TMP/out" && ok "csv row" || bad "csv row"

expect_rc 2 "--seed with a sign" -- "$KFUSE" verify --fuzz 1 --seed +1
expect_rc 2 "--seed with a leading space" -- "$KFUSE" verify --fuzz 1 --seed " 1"
expect_rc 1 "an unwritable --plot fails before the run" -- "$KFUSE" bench --backend cpu \
    --op rms_norm --shape 1x4096 --quick --min-ms 1 --plot "$TMP/no_such_dir/p.svg"
grep -q "cannot write the plot .*No such file" "$TMP/err" && ! grep -q "^\[1/1\]" "$TMP/err" \
    && ok "plot message, nothing timed" || bad "plot message, nothing timed"
# --seed fixes the verification's data too: the same relative error twice
for i in 1 2; do
    "$KFUSE" bench --backend cpu --op rms_norm --shape 64x4096 --quick --min-ms 1 --samples 2 \
        --seed 5 --json 2>/dev/null | grep -o '"rel_err": [0-9.e-]*' > "$TMP/rel$i"
done
[ -s "$TMP/rel1" ] && cmp -s "$TMP/rel1" "$TMP/rel2" && ok "--seed replays the verification" \
    || bad "--seed replays the verification"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
