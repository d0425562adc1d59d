/* test_github.c - `compare --format github` (github_render.c) on
 * hand-built comparisons: which workloads get ::error and ::warning, the
 * escaping of workflow commands (a decoder here undoes it and must give the
 * hostile labels and prompt ids back), every annotation one line, and the
 * summary fenced by ::stop-commands:: with a token that is not in it, so a
 * model's "::error::" line inside the summary is never a command. And (issue
 * 34) the summary is compare's Markdown, which went through the sanitiser:
 * with labels, ids, a server error and answers at their worst, it passes
 * hostile.h's check on its own, in the step-summary file and inside the
 * fence. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/report.h"
#include "unit/hostile.h"

/* The runner's unescaping of a message (property = 0) or property value. */
static char *gh_unescape(const char *s, size_t n, int property) {
    char *out = malloc(n + 1);
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '%') {
            const char *codes[] = {"%25", "%0D", "%0A", "%3A", "%2C"};
            const char vals[] = {'%', '\r', '\n', ':', ','};
            int hit = -1;
            for (int k = 0; k < (property ? 5 : 3); k++)
                if (i + 3 <= n && !strncmp(s + i, codes[k], 3)) hit = k;
            if (hit >= 0) {
                out[j++] = vals[hit];
                i += 2;
                continue;
            }
        }
        out[j++] = s[i];
    }
    out[j] = 0;
    return out;
}

typedef struct annot {
    char level[16];
    char *title;   /* unescaped */
    char *message; /* unescaped */
} annot;

/* Parses "::LEVEL title=T::MSG" lines before the ::stop-commands:: line;
 * returns the count, fails on a line that is neither. */
static int parse_annots(const char *s, annot *a, int cap, const char **fence) {
    int n = 0;
    *fence = NULL;
    while (*s) {
        const char *eol = strchr(s, '\n');
        assert_non_null(eol);
        if (!strncmp(s, "::stop-commands::", 17)) {
            *fence = s;
            return n;
        }
        assert_true(n < cap);
        assert_true(s[0] == ':' && s[1] == ':');
        const char *sp = strchr(s + 2, ' ');
        assert_true(sp && sp < eol);
        size_t ll = (size_t)(sp - s - 2);
        assert_true(ll < sizeof a[n].level);
        memcpy(a[n].level, s + 2, ll);
        a[n].level[ll] = 0;
        assert_true(!strncmp(sp, " title=", 7));
        const char *t = sp + 7, *sep = strstr(t, "::");
        assert_true(sep && sep < eol);
        a[n].title = gh_unescape(t, (size_t)(sep - t), 1);
        a[n].message = gh_unescape(sep + 2, (size_t)(eol - sep - 2), 0);
        n++;
        s = eol + 1;
    }
    return n;
}

static void annots_free(annot *a, int n) {
    for (int i = 0; i < n; i++) {
        free(a[i].title);
        free(a[i].message);
    }
}

static void test_parse(void **state) {
    (void)state;
    drift_format f = DRIFT_FORMAT_TEXT;
    drift_error err = {0};
    assert_int_equal(drift_format_parse("github", &f, &err), DRIFT_OK);
    assert_int_equal(f, DRIFT_FORMAT_GITHUB);
    assert_int_equal(drift_format_parse("GitHub", &f, &err), DRIFT_OK);
    assert_int_equal(f, DRIFT_FORMAT_GITHUB);
    assert_int_equal(drift_format_parse("gitlab", &f, &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "github"));
}

#define HOSTILE_BASE "h100%25 a,b:c\r\n::error::pwned"
#define HOSTILE_ID "m1\n::stop-commands::x\n%0A"

