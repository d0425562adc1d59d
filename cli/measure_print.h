/* measure_print.h - the measure stage as `measure` prints it
 * (measure_print.c; the work is the library's drift_measure_run). */
#ifndef DRIFT_CLI_MEASURE_PRINT_H
#define DRIFT_CLI_MEASURE_PRINT_H

#include "driftbench/measure.h"
#include "pipeline.h"

/* Opens the store db, sets mo's hooks (progress, cancel by signal, the
 * servers' and the sequential chunks' lines on stderr) and runs the stage;
 * prints the score summary or why it failed, renders the comparison (co:
 * --format, -o; --sequential: the replay's report) and the store's name
 * and labels. Returns the gate's exit code, or CLI_EXIT_ERROR. */
int cli_measure_run(const char *db, drift_measure_opts *mo, const cli_compare_args *co);

#endif
