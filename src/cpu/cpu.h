/* cpu.h - what the files of the CPU backend share: the op entry points and
 * the ops tables (one per compiled copy of the kernel files, see below), row
 * load / store between a dtype buffer and an f32 row, rounding to a dtype,
 * double-precision row sums with a fixed summation order (bitwise
 * deterministic), per-thread f32 scratch, and the OpenMP wrappers (the
 * backend also builds, single-threaded, without OpenMP).
 *
 * Up to three copies of the kernels. The kernel files (norm.c, rope.c,
 * softmax.c, activation.c, ops_table.c) are compiled once as they are (the
 * baseline copy: SSE2 on x86-64) and, on x86-64 with GCC or Clang, a second
 * time with
 *     -mavx2 -mf16c -ffp-contract=off -DKF_CPU_AVX2=1
 * (CMakeLists.txt: the object library kfuse_cpu_avx2; the build defines
 * KF_CPU_AVX2_COPY=1 for the rest of the library then) and, where the
 * compiler takes the flags, a third time with
 *     -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx2 -mf16c -mno-fma
 *     -mprefer-vector-width=512 -ffp-contract=off -DKF_CPU_AVX512=1
 * (kfuse_cpu_avx512, KF_CPU_AVX512_COPY=1). In those copies the defines below
 * give every external name of the kernel files the prefix kf_cpu_avx2_ or
 * kf_cpu_avx512_, so all copies link into one library. Nothing else in those
 * files is external or global: their helpers are static and hold no state,
 * and what they call outside (scratch, errors) lives in backend.c and
 * src/core, compiled once. backend.c picks a copy's table at context
 * creation. No fused multiply-add in any copy (CMakeLists.txt says why there
 * is no -mfma, and how AVX-512's own fused forms are kept out): all round
 * alike, so their results are bitwise equal (tests/test_cpu_isa.c checks
 * it), but for the sign and payload of a NaN made from two different NaNs
 * (x86 keeps the first operand's, and the compiler may order a commutative
 * op's operands differently per copy). */
#ifndef KF_CPU_H
#define KF_CPU_H

#include <math.h>
#include <stdint.h>
#include <stddef.h>
#include <string.h>

#include "core/internal.h"
#include "cpu/half.h"
/* KF_CPU_HW_F16: this copy converts f16 with the F16C instructions (the AVX2
 * and AVX-512 copies) */
#if defined(__F16C__) && defined(__AVX__)
#define KF_CPU_HW_F16 1
#include <immintrin.h>
#else
#define KF_CPU_HW_F16 0
#endif

#ifdef _OPENMP
#include <omp.h>
#define KF_CPU_PRAGMA(text) _Pragma(#text)
/* Static schedule over rows: which thread runs a row never changes a result. */
#define KF_CPU_PARALLEL_FOR(condition) KF_CPU_PRAGMA(omp parallel for schedule(static) if (condition))
/* The most threads a parallel region here can get: OMP_NUM_THREADS may
 * name more than OMP_THREAD_LIMIT allows (the scratch is sized by this). */
static inline int kf_cpu_max_threads(void)
{
    const int wanted = omp_get_max_threads(), limit = omp_get_thread_limit();
    return wanted < limit ? wanted : limit;
}
static inline int kf_cpu_thread_id(void) { return omp_get_thread_num(); }
#else
#define KF_CPU_PARALLEL_FOR(condition)
static inline int kf_cpu_max_threads(void) { return 1; }
static inline int kf_cpu_thread_id(void) { return 0; }
#endif

/* Below this many elements an op runs on the calling thread: waking the
 * thread team costs more than the work. */
#define KF_CPU_PARALLEL_MIN_ELEMENTS 16384

static inline int kf_cpu_worth_parallel(int64_t items, int64_t elements)
{
    return items > 1 && elements >= KF_CPU_PARALLEL_MIN_ELEMENTS;
}

/* ---- ops (norm.c, rope.c, activation.c, softmax.c) and their tables ---- */

