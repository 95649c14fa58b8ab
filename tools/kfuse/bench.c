/* bench.c - `kfuse bench`: the measurement protocol of docs/bench.md.
 * Per case: verify against the float64 reference first (a wrong kernel has
 * no speed), build the inputs on the device (every input set its own random
 * data generated on the host, written into place by device copies; --inputs
 * replicated: set 0's data copied into every set, a faster fill), warm up for
 * max(2 calls, 25 ms), then take samples with device events while rotating
 * among at least two input sets that total >= 2x the L2 (cold caches),
 * batching calls shorter than 1 ms, about 1 ms of them between one event
 * pair, so that no sample carries the launch gap of an idle stream (a call
 * of 20-200 us timed alone took ~4 us more on the H200, and so did the copy
 * it was divided by, which pulled every ratio toward 1). The same loop times
 * a device-to-device copy of the same number of bytes over the same rotation
 * (the limit), with the op's number of calls per event pair, and an empty
 * kernel (the launch floor). On the GPU (--timing auto or graph), each
 * sample is one replay of a GPU graph that holds the batch's calls (at least
 * one per input set), for the op and the copy alike: back-to-back
 * cudaMemcpyAsync calls carry ~2 us of per-call overhead in a stream that
 * kernels do not (H200, 134 MB: 35.0 us event-timed against a 32.6-33.1 us
 * copy in the profiler). --timing stream launches the calls one by one. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "bench.h"
#include "bench_cases.h"
#include "check.h"
#include "cli.h"
#include "report.h"
#include "core/internal.h"

#define KFB_ALIGN 256
/* The copy reference reads and writes bytes/2 rounded up to 4 KiB each (at
 * most 8 KiB more than the op in all): cudaMemcpyAsync of a byte count that is not a multiple of
 * 4 KiB is slower (H200, 66062336 bytes = 2^11 x odd: 36.4 us on a stream,
 * 50.3 us in a graph, against 34.5 / 32.9 us for 66064384), and a slow
 * reference would flatter the op (scripts/microbench/copy_sizes.cu). */
#define KFB_COPY_ALIGN 4096
#define KFB_MAX_SETS 65536
#define KFB_CPU_COLD_BYTES (256LL << 20)  /* CPU rotation: at least this, >= 2x the LLC */

static int64_t align_up(int64_t v, int64_t a)
{
    return (v + a - 1) / a * a;
}

/* ---- timing ------------------------------------------------------------- */

void kfb_timing_defaults(kf_ctx *ctx, int quick, kfb_timing_cfg *cfg)
{
    int gpu = kf_ctx_backend(ctx) == KF_BACKEND_GPU;
    memset(cfg, 0, sizeof(*cfg));
    if (gpu) {
        cfg->min_ms = quick ? 20.0 : 100.0;
        cfg->min_samples = 10;
    } else {
        cfg->min_ms = quick ? 5.0 : 20.0;
        cfg->min_samples = quick ? 3 : 5;
    }
    cfg->warm_ms = 25.0;
    cfg->batch_below_us = 1000.0;
    cfg->batch_target_us = 1000.0;
    cfg->force_batch = 0;
    cfg->max_samples = 100000;
}

kf_status kfb_time(kf_ctx *ctx, kfb_call_fn fn, void *user, const kfb_timing_cfg *cfg,
                   kfb_timing *out)
{
    int64_t iter = 0;
    int64_t chunk = 2, calls = 0;
    double warm = 0.0, per_call_us = 0.0, ms = 0.0, total = 0.0;
    double *samples = NULL;
    int n = 0, cap = 0, batch, j;
    kf_status st;

    memset(out, 0, sizeof(*out));
    /* Warm-up: chunks of calls between one event pair, doubling, until at
     * least 2 calls and warm_ms of device time. The last chunk gives the
     * per-call time that decides batching. */
    for (;;) {
        if ((st = kf__timer_start(ctx)) != KF_OK)
            return st;
        for (j = 0; j < chunk; j++)
            if ((st = fn(ctx, user, iter++)) != KF_OK)
                return st;
        if ((st = kf__timer_stop(ctx, &ms)) != KF_OK)
            return st;
        warm += ms;
        calls += chunk;
        per_call_us = ms * 1000.0 / (double)chunk;
        if (calls >= 2 && warm >= cfg->warm_ms)
            break;
        if (chunk < 4096)
            chunk *= 2;
    }
    if (cfg->force_batch > 0) {
        batch = cfg->force_batch;
    } else if (per_call_us < cfg->batch_below_us) {
        double b = ceil(cfg->batch_target_us / (per_call_us > 0.01 ? per_call_us : 0.01));
        batch = b < 2.0 ? 2 : b > 1000.0 ? 1000 : (int)b;
    } else {
        batch = 1;
    }
    if (cfg->graph) {
        /* one graph of the batch's calls, replayed once before sampling (the
         * first launch uploads it). Every replay starts at the same input
         * set, so the batch is a whole number of rotations (graph_min_calls
         * = the sets): a set is never met twice in a row across replays.
         * Cases of many small sets get graphs of that many calls (up to
         * KFB_MAX_SETS), more calls per event pair than stream timing's 1000. */
        if (cfg->graph_min_calls > 1)
            batch = (batch + cfg->graph_min_calls - 1) / cfg->graph_min_calls *
                    cfg->graph_min_calls;
        if ((st = kf__graph_begin(ctx)) != KF_OK)
            return st;
        for (j = 0; j < batch; j++)
            if ((st = fn(ctx, user, iter++)) != KF_OK)
                goto fail;
        if ((st = kf__graph_end(ctx)) != KF_OK || (st = kf__graph_launch(ctx)) != KF_OK)
            goto fail;
    }

    while ((n < cfg->min_samples || total < cfg->min_ms) && n < cfg->max_samples) {
        if (n == cap) {
            int ncap = cap ? 2 * cap : 64;
            double *p = (double *)realloc(samples, (size_t)ncap * sizeof(double));
            if (!p) {
                st = KF_ERR_ALLOC;
                goto fail;
            }
            samples = p;
            cap = ncap;
        }
        if ((st = kf__timer_start(ctx)) != KF_OK)
            goto fail;
        if (cfg->graph) {
            if ((st = kf__graph_launch(ctx)) != KF_OK)
                goto fail;
        } else {
            for (j = 0; j < batch; j++)
                if ((st = fn(ctx, user, iter++)) != KF_OK)
                    goto fail;
        }
        if ((st = kf__timer_stop(ctx, &ms)) != KF_OK)
            goto fail;
        total += ms;
        samples[n++] = ms * 1000.0 / (double)batch;
    }
    kfs_summarize(samples, n, &out->us);
    out->batch = batch;
    out->total_ms = total;
    free(samples);
    if (cfg->graph)
        kf__graph_free(ctx);
    return KF_OK;
fail:
    free(samples);
    if (cfg->graph)
        kf__graph_free(ctx);
    return st;
}

