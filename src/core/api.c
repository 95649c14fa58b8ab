/* api.c - the public op functions: check every argument (a caller's mistake
 * returns a status with a message, never crashes), normalize the views to the
 * 4-D form the backends expect (see internal.h), then dispatch through
 * ctx->ops. No op does work on the host beyond this: no allocation, no
 * device query. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/internal.h"

/* ---- single-tensor checks ---- */

static int is_activation_dtype(int dtype)
{
    return dtype == KF_F32 || dtype == KF_F16 || dtype == KF_BF16;
}

/* Structural checks on one view: pointer, ndim, shape, strides, dtype range.
 * broadcast_ok: stride 0 allowed on dims of size > 1 (inputs the op only
 * reads). */
static kf_status check_view(kf_ctx *ctx, const char *op, const char *name, const kf_tensor *t,
                            int broadcast_ok)
{
    if (t == NULL)
        return kf_set_error(ctx, KF_ERR_NULL_POINTER, "%s: %s is NULL", op, name);
    if (t->ndim < 1 || t->ndim > KF_MAX_DIMS)
        return kf_set_error(ctx, KF_ERR_SHAPE, "%s: %s has ndim %d, must be 1..%d", op, name,
                            (int)t->ndim, KF_MAX_DIMS);
    if (kf_dtype_size((kf_dtype)t->dtype) == 0)
        return kf_set_error(ctx, KF_ERR_DTYPE, "%s: %s has unknown dtype %d", op, name,
                            (int)t->dtype);
    int empty = 0;
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] < 0)
            return kf_set_error(ctx, KF_ERR_SHAPE, "%s: %s has negative size %lld in dim %d", op,
                                name, (long long)t->shape[i], i);
        if (t->stride[i] < 0)
            return kf_set_error(ctx, KF_ERR_STRIDE, "%s: %s has negative stride %lld in dim %d",
                                op, name, (long long)t->stride[i], i);
        if (t->stride[i] == 0 && t->shape[i] > 1 && !broadcast_ok)
            return kf_set_error(ctx, KF_ERR_STRIDE,
                                "%s: %s has stride 0 in dim %d (size %lld): a broadcast, which "
                                "an output, a tensor written in place or a parameter vector "
                                "cannot be",
                                op, name, i, (long long)t->shape[i]);
        empty |= t->shape[i] == 0;
    }
    /* A non-empty view: its element count and the bytes from its first to its
     * last element must fit in int64 (the offsets the backends form), or a
     * huge shape or stride would wrap around to other memory. */
    int64_t numel = empty ? 0 : 1;
    int64_t span = 0; /* elements from the first to the last, in units of the dtype */
    const int64_t elem = (int64_t)kf_dtype_size((kf_dtype)t->dtype);
    for (int i = 0; i < t->ndim && !empty; i++) {
        if (numel > INT64_MAX / t->shape[i])
            return kf_set_error(ctx, KF_ERR_SHAPE, "%s: %s has more than 2^63 elements", op,
                                name);
        numel *= t->shape[i];
        int64_t reach = t->shape[i] - 1;
        if (t->stride[i] > 0 && reach > (INT64_MAX / elem - span) / t->stride[i])
            return kf_set_error(ctx, KF_ERR_STRIDE,
                                "%s: %s spans more than 2^63 bytes (stride %lld in dim %d)", op,
                                name, (long long)t->stride[i], i);
        span += reach * t->stride[i];
    }
    int last = t->ndim - 1;
    if (t->shape[last] > 1 && t->stride[last] != 1)
        return kf_set_error(ctx, KF_ERR_STRIDE,
                            "%s: %s has stride %lld in its last dim, must be 1", op, name,
                            (long long)t->stride[last]);
    if (numel > 0 && t->data == NULL)
        return kf_set_error(ctx, KF_ERR_NULL_POINTER, "%s: %s->data is NULL", op, name);
    if (numel > 0 && (uintptr_t)t->data % (uintptr_t)elem != 0)
        return kf_set_error(ctx, KF_ERR_INVALID_ARG,
                            "%s: %s->data %p is not aligned to its %d-byte elements", op, name,
                            t->data, (int)elem);
    return KF_OK;
}

/* Element count of a view that passed check_view (the count of a non-empty
 * one fits int64; an empty one may have other dims of any size). */
static int64_t numel_of(const kf_tensor *t)
{
    for (int i = 0; i < t->ndim; i++)
        if (t->shape[i] == 0)
            return 0;
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= t->shape[i];
    return n;
}

/* Pad to 4-D with leading size-1 dims; a last dim of size 1 gets stride 1. */
static kf_tensor to4(const kf_tensor *t)
{
    kf_tensor r;
    memset(&r, 0, sizeof r);
    r.data = t->data;
    r.dtype = t->dtype;
    r.ndim = 4;
    int pad = 4 - t->ndim;
    for (int i = 0; i < 4; i++) {
        if (i < pad) {
            r.shape[i] = 1;
            r.stride[i] = 0;
        } else {
            r.shape[i] = t->shape[i - pad];
            r.stride[i] = t->shape[i - pad] == 1 ? 0 : t->stride[i - pad];
        }
    }
    r.stride[3] = 1;
    return r;
}

/* An activation: structural checks plus an activation dtype. An input the op
 * only reads may repeat rows through stride 0 (an expanded tensor: the same
 * row read more than once); a tensor the op writes (WRITTEN) may not. */
enum { READ = 0, WRITTEN = 1 };
static kf_status check_activation(kf_ctx *ctx, const char *op, const char *name,
                                  const kf_tensor *t, int written)
{
    kf_status st = check_view(ctx, op, name, t, written == READ);
    if (st != KF_OK)
        return st;
    if (!is_activation_dtype(t->dtype))
        return kf_set_error(ctx, KF_ERR_DTYPE, "%s: %s has dtype %s, must be f32, f16 or bf16",
                            op, name, kf_dtype_name((kf_dtype)t->dtype));
    return KF_OK;
}

/* other must have exactly x's ndim, shape and dtype. */
static kf_status check_same(kf_ctx *ctx, const char *op, const char *xname, const kf_tensor *x,
                            const char *name, const kf_tensor *other, int written)
{
    kf_status st = check_activation(ctx, op, name, other, written);
    if (st != KF_OK)
        return st;
    if (other->dtype != x->dtype)
        return kf_set_error(ctx, KF_ERR_DTYPE, "%s: %s has dtype %s but %s has %s", op, name,
                            kf_dtype_name((kf_dtype)other->dtype), xname,
                            kf_dtype_name((kf_dtype)x->dtype));
    if (other->ndim != x->ndim)
        return kf_set_error(ctx, KF_ERR_SHAPE, "%s: %s has %d dims but %s has %d", op, name,
                            (int)other->ndim, xname, (int)x->ndim);
    for (int i = 0; i < x->ndim; i++)
        if (other->shape[i] != x->shape[i])
            return kf_set_error(ctx, KF_ERR_SHAPE, "%s: %s has size %lld in dim %d but %s has %lld",
                                op, name, (long long)other->shape[i], i, xname,
                                (long long)x->shape[i]);
    return KF_OK;
}

