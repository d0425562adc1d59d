/* monitor.h - the distribution-drift detectors a monitoring stack (Evidently)
 * would run on the embeddings of two sets of answers: a reference set
 * (baseline answers) and a current set (target answers). DriftBench prints
 * them beside its flip rates so a user sees the flips that no distribution
 * alarm catches. Four methods with Evidently's defaults (see monitor.c for
 * their exact definitions and where each comes from):
 *   model     domain classifier ROC AUC          drift if AUC > 0.55 (or > random q95)
 *   distance  distance between mean embeddings   drift if > 0.2
 *   ratio     share of drifted components        drift if > 0.2 (each: normed W1 >= 0.1)
 *   mmd       unbiased MMD^2, RBF kernel         drift if > 0.015 */
#ifndef DRIFTBENCH_MONITOR_H
#define DRIFTBENCH_MONITOR_H

#include <stddef.h>
#include <stdint.h>
#include "driftbench/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum drift_monitor_method {
    DRIFT_MON_MODEL = 0,
    DRIFT_MON_DISTANCE = 1,
    DRIFT_MON_RATIO = 2,
    DRIFT_MON_MMD = 3,
    DRIFT_MON_COUNT = 4
} drift_monitor_method;

typedef struct drift_monitor_opts {
    double model_threshold;           /* ROC AUC; default 0.55 */
    int model_bootstrap;              /* -1 = Evidently's default (on when the reference has
                                         fewer than 1000 rows), 0 = fixed threshold, 1 = bootstrap */
    double model_quantile;            /* quantile of random-classifier AUCs; default 0.95 */
    int lr_epochs;                    /* gradient-descent epochs of the classifier; default 300 */
    int distance_cosine;              /* 0 = Euclidean (default), 1 = cosine distance */
    double distance_threshold;        /* default 0.2 */
    double ratio_component_threshold; /* normalised Wasserstein per component; default 0.1 */
    double ratio_threshold;           /* share of drifted components; default 0.2 */
    double mmd_threshold;             /* default 0.015 */
    uint64_t seed;                    /* split, subsampling, bootstrap; default 42 */
} drift_monitor_opts;

typedef struct drift_monitor_result {
    drift_monitor_method method;
    double score;          /* AUC, distance, share, MMD^2 (clipped at 0 like Evidently) */
    double threshold;      /* the value the score was compared with */
    int drift;             /* 1 = this detector raises an alarm */
    char rule[128];        /* the decision rule in words, e.g. "ROC AUC > 0.55" */
} drift_monitor_result;

typedef struct drift_monitor_report {
    size_t n_ref, n_cur;
    int dim;
    drift_monitor_result r[DRIFT_MON_COUNT];
    double model_random_auc_q;   /* quantile of random-classifier AUCs on the same test half */
    size_t ratio_drifted;        /* components over the per-component threshold */
    double mmd_sigma2;           /* RBF bandwidth: median cross distance, squared */
    int alarms;                  /* number of detectors with drift */
} drift_monitor_report;

/* Fills o with Evidently's defaults listed above. */
DRIFT_API void drift_monitor_opts_default(drift_monitor_opts *o);
/* "model", "distance", "ratio", "mmd". */
DRIFT_API const char *drift_monitor_method_name(drift_monitor_method m);

/* Runs the four detectors. ref is n_ref x dim floats (row-major), cur is
 * n_cur x dim. Needs at least 2 rows on each side and dim >= 1 (else
 * DRIFT_ERR_INVALID); non-finite values are DRIFT_ERR_NUMERIC naming the
 * row. Deterministic for a given opts->seed. */
DRIFT_API drift_status drift_monitor_run(const float *ref, size_t n_ref, const float *cur, size_t n_cur, int dim,
                                         const drift_monitor_opts *opts, drift_monitor_report *out,
                                         drift_error *err);

/* ---- the embeddings of two stored runs ---- */
struct drift_store;
typedef struct drift_monitor_data {
    float *ref;            /* n_ref x dim: embeddings of the baseline run's answers */
    size_t n_ref;
    float *cur;            /* n_cur x dim: embeddings of the target run's answers */
    size_t n_cur;
    int dim;
    char embedder[512];    /* the embedder name the vectors come from */
    size_t answered_ref;   /* answered responses of each run (with or without an embedding) */
    size_t answered_cur;
} drift_monitor_data;

/* Loads the stored embeddings of every answered response (all workloads) of
 * the runs labelled baseline and target. embedder: the stored embedder name
 * ("embed:http://..."); NULL picks the one with the most embeddings in the
 * two runs. No embedding at all is DRIFT_ERR_NOT_FOUND with a message that
 * says to run `driftbench score --embedder ...`; vectors of different
 * dimensions are DRIFT_ERR_MISMATCH. Empty with drift_monitor_data_clear. */
DRIFT_API drift_status drift_monitor_load(struct drift_store *st, const char *baseline, const char *target,
                                          const char *embedder, drift_monitor_data *out, drift_error *err);
DRIFT_API void drift_monitor_data_clear(drift_monitor_data *d);

#ifdef __cplusplus
}
#endif
#endif
