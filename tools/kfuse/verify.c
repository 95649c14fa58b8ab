/* verify.c - `kfuse verify`: the API / error-path tests and the case suite
 * (every op x dtype x shape against the float64 reference of tests/check_*.c)
 * on one backend, or (--fuzz N) N random valid cases. Prints the report and "N passed, N failed"; exit 1 when
 * a case failed or the suite could not run. */
#include <stdio.h>
#include <string.h>
#include "check.h"
#include "cli.h"

int kfc_cmd_verify(const kfc_args *a)
{
    kft_options opt;
    kft_result res = {0, 0};
    kf_status st_api, st_suite;
    kf_ctx *ctx = kfc_open_context(a);
    int rc;

    if (!ctx)
        return KFC_EXIT_FAIL;
    printf("kfuse verify: %s\n", kf_ctx_describe(ctx));
    memset(&opt, 0, sizeof opt);
    opt.op = a->op;
    opt.dtype = a->dtype;
    opt.quick = a->quick;
    opt.seed = a->seed;
    opt.verbose = a->verbose;
    opt.report = stdout;

    if (a->fuzz > 0) {
        st_api = KF_OK;
        st_suite = kft_run_fuzz(ctx, &opt, a->fuzz, -1, &res);
    } else {
        st_api = kft_run_api_tests(ctx, &opt, &res);
        if (st_api != KF_OK)
            printf("API tests could not run: %s (%s)\n", kf_status_string(st_api),
                   kf_last_error(ctx));
        st_suite = kft_run_suite(ctx, &opt, &res);
    }
    if (st_suite != KF_OK)
        printf("suite could not run: %s (%s)\n", kf_status_string(st_suite),
               kf_last_error(ctx));

    printf("%d passed, %d failed\n", res.passed, res.failed);
    fflush(stdout);
    rc = (res.failed > 0 || st_api != KF_OK || st_suite != KF_OK) ? KFC_EXIT_FAIL : KFC_EXIT_OK;
    kf_ctx_free(ctx);
    return rc;
}
