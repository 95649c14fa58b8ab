"""kfuse.patch_diffusers - kfuse ops in diffusers models (LTX-Video transformer first).

What is replaced:
  norm        every diffusers RMSNorm (with or without weight; bias -> skipped) and every
              torch.nn.RMSNorm over the last dim -> kfuse rms_norm. Casting as the module does it:
              diffusers with a half weight = mode "llama", no weight or f32 = "none"; torch.nn = "none".
  gelu        diffusers GELU activation modules (proj + F.gelu) -> proj + kfuse gelu (FeedForward).
  rope        LTXVideoRotaryPosEmbed stops building [B, S, dim] f32 cos/sin tables: it returns the
              compact POSITIONS form (positions [B,S,3] f32, freqs [dim/2] f32, axis [dim/2] int32)
              that reproduces diffusers' table exactly: pair p = k*3 + a (after (dim % 6)/2 identity
              pairs with freq 0 at the front) has freq theta^(k/(K-1)) * pi/2 on axis a, and the
              position of axis a is 2 * grid_a - 1 (grid as diffusers builds it, interpolation scale
              and video_coords included).
  attention   LTX attention processors -> KfuseLTXAttnProcessor: RMSNorm across heads + interleaved
              rotary of q and k as one kfuse rms_norm_rope (positions form, or the table form when it
              is handed diffusers' (cos, sin) tables); attention itself is diffusers' dispatch.
  block       LTXVideoTransformerBlock: norm1 + modulation = ada_norm, h + attn1*gate_msa =
              gated_residual, h + attn2 then norm2 + modulation = add_ada_norm, h + ff*gate_mlp =
              gated_residual. The residual stream is updated in place in the block's input tensor
              (the transformer's loop rebinds it, so nothing else sees it); with
              inplace_residual=False, or when diffusers hooks sit on the block (caches that keep the
              block input), or when the input is an inference tensor and inference mode is off
              (torch does not let it be written), the block first copies its input.
  attn fwd    LTXAttention.forward (when its processor was replaced) calls the processor directly:
              the stock forward runs inspect.signature on the processor at every call to filter
              extra keyword arguments; with extra keyword arguments the stock forward still runs.
The rotary module is only switched to the positions form when every LTX attention processor of the
model was replaced (the stock processor could not read it), and returns diffusers' tables again
while one of them has been given another processor since.

Under torch.compile (compile_policy="auto", the default; see kfuse.patch.patch): the RMSNorm
modules and the LTX block forward run diffusers' code while dynamo traces them, so inductor fuses
the modulation and residual adds; the attention processor keeps rms_norm_rope (positions form) and
the feed-forward keeps kfuse gelu, which beat inductor's kernels (BENCHMARKS.md).
compile_policy="all" keeps every replacement in compiled graphs too.

A patched forward falls back to diffusers' code for inputs the fused op does not cover (activations
of a dtype other than f32 / f16 / bf16, e.g. a model in float64 or .double()'d after patching; a
norm weight whose dtype differs from the activations, where diffusers would return the weight's
dtype; modulation or block norm weights of another dtype than the block's input) and wherever
autograd records (kfuse.patch). The attention processor then computes diffusers' rotary on the
norm module's output (the positions form turned into diffusers' tables).
"""

import copy
import math
import operator

import torch

from .patch import (KFUSE_DTYPES, PatchReport, call_original, grad_needed, inference_tensor_outside_mode,
                    is_patched, leave_to_compiler, load_ops, replace_attr, replace_forward)

_HALF = (torch.float16, torch.bfloat16)
LTX_PROCESSORS = {"LTXVideoAttnProcessor", "LTXVideoAttentionProcessor2_0", "LTXVideoAttnProcessor2_0"}


def _is_diffusers_rmsnorm(m):
    return type(m).__name__ == "RMSNorm" and (type(m).__module__ or "").startswith("diffusers.")


def _is_torch_rmsnorm(m):
    return hasattr(torch.nn, "RMSNorm") and type(m) is torch.nn.RMSNorm


def _rmsnorm_eps(norm, dtype):
    """The epsilon a diffusers or torch RMSNorm uses on inputs of `dtype`: torch.nn.RMSNorm's
    eps None is the epsilon of the type it computes in (f32 for 16-bit inputs)."""
    if norm.eps is not None:
        return norm.eps
    return torch.finfo(torch.float32 if dtype in _HALF else dtype).eps


