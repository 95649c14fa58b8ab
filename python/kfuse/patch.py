"""kfuse.patch - plug kfuse ops into HuggingFace transformers and diffusers models.

    report = kfuse.patch(model)     # replaces module forwards, returns a PatchReport
    print(report)                   # what was replaced (per kind, module names), what was skipped and why
    kfuse.unpatch(model)            # restores every original forward / attribute exactly

patch() dispatches by module types: modules defined in `transformers` go to
kfuse.patch_transformers, modules defined in `diffusers` (and any torch.nn.RMSNorm) go to
kfuse.patch_diffusers. A diffusers pipeline (an object with `.components`) is patched component by
component. Patch BEFORE enabling CPU offload: offload hooks wrap the forward that is in place;
remove such hooks before unpatch() (a forward wrapped after patch() keeps kfuse's under it, with a
warning, rather than losing the hook).

The patched forwards call kfuse.ops, which dispatch on the tensor's device: a model on the CPU runs
the CPU backend, a CUDA model the GPU backend. The kfuse ops have no backward: wherever autograd
would record (grad mode on and an input or weight that requires grad: training, fine-tuning an
adapter, or a model called without torch.no_grad()), a patched forward runs the original code
instead, so gradients are right; run the patched model under torch.no_grad() /
torch.inference_mode() for kfuse's kernels. (Called directly, kfuse.ops raise in that case.)

Under torch.compile the default compile_policy="auto" keeps kfuse ops only where they beat
inductor's own kernels (diffusers LTX: rms_norm_rope and gelu); the other patched forwards run
their original code while dynamo traces them (torch.compiler.is_compiling()), so inductor fuses
them. compile_policy="all" keeps every kfuse op in compiled graphs as well. See patch().

Mechanics (shared by both patchers, kept here):
  - a module forward is replaced by an instance attribute `module.forward = MethodType(fn, module)`;
    undo deletes that attribute again (or puts back an instance forward that was there before, e.g.
    an offload hook's), so the class forward is what runs after unpatch(). A replacement that
    falls back calls call_original(self, ...), which finds the original from the module it runs
    on: a deep copy of a patched model runs its own weights (and unpatch() of the copy restores
    its forwards), and so do the replicas nn.DataParallel makes (an instance
    _replicate_for_data_parallel binds their forwards to them). A copy.copy shares the
    original's forward, as it shares its parameter dict. (A subclass per patched class, which
    would carry the forward to every copy, breaks diffusers' registries looked up by exact
    class, e.g. FirstBlockCache's, and code reading the forward's signature.) A pickled patched
    module (torch.save) loads unpatched: a bound method pickles as getattr(module, its name), and
    the names "forward" and "_replicate_for_data_parallel" give the class's own on load;
  - attributes (an attention processor) are replaced with setattr and put back with setattr;
  - module-level functions (transformers' apply_rotary_pos_emb) are shared by every model of that
    family in the process: they are replaced once and reference-counted, and restored when the last
    patched model is unpatched (a patched model that is garbage collected without unpatch() gives
    its reference back too, so it cannot leave the replacement in place for models built later).
"""

import functools
import types
import warnings
import weakref
from dataclasses import dataclass, field

import torch

_MISSING = object()
COMPILE_POLICIES = ("auto", "all")


# The activation dtypes the kfuse ops take (docs/ops.md): a patched forward whose activations
# have another dtype (a model in float64, or .double()'d after patching) runs its original code.
KFUSE_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def gemma_weight(w, dtype):
    """A Gemma-style (1 + w) norm weight for kfuse rms_norm on activations of `dtype`: as it is
    when f32 or `dtype`, else as f32 (the op takes those two; HF computes 1 + w.float() anyway,
    so the values are the same)."""
    return w if w.dtype == dtype or w.dtype == torch.float32 else w.float()


