/* kfuse.h - the public C API of kfuse: fused, bandwidth-bound kernels for the
 * non-GEMM layers of transformer and diffusion models (RMSNorm, LayerNorm,
 * AdaLN modulation, residual fusions, rotary embeddings, gated activations,
 * softmax), on a CPU backend (C11 + OpenMP) and a GPU backend (CUDA / HIP).
 *
 * Conventions shared by every op (docs/ops.md is the exact contract):
 *   - Every call returns a kf_status; KF_OK is 0. On failure the context keeps
 *     a message saying what was wrong: kf_last_error(ctx).
 *   - Tensors are kf_tensor views: data pointer, dtype, ndim (1..4), shape and
 *     strides counted in elements. The last dimension (D) is the row and must
 *     have stride 1; every other dimension may have any stride >= 0. Stride 0
 *     on a dimension of size > 1 repeats elements (a broadcast, an expanded
 *     tensor): allowed on every tensor the op only reads (x, a, q, k, gate /
 *     up, conditioning, tables, positions), never on an output, a tensor
 *     written in place, or a parameter vector (weight, bias, freqs, axis).
 *   - Activations are f32, f16 or bf16; the output has the activation dtype.
 *     Weights, biases and tables are f32 or the activation dtype. Arithmetic is
 *     f32 with one rounding at the store.
 *   - Data pointers must be on the context's device: host memory for the CPU
 *     backend, device memory for the GPU backend.
 *   - A tensor the op writes may share memory with another tensor of the
 *     call only as the in-place form each op names ("y may alias x"): exactly
 *     the same view (pointer, dtype, shape, strides). Other sharing is
 *     rejected (KF_ERR_INVALID_ARG): an exact alias that is not the in-place
 *     pair, or a partial overlap. Overlap is decided exactly for views of one
 *     dtype and one stride pattern (slices of one buffer), against a dense
 *     view (a contiguous tensor or contiguous rows, dims in any order), and
 *     row by row where one view has at most 256 rows. Past that (two views of
 *     different strides, both with gaps; strides that do not nest; views over
 *     2^60 bytes) it is not examined, and elements must not meet. A written
 *     tensor whose strides reach an element twice is KF_ERR_STRIDE (found
 *     where the search above would find it).
 *   - Ops are asynchronous on the GPU backend (queued on the context's stream)
 *     and synchronous on the CPU backend.
 */
#ifndef KFUSE_H
#define KFUSE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define KF_API __declspec(dllexport)
#else
#define KF_API __attribute__((visibility("default")))
#endif

#define KF_VERSION_MAJOR 0
#define KF_VERSION_MINOR 1
#define KF_VERSION_PATCH 0
#define KF_MAX_DIMS 4

/* ---- status ------------------------------------------------------------ */

/* Append-only: values never change meaning. */
typedef enum kf_status {
    KF_OK = 0,
    KF_ERR_NULL_POINTER = 1,   /* a required pointer argument is NULL */
    KF_ERR_INVALID_ARG = 2,    /* a scalar argument is out of range (eps < 0, bad enum, ...) */
    KF_ERR_DTYPE = 3,          /* a tensor's dtype is not allowed here or mismatches */
    KF_ERR_SHAPE = 4,          /* shapes disagree or ndim is out of range */
    KF_ERR_STRIDE = 5,         /* a stride is not allowed (inner stride != 1, negative, broadcast output) */
    KF_ERR_UNSUPPORTED = 6,    /* a valid combination this backend does not implement */
    KF_ERR_NO_DEVICE = 7,      /* the requested backend or device is not present */
    KF_ERR_GPU = 8,            /* the GPU runtime reported an error (message has its text) */
    KF_ERR_ALLOC = 9,          /* out of memory */
    KF_ERR_INTERNAL = 10       /* a broken internal invariant: please report */
} kf_status;

/* Static string for a status ("KF_ERR_SHAPE: shapes disagree"); never NULL. */
KF_API const char *kf_status_string(kf_status status);

/* ---- version ----------------------------------------------------------- */

/* major * 10000 + minor * 100 + patch */
KF_API int kf_version(void);
/* "0.1.0" */
KF_API const char *kf_version_string(void);

