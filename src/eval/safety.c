/* safety.c - placeholder until the guard evaluator lands (issue 5). */
#include <string.h>
#include "driftbench/eval.h"

char *drift_llamaguard_prompt(const char *user, const char *assistant) { (void)user; (void)assistant; return NULL; }

drift_status drift_llamaguard_parse(const char *reply, drift_eval_result *out, drift_error *err) {
    (void)reply;
    memset(out, 0, sizeof *out);
    out->label = DRIFT_LABEL_NONE;
    return drift_error_set(err, DRIFT_ERR_UNSUPPORTED, "safety guard not built yet");
}

drift_status drift_guard_open(const char *spec, drift_guard **out, drift_error *err) {
    (void)spec;
    *out = NULL;
    return drift_error_set(err, DRIFT_ERR_UNSUPPORTED, "safety guard not built yet");
}
const char *drift_guard_name(const drift_guard *g) { (void)g; return "none"; }
drift_status drift_guard_judge(drift_guard *g, const char *const *requests, const char *const *answers, size_t n,
                               drift_eval_result *out, drift_error *err) {
    (void)g; (void)requests; (void)answers; (void)n; (void)out;
    return drift_error_set(err, DRIFT_ERR_UNSUPPORTED, "safety guard not built yet");
}
void drift_guard_close(drift_guard *g) { (void)g; }
