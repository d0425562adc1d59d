/* test_html.c - the HTML report: sections present, every answer escaped
 * (no markup from the store reaches the page), balanced tags, valid UTF-8,
 * first-difference positions, ANOVA shown only when the table is big enough.
 * And the renderer alone on a hand-built report (no store): the same
 * report loaded and rendered in two steps equals the one-step page. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driftbench/matrix.h"
#include "driftbench/report.h"
#include "driftbench/report_html.h"
#include "driftbench/store.h"
#include "driftbench/suite.h"

#include "labelled_runs.h"

static size_t occurrences(const char *hay, const char *needle) {
    size_t n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

static int valid_utf8(const unsigned char *p) {
    while (*p) {
        size_t n = *p < 0x80 ? 1 : (*p & 0xE0) == 0xC0 ? 2 : (*p & 0xF0) == 0xE0 ? 3 : (*p & 0xF8) == 0xF0 ? 4 : 0;
        if (!n) return 0;
        for (size_t i = 1; i < n; i++)
            if ((p[i] & 0xC0) != 0x80) return 0;
        p += n;
    }
    return 1;
}

static void check_balanced(const char *html) {
    static const char *const tags[] = {"div", "table", "tr", "svg", "p", "h2", "td", "th", "mark", "span", "title", "text"};
    for (size_t i = 0; i < sizeof tags / sizeof tags[0]; i++) {
        char open1[16], open2[16], close[16];
        snprintf(open1, sizeof open1, "<%s>", tags[i]);
        snprintf(open2, sizeof open2, "<%s ", tags[i]);
        snprintf(close, sizeof close, "</%s>", tags[i]);
        size_t o = occurrences(html, open1) + occurrences(html, open2), c = occurrences(html, close);
        if (o != c) fail_msg("<%s>: %zu opened, %zu closed", tags[i], o, c);
    }
}

static const char CFG_BASE[] = "{\"model\":\"m\",\"hardware\":\"h100\",\"precision\":\"fp16\",\"framework\":\"vllm\"}";

static void test_escape(void **state) {
    (void)state;
    char *s = drift_html_escape("a<b>&\"'\x01\xff\xc3\xa9");
    assert_string_equal(s, "a&lt;b&gt;&amp;&quot;&#39;\xEF\xBF\xBD\xEF\xBF\xBD\xc3\xa9");
    free(s);
    s = drift_html_escape("\xe0\x80\x80 ok\n");  /* overlong: three replacement characters */
    assert_string_equal(s, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD ok\n");
    free(s);
    assert_int_equal(drift_first_difference("abc", "abc"), -1);
    assert_int_equal(drift_first_difference("abc", "abd"), 2);
    assert_int_equal(drift_first_difference("ab", "abc"), 2);
    assert_int_equal(drift_first_difference("", "x"), 0);
    assert_int_equal(drift_first_difference(NULL, NULL), -1);
}

