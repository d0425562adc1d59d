/* measure.h - the measure stage: two configurations (the baseline stack and
 * the candidate) run over the same suites into one store, their answers
 * scored, and the target compared against the baseline: run + run + score
 * + compare in one call, over a session that keeps its resources open (each
 * side's server and target, the suites, the scorer's evaluators).
 *
 * Like every stage (pipeline.h) it takes the open store and an options
 * struct filled by its _default function, passes the run stage's progress
 * events through, stops when the cancel hook says so, never prints, and
 * returns a drift_status with the message in drift_error plus a summary
 * whose step says where a failure was. The comparison is returned for the
 * caller to render (report.h) and gate.
 *
 * Only the two labels are scored: other runs of the store are left as
 * they are. src/pipeline/measure.c says how servers and the sequential
 * gate's chunks go. */
#ifndef DRIFTBENCH_MEASURE_H
#define DRIFTBENCH_MEASURE_H

#include <stddef.h>
#include <stdint.h>

#include "driftbench/compare.h"
#include "driftbench/pipeline.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Pairs per gated workload asked between two looks at the sequential gate. */
#define DRIFT_MEASURE_SEQ_CHUNK 16

/* One side of a measure: DRIFT_MEASURE_BASELINE or DRIFT_MEASURE_TARGET. */
enum { DRIFT_MEASURE_BASELINE = 0, DRIFT_MEASURE_TARGET = 1 };

typedef struct drift_measure_side {
    /* Run label (the two differ); NULL: one nobody chose, "baseline" or
     * "target", or the first of NAME-2, NAME-3, ... that is free or holds
     * a run of the same identity (drift_run_opts.label_free): the same
     * measure resumes its runs, another one never collides with them.
     * summary.label says which was taken. */
    const char *label;
    const char *target;      /* target spec (required); "{port}" only with start */
    const char *config;      /* "k=v,..." dimensions; NULL none */
    /* Shell command that starts this side's server (NULL: none): "{port}"
     * in it and in target becomes a free port picked at start; the run
     * records target with "{port}", so a resumed measure on another port
     * continues the same run. */
    const char *start;
    /* This side's request control (target.h); all NULL: target_opts.request
     * of the measure's options, shared by both sides. */
    drift_request_ctl request;
} drift_measure_side;

typedef struct drift_measure_opts {
    drift_measure_side side[2];      /* [DRIFT_MEASURE_BASELINE], [DRIFT_MEASURE_TARGET] */
    const char *const *suites;       /* (n_suites,) suite specs */
    size_t n_suites;
    drift_target_opts target_opts;   /* as drift_run_opts' */
    drift_gen_params params;
    int replicates;                  /* default 1 */
    long limit;                      /* 0 = all prompts of each suite */
    /* The target's order (the baseline is asked in risk_from's risk order,
     * or in suite order without risk_from). RISK without risk_from ranks by
     * the measure's own baseline (which then needs params.logprobs). */
    drift_run_order order;
    uint64_t order_seed;
    const char *risk_from;
    const char *health_path;         /* servers' health path; NULL = /health */
    double ready_timeout_s;          /* a server's time to get healthy; default 120 */
    drift_score_opts score;          /* how the two runs are scored (a cache is made when NULL) */
    drift_compare_opts compare;      /* compare's options (budgets, gate) */
    /* 1: the sequential gate (measure.c): both sides asked in chunks in the
     * seeded random order (order is then RANDOM), asking stops per workload
     * once its verdict is certain; alpha is each verdict's error rate. */
    int sequential;
    double alpha;                    /* default 0.05 */
    int (*cancel)(void *cancel_user); /* NULL: never; given to servers, runs and scoring */
    void *cancel_user;
    drift_progress_cb progress;      /* the run stage's events, passed through; NULL none */
    void *progress_user;
    /* Servers (NULL: not told): port 0 when side's server is about to be
     * started with command (as given, "{port}" unfilled), then its port
     * once it answers. */
    void (*on_server)(void *user, int side, const char *command, int port);
    /* Sequential (NULL: not told): after each chunk, the gate's replay and,
     * per workload, 1 once it is asked no more (verdict certain or asked
     * whole). */
    void (*on_chunk)(void *user, int chunk, const drift_seq_result *r, const int stopped[DRIFT_WL_COUNT]);
    void *event_user;
} drift_measure_opts;

