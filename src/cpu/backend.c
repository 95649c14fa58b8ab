/* backend.c - the CPU backend's context setup: which copy of the kernels a
 * context runs (cpu.h: baseline, AVX2 + F16C or AVX-512; KFUSE_CPU_ISA
 * overrides),
 * device facts from the OS (threads = kf_cpu_max_threads(), the model name
 * from /proc/cpuinfo, L2 size and memory from sysfs / sysconf); and what both
 * copies' ops tables share, compiled once: host buffers (64-byte aligned
 * malloc), a threaded copy for the tools' bandwidth measurement, a
 * CLOCK_MONOTONIC timer (host work is synchronous, so no events are needed)
 * and the per-thread scratch used by the op files. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cpu/cpu.h"

#if KF_CPU_AVX2_COPY
#include <cpuid.h>
#endif

typedef struct kf_cpu_state {
    struct timespec timer_start;
    int timer_running;
} kf_cpu_state;

/* ---- scratch ---- */

kf_status kf_cpu_scratch_get(kf_ctx *ctx, const char *op, int parallel, size_t per_thread,
                             size_t shared_floats, kf_cpu_scratch *scratch)
{
    memset(scratch, 0, sizeof *scratch);
    scratch->threads = parallel ? kf_cpu_max_threads() : 1;
    if (scratch->threads < 1)
        scratch->threads = 1;
    scratch->per_thread = (per_thread + 15) & ~(size_t)15;
    size_t shared_padded = (shared_floats + 15) & ~(size_t)15;
    /* the counts come from validated tensors (under 2^61 elements): only the
     * product by the thread count can overflow */
    const size_t most_floats = SIZE_MAX / sizeof(float);
    if (scratch->per_thread > (most_floats - shared_padded) / (size_t)scratch->threads)
        return kf_set_error(ctx, KF_ERR_ALLOC,
                            "%s: CPU scratch of %zu floats for each of %d threads is too large",
                            op, per_thread, scratch->threads);
    size_t floats = scratch->per_thread * (size_t)scratch->threads + shared_padded;
    if (floats == 0)
        return KF_OK;
    size_t bytes = floats * sizeof(float);
    scratch->block = (float *)aligned_alloc(64, bytes);
    if (scratch->block == NULL)
        return kf_set_error(ctx, KF_ERR_ALLOC, "%s: cannot allocate %zu bytes of CPU scratch", op,
                            bytes);
    if (shared_floats > 0)
        scratch->shared = scratch->block + scratch->per_thread * (size_t)scratch->threads;
    return KF_OK;
}

void kf_cpu_scratch_release(kf_cpu_scratch *scratch)
{
    free(scratch->block);
    scratch->block = NULL;
    scratch->shared = NULL;
}

/* ---- memory, sync, timing ---- */

kf_status kf_cpu_malloc(kf_ctx *ctx, size_t bytes, void **ptr)
{
    size_t rounded = (bytes + 63) & ~(size_t)63;
    if (rounded < bytes)
        return kf_set_error(ctx, KF_ERR_ALLOC, "kf_malloc: %zu bytes is too large", bytes);
    if (rounded == 0)
        rounded = 64;
    *ptr = aligned_alloc(64, rounded);
    if (*ptr == NULL)
        return kf_set_error(ctx, KF_ERR_ALLOC, "kf_malloc: cannot allocate %zu bytes of host memory",
                            bytes);
    return KF_OK;
}

kf_status kf_cpu_free(kf_ctx *ctx, void *ptr)
{
    free(ptr);
    return KF_OK;
}

kf_status kf_cpu_memcpy(kf_ctx *ctx, void *dst, const void *src, size_t bytes, int to_device)
{
    if (bytes > 0)
        memcpy(dst, src, bytes);
    return KF_OK;
}

kf_status kf_cpu_memset(kf_ctx *ctx, void *ptr, int value, size_t bytes)
{
    if (bytes > 0)
        memset(ptr, value, bytes);
    return KF_OK;
}

kf_status kf_cpu_synchronize(kf_ctx *ctx)
{
    return KF_OK;
}

/* The copy that `kfuse bench` takes as the bandwidth limit: split over the
 * threads in 64-byte aligned chunks (at most 1 MiB, at least one per thread),
 * parallel from the size the ops go parallel at (KF_CPU_PARALLEL_MIN_ELEMENTS
 * f32 elements), so that a small case's copy pays the same thread start-up as
 * its op. */