kf_status kfb_copy_call(kf_ctx *ctx, void *user, int64_t iter)
{
    kfb_copy_work *w = (kfb_copy_work *)user;
    char *set = w->base + (iter % w->n_sets) * w->stride;
    return kf__copy_d2d(ctx, set + w->dst_off, set + w->src_off, w->bytes);
}

kf_status kfb_empty_call(kf_ctx *ctx, void *user, int64_t iter)
{
    (void)user;
    (void)iter;
    return kf__empty_kernel(ctx);
}

int64_t kfb_copy_half(int64_t bytes)
{
    return align_up(bytes / 2, KFB_COPY_ALIGN);
}

int64_t kfb_input_sets(int64_t cold_target, int64_t touched, int64_t stride, int64_t budget)
{
    /* at least two sets (as the Python harness), so that a call never
     * touches the buffers of the call just before it. On the H200 (60 MB L2)
     * the shapes of 120-270 MB, one set each before, read 2-4 % higher
     * ratios over one set than over two in the same run (layer_norm 8192 x
     * 4096 1.10 / 1.08, rms_norm 8192 x 8192 1.08 / 1.04) */
    if (touched < 1)
        touched = 1;
    int64_t want = (cold_target + touched - 1) / touched;
    if (want < 2)
        want = 2;
    if (want > KFB_MAX_SETS)
        want = KFB_MAX_SETS;
    if (want * stride > budget)
        want = budget / stride;
    return want;
}

int64_t kfb_memory_budget(kf_ctx *ctx)
{
    const kf_device_facts *f = kf__facts(ctx);
    if (kf_ctx_backend(ctx) == KF_BACKEND_GPU) {
        if (f && f->total_mem_bytes > 0)
            return (int64_t)(f->total_mem_bytes / 2);
        return 4LL << 30;
    } else {
        FILE *m = fopen("/proc/meminfo", "r");
        char line[256];
        long long kb = 0;
        if (m) {
            while (fgets(line, sizeof(line), m))
                if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1)
                    break;
            fclose(m);
        }
        if (kb > 0)
            return (int64_t)kb * 1024 / 2;
        return 2LL << 30;
    }
}

/* ---- input data --------------------------------------------------------- */

typedef struct rng {
    uint64_t s;
} rng;

