/* bench_cases.c - the benchmark shapes of docs/bench.md and the byte
 * counting of every op. The buffer list of a case is the one source of truth:
 * bench allocates exactly these buffers, and the GB/s of a case is
 * kfb_case_bytes() / median time.
 *
 * Napkin math (bf16, s = 2 bytes, M = rows = batch * tokens, D = cols):
 *   rms_norm        x read, y written, weight read once      2*M*D*s + D*s
 *   add_rms_norm    x, residual read; residual, y written    4*M*D*s + D*s
 *   layer_norm      x read, y written, weight + bias         2*M*D*s + 2*D*s
 *   ada_norm        x read, y written, scale + shift [B,1,D] 2*M*D*s + 2*B*D*s
 *   add_ada_norm    h, a read; h, y written; scale + shift   4*M*D*s + 2*B*D*s
 *   gated_residual  h, a read; h written; gate [B,1,D]       3*M*D*s + B*D*s
 *   rope (table)    q (+k) read, written; cos + sin f32      2*T*H*Dh*s + 2*T*r*4
 *   rope (pos)      q (+k) read, written; positions f32,     2*T*H*Dh*s + T*3*4
 *                   freqs f32 + axis i32 [r/2]                 + (r/2)*8
 *   rms_norm_rope   x read, y written, weight, positions     2*T*Dh*s + Dh*s + ...
 *   glu (2 tensors) gate, up read; y written                 3*M*I*s
 *   gelu, silu      x read, y written                        2*M*D*s
 *   softmax         x read, y written                        2*M*D*s
 * (T = batch * tokens, H = q heads + k heads.)
 *
 * How bench.md's cases map onto kft_bench_case.variant / .form:
 *   rms_norm, add_rms_norm: variant = kf_rms_mode (llama), weight present.
 *   layer_norm: weight and bias present.
 *   ada_norm, add_ada_norm: variant = kf_norm_kind (rms), no weight, scale and
 *     shift per batch (form 0) or per token (form 1); add_ada_norm has no gate
 *     (LTX: h = h + attn2(h)).
 *   gated_residual: gate per batch (form 0) or per token (form 1).
 *   rope: variant = kf_rope_convention; form 0 = f32 cos/sin tables
 *     [B, S, r], form 1 = positions [B, S, 3] + freqs + axis; r = head_dim.
 *   rms_norm_rope: variant = kf_rope_convention, form as rope; the norm is
 *     KF_RMS_NONE (torch.nn.RMSNorm) with a weight of H*Dh.
 *   glu: variant = kf_activation, form 0 = two tensors, 1 = packed [.., 2I].
 *   gelu: variant 1 = tanh, 0 = erf. silu, softmax: variant 0 (softmax scale 1). */
#include <stdio.h>
#include <string.h>
#include "bench_cases.h"

#define C(op, b, t, d, h, kvh, var, form) \
    { (op), KF_BF16, (b), (t), (d), (h), (kvh), (var), (form) }

