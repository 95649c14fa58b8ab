"""test_ops.py - kfuse.ops on CPU tensors against float64 torch references.

Every op x dtype (f32, f16, bf16) on random data, with the docs/ops.md tolerances;
strided and broadcast inputs (diffusers' [B, 1, D] unbind views with batch stride 6*D,
row-strided slices, > 4 dims, transposed inputs); the in-place mutations; KfuseError with
the library's message; torch.library.opcheck on each op; torch.compile(fullgraph=True);
torch.vmap, torch.func.grad and jvp (at the end).

Run: KFUSE_LIBRARY=build/libkfuse.so PYTHONPATH=python python -m pytest -q python/tests
"""
import math
import os

import pytest
import torch
import torch.nn.functional as F

import kfuse
from kfuse import KfuseError, ops
from kfuse import _lib

try:
    _lib.lib()
except KfuseError as e:          # no libkfuse.so: nothing here can run
    if os.environ.get("KFUSE_LIBRARY"):     # a library was named: not loading it is a failure
        pytest.fail("KFUSE_LIBRARY is set but the library does not load: %s" % e, pytrace=False)
    pytest.skip("libkfuse not loadable: %s" % e, allow_module_level=True)

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# (relative norm bound, atol, rtol) per dtype, docs/ops.md
TOL = {
    torch.float32: (1e-5, 1e-5, 1e-5),
    torch.float16: (2e-3, 1e-3, 2e-3),
    torch.bfloat16: (1e-2, 1e-2, 1.6e-2),
}
SHAPES = [(1, 64), (7, 111), (3, 5, 769), (2, 1)]


def rand(*shape, dtype=torch.float32, scale=1.0):
    return (torch.randn(*shape, dtype=torch.float64) * scale).to(dtype)


def assert_close(out, ref, dtype=None, factor=1.0):
    """||out-ref||/||ref|| and elementwise |out-ref| <= atol + rtol |ref| (ops.md) over ref's
    finite elements; where ref is NaN or +-Inf, out is the same. A ref with no finite element
    is checked by those NaN / Inf positions alone."""
    dtype = dtype or out.dtype
    rel, atol, rtol = TOL[dtype]
    assert out.shape == ref.shape, (out.shape, ref.shape)
    o = out.double()
    r = ref.double()
    assert torch.equal(torch.isnan(o), torch.isnan(r)), "NaN positions differ"
    inf = torch.isinf(r)
    assert torch.equal(o[inf], r[inf]), "Inf positions or signs differ"
    fin = torch.isfinite(r)
    if not fin.any():
        return
    o, r = o[fin], r[fin]
    err = (o - r).norm() / max(r.norm().item(), 1e-30)
    assert err <= rel * factor, "relative error %.3g > %.3g" % (err, rel * factor)
    bad = (o - r).abs() > (atol + rtol * r.abs()) * factor
    assert not bad.any(), "max abs err %.3g" % (o - r).abs().max()


# ---- float64 references of the model code each op reproduces ---------------------------

def ref_rms(x, w, eps, mode, offset=0.0, round_normalized=True):
    """rms_norm's modes (ops.md): llama rounds the normalized value to x's dtype before the
    weight (rms_norm_rope does not: round_normalized=False); gemma multiplies by
    offset + weight; without a weight every mode gives the normalized value."""
    x64 = x.double()
    n = x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + eps)
    if mode == "llama" and round_normalized:
        n = n.to(x.dtype).double()          # HF rounds the normalized value to x's dtype
    if w is None:
        return n
    return n * (offset + w.double() if mode == "gemma" else w.double())


def ref_layer(x, w, b, eps):
    x64 = x.double()
    return F.layer_norm(x64, x64.shape[-1:], None if w is None else w.double(),
                        None if b is None else b.double(), eps)


def ref_ada(x, scale, shift, w, eps, kind):
    n = ref_rms(x, w, eps, "none") if kind == "rms" else ref_layer(x, w, None, eps)
    y = n * (1 + scale.double())
    return y if shift is None else y + shift.double()


def rot_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], -1)


def rot_inter(x):
    x2 = x.unflatten(-1, (-1, 2))
    return torch.stack([-x2[..., 1], x2[..., 0]], -1).flatten(-2)


def ref_rope_bshd(x, cos, sin, convention):
    """x [B, S, H, Dh] f64; cos/sin [B or 1, S, r] f64; rotates the first r channels."""
    r = cos.shape[-1]
    c = cos[:, :, None, :]
    s = sin[:, :, None, :]
    xr = x[..., :r]
    rot = rot_half(xr) if convention == "half" else rot_inter(xr)
    return torch.cat([xr * c + rot * s, x[..., r:]], -1)


def tables_half(B, S, r, theta=10000.0):
    inv = 1.0 / theta ** (torch.arange(0, r, 2, dtype=torch.float64) / r)
    pos = torch.arange(S, dtype=torch.float64)[None].expand(B, S) + torch.arange(B)[:, None]
    ang = pos[..., None] * inv
    emb = torch.cat([ang, ang], -1)
    return emb.cos().float(), emb.sin().float()


def tables_inter(B, S, r):
    ang = torch.rand(B, S, r // 2, dtype=torch.float64) * 50
    emb = ang.repeat_interleave(2, -1)
    return emb.cos().float(), emb.sin().float()


# ---- norm family --------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("mode", ["llama", "gemma", "none"])
@pytest.mark.parametrize("wdtype", ["f32", "same", None])
def test_rms_norm(dtype, shape, mode, wdtype):
    x = rand(*shape, dtype=dtype)
    D = shape[-1]
    w = None if wdtype is None else rand(D, dtype=torch.float32 if wdtype == "f32" else dtype)
    y = ops.rms_norm(x, w, eps=1e-6, mode=mode)
    assert y.dtype == dtype and y.shape == x.shape
    assert_close(y, ref_rms(x, w, 1e-6, mode, offset=1.0 if mode == "gemma" else 0.0))


def test_rms_norm_eps_is_runtime():
    x = rand(4, 32, scale=1e-3)
    for eps in (1e-6, 1e-2, 1.0):
        assert_close(ops.rms_norm(x, None, eps=eps, mode="none"), ref_rms(x, None, eps, "none"))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", ["llama", "none"])
def test_add_rms_norm(dtype, mode):
    x = rand(5, 3, 257, dtype=dtype)
    res = rand(5, 3, 257, dtype=dtype)
    w = rand(257, dtype=dtype)
    new_res = (x.double() + res.double()).to(dtype)
    ref = ref_rms(new_res, w, 1e-5, mode)
    y = ops.add_rms_norm(x, res, w, eps=1e-5, mode=mode)
    assert_close(res, new_res.double())                 # residual written in place
    assert_close(y, ref)


def test_add_rms_norm_strided_residual_is_written_back():
    x = rand(16, 8)
    base = rand(8, 16)
    res = base.t()                                      # inner stride 16: copied, written back
    new_res = x.double() + res.double()
    y = ops.add_rms_norm(x, res, None, eps=1e-6, mode="none")
    assert_close(base.t(), new_res)
    assert_close(y, ref_rms(new_res, None, 1e-6, "none"))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("affine", ["wb", "w", "none"])
def test_layer_norm(dtype, affine):
    x = rand(6, 769, dtype=dtype, scale=3.0) + 2.0
    w = rand(769) if affine != "none" else None
    b = rand(769) if affine == "wb" else None
    assert_close(ops.layer_norm(x, w, b, eps=1e-5), ref_layer(x, w, b, 1e-5))


def cond_views(B, D, dtype, n=6):
    """diffusers' conditioning: temb [B, n*D] -> n views [B, 1, D] with batch stride n*D."""
    temb = rand(B, n * D, dtype=dtype, scale=0.5)
    views = temb.reshape(B, 1, n, D).unbind(2)
    assert views[0].stride() == (n * D, n * D, 1)
    return views


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["rms", "layer"])
@pytest.mark.parametrize("cond", ["per_batch", "per_token", "no_shift"])
def test_ada_norm(dtype, kind, cond):
    B, S, D = 2, 9, 120
    x = rand(B, S, D, dtype=dtype)
    shift, scale = cond_views(B, D, dtype)[:2]
    if cond == "per_token":
        scale = rand(B, S, D, dtype=dtype, scale=0.5)
        shift = rand(B, S, D, dtype=torch.float32, scale=0.5)
    if cond == "no_shift":
        shift = None
    w = rand(D) if kind == "rms" else None
    y = ops.ada_norm(x, scale, shift, w, eps=1e-6, kind=kind)
    assert_close(y, ref_ada(x, scale, shift, w, 1e-6, kind))


