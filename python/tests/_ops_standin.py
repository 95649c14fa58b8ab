"""Pure-torch stand-in for kfuse.ops, for the patcher tests only (opt-in: KFUSE_TEST_STANDIN=1).

It implements the kfuse.ops Python contract with torch.library custom ops in the "kfuse" namespace
(same names, same mutation behaviour), so the patchers, torch.compile and the profiler see what they
see with the real library. ops() returns the real kfuse.ops unless the stand-in is requested.
"""

import math
import os
import sys
import types

import torch


def ops():
    if os.environ.get("KFUSE_TEST_STANDIN") != "1":
        import kfuse.ops
        return kfuse.ops
    if "kfuse.ops" in sys.modules:
        return sys.modules["kfuse.ops"]
    mod = _build()
    sys.modules["kfuse.ops"] = mod
    import kfuse
    kfuse.ops = mod
    return mod


def _norm(x, weight, eps, mode, offset):
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    if weight is None:
        return y.to(x.dtype)
    if mode == "llama":
        return (y.to(x.dtype) * weight.to(x.dtype)).to(x.dtype)
    return (y * (weight.float() + offset)).to(x.dtype)


def _angles(positions, freqs, axis):
    pos = positions.float()
    ax = axis.long() if axis is not None else torch.zeros_like(freqs, dtype=torch.long)
    p = pos.index_select(-1, ax)                      # [..., S, r/2]
    return p * freqs.float()


