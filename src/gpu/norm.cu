/* norm.cu - the norm family on the GPU: rms_norm, add_rms_norm, layer_norm,
 * ada_norm, add_ada_norm. Two kernels serve all five: an optional residual add
 * (s = round(x + a [* gate]), written back), an RMS or LayerNorm reduction
 * over the row, then weight / bias / (1 + scale) / shift. The common rows of
 * rms_norm, add_rms_norm and layer_norm (aligned, one row stride, parameters
 * of the rows' dtype) take a third, lean one (kf_norm_lean); odd D a fourth
 * (kf_norm_peel).
 *
 * Napkin math (H200, bf16, rms_norm 8192 x 4096): 64 MiB read + 64 MiB write
 * = 134 MB; at the copy rate for that size (~3.6 TB/s) that is ~37 us. The
 * kernel reads x once and writes y once: the row stays in registers between
 * the reduction and the write (K chunks of 16 bytes per thread), so DRAM sees
 * exactly those bytes; weight (8 KB) and per-batch scale/shift stay in L1/L2.
 * add_rms_norm moves 2 reads + 2 writes, add_ada_norm 2 reads + 2 writes (+ a
 * per-token gate if given).
 * Latency budget: Little's law at ~4 TB/s and ~0.8 us loaded DRAM latency is
 * ~3.2 MB in flight, ~25 KB per SM; a row is in flight only during its load
 * phase, so each SM should hold >= 40-60 KB of rows: 1024+ threads x 4 chunks.
 * Hence: <= 64 registers per thread (__launch_bounds__(512, 2)), every load
 * of the row (x, and a for the adds) issued before the first use, parameters
 * through the read-only path (they may be hoisted above the stores), and rows
 * of small groups packed into 256-thread blocks (the 32-blocks-per-SM limit).
 *
 * kf_norm_fast<T, K, ALN, F> (rows of up to 8 chunks per thread):
 *   F: compile-time family bits (KF_NF_ADD: the residual add; KF_NF_MOD: the
 *   (1 + scale) [+ shift] modulation; KF_NF_LN: LayerNorm; KF_NF_LLAMA: the
 *   llama rounding of the normalized value), so a kernel carries only its
 *   own pointers, statistics and per-element work; weight / bias / gate /
 *   shift presence and parameter dtypes are uniform run-time flags, tested
 *   once per chunk (a branch), never per element.
 *   Issue cost: the row kernels are issue-bound, not bandwidth-bound (ncu,
 *   H200, layer_norm 8192 x 4096: 1203 instructions per thread for 32
 *   elements, SM throughput 77 %, against Liger's Triton kernel at half the
 *   instructions and 1.05 x copy). So per element: bf16 -> f32 is one shift
 *   or mask, a 16-bit parameter chunk is converted by its dtype's branch
 *   (not both conversions and a select), the Gemma offset add only runs
 *   when the offset is nonzero, (1 + scale) is one FMA; per row: the group
 *   index and 1 / D come from the host (no integer or float division).
 *   LayerNorm: the mean, then the squared deviations over the registers
 *   (two reductions). f32 rows also sum the deviations in the second pass
 *   (KF_LN_MEAN_LO): the f32 mean m is off from the row's by up to
 *   |m| 2^-24 (its rounding and the f32 sum's), an error every deviation
 *   x - m carries, past the f32 tolerance once |m| / std passes ~200; the
 *   deviations' mean c is that error (x - m is exact near m), so outputs
 *   take (x - m - c) rstd and the variance is sum (x - m)^2 / D - c^2.
 *   16-bit rows keep m alone (their tolerance is passed only from
 *   |m| / std ~ 1e4, and their kernels are issue-bound). A one-reduction
 *   form (per-thread count / mean / M2 merged pairwise, Chan) measured
 *   slower on the H200 (layer_norm 8192 x 4096: 1.66 x copy against 1.48
 *   for this form, 2026-11-30):
 *   three shuffles and a division per butterfly step seem to cost more
 *   than the second barrier round saves.
 *   Peeled rows (ALN 2) take LayerNorm as a run-time flag (fewer kernels).
 *   Parameters are loaded after the reduction (kf_zero_after) and are
 *   mostly L1 hits. An earlier "touch" load per chunk, meant to bring their
 *   sectors into L1 during the reduction, never reached the machine code:
 *   its value fed only an inline-asm "mov 0", and ptxas dropped the loads
 *   as dead; it was removed.
 *   ALN 1: every row start 16-byte aligned and D % V == 0: 16-byte accesses;
 *   the row is read with ld.global.cs and y / sum written with st.global.cs
 *   (kf_ld16_stream / kf_st16_stream), so the streamed rows do not evict the
 *   parameters from L1 (H200, ada_norm 2 x 8064 x 2048: 1.26 -> 1.15 x copy;
 *   loads or stores alone: no gain).
 *   Odd D with no modulation or gate and aligned parameters (rms_norm,
 *   add_rms_norm, layer_norm at D 769, 5125, ...) take the lean kernel
 *   kf_norm_peel below (H200, bf16 rms_norm 8192 x 769: 1.56 -> 1.07 x
 *   copy, 8192 x 5125: 1.74 -> 1.16); the rest of them:
 *   ALN 2 (odd D, e.g. 769, 5125: rows of a dense tensor start anywhere):
 *   each row is peeled at its own alignment boundary (kf_ldr_m in
 *   common.cuh): x / a / sum / y move in aligned 16-byte chunks with one
 *   element-wise chunk at each end. Parameters: the aligned chunks under
 *   the row's chunk, picked out by the row phase (kf_ldpm_al) when they
 *   start 16-byte aligned and the kernel has no modulation; element by
 *   element otherwise (L1 hits, 8 loads per chunk).
 * kf_norm_kernel<T, AL, 0> (streaming, rows longer than 512 x 8 chunks, or
 *   views whose row phases differ): re-reads the row (L1/L2 for one row).
 *
 * Geometry (kf_row_geometry in common.cuh; V = 8 for 16-bit, 4 for f32):
 *   D <= 4 * warp * V (1024 bf16 on warp 32): G <= warp threads per row,
 *     256-thread blocks holding 256 / G rows, shuffle-only reduction;
 *   larger D: G = ceil(nch / 4) threads per row rounded to a warp multiple
 *     (<= 512), K = 1/2/4/8 chunks per thread in registers, a block per
 *     row; bf16 D = 2048: 64 x 4; D = 4096: 128 x 4; 8192: 256 x 4.
 *     Residual adds target 2 chunks, and so do plain RMS rows of D 2048 /
 *     4096 (bf16) in the lean kernel (128 x 2, 256 x 2: the weight loaded
 *     with the row; see kf_norm_launch).
 *   Measured alternatives (H200, bf16, time / copy; BENCHMARKS.md "Tried"):
 *   - chunks per thread (KFUSE_ROW_CHUNKS=1/2/8 against the 4 above, before
 *     the lean kernel): 1 and 2 lose 5-60 % (rms_norm 8192 x 4096: 1.85 /
 *     1.33 / 1.16), 8 loses too (1.33): per-row work (index math,
 *     reductions, barriers) amortized over 4 chunks beats more threads; the
 *     adds keep 2 (4: 1.25 vs 1.13).
 *     Launches under three waves take 2 (kf_row_geometry).
 *   - a pipelined form (persistent blocks, each thread copying its chunks
 *     of the next two rows into shared memory with cp.async while reducing
 *     the current one) was slower on every op with parameters (rms_norm
 *     8192 x 4096 1.16 -> 1.29, ada_norm 1.39 -> 1.53), ~1 % faster on
 *     softmax: the shared-memory carve-out takes L1 from the parameter
 *     reads. Not kept.
 *   - the same idea with the copy engine (2026-12-02, not kept): the
 *     lean kernel's rows, and the rope row kernel's, brought into shared
 *     memory by cp.async.bulk (sm_90) into a ring of 2-3 tile stages per
 *     persistent block, tile i + NS asked for as soon as tile i is in
 *     registers. Correct (suite, memcheck, racecheck), but slower on every
 *     shape: rms_norm 8192 x 4096 1.00 -> 1.15, layer_norm 1.08 -> 1.20-1.33,
 *     ada_norm 2 x 8064 x 2048 1.08 -> 1.18-1.30, rms_norm_rope 1.17 ->
 *     1.43-1.60; 3 stages slower than 2; an L2 evict-first hint on the
 *     bulk loads gained 0-0.03. ncu (rms_norm): 2.72 TB/s against the lean
 *     kernel's 3.08, fewer warps resident (51 % against 69 %). These rows are
 *     bound by the work per row and the warps that hide it, not by the
 *     bytes in flight.
 * Reductions: f32, butterfly shuffles + one shared exchange, fixed order.
 * In place (y == x, the sum written into residual / h): every element is read
 * and written by the same thread, the write after the row's loads. */
#include "common.cuh"

typedef struct kf_norm_p {
    const void *x;  kf_st3 xs;             /* primary input (x of rms_norm, h of add_ada) */
    const void *a;  kf_st3 as;             /* second addend or NULL */
    const void *g;  kf_st3 gs; int gdt;    /* gate multiplying a, or NULL */
    void *sum;      kf_st3 ss;             /* where round(x + a*g) goes, or NULL */
    void *y;        kf_st3 ys;
    const void *scale; kf_st3 scs; int scdt;
    const void *shift; kf_st3 shs; int shdt;
    const void *w; int wdt;
    const void *b; int bdt;
    int64_t rows, s1, s2, D;
    float eps, offset;
    int layer;                             /* 1: LayerNorm, 0: RMS */
    int llama;                             /* round n to T before the weight */
    int G;                                 /* threads per row */
    int RPB;                               /* rows per block (blockDim.x / G) */
    int pal;                               /* every parameter row 16-byte aligned */
    int zero;                              /* 0 (kf_zero_after) */
    float inv_D;                           /* 1 / D */
    kf_fdiv fG;                            /* G as a fast divisor (threadIdx.x / G) */
    kf_fdiv f1, f2;                        /* s1, s2 as fast divisors (rows < 2^31) */
} kf_norm_p;

/* Input chunk j0 (n elements) of the row, raw: x, or round(x + a * gate),
 * which is also stored into the sum tensor. */
template <typename T, int V, bool AL>
static __device__ __forceinline__ uint4 kf_norm_in(const kf_norm_p &p, const T *xr, const T *ar,
                                                   const void *gr, T *sr, int j0, int n)
{
    uint4 r = kf_ldr<T, AL>(xr + j0, n);
    if (ar) {
        float v[V], t[V];
        kf_unpack<T, V>(r, v);
        kf_ld<T, V, AL>(ar + j0, n, t);
        if (gr) {
            float gg[V];
            kf_ldp<T, AL>(gr, p.gdt, j0, n, gg);
            /* x + a * gate with one rounding (an FMA), as the reference */
#pragma unroll
            for (int j = 0; j < V; j++) v[j] = fmaf(t[j], gg[j], v[j]);
        } else {
#pragma unroll
            for (int j = 0; j < V; j++) v[j] += t[j];
        }
        r = kf_pack<T, V>(v); /* the one rounding of the sum */
        kf_str<T, AL>(sr + j0, n, r);
    }
    return r;
}

/* f32 LayerNorm rows carry the mean's low part (header: KF_LN_MEAN_LO). */
#define KF_LN_MEAN_LO(T) (sizeof(T) == 4)

/* The row mean m from the group's sum. f32 rows (KF_LN_MEAN_LO) round it on
 * its own (KF_FMUL_RN): nvcc otherwise contracted sum * inv_D into some of
 * the subtractions x - m and not others (H100, kf_norm_fast's peeled AdaLN
 * rows: the second pass's deviations from the exact product, the outputs'
 * from the rounded m, so c missed m's rounding, up to 5e-5 at x ~ 1000; the
 * emulator, compiled without contraction, passed). 16-bit rows: as before. */
template <typename T>
static __device__ __forceinline__ float kf_ln_mean(float sum, float inv_D)
{
    if (KF_LN_MEAN_LO(T)) return KF_FMUL_RN(sum, inv_D);
    return sum * inv_D;
}

/* The second pass's sums of an f32 LayerNorm row, reduced over the group:
 * a2 = sum (x - mean)^2 and s1 = sum (x - mean); returns the variance times D,
 * sum (x - mean)^2 - D c^2, with c = s1 / D, the mean's low part, in *mean_lo. */
static __device__ __forceinline__ float kf_ln_var_lo(float a2, float s1, float inv_D,
                                                     float *mean_lo)
{
    *mean_lo = s1 * inv_D;
    return fmaxf(fmaf(-s1, *mean_lo, a2), 0.0f);
}

