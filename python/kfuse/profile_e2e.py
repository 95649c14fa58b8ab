"""kfuse.profile_e2e - where the time of an end-to-end forward goes: host (Python) or GPU.

Used by `python -m kfuse.bench --e2e --profile` (kfuse.bench_e2e) for each cell of the e2e table:
  wall_ms      median time of one forward, CUDA events around it (host time included), as the table
  host_ms      median host time of one forward: the clock from the call to its return, the GPU idle
               before the call (so the host never waits on a full launch queue); the time Python and
               the framework take to issue the forward
  gpu_busy_ms  GPU time per forward under torch.profiler: the union of the intervals of the kernels
               and copies that ran (overlaps counted once), divided by the forwards profiled
  kernels      kernels and copies launched per forward
(dynamo_counts(): the graphs and graph breaks dynamo made, for the bench's row.)
A forward whose wall_ms is close to host_ms and well above gpu_busy_ms is host-bound: the GPU waits
for launches. The profiler adds host time of its own, so host_ms is measured without it; gpu_busy_ms
only reads kernel durations, which the profiler does not change.

Text reports (written next to the JSON): per cell, the profiler's table of CPU ops by self time and
a cProfile listing of the Python functions by own time. op_call_costs() measures the host cost of
one op call by each route a patched model takes (kfuse.ops in eager, torch.ops.kfuse.* as a
compiled graph calls it, the registered implementation alone) next to a PyTorch op of the same size.
On the CPU, host_ms and wall_ms are the same clock and gpu_busy_ms is None.
"""

import cProfile
import io
import pstats
import statistics
import time

import torch


def host_time(fn, iters, cuda):
    """(median host ms, median wall ms) of fn(); the device is idle before each call."""
    host, wall = [], []
    for _ in range(iters):
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        t1 = time.perf_counter()
        if cuda:
            torch.cuda.synchronize()
        t2 = time.perf_counter()
        host.append((t1 - t0) * 1e3)
        wall.append((t2 - t0) * 1e3)
    return statistics.median(host), statistics.median(wall)


def _union_us(intervals):
    """Total length of the union of (start, end) intervals."""
    total, cur_s, cur_e = 0.0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        elif e > cur_e:
            cur_e = e
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def device_intervals(prof):
    """(start_us, end_us, name) of every GPU kernel / copy / memset in a finished torch.profiler."""
    out = []
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            out.append((e.time_range.start, e.time_range.end, e.name))
    return out


def gpu_profile(fn, iters, top=30):
    """Run fn() iters times under torch.profiler (CPU + CUDA). Returns (stats dict, text report)."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
    iv = device_intervals(prof)
    busy = _union_us([(s, e) for s, e, _ in iv]) / iters / 1e3
    kernel_sum = sum(e - s for s, e, _ in iv) / iters / 1e3
    per_name = {}
    for s, e, name in iv:
        n, t = per_name.get(name, (0, 0.0))
        per_name[name] = (n + 1, t + (e - s))
    lines = ["GPU kernels per forward (count, total us):"]
    for name, (n, t) in sorted(per_name.items(), key=lambda kv: -kv[1][1])[:top]:
        lines.append(f"  {n / iters:7.1f} {t / iters:10.1f}  {name[:110]}")
    lines.append("")
    lines.append(f"CPU ops by self time ({iters} forwards, under the profiler):")
    lines.append(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=top))
    stats = {"gpu_busy_ms": busy, "gpu_kernel_sum_ms": kernel_sum, "kernels": len(iv) / iters}
    return stats, "\n".join(lines)


def python_profile(fn, iters, top=40):
    """cProfile of fn() iters times: the functions with the most own time, then by cumulative."""
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(iters):
        fn()
    pr.disable()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    buf = io.StringIO()
    st = pstats.Stats(pr, stream=buf)
    buf.write(f"cProfile, {iters} forwards, by own time:\n")
    st.sort_stats("tottime").print_stats(top)
    buf.write("by cumulative time:\n")
    st.sort_stats("cumulative").print_stats(top)
    return buf.getvalue()


def dynamo_counts():
    """(graphs, graph breaks) that dynamo counted since the last counters.clear()."""
    try:
        from torch._dynamo.utils import counters
    except ImportError:
        return None, None
    return counters["stats"].get("unique_graphs"), sum(counters["graph_break"].values())


def clear_dynamo_counts():
    try:
        from torch._dynamo.utils import counters
    except ImportError:
        return
    counters.clear()


def profile_cell(fn, iters, cuda, pyprof_iters=3):
    """The numbers of one cell (see the module docstring) and its text report. fn() is warm."""
    host, wall = host_time(fn, iters, cuda)
    stats = {"host_ms": host, "wall_sync_ms": wall}
    text = []
    if cuda:
        s, t = gpu_profile(fn, max(2, iters // 4))
        stats.update(s)
        text.append(t)
    text.append(python_profile(fn, pyprof_iters))
    return stats, "\n".join(text)


# ---------------------------------------------------------------------------------------------
# host cost of one op call, by route


def _per_call_us(fn, n, cuda):
    for _ in range(20):
        fn()
    if cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    if cuda:
        torch.cuda.synchronize()
    return (t1 - t0) / n * 1e6


_PROBE = []


def _custom_op_probe():
    """The kfuse rms_norm implementation registered a second time, as a torch.library.custom_op
    (kfuse_probe::rms_norm), to compare what that registration costs per call with kfuse's own."""
    if not _PROBE:
        from typing import Optional

        from . import ops

        impl = ops._IMPLS["rms_norm"]

        @torch.library.custom_op("kfuse_probe::rms_norm", mutates_args=())
        def probe(x: torch.Tensor, weight: Optional[torch.Tensor], eps: float, rms_mode: str,
                  offset: float) -> torch.Tensor:
            return impl(x, weight, eps, rms_mode, offset)

        @probe.register_fake
        def _(x, weight, eps, rms_mode, offset):
            return torch.empty_like(x)

        _PROBE.append(torch.ops.kfuse_probe.rms_norm.default)
    return _PROBE[0]


