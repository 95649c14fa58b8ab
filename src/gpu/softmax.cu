/* softmax.cu - row-wise softmax on the GPU: y = softmax(scale * x) in f32,
 * max-subtracted. The max is taken of t = x * sgn(scale) (exact: no product
 * can overflow), and each exponent is scale * x - max(scale * x) =
 * |scale| (t - max t): one FMA, t |scale| - (max t) |scale|, where the row's
 * (max t) |scale| is under 2^24 in magnitude; else (huge logits: scale * x
 * may overflow f32; or the row holds +inf or is all -inf) the difference
 * first, in a branch uniform over the row, which gives the limit (exp of
 * -inf: 0) where only a product overflows. The max reduction propagates NaN
 * (so a NaN row gives NaN, as PyTorch); a row of all -inf, or with +inf,
 * gives (-inf) - (-inf) or inf - inf = NaN everywhere; one row never affects
 * another.
 *
 * Napkin math (H200, bf16): 8192 x 4096 and 32768 x 1024 are both 64 MiB in +
 * 64 MiB out = 134 MB -> ~37 us at the copy rate for that size. The row stays
 * in registers between the two reductions and the write, so x is read once.
 * Arithmetic: one exponential per element (kept in registers between the sum
 * and the write): 33.5 M exp2 on the 16-per-clock special-function units of
 * 132 SMs is ~8 us of issue, hidden under the memory time. 16-bit outputs use
 * exp2 of x * (scale * log2 e) - max (about 2 ulp of f32, far below a 16-bit
 * rounding); f32 outputs keep the accurate expf.
 * Geometry: kf_row_geometry (common.cuh), as the norms: D = 1024 bf16 -> a
 * warp per row (32 x 4 chunks), 8 rows per 256-thread block; D = 4096 ->
 * 128 threads x 4 chunks, a block per row; odd D peels each row to its
 * 16-byte boundary (kf_ldr_m); rows longer than 512 x 8 chunks, or x and y
 * with different row phases, take the streaming kernel (3 passes over x).
 * Reductions: butterfly shuffles + one shared exchange, fixed order. */
#include "common.cuh"

typedef struct kf_softmax_p {
    const void *x; kf_st3 xs;
    void *y; kf_st3 ys;
    int64_t rows, s1, s2, D;
    float scale;
    int G;
    int RPB;        /* rows per block (blockDim.x / G) */
    kf_fdiv fG;     /* G as a fast divisor (threadIdx.x / G) */
    kf_fdiv f1, f2;
} kf_softmax_p;

/* t = x * sgn(scale), the values whose max is taken, and the factor a of
 * the exponents a (t - max t). Scale +-0: t = 0 * x (0, NaN for an infinite
 * x) with a = 1, so that the slots outside a row (-inf) still give exp 0 */
__device__ __forceinline__ float kf_softmax_sign(float scale)
{
    return scale > 0.0f ? 1.0f : scale < 0.0f ? -1.0f : 0.0f;
}

__device__ __forceinline__ float kf_softmax_abs(float scale)
{
    return scale != 0.0f ? fabsf(scale) : 1.0f;
}

/* whether the one-FMA exponent t |scale| - ma applies, ma = m * |scale|
 * rounded: each exponent of the row then carries ma's rounding error, the
 * same for all (it cancels in the normalisation), at most 1 while |ma| <
 * 2^24; beyond, and for +-inf / NaN, the difference first (exact for the
 * elements near the max, the ones that count) */
__device__ __forceinline__ bool kf_softmax_fma_ok(float ma)
{
    return fabsf(ma) < 16777216.0f; /* 2^24; false for NaN */
}

/* the exponent scale * x - max(scale * x) of t = x * sgn(scale), the row's
 * max m of t, a = |scale|, ma = m * a (the streaming kernel's form; the
 * register kernel branches once per row instead) */
__device__ __forceinline__ float kf_softmax_u(float t, float m, float a, float ma, bool fma_ok)
{
    return fma_ok ? fmaf(t, a, -ma) : (t - m) * a;
}