static const kft_bench_case kfb_cases[] = {
    /* rms_norm with weight, llama casting: Llama-3-8B decode / prefill, LTX qk-norm, 70B */
    C(KF_OP_RMS_NORM, 1, 1, 4096, 0, 0, KF_RMS_LLAMA, 0),
    C(KF_OP_RMS_NORM, 1, 64, 4096, 0, 0, KF_RMS_LLAMA, 0),
    C(KF_OP_RMS_NORM, 1, 8192, 4096, 0, 0, KF_RMS_LLAMA, 0),
    C(KF_OP_RMS_NORM, 1, 16128, 2048, 0, 0, KF_RMS_LLAMA, 0),
    C(KF_OP_RMS_NORM, 1, 8192, 8192, 0, 0, KF_RMS_LLAMA, 0),
    C(KF_OP_RMS_NORM, 1, 4096, 5120, 0, 0, KF_RMS_LLAMA, 0),
    /* Llama-3-8B prefill of 2048 tokens (the end-to-end run's norms; on an
     * H200 kf_row_geometry's few-wave rule gives it 2 chunks per thread) */
    C(KF_OP_RMS_NORM, 1, 2048, 4096, 0, 0, KF_RMS_LLAMA, 0),
    /* odd sizes that must not fall off a cliff */
    C(KF_OP_RMS_NORM, 1, 8192, 111, 0, 0, KF_RMS_LLAMA, 0),
    C(KF_OP_RMS_NORM, 1, 8192, 769, 0, 0, KF_RMS_LLAMA, 0),
    C(KF_OP_RMS_NORM, 1, 8192, 3584, 0, 0, KF_RMS_LLAMA, 0),
    C(KF_OP_RMS_NORM, 1, 8192, 5125, 0, 0, KF_RMS_LLAMA, 0),
    /* LLM layer seam */
    C(KF_OP_ADD_RMS_NORM, 1, 64, 4096, 0, 0, KF_RMS_LLAMA, 0),
    C(KF_OP_ADD_RMS_NORM, 1, 8192, 4096, 0, 0, KF_RMS_LLAMA, 0),
    C(KF_OP_ADD_RMS_NORM, 1, 2048, 4096, 0, 0, KF_RMS_LLAMA, 0),
    C(KF_OP_LAYER_NORM, 1, 8192, 4096, 0, 0, 0, 0),
    /* LTX-Video 25f 480x704 and 161f 512x768, CFG batch 2 */
    C(KF_OP_ADA_NORM, 2, 1320, 2048, 0, 0, KF_NORM_RMS, 0),
    C(KF_OP_ADA_NORM, 2, 8064, 2048, 0, 0, KF_NORM_RMS, 0),
    C(KF_OP_ADD_ADA_NORM, 2, 8064, 2048, 0, 0, KF_NORM_RMS, 0),
    C(KF_OP_GATED_RESIDUAL, 2, 8064, 2048, 0, 0, 0, 0),
    /* LTX-Video rope: 1 head of 2048 channels, tables f32 [B, S, 2048] or 3-axis positions */
    C(KF_OP_ROPE, 2, 1320, 2048, 1, 0, KF_ROPE_INTERLEAVED, 0),
    C(KF_OP_ROPE, 2, 8064, 2048, 1, 0, KF_ROPE_INTERLEAVED, 0),
    C(KF_OP_ROPE, 2, 1320, 2048, 1, 0, KF_ROPE_INTERLEAVED, 1),
    C(KF_OP_ROPE, 2, 8064, 2048, 1, 0, KF_ROPE_INTERLEAVED, 1),
    /* Llama-3-8B rope: q 32 heads, k 8 heads, Dh 128, tables f32 [B, S, 128] */
    C(KF_OP_ROPE, 1, 4096, 128, 32, 8, KF_ROPE_HALF, 0),
    C(KF_OP_ROPE, 16, 1, 128, 32, 8, KF_ROPE_HALF, 0),
    /* LTX-Video qk-norm across heads + rope, positions form */
    C(KF_OP_RMS_NORM_ROPE, 2, 8064, 2048, 1, 0, KF_ROPE_INTERLEAVED, 1),
    /* Llama-3-8B MLP */
    C(KF_OP_GLU, 1, 64, 14336, 0, 0, KF_ACT_SILU, 0),
    C(KF_OP_GLU, 1, 8192, 14336, 0, 0, KF_ACT_SILU, 0),
    C(KF_OP_GLU, 1, 64, 14336, 0, 0, KF_ACT_GELU_TANH, 0),
    C(KF_OP_GLU, 1, 8192, 14336, 0, 0, KF_ACT_GELU_TANH, 0),
    /* LTX-Video FF */
    C(KF_OP_GELU, 1, 16128, 8192, 0, 0, 1, 0),
    /* the same in the erf form (PyTorch's default GELU: BERT, ViT, Whisper) */
    C(KF_OP_GELU, 1, 16128, 8192, 0, 0, 0, 0),
    C(KF_OP_SILU, 1, 16128, 8192, 0, 0, 0, 0),
    /* attention-score sized rows */
    C(KF_OP_SOFTMAX, 1, 8192, 4096, 0, 0, 0, 0),
    C(KF_OP_SOFTMAX, 1, 32768, 1024, 0, 0, 0, 0),
};

