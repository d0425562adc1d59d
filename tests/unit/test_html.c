/* test_html.c - the HTML report: sections present, every answer escaped
 * (no markup from the store reaches the page), balanced tags, valid UTF-8,
 * first-difference positions, ANOVA shown only when the table is big enough. */
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

#include "driftbench/matrix.h"
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escape),
        cmocka_unit_test(test_report_small),
        cmocka_unit_test(test_report_anova),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