def hf_rope_fits(q, k, cos, sin, unsqueeze_dim, partial=False, f32_tables=False):
    """True where kfuse rope "half" computes HF's apply_rotary_pos_emb(q, k, cos, sin,
    unsqueeze_dim=...): q and k 4-D of one kfuse dtype, tables [S, Dh] or [B, S, Dh] as wide as
    the head (GPT-OSS's half-width tables pair channels otherwise) and of q's dtype (HF's
    q * cos promotes the result to the tables' dtype; the op takes no 16-bit table for an f32
    q), unsqueeze_dim 1 ([B, H, S, Dh]) or 2 ([B, S, H, Dh]). partial: the function rotates
    the first r = cos.shape[-1] channels of each head and passes the rest (Qwen3.5's and
    Qwen3-Next's): tables of any even width up to the head's fit too. f32_tables: the function
    rounds its f32 result to q's dtype (OLMo's): f32 tables with 16-bit q fit too."""
    r = cos.shape[-1] if cos.dim() else 0
    return (q.dim() == 4 and k.dim() == 4 and cos.dim() in (2, 3) and unsqueeze_dim in (1, 2)
            and cos.shape == sin.shape
            and (r == q.shape[-1] or (partial and 0 < r < q.shape[-1] and r % 2 == 0))
            and k.shape[-1] == q.shape[-1]
            and q.dtype in KFUSE_DTYPES and k.dtype == q.dtype
            and sin.dtype == cos.dtype
            and (cos.dtype == q.dtype or (f32_tables and cos.dtype == torch.float32)))


def once_per_class(probe):
    """probe(cls), run once per class and kept: a constant to torch.compile (what it reads, a
    class's own code, does not change)."""
    results = {}

    @torch.compiler.assume_constant_result
    def get(cls):
        if cls not in results:
            results[cls] = probe(cls)
        return results[cls]

    return get


def norm_eps(module):
    """A norm module's eps: its `variance_epsilon` (HF's name) or else its `eps`."""
    eps = getattr(module, "variance_epsilon", None)
    if eps is None:
        eps = getattr(module, "eps", None)
    return eps


def rms_normalized(x, eps):
    """x / sqrt(mean(x^2) + eps) over the last dim, in f32."""
    xf = x.float()
    return xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)


@once_per_class
def rms_norm_form(norm_class):
    """How norm_class's own forward(x) computes a weighted RMSNorm over x's last dim, as the
    kfuse rms_norm mode that gives the same 16-bit output: "llama" (weight * normalized
    rounded to x's dtype), "none" (weight * normalized in f32, rounded once: GPT-OSS, OLMo 2,
    DeepSeek-V4, ...), "gemma" ((1 + weight) * normalized in f32, rounded once: Gemma, Qwen3.5,
    ...), or "" (none of these, or the forward reads more than a weight and an eps). Found once
    per class by running its forward on an instance that holds just a weight and an eps
    (`variance_epsilon` and `eps`), on bf16 and f16 [2, 3, 64] probes where the three
    differ, bit for bit; a constant to torch.compile."""
    found = set()
    for dtype in (torch.bfloat16, torch.float16):
        g = torch.Generator().manual_seed(0)
        x = torch.randn(2, 3, 64, generator=g).to(dtype)
        w = (1 + 0.3 * torch.randn(64, generator=g)).to(dtype)
        eps = 0.25                              # large: where eps goes shows as well
        n = rms_normalized(x, eps)
        forms = {"llama": w * n.to(dtype), "none": (w.float() * n).to(dtype),
                 "gemma": (n * (1 + w.float())).to(dtype)}
        try:
            probe = norm_class.__new__(norm_class)
            torch.nn.Module.__init__(probe)
            probe.weight = torch.nn.Parameter(w, requires_grad=False)
            probe.variance_epsilon = probe.eps = eps
            with torch.no_grad():
                got = norm_class.forward(probe, x)
        except Exception:
            return ""
        found.add(next((name for name, y in forms.items() if isinstance(got, torch.Tensor)
                        and got.dtype == y.dtype and torch.equal(got, y)), ""))
    return found.pop() if len(found) == 1 else ""


def gated_norm_fits(x, weight, gate, activation):
    """True where kfuse rms_norm "llama" then glu "silu" compute Qwen3-Next's gated norm
    `(weight * normalize(x).to(dtype)) * silu(gate.float())`, rounded to x's dtype: a silu
    gate of x's shape, x, weight and gate of one kfuse dtype (HF promotes a wider weight's
    product), nothing for autograd to record."""
    return (gate is not None and activation in ("silu", "swish") and x.dtype in KFUSE_DTYPES
            and weight.dtype == x.dtype and gate.dtype == x.dtype and gate.shape == x.shape
            and not grad_needed(x, weight, gate))


def grad_needed(*tensors):
    """True when autograd records through any of these tensors (grad mode on and one of them
    requires grad): kfuse ops have no backward, so a patched forward then runs the original code."""
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


