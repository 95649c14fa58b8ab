/* norm.c - the norm family on the CPU: rms_norm, add_rms_norm, layer_norm,
 * ada_norm, add_ada_norm, gated_residual (docs/ops.md has the exact
 * semantics).
 *
 * Each row is widened into a per-thread f32 buffer (so y may alias x: the
 * row is read completely before it is written), reduced in double with a
 * fixed order (mean of squares; mean then the biased variance in a second
 * pass), normalized, scaled in f32 and rounded once at the store. Rows are
 * split over OpenMP threads with a static schedule; a row never reads another
 * row's data, so NaN / Inf stay in their row and results are bitwise the same
 * from run to run. Residual sums (add_*) are rounded to the dtype, written
 * back, and the norm is taken of that rounded value, as PyTorch does.
 *
 * Napkin math: one read of x and one write of y per element (2 + 2 bytes in
 * bf16); add_rms_norm also reads and writes residual (8 bytes); per-token
 * conditioning is one more read per tensor. */
#include <math.h>
#include <stdint.h>

#include "cpu/cpu.h"

/* v = (v - mean) / sqrt(var + eps), biased variance (F.layer_norm), all in
 * double and rounded to f32 (no cancellation from an f32 mean). */
static void layer_normalize(float *restrict v, int64_t n, float eps)
{
    double mean = kf_cpu_sum(v, n) / (double)n;
    double variance = kf_cpu_sum_squared_deviations(v, n, mean) / (double)n;
    double inv_std = 1.0 / sqrt(variance + (double)eps);
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)(((double)v[i] - mean) * inv_std);
}

static void normalize_row(float *v, int64_t n, float eps, int kind)
{
    if (kind == KF_NORM_LAYER)
        layer_normalize(v, n, eps);
    else
        kf_cpu_rms_normalize(v, n, eps);
}

kf_status kf_cpu_rms_norm(kf_ctx *ctx, const kf_tensor *x, const kf_tensor *w, float eps,
                          int mode, float offset, const kf_tensor *y)
{
    const int64_t rows = kf_cpu_rows(x), cols = x->shape[3];
    const int64_t s1 = x->shape[1], s2 = x->shape[2];
    const int add_offset = mode == KF_RMS_GEMMA && offset != 0.0f;
    const int parallel = kf_cpu_worth_parallel(rows, rows * cols);
    kf_cpu_scratch scratch;
    kf_status st = kf_cpu_scratch_get(ctx, "rms_norm", parallel, (size_t)cols,
                                      kf_cpu_weight_needs_copy(w, add_offset) ? (size_t)cols : 0,
                                      &scratch);
    if (st != KF_OK)
        return st;
    const float *weight = kf_cpu_weight_as_f32(w, cols, offset, add_offset, scratch.shared);

    KF_CPU_PARALLEL_FOR(parallel)
    for (int64_t r = 0; r < rows; r++) {
        float *v = kf_cpu_scratch_mine(&scratch);
        kf_cpu_load_row(v, x->data, x->dtype, kf_row_offset(x, s1, s2, r), cols);
        kf_cpu_rms_normalize(v, cols, eps);
        kf_cpu_rms_apply_weight(v, cols, weight, mode, x->dtype);
        kf_cpu_store_row(y->data, y->dtype, kf_row_offset(y, s1, s2, r), v, cols);
    }
    kf_cpu_scratch_release(&scratch);
    return KF_OK;
}

kf_status kf_cpu_add_rms_norm(kf_ctx *ctx, const kf_tensor *x, const kf_tensor *residual,
                              const kf_tensor *w, float eps, int mode, float offset,
                              const kf_tensor *y)
{
    const int64_t rows = kf_cpu_rows(x), cols = x->shape[3];
    const int64_t s1 = x->shape[1], s2 = x->shape[2];
    const int add_offset = mode == KF_RMS_GEMMA && offset != 0.0f;
    const int parallel = kf_cpu_worth_parallel(rows, rows * cols);
    kf_cpu_scratch scratch;
    kf_status st = kf_cpu_scratch_get(ctx, "add_rms_norm", parallel, 2 * (size_t)cols,
                                      kf_cpu_weight_needs_copy(w, add_offset) ? (size_t)cols : 0,
                                      &scratch);
    if (st != KF_OK)
        return st;
    const float *weight = kf_cpu_weight_as_f32(w, cols, offset, add_offset, scratch.shared);

    KF_CPU_PARALLEL_FOR(parallel)
    for (int64_t r = 0; r < rows; r++) {
        float *v = kf_cpu_scratch_mine(&scratch);
        float *residual_buf = v + cols;
        int64_t residual_offset = kf_row_offset(residual, s1, s2, r);
        kf_cpu_load_row(v, x->data, x->dtype, kf_row_offset(x, s1, s2, r), cols);
        const float *res = kf_cpu_row_f32(residual, residual_offset, cols, residual_buf);
        for (int64_t i = 0; i < cols; i++)
            v[i] = v[i] + res[i];
        kf_cpu_round_row(v, cols, residual->dtype);
        kf_cpu_store_row(residual->data, residual->dtype, residual_offset, v, cols);
        kf_cpu_rms_normalize(v, cols, eps);
        kf_cpu_rms_apply_weight(v, cols, weight, mode, x->dtype);
        kf_cpu_store_row(y->data, y->dtype, kf_row_offset(y, s1, s2, r), v, cols);
    }
    kf_cpu_scratch_release(&scratch);
    return KF_OK;
}