/* KF_CPU_COPY(name): an external name of this copy of the kernel files. */
#if defined(KF_CPU_AVX512)
#define KF_CPU_COPY(name) kf_cpu_avx512_##name
#elif defined(KF_CPU_AVX2)
#define KF_CPU_COPY(name) kf_cpu_avx2_##name
#endif
#ifdef KF_CPU_COPY
#define kf_cpu_rms_norm KF_CPU_COPY(rms_norm)
#define kf_cpu_add_rms_norm KF_CPU_COPY(add_rms_norm)
#define kf_cpu_layer_norm KF_CPU_COPY(layer_norm)
#define kf_cpu_ada_norm KF_CPU_COPY(ada_norm)
#define kf_cpu_add_ada_norm KF_CPU_COPY(add_ada_norm)
#define kf_cpu_gated_residual KF_CPU_COPY(gated_residual)
#define kf_cpu_rope KF_CPU_COPY(rope)
#define kf_cpu_rms_norm_rope KF_CPU_COPY(rms_norm_rope)
#define kf_cpu_glu KF_CPU_COPY(glu)
#define kf_cpu_activation KF_CPU_COPY(activation)
#define kf_cpu_softmax KF_CPU_COPY(softmax)
#define kf_cpu_ops_baseline KF_CPU_COPY(ops)
#endif

/* 1 when the build holds the AVX2 (AVX-512) copy (CMakeLists.txt defines it
 * for the baseline copy and backend.c), else 0. */
#ifndef KF_CPU_AVX2_COPY
#define KF_CPU_AVX2_COPY 0
#endif
#ifndef KF_CPU_AVX512_COPY
#define KF_CPU_AVX512_COPY 0
#endif

/* The ops table of each copy (ops_table.c): its op entries, and backend.c's
 * memory, timing and tool helpers below. */
extern const kf_backend_ops kf_cpu_ops_baseline;
#if KF_CPU_AVX2_COPY
extern const kf_backend_ops kf_cpu_avx2_ops;
#endif
#if KF_CPU_AVX512_COPY
extern const kf_backend_ops kf_cpu_avx512_ops;
#endif

kf_status kf_cpu_rms_norm(kf_ctx *ctx, const kf_tensor *x, const kf_tensor *w, float eps,
                          int mode, float offset, const kf_tensor *y);
kf_status kf_cpu_add_rms_norm(kf_ctx *ctx, const kf_tensor *x, const kf_tensor *residual,
                              const kf_tensor *w, float eps, int mode, float offset,
                              const kf_tensor *y);
kf_status kf_cpu_layer_norm(kf_ctx *ctx, const kf_tensor *x, const kf_tensor *w,
                            const kf_tensor *b, float eps, const kf_tensor *y);
kf_status kf_cpu_ada_norm(kf_ctx *ctx, const kf_tensor *x, const kf_tensor *scale,
                          const kf_tensor *shift, const kf_tensor *w, float eps, int kind,
                          const kf_tensor *y);
kf_status kf_cpu_add_ada_norm(kf_ctx *ctx, const kf_tensor *h, const kf_tensor *a,
                              const kf_tensor *gate, const kf_tensor *scale,
                              const kf_tensor *shift, const kf_tensor *w, float eps, int kind,
                              const kf_tensor *y);
kf_status kf_cpu_gated_residual(kf_ctx *ctx, const kf_tensor *h, const kf_tensor *a,
                                const kf_tensor *gate);
kf_status kf_cpu_rope(kf_ctx *ctx, const kf_tensor *q, const kf_tensor *k,
                      const kf_tensor *q_out, const kf_tensor *k_out, const kf_rope_plan *rope);
kf_status kf_cpu_rms_norm_rope(kf_ctx *ctx, const kf_tensor *x, const kf_tensor *w, float eps,
                               int mode, float offset, const kf_rope_plan *rope,
                               const kf_tensor *y);
