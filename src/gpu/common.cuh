/* common.cuh - what every kernel file of the GPU backend shares: the vendor
 * layer (CUDA or HIP), f16/bf16 storage <-> f32, 16-byte chunk loads and
 * stores with a scalar fallback, warp/group/block reductions written for any
 * warp width (32 or 64), row indexing of normalized 4-D views, the row-wise
 * launch geometry, and launch checks that turn runtime errors into KF_ERR_GPU.
 *
 * Data movement unit: a "chunk" of V = 16 / sizeof(T) elements (8 x f16/bf16,
 * 4 x f32) = one 16-byte load. A launch takes the vector path (AL = true) only
 * when every row start of every tensor it touches is 16-byte aligned; inside
 * it a chunk cut short by the end of a row is moved element by element. With
 * AL = false every access is scalar, so any pointer offset and any D work. */
#ifndef KF_GPU_COMMON_CUH
#define KF_GPU_COMMON_CUH

#if defined(__HIP_PLATFORM_AMD__) || defined(__HIPCC__)
#include "vendor_hip.h"
#else
#include "vendor_cuda.h"
#endif

#include <stdint.h>
#include <limits.h>
#include <string.h>
#include "core/internal.h"

/* ---- element types ---------------------------------------------------------
 * Storage tags for the 16-bit activations; float is f32. Plain data, no
 * behaviour: kf_to_f32 / kf_from_f32 convert. */
typedef struct kf_f16_t { unsigned short b; } kf_f16_t;
typedef struct kf_bf16_t { unsigned short b; } kf_bf16_t;

static __device__ __forceinline__ float kf_to_f32(float v) { return v; }
static __device__ __forceinline__ float kf_to_f32(kf_f16_t v) { return kf_f16_bits_to_f32(v.b); }
static __device__ __forceinline__ float kf_to_f32(kf_bf16_t v) { return kf_bf16_bits_to_f32(v.b); }

template <typename T> static __device__ __forceinline__ T kf_from_f32(float f);
template <> __device__ __forceinline__ float kf_from_f32<float>(float f) { return f; }
template <> __device__ __forceinline__ kf_f16_t kf_from_f32<kf_f16_t>(float f)
{
    kf_f16_t r;
    r.b = kf_f32_to_f16_bits(f);
    return r;
}
template <> __device__ __forceinline__ kf_bf16_t kf_from_f32<kf_bf16_t>(float f)
{
    kf_bf16_t r;
    r.b = kf_f32_to_bf16_bits(f);
    return r;
}

/* f32 value rounded to T and back (the rounding model code does between ops) */
template <typename T> static __device__ __forceinline__ float kf_round(float f)
{
    return kf_to_f32(kf_from_f32<T>(f));
}

/* 16-bit pattern of storage element -> f32, by dtype (runtime, uniform) */
static __device__ __forceinline__ float kf_bits16_to_f32(unsigned short b, int dt)
{
    return dt == KF_F16 ? kf_f16_bits_to_f32(b) : kf_bf16_bits_to_f32(b);
}

/* ---- chunk loads / stores --------------------------------------------------
 * A chunk travels as its raw 16 bytes (uint4): that is what the register
 * caches of the row kernels hold (4 registers for 8 x bf16 instead of 8 f32).
 * kf_ldr: the n (<= V) elements at p, raw; missing elements are 0 bits (= +0).
 * AL: the caller guarantees a full chunk (n == V) at a 16-byte aligned p
 * (launchers take the AL path only when every chunk of the launch is full and
 * aligned), so the vector path carries no scalar tail code. */
template <typename T, bool AL>
static __device__ __forceinline__ uint4 kf_ldr(const T *p, int n)
{
    uint4 r;
    if (AL) {
        r = *reinterpret_cast<const uint4 *>(p);
    } else {
        unsigned int w[4] = {0u, 0u, 0u, 0u};
        if (sizeof(T) == 4) {
            const unsigned int *q = reinterpret_cast<const unsigned int *>(p);
#pragma unroll
            for (int j = 0; j < 4; j++)
                if (j < n) w[j] = q[j];
        } else {
            const unsigned short *q = reinterpret_cast<const unsigned short *>(p);
#pragma unroll
            for (int j = 0; j < 8; j++)
                if (j < n) w[j >> 1] |= (unsigned int)q[j] << (16 * (j & 1));
        }
        r.x = w[0]; r.y = w[1]; r.z = w[2]; r.w = w[3];
    }
    return r;
}

