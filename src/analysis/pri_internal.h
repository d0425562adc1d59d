/* pri_internal.h - internal to the Portability Risk Index (not public): what
 * pri_features.c, pri_xgb.c, pri_eval.c and pri_model.c share.
 *
 * The PRI is an XGBoost regressor of flip rate on features of a
 * configuration (model, hardware, precision, framework, workload):
 *
 *   pri_features.c  the feature spec: one-hot of every dimension's levels
 *                   (taken from the table), the paper's interactions,
 *                   optional descriptors; feature names.
 *   pri_xgb.c       the only file that talks to xgboost: opaque boosters
 *                   and matrices; every call checked, XGBGetLastError's
 *                   message kept in a DRIFT_ERR_XGBOOST.
 *   pri_eval.c      drift_pri_evaluate: held-out accuracy (80/20 split,
 *                   5-fold CV, held-out level of every dimension,
 *                   ablations, gain importance); hyper-parameter tuning by
 *                   inner CV; the jobs that run tuned fits side by side.
 *   pri_model.c     drift_pri_fit / predict / save / load: the fitted model
 *                   with intervals from out-of-fold residuals.
 *
 * Determinism: tree_method=hist, seed set, one thread per booster; jobs run
 * side by side (o->nthread at a time) so the results never depend on the
 * thread count. */
#ifndef DRIFT_PRI_INTERNAL_H
#define DRIFT_PRI_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "driftbench/analysis.h"
#include "driftbench/status.h"

/* Dimensions are the paper's five (drift_dim, drift_dim_names in types.h),
 * a table's dims[0..DRIFT_DIM_COUNT). */

/* ---------------------------------------------------- pri_features.c */

/* Which features, from which levels. */
typedef struct pri_fspec {
    size_t nlev[DRIFT_DIM_COUNT];
    char **lev[DRIFT_DIM_COUNT];    /* (nlev[d],) sorted level names, owned */
    int use_dim[DRIFT_DIM_COUNT];   /* one-hot of this dimension included */
    int interactions, descriptors;
    /* the caller's descriptors (o->desc, borrowed): the columns used (those
     * that vary over the table's rows), in desc's order */
    const drift_pri_descriptors *ud; /* NULL in a loaded model */
    size_t n_ud;
    size_t *ud_col;          /* (n_ud,) owned: column of ud (a loaded model: 0..n_ud-1) */
    char **ud_names;         /* (n_ud,) owned copies of the names used */
    int use_ud;              /* ud columns included (0 in some ablations) */
    size_t p;                /* number of features */
} pri_fspec;

/* A data set: all rows' features and labels. */
typedef struct pri_dset {
    const float *X;   /* (N, p) row-major */
    const float *y;   /* (N,) */
    size_t p;
} pri_dset;

/* Levels of every dimension of t, options' feature groups; all one-hots on. */
drift_status pri_fspec_from_table(const drift_table *t, const drift_pri_options *o, pri_fspec *f,
                                  drift_error *err);
void pri_fspec_free(pri_fspec *f);
/* Sets f->p from the levels and the groups switched on. */
void pri_fspec_count(pri_fspec *f);
/* Index of level v of dimension d, -1 when unknown. */
int pri_level_index(const pri_fspec *f, int d, const char *v);
/* out (f->p): the features of one configuration; an unknown level leaves
 * its one-hot at 0, a descriptor a level's name says nothing about is NaN.
 * ud_row: the configuration's row of f->ud (its n_names values), or NULL
 * (every caller descriptor NaN). */
void pri_fspec_row(const pri_fspec *f, const char *const dims[DRIFT_DIM_COUNT], const double *ud_row, float *out);
/* Number of one-hot columns (they come first). */
size_t pri_fspec_onehot_count(const pri_fspec *f);
/* Feature names the table would give (the tests look at them): *names
 * malloc'd array of malloc'd strings, *n of them; free with
 * pri_names_free. */
drift_status pri_feature_names(const drift_table *t, const drift_pri_options *o, char ***names, size_t *n,
                               drift_error *err);
void pri_names_free(char **names, size_t n);

/* (f->p,) malloc'd names; free with pri_names_free(names, f->p). */
drift_status pri_fspec_names(const pri_fspec *f, char ***names, drift_error *err);
/* Bits of a format name: fp16 -> 16, nvfp4 -> 4, e4m3 -> 8; NaN if none. */
double pri_format_bits(const char *s);
/* X (n_rows, f->p) and y (n_rows,) flip rates of every row of t, malloc'd.
 * With caller descriptors, a row whose experiment_id has none is
 * DRIFT_ERR_NOT_FOUND. */
drift_status pri_build_dset(const drift_table *t, const pri_fspec *f, float **X, float **y, drift_error *err);

/* --------------------------------------------------------- pri_xgb.c */

typedef struct pri_hparams {
    int depth;
    double eta;
    double mcw;       /* min_child_weight */
    int rounds;       /* number of trees */
} pri_hparams;

typedef struct pri_booster pri_booster;   /* an xgboost booster (opaque) */
typedef struct pri_dmatrix pri_dmatrix;   /* an xgboost matrix (opaque) */

#define PRI_XGB_MAX_CACHE 4

