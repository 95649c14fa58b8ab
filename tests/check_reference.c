/* check_reference.c - the float64 reference of every kfuse op: the oracle the
 * tests and `kfuse verify` compare the backends against. Written from the
 * PyTorch code that docs/ops.md quotes, independently of the CPU backend.
 * Everything is computed in double; only the roundings that the PyTorch code
 * does and the contract keeps are modelled:
 *   - rms_norm llama mode rounds the normalized value to x's dtype before the
 *     weight multiply (rms_norm_rope does not: kfuse.h says the normalized
 *     value is not rounded before rope);
 *   - the add ops round the sum to the dtype (through f32, as a kernel that
 *     adds in f32 and stores does) before normalizing;
 *   - the rope positions form computes the angle as an f32 product, then
 *     sin/cos in double.
 * All arrays are dense row-major doubles; the harness (check_suite.c) gathers
 * strided and broadcast views into that form. This file also holds its own
 * f16 / bf16 conversions, so the oracle shares no numeric code with the
 * library. */
#include <math.h>
#include <string.h>

#include "check.h"

/* ---- dtype conversions (round to nearest even, NaN / Inf kept) ---------- */

static uint32_t float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bits_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t kft_f32_to_bf16_bits(float f)
{
    uint32_t u = float_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u);          /* quiet NaN, sign kept */
    uint32_t lsb = (u >> 16) & 1u;
    u += 0x7fffu + lsb;                                  /* Inf stays Inf */
    return (uint16_t)(u >> 16);
}

float kft_bf16_bits_to_f32(uint16_t h)
{
    return bits_float((uint32_t)h << 16);
}

uint16_t kft_f32_to_f16_bits(float f)
{
    uint32_t u = float_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t abs_bits = u & 0x7fffffffu;
    if (abs_bits > 0x7f800000u)
        return (uint16_t)(sign | 0x7e00u);               /* NaN */
    if (abs_bits >= 0x477ff000u)                          /* >= 65520 rounds to Inf */
        return (uint16_t)(sign | 0x7c00u);
    double a = (double)bits_float(abs_bits);
    if (a < 6.103515625e-05) {                            /* f16 subnormal range: step 2^-24 */
        double q = a * 16777216.0;                        /* exact in double */
        double r = nearbyint(q);                          /* default mode: ties to even */
        return (uint16_t)(sign | (uint16_t)r);            /* r == 1024 is the smallest normal */
    }
    int e;
    double m = frexp(a, &e);                              /* a = m * 2^e, m in [0.5, 1) */
    double q = ldexp(m, 11);                              /* 11 significant bits */
    double r = nearbyint(q);
    if (r >= 2048.0) {
        r /= 2.0;
        e += 1;
    }
    int exp_field = e - 1 + 15;                           /* value = (r/1024) * 2^(e-1) */
    if (exp_field >= 31)
        return (uint16_t)(sign | 0x7c00u);
    return (uint16_t)(sign | (uint16_t)(exp_field << 10) | (uint16_t)((int)r - 1024));
}

float kft_f16_bits_to_f32(uint16_t h)
{
    int sign = (h >> 15) & 1;
    int exp_field = (h >> 10) & 0x1f;
    int mant = h & 0x3ff;
    double v;
    if (exp_field == 0)
        v = ldexp((double)mant, -24);
    else if (exp_field == 31)
        v = mant ? NAN : INFINITY;
    else
        v = ldexp((double)(mant + 1024), exp_field - 25);
    return (float)(sign ? -v : v);
}

double kft_round(int dtype, double v)
{
    float f = (float)v;
    switch (dtype) {
    case KF_F16: return (double)kft_f16_bits_to_f32(kft_f32_to_f16_bits(f));
    case KF_BF16: return (double)kft_bf16_bits_to_f32(kft_f32_to_bf16_bits(f));
    default: return (double)f;
    }
}