/* raw chunk -> V f32 values */
template <typename T, int V>
static __device__ __forceinline__ void kf_unpack(uint4 r, float (&v)[V])
{
    static_assert(V * sizeof(T) == 16, "a chunk is 16 bytes");
    unsigned int w[4] = {r.x, r.y, r.z, r.w};
    if (sizeof(T) == 4) {
#pragma unroll
        for (int j = 0; j < V; j++) v[j] = __uint_as_float(w[j & 3]);
    } else {
#pragma unroll
        for (int j = 0; j < V; j++) {
            T e;
            *reinterpret_cast<unsigned short *>(&e) =
                (unsigned short)(w[(j >> 1) & 3] >> (16 * (j & 1)));
            v[j] = kf_to_f32(e);
        }
    }
}

/* V f32 values -> raw chunk, each rounded to T (nearest even) */
template <typename T, int V>
static __device__ __forceinline__ uint4 kf_pack(const float (&v)[V])
{
    unsigned int w[4] = {0u, 0u, 0u, 0u};
    if (sizeof(T) == 4) {
#pragma unroll
        for (int j = 0; j < V; j++) w[j & 3] = __float_as_uint(v[j]);
    } else {
#pragma unroll
        for (int j = 0; j < V; j++) {
            T e = kf_from_f32<T>(v[j]);
            w[(j >> 1) & 3] |= (unsigned int)(*reinterpret_cast<unsigned short *>(&e))
                               << (16 * (j & 1));
        }
    }
    uint4 r;
    r.x = w[0]; r.y = w[1]; r.z = w[2]; r.w = w[3];
    return r;
}

/* store the first n elements of a raw chunk at p */
template <typename T, bool AL>
static __device__ __forceinline__ void kf_str(T *p, int n, uint4 r)
{
    if (AL) {
        *reinterpret_cast<uint4 *>(p) = r;
    } else {
        unsigned int w[4] = {r.x, r.y, r.z, r.w};
        if (sizeof(T) == 4) {
            unsigned int *q = reinterpret_cast<unsigned int *>(p);
#pragma unroll
            for (int j = 0; j < 4; j++)
                if (j < n) q[j] = w[j];
        } else {
            unsigned short *q = reinterpret_cast<unsigned short *>(p);
#pragma unroll
            for (int j = 0; j < 8; j++)
                if (j < n) q[j] = (unsigned short)(w[j >> 1] >> (16 * (j & 1)));
        }
    }
}

/* Keep a cached raw chunk packed: after this the compiler cannot reuse the f32
 * values it unpacked earlier (which would hold 2x the registers). */
static __device__ __forceinline__ void kf_opaque(uint4 &r)
{
    KF_OPAQUE(r.x);
    KF_OPAQUE(r.y);
    KF_OPAQUE(r.z);
    KF_OPAQUE(r.w);
}

/* f32 convenience forms */
template <typename T, int V, bool AL>
static __device__ __forceinline__ void kf_ld(const T *p, int n, float (&v)[V])
{
    kf_unpack<T, V>(kf_ldr<T, AL>(p, n), v);
}

template <typename T, int V, bool AL>
static __device__ __forceinline__ void kf_st(T *p, int n, const float (&v)[V])
{
    kf_str<T, AL>(p, n, kf_pack<T, V>(v));
}

/* Parameter chunk (weight, bias, conditioning, table) whose dtype is only
 * known at run time: f32 or a 16-bit type. dt is uniform over the launch, so
 * the branch costs no divergence; it is taken once per chunk, not per element.
 * base + off is where the chunk starts (off in elements); with AL the caller
 * guarantees a full chunk aligned to V * size bytes (16 or 32). */
