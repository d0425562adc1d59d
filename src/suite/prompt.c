/* prompt.c - the prompt content hash (prompt.h), the one place it
 * is computed: suite files, built-in suites and imported samples all call
 * it. A stored prompt's hash is what says "the same prompt": a run resumes,
 * a store merges, an import pairs only where the hashes agree. So the bytes
 * hashed never change; the built-in suites have always joined the three
 * fields with newlines and files and imports with NUL bytes, and each keeps
 * its layout, so that every store written before still matches. */
#include <string.h>

#include "suite/prompt.h"
#include "util/util.h"

char *suite_prompt_hash(drift_workload wl, const char *input, const char *reference_json, suite_hash_layout layout) {
    const char *w = drift_workload_name(wl);
    const char *in = input ? input : "", *ref = reference_json ? reference_json : "";
    char sep = layout == SUITE_HASH_LINES ? '\n' : '\0';
    util_buf hb = {0};
    if (buf_append(&hb, w, strlen(w)) || buf_append(&hb, &sep, 1) || buf_append(&hb, in, strlen(in)) ||
        buf_append(&hb, &sep, 1) || buf_append(&hb, ref, strlen(ref))) {
        buf_free(&hb);
        return NULL;
    }
    char hex[17];
    util_hash_hex(hb.data, hb.len, hex);
    buf_free(&hb);
    return util_strdup(hex);
}
