/* types.c - the vocabulary of types.h that is more than a name: the
 * decoding defaults, the failure causes' names and freeing an answer
 * record. It lives in util/, the bottom layer, beside workload.c (the
 * workload and dimension names), because every module speaks this
 * vocabulary: the store reads answers back, the pipeline asks targets, the
 * server answers, analysis counts failures by cause. Implemented here, none
 * of them reaches up into engine/ for it. */
#include "driftbench/types.h"

#include <stdlib.h>
#include <string.h>

void drift_gen_params_default(drift_gen_params *p) {
    if (!p) return;
    memset(p, 0, sizeof *p);
    p->temperature = 0.0;
    p->top_p = 1.0;
    p->top_k = 0;
    p->seed = 42;
    p->max_tokens = 512;
    p->logprobs = 0;
    p->stop = NULL;
    p->n_stop = 0;
}

/* See types.h. */
void drift_answer_clear(drift_answer *r) {
    if (!r) return;
    free(r->text);
    free(r->finish_reason);
    free(r->logprobs_json);
    free(r->error);
    memset(r, 0, sizeof *r);
    r->prompt_tokens = -1;
    r->completion_tokens = -1;
}

/* See types.h: indexed by drift_fail_cause. */
static const char *const fail_cause_names[DRIFT_FAIL_COUNT] = {
    [DRIFT_FAIL_NONE] = "no failure",
    [DRIFT_FAIL_OTHER] = "other failure",
    [DRIFT_FAIL_CONNECT] = "could not connect",
    [DRIFT_FAIL_TIMEOUT] = "timeout",
    [DRIFT_FAIL_TLS] = "TLS",
    [DRIFT_FAIL_HTTP] = "HTTP",
    [DRIFT_FAIL_REPLY] = "bad reply",
    [DRIFT_FAIL_LOST] = "connection lost",
    [DRIFT_FAIL_REQUEST] = "request not sent",
    [DRIFT_FAIL_ENGINE] = "engine error",
};

const char *drift_fail_cause_name(drift_fail_cause cause) {
    if ((int)cause < 0 || cause >= DRIFT_FAIL_COUNT) return "unknown cause";
    return fail_cause_names[cause];
}