template <int V, bool AL>
static __device__ __forceinline__ void kf_ldp(const void *base, int dt, int64_t off, int n,
                                              float (&v)[V])
{
    if (dt == KF_F32) {
        const float *p = (const float *)base + off;
        if (AL) {
#pragma unroll
            for (int q = 0; q < V / 4; q++) {
                float4 f = reinterpret_cast<const float4 *>(p)[q];
                v[4 * q] = f.x; v[4 * q + 1] = f.y; v[4 * q + 2] = f.z; v[4 * q + 3] = f.w;
            }
        } else {
#pragma unroll
            for (int j = 0; j < V; j++) v[j] = j < n ? p[j] : 0.0f;
        }
    } else {
        const unsigned short *p = (const unsigned short *)base + off;
        if (AL && V == 8) {
            uint4 raw = *reinterpret_cast<const uint4 *>(p);
            unsigned int w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
            for (int j = 0; j < V / 2; j++) {
                v[2 * j] = kf_bits16_to_f32((unsigned short)(w[j] & 0xffffu), dt);
                v[2 * j + 1] = kf_bits16_to_f32((unsigned short)(w[j] >> 16), dt);
            }
        } else {
#pragma unroll
            for (int j = 0; j < V; j++) v[j] = j < n ? kf_bits16_to_f32(p[j], dt) : 0.0f;
        }
    }
}

/* one parameter element as f32 */
static __device__ __forceinline__ float kf_ldp1(const void *base, int dt, int64_t off)
{
    if (dt == KF_F32) return ((const float *)base)[off];
    return kf_bits16_to_f32(((const unsigned short *)base)[off], dt);
}

/* ---- reductions -------------------------------------------------------------
 * Threads of a block are split into groups of G consecutive threads, one row
 * per group. G <= KF_WARP (a power of two): butterfly shuffles inside the
 * group. G == blockDim.x (a multiple of KF_WARP): butterfly in each warp, one
 * shared-memory exchange, then every thread adds the warp partials in the
 * same order. Every thread of the group gets the same, deterministic result.
 * Every thread of the block must call it (the block path has barriers). */
#define KF_RED_SUM 0
#define KF_RED_MAX 1

template <int OP> static __device__ __forceinline__ float kf_red_op(float a, float b)
{
    if (OP == KF_RED_SUM) return a + b;
    /* max that propagates NaN (fmaxf would drop it) */
    return (a > b || a != a) ? a : b;
}

template <int OP> static __device__ __forceinline__ float kf_group_reduce(float v, int G)
{
    __shared__ float part[1024 / 16];
    if (G <= KF_WARP) {
        for (int m = G >> 1; m > 0; m >>= 1) v = kf_red_op<OP>(v, KF_SHFL_XOR(v, m));
        return v;
    }
#pragma unroll
    for (int m = KF_WARP >> 1; m > 0; m >>= 1) v = kf_red_op<OP>(v, KF_SHFL_XOR(v, m));
    int warp = (int)threadIdx.x / KF_WARP;
    int nwarps = (int)blockDim.x / KF_WARP;
    __syncthreads(); /* the previous use of part[] is finished */
    if ((int)threadIdx.x % KF_WARP == 0) part[warp] = v;
    __syncthreads();
    float t = part[0];
    for (int i = 1; i < nwarps; i++) t = kf_red_op<OP>(t, part[i]);
    return t;
}

/* ---- row indexing -------------------------------------------------------------
 * Row r of a normalized view with outer shape [s0, s1, s2] is (i0, i1, i2),
 * r = (i0 * s1 + i1) * s2 + i2 (as kf_row_offset in internal.h). 32-bit
 * division when r fits (always in practice), 64-bit otherwise. */
typedef struct kf_ridx { int64_t i0, i1, i2; } kf_ridx;

static __device__ __forceinline__ kf_ridx kf_row_index(int64_t r, int64_t s1, int64_t s2)
{
    kf_ridx x;
    if (r <= 0xffffffffll) {
        unsigned int ur = (unsigned int)r, u1 = (unsigned int)s1, u2 = (unsigned int)s2;
        unsigned int q = ur / u2;
        x.i2 = ur - q * u2;
        x.i1 = q % u1;
        x.i0 = q / u1;
    } else {
        int64_t q = r / s2;
        x.i2 = r - q * s2;
        x.i1 = q % s1;
        x.i0 = q / s1;
    }
    return x;
}

