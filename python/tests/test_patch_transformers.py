"""kfuse.patch on tiny random-weight transformers models (CPU): Llama, Mistral, Qwen2,
Qwen3, Gemma, Gemma2, Gemma3, and the hybrids Qwen3.5 and Qwen3-Next (MoE).

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
from _recording_compile import recording_compile  # noqa: E402
from _module_copies import replica_against_scaled_model, saved_while_patched  # noqa: E402

_ops()
import importlib  # noqa: E402

kpatch = importlib.import_module("kfuse.patch")
from kfuse.engaged import verify_engaged  # noqa: E402

SMALL = dict(vocab_size=128, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, head_dim=16, max_position_embeddings=64)


def _config(family):
    if family == "llama":
        return transformers.LlamaConfig(**SMALL)
    if family == "mistral":
        return transformers.MistralConfig(**SMALL, sliding_window=None)
    if family == "qwen2":
        return transformers.Qwen2Config(**SMALL)
    if family == "qwen3":
        return transformers.Qwen3Config(**SMALL)
    if family == "gemma":
        return transformers.GemmaConfig(**SMALL, hidden_activation="gelu_pytorch_tanh")
    if family == "gemma2":
        return transformers.Gemma2Config(**SMALL, hidden_activation="gelu_pytorch_tanh", sliding_window=16)
    if family == "gemma3":
        return transformers.Gemma3TextConfig(**SMALL, hidden_activation="gelu_pytorch_tanh", sliding_window=16)
    # the hybrids: a linear-attention layer, then an attention layer (partial rotary, 1 / 4 of the head)
    hybrid = dict(layer_types=["linear_attention", "full_attention"], linear_num_value_heads=4,
                  linear_num_key_heads=2, linear_key_head_dim=16, linear_value_head_dim=16)
    if family == "qwen3_5":
        return transformers.Qwen3_5TextConfig(**SMALL, **hybrid)
    if family == "qwen3_next":
        return transformers.Qwen3NextConfig(**SMALL, **hybrid, num_experts=4, num_experts_per_tok=2,
                                            moe_intermediate_size=32, shared_expert_intermediate_size=48)
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


# (rms_norm, glu, add_rms_norm, rope, rms_norm+glu) counts for 2 layers
EXPECTED = {
    "llama": (2 * 2 + 1, 2, 2, 2, 0),
    "mistral": (2 * 2 + 1, 2, 2, 2, 0),
    "qwen2": (2 * 2 + 1, 2, 2, 2, 0),
    "qwen3": (2 * 4 + 1, 2, 2, 2, 0),        # + q_norm and k_norm per layer
    "gemma": (2 * 2 + 1, 2, 2, 2, 0),
    "gemma2": (2 * 4 + 1, 2, 2, 2, 0),       # sandwich norms
    "gemma3": (2 * 6 + 1, 2, 2, 2, 0),       # sandwich norms + q_norm / k_norm
    "qwen3_5": (2 * 2 + 2 + 1, 2, 2, 1, 1),  # q_norm / k_norm in the attention layer; its rope;
    "qwen3_next": (2 * 2 + 2 + 1, 2, 2, 1, 1),  # the linear-attention layer's gated norm (Next:
}                                            # the MoE blocks' shared experts are its MLPs)


@pytest.mark.parametrize("family", list(EXPECTED))
def test_patched_matches_f32(family):
    model = _model(family)
    ids = _ids()
    ref = _logits(model, ids)
    report = kpatch.patch(model)
    try:
        n_norm, n_glu, n_res, n_rope, n_gated = EXPECTED[family]
        assert report.counts.get("rms_norm") == n_norm, str(report)
        assert report.counts.get("glu") == n_glu, str(report)
        assert report.counts.get("add_rms_norm") == n_res, str(report)
        assert report.counts.get("rope") == n_rope, str(report)
        assert report.counts.get("rms_norm+glu", 0) == n_gated, str(report)
        assert not report.skipped, str(report)
        out = _logits(model, ids)
        torch.testing.assert_close(out, ref, atol=2e-4, rtol=2e-4)
    finally:
        kpatch.unpatch(model)


@pytest.mark.parametrize("family", ["llama", "qwen3", "gemma", "qwen3_5", "qwen3_next"])
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
        assert "_replicate_for_data_parallel" not in m.__dict__, type(m).__name__
    assert modeling.apply_rotary_pos_emb is rope_before
    after = _logits(model, ids)
    assert torch.equal(before, after)


def test_patched_rope_keeps_the_attention_layout():
    """q / k as the attention makes them (transposed views of [B, S, H, Dh]) come back in that
    layout, as the stock function returns them, so the attention output's transpose stays a view;
    a contiguous [B, H, S, Dh] input is rotated right as well."""
    model = _model("llama")
    modeling = sys.modules[type(model.model.layers[0].self_attn).__module__]
    stock = modeling.apply_rotary_pos_emb
    g = torch.Generator().manual_seed(3)
    B, S, H, KH, Dh = 2, 12, 4, 2, 16
    q = torch.randn(B, S, H, Dh, generator=g).transpose(1, 2)
    k = torch.randn(B, S, KH, Dh, generator=g).transpose(1, 2)
    ang = torch.randn(B, S, Dh // 2, generator=g)
    cos, sin = torch.cat([ang.cos(), ang.cos()], -1), torch.cat([ang.sin(), ang.sin()], -1)
    want_q, want_k = stock(q, k, cos, sin)
    kpatch.patch(model)
    try:
        patched = modeling.apply_rotary_pos_emb
        assert patched is not stock
        for qq, kk in ((q, k), (q.contiguous(), k.contiguous())):
            got_q, got_k = patched(qq, kk, cos, sin)
            torch.testing.assert_close(got_q, want_q, atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(got_k, want_k, atol=1e-5, rtol=1e-5)
        got_q, got_k = patched(q, k, cos, sin)
        assert got_q.stride() == want_q.stride() == q.stride(), (got_q.stride(), want_q.stride())
        assert got_k.stride() == want_k.stride() == k.stride(), (got_k.stride(), want_k.stride())
    finally:
        kpatch.unpatch(model)


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


@pytest.mark.parametrize("policy", ["auto", "all"])
def test_compile_decoder_layer_fullgraph(policy):
    """Under torch.compile, policy "all" keeps every kfuse op in the graph; "auto" (the default)
    leaves the Llama layer to the compiler: no kfuse op in the graph, same result."""
    model = _model("llama")
    kpatch.patch(model, compile_policy=policy)
    try:
        layer = model.model.layers[0]
        torch.manual_seed(3)
        x = torch.randn(2, 8, 64)
        pos = torch.arange(8)[None].expand(2, 8)
        cos, sin = model.model.rotary_emb(x, pos)
        with torch.no_grad():
            eager = layer(x.clone(), position_embeddings=(cos, sin), attention_mask=None)
            torch._dynamo.reset()
            compiled, seen = recording_compile(layer)
            out = compiled(x.clone(), position_embeddings=(cos, sin), attention_mask=None)
        eager = eager[0] if isinstance(eager, tuple) else eager
        out = out[0] if isinstance(out, tuple) else out
        torch.testing.assert_close(out, eager, atol=1e-5, rtol=1e-5)
        if policy == "all":                 # rope of q and k: one rope_qk op (rope in the test stand-in)
            assert seen - {"rope", "rope_qk"} == {"rms_norm", "add_rms_norm", "glu"}
            assert seen & {"rope", "rope_qk"}
        else:
            assert seen == set()
    finally:
        kpatch.unpatch(model)
        torch._dynamo.reset()


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


@pytest.mark.parametrize("family", ["qwen3_5", "qwen3_next"])
def test_hybrid_runs_the_ops_and_generates_the_same(family):
    """A patched hybrid runs every op it was patched with (the attention layer's partial rope, the
    gated norm's rms_norm + glu, the add_rms_norm seams) and greedy generation through its caches
    (the linear-attention layer's recurrent state, the attention's KV) gives the unpatched tokens."""
    model = _model(family)
    ids = _ids(seq=9)
    with torch.no_grad():
        want = model.generate(ids, max_new_tokens=5, do_sample=False)
    kpatch.patch(model)
    try:
        rep = verify_engaged(model, input_ids=ids, use_cache=False)
        assert rep.kfuse_ops.get("kfuse::rope", 0) + rep.kfuse_ops.get("kfuse::rope_qk", 0) == 1, str(rep)
        assert rep.kfuse_ops.get("kfuse::add_rms_norm", 0) == 2, str(rep)
        assert rep.kfuse_ops.get("kfuse::glu", 0) == 3, str(rep)     # two MLPs, the gated norm
        assert rep.kfuse_ops.get("kfuse::rms_norm", 0) == 6, str(rep)  # (the linear attention's own
        # l2norm of q / k still runs its rsqrt)
        with torch.no_grad():
            got = model.generate(ids, max_new_tokens=5, do_sample=False)
        assert torch.equal(got, want)
    finally:
        kpatch.unpatch(model)


def test_patched_partial_rope_matches_the_function():
    """The hybrids' apply_rotary_pos_emb rotates the first cos.shape[-1] channels of each head:
    the patched function does so through the op (tables 4, 8 and 16 wide on heads of 16), in f32
    to the function's rounding and in bf16 within its three roundings."""
    qwen = pytest.importorskip("transformers.models.qwen3_5.modeling_qwen3_5")
    model = _model("qwen3_5")
    orig = qwen.apply_rotary_pos_emb
    kpatch.patch(model)
    try:
        patched = qwen.apply_rotary_pos_emb
        assert patched is not orig
        g = torch.Generator().manual_seed(5)
        for r in (4, 8, 16):
            for dtype, tol in ((torch.float32, 1e-6), (torch.bfloat16, 2e-2)):
                q = torch.randn(2, 4, 7, 16, generator=g).to(dtype)
                k = torch.randn(2, 2, 7, 16, generator=g).to(dtype)
                ang = torch.randn(2, 7, r // 2, generator=g) * 3
                cos, sin = torch.cat([ang.cos()] * 2, -1).to(dtype), torch.cat([ang.sin()] * 2, -1).to(dtype)
                with torch.no_grad():
                    got, want = patched(q, k, cos, sin), orig(q, k, cos, sin)
                for a, b in zip(got, want):
                    assert a.dtype == b.dtype and a.shape == b.shape
                    torch.testing.assert_close(a, b, atol=tol, rtol=tol)
                    assert torch.equal(a[..., r:], b[..., r:])      # the channels past r pass as they are
    finally:
        kpatch.unpatch(model)
    assert qwen.apply_rotary_pos_emb is orig


def test_dropped_model_releases_rope():
    import gc

    model = _model("llama")
    modeling = sys.modules[type(model.model.layers[0].self_attn).__module__]
    orig = modeling.apply_rotary_pos_emb
    kpatch.patch(model)
    assert modeling.apply_rotary_pos_emb is not orig
    n_patched = len(kpatch._PATCHED_FORWARDS)
    assert n_patched > 0
    del model                                   # never unpatched
    gc.collect()
    assert modeling.apply_rotary_pos_emb is orig
    assert len(kpatch._PATCHED_FORWARDS) == 0


def _all_rmsnorm_classes():
    """Every *RMSNorm class defined in a transformers model module that imports here."""
    import pkgutil
    import transformers.models as tm
    out = []
    for info in pkgutil.iter_modules(tm.__path__):
        try:
            mod = importlib.import_module("transformers.models.%s.modeling_%s" % (info.name, info.name))
        except Exception:
            continue
        out += [obj for name, obj in vars(mod).items()
                if isinstance(obj, type) and name.endswith("RMSNorm") and obj.__module__ == mod.__name__]
    return out


def _one_ulp_apart_at_most(got, want):
    """The fraction of elements where got and want differ; asserts each such difference is
    one ulp (of the larger magnitude) at most."""
    g, w = got.float(), want.float()
    apart = g != w
    ulp = torch.finfo(got.dtype).eps * torch.maximum(g.abs(), w.abs())
    assert ((g - w).abs() <= ulp)[apart].all(), (g - w).abs().max().item()
    return apart.float().mean().item()


def test_every_transformers_rmsnorm_of_a_known_form_patches():
    """Each transformers RMSNorm class whose form the probe finds (Llama's, the f32 product,
    Gemma's (1 + w)), built as the model builds it and patched: on a fresh input of another shape
    its 16-bit outputs are the module's own but where the two row sums (PyTorch's, the op's, in
    other orders) round a normalized value apart: at most one ulp, in under 1 % of the elements
    (a wrong form differs in about a quarter). Most classes have one of the three forms."""
    forms = {}
    for cls in _all_rmsnorm_classes():
        form = kpatch.rms_norm_form(cls)
        forms.setdefault(form, []).append(cls.__name__)
        if not form:
            continue
        try:
            module = cls(96, eps=1e-5)
        except TypeError:
            continue
        torch.manual_seed(7)
        with torch.no_grad():
            module.weight.copy_((1 if form != "gemma" else 0) + 0.3 * torch.randn(96))
        for dtype in (torch.bfloat16, torch.float16):
            m = module.to(dtype)
            x = (torch.randn(3, 5, 96) * 4).to(dtype)
            with torch.no_grad():
                want = m(x)
            report = kpatch.patch(m)
            try:
                assert report.counts.get("rms_norm") == 1, (cls.__name__, str(report))
                with torch.no_grad():
                    got = m(x)
            finally:
                kpatch.unpatch(m)
            assert got.dtype == want.dtype, (cls.__name__, dtype)
            assert _one_ulp_apart_at_most(got, want) < 0.01, (cls.__name__, dtype, form)
    assert len(forms.get("llama", [])) >= 10 and forms.get("none") and forms.get("gemma"), forms.keys()
    for name in ("LlamaRMSNorm", "Qwen3RMSNorm", "MistralRMSNorm"):
        assert name in forms["llama"], name
    for name in ("GemmaRMSNorm", "Gemma3RMSNorm", "Qwen3_5RMSNorm"):
        assert name in forms["gemma"], name
    for name in ("GptOssRMSNorm", "Olmo2RMSNorm"):
        assert name in forms["none"], name


def _hf(mod, name):
    """transformers.models.<mod>.modeling_<mod>.<name>, or None where this transformers lacks it."""
    try:
        return getattr(importlib.import_module("transformers.models.%s.modeling_%s" % (mod, mod)), name)
    except (ImportError, AttributeError):
        return None


class _SiluMLP(torch.nn.Module):
    """The gate / up / down layout with silu written in, not the module's act_fn."""

    def forward(self, x):
        return self.down_proj(torch.nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


def test_mlp_probe_tells_the_glu_form():
    """mlp_is_glu: the gate / up / down MLPs with their own act_fn (Llama's, Qwen3.5's, Gemma's,
    DeepSeek-V3's, OLMo 2's) are the glu form; CLIP's (fc1, fc2), Nemotron's (no gate) and one
    that ignores its act_fn are not."""
    pt = importlib.import_module("kfuse.patch_transformers")
    want = {("llama", "LlamaMLP"): True, ("qwen3_5", "Qwen3_5MLP"): True, ("gemma", "GemmaMLP"): True,
            ("deepseek_v3", "DeepseekV3MLP"): True, ("olmo2", "Olmo2MLP"): True,
            ("clip", "CLIPMLP"): False, ("nemotron", "NemotronMLP"): False}
    for (mod, cls), glu in want.items():
        c = _hf(mod, cls)
        assert c is None or pt.mlp_is_glu(c) is glu, cls
    assert pt.mlp_is_glu(_SiluMLP) is False


def test_layer_probe_tells_llamas_decoder_layer():
    """layer_is_prenorm: Llama's, Qwen3's and SmolLM3's decoder layers are of Llama's form;
    Granite's (a residual multiplier), OLMo 2's (norms after), Gemma 2's (sandwich norms) and
    Phi-3's (dropouts on the residual branches) are not."""
    pt = importlib.import_module("kfuse.patch_transformers")
    want = {("llama", "LlamaDecoderLayer"): True, ("qwen3", "Qwen3DecoderLayer"): True,
            ("smollm3", "SmolLM3DecoderLayer"): True, ("granite", "GraniteDecoderLayer"): False,
            ("olmo2", "Olmo2DecoderLayer"): False, ("gemma2", "Gemma2DecoderLayer"): False,
            ("phi3", "Phi3DecoderLayer"): False}
    for (mod, cls), prenorm in want.items():
        c = _hf(mod, cls)
        assert c is None or pt.layer_is_prenorm(c) is prenorm, cls


def test_rope_probe_tells_the_function_forms():
    """rope_function_form: Llama's rotation (full width, the promoted dtype back), OLMo 2's
    (rounded back to q's dtype), Qwen3.5's and Phi-3's partial rotary, Cohere's interleaved
    pairs (computed in f32, rounded back), GLM's and Helium's interleaved pairs from tables of
    the half layout; GPT-OSS's (half-width tables) and GPT-J's (another signature) are not
    taken."""
    pt = importlib.import_module("kfuse.patch_transformers")
    want = {"llama": ("full", False, "half"), "olmo2": ("full", True, "half"),
            "qwen3_5": ("partial", False, "half"), "phi3": ("partial", False, "half"),
            "cohere": ("full", True, "interleaved"), "glm": ("partial", False, "interleaved_from_half"),
            "helium": ("full", False, "interleaved_from_half"), "gpt_oss": ("", False, "half"),
            "gptj": ("", False, "half")}
    for mod, form in want.items():
        fn = _hf(mod, "apply_rotary_pos_emb")
        assert fn is None or pt.rope_function_form(fn) == form, mod
    # only attention that calls its module's function counts as patched (not a vision tower's)
    qwen = pytest.importorskip("transformers.models.qwen3_5.modeling_qwen3_5")
    assert pt._calls_module_rope(qwen.Qwen3_5Attention)
    assert not pt._calls_module_rope(qwen.Qwen3_5VisionAttention)


@pytest.mark.parametrize("family,n_glu,n_layers", [("olmo2", 2, 0), ("phi3", 0, 0), ("granite", 2, 0),
                                                  ("smollm3", 2, 2)])
def test_other_families_are_patched_by_their_forms(family, n_glu, n_layers):
    """Families kfuse.patch does not name (OLMo 2: the f32-product norm, norms after the
    sub-blocks; Phi-3, Granite, SmolLM3: Llama's norm): their RMSNorms alone run kfuse's
    rms_norm, with bf16 logits the original's but where a row sum rounds apart (relative error
    ~3e-4 in OLMo 2's; a wrong form ~1e-2); with everything patched their MLPs of the gate / up
    / down form run glu (Phi-3's packed gate_up_proj is not that form), their rope functions
    kfuse's rope (Phi-3's partial rotary, OLMo 2's f32 tables) and decoder layers of Llama's
    form add_rms_norm (SmolLM3's; Granite's scale the residual, Phi-3's drop out, OLMo 2's
    norm after), the logits within bf16's rounding."""
    configs = {"olmo2": "Olmo2Config", "phi3": "Phi3Config", "granite": "GraniteConfig",
               "smollm3": "SmolLM3Config"}
    cfg_cls = getattr(transformers, configs[family], None)
    if cfg_cls is None:
        pytest.skip("no %s in this transformers" % configs[family])
    torch.manual_seed(0)
    cfg = cfg_cls(**SMALL, pad_token_id=0)
    cfg._attn_implementation = "eager"
    model = transformers.AutoModelForCausalLM.from_config(cfg).eval().to(torch.bfloat16)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(torch.randn_like(p) * 0.3 + 1.0)
    ids = _ids()
    ref = _logits(model, ids).float()
    n_norms = sum(type(m).__name__.endswith("RMSNorm") for m in model.modules())
    for alone, bound in ((True, 2e-3), (False, 3e-2)):        # the norms alone, then everything
        report = kpatch.patch(model, mlp=not alone, rope=not alone, residual=not alone)
        try:
            assert report.counts.get("rms_norm") == n_norms and not report.skipped, str(report)
            assert report.counts.get("glu", 0) == (0 if alone else n_glu), str(report)
            assert report.counts.get("add_rms_norm", 0) == (0 if alone else n_layers), str(report)
            assert report.counts.get("rope", 0) == (0 if alone else 2), str(report)
            rep = verify_engaged(model, input_ids=ids, use_cache=False)
            assert rep.kfuse_ops.get("kfuse::rms_norm", 0) == n_norms - (0 if alone else n_layers), str(rep)
            assert rep.kfuse_ops.get("kfuse::glu", 0) == (0 if alone else n_glu), str(rep)
            assert rep.kfuse_ops.get("kfuse::add_rms_norm", 0) == (0 if alone else n_layers), str(rep)
            assert rep.kfuse_ops.get("kfuse::rope", 0) == (0 if alone else 2), str(rep)
            out = _logits(model, ids).float()
            err = (out - ref).norm() / ref.norm()
            assert err < bound, (alone, float(err))
        finally:
            kpatch.unpatch(model)


def test_every_small_causal_lm_keeps_its_logits_when_patched():
    """Every causal LM of transformers that builds from a small config (about 110 model types;
    those over 5 M parameters at this config are left out), patched in f32: its logits stay
    within 1e-4 of the original's (relative to the largest) whatever the probes took up (norms,
    MLPs, rope, layer seams), and unpatch gives the original's back exactly."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    ids = torch.randint(1, 100, (1, 7), generator=torch.Generator().manual_seed(1))
    checked, patched = [], {}
    for model_type in sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES):
        try:
            cfg = transformers.AutoConfig.for_model(model_type, **SMALL, pad_token_id=0)
            cfg._attn_implementation = "eager"
            with torch.device("meta"):
                size = sum(p.numel() for p in transformers.AutoModelForCausalLM.from_config(cfg).parameters())
            if size > 5e6:
                continue
            torch.manual_seed(0)
            model = transformers.AutoModelForCausalLM.from_config(cfg).eval()
            ref = _logits(model, ids)
        except Exception:
            continue                            # a model this config does not build or run
        report = kpatch.patch(model)
        try:
            out = _logits(model, ids)
        finally:
            kpatch.unpatch(model)
        err = float((out - ref).abs().max() / ref.abs().max())
        assert err < 1e-4, (model_type, err, report.counts)
        assert torch.equal(_logits(model, ids), ref), model_type
        checked.append(model_type)
        for kind in report.counts:
            patched[kind] = patched.get(kind, 0) + 1
    assert len(checked) >= 50 and patched.get("rms_norm", 0) >= 30 and patched.get("rope", 0) >= 30, (
        len(checked), patched)


@pytest.mark.parametrize("family", ["CohereConfig", "GlmConfig", "HeliumConfig"])
@pytest.mark.parametrize("dtype,bound", [(torch.float32, 1e-5), (torch.bfloat16, 3e-2)], ids=str)
def test_interleaved_rope_runs_the_op(family, dtype, bound):
    """Cohere's apply_rotary_pos_emb pairs channels (2i, 2i + 1) and computes in f32, GLM's
    (partial rotary) and Helium's pair them so from tables of the half layout: patched, each runs
    kfuse's rope with the interleaved convention, the logits within f32's rounding (Cohere's with
    the half pairing would be off by ~7e-3) or bf16's."""
    if not hasattr(transformers, family):
        pytest.skip("no %s in this transformers" % family)
    torch.manual_seed(0)
    cfg = getattr(transformers, family)(**SMALL, pad_token_id=0)
    cfg._attn_implementation = "eager"
    model = transformers.AutoModelForCausalLM.from_config(cfg).eval().to(dtype)
    ids = _ids()
    ref = _logits(model, ids).float()
    report = kpatch.patch(model)
    try:
        assert report.counts.get("rope") == 2, str(report)
        rep = verify_engaged(model, input_ids=ids, use_cache=False)
        assert rep.kfuse_ops.get("kfuse::rope", 0) == 2, str(rep)
        out = _logits(model, ids).float()
        err = (out - ref).norm() / ref.norm()
        assert err < bound, float(err)
    finally:
        kpatch.unpatch(model)


class _OtherRMSNorm(torch.nn.Module):
    """A norm class from outside transformers, put in place of the family's class."""

    def __init__(self, hidden_size, eps=1e-6, **_):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, x):
        xf = x.float()
        return self.weight * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)).to(x.dtype)


