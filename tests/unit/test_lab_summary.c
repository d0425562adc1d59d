/* test_lab_summary.c - the lab's summary (drift_lab_summary_render) on
 * hand-built flip tables, analyses and stochastic figures: the rates and
 * their intervals (the same figures drift_wilson gives with each prompt
 * counted once), the paper's order (holds, does not, cannot say), "too few
 * prompts", "no variance" where a held-out level has no flips, the ANOVA's
 * largest axis, the stochastic verdicts; the HTML fragment well-formed
 * (a stack-based XML check: every tag closed in order, attributes quoted,
 * only known entities); and no "nan" or "inf" in either output for any
 * input, empty and random ones included. */
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

#include "driftbench/compare.h"
#include "driftbench/report.h"
#include "support/golden.h"

/* ---- helpers ---- */

static drift_table *new_table(void) {
    drift_table *t = NULL;
    drift_error err = {0};
    assert_int_equal(drift_table_create(NULL, 0, 1, &t, &err), DRIFT_OK);
    return t;
}

static void add_row(drift_table *t, const char *config, const char *precision, const char *workload, long flips,
                    long n) {
    const char *dims[] = {"m", "cpu", precision, "ref", workload};
    drift_error err = {0};
    double rate = n > 0 ? 100.0 * (double)flips / (double)n : 0;
    assert_int_equal(drift_table_append(t, config, dims, rate, flips, n, NAN, NAN, &err), DRIFT_OK);
}

/* Two configurations, each with the same counts per workload. */
static drift_table *two_config_table(const char *const *wls, const long *flips, const long *n, size_t k) {
    drift_table *t = new_table();
    for (int c = 0; c < 2; c++)
        for (size_t i = 0; i < k; i++) add_row(t, c ? "m/int4" : "m/fp8", c ? "int4" : "fp8", wls[i], flips[i], n[i]);
    return t;
}

static void render(const drift_lab_summary_in *in, char **text, char **html) {
    drift_error err = {0};
    assert_int_equal(drift_lab_summary_render(in, text, html, &err), DRIFT_OK);
    assert_non_null(*text);
    assert_non_null(*html);
}

/* Whether s holds needle as printed, or with the word-wrap's line breaks
 * read as spaces (sentences are wrapped, table lines are not). */
static int has(const char *s, const char *needle) {
    if (strstr(s, needle)) return 1;
    char *f = strdup(s);
    assert_non_null(f);
    for (char *p = f; *p; p++)
        if (*p == '\n') *p = ' ';
    int ok = strstr(f, needle) != NULL;
    free(f);
    return ok;
}

/* got whole against tests/data/golden/NAME (support/golden.h;
 * DRIFT_UPDATE_GOLDEN=1 rewrites it). */
static void golden(const char *name, const char *got) {
    char why[2048];
    if (golden_match(name, got, strlen(got), why, sizeof why)) fail_msg("%s", why);
}

/* "nan", "inf" or "infinity" as a word, any case. */
static const char *nonfinite_word(const char *s) {
    for (const char *p = s; *p; p++) {
        if (p > s && isalpha((unsigned char)p[-1])) continue;
        if (!strncasecmp(p, "nan", 3) && !isalpha((unsigned char)p[3])) return p;
        if (!strncasecmp(p, "inf", 3) && (!isalpha((unsigned char)p[3]) || !strncasecmp(p, "infinity", 8))) return p;
    }
    return NULL;
}

static void assert_finite_text(const char *s) {
    const char *p = nonfinite_word(s);
    if (p) fail_msg("non-finite number in output: \"%.40s\"", p);
}

/* A strict check of the fragment as XML: tags closed in order, attribute
 * values quoted, '&' only in known entities, '<' only as a tag. */
