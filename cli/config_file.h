/* config_file.h - `measure -c FILE` and `matrix -c FILE`: the config file
 * (include/driftbench/config.h, docs/config.md) read into the structs the
 * commands' flags fill, before the flags are parsed: flags > file >
 * defaults. */
#ifndef DRIFT_CLI_CONFIG_FILE_H
#define DRIFT_CLI_CONFIG_FILE_H

#include <getopt.h>

#include "cmd_matrix.h"
#include "driftbench/config.h"
#include "driftbench/measure.h"
#include "pipeline.h"

/* The FILE of -c FILE / --config FILE among argv (the command's own option
 * tables: a first pass of getopt_long, opt_id being the long option's id),
 * or NULL. Leaves getopt ready for the command's own pass. */
const char *cli_config_path(int argc, char **argv, const char *shortopts, const struct option *longopts, int opt_id);

/* Reads measure's file at path into mo (sides, score, gate, servers), a
 * (run options, suites: a->n_suites > 0 when the file has suites), co
 * (compare options, format, output) and *db; *order_given = 1 when the
 * file sets the order. *cfg holds the strings: free it after the command
 * (drift_config_free). Returns 0, or CLI_EXIT_ERROR after printing. */
int cli_measure_config(const char *path, drift_config **cfg, drift_measure_opts *mo, cli_run_args *a,
                       cli_compare_args *co, const char **db, int *order_given);

/* Reads matrix's file at path: its spec into *spec, its run settings into
 * mo and *db. The same contract. */
int cli_matrix_config(const char *path, drift_config **cfg, drift_matrix_spec **spec, cli_matrix_opts *mo,
                      const char **db);

#endif
