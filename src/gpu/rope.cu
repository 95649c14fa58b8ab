/* rope.cu - rotary embeddings on the GPU: rope (q and k in one launch, GQA
 * head counts, HALF / INTERLEAVED, partial rotary, table or positions form)
 * and rms_norm_rope (RMSNorm over the H*Dh values of a token, then rope per
 * head, no rounding in between).
 *
 * Work unit: one chunk of V = 16 / sizeof(T) channels of one head.
 *   HALF:        unit u < ceil(r/2 / V) rotates channels [uV, uV+V) with their
 *                partners [r/2 + uV, ...): 2 loads, 2 stores of x.
 *   INTERLEAVED: unit u < ceil(r / V) rotates channels [uV, uV+V) (V/2 pairs).
 *   pass units:  channels >= r copied (skipped when the op runs in place).
 * Table form reads cos/sin chunks for the same channels (f32 or T, 16-byte
 * loads); positions form computes angle = freqs[p] * pos[b, s, axis[p]] as an
 * f32 product and its sine and cosine with kf_sincos: one shared reduction
 * by pi/2 (three-part constant, FMA; exact to ~1e-7 rad for |angle| <= 1e5)
 * and Taylor polynomials on [-pi/4, pi/4] (error < 2e-9), ~25 instructions
 * for both; 16-bit outputs reduce by 2 pi instead and take the hardware
 * sine and cosine (7 instructions, absolute error ~4e-7, far below their
 * rounding); larger angles, Inf and NaN take the library's sincosf (full
 * Payne-Hanek reduction), so 1e5+ rad stays exact to f32 rounding.
 *
 * Geometry (rope): one flat space of tokens x units ((Hq + Hk) * units per
 * head per token), 256-thread blocks, grid-stride; item -> (token, head,
 * unit) and token -> (b, s) with multiply-high divisions (kf_fdiv), no
 * hardware division per item; no idle lanes when units do not divide 256
 * (Llama q+k: 320 units per token). Spaces of 2^31+ items take the
 * per-token loop (32-bit divisions). 64-bit offsets throughout.
 * Geometry (heads kernel, kf_rope_heads_kernel): the same flat space with
 * heads taken KF_ROPE_HG = 2 at a time (16-byte path, more than one head per
 * tensor: Llama q + k): the unit's cos / sin are loaded (or computed) once
 * for the 2 heads. Llama q 32 + k 8 heads, 4096 tokens, bf16 tables: 1.48 ->
 * 1.06 x copy (H200).
 * Geometry (row kernel, kf_rope_row_kernel): INTERLEAVED on the 16-byte
 * path with the heads of a token contiguous (LTX: 1 head of 2048, or H x Dh
 * in one row): rms_norm_rope in both forms and rope in the positions form
 * (q only). A token row per group of G threads, K chunks per thread held in
 * registers, a block per row (kf_row_geometry, as the norm kernels, but
 * 4 chunks also in launches of few waves): x is
 * read once, the norm reduces over registers, each thread
 * rotates its own chunks (pairs never straddle a chunk). Registers (sm_90,
 * bf16, K = 4): rms_norm_rope 48 (positions, capped: kf_rope_row_kernel48,
 * f16 too)
 * and 61 (tables), rope 46 (positions, the one-head form capped too); no spills (the 32-byte stack frame of the
 * positions kernels is the library sincosf's, on the |angle| > 1e5 path).
 * Heads kernel (sm_90): 16-bit HALF rows 64 registers with tables of x's
 * dtype or positions (4 blocks of 256 per SM), 78-80 with f32 tables (3);
 * f32 rows 56-64; INTERLEAVED 40-48 (5).
 * Geometry (rms_norm_rope otherwise: HALF, unaligned rows): one block per
 * token (grid-stride), threads = chunks / 2 rounded to a warp multiple
 * (<= 512); pass 1 sums squares with 16-byte loads, block reduction, pass 2
 * runs the rope units, re-reading x (L1/L2 hits, DRAM sees one read and one
 * write).
 *
 * Napkin math (H200, bf16, LTX 2 x 8064 tokens x 2048 channels, 66 MB of x):
 *   table form, f32 tables [B, S, 2048]: x read 66 MB + y 66 MB + cos/sin
 *   264 MB = 396 MB -> ~100 us at 4 TB/s;
 *   positions form: 132 MB -> ~37 us, plus 1024 sincosf per token
 *   (16.5 M per call, well under the ALU budget of that time).
 *   Llama q 32 + k 8 heads x 128, 4096 tokens: 42 MB -> ~13 us + launch.
 * In place: every element is read and written by the thread of its unit. */
#include "common.cuh"

typedef struct kf_rope_t {
    const void *x; kf_st3 xs;
    void *y; kf_st3 ys;
    int H;
} kf_rope_t;

typedef struct kf_rope_p {
    kf_rope_t t[2];
    int nt;                       /* 1: q only; 2: q and k */
    int64_t S, tokens;            /* tokens = B * S */
    int Dh, r, half;              /* half: KF_ROPE_HALF */
    int urot, upass, upb;         /* units per head: rotating, pass-through, total */
    int units;                    /* per token: (Hq + Hk) * upb */
    int tpb;                      /* tokens per block pass */
    int use_table;
    const void *cos; int64_t cs0, cs1;
    const void *sin; int64_t ss0, ss1;
    int tdt;
    const float *pos; int64_t ps0, ps1;
    const float *freqs;
    const int *axis;
    int n_axes;
    /* rms_norm_rope */
    int norm;
    const void *w; int wdt;
    float eps, offset;
    int llama;
    kf_fdiv fu, fupb, fS;         /* units, upb, S as fast divisors (flat kernel) */
    kf_fdiv fDh;                  /* Dh as a fast divisor (row kernel) */
    int G;                        /* threads per token row (row kernel) */
    int RPB;                      /* token rows per block (row kernel) */
    int gq, gunits;               /* heads kernel: q head groups; (q + k groups) x upb */
    kf_fdiv fgu;                  /* gunits as a fast divisor (heads kernel) */
    kf_fdiv fG;                   /* G as a fast divisor (row kernel) */
    float inv_D;                  /* 1 / (H Dh) (row kernel, rms_norm_rope) */
    /* q + k head groups as a fast divisor (heads kernel; last, so that the
     * fields above keep their parameter offsets: moving them made ptxas
     * spill 8 bytes in the f16 48-register row kernel) */
    kf_fdiv fgroups;
    int gwarps;                   /* G is a multiple of the warp width (row kernel) */
    int lgG;                      /* log2 G when G is a power of two, else -1 (row kernel) */
} kf_rope_p;

/* normalization applied to x before the rotation (rms_norm_rope); c0 is the
 * channel of v[0] within the token row (weight index) */
template <typename T, int V, bool AL>
static __device__ __forceinline__ void kf_rope_pre(const kf_rope_p &p, float rstd, int64_t c0,
                                                   int n, float (&v)[V])
{
    if (!p.norm) return;
#pragma unroll
    for (int j = 0; j < V; j++) {
        v[j] *= rstd;
        if (p.llama) v[j] = kf_round<T>(v[j]);
    }
    if (p.w) {
        float t[V];
        kf_ldp<T, AL>(p.w, p.wdt, c0, n, t);
        if (p.offset != 0.0f) { /* uniform: a branch */
#pragma unroll
            for (int j = 0; j < V; j++) t[j] += p.offset;
        }
#pragma unroll
        for (int j = 0; j < V; j++) v[j] *= t[j];
    }
}

/* sin and cos of a (f32). |a| <= 1e5: k = rint(a * 2/pi), r = a - k * pi/2
 * with pi/2 split into three f32 parts (P1 + P2 + P3, each FMA step exact
 * to an f32 rounding of a value below 4), then Taylor series of sin and cos
 * on |r| <= pi/4 (truncation < 2e-9) and the quadrant k mod 4. Else (huge,
 * Inf, NaN): the library's sincosf.
 * FAST (16-bit outputs): k = rint(a / 2pi), r = a - k * 2pi with the first
 * two parts times 4 (exact scaling; the third's term, |k| 4 |P3| <= 1.1e-10
 * rad for |a| <= 1e5, is left out), then the hardware sine and cosine of
 * r in [-pi, pi] (absolute error ~4e-7, far below a 16-bit rounding): 6
 * instructions against ~25. */