/* Output chunk: normalize, weight/bias/modulation, store. */
template <typename T, int V, bool AL>
static __device__ __forceinline__ void kf_norm_out(const kf_norm_p &p, float mean, float mean_lo,
                                                   float rstd,
                                                   const void *scr, const void *shr, T *yr,
                                                   int j0, int n, const float (&v)[V], int z)
{
    float o[V], t[V];
#pragma unroll
    for (int j = 0; j < V; j++) {
        o[j] = ((v[j] - mean) - mean_lo) * rstd;
        if (p.llama) o[j] = kf_round<T>(o[j]);
    }
    if (p.w) {
        kf_ldp<T, AL>(p.w, p.wdt, j0 + z, n, t);
        if (p.offset != 0.0f) { /* uniform: a branch */
#pragma unroll
            for (int j = 0; j < V; j++) t[j] += p.offset;
        }
#pragma unroll
        for (int j = 0; j < V; j++) o[j] *= t[j];
    }
    if (p.b) {
        kf_ldp<T, AL>(p.b, p.bdt, j0 + z, n, t);
#pragma unroll
        for (int j = 0; j < V; j++) o[j] += t[j];
    }
    if (scr) {
        kf_ldp<T, AL>(scr, p.scdt, j0 + z, n, t);
#pragma unroll
        for (int j = 0; j < V; j++) o[j] *= 1.0f + t[j];
    }
    if (shr) {
        kf_ldp<T, AL>(shr, p.shdt, j0 + z, n, t);
#pragma unroll
        for (int j = 0; j < V; j++) o[j] += t[j];
    }
    kf_st<T, V, AL>(yr + j0, n, o);
}

/* K > 0: the row's chunks lane + k*G (k < K) stay in registers.
 * K == 0: streaming, chunks lane, lane + G, ... re-read per pass. */
template <typename T, bool AL, int K>
__global__ void __launch_bounds__(512, 1) kf_norm_kernel(kf_norm_p p)
{
    const int V = 16 / sizeof(T);
    const int G = p.G;
    const int grp = (int)threadIdx.x / G;
    const int lane = (int)threadIdx.x - grp * G;
    const int RPB = (int)blockDim.x / G;
    const int D = (int)p.D; /* < 2^31 - 16, checked at launch */
    const int nch = (D + V - 1) / V;
    const float fD = (float)D;

    for (int64_t base = (int64_t)blockIdx.x * RPB; base < p.rows;
         base += (int64_t)gridDim.x * RPB) {
        const int64_t row = base + grp;
        const bool act = row < p.rows;
        const kf_ridx ri = kf_row_index(act ? row : 0, p.s1, p.s2);
        const T *xr = (const T *)p.x + kf_off(p.xs, ri);
        const T *ar = p.a ? (const T *)p.a + kf_off(p.as, ri) : (const T *)0;
        const void *gr = p.g ? (const void *)((const char *)p.g +
                                              kf_off(p.gs, ri) * (p.gdt == KF_F32 ? 4 : 2))
                             : (const void *)0;
        T *sr = p.sum ? (T *)p.sum + kf_off(p.ss, ri) : (T *)0;
        T *yr = (T *)p.y + kf_off(p.ys, ri);
        const void *scr = p.scale ? (const void *)((const char *)p.scale +
                                                   kf_off(p.scs, ri) * (p.scdt == KF_F32 ? 4 : 2))
                                  : (const void *)0;
        const void *shr = p.shift ? (const void *)((const char *)p.shift +
                                                   kf_off(p.shs, ri) * (p.shdt == KF_F32 ? 4 : 2))
                                  : (const void *)0;
        float mean = 0.0f, mean_lo = 0.0f, rstd;

        if (K > 0) {
            uint4 rc[K > 0 ? K : 1]; /* the row, raw, in registers */
            float acc = 0.0f;
#pragma unroll
            for (int k = 0; k < K; k++) {
                int c = lane + k * G;
                rc[k] = make_uint4(0u, 0u, 0u, 0u);
                if (act && c < nch) {
                    int j0 = c * V;
                    int n = D - j0 < V ? D - j0 : V;
                    rc[k] = kf_norm_in<T, V, AL>(p, xr, ar, gr, sr, j0, n);
                }
            }
#pragma unroll
            for (int k = 0; k < K; k++) {
                float v[V];
                kf_unpack<T, V>(rc[k], v);
#pragma unroll
                for (int j = 0; j < V; j++) acc += p.layer ? v[j] : v[j] * v[j];
            }
            acc = kf_group_reduce<KF_RED_SUM>(acc, G, grp);
#pragma unroll
            for (int k = 0; k < K; k++) kf_opaque(rc[k]);
            if (p.layer) {
                mean = acc / fD;
                float a2 = 0.0f, s1 = 0.0f;
#pragma unroll
                for (int k = 0; k < K; k++) {
                    int c = lane + k * G;
                    float v[V];
                    kf_unpack<T, V>(rc[k], v);
#pragma unroll
                    for (int j = 0; j < V; j++) {
                        float d = v[j] - mean;
                        if (c * V + j < D) {
                            a2 += d * d;
                            if (KF_LN_MEAN_LO(T)) s1 += d;
                        }
                    }
                }
                acc = kf_group_reduce<KF_RED_SUM>(a2, G, grp);
                if (KF_LN_MEAN_LO(T))
                    acc = kf_ln_var_lo(acc, kf_group_reduce<KF_RED_SUM>(s1, G, grp), 1.0f / fD,
                                       &mean_lo);
            }
            rstd = rsqrtf(acc / fD + p.eps);
            const int z = kf_zero_after(p.zero, rstd);
#pragma unroll
            for (int k = 0; k < K; k++) kf_opaque(rc[k]);
#pragma unroll
            for (int k = 0; k < K; k++) {
                int c = lane + k * G;
                if (act && c < nch) {
                    int j0 = c * V;
                    int n = D - j0 < V ? D - j0 : V;
                    float v[V];
                    kf_unpack<T, V>(rc[k], v);
                    kf_norm_out<T, V, AL>(p, mean, mean_lo, rstd, scr, shr, yr, j0, n, v, z);
                }
            }
        } else {
            /* pass 1: input (and the residual sum, stored), sum or sum of squares */
            float acc = 0.0f, v[V];
            if (act) {
                for (int c = lane; c < nch; c += G) {
                    int j0 = c * V;
                    int n = D - j0 < V ? D - j0 : V;
                    kf_unpack<T, V>(kf_norm_in<T, V, AL>(p, xr, ar, gr, sr, j0, n), v);
#pragma unroll
                    for (int j = 0; j < V; j++) acc += p.layer ? v[j] : v[j] * v[j];
                }
            }
            acc = kf_group_reduce<KF_RED_SUM>(acc, G, grp);
            /* later passes read the stored sum when there was an add */
            const T *src = sr ? (const T *)sr : xr;
            if (p.layer) {
                mean = acc / fD;
                float a2 = 0.0f, s1 = 0.0f;
                if (act) {
                    for (int c = lane; c < nch; c += G) {
                        int j0 = c * V;
                        int n = D - j0 < V ? D - j0 : V;
                        kf_ld<T, V, AL>(src + j0, n, v);
#pragma unroll
                        for (int j = 0; j < V; j++) {
                            float d = v[j] - mean;
                            if (j < n) {
                                a2 += d * d;
                                if (KF_LN_MEAN_LO(T)) s1 += d;
                            }
                        }
                    }
                }
                acc = kf_group_reduce<KF_RED_SUM>(a2, G, grp);
                if (KF_LN_MEAN_LO(T))
                    acc = kf_ln_var_lo(acc, kf_group_reduce<KF_RED_SUM>(s1, G, grp), 1.0f / fD,
                                       &mean_lo);
            }
            rstd = rsqrtf(acc / fD + p.eps);
            const int z = kf_zero_after(p.zero, rstd);
            if (act) {
                for (int c = lane; c < nch; c += G) {
                    int j0 = c * V;
                    int n = D - j0 < V ? D - j0 : V;
                    kf_ld<T, V, AL>(src + j0, n, v);
                    kf_norm_out<T, V, AL>(p, mean, mean_lo, rstd, scr, shr, yr, j0, n, v, z);
                }
            }
        }
    }
}

#define KF_NF_ADD 1
#define KF_NF_MOD 2
#define KF_NF_LN 4
#define KF_NF_LLAMA 8 /* round the normalized value to T before the weight */

/* the row chunk at element e0 (ALN 1: full and aligned; ALN 2: peeled) */
template <typename T, int ALN>
static __device__ __forceinline__ uint4 kf_nld(const T *r, int e0, int D)
{
    if (ALN == 1) return kf_ld16_stream(reinterpret_cast<const uint4 *>(r + e0));
    return kf_ldr_m<T>(r, e0, D, 0u);
}

template <typename T, int ALN>
static __device__ __forceinline__ void kf_nst(T *r, int e0, int D, uint4 v)
{
    if (ALN == 1) kf_st16_stream(reinterpret_cast<uint4 *>(r + e0), v);
    else kf_str_m<T>(r, e0, D, v);
}

/* parameter chunk at element e0; peeled rows (ALN 2, phase m): aligned
 * loads and selects when every parameter starts 16-byte aligned (pal), the
 * row is 16-bit and the kernel has no modulation (SEL: the modulated peeled
 * kernels would spill with the select code of four parameters, and their
 * per-batch rows are rarely 16-byte aligned at odd D; so would the add
 * kernels with 8 chunks per thread), element loads otherwise */
#define KF_NORM_SEL(K, F) (!((F) & KF_NF_MOD) && !((K) == 8 && ((F) & KF_NF_ADD)))
template <typename T, int ALN, bool SEL>
static __device__ __forceinline__ void kf_nldp(const void *base, int dt, int e0, int m, int D,
                                               int pal, float (&v)[16 / sizeof(T)])
{
    const int V = 16 / sizeof(T);
    if (ALN == 1) kf_ldp<T, true>(base, dt, e0, V, v);
    else if (SEL && V == 8 && pal) kf_ldpm_al(base, dt, e0, m, D, *reinterpret_cast<float (*)[8]>(&v[0]));
    else kf_ldpm<V>(base, dt, e0, D, v);
}

/* o *= w for one chunk, w's values in t (the Gemma offset (1 + w) added
 * first; uniform, so a branch) */
template <int F, int V>
static __device__ __forceinline__ void kf_norm_times_weight(const kf_norm_p &p, float (&o)[V],
                                                            float (&t)[V])
{
    if (!(F & KF_NF_LLAMA) && p.offset != 0.0f) {
#pragma unroll
        for (int j = 0; j < V; j++) t[j] += p.offset;
    }
#pragma unroll
    for (int j = 0; j < V; j++) o[j] *= t[j];
}

/* Two blocks of 512 per SM (<= 64 registers) except where that would spill:
 * K = 4 with the add, K = 4 peeled (ALN 2) rows with modulation, and peeled
 * rows with the add (sm_80: 2 chunks with modulation). */
#define KF_NORM_MIN_BLOCKS(K, ALN, F)                                                      \
    (((ALN) == 2 && ((F) & KF_NF_ADD)) ? 1                                                 \
     : ((K) <= 2 || ((K) == 4 && !((F) & KF_NF_ADD) && !((ALN) == 2 && ((F) & KF_NF_MOD)))) \
         ? 2                                                                               \
         : 1)
/* Peeled rows with the add at 8 chunks per thread (odd D > 16384) have no
 * fast kernel (its sm_80 code spilled): kf_norm_launch sends them to
 * kf_norm_kernel, and kf_norm_fast_launch instantiates nothing for them. */
#define KF_NORM_HAS_FAST(K, ALN, ADD) (!((K) == 8 && (ALN) == 2 && (ADD)))
/* LayerNorm rows of 4 chunks per thread (bf16, f32) run under a 48-register
 * cap (KF_NORM_CAP48 below); their reductions re-read threadIdx.x, which
 * keeps them free of spills there */
#define KF_NORM_LN48(T, K, ALN, F) \
    ((ALN) == 1 && (K) == 4 && (F) == KF_NF_LN && (sizeof(T) == 4 || kf_is_bf16<T>::value))
/* RMS AdaLN rows of 4 chunks (bf16) run under the 48-register cap too; they
 * re-derive grp / lane from a fresh %tid.x per row and the lane again after
 * the reduction, so no chunk offset is held across the row loop or the
 * reduction (those were what spilled) */
#define KF_NORM_AN48(T, K, ALN, F) \
    ((ALN) == 1 && (K) == 4 && (F) == KF_NF_MOD && kf_is_bf16<T>::value)
/* RMSNorm rows of 4 chunks (bf16, f32; plain or Llama rounding) run under
 * 40 registers (six 256-thread blocks per SM, from four at 55 registers),
 * with grp / lane afresh as above; f16 spills there. H200, two A/B runs of
 * three rounds, bf16: 8192 x 3584 1.03 -> 1.00 x copy, 8192 x 769 1.05 ->
 * 1.04, 8192 x 8192 1.06 -> 1.05, 8192 x 4096 1.07 -> 1.06; f32 the same or
 * 0.01 better. */
#define KF_NORM_RMS40(T, K, ALN, F)                                      \
    ((ALN) == 1 && (K) == 4 && ((F) == 0 || (F) == KF_NF_LLAMA) &&       \
     (sizeof(T) == 4 || kf_is_bf16<T>::value))
/* FR: grp / lane afresh per row and after the reduction (the capped
 * kernels: KF_NORM_AN48, KF_NORM_RMS40) */