def inference_tensor_outside_mode(t):
    """True when t is an inference tensor (made under torch.inference_mode()) and inference
    mode is off: kfuse's in-place ops refuse to write it there, as torch's do. False while
    torch.compile traces (dynamo cannot trace is_inference): a compiled graph that writes one
    raises KfuseError when it runs (the op's ADInplaceOrView kernel checks), where torch's own
    compiled in-place ops write it."""
    return (not torch.compiler.is_compiling() and t.is_inference()
            and not torch.is_inference_mode_enabled())


def leave_to_compiler(policy):
    """True while torch.compile traces a patched forward that compile_policy "auto" leaves to
    inductor (the forward then runs its original code)."""
    return policy == "auto" and torch.compiler.is_compiling()

# model -> list of undo callables (run in reverse order by unpatch)
_UNDO = weakref.WeakKeyDictionary()
# id(module) -> module, for every module whose forward kfuse replaced (guards against double
# patching). Weak values: a module that is garbage collected drops out, so neither it nor its
# weights are kept alive here and a later object that gets the same id is never taken for it.
_PATCHED_FORWARDS = weakref.WeakValueDictionary()
# (module object, attribute name) -> [original value, reference count]
_SHARED = {}


@dataclass
class PatchReport:
    """What kfuse.patch did: replaced[kind] = module names, skipped = (module name, reason)."""

    replaced: dict = field(default_factory=dict)
    skipped: list = field(default_factory=list)
    notes: list = field(default_factory=list)      # (module name, remark) about something replaced

    def add(self, kind, name):
        self.replaced.setdefault(kind, []).append(name)

    def skip(self, name, reason):
        self.skipped.append((name, reason))

    def note(self, name, text):
        self.notes.append((name, text))

    @property
    def counts(self):
        return {kind: len(names) for kind, names in self.replaced.items()}

    @property
    def total(self):
        return sum(self.counts.values())

    def merge(self, other, prefix=""):
        for kind, names in other.replaced.items():
            for n in names:
                self.add(kind, prefix + n)
        for n, reason in other.skipped:
            self.skip(prefix + n, reason)
        for n, text in other.notes:
            self.note(prefix + n, text)
        return self

    def __str__(self):
        lines = [f"kfuse patch: {self.total} replacements"]
        for kind, names in sorted(self.replaced.items()):
            shown = ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")
            lines.append(f"  {kind:<16} {len(names):>4}  ({shown})")
        if self.skipped:
            lines.append(f"  skipped {len(self.skipped)}:")
            for name, reason in self.skipped[:20]:
                lines.append(f"    {name or '<root>'}: {reason}")
            if len(self.skipped) > 20:
                lines.append(f"    ... {len(self.skipped) - 20} more")
        if self.notes:
            lines.append(f"  notes {len(self.notes)}:")
            for name, text in self.notes[:20]:
                lines.append(f"    {name or '<root>'}: {text}")
            if len(self.notes) > 20:
                lines.append(f"    ... {len(self.notes) - 20} more")
        return "\n".join(lines)


def load_ops():
    """kfuse.ops, imported when a patch is made (so that importing kfuse.patch needs no library)."""
    import importlib

    return importlib.import_module("kfuse.ops")


# ---------------------------------------------------------------------------------------------
# low-level replacement helpers used by the patchers


# module.__dict__ key of an instance forward that a kfuse replacement stands in for (every key
# with the prefix _kfuse_ is kfuse's, and goes when the forward is restored)
_SAVED_FORWARD = "_kfuse_saved_forward"
# module.__dict__ key of kfuse's _replicate_for_data_parallel (below), removed with the forward,
# and where an instance one that was there before is kept meanwhile
_REPLICATE = "_replicate_for_data_parallel"
_SAVED_REPLICATE = "_kfuse_saved_replicate"


def _kfuse_forward(module):
    """True when the module's instance forward is a kfuse replacement (its own, or a deep copy's)."""
    fwd = module.__dict__.get("forward")
    return getattr(getattr(fwd, "__func__", None), "__kfuse__", False)


def _replicate_for_data_parallel(self):
    """nn.Module._replicate_for_data_parallel for a module with a kfuse forward (an instance
    attribute while patched): the replica nn.DataParallel makes is a shallow copy, whose instance
    forward would stay bound to `self` and run its weights; here the replica's forward (and this
    method) are bound to the replica. Named as the method it stands in for, so that a pickled
    module, whose bound methods pickle by name, loads with the class's own."""
    replica = type(self)._replicate_for_data_parallel(self)
    if _kfuse_forward(self):
        replica.__dict__["forward"] = types.MethodType(self.__dict__["forward"].__func__, replica)
    replica.__dict__[_REPLICATE] = types.MethodType(_replicate_for_data_parallel, replica)
    return replica


