/* softmax.c - row-wise softmax on the CPU: y = softmax(scale * x) over the
 * last dim with the row max subtracted (the max in double: exact). f32 rows:
 * scale * x - max in double (so large logits lose nothing to the f32 product
 * or the subtraction), its exponential in f32 from a reduction in double
 * (cpu_math.h's kf_cpu_expf_of_double, within 1 ulp; the compiler vectorizes
 * it), each output e * (1 / sum) in double. 16-bit rows, rounded to 8 or 11 bits at
 * the store: scale * x - max and the exponential in f32 (cpu_math.h's expf,
 * within 1 ulp), e * (1 / sum) in f32 (rows whose largest scale * x
 * overflows f32 take the f32 rows' path in double, so no dtype gives NaN
 * where the limit exists), which took a bf16 softmax 8192 x 4096
 * from 69.6 to 29 ms on two cores (BENCHMARKS.md, CPU backend). The sum of the
 * exponentials is accumulated in double in a fixed order either way. A fully
 * -inf row gives NaN (-inf - -inf), a NaN anywhere in a row makes the row NaN
 * (through the sum), as PyTorch; other rows are never touched. */
#include <math.h>
#include <stdint.h>

#include "cpu/cpu.h"
#include "cpu/cpu_math.h"

/* f32 bits <-> an integer that orders as the f32 value does (-0 just below
 * +0): the sign bit kept, the other bits flipped for negative values. The
 * sign decides the flip and is kept, so the same map goes both ways. */
static inline uint32_t order_flip(uint32_t bits)
{
    return bits ^ ((uint32_t)((int32_t)bits >> 31) >> 1);
}

/* Largest value of scale * v, in double (-inf for a row of -inf). The
 * product of two f32 values is exact in double, so it is scale times the
 * row's largest element (scale >= 0) or smallest (scale < 0), found through
 * integer keys (integer max / min vectorize; float ones do not without
 * relaxed IEEE flags). A NaN element, or a product that is NaN where the
 * largest product is not (a zero scale times an infinity), makes the row's
 * sum of exponentials and so the whole row NaN whatever this returns. */
static double row_max_scaled(const float *v, int64_t n, double scale)
{
    int32_t hi = (int32_t)order_flip(kf_bits_of_f32(-INFINITY));
    int32_t lo = (int32_t)order_flip(kf_bits_of_f32(INFINITY));
    for (int64_t i = 0; i < n; i++) {
        int32_t key = (int32_t)order_flip(kf_bits_of_f32(v[i]));
        hi = key > hi ? key : hi;
        lo = key < lo ? key : lo;
    }
    return scale * (double)kf_f32_of_bits(order_flip((uint32_t)(scale >= 0.0 ? hi : lo)));
}

kf_status kf_cpu_softmax(kf_ctx *ctx, const kf_tensor *x, float scale, const kf_tensor *y)
{
    const int64_t rows = kf_cpu_rows(x), cols = x->shape[3];
    const int64_t s1 = x->shape[1], s2 = x->shape[2];
    const double scale_d = (double)scale;
    const int sixteen_bit = y->dtype != KF_F32;
    const int parallel = kf_cpu_worth_parallel(rows, rows * cols);
    kf_cpu_scratch scratch;
    kf_status st = kf_cpu_scratch_get(ctx, "softmax", parallel, (size_t)cols, 0, &scratch);
    if (st != KF_OK)
        return st;

    KF_CPU_PARALLEL_FOR(parallel)
    for (int64_t r = 0; r < rows; r++) {
        float *v = kf_cpu_scratch_mine(&scratch);
        kf_cpu_load_row(v, x->data, x->dtype, kf_row_offset(x, s1, s2, r), cols);
        double m = row_max_scaled(v, cols, scale_d);
        /* 16-bit rows in f32 unless scale * max overflows f32 (a finite
         * product in double): then the double path, which gives the limit */
        if (sixteen_bit && (isfinite((float)m) || !isfinite(m))) {
            const float m_f = (float)m;
            for (int64_t i = 0; i < cols; i++)
                v[i] = kf_cpu_expf(scale * v[i] - m_f);
            const float inv_sum = (float)(1.0 / kf_cpu_sum(v, cols));
            for (int64_t i = 0; i < cols; i++)
                v[i] *= inv_sum;
        } else {
            for (int64_t i = 0; i < cols; i++)
                v[i] = kf_cpu_expf_of_double(scale_d * (double)v[i] - m);
            double inv_sum = 1.0 / kf_cpu_sum(v, cols);
            for (int64_t i = 0; i < cols; i++)
                v[i] = (float)((double)v[i] * inv_sum);
        }
        kf_cpu_store_row(y->data, y->dtype, kf_row_offset(y, s1, s2, r), v, cols);
    }
    kf_cpu_scratch_release(&scratch);
    return KF_OK;
}