template <typename T, int K, int ALN, int F, bool FR>
static __device__ __forceinline__ void kf_norm_fast_body(const kf_norm_p &p)
{
    const int V = 16 / sizeof(T);
    const int G = p.G;
    const int grp0 = (int)kf_fdiv_q(threadIdx.x, p.fG);
    const int lane0 = (int)threadIdx.x - grp0 * G;
    const int RPB = p.RPB;
    const int D = (int)p.D;
    const int nch = (D + V - 1) / V;

    for (int64_t base = (int64_t)blockIdx.x * RPB; base < p.rows;
         base += (int64_t)gridDim.x * RPB) {
        int grp = grp0, lane = lane0;
        if (FR) grp = kf_group_fresh(p.fG, G, &lane);
        const int64_t row = base + grp;
        const bool act = row < p.rows;
        const kf_ridx ri = kf_row_index_f(act ? row : 0, p.f1, p.f2);
        const T *xr = (const T *)p.x + kf_off(p.xs, ri);
        const int m = ALN == 2 ? kf_row_phase<T>(xr) : 0;
        uint4 rc[K]; /* the row, raw, in registers */

        /* ---- loads: every chunk of the row before any use */
        if (F & KF_NF_ADD) {
            const T *ar = (const T *)p.a + kf_off(p.as, ri);
            T *sr = (T *)p.sum + kf_off(p.ss, ri);
            const void *gr = p.g ? (const void *)((const char *)p.g +
                                                  kf_off(p.gs, ri) * (p.gdt == KF_F32 ? 4 : 2))
                                 : (const void *)0;
            uint4 ra[K];
#pragma unroll
            for (int k = 0; k < K; k++) {
                const int c = lane + k * G;
                const int e0 = c * V - m;
                rc[k] = make_uint4(0u, 0u, 0u, 0u);
                ra[k] = rc[k];
                if (act && (ALN == 1 ? c < nch : e0 < D)) {
                    rc[k] = kf_nld<T, ALN>(xr, e0, D);
                    ra[k] = kf_nld<T, ALN>(ar, e0, D);
                }
            }
#pragma unroll
            for (int k = 0; k < K; k++) {
                const int c = lane + k * G;
                const int e0 = c * V - m;
                if (act && (ALN == 1 ? c < nch : e0 < D)) {
                    float v[V], t[V];
                    kf_unpack<T, V>(rc[k], v);
                    kf_unpack<T, V>(ra[k], t);
                    if (gr) {
                        float gg[V];
                        kf_nldp<T, ALN, KF_NORM_SEL(K, F)>(gr, p.gdt, e0, m, D, p.pal, gg);
                        /* x + a * gate with one rounding (an FMA), as the
                         * reference: a multiply and an add in two branches
                         * round twice, and where x + a * gate cancels that
                         * error is all that is left of the sum */
#pragma unroll
                        for (int j = 0; j < V; j++) v[j] = fmaf(t[j], gg[j], v[j]);
                    } else {
#pragma unroll
                        for (int j = 0; j < V; j++) v[j] += t[j];
                    }
                    rc[k] = kf_pack<T, V>(v); /* the one rounding of the sum */
                    kf_nst<T, ALN>(sr, e0, D, rc[k]);
                }
            }
        } else {
#pragma unroll
            for (int k = 0; k < K; k++) {
                const int c = lane + k * G;
                const int e0 = c * V - m;
                rc[k] = make_uint4(0u, 0u, 0u, 0u);
                if (act && (ALN == 1 ? c < nch : e0 < D)) rc[k] = kf_nld<T, ALN>(xr, e0, D);
            }
        }

        /* one chunk per thread (short rows): the weight chunk is loaded with
         * the row, so that its latency overlaps the reduction's (launches of
         * one wave: each thread's one row waits on both in turn otherwise);
         * V more f32 registers, which rows of more chunks cannot spare.
         * H200, 2 rounds, rms_norm 8192 x 111 (16-bit peeled rows, one
         * chunk per lane): bf16 2.06 -> 1.96 x copy, f16 2.04 -> 1.99 */
        float wk[K == 1 ? V : 1];
        if constexpr (K == 1) {
            const int e0 = lane * V - m;
            if (p.w && act && (ALN == 1 ? lane < nch : e0 < D))
                kf_nldp<T, ALN, KF_NORM_SEL(K, F)>(p.w, p.wdt, e0, m, D, p.pal, wk);
        }

        /* ---- statistics (padding elements are +0: they add nothing) */
        float mean = 0.0f, mean_lo = 0.0f, var;
        {
            /* RMS: the sum of squares; LayerNorm: the mean, then the squared
             * deviations from it (two reductions, no cancellation) */
            const bool lay = ALN == 1 ? (F & KF_NF_LN) != 0 : p.layer != 0;
            float acc = 0.0f;
#pragma unroll
            for (int k = 0; k < K; k++) {
                float v[V];
                kf_unpack<T, V>(rc[k], v);
#pragma unroll
                for (int j = 0; j < V; j++) acc = lay ? acc + v[j] : fmaf(v[j], v[j], acc);
            }
            /* keep the row packed across the reduction (4 registers per chunk,
             * not the 8 f32 values the compiler would otherwise keep) */
#pragma unroll
            for (int k = 0; k < K; k++) kf_opaque(rc[k]);
            acc = kf_group_reduce<KF_RED_SUM, KF_NORM_LN48(T, K, ALN, F) || FR>(acc, G, grp);
            if (lay) {
                mean = kf_ln_mean<T>(acc, p.inv_D);
                float a2 = 0.0f, s1 = 0.0f;
#pragma unroll
                for (int k = 0; k < K; k++) {
                    const int c = lane + k * G;
                    const int e0 = c * V - m;
                    float v[V];
                    kf_unpack<T, V>(rc[k], v);
                    /* ALN 1: a chunk past the row is all +0: subtracting 0
                     * instead of the mean makes its deviations 0 (one select
                     * per chunk, not per element) */
                    const float mk = (ALN == 1 && c >= nch) ? 0.0f : mean;
#pragma unroll
                    for (int j = 0; j < V; j++) {
                        float d = v[j] - mk;
                        if (ALN != 1) {
                            const bool ok = e0 + j >= 0 && e0 + j < D;
                            d = ok ? d : 0.0f;
                        }
                        a2 = fmaf(d, d, a2);
                        if (KF_LN_MEAN_LO(T)) s1 += d;
                    }
                }
#pragma unroll
                for (int k = 0; k < K; k++) kf_opaque(rc[k]);
                acc = kf_group_reduce<KF_RED_SUM, KF_NORM_LN48(T, K, ALN, F)>(a2, G, grp);
                if (KF_LN_MEAN_LO(T)) {
                    const float s1_all =
                        kf_group_reduce<KF_RED_SUM, KF_NORM_LN48(T, K, ALN, F)>(s1, G, grp);
                    acc = kf_ln_var_lo(acc, s1_all, p.inv_D, &mean_lo);
                }
            }
            var = acc * p.inv_D;
        }
        const float rstd = rsqrtf(var + p.eps);
        /* parameter loads addressed through z (0, but only once rstd is
         * known): hoisted above the reduction they would hold K x V more
         * f32 registers (fewer warps per SM) */
        const int z = kf_zero_after(p.zero, rstd);

        /* ---- output; the conditioning pointers are made only now, fewer
         * registers live across the reduction */
        if (FR) kf_group_fresh(p.fG, G, &lane); /* again: nothing held across the reduction */
        T *yr = (T *)p.y + kf_off(p.ys, ri);
        const void *scr = 0, *shr = 0;
        if (F & KF_NF_MOD) {
            scr = (const void *)((const char *)p.scale +
                                 kf_off(p.scs, ri) * (p.scdt == KF_F32 ? 4 : 2));
            if (p.shift)
                shr = (const void *)((const char *)p.shift +
                                     kf_off(p.shs, ri) * (p.shdt == KF_F32 ? 4 : 2));
        }
#pragma unroll
        for (int k = 0; k < K; k++) {
            const int c = lane + k * G;
            const int e0 = c * V - m;
            if (act && (ALN == 1 ? c < nch : e0 < D)) {
                float o[V], t[V];
                kf_unpack<T, V>(rc[k], o);
                /* RMS: mean is 0, one multiply */
                const bool lay = ALN == 1 ? (F & KF_NF_LN) != 0 : p.layer != 0;
#pragma unroll
                for (int j = 0; j < V; j++) {
                    o[j] = lay ? ((o[j] - mean) - mean_lo) * rstd : o[j] * rstd;
                    if (F & KF_NF_LLAMA) o[j] = kf_round<T>(o[j]);
                }
                if (p.w) {
                    if constexpr (K == 1) {
#pragma unroll
                        for (int j = 0; j < V; j++) t[j] = wk[j];
                    } else {
                        kf_nldp<T, ALN, KF_NORM_SEL(K, F)>(p.w, p.wdt, e0 + z, m, D, p.pal, t);
                    }
                    kf_norm_times_weight<F, V>(p, o, t);
                }
                if (p.b) {
                    kf_nldp<T, ALN, KF_NORM_SEL(K, F)>(p.b, p.bdt, e0 + z, m, D, p.pal, t);
#pragma unroll
                    for (int j = 0; j < V; j++) o[j] += t[j];
                }
                if (F & KF_NF_MOD) {
                    kf_nldp<T, ALN, KF_NORM_SEL(K, F)>(scr, p.scdt, e0 + z, m, D, p.pal, t);
                    /* o * (1 + scale), one rounding */
#pragma unroll
                    for (int j = 0; j < V; j++) o[j] = fmaf(o[j], t[j], o[j]);
                    if (shr) {
                        kf_nldp<T, ALN, KF_NORM_SEL(K, F)>(shr, p.shdt, e0 + z, m, D, p.pal, t);
#pragma unroll
                        for (int j = 0; j < V; j++) o[j] += t[j];
                    }
                }
                kf_nst<T, ALN>(yr, e0, D, kf_pack<T, V>(o));
            }
        }
    }
}

/* Most kernels: two 512-thread blocks per SM (<= 64 registers). Capped at
 * 48 registers instead (sm_90; sm_80 keeps 64, KF_KERNEL_REGS_48), no
 * spill, bf16 and f32 (f16 would spill): the RMS AdaLN kernel of 2 chunks
 * per thread (launches of under three waves; five 256-thread blocks per SM
 * instead of four; H200, ada_norm 2 x 1320 x 2048: 1.48 -> 1.31 x copy) and
 * the LayerNorm kernel of 4 chunks (layer_norm 8192 x 4096: 1.22 -> 1.16,
 * two A/B runs) and, bf16 only, the RMS AdaLN kernel of 4 chunks (with the
 * lane re-read per row and after the reduction, KF_NORM_AN48: ada_norm
 * 2 x 8064 x 2048 1.15 -> 1.12, five rounds; without that it spilled 52
 * bytes and lost, 1.15 -> 1.23). RMSNorm rows of 4 chunks: 48 registers
 * without the fresh lane gained nothing; 40 with it do (KF_NORM_RMS40). */
#define KF_NORM_CAP48(T, K, ALN, F)                                                         \
    (((ALN) == 1 && (K) == 2 && (F) == KF_NF_MOD && (sizeof(T) == 4 || kf_is_bf16<T>::value)) || \
     KF_NORM_LN48(T, K, ALN, F) || KF_NORM_AN48(T, K, ALN, F))
template <typename T, int K, int ALN, int F>
__global__ void __launch_bounds__(512, KF_NORM_MIN_BLOCKS(K, ALN, F)) kf_norm_fast(kf_norm_p p)
{
    kf_norm_fast_body<T, K, ALN, F, false>(p);
}
template <typename T, int K, int ALN, int F>
__global__ void KF_KERNEL_REGS_48 kf_norm_fast48(kf_norm_p p)
{
    kf_norm_fast_body<T, K, ALN, F, KF_NORM_AN48(T, K, ALN, F)>(p);
}
template <typename T, int K, int ALN, int F>
__global__ void KF_KERNEL_REGS_40 kf_norm_fast40(kf_norm_p p)
{
    kf_norm_fast_body<T, K, ALN, F, true>(p);
}
/* kf_norm_peel<T, K, F>: the lean kernel for rows that do not start 16-byte
 * aligned (odd D), when the activations share x's row phase, there is no
 * modulation or gate, and weight / bias start 16-byte aligned (rms_norm,
 * add_rms_norm, layer_norm; 16-bit or f32 rows, V = 16 / element size per
 * chunk). ncu had the ALN 2 kernel issue-bound at twice the instructions
 * per element of the aligned one (bounds branches per chunk for every
 * access, BENCHMARKS.md fourth set). Here a row of phase m (kf_row_phase)
 * splits once per row into
 *   a head of h = (V - m) % V elements (D >= 32 V here),
 *   nI interior chunks, chunk i = elements [h + V i, h + V (i + 1)): 16-byte
 *     aligned in x / a / sum / y, and every aligned parameter chunk under
 *     it lies inside the vector (it ends by element V floor(D / V) - 1), so
 *     every x / a / sum / y access is a whole 16-byte one, and the
 *     parameters load with no bounds test (kf_ldpm_in),
 *   a tail of the rest (under 2 V elements with the head),
 * and the head and tail elements go one per lane (G >= 16, checked at
 * launch). Rows stream (ld/st.global.cs) as in ALN 1. LayerNorm is a
 * template flag (KF_NF_LN): RMS rows carry no mean. RMS rows whose weight
 * has their dtype and no offset ("typed") take it with one test per row
 * instead of the presence / dtype / offset tests per chunk: ncu had this
 * kernel issuing 79 % of cycles on 36 % more instructions per element than
 * the aligned lean kernel. H200, kfuse bench, rms_norm 8192 x 5125: bf16
 * 1.07 -> 1.06 (template LayerNorm) -> 1.05 (typed weight), f16 1.07 ->
 * 1.05-1.06, f32 1.07 -> 1.06; 8192 x 769 bf16 1.05 -> 0.96-1.01. A typed
 * weight chunk loads as 1-3 aligned pieces realigned in code specialised
 * per head h (kf_with_head, kf_ld_param_shifted), where four or five word
 * loads per chunk took 4x the L1 sectors of the aligned kernel (ncu). H200,
 * 2 rounds against word loads: rms_norm 8192 x 5125 bf16 1.12 -> 1.10-1.11
 * x copy, f32 1.10 -> 1.08-1.09; 8192 x 769 bf16 / f16 1.28 -> 1.25, f32
 * 1.18 -> 1.16. The head / tail elements store before the chunks (their
 * value is then free). */
