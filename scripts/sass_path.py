#!/usr/bin/env python3
"""sass_path.py - count the SASS instructions one warp issues along a kernel's
fast path, statically (no GPU): how BENCHMARKS.md compares builds of an
issue-bound kernel when no GPU is at hand.

Input: one function's listing from `cuobjdump -sass -fun NAME file.cubin`.
The walk starts at the first instruction (or at the first one whose text
contains --start, e.g. MUFU.RSQ to skip a reduction whose branches depend on
the launch) and follows the fall-through path: unconditional branches are
taken, conditional ones are not (chunks in range, no slow path), except a
branch on two predicates (`@P2 BRA P4, target`: how ptxas writes "every angle
of the chunk is small", the fast path) which is taken. It stops at EXIT, at a
backward conditional branch (a loop: the row loop) or at an instruction seen
before, and prints the count between stores (STG) and in all. NOPs are not
counted. The heuristics fit the row kernels of src/gpu/; read the listing to
check that the path it took is the one you mean.

usage: cuobjdump -sass -fun NAME build.cubin > k.sass
       scripts/sass_path.py k.sass [--start MUFU.RSQ]
"""
import argparse
import re
import sys


def parse(path):
    ins = []
    for line in open(path):
        m = re.match(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", line)
        if m:
            ins.append((int(m.group(1), 16), m.group(2).strip()))
    return ins


def walk(ins, start):
    at = {a: i for i, (a, _) in enumerate(ins)}
    i = 0
    if start:
        i = next((k for k, (_, t) in enumerate(ins) if start in t), None)
        if i is None:
            sys.exit(f"no instruction contains {start!r}")
    total = seg = 0
    seen = set()
    while i < len(ins):
        a, t = ins[i]
        if a in seen:
            print(f"{a:#06x}: reached again (a loop)")
            break
        seen.add(a)
        if "NOP" not in t:
            total += 1
            seg += 1
        if t.startswith("EXIT"):
            print(f"{a:#06x}: EXIT, {seg} since the last store")
            break
        if "STG" in t:
            print(f"{a:#06x}: {t.split()[0]}, {seg} since the previous mark")
            seg = 0
        m = re.match(r"(@!?U?P\d\s+)?BRA(\.DIV)?\s+.*0x([0-9a-f]+)$", t)
        if m:
            target = int(m.group(3), 16)
            if re.match(r"@P\d\s+BRA\s+P\d,", t):
                i = at[target]
                continue
            conditional = m.group(1) or m.group(2) or re.search(r"BRA\s+!?P\d", t)
            if not conditional:
                i = at[target]
                continue
            if target < a:
                print(f"{a:#06x}: backward conditional branch (a loop), {seg} since the last mark")
                break
        i += 1
    print(f"total {total}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("listing")
    ap.add_argument("--start", default="", help="start at the first instruction containing this")
    args = ap.parse_args()
    walk(parse(args.listing), args.start)


if __name__ == "__main__":
    main()