static uint64_t rng_next(rng *r)
{
    /* splitmix64 */
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1). */
static float rng_sym(rng *r)
{
    return (float)((double)(rng_next(r) >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}

/* Roughly N(0, 1): the sum of three uniforms (variance 1), never all zero. */
static float rng_normalish(rng *r)
{
    return rng_sym(r) + rng_sym(r) + rng_sym(r);
}

static double rope_freq(int64_t pair, int64_t r)
{
    if (pair == 0)
        return 0.0;                         /* an identity pair, as LTX's padding */
    return pow(10000.0, -2.0 * (double)pair / (double)r);
}

/* LTX-Video's positions form: of np pairs, np % 3 identity pairs at the
 * front, then k-major axis-minor over the 3 axes, K = np / 3 frequencies
 * theta^(k / (K - 1)) * pi / 2, theta = 10000 (pi / 2 .. 1.6e4 rad per unit
 * of position). With positions in [-1, 1] (2 * grid - 1 of a normalized
 * grid, ltx_grid_position) the angles reach what the model's do: ~1.6e4
 * rad. Pair p's frequency and axis. */
static void ltx_rope_pair(int64_t p, int64_t np, double *freq, int *axis)
{
    int64_t pad = np % KFT_BENCH_ROPE_AXES, K = np / KFT_BENCH_ROPE_AXES;
    *freq = 0.0;
    *axis = 0;
    if (p < pad || K < 2)
        return;
    *freq = pow(10000.0, (double)((p - pad) / KFT_BENCH_ROPE_AXES) / (double)(K - 1)) * 1.5707963267948966;
    *axis = (int)((p - pad) % KFT_BENCH_ROPE_AXES);
}

/* Position on axis a (frames, rows, columns) of token s of an LTX-Video
 * sequence of S tokens: its latent grid (25 frames at 480 x 704: 4 x 15 x 22 =
 * 1320 tokens; 161 frames at 512 x 768: 21 x 16 x 24 = 8064; otherwise
 * frames of 16 rows of 24), columns fastest, as 2 * grid - 1 with the grid
 * coordinate normalized to [0, 1) per axis. A token shares its frame and row
 * coordinates with its neighbours, as in the model. */
static float ltx_grid_position(int64_t s, int64_t S, int a)
{
    int64_t rows = 16, cols = 24;
    if (S == 1320) {
        rows = 15;
        cols = 22;
    }
    int64_t frames = (S + rows * cols - 1) / (rows * cols);
    int64_t cell = a == 0 ? s / (rows * cols) : a == 1 ? s / cols % rows : s % cols;
    int64_t extent = a == 0 ? frames : a == 1 ? rows : cols;
    return (float)(2.0 * ((double)cell + 0.5) / (double)extent - 1.0);
}

/* Fill a host buffer of b->dtype for buffer b of case c. */
static void fill_host(const kft_bench_case *c, const kfb_buffer *b, void *host, rng *r)
{
    int64_t n = kfb_buffer_elems(b), i;
    int64_t rdim = c->cols;                 /* rotary_dim = head_dim */
    for (i = 0; i < n; i++) {
        float v = 0.0f;
        switch (b->fill) {
        case KFB_FILL_NORMAL: v = rng_normalish(r); break;
        case KFB_FILL_WEIGHT: v = 1.0f + 0.1f * rng_sym(r); break;
        case KFB_FILL_SMALL: v = 0.1f * rng_sym(r); break;
        case KFB_FILL_COS:
        case KFB_FILL_SIN: {
            int64_t ch = i % rdim, tok = (i / rdim) % c->tokens;
            int64_t pair = c->variant == KF_ROPE_HALF ? ch % (rdim / 2) : ch / 2;
            double ang = (double)tok * rope_freq(pair, rdim);
            v = (float)(b->fill == KFB_FILL_COS ? cos(ang) : sin(ang));
            break;
        }
        case KFB_FILL_POSITIONS: /* [B, S, 3] */
            v = ltx_grid_position(i / KFT_BENCH_ROPE_AXES % c->tokens, c->tokens,
                                  (int)(i % KFT_BENCH_ROPE_AXES));
            break;
        case KFB_FILL_FREQS:
        case KFB_FILL_AXIS: {
            double freq;
            int axis;
            ltx_rope_pair(i, rdim / 2, &freq, &axis);
            if (b->fill == KFB_FILL_AXIS) {
                ((int32_t *)host)[i] = axis;
                continue;
            }
            v = (float)freq;
            break;
        }
        case KFB_FILL_OUTPUT: v = 0.0f; break;
        }
        kf_store_f32(host, b->dtype, i, v);
    }
}

/* ---- one case's buffers and call ---------------------------------------- */

typedef struct case_work {
    const kft_bench_case *c;
    kfb_buffer bufs[KFB_MAX_BUFFERS];
    int nb;
    int64_t off[KFB_MAX_BUFFERS];
    char *base;                             /* the arena: n_sets sets, stride bytes apart */
    int64_t stride;
    int n_sets;
} case_work;

static int find_buf(const case_work *w, const char *name)
{
    int i;
    for (i = 0; i < w->nb; i++)
        if (strcmp(w->bufs[i].name, name) == 0)
            return i;
    return -1;
}

/* The view of buffer `name` in input set `set`; zero tensor if absent. */
static kf_tensor view(const case_work *w, int64_t set, const char *name, int *present)
{
    kf_tensor t;
    int i = find_buf(w, name);
    memset(&t, 0, sizeof(t));
    *present = i >= 0;
    if (i < 0)
        return t;
    return kf_tensor_contiguous(w->base + set * w->stride + w->off[i], w->bufs[i].dtype,
                                w->bufs[i].ndim, w->bufs[i].shape);
}

static kf_status case_call(kf_ctx *ctx, void *user, int64_t iter)
{
    const case_work *w = (const case_work *)user;
    const kft_bench_case *c = w->c;
    int64_t set = iter % w->n_sets;
    int has_k = 0, p = 0;
    kf_tensor x, y, wt, b, r, sc, sh, g, up, q, k, qo, ko, cs, sn, pos, fr, ax;
    kf_rope_args ra;

    switch (c->op) {
    case KF_OP_RMS_NORM:
        x = view(w, set, "x", &p); wt = view(w, set, "weight", &p); y = view(w, set, "y", &p);
        return kf_rms_norm(ctx, &x, &wt, KFT_BENCH_EPS, (kf_rms_mode)c->variant, 0.0f, &y);
    case KF_OP_ADD_RMS_NORM:
        x = view(w, set, "x", &p); r = view(w, set, "residual", &p);
        wt = view(w, set, "weight", &p); y = view(w, set, "y", &p);
        return kf_add_rms_norm(ctx, &x, &r, &wt, KFT_BENCH_EPS, (kf_rms_mode)c->variant, 0.0f, &y);
    case KF_OP_LAYER_NORM:
        x = view(w, set, "x", &p); wt = view(w, set, "weight", &p);
        b = view(w, set, "bias", &p); y = view(w, set, "y", &p);
        return kf_layer_norm(ctx, &x, &wt, &b, KFT_BENCH_EPS, &y);
    case KF_OP_ADA_NORM:
        x = view(w, set, "x", &p); sc = view(w, set, "scale", &p);
        sh = view(w, set, "shift", &p); y = view(w, set, "y", &p);
        return kf_ada_norm(ctx, &x, &sc, &sh, NULL, KFT_BENCH_EPS, (kf_norm_kind)c->variant, &y);
    case KF_OP_ADD_ADA_NORM:
        x = view(w, set, "h", &p); r = view(w, set, "a", &p); sc = view(w, set, "scale", &p);
        sh = view(w, set, "shift", &p); y = view(w, set, "y", &p);
        return kf_add_ada_norm(ctx, &x, &r, NULL, &sc, &sh, NULL, KFT_BENCH_EPS,
                               (kf_norm_kind)c->variant, &y);
    case KF_OP_GATED_RESIDUAL:
        x = view(w, set, "h", &p); r = view(w, set, "a", &p); g = view(w, set, "gate", &p);
        return kf_gated_residual(ctx, &x, &r, &g);
    case KF_OP_ROPE:
    case KF_OP_RMS_NORM_ROPE:
        memset(&ra, 0, sizeof(ra));
        ra.convention = c->variant;
        ra.rotary_dim = 0;
        cs = view(w, set, "cos", &p);
        if (p) {
            sn = view(w, set, "sin", &p);
            ra.cos = &cs;
            ra.sin = &sn;
        } else {
            pos = view(w, set, "positions", &p); fr = view(w, set, "freqs", &p);
            ax = view(w, set, "axis", &p);
            ra.positions = &pos;
            ra.freqs = &fr;
            ra.axis = &ax;
        }
        if (c->op == KF_OP_RMS_NORM_ROPE) {
            x = view(w, set, "x", &p); wt = view(w, set, "weight", &p);
            y = view(w, set, "y", &p);
            return kf_rms_norm_rope(ctx, &x, &wt, KFT_BENCH_EPS, KFT_BENCH_RMS_NORM_ROPE_MODE, 0.0f, &ra,
                                    &y);
        }
        q = view(w, set, "q", &p); qo = view(w, set, "q_out", &p);
        k = view(w, set, "k", &has_k); ko = view(w, set, "k_out", &p);
        return kf_rope(ctx, &q, has_k ? &k : NULL, &qo, has_k ? &ko : NULL, &ra);
    case KF_OP_GLU:
        y = view(w, set, "y", &p);
        g = view(w, set, "packed", &p);
        if (p)
            return kf_glu(ctx, &g, NULL, (kf_activation)c->variant, 0, &y);
        g = view(w, set, "gate", &p); up = view(w, set, "up", &p);
        return kf_glu(ctx, &g, &up, (kf_activation)c->variant, 0, &y);
    case KF_OP_GELU:
        x = view(w, set, "x", &p); y = view(w, set, "y", &p);
        return kf_gelu(ctx, &x, c->variant, &y);
    case KF_OP_SILU:
        x = view(w, set, "x", &p); y = view(w, set, "y", &p);
        return kf_silu(ctx, &x, &y);
    case KF_OP_SOFTMAX:
        x = view(w, set, "x", &p); y = view(w, set, "y", &p);
        return kf_softmax(ctx, &x, KFT_BENCH_SOFTMAX_SCALE, &y);
    default:
        return KF_ERR_INVALID_ARG;
    }
}

/* ---- progress ------------------------------------------------------------ */

static int g_progress_tty = 0;

static void progress(int i, int n, const kfb_result *r, const char *what)
{
    if (g_progress_tty)
        fprintf(stderr, "\r\033[K[%d/%d] %s %s %s %s: %s", i + 1, n, r->op, r->variant,
                r->shape, kf_dtype_name(r->c.dtype), what);
    else if (strcmp(what, "verify") == 0)
        fprintf(stderr, "[%d/%d] %s %s %s %s\n", i + 1, n, r->op, r->variant, r->shape,
                kf_dtype_name(r->c.dtype));
    fflush(stderr);
}

/* ---- one case ------------------------------------------------------------- */

/* The timed call checked on its own inputs (GPU backend): set 0 as filled is
 * copied to the host, the op runs once on the device (set 0) and once on the
 * CPU backend (the host copy, the same call), and every buffer of the case
 * must agree: inputs the op only reads bit for bit, what it writes within
 * twice the dtype's norm-wise tolerance (both backends are held to the
 * float64 reference within it). *rel gets the worst buffer's norm-wise
 * difference; returns KF_OK with *ok set, or the status of a failed step. */
static kf_status check_against_cpu(kf_ctx *ctx, const case_work *w, int64_t footprint, double *rel,
                                   int *ok, char *why, size_t why_size)
{
    kf_status st = KF_ERR_ALLOC;
    kf_ctx *cpu = NULL;
    char *on_cpu = (char *)malloc((size_t)footprint), *from_gpu = (char *)malloc((size_t)footprint);
    case_work hw = *w;
    int i;

    *rel = 0.0;
    *ok = 0;
    snprintf(why, why_size, "%s", "");
    if (!on_cpu || !from_gpu) {
        snprintf(why, why_size, "cannot allocate 2 x %.0f MB on the host", footprint / 1e6);
        goto out;
    }
    if ((st = kf_memcpy(ctx, on_cpu, w->base, (size_t)footprint, 0)) != KF_OK ||
        (st = case_call(ctx, (void *)w, 0)) != KF_OK ||
        (st = kf_memcpy(ctx, from_gpu, w->base, (size_t)footprint, 0)) != KF_OK) {
        snprintf(why, why_size, "the GPU: %s", kf_last_error(ctx));
        goto out;
    }
    if ((st = kf_ctx_create(KF_BACKEND_CPU, 0, &cpu)) != KF_OK) {
        snprintf(why, why_size, "%s", kf_last_error(NULL));   /* the creation's error */
        goto out;
    }
    hw.base = on_cpu;
    hw.n_sets = 1;
    if ((st = case_call(cpu, &hw, 0)) != KF_OK) {
        snprintf(why, why_size, "the CPU backend: %s", kf_last_error(cpu));
        goto out;
    }
    *ok = 1;
    for (i = 0; i < w->nb; i++) {
        const kfb_buffer *b = &w->bufs[i];
        const char *a = on_cpu + w->off[i], *d = from_gpu + w->off[i];
        int64_t n = kfb_buffer_elems(b), e;
        double diff = 0.0, norm = 0.0, q;
        if (!b->writes) {                   /* read only: untouched on both */
            if (memcmp(a, d, (size_t)kfb_buffer_bytes(b)) != 0) {
                *ok = 0;
                *rel = INFINITY;
            }
            continue;
        }
        for (e = 0; e < n; e++) {
            double x = kf_load_f32(a, b->dtype, e), y = kf_load_f32(d, b->dtype, e);
            diff += (x - y) * (x - y);
            norm += x * x;
        }
        q = norm > 0.0 ? sqrt(diff / norm) : (diff > 0.0 ? INFINITY : 0.0);
        if (!(q <= 2.0 * kft_tolerance_for(b->dtype).rel_norm))
            *ok = 0;
        if (!(q <= *rel))
            *rel = q;
    }
out:
    kf_ctx_free(cpu);
    free(on_cpu);
    free(from_gpu);
    return st;
}

typedef struct bench_env {
    kf_ctx *ctx;
    kfb_timing_cfg cfg;
    int64_t cold_target;
    int64_t budget;
    long long verify_rows;
    uint64_t seed;
    int distinct_inputs;                    /* --inputs distinct */
    double floor_single, floor_batched;
} bench_env;

static void set_note(kfb_result *r, const char *fmt, const char *a, const char *b)
{
    snprintf(r->note, sizeof(r->note), fmt, a, b);
}

static void run_case(bench_env *env, int idx, int count, kfb_result *r)
{
    kf_ctx *ctx = env->ctx;
    case_work w;
    kfb_copy_work cw;
    kfb_timing tt, tc;
    kfb_timing_cfg ocfg, ccfg;
    int64_t footprint, stride, touched, want, copy_half;
    double rel = 0.0;
    int ok = 0, i, s, filled;
    kf_status st;
    void *arena = NULL;
    void *host = NULL, *stage = NULL;
    rng g;

    /* 1. verify */
    progress(idx, count, r, "verify");
    if (!kf_supports(ctx, r->c.op, r->c.dtype)) {
        r->status = KFB_SKIPPED;
        set_note(r, "unsupported on this backend%s%s", "", "");
        return;
    }
    /* the case's data derives from the seed and its place in the whole case
     * table (not idx, its place among the selected cases), so that --seed N
     * replays a case under any --op / --shape selection */
    st = kft_verify_bench_case(ctx, &r->c, env->verify_rows,
                               env->seed ^ (0x9e3779b97f4a7c15ULL * (uint64_t)(r->case_index + 1)),
                               &rel, &ok);
    r->rel_err = rel;
    r->verify_rows = env->verify_rows;
    if (st == KF_ERR_UNSUPPORTED) {
        r->status = KFB_SKIPPED;
        set_note(r, "unsupported on this backend%s%s", "", "");
        return;
    }
    if (st != KF_OK) {
        r->status = KFB_ERROR;
        set_note(r, "verification could not run: %s (%s)", kf_status_string(st),
                 kf_last_error(ctx));
        return;
    }
    if (!ok) {
        r->status = KFB_FAILED;
        snprintf(r->note, sizeof(r->note), "FAILED verification: rel err %.3g; not timed", rel);
        return;
    }

    /* 2. the input sets: every buffer of the case, 256-byte aligned; a set is
     * also large enough for the same-size copy (bytes/2 read, bytes/2 written,
     * rounded up to KFB_COPY_ALIGN), and sets start KFB_COPY_ALIGN apart. */
    memset(&w, 0, sizeof(w));
    w.c = &r->c;
    w.nb = kfb_case_buffers(&r->c, w.bufs);
    footprint = 0;
    for (i = 0; i < w.nb; i++) {
        w.off[i] = footprint;
        footprint += align_up(kfb_buffer_bytes(&w.bufs[i]), KFB_ALIGN);
    }
    copy_half = kfb_copy_half(r->bytes);
    /* what one call touches per set: the op its buffers (an in-place one
     * counts its buffer once, where r->bytes counts it read and written),
     * the copy 2 x copy_half; the rotation must cover the target for both */
    touched = footprint < 2 * copy_half ? footprint : 2 * copy_half;
    stride = footprint > 2 * copy_half ? footprint : 2 * copy_half;
    stride = align_up(stride, KFB_COPY_ALIGN);
    if (stride > env->budget) {
        r->status = KFB_SKIPPED;
        snprintf(r->note, sizeof(r->note), "needs %.0f MB, more than this tool allows itself "
                 "(%.0f MB)", stride / 1e6, env->budget / 1e6);
        return;
    }
    want = kfb_input_sets(env->cold_target, touched, stride, env->budget);
    for (;;) {
        st = kf_malloc(ctx, (size_t)(want * stride), &arena);
        if (st == KF_OK)
            break;
        arena = NULL;
        if (want == 1) {
            r->status = KFB_SKIPPED;
            snprintf(r->note, sizeof(r->note), "cannot allocate %.0f MB: %s", stride / 1e6,
                     kf_status_string(st));
            return;
        }
        want /= 2;
    }
    w.base = (char *)arena;
    w.stride = stride;
    w.n_sets = (int)want;
    r->n_sets = w.n_sets;
    r->rotation_bytes = want * touched;
    r->from_cache = r->rotation_bytes < env->cold_target;
    if (want < 2) /* the budget held one set: every call touches the last one's buffers */
        snprintf(r->note, sizeof(r->note), "one input set (memory budget)");

    /* 3. random data on the host, made afresh for every set (or, --inputs
     * replicated, for set 0 and copied on the device into the others). Every
     * set is written by a device-to-device copy, never straight from the
     * host, as a model's activations are written by kernels: on the H200 the
     * streamed (ld.global.cs) norm rows read memory last written by a
     * host-to-device copy slower, and kept doing so over thousands of calls
     * (bf16 layer_norm 8192 x 4096 1.10 x copy against 1.06 once every set
     * had been copied out and back on the device; rms_norm 4096 x 5120 1.08
     * against 1.05; the copy itself level; cause not found). One host and
     * one device staging buffer, the largest buffer's size. */
    progress(idx, count, r, "inputs");
    g.s = env->seed ^ (0x1234567ULL * (uint64_t)(r->case_index + 1));
    {
        int64_t most = 1;
        for (i = 0; i < w.nb; i++)
            if (kfb_buffer_bytes(&w.bufs[i]) > most)
                most = kfb_buffer_bytes(&w.bufs[i]);
        host = malloc((size_t)most);
        if (!host || kf_malloc(ctx, (size_t)most, &stage) != KF_OK) {
            stage = NULL;
            r->status = KFB_SKIPPED;
            snprintf(r->note, sizeof(r->note), "cannot allocate the %.0f MB staging buffers",
                     most / 1e6);
            goto done;
        }
    }
    filled = env->distinct_inputs ? w.n_sets : 1;
    for (s = 0; s < filled; s++) {
        for (i = 0; i < w.nb; i++) {
            int64_t nbytes = kfb_buffer_bytes(&w.bufs[i]);
            fill_host(&r->c, &w.bufs[i], host, &g);
            /* kf_memcpy returns with the copy done; the device copy out of
             * the staging buffer runs before the next upload on the stream */
            if ((st = kf_memcpy(ctx, stage, host, (size_t)nbytes, 1)) != KF_OK ||
                (st = kf__copy_d2d(ctx, w.base + (int64_t)s * stride + w.off[i], stage,
                                   (size_t)nbytes)) != KF_OK)
                goto error;
        }
    }
    free(host);
    host = NULL;
    for (s = filled; s < w.n_sets; s++)
        if ((st = kf__copy_d2d(ctx, w.base + (int64_t)s * stride, w.base, (size_t)footprint)) !=
            KF_OK)
            goto error;
    if ((st = kf_synchronize(ctx)) != KF_OK)
        goto error;
    kf_free(ctx, stage);
    stage = NULL;

    /* 3b. on the GPU, the timed call on its own inputs against the CPU backend */
    if (kf_ctx_backend(ctx) == KF_BACKEND_GPU) {
        double same_rel = 0.0;
        int same_ok = 0;
        char why[120];
        progress(idx, count, r, "check");
        if ((st = check_against_cpu(ctx, &w, footprint, &same_rel, &same_ok, why, sizeof why)) !=
            KF_OK) {
            r->status = KFB_ERROR;
            snprintf(r->note, sizeof(r->note), "the check on its own inputs could not run: %s (%s)",
                     kf_status_string(st), why);
            goto done;
        }
        if (!same_ok) {
            r->status = KFB_FAILED;
            snprintf(r->note, sizeof(r->note), "FAILED: differs from the CPU backend on its own "
                     "inputs by %.3g (norm-wise); not timed", same_rel);
            goto done;
        }
    }

    /* 4. time the op */
    progress(idx, count, r, "time");
    ocfg = env->cfg;
    ocfg.graph_min_calls = w.n_sets;
    if ((st = kfb_time(ctx, case_call, &w, &ocfg, &tt)) != KF_OK)
        goto error;
    r->t = tt.us;
    r->batch = tt.batch;

    /* 5. the same-size copy over the same rotation, timed the same way: with
     * the op's calls per event pair. Decided on its own, a copy a little
     * faster than an op near the batching threshold was batched while the op
     * was not, and the op's ratio took the launch gap (H200 add_rms_norm
     * 2048x4096, a build whose call came out just above 20 us: 24.9 us one
     * call per event pair against a 19.1 us batched copy, 1.31 x; the same
     * op at 19.9 us batched: 1.04 x). */
    progress(idx, count, r, "copy");
    ccfg = env->cfg;
    ccfg.force_batch = tt.batch;
    ccfg.graph_min_calls = w.n_sets;
    cw.base = w.base;
    cw.stride = stride;
    cw.n_sets = w.n_sets;
    cw.src_off = 0;
    cw.dst_off = copy_half;
    cw.bytes = (size_t)copy_half;
    if ((st = kfb_time(ctx, kfb_copy_call, &cw, &ccfg, &tc)) != KF_OK)
        goto error;
    r->copy = tc.us;
    r->copy_batch = tc.batch;
    r->floor_us = r->batch > 1 ? env->floor_batched : env->floor_single;
    r->launch_bound = r->t.median < 2.0 * r->floor_us;
    r->status = KFB_TIMED;
    goto done;

error:
    r->status = KFB_ERROR;
    snprintf(r->note, sizeof(r->note), "%s: %s", kf_status_string(st), kf_last_error(ctx));
done:
    free(host);
    if (stage)
        kf_free(ctx, stage);
    if (arena)
        kf_free(ctx, arena);
}

/* ---- the command ------------------------------------------------------------ */

kf_status kfb_global_warmup(kf_ctx *ctx, int quick, double *done_ms)
{
    const int gpu = kf_ctx_backend(ctx) == KF_BACKEND_GPU;
    int64_t bytes = gpu ? (512LL << 20) : (128LL << 20);
    const double warm_ms = gpu ? (quick ? 300.0 : 1000.0) : (quick ? 50.0 : 200.0);
    void *buf = NULL;
    kfb_copy_work cw;
    double total = 0.0, ms = 0.0;
    int64_t it = 0;
    kf_status st;
    *done_ms = 0.0;
    while ((st = kf_malloc(ctx, (size_t)bytes, &buf)) != KF_OK && bytes > (16 << 20))
        bytes /= 2;
    if (st != KF_OK)
        return st;
    kf__memset(ctx, buf, 1, (size_t)bytes);
    cw.base = (char *)buf;
    cw.stride = bytes;
    cw.n_sets = 1;
    cw.src_off = 0;
    cw.dst_off = bytes / 2;
    cw.bytes = (size_t)(bytes / 2);
    while (total < warm_ms) {
        int j;
        if ((st = kf__timer_start(ctx)) != KF_OK)
            break;
        for (j = 0; j < 4; j++)
            if ((st = kfb_copy_call(ctx, &cw, it++)) != KF_OK)
                break;
        if (st != KF_OK || (st = kf__timer_stop(ctx, &ms)) != KF_OK)
            break;
        total += ms;
    }
    kf_free(ctx, buf);
    *done_ms = total;
    return st;
}

static int case_selected(const kfc_args *a, const kft_bench_case *c)
{
    char shape[64], variant[48], both[128];
    if (a->op && kfc_parse_op(a->op) != (int)c->op)
        return 0;
    if (a->shape) {
        kfb_case_shape(c, shape, sizeof(shape));
        kfb_case_variant(c, variant, sizeof(variant));
        snprintf(both, sizeof(both), "%s %s", shape, variant);
        if (!strstr(both, a->shape))
            return 0;
    }
    return 1;
}

/* The cases of the benchmark table that pass --op / --shape (and take
 * --dtype), with their names filled in; *n = how many. NULL: out of memory. */
static kfb_result *select_cases(const kfc_args *a, int (*keep)(kf_op), int *n)
{
    kfb_result *res = (kfb_result *)calloc((size_t)kfb_case_count() + 1, sizeof(kfb_result));
    *n = 0;
    if (!res)
        return NULL;
    for (int i = 0; i < kfb_case_count(); i++) {
        kft_bench_case c = *kfb_case_at(i);
        if (a->dtype >= 0)
            c.dtype = (kf_dtype)a->dtype;
        if (!case_selected(a, &c) || (keep && !keep(c.op)))
            continue;
        res[*n].c = c;
        res[*n].case_index = i;
        snprintf(res[*n].op, sizeof(res[*n].op), "%s", kf_op_name(c.op));
        kfb_case_shape(&c, res[*n].shape, sizeof(res[*n].shape));
        kfb_case_variant(&c, res[*n].variant, sizeof(res[*n].variant));
        res[*n].bytes = kfb_case_bytes(&c);
        (*n)++;
    }
    return res;
}

/* The host's 1-minute load average (/proc/loadavg), or -1 where there is none:
 * work of other processes on the cores the CPU backend's threads run on. */
static double read_host_load(void)
{
    double load = -1.0;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &load) != 1)
            load = -1.0;
        fclose(f);
    }
    return load;
}