def test_ada_norm_broadcast_view_is_not_copied():
    x = rand(2, 5, 64)
    shift, scale = cond_views(2, 64, torch.float32)[:2]
    sc = ops._expand_cond("ada_norm", "scale", scale, x)
    y = torch.empty_like(x)
    views, back, work = ops._group_views([x, sc, y])
    v = _lib.KfTensor.from_buffer_copy(views[1])      # the packed kf_tensor, decoded
    assert v.data == scale.data_ptr() and work[1] is sc
    assert list(v.stride)[:3] == [6 * 64, 0, 1]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["rms", "layer"])
@pytest.mark.parametrize("gated", [True, False])
def test_add_ada_norm(dtype, kind, gated):
    B, S, D = 2, 7, 96
    h = rand(B, S, D, dtype=dtype)
    a = rand(B, S, D, dtype=dtype)
    views = cond_views(B, D, dtype)
    shift, scale, gate = views[0], views[1], views[2] if gated else None
    new_h = h.double() + a.double() * (gate.double() if gated else 1.0)
    new_h_r = new_h.to(dtype)
    ref = ref_ada(new_h_r, scale, shift, None, 1e-6, kind)
    y = ops.add_ada_norm(h, a, scale, shift, gate, None, eps=1e-6, kind=kind)
    assert_close(h, new_h)
    assert_close(y, ref)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("per_token", [False, True])
def test_gated_residual(dtype, per_token):
    B, S, D = 2, 11, 130
    h = rand(B, S, D, dtype=dtype)
    a = rand(B, S, D, dtype=dtype)
    gate = rand(B, S, D, dtype=dtype) if per_token else cond_views(B, D, dtype)[2]
    ref = h.double() + a.double() * gate.double()
    assert ops.gated_residual(h, a, gate) is None
    assert_close(h, ref)


# ---- strided inputs -------------------------------------------------------------------------

def test_row_strided_slice():
    big = rand(10, 300)
    x = big[:, 7:207]                                  # row stride 300, no copy needed
    assert_close(ops.rms_norm(x, None, mode="none"), ref_rms(x, None, 1e-6, "none"))
    assert_close(ops.softmax(x), torch.softmax(x.double(), -1))


def test_more_than_four_dims():
    x = rand(2, 3, 2, 2, 5, 33)
    assert_close(ops.layer_norm(x), ref_layer(x, None, None, 1e-5))
    y = rand(2, 3, 4, 2, 5, 33)[:, :, ::2]             # 6-D with a gap: merged where possible
    assert_close(ops.silu(y), F.silu(y.double()))


def test_expanded_inputs_are_read_as_they_are():
    """An input the op only reads may be expanded (stride 0): rows repeat; a mutated one may not."""
    x = rand(1, 5, 64).expand(3, 5, 64)
    w = rand(64)
    assert_close(ops.rms_norm(x, w, 1e-6, "none"), ref_rms(x, w, 1e-6, "none"))
    assert_close(ops.layer_norm(x, w, None, 1e-5), ref_layer(x, w, None, 1e-5))
    assert_close(ops.softmax(x), torch.softmax(x.double(), -1))
    r = rand(3, 5, 64)
    r0 = r.clone()
    ops.add_rms_norm(x, r, w, 1e-6, "none")
    assert_close(r, r0.double() + x.double())
    up = rand(3, 1, 64).expand(3, 5, 64)
    assert_close(ops.glu(x, up, "silu"), F.silu(x.double()) * up.double())
    with pytest.raises(KfuseError) as e:                # residual is written: not expandable
        ops.add_rms_norm(rand(3, 5, 64), rand(1, 5, 64).expand(3, 5, 64), w, 1e-6, "none")
    assert "stride 0" in str(e.value)


def test_transposed_input_is_copied():
    x = rand(33, 12).t()
    assert_close(ops.gelu(x, "none"), F.gelu(x.double()))


def test_empty_rows():
    x = torch.empty(0, 64)
    assert ops.rms_norm(x).shape == (0, 64)


_EMPTY_X = torch.empty(0, 16)
# (name, call): a call on an empty x with one argument that no non-empty x would pass with
_EMPTY_BAD = [
    ("add_rms_norm residual", lambda x: ops.add_rms_norm(x, rand(5, 3))),
    ("add_rms_norm weight", lambda x: ops.add_rms_norm(x, x.clone(), rand(3))),
    ("rms_norm weight", lambda x: ops.rms_norm(x, rand(3))),
    ("rms_norm 2-D weight", lambda x: ops.rms_norm(x, rand(1, 16))),
    ("ada_norm scale", lambda x: ops.ada_norm(x, rand(3, 3))),
    ("ada_norm shift", lambda x: ops.ada_norm(x, rand(16), rand(2, 3))),
    ("ada_norm weight", lambda x: ops.ada_norm(x, rand(1, 16), None, rand(3))),
    ("add_ada_norm a", lambda x: ops.add_ada_norm(x, rand(2, 16), rand(16))),
    ("add_ada_norm gate", lambda x: ops.add_ada_norm(x, x.clone(), rand(16), gate=rand(3, 16))),
    ("add_ada_norm weight", lambda x: ops.add_ada_norm(x, x.clone(), rand(16), weight=rand(5))),
    ("gated_residual a", lambda x: ops.gated_residual(x, rand(7, 2), rand(16))),
    ("gated_residual gate", lambda x: ops.gated_residual(x, x.clone(), rand(9))),
    ("glu up dtype", lambda x: ops.glu(x, x.double())),
    ("glu_packed odd width", lambda x: ops.glu_packed(torch.empty(0, 15))),
    ("rope cos columns", lambda x: ops.rope(x.view(1, 0, 2, 8), cos=rand(0, 5), sin=rand(0, 5))),
    ("rope k heads", lambda x: ops.rope(x.view(1, 0, 2, 8), x.view(1, 0, 2, 8)[..., :6],
                                        cos=rand(0, 8), sin=rand(0, 8))),
    ("rope_ cos columns", lambda x: ops.rope_(x.clone().view(1, 0, 2, 8), cos=rand(0, 5),
                                              sin=rand(0, 5))),
    ("rms_norm_rope weight", lambda x: ops.rms_norm_rope(x.view(1, 0, 16), rand(7),
                                                         cos=rand(0, 16), sin=rand(0, 16))),
]


@pytest.mark.parametrize("case", _EMPTY_BAD, ids=lambda c: c[0])
def test_empty_x_still_checks_the_other_arguments(case):
    """An empty x has nothing to compute, but its other arguments are checked as for any x:
    a residual of another shape, a weight of the wrong length, an unbroadcastable scale raise."""
    with pytest.raises(KfuseError):
        case[1](_EMPTY_X)


def test_empty_x_with_right_arguments():
    x = _EMPTY_X
    w = rand(16)
    assert ops.rms_norm(x, w).shape == (0, 16)
    assert ops.add_rms_norm(x, x.clone(), w).shape == (0, 16)
    assert ops.ada_norm(x, rand(1, 16), rand(16), w).shape == (0, 16)
    assert ops.add_ada_norm(x, x.clone(), rand(16), rand(16), rand(1, 16), w).shape == (0, 16)
    assert ops.gated_residual(x, x.clone(), rand(1, 16)) is None
    assert ops.layer_norm(x, w, w).shape == (0, 16)
    assert ops.gelu(torch.empty(3, 0)).shape == (3, 0)
    assert ops.glu(x, x.clone()).shape == (0, 16)
    assert ops.glu_packed(x).shape == (0, 8)
    q, c = x.view(1, 0, 2, 8), rand(0, 8)
    assert ops.rope(q, q.clone(), cos=c, sin=c)[1].shape == (1, 0, 2, 8)
    assert ops.rms_norm_rope(x.view(1, 0, 16), w, cos=rand(0, 16), sin=rand(0, 16)).shape == (1, 0, 16)


