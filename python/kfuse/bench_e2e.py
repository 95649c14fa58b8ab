"""kfuse.bench_e2e - end-to-end model timings (the `python -m kfuse.bench --e2e` hook).

    main(["--json", "e2e.json"])        # or main(argparse.Namespace(...)) from kfuse.bench

On CUDA, random weights in bf16 (no download), the project's end-to-end benchmark shapes:
  ltx-1320 / ltx-8064   diffusers LTXVideoTransformer3DModel (default config), batch 2 (CFG), one
                        transformer step at 1320 tokens (25 frames 480x704) and 8064 (161f 512x768)
  llama-prefill         Llama-3-8B shapes with 8 layers, input 1 x 2048 tokens
  llama-b16-token       the same model, batch 16 x 1 token (single-token forward, no cache)
Columns: eager, kfuse (patched eager), compile (torch.compile), kfuse+compile, liger (Llama only,
when liger_kernel imports; applied last, to a copy of the model; the module-level names it replaces
in transformers are put back afterwards, so that the next case builds a stock model). Each cell is
the median of CUDA-event timings after warm-up, plus its output's relative L2 error against the
unpatched eager model. Each row also has what kfuse.patch replaced (patched) and what it left alone
and why (patch_skipped). On the CPU it runs tiny configs with a couple of iterations, only to
exercise the code.
"""

import argparse
import copy
import json
import statistics
import sys
import time

import torch

COLUMNS = ["eager", "kfuse", "compile", "kfuse+compile", "liger"]


def _parse(args):
    if isinstance(args, argparse.Namespace):
        ns = args
        return argparse.Namespace(json=getattr(ns, "json", None) or "kfuse_e2e.json",
                                  cases=getattr(ns, "cases", None), iters=getattr(ns, "iters", None),
                                  no_compile=getattr(ns, "no_compile", False))
    p = argparse.ArgumentParser(prog="kfuse.bench --e2e")
    p.add_argument("--json", default="kfuse_e2e.json", help="where to write the results")
    p.add_argument("--cases", default=None, help="comma list: ltx-1320,ltx-8064,llama-prefill,llama-b16-token")
    p.add_argument("--iters", type=int, default=None, help="timed iterations per cell")
    p.add_argument("--no-compile", action="store_true", help="skip the torch.compile columns")
    return p.parse_args([a for a in (args or []) if a != "--e2e"])


def _time(fn, iters, cuda):
    for _ in range(3):                            # warm-up (and compile)
        fn()
    times = []
    for _ in range(iters):
        if cuda:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b))
        else:
            t = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def _rel_err(out, ref):
    out, ref = out.float(), ref.float()
    return float((out - ref).norm() / ref.norm().clamp_min(1e-30))


# ---------------------------------------------------------------------------------------------
# models


def _llama(device, dtype, tiny):
    import transformers

    if tiny:
        cfg = transformers.LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                       num_attention_heads=4, num_key_value_heads=2, head_dim=16)
    else:
        cfg = transformers.LlamaConfig(vocab_size=128256, hidden_size=4096, intermediate_size=14336,
                                       num_hidden_layers=8, num_attention_heads=32, num_key_value_heads=8,
                                       rope_theta=500000.0, max_position_embeddings=8192, rms_norm_eps=1e-5)
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    with torch.device(device):
        model = transformers.LlamaForCausalLM(cfg).to(dtype).eval()
    return model


def _llama_inputs(case, device, tiny, vocab):
    g = torch.Generator(device="cpu").manual_seed(1)
    shape = (1, 64 if tiny else 2048) if case == "llama-prefill" else (16 if not tiny else 4, 1)
    ids = torch.randint(0, vocab, shape, generator=g).to(device)
    return (), dict(input_ids=ids, use_cache=False)


def _ltx(device, dtype, tiny):
    from diffusers.models.transformers.transformer_ltx import LTXVideoTransformer3DModel

    torch.manual_seed(0)
    kw = dict(num_layers=2, num_attention_heads=4, attention_head_dim=16, cross_attention_dim=64,
              caption_channels=32) if tiny else {}
    with torch.device(device):
        model = LTXVideoTransformer3DModel(**kw).to(dtype).eval()
    return model


def _ltx_inputs(case, device, dtype, tiny, model):
    frames, height, width = {"ltx-1320": (4, 15, 22), "ltx-8064": (21, 16, 24)}[case]
    if tiny:
        frames, height, width = 2, 3, 4
    cfg = model.config
    s = frames * height * width
    g = torch.Generator(device="cpu").manual_seed(1)
    inputs = dict(
        hidden_states=torch.randn(2, s, cfg.in_channels, generator=g).to(device, dtype),
        encoder_hidden_states=torch.randn(2, 128, cfg.caption_channels, generator=g).to(device, dtype),
        timestep=torch.tensor([500, 500], device=device),
        encoder_attention_mask=torch.ones(2, 128, device=device),
        num_frames=frames, height=height, width=width,
        rope_interpolation_scale=(8 / 25, 32.0, 32.0),
        return_dict=False,
    )
    return (), inputs


_ABSENT = object()


def _save_module_state(modules):
    """What apply_liger_kernel_to_*() changes outside the model it is given: the names of a modeling
    module (apply_rotary_pos_emb, LlamaRMSNorm, LlamaMLP, ...) and the attributes of the classes
    defined there (LlamaForCausalLM.forward). Returns [(object, copy of its __dict__)]."""
    saved = []
    for mod in modules:
        saved.append((mod, dict(vars(mod))))
        for value in list(vars(mod).values()):
            if isinstance(value, type) and value.__module__ == mod.__name__:
                saved.append((value, dict(vars(value))))
    return saved