/* K chunks per thread in registers; ALN 1: aligned chunks, 2: peeled rows */
template <typename T, int K, int ALN>
__global__ void __launch_bounds__(512, (K <= 4 ? 2 : 1)) kf_softmax_fast(kf_softmax_p p)
{
    const int V = 16 / sizeof(T);
    const bool FAST = sizeof(T) == 2;
    const int G = p.G;
    const int grp = (int)kf_fdiv_q(threadIdx.x, p.fG);
    const int lane = (int)threadIdx.x - grp * G;
    const int RPB = p.RPB;
    const int D = (int)p.D;
    const int nch = (D + V - 1) / V;
    /* t = x * sgn(scale); FAST: exponents in base 2, |scale| log2(e) */
    const float sg = kf_softmax_sign(p.scale);
    const float a = FAST ? kf_softmax_abs(p.scale) * KF_LOG2E : kf_softmax_abs(p.scale);
    const float ninf = -__int_as_float(0x7f800000);

    for (int64_t base = (int64_t)blockIdx.x * RPB; base < p.rows;
         base += (int64_t)gridDim.x * RPB) {
        const int64_t row = base + grp;
        const bool act = row < p.rows;
        const kf_ridx ri = kf_row_index_f(act ? row : 0, p.f1, p.f2);
        const T *xr = (const T *)p.x + kf_off(p.xs, ri);
        T *yr = (T *)p.y + kf_off(p.ys, ri);
        const int m0 = ALN == 2 ? kf_row_phase<T>(xr) : 0;
        uint4 rc[K];
#pragma unroll
        for (int k = 0; k < K; k++) {
            const int c = lane + k * G;
            const int e0 = c * V - m0;
            rc[k] = make_uint4(0u, 0u, 0u, 0u);
            if (act && (ALN == 1 ? c < nch : e0 < D)) {
                if (ALN == 1) rc[k] = *reinterpret_cast<const uint4 *>(xr + e0);
                else rc[k] = kf_ldr_m<T>(xr, e0, D, 0u);
            }
        }
        /* t = x * sgn(scale); elements outside the row are -inf */
        float e[K][V];
        float m = ninf;
#pragma unroll
        for (int k = 0; k < K; k++) {
            const int c = lane + k * G;
            const int e0 = c * V - m0;
            kf_unpack<T, V>(rc[k], e[k]);
#pragma unroll
            for (int j = 0; j < V; j++) {
                const bool ok = ALN == 1 ? c < nch : (e0 + j >= 0 && e0 + j < D);
                e[k][j] = ok ? e[k][j] * sg : ninf;
                /* fmaxf drops a NaN, which is harmless here: a NaN element
                 * makes its exp NaN, so the sum and the whole row are NaN,
                 * as with a NaN maximum */
                m = fmaxf(m, e[k][j]);
            }
        }
        m = kf_group_reduce<KF_RED_MAX>(m, G, grp);
        const float ma = m * a;
        float sum = 0.0f;
        if (kf_softmax_fma_ok(ma)) {
#pragma unroll
            for (int k = 0; k < K; k++) {
#pragma unroll
                for (int j = 0; j < V; j++) {
                    const float u = fmaf(e[k][j], a, -ma);
                    e[k][j] = FAST ? KF_EXP2_FAST(u) : expf(u);
                    sum += e[k][j];
                }
            }
        } else { /* in base e: |scale| log2(e) may itself overflow (|scale| read
                  * from the parameters here, not kept in a register: at 8 chunks
                  * that spilled on sm_80) */
#pragma unroll
            for (int k = 0; k < K; k++) {
#pragma unroll
                for (int j = 0; j < V; j++) {
                    e[k][j] = expf((e[k][j] - m) * kf_softmax_abs(p.scale));
                    sum += e[k][j];
                }
            }
        }
        sum = kf_group_reduce<KF_RED_SUM>(sum, G, grp);
        const float inv = 1.0f / sum;
#pragma unroll
        for (int k = 0; k < K; k++) {
            const int c = lane + k * G;
            const int e0 = c * V - m0;
            if (act && (ALN == 1 ? c < nch : e0 < D)) {
                float o[V];
#pragma unroll
                for (int j = 0; j < V; j++) o[j] = e[k][j] * inv;
                uint4 r = kf_pack<T, V>(o);
                if (ALN == 1) *reinterpret_cast<uint4 *>(yr + e0) = r;
                else kf_str_m<T>(yr, e0, D, r);
            }
        }
    }
}