/* The error for a parameter of dtype `dtype` where f32 or the activations'
 * dtype act_dtype is taken: "must be f32 or bf16", or "must be f32" when
 * act_dtype is f32 or there are no activations to match (act_dtype < 0). */
static kf_status not_f32_or(kf_ctx *ctx, const char *op, const char *name, int dtype,
                            int act_dtype)
{
    const char *got = kf_dtype_name((kf_dtype)dtype);
    if (act_dtype < 0 || act_dtype == KF_F32)
        return kf_set_error(ctx, KF_ERR_DTYPE, "%s: %s has dtype %s, must be f32", op, name, got);
    return kf_set_error(ctx, KF_ERR_DTYPE, "%s: %s has dtype %s, must be f32 or %s", op, name,
                        got, kf_dtype_name((kf_dtype)act_dtype));
}

/* A parameter vector of n elements (weight, bias, freqs): 1-D, dtype f32 or
 * act_dtype (act_dtype < 0: f32 only). Optional when may_be_null. */
static kf_status check_vector(kf_ctx *ctx, const char *op, const char *name, const kf_tensor *t,
                              int64_t n, int act_dtype, const char *what_n)
{
    kf_status st = check_view(ctx, op, name, t, 0);
    if (st != KF_OK)
        return st;
    if (t->ndim != 1)
        return kf_set_error(ctx, KF_ERR_SHAPE, "%s: %s must be 1-D, has %d dims", op, name,
                            (int)t->ndim);
    if (t->dtype != KF_F32 && t->dtype != act_dtype)
        return not_f32_or(ctx, op, name, t->dtype, act_dtype);
    if (t->shape[0] != n)
        return kf_set_error(ctx, KF_ERR_SHAPE, "%s: %s has %lld elements, %s %lld", op, name,
                            (long long)t->shape[0], what_n, (long long)n);
    return KF_OK;
}

/* Conditioning broadcast against the activation x (named xname: x or h):
 * scale, shift, gate: dtype f32 or x's; ndim at most x's; after padding both
 * to 4-D each outer dim equals x's or is 1; last dim D. Writes the normalized
 * view (broadcast dims stride 0) to *out. */
static kf_status check_conditioning(kf_ctx *ctx, const char *op, const char *name,
                                    const kf_tensor *t, const char *xname, const kf_tensor *x,
                                    kf_tensor *out)
{
    kf_status st = check_view(ctx, op, name, t, 1);
    if (st != KF_OK)
        return st;
    const kf_tensor x4 = to4(x);
    if (t->dtype != KF_F32 && t->dtype != x4.dtype)
        return not_f32_or(ctx, op, name, t->dtype, x4.dtype);
    if (t->ndim > x->ndim)
        return kf_set_error(ctx, KF_ERR_SHAPE,
                            "%s: %s has %d dims, more than %s's %d (it broadcasts against %s)",
                            op, name, (int)t->ndim, xname, (int)x->ndim, xname);
    kf_tensor c = to4(t);
    if (c.shape[3] != x4.shape[3])
        return kf_set_error(ctx, KF_ERR_SHAPE, "%s: %s has %lld columns but %s rows have %lld",
                            op, name, (long long)c.shape[3], xname, (long long)x4.shape[3]);
    for (int i = 0; i < 3; i++) {
        if (c.shape[i] == x4.shape[i])
            continue;
        if (c.shape[i] != 1)
            return kf_set_error(ctx, KF_ERR_SHAPE,
                                "%s: %s has size %lld in outer dim %d (of 4-D view), %s has "
                                "%lld; must match or be 1",
                                op, name, (long long)c.shape[i], i, xname,
                                (long long)x4.shape[i]);
        c.shape[i] = x4.shape[i];
        c.stride[i] = 0;
    }
    *out = c;
    return KF_OK;
}

static kf_status check_eps(kf_ctx *ctx, const char *op, float eps)
{
    if (!(eps >= 0.0f) || isinf(eps))
        return kf_set_error(ctx, KF_ERR_INVALID_ARG, "%s: eps %g must be finite and >= 0", op,
                            (double)eps);
    return KF_OK;
}

static kf_status check_rms_mode(kf_ctx *ctx, const char *op, kf_rms_mode mode, float offset)
{
    if (mode != KF_RMS_LLAMA && mode != KF_RMS_GEMMA && mode != KF_RMS_NONE)
        return kf_set_error(ctx, KF_ERR_INVALID_ARG, "%s: rms mode %d is not LLAMA, GEMMA or NONE",
                            op, (int)mode);
    if (!isfinite(offset))
        return kf_set_error(ctx, KF_ERR_INVALID_ARG, "%s: offset %g is not finite", op,
                            (double)offset);
    if (mode != KF_RMS_GEMMA && offset != 0.0f)
        return kf_set_error(ctx, KF_ERR_INVALID_ARG,
                            "%s: offset %g is only used in GEMMA mode; must be 0 here", op,
                            (double)offset);
    return KF_OK;
}

static kf_status check_ctx(kf_ctx *ctx)
{
    if (ctx == NULL)
        return KF_ERR_NULL_POINTER;
    return KF_OK;
}

#define TRY(expr)                                                                                  \
    do {                                                                                           \
        kf_status try_st_ = (expr);                                                                \
        if (try_st_ != KF_OK)                                                                      \
            return try_st_;                                                                        \
    } while (0)

/* The backend entry must exist (kf_supports says the same). */
#define NEED_OP(ctx, field, opname)                                                                \
    do {                                                                                           \
        if ((ctx)->ops->field == NULL)                                                             \
            return kf_set_error((ctx), KF_ERR_UNSUPPORTED, "%s: not implemented on the %s backend", \
                                (opname), (ctx)->backend == KF_BACKEND_GPU ? "GPU" : "CPU");       \
    } while (0)

/* ---- memory shared between the tensors of one call ----
 * A tensor the op writes may share memory with another tensor of the call only
 * as the documented in-place form: exactly the same view (pointer, dtype,
 * shape, strides) as its one input (y and x, q_out and q, k_out and k).
 * Every other sharing that can be shown from the views is rejected: a written
 * tensor whose own elements overlap, an exact alias that is not the in-place
 * pair, and any partial overlap. Overlap is decided exactly for two views of
 * one dtype and one stride pattern (slices of one buffer: rows shifted, q and
 * k as column slices of one fused projection), for any view against a dense
 * one (strides that nest without gaps), and row by row when one of them has
 * at most MEET_ROWS rows. Views of different strides, both with gaps and
 * many rows, are not examined further, and neither is a search that passes
 * MEET_BUDGET branches (strides that do not nest: each dim's stride within
 * the reach of the smaller dims), nor a view spanning over 2^60 bytes. */

typedef struct call_tensor {
    const char *name;
    const kf_tensor *t;          /* NULL: an optional argument not given */
    int written;
    unsigned in_place_of;        /* IN_PLACE(j) bits: the inputs j this may alias exactly */
} call_tensor;
#define IN_PLACE(j) (1u << (j))

/* The bytes from the start of a (non-empty) view's first element to the end
 * of its last. */