template <bool FAST>
static __device__ __forceinline__ void kf_sincos_small(float a, float *s, float *c)
{
    const float P1 = 1.5707963705062866f;      /* f32(pi/2) */
    const float P2 = -4.3711388286737929e-8f;  /* f32(pi/2 - P1) */
    const float P3 = -1.7151245100059818e-15f; /* f32(pi/2 - P1 - P2) */
    if (FAST) {
        const float k2 = rintf(a * 0.15915494309189535f);
        float r2 = fmaf(-k2, 4.0f * P1, a);
        r2 = fmaf(-k2, 4.0f * P2, r2);
        *s = __sinf(r2);
        *c = __cosf(r2);
        return;
    }
    const float k = rintf(a * 0.63661977236758134f);
    float r = fmaf(-k, P1, a);
    r = fmaf(-k, P2, r);
    r = fmaf(-k, P3, r);
    const float r2 = r * r;
    /* sin r = r (1 - r2/3! + r2^2/5! - r2^3/7! + r2^4/9!) */
    float ps = fmaf(r2, 2.7557319223985893e-6f, -1.9841269841269841e-4f);
    ps = fmaf(r2, ps, 8.3333333333333333e-3f);
    ps = fmaf(r2, ps, -1.6666666666666667e-1f);
    const float sr = fmaf(r * r2, ps, r);
    /* cos r = 1 - r2/2! + r2^2/4! - r2^3/6! + r2^4/8! - r2^5/10! */
    float pc = fmaf(r2, -2.7557319223985888e-7f, 2.4801587301587302e-5f);
    pc = fmaf(r2, pc, -1.3888888888888889e-3f);
    pc = fmaf(r2, pc, 4.1666666666666667e-2f);
    pc = fmaf(r2, pc, -0.5f);
    const float cr = fmaf(r2, pc, 1.0f);
    const int q = (int)k & 3;
    const float ss = (q & 1) ? cr : sr;
    const float cc = (q & 1) ? sr : cr;
    *s = (q & 2) ? -ss : ss;
    *c = ((q + 1) & 2) ? -cc : cc;
}

template <bool FAST>
static __device__ __forceinline__ void kf_sincos(float a, float *s, float *c)
{
    if (!(fabsf(a) <= 1.0e5f)) {
        sincosf(a, s, c);
        return;
    }
    kf_sincos_small<FAST>(a, s, c);
}

/* o = v with its NP interleaved pairs rotated by the angles an; SMALL: every
 * |angle| <= 1e5 is known (one range test for the chunk) */
template <bool SMALL, bool FAST, int NP>
static __device__ __forceinline__ void kf_rotate_pairs(const float (&an)[NP], const float (&v)[2 * NP],
                                                       float (&o)[2 * NP])
{
#pragma unroll
    for (int j = 0; j < NP; j++) {
        float cs, sn;
        if (SMALL) kf_sincos_small<FAST>(an[j], &sn, &cs);
        else kf_sincos<FAST>(an[j], &sn, &cs);
        o[2 * j] = v[2 * j] * cs - v[2 * j + 1] * sn;
        o[2 * j + 1] = v[2 * j + 1] * cs + v[2 * j] * sn;
    }
}

/* angle of pair q (positions form) -> cos, sin */
template <bool FAST>
static __device__ __forceinline__ void kf_rope_angle(const kf_rope_p &p, const float *pr, int q,
                                                     float *c, float *s)
{
    int ax = p.axis ? KF_LDG(p.axis + q) : 0;
    /* the core validates the map on the host only for the CPU backend: clamp,
     * so that a bad map can never read out of bounds */
    ax = ax < 0 ? 0 : (ax >= p.n_axes ? p.n_axes - 1 : ax);
    float ang = KF_LDG(p.freqs + q) * KF_LDG(pr + ax);
    kf_sincos<FAST>(ang, s, c);
}

/* One unit u of one head. xh / yh: the head's channel 0; cr / sr: the
 * token's table rows (bytes, dtype p.tdt) or pr: its positions; hw: the
 * head's first channel within the token row (weight index, rms_norm_rope). */
template <typename T, bool AL, int TAB = -1>
static __device__ __forceinline__ void kf_rope_unit(const kf_rope_p &p, const T *xh, T *yh,
                                                    int u, const void *cr, const void *sr,
                                                    const float *pr, float rstd, int64_t hw)
{
    const int V = 16 / sizeof(T);
    float a[V], b[V];
    if (u < p.urot) {
        if (p.half) {
            const int h2 = p.r >> 1;
            const int i0 = u * V;
            const int n = h2 - i0 < V ? h2 - i0 : V;
            kf_ld<T, V, AL>(xh + i0, n, a);
            kf_ld<T, V, AL>(xh + h2 + i0, n, b);
            kf_rope_pre<T, V, AL>(p, rstd, hw + i0, n, a);
            kf_rope_pre<T, V, AL>(p, rstd, hw + h2 + i0, n, b);
            float ya[V], yb[V];
            if (TAB < 0 ? p.use_table : TAB >= 1) {
                float ca[V], sa[V], cb[V], sb[V];
                kf_ldp<T, AL>(cr, TAB == 1 ? (int)KF_F32 : p.tdt, i0, n, ca);
                kf_ldp<T, AL>(sr, TAB == 1 ? (int)KF_F32 : p.tdt, i0, n, sa);
                kf_ldp<T, AL>(cr, TAB == 1 ? (int)KF_F32 : p.tdt, h2 + i0, n, cb);
                kf_ldp<T, AL>(sr, TAB == 1 ? (int)KF_F32 : p.tdt, h2 + i0, n, sb);
#pragma unroll
                for (int j = 0; j < V; j++) {
                    ya[j] = a[j] * ca[j] - b[j] * sa[j];
                    yb[j] = b[j] * cb[j] + a[j] * sb[j];
                }
            } else {
#pragma unroll
                for (int j = 0; j < V; j++) {
                    float c = 1.0f, s = 0.0f;
                    if (j < n) kf_rope_angle<(sizeof(T) == 2)>(p, pr, i0 + j, &c, &s);
                    ya[j] = a[j] * c - b[j] * s;
                    yb[j] = b[j] * c + a[j] * s;
                }
            }
            kf_st<T, V, AL>(yh + i0, n, ya);
            kf_st<T, V, AL>(yh + h2 + i0, n, yb);
        } else {
            const int i0 = u * V;
            const int n = p.r - i0 < V ? p.r - i0 : V; /* even: r and i0 are */
            kf_ld<T, V, AL>(xh + i0, n, a);
            kf_rope_pre<T, V, AL>(p, rstd, hw + i0, n, a);
            if (TAB < 0 ? p.use_table : TAB >= 1) {
                float cv[V], sv[V];
                kf_ldp<T, AL>(cr, TAB == 1 ? (int)KF_F32 : p.tdt, i0, n, cv);
                kf_ldp<T, AL>(sr, TAB == 1 ? (int)KF_F32 : p.tdt, i0, n, sv);
#pragma unroll
                for (int j = 0; j < V; j += 2) {
                    b[j] = a[j] * cv[j] - a[j + 1] * sv[j];
                    b[j + 1] = a[j + 1] * cv[j + 1] + a[j] * sv[j + 1];
                }
            } else {
#pragma unroll
                for (int j = 0; j < V; j += 2) {
                    float c = 1.0f, s = 0.0f;
                    if (j < n) kf_rope_angle<(sizeof(T) == 2)>(p, pr, (i0 + j) >> 1, &c, &s);
                    b[j] = a[j] * c - a[j + 1] * s;
                    b[j + 1] = a[j + 1] * c + a[j] * s;
                }
            }
            kf_st<T, V, AL>(yh + i0, n, b);
        }
    } else {
        const int i0 = p.r + (u - p.urot) * V;
        const int n = p.Dh - i0 < V ? p.Dh - i0 : V;
        kf_ld<T, V, AL>(xh + i0, n, a);
        kf_rope_pre<T, V, AL>(p, rstd, hw + i0, n, a);
        kf_st<T, V, AL>(yh + i0, n, a);
    }
}