double kft_load(const void *data, int dtype, int64_t i)
{
    const unsigned char *p = (const unsigned char *)data;
    if (dtype == KF_F32) {
        float f;
        memcpy(&f, p + 4 * i, 4);
        return (double)f;
    }
    if (dtype == KF_I32) {
        int32_t v;
        memcpy(&v, p + 4 * i, 4);
        return (double)v;
    }
    uint16_t h;
    memcpy(&h, p + 2 * i, 2);
    return dtype == KF_F16 ? (double)kft_f16_bits_to_f32(h) : (double)kft_bf16_bits_to_f32(h);
}

void kft_store(void *data, int dtype, int64_t i, double v)
{
    unsigned char *p = (unsigned char *)data;
    if (dtype == KF_F32) {
        float f = (float)v;
        memcpy(p + 4 * i, &f, 4);
    } else if (dtype == KF_I32) {
        int32_t n = (int32_t)v;
        memcpy(p + 4 * i, &n, 4);
    } else {
        uint16_t h = dtype == KF_F16 ? kft_f32_to_f16_bits((float)v)
                                     : kft_f32_to_bf16_bits((float)v);
        memcpy(p + 2 * i, &h, 2);
    }
}

/* ---- norm family --------------------------------------------------------- */

/* 1 / sqrt(mean(x^2) + eps) of one row; x * rstd gives PyTorch's
 * hs * torch.rsqrt(var + eps) (an Inf in the row gives rstd 0, so the Inf
 * element becomes NaN and the finite ones 0, as in PyTorch). */
static double rms_rstd(const double *x, int64_t D, double eps)
{
    double sum_sq = 0.0;
    for (int64_t i = 0; i < D; i++)
        sum_sq += x[i] * x[i];
    return 1.0 / sqrt(sum_sq / (double)D + eps);
}

/* One row of rms_norm with the mode's weight step. */
static void rms_norm_row(const double *x, int64_t D, const double *w, double eps, int mode,
                         double offset, int x_dtype, int round_normalized, double *y)
{
    double rstd = rms_rstd(x, D, eps);
    for (int64_t i = 0; i < D; i++) {
        double n = x[i] * rstd;
        if (mode == KF_RMS_LLAMA && round_normalized)
            n = kft_round(x_dtype, n);
        double wv = 1.0;
        if (w)
            wv = mode == KF_RMS_GEMMA ? offset + w[i] : w[i];
        y[i] = w ? n * wv : n;
    }
}

void kft_ref_rms_norm(const double *x, int64_t rows, int64_t D, const double *w, double eps,
                      int mode, double offset, int x_dtype, double *y)
{
    for (int64_t r = 0; r < rows; r++)
        rms_norm_row(x + r * D, D, w, eps, mode, offset, x_dtype, 1, y + r * D);
}

void kft_ref_add_rms_norm(const double *x, const double *residual, int64_t rows, int64_t D,
                          const double *w, double eps, int mode, double offset, int dtype,
                          double *residual_out, double *y)
{
    for (int64_t i = 0; i < rows * D; i++)
        residual_out[i] = kft_round(dtype, x[i] + residual[i]);
    kft_ref_rms_norm(residual_out, rows, D, w, eps, mode, offset, dtype, y);
}

/* (x - mean) * rstd of one row, into n (biased variance, as F.layer_norm). */
static void layer_normalize_row(const double *x, int64_t D, double eps, double *n)
{
    double sum = 0.0;
    for (int64_t i = 0; i < D; i++)
        sum += x[i];
    double mean = sum / (double)D;
    double sum_sq = 0.0;
    for (int64_t i = 0; i < D; i++)
        sum_sq += (x[i] - mean) * (x[i] - mean);
    double rstd = 1.0 / sqrt(sum_sq / (double)D + eps);
    for (int64_t i = 0; i < D; i++)
        n[i] = (x[i] - mean) * rstd;
}

