"""test_ops_random.py - kfuse.ops on random tensor layouts against float64 torch references.

Each case (its number is its seed) draws an op, a dtype, a shape of 1-6 dims and, for every
tensor of the call, a layout: contiguous, leading dims permuted in memory, a slice of a
larger tensor (offsets, steps, row padding), a last-dim stride of 2 (which the op copies),
or, for inputs the op only reads, a dim expanded from size 1 (stride 0). Mutated inputs
must come back written through their own layout. This is the Python side of the C suite's
random cases: what it exercises is kfuse.ops's view handling (dim merging down to the
library's 4, copies and copy-backs, broadcast conditioning), on the CPU backend and, when
there is a GPU, on CUDA tensors (there LayerNorm-kind rows are at least 33 wide: the GPU
keeps the row mean in f32, whose rounding exceeds the f32 tolerance in rows of 2 nearly
equal values; see the README's Known gaps).

Run: KFUSE_LIBRARY=build/libkfuse.so PYTHONPATH=python python -m pytest -q python/tests
"""
import pytest
import torch
import torch.nn.functional as F

from kfuse import ops
from kfuse import _lib
from kfuse import KfuseError

try:
    _lib.lib()
except KfuseError as e:          # no libkfuse.so: nothing here can run
    pytest.skip("libkfuse not loadable: %s" % e, allow_module_level=True)

from test_ops import DTYPES, assert_close, ref_ada, ref_layer, ref_rms  # noqa: E402

OPS = ["rms_norm", "add_rms_norm", "layer_norm", "ada_norm", "add_ada_norm", "gated_residual",
       "glu", "glu_packed", "gelu", "silu", "softmax"]
CASES = 400


class Draw:
    """Random choices from one seeded generator; tensors made on `device`."""

    def __init__(self, seed, device):
        self.g = torch.Generator().manual_seed(seed)
        self.device = device

    def int(self, lo, hi):                      # uniform in [lo, hi]
        return int(torch.randint(lo, hi + 1, (1,), generator=self.g))

    def pick(self, seq):
        return seq[self.int(0, len(seq) - 1)]

    def chance(self, p):
        return float(torch.rand(1, generator=self.g)) < p

    def values(self, shape, dtype, scale=1.0):
        t = torch.randn(*shape, generator=self.g, dtype=torch.float64) * scale
        return t.to(dtype).to(self.device)


def make(d, shape, dtype, read_only, scale=1.0):
    """A tensor of logical shape `shape` with random values in a random layout."""
    n = len(shape)
    kinds = ["contiguous", "permuted", "sliced", "inner_stride_2"]
    if read_only:
        kinds.append("expanded")
    kind = d.pick(kinds)
    if kind == "expanded":
        lead = [i for i in range(n - 1) if shape[i] > 1]
        if lead:
            i = d.pick(lead)
            base = list(shape)
            base[i] = 1
            return make(d, base, dtype, read_only, scale).expand(*shape)
        kind = "contiguous"
    if kind == "permuted" and n >= 3:
        perm = [int(p) for p in torch.randperm(n - 1, generator=d.g)] + [n - 1]
        stored = d.values([shape[p] for p in perm], dtype, scale)
        inverse = [perm.index(i) for i in range(n)]
        return stored.permute(*inverse)
    if kind == "sliced":
        big, index = [], []
        for i, s in enumerate(shape):
            off = d.int(0, 3)
            step = 2 if i < n - 1 and d.chance(0.3) else 1
            big.append(off + step * s + d.int(0, 3))
            index.append(slice(off, off + step * s, step))
        return d.values(big, dtype, scale)[tuple(index)]
    if kind == "inner_stride_2":
        return d.values(list(shape[:-1]) + [2 * shape[-1]], dtype, scale)[..., ::2]
    return d.values(shape, dtype, scale)


def cond_like(d, shape, dtype):
    """AdaLN conditioning for x's shape: per token, or broadcast over some leading dims."""
    cshape = list(shape)
    if d.chance(0.6):
        for i in range(len(shape) - 1):
            if d.chance(0.5):
                cshape[i] = 1
    return make(d, cshape, dtype, True, scale=0.5)


def case_args(seed, device):
    d = Draw(seed, device)
    op = d.pick(OPS)
    dtype = d.pick(DTYPES)
    n = d.int(1, 6)
    widths = [1, 2, 7, 8, 33, 64, 127, 200, 300]
    if device == "cuda" and op in ("layer_norm", "ada_norm", "add_ada_norm"):
        widths = widths[4:]
    shape = [d.int(1, 4) for _ in range(n - 1)] + [d.pick(widths)]
    return d, op, dtype, shape


DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device"))]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("seed", range(CASES))
def test_random_layouts(seed, device):
    d, op, dtype, shape = case_args(seed, device)
    D = shape[-1]
    wdtype = d.pick([torch.float32, dtype])
    if op in ("rms_norm", "add_rms_norm"):
        mode = d.pick(["llama", "gemma", "none"])
        w = d.values([D], wdtype, 0.2) + (0.0 if mode == "gemma" else 1.0)
        if mode != "gemma" and d.chance(0.3):
            w = None
        x = make(d, shape, dtype, True)
        offset = 1.0 if mode == "gemma" else 0.0
        if op == "rms_norm":
            assert_close(ops.rms_norm(x, w, 1e-6, mode), ref_rms(x, w, 1e-6, mode, offset))
            return
        res = make(d, shape, dtype, False)
        new_res = (x.double() + res.double()).to(dtype)
        y = ops.add_rms_norm(x, res, w, 1e-6, mode)
        assert_close(res, new_res.double())
        assert_close(y, ref_rms(new_res, w, 1e-6, mode, offset))
    elif op == "layer_norm":
        x = make(d, shape, dtype, True)
        w = d.values([D], wdtype) if d.chance(0.7) else None
        b = d.values([D], wdtype) if w is not None and d.chance(0.7) else None
        assert_close(ops.layer_norm(x, w, b, 1e-5), ref_layer(x, w, b, 1e-5))
    elif op == "ada_norm":
        kind = d.pick(["rms", "layer"])
        x = make(d, shape, dtype, True)
        scale = cond_like(d, shape, d.pick([torch.float32, dtype]))
        shift = cond_like(d, shape, d.pick([torch.float32, dtype])) if d.chance(0.7) else None
        w = d.values([D], wdtype) if d.chance(0.3) else None
        y = ops.ada_norm(x, scale, shift, w, 1e-6, kind)
        assert_close(y, ref_ada(x, scale, shift, w, 1e-6, kind))
    elif op in ("add_ada_norm", "gated_residual"):
        h = make(d, shape, dtype, False)
        a = make(d, shape, dtype, True)
        gate = cond_like(d, shape, d.pick([torch.float32, dtype]))
        if op == "gated_residual":
            new_h = h.double() + a.double() * gate.double()
            assert ops.gated_residual(h, a, gate) is None
            assert_close(h, new_h)
            return
        kind = d.pick(["rms", "layer"])
        gate = gate if d.chance(0.7) else None
        scale = cond_like(d, shape, d.pick([torch.float32, dtype]))
        shift = cond_like(d, shape, dtype) if d.chance(0.7) else None
        new_h = h.double() + a.double() * (gate.double() if gate is not None else 1.0)
        ref = ref_ada(new_h.to(dtype), scale, shift, None, 1e-6, kind)
        y = ops.add_ada_norm(h, a, scale, shift, gate, None, 1e-6, kind)
        assert_close(h, new_h)
        assert_close(y, ref)
    elif op == "glu":
        act = d.pick(["silu", "gelu_tanh", "gelu_erf"])
        gate, up = make(d, shape, dtype, True), make(d, shape, dtype, True)
        f = {"silu": F.silu, "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
             "gelu_erf": F.gelu}[act]
        assert_close(ops.glu(gate, up, act), f(gate.double()) * up.double())
    elif op == "glu_packed":
        gate_first = d.chance(0.5)
        x = make(d, shape[:-1] + [2 * D], dtype, True)
        first, second = x.double()[..., :D], x.double()[..., D:]
        g, u = (first, second) if gate_first else (second, first)
        assert_close(ops.glu_packed(x, "gelu_tanh", gate_first),
                     F.gelu(g, approximate="tanh") * u)
    elif op in ("gelu", "silu"):
        x = make(d, shape, dtype, True)
        if op == "silu":
            assert_close(ops.silu(x), F.silu(x.double()))
        else:
            approximate = d.pick(["tanh", "none"])
            assert_close(ops.gelu(x, approximate), F.gelu(x.double(), approximate=approximate))
    else:
        x = make(d, shape, dtype, True, scale=4.0)
        scale = d.pick([1.0, 0.125])
        assert_close(ops.softmax(x, scale), torch.softmax(x.double() * scale, -1))
