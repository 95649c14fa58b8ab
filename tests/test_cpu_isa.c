/* test_cpu_isa.c - the two copies of the CPU kernels (src/cpu/cpu.h): the
 * baseline copy and, in x86-64 builds with GCC or Clang, the AVX2 + F16C copy;
 * and how a CPU context picks one (KFUSE_CPU_ISA).
 *   1. Selection: with KFUSE_CPU_ISA unset, empty or "auto" a CPU context runs
 *      the AVX2 copy exactly when the build holds it and /proc/cpuinfo lists
 *      avx2 and f16c; "baseline" gives the baseline copy; "avx2" where that
 *      copy cannot run, and any other value, make kf_ctx_create fail with a
 *      message naming KFUSE_CPU_ISA. The context's description names the copy.
 *   2. Where both copies run: the cases of the suite (its quick list, every
 *      op and dtype on odd and even shapes, strided, misaligned, in place,
 *      NaN / Inf rows; --full: the whole list, about 2 minutes on 2 cores) on
 *      both, on the same inputs, each checked against the float64 reference,
 *      and every buffer byte for byte the same on both
 *      (kft_run_suite_bitwise): which copy runs must never change a result.
 *   test_cpu_isa [--quick | --full] [--seed N]      (--quick: the default)
 * The last line is "N passed, N failed"; the exit status is 1 on any failure. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "core/internal.h"

#ifndef KF_CPU_AVX2_COPY
#define KF_CPU_AVX2_COPY 0      /* CMakeLists.txt defines it when the build has the copy */
#endif

static kft_result g_res;

static void check(int ok, const char *what)
{
    printf("%s %s\n", ok ? "ok  " : "FAIL", what);
    if (ok)
        g_res.passed++;
    else
        g_res.failed++;
}

/* 1 if the "flags" line of /proc/cpuinfo lists avx2 and f16c, 0 if it lacks
 * one, -1 if there is no such line to read. */
static int cpuinfo_has_avx2_f16c(void)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f == NULL)
        return -1;
    static char line[16384];
    int result = -1;
    while (result < 0 && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "flags", 5) != 0 || colon == NULL)
            continue;
        int found = 0;   /* bits: 1 avx2, 2 f16c */
        for (char *w = strtok(colon + 1, " \t\n"); w != NULL; w = strtok(NULL, " \t\n"))
            found |= !strcmp(w, "avx2") ? 1 : !strcmp(w, "f16c") ? 2 : 0;
        result = found == 3;
    }
    fclose(f);
    return result;
}

/* A CPU context created with KFUSE_CPU_ISA set to isa (NULL: unset); its
 * status goes to *st, the context (or NULL) is returned. */
static kf_ctx *cpu_context(const char *isa, kf_status *st)
{
    if (isa)
        setenv("KFUSE_CPU_ISA", isa, 1);
    else
        unsetenv("KFUSE_CPU_ISA");
    kf_ctx *ctx = NULL;
    *st = kf_ctx_create(KF_BACKEND_CPU, 0, &ctx);
    unsetenv("KFUSE_CPU_ISA");
    return *st == KF_OK ? ctx : NULL;
}

/* KFUSE_CPU_ISA=isa gives a context running the copy named want. */
static void check_picks(const char *isa, const char *want)
{
    char what[200], words[64];
    kf_status st;
    kf_ctx *ctx = cpu_context(isa, &st);
    const char *got = ctx ? kf__facts(ctx)->cpu_kernels : "(no context)";
    snprintf(what, sizeof what, "KFUSE_CPU_ISA=%s runs the %s copy (got: %s)",
             isa ? isa : "(unset)", want, got);
    check(strcmp(got, want) == 0, what);
    if (ctx) {
        snprintf(words, sizeof words, ", %s kernels, ", want);
        snprintf(what, sizeof what, "its description says \"%s\" (%s)", words,
                 kf_ctx_describe(ctx));
        check(strstr(kf_ctx_describe(ctx), words) != NULL, what);
    }
    kf_ctx_free(ctx);
}