kf_status kf_cpu_glu(kf_ctx *ctx, const kf_tensor *gate, const kf_tensor *up, int act,
                     const kf_tensor *y);
kf_status kf_cpu_activation(kf_ctx *ctx, const kf_tensor *x, int act, const kf_tensor *y);
kf_status kf_cpu_softmax(kf_ctx *ctx, const kf_tensor *x, float scale, const kf_tensor *y);

/* ---- backend.c: memory, sync, timing, tool helpers (one copy, in both tables) ---- */

kf_status kf_cpu_malloc(kf_ctx *ctx, size_t bytes, void **ptr);
kf_status kf_cpu_free(kf_ctx *ctx, void *ptr);
kf_status kf_cpu_memcpy(kf_ctx *ctx, void *dst, const void *src, size_t bytes, int to_device);
kf_status kf_cpu_memset(kf_ctx *ctx, void *ptr, int value, size_t bytes);
kf_status kf_cpu_synchronize(kf_ctx *ctx);
kf_status kf_cpu_copy_d2d(kf_ctx *ctx, void *dst, const void *src, size_t bytes);
kf_status kf_cpu_empty_kernel(kf_ctx *ctx);
kf_status kf_cpu_timer_start(kf_ctx *ctx);
kf_status kf_cpu_timer_stop(kf_ctx *ctx, double *elapsed_ms);
void kf_cpu_destroy(kf_ctx *ctx);

/* ---- scratch ---- */

/* One allocation: an f32 slice of per_thread floats for each thread that the
 * op's loop may start (parallel: the condition given to KF_CPU_PARALLEL_FOR;
 * 0 = the loop runs on the calling thread, one slice), then shared_floats
 * floats for data every thread reads (a weight converted to f32). Slices are
 * 64-byte aligned and padded so that threads never share a cache line. */
typedef struct kf_cpu_scratch {
    float *block;
    size_t per_thread;          /* floats, rounded up to 16 */
    int threads;
    float *shared;              /* shared_floats floats, or NULL when 0 were asked */
} kf_cpu_scratch;

/* Returns KF_OK, or KF_ERR_ALLOC with the message set on ctx. */
kf_status kf_cpu_scratch_get(kf_ctx *ctx, const char *op, int parallel, size_t per_thread,
                             size_t shared_floats, kf_cpu_scratch *scratch);
void kf_cpu_scratch_release(kf_cpu_scratch *scratch);

/* Thread i's slice (i < threads); kf_cpu_scratch_mine: the calling thread's. */
static inline float *kf_cpu_scratch_slice(const kf_cpu_scratch *scratch, int i)
{
    return scratch->block + (size_t)i * scratch->per_thread;
}

static inline float *kf_cpu_scratch_mine(const kf_cpu_scratch *scratch)
{
    return kf_cpu_scratch_slice(scratch, kf_cpu_thread_id());
}

/* ---- rows ---- */

static inline size_t kf_cpu_dtype_bytes(int dtype)
{
    return dtype == KF_F32 || dtype == KF_I32 ? 4 : 2;
}

/* f16 <-> f32 of n elements. The AVX2 copy (built with F16C) converts eight
 * at a time in hardware, the AVX-512 copy sixteen (vcvtph2ps / vcvtps2ph,
 * round to nearest even): the
 * same IEEE results as half.h's bit manipulation, which the compiler does not
 * vectorize (rms_norm 8192 x 4096 f16 on two cores 126 -> 19 ms; BENCHMARKS.md,
 * CPU backend); the baseline copy and every tail take half.h's. */
static inline void kf_cpu_f16_to_f32_n(float *restrict dst, const uint16_t *restrict src,
                                       int64_t n)
{
    int64_t i = 0;
#if defined(__AVX512F__)
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + i))));
#endif
#if KF_CPU_HW_F16
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
#endif
    for (; i < n; i++)
        dst[i] = kf_half_f16_to_f32(src[i]);
}