def _chain(op, n):
    def f(x, w):
        for _ in range(n):
            x = op(x, w, 1e-5, "llama", 0.0)
        return x
    return f


def op_call_costs(device, dtype, n=2000, chain=16):
    """Host microseconds per call of rms_norm and gated_residual on a decode-sized tensor
    ([16, 1, 4096]) by each route: kfuse.ops (eager fast path), torch.ops.kfuse.* (the
    dispatcher, as compiled graphs and the profiler call it), the implementation called
    directly, the same implementation registered as a torch.library.custom_op, each of the two
    registrations inside a torch.compile'd graph of `chain` calls, and the PyTorch op of the
    same work. Returns {route: us}."""
    from . import ops

    cuda = device == "cuda"
    x = torch.randn(16, 1, 4096, device=device, dtype=dtype)
    w = torch.randn(4096, device=device, dtype=dtype)
    h = torch.randn_like(x)
    g = torch.randn(16, 1, 4096, device=device, dtype=dtype)
    impl = ops._IMPLS
    k = torch.ops.kfuse
    probe = _custom_op_probe()
    routes = {
        "rms_norm: kfuse.ops.rms_norm": lambda: ops.rms_norm(x, w, 1e-5, "llama"),
        "rms_norm: torch.ops.kfuse.rms_norm.default": lambda: k.rms_norm.default(x, w, 1e-5, "llama", 0.0),
        "rms_norm: implementation alone": lambda: impl["rms_norm"](x, w, 1e-5, "llama", 0.0),
        "rms_norm: same impl as torch.library.custom_op": lambda: probe(x, w, 1e-5, "llama", 0.0),
        "rms_norm: torch F.rms_norm": lambda: torch.nn.functional.rms_norm(x, (4096,), w, 1e-5),
        "gated_residual: kfuse.ops.gated_residual": lambda: ops.gated_residual(h, x, g),
        "gated_residual: torch.ops.kfuse.gated_residual.default": lambda: k.gated_residual.default(h, x, g),
        "gated_residual: torch h.addcmul_(x, g)": lambda: h.addcmul_(x, g),
    }
    out = {}
    with torch.inference_mode():
        for name, fn in routes.items():
            try:
                out[name] = _per_call_us(fn, n, cuda)
            except Exception as e:                   # a route that fails is reported
                out[name] = f"{type(e).__name__}: {e}"[:200]
        for label, op in (("torch.ops.kfuse.rms_norm", k.rms_norm.default), ("custom_op probe", probe)):
            name = f"rms_norm: {label} in a compiled graph of {chain} calls (per call)"
            try:
                torch._dynamo.reset()
                cf = torch.compile(_chain(op, chain))
                out[name] = _per_call_us(lambda: cf(x, w), max(1, n // chain), cuda) / chain
            except Exception as e:
                out[name] = f"{type(e).__name__}: {e}"[:200]
        torch._dynamo.reset()
    return out
