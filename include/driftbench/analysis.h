/* analysis.h - the matrix-level analysis: flip table, ANOVA, PRI.
 *
 * A flip table has one row per configuration x workload: the paper's columns
 * (experiment_id, model, hardware, precision, framework, workload, flip_rate
 * in percent, num_flips, num_comparisons), optionally ci_low / ci_high
 * (percent) and any number of extra dimension columns (strings).
 *
 * ANOVA: ordinary least squares on categorical factors (treatment coding,
 * levels sorted as patsy sorts them, the first level is the reference) with
 * two-way interactions, Type I / II / III sums of squares, F, p,
 * eta^2 = SS / total SS about the mean (the paper's definition), partial
 * eta^2 = SS / (SS + residual SS), the share of the printed SS column (the
 * artifact's "eta_squared"; the same as eta^2 for type I, not for types
 * II and III) and Benjamini-Hochberg adjusted p-values.
 * Rank-deficient designs (empty interaction cells) are handled as
 * statsmodels does where statsmodels is numerically stable (see anova.c).
 *
 * PRI (Portability Risk Index): an XGBoost regressor of flip rate from the
 * one-hot configuration + the paper's pairwise interactions (+ optional
 * numeric descriptors of each configuration: what its levels are), with
 * honest evaluations (random split, k-fold, held-out level of every
 * dimension with >= 3 levels, each R^2 with a configuration-bootstrap
 * interval beside its binomial noise ceiling or "cannot say"; ablations on
 * one repeated CV; hyper-parameters by repeated inner CV, seeded) and
 * calibrated prediction intervals. */
#ifndef DRIFTBENCH_ANALYSIS_H
#define DRIFTBENCH_ANALYSIS_H

#include <stddef.h>
#include <stdint.h>
#include "driftbench/status.h"
#include "driftbench/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ table */

/* The paper's five dimensions (drift_dim_names, types.h), in that order,
 * are dims[0..DRIFT_DIM_COUNT) of every row; extra dimension columns
 * follow. */

typedef struct drift_table_row {
    char *experiment_id;
    char **dims;            /* (n_dims,) level of each dimension */
    double flip_rate;       /* percent, 0..100 */
    long num_flips;
    long num_comparisons;
    double ci_low, ci_high; /* percent; NAN when the table has no CI columns */
} drift_table_row;

typedef struct drift_table {
    size_t n_dims;          /* >= DRIFT_DIM_COUNT */
    char **dim_names;       /* (n_dims,) drift_dim_names, then the extras */
    int has_ci;             /* ci_low/ci_high columns present */
    size_t n_rows, cap_rows;
    drift_table_row *rows;  /* (n_rows,) in file order */
} drift_table;

/* Creates an empty table with the five dimensions plus n_extra extra
 * dimension names (copied). has_ci says whether rows carry CIs. */
DRIFT_API drift_status drift_table_create(const char *const *extra_dims, size_t n_extra, int has_ci,
                                          drift_table **out, drift_error *err);

/* Appends a row; dims has t->n_dims strings (copied). flip_rate in percent. */
DRIFT_API drift_status drift_table_append(drift_table *t, const char *experiment_id,
                                          const char *const *dims, double flip_rate,
                                          long num_flips, long num_comparisons,
                                          double ci_low, double ci_high, drift_error *err);

/* Parses CSV text (RFC 4180 quoting, header line required, columns in any
 * order; the nine paper columns are required, ci_low/ci_high optional, every
 * other column is an extra dimension, whose value may be empty: a row with
 * no value for it). `name` is used in messages:
 * "NAME:LINE: field X: ...". Bad rows -> DRIFT_ERR_PARSE. The header
 * "flip_rate(percent)" is accepted for flip_rate. */
DRIFT_API drift_status drift_table_parse_csv(const char *text, size_t len, const char *name,
                                             drift_table **out, drift_error *err);

/* Reads a file with drift_table_parse_csv. */
DRIFT_API drift_status drift_table_read_csv(const char *path, drift_table **out, drift_error *err);

/* Formats the table as CSV (paper's columns, then ci_low,ci_high when
 * present, then extra dimensions); *out is malloc'd. Doubles keep 17
 * significant digits so a read of the output gives back the same table. */
DRIFT_API drift_status drift_table_format_csv(const drift_table *t, char **out, drift_error *err);

/* Writes drift_table_format_csv to path. */
DRIFT_API drift_status drift_table_write_csv(const drift_table *t, const char *path, drift_error *err);

/* Index of a dimension by name, -1 when absent. */
DRIFT_API int drift_table_dim_index(const drift_table *t, const char *name);

/* Distinct levels of dimension `dim`, sorted with strcmp (patsy's order).
 * *levels is a malloc'd array of pointers into the table (do not free the
 * strings, free the array). */
DRIFT_API drift_status drift_table_levels(const drift_table *t, size_t dim, const char ***levels,
                                          size_t *n_levels, drift_error *err);

/* "flip_rate ~ C(a) + C(b) ..." over the fixed dimensions that have two or
 * more levels (main effects, the order of the table's dimensions); *n_params
 * = 1 + sum(levels - 1). malloc'd; NULL when no dimension varies (or out of
 * memory). */