/* Open the context of the command line and get it ready to time cases: the
 * protocol's settings, one global warm-up (clocks ramp up), the launch
 * floor. NULL on failure (message printed). */
static kf_ctx *bench_open(const kfc_args *a, const char *cmd, bench_env *env,
                          double *warm_done)
{
    kf_ctx *ctx = kfc_open_context(a);
    const kf_device_facts *f;
    kfb_timing tf;
    kfb_timing_cfg fcfg;
    kf_status st;
    int gpu;

    if (!ctx)
        return NULL;
    if (a->plot) { /* a plot that cannot be written fails now, not after the run; an
                    * existing file is kept as it is until the run has finished */
        int existed = access(a->plot, F_OK) == 0;
        FILE *pf = fopen(a->plot, "a");
        if (!pf) {
            fprintf(stderr, "kfuse %s: cannot write the plot %s: %s\n", cmd, a->plot,
                    strerror(errno));
            kf_ctx_free(ctx);
            return NULL;
        }
        fclose(pf);
        if (!existed)
            remove(a->plot);
    }
    f = kf__facts(ctx);
    gpu = kf_ctx_backend(ctx) == KF_BACKEND_GPU;
    memset(env, 0, sizeof(*env));
    env->ctx = ctx;
    kfb_timing_defaults(ctx, a->quick, &env->cfg);
    if (a->min_ms >= 0.0)
        env->cfg.min_ms = a->min_ms;
    if (a->min_samples > 0)
        env->cfg.min_samples = a->min_samples;
    env->cfg.graph = a->graph_timing < 0 ? gpu : a->graph_timing;
    if (env->cfg.graph && !gpu) {
        fprintf(stderr, "kfuse %s: --timing graph needs the GPU backend (this context runs "
                "on the CPU)\n", cmd);
        kf_ctx_free(ctx);
        return NULL;
    }
    env->budget = kfb_memory_budget(ctx);
    if (gpu)
        env->cold_target = (f && f->l2_bytes > 0) ? 2 * (int64_t)f->l2_bytes : (256LL << 20);
    else
        env->cold_target = (f && 2 * (int64_t)f->l2_bytes > KFB_CPU_COLD_BYTES)
                               ? 2 * (int64_t)f->l2_bytes : KFB_CPU_COLD_BYTES;
    env->verify_rows = a->verify_rows >= 0 ? a->verify_rows : 256;
    env->seed = a->seed ? a->seed : (uint64_t)(kfc_now_s() * 1e6);
    env->distinct_inputs = a->distinct_inputs;

    fprintf(stderr, "kfuse %s: %s; seed %llu; warming up...\n", cmd, kf_ctx_describe(ctx),
            (unsigned long long)env->seed);
    st = kfb_global_warmup(ctx, a->quick, warm_done);
    if (st != KF_OK) {
        fprintf(stderr, "kfuse %s: warm-up failed: %s (%s)\n", cmd, kf_status_string(st),
                kf_last_error(ctx));
        kf_ctx_free(ctx);
        return NULL;
    }
    /* the launch floor: an empty kernel, one per event pair and in batches */
    fcfg = env->cfg;
    fcfg.force_batch = 1;
    st = kfb_time(ctx, kfb_empty_call, NULL, &fcfg, &tf);
    env->floor_single = tf.us.median;
    if (st == KF_OK) {
        fcfg.force_batch = 0;
        fcfg.batch_below_us = 1e9; /* always batched */
        st = kfb_time(ctx, kfb_empty_call, NULL, &fcfg, &tf);
        env->floor_batched = tf.us.median;
    }
    if (st != KF_OK) {
        fprintf(stderr, "kfuse %s: timing the launch floor failed: %s (%s)\n", cmd,
                kf_status_string(st), kf_last_error(ctx));
        kf_ctx_free(ctx);
        return NULL;
    }
    return ctx;
}

