"""kfuse.patch_transformers - kfuse ops in HuggingFace transformers decoder models.

Families: Llama, Mistral, Qwen2, Qwen3 (incl. its per-head q_norm / k_norm), Gemma, Gemma2, Gemma3,
and the hybrid Qwen3.5, Qwen3.5-MoE and Qwen3-Next (linear-attention and attention layers);
the RMSNorms of any transformers model. Written against the module layouts of transformers 4.5x
and 5.x. What is replaced:

  norm      every *RMSNorm (by class name, any model) whose class forward is one of three forms,
            told by running it once per class on a probe (kfuse.patch.rms_norm_form) -> kfuse rms_norm
            Llama-style  `weight * normalize(x).to(dtype)`             -> mode "llama"
            f32 product  `(weight * normalize(x)).to(dtype)` (GPT-OSS, OLMo 2) -> mode "none"
            Gemma-style  `(normalize(x) * (1 + weight)).to(dtype)`     -> mode "gemma", offset 1.0
            eps is read from `variance_epsilon` or `eps` at call time; a norm of another form
            (or one whose forward reads more than its weight and eps) is reported as skipped.
  gated     the hybrids' gated output norm of the linear-attention layers (*RMSNormGated:
            `(weight * normalize(x).to(dtype)) * silu(gate.float())`, rounded) -> kfuse rms_norm
            "llama", then glu(gate, that, "silu")
  rope      the apply_rotary_pos_emb (q, k [B,H,S,Dh], cos/sin [B,S,Dh] from HF) of the module of
            any *Attention class, where a probe finds Llama's rotation or Cohere's interleaved
            one (rope_function_form) -> kfuse rope, convention "half" (Cohere's, GLM's:
            "interleaved"; GLM's tables rearranged to that layout first),
            layout "bhsd" (unsqueeze_dim=2 -> "bshd"); where
            the function rotates the first cos.shape[-1] channels only (partial rotary: Qwen3.5,
            Phi-3), so does the op with tables narrower than the head.
            It is a module-level function, so it is replaced for every model of the family in this
            process while at least one patched model exists (reference counted).
  glu       *MLP of any model whose class forward is `down(act(gate(x)) * up(x))` (told by a
            probe per class: mlp_is_glu) -> down(kfuse glu(gate(x), up(x), act)), act read from
            the module's act_fn (silu, gelu tanh forms, gelu erf).
  residual  the decoder layer seam `h = residual + attn; y = post_attention_layernorm(h)` (the
            families above, and any *DecoderLayer whose forward a probe finds of Llama's form:
            layer_is_prenorm) ->
            kfuse add_rms_norm (Gemma2/3: `residual + post_attention_layernorm(attn)` followed by
            pre_feedforward_layernorm; the hybrids: the token mixer is linear_attn or self_attn
            by the layer's block_type, and an MoE block's (output, router logits) is unpacked).
            The new forward keeps the installed version's signature
            conventions: every argument the layer gets is handed to self_attn as the original does,
            and it returns a tuple only where the installed version has `output_attentions`.
            The attention output buffer (fresh from o_proj) receives the sum in place; the layer's
            input tensor is never written.

Under torch.compile (compile_policy="auto", the default; see kfuse.patch.patch) every patched forward
and the replaced apply_rotary_pos_emb run the original code while dynamo traces them: inductor's
fusions of these layers match kfuse's kernels on the GPU and cost less host time per call than an
opaque kfuse op (BENCHMARKS.md, "End to end"). compile_policy="all" keeps the kfuse ops in compiled
graphs. The shared apply_rotary_pos_emb follows the policy of the patch() call that installed it.

A patched forward falls back to the original code for inputs the fused op does not cover (activations
of a dtype other than f32 / f16 / bf16, e.g. a model in float64 or .double()'d after patching; a
Llama-style weight whose dtype differs from the activations, where HF would promote the result; a
residual and an attention output of two dtypes, as under autocast; gate and up projections of two
dtypes; cos / sin of another dtype than q / k, where HF's q * cos promotes the result or the op takes
no such table, e.g. an f32 model under bf16 autocast (f32 tables, bf16 q / k) or an f16 model under
bf16 autocast (f16 tables)) and wherever autograd records (kfuse.patch). A Gemma-style weight of a
third dtype (a bf16 checkpoint's weight with f32 activations, as under autocast) is handed to the op
as f32, since HF's norm computes 1 + weight.float() anyway: the same values, and the op takes f32 or
the activations' dtype.

Modules that another library put in place of a family's classes before the model was built (e.g.
liger_kernel's apply_liger_kernel_to_llama replaces modeling_llama.LlamaRMSNorm / LlamaMLP /
apply_rotary_pos_emb for every Llama built afterwards) are not transformers classes: kfuse leaves
them alone and the report lists them under skipped, with their origin; a decoder layer whose norms
are such modules is skipped as well. A replaced apply_rotary_pos_emb is still replaced by kfuse's
rope (same math) and the report notes where the function it wraps came from.
"""