DRIFT_API char *drift_table_varying_formula(const drift_table *t, size_t *n_params);

DRIFT_API void drift_table_free(drift_table *t);

/* ------------------------------------------------------------------ anova */

/* One row of an ANOVA table. The last row of a table is "Residual". */
typedef struct drift_anova_row {
    char *term;      /* "C(hardware)", "C(hardware):C(precision)", "Intercept", "Residual" */
    double df;       /* numerator degrees of freedom = rank the term adds (rank of its test) */
    int n_columns;   /* design columns of the term (statsmodels prints this as df) */
    double sum_sq;   /* = F * df * MSE, so rows add up for type 1 */
    double mean_sq;
    double F, p;     /* NAN on the Residual row */
    double p_bh;     /* Benjamini-Hochberg over the table's term rows */
    double eta_sq;   /* eta^2 = sum_sq / ss_total (the total sum of squares about the mean);
                      * NAN on the Intercept row */
    double eta_sq_partial; /* partial eta^2 = sum_sq / (sum_sq + the Residual's sum_sq); NAN on
                      * the Residual and Intercept rows */
    double ss_share; /* sum_sq / sum of the printed sum_sq column (Intercept and Residual
                      * included): the artifact's "eta_squared"; equals eta_sq for type I only */
} drift_anova_row;

typedef struct drift_anova_table {
    int type;                /* 1, 2 or 3 */
    char *formula;
    char *stratum;           /* "workload=math" for stratified tables, NULL otherwise */
    size_t nobs;
    size_t n_columns, rank;  /* design matrix columns and rank */
    double ssr, df_resid, mse, ss_total; /* ss_total about the mean */
    size_t n_rows;
    drift_anova_row *rows;
} drift_anova_table;

/* Fits `formula` (response ~ terms; terms C(x), x, C(x):C(y), x:y, joined by
 * '+'; the response is flip_rate, num_flips, num_comparisons, ci_low or
 * ci_high) on the table and returns the ANOVA table of the given type.
 * Type 3 has an Intercept row. Rows whose formula dimensions are missing are
 * an error. NULL formula = the paper's. */
DRIFT_API drift_status drift_anova_run(const drift_table *t, const char *formula, int type,
                                       drift_anova_table **out, drift_error *err);

/* Runs the ANOVA within each level of dimension `strata` (sorted), with the
 * terms that mention `strata` dropped from the formula. A stratum whose
 * fit has no residual degrees of freedom is skipped. *out is a malloc'd
 * array of *n_out tables. */
DRIFT_API drift_status drift_anova_stratified(const drift_table *t, const char *formula, int type,
                                              const char *strata, drift_anova_table ***out,
                                              size_t *n_out, drift_error *err);

DRIFT_API void drift_anova_free(drift_anova_table *a);

/* The paper's formula. */
DRIFT_API const char *drift_anova_default_formula(void);

/* One row of the artifact's ANOVA table (the paper's data directory holds
 * anova_flip_rate_corrected.csv beside flip_rates.csv: Type III, computed
 * on slightly different data, shown beside ours for reference). */
typedef struct drift_anova_artifact_row {
    char term[64];
    double sum_sq, df, F, p, p_corrected, eta_sq; /* NAN where the file's field is empty */
} drift_anova_artifact_row;

/* Reads anova_flip_rate_corrected.csv from the directory that holds
 * table_path into rows (at most max; the header line skipped, lines
 * without seven fields ignored). Returns the number of rows read: 0 when
 * there is no such file. */
DRIFT_API size_t drift_anova_artifact_read(const char *table_path, drift_anova_artifact_row *rows, size_t max);

/* Benjamini-Hochberg step-up adjusted p-values (NAN entries are skipped and
 * stay NAN); out may alias p. */
DRIFT_API void drift_bh_adjust(const double *p, size_t n, double *out);

/* -------------------------------------------------------------------- pri */

typedef struct drift_pri drift_pri;   /* a fitted PRI model (opaque) */

/* Numeric descriptors of configurations: what a level is (mantissa and
 * exponent bits, block size, accumulator bits, lanes, fma, split factor,
 * fusion, attention block ...), so that a level the model never saw is
 * predicted from what it is rather than from its name. One row per
 * configuration, keyed by the flip table's experiment_id (the run label);
 * one column per named descriptor; NAN = not applicable / unknown (xgboost
 * treats it as missing). The table owns copies of everything it is given. */
typedef struct drift_pri_descriptors {
    size_t n_names;       /* descriptors (columns) */
    char **names;         /* (n_names,) */
    size_t n_configs;     /* configurations (rows) */
    char **configs;       /* (n_configs,) experiment ids */
    double *values;       /* (n_configs * n_names) row-major */
    size_t cap_configs;
} drift_pri_descriptors;

/* An empty descriptor table. */
DRIFT_API drift_status drift_pri_descriptors_create(drift_pri_descriptors **out, drift_error *err);
/* Sets descriptor `name` of configuration `config` to value (both added
 * when new; a new name is NAN for the configurations already there).
 * Setting the same (config, name) twice keeps the last value. A name must
 * be non-empty and free of ',', '"' and newlines; a value must not be
 * infinite (NAN = missing). */
