"""kfuse.patch on a tiny random-weight LTX-Video transformer and on plain RMSNorm modules (CPU).

Checks: the positions form reproduces diffusers' rotary tables, patched vs unpatched outputs
(f32 tight, bf16 looser), exact replacement counts, torch.compile(fullgraph=True) of a patched
LTX block, unpatch() restoring the original bitwise, verify_engaged() finding the kfuse ops.
"""

import importlib
import os
import sys

import pytest
import torch

diffusers = pytest.importorskip("diffusers")
sys.path.insert(0, os.path.dirname(__file__))
from _ops_standin import ops as _ops  # noqa: E402
from _recording_compile import recording_compile  # noqa: E402
from _module_copies import replica_against_scaled_model, saved_while_patched  # noqa: E402

_ops()
kpatch = importlib.import_module("kfuse.patch")
from kfuse import patch_diffusers as pd  # noqa: E402
from kfuse.engaged import verify_engaged  # noqa: E402

LTX = pytest.importorskip("diffusers.models.transformers.transformer_ltx")

# inner dim 4 * 16 = 64 (64 % 6 = 4: two identity pairs at the front of the rotary)
CFG = dict(in_channels=8, out_channels=8, num_attention_heads=4, attention_head_dim=16, cross_attention_dim=64,
           num_layers=2, caption_channels=32)


def _model(dtype=torch.float32):
    torch.manual_seed(0)
    model = LTX.LTXVideoTransformer3DModel(**CFG)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1.0 + 0.3 * torch.randn_like(p))
    return model.to(dtype).eval()


def _inputs(dtype=torch.float32, batch=2, frames=2, height=3, width=4):
    g = torch.Generator().manual_seed(1)
    s = frames * height * width
    return dict(
        hidden_states=torch.randn(batch, s, 8, generator=g).to(dtype),
        encoder_hidden_states=torch.randn(batch, 5, 32, generator=g).to(dtype),
        timestep=torch.tensor([300, 700][:batch]),
        encoder_attention_mask=torch.ones(batch, 5),
        num_frames=frames, height=height, width=width,
        rope_interpolation_scale=(0.32, 32.0, 32.0),
        return_dict=False,
    )


def _run(model, inputs):
    with torch.no_grad():
        return model(**inputs)[0]