def _ours_replicate(module):
    return getattr(module.__dict__.get(_REPLICATE), "__func__", None) is _replicate_for_data_parallel


def is_patched(module):
    return id(module) in _PATCHED_FORWARDS or _kfuse_forward(module)


def _restore_forward(module):
    if "forward" in module.__dict__ and not _kfuse_forward(module):
        # a wrapper installed after patch() (an offload or cache hook) calls kfuse's forward:
        # taking that away would drop the hook, so kfuse's forward stays under it
        warnings.warn("kfuse.unpatch: %s's forward was wrapped after patch() (a hook?); kfuse's "
                      "forward stays in place under that wrapper. Remove such hooks before "
                      "unpatch() to restore the original forward." % type(module).__name__,
                      stacklevel=4)
        return
    saved = module.__dict__.get(_SAVED_FORWARD, _MISSING)
    saved_replicate = module.__dict__.get(_SAVED_REPLICATE, _MISSING)
    for key in [k for k in module.__dict__ if k.startswith("_kfuse_")]:
        del module.__dict__[key]
    if _ours_replicate(module):
        del module.__dict__[_REPLICATE]
        if saved_replicate is not _MISSING:
            module.__dict__[_REPLICATE] = saved_replicate
    if saved is _MISSING:
        module.__dict__.pop("forward", None)
    else:
        module.forward = saved
    _PATCHED_FORWARDS.pop(id(module), None)


def replace_forward(model, module, fn, **state):
    """Make `fn(module, *args, **kw)` the forward of this module instance; remember how to undo.
    state: instance attributes the replacement reads (names starting with _kfuse_), removed on undo."""
    saved = module.__dict__.get("forward", _MISSING)
    if saved is not _MISSING:
        module.__dict__[_SAVED_FORWARD] = saved
    for key, value in state.items():
        assert key.startswith("_kfuse_"), key
        module.__dict__[key] = value
    if fn.__name__ != "forward":
        fn = _named_forward(fn)
    fn.__kfuse__ = True
    module.forward = types.MethodType(fn, module)
    if not _ours_replicate(module):
        # an instance one before patch() (a module loaded from a pickle of a patched one has the
        # class's, bound) is kept aside: DataParallel gets kfuse's, which rebinds the forward
        if _REPLICATE in module.__dict__:
            module.__dict__[_SAVED_REPLICATE] = module.__dict__[_REPLICATE]
        module.__dict__[_REPLICATE] = types.MethodType(_replicate_for_data_parallel, module)
    _PATCHED_FORWARDS[id(module)] = module
    # a weak reference: the undo list of `model` (a weak key) must not keep `model` alive, and
    # `module` may be the model itself (a decoder layer patched on its own)
    _UNDO.setdefault(model, []).append(functools.partial(_restore_forward_of, weakref.ref(module)))


def _named_forward(fn):
    """fn under the name "forward": a bound method pickles as getattr(module, its name), so a
    pickled patched module (torch.save) loads with its class's forward rather than failing."""
    def forward(self, *args, **kwargs):
        return fn(self, *args, **kwargs)

    return forward


def _restore_forward_of(module_ref):
    module = module_ref()
    if module is not None:
        _restore_forward(module)


def call_original(module, *args, **kwargs):
    """Run the forward that kfuse's replacement stands in for, on `module` itself (an instance
    forward that was in place before patch(), else the class forward)."""
    saved = module.__dict__.get(_SAVED_FORWARD)
    if saved is not None:
        return saved(*args, **kwargs)
    return type(module).forward(module, *args, **kwargs)


def original_forward(module):
    """The forward of a module kfuse has not patched (bound method), for inspection at patch time."""
    saved = module.__dict__.get("forward", _MISSING)
    if saved is not _MISSING:
        return saved
    return types.MethodType(type(module).forward, module)


def replace_attr(model, obj, name, value):
    """setattr(obj, name, value) with undo (used for attention processors)."""
    saved = getattr(obj, name)
    setattr(obj, name, value)

    def undo():
        setattr(obj, name, saved)

    _UNDO.setdefault(model, []).append(undo)


