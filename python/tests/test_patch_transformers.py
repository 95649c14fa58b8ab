"""kfuse.patch on tiny random-weight transformers models (CPU): Llama, Qwen3, Gemma, Gemma2, Gemma3.

Checks patched vs unpatched outputs (f32 tight, bf16 looser), the exact number of replaced modules,
torch.compile(fullgraph=True) of a patched decoder layer, unpatch() restoring the original exactly,
and verify_engaged() finding the kfuse ops.
"""

import os
import sys

import pytest
import torch

transformers = pytest.importorskip("transformers")
sys.path.insert(0, os.path.dirname(__file__))
from _ops_standin import ops as _ops  # noqa: E402

_ops()
import importlib  # noqa: E402

kpatch = importlib.import_module("kfuse.patch")
from kfuse.engaged import verify_engaged  # noqa: E402

SMALL = dict(vocab_size=128, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, head_dim=16, max_position_embeddings=64)


def _config(family):
    if family == "llama":
        return transformers.LlamaConfig(**SMALL)
    if family == "qwen3":
        return transformers.Qwen3Config(**SMALL)
    if family == "gemma":
        return transformers.GemmaConfig(**SMALL, hidden_activation="gelu_pytorch_tanh")
    if family == "gemma2":
        return transformers.Gemma2Config(**SMALL, hidden_activation="gelu_pytorch_tanh", sliding_window=16)
    if family == "gemma3":
        return transformers.Gemma3TextConfig(**SMALL, hidden_activation="gelu_pytorch_tanh", sliding_window=16)
    raise ValueError(family)


def _model(family, dtype=torch.float32):
    torch.manual_seed(0)
    cfg = _config(family)
    cfg._attn_implementation = "eager"
    cls = transformers.Gemma3ForCausalLM if family == "gemma3" else transformers.AutoModelForCausalLM
    model = cls.from_config(cfg) if cls is transformers.AutoModelForCausalLM else cls(cfg)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:      # norms start at 1 (or 0 for Gemma): make them matter
                p.copy_(torch.randn_like(p) * 0.3 + (0.0 if family.startswith("gemma") else 1.0))
    return model.to(dtype).eval()


def _ids(batch=2, seq=12):
    g = torch.Generator().manual_seed(1)
    return torch.randint(0, 128, (batch, seq), generator=g)


def _logits(model, ids):
    with torch.no_grad():
        return model(input_ids=ids, use_cache=False).logits


# (rms_norm, glu, add_rms_norm, rope) counts for 2 layers
EXPECTED = {
    "llama": (2 * 2 + 1, 2, 2, 2),
    "qwen3": (2 * 4 + 1, 2, 2, 2),        # + q_norm and k_norm per layer
    "gemma": (2 * 2 + 1, 2, 2, 2),
    "gemma2": (2 * 4 + 1, 2, 2, 2),       # sandwich norms
    "gemma3": (2 * 6 + 1, 2, 2, 2),       # sandwich norms + q_norm / k_norm
}


@pytest.mark.parametrize("family", list(EXPECTED))
def test_patched_matches_f32(family):
    model = _model(family)
    ids = _ids()
    ref = _logits(model, ids)
    report = kpatch.patch(model)
    try:
        n_norm, n_glu, n_res, n_rope = EXPECTED[family]
        assert report.counts.get("rms_norm") == n_norm, str(report)
        assert report.counts.get("glu") == n_glu, str(report)
        assert report.counts.get("add_rms_norm") == n_res, str(report)
        assert report.counts.get("rope") == n_rope, str(report)
        out = _logits(model, ids)
        torch.testing.assert_close(out, ref, atol=2e-4, rtol=2e-4)
    finally:
        kpatch.unpatch(model)


@pytest.mark.parametrize("family", ["llama", "qwen3", "gemma"])
def test_patched_matches_bf16(family):
    model = _model(family, torch.bfloat16)
    ids = _ids()
    ref = _logits(model, ids).float()
    kpatch.patch(model)
    try:
        out = _logits(model, ids).float()
        err = (out - ref).norm() / ref.norm()
        assert err < 3e-2, float(err)
    finally:
        kpatch.unpatch(model)


def test_unpatch_restores_exactly():
    model = _model("llama")
    ids = _ids()
    before = _logits(model, ids)
    modeling = sys.modules[type(model.model.layers[0].self_attn).__module__]
    rope_before = modeling.apply_rotary_pos_emb
    kpatch.patch(model)
    assert "forward" in model.model.layers[0].__dict__
    assert modeling.apply_rotary_pos_emb is not rope_before
    kpatch.unpatch(model)
    for m in model.modules():
        assert "forward" not in m.__dict__, type(m).__name__
    assert modeling.apply_rotary_pos_emb is rope_before
    after = _logits(model, ids)
    assert torch.equal(before, after)


def test_two_models_share_rope_refcount():
    a, b = _model("llama"), _model("llama")
    modeling = sys.modules[type(a.model.layers[0].self_attn).__module__]
    orig = modeling.apply_rotary_pos_emb
    kpatch.patch(a)
    kpatch.patch(b)
    kpatch.unpatch(a)
    assert modeling.apply_rotary_pos_emb is not orig      # b still patched
    kpatch.unpatch(b)
    assert modeling.apply_rotary_pos_emb is orig


def test_patch_twice_skips():
    model = _model("llama")
    kpatch.patch(model)
    try:
        again = kpatch.patch(model)
        assert again.counts.get("rms_norm") is None
        assert any("already patched" in r for _, r in again.skipped)
    finally:
        kpatch.unpatch(model)
        kpatch.unpatch(model)


def test_compile_decoder_layer_fullgraph():
    model = _model("llama")
    kpatch.patch(model)
    try:
        layer = model.model.layers[0]
        torch.manual_seed(3)
        x = torch.randn(2, 8, 64)
        pos = torch.arange(8)[None].expand(2, 8)
        cos, sin = model.model.rotary_emb(x, pos)
        with torch.no_grad():
            eager = layer(x.clone(), position_embeddings=(cos, sin), attention_mask=None)
            torch._dynamo.reset()
            compiled = torch.compile(layer, fullgraph=True, backend="aot_eager")
            out = compiled(x.clone(), position_embeddings=(cos, sin), attention_mask=None)
        eager = eager[0] if isinstance(eager, tuple) else eager
        out = out[0] if isinstance(out, tuple) else out
        torch.testing.assert_close(out, eager, atol=1e-5, rtol=1e-5)
    finally:
        kpatch.unpatch(model)


def test_verify_engaged_llama():
    model = _model("llama")
    ids = _ids()
    kpatch.patch(model)
    try:
        rep = verify_engaged(model, input_ids=ids, use_cache=False)
        assert rep.kfuse_ops.get("kfuse::rope", 0) + rep.kfuse_ops.get("kfuse::rope_qk", 0) > 0, str(rep)
        for op in ("kfuse::rms_norm", "kfuse::add_rms_norm", "kfuse::glu"):
            assert rep.kfuse_ops.get(op, 0) > 0, str(rep)
        assert "aten::rsqrt" not in rep.leftover, str(rep)
    finally:
        kpatch.unpatch(model)
    rep = verify_engaged(model, input_ids=ids, use_cache=False)
    assert not rep.kfuse_ops and "aten::rsqrt" in rep.leftover
