"""kfuse._lib - ctypes binding of libkfuse (include/kfuse.h): loading, structs, contexts, errors.

Where the library is found, first match wins:
  1. the KFUSE_LIBRARY environment variable (a path to libkfuse.so),
  2. libkfuse.so inside this package: kfuse/lib/, then kfuse/ (where `pip install .` puts it),
  3. the library an editable install (pip install -e) of this checkout built, in site-packages,
  4. build/libkfuse.so (then build-py/libkfuse.so) of the source checkout this file lives in.
The library is loaded on first use, so `import kfuse` works even where it is missing.

One kf_ctx per (thread, backend, device) is created on first use and kept for the life of
the thread (a context is for one thread at a time: it holds the stream and the last error);
when the thread ends, the next thread that needs one takes it over. For CUDA tensors the op is queued on torch's current stream of that device
(kf_ctx_set_stream whenever that stream differs from the one last set: what CUDA graph
capture needs).

Per-call fast path (every op call goes through it, so it is kept lean): make_view packs a
kf_tensor into bytes with a precompiled struct.Struct (PACK, one per ndim), and those bytes
are what the C functions get as `const kf_tensor *` (argtype c_void_p: ctypes passes the
address of the bytes' buffer, no ctypes structure is built); function(name) returns the
ctypes function (argtypes set once, at load; FUNCTIONS holds them by op name once loaded),
cpu_context() and cuda_context(index) return the cached context without building keys or
devices.
"""
import ctypes
import os
import struct
import threading

__all__ = ["KfuseError", "KfTensor", "KfRopeArgs", "lib", "library_path", "context",
           "check", "tensor_view", "DTYPES", "OPS"]

# kf_status
KF_OK = 0
# kf_dtype
KF_F32, KF_F16, KF_BF16, KF_I32 = 0, 1, 2, 3
# kf_backend
KF_BACKEND_AUTO, KF_BACKEND_CPU, KF_BACKEND_GPU = 0, 1, 2
KF_MAX_DIMS = 4

# Op keys (kf_op), in enum order.
OPS = ("rms_norm", "add_rms_norm", "layer_norm", "ada_norm", "add_ada_norm",
       "gated_residual", "rope", "rms_norm_rope", "glu", "gelu", "silu", "softmax")

_STATUS_NAMES = {
    0: "KF_OK", 1: "KF_ERR_NULL_POINTER", 2: "KF_ERR_INVALID_ARG", 3: "KF_ERR_DTYPE",
    4: "KF_ERR_SHAPE", 5: "KF_ERR_STRIDE", 6: "KF_ERR_UNSUPPORTED", 7: "KF_ERR_NO_DEVICE",
    8: "KF_ERR_GPU", 9: "KF_ERR_ALLOC", 10: "KF_ERR_INTERNAL",
}


class KfuseError(RuntimeError):
    """A kfuse call failed: KfuseError(message, status). .status is the kf_status code
    (None for errors raised in Python before reaching the library), .message the library's
    kf_last_error text. Both live in .args (no __init__ of its own): torch.compile can then
    trace the raise, and with fullgraph=True its error shows the message."""

    def __str__(self):
        return str(self.message)

    @property
    def message(self):
        return self.args[0] if self.args else ""

    @property
    def status(self):
        return self.args[1] if len(self.args) > 1 else None

    @property
    def status_name(self):
        return _STATUS_NAMES.get(self.status, str(self.status))


class KfTensor(ctypes.Structure):
    """Mirror of kf_tensor: 8 + 4 + 4 + 4*8 + 4*8 = 80 bytes."""
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("dtype", ctypes.c_int32),
        ("ndim", ctypes.c_int32),
        ("shape", ctypes.c_int64 * KF_MAX_DIMS),
        ("stride", ctypes.c_int64 * KF_MAX_DIMS),
    ]


assert ctypes.sizeof(KfTensor) == 80

# kf_tensor as bytes: data, dtype, ndim, shape[4], stride[4] (native alignment, no padding).
_VIEW = struct.Struct("=Qii4q4q")
assert _VIEW.size == ctypes.sizeof(KfTensor)
# PACK[n]: the pack function of a kf_tensor of n dims (1..4), which takes data, dtype, ndim,
# then the n sizes and the n strides (the unused entries are zero pad bytes).
PACK = (None,) + tuple(
    struct.Struct("=Qii%dq%dx%dq%dx" % (n, 8 * (KF_MAX_DIMS - n), n, 8 * (KF_MAX_DIMS - n))).pack
    for n in range(1, KF_MAX_DIMS + 1))
