/* cli.c - argument parsing, usage text and dispatch of the kfuse tool.
 *   kfuse info   [--backend auto|cpu|gpu] [--device N] [--json]
 *   kfuse verify [--backend ..] [--op NAME] [--dtype f32|f16|bf16] [--quick] [--seed N] [--verbose]
 *                [--fuzz N]
 *   kfuse bench  [--backend ..] [--op NAME] [--dtype ..] [--shape SUBSTR] [--csv] [--json]
 *                [--plot FILE.svg] [--quick] [--min-ms N] [--samples N] [--verify-rows N]
 *                [--seed N] [--timing auto|stream|graph] [--inputs replicated|distinct]
 *   kfuse tune   [--backend ..] [--op NAME] [--dtype ..] [--shape SUBSTR] [--quick] [--min-ms N]
 *                [--samples N] [--verify-rows N] [--seed N]
 * Options take their value as the next argument or after '=' (--op=rms_norm).
 * A failed write of the output (stdout) fails the command (exit 1). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "cli.h"

/* Which options each command accepts (bit set). */
enum {
    OPT_BACKEND = 1 << 0,
    OPT_DEVICE = 1 << 1,
    OPT_JSON = 1 << 2,
    OPT_CSV = 1 << 3,
    OPT_OP = 1 << 4,
    OPT_DTYPE = 1 << 5,
    OPT_QUICK = 1 << 6,
    OPT_SEED = 1 << 7,
    OPT_VERBOSE = 1 << 8,
    OPT_SHAPE = 1 << 9,
    OPT_PLOT = 1 << 10,
    OPT_MIN_MS = 1 << 11,
    OPT_SAMPLES = 1 << 12,
    OPT_VERIFY_ROWS = 1 << 13,
    OPT_TIMING = 1 << 14,
    OPT_INPUTS = 1 << 15,
    OPT_FUZZ = 1 << 16
};

typedef struct opt_def {
    const char *name;
    int bit;
    int takes_value;
} opt_def;

static const opt_def opt_defs[] = {
    {"--backend", OPT_BACKEND, 1},   {"--device", OPT_DEVICE, 1},
    {"--json", OPT_JSON, 0},         {"--csv", OPT_CSV, 0},
    {"--op", OPT_OP, 1},             {"--dtype", OPT_DTYPE, 1},
    {"--quick", OPT_QUICK, 0},       {"--seed", OPT_SEED, 1},
    {"--verbose", OPT_VERBOSE, 0},   {"--shape", OPT_SHAPE, 1},
    {"--plot", OPT_PLOT, 1},         {"--min-ms", OPT_MIN_MS, 1},
    {"--samples", OPT_SAMPLES, 1},   {"--verify-rows", OPT_VERIFY_ROWS, 1},
    {"--timing", OPT_TIMING, 1},     {"--inputs", OPT_INPUTS, 1},
    {"--fuzz", OPT_FUZZ, 1},
};

static int allowed_options(kfc_command cmd)
{
    switch (cmd) {
    case KFC_CMD_INFO:
        return OPT_BACKEND | OPT_DEVICE | OPT_JSON;
    case KFC_CMD_VERIFY:
        return OPT_BACKEND | OPT_DEVICE | OPT_OP | OPT_DTYPE | OPT_QUICK | OPT_SEED |
               OPT_VERBOSE | OPT_FUZZ;
    case KFC_CMD_BENCH:
        return OPT_BACKEND | OPT_DEVICE | OPT_OP | OPT_DTYPE | OPT_SHAPE | OPT_CSV |
               OPT_JSON | OPT_PLOT | OPT_QUICK | OPT_MIN_MS | OPT_SAMPLES |
               OPT_VERIFY_ROWS | OPT_SEED | OPT_TIMING | OPT_INPUTS;
    case KFC_CMD_TUNE:
        return OPT_BACKEND | OPT_DEVICE | OPT_OP | OPT_DTYPE | OPT_SHAPE | OPT_QUICK |
               OPT_MIN_MS | OPT_SAMPLES | OPT_VERIFY_ROWS | OPT_SEED;
    default:
        return 0;
    }
}

static const char *command_name(kfc_command cmd)
{
    switch (cmd) {
    case KFC_CMD_INFO: return "info";
    case KFC_CMD_VERIFY: return "verify";
    case KFC_CMD_BENCH: return "bench";
    case KFC_CMD_TUNE: return "tune";
    default: return "";
    }
}