def test_library_messages_name_the_op_once():
    with pytest.raises(KfuseError, match=r"^kfuse rms_norm: weight has 3 elements"):
        ops.rms_norm(rand(2, 16), rand(3))


_SCALAR = torch.tensor(2.0)
# (name of the 0-d tensor, call with it)
_SCALAR_ARGS = [
    ("weight", lambda: ops.rms_norm(rand(4, 16), _SCALAR)),
    ("weight", lambda: ops.rms_norm(torch.empty(0, 16), _SCALAR)),
    ("weight", lambda: ops.add_rms_norm(rand(4, 16), rand(4, 16), _SCALAR)),
    ("weight", lambda: ops.ada_norm(rand(2, 3, 16), rand(2, 1, 16), None, _SCALAR)),
    ("weight", lambda: ops.rms_norm_rope(rand(1, 3, 8), _SCALAR, cos=rand(3, 8), sin=rand(3, 8))),
    ("bias", lambda: ops.layer_norm(rand(4, 16), None, _SCALAR)),
    ("freqs", lambda: ops.rope(rand(1, 3, 2, 8), positions=rand(3, 1), freqs=_SCALAR)),
    ("axis", lambda: ops.rope(rand(1, 3, 2, 8), positions=rand(3, 1), freqs=rand(4),
                              axis=torch.tensor(0, dtype=torch.int32))),
    ("cos", lambda: ops.rope(rand(1, 3, 2, 8), cos=_SCALAR, sin=_SCALAR)),
]


@pytest.mark.parametrize("case", _SCALAR_ARGS, ids=lambda c: c[0])
def test_0d_parameter_raises_kfuse_error_naming_it(case):
    """A 0-d weight / bias / freqs / axis / table raises KfuseError that names it (it was an
    IndexError from the view code)."""
    name, call = case
    with pytest.raises(KfuseError, match=r"\b%s is a 0-d tensor" % name):
        call()


# ---- rope ------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
@pytest.mark.parametrize("partial", [False, True])
def test_rope_half_gqa(dtype, layout, partial):
    B, S, Hq, Hk, Dh = 2, 6, 4, 2, 32
    r = 16 if partial else Dh
    cos, sin = tables_half(B, S, r)
    if layout == "bshd":
        q = rand(B, S, Hq, Dh, dtype=dtype)
        k = rand(B, S, Hk, Dh, dtype=dtype)
    else:
        q = rand(B, Hq, S, Dh, dtype=dtype)
        k = rand(B, Hk, S, Dh, dtype=dtype)
    qo, ko = ops.rope(q, k, cos=cos, sin=sin, convention="half", layout=layout)
    for t, o in ((q, qo), (k, ko)):
        t4 = t.double() if layout == "bshd" else t.double().transpose(1, 2)
        ref = ref_rope_bshd(t4, cos.double(), sin.double(), "half")
        if layout == "bhsd":
            ref = ref.transpose(1, 2)
        assert_close(o, ref)
    q_only, none = ops.rope(q, cos=cos, sin=sin, convention="half", layout=layout)
    assert none is None and torch.equal(q_only, qo)


@pytest.mark.parametrize("dtype", DTYPES)
def test_rope_interleaved_ltx_tables(dtype):
    B, S, D = 2, 10, 96                                # LTX: [B, S, H*Dh] as one head of D
    x = rand(B, S, D, dtype=dtype)
    cos, sin = tables_inter(B, S, D)
    qo, _ = ops.rope(x, cos=cos, sin=sin, convention="interleaved")
    ref = ref_rope_bshd(x.double()[:, :, None], cos.double(), sin.double(), "interleaved")
    assert_close(qo, ref[:, :, 0])


def test_rope_table_shared_across_batch():
    B, S, H, Dh = 3, 5, 2, 16
    q = rand(B, S, H, Dh)
    cos, sin = tables_half(1, S, Dh)
    qo, _ = ops.rope(q, cos=cos[0], sin=sin[0])        # [S, r]
    ref = ref_rope_bshd(q.double(), cos.double(), sin.double(), "half")
    assert_close(qo, ref)


@pytest.mark.parametrize("convention", ["half", "interleaved"])
def test_rope_positions_3d(convention):
    """Positions form with 3 axes and an axis map (pair 0 of freq 0 the identity): within the
    f32 tolerance of the tables of the f32 angles freqs * pos, cos / sin in float64."""
    B, S, H, Dh = 2, 12, 2, 24
    q = rand(B, S, H, Dh)
    pos = torch.rand(B, S, 3) * 40
    npair = Dh // 2
    freqs = torch.rand(npair) * 2
    freqs[0] = 0.0                                     # identity pair
    axis = (torch.arange(npair) % 3).to(torch.int32)
    qo, _ = ops.rope(q, positions=pos, freqs=freqs, axis=axis, convention=convention)
    ang = (freqs * pos[..., axis.long()]).double()     # f32 product, as the library
    emb = torch.cat([ang, ang], -1) if convention == "half" else ang.repeat_interleave(2, -1)
    ref = ref_rope_bshd(q.double(), emb.cos(), emb.sin(), convention)
    assert_close(qo, ref)


def _rope_inplace_inputs(form, dtype):
    """(q, k, layout, head_dim, buffer) for test_rope_inplace: buffer is the memory q and k
    live in when it holds more than them (None otherwise)."""
    B, S, Hq, Hk, Dh = 2, 5, 4, 2, 32
    if form == "bshd":
        return rand(B, S, Hq, Dh, dtype=dtype), rand(B, S, Hk, Dh, dtype=dtype), "bshd", None, None
    if form == "bhsd":
        return rand(B, Hq, S, Dh, dtype=dtype), rand(B, Hk, S, Dh, dtype=dtype), "bhsd", None, None
    if form == "proj_view":                   # HF: a fused q/k/v projection, q and k viewed
        proj = rand(B, S, (Hq + 2 * Hk) * Dh, dtype=dtype)   # as [B, H, S, Dh] (transposed)
        q = proj[..., :Hq * Dh].view(B, S, Hq, Dh).transpose(1, 2)
        k = proj[..., Hq * Dh:(Hq + Hk) * Dh].view(B, S, Hk, Dh).transpose(1, 2)
        return q, k, "bhsd", None, proj
    if form == "heads_3d":                    # [B, S, H*Dh] split by head_dim
        return rand(B, S, Hq * Dh, dtype=dtype), rand(B, S, Hk * Dh, dtype=dtype), "bshd", Dh, None
    # last stride 2: the op rotates a contiguous working copy and writes it back
    qb = rand(B, S, Hq, 2 * Dh, dtype=dtype)
    kb = rand(B, S, Hk, 2 * Dh, dtype=dtype)
    return qb[..., ::2], kb[..., ::2], "bshd", None, (qb, kb)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("form", ["bshd", "bhsd", "proj_view", "heads_3d", "strided_last"])