DRIFT_API drift_status drift_pri_descriptors_set(drift_pri_descriptors *d, const char *config, const char *name,
                                                 double value, drift_error *err);
/* Sets n named values of one configuration (drift_pri_descriptors_set each). */
DRIFT_API drift_status drift_pri_descriptors_set_all(drift_pri_descriptors *d, const char *config,
                                                     const char *const *names, const double *values, size_t n,
                                                     drift_error *err);
/* Reads CSV: header "experiment_id,NAME1,NAME2,...", one line per
 * configuration, numbers (empty or "nan" = missing). Bad input ->
 * DRIFT_ERR_PARSE naming file, line and field. */
DRIFT_API drift_status drift_pri_descriptors_read_csv(const char *path, drift_pri_descriptors **out,
                                                      drift_error *err);
/* Row of configuration `config`, -1 when absent. */
DRIFT_API long drift_pri_descriptors_find(const drift_pri_descriptors *d, const char *config);
DRIFT_API void drift_pri_descriptors_free(drift_pri_descriptors *d);

typedef struct drift_pri_options {
    int nthread;          /* evaluations (fit: folds) run side by side, each booster on
                           * one thread; 0 = 1; results do not depend on it */
    unsigned seed;        /* 42 */
    int cv_folds;         /* inner folds for hyper-parameter choice; 3 */
    int descriptors;      /* add descriptor features (format bits, hw generation, model size, MoE) */
    int interactions;     /* add the paper's 36 interaction features (1 by default) */
    int tune;             /* choose hyper-parameters by inner CV (1); 0 = fixed defaults */
    int grouped_cv;       /* held-out-level evaluations: inner folds hold out whole levels of
                           * the same dimension (1) instead of random rows (0, default) */
    const char *baseline[DRIFT_DIM_COUNT]; /* fit: baseline levels stored in the model
                           * (hardware, precision, framework used; NULL = automatic) */
    /* --- issue 36: descriptors, stable tuning, honest held-out R^2 --- */
    const drift_pri_descriptors *desc; /* evaluate: the caller's descriptors per configuration
                           * (borrowed; NULL = none: one-hot levels only, as before). Every
                           * experiment_id of the table must have a row (else DRIFT_ERR_NOT_FOUND).
                           * fit: the same; the model keeps the names and drift_pri_predict_described
                           * takes the values */
    unsigned onehot_off;  /* bit (1u << d): no one-hot of dimension d (described by desc alone); 0 */
    int cv_repeats;       /* repeats of the inner K-fold used to tune (3); the folds of every
                           * repeat come from seed, so a fixed seed gives the same result */
    int min_levels;       /* leave-one-level-out only on dimensions with at least this many
                           * levels (3); the others are listed in not_held */
    int bootstrap;        /* replicates of the configuration bootstrap of each held-out R^2 (2000);
                           * 0 = no interval */
    int ablation_repeats; /* repeats of the 5-fold CV that scores the ablations (3) */
} drift_pri_options;

/* Defaults: nthread 1, seed 42, cv_folds 3, descriptors 0, interactions 1, tune 1,
 * desc NULL, onehot_off 0, cv_repeats 3, min_levels 3, bootstrap 2000, ablation_repeats 3. */
DRIFT_API void drift_pri_options_init(drift_pri_options *o);

/* Fits on every row of the table: hyper-parameters by inner k-fold CV, then
 * out-of-fold residuals (5-fold) for the prediction interval, then the
 * final model on all rows. Baseline (for advice): o->baseline when given
 * (an unknown level is DRIFT_ERR_NOT_FOUND), else the paper's h100 / fp16 /
 * vllm when present, else hardware: the most common level, precision: the
 * widest format (f32 > bf16/fp16 > fp8 ...), framework: "ref" when present,
 * else the most common level. */
DRIFT_API drift_status drift_pri_fit(const drift_table *t, const drift_pri_options *o,
                                     drift_pri **out, drift_error *err);

/* Saves / loads the model as JSON (xgboost model base64 inside, feature
 * names, levels, hyper-parameters, residual quantiles, baseline). */
DRIFT_API drift_status drift_pri_save(const drift_pri *p, const char *path, drift_error *err);
DRIFT_API drift_status drift_pri_load(const char *path, drift_pri **out, drift_error *err);

typedef struct drift_pri_query {
    const char *model, *hardware, *precision, *framework, *workload;
} drift_pri_query;

typedef struct drift_pri_prediction {
    double flip_rate;          /* percent, clipped at 0 */
    double lo, hi;             /* interval, percent */
    double coverage;           /* nominal coverage of [lo, hi], 0.95 */
    const char *risk;          /* "low" (< 1%), "medium" (1..5%), "high" (>= 5%) on flip_rate */
    const char *change;        /* "none", "systematic", "idiosyncratic", "combined" */
    const char *advice;        /* one sentence */
    char differs[128];         /* dimensions that differ from the baseline, comma separated */
} drift_pri_prediction;

