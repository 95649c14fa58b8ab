"""kfuse.layers with the HuggingFace `kernels` package: kernelize a tiny Llama on the CPU with the
kfuse mapping, compare with the original, and check the layer classes pass kernels' validation."""

import os
import sys
import types

import pytest
import torch

kernels = pytest.importorskip("kernels")
transformers = pytest.importorskip("transformers")
sys.path.insert(0, os.path.dirname(__file__))
from _ops_standin import ops as _ops  # noqa: E402

_ops()
import kfuse.layers as klayers  # noqa: E402
from kfuse.engaged import verify_engaged  # noqa: E402


def _llama():
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, head_dim=16)
    cfg._attn_implementation = "eager"
    model = transformers.LlamaForCausalLM(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1 + 0.3 * torch.randn_like(p))
    return model


def test_mapping_shape():
    mapping = klayers.kernel_mapping(devices=("cpu",))
    assert set(mapping) == set(klayers.LAYERS)
    assert mapping["RMSNorm"]["cpu"].load() is klayers.RMSNorm
    assert klayers.KfuseRepository("RMSNorm") == klayers.KfuseRepository("RMSNorm")
    with pytest.raises(ValueError):
        klayers.KfuseRepository("NoSuchLayer")


def test_kernelize_llama_cpu():
    model = _llama()
    ids = torch.randint(0, 128, (2, 10), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = model(input_ids=ids, use_cache=False).logits
    norm_cls = type(model.model.norm)
    marked_here = not hasattr(norm_cls, "kernel_layer_name")
    if marked_here:
        # transformers marks its RMSNorm only with a kernels version it accepts: mark it here
        kernels.replace_kernel_forward_from_hub(norm_cls, "RMSNorm")
    try:
        with kernels.use_kernel_mapping(klayers.kernel_mapping(devices=("cpu",))):
            kernels.kernelize(model, mode=kernels.Mode.INFERENCE, device="cpu")
    finally:
        if marked_here:
            del norm_cls.kernel_layer_name
            del norm_cls.kernel_condition
    assert model.model.norm.forward.__func__ is klayers.RMSNorm.forward
    with torch.no_grad():
        out = model(input_ids=ids, use_cache=False).logits
    torch.testing.assert_close(out, ref, atol=2e-4, rtol=2e-4)
    rep = verify_engaged(model, input_ids=ids, use_cache=False)
    assert rep.kfuse_ops.get("kfuse::rms_norm", 0) >= 5, str(rep)


def _kernelize_against_original(model):
    """Kernelize model with kfuse's CPU mapping: (ids, the original's logits on them, the
    engaged report of a kernelized run)."""
    ids = torch.randint(0, 128, (2, 9), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = model(input_ids=ids, use_cache=False).logits
    with kernels.use_kernel_mapping(klayers.kernel_mapping(devices=("cpu",))):
        kernels.kernelize(model, mode=kernels.Mode.INFERENCE, device="cpu")
    return ids, ref, verify_engaged(model, input_ids=ids, use_cache=False)


def test_kernelize_gpt_oss_cpu():
    """A tiny GPT-OSS kernelized: its rotary_pos_emb (half-width tables) runs kfuse's rope,
    matches the original, and the model compiles without a graph break."""
    gpt_oss = pytest.importorskip("transformers.models.gpt_oss.modeling_gpt_oss")
    if not isinstance(gpt_oss.apply_rotary_pos_emb, torch.nn.Module):
        pytest.skip("transformers marks apply_rotary_pos_emb only with a kernels version it accepts")
    torch.manual_seed(0)
    cfg = transformers.GptOssConfig(vocab_size=128, hidden_size=64, intermediate_size=64, num_hidden_layers=2,
                                    num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                    num_local_experts=4, num_experts_per_tok=2,
                                    layer_types=["full_attention"] * 2)
    cfg._attn_implementation = "eager"
    model = transformers.GptOssForCausalLM(cfg).eval()
    ids, ref, rep = _kernelize_against_original(model)
    assert rep.kfuse_ops.get("kfuse::rope", 0) >= 2, str(rep)
    with torch.no_grad():
        out = model(input_ids=ids, use_cache=False).logits
        torch.testing.assert_close(out, ref, atol=2e-4, rtol=2e-4)
        torch._dynamo.reset()
        compiled = torch.compile(model, fullgraph=True, backend="eager")
        torch.testing.assert_close(compiled(input_ids=ids, use_cache=False).logits, out, atol=0, rtol=0)


class _F32ProductNorm(torch.nn.Module):
    """GPT-OSS's RMSNorm form: the weight product in f32, rounded once."""

    def __init__(self, d):
        super().__init__()
        self.weight = torch.nn.Parameter(1 + 0.3 * torch.randn(d))
        self.variance_epsilon = 1e-6

    def forward(self, hidden_states):
        dtype = hidden_states.dtype
        h = hidden_states.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
        return (self.weight * h).to(dtype)


class _EpsOutsideNorm(_F32ProductNorm):
    """Neither form: eps added outside the root."""

    def forward(self, hidden_states):
        h = hidden_states.float()
        return (self.weight * h / (h.pow(2).mean(-1, keepdim=True).sqrt() + self.variance_epsilon)).to(hidden_states.dtype)


def _transformers_classes(wanted):
    """[(class, what)] for each (model module, class name, what) of wanted that this
    transformers has."""
    out = []
    for mod, cls, what in wanted:
        try:
            m = __import__("transformers.models.%s.modeling_%s" % (mod, mod), fromlist=[cls])
            out.append((getattr(m, cls), what))
        except (ImportError, AttributeError):
            pass
    return out


def _norm_classes():
    """(class, the rms_norm mode the layer should call or None) for the forms above and the
    transformers classes at hand marked "RMSNorm"."""
    return [(_F32ProductNorm, "none"), (_EpsOutsideNorm, None)] + _transformers_classes(
        (("llama", "LlamaRMSNorm", "llama"), ("gpt_oss", "GptOssRMSNorm", "none"),
         ("nemotron_h", "NemotronHRMSNorm", "none")))


@pytest.mark.parametrize("cls,mode", _norm_classes(), ids=lambda v: getattr(v, "__name__", str(v)))
@pytest.mark.parametrize("dtype,wdtype", [(torch.bfloat16, torch.bfloat16), (torch.float16, torch.float16),
                                          (torch.bfloat16, torch.float32), (torch.float32, torch.float32)],
                         ids=str)
def test_rmsnorm_layer_rounds_as_the_module_does(cls, mode, dtype, wdtype, monkeypatch):
    """The RMSNorm layer on a module of each rounding form gives that module's own output bit
    for bit (Llama's rounds the normalized x, then the product; GPT-OSS's rounds the f32 product
    once: the llama mode differed in ~27 % of bf16 elements there), through the op where the
    form is known; in f32 the two forms agree and the sums' order differs."""
    torch.manual_seed(1)
    try:
        module = cls(96)
    except TypeError:
        module = cls(96, eps=1e-6)
    with torch.no_grad():
        module.weight.copy_(1 + 0.3 * torch.randn(96))
    module = module.to(wdtype)
    x = torch.randn(5, 96).to(dtype)
    modes = []
    real = klayers.ops.rms_norm
    monkeypatch.setattr(klayers.ops, "rms_norm", lambda *a, **k: modes.append(k["mode"]) or real(*a, **k))
    with torch.no_grad():
        want = module(x)
        got = types.MethodType(klayers.RMSNorm.forward, module)(x)
    assert got.dtype == want.dtype
    exact = 0 if dtype != torch.float32 else 1e-6       # f32: the sums' order differs
    torch.testing.assert_close(got, want, atol=exact, rtol=exact)
    expect_op = mode is not None and not (mode == "llama" and wdtype != dtype)
    assert modes == ([mode] if expect_op else []), modes


def test_zero_centered_norm_maps_to_gemma_form():
    """transformers marks Qwen3.5's (1 + weight) RMSNorm "RMSNormZeroCentered": the Gemma layer."""
    assert klayers.LAYERS["RMSNormZeroCentered"] is klayers.GemmaRMSNorm
    qwen = pytest.importorskip("transformers.models.qwen3_5.modeling_qwen3_5")
    torch.manual_seed(2)
    module = qwen.Qwen3_5RMSNorm(96, eps=1e-6)
    with torch.no_grad():
        module.weight.copy_(0.3 * torch.randn(96))
    x = torch.randn(5, 96).bfloat16()
    with torch.no_grad():
        want = module(x)
        got = types.MethodType(klayers.GemmaRMSNorm.forward, module)(x)
    assert torch.equal(got, want)


def _tiny_qwen3_5(layer_types, **config):
    """A tiny bf16 Qwen3.5 of the given layer types, its norm weights random (the (1 + w) norms
    around 1, the gated norms' plain weights too)."""
    qwen = pytest.importorskip("transformers.models.qwen3_5.modeling_qwen3_5")
    if not hasattr(qwen.Qwen3_5RMSNorm, "kernel_layer_name"):
        pytest.skip("transformers marks its layers only with a kernels version it accepts")
    torch.manual_seed(0)
    cfg = transformers.Qwen3_5TextConfig(vocab_size=128, hidden_size=64, intermediate_size=96,
                                         num_hidden_layers=len(layer_types), num_attention_heads=4,
                                         num_key_value_heads=2, head_dim=16, layer_types=layer_types, **config)
    cfg._attn_implementation = "eager"
    model = qwen.Qwen3_5ForCausalLM(cfg).eval().to(torch.bfloat16)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(0.3 * torch.randn_like(p) + (1 if "linear_attn.norm" in name else 0))
    return model


def test_kernelize_qwen3_5_cpu():
    """A tiny Qwen3.5 (its (1 + w) norms marked "RMSNormZeroCentered") kernelized in bf16: its
    norms run kfuse's rms_norm and the logits are the original's, bit for bit."""
    model = _tiny_qwen3_5(["full_attention"] * 2)
    ids, ref, rep = _kernelize_against_original(model)
    assert rep.kfuse_ops.get("kfuse::rms_norm", 0) >= 5, str(rep)
    with torch.no_grad():
        assert torch.equal(model(input_ids=ids, use_cache=False).logits, ref)


class _SigmoidGatedNorm(torch.nn.Module):
    """Kimi-Linear's gated norm form: the weight product in f32, a sigmoid gate, one rounding."""

    def __init__(self, d):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(d))
        self.variance_epsilon = 1e-6
        self.activation = "sigmoid"

    def forward(self, hidden_states, gate=None):
        h = klayers.rms_normalized(hidden_states, self.variance_epsilon)
        act = torch.sigmoid if self.activation == "sigmoid" else torch.nn.functional.silu
        return (self.weight.float() * h * act(gate.float())).to(hidden_states.dtype)


def _gated_classes():
    """(class, whether the RMSNormGated layer should run kfuse's ops on it) for kfuse's own layer,
    the sigmoid form above and the transformers classes at hand marked "RMSNormGated"."""
    return [(klayers.RMSNormGated, True), (_SigmoidGatedNorm, False)] + _transformers_classes(
        (("qwen3_5", "Qwen3_5RMSNormGated", True), ("qwen3_next", "Qwen3NextRMSNormGated", True),
         ("olmo_hybrid", "OlmoHybridRMSNormGated", True), ("kimi_linear", "KimiLinearRMSNormGated", False)))


def _gated_module(cls, d, wdtype):
    if cls is klayers.RMSNormGated:
        module = klayers.RMSNormGated()
        module.weight, module.variance_epsilon = torch.nn.Parameter(torch.ones(d)), 1e-6
    else:
        module = cls(d)
    with torch.no_grad():
        module.weight.copy_(1 + 0.3 * torch.randn(d))
    return module.to(wdtype)


def _reference_gated(module, x, gate):
    """Qwen3-Next's gated norm in float64 with its two roundings of the weight product."""
    n = klayers.rms_normalized(x.double(), module.variance_epsilon).to(x.dtype)
    h = (module.weight.double() * n.double()).to(torch.promote_types(x.dtype, module.weight.dtype))
    return h.double() * torch.nn.functional.silu(gate.double())


@pytest.mark.parametrize("cls,fused", _gated_classes(), ids=lambda v: getattr(v, "__name__", str(v)))
@pytest.mark.parametrize("dtype,wdtype", [(torch.bfloat16, torch.bfloat16), (torch.float16, torch.float16),
                                          (torch.float32, torch.float32), (torch.bfloat16, torch.float32)],
                         ids=str)
def test_gated_norm_layer_matches_the_module(cls, fused, dtype, wdtype, monkeypatch):
    """The RMSNormGated layer: Qwen3-Next's form (silu gate, the weight product rounded to x's
    dtype) runs rms_norm "llama" then glu "silu" and stays within the dtype's rounding of a
    float64 reference of that form (the module's own output: one ulp where the two silus round
    apart); a weight of another dtype (HF promotes) and other forms (Kimi-Linear's sigmoid
    gate, f32 weight product) run the module's own forward, bit for bit. 16-bit outputs of the
    op agree with the module's in all but a rare element."""
    torch.manual_seed(3)
    module = _gated_module(cls, 96, wdtype)
    x = (torch.randn(4, 5, 96) * 2).to(dtype)
    gate = (torch.randn(4, 5, 96) * 3).to(dtype)
    calls = []
    for name in ("rms_norm", "glu"):
        real = getattr(klayers.ops, name)
        monkeypatch.setattr(klayers.ops, name, lambda *a, _r=real, _n=name, **k: calls.append(_n) or _r(*a, **k))
    with torch.no_grad():
        got = types.MethodType(klayers.RMSNormGated.forward, module)(x, gate)
    expect_op = fused and wdtype == dtype
    assert calls == (["rms_norm", "glu"] if expect_op else []), calls
    if cls is klayers.RMSNormGated or fused:
        ref = _reference_gated(module, x, gate)
        assert got.dtype == dtype                   # HF returns x's dtype whatever the weight's
        # the final rounding (half an ulp, relative: 2^-8 bf16, 2^-11 f16) and silu's f32 error;
        # f32: the sums' order as well
        bound = {torch.bfloat16: 1.01 * 2.0 ** -8, torch.float16: 1.01 * 2.0 ** -11, torch.float32: 2.0 ** -20}[dtype]
        err = (got.double() - ref).abs() / ref.abs().clamp_min(2.0 ** -14)
        assert err.max().item() <= bound, err.max().item()
    if cls is not klayers.RMSNormGated:
        with torch.no_grad():
            want = module(x, gate)
        if not expect_op:
            assert torch.equal(got, want)
        elif dtype == torch.float32:
            torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-6)     # the sums' order differs
        else:
            # the two silus (the op's, PyTorch's) may round a rare element apart by one ulp; a
            # wrong rounding form (the weight product kept in f32) differs in ~1 / 4 of them
            apart = (got != want).float().mean().item()
            assert apart < 0.01, apart