def test_rope_inplace(dtype, form):
    """rope_ writes exactly rope's values into q and k through their own strides, and
    nothing else of the memory they live in."""
    q, k, layout, hd, buf = _rope_inplace_inputs(form, dtype)
    S = q.shape[2] if layout == "bhsd" else q.shape[1]
    cos, sin = tables_half(q.shape[0], S, 32)
    want_q, want_k = ops.rope(q.clone(), k.clone(), cos=cos, sin=sin, layout=layout, head_dim=hd)
    before = [t.clone() for t in (buf if isinstance(buf, tuple) else (buf,)) if t is not None]
    q0 = q.clone()
    got_q, got_k = ops.rope_(q, k, cos=cos, sin=sin, layout=layout, head_dim=hd)
    assert got_q is q and got_k is k
    assert torch.equal(q, want_q) and torch.equal(k, want_k)
    assert not torch.equal(q, q0)
    if form == "proj_view":                   # v, the rest of the projection, untouched
        assert torch.equal(buf[..., 6 * 32:], before[0][..., 6 * 32:])
    if form == "strided_last":                # the odd channels, between q's and k's, untouched
        for t, t0 in zip(buf, before):
            assert torch.equal(t[..., 1::2], t0[..., 1::2])
    q1 = q.clone()                            # q alone
    want_q1, _ = ops.rope(q1.clone(), cos=cos, sin=sin, layout=layout, head_dim=hd)
    got, none = ops.rope_(q1, cos=cos, sin=sin, layout=layout, head_dim=hd)
    assert got is q1 and none is None and torch.equal(q1, want_q1)


def test_rope_inplace_errors():
    q = rand(1, 4, 2, 16)
    cos, sin = tables_half(1, 4, 16)
    with pytest.raises(KfuseError) as e:
        ops.rope_(q, q, cos=cos, sin=sin)
    assert "same tensor" in str(e.value)
    big_cos, big_sin = tables_half(1, 4, 18)           # r = 18 > head_dim 16
    q0 = q.clone()
    with pytest.raises(KfuseError):
        ops.rope_(q, cos=big_cos, sin=big_sin)
    assert torch.equal(q, q0)                          # a rejected call writes nothing
    with pytest.raises(KfuseError) as e:               # heads broadcast from one: not writable
        ops.rope_(rand(1, 4, 1, 16).expand(1, 4, 2, 16), cos=cos, sin=sin)
    assert "stride 0" in str(e.value)


@pytest.mark.parametrize("dtype", DTYPES)
def test_rms_norm_rope(dtype):
    B, S, D = 2, 7, 64
    x = rand(B, S, D, dtype=dtype)
    w = rand(D)
    cos, sin = tables_inter(B, S, D)
    y = ops.rms_norm_rope(x, w, eps=1e-5, mode="none", cos=cos, sin=sin,
                          convention="interleaved")
    n = ref_rms(x, w, 1e-5, "none")
    ref = ref_rope_bshd(n[:, :, None], cos.double(), sin.double(), "interleaved")[:, :, 0]
    assert_close(y, ref)


# ---- activations and softmax ------------------------------------------------------------------

