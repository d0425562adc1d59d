/* fuzz_suite.c - drift_suite_parse over arbitrary bytes (JSON Lines and CSV
 * suites). Besides "no crash, no leak", a successful parse must hold the
 * loader's invariants: at least one prompt, unique non-empty ids, a 16-hex
 * hash, a reference that is a JSON object, and every prompt renders for both
 * APIs. A failed parse must say what is wrong (non-empty message). */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/suite.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    drift_suite *s = NULL;
    drift_error err = {0};
    drift_status rc = drift_suite_parse("fuzz.jsonl", (const char *)data, size, &s, &err);
    if (rc != DRIFT_OK) {
        if (s || err.msg[0] == '\0' || err.code != rc) abort();
        return 0;
    }
    if (!s || s->n == 0 || !s->format || !s->name) abort();
    for (size_t i = 0; i < s->n; i++) {
        const drift_prompt *p = &s->prompts[i];
        if (!p->prompt_id || !*p->prompt_id || !p->input || !p->hash || strlen(p->hash) != 16) abort();
        if (p->workload < 0 || p->workload >= DRIFT_WL_COUNT) abort();
        json_t *ref = json_loads(p->reference_json, 0, NULL);
        if (!json_is_object(ref)) abort();
        json_decref(ref);
        for (size_t j = i + 1; j < s->n && j < i + 64; j++)
            if (strcmp(p->prompt_id, s->prompts[j].prompt_id) == 0) abort();
        for (int api = 0; api < 2; api++) {
            const char *tid = NULL;
            char *t = drift_prompt_render(p, (drift_api)api, &tid);
            if (!t || !tid) abort();
            free(t);
        }
    }
    drift_suite_free(s);
    return 0;
}