/* token index -> (b, s) and the token's table / position rows */
static __device__ __forceinline__ void kf_rope_token(const kf_rope_p &p, int64_t tok, int64_t *b,
                                                     int64_t *s, const void **cr,
                                                     const void **sr, const float **pr)
{
    if (tok <= 0xffffffffll && p.S <= 0xffffffffll) {
        unsigned int ut = (unsigned int)tok, us = (unsigned int)p.S;
        *b = ut / us;
        *s = ut - (unsigned int)*b * us;
    } else {
        *b = tok / p.S;
        *s = tok - *b * p.S;
    }
    int es = p.tdt == KF_F32 ? 4 : 2;
    *cr = *sr = 0;
    *pr = 0;
    if (p.use_table) {
        *cr = (const char *)p.cos + (*b * p.cs0 + *s * p.cs1) * es;
        *sr = (const char *)p.sin + (*b * p.ss0 + *s * p.ss1) * es;
    } else {
        *pr = p.pos + *b * p.ps0 + *s * p.ps1;
    }
}

template <typename T, bool AL>
__global__ void __launch_bounds__(256, 2) kf_rope_kernel(kf_rope_p p)
{
    const int items = p.tpb * p.units;
    const int hq_units = p.t[0].H * p.upb;
    for (int64_t base = (int64_t)blockIdx.x * p.tpb; base < p.tokens;
         base += (int64_t)gridDim.x * p.tpb) {
        for (int w = threadIdx.x; w < items; w += blockDim.x) {
            int tl = w / p.units;
            int uu = w - tl * p.units;
            int64_t tok = base + tl;
            if (tok >= p.tokens) break;
            int sel = uu < hq_units ? 0 : 1;
            if (sel) uu -= hq_units;
            int h = uu / p.upb;
            int u = uu - h * p.upb;
            int64_t b, s;
            const void *cr, *sr;
            const float *pr;
            kf_rope_token(p, tok, &b, &s, &cr, &sr, &pr);
            const kf_rope_t &t = p.t[sel];
            const T *xh = (const T *)t.x + b * t.xs.s0 + s * t.xs.s1 + h * t.xs.s2;
            T *yh = (T *)t.y + b * t.ys.s0 + s * t.ys.s1 + h * t.ys.s2;
            kf_rope_unit<T, AL>(p, xh, yh, u, cr, sr, pr, 1.0f, 0);
        }
    }
}

/* flat: item i of tokens x units (< 2^31), grid-stride. TAB: the angle form
 * at compile time (0 positions, 1 f32 tables, 2 16-bit tables of the
 * table's run-time dtype). With the form fixed, the f32-table kernel (the
 * tables LTX-Video builds) and the positions one fit four 256-thread blocks
 * per SM (64 registers, no spill); all forms in one kernel took 68, three
 * blocks, as 16-bit tables still do */
template <typename T, bool AL, int TAB>
__global__ void __launch_bounds__(256, (TAB == 2 ? 3 : 4)) kf_rope_flat_kernel(kf_rope_p p)
{
    const int hq_units = p.t[0].H * p.upb;
    const unsigned int n = (unsigned int)(p.tokens * p.units);
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += gridDim.x * blockDim.x) {
        const unsigned int tok = kf_fdiv_q(i, p.fu);
        int uu = (int)(i - tok * (unsigned int)p.units);
        const int sel = uu < hq_units ? 0 : 1;
        if (sel) uu -= hq_units;
        const int h = (int)kf_fdiv_q((unsigned int)uu, p.fupb);
        const int u = uu - h * p.upb;
        const unsigned int bq = kf_fdiv_q(tok, p.fS);
        const int64_t b = bq, s = tok - bq * (unsigned int)p.S;
        const int es = p.tdt == KF_F32 ? 4 : 2;
        const void *cr = 0, *sr = 0;
        const float *pr = 0;
        if (TAB) {
            cr = (const char *)p.cos + (b * p.cs0 + s * p.cs1) * es;
            sr = (const char *)p.sin + (b * p.ss0 + s * p.ss1) * es;
        } else {
            pr = p.pos + b * p.ps0 + s * p.ps1;
        }
        const kf_rope_t &t = p.t[sel];
        const T *xh = (const T *)t.x + b * t.xs.s0 + s * t.xs.s1 + h * t.xs.s2;
        T *yh = (T *)t.y + b * t.ys.s0 + s * t.ys.s1 + h * t.ys.s2;
        kf_rope_unit<T, AL, TAB>(p, xh, yh, u, cr, sr, pr, 1.0f, 0);
    }
}

/* heads kernel (16-byte path, flat index < 2^31): item = (token, group of
 * KF_ROPE_HG heads of q or of k, unit u). The unit's cos / sin (table
 * chunks, or sincos of the angles) are made once and applied to every head
 * of the group, whose x chunks are all loaded first: half the table loads
 * and angle math of one-head-per-item, twice the bytes in flight per
 * thread. Lanes of a warp walk u, so each head's chunks are contiguous.
 * Item order (HM): token-major (HM 0: (b, s, group, u), for heads
 * contiguous per token, [B, S, H, Dh] memory) or head-major (HM 1: (b,
 * group, s, u), for q stored [B, H, S, Dh], where the next token of the same
 * head is the next Dh elements): either way a warp's loads of one head run
 * over contiguous memory (token-major over [B, H, S, Dh] memory, a warp's
 * 32 lanes touched 4 heads S Dh elements apart, 128 bytes each). */
/* Two heads per item, not four: with four, HALF rows took 80-106 registers
 * (two or three 256-thread blocks per SM); with two, 64-80 (three or four).
 * H200, kfuse bench, Llama q 32 + k 8 heads x 128: 1 x 4096 tokens bf16 1.07
 * -> 1.06 x copy, f32 1.06 -> 1.05-1.06; 16 x 1 (decode) bf16 1.75 -> 1.53, f32
 * 1.51 -> 1.37; Python harness, HF's projection view: kfuse / Liger 1.06-1.07
 * -> 1.04. Measured and dropped: four heads with f32 tables reloaded per head
 * (80 registers, bf16 1.13), and a kernel of one token per block pass whose
 * threads keep their unit's table chunks for two heads and derive the
 * token's offsets once (about as many instructions per element as this one,
 * and the same time: BENCHMARKS.md twenty-fourth set). */
#define KF_ROPE_HG 2
/* Its rows are read and written default-cached (kf_ld16_rows<false>), not
 * streamed: H200, Llama rope 4096 tokens, kfuse bench bf16 1.06 x copy
 * either way, f32 1.06 -> 1.03; the PyTorch harness's kernel time / copy
 * (bf16) 1.16 -> 1.07, HF's projection view 1.16 -> 1.08 (Liger 4 -> 2 %
 * ahead). Decode (16 tokens) lost 0.05 us: bf16 1.40 -> 1.44, f32 1.28 ->
 * 1.31. */
/* HALF: the convention; TAB: the angle form (0 positions, 1 tables of any
 * dtype, as f32 values, 2 tables of T's own 16-bit dtype, held packed and
 * unpacked per head), fixed at compile time as in the flat kernel (the one
 * kernel of run-time forms took 108 registers at four heads per item). */