def test_replaced_family_class_is_reported(monkeypatch):
    modeling = importlib.import_module("transformers.models.llama.modeling_llama")
    monkeypatch.setattr(modeling, "LlamaRMSNorm", _OtherRMSNorm)
    model = _model("llama")
    assert type(model.model.norm) is _OtherRMSNorm
    report = kpatch.patch(model)
    try:
        assert "rms_norm" not in report.counts and "add_rms_norm" not in report.counts, str(report)
        reasons = dict(report.skipped)
        assert "not a transformers class" in reasons["model.norm"], str(report)
        assert "_OtherRMSNorm" in reasons["model.layers.0"], str(report)
        assert report.counts.get("glu") == 2, str(report)
    finally:
        kpatch.unpatch(model)


def _fake_liger(monkeypatch):
    """A liger_kernel stand-in that, like the real one, swaps names in modeling_llama."""
    import types

    def apply_liger_kernel_to_llama(model=None, **_):
        modeling = importlib.import_module("transformers.models.llama.modeling_llama")
        modeling.LlamaRMSNorm = _OtherRMSNorm
        modeling.apply_rotary_pos_emb = lambda q, k, cos, sin, position_ids=None, unsqueeze_dim=1: (q, k)
        modeling.LlamaForCausalLM.forward = modeling.LlamaForCausalLM.forward   # class attribute write

    pkg = types.ModuleType("liger_kernel")
    sub = types.ModuleType("liger_kernel.transformers")
    sub.apply_liger_kernel_to_llama = apply_liger_kernel_to_llama
    pkg.transformers = sub
    monkeypatch.setitem(sys.modules, "liger_kernel", pkg)
    monkeypatch.setitem(sys.modules, "liger_kernel.transformers", sub)


