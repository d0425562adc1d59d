/* config_file.c - see config_file.h. The file's reading and checking is
 * the library's (src/pipeline/config.c); this file puts what it read where
 * the commands' flags go, so each flag parsed after it overrides it. */
#include "config_file.h"

#include <string.h>

#include "cli.h"

const char *cli_config_path(int argc, char **argv, const char *shortopts, const struct option *longopts, int opt_id) {
    const char *path = NULL;
    int opt;
    optind = 0; /* a fresh scan */
    opterr = 0;
    while ((opt = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1)
        if (opt == 'c' || opt == opt_id) path = optarg;
    optind = 0;
    return path;
}

int cli_measure_config(const char *path, drift_config **cfg, drift_measure_opts *mo, cli_run_args *a,
                       cli_compare_args *co, const char **db, int *order_given) {
    drift_error err = {0};
    drift_measure_file f;
    if (drift_config_load(path, cfg, &err) || drift_config_measure(*cfg, mo, &f, &err)) return cli_error_lib("measure", &err);
    a->topts = mo->target_opts;
    a->params = mo->params;
    a->replicates = mo->replicates;
    a->limit = mo->limit;
    a->order = mo->order;
    a->order_seed = mo->order_seed;
    a->risk_from = mo->risk_from;
    for (size_t i = 0; i < f.n_suites && i < CLI_MAX_SUITES; i++) a->suites[a->n_suites++] = f.suites[i];
    co->opts = mo->compare;
    if (f.has_format) co->fmt = f.format;
    if (f.output) co->out = f.output;
    if (f.store) *db = f.store;
    if (f.order_set) *order_given = 1;
    return 0;
}

int cli_matrix_config(const char *path, drift_config **cfg, drift_matrix_spec **spec, cli_matrix_opts *mo,
                      const char **db) {
    drift_error err = {0};
    drift_matrix_file f;
    if (drift_config_load(path, cfg, &err) || drift_config_matrix(*cfg, spec, &f, &err)) return cli_error_lib("matrix", &err);
    if (f.store) *db = f.store;
    if (f.parallel) mo->jobs = f.parallel;
    if (f.concurrency) mo->concurrency = f.concurrency;
    if (f.no_score >= 0) mo->no_score = f.no_score;
    mo->score = f.score;
    return 0;
}
