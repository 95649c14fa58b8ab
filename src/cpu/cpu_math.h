/* cpu_math.h - exp in f32 (of an f32 or a double argument), sin and cos of
 * f32 angles, as static
 * inline C that the compiler can vectorize: plain arithmetic, bit moves and
 * selects, no branch and no table in the common path, no fused multiply-add.
 * The CPU kernels call them in counted loops over rows (softmax.c,
 * activation.c, rope.c) instead of libm, whose calls keep those loops scalar.
 * Both compiled copies of the kernels (cpu.h) run the same IEEE operations,
 * so their results stay bitwise equal. tests/test_cpu_math.c checks them
 * against libm. Accuracy, as measured there and against glibc:
 *
 *   kf_cpu_expf(x)        exp(x) in f32 with a degree-7
 *                         series: at most 1 ulp from glibc's expf for every
 *                         f32 x (checked exhaustively once; the test samples),
 *                         equal to it for 99.3% of the f32 values in
 *                         [-20, 20] and for about 90% of arguments drawn
 *                         evenly from it; inf, 0 and NaN as expf.
 *   kf_cpu_expf_of_double(x) exp(x) in f32 for a double x (softmax.c's f32
 *                         rows): the reduction in double, kf_cpu_expf's series;
 *                         at most 1 ulp from exp rounded to f32 (~8% of
 *                         arguments in [-110, 0] 1 ulp off); inf, 0, NaN as
 *                         kf_cpu_expf. (Those rows took an exp in double with
 *                         a degree-13 series before, 1.5x the time.)
 *   kf_cpu_gelu_erf_f32(x) 0.5x erfc(-x / sqrt2) in f32 from a fitted erfc
 *                         times kf_cpu_expf: relative error under 1e-6 for
 *                         x >= -5, 5e-6 below (|y| < 1.5e-6 there).
 *   kf_cpu_sin_cos_f32(a) sin(a) and cos(a) of an f32 a, at most 1 f32 ulp
 *                         from glibc's sin / cos rounded to f32 for |a| <=
 *                         KF_CPU_TRIG_MAX (2^20 rad); sin(-0) = -0. Beyond
 *                         that bound, or for a NaN or infinite a, its result
 *                         is meaningless:
 *   kf_cpu_sin_cos_row()  sin and cos of n f32 angles with kf_cpu_sin_cos_f32,
 *                         then libm's sin / cos (in double, rounded to f32)
 *                         for the rare angles beyond KF_CPU_TRIG_MAX or not
 *                         finite.
 *
 * expf: x = k ln2 + r with k = round(x / ln2) and |r| <= ln2 / 2 (Cody-Waite:
 * ln2 in two parts, the first with 15 bits so that k * ln2_hi is exact; in
 * double for kf_cpu_expf_of_double, 43 bits), exp(r) by its Taylor series to
 * degree 7 by Estrin's scheme, times 2^k applied as two exact powers of two
 * (k split in halves) so that results that underflow into subnormals are
 * rounded once.
 *
 * sin / cos: a = k pi/2 + r with k = round(a * 2/pi) and |r| <= pi/4, in
 * double (Cody-Waite: pi/2 in three parts of 31, 32 and 53 significant bits,
 * k * part exact in the first two for |k| < 2^21, a - k * part1 exact), so
 * that the cancellation near multiples of pi/2 costs no accuracy for |a| <=
 * 2^20; r is then rounded to f32 and the Taylor series of sin and cos on
 * [-pi/4, pi/4] run in f32 (degrees 9 and 10: truncation below 0.05 f32
 * ulp), the quadrant k mod 4 picking sin or cos and the sign. The f32 series
 * run twice as many lanes per vector as double and half the degree: a row
 * of sin / cos takes a third of the time of the earlier double series
 * (degrees 17 / 18, r as a double-double: within 1 double ulp, then rounded
 * to f32), rope's positions form 1.6-1.8x less (BENCHMARKS.md, CPU backend),
 * at the cost of results 1 f32 ulp from the correctly rounded ones for about
 * a quarter to a third of the angles (test_cpu_math counts them). */
