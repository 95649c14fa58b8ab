/* internal.h - what the core, the backends, the tests and the tools share
 * but users do not: the context, the normalized views the backends receive,
 * the backend function table, and timing / device-fact helpers for the tools.
 *
 * Contract between core and backends: the core (src/core/api.c) checks every
 * argument and hands the backend NORMALIZED views:
 *   - activations (x, y, residual, h, a, q, k, gate/up of glu, ...) are 4-D:
 *     leading dims padded with size 1 (stride 0); last dim stride 1;
 *   - conditioning (scale, shift, gate of ada/gated ops) and rope tables /
 *     positions are 4-D with x's outer shape [s0, s1, s2, *]: broadcast dims
 *     have stride 0;
 *   - weights / biases / freqs / axis are 1-D contiguous;
 *   - optional tensors are NULL when absent;
 *   - packed glu is split into two views (gate, up); gelu / silu are one
 *     activation entry.
 * Rows: row r of an activation (0 <= r < s0*s1*s2) is at kf_row_offset(). */
#ifndef KF_INTERNAL_H
#define KF_INTERNAL_H

#include "kfuse.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KF_ERRMSG_LEN 512

/* Device facts, read from the device at context creation (GPU) or from the OS (CPU). */
typedef struct kf_device_facts {
    char name[128];
    int arch_major, arch_minor;     /* compute capability / gfx major.minor */
    char arch_name[32];             /* "sm_90", "gfx90a" */
    int sm_count;                   /* SMs / CUs; CPU: threads */
    int warp_size;                  /* 32 or 64; CPU: 1 */
    int max_threads_per_block;
    int max_threads_per_sm;
    size_t smem_per_block;          /* default shared memory limit per block */
    size_t smem_per_block_optin;    /* with the opt-in attribute */
    size_t l2_bytes;                /* GPU: L2; CPU: the last-level cache */
    int mem_bus_bits;
    int mem_clock_khz;
    double peak_bandwidth_gbs;      /* 2 * bus/8 * clock (DDR); 0 if unknown */
    size_t total_mem_bytes;
    char cpu_kernels[16];           /* CPU: the copy of the kernels in use, "baseline",
                                     * "avx2" or "avx512" (src/cpu/cpu.h); GPU: "" */
} kf_device_facts;

typedef struct kf_rope_plan {
    int convention;                 /* kf_rope_convention */
    int rotary_dim;                 /* resolved, even, <= head_dim */
    int use_table;                  /* 1: cos/sin; 0: positions/freqs/axis */
    kf_tensor cos, sin;             /* table form: 4-D [B, S, 1, r] (stride 0 broadcasts) */
    kf_tensor positions;            /* positions form: 4-D [B, S, 1, n_axes] */
    int n_axes;
    kf_tensor freqs;                /* [r/2] f32 */
    kf_tensor axis;                 /* [r/2] i32; data NULL = all axis 0 */
} kf_rope_plan;

/* One table per backend; the core calls through ctx->ops after the checks. */
typedef struct kf_backend_ops {
    kf_status (*rms_norm)(kf_ctx *ctx, const kf_tensor *x, const kf_tensor *w, float eps,
                          int mode, float offset, const kf_tensor *y);
    kf_status (*add_rms_norm)(kf_ctx *ctx, const kf_tensor *x, const kf_tensor *residual,
                              const kf_tensor *w, float eps, int mode, float offset,
                              const kf_tensor *y);
    kf_status (*layer_norm)(kf_ctx *ctx, const kf_tensor *x, const kf_tensor *w,
                            const kf_tensor *b, float eps, const kf_tensor *y);
    kf_status (*ada_norm)(kf_ctx *ctx, const kf_tensor *x, const kf_tensor *scale,
                          const kf_tensor *shift, const kf_tensor *w, float eps, int kind,
                          const kf_tensor *y);
    kf_status (*add_ada_norm)(kf_ctx *ctx, const kf_tensor *h, const kf_tensor *a,
                              const kf_tensor *gate, const kf_tensor *scale,
                              const kf_tensor *shift, const kf_tensor *w, float eps, int kind,
                              const kf_tensor *y);
    kf_status (*gated_residual)(kf_ctx *ctx, const kf_tensor *h, const kf_tensor *a,
                                const kf_tensor *gate);
    /* k and k_out NULL when absent. */
    kf_status (*rope)(kf_ctx *ctx, const kf_tensor *q, const kf_tensor *k,
                      const kf_tensor *q_out, const kf_tensor *k_out, const kf_rope_plan *rope);
    kf_status (*rms_norm_rope)(kf_ctx *ctx, const kf_tensor *x, const kf_tensor *w, float eps,
                               int mode, float offset, const kf_rope_plan *rope,
                               const kf_tensor *y);
    /* two-tensor form only (the core splits packed inputs) */
    kf_status (*glu)(kf_ctx *ctx, const kf_tensor *gate, const kf_tensor *up, int act,
                     const kf_tensor *y);
    /* gelu (act = KF_ACT_GELU_TANH / KF_ACT_GELU_ERF) and silu (KF_ACT_SILU) */
    kf_status (*activation)(kf_ctx *ctx, const kf_tensor *x, int act, const kf_tensor *y);
    kf_status (*softmax)(kf_ctx *ctx, const kf_tensor *x, float scale, const kf_tensor *y);

    /* memory, sync */
    kf_status (*malloc_)(kf_ctx *ctx, size_t bytes, void **ptr);
    kf_status (*free_)(kf_ctx *ctx, void *ptr);
    kf_status (*memcpy_)(kf_ctx *ctx, void *dst, const void *src, size_t bytes, int to_device);
    kf_status (*synchronize)(kf_ctx *ctx);

    /* for the tools: device-to-device copy (the bandwidth limit), an empty
     * kernel (the launch floor), timing with device events on the stream. */
    kf_status (*copy_d2d)(kf_ctx *ctx, void *dst, const void *src, size_t bytes);
    kf_status (*empty_kernel)(kf_ctx *ctx);
    kf_status (*timer_start)(kf_ctx *ctx);
    kf_status (*timer_stop)(kf_ctx *ctx, double *elapsed_ms);   /* waits for the stop event */
    /* Fill n bytes at ptr with a byte value (poisoning outputs in tests). */
    kf_status (*memset_)(kf_ctx *ctx, void *ptr, int value, size_t bytes);
    /* Graphs, for timing calls without the gaps between launches (kfuse
     * bench --timing graph); NULL where the backend has none (the CPU).
     * graph_begin starts capturing what is issued on the context's stream;
     * graph_end ends the capture and instantiates it as the one graph the
     * context holds; graph_launch replays it on the context's stream;
     * graph_free drops it, and ends an unfinished capture. */
    kf_status (*graph_begin)(kf_ctx *ctx);
    kf_status (*graph_end)(kf_ctx *ctx);
    kf_status (*graph_launch)(kf_ctx *ctx);
    void (*graph_free)(kf_ctx *ctx);
    /* Release backend state held in ctx->backend_state. */
    void (*destroy)(kf_ctx *ctx);
} kf_backend_ops;

