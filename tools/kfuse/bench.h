/* bench.h - the timing loop shared by `kfuse bench` and `kfuse info`:
 * warm-up, optional batching of tiny calls between one event pair, samples
 * until both a count and a device-time minimum are reached. */
#ifndef KFC_BENCH_H
#define KFC_BENCH_H

#include <stdint.h>
#include "kfuse.h"
#include "stats.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One call of the timed work; iter counts calls, so the callee can rotate
 * among input sets (iter % n_sets). */
typedef kf_status (*kfb_call_fn)(kf_ctx *ctx, void *user, int64_t iter);

typedef struct kfb_timing_cfg {
    double min_ms;              /* device time of all samples together, at least */
    int min_samples;            /* samples, at least */
    double warm_ms;             /* warm-up device time (plus at least 2 calls) */
    double batch_below_us;      /* a call shorter than this is timed in batches */
    double batch_target_us;     /* a batch lasts about this long */
    int force_batch;            /* > 0: exactly this many calls per event pair */
    int max_samples;            /* a safety cap */
    int graph;                  /* 1: each sample replays a graph of the batch's calls
                                 * (kfuse bench --timing graph; GPU only) */
    int graph_min_calls;        /* graph: at least this many calls per graph (the input
                                 * sets, so that one replay walks the whole rotation) */
} kfb_timing_cfg;

typedef struct kfb_timing {
    kfs_summary us;             /* per call, microseconds */
    int batch;                  /* calls per event pair */
    double total_ms;            /* device time of the samples */
} kfb_timing;

/* Warm up, choose the batch, take samples: all through kf__timer_start /
 * kf__timer_stop (with cfg->graph, each sample one replay of a graph that
 * holds the batch's calls). Returns the first error of fn or of the timer. */
kf_status kfb_time(kf_ctx *ctx, kfb_call_fn fn, void *user, const kfb_timing_cfg *cfg,
                   kfb_timing *out);

/* A default configuration for the context's backend. */
void kfb_timing_defaults(kf_ctx *ctx, int quick, kfb_timing_cfg *cfg);

/* Bytes this tool allows itself to allocate on the context's device: half
 * the device memory (GPU) or half of MemAvailable (CPU). */
int64_t kfb_memory_budget(kf_ctx *ctx);

/* One global warm-up so that clocks ramp up (docs/bench.md, step 3): copies
 * of a buffer of up to 512 MiB on the GPU, 128 MiB on the CPU (halved until it
 * allocates) for about 1000 ms of device time on the GPU, 200 ms on the CPU
 * (--quick: 300 / 50 ms); *done_ms gets the time spent. */
kf_status kfb_global_warmup(kf_ctx *ctx, int quick, double *done_ms);

/* Input sets to rotate among: enough that the fewest bytes a timed call
 * touches per set (`touched`: the op's buffers or the copy's, whichever is
 * less; an in-place op's buffer counts once) total cold_target (2x the L2),
 * at least two, and sets of `stride` bytes (touched <= stride) within budget
 * bytes (then fewer; 0 when not even one fits). */
int64_t kfb_input_sets(int64_t cold_target, int64_t touched, int64_t stride, int64_t budget);

/* Bytes the same-size copy of a case moving `bytes` reads (and writes):
 * bytes / 2 rounded up to KFB_COPY_ALIGN (4 KiB), never less than the op. */
int64_t kfb_copy_half(int64_t bytes);

/* Copy work for kfb_time: one call copies `bytes` from src to dst of set
 * (iter % n_sets), sets `stride` bytes apart. */
typedef struct kfb_copy_work {
    char *base;
    int64_t stride;
    int n_sets;
    int64_t src_off, dst_off;
    size_t bytes;
} kfb_copy_work;
kf_status kfb_copy_call(kf_ctx *ctx, void *user, int64_t iter);
kf_status kfb_empty_call(kf_ctx *ctx, void *user, int64_t iter);

#ifdef __cplusplus
}
#endif

#endif /* KFC_BENCH_H */
