/* test_answer_shape.c - the shape of runs' answers (analysis.h:
 * drift_answer_shape_runs) on a store built here, every figure against a
 * value computed by hand: completion-token quantiles (numpy's linear),
 * answers cut by the limit, each answer's smallest top-1/top-2 logprob gap
 * (an unsorted top list, a token listing one alternative, a gap exactly at
 * a threshold), near ties; failed requests, answers without logprobs, with
 * logprobs that do not read or list no two alternatives, each counted
 * apart; a label the store lacks and a run not asked for add nothing. Then
 * the lab summary's sentence of those figures (drift_lab_report_summary_render). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driftbench/analysis.h"
#include "driftbench/lab_result.h"
#include "driftbench/store.h"
#include "support/store_builder.h"

/* one generated token: "top" with the listed logprobs (n 0: no "top") */
#define TOK1(a) "{\"token\":\"x\",\"logprob\":" #a ",\"top\":[{\"token\":\"x\",\"logprob\":" #a "}]}"
#define TOK2(a, b)                                                                                                    \
    "{\"token\":\"x\",\"logprob\":" #a ",\"top\":[{\"token\":\"x\",\"logprob\":" #a "},{\"token\":\"y\",\"logprob\":" #b \
    "}]}"
#define TOK3(a, b, c)                                                                                                 \
    "{\"token\":\"x\",\"logprob\":" #a ",\"top\":[{\"token\":\"x\",\"logprob\":" #a "},{\"token\":\"y\",\"logprob\":" #b \
    "},{\"token\":\"z\",\"logprob\":" #c "}]}"

enum { M1, M2, M3, M4, C1, C2, NP };

typedef struct row {
    int prompt;          /* M1.. */
    int failed;
    int tokens;          /* completion tokens, -1 unknown */
    const char *finish;
    const char *logprobs;
} row;

/* base@a: math m1 gaps 1.9, 0.05 and a one-entry list (min 0.05, 1 tie);
 * m2 cut, gaps 0.3 (top list unsorted) and 0.7 (min 0.3); m3 failed; m4
 * without logprobs; code c1 lists no two alternatives, c2's logprobs do not
 * read. base@b: m1 gaps 0.5 (exactly) and 0.6 (min 0.5); m2 token count
 * unknown, gap 2.0; m3 cut, gaps 0.02, 0.08, 0.09 (min 0.02, 3 ties); m4
 * failed; no code row. */
static const row run_a[] = {
    {M1, 0, 10, "stop", "[" TOK2(-0.1, -2.0) "," TOK2(-0.5, -0.55) "," TOK1(-0.2) "]"},
    {M2, 0, 20, "length", "[" TOK2(-1.0, -0.7) "," TOK3(-0.1, -0.8, -3.0) "]"},
    {M3, 1, -1, NULL, NULL},
    {M4, 0, 40, "stop", NULL},
    {C1, 0, 5, "stop", "[{\"token\":\"x\",\"logprob\":-0.1,\"top\":null},{\"token\":\"y\",\"logprob\":-0.2}]"},
    {C2, 0, 7, "stop", "[{\"token\":\"x\",\"top\":5}]"},
};
static const row run_b[] = {
    {M1, 0, 30, "stop", "[" TOK2(0.0, -0.5) "," TOK2(-0.1, -0.7) "]"},
    {M2, 0, -1, "stop", "[" TOK2(-0.5, -2.5) "]"},
    {M3, 0, 50, "length", "[" TOK2(-0.5, -0.52) "," TOK2(-0.6, -0.68) "," TOK2(-0.7, -0.79) "]"},
    {M4, 1, -1, NULL, NULL},
};
/* a run nobody asks for: would change every figure */
static const row run_other[] = {
    {M1, 0, 1000, "length", "[" TOK2(-0.1, -0.1) "]"},
    {C1, 0, 1000, "length", "[" TOK2(-0.1, -0.1) "]"},
};

