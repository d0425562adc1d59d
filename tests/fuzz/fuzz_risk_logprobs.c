/* fuzz_risk_logprobs.c - drift_risk_features_for over arbitrary bytes
 * (stored logprobs come from servers: hostile input). Besides "no crash, no
 * leak": a parse is OK or DRIFT_ERR_PARSE with a message; on success the
 * features are consistent (counts in range, a margin >= 0 exactly when one
 * exists, its position inside the answer, entropy >= 0) and the score is in
 * (0, 1] or NAN with no margin. The workload (its critical region) is the
 * input's length mod 6 (5 = none): the region lies inside the answer, its
 * margin is >= the answer's smallest, the inputs of the fitted model are
 * finite exactly when there is a margin. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/compare.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *s = malloc(size + 1);
    if (!s) return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    drift_risk_features f;
    drift_error err = {0};
    int w = (int)(size % 6);
    drift_workload wl = w == 5 ? DRIFT_WL_UNKNOWN : (drift_workload)w;
    drift_status rc = drift_risk_features_for(s, wl, &f, &err);
    free(s);
    if (rc != DRIFT_OK) {
        if (rc != DRIFT_ERR_PARSE || err.msg[0] == '\0') abort();
        return 0;
    }
    if (f.n_tokens < 0 || f.n_margin < 0 || f.n_margin > f.n_tokens || f.n_near > f.n_margin) abort();
    if (f.region_found) {
        if (f.region_lo < 0 || f.region_lo >= f.region_hi || f.region_hi > f.n_tokens) abort();
        if (!isnan(f.region_margin) && !(f.region_margin >= f.min_margin)) abort();
    } else if (f.region_lo || f.region_hi || f.min_in_region || !isnan(f.region_margin)) {
        abort();
    }
    double x[DRIFT_RISK_NX];
    if ((drift_risk_x(&f, x) == 0) != (f.n_margin > 0)) abort();
    for (int j = 0; f.n_margin > 0 && j < DRIFT_RISK_NX; j++)
        if (!isfinite(x[j])) abort();
    double score = drift_risk_score(&f);
    if (f.n_margin == 0) {
        if (!isnan(f.min_margin) || f.min_margin_pos != -1 || !isnan(score)) abort();
    } else {
        if (!(f.min_margin >= 0) || f.min_margin_pos < 0 || f.min_margin_pos >= f.n_tokens) abort();
        if (!(f.min_margin_frac >= 0 && f.min_margin_frac < 1)) abort();
        if (!(score > 0 && score <= 1)) abort();
        if (!(f.mean_entropy >= 0) && !isnan(f.mean_entropy)) abort();
    }
    return 0;
}
