/* test_tools.c - unit tests of the kfuse CLI's pieces (tools/kfuse): the
 * statistics (median, p20, p80 of known arrays, even and odd counts, the
 * noise rule), the byte counting of every benchmark case (expected bytes
 * computed by hand from docs/bench.md's shapes), argument parsing and its
 * errors (unknown command, unknown --op, bad --dtype, missing value: exit 2
 * with a message), the timing loop on the CPU backend (graph timing on a
 * GPU where there is one: graph size, the stream restored, a failing call
 * in a capture), and the report writers.
 * Run: ./test_tools [--quick] (--quick is accepted and ignored).
 * Last line: "N passed, N failed"; exit 1 on any failure. */
#define _DEFAULT_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bench.h"
#include "bench_cases.h"
#include "cli.h"
#include "core/internal.h"
#include "report.h"
#include "stats.h"
#include "unit_check.h"

static int near(double a, double b)
{
    return fabs(a - b) <= 1e-9 * (1.0 + fabs(b));
}

/* ---- statistics ------------------------------------------------------------ */

static void test_stats(void)
{
    double odd[] = {5, 1, 4, 2, 3};           /* sorted 1..5 */
    double even[] = {40, 10, 30, 20};         /* sorted 10, 20, 30, 40 */
    double one[] = {7};
    double two[] = {3, 1};
    double dup[] = {2, 2, 2, 9, 2, 2};
    double tenth[10];
    kfs_summary s, a, b;
    int i;

    kfs_summarize(odd, 5, &s);
    CHECK(s.n == 5, "odd n");
    CHECK(near(s.median, 3.0), "median of 1..5 is 3, got %g", s.median);
    CHECK(near(s.p20, 1.8), "p20 of 1..5 is 1.8 (position 0.8), got %g", s.p20);
    CHECK(near(s.p80, 4.2), "p80 of 1..5 is 4.2 (position 3.2), got %g", s.p80);
    CHECK(near(s.min, 1.0) && near(s.max, 5.0) && near(s.mean, 3.0), "odd min/max/mean");
    CHECK(odd[0] == 1 && odd[4] == 5, "summarize sorts in place");

    kfs_summarize(even, 4, &s);
    CHECK(near(s.median, 25.0), "median of 10,20,30,40 is 25, got %g", s.median);
    CHECK(near(s.p20, 16.0), "p20 of 10..40 is 16 (position 0.6), got %g", s.p20);
    CHECK(near(s.p80, 34.0), "p80 of 10..40 is 34 (position 2.4), got %g", s.p80);

    kfs_summarize(one, 1, &s);
    CHECK(near(s.median, 7) && near(s.p20, 7) && near(s.p80, 7), "single sample");

    kfs_summarize(two, 2, &s);
    CHECK(near(s.median, 2.0), "median of 1,3 is 2, got %g", s.median);
    CHECK(near(s.p20, 1.4) && near(s.p80, 2.6), "p20/p80 of 1,3: %g %g", s.p20, s.p80);

    kfs_summarize(dup, 6, &s);
    CHECK(near(s.median, 2.0), "median robust to one outlier, got %g", s.median);
    CHECK(near(s.p80, 2.0), "p80 of 2,2,2,2,2,9 is 2 (position 4.0), got %g", s.p80);

    for (i = 0; i < 10; i++)
        tenth[i] = (double)(10 - i);          /* 10..1 */
    kfs_summarize(tenth, 10, &s);
    CHECK(near(s.median, 5.5), "median of 1..10 is 5.5, got %g", s.median);
    CHECK(near(s.p20, 2.8), "p20 of 1..10 is 2.8 (position 1.8), got %g", s.p20);
    CHECK(near(s.p80, 8.2), "p80 of 1..10 is 8.2 (position 7.2), got %g", s.p80);

    CHECK(near(kfs_quantile_sorted(NULL, 0, 0.5), 0.0), "empty quantile is 0");
    kfs_summarize(NULL, 0, &s);
    CHECK(s.n == 0 && s.median == 0.0, "empty summary");

    /* noise rule: medians closer than the larger p20-p80 width are noise */
    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    a.median = 100; a.p20 = 98; a.p80 = 103;   /* width 5 */
    b.median = 104; b.p20 = 103; b.p80 = 105;  /* width 2 */
    CHECK(!kfs_significant(&a, &b), "4 us apart with a 5 us spread is noise");
    b.median = 106; b.p20 = 105; b.p80 = 107;
    CHECK(kfs_significant(&a, &b), "6 us apart with a 5 us spread is a difference");
    CHECK(kfs_significant(&b, &a), "the rule is symmetric");
}

/* ---- byte counting ---------------------------------------------------------- */

typedef struct expected_bytes {
    kf_op op;
    int variant, form;
    int64_t batch, tokens, cols;
    int64_t bytes;                /* bf16 */
    const char *how;
} expected_bytes;

