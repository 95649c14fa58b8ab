/* check_api.c - the API / error-path tests (kft_run_api_tests): every public
 * function given invalid arguments must return the status kfuse.h documents
 * (NULL_POINTER for a NULL required pointer, SHAPE for ndim / shapes, STRIDE
 * for strides, DTYPE for dtypes, INVALID_ARG for scalars and enums), leave a
 * non-empty message in kf_last_error, not crash, and not write any memory.
 *
 * Each check runs on a fresh context of the backend under test (so the
 * message seen is the one this call left), against tensors that live in one
 * device arena; after every rejected call the whole arena is read back and
 * must be byte-identical to what was uploaded. */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/internal.h"

/* ---- arena layout (f32 elements) ---------------------------------------- */

#define D 4096
#define ROWS 4                       /* x: [2, 2, D] */
#define OFF_X 0
#define OFF_Y (OFF_X + ROWS * D)
#define OFF_R (OFF_Y + ROWS * D)
#define OFF_W (OFF_R + ROWS * D)
#define OFF_B (OFF_W + D)
#define OFF_SCALE (OFF_B + D)        /* [2, 1, D] */
#define OFF_SHIFT (OFF_SCALE + 2 * D)
#define OFF_GATE (OFF_SHIFT + 2 * D)
#define OFF_Q (OFF_GATE + 2 * D)     /* rope q [1, 4, 2, 64] */
#define OFF_QO (OFF_Q + 512)
#define OFF_K (OFF_QO + 512)         /* k [1, 4, 1, 64] */
#define OFF_KO (OFF_K + 256)
#define OFF_COS (OFF_KO + 256)       /* [4, 64] */
#define OFF_SIN (OFF_COS + 256)
#define OFF_POS (OFF_SIN + 256)      /* [4, 3] */
#define OFF_FREQ (OFF_POS + 16)      /* [32] */
#define OFF_AXIS (OFF_FREQ + 32)     /* [32] i32, zeros */
#define OFF_SHARE (OFF_AXIS + 32 + 64) /* 6 * D zeros: api_sharing moves views here */
#define ARENA_ELEMS (OFF_SHARE + 6 * D)

typedef struct api_run {
    kf_ctx *ctx;                     /* the caller's context: backend and device */
    FILE *out;
    int verbose;
    kft_result *res;
    unsigned char *base;             /* device arena */
    float *snapshot;                 /* host image of the arena */
    float *readback;
    int no_message;                  /* the call had no context to leave a message on */
} api_run;

static kf_tensor view(api_run *A, int64_t off, int dtype, int ndim, int64_t s0, int64_t s1,
                      int64_t s2, int64_t s3)
{
    int64_t shape[4] = {s0, s1, s2, s3};
    kf_tensor t = kf_tensor_contiguous(A->base + off * 4, (kf_dtype)dtype, ndim, shape);
    return t;
}

static kf_ctx *fresh_ctx(api_run *A)
{
    kf_ctx *c = NULL;
    if (kf_ctx_create(kf_ctx_backend(A->ctx), A->ctx->device, &c) != KF_OK)
        return NULL;
    return c;
}

static void pass(api_run *A, const char *what)
{
    A->res->passed++;
    if (A->verbose)
        fprintf(A->out, "ok   %s\n", what);
}

static void fail(api_run *A, const char *what, const char *why)
{
    A->res->failed++;
    fprintf(A->out, "FAIL api: %s: %s\n", what, why);
}

static int arena_upload(api_run *A)
{
    return kf_memcpy(A->ctx, A->base, A->snapshot, ARENA_ELEMS * 4, 1) == KF_OK;
}

/* 1 when the message's first clause (up to its first ';') names s as a whole
 * word: "q" is not named by "q_out", nor "a" by "... ; a tensor the op writes". */
static int names(const char *msg, const char *s)
{
    size_t n = strlen(s), end = strcspn(msg, ";");
    for (const char *p = msg; (p = strstr(p, s)) != NULL && (size_t)(p - msg) + n <= end; p++) {
        int before = p > msg && (isalnum((unsigned char)p[-1]) || p[-1] == '_');
        int after = isalnum((unsigned char)p[n]) || p[n] == '_';
        if (!before && !after)
            return 1;
    }
    return 0;
}

/* Judge one call: status want, message when it failed (naming
 * must_contain1 and 2 when given), the arena untouched when it failed
 * (restored after a successful call). */
static void verdict(api_run *A, kf_ctx *c, kf_status got, kf_status want,
                    const char *what, const char *must_contain1, const char *must_contain2)
{
    char why[KF_ERRMSG_LEN + 200];
    if (c == NULL) {
        fail(A, what, "could not create a context");
        return;
    }
    int ok = 1;
    if (got != want) {
        snprintf(why, sizeof why, "returned %s, expected %s (message: \"%s\")",
                 kf_status_string(got), kf_status_string(want), kf_last_error(c));
        fail(A, what, why);
        ok = 0;
    }
    if (ok && got != KF_OK && A->no_message) {
        if (kf_last_error(NULL) == NULL) {
            fail(A, what, "kf_last_error(NULL) returned NULL");
            ok = 0;
        }
    } else if (ok && got != KF_OK) {
        const char *msg = kf_last_error(c);
        if (msg == NULL || msg[0] == '\0') {
            fail(A, what, "failed without a message in kf_last_error");
            ok = 0;
        } else if ((must_contain1 && !names(msg, must_contain1)) ||
                   (must_contain2 && !names(msg, must_contain2))) {
            snprintf(why, sizeof why, "message \"%s\" does not name %s and %s", msg,
                     must_contain1 ? must_contain1 : "", must_contain2 ? must_contain2 : "");
            fail(A, what, why);
            ok = 0;
        }
    }
    kf_synchronize(c);
    kf_ctx_free(c);
    if (got != KF_OK) {
        if (kf_memcpy(A->ctx, A->readback, A->base, ARENA_ELEMS * 4, 0) != KF_OK) {
            fail(A, what, "reading the arena back failed");
            return;
        }
        if (memcmp(A->readback, A->snapshot, ARENA_ELEMS * 4) != 0) {
            fail(A, what, "a rejected call wrote memory");
            arena_upload(A);
            return;
        }
    } else {
        arena_upload(A);
    }
    if (ok)
        pass(A, what);
}

/* Run `call` (which uses the context C) on a fresh context; a failure's
 * message must name name1 and name2 (NULL: anything). */
#define EXPECT_NAMING(want, what, name1, name2, call)                                    \
    do {                                                                                 \
        kf_ctx *C = fresh_ctx(A);                                                        \
        kf_status got_ = C ? (call) : KF_ERR_INTERNAL;                                   \
        verdict(A, C, got_, want, what, name1, name2);                                   \
    } while (0)
#define EXPECT(want, what, call) EXPECT_NAMING(want, what, NULL, NULL, call)
/* A call given a NULL context: NULL_POINTER, nothing written. */
#define EXPECT_NOCTX(what, call)                                                         \
    do {                                                                                 \
        kf_ctx *C = fresh_ctx(A);                                                        \
        A->no_message = 1;                                                               \
        verdict(A, C, C ? (call) : KF_ERR_INTERNAL, KF_ERR_NULL_POINTER, what, NULL,      \
                NULL);                                                                   \
        A->no_message = 0;                                                               \
    } while (0)

static void check_bool(api_run *A, int cond, const char *what)
{
    if (cond)
        pass(A, what);
    else
        fail(A, what, "condition false");
}

/* The mutations every activation tensor argument must reject. t is a copy
 * of a valid argument inside `call` through the name T. */
#define TENSOR_MUTATIONS(name, valid, call)                                              \
    do {                                                                                 \
        kf_tensor T;                                                                     \
        char w_[160];                                                                    \
        T = valid; T.data = NULL;                                                        \
        snprintf(w_, sizeof w_, "%s: data NULL", name);                                  \
        EXPECT(KF_ERR_NULL_POINTER, w_, call);                                           \
        T = valid; T.ndim = 0;                                                           \
        snprintf(w_, sizeof w_, "%s: ndim 0", name);                                     \
        EXPECT(KF_ERR_SHAPE, w_, call);                                                  \
        T = valid; T.ndim = 5;                                                           \
        snprintf(w_, sizeof w_, "%s: ndim 5", name);                                     \
        EXPECT(KF_ERR_SHAPE, w_, call);                                                  \
        T = valid; T.stride[T.ndim - 1] = 2;                                             \
        snprintf(w_, sizeof w_, "%s: inner stride 2", name);                             \
        EXPECT(KF_ERR_STRIDE, w_, call);                                                 \
        T = valid; T.dtype = KF_I32;                                                     \
        snprintf(w_, sizeof w_, "%s: dtype i32", name);                                  \
        EXPECT(KF_ERR_DTYPE, w_, call);                                                  \
        T = valid; T.dtype = 77;                                                         \
        snprintf(w_, sizeof w_, "%s: dtype 77 (no such dtype)", name);                   \
        EXPECT(KF_ERR_DTYPE, w_, call);                                                  \
        if (T.ndim >= 2) {                                                               \
            T = valid; T.stride[0] = -T.stride[0];                                       \
            snprintf(w_, sizeof w_, "%s: negative stride", name);                        \
            EXPECT(KF_ERR_STRIDE, w_, call);                                             \
        }                                                                                \
        if (T.ndim >= 2 && T.shape[0] > 1) {                                             \
            T = valid; T.stride[0] = INT64_MAX / 2;                                      \
            snprintf(w_, sizeof w_, "%s: stride reaching past 2^63 bytes", name);        \
            EXPECT(KF_ERR_STRIDE, w_, call);                                             \
        }                                                                                \
        T = valid; T.data = (char *)T.data + 1;                                          \
        snprintf(w_, sizeof w_, "%s: data not aligned to its elements", name);           \
        EXPECT(KF_ERR_INVALID_ARG, w_, call);                                            \
    } while (0)

/* kf_ctx_create(AUTO, device): where a GPU is present, status gpu_error
 * (named want_name) and no context, kf_last_error(NULL) containing
 * gpu_message when given; where none is, a CPU context. */
