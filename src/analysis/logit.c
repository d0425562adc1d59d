/* logit.c - prompt-level logistic model of flips with prompt-clustered
 * errors (analysis.h: drift_logit_cluster_fit). Work in progress. */
#include <stdlib.h>

#include "driftbench/analysis.h"

drift_status drift_logit_cluster_fit(const unsigned char *y, const int64_t *cluster, size_t n,
                                     const drift_logit_factor_in *factors, size_t n_factors, drift_logit_fit **out,
                                     drift_error *err) {
    (void)y; (void)cluster; (void)n; (void)factors; (void)n_factors;
    *out = NULL;
    return drift_error_set(err, DRIFT_ERR_UNSUPPORTED, "logistic model: not implemented yet");
}

void drift_logit_fit_free(drift_logit_fit *f) { free(f); }
