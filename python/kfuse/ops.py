"""kfuse.ops - kfuse kernels as PyTorch ops (torch.library custom ops in namespace "kfuse").

All functions take and return torch tensors; each is backed by a torch.library custom op in namespace "kfuse" with a fake (meta) implementation; CPU tensors run on the library's CPU backend, CUDA tensors on its GPU backend on the tensor's device and the current stream:
  rms_norm(x, weight=None, eps=1e-6, mode="llama", offset=None) -> y           # mode: "llama" | "gemma" | "none"; offset None = 1.0 for gemma, else 0.0
  add_rms_norm(x, residual, weight=None, eps=1e-6, mode="llama", offset=None) -> y   # mutates residual in place: residual = x + residual
  layer_norm(x, weight=None, bias=None, eps=1e-5) -> y
  ada_norm(x, scale, shift=None, weight=None, eps=1e-6, kind="rms") -> y     # kind "rms" | "layer"; scale/shift broadcastable [B,1,D] (any strides) or [B,S,D]
  add_ada_norm(h, a, scale, shift=None, gate=None, weight=None, eps=1e-6, kind="rms") -> y   # mutates h: h = h + a*gate
  gated_residual(h, a, gate) -> None                                          # mutates h: h = h + a*gate
  rope(q, k=None, cos=None, sin=None, positions=None, freqs=None, axis=None, convention="half", rotary_dim=0, layout="bshd", head_dim=None) -> (q_out, k_out or None)
        # layout "bshd" ([B,S,H,Dh]) or "bhsd" (HF's [B,H,S,Dh]); a 3-D [B,S,H*Dh] input is split into heads of head_dim (default: the whole last dim is one head)
        # table form: cos/sin [S,r] or [B,S,r]; positions form: positions [B,S,n_axes] or [S,n_axes] f32, freqs [r/2] f32, axis [r/2] int32 or None
  rms_norm_rope(x, weight=None, eps=1e-5, mode="none", cos=None, sin=None, positions=None, freqs=None, axis=None, convention="interleaved", rotary_dim=0, head_dim=None) -> y
        # x [B,S,D] (norm over all D of a token, rope per head of head_dim, default one head of D)
  glu(gate, up, act="silu") -> y                   # act "silu" | "gelu_tanh" | "gelu_erf"
  glu_packed(x, act="gelu_tanh", gate_first=False) -> y   # x [..., 2I] -> [..., I]
  gelu(x, approximate="tanh") -> y                 # "tanh" | "none"
  silu(x) -> y
  softmax(x, scale=1.0) -> y
kfuse.ops raises kfuse.KfuseError (subclass of RuntimeError) with the library's message (kf_last_error) on any non-OK status. Inputs that the C API cannot take as views (inner stride != 1, more than 4 dims after merging) are made contiguous by the op; all others are passed as strided views without copies.
"""
# Implementation notes.
# - Each public function below is a thin wrapper over a torch.library custom op
#   ("kfuse::<name>") with a fake implementation, so the ops trace under
#   torch.compile(fullgraph=True) and replay under CUDA graphs: the real
#   implementation allocates only through torch and never synchronizes.
# - Outputs are new contiguous tensors on the input's device. Mutated inputs
#   (add_rms_norm's residual, add_ada_norm's and gated_residual's h) are written
#   in place through their own strides.
# - Views: the C API takes up to 4 dims with the last stride 1. Leading dims are
#   merged (in every tensor of the call at once) when there are more than 4;
#   a tensor whose last stride is not 1, or whose dims cannot be merged, is copied
#   with .contiguous() (and, when it is mutated, copied back after the call).
#   Conditioning (scale, shift, gate) is expanded to x's shape: broadcast dims get
#   stride 0, which the library reads as a broadcast, without a copy.
from typing import Optional

import torch

from . import _lib
from ._lib import KfuseError

__all__ = ["rms_norm", "add_rms_norm", "layer_norm", "ada_norm", "add_ada_norm",
           "gated_residual", "rope", "rms_norm_rope", "glu", "glu_packed", "gelu", "silu",
           "softmax", "KfuseError"]

_RMS_MODES = {"llama": 0, "gemma": 1, "none": 2}
_NORM_KINDS = {"rms": 0, "layer": 1}
_ACTS = {"silu": 0, "gelu_tanh": 1, "gelu_erf": 2}
_GELU_APPROX = {"none": 0, "tanh": 1}
_CONVENTIONS = {"half": 0, "interleaved": 1}
_LAYOUTS = ("bshd", "bhsd")


