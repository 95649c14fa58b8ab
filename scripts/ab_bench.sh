#!/usr/bin/env bash
# ab_bench.sh - A/B timing of kfuse builds in one process tree, interleaved:
# each round runs `kfuse bench` of every variant in turn (same machine, same
# minute), so drift falls on all variants alike; then one table with the
# ratio (time / same-size copy) of every case per variant, one value per round.
#   scripts/ab_bench.sh [-r ROUNDS] VARIANT... [-- kfuse bench args]
# VARIANT: path to a kfuse binary, optionally with environment settings after
# colons, e.g. build-a/kfuse  build-b/kfuse  build-a/kfuse:KFUSE_ROW_CHUNKS=2
# Bench args default to "--backend gpu --quick" (--csv is added); the CSV of
# every run and the table go to $OUT (or ./out).
#   scripts/ab_bench.sh base/kfuse new/kfuse -- --backend gpu --quick --op rms_norm
set -uo pipefail
rounds=2
if [ "${1:-}" = "-r" ]; then rounds=$2; shift 2; fi
variants=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do variants+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
args=("$@")
[ ${#args[@]} -eq 0 ] && args=(--backend gpu --quick)
if [ ${#variants[@]} -eq 0 ]; then
    echo "usage: $0 [-r ROUNDS] VARIANT... [-- kfuse bench args]" >&2
    exit 2
fi
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
runs="$OUT/ab_runs.txt"           # one line per run: round, variant, its CSV file
: > "$runs"
status=0
for r in $(seq 1 "$rounds"); do
    i=0
    for v in "${variants[@]}"; do
        i=$((i + 1))
        bin=${v%%:*}
        envs=()
        rest=${v#"$bin"}
        IFS=':' read -r -a envs <<< "${rest#:}"
        csv="$OUT/ab_r${r}_v${i}.csv"
        echo "== round $r: $v" >&2
        if ! env "${envs[@]}" "$bin" bench "${args[@]}" --csv > "$csv" 2> "$csv.err"; then
            echo "FAILED: $v (see $csv.err)" >&2
            status=1
        fi
        printf '%s\t%s\t%s\n' "$r" "$v" "$csv" >> "$runs"
    done
done
python3 - "$runs" "${variants[@]}" <<'PY' | tee "$OUT/ab_table.txt"
import csv, sys
runs, variants = sys.argv[1], sys.argv[2:]
cells, order = {}, []
for line in open(runs):
    r, v, path = line.rstrip("\n").split("\t")
    for row in csv.DictReader(l for l in open(path) if not l.startswith("#")):
        case = " ".join((row["op"], row["variant"], row["shape"], row["dtype"]))
        if case not in cells:
            cells[case] = {}
            order.append(case)
        value = "%.2f" % float(row["ratio"]) if row["status"] == "timed" else row["status"]
        cells[case].setdefault(v, []).append(value)
w = max([len(c) for c in order] + [4])
cw = max([len(v) for v in variants] + [10]) + 2
print("ratio = time / same-size copy, one value per round")
print("case".ljust(w) + "".join(v.rjust(cw) for v in variants))
for c in order:
    print(c.ljust(w) + "".join("/".join(cells[c].get(v, ["-"])).rjust(cw) for v in variants))
PY
exit $status