def test_kernelize_qwen3_5_linear_attention_cpu():
    """A tiny Qwen3.5 with a linear-attention layer, kernelized in bf16: its gated output norm
    (marked "RMSNormGated") runs rms_norm and glu, and the logits match the original's."""
    model = _tiny_qwen3_5(["linear_attention", "full_attention"], linear_num_value_heads=4,
                          linear_num_key_heads=2, linear_key_head_dim=16, linear_value_head_dim=16)
    ids, ref, rep = _kernelize_against_original(model)
    gated = model.model.layers[0].linear_attn.norm
    assert gated.forward.__func__ is klayers.RMSNormGated.forward
    assert rep.kfuse_ops.get("kfuse::glu", 0) >= 1 and rep.kfuse_ops.get("kfuse::rms_norm", 0) >= 6, str(rep)
    with torch.no_grad():
        out = model(input_ids=ids, use_cache=False).logits
    torch.testing.assert_close(out.float(), ref.float(), atol=2e-2, rtol=2e-2)


def test_gated_norm_layer_compiles_whole():
    """The gated norm's per-class probe is a constant to dynamo: no graph break."""
    qwen = pytest.importorskip("transformers.models.qwen3_5.modeling_qwen3_5")
    module = qwen.Qwen3_5RMSNormGated(64).bfloat16()
    module.forward = types.MethodType(klayers.RMSNormGated.forward, module)
    g = torch.Generator().manual_seed(4)
    x, gate = torch.randn(2, 5, 64, generator=g).bfloat16()
    with torch.no_grad():
        eager = module(x, gate)
        torch._dynamo.reset()
        compiled = torch.compile(module, fullgraph=True, backend="eager")
        assert torch.equal(compiled(x, gate), eager)


