"""kfuse.engaged - check that a patched model really runs kfuse ops.

    rep = kfuse.verify_engaged(model, *inputs, **kwargs)
    print(rep)      # kfuse ops that ran (with call counts), PyTorch ops that kfuse replaces that still ran

One forward runs under torch.no_grad() and torch.profiler (CPU activity, plus CUDA when the model
is on a GPU). kfuse ops are the `kfuse::` operators in the profile. "Leftover" ops are the aten
operators that the unfused PyTorch code of the replaced layers uses (rsqrt: RMSNorm; gelu / silu:
activations; neg: rotate_half rope; cos / sin: rope tables built per forward); model code
outside the replaced layers may legitimately use some of them too (e.g. a final LayerNorm), so read
the list, don't just count it.
"""

from dataclasses import dataclass, field

import torch

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


def _on_cuda(model):
    for p in model.parameters():
        return p.is_cuda
    return False


def verify_engaged(model, *inputs, **kwargs):
    """Run model(*inputs, **kwargs) once under the profiler; return an EngagedReport."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    cuda = torch.cuda.is_available() and _on_cuda(model)
    if cuda:
        activities.append(ProfilerActivity.CUDA)
    with torch.no_grad(), profile(activities=activities) as prof:
        out = model(*inputs, **kwargs)
        if cuda:
            torch.cuda.synchronize()
    rep = EngagedReport(output=out)
    for ev in prof.events():
        name = ev.name
        if name.startswith("kfuse::"):
            if not _inside_kfuse(ev):
                rep.kfuse_ops[name] = rep.kfuse_ops.get(name, 0) + 1
        elif name in REPLACED_TORCH_OPS:
            if not _inside_kfuse(ev):        # aten ops a kfuse op itself calls don't count
                rep.leftover[name] = rep.leftover.get(name, 0) + 1
    if cuda:
        for ev in prof.key_averages():
            if getattr(ev, "device_time_total", 0) > 0 and ev.key.startswith(("void ", "kf_")):
                rep.device_kernels[ev.key] = rep.device_kernels.get(ev.key, 0) + ev.count
    return rep


def _inside_kfuse(ev):
    parent = getattr(ev, "cpu_parent", None)
    while parent is not None:
        if parent.name.startswith("kfuse::"):
            return True
        parent = getattr(parent, "cpu_parent", None)
    return False
