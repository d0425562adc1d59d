/* loaders.c - suite loaders (skeleton; being implemented). */
#include "driftbench/suite.h"

#include <stdlib.h>
#include <string.h>

drift_status drift_suite_parse(const char *name, const char *data, size_t len, drift_suite **out,
                               drift_error *err) {
    (void)data; (void)len;
    *out = NULL;
    return drift_error_set(err, DRIFT_ERR_UNSUPPORTED, "%s: suite loading not implemented yet", name);
}

drift_status drift_suite_load(const char *spec, drift_suite **out, drift_error *err) {
    *out = NULL;
    if (strncmp(spec, "builtin:", 8) == 0) return drift_suite_builtin(spec, out, err);
    return drift_error_set(err, DRIFT_ERR_UNSUPPORTED, "%s: suite loading not implemented yet", spec);
}

void drift_suite_free(drift_suite *suite) {
    if (!suite) return;
    for (size_t i = 0; i < suite->n; i++) {
        free(suite->prompts[i].prompt_id);
        free(suite->prompts[i].input);
        free(suite->prompts[i].reference_json);
        free(suite->prompts[i].hash);
    }
    free(suite->prompts);
    free(suite->name);
    free(suite->source);
    free(suite->format);
    free(suite);
}