static void check_auto_device(api_run *A, int gpu_present, int device, kf_status gpu_error,
                              const char *want_name, const char *gpu_message)
{
    char what[200];
    kf_ctx *c = (kf_ctx *)0x1;
    kf_status st = kf_ctx_create(KF_BACKEND_AUTO, device, &c);
    if (gpu_present) {
        snprintf(what, sizeof what, "kf_ctx_create(AUTO, device %d) with a GPU present -> %s%s",
                 device, want_name, gpu_message ? ", the reason in kf_last_error(NULL)" : "");
        check_bool(A, st == gpu_error && c == NULL &&
                          (gpu_message == NULL || strstr(kf_last_error(NULL), gpu_message)),
                   what);
    } else {
        snprintf(what, sizeof what, "kf_ctx_create(AUTO, device %d) with no GPU present -> the CPU",
                 device);
        check_bool(A, st == KF_OK && c != NULL && kf_ctx_backend(c) == KF_BACKEND_CPU, what);
        if (st == KF_OK)
            kf_ctx_free(c);
    }
}

static void api_context(api_run *A)
{
    kf_ctx *c = (kf_ctx *)0x1;
    kf_status st = kf_ctx_create((kf_backend)7, 0, &c);
    check_bool(A, st == KF_ERR_INVALID_ARG && c == NULL,
               "kf_ctx_create(backend 7) -> INVALID_ARG and *ctx NULL");
    c = (kf_ctx *)0x1;
    st = kf_ctx_create((kf_backend)-1, 0, &c);
    check_bool(A, st == KF_ERR_INVALID_ARG && c == NULL,
               "kf_ctx_create(backend -1) -> INVALID_ARG and *ctx NULL");
    c = NULL;
    st = kf_ctx_create(KF_BACKEND_CPU, -1, &c);
    check_bool(A, st == KF_OK && c != NULL, "kf_ctx_create(CPU, device -1): the device is ignored");
    kf_ctx_free(c);
    kf_ctx *g = NULL;
    const int gpu_present = kf_ctx_create(KF_BACKEND_GPU, 0, &g) == KF_OK;
    kf_ctx_free(g);
    /* AUTO with a device index past the GPUs: where a GPU is present that is
     * the caller's error, with the reason, never a CPU context; where none is
     * (no GPU backend, driver or device) AUTO runs on the CPU */
    check_auto_device(A, gpu_present, 1 << 20, KF_ERR_NO_DEVICE, "NO_DEVICE", "gpu 1048576");
    /* AUTO with a negative device: an error where a GPU is present, the
     * CPU (which ignores device) where none is */
    check_auto_device(A, gpu_present, -1, KF_ERR_INVALID_ARG, "INVALID_ARG", NULL);
    st = kf_ctx_create(KF_BACKEND_CPU, 0, NULL);
    check_bool(A, st == KF_ERR_NULL_POINTER, "kf_ctx_create(ctx NULL) -> NULL_POINTER");
    kf_ctx_free(NULL);
    check_bool(A, 1, "kf_ctx_free(NULL)");
    check_bool(A, kf_ctx_set_stream(NULL, NULL) == KF_ERR_NULL_POINTER,
               "kf_ctx_set_stream(NULL) -> NULL_POINTER");
    int all = 1;
    for (int s = -1; s <= 12; s++) {
        const char *str = kf_status_string((kf_status)s);
        if (!str || !str[0])
            all = 0;
    }
    all = all && kf_status_string((kf_status)1000) && kf_status_string((kf_status)1000)[0];
    check_bool(A, all, "kf_status_string of every status and out-of-range values is non-empty");
    check_bool(A, strstr(kf_status_string(KF_ERR_SHAPE), "SHAPE") != NULL,
               "kf_status_string(KF_ERR_SHAPE) names it");
    int names_ok = 1;
    for (int op = 0; op < KF_OP_COUNT; op++) {
        const char *n = kf_op_name((kf_op)op);
        if (!n || !n[0])
            names_ok = 0;
        for (int o2 = 0; n && o2 < op; o2++)
            if (kf_op_name((kf_op)o2) && !strcmp(n, kf_op_name((kf_op)o2)))
                names_ok = 0;
    }
    check_bool(A, names_ok, "kf_op_name of every op is non-empty and unique");
    check_bool(A, kf_op_name(KF_OP_COUNT) == NULL && kf_op_name((kf_op)-1) == NULL,
               "kf_op_name of an unknown op is NULL");
    check_bool(A, !strcmp(kf_op_name(KF_OP_RMS_NORM), "rms_norm") &&
                      !strcmp(kf_op_name(KF_OP_SOFTMAX), "softmax"),
               "kf_op_name(rms_norm, softmax)");
    int sup = 1;
    for (int op = 0; op < KF_OP_COUNT; op++) {
        for (int dt = 0; dt < 3; dt++) {
            int s = kf_supports(A->ctx, (kf_op)op, (kf_dtype)dt);
            if (s != 0 && s != 1)
                sup = 0;
            if (kf_ctx_backend(A->ctx) == KF_BACKEND_CPU && s != 1)
                sup = 0;
        }
        if (kf_supports(A->ctx, (kf_op)op, KF_I32) != 0)
            sup = 0;
    }
    check_bool(A, sup, "kf_supports: 0/1, every op and float dtype on the CPU, never i32");
    check_bool(A, kf_supports(A->ctx, KF_OP_COUNT, KF_F32) == 0 &&
                      kf_supports(NULL, KF_OP_RMS_NORM, KF_F32) == 0,
               "kf_supports of an unknown op or a NULL context is 0");
    check_bool(A, kf_dtype_size(KF_F32) == 4 && kf_dtype_size(KF_F16) == 2 &&
                      kf_dtype_size(KF_BF16) == 2 && kf_dtype_size(KF_I32) == 4 &&
                      kf_dtype_size((kf_dtype)9) == 0,
               "kf_dtype_size");
    check_bool(A, !strcmp(kf_dtype_name(KF_BF16), "bf16") && kf_dtype_name((kf_dtype)9) != NULL,
               "kf_dtype_name");
    check_bool(A, kf_version() == KF_VERSION_MAJOR * 10000 + KF_VERSION_MINOR * 100 +
                                       KF_VERSION_PATCH && kf_version_string() != NULL,
               "kf_version");
    check_bool(A, kf_ctx_describe(A->ctx) != NULL && kf_ctx_describe(A->ctx)[0],
               "kf_ctx_describe is non-empty");
    void *p = NULL;
    check_bool(A, kf_malloc(NULL, 16, &p) == KF_ERR_NULL_POINTER,
               "kf_malloc(NULL ctx) -> NULL_POINTER");
    kf_ctx *C = fresh_ctx(A);
    verdict(A, C, C ? kf_malloc(C, 16, NULL) : KF_ERR_INTERNAL, KF_ERR_NULL_POINTER, "kf_malloc(ptr NULL) -> NULL_POINTER", NULL, NULL);
    /* sizes that no memory holds, the largest ones included (where rounding up wraps): on
     * the CPU and the emulator (a failed cudaMalloc is an API error that compute-sanitizer
     * reports, and the driver's own check needs no test of ours) */
    const size_t huge[2] = {SIZE_MAX, SIZE_MAX - 200};
    const int host_heap = kf_ctx_backend(A->ctx) == KF_BACKEND_CPU ||
                          strstr(kf_ctx_describe(A->ctx), "emulator") != NULL;
    for (int i = 0; i < (host_heap ? 2 : 0); i++) {
        C = fresh_ctx(A);
        p = &p;
        verdict(A, C, C ? kf_malloc(C, huge[i], &p) : KF_ERR_INTERNAL, KF_ERR_ALLOC,
                i ? "kf_malloc(SIZE_MAX - 200) -> ALLOC" : "kf_malloc(SIZE_MAX) -> ALLOC", NULL,
                NULL);
        check_bool(A, p == NULL, "kf_malloc of a size no memory holds leaves *ptr NULL");
    }
    C = fresh_ctx(A);
    verdict(A, C, C ? kf_memcpy(C, NULL, A->snapshot, 16, 1) : KF_ERR_INTERNAL,
            KF_ERR_NULL_POINTER, "kf_memcpy(dst NULL) -> NULL_POINTER", NULL,
            NULL);
    C = fresh_ctx(A);
    verdict(A, C, C ? kf_memcpy(C, A->base, A->snapshot, 16, 2) : KF_ERR_INTERNAL,
            KF_ERR_INVALID_ARG, "kf_memcpy(to_device 2) -> INVALID_ARG", NULL,
            NULL);
    C = fresh_ctx(A);
    verdict(A, C, C ? kf_memcpy(C, A->base, A->snapshot, 0, 42) : KF_ERR_INTERNAL,
            KF_ERR_INVALID_ARG, "kf_memcpy(0 bytes, to_device 42) -> INVALID_ARG", "to_device",
            NULL);
}

/* Two GPU contexts on two devices (where a second GPU is present): creating
 * one on device 1 leaves the first context's memory (the arena, allocated
 * before), ops and copies on device 0, and the second's on device 1, both
 * giving the same rms_norm. Contexts made their device the thread's current
 * one once, and ops launch on the current device: the first context's ops
 * then ran on device 1, on device 0's memory. */