static void test_report_small(void **state) {
    (void)state;
    make_tmpdir();
    drift_store *st = open_store("small.db");
    add_run(st, "base", "http://a/v1", CFG_BASE, 0);
    add_run(st, "t<1>", "http://b/v1",
            "{\"model\":\"m\",\"hardware\":\"b200\",\"precision\":\"fp16\",\"framework\":\"vllm\"}", 0x3);
    drift_html_opts o;
    drift_html_opts_default(&o);
    o.baseline = "base";
    o.title = "T & <T>";
    o.note = "note <i>here</i>";
    char *html = NULL;
    drift_error err = {0};
    assert_int_equal(drift_report_html(st, &o, &html, &err), DRIFT_OK);
    assert_non_null(strstr(html, "<!DOCTYPE html>"));
    static const char *const ids[] = {"id=\"heatmap\"", "id=\"direction\"", "id=\"taxonomy\"", "id=\"anova\"",
                                      "id=\"pri\"", "id=\"flipped\""};
    for (size_t i = 0; i < 6; i++)
        if (!strstr(html, ids[i])) fail_msg("section %s missing", ids[i]);
    /* nothing from outside: no scripts, links, external sources */
    assert_null(strstr(html, "<script"));
    assert_null(strstr(html, "<link"));
    assert_null(strstr(html, "src="));
    assert_null(strstr(html, "<b>0</b> ("));
    assert_null(strstr(html, "<b>1</b> ("));
    assert_null(strstr(html, "<i>"));
    assert_null(strstr(html, "<1>"));
    assert_non_null(strstr(html, "&lt;script&gt;x&lt;/script&gt;"));
    assert_non_null(strstr(html, "t&lt;1&gt;"));
    assert_non_null(strstr(html, "T &amp; &lt;T&gt;"));
    assert_non_null(strstr(html, "note &lt;i&gt;here&lt;/i&gt;"));
    assert_true(valid_utf8((const unsigned char *)html));
    check_balanced(html);
    /* the heatmap cell and the flips: 2 of 10, both correct -> incorrect */
    assert_non_null(strstr(html, "2 of 10 pairs flipped (20.00%"));
    assert_non_null(strstr(html, "2 flips of 10"));
    assert_int_equal(occurrences(html, "<div class=\"flip\">"), 2);
    /* "The answer is <b>" is 17 bytes: the answers part there */
    assert_int_equal(occurrences(html, "answers part at character 17"), 2);
    assert_non_null(strstr(html, "<mark>0&lt;/b&gt;"));
    /* too small for the analysis: said in a sentence */
    assert_non_null(strstr(html, "Too few configurations for an ANOVA"));
    assert_non_null(strstr(html, "Too few rows to fit and evaluate the PRI"));
    free(html);
    /* a baseline that does not exist is an error, not an empty page */
    o.baseline = "nope";
    assert_int_equal(drift_report_html(st, &o, &html, &err), DRIFT_ERR_NOT_FOUND);
    assert_null(html);
    drift_store_close(st);
}

static void test_report_anova(void **state) {
    (void)state;
    make_tmpdir();
    drift_store *st = open_store("anova.db");
    add_run(st, "base", "http://a/v1", CFG_BASE, 0);
    static const char *const hw[] = {"h100", "b200"};
    static const char *const prec[] = {"fp16", "fp8", "fp4", "int8"};
    static const unsigned masks[2][4] = {{0x0, 0x1, 0x7, 0x3}, {0x1, 0x3, 0x1f, 0x7}};
    int k = 0;
    for (int h = 0; h < 2; h++)
        for (int p = 0; p < 4; p++) {
            if (h == 0 && p == 0) continue; /* that is the baseline */
            char label[64], target[64], cfg[256];
            snprintf(label, sizeof label, "%s/%s", hw[h], prec[p]);
            snprintf(target, sizeof target, "http://x%d/v1", k++);
            snprintf(cfg, sizeof cfg,
                     "{\"model\":\"m\",\"hardware\":\"%s\",\"precision\":\"%s\",\"framework\":\"vllm\"}", hw[h], prec[p]);
            add_run(st, label, target, cfg, masks[h][p]);
        }
    drift_html_opts o;
    drift_html_opts_default(&o);
    o.baseline = "base";
    char *html = NULL;
    drift_error err = {0};
    assert_int_equal(drift_report_html(st, &o, &html, &err), DRIFT_OK);
    assert_null(strstr(html, "Too few configurations for an ANOVA"));
    assert_non_null(strstr(html, "flip_rate ~ C(hardware) + C(precision)"));
    assert_non_null(strstr(html, "<td>C(hardware)</td>"));
    assert_non_null(strstr(html, "<td>Residual</td>"));
    assert_non_null(strstr(html, "7 observations"));
    check_balanced(html);
    free(html);
    drift_store_close(st);
}

