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
grep -q "^seed: [0-9][0-9]* (--seed [0-9]* replays" "$TMP/out" && ok "the seed in the table header" \
    || bad "the seed in the table header"
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
grep -q "^seed: [0-9][0-9]* (--seed [0-9]* replays" "$TMP/out" && ok "the seed in the tune header" \
    || bad "the seed in the tune header"
[ "$(grep -c '; seed [0-9]*; warming up' "$TMP/err")" = 9 ] \
    && [ "$(grep -o '; seed [0-9]*;' "$TMP/err" | sort -u | wc -l)" = 1 ] \
    && ok "tune: one seed for every setting" || bad "tune: one seed for every setting"

expect_rc 0 "info --backend cpu --json" -- "$KFUSE" info --backend cpu --json
valid_json "$TMP/out" && ok "info JSON parses" || bad "info JSON parses"
grep -Eq '"cpu_kernels": "(baseline|avx2|avx512)"' "$TMP/out" && ok "info JSON names the CPU kernels" \
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
# the plot's numbers are not rounded away: each marker's us and GB/s agree with the JSON
# within 0.1 %, and the GB/s axis ticks are distinct numbers
python3 -c 'import json, re, sys
cs = {"%s %s %s" % (c["op"], c["variant"], c["shape"]): c
      for c in json.load(open(sys.argv[1]))["cases"] if c["status"] == "timed"}
svg = open(sys.argv[2]).read()
marks = re.findall(r"<title>(.*?): ([0-9.e+-]+) us, ([0-9.e+-]+) GB/s</title>", svg)
near = lambda a, b: abs(a - b) <= 1e-3 * abs(b)
good = len(marks) == len(cs) > 0 and all(
    near(float(us), cs[n]["median_us"]) and near(float(g), cs[n]["gbs"]) for n, us, g in marks)
ticks = re.findall(r"text-anchor=\"end\">([^<]*)<", svg)
good = good and len(ticks) == 6 and len(set(float(t) for t in ticks)) == 6
sys.exit(0 if good else 1)' "$TMP/out" "$TMP/plot.svg" \
    && ok "plot: tooltips and ticks not rounded away" || bad "plot: tooltips and ticks not rounded away"

expect_rc 0 "bench csv" -- "$KFUSE" bench --backend cpu --op rms_norm --shape 1x4096 --quick \
    --min-ms 0.4 --seed 7 --csv
grep -q '^op,variant,shape,dtype,bytes' "$TMP/out" && ok "csv header" || bad "csv header"
grep -q '^rms_norm,llama,1x4096,bf16,24576,timed' "$TMP/out" && ok "csv row" || bad "csv row"
grep -q '^# timing: .* >= 0.4 ms of device time per case' "$TMP/out" \
    && ok "--min-ms 0.4 shown as 0.4" || bad "--min-ms 0.4 shown as 0.4"
grep -q '^# seed: 7 (--seed 7 replays' "$TMP/out" && ok "the seed in the CSV header" \
    || bad "the seed in the CSV header"
# gbs and copy_gbs keep 4 significant digits (a fixed decimal shows slow cases as 0.0):
# bytes / median and bytes / copy median agree with them within 0.1 %
python3 -c 'import csv, sys
rows = list(csv.DictReader(l for l in open(sys.argv[1]) if not l.startswith("#")))
near = lambda gbs, us, b: abs(gbs * us * 1e3 - b) <= 1e-3 * b
sys.exit(0 if rows and all(near(float(r["gbs"]), float(r["median_us"]), int(r["bytes"])) and
                           near(float(r["copy_gbs"]), float(r["copy_us"]), int(r["bytes"]))
                           for r in rows) else 1)' "$TMP/out" \
    && ok "csv GB/s to 4 significant digits" || bad "csv GB/s to 4 significant digits"

expect_rc 2 "--seed with a sign" -- "$KFUSE" verify --fuzz 1 --seed +1
expect_rc 2 "--seed with a leading space" -- "$KFUSE" verify --fuzz 1 --seed " 1"
# --min-ms is parsed as strictly as the integer options (--help: no run when it parses)
expect_rc 2 "--min-ms with a leading space" -- "$KFUSE" bench --min-ms " 1" --help
grep -q "min-ms" "$TMP/err" && ok "--min-ms message" || bad "--min-ms message"
expect_rc 2 "--min-ms in hex" -- "$KFUSE" bench --min-ms 0x10 --help
expect_rc 2 "--min-ms inf" -- "$KFUSE" tune --min-ms inf --help
expect_rc 0 "--min-ms .5 and 1e1" -- "$KFUSE" bench --min-ms .5 --min-ms 1e1 --help
# --verbose is a verify option only (bench and tune have nothing to say with it)
expect_rc 2 "--verbose is not a bench option" -- "$KFUSE" bench --verbose --help
expect_rc 2 "-v is not a tune option" -- "$KFUSE" tune -v --help
grep -q "unknown option '-v'" "$TMP/err" && ok "-v named as typed" || bad "-v named as typed"
expect_rc 0 "--verbose is a verify option" -- "$KFUSE" verify --verbose --help
expect_rc 1 "an unwritable --plot fails before the run" -- "$KFUSE" bench --backend cpu \
    --op rms_norm --shape 1x4096 --quick --min-ms 1 --plot "$TMP/no_such_dir/p.svg"