/* Hand-computed, bf16 (2 bytes), M = batch * tokens rows of D:
 *   rms_norm 4*M*D + 2*D; add_rms_norm 8*M*D + 2*D; layer_norm 4*M*D + 4*D;
 *   ada_norm 4*M*D + 2*(2*B*D); add_ada_norm 8*M*D + 2*(2*B*D);
 *   gated_residual 6*M*D + 2*B*D; rope LTX table 4*T*2048 + 2*4*T*2048 (12 bytes per
 *   element, as docs/bench.md);
 *   rope LTX positions 4*T*2048 + 12*T + 1024*4 + 1024*4;
 *   rope Llama table 4*T*(32+8)*128 + 2*4*T*128; rms_norm_rope 4*T*2048 + 2*2048 +
 *   12*T + 8192; glu 6*M*I; gelu / silu / softmax 4*M*D. */
static const expected_bytes g_expected[] = {
    {KF_OP_RMS_NORM, KF_RMS_LLAMA, 0, 1, 1, 4096, 24576, "16384 + 8192"},
    {KF_OP_RMS_NORM, KF_RMS_LLAMA, 0, 1, 64, 4096, 1056768, "1048576 + 8192"},
    {KF_OP_RMS_NORM, KF_RMS_LLAMA, 0, 1, 8192, 4096, 134225920, "134217728 + 8192"},
    {KF_OP_RMS_NORM, KF_RMS_LLAMA, 0, 1, 16128, 2048, 132124672, "132120576 + 4096"},
    {KF_OP_RMS_NORM, KF_RMS_LLAMA, 0, 1, 8192, 8192, 268451840, "268435456 + 16384"},
    {KF_OP_RMS_NORM, KF_RMS_LLAMA, 0, 1, 4096, 5120, 83896320, "83886080 + 10240"},
    {KF_OP_RMS_NORM, KF_RMS_LLAMA, 0, 1, 2048, 4096, 33562624, "33554432 + 8192"},
    {KF_OP_RMS_NORM, KF_RMS_LLAMA, 0, 1, 8192, 111, 3637470, "3637248 + 222"},
    {KF_OP_RMS_NORM, KF_RMS_LLAMA, 0, 1, 8192, 769, 25200130, "25198592 + 1538"},
    {KF_OP_RMS_NORM, KF_RMS_LLAMA, 0, 1, 8192, 3584, 117447680, "117440512 + 7168"},
    {KF_OP_RMS_NORM, KF_RMS_LLAMA, 0, 1, 8192, 5125, 167946250, "167936000 + 10250"},
    {KF_OP_ADD_RMS_NORM, KF_RMS_LLAMA, 0, 1, 64, 4096, 2105344, "2097152 + 8192"},
    {KF_OP_ADD_RMS_NORM, KF_RMS_LLAMA, 0, 1, 8192, 4096, 268443648, "268435456 + 8192"},
    {KF_OP_ADD_RMS_NORM, KF_RMS_LLAMA, 0, 1, 2048, 4096, 67117056, "67108864 + 8192"},
    {KF_OP_LAYER_NORM, 0, 0, 1, 8192, 4096, 134234112, "134217728 + 16384"},
    {KF_OP_ADA_NORM, KF_NORM_RMS, 0, 2, 1320, 2048, 21643264, "21626880 + 16384"},
    {KF_OP_ADA_NORM, KF_NORM_RMS, 0, 2, 8064, 2048, 132136960, "132120576 + 16384"},
    {KF_OP_ADD_ADA_NORM, KF_NORM_RMS, 0, 2, 8064, 2048, 264257536, "264241152 + 16384"},
    {KF_OP_GATED_RESIDUAL, 0, 0, 2, 8064, 2048, 198189056, "198180864 + 8192"},
    {KF_OP_ROPE, KF_ROPE_INTERLEAVED, 0, 2, 1320, 2048, 64880640, "24576 * 2640"},
    {KF_OP_ROPE, KF_ROPE_INTERLEAVED, 0, 2, 8064, 2048, 396361728, "24576 * 16128"},
    {KF_OP_ROPE, KF_ROPE_INTERLEAVED, 1, 2, 1320, 2048, 21666752, "8204 * 2640 + 8192"},
    {KF_OP_ROPE, KF_ROPE_INTERLEAVED, 1, 2, 8064, 2048, 132322304, "8204 * 16128 + 8192"},
    {KF_OP_ROPE, KF_ROPE_HALF, 0, 1, 4096, 128, 88080384, "21504 * 4096"},
    {KF_OP_ROPE, KF_ROPE_HALF, 0, 16, 1, 128, 344064, "21504 * 16"},
    {KF_OP_RMS_NORM_ROPE, KF_ROPE_INTERLEAVED, 1, 2, 8064, 2048, 132326400,
     "8204 * 16128 + 12288"},
    {KF_OP_GLU, KF_ACT_SILU, 0, 1, 64, 14336, 5505024, "6 * 917504"},
    {KF_OP_GLU, KF_ACT_SILU, 0, 1, 8192, 14336, 704643072, "6 * 117440512"},
    {KF_OP_GLU, KF_ACT_GELU_TANH, 0, 1, 64, 14336, 5505024, "6 * 917504"},
    {KF_OP_GLU, KF_ACT_GELU_TANH, 0, 1, 8192, 14336, 704643072, "6 * 117440512"},
    {KF_OP_GELU, 1, 0, 1, 16128, 8192, 528482304, "4 * 132120576"},
    {KF_OP_GELU, 0, 0, 1, 16128, 8192, 528482304, "4 * 132120576"},
    {KF_OP_SILU, 0, 0, 1, 16128, 8192, 528482304, "4 * 132120576"},
    {KF_OP_SOFTMAX, 0, 0, 1, 8192, 4096, 134217728, "4 * 33554432"},
    {KF_OP_SOFTMAX, 0, 0, 1, 32768, 1024, 134217728, "4 * 33554432"},
};

