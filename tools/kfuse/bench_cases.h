/* bench_cases.h - the benchmark shapes of docs/bench.md as kft_bench_case
 * entries, the buffers each case reads and writes, and the byte count that
 * GB/s is computed from (each input read once, each output written once,
 * in-place outputs counted as a read and a write, per-batch conditioning
 * counted once per batch entry). */
#ifndef KFC_BENCH_CASES_H
#define KFC_BENCH_CASES_H

#include <stddef.h>
#include <stdint.h>
#include "kfuse.h"
#include "check.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How bench fills a buffer with random data (never zeros). */
typedef enum kfb_fill {
    KFB_FILL_NORMAL = 0,        /* activations: ~N(0, 1) */
    KFB_FILL_WEIGHT,            /* weights: 1 + U(-0.1, 0.1) */
    KFB_FILL_SMALL,             /* conditioning, gates, biases: U(-0.1, 0.1) */
    KFB_FILL_COS,               /* rope cos table of random angles */
    KFB_FILL_SIN,               /* rope sin table of the same angles */
    KFB_FILL_POSITIONS,         /* rope positions: U(-1, 1), LTX-Video 2 * grid - 1 */
    KFB_FILL_FREQS,             /* rope per-pair frequencies, LTX-Video (ltx_rope_pair) */
    KFB_FILL_AXIS,              /* rope axis map: k-major axis-minor after identity pairs */
    KFB_FILL_OUTPUT             /* written by the op: filled with a poison value */
} kfb_fill;

/* One tensor a case touches. */
typedef struct kfb_buffer {
    const char *name;           /* "x", "weight", "y", "residual", "cos", ... */
    kf_dtype dtype;
    int ndim;
    int64_t shape[KF_MAX_DIMS];
    int reads;                  /* 1 if the op reads it */
    int writes;                 /* 1 if the op writes it */
    kfb_fill fill;
} kfb_buffer;

#define KFB_MAX_BUFFERS 8

/* The case list of docs/bench.md, all in bf16. */
int kfb_case_count(void);
const kft_bench_case *kfb_case_at(int i);

/* The buffers of a case, in the order bench allocates them. Returns their
 * count (0 for an unknown op). The table form of rope keeps its tables in
 * f32, positions / freqs in f32 and the axis map in i32; weights, biases and
 * conditioning use the activation dtype. */
int kfb_case_buffers(const kft_bench_case *c, kfb_buffer *bufs);
/* Elements / bytes of one buffer. */
int64_t kfb_buffer_elems(const kfb_buffer *b);
int64_t kfb_buffer_bytes(const kfb_buffer *b);
/* Bytes moved by one call: sum over buffers of bytes * (reads + writes). */
int64_t kfb_case_bytes(const kft_bench_case *c);
/* Bytes held by one input set (every buffer once). */
int64_t kfb_case_footprint(const kft_bench_case *c);

/* "8192x4096", "2x8064x2048", "1x4096x(32+8)x128" (rope: B x S x heads x Dh). */
void kfb_case_shape(const kft_bench_case *c, char *buf, size_t n);
/* "llama", "rms/batch", "interleaved/table", "silu", "tanh", ... */
void kfb_case_variant(const kft_bench_case *c, char *buf, size_t n);

/* Settings of the op that the case does not carry: check.h's KFT_BENCH_ ones
 * (kft_verify_bench_case checks the same). */

#ifdef __cplusplus
}
#endif

#endif /* KFC_BENCH_CASES_H */
