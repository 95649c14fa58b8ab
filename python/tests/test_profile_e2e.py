"""kfuse.profile_e2e and `kfuse.bench --e2e --profile` on the CPU: interval union, per-cell host
time and Python profile, the per-call cost routes, the bench's profile columns and report file.
"""

import importlib
import json
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
from _ops_standin import ops as _ops  # noqa: E402

_ops()
pe = importlib.import_module("kfuse.profile_e2e")


def test_union_counts_overlaps_once():
    assert pe._union_us([]) == 0.0
    assert pe._union_us([(0, 10)]) == 10
    assert pe._union_us([(5, 8), (0, 10), (20, 25)]) == 15          # nested, then disjoint
    assert pe._union_us([(0, 10), (10, 12), (11, 30)]) == 30        # touching and overlapping


def _spin(ms):
    import time

    t = time.perf_counter()
    while (time.perf_counter() - t) * 1e3 < ms:
        pass


def test_host_time_measures_the_call():
    host, wall = pe.host_time(lambda: _spin(3.0), 3, cuda=False)
    assert 3.0 <= host <= wall < 100.0


def test_profile_cell_cpu_reports_python_functions():
    stats, text = pe.profile_cell(lambda: _spin(1.0), 2, cuda=False)
    assert stats["host_ms"] >= 1.0 and "gpu_busy_ms" not in stats
    assert "_spin" in text and "cProfile" in text


def test_op_call_costs_cpu():
    if not hasattr(importlib.import_module("kfuse.ops"), "_IMPLS"):
        pytest.skip("needs the real kfuse.ops (its implementations are timed alone)")
    out = pe.op_call_costs("cpu", torch.float32, n=4, chain=2)
    assert len(out) == 10
    for name, us in out.items():
        assert isinstance(us, float) and us > 0, (name, us)


def test_bench_e2e_profile_cpu(tmp_path):
    pytest.importorskip("transformers")
    bench_e2e = importlib.import_module("kfuse.bench_e2e")
    path = str(tmp_path / "e2e.json")
    rows = bench_e2e.main(["--e2e", "--cases", "llama-b16-token", "--columns", "eager,kfuse", "--no-compile",
                           "--profile", "--iters", "2", "--json", path])
    row = rows[0]
    assert set(c for c in bench_e2e.COLUMNS if c in row) == {"eager", "kfuse"}
    for col in ("eager", "kfuse"):
        assert row[col]["profile"]["host_ms"] > 0
    with open(path) as f:
        assert json.load(f)["rows"][0]["case"] == "llama-b16-token"
    with open(path + ".profile.txt") as f:
        text = f.read()
    eager, kfuse = text.split("===== llama-b16-token / kfuse")
    assert "===== llama-b16-token / eager" in eager and "patch_transformers.py" not in eager
    assert "patch_transformers.py" in kfuse          # the patched forwards show in the kfuse column


def test_time_interleaved_rounds_and_errors():
    bench_e2e = importlib.import_module("kfuse.bench_e2e")
    calls = []

    def col(name):
        return lambda: calls.append(name)

    def broken():
        calls.append("broken")
        if calls.count("broken") > 4:                # fails in its first timed round
            raise RuntimeError("boom")

    out = bench_e2e._time_interleaved({"a": col("a"), "b": col("b"), "c": broken}, iters=6, cuda=False,
                                      per_round=3)
    assert isinstance(out["a"], float) and isinstance(out["b"], float)
    assert isinstance(out["c"], RuntimeError)
    assert calls.count("a") == calls.count("b") == 3 + 2 * (1 + 3)     # warm-up, 2 rounds of 1 + 3
    # round-robin: after the warm-ups, columns alternate in blocks of 1 + per_round calls
    after = [c for c in calls[9:] if c != "broken"]
    assert after[:8] == ["a"] * 4 + ["b"] * 4