void kft_ref_layer_norm(const double *x, int64_t rows, int64_t D, const double *w,
                        const double *b, double eps, double *y)
{
    for (int64_t r = 0; r < rows; r++) {
        double *yr = y + r * D;
        layer_normalize_row(x + r * D, D, eps, yr);
        for (int64_t i = 0; i < D; i++) {
            if (w)
                yr[i] *= w[i];
            if (b)
                yr[i] += b[i];
        }
    }
}

void kft_ref_ada_norm(const double *x, int64_t rows, int64_t D, const double *scale,
                      const double *shift, const double *w, double eps, int kind, double *y)
{
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + r * D;
        double *yr = y + r * D;
        if (kind == KF_NORM_LAYER) {
            layer_normalize_row(xr, D, eps, yr);
        } else {
            double rstd = rms_rstd(xr, D, eps);
            for (int64_t i = 0; i < D; i++)
                yr[i] = xr[i] * rstd;
        }
        for (int64_t i = 0; i < D; i++) {
            double v = yr[i];
            if (w)
                v *= w[i];
            v *= 1.0 + scale[r * D + i];
            if (shift)
                v += shift[r * D + i];
            yr[i] = v;
        }
    }
}

void kft_ref_add_ada_norm(const double *h, const double *a, const double *gate,
                          const double *scale, const double *shift, const double *w,
                          int64_t rows, int64_t D, double eps, int kind, int dtype,
                          double *h_out, double *y)
{
    for (int64_t i = 0; i < rows * D; i++)
        h_out[i] = kft_round(dtype, gate ? h[i] + a[i] * gate[i] : h[i] + a[i]);
    kft_ref_ada_norm(h_out, rows, D, scale, shift, w, eps, kind, y);
}

void kft_ref_gated_residual(const double *h, const double *a, const double *gate, int64_t n,
                            double *h_out)
{
    for (int64_t i = 0; i < n; i++)
        h_out[i] = h[i] + a[i] * gate[i];
}

/* ---- rotary embeddings --------------------------------------------------- */

void kft_ref_rope_tables_from_positions(const double *pos, int64_t tokens, int n_axes,
                                        const double *freqs, const int *axis, int rotary_dim,
                                        int convention, double *cos_out, double *sin_out)
{
    int half = rotary_dim / 2;
    for (int64_t t = 0; t < tokens; t++) {
        for (int p = 0; p < half; p++) {
            int ax = axis ? axis[p] : 0;
            /* the contract's angle: an f32 product of the f32 inputs */
            float angle_f32 = (float)freqs[p] * (float)pos[t * n_axes + ax];
            double angle = (double)angle_f32;
            double c = cos(angle), s = sin(angle);
            int i0 = convention == KF_ROPE_HALF ? p : 2 * p;
            int i1 = convention == KF_ROPE_HALF ? p + half : 2 * p + 1;
            cos_out[t * rotary_dim + i0] = c;
            cos_out[t * rotary_dim + i1] = c;
            sin_out[t * rotary_dim + i0] = s;
            sin_out[t * rotary_dim + i1] = s;
        }
    }
}

/* One head of Dh channels with the token's cos / sin rows. */
static void rope_head(const double *x, int64_t Dh, int rotary_dim, int convention,
                      const double *c, const double *s, double *y)
{
    int half = rotary_dim / 2;
    for (int64_t i = rotary_dim; i < Dh; i++)
        y[i] = x[i];
    for (int p = 0; p < half; p++) {
        int i0 = convention == KF_ROPE_HALF ? p : 2 * p;
        int i1 = convention == KF_ROPE_HALF ? p + half : 2 * p + 1;
        double x0 = x[i0], x1 = x[i1];
        y[i0] = x0 * c[i0] - x1 * s[i0];
        y[i1] = x1 * c[i1] + x0 * s[i1];
    }
}

void kft_ref_rope(const double *x, int64_t tokens, int64_t heads, int64_t Dh, int rotary_dim,
                  int convention, const double *cos_tab, const double *sin_tab, double *y)
{
    for (int64_t t = 0; t < tokens; t++)
        for (int64_t h = 0; h < heads; h++) {
            int64_t at = (t * heads + h) * Dh;
            rope_head(x + at, Dh, rotary_dim, convention, cos_tab + t * rotary_dim,
                      sin_tab + t * rotary_dim, y + at);
        }
}

