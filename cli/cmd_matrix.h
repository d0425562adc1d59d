/* cmd_matrix.h - the matrix runner shared by `matrix` and `lab`: runs every
 * configuration of a spec that belongs to the shard (resuming what is
 * stored), then scores them. */
#ifndef DRIFT_CLI_CMD_MATRIX_H
#define DRIFT_CLI_CMD_MATRIX_H

#include "driftbench/eval.h"
#include "driftbench/matrix.h"
#include "driftbench/store.h"

typedef struct cli_matrix_opts {
    int shard_index, shard_count;  /* 1/1 = everything */
    int concurrency;               /* batch size per target; 0 = default */
    drift_score_opts score;
    int progress_lines;            /* print one line per configuration (lab) instead of run's own output */
} cli_matrix_opts;

/* What a matrix run spent (filled by cli_matrix_run when non-NULL). */
typedef struct cli_matrix_stats {
    size_t configs;                /* configurations of the shard */
    double run_ms, score_ms;       /* wall time in generation and in scoring */
    drift_score_summary score;     /* summed over configurations */
} cli_matrix_stats;

void cli_matrix_opts_default(cli_matrix_opts *o);

/* Runs and scores the shard's configurations. Prints progress and the
 * scoring summary (with what was not computable and why) to stderr.
 * Returns a CLI exit code. */
int cli_matrix_run(const char *cmd, drift_store *st, const drift_matrix_spec *spec, const cli_matrix_opts *o,
                   cli_matrix_stats *stats);

#include <stdio.h>
#include "driftbench/analysis.h"
/* Prints the flip table grouped by workload (text; cmd_table.c). */
void cli_print_flip_table(FILE *f, const drift_table *t);

#endif