def test_layer_classes_are_stateless():
    torch_members = {n for n in dir(torch.nn.Module)}
    for name, cls in klayers.LAYERS.items():
        assert cls.__init__ is torch.nn.Module.__init__, name
        extra = {n for n in dir(cls)} - torch_members
        assert extra <= {"can_torch_compile", "has_backward"}, (name, extra)


def test_rmsnorm_layer_keeps_the_wider_dtype():
    """HF's LlamaRMSNorm returns the wider of the input's and the weight's dtypes: an f32 input
    with a bf16 weight stays f32 (it was cast down to bf16)."""
    layer = klayers.RMSNorm()
    layer.weight = torch.nn.Parameter(torch.randn(64).bfloat16(), requires_grad=False)
    layer.variance_epsilon = 1e-6
    x = torch.randn(3, 64)
    with torch.no_grad():
        out = layer(x)
    xf = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
    ref = layer.weight * xf
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("xdtype", [torch.bfloat16, torch.float16], ids=str)
def test_rmsnorm_layer_rounds_like_hf_with_a_wider_weight(xdtype):
    """16-bit x with an f32 weight: HF rounds the normalized x to x's dtype, then multiplies by
    the f32 weight (an f32 result). The layer gives exactly that (it computed in f32 without
    the rounding before)."""
    torch.manual_seed(1)
    layer = klayers.RMSNorm()
    layer.weight = torch.nn.Parameter(torch.randn(64) * 3, requires_grad=False)
    layer.variance_epsilon = 1e-6
    x = (torch.randn(5, 64) * 2).to(xdtype)
    with torch.no_grad():
        out = layer(x)
    xf = x.float()
    ref = layer.weight * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(xdtype)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, ref, atol=0, rtol=0)