assert all(len(p(0, 0, 0, *range(2 * n))) == _VIEW.size for n, p in enumerate(PACK) if n)


def make_view(ptr, dtype, shape, stride):
    """A kf_tensor as bytes (what the C functions take): data pointer `ptr`, kf_dtype `dtype`,
    shape and stride (sequences of the same length 1..4, strides in elements). The caller
    checks ndim and the last stride."""
    n = len(shape)
    return PACK[n](ptr, dtype, n, *shape, *stride)


class View(bytes):
    """A packed kf_tensor that also keeps the tensor it points into alive (.tensor): the
    views of working copies made by the op."""


class KfRopeArgs(ctypes.Structure):
    """Mirror of kf_rope_args."""
    _fields_ = [
        ("convention", ctypes.c_int32),
        ("rotary_dim", ctypes.c_int32),
        ("cos", ctypes.POINTER(KfTensor)),
        ("sin", ctypes.POINTER(KfTensor)),
        ("positions", ctypes.POINTER(KfTensor)),
        ("freqs", ctypes.POINTER(KfTensor)),
        ("axis", ctypes.POINTER(KfTensor)),
    ]


# kf_rope_args as bytes: convention, rotary_dim, then the addresses of 5 kf_tensors (0: NULL).
_ROPE = struct.Struct("=ii5Q")
assert _ROPE.size == ctypes.sizeof(KfRopeArgs)
# A rope block: the kf_rope_args followed by the 5 kf_tensors it points to (cos, sin,
# positions, freqs, axis; zeros where absent), so one buffer holds all of them.
_ROPE_BLOCK = struct.Struct("=ii5Q80s80s80s80s80s")
_ROPE_BLOCK_TYPE = ctypes.c_char * _ROPE_BLOCK.size
_ROPE_PACK_INTO = _ROPE_BLOCK.pack_into
_ADDRESSOF = ctypes.addressof


def make_rope_args(convention, rotary_dim, cos, sin, positions, freqs, axis):
    """A rope block (a ctypes char array, what the C functions take as `const kf_rope_args *`)
    for the given packed kf_tensors (bytes from make_view; None: NULL). The block holds copies
    of the kf_tensors, not the tensors they point into: the caller keeps those alive until the
    library call returns."""
    block = _ROPE_BLOCK_TYPE()
    a = _ADDRESSOF(block) + _ROPE.size         # address of the first kf_tensor in the block
    _ROPE_PACK_INTO(block, 0, convention, rotary_dim,
                    0 if cos is None else a, 0 if sin is None else a + 80,
                    0 if positions is None else a + 160, 0 if freqs is None else a + 240,
                    0 if axis is None else a + 320,
                    cos or b"", sin or b"", positions or b"", freqs or b"", axis or b"")
    return block


_P = ctypes.c_void_p
_T = ctypes.c_void_p        # const kf_tensor *: a packed kf_tensor (bytes) or None
_R = ctypes.c_void_p        # const kf_rope_args *: a rope block (make_rope_args)
_I = ctypes.c_int
_F = ctypes.c_float

# name -> (restype, argtypes). Every kf_status function returns a C int.
_SIGNATURES = {
    "kf_status_string": (ctypes.c_char_p, [_I]),
    "kf_version": (_I, []),
    "kf_version_string": (ctypes.c_char_p, []),
    "kf_dtype_size": (ctypes.c_size_t, [_I]),
    "kf_ctx_create": (_I, [_I, _I, ctypes.POINTER(_P)]),
    "kf_ctx_free": (None, [_P]),
    "kf_ctx_backend": (_I, [_P]),
    "kf_ctx_set_stream": (_I, [_P, _P]),
    "kf_last_error": (ctypes.c_char_p, [_P]),
    "kf_ctx_describe": (ctypes.c_char_p, [_P]),
    "kf_op_name": (ctypes.c_char_p, [_I]),
    "kf_supports": (_I, [_P, _I, _I]),
    "kf_rms_norm": (_I, [_P, _T, _T, _F, _I, _F, _T]),
    "kf_add_rms_norm": (_I, [_P, _T, _T, _T, _F, _I, _F, _T]),
    "kf_layer_norm": (_I, [_P, _T, _T, _T, _F, _T]),
    "kf_ada_norm": (_I, [_P, _T, _T, _T, _T, _F, _I, _T]),
    "kf_add_ada_norm": (_I, [_P, _T, _T, _T, _T, _T, _T, _F, _I, _T]),
    "kf_gated_residual": (_I, [_P, _T, _T, _T]),
    "kf_rope": (_I, [_P, _T, _T, _T, _T, _R]),
    "kf_rms_norm_rope": (_I, [_P, _T, _T, _F, _I, _F, _R, _T]),
    "kf_glu": (_I, [_P, _T, _T, _I, _I, _T]),
    "kf_gelu": (_I, [_P, _T, _I, _T]),
    "kf_silu": (_I, [_P, _T, _T]),
    "kf_softmax": (_I, [_P, _T, _F, _T]),
    "kf_synchronize": (_I, [_P]),
}

