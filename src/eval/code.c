/* code.c - placeholder until the sandboxed code evaluator lands (issue 5). */
#include <string.h>
#include "driftbench/eval.h"

void drift_code_opts_default(drift_code_opts *o) {
    memset(o, 0, sizeof *o);
    o->python = "/usr/bin/python3";
    o->timeout_s = 10;
    o->cpu_s = 10;
    o->mem_mb = 1024;
}

drift_status drift_sandbox_check(const drift_code_opts *o, char *mechanism, size_t cap, drift_error *err) {
    (void)o;
    if (cap) mechanism[0] = '\0';
    return drift_error_set(err, DRIFT_ERR_UNSUPPORTED, "code evaluator not built yet");
}

drift_status drift_eval_code(const char *answer, const char *reference_json, const drift_code_opts *o,
                             drift_eval_result *out, drift_error *err) {
    (void)answer; (void)reference_json; (void)o;
    memset(out, 0, sizeof *out);
    out->label = DRIFT_LABEL_NONE;
    return drift_error_set(err, DRIFT_ERR_UNSUPPORTED, "code evaluator not built yet");
}