def test_bench_e2e_llama_cases_patch_the_same(monkeypatch):
    """Each e2e case builds a fresh model: the liger column of one case must not change the next,
    nor the columns it is timed with."""
    bench_e2e = importlib.import_module("kfuse.bench_e2e")
    modeling = importlib.import_module("transformers.models.llama.modeling_llama")
    _fake_liger(monkeypatch)
    names = ("LlamaRMSNorm", "LlamaMLP", "apply_rotary_pos_emb")
    before = {n: getattr(modeling, n) for n in names}
    forward_before = modeling.LlamaForCausalLM.__dict__["forward"]
    for n in names:                     # restored by monkeypatch as well, should the bench not do it
        monkeypatch.setattr(modeling, n, before[n])
    monkeypatch.setattr(modeling.LlamaForCausalLM, "forward", forward_before)
    rows = [bench_e2e._run_case(case, "cpu", torch.float32, True, 1, False)
            for case in ("llama-prefill", "llama-b16-token")]
    for n in names:
        assert getattr(modeling, n) is before[n], n
    assert modeling.LlamaForCausalLM.__dict__["forward"] is forward_before
    for row in rows:
        assert "ms" in row["liger"], row["liger"]
        # timed interleaved with the kfuse column, each with its own module state: the stand-in's
        # rope (no rotation) shows in liger's prefill output (one token at position 0 is not
        # rotated), and kfuse's output is still right (below)
        assert row["timing"] == "interleaved: all columns, module state switched per column", row
        if row["case"] == "llama-prefill":
            assert row["liger"]["err"] > 1e-3, row["liger"]
        assert row["patched"] == {"add_rms_norm": 2, "glu": 2, "rms_norm": 5, "rope": 2}, row
        assert row["patch_skipped"] == [], row
        assert row["kfuse"]["err"] < 1e-5, row