/* KFUSE_CPU_ISA=isa makes kf_ctx_create fail with want and a message. */
static void check_refused(const char *isa, kf_status want)
{
    char what[KF_ERRMSG_LEN + 200];
    kf_status st;
    kf_ctx *ctx = cpu_context(isa, &st);
    snprintf(what, sizeof what, "KFUSE_CPU_ISA=%s: kf_ctx_create returns %s (got %s: %s)", isa,
             kf_status_string(want), kf_status_string(st), kf_last_error(NULL));
    check(ctx == NULL && st == want && strstr(kf_last_error(NULL), "KFUSE_CPU_ISA") != NULL,
          what);
    kf_ctx_free(ctx);
}

int main(int argc, char **argv)
{
    kft_options opt;
    memset(&opt, 0, sizeof opt);
    opt.dtype = -1;
    opt.quick = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) {
            opt.quick = 1;
        } else if (!strcmp(argv[i], "--full")) {
            opt.quick = 0;
        } else if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
            opt.seed = strtoull(argv[++i], NULL, 10);
        } else {
            fprintf(stderr, "usage: test_cpu_isa [--quick | --full] [--seed N]\n");
            return 2;
        }
    }
    if (opt.seed == 0) {
        struct timespec ts;
        timespec_get(&ts, TIME_UTC);
        opt.seed = ((unsigned long long)ts.tv_sec * 1000000007ull) ^ (unsigned long long)ts.tv_nsec;
        opt.seed = opt.seed ? opt.seed : 1;
    }
    printf("seed %llu (replay with --seed %llu)\n", opt.seed, opt.seed);

    /* 1. selection */
    int cpu_has = cpuinfo_has_avx2_f16c();
    int avx2_runs = KF_CPU_AVX2_COPY && cpu_has == 1;
    printf("this build %s the AVX2 copy; /proc/cpuinfo: %s\n",
           KF_CPU_AVX2_COPY ? "holds" : "does not hold",
           cpu_has < 0 ? "no flags line" : cpu_has ? "avx2 and f16c" : "not both of avx2, f16c");
    if (KF_CPU_AVX2_COPY && cpu_has < 0) {
        printf("the CPU's features are unknown here: the default copy is not checked\n");
        kf_status st;
        kf_ctx *probe = cpu_context("avx2", &st);
        avx2_runs = probe != NULL;
        kf_ctx_free(probe);
    } else {
        check_picks(NULL, avx2_runs ? "avx2" : "baseline");
        check_picks("", avx2_runs ? "avx2" : "baseline");
        check_picks("auto", avx2_runs ? "avx2" : "baseline");
        if (avx2_runs)
            check_picks("avx2", "avx2");
        else
            check_refused("avx2", KF_ERR_UNSUPPORTED);
    }
    check_picks("baseline", "baseline");
    check_refused("sse9", KF_ERR_INVALID_ARG);
    check_refused("AVX2", KF_ERR_INVALID_ARG);

    /* 2. both copies, bitwise */
    if (!avx2_runs) {
        printf("bitwise: only the baseline copy runs here, nothing to compare\n");
    } else {
        kf_status st_avx2, st_base;
        kf_ctx *avx2 = cpu_context("avx2", &st_avx2);
        kf_ctx *base = cpu_context("baseline", &st_base);
        if (avx2 && base) {
            kft_result suite = {0, 0};
            kf_status st = kft_run_suite_bitwise(avx2, base, &opt, &suite);
            printf("bitwise suite: %d passed, %d failed\n", suite.passed, suite.failed);
            check(st == KF_OK, "the bitwise suite ran");
            check(suite.passed > 0 && suite.failed == 0,
                  "the bitwise suite ran every case on both copies");
            g_res.passed += suite.passed;
            g_res.failed += suite.failed;
        } else {
            check(0, "contexts for both copies");
        }
        kf_ctx_free(avx2);
        kf_ctx_free(base);
    }
    printf("%d passed, %d failed\n", g_res.passed, g_res.failed);
    return g_res.failed ? 1 : 0;
}