ACT_REF = {
    "silu": F.silu,
    "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
    "gelu_erf": F.gelu,
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("act", list(ACT_REF))
def test_glu(dtype, act):
    g = rand(5, 3, 300, dtype=dtype, scale=2.0)
    u = rand(5, 3, 300, dtype=dtype)
    assert_close(ops.glu(g, u, act), ACT_REF[act](g.double()) * u.double())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("gate_first", [False, True])
def test_glu_packed(dtype, gate_first):
    x = rand(4, 6, 2 * 77, dtype=dtype, scale=2.0)
    a, b = x.double().chunk(2, -1)
    gate, up = (a, b) if gate_first else (b, a)
    ref = F.gelu(gate, approximate="tanh") * up
    assert_close(ops.glu_packed(x, "gelu_tanh", gate_first=gate_first), ref)


def test_glu_packed_strided():
    big = rand(2, 3, 4, 5, 2 * 40 + 8)
    x = big[..., 4:84]                                 # 5-D, row stride 88
    a, b = x.double().chunk(2, -1)
    assert_close(ops.glu_packed(x, "silu"), a * F.silu(b))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("approximate", ["tanh", "none"])
def test_gelu(dtype, approximate):
    x = rand(9, 1000, dtype=dtype, scale=3.0)
    assert_close(ops.gelu(x, approximate), F.gelu(x.double(), approximate=approximate))


@pytest.mark.parametrize("dtype", DTYPES)
def test_silu(dtype):
    x = rand(3, 7, 333, dtype=dtype, scale=3.0)
    assert_close(ops.silu(x), F.silu(x.double()))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("D", [1, 111, 1024])
def test_softmax(dtype, D):
    x = rand(6, D, dtype=dtype, scale=4.0)
    assert_close(ops.softmax(x, scale=0.125), torch.softmax(x.double() * 0.125, -1))


def test_softmax_nan_rows_stay_local():
    x = rand(3, 16)
    x[1] = -math.inf
    x[2, 3] = math.nan
    y = ops.softmax(x)
    assert torch.isnan(y[1]).all() and torch.isnan(y[2]).all()
    assert_close(y[0], torch.softmax(x[0].double(), -1))


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device"))])
@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_scale_times_x_beyond_f32_gives_the_limit(dtype, device):
    # scale * x overflows f32 (1e36 * 1000); the limit is one-hot on the row's largest x
    # (largest scale * x), in every dtype on both backends (PyTorch's softmax(x * scale)
    # gives NaN there); scale 0 gives uniform rows
    x = torch.tensor([[1000.0, 996.0, -5.0, 0.0], [-2.0, 3.0, 1.0, 3.0]], dtype=dtype,
                     device=device)
    y = ops.softmax(x, scale=1e36).float().cpu()
    assert torch.equal(y[0], torch.tensor([1.0, 0.0, 0.0, 0.0]))
    assert torch.equal(y[1], torch.tensor([0.0, 0.5, 0.0, 0.5]))
    y = ops.softmax(x, scale=-1e36).float().cpu()
    assert torch.equal(y[0], torch.tensor([0.0, 0.0, 1.0, 0.0]))
    for zero in (0.0, -0.0):                # uniform rows (x has 4 elements: exact)
        y = ops.softmax(x, scale=zero).float().cpu()
        assert torch.equal(y, torch.full((2, 4), 0.25))


def test_mutated_tensor_overlapping_another_is_rejected():
    # Slices of one buffer a row apart: the written tensor shares elements with an input.
    buf = rand(5, 64)
    before = buf.clone()
    with pytest.raises(KfuseError) as e:
        ops.add_rms_norm(buf[0:4], buf[1:5])           # residual (written) overlaps x
    assert "overlaps" in str(e.value)
    with pytest.raises(KfuseError):
        ops.gated_residual(buf[1:5], buf[0:4], rand(4, 64))
    # q and k as head slices of one fused buffer that share a head (views with gaps).
    qkv = rand(1, 4, 3, 16)
    with pytest.raises(KfuseError) as e:
        ops.rope_(qkv[:, :, 0:2], qkv[:, :, 1:3], cos=tables_half(1, 4, 16)[0],
                  sin=tables_half(1, 4, 16)[1])
    assert "overlaps" in str(e.value)
    assert torch.equal(buf, before)                    # a rejected call writes nothing
    # Disjoint head slices of the same buffer stay allowed.
    q, k = qkv[:, :, 0:2], qkv[:, :, 2:3]
    want_q, want_k = ops.rope(q.clone(), k.clone(), *tables_half(1, 4, 16))
    ops.rope_(q, k, *tables_half(1, 4, 16))
    assert torch.equal(q, want_q) and torch.equal(k, want_k)


# ---- errors ---------------------------------------------------------------------------------

def test_error_carries_library_message():
    x = rand(4, 64)
    with pytest.raises(KfuseError) as e:
        ops.rms_norm(x, rand(63))
    assert e.value.status == 4                         # KF_ERR_SHAPE
    assert "rms_norm" in str(e.value) and len(e.value.message) > len("kfuse rms_norm: ")
    assert isinstance(e.value, RuntimeError)


def test_error_bad_dtype_and_enum():
    with pytest.raises(KfuseError):
        ops.silu(rand(4, 8).double())
    with pytest.raises(KfuseError):
        ops.rms_norm(rand(4, 8), mode="bogus")
    with pytest.raises(KfuseError):
        ops.glu(rand(4, 8), rand(4, 9))
    with pytest.raises(KfuseError):                   # 3 rows of scale do not broadcast to 2
        ops.ada_norm(rand(2, 5, 8), rand(3, 1, 8))


def test_error_from_rope():
    """A rotary_dim (here the tables' 18 columns) past head_dim 16 is KF_ERR_INVALID_ARG."""
    q = rand(1, 4, 2, 16)
    cos, sin = tables_half(1, 4, 18)                   # r = 18 > head_dim 16
    with pytest.raises(KfuseError, match="rotary_dim 18 must be even and in 2..head_dim") as e:
        ops.rope(q, cos=cos, sin=sin)
    assert e.value.status == 2                         # KF_ERR_INVALID_ARG


# ---- torch.library.opcheck ---------------------------------------------------------------------

def _opcheck_cases():
    x = rand(3, 4, 32)
    w = rand(32)
    shift, scale, gate = cond_views(3, 32, torch.float32)[:3]
    cos, sin = tables_half(3, 4, 16)
    q = rand(3, 4, 2, 16)
    k = rand(3, 4, 1, 16)
    K = torch.ops.kfuse
    return [
        ("rms_norm", K.rms_norm.default, (x, w, 1e-6, "llama", 0.0)),
        ("add_rms_norm", K.add_rms_norm.default, (x, rand(3, 4, 32), w, 1e-6, "none", 0.0)),
        ("layer_norm", K.layer_norm.default, (x, w, rand(32), 1e-5)),
        ("ada_norm", K.ada_norm.default, (x, scale, shift, None, 1e-6, "rms")),
        ("add_ada_norm", K.add_ada_norm.default,
         (rand(3, 4, 32), x, scale, shift, gate, None, 1e-6, "layer")),
        ("gated_residual", K.gated_residual.default, (rand(3, 4, 32), x, gate)),
        ("rope", K.rope.default, (q, cos, sin, None, None, None, "half", 0, "bshd", 0)),
        ("rope_qk", K.rope_qk.default,
         (q, k, cos, sin, None, None, None, "half", 0, "bshd", 0)),
        ("rope_inplace", K.rope_inplace.default,
         (rand(3, 4, 2, 16), cos, sin, None, None, None, "half", 0, "bshd", 0)),
        ("rope_qk_inplace", K.rope_qk_inplace.default,
         (rand(3, 4, 2, 16), rand(3, 4, 1, 16), cos, sin, None, None, None, "half", 0, "bshd",
          0)),
        ("rms_norm_rope", K.rms_norm_rope.default,
         (rand(3, 4, 16), None, 1e-5, "none", 0.0, cos, sin, None, None, None, "interleaved",
          0, 0)),
        ("glu", K.glu.default, (x, rand(3, 4, 32), "silu")),
        ("glu_packed", K.glu_packed.default, (x, "gelu_tanh", False)),
        ("gelu", K.gelu.default, (x, "tanh")),
        ("silu", K.silu.default, (x,)),
        ("softmax", K.softmax.default, (x, 0.5)),
    ]


@pytest.mark.parametrize("case", _opcheck_cases(), ids=lambda c: c[0])
def test_opcheck(case):
    _, op, args = case
    torch.library.opcheck(op, args)


@pytest.mark.parametrize("case", _opcheck_cases(), ids=lambda c: c[0])
def test_registered_op_layout_tag_and_versions(case):
    """Every kfuse operator takes any strides (flexible_layout: inductor passes tensors as they
    are), and a call through the dispatcher bumps the version counter of what it mutates, as
    in-place torch ops do (outside inference mode)."""
    _, op, args = case
    if hasattr(torch.Tag, "flexible_layout"):     # torch 2.4 has no such tag
        assert torch.Tag.flexible_layout in op.tags
    args = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    mutated = [i for i, a in enumerate(op._schema.arguments) if a.alias_info is not None
               and a.alias_info.is_write]
    before = [args[i]._version for i in mutated]
    with torch.no_grad():
        op(*args)
    assert [args[i]._version for i in mutated] == [v + 1 for v in before]


def test_eager_in_place_calls_bump_versions():
    """The public wrappers of the mutating ops, which call the implementation without the
    dispatcher in eager mode, bump the version counters too: a backward through a tensor
    saved before kfuse changed it raises, as after r.add_(x), instead of using the new values."""
    w = torch.randn(8, requires_grad=True)
    r, x = rand(4, 8), rand(4, 8)
    loss = (r * w).sum()                  # autograd saves r
    ops.add_rms_norm(x, r, None, 1e-6, "llama")
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()
    h, a, g = rand(2, 3, 8), rand(2, 3, 8), rand(2, 1, 8)
    q, k = rand(1, 3, 2, 8), rand(1, 3, 1, 8)
    cos, sin = tables_half(1, 3, 8)
    calls = [
        ([h], lambda: ops.gated_residual(h, a, g)),
        ([h], lambda: ops.add_ada_norm(h, a, rand(2, 1, 8), rand(2, 1, 8))),
        ([q], lambda: ops.rope_(q, cos=cos[0], sin=sin[0])),
        ([q, k], lambda: ops.rope_(q, k, cos=cos[0], sin=sin[0])),
    ]
    for mutated, call in calls:
        before = [t._version for t in mutated]
        with torch.no_grad():
            call()
        assert [t._version for t in mutated] == [v + 1 for v in before]
    with torch.inference_mode():                  # inference tensors: no counter, no error
        hi = rand(2, 3, 8)
        ops.gated_residual(hi, a, g)


# ---- torch.compile -----------------------------------------------------------------------------

def test_torch_compile_fullgraph():
    def block(h, a, temb, w, cos, sin):
        shift, scale, gate = temb.reshape(h.shape[0], 1, 3, h.shape[-1]).unbind(2)
        ops.gated_residual(h, a, gate)
        y = ops.ada_norm(h, scale, shift, None, 1e-6, "rms")
        y, _ = ops.rope(y, cos=cos, sin=sin, convention="interleaved")
        y = ops.rms_norm(y, w, 1e-6, "llama")
        ops.rope_(y, cos=cos, sin=sin, convention="interleaved")
        z = ops.add_rms_norm(y, a, w, 1e-6, "none")
        return ops.glu(z, ops.silu(y), "gelu_tanh")

    B, S, D = 2, 5, 32
    args = [rand(B, S, D), rand(B, S, D), rand(B, 3 * D), rand(D)] + list(tables_inter(B, S, D))
    eager_args = [t.clone() for t in args]
    ref = block(*eager_args)
    compiled = torch.compile(block, fullgraph=True)
    out = compiled(*args)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(args[0], eager_args[0])   # h mutated the same way
    torch.testing.assert_close(args[1], eager_args[1])   # and a (the residual)


def test_package_surface():
    assert kfuse.version() == kfuse.__version__
    assert kfuse.library_version().count(".") == 2
    assert callable(kfuse.patch) and callable(kfuse.unpatch) and callable(kfuse.verify_engaged)


# ---- CUDA (skipped without a GPU): streams, graph capture, compile --------------------------

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


def _cuda_block(h, a, temb, w, cos, sin):
    shift, scale, gate = temb.reshape(h.shape[0], 1, 3, h.shape[-1]).unbind(2)
    ops.gated_residual(h, a, gate)
    y = ops.ada_norm(h, scale, shift, None, 1e-6, "rms")
    y, _ = ops.rope(y, cos=cos, sin=sin, convention="interleaved")
    z = ops.add_rms_norm(y, a, w, 1e-6, "llama")
    return ops.glu(z, ops.softmax(y), "silu")


def _cuda_args(dtype=torch.bfloat16):
    B, S, D = 2, 64, 256
    args = [rand(B, S, D, dtype=dtype), rand(B, S, D, dtype=dtype), rand(B, 3 * D, dtype=dtype),
            rand(D, dtype=dtype)] + list(tables_inter(B, S, D))
    return args


@cuda
@pytest.mark.parametrize("dtype", DTYPES)
def test_cuda_matches_cpu(dtype):
    args = _cuda_args(dtype)
    ref = _cuda_block(*[t.clone() for t in args])
    out = _cuda_block(*[t.cuda() for t in args])
    assert_close(out.cpu(), ref.double(), factor=2.0)


@cuda
def test_cuda_side_stream():
    args = [t.cuda() for t in _cuda_args()]
    ref = _cuda_block(*[t.clone() for t in args])
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        out = _cuda_block(*args)
    torch.cuda.current_stream().wait_stream(s)
    torch.testing.assert_close(out, ref)


@cuda
def test_cuda_graph_capture():
    args = [t.cuda() for t in _cuda_args()]
    h0, a0 = args[0].clone(), args[1].clone()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):                          # warm up (contexts created) off-graph
        _cuda_block(*[t.clone() for t in args])
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = _cuda_block(*args)
    args[0].copy_(h0)
    args[1].copy_(a0)
    g.replay()
    ref = _cuda_block(h0, a0, *[t.clone() for t in args[2:]])
    torch.cuda.synchronize()
    torch.testing.assert_close(out, ref)


