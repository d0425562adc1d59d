/* flip_table.h - the matrix module's interface to the report layer's
 * loader (not public API): the flip table together with the comparisons its
 * rows came from, for the matrix report (src/report/load_matrix.c). */
#ifndef DRIFT_MATRIX_FLIP_TABLE_H
#define DRIFT_MATRIX_FLIP_TABLE_H

#include <stddef.h>

#include "driftbench/analysis.h"
#include "driftbench/compare.h"
#include "driftbench/store.h"

/* One run with rows in the flip table. */
typedef struct matrix_table_run {
    char *label;           /* the run's label */
    char *baseline;        /* its baseline run's label */
    char *levels[DRIFT_DIM_CONFIG_COUNT]; /* its model, hardware, precision, framework as its config records them;
                            * NULL when not a string */
    drift_comparison *cmp; /* baseline vs run, default options: the rows' source */
} matrix_table_run;

/* drift_matrix_flip_table, and when kept is not NULL the runs with rows in
 * the table's order (*kept malloc'd, free with matrix_table_runs_free; left
 * NULL and 0 on error). gate (NULL = drift_compare_opts_default) gives the
 * comparisons' budgets, rule and max_left_out, nothing else: the table's
 * rows do not depend on it, only the kept comparisons' decisions do. */
drift_status matrix_flip_table_runs(drift_store *st, const char *baseline, const drift_compare_opts *gate,
                                    drift_table **out, matrix_table_run **kept, size_t *n_kept, drift_error *err);
void matrix_table_runs_free(matrix_table_run *r, size_t n);

#endif
