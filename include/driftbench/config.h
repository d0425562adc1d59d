/* config.h - one file per comparison or matrix (issue 37): a YAML (or JSON)
 * config file read into the options `measure` and `matrix` take, so that a
 * migration gate is `driftbench measure -c drift.yaml`. docs/config.md lists
 * every key; src/pipeline/config.c maps them.
 *
 * Errors name the file, the line (YAML) and the key's path:
 *   drift.yaml:12: targets.baseline.hedaers: unknown key (known: url, model, ...)
 * and are DRIFT_ERR_PARSE (the file's text: syntax, duplicate keys, tags) or
 * DRIFT_ERR_INVALID (a key, a type, a value out of range, a missing url).
 * The caller applies its own flags after the file's values, so flags win:
 * flags > file > defaults. */
#ifndef DRIFTBENCH_CONFIG_H
#define DRIFTBENCH_CONFIG_H

#include <stddef.h>

#include "driftbench/matrix.h"
#include "driftbench/measure.h"
#include "driftbench/pipeline.h"
#include "driftbench/report.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A config file read: its tree, where each key was written, and every
 * string the options filled from it point into (valid until
 * drift_config_free). */
typedef struct drift_config drift_config;

/* Reads a config file: a name ending in ".json" is parsed as JSON
 * (jansson), any other as YAML (yaml_json: YAML 1.2 core schema values,
 * anchors and merge keys, duplicate keys refused, at most 4 MiB). */
DRIFT_API drift_status drift_config_load(const char *path, drift_config **out, drift_error *err);
/* The same from text; name is used in messages, json selects the parser. */
DRIFT_API drift_status drift_config_parse(const char *text, size_t len, const char *name, int json,
                                          drift_config **out, drift_error *err);
DRIFT_API void drift_config_free(drift_config *c);

/* What a measure file says beyond drift_measure_opts (the CLI's own
 * settings); NULL / 0: not in the file. */
typedef struct drift_measure_file {
    const char *store;        /* store: SQLite file or postgresql:// URL */
    int has_format;           /* report.format given */
    drift_format format;
    const char *output;       /* report.output: the report's file */
    int order_set;            /* order.by given */
    const char *const *suites; /* (n_suites,) also in o->suites */
    size_t n_suites;
} drift_measure_file;

/* Fills o (already holding its defaults, drift_measure_opts_default) with
 * what the file says: the targets (side[]: label, target spec made of url,
 * model, api, api_key_env, embed_model, detect, allow_insecure_key, or a
 * whole "target" spec; config, start, request), suites, limit, replicates,
 * decoding, order, request defaults (target_opts.request), evaluators,
 * budgets, gate, compare, servers and requests; the rest into *f. Keys the
 * file leaves out keep o's values. Reading again is an error (the tree is
 * taken apart). */
DRIFT_API drift_status drift_config_measure(drift_config *c, drift_measure_opts *o, drift_measure_file *f,
                                            drift_error *err);

/* What a matrix file says beyond the spec; 0 / NULL: not in the file. */
typedef struct drift_matrix_file {
    const char *store;
    int parallel;             /* configurations side by side */
    int concurrency;          /* requests in flight per target */
    int no_score;             /* -1 not given, 0, 1 */
    drift_score_opts score;   /* evaluators: guard, embedder, unsafe_code_exec, jobs (defaults otherwise) */
} drift_matrix_file;

/* The matrix spec of a matrix file (the JSON spec's keys, src/matrix/spec.c,
 * with the target fields in explicit configurations) into *spec (free with
 * drift_matrix_spec_free), the run settings (store, parallel, concurrency,
 * no_score, evaluators) into *f. */
DRIFT_API drift_status drift_config_matrix(drift_config *c, drift_matrix_spec **spec, drift_matrix_file *f,
                                           drift_error *err);

#ifdef __cplusplus
}
#endif
#endif