kf_status kf_cpu_copy_d2d(kf_ctx *ctx, void *dst, const void *src, size_t bytes)
{
    const size_t threads = (size_t)kf_cpu_max_threads();
    size_t chunk = (bytes + threads - 1) / threads;
    chunk = (chunk + 63) / 64 * 64;
    if (chunk > ((size_t)1 << 20))
        chunk = (size_t)1 << 20;
    if (chunk == 0)
        chunk = 64;
    int64_t chunks = (int64_t)((bytes + chunk - 1) / chunk);
    KF_CPU_PARALLEL_FOR(kf_cpu_worth_parallel(chunks, (int64_t)(bytes / 4)))
    for (int64_t c = 0; c < chunks; c++) {
        size_t begin = (size_t)c * chunk;
        size_t n = bytes - begin < chunk ? bytes - begin : chunk;
        memcpy((char *)dst + begin, (const char *)src + begin, n);
    }
    return KF_OK;
}

kf_status kf_cpu_empty_kernel(kf_ctx *ctx)
{
    return KF_OK;
}

kf_status kf_cpu_timer_start(kf_ctx *ctx)
{
    kf_cpu_state *state = (kf_cpu_state *)ctx->backend_state;
    clock_gettime(CLOCK_MONOTONIC, &state->timer_start);
    state->timer_running = 1;
    return KF_OK;
}

kf_status kf_cpu_timer_stop(kf_ctx *ctx, double *elapsed_ms)
{
    kf_cpu_state *state = (kf_cpu_state *)ctx->backend_state;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (!state->timer_running)
        return kf_set_error(ctx, KF_ERR_INVALID_ARG, "timer_stop: the timer was not started");
    state->timer_running = 0;
    *elapsed_ms = (double)(now.tv_sec - state->timer_start.tv_sec) * 1e3 +
                  (double)(now.tv_nsec - state->timer_start.tv_nsec) * 1e-6;
    return KF_OK;
}

void kf_cpu_destroy(kf_ctx *ctx)
{
    free(ctx->backend_state);
    ctx->backend_state = NULL;
}

/* ---- device facts ---- */

/* "model name : Intel(R) Xeon(R) ..." from /proc/cpuinfo; 0 if not found. */
static int read_cpu_model_name(char *name, size_t size)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f == NULL)
        return 0;
    char line[512];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0 && strncmp(line, "Model", 5) != 0)
            continue;
        char *colon = strchr(line, ':');
        if (colon == NULL)
            continue;
        char *value = colon + 1;
        while (*value == ' ' || *value == '\t')
            value++;
        size_t len = strcspn(value, "\r\n");
        while (len > 0 && value[len - 1] == ' ')
            len--;
        if (len == 0)
            continue;
        if (len >= size)
            len = size - 1;
        memcpy(name, value, len);
        name[len] = '\0';
        found = 1;
    }
    fclose(f);
    return found;
}

/* The largest cache of cpu0 (its last level) from sysfs ("2048K", "260M");
 * 0 if unknown. */
static size_t read_llc_bytes(void)
{
    size_t largest = 0;
    for (int i = 0; i < 8; i++) {
        char path[64];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue;
        unsigned long long value = 0;
        char unit = '\0';
        int got = fscanf(f, "%llu%c", &value, &unit);
        fclose(f);
        if (got < 1)
            continue;
        if (unit == 'K' || unit == 'k')
            value *= 1024ull;
        else if (unit == 'M' || unit == 'm')
            value *= 1024ull * 1024ull;
        if ((size_t)value > largest)
            largest = (size_t)value;
    }
    return largest;
}

static size_t read_total_memory(void)
{
#if defined(_SC_PHYS_PAGES) && defined(_SC_PAGESIZE)
    long pages = sysconf(_SC_PHYS_PAGES);
    long page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0)
        return (size_t)pages * (size_t)page;
#endif
    return 0;
}

/* ---- which copy of the kernels (cpu.h) ---- */

/* 1 if this build holds the AVX2 copy and this CPU and OS can run it: AVX2
 * from the compiler's check (which also asks whether the OS saves the AVX
 * registers), F16C from CPUID leaf 1 (__builtin_cpu_supports of Clang 14
 * does not know "f16c"). __builtin_cpu_init: a context may be created from
 * a constructor that runs before the one that fills the compiler's data. */
static int avx2_copy_runs_here(void)
{
#if KF_CPU_AVX2_COPY
    unsigned int eax, ebx, ecx, edx;
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2"))
        return 0;
    return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
#else
    return 0;
#endif
}

/* 1 if this build holds the AVX-512 copy and this CPU and OS can run it:
 * what the AVX2 copy needs, and AVX-512 F, BW, VL and DQ (the compiler's
 * check includes the OS's saving of the mask and 512-bit registers). */
static int avx512_copy_runs_here(void)
{
#if KF_CPU_AVX512_COPY
    return avx2_copy_runs_here() && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512dq");
#else
    return 0;
#endif
}

