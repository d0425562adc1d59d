/* fuzz_markers.c - drift_markers_neutralise on arbitrary bytes (the first
 * byte picks the marker sets): never crashes; only U+200B is inserted (the
 * input is the output with some U+200B removed, three bytes per marker
 * found); the output is a fixed point (neutralising it again changes
 * nothing, so it holds no marker); and the LlamaGuard prompt built from the
 * bytes holds the template's markers once each. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/eval.h"
#include "driftbench/model.h"

static int count_of(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    unsigned sets = 1u + data[0] % 7u;
    const char *text = (const char *)data + 1;
    size_t n = size - 1, on = 0, tn = 0;
    char *out = drift_markers_neutralise(text, n, sets, &on);
    if (!out) return 0;
    /* the output minus inserted U+200B is the input: walk both */
    size_t i = 0, k = 0;
    while (k < on) {
        if (i < n && out[k] == text[i]) {
            i++;
            k++;
        } else if (k + 3 <= on && !memcmp(out + k, "\xe2\x80\x8b", 3)) {
            k += 3;
        } else {
            abort();
        }
    }
    if (i != n || (on - n) % 3) abort();
    char *twice = drift_markers_neutralise(out, on, sets, &tn);
    if (!twice) {
        free(out);
        return 0;
    }
    if (tn != on || memcmp(twice, out, on)) abort();
    free(twice);
    free(out);
    /* the guard's prompt from the bytes (up to the first NUL) as request and answer */
    char *s = malloc(n + 1);
    if (!s) return 0;
    memcpy(s, text, n);
    s[n] = 0;
    char *p = drift_llamaguard_prompt(s, s);
    if (p) {
        if (count_of(p, "<|eot_id|>") != 1 || count_of(p, "<BEGIN CONVERSATION>") != 1 ||
            count_of(p, "<END CONVERSATION>") != 1 || count_of(p, "\nAgent:") != 1)
            abort();
        free(p);
    }
    free(s);
    return 0;
}