void kft_ref_rms_norm_rope(const double *x, int64_t tokens, int64_t heads, int64_t Dh,
                           const double *w, double eps, int mode, double offset, int dtype,
                           int rotary_dim, int convention, const double *cos_tab,
                           const double *sin_tab, double *normed_scratch, double *y)
{
    int64_t width = heads * Dh;
    for (int64_t t = 0; t < tokens; t++)
        rms_norm_row(x + t * width, width, w, eps, mode, offset, dtype, 0,
                     normed_scratch + t * width);
    kft_ref_rope(normed_scratch, tokens, heads, Dh, rotary_dim, convention, cos_tab, sin_tab, y);
}

/* ---- activations and softmax ---------------------------------------------- */

double kft_ref_activation_value(int act, double x)
{
    switch (act) {
    case KF_ACT_SILU:
        return x / (1.0 + exp(-x));
    /* 0.5x(1 + tanh(u)) as x / (1 + e^(-2u)) and 0.5x(1 + erf(x / sqrt2)) as
     * 0.5x erfc(-x / sqrt2): 1 + tanh and 1 + erf cancel for negative x, in
     * double too (1 + tanh(u) is 0 from x ~ -7.6 on, where the value is ~1e-16) */
    case KF_ACT_GELU_TANH: {
        double k = sqrt(2.0 / M_PI);
        return x / (1.0 + exp(-2.0 * k * (x + 0.044715 * x * x * x)));
    }
    default:
        return 0.5 * x * erfc(-x / sqrt(2.0));
    }
}

void kft_ref_activation(const double *x, int64_t n, int act, double *y)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = kft_ref_activation_value(act, x[i]);
}

void kft_ref_glu(const double *gate, const double *up, int64_t n, int act, double *y)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = kft_ref_activation_value(act, gate[i]) * up[i];
}

void kft_ref_softmax(const double *x, int64_t rows, int64_t D, float scale, double *y)
{
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + r * D;
        double *yr = y + r * D;
        double max = -INFINITY;
        int has_nan = 0;
        for (int64_t i = 0; i < D; i++) {
            double v = (double)scale * xr[i];
            if (isnan(v))
                has_nan = 1;
            else if (v > max)
                max = v;
        }
        if (has_nan)
            max = NAN;                  /* torch's max propagates NaN */
        double sum = 0.0;
        for (int64_t i = 0; i < D; i++) {
            yr[i] = exp((double)scale * xr[i] - max);   /* all -inf: -inf - -inf = NaN */
            sum += yr[i];
        }
        for (int64_t i = 0; i < D; i++)
            yr[i] /= sum;
    }
}

/* ---- tolerances ------------------------------------------------------------ */

kft_tolerance kft_tolerance_for(int dtype)
{
    kft_tolerance t;
    switch (dtype) {
    case KF_F16: t.rel_norm = 2e-3; t.atol = 1e-3; t.rtol = 2e-3; break;
    case KF_BF16: t.rel_norm = 1e-2; t.atol = 1e-2; t.rtol = 1.6e-2; break;
    default: t.rel_norm = 1e-5; t.atol = 1e-5; t.rtol = 1e-5; break;
    }
    return t;
}

/* ---- self test: the reference against values worked out by hand ---------- */

static int near(double got, double want, double tol)
{
    if (isnan(want))
        return isnan(got);
    return fabs(got - want) <= tol * (1.0 + fabs(want));
}

static void self_check(FILE *out, kft_result *res, int ok, const char *what)
{
    if (ok) {
        res->passed++;
    } else {
        res->failed++;
        fprintf(out, "FAIL reference self test: %s\n", what);
    }
}

