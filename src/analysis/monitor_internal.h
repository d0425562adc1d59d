/* monitor_internal.h - the building blocks of the monitor (monitor.c),
 * each checked on its own by tests/unit/test_monitor.c (not public; anl_
 * is the analysis module's tier). */
#ifndef DRIFT_MONITOR_INTERNAL_H
#define DRIFT_MONITOR_INTERNAL_H

#include <stddef.h>

/* ROC AUC of scores against 0/1 labels (label 1 = positive), ties counted
 * half (Mann-Whitney). NAN when a class is empty. */
double anl_roc_auc(const double *score, const int *label, size_t n);
/* First Wasserstein distance between two 1-D empirical distributions with
 * equal weights (scipy.stats.wasserstein_distance). NAN if a side is empty. */
double anl_wasserstein1(const double *a, size_t na, const double *b, size_t nb);
/* Unbiased MMD^2 (Gretton et al.) of x (m x dim) and y (n x dim) with the
 * kernel exp(-gamma * ||u - v||^2); m, n >= 2. */
double anl_mmd2u_rbf(const float *x, size_t m, const float *y, size_t n, int dim, double gamma);

#endif
