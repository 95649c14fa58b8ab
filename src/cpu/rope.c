/* rope.c - rotary embeddings on the CPU: rope (q and optional k, any head
 * counts, any token / head strides, in place allowed) and rms_norm_rope (an
 * RMSNorm across all H*Dh values of a token, then rope per head, with no
 * rounding in between: in llama mode the normalized value is not rounded to
 * the dtype either, n * weight goes to the rotation in f32).
 *
 * Work is split over tokens (b, s): a token's cos / sin row is built once and
 * used by every head of q and k. Angles come from
 *   - the tables: cos / sin [B, S, 1, r] views (stride 0 broadcasts), f32 or
 *     the activation dtype, read per channel; or
 *   - the positions: angle of pair p = freqs[p] * positions[b, s, axis[p]],
 *     an f32 product; cos and sin of that f32 angle in f32 after a
 *     reduction by pi/2 in double (cpu_math.h: vectorized, within 1 f32 ulp
 *     of the correctly rounded values for |angle| <= 2^20, libm beyond), so
 *     angles of 1e5 rad are as exact as the f32 table PyTorch would build
 *     (its f32 sin / cos are 1-ulp functions too). The angles of a token are
 *     formed in one loop, their sin / cos in a second (vectorized), then
 *     spread over the channel layout. Each thread keeps its previous token's
 *     coordinates and cos / sin rows: the pairs of an axis whose coordinate
 *     is unchanged (bit for bit) keep their values (the same f32 angle, so
 *     the same bits), and only the other axes' pairs are recomputed. Video
 *     grids repeat the frame and row coordinates over whole rows of tokens
 *     (LTX-Video: 2 of 3 axes unchanged from one token to the next), so most
 *     of the sin / cos work goes.
 * Pairs: HALF (i, i + r/2), INTERLEAVED (2i, 2i+1). Channels >= r of a head
 * are copied unchanged (rope) or passed through normalized (rms_norm_rope). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cpu/cpu.h"
#include "cpu/cpu_math.h"

/* Floats of per-thread scratch that token_angles needs besides the cos / sin
 * rows: the angles and their cos / sin per pair (r / 2 each), then the
 * positions form's memory of the thread's previous token (POS_MEMORY). */
enum { POS_MEMORY = 4 }; /* n_axes (<= 3) coordinates, then 1.0f once they are set */

static size_t pair_buf_floats(int rotary_dim)
{
    return 3 * (size_t)(rotary_dim / 2) + POS_MEMORY;
}

/* The positions form's pairs grouped by axis (a counting sort of the axis
 * map; no map: every pair on axis 0): axis a's pairs are
 * pairs[first[a] .. first[a + 1]). */
typedef struct pos_axes {
    const int32_t *pairs;
    int first[4];
} pos_axes;

/* Int32 slots of shared scratch that pos_axes_build needs (the positions
 * form; 0 for tables). Shared scratch is floats; the slots hold int32 only. */
static size_t pos_axes_slots(const kf_rope_plan *plan)
{
    return plan->use_table ? 0 : (size_t)(plan->rotary_dim / 2);
}

static void pos_axes_build(const kf_rope_plan *plan, int32_t *slots, pos_axes *axes)
{
    const int half = plan->rotary_dim / 2;
    const int32_t *axis = (const int32_t *)plan->axis.data;
    int count[3] = {0, 0, 0};
    for (int p = 0; p < half; p++)
        count[axis ? axis[p] : 0]++;
    axes->first[0] = 0;
    for (int a = 0; a < 3; a++)
        axes->first[a + 1] = axes->first[a] + count[a];
    int next[3] = {axes->first[0], axes->first[1], axes->first[2]};
    for (int p = 0; p < half; p++)
        slots[next[axis ? axis[p] : 0]++] = p;
    axes->pairs = slots;
}

/* The positions form's set-up before the token loop: the pairs grouped by
 * axis in slots (pos_axes_slots(plan) int32 of shared scratch), and every
 * thread's memory set to "no previous token" (scratch is fresh memory);
 * pair_buf_at: where pair_buf starts in a thread's slice. Tables: nothing. */