kf_status kf_cpu_layer_norm(kf_ctx *ctx, const kf_tensor *x, const kf_tensor *w,
                            const kf_tensor *b, float eps, const kf_tensor *y)
{
    const int64_t rows = kf_cpu_rows(x), cols = x->shape[3];
    const int64_t s1 = x->shape[1], s2 = x->shape[2];
    size_t shared = (kf_cpu_weight_needs_copy(w, 0) ? (size_t)cols : 0) +
                    (kf_cpu_weight_needs_copy(b, 0) ? (size_t)cols : 0);
    const int parallel = kf_cpu_worth_parallel(rows, rows * cols);
    kf_cpu_scratch scratch;
    kf_status st = kf_cpu_scratch_get(ctx, "layer_norm", parallel, (size_t)cols, shared, &scratch);
    if (st != KF_OK)
        return st;
    float *shared_next = scratch.shared;
    const float *weight = kf_cpu_weight_as_f32(w, cols, 0.0f, 0, shared_next);
    if (kf_cpu_weight_needs_copy(w, 0))
        shared_next += cols;
    const float *bias = kf_cpu_weight_as_f32(b, cols, 0.0f, 0, shared_next);

    KF_CPU_PARALLEL_FOR(parallel)
    for (int64_t r = 0; r < rows; r++) {
        float *v = kf_cpu_scratch_mine(&scratch);
        kf_cpu_load_row(v, x->data, x->dtype, kf_row_offset(x, s1, s2, r), cols);
        layer_normalize(v, cols, eps);
        if (weight)
            for (int64_t i = 0; i < cols; i++)
                v[i] *= weight[i];
        if (bias)
            for (int64_t i = 0; i < cols; i++)
                v[i] += bias[i];
        kf_cpu_store_row(y->data, y->dtype, kf_row_offset(y, s1, s2, r), v, cols);
    }
    kf_cpu_scratch_release(&scratch);
    return KF_OK;
}

/* The modulation after the norm: v = v [* weight] * (1 + scale) [+ shift].
 * scale / shift rows are read with their own strides (0 = broadcast). */
static void modulate_row(float *restrict v, int64_t cols, const float *restrict weight,
                         const float *restrict scale, const float *restrict shift)
{
    if (weight)
        for (int64_t i = 0; i < cols; i++)
            v[i] *= weight[i];
    for (int64_t i = 0; i < cols; i++)
        v[i] *= 1.0f + scale[i];
    if (shift)
        for (int64_t i = 0; i < cols; i++)
            v[i] += shift[i];
}

kf_status kf_cpu_ada_norm(kf_ctx *ctx, const kf_tensor *x, const kf_tensor *scale,
                          const kf_tensor *shift, const kf_tensor *w, float eps, int kind,
                          const kf_tensor *y)
{
    const int64_t rows = kf_cpu_rows(x), cols = x->shape[3];
    const int64_t s1 = x->shape[1], s2 = x->shape[2];
    const int parallel = kf_cpu_worth_parallel(rows, rows * cols);
    kf_cpu_scratch scratch;
    kf_status st = kf_cpu_scratch_get(ctx, "ada_norm", parallel, 3 * (size_t)cols,
                                      kf_cpu_weight_needs_copy(w, 0) ? (size_t)cols : 0, &scratch);
    if (st != KF_OK)
        return st;
    const float *weight = kf_cpu_weight_as_f32(w, cols, 0.0f, 0, scratch.shared);

    KF_CPU_PARALLEL_FOR(parallel)
    for (int64_t r = 0; r < rows; r++) {
        float *v = kf_cpu_scratch_mine(&scratch);
        float *scale_buf = v + cols;
        float *shift_buf = v + 2 * cols;
        kf_cpu_load_row(v, x->data, x->dtype, kf_row_offset(x, s1, s2, r), cols);
        normalize_row(v, cols, eps, kind);
        const float *scale_row =
            kf_cpu_row_f32(scale, kf_row_offset(scale, s1, s2, r), cols, scale_buf);
        const float *shift_row =
            shift ? kf_cpu_row_f32(shift, kf_row_offset(shift, s1, s2, r), cols, shift_buf)
                  : NULL;
        modulate_row(v, cols, weight, scale_row, shift_row);
        kf_cpu_store_row(y->data, y->dtype, kf_row_offset(y, s1, s2, r), v, cols);
    }
    kf_cpu_scratch_release(&scratch);
    return KF_OK;
}

