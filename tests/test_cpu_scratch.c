/* test_cpu_scratch.c - the CPU backend's per-thread scratch is sized for the
 * threads an op's loop actually starts: one long row runs on the calling
 * thread and asks for one row of scratch, however many OpenMP threads the
 * host has. With 64 threads and an address-space limit of the process's size
 * plus 256 MB, each op below runs one row of 2^22 f32 (16 MB) and must
 * return KF_OK with the right values; scratch for all 64 threads would be
 * 1-3 GB and fail with KF_ERR_ALLOC. Skipped (reported, exit 0) in builds
 * without OpenMP (one thread: nothing to test) and under AddressSanitizer
 * (its shadow memory does not fit an address-space limit).
 *   test_cpu_scratch [--quick]    (the same either way)
 * The last line is "N passed, N failed"; the exit status is 1 on any failure. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "kfuse.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#if defined(__SANITIZE_ADDRESS__)
#define KFT_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KFT_UNDER_ASAN 1
#endif
#endif
#ifndef KFT_UNDER_ASAN
#define KFT_UNDER_ASAN 0
#endif

#define ROW_LEN ((int64_t)1 << 22)

static int g_passed, g_failed;

static void check(int ok, const char *what, kf_ctx *ctx, kf_status st)
{
    if (ok) {
        g_passed++;
        return;
    }
    g_failed++;
    printf("FAIL %s: %s %s\n", what, kf_status_string(st), st != KF_OK ? kf_last_error(ctx) : "");
}

/* The process's virtual size in bytes (VmSize of /proc/self/status), 0 if unknown. */
static size_t virtual_size(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return 0;
    char line[256];
    size_t kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmSize: %zu kB", &kb) == 1)
            break;
    fclose(f);
    return kb * 1024;
}

int main(void)
{
#ifndef _OPENMP
    printf("skipped: built without OpenMP (ops run on one thread)\n0 passed, 0 failed\n");
    return 0;
#else
    if (KFT_UNDER_ASAN) {
        printf("skipped: AddressSanitizer build (no address-space limit)\n0 passed, 0 failed\n");
        return 0;
    }
    omp_set_num_threads(64);
    kf_ctx *ctx = NULL;
    if (kf_ctx_create(KF_BACKEND_CPU, 0, &ctx) != KF_OK) {
        printf("FAIL kf_ctx_create\n0 passed, 1 failed\n");
        return 1;
    }
    const int64_t row_shape[2] = {1, ROW_LEN}, vec_shape[1] = {ROW_LEN};
    float *x = malloc(ROW_LEN * sizeof(float)), *y = malloc(ROW_LEN * sizeof(float));
    float *w = malloc(ROW_LEN * sizeof(float)), *a = malloc(ROW_LEN * sizeof(float));
    if (!x || !y || !w || !a) {
        printf("FAIL host buffers\n0 passed, 1 failed\n");
        return 1;
    }
    /* x: 3, -3, 3, -3, ... (mean 0, mean square 9); w = 2 */
    for (int64_t i = 0; i < ROW_LEN; i++) {
        x[i] = (i & 1) ? -3.0f : 3.0f;
        w[i] = 2.0f;
        a[i] = 1.0f;
    }
    kf_tensor tx = kf_tensor_contiguous(x, KF_F32, 2, row_shape);
    kf_tensor ty = kf_tensor_contiguous(y, KF_F32, 2, row_shape);
    kf_tensor ta = kf_tensor_contiguous(a, KF_F32, 2, row_shape);
    kf_tensor tw = kf_tensor_contiguous(w, KF_F32, 1, vec_shape);

    /* start the 64-thread team once (many rows: a parallel loop), so that its
     * stacks are part of the size the limit is measured from */
    const int64_t team_shape[2] = {64, ROW_LEN / 64};
    kf_tensor team_x = kf_tensor_contiguous(x, KF_F32, 2, team_shape);
    kf_tensor team_y = kf_tensor_contiguous(y, KF_F32, 2, team_shape);
    kf_status st = kf_softmax(ctx, &team_x, 1.0f, &team_y);
    check(st == KF_OK, "softmax 64 rows before the limit", ctx, st);

    size_t vsize = virtual_size();
    if (vsize == 0) {
        printf("skipped: no /proc/self/status VmSize\n0 passed, 0 failed\n");
        return 0;
    }
    struct rlimit limit = {vsize + ((size_t)256 << 20), vsize + ((size_t)256 << 20)};
    if (setrlimit(RLIMIT_AS, &limit) != 0) {
        printf("skipped: setrlimit(RLIMIT_AS) failed\n0 passed, 0 failed\n");
        return 0;
    }

    /* rms_norm: 3 / sqrt(9) * 2 = +-2 */
    st = kf_rms_norm(ctx, &tx, &tw, 0.0f, KF_RMS_LLAMA, 0.0f, &ty);
    check(st == KF_OK && y[0] == 2.0f && y[ROW_LEN - 1] == -2.0f, "rms_norm one long row", ctx, st);
    /* layer_norm: (3 - 0) / sqrt(9) * 2 = +-2 */
    memset(y, 0, ROW_LEN * sizeof(float));
    st = kf_layer_norm(ctx, &tx, &tw, NULL, 0.0f, &ty);
    check(st == KF_OK && y[0] == 2.0f && y[ROW_LEN - 1] == -2.0f, "layer_norm one long row", ctx,
          st);
    /* softmax: two values, e^3 and e^-3, each half the row */
    memset(y, 0, ROW_LEN * sizeof(float));
    st = kf_softmax(ctx, &tx, 1.0f, &ty);
    const double big = exp(3.0) / ((double)(ROW_LEN / 2) * (exp(3.0) + exp(-3.0)));
    check(st == KF_OK && fabs(y[0] - big) <= 1e-5 * big, "softmax one long row", ctx, st);
    /* gated_residual: h = x + a * gate with gate = w: 3 + 2 = 5, -3 + 2 = -1 */
    st = kf_gated_residual(ctx, &tx, &ta, &tw);
    check(st == KF_OK && x[0] == 5.0f && x[ROW_LEN - 1] == -1.0f, "gated_residual one long row",
          ctx, st);

    kf_ctx_free(ctx);
    free(x);
    free(y);
    free(w);
    free(a);
    printf("%d passed, %d failed\n", g_passed, g_failed);
    return g_failed ? 1 : 0;
#endif
}