static void byte_range(const kf_tensor *t, uintptr_t *lo, uintptr_t *hi)
{
    size_t elem = kf_dtype_size((kf_dtype)t->dtype);
    int64_t last = 0;
    for (int i = 0; i < t->ndim; i++)
        last += (t->shape[i] - 1) * t->stride[i];
    *lo = (uintptr_t)t->data;
    *hi = *lo + (uintptr_t)last * elem + elem;
}

static int bytes_meet(uintptr_t lo1, uintptr_t hi1, uintptr_t lo2, uintptr_t hi2)
{
    return lo1 < hi2 && lo2 < hi1;
}

/* Where views meet is a question about index lattices: is there an index
 * difference delta (delta_k in [-down_k, up_k]) with sum_k stride_k * delta_k
 * (bytes) in a target range [lo, hi]?
 *   - two views of one stride pattern share an element: target = the
 *     distance between their starts, up / down = the two views' last indices;
 *   - a view repeats an element: target 0 with delta != 0, up = down;
 *   - a view has an element inside a byte range: down = 0.
 * Solved dim by dim from the largest stride; each level tries only the deltas
 * that leave a remainder the smaller dims can still reach (one to three for
 * the usual nested strides). A search gives 1 (found), 0 (none), or -1 when
 * it would take more than its budget of branches (undecided). */
typedef struct meet_dim {
    int64_t stride;              /* bytes */
    int64_t up, down;            /* delta in [-down, up] */
    int64_t below_hi, below_lo;  /* the most and least the smaller dims add */
} meet_dim;

enum { MEET_BUDGET = 4096, MEET_ROWS = 256 };
/* Views spanning more than this many bytes are not searched (sums of two
 * spans stay far from int64's range). */
#define MEET_SPAN_LIMIT ((int64_t)1 << 60)

static int64_t floor_div(int64_t a, int64_t b) /* b > 0 */
{
    return a >= 0 ? a / b : -((-a + b - 1) / b);
}

static int meet_search(const meet_dim *dims, int n, int k, int64_t lo, int64_t hi, int *budget)
{
    if (k == n)
        return lo <= 0 && 0 <= hi;
    int64_t s = dims[k].stride;
    int64_t first = -floor_div(dims[k].below_hi - lo, s); /* ceil((lo - below_hi) / s) */
    int64_t last = floor_div(hi - dims[k].below_lo, s);
    if (first < -dims[k].down)
        first = -dims[k].down;
    if (last > dims[k].up)
        last = dims[k].up;
    for (int64_t delta = first; delta <= last; delta++) {
        if (--*budget < 0)
            return -1;
        int r = meet_search(dims, n, k + 1, lo - s * delta, hi - s * delta, budget);
        if (r != 0)
            return r;
    }
    return 0;
}

/* The search dims of view a against view b (b == a: a against itself; b NULL:
 * a's elements alone, down = 0), largest stride first. A dim where only one
 * view steps takes that view's stride; -1 when both step by different strides
 * or a span is too long. A dim of size 1 or stride 0 (a broadcast read) has
 * one index. */
static int meet_dims(const kf_tensor *a4, const kf_tensor *b4, meet_dim *dims)
{
    int64_t elem = (int64_t)kf_dtype_size((kf_dtype)a4->dtype);
    int n = 0;
    for (int i = 0; i < 4; i++) {
        int64_t na = a4->stride[i] ? a4->shape[i] : 1;
        int64_t nb = b4 && b4->stride[i] ? b4->shape[i] : 1;
        if (na == 1 && nb == 1)
            continue;
        if (na > 1 && nb > 1 && a4->stride[i] != b4->stride[i])
            return -1;
        int64_t stride = (na > 1 ? a4->stride[i] : b4->stride[i]) * elem;
        meet_dim m = {stride, na - 1, nb - 1, 0, 0};
        int at = n++;
        while (at > 0 && dims[at - 1].stride < m.stride) {
            dims[at] = dims[at - 1];
            at--;
        }
        dims[at] = m;
    }
    for (int k = n - 2; k >= 0; k--) {
        dims[k].below_hi = dims[k + 1].below_hi + dims[k + 1].stride * dims[k + 1].up;
        dims[k].below_lo = dims[k + 1].below_lo - dims[k + 1].stride * dims[k + 1].down;
    }
    /* Each view's reach (its span, below 2^63 bytes by check_view) must stay
     * under the limit, so that the search's sums of the two cannot overflow. */
    if (n > 0 && (dims[0].below_hi + dims[0].stride * dims[0].up > MEET_SPAN_LIMIT ||
                  -dims[0].below_lo + dims[0].stride * dims[0].down > MEET_SPAN_LIMIT))
        return -1;
    return n;
}

/* 1 when a view's elements fill every byte from its first to its last: in
 * stride order each dim steps by exactly the bytes the smaller dims cover (a
 * dense tensor, or dense rows of one, dims in any order). */
static int view_is_dense(const kf_tensor *t4)
{
    meet_dim dims[4];
    int n = meet_dims(t4, NULL, dims);
    int64_t elem = (int64_t)kf_dtype_size((kf_dtype)t4->dtype);
    int dense = n >= 0;
    for (int k = 0; k < n; k++)
        dense &= dims[k].stride == dims[k].below_hi + elem;
    return dense;
}

/* 1 when two different indices of a written view reach the same element (or
 * undecided within the budget: then 0, not shown). */
static int view_repeats(const kf_tensor *t4)
{
    meet_dim dims[4];
    int n = meet_dims(t4, t4, dims);
    int nested = 1; /* each stride beyond the reach of the smaller dims: no repeats */
    for (int k = 0; k < n; k++)
        nested &= dims[k].stride > dims[k].below_hi;
    if (nested)
        return 0;
    int budget = MEET_BUDGET;
    /* The first nonzero delta, in stride order, can be taken positive. */
    for (int k = 0; k < n; k++)
        for (int64_t delta = 1; delta <= dims[k].up; delta++) {
            int64_t target = -dims[k].stride * delta;
            if (target < dims[k].below_lo)
                break;
            int r = meet_search(dims, n, k + 1, target, target, &budget);
            if (r != 0)
                return r > 0;
        }
    return 0;
}

/* 1 when an element of b starts in the bytes (lo - its size, hi): it shares
 * a byte with [lo, hi). 0 when none does, -1 undecided. */
static int view_reaches(const kf_tensor *b4, uintptr_t lo, uintptr_t hi)
{
    meet_dim dims[4];
    int n = meet_dims(b4, NULL, dims);
    if (n < 0)
        return -1;
    uintptr_t blo, bhi;
    byte_range(b4, &blo, &bhi);
    if (!bytes_meet(lo, hi, blo, bhi))
        return 0;
    /* Offsets from b's start, clipped to b's own range (b's span is bounded
     * by meet_dims; the other range may be anything). */
    int64_t elem = (int64_t)kf_dtype_size((kf_dtype)b4->dtype);
    int64_t first = lo <= blo ? -elem : (int64_t)(lo - blo) - elem + 1;
    int64_t last = hi >= bhi ? (int64_t)(bhi - blo) : (int64_t)(hi - blo) - 1;
    int budget = MEET_BUDGET;
    return meet_search(dims, n, 0, first, last, &budget);
}

