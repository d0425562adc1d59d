/* analysis_internal.h - helpers shared by anova.c and the PRI (pri_eval.c),
 * the beta quantile of stats.c and gate.c, and the token margin that risk.c
 * and answer_shape.c read from stored logprobs (not public).
 * Matrices are column-major: X[j * n + i] is row i, column j. */
#ifndef DRIFT_ANALYSIS_INTERNAL_H
#define DRIFT_ANALYSIS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include "driftbench/status.h"

/* Sequential (Type I) least squares by Householder QR without pivoting,
 * skipping columns that the earlier ones already span: a column is
 * dependent when the part of it left after the earlier reflections has
 * norm <= 1e-9 * its own norm (zero columns are always dependent).
 * X (n, p), y (n). Outputs: indep (p) 1/0, eff2 (p) squared effect of each
 * column (0 for dependent ones; the Type I SS of a column given the earlier
 * ones), *rank, *ssr (residual sum of squares). Any output may be NULL. */
drift_status anl_qr_sequential(const double *X, size_t n, size_t p, const double *y, int *indep,
                               double *eff2, size_t *rank, double *ssr, drift_error *err);

/* Minimum-norm least squares by SVD, as statsmodels' OLS (pinv):
 * beta (p) = pinv(X) y; covu (p, p) = pinv(X'X) (may be NULL);
 * *rank = numpy.linalg.matrix_rank's count (s > s_max * max(n,p) * eps).
 * Singular values at or below that tolerance are treated as zero (statsmodels
 * cuts at 1e-15 * s_max, which inverts rounding noise on designs with exact
 * dependencies; the results agree wherever statsmodels is stable). */
drift_status anl_pinv_fit(const double *X, size_t n, size_t p, const double *y, double *beta,
                          double *covu, size_t *rank, drift_error *err);

/* Wald statistic for H0: beta[cols] = 0 with covariance cov (p, p):
 * *W = b' pinv(C) b, C = cov[cols, cols]; *J = matrix_rank(C). */
drift_status anl_wald(const double *beta, const double *cov, size_t p, const size_t *cols, size_t k,
                      double *W, size_t *J, drift_error *err);

/* The p-quantile of the Beta(a, b) distribution (a, b > 0, real), by
 * bisection on gsl_cdf_beta_P; 0 for p <= 0, 1 for p >= 1. Never calls
 * the GSL error handler on the inputs the gate meets (see stats.c). */
double anl_beta_quantile(double p, double a, double b);

/* The bootstrap options with defaults applied (drift_boot_opts_init;
 * resamples >= 200, level in (0, 1)); o may be NULL. */
struct drift_boot_opts;
void anl_boot_resolve(const struct drift_boot_opts *o, int *resamples, uint64_t *seed, double *level);

/* The q-quantile of sorted v (n > 0; NAN when n == 0), linear between order
 * statistics (numpy's default); an infinite neighbour is taken as is. */
double anl_quantile_sorted(const double *v, size_t n, double q);

/* Sorts v (n) and sets [*lo, *hi] to its (1-level)/2 and (1+level)/2 quantiles. */
void anl_percentile_ci(double *v, size_t n, double level, double *lo, double *hi);

/* ---- stored logprobs (risk.c) ----
 * The array that the engines store for an answer, one element per generated
 * token: [{"token":..,"logprob":..,"top":[{"token":..,"logprob":..}..]}..]. */
struct json_t;

/* Parses a stored logprobs array: *root (the caller json_decref's it) and
 * its *n elements. DRIFT_ERR_PARSE, *root NULL, when the text is not JSON
 * ("logprobs: line L column C: ...") or not an array. */
drift_status anl_logprobs_load(const char *json, struct json_t **root, size_t *n, drift_error *err);

/* One token's two best alternatives: the n_top entries of its "top" list,
 * the largest two logprobs (-INFINITY where fewer) and margin = best - second
 * in nats, the closeness of the greedy decision (NAN with fewer than two). */
typedef struct anl_top2 {
    size_t n_top;
    double best, second, margin;
} anl_top2;

/* Reads element i (elem) of a stored logprobs array into *out; a missing or
 * null "top" lists nothing. DRIFT_ERR_PARSE, naming element i (and the
 * entry), when elem is not an object, "top" is not an array or an entry
 * has no finite numeric "logprob"; err may be NULL. */
drift_status anl_logprob_top2(const struct json_t *elem, size_t i, anl_top2 *out, drift_error *err);

#endif