static void check_xml(const char *s) {
    char stack[64][16];
    int depth = 0;
    for (const char *p = s; *p; p++) {
        if (*p == '&') {
            static const char *const ents[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&#39;"};
            int ok = 0;
            for (size_t i = 0; i < 5; i++) ok |= !strncmp(p, ents[i], strlen(ents[i]));
            if (!ok && p[1] == '#') {
                const char *q = p + 2;
                while (isdigit((unsigned char)*q)) q++;
                ok = q > p + 2 && *q == ';';
            }
            if (!ok) fail_msg("bad entity at \"%.20s\"", p);
            continue;
        }
        if (*p == '>') fail_msg("stray '>' at \"%.20s\"", p);
        if (*p != '<') continue;
        int closing = p[1] == '/';
        const char *q = p + 1 + closing;
        size_t n = 0;
        while (isalnum((unsigned char)q[n])) n++;
        if (!n || n >= 16) fail_msg("bad tag at \"%.20s\"", p);
        char name[16];
        memcpy(name, q, n);
        name[n] = 0;
        q += n;
        int self = 0;
        while (*q && *q != '>') { /* attributes: name="value" */
            if (*q == ' ') {
                q++;
                continue;
            }
            if (*q == '/' && q[1] == '>') {
                self = 1;
                q++;
                continue;
            }
            if (closing) fail_msg("attribute on a closing tag at \"%.20s\"", p);
            while (isalnum((unsigned char)*q) || *q == '-' || *q == ':') q++;
            if (q[0] != '=' || q[1] != '"') fail_msg("unquoted attribute at \"%.30s\"", q);
            q = strchr(q + 2, '"');
            if (!q) fail_msg("unterminated attribute");
            if (memchr(p, '<', (size_t)(q - p)) != p) fail_msg("'<' inside an attribute");
            q++;
        }
        if (!*q) fail_msg("unterminated tag");
        if (closing) {
            if (!depth || strcmp(stack[depth - 1], name)) fail_msg("</%s> closes <%s>", name, depth ? stack[depth - 1] : "");
            depth--;
        } else if (!self) {
            if (depth == 64) fail_msg("too deep");
            snprintf(stack[depth++], 16, "%s", name);
        }
        p = q;
    }
    if (depth) fail_msg("<%s> never closed", stack[depth - 1]);
}

/* "[lo%, hi%]" of drift_wilson(k, n) as the summary prints a percent. */
static void wilson_text(long k, long n, char *out, size_t cap) {
    double lo, hi;
    drift_wilson(k, n, 1.959963984540054, &lo, &hi);
    char a[32], b[32];
    snprintf(a, sizeof a, "%.*f%%", lo != 0 && 100 * lo < 0.01 ? 3 : 2, 100 * lo);
    snprintf(b, sizeof b, "%.*f%%", hi != 0 && 100 * hi < 0.01 ? 3 : 2, 100 * hi);
    snprintf(out, cap, "[%s, %s]", a, b);
}

/* ---- tests ---- */

static void test_arguments(void **state) {
    (void)state;
    char *t = (char *)1, *h = (char *)1;
    drift_error err = {0};
    assert_int_equal(drift_lab_summary_render(NULL, &t, &h, &err), DRIFT_ERR_INVALID);
    assert_null(t);
    assert_null(h);
    drift_lab_summary_in in = {0};
    assert_int_equal(drift_lab_summary_render(&in, &t, NULL, &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "flip table"));
    assert_true(fabs(drift_lab_summary_paper_rate(DRIFT_WL_MATH) - 16.74) < 1e-12);
    assert_true(fabs(drift_lab_summary_paper_rate(DRIFT_WL_SAFETY) - 7.97) < 1e-12);
    assert_true(fabs(drift_lab_summary_paper_rate(DRIFT_WL_LONG) - 1.55) < 1e-12);
    assert_true(fabs(drift_lab_summary_paper_rate(DRIFT_WL_CODE) - 0.09) < 1e-12);
    assert_true(isnan(drift_lab_summary_paper_rate(DRIFT_WL_UNKNOWN)));
}

static void test_empty(void **state) {
    (void)state;
    drift_table *tb = new_table();
    drift_lab_summary_in in = {.table = tb};
    char *t, *h;
    render(&in, &t, &h);
    /* both renderings whole (tests/data/golden/lab_summary_empty.*): the
     * title, no flip rate to report, the paper's order not checkable, ANOVA
     * not computed, stochastic serving not run, the models' caveat; the
     * <section id="summary"> and its <svg> */
    golden("lab_summary_empty.txt", t);
    golden("lab_summary_empty.html", h);
    assert_finite_text(t);
    assert_finite_text(h);
    check_xml(h);
    free(t);
    free(h);
    /* only one output asked */
    drift_error err = {0};
    assert_int_equal(drift_lab_summary_render(&in, &t, NULL, &err), DRIFT_OK);
    free(t);
    in.test_fixtures = 1;
    assert_int_equal(drift_lab_summary_render(&in, NULL, &h, &err), DRIFT_OK);
    golden("lab_summary_empty_fixtures.html", h); /* "test fixtures", not "about 8B models" */
    free(h);
    drift_table_free(tb);
}

/* Every pair apart in the paper's order; each rate and interval as
 * drift_wilson gives them with n = prompts. */
static void test_order_holds(void **state) {
    (void)state;
    const char *wls[] = {"math", "safety", "long_context", "code", "chat"};
    const long flips[] = {120, 60, 24, 0, 30}, n[] = {300, 300, 300, 300, 300};
    drift_table *tb = two_config_table(wls, flips, n, 5);
    drift_lab_summary_in in = {.table = tb};
    char *t, *h, iv[64], line[256];
    render(&in, &t, &h);
    assert_true(has(t, "holds here, and the 95% intervals are apart for every pair of the 4 workloads"));
    wilson_text(120, 300, iv, sizeof iv); /* pooled 240 / 600 = 40%, 300 prompts */
    snprintf(line, sizeof line, "math 40.00%% %s: above the paper's 16.74%%", iv);
    assert_true(has(t, line));
    snprintf(line, sizeof line, "  math             40.00%%  %-20s       240 / 600      300   16.74%%  above\n", iv);
    assert_true(has(t, line));
    wilson_text(60, 300, iv, sizeof iv);
    snprintf(line, sizeof line, "safety 20.00%% %s: above the paper's 7.97%%", iv);
    assert_true(has(t, line));
    wilson_text(0, 300, iv, sizeof iv);
    snprintf(line, sizeof line, "code 0.00%% %s: too few prompts to say (the interval holds both 0 and the paper's "
                                "0.09%%)",
             iv);
    assert_true(has(t, line));
    assert_true(has(t, "the paper's chat figure is its SDR of 12.4%"));
    assert_true(has(t, "(2 configuration(s);"));
    assert_false(has(t, "Not run:"));
    assert_finite_text(t);
    assert_finite_text(h);
    check_xml(h);
    /* the chart has a bar, a whisker and a paper mark per workload that ran */
    size_t bars = 0;
    for (const char *p = strstr(h, "<rect x="); p; p = strstr(p + 1, "<rect x=")) bars++;
    assert_int_equal(bars, 5 + 1); /* + the legend's swatch */
    assert_non_null(strstr(h, "<title>math: 40.00% ["));
    assert_non_null(strstr(h, "240 flips in 600 pairs, 300 prompts; paper 16.74%</title>"));
    free(t);
    free(h);
    drift_table_free(tb);
}

static void test_order_reversed_and_open(void **state) {
    (void)state;
    const char *wls[] = {"math", "code", "safety"};
    const long flips[] = {5, 90, 10}, n[] = {300, 300, 300};
    drift_table *tb = two_config_table(wls, flips, n, 3);
    drift_lab_summary_in in = {.table = tb};
    char *t, *h;
    render(&in, &t, &h);
    assert_true(has(t, "does not hold here: the intervals are apart the other way for math < code, safety < code."));
    assert_true(has(t, "Not run: long_context, chat."));
    assert_true(has(t, "  long_context          -"));
    assert_non_null(strstr(h, "not run</text>"));
    check_xml(h);
    free(t);
    free(h);
    drift_table_free(tb);
    /* small samples: the intervals overlap, so the order cannot be said */
    const char *w2[] = {"math", "safety", "code"};
    const long f2[] = {2, 1, 0}, n2[] = {16, 12, 6};
    tb = two_config_table(w2, f2, n2, 3);
    in.table = tb;
    render(&in, &t, &h);
    assert_true(has(t, "cannot be said from this sample: the intervals overlap for math > safety, math > code, "
                              "safety > code (point estimates"));
    assert_true(has(t, "code 0.00% [0.00%, 39.03%]: too few prompts to say (the interval holds both 0 and the "
                              "paper's 0.09%)"));
    char iv[64], line[128];
    wilson_text(2, 16, iv, sizeof iv);
    snprintf(line, sizeof line, "math 12.50%% %s: holds the paper's 16.74%%, but also half or double it: too few "
                                "prompts to pin it down", iv);
    assert_true(has(t, line));
    assert_true(has(t, "  math             12.50%"));
    assert_true(has(t, "too wide to say\n"));
    assert_finite_text(t);
    check_xml(h);
    free(t);
    free(h);
    /* enough prompts: consistent with the paper */
    drift_table_free(tb);
    const char *w3[] = {"math", "safety"};
    const long f3[] = {160, 80}, n3[] = {1000, 1000};
    tb = two_config_table(w3, f3, n3, 2);
    in.table = tb;
    render(&in, &t, &h);
    wilson_text(160, 1000, iv, sizeof iv);
    snprintf(line, sizeof line, "math 16.00%% %s: consistent with the paper's 16.74%%", iv);
    assert_true(has(t, line));
    assert_true(has(t, "holds here, and the 95% intervals are apart for every pair of the 2 workloads that ran."));
    free(t);
    free(h);
    /* one workload only */
    drift_table_free(tb);
    tb = new_table();
    add_row(tb, "m/fp8", "fp8", "math", 3, 10);
    add_row(tb, "m/fp8", "fp8", "bogus", 3, 10);  /* unknown workload */
    add_row(tb, "m/int4", "int4", "math", 11, 10); /* impossible counts */
    in.table = tb;
    render(&in, &t, &h);
    assert_true(has(t, "cannot be checked: only one of those workloads ran here."));
    assert_true(has(t, "2 table row(s) ignored"));
    assert_true(has(t, "(1 configuration(s);"));
    free(t);
    free(h);
    drift_table_free(tb);
}

static drift_anova_table *anova_table(void) {
    static drift_anova_row rows[5];
    static drift_anova_table a;
    rows[0] = (drift_anova_row){.term = "C(hardware)", .df = 1, .F = 0.4, .p = 0.5, .p_bh = 0.8, .eta_sq = 0.01};
    rows[1] = (drift_anova_row){.term = "C(precision)", .df = 2, .F = 5.5, .p = 0.01, .p_bh = 0.03, .eta_sq = 0.2};
    rows[2] = (drift_anova_row){.term = "C(workload)", .df = 3, .F = 40, .p = 1e-6, .p_bh = 4e-6, .eta_sq = 0.5};
    rows[3] = (drift_anova_row){.term = "Residual", .df = 10, .F = NAN, .p = NAN, .p_bh = NAN, .eta_sq = 0.29};
    a = (drift_anova_table){.type = 2, .nobs = 17, .n_rows = 4, .rows = rows};
    return &a;
}

static void test_anova_and_pri(void **state) {
    (void)state;
    drift_table *tb = new_table();
    add_row(tb, "m/fp8", "fp8", "math", 0, 20);
    add_row(tb, "m/fp8", "fp8", "code", 0, 20);
    add_row(tb, "m/int4", "int4", "math", 4, 20);
    add_row(tb, "m/int4", "int4", "code", 1, 20);
    add_row(tb, "m/bf16", "bf16", "math", 2, 20);
    add_row(tb, "m/bf16", "bf16", "code", 2, 20);
    drift_pri_holdout lv[4] = {
        {.name = "precision=bf16", .n_test = 2, .test_r2 = NAN, .r2_lo = NAN, .r2_hi = NAN, .ceiling = NAN,
         .cannot_say = DRIFT_PRI_NO_VARIANCE},
        {.name = "precision=fp8", .n_test = 2, .test_r2 = NAN, .r2_lo = NAN, .r2_hi = NAN, .ceiling = NAN,
         .cannot_say = DRIFT_PRI_NO_FLIPS},
        {.name = "precision=int4", .n_test = 2, .test_r2 = 0.42, .r2_lo = 0.1, .r2_hi = 0.6, .ceiling = 0.8,
         .cannot_say = DRIFT_PRI_SAYS},
        {.name = "hardware=cpu", .n_test = 1, .test_r2 = NAN, .r2_lo = NAN, .r2_hi = NAN, .ceiling = NAN,
         .cannot_say = DRIFT_PRI_TOO_FEW},
    };
    drift_pri_eval ev;
    memset(&ev, 0, sizeof ev);
    ev.levels = lv;
    ev.n_levels = 4;
    drift_table_analyses an;
    memset(&an, 0, sizeof an);
    an.n_rows = tb->n_rows;
    an.formula = "flip_rate ~ C(hardware) + C(precision) + C(workload)";
    an.n_params = 4;
    an.anova_fits = 1;
    an.anova[2] = anova_table();
    an.pri_asked = an.pri_fits = 1;
    an.pri = &ev;
    drift_lab_summary_in in = {.table = tb, .analyses = &an};
    char *t, *h;
    render(&in, &t, &h);
    assert_true(has(t, "Which axis moves answers most (ANOVA): workload, eta^2 0.500 (F 40.00, BH-adjusted p "
                              "< 0.001: significant at 5%); type II sums of squares over 17 configuration rows"));
    assert_true(has(t, "Of the stack's axes, precision moves answers most: eta^2 0.200 (F 5.50, BH-adjusted p "
                              "0.030: significant at 5%)."));
    /* bf16's rows flip at one rate, fp8's never: cannot say; int4 says, its interval above 0 */
    assert_true(has(t, "int4 0.42 [0.10, 0.60], ceiling 0.80. Verdict: systematic here"));
    assert_true(has(t, "precision: bf16 cannot say"));
    assert_true(has(t, "(The paper, fp4 held out: 0.763.)"));
    assert_true(has(t, "hardware: cpu cannot say"));
    assert_true(has(t, "Verdict: cannot say (no held-out level carries enough signal"));
    assert_null(strstr(t, "framework: ")); /* a dimension that does not vary is not named */
    assert_null(strstr(t, "No axis is predictable"));
    assert_finite_text(t);
    assert_finite_text(h);
    check_xml(h);
    free(t);
    free(h);
    lv[2].test_r2 = -0.3; /* the only level that can say is not predicted */
    lv[2].r2_lo = -0.5;
    lv[2].r2_hi = -0.1;
    render(&in, &t, &h);
    assert_true(has(t, "Verdict: idiosyncratic here (no level that can say is predicted"));
    free(t);
    free(h);
    lv[2].r2_hi = 0.2; /* an interval that holds 0: not settled */
    render(&in, &t, &h);
    assert_true(has(t, "Verdict: not settled (of 1 levels that can say, 0 predicted, 0 not"));
    free(t);
    free(h);
    lv[2].test_r2 = 0.42;
    /* no stack axis significant; PRI not fitting; ANOVA too small */
    drift_anova_table *a = anova_table();
    a->rows[1].p_bh = 0.2;
    an.pri_fits = 0;
    render(&in, &t, &h);
    assert_true(has(t, "No axis of the stack is significant"));
    assert_true(has(t, "BH-adjusted p 0.200: not significant at 5%"));
    assert_true(has(t, "noise ceiling)? cannot say: the PRI evaluation did not run (too few rows)."));
    free(t);
    free(h);
    an.anova_fits = 0;
    an.pri = NULL;
    an.pri_fits = 1;
    snprintf(an.pri_error.msg, sizeof an.pri_error.msg, "xgboost said no");
    an.pri_error.code = DRIFT_ERR_INVALID;
    render(&in, &t, &h);
    assert_true(has(t, "(ANOVA): too few rows to say (6; the axes that vary need 4 parameters"));
    assert_true(has(t, "cannot say: the PRI evaluation did not run (xgboost said no)."));
    free(t);
    free(h);
    drift_table_free(tb);
}

static void test_stochastic(void **state) {
    (void)state;
    drift_table *tb = new_table();
    add_row(tb, "m/int4", "int4", "math", 10, 100);
    drift_lab_summary_stochastic x = {.what = "m f32 -> int4, math", .n_prompts = 100, .replicates = 5,
                                      .temperature = 0.7, .stochastic_rate = 0.05, .null_rate = 0.04,
                                      .beyond_rate = 0.01, .beyond_lo = -0.01, .beyond_hi = 0.03, .det_rate = 0.1,
                                      .ratio = 0.1, .ratio_lo = 0, .ratio_hi = 0.6, .reason = NULL};
    drift_lab_summary_in in = {.table = tb, .stochastic = &x};
    char *t, *h;
    render(&in, &t, &h);
    assert_true(has(t, "Stochastic serving (temperature 0.7, 5 replicates, 100 prompts, m f32 -> int4, math): "
                              "flip rate between the two stacks' samples 5.00%, between two seeds of the same stack "
                              "(the null) 4.00%, beyond the null 1.00% [-1.00%, 3.00%] (the interval holds 0: "));
    /* that ratio is another estimand than the paper's: no verdict against 0.23x, whatever its value */
    assert_true(has(t, "deterministic 10.00%. Ratio (beyond the null / deterministic) 0.10x [0.00x, 0.60x]: the mean "
                       "squared change of per-prompt pass probability over the deterministic flip rate, another "
                       "estimand than the paper's 0.23x, so not compared with it."));
    free(t);
    free(h);
    x.ratio = 0.25, x.ratio_lo = 0.1, x.ratio_hi = 0.4;
    render(&in, &t, &h);
    assert_null(strstr(t, "consistent with the paper"));
    free(t);
    free(h);
    x.ratio_lo = x.ratio_hi = NAN;
    render(&in, &t, &h);
    assert_true(has(t, "0.25x: the mean squared change"));
    free(t);
    free(h);
    drift_lab_summary_stochastic y = {.what = NULL, .temperature = NAN, .stochastic_rate = NAN, .null_rate = NAN,
                                      .beyond_rate = NAN, .beyond_lo = NAN, .beyond_hi = NAN, .det_rate = 0,
                                      .ratio = NAN, .ratio_lo = NAN, .ratio_hi = NAN,
                                      .reason = "no deterministic flips to compare with"};
    in.stochastic = &y;
    render(&in, &t, &h);
    assert_true(has(t, "Stochastic serving: deterministic 0.00%. The ratio to the deterministic rate is not "
                       "computed: no deterministic flips to compare with."));
    assert_finite_text(t);
    assert_finite_text(h);
    check_xml(h);
    free(t);
    free(h);
    drift_table_free(tb);
}

/* Escaping: a level name with markup reaches the fragment escaped. */
static void test_escaped(void **state) {
    (void)state;
    drift_table *tb = new_table();
    add_row(tb, "m/x", "<b>&\"", "math", 0, 4);
    drift_pri_holdout lv[1] = {{.name = "precision=<b>&\"", .n_test = 3, .test_r2 = NAN, .r2_lo = NAN, .r2_hi = NAN,
                                .ceiling = NAN, .cannot_say = DRIFT_PRI_NO_FLIPS}};
    drift_pri_eval ev;
    memset(&ev, 0, sizeof ev);
    ev.levels = lv;
    ev.n_levels = 1;
    drift_table_analyses an;
    memset(&an, 0, sizeof an);
    an.pri_asked = an.pri_fits = 1;
    an.pri = &ev;
    drift_lab_summary_in in = {.table = tb, .analyses = &an};
    char *t, *h;
    render(&in, &t, &h);
    assert_true(has(t, "precision: <b>&\" cannot say"));
    assert_non_null(strstr(h, "precision: &lt;b&gt;&amp;&quot; cannot say"));
    check_xml(h);
    free(t);
    free(h);
    drift_table_free(tb);
}

/* ---- random inputs ---- */

static unsigned long long rng_state = 42;
static unsigned rnd(void) {
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (unsigned)(rng_state >> 33);
}
static double rnd_double(void) {
    static const double special[] = {NAN, INFINITY, -INFINITY, 0, -0.0, 1e300, -1e300, 1e-300, 0.23, 1};
    unsigned k = rnd() % 16;
    if (k < 10) return special[k];
    return ((double)rnd() / 2147483648.0 - 0.5) * (k == 15 ? 1e6 : 4);
}
static long rnd_count(void) {
    static const long special[] = {0, -1, 1, 2, 1000000, 2000000000000L, 9223372036854775807L};
    unsigned k = rnd() % 10;
    return k < 7 ? special[k] : (long)(rnd() % 500);
}

static void test_random(void **state) {
    (void)state;
    static const char *const wls[] = {"math", "code", "safety", "chat", "long_context", "x", ""};
    static const char *const precs[] = {"fp8", "int4", "bf16"};
    static const char *const dims[] = {"model", "hardware", "precision", "framework", "workload", "nope"};
    for (int it = 0; it < 400; it++) {
        drift_table *tb = new_table();
        size_t n = rnd() % 40;
        for (size_t i = 0; i < n; i++) {
            char cfg[32];
            snprintf(cfg, sizeof cfg, "c%u", rnd() % 6);
            add_row(tb, cfg, precs[rnd() % 3], wls[rnd() % 7], rnd_count(), rnd_count());
        }
        drift_anova_row rows[6];
        static const char *const terms[] = {"C(model)", "C(precision)", "C(workload)", "Intercept", "Residual", "x:y"};
        size_t nr = rnd() % 7;
        for (size_t i = 0; i < nr; i++)
            rows[i] = (drift_anova_row){.term = (char *)terms[rnd() % 6], .df = rnd_double(), .F = rnd_double(),
                                        .p = rnd_double(), .p_bh = rnd_double(), .eta_sq = rnd_double()};
        drift_anova_table at = {.type = 1 + (int)(rnd() % 3), .nobs = n, .n_rows = nr, .rows = rows};
        drift_pri_holdout lv[8];
        size_t nl = rnd() % 9;
        for (size_t i = 0; i < nl; i++) {
            memset(&lv[i], 0, sizeof lv[i]);
            snprintf(lv[i].name, sizeof lv[i].name, "%s=%s", dims[rnd() % 6], precs[rnd() % 3]);
            lv[i].n_test = rnd() % 4;
            lv[i].test_r2 = rnd_double();
        }
        drift_pri_eval ev;
        memset(&ev, 0, sizeof ev);
        ev.levels = lv;
        ev.n_levels = nl;
        drift_table_analyses an;
        memset(&an, 0, sizeof an);
        an.n_rows = n;
        an.formula = rnd() % 4 ? "f" : NULL;
        an.n_params = rnd() % 9;
        an.anova_fits = (int)(rnd() % 2);
        int ty = 1 + (int)(rnd() % 3);
        if (rnd() % 3) an.anova[ty] = &at;
        else snprintf(an.anova_error[ty].msg, sizeof an.anova_error[ty].msg, "singular"), an.anova_error[ty].code = 1;
        an.pri_asked = (int)(rnd() % 4 != 0);
        an.pri_fits = (int)(rnd() % 4 != 0);
        if (rnd() % 4) an.pri = &ev;
        drift_lab_summary_stochastic x = {
            .what = rnd() % 2 ? "a<b" : NULL, .n_prompts = rnd_count(), .replicates = (int)(rnd() % 7) - 1,
            .temperature = rnd_double(), .stochastic_rate = rnd_double(), .null_rate = rnd_double(),
            .beyond_rate = rnd_double(), .beyond_lo = rnd_double(), .beyond_hi = rnd_double(),
            .det_rate = rnd_double(), .ratio = rnd_double(), .ratio_lo = rnd_double(), .ratio_hi = rnd_double(),
            .reason = rnd() % 2 ? "why & <not>" : NULL};
        drift_lab_summary_in in = {.table = tb, .analyses = rnd() % 4 ? &an : NULL,
                                   .stochastic = rnd() % 4 ? &x : NULL, .test_fixtures = (int)(rnd() % 2)};
        char *t, *h;
        render(&in, &t, &h);
        assert_finite_text(t);
        assert_finite_text(h);
        check_xml(h);
        free(t);
        free(h);
        drift_table_free(tb);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_arguments),   cmocka_unit_test(test_empty),
        cmocka_unit_test(test_order_holds), cmocka_unit_test(test_order_reversed_and_open),
        cmocka_unit_test(test_anova_and_pri), cmocka_unit_test(test_stochastic),
        cmocka_unit_test(test_escaped),     cmocka_unit_test(test_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