static void api_two_devices(api_run *A)
{
    kf_ctx *g1 = NULL;
    if (kf_ctx_backend(A->ctx) != KF_BACKEND_GPU || A->ctx->device != 0 ||
        kf_ctx_create(KF_BACKEND_GPU, 1, &g1) != KF_OK)
        return;
    if (A->verbose)
        fprintf(A->out, "api: two devices: %s; %s\n", kf_ctx_describe(A->ctx),
                kf_ctx_describe(g1));
    const int64_t shape[2] = {ROWS, D}, wshape[1] = {D};
    const size_t xbytes = (size_t)ROWS * D * 4;
    float *y0 = (float *)malloc(xbytes), *y1 = (float *)malloc(xbytes);
    void *x1 = NULL, *w1 = NULL, *out1 = NULL;
    int ok = y0 && y1;
    for (int round = 0; ok && round < 2; round++) {  /* device 0, 1, then 0 again */
        kf_tensor x = kf_tensor_contiguous(A->base + OFF_X * 4, KF_F32, 2, shape);
        kf_tensor w = kf_tensor_contiguous(A->base + OFF_W * 4, KF_F32, 1, wshape);
        kf_tensor y = kf_tensor_contiguous(A->base + OFF_Y * 4, KF_F32, 2, shape);
        ok = kf_rms_norm(A->ctx, &x, &w, 1e-6f, KF_RMS_LLAMA, 0.0f, &y) == KF_OK &&
             kf_memcpy(A->ctx, y0, A->base + OFF_Y * 4, xbytes, 0) == KF_OK;
        if (!ok || round == 1)
            break;
        ok = kf_malloc(g1, xbytes, &x1) == KF_OK && kf_malloc(g1, D * 4, &w1) == KF_OK &&
             kf_malloc(g1, xbytes, &out1) == KF_OK &&
             kf_memcpy(g1, x1, A->snapshot + OFF_X, xbytes, 1) == KF_OK &&
             kf_memcpy(g1, w1, A->snapshot + OFF_W, D * 4, 1) == KF_OK;
        kf_tensor x_1 = kf_tensor_contiguous(x1, KF_F32, 2, shape);
        kf_tensor w_1 = kf_tensor_contiguous(w1, KF_F32, 1, wshape);
        kf_tensor y_1 = kf_tensor_contiguous(out1, KF_F32, 2, shape);
        ok = ok && kf_rms_norm(g1, &x_1, &w_1, 1e-6f, KF_RMS_LLAMA, 0.0f, &y_1) == KF_OK &&
             kf_memcpy(g1, y1, out1, xbytes, 0) == KF_OK && kf_synchronize(g1) == KF_OK &&
             memcmp(y0, y1, xbytes) == 0;
    }
    double worst = ok ? 0.0 : INFINITY;             /* against float64 */
    for (int64_t r = 0; ok && r < ROWS; r++) {
        const float *xr = A->snapshot + OFF_X + r * D;
        double ss = 0.0;
        for (int64_t i = 0; i < D; i++)
            ss += (double)xr[i] * xr[i];
        const double inv = 1.0 / sqrt(ss / D + 1e-6);
        for (int64_t i = 0; i < D; i++) {
            const double want = xr[i] * inv * A->snapshot[OFF_W + i];
            worst = fmax(worst, fabs(y0[r * D + i] - want) / fabs(want));
            ok = ok && y0[r * D + i] == y1[r * D + i];
        }
    }
    char why[160];
    snprintf(why, sizeof why, "a call failed, results differ or are off (worst relative error %.3g): %s",
             worst, kf_last_error(g1)[0] ? kf_last_error(g1) : kf_last_error(A->ctx));
    if (ok && worst < 1e-5)
        pass(A, "contexts on devices 0 and 1: each runs on its own memory, the same results");
    else
        fail(A, "contexts on devices 0 and 1", why);
    kf_free(g1, x1);
    kf_free(g1, w1);
    kf_free(g1, out1);
    kf_ctx_free(g1);
    check_bool(A, arena_upload(A) && kf_synchronize(A->ctx) == KF_OK,
               "device 0's context still works after device 1's is freed");
    free(y0);
    free(y1);
}

static void api_norms(api_run *A)
{
    kf_tensor x = view(A, OFF_X, KF_F32, 3, 2, 2, D, 0);
    kf_tensor y = view(A, OFF_Y, KF_F32, 3, 2, 2, D, 0);
    kf_tensor r = view(A, OFF_R, KF_F32, 3, 2, 2, D, 0);
    kf_tensor w = view(A, OFF_W, KF_F32, 1, D, 0, 0, 0);
    kf_tensor b = view(A, OFF_B, KF_F32, 1, D, 0, 0, 0);
    kf_tensor t;

    /* rms_norm */
    EXPECT(KF_OK, "rms_norm: valid", kf_rms_norm(C, &x, &w, 1e-6f, KF_RMS_LLAMA, 0.f, &y));
    EXPECT(KF_OK, "rms_norm: weight NULL", kf_rms_norm(C, &x, NULL, 1e-6f, KF_RMS_NONE, 0.f, &y));
    EXPECT(KF_OK, "rms_norm: in place", kf_rms_norm(C, &x, &w, 1e-6f, KF_RMS_GEMMA, 1.f, &x));
    EXPECT_NOCTX("rms_norm: ctx NULL",
           kf_rms_norm(NULL, &x, &w, 1e-6f, KF_RMS_LLAMA, 0.f, &y));
    EXPECT(KF_ERR_NULL_POINTER, "rms_norm: x NULL",
           kf_rms_norm(C, NULL, &w, 1e-6f, KF_RMS_LLAMA, 0.f, &y));
    EXPECT(KF_ERR_NULL_POINTER, "rms_norm: y NULL",
           kf_rms_norm(C, &x, &w, 1e-6f, KF_RMS_LLAMA, 0.f, NULL));
    TENSOR_MUTATIONS("rms_norm x", x, kf_rms_norm(C, &T, &w, 1e-6f, KF_RMS_LLAMA, 0.f, &y));
    TENSOR_MUTATIONS("rms_norm y", y, kf_rms_norm(C, &x, &w, 1e-6f, KF_RMS_LLAMA, 0.f, &T));
    TENSOR_MUTATIONS("rms_norm weight", w, kf_rms_norm(C, &x, &T, 1e-6f, KF_RMS_LLAMA, 0.f, &y));
    t = x; t.dtype = KF_I32;
    {
        kf_tensor yi = y;
        yi.dtype = KF_I32;
        EXPECT(KF_ERR_DTYPE, "rms_norm: i32 activations",
               kf_rms_norm(C, &t, NULL, 1e-6f, KF_RMS_LLAMA, 0.f, &yi));
    }
    t = y; t.dtype = KF_F16;
    EXPECT(KF_ERR_DTYPE, "rms_norm: y f16, x f32",
           kf_rms_norm(C, &x, &w, 1e-6f, KF_RMS_LLAMA, 0.f, &t));
    {
        kf_tensor xb = x, yb = y, wf = w;
        xb.dtype = KF_BF16;
        yb.dtype = KF_BF16;
        wf.dtype = KF_F16;
        EXPECT(KF_ERR_DTYPE, "rms_norm: weight f16 with bf16 x",
               kf_rms_norm(C, &xb, &wf, 1e-6f, KF_RMS_LLAMA, 0.f, &yb));
        wf.dtype = KF_BF16;
        EXPECT(KF_OK, "rms_norm: bf16 x with bf16 weight",
               kf_rms_norm(C, &xb, &wf, 1e-6f, KF_RMS_LLAMA, 0.f, &yb));
    }
    {
        kf_tensor w4095 = w;
        w4095.shape[0] = 4095;
        kf_ctx *C = fresh_ctx(A);
        kf_status st = C ? kf_rms_norm(C, &x, &w4095, 1e-6f, KF_RMS_LLAMA, 0.f, &y)
                         : KF_ERR_INTERNAL;
        verdict(A, C, st, KF_ERR_SHAPE,
                "rms_norm: weight 4095 vs D 4096 -> SHAPE naming both", "4095", "4096");
    }
    t = w; t.ndim = 2; t.shape[0] = 2; t.shape[1] = D; t.stride[0] = D; t.stride[1] = 1;
    EXPECT(KF_ERR_SHAPE, "rms_norm: weight 2-D", kf_rms_norm(C, &x, &t, 1e-6f, KF_RMS_LLAMA, 0.f, &y));
    t = y; t.shape[1] = 1;
    EXPECT(KF_ERR_SHAPE, "rms_norm: y shape differs", kf_rms_norm(C, &x, &w, 1e-6f, KF_RMS_LLAMA, 0.f, &t));
    t = y; t.shape[2] = D - 1;
    EXPECT(KF_ERR_SHAPE, "rms_norm: y D differs", kf_rms_norm(C, &x, &w, 1e-6f, KF_RMS_LLAMA, 0.f, &t));
    t = y; t.stride[0] = 0;
    EXPECT(KF_ERR_STRIDE, "rms_norm: broadcast (stride 0) output",
           kf_rms_norm(C, &x, &w, 1e-6f, KF_RMS_LLAMA, 0.f, &t));
    t = x; t.stride[1] = 0;
    EXPECT(KF_OK, "rms_norm: x with stride 0 (one row read for every row; x is only read)",
           kf_rms_norm(C, &t, &w, 1e-6f, KF_RMS_LLAMA, 0.f, &y));
    EXPECT(KF_ERR_STRIDE, "rms_norm: y aliases a stride-0 x (written)",
           kf_rms_norm(C, &t, &w, 1e-6f, KF_RMS_LLAMA, 0.f, &t));
    EXPECT(KF_ERR_INVALID_ARG, "rms_norm: eps -1",
           kf_rms_norm(C, &x, &w, -1.f, KF_RMS_LLAMA, 0.f, &y));
    EXPECT(KF_ERR_INVALID_ARG, "rms_norm: eps NaN",
           kf_rms_norm(C, &x, &w, NAN, KF_RMS_LLAMA, 0.f, &y));
    EXPECT(KF_ERR_INVALID_ARG, "rms_norm: eps Inf",
           kf_rms_norm(C, &x, &w, INFINITY, KF_RMS_LLAMA, 0.f, &y));
    EXPECT(KF_ERR_INVALID_ARG, "rms_norm: mode 3",
           kf_rms_norm(C, &x, &w, 1e-6f, (kf_rms_mode)3, 0.f, &y));
    EXPECT(KF_ERR_INVALID_ARG, "rms_norm: mode -1",
           kf_rms_norm(C, &x, &w, 1e-6f, (kf_rms_mode)-1, 0.f, &y));
    EXPECT(KF_ERR_INVALID_ARG, "rms_norm: offset 1 in llama mode",
           kf_rms_norm(C, &x, &w, 1e-6f, KF_RMS_LLAMA, 1.f, &y));

    /* add_rms_norm */
    EXPECT(KF_OK, "add_rms_norm: valid",
           kf_add_rms_norm(C, &x, &r, &w, 1e-6f, KF_RMS_LLAMA, 0.f, &y));
    EXPECT(KF_OK, "add_rms_norm: y aliases x",
           kf_add_rms_norm(C, &x, &r, &w, 1e-6f, KF_RMS_NONE, 0.f, &x));
    EXPECT_NOCTX("add_rms_norm: ctx NULL",
           kf_add_rms_norm(NULL, &x, &r, &w, 1e-6f, KF_RMS_LLAMA, 0.f, &y));
    EXPECT(KF_ERR_NULL_POINTER, "add_rms_norm: residual NULL",
           kf_add_rms_norm(C, &x, NULL, &w, 1e-6f, KF_RMS_LLAMA, 0.f, &y));
    TENSOR_MUTATIONS("add_rms_norm residual", r,
                     kf_add_rms_norm(C, &x, &T, &w, 1e-6f, KF_RMS_LLAMA, 0.f, &y));
    TENSOR_MUTATIONS("add_rms_norm x", x,
                     kf_add_rms_norm(C, &T, &r, &w, 1e-6f, KF_RMS_LLAMA, 0.f, &y));
    t = r; t.dtype = KF_F16;
    EXPECT(KF_ERR_DTYPE, "add_rms_norm: residual f16, x f32",
           kf_add_rms_norm(C, &x, &t, &w, 1e-6f, KF_RMS_LLAMA, 0.f, &y));
    t = r; t.shape[0] = 1;
    EXPECT(KF_ERR_SHAPE, "add_rms_norm: residual shape differs",
           kf_add_rms_norm(C, &x, &t, &w, 1e-6f, KF_RMS_LLAMA, 0.f, &y));
    t = r; t.stride[1] = 0;
    EXPECT(KF_ERR_STRIDE, "add_rms_norm: broadcast residual (written)",
           kf_add_rms_norm(C, &x, &t, &w, 1e-6f, KF_RMS_LLAMA, 0.f, &y));
    EXPECT(KF_ERR_INVALID_ARG, "add_rms_norm: eps NaN",
           kf_add_rms_norm(C, &x, &r, &w, NAN, KF_RMS_LLAMA, 0.f, &y));
    EXPECT(KF_ERR_INVALID_ARG, "add_rms_norm: mode 9",
           kf_add_rms_norm(C, &x, &r, &w, 1e-6f, (kf_rms_mode)9, 0.f, &y));

    /* layer_norm */
    EXPECT(KF_OK, "layer_norm: valid", kf_layer_norm(C, &x, &w, &b, 1e-5f, &y));
    EXPECT(KF_OK, "layer_norm: no weight, no bias", kf_layer_norm(C, &x, NULL, NULL, 1e-5f, &y));
    EXPECT_NOCTX("layer_norm: ctx NULL", kf_layer_norm(NULL, &x, &w, &b, 1e-5f, &y));
    EXPECT(KF_ERR_NULL_POINTER, "layer_norm: x NULL", kf_layer_norm(C, NULL, &w, &b, 1e-5f, &y));
    TENSOR_MUTATIONS("layer_norm bias", b, kf_layer_norm(C, &x, &w, &T, 1e-5f, &y));
    TENSOR_MUTATIONS("layer_norm y", y, kf_layer_norm(C, &x, &w, &b, 1e-5f, &T));
    t = b; t.shape[0] = 4095;
    EXPECT(KF_ERR_SHAPE, "layer_norm: bias 4095", kf_layer_norm(C, &x, &w, &t, 1e-5f, &y));
    EXPECT(KF_ERR_INVALID_ARG, "layer_norm: eps -1e-5", kf_layer_norm(C, &x, &w, &b, -1e-5f, &y));
}

