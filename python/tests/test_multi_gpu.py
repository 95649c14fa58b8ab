"""test_multi_gpu.py - kfuse on two CUDA devices (every test skips with fewer than two).

With device 0 current, every op on tensors of device 1 gives what it gives on device 0, bit
for bit, and leaves device 0 current (also on a thread's first call there, which creates the
device's kf_ctx); inputs on two devices are refused; two threads, each working on one device
with the other current, run at once;
nn.DataParallel over both devices of a patched tiny Llama gives the unpatched model's logits.

Run: KFUSE_LIBRARY=build/libkfuse.so PYTHONPATH=python python -m pytest -q python/tests
"""
import os
import threading

import pytest
import torch

from kfuse import KfuseError, ops
from kfuse import _lib

try:
    _lib.lib()
except KfuseError as e:          # no libkfuse.so: nothing here can run
    if os.environ.get("KFUSE_LIBRARY"):
        pytest.fail("KFUSE_LIBRARY is set but the library does not load: %s" % e, pytrace=False)
    pytest.skip("libkfuse not loadable: %s" % e, allow_module_level=True)

pytestmark = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2,
                                reason="fewer than two CUDA devices")


def _rand(*shape, dtype=torch.bfloat16, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float32).to(dtype)


def _positions(tokens):
    return torch.arange(tokens, dtype=torch.float32)[:, None].repeat(1, 3)


# name -> (function of the inputs, the inputs on the CPU); in-place ops return what they mutate
CASES = {
    "rms_norm": (lambda x, w: ops.rms_norm(x, w), (_rand(7, 769), _rand(769, seed=1))),
    "add_rms_norm": (lambda x, r, w: (ops.add_rms_norm(x, r, w), r),
                     (_rand(5, 4096), _rand(5, 4096, seed=1), _rand(4096, seed=2))),
    "layer_norm": (lambda x, w, b: ops.layer_norm(x, w, b),
                   (_rand(6, 2048), _rand(2048, seed=1), _rand(2048, seed=2))),
    "ada_norm": (lambda x, s, sh: ops.ada_norm(x, s, sh),
                 (_rand(2, 9, 2048), _rand(2, 1, 2048, seed=1), _rand(2, 1, 2048, seed=2))),
    "gated_residual": (lambda h, a, g: (ops.gated_residual(h, a, g), h)[1],
                       (_rand(2, 9, 512), _rand(2, 9, 512, seed=1), _rand(2, 1, 512, seed=2))),
    "rope_positions": (lambda q, pos, freqs: ops.rope(q, positions=pos, freqs=freqs,
                                                      axis=torch.zeros(32, dtype=torch.int32,
                                                                       device=q.device),
                                                      convention="interleaved")[0],
                       (_rand(2, 11, 3, 64), _positions(11), torch.rand(32) * 0.5)),
    "glu": (lambda g, u: ops.glu(g, u, act="silu"), (_rand(5, 14336), _rand(5, 14336, seed=1))),
    "gelu": (lambda x: ops.gelu(x, approximate="none"), (_rand(9, 1000),)),
    "silu": (lambda x: ops.silu(x), (_rand(9, 1000, dtype=torch.float16),)),
    "softmax": (lambda x: ops.softmax(x, scale=0.125), (_rand(8, 1024, dtype=torch.float32),)),
}


def _run(name, device):
    fn, args = CASES[name]
    out = fn(*[a.to(device) for a in args])
    return [t.cpu() for t in (out if isinstance(out, (tuple, list)) else (out,))]


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_on_second_device_matches_first(name):
    torch.cuda.set_device(0)
    want = _run(name, "cuda:0")
    got = _run(name, "cuda:1")
    assert torch.cuda.current_device() == 0
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert torch.equal(g, w)


def test_first_call_on_a_device_leaves_the_current_device():
    """A thread's first op on device 1 creates its kf_ctx there; device 0 stays current for
    the thread (torch's next tensor lands on cuda:0), also for the CUDA runtime itself."""
    seen = {}

    def work():
        try:
            torch.cuda.set_device(0)
            torch.empty(1, device="cuda")               # device 0 in use on this thread
            x = _rand(4, 4096).to("cuda:1")
            y = ops.rms_norm(x, None)
            seen["y"] = y.cpu()
            seen["current"] = torch.cuda.current_device()
            seen["next"] = torch.empty(1, device="cuda").device.index
            seen["runtime"] = torch._C._cuda_getDevice()
        except Exception as e:                          # reported below
            seen["error"] = e

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert "error" not in seen, seen.get("error")
    assert seen["current"] == 0 and seen["next"] == 0 and seen["runtime"] == 0
    assert torch.equal(seen["y"], ops.rms_norm(_rand(4, 4096).to("cuda:0"), None).cpu())


def test_inputs_on_two_devices_are_refused():
    x = _rand(4, 256).to("cuda:0")
    w = _rand(256, seed=1).to("cuda:1")
    with pytest.raises(KfuseError) as e:
        ops.rms_norm(x, w)
    assert "cuda:0" in str(e.value) and "cuda:1" in str(e.value)
    h = _rand(2, 3, 64).to("cuda:1")
    before = h.clone()
    with pytest.raises(KfuseError):
        ops.gated_residual(h, _rand(2, 3, 64).to("cuda:0"), _rand(2, 1, 64).to("cuda:1"))
    assert torch.equal(h, before)


def test_one_thread_per_device_at_once():
    want = {d: _run("layer_norm", "cuda:%d" % d) + _run("softmax", "cuda:%d" % d) for d in (0, 1)}
    results, errors, current = {}, [], {}
    start = threading.Barrier(2)

    def work(d):
        try:
            torch.cuda.set_device(1 - d)                # the other device current: the library
            start.wait()                                # switches for each call and back
            outs = []
            for _ in range(50):
                outs = _run("layer_norm", "cuda:%d" % d) + _run("softmax", "cuda:%d" % d)
            results[d] = outs
            current[d] = torch._C._cuda_getDevice()
        except Exception as e:                          # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(d,)) for d in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for d in (0, 1):
        assert all(torch.equal(g, w) for g, w in zip(results[d], want[d]))
        assert current[d] == 1 - d


def test_dataparallel_of_a_patched_llama():
    transformers = pytest.importorskip("transformers")
    import importlib

    kpatch = importlib.import_module("kfuse.patch")      # the module (kfuse.patch is the function)

    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=96,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, head_dim=16, max_position_embeddings=64)
    cfg._attn_implementation = "eager"
    model = transformers.AutoModelForCausalLM.from_config(cfg).float().eval().to("cuda:0")
    ids = torch.randint(0, 128, (4, 12), generator=torch.Generator().manual_seed(1)).to("cuda:0")
    with torch.no_grad():
        want = model(input_ids=ids, use_cache=False).logits
    assert kpatch.patch(model).total > 0
    try:
        dp = torch.nn.DataParallel(model, device_ids=[0, 1])
        with torch.no_grad():
            got = dp(input_ids=ids, use_cache=False).logits
    finally:
        kpatch.unpatch(model)
    assert got.device == torch.device("cuda:0")
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