static void fill(drift_comparison *c, drift_flip *fl, drift_sandbox_use *sb) {
    memset(c, 0, sizeof *c);
    c->baseline.label = (char *)HOSTILE_BASE;
    c->target.label = (char *)"b200\x01:fp8";
    c->baseline.config_json = c->target.config_json = (char *)"{}";
    c->present[DRIFT_WL_MATH] = c->present[DRIFT_WL_CODE] = c->present[DRIFT_WL_SAFETY] = 1;
    c->present[DRIFT_WL_CHAT] = 1;
    fl[0] = (drift_flip){.prompt_id = HOSTILE_ID, .direction = -1};
    for (int i = 1; i < 8; i++) fl[i] = (drift_flip){.prompt_id = "mx", .direction = 1};
    /* math: over budget, 8 flips listed (5 named, "3 more") */
    c->wl[DRIFT_WL_MATH] = (drift_wl_result){.workload = DRIFT_WL_MATH, .n = 100, .flips = 8, .flip_rate = 0.08,
                                             .ci95 = {0.04, 0.15}, .budget = 0.01, .pass = 0, .flipped = fl,
                                             .n_flipped = 8, .mcnemar_p = 0.5, .sdr_mean = NAN,
                                             .semantic_drift_rate = NAN};
    /* code: within budget, CI over it, and 2 pairs with errors */
    c->wl[DRIFT_WL_CODE] = (drift_wl_result){.workload = DRIFT_WL_CODE, .n = 50, .errors = 2, .flips = 0,
                                             .ci95 = {0, 0.071}, .budget = 0.005, .pass = 1, .mcnemar_p = 1,
                                             .sdr_mean = NAN, .semantic_drift_rate = NAN};
    /* safety: within budget and sure of it */
    c->wl[DRIFT_WL_SAFETY] = (drift_wl_result){.workload = DRIFT_WL_SAFETY, .n = 5000, .ci95 = {0, 0.0008},
                                               .budget = 0.01, .pass = 1, .mcnemar_p = 1, .sdr_mean = NAN,
                                               .semantic_drift_rate = NAN};
    /* chat: no budget, flips: nothing to say */
    c->wl[DRIFT_WL_CHAT] = (drift_wl_result){.workload = DRIFT_WL_CHAT, .n = 10, .flips = 3, .flip_rate = 0.3,
                                             .ci95 = {0.1, 0.6}, .budget = -1, .pass = 1, .mcnemar_p = NAN,
                                             .sdr_mean = 0.2, .semantic_drift_rate = 0.3};
    c->rule = DRIFT_DECIDE_INTERVAL;
    c->max_left_out = 0.05;
    drift_comparison_decide(c); /* math BLOCK, code INCONCLUSIVE, safety DEPLOY, chat not gated */
    sb[0] = (drift_sandbox_use){.mechanism = "none (unsafe)", .baseline = 50, .target = 50, .weak = 1};
    c->sandboxes[0] = sb[0];
    c->n_sandboxes = 1;
}

