/* test_half.c - the CPU backend's f16 / bf16 conversions (src/cpu/half.h,
 * which every CPU kernel's loads and stores use) against the float64
 * reference's own (tests/check_reference.c, written separately), bit for bit.
 * Widening: every 16-bit pattern. Narrowing: every f32 sign / exponent / top
 * mantissa half (2^16 high halves) with low halves at, next to and between
 * the rounding points of bf16 (bit 16) and normal f16 (bit 13), plus random
 * low halves, so ties to even, carries into the exponent, overflow to Inf
 * and f16 subnormals are all reached. NaN: both sides NaN (payloads are not
 * part of the contract). A store rounding that truncated, or rounded ties
 * away from zero, fails here on thousands of values; in the op suite it
 * showed in a handful of cases only.
 * Last line: "N passed, N failed"; exit 1 on any failure. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "cpu/half.h"
#include "unit_check.h"

static float f32_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* widened values agree: same bits, or both NaN */
static int same_f32(float a, float b)
{
    return (isnan(a) && isnan(b)) || bits_of(a) == bits_of(b);
}

/* narrowed values agree: same bits, or both NaN in the format (exponent all ones,
 * mantissa not zero; mant_mask selects the mantissa bits) */
static int same_16(uint16_t a, uint16_t b, uint16_t exp_mask, uint16_t mant_mask)
{
    int a_nan = (a & exp_mask) == exp_mask && (a & mant_mask) != 0;
    int b_nan = (b & exp_mask) == exp_mask && (b & mant_mask) != 0;
    return (a_nan && b_nan) || a == b;
}

int main(void)
{
    /* widening: every 16-bit pattern */
    int wide_bad_bf16 = 0, wide_bad_f16 = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        wide_bad_bf16 += !same_f32(kf_half_bf16_to_f32((uint16_t)h),
                                   kft_bf16_bits_to_f32((uint16_t)h));
        wide_bad_f16 += !same_f32(kf_half_f16_to_f32((uint16_t)h),
                                  kft_f16_bits_to_f32((uint16_t)h));
    }
    CHECK(wide_bad_bf16 == 0, "bf16 -> f32: %d of 65536 patterns differ", wide_bad_bf16);
    CHECK(wide_bad_f16 == 0, "f16 -> f32: %d of 65536 patterns differ", wide_bad_f16);

    /* narrowing: low halves at the rounding points of bf16 (bit 16: ties at
     * 0x8000) and of normal f16 (bit 13: ties at 0x1000 / 0x3000 ...) */
    static const uint16_t lows[] = {0x0000, 0x0001, 0x0fff, 0x1000, 0x1001, 0x1fff, 0x2000,
                                    0x2fff, 0x3000, 0x3001, 0x7fff, 0x8000, 0x8001, 0xefff,
                                    0xf000, 0xffff};
    const int n_lows = (int)(sizeof lows / sizeof lows[0]);
    uint64_t state = 0x9e3779b97f4a7c15ull;
    long checked = 0, bad_bf16 = 0, bad_f16 = 0;
    uint32_t first_bf16 = 0, first_f16 = 0;
    for (uint32_t hi = 0; hi < 65536; hi++) {
        for (int k = 0; k < n_lows + 4; k++) {
            uint16_t lo;
            if (k < n_lows) {
                lo = lows[k];
            } else {
                state = state * 6364136223846793005ull + 1442695040888963407ull;
                lo = (uint16_t)(state >> 48);
            }
            uint32_t u = hi << 16 | lo;
            float f = f32_of(u);
            checked++;
            if (!same_16(kf_half_f32_to_bf16(f), kft_f32_to_bf16_bits(f), 0x7f80, 0x007f)) {
                if (!bad_bf16++)
                    first_bf16 = u;
            }
            if (!same_16(kf_half_f32_to_f16(f), kft_f32_to_f16_bits(f), 0x7c00, 0x03ff)) {
                if (!bad_f16++)
                    first_f16 = u;
            }
        }
    }
    CHECK(bad_bf16 == 0, "f32 -> bf16: %ld of %ld values differ (first: f32 bits 0x%08x)",
          bad_bf16, checked, (unsigned)first_bf16);
    CHECK(bad_f16 == 0, "f32 -> f16: %ld of %ld values differ (first: f32 bits 0x%08x)",
          bad_f16, checked, (unsigned)first_f16);

    /* a few by hand, so a reference bug shared by both sides cannot hide */
    CHECK(kf_half_f32_to_bf16(1.00390625f) == 0x3f80, "bf16: tie 1 + 2^-8 to even (down)");
    CHECK(kf_half_f32_to_bf16(1.01171875f) == 0x3f82, "bf16: tie 1 + 3 * 2^-8 to even (up)");
    CHECK(kf_half_f32_to_bf16(f32_of(0x7f7fffffu)) == 0x7f80, "bf16: FLT_MAX rounds to Inf");
    CHECK(kf_half_f32_to_f16(65519.0f) == 0x7bff, "f16: 65519 rounds to 65504");
    CHECK(kf_half_f32_to_f16(65520.0f) == 0x7c00, "f16: 65520 rounds to Inf");
    CHECK(kf_half_f32_to_f16(0x1p-25f) == 0x0000, "f16: 2^-25 ties to the even zero");
    CHECK(kf_half_f32_to_f16(0x1.8p-25f) == 0x0001, "f16: 1.5 x 2^-25 rounds up to 2^-24");
    CHECK(kf_half_f32_to_f16(1.00048828125f) == 0x3c00, "f16: tie 1 + 2^-11 to even (down)");

    printf("%ld f32 values narrowed, 65536 patterns widened, per format\n", checked);
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
