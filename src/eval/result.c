/* result.c - the evaluator result shared by every evaluator (eval.h): a
 * label, a number and the evidence as a JSON object. */
#include <stdlib.h>
#include <string.h>

#include "driftbench/eval.h"

/* Frees detail_json and resets r to an unscored result; NULL-safe. */
void drift_eval_result_clear(drift_eval_result *r) {
    if (!r) return;
    free(r->detail_json);
    memset(r, 0, sizeof *r);
    r->label = DRIFT_LABEL_NONE;
}
