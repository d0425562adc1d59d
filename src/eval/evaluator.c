/* evaluator.c - the evaluator method table (evaluator.h): which evaluator
 * judges each workload's answers, one row per workload in designated
 * initialisers; each method lives in its evaluator's file. */
#include "eval/evaluator.h"

#include <stddef.h>

static const eval_method *const METHODS[DRIFT_WL_COUNT] = {
    [DRIFT_WL_MATH] = &eval_math_method,
    [DRIFT_WL_CODE] = &eval_code_method,
    [DRIFT_WL_SAFETY] = &eval_safety_method,
    [DRIFT_WL_CHAT] = &eval_chat_method,
    [DRIFT_WL_LONG] = &eval_longctx_method,
};

const eval_method *eval_method_of(drift_workload wl) {
    if ((int)wl < 0 || wl >= DRIFT_WL_COUNT) return NULL;
    return METHODS[wl];
}

const char *eval_method_name(const eval_method *m, const void *state) {
    if (!m) return NULL;
    if (m->name) return m->name;
    return state && m->state_name ? m->state_name(state) : NULL;
}
