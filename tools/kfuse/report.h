/* report.h - what `kfuse bench` measured per case, and its outputs: a table
 * (default), CSV, JSON and an SVG plot of GB/s against bytes moved. */
#ifndef KFC_REPORT_H
#define KFC_REPORT_H

#include <stdint.h>
#include <stdio.h>
#include "check.h"
#include "stats.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kfb_status {
    KFB_TIMED = 0,              /* verified, then timed */
    KFB_FAILED = 1,             /* failed verification: not timed */
    KFB_SKIPPED = 2,            /* unsupported on this backend, or does not fit in memory */
    KFB_ERROR = 3               /* the op or the timing returned an error */
} kfb_status;

typedef struct kfb_result {
    kft_bench_case c;
    int case_index;             /* index in the whole case table (kfb_case_at): the
                                 * random data of the case derives from it and the seed,
                                 * whatever --op / --shape selected */
    char op[24];
    char shape[48];
    char variant[32];
    int64_t bytes;              /* counted bytes moved per call */
    kfb_status status;
    double rel_err;             /* verification ||out-ref|| / ||ref|| */
    long long verify_rows;      /* row cap of the verification (0 = all rows) */
    kfs_summary t;              /* per call, microseconds */
    int batch;                  /* launches per event pair (1 = one call per sample) */
    kfs_summary copy;           /* same-size device copy, per call, microseconds */
    int copy_batch;
    double floor_us;            /* launch floor timed the same way as this case */
    int n_sets;                 /* input sets rotated */
    int64_t rotation_bytes;     /* what a call touches per set (op or copy, the less) x n_sets */
    int from_cache;             /* 1: the rotation is smaller than the cold-cache target */
    int launch_bound;           /* 1: median < 2x the launch floor */
    char note[192];             /* why skipped / failed, or extra remarks */
} kfb_result;

/* A case whose op or copy has a p20-p80 spread wider than this fraction of
 * its median is marked noisy in the notes. */
#define KFR_NOISY_SPREAD 0.10

/* The run as a whole: written into every output's header. */
typedef struct kfb_run {
    const char *backend;        /* "gpu" / "cpu" */
    const char *describe;       /* kf_ctx_describe() */
    const char *version;
    unsigned long long seed;    /* the inputs' and the verification's data (--seed replays) */
    int is_gpu;
    double min_ms;
    int min_samples;
    double warmup_ms;           /* global warm-up done */
    double case_warm_ms;        /* per-case warm-up (plus at least 2 calls) */
    double batch_below_us;      /* calls shorter than this are timed in batches */
    int64_t cold_target_bytes;  /* rotation target (2x L2, or fixed on the CPU) */
    int64_t l2_bytes;
    long long verify_rows;
    double floor_single_us;     /* empty kernel, one launch per event pair */
    double floor_batched_us;    /* empty kernel, per launch of a batch */
    int quick;
    int distinct_inputs;        /* --inputs distinct: every set its own random data */
    double host_load;           /* 1-minute load average before the run, -1 unknown */
    int host_cpus;              /* online CPUs */
    const char *timing_label;   /* a line on how samples were taken */
} kfb_run;

double kfb_gbs(int64_t bytes, double us);

void kfr_print_header(FILE *f, const kfb_run *run, const char *prefix);
void kfr_print_table(FILE *f, const kfb_run *run, const kfb_result *r, int n);
void kfr_print_csv(FILE *f, const kfb_run *run, const kfb_result *r, int n);
void kfr_print_json(FILE *f, const kfb_run *run, const kfb_result *r, int n);
/* Write the SVG plot; 0 on success, -1 if the file cannot be written. */
int kfr_write_svg(const char *path, const kfb_run *run, const kfb_result *r, int n);

#ifdef __cplusplus
}
#endif

#endif /* KFC_REPORT_H */