/* strides of one view (elements); the row offset is their dot with kf_ridx */
typedef struct kf_st3 { int64_t s0, s1, s2; } kf_st3;

static __device__ __forceinline__ int64_t kf_off(kf_st3 s, kf_ridx i)
{
    return i.i0 * s.s0 + i.i1 * s.s1 + i.i2 * s.s2;
}

/* ---- host helpers ------------------------------------------------------------- */

static inline kf_st3 kf_strides3(const kf_tensor *t)
{
    kf_st3 s;
    s.s0 = t ? t->stride[0] : 0;
    s.s1 = t ? t->stride[1] : 0;
    s.s2 = t ? t->stride[2] : 0;
    return s;
}

/* 1 if the data pointer and the stride of every outer dim of size > 1 are
 * multiples of 16 bytes (then every row start is 16-byte aligned). NULL: 1. */
static inline int kf_rows_aligned16(const kf_tensor *t)
{
    if (!t || !t->data) return 1;
    size_t es = kf_dtype_size((kf_dtype)t->dtype);
    if (((uintptr_t)t->data) % 16 != 0) return 0;
    for (int i = 0; i < t->ndim - 1 && i < 3; i++)
        if (t->shape[i] > 1 && ((int64_t)es * t->stride[i]) % 16 != 0) return 0;
    return 1;
}

/* 1 if the outer dims of t are dense over the row (row r starts at r * D) */
static inline int kf_rows_dense(const kf_tensor *t)
{
    int64_t expect = t->shape[3];
    for (int i = 2; i >= 0; i--) {
        if (t->shape[i] > 1 && t->stride[i] != expect) return 0;
        expect *= t->shape[i];
    }
    return 1;
}

static inline int64_t kf_rows_of(const kf_tensor *t)
{
    return t->shape[0] * t->shape[1] * t->shape[2];
}

static inline int kf_pow2_ceil(int64_t v)
{
    int p = 1;
    while (p < v) p <<= 1;
    return p;
}

/* Launch geometry of a row-wise kernel. nch = ceil(D / V) chunks per row;
 * the target is ~4 chunks (64 bytes of loads in flight) per thread.
 *   nch <= 4 * warp: a group of G <= warp threads per row (G a power of two),
 *     several rows per block (RPB = BS / G), K <= 4 chunks per thread.
 *   otherwise: one row per block of G = BS threads (a warp multiple, at most
 *     max_bs), K in {1, 2, 4, 8} chunks per thread kept in registers; if the
 *     row needs more than max_k chunks per thread, K = 0: the streaming path
 *     that re-reads the row.
 * grid: enough blocks for every row, capped at 16 waves of full occupancy
 * (kernels loop over rows with a grid stride). */
typedef struct kf_rowgeom {
    int G, K, BS, RPB;
    unsigned int grid;
} kf_rowgeom;

static inline kf_rowgeom kf_row_geometry(const kf_ctx *ctx, int64_t rows, int64_t D, int V,
                                         int max_k, int max_bs)
{
    kf_rowgeom g;
    int W = ctx->facts.warp_size;
    int64_t nch = (D + V - 1) / V;
    if (nch <= 4 * (int64_t)W) {
        g.G = kf_pow2_ceil((nch + 3) / 4);
        if (g.G > W) g.G = W;
        g.K = kf_pow2_ceil((nch + g.G - 1) / g.G);
        g.BS = 256 < W ? W : 256;
        g.RPB = g.BS / g.G;
    } else {
        int64_t G = ((nch + 3) / 4 + W - 1) / W * W;
        if (G > max_bs) G = max_bs;
        int64_t K = (nch + G - 1) / G;
        g.G = (int)G;
        if (K > max_k) {
            g.K = 0;
            g.G = max_bs;
        } else {
            g.K = kf_pow2_ceil(K);
        }
        g.BS = g.G;
        g.RPB = 1;
    }
    int64_t need = (rows + g.RPB - 1) / g.RPB;
    int per_sm = ctx->facts.max_threads_per_sm / g.BS;
    if (per_sm < 1) per_sm = 1;
    int64_t cap = (int64_t)ctx->facts.sm_count * per_sm * 16;
    if (need > cap) need = cap;
    if (need > INT_MAX) need = INT_MAX;
    if (need < 1) need = 1;
    g.grid = (unsigned int)need;
    return g;
}

