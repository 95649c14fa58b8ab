/* check_suite.c - the correctness harness: every op x dtype x case on one
 * backend against the float64 reference (check_reference.c), and
 * kft_verify_bench_case for `kfuse bench` / `kfuse verify`.
 *
 * Per case: fresh random inputs (seeded from the run's seed and the case's
 * number, so `--seed N` replays a run), laid out with the case's strides in
 * buffers of the context's device. Every buffer is
 *     [256 guard bytes][storage][256 guard bytes]
 * and its storage bytes that no view covers hold 0xFF (NaN in every float
 * dtype, so a kernel that reads them produces NaN). Output elements of their
 * own buffer start as OUTPUT_POISON, a finite value no case produces, so an
 * element the op leaves unwritten fails its comparison also where the
 * reference is NaN or Inf (a NaN poison would match a NaN reference). After
 * the op the whole buffer comes back: the output
 * elements are compared with the reference, and every other byte (guards,
 * gaps between rows, inputs that are not written in place) must be unchanged.
 * Error: ||out-ref||/||ref|| and |out-ref| <= atol + rtol*|ref| per output
 * dtype (docs/ops.md); NaN / Inf positions must match the reference. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "core/internal.h"

#define GUARD_BYTES 256
#define OUTPUT_POISON (-31337.0)   /* what an output element holds before the op */
#define MAX_BUFS 16
#define MAX_DENSE 48
#define CASE_ELEMS_CAP ((int64_t)1 << 21)   /* rows*D of the shape sweep (per tensor) */

/* ---- random numbers (splitmix64) ----------------------------------------- */

typedef struct rng {
    uint64_t state;
} rng;