static void api_ada(api_run *A)
{
    kf_tensor x = view(A, OFF_X, KF_F32, 3, 2, 2, D, 0);
    kf_tensor y = view(A, OFF_Y, KF_F32, 3, 2, 2, D, 0);
    kf_tensor a = view(A, OFF_R, KF_F32, 3, 2, 2, D, 0);
    kf_tensor w = view(A, OFF_W, KF_F32, 1, D, 0, 0, 0);
    kf_tensor sc = view(A, OFF_SCALE, KF_F32, 3, 2, 1, D, 0);
    kf_tensor sh = view(A, OFF_SHIFT, KF_F32, 3, 2, 1, D, 0);
    kf_tensor g = view(A, OFF_GATE, KF_F32, 3, 2, 1, D, 0);
    kf_tensor t;
    EXPECT(KF_OK, "ada_norm: valid", kf_ada_norm(C, &x, &sc, &sh, &w, 1e-6f, KF_NORM_RMS, &y));
    EXPECT(KF_OK, "ada_norm: shift NULL, weight NULL",
           kf_ada_norm(C, &x, &sc, NULL, NULL, 1e-6f, KF_NORM_LAYER, &y));
    t = sc; t.shape[1] = 2; t.stride[1] = 0;
    EXPECT(KF_OK, "ada_norm: scale [B,S,D] with token stride 0",
           kf_ada_norm(C, &x, &t, &sh, &w, 1e-6f, KF_NORM_RMS, &y));
    t = sc; t.stride[0] = 3 * D; t.stride[1] = 3 * D;
    t.shape[0] = 1;   /* keeps within the arena: [1, 1, D] with odd strides */
    EXPECT(KF_OK, "ada_norm: scale [1,1,D] broadcast over batch",
           kf_ada_norm(C, &x, &t, &sh, &w, 1e-6f, KF_NORM_RMS, &y));
    EXPECT_NOCTX("ada_norm: ctx NULL",
           kf_ada_norm(NULL, &x, &sc, &sh, &w, 1e-6f, KF_NORM_RMS, &y));
    EXPECT(KF_ERR_NULL_POINTER, "ada_norm: scale NULL",
           kf_ada_norm(C, &x, NULL, &sh, &w, 1e-6f, KF_NORM_RMS, &y));
    EXPECT(KF_ERR_NULL_POINTER, "ada_norm: x NULL",
           kf_ada_norm(C, NULL, &sc, &sh, &w, 1e-6f, KF_NORM_RMS, &y));
    TENSOR_MUTATIONS("ada_norm scale", sc, kf_ada_norm(C, &x, &T, &sh, &w, 1e-6f, KF_NORM_RMS, &y));
    TENSOR_MUTATIONS("ada_norm shift", sh, kf_ada_norm(C, &x, &sc, &T, &w, 1e-6f, KF_NORM_RMS, &y));
    TENSOR_MUTATIONS("ada_norm x", x, kf_ada_norm(C, &T, &sc, &sh, &w, 1e-6f, KF_NORM_RMS, &y));
    t = sc; t.shape[2] = D - 1;
    EXPECT(KF_ERR_SHAPE, "ada_norm: scale D 4095", kf_ada_norm(C, &x, &t, &sh, &w, 1e-6f, KF_NORM_RMS, &y));
    t = sc; t.shape[1] = 3; t.stride[1] = 0;
    EXPECT(KF_ERR_SHAPE, "ada_norm: scale S 3 vs x S 2",
           kf_ada_norm(C, &x, &t, &sh, &w, 1e-6f, KF_NORM_RMS, &y));
    t = w; t.shape[0] = D + 1;
    EXPECT(KF_ERR_SHAPE, "ada_norm: weight 4097", kf_ada_norm(C, &x, &sc, &sh, &t, 1e-6f, KF_NORM_RMS, &y));
    t = sc; t.dtype = KF_BF16;
    EXPECT(KF_ERR_DTYPE, "ada_norm: scale bf16 with f32 x",
           kf_ada_norm(C, &x, &t, &sh, &w, 1e-6f, KF_NORM_RMS, &y));
    EXPECT(KF_ERR_INVALID_ARG, "ada_norm: kind 2",
           kf_ada_norm(C, &x, &sc, &sh, &w, 1e-6f, (kf_norm_kind)2, &y));
    EXPECT(KF_ERR_INVALID_ARG, "ada_norm: eps NaN",
           kf_ada_norm(C, &x, &sc, &sh, &w, NAN, KF_NORM_RMS, &y));
    t = y; t.stride[0] = 0;
    EXPECT(KF_ERR_STRIDE, "ada_norm: broadcast output",
           kf_ada_norm(C, &x, &sc, &sh, &w, 1e-6f, KF_NORM_RMS, &t));

    /* add_ada_norm */
    EXPECT(KF_OK, "add_ada_norm: valid",
           kf_add_ada_norm(C, &x, &a, &g, &sc, &sh, &w, 1e-6f, KF_NORM_LAYER, &y));
    EXPECT(KF_OK, "add_ada_norm: gate NULL",
           kf_add_ada_norm(C, &x, &a, NULL, &sc, &sh, &w, 1e-6f, KF_NORM_LAYER, &y));
    EXPECT(KF_ERR_NULL_POINTER, "add_ada_norm: h NULL",
           kf_add_ada_norm(C, NULL, &a, &g, &sc, &sh, &w, 1e-6f, KF_NORM_LAYER, &y));
    EXPECT(KF_ERR_NULL_POINTER, "add_ada_norm: a NULL",
           kf_add_ada_norm(C, &x, NULL, &g, &sc, &sh, &w, 1e-6f, KF_NORM_LAYER, &y));
    EXPECT(KF_ERR_NULL_POINTER, "add_ada_norm: scale NULL",
           kf_add_ada_norm(C, &x, &a, &g, NULL, &sh, &w, 1e-6f, KF_NORM_LAYER, &y));
    EXPECT(KF_ERR_NULL_POINTER, "add_ada_norm: y NULL",
           kf_add_ada_norm(C, &x, &a, &g, &sc, &sh, &w, 1e-6f, KF_NORM_LAYER, NULL));
    TENSOR_MUTATIONS("add_ada_norm a", a,
                     kf_add_ada_norm(C, &x, &T, &g, &sc, &sh, &w, 1e-6f, KF_NORM_LAYER, &y));
    TENSOR_MUTATIONS("add_ada_norm gate", g,
                     kf_add_ada_norm(C, &x, &a, &T, &sc, &sh, &w, 1e-6f, KF_NORM_LAYER, &y));
    t = a; t.shape[2] = D / 2;
    EXPECT(KF_ERR_SHAPE, "add_ada_norm: a shape differs",
           kf_add_ada_norm(C, &x, &t, &g, &sc, &sh, &w, 1e-6f, KF_NORM_LAYER, &y));
    t = y; t.dtype = KF_F16;
    EXPECT(KF_ERR_DTYPE, "add_ada_norm: y f16",
           kf_add_ada_norm(C, &x, &a, &g, &sc, &sh, &w, 1e-6f, KF_NORM_LAYER, &t));
    EXPECT(KF_ERR_INVALID_ARG, "add_ada_norm: kind -1",
           kf_add_ada_norm(C, &x, &a, &g, &sc, &sh, &w, 1e-6f, (kf_norm_kind)-1, &y));

    /* gated_residual */
    EXPECT(KF_OK, "gated_residual: valid", kf_gated_residual(C, &x, &a, &g));
    EXPECT_NOCTX("gated_residual: ctx NULL", kf_gated_residual(NULL, &x, &a, &g));
    EXPECT(KF_ERR_NULL_POINTER, "gated_residual: h NULL", kf_gated_residual(C, NULL, &a, &g));
    EXPECT(KF_ERR_NULL_POINTER, "gated_residual: a NULL", kf_gated_residual(C, &x, NULL, &g));
    EXPECT(KF_ERR_NULL_POINTER, "gated_residual: gate NULL", kf_gated_residual(C, &x, &a, NULL));
    TENSOR_MUTATIONS("gated_residual h", x, kf_gated_residual(C, &T, &a, &g));
    TENSOR_MUTATIONS("gated_residual gate", g, kf_gated_residual(C, &x, &a, &T));
    t = x; t.stride[1] = 0;
    EXPECT(KF_ERR_STRIDE, "gated_residual: broadcast h (written)", kf_gated_residual(C, &t, &a, &g));
    t = a; t.dtype = KF_BF16;
    EXPECT(KF_ERR_DTYPE, "gated_residual: a bf16, h f32", kf_gated_residual(C, &x, &t, &g));
    /* conditioning errors name the activation by its own name (h here, not x) */
    t = g; t.shape[2] = D - 1;
    EXPECT_NAMING(KF_ERR_SHAPE, "gated_residual: gate D 4095, the message names h", "gate",
                  "h", kf_gated_residual(C, &x, &a, &t));
    t = g; t.shape[0] = 3; t.stride[0] = 0;
    EXPECT_NAMING(KF_ERR_SHAPE, "add_ada_norm: scale B 3 vs h B 2, the message names h", "scale",
                  "h", kf_add_ada_norm(C, &x, &a, &g, &t, &sh, &w, 1e-6f, KF_NORM_LAYER, &y));
    /* conditioning of more dims than x (docs: at most x's), even of leading 1s */
    t = sc; t.ndim = 4; t.shape[0] = 1; t.shape[1] = 2; t.shape[2] = 1; t.shape[3] = D;
    t.stride[0] = 2 * D; t.stride[1] = D; t.stride[2] = D; t.stride[3] = 1;
    EXPECT_NAMING(KF_ERR_SHAPE, "ada_norm: scale [1, 2, 1, D] against x [2, 2, D]", "scale", "x",
                  kf_ada_norm(C, &x, &t, &sh, &w, 1e-6f, KF_NORM_RMS, &y));
}

