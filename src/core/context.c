/* context.c - the context (backend choice, stream, last error, device facts),
 * status / dtype / op names, version, and the thin wrappers that route the
 * buffer, sync and timing helpers to the context's backend. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

/* The message of the last kf_ctx_create failure on this thread (there is no
 * context to hold it); kf_last_error(NULL) returns it. */
static _Thread_local char create_error[KF_ERRMSG_LEN];

/* The tuning variables (KFUSE_ROW_CHUNKS, KFUSE_ROW_BLOCK): the value of
 * variable name if it is written exactly as a power of two in [lo, hi], else
 * 0 (unset or anything else: the library's own choice). */
static int env_pow2(const char *name, int lo, int hi)
{
    const char *s = getenv(name);
    if (s == NULL)
        return 0;
    for (int v = lo; v <= hi; v *= 2) {
        char text[16];
        snprintf(text, sizeof text, "%d", v);
        if (strcmp(s, text) == 0)
            return v;
    }
    return 0;
}

const char *kf_status_string(kf_status status)
{
    switch (status) {
    case KF_OK: return "KF_OK: success";
    case KF_ERR_NULL_POINTER: return "KF_ERR_NULL_POINTER: a required pointer is NULL";
    case KF_ERR_INVALID_ARG: return "KF_ERR_INVALID_ARG: an argument is out of range";
    case KF_ERR_DTYPE: return "KF_ERR_DTYPE: dtype not allowed or mismatched";
    case KF_ERR_SHAPE: return "KF_ERR_SHAPE: shapes disagree";
    case KF_ERR_STRIDE: return "KF_ERR_STRIDE: stride not allowed";
    case KF_ERR_UNSUPPORTED: return "KF_ERR_UNSUPPORTED: not implemented on this backend";
    case KF_ERR_NO_DEVICE: return "KF_ERR_NO_DEVICE: backend or device not present";
    case KF_ERR_GPU: return "KF_ERR_GPU: the GPU runtime reported an error";
    case KF_ERR_ALLOC: return "KF_ERR_ALLOC: out of memory";
    case KF_ERR_INTERNAL: return "KF_ERR_INTERNAL: internal error";
    }
    return "KF_ERR_UNKNOWN: unknown status value";
}

int kf_version(void)
{
    return KF_VERSION_MAJOR * 10000 + KF_VERSION_MINOR * 100 + KF_VERSION_PATCH;
}

#define KF_STR2(x) #x
#define KF_STR(x) KF_STR2(x)
const char *kf_version_string(void)
{
    return KF_STR(KF_VERSION_MAJOR) "." KF_STR(KF_VERSION_MINOR) "." KF_STR(KF_VERSION_PATCH);
}

size_t kf_dtype_size(kf_dtype dtype)
{
    switch (dtype) {
    case KF_F32: return 4;
    case KF_F16: return 2;
    case KF_BF16: return 2;
    case KF_I32: return 4;
    }
    return 0;
}

const char *kf_dtype_name(kf_dtype dtype)
{
    switch (dtype) {
    case KF_F32: return "f32";
    case KF_F16: return "f16";
    case KF_BF16: return "bf16";
    case KF_I32: return "i32";
    }
    return "?";
}

kf_tensor kf_tensor_contiguous(void *data, kf_dtype dtype, int ndim, const int64_t *shape)
{
    kf_tensor t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.dtype = (int32_t)dtype;
    /* ndim outside 1..KF_MAX_DIMS, or no shape: a view of ndim 0 or the bad
     * ndim, which every op rejects (KF_ERR_SHAPE), never an empty view */
    t.ndim = shape == NULL ? 0 : ndim;
    if (ndim < 1 || ndim > KF_MAX_DIMS || shape == NULL)
        return t;
    int64_t stride = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        t.shape[i] = shape[i];
        t.stride[i] = stride;
        /* a size no memory holds: the outer strides saturate (no signed
         * overflow) and the op's span check rejects the view */
        int64_t n = shape[i] > 0 ? shape[i] : 1;
        stride = stride > INT64_MAX / n ? INT64_MAX : stride * n;
    }
    return t;
}

static const char *const op_names[KF_OP_COUNT] = {
    "rms_norm", "add_rms_norm", "layer_norm", "ada_norm", "add_ada_norm", "gated_residual",
    "rope", "rms_norm_rope", "glu", "gelu", "silu", "softmax",
};

const char *kf_op_name(kf_op op)
{
    if ((int)op < 0 || op >= KF_OP_COUNT)
        return NULL;
    return op_names[op];
}