static void pos_setup(const kf_rope_plan *plan, const kf_cpu_scratch *scratch, int32_t *slots,
                      size_t pair_buf_at, pos_axes *axes)
{
    if (plan->use_table)
        return;
    pos_axes_build(plan, slots, axes);
    const size_t memory_at = pair_buf_at + 3 * (size_t)(plan->rotary_dim / 2);
    for (int i = 0; i < scratch->threads; i++)
        kf_cpu_scratch_slice(scratch, i)[memory_at + POS_MEMORY - 1] = 0.0f;
}

/* cos / sin of pair p into the channel rows (the layout of the convention) */
static void spread_pair(float *cos_buf, float *sin_buf, int p, int half, int convention,
                        float c, float s)
{
    const int i0 = convention == KF_ROPE_HALF ? p : 2 * p;
    const int i1 = convention == KF_ROPE_HALF ? p + half : 2 * p + 1;
    cos_buf[i0] = c;
    cos_buf[i1] = c;
    sin_buf[i0] = s;
    sin_buf[i1] = s;
}

/* cos / sin per channel (r values each) for token (b, s). Table rows that
 * are f32 are used in place; otherwise they are built in cos_buf / sin_buf
 * (from the positions, with pair_buf: pair_buf_floats(r) floats, and axes).
 * The positions form reads and updates the thread's memory in pair_buf:
 * cos_buf / sin_buf and pair_buf must be the same thread's from token to
 * token. */
static void token_angles(const kf_rope_plan *plan, const pos_axes *axes, int64_t b, int64_t s,
                         float *cos_buf, float *sin_buf, float *pair_buf, const float **cos_row,
                         const float **sin_row)
{
    const int r = plan->rotary_dim;
    if (plan->use_table) {
        int64_t cos_offset = b * plan->cos.stride[0] + s * plan->cos.stride[1];
        int64_t sin_offset = b * plan->sin.stride[0] + s * plan->sin.stride[1];
        *cos_row = kf_cpu_row_f32(&plan->cos, cos_offset, r, cos_buf);
        *sin_row = kf_cpu_row_f32(&plan->sin, sin_offset, r, sin_buf);
        return;
    }
    const float *pos = (const float *)plan->positions.data + b * plan->positions.stride[0] +
                       s * plan->positions.stride[1];
    const float *freqs = (const float *)plan->freqs.data;
    const int32_t *axis = (const int32_t *)plan->axis.data;   /* NULL: all axis 0 */
    const int half = r / 2, n_axes = plan->n_axes;
    float *angle = pair_buf;
    float *pair_cos = pair_buf + (size_t)half;
    float *pair_sin = pair_buf + 2 * (size_t)half;
    float *memory = pair_buf + 3 * (size_t)half;
    *cos_row = cos_buf;
    *sin_row = sin_buf;
    int changed[3] = {1, 1, 1}, n_changed = n_axes;
    if (memory[POS_MEMORY - 1] != 0.0f) {
        n_changed = 0;
        for (int a = 0; a < n_axes; a++) {
            changed[a] = kf_bits_of_f32(pos[a]) != kf_bits_of_f32(memory[a]);
            n_changed += changed[a];
        }
    }
    for (int a = 0; a < n_axes; a++)
        memory[a] = pos[a];
    memory[POS_MEMORY - 1] = 1.0f;
    if (n_changed == 0)
        return;
    if (n_changed < n_axes) { /* the changed axes' pairs only, gathered */
        int n = 0;
        for (int a = 0; a < n_axes; a++)
            if (changed[a])
                for (int j = axes->first[a]; j < axes->first[a + 1]; j++)
                    angle[n++] = freqs[axes->pairs[j]] * pos[a];
        kf_cpu_sin_cos_row(angle, pair_sin, pair_cos, n);
        n = 0;
        for (int a = 0; a < n_axes; a++)
            if (changed[a])
                for (int j = axes->first[a]; j < axes->first[a + 1]; j++, n++)
                    spread_pair(cos_buf, sin_buf, axes->pairs[j], half, plan->convention,
                                pair_cos[n], pair_sin[n]);
        return;
    }
    if (axis) {
        for (int p = 0; p < half; p++)
            angle[p] = freqs[p] * pos[axis[p]];
    } else {
        const float pos0 = pos[0];
        for (int p = 0; p < half; p++)
            angle[p] = freqs[p] * pos0;
    }
    kf_cpu_sin_cos_row(angle, pair_sin, pair_cos, half);
    if (plan->convention == KF_ROPE_HALF) {
        memcpy(cos_buf, pair_cos, (size_t)half * sizeof(float));
        memcpy(cos_buf + half, pair_cos, (size_t)half * sizeof(float));
        memcpy(sin_buf, pair_sin, (size_t)half * sizeof(float));
        memcpy(sin_buf + half, pair_sin, (size_t)half * sizeof(float));
    } else {
        for (int p = 0; p < half; p++) {
            cos_buf[2 * p] = pair_cos[p];
            cos_buf[2 * p + 1] = pair_cos[p];
            sin_buf[2 * p] = pair_sin[p];
            sin_buf[2 * p + 1] = pair_sin[p];
        }
    }
}

