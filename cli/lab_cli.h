/* lab_cli.h - what the files of `driftbench lab` share (cmd_lab.c: the
 * flags and the run; lab_progress.c: the phases printed while it runs;
 * lab_findings.c: what the study found, printed and written). */
#ifndef DRIFT_CLI_LAB_CLI_H
#define DRIFT_CLI_LAB_CLI_H

#include <limits.h>

#include "cmd_matrix.h"
#include "driftbench/lab.h"

/* What the command keeps while the stage runs. */
typedef struct lab_cli {
    const char *out;            /* DIR */
    int full;
    int threads;                /* engine threads per configuration (--threads) */
    int dry_run;
    char matrix_path[PATH_MAX + 32], long_path[PATH_MAX + 32];
    int rc;                     /* CLI_EXIT_PASS, or the exit code of a failure printed already */
    int stop;                   /* 1: stop the stage (a failure was printed) */
    int write_failed;           /* a file could not be written (printed): exit 2 at the end */
    cli_matrix_opts mo;         /* the running matrix leg's printing */
    cli_matrix_printer *printer;
    const char *leg_cmd;
} lab_cli;

/* The stage's progress callback (drift_lab_opts.progress; user: the
 * lab_cli): each phase's lines, and the matrix legs' printer. */
void cli_lab_event(void *user, const drift_progress *p);

/* Writes DIR/name; a failure is printed naming the path and makes the exit
 * code 2 (c->write_failed). Returns 0 or -1. */
int cli_lab_write_file(lab_cli *c, const char *name, const char *text);

/* Prints and writes what the study found, from its result: the summary,
 * the flip table, the ANOVA, the PRI evaluation and the HTML report.
 * Returns an exit code. */
int cli_lab_report(lab_cli *c, const drift_lab_result *r);

/* The A/A check: the baseline against itself must not flip. Returns
 * CLI_EXIT_PASS, or CLI_EXIT_FAIL after saying so on stderr. */
int cli_lab_aa_check(const drift_lab_result *r);

/* The closing lines: sizes, times, tokens, CPU; out is DIR. */
void cli_lab_print_times(const drift_lab_result *r, double wall_s, const char *out);

#endif