int kf_supports(const kf_ctx *ctx, kf_op op, kf_dtype dtype)
{
    if (ctx == NULL || ctx->ops == NULL)
        return 0;
    if (dtype != KF_F32 && dtype != KF_F16 && dtype != KF_BF16)
        return 0;
    const kf_backend_ops *o = ctx->ops;
    switch (op) {
    case KF_OP_RMS_NORM: return o->rms_norm != NULL;
    case KF_OP_ADD_RMS_NORM: return o->add_rms_norm != NULL;
    case KF_OP_LAYER_NORM: return o->layer_norm != NULL;
    case KF_OP_ADA_NORM: return o->ada_norm != NULL;
    case KF_OP_ADD_ADA_NORM: return o->add_ada_norm != NULL;
    case KF_OP_GATED_RESIDUAL: return o->gated_residual != NULL;
    case KF_OP_ROPE: return o->rope != NULL;
    case KF_OP_RMS_NORM_ROPE: return o->rms_norm_rope != NULL;
    case KF_OP_GLU: return o->glu != NULL;
    case KF_OP_GELU: return o->activation != NULL;
    case KF_OP_SILU: return o->activation != NULL;
    case KF_OP_SOFTMAX: return o->softmax != NULL;
    case KF_OP_COUNT: break;
    }
    return 0;
}

kf_status kf_set_error(kf_ctx *ctx, kf_status status, const char *fmt, ...)
{
    char *buf = ctx ? ctx->last_error : create_error;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, KF_ERRMSG_LEN, fmt, ap);
    va_end(ap);
    return status;
}

kf_status kf_ctx_create(kf_backend backend, int device, kf_ctx **out)
{
    if (out == NULL)
        return kf_set_error(NULL, KF_ERR_NULL_POINTER, "kf_ctx_create: ctx output pointer is NULL");
    *out = NULL;
    if (backend != KF_BACKEND_AUTO && backend != KF_BACKEND_CPU && backend != KF_BACKEND_GPU)
        return kf_set_error(NULL, KF_ERR_INVALID_ARG,
                            "kf_ctx_create: backend %d is not AUTO (0), CPU (1) or GPU (2)",
                            (int)backend);
    /* the CPU ignores device, and so does AUTO where no GPU is present */
    if (device < 0 && (backend == KF_BACKEND_GPU ||
                       (backend == KF_BACKEND_AUTO && kf_gpu_device_count() > 0)))
        return kf_set_error(NULL, KF_ERR_INVALID_ARG, "kf_ctx_create: device %d is negative",
                            device);
    kf_ctx *ctx = (kf_ctx *)calloc(1, sizeof *ctx);
    if (ctx == NULL)
        return kf_set_error(NULL, KF_ERR_ALLOC, "kf_ctx_create: out of memory");
    ctx->device = device;
    kf_status st = KF_ERR_NO_DEVICE;
    if (backend == KF_BACKEND_GPU || backend == KF_BACKEND_AUTO) {
        ctx->backend = KF_BACKEND_GPU;
        st = kf_gpu_init(ctx, device);
        if (st != KF_OK && backend == KF_BACKEND_GPU) {
            kf_set_error(NULL, st, "kf_ctx_create: %s", ctx->last_error);
            free(ctx);
            return st;
        }
        /* AUTO takes the CPU only where no GPU is present; where GPUs are, the
         * requested one's failure (an index past them, an init error) is the
         * caller's to see */
        if (st != KF_OK && kf_gpu_device_count() > 0) {
            kf_set_error(NULL, st, "kf_ctx_create: %s (backend AUTO runs on the CPU only where "
                         "no GPU is present)", ctx->last_error);
            free(ctx);
            return st;
        }
    }
    if (st != KF_OK) {
        /* CPU requested, or AUTO with no GPU present. */
        memset(ctx, 0, sizeof *ctx);
        ctx->backend = KF_BACKEND_CPU;
        st = kf_cpu_init(ctx);
        if (st != KF_OK) {
            kf_set_error(NULL, st, "kf_ctx_create: %s", ctx->last_error);
            free(ctx);
            return st;
        }
    }
    ctx->row_chunks = env_pow2("KFUSE_ROW_CHUNKS", 1, 8);
    ctx->row_block = env_pow2("KFUSE_ROW_BLOCK", 64, 512);
    ctx->last_error[0] = '\0';
    *out = ctx;
    return KF_OK;
}

void kf_ctx_free(kf_ctx *ctx)
{
    if (ctx == NULL)
        return;
    if (ctx->ops && ctx->ops->destroy)
        ctx->ops->destroy(ctx);
    free(ctx);
}

kf_backend kf_ctx_backend(const kf_ctx *ctx)
{
    return ctx ? ctx->backend : KF_BACKEND_AUTO;
}

kf_status kf_ctx_set_stream(kf_ctx *ctx, void *stream)
{
    if (ctx == NULL)
        return KF_ERR_NULL_POINTER;
    ctx->stream = stream;
    return KF_OK;
}