static void test_bytes(void)
{
    int ne = (int)(sizeof(g_expected) / sizeof(g_expected[0]));
    int i, j, ops_seen[KF_OP_COUNT];
    kft_bench_case c;

    memset(ops_seen, 0, sizeof(ops_seen));
    CHECK(kfb_case_count() == ne, "bench has %d cases, the expected table %d",
          kfb_case_count(), ne);
    for (i = 0; i < kfb_case_count(); i++) {
        const kft_bench_case *k = kfb_case_at(i);
        int found = 0;
        char shape[64];
        kfb_case_shape(k, shape, sizeof(shape));
        CHECK(k->dtype == KF_BF16, "case %d is bf16 by default", i);
        for (j = 0; j < ne; j++) {
            const expected_bytes *e = &g_expected[j];
            if (e->op == k->op && e->variant == k->variant && e->form == k->form &&
                e->batch == k->batch && e->tokens == k->tokens && e->cols == k->cols) {
                int64_t got = kfb_case_bytes(k);
                found = 1;
                CHECK(got == e->bytes, "%s %s: %lld bytes, expected %lld (%s)",
                      kf_op_name(k->op), shape, (long long)got, (long long)e->bytes, e->how);
            }
        }
        CHECK(found, "case %d (%s %s) has no expected byte count", i, kf_op_name(k->op),
              shape);
        if (k->op >= 0 && k->op < KF_OP_COUNT)
            ops_seen[k->op] = 1;
    }
    for (i = 0; i < KF_OP_COUNT; i++)
        CHECK(ops_seen[i], "op %s has a bench case", kf_op_name((kf_op)i));

    /* the same shapes in other dtypes: activations scale, f32 tables do not */
    c = *kfb_case_at(2);                      /* rms_norm 8192x4096 */
    c.dtype = KF_F32;
    CHECK(kfb_case_bytes(&c) == 2 * 134225920LL, "rms_norm 8192x4096 f32 doubles");
    c.dtype = KF_F16;
    CHECK(kfb_case_bytes(&c) == 134225920LL, "rms_norm 8192x4096 f16 equals bf16");
    memset(&c, 0, sizeof(c));
    c.op = KF_OP_ROPE; c.dtype = KF_F32; c.batch = 2; c.tokens = 8064; c.cols = 2048;
    c.heads = 1; c.variant = KF_ROPE_INTERLEAVED; c.form = 0;
    CHECK(kfb_case_bytes(&c) == 8LL * 16128 * 2048 + 8LL * 16128 * 2048,
          "rope LTX table f32: 8 bytes x + 8 bytes tables per element");
    /* per-token conditioning is a full read */
    memset(&c, 0, sizeof(c));
    c.op = KF_OP_ADA_NORM; c.dtype = KF_BF16; c.batch = 2; c.tokens = 8064; c.cols = 2048;
    c.variant = KF_NORM_RMS; c.form = 1;
    CHECK(kfb_case_bytes(&c) == 8LL * 16128 * 2048, "ada_norm per token: 4 full tensors");
    /* packed glu moves the same bytes as two tensors */
    memset(&c, 0, sizeof(c));
    c.op = KF_OP_GLU; c.dtype = KF_BF16; c.batch = 1; c.tokens = 64; c.cols = 14336;
    c.form = 1;
    CHECK(kfb_case_bytes(&c) == 5505024, "packed glu 64x14336");
    /* footprint: in-place buffers counted once */
    memset(&c, 0, sizeof(c));
    for (i = 0; i < kfb_case_count(); i++)
        if (kfb_case_at(i)->op == KF_OP_GATED_RESIDUAL) {
            c = *kfb_case_at(i);
            break;
        }
    CHECK(c.op == KF_OP_GATED_RESIDUAL, "bench has a gated_residual case");
    CHECK(kfb_case_footprint(&c) == 4LL * 16128 * 2048 + 8192,
          "gated_residual footprint h + a + gate");
    memset(&c, 0, sizeof(c));
    c.op = (kf_op)99;
    CHECK(kfb_case_bytes(&c) == 0, "unknown op counts 0 bytes");
}