/* v = v + a [* gate], rounded to dtype (the value written back). The gated
 * sum is formed in double (a * gate is exact there), so v gets one rounding
 * to f32 rather than two: a 16-bit residual then flips by an ulp far less
 * often, and a flipped ulp of a large h shows up in every y of its row. */
static void add_gated_row(float *restrict v, int64_t cols, const float *restrict a,
                          const float *restrict gate, int dtype)
{
    if (gate)
        for (int64_t i = 0; i < cols; i++)
            v[i] = (float)((double)v[i] + (double)a[i] * (double)gate[i]);
    else
        for (int64_t i = 0; i < cols; i++)
            v[i] = v[i] + a[i];
    kf_cpu_round_row(v, cols, dtype);
}

kf_status kf_cpu_add_ada_norm(kf_ctx *ctx, const kf_tensor *h, const kf_tensor *a,
                              const kf_tensor *gate, const kf_tensor *scale,
                              const kf_tensor *shift, const kf_tensor *w, float eps, int kind,
                              const kf_tensor *y)
{
    const int64_t rows = kf_cpu_rows(h), cols = h->shape[3];
    const int64_t s1 = h->shape[1], s2 = h->shape[2];
    const int parallel = kf_cpu_worth_parallel(rows, rows * cols);
    kf_cpu_scratch scratch;
    kf_status st = kf_cpu_scratch_get(ctx, "add_ada_norm", parallel, 3 * (size_t)cols,
                                      kf_cpu_weight_needs_copy(w, 0) ? (size_t)cols : 0, &scratch);
    if (st != KF_OK)
        return st;
    const float *weight = kf_cpu_weight_as_f32(w, cols, 0.0f, 0, scratch.shared);

    KF_CPU_PARALLEL_FOR(parallel)
    for (int64_t r = 0; r < rows; r++) {
        float *v = kf_cpu_scratch_mine(&scratch);
        float *buf1 = v + cols;          /* a, then scale */
        float *buf2 = v + 2 * cols;      /* gate, then shift */
        int64_t h_offset = kf_row_offset(h, s1, s2, r);
        kf_cpu_load_row(v, h->data, h->dtype, h_offset, cols);
        const float *a_row = kf_cpu_row_f32(a, kf_row_offset(a, s1, s2, r), cols, buf1);
        const float *gate_row =
            gate ? kf_cpu_row_f32(gate, kf_row_offset(gate, s1, s2, r), cols, buf2) : NULL;
        add_gated_row(v, cols, a_row, gate_row, h->dtype);
        kf_cpu_store_row(h->data, h->dtype, h_offset, v, cols);
        normalize_row(v, cols, eps, kind);
        const float *scale_row =
            kf_cpu_row_f32(scale, kf_row_offset(scale, s1, s2, r), cols, buf1);
        const float *shift_row =
            shift ? kf_cpu_row_f32(shift, kf_row_offset(shift, s1, s2, r), cols, buf2) : NULL;
        modulate_row(v, cols, weight, scale_row, shift_row);
        kf_cpu_store_row(y->data, y->dtype, kf_row_offset(y, s1, s2, r), v, cols);
    }
    kf_cpu_scratch_release(&scratch);
    return KF_OK;
}

kf_status kf_cpu_gated_residual(kf_ctx *ctx, const kf_tensor *h, const kf_tensor *a,
                                const kf_tensor *gate)
{
    const int64_t rows = kf_cpu_rows(h), cols = h->shape[3];
    const int64_t s1 = h->shape[1], s2 = h->shape[2];
    const int parallel = kf_cpu_worth_parallel(rows, rows * cols);
    kf_cpu_scratch scratch;
    kf_status st =
        kf_cpu_scratch_get(ctx, "gated_residual", parallel, 3 * (size_t)cols, 0, &scratch);
    if (st != KF_OK)
        return st;

    KF_CPU_PARALLEL_FOR(parallel)
    for (int64_t r = 0; r < rows; r++) {
        float *v = kf_cpu_scratch_mine(&scratch);
        float *a_buf = v + cols;
        float *gate_buf = v + 2 * cols;
        int64_t h_offset = kf_row_offset(h, s1, s2, r);
        kf_cpu_load_row(v, h->data, h->dtype, h_offset, cols);
        const float *a_row = kf_cpu_row_f32(a, kf_row_offset(a, s1, s2, r), cols, a_buf);
        const float *gate_row =
            kf_cpu_row_f32(gate, kf_row_offset(gate, s1, s2, r), cols, gate_buf);
        for (int64_t i = 0; i < cols; i++)
            v[i] = (float)((double)v[i] + (double)a_row[i] * (double)gate_row[i]);
        kf_cpu_store_row(h->data, h->dtype, h_offset, v, cols);
    }
    kf_cpu_scratch_release(&scratch);
    return KF_OK;
}