#define KF_PEEL_MIN_G 16
/* Rows of at least KF_PEEL_ROT_MIN_G lanes rotate their interior chunks over
 * the lanes by the first one's 16-byte slot in its 128-byte line (rot), so
 * that each warp's 16-byte accesses cover whole lines (G a multiple of 8)
 * where they straddled one more. H200, 2 rounds: rms_norm 8192 x 5125 bf16
 * / f16 1.10 -> 1.09 x copy, f32 1.08 -> 1.08; one-warp rows lost (D 769
 * bf16 1.25 -> 1.27), so they keep rot 0. */
#define KF_PEEL_ROT_MIN_G 64
/* Peeled rows of 4 chunks without the add run under 48 registers: f32 rows
 * of D 5125 take 352 threads, so at 64 registers two rows per SM were in
 * flight, three at 48; 16-bit rows (160 threads at D 5125) six at 60, eight
 * at 48. 16-bit rows re-derive their group / lane from a fresh %tid.x per
 * row and the row's geometry after the reductions (kf_peel_row_of), so that
 * none of it is held across them (what spilled). f32 rows did so too once
 * the weight came in pieces per head (without it they spilled 60 bytes; an
 * earlier form had f32 D 5125 1.07 -> 1.11 x copy with it, this one 1.09 ->
 * 1.08-1.09 against word loads without it). */
#define KF_PEEL48(T, K, F) ((K) == 4 && !((F) & KF_NF_ADD))
/* 16-bit peeled rows with Llama rounding: the weight product packed in T,
 * as KF_LEAN_PACKED_WEIGHT in the aligned lean kernel (no per-element
 * rounding to T and back, no weight unpack). These kernels take only a
 * weight of the rows' dtype (kf_norm_launch: without a weight the Llama
 * rounding is the output's own and the flag is dropped; a weight of another
 * dtype goes to kf_norm_fast). SASS (sm_90, bf16, 4 chunks): 1144 -> 680
 * instructions, 33 -> 1 F2F; registers 48 -> 47 (2 chunks 56 -> 47). H200,
 * 2 rounds: rms_norm 8192 x 769 bf16 1.35 -> 1.27-1.28 x copy (10.09 ->
 * 9.56 us), f16 1.33 -> 1.27-1.28; 8192 x 5125 1.13 -> 1.12 only (predicted
 * ~1.06-1.08 from the output phase's instructions: what holds D 5125 is
 * not there). */
#define KF_PEEL_PACKED_WEIGHT(T, F) (sizeof(T) == 2 && ((F) & KF_NF_LLAMA) && !((F) & KF_NF_LN))
/* a peeled row's geometry (kf_norm_peel): where it starts, its head of h
 * elements, nI interior chunks, their rotation over the lanes (rot,
 * kf_peel_chunk), and this lane's head / tail element ee (e < h: element e;
 * else e + V nI), if it has one (ext) */
template <typename T> struct kf_peel_row {
    kf_ridx ri;
    const T *xr;
    int h, nI, ee, rot;
    bool act, ext;
};
template <typename T>
static __device__ __forceinline__ kf_peel_row<T> kf_peel_row_of(const kf_norm_p &p, int64_t row, int lane, int D)
{
    const int V = 16 / sizeof(T);
    kf_peel_row<T> r;
    r.act = row < p.rows;
    r.ri = kf_row_index_f(r.act ? row : 0, p.f1, p.f2);
    r.xr = (const T *)p.x + kf_off(p.xs, r.ri);
    const int m = kf_row_phase<T>(r.xr);
    r.h = min((V - m) & (V - 1), D);
    r.nI = max(0, D / V - (m ? 1 : 0));
    r.ext = r.act && lane < D - V * r.nI;
    r.ee = lane < r.h ? lane : lane + V * r.nI;
    r.rot = p.G >= KF_PEEL_ROT_MIN_G ? (int)(((uintptr_t)(r.xr + r.h) >> 4) & 7) : 0;
    return r;
}
/* the interior chunk of a lane's k-th slot: lane + k G, less the row's
 * rotation (lanes it takes below 0 at k = 0 take the chunks from K G on) */
template <typename T, int K>
static __device__ __forceinline__ int kf_peel_chunk(const kf_peel_row<T> &r, int lane, int k, int G)
{
    const int i = lane - r.rot + k * G;
    return (k == 0 && i < 0) ? i + K * G : i;
}
template <typename T, int K, int F>
static __device__ __forceinline__ void kf_norm_peel_body(const kf_norm_p &p)
{
    const int V = 16 / sizeof(T);
    const bool FR = KF_PEEL48(T, K, F); /* fresh geometry */
    const int G = p.G;
    const int grp0 = (int)kf_fdiv_q(threadIdx.x, p.fG);
    const int lane0 = (int)threadIdx.x - grp0 * G;
    const int RPB = p.RPB;
    const int D = (int)p.D;
    const bool lay = (F & KF_NF_LN) != 0;

    for (int64_t base = (int64_t)blockIdx.x * RPB; base < p.rows;
         base += (int64_t)gridDim.x * RPB) {
        int grp = grp0, lane = lane0;
        if (FR) grp = kf_group_fresh(p.fG, G, &lane);
        kf_peel_row<T> r = kf_peel_row_of<T>(p, base + grp, lane, D);
        uint4 rc[K];
        float xe = 0.0f;

        /* ---- loads: every chunk of the row before any use */
        if (F & KF_NF_ADD) {
            const T *ar = (const T *)p.a + kf_off(p.as, r.ri);
            T *sr = (T *)p.sum + kf_off(p.ss, r.ri);
            uint4 ra[K];
            float ae = 0.0f;
#pragma unroll
            for (int k = 0; k < K; k++) {
                const int i = kf_peel_chunk<T, K>(r, lane, k, G);
                rc[k] = make_uint4(0u, 0u, 0u, 0u);
                ra[k] = rc[k];
                if (r.act && i < r.nI) {
                    rc[k] = kf_ld16_stream(reinterpret_cast<const uint4 *>(r.xr + r.h + V * i));
                    ra[k] = kf_ld16_stream(reinterpret_cast<const uint4 *>(ar + r.h + V * i));
                }
            }
            if (r.ext) {
                xe = kf_to_f32(r.xr[r.ee]);
                ae = kf_to_f32(ar[r.ee]);
            }
#pragma unroll
            for (int k = 0; k < K; k++) {
                const int i = kf_peel_chunk<T, K>(r, lane, k, G);
                if (r.act && i < r.nI) {
                    rc[k] = kf_add_packed<T>(rc[k], ra[k]);
                    kf_st16_stream(reinterpret_cast<uint4 *>(sr + r.h + V * i), rc[k]);
                }
            }
            if (r.ext) {
                const T se = kf_from_f32<T>(xe + ae);
                sr[r.ee] = se;
                xe = kf_to_f32(se);
            }
        } else {
#pragma unroll
            for (int k = 0; k < K; k++) {
                const int i = kf_peel_chunk<T, K>(r, lane, k, G);
                rc[k] = make_uint4(0u, 0u, 0u, 0u);
                if (r.act && i < r.nI) rc[k] = kf_ld16_stream(reinterpret_cast<const uint4 *>(r.xr + r.h + V * i));
            }
            if (r.ext) xe = kf_to_f32(r.xr[r.ee]);
        }

        /* ---- statistics (chunks past the row and idle lanes hold +0) */
        float mean = 0.0f, mean_lo = 0.0f, var;
        {
            float acc = 0.0f;
            if (lay) {
#pragma unroll
                for (int k = 0; k < K; k++) {
                    float v[V];
                    kf_unpack<T, V>(rc[k], v);
#pragma unroll
                    for (int j = 0; j < V; j++) acc += v[j];
                }
                acc += xe;
            } else {
#pragma unroll
                for (int k = 0; k < K; k++) {
                    float v[V];
                    kf_unpack<T, V>(rc[k], v);
#pragma unroll
                    for (int j = 0; j < V; j++) acc = fmaf(v[j], v[j], acc);
                }
                acc = fmaf(xe, xe, acc);
            }
#pragma unroll
            for (int k = 0; k < K; k++) kf_opaque(rc[k]);
            acc = kf_group_reduce<KF_RED_SUM, FR>(acc, G, grp);
            if (lay) {
                mean = kf_ln_mean<T>(acc, p.inv_D);
                float a2 = 0.0f, s1 = 0.0f;
#pragma unroll
                for (int k = 0; k < K; k++) {
                    const int i = kf_peel_chunk<T, K>(r, lane, k, G);
                    float v[V];
                    kf_unpack<T, V>(rc[k], v);
                    /* a chunk past the row is all +0: subtracting 0 keeps
                     * its deviations 0 */
                    const float mk = (r.act && i < r.nI) ? mean : 0.0f;
#pragma unroll
                    for (int j = 0; j < V; j++) {
                        const float d = v[j] - mk;
                        a2 = fmaf(d, d, a2);
                        if (KF_LN_MEAN_LO(T)) s1 += d;
                    }
                }
                const float de = r.ext ? xe - mean : 0.0f;
                a2 = fmaf(de, de, a2);
                if (KF_LN_MEAN_LO(T)) s1 += de;
#pragma unroll
                for (int k = 0; k < K; k++) kf_opaque(rc[k]);
                acc = kf_group_reduce<KF_RED_SUM, FR>(a2, G, grp);
                if (KF_LN_MEAN_LO(T))
                    acc = kf_ln_var_lo(acc, kf_group_reduce<KF_RED_SUM, FR>(s1, G, grp), p.inv_D,
                                       &mean_lo);
            }
            var = acc * p.inv_D;
        }
        const float rstd = rsqrtf(var + p.eps);
        const int z = kf_zero_after(p.zero, rstd);
        if (FR) { /* the row's geometry afresh: not held across the reductions */
            grp = kf_group_fresh(p.fG, G, &lane);
            r = kf_peel_row_of<T>(p, base + grp, lane, D);
        }

        /* ---- output. RMS rows whose weight has the rows' dtype and no
         * offset, LayerNorm rows whose weight and bias have it (the usual
         * case, "typed"): parameter chunks as aligned pieces realigned by
         * the row's head h, in code specialised per h (kf_with_head: h is
         * uniform over the row's lanes), and no dtype or offset tests */
        T *yr = (T *)p.y + kf_off(p.ys, r.ri);
        const int tdt = kf_dtype_of<T>();
        const bool typed = (lay ? (p.w || p.b) && (!p.w || p.wdt == tdt) && (!p.b || p.bdt == tdt)
                                : p.w && p.wdt == tdt) &&
                           ((F & KF_NF_LLAMA) || p.offset == 0.0f);
        /* the head / tail element first: xe is free before the chunks */
        if (r.ext) {
            float o = lay ? ((xe - mean) - mean_lo) * rstd : xe * rstd;
            if (F & KF_NF_LLAMA) o = kf_round<T>(o);
            if (p.w) {
                float w = kf_ldp1(p.w, p.wdt, r.ee + z);
                if (!(F & KF_NF_LLAMA) && p.offset != 0.0f) w += p.offset;
                o *= w;
            }
            if (lay && p.b) o += kf_ldp1(p.b, p.bdt, r.ee + z);
            yr[r.ee] = kf_from_f32<T>(o);
        }
        if (KF_PEEL_PACKED_WEIGHT(T, F) || typed) {
            auto chunks = [&](auto head) {
                constexpr int H = decltype(head)::value;
#pragma unroll
                for (int k = 0; k < K; k++) {
                    const int i = kf_peel_chunk<T, K>(r, lane, k, G);
                    if (!(r.act && i < r.nI)) continue;
                    float o[V];
                    kf_unpack<T, V>(rc[k], o);
                    if constexpr ((F & KF_NF_LN) != 0) {
                        /* LayerNorm: weight and bias each where present */
                        float t[V];
#pragma unroll
                        for (int j = 0; j < V; j++) o[j] = ((o[j] - mean) - mean_lo) * rstd;
                        if (p.w) {
                            kf_unpack<T, V>(kf_ld_param_shifted<T, H>(p.w, i + z), t);
#pragma unroll
                            for (int j = 0; j < V; j++) o[j] *= t[j];
                        }
                        if (p.b) {
                            kf_unpack<T, V>(kf_ld_param_shifted<T, H>(p.b, i + z), t);
#pragma unroll
                            for (int j = 0; j < V; j++) o[j] += t[j];
                        }
                        kf_st16_stream(reinterpret_cast<uint4 *>(yr + r.h + V * i), kf_pack<T, V>(o));
                    } else {
#pragma unroll
                        for (int j = 0; j < V; j++) o[j] *= rstd;
                        const uint4 wc = kf_ld_param_shifted<T, H>(p.w, i + z);
                        if constexpr (KF_PEEL_PACKED_WEIGHT(T, F)) {
                            /* round(x * rstd) packed, times the weight's words */
                            kf_st16_stream(reinterpret_cast<uint4 *>(yr + r.h + V * i),
                                           kf_mul_packed16<T>(kf_pack<T, V>(o), wc));
                        } else {
                            float t[V];
                            kf_unpack<T, V>(wc, t);
#pragma unroll
                            for (int j = 0; j < V; j++) {
                                if (F & KF_NF_LLAMA) o[j] = kf_round<T>(o[j]);
                                o[j] *= t[j];
                            }
                            kf_st16_stream(reinterpret_cast<uint4 *>(yr + r.h + V * i), kf_pack<T, V>(o));
                        }
                    }
                }
            };
            kf_with_head<V>(r.h, chunks);
        } else {
#pragma unroll
            for (int k = 0; k < K; k++) {
                const int i = kf_peel_chunk<T, K>(r, lane, k, G);
                if (r.act && i < r.nI) {
                    float o[V], t[V];
                    kf_unpack<T, V>(rc[k], o);
#pragma unroll
                    for (int j = 0; j < V; j++) {
                        o[j] = lay ? ((o[j] - mean) - mean_lo) * rstd : o[j] * rstd;
                        if (F & KF_NF_LLAMA) o[j] = kf_round<T>(o[j]);
                    }
                    if (p.w) {
                        kf_ldpm_in<V>(p.w, p.wdt, r.h + V * i + z, t);
                        kf_norm_times_weight<F, V>(p, o, t);
                    }
                    if (lay && p.b) {
                        kf_ldpm_in<V>(p.b, p.bdt, r.h + V * i + z, t);
#pragma unroll
                        for (int j = 0; j < V; j++) o[j] += t[j];
                    }
                    kf_st16_stream(reinterpret_cast<uint4 *>(yr + r.h + V * i), kf_pack<T, V>(o));
                }
            }
        }
    }
}