def replace_shared(model, owner, name, make_value):
    """Replace a module-level attribute shared by all models (reference counted).

    make_value(original) builds the replacement the first time. Returns the replacement in place.
    The reference is also released when `model` is garbage collected without unpatch(), so a model
    that was dropped does not leave the replacement in place for models built later."""
    key = (id(owner), name)
    if key not in _SHARED:
        original = getattr(owner, name)
        _SHARED[key] = [original, 0, owner]
        setattr(owner, name, make_value(original))
    _SHARED[key][1] += 1

    def release():
        entry = _SHARED.get(key)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] <= 0:
            setattr(owner, name, entry[0])
            del _SHARED[key]

    # a finalize object runs `release` once: from unpatch() (calling it) or when the model dies
    undo = weakref.finalize(model, release)
    undo.atexit = False
    _UNDO.setdefault(model, []).append(undo)
    return getattr(owner, name)


def shared_original(owner, name):
    entry = _SHARED.get((id(owner), name))
    return entry[0] if entry is not None else getattr(owner, name)


# ---------------------------------------------------------------------------------------------
# public entry points


def _module_origin(m):
    mod = type(m).__module__ or ""
    return mod.split(".", 1)[0]


def patch(model, **options):
    """Replace the memory-bound layers of `model` with kfuse ops; returns a PatchReport.

    options (all default True): norms, rope, mlp, residual (transformers decoder-layer seam),
    blocks (diffusers LTX blocks), attention (diffusers LTX attention processors), gelu,
    inplace_residual (LTX blocks update their input hidden_states in place, as the model loop allows).
    compile_policy (default "auto"): what a patched forward does while torch.compile traces it.
      "auto": kfuse ops only where they beat what inductor generates - in diffusers LTX models the
              fused q/k RMSNorm + rotary in the positions form (rms_norm_rope) and gelu; RMSNorm
              modules, the LTX block's modulation and residual adds, and every transformers patch
              (norms, rope, GLU, residual seam) run their original code there, which inductor fuses
              as well and launches for less host time (a kfuse op is an opaque call in the compiled
              graph). Eager calls of the same model still run every kfuse op.
      "all":  every kfuse op inside compiled graphs too.
    """
    if options.get("compile_policy", "auto") not in COMPILE_POLICIES:
        raise ValueError(f"kfuse.patch: compile_policy must be one of {', '.join(COMPILE_POLICIES)}, "
                         f"got {options['compile_policy']!r}")
    if not isinstance(model, torch.nn.Module) and hasattr(model, "components"):
        report = PatchReport()
        for cname, comp in model.components.items():
            if isinstance(comp, torch.nn.Module):
                report.merge(patch(comp, **options), prefix=f"{cname}.")
        return report
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"kfuse.patch expects a torch.nn.Module or a pipeline, got {type(model).__name__}")

    origins = {_module_origin(m) for m in model.modules()}
    has_rms = any(isinstance(m, getattr(torch.nn, "RMSNorm", ())) for m in model.modules())
    report = PatchReport()
    if "transformers" in origins:
        from . import patch_transformers

        patch_transformers.patch_transformers(model, report=report, **options)
    if "diffusers" in origins or has_rms:
        from . import patch_diffusers

        patch_diffusers.patch_diffusers(model, report=report, **options)
    if report.total == 0 and not report.skipped:
        report.skip("", "no module kfuse knows (transformers / diffusers / torch.nn.RMSNorm)")
    return report


def unpatch(model):
    """Undo every replacement kfuse.patch made on `model` (and on its pipeline components)."""
    if not isinstance(model, torch.nn.Module) and hasattr(model, "components"):
        n = 0
        for comp in model.components.values():
            if isinstance(comp, torch.nn.Module):
                n += unpatch(comp)
        return n
    undos = _UNDO.pop(model, [])
    for undo in reversed(undos):
        undo()
    # what patch() did not record: a deep copy of a patched model (patch() of the copy then
    # only took the shared references)
    return len(undos) + _unpatch_copy(model)


def _unpatch_copy(model):
    """unpatch() of a model that patch() did not see (a deep copy of a patched one): its kfuse
    forwards and objects that remember what they replaced (`kfuse_replaced`, the LTX attention
    processors). The module-level functions are the patched original's to give back."""
    n = 0
    for m in model.modules():
        if _kfuse_forward(m):
            _restore_forward(m)
            n += 1
        proc = getattr(m, "processor", None)
        if getattr(proc, "kfuse_replaced", None) is not None:
            m.processor = proc.kfuse_replaced
            n += 1
    return n


def verify_engaged(model, *inputs, **kwargs):
    """kfuse.engaged.verify_engaged (re-exported here for kfuse.verify_engaged)."""
    from .engaged import verify_engaged as _verify

    return _verify(model, *inputs, **kwargs)