template <typename T, int HALF, int TAB, int HM>
__global__ void __launch_bounds__(256, (HALF ? (TAB == 1 ? 3 : 4) : 5)) kf_rope_heads_kernel(kf_rope_p p)
{
    const int V = 16 / sizeof(T);
    const bool FAST = sizeof(T) == 2;
    const int HG = KF_ROPE_HG;
    const unsigned int n = (unsigned int)(p.tokens * p.gunits);
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += gridDim.x * blockDim.x) {
        int g, u;
        int64_t b, s;
        if (HM) { /* i = ((b * groups + g) * S + s) * upb + u */
            const unsigned int gs = kf_fdiv_q(i, p.fupb);
            u = (int)(i - gs * (unsigned int)p.upb);
            const unsigned int bg = kf_fdiv_q(gs, p.fS);
            s = gs - bg * (unsigned int)p.S;
            const unsigned int bq = kf_fdiv_q(bg, p.fgroups);
            g = (int)(bg - bq * (unsigned int)p.fgroups.d);
            b = bq;
        } else { /* i = (b S + s) * gunits + g * upb + u */
            const unsigned int tok = kf_fdiv_q(i, p.fgu);
            const int uu = (int)(i - tok * (unsigned int)p.gunits);
            g = (int)kf_fdiv_q((unsigned int)uu, p.fupb);
            u = uu - g * p.upb;
            const unsigned int bq = kf_fdiv_q(tok, p.fS);
            b = bq;
            s = tok - bq * (unsigned int)p.S;
        }
        const int sel = g < p.gq ? 0 : 1;
        const int h0 = (sel ? g - p.gq : g) * HG;
        const kf_rope_t &t = p.t[sel];
        const int nh = t.H - h0 < HG ? t.H - h0 : HG;
        const T *x0 = (const T *)t.x + b * t.xs.s0 + s * t.xs.s1 + (int64_t)h0 * t.xs.s2;
        T *y0 = (T *)t.y + b * t.ys.s0 + s * t.ys.s1 + (int64_t)h0 * t.ys.s2;
        uint4 ra[HG], rb[HALF ? HG : 1];
        if (u >= p.urot) { /* pass-through channels: copy */
            const int i0 = p.r + (u - p.urot) * V;
#pragma unroll
            for (int h = 0; h < HG; h++)
                if (h < nh)
                    ra[h] = kf_ld16_rows<false>(reinterpret_cast<const uint4 *>(x0 + h * t.xs.s2 + i0));
#pragma unroll
            for (int h = 0; h < HG; h++)
                if (h < nh)
                    kf_st16_rows<false>(reinterpret_cast<uint4 *>(y0 + h * t.ys.s2 + i0), ra[h]);
            continue;
        }
        const int i0 = u * V;
        const int h2 = HALF ? p.r >> 1 : 0; /* HALF: the partner's offset */
#pragma unroll
        for (int h = 0; h < HG; h++) {
            if (h < nh) {
                ra[h] = kf_ld16_rows<false>(reinterpret_cast<const uint4 *>(x0 + h * t.xs.s2 + i0));
                if (HALF)
                    rb[HALF ? h : 0] = kf_ld16_rows<false>(
                        reinterpret_cast<const uint4 *>(x0 + h * t.xs.s2 + h2 + i0));
            }
        }
        /* ca, sa: for channels i0 + j; cb, sb: for their HALF partners (TAB
         * 2: packed in pc / ps, unpacked per head) */
        float ca[V], sa[V], cb[V], sb[V];
        uint4 pca, psa, pcb, psb;
        if (TAB == 2) {
            const T *cr = (const T *)p.cos + (b * p.cs0 + s * p.cs1);
            const T *sr = (const T *)p.sin + (b * p.ss0 + s * p.ss1);
            pca = KF_LDG(reinterpret_cast<const uint4 *>(cr + i0));
            psa = KF_LDG(reinterpret_cast<const uint4 *>(sr + i0));
            pcb = pca;
            psb = psa;
            if (HALF) {
                pcb = KF_LDG(reinterpret_cast<const uint4 *>(cr + h2 + i0));
                psb = KF_LDG(reinterpret_cast<const uint4 *>(sr + h2 + i0));
            }
        } else if (TAB == 1) {
            const int es = p.tdt == KF_F32 ? 4 : 2;
            const void *cr = (const char *)p.cos + (b * p.cs0 + s * p.cs1) * es;
            const void *sr = (const char *)p.sin + (b * p.ss0 + s * p.ss1) * es;
            kf_ldp<T, true>(cr, p.tdt, i0, V, ca);
            kf_ldp<T, true>(sr, p.tdt, i0, V, sa);
            if (HALF) {
                kf_ldp<T, true>(cr, p.tdt, h2 + i0, V, cb);
                kf_ldp<T, true>(sr, p.tdt, h2 + i0, V, sb);
            }
        } else {
            const float *pr = p.pos + b * p.ps0 + s * p.ps1;
#pragma unroll
            for (int j = 0; j < V; j++) {
                /* HALF: pair i0 + j; INTERLEAVED: pair (i0 + j) / 2 */
                if (HALF || (j & 1) == 0) {
                    kf_rope_angle<FAST>(p, pr, HALF ? i0 + j : (i0 + j) >> 1, &ca[j], &sa[j]);
                } else {
                    ca[j] = ca[j - 1];
                    sa[j] = sa[j - 1];
                }
                cb[j] = ca[j];
                sb[j] = sa[j];
            }
        }
#pragma unroll
        for (int h = 0; h < HG; h++) {
            if (h < nh) {
                if (TAB == 2) {
                    /* opaque per head: unpacked here, not held as f32 */
                    kf_opaque(pca);
                    kf_opaque(psa);
                    kf_unpack<T, V>(pca, ca);
                    kf_unpack<T, V>(psa, sa);
                    if (HALF) {
                        kf_opaque(pcb);
                        kf_opaque(psb);
                        kf_unpack<T, V>(pcb, cb);
                        kf_unpack<T, V>(psb, sb);
                    }
                }
                float a[V], o[V];
                kf_unpack<T, V>(ra[h], a);
                if (HALF) {
                    float bb[V], ob[V];
                    kf_unpack<T, V>(rb[HALF ? h : 0], bb);
#pragma unroll
                    for (int j = 0; j < V; j++) {
                        o[j] = a[j] * ca[j] - bb[j] * sa[j];
                        ob[j] = bb[j] * cb[j] + a[j] * sb[j];
                    }
                    kf_st16_rows<false>(reinterpret_cast<uint4 *>(y0 + h * t.ys.s2 + h2 + i0),
                                   kf_pack<T, V>(ob));
                } else {
#pragma unroll
                    for (int j = 0; j < V; j += 2) {
                        o[j] = a[j] * ca[j] - a[j + 1] * sa[j];
                        o[j + 1] = a[j + 1] * ca[j + 1] + a[j] * sa[j + 1];
                    }
                }
                kf_st16_rows<false>(reinterpret_cast<uint4 *>(y0 + h * t.ys.s2 + i0), kf_pack<T, V>(o));
            }
        }
    }
}

/* the heads kernel of the plan's convention and angle form (TAB 2 only for
 * 16-bit rows: f32 rows hold f32 tables as they are) */
template <typename T, int HALF, int HM>
static void kf_rope_heads_form(const kf_rope_p &p, unsigned int grid, int BS, kf_gpuStream_t st)
{
    if constexpr (sizeof(T) == 2) {
        if (p.use_table && p.tdt == kf_dtype_of<T>()) {
            kf_launch(kf_rope_heads_kernel<T, HALF, 2, HM>, grid, BS, 0, st, p);
            return;
        }
    }
    if (p.use_table) kf_launch(kf_rope_heads_kernel<T, HALF, 1, HM>, grid, BS, 0, st, p);
    else kf_launch(kf_rope_heads_kernel<T, HALF, 0, HM>, grid, BS, 0, st, p);
}

template <typename T>
static void kf_rope_heads_go(const kf_rope_p &p, bool head_major, unsigned int grid, int BS,
                             kf_gpuStream_t st)
{
    if (head_major) {
        if (p.half) kf_rope_heads_form<T, 1, 1>(p, grid, BS, st);
        else kf_rope_heads_form<T, 0, 1>(p, grid, BS, st);
    } else {
        if (p.half) kf_rope_heads_form<T, 1, 0>(p, grid, BS, st);
        else kf_rope_heads_form<T, 0, 0>(p, grid, BS, st);
    }
}

/* rms_norm_rope: one token per block pass; x's heads are contiguous (head
 * stride == Dh), so the token row is H * Dh contiguous elements. */
template <typename T, bool AL>
__global__ void __launch_bounds__(512, 1) kf_norm_rope_kernel(kf_rope_p p)
{
    const int V = 16 / sizeof(T);
    const kf_rope_t &t = p.t[0];
    const int D = t.H * p.Dh;
    const int nch = (D + V - 1) / V;
    const int items = t.H * p.upb;
    for (int64_t tok = blockIdx.x; tok < p.tokens; tok += gridDim.x) {
        int64_t b, s;
        const void *cr, *sr;
        const float *pr;
        kf_rope_token(p, tok, &b, &s, &cr, &sr, &pr);
        const T *xr = (const T *)t.x + b * t.xs.s0 + s * t.xs.s1;
        T *yr = (T *)t.y + b * t.ys.s0 + s * t.ys.s1;
        float acc = 0.0f;
        for (int c = threadIdx.x; c < nch; c += blockDim.x) {
            float v[V];
            int j0 = c * V;
            kf_ld<T, V, AL>(xr + j0, D - j0 < V ? D - j0 : V, v);
#pragma unroll
            for (int j = 0; j < V; j++) acc += v[j] * v[j];
        }
        acc = kf_group_reduce<KF_RED_SUM>(acc, (int)blockDim.x, 0);
        const float rstd = rsqrtf(acc / (float)D + p.eps);
        for (int w = threadIdx.x; w < items; w += blockDim.x) {
            int h = w / p.upb;
            int u = w - h * p.upb;
            kf_rope_unit<T, AL>(p, xr + (int64_t)h * t.xs.s2, yr + (int64_t)h * t.ys.s2, u, cr,
                                sr, pr, rstd, (int64_t)h * p.Dh);
        }
        /* the next token's reduction begins with a barrier: no hazard on part[] */
    }
}