/* how many input sets a case rotates among (L2 of 60 MB: cold target 120 MB) */
static void test_input_sets(void)
{
    const int64_t MB = 1000000, cold = 120 * MB, budget = 70000 * MB;
    CHECK(kfb_input_sets(cold, 1 * MB, 1 * MB, budget) == 120, "1 MB sets: 120 of them");
    CHECK(kfb_input_sets(cold, 50 * MB, 50 * MB, budget) == 3, "50 MB sets: 3 (rounded up)");
    CHECK(kfb_input_sets(cold, 134 * MB, 134 * MB, budget) == 2, "a set above the target: still 2");
    CHECK(kfb_input_sets(cold, 704 * MB, 704 * MB, budget) == 2, "a 704 MB set: 2");
    CHECK(kfb_input_sets(cold, 704 * MB, 704 * MB, 1000 * MB) == 1, "only one fits the budget: 1");
    CHECK(kfb_input_sets(cold, 1, 1, budget) == 65536, "tiny sets: capped at 65536");
    /* an in-place op (add_rms_norm 2048 x 4096 bf16): its buffers 50.3 MB, the copy
     * of its counted bytes 67.1 MB: the sets are counted by what the op touches */
    CHECK(kfb_input_sets(cold, 50331648, 67108864, budget) == 3,
          "in place: sets counted by the op's 50 MB, not the copy's 67 MB");
}

/* the same-size copy's byte count: bytes / 2 rounded up to 4 KiB (a memcpy of
 * a count that is not a multiple of 4 KiB is slower on the H200) */
static void test_copy_half(void)
{
    CHECK(kfb_copy_half(134225920) == 67112960, "rms_norm 8192x4096: already 4 KiB whole");
    CHECK(kfb_copy_half(132124672) == 66064384, "rms_norm 16128x2048: 66062336 rounded up");
    CHECK(kfb_copy_half(167946250) == 83976192, "rms_norm 8192x5125: an odd half rounded up");
    CHECK(kfb_copy_half(24576) == 12288, "1x4096: 12288 = 3 x 4096");
    CHECK(kfb_copy_half(2) == 4096, "a tiny case copies one 4 KiB block");
    CHECK(kfb_copy_half(0) == 0, "nothing moved, nothing copied");
}

/* ---- argument parsing --------------------------------------------------------- */

static int run_main(int argc, const char **argv)
{
    return kfc_main(argc, (char **)argv);
}

static int parse(int argc, const char **argv, kfc_args *a, char *err, size_t n)
{
    return kfc_parse_args(argc, (char **)argv, a, err, n);
}

