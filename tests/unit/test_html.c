/* test_html.c - the HTML report: sections present, every answer escaped
 * (no markup from the store reaches the page), balanced tags, valid UTF-8,
 * first-difference positions, ANOVA and PRI shown only when the table is
 * big enough (one line says why not). And the renderer alone on a
 * hand-built report (no store): the same report loaded and rendered in two
 * steps equals the one-step page.
 * The comparison page: it leads with the verdict (golden files of its lead,
 * tests/data/golden/html_lead_*.html; DRIFT_UPDATE_GOLDEN=1 rewrites them),
 * says what was compared with passwords redacted, keeps a run without a
 * scored pair (ERROR), follows --target and the gate's options; the word
 * diff of two answers (marks, escaping, bounds); the heatmap's fixed
 * colour scale; the stopping curve's axis holding its interval.
 * Outside text at its worst (issue 34): hostile labels, ids and answers
 * reach the page escaped, with no terminal control, bidi control or
 * invalid UTF-8; answers of 5 MB that part at their first byte, in every
 * shape (one word, many words, whitespace runs, multi-byte text), give a
 * page whose answer text stays under 200 KB, on the comparison page and
 * the matrix page, and text and Markdown stay small too.
 * Every deterministic page (and the word diff's two sides) is compared
 * whole with its golden file, tests/data/golden/html_TEST_CASE.html, the
 * version and the times a store or the clock gave masked (page_golden;
 * DRIFT_UPDATE_GOLDEN=1 rewrites them; read the diff). What a golden file
 * cannot say stays an explicit check beside it: no markup, secret, control
 * or invalid UTF-8 reaches the page, tags balance, flips counted from the
 * test's own data, the stopping curve inside its box, the size bounds, two
 * pages that must agree (load + render = one step; a cell's colour alone
 * and beside another). */
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
#include "report/html_internal.h"
#include "support/golden.h"
#include "support/store_builder.h"
#include "unit/hostile.h"
#include "util/util.h"

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
    static const char *const tags[] = {"div",   "table", "tr",   "svg",  "p",       "h2",  "td", "th", "mark",
                                       "span",  "title", "text", "del",  "ins",     "nav", "a",  "section"};
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

/* A page compared whole with tests/data/golden/NAME (support/golden.h;
 * DRIFT_UPDATE_GOLDEN=1 rewrites it), NAME being html_TEST_CASE.html. What
 * is not the same from one run to the next is masked first: the version
 * ("VERSION") always; with times, every UTC time a store recorded or the
 * page was made at (YYYY-MM-DDTHH:MM:SSZ: "TIME"). */
static void page_golden(const char *name, const char *html, int times) {
    const char *ver = drift_version();
    size_t vl = strlen(ver), n = strlen(html);
    char *out = malloc(n * 2 + 64);
    assert_non_null(out);
    size_t o = 0;
    for (const char *p = html; *p;) {
        int ts = times && strnlen(p, 20) == 20 && p[4] == '-' && p[7] == '-' && p[10] == 'T' && p[13] == ':' &&
                 p[16] == ':' && p[19] == 'Z';
        for (int i = 0; ts && i < 19; i++)
            if (i != 4 && i != 7 && i != 10 && i != 13 && i != 16 && !isdigit((unsigned char)p[i])) ts = 0;
        if (ts) {
            memcpy(out + o, "TIME", 4);
            o += 4;
            p += 20;
        } else if (vl && !strncmp(p, ver, vl)) {
            memcpy(out + o, "VERSION", 7);
            o += 7;
            p += vl;
        } else {
            out[o++] = *p++;
        }
    }
    out[o] = '\0';
    /* with times masked, whether the two runs' start and finish rows are
     * marked as differing depends on whether they crossed a second (a slow
     * ASan run does): mask the mark on those two rows as well */
    static const char *const timed[] = {"<tr class=\"differs\"><th>started</th>",
                                        "<tr class=\"differs\"><th>finished</th>"};
    for (int k = 0; times && k < 2; k++)
        for (char *m; (m = strstr(out, timed[k]));) {
            size_t cut = strlen("<tr class=\"differs\">") - strlen("<tr>");
            memcpy(m, "<tr>", 4);
            memmove(m + 4, m + 4 + cut, strlen(m + 4 + cut) + 1);
            o -= cut;
        }
    char why[4096];
    if (golden_match(name, out, o, why, sizeof why)) fail_msg("%s", why);
    free(out);
}

