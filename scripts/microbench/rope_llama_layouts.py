# rope_llama_layouts.py - microbenchmark (BENCHMARKS.md, twenty-seventh set): Llama-3-8B rope
# (q 32 + k 8 heads, Dh 128, 4096 tokens, bf16, HALF) through the Python harness's timing
# (kfuse.bench.run_case: CUDA-graph replays, rotating inputs and outputs, same-size copy) in
# three memory layouts of q / k (HF's projection view [B, S, H, Dh] seen as [B, H, S, Dh];
# contiguous [B, H, S, Dh]; contiguous [B, S, H, Dh], kfuse bench's layout) times two table
# dtypes (bf16 as HF passes them, f32 as kfuse bench does), Liger beside kfuse where it takes
# the input, and the profiler's kernel durations of each. Needs a CUDA GPU; liger-kernel
# optional. Run: PYTHONPATH=python python3 scripts/microbench/rope_llama_layouts.py
import sys, torch
from kfuse import bench as B, ops
if not torch.cuda.is_available():
    sys.exit("rope_llama_layouts.py: needs a CUDA device")
dev = torch.device("cuda"); dt = torch.bfloat16; es = 2
lf = B._liger()
timer = B.Timer(True, "graph")
l2 = torch.cuda.get_device_properties(dev).L2_cache_size
Bn, S = 1, 4096
inv = 1.0 / 500000.0 ** (torch.arange(0, 128, 2, device=dev).float() / 128)

def mk(layout, tdt):
    def make(n):
        out = []
        if layout == "proj":
            qs = [t.transpose(1, 2) for t in B.randn(n, (Bn, S, 32, 128), dt, dev)]
            ks = [t.transpose(1, 2) for t in B.randn(n, (Bn, S, 8, 128), dt, dev)]
        elif layout == "bhsd":
            qs = B.randn(n, (Bn, 32, S, 128), dt, dev); ks = B.randn(n, (Bn, 8, S, 128), dt, dev)
        else:
            qs = B.randn(n, (Bn, S, 32, 128), dt, dev); ks = B.randn(n, (Bn, S, 8, 128), dt, dev)
        for q, k in zip(qs, ks):
            pos = torch.randint(0, 8192, (Bn, S), device=dev).float()
            emb = (pos[..., None] * inv).repeat(1, 1, 2)
            out.append(dict(q=q, k=k, cos=emb.cos().to(tdt), sin=emb.sin().to(tdt)))
        return out
    return make

def ref_of(layout):
    def ref(i):
        c, s = i["cos"].double()[:, None], i["sin"].double()[:, None]
        q, k = i["q"].double(), i["k"].double()
        if layout == "bshd":
            q, k = q.transpose(1, 2), k.transpose(1, 2)
        return torch.cat([B.ref_rope_rows(q, c, s, "half"), B.ref_rope_rows(k, c, s, "half")], 1)
    return ref

cases = []
for layout in ["proj", "bhsd", "bshd"]:
    for tname, tdt in [("bf16 tab", torch.bfloat16), ("f32 tab", torch.float32)]:
        tes = 2 if tdt == torch.bfloat16 else 4
        lay = "bshd" if layout == "bshd" else "bhsd"
        impls = {"kfuse": (lambda i, lay=lay: ops.rope(i["q"], i["k"], i["cos"], i["sin"], convention="half", layout=lay))}
        if lf and layout != "bshd" and tdt == torch.bfloat16:
            impls["liger"] = lambda i: lf.liger_rope(i["q"], i["k"], i["cos"], i["sin"])
        outs = (lambda r: torch.cat([r[0].transpose(1, 2), r[1].transpose(1, 2)], 1)) if layout == "bshd" else (lambda r: torch.cat(r, 1))
        cases.append(B.Case("rope_llama", "%s %s" % (layout, tname), mk(layout, tdt),
                            2 * Bn * S * 40 * 128 * es + 2 * Bn * S * 128 * tes, ref_of(layout), impls, outputs_of=outs))
for c in cases:
    r = B.run_case(c, timer, dev, dt, l2, 4096, 10, 50.0, 25.0, "rotate", kernels=True)
    line = "%-22s copy %.2f" % (c.label, r["copy_us"])
    for n, v in r["impls"].items():
        line += "  %s %s %.2f (%.3f x copy)" % (n, "ok" if v.get("ok") else "BAD", v.get("median_us", -1), v.get("vs_copy", -1))
    for n, kd in r.get("kernels", {}).items():
        if n != "copy":
            line += "  [%s kernels: %s]" % (n, "; ".join("%s %.2f us" % (k["name"][:48], k["median_us"]) for k in kd[:2]))
    print(line, flush=True)