#undef C

int kfb_case_count(void)
{
    return (int)(sizeof(kfb_cases) / sizeof(kfb_cases[0]));
}

const kft_bench_case *kfb_case_at(int i)
{
    if (i < 0 || i >= kfb_case_count())
        return NULL;
    return &kfb_cases[i];
}

/* Append a buffer to bufs[*n]. */
static void add_buf(kfb_buffer *bufs, int *n, const char *name, kf_dtype dt, int ndim,
                    int64_t d0, int64_t d1, int64_t d2, int64_t d3, int reads, int writes,
                    kfb_fill fill)
{
    kfb_buffer *b;
    if (*n >= KFB_MAX_BUFFERS)
        return;
    b = &bufs[*n];
    memset(b, 0, sizeof(*b));
    b->name = name;
    b->dtype = dt;
    b->ndim = ndim;
    b->shape[0] = d0;
    b->shape[1] = d1;
    b->shape[2] = d2;
    b->shape[3] = d3;
    b->reads = reads;
    b->writes = writes;
    b->fill = fill;
    *n += 1;
}

/* Activation [B, S, D]; 3-D so that per-batch conditioning [B, 1, D] lines up. */
#define ACT(name, r, w, fill) add_buf(bufs, &n, name, dt, 3, B, S, D, 0, r, w, fill)

