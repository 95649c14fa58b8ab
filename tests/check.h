/* check.h - the correctness checking shared by the test binaries and the kfuse
 * CLI (`kfuse verify`, and `kfuse bench`, which verifies before it times):
 * the float64 reference of every op (check_reference.c), the case suite
 * (check_suite.c) and single-case verification. Built into the static
 * library kfuse_check. */
#ifndef KF_CHECK_H
#define KF_CHECK_H

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
} kft_options;

typedef struct kft_result {
    int passed;
    int failed;
    int skipped;                /* cases the backend reports unsupported via kf_supports */
} kft_result;

/* Run every op x dtype x case of the suite on ctx's backend against the
 * float64 reference (results are added to *res). Returns KF_OK when the
 * suite ran (even with failures); an error status only if it could not run. */
kf_status kft_run_suite(kf_ctx *ctx, const kft_options *opt, kft_result *res);

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

/* Verify one bench case on ctx's backend against the reference, on fresh
 * random inputs of exactly that shape (rows may be capped at max_rows to keep
 * the reference cheap; 0 = no cap). *max_rel_err gets ||out-ref||/||ref||,
 * *ok whether it is within the tolerance of shared/ops.md. */
kf_status kft_verify_bench_case(kf_ctx *ctx, const kft_bench_case *c, int64_t max_rows,
                                double *rel_err, int *ok);

#ifdef __cplusplus
}
#endif

#endif /* KF_CHECK_H */
