/* test_suite.c - the C test program: the API / error-path tests and the full
 * op x dtype x shape suite against the float64 reference, on the CPU backend
 * and, when a GPU is present, on the GPU backend (there, after the full suite,
 * the quick suite twice more, on two contexts, compared bitwise).
 *   test_suite [--quick] [--op NAME] [--dtype f32|f16|bf16] [--seed N]
 *              [--verbose] [--backend cpu|gpu|all]
 *   test_suite --fuzz N [--fuzz-case K] [--op ..] [--dtype ..] [--seed N] [--backend ..]
 * --fuzz runs N random valid cases instead of the suite (case K alone with
 * --fuzz-case K: a failure prints the line that replays it).
 * The last line is "N passed, N failed"; the exit status is 1 on any failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"

static void usage(void)
{
    fprintf(stderr, "usage: test_suite [--quick] [--op NAME] [--dtype f32|f16|bf16] [--seed N]\n"
                    "                  [--verbose] [--backend cpu|gpu|all]\n"
                    "       test_suite --fuzz N [--fuzz-case K] [--op NAME] [--dtype ..] [--seed N]\n"
                    "                  [--verbose] [--backend cpu|gpu|all]\n");
}

/* fuzz > 0: random cases instead of the suite (fuzz_only >= 0: that one) */
static long fuzz_count = 0, fuzz_only = -1;

/* ops.md: results are bitwise the same from run to run on one device. The
 * quick suite again on ctx and on a second context of the same GPU, every
 * buffer compared byte for byte (run after the full suite on the GPU). */
static void check_gpu_determinism(kf_ctx *ctx, const kft_options *opt, kft_result *res)
{
    kf_ctx *again = NULL;
    kf_status st = kf_ctx_create(KF_BACKEND_GPU, 0, &again);
    if (st != KF_OK) {
        printf("determinism: no second GPU context: %s\n", kf_status_string(st));
        res->failed++;
        return;
    }
    kft_options quick = *opt;
    quick.quick = 1;
    kft_result twin = {0, 0};
    st = kft_run_suite_bitwise(ctx, again, &quick, &twin);
    printf("determinism (the quick suite on two contexts, bitwise): %d passed, %d failed\n",
           twin.passed, twin.failed);
    res->passed += twin.passed;
    res->failed += twin.failed + (st != KF_OK);
    kf_ctx_free(again);
}

/* Runs both test sets (or the random cases) on one backend; returns 0 if the
 * backend is absent. */
static int run_backend(kf_backend backend, const kft_options *opt, kft_result *res,
                       int required)
{
    kf_ctx *ctx = NULL;
    kf_status st = kf_ctx_create(backend, 0, &ctx);
    const char *name = backend == KF_BACKEND_CPU ? "cpu" : "gpu";
    if (st != KF_OK) {
        if (required) {
            printf("backend %s: cannot create a context: %s (%s)\n", name,
                   kf_status_string(st), kf_last_error(NULL));
            res->failed++;
        } else {
            printf("backend %s: not present (%s), skipped\n", name, kf_status_string(st));
        }
        return 0;
    }
    printf("== backend %s: %s\n", name, kf_ctx_describe(ctx));
    fflush(stdout);
    if (fuzz_count > 0) {
        kft_result fz = {0, 0};
        st = kft_run_fuzz(ctx, opt, fuzz_count, fuzz_only, &fz);
        printf("fuzz: %d passed, %d failed\n", fz.passed, fz.failed);
        res->passed += fz.passed;
        res->failed += fz.failed + (st != KF_OK);
        kf_ctx_free(ctx);
        return 1;
    }
    clock_t c0 = clock();
    struct timespec t0, t1;
    timespec_get(&t0, TIME_UTC);
    if (!opt->op && opt->dtype < 0) {
        kft_result api = {0, 0};
        st = kft_run_api_tests(ctx, opt, &api);
        printf("api tests: %d passed, %d failed\n", api.passed, api.failed);
        res->passed += api.passed;
        res->failed += api.failed;
        if (st != KF_OK) {
            printf("api tests could not run: %s\n", kf_status_string(st));
            res->failed++;
        }
    }
    kft_result suite = {0, 0};
    st = kft_run_suite(ctx, opt, &suite);
    timespec_get(&t1, TIME_UTC);
    double wall = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    printf("suite: %d passed, %d failed in %.1f s (cpu time %.1f s)\n",
           suite.passed, suite.failed, wall,
           (double)(clock() - c0) / CLOCKS_PER_SEC);
    if (st != KF_OK) {
        printf("suite could not run: %s\n", kf_status_string(st));
        res->failed++;
    }
    res->passed += suite.passed;
    res->failed += suite.failed;
    if (backend == KF_BACKEND_GPU && !opt->quick && !opt->op && opt->dtype < 0)
        check_gpu_determinism(ctx, opt, res);
    kf_ctx_free(ctx);
    return 1;
}

