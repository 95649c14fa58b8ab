/* test_cpu_math.c - checks the vectorizable expf (of f32 and double arguments), sin and cos of
 * src/cpu/cpu_math.h against libm (and its gelu_erf against erfcl): the largest distance in ulps over random
 * points of several ranges and over edge cases (zeros, tiny and subnormal
 * arguments and results, the overflow and underflow thresholds, +-inf, NaN,
 * |a| at and near KF_CPU_TRIG_MAX, the floats nearest every multiple of pi/2
 * up to it, angles near 1e5 rad), and the f32 row of sin / cos that rope
 * uses (libm beyond the bound, kf_cpu_sin_cos_f32 bit for bit within it).
 * Run: ./test_cpu_math [--quick] (--quick: a tenth of the random points).
 * Last line: "N passed, N failed"; exit 1 on any failure. */
#define _DEFAULT_SOURCE
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_math.h"
#include "unit_check.h"

static uint64_t g_rng = 0x9e3779b97f4a7c15u;

static uint64_t next_random(void)   /* splitmix64 */
{
    uint64_t z = (g_rng += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* Uniform in [lo, hi). */
static double random_in(double lo, double hi)
{
    return lo + (hi - lo) * ((double)(next_random() >> 11) * 0x1p-53);
}

/* Position of an f32 on the line of its type's values (-0 and +0
 * together), so that neighbours differ by 1. */
static int64_t ordered_f32(float x)
{
    int32_t i;
    memcpy(&i, &x, sizeof i);
    return i < 0 ? (int64_t)INT32_MIN - i : i;
}

/* Distance in ulps between two positions, both NaN flags and both
 * positions; 0 when both are NaN, huge when only one is. */
static double distance(int got_nan, int want_nan, int64_t got, int64_t want)
{
    if (got_nan || want_nan)
        return got_nan && want_nan ? 0.0 : 1e300;
    if ((got < 0) != (want < 0))   /* opposite signs: far apart anyway */
        return fabs((double)got) + fabs((double)want);
    return got > want ? (double)(got - want) : (double)(want - got);
}

static double ulps_f32(float got, float want)
{
    return distance(isnan(got), isnan(want), ordered_f32(got), ordered_f32(want));
}

/* ---- expf ----------------------------------------------------------------- */

static double g_expf_worst = 0.0;
static float g_expf_worst_at = 0.0f;
static int64_t g_expf_differ = 0, g_expf_total = 0;

static void check_expf_at(float x)
{
    double d = ulps_f32(kf_cpu_expf(x), expf(x));
    if (d > g_expf_worst) {
        g_expf_worst = d;
        g_expf_worst_at = x;
    }
    g_expf_differ += d > 0.0;
    g_expf_total++;
}

static void test_expf(int points)
{
    const float edges[] = {0.0f, -0.0f, 1e-40f, -1e-40f, 1e-45f, 1e-20f, 1.0f, -1.0f,
                           88.72f, 88.7228f, 88.7229f, 89.0f, 100.0f, 150.0f, 151.0f, 1e30f,
                           3e38f, -87.33f, -87.34f, -100.0f, -103.27f, -103.28f, -103.98f,
                           -104.0f, -150.0f, -151.0f, -1e30f, -3e38f};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
        check_expf_at(edges[i]);
    for (int k = -160; k <= 130; k++) {
        float m = (float)((k + 0.5) * M_LN2);
        check_expf_at((float)(k * M_LN2));
        check_expf_at(m);
        check_expf_at(nextafterf(m, 0.0f));
        check_expf_at(nextafterf(m, 200.0f));
    }
    /* Every f32 of [1, 1 + 2^-7) and its negative: consecutive arguments. */
    for (float x = 1.0f; x < 1.0078125f; x = nextafterf(x, 2.0f)) {
        check_expf_at(x);
        check_expf_at(-x);
    }
    for (int i = 0; i < points; i++) {
        check_expf_at((float)random_in(-20.0, 20.0));
        check_expf_at((float)random_in(-110.0, 90.0));
        check_expf_at((float)random_in(-1e-3, 1e-3));
    }
    CHECK(g_expf_worst <= 1.0, "expf: %g ulps from libm at %a", g_expf_worst,
          (double)g_expf_worst_at);
    /* About 1 in 10 arguments of these ranges differ (by 1 ulp: the f32
     * series rounds a little worse than glibc's double evaluation). */
    CHECK(g_expf_differ * 5 <= g_expf_total, "expf: %lld of %lld differ from libm",
          (long long)g_expf_differ, (long long)g_expf_total);
    printf("expf: at most %g ulp from libm, %lld of %lld differ\n", g_expf_worst,
           (long long)g_expf_differ, (long long)g_expf_total);

    float inf = INFINITY;
    CHECK(kf_cpu_expf(-inf) == 0.0f && !signbit(kf_cpu_expf(-inf)), "expf(-inf) = +0");
    CHECK(kf_cpu_expf(inf) == inf && kf_cpu_expf(89.0f) == inf, "expf overflows to inf");
    CHECK(kf_cpu_expf(-104.0f) == 0.0f, "expf(-104) = 0");
    CHECK(kf_cpu_expf(-103.0f) > 0.0f, "expf(-103) is subnormal, not 0");
    CHECK(isnan(kf_cpu_expf(NAN)), "expf(NaN) is NaN");
    /* silu's x / (1 + exp(-x)) at the ends, as with expf. */
    CHECK(isnan(-inf / (1.0f + kf_cpu_expf(inf))), "silu(-inf) is NaN");
    CHECK(inf / (1.0f + kf_cpu_expf(-inf)) == inf, "silu(+inf) = inf");
}

/* ---- gelu_erf ---------------------------------------------------------------- */

/* Largest relative error of kf_cpu_gelu_erf_f32 allowed per range of x, against
 * 0.5x erfc(-x / sqrt2) in long double (results below 1e-37, where f32 loses
 * relative precision, are left out): the fit's 2.6e-7 plus the exponent's
 * rounding, which grows with x^2 (measured: 7.9e-6, 4.1e-6, 1.3e-6, 6.7e-7,
 * 1.2e-7 over every f32 of each range). ops.md's f32 rtol is 1e-5. */
static const struct {
    double lo, hi, max_rel;
} g_gelu_ranges[] = {
    {-13.2, -10.0, 1e-5}, {-10.0, -5.0, 5e-6}, {-5.0, -1.0, 1.5e-6}, {-1.0, 1.0, 1e-6},
    {1.0, 8.0, 2e-7}, {8.0, 1e4, 1e-7}};

static double gelu_erf_long(float x)
{
    return (double)(0.5L * x * erfcl(-(long double)x / sqrtl(2.0L)));
}

static void test_gelu_erf(int points)
{
    for (size_t r = 0; r < sizeof g_gelu_ranges / sizeof g_gelu_ranges[0]; r++) {
        double lo = g_gelu_ranges[r].lo, hi = g_gelu_ranges[r].hi, worst = 0.0, worst_at = 0.0;
        for (int i = 0; i < points / 4; i++) {
            float x = (float)random_in(lo, hi);
            double want = gelu_erf_long(x);
            if (fabs(want) < 1e-37)
                continue;
            double rel = fabs((double)kf_cpu_gelu_erf_f32(x) - want) / fabs(want);
            if (!(rel <= worst)) {
                worst = rel;
                worst_at = x;
            }
        }
        CHECK(worst <= g_gelu_ranges[r].max_rel, "gelu_erf: relative error %.3g at %.9g (bound %g)",
              worst, worst_at, g_gelu_ranges[r].max_rel);
    }
    float inf = INFINITY;
    CHECK(kf_cpu_gelu_erf_f32(inf) == inf, "gelu_erf(+inf) = inf");
    CHECK(isnan(kf_cpu_gelu_erf_f32(-inf)), "gelu_erf(-inf) is NaN (-inf * 0), as PyTorch");
    CHECK(isnan(kf_cpu_gelu_erf_f32(NAN)), "gelu_erf(NaN) is NaN");
    CHECK(kf_cpu_gelu_erf_f32(0.0f) == 0.0f && signbit(kf_cpu_gelu_erf_f32(-0.0f)),
          "gelu_erf(+-0) = +-0");
    CHECK(kf_cpu_gelu_erf_f32(-15.5f) == 0.0f && kf_cpu_gelu_erf_f32(-14.0f) < 0.0f,
          "gelu_erf: 0 past the clamp at -15, a subnormal at -14");
    CHECK(kf_cpu_gelu_erf_f32(1e-40f) == 0.5f * 1e-40f, "gelu_erf of a subnormal is x / 2");
}

/* ---- sin / cos ------------------------------------------------------------ */

/* At most this many f32 ulps from libm's double sin / cos rounded to f32. */
#define MAX_ULPS_TRIG_F32 1

static double g_sin_worst = 0.0, g_cos_worst = 0.0;
static float g_sin_worst_at = 0.0f, g_cos_worst_at = 0.0f;
static int64_t g_trig_differ = 0, g_trig_total = 0;

static void check_trig_at(float a)
{
    kf_cpu_sin_cos_pair v = kf_cpu_sin_cos_f32(a);
    double ds = ulps_f32(v.sin, (float)sin((double)a));
    double dc = ulps_f32(v.cos, (float)cos((double)a));
    if (ds > g_sin_worst) {
        g_sin_worst = ds;
        g_sin_worst_at = a;
    }
    if (dc > g_cos_worst) {
        g_cos_worst = dc;
        g_cos_worst_at = a;
    }
    g_trig_differ += ds > 0.0 || dc > 0.0;
    g_trig_total++;
}

static void test_sin_cos(int points)
{
    const float edges[] = {0.0f, -0.0f, 1e-40f, -1e-40f, 1e-30f, 1e-9f, 0.5f, (float)M_PI_4,
                           -(float)M_PI_4, nextafterf((float)M_PI_4, 1.0f), (float)M_PI_2,
                           (float)M_PI, 2.0f * (float)M_PI, 100000.0f, -100000.0f, 99999.5f,
                           123456.789f, 1e6f, 0x1p20f, -0x1p20f, nextafterf(0x1p20f, 0.0f)};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
        check_trig_at(edges[i]);
    /* The floats nearest k pi/2 (the largest cancellation) and their two
     * neighbours, for every k up to the bound. */
    for (int64_t k = -700000; k <= 700000; k++) {
        double m = (double)k * M_PI_2;
        if (fabs(m) > KF_CPU_TRIG_MAX)
            continue;
        float f = (float)m;
        check_trig_at(f);
        check_trig_at(nextafterf(f, 0.0f));
        check_trig_at(nextafterf(f, 1e9f));
    }
    for (int i = 0; i < points; i++) {
        check_trig_at((float)random_in(-M_PI_4, M_PI_4));
        check_trig_at((float)random_in(-10.0, 10.0));
        check_trig_at((float)random_in(-1e5, 1e5));
        check_trig_at((float)random_in(-KF_CPU_TRIG_MAX, KF_CPU_TRIG_MAX));
        check_trig_at((float)random_in(KF_CPU_TRIG_MAX - 100.0, KF_CPU_TRIG_MAX));
        check_trig_at((float)random_in(-1e-3, 1e-3));
    }
    CHECK(g_sin_worst <= MAX_ULPS_TRIG_F32, "sin: %g f32 ulps from libm at %.9g", g_sin_worst,
          (double)g_sin_worst_at);
    CHECK(g_cos_worst <= MAX_ULPS_TRIG_F32, "cos: %g f32 ulps from libm at %.9g", g_cos_worst,
          (double)g_cos_worst_at);
    printf("f32 sin: at most %g ulp from libm, cos: at most %g ulp; %lld of %lld angles "
           "differ\n", g_sin_worst, g_cos_worst, (long long)g_trig_differ,
           (long long)g_trig_total);

    kf_cpu_sin_cos_pair z = kf_cpu_sin_cos_f32(-0.0f);
    CHECK(z.sin == 0.0f && signbit(z.sin) && z.cos == 1.0f, "sin(-0) = -0, cos(-0) = 1");
    z = kf_cpu_sin_cos_f32(0.0f);
    CHECK(z.sin == 0.0f && !signbit(z.sin) && z.cos == 1.0f, "sin(+0) = +0, cos(+0) = 1");
}

/* The f32 row: libm beyond the bound (exactly), and below it the values of
 * kf_cpu_sin_cos_f32 (bit for bit: the row adds nothing but the fallback). */
static void test_sin_cos_row(int points)
{
    enum { N = 4096 };
    static float angle[N], s[N], c[N];
    const float specials[] = {0.0f, -0.0f, 1e-40f, -1e-40f, 1e-30f, (float)M_PI_2, 1e5f,
                              -1e5f, 0x1p20f, -0x1p20f, 1048576.125f, -1048576.125f, 1e6f,
                              2e6f, 1e10f, -1e10f, 3e38f, -3e38f, INFINITY, -INFINITY, NAN};
    const int n_special = (int)(sizeof specials / sizeof specials[0]);
    int libm_exact = 1, same_as_scalar = 1;
    int rounds = points / 1000 + 1;
    for (int round = 0; round < rounds; round++) {
        for (int i = 0; i < N; i++) {
            double range = (i % 3 == 0) ? 1e5 : (i % 3 == 1) ? 100.0 : 2e6;
            angle[i] = i < n_special && round == 0 ? specials[i] : (float)random_in(-range, range);
        }
        kf_cpu_sin_cos_row(angle, s, c, N);
        for (int i = 0; i < N; i++) {
            double a = (double)angle[i];
            if (!(fabs(a) <= KF_CPU_TRIG_MAX)) {
                float want_s = (float)sin(a), want_c = (float)cos(a);
                if (memcmp(&s[i], &want_s, 4) != 0 || memcmp(&c[i], &want_c, 4) != 0)
                    libm_exact = 0;
                continue;
            }
            kf_cpu_sin_cos_pair v = kf_cpu_sin_cos_f32(angle[i]);
            if (memcmp(&s[i], &v.sin, 4) != 0 || memcmp(&c[i], &v.cos, 4) != 0)
                same_as_scalar = 0;
        }
    }
    CHECK(libm_exact, "beyond KF_CPU_TRIG_MAX or not finite, the row is libm's");
    CHECK(same_as_scalar, "within the bound, the row is kf_cpu_sin_cos_f32's, bit for bit");
    kf_cpu_sin_cos_row(angle, s, c, 0);   /* n = 0 touches nothing */
}

/* ---- expf of a double argument (softmax's f32 rows) ------------------------ */

static double g_expfd_worst = 0.0;
static double g_expfd_worst_at = 0.0;

static void check_expf_of_double_at(double x)
{
    double d = ulps_f32(kf_cpu_expf_of_double(x), (float)exp(x));
    if (d > g_expfd_worst) {
        g_expfd_worst = d;
        g_expfd_worst_at = x;
    }
}

static void test_expf_of_double(int points)
{
    const double edges[] = {0.0, -0.0, -1e-300, -1e-20, 1e-20, -1.0, 1.0, -87.33, -87.34,
                            -100.0, -103.27, -103.28, -103.97, -103.98, -104.0, -149.0,
                            -150.0, -151.0, -1e30, -1e300, 88.72, 88.73, 150.0, 1e300};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
        check_expf_of_double_at(edges[i]);
    /* the ends of the reduction range, and arguments that are no f32 value */
    for (int k = -160; k <= 130; k++) {
        check_expf_of_double_at(k * M_LN2);
        check_expf_of_double_at((k + 0.5) * M_LN2);
        check_expf_of_double_at(nextafter((k + 0.5) * M_LN2, 0.0));
        check_expf_of_double_at(nextafter((k + 0.5) * M_LN2, -200.0));
    }
    for (int i = 0; i < points; i++) {
        check_expf_of_double_at(random_in(-30.0, 0.0));      /* softmax's range */
        check_expf_of_double_at(random_in(-110.0, 0.0));
        check_expf_of_double_at(random_in(-1e-6, 0.0));
        check_expf_of_double_at(random_in(-110.0, 90.0));
    }
    CHECK(g_expfd_worst <= 1.0, "expf of a double: %g ulps from exp rounded to f32 at %.17g",
          g_expfd_worst, g_expfd_worst_at);
    printf("expf of a double: at most %g ulp from exp rounded to f32\n", g_expfd_worst);

    double inf = (double)INFINITY;
    CHECK(kf_cpu_expf_of_double(-inf) == 0.0f && !signbit(kf_cpu_expf_of_double(-inf)),
          "expf of a double: exp(-inf) = +0");
    CHECK(kf_cpu_expf_of_double(inf) == INFINITY && kf_cpu_expf_of_double(89.0) == INFINITY,
          "expf of a double overflows to inf");
    CHECK(kf_cpu_expf_of_double(-104.0) == 0.0f, "expf of a double: exp(-104) = 0");
    CHECK(kf_cpu_expf_of_double(0.0) == 1.0f && kf_cpu_expf_of_double(-0.0) == 1.0f,
          "expf of a double: exp(+-0) = 1");
    CHECK(isnan(kf_cpu_expf_of_double((double)NAN)) && isnan(kf_cpu_expf_of_double(-inf - -inf)),
          "expf of a double: NaN stays NaN");
}

int main(int argc, char **argv)
{
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    int points = quick ? 20000 : 200000;
    test_expf(points);
    test_expf_of_double(points);
    test_gelu_erf(points);
    test_sin_cos(points);
    test_sin_cos_row(points);
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