def test_bench_e2e_compiled_columns_interleaved_without_recompiles(monkeypatch):
    """compile and kfuse+compile timed in one interleaved group with liger: each compiled model
    runs only in the module state it was traced in, so dynamo compiles each once (2 graphs) and
    every column's output is its own (kfuse's right, the stand-in liger's unrotated)."""
    bench_e2e = importlib.import_module("kfuse.bench_e2e")
    modeling = importlib.import_module("transformers.models.llama.modeling_llama")
    _fake_liger(monkeypatch)
    rope_before = modeling.apply_rotary_pos_emb
    monkeypatch.setattr(modeling, "apply_rotary_pos_emb", rope_before)
    row = bench_e2e._run_case("llama-prefill", "cpu", torch.float32, True, 2, True)
    assert modeling.apply_rotary_pos_emb is rope_before
    assert row["dynamo"] == {"graphs": 2, "graph_breaks": 0}, row["dynamo"]
    for col in ("eager", "kfuse", "compile", "kfuse+compile", "liger"):
        assert "ms" in row[col], (col, row[col])
    assert row["kfuse"]["err"] < 1e-5 and row["kfuse+compile"]["err"] < 1e-4, row
    assert row["compile"]["err"] < 1e-4, row
    assert row["liger"]["err"] > 1e-3, row["liger"]