/* ---- row kernel: INTERLEAVED, 16-byte path, heads of a token contiguous ----
 * One token row (H * Dh channels) per group of G threads, RPB = blockDim / G
 * rows per block, K chunks of 16 bytes per thread (chunk lane + k * G), the
 * geometry of the tuned norm kernels (kf_row_geometry). Interleaved pairs
 * (2i, 2i+1) never straddle a chunk (Dh and r are multiples of V), so each
 * thread rotates its own chunks: no exchange, no re-read of x.
 *   NORM: rms_norm_rope: every chunk of the row is loaded before any use, the
 *     sum of squares is reduced over the group, then normalize, weight, rope
 *     and store from registers (the row is held raw: K x 4 registers).
 *   POS: positions form: the token's n_axes (<= 3) coordinates are loaded
 *     once per row into registers; per chunk, V/2 freqs and axis entries come
 *     as one 16-byte (8-byte for f32) read-only load each (8 KB tables: L1
 *     hits); the axis picks a coordinate by selects, one kf_sincos per pair.
 *     Else: cos/sin chunks of the table row (kf_ldp).
 * Napkin math (LTX, bf16, 2 x 8064 tokens x 2048): 132 MB of x + y -> ~37 us
 * at the copy rate; ALU ~40 instructions per pair (sincos ~25) = 16.5 M pairs
 * -> ~20 M warp instructions, ~20 us of issue over 132 SMs x 4 schedulers:
 * below the memory time, so it can hide behind the loads of other rows.
 * Measured (H200, bf16, cold L2, time / same-size copy): rms_norm_rope
 * positions 2 x 8064 x 2048 1.64 with the polynomial sincos, 1.35-1.37 with
 * the hardware one (one-token-per-block kernel: 3.05); rope positions 1.27
 * -> 1.06 (flat kernel: 2.32). rms_norm alone at this shape is 1.01, so
 * what rms_norm_rope still loses is in putting the two together: the
 * rotation's work (sincos, freqs / axis loads) all comes after the row's
 * reduction barrier, on the path to the stores. */
template <typename T, int K, bool NORM, bool POS, bool FRESH, bool ONE = false>
static __device__ __forceinline__ void kf_rope_row_body(const kf_rope_p &p)
{
    const int V = 16 / sizeof(T);
    const int NP = V / 2; /* pairs per chunk */
    const int G = p.G;
    /* ONE: G is a power of two: the group and lane by a shift and a mask
     * (ptxas re-derives the lane from %tid.x for each chunk: 3 instructions
     * where the fast division took 9; rms_norm_rope bf16, sm_90: 511 -> 498
     * instructions per warp and row after the reduction) */
    const int grp = ONE ? (int)(threadIdx.x >> p.lgG) : (int)kf_fdiv_q(threadIdx.x, p.fG);
    const int lane = (int)threadIdx.x - grp * G;
    const int RPB = p.RPB;
    const kf_rope_t &t = p.t[0];
    const int D = t.H * p.Dh; /* the token row; < 2^30, checked at launch */
    const int nch = D / V;

    /* the first loads wait on no loop test (every launched block has a
     * first row: grid <= tokens / RPB rounded up) and x's row address is
     * computed in full, not under the loads' tests (KF_ADDR_NOW): as the
     * lean norm kernel (norm.cu, kf_norm_lean_body). H200, 3 rounds:
     * rms_norm_rope 2 x 8064 x 2048 bf16 1.12 -> 1.09-1.10 x copy, f16 1.12
     * -> 1.09, f32 level; rope positions 2 x 1320 x 2048 f32 1.15 -> 1.13,
     * 16-bit 1.22 -> 1.21. The same in the peeled and fast norm kernels
     * was level or worse (rms_norm 8192 x 111 bf16 2.33 -> 2.36) and in the
     * rope heads kernel (a predicated first item, q's / k's fields read
     * unindexed) Llama decode went 1.54 -> 1.56 and 16-bit rows of the
     * positions form spilled: neither kept. */
    int64_t base = (int64_t)blockIdx.x * RPB;
    do {
        /* FRESH: the group and lane re-derived per row from a fresh %tid.x
         * read, so that they and the per-chunk offsets are not hoisted out
         * of the row loop (registers held across it: the 48-register kernel
         * spilled them) */
        int lane_r = lane, grp_r = grp;
        if (FRESH && ONE) {
            const int tid = kf_tid_x_fresh();
            grp_r = tid >> p.lgG;
            lane_r = tid & (G - 1);
        } else if (FRESH) {
            grp_r = kf_group_fresh(p.fG, G, &lane_r);
        }
        const int64_t tok = base + grp_r;
        const bool act = tok < p.tokens;
        const unsigned int ut = act ? (unsigned int)tok : 0u;
        /* ONE: tokens of every batch evenly spaced in x, y and the positions
         * (the launch checks it): token ut of batch 0, no division */
        const unsigned int bq = ONE ? 0u : kf_fdiv_q(ut, p.fS);
        const int64_t b = bq, s = ONE ? (int64_t)ut : (int64_t)(ut - bq * (unsigned int)p.S);
        const T *xr = (const T *)t.x + b * t.xs.s0 + s * t.xs.s1;
        KF_ADDR_NOW(xr);
        uint4 rc[K];
#pragma unroll
        for (int k = 0; k < K; k++) {
            const int c = lane_r + k * G;
            rc[k] = make_uint4(0u, 0u, 0u, 0u);
            if (act && (ONE || c < nch)) rc[k] = kf_ld16_stream(reinterpret_cast<const uint4 *>(xr + c * V));
        }
        float p0 = 0.0f, p1 = 0.0f, p2 = 0.0f;
        const void *cr = 0, *sr = 0;
        if (POS && ONE) {
            /* ONE: a warp's lanes are all on one row; lane i holds the
             * token's coordinate min(i, n_axes - 1) (in p0), and each pair
             * takes its axis's from there by a shuffle */
            const int lw = lane_r & (KF_WARP - 1);
            p0 = KF_LDG(p.pos + b * p.ps0 + s * p.ps1 + (lw < p.n_axes ? lw : p.n_axes - 1));
        } else if (POS) {
            const float *pr = p.pos + b * p.ps0 + s * p.ps1;
            p0 = KF_LDG(pr);
            p1 = p.n_axes > 1 ? KF_LDG(pr + 1) : p0;
            p2 = p.n_axes > 2 ? KF_LDG(pr + 2) : p1;
        } else {
            const int es = p.tdt == KF_F32 ? 4 : 2;
            cr = (const char *)p.cos + (b * p.cs0 + s * p.cs1) * es;
            sr = (const char *)p.sin + (b * p.ss0 + s * p.ss1) * es;
        }
        float rstd = 1.0f;
        if (NORM) {
            float acc = kf_chunks_sum<T, K, true>(rc);
            acc = kf_group_reduce<KF_RED_SUM, FRESH, ONE>(acc, G, grp_r);
            /* ONE: the mean by a multiply; the other rows keep the division
             * (a build that took the multiply there too read f32 rows at
             * 1.09 x copy against 1.07, H200) */
            rstd = rsqrtf((ONE ? acc * p.inv_D : acc / (float)D) + p.eps);
        }
        T *yr = (T *)t.y + b * t.ys.s0 + s * t.ys.s1;
        /* a weight of x's dtype without an offset: tested once per row */
        const bool wtyped = ONE || (NORM && p.w && p.wdt == kf_dtype_of<T>() && p.offset == 0.0f);
#pragma unroll
        for (int k = 0; k < K; k++) {
            const int c = lane_r + k * G;
            if (act && (ONE || c < nch)) {
                const int e = c * V;                       /* channel in the row */
                /* ONE: one head whose every channel rotates (LTX: 2048
                 * channels): no head index, no pass-through test */
                const int h = ONE ? 0 : (int)kf_fdiv_q((unsigned int)e, p.fDh);
                const int i = ONE ? e : e - h * p.Dh;      /* channel in the head */
                float v[V], o[V];
                kf_unpack<T, V>(rc[k], v);
                if (NORM) {
#pragma unroll
                    for (int j = 0; j < V; j++) v[j] *= rstd;
                    if (wtyped) { /* one test per chunk for the usual weight */
                        float wt[V];
                        kf_unpack<T, V>(KF_LDG(reinterpret_cast<const uint4 *>((const T *)p.w + e)), wt);
#pragma unroll
                        for (int j = 0; j < V; j++) v[j] *= wt[j];
                    } else if (p.w) { /* any dtype (kf_ldp), any offset */
                        float wt[V];
                        kf_ldp<T, true>(p.w, p.wdt, e, V, wt);
                        if (p.offset != 0.0f) { /* uniform: a branch, not per element */
#pragma unroll
                            for (int j = 0; j < V; j++) wt[j] += p.offset;
                        }
#pragma unroll
                        for (int j = 0; j < V; j++) v[j] *= wt[j];
                    }
                }
                if (ONE || i < p.r) { /* the whole chunk rotates: r % V == 0 */
                    if (POS) {
                        const int q0 = i >> 1;
                        float fr[NP];
                        int ax[NP];
                        if (NP == 4) {
                            const float4 f4 = KF_LDG(reinterpret_cast<const float4 *>(p.freqs + q0));
                            fr[0] = f4.x; fr[1 % NP] = f4.y; fr[2 % NP] = f4.z; fr[3 % NP] = f4.w;
                        } else {
                            const float2 f2 = KF_LDG(reinterpret_cast<const float2 *>(p.freqs + q0));
                            fr[0] = f2.x; fr[1 % NP] = f2.y;
                        }
                        if (ONE || p.axis) { /* ONE: an axis map is given */
                            if (NP == 4) {
                                const int4 a4 = KF_LDG(reinterpret_cast<const int4 *>(p.axis + q0));
                                ax[0] = a4.x; ax[1 % NP] = a4.y; ax[2 % NP] = a4.z; ax[3 % NP] = a4.w;
                            } else {
                                const int2 a2 = KF_LDG(reinterpret_cast<const int2 *>(p.axis + q0));
                                ax[0] = a2.x; ax[1 % NP] = a2.y;
                            }
                        } else {
#pragma unroll
                            for (int j = 0; j < NP; j++) ax[j] = 0;
                        }
                        /* the chunk's angles, one range test for all of
                         * them (a branch per chunk, not per pair) */
                        float an[NP];
                        bool small = true;
#pragma unroll
                        for (int j = 0; j < NP; j++) {
                            /* out-of-range axis entries clamp to 0 / n_axes - 1
                             * (p1, p2 repeat the last coordinate). ONE: one
                             * shuffle from lane ax[j] (lanes from n_axes on
                             * hold the last coordinate); entries < 0 or >= the
                             * warp width wrap modulo it, to some coordinate of
                             * the token: the map never addresses memory */
                            const float pa = ONE ? KF_SHFL_IDX(p0, ax[j])
                                                 : (ax[j] <= 0 ? p0 : (ax[j] == 1 ? p1 : p2));
                            an[j] = fr[j] * pa;
                            small = small && fabsf(an[j]) <= 1.0e5f;
                        }
                        if (small) kf_rotate_pairs<true, (sizeof(T) == 2)>(an, v, o);
                        else kf_rotate_pairs<false, (sizeof(T) == 2)>(an, v, o);
                    } else {
                        float cv[V], sv[V];
                        kf_ldp<T, true>(cr, p.tdt, i, V, cv);
                        kf_ldp<T, true>(sr, p.tdt, i, V, sv);
#pragma unroll
                        for (int j = 0; j < V; j += 2) {
                            o[j] = v[j] * cv[j] - v[j + 1] * sv[j];
                            o[j + 1] = v[j + 1] * cv[j + 1] + v[j] * sv[j + 1];
                        }
                    }
                } else {
#pragma unroll
                    for (int j = 0; j < V; j++) o[j] = v[j];
                }
                kf_st16_stream(reinterpret_cast<uint4 *>(yr + e), kf_pack<T, V>(o));
            }
        }
        /* the next row's reduction begins with a barrier: no hazard on part[] */
    } while ((base += (int64_t)gridDim.x * RPB) < p.tokens);
}