/* A matrix of X (n, p) with labels y (n,) (NULL: none); NaN = missing. */
drift_status pri_xgb_dmatrix(const float *X, const float *y, size_t n, size_t p, pri_dmatrix **out,
                             drift_error *err);
void pri_xgb_dmatrix_free(pri_dmatrix *m);

/* A booster with hp set (its rounds unused), no tree yet; cache (ncache <=
 * PRI_XGB_MAX_CACHE): the matrices it will train on and predict again
 * (xgboost then predicts new trees only). */
drift_status pri_xgb_create(pri_dmatrix *const *cache, int ncache, const pri_hparams *hp, unsigned seed,
                            int nthread, pri_booster **out, drift_error *err);
/* Adds tree number iter, trained on m. */
drift_status pri_xgb_update_one_iter(pri_booster *b, int iter, pri_dmatrix *m, drift_error *err);
/* A booster of hp.rounds trees on X (n, p), y (n). */
drift_status pri_xgb_train(const float *X, const float *y, size_t n, size_t p, const pri_hparams *hp,
                           unsigned seed, int nthread, pri_booster **out, drift_error *err);
/* pred (n) of matrix m (n rows) from the first `rounds` trees (0 = all). */
drift_status pri_xgb_predict_dm(pri_booster *b, pri_dmatrix *m, size_t n, int rounds, double *pred,
                                drift_error *err);
/* pred (n) of X (n, p) from the first `rounds` trees (0 = all). */
drift_status pri_xgb_predict(pri_booster *b, const float *X, size_t n, size_t p, int rounds, double *pred,
                             drift_error *err);
/* Total gain of every feature used: names (xgboost's f0, f1, ... without
 * feature names) and scores, *n of each, owned by b until its next call. */
drift_status pri_xgb_total_gain(pri_booster *b, size_t *n, const char *const **names, const float **scores,
                                drift_error *err);
/* The model in xgboost's JSON format: *len bytes owned by b until its next call. */
drift_status pri_xgb_save_json(pri_booster *b, const char **buf, size_t *len, drift_error *err);
/* A booster from a saved model (len bytes), set to one thread. */
drift_status pri_xgb_load(const void *buf, size_t len, pri_booster **out, drift_error *err);
drift_status pri_xgb_num_features(pri_booster *b, size_t *n, drift_error *err);
void pri_xgb_free(pri_booster *b);   /* NULL-safe */

/* -------------------------------------------------------- pri_eval.c */

/* Shuffles v in place with a seeded generator (Fisher-Yates). */
void pri_shuffle(size_t *v, size_t n, unsigned seed);

/* One tuned fit: the evaluations of drift_pri_evaluate and the folds of
 * drift_pri_fit are independent jobs, run side by side by pri_jobs_run. */
typedef struct pri_job {
    const pri_dset *ds;
    size_t *tr, *te;        /* (ntr,), (nte,) rows, owned */
    size_t ntr, nte;
    const int *group;       /* inner folds hold out whole groups, or NULL */
    int tune_only;          /* only choose hp: no fit, no test rows */
    int fixed_hp;           /* fit with hp as given (no tuning) */
    pri_hparams hp;         /* chosen */
    drift_pri_holdout *h;   /* filled when !tune_only (name set by the caller) */
    double *pred_te;        /* (nte,) test predictions, or NULL */
    drift_status st;
    drift_error err;
} pri_job;

/* The noise ceiling of rows `rows` (n) of t: obs_var = var(flip_rate/100)
 * (population), noise_var = mean of y(1-y)/(n_i-1) with y = flips/n_i (the
 * unbiased estimate of the binomial p(1-p)/n_i; NAN when a row has fewer
 * than 2 comparisons), ceiling = 1 - noise_var / obs_var: what a perfect
 * predictor's R^2 is expected to be (NAN without variance or counts). */
void pri_noise_ceiling(const drift_table *t, const size_t *rows, size_t n, double *ceiling, double *obs_var,
                       double *noise_var);
/* 95% percentile interval [lo, hi] of the R^2 of pred (n) against the flip
 * rates of rows `rows`, by `reps` resamples of the configurations
 * (experiment_id) with replacement, each taking all its rows; replicates
 * without variance are skipped (no interval when more than half are).
 * *n_clusters: configurations among the rows; fewer than 2: no interval. */
drift_status pri_cluster_bootstrap_r2(const drift_table *t, const size_t *rows, size_t n, const double *pred, int reps,
                                      uint64_t seed, double *lo, double *hi, size_t *n_clusters, drift_error *err);

/* Zeroes j and gives it room for N training and N test rows. */
drift_status pri_job_alloc(pri_job *j, const pri_dset *ds, size_t N, drift_error *err);
void pri_jobs_free(pri_job *jobs, size_t n);
/* Runs every job (o->nthread at a time); the first failure in job order. */
drift_status pri_jobs_run(pri_job *jobs, size_t n, const drift_pri_options *o, drift_error *err);

/* qsort comparator of doubles, ascending; numpy's default (linear) quantile
 * q of the n sorted values v (NAN when n = 0). Both in pri_eval.c, with
 * the jobs above, which drift_pri_fit (pri_model.c) uses too. */
int pri_cmp_double(const void *a, const void *b);
double pri_quantile_sorted(const double *v, size_t n, double q);

#endif