const char *kf_last_error(const kf_ctx *ctx)
{
    return ctx ? ctx->last_error : create_error;
}

const char *kf_ctx_describe(const kf_ctx *ctx)
{
    return ctx ? ctx->describe : "";
}

/* ---- buffers, sync, tool helpers: routed to the backend ---- */

kf_status kf_malloc(kf_ctx *ctx, size_t bytes, void **ptr)
{
    if (ctx == NULL)
        return KF_ERR_NULL_POINTER;
    if (ptr == NULL)
        return kf_set_error(ctx, KF_ERR_NULL_POINTER, "kf_malloc: ptr is NULL");
    *ptr = NULL;
    return ctx->ops->malloc_(ctx, bytes, ptr);
}

kf_status kf_free(kf_ctx *ctx, void *ptr)
{
    if (ctx == NULL)
        return KF_ERR_NULL_POINTER;
    if (ptr == NULL)
        return KF_OK;
    return ctx->ops->free_(ctx, ptr);
}

kf_status kf_memcpy(kf_ctx *ctx, void *dst, const void *src, size_t bytes, int to_device)
{
    if (ctx == NULL)
        return KF_ERR_NULL_POINTER;
    if (to_device != 0 && to_device != 1)
        return kf_set_error(ctx, KF_ERR_INVALID_ARG,
                            "kf_memcpy: to_device %d must be 1 (host to device) or 0", to_device);
    if (bytes == 0)
        return KF_OK;
    if (dst == NULL || src == NULL)
        return kf_set_error(ctx, KF_ERR_NULL_POINTER, "kf_memcpy: %s is NULL",
                            dst == NULL ? "dst" : "src");
    return ctx->ops->memcpy_(ctx, dst, src, bytes, to_device);
}

kf_status kf_synchronize(kf_ctx *ctx)
{
    if (ctx == NULL)
        return KF_ERR_NULL_POINTER;
    return ctx->ops->synchronize(ctx);
}

const kf_device_facts *kf__facts(const kf_ctx *ctx)
{
    return ctx ? &ctx->facts : NULL;
}

kf_status kf__copy_d2d(kf_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    if (ctx == NULL)
        return KF_ERR_NULL_POINTER;
    if (bytes == 0)
        return KF_OK;
    if (dst == NULL || src == NULL)
        return kf_set_error(ctx, KF_ERR_NULL_POINTER, "copy_d2d: NULL buffer");
    return ctx->ops->copy_d2d(ctx, dst, src, bytes);
}

kf_status kf__empty_kernel(kf_ctx *ctx)
{
    if (ctx == NULL)
        return KF_ERR_NULL_POINTER;
    return ctx->ops->empty_kernel(ctx);
}

kf_status kf__timer_start(kf_ctx *ctx)
{
    if (ctx == NULL)
        return KF_ERR_NULL_POINTER;
    return ctx->ops->timer_start(ctx);
}

kf_status kf__timer_stop(kf_ctx *ctx, double *elapsed_ms)
{
    if (ctx == NULL || elapsed_ms == NULL)
        return KF_ERR_NULL_POINTER;
    return ctx->ops->timer_stop(ctx, elapsed_ms);
}

kf_status kf__memset(kf_ctx *ctx, void *ptr, int value, size_t bytes)
{
    if (ctx == NULL)
        return KF_ERR_NULL_POINTER;
    if (bytes == 0)
        return KF_OK;
    if (ptr == NULL)
        return kf_set_error(ctx, KF_ERR_NULL_POINTER, "memset: NULL buffer");
    return ctx->ops->memset_(ctx, ptr, value, bytes);
}

/* The graph entries: KF_ERR_UNSUPPORTED on a backend without graphs. */
static kf_status no_graphs(kf_ctx *ctx)
{
    return kf_set_error(ctx, KF_ERR_UNSUPPORTED,
                        "graph timing needs the GPU backend (this backend has no graphs)");
}

kf_status kf__graph_begin(kf_ctx *ctx)
{
    if (ctx == NULL)
        return KF_ERR_NULL_POINTER;
    return ctx->ops->graph_begin ? ctx->ops->graph_begin(ctx) : no_graphs(ctx);
}

kf_status kf__graph_end(kf_ctx *ctx)
{
    if (ctx == NULL)
        return KF_ERR_NULL_POINTER;
    return ctx->ops->graph_end ? ctx->ops->graph_end(ctx) : no_graphs(ctx);
}

kf_status kf__graph_launch(kf_ctx *ctx)
{
    if (ctx == NULL)
        return KF_ERR_NULL_POINTER;
    return ctx->ops->graph_launch ? ctx->ops->graph_launch(ctx) : no_graphs(ctx);
}

void kf__graph_free(kf_ctx *ctx)
{
    if (ctx != NULL && ctx->ops->graph_free)
        ctx->ops->graph_free(ctx);
}