/* Predicts one configuration. Unknown level -> DRIFT_ERR_NOT_FOUND with a
 * message listing the known levels. baseline may be NULL (the stored one);
 * NULL fields of baseline fall back to the stored ones. */
DRIFT_API drift_status drift_pri_predict(const drift_pri *p, const drift_pri_query *q,
                                         const drift_pri_query *baseline,
                                         drift_pri_prediction *out, drift_error *err);

/* drift_pri_predict for a model fitted with descriptors
 * (drift_pri_descriptor_names): the configuration's values by name, n of
 * them (every name the model uses must be there, else DRIFT_ERR_INVALID
 * listing them; NAN = unknown). A level the model never saw is then
 * accepted and predicted from what it is. With a model without
 * descriptors the values are ignored (drift_pri_predict). */
DRIFT_API drift_status drift_pri_predict_described(const drift_pri *p, const drift_pri_query *q,
                                                   const char *const *names, const double *values, size_t n,
                                                   const drift_pri_query *baseline, drift_pri_prediction *out,
                                                   drift_error *err);

/* The caller's descriptors a model was fitted with (names without the
 * "d:" prefix; pointers owned by p); 0 when none. */
DRIFT_API size_t drift_pri_descriptor_names(const drift_pri *p, const char *const **names);

/* Levels known to the model for a fixed dimension (0..4); pointers owned by p. */
DRIFT_API size_t drift_pri_levels(const drift_pri *p, int dim, const char *const **levels);
DRIFT_API const char *drift_pri_baseline(const drift_pri *p, int dim);

DRIFT_API void drift_pri_free(drift_pri *p);

/* Why a held-out R^2 says nothing (drift_pri_holdout.cannot_say). */
typedef enum drift_pri_cannot {
    DRIFT_PRI_SAYS = 0,          /* the R^2 is defined and its noise ceiling above 0 */
    DRIFT_PRI_NO_FLIPS = 1,      /* no held-out row has a flip: nothing to predict */
    DRIFT_PRI_NO_VARIANCE = 2,   /* the held-out rows share one flip rate (not all 0) */
    DRIFT_PRI_AT_NOISE = 3,      /* noise ceiling <= 0: the rows vary no more than binomial noise */
    DRIFT_PRI_TOO_FEW = 4,       /* fewer than 2 held-out rows */
    DRIFT_PRI_NO_COUNTS = 5      /* rows without num_comparisons: no ceiling (the R^2 is still shown) */
} drift_pri_cannot;

/* One held-out evaluation. */
typedef struct drift_pri_holdout {
    char name[96];        /* "hardware=b200" */
    size_t n_train, n_test;
    double train_r2, test_r2, test_mae;
    double paper_r2;      /* the paper's figure for its four cases, NAN otherwise */
    int depth, rounds, min_child_weight;
    double eta;           /* chosen hyper-parameters */
    /* --- issue 36 --- */
    double r2_lo, r2_hi;  /* 95% percentile interval of test_r2: bootstrap over the held-out
                           * configurations (experiment_id: all rows of one resampled together),
                           * predictions fixed; NAN when fewer than 2 configurations or undefined */
    size_t n_configs;     /* configurations among the test rows (the bootstrap's units) */
    double ceiling;       /* noise ceiling: the R^2 the true per-row rates would get, estimated as
                           * 1 - mean(y(1-y)/(n-1)) / var(y) over the test rows (y = flips/n);
                           * NAN when not defined (no variance, no counts) */
    double obs_sd, noise_sd; /* sd of the test rows' flip rates and the rms binomial noise sd
                           * (percentage points) that the ceiling compares */
    double n_per_row;     /* mean num_comparisons of the test rows */
    double n_needed;      /* comparisons per row that would give a ceiling of 0.5 if these rows'
                           * true rates spread as much as the whole table's do (NAN: the table's
                           * rows themselves vary no more than noise, or not computable) */
    double table_true_sd; /* that spread: sqrt(var - noise) over every row of the table (points) */
    long test_flips, test_comparisons; /* sums over the test rows */
    int cannot_say;       /* drift_pri_cannot */
} drift_pri_holdout;

/* A dimension whose levels were not held out (fewer than min_levels). */
typedef struct drift_pri_not_held {
    char dim[32];
    size_t n_levels;
} drift_pri_not_held;

/* One ablation: every variant scored on the same repeated 5-fold CV (same
 * folds) with the same hyper-parameters (chosen once for the full model by
 * repeated inner CV on all rows: each figure is a little optimistic, the
 * same way for every variant, so one tuning draw cannot reorder them). */
typedef struct drift_pri_ablation {
    char name[48];        /* "full", "no interactions", "no descriptors", "one-hot only",
                           * "hardware one-hot only", "linear (OLS on one-hot)" */
    size_t n_features;
    double r2;            /* mean over repeats of the pooled out-of-fold R^2 */
    double r2_min, r2_max; /* range over the repeats */
} drift_pri_ablation;

typedef struct drift_pri_importance {
    char name[96];
    double gain_share;    /* total gain share, 0..1 */
} drift_pri_importance;

