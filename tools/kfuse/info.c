/* info.c - `kfuse info`: the backend and the device facts as read from the
 * device (or the OS for the CPU), then two measurements: device-to-device
 * copy bandwidth (256 MiB and 1 GiB moved: half read, half written; GB/s
 * counts read + write, median of samples) and the empty-kernel launch time
 * (one launch per event pair, and per launch in a batch). On the CPU backend
 * the copy is a memcpy of buffers far larger than the caches, and the facts
 * include which copy of the CPU kernels runs (baseline, avx2 or avx512). */
#include <stdio.h>
#include <string.h>
#include "bench.h"
#include "cli.h"
#include "core/internal.h"

typedef struct copy_meas {
    int64_t moved;              /* bytes read + written per copy */
    int ok;                     /* 1 if measured */
    int failed;                 /* 1 if the copy itself failed (an error, not a skip) */
    kfb_timing t;
    const char *why;            /* why not measured */
} copy_meas;

static void cpu_model(char *buf, size_t n)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    buf[0] = '\0';
    if (!f)
        return;
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, "model name", 10) == 0) {
            char *colon = strchr(line, ':');
            if (colon) {
                size_t len;
                colon++;
                while (*colon == ' ' || *colon == '\t')
                    colon++;
                snprintf(buf, n, "%s", colon);
                len = strlen(buf);
                while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
                    buf[--len] = '\0';
            }
            break;
        }
    }
    fclose(f);
}

static void measure_copy(kf_ctx *ctx, const kfb_timing_cfg *cfg, int64_t budget, copy_meas *m)
{
    void *buf = NULL;
    kfb_copy_work cw;
    kf_status st;
    m->ok = 0;
    m->failed = 0;
    m->why = "";
    if (m->moved > budget) {
        m->why = "not measured: larger than half the memory";
        return;
    }
    if (kf_malloc(ctx, (size_t)m->moved, &buf) != KF_OK) {
        m->why = "not measured: allocation failed";
        return;
    }
    kf__memset(ctx, buf, 1, (size_t)m->moved);
    cw.base = (char *)buf;
    cw.stride = m->moved;
    cw.n_sets = 1;
    cw.src_off = 0;
    cw.dst_off = m->moved / 2;
    cw.bytes = (size_t)(m->moved / 2);
    st = kfb_time(ctx, kfb_copy_call, &cw, cfg, &m->t);
    if (st == KF_OK)
        m->ok = 1;
    else {
        m->why = "not measured: the copy failed";
        m->failed = 1;
    }
    kf_free(ctx, buf);
}

static double gbs(int64_t bytes, double us)
{
    return us > 0 ? (double)bytes / (us * 1e-6) / 1e9 : 0.0;
}

static void json_esc(const char *s)
{
    putchar('"');
    for (; s && *s; s++) {
        if (*s == '"' || *s == '\\')
            printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            printf("\\u%04x", (unsigned char)*s);
        else
            putchar(*s);
    }
    putchar('"');
}

