/* pipeline.h - the CLI side of the stages (the library's run and matrix
 * stages, drift_score_run, drift_compare_runs): their flags, parsed once for
 * every command that takes them, and their printing: progress lines and
 * summaries on stderr, errors, exit codes. The work is the library's
 * (include/driftbench/pipeline.h). */
#ifndef DRIFT_CLI_PIPELINE_H
#define DRIFT_CLI_PIPELINE_H

#include <signal.h>

#include "driftbench/compare.h"
#include "driftbench/eval.h"
#include "driftbench/pipeline.h"
#include "driftbench/report.h"
#include "driftbench/store.h"
#include "driftbench/target.h"
#include "failures.h"

#define CLI_MAX_SUITES 32
#define CLI_MAX_HEADERS 32
#define CLI_MAX_STOPS 16

/* ---- run ---- */

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
    drift_run_order order;     /* --order (cmd_run.c, cmd_measure.c); default suite */
    uint64_t order_seed;       /* --order-seed */
    const char *risk_from;     /* --risk-from */
    /* measure --sequential: drift_run_opts' select hook and alpha (NULL: all) */
    int (*select)(void *select_user, drift_workload wl, size_t rank, size_t n_wl);
    void *select_user;
    double seq_alpha;
    const double *seq_budget;  /* (DRIFT_WL_COUNT,) the gate's budgets, recorded */
    /* request control (cli/request.c): into topts.request and params.stop
     * by cli_request_finish */
    const char *headers[CLI_MAX_HEADERS];
    int n_headers;
    const char *stops[CLI_MAX_STOPS];
    int n_stops;
    int system_given;          /* --system or --system-file seen */
    char *owned[4];            /* texts read from files (--system-file, --extra-body @F) */
    int n_owned;
} cli_run_args;

void cli_run_args_default(cli_run_args *a);
/* Frees what a holds of its own (texts read from files). */
void cli_run_args_clear(cli_run_args *a);
/* Runs (or resumes) one labelled run into an open store (drift_run_execute
 * with the signal cancel hook), printing as cli_run_progress and
 * cli_run_failed do. Returns a CLI exit code. */
int cli_do_run(const char *cmd, drift_store *st, const cli_run_args *a);
/* The run stage's printer (a drift_progress_cb; user unused): the
 * "starting|resuming run" line, the progress (progress.h: a bar with
 * rates and time left on a terminal, periodic lines otherwise; with -v a
 * line per request), the "answers, errors stored" line and after it one
 * line per kind of failed request (cli_print_failures); nothing with
 * --quiet. */
void cli_run_progress(void *user, const drift_progress *p);
/* Prints why the run stage (of label, against target) failed: an
 * interruption, every request failed (with the kind that failed most, its
 * first message and what to check: cli_failure_hint), or the library's
 * error. Returns CLI_EXIT_ERROR. */
int cli_run_failed(const char *cmd, const char *label, const char *target, const drift_run_summary *s,
                   const drift_error *err);

/* ---- score ---- */

/* Scores run `label` (NULL = all runs); prints what could not be computed. */
int cli_do_score(const char *cmd, drift_store *st, const char *label, const drift_score_opts *o);
/* The score summary: one stderr line per workload with anything to say
 * (nothing with --quiet); `not_computable` is how the count of answers no
 * evaluator could judge is introduced ("not computable", "NOT COMPUTABLE"). */
void cli_print_score_summary(const drift_score_summary *s, const char *not_computable);

/* ---- compare ---- */

/* Compare's flags, for `compare` and `measure`. */
typedef struct cli_compare_args {
    drift_compare_opts opts;
    drift_format fmt;          /* default text */
    const char *out;           /* -o FILE; NULL = stdout */
} cli_compare_args;

void cli_compare_args_default(cli_compare_args *c);
/* Parses a compare option into c; returns 1 if handled, 0 if not a compare
 * option, -1 on a bad value (after printing). */
int cli_parse_compare_option(const char *cmd, int opt, const char *arg, cli_compare_args *c);
/* Renders c (--format; the flips' details read from st), writes it (-o; a
 * failed write is exit 2) and returns the decision's exit code (0 deploy or
 * not gated, 1 block, 2 error or no evidence, 3 inconclusive). */
int cli_render_compare(const char *cmd, drift_store *st, const drift_comparison *c, const cli_compare_args *a);
/* The exit code of a rendered decision; for a workload without evidence
 * also prints, on stderr, what is missing and the command that supplies it
 * (with st's name). */
