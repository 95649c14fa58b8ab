"""kfuse.bench - kfuse's torch ops against the PyTorch code they replace, op by op.

    python -m kfuse.bench                      # every op at the docs/bench.md shapes
    python -m kfuse.bench --op rms_norm --op rope --quick --json out.json
    python -m kfuse.bench --timing eager       # per-call launches (host cost included)
    python -m kfuse.bench --e2e ...            # end-to-end models: kfuse.bench_e2e.main(args)

Peers per op, in one process, interleaved, on the same inputs:
  eager    the code as model files write it (HF LlamaRMSNorm, diffusers modulation, HF
           rotate_half rope, LTX interleaved rope with tables, act(gate) * up)
  F        torch.nn.functional's fused op where one exists (F.rms_norm, F.layer_norm, F.softmax)
  compile  torch.compile of the eager code
  liger    Liger-Kernel's functional ops, when liger_kernel imports (CUDA only)
Protocol (docs/bench.md): every implementation is checked against a float64 reference
(ops.md tolerances) before it is timed, and a wrong one is not timed; inputs rotate among
sets totalling >= 2x the L2 (cold cache); CUDA events on the current stream; one global
warm-up, then per implementation max(2 calls, 25 ms) of warm-up (torch.compile compiles
here), then per case >= 10 samples and >= 100 ms, implementations interleaved.
Timing (--timing, CUDA only):
  graph    (default) N calls of an implementation, call c on input set c mod n_sets, are
           captured into one CUDA graph after its warm-up (on a side stream); a sample is
           one replay between two events and the time per call is replay / N, so host-side
           launch and Python cost are left out. N makes a replay >= ~1 ms and spans the
           whole rotation, within a memory cap. An implementation whose capture raises is
           timed the eager way instead and marked "*".
  eager    a sample is a batch of ordinary calls between two events (per call = batch / N):
           the host cost of each call is inside it whenever the host is the slower side.
Outputs (--outputs): rotate (default) keeps each implementation's outputs of the last
n_sets calls alive, so that consecutive calls write different buffers, as the copy (one
destination per set) and `kfuse bench` do; reuse drops each output at once, so that the
allocator hands the next call the same buffer, whose lines the previous call may have left
dirty in L2 (a write path that a model, with other kernels between two calls, does not see).
The device copy of the same bytes and the launch floor (an empty kernel) are timed the
same way as the implementations. Reported: median and p20-p80 per call, GB/s (each input
read once plus each output written once), time / the copy, the launch floor, the ratio
kfuse / each peer (< 1: kfuse is faster), and how each row was timed. Without CUDA the
same cases run on CPU tensors at reduced row counts with few samples, host clock: a smoke
test, not a measurement.
"""
import argparse
import json
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F

from . import ops
from .patch_transformers import _make_rope

TOL = {
    torch.float32: (1e-5, 1e-5, 1e-5),
    torch.float16: (2e-3, 1e-3, 2e-3),
    torch.bfloat16: (1e-2, 1e-2, 1.6e-2),
}
DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}


# ---- the model code each op replaces (eager peers) ---------------------------------------

def eager_rms_llama(x, w, eps):
    """HF LlamaRMSNorm.forward."""
    dtype = x.dtype
    h = x.to(torch.float32)
    var = h.pow(2).mean(-1, keepdim=True)
    h = h * torch.rsqrt(var + eps)
    return w * h.to(dtype)


def eager_rms_noweight(x, eps):
    """diffusers RMSNorm(elementwise_affine=False).forward."""
    dtype = x.dtype
    var = x.to(torch.float32).pow(2).mean(-1, keepdim=True)
    return (x * torch.rsqrt(var + eps)).to(dtype)


def eager_rms_gated(x, gate, w, eps):
    """HF Qwen3.5 / Qwen3-Next RMSNormGated.forward (silu gate)."""
    return (eager_rms_llama(x, w, eps) * F.silu(gate.to(torch.float32))).to(x.dtype)


def eager_add_rms(x, res, w, eps):
    """HF decoder seam: residual = residual + x; y = norm(residual)."""
    r = res + x
    return eager_rms_llama(r, w, eps), r


def eager_ada(x, scale, shift, eps):
    """LTX-Video: norm1(h) * (1 + scale_msa) + shift_msa, norm1 = RMSNorm without weight."""
    return eager_rms_noweight(x, eps) * (1 + scale) + shift


def eager_add_ada(h, a, gate, scale, shift, eps):
    h = h + a * gate
    return eager_ada(h, scale, shift, eps), h


def eager_gated(h, a, gate):
    return h + a * gate


def eager_rope_half(q, k, cos, sin):
    """HF apply_rotary_pos_emb: q, k [B, H, S, Dh]; cos, sin [B, S, Dh]."""
    def rotate_half(x):
        x1 = x[..., : x.shape[-1] // 2]
        x2 = x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), dim=-1)
    cos = cos.unsqueeze(1)
    sin = sin.unsqueeze(1)
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


def eager_rope_ltx(x, cos, sin):
    """LTX-Video apply_rotary_emb: x [B, S, D]; cos, sin [B, S, D] f32, pairs (2i, 2i+1)."""
    x_real, x_imag = x.unflatten(2, (-1, 2)).unbind(-1)
    x_rot = torch.stack([-x_imag, x_real], dim=-1).flatten(2)
    return (x.float() * cos + x_rot.float() * sin).to(x.dtype)


def eager_glu(gate, up, act):
    if act == "silu":
        return F.silu(gate) * up
    return F.gelu(gate, approximate="tanh") * up


# ---- float64 references --------------------------------------------------------------------

def ref_rms(x, w, eps, mode):
    x64 = x.double()
    n = x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + eps)
    if mode == "llama":
        n = n.to(x.dtype).double()
    return n if w is None else n * w.double()


def ref_rope_rows(x, cos, sin, convention):
    """x [..., r] f64 rotated with cos/sin broadcast to it."""
    if convention == "half":
        h = x.shape[-1] // 2
        rot = torch.cat([-x[..., h:], x[..., :h]], -1)
    else:
        x2 = x.unflatten(-1, (-1, 2))
        rot = torch.stack([-x2[..., 1], x2[..., 0]], -1).flatten(-2)
    return x * cos + rot * sin