/* ---- dtypes and tensor views ------------------------------------------- */

typedef enum kf_dtype {
    KF_F32 = 0,
    KF_F16 = 1,
    KF_BF16 = 2,
    KF_I32 = 3                 /* index tensors only (rope axis map) */
} kf_dtype;

/* Bytes per element (4, 2, 2, 4), or 0 for an unknown dtype. */
KF_API size_t kf_dtype_size(kf_dtype dtype);
/* "f32", "f16", "bf16", "i32", or "?" */
KF_API const char *kf_dtype_name(kf_dtype dtype);

/* A view of a tensor. A plain struct so that ctypes / FFI can mirror it:
 * 8 + 4 + 4 + 4*8 + 4*8 = 80 bytes. shape[i] and stride[i] are read for
 * i < ndim only. Strides are in elements, not bytes. A non-empty view's data
 * is aligned to its element size, and its element count and the bytes from
 * its first to its last element are below 2^63 (else the op fails with
 * KF_ERR_INVALID_ARG, KF_ERR_SHAPE or KF_ERR_STRIDE). */
typedef struct kf_tensor {
    void *data;
    int32_t dtype;                 /* kf_dtype */
    int32_t ndim;                  /* 1..KF_MAX_DIMS */
    int64_t shape[KF_MAX_DIMS];
    int64_t stride[KF_MAX_DIMS];
} kf_tensor;

/* Fill *t as a contiguous (row-major) view of data. ndim 1..4; another ndim,
 * or a NULL shape, gives a view that every op rejects (KF_ERR_SHAPE). */
KF_API kf_tensor kf_tensor_contiguous(void *data, kf_dtype dtype, int ndim, const int64_t *shape);

/* ---- context ----------------------------------------------------------- */

typedef enum kf_backend {
    KF_BACKEND_AUTO = 0,       /* the GPU when one is present, else the CPU (see
                                * kf_ctx_create) */
    KF_BACKEND_CPU = 1,
    KF_BACKEND_GPU = 2
} kf_backend;

/* A context holds the backend, the device, the stream and the last error.
 * Use one context from one thread at a time (give each thread its own). */
typedef struct kf_ctx kf_ctx;

/* Create a context on a backend. device is the GPU index (ignored on the CPU).
 * KF_BACKEND_GPU with no usable GPU returns KF_ERR_NO_DEVICE.
 * KF_BACKEND_AUTO runs on GPU `device`, and on the CPU only when no GPU is
 * present: the library was built without a GPU backend, or the GPU runtime
 * finds no driver or no device. Where GPUs are present and `device` cannot be
 * used (an index past them, an init error), AUTO returns that error as
 * KF_BACKEND_GPU does (KF_ERR_NO_DEVICE for an index past them), never a CPU
 * context. On failure *ctx is NULL and kf_last_error(NULL) says why. The GPU
 * backend reads the device facts once here. Every call through a GPU context
 * (its creation included) runs on its device, whichever device the calling
 * thread has current, and leaves the thread's current device as it was; only
 * a device whose primary context is not active (device 0 of a thread that
 * never selected a device) is not made current again, since that would create
 * its context: the context's device stays current then. */
KF_API kf_status kf_ctx_create(kf_backend backend, int device, kf_ctx **ctx);
/* Free a context; NULL is accepted. */
KF_API void kf_ctx_free(kf_ctx *ctx);
/* The backend the context runs on (never AUTO for a context; KF_BACKEND_AUTO
 * for NULL). */
KF_API kf_backend kf_ctx_backend(const kf_ctx *ctx);
/* Set the stream (cudaStream_t / hipStream_t; NULL = the default stream) the
 * next ops are queued on. Cheap: call it before every op if needed. Ignored on
 * the CPU backend. */
KF_API kf_status kf_ctx_set_stream(kf_ctx *ctx, void *stream);
/* The message of the last failed call on this context ("" if none). The
 * pointer stays valid until the next call on the context. */
KF_API const char *kf_last_error(const kf_ctx *ctx);
/* Human-readable description of the backend and device
 * ("cpu: 2 threads, avx512 kernels, AMD EPYC": threads, the copy of the CPU
 * kernels, the CPU's model name; "gpu 0: NVIDIA H200, sm_90, 132 SMs, warp 32"). */