_lock = threading.RLock()
_lib = None
_lib_path = None
_functions = {}
# op name -> ctypes function kf_<name> of every op, filled when the library is loaded
FUNCTIONS = {}
_CPU_KEY = (KF_BACKEND_CPU, 0)
# Per thread: .cpu = the CPU context, .cuda = {device index: [kf_ctx, stream last set on it]}
_local = threading.local()
_raw_stream_fn = None  # torch._C._cuda_getCurrentRawStream (or a fallback), looked up once


def _candidates():
    env = os.environ.get("KFUSE_LIBRARY")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))   # python/kfuse -> repo root
    names = [os.path.join(d, "libkfuse.so") for d in (os.path.join(here, "lib"), here)]
    names += _editable_library(root)
    names += [os.path.join(d, "libkfuse.so") for d in (os.path.join(root, "build"),
                                                       os.path.join(root, "build-py"))]
    return names


def _editable_library(root):
    """libkfuse.so of an editable install (pip install -e) of this very checkout: its modules stay
    here and the library it built goes to site-packages. PEP 610's direct_url.json of the installed
    distribution names the checkout; any other installed kfuse is not this code's library."""
    try:
        import json
        import urllib.parse
        from importlib import metadata

        dist = metadata.distribution("kfuse")
        info = json.loads(dist.read_text("direct_url.json") or "{}")
        url = info.get("url", "")
        if not info.get("dir_info", {}).get("editable") or not url.startswith("file://"):
            return []
        if os.path.realpath(urllib.parse.unquote(url[len("file://"):])) != os.path.realpath(root):
            return []
        return [str(f.locate()) for f in dist.files or () if f.name == "libkfuse.so"]
    except Exception:       # not installed, no metadata
        return []


def library_path():
    """The path the library was (or would be) loaded from; None if none is found."""
    if _lib_path is not None:
        return _lib_path
    for path in _candidates():
        if os.path.exists(path):
            return path
    return None


def lib():
    """The loaded library (ctypes.CDLL with argtypes set); raises KfuseError if not found."""
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        tried = _candidates()
        path = next((p for p in tried if os.path.exists(p)), None)
        if path is None:
            raise KfuseError("kfuse: libkfuse.so not found (tried %s); build it with `make` "
                             "or set KFUSE_LIBRARY" % ", ".join(tried))
        try:
            handle = ctypes.CDLL(path)
        except OSError as e:
            raise KfuseError("kfuse: cannot load %s: %s" % (path, e)) from e
        for name, (restype, argtypes) in _SIGNATURES.items():
            fn = getattr(handle, name)
            fn.restype = restype
            fn.argtypes = argtypes
        for name in OPS:
            FUNCTIONS[name] = getattr(handle, "kf_" + name)
        _lib_path = path
        _lib = handle
        return _lib


def version():
    """The library's version string ("0.1.0")."""
    return lib().kf_version_string().decode()


def check(ctx, status, what):
    """Raise KfuseError with the context's last error if status is not KF_OK."""
    if status != KF_OK:
        msg = lib().kf_last_error(ctx) if ctx else None
        msg = msg.decode(errors="replace") if msg else ""
        if not msg:
            msg = lib().kf_status_string(status).decode(errors="replace")
        if not msg.startswith(what + ": "):    # the library's messages name their op first
            msg = "%s: %s" % (what, msg)
        raise KfuseError("kfuse " + msg, status)


def function(name):
    """The ctypes function kf_<name> (cached)."""
    fn = _functions.get(name)
    if fn is None:
        fn = _functions[name] = getattr(lib(), "kf_" + name)
    return fn


def cpu_context():
    """This thread's CPU kf_ctx (a c_void_p), created on first use."""
    try:
        return _local.cpu
    except AttributeError:
        pass
    import torch
    ctx = _local.cpu = _create(_CPU_KEY, torch.device("cpu"))
    return ctx