/* Blocks for a flat (1-D) kernel over n work items, BS threads, grid-stride. */
static inline unsigned int kf_flat_grid(const kf_ctx *ctx, int64_t n, int BS)
{
    int64_t need = (n + BS - 1) / BS;
    int per_sm = ctx->facts.max_threads_per_sm / BS;
    if (per_sm < 1) per_sm = 1;
    int64_t cap = (int64_t)ctx->facts.sm_count * per_sm * 64;
    if (need > cap) need = cap;
    if (need < 1) need = 1;
    return (unsigned int)need;
}

static inline kf_gpuStream_t kf_stream(const kf_ctx *ctx)
{
    return (kf_gpuStream_t)ctx->stream;
}

/* A runtime error -> KF_ERR_GPU with the runtime's message on ctx. */
static inline kf_status kf_gpu_check(kf_ctx *ctx, kf_gpuError_t e, const char *what)
{
    if (e == kf_gpuSuccess) return KF_OK;
    return kf_set_error(ctx, KF_ERR_GPU, "%s: %s", what, kf_gpuGetErrorString(e));
}

/* After every launch: a failed launch (bad configuration, no kernel image for
 * the device, a sticky fault of an earlier kernel) becomes KF_ERR_GPU. */
#define KF_LAUNCH_CHECK(ctx, what) kf_gpu_check((ctx), kf_gpuGetLastError(), (what))

/* ---- elementwise kernels (activation.cu, residual.cu) ---------------------
 * y = f(a, b, c) chunk by chunk. OP: KF_EW_GLU y = act(a) * b;
 * KF_EW_ACT y = act(a); KF_EW_GRES y = a + b * c (c: conditioning, runtime
 * dtype, per token or broadcast). Flat form when every view is dense (one
 * 1-D index space, grid-stride, no division per element); row form otherwise
 * (G threads per row, 256 / G rows per block, one row-index division per row).
 * Each element is read and written by one thread: in place is safe. */
#define KF_EW_GLU 0
#define KF_EW_ACT 1
#define KF_EW_GRES 2

typedef struct kf_ew_p {
    const void *a; kf_st3 as;
    const void *b; kf_st3 bs;
    const void *c; kf_st3 cs; int cdt;
    void *y; kf_st3 ys;
    int64_t rows, s1, s2, D, n; /* n = rows * D (flat form) */
    int act, G;
} kf_ew_p;

static __device__ __forceinline__ float kf_act(float x, int act)
{
    if (act == KF_ACT_SILU) return x / (1.0f + expf(-x));
    if (act == KF_ACT_GELU_TANH) {
        float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
        return 0.5f * x * (1.0f + tanhf(u));
    }
    return 0.5f * x * (1.0f + erff(x * 0.7071067811865476f));
}

template <typename T, int OP, bool AL>
static __device__ __forceinline__ void kf_ew_chunk(const kf_ew_p &p, const T *a, const T *b,
                                                   const void *c, int64_t coff, T *y, int n)
{
    const int V = 16 / sizeof(T);
    float va[V], vb[V];
    kf_ld<T, V, AL>(a, n, va);
    if (OP != KF_EW_ACT) kf_ld<T, V, AL>(b, n, vb);
    if (OP == KF_EW_GRES) {
        float vc[V];
        kf_ldp<V, AL>(c, p.cdt, coff, n, vc);
#pragma unroll
        for (int j = 0; j < V; j++) va[j] = va[j] + vb[j] * vc[j];
    } else {
#pragma unroll
        for (int j = 0; j < V; j++) {
            va[j] = kf_act(va[j], p.act);
            if (OP == KF_EW_GLU) va[j] *= vb[j];
        }
    }
    kf_st<T, V, AL>(y, n, va);
}