typedef struct drift_pri_eval {
    drift_pri_holdout random_split;      /* 80/20, seed */
    double cv_r2_mean, cv_r2_sd;         /* 5-fold, over the folds whose R^2 is defined (NAN if none) */
    int cv_folds_defined;                /* folds whose test rows vary (R^2 is NAN on a constant flip rate) */
    double cv_fold_r2[5];
    size_t n_paper, n_levels;
    drift_pri_holdout paper[4];          /* the paper's four held-out cases present in the table */
    drift_pri_holdout *levels;           /* (n_levels,) every level of every fixed dimension */
    /* ablations: the r2 of the matching entry of ablations[] (repeated 5-fold CV, same
     * hyper-parameters; before issue 36 these were one 80/20 split, each variant tuned apart) */
    double abl_hardware_only, abl_linear, abl_no_interactions, abl_full;
    size_t n_importance;
    drift_pri_importance *importance;    /* full model on all rows, by gain, descending */
    size_t n_features;
    /* --- issue 36 --- */
    size_t n_not_held;
    drift_pri_not_held not_held[DRIFT_DIM_COUNT]; /* dimensions with fewer than min_levels levels */
    int min_levels;                      /* the rule used */
    size_t n_ablations;
    drift_pri_ablation ablations[8];
    int ablation_repeats;
    int cv_folds, cv_repeats;            /* the tuning: cv_repeats x cv_folds inner folds */
    int bootstrap;                       /* replicates behind r2_lo/r2_hi */
    size_t n_desc;                       /* caller's descriptors used (0: none) */
    double table_true_sd;                /* sqrt(var - binomial noise) over all rows, points; NAN if <= 0 */
} drift_pri_eval;

/* Runs every evaluation; every model's hyper-parameters are tuned inside
 * its own training rows. */
DRIFT_API drift_status drift_pri_evaluate(const drift_table *t, const drift_pri_options *o,
                                          drift_pri_eval **out, drift_error *err);
DRIFT_API void drift_pri_eval_free(drift_pri_eval *e);

/* ------------------------------------------------- analyses of a table */

/* The PRI evaluations mean nothing on fewer rows. */
#define DRIFT_ANALYSES_PRI_MIN_ROWS 20

/* The analyses the matrix reports (the HTML report, the lab's summary)
 * show beside a flip table, each with why it is absent. Zero-initialise;
 * clear with drift_table_analyses_clear. */
typedef struct drift_table_analyses {
    size_t n_rows;                  /* rows of the table */
    char *formula;                  /* drift_table_varying_formula; NULL when no dimension varies */
    size_t n_params;                /* parameters of formula */
    int anova_fits;                 /* formula and n_rows >= n_params + 2: the ANOVA was run */
    drift_anova_table *anova[4];    /* [type] for each type asked (1..3); NULL when not asked or failed */
    drift_error anova_error[4];     /* [type]: code != DRIFT_OK when that type failed, with why */
    int pri_asked;                  /* a PRI evaluation was asked for */
    int pri_fits;                   /* n_rows >= DRIFT_ANALYSES_PRI_MIN_ROWS */
    const drift_pri_eval *pri;      /* the evaluation (given or computed); NULL when absent */
    drift_pri_eval *pri_own;        /* pri when computed here (freed by the clear) */
    drift_error pri_error;          /* code != DRIFT_OK when the evaluation failed, with why */
} drift_table_analyses;

/* Runs the analyses of t: the ANOVA of every type in anova_types (a bit
 * mask: 1u << type, types 1..3) with the formula of the dimensions that
 * vary, when the table has rows enough; the PRI evaluation when pri_o is
 * not NULL and the table has DRIFT_ANALYSES_PRI_MIN_ROWS rows, reusing
 * pri_given (not freed; computed on the same table) when it is not NULL.
 * A failing analysis is recorded in *out with its message, not returned
 * (out of memory building the formula reads as no varying dimension); the
 * status is DRIFT_ERR_INVALID only for a NULL table. */
DRIFT_API drift_status drift_table_analyze(const drift_table *t, unsigned anova_types, const drift_pri_options *pri_o,
                                           const drift_pri_eval *pri_given, drift_table_analyses *out,
                                           drift_error *err);
/* Frees what a holds (not a given PRI evaluation) and leaves it empty. */
DRIFT_API void drift_table_analyses_clear(drift_table_analyses *a);

/* R^2 = 1 - SS_res / SS_tot (around the mean of y); NAN when n < 2 or y constant. */
DRIFT_API double drift_r2(const double *y, const double *pred, size_t n);

/* ------------------------------------------- statistics of flips (issue 36)
 *
 * Flips are paired: the baseline's answer and a configuration's answer on
 * the same prompt. A prompt appears in many configurations, so the pairs
 * are clustered by prompt (a prompt near a decision boundary flips under
 * many configurations); these functions resample whole prompts (and, for a
 * mean over configurations, whole configurations) instead of pairs.
 * Every function is deterministic at a fixed seed and prints nothing. */

