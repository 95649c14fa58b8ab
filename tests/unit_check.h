/* unit_check.h - the pass / fail counting of the unit tests (test_tools.c,
 * test_cpu_math.c): CHECK(cond, printf-style message) counts a pass, or
 * counts a failure and prints FAIL with the place and the message; a test's
 * main prints "N passed, N failed" and exits 1 on any failure. Each test is
 * its own program, so the counters are static here. */
#ifndef KF_UNIT_CHECK_H
#define KF_UNIT_CHECK_H

#include <stdio.h>

static int g_pass = 0, g_fail = 0;

#define CHECK(cond, ...)                                   \
    do {                                                   \
        if (cond) {                                        \
            g_pass++;                                      \
        } else {                                           \
            g_fail++;                                      \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);    \
            printf(__VA_ARGS__);                           \
            printf("\n");                                  \
        }                                                  \
    } while (0)

#endif /* KF_UNIT_CHECK_H */