def _rot(x, cos, sin, convention, rotary_dim):
    """x [..., D] f32; cos/sin [..., r] duplicated per pair as the convention lays it out."""
    r = cos.shape[-1]
    xr, xp = x[..., :r], x[..., r:]
    if convention == "half":
        x1, x2 = xr[..., : r // 2], xr[..., r // 2:]
        rot = torch.cat((-x2, x1), -1)
    else:
        a, b = xr[..., 0::2], xr[..., 1::2]
        rot = torch.stack((-b, a), -1).flatten(-2)
    return torch.cat((xr * cos + rot * sin, xp), -1)


def _tables(positions, freqs, axis, convention):
    ang = _angles(positions, freqs, axis)
    c, s = ang.cos(), ang.sin()
    if convention == "half":
        return torch.cat((c, c), -1), torch.cat((s, s), -1)
    return c.repeat_interleave(2, -1), s.repeat_interleave(2, -1)


def _rope_one(x, cos, sin, positions, freqs, axis, convention, rotary_dim, layout, head_dim):
    shape = x.shape
    if x.dim() == 3:
        hd = head_dim or shape[-1]
        x4 = x.unflatten(-1, (shape[-1] // hd, hd))
        lay = "bshd"
    else:
        x4, lay = x, layout
    if lay == "bhsd":
        x4 = x4.transpose(1, 2)
    if cos is None:
        cos, sin = _tables(positions, freqs, axis, convention)
    cos, sin = cos.float(), sin.float()
    if cos.dim() == 2:
        cos, sin = cos[None], sin[None]
    y = _rot(x4.float(), cos[:, :, None, :], sin[:, :, None, :], convention, rotary_dim).to(x.dtype)
    if lay == "bhsd":
        y = y.transpose(1, 2)
    return y.reshape(shape).contiguous() if x.dim() == 3 else y.contiguous()


def _build():
    lib = "kfuse"

    @torch.library.custom_op(f"{lib}::rms_norm", mutates_args=())
    def rms_norm(x: torch.Tensor, weight: torch.Tensor | None, eps: float, rms_mode: str, offset: float) -> torch.Tensor:
        return _norm(x, weight, eps, rms_mode, offset)

    @rms_norm.register_fake
    def _(x, weight, eps, mode, offset):
        return torch.empty_like(x)

    @torch.library.custom_op(f"{lib}::add_rms_norm", mutates_args=("residual",))
    def add_rms_norm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor | None, eps: float, rms_mode: str,
                     offset: float) -> torch.Tensor:
        residual.copy_(x + residual)
        return _norm(residual, weight, eps, rms_mode, offset)

    @add_rms_norm.register_fake
    def _(x, residual, weight, eps, rms_mode, offset):
        return torch.empty_like(x)

    @torch.library.custom_op(f"{lib}::ada_norm", mutates_args=())
    def ada_norm(x: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor | None, weight: torch.Tensor | None,
                 eps: float, kind: str) -> torch.Tensor:
        xf = x.float()
        if kind == "rms":
            y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
        else:
            y = torch.nn.functional.layer_norm(xf, xf.shape[-1:], eps=eps)
        if weight is not None:
            y = y * weight.float()
        y = y * (1 + scale.float())
        if shift is not None:
            y = y + shift.float()
        return y.to(x.dtype)

    @ada_norm.register_fake
    def _(x, scale, shift, weight, eps, kind):
        return torch.empty_like(x)

    @torch.library.custom_op(f"{lib}::add_ada_norm", mutates_args=("h",))
    def add_ada_norm(h: torch.Tensor, a: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor | None,
                     gate: torch.Tensor | None, weight: torch.Tensor | None, eps: float, kind: str) -> torch.Tensor:
        s = h.float() + (a.float() * gate.float() if gate is not None else a.float())
        h.copy_(s)
        return ada_norm(h.clone(), scale, shift, weight, eps, kind)

    @add_ada_norm.register_fake
    def _(h, a, scale, shift, gate, weight, eps, kind):
        return torch.empty_like(h)

    @torch.library.custom_op(f"{lib}::gated_residual", mutates_args=("h",))
    def gated_residual(h: torch.Tensor, a: torch.Tensor, gate: torch.Tensor) -> None:
        h.copy_(h.float() + a.float() * gate.float())

    @torch.library.custom_op(f"{lib}::rope", mutates_args=())
    def rope_op(q: torch.Tensor, k: torch.Tensor | None, cos: torch.Tensor | None, sin: torch.Tensor | None,
                positions: torch.Tensor | None, freqs: torch.Tensor | None, axis: torch.Tensor | None,
                convention: str, rotary_dim: int, layout: str, head_dim: int) -> list[torch.Tensor]:
        args = (cos, sin, positions, freqs, axis, convention, rotary_dim, layout, head_dim)
        qo = _rope_one(q, *args)
        return [qo] if k is None else [qo, _rope_one(k, *args)]

    @rope_op.register_fake
    def _(q, k, cos, sin, positions, freqs, axis, convention, rotary_dim, layout, head_dim):
        return [torch.empty_like(q)] if k is None else [torch.empty_like(q), torch.empty_like(k)]

    @torch.library.custom_op(f"{lib}::rms_norm_rope", mutates_args=())
    def rms_norm_rope_op(x: torch.Tensor, weight: torch.Tensor | None, eps: float, mode: str,
                         cos: torch.Tensor | None, sin: torch.Tensor | None, positions: torch.Tensor | None,
                         freqs: torch.Tensor | None, axis: torch.Tensor | None, convention: str, rotary_dim: int,
                         head_dim: int) -> torch.Tensor:
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
        if weight is not None:
            y = y * weight.float()
        return _rope_one(y, cos, sin, positions, freqs, axis, convention, rotary_dim, "bshd", head_dim).to(x.dtype)

    @rms_norm_rope_op.register_fake
    def _(x, weight, eps, mode, cos, sin, positions, freqs, axis, convention, rotary_dim, head_dim):
        return torch.empty_like(x)

    @torch.library.custom_op(f"{lib}::glu", mutates_args=())
    def glu(gate: torch.Tensor, up: torch.Tensor, act: str) -> torch.Tensor:
        g = gate.float()
        if act == "silu":
            a = torch.nn.functional.silu(g)
        else:
            a = torch.nn.functional.gelu(g, approximate="tanh" if act == "gelu_tanh" else "none")
        return (a * up.float()).to(gate.dtype)

    @glu.register_fake
    def _(gate, up, act):
        return torch.empty_like(gate)

    @torch.library.custom_op(f"{lib}::gelu", mutates_args=())
    def gelu(x: torch.Tensor, approximate: str) -> torch.Tensor:
        return torch.nn.functional.gelu(x.float(), approximate=approximate).to(x.dtype)

    @gelu.register_fake
    def _(x, approximate):
        return torch.empty_like(x)

    @torch.library.custom_op(f"{lib}::silu", mutates_args=())
    def silu(x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.silu(x.float()).to(x.dtype)

    @silu.register_fake
    def _(x):
        return torch.empty_like(x)

    def glu_packed(x, act="gelu_tanh", gate_first=False):
        d = x.shape[-1] // 2
        first, second = x[..., :d].contiguous(), x[..., d:].contiguous()
        return glu(first, second, act) if gate_first else glu(second, first, act)

    m = types.ModuleType("kfuse.ops")
    m.rms_norm = lambda x, weight=None, eps=1e-6, mode="llama", offset=0.0: rms_norm(x, weight, eps, mode, offset)
    m.add_rms_norm = (lambda x, residual, weight=None, eps=1e-6, mode="llama", offset=0.0:
                      add_rms_norm(x, residual, weight, eps, mode, offset))
    m.ada_norm = (lambda x, scale, shift=None, weight=None, eps=1e-6, kind="rms":
                  ada_norm(x, scale, shift, weight, eps, kind))
    m.add_ada_norm = (lambda h, a, scale, shift=None, gate=None, weight=None, eps=1e-6, kind="rms":
                      add_ada_norm(h, a, scale, shift, gate, weight, eps, kind))
    m.gated_residual = gated_residual

    def rope(q, k=None, cos=None, sin=None, positions=None, freqs=None, axis=None, convention="half",
             rotary_dim=0, layout="bshd", head_dim=None):
        out = rope_op(q, k, cos, sin, positions, freqs, axis, convention, rotary_dim, layout, head_dim or 0)
        return (out[0], out[1] if k is not None else None)

    def rms_norm_rope(x, weight=None, eps=1e-5, mode="none", cos=None, sin=None, positions=None, freqs=None,
                      axis=None, convention="interleaved", rotary_dim=0, head_dim=None):
        return rms_norm_rope_op(x, weight, eps, mode, cos, sin, positions, freqs, axis, convention, rotary_dim,
                                head_dim or 0)

    m.rope = rope
    m.rms_norm_rope = rms_norm_rope
    m.glu = lambda gate, up, act="silu": glu(gate, up, act)
    m.gelu = lambda x, approximate="tanh": gelu(x, approximate)
    m.silu = silu
    m.glu_packed = glu_packed
    return m
