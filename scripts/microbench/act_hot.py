"""act_hot.py - the activations' compute cost, apart from DRAM: kfuse's gelu (erf, tanh) and
silu, torch's, and a torch copy on inputs and outputs that stay in L2 (one input tensor of
~12 MB in 16 bits, its output reused), each in a CUDA graph of 64 calls, median of 15
replays. Where a kernel runs at the L2-resident copy's time it is bound by memory even in
L2; the time above that is its instructions. The H100 and the H200 have the same 132 SMs and
clocks, so an H100 run tells how close an activation is to being issue-bound at the H200's
DRAM rate (its copy of the same bytes from DRAM: bytes / ~4.3 TB/s). Several libraries side
by side (one child process each, rounds interleaved):
    PYTHONPATH=python python3 scripts/microbench/act_hot.py [-r ROUNDS] LIB.so [LIB.so ...]
Results: BENCHMARKS.md, fifty-first set (H100).
"""
import os
import statistics
import subprocess
import sys

ROWS, D, CALLS, REPLAYS = 3072, 2048, 64, 15


def graph_us(fn, x):
    import torch
    for _ in range(3):
        fn(x)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(CALLS):
            fn(x)  # output dropped: the next call's output reuses its memory
    g.replay()
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t = []
    for _ in range(REPLAYS):
        e0.record()
        g.replay()
        e1.record()
        e1.synchronize()
        t.append(e0.elapsed_time(e1) * 1e3 / CALLS)
    return statistics.median(t)


def child():
    import torch
    import torch.nn.functional as F
    from kfuse import ops
    rows = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
    for name, dt in rows.items():
        n = ROWS * D if dt != torch.float32 else ROWS * D // 2
        x = (torch.randn(n // D, D, device="cuda") * 3).to(dt)
        cases = [("copy", lambda t: t.clone()),
                 ("kfuse gelu erf", lambda t: ops.gelu(t, approximate="none")),
                 ("kfuse gelu tanh", lambda t: ops.gelu(t, approximate="tanh")),
                 ("kfuse silu", lambda t: ops.silu(t)),
                 ("torch gelu erf", lambda t: F.gelu(t)),
                 ("torch silu", lambda t: F.silu(t))]
        for label, fn in cases:
            us = graph_us(fn, x)
            print("%s\t%s\t%.3f\t%d" % (name, label, us, 2 * x.numel() * x.element_size()))


def main(argv):
    if argv[:1] == ["--child"]:
        child()
        return 0
    rounds = 2
    if argv[:1] == ["-r"]:
        rounds, argv = int(argv[1]), argv[2:]
    if not argv:
        sys.exit(__doc__)
    res = {}
    for r in range(rounds):
        for lib in argv:
            env = dict(os.environ, KFUSE_LIBRARY=lib)
            out = subprocess.run([sys.executable, __file__, "--child"], env=env, check=True,
                                 capture_output=True, text=True).stdout
            for line in out.splitlines():
                dt, label, us, nbytes = line.split("\t")
                res.setdefault((dt, label, int(nbytes)), {}).setdefault(lib, []).append(float(us))
    names = [os.path.basename(lib) for lib in argv]
    print("us per call (one value per round), L2-resident; 'H200 DRAM' = bytes / 4.3 TB/s")
    print("%-5s %-16s %9s  %s" % ("dtype", "case", "H200 DRAM", "  ".join("%-22s" % n for n in names)))
    for (dt, label, nbytes), per in res.items():
        cells = ["/".join("%.2f" % v for v in per[lib]) for lib in argv]
        print("%-5s %-16s %9.2f  %s" % (dt, label, nbytes / 4.3e6, "  ".join("%-22s" % c for c in cells)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