static void put_run(drift_store *st, const char *label, const int64_t *rowids, const row *rows, size_t n) {
    drift_run_info info = {0};
    info.label = (char *)label;
    info.target = (char *)"http://x/v1?model=m";
    info.config_json = (char *)"{}";
    info.decoding_json = (char *)"{}";
    info.templates_json = (char *)"{}";
    info.suites_json = (char *)"[]";
    info.tool_version = (char *)"test";
    int64_t id = sb_run_begin(st, &info);
    drift_answer a[8];
    memset(a, 0, sizeof a);
    for (size_t i = 0; i < n; i++) {
        a[i].prompt_rowid = rowids[rows[i].prompt];
        a[i].prompt_tokens = -1;
        a[i].completion_tokens = rows[i].tokens;
        a[i].attempts = 1;
        if (rows[i].failed) {
            a[i].error = (char *)"HTTP 500";
            continue;
        }
        a[i].text = (char *)"an answer";
        a[i].finish_reason = (char *)rows[i].finish;
        a[i].logprobs_json = (char *)rows[i].logprobs;
    }
    sb_put_answers(st, id, a, n);
    sb_run_finish(st, id);
}

static char *dir;

static drift_store *build(void) {
    dir = sb_tmpdir("drift_shape_");
    char path[512];
    snprintf(path, sizeof path, "%s/shape.db", dir);
    drift_store *st = sb_open_new(path);
    drift_suite *s = sb_suite_new("t", "t", "builtin", NP);
    static const char *const ids[NP] = {"m1", "m2", "m3", "m4", "c1", "c2"};
    for (int i = 0; i < NP; i++) sb_prompt_set(s, (size_t)i, ids[i], i < C1 ? DRIFT_WL_MATH : DRIFT_WL_CODE, NULL, NULL);
    int64_t rowids[NP];
    sb_put_prompts(st, s, rowids);
    drift_suite_free(s);
    put_run(st, "base@a", rowids, run_a, sizeof run_a / sizeof *run_a);
    put_run(st, "base@b", rowids, run_b, sizeof run_b / sizeof *run_b);
    put_run(st, "other", rowids, run_other, sizeof run_other / sizeof *run_other);
    return st;
}

static void test_figures(void **state) {
    (void)state;
    drift_store *st = build();
    drift_error err = {0};
    const char *labels[] = {"base@a", "base@missing", "base@b"};
    drift_answer_shape sh[DRIFT_WL_COUNT];
    assert_int_equal(drift_answer_shape_runs(st, labels, 3, sh, &err), DRIFT_OK);

    const drift_answer_shape *m = &sh[DRIFT_WL_MATH];
    assert_int_equal(m->runs, 2);
    assert_int_equal(m->answers, 6);
    assert_int_equal(m->failed, 2);
    /* token counts 10, 20, 40 (a) and 30, 50 (b; m2 unknown): sorted 10..50 */
    assert_int_equal(m->n_len, 5);
    assert_float_equal(m->len_median, 30, 1e-12);
    assert_float_equal(m->len_p10, 14, 1e-12); /* 10 + 0.4 * (20 - 10) */
    assert_float_equal(m->len_p90, 46, 1e-12); /* 40 + 0.6 * (50 - 40) */
    assert_int_equal(m->len_max, 50);
    assert_int_equal(m->cut, 2);
    assert_int_equal(m->no_logprobs, 1);
    assert_int_equal(m->bad_logprobs, 0);
    assert_int_equal(m->no_gap, 0);
    /* smallest gaps 0.05, 0.3 (a); 0.5, 2.0, 0.02 (b) */
    assert_int_equal(m->with_gap, 5);
    assert_int_equal(m->min_gap_lt[0], 2); /* < 0.1: 0.05, 0.02 */
    assert_int_equal(m->min_gap_lt[1], 3); /* < 0.5: and 0.3 (0.5 itself is not below) */
    assert_int_equal(m->min_gap_lt[2], 4); /* < 1.0: and 0.5 */
    assert_int_equal(m->gap_tokens, 10);   /* 2 + 2 + 2 + 1 + 3 (the one-entry list has none) */
    assert_int_equal(m->tie_tokens, 4);    /* 0.05; 0.02, 0.08, 0.09 */

    const drift_answer_shape *c = &sh[DRIFT_WL_CODE];
    assert_int_equal(c->runs, 1);
    assert_int_equal(c->answers, 2);
    assert_int_equal(c->failed, 0);
    assert_int_equal(c->n_len, 2);
    assert_float_equal(c->len_median, 6, 1e-12);
    assert_float_equal(c->len_p10, 5.2, 1e-12);
    assert_float_equal(c->len_p90, 6.8, 1e-12);
    assert_int_equal(c->len_max, 7);
    assert_int_equal(c->cut, 0);
    assert_int_equal(c->no_gap, 1);
    assert_int_equal(c->bad_logprobs, 1);
    assert_int_equal(c->with_gap, 0);
    assert_int_equal(c->gap_tokens, 0);

    const drift_answer_shape *s = &sh[DRIFT_WL_SAFETY];
    assert_int_equal(s->runs, 0);
    assert_int_equal(s->answers, 0);
    assert_true(isnan(s->len_median));
    assert_int_equal(s->len_max, -1);

    /* no run: everything zero; bad arguments */
    assert_int_equal(drift_answer_shape_runs(st, labels + 1, 1, sh, &err), DRIFT_OK);
    assert_int_equal(sh[DRIFT_WL_MATH].runs, 0);
    assert_int_equal(sh[DRIFT_WL_MATH].answers, 0);
    assert_int_equal(drift_answer_shape_runs(NULL, labels, 1, sh, &err), DRIFT_ERR_INVALID);
    assert_int_equal(drift_answer_shape_runs(st, NULL, 1, sh, &err), DRIFT_ERR_INVALID);
    const char *null_label[] = {NULL};
    assert_int_equal(drift_answer_shape_runs(st, null_label, 1, sh, &err), DRIFT_ERR_INVALID);

    drift_store_close(st);
    sb_rmtree(dir);
    free(dir);
}