def test_bench_e2e_compile_mode_reaches_both_compiled_columns(monkeypatch):
    """--compile-mode is torch.compile's mode for compile and kfuse+compile alike (and recorded in
    the row); without it torch.compile gets its default (mode None)."""
    bench_e2e = importlib.import_module("kfuse.bench_e2e")
    modes = []
    real_compile = torch.compile

    def recording(model, **kw):
        modes.append(kw.get("mode"))
        return real_compile(model, backend="eager")     # no inductor: only the wiring is under test

    monkeypatch.setattr(torch, "compile", recording)
    opt = bench_e2e._parse(["--e2e", "--compile-mode", "reduce-overhead", "--cases", "llama-b16-token"])
    assert opt.compile_mode == "reduce-overhead"
    cols = ["eager", "compile", "kfuse+compile"]
    row = bench_e2e._run_case("llama-b16-token", "cpu", torch.float32, True, 1, True, cols,
                              compile_mode=opt.compile_mode)
    assert modes == ["reduce-overhead", "reduce-overhead"], modes
    assert row["compile_mode"] == "reduce-overhead", row
    for col in cols:
        assert "ms" in row[col], (col, row[col])
    assert row["kfuse+compile"]["err"] < 1e-4, row
    modes.clear()
    row = bench_e2e._run_case("llama-b16-token", "cpu", torch.float32, True, 1, True, cols)
    assert modes == [None, None] and row["compile_mode"] == "default", (modes, row)
    with pytest.raises(SystemExit):
        bench_e2e._parse(["--compile-mode", "fastest"])


