/* fuzz_tokdiv.c - the token-divergence math and its renderers on hostile
 * numbers and text. Input: byte 0 = vocabulary size (1..64), byte 1 = the
 * forced token (may be out of range), then pairs of logit rows as raw
 * floats (NaN, infinities, huge values all possible), then the rest as a
 * token's text. Every position must give a KL that is NaN, +inf or >= 0,
 * probabilities in [0, 1] or NaN, top-1 ids in range (or -1 when a row has
 * no distribution); the summary's percentiles must be ordered; the three
 * renderings must come back (JSON that parses). */
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/divergence.h"
#include "util/util.h"

static void check_pos(const drift_tokdiv_pos *p, int nv) {
    if (!(isnan(p->kl) || p->kl >= 0)) abort();
    if (!isnan(p->p_base) && !(p->p_base >= 0 && p->p_base <= 1)) abort();
    if (!isnan(p->p_target) && !(p->p_target >= 0 && p->p_target <= 1)) abort();
    if (!isnan(p->kl) && (p->top_base < 0 || p->top_base >= nv || p->top_target < 0 || p->top_target >= nv)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    int nv = 1 + data[0] % 64;
    int32_t tok = (int32_t)data[1] - 8;
    size_t row = (size_t)nv * sizeof(float);
    const uint8_t *q = data + 2;
    size_t left = size - 2;
    float *b = malloc(row), *t = malloc(row);
    drift_tokdiv_acc acc = {0};
    drift_error err = {0};
    drift_tokdiv_pos first = {NAN, NAN, NAN, -1, -1, NAN, NAN};
    int have_first = 0;
    while (left >= 2 * row) {
        memcpy(b, q, row);
        memcpy(t, q + row, row);
        q += 2 * row;
        left -= 2 * row;
        drift_tokdiv_pos p = drift_tokdiv_compare(b, t, nv, tok);
        check_pos(&p, nv);
        drift_tokdiv_pos same = drift_tokdiv_compare(b, b, nv, tok);
        if (!isnan(same.kl) && same.kl != 0) abort(); /* a row against itself: exactly 0 */
        if (drift_tokdiv_acc_add(&acc, &p, &err)) abort();
        if (!have_first && !isnan(p.kl) && p.top_base != p.top_target) {
            first = p;
            have_first = 1;
        }
    }
    drift_tokdiv_summary s;
    if (drift_tokdiv_acc_summary(&acc, &s, &err)) abort();
    if (s.n + s.n_nonfinite != acc.n + acc.n_nonfinite) abort();
    if (s.n > 0 && !(s.kl_p50 <= s.kl_p90 && s.kl_p90 <= s.kl_p99 && s.kl_p99 <= s.kl_max)) abort();
    if (s.n > 0 && !(s.dp_min <= s.dp_p50 && s.dp_p50 <= s.dp_max && s.same_top >= 0 && s.same_top <= 1)) abort();
    /* a report around it, with the rest of the input as a token's text */
    drift_tokdiv_prompt pr;
    memset(&pr, 0, sizeof pr);
    pr.prompt_id = util_utf8_clean((const char *)q, left);
    pr.workload = (drift_workload)(data[0] % DRIFT_WL_COUNT);
    pr.n_answer_tokens = (int)s.n;
    pr.s = s;
    pr.first_diff = have_first ? 0 : -1;
    pr.first_base_id = first.top_base;
    pr.first_target_id = first.top_target;
    pr.first_base_text = have_first ? util_utf8_clean((const char *)q, left) : NULL;
    pr.first_target_text = have_first ? util_strdup("|`\"\\\n") : NULL;
    drift_tokdiv_report r;
    memset(&r, 0, sizeof r);
    r.text_mode = data[1] & 1;
    r.baseline = "b";
    r.target = "t";
    r.ctx = 8;
    r.prompts = &pr;
    r.n_prompts = 1;
    r.present[pr.workload] = 1;
    r.wl[pr.workload] = s;
    r.overall = s;
    for (int fmt = 0; fmt < 3; fmt++) {
        char *out = NULL;
        if (drift_tokdiv_render(&r, fmt, 5, &out, &err) || !out) abort();
        if (fmt == 1) {
            json_t *j = json_loads(out, 0, NULL);
            if (!j) abort();
            json_decref(j);
        }
        free(out);
    }
    free(pr.prompt_id);
    free(pr.first_base_text);
    free(pr.first_target_text);
    drift_tokdiv_acc_clear(&acc);
    free(b);
    free(t);
    return 0;
}