def norm_spec(norm, x):
    """(weight, eps, mode) that make kfuse rms_norm equal `norm(x)`, or None if it can't."""
    if x.dtype not in KFUSE_DTYPES:
        return None                       # a dtype the op does not take (float64)
    w = getattr(norm, "weight", None)
    if _is_torch_rmsnorm(norm):
        eps = _rmsnorm_eps(norm, x.dtype)
        if w is not None and w.dtype != x.dtype:
            return None
        return w, eps, "none"
    if getattr(norm, "bias", None) is not None:
        return None
    if w is None:
        return None, norm.eps, "none"
    if w.dtype != x.dtype:
        return None                       # diffusers would return the weight's dtype
    return w, norm.eps, ("llama" if w.dtype in _HALF else "none")


def _make_norm_forward(ops, policy):
    def forward(self, hidden_states):
        # under compile (policy "auto") inductor fuses a plain RMSNorm as well as kfuse
        spec = None if leave_to_compiler(policy) else norm_spec(self, hidden_states)
        if spec is None or grad_needed(hidden_states, spec[0]):
            return call_original(self, hidden_states)
        w, eps, mode = spec
        return ops.rms_norm(hidden_states, w, eps=eps, mode=mode)

    return forward


def _make_gelu_forward(ops):
    def forward(self, hidden_states):
        h = self.proj(hidden_states)
        if grad_needed(h) or h.dtype not in KFUSE_DTYPES:
            return self.gelu(h)                 # the rest of diffusers' GELU.forward
        return ops.gelu(h, approximate=self.approximate)

    return forward


# ---------------------------------------------------------------------------------------------
# LTX-Video rotary: positions form


def ltx_pair_tables(dim, theta, device):
    """(freqs [dim/2] f32, axis [dim/2] int32) of LTXVideoRotaryPosEmbed, identity pairs first."""
    k = dim // 6
    f = theta ** torch.linspace(math.log(1.0, theta), math.log(theta, theta), k, device=device,
                                dtype=torch.float32)
    f = f * math.pi / 2.0
    pad = (dim % 6) // 2
    freqs = torch.cat([torch.zeros(pad, device=device, dtype=torch.float32), f[:, None].expand(k, 3).reshape(-1)])
    axis = torch.cat([torch.zeros(pad, device=device, dtype=torch.int32),
                      torch.arange(3, device=device, dtype=torch.int32).repeat(k)])
    return freqs, axis


def ltx_positions(rope, hidden_states, num_frames=None, height=None, width=None, rope_interpolation_scale=None,
                  video_coords=None):
    """positions [B, S, 3] f32 = 2 * grid - 1, the grid exactly as LTXVideoRotaryPosEmbed builds it."""
    batch_size = hidden_states.size(0)
    if video_coords is None:
        grid = rope._prepare_video_coords(batch_size, num_frames, height, width,
                                          rope_interpolation_scale=rope_interpolation_scale,
                                          device=hidden_states.device)
    else:
        grid = torch.stack([video_coords[:, 0] / rope.base_num_frames, video_coords[:, 1] / rope.base_height,
                            video_coords[:, 2] / rope.base_width], dim=-1)
    # contiguous once here (diffusers' grid is a transposed view): the rotary ops of every
    # attention layer read it as it is, without a copy each
    return (grid * 2 - 1).contiguous()


# the rotary module's __dict__ key of the attention modules that read its output
_READERS = "_kfuse_ltx_attention"


def _ltx_rope_forward(self, hidden_states, num_frames=None, height=None, width=None,
                      rope_interpolation_scale=None, video_coords=None):
    """The positions form while every attention module that reads it has kfuse's processor; one
    given another processor after patch() reads diffusers' tables, which the original builds."""
    if not all(isinstance(a.processor, KfuseLTXAttnProcessor) for a in self.__dict__.get(_READERS, ())):
        return call_original(self, hidden_states, num_frames, height, width, rope_interpolation_scale,
                             video_coords)
    positions = ltx_positions(self, hidden_states, num_frames, height, width, rope_interpolation_scale,
                              video_coords)
    freqs, axis = ltx_pair_tables(self.dim, self.theta, hidden_states.device)
    return positions, freqs, axis


def _rotate_interleaved(x, cos, sin):
    """LTX's rotary of x [B, S, D] by [B, S, D] tables, as diffusers' apply_rotary_emb computes it."""
    real, imag = x.unflatten(2, (-1, 2)).unbind(-1)
    rotated = torch.stack([-imag, real], dim=-1).flatten(2)
    return (x.float() * cos + rotated.float() * sin).to(x.dtype)