int cli_gate_exit(const char *cmd, drift_store *st, const drift_comparison *c, drift_decision d);
/* The compare options' lines of --help (compare and measure). */
extern const char cli_gate_usage[];
/* The gate's exit codes, the last lines of compare's and measure's --help. */
extern const char cli_gate_exit_usage[];

/* ---- signals ---- */

/* Installs SIGINT/SIGTERM handlers: the first asks running stages (and the
 * targets' requests, through cli_cancel_requested) to stop; the second
 * exits at once with CLI_EXIT_ERROR. */
void cli_install_signal_handlers(void);
extern volatile sig_atomic_t cli_interrupted;
/* The stages' cancel hook: nonzero once a signal asked to stop. */
int cli_cancel_requested(void *user);

/* ---- getopt_long ids and tables ---- */

/* Run options (run, measure) and compare options (compare, measure); -o is
 * compare's too. */
enum {
    OPT_DB = 256, OPT_LABEL, OPT_TARGET, OPT_SUITE, OPT_CONFIG, OPT_CONC, OPT_TEMP, OPT_TOPP, OPT_TOPK, OPT_SEED,
    OPT_MAXTOK, OPT_LOGPROBS, OPT_REPS, OPT_LIMIT, OPT_TIMEOUT, OPT_CTIMEOUT, OPT_RETRIES, OPT_HELP,
    OPT_WORKLOAD, OPT_BUDGET, OPT_SDR, OPT_FORMAT, OPT_DECIDE, OPT_MAX_LEFT_OUT
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

/* The order options (run, measure; cmd_run.c): ids apart from the
 * commands' own (compare 300.., measure 400..). */
enum { OPT_ORDER = 380, OPT_ORDER_SEED, OPT_RISK_FROM };
#define ORDER_LONG_OPTIONS                                                                                   \
    {"order", required_argument, 0, OPT_ORDER}, {"order-seed", required_argument, 0, OPT_ORDER_SEED},        \
        {"risk-from", required_argument, 0, OPT_RISK_FROM}
/* Parses an order option into a (1 handled, 0 not one, -1 bad value). */
int cli_parse_order_option(const char *cmd, int opt, const char *arg, cli_run_args *a);
/* Prints and returns -1 when the order options do not go together. */
int cli_check_order(const char *cmd, const cli_run_args *a);

/* The request control options (run, measure; cli/request.c): --system,
 * --system-file, --template, --extra-body, --header, --stop. */
enum { OPT_SYSTEM = 360, OPT_SYSTEM_FILE, OPT_TEMPLATE, OPT_EXTRA_BODY, OPT_HEADER, OPT_STOP };
#define REQUEST_LONG_OPTIONS                                                                                 \
    {"system", required_argument, 0, OPT_SYSTEM}, {"system-file", required_argument, 0, OPT_SYSTEM_FILE},    \
        {"template", required_argument, 0, OPT_TEMPLATE}, {"extra-body", required_argument, 0, OPT_EXTRA_BODY}, \
        {"header", required_argument, 0, OPT_HEADER}, {"stop", required_argument, 0, OPT_STOP}
/* Parses a request control option into a (1 handled, 0 not one, -1 bad
 * value, printed). */
int cli_parse_request_option(const char *cmd, int opt, const char *arg, cli_run_args *a);
/* Points a->topts.request's headers and a->params' stop strings at what
 * the options gave (call once, after parsing). */
void cli_request_finish(cli_run_args *a);
/* --extra-body's value: the JSON text, or "@FILE" read (the text kept in
 * a->owned). NULL after printing when the file cannot be read. */
const char *cli_extra_body_arg(const char *cmd, const char *flag, const char *arg, cli_run_args *a);
/* The --help lines of the request control options (run, measure). */
extern const char cli_request_usage[];

#define COMPARE_LONG_OPTIONS                                                                                 \
    {"workload", required_argument, 0, OPT_WORKLOAD}, {"budget", required_argument, 0, OPT_BUDGET},          \
        {"sdr-threshold", required_argument, 0, OPT_SDR}, {"format", required_argument, 0, OPT_FORMAT},      \
        {"decide", required_argument, 0, OPT_DECIDE}, {"max-left-out", required_argument, 0, OPT_MAX_LEFT_OUT}, \
        {"output", required_argument, 0, 'o'}

#endif
