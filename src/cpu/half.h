/* half.h - inline f16 / bf16 <-> f32 conversions by bit manipulation (no
 * compiler half types): round to nearest even, NaN kept as a quiet NaN with
 * its sign, Inf kept, f16 subnormals and overflow to Inf exact. Inline so the
 * CPU backend's row loops can use them without a call per element;
 * src/core/convert.c exports them as kf_f16_to_f32() and friends. */
#ifndef KF_CPU_HALF_H
#define KF_CPU_HALF_H

#include <stdint.h>
#include <string.h>

static inline uint32_t kf_bits_of_f32(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float kf_f32_of_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* bf16 is the top half of an f32: widening is exact (a signalling NaN is quieted). */
static inline float kf_half_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    uint32_t is_nan = (u & 0x7fffffffu) > 0x7f800000u;
    return kf_f32_of_bits(is_nan ? (u | 0x00400000u) : u);
}

/* Round to nearest even on bit 16; a carry into the exponent rounds up to
 * the next binade or to Inf, which is what RNE asks for. NaN: keep the sign
 * and the top payload bits, force the quiet bit. */
static inline uint16_t kf_half_f32_to_bf16(float f)
{
    uint32_t u = kf_bits_of_f32(f);
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    uint32_t quiet_nan = (u >> 16) | 0x0040u;
    uint32_t is_nan = (u & 0x7fffffffu) > 0x7f800000u;
    return (uint16_t)(is_nan ? quiet_nan : rounded);
}

/* f16: 1 sign, 5 exponent (bias 15), 10 mantissa bits. */
static inline float kf_half_f16_to_f32(uint16_t h)
{
    uint32_t sign = ((uint32_t)h & 0x8000u) << 16;
    uint32_t mag = (uint32_t)h & 0x7fffu;
    uint32_t mant = mag & 0x3ffu;
    /* normal: rebias the exponent from 15 to 127 (112 = 127 - 15) */
    uint32_t normal_bits = (mag << 13) + (112u << 23);
    /* subnormal (and zero): mant * 2^-24, exact in f32 and never an f32 subnormal */
    uint32_t subnormal_bits = kf_bits_of_f32((float)mant * 0x1p-24f);
    uint32_t special_bits = 0x7f800000u | (mant << 13) | (mant != 0 ? 0x00400000u : 0u);
    uint32_t bits = mag < 0x0400u ? subnormal_bits : (mag >= 0x7c00u ? special_bits : normal_bits);
    return kf_f32_of_bits(bits | sign);
}

static inline uint16_t kf_half_f32_to_f16(float f)
{
    uint32_t u = kf_bits_of_f32(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t mag = u & 0x7fffffffu;
    if (mag > 0x7f800000u)                       /* NaN: quiet, top payload bits */
        return (uint16_t)(sign | 0x7e00u | ((mag >> 13) & 0x3ffu));
    if (mag >= 0x477ff000u)                      /* >= 65520 rounds to Inf; Inf stays Inf */
        return (uint16_t)(sign | 0x7c00u);
    if (mag >= 0x38800000u) {                    /* >= 2^-14: a normal f16 */
        uint32_t odd = (mag >> 13) & 1u;
        return (uint16_t)(sign | ((mag - (112u << 23) + 0x0fffu + odd) >> 13));
    }
    if (mag <= 0x33000000u)                      /* <= 2^-25 (a tie to the even zero) */
        return (uint16_t)sign;
    /* f16 subnormal: the result counts units of 2^-24. The f32 value is
     * m * 2^(e - 150) with m the 24-bit significand, so units = m >> (126 - e). */
    uint32_t exponent = mag >> 23;               /* 102..112 here */
    uint32_t significand = (mag & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - exponent;            /* 14..24 */
    uint32_t units = significand >> shift;
    uint32_t rest = significand & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rest > half || (rest == half && (units & 1u)))
        units += 1u;                             /* may become 0x400, the smallest normal: right */
    return (uint16_t)(sign | units);
}

#endif /* KF_CPU_HALF_H */