def test_layers_fall_back_where_autograd_records():
    """With grad mode on and inputs / weights that require grad, every layer computes HF's
    PyTorch code (gradients flow, nothing raises) and agrees with its kfuse op under no_grad."""
    torch.manual_seed(0)
    x = torch.randn(3, 5, 64, requires_grad=True)
    norm, gemma = klayers.RMSNorm(), klayers.GemmaRMSNorm()
    norm.weight = torch.nn.Parameter(1 + 0.3 * torch.randn(64))
    norm.variance_epsilon = 1e-6
    gemma.weight = torch.nn.Parameter(0.3 * torch.randn(64))
    gemma.eps = 1e-6
    q, k = torch.randn(2, 4, 5, 16, requires_grad=True), torch.randn(2, 2, 5, 16, requires_grad=True)
    ang = torch.randn(2, 5, 8)
    cos, sin = torch.cat([ang.cos()] * 2, -1), torch.cat([ang.sin()] * 2, -1)
    gated = klayers.RMSNormGated()
    gated.weight, gated.variance_epsilon = norm.weight, 1e-6
    gate = torch.randn(3, 5, 64, requires_grad=True)
    calls = [(norm, (x,)), (gemma, (x,)), (gated, (x, gate)), (klayers.SiluAndMul(), (x,)),
             (klayers.GeluTanhAndMul(), (x,)), (klayers.SiLU(), (x,)), (klayers.RotaryPosEmb(), (q, k, cos, sin))]
    for layer, args in calls:
        out = layer(*args)
        outs = out if isinstance(out, tuple) else (out,)
        sum(o.sum() for o in outs).backward()
        assert all(a.grad is not None for a in args if a.requires_grad), type(layer).__name__
        with torch.no_grad():
            fused = layer(*args)
        for o, f in zip(outs, fused if isinstance(fused, tuple) else (fused,)):
            torch.testing.assert_close(o.detach(), f, atol=1e-5, rtol=1e-5, msg=type(layer).__name__)
        for a in args:
            a.grad = None