template <typename T, int K, int F>
__global__ void __launch_bounds__(512, ((K) == 4 && ((F) & KF_NF_ADD)) ? 1 : 2)
    kf_norm_peel(kf_norm_p p)
{
    kf_norm_peel_body<T, K, F>(p);
}
template <typename T, int K, int F>
__global__ void KF_KERNEL_REGS_48 kf_norm_peel48(kf_norm_p p)
{
    kf_norm_peel_body<T, K, F>(p);
}

/* kf_norm_lean<T, K, F, WE>: the LLM rows alone (rms_norm, add_rms_norm;
 * F = 0 / KF_NF_ADD / KF_NF_LLAMA / both; layer_norm, F = KF_NF_LN; and
 * ada_norm, F = KF_NF_MOD [| KF_NF_LN], scale / shift of the rows' dtype,
 * their rows per token or per batch with the same strides, weight
 * optional):
 * rows 16-byte aligned with D % V == 0, each view's rows one stride apart
 * (row r at r * stride), a weight (and LayerNorm's bias, if any) of the
 * rows' own dtype. What kf_norm_fast decides at run time per chunk
 * (parameter dtype and alignment, modulation, the row's offset from three
 * strides) is fixed here, so a thread runs only the row's own work.
 * ncu, H200, rms_norm 8192 x 4096 bf16: kf_norm_fast40 executed 16 % more
 * instructions than Liger's Triton kernel (19.3 M against 16.6 M) and was
 * 4-9 % slower; at 2048 x 4096 (2 chunks per thread) 50 % more, 22 % slower.
 * WE: the weight chunks are loaded with the row, before the reduction (held
 * packed, 4 registers per chunk), instead of after it: rows of 2 chunks per
 * thread (H200, rms_norm 2048 x 4096 bf16: 1.14 -> 1.09 x copy; the general
 * kernel took 1.22; with the add, under 48 registers, add_rms_norm 2048 x
 * 4096: 1.08 -> 1.05); at 4 chunks it spills. AdaLN rows of 2 chunks
 * without the add (launches under three waves, kf_row_geometry) load their
 * scale and shift chunks with the row instead, under 48 registers, and
 * their optional weight after the reduction (H200, ada_norm 2 x 1320 x 2048
 * bf16: 1.20-1.21 -> 1.10 x copy, f16 1.19 -> 1.10). Not LayerNorm's bias,
 * and not at 4 chunks: forcing 2 chunks to get the preload lost (layer_norm
 * 8192 x 4096 1.10 -> 1.31, ada_norm 2 x 8064 x 2048 1.08 -> 1.13).
 * LayerNorm: the mean, then the squared deviations over the registers (two
 * reductions), as kf_norm_fast.
 * Output FMA forms (these kernels issue close to their limit: ncu, layer_norm
 * 8192 x 4096, 82 % of issue slots busy, 29 % more instructions than
 * rms_norm's 1.01 x copy): 16-bit LayerNorm rows take x rstd - mean rstd
 * (one FMA); at 2 chunks their weight and bias are one FMA too, and AdaLN
 * rows without a weight take x' (rstd (1 + scale)) + shift (two FMAs where
 * there were a multiply, an FMA and an add). H200, kfuse bench: ada_norm
 * 2 x 1320 x 2048 bf16 1.10 -> 1.05 x copy (f16 1.10 -> 1.04), layer_norm
 * 8192 x 4096 1.08 -> 1.07. The whole set at 4 chunks spilled (20-28 bytes
 * at 40 / 48 registers) and lost: layer_norm 1.14, ada_norm 2 x 8064 1.15.
 * 16-bit AdaLN rows of 4 chunks without a weight take the two FMAs word by
 * word (each 32-bit word unpacked, computed and packed again at once, so
 * few values are live): no spill, ada_norm 2 x 8064 x 2048 bf16 1.09 ->
 * 1.07, f16 1.08 -> 1.07. LayerNorm's weight-bias FMA written the same way
 * did not move layer_norm 8192 x 4096 (1.08 bf16, 1.07-1.08 f16): not kept. */
typedef struct kf_lean_p {
    const void *x, *a, *w, *b;             /* a: residual or NULL; b: bias or NULL */
    void *sum, *y;
    int64_t xs, as, ss, ys;                /* row strides (elements) */
    const void *sc, *sh;                   /* AdaLN scale, shift (or NULL) */
    kf_st3 scs;                            /* scale's strides over x's outer dims */
    int64_t shd;                           /* shift - scale (elements): same strides */
    kf_fdiv f1, f2;                        /* x's outer dims 1 and 2 (row -> index) */
    int64_t rows;
    int nch;                               /* 16-byte chunks per row */
    int G, RPB;                            /* threads per row, rows per block */
    kf_fdiv fG;
    float eps, inv_D, offset;              /* offset: Gemma's (1 + w), else 0 */
} kf_lean_p;

/* rows whose weight product runs packed in T (kf_mul_packed16): Llama
 * rounding, 16-bit rows. Per element: multiply, half a pack, half a packed
 * multiply, where the f32 form took a multiply, a rounding to T and back, the
 * weight's unpack, a multiply and half a pack (SASS, bf16, 4 chunks: 664 ->
 * 512 instructions). H200, bf16 rms_norm 2048 x 4096: 1.06 -> 1.02-1.03 x
 * copy (CUDA-graph replays: 9.90 -> 9.44 us), 8192 x 4096: 1.03 -> 1.01-1.02. */
#define KF_LEAN_PACKED_WEIGHT(T, F) \
    (sizeof(T) == 2 && ((F) & KF_NF_LLAMA) && !((F) & (KF_NF_LN | KF_NF_MOD)))

/* AdaLN: the scale row of a row (per token or per batch); its shift row is
 * p.shd elements further */
template <typename T>
static __device__ __forceinline__ const T *kf_lean_scale_row(const kf_lean_p &p, int64_t row, bool act)
{
    const kf_ridx ri = kf_row_index_f(act ? row : 0, p.f1, p.f2);
    return (const T *)p.sc + kf_off(p.scs, ri);
}

/* one 32-bit word (two 16-bit elements) <-> two f32 values */
template <typename T>
static __device__ __forceinline__ void kf_unpack_word(unsigned int w, float (&v)[2])
{
    const int V = 16 / sizeof(T); /* (only 16-bit types take this path) */
    float t[V];
    kf_unpack<T, V>(make_uint4(w, 0u, 0u, 0u), t);
    v[0] = t[0];
    v[1] = t[1];
}
template <typename T>
static __device__ __forceinline__ unsigned int kf_pack_word(const float (&v)[2])
{
    const int V = 16 / sizeof(T);
    float t[V] = {};
    t[0] = v[0];
    t[1] = v[1];
    return kf_pack<T, V>(t).x;
}

/* Exact rows (GX > 0, kf_norm_lean_launch): one row per block of GX
 * threads, nch = K GX. GX = 0: G = p.G, RPB = p.RPB from the launch. */

/* chunk k of this thread in a row starting at r: element (lane + k G) V.
 * Exact rows add the lane's offset first, so that k GX V is an immediate
 * offset of the load or store (one row address per row, not one per chunk) */
template <int GX, typename P>
static __device__ __forceinline__ P kf_lean_chunk(P r, int lane, int k, int G)
{
    const int V = 16 / sizeof(*r);
    if (GX) return (r + lane * V) + k * GX * V;
    return r + (lane + k * G) * V;
}

/* this thread's row group and lane, from a fresh %tid.x per row and after
 * each reduction (kf_group_fresh), as in kf_norm_fast40, so that the kernels
 * fit their register caps without spilling. Exact rows: group 0, lane =
 * %tid.x, made opaque so that the offsets made from it are not held across
 * the row loop either. */
template <int GX>
static __device__ __forceinline__ int kf_lean_group(const kf_lean_p &p, int *lane)
{
    if (GX) {
        int t = kf_tid_x_fresh();
        KF_OPAQUE(t);
        *lane = t;
        return 0;
    }
    return kf_group_fresh(p.fG, p.G, lane);
}

/* RMS rows (with or without the add) whose weight is loaded with the row
 * (WE: 2 chunks per thread) read and write their rows default-cached, the
 * rest streamed (kf_ld16_rows). H200, bf16: kfuse bench level (rms_norm
 * 8192 x 4096 1.02, 16128 x 2048 1.01, 2048 x 4096 1.04, add_rms_norm
 * 8192 x 4096 1.05, 2048 x 4096 1.07 x copy either way); the PyTorch
 * harness's kernel time / copy: rms_norm 8192 x 4096 1.09 -> 1.02, 2048 x
 * 4096 1.09 -> 1.05, add_rms_norm 8192 x 4096 1.07 -> 1.03, 2048 x 4096
 * 1.12 -> 1.07 (against Liger: 1.02 -> 0.98, 1.03 -> 1.00). The other
 * lean kernels lost in kfuse bench without streaming (ada_norm, layer_norm,
 * rms_norm D 3584 / 5120: 3-4 %). */