static void test_escape(void **state) {
    (void)state;
    char *s = html_escape("a<b>&\"'\x01\xff\xc3\xa9");
    assert_string_equal(s, "a&lt;b&gt;&amp;&quot;&#39;\xEF\xBF\xBD\xEF\xBF\xBD\xc3\xa9");
    free(s);
    s = html_escape("a\r\nb\tc\x7f");  /* CR, LF and tab are text; DEL is not */
    assert_string_equal(s, "a\r\nb\tc\xEF\xBF\xBD");
    free(s);
    s = html_escape("\xe0\x80\x80 ok\n");  /* overlong: three replacement characters */
    assert_string_equal(s, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD ok\n");
    free(s);
    assert_int_equal(html_first_difference("abc", "abc"), -1);
    assert_int_equal(html_first_difference("abc", "abd"), 2);
    assert_int_equal(html_first_difference("ab", "abc"), 2);
    assert_int_equal(html_first_difference("", "x"), 0);
    assert_int_equal(html_first_difference(NULL, NULL), -1);
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
    page_golden("html_report_small_page.html", html, 1);
    /* nothing from outside: no scripts, links, external sources */
    assert_null(strstr(html, "<script"));
    assert_null(strstr(html, "<link"));
    assert_null(strstr(html, "src="));
    /* and no markup from the store, the title or the note: the answers'
     * "<b>0</b> (", the label's "<1>", the note's "<i>" reach the page escaped */
    assert_null(strstr(html, "<b>0</b> ("));
    assert_null(strstr(html, "<b>1</b> ("));
    assert_null(strstr(html, "<i>"));
    assert_null(strstr(html, "<1>"));
    assert_true(valid_utf8((const unsigned char *)html));
    check_balanced(html);
    /* the flips the store holds: 2 of 10 (mask 0x3), each drawn once */
    assert_int_equal(occurrences(html, "<div class=\"flip\">"), 2);
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
    page_golden("html_report_anova_page.html", html, 1);
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
    page_golden("html_render_pure_page.html", html, 0);
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
    page_golden("html_render_pure_unavailable.html", html, 0);
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
    page_golden("html_render_pure_summary.html", html, 0); /* the summary, then the note, then the figures */
    /* the rule beside it: an undefined R^2 says why, "nan" only inside words */
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

/* ---- the comparison page ---- */

/* A run like add_run whose answers were never scored. */
static void add_unscored_run(drift_store *st, const char *label, const char *config) {
    drift_error err = {0};
    drift_suite *s = NULL;
    assert_int_equal(drift_suite_load("builtin:math?n=10", &s, &err), DRIFT_OK);
    int64_t rowids[NP];
    sb_put_prompts(st, s, rowids);
    drift_run_info info = {.label = (char *)label, .target = "http://c/v1", .config_json = (char *)config,
                           .decoding_json = "{\"temperature\":0}", .templates_json = "{}",
                           .suites_json = "[\"builtin:math?n=10\"]", .tool_version = "test"};

    int64_t run_id = sb_run_begin(st, &info);
    drift_answer r[NP];
    memset(r, 0, sizeof r);
    for (int i = 0; i < NP; i++) {
        r[i].prompt_rowid = rowids[i];
        r[i].text = "The answer is 3";
        r[i].attempts = 1;
    }
    sb_put_answers(st, run_id, r, NP);
    sb_run_finish(st, run_id);
    drift_suite_free(s);
}

static const char CFG_T[] = "{\"model\":\"m\",\"hardware\":\"b200\",\"precision\":\"fp16\",\"framework\":\"vllm\"}";

/* A comparison page loaded from a store (o->comparison or o->target). */
static char *comparison_page(drift_store *st, drift_html_opts *o) {
    drift_error err = {0};
    drift_matrix_report *r = NULL;
    assert_int_equal(drift_matrix_report_load(st, o, &r, &err), DRIFT_OK);
    assert_int_equal(r->comparison, 1);
    assert_int_equal(r->n_experiments, 1);
    char *html = NULL;
    assert_int_equal(drift_html_render(r, o, &html, &err), DRIFT_OK);
    drift_matrix_report_free(r);
    assert_true(valid_utf8((const unsigned char *)html));
    check_balanced(html);
    return html;
}

static void test_comparison_page(void **state) {
    (void)state;
    make_tmpdir();
    drift_store *st = open_store("cmp.db");
    add_run(st, "base", "http://a/v1", CFG_BASE, 0);
    add_run(st, "t<b>\"'", "http://bob:hunter2@h:8000/v1?model=m&token=tok3n&api=chat", CFG_T, 0x3);
    drift_html_opts o;
    drift_html_opts_default(&o);
    o.baseline = "base";
    o.comparison = 1;
    char *html = comparison_page(st, &o);
    page_golden("html_comparison_page_block.html", html, 1);
    /* the target URL's password and token never reach the page (redacted) */
    assert_null(strstr(html, "hunter2"));
    assert_null(strstr(html, "tok3n"));
    assert_int_equal(occurrences(html, "<div class=\"flip\">"), 2); /* the store's 2 flips (mask 0x3) */
    free(html);

    /* the gate's options decide as compare's would */
    drift_compare_opts g;
    drift_compare_opts_default(&g);
    drift_error err = {0};
    o.gate = &g;
    assert_int_equal(drift_compare_parse_budgets(&g, "math=50", &err), DRIFT_OK);
    html = comparison_page(st, &o);
    page_golden("html_comparison_page_inconclusive.html", html, 1);
    free(html);
    g.rule = DRIFT_DECIDE_POINT;
    html = comparison_page(st, &o);
    page_golden("html_comparison_page_point.html", html, 1);
    free(html);
    assert_int_equal(drift_compare_parse_budgets(&g, "math=none", &err), DRIFT_OK);
    html = comparison_page(st, &o);
    page_golden("html_comparison_page_notgated.html", html, 1); /* no budget line */
    free(html);
    o.gate = NULL;

    /* --target picks a run; the baseline or an unknown label is an error */
    add_run(st, "t2", "http://c/v1", CFG_T, 0x1);
    drift_matrix_report *r = NULL;
    assert_int_equal(drift_matrix_report_load(st, &o, &r, &err), DRIFT_OK);
    assert_int_equal(r->comparison, 0); /* two configurations: the matrix page */
    assert_int_equal(r->n_experiments, 2);
    drift_matrix_report_free(r);
    o.target = "t2";
    html = comparison_page(st, &o);
    page_golden("html_comparison_page_target.html", html, 1);
    free(html);
    o.target = "base";
    assert_int_equal(drift_matrix_report_load(st, &o, &r, &err), DRIFT_ERR_INVALID);
    assert_null(r);
    o.target = "nope";
    assert_int_equal(drift_matrix_report_load(st, &o, &r, &err), DRIFT_ERR_NOT_FOUND);
    assert_null(r);
    drift_store_close(st);
}

/* A target without a single scored pair: the page leads with ERROR. */
static void test_comparison_error(void **state) {
    (void)state;
    make_tmpdir();
    drift_store *st = open_store("err.db");
    add_run(st, "base", "http://a/v1", CFG_BASE, 0);
    add_unscored_run(st, "t", CFG_T);
    drift_html_opts o;
    drift_html_opts_default(&o);
    o.baseline = "base";
    o.comparison = 1;
    char *html = comparison_page(st, &o);
    page_golden("html_comparison_error_page.html", html, 1);
    free(html);
    drift_store_close(st);
}

/* ---- golden files of the comparison page's lead ---- */

/* The page's lead: from the verdict through the decisions section, the
 * version replaced by "VERSION". */
static char *page_lead(const char *html) {
    const char *a = strstr(html, "<section class=\"verdict"), *d = strstr(html, "id=\"decisions\"");
    assert_non_null(a);
    assert_non_null(d);
    const char *z = strstr(d, "</section>\n");
    assert_non_null(z);
    z += strlen("</section>\n");
    const char *ver = drift_version();
    size_t vl = strlen(ver);
    char *out = malloc((size_t)(z - a) * 2 + 64);
    assert_non_null(out);
    size_t o = 0;
    for (const char *p = a; p < z;) {
        if (vl && (size_t)(z - p) >= vl && !memcmp(p, ver, vl)) {
            memcpy(out + o, "VERSION", 7);
            o += 7;
            p += vl;
        } else {
            out[o++] = *p++;
        }
    }
    out[o] = '\0';
    return out;
}

/* DRIFT_KEEP_HTML=DIR: the whole page is written to DIR/name too, to look at. */
static void keep_page(const char *name, const char *html) {
    const char *dir = getenv("DRIFT_KEEP_HTML");
    if (!dir || !*dir) return;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (f) {
        fputs(html, f);
        fclose(f);
    }
}

static void golden_check(const char *name, const char *got) {
    char why[2048];
    if (golden_match(name, got, strlen(got), why, sizeof why)) fail_msg("%s", why);
}

/* Workload w of c as drift_compare_runs would fill it (the gate through
 * drift_gate_decide, the no-evidence reason as compare.c refines it). */
static void put_wl(drift_comparison *c, drift_workload w, long flips, long n, long errors, long unscored, double budget) {
    drift_wl_result *r = &c->wl[w];
    memset(r, 0, sizeof *r);
    c->present[w] = 1;
    r->workload = w;
    r->n = n;
    r->flips = flips;
    r->errors = errors;
    r->errors_target = errors;
    r->unscored = unscored;
    r->flip_rate = n ? (double)flips / (double)n : 0;
    drift_wilson(flips, n, 1.959964, &r->ci95[0], &r->ci95[1]);
    r->correct_to_incorrect = flips;
    r->budget = budget;
    r->left_out_share = errors + unscored ? (double)(errors + unscored) / (double)(n + errors + unscored) : 0;
    r->decision = drift_gate_decide(flips, n, errors + unscored, budget, c->rule, c->max_left_out, &r->decide_ci[0],
                                    &r->decide_ci[1], &r->more_pairs, &r->reason);
    if (r->decision == DRIFT_DECISION_NO_EVIDENCE)
        r->reason = errors && !unscored ? DRIFT_REASON_ERRORS : unscored && !errors ? DRIFT_REASON_UNSCORED
                                                                                   : DRIFT_REASON_ERRORS_UNSCORED;
    r->pass = r->decision == DRIFT_DECISION_DEPLOY || r->decision == DRIFT_DECISION_NOT_GATED;
    r->replicates = 1;
    r->sdr_mean = r->semantic_drift_rate = NAN;
    if (r->decision != DRIFT_DECISION_NOT_GATED) c->gated++;
    c->decision = drift_decision_worst(c->decision, r->decision);
    c->pass = c->decision == DRIFT_DECISION_DEPLOY || c->decision == DRIFT_DECISION_NOT_GATED;
}

/* Two runs as a store records them, with a hostile target label, a
 * password and a key in the target URL; bad_config: the target's
 * configuration is no valid JSON (an invalid UTF-8 byte in it). */
static void hand_runs(drift_comparison *c, int bad_config) {
    c->baseline = (drift_run_info){.label = "base", .target = "http://gpu-old:8000/v1?model=llama",
                                   .config_json = "{\"model\":\"llama<3>\",\"hardware\":\"h100\",\"precision\":\"fp16\","
                                                  "\"framework\":\"vllm\"}",
                                   .decoding_json = "{\"temperature\":0,\"seed\":42,\"max_tokens\":512,\"top_p\":1}",
                                   .templates_json = "{\"math\":\"math/chat/v1\"}",
                                   .suites_json = "[\"builtin:math\",\"/data/gsm8k.jsonl\"]",
                                   .tool_version = "driftbench 0.0.9", .started_at = "2026-01-02T03:04:05Z",
                                   .finished_at = "2026-01-02T03:14:05Z"};
    c->target = (drift_run_info){.label = "tgt <b>&\"'\xff",
                                 .target = "http://alice:s3cret@gpu-new:8000/v1?model=llama&api_key=K3Y&api=chat",
                                 .config_json = bad_config ? "{\"model\":\"llama<3>\",\"zone\":\"eu\xff\"}"
                                                           : "{\"model\":\"llama<3>\",\"hardware\":\"b200\","
                                                             "\"precision\":\"fp8\",\"framework\":\"sglang\","
                                                             "\"zone\":\"<script>eu\"}",
                                 .decoding_json = "{\"temperature\":0,\"seed\":42,\"max_tokens\":512,\"top_p\":1}",
                                 .templates_json = "{\"math\":\"math/chat/v1\"}",
                                 .suites_json = "[\"builtin:math\",\"/data/gsm8k.jsonl\"]",
                                 .tool_version = "driftbench 0.0.8", .started_at = "2026-01-03T03:04:05Z",
                                 .finished_at = NULL};
}

static void test_golden_lead(void **state) {
    (void)state;
    drift_error err = {0};
    drift_html_opts o;
    drift_html_opts_default(&o);
    o.generated = "2026-02-03T04:05:06Z";
    /* every decision at once: math BLOCK, code DEPLOY, safety INCONCLUSIVE,
     * chat not gated, long_context without a scored pair: ERROR */
    drift_comparison c;
    memset(&c, 0, sizeof c);
    c.rule = DRIFT_DECIDE_INTERVAL;
    c.max_left_out = DRIFT_GATE_MAX_LEFT_OUT;
    hand_runs(&c, 0);
    put_wl(&c, DRIFT_WL_MATH, 9, 60, 0, 0, 0.02);
    put_wl(&c, DRIFT_WL_CODE, 0, 800, 0, 0, 0.005);
    put_wl(&c, DRIFT_WL_SAFETY, 2, 150, 1, 0, 0.01);
    put_wl(&c, DRIFT_WL_CHAT, 5, 40, 0, 0, -1);
    put_wl(&c, DRIFT_WL_LONG, 0, 0, 0, 12, 0.02);
    assert_int_equal(c.decision, DRIFT_DECISION_NO_EVIDENCE);
    assert_int_equal(c.wl[DRIFT_WL_CODE].decision, DRIFT_DECISION_DEPLOY);
    assert_int_equal(c.wl[DRIFT_WL_SAFETY].decision, DRIFT_DECISION_INCONCLUSIVE);
    char *html = NULL;
    assert_int_equal(drift_comparison_html_render(&c, NULL, &o, &html, &err), DRIFT_OK);
    assert_true(valid_utf8((const unsigned char *)html));
    check_balanced(html);
    assert_null(strstr(html, "s3cret"));
    assert_null(strstr(html, "K3Y"));
    assert_null(strstr(html, "<b>&"));
    keep_page("mixed.html", html);
    char *lead = page_lead(html);
    golden_check("html_lead_mixed.html", lead);
    free(lead);
    free(html);
    /* the point rule, one workload with a few errors: DEPLOY */
    memset(&c, 0, sizeof c);
    c.rule = DRIFT_DECIDE_POINT;
    c.max_left_out = 0.10;
    hand_runs(&c, 1);
    put_wl(&c, DRIFT_WL_MATH, 1, 80, 2, 0, 0.02);
    assert_int_equal(c.decision, DRIFT_DECISION_DEPLOY);
    assert_int_equal(drift_comparison_html_render(&c, NULL, &o, &html, &err), DRIFT_OK);
    check_balanced(html);
    keep_page("deploy.html", html);
    lead = page_lead(html);
    golden_check("html_lead_deploy.html", lead);
    free(lead);
    free(html);
}

/* drift_comparison_html_render shows a compare's details: quoted answers
 * side by side with the word diff, the others as compare's text diff. */
static void test_comparison_details(void **state) {
    (void)state;
    drift_comparison c;
    memset(&c, 0, sizeof c);
    c.rule = DRIFT_DECIDE_INTERVAL;
    c.max_left_out = DRIFT_GATE_MAX_LEFT_OUT;
    hand_runs(&c, 0);
    put_wl(&c, DRIFT_WL_MATH, 2, 60, 0, 0, 0.02);
    drift_flip fl[2] = {{.prompt_id = "p<1>", .direction = -1, .value = NAN},
                        {.prompt_id = "p2", .direction = 1, .value = NAN}};
    c.wl[DRIFT_WL_MATH].flipped = fl;
    c.wl[DRIFT_WL_MATH].n_flipped = 2;
    drift_flip_detail det[2];
    memset(det, 0, sizeof det);
    det[0].base_text = "so 12 apples <i>";
    det[0].targ_text = "so 13 apples <i>";
    det[1].div.diff = "... so [-4-] {+<5>+}";
    drift_comparison_details d;
    memset(&d, 0, sizeof d);
    d.flips[DRIFT_WL_MATH] = det;
    d.n[DRIFT_WL_MATH] = 2;
    drift_html_opts o;
    drift_html_opts_default(&o);
    o.generated = "2026-02-03T04:05:06Z";
    char *html = NULL;
    drift_error err = {0};
    assert_int_equal(drift_comparison_html_render(&c, &d, &o, &html, &err), DRIFT_OK);
    check_balanced(html);
    page_golden("html_comparison_details_page.html", html, 0);
    assert_int_equal(occurrences(html, "<div class=\"flip\">"), 2);
    free(html);
}

/* ---- the word diff ---- */

static void diff_is(const char *a, const char *b, const char *want_a, const char *want_b) {
    char *x = NULL, *y = NULL;
    drift_error err = {0};
    assert_int_equal(html_word_diff_text(a, b, &x, &y, NULL, NULL, &err), DRIFT_OK);
    assert_string_equal(x, want_a);
    assert_string_equal(y, want_b);
    free(x);
    free(y);
}

static void test_word_diff(void **state) {
    (void)state;
    diff_is("a b c", "a x c", "a <del>b</del> c", "a <ins>x</ins> c");
    diff_is("a b c d", "a x y d", "a <del>b c</del> d", "a <ins>x y</ins> d");
    diff_is("same  words\n", "same words", "same  words\n", "same words"); /* whitespace is no difference */
    diff_is("", "x", "", "<ins>x</ins>");
    diff_is("x y", "y", "<del>x</del> y", "y");
    diff_is("The sum is 4.", "The sum is 5. Done", "The sum is <del>4.</del>", "The sum is <ins>5. Done</ins>");
    /* everything escaped, invalid UTF-8 repaired inside a word */
    diff_is("<b>&\"' caf\xc3", "<b>&\"' caf\xc3\xa9 <script>", "&lt;b&gt;&amp;&quot;&#39; <del>caf\xEF\xBF\xBD</del>",
            "&lt;b&gt;&amp;&quot;&#39; <ins>caf\xc3\xa9 &lt;script&gt;</ins>");
    /* a long common start is cut to the words before the change */
    util_buf a = {0}, b = {0};
    for (int i = 0; i < 100; i++) {
        buf_printf(&a, "w%d ", i);
        buf_printf(&b, "w%d ", i);
    }
    buf_puts(&a, "old end");
    buf_puts(&b, "new end");
    char *x = NULL, *y = NULL;
    long rem = 0, add = 0;
    drift_error err = {0};
    assert_int_equal(html_word_diff_text(a.data, b.data, &x, &y, &rem, &add, &err), DRIFT_OK);
    assert_int_equal(rem, 1);
    assert_int_equal(add, 1);
    page_golden("html_word_diff_gap_base.html", x, 0);
    page_golden("html_word_diff_gap_target.html", y, 0);
    free(x);
    free(y);
    buf_free(&a);
    buf_free(&b);
    /* two long answers that share nothing: bounded in words compared and bytes shown */
    for (int i = 0; i < 5000; i++) {
        buf_printf(&a, "a%d ", i);
        buf_printf(&b, "b%d ", i);
    }
    assert_int_equal(html_word_diff_text(a.data, b.data, &x, &y, &rem, &add, &err), DRIFT_OK);
    assert_true(rem <= 2000 && add <= 2000);
    assert_true(strlen(x) < 7000 && strlen(y) < 7000);
    page_golden("html_word_diff_disjoint_base.html", x, 0);
    page_golden("html_word_diff_disjoint_target.html", y, 0);
    assert_int_equal(occurrences(x, "<del>"), occurrences(x, "</del>"));
    assert_int_equal(occurrences(y, "<ins>"), occurrences(y, "</ins>"));
    free(x);
    free(y);
    buf_free(&a);
    buf_free(&b);
}

/* ---- the heatmap's colour scale, the stopping curve's axis ---- */

/* A one-row-per-experiment report of math rates rates[0..n) (flips of 1000). */
static char *heatmap_page(const long *flips, size_t n) {
    drift_table *t = NULL;
    drift_error err = {0};
    assert_int_equal(drift_table_create(NULL, 0, 1, &t, &err), DRIFT_OK);
    drift_comparison *c = calloc(n, sizeof *c);
    drift_report_experiment *e = calloc(n, sizeof *e);
    char (*labels)[16] = calloc(n, sizeof *labels);
    assert_true(c && e && labels);
    for (size_t i = 0; i < n; i++) {
        snprintf(labels[i], sizeof labels[i], "c%zu", i);
        c[i].rule = DRIFT_DECIDE_INTERVAL;
        c[i].max_left_out = DRIFT_GATE_MAX_LEFT_OUT;
        put_wl(&c[i], DRIFT_WL_MATH, flips[i], 1000, 0, 0, 0.02);
        c[i].baseline.label = "base";
        c[i].target.label = labels[i];
        e[i].label = labels[i];
        e[i].baseline = "base";
        e[i].cmp = &c[i];
        const char *dims[] = {"m", "h", "p", "f", "math"};
        assert_int_equal(drift_table_append(t, labels[i], dims, flips[i] / 10.0, flips[i], 1000, 0, 1, &err), DRIFT_OK);
    }
    drift_matrix_report r;
    memset(&r, 0, sizeof r);
    r.baseline = "base";
    r.table = t;
    r.experiments = e;
    r.n_experiments = n;
    r.max_flipped = 1;
    char *html = NULL;
    assert_int_equal(drift_html_render(&r, NULL, &html, &err), DRIFT_OK);
    check_balanced(html);
    drift_table_free(t);
    free(c);
    free(e);
    free(labels);
    return html;
}

static void test_heatmap_scale(void **state) {
    (void)state;
    /* 0.3% has the same colour beside a 50% cell as alone */
    long one[] = {3}, two[] = {3, 500};
    char *a = heatmap_page(one, 1), *b = heatmap_page(two, 2);
    const char *cell = "fill=\"#fff5eb\" stroke=\"#fff\"><title>c0 math: 3 of 1000";
    assert_non_null(strstr(a, cell));
    assert_non_null(strstr(b, cell));
    /* the pages: the legend's fixed breakpoints, each cell with its decision */
    page_golden("html_heatmap_scale_one.html", a, 1);
    page_golden("html_heatmap_scale_two.html", b, 1);
    free(a);
    free(b);
}

/* Every point of every polyline in html lies within y in [lo, hi]. */
static void polylines_within(const char *html, double lo, double hi) {
    size_t lines = 0;
    for (const char *p = strstr(html, "<polyline points=\""); p; p = strstr(p + 1, "<polyline points=\"")) {
        const char *q = p + strlen("<polyline points=\"");
        while (*q && *q != '"') {
            double x, y;
            int used = 0;
            if (sscanf(q, "%lf,%lf %n", &x, &y, &used) != 2 || !used) fail_msg("bad points at %.40s", q);
            if (y < lo - 1e-9 || y > hi + 1e-9) fail_msg("point %.1f,%.1f outside the plot's y %g..%g", x, y, lo, hi);
            q += used;
        }
        lines++;
    }
    assert_true(lines >= 2);
}

static void test_seq_curve_axis(void **state) {
    (void)state;
    enum { N = 200 };
    drift_comparison c;
    memset(&c, 0, sizeof c);
    c.rule = DRIFT_DECIDE_INTERVAL;
    c.max_left_out = DRIFT_GATE_MAX_LEFT_OUT;
    hand_runs(&c, 0);
    c.target.decoding_json = "{\"temperature\":0,\"sequential\":{\"alpha\":0.05,\"order_seed\":7,"
                             "\"pairs\":{\"math\":200},\"budget\":{\"math\":0.02}}}";
    put_wl(&c, DRIFT_WL_MATH, N / 10, N, 0, 0, 0.02);
    drift_pair_outcome pairs[N];
    char ids[N][8];
    for (int i = 0; i < N; i++) {
        snprintf(ids[i], sizeof ids[i], "p%d", i);
        pairs[i] = (drift_pair_outcome){.prompt_id = ids[i], .flipped = i % 10 == 0, .risk = NAN};
    }
    c.wl[DRIFT_WL_MATH].pairs = pairs;
    c.wl[DRIFT_WL_MATH].n_pairs = N;
    char *html = NULL;
    drift_error err = {0};
    assert_int_equal(drift_comparison_html_render(&c, NULL, NULL, &html, &err), DRIFT_OK);
    page_golden("html_seq_curve_axis_page.html", html, 1);
    polylines_within(html, 8, 158); /* the plot box: SEQ_TOP .. SEQ_TOP + SEQ_H */
    keep_page("sequential.html", html);
    check_balanced(html);
    free(html);
}

/* ---- outside text at its worst (issue 34) ---- */

/* No terminal control, C1 or bidi control, invalid UTF-8 or markup. */
static void check_page_safe(const char *html) {
    assert_true(valid_utf8((const unsigned char *)html));
    assert_null(strchr(html, '\x1b'));
    assert_null(strchr(html, '\x07'));
    assert_null(strstr(html, "\xc2\x9b"));
    assert_null(strstr(html, "\xe2\x80\xae"));
    assert_null(strstr(html, "\xe2\x81\xa6"));
    assert_null(strstr(html, "\xef\xbf\xbe"));
    assert_null(strstr(html, "<script"));
    check_balanced(html);
    /* printed raw (report --html -), no line commands a runner: CR ends a line too */
    char *lines = strdup(html);
    for (char *p = lines; *p; p++)
        if (*p == '\r') *p = '\n';
    const char *why = hostile_check(lines, strlen(lines), 1);
    if (why) fail_msg("the page: %s", why);
    free(lines);
}

static void test_hostile_names(void **state) {
    (void)state;
    drift_comparison c;
    memset(&c, 0, sizeof c);
    c.rule = DRIFT_DECIDE_INTERVAL;
    c.max_left_out = DRIFT_GATE_MAX_LEFT_OUT;
    hand_runs(&c, 0);
    c.baseline.label = (char *)"base" HOSTILE;
    c.target.label = (char *)"<script>" HOSTILE;
    put_wl(&c, DRIFT_WL_MATH, 2, 60, 0, 0, 0.02);
    drift_flip fl[2] = {{.prompt_id = "p" HOSTILE, .direction = -1, .value = NAN},
                        {.prompt_id = HOSTILE_FORMULA, .direction = 1, .value = NAN}};
    c.wl[DRIFT_WL_MATH].flipped = fl;
    c.wl[DRIFT_WL_MATH].n_flipped = 2;
    drift_flip_detail det[2];
    memset(det, 0, sizeof det);
    det[0].base_text = "fine";
    det[0].targ_text = HOSTILE;
    det[1].div.error = "server said: " HOSTILE;
    drift_comparison_details d;
    memset(&d, 0, sizeof d);
    d.flips[DRIFT_WL_MATH] = det;
    d.n[DRIFT_WL_MATH] = 2;
    char *html = NULL;
    drift_error err = {0};
    assert_int_equal(drift_comparison_html_render(&c, &d, NULL, &html, &err), DRIFT_OK);
    check_page_safe(html);
    page_golden("html_hostile_names_page.html", html, 1); /* every control shown as an escape */
    free(html);
}

#define BIG_BYTES ((size_t)5 << 20)

/* An answer of BIG_BYTES whose first byte is `first`: one word (shape 0),
 * words (1), one-letter lines (2), a few letters then blanks (3), two-byte
 * characters (4). */
static char *big_answer(int shape, char first) {
    char *s = malloc(BIG_BYTES + 1);
    assert_non_null(s);
    for (size_t i = 0; i < BIG_BYTES; i++) {
        char letter = (char)('a' + i % 7);
        switch (shape) {
        case 0: s[i] = letter; break;
        case 1: s[i] = i % 6 == 5 ? ' ' : letter; break;
        case 2: s[i] = i % 2 ? '\n' : letter; break;
        case 3: s[i] = i < 10 ? letter : ' '; break;
        default: s[i] = i % 2 ? (char)0xA9 : (char)0xC3; break; /* "é" */
        }
    }
    s[BIG_BYTES] = 0;
    s[0] = first;
    if (shape == 4) s[1] = 'x'; /* keep it valid UTF-8 after the first byte */
    return s;
}

/* Bytes of the page inside <div class="ans">...</div>. */
static size_t answer_bytes(const char *html) {
    size_t n = 0;
    for (const char *p = strstr(html, "<div class=\"ans\">"); p; p = strstr(p + 1, "<div class=\"ans\">")) {
        const char *e = strstr(p, "</div>");
        assert_non_null(e);
        n += (size_t)(e - p);
    }
    return n;
}

static void test_size_bound(void **state) {
    (void)state;
    for (int shape = 0; shape < 5; shape++) {
        drift_comparison c;
        memset(&c, 0, sizeof c);
        c.rule = DRIFT_DECIDE_INTERVAL;
        c.max_left_out = DRIFT_GATE_MAX_LEFT_OUT;
        hand_runs(&c, 0);
        put_wl(&c, DRIFT_WL_MATH, 3, 60, 0, 0, 0.02);
        drift_flip fl[3] = {{.prompt_id = "p1", .direction = -1, .value = NAN},
                            {.prompt_id = "p2", .direction = -1, .value = NAN},
                            {.prompt_id = "p3", .direction = 1, .value = NAN}};
        c.wl[DRIFT_WL_MATH].flipped = fl;
        c.wl[DRIFT_WL_MATH].n_flipped = 3;
        drift_flip_detail det[3];
        drift_report_answers ans[3];
        memset(det, 0, sizeof det);
        memset(ans, 0, sizeof ans);
        char *texts[6];
        for (int i = 0; i < 3; i++) {
            texts[2 * i] = big_answer(shape, 'X');
            texts[2 * i + 1] = big_answer(shape, 'Y');
            det[i].base_text = ans[i].base_text = texts[2 * i];
            det[i].targ_text = ans[i].targ_text = texts[2 * i + 1];
            det[i].div.diff = (char *)"[-X-] {+Y+}";
            det[i].div.margin = det[i].div.kl = NAN;
            ans[i].input = texts[2 * i]; /* a 5 MB prompt too */
        }
        drift_comparison_details d;
        memset(&d, 0, sizeof d);
        d.flips[DRIFT_WL_MATH] = det;
        d.n[DRIFT_WL_MATH] = 3;
        drift_error err = {0};
        /* the comparison page */
        char *html = NULL;
        assert_int_equal(drift_comparison_html_render(&c, &d, NULL, &html, &err), DRIFT_OK);
        check_page_safe(html);
        assert_int_equal(occurrences(html, "<div class=\"flip\">"), 3);
        size_t ab = answer_bytes(html);
        if (ab >= 200 * 1024 || strlen(html) >= 300 * 1024)
            fail_msg("shape %d: %zu bytes of answers, a page of %zu bytes", shape, ab, strlen(html));
        free(html);
        /* the matrix page, three configurations each with the three flips */
        drift_table *t = NULL;
        assert_int_equal(drift_table_create(NULL, 0, 1, &t, &err), DRIFT_OK);
        drift_report_experiment e[3];
        memset(e, 0, sizeof e);
        char *labels[3] = {"t1", "t2", "t3"};
        for (int i = 0; i < 3; i++) {
            const char *dims[] = {"m", labels[i], "fp8", "vllm", "math"};
            assert_int_equal(drift_table_append(t, labels[i], dims, 5, 3, 60, 1, 14, &err), DRIFT_OK);
            e[i].label = labels[i];
            e[i].baseline = (char *)"base";
            e[i].cmp = &c;
            e[i].answers[DRIFT_WL_MATH] = ans;
            e[i].n_answers[DRIFT_WL_MATH] = 3;
        }
        drift_matrix_report r;
        memset(&r, 0, sizeof r);
        r.baseline = (char *)"base";
        r.table = t;
        r.experiments = e;
        r.n_experiments = 3;
        r.max_flipped = 5;
        snprintf(r.generated, sizeof r.generated, "2000-01-01T00:00:00Z");
        drift_html_opts o;
        drift_html_opts_default(&o);
        assert_int_equal(drift_html_render(&r, &o, &html, &err), DRIFT_OK);
        check_page_safe(html);
        assert_int_equal(occurrences(html, "<div class=\"flip\">"), 9);
        ab = answer_bytes(html);
        if (ab >= 3 * 200 * 1024 || strlen(html) >= 900 * 1024)
            fail_msg("shape %d, matrix: %zu bytes of answers, a page of %zu bytes", shape, ab, strlen(html));
        free(html);
        drift_table_free(t);
        /* text and Markdown quote excerpts only */
        for (int f = 0; f < 2; f++) {
            char *out = NULL;
            assert_int_equal(drift_comparison_render(&c, &d, f ? DRIFT_FORMAT_MARKDOWN : DRIFT_FORMAT_TEXT, &out, &err),
                             DRIFT_OK);
            if (strlen(out) >= 32 * 1024) fail_msg("shape %d, format %d: %zu bytes", shape, f, strlen(out));
            free(out);
        }
        for (int i = 0; i < 6; i++) free(texts[i]);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escape),
        cmocka_unit_test(test_report_small),
        cmocka_unit_test(test_report_anova),
        cmocka_unit_test(test_render_pure),
        cmocka_unit_test(test_two_steps),
        cmocka_unit_test(test_comparison_page),
        cmocka_unit_test(test_comparison_error),
        cmocka_unit_test(test_golden_lead),
        cmocka_unit_test(test_comparison_details),
        cmocka_unit_test(test_word_diff),
        cmocka_unit_test(test_heatmap_scale),
        cmocka_unit_test(test_seq_curve_axis),
        cmocka_unit_test(test_hostile_names),
        cmocka_unit_test(test_size_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