# ---- helpers -----------------------------------------------------------------

def _enum(table, value, what):
    if value not in table:
        raise KfuseError("kfuse: %s must be one of %s, got %r" % (what, ", ".join(table), value),
                         2)
    return table[value]


def _check_devices(op, ref, *tensors):
    for t in tensors:
        if t is not None and t.device != ref.device:
            raise KfuseError("kfuse %s: all tensors must be on %s, got one on %s"
                             % (op, ref.device, t.device), 2)


def _inner_ok(t):
    return t.dim() >= 1 and (t.stride(-1) == 1 or t.shape[-1] == 1)


def _geometry(shape, strides):
    """Merge leading dims (never the last) of one shape seen through several stride lists
    until at most 4 dims remain. Returns (shape, strides) or None if that is impossible."""
    shape = list(shape)
    strides = [list(s) for s in strides]
    # size-1 leading dims carry no data: drop them first
    i = 0
    while len(shape) > _lib.KF_MAX_DIMS and i < len(shape) - 1:
        if shape[i] == 1:
            del shape[i]
            for s in strides:
                del s[i]
        else:
            i += 1
    i = 0
    while len(shape) > _lib.KF_MAX_DIMS and i < len(shape) - 2:
        n = shape[i + 1]
        if all(s[i] == s[i + 1] * n for s in strides):
            shape[i] *= n
            del shape[i + 1]
            for s in strides:
                s[i] = s[i + 1]
                del s[i + 1]
        else:
            i += 1
    if len(shape) > _lib.KF_MAX_DIMS:
        return None
    if shape[-1] == 1:
        for s in strides:
            s[-1] = 1
    return shape, strides


def _group_views(tensors, mutated=()):
    """KfTensor views of same-shaped tensors (None entries pass through as None).
    Returns (views, copy_back): copy_back is a list of (original, working copy) to copy
    into the originals after the call (only for indices in `mutated`)."""
    idx = [i for i, t in enumerate(tensors) if t is not None]
    work = list(tensors)
    copy_back = []
    for i in idx:
        if not _inner_ok(work[i]):
            work[i] = work[i].contiguous()
    geo = _geometry(work[idx[0]].shape, [work[i].stride() for i in idx])
    if geo is None:
        for i in idx:
            work[i] = work[i].contiguous()
        geo = _geometry(work[idx[0]].shape, [work[i].stride() for i in idx])
    shape, strides = geo
    views = [None] * len(tensors)
    for j, i in enumerate(idx):
        views[i] = _lib.tensor_view(work[i], shape, strides[j])
        if work[i] is not tensors[i]:
            if i not in mutated:
                continue
            copy_back.append((tensors[i], work[i]))
    return views, copy_back, work


def _single_view(t):
    """(view, tensor) of a standalone tensor (weight, bias, table, freqs); copied only if
    its last stride is not 1 or its dims cannot be merged down to 4."""
    if t is None:
        return None
    if not _inner_ok(t):
        t = t.contiguous()
    geo = _geometry(t.shape, [t.stride()])
    if geo is None:
        t = t.contiguous()
        geo = _geometry(t.shape, [t.stride()])
    return _lib.tensor_view(t, geo[0], geo[1][0]), t


def _expand_cond(op, name, c, x):
    """Conditioning tensor c broadcast to x's shape (stride 0 on broadcast dims)."""
    if c is None:
        return None
    try:
        return c.expand(x.shape)
    except RuntimeError:
        raise KfuseError("kfuse %s: %s of shape %s does not broadcast to x's shape %s"
                         % (op, name, list(c.shape), list(x.shape)), 4) from None


def _call(name, device, *args):
    """Run kf_<name>(ctx, *args) on the context of `device` (on torch's current stream
    there); raise KfuseError on failure."""
    ctx = _lib.context(device)
    fn = _lib.function(name)
    if device.type == "cuda" and device.index is not None \
            and device.index != torch.cuda.current_device():
        with torch.cuda.device(device.index):      # the library launches on the current device
            status = fn(ctx, *args)
    else:
        status = fn(ctx, *args)
    if status:
        _lib.check(ctx, status, name)


def _finish(copy_back):
    for orig, work in copy_back:
        orig.copy_(work)