int kfc_parse_op(const char *name)
{
    int i;
    if (!name)
        return -1;
    for (i = 0; i < KF_OP_COUNT; i++) {
        const char *n = kf_op_name((kf_op)i);
        if (n && strcmp(n, name) == 0)
            return i;
    }
    return -1;
}

int kfc_parse_dtype(const char *name)
{
    if (!name)
        return -1;
    if (strcmp(name, "f32") == 0)
        return KF_F32;
    if (strcmp(name, "f16") == 0)
        return KF_F16;
    if (strcmp(name, "bf16") == 0)
        return KF_BF16;
    return -1;
}

int kfc_parse_backend(const char *name)
{
    if (!name)
        return -1;
    if (strcmp(name, "auto") == 0)
        return KF_BACKEND_AUTO;
    if (strcmp(name, "cpu") == 0)
        return KF_BACKEND_CPU;
    if (strcmp(name, "gpu") == 0)
        return KF_BACKEND_GPU;
    return -1;
}

static int usage_error(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (err && errlen > 0)
        vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return KFC_EXIT_USAGE;
}

/* Parse a whole non-negative integer; 0 on success. */
static int parse_ull(const char *s, unsigned long long *out)
{
    char *end = NULL;
    unsigned long long v;
    if (!s || *s < '0' || *s > '9')   /* digits only: no sign, no space */
        return -1;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0')
        return -1;
    *out = v;
    return 0;
}

/* Parse a non-negative decimal number (1, 0.4, .5, 1e2); 0 on success. As
 * parse_ull: no sign, no leading space; and no hex, inf or nan, which strtod
 * would take. */
static int parse_double(const char *s, double *out)
{
    char *end = NULL;
    double v;
    size_t k;
    if (!s || !((s[0] >= '0' && s[0] <= '9') || (s[0] == '.' && s[1] >= '0' && s[1] <= '9')))
        return -1;
    for (k = 0; s[k]; k++)
        if (!strchr("0123456789.eE+-", s[k]))
            return -1;
    errno = 0;
    v = strtod(s, &end);
    if (errno != 0 || *end != '\0' || !(v >= 0.0) || v > 1e7)
        return -1;
    *out = v;
    return 0;
}

static void list_ops(char *buf, size_t n)
{
    size_t used = 0;
    int i;
    buf[0] = '\0';
    for (i = 0; i < KF_OP_COUNT; i++) {
        const char *name = kf_op_name((kf_op)i);
        int w;
        if (!name)
            continue;
        w = snprintf(buf + used, n - used, "%s%s", used ? ", " : "", name);
        if (w < 0 || (size_t)w >= n - used)
            break;
        used += (size_t)w;
    }
}

