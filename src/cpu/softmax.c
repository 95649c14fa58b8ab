/* softmax.c - row-wise softmax on the CPU: y = softmax(scale * x) over the
 * last dim with the row max subtracted. scale * x and the exponentials are
 * computed in double (exp stored as f32, so large logits lose nothing to the
 * f32 product or the subtraction; exp is cpu_math.h's, which the compiler
 * vectorizes, within 1 ulp in double); the sum of the exponentials is
 * accumulated in double (fixed order) and each output is e * (1 / sum) in
 * double. A fully -inf row gives NaN (-inf - -inf), a NaN anywhere in a row
 * makes the row NaN (through the sum), as PyTorch; other rows are never
 * touched. */
#include <math.h>
#include <stdint.h>

#include "cpu/cpu.h"
#include "cpu/cpu_math.h"

/* Largest value of scale * v, in double; NaNs are skipped here but reach the
 * result through the sum of exponentials. -inf for a row of -inf. */
static double row_max_scaled(const float *v, int64_t n, double scale)
{
    double lane[KF_CPU_LANES];
    for (int j = 0; j < KF_CPU_LANES; j++)
        lane[j] = -INFINITY;
    int64_t i = 0;
    for (; i + KF_CPU_LANES <= n; i += KF_CPU_LANES)
        for (int j = 0; j < KF_CPU_LANES; j++) {
            double t = scale * (double)v[i + j];
            lane[j] = t > lane[j] ? t : lane[j];
        }
    double m = -INFINITY;
    for (int j = 0; j < KF_CPU_LANES; j++)
        m = lane[j] > m ? lane[j] : m;
    for (; i < n; i++) {
        double t = scale * (double)v[i];
        m = t > m ? t : m;
    }
    return m;
}

kf_status kf_cpu_softmax(kf_ctx *ctx, const kf_tensor *x, float scale, const kf_tensor *y)
{
    const int64_t rows = kf_cpu_rows(x), cols = x->shape[3];
    const int64_t s1 = x->shape[1], s2 = x->shape[2];
    const double scale_d = (double)scale;
    kf_cpu_scratch scratch;
    kf_status st = kf_cpu_scratch_get(ctx, "softmax", (size_t)cols, 0, &scratch);
    if (st != KF_OK)
        return st;

    KF_CPU_PARALLEL_FOR(kf_cpu_worth_parallel(rows, rows * cols))
    for (int64_t r = 0; r < rows; r++) {
        float *v = kf_cpu_scratch_mine(&scratch);
        kf_cpu_load_row(v, x->data, x->dtype, kf_row_offset(x, s1, s2, r), cols);
        double m = row_max_scaled(v, cols, scale_d);
        for (int64_t i = 0; i < cols; i++)
            v[i] = (float)kf_cpu_exp(scale_d * (double)v[i] - m);
        double inv_sum = 1.0 / kf_cpu_sum(v, cols);
        for (int64_t i = 0; i < cols; i++)
            v[i] = (float)((double)v[i] * inv_sum);
        kf_cpu_store_row(y->data, y->dtype, kf_row_offset(y, s1, s2, r), v, cols);
    }
    kf_cpu_scratch_release(&scratch);
    return KF_OK;
}