int kft_reference_self_test(FILE *out, kft_result *res)
{
    int before = res->failed;
    double y[8], y2[8];
    /* conversions */
    self_check(out, res,
               kft_f32_to_f16_bits(1.0f) == 0x3C00 && kft_f32_to_f16_bits(65504.0f) == 0x7BFF &&
                   kft_f32_to_f16_bits(65520.0f) == 0x7C00 &&
                   kft_f32_to_f16_bits(5.9604645e-8f) == 0x0001 &&
                   kft_f32_to_f16_bits(1.0f / 3.0f) == 0x3555 &&
                   kft_f32_to_f16_bits(-2.0f) == 0xC000 && kft_f16_bits_to_f32(0x3555) == 0.333251953125f,
               "f16 conversions");
    self_check(out, res,
               kft_f32_to_bf16_bits(1.00390625f) == 0x3F80 &&     /* tie -> even */
                   kft_f32_to_bf16_bits(1.01171875f) == 0x3F82 &&  /* tie -> even */
                   kft_f32_to_bf16_bits(INFINITY) == 0x7F80 &&
                   isnan(kft_bf16_bits_to_f32(kft_f32_to_bf16_bits(NAN))),
               "bf16 conversions");
    /* rms_norm of [3, 4], eps 0: rstd = 1/sqrt(12.5) */
    const double x34[2] = {3.0, 4.0}, w[2] = {2.0, 0.5}, wg[2] = {0.0, 1.0};
    kft_ref_rms_norm(x34, 1, 2, w, 0.0, KF_RMS_NONE, 0.0, KF_F32, y);
    self_check(out, res, near(y[0], 1.6970562748, 1e-9) && near(y[1], 0.5656854249, 1e-9),
               "rms_norm none [3,4] * [2,0.5]");
    /* llama in bf16: n = [0.8485, 1.1314] rounds to [217/256, 145/128] first */
    kft_ref_rms_norm(x34, 1, 2, w, 0.0, KF_RMS_LLAMA, 0.0, KF_BF16, y);
    self_check(out, res, near(y[0], 1.6953125, 1e-12) && near(y[1], 0.56640625, 1e-12),
               "rms_norm llama bf16 rounds before the weight");
    kft_ref_rms_norm(x34, 1, 2, wg, 0.0, KF_RMS_GEMMA, 1.0, KF_F32, y);
    self_check(out, res, near(y[0], 0.8485281374, 1e-9) && near(y[1], 2.2627416998, 1e-9),
               "rms_norm gemma (1 + w)");
    /* add_rms_norm in bf16: 1 + 2^-9 rounds to 1 before the norm */
    const double one[1] = {1.0}, tiny[1] = {1.0 / 512.0};
    kft_ref_add_rms_norm(one, tiny, 1, 1, NULL, 0.0, KF_RMS_NONE, 0.0, KF_BF16, y2, y);
    self_check(out, res, y2[0] == 1.0 && y[0] == 1.0, "add_rms_norm rounds the sum");
    /* layer_norm of [1, 2, 3]: (x - 2) * sqrt(3/2) */
    const double x123[3] = {1.0, 2.0, 3.0}, b[3] = {0.5, 0.5, 0.5};
    kft_ref_layer_norm(x123, 1, 3, NULL, b, 0.0, y);
    self_check(out, res,
               near(y[0], 0.5 - 1.2247448714, 1e-9) && near(y[1], 0.5, 1e-12) &&
                   near(y[2], 0.5 + 1.2247448714, 1e-9),
               "layer_norm [1,2,3] + 0.5");
    /* ada_norm rms of [3, 4] with scale 1, shift 1: n * 2 + 1 */
    const double two_ones[2] = {1.0, 1.0};
    kft_ref_ada_norm(x34, 1, 2, two_ones, two_ones, NULL, 0.0, KF_NORM_RMS, y);
    self_check(out, res, near(y[0], 2.6970562748, 1e-9) && near(y[1], 3.2627416998, 1e-9),
               "ada_norm rms");
    /* softmax */
    const double sm[6] = {0.0, log(3.0), -INFINITY, -INFINITY, 1.0, INFINITY};
    kft_ref_softmax(sm, 3, 2, 1.0f, y);
    self_check(out, res,
               near(y[0], 0.25, 1e-12) && near(y[1], 0.75, 1e-12) && isnan(y[2]) && isnan(y[3]) &&
                   isnan(y[4]) && isnan(y[5]),
               "softmax [0, ln3] / all -inf / with +inf");
    /* activations at 1 and at -inf / +inf as PyTorch */
    self_check(out, res,
               near(kft_ref_activation_value(KF_ACT_SILU, 1.0), 0.7310585786, 1e-9) &&
                   near(kft_ref_activation_value(KF_ACT_GELU_ERF, 1.0), 0.8413447461, 1e-9) &&
                   near(kft_ref_activation_value(KF_ACT_GELU_TANH, 1.0), 0.8411919906, 1e-9) &&
                   isnan(kft_ref_activation_value(KF_ACT_SILU, -INFINITY)) &&
                   kft_ref_activation_value(KF_ACT_GELU_ERF, INFINITY) == INFINITY,
               "silu / gelu values");
    /* gelu at -10, where 1 + tanh and 1 + erf cancel to nothing even in double */
    self_check(out, res,
               fabs(kft_ref_activation_value(KF_ACT_GELU_ERF, -10.0) / -7.61985302416e-23 - 1) <
                       1e-9 &&
                   fabs(kft_ref_activation_value(KF_ACT_GELU_TANH, -10.0) / -1.20409234821e-37 - 1) <
                       1e-9,
               "gelu at -10");
    /* rope: pair 0 by pi/2, pair 1 by 0 */
    const double x4[4] = {1.0, 2.0, 3.0, 4.0};
    const double ch[4] = {0.0, 1.0, 0.0, 1.0}, sh[4] = {1.0, 0.0, 1.0, 0.0};
    kft_ref_rope(x4, 1, 1, 4, 4, KF_ROPE_HALF, ch, sh, y);
    self_check(out, res, y[0] == -3.0 && y[1] == 2.0 && y[2] == 1.0 && y[3] == 4.0, "rope half");
    const double ci[4] = {0.0, 0.0, 1.0, 1.0}, si[4] = {1.0, 1.0, 0.0, 0.0};
    kft_ref_rope(x4, 1, 1, 4, 4, KF_ROPE_INTERLEAVED, ci, si, y);
    self_check(out, res, y[0] == -2.0 && y[1] == 1.0 && y[2] == 3.0 && y[3] == 4.0,
               "rope interleaved");
    kft_ref_rope(x4, 1, 1, 4, 2, KF_ROPE_INTERLEAVED, ci, si, y);
    self_check(out, res, y[0] == -2.0 && y[1] == 1.0 && y[2] == 3.0 && y[3] == 4.0,
               "rope partial rotary passes the rest through");
    /* positions: pair 0 freq 0.5 at pos 3 (angle 1.5), pair 1 freq 0 */
    const double pos[1] = {3.0}, fr[2] = {0.5, 0.0};
    double c[4], s[4];
    kft_ref_rope_tables_from_positions(pos, 1, 1, fr, NULL, 4, KF_ROPE_HALF, c, s);
    self_check(out, res,
               near(c[0], cos(1.5), 1e-15) && c[2] == c[0] && s[2] == s[0] && c[1] == 1.0 &&
                   s[1] == 0.0,
               "rope tables from positions");
    /* large position: the angle is the f32 product */
    const double bigpos[1] = {100001.0}, fr1[1] = {0.1};
    kft_ref_rope_tables_from_positions(bigpos, 1, 1, fr1, NULL, 2, KF_ROPE_HALF, c, s);
    double angle = (double)(0.1f * 100001.0f);
    self_check(out, res, c[0] == cos(angle) && s[0] == sin(angle), "rope f32 angle");
    return res->failed == before;
}