/* y[0..r) = rotation of x[0..r); x and y must not overlap. The interleaved
 * pair's first output adds (-x1) * sin rather than subtracting x1 * sin (the
 * same value: negation is exact): GCC 12 turns the subtract / add pair of
 * products into AVX-512's fused vfmaddsub, -ffp-contract=off or not, and the
 * AVX-512 copy would round differently from the others (CMakeLists.txt). */
static void rotate(const float *restrict x, float *restrict y, const float *restrict c,
                   const float *restrict sn, int r, int convention)
{
    if (convention == KF_ROPE_HALF) {
        const int half = r / 2;
        for (int i = 0; i < half; i++)
            y[i] = x[i] * c[i] - x[i + half] * sn[i];
        for (int i = 0; i < half; i++)
            y[i + half] = x[i + half] * c[i + half] + x[i] * sn[i + half];
    } else {
        for (int p = 0; p < r / 2; p++) {
            y[2 * p] = x[2 * p] * c[2 * p] + (-x[2 * p + 1]) * sn[2 * p];
            y[2 * p + 1] = x[2 * p + 1] * c[2 * p + 1] + x[2 * p] * sn[2 * p + 1];
        }
    }
}

static int same_view(const kf_tensor *a, const kf_tensor *b)
{
    return a->data == b->data && a->stride[0] == b->stride[0] && a->stride[1] == b->stride[1] &&
           a->stride[2] == b->stride[2];
}

/* Rope every head of token (b, s) of in into out. */
static void rope_token_heads(const kf_tensor *in, const kf_tensor *out, int64_t b, int64_t s,
                             const float *c, const float *sn, int r, int convention,
                             float *x_buf, float *y_buf)
{
    const int64_t heads = in->shape[2], head_dim = in->shape[3];
    const int copy_rest = r < head_dim && !same_view(in, out);
    const size_t elem = kf_cpu_dtype_bytes(in->dtype);
    for (int64_t h = 0; h < heads; h++) {
        int64_t in_offset = b * in->stride[0] + s * in->stride[1] + h * in->stride[2];
        int64_t out_offset = b * out->stride[0] + s * out->stride[1] + h * out->stride[2];
        kf_cpu_load_row(x_buf, in->data, in->dtype, in_offset, r);
        rotate(x_buf, y_buf, c, sn, r, convention);
        kf_cpu_store_row(out->data, out->dtype, out_offset, y_buf, r);
        if (copy_rest)
            memcpy((char *)out->data + (size_t)(out_offset + r) * elem,
                   (const char *)in->data + (size_t)(in_offset + r) * elem,
                   (size_t)(head_dim - r) * elem);
    }
}