static void test_annotations(void **state) {
    (void)state;
    drift_comparison c;
    drift_flip fl[8];
    drift_sandbox_use sb[1];
    fill(&c, fl, sb);
    char *s = NULL, *sum = NULL;
    drift_error err = {0};
    assert_int_equal(drift_github_render(&c, NULL, &s, &sum, &err), DRIFT_OK);
    annot a[16];
    const char *fence = NULL;
    int n = parse_annots(s, a, 16, &fence);
    assert_non_null(fence);
    /* the verdict first (error: BLOCK); math error; code: INCONCLUSIVE
     * warning + errors warning; sandbox warning */
    assert_int_equal(n, 5);
    assert_string_equal(a[0].level, "error");
    assert_string_equal(a[1].level, "error");
    assert_string_equal(a[2].level, "warning");
    assert_string_equal(a[3].level, "warning");
    assert_string_equal(a[4].level, "warning");
    /* the title gives the labels back, control characters as spaces */
    assert_string_equal(a[0].title, "DriftBench verdict (" HOSTILE_BASE " -> b200 :fp8)");
    assert_string_equal(a[1].title, "DriftBench math (" HOSTILE_BASE " -> b200 :fp8)");
    assert_string_equal(a[4].title, "DriftBench code sandbox (" HOSTILE_BASE " -> b200 :fp8)");
    assert_non_null(strstr(a[0].message, "verdict: BLOCK (exit 1): math 8.00% over budget 1.00%\nrule: interval"));
    assert_non_null(strstr(a[1].message, "math BLOCK: 8 of 100 flipped: 8.00%, exact 95% CI [3.52%, 15.16%], all over "
                                         "the budget 1.00%"));
    assert_non_null(strstr(a[1].message, "\n  " HOSTILE_ID " (correct->incorrect)\n"));
    assert_non_null(strstr(a[1].message, "\n  ... 3 more"));
    assert_non_null(strstr(a[2].message, "code INCONCLUSIVE: 0 of 50 flipped: 0.00%, exact 95% CI [0.00%, 7.11%], "
                                         "straddles the budget 0.50%: about 686 more prompts"));
    assert_non_null(strstr(a[3].message, "code: 2 pair(s) left out"));
    assert_non_null(strstr(a[4].message, "none (unsafe) (baseline 50, target 50)"));
    annots_free(a, n);
    /* raw: no property ':' or ',' unescaped inside titles; '%' always escaped */
    assert_non_null(strstr(s, "title=DriftBench math (h100%2525 a%2Cb%3Ac%0D%0A%3A%3Aerror%3A%3Apwned -> b200 %3Afp8)::"));
    /* the fence: the summary between ::stop-commands::TOKEN and ::TOKEN::, the token not in it */
    char token[64];
    assert_int_equal(sscanf(fence, "::stop-commands::%63[^\n]", token), 1);
    assert_true(strlen(token) >= 16);
    assert_null(strstr(sum, token));
    const char *body = strchr(fence, '\n') + 1;
    assert_true(!strncmp(body, sum, strlen(sum)));
    char end[80];
    snprintf(end, sizeof end, "::%s::\n", token);
    const char *tail = body + strlen(sum);
    assert_string_equal(tail, end);
    /* the summary is compare's markdown */
    char *md = NULL;
    assert_int_equal(drift_comparison_render(&c, NULL, DRIFT_FORMAT_MARKDOWN, &md, &err), DRIFT_OK);
    assert_string_equal(md, sum);
    free(md);
    /* drift_comparison_render with GITHUB gives the same output */
    char *s2 = NULL;
    assert_int_equal(drift_comparison_render(&c, NULL, DRIFT_FORMAT_GITHUB, &s2, &err), DRIFT_OK);
    assert_string_equal(s, s2);
    free(s2);
    free(s);
    free(sum);
}

/* A model's answer with workflow commands in it, quoted in the summary:
 * its lines stay inside the fence. */
static void test_fenced_model_text(void **state) {
    (void)state;
    drift_comparison c;
    drift_flip fl[8];
    drift_sandbox_use sb[1];
    fill(&c, fl, sb);
    drift_flip_detail det = {.div = {0}, .base_text = "fine", .targ_text = "::error::x\n::stop-commands::\n::add-mask::y"};
    det.div.diff = (char *)"-fine\n::error::injected\n::add-mask::y";
    det.div.margin = det.div.kl = NAN;
    drift_comparison_details d = {0};
    d.flips[DRIFT_WL_MATH] = &det;
    d.n[DRIFT_WL_MATH] = 1;
    char *s = NULL;
    drift_error err = {0};
    assert_int_equal(drift_github_render(&c, &d, &s, NULL, &err), DRIFT_OK);
    annot a[16];
    const char *fence = NULL;
    int n = parse_annots(s, a, 16, &fence);
    annots_free(a, n);
    assert_non_null(fence);
    char token[64], end[80];
    assert_int_equal(sscanf(fence, "::stop-commands::%63[^\n]", token), 1);
    snprintf(end, sizeof end, "\n::%s::\n", token);
    const char *close = strstr(fence, end);
    assert_non_null(close);
    assert_int_equal((int)strlen(close), (int)strlen(end)); /* the last line */
    /* the model's text is inside the fence, and (since the Markdown goes
     * through the sanitiser, issue 34) its lines are no lines of their
     * own: its newlines are visible escapes, a "::" that would start a
     * line is broken; so nothing is left for the fence to hold back */
    const char *hit = strstr(s, "diff: -fine\\n::error::injected\\n::add-mask::y\n");
    assert_non_null(hit);
    assert_true(hit > fence && hit < close);
    hit = strstr(s, "\"\\x3a:error::x ::stop-commands:: ::add-mask::y\"");
    assert_non_null(hit);
    assert_true(hit > fence && hit < close);
    assert_null(strstr(s, "\n::error::injected"));
    assert_null(strstr(s, "\n::add-mask::y"));
    assert_null(strstr(s, "\n::error::x"));
    free(s);
}