/* One pair: the baseline's answer and a configuration's answer on one
 * prompt. prompt and config are any ids (a prompt's rowid, a configuration's
 * index); equal ids are the same prompt / configuration. ok = 1 when the
 * answer is judged correct (safe, passing), 0 when not. */
typedef struct drift_flip_pair {
    int64_t prompt;
    int64_t config;
    unsigned char base_ok, cfg_ok;
} drift_flip_pair;

typedef struct drift_boot_opts {
    int resamples;   /* bootstrap resamples; 0 = 2000; fewer than 200 are raised to 200 */
    uint64_t seed;   /* the resampling stream (util_rng); the same seed gives the same result */
    double level;    /* two-sided coverage of the percentile interval; 0 = 0.95 */
} drift_boot_opts;

/* resamples 2000, seed 20261206, level 0.95 */
DRIFT_API void drift_boot_opts_init(drift_boot_opts *o);

/* A figure and its percentile interval; fractions (0..1; net: -1..1). */
typedef struct drift_boot_ci {
    double est;      /* the figure on the data */
    double lo, hi;   /* the (1-level)/2 and (1+level)/2 quantiles of the resampled figures
                      * (linear between order statistics) */
} drift_boot_ci;

/* The four flip figures of a set of pairs. "flip" is the paper's flip rate
 * (both directions); to_wrong = baseline correct, configuration not;
 * to_right = baseline wrong, configuration correct; net = to_right -
 * to_wrong = the change of accuracy (what net accuracy shows; flip is what
 * it hides). */
typedef struct drift_flip_boot {
    size_t n_pairs, n_prompts, n_configs;
    int resamples;               /* resamples behind the intervals (those holding a pair: a two-way
                                  * resample whose drawn configurations saw none of the drawn prompts
                                  * is skipped; fewer than half usable is DRIFT_ERR_INVALID) */
    double level;
    int two_way;                 /* 1: drift_flip_boot_two_way, 0: drift_flip_boot_prompts */
    drift_boot_ci flip, to_wrong, to_right, net;
} drift_flip_boot;

/* Pooled rates (flips / pairs over every pair given) with a cluster
 * bootstrap over prompts: each resample draws n_prompts prompts with
 * replacement and keeps all pairs of each drawn prompt (every
 * configuration), the figure is recomputed as a ratio of sums. Answers the
 * question "how far would the pooled rate move on another draw of prompts
 * from the same population, the configurations fixed". n >= 1 pairs and
 * at least 2 distinct prompts, else DRIFT_ERR_INVALID. */
DRIFT_API drift_status drift_flip_boot_prompts(const drift_flip_pair *pairs, size_t n, const drift_boot_opts *o,
                                               drift_flip_boot *out, drift_error *err);

/* The mean over configurations of each configuration's rate (the paper's
 * figures are such means over its configurations) with a two-way
 * (pigeonhole) bootstrap: each resample draws prompts with replacement and,
 * independently, configurations with replacement; a configuration's rate
 * is computed over the drawn prompts (multiplicities as weights), the mean
 * over the drawn configurations (multiplicities as weights); a drawn
 * configuration with no pair among the drawn prompts is left out of that
 * resample's mean. Answers "another draw of prompts AND of configurations
 * from their populations"; mildly conservative (Owen 2007, "The pigeonhole
 * bootstrap": its variance overstates the crossed design's by terms of
 * the interaction and noise; 0.967 coverage at nominal 0.95 in
 * test_cluster_boot's simulation).
 * At least 2 prompts and 2 configurations, else DRIFT_ERR_INVALID. */
DRIFT_API drift_status drift_flip_boot_two_way(const drift_flip_pair *pairs, size_t n, const drift_boot_opts *o,
                                               drift_flip_boot *out, drift_error *err);

/* The interval the lab printed before, for comparison: Wilson's 95% score
 * interval of the pooled rate p with n = n_prompts ("each prompt counted
 * once"; real-valued count p n). Fractions. */
DRIFT_API void drift_wilson_real(double p, double n, double z, double *lo, double *hi);

/* ------------------------------ logistic model of flips, prompt-clustered
 *
 * flip ~ C(f1, Treatment(ref1)) + C(f2, Treatment(ref2)) + ...: a binomial
 * GLM with the logit link, one observation per pair (y = 1 for a flip),
 * fitted by Newton's method (= IRLS for the canonical link) with step
 * halving, covariance cluster-robust over prompts exactly as statsmodels'
 * GLM(..., family=Binomial()).fit(cov_type='cluster',
 * cov_kwds={'groups': prompt}) gives it: H^-1 (sum_g s_g s_g') H^-1 times
 * G/(G-1) * (N-1)/(N-K) (G clusters, N observations, K estimated
 * parameters), z tests with the normal distribution, and per factor the
 * Wald chi^2 test that all its estimated levels are 0 (df = levels
 * estimated).
 *
 * Separation. A level whose observations all have y = 0 (no flip: common
 * here) or all y = 1 has an infinite maximum-likelihood coefficient; any
 * finite number printed for it would be an artefact of when the iterations
 * stopped. Such a level is reported as not estimable (why = "no flips in
 * its N pairs" / "every one of its N pairs flips"), its column and its
 * observations leave the fit (the limit of the likelihood as its
 * coefficient goes to -/+infinity: those observations are fitted exactly
 * and carry no information on the other coefficients), and the check is
 * repeated on what is left until no level is separated. When the reference
 * level itself is separated, its observations leave the fit and the
 * factor's first remaining level (strcmp order) becomes the reference
 * (reference_used). A column that the others span (collinear design) is
 * also not estimable ("collinear with earlier columns"), and so is a level
 * whose pairs all come from a single prompt (its prompt-clustered variance
 * is 0 by construction). If Newton's method
 * still fails to converge (separation by a combination of levels), the fit
 * says so (converged = 0) and every coefficient whose |estimate| exceeds
 * 10 is marked not estimable. */