grep -q "cannot write the plot .*No such file" "$TMP/err" && ! grep -q "^\[1/1\]" "$TMP/err" \
    && ok "plot message, nothing timed" || bad "plot message, nothing timed"
# an existing plot stays as it was until the run has finished (here: stopped mid-run)
echo "old plot" > "$TMP/keep.svg"
"$KFUSE" bench --backend cpu --op rms_norm --min-ms 200 --plot "$TMP/keep.svg" > /dev/null 2>&1 &
bench_pid=$!
sleep 2
kill -TERM "$bench_pid" 2>/dev/null
wait "$bench_pid" 2>/dev/null
[ "$(cat "$TMP/keep.svg")" = "old plot" ] && ok "plot file untouched by a stopped run" \
    || bad "plot file untouched by a stopped run"
# --seed fixes the verification's data too: the same relative error twice
for i in 1 2; do
    "$KFUSE" bench --backend cpu --op rms_norm --shape 64x4096 --quick --min-ms 1 --samples 2 \
        --seed 5 --json 2>/dev/null | grep -o '"rel_err": [0-9.e-]*' > "$TMP/rel$i"
done
[ -s "$TMP/rel1" ] && cmp -s "$TMP/rel1" "$TMP/rel2" && ok "--seed replays the verification" \
    || bad "--seed replays the verification"
# ... under any selection: a case's data depends on the seed and the case, not on which
# other cases --op / --shape selected (add_rms_norm is the 2nd of the --shape 64x4096 run)
for sel in "" "--op add_rms_norm"; do
    "$KFUSE" bench --backend cpu $sel --shape 64x4096 --quick --min-ms 1 --samples 2 --seed 5 \
        --json 2>/dev/null > "$TMP/sel.json"
    python3 -c 'import json, sys
c = [c for c in json.load(open(sys.argv[1]))["cases"] if c["op"] == "add_rms_norm"]
print(c[0]["rel_err"] if c else "none")' "$TMP/sel.json" >> "$TMP/sel_rel"
done
[ "$(sort -u "$TMP/sel_rel" | wc -l)" -eq 1 ] && ! grep -q none "$TMP/sel_rel" \
    && ok "--seed replays a case whatever --op / --shape select" \
    || bad "--seed replays a case whatever --op / --shape select"
grep -q '"seed": 5,' "$TMP/sel.json" && ok "the seed in the JSON" || bad "the seed in the JSON"

# a failed write of the output fails the command
if [ -w /dev/full ]; then
    "$KFUSE" bench --backend cpu --op rms_norm --shape 1x4096 --quick --min-ms 1 --samples 2 \
        --json >/dev/full 2>"$TMP/err"
    rc=$?
    [ "$rc" -eq 1 ] && grep -q "error writing the output" "$TMP/err" \
        && ok "bench --json > /dev/full: exit 1, says why" \
        || bad "bench --json > /dev/full: exit $rc, expected 1 and a message"
    "$KFUSE" --help >/dev/full 2>"$TMP/err"
    rc=$?
    [ "$rc" -eq 1 ] && ok "--help > /dev/full: exit 1" || bad "--help > /dev/full: exit $rc, expected 1"
fi

# --backend auto with a --device that is not there: where a GPU is present, an error that
# says why (never a quiet run on the CPU); where none is (a build without a GPU backend,
# no driver or no device), auto runs on the CPU
"$KFUSE" verify --device 1024 --quick --op silu --dtype f32 >"$TMP/out" 2>"$TMP/err"
rc=$?
if [ "$rc" -eq 1 ] && grep -q "gpu 1024 requested" "$TMP/err"; then
    ok "auto --device 1024 with a GPU present: exit 1, says why"
elif [ "$rc" -eq 0 ] && grep -q "^kfuse verify: cpu" "$TMP/out" && ! "$KFUSE" verify \
        --backend gpu --quick --op silu --dtype f32 >/dev/null 2>&1; then
    ok "auto --device 1024 with no GPU present: the CPU"
else
    bad "auto --device 1024: exit $rc"; cat "$TMP/err"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