/* flat: chunk i covers elements [iV, iV + V) of the dense index space; with
 * AL every base is 16-byte aligned and the last, partial chunk goes scalar */
template <typename T, int OP, bool AL>
__global__ void __launch_bounds__(256, 1) kf_ew_flat_kernel(kf_ew_p p)
{
    const int V = 16 / sizeof(T);
    const int64_t nch = (p.n + V - 1) / V;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < nch;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t j0 = i * V;
        int n = p.n - j0 < V ? (int)(p.n - j0) : V;
        const T *a = (const T *)p.a + j0;
        const T *b = (const T *)p.b + j0;
        T *y = (T *)p.y + j0;
        if (n == V) kf_ew_chunk<T, OP, AL>(p, a, b, p.c, j0, y, n);
        else kf_ew_chunk<T, OP, false>(p, a, b, p.c, j0, y, n);
    }
}

template <typename T, int OP, bool AL>
__global__ void __launch_bounds__(256, 1) kf_ew_rows_kernel(kf_ew_p p)
{
    const int V = 16 / sizeof(T);
    const int G = p.G;
    const int grp = (int)threadIdx.x / G;
    const int lane = (int)threadIdx.x - grp * G;
    const int RPB = (int)blockDim.x / G;
    const int D = (int)p.D;
    const int nch = (D + V - 1) / V;
    for (int64_t row = (int64_t)blockIdx.x * RPB + grp; row < p.rows;
         row += (int64_t)gridDim.x * RPB) {
        const kf_ridx ri = kf_row_index(row, p.s1, p.s2);
        const T *a = (const T *)p.a + kf_off(p.as, ri);
        const T *b = OP != KF_EW_ACT ? (const T *)p.b + kf_off(p.bs, ri) : (const T *)0;
        T *y = (T *)p.y + kf_off(p.ys, ri);
        int64_t coff = OP == KF_EW_GRES ? kf_off(p.cs, ri) : 0;
        for (int c = lane; c < nch; c += G) {
            int j0 = c * V;
            int n = D - j0 < V ? D - j0 : V;
            kf_ew_chunk<T, OP, AL>(p, a + j0, b + j0, p.c, coff + j0, y + j0, n);
        }
    }
}