def check(out, ref, dtype, elementwise=True):
    """(ok, relative error) against the float64 reference with the ops.md tolerances:
    ||out-ref||/||ref|| always, and the elementwise bound when `elementwise`. kfuse gets
    both. Peers get the norm bound only: model code rounds intermediate values to the
    activation dtype (norm, then * (1 + scale), then + shift), which the f32-then-round-once
    contract does not, so single elements may miss the elementwise bound where terms cancel."""
    rel, atol, rtol = TOL[dtype]
    o = out.double()
    r = ref.double().to(o.device)
    if o.shape != r.shape:
        return False, float("inf")
    err = ((o - r).norm() / max(r.norm().item(), 1e-30)).item()
    ok = err <= rel
    if elementwise:
        ok = ok and bool(((o - r).abs() <= atol + rtol * r.abs()).all())
    return ok, err


# ---- cases ---------------------------------------------------------------------------------

class Case:
    """One op at one shape: make(n) builds n input sets; impls map a name to fn(inputs);
    ref(inputs) is the float64 reference of the first output; nbytes counts I/O once;
    touched: the bytes one call touches in its set where some implementation works in place
    (the buffer it reads and writes counted once; default nbytes): the rotation is sized by it."""

    def __init__(self, op, label, make, nbytes, ref, impls, outputs_of=None, touched=None):
        self.op, self.label, self.make, self.nbytes = op, label, make, nbytes
        self.touched = nbytes if touched is None else touched
        self.ref, self.impls = ref, impls
        self.outputs_of = outputs_of or (lambda r: r[0] if isinstance(r, tuple) else r)


def randn(n, shape, dtype, dev, scale=1.0):
    """n input sets of one tensor: views into one allocation."""
    t = torch.randn((n,) + tuple(shape), device=dev, dtype=torch.float32) * scale
    t = t.to(dtype)
    return [t[i] for i in range(n)]


LIGER_ERROR = []


