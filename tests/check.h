/* check.h - the correctness checking shared by the test binaries and the kfuse
 * CLI (`kfuse verify`, and `kfuse bench`, which verifies before it times):
 * the float64 reference of every op (check_reference.c), the case suite
 * (check_suite.c) and single-case verification. Built into the static
 * library kfuse_check. */
#ifndef KF_CHECK_H
#define KF_CHECK_H

#include <stdint.h>
#include <stdio.h>
#include "kfuse.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kft_options {
    const char *op;             /* kf_op_name() of one op, or NULL for every op */
    int dtype;                  /* a kf_dtype, or -1 for every dtype */
    int quick;                  /* 1: a reduced case list (sanitizer runs, smoke checks) */
    unsigned long long seed;    /* 0: pick one from the clock (printed, so a run can be replayed) */
    int verbose;                /* 0: print failures and the summary; 1: a line per case */
    FILE *report;               /* where to print; NULL = stdout */
    int nan_bits_may_differ;    /* bitwise mode: an element that is a NaN in both runs may
                                 * differ in sign and payload (the CPU kernel copies, whose
                                 * compilers order a NaN's operands freely: README) */
} kft_options;

typedef struct kft_result {
    int passed;
    int failed;
} kft_result;

/* Run every op x dtype x case of the suite on ctx's backend against the
 * float64 reference (results are added to *res). Returns KF_OK when the
 * suite ran (even with failures); an error status only if it could not run. */
kf_status kft_run_suite(kf_ctx *ctx, const kft_options *opt, kft_result *res);

/* The suite in bitwise mode: every case runs on ctx and again, on the same
 * inputs, on other; a case passes when both runs pass against the
 * reference and every buffer (outputs, untouched inputs, gaps, guards) reads
 * back byte for byte the same. For two builds of one backend that must agree
 * bitwise: the CPU kernel copies (tests/test_cpu_isa.c). */
kf_status kft_run_suite_bitwise(kf_ctx *ctx, kf_ctx *other, const kft_options *opt,
                                kft_result *res);

/* count random cases (check_suite.c: each a valid call drawn from the
 * options' seed and its number; opt->op / opt->dtype fix those), or only
 * case number `only` when only >= 0, on ctx's backend against the reference.
 * Seed 0: one from the clock (printed). */
kf_status kft_run_fuzz(kf_ctx *ctx, const kft_options *opt, long count, long only,
                       kft_result *res);

/* The API / error-path tests (invalid arguments must return their status and
 * message, never crash) on ctx's backend. */
kf_status kft_run_api_tests(kf_ctx *ctx, const kft_options *opt, kft_result *res);

/* One benchmark-shaped case, as `kfuse bench` times it. Fields an op does not
 * use are 0. */
typedef struct kft_bench_case {
    kf_op op;
    kf_dtype dtype;
    int64_t batch;              /* B (conditioning per batch, rope tables); >= 1 */
    int64_t tokens;             /* rows per batch entry; rows = batch * tokens */
    int64_t cols;               /* D; for rope / rms_norm_rope: head_dim */
    int64_t heads;              /* rope: q heads (LTX: 1 head of 2048) */
    int64_t kv_heads;           /* rope: k heads, 0 = q only */
    int variant;                /* rms/rope/act enum value as the op takes it
                                   (kf_rms_mode, kf_norm_kind, kf_rope_convention,
                                   kf_activation; gelu: 1 = tanh) */
    int form;                   /* rope: 0 table f32, 1 positions; glu: 0 two tensors,
                                   1 packed; ada: 0 per batch, 1 per token */
} kft_bench_case;

/* Settings that `kfuse bench` calls each op with beyond the case's fields (the
 * same for every case of an op), and that kft_verify_bench_case checks. */
#define KFT_BENCH_EPS 1e-6f
#define KFT_BENCH_ROPE_AXES 3                  /* LTX-Video: frame, height, width */
#define KFT_BENCH_RMS_NORM_ROPE_MODE KF_RMS_NONE   /* torch.nn.RMSNorm in LTX */
#define KFT_BENCH_SOFTMAX_SCALE 1.0f