int main(int argc, char **argv)
{
    kft_options opt;
    memset(&opt, 0, sizeof opt);
    opt.dtype = -1;
    const char *backend = "all";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--quick")) {
            opt.quick = 1;
        } else if (!strcmp(a, "--verbose") || !strcmp(a, "-v")) {
            opt.verbose = 1;
        } else if (!strcmp(a, "--op") && next) {
            int found = 0;
            for (int op = 0; op < KF_OP_COUNT; op++)
                if (!strcmp(next, kf_op_name((kf_op)op)))
                    found = 1;
            if (!found) {
                fprintf(stderr, "unknown op '%s'\n", next);
                return 2;
            }
            opt.op = next;
            i++;
        } else if (!strcmp(a, "--dtype") && next) {
            if (!strcmp(next, "f32"))
                opt.dtype = KF_F32;
            else if (!strcmp(next, "f16"))
                opt.dtype = KF_F16;
            else if (!strcmp(next, "bf16"))
                opt.dtype = KF_BF16;
            else {
                fprintf(stderr, "unknown dtype '%s'\n", next);
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--fuzz") && next) {
            fuzz_count = strtol(next, NULL, 10);
            if (fuzz_count <= 0) {
                fprintf(stderr, "--fuzz takes a case count > 0\n");
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--fuzz-case") && next) {
            fuzz_only = strtol(next, NULL, 10);
            if (fuzz_only < 0) {
                fprintf(stderr, "--fuzz-case takes a case number >= 0\n");
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--seed") && next) {
            opt.seed = strtoull(next, NULL, 10);
            i++;
        } else if (!strcmp(a, "--backend") && next) {
            if (strcmp(next, "cpu") && strcmp(next, "gpu") && strcmp(next, "all")) {
                fprintf(stderr, "unknown backend '%s'\n", next);
                return 2;
            }
            backend = next;
            i++;
        } else {
            usage();
            return 2;
        }
    }
    if (fuzz_only >= 0 && fuzz_count <= fuzz_only)
        fuzz_count = fuzz_only + 1;
    if (opt.seed == 0) {
        /* one seed for every backend, printed so that a run can be replayed */
        struct timespec ts;
        timespec_get(&ts, TIME_UTC);
        opt.seed = ((unsigned long long)ts.tv_sec * 1000000007ull) ^ (unsigned long long)ts.tv_nsec;
        if (opt.seed == 0)
            opt.seed = 1;
    }
    printf("seed %llu (replay with --seed %llu)\n", opt.seed, opt.seed);
    kft_result res = {0, 0};
    kft_result self = {0, 0};
    kft_reference_self_test(stdout, &self);
    printf("reference self test: %d passed, %d failed\n", self.passed, self.failed);
    res.passed += self.passed;
    res.failed += self.failed;
    if (!strcmp(backend, "cpu") || !strcmp(backend, "all"))
        run_backend(KF_BACKEND_CPU, &opt, &res, 1);
    if (!strcmp(backend, "gpu") || !strcmp(backend, "all"))
        run_backend(KF_BACKEND_GPU, &opt, &res, !strcmp(backend, "gpu"));
    printf("%d passed, %d failed\n", res.passed, res.failed);
    return res.failed ? 1 : 0;
}
