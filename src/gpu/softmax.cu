/* softmax.cu - row-wise softmax on the GPU: y = softmax(scale * x) in f32,
 * max-subtracted. The max reduction propagates NaN (so a NaN row gives NaN,
 * as PyTorch); a row of all -inf gives (-inf) - (-inf) = NaN everywhere; one
 * row never affects another.
 *
 * Napkin math (H200, bf16): 8192 x 4096 and 32768 x 1024 are both 64 MiB in +
 * 64 MiB out = 134 MB -> ~37 us at the copy rate for that size. The row stays
 * in registers (raw 16-byte chunks) between the two reductions and the write,
 * so x is read once.
 * Geometry: kf_row_geometry (common.cuh), as the norms: D = 1024 bf16 -> a
 * warp per row (32 x 4 chunks), 8 rows per 256-thread block; D = 4096 ->
 * 128 threads x 4 chunks; rows longer than 512 x 8 chunks stream (3 passes).
 * Reductions: butterfly shuffles + one shared exchange, fixed order. */
#include "common.cuh"

typedef struct kf_softmax_p {
    const void *x; kf_st3 xs;
    void *y; kf_st3 ys;
    int64_t rows, s1, s2, D;
    float scale;
    int G;
} kf_softmax_p;

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
    const float sc = p.scale;
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
                    if (c * V + j < D) m = kf_red_op<KF_RED_MAX>(m, sc * v[j]);
            }
            m = kf_group_reduce<KF_RED_MAX>(m, G);
#pragma unroll
            for (int k = 0; k < K; k++) {
                int c = lane + k * G;
                kf_unpack<T, V>(rc[k], v);
#pragma unroll
                for (int j = 0; j < V; j++)
                    if (c * V + j < D) sum += expf(sc * v[j] - m);
            }
            sum = kf_group_reduce<KF_RED_SUM>(sum, G);
            const float inv = 1.0f / sum;
#pragma unroll
            for (int k = 0; k < K; k++) {
                int c = lane + k * G;
                if (act && c < nch) {
                    int j0 = c * V;
                    kf_unpack<T, V>(rc[k], v);
#pragma unroll
                    for (int j = 0; j < V; j++) v[j] = expf(sc * v[j] - m) * inv;
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
                        if (j < n) m = kf_red_op<KF_RED_MAX>(m, sc * v[j]);
                }
            }
            m = kf_group_reduce<KF_RED_MAX>(m, G);
            if (act) {
                for (int c = lane; c < nch; c += G) {
                    int j0 = c * V;
                    int n = D - j0 < V ? D - j0 : V;
                    kf_ld<T, V, AL>(xr + j0, n, v);
#pragma unroll
                    for (int j = 0; j < V; j++)
                        if (j < n) sum += expf(sc * v[j] - m);
                }
            }
            sum = kf_group_reduce<KF_RED_SUM>(sum, G);
            const float inv = 1.0f / sum;
            if (act) {
                for (int c = lane; c < nch; c += G) {
                    int j0 = c * V;
                    int n = D - j0 < V ? D - j0 : V;
                    kf_ld<T, V, AL>(xr + j0, n, v);
#pragma unroll
                    for (int j = 0; j < V; j++) v[j] = expf(sc * v[j] - m) * inv;
                    kf_st<T, V, AL>(yr + j0, n, v);
                }
            }
        }
    }
}

template <typename T, bool AL>
static void kf_softmax_go(const kf_softmax_p &p, const kf_rowgeom &g, kf_gpuStream_t st)
{
    switch (g.K) {
    case 1: kf_softmax_kernel<T, AL, 1><<<g.grid, g.BS, 0, st>>>(p); break;
    case 2: kf_softmax_kernel<T, AL, 2><<<g.grid, g.BS, 0, st>>>(p); break;
    case 4: kf_softmax_kernel<T, AL, 4><<<g.grid, g.BS, 0, st>>>(p); break;
    case 8: kf_softmax_kernel<T, AL, 8><<<g.grid, g.BS, 0, st>>>(p); break;
    default: kf_softmax_kernel<T, AL, 0><<<g.grid, g.BS, 0, st>>>(p); break;
    }
}

template <typename T>
static void kf_softmax_go_t(const kf_softmax_p &p, const kf_rowgeom &g, bool al,
                            kf_gpuStream_t st)
{
    if (al) kf_softmax_go<T, true>(p, g, st);
    else kf_softmax_go<T, false>(p, g, st);
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
    kf_rowgeom g = kf_row_geometry(ctx, p.rows, p.D, V, 8, 512);
    p.G = g.G;
    bool al = kf_rows_aligned16(x) && kf_rows_aligned16(y) && p.D % V == 0;
    kf_gpuStream_t st = kf_stream(ctx);
    switch (x->dtype) {
    case KF_F32: kf_softmax_go_t<float>(p, g, al, st); break;
    case KF_F16: kf_softmax_go_t<kf_f16_t>(p, g, al, st); break;
    case KF_BF16: kf_softmax_go_t<kf_bf16_t>(p, g, al, st); break;
    default: return kf_set_error(ctx, KF_ERR_DTYPE, "softmax: unsupported dtype");
    }
    return KF_LAUNCH_CHECK(ctx, "softmax");
}