int kfc_cmd_bench(const kfc_args *a)
{
    bench_env env;
    kfb_run run;
    kfb_result *res;
    kf_ctx *ctx;
    const kf_device_facts *f;
    int n = 0, i, failures = 0, timed = 0;
    int gpu;
    double warm_done = 0.0;
    char timing_label[256];
    FILE *out = stdout;
    double host_load;

    /* the cases first, so a filter that matches nothing is a usage error */
    res = select_cases(a, NULL, &n);
    if (!res) {
        fprintf(stderr, "kfuse bench: out of memory\n");
        return KFC_EXIT_FAIL;
    }
    if (n == 0) {
        fprintf(stderr, "kfuse bench: no case matches --op %s --shape %s\n",
                a->op ? a->op : "(any)", a->shape ? a->shape : "(any)");
        free(res);
        return KFC_EXIT_USAGE;
    }
    g_progress_tty = isatty(2);
    host_load = read_host_load();       /* before this run adds its own threads */
    ctx = bench_open(a, "bench", &env, &warm_done);
    if (!ctx) {
        free(res);
        return KFC_EXIT_FAIL;
    }
    f = kf__facts(ctx);
    gpu = kf_ctx_backend(ctx) == KF_BACKEND_GPU;

    for (i = 0; i < n; i++) {
        run_case(&env, i, n, &res[i]);
        if (res[i].status == KFB_FAILED || res[i].status == KFB_ERROR)
            failures++;
        if (res[i].status == KFB_TIMED)
            timed++;
    }
    if (g_progress_tty)
        fprintf(stderr, "\r\033[K");
    fprintf(stderr, "kfuse bench: %d cases, %d timed, %d failed\n", n, timed, failures);

    snprintf(timing_label, sizeof(timing_label),
             "%s%s: >= %d samples and >= %g ms of device time per case%s",
             gpu ? "device events" : "host clock after sync (CPU backend)",
             env.cfg.graph ? " around graph replays of each batch" : "",
             env.cfg.min_samples, env.cfg.min_ms,
             env.cfg.min_samples >= 10 && env.cfg.min_ms >= 100.0 ? ""
             : gpu ? " (shorter than the protocol's 10 samples / 100 ms)"
                   : " (CPU: shorter than the GPU protocol of 10 samples / 100 ms)");
    memset(&run, 0, sizeof(run));
    run.backend = gpu ? "gpu" : "cpu";
    run.describe = kf_ctx_describe(ctx);
    run.version = kf_version_string();
    run.seed = (unsigned long long)env.seed;
    run.is_gpu = gpu;
    run.min_ms = env.cfg.min_ms;
    run.min_samples = env.cfg.min_samples;
    run.warmup_ms = warm_done;
    run.case_warm_ms = env.cfg.warm_ms;
    run.batch_below_us = env.cfg.batch_below_us;
    run.cold_target_bytes = env.cold_target;
    run.l2_bytes = f ? (int64_t)f->l2_bytes : 0;
    run.verify_rows = env.verify_rows;
    run.floor_single_us = env.floor_single;
    run.floor_batched_us = env.floor_batched;
    run.quick = a->quick;
    run.distinct_inputs = a->distinct_inputs;
    run.host_load = host_load;
    run.host_cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
    run.timing_label = timing_label;

    if (a->csv)
        kfr_print_csv(out, &run, res, n);
    else if (a->json)
        kfr_print_json(out, &run, res, n);
    else
        kfr_print_table(out, &run, res, n);
    fflush(out); /* the table before the plot message, when both go to one file */
    if (a->plot) {
        if (kfr_write_svg(a->plot, &run, res, n) != 0) {
            fprintf(stderr, "kfuse bench: cannot write %s: %s\n", a->plot, strerror(errno));
            failures++;
        } else {
            fprintf(stderr, "kfuse bench: plot written to %s\n", a->plot);
        }
    }
    kf_ctx_free(ctx);
    free(res);
    return failures ? KFC_EXIT_FAIL : KFC_EXIT_OK;
}

