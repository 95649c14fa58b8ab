#!/usr/bin/env python3
"""ncu_source_summary.py - where a kernel's instructions go, from Nsight Compute's
per-instruction source view: executed warp instructions per opcode (and, with
--listing, every executed SASS line with its count and stall samples).

Profile one launch with the source counters, then export the source page:
  ncu --section SourceCounters -k regex:kf_norm_fast --launch-skip 3 --launch-count 1 \
      -o rep kfuse bench --backend gpu --op rms_norm --shape 8192x5125 --quick
  ncu -i rep.ncu-rep --page source --csv --print-source sass > src.csv
  scripts/ncu_source_summary.py src.csv [--listing]
Two such summaries (e.g. an odd-D and an aligned row length) side by side show
which opcodes a slow variant adds.
"""
import argparse
import collections
import csv
import gzip


def read_rows(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        header, rows = None, []
        for r in csv.reader(f):
            if r and r[0] == "Address":
                header = r
            elif header and len(r) == len(header):
                rows.append(dict(zip(header, r)))
    return rows


def opcode(source):
    words = source.split()
    if words and words[0].startswith("@"):     # predicate guard
        words = words[1:]
    return words[0].split(".")[0] if words else ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", help="ncu --page source --csv --print-source sass output (.gz allowed)")
    ap.add_argument("--listing", action="store_true", help="also print every executed line")
    ap.add_argument("--top", type=int, default=25, help="opcodes to show (default 25)")
    opt = ap.parse_args()
    rows = read_rows(opt.csv)
    count = lambda d: int(d.get("Instructions Executed") or 0)
    total = sum(count(d) for d in rows)
    samples = sum(int(d.get("Warp Stall Sampling (All Samples)") or 0) for d in rows)
    print("%s: %d warp instructions executed, %d stall samples" % (opt.csv, total, samples))
    by_op = collections.Counter()
    for d in rows:
        by_op[opcode(d["Source"])] += count(d)
    for op, n in by_op.most_common(opt.top):
        print("  %-10s %12d %6.1f%%" % (op, n, 100.0 * n / max(total, 1)))
    if opt.listing:
        for i, d in enumerate(rows):
            if count(d):
                print("%6d %10d %6s  %s" % (i, count(d), d.get("Warp Stall Sampling (All Samples)", ""),
                                            d["Source"].strip()))


if __name__ == "__main__":
    main()