/* The rope tensors of the arena, declared as locals: q [1, 4, 2, 64], k
 * [1, 4, 1, 64], their outputs, the tables [4, 64] and the positions form. */
#define ROPE_VIEWS(A)                                                                    \
    kf_tensor q = view(A, OFF_Q, KF_F32, 4, 1, 4, 2, 64);                               \
    kf_tensor qo = view(A, OFF_QO, KF_F32, 4, 1, 4, 2, 64);                             \
    kf_tensor k = view(A, OFF_K, KF_F32, 4, 1, 4, 1, 64);                               \
    kf_tensor ko = view(A, OFF_KO, KF_F32, 4, 1, 4, 1, 64);                             \
    kf_tensor cs = view(A, OFF_COS, KF_F32, 2, 4, 64, 0, 0);                            \
    kf_tensor sn = view(A, OFF_SIN, KF_F32, 2, 4, 64, 0, 0);                            \
    kf_tensor pos = view(A, OFF_POS, KF_F32, 2, 4, 1, 0, 0);                            \
    kf_tensor fr = view(A, OFF_FREQ, KF_F32, 1, 32, 0, 0, 0);                           \
    kf_tensor ax = view(A, OFF_AXIS, KF_I32, 1, 32, 0, 0, 0)

static void api_rope(api_run *A)
{
    ROPE_VIEWS(A);
    kf_tensor pos3 = view(A, OFF_POS, KF_F32, 2, 4, 3, 0, 0);
    kf_tensor w = view(A, OFF_W, KF_F32, 1, 128, 0, 0, 0);
    kf_tensor t;
    kf_rope_args tab, ps, ra;
    memset(&tab, 0, sizeof tab);
    tab.convention = KF_ROPE_HALF;
    tab.cos = &cs;
    tab.sin = &sn;
    memset(&ps, 0, sizeof ps);
    ps.convention = KF_ROPE_INTERLEAVED;
    ps.positions = &pos;
    ps.freqs = &fr;

    EXPECT(KF_OK, "rope: valid table form, q and k", kf_rope(C, &q, &k, &qo, &ko, &tab));
    EXPECT(KF_OK, "rope: valid positions form, axis NULL", kf_rope(C, &q, NULL, &qo, NULL, &ps));
    ra = ps; ra.positions = &pos3; ra.axis = &ax;
    EXPECT(KF_OK, "rope: positions with 3 axes and an axis map", kf_rope(C, &q, &k, &q, &k, &ra));
    EXPECT_NOCTX("rope: ctx NULL", kf_rope(NULL, &q, &k, &qo, &ko, &tab));
    EXPECT(KF_ERR_NULL_POINTER, "rope: q NULL", kf_rope(C, NULL, &k, &qo, &ko, &tab));
    EXPECT(KF_ERR_NULL_POINTER, "rope: q_out NULL", kf_rope(C, &q, &k, NULL, &ko, &tab));
    EXPECT(KF_ERR_NULL_POINTER, "rope: rope args NULL", kf_rope(C, &q, &k, &qo, &ko, NULL));
    EXPECT(KF_ERR_NULL_POINTER, "rope: k given without k_out", kf_rope(C, &q, &k, &qo, NULL, &tab));
    EXPECT(KF_ERR_NULL_POINTER, "rope: k_out given without k",
            kf_rope(C, &q, NULL, &qo, &ko, &tab));
    TENSOR_MUTATIONS("rope q", q, kf_rope(C, &T, &k, &qo, &ko, &tab));
    TENSOR_MUTATIONS("rope k_out", ko, kf_rope(C, &q, &k, &qo, &T, &tab));
    TENSOR_MUTATIONS("rope cos", cs, kf_rope(C, &q, &k, &qo, &ko, (ra = tab, ra.cos = &T, &ra)));
    t = q; t.ndim = 3; t.shape[0] = 4; t.shape[1] = 2; t.shape[2] = 64;
    t.stride[0] = 128; t.stride[1] = 64; t.stride[2] = 1;
    EXPECT(KF_ERR_SHAPE, "rope: q 3-D", kf_rope(C, &t, &k, &qo, &ko, &tab));
    t = k; t.dtype = KF_F16;
    {
        kf_tensor t2 = ko;
        t2.dtype = KF_F16;
        EXPECT(KF_ERR_DTYPE, "rope: k f16, q f32", kf_rope(C, &q, &t, &qo, &t2, &tab));
    }
    t = k; t.shape[3] = 32;
    EXPECT(KF_ERR_SHAPE, "rope: k head_dim 32, q 64", kf_rope(C, &q, &t, &qo, &ko, &tab));
    t = k; t.shape[1] = 2;
    EXPECT(KF_ERR_SHAPE, "rope: k S 2, q S 4", kf_rope(C, &q, &t, &qo, &ko, &tab));
    t = qo; t.stride[2] = 0;
    EXPECT(KF_ERR_STRIDE, "rope: broadcast q_out", kf_rope(C, &q, &k, &t, &ko, &tab));
    ra = tab; ra.rotary_dim = 3;
    EXPECT(KF_ERR_INVALID_ARG, "rope: rotary_dim odd", kf_rope(C, &q, &k, &qo, &ko, &ra));
    ra = tab; ra.rotary_dim = 66;
    EXPECT(KF_ERR_INVALID_ARG, "rope: rotary_dim > head_dim", kf_rope(C, &q, &k, &qo, &ko, &ra));
    ra = tab; ra.rotary_dim = -2;
    EXPECT(KF_ERR_INVALID_ARG, "rope: rotary_dim negative", kf_rope(C, &q, &k, &qo, &ko, &ra));
    /* rotary_dim 0 = a head_dim over 2^31 - 1 (rejected before any memory is read) */
    t = q; t.shape[0] = t.shape[1] = t.shape[2] = 1; t.shape[3] = ((int64_t)1 << 31) + 2;
    EXPECT(KF_ERR_SHAPE, "rope: head_dim over 2^31 - 1", kf_rope(C, &t, NULL, &t, NULL, &ps));
    ra = tab; ra.convention = 2;
    EXPECT(KF_ERR_INVALID_ARG, "rope: convention 2", kf_rope(C, &q, &k, &qo, &ko, &ra));
    ra = tab; ra.positions = &pos; ra.freqs = &fr;
    EXPECT(KF_ERR_INVALID_ARG, "rope: both angle forms", kf_rope(C, &q, &k, &qo, &ko, &ra));
    memset(&ra, 0, sizeof ra);
    EXPECT(KF_ERR_INVALID_ARG, "rope: neither angle form",
            kf_rope(C, &q, &k, &qo, &ko, &ra));
    ra = tab; ra.sin = NULL;
    EXPECT(KF_ERR_NULL_POINTER, "rope: cos without sin",
            kf_rope(C, &q, &k, &qo, &ko, &ra));
    ra = ps; ra.freqs = NULL;
    EXPECT(KF_ERR_NULL_POINTER, "rope: positions without freqs",
            kf_rope(C, &q, &k, &qo, &ko, &ra));
    t = cs; t.shape[1] = 66;
    ra = tab; ra.cos = &t;
    EXPECT(KF_ERR_SHAPE, "rope: cos has 66 columns, rotary_dim 64", kf_rope(C, &q, &k, &qo, &ko, &ra));
    t = cs; t.shape[0] = 3;
    ra = tab; ra.cos = &t;
    EXPECT_NAMING(KF_ERR_SHAPE, "rope: cos has 3 tokens, S 4 (the message names q)", "cos", "q",
                  kf_rope(C, &q, &k, &qo, &ko, &ra));
    t = pos; t.shape[1] = 4;
    ra = ps; ra.positions = &t;
    EXPECT(KF_ERR_SHAPE, "rope: positions n_axes 4", kf_rope(C, &q, &k, &qo, &ko, &ra));
    /* 1-D positions of S = 4 entries (HF's position ids): named by its shape, not as 4 axes */
    t = pos; t.ndim = 1; t.shape[0] = 4; t.stride[0] = 1;
    ra = ps; ra.positions = &t;
    EXPECT_NAMING(KF_ERR_SHAPE, "rope: positions 1-D [S]", "positions", "n_axes",
                  kf_rope(C, &q, &k, &qo, &ko, &ra));
    t = pos; t.dtype = KF_F16;
    ra = ps; ra.positions = &t;
    EXPECT(KF_ERR_DTYPE, "rope: positions f16", kf_rope(C, &q, &k, &qo, &ko, &ra));
    t = fr; t.shape[0] = 31;
    ra = ps; ra.freqs = &t;
    EXPECT(KF_ERR_SHAPE, "rope: freqs 31, rotary_dim/2 32", kf_rope(C, &q, &k, &qo, &ko, &ra));
    t = ax; t.dtype = KF_F32;
    ra = ps; ra.axis = &t;
    EXPECT(KF_ERR_DTYPE, "rope: axis f32", kf_rope(C, &q, &k, &qo, &ko, &ra));
    /* 16-bit activations take f32 or 16-bit tables, but both of one dtype */
    {
        kf_tensor q16 = q, qo16 = qo, sn16 = sn;
        q16.dtype = qo16.dtype = sn16.dtype = KF_F16;
        ra = tab; ra.sin = &sn16;
        EXPECT_NAMING(KF_ERR_DTYPE, "rope: cos f32, sin f16 (q f16)", "cos", "sin",
                      kf_rope(C, &q16, NULL, &qo16, NULL, &ra));
        EXPECT_NAMING(KF_ERR_DTYPE, "rms_norm_rope: cos f32, sin f16 (x f16)", "cos",
                      "sin", kf_rms_norm_rope(C, &q16, NULL, 1e-5f, KF_RMS_NONE, 0.f, &ra, &qo16));
    }
    /* The GPU kernels hold head counts and the head dim in 32 bits: over 2^30
     * of either is refused there before any memory is read (the CPU backend
     * runs such calls, so they are not made on it here). The long views start
     * at the arena's last region, past every table they are checked against. */
    if (kf_ctx_backend(A->ctx) == KF_BACKEND_GPU) {
        const int64_t big = (int64_t)1 << 30;
        /* 2^32 + 1 heads: 1 when cut to 32 bits (one head rotated, the call "done") */
        kf_tensor heads = view(A, OFF_SHARE, KF_F32, 4, 1, 1, 4 * big + 1, 2);
        kf_tensor q1 = view(A, OFF_Q, KF_F32, 4, 1, 1, 1, 2);
        kf_tensor c1 = view(A, OFF_COS, KF_F32, 2, 1, 2, 0, 0);
        kf_tensor s1 = view(A, OFF_SIN, KF_F32, 2, 1, 2, 0, 0);
        ra = tab; ra.rotary_dim = 2; ra.cos = &c1; ra.sin = &s1;
        EXPECT(KF_OK, "rope: one head of 2 channels (the base of the two below)",
               kf_rope(C, &q1, NULL, &q1, NULL, &ra));
        EXPECT(KF_ERR_UNSUPPORTED, "rope: 2^32 + 1 heads on the GPU",
               kf_rope(C, &heads, NULL, &heads, NULL, &ra));
        EXPECT(KF_ERR_UNSUPPORTED, "rope: k of 2^32 + 1 heads on the GPU",
               kf_rope(C, &q1, &heads, &q1, &heads, &ra));
        kf_tensor longh = view(A, OFF_SHARE, KF_F32, 4, 1, 1, 1, big + 2);
        kf_tensor p1 = view(A, OFF_POS, KF_F32, 2, 1, 1, 0, 0);
        kf_tensor f1 = view(A, OFF_FREQ, KF_F32, 1, 1, 0, 0, 0);
        ra = ps; ra.rotary_dim = 2; ra.positions = &p1; ra.freqs = &f1;
        EXPECT(KF_ERR_UNSUPPORTED, "rope: head_dim 2^30 + 2 (rotary_dim 2) on the GPU",
               kf_rope(C, &longh, NULL, &longh, NULL, &ra));
        /* 2^32 + 2 channels: a row of 2 when cut to 32 bits */
        longh.shape[3] = 4 * big + 2;
        EXPECT(KF_ERR_UNSUPPORTED, "rms_norm_rope: head_dim 2^32 + 2 on the GPU",
               kf_rms_norm_rope(C, &longh, NULL, 1e-5f, KF_RMS_NONE, 0.f, &ra, &longh));
    }

    /* rms_norm_rope: x [1, 4, 2, 64], norm over 128 */
    EXPECT(KF_OK, "rms_norm_rope: valid",
           kf_rms_norm_rope(C, &q, &w, 1e-5f, KF_RMS_NONE, 0.f, &tab, &qo));
    EXPECT(KF_OK, "rms_norm_rope: no weight, in place",
           kf_rms_norm_rope(C, &q, NULL, 1e-5f, KF_RMS_NONE, 0.f, &ps, &q));
    EXPECT_NOCTX("rms_norm_rope: ctx NULL",
           kf_rms_norm_rope(NULL, &q, &w, 1e-5f, KF_RMS_NONE, 0.f, &tab, &qo));
    EXPECT(KF_ERR_NULL_POINTER, "rms_norm_rope: rope NULL",
           kf_rms_norm_rope(C, &q, &w, 1e-5f, KF_RMS_NONE, 0.f, NULL, &qo));
    EXPECT(KF_ERR_NULL_POINTER, "rms_norm_rope: y NULL",
           kf_rms_norm_rope(C, &q, &w, 1e-5f, KF_RMS_NONE, 0.f, &tab, NULL));
    t = w; t.shape[0] = 127;
    EXPECT(KF_ERR_SHAPE, "rms_norm_rope: weight 127, H*Dh 128",
           kf_rms_norm_rope(C, &q, &t, 1e-5f, KF_RMS_NONE, 0.f, &tab, &qo));
    t = q; t.stride[2] = 4 * 64; t.stride[1] = 64; t.shape[1] = 4;   /* [B,H,S,Dh] memory */
    EXPECT(KF_ERR_STRIDE, "rms_norm_rope: head stride != Dh",
           kf_rms_norm_rope(C, &t, &w, 1e-5f, KF_RMS_NONE, 0.f, &tab, &qo));
    EXPECT(KF_ERR_STRIDE, "rms_norm_rope: y's head stride != Dh",
           kf_rms_norm_rope(C, &q, &w, 1e-5f, KF_RMS_NONE, 0.f, &tab, &t));
    /* an empty x whose H * Dh overflows int64 (the weight's length) */
    t = q; t.shape[0] = 0; t.shape[1] = 1; t.shape[2] = t.shape[3] = (int64_t)1 << 32;
    t.stride[2] = t.shape[3]; t.stride[1] = t.stride[0] = 0;
    EXPECT(KF_ERR_SHAPE, "rms_norm_rope: empty x, H * Dh over 2^63",
           kf_rms_norm_rope(C, &t, &w, 1e-5f, KF_RMS_NONE, 0.f, &tab, &t));
    EXPECT(KF_ERR_INVALID_ARG, "rms_norm_rope: eps -1",
           kf_rms_norm_rope(C, &q, &w, -1.f, KF_RMS_NONE, 0.f, &tab, &qo));
    EXPECT(KF_ERR_INVALID_ARG, "rms_norm_rope: mode 5",
           kf_rms_norm_rope(C, &q, &w, 1e-5f, (kf_rms_mode)5, 0.f, &tab, &qo));
    ra = tab; ra.rotary_dim = 5;
    EXPECT(KF_ERR_INVALID_ARG, "rms_norm_rope: rotary_dim odd",
           kf_rms_norm_rope(C, &q, &w, 1e-5f, KF_RMS_NONE, 0.f, &ra, &qo));
}