static inline void kf_cpu_f32_to_f16_n(uint16_t *restrict dst, const float *restrict src,
                                       int64_t n)
{
    int64_t i = 0;
#if defined(__AVX512F__)
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(dst + i),
                            _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
#endif
#if KF_CPU_HW_F16
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
#endif
    for (; i < n; i++)
        dst[i] = kf_half_f32_to_f16(src[i]);
}

/* n elements of base (dtype) starting at element offset, widened into dst. */
static inline void kf_cpu_load_row(float *restrict dst, const void *base, int dtype,
                                   int64_t offset, int64_t n)
{
    if (dtype == KF_F32) {
        memcpy(dst, (const float *)base + offset, (size_t)n * sizeof(float));
    } else if (dtype == KF_BF16) {
        const uint16_t *src = (const uint16_t *)base + offset;
        for (int64_t i = 0; i < n; i++)
            dst[i] = kf_half_bf16_to_f32(src[i]);
    } else {
        kf_cpu_f16_to_f32_n(dst, (const uint16_t *)base + offset, n);
    }
}

/* n f32 values rounded (once) into base (dtype) at element offset. */
static inline void kf_cpu_store_row(void *base, int dtype, int64_t offset,
                                    const float *restrict src, int64_t n)
{
    if (dtype == KF_F32) {
        memcpy((float *)base + offset, src, (size_t)n * sizeof(float));
    } else if (dtype == KF_BF16) {
        uint16_t *dst = (uint16_t *)base + offset;
        for (int64_t i = 0; i < n; i++)
            dst[i] = kf_half_f32_to_bf16(src[i]);
    } else {
        kf_cpu_f32_to_f16_n((uint16_t *)base + offset, src, n);
    }
}

/* The row as f32: a pointer into the tensor itself when it is f32 (no copy),
 * else the row widened into scratch. */
static inline const float *kf_cpu_row_f32(const kf_tensor *t, int64_t offset, int64_t n,
                                          float *scratch)
{
    if (t->dtype == KF_F32)
        return (const float *)t->data + offset;
    kf_cpu_load_row(scratch, t->data, t->dtype, offset, n);
    return scratch;
}

/* Round every value of v to dtype and back (the rounding PyTorch does when it
 * stores an intermediate in the activation dtype). */
static inline void kf_cpu_round_row(float *v, int64_t n, int dtype)
{
    if (dtype == KF_BF16) {
        for (int64_t i = 0; i < n; i++)
            v[i] = kf_half_bf16_to_f32(kf_half_f32_to_bf16(v[i]));
    } else if (dtype == KF_F16) {
        int64_t i = 0;
#if KF_CPU_HW_F16
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(v + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(v + i),
                                                                    _MM_FROUND_TO_NEAREST_INT)));
#endif
        for (; i < n; i++)
            v[i] = kf_half_f16_to_f32(kf_half_f32_to_f16(v[i]));
    }
}

/* ---- row sums in double, in a fixed order ---- */

/* 32 interleaved partial sums (the compiler vectorises them; no
 * reassociation flags needed): four independent vectors of 8 doubles in the
 * AVX-512 copy, so the adds are not serialised by their latency (8 lanes, one
 * vector, held a 64 x 4096 layer_norm row to ~4 cycles per 8 elements).
 * Combined in a fixed tree, the same in every kernel copy. */
#define KF_CPU_LANES 32

static inline double kf_cpu_combine_lanes(const double *lane, double tail)
{
    double eight[8];
    for (int j = 0; j < 8; j++)
        eight[j] = (lane[j] + lane[j + 8]) + (lane[j + 16] + lane[j + 24]);
    return ((eight[0] + eight[1]) + (eight[2] + eight[3])) +
           ((eight[4] + eight[5]) + (eight[6] + eight[7])) + tail;
}

