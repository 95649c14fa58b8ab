/* test_cpu_isa.c - the copies of the CPU kernels (src/cpu/cpu.h): the
 * baseline copy and, in x86-64 builds with GCC or Clang, the AVX2 + F16C copy
 * and the AVX-512 copy (F, BW, VL, DQ; where the compiler takes the flags);
 * and how a CPU context picks one (KFUSE_CPU_ISA).
 *   1. Selection: with KFUSE_CPU_ISA unset, empty or "auto" a CPU context runs
 *      the widest copy that the build holds and /proc/cpuinfo's flags allow
 *      (avx512, then avx2, then baseline); "baseline" gives the baseline copy,
 *      "avx2" / "avx512" that copy where it runs; a named copy that cannot
 *      run, and any other value, make kf_ctx_create fail with a message
 *      naming KFUSE_CPU_ISA. The context's description names the copy.
 *   2. Each copy that runs here against the baseline copy: the cases of the
 *      suite (its quick list, every op and dtype on odd and even shapes,
 *      strided, misaligned, in place, NaN / Inf rows; --full: the whole list,
 *      about 2 minutes a copy on 2 cores) on both, on the same inputs, each
 *      checked against the float64 reference, and every buffer byte for byte
 *      the same on both (kft_run_suite_bitwise), but that an element that is
 *      a NaN on both may differ in sign and payload (x86 keeps the first
 *      operand's NaN, and each compilation orders operands its own way; GCC's
 *      copies happen to agree, Clang's do not): which copy runs must never
 *      change a result.
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
#ifndef KF_CPU_AVX512_COPY
#define KF_CPU_AVX512_COPY 0
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

/* The "flags" words of /proc/cpuinfo that each copy needs. */
static const char *const AVX2_FLAGS[] = {"avx2", "f16c", NULL};
static const char *const AVX512_FLAGS[] = {"avx2", "f16c", "avx512f", "avx512bw",
                                           "avx512vl", "avx512dq", NULL};

/* 1 if the "flags" line of /proc/cpuinfo lists every word of need, 0 if it
 * lacks one, -1 if there is no such line to read. */
static int cpuinfo_has(const char *const *need)
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
        int found = 0, wanted = 0; /* bit k: need[k] */
        for (int k = 0; need[k] != NULL; k++)
            wanted |= 1 << k;
        for (char *w = strtok(colon + 1, " \t\n"); w != NULL; w = strtok(NULL, " \t\n"))
            for (int k = 0; need[k] != NULL; k++)
                if (!strcmp(w, need[k]))
                    found |= 1 << k;
        result = found == wanted;
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
    opt.nan_bits_may_differ = 1; /* README: a NaN's sign and payload may differ per copy */
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
    struct copy_info {
        const char *name;
        int built;                 /* the build holds this copy */
        const char *const *flags;
        int runs;                  /* it runs here (cpuinfo, or a probe) */
    } copies[] = {
        {"avx512", KF_CPU_AVX512_COPY, AVX512_FLAGS, 0},
        {"avx2", KF_CPU_AVX2_COPY, AVX2_FLAGS, 0},
    };
    const int n_copies = (int)(sizeof copies / sizeof copies[0]);
    int cpuinfo_known = 1;
    for (int k = 0; k < n_copies; k++) {
        int cpu_has = cpuinfo_has(copies[k].flags);
        if (copies[k].built && cpu_has < 0) {
            cpuinfo_known = 0;
            kf_status st;
            kf_ctx *probe = cpu_context(copies[k].name, &st);
            copies[k].runs = probe != NULL;
            kf_ctx_free(probe);
        } else {
            copies[k].runs = copies[k].built && cpu_has == 1;
        }
        printf("this build %s the %s copy; /proc/cpuinfo: %s\n",
               copies[k].built ? "holds" : "does not hold", copies[k].name,
               cpu_has < 0 ? "no flags line" : cpu_has ? "has its flags" : "lacks a flag it needs");
    }
    const char *widest = "baseline";
    for (int k = n_copies - 1; k >= 0; k--)
        if (copies[k].runs)
            widest = copies[k].name;
    if (!cpuinfo_known) {
        printf("the CPU's features are unknown here: the default copy is not checked\n");
    } else {
        check_picks(NULL, widest);
        check_picks("", widest);
        check_picks("auto", widest);
        for (int k = 0; k < n_copies; k++) {
            if (copies[k].runs)
                check_picks(copies[k].name, copies[k].name);
            else
                check_refused(copies[k].name, KF_ERR_UNSUPPORTED);
        }
    }
    check_picks("baseline", "baseline");
    check_refused("sse9", KF_ERR_INVALID_ARG);
    check_refused("AVX2", KF_ERR_INVALID_ARG);
    check_refused("avx512f", KF_ERR_INVALID_ARG);

    /* 2. each other copy against the baseline copy, bitwise */
    for (int k = 0; k < n_copies; k++) {
        if (!copies[k].runs) {
            printf("bitwise: the %s copy does not run here, nothing to compare\n",
                   copies[k].name);
            continue;
        }
        kf_status st_copy, st_base;
        kf_ctx *copy = cpu_context(copies[k].name, &st_copy);
        kf_ctx *base = cpu_context("baseline", &st_base);
        char what[200];
        if (copy && base) {
            kft_result suite = {0, 0};
            kf_status st = kft_run_suite_bitwise(copy, base, &opt, &suite);
            printf("bitwise suite, %s against baseline: %d passed, %d failed\n", copies[k].name,
                   suite.passed, suite.failed);
            snprintf(what, sizeof what, "the bitwise suite ran (%s)", copies[k].name);
            check(st == KF_OK, what);
            snprintf(what, sizeof what, "the bitwise suite ran every case on both copies (%s)",
                     copies[k].name);
            check(suite.passed > 0 && suite.failed == 0, what);
            g_res.passed += suite.passed;
            g_res.failed += suite.failed;
        } else {
            snprintf(what, sizeof what, "contexts for the %s and the baseline copies",
                     copies[k].name);
            check(0, what);
        }
        kf_ctx_free(copy);
        kf_ctx_free(base);
    }
    printf("%d passed, %d failed\n", g_res.passed, g_res.failed);
    return g_res.failed ? 1 : 0;
}