def ltx_grid_positions(B, S, dev):
    """positions [B, S, 3] f32 of LTX-Video's latent grid of S tokens (25 frames at 480 x 704:
    4 x 15 x 22 = 1320; 161 frames at 512 x 768: 21 x 16 x 24 = 8064; otherwise frames of 16
    rows of 24), columns fastest, 2 * grid - 1 with each coordinate normalized to [0, 1): a
    token shares its frame and row with its neighbours, as in the model (and kfuse bench)."""
    rows, cols = (15, 22) if S == 1320 else (16, 24)
    frames = -(-S // (rows * cols))
    s = torch.arange(S, device=dev)
    cells = torch.stack([s // (rows * cols), s // cols % rows, s % cols], -1).double()
    extent = torch.tensor([frames, rows, cols], dtype=torch.float64, device=dev)
    return (2 * (cells + 0.5) / extent - 1).float().expand(B, S, 3).contiguous()


def _liger():
    try:
        from liger_kernel.transformers import functional as lf
        return lf
    except Exception as e:                              # not installed, or no triton / GPU
        LIGER_ERROR.append("%s: %s" % (type(e).__name__, str(e).split("\n")[0]))
        return None


def build_cases(dtype, dev, rows_cap, quick, with_compile, with_liger):
    es = dtype.itemsize
    lf = _liger() if with_liger else None
    cases = []

    def compiled(fn):
        return torch.compile(fn, dynamic=False) if with_compile else None

    def add(op, label, make, nbytes, ref, impls, outputs_of=None, touched=None):
        cases.append(Case(op, label, make, nbytes, ref, {k: v for k, v in impls.items() if v},
                          outputs_of, touched))

    def R(m):
        return max(1, min(m, rows_cap))

    # rms_norm (weight, llama casting)
    # (2048 x 4096: the norms of the end-to-end Llama prefill)
    shapes = [(1, 4096), (64, 4096), (2048, 4096), (8192, 4096), (16128, 2048), (8192, 8192),
              (4096, 5120)]
    shapes += [(4096, d) for d in (111, 769, 3584, 5125)]
    if quick:
        shapes = [(2048, 4096), (8192, 4096), (4096, 769)]
    c_rms = compiled(eager_rms_llama)
    for M, D in dict.fromkeys((R(M), D) for M, D in shapes):    # capped rows: once each

        def make(n, M=M, D=D):
            w = randn(1, (D,), dtype, dev)[0]
            return [dict(x=x, w=w) for x in randn(n, (M, D), dtype, dev)]
        add("rms_norm", "%dx%d" % (M, D), make, 2 * M * D * es + D * es,
            lambda i: ref_rms(i["x"], i["w"], 1e-6, "llama"),
            {"kfuse": lambda i: ops.rms_norm(i["x"], i["w"], 1e-6, "llama"),
             "eager": lambda i: eager_rms_llama(i["x"], i["w"], 1e-6),
             "F": lambda i: F.rms_norm(i["x"], (i["x"].shape[-1],), i["w"], 1e-6),
             "compile": c_rms and (lambda i, f=c_rms: f(i["x"], i["w"], 1e-6)),
             "liger": lf and (lambda i: lf.liger_rms_norm(i["x"], i["w"], 1e-6))})

    # the gated norm of Qwen3.5's linear-attention output (4096 tokens x 32 heads of 128): kfuse
    # has no fused kernel for it, it runs rms_norm then glu (5 tensor passes, the copy moves 3)
    c_gated = compiled(eager_rms_gated)
    M, D = R(4096 * 32), 128

    def make(n, M=M, D=D):
        w = randn(1, (D,), dtype, dev)[0]
        return [dict(x=x, g=g, w=w) for x, g in zip(randn(n, (M, D), dtype, dev),
                                                   randn(n, (M, D), dtype, dev, 2.0))]
    add("rms_norm_gated", "%dx%d" % (M, D), make, 3 * M * D * es + D * es,
        lambda i: (ref_rms(i["x"], i["w"], 1e-6, "llama").to(dtype).double()
                   * F.silu(i["g"].double())),
        {"kfuse": lambda i: ops.glu(i["g"], ops.rms_norm(i["x"], i["w"], 1e-6, "llama"), "silu"),
         "eager": lambda i: eager_rms_gated(i["x"], i["g"], i["w"], 1e-6),
         "compile": c_gated and (lambda i, f=c_gated: f(i["x"], i["g"], i["w"], 1e-6))})

    # add_rms_norm
    c_add = compiled(eager_add_rms)
    shapes = [(2048, 4096), (8192, 4096)] if quick else [(64, 4096), (2048, 4096), (8192, 4096)]
    for M, D in dict.fromkeys((R(M), D) for M, D in shapes):

        def make(n, M=M, D=D):
            w = randn(1, (D,), dtype, dev)[0]
            xs, rs = randn(n, (M, D), dtype, dev), randn(n, (M, D), dtype, dev)
            return [dict(x=x, r=r, w=w) for x, r in zip(xs, rs)]
        add("add_rms_norm", "%dx%d" % (M, D), make, 4 * M * D * es + D * es,
            lambda i: ref_rms((i["x"].double() + i["r"].double()).to(dtype), i["w"], 1e-6,
                              "llama"),
            {"kfuse": lambda i: ops.add_rms_norm(i["x"], i["r"], i["w"], 1e-6, "llama"),
             "eager": lambda i: eager_add_rms(i["x"], i["r"], i["w"], 1e-6),
             "compile": c_add and (lambda i, f=c_add: f(i["x"], i["r"], i["w"], 1e-6)),
             "liger": lf and (lambda i: lf.liger_fused_add_rms_norm(i["x"], i["r"], i["w"],
                                                                     1e-6))},
            touched=3 * M * D * es + D * es)            # kfuse writes the residual in place

    # ada_norm / add_ada_norm / gated_residual: conditioning [B, 1, D] views, stride 6*D
    def cond(n, B, D):
        temb = randn(n, (B, 6 * D), dtype, dev, 0.5)
        return [t.reshape(B, 1, 6, D).unbind(2) for t in temb]

    c_ada = compiled(eager_ada)
    for S in ([8064] if quick else [1320, 8064]):
        B, D, S = 2, 2048, R(S)

        def make(n, B=B, S=S, D=D):
            return [dict(x=x, shift=c[0], scale=c[1])
                    for x, c in zip(randn(n, (B, S, D), dtype, dev), cond(n, B, D))]
        add("ada_norm", "2x%dx%d" % (S, D), make, 2 * B * S * D * es + 2 * B * D * es,
            lambda i: ref_rms(i["x"], None, 1e-6, "none") * (1 + i["scale"].double())
            + i["shift"].double(),
            {"kfuse": lambda i: ops.ada_norm(i["x"], i["scale"], i["shift"], None, 1e-6),
             "eager": lambda i: eager_ada(i["x"], i["scale"], i["shift"], 1e-6),
             "F": lambda i: F.rms_norm(i["x"], (i["x"].shape[-1],), None, 1e-6)
             * (1 + i["scale"]) + i["shift"],
             "compile": c_ada and (lambda i, f=c_ada: f(i["x"], i["scale"], i["shift"], 1e-6)),
             "liger": lf and (lambda i: lf.liger_modulated_rms_norm(
                 i["x"], None, i["scale"], i["shift"], 1e-6, casting_mode="none"))})

    B, D, S = 2, 2048, R(8064)

    def make_seam(n, B=B, S=S, D=D):
        hs, as_ = randn(n, (B, S, D), dtype, dev), randn(n, (B, S, D), dtype, dev)
        return [dict(h=h, a=a, shift=c[0], scale=c[1], gate=c[2])
                for h, a, c in zip(hs, as_, cond(n, B, D))]

    def ref_add_ada(i):
        h = (i["h"].double() + i["a"].double() * i["gate"].double()).to(dtype)
        return ref_rms(h, None, 1e-6, "none") * (1 + i["scale"].double()) + i["shift"].double()
    c_add_ada = compiled(eager_add_ada)
    add("add_ada_norm", "2x%dx%d" % (S, D), make_seam, 4 * B * S * D * es + 3 * B * D * es,
        ref_add_ada,
        {"kfuse": lambda i: ops.add_ada_norm(i["h"], i["a"], i["scale"], i["shift"], i["gate"]),
         "eager": lambda i: eager_add_ada(i["h"], i["a"], i["gate"], i["scale"], i["shift"],
                                          1e-6),
         "compile": c_add_ada and (lambda i, f=c_add_ada: f(i["h"], i["a"], i["gate"],
                                                            i["scale"], i["shift"], 1e-6))},
        touched=3 * B * S * D * es + 3 * B * D * es)    # kfuse writes h in place

    def kf_gated(i):
        ops.gated_residual(i["h"], i["a"], i["gate"])
        return i["h"]
    c_gated = compiled(eager_gated)
    add("gated_residual", "2x%dx%d" % (S, D), make_seam, 3 * B * S * D * es + B * D * es,
        lambda i: i["h"].double() + i["a"].double() * i["gate"].double(),
        {"kfuse": kf_gated,
         "eager": lambda i: eager_gated(i["h"], i["a"], i["gate"]),
         "compile": c_gated and (lambda i, f=c_gated: f(i["h"], i["a"], i["gate"]))},
        touched=2 * B * S * D * es + B * D * es)        # kfuse writes h in place

    # rope, LTX: interleaved, tables f32 [B, S, D]; and the positions form
    c_ltx = compiled(eager_rope_ltx)
    for S in ([8064] if quick else [1320, 8064]):
        B, D, S = 2, 2048, R(S)
        npair = D // 2

        def make(n, B=B, S=S, D=D, npair=npair):
            # LTX-Video's: npair % 3 identity pairs at the front, then k-major axis-minor
            # frequencies theta^(k / (K - 1)) * pi / 2 (theta 10000); positions 2 * grid - 1
            # of the video's latent grid (ltx_grid_positions): angles up to ~1.6e4 rad, as in
            # the model
            pad, K = npair % 3, npair // 3
            k = torch.arange(K, device=dev, dtype=torch.float64)
            f = (10000.0 ** (k / (K - 1)) * (math.pi / 2)).repeat_interleave(3)
            freqs = torch.cat([torch.zeros(pad, device=dev, dtype=torch.float64), f]).float()
            axis = torch.cat([torch.zeros(pad, device=dev, dtype=torch.int32),
                              (torch.arange(3 * K, device=dev) % 3).to(torch.int32)])
            out = []
            for x in randn(n, (B, S, D), dtype, dev):
                pos = ltx_grid_positions(B, S, dev)
                ang = (freqs * pos[..., axis.long()]).repeat_interleave(2, -1)
                out.append(dict(x=x, cos=ang.cos(), sin=ang.sin(), pos=pos, freqs=freqs,
                                axis=axis))
            return out

        def ref(i):
            ang = (i["freqs"] * i["pos"][..., i["axis"].long()]).double().repeat_interleave(2, -1)
            return ref_rope_rows(i["x"].double(), ang.cos(), ang.sin(), "interleaved")
        peers = {"eager": lambda i: eager_rope_ltx(i["x"], i["cos"], i["sin"]),
                 "compile": c_ltx and (lambda i, f=c_ltx: f(i["x"], i["cos"], i["sin"]))}
        add("rope_ltx", "2x%dx%d tables" % (S, D), make, 2 * B * S * D * (es + 4), ref,
            dict(kfuse=lambda i: ops.rope(i["x"], cos=i["cos"], sin=i["sin"],
                                          convention="interleaved")[0], **peers))
        add("rope_ltx", "2x%dx%d positions" % (S, D), make, 2 * B * S * D * es, ref,
            dict(kfuse=lambda i: ops.rope(i["x"], positions=i["pos"], freqs=i["freqs"],
                                          axis=i["axis"], convention="interleaved")[0],
                 **peers))

    # rope, Llama: half, q 32 heads, k 8 heads, Dh 128, HF layout [B, H, S, Dh]: contiguous,
    # or ("proj view") the transposed view of [B, S, H, Dh] memory that HF's attention
    # rotates (q_proj(x).view(B, S, H, Dh).transpose(1, 2))
    c_half = compiled(eager_rope_half)
    patched_rope = _make_rope(ops, eager_rope_half, False, "all")   # what kfuse.patch installs
    llama_shapes = [(1, 4096, False), (1, 4096, True)] + ([] if quick else [(16, 1, False)])
    for B, S, proj_view in llama_shapes:
        S = R(S)

        def make(n, B=B, S=S, proj_view=proj_view):
            out = []
            if proj_view:
                qs = [t.transpose(1, 2) for t in randn(n, (B, S, 32, 128), dtype, dev)]
                ks = [t.transpose(1, 2) for t in randn(n, (B, S, 8, 128), dtype, dev)]
            else:
                qs = randn(n, (B, 32, S, 128), dtype, dev)
                ks = randn(n, (B, 8, S, 128), dtype, dev)
            inv = 1.0 / 500000.0 ** (torch.arange(0, 128, 2, device=dev).float() / 128)
            for q, k in zip(qs, ks):
                pos = torch.randint(0, 8192, (B, S), device=dev).float()
                emb = (pos[..., None] * inv).repeat(1, 1, 2)
                out.append(dict(q=q, k=k, cos=emb.cos().to(dtype), sin=emb.sin().to(dtype)))
            return out

        def ref(i):
            c, s = i["cos"].double()[:, None], i["sin"].double()[:, None]
            return torch.cat([ref_rope_rows(i["q"].double(), c, s, "half"),
                              ref_rope_rows(i["k"].double(), c, s, "half")], 1)

        nbytes = 2 * B * S * 40 * 128 * es + 2 * B * S * 128 * es
        add("rope_llama", "B%d x %d tok%s" % (B, S, " proj view" if proj_view else ""), make,
            nbytes, ref,
            # kfuse as kfuse.patch calls it (a projection view rotated as the [B, S, H, Dh]
            # memory it is, outputs in the inputs' layout as eager's and compile's)
            {"kfuse": lambda i: patched_rope(i["q"], i["k"], i["cos"], i["sin"]),
             "eager": lambda i: eager_rope_half(i["q"], i["k"], i["cos"], i["sin"]),
             "compile": c_half and (lambda i, f=c_half: f(i["q"], i["k"], i["cos"], i["sin"])),
             # Liger rotates q and k in place over the projection's view; contiguous
             # [B, H, S, Dh] q / k (a layout HF does not pass) its rope_forward first
             # copies to [B, S, H, Dh], its own layout, and rotates the copies
             "liger": lf and (lambda i: lf.liger_rope(i["q"], i["k"], i["cos"], i["sin"]))},
            outputs_of=lambda r: torch.cat(r, 1),      # q and k checked together
            touched=nbytes - B * S * 40 * 128 * es)    # in place: q and k counted once
        if proj_view:
            # both in place, as Liger's patch rotates HF's q / k: kfuse.ops.rope_ against Liger
            add("rope_llama", "B%d x %d tok proj view in place" % (B, S), make, nbytes, ref,
                {"kfuse": lambda i: ops.rope_(i["q"], i["k"], i["cos"], i["sin"],
                                              convention="half", layout="bhsd"),
                 "liger": lf and (lambda i: lf.liger_rope(i["q"], i["k"], i["cos"], i["sin"]))},
                outputs_of=lambda r: torch.cat(r, 1), touched=nbytes - B * S * 40 * 128 * es)

    # glu (two tensors)
    for act in ("silu", "gelu_tanh"):
        c_glu = compiled(eager_glu)
        for M in ([8192] if quick else [64, 8192]):
            M, I = R(M), 14336

            def make(n, M=M, I=I):
                return [dict(g=g, u=u) for g, u in zip(randn(n, (M, I), dtype, dev, 2.0),
                                                      randn(n, (M, I), dtype, dev))]

            def ref(i, act=act):
                g = i["g"].double()
                a = F.silu(g) if act == "silu" else F.gelu(g, approximate="tanh")
                return a * i["u"].double()
            lig = None
            if lf:
                lig = lf.liger_swiglu if act == "silu" else lf.liger_geglu
            add("glu_" + act, "%dx%d" % (M, I), make, 3 * M * I * es, ref,
                {"kfuse": lambda i, act=act: ops.glu(i["g"], i["u"], act),
                 "eager": lambda i, act=act: eager_glu(i["g"], i["u"], act),
                 "compile": c_glu and (lambda i, f=c_glu, act=act: f(i["g"], i["u"], act)),
                 "liger": lig and (lambda i, f=lig: f(i["g"], i["u"]))})

    # gelu tanh (LTX-Video FF), and erf (PyTorch's default GELU)
    M, D = R(16128), 8192
    for appr, name in (("tanh", "gelu"), ("none", "gelu_erf")):
        c_gelu = compiled(lambda x, appr=appr: F.gelu(x, approximate=appr))
        add(name, "%dx%d" % (M, D),
            lambda n, M=M, D=D: [dict(x=x) for x in randn(n, (M, D), dtype, dev, 2.0)],
            2 * M * D * es, lambda i, appr=appr: F.gelu(i["x"].double(), approximate=appr),
            {"kfuse": lambda i, appr=appr: ops.gelu(i["x"], appr),
             "eager": lambda i, appr=appr: F.gelu(i["x"], approximate=appr),
             "compile": c_gelu and (lambda i, f=c_gelu: f(i["x"]))})

    # softmax
    c_soft = compiled(lambda x: F.softmax(x, dim=-1))
    for M, D in ([(8192, 4096)] if quick else [(8192, 4096), (32768, 1024)]):
        M = R(M)
        add("softmax", "%dx%d" % (M, D),
            lambda n, M=M, D=D: [dict(x=x) for x in randn(n, (M, D), dtype, dev, 3.0)],
            2 * M * D * es, lambda i: torch.softmax(i["x"].double(), -1),
            {"kfuse": lambda i: ops.softmax(i["x"]),
             "F": lambda i: F.softmax(i["x"], dim=-1),
             "compile": c_soft and (lambda i, f=c_soft: f(i["x"])),
             "liger": lf and (lambda i: lf.liger_softmax(i["x"]))})

    # layer_norm (weight, bias)
    M, D = R(8192), 4096
    c_ln = compiled(lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b, 1e-5))

    def make_ln(n, M=M, D=D):
        w, b = randn(1, (D,), dtype, dev)[0], randn(1, (D,), dtype, dev)[0]
        return [dict(x=x, w=w, b=b) for x in randn(n, (M, D), dtype, dev, 2.0)]
    add("layer_norm", "%dx%d" % (M, D), make_ln, 2 * M * D * es + 2 * D * es,
        lambda i: F.layer_norm(i["x"].double(), (D,), i["w"].double(), i["b"].double(), 1e-5),
        {"kfuse": lambda i: ops.layer_norm(i["x"], i["w"], i["b"], 1e-5),
         "F": lambda i: F.layer_norm(i["x"], (D,), i["w"], i["b"], 1e-5),
         "compile": c_ln and (lambda i, f=c_ln: f(i["x"], i["w"], i["b"])),
         "liger": lf and (lambda i: lf.liger_layer_norm(i["x"], i["w"], i["b"], 1e-5))})
    return cases, lf is not None


# ---- timing ----------------------------------------------------------------------------------
# Three modes. "graph" (CUDA, the default): each implementation is warmed up, then N calls
# of it (call c on input set c % n_sets, so the graph walks the cold-L2 rotation) are
# captured into one CUDA graph; a sample is one replay timed with events, and the time
# per call is replay time / N, so host-side launch and Python cost are not in it. "eager"
# (CUDA, --timing eager): a sample is a batch of ordinary calls between two events, so the
# host cost of each call is inside the time whenever the host is slower than the kernel.
# "host" (CPU): the host clock around a batch of calls (the CPU backend is synchronous).

GRAPH_TARGET_MS = 1.0          # device time of one replay (and of one eager batch)
GRAPH_MAX_CALLS = 1 << 14      # calls captured in one graph, at most
GRAPH_MEM_CAP = 4 << 30        # memory a graph's private pool may take, at most (bytes)
COPY_ALIGN = 4096              # the reference copy's half, rounded up to this (run_case)


class Timer:
    """Runs and times fn over rotating input sets: CUDA events on the current stream, or
    the host clock on CPU."""

    def __init__(self, cuda, mode):
        self.cuda = cuda
        self.mode = mode                                 # "graph" | "eager" | "host"

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()

    def run(self, fn, sets, start, calls):
        """Elapsed ms for `calls` ordinary calls, inputs rotating from set index `start`."""
        n = len(sets)
        if self.cuda:
            e0 = torch.cuda.Event(enable_timing=True)
            e1 = torch.cuda.Event(enable_timing=True)
            e0.record()
            for c in range(calls):
                fn(sets[(start + c) % n])
            e1.record()
            e1.synchronize()
            return e0.elapsed_time(e1)
        t0 = time.perf_counter()
        for c in range(calls):
            fn(sets[(start + c) % n])
        return (time.perf_counter() - t0) * 1e3

    def warm_up(self, fn, sets, warm_ms):
        """max(2 calls, warm_ms) of ordinary calls (torch.compile compiles here). Returns
        the ms per call of the last batch. In graph mode this runs on a side stream, as
        graph capture wants: lazy initialisation then happens outside the capture."""
        if self.mode != "graph":
            return self._warm_up(fn, sets, warm_ms)
        main = torch.cuda.current_stream()
        side = torch.cuda.Stream()
        side.wait_stream(main)
        with torch.cuda.stream(side):
            per_call = self._warm_up(fn, sets, warm_ms)
        main.wait_stream(side)
        torch.cuda.synchronize()
        return per_call

    def _warm_up(self, fn, sets, warm_ms):
        calls = 2
        t = self.run(fn, sets, 0, calls)
        while t < warm_ms and calls < 1 << 16:
            calls *= 2
            t = self.run(fn, sets, 0, calls)
        return t / calls


def capture_graph(fn, sets, calls):
    """A CUDA graph of `calls` calls of fn, call c on sets[c % len(sets)]. Returns (graph,
    bytes its memory pool took). Raises what the capture raises, with torch's current
    stream restored (torch.cuda.graph leaves its capture stream current when the end of
    a failed capture raises)."""
    main = torch.cuda.current_stream()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    before = torch.cuda.memory_reserved()
    g = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(g):
            for c in range(calls):
                fn(sets[c % len(sets)])
    finally:
        torch.cuda.set_stream(main)
    torch.cuda.synchronize()
    return g, max(0, torch.cuda.memory_reserved() - before)


def replay_ms(g):
    e0 = torch.cuda.Event(enable_timing=True)
    e1 = torch.cuda.Event(enable_timing=True)
    e0.record()
    g.replay()
    e1.record()
    e1.synchronize()
    return e0.elapsed_time(e1)


def whole_rotations(calls, n_sets, cap):
    """calls rounded up to whole rotations over n_sets (down where cap is in the way), when
    it spans one at least: every replay starts again at set 0, so a partial last rotation
    would have the next replay reread sets that are still in the L2."""
    if calls < n_sets:
        return calls
    return min(-(-calls // n_sets) * n_sets, cap // n_sets * n_sets)


def build_graph(fn, sets, min_calls):
    """Capture fn into a graph whose replay lasts >= ~GRAPH_TARGET_MS of device time and
    spans at least min_calls calls (the whole input rotation), within GRAPH_MAX_CALLS and
    the memory budget. A probe graph of a few calls measures the device time and the
    memory per call; the graph is captured again at the size they call for. Returns
    (graph, calls)."""
    free = torch.cuda.mem_get_info()[0]
    budget = min(GRAPH_MEM_CAP, free // 8)
    calls = min(8, GRAPH_MAX_CALLS)
    for attempt in range(4):
        g, grown = capture_graph(fn, sets, calls)
        g.replay()                                       # the first replay uploads the graph
        torch.cuda.synchronize()
        ms = replay_ms(g)
        cap = GRAPH_MAX_CALLS
        if grown > 0:
            cap = max(1, min(cap, int(budget / (grown / calls))))
        want = math.ceil(calls * GRAPH_TARGET_MS / max(ms, 1e-4))
        want = whole_rotations(min(max(want, min_calls), cap), len(sets), cap)
        long_enough = ms >= 0.9 * GRAPH_TARGET_MS and calls >= min(min_calls, cap)
        if (long_enough and grown <= budget) or want == calls or attempt == 3:
            break
        g = None                                         # free it; capture again at the new size
        calls = want
    return g, calls


def percentile(xs, p):
    xs = sorted(xs)
    k = (len(xs) - 1) * p
    lo, hi = math.floor(k), math.ceil(k)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def time_impls(timer, impls, sets, min_samples, min_ms, warm_ms):
    """Interleaved timing: each round times one sample of every impl in turn. Every impl
    is warmed up first (and, in graph mode, captured) before any is timed. Returns
    {name: dict(median_us, p20_us, p80_us, samples, calls_per_sample, timing[,
    capture_error])}; timing is "graph", "eager" (batched calls per event pair) or "host";
    an impl whose capture raised is timed "eager" and carries the error."""
    plan = {}                                            # name -> (timing, calls, graph)
    errors = {}
    for name, fn in impls.items():
        per_call = timer.warm_up(fn, sets, warm_ms)
        if timer.mode == "graph":
            try:
                g, calls = build_graph(fn, sets, len(sets))
                plan[name] = ("graph", calls, g)
                continue
            except Exception as e:                       # not capturable: time it call by call
                errors[name] = "%s: %s" % (type(e).__name__, str(e).split("\n")[0])
                torch.cuda.synchronize()
        # a sample should last >= 1 ms on the GPU so event resolution and launch gaps do
        # not dominate; on the CPU one call is enough when it is long.
        target = GRAPH_TARGET_MS if timer.cuda else 0.0
        calls = max(1, min(1 << 16, int(math.ceil(target / max(per_call, 1e-6)))))
        plan[name] = ("eager" if timer.cuda else "host", calls, None)
    samples = {name: [] for name in impls}
    spent = {name: 0.0 for name in impls}
    pos = {name: 0 for name in impls}
    while True:
        done = all(len(samples[n]) >= min_samples and spent[n] >= min_ms for n in impls)
        if done:
            break
        for name, fn in impls.items():
            if len(samples[name]) >= min_samples and spent[name] >= min_ms:
                continue
            timing, calls, g = plan[name]
            if g is not None:
                ms = replay_ms(g)
            else:
                ms = timer.run(fn, sets, pos[name], calls)
                pos[name] += calls
            spent[name] += ms
            samples[name].append(ms * 1e3 / calls)
    out = {}
    for name, xs in samples.items():
        timing, calls, _ = plan[name]
        out[name] = dict(median_us=statistics.median(xs), p20_us=percentile(xs, 0.2),
                         p80_us=percentile(xs, 0.8), samples=len(xs),
                         calls_per_sample=calls, timing=timing)
        if name in errors:
            out[name]["capture_error"] = errors[name]
    plan.clear()                                         # free the graphs and their pools
    return out


def copy_half(nbytes):
    """Bytes the same-size copy reads (and writes): nbytes / 2 rounded up to COPY_ALIGN.
    A copy of a byte count that is not a multiple of 4 KiB runs slower (H200: 5 % on a
    stream, 50 % in a graph) and would flatter the op."""
    return -(-max(1, nbytes // 2) // COPY_ALIGN) * COPY_ALIGN


def n_sets_for(nbytes, l2_bytes, cap, min_sets=2):
    """Input sets so that what a call touches in them (nbytes per set) totals >= 2x the L2
    (cold cache), at least min_sets."""
    n = max(2, min_sets)
    if l2_bytes > 0:
        n = max(n, int(math.ceil(2 * l2_bytes / max(nbytes, 1))))
    return min(n, cap), l2_bytes > 0 and n > cap


# ---- main -------------------------------------------------------------------------------------

TIMING_DESC = {
    "graph": "CUDA graph replays: a graph of N calls walking the input rotation, timed with "
             "events per replay; per call = replay / N (host launch cost excluded)",
    "eager": "per-call launches: a batch of N ordinary calls per event pair; per call = "
             "batch / N (host launch cost included when the host is the slower side)",
    "host": "host clock around a batch of calls on CPU tensors",
}


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m kfuse.bench", description=__doc__.split("\n")[0])
    p.add_argument("--op", action="append", default=[],
                   help="only cases whose op name starts with this (repeatable)")
    p.add_argument("--quick", action="store_true", help="one or two shapes per op, fewer samples")
    p.add_argument("--json", metavar="FILE", help="write the results as JSON")
    p.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    p.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto")
    p.add_argument("--no-compile", action="store_true", help="leave out the torch.compile peer")
    p.add_argument("--no-liger", action="store_true", help="leave out the Liger-Kernel peer")
    p.add_argument("--timing", choices=["graph", "eager"], default="graph",
                   help="CUDA: graph (default) times replays of a CUDA graph of N calls, per "
                        "call = replay / N, without host launch cost; eager times batches of "
                        "ordinary calls per event pair, host cost included (ignored on CPU)")
    p.add_argument("--outputs", choices=["rotate", "reuse"], default="rotate",
                   help="rotate (default): each implementation's last n_sets outputs are kept "
                        "alive, so consecutive calls write different buffers, as the copy "
                        "does; reuse: every call gets the buffer the previous one freed")
    p.add_argument("--impl", action="append", default=[],
                   choices=["kfuse", "eager", "F", "compile", "liger"],
                   help="time only these implementations (repeatable); the copy and the "
                        "launch floor are always timed. Without it every implementation is "
                        "timed, interleaved")
    p.add_argument("--sets", type=int, default=2, metavar="N",
                   help="at least N input sets in the rotation (default 2; more are taken "
                        "until they total 2x the L2): a longer rotation leaves less of a "
                        "set in the L2 when its turn comes again")
    p.add_argument("--l2-resident", type=int, metavar="ROWS",
                   help="CUDA: a diagnostic, not the protocol: rows capped at ROWS (token "
                        "counts for the rope and AdaLN cases) and two input sets, so that a "
                        "case's inputs and outputs stay in the L2 (ROWS 512: under ~25 MB). "
                        "Times then show a kernel's instruction cost apart from DRAM; an H100 "
                        "shows what an H200 (same SMs and clocks) sees")
    p.add_argument("--kernels", action="store_true",
                   help="CUDA: also list, per implementation, the device kernels one call "
                        "launches and their median GPU durations (torch.profiler): kernel "
                        "time without launch gaps, and any extra kernels a call launches")
    p.add_argument("--e2e", action="store_true",
                   help="end-to-end model benchmarks instead: kfuse.bench_e2e.main(argv) "
                        "(see its own options)")
    return p.parse_known_args(argv)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--e2e" in argv:
        # End-to-end benchmarks live in kfuse.bench_e2e, which parses its own arguments
        # (--json, --cases, --iters, --no-compile) from the same command line.
        from . import bench_e2e
        rows = bench_e2e.main(argv)   # returns the rows (for tests)
        return 1 if bench_e2e.wrong_cells(rows) else 0
    args, rest = parse_args(argv)
    if rest:
        print("unknown arguments: %s" % " ".join(rest), file=sys.stderr)
        return 2
    if args.sets < 2:
        print("--sets: at least 2 (a call must not touch the buffers of the call before it)",
              file=sys.stderr)
        return 2

    cuda = torch.cuda.is_available() and args.device != "cpu"
    if args.device == "cuda" and not cuda:
        print("--device cuda: no CUDA device", file=sys.stderr)
        return 2
    dev = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
    dtype = DTYPES[args.dtype]
    torch.manual_seed(0)
    if cuda:
        props = torch.cuda.get_device_properties(dev)
        l2 = int(getattr(props, "L2_cache_size", 0))
        device_desc = "%s, L2 %.0f MB" % (props.name, l2 / 2**20)
        rows_cap = 1 << 30
        min_samples, min_ms, warm_ms = (10, 100.0, 25.0)
        if args.quick:
            min_ms = 50.0
            print("note: --quick: >= %.0f ms of samples per case, half the protocol's 100 ms"
                  % min_ms)
        set_cap = 4096
        if args.l2_resident:
            rows_cap, l2 = args.l2_resident, 0
            print("note: --l2-resident %d: rows capped at %d, two input sets, inputs and "
                  "outputs left in the L2: not the protocol's cold-cache figures"
                  % (rows_cap, rows_cap))
    else:
        l2 = 0
        device_desc = "cpu (%d threads)" % torch.get_num_threads()
        rows_cap = 64 if args.quick else 256
        min_samples, min_ms, warm_ms = 3, 5.0, 1.0
        set_cap = 2
        print("note: no CUDA device: running on CPU tensors, rows capped at %d, %d samples per "
              "case. These numbers are a smoke test of the CPU backend, not the protocol."
              % (rows_cap, min_samples))
    with_liger = cuda and not args.no_liger
    cases, have_liger = build_cases(dtype, dev, rows_cap, args.quick, not args.no_compile,
                                    with_liger)
    if args.op:
        cases = [c for c in cases if any(c.op.startswith(o) for o in args.op)]
    if not cases:
        print("no case matches --op %s" % " ".join(args.op), file=sys.stderr)
        return 2
    if args.impl:
        for c in cases:
            c.impls = {n: f for n, f in c.impls.items() if n in args.impl}
    from . import _lib
    print("kfuse %s (library %s), torch %s, %s, %s%s" % (
        _lib.version(), _lib.library_path(), torch.__version__, device_desc, args.dtype,
        "" if have_liger or not with_liger
        else "; liger-kernel not importable (%s)" % "; ".join(LIGER_ERROR)))

    mode = args.timing if cuda else "host"
    print("timing: %s; outputs: %s%s" % (TIMING_DESC[mode], args.outputs,
                                         "; only %s" % ", ".join(args.impl) if args.impl else ""))
    timer = Timer(cuda, mode)
    floor = None
    if cuda:
        # one global warm-up (~1 s) so clocks ramp, then the launch floor: an empty kernel
        a = torch.empty(64 << 20, device=dev, dtype=torch.uint8)
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 1.0:
            a.add_(1)
        torch.cuda.synchronize()
        del a
        fl = time_impls(timer, {"empty": lambda _: torch.cuda._sleep(0)}, [0],
                        min_samples, min_ms, warm_ms)["empty"]
        floor = fl["median_us"]
        print("launch floor (empty kernel, %s of %d calls): %.2f us%s" % (
            "graph" if fl["timing"] == "graph" else "batch", fl["calls_per_sample"], floor,
            "" if "capture_error" not in fl else "  (capture failed: %s)" % fl["capture_error"]))

    results = []
    for case in cases:
        res = run_case(case, timer, dev, dtype, l2, set_cap, min_samples, min_ms, warm_ms,
                       args.outputs, kernels=args.kernels and cuda, min_sets=args.sets)
        results.append(res)
        print_case(res)
    print_summary(results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=device_desc, cuda=cuda, dtype=args.dtype,
                           torch=torch.__version__, timing=mode, timing_desc=TIMING_DESC[mode],
                           outputs=args.outputs, impls_selected=args.impl or None,
                           launch_floor_us=floor, cases=results),
                      f, indent=1)
        print("wrote %s" % args.json)
    wrong = [r["op"] + " " + r["shape"] for r in results
             if not r["impls"].get("kfuse", dict(ok=True))["ok"]]
    if wrong:
        print("kfuse failed its check on %d case(s): %s" % (len(wrong), ", ".join(wrong)),
              file=sys.stderr)
        return 1
    return 0


def keep_outputs(fn, n):
    """fn, with the results of its last n calls held (a ring): each call then writes
    buffers no call of the last n wrote, as a rotation over n input sets would have it."""
    ring = [None] * n
    count = [0]

    def call(i):
        out = fn(i)
        ring[count[0] % n] = out
        count[0] += 1
        return out
    return call


def clone_layout(t):
    """A copy of t with t's strides (a strided view stays strided, so that the check runs
    the kernel path the timing runs; clone() would make it dense). Expanded (stride 0)
    tensors are cloned dense: no layout holds them without overlap."""
    if 0 in t.stride() or t.is_contiguous():
        return t.clone()
    out = torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=t.device)
    return out.copy_(t)


def run_case(case, timer, dev, dtype, l2, set_cap, min_samples, min_ms, warm_ms, outputs,
             kernels=False, min_sets=2):
    # sized by the less of what the op's call and the copy touch per set (in place: less)
    n_sets, from_l2 = n_sets_for(min(case.touched, 2 * copy_half(case.nbytes)), l2, set_cap,
                                 min_sets)
    sets = case.make(n_sets)
    # the limit: a device copy of the same number of bytes (half read, half written)
    half = copy_half(case.nbytes)
    src = torch.empty(half * n_sets, dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    copy_sets = [(src[i * half:(i + 1) * half], dst[i * half:(i + 1) * half])
                 for i in range(n_sets)]
    res = dict(op=case.op, shape=case.label, bytes=case.nbytes, input_sets=n_sets,
               from_l2=from_l2, impls={})
    timed = {}
    for name, fn in case.impls.items():
        first = {k: (clone_layout(v) if torch.is_tensor(v) else v) for k, v in sets[0].items()}
        ref = case.ref(first)
        try:
            out = case.outputs_of(fn(first))
            ok, err = check(out, ref, dtype, elementwise=(name == "kfuse"))
            res["impls"][name] = dict(ok=ok, rel_err=err)
        except Exception as e:                           # a peer that cannot run this case
            res["impls"][name] = dict(ok=False, error="%s: %s" % (type(e).__name__,
                                                                  str(e).split("\n")[0]))
            continue
        if ok:
            timed[name] = fn
    # the timed functions take a set index, so that the copy rotates like the op
    impls = {name: (lambda i, f=fn: f(sets[i])) for name, fn in timed.items()}
    if outputs == "rotate":
        impls = {name: keep_outputs(fn, n_sets) for name, fn in impls.items()}
    impls["copy"] = lambda i: copy_sets[i][1].copy_(copy_sets[i][0])
    idx = list(range(n_sets))
    times = time_impls(timer, impls, idx, min_samples, min_ms, warm_ms)
    if kernels:
        res["kernels"] = {name: kernel_durations(fn, idx) for name, fn in impls.items()}
        per_call = {name: sum(k["median_us"] * k["per_call"] for k in ks)
                    for name, ks in res["kernels"].items()}
        if per_call.get("kfuse") and per_call.get("copy"):
            res["kfuse_kernels_vs_copy"] = per_call["kfuse"] / per_call["copy"]
    copy = times.pop("copy")
    copy_us = copy["median_us"]
    copy["gbps"] = case.nbytes / (copy_us * 1e-6) / 1e9
    res["copy_us"] = copy_us
    res["copy"] = copy
    for name, tm in times.items():
        tm["gbps"] = case.nbytes / (tm["median_us"] * 1e-6) / 1e9
        tm["vs_copy"] = tm["median_us"] / copy_us
        res["impls"][name].update(tm)
    k = res["impls"].get("kfuse", {})
    if "median_us" in k:
        res["ratios"] = {name: k["median_us"] / v["median_us"]
                         for name, v in res["impls"].items()
                         if name != "kfuse" and "median_us" in v}
        res["kfuse_vs_copy"] = k["vs_copy"]
    return res


def kernel_durations(fn, sets, rounds=3):
    """The device kernels that calls of fn over the input sets launch (rounds passes, under
    torch.profiler): per kernel name, launches per call and the median GPU duration in us.
    Kernel time alone, without the gaps between launches that event timing includes."""
    from torch.profiler import profile, ProfilerActivity
    torch.cuda.synchronize()                            # fn is warm: run_case timed it first
    calls = rounds * len(sets)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for c in range(calls):
            fn(sets[c % len(sets)])
        torch.cuda.synchronize()
    per_name = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            per_name.setdefault(e.name, []).append(e.time_range.elapsed_us())
    return [dict(name=n, per_call=len(d) / calls, median_us=percentile(d, 0.5))
            for n, d in sorted(per_name.items(), key=lambda kv: -sum(kv[1]))]


def _how(v, n_sets):
    """How a row was timed: "graph x27", "eager x40", "host x1"; "*" marks a graph capture
    that failed (timed eager instead), "!" a graph spanning fewer calls than input sets."""
    how = "%s x%d" % (v["timing"], v["calls_per_sample"])
    if "capture_error" in v:
        how += "*"
    elif v["timing"] == "graph" and v["calls_per_sample"] < n_sets:
        how += "!"
    return how


def print_case(r):
    head = "%-14s %-24s %8.1f MB, %d input sets%s" % (
        r["op"], r["shape"], r["bytes"] / 1e6, r["input_sets"],
        "  (runs from L2)" if r["from_l2"] else "")
    print(head)
    print("  %-8s %10s %19s %8s %8s %8s  %s" % ("impl", "median us", "p20-p80 us", "GB/s",
                                                 "/copy", "kf/peer", "timed as"))
    notes = []
    for name, v in r["impls"].items():
        if "median_us" not in v:
            why = v.get("error") or "WRONG: rel err %.3g, not timed" % v.get("rel_err", -1)
            print("  %-8s %s" % (name, why))
            continue
        ratio = r.get("ratios", {}).get(name)
        print("  %-8s %10.2f %9.2f-%-9.2f %8.0f %8.2f %8s  %s" % (
            name, v["median_us"], v["p20_us"], v["p80_us"], v["gbps"], v["vs_copy"],
            "" if ratio is None else "%.2f" % ratio, _how(v, r["input_sets"])))
        if "capture_error" in v:
            notes.append("%s: graph capture failed, timed as eager batches (%s)"
                         % (name, v["capture_error"]))
    c = r["copy"]
    print("  %-8s %10.2f %9.2f-%-9.2f %8.0f %8.2f %8s  %s" % (
        "copy", c["median_us"], c["p20_us"], c["p80_us"], c["gbps"], 1.0, "",
        _how(c, r["input_sets"])))
    if "kfuse_vs_copy" in r:
        print("  device-to-device copy ratio: kfuse / copy = %.2f" % r["kfuse_vs_copy"])
    for name, ks in r.get("kernels", {}).items():
        print("  kernels of %s: %s" % (name, "; ".join(
            "%s%s %.2f us" % ("" if k["per_call"] == 1 else "%.2g x " % k["per_call"],
                              k["name"][:60], k["median_us"]) for k in ks) or "none seen"))
    for n in notes:
        print("  note: " + n)
    if any(v.get("timing") == "graph" and v["calls_per_sample"] < r["input_sets"]
           for v in list(r["impls"].values()) + [c]):
        print("  note: '!' graph of fewer calls than input sets (memory or size cap): part of "
              "the rotation only, L2 may be warm")


def print_summary(results):
    peers = []
    for r in results:
        for name in r.get("ratios", {}):
            if name not in peers:
                peers.append(name)
    print()
    print("kfuse time / peer time (< 1: kfuse faster; - : peer absent, wrong or kfuse failed); "
          "kf/copy: kfuse time / device copy of the same bytes")
    kern = any("kfuse_kernels_vs_copy" in r for r in results)
    if kern:
        print("kern/copy: kfuse's kernel time / the copy's, summed per call (--kernels)")
    print("%-14s %-24s" % ("op", "shape") + "".join("%9s" % p for p in peers) + "%9s" % "kf/copy"
          + ("%10s" % "kern/copy" if kern else ""))
    for r in results:
        row = "%-14s %-24s" % (r["op"], r["shape"])
        for p in peers:
            v = r.get("ratios", {}).get(p)
            row += "%9s" % ("-" if v is None else "%.2f" % v)
        row += "%9s" % ("-" if "kfuse_vs_copy" not in r else "%.2f" % r["kfuse_vs_copy"])
        if kern:
            v = r.get("kfuse_kernels_vs_copy")
            row += "%10s" % ("-" if v is None else "%.3f" % v)
        if "ratios" not in r:
            k = r["impls"].get("kfuse", {})
            row += "   kfuse: %s" % (k.get("error") or "wrong (rel err %.3g)" % k.get("rel_err", -1))
        print(row)


if __name__ == "__main__":
    sys.exit(main())