static uint64_t rng_next(rng *r)
{
    uint64_t z = (r->state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* uniform in [0, 1) */
static double rng_uniform(rng *r)
{
    return (double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

/* Normal-ish in [-3, 3] (sum of three uniforms: mean 0, variance 1), never 0. */
static double rng_normalish(rng *r)
{
    double v = (rng_uniform(r) + rng_uniform(r) + rng_uniform(r) - 1.5) * 2.0;
    return v == 0.0 ? 0.5 : v;
}

/* ---- buffers and views ------------------------------------------------------ */

typedef struct tbuf {
    const char *name;
    int dtype;
    size_t esize;
    int64_t storage;            /* elements between the guards */
    size_t bytes;               /* 2 * GUARD_BYTES + storage * esize */
    unsigned char *before;      /* the image uploaded */
    unsigned char *after;       /* the image read back after the op */
    unsigned char *written;     /* per storage element: 1 = an output view covers it */
    void *dev;
} tbuf;

typedef struct tview {
    tbuf *buf;
    int ndim;
    int64_t shape[4];
    int64_t stride[4];
    int64_t offset;             /* elements from the storage start */
} tview;

/* One case's state. */
typedef struct trun {
    kf_ctx *ctx;
    FILE *out;
    int verbose;
    rng rng;
    tbuf bufs[MAX_BUFS];
    int nbufs;
    double *dense[MAX_DENSE];
    int ndense;
    char desc[320];
    int failed;
    double max_rel;
    const double *atol_elem;    /* NULL, or per element: added to the dtype's atol in the
                                   next compare (LayerNorm rows' mean rounding) */
    int setup_error;            /* the harness itself could not run (allocation) */
} trun;

static unsigned char guard_byte(size_t i)
{
    return (i & 1) ? 0xFF : 0xFD;   /* 0xFFFD.. : NaN in f32 / f16 / bf16 */
}

static double *dense_new(trun *t, int64_t n)
{
    double *p = (double *)calloc((size_t)(n > 0 ? n : 1), sizeof(double));
    if (!p || t->ndense >= MAX_DENSE) {
        free(p);
        t->setup_error = 1;
        static double dummy[1];
        return dummy;
    }
    t->dense[t->ndense++] = p;
    return p;
}

static int64_t view_numel(const tview *v)
{
    int64_t n = 1;
    for (int i = 0; i < v->ndim; i++)
        n *= v->shape[i];
    return n;
}

static int64_t view_extent(const tview *v)
{
    int64_t e = v->offset + 1;
    for (int i = 0; i < v->ndim; i++)
        e += (v->shape[i] - 1) * v->stride[i];
    return e;
}

/* A new buffer holding exactly view v (v's buf is set). */
static tview view_alloc(trun *t, const char *name, int dtype, int ndim, const int64_t *shape,
                        const int64_t *stride, int64_t offset)
{
    tview v;
    memset(&v, 0, sizeof v);
    v.ndim = ndim;
    for (int i = 0; i < ndim; i++) {
        v.shape[i] = shape[i];
        v.stride[i] = stride[i];
    }
    v.offset = offset;
    if (t->nbufs >= MAX_BUFS) {
        t->setup_error = 1;
        return v;
    }
    tbuf *b = &t->bufs[t->nbufs++];
    memset(b, 0, sizeof *b);
    b->name = name;
    b->dtype = dtype;
    b->esize = kf_dtype_size((kf_dtype)dtype);
    b->storage = view_extent(&v);
    b->bytes = 2 * GUARD_BYTES + (size_t)b->storage * b->esize;
    b->before = (unsigned char *)malloc(b->bytes);
    b->after = (unsigned char *)malloc(b->bytes);
    b->written = (unsigned char *)calloc((size_t)b->storage, 1);
    if (!b->before || !b->after || !b->written) {
        t->setup_error = 1;
        return v;
    }
    for (size_t i = 0; i < GUARD_BYTES; i++) {
        b->before[i] = guard_byte(i);
        b->before[b->bytes - GUARD_BYTES + i] = guard_byte(i + 1);
    }
    memset(b->before + GUARD_BYTES, 0xFF, (size_t)b->storage * b->esize);
    v.buf = b;
    return v;
}

/* Contiguous-rows view: shape[ndim-1] = D columns, row stride D + pad, start
 * offset `misalign` elements. */
static tview rows_alloc(trun *t, const char *name, int dtype, int ndim, const int64_t *shape,
                        int64_t pad, int64_t misalign)
{
    int64_t stride[4];
    stride[ndim - 1] = 1;
    int64_t s = shape[ndim - 1] + pad;
    for (int i = ndim - 2; i >= 0; i--) {
        stride[i] = s;
        s *= shape[i];
    }
    return view_alloc(t, name, dtype, ndim, shape, stride, misalign);
}

/* A vector of n elements starting `offset` elements into its buffer (a
 * parameter sliced out of a larger one starts anywhere). */
static tview vec_alloc_at(trun *t, const char *name, int dtype, int64_t n, int64_t offset)
{
    int64_t shape[1] = {n}, stride[1] = {1};
    return view_alloc(t, name, dtype, 1, shape, stride, offset);
}

static tview vec_alloc(trun *t, const char *name, int dtype, int64_t n)
{
    return vec_alloc_at(t, name, dtype, n, 0);
}

/* Storage offset of every logical element of v (row-major over v's shape). */
static int64_t *view_offsets(const tview *v)
{
    int64_t n = view_numel(v);
    int64_t *offs = (int64_t *)malloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t));
    if (!offs)
        return NULL;
    int64_t sh[4] = {1, 1, 1, 1}, st[4] = {0, 0, 0, 0};
    int pad = 4 - v->ndim;
    for (int i = 0; i < v->ndim; i++) {
        sh[pad + i] = v->shape[i];
        st[pad + i] = v->stride[i];
    }
    int64_t k = 0;
    for (int64_t a = 0; a < sh[0]; a++)
        for (int64_t b = 0; b < sh[1]; b++)
            for (int64_t c = 0; c < sh[2]; c++) {
                int64_t base = v->offset + a * st[0] + b * st[1] + c * st[2];
                for (int64_t d = 0; d < sh[3]; d++)
                    offs[k++] = base + d * st[3];
            }
    return offs;
}

static void *storage_of(const tbuf *b, const unsigned char *image)
{
    return (void *)(image + GUARD_BYTES);
}

/* Fill v with center + spread * normal-ish values rounded to its dtype;
 * dense (numel of v) gets the values as stored. Broadcast views (stride 0)
 * get one value per storage element. */
static void fill_random(trun *t, const tview *v, double center, double spread, double *dense)
{
    if (!v->buf)
        return;
    tbuf *b = v->buf;
    int64_t n = view_numel(v);
    int64_t *offs = view_offsets(v);
    if (!offs) {
        t->setup_error = 1;
        return;
    }
    void *st = storage_of(b, b->before);
    unsigned char *assigned = b->written;   /* borrowed, cleared below */
    for (int64_t i = 0; i < n; i++) {
        int64_t o = offs[i];
        if (!assigned[o]) {
            kft_store(st, b->dtype, o, center + spread * rng_normalish(&t->rng));
            assigned[o] = 1;
        }
        dense[i] = kft_load(st, b->dtype, o);
    }
    for (int64_t i = 0; i < n; i++)
        assigned[offs[i]] = 0;
    free(offs);
}

/* Store given values (rounded to v's dtype) into v; dense gets them as stored. */
static void fill_values(trun *t, const tview *v, double *dense)
{
    if (!v->buf)
        return;
    int64_t n = view_numel(v);
    int64_t *offs = view_offsets(v);
    if (!offs) {
        t->setup_error = 1;
        return;
    }
    void *st = storage_of(v->buf, v->buf->before);
    for (int64_t i = 0; i < n; i++) {
        kft_store(st, v->buf->dtype, offs[i], dense[i]);
        dense[i] = kft_load(st, v->buf->dtype, offs[i]);
    }
    free(offs);
}

/* Store value (NaN / Inf kept) at logical element i of v (offs: view_offsets(v)). */
static void put_value(const tview *v, const int64_t *offs, int64_t i, double value)
{
    kft_store(storage_of(v->buf, v->buf->before), v->buf->dtype, offs[i], value);
}

/* dense = v's values as stored (every alias of a stride-0 element too). */
static void reload_dense(const tview *v, const int64_t *offs, double *dense)
{
    const void *st = storage_of(v->buf, v->buf->before);
    int64_t n = view_numel(v);
    for (int64_t j = 0; j < n; j++)
        dense[j] = kft_load(st, v->buf->dtype, offs[j]);
}

/* Set logical element i of v to value (NaN / Inf kept); dense follows. One
 * pass over v: for a few elements (put_specials sets many at once). */
static void set_value(const tview *v, int64_t i, double value, double *dense)
{
    int64_t *offs = view_offsets(v);
    if (!offs)
        return;
    put_value(v, offs, i, value);
    reload_dense(v, offs, dense);
    free(offs);
}

/* Gather v broadcast (right-aligned, size-1 dims repeat) to the target shape. */
static void gather_expanded(const tview *v, const unsigned char *image, int ndim,
                            const int64_t *shape, double *dense)
{
    int64_t sh[4] = {1, 1, 1, 1}, vst[4] = {0, 0, 0, 0};
    int pad = 4 - ndim, vpad = 4 - v->ndim;
    for (int i = 0; i < ndim; i++)
        sh[pad + i] = shape[i];
    for (int i = 0; i < v->ndim; i++)
        vst[vpad + i] = v->shape[i] == 1 ? 0 : v->stride[i];
    const void *st = storage_of(v->buf, image);
    int64_t k = 0;
    for (int64_t a = 0; a < sh[0]; a++)
        for (int64_t b = 0; b < sh[1]; b++)
            for (int64_t c = 0; c < sh[2]; c++) {
                int64_t base = v->offset + a * vst[0] + b * vst[1] + c * vst[2];
                for (int64_t d = 0; d < sh[3]; d++)
                    dense[k++] = kft_load(st, v->buf->dtype, base + d * vst[3]);
            }
}

static kf_tensor tensor_of(const tview *v)
{
    kf_tensor x;
    memset(&x, 0, sizeof x);
    x.data = (unsigned char *)v->buf->dev + GUARD_BYTES + (size_t)v->offset * v->buf->esize;
    x.dtype = v->buf->dtype;
    x.ndim = v->ndim;
    for (int i = 0; i < v->ndim; i++) {
        x.shape[i] = v->shape[i];
        x.stride[i] = v->stride[i];
    }
    return x;
}

static void case_fail(trun *t, const char *fmt, const char *detail)
{
    if (!t->failed)
        fprintf(t->out, "FAIL %s\n", t->desc);
    t->failed = 1;
    fprintf(t->out, "     %s%s\n", fmt, detail ? detail : "");
}

static int upload_all(trun *t)
{
    for (int i = 0; i < t->nbufs; i++) {
        tbuf *b = &t->bufs[i];
        kf_status st = kf_malloc(t->ctx, b->bytes, &b->dev);
        if (st != KF_OK) {
            b->dev = NULL;
            t->setup_error = 1;
            return 0;
        }
        st = kf_memcpy(t->ctx, b->dev, b->before, b->bytes, 1);
        if (st != KF_OK) {
            t->setup_error = 1;
            return 0;
        }
    }
    return 1;
}

static int download_all(trun *t)
{
    if (kf_synchronize(t->ctx) != KF_OK) {
        case_fail(t, "synchronize failed: ", kf_last_error(t->ctx));
        return 0;
    }
    for (int i = 0; i < t->nbufs; i++) {
        tbuf *b = &t->bufs[i];
        if (kf_memcpy(t->ctx, b->after, b->dev, b->bytes, 0) != KF_OK) {
            case_fail(t, "reading back a buffer failed: ", kf_last_error(t->ctx));
            return 0;
        }
    }
    return 1;
}

/* Output view v as dense values; marks its elements written. */
static void read_output(trun *t, const tview *v, double *dense)
{
    int64_t n = view_numel(v);
    int64_t *offs = view_offsets(v);
    if (!offs) {
        t->setup_error = 1;
        return;
    }
    const void *st = storage_of(v->buf, v->buf->after);
    for (int64_t i = 0; i < n; i++) {
        dense[i] = kft_load(st, v->buf->dtype, offs[i]);
        v->buf->written[offs[i]] = 1;
    }
    free(offs);
}

/* Every byte no output covers must be as uploaded. */
static void check_untouched(trun *t)
{
    for (int i = 0; i < t->nbufs; i++) {
        tbuf *b = &t->bufs[i];
        char msg[200];
        for (size_t k = 0; k < GUARD_BYTES; k++) {
            if (b->after[k] != b->before[k]) {
                snprintf(msg, sizeof msg, "%s: guard byte %d before the buffer was overwritten",
                         b->name, (int)(GUARD_BYTES - k));
                case_fail(t, msg, NULL);
                break;
            }
        }
        for (size_t k = b->bytes - GUARD_BYTES; k < b->bytes; k++) {
            if (b->after[k] != b->before[k]) {
                snprintf(msg, sizeof msg, "%s: guard byte %d after the buffer was overwritten",
                         b->name, (int)(k - (b->bytes - GUARD_BYTES)));
                case_fail(t, msg, NULL);
                break;
            }
        }
        for (int64_t e = 0; e < b->storage; e++) {
            if (b->written[e])
                continue;
            size_t at = GUARD_BYTES + (size_t)e * b->esize;
            if (memcmp(b->after + at, b->before + at, b->esize) != 0) {
                snprintf(msg, sizeof msg,
                         "%s: storage element %lld changed but is no output element (%s)",
                         b->name, (long long)e, "gap, or an input that must stay unchanged");
                case_fail(t, msg, NULL);
                break;
            }
        }
    }
}

/* Compare one output (n values, rows of D) with the reference. */
static void compare(trun *t, const char *name, int dtype, const double *out, const double *ref,
                    int64_t n, int64_t D)
{
    kft_tolerance tol = kft_tolerance_for(dtype);
    double diff_sq = 0.0, ref_sq = 0.0, max_abs = 0.0, extra_sq = 0.0;
    int64_t max_at = -1, bad = 0, first_bad = -1, special_bad = 0, first_special = -1;
    for (int64_t i = 0; i < n; i++) {
        double o = out[i], r = ref[i];
        if (isnan(r) || isinf(r)) {
            int same = isnan(r) ? isnan(o) : (o == r);
            if (!same) {
                special_bad++;
                if (first_special < 0)
                    first_special = i;
            }
            continue;
        }
        if (!isfinite(o)) {
            bad++;
            if (first_bad < 0)
                first_bad = i;
            max_abs = INFINITY;
            max_at = i;
            diff_sq = INFINITY;
            continue;
        }
        double d = fabs(o - r);
        double extra = t->atol_elem ? t->atol_elem[i] : 0.0;
        diff_sq += d * d;
        ref_sq += r * r;
        extra_sq += extra * extra;
        if (d > max_abs) {
            max_abs = d;
            max_at = i;
        }
        if (d > tol.atol + extra + tol.rtol * fabs(r)) {
            bad++;
            if (first_bad < 0)
                first_bad = i;
        }
    }
    double rel = ref_sq > 0.0 ? sqrt(diff_sq / ref_sq) : sqrt(diff_sq);
    if (rel > t->max_rel || isnan(rel))
        t->max_rel = rel;
    /* the norm-wise bound widens by the allowance's own norm */
    tol.rel_norm += ref_sq > 0.0 ? sqrt(extra_sq / ref_sq) : sqrt(extra_sq);
    int ok = bad == 0 && special_bad == 0 && rel <= tol.rel_norm;
    if (t->verbose || !ok) {
        char msg[400];
        if (max_at >= 0)
            snprintf(msg, sizeof msg,
                     "%s: rel err %.3g (tol %.0e), max abs err %.3g at row %lld col %lld "
                     "(out %.8g, ref %.8g); %lld of %lld elements outside atol+rtol*|ref|",
                     name, rel, tol.rel_norm, max_abs, (long long)(max_at / D),
                     (long long)(max_at % D), out[max_at], ref[max_at], (long long)bad,
                     (long long)n);
        else
            snprintf(msg, sizeof msg, "%s: rel err %.3g (no finite reference values)", name, rel);
        if (!ok)
            case_fail(t, msg, NULL);
        else
            fprintf(t->out, "     %s\n", msg);
    }
    if (!ok && first_bad >= 0 && first_bad != max_at) {
        char msg[200];
        snprintf(msg, sizeof msg, "%s: first bad element at row %lld col %lld (out %.8g, ref %.8g)",
                 name, (long long)(first_bad / D), (long long)(first_bad % D), out[first_bad],
                 ref[first_bad]);
        case_fail(t, msg, NULL);
    }
    if (special_bad) {
        char msg[200];
        snprintf(msg, sizeof msg,
                 "%s: %lld NaN/Inf mismatches, first at row %lld col %lld (out %g, ref %g)", name,
                 (long long)special_bad, (long long)(first_special / D),
                 (long long)(first_special % D), out[first_special], ref[first_special]);
        case_fail(t, msg, NULL);
    }
}

static void run_free(trun *t)
{
    for (int i = 0; i < t->nbufs; i++) {
        tbuf *b = &t->bufs[i];
        if (b->dev)
            kf_free(t->ctx, b->dev);
        free(b->before);
        free(b->after);
        free(b->written);
    }
    t->nbufs = 0;
    for (int i = 0; i < t->ndense; i++)
        free(t->dense[i]);
    t->ndense = 0;
}

/* ---- cases -------------------------------------------------------------- */

/* conditioning layouts: per token [B,S,D]; per batch as an unbind view [B,1,D]
 * of a [B,1,6,D] tensor (batch stride 6D); per batch expanded to [B,S,D] with
 * token stride 0; per batch as its own contiguous [B,1,D] tensor */
enum { COND_TOKEN = 0, COND_UNBIND = 1, COND_BCAST = 2, COND_BATCH = 3 };
enum { ROPE_TABLE_S = 0, ROPE_TABLE_BS = 1, ROPE_POSITIONS = 2 };

typedef struct tcase {
    kf_op op;
    int dtype;
    int64_t B, S, D;            /* rows = B*S, D columns (glu: I) */
    int ndim;                   /* row ops: 2 [B*S, D], 3 [B, S, D], 4 [B, S, 1, D] */
    int64_t pad;                /* extra elements per row of the activations */
    int outer;                  /* row ops, ndim >= 3: activations' outer dims row-major
                                   (0), B and S swapped in memory (1), a gap after
                                   each batch (2), inputs the op only reads broadcast
                                   over B (3: batch stride 0; written ones row-major) */
    int64_t misalign;           /* start offset (elements) of the activations */
    int in_place;
    int specials;               /* rows holding NaN / Inf */
    double x_center;            /* row ops, gelu, glu's gate: x drawn around this value
                                   (default 0) */
    int spike_rows;             /* softmax: every x 0 but each row's first, 0.3 */
    int wdtype;                 /* weight (and bias) dtype, -1 = absent */
    int bias;                   /* layer_norm: bias present */
    int mode;                   /* kf_rms_mode / kf_norm_kind / kf_activation / convention */
    float offset, eps, scale;
    int cond, cdtype;           /* ada / gated: conditioning layout and dtype */
    int shift, gate;            /* present */
    int shift_unbind;           /* shift per batch (COND_UNBIND) whatever cond says */
    int packed, gate_first, approx;
    int rms_mode;               /* rms_norm_rope */
    /* rope */
    int64_t H, Hk, Dh;
    int rot;                    /* rotary_dim passed (0 = head_dim) */
    int form, n_axes, axis_given, big_pos, zero_freqs, hf_layout, tdtype;
    int pos_shared;             /* positions form, B > 1: [S, n] for every batch */
    int pos_grid;               /* positions form, n > 1 axes: a video grid (coordinates
                                   repeat over runs of tokens), not random per token */
    int64_t param_offset;       /* weight (bias + 1) starts this many elements into its buffer */
    int64_t cond_pad;           /* per-token conditioning rows: padding of their own */
    int tab_bcast;              /* table [B, S, r] form: one table, batch stride 0 */
    int bad_axis;               /* positions form with an axis map, some entries out of range */
} tcase;

static const char *mode_name(const tcase *c)
{
    static const char *rms[] = {"llama", "gemma", "none"};
    static const char *act[] = {"silu", "gelu_tanh", "gelu_erf"};
    switch (c->op) {
    case KF_OP_RMS_NORM:
    case KF_OP_ADD_RMS_NORM: return rms[c->mode];
    case KF_OP_ADA_NORM:
    case KF_OP_ADD_ADA_NORM: return c->mode == KF_NORM_LAYER ? "layer" : "rms";
    case KF_OP_GLU: return act[c->mode];
    case KF_OP_GELU: return c->approx ? "tanh" : "erf";
    case KF_OP_ROPE:
    case KF_OP_RMS_NORM_ROPE: return c->mode == KF_ROPE_HALF ? "half" : "interleaved";
    default: return "";
    }
}

static void describe(const tcase *c, char *s, size_t n)
{
    const char *dt = kf_dtype_name((kf_dtype)c->dtype);
    int k;
    if (c->op == KF_OP_ROPE || c->op == KF_OP_RMS_NORM_ROPE) {
        static const char *forms[] = {"table[S,r]", "table[B,S,r]", "positions"};
        k = snprintf(s, n, "%s %s [B=%lld S=%lld H=%lld Dh=%lld] %s r=%d %s", kf_op_name(c->op),
                     dt, (long long)c->B, (long long)c->S, (long long)c->H, (long long)c->Dh,
                     mode_name(c), c->rot, forms[c->form]);
        if (c->form != ROPE_POSITIONS)
            k += snprintf(s + k, n - k, " tab=%s", kf_dtype_name((kf_dtype)c->tdtype));
        else
            k += snprintf(s + k, n - k, " axes=%d%s%s%s", c->n_axes, c->axis_given ? " axis" : "",
                          c->big_pos ? " pos<=1e5" : "", c->pos_grid ? " grid" : "");
        if (c->zero_freqs)
            k += snprintf(s + k, n - k, " zero-freqs");
        if (c->Hk)
            k += snprintf(s + k, n - k, " k:Hk=%lld", (long long)c->Hk);
        if (c->hf_layout)
            k += snprintf(s + k, n - k, " [B,H,S,Dh]-strides");
        if (c->pos_shared && c->form == ROPE_POSITIONS)
            k += snprintf(s + k, n - k, " positions[S,n]");
        if (c->tab_bcast && c->form == ROPE_TABLE_BS)
            k += snprintf(s + k, n - k, " table-batch-stride-0");
        if (c->bad_axis)
            k += snprintf(s + k, n - k, " bad-axis-entries");
        if (c->op == KF_OP_RMS_NORM_ROPE) {
            static const char *rms[] = {"llama", "gemma", "none"};
            k += snprintf(s + k, n - k, " rms=%s w=%s", rms[c->rms_mode],
                          c->wdtype < 0 ? "none" : kf_dtype_name((kf_dtype)c->wdtype));
        }
        if (c->offset != 0.0f)
            k += snprintf(s + k, n - k, " offset=%g", (double)c->offset);
    } else {
        int64_t rows = c->B * c->S;
        k = snprintf(s, n, "%s %s [%lldx%lld] ndim=%d", kf_op_name(c->op), dt, (long long)rows,
                     (long long)c->D, c->ndim);
        if (c->B > 1)
            k += snprintf(s + k, n - k, " B=%lld", (long long)c->B);
        if (*mode_name(c))
            k += snprintf(s + k, n - k, " %s", mode_name(c));
        if (c->op == KF_OP_RMS_NORM || c->op == KF_OP_ADD_RMS_NORM || c->op == KF_OP_LAYER_NORM ||
            c->op == KF_OP_ADA_NORM || c->op == KF_OP_ADD_ADA_NORM)
            k += snprintf(s + k, n - k, " w=%s eps=%g",
                          c->wdtype < 0 ? "none" : kf_dtype_name((kf_dtype)c->wdtype),
                          (double)c->eps);
        if (c->offset != 0.0f)
            k += snprintf(s + k, n - k, " offset=%g", (double)c->offset);
        if (c->bias)
            k += snprintf(s + k, n - k, " bias");
        if (c->x_center != 0.0)
            k += snprintf(s + k, n - k, " x around %g", c->x_center);
        if (c->spike_rows)
            k += snprintf(s + k, n - k, " x 0 but x[0] 0.3");
        if (c->op == KF_OP_ADA_NORM || c->op == KF_OP_ADD_ADA_NORM ||
            c->op == KF_OP_GATED_RESIDUAL) {
            static const char *conds[] = {"per-token", "per-batch[B,1,D] stride 6D",
                                          "per-batch[B,S,D] stride (6D,0)", "per-batch[B,1,D]"};
            k += snprintf(s + k, n - k, " cond=%s %s%s%s%s", conds[c->cond],
                          kf_dtype_name((kf_dtype)c->cdtype), c->shift ? " shift" : "",
                          c->shift_unbind ? " (per-batch)" : "", c->gate ? " gate" : "");
        }
        if (c->op == KF_OP_GLU)
            k += snprintf(s + k, n - k, c->packed ? " packed gate_first=%d" : " two-tensor",
                          c->gate_first);
        if (c->op == KF_OP_SOFTMAX)
            k += snprintf(s + k, n - k, " scale=%g", (double)c->scale);
    }
    if (c->param_offset)
        k += snprintf(s + k, n - k, " params+%lld", (long long)c->param_offset);
    if (c->cond_pad)
        k += snprintf(s + k, n - k, " cond-pad=%lld", (long long)c->cond_pad);
    if (c->outer)
        k += snprintf(s + k, n - k, "%s",
                      c->outer == 1 ? " S-major" : c->outer == 2 ? " batch-gap"
                                                                 : " inputs-batch-stride-0");
    if (c->pad)
        k += snprintf(s + k, n - k, " row-pad=%lld", (long long)c->pad);
    if (c->misalign)
        k += snprintf(s + k, n - k, " start+%lld", (long long)c->misalign);
    if (c->in_place)
        k += snprintf(s + k, n - k, " in-place");
    if (c->specials)
        k += snprintf(s + k, n - k, " nan/inf-rows");
}

/* Activation shape of a row-op case. */
static int act_shape(const tcase *c, int64_t D, int64_t *shape)
{
    if (c->ndim == 2) {
        shape[0] = c->B * c->S;
        shape[1] = D;
        return 2;
    }
    shape[0] = c->B;
    shape[1] = c->S;
    if (c->ndim == 4) {
        shape[2] = 1;
        shape[3] = D;
        return 4;
    }
    shape[2] = D;
    return 3;
}

/* An activation of the case's layout; read_only: the op only reads it (so it
 * may repeat rows through stride 0). */
static tview act_alloc(trun *t, const char *name, const tcase *c, int64_t D, int64_t pad,
                       int64_t misalign, int read_only)
{
    int64_t shape[4];
    int nd = act_shape(c, D, shape);
    if (!c->outer || nd < 3 || (c->outer == 3 && !read_only))
        return rows_alloc(t, name, c->dtype, nd, shape, pad, misalign);
    /* [B, S, (1,) D] with rows D + pad apart in S-major memory (outer 1:
     * batch b's row s at (s B + b)) or with a gap after each batch (outer
     * 2); the size-1 dim of ndim 4 takes a stride no kernel may use */
    int64_t stride[4], rs = D + pad;
    stride[nd - 1] = 1;
    if (nd == 4)
        stride[2] = 3 * rs + 1;
    if (c->outer == 1) {
        stride[0] = rs;
        stride[1] = c->B * rs;
    } else if (c->outer == 3) {
        stride[0] = 0;
        stride[1] = rs;
    } else {
        stride[1] = rs;
        stride[0] = c->S * rs + 5 + 3 * pad;
    }
    return view_alloc(t, name, c->dtype, nd, shape, stride, misalign);
}

/* v, every element set to OUTPUT_POISON: an output of its own buffer. */
static tview poisoned(trun *t, tview v)
{
    if (!v.buf)
        return v;
    int64_t *offs = view_offsets(&v);
    if (!offs) {
        t->setup_error = 1;
        return v;
    }
    for (int64_t i = 0, n = view_numel(&v); i < n; i++)
        put_value(&v, offs, i, OUTPUT_POISON);
    free(offs);
    return v;
}

/* The output view: x itself in place, else its own buffer with a different
 * row pad (a kernel must not use x's strides for y), poisoned. */
static tview out_alloc(trun *t, const char *name, const tcase *c, const tview *x, int64_t D)
{
    if (c->in_place)
        return *x;
    return poisoned(t, act_alloc(t, name, c, D, c->pad ? c->pad + 3 : 0, c->misalign, 0));
}

/* NaN / Inf in some rows (rows >= 3): row 1 NaN, row 3 +Inf, row 4 -Inf. Softmax:
 * row 2 half masked (-inf), row 4 fully -inf. */
static void put_specials(const tview *v, double *dense, int64_t rows, int64_t D, int softmax)
{
    int64_t *offs = view_offsets(v);
    if (!offs)
        return;
    if (rows >= 3)
        put_value(v, offs, 1 * D + D / 2, NAN);
    if (rows >= 4)
        put_value(v, offs, 3 * D + 0, INFINITY);
    if (rows >= 5) {
        if (softmax) {
            for (int64_t i = 0; i < D; i++)
                put_value(v, offs, 4 * D + i, -INFINITY);
            for (int64_t i = 0; i < D / 2; i++)
                put_value(v, offs, 2 * D + 2 * i, -INFINITY);
        } else {
            put_value(v, offs, 4 * D + D - 1, -INFINITY);
        }
    }
    reload_dense(v, offs, dense);
    free(offs);
}

static tview cond_alloc(trun *t, const char *name, const tcase *c, int chunk, int cond)
{
    int64_t B = c->B, S = c->S, D = c->D;
    if (cond == COND_TOKEN || cond == COND_BATCH) {
        int64_t shape[3] = {B, cond == COND_TOKEN ? S : 1, D};
        return rows_alloc(t, name, c->cdtype, 3, shape, c->cond_pad ? c->cond_pad : c->pad,
                          c->misalign);
    }
    int64_t shape[3] = {B, cond == COND_UNBIND ? 1 : S, D};
    int64_t stride[3] = {6 * D, cond == COND_UNBIND ? 6 * D : 0, 1};
    return view_alloc(t, name, c->cdtype, 3, shape, stride, chunk * D + c->misalign);
}

static int call_ok(trun *t, kf_status st)
{
    if (st == KF_OK)
        return 1;
    char msg[KF_ERRMSG_LEN + 64];
    snprintf(msg, sizeof msg, "the op returned %s: %s", kf_status_string(st),
             kf_last_error(t->ctx));
    case_fail(t, msg, NULL);
    return 0;
}

static double weight_center(const tcase *c, int rms_mode)
{
    return rms_mode == KF_RMS_GEMMA ? 0.0 : 1.0;
}

/* ---- per-op runners ------------------------------------------------------- */

/* The error a LayerNorm row's f32 mean carries into its outputs, per element.
 * A kernel that keeps the mean m in f32 (PyTorch's included) holds it to
 * half an f32 ulp plus its sum's rounding, which scales with the row's
 * mean |x|; every output inherits that times rstd |w (1 + scale)|. In rows
 * of spread ~1 and |x| ~1 that is ~1e-7, far under the f32 atol; it is not
 * in ill-conditioned rows: values around a large c (x around 32: 2^-24 x 32
 * x rstd |w (1 + scale)| ~ 1e-5 and more), or a tiny variance against eps
 * (D = 2 rows whose two values nearly agree: rstd up to 1 / sqrt(eps)).
 * Those elements are allowed 8 x 2^-24 mean|x| rstd |w (1 + scale)| more,
 * in 16-bit rows only: f32 rows are held to the plain tolerance (the GPU's
 * second pass corrects its f32 mean, norm.cu KF_LN_MEAN_LO).
 * A variance lost to cancellation (E[x^2] - E[x]^2) still fails where it
 * matters: its error grows as m^2 rstd^2, this allowance as m rstd (the
 * rows around 32 are 2x over it). x: the rows as normalized; w, scale:
 * dense or NULL. Rows with NaN / Inf get no allowance. */
static double *mean_rounding_atol(trun *t, const double *x, int64_t rows, int64_t D,
                                  float eps, const double *w, const double *scale)
{
    double *a = dense_new(t, rows * D);
    if (t->setup_error)
        return NULL;
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + r * D;
        double sum = 0.0, abs_sum = 0.0;
        for (int64_t j = 0; j < D; j++) {
            sum += xr[j];
            abs_sum += fabs(xr[j]);
        }
        if (!isfinite(sum) || !isfinite(abs_sum))
            continue;
        double mean = sum / (double)D, var = 0.0;
        for (int64_t j = 0; j < D; j++)
            var += (xr[j] - mean) * (xr[j] - mean);
        double rstd = 1.0 / sqrt(var / (double)D + (double)eps);
        double base = 8.0 * 0x1p-24 * (abs_sum / (double)D) * rstd;
        for (int64_t j = 0; j < D; j++) {
            double g = (w ? fabs(w[j]) : 1.0) * (scale ? fabs(1.0 + scale[r * D + j]) : 1.0);
            a[r * D + j] = base * g;
        }
    }
    return a;
}

/* The error of a norm output whose last step adds a bias or shift b to the
 * scaled value v (y = v + b, f32 arithmetic): a few f32 rounding units of v
 * and of b, however small y is. Where v and b nearly cancel (a D = 1 RMS row,
 * v = +-w (1 + scale), against a shift of about -v) that is far over y's own
 * tolerance, and the norm-wise bound of such a row would fail a correct
 * kernel. Each element is allowed 8 x 2^-24 (|v| + |b|) more, v = ref - b
 * (added to a, or to a new array when a is NULL); away from cancellation
 * this stays under every dtype's rtol, so it widens nothing else. bias: per
 * column, shift: dense, either NULL. */
static double *add_rounding_atol(trun *t, double *a, const double *ref, int64_t rows, int64_t D,
                                 const double *bias, const double *shift)
{
    if (!bias && !shift)
        return a;
    if (!a) {
        a = dense_new(t, rows * D);
        if (t->setup_error)
            return NULL;
    }
    for (int64_t i = 0; i < rows * D; i++) {
        double b = (bias ? bias[i % D] : 0.0) + (shift ? shift[i] : 0.0);
        double v = ref[i] - b;
        if (isfinite(v) && isfinite(b))
            a[i] += 8.0 * 0x1p-24 * (fabs(v) + fabs(b));
    }
    return a;
}

/* A rounding inside an op (llama rows round the normalized value, the add
 * ops normalize their stored, rounded sum) moves a 16-bit output by about an
 * ulp, inside the tolerance: compare() passes an op that skips it, or one that
 * rounds where the contract says not to. ref is the contract's reference, alt
 * the one with that inner rounding the other way. Where the two round to
 * different outputs, the output must be ref's rounding in most of them and
 * alt's in few (an op computing in f32 lands on the other side of a near tie
 * now and then). Fewer than 32 such elements tell nothing and pass. */
static void check_inner_rounding(trun *t, const char *name, int dtype, const double *out,
                                 const double *ref, const double *alt, int64_t n)
{
    int64_t differ = 0, as_ref = 0, as_alt = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(ref[i]) || !isfinite(alt[i]))
            continue;
        double rr = kft_round(dtype, ref[i]), ra = kft_round(dtype, alt[i]);
        if (rr == ra)
            continue;
        differ++;
        as_ref += out[i] == rr;
        as_alt += out[i] == ra;
    }
    if (t->verbose)
        fprintf(t->out, "     %s: inner rounding: %lld outputs tell, %lld as the contract, %lld as the other way\n",
                name, (long long)differ, (long long)as_ref, (long long)as_alt);
    if (differ >= 32 && (as_ref < differ / 2 || as_ref < 4 * as_alt)) {
        char msg[300];
        snprintf(msg, sizeof msg,
                 "%s: of %lld outputs that an inner rounding decides, %lld match the contract's "
                 "reference and %lld the one rounding the other way",
                 name, (long long)differ, (long long)as_ref, (long long)as_alt);
        case_fail(t, msg, NULL);
    }
}