def tables_from_positions(positions, freqs, axis):
    """diffusers-layout (cos, sin) [B, S, 2*len(freqs)] f32 from the positions form (for checks)."""
    ang = positions.index_select(-1, axis.long()) * freqs
    return ang.cos().repeat_interleave(2, -1), ang.sin().repeat_interleave(2, -1)


# ---------------------------------------------------------------------------------------------
# LTX attention processor


def _dispatch():
    try:
        from diffusers.models.attention_dispatch import dispatch_attention_fn

        return dispatch_attention_fn
    except ImportError:
        return None


def _native_backend_check():
    """A function telling whether diffusers' active attention backend is its native one (plain
    F.scaled_dot_product_attention), or None where this diffusers has no backend registry."""
    try:
        from diffusers.models.attention_dispatch import AttentionBackendName, _AttentionBackendRegistry
    except ImportError:
        return None
    native = AttentionBackendName.NATIVE
    get = getattr(_AttentionBackendRegistry, "get_active_backend", None)
    if get is None:
        return None
    return lambda: get()[0] == native


_sdpa = torch.nn.functional.scaled_dot_product_attention


class KfuseLTXAttnProcessor:
    """LTX attention with q/k RMSNorm-across-heads + interleaved rotary fused (kfuse rms_norm_rope).

    Attention itself: F.scaled_dot_product_attention directly when diffusers' dispatch would do
    nothing else (no backend set on the processor, no context-parallel config, diffusers' active
    backend the native one), else diffusers' dispatch_attention_fn. A [B, 1, Lk] additive mask
    (LTX's cross-attention mask) is handed to attention as [B, 1, 1, Lk], broadcast over heads,
    where diffusers builds a [B, H, 1, Lk] copy per call: the same values in every head."""

    ops = None                                   # kfuse.ops (a class attribute: a module
                                                 # object in the instance would stop deepcopy)

    def __init__(self, ops, original):
        type(self).ops = ops
        self.kfuse_replaced = original           # what kfuse.unpatch of a deep copy puts back
        self._attention_backend = getattr(original, "_attention_backend", None)
        self._parallel_config = getattr(original, "_parallel_config", None)
        self._dispatch = _dispatch()
        self._native = _native_backend_check()

    def _norm_rope(self, norm, x, rot):
        """norm(x) followed by LTX's interleaved rotary across the whole inner dim, in one op."""
        if rot is None:
            return norm(x)                      # the norm module itself is patched (kfuse rms_norm)
        if grad_needed(x, getattr(norm, "weight", None), *rot) or x.dtype not in KFUSE_DTYPES:
            # autograd records, or a dtype the ops do not take: diffusers' math on the tables
            # (the norm module falls back too)
            cos, sin = tables_from_positions(*rot) if len(rot) == 3 else rot
            return _rotate_interleaved(norm(x), cos, sin)
        if len(rot) == 3:
            kw = dict(positions=rot[0], freqs=rot[1], axis=rot[2])
        else:
            kw = dict(cos=rot[0], sin=rot[1])
        spec = norm_spec(norm, x)
        if spec is None:
            y, _ = self.ops.rope(norm(x), None, convention="interleaved", layout="bshd", **kw)
            return y
        w, eps, mode = spec
        return self.ops.rms_norm_rope(x, w, eps=eps, mode=mode, convention="interleaved", **kw)

    def __reduce__(self):
        # pickling (torch.save of a patched model) stores the processor this one replaced, so
        # the model loads unpatched, as its forwards do, without kfuse: itemgetter(0) of a
        # one-tuple gives the processor back on load (this one's callables do not pickle)
        return (operator.itemgetter(0), ((self.kfuse_replaced,),))

    def __copy__(self):
        dup = object.__new__(type(self))
        dup.__dict__.update(self.__dict__)
        return dup

    def __deepcopy__(self, memo):
        # a deep copy of a patched model keeps kfuse's processor (not __reduce__'s original)
        dup = object.__new__(type(self))
        memo[id(self)] = dup
        dup.__dict__.update(copy.deepcopy(self.__dict__, memo))
        return dup

    def _direct(self):
        """True when dispatch_attention_fn would call F.scaled_dot_product_attention and nothing else."""
        if self._dispatch is None:
            return True
        return (self._attention_backend is None and self._parallel_config is None
                and self._native is not None and self._native())

    def __call__(self, attn, hidden_states, encoder_hidden_states=None, attention_mask=None, image_rotary_emb=None):
        batch_size, sequence_length, _ = (
            hidden_states.shape if encoder_hidden_states is None else encoder_hidden_states.shape
        )
        direct = self._direct()
        if attention_mask is not None:
            if (direct and attention_mask.dim() == 3 and attention_mask.shape[0] == batch_size
                    and attention_mask.shape[1] == 1 and attention_mask.shape[2] == sequence_length):
                attention_mask = attention_mask.unsqueeze(1)     # [B, 1, 1, Lk], broadcast over heads
            else:
                attention_mask = attn.prepare_attention_mask(attention_mask, sequence_length, batch_size)
                attention_mask = attention_mask.view(batch_size, attn.heads, -1, attention_mask.shape[-1])
        if encoder_hidden_states is None:
            encoder_hidden_states = hidden_states

        query = attn.to_q(hidden_states)
        key = attn.to_k(encoder_hidden_states)
        value = attn.to_v(encoder_hidden_states)
        query = self._norm_rope(attn.norm_q, query, image_rotary_emb)
        key = self._norm_rope(attn.norm_k, key, image_rotary_emb)

        heads = attn.heads
        if direct:
            # [B, S, H*Dh] -> [B, H, S, Dh] views, as diffusers' native backend lays them out
            q = query.unflatten(2, (heads, -1)).transpose(1, 2)
            k = key.unflatten(2, (heads, -1)).transpose(1, 2)
            v = value.unflatten(2, (heads, -1)).transpose(1, 2)
            out = _sdpa(q, k, v, attn_mask=attention_mask, dropout_p=0.0, is_causal=False)
            out = out.transpose(1, 2).flatten(2, 3)
        else:
            out = self._dispatch(query.unflatten(2, (heads, -1)), key.unflatten(2, (heads, -1)),
                                 value.unflatten(2, (heads, -1)), attn_mask=attention_mask, dropout_p=0.0,
                                 is_causal=False, backend=self._attention_backend,
                                 parallel_config=self._parallel_config)
            out = out.flatten(2, 3)
        if out.dtype != query.dtype:
            out = out.to(query.dtype)
        out = attn.to_out[0](out)
        drop = attn.to_out[1]
        if not (type(drop) is torch.nn.Dropout and (drop.p == 0.0 or not drop.training)):
            out = drop(out)
        return out