int kfb_case_buffers(const kft_bench_case *c, kfb_buffer *bufs)
{
    int n = 0;
    kf_dtype dt = c->dtype;
    int64_t B = c->batch, S = c->tokens, D = c->cols;
    int64_t cond_tokens = (c->form == 1) ? S : 1;   /* per token or per batch */

    switch (c->op) {
    case KF_OP_RMS_NORM:
        ACT("x", 1, 0, KFB_FILL_NORMAL);
        add_buf(bufs, &n, "weight", dt, 1, D, 0, 0, 0, 1, 0, KFB_FILL_WEIGHT);
        ACT("y", 0, 1, KFB_FILL_OUTPUT);
        break;
    case KF_OP_ADD_RMS_NORM:
        ACT("x", 1, 0, KFB_FILL_NORMAL);
        ACT("residual", 1, 1, KFB_FILL_NORMAL);
        add_buf(bufs, &n, "weight", dt, 1, D, 0, 0, 0, 1, 0, KFB_FILL_WEIGHT);
        ACT("y", 0, 1, KFB_FILL_OUTPUT);
        break;
    case KF_OP_LAYER_NORM:
        ACT("x", 1, 0, KFB_FILL_NORMAL);
        add_buf(bufs, &n, "weight", dt, 1, D, 0, 0, 0, 1, 0, KFB_FILL_WEIGHT);
        add_buf(bufs, &n, "bias", dt, 1, D, 0, 0, 0, 1, 0, KFB_FILL_SMALL);
        ACT("y", 0, 1, KFB_FILL_OUTPUT);
        break;
    case KF_OP_ADA_NORM:
        ACT("x", 1, 0, KFB_FILL_NORMAL);
        add_buf(bufs, &n, "scale", dt, 3, B, cond_tokens, D, 0, 1, 0, KFB_FILL_SMALL);
        add_buf(bufs, &n, "shift", dt, 3, B, cond_tokens, D, 0, 1, 0, KFB_FILL_SMALL);
        ACT("y", 0, 1, KFB_FILL_OUTPUT);
        break;
    case KF_OP_ADD_ADA_NORM:
        ACT("h", 1, 1, KFB_FILL_NORMAL);
        ACT("a", 1, 0, KFB_FILL_SMALL);
        add_buf(bufs, &n, "scale", dt, 3, B, cond_tokens, D, 0, 1, 0, KFB_FILL_SMALL);
        add_buf(bufs, &n, "shift", dt, 3, B, cond_tokens, D, 0, 1, 0, KFB_FILL_SMALL);
        ACT("y", 0, 1, KFB_FILL_OUTPUT);
        break;
    case KF_OP_GATED_RESIDUAL:
        ACT("h", 1, 1, KFB_FILL_NORMAL);
        ACT("a", 1, 0, KFB_FILL_SMALL);
        add_buf(bufs, &n, "gate", dt, 3, B, cond_tokens, D, 0, 1, 0, KFB_FILL_SMALL);
        break;
    case KF_OP_ROPE:
    case KF_OP_RMS_NORM_ROPE: {
        int64_t H = c->heads > 0 ? c->heads : 1;
        int64_t r = D;                           /* the whole head rotates */
        int is_nr = (c->op == KF_OP_RMS_NORM_ROPE);
        add_buf(bufs, &n, is_nr ? "x" : "q", dt, 4, B, S, H, D, 1, 0, KFB_FILL_NORMAL);
        if (!is_nr && c->kv_heads > 0)
            add_buf(bufs, &n, "k", dt, 4, B, S, c->kv_heads, D, 1, 0, KFB_FILL_NORMAL);
        if (is_nr)
            add_buf(bufs, &n, "weight", dt, 1, H * D, 0, 0, 0, 1, 0, KFB_FILL_WEIGHT);
        if (c->form == 0) {
            add_buf(bufs, &n, "cos", KF_F32, 3, B, S, r, 0, 1, 0, KFB_FILL_COS);
            add_buf(bufs, &n, "sin", KF_F32, 3, B, S, r, 0, 1, 0, KFB_FILL_SIN);
        } else {
            add_buf(bufs, &n, "positions", KF_F32, 3, B, S, KFT_BENCH_ROPE_AXES, 0, 1, 0,
                    KFB_FILL_POSITIONS);
            add_buf(bufs, &n, "freqs", KF_F32, 1, r / 2, 0, 0, 0, 1, 0, KFB_FILL_FREQS);
            add_buf(bufs, &n, "axis", KF_I32, 1, r / 2, 0, 0, 0, 1, 0, KFB_FILL_AXIS);
        }
        add_buf(bufs, &n, is_nr ? "y" : "q_out", dt, 4, B, S, H, D, 0, 1, KFB_FILL_OUTPUT);
        if (!is_nr && c->kv_heads > 0)
            add_buf(bufs, &n, "k_out", dt, 4, B, S, c->kv_heads, D, 0, 1, KFB_FILL_OUTPUT);
        break;
    }
    case KF_OP_GLU:
        if (c->form == 1) {
            add_buf(bufs, &n, "packed", dt, 3, B, S, 2 * D, 0, 1, 0, KFB_FILL_NORMAL);
        } else {
            ACT("gate", 1, 0, KFB_FILL_NORMAL);
            ACT("up", 1, 0, KFB_FILL_NORMAL);
        }
        ACT("y", 0, 1, KFB_FILL_OUTPUT);
        break;
    case KF_OP_GELU:
    case KF_OP_SILU:
    case KF_OP_SOFTMAX:
        ACT("x", 1, 0, KFB_FILL_NORMAL);
        ACT("y", 0, 1, KFB_FILL_OUTPUT);
        break;
    default:
        return 0;
    }
    return n;
}

#undef ACT

int64_t kfb_buffer_elems(const kfb_buffer *b)
{
    int64_t e = 1;
    int i;
    for (i = 0; i < b->ndim; i++)
        e *= b->shape[i];
    return e;
}