int kfc_parse_args(int argc, char **argv, kfc_args *a, char *err, size_t errlen)
{
    int i, allowed;
    const char *cmd;

    memset(a, 0, sizeof(*a));
    a->backend = KF_BACKEND_AUTO;
    a->dtype = -1;
    a->min_ms = -1.0;
    a->verify_rows = -1;
    a->graph_timing = -1;
    a->distinct_inputs = 1;
    if (err && errlen)
        err[0] = '\0';

    if (argc < 2)
        return usage_error(err, errlen, "no command given (try: kfuse --help)");
    cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        a->cmd = KFC_CMD_HELP;
        if (argc >= 3) {
            /* `kfuse help bench` = `kfuse bench --help` */
            if (strcmp(argv[2], "info") == 0) a->cmd = KFC_CMD_INFO;
            else if (strcmp(argv[2], "verify") == 0) a->cmd = KFC_CMD_VERIFY;
            else if (strcmp(argv[2], "bench") == 0) a->cmd = KFC_CMD_BENCH;
            else if (strcmp(argv[2], "tune") == 0) a->cmd = KFC_CMD_TUNE;
            else
                return usage_error(err, errlen, "unknown command '%s' (commands: info, "
                                   "verify, bench, tune)", argv[2]);
            a->help = 1;
        }
        return KFC_EXIT_OK;
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0 || strcmp(cmd, "version") == 0) {
        a->cmd = KFC_CMD_VERSION;
        if (argc > 2)
            return usage_error(err, errlen, "%s: unexpected argument '%s'", cmd, argv[2]);
        return KFC_EXIT_OK;
    }
    if (strcmp(cmd, "info") == 0) a->cmd = KFC_CMD_INFO;
    else if (strcmp(cmd, "verify") == 0) a->cmd = KFC_CMD_VERIFY;
    else if (strcmp(cmd, "bench") == 0) a->cmd = KFC_CMD_BENCH;
    else if (strcmp(cmd, "tune") == 0) a->cmd = KFC_CMD_TUNE;
    else if (cmd[0] == '-')
        return usage_error(err, errlen, "unknown option '%s' before the command "
                           "(usage: kfuse <info|verify|bench|tune> [options])", cmd);
    else
        return usage_error(err, errlen, "unknown command '%s' (commands: info, verify, "
                           "bench, tune)", cmd);

    allowed = allowed_options(a->cmd);
    for (i = 2; i < argc; i++) {
        const char *arg = argv[i];
        const char *val = NULL;
        const char *eq;
        char name[64];
        size_t len;
        const opt_def *d = NULL;
        size_t k;

        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            a->help = 1;
            continue;
        }
        if (strcmp(arg, "-v") == 0)
            arg = "--verbose";
        if (strncmp(arg, "--", 2) != 0)
            return usage_error(err, errlen, "%s: unexpected argument '%s'",
                               command_name(a->cmd), arg);
        eq = strchr(arg, '=');
        len = eq ? (size_t)(eq - arg) : strlen(arg);
        if (len >= sizeof(name))
            len = sizeof(name) - 1;
        memcpy(name, arg, len);
        name[len] = '\0';
        for (k = 0; k < sizeof(opt_defs) / sizeof(opt_defs[0]); k++)
            if (strcmp(opt_defs[k].name, name) == 0)
                d = &opt_defs[k];
        if (!d || !(allowed & d->bit))
            return usage_error(err, errlen, "%s: unknown option '%s' (see: kfuse %s --help)",
                               command_name(a->cmd), strcmp(argv[i], "-v") == 0 ? "-v" : name,
                               command_name(a->cmd));
        if (d->takes_value) {
            if (eq) {
                val = eq + 1;
            } else {
                if (i + 1 >= argc)
                    return usage_error(err, errlen, "%s: option %s needs a value",
                                       command_name(a->cmd), name);
                val = argv[++i];
            }
            if (!*val)
                return usage_error(err, errlen, "%s: option %s needs a value",
                                   command_name(a->cmd), name);
        } else if (eq) {
            return usage_error(err, errlen, "%s: option %s takes no value",
                               command_name(a->cmd), name);
        }

        switch (d->bit) {
        case OPT_BACKEND: {
            int b = kfc_parse_backend(val);
            if (b < 0)
                return usage_error(err, errlen, "--backend: '%s' is not one of auto, cpu, gpu",
                                   val);
            a->backend = (kf_backend)b;
            break;
        }
        case OPT_DEVICE: {
            unsigned long long v;
            if (parse_ull(val, &v) != 0 || v > 1024)
                return usage_error(err, errlen, "--device: '%s' is not a device index", val);
            a->device = (int)v;
            break;
        }
        case OPT_FUZZ: {
            unsigned long long v;
            if (parse_ull(val, &v) != 0 || v < 1 || v > 100000000ull)
                return usage_error(err, errlen, "--fuzz: '%s' is not a case count (1..1e8)", val);
            a->fuzz = (long)v;
            break;
        }
        case OPT_JSON: a->json = 1; break;
        case OPT_CSV: a->csv = 1; break;
        case OPT_OP:
            if (kfc_parse_op(val) < 0) {
                char ops[512];
                list_ops(ops, sizeof(ops));
                return usage_error(err, errlen, "--op: unknown op '%s' (ops: %s)", val, ops);
            }
            a->op = val;
            break;
        case OPT_DTYPE: {
            int dt = kfc_parse_dtype(val);
            if (dt < 0)
                return usage_error(err, errlen, "--dtype: '%s' is not one of f32, f16, bf16",
                                   val);
            a->dtype = dt;
            break;
        }
        case OPT_QUICK: a->quick = 1; break;
        case OPT_SEED:
            if (parse_ull(val, &a->seed) != 0)
                return usage_error(err, errlen, "--seed: '%s' is not a non-negative integer",
                                   val);
            break;
        case OPT_VERBOSE: a->verbose = 1; break;
        case OPT_SHAPE: a->shape = val; break;
        case OPT_PLOT: a->plot = val; break;
        case OPT_MIN_MS:
            if (parse_double(val, &a->min_ms) != 0)
                return usage_error(err, errlen, "--min-ms: '%s' is not a number of "
                                   "milliseconds >= 0", val);
            break;
        case OPT_SAMPLES: {
            unsigned long long v;
            if (parse_ull(val, &v) != 0 || v < 1 || v > 100000)
                return usage_error(err, errlen, "--samples: '%s' is not a count in "
                                   "1..100000", val);
            a->min_samples = (int)v;
            break;
        }
        case OPT_VERIFY_ROWS: {
            unsigned long long v;
            if (parse_ull(val, &v) != 0 || v > (1ULL << 40))
                return usage_error(err, errlen, "--verify-rows: '%s' is not a row count "
                                   "(0 = no cap)", val);
            a->verify_rows = (long long)v;
            break;
        }
        case OPT_TIMING:
            if (strcmp(val, "auto") == 0)
                a->graph_timing = -1;
            else if (strcmp(val, "stream") == 0)
                a->graph_timing = 0;
            else if (strcmp(val, "graph") == 0)
                a->graph_timing = 1;
            else
                return usage_error(err, errlen, "--timing: '%s' is not auto, stream or graph", val);
            break;
        case OPT_INPUTS:
            if (strcmp(val, "replicated") == 0)
                a->distinct_inputs = 0;
            else if (strcmp(val, "distinct") == 0)
                a->distinct_inputs = 1;
            else
                return usage_error(err, errlen, "--inputs: '%s' is not replicated or distinct",
                                   val);
            break;
        default:
            break;
        }
    }
    if (a->csv && a->json)
        return usage_error(err, errlen, "bench: --csv and --json exclude each other");
    if (a->fuzz > 0 && a->quick)
        return usage_error(err, errlen, "verify: --quick and --fuzz exclude each other "
                           "(--fuzz N runs N cases)");
    return KFC_EXIT_OK;
}