def _new(x, shape=None):
    return torch.empty(x.shape if shape is None else shape, dtype=x.dtype, device=x.device)


def _weight(t):
    v = _single_view(t)
    return None if v is None else v[0]


def _check_x(op, x):
    if x.dim() < 1:
        raise KfuseError("kfuse %s: x must have at least 1 dim, got a scalar" % op, 4)


def _resolve_offset(mode, offset):
    if offset is None:
        return 1.0 if mode == "gemma" else 0.0
    return float(offset)



# ---- op registration and the eager fast path -----------------------------------------------
# In plain eager calls the wrappers call the implementation directly: the custom-op
# dispatcher costs tens of microseconds per call in Python, more than a decode-shape kernel.
# Under torch.compile / export tracing, or with tensor subclasses (FakeTensor, functional
# tensors), they go through the registered op.
_IMPLS = {}


def _custom_op(name, mutates_args=()):
    def wrap(fn):
        _IMPLS[name] = fn
        return torch.library.custom_op("kfuse::" + name, mutates_args=mutates_args)(fn)
    return wrap


def _pick(op, name, x):
    if type(x) is torch.Tensor and not torch.compiler.is_compiling():
        return _IMPLS[name]
    return op


# The schema names the RMS mode `rms_mode`: `mode` is a parameter of torch's
# auto_functionalized wrapper of mutating ops and may not be an op argument name.

# ---- norm family -----------------------------------------------------------------

@_custom_op("rms_norm", mutates_args=())
def _rms_norm(x: torch.Tensor, weight: Optional[torch.Tensor], eps: float, rms_mode: str,
              offset: float) -> torch.Tensor:
    m = _enum(_RMS_MODES, rms_mode, "rms_norm mode")
    _check_x("rms_norm", x)
    _check_devices("rms_norm", x, weight)
    y = _new(x)
    if x.numel() == 0:
        return y
    (xv, yv), _, _ = _group_views([x, y])
    _call("rms_norm", x.device, xv, _weight(weight), eps, m, offset, yv)
    return y


@_rms_norm.register_fake
def _(x, weight, eps, rms_mode, offset):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def rms_norm(x, weight=None, eps=1e-6, mode="llama", offset=None):
    """RMSNorm over the last dim. mode "llama" | "gemma" | "none"; offset defaults to
    1.0 for "gemma" (HF GemmaRMSNorm's 1 + weight) and 0.0 otherwise."""
    return _pick(_rms_norm, "rms_norm", x)(x, weight, float(eps), mode,
                                           _resolve_offset(mode, offset))


@_custom_op("add_rms_norm", mutates_args=("residual",))
def _add_rms_norm(x: torch.Tensor, residual: torch.Tensor, weight: Optional[torch.Tensor],
                  eps: float, rms_mode: str, offset: float) -> torch.Tensor:
    m = _enum(_RMS_MODES, rms_mode, "add_rms_norm mode")
    _check_x("add_rms_norm", x)
    _check_devices("add_rms_norm", x, residual, weight)
    y = _new(x)
    if x.numel() == 0:
        return y
    if residual.shape != x.shape:
        raise KfuseError("kfuse add_rms_norm: residual has shape %s but x has %s"
                         % (list(residual.shape), list(x.shape)), 4)
    (xv, rv, yv), back, _ = _group_views([x, residual, y], mutated=(1,))
    _call("add_rms_norm", x.device, xv, rv, _weight(weight), eps, m, offset, yv)
    _finish(back)
    return y


@_add_rms_norm.register_fake
def _(x, residual, weight, eps, rms_mode, offset):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def add_rms_norm(x, residual, weight=None, eps=1e-6, mode="llama", offset=None):
    """residual = x + residual (in place); returns rms_norm(residual)."""
    return _pick(_add_rms_norm, "add_rms_norm", x)(x, residual, weight, float(eps), mode,
                                                   _resolve_offset(mode, offset))


@_custom_op("layer_norm", mutates_args=())
def _layer_norm(x: torch.Tensor, weight: Optional[torch.Tensor], bias: Optional[torch.Tensor],
                eps: float) -> torch.Tensor:
    _check_x("layer_norm", x)
    _check_devices("layer_norm", x, weight, bias)
    y = _new(x)
    if x.numel() == 0:
        return y
    (xv, yv), _, _ = _group_views([x, y])
    _call("layer_norm", x.device, xv, _weight(weight), _weight(bias), eps, yv)
    return y


