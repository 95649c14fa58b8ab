"""kfuse.layers - kfuse ops as layers in the HuggingFace `kernels` convention.

A kernels layer is a stateless nn.Module class whose forward replaces the forward of the module it
is mapped to; it reads that module's own attributes (self.weight, self.variance_epsilon, ...), has
no constructor and no members besides forward, can_torch_compile and has_backward.

    from kernels import Mode, kernelize, use_kernel_mapping
    import kfuse.layers
    with use_kernel_mapping(kfuse.layers.kernel_mapping()):
        kernelize(model, mode=Mode.INFERENCE, device="cpu")     # or "cuda"

Layer names (the names transformers / kernels use with use_kernel_forward_from_hub):
  RMSNorm         RMSNorm (weight, variance_epsilon)                    -> kfuse rms_norm "llama", or
                  "none" where the module's own forward rounds the f32 product once (GPT-OSS,
                  DeepSeek-V4, OLMo hybrids, Nemotron-H), "gemma" where it is a (1 + w) form
                  (found by running that forward once per class on a probe,
                  kfuse.patch.rms_norm_form; a forward of none of these forms runs as it is)
  GemmaRMSNorm    (1 + weight) RMSNorm (weight, eps)                    -> kfuse rms_norm "gemma"
  RMSNormZeroCentered  the same (transformers' name for Qwen3.5's)
  RMSNormGated    RMSNorm (weight, variance_epsilon, activation) of x, times act(gate) (Qwen3.5,
                  Qwen3-Next, OLMo hybrid linear-attention outputs): Llama-form rounding with
                  activation "silu" -> kfuse rms_norm "llama", then glu(gate, that, "silu") (two
                  kernels); any other form (sigmoid gates, the weight product in f32: Kimi-Linear,
                  Bailing hybrid) runs the module's own forward
  rotary_pos_emb  apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1) -> kfuse rope "half"
                  (tables as wide as the head, or GPT-OSS's half as wide; half-width
                  tables from any other model raise: their pairing is not known)
  SiluAndMul      x [..., 2d] -> silu(x[..., :d]) * x[..., d:]          -> kfuse glu_packed
  GeluTanhAndMul  same with gelu tanh
  SiLU            silu(x)                                               -> kfuse silu
KfuseRepository is the repository object such a mapping holds: load() returns the class from this
module, so no kernel repository on disk or on the Hub is involved.
The kfuse ops have no backward: where autograd records (grad mode on and an input or weight that
requires grad, e.g. a kernelized model called without torch.no_grad()), each layer computes
HF's PyTorch code instead, so gradients are right and nothing raises. The layers compute HF's code
as well for inputs the ops do not cover: activations of a dtype other than f32 / f16 / bf16 (a model
in float64), in RMSNorm a weight of another dtype than x (HF rounds the normalized x to x's
dtype and multiplies in the promoted dtype), and in rotary_pos_emb q and k of two dtypes or cos / sin of another dtype than q
(HF's q * cos promotes the result, or the op takes no such table), but for f32 tables with 16-bit q
where the replaced function casts its f32 result back to q's dtype (OLMo's: what the op computes). GemmaRMSNorm hands a weight of a
third dtype (bf16 with f32 activations, as under autocast) to the op as f32: HF computes
1 + weight.float() anyway.
"""

import types
from typing import Optional

import torch
from torch import nn

import torch.nn.functional as F

from . import ops
from .patch import (KFUSE_DTYPES, gated_norm_fits, gemma_weight, grad_needed, hf_rope_fits, norm_eps,
                    once_per_class, rms_norm_form, rms_normalized)


def _rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _hf_rope(q, k, cos, sin, unsqueeze_dim):
    """HF's apply_rotary_pos_emb."""
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    return q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin


class RMSNorm(nn.Module):
    can_torch_compile = True
    has_backward = False

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        w, x = self.weight, hidden_states
        # the layer called on its own computes its documented (Llama) form; a module it was
        # mapped onto, the form its own forward has (GPT-OSS, OLMo 2, ... round the f32 product
        # once: "none"; a (1 + w) form: "gemma"; another form: that forward runs as it is)
        form = "llama" if isinstance(self, RMSNorm) else rms_norm_form(type(self))
        fits = not grad_needed(x, w) and x.dtype in KFUSE_DTYPES
        if form == "llama":
            # a weight of another dtype (an f32 weight with 16-bit activations): HF rounds the
            # normalized x to x's dtype, then multiplies in the promoted dtype, which the op's
            # llama mode does not; the original code runs there, as in kfuse.patch
            if fits and w.dtype == x.dtype:
                return ops.rms_norm(x, w, eps=self.variance_epsilon, mode="llama")
            if isinstance(self, RMSNorm):
                return w * rms_normalized(x, self.variance_epsilon).to(x.dtype)
        elif form and fits:
            # one rounding of the f32 product, with any weight dtype
            return ops.rms_norm(x, gemma_weight(w, x.dtype), eps=norm_eps(self), mode=form)
        return type(self).forward(self, x)