template <typename T, int ALN>
static void kf_softmax_fast_go(const kf_softmax_p &p, const kf_rowgeom &g, kf_gpuStream_t st)
{
    switch (g.K) {
    case 1: kf_launch(kf_softmax_fast<T, 1, ALN>, g.grid, g.BS, 0, st, p); break;
    case 2: kf_launch(kf_softmax_fast<T, 2, ALN>, g.grid, g.BS, 0, st, p); break;
    case 4: kf_launch(kf_softmax_fast<T, 4, ALN>, g.grid, g.BS, 0, st, p); break;
    default: kf_launch(kf_softmax_fast<T, 8, ALN>, g.grid, g.BS, 0, st, p); break;
    }
}

template <typename T, bool AL, int K>
__global__ void __launch_bounds__(512, 1) kf_softmax_kernel(kf_softmax_p p)
{
    const int V = 16 / sizeof(T);
    const int G = p.G;
    const int grp = (int)threadIdx.x / G;
    const int lane = (int)threadIdx.x - grp * G;
    const int RPB = (int)blockDim.x / G;
    const int D = (int)p.D;
    const int nch = (D + V - 1) / V;
    const float sg = kf_softmax_sign(p.scale);
    const float a = kf_softmax_abs(p.scale);
    const float ninf = -__int_as_float(0x7f800000);

    for (int64_t base = (int64_t)blockIdx.x * RPB; base < p.rows;
         base += (int64_t)gridDim.x * RPB) {
        const int64_t row = base + grp;
        const bool act = row < p.rows;
        const kf_ridx ri = kf_row_index(act ? row : 0, p.s1, p.s2);
        const T *xr = (const T *)p.x + kf_off(p.xs, ri);
        T *yr = (T *)p.y + kf_off(p.ys, ri);
        float m = ninf, sum = 0.0f;
        float v[V];
        if (K > 0) {
            uint4 rc[K > 0 ? K : 1];
#pragma unroll
            for (int k = 0; k < K; k++) {
                int c = lane + k * G;
                rc[k] = make_uint4(0u, 0u, 0u, 0u);
                if (act && c < nch) {
                    int j0 = c * V;
                    rc[k] = kf_ldr<T, AL>(xr + j0, D - j0 < V ? D - j0 : V);
                }
            }
#pragma unroll
            for (int k = 0; k < K; k++) {
                int c = lane + k * G;
                kf_unpack<T, V>(rc[k], v);
#pragma unroll
                for (int j = 0; j < V; j++)
                    if (c * V + j < D) m = kf_red_op<KF_RED_MAX>(m, sg * v[j]);
            }
            m = kf_group_reduce<KF_RED_MAX>(m, G, grp);
            const float ma = m * a;
            const bool fma_ok = kf_softmax_fma_ok(ma);
#pragma unroll
            for (int k = 0; k < K; k++) {
                int c = lane + k * G;
                kf_unpack<T, V>(rc[k], v);
#pragma unroll
                for (int j = 0; j < V; j++)
                    if (c * V + j < D) sum += expf(kf_softmax_u(sg * v[j], m, a, ma, fma_ok));
            }
            sum = kf_group_reduce<KF_RED_SUM>(sum, G, grp);
            const float inv = 1.0f / sum;
#pragma unroll
            for (int k = 0; k < K; k++) {
                int c = lane + k * G;
                if (act && c < nch) {
                    int j0 = c * V;
                    kf_unpack<T, V>(rc[k], v);
#pragma unroll
                    for (int j = 0; j < V; j++) v[j] = expf(kf_softmax_u(sg * v[j], m, a, ma, fma_ok)) * inv;
                    kf_st<T, V, AL>(yr + j0, D - j0 < V ? D - j0 : V, v);
                }
            }
        } else {
            if (act) {
                for (int c = lane; c < nch; c += G) {
                    int j0 = c * V;
                    int n = D - j0 < V ? D - j0 : V;
                    kf_ld<T, V, AL>(xr + j0, n, v);
#pragma unroll
                    for (int j = 0; j < V; j++)
                        if (j < n) m = kf_red_op<KF_RED_MAX>(m, sg * v[j]);
                }
            }
            m = kf_group_reduce<KF_RED_MAX>(m, G, grp);
            const float ma = m * a;
            const bool fma_ok = kf_softmax_fma_ok(ma);
            /* a thread adds D / G terms (over 64 at D > 32768): in f32, terms
             * of one size round the same way at each add and the sum drifts
             * (one row of e^-0.3 at D 2^20: 2e-5 relative in every output);
             * each chunk's V terms are added in f32, the chunks in double */
            double sum_d = 0.0;
            if (act) {
                for (int c = lane; c < nch; c += G) {
                    int j0 = c * V;
                    int n = D - j0 < V ? D - j0 : V;
                    float sum_c = 0.0f;
                    kf_ld<T, V, AL>(xr + j0, n, v);
#pragma unroll
                    for (int j = 0; j < V; j++)
                        if (j < n) sum_c += expf(kf_softmax_u(sg * v[j], m, a, ma, fma_ok));
                    sum_d += (double)sum_c;
                }
            }
            sum = kf_group_reduce<KF_RED_SUM>((float)sum_d, G, grp);
            const float inv = 1.0f / sum;
            if (act) {
                for (int c = lane; c < nch; c += G) {
                    int j0 = c * V;
                    int n = D - j0 < V ? D - j0 : V;
                    kf_ld<T, V, AL>(xr + j0, n, v);
#pragma unroll
                    for (int j = 0; j < V; j++) v[j] = expf(kf_softmax_u(sg * v[j], m, a, ma, fma_ok)) * inv;
                    kf_st<T, V, AL>(yr + j0, n, v);
                }
            }
        }
    }
}