@_layer_norm.register_fake
def _(x, weight, bias, eps):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def layer_norm(x, weight=None, bias=None, eps=1e-5):
    """F.layer_norm over the last dim; weight and bias optional."""
    return _pick(_layer_norm, "layer_norm", x)(x, weight, bias, float(eps))


@_custom_op("ada_norm", mutates_args=())
def _ada_norm(x: torch.Tensor, scale: torch.Tensor, shift: Optional[torch.Tensor],
              weight: Optional[torch.Tensor], eps: float, kind: str) -> torch.Tensor:
    k = _enum(_NORM_KINDS, kind, "ada_norm kind")
    _check_x("ada_norm", x)
    _check_devices("ada_norm", x, scale, shift, weight)
    y = _new(x)
    if x.numel() == 0:
        return y
    sc = _expand_cond("ada_norm", "scale", scale, x)
    sh = _expand_cond("ada_norm", "shift", shift, x)
    (xv, scv, shv, yv), _, _ = _group_views([x, sc, sh, y])
    _call("ada_norm", x.device, xv, scv, shv, _weight(weight), eps, k, yv)
    return y


@_ada_norm.register_fake
def _(x, scale, shift, weight, eps, kind):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def ada_norm(x, scale, shift=None, weight=None, eps=1e-6, kind="rms"):
    """AdaLN: norm(x) [* weight] * (1 + scale) [+ shift]; kind "rms" | "layer";
    scale/shift per token [B,S,D] or broadcast [B,1,D] with any strides."""
    return _pick(_ada_norm, "ada_norm", x)(x, scale, shift, weight, float(eps), kind)


@_custom_op("add_ada_norm", mutates_args=("h",))
def _add_ada_norm(h: torch.Tensor, a: torch.Tensor, scale: torch.Tensor,
                  shift: Optional[torch.Tensor], gate: Optional[torch.Tensor],
                  weight: Optional[torch.Tensor], eps: float, kind: str) -> torch.Tensor:
    k = _enum(_NORM_KINDS, kind, "add_ada_norm kind")
    _check_x("add_ada_norm", h)
    _check_devices("add_ada_norm", h, a, scale, shift, gate, weight)
    y = _new(h)
    if h.numel() == 0:
        return y
    if a.shape != h.shape:
        raise KfuseError("kfuse add_ada_norm: a has shape %s but h has %s"
                         % (list(a.shape), list(h.shape)), 4)
    g = _expand_cond("add_ada_norm", "gate", gate, h)
    sc = _expand_cond("add_ada_norm", "scale", scale, h)
    sh = _expand_cond("add_ada_norm", "shift", shift, h)
    (hv, av, gv, scv, shv, yv), back, _ = _group_views([h, a, g, sc, sh, y], mutated=(0,))
    _call("add_ada_norm", h.device, hv, av, gv, scv, shv, _weight(weight), eps, k, yv)
    _finish(back)
    return y


@_add_ada_norm.register_fake
def _(h, a, scale, shift, gate, weight, eps, kind):
    return torch.empty_like(h, memory_format=torch.contiguous_format)


def add_ada_norm(h, a, scale, shift=None, gate=None, weight=None, eps=1e-6, kind="rms"):
    """h = h + a [* gate] (in place); returns ada_norm(h, scale, shift, weight, eps, kind)."""
    return _pick(_add_ada_norm, "add_ada_norm", h)(h, a, scale, shift, gate, weight,
                                                   float(eps), kind)


@_custom_op("gated_residual", mutates_args=("h",))
def _gated_residual(h: torch.Tensor, a: torch.Tensor, gate: torch.Tensor) -> None:
    _check_x("gated_residual", h)
    _check_devices("gated_residual", h, a, gate)
    if h.numel() == 0:
        return
    if a.shape != h.shape:
        raise KfuseError("kfuse gated_residual: a has shape %s but h has %s"
                         % (list(a.shape), list(h.shape)), 4)
    g = _expand_cond("gated_residual", "gate", gate, h)
    (hv, av, gv), back, _ = _group_views([h, a, g], mutated=(0,))
    _call("gated_residual", h.device, hv, av, gv)
    _finish(back)


@_gated_residual.register_fake
def _(h, a, gate):
    return None