@once_per_class
def _gated_rounding(norm_class):
    """"llama" where norm_class's forward(x, gate) with activation "silu" is Qwen3-Next's gated
    norm: (weight * normalized rounded to x's dtype) rounded, times silu(gate) in f32, rounded
    once; else "" (the layer runs that forward itself). Found once per class on a bf16 probe,
    as rms_norm_form; a constant to torch.compile."""
    if issubclass(norm_class, RMSNormGated):
        return "llama"
    g = torch.Generator().manual_seed(0)
    x, gate = torch.randn(2, 4, 64, generator=g).bfloat16()
    w = (1 + 0.3 * torch.randn(64, generator=g)).bfloat16()
    eps = 0.25
    probe = types.SimpleNamespace(weight=w, variance_epsilon=eps, activation="silu")
    want = ((w * rms_normalized(x, eps).to(x.dtype)).float() * F.silu(gate.float())).to(x.dtype)
    try:
        with torch.no_grad():
            got = norm_class.forward(probe, x, gate)
    except Exception:
        return ""
    same = isinstance(got, torch.Tensor) and got.dtype == want.dtype and torch.equal(got, want)
    return "llama" if same else ""


class RMSNormGated(nn.Module):
    can_torch_compile = True
    has_backward = False

    def forward(self, hidden_states: torch.Tensor, gate: Optional[torch.Tensor] = None) -> torch.Tensor:
        x, w = hidden_states, self.weight
        if (_gated_rounding(type(self)) == "llama"
                and gated_norm_fits(x, w, gate, getattr(self, "activation", "silu"))):
            return ops.glu(gate, ops.rms_norm(x, w, eps=self.variance_epsilon, mode="llama"), act="silu")
        if isinstance(self, RMSNormGated):      # the layer called on its own: Qwen3-Next's code
            h = w * rms_normalized(x, self.variance_epsilon).to(x.dtype)
            return (h * F.silu(gate.float())).to(x.dtype)
        return type(self).forward(self, x, gate)


class GemmaRMSNorm(nn.Module):
    can_torch_compile = True
    has_backward = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.weight
        if grad_needed(x, w) or x.dtype not in KFUSE_DTYPES:
            return (rms_normalized(x, self.eps) * (1.0 + w.float())).type_as(x)
        return ops.rms_norm(x, gemma_weight(w, x.dtype), eps=self.eps, mode="gemma", offset=1.0)


def _wrapped_function(layer_class):
    """The function a kernels function wrapper class was made from, or None where layer_class
    is no such wrapper. kernels turns a function marked with use_kernel_forward_from_hub (HF's
    apply_rotary_pos_emb) into an nn.Module class whose forward calls the function from its
    closure, and kernelize binds this file's forward to an instance of that class."""
    for cell in getattr(layer_class.forward, "__closure__", None) or ():
        fn = cell.cell_contents
        if isinstance(fn, types.FunctionType) and fn.__module__.startswith("transformers.models."):
            return fn
    return None


@torch.compiler.assume_constant_result
def _wrapped_function_module(layer_class):
    """The module of _wrapped_function(layer_class), or "". A constant to torch.compile: a
    class's forward and closure do not change (and dynamo cannot read a closure cell)."""
    fn = _wrapped_function(layer_class)
    return fn.__module__ if fn is not None else ""


@once_per_class
def _rope_casts_back(layer_class):
    """Whether the wrapped rope function returns q's dtype for tables of a wider dtype (OLMo's,
    ModernBERT's, HunYuan-VL's cast back; Llama's returns the promoted dtype). Found by calling
    it on bf16 q / k with f32 tables (as wide as the head, else half as wide); False where it
    is not known."""
    fn = _wrapped_function(layer_class)
    g = torch.Generator().manual_seed(0)
    q = torch.randn(1, 2, 3, 8, generator=g).bfloat16()
    for width in ((8, 4) if fn is not None else ()):
        ang = torch.randn(1, 3, width, generator=g)
        try:
            with torch.no_grad():
                out = fn(q, q, ang.cos(), ang.sin())
        except Exception:
            continue
        return out[0].dtype == q.dtype
    return False


