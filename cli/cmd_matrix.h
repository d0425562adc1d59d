/* cmd_matrix.h - the matrix stage as `matrix` and `lab` print it
 * (matrix_print.c; the runner is the library's drift_matrix_run). */
#ifndef DRIFT_CLI_CMD_MATRIX_H
#define DRIFT_CLI_CMD_MATRIX_H

#include <stdio.h>

#include "driftbench/analysis.h"
#include "driftbench/eval.h"
#include "driftbench/matrix.h"
#include "driftbench/pipeline.h"
#include "driftbench/store.h"

typedef struct cli_matrix_opts {
    int shard_index, shard_count;  /* 1/1 = everything */
    int concurrency;               /* batch size per target; 0 = default */
    drift_score_opts score;
    int progress_lines;            /* print one line per configuration (lab) instead of run's own output */
    int jobs;                      /* configurations side by side (drift_matrix_opts.jobs) */
    int recheck;                   /* run finished runs again for what they lack (drift_matrix_opts.recheck) */
    int all_failed_ok;             /* drift_matrix_opts.all_failed_ok */
    int no_score;                  /* drift_matrix_opts.no_score */
    /* With progress_lines: (spec->n_configs,) estimated seconds of each
     * configuration (the lab's cost model; NULL: all equal). A progress bar
     * on stderr when it is a terminal (done/total, the time left from the
     * weights, corrected by the pace so far); a plain line per
     * configuration otherwise. */
    const double *weights;
    double est_wall_s;             /* the cost model's wall-time estimate (0: unknown) */
} cli_matrix_opts;

/* What a matrix run spent: the stage's summary. */
typedef drift_matrix_summary cli_matrix_stats;

void cli_matrix_opts_default(cli_matrix_opts *o);

/* Runs and scores the shard's configurations (drift_matrix_run, stopped by
 * a signal). Prints progress, what failed, and the scoring summary (with
 * what was not computable and why) to stderr. Fills stats when non-NULL.
 * Returns a CLI exit code. */
int cli_matrix_run(const char *cmd, drift_store *st, const drift_matrix_spec *spec, const cli_matrix_opts *o,
                   cli_matrix_stats *stats);

/* The same printing for a caller that runs the stage inside its own (lab:
 * drift_lab_run): a printer of the stage's events (those of stages
 * "matrix" and "run"; NULL when out of memory), and what follows the
 * stage's return rc (the failure, or the scoring summary) with its exit
 * code. */
typedef struct cli_matrix_printer cli_matrix_printer;
cli_matrix_printer *cli_matrix_printer_new(const char *cmd, const drift_matrix_spec *spec, const cli_matrix_opts *o);
void cli_matrix_printer_event(cli_matrix_printer *pr, const drift_progress *p);
void cli_matrix_printer_free(cli_matrix_printer *pr);
int cli_matrix_finish(const char *cmd, const drift_matrix_spec *spec, const cli_matrix_stats *stats, drift_status rc,
                      const drift_error *err);

#endif
