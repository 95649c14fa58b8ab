"""kfuse.bench (the per-op harness) on the CPU: the output ring that makes consecutive calls
write different buffers, the --outputs switch end to end on one small op, --impl, --sets
and --kernels (a CUDA-only listing, absent on the CPU; its column in the summary)."""

import gc
import json
import weakref

import pytest
import torch

from kfuse import bench


def test_keep_outputs_holds_exactly_the_last_n():
    made = []

    def fn(i):
        t = torch.full((4,), float(i))
        made.append(weakref.ref(t))
        return t

    ring = bench.keep_outputs(fn, 3)
    for i in range(5):
        out = ring(i)
        assert float(out[0]) == float(i)              # the call's own result comes back
    del out
    gc.collect()
    alive = [r() is not None for r in made]
    assert alive == [False, False, True, True, True]  # calls 2, 3, 4 held; 0, 1 released


def test_outputs_switch_reaches_the_report(tmp_path):
    for mode in ("rotate", "reuse"):
        out = tmp_path / ("bench-%s.json" % mode)
        rc = bench.main(["--op", "rms_norm", "--quick", "--device", "cpu", "--no-compile",
                         "--outputs", mode, "--json", str(out)])
        assert rc == 0
        rep = json.loads(out.read_text())
        assert rep["outputs"] == mode
        kf = [c["impls"]["kfuse"] for c in rep["cases"]]
        assert kf and all(k["ok"] and k["median_us"] > 0 for k in kf)


def test_impl_selects_what_is_timed(tmp_path):
    out = tmp_path / "bench-impl.json"
    rc = bench.main(["--op", "rms_norm", "--quick", "--device", "cpu", "--no-compile",
                     "--impl", "kfuse", "--json", str(out)])
    assert rc == 0
    rep = json.loads(out.read_text())
    assert rep["impls_selected"] == ["kfuse"]
    assert rep["cases"] and all(set(c["impls"]) == {"kfuse"} for c in rep["cases"])
    assert all(c["copy_us"] > 0 for c in rep["cases"])   # the copy is timed regardless


def test_impl_rejects_an_unknown_name(capsys):
    with pytest.raises(SystemExit) as e:
        bench.main(["--op", "rms_norm", "--quick", "--device", "cpu", "--no-compile",
                    "--impl", "nosuch"])
    assert e.value.code == 2
    assert "invalid choice: 'nosuch'" in capsys.readouterr().err


def test_llama_rope_cases_check_both_layouts(tmp_path):
    """rope_llama runs on contiguous [B, H, S, Dh] q / k and on the transposed view of
    [B, S, H, Dh] memory that HF's attention passes (out of place, and in place through
    kfuse.ops.rope_), and kfuse's outputs match the float64 reference on all three."""
    out = tmp_path / "bench-rope.json"
    rc = bench.main(["--op", "rope_llama", "--quick", "--device", "cpu", "--no-compile",
                     "--impl", "kfuse", "--json", str(out)])
    assert rc == 0
    rep = json.loads(out.read_text())
    shapes = [c["shape"] for c in rep["cases"]]
    assert len(shapes) == 3 and sum("proj view" in s for s in shapes) == 2
    assert sum(s.endswith("in place") for s in shapes) == 1
    assert all(c["impls"]["kfuse"]["ok"] for c in rep["cases"])


def test_sets_is_a_floor_under_the_l2_rule():
    l2 = 60 << 20
    assert bench.n_sets_for(1 << 30, l2, 4096) == (2, False)          # 2 x L2 met by 2 sets
    assert bench.n_sets_for(1 << 30, l2, 4096, 8) == (8, False)       # --sets 8 raises it
    assert bench.n_sets_for(1 << 20, l2, 4096, 8) == (120, False)     # the L2 rule is larger
    assert bench.n_sets_for(1 << 20, l2, 16, 8) == (16, True)         # capped: runs from L2
    assert bench.n_sets_for(1 << 20, 0, 2, 8) == (2, False)           # CPU: the cap holds