/* Verify one bench case on ctx's backend against the reference, in the form
 * `kfuse bench` calls it (the case's fields and the KFT_BENCH_ settings: the
 * same tensors present, conditioning layout, scale, rope axes with a video grid
 * of positions), on random inputs of exactly that shape drawn from seed (rows
 * may be capped at max_rows to keep the reference cheap; 0 = no cap).
 * *rel_err gets ||out-ref||/||ref||, *ok whether it is within the op's
 * tolerance. */
kf_status kft_verify_bench_case(kf_ctx *ctx, const kft_bench_case *c, int64_t max_rows,
                                uint64_t seed, double *rel_err, int *ok);


/* ---- the float64 reference (check_reference.c) ----------------------------
 * Dense row-major double arrays; rows x D for the row ops, tokens x heads x Dh
 * for rope (tokens = B*S), cos / sin tables as tokens x rotary_dim. */

/* The oracle's own conversions (round to nearest even, NaN / Inf kept). */
uint16_t kft_f32_to_f16_bits(float f);
float kft_f16_bits_to_f32(uint16_t h);
uint16_t kft_f32_to_bf16_bits(float f);
float kft_bf16_bits_to_f32(uint16_t h);
/* v rounded to dtype (through f32, as a kernel computing in f32 stores it). */
double kft_round(int dtype, double v);
/* Element i of a buffer of dtype (f32, f16, bf16, i32) as a double / stored. */
double kft_load(const void *data, int dtype, int64_t i);
void kft_store(void *data, int dtype, int64_t i, double v);

void kft_ref_rms_norm(const double *x, int64_t rows, int64_t D, const double *w, double eps,
                      int mode, double offset, int x_dtype, double *y);
void kft_ref_add_rms_norm(const double *x, const double *residual, int64_t rows, int64_t D,
                          const double *w, double eps, int mode, double offset, int dtype,
                          double *residual_out, double *y);
void kft_ref_layer_norm(const double *x, int64_t rows, int64_t D, const double *w,
                        const double *b, double eps, double *y);
/* scale / shift: expanded to rows x D (shift may be NULL). */
void kft_ref_ada_norm(const double *x, int64_t rows, int64_t D, const double *scale,
                      const double *shift, const double *w, double eps, int kind, double *y);
void kft_ref_add_ada_norm(const double *h, const double *a, const double *gate,
                          const double *scale, const double *shift, const double *w,
                          int64_t rows, int64_t D, double eps, int kind, int dtype,
                          double *h_out, double *y);
void kft_ref_gated_residual(const double *h, const double *a, const double *gate, int64_t n,
                            double *h_out);
/* positions: tokens x n_axes; freqs / axis: rotary_dim/2 (axis NULL = all 0).
 * Fills cos / sin tables (tokens x rotary_dim) of the given convention with
 * angle = (float)freq * (float)pos rounded to f32, sin / cos in double. */
void kft_ref_rope_tables_from_positions(const double *pos, int64_t tokens, int n_axes,
                                        const double *freqs, const int *axis, int rotary_dim,
                                        int convention, double *cos_out, double *sin_out);
void kft_ref_rope(const double *x, int64_t tokens, int64_t heads, int64_t Dh, int rotary_dim,
                  int convention, const double *cos_tab, const double *sin_tab, double *y);
/* normed_scratch: tokens x heads x Dh doubles. */
void kft_ref_rms_norm_rope(const double *x, int64_t tokens, int64_t heads, int64_t Dh,
                           const double *w, double eps, int mode, double offset, int dtype,
                           int rotary_dim, int convention, const double *cos_tab,
                           const double *sin_tab, double *normed_scratch, double *y);
double kft_ref_activation_value(int act, double x);
void kft_ref_activation(const double *x, int64_t n, int act, double *y);
void kft_ref_glu(const double *gate, const double *up, int64_t n, int act, double *y);
void kft_ref_softmax(const double *x, int64_t rows, int64_t D, float scale, double *y);

/* ---- tolerances (docs/ops.md, per output dtype) -------------------------- */
typedef struct kft_tolerance {
    double rel_norm;            /* ||out-ref|| / ||ref|| */
    double atol, rtol;          /* |out-ref| <= atol + rtol*|ref| elementwise */
} kft_tolerance;
kft_tolerance kft_tolerance_for(int dtype);

/* The reference against values worked out by hand; failures are printed,
 * counts added to *res. Returns 1 when all pass. */
int kft_reference_self_test(FILE *out, kft_result *res);

#ifdef __cplusplus
}
#endif

#endif /* KF_CHECK_H */