#ifndef KF_CPU_MATH_H
#define KF_CPU_MATH_H

#include <math.h>
#include <stdint.h>

#include "cpu/half.h"

static inline uint64_t kf_cpu_double_bits(double x)
{
    union { double value; uint64_t bits; } pun = {.value = x};
    return pun.bits;
}

static inline double kf_cpu_double_from_bits(uint64_t u)
{
    union { uint64_t bits; double value; } pun = {.bits = u};
    return pun.value;
}

/* Adding 1.5 * 2^52 to a double of magnitude below 2^51 rounds it to an
 * integer (to nearest, ties to even) that then sits in the low mantissa bits:
 * bits(v + KF_CPU_ROUND_SHIFT) = bits(KF_CPU_ROUND_SHIFT) + round(v). */
#define KF_CPU_ROUND_SHIFT 0x1.8p52

/* 2^n in f32 for an integer-valued float n, -126 <= n <= 127: n + 127 lands
 * in the low mantissa bits, and the shift moves it to the exponent field
 * while dropping the bits of the shift constant. */
static inline float kf_cpu_pow2f(float n)
{
    return kf_f32_of_bits(kf_bits_of_f32(n + (0x1.8p23f + 127.0f)) << 23);
}

/* exp(r) * 2^k in f32 for |r| <= ln2 / 2 and an integer-valued k in
 * [-217, 217]: kf_cpu_expf and kf_cpu_expf_of_double after their reductions. */
static inline float kf_cpu_expf_reduced(float r, float k)
{
    /* exp(r) = 1 + r + r^2 (c2 + c3 r + ... + c7 r^5), c_n = 1/n!, the
     * bracket by Estrin's scheme (pairs, then powers of r^2). */
    float r2 = r * r;
    float pair23 = 1.0f / 2.0f + r * (1.0f / 6.0f);
    float pair45 = 1.0f / 24.0f + r * (1.0f / 120.0f);
    float pair67 = 1.0f / 720.0f + r * (1.0f / 5040.0f);
    float series = pair23 + r2 * (pair45 + r2 * pair67);
    float p = 1.0f + (r + r2 * series);
    /* k = k_first + k_second, each within [-109, 109]: both powers are
     * normal numbers, p * 2^k_first is exact, the second product rounds once. */
    float k_first = (k * 0.5f + 0x1.8p23f) - 0x1.8p23f;
    return (p * kf_cpu_pow2f(k_first)) * kf_cpu_pow2f(k - k_first);
}

static inline float kf_cpu_expf(float x)
{
    const float inv_ln2 = 0x1.715476p+0f;
    const float ln2_hi = 0x1.62e4p-1f;     /* 15 bits: k * ln2_hi is exact */
    const float ln2_lo = 0x1.7f7d1cp-20f;  /* ln2 - ln2_hi */
    /* Past +-150 the f32 result is inf or 0 anyway; the clamp keeps k small
     * (a NaN fails the comparison and stays NaN). */
    x = fabsf(x) > 150.0f ? copysignf(150.0f, x) : x;
    float k = (x * inv_ln2 + 0x1.8p23f) - 0x1.8p23f;
    float r = (x - k * ln2_hi) - k * ln2_lo;
    return kf_cpu_expf_reduced(r, k);
}

/* exp(x) in f32 for a double x (softmax's f32 rows, whose scale * x - max is
 * formed exactly enough only in double): x = k ln2 + r reduced in double,
 * where r's rounding to f32 then costs under 2^-25 of the result, and exp(r)
 * 2^k as kf_cpu_expf. Within 1 ulp of exp(x) rounded to f32 (test_cpu_math.c);
 * an exp in double (degree-13 series) made f32 softmax 3x PyTorch's time on
 * the CPU. inf / 0 / NaN as kf_cpu_expf. */