/* 1 when some element of a shares a byte with some element of b, as far as
 * the views show: decided exactly for two views of one dtype and one stride
 * pattern, for any view against a dense one, and row by row when one of
 * them has at most MEET_ROWS rows; past that, two views of different strides
 * that both have gaps count as apart (kfuse.h: not examined). */
static int views_overlap(const kf_tensor *a4, const kf_tensor *b4)
{
    uintptr_t alo, ahi, blo, bhi;
    byte_range(a4, &alo, &ahi);
    byte_range(b4, &blo, &bhi);
    if (!bytes_meet(alo, ahi, blo, bhi))
        return 0;
    if (a4->dtype == b4->dtype) {
        meet_dim dims[4];
        int n = meet_dims(a4, b4, dims);
        if (n >= 0) {
            int budget = MEET_BUDGET;
            int64_t d = (int64_t)((intptr_t)b4->data - (intptr_t)a4->data);
            int r = meet_search(dims, n, 0, d, d, &budget);
            if (r >= 0)
                return r;
        }
    }
    if (view_is_dense(a4)) {
        int r = view_reaches(b4, alo, ahi);
        if (r >= 0)
            return r;
    }
    if (view_is_dense(b4)) {
        int r = view_reaches(a4, blo, bhi);
        if (r >= 0)
            return r;
    }
    /* Both have gaps and differ in strides: each row of the view with fewer
     * rows (each row is dense) against the other, when there are few. */
    const kf_tensor *rows = a4, *other = b4;
    if (numel_of(b4) / b4->shape[3] < numel_of(a4) / a4->shape[3]) {
        rows = b4;
        other = a4;
    }
    int64_t n_rows = numel_of(rows) / rows->shape[3];
    if (n_rows > MEET_ROWS)
        return 0;
    size_t elem = kf_dtype_size((kf_dtype)rows->dtype);
    for (int64_t r = 0; r < n_rows; r++) {
        int64_t i0 = r / (rows->shape[1] * rows->shape[2]), i1 = r / rows->shape[2] % rows->shape[1],
                i2 = r % rows->shape[2];
        uintptr_t lo = (uintptr_t)rows->data +
                       (uintptr_t)(i0 * rows->stride[0] + i1 * rows->stride[1] + i2 * rows->stride[2]) * elem;
        if (view_reaches(other, lo, lo + (uintptr_t)rows->shape[3] * elem) > 0)
            return 1;
    }
    return 0;
}

static int same_view(const kf_tensor *a4, const kf_tensor *b4)
{
    if (a4->data != b4->data || a4->dtype != b4->dtype)
        return 0;
    for (int i = 0; i < 4; i++)
        if (a4->shape[i] != b4->shape[i] || a4->stride[i] != b4->stride[i])
            return 0;
    return 1;
}

/* Runs after every tensor of the call passed its own checks. */
#define MAX_CALL_TENSORS 9 /* rope: q, k, q_out, k_out, cos, sin, positions, freqs, axis */
static kf_status check_sharing(kf_ctx *ctx, const char *op, const call_tensor *args, int n)
{
    kf_tensor v[MAX_CALL_TENSORS];
    uintptr_t lo[MAX_CALL_TENSORS], hi[MAX_CALL_TENSORS];
    int present[MAX_CALL_TENSORS];
    if (n > MAX_CALL_TENSORS)
        return kf_set_error(ctx, KF_ERR_INTERNAL, "%s: %d tensors to check, at most %d", op, n,
                            MAX_CALL_TENSORS);
    /* The 4-D form only of what the pair checks below reach (host time per
     * call matters at decode sizes): written tensors, and inputs whose bytes
     * meet a written tensor's. */
    for (int i = 0; i < n; i++) {
        present[i] = args[i].t != NULL && numel_of(args[i].t) > 0;
        if (present[i]) {
            byte_range(args[i].t, &lo[i], &hi[i]);
            if (args[i].written)
                v[i] = to4(args[i].t);
        }
    }
    for (int i = 0; i < n; i++) {
        if (!args[i].written || !present[i])
            continue;
        if (view_repeats(&v[i]))
            return kf_set_error(ctx, KF_ERR_STRIDE,
                                "%s: %s's strides reach some elements twice, which a tensor "
                                "the op writes cannot",
                                op, args[i].name);
        for (int j = 0; j < n; j++) {
            if (j == i || !present[j] || (args[j].written && j > i) ||
                !bytes_meet(lo[i], hi[i], lo[j], hi[j]))
                continue;
            if (!args[j].written)
                v[j] = to4(args[j].t);
            if (same_view(&v[i], &v[j])) {
                if ((args[i].in_place_of & IN_PLACE(j)) || (args[j].in_place_of & IN_PLACE(i)))
                    continue;
                return kf_set_error(ctx, KF_ERR_INVALID_ARG,
                                    "%s: %s and %s are the same memory; a tensor the op writes "
                                    "may alias only its own input (in place)",
                                    op, args[i].name, args[j].name);
            }
            if (views_overlap(&v[i], &v[j]))
                return kf_set_error(ctx, KF_ERR_INVALID_ARG,
                                    "%s: %s overlaps %s; a tensor the op writes may share "
                                    "memory only as the exact view of its own input (in place)",
                                    op, args[i].name, args[j].name);
        }
    }
    return KF_OK;
}

/* ---- norm family ---- */

/* Checks shared by the row-wise ops: x activation, y like x, optional weight [D]. */
static kf_status check_rowwise(kf_ctx *ctx, const char *op, const kf_tensor *x,
                               const kf_tensor *y, const kf_tensor *weight, const char *wname)
{
    TRY(check_activation(ctx, op, "x", x, READ));
    TRY(check_same(ctx, op, "x", x, "y", y, WRITTEN));
    if (weight)
        TRY(check_vector(ctx, op, wname, weight, x->shape[x->ndim - 1], x->dtype,
                         "x rows have"));
    return KF_OK;
}

kf_status kf_rms_norm(kf_ctx *ctx, const kf_tensor *x, const kf_tensor *weight, float eps,
                      kf_rms_mode mode, float offset, const kf_tensor *y)
{
    const char *op = "rms_norm";
    TRY(check_ctx(ctx));
    TRY(check_rowwise(ctx, op, x, y, weight, "weight"));
    TRY(check_eps(ctx, op, eps));
    TRY(check_rms_mode(ctx, op, mode, offset));
    const call_tensor args[] = {{"x", x, READ, 0}, {"weight", weight, READ, 0},
                                {"y", y, WRITTEN, IN_PLACE(0)}};
    TRY(check_sharing(ctx, op, args, 3));
    NEED_OP(ctx, rms_norm, op);
    if (numel_of(x) == 0)
        return KF_OK;
    kf_tensor x4 = to4(x), y4 = to4(y);
    return ctx->ops->rms_norm(ctx, &x4, weight, eps, (int)mode, offset, &y4);
}

