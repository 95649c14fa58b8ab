/* common.cuh - what every kernel file of the GPU backend shares: the vendor
 * layer (CUDA, HIP or the emulator), f16/bf16 storage <-> f32, 16-byte chunk loads and
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

#if defined(KF_GPU_EMU)
#include "vendor_emu.h"
#elif defined(__HIP_PLATFORM_AMD__) || defined(__HIPCC__)
#include "vendor_hip.h"
#else
#include "vendor_cuda.h"
#endif

#include <stdint.h>
#include <limits.h>
#include <string.h>
#include "core/internal.h"

#if !defined(KF_GPU_EMU)
/* kernel k on grid blocks of block threads on stream s (smem: bytes of
 * dynamic shared memory); every kernel takes one parameter struct by value.
 * The emulator has its own (vendor_emu.h). */
template <typename P>
static inline void kf_launch(void (*k)(P), unsigned int grid, unsigned int block, size_t smem,
                             kf_gpuStream_t s, P arg)
{
    k<<<grid, block, smem, s>>>(arg);
}
static inline void kf_launch(void (*k)(void), unsigned int grid, unsigned int block, size_t smem,
                             kf_gpuStream_t s)
{
    k<<<grid, block, smem, s>>>();
}
#endif

/* 16-byte row accesses, streamed (STREAM: kf_ld16_stream / kf_st16_stream,
 * evict-first) or default-cached (kf_ld16_cached). Streamed is the default;
 * the kernels that measured faster default-cached say so where they choose
 * it (norm.cu KF_LEAN_STREAM, rope.cu the heads kernel). */
template <bool STREAM>
static __device__ __forceinline__ uint4 kf_ld16_rows(const uint4 *p)
{
    if constexpr (STREAM) return kf_ld16_stream(p);
    else return kf_ld16_cached(p);
}
template <bool STREAM>
static __device__ __forceinline__ void kf_st16_rows(uint4 *p, uint4 v)
{
    if constexpr (STREAM) kf_st16_stream(p, v);
    else kf_st16_cached(p, v);
}

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

/* compile-time "T is bf16" (its f32 value is its bits shifted up by 16) */
template <typename T> struct kf_is_bf16 { static const bool value = false; };
template <> struct kf_is_bf16<kf_bf16_t> { static const bool value = true; };
/* T's kf_dtype */
template <typename T>
static __host__ __device__ constexpr int kf_dtype_of()
{
    return sizeof(T) == 4 ? KF_F32 : (kf_is_bf16<T>::value ? KF_BF16 : KF_F16);
}