class RotaryPosEmb(nn.Module):
    can_torch_compile = True
    has_backward = False

    def forward(self, q, k, cos, sin, unsqueeze_dim=1):
        if cos.shape[-1] * 2 == q.shape[-1] and sin.shape == cos.shape:
            # Tables half the head wide. GPT-OSS pairs channel i with i + Dh/2 (Llama's rotation
            # with each table repeated); other models naming their function "rotary_pos_emb"
            # with such tables pair (2i, 2i + 1) (transformers' openai_privacy_filter). The
            # arguments cannot tell them apart: the model module of the function this forward
            # replaces does (read from the wrapper, not from the call stack: no graph break)
            model = _wrapped_function_module(type(self))
            if not model.endswith(".modeling_gpt_oss"):
                raise NotImplementedError(
                    "kfuse.layers.RotaryPosEmb: half-width cos / sin tables from %s: which channels "
                    "pair is known for GPT-OSS's apply_rotary_pos_emb only; leave rotary_pos_emb "
                    "out of the kernel mapping for this model" % (model or "a function not "
                                                                   "wrapped by kernels"))
            cos, sin = torch.cat((cos, cos), dim=-1), torch.cat((sin, sin), dim=-1)
        # a function that rounds its f32 result back to q's dtype (OLMo's, ModernBERT's) is what
        # the op computes with f32 tables and 16-bit q / k
        casts_back = _rope_casts_back(type(self))
        if grad_needed(q, k, cos, sin) or not hf_rope_fits(q, k, cos, sin, unsqueeze_dim, f32_tables=casts_back):
            qo, ko = _hf_rope(q, k, cos, sin, unsqueeze_dim)
            if qo.dtype != q.dtype and casts_back:
                qo, ko = qo.to(q.dtype), ko.to(k.dtype)
            return qo, ko
        layout = "bhsd" if unsqueeze_dim == 1 else "bshd"
        if cos.dim() == 3 and cos.shape[0] == 1 and q.shape[0] != 1:
            cos, sin = cos[0], sin[0]
        return ops.rope(q, k, cos=cos, sin=sin, convention="half", layout=layout)


class SiluAndMul(nn.Module):
    can_torch_compile = True
    has_backward = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if grad_needed(x) or x.dtype not in KFUSE_DTYPES:
            d = x.shape[-1] // 2
            return F.silu(x[..., :d]) * x[..., d:]
        return ops.glu_packed(x, act="silu", gate_first=True)


class GeluTanhAndMul(nn.Module):
    can_torch_compile = True
    has_backward = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if grad_needed(x) or x.dtype not in KFUSE_DTYPES:
            d = x.shape[-1] // 2
            return F.gelu(x[..., :d], approximate="tanh") * x[..., d:]
        return ops.glu_packed(x, act="gelu_tanh", gate_first=True)


class SiLU(nn.Module):
    can_torch_compile = True
    has_backward = False

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if grad_needed(input) or input.dtype not in KFUSE_DTYPES or not input.dim():
            return F.silu(input)
        return ops.silu(input)


LAYERS = {
    "RMSNorm": RMSNorm,
    "GemmaRMSNorm": GemmaRMSNorm,
    "RMSNormZeroCentered": GemmaRMSNorm,
    "RMSNormGated": RMSNormGated,
    "rotary_pos_emb": RotaryPosEmb,
    "SiluAndMul": SiluAndMul,
    "GeluTanhAndMul": GeluTanhAndMul,
    "SiLU": SiLU,
}


class KfuseRepository:
    """A kernels repository (anything with load() -> layer class) serving the layers of this module."""

    def __init__(self, layer_name):
        if layer_name not in LAYERS:
            raise ValueError(f"kfuse has no layer {layer_name!r} (has: {', '.join(LAYERS)})")
        self.layer_name = layer_name

    def load(self):
        return LAYERS[self.layer_name]

    def __eq__(self, other):
        return isinstance(other, KfuseRepository) and other.layer_name == self.layer_name

    def __hash__(self):
        return hash(("kfuse", self.layer_name))

    def __str__(self):
        return f"kfuse.layers (layer `{self.layer_name}`)"


def kernel_mapping(devices=("cuda", "cpu"), layers=None):
    """{layer name: {device: KfuseRepository}} for kernels.use_kernel_mapping / register_kernel_mapping.
    No "rocm" by default: no build of libkfuse runs on AMD GPUs yet (the HIP sources are
    compile-checked only); pass it in `devices` for a library built for HIP by hand."""
    names = layers if layers is not None else list(LAYERS)
    return {name: {dev: KfuseRepository(name) for dev in devices} for name in names}
