/* test_cpu_f16c.c - the AVX2 copy's hardware f16 conversions (src/cpu/cpu.h:
 * kf_cpu_f16_to_f32_n, kf_cpu_f32_to_f16_n and kf_cpu_round_row on f16, which
 * use vcvtph2ps / vcvtps2ph eight at a time when built with F16C) against
 * half.h's bit manipulation, which the baseline copy runs and every tail
 * takes: the two must agree bit for bit, or the copies of the kernels would
 * give different results. tests/test_cpu_f16c_avx512.c compiles this file
 * again for the AVX-512 copy (KF_F16C_CHECK_AVX512: sixteen at a time, then
 * eight, then the tail). Checked: every f16 value widened; f32 values
 * narrowed at every sign and exponent, each with mantissas whose low bits sit
 * at, next to and between the rounding points of every shift (normal f16
 * results, subnormal ones, overflow to Inf, underflow to zero), plus NaNs of
 * many payloads (quiet and signalling), infinities, zeros and random bits.
 * Built only where the library holds the copy (x86-64, GCC or Clang); the
 * checks run where the CPU has its instructions, and the test says so
 * otherwise. Last line: "N passed, N failed"; exit 1 on any failure. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "unit_check.h"

#ifndef KF_CPU_AVX2_COPY
#define KF_CPU_AVX2_COPY 0      /* CMakeLists.txt defines it when the build has the copy */
#endif
#ifndef KF_CPU_AVX512_COPY
#define KF_CPU_AVX512_COPY 0
#endif
/* COPY_BUILT: the build holds the copy checked here; COPY_NAME names it */
#ifdef KF_F16C_CHECK_AVX512
#define COPY_BUILT KF_CPU_AVX512_COPY
#define COPY_NAME "AVX-512"
#define COPY_RUNS_HERE()                                                                   \
    (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&            \
     __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&           \
     __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c"))
#else
#define COPY_BUILT KF_CPU_AVX2_COPY
#define COPY_NAME "AVX2"
#define COPY_RUNS_HERE() (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c"))
#endif
#if COPY_BUILT && defined(__clang__)
/* #pragma GCC target is GCC's: under Clang the hardware path is not compiled here */
#undef COPY_BUILT
#define COPY_BUILT 0
#define KF_CHECK_NEEDS_GCC 1
#endif

#if COPY_BUILT
static int run_checks(void);
#endif

int main(void)
{
#if COPY_BUILT
    __builtin_cpu_init();
    if (COPY_RUNS_HERE()) {
        int checked = run_checks();
        printf("ok   %d values converted both ways (the %s copy's conversions)\n", checked,
               COPY_NAME);
    } else {
        printf("this CPU cannot run the %s copy: its hardware conversions are not run here\n",
               COPY_NAME);
    }
#elif defined(KF_CHECK_NEEDS_GCC)
    printf("built by Clang: the comparison needs GCC's #pragma GCC target, not run\n");
#else
    printf("this build holds no %s copy of the CPU kernels: nothing to compare\n", COPY_NAME);
#endif
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}

#if COPY_BUILT
/* Everything below is compiled for the copy's instructions, as the library's
 * copy is, and runs only after main has found them on the CPU. */
#ifdef KF_F16C_CHECK_AVX512
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,f16c")
#if !defined(__AVX512F__)
#error "#pragma GCC target did not enable AVX-512: its 16-wide path would not be compiled"
#endif
#else
#pragma GCC target("avx2,f16c")
#endif
#if !defined(__F16C__) || !defined(__AVX__)
#error "#pragma GCC target did not enable F16C: the hardware path would not be compiled"
#endif
#include "cpu/cpu.h"

#define BATCH 1003              /* 62 x 16 + 8 + a tail of 3 */

static float g_f32[BATCH], g_got[BATCH];
static uint16_t g_f16[BATCH], g_got16[BATCH];
static int g_n, g_checked, g_reported;

static uint64_t g_rng = 0x9e3779b97f4a7c15u;
static uint32_t next_random(void)   /* splitmix64, top half */
{
    uint64_t z = (g_rng += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return (uint32_t)((z ^ (z >> 31)) >> 32);
}

static void report(const char *what, uint32_t input, uint32_t got, uint32_t want)
{
    CHECK(0, "%s of 0x%08x: hardware 0x%08x, bit manipulation 0x%08x", what, input, got, want);
    g_reported++;
}

/* Narrow the batch of f32 values both ways, and round them to f16 and back
 * both ways (kf_cpu_round_row); compare bit for bit. */
static void flush_f32(void)
{
    kf_cpu_f32_to_f16_n(g_got16, g_f32, g_n);
    memcpy(g_got, g_f32, sizeof(float) * (size_t)g_n);
    kf_cpu_round_row(g_got, g_n, KF_F16);
    for (int i = 0; i < g_n; i++) {
        uint16_t want = kf_half_f32_to_f16(g_f32[i]);
        uint32_t want_round = kf_bits_of_f32(kf_half_f16_to_f32(want));
        if (g_got16[i] != want && g_reported < 20)
            report("f32 -> f16", kf_bits_of_f32(g_f32[i]), g_got16[i], want);
        if (kf_bits_of_f32(g_got[i]) != want_round && g_reported < 20)
            report("f32 -> f16 -> f32", kf_bits_of_f32(g_f32[i]), kf_bits_of_f32(g_got[i]),
                   want_round);
    }
    g_checked += g_n;
    g_n = 0;
}

static void add_f32_bits(uint32_t bits)
{
    g_f32[g_n++] = kf_f32_of_bits(bits);
    if (g_n == BATCH)
        flush_f32();
}

static int run_checks(void)
{
    /* every f16 value widened, in batches with tails */
    int before = g_fail;
    for (uint32_t start = 0; start < 65536; start += BATCH) {
        int n = 65536 - start < BATCH ? (int)(65536 - start) : BATCH;
        for (int i = 0; i < n; i++)
            g_f16[i] = (uint16_t)(start + (uint32_t)i);
        kf_cpu_f16_to_f32_n(g_got, g_f16, n);
        for (int i = 0; i < n; i++) {
            uint32_t want = kf_bits_of_f32(kf_half_f16_to_f32(g_f16[i]));
            if (kf_bits_of_f32(g_got[i]) != want && g_reported < 20)
                report("f16 -> f32", g_f16[i], kf_bits_of_f32(g_got[i]), want);
        }
        g_checked += n;
    }
    CHECK(g_fail == before, "every f16 value widens as half.h widens it");

    /* f32 narrowed: at every sign and exponent, mantissas whose low k bits
     * are 2^k - 1, 2^k, 2^k + 1 and 2^(k-1) above a random high part (the
     * rounding point of a result with k dropped bits, and its neighbours) */
    before = g_fail;
    for (uint32_t sign = 0; sign < 2; sign++)
        for (uint32_t exponent = 0; exponent < 256; exponent++)
            for (int k = 0; k <= 23; k++)
                for (int r = 0; r < 16; r++) {
                    uint32_t high = (next_random() & 0x7fffffu) >> k << k;
                    uint32_t point = k == 0 ? 0 : 1u << (k - 1);
                    const uint32_t lows[5] = {point - 1, point, point + 1,
                                              k == 0 ? 0 : (1u << k) - 1, 0};
                    for (int j = 0; j < 5; j++) {
                        uint32_t mantissa = (high | (lows[j] & ((1u << k) - 1u))) & 0x7fffffu;
                        if (k == 23)
                            mantissa = lows[j] & 0x7fffffu;
                        add_f32_bits(sign << 31 | exponent << 23 | mantissa);
                    }
                }
    /* NaNs of many payloads, quiet and signalling; infinities; zeros */
    for (int i = 0; i < 4096; i++) {
        uint32_t payload = next_random() & 0x7fffffu;
        add_f32_bits(0x7f800000u | (payload ? payload : 1u) | (next_random() & 0x80000000u));
    }
    add_f32_bits(0x7f800000u);
    add_f32_bits(0xff800000u);
    add_f32_bits(0x00000000u);
    add_f32_bits(0x80000000u);
    /* random bits */
    for (int i = 0; i < 1 << 20; i++)
        add_f32_bits(next_random());
    flush_f32();
    CHECK(g_fail == before, "f32 values narrow (and round trip) as half.h narrows them");
    return g_checked;
}
#endif
