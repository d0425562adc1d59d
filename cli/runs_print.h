/* runs_print.h - `driftbench runs`: list and show, printed by runs_print.c
 * for cmd_runs.c. */
#ifndef DRIFT_CLI_RUNS_PRINT_H
#define DRIFT_CLI_RUNS_PRINT_H

#include "driftbench/store.h"

/* Prints every run of st: a table, or a JSON document
 * {"schema_version", "runs": [...]} (as_json). Returns an
 * exit code: 0, or 2 after printing the error. */
int cli_runs_list(drift_store *st, int as_json);

/* Prints run label of st: its identity, endpoints and counts per workload,
 * as lines or a JSON document (as_json; "schema_version" first). Returns an
 * exit code: 0, or 2 after printing the error (no such run). */
int cli_runs_show(drift_store *st, const char *label, int as_json);

#endif