def _attention_forward(self, hidden_states, encoder_hidden_states=None, attention_mask=None,
                       image_rotary_emb=None, **kwargs):
    """LTXAttention.forward without its per-call inspect.signature of the processor (it filters
    extra keyword arguments by the processor's parameters): with no extra keyword arguments there
    is nothing to filter, and the processor is called directly; otherwise the original runs."""
    if kwargs:
        return call_original(self, hidden_states, encoder_hidden_states, attention_mask, image_rotary_emb,
                             **kwargs)
    return self.processor(self, hidden_states, encoder_hidden_states, attention_mask, image_rotary_emb)


# ---------------------------------------------------------------------------------------------
# LTX transformer block


def _block_norm(norm, dtype):
    """(weight, eps) for an LTX block norm (a diffusers or torch RMSNorm without bias) on
    activations of `dtype`."""
    return getattr(norm, "weight", None), _rmsnorm_eps(norm, dtype)


def _make_ltx_block_forward(ops, inplace, policy):
    def forward(self, hidden_states, encoder_hidden_states, temb, image_rotary_emb=None,
                encoder_attention_mask=None):
        args = (hidden_states, encoder_hidden_states, temb, image_rotary_emb, encoder_attention_mask)
        # under compile (policy "auto") inductor fuses the modulation and residual adds as well as
        # kfuse (and launches them for less host time); the attention and feed-forward inside
        # still use kfuse. Autograd recording anywhere in the block, or activations of a dtype
        # the ops do not take (float64): the original code (its attention and feed-forward
        # fall back in turn).
        # (grad mode first: the parameters are listed only when autograd may record)
        if (leave_to_compiler(policy) or hidden_states.dtype not in KFUSE_DTYPES
                or (torch.is_grad_enabled() and grad_needed(
                    hidden_states, temb, encoder_hidden_states, *self.parameters()))):
            return call_original(self, *args)
        batch_size = hidden_states.size(0)
        n = self.scale_shift_table.shape[0]
        ada = self.scale_shift_table[None, None].to(temb.device) + temb.reshape(batch_size, temb.size(1), n, -1)
        w1, eps1 = _block_norm(self.norm1, hidden_states.dtype)
        w2, eps2 = _block_norm(self.norm2, hidden_states.dtype)
        if (ada.dtype != hidden_states.dtype or (w1 is not None and w1.dtype != hidden_states.dtype)
                or (w2 is not None and w2.dtype != hidden_states.dtype)):
            return call_original(self, *args)
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = ada.unbind(dim=2)

        h = hidden_states
        if (not inplace or getattr(self, "_diffusers_hook", None) is not None
                or inference_tensor_outside_mode(h)):
            h = h.clone()
        y = ops.ada_norm(h, scale_msa, shift_msa, weight=w1, eps=eps1, kind="rms")
        a = self.attn1(hidden_states=y, encoder_hidden_states=None, image_rotary_emb=image_rotary_emb)
        ops.gated_residual(h, a, gate_msa)
        a = self.attn2(h, encoder_hidden_states=encoder_hidden_states, image_rotary_emb=None,
                       attention_mask=encoder_attention_mask)
        y = ops.add_ada_norm(h, a, scale_mlp, shift_mlp, weight=w2, eps=eps2, kind="rms")
        f = self.ff(y)
        ops.gated_residual(h, f, gate_mlp)
        return h

    return forward