/* check_inner_rounding for the norm ops' 16-bit rows: rms rows (llama
 * rounds the normalized value, none and gemma do not: alt rounds it, gemma's
 * weight as offset + w) and the add ops (alt normalizes the unrounded sum). */
static void check_norm_inner_rounding(trun *t, const tcase *c, const double *xd,
                                      const double *resd, const double *wd,
                                      const double *scaled, const double *shiftd,
                                      const double *gated, const double *out, const double *ref)
{
    int64_t rows = c->B * c->S, D = c->D, n = rows * D;
    if (c->op != KF_OP_RMS_NORM && c->op != KF_OP_ADD_RMS_NORM && c->op != KF_OP_ADD_ADA_NORM)
        return;
    double *alt = dense_new(t, n);
    double *sum = c->op == KF_OP_RMS_NORM ? NULL : dense_new(t, n);
    if (t->setup_error)
        return;
    if (c->op == KF_OP_RMS_NORM) {
        if (c->mode == KF_RMS_LLAMA) {
            kft_ref_rms_norm(xd, rows, D, wd, c->eps, c->mode, c->offset, KF_F32, alt);
        } else {
            double *w_eff = NULL;
            if (wd) {
                w_eff = dense_new(t, D);
                if (t->setup_error)
                    return;
                for (int64_t i = 0; i < D; i++)
                    w_eff[i] = c->mode == KF_RMS_GEMMA ? c->offset + wd[i] : wd[i];
            }
            kft_ref_rms_norm(xd, rows, D, w_eff, c->eps, KF_RMS_LLAMA, 0.0, c->dtype, alt);
        }
    } else if (c->op == KF_OP_ADD_RMS_NORM) {
        for (int64_t i = 0; i < n; i++)
            sum[i] = xd[i] + resd[i];
        kft_ref_rms_norm(sum, rows, D, wd, c->eps, c->mode, c->offset, c->dtype, alt);
    } else if (c->op == KF_OP_ADD_ADA_NORM) {
        for (int64_t i = 0; i < n; i++)
            sum[i] = gated ? xd[i] + resd[i] * gated[i] : xd[i] + resd[i];
        kft_ref_ada_norm(sum, rows, D, scaled, shiftd, wd, c->eps, c->mode, alt);
    }
    check_inner_rounding(t, "y", c->dtype, out, ref, alt, n);
}

static void run_norm_ops(trun *t, const tcase *c)
{
    int64_t rows = c->B * c->S, D = c->D, n = rows * D;
    int64_t xshape[4];
    int nd = act_shape(c, D, xshape);
    int h_is_x = c->op == KF_OP_ADD_ADA_NORM || c->op == KF_OP_GATED_RESIDUAL;
    tview x = act_alloc(t, h_is_x ? "h" : "x", c, D, c->pad, c->misalign, !h_is_x && !c->in_place);
    double *xd = dense_new(t, n);
    fill_random(t, &x, c->x_center, 1.0, xd);
    if (c->specials)
        put_specials(&x, xd, rows, D, 0);

    tview res = {0}, w = {0}, b = {0}, scale = {0}, shift = {0}, gate = {0};
    double *resd = NULL, *wd = NULL, *bd = NULL, *scaled = NULL, *shiftd = NULL, *gated = NULL;
    int rms_mode = (c->op == KF_OP_RMS_NORM || c->op == KF_OP_ADD_RMS_NORM) ? c->mode : -1;
    if (c->op == KF_OP_ADD_RMS_NORM || c->op == KF_OP_ADD_ADA_NORM ||
        c->op == KF_OP_GATED_RESIDUAL) {
        /* the second addend (residual / a); for the add_ada and gated ops x is h */
        res = act_alloc(t, c->op == KF_OP_ADD_RMS_NORM ? "residual" : "a", c, D,
                        c->pad ? c->pad + 1 : 0, c->misalign, c->op != KF_OP_ADD_RMS_NORM);
        resd = dense_new(t, n);
        fill_random(t, &res, 0.0, 1.0, resd);
    }
    if (c->wdtype >= 0 && c->op != KF_OP_GATED_RESIDUAL) {
        w = vec_alloc_at(t, "weight", c->wdtype, D, c->param_offset);
        wd = dense_new(t, D);
        fill_random(t, &w, weight_center(c, rms_mode), 0.2, wd);
    }
    if (c->bias) {
        b = vec_alloc_at(t, "bias", c->wdtype >= 0 ? c->wdtype : c->dtype, D,
                         c->param_offset ? c->param_offset + 1 : 0);
        bd = dense_new(t, D);
        fill_random(t, &b, 0.0, 0.5, bd);
    }
    if (c->op == KF_OP_ADA_NORM || c->op == KF_OP_ADD_ADA_NORM) {
        scale = cond_alloc(t, "scale", c, 1, c->cond);
        scaled = dense_new(t, n);
        fill_random(t, &scale, 0.0, 0.3, dense_new(t, view_numel(&scale)));
        if (c->shift) {
            shift = cond_alloc(t, "shift", c, 0, c->shift_unbind ? COND_UNBIND : c->cond);
            shiftd = dense_new(t, n);
            fill_random(t, &shift, 0.0, 0.5, dense_new(t, view_numel(&shift)));
        }
    }
    if ((c->op == KF_OP_ADD_ADA_NORM && c->gate) || c->op == KF_OP_GATED_RESIDUAL) {
        gate = cond_alloc(t, "gate", c, 2, c->cond);
        gated = dense_new(t, n);
        fill_random(t, &gate, 0.0, 0.7, dense_new(t, view_numel(&gate)));
    }
    tview y = {0};
    if (c->op != KF_OP_GATED_RESIDUAL)
        y = out_alloc(t, "y", c, &x, D);
    if (t->setup_error || !upload_all(t))
        return;
    /* conditioning as the reference reads it: expanded to x's shape */
    if (scale.buf)
        gather_expanded(&scale, scale.buf->before, nd, xshape, scaled);
    if (shift.buf)
        gather_expanded(&shift, shift.buf->before, nd, xshape, shiftd);
    if (gate.buf)
        gather_expanded(&gate, gate.buf->before, nd, xshape, gated);

    kf_tensor X = tensor_of(&x), Y = y.buf ? tensor_of(&y) : X;
    kf_tensor R = res.buf ? tensor_of(&res) : X, W = w.buf ? tensor_of(&w) : X;
    kf_tensor Bt = b.buf ? tensor_of(&b) : X, Sc = scale.buf ? tensor_of(&scale) : X;
    kf_tensor Sh = shift.buf ? tensor_of(&shift) : X, G = gate.buf ? tensor_of(&gate) : X;
    const kf_tensor *wp = w.buf ? &W : NULL;
    kf_status st = KF_OK;
    switch (c->op) {
    case KF_OP_RMS_NORM:
        st = kf_rms_norm(t->ctx, &X, wp, c->eps, (kf_rms_mode)c->mode, c->offset, &Y);
        break;
    case KF_OP_ADD_RMS_NORM:
        st = kf_add_rms_norm(t->ctx, &X, &R, wp, c->eps, (kf_rms_mode)c->mode, c->offset, &Y);
        break;
    case KF_OP_LAYER_NORM:
        st = kf_layer_norm(t->ctx, &X, wp, b.buf ? &Bt : NULL, c->eps, &Y);
        break;
    case KF_OP_ADA_NORM:
        st = kf_ada_norm(t->ctx, &X, &Sc, shift.buf ? &Sh : NULL, wp, c->eps,
                         (kf_norm_kind)c->mode, &Y);
        break;
    case KF_OP_ADD_ADA_NORM:
        st = kf_add_ada_norm(t->ctx, &X, &R, gate.buf ? &G : NULL, &Sc, shift.buf ? &Sh : NULL,
                             wp, c->eps, (kf_norm_kind)c->mode, &Y);
        break;
    case KF_OP_GATED_RESIDUAL:
        st = kf_gated_residual(t->ctx, &X, &R, &G);
        break;
    default:
        break;
    }
    if (!call_ok(t, st) || !download_all(t))
        return;

    double *ref = dense_new(t, n), *out = dense_new(t, n);
    double *ref2 = dense_new(t, n), *out2 = dense_new(t, n);
    if (t->setup_error)
        return;
    switch (c->op) {
    case KF_OP_RMS_NORM:
        kft_ref_rms_norm(xd, rows, D, wd, c->eps, c->mode, c->offset, c->dtype, ref);
        break;
    case KF_OP_ADD_RMS_NORM:
        kft_ref_add_rms_norm(xd, resd, rows, D, wd, c->eps, c->mode, c->offset, c->dtype, ref2,
                             ref);
        break;
    case KF_OP_LAYER_NORM:
        kft_ref_layer_norm(xd, rows, D, wd, bd, c->eps, ref);
        break;
    case KF_OP_ADA_NORM:
        kft_ref_ada_norm(xd, rows, D, scaled, shiftd, wd, c->eps, c->mode, ref);
        break;
    case KF_OP_ADD_ADA_NORM:
        kft_ref_add_ada_norm(xd, resd, gated, scaled, shiftd, wd, rows, D, c->eps, c->mode,
                             c->dtype, ref2, ref);
        break;
    case KF_OP_GATED_RESIDUAL:
        kft_ref_gated_residual(xd, resd, gated, n, ref2);
        break;
    default:
        break;
    }
    if (c->op == KF_OP_ADD_RMS_NORM) {
        read_output(t, &res, out2);
        compare(t, "residual", c->dtype, out2, ref2, n, D);
    } else if (c->op == KF_OP_ADD_ADA_NORM || c->op == KF_OP_GATED_RESIDUAL) {
        read_output(t, &x, out2);
        compare(t, "h", c->dtype, out2, ref2, n, D);
    }
    if (c->op != KF_OP_GATED_RESIDUAL) {
        int layer_kind = c->op == KF_OP_LAYER_NORM ||
                         ((c->op == KF_OP_ADA_NORM || c->op == KF_OP_ADD_ADA_NORM) &&
                          c->mode == KF_NORM_LAYER);
        double *allow = NULL;
        /* f32 rows: none (the GPU corrects its f32 mean, the CPU sums in double) */
        if (layer_kind && c->dtype != KF_F32)
            allow = mean_rounding_atol(t, c->op == KF_OP_ADD_ADA_NORM ? ref2 : xd, rows, D,
                                       c->eps, wd, scaled);
        allow = add_rounding_atol(t, allow, ref, rows, D, bd, shiftd);
        t->atol_elem = allow;
        read_output(t, &y, out);
        compare(t, "y", c->dtype, out, ref, n, D);
        t->atol_elem = NULL;
        if (c->dtype != KF_F32)
            check_norm_inner_rounding(t, c, xd, resd, wd, scaled, shiftd, gated, out, ref);
    }
    check_untouched(t);
}

