/* test_cpu_f16c_avx512.c - test_cpu_f16c.c's checks on the AVX-512 copy's
 * hardware f16 conversions (sixteen at a time, then eight, then the tail)
 * against half.h's bit manipulation. */
#define KF_F16C_CHECK_AVX512 1
#include "test_cpu_f16c.c"