/* ---- kfuse tune -----------------------------------------------------------------
 * The launch settings the GPU row kernels expose, read when a context is
 * created: chunks of 16 bytes per thread (KFUSE_ROW_CHUNKS) and the threads
 * per block their rows are packed into (KFUSE_ROW_BLOCK), each swept alone
 * over the benchmark shapes of the ops that use the row kernels: one context
 * per setting, every case verified and timed as `kfuse bench` does. It
 * prints the medians and the fastest setting per case and changes nothing.
 * The CPU backend has no such setting: there every column times the same
 * code. */
#define KFT_VARS 2
static const char *const kft_vars[KFT_VARS] = {"KFUSE_ROW_CHUNKS", "KFUSE_ROW_BLOCK"};
typedef struct kft_setting {
    int var;           /* index into kft_vars; -1: the default (both unset) */
    const char *value;
    const char *column;
} kft_setting;
#define KFT_SETTINGS 9
static const kft_setting kft_settings[KFT_SETTINGS] = {
    {-1, NULL, "default"},
    {0, "1", "c1"},    {0, "2", "c2"},    {0, "4", "c4"},    {0, "8", "c8"},
    {1, "64", "b64"},  {1, "128", "b128"}, {1, "256", "b256"}, {1, "512", "b512"},
};

