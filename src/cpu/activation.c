/* activation.c - elementwise activations on the CPU: glu (y = act(gate) * up,
 * two tensors; the core splits a packed input into two views) and gelu / silu
 * (y = act(x)). act: silu, gelu_tanh, gelu_erf.
 *
 * Formulas, in f32 and rounded once at the store, written to avoid the
 * cancellation of the textbook forms for negative x (exp is cpu_math.h's
 * f32 exp, in loops that the compiler vectorizes: within 1 ulp of expf,
 * equal to it for about 90% of arguments drawn evenly from [-20, 20]):
 *   silu(x)      = x / (1 + exp(-x))
 *   gelu_tanh(x) = 0.5x(1 + tanh(u)) = x / (1 + exp(-2u)),
 *                  u = sqrt(2/pi)(x + 0.044715x^3)
 *   gelu_erf(x)  = 0.5x(1 + erf(x/sqrt2)) = 0.5x * erfc(-x/sqrt2)
 *                  (cpu_math.h's kf_cpu_gelu_erf_f32, a fitted erfc)
 * -inf gives NaN (-inf * 0), as PyTorch does.
 *
 * Work is split into chunks of up to KF_CPU_ACT_CHUNK elements of a row, so a
 * few long rows are spread over the threads as well as many short ones; the
 * chunk buffers live on the stack. */
#include <math.h>
#include <stdint.h>

#include "cpu/cpu.h"
#include "cpu/cpu_math.h"

#define KF_CPU_ACT_CHUNK 2048

static inline float silu_f32(float x)
{
    return x / (1.0f + kf_cpu_expf(-x));
}

static inline float gelu_tanh_f32(float x)
{
    const float sqrt_2_over_pi = 0.7978845608028654f;
    float u = sqrt_2_over_pi * (x + 0.044715f * x * x * x);
    return x / (1.0f + kf_cpu_expf(-2.0f * u));
}

/* v = act(v) over n values (the switch is outside the loops). */
static void apply_activation(float *v, int64_t n, int act)
{
    if (act == KF_ACT_SILU) {
        for (int64_t i = 0; i < n; i++)
            v[i] = silu_f32(v[i]);
    } else if (act == KF_ACT_GELU_TANH) {
        for (int64_t i = 0; i < n; i++)
            v[i] = gelu_tanh_f32(v[i]);
    } else {
        for (int64_t i = 0; i < n; i++)
            v[i] = kf_cpu_gelu_erf_f32(v[i]);
    }
}

kf_status kf_cpu_glu(kf_ctx *ctx, const kf_tensor *gate, const kf_tensor *up, int act,
                     const kf_tensor *y)
{
    const int64_t rows = kf_cpu_rows(gate), cols = gate->shape[3];
    const int64_t s1 = gate->shape[1], s2 = gate->shape[2];
    const int64_t chunks_per_row = (cols + KF_CPU_ACT_CHUNK - 1) / KF_CPU_ACT_CHUNK;
    const int64_t items = rows * chunks_per_row;

    KF_CPU_PARALLEL_FOR(kf_cpu_worth_parallel(items, rows * cols))
    for (int64_t item = 0; item < items; item++) {
        float gate_buf[KF_CPU_ACT_CHUNK];
        float up_buf[KF_CPU_ACT_CHUNK];
        int64_t r = item / chunks_per_row;
        int64_t begin = (item % chunks_per_row) * KF_CPU_ACT_CHUNK;
        int64_t n = cols - begin < KF_CPU_ACT_CHUNK ? cols - begin : KF_CPU_ACT_CHUNK;
        kf_cpu_load_row(gate_buf, gate->data, gate->dtype,
                        kf_row_offset(gate, s1, s2, r) + begin, n);
        kf_cpu_load_row(up_buf, up->data, up->dtype, kf_row_offset(up, s1, s2, r) + begin, n);
        apply_activation(gate_buf, n, act);
        for (int64_t i = 0; i < n; i++)
            gate_buf[i] *= up_buf[i];
        kf_cpu_store_row(y->data, y->dtype, kf_row_offset(y, s1, s2, r) + begin, gate_buf, n);
    }
    (void)ctx;
    return KF_OK;
}

kf_status kf_cpu_activation(kf_ctx *ctx, const kf_tensor *x, int act, const kf_tensor *y)
{
    const int64_t rows = kf_cpu_rows(x), cols = x->shape[3];
    const int64_t s1 = x->shape[1], s2 = x->shape[2];
    const int64_t chunks_per_row = (cols + KF_CPU_ACT_CHUNK - 1) / KF_CPU_ACT_CHUNK;
    const int64_t items = rows * chunks_per_row;

    KF_CPU_PARALLEL_FOR(kf_cpu_worth_parallel(items, rows * cols))
    for (int64_t item = 0; item < items; item++) {
        float buf[KF_CPU_ACT_CHUNK];
        int64_t r = item / chunks_per_row;
        int64_t begin = (item % chunks_per_row) * KF_CPU_ACT_CHUNK;
        int64_t n = cols - begin < KF_CPU_ACT_CHUNK ? cols - begin : KF_CPU_ACT_CHUNK;
        kf_cpu_load_row(buf, x->data, x->dtype, kf_row_offset(x, s1, s2, r) + begin, n);
        apply_activation(buf, n, act);
        kf_cpu_store_row(y->data, y->dtype, kf_row_offset(y, s1, s2, r) + begin, buf, n);
    }
    (void)ctx;
    return KF_OK;
}