def cuda_context(index):
    """The kf_ctx of CUDA device `index`, pointed at torch's current stream there
    (kf_ctx_set_stream only when that stream changed since the last call)."""
    try:
        state = _local.cuda[index]
    except (AttributeError, KeyError):
        state = None
    if state is None:
        state = _create_cuda(index)
    stream = _raw_stream_fn(index)
    if stream != state[1]:
        check(state[0], lib().kf_ctx_set_stream(state[0], ctypes.c_void_p(stream)),
              "set_stream")
        state[1] = stream
    return state[0]


def _create_cuda(index):
    global _raw_stream_fn
    import torch
    _raw_stream_fn = getattr(torch._C, "_cuda_getCurrentRawStream", None) or \
        (lambda i: torch.cuda.current_stream(i).cuda_stream)
    # under torch's device guard: torch knows what to make current after (where the thread's
    # device has no CUDA context yet, it keeps that device as current without creating one)
    with torch.cuda.device(index):
        ctx = _create((KF_BACKEND_GPU, index), torch.device("cuda", index))
    if getattr(_local, "cuda", None) is None:
        _local.cuda = {}
    state = _local.cuda[index] = [ctx, None]
    return state


def context(device):
    """The kf_ctx (a c_void_p) for a torch.device, created once. For CUDA it also points
    the context at torch's current stream of that device (set only when it changed)."""
    if device.type == "cpu":
        return cpu_context()
    if device.type == "cuda":
        return cuda_context(device.index if device.index is not None else _current_cuda())
    raise KfuseError("kfuse: tensors on %s are not supported (cpu or cuda)" % device)


class _Context(ctypes.c_void_p):
    """A kf_ctx that one thread holds (in _local). When the thread ends, its thread-local
    values go and this goes back to _idle, for the next thread that needs a context of the
    same key, rather than leaking: nn.DataParallel runs every forward in new threads, and a
    GPU context holds events and takes a probe launch to create."""

    def __del__(self):
        try:
            if self.value:
                _idle.setdefault(self.key, []).append(self.value)
        except Exception:           # at interpreter exit the module's globals may be gone
            pass


_idle = {}  # key -> [address of a kf_ctx no thread holds]


def _create(key, device):
    """A kf_ctx for (backend, device index) = key, one a thread that ended left if any; the
    caller keeps it per thread."""
    try:
        out = _Context(_idle[key].pop())
    except (KeyError, IndexError):  # none left idle (list.pop is atomic: no two threads get one)
        out = _Context()
    out.key = key
    if out.value:
        return out
    status = lib().kf_ctx_create(key[0], key[1], ctypes.byref(out))
    if status != KF_OK:
        name = lib().kf_status_string(status).decode(errors="replace")
        why = (lib().kf_last_error(None) or b"").decode(errors="replace")
        raise KfuseError("kfuse: cannot create a context on %s: %s%s"
                         % (device, name, " (%s)" % why if why else ""), status)
    return out


def _current_cuda():
    import torch
    return torch.cuda.current_device()


def describe(device):
    """kf_ctx_describe of the context for a torch.device ("cpu: 2 threads")."""
    return lib().kf_ctx_describe(context(device)).decode()


def _torch_dtypes():
    import torch
    return {torch.float32: KF_F32, torch.float16: KF_F16, torch.bfloat16: KF_BF16,
            torch.int32: KF_I32}


def torch_dtypes():
    """{torch dtype: kf_dtype} of the dtypes the library takes (built once)."""
    global DTYPES
    if DTYPES is None:
        DTYPES = _torch_dtypes()
    return DTYPES


DTYPES = None


def kf_dtype(t):
    global DTYPES
    if DTYPES is None:
        DTYPES = _torch_dtypes()
    d = DTYPES.get(t.dtype)
    if d is None:
        raise KfuseError("kfuse: dtype %s is not supported (float32, float16, bfloat16; int32 "
                         "for rope axis)" % t.dtype, 3)
    return d


def tensor_view(t, shape=None, stride=None):
    """A packed kf_tensor (a View) for torch tensor t (or for t's memory seen with the given
    shape/stride). The caller has already made ndim <= 4 and the last stride 1. The view keeps
    a reference to t (.tensor), so a working copy lives as long as the view that points
    into it."""
    if shape is None:
        shape = t.shape
        stride = t.stride()
    d = DTYPES.get(t.dtype) if DTYPES is not None else None
    if d is None:
        d = kf_dtype(t)
    v = View(make_view(t.data_ptr(), d, shape, stride))
    v.tensor = t
    return v