static void run_elementwise_ops(trun *t, const tcase *c)
{
    int64_t rows = c->B * c->S, D = c->D, n = rows * D;
    tview x = {0}, up = {0};
    double *gd = dense_new(t, n), *ud = dense_new(t, n);
    if (c->op == KF_OP_GLU && c->packed) {
        x = act_alloc(t, "packed", c, 2 * D, c->pad, c->misalign, 1);
        double *pd = dense_new(t, 2 * n);
        fill_random(t, &x, c->x_center, 1.0, pd);
        if (c->specials)        /* in the gate half */
            put_specials(&x, pd, rows, 2 * D, 0);
        if (c->specials && !c->gate_first)
            for (int64_t r = 0; r < rows; r++)   /* move them: the gate is the second half */
                for (int64_t i = 0; i < D; i++)
                    if (!isfinite(pd[r * 2 * D + i]) || !isfinite(pd[r * 2 * D + D + i])) {
                        double g = pd[r * 2 * D + i];
                        set_value(&x, r * 2 * D + i, pd[r * 2 * D + D + i], pd);
                        set_value(&x, r * 2 * D + D + i, g, pd);
                    }
        for (int64_t r = 0; r < rows; r++)
            for (int64_t i = 0; i < D; i++) {
                double first = pd[r * 2 * D + i], second = pd[r * 2 * D + D + i];
                gd[r * D + i] = c->gate_first ? first : second;
                ud[r * D + i] = c->gate_first ? second : first;
            }
    } else {
        /* In place: y is x, or for glu (two tensors, where gate_first is
         * otherwise unused) gate or, with gate_first, up. */
        int y_is_up = c->op == KF_OP_GLU && c->in_place && c->gate_first;
        x = act_alloc(t, c->op == KF_OP_GLU ? "gate" : "x", c, D, c->pad, c->misalign,
                      !c->in_place || y_is_up);
        fill_random(t, &x, c->x_center, c->op == KF_OP_SOFTMAX ? 4.0 : 1.0, gd);
        if (c->spike_rows) {
            int64_t *offs = view_offsets(&x);
            if (offs) {
                for (int64_t i = 0; i < n; i++)
                    put_value(&x, offs, i, i % D == 0 ? 0.3 : 0.0);
                reload_dense(&x, offs, gd);
                free(offs);
            }
        }
        if (c->specials)
            put_specials(&x, gd, rows, D, c->op == KF_OP_SOFTMAX);
        if (c->op == KF_OP_GLU) {
            up = act_alloc(t, "up", c, D, c->pad ? c->pad + 2 : 0, c->misalign, !y_is_up);
            fill_random(t, &up, 0.0, 1.0, ud);
        }
    }
    tview y = (c->op == KF_OP_GLU && c->packed)
                  ? poisoned(t, act_alloc(t, "y", c, D, c->pad ? c->pad + 3 : 0, c->misalign, 0))
                  : out_alloc(t, "y", c, c->op == KF_OP_GLU && c->gate_first ? &up : &x, D);
    if (t->setup_error || !upload_all(t))
        return;
    kf_tensor X = tensor_of(&x), Y = tensor_of(&y), U = up.buf ? tensor_of(&up) : X;
    kf_status st = KF_OK;
    if (c->op == KF_OP_GLU)
        st = kf_glu(t->ctx, &X, up.buf ? &U : NULL, (kf_activation)c->mode, c->gate_first, &Y);
    else if (c->op == KF_OP_GELU)
        st = kf_gelu(t->ctx, &X, c->approx, &Y);
    else if (c->op == KF_OP_SILU)
        st = kf_silu(t->ctx, &X, &Y);
    else
        st = kf_softmax(t->ctx, &X, c->scale, &Y);
    if (!call_ok(t, st) || !download_all(t))
        return;
    double *ref = dense_new(t, n), *out = dense_new(t, n);
    if (t->setup_error)
        return;
    if (c->op == KF_OP_GLU)
        kft_ref_glu(gd, ud, n, c->mode, ref);
    else if (c->op == KF_OP_GELU)
        kft_ref_activation(gd, n, c->approx ? KF_ACT_GELU_TANH : KF_ACT_GELU_ERF, ref);
    else if (c->op == KF_OP_SILU)
        kft_ref_activation(gd, n, KF_ACT_SILU, ref);
    else
        kft_ref_softmax(gd, rows, D, c->scale, ref);
    read_output(t, &y, out);
    compare(t, "y", c->dtype, out, ref, n, D);
    check_untouched(t);
}

/* A rope activation [B, S, H, Dh]: heads contiguous per token ([B, S, H, Dh]
 * memory) or HF's [B, H, S, Dh] memory; token rows padded by pad. read_only
 * (an input not rotated in place) with c->outer 3: batch stride 0. */
static tview rope_act_alloc(trun *t, const char *name, const tcase *c, int64_t H, int64_t pad,
                            int64_t misalign, int read_only)
{
    int64_t shape[4] = {c->B, c->S, H, c->Dh}, stride[4];
    stride[3] = 1;
    if (c->hf_layout) {
        stride[1] = c->Dh + pad;
        stride[2] = c->S * stride[1];
        stride[0] = H * stride[2];
    } else {
        stride[2] = c->Dh;
        stride[1] = H * c->Dh + pad;
        stride[0] = c->S * stride[1];
    }
    if (c->outer == 3 && read_only)
        stride[0] = 0;
    return view_alloc(t, name, c->dtype, 4, shape, stride, misalign);
}

/* Real frequencies of pair p. 1 axis: theta^(-2p/r) (p = 0 has freq 1, so
 * positions up to 1e5 give 1e5 rad). n > 1 axes: LTX-like theta^(k/(K-1)) * pi/2,
 * pairs k-major axis-minor. zero_freqs: identity pairs at the front. */
static void rope_freqs(const tcase *c, int r, double *freqs, int *axis)
{
    int half = r / 2;
    int zeros = c->zero_freqs ? (half >= 4 ? half % 3 + 1 : 1) : 0;
    if (zeros >= half)
        zeros = half - 1;
    for (int p = 0; p < half; p++) {
        if (c->n_axes == 1 || c->form != ROPE_POSITIONS) {
            freqs[p] = pow(10000.0, -2.0 * p / r);
            axis[p] = 0;
        } else {
            int q = p - zeros < 0 ? 0 : p - zeros;
            int na = c->n_axes;
            int per_axis = (half - zeros + na - 1) / na;
            int k = q / na;
            freqs[p] = pow(10000.0, per_axis > 1 ? (double)k / (per_axis - 1) : 0.0) * M_PI / 2.0;
            axis[p] = q % na;
        }
        if (p < zeros)
            freqs[p] = 0.0;
        freqs[p] = (double)(float)freqs[p];
    }
}

/* bad_axis cases: which pairs get an out-of-range axis entry, and which */
static int rope_bad_pair(const tcase *c, int p)
{
    return c->bad_axis && p % 4 == 1;
}

static int rope_bad_value(int p)
{
    static const int bad[] = {-1, 3, 33, 1000, -77777, 64};
    return bad[(p / 4) % 6];
}

/* bad_axis cases: where candidate a (ref_a: every bad pair on axis a) is the
 * nearest yet to the output of a bad pair of a head, take it into ref; best
 * holds each such pair's distance so far (a == 0 starts it) */
static void rope_nearest(const tcase *c, int a, int64_t tokens, int64_t heads, int64_t Dh,
                         int r, const double *out, const double *ref_a, double *ref,
                         double *best)
{
    int half = r / 2;
    for (int64_t th = 0; th < tokens * heads; th++) {
        for (int p = 0; p < half; p++) {
            int64_t i0 = th * Dh + (c->mode == KF_ROPE_HALF ? p : 2 * p);
            int64_t i1 = th * Dh + (c->mode == KF_ROPE_HALF ? p + half : 2 * p + 1);
            if (!rope_bad_pair(c, p)) {
                if (a == 0) {
                    ref[i0] = ref_a[i0];
                    ref[i1] = ref_a[i1];
                }
                continue;
            }
            double d = fabs(out[i0] - ref_a[i0]) + fabs(out[i1] - ref_a[i1]);
            if (isnan(d))
                d = INFINITY;
            if (a == 0 || d < best[th * half + p]) {
                best[th * half + p] = d;
                ref[i0] = ref_a[i0];
                ref[i1] = ref_a[i1];
            }
        }
        for (int64_t i = r; i < Dh; i++)
            if (a == 0)
                ref[th * Dh + i] = ref_a[th * Dh + i];
    }
}

static int64_t pick_i(rng *r, int64_t lo, int64_t hi);