/* The page from a hand-built report: nothing but the struct is read. */
static void test_render_pure(void **state) {
    (void)state;
    drift_table *t = NULL;
    drift_error err = {0};
    assert_int_equal(drift_table_create(NULL, 0, 1, &t, &err), DRIFT_OK);
    const char *dims[] = {"m", "b200", "fp8", "vllm", "math"};
    assert_int_equal(drift_table_append(t, "t<1>", dims, 50, 1, 2, 9.5, 90.5, &err), DRIFT_OK);
    drift_comparison c;
    memset(&c, 0, sizeof c);
    c.baseline.label = (char *)"base";
    c.target.label = (char *)"t<1>";
    c.present[DRIFT_WL_MATH] = 1;
    drift_flip fl[2] = {{.prompt_id = "p<0>", .direction = -1, .value = NAN},
                        {.prompt_id = "p1", .direction = 1, .value = NAN}};
    c.wl[DRIFT_WL_MATH] = (drift_wl_result){.workload = DRIFT_WL_MATH, .n = 2, .flips = 2, .flip_rate = 1,
                                            .ci95 = {0.3, 1}, .correct_to_incorrect = 1, .incorrect_to_correct = 1,
                                            .budget = -1, .pass = 1, .flipped = fl, .n_flipped = 2};
    drift_report_answers ans[1] = {{.input = (char *)"2+2?", .base_text = (char *)"is <4>",
                                    .targ_text = (char *)"is <5>"}};
    drift_report_experiment e;
    memset(&e, 0, sizeof e);
    e.label = (char *)"t<1>";
    e.baseline = (char *)"base";
    e.levels[0] = (char *)"m";
    e.levels[1] = (char *)"b200";
    e.cmp = &c;
    e.answers[DRIFT_WL_MATH] = ans;
    e.n_answers[DRIFT_WL_MATH] = 1;
    drift_matrix_report r;
    memset(&r, 0, sizeof r);
    r.baseline = (char *)"base";
    r.table = t;
    r.experiments = &e;
    r.n_experiments = 1;
    r.max_flipped = 1;
    snprintf(r.generated, sizeof r.generated, "2000-01-01T00:00:00Z");
    drift_html_opts o;
    drift_html_opts_default(&o);
    o.title = "T";
    char *html = NULL;
    assert_int_equal(drift_html_render(&r, &o, &html, &err), DRIFT_OK);
    assert_non_null(strstr(html, "generated 2000-01-01T00:00:00Z by driftbench"));
    assert_non_null(strstr(html, "t&lt;1&gt; (model=m, hardware=b200, precision=?, framework=?)"));
    assert_non_null(strstr(html, "answers part at character 4"));
    assert_non_null(strstr(html, "is &lt;<mark>5&gt;</mark>"));
    assert_non_null(strstr(html, "&#8230; and 1 more"));
    assert_null(strstr(html, "id=\"anova\"")); /* no analyses asked */
    assert_int_equal(occurrences(html, "<div class=\"flip\">"), 1);
    check_balanced(html);
    free(html);
    /* unreadable answers and failed analyses are said in place */
    ans[0] = (drift_report_answers){.error = (char *)"no response <7>"};
    r.analysis = 1;
    r.analyses.n_rows = 30;
    r.analyses.anova_fits = r.analyses.pri_fits = r.analyses.pri_asked = 1;
    r.analyses.anova_error[2].code = DRIFT_ERR_NUMERIC;
    snprintf(r.analyses.anova_error[2].msg, sizeof r.analyses.anova_error[2].msg, "singular <x>");
    r.analyses.pri_error.code = DRIFT_ERR_XGBOOST;
    snprintf(r.analyses.pri_error.msg, sizeof r.analyses.pri_error.msg, "no booster");
    assert_int_equal(drift_html_render(&r, &o, &html, &err), DRIFT_OK);
    assert_non_null(strstr(html, "answers unavailable: no response &lt;7&gt;"));
    assert_non_null(strstr(html, "ANOVA could not be computed: singular &lt;x&gt;"));
    assert_non_null(strstr(html, "PRI could not be evaluated: no booster"));
    check_balanced(html);
    free(html);
    /* a PRI evaluation whose R^2 is not defined says why instead of NaN */
    drift_pri_holdout lv[2] = {{.name = "precision=fp8", .n_test = 3, .test_r2 = NAN, .test_mae = 0},
                               {.name = "hardware=b200", .n_test = 1, .test_r2 = NAN, .test_mae = NAN}};
    drift_pri_eval ev;
    memset(&ev, 0, sizeof ev);
    ev.random_split = (drift_pri_holdout){.name = "random", .n_test = 4, .test_r2 = NAN, .test_mae = 0.5};
    ev.cv_r2_mean = ev.cv_r2_sd = NAN;
    ev.levels = lv;
    ev.n_levels = 2;
    r.analyses.pri = &ev;
    /* the lab's summary fragment comes first, under the title */
    char *frag = NULL;
    drift_lab_summary_in in = {.table = t, .analyses = &r.analyses};
    assert_int_equal(drift_lab_summary_render(&in, NULL, &frag, &err), DRIFT_OK);
    o.summary_html = frag;
    o.note = "the note";
    assert_int_equal(drift_html_render(&r, &o, &html, &err), DRIFT_OK);
    const char *sum = strstr(html, "<section id=\"summary\">"), *note = strstr(html, "the note"),
               *kpis = strstr(html, "<div class=\"kpis\">");
    assert_non_null(sum);
    assert_true(sum < note && note < kpis);
    assert_non_null(strstr(html, "test R&#178; = no variance (MAE 0.500 points)"));
    assert_non_null(strstr(html, "<td>precision=fp8</td><td class=\"num\">0</td><td class=\"num\">3</td>"
                                 "<td class=\"num\">no variance</td>"));
    assert_non_null(strstr(html, "<td class=\"num\">too few rows</td>"));
    for (const char *p = html; (p = strcasestr(p, "nan")); p++)
        assert_true(p > html && isalpha((unsigned char)p[-1])); /* only inside words */
    check_balanced(html);
    free(html);
    free(frag);
    drift_table_free(t);
}