int64_t kfb_buffer_bytes(const kfb_buffer *b)
{
    return kfb_buffer_elems(b) * (int64_t)kf_dtype_size(b->dtype);
}

int64_t kfb_case_bytes(const kft_bench_case *c)
{
    kfb_buffer bufs[KFB_MAX_BUFFERS];
    int n = kfb_case_buffers(c, bufs), i;
    int64_t total = 0;
    for (i = 0; i < n; i++)
        total += kfb_buffer_bytes(&bufs[i]) * (bufs[i].reads + bufs[i].writes);
    return total;
}

int64_t kfb_case_footprint(const kft_bench_case *c)
{
    kfb_buffer bufs[KFB_MAX_BUFFERS];
    int n = kfb_case_buffers(c, bufs), i;
    int64_t total = 0;
    for (i = 0; i < n; i++)
        total += kfb_buffer_bytes(&bufs[i]);
    return total;
}

void kfb_case_shape(const kft_bench_case *c, char *buf, size_t n)
{
    if (c->op == KF_OP_ROPE || c->op == KF_OP_RMS_NORM_ROPE) {
        if (c->kv_heads > 0)
            snprintf(buf, n, "%lldx%lldx(%lld+%lld)x%lld", (long long)c->batch,
                     (long long)c->tokens, (long long)c->heads, (long long)c->kv_heads,
                     (long long)c->cols);
        else
            snprintf(buf, n, "%lldx%lldx%lldx%lld", (long long)c->batch, (long long)c->tokens,
                     (long long)(c->heads > 0 ? c->heads : 1), (long long)c->cols);
    } else if (c->batch > 1) {
        snprintf(buf, n, "%lldx%lldx%lld", (long long)c->batch, (long long)c->tokens,
                 (long long)c->cols);
    } else {
        snprintf(buf, n, "%lldx%lld", (long long)c->tokens, (long long)c->cols);
    }
}

static const char *rms_mode_name(int v)
{
    switch (v) {
    case KF_RMS_LLAMA: return "llama";
    case KF_RMS_GEMMA: return "gemma";
    case KF_RMS_NONE: return "none";
    default: return "?";
    }
}

static const char *act_name(int v)
{
    switch (v) {
    case KF_ACT_SILU: return "silu";
    case KF_ACT_GELU_TANH: return "gelu_tanh";
    case KF_ACT_GELU_ERF: return "gelu_erf";
    default: return "?";
    }
}

void kfb_case_variant(const kft_bench_case *c, char *buf, size_t n)
{
    const char *conv = c->variant == KF_ROPE_HALF ? "half" : "interleaved";
    switch (c->op) {
    case KF_OP_RMS_NORM:
    case KF_OP_ADD_RMS_NORM:
        snprintf(buf, n, "%s", rms_mode_name(c->variant));
        break;
    case KF_OP_LAYER_NORM:
        snprintf(buf, n, "w+b");
        break;
    case KF_OP_ADA_NORM:
    case KF_OP_ADD_ADA_NORM:
        snprintf(buf, n, "%s/%s", c->variant == KF_NORM_LAYER ? "layer" : "rms",
                 c->form == 1 ? "token" : "batch");
        break;
    case KF_OP_GATED_RESIDUAL:
        snprintf(buf, n, "%s", c->form == 1 ? "token" : "batch");
        break;
    case KF_OP_ROPE:
    case KF_OP_RMS_NORM_ROPE:
        snprintf(buf, n, "%s/%s", conv, c->form == 1 ? "positions" : "table");
        break;
    case KF_OP_GLU:
        snprintf(buf, n, "%s/%s", act_name(c->variant), c->form == 1 ? "packed" : "2tensors");
        break;
    case KF_OP_GELU:
        snprintf(buf, n, "%s", c->variant ? "tanh" : "erf");
        break;
    default:
        snprintf(buf, n, "-");
        break;
    }
}