static void test_cli(void)
{
    kfc_args a;
    char err[768];
    int rc;

    {
        const char *v[] = {"kfuse", "frobnicate"};
        rc = parse(2, v, &a, err, sizeof(err));
        CHECK(rc == 2 && strstr(err, "unknown command") && strstr(err, "frobnicate"),
              "unknown command: rc %d, '%s'", rc, err);
        CHECK(run_main(2, v) == 2, "kfuse frobnicate exits 2");
    }
    {
        const char *v[] = {"kfuse"};
        rc = parse(1, v, &a, err, sizeof(err));
        CHECK(rc == 2 && err[0], "no command: rc %d, '%s'", rc, err);
        CHECK(run_main(1, v) == 2, "kfuse alone exits 2");
    }
    {
        const char *v[] = {"kfuse", "bench", "--op", "rms_nrom"};
        rc = parse(4, v, &a, err, sizeof(err));
        CHECK(rc == 2 && strstr(err, "unknown op") && strstr(err, "rms_nrom") &&
                  strstr(err, "rms_norm"),
              "unknown op lists the ops: rc %d, '%s'", rc, err);
        CHECK(run_main(4, v) == 2, "bench --op rms_nrom exits 2");
    }
    {
        const char *v[] = {"kfuse", "verify", "--dtype", "f64"};
        rc = parse(4, v, &a, err, sizeof(err));
        CHECK(rc == 2 && strstr(err, "f64"), "bad dtype: rc %d, '%s'", rc, err);
        CHECK(run_main(4, v) == 2, "verify --dtype f64 exits 2");
    }
    {
        const char *v[] = {"kfuse", "bench", "--op"};
        rc = parse(3, v, &a, err, sizeof(err));
        CHECK(rc == 2 && strstr(err, "needs a value"), "missing value: rc %d, '%s'", rc, err);
        CHECK(run_main(3, v) == 2, "bench --op (no value) exits 2");
    }
    {
        const char *v[] = {"kfuse", "verify", "--seed"};
        rc = parse(3, v, &a, err, sizeof(err));
        CHECK(rc == 2 && strstr(err, "--seed"), "missing seed: '%s'", err);
    }
    {
        const char *v[] = {"kfuse", "verify", "--fuzz", "250", "--op", "rope"};
        rc = parse(6, v, &a, err, sizeof(err));
        CHECK(rc == 0 && a.fuzz == 250 && a.op && !strcmp(a.op, "rope"), "verify --fuzz 250: rc %d",
              rc);
        const char *z[] = {"kfuse", "verify", "--fuzz", "0"};
        rc = parse(4, z, &a, err, sizeof(err));
        CHECK(rc == 2 && strstr(err, "--fuzz"), "verify --fuzz 0: rc %d, '%s'", rc, err);
        const char *b[] = {"kfuse", "bench", "--fuzz", "5"};
        rc = parse(4, b, &a, err, sizeof(err));
        CHECK(rc == 2 && strstr(err, "unknown option"), "bench --fuzz: rc %d, '%s'", rc, err);
        const char *q[] = {"kfuse", "verify", "--fuzz", "5", "--quick"};
        rc = parse(5, q, &a, err, sizeof(err));
        CHECK(rc == 2 && strstr(err, "--quick and --fuzz"), "verify --fuzz --quick: rc %d, '%s'", rc,
              err);
    }
    {
        const char *v[] = {"kfuse", "info", "--csv"};
        rc = parse(3, v, &a, err, sizeof(err));
        CHECK(rc == 2 && strstr(err, "unknown option"), "info --csv: rc %d, '%s'", rc, err);
    }
    {
        const char *v[] = {"kfuse", "bench", "--min-ms", "fast"};
        rc = parse(4, v, &a, err, sizeof(err));
        CHECK(rc == 2 && strstr(err, "fast"), "bad --min-ms: '%s'", err);
    }
    {
        const char *v[] = {"kfuse", "bench", "--backend", "tpu"};
        rc = parse(4, v, &a, err, sizeof(err));
        CHECK(rc == 2 && strstr(err, "tpu"), "bad backend: '%s'", err);
    }
    {
        const char *v[] = {"kfuse", "bench", "--quick=1"};
        rc = parse(3, v, &a, err, sizeof(err));
        CHECK(rc == 2 && strstr(err, "takes no value"), "flag with value: '%s'", err);
    }
    {
        const char *v[] = {"kfuse", "bench", "stray"};
        rc = parse(3, v, &a, err, sizeof(err));
        CHECK(rc == 2 && strstr(err, "stray"), "stray argument: '%s'", err);
    }
    {
        const char *v[] = {"kfuse", "bench", "--csv", "--json"};
        rc = parse(4, v, &a, err, sizeof(err));
        CHECK(rc == 2, "--csv with --json is a usage error");
    }
    {
        /* a filter that matches nothing: usage error before any context */
        const char *v[] = {"kfuse", "bench", "--op", "softmax", "--shape", "no-such-shape"};
        CHECK(run_main(6, v) == 2, "bench with no matching case exits 2");
    }
    {
        /* tune takes only the ops with row kernels: glu has none */
        const char *v[] = {"kfuse", "tune", "--op", "glu", "--backend", "cpu"};
        CHECK(run_main(6, v) == 2, "tune of an op without row kernels exits 2");
    }
    {
        /* the whole sweep on the CPU backend, one small case: 9 settings, each
         * verified and timed; the variables are put back afterwards (one set,
         * one unset) */
        const char *v[] = {"kfuse", "tune", "--op", "rms_norm", "--shape", "64x4096",
                           "--backend", "cpu", "--quick", "--min-ms", "1", "--samples", "2"};
        setenv("KFUSE_ROW_CHUNKS", "2", 1);
        unsetenv("KFUSE_ROW_BLOCK");
        CHECK(run_main(13, v) == 0, "tune on the CPU runs the sweep: exit 0");
        const char *after = getenv("KFUSE_ROW_CHUNKS");
        CHECK(after && strcmp(after, "2") == 0, "tune restores KFUSE_ROW_CHUNKS");
        CHECK(getenv("KFUSE_ROW_BLOCK") == NULL, "tune leaves KFUSE_ROW_BLOCK unset");
        unsetenv("KFUSE_ROW_CHUNKS");
        setenv("KFUSE_ROW_BLOCK", "128", 1);
        CHECK(run_main(13, v) == 0, "tune with KFUSE_ROW_BLOCK set: exit 0");
        after = getenv("KFUSE_ROW_BLOCK");
        CHECK(after && strcmp(after, "128") == 0, "tune restores KFUSE_ROW_BLOCK");
        CHECK(getenv("KFUSE_ROW_CHUNKS") == NULL, "tune leaves KFUSE_ROW_CHUNKS unset");
        unsetenv("KFUSE_ROW_BLOCK");
    }
    {
        const char *v[] = {"kfuse", "bench", "--op", "rms_norm", "--dtype", "f16", "--shape=4096",
                           "--csv", "--min-ms=5", "--samples", "7", "--quick", "--backend",
                           "cpu", "--plot", "out.svg", "--verify-rows", "0", "--seed", "42",
                           "--inputs", "replicated"};
        rc = parse(22, v, &a, err, sizeof(err));
        CHECK(rc == 0, "full bench line parses: '%s'", err);
        CHECK(a.cmd == KFC_CMD_BENCH && a.op && strcmp(a.op, "rms_norm") == 0 &&
                  a.dtype == KF_F16 && a.shape && strcmp(a.shape, "4096") == 0 && a.csv &&
                  !a.json && near(a.min_ms, 5.0) && a.min_samples == 7 && a.quick &&
                  a.backend == KF_BACKEND_CPU && a.plot && strcmp(a.plot, "out.svg") == 0 &&
                  a.verify_rows == 0 && a.seed == 42 && a.distinct_inputs == 0,
              "bench options land in their fields");
    }
    {
        const char *v[] = {"kfuse", "info"};
        rc = parse(2, v, &a, err, sizeof(err));
        CHECK(rc == 0 && a.cmd == KFC_CMD_INFO && a.backend == KF_BACKEND_AUTO &&
                  a.dtype == -1 && a.min_ms < 0 && a.verify_rows < 0 && a.op == NULL &&
                  a.distinct_inputs == 1,
              "defaults");
    }
    {
        const char *v[] = {"kfuse", "verify", "--help"};
        rc = parse(3, v, &a, err, sizeof(err));
        CHECK(rc == 0 && a.cmd == KFC_CMD_VERIFY && a.help, "verify --help");
    }
    {
        const char *v[] = {"kfuse", "--version"};
        rc = parse(2, v, &a, err, sizeof(err));
        CHECK(rc == 0 && a.cmd == KFC_CMD_VERSION, "--version");
        const char *j[] = {"kfuse", "--version", "junk"};
        rc = parse(3, j, &a, err, sizeof(err));
        CHECK(rc == 2 && strstr(err, "junk"), "--version junk: rc %d, '%s'", rc, err);
    }
    CHECK(kfc_parse_op("softmax") == KF_OP_SOFTMAX, "parse op softmax");
    CHECK(kfc_parse_op("") == -1 && kfc_parse_op(NULL) == -1, "parse op empty");
    CHECK(kfc_parse_dtype("bf16") == KF_BF16 && kfc_parse_dtype("BF16") == -1, "parse dtype");
    CHECK(kfc_parse_backend("gpu") == KF_BACKEND_GPU && kfc_parse_backend("") == -1,
          "parse backend");
}