kf_status kf_add_rms_norm(kf_ctx *ctx, const kf_tensor *x, const kf_tensor *residual,
                          const kf_tensor *weight, float eps, kf_rms_mode mode, float offset,
                          const kf_tensor *y)
{
    const char *op = "add_rms_norm";
    TRY(check_ctx(ctx));
    TRY(check_rowwise(ctx, op, x, y, weight, "weight"));
    TRY(check_same(ctx, op, "x", x, "residual", residual, WRITTEN));
    TRY(check_eps(ctx, op, eps));
    TRY(check_rms_mode(ctx, op, mode, offset));
    const call_tensor args[] = {{"x", x, READ, 0}, {"residual", residual, WRITTEN, 0},
                                {"weight", weight, READ, 0}, {"y", y, WRITTEN, IN_PLACE(0)}};
    TRY(check_sharing(ctx, op, args, 4));
    NEED_OP(ctx, add_rms_norm, op);
    if (numel_of(x) == 0)
        return KF_OK;
    kf_tensor x4 = to4(x), r4 = to4(residual), y4 = to4(y);
    return ctx->ops->add_rms_norm(ctx, &x4, &r4, weight, eps, (int)mode, offset, &y4);
}

kf_status kf_layer_norm(kf_ctx *ctx, const kf_tensor *x, const kf_tensor *weight,
                        const kf_tensor *bias, float eps, const kf_tensor *y)
{
    const char *op = "layer_norm";
    TRY(check_ctx(ctx));
    TRY(check_rowwise(ctx, op, x, y, weight, "weight"));
    if (bias)
        TRY(check_vector(ctx, op, "bias", bias, x->shape[x->ndim - 1], x->dtype, "x rows have"));
    TRY(check_eps(ctx, op, eps));
    const call_tensor args[] = {{"x", x, READ, 0}, {"weight", weight, READ, 0},
                                {"bias", bias, READ, 0}, {"y", y, WRITTEN, IN_PLACE(0)}};
    TRY(check_sharing(ctx, op, args, 4));
    NEED_OP(ctx, layer_norm, op);
    if (numel_of(x) == 0)
        return KF_OK;
    kf_tensor x4 = to4(x), y4 = to4(y);
    return ctx->ops->layer_norm(ctx, &x4, weight, bias, eps, &y4);
}

static kf_status check_norm_kind(kf_ctx *ctx, const char *op, kf_norm_kind kind)
{
    if (kind != KF_NORM_RMS && kind != KF_NORM_LAYER)
        return kf_set_error(ctx, KF_ERR_INVALID_ARG, "%s: norm kind %d is not RMS or LAYER", op,
                            (int)kind);
    return KF_OK;
}

kf_status kf_ada_norm(kf_ctx *ctx, const kf_tensor *x, const kf_tensor *scale,
                      const kf_tensor *shift, const kf_tensor *weight, float eps, kf_norm_kind kind,
                      const kf_tensor *y)
{
    const char *op = "ada_norm";
    TRY(check_ctx(ctx));
    TRY(check_rowwise(ctx, op, x, y, weight, "weight"));
    TRY(check_eps(ctx, op, eps));
    TRY(check_norm_kind(ctx, op, kind));
    kf_tensor x4 = to4(x), y4 = to4(y), scale4, shift4;
    if (scale == NULL)
        return kf_set_error(ctx, KF_ERR_NULL_POINTER, "%s: scale is NULL", op);
    TRY(check_conditioning(ctx, op, "scale", scale, "x", x, &scale4));
    if (shift)
        TRY(check_conditioning(ctx, op, "shift", shift, "x", x, &shift4));
    const call_tensor args[] = {{"x", x, READ, 0}, {"scale", scale, READ, 0},
                                {"shift", shift, READ, 0}, {"weight", weight, READ, 0},
                                {"y", y, WRITTEN, IN_PLACE(0)}};
    TRY(check_sharing(ctx, op, args, 5));
    NEED_OP(ctx, ada_norm, op);
    if (numel_of(x) == 0)
        return KF_OK;
    return ctx->ops->ada_norm(ctx, &x4, &scale4, shift ? &shift4 : NULL, weight, eps, (int)kind,
                              &y4);
}

kf_status kf_add_ada_norm(kf_ctx *ctx, const kf_tensor *h, const kf_tensor *a,
                          const kf_tensor *gate, const kf_tensor *scale, const kf_tensor *shift,
                          const kf_tensor *weight, float eps, kf_norm_kind kind,
                          const kf_tensor *y)
{
    const char *op = "add_ada_norm";
    TRY(check_ctx(ctx));
    if (h == NULL)
        return kf_set_error(ctx, KF_ERR_NULL_POINTER, "%s: h is NULL", op);
    TRY(check_activation(ctx, op, "h", h, WRITTEN));
    TRY(check_same(ctx, op, "h", h, "a", a, READ));
    TRY(check_same(ctx, op, "h", h, "y", y, WRITTEN));
    if (weight)
        TRY(check_vector(ctx, op, "weight", weight, h->shape[h->ndim - 1], h->dtype,
                         "h rows have"));
    TRY(check_eps(ctx, op, eps));
    TRY(check_norm_kind(ctx, op, kind));
    kf_tensor h4 = to4(h), a4 = to4(a), y4 = to4(y), gate4, scale4, shift4;
    if (gate)
        TRY(check_conditioning(ctx, op, "gate", gate, "h", h, &gate4));
    if (scale == NULL)
        return kf_set_error(ctx, KF_ERR_NULL_POINTER, "%s: scale is NULL", op);
    TRY(check_conditioning(ctx, op, "scale", scale, "h", h, &scale4));
    if (shift)
        TRY(check_conditioning(ctx, op, "shift", shift, "h", h, &shift4));
    const call_tensor args[] = {{"h", h, WRITTEN, 0},        {"a", a, READ, 0},
                                {"gate", gate, READ, 0},     {"scale", scale, READ, 0},
                                {"shift", shift, READ, 0},   {"weight", weight, READ, 0},
                                {"y", y, WRITTEN, 0}};
    TRY(check_sharing(ctx, op, args, 7));
    NEED_OP(ctx, add_ada_norm, op);
    if (numel_of(h) == 0)
        return KF_OK;
    return ctx->ops->add_ada_norm(ctx, &h4, &a4, gate ? &gate4 : NULL, &scale4,
                                  shift ? &shift4 : NULL, weight, eps, (int)kind, &y4);
}

kf_status kf_gated_residual(kf_ctx *ctx, const kf_tensor *h, const kf_tensor *a,
                            const kf_tensor *gate)
{
    const char *op = "gated_residual";
    TRY(check_ctx(ctx));
    TRY(check_activation(ctx, op, "h", h, WRITTEN));
    TRY(check_same(ctx, op, "h", h, "a", a, READ));
    kf_tensor h4 = to4(h), a4 = to4(a), gate4;
    if (gate == NULL)
        return kf_set_error(ctx, KF_ERR_NULL_POINTER, "%s: gate is NULL", op);
    TRY(check_conditioning(ctx, op, "gate", gate, "h", h, &gate4));
    const call_tensor args[] = {{"h", h, WRITTEN, 0}, {"a", a, READ, 0},
                                {"gate", gate, READ, 0}};
    TRY(check_sharing(ctx, op, args, 3));
    NEED_OP(ctx, gated_residual, op);
    if (numel_of(h) == 0)
        return KF_OK;
    return ctx->ops->gated_residual(ctx, &h4, &a4, &gate4);
}

