"""kfuse.engaged - check that a patched model really runs kfuse ops.

    rep = kfuse.verify_engaged(model, *inputs, **kwargs)
    print(rep)      # kfuse ops that ran (with call counts), PyTorch ops that kfuse replaces that still ran

One forward runs under torch.no_grad() with two counters in place, both plain Python, so the result
is the same on every machine (whether CUDA is available or not, however many CPU threads):
  - kfuse ops: every public kfuse.ops function (rms_norm, rope, glu, ...) is wrapped for the duration
    of the forward and counts its calls as "kfuse::<function>". The patched forwards call kfuse.ops
    through the module (ops.rms_norm(...)), so each call is seen, also where kfuse.ops runs the C
    library directly without going through torch's dispatcher (its eager fast path, which the
    profiler cannot see). Calls made by torch.ops.kfuse.* directly are counted by the next counter.
  - aten ops: a TorchDispatchMode counts the aten operators that the unfused PyTorch code of the
    replaced layers uses (rsqrt: RMSNorm; gelu / silu: activations; neg: rotate_half rope; cos / sin:
    rope tables built per forward), outside kfuse ops only ("leftover"). Model code outside the
    replaced layers may legitimately use some of them too (e.g. a final LayerNorm), so read the list,
    don't just count it.
When the model is on a GPU the forward also runs under torch.profiler (CPU + CUDA activity) and
the report lists the GPU kernels that ran (device_kernels), with the kfuse ones printed.
"""

import importlib
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# aten op -> the kfuse replacement that should have taken it over
REPLACED_TORCH_OPS = {
    "aten::rsqrt": "rms_norm / add_rms_norm / ada_norm",
    "aten::rms_norm": "rms_norm",
    "aten::_fused_rms_norm": "rms_norm",
    "aten::gelu": "gelu / glu",
    "aten::silu": "glu",
    "aten::neg": "rope (rotate_half)",
    "aten::cos": "rope (positions form)",
    "aten::sin": "rope (positions form)",
}

# the public functions of kfuse.ops that run a kfuse kernel
KFUSE_FUNCTIONS = ("rms_norm", "add_rms_norm", "layer_norm", "ada_norm", "add_ada_norm", "gated_residual",
                   "rope", "rms_norm_rope", "glu", "glu_packed", "gelu", "silu", "softmax")


@dataclass
class EngagedReport:
    kfuse_ops: dict = field(default_factory=dict)      # "kfuse::op" -> calls
    leftover: dict = field(default_factory=dict)       # "aten::op" -> calls, for ops kfuse replaces
    device_kernels: dict = field(default_factory=dict)  # GPU kernel name -> launches (CUDA only)
    output: object = None

    @property
    def engaged(self):
        return bool(self.kfuse_ops)

    def __str__(self):
        lines = ["kfuse ops that ran:" if self.kfuse_ops else "no kfuse op ran"]
        for k, v in sorted(self.kfuse_ops.items()):
            lines.append(f"  {k:<28} {v}")
        if self.leftover:
            lines.append("replaced PyTorch ops that still ran:")
            for k, v in sorted(self.leftover.items()):
                lines.append(f"  {k:<28} {v}   ({REPLACED_TORCH_OPS.get(k, '')})")
        else:
            lines.append("none of the replaced PyTorch ops ran")
        kf = {k: v for k, v in self.device_kernels.items() if "kf_" in k or "kfuse" in k}
        if kf:
            lines.append("kfuse GPU kernels:")
            for k, v in sorted(kf.items()):
                lines.append(f"  {k[:60]:<60} {v}")
        return "\n".join(lines)


class _Counter:
    """Call counts, and how deep the current call is inside kfuse ops (ops inside don't count)."""

    def __init__(self):
        self.kfuse_ops = {}
        self.leftover = {}
        self.depth = 0


def _wrap(name, fn, counter, ranges):
    def counted(*args, **kwargs):
        if counter.depth == 0:
            key = "kfuse::" + name
            counter.kfuse_ops[key] = counter.kfuse_ops.get(key, 0) + 1
        counter.depth += 1
        try:
            if ranges:                          # a named range in the profiler trace as well
                with torch.profiler.record_function("kfuse::" + name):
                    return fn(*args, **kwargs)
            return fn(*args, **kwargs)
        finally:
            counter.depth -= 1

    counted.__wrapped__ = fn
    return counted


class _AtenCounter(TorchDispatchMode):
    """Counts operators reaching the dispatcher outside kfuse ops: kfuse::* (custom ops called
    directly) and the aten ops in REPLACED_TORCH_OPS."""

    def __init__(self, counter):
        super().__init__()
        self.counter = counter

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if self.counter.depth == 0:
            name = func._schema.name
            if name.startswith("kfuse::"):
                self.counter.kfuse_ops[name] = self.counter.kfuse_ops.get(name, 0) + 1
            elif name in REPLACED_TORCH_OPS:
                self.counter.leftover[name] = self.counter.leftover.get(name, 0) + 1
        return func(*args, **(kwargs or {}))


def _on_cuda(model):
    for p in model.parameters():
        return p.is_cuda
    return False


def verify_engaged(model, *inputs, **kwargs):
    """Run model(*inputs, **kwargs) once under the counters; return an EngagedReport."""
    ops = importlib.import_module("kfuse.ops")
    cuda = torch.cuda.is_available() and _on_cuda(model)
    counter = _Counter()
    saved = {}
    for name in KFUSE_FUNCTIONS:
        fn = getattr(ops, name, None)
        if callable(fn):
            saved[name] = fn
            setattr(ops, name, _wrap(name, fn, counter, cuda))
    prof = None
    try:
        with torch.no_grad():
            if cuda:
                from torch.profiler import ProfilerActivity, profile

                with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                    with _AtenCounter(counter):
                        out = model(*inputs, **kwargs)
                    torch.cuda.synchronize()
            else:
                with _AtenCounter(counter):
                    out = model(*inputs, **kwargs)
    finally:
        for name, fn in saved.items():
            setattr(ops, name, fn)
    rep = EngagedReport(kfuse_ops=counter.kfuse_ops, leftover=counter.leftover, output=out)
    if prof is not None:
        for ev in prof.key_averages():
            if getattr(ev, "device_time_total", 0) > 0 and ev.key.startswith(("void ", "kf_")):
                rep.device_kernels[ev.key] = rep.device_kernels.get(ev.key, 0) + ev.count
    return rep