def test_verify_engaged_sees_what_is_not_patched():
    """verify_engaged must report the norms as PyTorch when only the MLPs and rope were patched."""
    ops = sys.modules["kfuse.ops"]
    before = {n: getattr(ops, n) for n in ("rms_norm", "glu", "rope")}
    model = _model("llama")
    kpatch.patch(model, norms=False, residual=False)
    try:
        rep = verify_engaged(model, input_ids=_ids(), use_cache=False)
    finally:
        kpatch.unpatch(model)
    assert rep.kfuse_ops.get("kfuse::glu", 0) == 2, str(rep)
    assert "kfuse::rms_norm" not in rep.kfuse_ops and "kfuse::add_rms_norm" not in rep.kfuse_ops, str(rep)
    assert rep.leftover.get("aten::rsqrt", 0) >= 5, str(rep)         # 2 layers x 2 norms + the final norm
    assert "aten::silu" not in rep.leftover, str(rep)
    for n, fn in before.items():                                     # the counting wrappers are gone
        assert getattr(ops, n) is fn, n


def _grads(model, ids):
    model.zero_grad(set_to_none=True)
    out = model(input_ids=ids, labels=ids, use_cache=False)
    out.loss.backward()
    return out.loss.detach(), {n: p.grad for n, p in model.named_parameters()}


def _grads_while_patched(patched, model, ids):
    """_grads of `model` before and while `patched` is patched."""
    before = _grads(model, ids)
    kpatch.patch(patched)
    try:
        return before, _grads(model, ids)
    finally:
        kpatch.unpatch(patched)


@pytest.mark.parametrize("family", ["llama", "gemma2"])
def test_training_falls_back_with_right_gradients(family):
    """kfuse ops have no backward: with autograd recording, the patched model runs its original
    code, so the loss and every parameter's gradient equal the unpatched model's."""
    model = _model(family).train()
    (loss_ref, g_ref), (loss, g) = _grads_while_patched(model, model, _ids())
    torch.testing.assert_close(loss, loss_ref, atol=1e-6, rtol=1e-6)
    for n, gr in g_ref.items():
        if gr is None:
            continue
        assert g[n] is not None, n
        torch.testing.assert_close(g[n], gr, atol=1e-6, rtol=1e-5, msg=n)


def test_patch_leaves_other_models_trainable():
    """The shared apply_rotary_pos_emb replacement must not cut another (unpatched) model of the
    family off from autograd."""
    other = _model("llama").train()
    (loss_ref, g_ref), (loss, g) = _grads_while_patched(_model("llama"), other, _ids())
    torch.testing.assert_close(loss, loss_ref)
    q = "model.layers.0.self_attn.q_proj.weight"
    assert g[q] is not None
    torch.testing.assert_close(g[q], g_ref[q])


def test_gemma2_under_autocast():
    """Under autocast the residual stream (f32) and the attention output (bf16) differ in dtype:
    the layer seam falls back to the unfused add instead of failing."""
    ref, model = _model("gemma2"), _model("gemma2")
    ids = _ids()
    kpatch.patch(model)
    try:
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            want = ref(input_ids=ids, use_cache=False).logits
            got = model(input_ids=ids, use_cache=False).logits
    finally:
        kpatch.unpatch(model)
    torch.testing.assert_close(got.float(), want.float(), atol=0.1, rtol=0.05)