static void api_activations(api_run *A)
{
    kf_tensor g = view(A, OFF_X, KF_F32, 3, 2, 2, D, 0);
    kf_tensor u = view(A, OFF_R, KF_F32, 3, 2, 2, D, 0);
    kf_tensor y = view(A, OFF_Y, KF_F32, 3, 2, 2, D, 0);
    kf_tensor yh = view(A, OFF_Y, KF_F32, 3, 2, 2, D / 2, 0);   /* packed output */
    kf_tensor t;
    EXPECT(KF_OK, "glu: valid two tensors", kf_glu(C, &g, &u, KF_ACT_SILU, 0, &y));
    EXPECT(KF_OK, "glu: valid packed", kf_glu(C, &g, NULL, KF_ACT_GELU_TANH, 1, &yh));
    EXPECT_NOCTX("glu: ctx NULL", kf_glu(NULL, &g, &u, KF_ACT_SILU, 0, &y));
    EXPECT(KF_ERR_NULL_POINTER, "glu: gate NULL", kf_glu(C, NULL, &u, KF_ACT_SILU, 0, &y));
    EXPECT(KF_ERR_NULL_POINTER, "glu: y NULL", kf_glu(C, &g, &u, KF_ACT_SILU, 0, NULL));
    TENSOR_MUTATIONS("glu gate", g, kf_glu(C, &T, &u, KF_ACT_SILU, 0, &y));
    TENSOR_MUTATIONS("glu up", u, kf_glu(C, &g, &T, KF_ACT_SILU, 0, &y));
    TENSOR_MUTATIONS("glu y", y, kf_glu(C, &g, &u, KF_ACT_SILU, 0, &T));
    t = u; t.shape[2] = D / 2;
    EXPECT(KF_ERR_SHAPE, "glu: up shape differs", kf_glu(C, &g, &t, KF_ACT_SILU, 0, &y));
    EXPECT(KF_ERR_SHAPE, "glu: packed output with the full width",
           kf_glu(C, &g, NULL, KF_ACT_SILU, 0, &y));
    t = g; t.shape[2] = D - 1;
    EXPECT(KF_ERR_SHAPE, "glu: packed input of odd width", kf_glu(C, &t, NULL, KF_ACT_SILU, 0, &yh));
    t = u; t.dtype = KF_F16;
    EXPECT(KF_ERR_DTYPE, "glu: up f16, gate f32", kf_glu(C, &g, &t, KF_ACT_SILU, 0, &y));
    EXPECT(KF_ERR_INVALID_ARG, "glu: activation 3", kf_glu(C, &g, &u, (kf_activation)3, 0, &y));
    EXPECT(KF_ERR_INVALID_ARG, "glu: activation -1", kf_glu(C, &g, &u, (kf_activation)-1, 0, &y));
    EXPECT(KF_ERR_INVALID_ARG, "glu: gate_first 7", kf_glu(C, &g, &u, KF_ACT_SILU, 7, &y));
    EXPECT(KF_ERR_INVALID_ARG, "glu: packed, gate_first -1",
           kf_glu(C, &g, NULL, KF_ACT_SILU, -1, &yh));

    EXPECT(KF_OK, "gelu: valid", kf_gelu(C, &g, 1, &y));
    EXPECT(KF_OK, "gelu: in place", kf_gelu(C, &g, 0, &g));
    EXPECT_NOCTX("gelu: ctx NULL", kf_gelu(NULL, &g, 1, &y));
    EXPECT(KF_ERR_NULL_POINTER, "gelu: x NULL", kf_gelu(C, NULL, 1, &y));
    TENSOR_MUTATIONS("gelu x", g, kf_gelu(C, &T, 1, &y));
    EXPECT(KF_ERR_INVALID_ARG, "gelu: approximate 2", kf_gelu(C, &g, 2, &y));
    t = y; t.dtype = KF_BF16;
    EXPECT(KF_ERR_DTYPE, "gelu: y bf16, x f32", kf_gelu(C, &g, 1, &t));
    t = y; t.shape[0] = 1;
    EXPECT(KF_ERR_SHAPE, "gelu: y shape differs", kf_gelu(C, &g, 1, &t));

    {   /* 2^64 elements: rejected by count, not wrapped around to 0 */
        kf_ctx *C2 = fresh_ctx(A);
        t = y; t.ndim = 2; t.shape[0] = t.shape[1] = (int64_t)1 << 32; t.stride[0] = 1; t.stride[1] = 1;
        verdict(A, C2, C2 ? kf_softmax(C2, &t, 1.0f, &t) : KF_ERR_INTERNAL, KF_ERR_SHAPE, "softmax: 2^64 elements", "2^63", NULL);
    }
    {   /* kf_tensor_contiguous of a size no memory holds: strides saturate (no
         * signed overflow: the sanitizer build aborted here), the op rejects it */
        const int64_t big[3] = {(int64_t)1 << 40, (int64_t)1 << 40, 2};
        kf_tensor b = kf_tensor_contiguous(g.data, (kf_dtype)g.dtype, 3, big);
        kf_ctx *C2 = fresh_ctx(A);
        verdict(A, C2, C2 ? kf_silu(C2, &b, &b) : KF_ERR_INTERNAL, KF_ERR_STRIDE,
                "silu: contiguous [2^40, 2^40, 2]", NULL, NULL);
    }
    {   /* kf_tensor_contiguous with a NULL shape: a view every op rejects, not an
         * empty one that would make the call a silent no-op */
        kf_tensor b = kf_tensor_contiguous(g.data, (kf_dtype)g.dtype, 2, NULL);
        kf_ctx *C2 = fresh_ctx(A);
        verdict(A, C2, C2 ? kf_silu(C2, &b, &y) : KF_ERR_INTERNAL, KF_ERR_SHAPE,
                "silu: x from kf_tensor_contiguous(shape NULL)", "x", NULL);
    }
    EXPECT(KF_OK, "silu: valid", kf_silu(C, &g, &y));
    EXPECT_NOCTX("silu: ctx NULL", kf_silu(NULL, &g, &y));
    EXPECT(KF_ERR_NULL_POINTER, "silu: y NULL", kf_silu(C, &g, NULL));
    TENSOR_MUTATIONS("silu y", y, kf_silu(C, &g, &T));

    EXPECT(KF_OK, "softmax: valid", kf_softmax(C, &g, 0.125f, &y));
    EXPECT(KF_OK, "softmax: in place", kf_softmax(C, &g, 1.f, &g));
    EXPECT_NOCTX("softmax: ctx NULL", kf_softmax(NULL, &g, 1.f, &y));
    TENSOR_MUTATIONS("softmax x", g, kf_softmax(C, &T, 1.f, &y));
    EXPECT(KF_ERR_INVALID_ARG, "softmax: scale NaN", kf_softmax(C, &g, NAN, &y));
    EXPECT(KF_ERR_INVALID_ARG, "softmax: scale Inf", kf_softmax(C, &g, INFINITY, &y));
    t = y; t.stride[1] = 0;
    EXPECT(KF_ERR_STRIDE, "softmax: broadcast output", kf_softmax(C, &g, 1.f, &t));
}