typedef struct drift_logit_factor_in {
    const char *name;              /* "hardware" */
    const char *const *levels;     /* (n) the level of each observation */
    const char *reference;         /* the baseline's level; NULL = the first level in strcmp order */
} drift_logit_factor_in;

typedef struct drift_logit_coef {
    char *name;            /* "Intercept" or "C(hardware)[T.avx2]" (patsy's spelling) */
    char *factor, *level;  /* NULL for the intercept */
    long n_obs, n_events;  /* observations of this level (all for the intercept) and their flips */
    int estimable;         /* 0: est, se, z, p are NAN and why says why */
    char why[96];
    double est;            /* log odds ratio against the reference level (intercept: log odds at the references) */
    double se;             /* cluster-robust standard error */
    double z, p;           /* Wald z = est / se and its two-sided normal p-value */
} drift_logit_coef;

typedef struct drift_logit_term {
    char *factor;
    char *reference;        /* the reference level asked for */
    char *reference_used;   /* the reference of the fit (differs when the asked one was separated) */
    size_t n_levels;        /* levels in the data, reference included */
    size_t n_estimated;     /* non-reference levels with an estimable coefficient */
    size_t df;              /* degrees of freedom of the test: the rank of the cluster-robust
                             * covariance of those coefficients (< n_estimated when the
                             * prompts are too few to tell them apart) */
    double chi2, p;         /* Wald chi^2 (cluster-robust) that every estimated level is 0; NAN when none */
} drift_logit_term;

typedef struct drift_logit_fit {
    size_t nobs;            /* observations given */
    size_t nobs_used;       /* observations in the fit (separated levels' observations removed) */
    size_t n_clusters;      /* prompts among the observations used */
    size_t n_params;        /* estimated parameters (intercept included) */
    int converged;          /* 1: |step| < 1e-10 (max over coefficients) within 100 iterations */
    int iterations;
    double loglik, deviance, loglik_null; /* of the fit, and of the intercept-only model on the same observations */
    size_t n_coefs;         /* intercept + every non-reference level of every factor, estimable or not */
    drift_logit_coef *coefs;
    size_t n_terms;         /* one per factor with two or more levels, in the order given */
    drift_logit_term *terms;
} drift_logit_fit;

/* Fits the model. y (n) 0/1, cluster (n) the prompt of each observation.
 * A factor with a single level adds nothing and has no term. A reference
 * that is not among a factor's levels falls back to the first level
 * (reference_used says which). When no observation is left after removing
 * the separated levels (a workload without a single flip), the fit is
 * returned with nobs_used = 0, converged = 0 and nothing estimable: not an
 * error. The fit is over the observations left (nobs_used, n_clusters
 * among them, n_params estimated): statsmodels on those rows gives the
 * same numbers. Errors: DRIFT_ERR_INVALID for n < 2, a y not 0/1, a NULL
 * level string; DRIFT_ERR_NUMERIC when the Hessian cannot be factorised. */
DRIFT_API drift_status drift_logit_cluster_fit(const unsigned char *y, const int64_t *cluster, size_t n,
                                               const drift_logit_factor_in *factors, size_t n_factors,
                                               drift_logit_fit **out, drift_error *err);
DRIFT_API void drift_logit_fit_free(drift_logit_fit *f);

/* ------------------------------ the stochastic leg's flip-rate estimand
 *
 * Two stacks A (the baseline) and B sample R replicates per prompt at a
 * temperature, twice each with different seeds (A1, A2, B1, B2). A
 * replicate set's majority-vote label is pass when more than half of its
 * labelled replicates pass, fail when fewer, a tie otherwise (broken by a
 * fair coin: a tie disagrees with any label with probability 1/2).
 *   cross  = share of prompts whose majority label differs between the
 *            stacks: mean of d(A1, B2) and d(A2, B1) (sets of different
 *            seeds only); the paper's stochastic flip rate, sampling noise
 *            included;
 *   null   = share whose majority label differs between two replicate
 *            sets of the same stack: mean of d(A1, A2) and d(B1, B2);
 *   beyond = cross - null: the majority-vote flip rate the stack change
 *            causes beyond its own same-stack null. With P and Q a prompt's
 *            probability of a majority pass under A and B it estimates the
 *            mean of (P - Q)^2 without bias, which is the flip rate of the
 *            prompts whose majority is stable (P, Q in {0, 1}) and less for
 *            the others;
 *   det    = the deterministic (temperature 0) flip rate of the same pair
 *            of stacks on the same prompts (when given);
 *   ratio_cross = cross / det, ratio_beyond = beyond / det: comparable to the
 *            paper's ~0.23x (its 1.9% / 8.3%).
 * Intervals: percentile bootstrap over prompts (all figures of a prompt
 * resampled together). */