@cuda
def test_cuda_compile_fullgraph_with_cudagraphs():
    args = [t.cuda() for t in _cuda_args()]
    ref_args = [t.clone() for t in args]
    ref = _cuda_block(*ref_args)
    f = torch.compile(_cuda_block, fullgraph=True, mode="reduce-overhead")
    out = f(*args)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(args[0], ref_args[0])


@cuda
@pytest.mark.skipif(torch.cuda.is_available() and
                    torch.cuda.get_device_properties(0).total_memory < 24 * 2**30,
                    reason="needs 24 GiB of GPU memory")
def test_cuda_activation_over_2g_elements():
    """A contiguous tensor of more than 2^31 elements, one row: the flat kernel indexes in
    64 bits (the row form refuses rows that long)."""
    n = 2**31 + 24
    x = torch.empty(n, dtype=torch.bfloat16, device="cuda").uniform_(-6, 6)
    y = kfuse.ops.silu(x)
    for part in (slice(0, 2**20), slice(2**31 - 2**20, None)):
        ref = F.silu(x[part].double())
        assert_close(y[part], ref, torch.bfloat16)
    del x, y
    torch.cuda.empty_cache()


IN_PLACE_CALLS = [
    ("add_rms_norm", lambda t: ops.add_rms_norm(t[1], t[0], None)),
    ("add_ada_norm", lambda t: ops.add_ada_norm(t[0], t[1], t[2][:1])),
    ("gated_residual", lambda t: ops.gated_residual(t[0], t[1], t[2])),
    ("rope_", lambda t: ops.rope_(t[0].view(1, 4, 1, 16), cos=t[3], sin=t[3])),
    ("rope_ q, k", lambda t: ops.rope_(t[1].view(1, 4, 1, 16), t[0].view(1, 4, 1, 16), cos=t[3],
                                       sin=t[3])),
]


@pytest.mark.parametrize("name,call", IN_PLACE_CALLS, ids=[c[0] for c in IN_PLACE_CALLS])
def test_in_place_on_inference_tensor(name, call):
    """An op that writes a tensor in place refuses an inference tensor outside
    torch.inference_mode(), as torch's in-place ops do (t[0] is the one written), and runs
    under it."""
    with torch.inference_mode():
        made = [rand(4, 16), rand(4, 16), rand(4, 16), rand(4, 16)]
    assert made[0].is_inference()
    before = made[0].clone()
    with pytest.raises(KfuseError, match="inference tensor"):
        call(made)
    assert torch.equal(made[0], before)
    with torch.inference_mode():
        call(made)
    assert not torch.equal(made[0], before)


def test_context_error_says_why(monkeypatch):
    """A context that cannot be created: the error carries the library's reason, not only
    the status (here a bad KFUSE_CPU_ISA, read when a context is created; a new thread
    creates its own)."""
    import threading
    monkeypatch.setenv("KFUSE_CPU_ISA", "bogus")
    caught = []

    def work():
        try:
            ops.silu(torch.randn(4, 8))
        except KfuseError as e:
            caught.append(str(e))

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert len(caught) == 1 and "KFUSE_CPU_ISA" in caught[0] and "bogus" in caught[0], caught


def _threaded_rms_call(seed, rows, cols, calls=1):
    """kfuse rms_norm (mode "none") of a seeded [rows, cols] tensor, called `calls` times in
    this thread: (max error against the float64 reference, this thread's CPU kf_ctx)."""
    from kfuse import _lib

    x = torch.randn(rows, cols, generator=torch.Generator().manual_seed(seed))
    for _ in range(calls):
        y = kfuse.ops.rms_norm(x, None, 1e-6, mode="none")
    ref = x.double() * torch.rsqrt(x.double().pow(2).mean(-1, keepdim=True) + 1e-6)
    return float((y.double() - ref).abs().max()), _lib.cpu_context().value


def test_each_thread_has_its_own_context():
    """Contexts hold the stream and the last error, so every thread gets its own; ops called
    from several threads at once still give the reference result."""
    import threading

    results = {}
    all_running = threading.Barrier(4)      # no thread ends (handing its context on) early

    def work(i):
        results[i] = _threaded_rms_call(i, 16, 96, calls=50)
        all_running.wait()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4
    assert all(err < 1e-5 for err, _ in results.values())
    assert len({ctx for _, ctx in results.values()}) == 4


def test_a_thread_that_ends_hands_its_context_on():
    """nn.DataParallel runs each forward in new threads: a thread that ended leaves its context
    to the next (no context created, none leaked per thread), which computes as a new one."""
    import threading

    seen = []

    def work(i):
        seen.append(_threaded_rms_call(i, 8, 64))

    for i in range(12):
        t = threading.Thread(target=work, args=(i,))
        t.start()
        t.join()
    assert len(seen) == 12 and all(err < 1e-5 for err, _ in seen)
    assert len({ctx for _, ctx in seen}) == 1


def test_inputs_requiring_grad_raise_with_grad_mode_on():
    """The ops have no backward: where autograd would record, they raise instead of returning
    outputs cut off from the graph (silently missing gradients); under no_grad they run."""
    x = torch.randn(4, 8, requires_grad=True)
    w = torch.randn(8, requires_grad=True)
    h, a, g = torch.randn(4, 8), torch.randn(4, 8), torch.randn(4, 8)
    with pytest.raises(KfuseError, match="no backward"):
        ops.rms_norm(x)
    with pytest.raises(KfuseError, match="no backward"):
        ops.rms_norm(x.detach(), w)                 # only the weight requires grad
    with pytest.raises(KfuseError, match="no backward"):
        ops.gated_residual(h, a, g.requires_grad_())
    assert h._version == 0                          # rejected before anything was written
    with pytest.raises(KfuseError, match="no backward"):
        ops.glu(x, x)
    with torch.no_grad():
        torch.testing.assert_close(ops.rms_norm(x, w), ops.rms_norm(x.detach(), w.detach()))
    with torch.inference_mode():
        ops.rms_norm(x, w)


def test_registered_operators_refuse_grad_and_inference_tensors():
    """torch.ops.kfuse.* called directly (as an exported program calls them) make the same
    checks as the kfuse.ops wrappers: inputs requiring grad with grad mode on (no backward;
    else outputs that claim to require grad and a backward without their term), and an
    inference tensor written outside inference mode."""
    x = torch.randn(3, 8, requires_grad=True)
    with pytest.raises(KfuseError, match="no backward"):
        torch.ops.kfuse.silu(x)
    with pytest.raises(KfuseError, match="no backward"):
        torch.ops.kfuse.rms_norm(x.detach(), torch.ones(8, requires_grad=True), 1e-6, "llama", 0.0)
    with torch.no_grad():
        torch.testing.assert_close(torch.ops.kfuse.silu(x), ops.silu(x.detach()))
    with torch.inference_mode():
        h = torch.zeros(2, 8)
    with pytest.raises(KfuseError, match="inference tensor"):
        torch.ops.kfuse.gated_residual(h, torch.ones(2, 8), torch.ones(2, 8))
    assert torch.equal(h, torch.zeros(2, 8))
    t = torch.zeros(2, 8)
    with torch.no_grad():
        torch.ops.kfuse.gated_residual(t, torch.ones(2, 8), torch.ones(2, 8))
    assert t._version == 1 and torch.equal(t, torch.ones(2, 8))