def _layer_calls(dtype, wdtype=None, tdtype=None):
    """(layer, args) of every kfuse layer, activations of `dtype`, norm weights of wdtype (default
    dtype), rotary tables of tdtype (default dtype)."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 5, 64, generator=g).to(dtype)
    norm, gemma = klayers.RMSNorm(), klayers.GemmaRMSNorm()
    norm.weight = torch.nn.Parameter((1 + 0.3 * torch.randn(64, generator=g)).to(wdtype or dtype))
    norm.variance_epsilon = 1e-6
    gemma.weight = torch.nn.Parameter((0.3 * torch.randn(64, generator=g)).to(wdtype or dtype))
    gemma.eps = 1e-6
    q = torch.randn(2, 4, 5, 16, generator=g).to(dtype)
    k = torch.randn(2, 2, 5, 16, generator=g).to(dtype)
    ang = torch.randn(2, 5, 8, generator=g)
    cos = torch.cat([ang.cos()] * 2, -1).to(tdtype or dtype)
    sin = torch.cat([ang.sin()] * 2, -1).to(tdtype or dtype)
    gated = klayers.RMSNormGated()
    gated.weight, gated.variance_epsilon = norm.weight, 1e-6
    gate = torch.randn(3, 5, 64, generator=g).to(dtype)
    return [(norm, (x,)), (gemma, (x,)), (gated, (x, gate)), (klayers.SiluAndMul(), (x,)),
            (klayers.GeluTanhAndMul(), (x,)), (klayers.SiLU(), (x,)), (klayers.RotaryPosEmb(), (q, k, cos, sin))]


def _hf_reference(layer, args):
    """What the layer computes where autograd records (its inputs require grad): HF's code."""
    with torch.enable_grad():
        out = layer(*(a.detach().requires_grad_(True) for a in args))
    return tuple(o.detach() for o in (out if isinstance(out, tuple) else (out,)))