kf_status kf_cpu_rope(kf_ctx *ctx, const kf_tensor *q, const kf_tensor *k,
                      const kf_tensor *q_out, const kf_tensor *k_out, const kf_rope_plan *rope)
{
    const int64_t batch = q->shape[0], seq = q->shape[1];
    const int64_t tokens = batch * seq;
    const int r = rope->rotary_dim;
    int64_t elements = tokens * q->shape[2] * q->shape[3];
    if (k)
        elements += tokens * k->shape[2] * k->shape[3];
    const int parallel = kf_cpu_worth_parallel(tokens, elements);
    kf_cpu_scratch scratch;
    kf_status st = kf_cpu_scratch_get(ctx, "rope", parallel, 4 * (size_t)r + pair_buf_floats(r),
                                      pos_axes_slots(rope), &scratch);
    if (st != KF_OK)
        return st;
    pos_axes axes = {0};
    pos_setup(rope, &scratch, (int32_t *)scratch.shared, 4 * (size_t)r, &axes);

    KF_CPU_PARALLEL_FOR(parallel)
    for (int64_t t = 0; t < tokens; t++) {
        float *cos_buf = kf_cpu_scratch_mine(&scratch);
        /* offsets in size_t: 4 r passes 2^31 from r = 2^29 */
        float *sin_buf = cos_buf + (size_t)r;
        float *x_buf = cos_buf + 2 * (size_t)r;
        float *y_buf = cos_buf + 3 * (size_t)r;
        float *pair_buf = cos_buf + 4 * (size_t)r;
        int64_t b = t / seq, s = t % seq;
        const float *c, *sn;
        token_angles(rope, &axes, b, s, cos_buf, sin_buf, pair_buf, &c, &sn);
        rope_token_heads(q, q_out, b, s, c, sn, r, rope->convention, x_buf, y_buf);
        if (k)
            rope_token_heads(k, k_out, b, s, c, sn, r, rope->convention, x_buf, y_buf);
    }
    kf_cpu_scratch_release(&scratch);
    return KF_OK;
}

kf_status kf_cpu_rms_norm_rope(kf_ctx *ctx, const kf_tensor *x, const kf_tensor *w, float eps,
                               int mode, float offset, const kf_rope_plan *rope,
                               const kf_tensor *y)
{
    const int64_t batch = x->shape[0], seq = x->shape[1];
    const int64_t heads = x->shape[2], head_dim = x->shape[3];
    const int64_t tokens = batch * seq, width = heads * head_dim;
    const int r = rope->rotary_dim;
    const int add_offset = mode == KF_RMS_GEMMA && offset != 0.0f;
    const int parallel = kf_cpu_worth_parallel(tokens, tokens * width);
    kf_cpu_scratch scratch;
    const size_t weight_floats = kf_cpu_weight_needs_copy(w, add_offset) ? (size_t)width : 0;
    const size_t pair_buf_at = (size_t)width + (size_t)head_dim + 2 * (size_t)r;
    kf_status st = kf_cpu_scratch_get(ctx, "rms_norm_rope", parallel,
                                      pair_buf_at + pair_buf_floats(r),
                                      weight_floats + pos_axes_slots(rope), &scratch);
    if (st != KF_OK)
        return st;
    const float *weight = kf_cpu_weight_as_f32(w, width, offset, add_offset, scratch.shared);
    pos_axes axes = {0};
    pos_setup(rope, &scratch, (int32_t *)(scratch.shared + weight_floats), pair_buf_at, &axes);

    KF_CPU_PARALLEL_FOR(parallel)
    for (int64_t t = 0; t < tokens; t++) {
        float *v = kf_cpu_scratch_mine(&scratch);
        float *head_out = v + width;
        float *cos_buf = head_out + head_dim;
        float *sin_buf = cos_buf + r;
        float *pair_buf = sin_buf + r;
        int64_t b = t / seq, s = t % seq;
        for (int64_t h = 0; h < heads; h++)
            kf_cpu_load_row(v + h * head_dim, x->data, x->dtype,
                            b * x->stride[0] + s * x->stride[1] + h * x->stride[2], head_dim);
        kf_cpu_rms_normalize(v, width, eps);
        /* "The normalized value is not rounded before rope": llama's rounding
         * of n to the dtype is skipped here, so llama acts as none. */
        kf_cpu_rms_apply_weight(v, width, weight, mode == KF_RMS_LLAMA ? KF_RMS_NONE : mode,
                                x->dtype);
        const float *c, *sn;
        token_angles(rope, &axes, b, s, cos_buf, sin_buf, pair_buf, &c, &sn);
        for (int64_t h = 0; h < heads; h++) {
            const float *head_in = v + h * head_dim;
            rotate(head_in, head_out, c, sn, r, rope->convention);
            for (int64_t i = r; i < head_dim; i++)
                head_out[i] = head_in[i];
            kf_cpu_store_row(y->data, y->dtype,
                             b * y->stride[0] + s * y->stride[1] + h * y->stride[2], head_out,
                             head_dim);
        }
    }
    kf_cpu_scratch_release(&scratch);
    return KF_OK;
}