def test_forward_mode_dual_inputs_raise():
    """Forward-mode AD would drop the tangent (no derivative formulas): a dual input raises,
    through the wrapper and the registered operator; plain tensors run inside a dual level."""
    import torch.autograd.forward_ad as fwAD
    x = torch.randn(3, 8)
    with fwAD.dual_level():
        d = fwAD.make_dual(x, torch.ones(3, 8))
        with pytest.raises(KfuseError, match="forward-mode tangent"):
            ops.silu(d)
        with pytest.raises(KfuseError, match="forward-mode tangent"):
            torch.ops.kfuse.silu(d)
        with pytest.raises(KfuseError, match="forward-mode tangent"):
            ops.rms_norm(x, fwAD.make_dual(torch.ones(8), torch.ones(8)))
        torch.testing.assert_close(ops.silu(x), torch.nn.functional.silu(x))


def test_error_pickles_and_keeps_its_status():
    import pickle
    e = pickle.loads(pickle.dumps(KfuseError("kfuse rms_norm: bad", 4)))
    assert (str(e), e.message, e.status, e.status_name) == ("kfuse rms_norm: bad",) * 2 + (4, "KF_ERR_SHAPE")
    assert KfuseError("m").status is None


def test_arguments_that_are_not_tensors_raise_type_error():
    for grad in (True, False):
        with torch.set_grad_enabled(grad):
            with pytest.raises(TypeError, match="gated_residual: expected a tensor or None, got float"):
                ops.gated_residual(torch.zeros(4, 8), torch.ones(4, 8), 2.0)
            with pytest.raises(TypeError, match="rms_norm: expected a tensor or None, got str"):
                ops.rms_norm(torch.ones(4, 8), weight="w")


def test_written_tensor_expanded_raises_before_the_op_runs():
    """A tensor written in place that repeats itself (stride 0) and needs a working copy is a
    KfuseError before the op runs (was torch's error from the copy back, after it)."""
    a, g = torch.ones(4, 8), torch.ones(4, 8)
    base = torch.zeros(4, 1)
    with pytest.raises(KfuseError, match="expanded") as e:
        ops.gated_residual(base.expand(4, 8), a, g)
    assert e.value.status == 5 and torch.equal(base, torch.zeros(4, 1))
    with pytest.raises(KfuseError, match="expanded"):
        ops.add_rms_norm(torch.ones(4, 8), base.expand(4, 8))
    with pytest.raises(KfuseError, match="expanded"):
        ops.rope_(torch.zeros(1, 3, 1, 1).expand(1, 3, 2, 8), cos=torch.ones(3, 8),
                  sin=torch.zeros(3, 8))


@pytest.mark.parametrize("which", ["positions", "freqs"])
def test_rope_positions_form_inputs_requiring_grad_raise(which):
    """Learnable rope frequencies (or positions) get no gradient from kfuse: the positions
    form raises as the table form does, in rope, rope_ and rms_norm_rope."""
    pos, freqs = torch.arange(4.0)[:, None], torch.rand(4)
    args = dict(positions=pos, freqs=freqs)
    args[which] = args[which].clone().requires_grad_()
    q = torch.randn(1, 4, 2, 8)
    for call in (lambda: ops.rope(q, **args), lambda: ops.rope_(q.clone(), **args),
                 lambda: ops.rms_norm_rope(torch.randn(1, 4, 8), **args)):
        with pytest.raises(KfuseError, match="no backward"):
            call()
    with torch.no_grad():
        assert ops.rope(q, **args)[0].shape == q.shape


def test_rope_head_split_errors():
    """An empty last dim and a head_dim that disagrees with a 4-D tensor's heads are
    KfuseErrors, not a ZeroDivisionError or a silently ignored argument."""
    e = torch.empty(3, 0)
    with pytest.raises(KfuseError, match="last dim is 0"):
        ops.rope(torch.empty(1, 3, 0), cos=e, sin=e)
    with pytest.raises(KfuseError, match="last dim is 0"):
        ops.rms_norm_rope(torch.empty(1, 3, 0), cos=e, sin=e)
    c = torch.randn(3, 8)
    with pytest.raises(KfuseError, match="head_dim 4 given with a 4-D tensor"):
        ops.rope(torch.randn(1, 3, 2, 8), cos=c, sin=c, head_dim=4)
    with pytest.raises(KfuseError, match="head_dim 4 given with a 4-D tensor"):
        ops.rope(torch.randn(1, 3, 2, 16)[..., ::2], cos=c, sin=c, head_dim=4)   # strided
    y, _ = ops.rope(torch.randn(1, 3, 2, 8), cos=c, sin=c, head_dim=8)
    assert y.shape == (1, 3, 2, 8)
    c16 = torch.randn(3, 16)
    for call in (lambda: ops.rope(torch.randn(1, 3, 32), cos=c16, sin=c16, head_dim=-16),
                 lambda: ops.rope_(torch.randn(1, 3, 32), cos=c16, sin=c16, head_dim=-16),
                 lambda: ops.rms_norm_rope(torch.randn(1, 3, 32), cos=c16, sin=c16, head_dim=-16),
                 lambda: ops.rope(torch.randn(1, 3, 2, 8), cos=c, sin=c, head_dim=-8)):
        with pytest.raises(KfuseError, match="head_dim must be positive"):
            call()


def test_meta_tensors_take_the_fake_implementation():
    y = ops.rms_norm(torch.empty(2, 8, device="meta"), torch.empty(8, device="meta"))
    assert y.device.type == "meta" and y.shape == (2, 8)
    y, _ = ops.rope(torch.empty(1, 3, 2, 8, device="meta"), cos=torch.empty(3, 8, device="meta"),
                    sin=torch.empty(3, 8, device="meta"), convention="half", layout="bshd")
    assert y.device.type == "meta" and y.shape == (1, 3, 2, 8)


def _meta(*shape):
    return torch.empty(*shape, device="meta")


# (name, call on meta tensors that its fake implementation must reject, as the op does)
_FAKE_BAD = [
    ("glu_packed odd width", lambda: ops.glu_packed(_meta(3, 5))),
    ("glu up shape", lambda: ops.glu(_meta(3, 4), _meta(3, 5))),
    ("glu act", lambda: ops.glu(_meta(3, 4), _meta(3, 4), "relu")),
    ("add_rms_norm residual shape", lambda: ops.add_rms_norm(_meta(3, 4), _meta(4, 4))),
    ("add_ada_norm a shape", lambda: ops.add_ada_norm(_meta(2, 3, 4), _meta(2, 3, 5), _meta(4))),
    ("gated_residual a shape", lambda: ops.gated_residual(_meta(2, 3, 4), _meta(3, 4), _meta(4))),
    ("rms_norm weight on another device", lambda: ops.rms_norm(_meta(2, 8), torch.ones(8))),
    ("rms_norm mode", lambda: ops.rms_norm(_meta(2, 8), mode="gemma2")),
    ("ada_norm kind", lambda: ops.ada_norm(_meta(2, 8), _meta(8), kind="group")),
    ("rope convention", lambda: ops.rope(_meta(1, 3, 2, 8), cos=_meta(3, 8), sin=_meta(3, 8),
                                         convention="neox")),
    ("rope layout", lambda: ops.rope(_meta(1, 3, 2, 8), cos=_meta(3, 8), sin=_meta(3, 8),
                                     layout="bsd")),
    ("rope_ table on another device", lambda: ops.rope_(_meta(1, 3, 2, 8), cos=torch.ones(3, 8),
                                                        sin=torch.ones(3, 8))),
    ("gelu approximate", lambda: ops.gelu(_meta(4), "fast")),
    ("softmax scalar x", lambda: ops.softmax(torch.empty((), device="meta"))),
]