/* s with the word-wrap's line breaks read as spaces (malloc'd). */
static char *flat(const char *s) {
    char *f = strdup(s);
    assert_non_null(f);
    for (char *p = f; *p; p++)
        if (*p == '\n') *p = ' ';
    return f;
}

/* The summary's sentence says those figures, and what is apart. */
static void test_sentence(void **state) {
    (void)state;
    drift_store *st = build();
    drift_error err = {0};
    drift_lab_findings *f = calloc(1, sizeof *f);
    assert_non_null(f);
    const char *labels[] = {"base@a", "base@b"};
    assert_int_equal(drift_answer_shape_runs(st, labels, 2, f->shape, &err), DRIFT_OK);
    f->computed = 1;
    f->shape_ok = 1;
    f->shape_runs = 2;
    f->max_tokens = 128;
    drift_table *t = NULL;
    assert_int_equal(drift_table_create(NULL, 0, 1, &t, &err), DRIFT_OK);
    drift_lab_cuts cuts = {0};
    drift_lab_report r = {.cuts = &cuts, .table = t, .findings = f};
    char *text = NULL, *html = NULL;
    assert_int_equal(drift_lab_report_summary_render(&r, &text, &html, &err), DRIFT_OK);
    char *ft = flat(text);
    const char *want[] = {
        "Answer shape at the baseline (its 2 run(s) pooled, one per model;",
        "math 6 answers, median 30 tokens (p10 14, p90 46, max 50, over the 5 with a token count; 33.3% cut at 128 "
        "tokens), smallest gap < 0.1 in 40.0% of the answers with gaps (< 0.5: 60.0%, < 1.0: 80.0%), 0.80 near ties "
        "(tokens with a gap < 0.1) per answer (5 answers); 1 answer(s) without logprobs, not in the gap figures; 2 "
        "failed request(s) left out;",
        "code 2 answers (1 run(s) only), median 6 tokens (p10 5.2, p90 6.8, max 7; 0.0% cut at 128 tokens), no gap known; 1 answer(s) "
        "whose logprobs do not read, not in them; 1 answer(s) with no token listing two alternatives.",
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        if (!strstr(ft, want[i])) fail_msg("summary lacks \"%s\":\n%s", want[i], text);
    assert_null(strstr(ft, "safety 0 answers")); /* a workload no baseline ran says nothing */
    assert_non_null(strstr(html, "Answer shape at the baseline"));
    free(ft);
    free(text);
    free(html);

    /* not computed: said, with why */
    f->shape_ok = 0;
    snprintf(f->shape_why, sizeof f->shape_why, "store went away");
    assert_int_equal(drift_lab_report_summary_render(&r, &text, &html, &err), DRIFT_OK);
    ft = flat(text);
    assert_non_null(strstr(ft, "turn that token): cannot say (store went away)."));
    free(ft);
    free(text);
    free(html);

    drift_table_free(t);
    free(f);
    drift_store_close(st);
    sb_rmtree(dir);
    free(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_figures), cmocka_unit_test(test_sentence)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