def test_deepcopy_of_patched_model_runs_its_own_weights():
    """A deep copy of a patched model: its fallbacks (here: autograd recording) run the copy's
    original code on the copy's weights, not the model it was copied from; unpatch() of the copy
    restores its own forwards."""
    import copy

    model = _model("llama")
    kpatch.patch(model)
    try:
        dup = copy.deepcopy(model)
    finally:
        kpatch.unpatch(model)
    with torch.no_grad():
        for n, p in dup.named_parameters():
            if "norm" in n or "proj" in n:
                p.mul_(1.5)
    plain = copy.deepcopy(dup)
    kpatch.unpatch(plain)               # a copy of the copy, every kfuse forward removed
    assert not any("forward" in m.__dict__ for m in plain.modules())
    ids = _ids()
    want = plain(input_ids=ids, use_cache=False).logits          # grad mode: original code
    got = dup(input_ids=ids, use_cache=False).logits              # patched copy, falling back
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    with torch.no_grad():
        got = dup(input_ids=ids, use_cache=False).logits          # patched copy, kfuse ops
    torch.testing.assert_close(got, want.detach(), atol=1e-4, rtol=1e-4)
    assert kpatch.unpatch(dup) > 0
    assert not any("forward" in m.__dict__ for m in dup.modules())


def test_dataparallel_replica_runs_its_own_weights():
    """The replicas nn.DataParallel makes of a patched model (a shallow copy of each module with
    its own parameters) run their own weights through kfuse's forwards, not the original's."""
    ids = _ids()
    got, want = replica_against_scaled_model(lambda: _model("llama"), lambda m: _logits(m, ids))
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


def test_pickled_patched_model_loads_unpatched():
    """torch.save of a patched transformers model loads with the classes' own forwards and
    computes what the model did."""
    import io

    model = _model("llama")
    ids = _ids()
    ref = _logits(model, ids)
    data, loaded = saved_while_patched(model)
    assert torch.equal(_logits(loaded, ids), ref)
    # the loaded model patched in turn: its DataParallel replicas run their own weights too
    got, want = replica_against_scaled_model(
        lambda: torch.load(io.BytesIO(data), weights_only=False), lambda m: _logits(m, ids))
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


def test_unpatch_of_a_copy_patched_again():
    """patch() of a deep copy of a patched model finds its forwards patched already (and only
    takes the shared rope); unpatch() of the copy still restores every forward."""
    import copy

    model = _model("llama")
    kpatch.patch(model)
    try:
        dup = copy.deepcopy(model)
        kpatch.patch(dup)
        assert kpatch.unpatch(dup) > 1
        assert not any("forward" in m.__dict__ for m in dup.modules())
    finally:
        kpatch.unpatch(model)


@pytest.mark.parametrize("family", ["gemma", "gemma3"])
def test_gemma_norm_weights_of_a_third_dtype(family):
    """Gemma norms compute (1 + weight.float()): bf16 norm weights with f32 activations work
    unpatched, and patched (the norms and the layer seam's add_rms_norm) with kfuse's ops, the
    weights handed to them as f32."""
    model = _model(family)
    for m in model.modules():
        if type(m).__name__.endswith("RMSNorm"):
            m.to(torch.bfloat16)
    ids = _ids()
    ref = _logits(model, ids)
    kpatch.patch(model)
    try:
        got = _logits(model, ids)
        rep = verify_engaged(model, input_ids=ids, use_cache=False)
    finally:
        kpatch.unpatch(model)
    assert got.dtype == ref.dtype == torch.float32
    torch.testing.assert_close(got, ref, atol=2e-4, rtol=2e-4)
    for op in ("kfuse::rms_norm", "kfuse::add_rms_norm"):
        assert rep.kfuse_ops.get(op, 0) > 0, str(rep)


@pytest.mark.parametrize("family, dtype, f32_embeddings", [("gemma3", torch.bfloat16, True),
                                                         ("llama", torch.float16, False)])
def test_model_under_bf16_autocast(family, dtype, f32_embeddings):
    """Under bf16 autocast: a bf16 Gemma3 fed f32 inputs_embeds (an f32 residual stream, bf16 norm
    weights that HF's norm upcasts), and an f16 Llama (bf16 q / k from autocast's projections,
    f16 cos / sin from the model's rotary module)."""
    ref, model = _model(family, dtype), _model(family, dtype)
    if f32_embeddings:
        inputs = dict(inputs_embeds=ref.get_input_embeddings()(_ids()).float())
    else:
        inputs = dict(input_ids=_ids())
    kpatch.patch(model)
    try:
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            want = ref(**inputs, use_cache=False).logits
            got = model(**inputs, use_cache=False).logits
    finally:
        kpatch.unpatch(model)
    assert got.dtype == want.dtype
    torch.testing.assert_close(got.float(), want.float(), atol=0.1, rtol=0.05)


# (q / k dtype, cos / sin dtype): HF's result has the promoted dtype
_ROPE_DTYPES = [(torch.bfloat16, torch.float16), (torch.float16, torch.bfloat16), (torch.bfloat16, torch.float32),
                (torch.float32, torch.bfloat16), (torch.float16, torch.float16), (torch.float32, torch.float32)]


@pytest.mark.parametrize("dtypes", _ROPE_DTYPES, ids=lambda d: "%s-%s" % (str(d[0])[6:], str(d[1])[6:]))
def test_patched_rope_returns_hf_dtypes(dtypes):
    """The replaced apply_rotary_pos_emb returns what the stock one does, dtypes included, for
    q / k and cos / sin of any two dtypes (an f16 model under bf16 autocast: bf16 q / k, f16
    tables; an f32 model under bf16 autocast: bf16 q / k, f32 tables)."""
    qdt, tdt = dtypes
    model = _model("llama")
    modeling = sys.modules[type(model.model.layers[0].self_attn).__module__]
    stock = modeling.apply_rotary_pos_emb
    g = torch.Generator().manual_seed(3)
    q = torch.randn(2, 4, 12, 16, generator=g).to(qdt)
    k = torch.randn(2, 2, 12, 16, generator=g).to(qdt)
    ang = torch.randn(2, 12, 8, generator=g)
    cos, sin = torch.cat([ang.cos()] * 2, -1).to(tdt), torch.cat([ang.sin()] * 2, -1).to(tdt)
    want = stock(q, k, cos, sin)
    kpatch.patch(model)
    try:
        got = modeling.apply_rotary_pos_emb(q, k, cos, sin)
    finally:
        kpatch.unpatch(model)
    for w, o in zip(want, got):
        assert o.dtype == w.dtype, (o.dtype, w.dtype)
        torch.testing.assert_close(o, w, atol=1e-2, rtol=1e-2)