@pytest.mark.parametrize("case", _FAKE_BAD, ids=lambda c: c[0])
def test_fake_implementations_reject_what_the_op_rejects(case):
    """Under torch.compile the fake implementations run while the graph is traced: a wrong
    device, shape or mode raises there, not only once the compiled graph runs."""
    with pytest.raises(KfuseError):
        case[1]()


def test_versions_agree():
    """The version is written in four places: the header, CMake, pyproject and the package."""
    import re

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    def read(name):
        with open(os.path.join(root, name)) as f:
            return f.read()
    header = ".".join(re.search(r"#define KF_VERSION_%s (\d+)" % p, read("include/kfuse.h")).group(1)
                      for p in ("MAJOR", "MINOR", "PATCH"))
    cmake = re.search(r"project\(kfuse VERSION ([0-9.]+)", read("CMakeLists.txt")).group(1)
    pyproject = re.search(r'^version = "([^"]+)"', read("pyproject.toml"), re.M).group(1)
    assert header == cmake == pyproject == kfuse.__version__ == kfuse.library_version()


def test_jit_trace_records_the_kfuse_op():
    """torch.jit.trace sees the registered op (a direct call to the library would leave the
    traced graph an empty_like, run on new inputs as uninitialised memory)."""
    w = rand(64)
    traced = torch.jit.trace(lambda x: ops.rms_norm(x, w, 1e-6, "llama"), (rand(4, 64),))
    assert "kfuse::rms_norm" in str(traced.graph)
    x = rand(4, 64)
    torch.testing.assert_close(traced(x), ops.rms_norm(x, w, 1e-6, "llama"))


# ---- torch.func transforms ---------------------------------------------------------------
# torch.vmap of every functional op against a Python loop of the same op over the batch (the
# rule is what is checked, bit for bit), with the vmapped dim at the front, in the middle and
# last, in_dims on parameters (one call per element there) and nested vmaps; the ops that
# write in place, torch.func.grad and torch.func.jvp raise KfuseError. Before the rules, vmap
# reached the implementation with wrapper tensors ("Cannot access data pointer of Tensor
# that doesn't have storage").

VB = 3   # the vmapped batch
needs_vmap_rules = pytest.mark.skipif(not hasattr(torch.library, "register_vmap"),
                                      reason="torch.library.register_vmap: torch 2.4 on")


def _vmap_loop(fn, args, in_dims):
    """fn over the batch one element at a time, outputs stacked at dim 0."""
    outs = [fn(*(a if d is None else a.select(d, b) for a, d in zip(args, in_dims)))
            for b in range(VB)]
    if isinstance(outs[0], tuple):
        return tuple(torch.stack(o) for o in zip(*outs))
    return torch.stack(outs)


def _vmap_rope_tables(S, Dh):
    ang = rand(S, Dh // 2, scale=3.0)
    return torch.cat((ang.cos(), ang.cos()), -1), torch.cat((ang.sin(), ang.sin()), -1)


VCOS, VSIN = _vmap_rope_tables(5, 16)

# name -> (fn, args, in_dims): args hold the batch of VB at the dim in_dims names
VMAP_CASES = {
    "rms_norm x": (lambda x, w: ops.rms_norm(x, w), (rand(VB, 4, 64), rand(64)), (0, None)),
    "rms_norm x dim 1": (lambda x, w: ops.rms_norm(x, w), (rand(4, VB, 64), rand(64)), (1, None)),
    "rms_norm x last dim": (lambda x: ops.rms_norm(x, mode="none"), (rand(4, 64, VB),), (2,)),
    "rms_norm weight": (lambda x, w: ops.rms_norm(x, w), (rand(VB, 4, 64), rand(VB, 64)), (0, 0)),
    "rms_norm weight only": (lambda x, w: ops.rms_norm(x, w), (rand(4, 64), rand(VB, 64)), (None, 0)),
    "layer_norm": (lambda x, w, b: ops.layer_norm(x, w, b),
                   (rand(VB, 2, 5, 48), rand(48), rand(48)), (0, None, None)),
    "layer_norm bias": (lambda x, w, b: ops.layer_norm(x, w, b),
                        (rand(VB, 5, 48), rand(48), rand(VB, 48)), (0, None, 0)),
    "ada_norm": (lambda x, s, sh: ops.ada_norm(x, s, sh),
                 (rand(VB, 2, 6, 32), rand(VB, 2, 1, 32), rand(2, 1, 32)), (0, 0, None)),
    "glu": (lambda g, u: ops.glu(g, u, act="gelu_tanh"), (rand(VB, 4, 40), rand(VB, 4, 40)), (0, 0)),
    "glu gate only": (lambda g, u: ops.glu(g, u), (rand(VB, 4, 40), rand(4, 40)), (0, None)),
    "glu_packed": (lambda x: ops.glu_packed(x, act="silu"), (rand(4, VB, 80),), (1,)),
    "gelu": (lambda x: ops.gelu(x, approximate="none"), (rand(VB, 7, 33, dtype=torch.bfloat16),), (0,)),
    "silu": (lambda x: ops.silu(x), (rand(VB, 7, 33, dtype=torch.float16),), (0,)),
    "softmax": (lambda x: ops.softmax(x, scale=0.5), (rand(6, 20, VB),), (2,)),
    "rope q k": (lambda q, k: ops.rope(q, k, cos=VCOS, sin=VSIN),
                 (rand(VB, 1, 5, 4, 16), rand(VB, 1, 5, 2, 16)), (0, 0)),
    "rope tables": (lambda q, c, s: ops.rope(q, cos=c, sin=s)[0],
                    (rand(1, 5, 4, 16), torch.stack([VCOS] * VB), torch.stack([VSIN * 0.5] * VB)),
                    (None, 0, 0)),
    "rms_norm_rope": (lambda x: ops.rms_norm_rope(x, cos=VCOS, sin=VSIN, head_dim=16),
                      (rand(VB, 1, 5, 2, 16),), (0,)),
}


@needs_vmap_rules
@pytest.mark.parametrize("name", list(VMAP_CASES))
def test_vmap_matches_a_loop(name):
    fn, args, in_dims = VMAP_CASES[name]
    with torch.no_grad():
        got = torch.vmap(fn, in_dims=in_dims)(*args)
        want = _vmap_loop(fn, args, in_dims)
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.shape, w.shape)
        assert torch.equal(g, w), (g - w).abs().max()


@needs_vmap_rules
def test_vmap_out_dims_and_nesting():
    x, w = rand(VB, 2, 4, 64), rand(64)
    with torch.no_grad():
        got = torch.vmap(torch.vmap(lambda t: ops.rms_norm(t, w)), out_dims=1)(x)
        want = ops.rms_norm(x, w).transpose(0, 1)
    assert torch.equal(got, want)


@needs_vmap_rules
@pytest.mark.parametrize("call", ["add_rms_norm", "gated_residual", "rope_"])
def test_vmap_of_an_in_place_op_raises(call):
    x, r = rand(VB, 1, 5, 4, 16), rand(VB, 1, 5, 4, 16)
    fns = {"add_rms_norm": lambda a, b: ops.add_rms_norm(a, b),
           "gated_residual": lambda a, b: ops.gated_residual(a, b, torch.ones(16)),
           "rope_": lambda a, b: ops.rope_(a, cos=VCOS, sin=VSIN)}
    with torch.no_grad(), pytest.raises(KfuseError, match="in place.*vmap"):
        torch.vmap(fns[call])(x, r)


def test_func_grad_and_jvp_raise():
    """No backward and no derivative formulas: torch.func's grad and jvp refuse, as autograd
    and forward-mode AD outside them do."""
    x = rand(3, 8)
    with pytest.raises(KfuseError, match="no backward"):
        torch.func.grad(lambda t: ops.gelu(t).sum())(x)
    with pytest.raises(KfuseError, match="forward-mode tangent"):
        torch.func.jvp(lambda t: ops.silu(t), (x,), (torch.ones_like(x),))