static inline float kf_cpu_expf_of_double(double x)
{
    const double inv_ln2 = 0x1.71547652b82fep+0;
    const double ln2_hi = 0x1.62e42fee00000p-1;   /* 43 bits: k * ln2_hi is exact */
    const double ln2_lo = 0x1.a39ef35793c76p-33;  /* ln2 - ln2_hi */
    x = fabs(x) > 150.0 ? copysign(150.0, x) : x;
    double k = (x * inv_ln2 + KF_CPU_ROUND_SHIFT) - KF_CPU_ROUND_SHIFT;
    float r = (float)((x - k * ln2_hi) - k * ln2_lo);
    return kf_cpu_expf_reduced(r, (float)k);
}

/* 0.5x erfc(-x / sqrt2) with erfc(s / sqrt2), s = |x|, as
 * t exp(Q(t) - s^2 / 2), t = 1 / (1 + 0.34375 s), Q of degree 8 fitted here
 * (Lawson-weighted least squares in Chebyshev points over s in [0, 13.5], the
 * f32 range of erfc; 2.6e-7 with the coefficients rounded to f32). s^2 is
 * taken exactly as h + l (Veltkamp's split of s, no fused multiply-add), so
 * the one error growing with s is the rounding of the exponent (|y| < 1.5e-6
 * there). libm's erfcf kept the loop scalar: 25x PyTorch's time on 64 x 8192.
 * test_cpu_math.c bounds its error against erfc in long double. */
static inline float kf_cpu_gelu_erf_f32(float x)
{
    /* s = min(|x|, 15), on the bits (non-negative floats order as their bit
     * patterns; an integer min, where a float select beside kf_cpu_expf's
     * left GCC a branch that kept the loop scalar): past 15 the exponent is
     * below expf's underflow, the result 0; inf would make l NaN. A NaN x
     * gets s = 15 and stays NaN through the last product. */
    const uint32_t abs_bits = kf_bits_of_f32(x) & 0x7fffffffu, bits_15 = 0x41700000u;
    const float s = kf_f32_of_bits(abs_bits < bits_15 ? abs_bits : bits_15);
    const float t = 1.0f / (1.0f + 0.34375f * s);
    float q = 0.043825157f;
    q = -0.401808023f + q * t;
    q = 1.22973037f + q * t;
    q = -1.63142717f + q * t;
    q = 0.83729142f + q * t;
    q = -0.226315498f + q * t;
    q = 0.449700415f + q * t;
    q = 0.992267728f + q * t;
    q = -1.29326463f + q * t;
    const float split = 4097.0f * s;              /* s = s_hi + s_lo, 12 bits each */
    const float s_hi = split - (split - s), s_lo = s - s_hi;
    const float h = s * s;
    const float l = ((s_hi * s_hi - h) + 2.0f * s_hi * s_lo) + s_lo * s_lo; /* s^2 - h */
    const float r = t * kf_cpu_expf((q - 0.5f * h) - 0.5f * l); /* erfc(s / sqrt2) */
    /* erfc(-x / sqrt2) = r for x < 0 (sign bit set), else 2 - r; picked by
     * a bit mask, for the same reason */
    const uint32_t negative = 0u - (kf_bits_of_f32(x) >> 31);
    const float erfc_v = kf_f32_of_bits((kf_bits_of_f32(r) & negative) |
                                        (kf_bits_of_f32(2.0f - r) & ~negative));
    return 0.5f * x * erfc_v;
}

/* Largest |a| that kf_cpu_sin_cos_f32 reduces accurately (k < 2^20 < 2^21). */
#define KF_CPU_TRIG_MAX 0x1p20

typedef struct kf_cpu_sin_cos_pair {
    float sin;
    float cos;
} kf_cpu_sin_cos_pair;