/* ---- memory shared between the tensors of one call ----------------------
 * Each share_case is one op's call with its tensors named as its messages
 * name them; share_checks derives from it, for every tensor the op writes:
 * the exact alias of every tensor of the same shape (KF_OK for the in-place
 * pair, INVALID_ARG otherwise), the written tensor one row before and three
 * elements into every other tensor (INVALID_ARG; both views are moved into
 * the OFF_SHARE scratch so that they overlap only each other), and rows that
 * overlap through a short stride (STRIDE). A rejection must name both. */

#define SH_MAX 7
/* a role; a written tensor's one in-place input: its index */
enum { SH_WRITTEN_ANY = -3, SH_READ = -2, SH_WRITTEN = -1 }; /* ANY: may alias every input */
enum { SH_RMS, SH_ADD_RMS, SH_LAYER, SH_ADA, SH_ADD_ADA, SH_GATED, SH_ROPE_TAB, SH_ROPE_POS,
       SH_NR_TAB, SH_NR_POS, SH_GLU, SH_GLU_PACKED, SH_GELU, SH_SILU, SH_SOFTMAX };

typedef struct share_case {
    const char *label;
    int call;                        /* SH_*: how share_call passes t */
    int n;
    const char *name[SH_MAX];
    kf_tensor t[SH_MAX];
    int role[SH_MAX];
} share_case;

static kf_status share_call(kf_ctx *C, int call, const kf_tensor *t)
{
    kf_rope_args r;
    memset(&r, 0, sizeof r);
    switch (call) {
    case SH_RMS:
        return kf_rms_norm(C, &t[0], &t[1], 1e-6f, KF_RMS_LLAMA, 0.f, &t[2]);
    case SH_ADD_RMS:
        return kf_add_rms_norm(C, &t[0], &t[1], &t[2], 1e-6f, KF_RMS_LLAMA, 0.f, &t[3]);
    case SH_LAYER:
        return kf_layer_norm(C, &t[0], &t[1], &t[2], 1e-5f, &t[3]);
    case SH_ADA:
        return kf_ada_norm(C, &t[0], &t[1], &t[2], &t[3], 1e-6f, KF_NORM_RMS, &t[4]);
    case SH_ADD_ADA:
        return kf_add_ada_norm(C, &t[0], &t[1], &t[2], &t[3], &t[4], &t[5], 1e-6f,
                               KF_NORM_LAYER, &t[6]);
    case SH_GATED:
        return kf_gated_residual(C, &t[0], &t[1], &t[2]);
    case SH_ROPE_TAB:
        r.cos = &t[4];
        r.sin = &t[5];
        return kf_rope(C, &t[0], &t[1], &t[2], &t[3], &r);
    case SH_ROPE_POS:
        r.convention = KF_ROPE_INTERLEAVED;
        r.positions = &t[4];
        r.freqs = &t[5];
        r.axis = &t[6];
        return kf_rope(C, &t[0], &t[1], &t[2], &t[3], &r);
    case SH_NR_TAB:
        r.cos = &t[3];
        r.sin = &t[4];
        return kf_rms_norm_rope(C, &t[0], &t[1], 1e-5f, KF_RMS_NONE, 0.f, &r, &t[2]);
    case SH_NR_POS:
        r.positions = &t[3];
        r.freqs = &t[4];
        r.axis = &t[5];
        return kf_rms_norm_rope(C, &t[0], &t[1], 1e-5f, KF_RMS_NONE, 0.f, &r, &t[2]);
    case SH_GLU:
        return kf_glu(C, &t[0], &t[1], KF_ACT_SILU, 0, &t[2]);
    case SH_GLU_PACKED:
        return kf_glu(C, &t[0], NULL, KF_ACT_GELU_TANH, 1, &t[1]);
    case SH_GELU:
        return kf_gelu(C, &t[0], 1, &t[1]);
    case SH_SILU:
        return kf_silu(C, &t[0], &t[1]);
    default:
        return kf_softmax(C, &t[0], 0.125f, &t[1]);
    }
}

/* The case's call on the views v; every view must lie in the arena. */
static void share_expect(api_run *A, const share_case *c, const kf_tensor *v, kf_status want,
                         const char *what, const char *name1, const char *name2)
{
    char w[200];
    snprintf(w, sizeof w, "%s: %s", c->label, what);
    for (int i = 0; i < c->n; i++) {
        int64_t last = 0;
        for (int d = 0; d < v[i].ndim; d++)
            last += (v[i].shape[d] - 1) * v[i].stride[d];
        unsigned char *lo = (unsigned char *)v[i].data;
        if (lo < A->base || lo + (last + 1) * 4 > A->base + ARENA_ELEMS * 4) {
            fail(A, w, "the test's view leaves the arena");
            return;
        }
    }
    EXPECT_NAMING(want, w, name1, name2, share_call(C, c->call, v));
}

static void share_checks(api_run *A, const share_case *c)
{
    kf_tensor v[SH_MAX];
    char what[160];
    unsigned char *p_at = A->base + (OFF_SHARE + D) * 4; /* the other view, moved */
    fflush(A->out); /* the lines so far survive a crash in this case */
    for (int i = 0; i < c->n; i++) {
        if (c->role[i] == SH_READ)
            continue;
        const kf_tensor *wt = &c->t[i];
        for (int j = 0; j < c->n; j++) {
            if (j == i || (c->role[j] != SH_READ && j > i)) /* two written: once */
                continue;
            const kf_tensor *pt = &c->t[j];
            int same = wt->ndim == pt->ndim && wt->dtype == pt->dtype;
            for (int d = 0; same && d < wt->ndim; d++)
                same = wt->shape[d] == pt->shape[d];
            if (same) {
                int in_place = c->role[i] == j || c->role[j] == i ||
                               (c->role[i] == SH_WRITTEN_ANY && c->role[j] == SH_READ);
                memcpy(v, c->t, sizeof v);
                v[i] = *pt;
                snprintf(what, sizeof what, "%s = %s exactly%s", c->name[i], c->name[j],
                         in_place ? " (in place)" : "");
                share_expect(A, c, v, in_place ? KF_OK : KF_ERR_INVALID_ARG, what,
                             in_place ? NULL : c->name[i], in_place ? NULL : c->name[j]);
            }
            for (int into = 0; into < 2; into++) {
                memcpy(v, c->t, sizeof v);
                v[j].data = p_at;
                v[i].data = p_at + (into ? 3 : -wt->shape[wt->ndim - 1]) * 4;
                snprintf(what, sizeof what, "%s %s %s", c->name[i],
                         into ? "3 elements into" : "one row before", c->name[j]);
                share_expect(A, c, v, KF_ERR_INVALID_ARG, what, c->name[i], c->name[j]);
            }
        }
        int d = 0; /* the outermost dim of more than one row */
        while (d < wt->ndim - 2 && wt->shape[d] == 1)
            d++;
        memcpy(v, c->t, sizeof v);
        v[i].stride[d] = wt->shape[wt->ndim - 1] / 2;
        snprintf(what, sizeof what, "%s rows overlap (stride %lld in dim %d, rows of %lld)",
                 c->name[i], (long long)v[i].stride[d], d, (long long)wt->shape[wt->ndim - 1]);
        share_expect(A, c, v, KF_ERR_STRIDE, what, c->name[i], NULL);
    }
}