KF_API const char *kf_ctx_describe(const kf_ctx *ctx);

/* ---- ops --------------------------------------------------------------- */

/* One key per op, used everywhere (CLI --op names, tests, Python).
 * Append-only. */
typedef enum kf_op {
    KF_OP_RMS_NORM = 0,
    KF_OP_ADD_RMS_NORM = 1,
    KF_OP_LAYER_NORM = 2,
    KF_OP_ADA_NORM = 3,
    KF_OP_ADD_ADA_NORM = 4,
    KF_OP_GATED_RESIDUAL = 5,
    KF_OP_ROPE = 6,
    KF_OP_RMS_NORM_ROPE = 7,
    KF_OP_GLU = 8,
    KF_OP_GELU = 9,
    KF_OP_SILU = 10,
    KF_OP_SOFTMAX = 11,
    KF_OP_COUNT = 12
} kf_op;

/* "rms_norm", "add_rms_norm", ...; NULL for an unknown op. */
KF_API const char *kf_op_name(kf_op op);
/* 1 if the context's backend runs op with activations of this dtype, else 0. */
KF_API int kf_supports(const kf_ctx *ctx, kf_op op, kf_dtype dtype);

/* How rms_norm rounds, matching the three ways model code writes it. */
typedef enum kf_rms_mode {
    /* HF LlamaRMSNorm / Qwen / Mistral: n = x / rms in f32, rounded to x's
     * dtype, then times the weight (the weight's value as stored), rounded
     * to x's dtype. */
    KF_RMS_LLAMA = 0,
    /* HF GemmaRMSNorm: n * (offset + weight) all in f32, rounded once. */
    KF_RMS_GEMMA = 1,
    /* torch.nn.RMSNorm / F.rms_norm: n * weight in f32, rounded once. */
    KF_RMS_NONE = 2
} kf_rms_mode;

/* RMSNorm over the last dim.
 *   x:      [..., D] f32 / f16 / bf16.
 *   weight: [D] or NULL (no affine). f32 or x's dtype.
 *   eps:    >= 0, added to mean(x^2).
 *   mode:   kf_rms_mode. offset: added to the weight in KF_RMS_GEMMA (1.0 for
 *           Gemma); must be 0 in the other modes.
 *   y:      same shape and dtype as x; may alias x.
 * y = x / sqrt(mean(x^2) + eps) * weight. */
KF_API kf_status kf_rms_norm(kf_ctx *ctx, const kf_tensor *x, const kf_tensor *weight,
                             float eps, kf_rms_mode mode, float offset, const kf_tensor *y);

/* Fused residual add + RMSNorm (the decoder layer seam):
 *   residual = x + residual   (rounded to the dtype, written into residual)
 *   y = rms_norm(residual)    (as kf_rms_norm)
 * x, residual, y: same shape and dtype; y may alias x. */
KF_API kf_status kf_add_rms_norm(kf_ctx *ctx, const kf_tensor *x, const kf_tensor *residual,
                                 const kf_tensor *weight, float eps, kf_rms_mode mode,
                                 float offset, const kf_tensor *y);

/* LayerNorm over the last dim (F.layer_norm): y = (x - mean) / sqrt(var + eps)
 * [* weight] [+ bias]. weight and bias: [D] or NULL, f32 or x's dtype. */
KF_API kf_status kf_layer_norm(kf_ctx *ctx, const kf_tensor *x, const kf_tensor *weight,
                               const kf_tensor *bias, float eps, const kf_tensor *y);

/* The normalization inside AdaLN. */
typedef enum kf_norm_kind {
    KF_NORM_RMS = 0,
    KF_NORM_LAYER = 1
} kf_norm_kind;

/* AdaLN modulation (DiT):  y = norm(x) [* weight] * (1 + scale) [+ shift].
 *   x:      [..., D].
 *   scale:  ndim at most x's (fewer: leading dims of 1, as broadcasting
 *           does); each dim equal to x's or 1 (or stride 0): per
 *           token [B, S, D] or broadcast per batch [B, 1, D] with any batch
 *           stride (diffusers' unbind views are read as they are). f32 or x's
 *           dtype. Required.
 *   shift:  like scale, or NULL.
 *   weight: [D] or NULL. LayerNorm kind has no bias (use shift).
 *   y:      same shape and dtype as x; may alias x. */
