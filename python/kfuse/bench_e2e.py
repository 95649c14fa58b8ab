"""kfuse.bench_e2e - end-to-end model timings (the `python -m kfuse.bench --e2e` hook).

    main(["--json", "e2e.json"])        # or main(argparse.Namespace(...)) from kfuse.bench

On CUDA, random weights in bf16 (no download), the project's end-to-end benchmark shapes:
  ltx-1320 / ltx-8064   diffusers LTXVideoTransformer3DModel (default config), batch 2 (CFG), one
                        transformer step at 1320 tokens (25 frames 480x704) and 8064 (161f 512x768)
  llama-prefill         Llama-3-8B shapes with 8 layers, input 1 x 2048 tokens
  llama-b16-token       the same model, batch 16 x 1 token (single-token forward, no cache)
Columns: eager, kfuse (patched eager), compile (torch.compile), kfuse+compile, liger (Llama only,
when liger_kernel imports). Each cell is the median of CUDA-event timings after warm-up, plus its
output's relative L2 error against the unpatched eager model. The columns of a row are timed
interleaved, in rounds (eager and compile on the model as built, kfuse and kfuse+compile on a
patched deep copy, liger on another), so that a drift of the machine falls on all of them alike.
Where a patch replaces a module-level function shared by the whole model family (transformers'
apply_rotary_pos_emb: kfuse's and Liger's), the modules it touches are switched to the calling
column's state on the untimed first call of each round, and put back at the end, so that the next
case builds a stock model. kfuse+compile patches
with --compile-policy (default auto, see kfuse.patch); both compiled columns use --compile-mode
(torch.compile's mode, default its own default; "reduce-overhead" replays CUDA graphs, which takes
the host cost of opaque kfuse calls out of the compiled forward).
Each row also has what kfuse.patch replaced (patched) and what it left alone and why
(patch_skipped). --profile splits each cell into host time and GPU busy time and writes the CPU-op
and Python profiles to <json>.profile.txt (kfuse.profile_e2e); --op-costs first times one op call
by each route. On the CPU it runs tiny configs with a couple of iterations, only to exercise the
code.
"""

import argparse
import copy
import json
import statistics
import sys
import time

import torch

COLUMNS = ["eager", "kfuse", "compile", "kfuse+compile", "liger"]
# A column whose output is this far from eager's (relative L2 error of the whole output) is
# marked wrong and makes the run fail: bf16 rounding through a model's layers reaches
# 0.6-3 % (torch.compile's own column included); a broken kernel reaches ~1.
E2E_MAX_REL_ERR = 0.1
COMPILE_MODES = ["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"]


def _parse(args):
    if isinstance(args, argparse.Namespace):
        ns = args
        return argparse.Namespace(json=getattr(ns, "json", None) or "kfuse_e2e.json",
                                  cases=getattr(ns, "cases", None), iters=getattr(ns, "iters", None),
                                  no_compile=getattr(ns, "no_compile", False),
                                  columns=getattr(ns, "columns", None), profile=getattr(ns, "profile", False),
                                  op_costs=getattr(ns, "op_costs", False),
                                  compile_policy=getattr(ns, "compile_policy", "auto"),
                                  compile_mode=getattr(ns, "compile_mode", None))
    p = argparse.ArgumentParser(prog="kfuse.bench --e2e")
    p.add_argument("--json", default="kfuse_e2e.json", help="where to write the results")
    p.add_argument("--cases", default=None, help="comma list: ltx-1320,ltx-8064,llama-prefill,llama-b16-token")
    p.add_argument("--columns", default=None, help="comma list of columns to run (default all): " + ",".join(COLUMNS))
    p.add_argument("--iters", type=int, default=None, help="timed iterations per cell")
    p.add_argument("--no-compile", action="store_true", help="skip the torch.compile columns")
    p.add_argument("--profile", action="store_true",
                   help="also split each cell into host time and GPU busy time (kfuse.profile_e2e); "
                        "text reports go to <json>.profile.txt")
    p.add_argument("--op-costs", action="store_true",
                   help="first measure the host cost of one op call by each route (kfuse.profile_e2e.op_call_costs)")
    p.add_argument("--compile-policy", default="auto", choices=["auto", "all"],
                   help="kfuse.patch compile_policy of the kfuse+compile column (default auto: kfuse ops only where "
                        "they beat inductor; all: every kfuse op inside the compiled graph)")
    p.add_argument("--compile-mode", default=None, choices=COMPILE_MODES,
                   help="torch.compile mode of both compiled columns (default: torch's default)")
    return p.parse_args([a for a in (args or []) if a != "--e2e"])