static inline kf_cpu_sin_cos_pair kf_cpu_sin_cos_f32(float angle)
{
    const double two_over_pi = 0x1.45f306dc9c883p-1;
    const double pio2_1 = 0x1.921fb544p+0;         /* 31 significant bits */
    const double pio2_2 = 0x1.0b4611a6p-34;        /* 32 */
    const double pio2_3 = 0x1.3198a2e037073p-69;   /* 53: pi/2 to 2^-122 */
    double a = (double)angle;
    double shifted = a * two_over_pi + KF_CPU_ROUND_SHIFT;
    uint32_t quadrant = (uint32_t)(kf_cpu_double_bits(shifted) & 3);   /* k mod 4 */
    double k = shifted - KF_CPU_ROUND_SHIFT;
    float r = (float)(((a - k * pio2_1) - k * pio2_2) - k * pio2_3);
    float z = r * r;
    /* sin r = r + r z s(z), s = -1/3! + z/5! - z^2/7! + z^3/9! (Horner) */
    float s = 1.0f / 362880.0f;
    s = z * s - 1.0f / 5040.0f;
    s = z * s + 1.0f / 120.0f;
    s = z * s - 1.0f / 6.0f;
    float sin_r = r + (r * z) * s;
    /* cos r = 1 + z (-1/2 + z c(z)), c = 1/4! - z/6! + z^2/8! - z^3/10! */
    float c = -1.0f / 3628800.0f;
    c = z * c + 1.0f / 40320.0f;
    c = z * c - 1.0f / 720.0f;
    c = z * c + 1.0f / 24.0f;
    float cos_r = 1.0f + z * (z * c - 0.5f);
    /* quadrant 0: (sin, cos) = (s, c); 1: (c, -s); 2: (-s, -c); 3: (-c, s).
     * Picked and negated with bit masks: conditional negations would leave
     * branches that GCC does not vectorize. */
    uint32_t odd = 0u - (quadrant & 1u);           /* all ones in quadrants 1, 3 */
    uint32_t sin_bits = kf_bits_of_f32(sin_r), cos_bits = kf_bits_of_f32(cos_r);
    uint32_t sin_pick = (cos_bits & odd) | (sin_bits & ~odd);
    uint32_t cos_pick = (sin_bits & odd) | (cos_bits & ~odd);
    /* sin(-0) = -0: a zero angle is its own sine (the series loses its sign). */
    uint32_t zero = 0u - (uint32_t)(angle == 0.0f);    /* all ones when angle is +-0 */
    sin_pick = (kf_bits_of_f32(angle) & zero) | ((sin_pick ^ ((quadrant & 2u) << 30)) & ~zero);
    kf_cpu_sin_cos_pair out;
    out.sin = kf_f32_of_bits(sin_pick);
    out.cos = kf_f32_of_bits(cos_pick ^ (((quadrant + 1u) & 2u) << 30));
    return out;
}

/* sin_out[i] = sin(angle[i]), cos_out[i] = cos(angle[i]) for i < n, in f32. */
static inline void kf_cpu_sin_cos_row(const float *restrict angle, float *restrict sin_out,
                                      float *restrict cos_out, int64_t n)
{
    int out_of_range = 0;
    for (int64_t i = 0; i < n; i++) {
        kf_cpu_sin_cos_pair v = kf_cpu_sin_cos_f32(angle[i]);
        sin_out[i] = v.sin;
        cos_out[i] = v.cos;
        out_of_range |= !(fabsf(angle[i]) <= (float)KF_CPU_TRIG_MAX);
    }
    if (!out_of_range)
        return;
    for (int64_t i = 0; i < n; i++) {
        double a = (double)angle[i];
        if (!(fabs(a) <= KF_CPU_TRIG_MAX)) {
            sin_out[i] = (float)sin(a);
            cos_out[i] = (float)cos(a);
        }
    }
}

#endif /* KF_CPU_MATH_H */