/* ---- the timing loop on the CPU backend ------------------------------------- */

typedef struct count_work {
    int64_t calls;
} count_work;

static kf_status count_call(kf_ctx *ctx, void *user, int64_t iter)
{
    (void)ctx;
    (void)iter;
    ((count_work *)user)->calls++;
    return KF_OK;
}

/* a call that keeps the host busy for `us` microseconds (the CPU backend's
 * timer is the host clock) */
typedef struct spin_work {
    double us;
} spin_work;

static kf_status spin_call(kf_ctx *ctx, void *user, int64_t iter)
{
    const double until = kfc_now_s() + ((const spin_work *)user)->us * 1e-6;
    (void)ctx;
    (void)iter;
    while (kfc_now_s() < until) {
    }
    return KF_OK;
}

static void test_timing(void)
{
    kf_ctx *ctx = NULL;
    kf_status st = kf_ctx_create(KF_BACKEND_CPU, 0, &ctx);
    kfb_timing_cfg cfg;
    kfb_timing t;
    count_work w = {0};

    CHECK(st == KF_OK && ctx, "CPU context: %s", kf_status_string(st));
    if (!ctx)
        return;
    kfb_timing_defaults(ctx, 1, &cfg);
    cfg.min_ms = 1.0;
    cfg.min_samples = 4;
    cfg.warm_ms = 1.0;
    st = kfb_time(ctx, count_call, &w, &cfg, &t);
    CHECK(st == KF_OK, "kfb_time: %s", kf_status_string(st));
    CHECK(t.us.n >= 4, "at least min_samples samples (%d)", t.us.n);
    CHECK(t.batch > 1, "a call of nothing is timed in batches (batch %d)", t.batch);
    CHECK(w.calls >= 2 + (int64_t)t.us.n * t.batch, "every sample ran its batch");
    CHECK(t.us.p20 <= t.us.median && t.us.median <= t.us.p80, "p20 <= median <= p80");

    /* calls of 20 us - 1 ms are batched too (timed alone, a GPU call of
     * that length carries the launch gap of an idle stream); longer ones
     * are not. The batch follows the call's measured time, which a busy
     * machine stretches: a 50 us spin must still come out under 1 ms. */
    {
        spin_work mid = {50.0}, longer = {2000.0};
        kfb_timing_defaults(ctx, 1, &cfg);
        cfg.min_ms = 5.0;
        cfg.min_samples = 2;
        cfg.warm_ms = 2.0;
        st = kfb_time(ctx, spin_call, &mid, &cfg, &t);
        CHECK(st == KF_OK && t.batch >= 2, "a 50 us call is timed in batches (batch %d)",
              t.batch);
        CHECK(t.us.median >= 50.0, "a 50 us call takes >= 50 us (%.1f)", t.us.median);
        st = kfb_time(ctx, spin_call, &longer, &cfg, &t);
        CHECK(st == KF_OK && t.batch == 1, "a 2 ms call is timed alone (batch %d)", t.batch);
    }

    cfg.force_batch = 1;
    st = kfb_time(ctx, kfb_empty_call, NULL, &cfg, &t);
    CHECK(st == KF_OK && t.batch == 1, "forced batch of 1");

    /* graph timing: the CPU backend has no graphs */
    cfg.graph = 1;
    st = kfb_time(ctx, kfb_empty_call, NULL, &cfg, &t);
    CHECK(st == KF_ERR_UNSUPPORTED && strstr(kf_last_error(ctx), "needs the GPU backend"),
          "graph timing on the CPU: %s (%s)", kf_status_string(st), kf_last_error(ctx));
    CHECK(kf__graph_begin(ctx) == KF_ERR_UNSUPPORTED && kf__graph_end(ctx) ==
          KF_ERR_UNSUPPORTED && kf__graph_launch(ctx) == KF_ERR_UNSUPPORTED,
          "CPU graph entries are unsupported");
    kf__graph_free(ctx); /* a no-op there */
    kf_ctx_free(ctx);
}