/* Load + render in two steps gives the one-step page (the time aside). */
static void test_two_steps(void **state) {
    (void)state;
    make_tmpdir();
    drift_store *st = open_store("steps.db");
    add_run(st, "base", "http://a/v1", CFG_BASE, 0);
    add_run(st, "t", "http://b/v1", "{\"model\":\"m\",\"hardware\":\"b200\",\"precision\":\"fp16\",\"framework\":\"vllm\"}",
            0x5);
    drift_html_opts o;
    drift_html_opts_default(&o);
    o.baseline = "base";
    drift_error err = {0};
    drift_matrix_report *r = NULL;
    assert_int_equal(drift_matrix_report_load(st, &o, &r, &err), DRIFT_OK);
    assert_int_equal(r->n_experiments, 1);
    assert_string_equal(r->experiments[0].baseline, "base");
    assert_string_equal(r->experiments[0].levels[1], "b200");
    assert_int_equal(r->experiments[0].n_answers[DRIFT_WL_MATH], 2);
    char *two = NULL, *one = NULL;
    assert_int_equal(drift_html_render(r, &o, &two, &err), DRIFT_OK);
    assert_int_equal(drift_report_html(st, &o, &one, &err), DRIFT_OK);
    /* the pages differ at most in the generation time */
    const char *g1 = strstr(one, "generated "), *g2 = strstr(two, "generated ");
    assert_non_null(g1);
    assert_int_equal(g1 - one, g2 - two);
    assert_memory_equal(one, two, (size_t)(g1 - one));
    assert_string_equal(strstr(g1, " by driftbench"), strstr(g2, " by driftbench"));
    free(one);
    free(two);
    drift_matrix_report_free(r);
    drift_store_close(st);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escape),
        cmocka_unit_test(test_report_small),
        cmocka_unit_test(test_report_anova),
        cmocka_unit_test(test_render_pure),
        cmocka_unit_test(test_two_steps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