static inline double kf_cpu_sum(const float *v, int64_t n)
{
    double lane[KF_CPU_LANES] = {0};
    int64_t i = 0;
    for (; i + KF_CPU_LANES <= n; i += KF_CPU_LANES)
        for (int j = 0; j < KF_CPU_LANES; j++)
            lane[j] += (double)v[i + j];
    double tail = 0.0;
    for (; i < n; i++)
        tail += (double)v[i];
    return kf_cpu_combine_lanes(lane, tail);
}

static inline double kf_cpu_sum_squares(const float *v, int64_t n)
{
    double lane[KF_CPU_LANES] = {0};
    int64_t i = 0;
    for (; i + KF_CPU_LANES <= n; i += KF_CPU_LANES)
        for (int j = 0; j < KF_CPU_LANES; j++)
            lane[j] += (double)v[i + j] * (double)v[i + j];
    double tail = 0.0;
    for (; i < n; i++)
        tail += (double)v[i] * (double)v[i];
    return kf_cpu_combine_lanes(lane, tail);
}

/* sum of (v - center)^2 */
static inline double kf_cpu_sum_squared_deviations(const float *v, int64_t n, double center)
{
    double lane[KF_CPU_LANES] = {0};
    int64_t i = 0;
    for (; i + KF_CPU_LANES <= n; i += KF_CPU_LANES)
        for (int j = 0; j < KF_CPU_LANES; j++) {
            double d = (double)v[i + j] - center;
            lane[j] += d * d;
        }
    double tail = 0.0;
    for (; i < n; i++) {
        double d = (double)v[i] - center;
        tail += d * d;
    }
    return kf_cpu_combine_lanes(lane, tail);
}

/* ---- rms norm pieces (norm.c, rope.c) ---- */

/* The 1-D weight as f32 values: the tensor itself when it is f32 and nothing
 * is added, else widened (plus offset) into dst. NULL when there is no weight. */
static inline const float *kf_cpu_weight_as_f32(const kf_tensor *w, int64_t n, float offset,
                                                int add_offset, float *dst)
{
    if (w == NULL)
        return NULL;
    if (w->dtype == KF_F32 && !add_offset)
        return (const float *)w->data;
    kf_cpu_load_row(dst, w->data, w->dtype, 0, n);
    if (add_offset)
        for (int64_t i = 0; i < n; i++)
            dst[i] = offset + dst[i];
    return dst;
}

/* Whether kf_cpu_weight_as_f32 needs a buffer. */
static inline int kf_cpu_weight_needs_copy(const kf_tensor *w, int add_offset)
{
    return w != NULL && (w->dtype != KF_F32 || add_offset);
}

/* v = v / sqrt(mean(v^2) + eps): the mean in double, the factor rounded to
 * f32 and applied in f32 (as PyTorch's f32 x * rsqrt(var + eps)). */
static inline void kf_cpu_rms_normalize(float *restrict v, int64_t n, float eps)
{
    double mean_square = kf_cpu_sum_squares(v, n) / (double)n;
    float inv_rms = (float)(1.0 / sqrt(mean_square + (double)eps));
    for (int64_t i = 0; i < n; i++)
        v[i] *= inv_rms;
}

/* The weight step of rms_norm on a normalized row n (in v):
 *   llama: round n to the activation dtype, then times the weight value;
 *   gemma: n * (offset + weight) (w already holds offset + weight);
 *   none:  n * weight.
 * Without a weight the row stays n: rms_norm rounds it once at the store
 * (which is also llama's rounding of n). */
static inline void kf_cpu_rms_apply_weight(float *restrict v, int64_t n,
                                           const float *restrict w, int mode, int dtype)
{
    if (w == NULL)
        return;
    if (mode == KF_RMS_LLAMA)
        kf_cpu_round_row(v, n, dtype);
    for (int64_t i = 0; i < n; i++)
        v[i] *= w[i];
}

/* ---- shapes ---- */

/* Number of rows of a normalized 4-D view (row r counts over dims 0..2). */
static inline int64_t kf_cpu_rows(const kf_tensor *t)
{
    return t->shape[0] * t->shape[1] * t->shape[2];
}

#endif /* KF_CPU_H */