/* Where a measure got to, or where it failed. */
typedef enum drift_measure_step {
    DRIFT_MEASURE_STEP_CHECK = 0,    /* a side's target and start do not go together (err says how) */
    DRIFT_MEASURE_STEP_SERVER = 1,   /* a side's server did not start (side; err, DRIFT_ERR_CANCELLED on a cancel) */
    DRIFT_MEASURE_STEP_RUN = 2,      /* a side's run failed (side, run, run_target; server_died) */
    DRIFT_MEASURE_STEP_STOPPED = 3,  /* a cancel between steps (DRIFT_ERR_CANCELLED) */
    DRIFT_MEASURE_STEP_CHUNK = 4,    /* sequential: scoring or replaying a chunk failed (or was cancelled) */
    DRIFT_MEASURE_STEP_SCORE = 5,    /* scoring the two runs (the summary's pass) failed or was cancelled */
    DRIFT_MEASURE_STEP_COMPARE = 6,  /* comparing (or the sequential replay) failed */
    DRIFT_MEASURE_STEP_DONE = 7
} drift_measure_step;

typedef struct drift_measure_summary {
    drift_measure_step step;
    int side;                        /* CHECK, SERVER, RUN: the side concerned */
    int server_died;                 /* RUN: its server exited during the run (err names it) */
    char run_target[1024];           /* RUN: the address the run opened ("{port}" filled) */
    drift_run_summary run;           /* the last run ask (RUN: the one that failed) */
    int scored;                      /* 1 once the summary's scoring pass is done: score holds it */
    drift_score_summary score;       /* the two runs' scoring (sequential: a last pass after the chunks) */
    int chunks;                      /* sequential: chunks asked */
    drift_seq_result seq;            /* sequential: the gate's replay after the last chunk */
    char label[2][256];              /* the runs' labels: side[k].label, or the one taken for a NULL one */
} drift_measure_summary;

/* Fills o with the defaults: one replicate, order seed 42, /health, 120 s,
 * score and compare defaults, alpha 0.05. */
DRIFT_API void drift_measure_opts_default(drift_measure_opts *o);

/* Request control in layers, as a measure given a file and flags has it:
 * the file's (drift_config_measure: target_opts.request shared,
 * side[k].request each side's, already over the shared one) under the
 * flags' (shared, and each side's own). */
typedef struct drift_measure_request_layers {
    drift_request_ctl file;          /* the file's shared request control */
    drift_request_ctl file_side[2];  /* the file's per side (all NULL: none) */
    drift_request_ctl flags;         /* the shared flags (NULL, no header: not given) */
    drift_request_ctl side_flags[2]; /* each side's own flags (--baseline-header, ...) */
} drift_measure_request_layers;

/* *shared = l->file with each field l->flags sets taken from l->flags. A
 * side with anything of its own (a file entry or flags) gets its file
 * entry (without one, the shared file one), the shared flags over it, then
 * its own flags over that, in side[k]; the other side[k] is all NULL (it
 * is asked with the shared one). Headers by name at every layer
 * (drift_request_headers_over). The header lists go in one malloc'd array,
 * *hbuf: free it once the results are no longer used; the strings stay
 * the caller's. DRIFT_ERR_NOMEM. */
DRIFT_API drift_status drift_measure_request_layer(const drift_measure_request_layers *l, drift_request_ctl *shared,
                                                   drift_request_ctl side[2], const char ***hbuf, drift_error *err);

/* Runs (or resumes) both sides into st, scores the two runs and compares
 * target against baseline (drift_compare_runs; sequential: replayed
 * through drift_compare_sequential into sum->seq). On success *out is the
 * comparison (free with drift_comparison_free); on failure *out is NULL and
 * sum->step says where (a failed run leaves what it stored: calling again
 * resumes). Every server started is stopped before the call returns. sum
 * (required) is filled in every case. */
DRIFT_API drift_status drift_measure_run(drift_store *st, const drift_measure_opts *o, drift_comparison **out,
                                         drift_measure_summary *sum, drift_error *err);

#ifdef __cplusplus
}
#endif
#endif