/* Launch an elementwise op; views are normalized 4-D (b, c may be NULL). */
template <int OP>
static kf_status kf_ew_launch(kf_ctx *ctx, const char *name, const kf_tensor *a,
                              const kf_tensor *b, const kf_tensor *c, const kf_tensor *y, int act)
{
    kf_ew_p p;
    memset(&p, 0, sizeof(p));
    p.a = a->data; p.as = kf_strides3(a);
    p.b = b ? b->data : NULL; p.bs = kf_strides3(b);
    p.c = c ? c->data : NULL; p.cs = kf_strides3(c); p.cdt = c ? c->dtype : KF_F32;
    p.y = y->data; p.ys = kf_strides3(y);
    p.rows = kf_rows_of(a);
    p.s1 = a->shape[1];
    p.s2 = a->shape[2];
    p.D = a->shape[3];
    p.n = p.rows * p.D;
    p.act = act;
    if (p.n == 0) return KF_OK;
    if (p.D > INT_MAX - 64)
        return kf_set_error(ctx, KF_ERR_UNSUPPORTED, "%s: rows too long", name);
    int V = 16 / (int)kf_dtype_size((kf_dtype)a->dtype);
    bool flat = kf_rows_dense(a) && kf_rows_dense(y) && (!b || kf_rows_dense(b)) &&
                (!c || kf_rows_dense(c));
    bool al;
    const int BS = 256;
    unsigned int grid;
    if (flat) {
        al = ((uintptr_t)a->data % 16 == 0) && ((uintptr_t)y->data % 16 == 0) &&
             (!b || (uintptr_t)b->data % 16 == 0) && (!c || (uintptr_t)c->data % 16 == 0);
        grid = kf_flat_grid(ctx, (p.n + V - 1) / V, BS);
    } else {
        al = kf_rows_aligned16(a) && kf_rows_aligned16(b) && kf_rows_aligned16(c) &&
             kf_rows_aligned16(y) && p.D % V == 0;
        int64_t nch = (p.D + V - 1) / V;
        p.G = kf_pow2_ceil(nch);
        if (p.G > BS) p.G = BS;
        int64_t rpb = BS / p.G;
        grid = kf_flat_grid(ctx, (p.rows + rpb - 1) / rpb * BS, BS);
    }
    kf_gpuStream_t st = kf_stream(ctx);
#define KF_EW_GO(T)                                                                  \
    do {                                                                             \
        if (flat) {                                                                  \
            if (al) kf_ew_flat_kernel<T, OP, true><<<grid, BS, 0, st>>>(p);          \
            else kf_ew_flat_kernel<T, OP, false><<<grid, BS, 0, st>>>(p);            \
        } else {                                                                     \
            if (al) kf_ew_rows_kernel<T, OP, true><<<grid, BS, 0, st>>>(p);          \
            else kf_ew_rows_kernel<T, OP, false><<<grid, BS, 0, st>>>(p);            \
        }                                                                            \
    } while (0)
    switch (a->dtype) {
    case KF_F32: KF_EW_GO(float); break;
    case KF_F16: KF_EW_GO(kf_f16_t); break;
    case KF_BF16: KF_EW_GO(kf_bf16_t); break;
    default: return kf_set_error(ctx, KF_ERR_DTYPE, "%s: unsupported dtype", name);
    }
#undef KF_EW_GO
    return KF_LAUNCH_CHECK(ctx, name);
}

/* ---- launchers of the op files (backend.cu puts them in the ops table) ---- */
kf_status kf_gpu_rms_norm(kf_ctx *ctx, const kf_tensor *x, const kf_tensor *w, float eps,
                          int mode, float offset, const kf_tensor *y);
kf_status kf_gpu_add_rms_norm(kf_ctx *ctx, const kf_tensor *x, const kf_tensor *residual,
                              const kf_tensor *w, float eps, int mode, float offset,
                              const kf_tensor *y);
kf_status kf_gpu_layer_norm(kf_ctx *ctx, const kf_tensor *x, const kf_tensor *w,
                            const kf_tensor *b, float eps, const kf_tensor *y);
kf_status kf_gpu_ada_norm(kf_ctx *ctx, const kf_tensor *x, const kf_tensor *scale,
                          const kf_tensor *shift, const kf_tensor *w, float eps, int kind,
                          const kf_tensor *y);
kf_status kf_gpu_add_ada_norm(kf_ctx *ctx, const kf_tensor *h, const kf_tensor *a,
                              const kf_tensor *gate, const kf_tensor *scale,
                              const kf_tensor *shift, const kf_tensor *w, float eps, int kind,
                              const kf_tensor *y);
kf_status kf_gpu_gated_residual(kf_ctx *ctx, const kf_tensor *h, const kf_tensor *a,
                                const kf_tensor *gate);
kf_status kf_gpu_rope(kf_ctx *ctx, const kf_tensor *q, const kf_tensor *k,
                      const kf_tensor *q_out, const kf_tensor *k_out, const kf_rope_plan *rope);
kf_status kf_gpu_rms_norm_rope(kf_ctx *ctx, const kf_tensor *x, const kf_tensor *w, float eps,
                               int mode, float offset, const kf_rope_plan *rope,
                               const kf_tensor *y);
kf_status kf_gpu_glu(kf_ctx *ctx, const kf_tensor *gate, const kf_tensor *up, int act,
                     const kf_tensor *y);
kf_status kf_gpu_activation(kf_ctx *ctx, const kf_tensor *x, int act, const kf_tensor *y);
kf_status kf_gpu_softmax(kf_ctx *ctx, const kf_tensor *x, float scale, const kf_tensor *y);

#endif /* KF_GPU_COMMON_CUH */
