"""_module_copies - the module copies that nn.DataParallel makes, built on one device so that the
patch tests can run them without several GPUs, and a patched model's torch.save round trip."""

import importlib
import io

import torch

kpatch = importlib.import_module("kfuse.patch")     # the module (kfuse.patch is also a function)


def dataparallel_replica(module, scale):
    """What nn.DataParallel's replicate() makes of a module tree: shallow replicas
    (module._replicate_for_data_parallel) holding their own parameter tensors (here the
    original's times `scale`, plain tensors as replicate() sets them) and replicated children."""
    r = module._replicate_for_data_parallel()
    for name, p in module._parameters.items():
        setattr(r, name, None if p is None else p.detach() * scale)
    for name, child in module._modules.items():
        setattr(r, name, None if child is None else dataparallel_replica(child, scale))
    return r


def replica_against_scaled_model(make_model, run, scale=1.25):
    """(output of a DataParallel replica of a patched model with its weights times `scale`,
    output of an unpatched model with its weights times `scale`): equal when the replica's
    forwards run the replica's own weights. make_model() builds the model (the same each call),
    run(model) runs it without grad."""
    scaled = make_model()
    with torch.no_grad():
        for p in scaled.parameters():
            p.mul_(scale)
    want = run(scaled)
    model = make_model()
    kpatch.patch(model)
    try:
        replica = dataparallel_replica(model, scale)
        assert sum(kpatch.is_patched(m) for m in replica.modules()) >= 2
        got = run(replica)
    finally:
        kpatch.unpatch(model)
    return got, want


def saved_while_patched(model):
    """The bytes torch.save writes of `model` while kfuse.patch is on it (unpatched after), and
    the model torch.load gives back from them, checked to carry no kfuse forward."""
    kpatch.patch(model)
    try:
        buf = io.BytesIO()
        torch.save(model, buf)
        assert any(kpatch.is_patched(m) for m in model.modules())
    finally:
        kpatch.unpatch(model)
    data = buf.getvalue()
    loaded = torch.load(io.BytesIO(data), weights_only=False)
    assert not any(kpatch.is_patched(m) for m in loaded.modules())
    return data, loaded