static void api_sharing(api_run *A)
{
    kf_tensor x = view(A, OFF_X, KF_F32, 3, 2, 2, D, 0);
    kf_tensor y = view(A, OFF_Y, KF_F32, 3, 2, 2, D, 0);
    kf_tensor r = view(A, OFF_R, KF_F32, 3, 2, 2, D, 0);
    kf_tensor yh = view(A, OFF_Y, KF_F32, 3, 2, 2, D / 2, 0); /* packed glu output */
    kf_tensor w = view(A, OFF_W, KF_F32, 1, D, 0, 0, 0);
    kf_tensor w128 = view(A, OFF_W, KF_F32, 1, 128, 0, 0, 0);
    kf_tensor b = view(A, OFF_B, KF_F32, 1, D, 0, 0, 0);
    kf_tensor sc = view(A, OFF_SCALE, KF_F32, 3, 2, 1, D, 0);
    kf_tensor sh = view(A, OFF_SHIFT, KF_F32, 3, 2, 1, D, 0);
    kf_tensor g = view(A, OFF_GATE, KF_F32, 3, 2, 1, D, 0);
    ROPE_VIEWS(A);
    kf_tensor k2 = view(A, OFF_X, KF_F32, 4, 1, 4, 2, 64); /* Hk = Hq: q_out = k fits */
    kf_tensor ko2 = view(A, OFF_Y, KF_F32, 4, 1, 4, 2, 64);
    enum { R = SH_READ, W = SH_WRITTEN, WA = SH_WRITTEN_ANY };
    const share_case cases[] = {
        {"rms_norm", SH_RMS, 3, {"x", "weight", "y"}, {x, w, y}, {R, R, 0}},
        {"add_rms_norm", SH_ADD_RMS, 4, {"x", "residual", "weight", "y"}, {x, r, w, y},
         {R, W, R, 0}},
        {"layer_norm", SH_LAYER, 4, {"x", "weight", "bias", "y"}, {x, w, b, y}, {R, R, R, 0}},
        {"ada_norm", SH_ADA, 5, {"x", "scale", "shift", "weight", "y"}, {x, sc, sh, w, y},
         {R, R, R, R, 0}},
        {"add_ada_norm", SH_ADD_ADA, 7, {"h", "a", "gate", "scale", "shift", "weight", "y"},
         {x, r, g, sc, sh, w, y}, {W, R, R, R, R, R, W}},
        {"gated_residual", SH_GATED, 3, {"h", "a", "gate"}, {x, r, g}, {W, R, R}},
        {"rope (tables)", SH_ROPE_TAB, 6, {"q", "k", "q_out", "k_out", "cos", "sin"},
         {q, k, qo, ko, cs, sn}, {R, R, 0, 1, R, R}},
        {"rms_norm_rope (tables)", SH_NR_TAB, 5, {"x", "weight", "y", "cos", "sin"},
         {q, w128, qo, cs, sn}, {R, R, 0, R, R}},
        {"glu", SH_GLU, 3, {"gate", "up", "y"}, {x, r, y}, {R, R, WA}},
        {"glu (packed)", SH_GLU_PACKED, 2, {"packed input", "y"}, {x, yh}, {R, W}},
        {"gelu", SH_GELU, 2, {"x", "y"}, {x, y}, {R, 0}},
        {"silu", SH_SILU, 2, {"x", "y"}, {x, y}, {R, 0}},
        {"softmax", SH_SOFTMAX, 2, {"x", "y"}, {x, y}, {R, 0}},
        /* Last: without the check, an output written over the axis map the CPU
         * kernel indexes with can crash the run (the danger it guards). */
        {"rope (positions, Hk = Hq)", SH_ROPE_POS, 7,
         {"q", "k", "q_out", "k_out", "positions", "freqs", "axis"}, {q, k2, qo, ko2, pos, fr, ax},
         {R, R, 0, 1, R, R, R}},
        {"rms_norm_rope (positions)", SH_NR_POS, 6,
         {"x", "weight", "y", "positions", "freqs", "axis"}, {q, w128, qo, pos, fr, ax},
         {R, R, 0, R, R, R}},
    };

    /* Views with gaps that interleave are not examined: q and k as column
     * slices of one fused [S, 3 * H * Dh] qkv projection, rotated in place. */
    kf_tensor fq = q, fk = k;
    fq.data = A->base + OFF_X * 4;
    fk.data = A->base + (OFF_X + 128) * 4;
    fq.stride[0] = fk.stride[0] = 4 * 384;
    fq.stride[1] = fk.stride[1] = 384;
    kf_rope_args tab;
    memset(&tab, 0, sizeof tab);
    tab.cos = &cs;
    tab.sin = &sn;
    EXPECT(KF_OK, "rope: q and k column slices of one fused qkv buffer, in place",
           kf_rope(C, &fq, &fk, &fq, &fk, &tab));
    fk.data = A->base + (OFF_X + 64) * 4; /* k = q's second head: slices that meet */
    EXPECT_NAMING(KF_ERR_INVALID_ARG,
                  "rope: q and k column slices of one qkv buffer sharing a head", "q_out", "k",
                  kf_rope(C, &fq, &fk, &fq, &fk, &tab));
    /* Half rows: y in the gaps of x, and the same gapped y over a dense x. */
    kf_tensor xh = view(A, OFF_X, KF_F32, 2, 4, D / 2, 0, 0), yg = xh;
    yg.data = A->base + (OFF_X + D / 2) * 4;
    yg.stride[0] = D;
    kf_tensor xg = xh;
    xg.stride[0] = D;
    EXPECT(KF_OK, "gelu: y in the gaps of x (the other half of every row)",
           kf_gelu(C, &xg, 1, &yg));
    EXPECT_NAMING(KF_ERR_INVALID_ARG,
                  "softmax: y with gaps, its first row inside a dense x", "y", "x",
                  kf_softmax(C, &xh, 1.f, &yg));
    /* A dense y inside the range of a gapped x (over x's rows 1 and 2). */
    kf_tensor yd = xh;
    yd.data = A->base + (OFF_X + D / 2) * 4;
    EXPECT_NAMING(KF_ERR_INVALID_ARG,
                  "gelu: dense y inside the range of a gapped x", "y", "x",
                  kf_gelu(C, &xg, 1, &yd));
    /* Both gapped, different row strides (D and D / 2): y's third row meets
     * x's second; found row by row. */
    kf_tensor xq = view(A, OFF_X, KF_F32, 2, 4, D / 4, 0, 0), yq = xq;
    xq.stride[0] = D;
    yq.stride[0] = D / 2;
    yq.data = A->base + (OFF_X + D / 8) * 4;
    EXPECT_NAMING(KF_ERR_INVALID_ARG,
                  "silu: gapped y and x of different row strides that meet", "y", "x",
                  kf_silu(C, &xq, &yq));
    yq.data = A->base + (OFF_X + D / 4) * 4; /* now in x's gaps only */
    EXPECT(KF_OK, "silu: gapped y of another row stride in the gaps of x",
           kf_silu(C, &xq, &yq));
    /* Rows that repeat after a gap: y [2, 2, D] with strides [2D, 2D, 1]. */
    kf_tensor yr = view(A, OFF_Y, KF_F32, 3, 2, 2, D, 0);
    kf_tensor xr = view(A, OFF_X, KF_F32, 3, 2, 2, D, 0);
    yr.stride[0] = yr.stride[1] = 2 * D;
    EXPECT_NAMING(KF_ERR_STRIDE, "gelu: y's rows repeat after a gap", "y", NULL,
                  kf_gelu(C, &xr, 1, &yr));
    /* Packed glu: y written over the gate half of the packed rows. */
    kf_tensor yp = x;
    yp.shape[2] = D / 2;
    EXPECT_NAMING(KF_ERR_INVALID_ARG,
                  "glu (packed): y over the first half of the packed rows", "y", "packed input",
                  kf_glu(C, &x, NULL, KF_ACT_SILU, 1, &yp));

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        share_checks(A, &cases[i]);
}

kf_status kft_run_api_tests(kf_ctx *ctx, const kft_options *opt, kft_result *res)
{
    if (!ctx || !opt || !res)
        return KF_ERR_NULL_POINTER;
    api_run run;
    api_run *A = &run;
    memset(A, 0, sizeof *A);
    A->ctx = ctx;
    A->out = opt->report ? opt->report : stdout;
    A->verbose = opt->verbose;
    A->res = res;
    A->snapshot = (float *)malloc(ARENA_ELEMS * 4);
    A->readback = (float *)malloc(ARENA_ELEMS * 4);
    void *base = NULL;
    if (!A->snapshot || !A->readback || kf_malloc(ctx, ARENA_ELEMS * 4, &base) != KF_OK) {
        free(A->snapshot);
        free(A->readback);
        return KF_ERR_ALLOC;
    }
    A->base = (unsigned char *)base;
    for (int64_t i = 0; i < ARENA_ELEMS; i++)
        A->snapshot[i] = 0.25f + (float)(i % 7) * 0.125f;
    memset(A->snapshot + OFF_AXIS, 0, 32 * 4);              /* axis map: all axis 0 */
    memset(A->snapshot + OFF_SHARE, 0, 6 * D * 4);          /* so is an axis moved there */
    kf_status st = arena_upload(A) ? KF_OK : KF_ERR_GPU;
    if (st == KF_OK) {
        api_context(A);
        api_norms(A);
        api_ada(A);
        api_rope(A);
        api_activations(A);
        api_sharing(A);
        api_two_devices(A);
    }
    kf_free(ctx, base);
    free(A->snapshot);
    free(A->readback);
    return st;
}
