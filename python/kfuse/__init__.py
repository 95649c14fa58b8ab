"""kfuse - fused, bandwidth-bound GPU kernels (RMSNorm, LayerNorm, AdaLN, residual fusions,
RoPE, gated activations, softmax) as PyTorch ops, plus patchers for HuggingFace models.

    import kfuse
    y = kfuse.ops.rms_norm(x, weight, eps=1e-6)      # torch.ops.kfuse.rms_norm underneath
    kfuse.patch(model)                                 # swap known module forwards (kfuse.patch)

The C library (libkfuse.so) is loaded on the first op call: see kfuse._lib for where it is
looked for (KFUSE_LIBRARY overrides). patch / unpatch / verify_engaged come from kfuse.patch
and are imported on first use, so the package works without transformers or diffusers.
"""
import sys
import types

from . import ops
from ._lib import KfuseError

__version__ = "0.1.0"

__all__ = ["ops", "KfuseError", "version", "library_version", "__version__",
           "patch", "unpatch", "verify_engaged"]


def version():
    """The package version ("0.1.0")."""
    return __version__


def library_version():
    """The loaded C library's version string (kf_version_string); loads the library."""
    from . import _lib
    return _lib.version()


def _patch_module():
    import importlib
    return importlib.import_module(__name__ + ".patch")


def patch(*args, **kwargs):
    """kfuse.patch.patch: replace the forwards of known modules in a model with kfuse ops."""
    return _patch_module().patch(*args, **kwargs)


def unpatch(*args, **kwargs):
    """kfuse.patch.unpatch: restore the forwards that patch() replaced."""
    return _patch_module().unpatch(*args, **kwargs)


def verify_engaged(*args, **kwargs):
    """kfuse.patch.verify_engaged: check that patched modules really run kfuse ops."""
    return _patch_module().verify_engaged(*args, **kwargs)


class _Package(types.ModuleType):
    """Importing the submodule kfuse.patch would bind the name kfuse.patch to that module
    and hide the function above; keep the function (the module stays in sys.modules)."""

    def __setattr__(self, name, value):
        if name == "patch" and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