/* ---- rotary ---- */

/* A per-token table (cos, sin, positions): [S, n] or [B, S, n] against a
 * 4-D activation [B, S, H, Dh]. Writes the 4-D view [B, S, 1, n]. */
static kf_status check_token_table(kf_ctx *ctx, const char *op, const char *name,
                                   const kf_tensor *t, const char *xname, const kf_tensor *x4,
                                   int64_t n, const char *cols, kf_tensor *out)
{
    TRY(check_view(ctx, op, name, t, 1));
    if (t->ndim != 2 && t->ndim != 3)
        return kf_set_error(ctx, KF_ERR_SHAPE, "%s: %s must be [S, %s] or [B, S, %s], has %d dims",
                            op, name, cols, cols, (int)t->ndim);
    int64_t tb = t->ndim == 3 ? t->shape[0] : 1;
    int64_t tbs = t->ndim == 3 ? t->stride[0] : 0;
    int64_t ts = t->shape[t->ndim - 2], tss = t->stride[t->ndim - 2];
    int64_t tn = t->shape[t->ndim - 1];
    if (tn != n)
        return kf_set_error(ctx, KF_ERR_SHAPE, "%s: %s has %lld columns, %s is %lld", op, name,
                            (long long)tn, cols, (long long)n);
    if (ts != x4->shape[1])
        return kf_set_error(ctx, KF_ERR_SHAPE, "%s: %s has %lld tokens but %s has S = %lld",
                            op, name, (long long)ts, xname, (long long)x4->shape[1]);
    if (tb != x4->shape[0] && tb != 1)
        return kf_set_error(ctx, KF_ERR_SHAPE, "%s: %s has batch %lld but %s has B = %lld", op,
                            name, (long long)tb, xname, (long long)x4->shape[0]);
    kf_tensor r;
    memset(&r, 0, sizeof r);
    r.data = t->data;
    r.dtype = t->dtype;
    r.ndim = 4;
    r.shape[0] = x4->shape[0];
    r.stride[0] = tb == 1 ? 0 : tbs;
    r.shape[1] = ts;
    r.stride[1] = ts == 1 ? 0 : tss;
    r.shape[2] = 1;
    r.stride[2] = 0;
    r.shape[3] = n;
    r.stride[3] = 1;
    *out = r;
    return KF_OK;
}

/* Checks the rope args against the 4-D activation x4 (dtype act_dtype, head
 * dim Dh) and fills the plan. */
static kf_status make_rope_plan(kf_ctx *ctx, const char *op, const kf_rope_args *rope,
                                const char *xname, const kf_tensor *x4, kf_rope_plan *plan)
{
    if (rope == NULL)
        return kf_set_error(ctx, KF_ERR_NULL_POINTER, "%s: rope args are NULL", op);
    memset(plan, 0, sizeof *plan);
    int64_t head_dim = x4->shape[3];
    if (rope->convention != KF_ROPE_HALF && rope->convention != KF_ROPE_INTERLEAVED)
        return kf_set_error(ctx, KF_ERR_INVALID_ARG,
                            "%s: rope convention %d is not HALF (0) or INTERLEAVED (1)", op,
                            (int)rope->convention);
    int64_t r = rope->rotary_dim == 0 ? head_dim : rope->rotary_dim;
    if (r > INT32_MAX)
        return kf_set_error(ctx, KF_ERR_SHAPE, "%s: head_dim %lld (the rotary_dim of 0) is over "
                            "2^31 - 1", op, (long long)head_dim);
    if (rope->rotary_dim == 0 && (r < 2 || (r % 2) != 0))
        return kf_set_error(ctx, KF_ERR_INVALID_ARG,
                            "%s: rotary_dim 0 stands for head_dim (%lld), which must be even and "
                            "at least 2", op, (long long)head_dim);
    if (r < 2 || r > head_dim || (r % 2) != 0)
        return kf_set_error(ctx, KF_ERR_INVALID_ARG,
                            "%s: rotary_dim %lld must be even and in 2..head_dim (%lld)", op,
                            (long long)r, (long long)head_dim);
    plan->convention = rope->convention;
    plan->rotary_dim = (int)r;
    int has_table = rope->cos != NULL || rope->sin != NULL;
    int has_pos = rope->positions != NULL || rope->freqs != NULL || rope->axis != NULL;
    if (has_table == has_pos)
        return kf_set_error(ctx, KF_ERR_INVALID_ARG,
                            "%s: give either the tables (cos, sin) or the positions (positions, "
                            "freqs), not %s",
                            op, has_table ? "both" : "neither");
    if (has_table) {
        if (rope->cos == NULL || rope->sin == NULL)
            return kf_set_error(ctx, KF_ERR_NULL_POINTER, "%s: %s is NULL but %s is given", op,
                                rope->cos == NULL ? "cos" : "sin",
                                rope->cos == NULL ? "sin" : "cos");
        TRY(check_token_table(ctx, op, "cos", rope->cos, xname, x4, r, "rotary_dim",
                              &plan->cos));
        TRY(check_token_table(ctx, op, "sin", rope->sin, xname, x4, r, "rotary_dim",
                              &plan->sin));
        const char *names[2] = {"cos", "sin"};
        const kf_tensor *tabs[2] = {rope->cos, rope->sin};
        for (int i = 0; i < 2; i++)
            if (tabs[i]->dtype != KF_F32 && tabs[i]->dtype != x4->dtype)
                return not_f32_or(ctx, op, names[i], tabs[i]->dtype, x4->dtype);
        if (rope->cos->dtype != rope->sin->dtype)
            return kf_set_error(ctx, KF_ERR_DTYPE,
                                "%s: cos has dtype %s and sin %s; the two tables must share one",
                                op, kf_dtype_name((kf_dtype)rope->cos->dtype),
                                kf_dtype_name((kf_dtype)rope->sin->dtype));
        plan->use_table = 1;
        return KF_OK;
    }
    if (rope->positions == NULL || rope->freqs == NULL)
        return kf_set_error(ctx, KF_ERR_NULL_POINTER,
                            "%s: the positions form needs positions and freqs (%s is NULL)", op,
                            rope->positions == NULL ? "positions" : "freqs");
    const kf_tensor *pos = rope->positions;
    TRY(check_view(ctx, op, "positions", pos, 1));
    if (pos->dtype != KF_F32)
        return kf_set_error(ctx, KF_ERR_DTYPE, "%s: positions has dtype %s, must be f32", op,
                            kf_dtype_name((kf_dtype)pos->dtype));
    /* the table's shape first ([S, n_axes] or [B, S, n_axes]), then its axis count: a 1-D
     * positions ([S], as HF passes position ids) is named as such */
    int64_t n_axes = pos->shape[pos->ndim - 1];
    TRY(check_token_table(ctx, op, "positions", pos, xname, x4, n_axes, "n_axes",
                          &plan->positions));
    if (n_axes < 1 || n_axes > 3)
        return kf_set_error(ctx, KF_ERR_SHAPE, "%s: positions has %lld axes, must be 1..3", op,
                            (long long)n_axes);
    plan->n_axes = (int)n_axes;
    TRY(check_vector(ctx, op, "freqs", rope->freqs, r / 2, -1, "rotary_dim / 2 is"));
    plan->freqs = *rope->freqs;
    if (rope->axis) {
        TRY(check_view(ctx, op, "axis", rope->axis, 0));
        if (rope->axis->dtype != KF_I32)
            return kf_set_error(ctx, KF_ERR_DTYPE, "%s: axis has dtype %s, must be i32", op,
                                kf_dtype_name((kf_dtype)rope->axis->dtype));
        if (rope->axis->ndim != 1 || rope->axis->shape[0] != r / 2)
            return kf_set_error(ctx, KF_ERR_SHAPE, "%s: axis must be 1-D with rotary_dim / 2 = %lld "
                                "elements", op, (long long)(r / 2));
        plan->axis = *rope->axis;
        /* On the host the values can be checked here; device backends clamp
         * out-of-range values so that a bad map never reads out of bounds. */
        if (ctx->backend == KF_BACKEND_CPU) {
            const int32_t *ax = (const int32_t *)rope->axis->data;
            for (int64_t p = 0; p < r / 2; p++)
                if (ax[p] < 0 || ax[p] >= n_axes)
                    return kf_set_error(ctx, KF_ERR_INVALID_ARG,
                                        "%s: axis[%lld] = %d, must be in 0..%lld", op,
                                        (long long)p, (int)ax[p], (long long)(n_axes - 1));
        }
    } else {
        memset(&plan->axis, 0, sizeof plan->axis);
        plan->axis.dtype = KF_I32;
    }
    plan->use_table = 0;
    return KF_OK;
}