typedef struct drift_stoch_prompt {
    long pass[4], fail[4];  /* labelled replicates that pass / fail in A1, B1, A2, B2 */
    int det_flip;           /* the deterministic pair flipped (1), did not (0), unknown (-1) */
} drift_stoch_prompt;

typedef struct drift_stoch_estimand {
    size_t n;               /* prompts with at least one labelled replicate in each of the four sets */
    size_t n_det;           /* of those, prompts whose det_flip is known */
    int resamples;
    double level;
    double tie_share;       /* share of the n x 4 replicate sets whose majority is a tie */
    drift_boot_ci cross, null, beyond;
    drift_boot_ci det;      /* NAN when n_det == 0 */
    drift_boot_ci ratio_cross, ratio_beyond; /* NAN when det is 0 or unknown; hi = INFINITY when
                                              * more than (1-level)/2 of the resamples have det 0 */
    double det_zero_share;  /* share of resamples whose det is 0 */
} drift_stoch_estimand;

/* Computes the estimand over the n prompts given (prompts lacking a
 * labelled replicate in any set are skipped). Fewer than 2 usable prompts:
 * DRIFT_ERR_INVALID. cross, null and beyond are over the n prompts; det and
 * the ratios over the n_det of them whose det_flip is known (the ratio's
 * numerator recomputed on those prompts). */
DRIFT_API drift_status drift_stoch_estimand_compute(const drift_stoch_prompt *p, size_t n, const drift_boot_opts *o,
                                                    drift_stoch_estimand *out, drift_error *err);

/* One paragraph (static) defining cross, null, beyond and the ratios, for a
 * report to print. */
DRIFT_API const char *drift_stoch_estimand_definition(void);

/* ------------------------------ the shape of answers (issue 36)
 *
 * How long the answers of some runs are and how close their greedy
 * decisions were, per workload, from what the store holds: the completion
 * token counts (median, p10, p90: numpy's linear quantiles; the largest)
 * and the answers the token limit cut (finish_reason "length"); and from
 * each answer's stored logprobs (the form of compare.h's risk features:
 * [{"token":..,"logprob":..,"top":[{"token":..,"logprob":..}..]}..]) the
 * gap of each generated token whose top list has two entries or more, the
 * best minus the second-best logprob (nats; risk.c's margin): an answer's
 * smallest gap, and its tokens with a gap under DRIFT_SHAPE_TIE_NATS (near
 * ties). A gap is how large a change of the logits must be to turn that
 * greedy choice, so small ones are decisions other numerics can break.
 * Failed requests are in no figure (counted in failed); answers stored
 * without logprobs, or with logprobs that do not read, are in the length
 * figures but counted apart from the gap figures, never taken as gapless. */
#define DRIFT_SHAPE_N_GAPS 3
/* the thresholds of min_gap_lt, nats (an initializer) */
#define DRIFT_SHAPE_GAP_NATS {0.1, 0.5, 1.0}
#define DRIFT_SHAPE_TIE_NATS 0.1

typedef struct drift_answer_shape {
    size_t runs;              /* runs holding a row of this workload */
    size_t answers;           /* responses holding an answer */
    size_t failed;            /* failed requests (left out of every figure) */
    size_t n_len;             /* answers whose completion token count is known */
    double len_median, len_p10, len_p90; /* completion tokens; NAN when n_len is 0 */
    long len_max;             /* -1 when n_len is 0 */
    size_t cut;               /* answers cut by the token limit (finish_reason "length") */
    size_t no_logprobs;       /* answers stored without logprobs */
    size_t bad_logprobs;      /* answers whose logprobs do not read (malformed JSON) */
    size_t no_gap;            /* answers with logprobs but no token listing two alternatives */
    size_t with_gap;          /* answers with at least one gap: the gap figures' denominator */
    size_t min_gap_lt[DRIFT_SHAPE_N_GAPS]; /* of those, the ones whose smallest gap is below each threshold */
    size_t gap_tokens;        /* tokens with a gap, over the with_gap answers */
    size_t tie_tokens;        /* of those, the ones with a gap < DRIFT_SHAPE_TIE_NATS (near ties) */
} drift_answer_shape;

/* The shape of the answers of runs labels[0..n) in st, pooled per workload
 * into out (zeroed first; every replicate is an answer; a label the store
 * does not hold adds nothing; rows of prompts of no known workload are left
 * out). DRIFT_ERR_INVALID without st, out or labels (n > 0); the store's
 * error otherwise. */
struct drift_store;
DRIFT_API drift_status drift_answer_shape_runs(struct drift_store *st, const char *const *labels, size_t n,
                                               drift_answer_shape out[DRIFT_WL_COUNT], drift_error *err);

#ifdef __cplusplus
}
#endif
#endif