import functools
import inspect
import sys

import torch

from .patch import (
    KFUSE_DTYPES,
    PatchReport,
    gemma_weight,
    gated_norm_fits,
    norm_eps,
    once_per_class,
    rms_norm_form,
    call_original,
    grad_needed,
    hf_rope_fits,
    leave_to_compiler,
    load_ops,
    is_patched,
    original_forward,
    replace_forward,
    replace_shared,
)

# the hybrids' gated norms, all of Qwen3-Next's form (see gated_norm_fits)
GATED_NORMS = {"Qwen3_5RMSNormGated", "Qwen3_5MoeRMSNormGated", "Qwen3NextRMSNormGated"}

# decoder layers: "prenorm" = residual + attn -> post_attention_layernorm -> mlp (Llama and co.;
#                 any other *DecoderLayer whose forward a probe finds of this form: layer_is_prenorm)
#                 "sandwich" = residual + post_attention_layernorm(attn) -> pre_feedforward_layernorm
PRENORM_LAYERS = {"LlamaDecoderLayer", "MistralDecoderLayer", "Qwen2DecoderLayer", "Qwen3DecoderLayer",
                  "GemmaDecoderLayer"}
SANDWICH_LAYERS = {"Gemma2DecoderLayer", "Gemma3DecoderLayer"}
#                 "hybrid" = prenorm with linear_attn or self_attn by block_type (Qwen3.5 and co.)
HYBRID_LAYERS = {"Qwen3_5DecoderLayer", "Qwen3_5MoeDecoderLayer", "Qwen3NextDecoderLayer"}
DECODER_LAYERS = PRENORM_LAYERS | SANDWICH_LAYERS | HYBRID_LAYERS


# attention of the families above: their module's apply_rotary_pos_emb is replaced even where
# another library put its own function there (which the probe, rope_function_form, cannot run)
ATTENTION_CLASSES = {"LlamaAttention", "MistralAttention", "Qwen2Attention", "Qwen3Attention",
                     "GemmaAttention", "Gemma2Attention", "Gemma3Attention"}

# arguments a decoder layer may take besides hidden_states, all of which the original passes on
# to self_attn unchanged; a layer with any other argument is left alone.
_LAYER_ARGS = {"attention_mask", "position_ids", "past_key_value", "past_key_values", "cache", "use_cache",
               "cache_position", "position_embeddings", "output_attentions"}

_TANH_GELUS = {"GELUTanh", "PytorchGELUTanh", "NewGELUActivation", "FastGELUActivation", "GELUPytorchTanh"}


