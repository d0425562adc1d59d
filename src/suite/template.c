/* template.c - prompt templates (skeleton; being implemented). */
#include "driftbench/suite.h"
#include "util/util.h"

char *drift_prompt_render(const drift_prompt *p, drift_api api, const char **template_id) {
    (void)api;
    if (template_id) *template_id = "raw/v0";
    return drift_strdup(p->input);
}