void kfc_print_usage(FILE *f, kfc_command cmd)
{
    switch (cmd) {
    case KFC_CMD_INFO:
        fprintf(f,
            "usage: kfuse info [--backend auto|cpu|gpu] [--device N] [--json]\n"
            "  Prints the backend and the device facts as read from the device (name,\n"
            "  arch, SM/CU count, warp size, shared memory, L2, memory bus and clock,\n"
            "  theoretical bandwidth; on the CPU: threads and model), then measures the\n"
            "  device-to-device copy bandwidth (256 MiB and 1 GiB moved, read + write,\n"
            "  median of samples) and the empty-kernel launch time.\n");
        break;
    case KFC_CMD_VERIFY:
        fprintf(f,
            "usage: kfuse verify [--backend auto|cpu|gpu] [--device N] [--op NAME]\n"
            "                    [--dtype f32|f16|bf16] [--quick] [--seed N] [--verbose]\n"
            "                    [--fuzz N]\n"
            "  Runs the API tests and the case suite (every op x dtype x shape against\n"
            "  the float64 reference) on the backend. Exit 1 when a case fails.\n"
            "  --quick    a reduced case list\n"
            "  --seed N   replay a run (0 or absent: from the clock, printed)\n"
            "  --fuzz N   N random valid cases instead (any op, dtype, shape, strides and\n"
            "             options; --op / --dtype fix those); a failure prints the\n"
            "             --seed that replays the run (not with --quick)\n");
        break;
    case KFC_CMD_BENCH:
        fprintf(f,
            "usage: kfuse bench [--backend auto|cpu|gpu] [--device N] [--op NAME]\n"
            "                   [--dtype f32|f16|bf16] [--shape SUBSTR] [--csv | --json]\n"
            "                   [--plot FILE.svg] [--quick] [--min-ms N] [--samples N]\n"
            "                   [--verify-rows N] [--seed N]\n"
            "                   [--timing auto|stream|graph] [--inputs replicated|distinct]\n"
            "  Verifies, then times the benchmark shapes (transformer and LTX-Video layers,\n"
            "  bf16 unless --dtype): median and p20-p80 of device-event samples, GB/s from\n"
            "  counted bytes, the ratio to a same-size device copy timed the same way, and\n"
            "  the launch floor. Each case is verified first in the form it is timed (the\n"
            "  same tensors, layouts and settings, rows capped); a case that fails is not\n"
            "  timed (exit 1).\n"
            "  --seed N         the inputs' and the verification's random data (0 or\n"
            "                   absent: from the clock, printed)\n"
            "  --shape SUBSTR   only cases whose shape or variant contains SUBSTR\n"
            "  --plot FILE.svg  GB/s against bytes moved, with the same-size copy curve\n"
            "  --min-ms N       device time per case (GPU default 100; CPU default 20)\n"
            "  --samples N      samples per case at least (GPU default 10; CPU default 5)\n"
            "  --verify-rows N  rows checked against the reference per case (default 256;\n"
            "                   0 = all)\n"
            "  --quick          shorter timing (GPU 20 ms / 10 samples, CPU 5 ms / 3)\n"
            "  --timing graph   each sample replays a GPU graph of the batch's calls (op\n"
            "                   and copy alike: no per-call launch or copy-setup gaps)\n"
            "  --timing stream  the calls launched one by one (a copy call carries ~2 us\n"
            "                   of setup that a kernel launch does not)\n"
            "  --timing auto    graph on the GPU, stream on the CPU (default)\n"
            "  --inputs distinct    every input set filled with its own random data\n"
            "                   (default)\n"
            "  --inputs replicated  random data made once, copied into every input set\n"
            "                   (faster to fill)\n");
        break;
    case KFC_CMD_TUNE:
        fprintf(f,
            "usage: kfuse tune [--backend auto|cpu|gpu] [--device N] [--op NAME]\n"
            "                  [--dtype f32|f16|bf16] [--shape SUBSTR] [--quick] [--min-ms N]\n"
            "                  [--samples N] [--verify-rows N] [--seed N]\n"
            "  Times the benchmark shapes of the ops with GPU row kernels (norms, softmax,\n"
            "  rope, rms_norm_rope) by default and at each KFUSE_ROW_CHUNKS (1, 2, 4, 8) and\n"
            "  KFUSE_ROW_BLOCK (64, 128, 256, 512) setting, one at a time, verified and\n"
            "  timed as `kfuse bench` does, and prints the fastest per case. It changes\n"
            "  nothing: export the variable to run with a setting.\n"
            "  --seed N   the cases' random data, the same for every setting (0 or absent:\n"
            "             from the clock, printed in the table header)\n");
        break;
    default:
        fprintf(f,
            "kfuse %s - fused memory-bound kernels for transformer and diffusion models\n"
            "usage: kfuse <command> [options]\n"
            "commands:\n"
            "  info     backend, device facts, measured copy bandwidth and launch time\n"
            "  verify   check every op against the float64 reference\n"
            "  bench    verify, then time the benchmark shapes against a device copy\n"
            "  tune     time the row kernels' launch settings on this machine\n"
            "  kfuse <command> --help   options of a command\n"
            "  kfuse --version          the library version\n"
            "exit status: 0 ok, 1 failures, 2 usage errors\n",
            kf_version_string());
        break;
    }
}