static void run_rope_ops(trun *t, const tcase *c)
{
    int64_t B = c->B, S = c->S, H = c->H, Dh = c->Dh, tokens = B * S;
    int r = c->rot ? c->rot : (int)Dh, half = r / 2;
    int is_nr = c->op == KF_OP_RMS_NORM_ROPE;
    int64_t pad = c->pad;
    tview q = rope_act_alloc(t, is_nr ? "x" : "q", c, H, pad, c->misalign, !c->in_place);
    double *qd = dense_new(t, tokens * H * Dh);
    fill_random(t, &q, 0.0, 1.0, qd);
    if (c->specials && tokens >= 2) {
        set_value(&q, (1 * H + 0) * Dh + 0, NAN, qd);   /* token 1, head 0 */
        if (tokens >= 4)
            set_value(&q, (3 * H + H - 1) * Dh + Dh - 1, INFINITY, qd);
    }
    tview k = {0}, kout = {0}, w = {0};
    double *kd = NULL, *wd = NULL;
    if (!is_nr && c->Hk > 0) {
        k = rope_act_alloc(t, "k", c, c->Hk, pad ? pad + 1 : 0, c->misalign, !c->in_place);
        kd = dense_new(t, tokens * c->Hk * Dh);
        fill_random(t, &k, 0.0, 1.0, kd);
    }
    if (is_nr && c->wdtype >= 0) {
        w = vec_alloc_at(t, "weight", c->wdtype, H * Dh, c->param_offset);
        wd = dense_new(t, H * Dh);
        fill_random(t, &w, weight_center(c, c->rms_mode), 0.2, wd);
    }
    tview qout = c->in_place ? q
                             : poisoned(t, rope_act_alloc(t, is_nr ? "y" : "q_out", c, H,
                                                          pad ? pad + 3 : 0, c->misalign, 0));
    if (k.buf)
        kout = c->in_place ? k : poisoned(t, rope_act_alloc(t, "k_out", c, c->Hk, 0, 0, 0));

    /* angles: positions per (b, s) token */
    double *freqs = dense_new(t, half > 0 ? half : 1);
    int *axis = (int *)calloc((size_t)(half > 0 ? half : 1), sizeof(int));
    if (!axis) {
        t->setup_error = 1;
        return;
    }
    rope_freqs(c, r, freqs, axis);
    int n_axes = c->form == ROPE_POSITIONS ? c->n_axes : 1;
    /* positions [B, S, n] when B > 1, except HF-layout cases: [S, n] shared by the batches */
    int pos_batched = c->form == ROPE_TABLE_BS ||
                      (c->form == ROPE_POSITIONS && B > 1 && !c->hf_layout && !c->pos_shared);
    int64_t pos_tokens = pos_batched ? tokens : S;
    double *pos = dense_new(t, pos_tokens * n_axes);
    /* pos_grid: token s of every batch at a cell of a grid of extents ext (the
     * last axis fastest, the first unbounded), as a video's latent frames,
     * rows and columns: a coordinate repeats over runs of tokens */
    int64_t ext[3] = {1, 1, 1};
    for (int a = 0; c->pos_grid && a < n_axes; a++)
        ext[a] = pick_i(&t->rng, 1, 6);
    for (int64_t i = 0; i < pos_tokens; i++) {
        int64_t s = i % S, b = i / S;
        for (int a = 0; a < n_axes; a++) {
            double v;
            if (c->pos_grid) {
                int64_t inner = 1;
                for (int a2 = a + 1; a2 < n_axes; a2++)
                    inner *= ext[a2];
                int64_t cell = a == 0 ? s / inner : (s / inner) % ext[a];
                v = c->big_pos ? (double)((997 * cell + 13) % 100000)
                               : 2.0 * ((double)cell + 0.5) / (double)ext[a] - 1.0;
            } else if (c->big_pos)
                v = floor(rng_uniform(&t->rng) * 100000.0);
            else if (n_axes == 1)
                v = (double)(s + 3 * b);          /* batches at different offsets */
            else
                v = 2.0 * rng_uniform(&t->rng) - 1.0;   /* LTX-like fractional grid coordinate */
            pos[i * n_axes + a] = (double)(float)v;
        }
    }
    double *cos_ref = dense_new(t, tokens * r), *sin_ref = dense_new(t, tokens * r);
    tview ct = {0}, stb = {0}, pv = {0}, fv = {0}, av = {0};
    if (c->form != ROPE_POSITIONS) {
        int64_t shape[3] = {B, S, r}, tshape[3] = {1, S, r};
        int nd = c->form == ROPE_TABLE_BS ? 3 : 2;
        const int64_t *sh = c->form == ROPE_TABLE_BS ? shape : shape + 1;
        if (c->form == ROPE_TABLE_BS && c->tab_bcast) {
            /* [B, S, r] tables with batch stride 0: every batch reads one */
            int64_t bstride[3] = {0, r, 1};
            ct = view_alloc(t, "cos", c->tdtype, 3, shape, bstride, c->misalign);
            stb = view_alloc(t, "sin", c->tdtype, 3, shape, bstride, 0);
        } else {
            ct = rows_alloc(t, "cos", c->tdtype, nd, sh, 0, c->misalign);
            stb = rows_alloc(t, "sin", c->tdtype, nd, sh, c->misalign ? 2 : 0, 0);
        }
        int64_t tn = view_numel(&ct);
        double *cv = dense_new(t, tn), *sv = dense_new(t, tn);
        kft_ref_rope_tables_from_positions(pos, tn / r, 1, freqs, NULL, r, c->mode, cv, sv);
        fill_values(t, &ct, cv);
        fill_values(t, &stb, sv);
        (void)tshape;
    } else {
        int64_t shape[3] = {B, S, n_axes};
        int nd = pos_batched ? 3 : 2;
        pv = rows_alloc(t, "positions", KF_F32, nd, pos_batched ? shape : shape + 1, 0, 0);
        fill_values(t, &pv, pos);
        fv = vec_alloc(t, "freqs", KF_F32, half);
        fill_values(t, &fv, freqs);
        if (c->axis_given) {
            av = vec_alloc(t, "axis", KF_I32, half);
            double *ad = dense_new(t, half);
            for (int p = 0; p < half; p++)
                ad[p] = rope_bad_pair(c, p) ? rope_bad_value(p) : axis[p];
            fill_values(t, &av, ad);
        }
    }
    if (t->setup_error || !upload_all(t)) {
        free(axis);
        return;
    }
    /* reference tables: tokens x r */
    int64_t tab_shape[3] = {B, S, r};
    double *pos_full = NULL; /* positions form: tokens x n_axes */
    if (c->form != ROPE_POSITIONS) {
        gather_expanded(&ct, ct.buf->before, 3, tab_shape, cos_ref);
        gather_expanded(&stb, stb.buf->before, 3, tab_shape, sin_ref);
    } else {
        int64_t pshape[3] = {B, S, n_axes};
        pos_full = dense_new(t, tokens * n_axes);
        if (t->setup_error) {
            free(axis);
            return;
        }
        gather_expanded(&pv, pv.buf->before, 3, pshape, pos_full);
        kft_ref_rope_tables_from_positions(pos_full, tokens, n_axes, freqs,
                                           c->axis_given ? axis : NULL, r, c->mode, cos_ref,
                                           sin_ref);
    }
    kf_tensor Q = tensor_of(&q), QO = tensor_of(&qout);
    kf_tensor K = k.buf ? tensor_of(&k) : Q, KO = k.buf ? tensor_of(&kout) : Q;
    kf_tensor C = ct.buf ? tensor_of(&ct) : Q, Sn = stb.buf ? tensor_of(&stb) : Q;
    kf_tensor P = pv.buf ? tensor_of(&pv) : Q, F = fv.buf ? tensor_of(&fv) : Q;
    kf_tensor A = av.buf ? tensor_of(&av) : Q, W = w.buf ? tensor_of(&w) : Q;
    kf_rope_args ra;
    memset(&ra, 0, sizeof ra);
    ra.convention = c->mode;
    ra.rotary_dim = c->rot;
    if (c->form != ROPE_POSITIONS) {
        ra.cos = &C;
        ra.sin = &Sn;
    } else {
        ra.positions = &P;
        ra.freqs = &F;
        ra.axis = av.buf ? &A : NULL;
    }
    kf_status st;
    if (is_nr)
        st = kf_rms_norm_rope(t->ctx, &Q, w.buf ? &W : NULL, c->eps, (kf_rms_mode)c->rms_mode,
                              c->offset, &ra, &QO);
    else
        st = kf_rope(t->ctx, &Q, k.buf ? &K : NULL, &QO, k.buf ? &KO : NULL, &ra);
    if (c->bad_axis && kf_ctx_backend(t->ctx) == KF_BACKEND_CPU) {
        /* the CPU backend reads the map on the host and rejects it */
        free(axis);
        if (st != KF_ERR_INVALID_ARG)
            case_fail(t, "an axis map with out-of-range entries was not rejected", NULL);
        else if (download_all(t))
            check_untouched(t);
        return;
    }
    if (!call_ok(t, st) || !download_all(t)) {
        free(axis);
        return;
    }
    int64_t nq = tokens * H * Dh, nk = tokens * c->Hk * Dh;
    double *ref = dense_new(t, nq), *out = dense_new(t, nq);
    double *kref = k.buf ? dense_new(t, nk) : NULL, *kouts = k.buf ? dense_new(t, nk) : NULL;
    double *scratch = is_nr ? dense_new(t, nq) : NULL;
    if (t->setup_error) {
        free(axis);
        return;
    }
    read_output(t, &qout, out);
    if (k.buf)
        read_output(t, &kout, kouts);
    /* a map with out-of-range entries (GPU): each such pair must be rotated by
     * some coordinate of its token (the kernels never read past the token's
     * positions): the reference with every such pair on axis a, for each a,
     * and per pair of each head the one nearest the output */
    int n_refs = c->bad_axis ? n_axes : 1;
    double *ref_a = c->bad_axis ? dense_new(t, nq) : ref;
    double *kref_a = c->bad_axis && k.buf ? dense_new(t, nk) : kref;
    double *best = c->bad_axis ? dense_new(t, tokens * (H + c->Hk) * half) : NULL;
    if (t->setup_error) {
        free(axis);
        return;
    }
    for (int a = 0; a < n_refs; a++) {
        if (c->bad_axis) {
            for (int p = 0; p < half; p++)
                if (rope_bad_pair(c, p))
                    axis[p] = a;
            kft_ref_rope_tables_from_positions(pos_full, tokens, n_axes, freqs, axis, r, c->mode,
                                               cos_ref, sin_ref);
        }
        if (is_nr)
            kft_ref_rms_norm_rope(qd, tokens, H, Dh, wd, c->eps, c->rms_mode, c->offset, c->dtype,
                                  r, c->mode, cos_ref, sin_ref, scratch, ref_a);
        else
            kft_ref_rope(qd, tokens, H, Dh, r, c->mode, cos_ref, sin_ref, ref_a);
        if (k.buf)
            kft_ref_rope(kd, tokens, c->Hk, Dh, r, c->mode, cos_ref, sin_ref, kref_a);
        if (c->bad_axis) {
            rope_nearest(c, a, tokens, H, Dh, r, out, ref_a, ref, best);
            if (k.buf)
                rope_nearest(c, a, tokens, c->Hk, Dh, r, kouts, kref_a, kref,
                             best + tokens * H * half);
        }
    }
    free(axis);
    compare(t, is_nr ? "y" : "q_out", c->dtype, out, ref, nq, Dh);
    /* rms_norm_rope rounds once, after the rotation: alt is rope of the
     * rms_norm op's rounded output (the unfused pair) */
    if (is_nr && !c->bad_axis && c->dtype != KF_F32) {
        double *alt = dense_new(t, nq);
        if (t->setup_error)
            return;
        kft_ref_rms_norm(qd, tokens, H * Dh, wd, c->eps, c->rms_mode, c->offset, c->dtype,
                         scratch);
        for (int64_t i = 0; i < nq; i++)
            scratch[i] = kft_round(c->dtype, scratch[i]);
        kft_ref_rope(scratch, tokens, H, Dh, r, c->mode, cos_ref, sin_ref, alt);
        check_inner_rounding(t, "y", c->dtype, out, ref, alt, nq);
    }
    if (k.buf)
        compare(t, "k_out", c->dtype, kouts, kref, nk, Dh);
    check_untouched(t);
}

/* ---- running one case ----------------------------------------------------- */

typedef struct tsuite {
    kf_ctx *ctx;
    kf_ctx *other;              /* bitwise mode: every case also runs here; else NULL */
    const kft_options *opt;
    FILE *out;
    kft_result *res;
    unsigned long long seed;
    unsigned long long case_number;
    int harness_error;
} tsuite;

/* A run's seed when the options give none: from the clock (printed by the
 * caller, so the run can be replayed); never 0. */
static unsigned long long clock_seed(void)
{
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    unsigned long long seed =
        ((unsigned long long)ts.tv_sec * 1000000007ull) ^ (unsigned long long)ts.tv_nsec;
    return seed ? seed : 1;
}

static uint64_t case_seed(unsigned long long seed, unsigned long long number)
{
    rng r = {seed ^ (number * 0xd1b54a32d192ed03ull)};
    return rng_next(&r);
}

/* Run c on ctx: the case's state afterwards (buffers as read back, the
 * verdict), to be freed with run_delete; NULL if it could not be allocated. */
static trun *run_case(kf_ctx *ctx, const tcase *c, uint64_t seed, FILE *out, int verbose)
{
    trun *t = (trun *)calloc(1, sizeof(trun));
    if (!t)
        return NULL;
    t->ctx = ctx;
    t->out = out;
    t->verbose = verbose;
    t->rng.state = seed;
    describe(c, t->desc, sizeof t->desc);
    if (verbose)
        fprintf(out, "case %s\n", t->desc);
    if (c->op == KF_OP_ROPE || c->op == KF_OP_RMS_NORM_ROPE)
        run_rope_ops(t, c);
    else if (c->op == KF_OP_GLU || c->op == KF_OP_GELU || c->op == KF_OP_SILU ||
             c->op == KF_OP_SOFTMAX)
        run_elementwise_ops(t, c);
    else
        run_norm_ops(t, c);
    return t;
}

/* 1 pass, 0 fail, -1 harness error. */
static int run_verdict(const trun *t)
{
    if (t->setup_error && !t->failed) {
        fprintf(t->out, "ERROR %s: the harness could not allocate its buffers\n", t->desc);
        return -1;
    }
    return t->failed ? 0 : 1;
}

static void run_delete(trun *t)
{
    if (t) {
        run_free(t);
        free(t);
    }
}

/* Run c; returns 1 pass, 0 fail, -1 skipped / harness error. */
static int run_one(kf_ctx *ctx, const tcase *c, uint64_t seed, FILE *out, int verbose,
                   double *max_rel)
{
    trun *t = run_case(ctx, c, seed, out, verbose);
    if (!t)
        return -1;
    int result = run_verdict(t);
    if (max_rel)
        *max_rel = t->max_rel;
    run_delete(t);
    return result;
}

/* The first byte at which buffers x and y (of one case's two runs) differ,
 * or x->bytes where they do not; with nan_bits_may_differ an element that is
 * a NaN in both matches whatever its sign and payload (kft_options). */
static size_t first_difference(const tbuf *x, const tbuf *y, int nan_bits_may_differ)
{
    for (size_t k = 0; k < x->bytes; k++) {
        if (x->after[k] == y->after[k])
            continue;
        int64_t e = ((int64_t)k - GUARD_BYTES) / (int64_t)x->esize;
        if (!nan_bits_may_differ || k < GUARD_BYTES || e >= x->storage ||
            !isnan(kft_load(storage_of(x, x->after), x->dtype, e)) ||
            !isnan(kft_load(storage_of(y, y->after), y->dtype, e)))
            return k;
        k = GUARD_BYTES + (size_t)(e + 1) * x->esize - 1; /* past element e */
    }
    return x->bytes;
}

/* Whether two runs of one case left every buffer (outputs, inputs, gaps and
 * guards) the same, byte for byte (but for NaNs, with nan_bits_may_differ);
 * the first difference fails run a. */
static int same_buffers(trun *a, const trun *b, int nan_bits_may_differ)
{
    if (a->nbufs != b->nbufs) {
        case_fail(a, "bitwise: the two runs made different buffers", NULL);
        return 0;
    }
    for (int i = 0; i < a->nbufs; i++) {
        const tbuf *x = &a->bufs[i], *y = &b->bufs[i];
        if (x->bytes != y->bytes) {
            case_fail(a, "bitwise: the two runs made buffers of different sizes", NULL);
            return 0;
        }
        if (memcmp(x->after, y->after, x->bytes) == 0)
            continue;
        size_t k = first_difference(x, y, nan_bits_may_differ);
        if (k == x->bytes)
            continue;
        int64_t e = ((int64_t)k - GUARD_BYTES) / (int64_t)x->esize;
        char msg[300];
        if (k < GUARD_BYTES || e >= x->storage)
            snprintf(msg, sizeof msg, "bitwise: %s: guard byte %zu differs", x->name, k);
        else
            snprintf(msg, sizeof msg,
                     "bitwise: %s: storage element %lld differs: %.9g (first context) vs "
                     "%.9g (second)",
                     x->name, (long long)e,
                     kft_load(storage_of(x, x->after), x->dtype, e),
                     kft_load(storage_of(y, y->after), y->dtype, e));
        case_fail(a, msg, NULL);
        return 0;
    }
    return 1;
}

