"""hint_torch.py - the microbenchmark's copy kernel (ld.cs + st.cs against plain) launched
from Python on the H200, so that the Python harness's setting can be taken apart: buffers
from PyTorch's caching allocator or from cudaMalloc, stream launches or CUDA-graph replays,
each implementation's samples in a block or interleaved with the others (as kfuse.bench
does). Prints the median us per call of every combination. Not yet run on the H200: the
BENCHMARKS.md twenty-first set used hint_alloc.cu and hint_graph.cu.
    nvcc -O3 -arch=sm_90 -shared -Xcompiler -fPIC -o libhint.so hint_kernels.cu
    python3 hint_torch.py [path/to/libhint.so]
"""
import ctypes
import statistics
import sys

import torch

HALF = 64 << 20          # bytes read (and written) per call: a 128 MB copy
SETS, CALLS, SAMPLES = 2, 30, 11


def main():
    lib = ctypes.CDLL(sys.argv[1] if len(sys.argv) > 1 else "./libhint.so")
    lib.hint_copy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                              ctypes.c_void_p]
    lib.hint_fill.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint]
    lib.hint_malloc.argtypes = [ctypes.c_size_t]
    lib.hint_malloc.restype = ctypes.c_void_p
    lib.hint_free.argtypes = [ctypes.c_void_p]
    dev = torch.device("cuda")
    for alloc in ("torch", "cudaMalloc"):
        keep, ptrs = [], []
        for s in range(SETS):
            if alloc == "torch":
                a = torch.empty(HALF, dtype=torch.uint8, device=dev)
                b = torch.empty(HALF, dtype=torch.uint8, device=dev)
                keep += [a, b]
                pa, pb = a.data_ptr(), b.data_ptr()
            else:
                pa, pb = lib.hint_malloc(HALF), lib.hint_malloc(HALF)
                assert pa and pb
            assert lib.hint_fill(pa, HALF, 17 + s) == 0 and lib.hint_fill(pb, HALF, 99 + s) == 0
            ptrs.append((pa, pb))
        impls = {
            "cs": lambda st, s: lib.hint_copy(ptrs[s][0], ptrs[s][1], HALF // 16, 1, st),
            "plain": lambda st, s: lib.hint_copy(ptrs[s][0], ptrs[s][1], HALF // 16, 0, st),
        }
        if alloc == "torch":
            impls["torch copy_"] = lambda st, s: keep[2 * s + 1].copy_(keep[2 * s])
        for launch in ("stream", "graph"):
            side = torch.cuda.Stream()
            runs = {}
            for name, fn in impls.items():
                def batch(stream, fn=fn):
                    for c in range(CALLS):
                        fn(stream.cuda_stream, c % SETS)
                if launch == "graph":
                    g = torch.cuda.CUDAGraph()
                    with torch.cuda.stream(side):
                        batch(side)                      # warm-up outside the capture
                        torch.cuda.synchronize()
                        with torch.cuda.graph(g, stream=side):
                            batch(side)
                    runs[name] = g.replay
                else:
                    runs[name] = lambda b=batch: b(torch.cuda.current_stream())
                runs[name]()
            torch.cuda.synchronize()
            for order in ("blocked", "interleaved"):
                times = {n: [] for n in runs}
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

                def sample(n):
                    e0.record()
                    runs[n]()
                    e1.record()
                    e1.synchronize()
                    times[n].append(e0.elapsed_time(e1) * 1000.0 / CALLS)
                if order == "blocked":
                    for n in runs:
                        for _ in range(SAMPLES):
                            sample(n)
                else:
                    for _ in range(SAMPLES):
                        for n in runs:
                            sample(n)
                print("%-10s %-6s %-11s " % (alloc, launch, order) +
                      "  ".join("%s %.2f" % (n, statistics.median(t)) for n, t in times.items()),
                      flush=True)
        if alloc == "cudaMalloc":
            for pa, pb in ptrs:
                lib.hint_free(pa)
                lib.hint_free(pb)


if __name__ == "__main__":
    main()
