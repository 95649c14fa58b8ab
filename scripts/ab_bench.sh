#!/usr/bin/env bash
# ab_bench.sh - A/B timing of kfuse builds in one process tree, interleaved:
# each round runs `kfuse bench` of every variant in turn (same machine, same
# minute), so drift falls on all variants alike; then one table with the
# ratio (time / same-size copy) of every case per variant, one value per round.
#   scripts/ab_bench.sh [-r ROUNDS] VARIANT... [-- kfuse bench args]
# VARIANT: path to a kfuse binary, optionally with environment settings after
# colons, e.g. build-a/kfuse  build-b/kfuse  build-a/kfuse:KFUSE_ROW_CHUNKS=2
# Bench args default to "--backend gpu --quick"; logs go to $OUT (or ./out).
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
raw="$OUT/ab_raw.txt"
: > "$raw"
status=0
for r in $(seq 1 "$rounds"); do
    for v in "${variants[@]}"; do
        bin=${v%%:*}
        envs=()
        rest=${v#"$bin"}
        IFS=':' read -r -a envs <<< "${rest#:}"
        echo "== round $r: $v" >&2
        # each table row: op variant shape dtype bytes unit median p20-p80 GB/s copy ratio ...
        if ! env "${envs[@]}" "$bin" bench "${args[@]}" > "$OUT/ab_last.txt" 2>&1; then
            echo "FAILED: $v (see $OUT/ab_last.txt)" >&2
            status=1
        fi
        awk -v r="$r" -v v="$v" '$4 ~ /^(f32|f16|bf16)$/ && NF >= 11 {
            print r "\t" v "\t" $1 " " $2 " " $3 " " $4 "\t" $11 }' "$OUT/ab_last.txt" >> "$raw"
    done
done
python3 - "$raw" "${variants[@]}" <<'EOF' | tee "$OUT/ab_table.txt"
import sys
raw, variants = sys.argv[1], sys.argv[2:]
cells, order = {}, []
for line in open(raw):
    r, v, case, ratio = line.rstrip("\n").split("\t")
    if case not in cells:
        cells[case] = {}
        order.append(case)
    cells[case].setdefault(v, []).append(ratio)
w = max([len(c) for c in order] + [4])
cw = max([len(v) for v in variants] + [10]) + 2
print("ratio = time / same-size copy, one value per round")
print("case".ljust(w) + "".join(v.rjust(cw) for v in variants))
for c in order:
    print(c.ljust(w) + "".join("/".join(cells[c].get(v, ["-"])).rjust(cw) for v in variants))
EOF
exit $status