def test_layers_compute_hf_code_in_float64():
    """kfuse ops take f32 / f16 / bf16: in float64 every layer computes HF's code."""
    for layer, args in _layer_calls(torch.float64):
        with torch.no_grad():
            out = layer(*args)
        for o, r in zip(out if isinstance(out, tuple) else (out,), _hf_reference(layer, args)):
            assert o.dtype == torch.float64, type(layer).__name__
            torch.testing.assert_close(o, r, msg=type(layer).__name__)


def test_gemma_layer_with_a_bf16_weight_and_f32_input():
    """HF's GemmaRMSNorm computes (1 + weight.float()): a bf16 weight with an f32 input works."""
    layer, args = _layer_calls(torch.float32, wdtype=torch.bfloat16)[1]
    with torch.no_grad():
        out = layer(*args)
    (ref,) = _hf_reference(layer, args)
    assert out.dtype == ref.dtype == torch.float32
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dtypes", [(torch.bfloat16, torch.float16), (torch.bfloat16, torch.float32),
                                    (torch.float32, torch.bfloat16)], ids=str)
def test_rotary_layer_returns_hf_dtypes(dtypes):
    """q / k and cos / sin of two dtypes: the result has HF's (promoted) dtype."""
    layer, args = _layer_calls(dtypes[0], tdtype=dtypes[1])[-1]
    with torch.no_grad():
        out = layer(*args)
    for o, r in zip(out, _hf_reference(layer, args)):
        assert o.dtype == r.dtype, (o.dtype, r.dtype)
        torch.testing.assert_close(o, r)