/* 4 words of 2 x bf16 -> 8 f32: one shift or one mask per element */
static __device__ __forceinline__ void kf_unpack_bf16x8(const unsigned int (&w)[4], float (&v)[8])
{
#pragma unroll
    for (int i = 0; i < 4; i++) {
        v[2 * i] = __uint_as_float(w[i] << 16);
        v[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
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
    } else if (kf_is_bf16<T>::value) {
        kf_unpack_bf16x8(w, *reinterpret_cast<float (*)[8]>(&v[0]));
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

/* The sum of squares (SQ) or the sum of K packed chunks (f32, chunk by
 * chunk, element by element: a fixed order), then the chunks made opaque:
 * they stay packed across the row's reduction that follows. */
template <typename T, int K, bool SQ>
static __device__ __forceinline__ float kf_chunks_sum(uint4 (&rc)[K])
{
    const int V = 16 / sizeof(T);
    float acc = 0.0f;
#pragma unroll
    for (int k = 0; k < K; k++) {
        float v[V];
        kf_unpack<T, V>(rc[k], v);
#pragma unroll
        for (int j = 0; j < V; j++) acc = SQ ? fmaf(v[j], v[j], acc) : acc + v[j];
    }
#pragma unroll
    for (int k = 0; k < K; k++) kf_opaque(rc[k]);
    return acc;
}

/* OP (a packed pair of 16-bit floats, see the vendor headers) on each of
 * the four words of two chunks */
template <unsigned int (*OP)(unsigned int, unsigned int)>
static __device__ __forceinline__ uint4 kf_words_op(uint4 x, uint4 a)
{
    return make_uint4(OP(x.x, a.x), OP(x.y, a.y), OP(x.z, a.z), OP(x.w, a.w));
}

/* round(x + a) of two packed chunks, packed (the one rounding of a sum):
 * 16-bit chunks with packed adds (kf_add2_bf16 / kf_add2_f16, the same
 * bits), f32 chunks element by element */
template <typename T>
static __device__ __forceinline__ uint4 kf_add_packed(uint4 x, uint4 a)
{
    if constexpr (sizeof(T) == 2) {
        if (kf_is_bf16<T>::value) return kf_words_op<kf_add2_bf16>(x, a);
        return kf_words_op<kf_add2_f16>(x, a);
    } else {
        const int V = 16 / sizeof(T);
        float v[V], t[V];
        kf_unpack<T, V>(x, v);
        kf_unpack<T, V>(a, t);
#pragma unroll
        for (int j = 0; j < V; j++) v[j] += t[j];
        return kf_pack<T, V>(v);
    }
}

/* round(x * a) of two packed chunks of 16-bit floats, element by element
 * (one correctly rounded product each: kf_mul2_bf16 / kf_mul2_f16) */
template <typename T>
static __device__ __forceinline__ uint4 kf_mul_packed16(uint4 x, uint4 a)
{
    static_assert(sizeof(T) == 2, "16-bit chunks");
    if (kf_is_bf16<T>::value) return kf_words_op<kf_mul2_bf16>(x, a);
    return kf_words_op<kf_mul2_f16>(x, a);
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
 * known at run time: f32 or a 16-bit type, next to activations of type T
 * (V = 16 / sizeof(T) values). dt is uniform over the launch, so its tests
 * are branches taken once per chunk, never per element. base + off is where
 * the chunk starts (off in elements); with AL the caller guarantees a full
 * chunk aligned to V * size bytes (16 or 32). The fast forms: f32 (16-byte
 * loads), and T's own 16-bit dtype (one 16-byte load, T's conversion). The
 * API admits only those two; a 16-bit parameter of the other 16-bit dtype
 * (not reachable through it) goes element by element, with loads unlike the
 * vector path's, so the compiler cannot merge the two into one load with
 * both conversions predicated (which it did when both 16-bit types shared
 * the vector load). Parameters are never written by
 * the kernels that read them: read-only loads (KF_LDG), which the compiler
 * may issue ahead of the kernel's stores. */
template <typename T, bool AL>
static __device__ __forceinline__ void kf_ldp(const void *base, int dt, int64_t off, int n,
                                              float (&v)[16 / sizeof(T)])
{
    const int V = 16 / sizeof(T);
    const int own = kf_dtype_of<T>();
    if (dt == KF_F32) {
        const float *p = (const float *)base + off;
        if (AL) {
#pragma unroll
            for (int q = 0; q < V / 4; q++) {
                float4 f = KF_LDG(reinterpret_cast<const float4 *>(p) + q);
                v[4 * q] = f.x; v[4 * q + 1] = f.y; v[4 * q + 2] = f.z; v[4 * q + 3] = f.w;
            }
        } else {
#pragma unroll
            for (int j = 0; j < V; j++) v[j] = j < n ? KF_LDG(p + j) : 0.0f;
        }
    } else if (AL && sizeof(T) == 2 && dt == own) {
        kf_unpack<T, V>(KF_LDG(reinterpret_cast<const uint4 *>((const unsigned short *)base + off)), v);
    } else {
        const unsigned short *p = (const unsigned short *)base + off;
#pragma unroll
        for (int j = 0; j < V; j++) v[j] = j < n ? kf_bits16_to_f32(KF_LDG(p + j), dt) : 0.0f;
    }
}

/* Parameter elements e0 + j (j < V) that lie in [0, D); 0 elsewhere. e0 may
 * be negative (the first chunk of a row peeled to an alignment boundary). */
template <int V>
static __device__ __forceinline__ void kf_ldpm(const void *base, int dt, int e0, int D,
                                               float (&v)[V])
{
    if (dt == KF_F32) {
        const float *p = (const float *)base;
#pragma unroll
        for (int j = 0; j < V; j++) {
            int e = e0 + j;
            v[j] = (e >= 0 && e < D) ? KF_LDG(p + e) : 0.0f;
        }
    } else {
        const unsigned short *p = (const unsigned short *)base;
#pragma unroll
        for (int j = 0; j < V; j++) {
            int e = e0 + j;
            v[j] = (e >= 0 && e < D) ? kf_bits16_to_f32(KF_LDG(p + e), dt) : 0.0f;
        }
    }
}

/* Aligned 16-byte chunk i of a parameter vector of D elements of es bytes
 * (16 / es elements per chunk); elements at or past D, and chunks i < 0, read
 * as 0. Only the chunk that holds the vector's end goes element by element,
 * so no byte past the vector is read. */
static __device__ __forceinline__ uint4 kf_ldp_chunk(const void *base, int es, int i, int D)
{
    const int n = 16 / es;
    const int e = i * n;
    uint4 r = make_uint4(0u, 0u, 0u, 0u);
    if (i < 0 || e >= D) return r;
    if (e + n <= D) return KF_LDG(reinterpret_cast<const uint4 *>(base) + i);
    unsigned int w[4] = {0u, 0u, 0u, 0u};
    if (es == 4) {
        const unsigned int *q = reinterpret_cast<const unsigned int *>(base) + e;
#pragma unroll
        for (int j = 0; j < 3; j++)
            if (e + j < D) w[j] = KF_LDG(q + j);
    } else {
        const unsigned short *q = reinterpret_cast<const unsigned short *>(base) + e;
#pragma unroll
        for (int j = 0; j < 7; j++)
            if (e + j < D) w[j >> 1] |= (unsigned int)KF_LDG(q + j) << (16 * (j & 1));
    }
    r.x = w[0]; r.y = w[1]; r.z = w[2]; r.w = w[3];
    return r;
}

/* 4 words of 2 x 16-bit values of dtype dt (bf16 or f16) -> 8 f32 */
static __device__ __forceinline__ void kf_unpack_w16x8(int dt, const unsigned int (&w)[4], float (&v)[8])
{
    if (dt == KF_BF16) {
        kf_unpack_bf16x8(w, v);
    } else {
#pragma unroll
        for (int k = 0; k < 4; k++) {
            v[2 * k] = kf_f16_bits_to_f32((unsigned short)(w[k] & 0xffffu));
            v[2 * k + 1] = kf_f16_bits_to_f32((unsigned short)(w[k] >> 16));
        }
    }
}

/* the 8 floats that start r (0 .. 3) words into three consecutive float4
 * chunks */
static __device__ __forceinline__ void kf_pick8_f32(const uint4 &c0, const uint4 &c1, const uint4 &c2, int r,
                                                    float (&v)[8])
{
    const unsigned int S[12] = {c0.x, c0.y, c0.z, c0.w, c1.x, c1.y, c1.z, c1.w, c2.x, c2.y, c2.z, c2.w};
#pragma unroll
    for (int j = 0; j < 8; j++) {
        unsigned int u = r == 0 ? S[j] : r == 1 ? S[j + 1] : r == 2 ? S[j + 2] : S[j + 3];
        v[j] = __uint_as_float(u);
    }
}

/* kf_ldpm for 16-bit rows peeled by m elements (chunk c of the row holds
 * elements e0 = 8c - m .. e0 + 7) when the parameter vector starts 16-byte
 * aligned: the (at most three) aligned chunks under those elements are
 * loaded whole and the V values picked out by selects on the row's phase,
 * instead of 8 element loads. Out-of-row elements are 0. */
static __device__ __forceinline__ void kf_ldpm_al(const void *base, int dt, int e0, int m, int D,
                                                  float (&v)[8])
{
    if (dt == KF_F32) {
        /* floats e0 .. e0 + 7 lie in float4 chunks a, a + 1, a + 2 */
        const int a = (e0 + 8) / 4 - 2; /* floor(e0 / 4) for e0 >= -8 */
        const int r = e0 - 4 * a;       /* 0 .. 3 */
        uint4 c0 = kf_ldp_chunk(base, 4, a, D), c1 = kf_ldp_chunk(base, 4, a + 1, D),
              c2 = kf_ldp_chunk(base, 4, a + 2, D);
        kf_pick8_f32(c0, c1, c2, r, v);
        return;
    }
    /* 16-bit: elements e0 .. e0 + 7 lie in chunks c - 1 and c (m > 0) or
     * are chunk c (m == 0); off = where they start in lo:hi, in elements */
    const int c = (e0 + m) >> 3;
    const uint4 lo = kf_ldp_chunk(base, 2, m ? c - 1 : c, D);
    const uint4 hi = m ? kf_ldp_chunk(base, 2, c, D) : make_uint4(0u, 0u, 0u, 0u);
    const unsigned int S[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
    const int off = m ? 8 - m : 0;
    const int q = off >> 1; /* 0 .. 3 */
    unsigned int W[5], w[4];
#pragma unroll
    for (int k = 0; k < 5; k++)
        W[k] = q == 0 ? S[k] : q == 1 ? S[k + 1] : q == 2 ? S[k + 2] : S[k + 3 < 8 ? k + 3 : 7];
#pragma unroll
    for (int k = 0; k < 4; k++) w[k] = (off & 1) ? (W[k] >> 16) | (W[k + 1] << 16) : W[k];
    kf_unpack_w16x8(dt, w, v);
}

/* Parameter elements e0 .. e0 + V - 1 (e0 >= 0) under an interior chunk of
 * a peeled row (kf_norm_peel: V = 16 / the rows' element size), every
 * element inside the vector, which starts 16-byte aligned: 16-bit values
 * come as the V / 2 words from e0's own word on (plus one more when e0 is
 * odd), moved into place by one funnel shift of a per-row amount each; f32
 * values under f32 rows as V single loads. f32 values under 16-bit rows: the
 * aligned float4 chunks under them, picked by selects on e0 % 4 (8 single
 * loads would take 4 times the L1 wavefronts). No bounds tests: when e0 is
 * odd, the words hold elements e0 - 1 .. e0 + V, and e0 + V - 1 is even, so
 * it is not the last element of an aligned 16-byte chunk and e0 + V shares
 * that chunk. (Realigning 16-bit chunks by selects on a run-time phase took
 * ~200 of 808 instructions per warp and row at D 5125; code specialized per
 * phase, 8 copies, stalled on instruction fetch: H200, bf16 8192 x 5125
 * 1.16 -> 1.37 x copy.) */
/* the NW 32-bit words of 16-bit elements e0 .. e0 + 2 NW - 1 (e0 any
 * element: 4-byte loads, the odd case shifted by one element) */
template <int NW>
static __device__ __forceinline__ void kf_ld_words16(const void *base, int e0, unsigned int (&w)[NW])
{
    const unsigned int *p = (const unsigned int *)base + (e0 >> 1);
    const int sh = (e0 & 1) * 16;
    unsigned int W[NW + 1];
#pragma unroll
    for (int k = 0; k < NW; k++) W[k] = KF_LDG(p + k);
    W[NW] = sh ? KF_LDG(p + NW) : 0u;
#pragma unroll
    for (int k = 0; k < NW; k++)
        w[k] = (unsigned int)((((unsigned long long)W[k + 1] << 32) | W[k]) >> sh);
}

template <int V>
static __device__ __forceinline__ void kf_ldpm_in(const void *base, int dt, int e0, float (&v)[V])
{
    static_assert(V == 4 || V == 8, "16-bit or f32 rows");
    if (dt == KF_F32) {
        if constexpr (V == 4) {
            const float *p = (const float *)base + e0;
#pragma unroll
            for (int j = 0; j < 4; j++) v[j] = KF_LDG(p + j);
        } else {
            const uint4 *ch = reinterpret_cast<const uint4 *>(base) + (e0 >> 2);
            const int r = e0 & 3;
            const uint4 c0 = KF_LDG(ch), c1 = KF_LDG(ch + 1);
            const uint4 c2 = r ? KF_LDG(ch + 2) : make_uint4(0u, 0u, 0u, 0u);
            kf_pick8_f32(c0, c1, c2, r, v);
        }
        return;
    }
    const int NW = V / 2;
    unsigned int w[NW];
    kf_ld_words16<NW>(base, e0, w);
    if constexpr (V == 8) {
        kf_unpack_w16x8(dt, w, v);
    } else {
#pragma unroll
        for (int j = 0; j < V; j++) v[j] = kf_bits16_to_f32((unsigned short)(w[j >> 1] >> (16 * (j & 1))), dt);
    }
}

/* an int as a type (kf_with_head passes the row's head so) */
template <int N> struct kf_int {
    static constexpr int value = N;
};
/* the size in words (4, 2, 1) of the aligned piece that starts at word w when
 * words [q, q + n) are covered greedily by the widest aligned pieces; 0 if no
 * piece starts at w */
static constexpr int kf_piece_at(int q, int n, int w)
{
    for (int x = q; x < q + n;) {
        const int left = q + n - x;
        const int size = (x % 4 == 0 && left >= 4) ? 4 : (x % 2 == 0 && left >= 2) ? 2 : 1;
        if (x == w) return size;
        x += size;
    }
    return 0;
}
template <int Q, int NW, int W>
static __device__ __forceinline__ void kf_ld_piece(const unsigned int *p, unsigned int (&w)[8])
{
    constexpr int size = kf_piece_at(Q, NW, W);
    if constexpr (size == 4) {
        const uint4 c = KF_LDG(reinterpret_cast<const uint4 *>(p + W));
        w[W] = c.x, w[W + 1] = c.y, w[W + 2] = c.z, w[W + 3] = c.w;
    } else if constexpr (size == 2) {
        const uint2 c = KF_LDG(reinterpret_cast<const uint2 *>(p + W));
        w[W] = c.x, w[W + 1] = c.y;
    } else if constexpr (size == 1) {
        w[W] = KF_LDG(p + W);
    }
}
/* The parameter chunk under interior chunk i of a peeled row whose head is H
 * elements (0 <= H < V, a compile-time constant): elements [H + V i, H + V i +
 * V) of a 16-byte aligned vector of the rows' dtype. Its 4 words (5 when it
 * starts mid-word) load as the widest aligned pieces that cover them
 * (kf_piece_at: 1-3 loads, 2.4 on average for 16-bit rows, where
 * kf_ld_words16 takes 4-5 word loads, each touching a sector per lane) and
 * are realigned by compile-time shifts. The words lie in aligned chunks i and
 * i + 1, and past chunk i only when H > 0: such a row has D / V - 1 interior
 * chunks, so chunk i + 1 lies inside the vector. */
template <typename T, int H>
static __device__ __forceinline__ uint4 kf_ld_param_shifted(const void *base, int i)
{
    constexpr int BITS = H * 8 * (int)sizeof(T);
    constexpr int Q = BITS / 32, S = BITS % 32, NW = S ? 5 : 4;
    const unsigned int *p = reinterpret_cast<const unsigned int *>(base) + 4 * (int64_t)i;
    unsigned int w[8] = {0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u};
    kf_ld_piece<Q, NW, 0>(p, w);
    kf_ld_piece<Q, NW, 1>(p, w);
    kf_ld_piece<Q, NW, 2>(p, w);
    kf_ld_piece<Q, NW, 3>(p, w);
    kf_ld_piece<Q, NW, 4>(p, w);
    kf_ld_piece<Q, NW, 5>(p, w);
    kf_ld_piece<Q, NW, 6>(p, w);
    kf_ld_piece<Q, NW, 7>(p, w);
    unsigned int o[4];
#pragma unroll
    for (int j = 0; j < 4; j++)
        o[j] = S ? (unsigned int)((((unsigned long long)w[Q + j + 1] << 32) | w[Q + j]) >> S) : w[Q + j];
    return make_uint4(o[0], o[1], o[2], o[3]);
}
/* f(kf_int<h>()) for a run-time h in [0, V): code specialised per row phase */
template <int V, typename Fn>
static __device__ __forceinline__ void kf_with_head(int h, Fn &&f)
{
    switch (h) {
    case 0: f(kf_int<0>()); break;
    case 1: f(kf_int<1>()); break;
    case 2: f(kf_int<2>()); break;
    case 3: f(kf_int<3>()); break;
    default:
        if constexpr (V == 8) {
            switch (h) {
            case 4: f(kf_int<4>()); break;
            case 5: f(kf_int<5>()); break;
            case 6: f(kf_int<6>()); break;
            default: f(kf_int<7>()); break;
            }
        }
        break;
    }
}

/* one parameter element as f32 */
static __device__ __forceinline__ float kf_ldp1(const void *base, int dt, int64_t off)
{
    if (dt == KF_F32) return KF_LDG((const float *)base + off);
    return kf_bits16_to_f32(KF_LDG((const unsigned short *)base + off), dt);
}

/* 0, computed from f through a run-time zero (a kernel argument) that the
 * compiler cannot fold: loads addressed with it wait for f. (An inline-asm
 * "mov 0" that only names f as an input does not do this: ptxas sees the
 * mov and schedules, or drops, what feeds it freely.) */
static __device__ __forceinline__ int kf_zero_after(int zero, float f)
{
    return zero & (int)__float_as_uint(f);
}

/* ---- peeled rows -------------------------------------------------------------
 * A row whose start is not 16-byte aligned (odd D in a dense tensor: row r
 * starts at r * D elements) is cut at the alignment boundaries: chunk c holds
 * elements [c * V - m, c * V - m + V) where m = (row start / element size) mod
 * V. Interior chunks are aligned 16-byte accesses; the first and the last are
 * moved element by element. Elements outside [0, D) read as the bits pad. */
template <typename T>
static __device__ __forceinline__ int kf_row_phase(const T *row)
{
    return (int)(((uintptr_t)row / sizeof(T)) & (16 / sizeof(T) - 1));
}

template <typename T>
static __device__ __forceinline__ uint4 kf_ldr_m(const T *row, int e0, int D, unsigned int pad)
{
    const int V = 16 / sizeof(T);
    if (e0 >= 0 && e0 + V <= D) return *reinterpret_cast<const uint4 *>(row + e0);
    unsigned int w[4];
    if (sizeof(T) == 4) {
        const unsigned int *q = reinterpret_cast<const unsigned int *>(row);
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int e = e0 + j;
            w[j] = (e >= 0 && e < D) ? q[e] : pad;
        }
    } else {
        const unsigned short *q = reinterpret_cast<const unsigned short *>(row);
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int e = e0 + 2 * j;
            unsigned int lo = (e >= 0 && e < D) ? (unsigned int)q[e] : (pad & 0xffffu);
            unsigned int hi = (e + 1 >= 0 && e + 1 < D) ? (unsigned int)q[e + 1] : (pad & 0xffffu);
            w[j] = lo | (hi << 16);
        }
    }
    uint4 r;
    r.x = w[0]; r.y = w[1]; r.z = w[2]; r.w = w[3];
    return r;
}

template <typename T>
static __device__ __forceinline__ void kf_str_m(T *row, int e0, int D, uint4 r)
{
    const int V = 16 / sizeof(T);
    if (e0 >= 0 && e0 + V <= D) {
        *reinterpret_cast<uint4 *>(row + e0) = r;
        return;
    }
    unsigned int w[4] = {r.x, r.y, r.z, r.w};
    if (sizeof(T) == 4) {
        unsigned int *q = reinterpret_cast<unsigned int *>(row);
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int e = e0 + j;
            if (e >= 0 && e < D) q[e] = w[j];
        }
    } else {
        unsigned short *q = reinterpret_cast<unsigned short *>(row);
#pragma unroll
        for (int j = 0; j < 8; j++) {
            int e = e0 + j;
            if (e >= 0 && e < D) q[e] = (unsigned short)(w[j >> 1] >> (16 * (j & 1)));
        }
    }
}

/* ---- fast division by a launch constant ----------------------------------------
 * n / d for 0 <= n < 2^31 and 1 <= d < 2^31 with one multiply-high and a
 * shift: m = ceil(2^(32 + s) / d) - 2^32 (0 for d a power of two), s =
 * ceil(log2 d) (round-up method). */
typedef struct kf_fdiv { unsigned int d, m, s; } kf_fdiv;

static inline kf_fdiv kf_fdiv_make(unsigned int d)
{
    kf_fdiv f;
    unsigned int s = 0;
    while ((1ull << s) < d) s++;
    f.d = d;
    f.s = s;
    /* m = ceil(2^(32+s) / d) - 2^32 fits 32 bits for s <= 31 */
    f.m = (unsigned int)((((1ull << (32 + s)) + d - 1) / d) - (1ull << 32));
    return f;
}

static __device__ __forceinline__ unsigned int kf_fdiv_q(unsigned int n, kf_fdiv f)
{
    unsigned int t = __umulhi(n, f.m);
    return (unsigned int)(((unsigned long long)t + n) >> f.s);
}

/* This thread's group of G threads (fG: G as a fast divisor) and its lane in
 * it, from a fresh %tid.x read: computed where it is called, never hoisted,
 * so the chunk offsets made from the lane are not held in registers across a
 * row loop or a reduction (what spilled in the 48-register row kernels). */
static __device__ __forceinline__ int kf_group_fresh(kf_fdiv fG, int G, int *lane)
{
    const int tid = kf_tid_x_fresh();
    const int grp = (int)kf_fdiv_q((unsigned int)tid, fG);
    *lane = tid - grp * G;
    return grp;
}

/* ---- reductions -------------------------------------------------------------
 * Threads of a block are split into groups of G consecutive threads, one row
 * per group. G <= KF_WARP (a power of two): butterfly shuffles inside the
 * group. G > KF_WARP (a warp multiple dividing blockDim.x): butterfly in each
 * warp, one shared-memory exchange, then every thread adds its group's warp
 * partials in the same order. grp = threadIdx.x / G (the caller has it). Every thread of the group gets the same,
 * deterministic result. Every thread of the block must call it (the shared
 * path has barriers). */
#define KF_RED_SUM 0
#define KF_RED_MAX 1

template <int OP> static __device__ __forceinline__ float kf_red_op(float a, float b)
{
    if (OP == KF_RED_SUM) return a + b;
    /* max that propagates NaN (fmaxf would drop it) */
    return (a > b || a != a) ? a : b;
}

template <int OP, bool FRESH_TID = false, bool VEC = false>
static __device__ __forceinline__ float kf_group_reduce(float v, int G, int grp)
{
    __shared__ __align__(16) float part[1024 / 16];
    if (G <= KF_WARP) {
        for (int m = G >> 1; m > 0; m >>= 1) v = kf_red_op<OP>(v, KF_SHFL_XOR(v, m));
        return v;
    }
#pragma unroll
    for (int m = KF_WARP >> 1; m > 0; m >>= 1) v = kf_red_op<OP>(v, KF_SHFL_XOR(v, m));
    /* FRESH_TID: threadIdx.x re-read here, so that a caller's row loop does
     * not keep this thread's part[] slot live across it (under a 48-register
     * cap that slot was what spilled) */
    const int tid = FRESH_TID ? kf_tid_x_fresh() : (int)threadIdx.x;
    const int warp = tid / KF_WARP;
    const int wpg = G / KF_WARP;              /* warps per group */
    const int first = grp * wpg;              /* the group's first warp */
    __syncthreads(); /* the previous use of part[] is finished */
    if (tid % KF_WARP == 0) part[warp] = v;
    __syncthreads();
    /* the group's partials in warp order. VEC: groups of 2 or 4 warps read
     * them as one vector (first is a multiple of wpg): the same sums in the
     * same order as the loop, in fewer instructions. Only the rope row
     * kernel's one-head rows take it (H200: in the lean norm kernel it cost
     * ada_norm 2 x 1320 x 2048 1.02 -> 1.08 x copy and gained nothing;
     * kf_norm_peel48 spilled with it) */
    if (VEC && wpg == 2) {
        const float2 q = *reinterpret_cast<const float2 *>(&part[first]);
        return kf_red_op<OP>(q.x, q.y);
    }
    if (VEC && wpg == 4) {
        const float4 q = *reinterpret_cast<const float4 *>(&part[first]);
        return kf_red_op<OP>(kf_red_op<OP>(kf_red_op<OP>(q.x, q.y), q.z), q.w);
    }
    float t = part[first];
    for (int i = 1; i < wpg; i++) t = kf_red_op<OP>(t, part[first + i]);
    return t;
}

/* ---- row indexing -------------------------------------------------------------
 * Row r of a normalized view with outer shape [s0, s1, s2] is (i0, i1, i2),
 * r = (i0 * s1 + i1) * s2 + i2 (as kf_row_offset in internal.h). 32-bit
 * division when r, s1 and s2 fit 32 bits (always in practice), 64-bit
 * otherwise (an s1 or s2 of 2^32 or more with r below it took the 32-bit
 * branch with the extent cut: a wrong index for tensors of >= 2^32 rows). */
typedef struct kf_ridx { int64_t i0, i1, i2; } kf_ridx;

static __device__ __forceinline__ kf_ridx kf_row_index(int64_t r, int64_t s1, int64_t s2)
{
    kf_ridx x;
    if (r <= 0xffffffffll && s1 <= 0xffffffffll && s2 <= 0xffffffffll) {
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

/* the same for r < 2^31 with the divisions by s2 and s1 done as multiply-
 * high + shift (kf_fdiv, made on the host); no 64-bit division code */
static __device__ __forceinline__ kf_ridx kf_row_index_f(int64_t r, kf_fdiv f1, kf_fdiv f2)
{
    kf_ridx x;
    unsigned int ur = (unsigned int)r;
    unsigned int q = kf_fdiv_q(ur, f2);
    x.i2 = ur - q * f2.d;
    unsigned int q2 = kf_fdiv_q(q, f1);
    x.i1 = q - q2 * f1.d;
    x.i0 = q2;
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

/* 1 if t and u step alike over x's rows: equal strides in every outer dim
 * where x has more than one index (a dim of size 1 is never stepped). NULL
 * u: 1. Then u's row r is t's row r plus one fixed offset (u - t). */
static inline int kf_same_outer_strides(const kf_tensor *t, const kf_tensor *u, const kf_tensor *x)
{
    if (!u) return 1;
    for (int i = 0; i < 3; i++)
        if (x->shape[i] > 1 && t->stride[i] != u->stride[i]) return 0;
    return 1;
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

/* 1 if row r of t starts at r * (*s) elements for one stride *s (outer dims
 * of size > 1 nest densely over the innermost of them; one row: *s = 0) */
static inline int kf_row_stride(const kf_tensor *t, int64_t *s)
{
    int64_t expect = -1;
    *s = 0;
    for (int i = 2; i >= 0; i--) {
        if (t->shape[i] <= 1) continue;
        if (expect < 0) *s = expect = t->stride[i];
        else if (t->stride[i] != expect) return 0;
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

/* a launch of `threads` threads: its block size, halved from bs (down
 * to min_bs) while the grid has fewer than per_sm blocks per SM, so that a
 * small (decode) launch spreads over more SMs instead of queueing its loads
 * in a few */
static inline int kf_spread_block(const kf_ctx *ctx, int64_t threads, int bs, int min_bs, int per_sm)
{
    while (bs > min_bs && (threads + bs - 1) / bs < (int64_t)per_sm * ctx->facts.sm_count) bs /= 2;
    return bs;
}

/* Launch geometry of a row-wise kernel. nch = chunks per row (the caller
 * adds one for rows peeled to an alignment boundary); the target is tgt
 * chunks per thread (4: 64 bytes of loads in flight; the adds, which load
 * two tensors, take 2).
 *   nch <= 4 * warp: a group of G <= warp threads per row (G a power of two),
 *     several rows per block (RPB = BS / G), K <= 4 chunks per thread.
 *   otherwise: G = ceil(nch / 4) threads per row rounded to a warp multiple
 *     (at most max_bs), K in {1, 2, 4, 8} chunks per thread kept in
 *     registers, one row per block (G >= 2 warps here, so 32 blocks per SM
 *     still fill it); if the row needs more than max_k chunks per thread,
 *     K = 0: the streaming path that re-reads the row.
 *     One row per block, because the row's reduction waits at block
 *     barriers: with 4 rows per 256-thread block every row waited for the
 *     slowest of four. H200, 3-round A/B (BENCHMARKS sixteenth set):
 *     rms_norm_rope 2 x 8064 x 2048 bf16 1.17 -> 1.13 x copy, ada_norm
 *     1.07 -> 1.05, layer_norm 1.08 -> 1.06.
 * KFUSE_ROW_BLOCK (64 / 128 / 256 / 512, for tuning runs) packs rows into
 * blocks of that many threads in both cases (default: 256 for rows of at
 * most a warp, one row per block above).
 * grid: enough blocks for every row, capped at 16 waves of full occupancy
 * (kernels loop over rows with a grid stride). Few rows: smaller blocks, so
 * that more multiprocessors get one. */
typedef struct kf_rowgeom {
    int G, K, BS, RPB;
    unsigned int grid;
} kf_rowgeom;

static inline kf_rowgeom kf_row_geometry(const kf_ctx *ctx, int64_t rows, int64_t nch,
                                         int max_k, int max_bs, int tgt, bool few_wave_split)
{
    kf_rowgeom g;
    int W = ctx->facts.warp_size;
    /* few_wave_split: rows of 8+ warps' worth of chunks in fewer than three
     * waves of 4-chunk threads (at the half occupancy of 64-register
     * kernels) take 2 chunks, twice the blocks, a smaller last-wave tail.
     * H200, ada_norm 2 x 1320 x 2048 bf16 (1.25 waves at 4 chunks): 1.87 ->
     * 1.50 x copy; f32 (2.5 waves; the bound was two waves before):
     * 1.17 -> 1.13 (13.69 -> 13.19 us). From three waves up 4 chunks
     * measured best (1, 2 and 8 were 5-60 % slower on every row op of
     * BENCHMARKS.md), and short rows lose with 2 (8192 x 769: 1.65 -> 2.30),
     * hence the row-length floor. The rope row kernel does not split (LTX
     * rope positions 2 x 1320 x 2048 bf16 / f16 at 4 chunks rather than
     * 2: 1.21 -> 1.12 x copy, 8.06 -> 7.46 us; f32 level). */
    if (few_wave_split && tgt == 4 && nch >= 8 * (int64_t)W &&
        rows * nch < 3 * 4 * (int64_t)ctx->facts.sm_count * (ctx->facts.max_threads_per_sm / 2))
        tgt = 2;
    /* Rows of at most 2 W chunks (D <= 512 at 16 bits): 2 chunks per lane,
     * twice the lanes per row of 4. H200, rms_norm 8192 x 111 bf16 (D 111:
     * 4 lanes of 4 chunks, or 8 of 2): 1.13-1.35 -> 0.71-1.01 x copy
     * (two A/B runs of three rounds). */
    if (tgt == 4 && nch <= 2 * (int64_t)W) tgt = 2;
    if (ctx->row_chunks > 0) tgt = ctx->row_chunks; /* KFUSE_ROW_CHUNKS */
    if (nch <= tgt * (int64_t)W) {
        g.G = kf_pow2_ceil((nch + tgt - 1) / tgt);
        if (g.G > W) g.G = W;
        g.K = kf_pow2_ceil((nch + g.G - 1) / g.G);
        g.BS = ctx->row_block > 0 ? ctx->row_block : 256; /* KFUSE_ROW_BLOCK */
        if (g.BS < W) g.BS = W;
        /* few rows: halve the block (down to two warps) while that leaves
         * SMs idle (G <= W: BS stays a multiple of G) */
        g.BS = kf_spread_block(ctx, rows * g.G, g.BS, 2 * W, 2);
        g.RPB = g.BS / g.G;
    } else {
        int64_t G = ((nch + tgt - 1) / tgt + W - 1) / W * W;
        if (G > max_bs) G = max_bs;
        int64_t K = (nch + G - 1) / G;
        g.G = (int)G;
        if (K > max_k) {
            g.K = 0;
            g.G = max_bs;
        } else {
            g.K = kf_pow2_ceil(K);
        }
        g.RPB = 1;
        const int pack = ctx->row_block; /* KFUSE_ROW_BLOCK; 0: one row per block */
        if (g.K > 0 && g.G < pack && pack % g.G == 0)
            g.RPB = pack / g.G;
        g.BS = g.G * g.RPB;
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

/* 1 if the row starts of t and of ref lie at the same offset modulo 16
 * bytes in every row (same element size, bases congruent mod 16, strides of
 * every outer dim of size > 1 equal modulo 16 bytes): then one per-row peel
 * (computed from ref's row start) aligns both. NULL t: 1. */
static inline int kf_same_phase(const kf_tensor *t, const kf_tensor *ref)
{
    if (!t) return 1;
    if (kf_dtype_size((kf_dtype)t->dtype) != kf_dtype_size((kf_dtype)ref->dtype)) return 0;
    int64_t es = (int64_t)kf_dtype_size((kf_dtype)t->dtype);
    if (((uintptr_t)t->data - (uintptr_t)ref->data) % 16 != 0) return 0;
    for (int i = 0; i < 3; i++) {
        int64_t st = t->shape[i] > 1 ? t->stride[i] : 0;
        int64_t sr = ref->shape[i] > 1 ? ref->stride[i] : 0;
        if (((st - sr) * es) % 16 != 0) return 0;
    }
    return 1;
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
 * dtype, per token or broadcast). ACT (compile time) picks the activation.
 * Flat form when every view is dense (one 1-D index space, grid-stride, no
 * division per element); row form otherwise (G threads per row, 256 / G rows
 * per block, the row index per row by multiply-high divisions).
 * Each thread moves U = 4 chunks per step and issues all their loads before
 * the first use: 64 bytes per operand in flight per thread (one 16-byte load
 * per thread left the copy rate out of reach: 32 KB per SM in flight against
 * the ~40 KB that the H200's bandwidth x latency asks for). Launches too small
 * to fill the device that way, and gated_residual's rows, take fewer chunks
 * per thread and more threads per SM (the kernels' comments).
 * Each element is read and written by one thread: in place is safe. */
#define KF_EW_GLU 0
#define KF_EW_ACT 1
#define KF_EW_GRES 2
#define KF_EW_U 4

typedef struct kf_ew_p {
    const void *a; kf_st3 as;
    const void *b; kf_st3 bs;
    const void *c; kf_st3 cs; int cdt;
    void *y; kf_st3 ys;
    int64_t rows, s1, s2, D, n; /* n = rows * D (flat form) */
    int G, Gshift;                  /* row form: G = 1 << Gshift threads per row */
    int fast;                       /* rows, s1, s2 < 2^31: f1, f2 divide the row index */
    kf_fdiv f1, f2;
} kf_ew_p;

/* log2(e): e^x = 2^(x log2 e), for the exp2 approximations */
#define KF_LOG2E 1.4426950408889634f

/* gelu_erf for 16-bit outputs: 0.5 x erfc(-x / sqrt2) = x (1 - h) for x > 0,
 * x h otherwise, with h = erfc(|x| / sqrt2) / 2 from the fit
 * h = u 2^(Q(u) - b^2), u = 1 / (2 + |x|), b^2 = x^2 log2(e) / 2 (log2 units:
 * no multiply by log2(e); the 1 / (2 + |x|) form takes no multiply by 0.5),
 * Q of degree 4 (Lawson-weighted least squares of log2(h / u) + b^2 over
 * |x| in [0, 13.2]; max relative error of h 4.9e-5). Over every finite
 * input in (-13, 12), in f32 arithmetic with an exact 2^x and reciprocal,
 * the outputs rounded to f16 are within 0.59 ulp of the true value, to bf16
 * within 0.51 (the degree-5 fit it replaced: 0.51 and 0.50, one FFMA more).
 * -x^2 log2(e) / 2 is (x * -K) * x: from b = |x| sqrt(K), ptxas formed -b
 * with a multiply of its own. About 11 FP32 instructions and two MUFU per
 * element: the MUFU pipe's 16 lanes per SM bound it near there. 2^ flushes
 * to 0 below 2^-126 (x below about -13.13, where the true |y| is under
 * ~1.4e-38: bf16, with f32's exponent range, would keep a few of those as
 * subnormals). x = +inf gives inf, -inf NaN (-inf * 0, as 0.5 x (1 + erf)),
 * NaN stays NaN. CUDA's erfcf for bf16 gelu_erf took 1.4x the time of erff
 * (H100, 16128 x 8192: 293 against 208 us; the erff form's 1 + erf loses the
 * negative side). */
static __device__ __forceinline__ float kf_gelu_erf_fast(float x)
{
    const float u = KF_RCP_FAST(2.0f + fabsf(x));
    float q = 6.02047157f;
    q = fmaf(q, u, -9.2011528f);
    q = fmaf(q, u, 2.8529253f);
    q = fmaf(q, u, 2.76554203f);
    q = fmaf(q, u, -1.32209265f);
    const float h = u * KF_EXP2_FAST(fmaf(x * -0.721347520f, x, q)); /* erfc(|x| / sqrt2) / 2 */
    return x * (x > 0.0f ? 1.0f - h : h);
}

/* gelu_erf for f32 outputs: 0.5 x erfc(-x / sqrt2), with erfc(s / sqrt2), s =
 * |x|, as t 2^(Q(t) - K s^2), t = 1 / (1 + 0.34375 s), K = log2(e) / 2, Q of
 * degree 7 fitted here (Lawson-weighted least squares in Chebyshev points over
 * s in [0, 13.5], the f32 range of erfc; max error of the fit 4.2e-7 relative).
 * Taking s = |x| rather than the rounded |x| / sqrt2, and s^2 as the exact
 * pair h + l (fmaf), leaves the exponent's rounding as the one error that
 * grows with s. Checked on the CPU over every f32 x in [-13.2, 8) against
 * erfcl (libm's exp2f and division): max relative error 4.3e-6 below -5 (where
 * |y| < 1.5e-6; ops.md's f32 rtol is 1e-5), 1.1e-6 in [-5, -1), 1.8e-7 in
 * [1, 8) (2 - r). About 21 instructions and two MUFU: CUDA's erfcf made f32
 * gelu_erf compute-bound (H200 16128 x 8192: 306.8 us against PyTorch's 256.9
 * through erff). x = +-inf: r = 0, giving inf and NaN (-inf * 0) as 0.5x
 * (1 + erf) does; NaN stays NaN through the last product. */
static __device__ __forceinline__ float kf_gelu_erf_f32(float x)
{
    /* past 15, 2^(Q - K s^2) < 2^-150 is 0 even without flushing to zero
     * (the emulator's exp2f); the clamp keeps l finite for s = inf */
    const float s = fminf(fabsf(x), 15.0f);
    const float t = KF_RCP_FAST(fmaf(0.34375f, s, 1.0f));
    float q = -0.275321633f;
    q = fmaf(q, t, 1.15393281f);
    q = fmaf(q, t, -1.65761542f);
    q = fmaf(q, t, 0.739362478f);
    q = fmaf(q, t, -0.13360247f);
    q = fmaf(q, t, 0.60158509f);
    q = fmaf(q, t, 1.4377861f);
    q = fmaf(q, t, -1.86612761f);
    const float h = s * s, l = fmaf(s, s, -h); /* s^2 = h + l exactly */
    const float K = 0.721347511f;
    const float r = t * KF_EXP2_FAST(fmaf(-K, h, fmaf(-K, l, q))); /* erfc(s / sqrt2) */
    return 0.5f * x * (x < 0.0f ? r : 2.0f - r);
}

/* Activations. FAST (16-bit outputs): exp2 / reciprocal approximations,
 * whose ~1e-7 relative error is far below a 16-bit rounding, and
 * kf_gelu_erf_fast; f32 outputs keep the accurate expf and kf_gelu_erf_f32. silu's division
 * is the hardware reciprocal (1 ulp) in both: the IEEE division's range
 * check and slow-path branch per element made f32 silu issue-bound (H200
 * 16128 x 8192: 1.07 x copy against gelu_tanh's 1.02). 1 + e^-x >= 1, so the reciprocal's only
 * special range is 1 + e^-x > 2^126 (x < -87.3), where it gives 0 for a true
 * |silu| < 1e-36.
 * gelu_tanh: 0.5 x (1 + tanh(u)) == x * sigmoid(2u) == x / (1 + e^(-2u)),
 * which also gives the right limits (x -> -inf: NaN as 0.5 * -inf * 0), and
 * gelu_erf: 0.5 x (1 + erf(x / sqrt2)) == 0.5 x erfc(-x / sqrt2): for x below
 * about -2, 1 + tanh and 1 + erf are differences of numbers near 1 that lose
 * most of their bits (0 from x ~ -5 on; the f32 outputs 0.4 relative off at
 * x in [-8, -5]); e^(-2u) and erfc keep full relative precision. */
template <int ACT, bool FAST> static __device__ __forceinline__ float kf_act(float x)
{
    if (ACT == KF_ACT_SILU) {
        if (FAST) return x * KF_RCP_FAST(1.0f + KF_EXP2_FAST(-KF_LOG2E * x));
        return x * KF_RCP_FAST(1.0f + expf(-x));
    }
    if (ACT == KF_ACT_GELU_TANH) {
        float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
        if (FAST) return x * KF_RCP_FAST(1.0f + KF_EXP2_FAST(-2.0f * KF_LOG2E * u));
        return x * KF_RCP_FAST(1.0f + expf(-2.0f * u));
    }
    if (FAST) return kf_gelu_erf_fast(x);
    return kf_gelu_erf_f32(x);
}

template <typename T, int OP, int ACT>
static __device__ __forceinline__ void kf_ew_math(float (&va)[16 / sizeof(T)],
                                                  const float (&vb)[16 / sizeof(T)],
                                                  const float (&vc)[16 / sizeof(T)])
{
    const int V = 16 / sizeof(T);
#pragma unroll
    for (int j = 0; j < V; j++) {
        if (OP == KF_EW_GRES) {
            va[j] = va[j] + vb[j] * vc[j];
        } else {
            va[j] = kf_act<ACT, (sizeof(T) == 2)>(va[j]);
            if (OP == KF_EW_GLU) va[j] *= vb[j];
        }
    }
}

/* flat: a step covers U * BS chunks, chunk i = step base + threadIdx + u * BS;
 * the last, partial chunk of the index space goes element by element. U =
 * KF_EW_U (gated_residual 2: the gate's f32 values too) at 3 blocks per SM;
 * an aligned GLU / activation launch too small to fill the device at that U
 * takes U = 1 at 8 blocks per SM (<= 32 registers, no spill on sm_80 or
 * sm_90): four times the threads, spread over every SM (kf_ew_launch_t). */
template <typename T, int OP, int ACT, bool AL, int U, int MINB>
__global__ void __launch_bounds__(256, MINB) kf_ew_flat_kernel(kf_ew_p p)
{
    const int V = 16 / sizeof(T);
    const int64_t nch = (p.n + V - 1) / V;
    const int BS = (int)blockDim.x;
    for (int64_t i0 = (int64_t)blockIdx.x * BS * U + threadIdx.x; i0 < nch;
         i0 += (int64_t)gridDim.x * BS * U) {
        uint4 ra[U], rb[U];
        float vc[U][V];
#pragma unroll
        for (int u = 0; u < U; u++) {
            int64_t i = i0 + (int64_t)u * BS;
            int64_t j0 = i * V;
            int n = p.n - j0 < V ? (int)(p.n - j0) : V;
            ra[u] = make_uint4(0u, 0u, 0u, 0u);
            rb[u] = ra[u];
            if (i < nch) {
                const T *a = (const T *)p.a + j0;
                const T *b = (const T *)p.b + j0;
                if (AL && n == V) {
                    ra[u] = kf_ldr<T, true>(a, n);
                    if (OP != KF_EW_ACT) rb[u] = kf_ldr<T, true>(b, n);
                    if (OP == KF_EW_GRES) kf_ldp<T, true>(p.c, p.cdt, j0, n, vc[u]);
                } else {
                    ra[u] = kf_ldr<T, false>(a, n);
                    if (OP != KF_EW_ACT) rb[u] = kf_ldr<T, false>(b, n);
                    if (OP == KF_EW_GRES) kf_ldp<T, false>(p.c, p.cdt, j0, n, vc[u]);
                }
            }
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            int64_t i = i0 + (int64_t)u * BS;
            if (i < nch) {
                int64_t j0 = i * V;
                int n = p.n - j0 < V ? (int)(p.n - j0) : V;
                float va[V], vb[V];
                kf_unpack<T, V>(ra[u], va);
                kf_unpack<T, V>(rb[u], vb);
                kf_ew_math<T, OP, ACT>(va, vb, vc[u]);
                T *y = (T *)p.y + j0;
                if (AL && n == V) kf_st<T, V, true>(y, n, va);
                else kf_st<T, V, false>(y, n, va);
            }
        }
    }
}

/* Row form. U chunks per thread and step; MINB blocks per SM as the register
 * bound (launch bounds; sm_80 code at most 4, KF_MIN_BLOCKS_256).
 * gated_residual on the 16-byte path takes U = 1 where one chunk per thread
 * covers the row (MINB 6, <= 40 registers, no spill) and U = 2 with MINB 4
 * (<= 64) otherwise; the others U = KF_EW_U, MINB 2 (the
 * GLU / activation rows kernels spill at 64). H200, 2 x 8064 x 2048 bf16, a
 * per-batch gate: MINB 3 -> 4 at U = 2, 1.06 -> 1.00 x copy (five rounds);
 * see kf_ew_launch_t for U = 1. The row's group and lane come from shifts
 * (G a power of two) and the row index from multiply-high divisions where
 * rows, s1, s2 < 2^31 (fast): the 32-bit divisions took ~90 instructions a
 * row, as many as a row's data at U = 2 (H200 1.00 -> 0.99 x copy; the
 * PyTorch harness 1.03 -> 1.02 x torch.compile's kernel). */
template <typename T, int OP, int ACT, bool AL, int U, int MINB>
__global__ void __launch_bounds__(256, KF_MIN_BLOCKS_256(MINB)) kf_ew_rows_kernel(kf_ew_p p)
{
    const int V = 16 / sizeof(T);
    const int G = p.G;
    const int grp = (int)threadIdx.x >> p.Gshift;
    const int lane = (int)threadIdx.x & (G - 1);
    const int RPB = (int)blockDim.x >> p.Gshift;
    const int D = (int)p.D;
    const int nch = (D + V - 1) / V;
    for (int64_t row = (int64_t)blockIdx.x * RPB + grp; row < p.rows;
         row += (int64_t)gridDim.x * RPB) {
        const kf_ridx ri = p.fast ? kf_row_index_f(row, p.f1, p.f2)
                                  : kf_row_index(row, p.s1, p.s2);
        const T *a = (const T *)p.a + kf_off(p.as, ri);
        const T *b = OP != KF_EW_ACT ? (const T *)p.b + kf_off(p.bs, ri) : (const T *)0;
        T *y = (T *)p.y + kf_off(p.ys, ri);
        const int64_t coff = OP == KF_EW_GRES ? kf_off(p.cs, ri) : 0;
        for (int c0 = lane; c0 < nch; c0 += G * U) {
            uint4 ra[U], rb[U];
            float vc[U][V];
#pragma unroll
            for (int u = 0; u < U; u++) {
                int c = c0 + u * G;
                int j0 = c * V;
                int n = D - j0 < V ? D - j0 : V;
                ra[u] = make_uint4(0u, 0u, 0u, 0u);
                rb[u] = ra[u];
                if (c < nch) {
                    ra[u] = kf_ldr<T, AL>(a + j0, n);
                    if (OP != KF_EW_ACT) rb[u] = kf_ldr<T, AL>(b + j0, n);
                    if (OP == KF_EW_GRES) kf_ldp<T, AL>(p.c, p.cdt, coff + j0, n, vc[u]);
                }
            }
#pragma unroll
            for (int u = 0; u < U; u++) {
                int c = c0 + u * G;
                if (c < nch) {
                    int j0 = c * V;
                    int n = D - j0 < V ? D - j0 : V;
                    float va[V], vb[V];
                    kf_unpack<T, V>(ra[u], va);
                    kf_unpack<T, V>(rb[u], vb);
                    kf_ew_math<T, OP, ACT>(va, vb, vc[u]);
                    kf_st<T, V, AL>(y + j0, n, va);
                }
            }
        }
    }
}

/* Launch an elementwise op; views are normalized 4-D (b, c may be NULL). */
template <int OP, int ACT>
static kf_status kf_ew_launch_t(kf_ctx *ctx, const char *name, const kf_tensor *a,
                                const kf_tensor *b, const kf_tensor *c, const kf_tensor *y)
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
    if (p.n == 0) return KF_OK;
    int V = 16 / (int)kf_dtype_size((kf_dtype)a->dtype);
    bool flat = kf_rows_dense(a) && kf_rows_dense(y) && (!b || kf_rows_dense(b)) &&
                (!c || kf_rows_dense(c));
    /* the row kernel's element index of a chunk (int) runs up to G U V =
     * 8192 past the row before its bounds test (the flat kernel's is int64) */
    if (!flat && p.D > INT_MAX - 65536)
        return kf_set_error(ctx, KF_ERR_UNSUPPORTED, "%s: rows too long", name);
    bool al;
    int u_rows = 0; /* row form: chunks per thread and step */
    int u_flat = 0; /* flat form: the same */
    int BS = 256;
    unsigned int grid;
    if (flat) {
        al = ((uintptr_t)a->data % 16 == 0) && ((uintptr_t)y->data % 16 == 0) &&
             (!b || (uintptr_t)b->data % 16 == 0) && (!c || (uintptr_t)c->data % 16 == 0);
        /* GLU / activations: U = 1 where the threads of U = KF_EW_U would not
         * make one full wave (every SM at its thread limit). H100, bf16, 2
         * rounds: glu 64 x 14336 (5.5 MB) silu 1.15 -> 1.06 x copy (3.78 ->
         * ~3.5 us), gelu_tanh 1.18 -> 1.06; U = 2 at 4 or 6 blocks 1.09-1.12.
         * The large rows (glu 8192 x 14336, silu 16128 x 8192) were level at
         * U = 1 there (0.98-1.00) and keep KF_EW_U: an activation's one
         * operand at U = 1 is 16 bytes in flight a thread (see above). */
        const int64_t chunks = (p.n + V - 1) / V;
        u_flat = OP == KF_EW_GRES ? 2 : KF_EW_U;
        if (OP != KF_EW_GRES && al &&
            (chunks + KF_EW_U - 1) / KF_EW_U <
                (int64_t)ctx->facts.sm_count * ctx->facts.max_threads_per_sm)
            u_flat = 1;
        const int U = u_flat;
        const int64_t threads = (chunks + U - 1) / U;
        /* decode rows (glu 64 x 14336: 112 blocks of 256): smaller blocks,
         * at least two per SM. H200, 3 rounds, three dtypes: glu gelu_tanh
         * 64 x 14336 1.26 -> 1.25 x copy, silu 0-0.01 better (predicted
         * ~1.12: the launch's spread over SMs is not what holds it) */
        BS = kf_spread_block(ctx, threads, BS, 64, 2);
        grid = kf_flat_grid(ctx, chunks, BS * U);
    } else {
        al = kf_rows_aligned16(a) && kf_rows_aligned16(b) && kf_rows_aligned16(c) &&
             kf_rows_aligned16(y) && p.D % V == 0;
        int64_t nch = (p.D + V - 1) / V;
        /* gated_residual, 16-byte path: one chunk per thread where a block's
         * threads cover the row (D <= 2048 in 16 bits, 1024 in f32), two
         * otherwise.
         * H100, 2 x 8064 x 2048 bf16, 2 rounds: U = 1 (6 blocks per SM)
         * against U = 2 (4 blocks) in the PyTorch harness 66.5 against
         * 67.8 us (1.00 against 1.01 x torch.compile's kernel), kfuse bench
         * level at 0.99 x copy; f32 (512 chunks a row) at U = 1 with two
         * steps a thread 0.99 against 0.98, so U = 2 there. U = 2 at MINB
         * 5 (gate held raw) level with 4; U = 1 at MINB 7 or 8 spills
         * (1.04, 1.28 x copy). */
        u_rows = OP == KF_EW_GRES ? (al && nch <= BS ? 1 : 2) : KF_EW_U;
        p.G = kf_pow2_ceil((nch + u_rows - 1) / u_rows);
        if (p.G > BS) p.G = BS;
        while ((1 << p.Gshift) < p.G) p.Gshift++;
        p.fast = p.rows < (1ll << 31) && p.s1 < (1ll << 31) && p.s2 < (1ll << 31);
        p.f1 = kf_fdiv_make(p.fast ? (unsigned int)p.s1 : 1u);
        p.f2 = kf_fdiv_make(p.fast ? (unsigned int)p.s2 : 1u);
        int64_t rpb = BS / p.G;
        grid = kf_flat_grid(ctx, (p.rows + rpb - 1) / rpb * BS, BS);
    }
    kf_gpuStream_t st = kf_stream(ctx);
#define KF_EW_GO(T)                                                                  \
    do {                                                                             \
        if (flat) {                                                                  \
            if constexpr (OP == KF_EW_GRES) {                                        \
                if (al) kf_launch(kf_ew_flat_kernel<T, OP, ACT, true, 2, 3>, grid, BS, 0, st, p); \
                else kf_launch(kf_ew_flat_kernel<T, OP, ACT, false, 2, 3>, grid, BS, 0, st, p); \
            } else if (!al) {                                                         \
                kf_launch(kf_ew_flat_kernel<T, OP, ACT, false, KF_EW_U, 3>, grid, BS, 0, st, p); \
            } else if (u_flat == 1) {                                                 \
                kf_launch(kf_ew_flat_kernel<T, OP, ACT, true, 1, 8>, grid, BS, 0, st, p); \
            } else {                                                                  \
                kf_launch(kf_ew_flat_kernel<T, OP, ACT, true, KF_EW_U, 3>, grid, BS, 0, st, p); \
            }                                                                         \
        } else {                                                                     \
            if constexpr (OP != KF_EW_GRES) {                                        \
                if (al) kf_launch(kf_ew_rows_kernel<T, OP, ACT, true, KF_EW_U, 2>, grid, BS, 0, st, p); \
                else kf_launch(kf_ew_rows_kernel<T, OP, ACT, false, KF_EW_U, 2>, grid, BS, 0, st, p); \
            } else if (!al) {                                                         \
                kf_launch(kf_ew_rows_kernel<T, OP, ACT, false, 2, 2>, grid, BS, 0, st, p); \
            } else if (u_rows == 1) {                                                 \
                kf_launch(kf_ew_rows_kernel<T, OP, ACT, true, 1, 6>, grid, BS, 0, st, p); \
            } else {                                                                  \
                kf_launch(kf_ew_rows_kernel<T, OP, ACT, true, 2, 4>, grid, BS, 0, st, p); \
            }                                                                         \
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

template <int OP>
static kf_status kf_ew_launch(kf_ctx *ctx, const char *name, const kf_tensor *a,
                              const kf_tensor *b, const kf_tensor *c, const kf_tensor *y, int act)
{
    switch (act) {
    case KF_ACT_SILU: return kf_ew_launch_t<OP, KF_ACT_SILU>(ctx, name, a, b, c, y);
    case KF_ACT_GELU_TANH: return kf_ew_launch_t<OP, KF_ACT_GELU_TANH>(ctx, name, a, b, c, y);
    default: return kf_ew_launch_t<OP, KF_ACT_GELU_ERF>(ctx, name, a, b, c, y);
    }
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