def test_patched_rope_leaves_indexed_tables_to_the_original():
    """transformers <= 4.37's apply_rotary_pos_emb(q, k, cos, sin, position_ids) took [S, Dh]
    tables and rotated by cos[position_ids]: with position_ids given and 2-D tables the
    replacement calls the original (it rotated by 0..S-1, wrong for a left-padded batch)."""
    from kfuse import patch_transformers as pt

    def old_hf_rope(q, k, cos, sin, position_ids, unsqueeze_dim=1):
        cos, sin = cos[position_ids].unsqueeze(unsqueeze_dim), sin[position_ids].unsqueeze(unsqueeze_dim)
        rot = lambda x: torch.cat((-x[..., x.shape[-1] // 2:], x[..., : x.shape[-1] // 2]), -1)  # noqa: E731
        return q * cos + rot(q) * sin, k * cos + rot(k) * sin

    g = torch.Generator().manual_seed(5)
    q = torch.randn(2, 4, 6, 16, generator=g)
    k = torch.randn(2, 2, 6, 16, generator=g)
    ang = torch.randn(6, 8, generator=g)         # S rows, as the old rotary module's cache slice
    cos, sin = torch.cat([ang.cos()] * 2, -1), torch.cat([ang.sin()] * 2, -1)
    position_ids = torch.tensor([[0, 0, 1, 2, 3, 4], [0, 1, 2, 3, 4, 5]])   # row 0 left-padded
    replaced = pt._make_rope(pt.load_ops(), old_hf_rope, True, "auto")
    want = old_hf_rope(q, k, cos, sin, position_ids)
    for args, kwargs in (((position_ids,), {}), ((), {"position_ids": position_ids})):
        with torch.no_grad():
            got = replaced(q, k, cos, sin, *args, **kwargs)
        for w, o in zip(want, got):
            torch.testing.assert_close(o, w)


@pytest.mark.parametrize("family", ["llama", "qwen3", "gemma3"])
@pytest.mark.parametrize("when", ["before", "after"])
def test_float64_model_runs_its_original_code(family, when):
    """kfuse ops take f32 / f16 / bf16: a float64 model (patched in float64, or .double()'d after
    patching) runs its original code in every patched forward, so its logits are HF's exactly."""
    import copy

    model = _model(family)
    ids = _ids()
    ref = _logits(copy.deepcopy(model).double(), ids)
    if when == "before":
        model.double()
    kpatch.patch(model)
    try:
        if when == "after":
            model.double()
        got = _logits(model, ids)
    finally:
        kpatch.unpatch(model)
    assert got.dtype == torch.float64
    assert torch.equal(got, ref)


def test_gradient_checkpointing_still_checkpoints():
    """transformers checkpoints in the decoder layer's class forward: a patched layer that trains
    with grad runs that forward, so each attention runs twice per step (forward and the recompute
    in backward), as unpatched, with the same loss and gradients."""
    model = _model("llama")
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    calls = []
    for layer in model.model.layers:
        layer.self_attn.register_forward_hook(lambda *a: calls.append(1))
    ids = _ids()

    def step():
        calls.clear()
        model.zero_grad()
        loss = model(input_ids=ids, labels=ids, use_cache=False).loss
        loss.backward()
        return len(calls), loss.detach(), model.model.layers[0].mlp.gate_proj.weight.grad.clone()

    n0, loss0, grad0 = step()
    kpatch.patch(model)
    try:
        n1, loss1, grad1 = step()
    finally:
        kpatch.unpatch(model)
    assert n0 == 4 and n1 == n0, (n0, n1)
    torch.testing.assert_close(loss1, loss0)
    torch.testing.assert_close(grad1, grad0)


def test_layer_patched_on_its_own_is_collected():
    """patch() of one decoder layer (the module whose own forward is replaced) keeps no strong
    reference to it: dropped without unpatch(), it is collected and gives back its share of the
    replaced apply_rotary_pos_emb."""
    import gc
    import weakref
    import transformers.models.llama.modeling_llama as modeling

    original = modeling.apply_rotary_pos_emb
    layer = modeling.LlamaDecoderLayer(_config("llama"), 0).eval()
    kpatch.patch(layer)
    assert modeling.apply_rotary_pos_emb is not original
    ref = weakref.ref(layer)
    del layer
    gc.collect()
    assert ref() is None
    assert modeling.apply_rotary_pos_emb is original


def test_unpatch_keeps_a_wrapper_added_after_patch():
    """A forward wrapped after patch() (as offload and cache hooks do) keeps running after
    unpatch(), which warns and leaves kfuse's forward under it, instead of dropping the wrapper."""
    model = _model("llama")
    ids = _ids()
    ref = _logits(model, ids)
    kpatch.patch(model)
    mlp = model.model.layers[0].mlp
    inner = mlp.forward
    calls = []

    def hooked(*args, **kwargs):
        calls.append(1)
        return inner(*args, **kwargs)

    mlp.forward = hooked
    with pytest.warns(UserWarning, match="wrapped after patch"):
        kpatch.unpatch(model)
    got = _logits(model, ids)
    assert calls == [1]
    torch.testing.assert_close(got, ref)
    del mlp.forward