#if KF_CPU_AVX2_COPY
#define AVX2_OPS (&kf_cpu_avx2_ops)
#else
#define AVX2_OPS NULL
#endif
#if KF_CPU_AVX512_COPY
#define AVX512_OPS (&kf_cpu_avx512_ops)
#else
#define AVX512_OPS NULL
#endif

/* The ops table for a new context, by KFUSE_CPU_ISA (read here, at context
 * creation):
 *   unset, "" or "auto"  the widest copy that runs here: avx512, else avx2,
 *                        else baseline;
 *   "baseline"           the baseline copy;
 *   "avx2", "avx512"     that copy; KF_ERR_UNSUPPORTED where it cannot run;
 *   anything else        KF_ERR_INVALID_ARG.
 * A copy that was asked for by name runs or the context fails: no silent
 * fallback, so a test or benchmark of a copy measures that copy. *kernels
 * gets the copy's name: "baseline", "avx2" or "avx512". */
static kf_status choose_kernels(kf_ctx *ctx, const kf_backend_ops **ops, const char **kernels)
{
    const char *isa = getenv("KFUSE_CPU_ISA");
    if (isa == NULL || isa[0] == '\0')
        isa = "auto";
    const struct {
        const char *name;
        const kf_backend_ops *ops;  /* NULL: not in this build */
        int runs;
        const char *why_not;        /* why it cannot run, for KFUSE_CPU_ISA=name */
    } copies[] = {                  /* widest first */
        {"avx512", AVX512_OPS, avx512_copy_runs_here(),
         KF_CPU_AVX512_COPY ? "this CPU lacks one of AVX-512 F, BW, VL, DQ, AVX2, F16C"
                            : "this build has no AVX-512 copy of the CPU kernels (it is built "
                              "on x86-64 with a GCC or Clang that takes -mavx512f)"},
        {"avx2", AVX2_OPS, avx2_copy_runs_here(),
         KF_CPU_AVX2_COPY ? "this CPU lacks AVX2 or F16C"
                          : "this build has no AVX2 copy of the CPU kernels (it is built on "
                            "x86-64 with GCC or Clang)"},
        {"baseline", &kf_cpu_ops_baseline, 1, ""},
    };
    const int auto_pick = strcmp(isa, "auto") == 0;
    for (size_t i = 0; i < sizeof copies / sizeof copies[0]; i++) {
        if (auto_pick ? !copies[i].runs : strcmp(isa, copies[i].name) != 0)
            continue;
        if (!copies[i].runs)
            return kf_set_error(ctx, KF_ERR_UNSUPPORTED, "KFUSE_CPU_ISA=%s, but %s", isa,
                                copies[i].why_not);
        *ops = copies[i].ops;
        *kernels = copies[i].name;
        return KF_OK;
    }
    return kf_set_error(ctx, KF_ERR_INVALID_ARG,
                        "KFUSE_CPU_ISA='%s' is not auto, baseline, avx2 or avx512", isa);
}

kf_status kf_cpu_init(kf_ctx *ctx)
{
    const kf_backend_ops *ops = NULL;
    const char *kernels = NULL;
    kf_status st = choose_kernels(ctx, &ops, &kernels);
    if (st != KF_OK)
        return st;

    kf_device_facts *facts = &ctx->facts;
    memset(facts, 0, sizeof *facts);
    snprintf(facts->cpu_kernels, sizeof facts->cpu_kernels, "%s", kernels);
    if (!read_cpu_model_name(facts->name, sizeof facts->name))
        snprintf(facts->name, sizeof facts->name, "cpu");
#if defined(__x86_64__) || defined(_M_X64)
    snprintf(facts->arch_name, sizeof facts->arch_name, "x86_64");
#elif defined(__aarch64__)
    snprintf(facts->arch_name, sizeof facts->arch_name, "aarch64");
#else
    snprintf(facts->arch_name, sizeof facts->arch_name, "cpu");
#endif
    int threads = kf_cpu_max_threads();
    facts->sm_count = threads;
    facts->warp_size = 1;
    facts->max_threads_per_block = 1;
    facts->max_threads_per_sm = 1;
    facts->l2_bytes = read_llc_bytes(); /* on the CPU: the last-level cache */
    facts->total_mem_bytes = read_total_memory();
    facts->peak_bandwidth_gbs = 0.0;   /* not readable from the OS */

    snprintf(ctx->describe, sizeof ctx->describe, "cpu: %d thread%s, %s kernels, %s", threads,
             threads == 1 ? "" : "s", kernels, facts->name);

    kf_cpu_state *state = (kf_cpu_state *)calloc(1, sizeof *state);
    if (state == NULL)
        return kf_set_error(ctx, KF_ERR_ALLOC, "cpu backend: out of memory");
    ctx->backend_state = state;
    ctx->ops = ops;
    return KF_OK;
}