/* a call that launches the empty kernel and then fails on the call numbered
 * fail_at (a case whose launch errors in the middle of a graph capture) */
typedef struct failing_work {
    int64_t fail_at;
} failing_work;

static kf_status failing_call(kf_ctx *ctx, void *user, int64_t iter)
{
    kf_status st = kf__empty_kernel(ctx);
    if (st == KF_OK && iter == ((const failing_work *)user)->fail_at)
        st = kf_set_error(ctx, KF_ERR_INVALID_ARG, "failing_call: call %lld fails",
                          (long long)iter);
    return st;
}

/* Graph timing on the GPU, where there is one: a graph of at least
 * graph_min_calls calls, the context's stream back afterwards, and a call
 * failing during the capture leaves no capture open. */
static void test_graph_timing(void)
{
    kf_ctx *ctx = NULL;
    kfb_timing_cfg cfg;
    kfb_timing t;
    failing_work never = {-1};
    kf_status st;
    void *stream0;

    if (kf_ctx_create(KF_BACKEND_GPU, 0, &ctx) != KF_OK || !ctx) {
        printf("graph timing: no GPU, skipped\n");
        return;
    }
    kfb_timing_defaults(ctx, 1, &cfg);
    cfg.min_ms = 1.0;
    cfg.min_samples = 3;
    cfg.warm_ms = 1.0;
    cfg.graph = 1;
    cfg.force_batch = 2;
    cfg.graph_min_calls = 7;
    stream0 = ctx->stream;
    st = kfb_time(ctx, failing_call, &never, &cfg, &t);
    CHECK(st == KF_OK, "graph timing: %s (%s)", kf_status_string(st), kf_last_error(ctx));
    CHECK(t.batch == 7, "a graph holds graph_min_calls calls (batch %d)", t.batch);
    CHECK(ctx->stream == stream0, "the context's stream is its own again");
    cfg.force_batch = 9;
    st = kfb_time(ctx, failing_call, &never, &cfg, &t);
    CHECK(st == KF_OK && t.batch == 14, "a graph holds whole rotations (batch %d)", t.batch);
    CHECK(t.us.n >= 3 && t.us.median > 0.0, "graph samples taken (%d)", t.us.n);
    CHECK(kf__empty_kernel(ctx) == KF_OK && kf_synchronize(ctx) == KF_OK,
          "the context's stream works after graph timing");
    {
        /* warm-up runs 2+ ordinary calls (iters 0, 1, ...); the capture starts
         * after them, so a call far enough on fails inside it */
        failing_work later = {0};
        cfg.warm_ms = 0.0;
        cfg.force_batch = 50;
        cfg.graph_min_calls = 0;
        later.fail_at = 40; /* warm-up: 2 calls; capture: iters 2..51 */
        st = kfb_time(ctx, failing_call, &later, &cfg, &t);
        CHECK(st == KF_ERR_INVALID_ARG, "a failing call inside the capture is reported (%s)",
              kf_status_string(st));
        CHECK(ctx->stream == stream0, "the stream is restored after a failed capture");
        CHECK(kf__graph_begin(ctx) == KF_OK && kf__empty_kernel(ctx) == KF_OK &&
              kf__graph_end(ctx) == KF_OK && kf__graph_launch(ctx) == KF_OK,
              "no capture left open: a new graph captures and replays (%s)", kf_last_error(ctx));
        kf__graph_free(ctx);
        CHECK(kf_synchronize(ctx) == KF_OK, "synchronize after the graphs");
    }
    kf_ctx_free(ctx);
}