def act_name(act):
    """kfuse glu act for an HF activation module, or None when kfuse has no equal of it."""
    name = type(act).__name__
    if name in ("SiLUActivation", "SiLU"):
        return "silu"
    if name in _TANH_GELUS:
        return "gelu_tanh"
    if name == "GELUActivation":
        return "gelu_erf"
    if isinstance(act, torch.nn.GELU):
        return "gelu_tanh" if act.approximate == "tanh" else "gelu_erf"
    return None


def norm_kind(module):
    """The kfuse rms_norm mode ("llama" | "none" | "gemma") that computes what a transformers
    RMSNorm module's class forward does, or None (kfuse.patch.rms_norm_form)."""
    return rms_norm_form(type(module)) or None


# ---------------------------------------------------------------------------------------------
# forwards (bound to a module instance with MethodType; `ops` is closed over, the original forward
# is found from the module each call runs on: call_original)


def _make_norm_forward(ops, kind, policy):
    offset = 1.0 if kind == "gemma" else 0.0

    def forward(self, hidden_states):
        w = self.weight
        dtype = hidden_states.dtype
        if (leave_to_compiler(policy) or grad_needed(hidden_states, w) or dtype not in KFUSE_DTYPES
                or (kind == "llama" and w.dtype != dtype)):  # HF promotes to w's dtype
            return call_original(self, hidden_states)
        if kind != "llama":
            w = gemma_weight(w, dtype)          # f32 products: any weight dtype, as f32
        return ops.rms_norm(hidden_states, w, eps=norm_eps(self), mode=kind, offset=offset)

    return forward


@once_per_class
def mlp_is_glu(mlp_class):
    """True where mlp_class's forward(x) is `down_proj(act_fn(gate_proj(x)) * up_proj(x))` with
    its own act_fn (134 transformers *MLP classes: Llama's, Qwen's, Gemma's, DeepSeek's, ...).
    Found once per class by running that forward on an instance holding just those four
    modules (small random projections, tanh as act_fn) against the expression, bit for bit."""
    g = torch.Generator().manual_seed(0)

    def proj(n_in, n_out):
        p = torch.nn.Linear(n_in, n_out, bias=False)
        with torch.no_grad():
            p.weight.copy_(torch.randn(n_out, n_in, generator=g))
        return p

    try:
        probe = mlp_class.__new__(mlp_class)
        torch.nn.Module.__init__(probe)
        probe.gate_proj, probe.up_proj, probe.down_proj = proj(8, 16), proj(8, 16), proj(16, 8)
        probe.act_fn = torch.nn.Tanh()
        x = torch.randn(2, 3, 8, generator=g)
        with torch.no_grad():
            want = probe.down_proj(torch.tanh(probe.gate_proj(x)) * probe.up_proj(x))
            got = mlp_class.forward(probe, x)
    except Exception:
        return False
    return isinstance(got, torch.Tensor) and torch.equal(got, want)


def pair_tables(cos, sin, convention):
    """The tables and kfuse rope convention for a function of rope_function_form's convention:
    "interleaved_from_half" turns the half layout's tables [..., r] (each angle twice, one
    half after the other) into the interleaved layout (each angle at 2i and 2i + 1)."""
    if convention != "interleaved_from_half":
        return cos, sin
    half = cos.shape[-1] // 2
    return cos[..., :half].repeat_interleave(2, -1), sin[..., :half].repeat_interleave(2, -1)


