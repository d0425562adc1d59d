/* fuzz_risk_logprobs.c - drift_risk_features_compute over arbitrary bytes
 * (stored logprobs come from servers: hostile input). Besides "no crash, no
 * leak": a parse is OK or DRIFT_ERR_PARSE with a message; on success the
 * features are consistent (counts in range, a margin >= 0 exactly when one
 * exists, its position inside the answer, entropy >= 0) and the score is in
 * (0, 1] or NAN with no margin. */
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
    drift_status rc = drift_risk_features_compute(s, &f, &err);
    free(s);
    if (rc != DRIFT_OK) {
        if (rc != DRIFT_ERR_PARSE || err.msg[0] == '\0') abort();
        return 0;
    }
    if (f.n_tokens < 0 || f.n_margin < 0 || f.n_margin > f.n_tokens) abort();
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