/* Hostile labels, ids, a server error and answers: the summary and the
 * fenced part of the output are safe to print as they are. */
static void test_hostile_summary(void **state) {
    (void)state;
    drift_comparison c;
    drift_flip fl[8];
    drift_sandbox_use sb[1];
    fill(&c, fl, sb);
    c.baseline.label = (char *)"base" HOSTILE;
    c.target.label = (char *)"targ" HOSTILE;
    fl[0].prompt_id = "p" HOSTILE;
    fl[1].prompt_id = "q\xff\xfe" HOSTILE_FORMULA;
    drift_flip_detail det[2];
    memset(det, 0, sizeof det);
    det[0] = (drift_flip_detail){.base_text = "fine", .targ_text = HOSTILE};
    det[0].div.diff = (char *)"[-fine-] {+" HOSTILE "+}";
    det[0].div.margin = det[0].div.kl = NAN;
    det[1].div.error = (char *)"HTTP 500: " HOSTILE;
    drift_comparison_details d = {0};
    d.flips[DRIFT_WL_MATH] = det;
    d.n[DRIFT_WL_MATH] = 2;
    char *s = NULL, *sum = NULL;
    drift_error err = {0};
    assert_int_equal(drift_github_render(&c, &d, &s, &sum, &err), DRIFT_OK);
    const char *why = hostile_check(sum, strlen(sum), 1);
    if (why) fail_msg("the step summary: %s", why);
    const char *fence = strstr(s, "\n::stop-commands::");
    assert_non_null(fence);
    const char *body = strchr(fence + 1, '\n') + 1;
    const char *close = strrchr(s, '\n');
    while (close > body && close[-1] != '\n') close--; /* the last line: ::TOKEN:: */
    why = hostile_check(body, (size_t)(close - body), 1);
    if (why) fail_msg("the fenced summary: %s", why);
    assert_string_equal(body + strlen(sum), close); /* the fence holds the summary, then closes */
    free(s);
    free(sum);
}

/* A DEPLOY says so in one notice, and nothing else. */
static void test_deploy_notice(void **state) {
    (void)state;
    drift_comparison c;
    memset(&c, 0, sizeof c);
    c.baseline.label = (char *)"a";
    c.target.label = (char *)"b";
    c.baseline.config_json = c.target.config_json = (char *)"{}";
    c.present[DRIFT_WL_MATH] = 1;
    c.wl[DRIFT_WL_MATH] = (drift_wl_result){.workload = DRIFT_WL_MATH, .n = 2000, .flips = 1, .flip_rate = 0.0005,
                                            .ci95 = {0.0001, 0.003}, .budget = 0.01, .pass = 1, .mcnemar_p = 1,
                                            .sdr_mean = NAN, .semantic_drift_rate = NAN};
    c.max_left_out = 0.05;
    drift_comparison_decide(&c); /* 1 of 2000: exact upper end 0.28% < 1% */
    assert_int_equal(c.decision, DRIFT_DECISION_DEPLOY);
    char *s = NULL;
    drift_error err = {0};
    assert_int_equal(drift_github_render(&c, NULL, &s, NULL, &err), DRIFT_OK);
    assert_true(!strncmp(s, "::notice title=DriftBench verdict (a -> b)::verdict: DEPLOY (exit 0): the gated workload "
                            "is within its budget%0Arule: interval",
                         120));
    const char *second = strchr(s, '\n') + 1;
    assert_true(!strncmp(second, "::stop-commands::", 17)); /* nothing more to annotate */
    assert_non_null(strstr(s, "**DEPLOY**"));
    free(s);
    assert_int_equal(drift_github_render(NULL, NULL, &s, NULL, &err), DRIFT_ERR_INVALID);
    assert_null(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_parse), cmocka_unit_test(test_annotations),
                                       cmocka_unit_test(test_fenced_model_text), cmocka_unit_test(test_deploy_notice),
                                       cmocka_unit_test(test_hostile_summary)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