/* ---- report writers ------------------------------------------------------------- */

static void test_report(void)
{
    kfb_result r[2];
    kfb_run run;
    FILE *f;
    char path[] = "/tmp/kfuse_test_tools_XXXXXX.svg";
    char line[4096];
    long size;
    int fd;

    memset(r, 0, sizeof(r));
    memset(&run, 0, sizeof(run));
    run.backend = "cpu";
    run.describe = "cpu: test <&> \"quotes\"";
    run.version = "0.0.0";
    run.timing_label = "test";
    r[0].c = *kfb_case_at(2);
    snprintf(r[0].op, sizeof(r[0].op), "rms_norm");
    snprintf(r[0].shape, sizeof(r[0].shape), "8192x4096");
    snprintf(r[0].variant, sizeof(r[0].variant), "llama");
    r[0].bytes = 134225920;
    r[0].status = KFB_TIMED;
    r[0].t.median = 40.0; r[0].t.p20 = 39.0; r[0].t.p80 = 41.0; r[0].t.n = 10;
    r[0].copy.median = 37.0; r[0].copy.p20 = 34.0; r[0].copy.p80 = 41.4;   /* 20 % spread */
    r[0].batch = 1;
    run.host_load = -1.0;
    r[1] = r[0];
    r[1].status = KFB_FAILED;
    snprintf(r[1].note, sizeof(r[1].note), "FAILED verification, \"rel\" err");

    CHECK(near(kfb_gbs(134225920, 40.0), 3355.648), "GB/s = bytes / median");
    CHECK(kfb_gbs(1000, 0.0) == 0.0, "GB/s of a zero time is 0");

    fd = mkstemps(path, 4);
    CHECK(fd >= 0, "temp file");
    if (fd < 0)
        return;
    fclose(fdopen(fd, "w"));
    CHECK(kfr_write_svg(path, &run, r, 2) == 0, "svg written");
    f = fopen(path, "r");
    CHECK(f != NULL, "svg readable");
    if (f) {
        size_t got = fread(line, 1, sizeof(line) - 1, f);
        line[got] = '\0';
        fseek(f, 0, SEEK_END);
        size = ftell(f);
        fclose(f);
        CHECK(strncmp(line, "<?xml", 5) == 0, "svg starts with <?xml");
        CHECK(strstr(line, "&lt;&amp;&gt;") != NULL, "svg escapes text");
        CHECK(size > 500, "svg has content (%ld bytes)", size);
    }
    f = fopen(path, "w+");
    if (f) {
        size_t got;
        kfr_print_json(f, &run, r, 2);
        rewind(f);
        got = fread(line, 1, sizeof(line) - 1, f);
        line[got] = '\0';
        fclose(f);
        CHECK(strstr(line, "\"status\": \"failed\"") != NULL, "json marks the failed case");
        CHECK(strstr(line, "\\\"rel\\\"") != NULL, "json escapes quotes");
        CHECK(strstr(line, "\"gbs\": 3355.65") != NULL, "json gbs");
        CHECK(strstr(line, "noisy (p20-p80 20 % of the copy's median)") != NULL,
              "a wide copy spread marks the case noisy");
        CHECK(strstr(line, "\"host_load\": null") != NULL, "an unknown host load is null");
    }
    remove(path);
}

int main(int argc, char **argv)
{
    int i;
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") != 0) {
            fprintf(stderr, "test_tools: unknown argument '%s' (only --quick, ignored)\n",
                    argv[i]);
            return 2;
        }
    }
    test_stats();
    test_bytes();
    test_input_sets();
    test_copy_half();
    test_cli();
    test_timing();
    test_graph_timing();
    test_report();
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