@functools.lru_cache(maxsize=None)
def rope_function_form(fn):
    """How a model module's apply_rotary_pos_emb(q, k, cos, sin, [position_ids,] [unsqueeze_dim])
    rotates, as kfuse rope takes it: (form, casts_back, convention). form "full" (Llama's:
    q * cos + rotate_half(q) * sin with tables as wide as the head, q's dtype out for tables of
    q's dtype), "partial" (the same, and tables narrower than the head rotate the first
    cos.shape[-1] channels and pass the rest: Qwen3.5's, Phi-3's) or "" (another signature or
    form). casts_back: bf16 q / k with f32 tables come back bf16 (OLMo's: computed in f32,
    rounded once, as the op does with f32 tables); where it is False they come back f32 as
    Llama's, which the op does not give. convention: "half" (channel i with i + r/2, tables
    as HF's rotary embeddings build them, each angle twice: cat(angles, angles)),
    "interleaved" (channels 2i and 2i + 1, tables repeat_interleave(angles, 2): Cohere's) or
    "interleaved_from_half" (channels 2i and 2i + 1, tables of the half layout that the function
    rearranges itself: GLM's, Helium's, ERNIE 4.5's).
    Found once per function by calling it on f32 and bf16 probes against a float64 reference."""
    try:
        f = fn.forward if isinstance(fn, torch.nn.Module) else fn
        params = list(inspect.signature(inspect.unwrap(f)).parameters)
    except (TypeError, ValueError):
        return "", False, "half"
    if len(params) < 4 or not set(params[4:]) <= {"position_ids", "unsqueeze_dim"}:
        return "", False, "half"
    g = torch.Generator().manual_seed(0)

    def rotates(convention, dtype, r, table_dtype=None):
        q, k = torch.randn(1, 2, 3, 8, generator=g).to(dtype), torch.randn(1, 1, 3, 8, generator=g).to(dtype)
        ang = torch.randn(1, 3, r // 2, generator=g) * 3
        if convention == "interleaved":
            cos, sin = ang.cos().repeat_interleave(2, -1), ang.sin().repeat_interleave(2, -1)
        else:
            cos, sin = torch.cat([ang.cos()] * 2, -1), torch.cat([ang.sin()] * 2, -1)
        cos, sin = cos.to(table_dtype or dtype), sin.to(table_dtype or dtype)
        c, s_ = pair_tables(cos.double(), sin.double(), convention)
        c, s_ = c.unsqueeze(1), s_.unsqueeze(1)
        with torch.no_grad():
            got = fn(q, k, cos, sin)
        tol = 1e-5 if dtype == torch.float32 else 2e-2
        for t, o in zip((q, k), got):
            x = t.double()
            xr = x[..., :r]
            if convention == "half":
                turned = torch.cat((-xr[..., r // 2:], xr[..., :r // 2]), -1)
            else:
                turned = torch.stack((-xr[..., 1::2], xr[..., 0::2]), -1).flatten(-2)
            want = torch.cat((xr * c + turned * s_, x[..., r:]), -1)
            if not (isinstance(o, torch.Tensor) and o.dtype == dtype and o.shape == want.shape
                    and torch.allclose(o.double(), want, rtol=tol, atol=tol)):
                return False
        return True

    def tried(*args):
        try:
            return rotates(*args)
        except Exception:
            return False

    for convention in ("half", "interleaved", "interleaved_from_half"):
        if tried(convention, torch.float32, 8) and tried(convention, torch.bfloat16, 8):
            partial = tried(convention, torch.float32, 4) and tried(convention, torch.bfloat16, 4)
            return ("partial" if partial else "full"), tried(convention, torch.bfloat16, 8, torch.float32), convention
    return "", False, "half"


class _ProbeMap(torch.nn.Module):
    """A stand-in sub-module for layer_is_prenorm: fn(x), or (fn(x), None) as attention returns;
    keeps the names of the keyword arguments it was handed."""

    def __init__(self, fn, pair=False):
        super().__init__()
        self.fn, self.pair, self.names = fn, pair, set()

    def forward(self, hidden_states, *args, **kwargs):
        self.names |= set(kwargs)
        y = self.fn(hidden_states)
        return (y, None) if self.pair else y


@once_per_class
def layer_is_prenorm(layer_class):
    """True where layer_class's forward(hidden_states, ...) is Llama's decoder layer:
    h = x + self_attn(input_layernorm(x))[0]; out = h + mlp(post_attention_layernorm(h)), every
    other argument it names handed on to self_attn by name (as the replacement forward does).
    Found once per class by running that forward on an instance holding four distinct stand-in
    maps, every argument given (None), against the expression, bit for bit."""
    try:
        params = [p for p in list(inspect.signature(inspect.unwrap(layer_class.forward)).parameters.values())[2:]
                  if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        probe = layer_class.__new__(layer_class)
        torch.nn.Module.__init__(probe)
        probe.input_layernorm = _ProbeMap(lambda t: t * 1.5 + 0.25)
        probe.self_attn = _ProbeMap(torch.tanh, pair=True)
        probe.post_attention_layernorm = _ProbeMap(lambda t: t * 0.5 - 1.0)
        probe.mlp = _ProbeMap(torch.sin)
        x = torch.randn(2, 3, 8, generator=torch.Generator().manual_seed(0))
        named = {p.name: None for p in params if p.name != "output_attentions"}
        with torch.no_grad():
            got = layer_class.forward(probe, x, **named)
    except Exception:
        return False
    h = x + torch.tanh(x * 1.5 + 0.25)
    want = h + torch.sin(h * 0.5 - 1.0)
    got = got[0] if isinstance(got, tuple) else got
    return (isinstance(got, torch.Tensor) and torch.equal(got, want)
            and set(named) <= probe.self_attn.names)


@functools.lru_cache(maxsize=None)
def _calls_module_rope(attention_class):
    """Whether attention_class's forward calls its module's apply_rotary_pos_emb (a vision tower's
    attention beside a text model's calls apply_rotary_pos_emb_vision instead); True where its
    source cannot be read."""
    try:
        source = inspect.getsource(attention_class.forward)
    except (OSError, TypeError):
        return True
    return "apply_rotary_pos_emb(" in source


def _make_gated_norm_forward(ops, policy):
    def forward(self, hidden_states, gate=None):
        w = self.weight
        if leave_to_compiler(policy) or not gated_norm_fits(hidden_states, w, gate, getattr(self, "activation", None)):
            return call_original(self, hidden_states, gate)
        h = ops.rms_norm(hidden_states, w, eps=norm_eps(self), mode="llama")
        return ops.glu(gate, h, act="silu")

    return forward


def _make_mlp_forward(ops, act, policy):
    def forward(self, x):
        if leave_to_compiler(policy):
            return call_original(self, x)
        g, u = self.gate_proj(x), self.up_proj(x)
        if grad_needed(g, u) or g.dtype not in KFUSE_DTYPES or u.dtype != g.dtype:
            return self.down_proj(self.act_fn(g) * u)        # the original's math (differentiable)
        return self.down_proj(ops.glu(g, u, act=act))

    return forward


def _fused_add_norm(ops, x, fresh, norm):
    """fresh <- x + fresh (in place), return (fresh, norm(fresh)); the unfused code (a new sum,
    the norm module) where the fused op does not apply: a Llama-style weight whose dtype HF
    promotes to, activations of two dtypes (autocast), or autograd recording. (The layer forward
    has already left activations of a dtype kfuse does not take to the original code.)"""
    kind = norm_kind(norm)
    w = norm.weight
    dtype = fresh.dtype
    if ((kind == "llama" and w.dtype != dtype) or x.dtype != dtype
            or grad_needed(x, fresh, w)):
        s = x + fresh
        return s, norm(s)
    if kind != "llama":
        w = gemma_weight(w, dtype)
    offset = 1.0 if kind == "gemma" else 0.0
    y = ops.add_rms_norm(x, fresh, w, eps=norm_eps(norm), mode=kind, offset=offset)
    return fresh, y


def _make_layer_forward(ops, style, param_names, tuple_return, policy):
    """Decoder layer forward. param_names: the original's positional parameters after hidden_states."""

    def forward(self, hidden_states, *args, **kwargs):
        # training with grad: the original, whose class forward also holds transformers'
        # gradient checkpointing (kfuse's sub-ops would fall back there anyway)
        if (leave_to_compiler(policy) or hidden_states.dtype not in KFUSE_DTYPES
                or (self.training and torch.is_grad_enabled())):
            return call_original(self, hidden_states, *args, **kwargs)
        for name, value in zip(param_names, args):
            kwargs[name] = value
        output_attentions = bool(kwargs.get("output_attentions", False))
        x = hidden_states
        h = self.input_layernorm(x)
        if style == "hybrid" and self.block_type == "linear_attention":
            # as the original: linear_attn gets every argument but the positions
            mixer_kwargs = {n: v for n, v in kwargs.items() if n not in ("position_ids", "position_embeddings")}
            attn_out = (self.linear_attn(hidden_states=h, **mixer_kwargs),)
        else:
            attn_out = self.self_attn(hidden_states=h, **kwargs)
        attn = attn_out[0]
        if style == "sandwich":
            attn = self.post_attention_layernorm(attn)
            resid, h = _fused_add_norm(ops, x, attn, self.pre_feedforward_layernorm)
            h = self.post_feedforward_layernorm(self.mlp(h))
        else:
            resid, h = _fused_add_norm(ops, x, attn, self.post_attention_layernorm)
            h = self.mlp(h)
            if isinstance(h, tuple):        # an MoE block's (output, router logits)
                h = h[0]
        out = resid + h
        if tuple_return:
            return (out, attn_out[1]) if output_attentions else (out,)
        return out

    return forward


def _make_rope(ops, orig, has_position_ids, policy, partial=False, casts_back=False, convention="half"):
    """Replacement for a family's apply_rotary_pos_emb(q, k, cos, sin, [position_ids,] unsqueeze_dim=1);
    partial: orig rotates the first cos.shape[-1] channels and passes the rest; casts_back: it
    returns q's dtype for f32 tables with 16-bit q / k; convention: its channel pairs and table
    layout (rope_function_form)."""
    pairs = "half" if convention == "half" else "interleaved"

    def apply_rotary_pos_emb(q, k, cos, sin, *args, **kwargs):
        if leave_to_compiler(policy) or grad_needed(q, k, cos, sin):
            return orig(q, k, cos, sin, *args, **kwargs)
        unsqueeze_dim = kwargs.get("unsqueeze_dim", 1)
        rest = list(args)
        position_ids = kwargs.get("position_ids")
        if has_position_ids and rest:
            position_ids = rest.pop(0)
        if rest:
            unsqueeze_dim = rest[0]
        if position_ids is not None and cos.dim() == 2:
            return orig(q, k, cos, sin, *args, **kwargs)    # transformers <= 4.37: cos[position_ids]
        if not hf_rope_fits(q, k, cos, sin, unsqueeze_dim, partial, casts_back):
            return orig(q, k, cos, sin, *args, **kwargs)
        layout = "bhsd" if unsqueeze_dim == 1 else "bshd"
        if cos.dim() == 3 and cos.shape[0] == 1 and q.shape[0] != 1:
            cos, sin = cos[0], sin[0]           # one table for all sequences: the [S, r] form
        cos, sin = pair_tables(cos, sin, convention)
        if layout == "bhsd" and q.transpose(1, 2).is_contiguous() and k.transpose(1, 2).is_contiguous():
            # q / k [B, H, S, Dh] as the attention makes them: transposed views of the projections'
            # [B, S, H, Dh]. Rotated as that contiguous tensor, the outputs keep the inputs' layout,
            # as eager's do: in a contiguous [B, H, S, Dh] the attention's output came out
            # [B, H, S, Dh] too, and its transpose(1, 2).contiguous() became a copy of every
            # token (H200, Llama prefill 2048 tokens: 22 us per layer)
            qo, ko = ops.rope(q.transpose(1, 2), k.transpose(1, 2), cos=cos, sin=sin, convention=pairs,
                              layout="bshd")
            return qo.transpose(1, 2), ko.transpose(1, 2)
        return ops.rope(q, k, cos=cos, sin=sin, convention=pairs, layout=layout)

    apply_rotary_pos_emb.__kfuse__ = True
    return apply_rotary_pos_emb


# ---------------------------------------------------------------------------------------------


def _layer_params(orig):
    """(positional parameter names after hidden_states, all parameter names) of a layer forward."""
    fn = inspect.unwrap(orig)
    sig = inspect.signature(fn)
    params = [p for p in sig.parameters.values() if p.name != "self"]
    names = [p.name for p in params
             if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return names[1:], {p.name for p in params if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}


def _foreign_reason(m):
    """Skip reason for a module that is not a transformers class but sits where kfuse expects a norm
    or an MLP (another library swapped the family's class, e.g. modeling_llama.LlamaRMSNorm, before
    the model was built); None for any other module."""
    cls = type(m).__name__
    origin = type(m).__module__ or ""
    if origin.split(".", 1)[0] in ("torch", "diffusers"):
        return None                      # torch.nn.RMSNorm and diffusers norms: kfuse.patch_diffusers
    if cls.endswith("RMSNorm") or cls.endswith("MLP"):
        return (f"{cls} from {origin}: not a transformers class (another library replaced the family's "
                f"class before the model was built?); left as it is")
    return None


def _foreign_function(owner, fn):
    """Where a family module's apply_rotary_pos_emb comes from when it is not the module's own
    function (None when it is, or when it is kfuse's replacement)."""
    if getattr(fn, "__kfuse__", False):
        return None
    fn_module = getattr(fn, "__module__", None) or ""
    if fn_module == owner.__name__ or fn_module.startswith("transformers."):
        return None
    return f"{getattr(fn, '__qualname__', type(fn).__name__)} from {fn_module or '?'}"


def patch_transformers(model, report=None, norms=True, rope=True, mlp=True, residual=True, compile_policy="auto",
                       **_):
    """Patch the transformers modules of `model` (see the module docstring); returns the report."""
    report = report if report is not None else PatchReport()
    ops = load_ops()
    rope_modules = {}

    for name, m in model.named_modules():
        cls = type(m).__name__
        if not (type(m).__module__ or "").startswith("transformers."):
            reason = _foreign_reason(m)
            if reason is not None:
                report.skip(name, reason)
            continue
        if is_patched(m):
            if cls.endswith(("RMSNorm", "MLP", "DecoderLayer")) or cls in GATED_NORMS:
                report.skip(name, "already patched by kfuse")
            continue

        if cls.endswith("RMSNorm"):
            if not norms:
                continue
            kind = norm_kind(m)
            if kind is None:
                report.skip(name, f"{cls}: RMSNorm form not known to kfuse")
            elif getattr(m, "weight", None) is None or m.weight.dim() != 1 or norm_eps(m) is None:
                report.skip(name, f"{cls}: no 1-D weight or no eps")
            else:
                replace_forward(model, m, _make_norm_forward(ops, kind, compile_policy))
                report.add("rms_norm", name)

        elif cls in GATED_NORMS:
            if not norms:
                continue
            if getattr(m, "weight", None) is None or m.weight.dim() != 1 or norm_eps(m) is None:
                report.skip(name, f"{cls}: no 1-D weight or no eps")
            elif getattr(m, "activation", None) not in ("silu", "swish"):
                report.skip(name, f"{cls}: activation {getattr(m, 'activation', None)!r} not in kfuse glu")
            else:
                replace_forward(model, m, _make_gated_norm_forward(ops, compile_policy))
                report.add("rms_norm+glu", name)

        elif cls.endswith("MLP") and mlp_is_glu(type(m)):
            if not mlp:
                continue
            act = act_name(getattr(m, "act_fn", None))
            if act is None:
                report.skip(name, f"{cls}: activation {type(getattr(m, 'act_fn', None)).__name__} not in kfuse glu")
            elif not all(hasattr(m, a) for a in ("gate_proj", "up_proj", "down_proj")):
                report.skip(name, f"{cls}: no gate_proj/up_proj/down_proj")
            else:
                replace_forward(model, m, _make_mlp_forward(ops, act, compile_policy))
                report.add("glu", name)

        elif cls in DECODER_LAYERS or (cls.endswith("DecoderLayer") and layer_is_prenorm(type(m))):
            if not residual:
                continue
            style = "sandwich" if cls in SANDWICH_LAYERS else "hybrid" if cls in HYBRID_LAYERS else "prenorm"
            mixer = ("linear_attn" if style == "hybrid" and getattr(m, "block_type", None) == "linear_attention"
                     else "self_attn")
            norm_names = (["post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm"]
                          if style == "sandwich" else ["post_attention_layernorm"])
            fused = m.pre_feedforward_layernorm if style == "sandwich" else getattr(m, "post_attention_layernorm", None)
            try:
                positional, all_names = _layer_params(original_forward(m))
            except (TypeError, ValueError):
                positional, all_names = None, set()
            if positional is None or not (all_names - {"hidden_states"}) <= _LAYER_ARGS:
                report.skip(name, f"{cls}: forward signature not recognised")
            elif not all(hasattr(m, n) for n in norm_names + ["input_layernorm", mixer, "mlp"]):
                report.skip(name, f"{cls}: missing sub-modules")
            elif not (type(fused).__module__ or "").startswith("transformers.") or norm_kind(fused) is None:
                report.skip(name, f"{cls}: {type(fused).__name__} not known to kfuse")
            else:
                fwd = _make_layer_forward(ops, style, positional, "output_attentions" in all_names,
                                          compile_policy)
                replace_forward(model, m, fwd)
                report.add("add_rms_norm", name)

        elif cls.endswith("Attention") and rope and (cls in ATTENTION_CLASSES or _calls_module_rope(type(m))):
            owner = sys.modules.get(type(m).__module__)
            fn = getattr(owner, "apply_rotary_pos_emb", None)
            if fn is None:
                if cls in ATTENTION_CLASSES:
                    report.skip(name, f"{cls}: no apply_rotary_pos_emb in {type(m).__module__}")
                continue
            if getattr(fn, "__kfuse__", False):
                form = ("replaced", False, "half")  # for another model of the family already
            elif _foreign_function(owner, fn) is not None:
                form = ("full" if cls in ATTENTION_CLASSES else "", False, "half")
            else:
                form = rope_function_form(fn)
            if form[0]:
                rope_modules.setdefault(owner.__name__, (owner, [], form))[1].append(name)
            else:
                report.skip(name, f"{cls}: {owner.__name__}.apply_rotary_pos_emb is not a form kfuse rope takes")

    for owner, names, (form, casts_back, convention) in rope_modules.values():
        orig = owner.apply_rotary_pos_emb
        foreign = _foreign_function(owner, orig)
        if foreign is not None:
            report.note(names[0], f"{owner.__name__}.apply_rotary_pos_emb is {foreign}, not the transformers "
                                  f"function; kfuse rope replaces it (and falls back to it)")
        if getattr(orig, "__kfuse__", False):
            # already replaced for another model: take a reference for this one too
            replace_shared(model, owner, "apply_rotary_pos_emb", None)
        else:
            try:
                fn = orig.forward if isinstance(orig, torch.nn.Module) else orig
                has_pid = "position_ids" in inspect.signature(inspect.unwrap(fn)).parameters
            except (TypeError, ValueError):
                has_pid = False
            replace_shared(model, owner, "apply_rotary_pos_emb",
                               lambda o: _make_rope(ops, o, has_pid, compile_policy, form == "partial",
                                                    casts_back, convention))
        for n in names:
            report.add("rope", n)
    return report