KF_API kf_status kf_ada_norm(kf_ctx *ctx, const kf_tensor *x, const kf_tensor *scale,
                             const kf_tensor *shift, const kf_tensor *weight, float eps,
                             kf_norm_kind kind, const kf_tensor *y);

/* Residual add + AdaLN (the DiT seam between two sub-blocks):
 *   h = h + a [* gate]        (rounded, written into h; gate like scale, or NULL)
 *   y = ada_norm(h, scale, shift, weight, eps, kind)
 * h, a, y: same shape and dtype. */
KF_API kf_status kf_add_ada_norm(kf_ctx *ctx, const kf_tensor *h, const kf_tensor *a,
                                 const kf_tensor *gate, const kf_tensor *scale,
                                 const kf_tensor *shift, const kf_tensor *weight, float eps,
                                 kf_norm_kind kind, const kf_tensor *y);

/* Gated residual: h = h + a * gate (in place). gate broadcasts like ada_norm's
 * scale (per token or per batch); f32 or h's dtype. */
KF_API kf_status kf_gated_residual(kf_ctx *ctx, const kf_tensor *h, const kf_tensor *a,
                                   const kf_tensor *gate);

/* ---- rotary embeddings ------------------------------------------------- */

typedef enum kf_rope_convention {
    /* NeoX / HF rotate_half: pairs (i, i + r/2) of the first r channels:
     *   y[i]       = x[i] * cos[i]         - x[i+r/2] * sin[i]
     *   y[i + r/2] = x[i+r/2] * cos[i+r/2] + x[i] * sin[i+r/2]           */
    KF_ROPE_HALF = 0,
    /* GPT-J / LTX-Video: pairs (2i, 2i+1):
     *   y[2i]   = x[2i] * cos[2i]     - x[2i+1] * sin[2i]
     *   y[2i+1] = x[2i+1] * cos[2i+1] + x[2i] * sin[2i+1]                */
    KF_ROPE_INTERLEAVED = 1
} kf_rope_convention;

/* Where the angles come from: give either the tables (cos and sin) or the
 * positions (positions and freqs, axis optional), never both.
 *
 * Table form: cos, sin are [S, r] or [B, S, r] (a B of 1 or stride 0
 * broadcasts), r = rotary_dim, last stride 1, both f32 or both the
 * activation dtype.
 * Channel c (< r) of every head of token (b, s) uses cos[b, s, c].
 *
 * Positions form: positions [S, n_axes] or [B, S, n_axes], f32, n_axes 1..3;
 * freqs [r/2] f32; axis [r/2] i32 with values 0..n_axes-1, or NULL (all 0).
 * The CPU backend rejects other values (KF_ERR_INVALID_ARG); the GPU backend
 * does not read the map on the host: there a pair with such a value rotates
 * by some coordinate of its own token, and nothing is read out of bounds.
 * Pair p rotates by angle = freqs[p] * positions[b, s, axis[p]] (f32
 * product; freqs[p] = 0 leaves a pair of finite values and a finite position
 * unchanged). Pair p is channels
 * (p, p + r/2) for HALF and (2p, 2p+1) for INTERLEAVED. sin and cos are
 * computed in f32 with full-range argument reduction. */
typedef struct kf_rope_args {
    int32_t convention;            /* kf_rope_convention */
    int32_t rotary_dim;            /* r: even, 2..head_dim; 0 means head_dim
                                      (then head_dim < 2^31: KF_ERR_SHAPE otherwise) */
    const kf_tensor *cos;
    const kf_tensor *sin;
    const kf_tensor *positions;
    const kf_tensor *freqs;
    const kf_tensor *axis;
} kf_rope_args;

/* Rotary embedding of q and, optionally, k in one call.
 *   q:     [B, S, Hq, Dh] with any strides on B, S, H (HF's [B, H, S, Dh] is
 *          the same memory with permuted strides); Dh stride 1.
 *   k:     [B, S, Hk, Dh] or NULL; Hk may differ from Hq (GQA).
 *   q_out, k_out: same shape and dtype as q, k; may alias them (in place).
 *          k_out is NULL exactly when k is NULL.
 * Channels >= rotary_dim of each head are copied unchanged. */