template <typename T, int K, bool NORM, bool POS, bool ONE>
__global__ void __launch_bounds__(512, (K <= 4 ? 2 : 1)) kf_rope_row_kernel(kf_rope_p p)
{
    kf_rope_row_body<T, K, NORM, POS, false, ONE>(p);
}
/* rms_norm_rope, positions form, 16-bit rows of 4 chunks per thread: under 48
 * registers (sm_90; 64 on sm_80, KF_KERNEL_REGS_48), 40-42 resident warps per
 * SM instead of 32, no spill with FRESH (H200, 2 x 8064 x 2048 bf16:
 * 1.29 -> 1.21 x copy with the per-chunk range test and weight load above;
 * f16 fits since the row's group is re-derived per row too). The table
 * form and f32 rows other than the ONE form spill under 48 and keep 64. The
 * ONE form (the coordinate by a shuffle, no p1 / p2) fits in every dtype:
 * rope alone 16-bit 46 registers capped (50 uncapped: 56 allocated, 36 warps
 * per SM), f32 42; f32 rms_norm_rope 48 (55 uncapped: 36 warps per SM
 * against 42), and fewer instructions capped than not (sm_90, per warp and
 * row after the reduction: 431 -> 418). */
#define KF_ROPE_CAP48(T, K, NORM, POS, ONE) \
    ((K) == 4 && (POS) && ((ONE) || ((NORM) && sizeof(T) == 2)))
template <typename T, int K, bool NORM, bool POS, bool ONE>
__global__ void KF_KERNEL_REGS_48 kf_rope_row_kernel48(kf_rope_p p)
{
    kf_rope_row_body<T, K, NORM, POS, true, ONE>(p);
}

template <typename T, int K, bool NORM, bool POS>
static void kf_rope_row_launch(const kf_rope_p &p, unsigned int grid, int BS, kf_gpuStream_t st)
{
    /* ONE: a row of one head rotating whole, every chunk slot of the
     * group filled (D = G K V), a weight of the rows' dtype without an
     * offset, the batches' tokens evenly spaced in x, y and the positions,
     * an axis map (LTX's query / key norm), rows of whole warps (G a
     * multiple of the warp width and a power of two): no head index, no pass-through,
     * chunk-slot, weight-kind or axis-map tests per chunk, no token
     * division, each pair's coordinate by one shuffle from the lane that
     * holds it, the warp partials read as one vector (an estimated 15 %
     * fewer instructions). This kernel's time tracks its instructions (issue-
     * bound phases): H200, rms_norm_rope 2 x 8064 x 2048, bf16 1.10-1.11
     * -> 1.04-1.05 x copy, f16 1.10-1.11 -> 1.03-1.05 (48 registers); f32
     * 1.06 -> 1.02 (64 registers). Rope alone (LTX's rope in the positions
     * form: no weight) takes it too. */
    bool one = false;
    if constexpr (K == 4 && POS) {
        const kf_rope_t &t = p.t[0];
        const bool even = p.tokens == p.S || (t.xs.s0 == p.S * t.xs.s1 && t.ys.s0 == p.S * t.ys.s1 &&
                                              p.ps0 == p.S * p.ps1);
        one = t.H == 1 && p.r == p.Dh && p.Dh == p.G * K * (16 / (int)sizeof(T)) && even &&
              p.axis && p.gwarps && p.lgG >= 0 && (!NORM || (p.w && p.wdt == kf_dtype_of<T>() && p.offset == 0.0f));
    }
    if constexpr (K == 4 && POS) {
        if (one) {
            if constexpr (KF_ROPE_CAP48(T, K, NORM, POS, true))
                kf_launch(kf_rope_row_kernel48<T, K, NORM, POS, true>, grid, BS, 0, st, p);
            else kf_launch(kf_rope_row_kernel<T, K, NORM, POS, true>, grid, BS, 0, st, p);
        } else {
            if constexpr (KF_ROPE_CAP48(T, K, NORM, POS, false))
                kf_launch(kf_rope_row_kernel48<T, K, NORM, POS, false>, grid, BS, 0, st, p);
            else kf_launch(kf_rope_row_kernel<T, K, NORM, POS, false>, grid, BS, 0, st, p);
        }
    } else {
        kf_launch(kf_rope_row_kernel<T, K, NORM, POS, false>, grid, BS, 0, st, p);
    }
}