int kfc_cmd_info(const kfc_args *a)
{
    kf_ctx *ctx = kfc_open_context(a);
    const kf_device_facts *f;
    kfb_timing_cfg cfg, fcfg;
    kfb_timing floor1, floorb;
    copy_meas cm[2];
    char model[256];
    int gpu, i, rc = KFC_EXIT_OK;
    double warm_ms;
    int64_t budget;
    kf_status st1, st2;

    if (!ctx)
        return KFC_EXIT_FAIL;
    f = kf__facts(ctx);
    gpu = kf_ctx_backend(ctx) == KF_BACKEND_GPU;
    cpu_model(model, sizeof(model));

    kfb_timing_defaults(ctx, 0, &cfg);
    budget = kfb_memory_budget(ctx);
    cm[0].moved = 256LL << 20;
    cm[1].moved = 1LL << 30;
    if (kfb_global_warmup(ctx, 0, &warm_ms) != KF_OK) {
        fprintf(stderr, "kfuse info: warm-up failed: %s\n", kf_last_error(ctx));
        rc = KFC_EXIT_FAIL;
    }
    for (i = 0; i < 2; i++) {
        measure_copy(ctx, &cfg, budget, &cm[i]);
        if (cm[i].failed)
            rc = KFC_EXIT_FAIL;
    }
    fcfg = cfg;
    fcfg.force_batch = 1;
    st1 = kfb_time(ctx, kfb_empty_call, NULL, &fcfg, &floor1);
    fcfg.force_batch = 0;
    fcfg.batch_below_us = 1e9;
    st2 = kfb_time(ctx, kfb_empty_call, NULL, &fcfg, &floorb);
    if (st1 != KF_OK || st2 != KF_OK)
        rc = KFC_EXIT_FAIL;

    if (a->json) {
        printf("{\n  \"version\": ");
        json_esc(kf_version_string());
        printf(",\n  \"backend\": \"%s\",\n  \"describe\": ", gpu ? "gpu" : "cpu");
        json_esc(kf_ctx_describe(ctx));
        printf(",\n  \"facts\": {\"name\": ");
        json_esc(f->name);
        printf(", \"arch\": ");
        json_esc(f->arch_name);
        printf(", \"arch_major\": %d, \"arch_minor\": %d, \"sm_count\": %d, \"warp_size\": %d, "
               "\"max_threads_per_block\": %d, \"max_threads_per_sm\": %d, "
               "\"smem_per_block\": %zu, \"smem_per_block_optin\": %zu, \"l2_bytes\": %zu, "
               "\"mem_bus_bits\": %d, \"mem_clock_khz\": %d, \"peak_bandwidth_gbs\": %.1f, "
               "\"total_mem_bytes\": %zu},\n",
               f->arch_major, f->arch_minor, f->sm_count, f->warp_size,
               f->max_threads_per_block, f->max_threads_per_sm, f->smem_per_block,
               f->smem_per_block_optin, f->l2_bytes, f->mem_bus_bits, f->mem_clock_khz,
               f->peak_bandwidth_gbs, f->total_mem_bytes);
        if (!gpu) {
            printf("  \"cpu_model\": ");
            json_esc(model);
            printf(",\n  \"cpu_kernels\": ");
            json_esc(f->cpu_kernels);
            printf(",\n");
        }
        printf("  \"copy\": [");
        for (i = 0; i < 2; i++) {
            printf("%s\n    {\"bytes_moved\": %lld, \"measured\": %s", i ? "," : "",
                   (long long)cm[i].moved, cm[i].ok ? "true" : "false");
            if (cm[i].ok)
                printf(", \"median_us\": %.3f, \"p20_us\": %.3f, \"p80_us\": %.3f, "
                       "\"samples\": %d, \"gbs\": %.1f",
                       cm[i].t.us.median, cm[i].t.us.p20, cm[i].t.us.p80, cm[i].t.us.n,
                       gbs(cm[i].moved, cm[i].t.us.median));
            printf("}");
        }
        printf("\n  ],\n  \"launch_us\": {\"per_event_pair\": %.3f, \"per_launch_batched\": "
               "%.3f, \"batch\": %d}\n}\n",
               st1 == KF_OK ? floor1.us.median : -1.0, st2 == KF_OK ? floorb.us.median : -1.0,
               floorb.batch);
    } else {
        printf("kfuse %s\n", kf_version_string());
        printf("backend:            %s (%s)\n", gpu ? "gpu" : "cpu", kf_ctx_describe(ctx));
        if (gpu) {
            printf("device:             %s\n", f->name);
            printf("arch:               %s (%d.%d)\n", f->arch_name, f->arch_major,
                   f->arch_minor);
            printf("SMs / CUs:          %d\n", f->sm_count);
            printf("warp size:          %d\n", f->warp_size);
            printf("threads per block:  %d (per SM %d)\n", f->max_threads_per_block,
                   f->max_threads_per_sm);
            printf("shared mem / block: %zu KiB (opt-in %zu KiB)\n", f->smem_per_block >> 10,
                   f->smem_per_block_optin >> 10);
            printf("L2:                 %.1f MiB\n", f->l2_bytes / 1048576.0);
            printf("memory:             %.1f GiB, %d-bit bus at %.0f MHz\n",
                   f->total_mem_bytes / 1073741824.0, f->mem_bus_bits,
                   f->mem_clock_khz / 1000.0);
            printf("theoretical BW:     %.0f GB/s (2 x bus/8 x clock)\n", f->peak_bandwidth_gbs);
        } else {
            printf("cpu:                %s\n", model[0] ? model : f->name);
            printf("threads:            %d\n", f->sm_count);
            printf("kernels:            %s (KFUSE_CPU_ISA=auto|baseline|avx2|avx512 chooses)\n",
                   f->cpu_kernels);
            if (f->l2_bytes)
                printf("last-level cache:   %.1f MiB (as read)\n", f->l2_bytes / 1048576.0);
            if (f->total_mem_bytes)
                printf("memory:             %.1f GiB\n", f->total_mem_bytes / 1073741824.0);
        }
        printf("measured (median of >= %d samples, >= %.0f ms; %s; after %.0f ms of warm-up "
               "copies):\n", cfg.min_samples, cfg.min_ms,
               gpu ? "device events" : "host clock after sync", warm_ms);
        for (i = 0; i < 2; i++) {
            if (cm[i].ok)
                printf("  %s copy %4lld MiB moved: %9.1f us (p20-p80 %.1f-%.1f)  %7.1f GB/s "
                       "(read + write)\n",
                       gpu ? "device" : "memcpy", (long long)(cm[i].moved >> 20),
                       cm[i].t.us.median, cm[i].t.us.p20, cm[i].t.us.p80,
                       gbs(cm[i].moved, cm[i].t.us.median));
            else
                printf("  %s copy %4lld MiB moved: %s\n", gpu ? "device" : "memcpy",
                       (long long)(cm[i].moved >> 20), cm[i].why);
        }
        if (st1 == KF_OK && st2 == KF_OK)
            printf("  empty kernel: %.3f us per event pair, %.3f us per launch in a batch "
                   "of %d\n", floor1.us.median, floorb.us.median, floorb.batch);
        else
            printf("  empty kernel: timing failed: %s\n", kf_last_error(ctx));
    }
    kf_ctx_free(ctx);
    return rc;
}
