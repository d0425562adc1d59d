/* pipeline.h - the run -> score -> compare steps shared by `run`, `score`,
 * `compare` and `measure` (and later `matrix`/`lab`). Each step prints its
 * own summary to stderr and returns a CLI exit code. */
#ifndef DRIFT_CLI_PIPELINE_H
#define DRIFT_CLI_PIPELINE_H

#include <signal.h>

#include "driftbench/compare.h"
#include "driftbench/eval.h"
#include "driftbench/report.h"
#include "driftbench/store.h"
#include "driftbench/target.h"

#define CLI_MAX_SUITES 32

typedef struct cli_run_args {
    const char *db;
    const char *label;
    const char *target;
    const char *suites[CLI_MAX_SUITES];
    int n_suites;
    const char *config;        /* "k=v,k=v" */
    drift_target_opts topts;
    drift_gen_params params;
    int replicates;
    long limit;                /* 0 = all prompts of each suite */
} cli_run_args;

void cli_run_args_default(cli_run_args *a);
/* Runs (or resumes) one labelled run into an open store. */
int cli_do_run(const char *cmd, drift_store *st, const cli_run_args *a);
/* Scores run `label` (NULL = all runs); prints what could not be computed. */
int cli_do_score(const char *cmd, drift_store *st, const char *label, const drift_score_opts *o);
/* Compares and renders; returns 0 pass / 1 over budget / 2 error. */
int cli_do_compare(const char *cmd, drift_store *st, const char *base, const char *targ,
                   const drift_compare_opts *o, drift_format fmt, const char *out_path);

/* Installs SIGINT/SIGTERM handlers: the first asks running loops (and the
 * targets' requests, through cli_cancel_requested) to stop; the second
 * exits at once with CLI_EXIT_ERROR. */
void cli_install_signal_handlers(void);
extern volatile sig_atomic_t cli_interrupted;
/* A drift_target_opts.cancel hook: nonzero once a signal asked to stop. */
int cli_cancel_requested(void *user);

/* getopt_long ids of the run options, shared by run and measure. */
enum {
    OPT_DB = 256, OPT_LABEL, OPT_TARGET, OPT_SUITE, OPT_CONFIG, OPT_CONC, OPT_TEMP, OPT_TOPP, OPT_TOPK, OPT_SEED,
    OPT_MAXTOK, OPT_LOGPROBS, OPT_REPS, OPT_LIMIT, OPT_TIMEOUT, OPT_CTIMEOUT, OPT_RETRIES, OPT_HELP
};

/* Parses a run option into a; returns 1 if handled, 0 if not a run option,
 * -1 on a bad value (after printing). */
int cli_parse_run_option(const char *cmd, int opt, const char *arg, cli_run_args *a);

#define RUN_LONG_OPTIONS                                                                                     \
    {"suite", required_argument, 0, OPT_SUITE}, {"config", required_argument, 0, OPT_CONFIG},                \
        {"concurrency", required_argument, 0, OPT_CONC}, {"temperature", required_argument, 0, OPT_TEMP},    \
        {"top-p", required_argument, 0, OPT_TOPP}, {"top-k", required_argument, 0, OPT_TOPK},                \
        {"seed", required_argument, 0, OPT_SEED}, {"max-tokens", required_argument, 0, OPT_MAXTOK},          \
        {"logprobs", required_argument, 0, OPT_LOGPROBS}, {"replicates", required_argument, 0, OPT_REPS},    \
        {"limit", required_argument, 0, OPT_LIMIT}, {"timeout", required_argument, 0, OPT_TIMEOUT},          \
        {"connect-timeout", required_argument, 0, OPT_CTIMEOUT}, {"retries", required_argument, 0, OPT_RETRIES}


#endif
