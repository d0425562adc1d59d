/* http.c - OpenAI-compatible HTTP target (skeleton; full client follows). */
#include <stdlib.h>
#include <string.h>

#include "engine/target_impl.h"
#include "util/util.h"

static drift_status http_generate(drift_target *t, const drift_gen_request *reqs, size_t n,
                                  const drift_gen_params *params, drift_result_fn cb, void *user,
                                  drift_error *err) {
    return drift_error_set(err, DRIFT_ERR_UNSUPPORTED, "http target: not implemented yet");
}

static void http_close(drift_target *t) { (void)t; }

static const drift_target_vtable http_vt = {"http", http_generate, NULL, http_close};

drift_status drift_http_target_open(drift_target *t, const char *spec, drift_error *err) {
    if (!strstr(spec, "model=")) return drift_error_set(err, DRIFT_ERR_INVALID, "target '%s': no model= parameter", spec);
    t->vt = &http_vt;
    t->api = strstr(spec, "api=chat") ? DRIFT_API_CHAT : DRIFT_API_COMPLETIONS;
    return DRIFT_OK;
}