def _restore_module_state(saved):
    """Put back what _save_module_state recorded; returns the names that had changed."""
    changed = []
    for obj, before in saved:
        now = dict(vars(obj))
        label = getattr(obj, "__name__", "?")
        for key, value in before.items():
            if now.get(key, _ABSENT) is not value:
                setattr(obj, key, value)
                changed.append(f"{label}.{key}")
        for key in now:
            if key not in before and not key.startswith("__"):
                delattr(obj, key)
                changed.append(f"{label}.{key}")
    return changed


def _run_liger(model, call, ref, iters, cuda):
    """The liger column on a copy of `model`. Liger also replaces module-level names of
    transformers' modeling_llama (RMSNorm and MLP classes, apply_rotary_pos_emb); they are put back
    afterwards, else every Llama built later in this process (the next case) is made of liger
    modules, which kfuse.patch does not replace."""
    from transformers.models.llama import modeling_llama
    import torch.nn.functional as F

    saved = _save_module_state([modeling_llama])
    saved_ce = F.cross_entropy
    try:
        from liger_kernel.transformers import apply_liger_kernel_to_llama

        lm = copy.deepcopy(model)
        apply_liger_kernel_to_llama(model=lm)
        return {"ms": _time(lambda: call(lm), iters, cuda), "err": _rel_err(call(lm), ref)}
    except ImportError:
        return {"skipped": "liger_kernel not installed"}
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}"[:300]}
    finally:
        _restore_module_state(saved)
        F.cross_entropy = saved_ce


def _output(o):
    if isinstance(o, (tuple, list)):
        return o[0]
    return getattr(o, "logits", getattr(o, "sample", o))


# ---------------------------------------------------------------------------------------------


def _run_case(case, device, dtype, tiny, iters, do_compile):
    from .patch import patch, unpatch

    cuda = device == "cuda"
    if case.startswith("llama"):
        model = _llama(device, dtype, tiny)
        args, kw = _llama_inputs(case, device, tiny, model.config.vocab_size)
    else:
        model = _ltx(device, dtype, tiny)
        args, kw = _ltx_inputs(case, device, dtype, tiny, model)

    def call(m):
        with torch.inference_mode():
            return _output(m(*args, **kw))

    row = {"case": case, "device": device, "dtype": str(dtype).replace("torch.", "")}
    ref = call(model).clone()
    row["eager"] = {"ms": _time(lambda: call(model), iters, cuda), "err": 0.0}

    report = patch(model)
    row["patched"] = report.counts
    row["patch_skipped"] = [list(t) for t in report.skipped]
    row["patch_notes"] = [list(t) for t in report.notes]
    try:
        row["kfuse"] = {"ms": _time(lambda: call(model), iters, cuda), "err": _rel_err(call(model), ref)}
    except Exception as e:                       # a failing column is reported, not fatal
        row["kfuse"] = {"error": f"{type(e).__name__}: {e}"}
    unpatch(model)

    if do_compile:
        for col, patched in (("compile", False), ("kfuse+compile", True)):
            try:
                torch._dynamo.reset()
                if patched:
                    patch(model)
                cm = torch.compile(model)
                row[col] = {"ms": _time(lambda: call(cm), iters, cuda), "err": _rel_err(call(cm), ref)}
            except Exception as e:
                row[col] = {"error": f"{type(e).__name__}: {e}"[:300]}
            finally:
                if patched:
                    unpatch(model)
        torch._dynamo.reset()

    if case.startswith("llama"):
        row["liger"] = _run_liger(model, call, ref, iters, cuda)
    del model
    if cuda:
        torch.cuda.empty_cache()
    return row


def _cell(c):
    if c is None or "skipped" in c:
        return "-"
    if "error" in c:
        return "error"
    return f"{c['ms']:9.2f} ({c['err']:.1e})"


def main(args=None):
    opt = _parse(args)
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    dtype = torch.bfloat16 if cuda else torch.float32
    tiny = not cuda
    cases = opt.cases.split(",") if opt.cases else ["ltx-1320", "ltx-8064", "llama-prefill", "llama-b16-token"]
    if tiny:
        cases = [c for c in cases if c != "ltx-8064"]
    iters = opt.iters or (20 if cuda else 2)
    rows = []
    for case in cases:
        try:
            rows.append(_run_case(case, device, dtype, tiny, iters, not opt.no_compile))
        except ImportError as e:
            rows.append({"case": case, "skipped": str(e)})
    head = f"{'case':<18}" + "".join(f"{c:>22}" for c in COLUMNS)
    print(f"kfuse end-to-end ({device}, {'tiny configs' if tiny else 'bf16 random weights'}): "
          f"median ms (rel. error vs eager)")
    print(head)
    for r in rows:
        if "skipped" in r:
            print(f"{r['case']:<18} skipped: {r['skipped']}")
            continue
        print(f"{r['case']:<18}" + "".join(f"{_cell(r.get(c)):>22}" for c in COLUMNS))
        print(f"    patched: {r.get('patched')}")
        for name, reason in r.get("patch_skipped", [])[:8]:
            print(f"    not patched: {name or '<root>'}: {reason}")
        for name, text in r.get("patch_notes", [])[:8]:
            print(f"    note: {name or '<root>'}: {text}")
        for c in COLUMNS:
            if r.get(c) and "error" in r[c]:
                print(f"    {c}: {r[c]['error']}")
    with open(opt.json, "w") as f:
        json.dump({"device": torch.cuda.get_device_name() if cuda else "cpu", "torch": torch.__version__,
                   "rows": rows}, f, indent=1)
    print(f"wrote {opt.json}")
    return rows


if __name__ == "__main__":
    main(sys.argv[1:])
