/* fuzz_import_check.h - what every import fuzzer asserts about a parse
 * (shared by fuzz_import_lmeval.c and fuzz_import_promptfoo.c): a failure
 * has a message, its code and no set; a success holds at least one run of
 * at least one sample, unique prompt ids per run, 16-hex hashes, an object
 * as reference, an answer or an error (never both), a label the store
 * accepts, identifiers that are valid UTF-8 (prompt ids, label, suite,
 * evaluator, model: a PostgreSQL store takes nothing else), the file's size
 * and hash, and a run pairs with itself. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/import.h"

/* 1 when s is valid UTF-8 (its own check, not the importer's). */
static int fuzz_utf8_ok(const char *s) {
    const unsigned char *u = (const unsigned char *)s;
    while (*u) {
        int need = *u < 0x80 ? 1 : (*u >= 0xC2 && *u <= 0xDF) ? 2 : (*u >= 0xE0 && *u <= 0xEF) ? 3
                                                                : (*u >= 0xF0 && *u <= 0xF4) ? 4 : 0;
        if (!need) return 0;
        for (int i = 1; i < need; i++)
            if ((u[i] & 0xC0) != 0x80) return 0;
        if ((u[0] == 0xE0 && u[1] < 0xA0) || (u[0] == 0xED && u[1] > 0x9F) || (u[0] == 0xF0 && u[1] < 0x90) ||
            (u[0] == 0xF4 && u[1] > 0x8F))
            return 0; /* overlong, surrogate, past U+10FFFF */
        u += need;
    }
    return 1;
}

static void fuzz_import_check(drift_status rc, drift_import_set *s, const drift_error *err) {
    if (rc != DRIFT_OK) {
        if (s || err->msg[0] == '\0' || err->code != rc) abort();
        return;
    }
    if (!s || s->n == 0 || strlen(s->file_hash) != 16) abort();
    for (size_t k = 0; k < s->n; k++) {
        const drift_import_run *r = &s->runs[k];
        if (r->n == 0 || !r->label || !*r->label || !r->suite || !r->evaluator || !r->decoding_json) abort();
        if (!fuzz_utf8_ok(r->label) || !fuzz_utf8_ok(r->suite) || !fuzz_utf8_ok(r->evaluator) ||
            (r->model && !fuzz_utf8_ok(r->model)))
            abort();
        for (size_t i = 0; i < r->n; i++) {
            const drift_import_sample *p = &r->samples[i];
            if (!p->prompt_id || !*p->prompt_id || !p->input || !p->hash || strlen(p->hash) != 16) abort();
            if (!fuzz_utf8_ok(p->prompt_id)) abort();
            if (p->workload < 0 || p->workload >= DRIFT_WL_COUNT) abort();
            if (!p->answer == !p->error) abort();
            if (p->answer && p->verdict != DRIFT_LABEL_PASS && p->verdict != DRIFT_LABEL_FAIL) abort();
            json_t *ref = json_loads(p->reference_json, 0, NULL);
            if (!json_is_object(ref)) abort();
            json_decref(ref);
            for (size_t j = i + 1; j < r->n && j < i + 64; j++)
                if (!strcmp(p->prompt_id, r->samples[j].prompt_id)) abort();
        }
        drift_error e = {0};
        if (drift_import_check_pair(r, r, &e) != DRIFT_OK) abort();
    }
    drift_import_set_free(s);
}