template <typename T, int K>
static void kf_rope_row_go_k(const kf_rope_p &p, unsigned int grid, int BS, bool norm, bool pos,
                             kf_gpuStream_t st)
{
    if (norm) {
        if (pos) kf_rope_row_launch<T, K, true, true>(p, grid, BS, st);
        else kf_rope_row_launch<T, K, true, false>(p, grid, BS, st);
    } else {
        if (pos) kf_rope_row_launch<T, K, false, true>(p, grid, BS, st);
        else kf_rope_row_launch<T, K, false, false>(p, grid, BS, st);
    }
}

template <typename T>
static void kf_rope_row_go(const kf_rope_p &p, const kf_rowgeom &g, bool norm, bool pos,
                           kf_gpuStream_t st)
{
    switch (g.K) {
    case 1: kf_rope_row_go_k<T, 1>(p, g.grid, g.BS, norm, pos, st); break;
    case 2: kf_rope_row_go_k<T, 2>(p, g.grid, g.BS, norm, pos, st); break;
    case 4: kf_rope_row_go_k<T, 4>(p, g.grid, g.BS, norm, pos, st); break;
    default: kf_rope_row_go_k<T, 8>(p, g.grid, g.BS, norm, pos, st); break;
    }
}

/* Whether the row kernel takes this launch (q only): interleaved, every
 * access on the 16-byte path (al), heads contiguous in x and y, the token
 * row short enough for registers, 32-bit token indices, and (positions)
 * freqs / axis aligned for their vector loads. Fills p->G and the grid. */
static bool kf_rope_row_plan(kf_ctx *ctx, kf_rope_p *p, bool al, int V, kf_rowgeom *g)
{
    if (p->half || !al || p->nt != 1) return false;
    const kf_rope_t &t = p->t[0];
    if (t.H > 1 && (t.xs.s2 != p->Dh || t.ys.s2 != p->Dh)) return false;
    if (p->tokens >= (1ll << 31) || p->S >= (1ll << 31)) return false;
    if (!p->use_table) {
        if ((uintptr_t)p->freqs % 16 != 0 || (uintptr_t)p->axis % 16 != 0) return false;
        if (p->n_axes < 1 || p->n_axes > 3) return false;
    }
    int64_t D = (int64_t)t.H * p->Dh;
    if (D >= (1ll << 30) || D % V != 0 || p->Dh % V != 0 || p->r % V != 0) return false;
    *g = kf_row_geometry(ctx, p->tokens, D / V, 8, 512, 4, false);
    if (g->K <= 0) return false;
    p->G = g->G;
    p->RPB = g->RPB;
    p->fG = kf_fdiv_make((unsigned int)g->G);
    p->gwarps = g->G % ctx->facts.warp_size == 0;
    p->lgG = -1;
    for (int l = 0; l < 31; l++)
        if (g->G == 1 << l) p->lgG = l;
    p->fS = kf_fdiv_make((unsigned int)p->S);
    p->fDh = kf_fdiv_make((unsigned int)p->Dh);
    p->inv_D = (float)(1.0 / (double)D);
    return true;
}

static int kf_same_view(const kf_tensor *a, const kf_tensor *b)
{
    if (a->data != b->data) return 0;
    for (int i = 0; i < 3; i++)
        if (a->shape[i] > 1 && a->stride[i] != b->stride[i]) return 0;
    return 1;
}

/* The kernels hold head counts and the head dim in 32-bit ints (and their
 * sums and products below 2^31): more than 2^30 heads in q or k, or a head
 * dim over 2^30, is refused here rather than cut (the API bounds neither) */
static kf_status kf_rope_dims_ok(kf_ctx *ctx, const char *op, const kf_tensor *q,
                                 const kf_tensor *k)
{
    const int64_t lim = (int64_t)1 << 30;
    if (q->shape[2] > lim || (k && k->shape[2] > lim) || q->shape[3] > lim)
        return kf_set_error(ctx, KF_ERR_UNSUPPORTED,
                            "%s: %lld heads of %lld channels%s: the GPU kernels take at most 2^30 "
                            "heads per tensor and 2^30 channels per head",
                            op, (long long)q->shape[2], (long long)q->shape[3],
                            k && k->shape[2] > lim ? " (k: more heads)" : "");
    return KF_OK;
}

/* Fill the parameters shared by rope and rms_norm_rope; returns whether the
 * 16-byte path applies to every chunk of the launch (kf_rope_dims_ok first:
 * the head counts and the head dim are cut to int here). */
static bool kf_rope_setup(kf_ctx *ctx, kf_rope_p *p, const kf_tensor *q, const kf_tensor *k,
                          const kf_tensor *qo, const kf_tensor *ko, const kf_rope_plan *rp)
{
    memset(p, 0, sizeof(*p));
    int V = 16 / (int)kf_dtype_size((kf_dtype)q->dtype);
    p->nt = k ? 2 : 1;
    p->t[0].x = q->data; p->t[0].xs = kf_strides3(q);
    p->t[0].y = qo->data; p->t[0].ys = kf_strides3(qo);
    p->t[0].H = (int)q->shape[2];
    if (k) {
        p->t[1].x = k->data; p->t[1].xs = kf_strides3(k);
        p->t[1].y = ko->data; p->t[1].ys = kf_strides3(ko);
        p->t[1].H = (int)k->shape[2];
    }
    p->S = q->shape[1];
    p->tokens = q->shape[0] * q->shape[1];
    p->Dh = (int)q->shape[3];
    p->r = rp->rotary_dim;
    p->half = rp->convention == KF_ROPE_HALF;
    p->urot = p->half ? ((p->r / 2) + V - 1) / V : (p->r + V - 1) / V;
    bool inplace = kf_same_view(q, qo) && (!k || kf_same_view(k, ko));
    p->upass = inplace ? 0 : (p->Dh - p->r + V - 1) / V;
    p->upb = p->urot + p->upass;
    p->use_table = rp->use_table;
    bool al = kf_rows_aligned16(q) && kf_rows_aligned16(qo) && kf_rows_aligned16(k) &&
              kf_rows_aligned16(ko) && p->Dh % V == 0 &&
              (p->half ? (p->r / 2) % V == 0 : p->r % V == 0);
    if (p->use_table) {
        p->cos = rp->cos.data; p->cs0 = rp->cos.stride[0]; p->cs1 = rp->cos.stride[1];
        p->sin = rp->sin.data; p->ss0 = rp->sin.stride[0]; p->ss1 = rp->sin.stride[1];
        p->tdt = rp->cos.dtype;
        al = al && kf_rows_aligned16(&rp->cos) && kf_rows_aligned16(&rp->sin);
    } else {
        p->pos = (const float *)rp->positions.data;
        p->ps0 = rp->positions.stride[0];
        p->ps1 = rp->positions.stride[1];
        p->freqs = (const float *)rp->freqs.data;
        p->axis = (const int *)rp->axis.data;
        p->n_axes = rp->n_axes > 0 ? rp->n_axes : (int)rp->positions.shape[3];
        p->tdt = KF_F32;
    }
    (void)ctx;
    return al;
}