double kfc_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

kf_ctx *kfc_open_context(const kfc_args *a)
{
    kf_ctx *ctx = NULL;
    kf_status st = kf_ctx_create(a->backend, a->device, &ctx);
    if (st != KF_OK || !ctx) {
        fprintf(stderr, "kfuse: cannot create a context on backend '%s' device %d: %s (%s)\n",
                a->backend == KF_BACKEND_CPU ? "cpu" :
                a->backend == KF_BACKEND_GPU ? "gpu" : "auto",
                a->device, kf_status_string(st), kf_last_error(NULL));
        return NULL;
    }
    return ctx;
}

/* Parse and run the command; the exit code. */
static int run_command(int argc, char **argv)
{
    kfc_args a;
    char err[768];
    int rc = kfc_parse_args(argc, argv, &a, err, sizeof(err));
    if (rc != KFC_EXIT_OK) {
        fprintf(stderr, "kfuse: %s\n", err);
        return rc;
    }
    if (a.cmd == KFC_CMD_HELP) {
        kfc_print_usage(stdout, KFC_CMD_NONE);
        return KFC_EXIT_OK;
    }
    if (a.cmd == KFC_CMD_VERSION) {
        printf("kfuse %s\n", kf_version_string());
        return KFC_EXIT_OK;
    }
    if (a.help) {
        kfc_print_usage(stdout, a.cmd);
        return KFC_EXIT_OK;
    }
    switch (a.cmd) {
    case KFC_CMD_INFO:
        return kfc_cmd_info(&a);
    case KFC_CMD_VERIFY:
        return kfc_cmd_verify(&a);
    case KFC_CMD_BENCH:
        return kfc_cmd_bench(&a);
    case KFC_CMD_TUNE:
        return kfc_cmd_tune(&a);
    default:
        kfc_print_usage(stderr, KFC_CMD_NONE);
        return KFC_EXIT_USAGE;
    }
}

int kfc_main(int argc, char **argv)
{
    int rc = run_command(argc, argv);
    /* Output that did not reach stdout (a full disk, a closed pipe) fails the
     * command: the report is what it is run for. ferror also catches a write
     * that failed earlier, when the buffer filled during the run. */
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "kfuse: error writing the output: %s\n",
                errno ? strerror(errno) : "write failed");
        if (rc == KFC_EXIT_OK)
            rc = KFC_EXIT_FAIL;
    }
    return rc;
}