#define KF_LEAN_STREAM(F, WE) (!(WE) || ((F) & (KF_NF_MOD | KF_NF_LN)) != 0)
template <typename T, int K, int F, int WE, int GX>
static __device__ __forceinline__ void kf_norm_lean_body(const kf_lean_p &p)
{
    const int V = 16 / sizeof(T);
    const int G = GX ? GX : p.G, RPB = GX ? 1 : p.RPB;
    const T *w = (const T *)p.w;
    /* The first loads of a row wait on nothing they need not: no loop test
     * before them (every launched block has a first row: grid <= rows / RPB
     * rounded up) and x's and the weight's row addresses computed in full,
     * not under the loads' range tests (KF_ADDR_NOW). Each parameter the
     * addresses wait on is a constant-cache read; those that came after a
     * branch or under a test were serialized behind the first ones, and a
     * parameter line read cold costs ~0.24 us (H200, graph-timed microbench
     * scripts/microbench/decode_floor.cu: one early exit on a parameter in
     * another 64-byte line before the loads, 1.56 -> 1.80 us per call). H200,
     * kfuse bench, bf16, 3 rounds: rms_norm 1 x 4096 1.61 -> 1.53 x copy
     * (2.00 -> 1.88 us), 64 x 4096 1.46 -> 1.40, 2048 x 4096 1.06 -> 1.04,
     * layer_norm 8192 x 4096 1.07 -> 1.06, ada_norm 2 x 1320 x 2048 1.11 ->
     * 1.09; the rest level. Parameter layouts that put every constant the
     * first loads need into one round gained 0.01-0.06 more on RMS rows but
     * cost ada_norm 2 x 1320 x 2048 1.08 -> 1.17-1.18 (BENCHMARKS.md twenty-fifth
     * set): not kept. */
    int64_t base = (int64_t)blockIdx.x * RPB;
    do {
        int lane;
        const int grp = kf_lean_group<GX>(p, &lane);
        const int64_t row = base + grp;
        const bool act = row < p.rows;
        const T *xr = (const T *)p.x + (act ? row : 0) * p.xs;
        const T *wr = w;
        KF_ADDR_NOW(xr);
        KF_ADDR_NOW(wr);
        uint4 rc[K], rw[WE ? K : 1];
        /* AdaLN rows of 2 chunks: the scale / shift chunks with the row */
        uint4 rsc[(WE && (F & KF_NF_MOD)) ? K : 1], rsh[(WE && (F & KF_NF_MOD)) ? K : 1];
#pragma unroll
        for (int k = 0; k < K; k++) {
            const int c = lane + k * G;
            rc[k] = make_uint4(0u, 0u, 0u, 0u);
            if (act && c < p.nch) rc[k] = kf_ld16_rows<KF_LEAN_STREAM(F, WE)>(reinterpret_cast<const uint4 *>(kf_lean_chunk<GX>(xr, lane, k, G)));
        }
        if (F & KF_NF_ADD) {
            const T *ar = (const T *)p.a + (act ? row : 0) * p.as;
            T *sr = (T *)p.sum + (act ? row : 0) * p.ss;
            /* the residual's row address too, at 2 chunks (at 4 it spilled 8
             * bytes at 48 registers): add_rms_norm 64 x 4096 bf16 1.38-1.39 ->
             * 1.36-1.37 x copy, the rest level (H200, 3 rounds) */
            if (K == 2) KF_ADDR_NOW(ar);
            uint4 ra[K];
#pragma unroll
            for (int k = 0; k < K; k++) {
                const int c = lane + k * G;
                ra[k] = make_uint4(0u, 0u, 0u, 0u);
                if (act && c < p.nch) ra[k] = kf_ld16_rows<KF_LEAN_STREAM(F, WE)>(reinterpret_cast<const uint4 *>(kf_lean_chunk<GX>(ar, lane, k, G)));
            }
#pragma unroll
            for (int k = 0; k < K; k++) {
                const int c = lane + k * G;
                rc[k] = kf_add_packed<T>(rc[k], ra[k]);
                if (act && c < p.nch) kf_st16_rows<KF_LEAN_STREAM(F, WE)>(reinterpret_cast<uint4 *>(kf_lean_chunk<GX>(sr, lane, k, G)), rc[k]);
            }
        }
        if (WE && (F & KF_NF_MOD)) {
            const T *scr = kf_lean_scale_row<T>(p, row, act);
#pragma unroll
            for (int k = 0; k < K; k++) {
                const int c = lane + k * G;
                rsc[WE ? k : 0] = make_uint4(0u, 0u, 0u, 0u);
                rsh[WE ? k : 0] = make_uint4(0u, 0u, 0u, 0u);
                if (c < p.nch) {
                    rsc[WE ? k : 0] = KF_LDG(reinterpret_cast<const uint4 *>(kf_lean_chunk<GX>(scr, lane, k, G)));
                    if (p.sh) rsh[WE ? k : 0] = KF_LDG(reinterpret_cast<const uint4 *>(kf_lean_chunk<GX>(scr + p.shd, lane, k, G)));
                }
            }
        } else if (WE) {
#pragma unroll
            for (int k = 0; k < K; k++) {
                const int c = lane + k * G;
                rw[WE ? k : 0] = make_uint4(0u, 0u, 0u, 0u);
                if (c < p.nch) rw[WE ? k : 0] = KF_LDG(reinterpret_cast<const uint4 *>(kf_lean_chunk<GX>(wr, lane, k, G)));
            }
        }
        /* statistics (chunks past the row are +0: they add nothing) */
        float mean = 0.0f, mean_lo = 0.0f, acc;
        if (F & KF_NF_LN) {
            acc = kf_group_reduce<KF_RED_SUM, true>(kf_chunks_sum<T, K, false>(rc), G, grp);
            mean = kf_ln_mean<T>(acc, p.inv_D);
            kf_lean_group<GX>(p, &lane);
            float a2 = 0.0f, s1 = 0.0f;
#pragma unroll
            for (int k = 0; k < K; k++) {
                /* a chunk past the row: subtracting 0, not the mean, keeps its
                 * deviations 0 */
                const float mk = lane + k * G < p.nch ? mean : 0.0f;
                float v[V];
                kf_unpack<T, V>(rc[k], v);
#pragma unroll
                for (int j = 0; j < V; j++) {
                    a2 = fmaf(v[j] - mk, v[j] - mk, a2);
                    if (KF_LN_MEAN_LO(T)) s1 += v[j] - mk;
                }
            }
#pragma unroll
            for (int k = 0; k < K; k++) kf_opaque(rc[k]);
            acc = kf_group_reduce<KF_RED_SUM, true>(a2, G, grp);
            if (KF_LN_MEAN_LO(T))
                acc = kf_ln_var_lo(acc, kf_group_reduce<KF_RED_SUM, true>(s1, G, grp), p.inv_D,
                                   &mean_lo);
        } else {
            acc = kf_group_reduce<KF_RED_SUM, true>(kf_chunks_sum<T, K, true>(rc), G, grp);
        }
        const float rstd = rsqrtf(acc * p.inv_D + p.eps);
        kf_lean_group<GX>(p, &lane);
        T *yr = (T *)p.y + (act ? row : 0) * p.ys;
        const float nmr = -mean * rstd; /* 16-bit LayerNorm's output FMA */
        /* AdaLN: this row's scale / shift rows (per token or per batch) */
        const T *scr = 0, *shr = 0;
        if ((F & KF_NF_MOD) && !WE) {
            scr = kf_lean_scale_row<T>(p, row, act);
            if (p.sh) shr = scr + p.shd;
        }
#pragma unroll
        for (int k = 0; k < K; k++) {
            const int c = lane + k * G;
            if constexpr (KF_LEAN_PACKED_WEIGHT(T, F)) {
                /* Llama rounding of 16-bit rows: round(x * rstd) packed, then
                 * one packed multiply by the weight as stored (no offset in
                 * this mode) */
                if (act && c < p.nch) {
                    float o[V];
                    kf_unpack<T, V>(rc[k], o);
#pragma unroll
                    for (int j = 0; j < V; j++) o[j] *= rstd;
                    const uint4 wk = WE ? rw[WE ? k : 0] : KF_LDG(reinterpret_cast<const uint4 *>(kf_lean_chunk<GX>(w, lane, k, G)));
                    kf_st16_rows<KF_LEAN_STREAM(F, WE)>(reinterpret_cast<uint4 *>(kf_lean_chunk<GX>(yr, lane, k, G)),
                                   kf_mul_packed16<T>(kf_pack<T, V>(o), wk));
                }
            } else if ((F & KF_NF_MOD) && !(F & KF_NF_LLAMA) && K == 4 && sizeof(T) == 2 && !w) {
                /* 4 chunks: the same, word by word (two elements at a time,
                 * packed again at once) */
                if (act && c < p.nch) {
                    const uint4 s4 = KF_LDG(reinterpret_cast<const uint4 *>(kf_lean_chunk<GX>(scr, lane, k, G)));
                    const uint4 h4 = p.sh ? KF_LDG(reinterpret_cast<const uint4 *>(kf_lean_chunk<GX>(shr, lane, k, G))) : make_uint4(0u, 0u, 0u, 0u);
                    const unsigned int xw[4] = {rc[k].x, rc[k].y, rc[k].z, rc[k].w};
                    const unsigned int sw[4] = {s4.x, s4.y, s4.z, s4.w};
                    const unsigned int hw[4] = {h4.x, h4.y, h4.z, h4.w};
                    unsigned int ow[4];
#pragma unroll
                    for (int i = 0; i < 4; i++) {
                        float xv[2], sv[2], hv[2], ov[2];
                        kf_unpack_word<T>(xw[i], xv);
                        kf_unpack_word<T>(sw[i], sv);
                        kf_unpack_word<T>(hw[i], hv);
#pragma unroll
                        for (int e = 0; e < 2; e++) {
                            if (F & KF_NF_LN) xv[e] -= mean;
                            ov[e] = fmaf(xv[e], fmaf(rstd, sv[e], rstd), hv[e]);
                        }
                        ow[i] = kf_pack_word<T>(ov);
                    }
                    kf_st16_rows<KF_LEAN_STREAM(F, WE)>(reinterpret_cast<uint4 *>(kf_lean_chunk<GX>(yr, lane, k, G)), make_uint4(ow[0], ow[1], ow[2], ow[3]));
                }
            } else if ((F & KF_NF_MOD) && !(F & KF_NF_LLAMA) && K == 2 && !w) {
                /* AdaLN without a weight, 2 chunks: x' (rstd (1 + scale)) +
                 * shift, x' = x (- mean): two FMAs per element */
                if (act && c < p.nch) {
                    float o[V], t[V], r[V];
                    kf_unpack<T, V>(rc[k], o);
                    kf_unpack<T, V>(WE ? rsc[WE ? k : 0] : KF_LDG(reinterpret_cast<const uint4 *>(kf_lean_chunk<GX>(scr, lane, k, G))), t);
#pragma unroll
                    for (int j = 0; j < V; j++) {
                        if (F & KF_NF_LN) o[j] = (o[j] - mean) - mean_lo;
                        r[j] = fmaf(rstd, t[j], rstd);
                    }
                    if (p.sh) {
                        kf_unpack<T, V>(WE ? rsh[WE ? k : 0] : KF_LDG(reinterpret_cast<const uint4 *>(kf_lean_chunk<GX>(shr, lane, k, G))), t);
#pragma unroll
                        for (int j = 0; j < V; j++) o[j] = fmaf(o[j], r[j], t[j]);
                    } else {
#pragma unroll
                        for (int j = 0; j < V; j++) o[j] *= r[j];
                    }
                    kf_st16_rows<KF_LEAN_STREAM(F, WE)>(reinterpret_cast<uint4 *>(kf_lean_chunk<GX>(yr, lane, k, G)), kf_pack<T, V>(o));
                }
            } else if ((F & KF_NF_LN) && !(F & KF_NF_MOD) && sizeof(T) == 2 && K == 2) {
                /* 16-bit LayerNorm, 2 chunks: x rstd - mean rstd (one FMA;
                 * its cancellation error, ~|mean| rstd 2^-24, is the size of
                 * the f32 mean's own rounding error, which 16-bit rows keep
                 * (KF_LN_MEAN_LO): below a 16-bit rounding unless
                 * |mean| / std passes ~1e4, README Known gaps), then
                 * weight and bias in one FMA */
                if (act && c < p.nch) {
                    float o[V], t[V], u[V];
                    kf_unpack<T, V>(rc[k], o);
#pragma unroll
                    for (int j = 0; j < V; j++) o[j] = fmaf(o[j], rstd, nmr);
                    kf_unpack<T, V>(KF_LDG(reinterpret_cast<const uint4 *>(kf_lean_chunk<GX>(w, lane, k, G))), t);
                    if (p.b) {
                        kf_unpack<T, V>(KF_LDG(reinterpret_cast<const uint4 *>(kf_lean_chunk<GX>((const T *)p.b, lane, k, G))), u);
#pragma unroll
                        for (int j = 0; j < V; j++) o[j] = fmaf(o[j], t[j], u[j]);
                    } else {
#pragma unroll
                        for (int j = 0; j < V; j++) o[j] *= t[j];
                    }
                    kf_st16_rows<KF_LEAN_STREAM(F, WE)>(reinterpret_cast<uint4 *>(kf_lean_chunk<GX>(yr, lane, k, G)), kf_pack<T, V>(o));
                }
            } else if (act && c < p.nch) {
                float o[V], t[V];
                kf_unpack<T, V>(rc[k], o);
#pragma unroll
                for (int j = 0; j < V; j++) {
                    /* 16-bit LayerNorm at 4 chunks: only this FMA (the
                     * weight-bias FMA spilled there) */
                    if ((F & KF_NF_LN) && !(F & KF_NF_MOD) && sizeof(T) == 2) o[j] = fmaf(o[j], rstd, nmr);
                    else o[j] = (F & KF_NF_LN) ? ((o[j] - mean) - mean_lo) * rstd : o[j] * rstd;
                    if (F & KF_NF_LLAMA) o[j] = kf_round<T>(o[j]);
                }
                if (!(F & KF_NF_MOD) || w) { /* (AdaLN's weight is optional) */
                    kf_unpack<T, V>((WE && !(F & KF_NF_MOD)) ? rw[WE ? k : 0] : KF_LDG(reinterpret_cast<const uint4 *>(kf_lean_chunk<GX>(w, lane, k, G))), t);
                    if (!(F & (KF_NF_LN | KF_NF_MOD | KF_NF_LLAMA)) && p.offset != 0.0f) {
#pragma unroll
                        for (int j = 0; j < V; j++) t[j] += p.offset;
                    }
#pragma unroll
                    for (int j = 0; j < V; j++) o[j] *= t[j];
                }
                if (F & KF_NF_MOD) {
                    /* o * (1 + scale), one rounding; then + shift */
                    kf_unpack<T, V>(WE ? rsc[WE ? k : 0] : KF_LDG(reinterpret_cast<const uint4 *>(kf_lean_chunk<GX>(scr, lane, k, G))), t);
#pragma unroll
                    for (int j = 0; j < V; j++) o[j] = fmaf(o[j], t[j], o[j]);
                    if (p.sh) {
                        kf_unpack<T, V>(WE ? rsh[WE ? k : 0] : KF_LDG(reinterpret_cast<const uint4 *>(kf_lean_chunk<GX>(shr, lane, k, G))), t);
#pragma unroll
                        for (int j = 0; j < V; j++) o[j] += t[j];
                    }
                }
                if ((F & KF_NF_LN) && !(F & KF_NF_MOD) && p.b) {
                    kf_unpack<T, V>(KF_LDG(reinterpret_cast<const uint4 *>(kf_lean_chunk<GX>((const T *)p.b, lane, k, G))), t);
#pragma unroll
                    for (int j = 0; j < V; j++) o[j] += t[j];
                }
                kf_st16_rows<KF_LEAN_STREAM(F, WE)>(reinterpret_cast<uint4 *>(kf_lean_chunk<GX>(yr, lane, k, G)), kf_pack<T, V>(o));
            }
        }
    } while ((base += (int64_t)gridDim.x * RPB) < p.rows);
}