/* Run c on ctx and on other with the same inputs: 1 when both pass against
 * the reference and leave every buffer byte for byte the same, 0 on a
 * failure, -1 on a harness error. */
static int run_twin(kf_ctx *ctx, kf_ctx *other, const tcase *c, uint64_t seed, FILE *out,
                    int verbose, int nan_bits_may_differ)
{
    trun *a = run_case(ctx, c, seed, out, verbose);
    trun *b = a ? run_case(other, c, seed, out, verbose) : NULL;
    int result = -1;
    if (a && b) {
        int ra = run_verdict(a), rb = run_verdict(b);
        if (rb == 0)
            fprintf(out, "     (the failure above is on the second context: %s)\n",
                    kf_ctx_describe(other));
        if (ra < 0 || rb < 0)
            result = -1;
        else
            result = ra && rb && same_buffers(a, b, nan_bits_may_differ);
    }
    run_delete(a);
    run_delete(b);
    return result;
}

static void suite_case(tsuite *s, const tcase *c)
{
    unsigned long long number = s->case_number++;
    if (s->opt->op && strcmp(s->opt->op, kf_op_name(c->op)) != 0)
        return;
    if (s->opt->dtype >= 0 && s->opt->dtype != c->dtype)
        return;
    if (!kf_supports(s->ctx, c->op, (kf_dtype)c->dtype) ||
        (s->other && !kf_supports(s->other, c->op, (kf_dtype)c->dtype))) {
        /* every backend implements every op and dtype: a gap is a failure */
        fprintf(s->out, "FAIL %s %s: not supported by the backend\n", kf_op_name(c->op),
                kf_dtype_name((kf_dtype)c->dtype));
        s->res->failed++;
        return;
    }
    uint64_t seed = case_seed(s->seed, number);
    int r = s->other ? run_twin(s->ctx, s->other, c, seed, s->out, s->opt->verbose,
                                s->opt->nan_bits_may_differ)
                     : run_one(s->ctx, c, seed, s->out, s->opt->verbose, NULL);
    if (r == 1)
        s->res->passed++;
    else if (r == 0)
        s->res->failed++;
    else {
        s->res->failed++;
        s->harness_error = 1;
    }
}

static tcase case_base(kf_op op, int dtype)
{
    tcase c;
    memset(&c, 0, sizeof c);
    c.op = op;
    c.dtype = dtype;
    c.B = 1;
    c.S = 1;
    c.D = 1;
    c.ndim = 2;
    c.wdtype = -1;
    c.eps = 1e-6f;
    c.scale = 1.0f;
    c.cdtype = dtype;
    c.n_axes = 1;
    c.tdtype = KF_F32;
    return c;
}

static const int64_t SWEEP_D[] = {1, 7, 111, 769, 2048, 3584, 4096, 5125, 8192, 16384};
static const int64_t SWEEP_ROWS[] = {1, 3, 1000};
static const int64_t QUICK_D[] = {1, 7, 769, 4096};
static const int64_t QUICK_ROWS[] = {1, 3, 37};

static int is_row_op(kf_op op)
{
    return op != KF_OP_ROPE && op != KF_OP_RMS_NORM_ROPE;
}

/* Per-op settings that rotate over the sweep (index i) so that modes, weight
 * dtypes and layouts are all met at many shapes without multiplying. */
/* Gemma's (offset + weight): HF's 1.0 first, then others, 0 included. */
static const float GEMMA_OFFSETS[4] = {1.0f, 0.5f, -0.25f, 0.0f};

static void rotate_variant(tcase *c, int i)
{
    int wpick = i % 3;      /* f32 weight, activation-dtype weight, none */
    int dt = c->dtype;
    switch (c->op) {
    case KF_OP_RMS_NORM:
    case KF_OP_ADD_RMS_NORM:
        c->mode = (i / 3) % 3;
        c->wdtype = wpick == 0 ? KF_F32 : wpick == 1 ? dt : -1;
        if (c->mode == KF_RMS_GEMMA) {
            c->offset = GEMMA_OFFSETS[(i / 9) % 4];
            if (c->wdtype < 0)
                c->wdtype = KF_F32;
        }
        c->eps = (i & 1) ? 1e-5f : 1e-6f;
        break;
    case KF_OP_LAYER_NORM:
        c->wdtype = wpick == 0 ? KF_F32 : wpick == 1 ? dt : -1;
        c->bias = (i / 3) % 2 == 0;   /* with or without a weight */
        c->eps = 1e-5f;
        break;
    case KF_OP_ADA_NORM:
    case KF_OP_ADD_ADA_NORM:
    case KF_OP_GATED_RESIDUAL:
        c->mode = i % 2;
        c->wdtype = (i / 2) % 3 == 0 ? KF_F32 : -1;
        c->cond = (i / 2) % 4;   /* every form, the bench's own [B, 1, D] tensor too */
        c->cdtype = (i % 3 == 1) ? dt : KF_F32;
        c->shift = (i % 4) != 3;
        c->gate = (i % 5) != 4;
        c->eps = (i / 7) % 2 ? 1e-5f : 1e-6f;
        break;
    case KF_OP_GLU:
        c->mode = i % 3;
        c->packed = (i / 3) % 2;
        c->gate_first = (i / 2) % 2;
        break;
    case KF_OP_GELU:
        c->approx = i % 2;
        break;
    case KF_OP_SOFTMAX: {
        /* a negative scale: the row's largest scale * x is at its smallest x */
        static const float scales[] = {1.0f, 0.125f, -0.75f};
        c->scale = scales[i % 3];
        break;
    }
    default:
        break;
    }
}

/* Rows and batches of a sweep point (ada ops need B > 1 to test per-batch views). */
static void set_rows(tcase *c, int64_t rows)
{
    if (c->op == KF_OP_ADA_NORM || c->op == KF_OP_ADD_ADA_NORM || c->op == KF_OP_GATED_RESIDUAL) {
        c->ndim = 3;
        if (rows >= 8 && rows % 4 == 0) {
            c->B = 4;
            c->S = rows / 4;
        } else if (rows >= 8 && rows % 2 == 0) {
            c->B = 2;
            c->S = rows / 2;
        } else {
            c->B = rows;
            c->S = 1;
        }
    } else {
        c->B = 1;
        c->S = rows;
    }
}

static void row_op_cases(tsuite *s, kf_op op, int dtype, int quick)
{
    const int64_t *Ds = quick ? QUICK_D : SWEEP_D;
    int nD = quick ? 4 : 10;
    const int64_t *Rs = quick ? QUICK_ROWS : SWEEP_ROWS;
    int64_t cap = quick ? ((int64_t)1 << 15) : CASE_ELEMS_CAP;
    int i = 0;
    /* the shape sweep */
    for (int di = 0; di < nD; di++)
        for (int ri = 0; ri < 3; ri++) {
            tcase c = case_base(op, dtype);
            int64_t rows = Rs[ri];
            if (rows * Ds[di] > cap)
                rows = cap / Ds[di] > 0 ? cap / Ds[di] : 1;
            if (rows > 8)
                rows -= rows % 4;
            c.D = Ds[di];
            set_rows(&c, rows);
            if (c.ndim != 3)
                c.ndim = (i % 4 == 1) ? 3 : (i % 4 == 3) ? 4 : 2;
            if (c.ndim >= 3 && c.B == 1 && rows > 1 && rows % 2 == 0) {
                c.B = 2;
                c.S = rows / 2;
            }
            rotate_variant(&c, i);
            suite_case(s, &c);
            i++;
        }
    /* strided rows, unaligned starts, in place, NaN/Inf rows: smaller shapes
     * (16389: odd rows of more than 16384 elements, which the GPU norms with
     * an add move through their streaming kernel) */
    static const int64_t VD[] = {7, 769, 4096, 5125, 16389};
    static const int64_t VR[] = {5, 12, 8, 5, 3};
    int nv = quick ? 2 : 5;
    for (int vi = 0; vi < nv; vi++) {
        for (int layout = 0; layout < 4; layout++) {
            tcase c = case_base(op, dtype);
            c.D = VD[vi];
            set_rows(&c, VR[vi]);
            c.ndim = c.ndim == 3 ? 3 : 2 + (layout % 2);
            rotate_variant(&c, i + layout * 7 + vi);
            if (layout == 0 || layout == 3) {
                c.pad = 13 + vi;
                c.misalign = 1;
            }
            if (layout == 1) {
                c.pad = 8;
            }
            if (layout >= 2 && op != KF_OP_ADD_ADA_NORM && op != KF_OP_GATED_RESIDUAL &&
                !(op == KF_OP_GLU && c.packed))
                c.in_place = 1;
            c.specials = (layout == 1 || layout == 3) && c.B * c.S >= 5;
            suite_case(s, &c);
        }
        i++;
    }
    /* every mode / weight / conditioning combination once, at a modest shape */
    int combos = 0;
    switch (op) {
    case KF_OP_RMS_NORM:
    case KF_OP_ADD_RMS_NORM: combos = 9; break;
    case KF_OP_LAYER_NORM: combos = 6; break;
    case KF_OP_ADA_NORM:
    case KF_OP_ADD_ADA_NORM:
    case KF_OP_GATED_RESIDUAL: combos = 12; break;
    case KF_OP_GLU: combos = 12; break;
    case KF_OP_GELU: combos = 2; break;
    case KF_OP_SOFTMAX: combos = 7; break;
    default: combos = 1; break;
    }
    if (quick && combos > 6)
        combos = 6;
    for (int k = 0; k < combos; k++) {
        tcase c = case_base(op, dtype);
        c.D = (k % 2) ? 1000 : 333;
        set_rows(&c, 6);
        rotate_variant(&c, k);
        if (op == KF_OP_ADA_NORM || op == KF_OP_ADD_ADA_NORM || op == KF_OP_GATED_RESIDUAL) {
            c.B = 2;
            c.S = 3;
            c.cond = k % 3;
            c.mode = (k / 3) % 2;
            c.cdtype = (k / 6) % 2 ? dtype : KF_F32;
        }
        if (op == KF_OP_GLU) {
            c.mode = k % 3;
            c.packed = (k / 3) % 2;
            c.gate_first = (k / 6) % 2;
            c.specials = k >= 9;
            c.S = 6;
        }
        if (op == KF_OP_SOFTMAX && k >= 2) {
            /* scale * x overflows f32 for each row's largest element (|x|
             * > 3.4): the limit, one-hot (the float64 reference's); with
             * NaN / +-inf rows once, in rows of another 16-byte phase in x
             * than in y there (the GPU's streaming kernel); huge logits
             * that stay finite (-3e30 x); scale +-0 (uniform rows, NaN
             * where x is infinite) */
            static const float big_scales[] = {1e38f, -1e38f, -3e30f, -0.0f, 0.0f};
            c.scale = big_scales[k - 2];
            c.specials = k == 3 || k == 5;
            c.pad = k == 3 ? 5 : 0;
        }
        suite_case(s, &c);
    }
    /* gelu of negative inputs (x around -6, spread 1): there 1 + tanh(u) and
     * 1 + erf(x / sqrt2) are differences of numbers near 1 that keep few
     * bits (computed so, the f32 outputs were 0.09-0.4 relative off, bf16
     * erf 0.09); packed GLU takes the same x for its up half */
    if (op == KF_OP_GELU || op == KF_OP_GLU) {
        for (int k = 0; k < 2; k++) {
            tcase c = case_base(op, dtype);
            c.D = 1000;
            set_rows(&c, 6);
            c.x_center = -6.0;
            if (op == KF_OP_GELU)
                c.approx = k;
            else
                c.mode = k ? KF_ACT_GELU_TANH : KF_ACT_GELU_ERF;
            suite_case(s, &c);
        }
    }
    /* f32 softmax rows of 2^20 equal terms but one: a GPU thread adds 2048
     * of them, and summed one by one in f32 each add rounds the same way
     * (2e-5 relative in every output, twice the bound) */
    if (op == KF_OP_SOFTMAX && dtype == KF_F32) {
        tcase c = case_base(op, dtype);
        c.D = (int64_t)1 << 20;
        set_rows(&c, 2);
        c.spike_rows = 1;
        suite_case(s, &c);
    }
    /* many rows (a grid of several waves of blocks on the GPU) with a ragged
     * last block of rows, in place for the ops that allow it. Enough rows
     * that the GPU row kernels take 4 chunks per thread (the 48-register
     * LayerNorm and AdaLN kernels; plain RMSNorm rows of D 2048 take 2 by
     * design, the D 8192 case below has 4), so bf16 runs in the quick suite
     * too (the one under the sanitizers). */
    if ((!quick || dtype == KF_BF16) && op != KF_OP_GLU && op != KF_OP_GELU &&
        op != KF_OP_SILU && op != KF_OP_GATED_RESIDUAL) {
        tcase c = case_base(op, dtype);
        c.D = 2048;
        set_rows(&c, 6004);
        if (c.ndim != 3)
            c.S = 6003; /* ragged */
        rotate_variant(&c, (int)dtype);
        c.in_place = op != KF_OP_ADD_ADA_NORM;
        suite_case(s, &c);
    }
    /* AdaLN rows with conditioning of the rows' dtype (the many-rows case
     * above has f32 conditioning for bf16), 4 chunks per thread on the GPU:
     * per-batch strided (LTX's [B, 6, D] slices) with shift and no weight;
     * per token, LayerNorm, with a weight and no shift; and a scale per
     * token with a shift per batch (strides that differ: on the GPU the
     * general kernel, the lean one needs them equal) */
    if (op == KF_OP_ADA_NORM && dtype != KF_F32 && (!quick || dtype == KF_BF16)) {
        for (int k = 0; k < 3; k++) {
            tcase c = case_base(op, dtype);
            c.D = 2048;
            set_rows(&c, 4400);
            c.cond = k ? COND_TOKEN : COND_UNBIND;
            c.cdtype = dtype;
            c.mode = k == 1;             /* kf_norm_kind: rms, layer */
            c.wdtype = k == 1 ? dtype : -1;
            c.shift = k != 1;
            c.shift_unbind = k == 2;
            c.eps = 1e-6f;
            suite_case(s, &c);
        }
    }
    /* LayerNorm-kind rows whose values share a large offset (x around 256 in
     * 16 bits, 32 in f32; spread 1): the variance has to come from the
     * deviations. E[x^2] - E[x]^2 in f32 loses it to cancellation there
     * (simulated relative error: 4e-2 to 3e-1 for f16 rows, 3e-4 to 7e-4 for
     * f32 rows, far over the tolerances; two f32 passes stay under 1e-6). On
     * the general kernels (D 333) and the 4-chunk row kernels (D 2048, many
     * rows). */
    if (op == KF_OP_LAYER_NORM || op == KF_OP_ADA_NORM || op == KF_OP_ADD_ADA_NORM) {
        for (int k = 0; k < 2; k++) {
            tcase c = case_base(op, dtype);
            c.D = k ? 2048 : 333;
            set_rows(&c, k ? 4400 : 6);
            c.x_center = dtype == KF_F32 ? 32.0 : 256.0;
            if (op == KF_OP_LAYER_NORM) {
                c.wdtype = dtype;
                c.bias = 1;
            } else {
                c.B = 2;
                c.S = k ? 2200 : 3;
                c.mode = KF_NORM_LAYER;
                c.shift = 1;
            }
            suite_case(s, &c);
        }
    }
    /* f32 LayerNorm-kind rows around 1000 (spread 1): the f32 row mean is
     * off from the row's by up to 1000 x 2^-24, 6e-5 of the spread in every
     * deviation (over the f32 tolerance 6-fold on the emulator) unless the
     * second pass's sum of the deviations corrects it (GPU: norm.cu's
     * KF_LN_MEAN_LO; the CPU sums in double). Each GPU kernel: D 333
     * (general), 2048 (lean; layer_norm without a weight: the row kernel),
     * 5125 (peeled), 20000 (streaming). */
    if (dtype == KF_F32 &&
        (op == KF_OP_LAYER_NORM || op == KF_OP_ADA_NORM || op == KF_OP_ADD_ADA_NORM)) {
        static const int64_t lengths[] = {333, 2048, 2048, 5125, 20000};
        for (int k = 0; k < 5; k++) {
            tcase c = case_base(op, dtype);
            c.D = lengths[k];
            set_rows(&c, 6);
            c.x_center = 1000.0;
            if (op == KF_OP_LAYER_NORM) {
                c.wdtype = k == 2 ? -1 : dtype;
                c.bias = k != 2;
            } else {
                c.B = 2;
                c.S = 3;
                c.mode = KF_NORM_LAYER;
                c.shift = 1;
                c.wdtype = k == 2 ? dtype : -1;
            }
            suite_case(s, &c);
        }
    }
    /* odd-D rows with Llama rounding and each kind of weight (the rows'
     * dtype, f32, none): on the GPU, 16-bit rows of D 769 / 5125 take the
     * lean peeled kernel's packed weight product with a weight of their
     * dtype only; without a weight it drops the Llama flag, with an f32
     * weight the rows go to kf_norm_fast. Rows at every 16-byte phase. */
    if (op == KF_OP_RMS_NORM || op == KF_OP_ADD_RMS_NORM) {
        for (int k = 0; k < 6; k++) {
            if (dtype == KF_F32 && k % 3 == 1)
                continue;               /* f32 rows: the rows' dtype is f32 */
            tcase c = case_base(op, dtype);
            c.D = k < 3 ? 769 : 5125;
            set_rows(&c, k < 3 ? 41 : 19);
            c.mode = KF_RMS_LLAMA;
            c.wdtype = k % 3 == 0 ? dtype : k % 3 == 1 ? KF_F32 : -1;
            c.eps = 1e-6f;
            suite_case(s, &c);
        }
    }
    /* many rows of 8192 bf16 with a weight (and bias) of the rows' dtype: on
     * the GPU one 256-thread row of 4 chunks per block, the lean RMSNorm /
     * LayerNorm kernels at the bench's row shape (in the quick suite too:
     * the only plain RMSNorm rows of 4 chunks under the sanitizers) */
    if (dtype == KF_BF16 &&
        (op == KF_OP_RMS_NORM || op == KF_OP_ADD_RMS_NORM || op == KF_OP_LAYER_NORM)) {
        tcase c = case_base(op, dtype);
        c.D = 8192;
        set_rows(&c, 1101);
        rotate_variant(&c, 1);          /* weight of the rows' dtype (mode llama, bias) */
        suite_case(s, &c);
    }
}