kf_status kf_rope(kf_ctx *ctx, const kf_tensor *q, const kf_tensor *k, const kf_tensor *q_out,
                  const kf_tensor *k_out, const kf_rope_args *rope)
{
    const char *op = "rope";
    TRY(check_ctx(ctx));
    TRY(check_activation(ctx, op, "q", q, READ));
    if (q->ndim != 4)
        return kf_set_error(ctx, KF_ERR_SHAPE, "%s: q must be 4-D [B, S, H, Dh], has %d dims", op,
                            (int)q->ndim);
    TRY(check_same(ctx, op, "q", q, "q_out", q_out, WRITTEN));
    if ((k == NULL) != (k_out == NULL))
        return kf_set_error(ctx, KF_ERR_NULL_POINTER, "%s: %s is NULL but %s is given", op,
                            k == NULL ? "k" : "k_out", k == NULL ? "k_out" : "k");
    if (k) {
        TRY(check_activation(ctx, op, "k", k, READ));
        if (k->ndim != 4)
            return kf_set_error(ctx, KF_ERR_SHAPE, "%s: k must be 4-D [B, S, Hk, Dh], has %d dims",
                                op, (int)k->ndim);
        if (k->dtype != q->dtype)
            return kf_set_error(ctx, KF_ERR_DTYPE, "%s: k has dtype %s but q has %s", op,
                                kf_dtype_name((kf_dtype)k->dtype), kf_dtype_name((kf_dtype)q->dtype));
        const int dims[3] = {0, 1, 3};
        const char *dim_names[3] = {"B", "S", "Dh"};
        for (int i = 0; i < 3; i++)
            if (k->shape[dims[i]] != q->shape[dims[i]])
                return kf_set_error(ctx, KF_ERR_SHAPE, "%s: k has %s = %lld but q has %lld", op,
                                    dim_names[i], (long long)k->shape[dims[i]],
                                    (long long)q->shape[dims[i]]);
        TRY(check_same(ctx, op, "k", k, "k_out", k_out, WRITTEN));
    }
    kf_tensor q4 = to4(q), qo4 = to4(q_out), k4, ko4;
    kf_rope_plan plan;
    TRY(make_rope_plan(ctx, op, rope, "q", &q4, &plan));
    const call_tensor args[] = {
        {"q", q, READ, 0},         {"k", k, READ, 0},
        {"q_out", q_out, WRITTEN, IN_PLACE(0)}, {"k_out", k_out, WRITTEN, IN_PLACE(1)},
        {"cos", rope->cos, READ, 0}, {"sin", rope->sin, READ, 0},
        {"positions", rope->positions, READ, 0}, {"freqs", rope->freqs, READ, 0},
        {"axis", rope->axis, READ, 0}};
    TRY(check_sharing(ctx, op, args, 9));
    NEED_OP(ctx, rope, op);
    if (k) {
        k4 = to4(k);
        ko4 = to4(k_out);
    }
    if (numel_of(q) == 0 && (k == NULL || numel_of(k) == 0))
        return KF_OK;
    return ctx->ops->rope(ctx, &q4, k ? &k4 : NULL, &qo4, k ? &ko4 : NULL, &plan);
}

kf_status kf_rms_norm_rope(kf_ctx *ctx, const kf_tensor *x, const kf_tensor *weight, float eps,
                           kf_rms_mode mode, float offset, const kf_rope_args *rope,
                           const kf_tensor *y)
{
    const char *op = "rms_norm_rope";
    TRY(check_ctx(ctx));
    TRY(check_activation(ctx, op, "x", x, READ));
    if (x->ndim != 4)
        return kf_set_error(ctx, KF_ERR_SHAPE, "%s: x must be 4-D [B, S, H, Dh], has %d dims", op,
                            (int)x->ndim);
    TRY(check_same(ctx, op, "x", x, "y", y, WRITTEN));
    const kf_tensor *views[2] = {x, y};
    const char *view_names[2] = {"x", "y"};
    for (int i = 0; i < 2; i++)
        if (views[i]->shape[2] > 1 && views[i]->stride[2] != views[i]->shape[3])
            return kf_set_error(ctx, KF_ERR_STRIDE,
                                "%s: %s has head stride %lld; the heads of a token must be "
                                "contiguous (stride Dh = %lld) for the norm across heads",
                                op, view_names[i], (long long)views[i]->stride[2],
                                (long long)views[i]->shape[3]);
    /* an empty x may have any H and Dh: their product must not overflow */
    if (x->shape[3] > 0 && x->shape[2] > INT64_MAX / x->shape[3])
        return kf_set_error(ctx, KF_ERR_SHAPE, "%s: H * Dh (%lld * %lld) is over 2^63 - 1", op,
                            (long long)x->shape[2], (long long)x->shape[3]);
    if (weight)
        TRY(check_vector(ctx, op, "weight", weight, x->shape[2] * x->shape[3], x->dtype,
                         "H * Dh is"));
    TRY(check_eps(ctx, op, eps));
    TRY(check_rms_mode(ctx, op, mode, offset));
    kf_tensor x4 = to4(x), y4 = to4(y);
    kf_rope_plan plan;
    TRY(make_rope_plan(ctx, op, rope, "x", &x4, &plan));
    const call_tensor args[] = {
        {"x", x, READ, 0},           {"weight", weight, READ, 0},
        {"y", y, WRITTEN, IN_PLACE(0)},         {"cos", rope->cos, READ, 0},
        {"sin", rope->sin, READ, 0}, {"positions", rope->positions, READ, 0},
        {"freqs", rope->freqs, READ, 0}, {"axis", rope->axis, READ, 0}};
    TRY(check_sharing(ctx, op, args, 8));
    NEED_OP(ctx, rms_norm_rope, op);
    if (numel_of(x) == 0)
        return KF_OK;
    return ctx->ops->rms_norm_rope(ctx, &x4, weight, eps, (int)mode, offset, &plan, &y4);
}