def _gpt_oss_rope(x, cos, sin, unsqueeze_dim):
    """GPT-OSS's rotation: tables half the head wide, channel i paired with i + Dh/2."""
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    first, second = torch.chunk(x, 2, dim=-1)
    return torch.cat((first * cos - second * sin, second * cos + first * sin), dim=-1)


_ORIGINAL_RAN = "    raise AssertionError('the original function ran')\n"


def _kernelized_rope(module_name, body=_ORIGINAL_RAN):
    """An apply_rotary_pos_emb of module module_name (its body: body) marked as HF's models
    mark theirs (kernels' use_kernel_forward_from_hub on a function makes it an nn.Module
    instance), kernelized with kfuse's mapping: what a model's attention calls then. Returns
    (the kernelized module, the original function)."""
    scope = {"__name__": module_name, "torch": torch,
             "rotate_half": lambda x: torch.cat((-x[..., x.shape[-1] // 2:], x[..., :x.shape[-1] // 2]), -1)}
    exec("def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):\n" + body, scope)
    holder = torch.nn.Module()
    holder.rope = kernels.use_kernel_forward_from_hub("rotary_pos_emb")(scope["apply_rotary_pos_emb"])
    with kernels.use_kernel_mapping(klayers.kernel_mapping(devices=("cpu",))):
        kernels.kernelize(holder, mode=kernels.Mode.INFERENCE, device="cpu")
    assert holder.rope.forward.__func__ is klayers.RotaryPosEmb.forward
    return holder.rope, scope["apply_rotary_pos_emb"]


_LLAMA_ROPE_BODY = ("    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)\n"
                    "    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin\n")
_OLMO_ROPE_BODY = ("    qt, kt = q.dtype, k.dtype\n"
                   "    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)\n"
                   "    return (q * cos + rotate_half(q) * sin).to(qt), (k * cos + rotate_half(k) * sin).to(kt)\n")


@pytest.mark.parametrize("form", ["llama", "olmo"])
def test_rotary_layer_with_wider_tables_keeps_the_functions_dtype(form, monkeypatch):
    """f32 cos / sin with bf16 q / k: Llama's function returns the promoted f32, which the op
    does not give (HF's code runs); OLMo's (ModernBERT's, HunYuan-VL's) computes in f32 and
    casts back to q's dtype, as the op does with f32 tables (the op runs). The layer returns
    what the function it replaces does."""
    rope, original = _kernelized_rope("transformers.models.%s.modeling_%s" % (form, form),
                                      _LLAMA_ROPE_BODY if form == "llama" else _OLMO_ROPE_BODY)
    calls = []
    real = klayers.ops.rope
    monkeypatch.setattr(klayers.ops, "rope", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    g = torch.Generator().manual_seed(6)
    q, k = torch.randn(1, 4, 6, 16, generator=g).bfloat16(), torch.randn(1, 2, 6, 16, generator=g).bfloat16()
    angle = torch.randn(1, 6, 8, generator=g).repeat(1, 1, 2)
    with torch.no_grad():
        got, want = rope(q, k, angle.cos(), angle.sin()), original(q, k, angle.cos(), angle.sin())
    assert len(calls) == (1 if form == "olmo" else 0)
    for o, r in zip(got, want):
        assert o.dtype == r.dtype, (o.dtype, r.dtype)
        torch.testing.assert_close(o, r, atol=0, rtol=2 ** -7)      # one rounding apart at most


_GPT_OSS = "transformers.models.gpt_oss.modeling_gpt_oss"


@pytest.mark.parametrize("unsqueeze_dim", [1, 2])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_rotary_layer_with_half_width_tables(dtype, unsqueeze_dim):
    """GPT-OSS's apply_rotary_pos_emb carries the rotary_pos_emb name with tables half the head
    wide: the layer rotates every channel (it rotated the first half only, by the wrong pairs)."""
    g = torch.Generator().manual_seed(3)
    heads_at = unsqueeze_dim
    shape_q = [2, 6, 16]
    shape_q.insert(heads_at, 4)
    shape_k = [2, 6, 16]
    shape_k.insert(heads_at, 2)
    q = torch.randn(shape_q, generator=g).to(dtype)
    k = torch.randn(shape_k, generator=g).to(dtype)
    angle = 3 * torch.randn(2, 6, 8, generator=g)
    cos, sin = angle.cos().to(dtype), angle.sin().to(dtype)
    with torch.no_grad():
        qo, ko = _kernelized_rope(_GPT_OSS)[0](q, k, cos, sin, unsqueeze_dim)
    for out, x in ((qo, q), (ko, k)):
        ref = _gpt_oss_rope(x.double(), cos.double(), sin.double(), unsqueeze_dim)
        tol = 1e-5 if dtype == torch.float32 else 2e-2
        torch.testing.assert_close(out.double(), ref, atol=tol, rtol=tol)


def test_rotary_layer_with_half_width_tables_compiles_whole():
    """GPT-OSS's rotation under torch.compile(fullgraph=True): no graph break (the layer found its
    model by walking the call stack, which dynamo cannot trace)."""
    rope = _kernelized_rope(_GPT_OSS)[0]
    g = torch.Generator().manual_seed(5)
    q, k = torch.randn(1, 4, 6, 16, generator=g), torch.randn(1, 2, 6, 16, generator=g)
    angle = torch.randn(1, 6, 8, generator=g)
    cos, sin = angle.cos(), angle.sin()
    compiled = torch.compile(lambda *a: rope(*a), fullgraph=True, backend="eager")
    with torch.no_grad():
        got, want = compiled(q, k, cos, sin), rope(q, k, cos, sin)
    for out, x, ref in zip(got, (q, k), want):
        torch.testing.assert_close(out, ref, atol=0, rtol=0)
        torch.testing.assert_close(out.double(), _gpt_oss_rope(x.double(), cos.double(), sin.double(), 1))


@pytest.mark.parametrize("module_name", ["transformers.models.openai_privacy_filter.modeling_openai_privacy_filter",
                                         "__main__", None])
def test_rotary_layer_refuses_half_width_tables_of_other_models(module_name):
    """Half-width tables from another model (openai_privacy_filter pairs (2i, 2i + 1) with them),
    or to the layer called on its own (None), raise rather than rotate GPT-OSS's pairs: the
    arguments cannot tell the two apart."""
    q, k = torch.randn(1, 2, 4, 16), torch.randn(1, 2, 4, 16)
    angle = torch.randn(1, 4, 8)
    rope = klayers.RotaryPosEmb() if module_name is None else _kernelized_rope(module_name)[0]
    with torch.no_grad(), pytest.raises(NotImplementedError, match="half-width"):
        rope(q, k, angle.cos(), angle.sin(), 1)


def test_rotary_layer_leaves_other_unsqueeze_dims_to_hf():
    """unsqueeze_dim -3 on 3-D tables means the heads dim as 1 does: HF's code runs (the layer
    treated every value but 1 as [B, S, H, Dh])."""
    g = torch.Generator().manual_seed(4)
    q = torch.randn(1, 4, 4, 16, generator=g)      # H == S: a wrong layout would not raise
    k = torch.randn(1, 4, 4, 16, generator=g)
    angle = torch.randn(1, 4, 16, generator=g)
    cos, sin = angle.cos(), angle.sin()
    layer = klayers.RotaryPosEmb()
    with torch.no_grad():
        out = layer(q, k, cos, sin, -3)
        ref = layer(q, k, cos, sin, 1)
    for o, r in zip(out, ref):
        torch.testing.assert_close(o, r)


def test_silu_layer_takes_a_scalar_as_nn_silu_does():
    with torch.no_grad():
        out = klayers.SiLU()(torch.tensor(1.5))
    assert out.shape == () and torch.equal(out, torch.nn.functional.silu(torch.tensor(1.5)))