static void rope_cases(tsuite *s, kf_op op, int dtype, int quick)
{
    typedef struct {
        int64_t B, S, H, Hk, Dh;
        int rot, conv, form, n_axes, axis, big, zero, hf, tab_act, pad, mis, in_place, specials;
        int bad; /* axis map entries out of range (the rows after the LTX-sized ones) */
    } rc;
    /* B S H Hk Dh rot conv form axes axis big zero hf tabdt pad mis inpl spec [bad] */
    static const rc cases[] = {
        {1, 1, 1, 0, 2, 0, 0, ROPE_TABLE_S, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        {1, 3, 1, 0, 8, 0, 1, ROPE_TABLE_S, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0},
        {2, 17, 8, 2, 64, 0, 0, ROPE_TABLE_BS, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        {2, 17, 8, 2, 64, 0, 0, ROPE_TABLE_BS, 1, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0},
        {2, 33, 5, 1, 128, 0, 0, ROPE_TABLE_BS, 1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0},
        {3, 9, 3, 3, 128, 64, 1, ROPE_TABLE_S, 1, 0, 0, 0, 0, 0, 5, 1, 0, 0, 0},
        {1, 100, 7, 1, 128, 32, 0, ROPE_POSITIONS, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0},
        {2, 50, 4, 2, 64, 0, 0, ROPE_POSITIONS, 1, 1, 1, 1, 0, 0, 0, 0, 1, 0, 0},
        {2, 24, 1, 0, 2048, 0, 1, ROPE_TABLE_BS, 1, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0},
        {2, 24, 1, 0, 2048, 0, 1, ROPE_POSITIONS, 3, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0},
        {1, 40, 3, 0, 128, 96, 1, ROPE_POSITIONS, 3, 1, 0, 0, 0, 0, 3, 1, 0, 0, 0},
        {2, 16, 5, 3, 64, 0, 1, ROPE_POSITIONS, 1, 0, 0, 0, 1, 0, 0, 1, 0, 0, 0},
        {1, 7, 1, 1, 8, 6, 0, ROPE_TABLE_S, 1, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0},
        {2, 5, 2, 0, 2, 0, 0, ROPE_POSITIONS, 1, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0},
        {1, 300, 32, 8, 128, 0, 0, ROPE_TABLE_BS, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0},
        {1, 300, 32, 8, 128, 0, 0, ROPE_POSITIONS, 1, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0},
        /* LTX-sized launches (5200 tokens of 2048): enough rows that the GPU row
         * kernels take 4 chunks per thread (their 48-register forms), not the
         * 2 of launches under two waves; every row from 17 on is in the quick suite */
        {2, 2600, 1, 0, 2048, 0, 1, ROPE_POSITIONS, 3, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        {2, 2600, 1, 0, 2048, 0, 1, ROPE_POSITIONS, 3, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        /* the GPU row kernel with partial rotary (pass-through chunks in the
         * rows), and with rows of 16384 channels (512 threads per row) */
        {2, 40, 4, 0, 256, 128, 1, ROPE_POSITIONS, 3, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        {1, 40, 2, 0, 8192, 0, 1, ROPE_POSITIONS, 3, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        /* HF's [B, H, S, Dh] memory with partial rotary: the GPU heads kernel's
         * head-major items with pass-through chunks */
        {2, 33, 6, 2, 128, 64, 0, ROPE_TABLE_BS, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0},
        /* q + k in [B, S, H, Dh] memory with padded rows, tables of the rows'
         * dtype, in place, and with f32 tables shared over tokens: the GPU
         * heads kernel's token-major items */
        {2, 19, 6, 2, 64, 0, 0, ROPE_TABLE_BS, 1, 0, 0, 0, 0, 1, 4, 0, 1, 0, 0},
        {3, 21, 12, 4, 128, 0, 0, ROPE_TABLE_S, 1, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0},
        /* axis maps with out-of-range entries (the API asks for 0 .. n_axes - 1;
         * only the CPU backend reads the map on the host, and rejects it): on
         * the GPU each such pair takes some coordinate of its token and nothing
         * is read past the token's positions. The rope row kernel's one-head
         * form, its general form (several heads, partial rotary), the heads
         * kernel (HALF, q + k) and the flat kernel (unaligned rows) */
        {2, 40, 1, 0, 2048, 0, 1, ROPE_POSITIONS, 3, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1},
        {1, 40, 3, 0, 128, 96, 1, ROPE_POSITIONS, 3, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1},
        {2, 20, 4, 2, 64, 0, 0, ROPE_POSITIONS, 3, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1},
        {1, 9, 2, 1, 40, 0, 1, ROPE_POSITIONS, 3, 1, 0, 0, 0, 0, 3, 1, 0, 0, 1},
        /* odd head sizes: a pass-through tail of odd length after the rotated
         * channels (the scalar path of every kernel's last chunk), tables and
         * positions, both conventions, in place */
        {2, 7, 3, 1, 9, 6, 0, ROPE_TABLE_S, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        {1, 5, 2, 1, 33, 32, 1, ROPE_POSITIONS, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        {2, 6, 2, 2, 7, 4, 1, ROPE_TABLE_BS, 1, 0, 0, 0, 0, 1, 0, 1, 1, 0, 0},
        {1, 20, 1, 0, 2049, 2048, 1, ROPE_POSITIONS, 3, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    };
    int n = (int)(sizeof cases / sizeof cases[0]);
    for (int i = 0; i < n; i++) {
        const rc *r = &cases[i];
        if (quick && (i % 3 != 0) && i != 4 && i != 7 && i < 17)
            continue;
        tcase c = case_base(op, dtype);
        c.B = r->B;
        c.S = r->S;
        c.H = r->H;
        c.Hk = op == KF_OP_ROPE ? r->Hk : 0;
        c.Dh = r->Dh;
        c.rot = r->rot;
        c.mode = r->conv;
        c.form = r->form;
        c.n_axes = r->n_axes;
        c.axis_given = r->axis;
        c.big_pos = r->big;
        c.zero_freqs = r->zero;
        c.hf_layout = op == KF_OP_ROPE ? r->hf : 0;
        c.tdtype = r->tab_act ? dtype : KF_F32;
        c.pad = r->pad;
        c.misalign = r->mis;
        c.in_place = r->in_place;
        c.specials = r->specials && r->form != ROPE_POSITIONS;
        c.bad_axis = r->bad;
        /* every other 3-axis positions row: a video grid of coordinates */
        c.pos_grid = r->form == ROPE_POSITIONS && r->n_axes == 3 && i % 2 == 1;
        if (op == KF_OP_RMS_NORM_ROPE) {
            c.rms_mode = i % 3;
            c.wdtype = (i % 4 == 3) ? -1 : (i % 2 ? dtype : KF_F32);
            if (c.rms_mode == KF_RMS_GEMMA) {
                c.offset = GEMMA_OFFSETS[(i / 3) % 4];
                if (c.wdtype < 0)
                    c.wdtype = KF_F32;
            }
            c.eps = 1e-5f;
            if (r->bad) { /* a weight of the rows' dtype, no offset: LTX's form */
                c.rms_mode = KF_RMS_LLAMA;
                c.wdtype = dtype;
                c.offset = 0.0f;
            }
        }
        suite_case(s, &c);
    }
}

static kf_status run_suite(kf_ctx *ctx, kf_ctx *other, const kft_options *opt,
                           kft_result *res)
{
    if (!ctx || !opt || !res)
        return KF_ERR_NULL_POINTER;
    tsuite s;
    memset(&s, 0, sizeof s);
    s.ctx = ctx;
    s.other = other;
    s.opt = opt;
    s.out = opt->report ? opt->report : stdout;
    s.res = res;
    s.seed = opt->seed ? opt->seed : clock_seed();
    fprintf(s.out, "suite on %s%s%s: seed %llu%s\n", kf_ctx_describe(ctx),
            other ? ", bitwise against " : "", other ? kf_ctx_describe(other) : "", s.seed,
            opt->quick ? " (quick)" : "");
    static const int dtypes[] = {KF_F32, KF_F16, KF_BF16};
    for (int op = 0; op < KF_OP_COUNT; op++) {
        int before_failed = res->failed, before_passed = res->passed;
        for (int d = 0; d < 3; d++) {
            if (is_row_op((kf_op)op))
                row_op_cases(&s, (kf_op)op, dtypes[d], opt->quick);
            else
                rope_cases(&s, (kf_op)op, dtypes[d], opt->quick);
        }
        if (opt->verbose || res->failed != before_failed)
            fprintf(s.out, "%-16s %d passed, %d failed\n", kf_op_name((kf_op)op),
                    res->passed - before_passed, res->failed - before_failed);
    }
    fflush(s.out);
    return KF_OK;
}

kf_status kft_run_suite(kf_ctx *ctx, const kft_options *opt, kft_result *res)
{
    return run_suite(ctx, NULL, opt, res);
}

kf_status kft_run_suite_bitwise(kf_ctx *ctx, kf_ctx *other, const kft_options *opt,
                                kft_result *res)
{
    if (!other)
        return KF_ERR_NULL_POINTER;
    return run_suite(ctx, other, opt, res);
}

/* ---- random cases (fuzzing) ---------------------------------------------------
 * Case k of a run with seed S is drawn from case_seed(S, k) alone (its inputs
 * from the next value), so `--fuzz-case k --seed S` replays it by itself.
 * Every draw is a valid call: any failure, an error status included, is a
 * finding. Shapes lean towards the places kernels split on: D near multiples
 * of 8 and of the block sizes, the 16384 limit of one block's row, odd row
 * starts and strides, rows enough for several waves now and then. */

static int64_t pick_i(rng *r, int64_t lo, int64_t hi)    /* uniform in [lo, hi] */
{
    return lo + (int64_t)(rng_next(r) % (uint64_t)(hi - lo + 1));
}

static int chance(rng *r, double p)
{
    return rng_uniform(r) < p;
}

/* a row length: small, LLM / DiT widths and their neighbours, odd, long */
static int64_t fuzz_D(rng *r)
{
    static const int64_t NEAR[] = {8, 32, 64, 256, 512, 768, 1024, 2048, 3072, 3584, 4096,
                                   5120, 8192, 12288, 16384, 16392};
    double u = rng_uniform(r);
    if (u < 0.25)
        return pick_i(r, 1, 64);
    if (u < 0.55)
        return pick_i(r, 65, 4200);
    if (u < 0.85)
        return NEAR[pick_i(r, 0, (int64_t)(sizeof NEAR / sizeof NEAR[0]) - 1)] + pick_i(r, -3, 3);
    return pick_i(r, 4200, 24000);
}

/* rows for a case of about D columns: mostly few, sometimes a grid of many
 * waves (the GPU row kernels change their chunks per thread with the row
 * count), within elems elements */
static int64_t fuzz_rows(rng *r, int64_t D, int64_t elems)
{
    int64_t rows = chance(r, 0.15) ? pick_i(r, 1000, 9000) : chance(r, 0.5) ? pick_i(r, 1, 8)
                                                                           : pick_i(r, 9, 300);
    int64_t cap = elems / D > 0 ? elems / D : 1;
    return rows < cap ? rows : cap;
}

static int fuzz_dtype(rng *r)
{
    static const int dtypes[] = {KF_F32, KF_F16, KF_BF16};
    return dtypes[pick_i(r, 0, 2)];
}

/* gelu of negative inputs (see row_op_cases): x around -6, for f16 -3 (around
 * -6 a small case's outputs can all be f16 subnormals, whose rounding alone
 * misses the norm-wise bound) */
static double negative_gelu_center(int dtype)
{
    return dtype == KF_F16 ? -3.0 : -6.0;
}

static void fuzz_row_case(rng *r, tcase *c, int64_t elems)
{
    kf_op op = c->op;
    int dt = c->dtype;
    int ada = op == KF_OP_ADA_NORM || op == KF_OP_ADD_ADA_NORM || op == KF_OP_GATED_RESIDUAL;
    c->D = fuzz_D(r);
    if (op == KF_OP_GLU && c->D > 12000)
        c->D /= 2;                              /* packed rows are 2 D wide */
    int64_t rows = fuzz_rows(r, c->D, elems);
    c->B = ada || chance(r, 0.3) ? pick_i(r, 1, 4) : 1;
    c->S = (rows + c->B - 1) / c->B;
    c->ndim = ada ? 3 : (int)pick_i(r, 2, 4);
    if (c->ndim == 2 && c->B > 1) {             /* [B*S, D]: B is only a factor of the rows */
        c->S *= c->B;
        c->B = 1;
    }
    c->pad = chance(r, 0.4) ? pick_i(r, 1, 40) : 0;
    c->outer = c->ndim >= 3 && chance(r, 0.3) ? (int)pick_i(r, 1, 3) : 0;
    c->param_offset = chance(r, 0.25) ? pick_i(r, 1, 9) : 0;
    c->cond_pad = chance(r, 0.2) ? pick_i(r, 1, 17) : 0;
    c->misalign = chance(r, 0.4) ? pick_i(r, 1, 9) : 0;
    c->in_place = op != KF_OP_ADD_ADA_NORM && op != KF_OP_GATED_RESIDUAL && chance(r, 0.2);
    c->specials = c->B * c->S >= 5 && chance(r, 0.15);
    c->eps = chance(r, 0.5) ? 1e-6f : chance(r, 0.5) ? 1e-5f : 1e-3f;
    int wpick = (int)pick_i(r, 0, 2);           /* f32 weight, the rows' dtype, none */
    int wdtype = wpick == 0 ? KF_F32 : wpick == 1 ? dt : -1;
    switch (op) {
    case KF_OP_RMS_NORM:
    case KF_OP_ADD_RMS_NORM:
        c->mode = (int)pick_i(r, 0, 2);
        c->wdtype = wdtype;
        if (c->mode == KF_RMS_GEMMA) {
            c->offset = GEMMA_OFFSETS[pick_i(r, 0, 3)];
            if (c->wdtype < 0)
                c->wdtype = KF_F32;
        }
        break;
    case KF_OP_LAYER_NORM:
        c->wdtype = wdtype;
        c->bias = chance(r, 0.6);
        break;
    case KF_OP_ADA_NORM:
    case KF_OP_ADD_ADA_NORM:
    case KF_OP_GATED_RESIDUAL:
        c->mode = (int)pick_i(r, 0, 1);
        c->wdtype = op == KF_OP_GATED_RESIDUAL ? -1 : chance(r, 0.3) ? wdtype : -1;
        c->cond = (int)pick_i(r, 0, 3);
        c->cdtype = chance(r, 0.5) ? dt : KF_F32;
        c->shift = chance(r, 0.75);
        c->shift_unbind = c->shift && c->cond == COND_TOKEN && chance(r, 0.2);
        c->gate = op == KF_OP_GATED_RESIDUAL || chance(r, 0.8);
        break;
    case KF_OP_GLU:
        c->mode = (int)pick_i(r, 0, 2);
        c->packed = chance(r, 0.5);
        c->gate_first = chance(r, 0.5);
        c->in_place &= !c->packed;        /* y may alias gate or up, not the packed input */
        if (c->mode != KF_ACT_SILU && chance(r, 0.2))
            c->x_center = negative_gelu_center(dt);
        break;
    case KF_OP_GELU:
        c->approx = chance(r, 0.5);
        if (chance(r, 0.2))
            c->x_center = negative_gelu_center(dt);
        break;
    case KF_OP_SOFTMAX: {
        /* and logits far beyond any model's: large (1000 x), huge but finite
         * (-3e30 x), overflowing f32 (1e38 x: the limit, one-hot); 0 */
        static const float scales[] = {1.0f, 0.125f, 0.08838835f, 2.5f, -0.5f,
                                       1000.0f, -3e30f, 1e38f, 0.0f};
        c->scale = scales[pick_i(r, 0, 8)];
        break;
    }
    default:
        break;
    }
    /* LayerNorm-kind rows around a large value (the variance from the
     * deviations, see run_norm_ops) */
    int layer_kind = op == KF_OP_LAYER_NORM ||
                     ((op == KF_OP_ADA_NORM || op == KF_OP_ADD_ADA_NORM) && c->mode == KF_NORM_LAYER);
    if (layer_kind && chance(r, 0.15))
        c->x_center = dt == KF_F32 ? (chance(r, 0.5) ? 1000.0 : 32.0) : 256.0;
}

static void fuzz_rope_case(rng *r, tcase *c, int64_t elems)
{
    int nr = c->op == KF_OP_RMS_NORM_ROPE;
    double u = rng_uniform(r);
    if (u < 0.6) { /* Llama-like heads */
        static const int64_t DH[] = {2, 8, 32, 64, 80, 96, 128, 256};
        c->Dh = chance(r, 0.8) ? DH[pick_i(r, 0, 7)] : 2 * pick_i(r, 1, 150);
        c->H = pick_i(r, 1, 40);
    } else { /* LTX-like: one wide head, or a few */
        c->Dh = chance(r, 0.5) ? 2048 : 2 * pick_i(r, 100, 4200);
        c->H = chance(r, 0.7) ? 1 : pick_i(r, 2, 4);
    }
    c->B = pick_i(r, 1, 3);
    int64_t per_token = c->H * c->Dh;
    int64_t max_tokens = elems / per_token > 0 ? elems / per_token : 1;
    int64_t S = chance(r, 0.15) ? pick_i(r, 500, 3000) : chance(r, 0.5) ? pick_i(r, 1, 8)
                                                                       : pick_i(r, 9, 300);
    if (c->B * S > max_tokens)
        S = max_tokens / c->B > 0 ? max_tokens / c->B : 1;
    c->S = S;
    c->Hk = !nr && chance(r, 0.6) ? pick_i(r, 1, c->H) : 0;
    c->rot = chance(r, 0.7) ? 0 : 2 * (int)pick_i(r, 1, c->Dh / 2);
    if (c->rot > 0 && chance(r, 0.25))
        c->Dh += 1; /* an odd head: a pass-through tail of odd length */
    c->mode = (int)pick_i(r, 0, 1);
    c->form = (int)pick_i(r, 0, 2);
    c->n_axes = c->form == ROPE_POSITIONS ? (int)pick_i(r, 1, 3) : 1;
    c->axis_given = c->form == ROPE_POSITIONS && chance(r, 0.5);
    c->big_pos = chance(r, 0.3);
    c->zero_freqs = chance(r, 0.2);
    c->hf_layout = !nr && chance(r, 0.3);
    c->tdtype = chance(r, 0.5) ? KF_F32 : c->dtype;
    c->pos_shared = chance(r, 0.3);
    c->pos_grid = c->form == ROPE_POSITIONS && c->n_axes > 1 && chance(r, 0.5);
    c->param_offset = chance(r, 0.25) ? pick_i(r, 1, 9) : 0;
    c->outer = c->B > 1 && chance(r, 0.15) ? 3 : 0;
    c->tab_bcast = chance(r, 0.3);
    c->pad = chance(r, 0.3) ? pick_i(r, 1, 9) : 0;
    c->misalign = chance(r, 0.3) ? pick_i(r, 1, 5) : 0;
    c->in_place = chance(r, 0.25);
    c->specials = c->form != ROPE_POSITIONS && chance(r, 0.1);
    if (nr) {
        c->rms_mode = (int)pick_i(r, 0, 2);
        int wpick = (int)pick_i(r, 0, 2);
        c->wdtype = wpick == 0 ? KF_F32 : wpick == 1 ? c->dtype : -1;
        if (c->rms_mode == KF_RMS_GEMMA) {
            c->offset = GEMMA_OFFSETS[pick_i(r, 0, 3)];
            if (c->wdtype < 0)
                c->wdtype = KF_F32;
        }
        c->eps = chance(r, 0.5) ? 1e-6f : 1e-5f;
    }
}

/* Fuzz case k: op and dtype drawn unless the options fix them. */
static tcase fuzz_case(const kft_options *opt, uint64_t case_seed_value)
{
    rng r = {case_seed_value};
    kf_op op = (kf_op)pick_i(&r, 0, KF_OP_COUNT - 1);
    int dt = fuzz_dtype(&r);
    if (opt->op)
        for (int o = 0; o < KF_OP_COUNT; o++)
            if (!strcmp(opt->op, kf_op_name((kf_op)o)))
                op = (kf_op)o;
    if (opt->dtype >= 0)
        dt = opt->dtype;
    tcase c = case_base(op, dt);
    /* elements per tensor: mostly small (fast on the emulator), a few large */
    int64_t elems = chance(&r, 0.1) ? ((int64_t)1 << 22) : ((int64_t)1 << 18);
    if (is_row_op(op))
        fuzz_row_case(&r, &c, elems);
    else
        fuzz_rope_case(&r, &c, elems);
    return c;
}

kf_status kft_run_fuzz(kf_ctx *ctx, const kft_options *opt, long count, long only,
                       kft_result *res)
{
    if (!ctx || !opt || !res || count < 0)
        return KF_ERR_NULL_POINTER;
    FILE *out = opt->report ? opt->report : stdout;
    unsigned long long seed = opt->seed ? opt->seed : clock_seed();
    fprintf(out, "fuzz on %s: %ld random cases, seed %llu\n", kf_ctx_describe(ctx),
            only >= 0 ? 1L : count, seed);
    for (long k = only >= 0 ? only : 0; k < (only >= 0 ? only + 1 : count); k++) {
        uint64_t cs = case_seed(seed, (unsigned long long)k);
        tcase c = fuzz_case(opt, cs);
        if (!kf_supports(ctx, c.op, (kf_dtype)c.dtype)) {
            fprintf(out, "FAIL fuzz case %ld: %s %s not supported by the backend\n", k,
                    kf_op_name(c.op), kf_dtype_name((kf_dtype)c.dtype));
            res->failed++;
            continue;
        }
        rng data = {cs};
        rng_next(&data);
        struct timespec t0, t1;
        timespec_get(&t0, TIME_UTC);
        int r = run_one(ctx, &c, rng_next(&data), out, opt->verbose, NULL);
        timespec_get(&t1, TIME_UTC);
        if (opt->verbose)
            fprintf(out, "     random case %ld: %.3f s\n", k,
                    (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
        if (r == 1) {
            res->passed++;
        } else {
            res->failed++;
            /* the options that drew the cases and the backend, for the replay lines */
            char fix[96] = "";
            snprintf(fix, sizeof fix, " --backend %s%s%s%s%s",
                     kf_ctx_backend(ctx) == KF_BACKEND_GPU ? "gpu" : "cpu",
                     opt->op ? " --op " : "", opt->op ? opt->op : "",
                     opt->dtype >= 0 ? " --dtype " : "",
                     opt->dtype >= 0 ? kf_dtype_name((kf_dtype)opt->dtype) : "");
            fprintf(out, "     random case %ld of seed %llu (`--fuzz %ld --seed %llu%s` replays the "
                         "run; the build's `test_suite --fuzz-case %ld --seed %llu%s` does this "
                         "case alone)\n",
                    k, seed, count, seed, fix, k, seed, fix);
        }
    }
    fflush(out);
    return KF_OK;
}

/* ---- bench cases ------------------------------------------------------------ */

kf_status kft_verify_bench_case(kf_ctx *ctx, const kft_bench_case *bc, int64_t max_rows,
                                uint64_t seed, double *rel_err, int *ok)
{
    if (!ctx || !bc || !rel_err || !ok)
        return KF_ERR_NULL_POINTER;
    if ((int)bc->op < 0 || bc->op >= KF_OP_COUNT || bc->batch < 1 || bc->tokens < 1 ||
        bc->cols < 1)
        return KF_ERR_INVALID_ARG;
    tcase c = case_base(bc->op, bc->dtype);
    int64_t B = bc->batch, S = bc->tokens;
    if (max_rows > 0 && B * S > max_rows) {
        S = max_rows / B > 0 ? max_rows / B : 1;
        if (B * S > max_rows)
            B = max_rows > 0 ? max_rows : 1;
    }
    c.B = B;
    c.S = S;
    c.D = bc->cols;
    c.ndim = 3;
    c.eps = KFT_BENCH_EPS;
    /* bench's call (tools/kfuse/bench.c, case_call): its tensors, layouts and settings */
    switch (bc->op) {
    case KF_OP_RMS_NORM:
    case KF_OP_ADD_RMS_NORM:
        c.mode = bc->variant;
        c.wdtype = bc->dtype;
        c.offset = 0.0f;
        break;
    case KF_OP_LAYER_NORM:
        c.wdtype = bc->dtype;
        c.bias = 1;
        break;
    case KF_OP_ADA_NORM:
    case KF_OP_ADD_ADA_NORM:
    case KF_OP_GATED_RESIDUAL: /* no weight; ada: shift, no gate; gated_residual: the gate */
        c.mode = bc->variant;
        c.cond = bc->form ? COND_TOKEN : COND_BATCH;
        c.cdtype = bc->dtype;
        c.shift = 1;
        c.gate = bc->op == KF_OP_GATED_RESIDUAL;
        break;
    case KF_OP_GLU:
        c.mode = bc->variant;
        c.packed = bc->form;
        c.gate_first = 0;
        break;
    case KF_OP_GELU:
        c.approx = bc->variant;
        break;
    case KF_OP_SOFTMAX:
        c.scale = KFT_BENCH_SOFTMAX_SCALE;
        break;
    case KF_OP_ROPE:
    case KF_OP_RMS_NORM_ROPE:
        c.H = bc->heads > 0 ? bc->heads : 1;
        c.Hk = bc->op == KF_OP_ROPE ? bc->kv_heads : 0;
        c.Dh = bc->cols;
        c.mode = bc->variant;
        c.form = bc->form ? ROPE_POSITIONS : ROPE_TABLE_BS;
        c.tdtype = KF_F32;
        if (bc->form) { /* 3 axes by a map, identity pairs first, a video grid of positions */
            c.n_axes = KFT_BENCH_ROPE_AXES;
            c.axis_given = 1;
            c.zero_freqs = 1;
            c.pos_grid = 1;
        }
        c.rms_mode = KFT_BENCH_RMS_NORM_ROPE_MODE;
        c.wdtype = bc->op == KF_OP_RMS_NORM_ROPE ? (int)bc->dtype : -1;
        break;
    default:
        break;
    }
    double rel = 0.0;
    int r = run_one(ctx, &c, seed, stderr, 0, &rel);
    *rel_err = rel;
    *ok = r == 1;
    return r < 0 ? KF_ERR_ALLOC : KF_OK;
}
