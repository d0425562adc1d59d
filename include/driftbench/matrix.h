/* matrix.h - the configuration matrix: a JSON spec of dimensions, levels and
 * targets (src/matrix/spec.c documents the format), deterministic shards of
 * it, and the configuration x workload flip table of a store (the paper's
 * flip_rates.csv). Running the configurations is the matrix stage's job
 * (drift_matrix_run in pipeline.h); merging shard stores into one is the
 * store's (drift_store_merge in store.h). */
#ifndef DRIFTBENCH_MATRIX_H
#define DRIFTBENCH_MATRIX_H

#include <stddef.h>
#include <stdint.h>

#include "driftbench/analysis.h"
#include "driftbench/store.h"
#include "driftbench/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The server a configuration's target needs, started by the matrix stage
 * (drift_server_proc_start in server_proc.h) for its run and stopped after. */
typedef struct drift_matrix_server {
    char *start;            /* shell command, placeholders filled (each value quoted as one literal
                             * word: data, never shell) but "{port}" (the port picked at start);
                             * NULL: the configuration starts no server */
    char *health;           /* path polled until HTTP 200; "/health" */
    double ready_timeout_s; /* 120 */
} drift_matrix_server;

/* One configuration: a labelled run of a target with its dimension levels. */
typedef struct drift_matrix_config {
    char *label;          /* run label in the store */
    char *target;         /* target spec (embedded:... or http://...); with a server it holds "{port}" */
    size_t n_dims;
    char **dim_names;     /* (n_dims,) "model","hardware",... in spec order */
    char **dim_values;    /* (n_dims,) levels */
    drift_matrix_server server; /* server.start NULL: none */
    /* Request control of its target (the spec's system_prompt, template,
     * headers, extra_body: the configuration's own, else the top level's,
     * field by field; headers by name), given to its run as
     * target_opts.request (target.h's drift_request_ctl); NULL / 0: none. */
    char *system_prompt;
    char *prompt_template;
    char *extra_body_json;
    char **headers;       /* (n_headers,) "Name: value" */
    size_t n_headers;
} drift_matrix_config;

typedef struct drift_matrix_spec {
    char *name;
    char *baseline;               /* label of the baseline run; may hold "{model}" etc. */
    size_t n_suites;
    char **suites;                /* "builtin:math", paths, ... */
    long limit;                   /* prompts per suite, 0 = all */
    double temperature, top_p;    /* decoding: defaults 0, 1 */
    int64_t seed;                 /* 42 */
    int max_tokens;               /* 512 */
    int replicates;               /* 1 */
    int baseline_logprobs;        /* top-k logprobs of the baseline runs' answers; 0 = none */
    size_t n_configs;
    drift_matrix_config *configs; /* (n_configs,) baseline configs first when known */
} drift_matrix_spec;

/* Parses a spec from JSON text; `name` (file name) is used in messages. A bad
 * spec is DRIFT_ERR_PARSE naming the field ("spec.json: configs[2].target:
 * missing"). */
DRIFT_API drift_status drift_matrix_spec_parse(const char *text, size_t len, const char *name,
                                               drift_matrix_spec **out, drift_error *err);
/* Reads and parses a spec file: YAML when its name ends in .yaml or .yml
 * (util/yaml_json.c; messages then carry the line: "m.yaml:7: configs[1]...:"),
 * JSON otherwise. */
DRIFT_API drift_status drift_matrix_spec_load(const char *path, drift_matrix_spec **out, drift_error *err);
DRIFT_API void drift_matrix_spec_free(drift_matrix_spec *s);

/* 1 when a and b are the same server (the same start command and health
 * path, both non-NULL): configurations run one after another share one
 * process. */
DRIFT_API int drift_matrix_server_same(const drift_matrix_server *a, const drift_matrix_server *b);

/* "k=v,k=v" of a configuration's dimensions (malloc'd), the form the run
 * command's --config takes. */
DRIFT_API char *drift_matrix_config_dims(const drift_matrix_config *c);

/* The label of the baseline run for configuration c: spec->baseline with
 * "{dim}" replaced by c's level of dim (malloc'd; NULL on nomem). */
DRIFT_API char *drift_matrix_baseline_for(const char *baseline, const drift_matrix_config *c);

#define DRIFT_MATRIX_SHARD_MAX 100000 /* the most shards (N of I/N) */

/* Parses "I/N" (1 <= I <= N <= DRIFT_MATRIX_SHARD_MAX). DRIFT_ERR_INVALID
 * otherwise. */
DRIFT_API drift_status drift_matrix_shard_parse(const char *s, int *index, int *count, drift_error *err);
/* 1 when configuration number `config_index` (0-based, spec order) belongs to
 * shard index/count: config_index % count == index - 1. Every configuration
 * is in exactly one shard. */
DRIFT_API int drift_matrix_in_shard(size_t config_index, int index, int count);

/* A lookup of the environment: getenv, or the caller's own. */
typedef const char *(*drift_env_fn)(const char *name);
/* The shard of a job array's task (src/matrix/shard_env.c), for a caller
 * given no "I/N": Slurm (SLURM_ARRAY_TASK_ID with SLURM_ARRAY_TASK_COUNT or
 * SLURM_ARRAY_TASK_MIN/MAX/STEP: shard (ID-MIN)/STEP+1 of the array's tasks)
 * or a Kubernetes Indexed Job (JOB_COMPLETION_INDEX, with the count
 * count_flag, the caller's --shard-count N, or DRIFT_SHARD_COUNT).
 * count_flag 0: none given. env NULL: getenv. Sets *index and *count (1-based
 * index) and said (cap bytes) to where they came from ("Slurm
 * (SLURM_ARRAY_TASK_ID=2, ...)"); without a job array leaves them and said
 * is "" (a count_flag without one is an error). DRIFT_ERR_INVALID naming
 * the variable for a value that is not a number in [0,
 * DRIFT_MATRIX_SHARD_MAX], out of range or inconsistent. */
DRIFT_API drift_status drift_matrix_shard_from_env(drift_env_fn env, long count_flag, int *index, int *count,
                                                   char *said, size_t cap, drift_error *err);

/* The flip table of a store: for every run other than its baseline, the
 * comparison (drift_compare_runs, default options) against the baseline
 * `baseline` (a label; "{model}" etc. are replaced by the run's own levels,
 * so each model is compared with its own reference), one row per workload
 * with pairs: experiment_id = run label, model/hardware/precision/framework
 * from the run's config, flip_rate and Wilson CI in percent. Runs whose
 * baseline run is missing, and runs that are baselines, give no rows.
 * Extra config keys (other than profile and profile_spec) become extra
 * dimension columns ("" where a run lacks one). */
DRIFT_API drift_status drift_matrix_flip_table(drift_store *st, const char *baseline, drift_table **out,
                                               drift_error *err);

#ifdef __cplusplus
}
#endif
#endif