/* ---- activations ---- */

static kf_status check_act(kf_ctx *ctx, const char *op, kf_activation act)
{
    if (act != KF_ACT_SILU && act != KF_ACT_GELU_TANH && act != KF_ACT_GELU_ERF)
        return kf_set_error(ctx, KF_ERR_INVALID_ARG,
                            "%s: activation %d is not SILU (0), GELU_TANH (1) or GELU_ERF (2)", op,
                            (int)act);
    return KF_OK;
}

kf_status kf_glu(kf_ctx *ctx, const kf_tensor *gate, const kf_tensor *up, kf_activation act,
                 int gate_first, const kf_tensor *y)
{
    const char *op = "glu";
    TRY(check_ctx(ctx));
    TRY(check_act(ctx, op, act));
    if (gate_first != 0 && gate_first != 1)
        return kf_set_error(ctx, KF_ERR_INVALID_ARG, "%s: gate_first %d must be 0 or 1", op,
                            gate_first);
    TRY(check_activation(ctx, op, up ? "gate" : "packed input (gate)", gate, READ));
    if (up) {
        TRY(check_same(ctx, op, "gate", gate, "up", up, READ));
        TRY(check_same(ctx, op, "gate", gate, "y", y, WRITTEN));
        const call_tensor args[] = {{"gate", gate, READ, 0}, {"up", up, READ, 0},
                                    {"y", y, WRITTEN, IN_PLACE(0) | IN_PLACE(1)}};
        TRY(check_sharing(ctx, op, args, 3));
        NEED_OP(ctx, glu, op);
        if (numel_of(gate) == 0)
            return KF_OK;
        kf_tensor g4 = to4(gate), u4 = to4(up), y4 = to4(y);
        return ctx->ops->glu(ctx, &g4, &u4, (int)act, &y4);
    }
    /* Packed [..., 2I] -> two [..., I] views of the same rows. */
    TRY(check_activation(ctx, op, "y", y, WRITTEN));
    if (y->dtype != gate->dtype)
        return kf_set_error(ctx, KF_ERR_DTYPE, "%s: y has dtype %s but the input has %s", op,
                            kf_dtype_name((kf_dtype)y->dtype), kf_dtype_name((kf_dtype)gate->dtype));
    if (y->ndim != gate->ndim)
        return kf_set_error(ctx, KF_ERR_SHAPE, "%s: y has %d dims but the packed input has %d", op,
                            (int)y->ndim, (int)gate->ndim);
    int last = gate->ndim - 1;
    int64_t two_i = gate->shape[last];
    if (two_i % 2 != 0)
        return kf_set_error(ctx, KF_ERR_SHAPE,
                            "%s: the packed input's last dim %lld is odd; it must be 2 * I", op,
                            (long long)two_i);
    for (int i = 0; i < last; i++)
        if (y->shape[i] != gate->shape[i])
            return kf_set_error(ctx, KF_ERR_SHAPE, "%s: y has size %lld in dim %d but the input has %lld",
                                op, (long long)y->shape[i], i, (long long)gate->shape[i]);
    if (y->shape[last] != two_i / 2)
        return kf_set_error(ctx, KF_ERR_SHAPE,
                            "%s: y has %lld columns, the packed input %lld = 2 * %lld", op,
                            (long long)y->shape[last], (long long)two_i, (long long)(two_i / 2));
    const call_tensor args[] = {{"packed input", gate, READ, 0}, {"y", y, WRITTEN, 0}};
    TRY(check_sharing(ctx, op, args, 2));
    NEED_OP(ctx, glu, op);
    if (numel_of(gate) == 0)
        return KF_OK;
    kf_tensor packed = to4(gate), y4 = to4(y);
    kf_tensor first = packed, second = packed;
    int64_t half = two_i / 2;
    first.shape[3] = half;
    second.shape[3] = half;
    second.data = (char *)packed.data + (size_t)half * kf_dtype_size((kf_dtype)packed.dtype);
    /* A single-row packed tensor with D = 1 halves: strides stay valid. */
    return ctx->ops->glu(ctx, gate_first ? &first : &second, gate_first ? &second : &first,
                         (int)act, &y4);
}

kf_status kf_gelu(kf_ctx *ctx, const kf_tensor *x, int approximate, const kf_tensor *y)
{
    const char *op = "gelu";
    TRY(check_ctx(ctx));
    TRY(check_activation(ctx, op, "x", x, READ));
    TRY(check_same(ctx, op, "x", x, "y", y, WRITTEN));
    if (approximate != 0 && approximate != 1)
        return kf_set_error(ctx, KF_ERR_INVALID_ARG,
                            "%s: approximate %d must be 0 (erf) or 1 (tanh)", op, approximate);
    const call_tensor args[] = {{"x", x, READ, 0}, {"y", y, WRITTEN, IN_PLACE(0)}};
    TRY(check_sharing(ctx, op, args, 2));
    NEED_OP(ctx, activation, op);
    if (numel_of(x) == 0)
        return KF_OK;
    kf_tensor x4 = to4(x), y4 = to4(y);
    return ctx->ops->activation(ctx, &x4, approximate ? KF_ACT_GELU_TANH : KF_ACT_GELU_ERF, &y4);
}

kf_status kf_silu(kf_ctx *ctx, const kf_tensor *x, const kf_tensor *y)
{
    const char *op = "silu";
    TRY(check_ctx(ctx));
    TRY(check_activation(ctx, op, "x", x, READ));
    TRY(check_same(ctx, op, "x", x, "y", y, WRITTEN));
    const call_tensor args[] = {{"x", x, READ, 0}, {"y", y, WRITTEN, IN_PLACE(0)}};
    TRY(check_sharing(ctx, op, args, 2));
    NEED_OP(ctx, activation, op);
    if (numel_of(x) == 0)
        return KF_OK;
    kf_tensor x4 = to4(x), y4 = to4(y);
    return ctx->ops->activation(ctx, &x4, KF_ACT_SILU, &y4);
}

kf_status kf_softmax(kf_ctx *ctx, const kf_tensor *x, float scale, const kf_tensor *y)
{
    const char *op = "softmax";
    TRY(check_ctx(ctx));
    TRY(check_activation(ctx, op, "x", x, READ));
    TRY(check_same(ctx, op, "x", x, "y", y, WRITTEN));
    if (!isfinite(scale))
        return kf_set_error(ctx, KF_ERR_INVALID_ARG, "%s: scale %g is not finite", op,
                            (double)scale);
    const call_tensor args[] = {{"x", x, READ, 0}, {"y", y, WRITTEN, IN_PLACE(0)}};
    TRY(check_sharing(ctx, op, args, 2));
    NEED_OP(ctx, softmax, op);
    if (numel_of(x) == 0)
        return KF_OK;
    kf_tensor x4 = to4(x), y4 = to4(y);
    return ctx->ops->softmax(ctx, &x4, scale, &y4);
}
