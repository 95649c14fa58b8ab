"""gres_torch.py - the gated residual (h + a * gate, bf16 2 x 8064 x 2048, gate [B, 1, D] of a
[B, 6 D] conditioning tensor) of torch.compile in both forms, out of place (h + a * gate, as
kfuse.bench's peer) and in place (h.add_(a * gate), kfuse's semantics), against kfuse's
in-place op and a torch copy of half the bytes moved, timed as gres_forms.cu times its
kernels: 4 input sets, one CUDA graph of 32 calls walking them (every output kept alive, so
each call writes a buffer of its own), median of 13 replays (3 dropped), rounds interleaved.
Run with TORCH_LOGS=output_code to see Inductor's kernels. Results: BENCHMARKS.md, thirty-ninth set.
    KFUSE_LIBRARY=path/libkfuse.so PYTHONPATH=python python3 gres_torch.py [rounds]
"""
import statistics
import sys

import torch

from kfuse import ops

B, S, D, SETS, CALLS = 2, 8064, 2048, 4, 32


def f_out(h, a, g):
    return h + a * g


def f_in(h, a, g):
    h.add_(a * g)
    return h


def graph_us(fn, sets):
    for c in range(SETS):
        fn(*sets[c])
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    keep = []
    with torch.cuda.graph(g):
        for c in range(CALLS):
            keep.append(fn(*sets[c % SETS]))
    g.replay()
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    xs = []
    for s in range(13):
        e0.record()
        g.replay()
        e1.record()
        e1.synchronize()
        if s >= 3:
            xs.append(e0.elapsed_time(e1) * 1000 / CALLS)
    del g, keep
    torch.cuda.empty_cache()
    return statistics.median(xs)


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    dev = torch.device("cuda")
    bf = torch.bfloat16
    sets = []
    for s in range(SETS):
        h = torch.randn(B, S, D, device=dev, dtype=bf)
        a = torch.randn(B, S, D, device=dev, dtype=bf)
        gate = (0.5 * torch.randn(B, 6 * D, device=dev, dtype=bf)).reshape(B, 1, 6, D)[:, :, 2]
        sets.append((h, a, gate))
    moved = 3 * B * S * D * 2 + B * D * 2
    half = (moved // 2 + 4095) // 4096 * 4096
    copies = [(torch.empty(half, device=dev, dtype=torch.uint8),
               torch.randint(0, 255, (half,), device=dev, dtype=torch.uint8)) for _ in range(SETS)]
    c_out, c_in = torch.compile(f_out), torch.compile(f_in)
    impls = {
        "copy (half the bytes)": (lambda d, s: d.copy_(s), copies),
        "compile out of place": (c_out, sets),
        "compile in place": (c_in, sets),
        "kfuse in place": (lambda h, a, g: ops.gated_residual(h, a, g), sets),
        "eager out of place": (f_out, sets),
    }
    res = {k: [] for k in impls}
    for r in range(rounds):
        for k, (fn, st) in impls.items():
            res[k].append(graph_us(fn, st))
    print("gated residual bf16 %dx%dx%d, %d bytes moved; us per call (x copy)" % (B, S, D, moved))
    base = res["copy (half the bytes)"]
    for k, v in res.items():
        print("  %-24s" % k + "".join(" %8.2f (%.3f)" % (x, x / b) for x, b in zip(v, base)))


if __name__ == "__main__":
    main()