# ---------------------------------------------------------------------------------------------


def patch_diffusers(model, report=None, norms=True, gelu=True, rope=True, attention=True, blocks=True,
                    inplace_residual=True, compile_policy="auto", **_):
    """Patch the diffusers modules (and torch.nn.RMSNorm) of `model`; returns the report."""
    report = report if report is not None else PatchReport()
    ops = load_ops()
    ltx_attn_total, rope_modules, readers = 0, [], []

    for name, m in model.named_modules():
        cls = type(m).__name__
        if is_patched(m):
            if _is_diffusers_rmsnorm(m) or _is_torch_rmsnorm(m) or cls in ("LTXVideoTransformerBlock",
                                                                            "LTXAttention"):
                report.skip(name, "already patched by kfuse")
            continue
        if _is_diffusers_rmsnorm(m) or _is_torch_rmsnorm(m):
            if not norms:
                continue
            shape = tuple(getattr(m, "dim", None) or getattr(m, "normalized_shape", ()))
            if len(shape) != 1:
                report.skip(name, f"{cls}: normalizes over {shape}, not the last dim")
            elif getattr(m, "bias", None) is not None:
                report.skip(name, f"{cls}: has a bias")
            else:
                replace_forward(model, m, _make_norm_forward(ops, compile_policy))
                report.add("rms_norm", name)
        elif cls == "GELU" and (type(m).__module__ or "").startswith("diffusers."):
            if not gelu:
                continue
            if getattr(m, "approximate", None) not in ("tanh", "none") or not hasattr(m, "proj"):
                report.skip(name, f"GELU approximate={getattr(m, 'approximate', None)!r} not in kfuse")
            else:
                replace_forward(model, m, _make_gelu_forward(ops))
                report.add("gelu", name)
        elif cls == "LTXVideoTransformerBlock":
            if not blocks:
                continue
            if any(getattr(n, "bias", None) is not None for n in (m.norm1, m.norm2)) \
                    or not all(_is_diffusers_rmsnorm(n) or _is_torch_rmsnorm(n) for n in (m.norm1, m.norm2)):
                report.skip(name, "LTX block norms are not bias-free RMSNorms")
            else:
                replace_forward(model, m, _make_ltx_block_forward(ops, inplace_residual, compile_policy))
                report.add("ltx_block", name)
        elif cls == "LTXVideoRotaryPosEmbed":
            rope_modules.append((name, m))
        elif hasattr(m, "processor") and hasattr(m, "norm_q") and hasattr(m, "to_q"):
            pname = type(m.processor).__name__
            if pname not in LTX_PROCESSORS and not isinstance(m.processor, KfuseLTXAttnProcessor):
                continue
            ltx_attn_total += 1
            if not attention:
                continue
            if isinstance(m.processor, KfuseLTXAttnProcessor):
                report.skip(name, "already patched by kfuse")
                continue
            replace_attr(model, m, "processor", KfuseLTXAttnProcessor(ops, m.processor))
            if cls == "LTXAttention":
                replace_forward(model, m, _attention_forward)
            readers.append(m)
            report.add("rms_norm_rope", name)

    for name, m in rope_modules:
        if not rope:
            continue
        if len(readers) != ltx_attn_total or ltx_attn_total == 0:
            report.skip(name, "not every LTX attention processor was replaced: keeping cos/sin tables")
            continue
        replace_forward(model, m, _ltx_rope_forward, **{_READERS: tuple(readers)})
        report.add("rope_positions", name)
    return report