kf_status kf_gpu_rope(kf_ctx *ctx, const kf_tensor *q, const kf_tensor *k,
                      const kf_tensor *q_out, const kf_tensor *k_out, const kf_rope_plan *rope)
{
    kf_rope_p p;
    kf_status dst = kf_rope_dims_ok(ctx, "rope", q, k);
    if (dst != KF_OK) return dst;
    bool al = kf_rope_setup(ctx, &p, q, k, q_out, k_out, rope);
    if (p.tokens == 0 || p.upb == 0) return KF_OK;
    int64_t units = ((int64_t)p.t[0].H + (k ? p.t[1].H : 0)) * p.upb;
    if (units > (1 << 30))
        return kf_set_error(ctx, KF_ERR_UNSUPPORTED, "rope: too many heads x channels per token");
    p.units = (int)units;
    kf_rowgeom rg;
    if (!p.use_table && kf_rope_row_plan(ctx, &p, al, 16 / (int)kf_dtype_size((kf_dtype)q->dtype), &rg)) {
        kf_gpuStream_t rs = kf_stream(ctx);
        switch (q->dtype) {
        case KF_F32: kf_rope_row_go<float>(p, rg, false, true, rs); break;
        case KF_F16: kf_rope_row_go<kf_f16_t>(p, rg, false, true, rs); break;
        case KF_BF16: kf_rope_row_go<kf_bf16_t>(p, rg, false, true, rs); break;
        default: return kf_set_error(ctx, KF_ERR_DTYPE, "rope: unsupported dtype");
        }
        return KF_LAUNCH_CHECK(ctx, "rope");
    }
    const int BS = 256;
    /* several heads per tensor: the heads kernel (one cos / sin per group) */
    const int HG = KF_ROPE_HG;
    p.gq = (p.t[0].H + HG - 1) / HG;
    const int groups = p.gq + (k ? (p.t[1].H + HG - 1) / HG : 0); /* q + k head groups */
    int64_t gunits = (int64_t)groups * p.upb;
    if (al && (p.t[0].H > 1 || (k && p.t[1].H > 1)) && p.tokens * gunits < (1ll << 31) &&
        p.S < (1ll << 31)) {
        p.gunits = (int)gunits;
        p.fgu = kf_fdiv_make((unsigned int)gunits);
        p.fupb = kf_fdiv_make((unsigned int)p.upb);
        p.fS = kf_fdiv_make((unsigned int)p.S);
        p.fgroups = kf_fdiv_make((unsigned int)groups);
        /* head-major items when q's heads lie further apart than its tokens */
        const bool hm = p.t[0].xs.s2 > p.t[0].xs.s1;
        /* few items (decode): smaller blocks, so that they spread over more
         * SMs (Llama 16 x 1: 2560 items, 10 blocks of 256 -> 40 of 64).
         * H200, 3 rounds: 16 x 1 bf16 / f16 2.31 -> 2.12 us (1.53 -> 1.40 x
         * copy), f32 1.36 -> 1.29; 1 x 4096 level; down to 32 (80 blocks):
         * level with 64 */
        const int64_t items = p.tokens * gunits;
        const int hbs = kf_spread_block(ctx, items, BS, 64, 1);
        unsigned int hgrid = kf_flat_grid(ctx, items, hbs);
        kf_gpuStream_t hs = kf_stream(ctx);
        switch (q->dtype) {
        case KF_F32: kf_rope_heads_go<float>(p, hm, hgrid, hbs, hs); break;
        case KF_F16: kf_rope_heads_go<kf_f16_t>(p, hm, hgrid, hbs, hs); break;
        case KF_BF16: kf_rope_heads_go<kf_bf16_t>(p, hm, hgrid, hbs, hs); break;
        default: return kf_set_error(ctx, KF_ERR_DTYPE, "rope: unsupported dtype");
        }
        return KF_LAUNCH_CHECK(ctx, "rope");
    }
    p.tpb = p.units >= BS ? 1 : BS / p.units;
    int64_t nitems = p.tokens * p.units;
    bool flat = nitems < (1ll << 31) && p.S < (1ll << 31);
    unsigned int grid;
    if (flat) {
        p.fu = kf_fdiv_make((unsigned int)p.units);
        p.fupb = kf_fdiv_make((unsigned int)p.upb);
        p.fS = kf_fdiv_make((unsigned int)p.S);
        grid = kf_flat_grid(ctx, nitems, BS);
    } else {
        int64_t need = (p.tokens + p.tpb - 1) / p.tpb;
        grid = kf_flat_grid(ctx, need * BS, BS);
    }
    kf_gpuStream_t st = kf_stream(ctx);
#define KF_ROPE_GO(T)                                                                \
    do {                                                                             \
        if (flat) {                                                                  \
            if (p.use_table && p.tdt == KF_F32) {                                    \
                if (al) kf_launch(kf_rope_flat_kernel<T, true, 1>, grid, BS, 0, st, p);     \
                else kf_launch(kf_rope_flat_kernel<T, false, 1>, grid, BS, 0, st, p);       \
            } else if (p.use_table) {                                                \
                if (al) kf_launch(kf_rope_flat_kernel<T, true, 2>, grid, BS, 0, st, p);     \
                else kf_launch(kf_rope_flat_kernel<T, false, 2>, grid, BS, 0, st, p);       \
            } else {                                                                 \
                if (al) kf_launch(kf_rope_flat_kernel<T, true, 0>, grid, BS, 0, st, p);     \
                else kf_launch(kf_rope_flat_kernel<T, false, 0>, grid, BS, 0, st, p);       \
            }                                                                        \
        } else {                                                                     \
            if (al) kf_launch(kf_rope_kernel<T, true>, grid, BS, 0, st, p);                 \
            else kf_launch(kf_rope_kernel<T, false>, grid, BS, 0, st, p);                   \
        }                                                                            \
    } while (0)
    switch (q->dtype) {
    case KF_F32: KF_ROPE_GO(float); break;
    case KF_F16: KF_ROPE_GO(kf_f16_t); break;
    case KF_BF16: KF_ROPE_GO(kf_bf16_t); break;
    default: return kf_set_error(ctx, KF_ERR_DTYPE, "rope: unsupported dtype");
    }
#undef KF_ROPE_GO
    return KF_LAUNCH_CHECK(ctx, "rope");
}

kf_status kf_gpu_rms_norm_rope(kf_ctx *ctx, const kf_tensor *x, const kf_tensor *w, float eps,
                               int mode, float offset, const kf_rope_plan *rope,
                               const kf_tensor *y)
{
    kf_rope_p p;
    kf_status dst = kf_rope_dims_ok(ctx, "rms_norm_rope", x, NULL);
    if (dst != KF_OK) return dst;
    bool al = kf_rope_setup(ctx, &p, x, NULL, y, NULL, rope);
    /* the norm needs every channel: no pass-through skipping when in place
     * (the pass-through channels are normalized too) */
    int V = 16 / (int)kf_dtype_size((kf_dtype)x->dtype);
    p.upass = (p.Dh - p.r + V - 1) / V;
    p.upb = p.urot + p.upass;
    p.norm = 1;
    p.w = w ? w->data : NULL;
    p.wdt = w ? w->dtype : KF_F32;
    p.eps = eps;
    p.offset = mode == KF_RMS_GEMMA ? offset : 0.0f;
    /* "the normalized value is not rounded before rope": llama's rounding of
     * n to the dtype is skipped, so llama acts as none here */
    p.llama = 0;
    al = al && kf_rows_aligned16(w);
    if (p.tokens == 0 || p.Dh == 0 || p.t[0].H == 0) return KF_OK;
    int64_t D = (int64_t)p.t[0].H * p.Dh;
    if (D > (1 << 30))
        return kf_set_error(ctx, KF_ERR_UNSUPPORTED, "rms_norm_rope: rows too long");
    kf_rowgeom rg;
    if (kf_rope_row_plan(ctx, &p, al, V, &rg)) {
        kf_gpuStream_t rs = kf_stream(ctx);
        const bool pos = !p.use_table;
        switch (x->dtype) {
        case KF_F32: kf_rope_row_go<float>(p, rg, true, pos, rs); break;
        case KF_F16: kf_rope_row_go<kf_f16_t>(p, rg, true, pos, rs); break;
        case KF_BF16: kf_rope_row_go<kf_bf16_t>(p, rg, true, pos, rs); break;
        default: return kf_set_error(ctx, KF_ERR_DTYPE, "rms_norm_rope: unsupported dtype");
        }
        return KF_LAUNCH_CHECK(ctx, "rms_norm_rope");
    }
    int W = ctx->facts.warp_size;
    int64_t nch = (D + V - 1) / V;
    int64_t bs = ((nch + 1) / 2 + W - 1) / W * W;
    if (bs > 512) bs = 512;
    if (bs < W) bs = W;
    int BS = (int)bs;
    unsigned int grid = kf_flat_grid(ctx, p.tokens * BS, BS);
    kf_gpuStream_t st = kf_stream(ctx);
    switch (x->dtype) {
    case KF_F32:
        if (al) kf_launch(kf_norm_rope_kernel<float, true>, grid, BS, 0, st, p);
        else kf_launch(kf_norm_rope_kernel<float, false>, grid, BS, 0, st, p);
        break;
    case KF_F16:
        if (al) kf_launch(kf_norm_rope_kernel<kf_f16_t, true>, grid, BS, 0, st, p);
        else kf_launch(kf_norm_rope_kernel<kf_f16_t, false>, grid, BS, 0, st, p);
        break;
    case KF_BF16:
        if (al) kf_launch(kf_norm_rope_kernel<kf_bf16_t, true>, grid, BS, 0, st, p);
        else kf_launch(kf_norm_rope_kernel<kf_bf16_t, false>, grid, BS, 0, st, p);
        break;
    default: return kf_set_error(ctx, KF_ERR_DTYPE, "rms_norm_rope: unsupported dtype");
    }
    return KF_LAUNCH_CHECK(ctx, "rms_norm_rope");
}
