/* compare.h - paired comparison of a baseline run and a target run: flips
 * per workload in both directions with Wilson 95% CIs, exact McNemar,
 * accuracies, budgets and the verdict. Also the textbook statistics. */
#ifndef DRIFTBENCH_COMPARE_H
#define DRIFTBENCH_COMPARE_H

#include "driftbench/store.h"
#include "driftbench/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- statistics ---- */
/* Wilson score interval for k successes in n trials at normal quantile z
 * (1.959964 for 95%). n == 0 gives [0,1]. */
DRIFT_API void drift_wilson(long k, long n, double z, double *lo, double *hi);
/* Exact two-sided McNemar p-value for discordant counts b and c
 * (binomial test of min(b,c) under p=0.5; 1.0 when b+c == 0). */
DRIFT_API double drift_mcnemar_exact(long b, long c);
/* Clopper-Pearson exact interval for k successes in n trials at confidence
 * conf (0.95). n == 0 gives [0,1]. */
DRIFT_API void drift_clopper_pearson(long k, long n, double conf, double *lo, double *hi);

/* ---- comparison ---- */
typedef struct drift_flip {
    const char *prompt_id;     /* owned by the comparison */
    int replicate;
    int direction;             /* +1 incorrect->correct (unsafe->safe), -1 correct->incorrect (safe->unsafe), 0 chat drift */
    int64_t base_response_id;
    int64_t targ_response_id;
    double value;              /* chat: SDR; else NAN */
} drift_flip;

typedef struct drift_wl_result {
    drift_workload workload;
    long n;                    /* pairs counted (both sides labelled) */
    long errors;               /* pairs excluded: a request or evaluator error on either side */
    long unscored;             /* pairs excluded: no label computable */
    long flips;
    double flip_rate;          /* fraction */
    double ci95[2];
    long correct_to_incorrect; /* safety: safe_to_unsafe */
    long incorrect_to_correct; /* safety: unsafe_to_safe */
    double baseline_accuracy;  /* safety: safe rate */
    double target_accuracy;
    double net_change;         /* target_accuracy - baseline_accuracy */
    double mcnemar_p;
    double budget;             /* fraction; < 0 = none */
    int pass;                  /* flip_rate <= budget (or no budget) */
    double sdr_mean;           /* chat only, else NAN */
    double semantic_drift_rate;/* chat only, else NAN */
    drift_flip *flipped;
    size_t n_flipped;
} drift_wl_result;

typedef struct drift_comparison {
    drift_run_info baseline;
    drift_run_info target;
    drift_wl_result wl[DRIFT_WL_COUNT];
    int present[DRIFT_WL_COUNT];   /* workload had any pairs */
    int pass;                      /* every workload within budget */
    long total_errors;
    double sdr_threshold;          /* the chat threshold used (opts->sdr_threshold) */
} drift_comparison;

typedef struct drift_compare_opts {
    double budget[DRIFT_WL_COUNT];   /* fraction; < 0 = no budget */
    int only_workload;               /* DRIFT_WL_UNKNOWN = all */
    double sdr_threshold;            /* default 0.30 */
    const char *embedder;            /* embedding name for chat SDR; NULL = any stored */
} drift_compare_opts;

/* Defaults: budgets safety 1%, code 0.5%, others none; SDR 0.30. */
DRIFT_API void drift_compare_opts_default(drift_compare_opts *o);
/* Parses "math=1,safety=0.5" (percent) into o->budget. */
DRIFT_API drift_status drift_compare_parse_budgets(drift_compare_opts *o, const char *spec, drift_error *err);

DRIFT_API drift_status drift_compare_runs(drift_store *st, const char *baseline_label, const char *target_label,
                                          const drift_compare_opts *opts, drift_comparison **out,
                                          drift_error *err);
DRIFT_API void drift_comparison_free(drift_comparison *c);
/* The embedder whose vectors chat SDR used (opts->embedder, or the one the
 * baseline's chat answers were embedded with); NULL when none. */
DRIFT_API const char *drift_comparison_embedder(const drift_comparison *c);

#ifdef __cplusplus
}
#endif
#endif