/* Register caps (sm_90; sm_80 keeps 64, vendor_cuda.h): 40 (six 256-thread
 * blocks per SM), 48 (five) for AdaLN rows and the residual add (2 chunks:
 * with the weight loaded with the row it spilled at 40), 64 (four) for f32
 * rows of 4 chunks with the add or AdaLN. 16-bit rows of 4 chunks fit 48
 * since (a) the residual add is packed (kf_add_packed: no f32 copies of the
 * x and residual chunks; in f32 the bf16 kernel spilled 24 bytes at 48) and
 * (b) the shift row is found from the scale row by one fixed offset (the two
 * share their strides, kf_lean_p.shd; with its own pointer AdaLN spilled
 * 4-12 bytes at 48). Before, both ran at 64. H200, kfuse bench: ada_norm
 * 2 x 8064 x 2048 bf16 1.11-1.12 -> 1.07-1.09 x copy (f16 1.09-1.10 ->
 * 1.07-1.08); add_rms_norm unchanged (1.04-1.05): the add is not bound by
 * occupancy. */
template <typename T, int K, int F, int WE, int GX>
__global__ void KF_KERNEL_REGS_40 kf_norm_lean(kf_lean_p p)
{
    kf_norm_lean_body<T, K, F, WE, GX>(p);
}
template <typename T, int K, int F, int WE, int GX>
__global__ void KF_KERNEL_REGS_48 kf_norm_lean48(kf_lean_p p)
{
    kf_norm_lean_body<T, K, F, WE, GX>(p);
}
template <typename T, int K, int F, int WE, int GX>
__global__ void __launch_bounds__(512, 2) kf_norm_lean64(kf_lean_p p)
{
    kf_norm_lean_body<T, K, F, WE, GX>(p);
}

template <typename T, int K, int F, int WE, int GX>
static void kf_norm_lean_cap(const kf_lean_p &p, const kf_rowgeom &g, kf_gpuStream_t st)
{
    if constexpr (K == 4 && (F & (KF_NF_ADD | KF_NF_MOD)) && (sizeof(T) == 4 || GX))
        kf_launch(kf_norm_lean64<T, K, F, WE, GX>, g.grid, g.BS, 0, st, p);
    else if constexpr ((F & (KF_NF_MOD | KF_NF_ADD)) != 0 || GX) kf_launch(kf_norm_lean48<T, K, F, WE, GX>, g.grid, g.BS, 0, st, p);
    else kf_launch(kf_norm_lean<T, K, F, WE, GX>, g.grid, g.BS, 0, st, p);
}

/* Exact rows (GX): LayerNorm rows (no add, no AdaLN) and AdaLN rows of RMS
 * kind (no add) of 4 chunks, one row per block of G = 64, 128 or 256
 * threads, every chunk slot inside the row (nch = 4 G: bf16 / f16 D 2048 /
 * 4096 / 8192, f32 D 1024 / 2048 / 4096). G is a compile-time constant
 * there: one row address per row with the chunks at immediate offsets, the
 * reduction unrolled, no lane division. LayerNorm runs at 48 registers (at
 * 40 it spilled 52 bytes), AdaLN at 64 (16-bit rows spilled 4 bytes at 48);
 * the per-chunk range tests stay (always true here: without them ptxas kept
 * the unpacked rows and spilled 8-24 bytes at 48). H200, kfuse bench, 3
 * rounds against the G = 0 kernels: layer_norm 8192 x 4096 bf16 1.06 ->
 * 1.05 x copy, f16 1.05-1.06 -> 1.05, f32 1.04-1.05 -> 1.04; ada_norm 2 x
 * 8064 x 2048 bf16 1.05 -> 1.03-1.04, f16 1.05 -> 1.03, f32 1.04 both;
 * 2 x 1320 x 2048 f32 1.17 -> 1.12 (bf16 / f16 at 2 chunks: unchanged). */
template <typename T, int K, int F>
static void kf_norm_lean_launch(const kf_lean_p &p, const kf_rowgeom &g, kf_gpuStream_t st)
{
    /* the parameters with the row (WE): RMS rows (with or without the add)
     * their weight, AdaLN rows without the add their scale / shift; not
     * LayerNorm, not AdaLN with the add (no room for it there) */
    const int WE = K == 2 && ((F & KF_NF_MOD) ? !(F & KF_NF_ADD) : !(F & KF_NF_LN));
    if constexpr (K == 4 && (F == KF_NF_LN || F == KF_NF_MOD)) {
        /* RPB 1: BS == G (kf_row_geometry: G and BS powers of two, RPB = BS / G,
         * or BS = G RPB; KFUSE_ROW_BLOCK takes powers of two only) */
        if (g.RPB == 1 && p.nch == 4 * g.G) {
            if (g.G == 64) return kf_norm_lean_cap<T, K, F, WE, 64>(p, g, st);
            if (g.G == 128) return kf_norm_lean_cap<T, K, F, WE, 128>(p, g, st);
            if (g.G == 256) return kf_norm_lean_cap<T, K, F, WE, 256>(p, g, st);
        }
    }
    kf_norm_lean_cap<T, K, F, WE, 0>(p, g, st);
}

template <typename T, int K>
static void kf_norm_lean_f(const kf_lean_p &p, const kf_rowgeom &g, int f, kf_gpuStream_t st)
{
    switch (f) {
    case 0: kf_norm_lean_launch<T, K, 0>(p, g, st); break;
    case KF_NF_ADD: kf_norm_lean_launch<T, K, KF_NF_ADD>(p, g, st); break;
    case KF_NF_LLAMA: kf_norm_lean_launch<T, K, KF_NF_LLAMA>(p, g, st); break;
    case KF_NF_LN: kf_norm_lean_launch<T, K, KF_NF_LN>(p, g, st); break;
    case KF_NF_MOD: kf_norm_lean_launch<T, K, KF_NF_MOD>(p, g, st); break;
    case KF_NF_MOD | KF_NF_LN: kf_norm_lean_launch<T, K, KF_NF_MOD | KF_NF_LN>(p, g, st); break;
    default: kf_norm_lean_launch<T, K, KF_NF_ADD | KF_NF_LLAMA>(p, g, st); break;
    }
}

template <typename T>
static void kf_norm_lean_go(const kf_lean_p &p, const kf_rowgeom &g, int f, kf_gpuStream_t st)
{
    if (g.K == 2) kf_norm_lean_f<T, 2>(p, g, f, st);
    else kf_norm_lean_f<T, 4>(p, g, f, st);
}

template <typename T, int K, int F>
static void kf_norm_peel_launch(const kf_norm_p &p, const kf_rowgeom &g, kf_gpuStream_t st)
{
    if constexpr (KF_PEEL48(T, K, F)) kf_launch(kf_norm_peel48<T, K, F>, g.grid, g.BS, 0, st, p);
    else kf_launch(kf_norm_peel<T, K, F>, g.grid, g.BS, 0, st, p);
}

template <typename T, int K>
static void kf_norm_peel_f(const kf_norm_p &p, const kf_rowgeom &g, int f, kf_gpuStream_t st)
{
    switch (f) {
    case 0: kf_norm_peel_launch<T, K, 0>(p, g, st); break;
    case KF_NF_ADD: kf_norm_peel_launch<T, K, KF_NF_ADD>(p, g, st); break;
    case KF_NF_LLAMA: kf_norm_peel_launch<T, K, KF_NF_LLAMA>(p, g, st); break;
    case KF_NF_LN: kf_norm_peel_launch<T, K, KF_NF_LN>(p, g, st); break;
    default: kf_norm_peel_launch<T, K, KF_NF_ADD | KF_NF_LLAMA>(p, g, st); break;
    }
}

template <typename T>
static void kf_norm_peel_go(const kf_norm_p &p, const kf_rowgeom &g, int f, kf_gpuStream_t st)
{
    switch (g.K) {
    case 1: kf_norm_peel_f<T, 1>(p, g, f, st); break;
    case 2: kf_norm_peel_f<T, 2>(p, g, f, st); break;
    default: kf_norm_peel_f<T, 4>(p, g, f, st); break;
    }
}

template <typename T, int K, int ALN, int F>
static void kf_norm_fast_launch(const kf_norm_p &p, const kf_rowgeom &g, kf_gpuStream_t st)
{
    if constexpr (!KF_NORM_HAS_FAST(K, ALN, (F & KF_NF_ADD) != 0)) {
        /* never launched */
    } else if constexpr (KF_NORM_RMS40(T, K, ALN, F)) {
        kf_launch(kf_norm_fast40<T, K, ALN, F>, g.grid, g.BS, 0, st, p);
    } else if constexpr (KF_NORM_CAP48(T, K, ALN, F)) {
        kf_launch(kf_norm_fast48<T, K, ALN, F>, g.grid, g.BS, 0, st, p);
    } else {
        kf_launch(kf_norm_fast<T, K, ALN, F>, g.grid, g.BS, 0, st, p);
    }
}

template <typename T, int K, int ALN>
static void kf_norm_fast_f(const kf_norm_p &p, const kf_rowgeom &g, int f, kf_gpuStream_t st)
{
    switch (f) {
    case 0: kf_norm_fast_launch<T, K, ALN, 0>(p, g, st); break;
    case 1: kf_norm_fast_launch<T, K, ALN, 1>(p, g, st); break;
    case 2: kf_norm_fast_launch<T, K, ALN, 2>(p, g, st); break;
    case 3: kf_norm_fast_launch<T, K, ALN, 3>(p, g, st); break;
    /* KF_NF_LN only with ALN 1 (the launcher clears it for peeled rows):
     * ALN 2 instantiates no LN kernels */
    case 4: kf_norm_fast_launch<T, K, ALN, (ALN == 1 ? 4 : 0)>(p, g, st); break;
    case 5: kf_norm_fast_launch<T, K, ALN, (ALN == 1 ? 5 : 1)>(p, g, st); break;
    case 6: kf_norm_fast_launch<T, K, ALN, (ALN == 1 ? 6 : 2)>(p, g, st); break;
    case 7: kf_norm_fast_launch<T, K, ALN, (ALN == 1 ? 7 : 3)>(p, g, st); break;
    /* llama rounding: rms_norm and add_rms_norm only */
    case 8: kf_norm_fast_launch<T, K, ALN, 8>(p, g, st); break;
    default: kf_norm_fast_launch<T, K, ALN, 9>(p, g, st); break;
    }
}

template <typename T, int ALN>
static void kf_norm_fast_k(const kf_norm_p &p, const kf_rowgeom &g, int f, kf_gpuStream_t st)
{
    switch (g.K) {
    case 1: kf_norm_fast_f<T, 1, ALN>(p, g, f, st); break;
    case 2: kf_norm_fast_f<T, 2, ALN>(p, g, f, st); break;
    case 4: kf_norm_fast_f<T, 4, ALN>(p, g, f, st); break;
    default: kf_norm_fast_f<T, 8, ALN>(p, g, f, st); break;
    }
}

template <typename T>
static void kf_norm_fast_go(const kf_norm_p &p, const kf_rowgeom &g, int aln, int f,
                            kf_gpuStream_t st)
{
    if (aln == 1) kf_norm_fast_k<T, 1>(p, g, f, st);
    else kf_norm_fast_k<T, 2>(p, g, f, st);
}

template <typename T>
static void kf_norm_go_t(const kf_norm_p &p, const kf_rowgeom &g, bool al, kf_gpuStream_t st)
{
    if (al) kf_launch(kf_norm_kernel<T, true, 0>, g.grid, g.BS, 0, st, p);
    else kf_launch(kf_norm_kernel<T, false, 0>, g.grid, g.BS, 0, st, p);
}

static int kf_dt(const kf_tensor *t) { return t ? t->dtype : KF_F32; }
static const void *kf_ptr(const kf_tensor *t) { return t ? t->data : (const void *)0; }

/* The common launcher. x: primary input; a/gate: addend (NULL = none); sum:
 * where the rounded sum goes; y: output. */
