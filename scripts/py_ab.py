#!/usr/bin/env python3
"""py_ab.py - A/B timing of kfuse library builds in the PyTorch harness (python -m kfuse.bench),
interleaved: each round runs the harness once per variant in turn (same machine, same
minute), so drift falls on all variants alike; then one table per case with kfuse's time,
kfuse / copy and kfuse / each peer, one value per round. The harness times its own copy and
the peers in every run, so each variant is compared with the peers of its own run.

    scripts/py_ab.py [-r ROUNDS] VARIANT... [-- kfuse.bench args]
    VARIANT: a libkfuse.so path, optionally with environment settings after colons, e.g.
             gpubin/ab/libkfuse-6435d73.so  gpubin/ab/libkfuse.so:KFUSE_ROW_CHUNKS=2
    harness args default to "--quick --no-compile --impl kfuse --impl liger"; --json is added.
The JSON of every run and the table go to $OUT (or ./out). PYTHONPATH must reach kfuse
(python/) and, for the Liger peer, liger_kernel.
    OUT=out scripts/py_ab.py -r 3 a/libkfuse.so b/libkfuse.so -- --quick --no-compile \\
        --impl kfuse --impl liger --op layer_norm --op softmax
"""
import json
import os
import subprocess
import sys


def parse(argv):
    rounds = 2
    if argv[:1] == ["-r"]:
        rounds, argv = int(argv[1]), argv[2:]
    variants = []
    while argv and argv[0] != "--":
        variants.append(argv.pop(0))
    args = argv[1:] if argv else []
    if not args:
        args = ["--quick", "--no-compile", "--impl", "kfuse", "--impl", "liger"]
    if not variants or rounds < 1:
        sys.exit("usage: py_ab.py [-r ROUNDS] VARIANT... [-- kfuse.bench args]")
    return rounds, variants, args


def run_variant(variant, args, json_path):
    """One harness run of one variant; returns its cases (or None when it failed)."""
    lib, *settings = variant.split(":")
    env = dict(os.environ, KFUSE_LIBRARY=os.path.abspath(lib))
    for s in settings:
        name, _, value = s.partition("=")
        env[name] = value
    log_path = json_path[:-len(".json")] + ".log"
    with open(log_path, "w") as log:
        rc = subprocess.call([sys.executable, "-m", "kfuse.bench", *args, "--json", json_path],
                             env=env, stdout=log, stderr=subprocess.STDOUT)
    if rc != 0 or not os.path.exists(json_path):
        print("FAILED: %s (rc %d, see %s)" % (variant, rc, log_path), file=sys.stderr)
        return None
    with open(json_path) as f:
        return json.load(f)["cases"]


def main(argv):
    rounds, variants, args = parse(argv)
    out = os.environ.get("OUT", os.path.join(os.getcwd(), "out"))
    os.makedirs(out, exist_ok=True)
    # cells[case][variant] = list of per-round dicts {column: value}
    cells, order, peers, status = {}, [], [], 0
    for r in range(1, rounds + 1):
        for i, v in enumerate(variants, 1):
            print("== round %d: %s" % (r, v), file=sys.stderr)
            cases = run_variant(v, args, os.path.join(out, "pyab_r%d_v%d.json" % (r, i)))
            if cases is None:
                status = 1
                continue
            for c in cases:
                name = "%s %s" % (c["op"], c["shape"])
                if name not in cells:
                    cells[name] = {}
                    order.append(name)
                kf = c["impls"].get("kfuse", {})
                row = {}
                if kf.get("ok") and "median_us" in kf:
                    row["us"] = kf["median_us"]
                    row["copy"] = kf["vs_copy"]
                    for p, pi in c["impls"].items():
                        if p == "kfuse" or not pi.get("ok") or "median_us" not in pi:
                            continue
                        row[p] = kf["median_us"] / pi["median_us"]
                        if p not in peers:
                            peers.append(p)
                cells[name].setdefault(v, []).append(row)
    columns = [("us", "kfuse us", "%.2f"), ("copy", "kf/copy", "%.3f")]
    columns += [(p, "kf/" + p, "%.3f") for p in peers]
    lines = ["kfuse time (us), kfuse / copy and kfuse / peer (< 1: kfuse faster), "
             "one value per round"]
    for name in order:
        lines.append("")
        lines.append(name)
        vw = max(len(v) for v in variants) + 2
        for v in variants:
            rows = cells[name].get(v, [])
            parts = []
            for key, label, fmt in columns:
                vals = "/".join(fmt % row[key] if key in row else "-" for row in rows)
                parts.append("%s %s" % (label, vals or "-"))
            lines.append("  " + v.ljust(vw) + "   ".join(parts))
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "pyab_table.txt"), "w") as f:
        f.write(text)
    sys.stdout.write(text)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