def gated_residual(h, a, gate):
    """h = h + a * gate, in place; gate per token or broadcast per batch. Returns None."""
    _pick(_gated_residual, "gated_residual", h)(h, a, gate)


# ---- rotary embeddings ---------------------------------------------------------

def _heads_view(op, t, layout, head_dim):
    """t as a [B, S, H, Dh] view (no copy): 4-D in `layout`, or [B, S, H*Dh] / [S, H*Dh]
    split into heads of head_dim (default: one head)."""
    if t.dim() == 4:
        if layout == "bhsd":
            return t.permute(0, 2, 1, 3)
        return t
    if t.dim() == 2:
        t = t.unsqueeze(0)
    if t.dim() != 3:
        raise KfuseError("kfuse %s: expected a 2-D, 3-D or 4-D tensor, got %d dims"
                         % (op, t.dim()), 4)
    d = t.shape[-1]
    hd = d if head_dim <= 0 else head_dim
    if d % hd != 0:
        raise KfuseError("kfuse %s: the last dim %d is not a multiple of head_dim %d"
                         % (op, d, hd), 4)
    if t.stride(-1) != 1 and d > 1:
        t = t.contiguous()
    return t.unflatten(-1, (d // hd, hd))


def _table_view(t, layout):
    """cos/sin/positions: [S, r] or [B, S, r]; a 4-D table with a size-1 head dim
    ([B, 1, S, r] for bhsd as HF unsqueezes it, [B, S, 1, r] for bshd) is squeezed."""
    if t is None:
        return None
    if t.dim() == 4:
        hdim = 1 if layout == "bhsd" else 2
        if t.shape[hdim] == 1:
            t = t.squeeze(hdim)
    return t


def _rope_args(op, x4, cos, sin, positions, freqs, axis, convention, rotary_dim, layout):
    """Build a KfRopeArgs (and keep the tensors it points into alive in `keep`)."""
    conv = _enum(_CONVENTIONS, convention, op + " convention")
    if layout not in _LAYOUTS:
        raise KfuseError("kfuse %s: layout must be bshd or bhsd, got %r" % (op, layout), 2)
    _check_devices(op, x4, cos, sin, positions, freqs, axis)
    r = int(rotary_dim)
    if r == 0:
        if cos is not None:
            r = cos.shape[-1]
        elif freqs is not None:
            r = 2 * freqs.numel()
    args = _lib.KfRopeArgs()
    args.convention = conv
    args.rotary_dim = r
    keep = []
    for name in ("cos", "sin", "positions", "freqs", "axis"):
        t = {"cos": cos, "sin": sin, "positions": positions, "freqs": freqs, "axis": axis}[name]
        if name in ("cos", "sin", "positions"):
            t = _table_view(t, layout)
        v = _single_view(t)
        if v is not None:
            keep.append(v)
            setattr(args, name, _lib.ctypes.pointer(v[0]))
    return args, keep


@_custom_op("rope", mutates_args=())
def _rope(q: torch.Tensor, cos: Optional[torch.Tensor], sin: Optional[torch.Tensor],
          positions: Optional[torch.Tensor], freqs: Optional[torch.Tensor],
          axis: Optional[torch.Tensor], convention: str, rotary_dim: int, layout: str,
          head_dim: int) -> torch.Tensor:
    q_out = _new(q)
    if q.numel() == 0:
        return q_out
    q4 = _heads_view("rope", q, layout, head_dim)
    qo4 = _heads_view("rope", q_out, layout, head_dim)
    if not _inner_ok(q4):
        q4 = q4.contiguous()
    args, keep = _rope_args("rope", q4, cos, sin, positions, freqs, axis, convention,
                            rotary_dim, layout)
    _call("rope", q.device, _lib.tensor_view(q4), None, _lib.tensor_view(qo4), None, args)
    return q_out


@_rope.register_fake
def _(q, cos, sin, positions, freqs, axis, convention, rotary_dim, layout, head_dim):
    return torch.empty_like(q, memory_format=torch.contiguous_format)


@_custom_op("rope_qk", mutates_args=())
def _rope_qk(q: torch.Tensor, k: torch.Tensor, cos: Optional[torch.Tensor],
             sin: Optional[torch.Tensor], positions: Optional[torch.Tensor],
             freqs: Optional[torch.Tensor], axis: Optional[torch.Tensor], convention: str,
             rotary_dim: int, layout: str, head_dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    q_out = _new(q)
    k_out = _new(k)
    if q.numel() == 0 and k.numel() == 0:
        return q_out, k_out
    _check_devices("rope", q, k)
    q4 = _heads_view("rope", q, layout, head_dim)
    k4 = _heads_view("rope", k, layout, head_dim)
    qo4 = _heads_view("rope", q_out, layout, head_dim)
    ko4 = _heads_view("rope", k_out, layout, head_dim)
    if not _inner_ok(q4):
        q4 = q4.contiguous()
    if not _inner_ok(k4):
        k4 = k4.contiguous()
    args, keep = _rope_args("rope", q4, cos, sin, positions, freqs, axis, convention,
                            rotary_dim, layout)
    _call("rope", q.device, _lib.tensor_view(q4), _lib.tensor_view(k4),
          _lib.tensor_view(qo4), _lib.tensor_view(ko4), args)
    return q_out, k_out


@_rope_qk.register_fake
def _(q, k, cos, sin, positions, freqs, axis, convention, rotary_dim, layout, head_dim):
    return (torch.empty_like(q, memory_format=torch.contiguous_format),
            torch.empty_like(k, memory_format=torch.contiguous_format))


def rope(q, k=None, cos=None, sin=None, positions=None, freqs=None, axis=None,
         convention="half", rotary_dim=0, layout="bshd", head_dim=None):
    """Rotary embedding of q (and k). Returns (q_out, k_out or None).
    Table form: cos/sin [S, r] or [B, S, r]. Positions form: positions [B, S, n_axes] or
    [S, n_axes] f32, freqs [r/2] f32, axis [r/2] int32 or None. rotary_dim 0: r from the
    table (or 2 * len(freqs))."""
    hd = 0 if head_dim is None else int(head_dim)
    if k is None:
        f = _pick(_rope, "rope", q)
        return f(q, cos, sin, positions, freqs, axis, convention, int(rotary_dim), layout,
                 hd), None
    f = _pick(_rope_qk, "rope_qk", q)
    return f(q, k, cos, sin, positions, freqs, axis, convention, int(rotary_dim), layout, hd)


@_custom_op("rms_norm_rope", mutates_args=())
def _rms_norm_rope(x: torch.Tensor, weight: Optional[torch.Tensor], eps: float, rms_mode: str,
                   offset: float, cos: Optional[torch.Tensor], sin: Optional[torch.Tensor],
                   positions: Optional[torch.Tensor], freqs: Optional[torch.Tensor],
                   axis: Optional[torch.Tensor], convention: str, rotary_dim: int,
                   head_dim: int) -> torch.Tensor:
    m = _enum(_RMS_MODES, rms_mode, "rms_norm_rope mode")
    _check_devices("rms_norm_rope", x, weight)
    y = _new(x)
    if x.numel() == 0:
        return y
    x4 = _heads_view("rms_norm_rope", x, "bshd", head_dim)
    y4 = _heads_view("rms_norm_rope", y, "bshd", head_dim)
    if x4.stride(-1) != 1 or x4.stride(-2) != x4.shape[-1]:
        x4 = x4.contiguous()
    args, keep = _rope_args("rms_norm_rope", x4, cos, sin, positions, freqs, axis, convention,
                            rotary_dim, "bshd")
    _call("rms_norm_rope", x.device, _lib.tensor_view(x4), _weight(weight), eps, m, offset,
          args, _lib.tensor_view(y4))
    return y


@_rms_norm_rope.register_fake
def _(x, weight, eps, rms_mode, offset, cos, sin, positions, freqs, axis, convention, rotary_dim,
      head_dim):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def rms_norm_rope(x, weight=None, eps=1e-5, mode="none", cos=None, sin=None, positions=None,
                  freqs=None, axis=None, convention="interleaved", rotary_dim=0, head_dim=None,
                  offset=None):
    """RMSNorm over all of a token's D channels, then rope per head of head_dim (default one
    head of D), one pass. x [B, S, D] (or [B, S, H, Dh] with contiguous heads)."""
    f = _pick(_rms_norm_rope, "rms_norm_rope", x)
    return f(x, weight, float(eps), mode, _resolve_offset(mode, offset), cos, sin, positions,
             freqs, axis, convention, int(rotary_dim), 0 if head_dim is None else int(head_dim))


# ---- activations ---------------------------------------------------------------

@_custom_op("glu", mutates_args=())
def _glu(gate: torch.Tensor, up: torch.Tensor, act: str) -> torch.Tensor:
    a = _enum(_ACTS, act, "glu act")
    _check_x("glu", gate)
    _check_devices("glu", gate, up)
    if up.shape != gate.shape:
        raise KfuseError("kfuse glu: up has shape %s but gate has %s"
                         % (list(up.shape), list(gate.shape)), 4)
    y = _new(gate)
    if gate.numel() == 0:
        return y
    (gv, uv, yv), _, _ = _group_views([gate, up, y])
    _call("glu", gate.device, gv, uv, a, 0, yv)
    return y


@_glu.register_fake
def _(gate, up, act):
    return torch.empty_like(gate, memory_format=torch.contiguous_format)


def glu(gate, up, act="silu"):
    """act(gate) * up; act "silu" | "gelu_tanh" | "gelu_erf"."""
    return _pick(_glu, "glu", gate)(gate, up, act)


@_custom_op("glu_packed", mutates_args=())
def _glu_packed(x: torch.Tensor, act: str, gate_first: bool) -> torch.Tensor:
    a = _enum(_ACTS, act, "glu_packed act")
    _check_x("glu_packed", x)
    y = _new(x, tuple(x.shape[:-1]) + (x.shape[-1] // 2,))
    if x.numel() == 0:
        return y
    # x [..., 2I] and y [..., I] share their leading dims: merge those through y's shape.
    if not _inner_ok(x):
        x = x.contiguous()
    geo = _geometry(y.shape, [x.stride(), y.stride()])
    if geo is None:
        x = x.contiguous()
        geo = _geometry(y.shape, [x.stride(), y.stride()])
    shape, (xs, ys) = geo
    xv = _lib.tensor_view(x, shape[:-1] + [x.shape[-1]], xs[:-1] + [1])
    yv = _lib.tensor_view(y, shape, ys)
    _call("glu", x.device, xv, None, a, 1 if gate_first else 0, yv)
    return y


@_glu_packed.register_fake
def _(x, act, gate_first):
    return x.new_empty(tuple(x.shape[:-1]) + (x.shape[-1] // 2,))


def glu_packed(x, act="gelu_tanh", gate_first=False):
    """Packed GLU: x [..., 2I] -> [..., I]. gate_first=False: the second half is the gate
    (diffusers GEGLU/SwiGLU); True: the first half is."""
    return _pick(_glu_packed, "glu_packed", x)(x, act, bool(gate_first))


@_custom_op("gelu", mutates_args=())
def _gelu(x: torch.Tensor, approximate: str) -> torch.Tensor:
    ap = _enum(_GELU_APPROX, approximate, "gelu approximate")
    _check_x("gelu", x)
    y = _new(x)
    if x.numel() == 0:
        return y
    (xv, yv), _, _ = _group_views([x, y])
    _call("gelu", x.device, xv, ap, yv)
    return y


@_gelu.register_fake
def _(x, approximate):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def gelu(x, approximate="tanh"):
    """Elementwise GELU; approximate "tanh" | "none" (erf), as F.gelu."""
    return _pick(_gelu, "gelu", x)(x, approximate)


@_custom_op("silu", mutates_args=())
def _silu(x: torch.Tensor) -> torch.Tensor:
    _check_x("silu", x)
    y = _new(x)
    if x.numel() == 0:
        return y
    (xv, yv), _, _ = _group_views([x, y])
    _call("silu", x.device, xv, yv)
    return y


@_silu.register_fake
def _(x):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def silu(x):
    """Elementwise SiLU: x * sigmoid(x)."""
    return _pick(_silu, "silu", x)(x)


@_custom_op("softmax", mutates_args=())
def _softmax(x: torch.Tensor, scale: float) -> torch.Tensor:
    _check_x("softmax", x)
    y = _new(x)
    if x.numel() == 0:
        return y
    (xv, yv), _, _ = _group_views([x, y])
    _call("softmax", x.device, xv, scale, yv)
    return y


@_softmax.register_fake
def _(x, scale):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def softmax(x, scale=1.0):
    """Row-wise softmax(scale * x) over the last dim, computed in f32."""
    return _pick(_softmax, "softmax", x)(x, float(scale))
