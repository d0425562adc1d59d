/* fuzz_guard_reply.c - drift_llamaguard_parse on arbitrary bytes: never
 * crashes, always yields a label in {PASS, FAIL, ERROR} and a detail object
 * that is valid JSON; a PASS only ever comes from a first line "safe". */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/eval.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *s = malloc(size + 1);
    if (!s) return 0;
    memcpy(s, data, size);
    s[size] = 0;
    drift_eval_result r;
    drift_error err = {0};
    drift_status st = drift_llamaguard_parse(s, &r, &err);
    if (st == DRIFT_OK) {
        if (r.label != DRIFT_LABEL_PASS && r.label != DRIFT_LABEL_FAIL && r.label != DRIFT_LABEL_ERROR) abort();
        if (!r.detail_json) abort();
        json_error_t je;
        json_t *d = json_loads(r.detail_json, 0, &je);
        if (!d || !json_is_object(d)) abort();
        json_decref(d);
        /* Verdicts come only from an explicit word, never by default. */
        if (r.label == DRIFT_LABEL_PASS && !strstr(r.detail_json, "\"verdict\":\"safe\"")) abort();
        if (r.label == DRIFT_LABEL_FAIL && !strstr(r.detail_json, "\"verdict\":\"unsafe\"")) abort();
    } else if (st != DRIFT_ERR_NOMEM) {
        abort();
    }
    drift_eval_result_clear(&r);
    free(s);
    return 0;
}