def test_in_place_cases_size_their_rotation_by_what_a_call_touches():
    """add_rms_norm, add_ada_norm and gated_residual write a buffer in place (kfuse), and
    Liger's rope rotates q and k in place: nbytes counts that buffer read and written, a call
    touches it once, so the rotation is sized by the smaller count (it fell short of 2 x L2)."""
    cases, _ = bench.build_cases(torch.bfloat16, "cpu", 64, True, False, False)
    es = 2
    by_op = {}
    for c in cases:
        by_op.setdefault(c.op, []).append(c)
    for c in by_op["add_rms_norm"]:
        M, D = map(int, c.label.split("x"))
        assert c.touched == c.nbytes - M * D * es
    for c in by_op["gated_residual"] + by_op["add_ada_norm"]:
        B, S, D = map(int, c.label.split("x"))
        assert c.touched == c.nbytes - B * S * D * es
    for c in by_op["rms_norm"] + by_op["softmax"]:
        assert c.touched == c.nbytes                  # out of place: every byte once
    for c in by_op["rope_llama"]:
        assert c.touched < c.nbytes


def test_copy_half_is_rounded_up_to_4_kib():
    assert bench.copy_half(134225920) == 67112960      # rms_norm 8192x4096: already whole
    assert bench.copy_half(132124672) == 66064384      # 16128x2048: 66062336 rounded up
    assert bench.copy_half(2 * 4096 * 769 * 2 + 2 * 769) == 6303744   # 4096x769 + weight
    assert bench.copy_half(3) == 4096                  # a tiny case copies one block


def test_sets_below_two_is_refused(capsys):
    rc = bench.main(["--op", "rms_norm", "--quick", "--device", "cpu", "--sets", "1"])
    assert rc == 2
    assert "--sets: at least 2" in capsys.readouterr().err


def test_kernels_is_ignored_without_cuda(tmp_path):
    out = tmp_path / "bench-kernels.json"
    rc = bench.main(["--op", "rms_norm", "--quick", "--device", "cpu", "--no-compile",
                     "--impl", "kfuse", "--kernels", "--json", str(out)])
    assert rc == 0
    rep = json.loads(out.read_text())
    assert rep["cases"] and all("kernels" not in c for c in rep["cases"])


def test_summary_shows_kernel_ratio_only_when_measured(capsys):
    row = dict(op="rms_norm", shape="8x64", ratios={"liger": 0.98}, kfuse_vs_copy=1.06,
               impls={"kfuse": {}})
    bench.print_summary([dict(row)])
    plain = capsys.readouterr().out
    assert "kern/copy" not in plain and "1.06" in plain
    bench.print_summary([dict(row, kfuse_kernels_vs_copy=1.075)])
    out = capsys.readouterr().out
    assert "kern/copy" in out
    assert out.rstrip().splitlines()[-1].split()[-1] == "1.075"


def test_graph_calls_are_whole_rotations():
    assert bench.whole_rotations(421, 119, 1 << 20) == 476      # 4 rotations, not 3.5
    assert bench.whole_rotations(476, 119, 1 << 20) == 476
    assert bench.whole_rotations(421, 119, 450) == 357          # the cap rounds down
    assert bench.whole_rotations(50, 119, 1 << 20) == 50        # shorter than one: as it is


def test_the_check_sees_the_timed_layout():
    base = torch.randn(2, 6 * 8)
    scale = base.reshape(2, 1, 6, 8).unbind(2)[1]               # [2, 1, 8], stride 48
    copy = bench.clone_layout(scale)
    assert copy.stride() == scale.stride() and torch.equal(copy, scale)
    assert copy.data_ptr() != scale.data_ptr()
    wide = torch.randn(1, 8).expand(4, 8)                         # stride 0: no such layout
    assert torch.equal(bench.clone_layout(wide), wide)


def test_a_wrong_kfuse_result_fails_the_run(monkeypatch, capsys):
    import kfuse.ops
    right = kfuse.ops.rms_norm
    monkeypatch.setattr(kfuse.ops, "rms_norm", lambda *a, **k: right(*a, **k) * 1.5)
    rc = bench.main(["--op", "rms_norm", "--quick", "--device", "cpu", "--no-compile"])
    assert rc == 1
    assert "kfuse failed its check" in capsys.readouterr().err


def test_e2e_flags_a_column_far_from_eager():
    from kfuse import bench_e2e
    rows = [{"case": "a", "eager": {"ms": 1.0, "err": 0.0}, "kfuse": {"ms": 1.0, "err": 0.02},
             "liger": {"error": "x"}},
            {"case": "b", "kfuse": {"ms": 1.0, "err": 0.9},
             "compile": {"ms": 1.0, "err": float("nan")}},
            {"case": "c", "skipped": "no diffusers"}]
    assert bench_e2e.wrong_cells(rows) == ["b/kfuse", "b/compile"]