static kf_status kf_norm_launch(kf_ctx *ctx, const char *name, const kf_tensor *x,
                                const kf_tensor *a, const kf_tensor *gate, const kf_tensor *sum,
                                const kf_tensor *w, const kf_tensor *b, const kf_tensor *scale,
                                const kf_tensor *shift, float eps, int layer, int llama,
                                float offset, const kf_tensor *y)
{
    kf_norm_p p;
    p.x = x->data; p.xs = kf_strides3(x);
    p.a = kf_ptr(a); p.as = kf_strides3(a);
    p.g = kf_ptr(gate); p.gs = kf_strides3(gate); p.gdt = kf_dt(gate);
    p.sum = sum ? sum->data : (void *)0; p.ss = kf_strides3(sum);
    p.y = y->data; p.ys = kf_strides3(y);
    p.scale = kf_ptr(scale); p.scs = kf_strides3(scale); p.scdt = kf_dt(scale);
    p.shift = kf_ptr(shift); p.shs = kf_strides3(shift); p.shdt = kf_dt(shift);
    p.w = kf_ptr(w); p.wdt = kf_dt(w);
    p.b = kf_ptr(b); p.bdt = kf_dt(b);
    p.rows = kf_rows_of(x);
    p.s1 = x->shape[1];
    p.s2 = x->shape[2];
    p.D = x->shape[3];
    p.eps = eps;
    p.offset = offset;
    p.layer = layer;
    p.llama = llama;
    if (p.rows == 0 || p.D == 0) return KF_OK;
    if (p.D > INT_MAX - 64)
        return kf_set_error(ctx, KF_ERR_UNSUPPORTED, "%s: rows of %lld elements are too long",
                            name, (long long)p.D);

    int V = 16 / (int)kf_dtype_size((kf_dtype)x->dtype);
    bool al = kf_rows_aligned16(x) && kf_rows_aligned16(a) && kf_rows_aligned16(gate) &&
              kf_rows_aligned16(sum) && kf_rows_aligned16(y) && kf_rows_aligned16(w) &&
              kf_rows_aligned16(b) && kf_rows_aligned16(scale) && kf_rows_aligned16(shift) &&
              p.D % V == 0;
    /* peel: the activations share x's row phase (parameters go element-wise) */
    bool peel = !al && kf_same_phase(a, x) && kf_same_phase(sum, x) && kf_same_phase(y, x);
    /* the lean peeled kernel (kf_norm_peel) where its conditions hold; its
     * rows need only D / V chunk slots (the interior), so it gets its own
     * geometry (D 5125: 160 x 4 threads, where the peeled count took 192) */
    kf_rowgeom g;
    /* rms_norm, add_rms_norm, layer_norm rows: the lean kernel (kf_norm_lean)
     * where its conditions hold */
    int64_t xs1 = 0, as1 = 0, ss1 = 0, ys1 = 0;
    /* AdaLN (ada_norm): scale / shift of the rows' dtype, weight optional, no add */
    bool mod_ok = !scale || (!a && scale->dtype == x->dtype && (!shift || shift->dtype == x->dtype) &&
                             kf_same_outer_strides(scale, shift, x) &&
                             p.rows < (1ll << 31) && p.s1 < (1ll << 31) && p.s2 < (1ll << 31));
    if (al && (x->dtype == KF_F32 || x->dtype == KF_F16 || x->dtype == KF_BF16) &&
        (w ? w->dtype == x->dtype : scale != NULL) && (!b || (layer && !scale && b->dtype == x->dtype)) &&
        mod_ok && !gate && (!layer || (!a && !llama)) &&
        (!a || (a->dtype == x->dtype && sum->dtype == x->dtype)) && y->dtype == x->dtype &&
        kf_row_stride(x, &xs1) && kf_row_stride(y, &ys1) &&
        (!a || (kf_row_stride(a, &as1) && kf_row_stride(sum, &ss1)))) {
        /* plain RMS rows of 8 or 16 warps' worth of chunks (bf16 D 2048 /
         * 4096): 2 chunks per thread, so that the weight is loaded with the
         * row (WE); at 4 chunks it would spill. H200, kfuse bench, bf16:
         * 8192 x 4096 1.04 -> 1.00-1.01 x copy, 16128 x 2048 0.99 -> 0.94-0.95;
         * other lengths lost with 2 (D 3584 0.97 -> 0.99, 5120 0.95 -> 1.00,
         * 8192 1.04 -> 1.07: threads per row not a power of two, or 16
         * warps to reduce over) */
        const int64_t nch0 = p.D / V, W = ctx->facts.warp_size;
        const bool rms2 = !a && !layer && !scale && (nch0 == 8 * W || nch0 == 16 * W);
        g = kf_row_geometry(ctx, p.rows, nch0, 8, 512, (a || rms2) ? 2 : 4, true);
        if (g.K == 2 || g.K == 4) {
            kf_lean_p q;
            q.x = x->data; q.a = kf_ptr(a); q.w = kf_ptr(w); q.b = kf_ptr(b);
            q.sum = sum ? sum->data : (void *)0; q.y = y->data;
            q.xs = xs1; q.as = as1; q.ss = ss1; q.ys = ys1;
            q.sc = kf_ptr(scale); q.scs = kf_strides3(scale);
            q.sh = kf_ptr(shift);
            q.shd = shift ? ((const char *)shift->data - (const char *)scale->data) /
                                (int64_t)kf_dtype_size((kf_dtype)x->dtype)
                          : 0;
            q.f1 = kf_fdiv_make(scale ? (unsigned int)p.s1 : 1u);
            q.f2 = kf_fdiv_make(scale ? (unsigned int)p.s2 : 1u);
            q.rows = p.rows;
            q.nch = (int)(p.D / V);
            q.G = g.G;
            q.RPB = g.RPB;
            q.fG = kf_fdiv_make((unsigned int)g.G);
            q.eps = eps;
            q.inv_D = (float)(1.0 / (double)p.D);
            q.offset = offset;
            int f = (a ? KF_NF_ADD : 0) | (llama ? KF_NF_LLAMA : 0) | (layer ? KF_NF_LN : 0) |
                    (scale ? KF_NF_MOD : 0);
            kf_gpuStream_t st = kf_stream(ctx);
            switch (x->dtype) {
            case KF_F32: kf_norm_lean_go<float>(q, g, f, st); break;
            case KF_F16: kf_norm_lean_go<kf_f16_t>(q, g, f, st); break;
            case KF_BF16: kf_norm_lean_go<kf_bf16_t>(q, g, f, st); break;
            }
            return KF_LAUNCH_CHECK(ctx, name);
        }
    }
    bool lean = false;
    if (peel && !scale && !gate && kf_rows_aligned16(w) && kf_rows_aligned16(b) &&
        p.D / V >= 2 * KF_PEEL_MIN_G && p.rows < (1ll << 31) && p.s1 < (1ll << 31) &&
        p.s2 < (1ll << 31)) {
        g = kf_row_geometry(ctx, p.rows, p.D / V, 8, 512, a ? 2 : 4, true);
        lean = g.K > 0 && g.K <= 4 && g.G >= KF_PEEL_MIN_G;
        /* 16-bit Llama rows: the packed weight product (KF_PEEL_PACKED_WEIGHT)
         * takes a weight of x's dtype only */
        if (llama && V == 8 && w && w->dtype != x->dtype) lean = false;
    }
    if (!lean) {
        int64_t nch = al ? (p.D + V - 1) / V : (p.D + 2 * V - 2) / V;
        /* 16-bit peeled rows of at most a warp's chunks without the add (D <=
         * 249): one chunk per lane. H200, 3 rounds, rms_norm 8192 x 111: bf16
         * 2.32-2.33 -> 2.05-2.06 x copy (5.39 -> 4.79 us), f16 2.28 -> 2.03-2.05;
         * f32 rows (D <= 125) lost (1.53 -> 1.70-1.71) and keep 2 chunks */
        const bool short_peel = !al && !a && V == 8 && nch <= ctx->facts.warp_size;
        g = kf_row_geometry(ctx, p.rows, nch, 8, 512, a ? 2 : (short_peel ? 1 : 4), true);
    }
    int f = (a ? KF_NF_ADD : 0) | (scale ? KF_NF_MOD : 0) | (layer ? KF_NF_LN : 0) |
            (llama ? KF_NF_LLAMA : 0);
    /* Llama rounding without a weight rounds x * rstd once, as the output
     * does anyway: the lean peeled kernels drop the flag (their 16-bit Llama
     * forms need a weight) */
    if (lean && !w) f &= ~KF_NF_LLAMA;
    bool fast = g.K > 0 && (al || (peel && KF_NORM_HAS_FAST(g.K, 2, a != NULL))) &&
                p.rows < (1ll << 31) && p.s1 < (1ll << 31) && p.s2 < (1ll << 31);
    p.f1 = kf_fdiv_make(fast ? (unsigned int)p.s1 : 1u);
    p.f2 = kf_fdiv_make(fast ? (unsigned int)p.s2 : 1u);
    p.G = g.G;
    p.RPB = g.RPB;
    p.fG = kf_fdiv_make((unsigned int)g.G);
    p.inv_D = (float)(1.0 / (double)p.D);
    p.zero = 0;
    p.pal = kf_rows_aligned16(gate) && kf_rows_aligned16(w) && kf_rows_aligned16(b) &&
            kf_rows_aligned16(scale) && kf_rows_aligned16(shift);
    kf_gpuStream_t st = kf_stream(ctx);
    int aln = al ? 1 : 2;
    if (lean) { /* fast holds: K <= 4, peel, the index limits above */
        switch (x->dtype) {
        case KF_F32: kf_norm_peel_go<float>(p, g, f, st); break;
        case KF_F16: kf_norm_peel_go<kf_f16_t>(p, g, f, st); break;
        case KF_BF16: kf_norm_peel_go<kf_bf16_t>(p, g, f, st); break;
        }
        return KF_LAUNCH_CHECK(ctx, name);
    }
    /* peeled rows in kf_norm_fast (ALN 2) take LayerNorm as a run-time flag
     * (the lean peeled kernel above takes it as a template flag) */
    if (aln == 2) f &= ~KF_NF_LN;
    switch (x->dtype) {
    case KF_F32:
        if (fast) kf_norm_fast_go<float>(p, g, aln, f, st);
        else kf_norm_go_t<float>(p, g, al, st);
        break;
    case KF_F16:
        if (fast) kf_norm_fast_go<kf_f16_t>(p, g, aln, f, st);
        else kf_norm_go_t<kf_f16_t>(p, g, al, st);
        break;
    case KF_BF16:
        if (fast) kf_norm_fast_go<kf_bf16_t>(p, g, aln, f, st);
        else kf_norm_go_t<kf_bf16_t>(p, g, al, st);
        break;
    default: return kf_set_error(ctx, KF_ERR_DTYPE, "%s: unsupported dtype", name);
    }
    return KF_LAUNCH_CHECK(ctx, name);
}

kf_status kf_gpu_rms_norm(kf_ctx *ctx, const kf_tensor *x, const kf_tensor *w, float eps,
                          int mode, float offset, const kf_tensor *y)
{
    return kf_norm_launch(ctx, "rms_norm", x, NULL, NULL, NULL, w, NULL, NULL, NULL, eps, 0,
                          mode == KF_RMS_LLAMA, mode == KF_RMS_GEMMA ? offset : 0.0f, y);
}

kf_status kf_gpu_add_rms_norm(kf_ctx *ctx, const kf_tensor *x, const kf_tensor *residual,
                              const kf_tensor *w, float eps, int mode, float offset,
                              const kf_tensor *y)
{
    /* residual = x + residual; y = rms_norm(residual) */
    return kf_norm_launch(ctx, "add_rms_norm", x, residual, NULL, residual, w, NULL, NULL,
                          NULL, eps, 0, mode == KF_RMS_LLAMA,
                          mode == KF_RMS_GEMMA ? offset : 0.0f, y);
}

kf_status kf_gpu_layer_norm(kf_ctx *ctx, const kf_tensor *x, const kf_tensor *w,
                            const kf_tensor *b, float eps, const kf_tensor *y)
{
    return kf_norm_launch(ctx, "layer_norm", x, NULL, NULL, NULL, w, b, NULL, NULL, eps, 1, 0,
                          0.0f, y);
}

kf_status kf_gpu_ada_norm(kf_ctx *ctx, const kf_tensor *x, const kf_tensor *scale,
                          const kf_tensor *shift, const kf_tensor *w, float eps, int kind,
                          const kf_tensor *y)
{
    return kf_norm_launch(ctx, "ada_norm", x, NULL, NULL, NULL, w, NULL, scale, shift, eps,
                          kind == KF_NORM_LAYER, 0, 0.0f, y);
}

kf_status kf_gpu_add_ada_norm(kf_ctx *ctx, const kf_tensor *h, const kf_tensor *a,
                              const kf_tensor *gate, const kf_tensor *scale,
                              const kf_tensor *shift, const kf_tensor *w, float eps, int kind,
                              const kf_tensor *y)
{
    /* h = h + a * gate; y = ada_norm(h) */
    return kf_norm_launch(ctx, "add_ada_norm", h, a, gate, h, w, NULL, scale, shift, eps,
                          kind == KF_NORM_LAYER, 0, 0.0f, y);
}