template <typename T>
static void kf_softmax_go_t(const kf_softmax_p &p, const kf_rowgeom &g, bool al, int fast,
                            kf_gpuStream_t st)
{
    if (fast == 1) kf_softmax_fast_go<T, 1>(p, g, st);
    else if (fast == 2) kf_softmax_fast_go<T, 2>(p, g, st);
    else if (al) kf_launch(kf_softmax_kernel<T, true, 0>, g.grid, g.BS, 0, st, p);
    else kf_launch(kf_softmax_kernel<T, false, 0>, g.grid, g.BS, 0, st, p);
}

kf_status kf_gpu_softmax(kf_ctx *ctx, const kf_tensor *x, float scale, const kf_tensor *y)
{
    kf_softmax_p p;
    p.x = x->data; p.xs = kf_strides3(x);
    p.y = y->data; p.ys = kf_strides3(y);
    p.rows = kf_rows_of(x);
    p.s1 = x->shape[1];
    p.s2 = x->shape[2];
    p.D = x->shape[3];
    p.scale = scale;
    if (p.rows == 0 || p.D == 0) return KF_OK;
    if (p.D > INT_MAX - 64)
        return kf_set_error(ctx, KF_ERR_UNSUPPORTED, "softmax: rows of %lld elements are too long",
                            (long long)p.D);
    int V = 16 / (int)kf_dtype_size((kf_dtype)x->dtype);
    bool al = kf_rows_aligned16(x) && kf_rows_aligned16(y) && p.D % V == 0;
    bool peel = !al && kf_same_phase(y, x);
    int64_t nch = al ? (p.D + V - 1) / V : (p.D + 2 * V - 2) / V;
    kf_rowgeom g = kf_row_geometry(ctx, p.rows, nch, 8, 512, 4, true);
    p.G = g.G;
    p.RPB = g.RPB;
    p.fG = kf_fdiv_make((unsigned int)g.G);
    int fast = (g.K > 0 && (al || peel) && p.rows < (1ll << 31) && p.s1 < (1ll << 31) &&
                p.s2 < (1ll << 31)) ? (al ? 1 : 2) : 0;
    p.f1 = kf_fdiv_make(fast ? (unsigned int)p.s1 : 1u);
    p.f2 = kf_fdiv_make(fast ? (unsigned int)p.s2 : 1u);
    kf_gpuStream_t st = kf_stream(ctx);
    switch (x->dtype) {
    case KF_F32: kf_softmax_go_t<float>(p, g, al, fast, st); break;
    case KF_F16: kf_softmax_go_t<kf_f16_t>(p, g, al, fast, st); break;
    case KF_BF16: kf_softmax_go_t<kf_bf16_t>(p, g, al, fast, st); break;
    default: return kf_set_error(ctx, KF_ERR_DTYPE, "softmax: unsupported dtype");
    }
    return KF_LAUNCH_CHECK(ctx, "softmax");
}