@pytest.mark.parametrize("dim", [64, 66, 2048])
def test_positions_form_reproduces_tables(dim):
    rope = LTX.LTXVideoRotaryPosEmbed(dim=dim, base_num_frames=20, base_height=2048, base_width=2048)
    x = torch.zeros(2, 24, dim)
    cos, sin = rope(x, 2, 3, 4, (0.32, 32.0, 32.0))
    positions, freqs, axis = pd._ltx_rope_forward(rope, x, 2, 3, 4, (0.32, 32.0, 32.0))
    assert positions.shape == (2, 24, 3) and positions.dtype == torch.float32
    assert freqs.shape == (dim // 2,) and axis.dtype == torch.int32
    assert torch.all(freqs[: (dim % 6) // 2] == 0)
    c2, s2 = pd.tables_from_positions(positions, freqs, axis)
    assert torch.equal(c2, cos) and torch.equal(s2, sin)


def test_ltx_patched_matches_f32_and_counts():
    model = _model()
    inputs = _inputs()
    ref = _run(model, inputs)
    report = kpatch.patch(model)
    try:
        c = report.counts
        assert c.get("rms_norm") == 2 * 6, str(report)          # norm1, norm2, 2 x (norm_q, norm_k)
        assert c.get("ltx_block") == 2, str(report)
        assert c.get("rms_norm_rope") == 2 * 2, str(report)     # attn1 and attn2 processors
        assert c.get("rope_positions") == 1, str(report)
        assert c.get("gelu") == 2, str(report)
        out = _run(model, inputs)
        torch.testing.assert_close(out, ref, atol=1e-4, rtol=1e-4)
    finally:
        kpatch.unpatch(model)


def test_ltx_patched_matches_bf16():
    model = _model(torch.bfloat16)
    inputs = _inputs(torch.bfloat16)
    ref = _run(model, inputs).float()
    kpatch.patch(model)
    try:
        out = _run(model, inputs).float()
        err = (out - ref).norm() / ref.norm()
        assert err < 3e-2, float(err)
    finally:
        kpatch.unpatch(model)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_ltx_block_with_torch_rmsnorms_default_eps(dtype):
    """Block norms that are torch.nn.RMSNorm(eps=None) (the block patch takes them): the fused
    block uses torch's epsilon (f32's for 16-bit activations); it raised a TypeError on None."""
    model = _model(dtype)
    for block in model.transformer_blocks:
        block.norm1 = torch.nn.RMSNorm(64, eps=None, elementwise_affine=False).to(dtype)
        block.norm2 = torch.nn.RMSNorm(64, eps=None, elementwise_affine=True).to(dtype)
    inputs = _inputs(dtype)
    ref = _run(model, inputs).float()
    report = kpatch.patch(model)
    try:
        assert report.counts.get("ltx_block") == 2, str(report)
        out = _run(model, inputs).float()
        if dtype == torch.float32:
            torch.testing.assert_close(out, ref, atol=1e-4, rtol=1e-4)
        else:
            assert float((out - ref).norm() / ref.norm()) < 3e-2
    finally:
        kpatch.unpatch(model)


def test_ltx_unpatch_restores_exactly():
    model = _model()
    inputs = _inputs()
    before = _run(model, inputs)
    procs = [m.processor for m in model.modules() if hasattr(m, "processor")]
    kpatch.patch(model)
    kpatch.unpatch(model)
    for m in model.modules():
        assert "forward" not in m.__dict__, type(m).__name__
    assert [m.processor for m in model.modules() if hasattr(m, "processor")] == procs
    assert torch.equal(_run(model, inputs), before)


def test_ltx_block_not_inplace_option():
    model = _model()
    kpatch.patch(model, inplace_residual=False)
    try:
        blk = model.transformer_blocks[0]
        h = torch.randn(2, 24, 64)
        keep = h.clone()
        with torch.no_grad():
            blk(h, torch.randn(2, 5, 64), torch.randn(2, 1, 6 * 64), None, None)
        assert torch.equal(h, keep)
    finally:
        kpatch.unpatch(model)


def test_ltx_block_inference_tensor_outside_inference_mode():
    """A block input made under torch.inference_mode(), the block called under no_grad only:
    the in-place residual cannot write it (torch refuses, and so do kfuse's ops), so the block
    copies it first and gives the unpatched block's result, leaving the input as it was."""
    model = _model()
    blk = model.transformer_blocks[0]
    with torch.inference_mode():
        h = torch.randn(2, 24, 64)
        enc, temb = torch.randn(2, 5, 64), torch.randn(2, 1, 6 * 64)
    keep = h.clone()
    with torch.no_grad():
        ref = blk(h, enc, temb, None, None)
    kpatch.patch(model)
    try:
        with torch.no_grad():
            out = blk(h, enc, temb, None, None)
        torch.testing.assert_close(out, ref, atol=1e-4, rtol=1e-4)
        assert torch.equal(h, keep)
    finally:
        kpatch.unpatch(model)


# compile_policy -> the kfuse ops a compiled LTX block calls: "auto" keeps the fused q/k norm + rope
# and gelu, and leaves RMSNorm, modulation and residual adds to the compiler
BLOCK_OPS = {"all": {"ada_norm", "gated_residual", "add_ada_norm", "rms_norm_rope", "rms_norm", "gelu"},
             "auto": {"rms_norm_rope", "gelu"}}


@pytest.mark.parametrize("policy", ["auto", "all"])
def test_ltx_block_compile_fullgraph(policy):
    model = _model()
    inputs = _inputs()
    rot = model.rope(inputs["hidden_states"], 2, 3, 4, (0.32, 32.0, 32.0))
    kpatch.patch(model, compile_policy=policy)
    try:
        blk = model.transformer_blocks[0]
        prot = model.rope(inputs["hidden_states"], 2, 3, 4, (0.32, 32.0, 32.0))
        assert len(prot) == 3 and len(rot) == 2
        torch.manual_seed(2)
        h = torch.randn(2, 24, 64)
        e = torch.randn(2, 5, 64)
        temb = torch.randn(2, 1, 6 * 64)
        mask = torch.zeros(2, 1, 5)
        mask[1, 0, 3:] = -10000.0
        with torch.no_grad():
            eager = blk(h.clone(), e, temb, prot, mask)
            torch._dynamo.reset()
            compiled, seen = recording_compile(blk)
            out = compiled(h.clone(), e, temb, prot, mask)
        torch.testing.assert_close(out, eager, atol=1e-5, rtol=1e-5)
        assert seen == BLOCK_OPS[policy]
    finally:
        kpatch.unpatch(model)
        torch._dynamo.reset()


def test_compile_policy_checked():
    with pytest.raises(ValueError):
        kpatch.patch(_model(), compile_policy="sometimes")


def test_ltx_cross_attention_mask_and_direct_sdpa(monkeypatch):
    """A mask that hides caption tokens of one sample: the patched processor (mask broadcast over
    heads, F.scaled_dot_product_attention called directly) matches diffusers; with a backend set
    on the processor it goes through diffusers' dispatch instead."""
    model = _model()
    inputs = _inputs()
    mask = torch.ones(2, 5)
    mask[1, 2:] = 0.0
    inputs["encoder_attention_mask"] = mask
    ref = _run(model, inputs)
    kpatch.patch(model)
    try:
        procs = [m.processor for m in model.modules() if isinstance(getattr(m, "processor", None),
                                                                    pd.KfuseLTXAttnProcessor)]
        assert len(procs) == 4 and all(p._direct() for p in procs)
        calls = []
        for p in procs:
            monkeypatch.setattr(p, "_dispatch", lambda *a, **k: calls.append(1) or None)
        torch.testing.assert_close(_run(model, inputs), ref, atol=1e-5, rtol=1e-5)
        assert not calls                                      # the direct path ran
        monkeypatch.undo()
        from diffusers.models.attention_dispatch import AttentionBackendName
        for p in procs:
            monkeypatch.setattr(p, "_attention_backend", AttentionBackendName.NATIVE)
        assert not any(p._direct() for p in procs)
        torch.testing.assert_close(_run(model, inputs), ref, atol=1e-5, rtol=1e-5)
    finally:
        kpatch.unpatch(model)


def test_ltx_attention_forward_skips_signature(monkeypatch):
    """The patched LTXAttention.forward calls the processor without inspect.signature; with an
    extra keyword argument the original forward (which filters it) runs."""
    model = _model()
    inputs = _inputs()
    ref = _run(model, inputs)
    kpatch.patch(model)
    try:
        def no_signature(*a, **k):
            raise AssertionError("inspect.signature called")

        monkeypatch.setattr(LTX.inspect, "signature", no_signature)
        torch.testing.assert_close(_run(model, inputs), ref, atol=1e-5, rtol=1e-5)
        attn = model.transformer_blocks[0].attn1
        x = torch.randn(2, 24, 64)
        with pytest.raises(AssertionError, match="inspect.signature"):
            attn(x, unknown_argument=1)
        monkeypatch.undo()
        with torch.no_grad():
            torch.testing.assert_close(attn(x, unknown_argument=1), attn(x), atol=0, rtol=0)
    finally:
        kpatch.unpatch(model)


def test_ltx_table_form_still_works():
    """A patched processor also consumes diffusers' (cos, sin) tables (rope patch disabled)."""
    model = _model()
    inputs = _inputs()
    ref = _run(model, inputs)
    report = kpatch.patch(model, rope=False)
    try:
        assert "rope_positions" not in report.counts
        torch.testing.assert_close(_run(model, inputs), ref, atol=1e-4, rtol=1e-4)
    finally:
        kpatch.unpatch(model)


def test_ltx_verify_engaged():
    model = _model()
    inputs = _inputs()
    before = verify_engaged(model, **inputs)
    assert not before.kfuse_ops and before.leftover.get("aten::rsqrt", 0) > 0
    kpatch.patch(model)
    try:
        rep = verify_engaged(model, **inputs)
        for op in ("kfuse::ada_norm", "kfuse::add_ada_norm", "kfuse::gated_residual", "kfuse::rms_norm_rope",
                   "kfuse::gelu", "kfuse::rms_norm"):
            assert rep.kfuse_ops.get(op, 0) > 0, str(rep)
        assert "aten::rsqrt" not in rep.leftover, str(rep)
        # the caption projection's GELU and the timestep sinusoids stay PyTorch
        assert rep.leftover.get("aten::gelu", 0) < before.leftover.get("aten::gelu", 0), str(rep)
    finally:
        kpatch.unpatch(model)


@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_plain_rmsnorms(affine, dtype):
    from diffusers.models.normalization import RMSNorm

    torch.manual_seed(0)
    model = torch.nn.Sequential(RMSNorm(48, eps=1e-6, elementwise_affine=affine),
                                torch.nn.RMSNorm(48, eps=None, elementwise_affine=affine)).to(dtype)
    if affine:
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(1 + 0.3 * torch.randn_like(p))
    x = torch.randn(3, 7, 48).to(dtype)
    with torch.no_grad():
        ref = model(x)
        report = kpatch.patch(model)
        assert report.counts == {"rms_norm": 2}, str(report)
        out = model(x)
    kpatch.unpatch(model)
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(out.float(), ref.float(), atol=tol, rtol=tol)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_torch_rmsnorm_default_eps_in_16_bits(dtype):
    """torch.nn.RMSNorm(eps=None) takes the epsilon of f32, the type it computes 16-bit inputs
    in; rows of small values show a wrong one (the bf16 epsilon 0.0078 moved them by ~40 %)."""
    net = torch.nn.Sequential(torch.nn.RMSNorm(64)).to(dtype)
    x = (torch.randn(3, 5, 64) * 0.01).to(dtype)
    with torch.no_grad():
        ref, out = _unpatched_and_patched(net, x)
    torch.testing.assert_close(out.float(), ref.float(), atol=1e-2, rtol=1e-2)


def _unpatched_and_patched(net, x):
    """net(x) before kfuse.patch and while patched."""
    ref = net(x)
    kpatch.patch(net)
    try:
        return ref, net(x)
    finally:
        kpatch.unpatch(net)


def test_ltx_training_falls_back_with_right_gradients():
    """With autograd recording the patched LTX model runs diffusers' code (blocks, norms, gelu,
    the attention's norm + rotary on tables from the positions form): same loss and gradients."""
    ref, model = _model().train(), _model().train()
    inputs = _inputs()
    kpatch.patch(model)
    grads = []
    try:
        for m in (ref, model):
            m.zero_grad(set_to_none=True)
            m(**inputs)[0].square().mean().backward()
            grads.append({n: p.grad for n, p in m.named_parameters()})
    finally:
        kpatch.unpatch(model)
    n_grads = 0
    for n, g in grads[0].items():
        if g is None:
            continue
        assert grads[1][n] is not None, n
        torch.testing.assert_close(grads[1][n], g, atol=1e-5, rtol=1e-4, msg=n)
        n_grads += 1
    assert n_grads > 20


def test_ltx_deepcopy_unpatch():
    """unpatch() of a deep copy of a patched LTX model gives the copy's attention processors and
    forwards back: it then computes what the unpatched model does."""
    import copy

    model = _model()
    inputs = _inputs()
    ref = _run(model, inputs)
    kpatch.patch(model)
    try:
        dup = copy.deepcopy(model)
    finally:
        kpatch.unpatch(model)
    assert kpatch.unpatch(dup) > 0
    assert not any(isinstance(getattr(m, "processor", None), pd.KfuseLTXAttnProcessor) for m in dup.modules())
    assert not any("forward" in m.__dict__ for m in dup.modules())
    assert torch.equal(_run(dup, inputs), ref)


def test_ltx_dataparallel_replica_runs_its_own_weights():
    """The replicas nn.DataParallel makes of a patched LTX model run their own weights through
    kfuse's forwards (norms, blocks, attention, rope), not the original's."""
    inputs = _inputs()
    got, want = replica_against_scaled_model(_model, lambda m: _run(m, inputs))
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


def test_ltx_pickled_patched_model_loads_unpatched():
    """torch.save of a patched LTX model loads with diffusers' own forwards and attention
    processors and computes what the model did; a deep copy keeps kfuse's processors."""
    import copy

    model = _model()
    inputs = _inputs()
    ref = _run(model, inputs)
    _, loaded = saved_while_patched(model)
    assert not any(isinstance(getattr(m, "processor", None), pd.KfuseLTXAttnProcessor) for m in loaded.modules())
    assert torch.equal(_run(loaded, inputs), ref)
    kpatch.patch(model)
    try:
        dup = copy.deepcopy(model)
    finally:
        kpatch.unpatch(model)
    assert any(isinstance(getattr(m, "processor", None), pd.KfuseLTXAttnProcessor) for m in dup.modules())


def test_ltx_processor_set_after_patch_gets_tables():
    """An attention processor set after kfuse.patch cannot read the positions form: the rotary
    module then returns diffusers' tables again, and the model computes what it did unpatched."""
    model = _model()
    inputs = _inputs()
    ref = _run(model, inputs)
    kpatch.patch(model)
    try:
        attn = model.transformer_blocks[0].attn1
        attn.set_processor(attn.processor.kfuse_replaced)
        torch.testing.assert_close(_run(model, inputs), ref, atol=1e-5, rtol=1e-5)
    finally:
        kpatch.unpatch(model)
    assert not any(k.startswith("_kfuse_") for m in model.modules() for k in m.__dict__)


def test_gelu_fallback_projects_once():
    """The feed-forward GELU's fallback (autograd recording) runs its projection once, as
    diffusers' forward does."""
    from diffusers.models.activations import GELU

    gelu = GELU(16, 32, approximate="tanh")
    net = torch.nn.Sequential(gelu)
    calls = []
    gelu.proj.register_forward_hook(lambda *a: calls.append(1))
    ref, out = _unpatched_and_patched(net, torch.randn(2, 3, 16))
    assert len(calls) == 2
    torch.testing.assert_close(out, ref)


@pytest.mark.parametrize("when", ["before", "after"])
def test_ltx_float64_runs_diffusers_code(when):
    """kfuse ops take f32 / f16 / bf16: a float64 LTX model (patched in float64, or .double()'d
    after patching) runs diffusers' code in its blocks, norms, gelu and attention (the rotary on
    diffusers' tables built from the positions form); plain RMSNorms of both kinds as well."""
    from diffusers.models.normalization import RMSNorm

    model = _model()
    ref_model = _model(torch.float64)
    inputs = _inputs(torch.float64)
    ref = _run(ref_model, inputs)
    if when == "before":
        model.double()
    report = kpatch.patch(model)
    try:
        if when == "after":
            model.double()
        assert report.counts.get("ltx_block") == 2 and report.counts.get("rope_positions") == 1, str(report)
        got = _run(model, inputs)
    finally:
        kpatch.unpatch(model)
    assert got.dtype == torch.float64
    assert torch.equal(got, ref)
    norms = torch.nn.Sequential(RMSNorm(48, eps=1e-6), torch.nn.RMSNorm(48)).double()
    x = torch.randn(3, 7, 48, dtype=torch.float64)
    with torch.no_grad():
        want, out = _unpatched_and_patched(norms, x)
    assert torch.equal(out, want)