def _time_one(fn, cuda):
    """ms of one call of fn: CUDA events around it (host time included), or the host clock."""
    if cuda:
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        return a.elapsed_time(b)
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) * 1e3


def _time(fn, iters, cuda):
    for _ in range(3):                            # warm-up (and compile)
        fn()
    return statistics.median(_time_one(fn, cuda) for _ in range(iters))


def _time_interleaved(fns, iters, cuda, per_round=4):
    """{column: median ms} of the callables in fns, timed in rounds: each round runs every column
    once untimed, then per_round timed calls, so that a drift of the machine (clocks, other load)
    during the run falls on all columns alike; iters timed calls per column in all. Each column is
    warmed up (and compiled) first. A column that raises is left out: {column: exception}."""
    out, live = {}, {}
    for col, fn in fns.items():
        try:
            for _ in range(3):
                fn()
            live[col] = []
        except Exception as e:
            out[col] = e
    per_round = max(1, min(per_round, iters))
    for _ in range(-(-iters // per_round)):
        for col in list(live):
            try:
                fns[col]()                        # untimed: the first call after a switch of column
                live[col].extend(_time_one(fns[col], cuda) for _ in range(per_round))
            except Exception as e:
                out[col] = e
                del live[col]
    for col, times in live.items():
        out[col] = statistics.median(times[:iters])
    return out


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


def _liger_setup(model):
    """A Liger-patched deep copy of `model` for the liger column. Liger also replaces module-level
    names of transformers' modeling_llama (RMSNorm and MLP classes, apply_rotary_pos_emb, class
    attributes); the state it leaves is recorded and the module put back at once, so that the liger
    column can switch to it only while it runs (timed interleaved with the other columns) and
    every Llama built later in this process (the next case) is stock. Returns (model, module state
    with liger, module state before, torch.nn.functional.cross_entropy before), or (None, cell)
    where liger is absent or fails."""
    from transformers.models.llama import modeling_llama
    import torch.nn.functional as F

    before = _save_module_state([modeling_llama])
    ce_before = F.cross_entropy
    try:
        from liger_kernel.transformers import apply_liger_kernel_to_llama

        lm = copy.deepcopy(model)
        apply_liger_kernel_to_llama(model=lm)
        return lm, _save_module_state([modeling_llama]), before, ce_before
    except ImportError:
        return None, {"skipped": "liger_kernel not installed"}
    except Exception as e:
        return None, {"error": f"{type(e).__name__}: {e}"[:300]}
    finally:
        _restore_module_state(before)
        F.cross_entropy = ce_before


def _output(o):
    if isinstance(o, (tuple, list)):
        return o[0]
    return getattr(o, "logits", getattr(o, "sample", o))


# ---------------------------------------------------------------------------------------------


def _run_case(case, device, dtype, tiny, iters, do_compile, columns=None, profile=None, compile_policy="auto",
              compile_mode=None):
    """One row of the table. The model as built serves eager and compile; a deep copy, patched,
    serves kfuse and kfuse+compile, so that the columns exist at once and are timed interleaved
    (_time_interleaved, module state switched per column, see below). columns: the columns to
    run (default all); profile: None, or a dict that receives {column: text report}, and then each
    cell also gets a "profile" entry (kfuse.profile_e2e.profile_cell); compile_mode: torch.compile's
    mode for both compiled columns (None: its default)."""
    from .patch import patch, unpatch

    cuda = device == "cuda"
    wanted = set(columns or COLUMNS)
    torch._dynamo.reset()
    if case.startswith("llama"):
        model = _llama(device, dtype, tiny)
        args, kw = _llama_inputs(case, device, tiny, model.config.vocab_size)
    else:
        model = _ltx(device, dtype, tiny)
        args, kw = _ltx_inputs(case, device, dtype, tiny, model)

    def call(m):
        with torch.inference_mode():
            return _output(m(*args, **kw))

    row = {"case": case, "device": device, "dtype": str(dtype).replace("torch.", ""),
           "compile_policy": compile_policy, "compile_mode": compile_mode or "default"}
    ref = call(model).clone()
    liger = None
    if case.startswith("llama") and "liger" in wanted:
        liger = _liger_setup(model)
        if liger[0] is None:
            row["liger"], liger = liger[1], None
    patched = None
    if wanted & {"kfuse", "kfuse+compile"}:
        patched = copy.deepcopy(model)
        report = patch(patched, compile_policy=compile_policy)
    else:
        report = patch(model)
        unpatch(model)
    row["patched"] = report.counts
    row["patch_skipped"] = [list(t) for t in report.skipped]
    row["patch_notes"] = [list(t) for t in report.notes]

    # A patch that replaces a module-level name (transformers' apply_rotary_pos_emb) changes every
    # model of that family in the process, the unpatched one too; so does Liger's. The columns are
    # still timed interleaved, in one group: each module such a patch touches is recorded in the
    # state of each kind of column (stock: eager and compile; kfuse: kfuse and kfuse+compile;
    # liger), and a call switches the modules to its column's state when the previous call was of
    # another kind: the untimed first call of each round (_time_interleaved), so no timed call
    # pays for a switch, and each compiled model only ever runs in the state it was traced in.
    from .patch import _SHARED
    owners = {id(o): o for _, _, o in _SHARED.values()} if patched is not None else {}
    if liger is not None:
        from transformers.models.llama import modeling_llama
        owners[id(modeling_llama)] = modeling_llama
    mods = list(owners.values())
    states = {"kfuse": _save_module_state(mods)}
    if patched is not None and _SHARED:
        unpatch(patched)
        states["stock"] = _save_module_state(mods)
        patch(patched, compile_policy=compile_policy)
    else:
        states["stock"] = states["kfuse"]
    if liger is not None:
        liger_model, states["liger"], liger_before, ce_before = liger
    models = {"eager": (model, False), "kfuse": (patched, False)}
    if do_compile:
        models["compile"] = (torch.compile(model, mode=compile_mode), True)
        if patched is not None:
            models["kfuse+compile"] = (torch.compile(patched, mode=compile_mode), True)
    models = {c: mc for c, mc in models.items() if c in wanted and mc[0] is not None}
    row["timing"] = "interleaved: all columns" + (", module state switched per column" if mods else "")
    from . import profile_e2e
    profile_e2e.clear_dynamo_counts()
    now = ["kfuse"]

    def switched(kind, fn):
        def run():
            if now[0] != kind:
                _restore_module_state(states["stock"])
                if kind != "stock":
                    _restore_module_state(states[kind])
                now[0] = kind
            return fn()
        return run

    fns = {c: switched("kfuse" if "kfuse" in c else "stock", lambda m=models[c][0]: call(m)) for c in models}
    if liger is not None:
        fns["liger"] = switched("liger", lambda: call(liger_model))
    times = _time_interleaved(fns, iters, cuda)
    for col in fns:
        t = times[col]
        if isinstance(t, Exception):             # a failing column is reported, not fatal
            row[col] = {"error": f"{type(t).__name__}: {t}"[:300]}
            continue
        try:
            cell = {"ms": t, "err": 0.0 if col == "eager" else _rel_err(fns[col](), ref)}
            if profile is not None:
                cell["profile"], profile[col] = profile_e2e.profile_cell(fns[col], iters, cuda)
            row[col] = cell
        except Exception as e:
            row[col] = {"error": f"{type(e).__name__}: {e}"[:300]}
    _restore_module_state(states["stock"])
    _restore_module_state(states["kfuse"])      # as patch() left it, for unpatch() below
    if any(compiled for _, compiled in models.values()):
        graphs, breaks = profile_e2e.dynamo_counts()
        row["dynamo"] = {"graphs": graphs, "graph_breaks": breaks}      # both compiled columns together

    if patched is not None:
        unpatch(patched)
    if liger is not None:
        import torch.nn.functional as F
        _restore_module_state(liger_before)
        F.cross_entropy = ce_before
        del liger_model
    del models, patched, liger
    torch._dynamo.reset()
    del model
    if cuda:
        torch.cuda.empty_cache()
    return row


def _cell(c):
    if c is None or "skipped" in c:
        return "-"
    if "error" in c:
        return "error"
    return f"{c['ms']:9.2f} ({c['err']:.1e}{' WRONG' if not c['err'] <= E2E_MAX_REL_ERR else ''})"


def _print_row(r):
    if "skipped" in r:
        print(f"{r['case']:<18} skipped: {r['skipped']}")
        return
    print(f"{r['case']:<18}" + "".join(f"{_cell(r.get(c)):>22}" for c in COLUMNS))
    print(f"    patched: {r.get('patched')}; timing {r.get('timing')}")
    for name, reason in r.get("patch_skipped", [])[:8]:
        print(f"    not patched: {name or '<root>'}: {reason}")
    for name, text in r.get("patch_notes", [])[:8]:
        print(f"    note: {name or '<root>'}: {text}")
    for c in COLUMNS + ["?"]:
        if r.get(c) and "error" in r[c]:
            print(f"    {c}: {r[c]['error']}")
    for c in COLUMNS:
        p = (r.get(c) or {}).get("profile")
        if p:
            busy = p.get("gpu_busy_ms")
            print(f"    {c:<14} host {p['host_ms']:8.2f} ms   wall {r[c]['ms']:8.2f} ms   GPU busy "
                  + (f"{busy:8.2f} ms   kernels {p['kernels']:.0f}" if busy is not None else "-")
                  )
    if r.get("dynamo"):
        print(f"    torch.compile (mode {r.get('compile_mode', 'default')}, kfuse policy "
              f"{r.get('compile_policy', 'auto')}): {r['dynamo']['graphs']} graphs, "
              f"{r['dynamo']['graph_breaks']} graph breaks (compile and kfuse+compile together)")


def main(args=None):
    opt = _parse(args)
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    dtype = torch.bfloat16 if cuda else torch.float32
    tiny = not cuda
    cases = opt.cases.split(",") if opt.cases else ["ltx-1320", "ltx-8064", "llama-prefill", "llama-b16-token"]
    columns = opt.columns.split(",") if opt.columns else None
    if tiny:
        cases = [c for c in cases if c != "ltx-8064"]
    iters = opt.iters or (20 if cuda else 2)
    out = {"device": torch.cuda.get_device_name() if cuda else "cpu", "torch": torch.__version__, "rows": []}
    reports = []
    if opt.op_costs:
        from . import profile_e2e
        out["op_call_us"] = profile_e2e.op_call_costs(device, dtype)
        print("host us per op call:")
        for name, us in out["op_call_us"].items():
            print(f"    {name:<58} {us:8.1f}" if isinstance(us, float) else f"    {name:<58} {us}")
    print(f"kfuse end-to-end ({device}, {'tiny configs' if tiny else 'bf16 random weights'}): "
          f"median ms (rel. error vs eager)")
    print(f"{'case':<18}" + "".join(f"{c:>22}" for c in COLUMNS))
    for case in cases:
        texts = {} if opt.profile else None
        try:
            row = _run_case(case, device, dtype, tiny, iters, not opt.no_compile, columns, texts,
                            opt.compile_policy, opt.compile_mode)
        except ImportError as e:
            row = {"case": case, "skipped": str(e)}
        out["rows"].append(row)
        _print_row(row)
        with open(opt.json, "w") as f:          # after every case: a run cut short keeps what it has
            json.dump(out, f, indent=1)
        for col, text in (texts or {}).items():
            reports.append(f"===== {case} / {col}\n{text}")
        if opt.profile:
            with open(opt.json + ".profile.txt", "w") as f:
                f.write("\n\n".join(reports))
    print(f"wrote {opt.json}")
    wrong = wrong_cells(out["rows"])
    if wrong:
        print(f"relative error over {E2E_MAX_REL_ERR} against eager: {', '.join(wrong)}",
              file=sys.stderr)
    return out["rows"]


def wrong_cells(rows):
    """'case/column' of each timed cell whose output is further than E2E_MAX_REL_ERR from
    eager's (NaN counts as wrong)."""
    return [f"{r['case']}/{c}" for r in rows for c in COLUMNS
            if isinstance(r.get(c), dict) and "err" in r[c] and not r[c]["err"] <= E2E_MAX_REL_ERR]


if __name__ == "__main__":
    main(sys.argv[1:])