static int tune_uses_row_kernels(kf_op op)
{
    return op == KF_OP_RMS_NORM || op == KF_OP_ADD_RMS_NORM || op == KF_OP_LAYER_NORM ||
           op == KF_OP_ADA_NORM || op == KF_OP_ADD_ADA_NORM || op == KF_OP_SOFTMAX ||
           op == KF_OP_ROPE || op == KF_OP_RMS_NORM_ROPE;
}

/* the environment of setting s: its variable set, the other one unset; 0 on
 * success */
static int tune_setenv(const kft_setting *s)
{
    for (int v = 0; v < KFT_VARS; v++) {
        int rc = s->var == v ? setenv(kft_vars[v], s->value, 1) : unsetenv(kft_vars[v]);
        if (rc != 0)
            return rc;
    }
    return 0;
}

int kfc_cmd_tune(const kfc_args *args)
{
    kfb_result *res[KFT_SETTINGS] = {NULL};
    /* one seed for every setting: each column times the same data, and the
     * printed seed replays the whole table */
    kfc_args seeded = *args;
    const kfc_args *a = &seeded;
    char saved[KFT_VARS][32];
    int had[KFT_VARS];
    int n = 0, failures = 0, gpu = 0, rc = KFC_EXIT_OK;
    char describe[256] = "";

    for (int v = 0; v < KFT_VARS; v++) { /* put back when done */
        const char *was = getenv(kft_vars[v]);
        had[v] = was != NULL;
        snprintf(saved[v], sizeof(saved[v]), "%s", was ? was : "");
    }
    /* the same cases for every setting: one selection, copied */
    res[0] = select_cases(a, tune_uses_row_kernels, &n);
    for (int s = 1; s < KFT_SETTINGS && res[0]; s++) {
        res[s] = (kfb_result *)malloc(((size_t)n + 1) * sizeof(kfb_result));
        if (res[s])
            memcpy(res[s], res[0], ((size_t)n + 1) * sizeof(kfb_result));
    }
    for (int s = 0; s < KFT_SETTINGS; s++) {
        if (!res[s]) {
            fprintf(stderr, "kfuse tune: out of memory\n");
            rc = KFC_EXIT_FAIL;
            goto done;
        }
    }
    if (n == 0) {
        fprintf(stderr, "kfuse tune: no case of an op with row kernels matches --op %s "
                        "--shape %s\n", a->op ? a->op : "(any)", a->shape ? a->shape : "(any)");
        rc = KFC_EXIT_USAGE;
        goto done;
    }
    if (!seeded.seed)
        seeded.seed = (unsigned long long)(kfc_now_s() * 1e6);
    g_progress_tty = isatty(2);
    for (int s = 0; s < KFT_SETTINGS; s++) {
        bench_env env;
        double warm_done = 0.0;
        kf_ctx *ctx;
        const kft_setting *set = &kft_settings[s];
        if (tune_setenv(set) != 0) {
            fprintf(stderr, "kfuse tune: cannot set the environment for %s\n", set->column);
            rc = KFC_EXIT_FAIL;
            goto done;
        }
        char label[64];
        if (set->var >= 0)
            snprintf(label, sizeof(label), "tune (%s=%s)", kft_vars[set->var], set->value);
        else
            snprintf(label, sizeof(label), "tune (default)");
        ctx = bench_open(a, label, &env, &warm_done);
        if (!ctx) {
            rc = KFC_EXIT_FAIL;
            goto done;
        }
        gpu = kf_ctx_backend(ctx) == KF_BACKEND_GPU;
        snprintf(describe, sizeof(describe), "%s", kf_ctx_describe(ctx));
        for (int i = 0; i < n; i++) {
            run_case(&env, i, n, &res[s][i]);
            if (res[s][i].status == KFB_FAILED || res[s][i].status == KFB_ERROR)
                failures++;
        }
        if (g_progress_tty)
            fprintf(stderr, "\r\033[K");
        kf_ctx_free(ctx);
    }

    printf("kfuse %s tune on %s\n", kf_version_string(), describe);
    printf("seed: %llu (--seed %llu replays the cases' data, in every column the same)\n",
           seeded.seed, seeded.seed);
    printf("settings: cN = KFUSE_ROW_CHUNKS=N (chunks of 16 bytes per thread in the row "
           "kernels), bN = KFUSE_ROW_BLOCK=N (threads per block the rows are packed into); "
           "default = neither set, each op's own choice\n");
    printf("cells: median us per call, verified and timed as kfuse bench does; best: the "
           "fastest setting, 'default' unless one is >= 3%% faster and its median and the "
           "default's differ by more than either's p20-p80 spread. The settings run one after "
           "another, not interleaved: confirm a pick with two `kfuse bench` runs\n");
    if (!gpu)
        printf("(CPU backend: the settings have no effect here; every column times the same "
               "code)\n");
    printf("\n%-15s %-22s %-18s %-5s", "op", "variant", "shape", "dtype");
    for (int s = 0; s < KFT_SETTINGS; s++)
        printf(" %8s", kft_settings[s].column);
    printf("  best\n");
    for (int i = 0; i < n; i++) {
        const kfb_result *r0 = &res[0][i];
        int best = 0;
        double best_us = r0->status == KFB_TIMED ? r0->t.median : 0.0;
        printf("%-15s %-22s %-18s %-5s", r0->op, r0->variant, r0->shape,
               kf_dtype_name(r0->c.dtype));
        for (int s = 0; s < KFT_SETTINGS; s++) {
            const kfb_result *r = &res[s][i];
            if (r->status != KFB_TIMED) {
                printf(" %8s", r->status == KFB_FAILED || r->status == KFB_ERROR ? "FAIL"
                                                                                  : "-");
                continue;
            }
            printf(" %8.2f", r->t.median);
            if (s > 0 && best_us > 0.0 && r->t.median < 0.97 * best_us &&
                kfs_significant(&r->t, &r0->t) &&
                (best == 0 || r->t.median < res[best][i].t.median)) {
                best = s;
            }
        }
        if (!gpu)
            printf("  n/a\n"); /* no setting to choose on this backend */
        else if (best_us <= 0.0)
            printf("  -\n");
        else if (best == 0)
            printf("  default\n");
        else
            printf("  %s=%s (%.2fx the default's time)\n", kft_vars[kft_settings[best].var],
                   kft_settings[best].value, res[best][i].t.median / best_us);
    }
    printf("\n%d cases x %d settings, %d failed verification or errored\n", n, KFT_SETTINGS,
           failures);
    fflush(stdout);
    if (failures)
        rc = KFC_EXIT_FAIL;
done:
    for (int v = 0; v < KFT_VARS; v++) {
        if (had[v])
            setenv(kft_vars[v], saved[v], 1);
        else
            unsetenv(kft_vars[v]);
    }
    for (int s = 0; s < KFT_SETTINGS; s++)
        free(res[s]);
    return rc;
}
