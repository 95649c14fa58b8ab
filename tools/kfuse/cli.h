/* cli.h - the kfuse command-line tool: parsed options, the subcommands
 * (info, verify, bench, tune) and the entry point that main.c calls.
 * Exit codes of every command: 0 ok, 1 failures (a case failed, the device
 * could not be used), 2 usage errors. */
#ifndef KFC_CLI_H
#define KFC_CLI_H

#include <stddef.h>
#include <stdio.h>
#include "kfuse.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KFC_EXIT_OK 0
#define KFC_EXIT_FAIL 1
#define KFC_EXIT_USAGE 2

typedef enum kfc_command {
    KFC_CMD_NONE = 0,           /* no subcommand given */
    KFC_CMD_INFO,
    KFC_CMD_VERIFY,
    KFC_CMD_BENCH,
    KFC_CMD_TUNE,
    KFC_CMD_HELP,               /* `kfuse --help` / `kfuse help` */
    KFC_CMD_VERSION             /* `kfuse --version` */
} kfc_command;

typedef struct kfc_args {
    kfc_command cmd;
    int help;                   /* `kfuse <cmd> --help` */
    kf_backend backend;         /* --backend auto|cpu|gpu */
    int device;                 /* --device N */
    int json;                   /* --json */
    int csv;                    /* --csv (bench) */
    const char *op;             /* --op NAME (kf_op_name), NULL = every op */
    int dtype;                  /* --dtype: a kf_dtype, -1 = default */
    int quick;                  /* --quick */
    unsigned long long seed;    /* --seed N, 0 = from the clock */
    int verbose;                /* --verbose */
    const char *shape;          /* --shape SUBSTR (bench) */
    const char *plot;           /* --plot FILE.svg (bench) */
    double min_ms;              /* --min-ms N (bench); < 0 = the backend's default */
    int min_samples;            /* --samples N (bench); 0 = the backend's default */
    long long verify_rows;      /* --verify-rows N (bench); < 0 = default */
    int graph_timing;           /* --timing (bench): graph 1, stream 0, auto (default) -1:
                                 * graph on the GPU, stream on the CPU */
    int distinct_inputs;        /* --inputs (bench): distinct 1 (default: every input set
                                 * its own random data), replicated 0 (set 0's data
                                 * copied into every set) */
    long fuzz;                  /* --fuzz N (verify): random cases instead of the suite; 0 none */
} kfc_args;

/* Parse argv (argv[0] is the program) into *a. Returns KFC_EXIT_OK, or
 * KFC_EXIT_USAGE with a one-line message in err (never printed here). */
int kfc_parse_args(int argc, char **argv, kfc_args *a, char *err, size_t errlen);

/* "rms_norm" -> KF_OP_RMS_NORM; -1 when unknown. */
int kfc_parse_op(const char *name);
/* "f32" / "f16" / "bf16" -> kf_dtype; -1 when unknown. */
int kfc_parse_dtype(const char *name);
/* "auto" / "cpu" / "gpu" -> kf_backend; -1 when unknown. */
int kfc_parse_backend(const char *name);

/* Usage text of the tool (cmd == KFC_CMD_NONE / HELP) or of one command. */
void kfc_print_usage(FILE *f, kfc_command cmd);

/* The whole tool: parse, dispatch, return the exit code. */
int kfc_main(int argc, char **argv);

/* The subcommands (args already parsed). */
int kfc_cmd_info(const kfc_args *a);
int kfc_cmd_verify(const kfc_args *a);
int kfc_cmd_bench(const kfc_args *a);
/* kfuse tune: bench.c, after kfc_cmd_bench */
int kfc_cmd_tune(const kfc_args *a);

/* Create a context for the parsed --backend / --device; prints the reason
 * on stderr and returns NULL on failure. */
kf_ctx *kfc_open_context(const kfc_args *a);

/* Wall clock in seconds (monotonic), for progress and budgets only: every
 * timed number goes through kf__timer_start / kf__timer_stop. */
double kfc_now_s(void);

#ifdef __cplusplus
}
#endif

#endif /* KFC_CLI_H */