KF_API kf_status kf_rope(kf_ctx *ctx, const kf_tensor *q, const kf_tensor *k,
                         const kf_tensor *q_out, const kf_tensor *k_out,
                         const kf_rope_args *rope);

/* RMSNorm across all heads of a token followed by rope, one pass (LTX-Video's
 * rms_norm_across_heads + apply_rotary_emb):
 *   x: [B, S, H, Dh], the norm runs over the H*Dh values of each token, so
 *      the H heads of a token must be contiguous (head stride == Dh).
 *   weight: [H*Dh] or NULL; eps; mode as kf_rms_norm (KF_RMS_NONE for
 *      torch.nn.RMSNorm). The normalized value is not rounded before rope.
 *   rope: as kf_rope, applied per head of Dh channels (LTX passes H = 1,
 *      Dh = inner dim).
 *   y: same shape and dtype as x, its heads contiguous too; may alias x. */
KF_API kf_status kf_rms_norm_rope(kf_ctx *ctx, const kf_tensor *x, const kf_tensor *weight,
                                  float eps, kf_rms_mode mode, float offset,
                                  const kf_rope_args *rope, const kf_tensor *y);

/* ---- activations ------------------------------------------------------- */

typedef enum kf_activation {
    KF_ACT_SILU = 0,               /* x * sigmoid(x) */
    KF_ACT_GELU_TANH = 1,          /* 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))) */
    KF_ACT_GELU_ERF = 2            /* 0.5x(1 + erf(x / sqrt(2))) */
} kf_activation;

/* Gated linear unit: y = act(gate) * up.
 * Two-tensor form: gate and up both [..., I] (same shape and dtype),
 *   y [..., I], which may alias gate or up; gate_first (0 or 1 in both forms)
 *   is ignored.
 * Packed form: up == NULL and gate is the packed [..., 2I] tensor; y is
 *   [..., I]. gate_first = 1: the first half is the gate (seeds' GEGLU);
 *   gate_first = 0: the second half is the gate (diffusers GEGLU/SwiGLU:
 *   h, gate = x.chunk(2, -1); h * act(gate)). */
KF_API kf_status kf_glu(kf_ctx *ctx, const kf_tensor *gate, const kf_tensor *up,
                        kf_activation act, int gate_first, const kf_tensor *y);

/* Elementwise GELU; approximate = 0: erf form, 1: tanh form. y may alias x. */
KF_API kf_status kf_gelu(kf_ctx *ctx, const kf_tensor *x, int approximate, const kf_tensor *y);

/* Elementwise SiLU: y = x * sigmoid(x). y may alias x. */
KF_API kf_status kf_silu(kf_ctx *ctx, const kf_tensor *x, const kf_tensor *y);

/* Row-wise softmax over the last dim: y = softmax(scale * x), computed in f32
 * with the row max subtracted. A row of all -inf gives NaN (as PyTorch); where
 * scale * x overflows f32 for finite x, the limit (one-hot on the largest
 * scale * x). scale must be finite. y may alias x. */
KF_API kf_status kf_softmax(kf_ctx *ctx, const kf_tensor *x, float scale, const kf_tensor *y);

/* ---- buffers on the context's device -----------------------------------
 * For C callers without the CUDA headers (and the tests and tools). On the
 * CPU backend these are malloc / memcpy. */
KF_API kf_status kf_malloc(kf_ctx *ctx, size_t bytes, void **ptr);
KF_API kf_status kf_free(kf_ctx *ctx, void *ptr);
/* Copy between host and the context's device: to_device = 1 copies host src
 * to device dst, 0 copies device src to host dst (other values:
 * KF_ERR_INVALID_ARG). Synchronous. */
KF_API kf_status kf_memcpy(kf_ctx *ctx, void *dst, const void *src, size_t bytes, int to_device);
/* Wait until every op queued on the context's stream has finished. */
KF_API kf_status kf_synchronize(kf_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif /* KFUSE_H */