struct kf_ctx {
    kf_backend backend;
    int device;
    void *stream;
    const kf_backend_ops *ops;
    kf_device_facts facts;
    void *backend_state;            /* owned by the backend (events, ...) */
    int row_chunks;                 /* GPU row kernels: chunks of 16 bytes per thread that
                                     * the launch geometry aims at, from KFUSE_ROW_CHUNKS
                                     * (1, 2, 4 or 8; for tuning runs); 0: each op's own */
    int row_block;                  /* GPU row kernels: threads per block that rows are
                                     * packed into, from KFUSE_ROW_BLOCK (64, 128, 256
                                     * or 512; for tuning runs); 0: kf_row_geometry's */
    char describe[256];
    char last_error[KF_ERRMSG_LEN];
};

/* Record an error message on ctx (printf-style) and return status. */
kf_status kf_set_error(kf_ctx *ctx, kf_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Offset (in elements) of row r of a normalized 4-D tensor t, where rows are
 * counted over outer shape s1, s2 (dims 1 and 2 of the activation):
 * r = (i0 * s1 + i1) * s2 + i2. Conditioning tensors use the activation's
 * s1, s2 and their own (possibly 0) strides. */
static inline int64_t kf_row_offset(const kf_tensor *t, int64_t s1, int64_t s2, int64_t r)
{
    int64_t i2 = r % s2;
    int64_t q = r / s2;
    int64_t i1 = q % s1;
    int64_t i0 = q / s1;
    return i0 * t->stride[0] + i1 * t->stride[1] + i2 * t->stride[2];
}

/* The backends. kf_cpu_init / kf_gpu_init fill ctx->ops, ctx->facts,
 * ctx->describe (and backend_state). kf_gpu_init returns KF_ERR_NO_DEVICE
 * when there is no usable GPU (or the GPU backend was not compiled in). */
kf_status kf_cpu_init(kf_ctx *ctx);
kf_status kf_gpu_init(kf_ctx *ctx, int device);
/* 1 if this build holds the GPU backend (CUDA or HIP), else 0. */
int kf_gpu_compiled(void);
/* The number of GPUs the runtime sees: 0 without a GPU backend, a driver or
 * a device. Changes no device state. */
int kf_gpu_device_count(void);

/* Tools' access to the device facts and timing (exported for tests/tools). */
KF_API const kf_device_facts *kf__facts(const kf_ctx *ctx);
KF_API kf_status kf__copy_d2d(kf_ctx *ctx, void *dst, const void *src, size_t bytes);
KF_API kf_status kf__empty_kernel(kf_ctx *ctx);
KF_API kf_status kf__timer_start(kf_ctx *ctx);
KF_API kf_status kf__timer_stop(kf_ctx *ctx, double *elapsed_ms);
KF_API kf_status kf__memset(kf_ctx *ctx, void *ptr, int value, size_t bytes);
/* The backend's graph entries (above); KF_ERR_UNSUPPORTED where it has none.
 * kf__graph_free is safe to call at any time. */
KF_API kf_status kf__graph_begin(kf_ctx *ctx);
KF_API kf_status kf__graph_end(kf_ctx *ctx);
KF_API kf_status kf__graph_launch(kf_ctx *ctx);
KF_API void kf__graph_free(kf_ctx *ctx);

/* f16 / bf16 <-> f32 conversion on the host: round to nearest even, NaN kept
 * (quiet), Inf kept, f16 subnormals exact. Shared by the CPU backend, the
 * tests and the tools. */
float kf_f16_to_f32(uint16_t h);
uint16_t kf_f32_to_f16(float f);
float kf_bf16_to_f32(uint16_t h);
uint16_t kf_f32_to_bf16(float f);
/* Load element i of a dtype buffer as f32; store f32 into element i. */
float kf_load_f32(const void *data, int dtype, int64_t i);
void kf_store_f32(void *data, int dtype, int64_t i, float v);

#ifdef __cplusplus
}
#endif

#endif /* KF_INTERNAL_H */
