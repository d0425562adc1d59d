/* test_table.c - the flip-table CSV reader and writer: the paper's file,
 * our own columns (CIs, extra dimensions, quoting, CRLF), a write/read round
 * trip, and bad rows reported as FILE:LINE: field X. Cells from outside
 * that a spreadsheet would run as formulas get a quote first (plain
 * numbers do not) and read back as they were; the text rendering of hostile
 * ids and levels is sanitised (issue 34). */
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
#include "driftbench/report.h"
#include "support/golden.h"
#include "unit/hostile.h"

static void test_paper_file(void **state) {
    (void)state;
    const char *shared = getenv("DRIFT_SHARED");
    char path[1024];
    snprintf(path, sizeof path, "%s/driftbench-ae/data/flip_rates.csv", shared ? shared : "../shared");
    drift_table *t = NULL;
    drift_error err = {0};
    assert_int_equal(drift_table_read_csv(path, &t, &err), DRIFT_OK);
    assert_int_equal(t->n_rows, 420);
    assert_int_equal(t->n_dims, 5);
    assert_false(t->has_ci);
    assert_string_equal(t->rows[1].dims[4], "long_context");
    assert_string_equal(t->rows[1].experiment_id, "llama-3.1-70b--b200--fp16--sglang");
    assert_true(fabs(t->rows[2].flip_rate - 5.6) < 1e-12);
    assert_int_equal(t->rows[2].num_flips, 28);
    assert_int_equal(t->rows[2].num_comparisons, 500);
    const char **lv;
    size_t n;
    assert_int_equal(drift_table_levels(t, 1, &lv, &n, &err), DRIFT_OK);
    assert_int_equal(n, 4);
    assert_string_equal(lv[0], "b200");
    assert_string_equal(lv[3], "mi300x");
    free(lv);
    assert_int_equal(drift_table_dim_index(t, "workload"), 4);
    assert_int_equal(drift_table_dim_index(t, "gpu"), -1);
    drift_table_free(t);
}

static drift_status parse(const char *s, drift_table **t, drift_error *err) {
    return drift_table_parse_csv(s, strlen(s), "t.csv", t, err);
}

static void test_own_columns_and_roundtrip(void **state) {
    (void)state;
    const char *csv =
        "model,hardware,precision,framework,workload,flip_rate(percent),num_flips,num_comparisons,"
        "experiment_id,ci_low,ci_high,kernel\r\n"
        "tiny,\"cpu, avx2\",int8,ref,math,5.6,28,500,\"id \"\"one\"\"\",3.9,8.0,split-k\r\n"
        "\r\n"
        "tiny,cpu-avx2,fp4,ref,code,0,0,164,,,,\"multi\nline\"\r\n";
    drift_table *t = NULL, *u = NULL;
    drift_error err = {0};
    assert_int_equal(parse(csv, &t, &err), DRIFT_OK);
    assert_int_equal(t->n_rows, 2);
    assert_int_equal(t->n_dims, 6);
    assert_true(t->has_ci);
    assert_string_equal(t->dim_names[5], "kernel");
    assert_string_equal(t->rows[0].dims[1], "cpu, avx2");
    assert_string_equal(t->rows[0].experiment_id, "id \"one\"");
    assert_true(fabs(t->rows[0].ci_low - 3.9) < 1e-12);
    assert_true(isnan(t->rows[1].ci_high));
    assert_string_equal(t->rows[1].dims[5], "multi\nline");
    char tmp[] = "/tmp/test_table_XXXXXX";
    int fd = mkstemp(tmp);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(drift_table_write_csv(t, tmp, &err), DRIFT_OK);
    assert_int_equal(drift_table_read_csv(tmp, &u, &err), DRIFT_OK);
    unlink(tmp);
    assert_int_equal(u->n_rows, t->n_rows);
    assert_int_equal(u->n_dims, t->n_dims);
    for (size_t r = 0; r < t->n_rows; r++) {
        assert_string_equal(u->rows[r].experiment_id, t->rows[r].experiment_id);
        for (size_t d = 0; d < t->n_dims; d++) assert_string_equal(u->rows[r].dims[d], t->rows[r].dims[d]);
        assert_true(u->rows[r].flip_rate == t->rows[r].flip_rate);
        assert_true(u->rows[r].num_flips == t->rows[r].num_flips);
    }
    drift_table_free(u);
    drift_table_free(t);
}

static void expect_error(const char *csv, const char *where) {
    drift_table *t = NULL;
    drift_error err = {0};
    drift_status st = parse(csv, &t, &err);
    if (st != DRIFT_ERR_PARSE) fail_msg("accepted: %s", csv);
    assert_null(t);
    if (!strstr(err.msg, where)) fail_msg("message '%s' lacks '%s'", err.msg, where);
}

#define HDR "experiment_id,model,hardware,precision,framework,workload,flip_rate,num_flips,num_comparisons\n"

static void test_bad_rows(void **state) {
    (void)state;
    expect_error(HDR "a,m,h,p,f,w,5,1,20\na,m,h,p,f,w,abc,1,20\n", "t.csv:3: field flip_rate");
    expect_error(HDR "a,m,h,p,f,w,101,1,20\n", "t.csv:2: field flip_rate");
    expect_error(HDR "a,m,h,p,f,w,-1,1,20\n", "field flip_rate");
    expect_error(HDR "a,m,h,p,f,w,5,x,20\n", "t.csv:2: field num_flips");
    expect_error(HDR "a,m,h,p,f,w,5,30,20\n", "field num_flips: 30 flips out of 20");
    expect_error(HDR "a,m,h,p,f,w,5,1,2.5\n", "field num_comparisons");
    expect_error(HDR "a,m,h,p,f,w,5,1\n", "t.csv:2: field 9: expected 9 fields, found 8");
    expect_error(HDR "a,m,,p,f,w,5,1,20\n", "t.csv:2: field hardware: empty");
    expect_error(HDR "a,\"m,h,p,f,w,5,1,20\n", "bad quoting");
    expect_error(HDR "a,\"m\"x,h,p,f,w,5,1,20\n", "bad quoting");
    expect_error("experiment_id,model,hardware,precision,framework,flip_rate,num_flips,num_comparisons\n",
                 "t.csv:1: field workload: required column missing");
    expect_error("experiment_id,model,model,hardware,precision,framework,workload,flip_rate,num_flips,"
                 "num_comparisons\n", "field model: column given twice");
    expect_error(HDR, "no data rows");
    expect_error("", "empty file");
    expect_error("experiment_id,model,hardware,precision,framework,workload,flip_rate,num_flips,"
                 "num_comparisons,ci_low\na,m,h,p,f,w,5,1,20,1\n", "ci_low and ci_high");
    /* a count written as a float by pandas is fine */
    drift_table *t = NULL;
    drift_error err = {0};
    assert_int_equal(parse(HDR "a,m,h,p,f,w,5,1.0,20.0\n", &t, &err), DRIFT_OK);
    assert_int_equal(t->rows[0].num_comparisons, 20);
    drift_table_free(t);
    /* an extra dimension may be empty (a CPU row's compute_capability, as
     * `table` writes it for a store with GPU runs); a paper column may not */
    assert_int_equal(parse("experiment_id,model,hardware,precision,framework,workload,flip_rate,num_flips,"
                           "num_comparisons,compute_capability\na,m,cpu,p,f,w,5,1,20,\nb,m,h200,p,f,w,5,1,20,9.0\n",
                           &t, &err), DRIFT_OK);
    assert_int_equal(t->n_dims, 6);
    assert_string_equal(t->rows[0].dims[5], "");
    assert_string_equal(t->rows[1].dims[5], "9.0");
    drift_table_free(t);
    assert_int_equal(drift_table_read_csv("/nonexistent/flip.csv", &t, &err), DRIFT_ERR_NOT_FOUND);
}

static void test_build(void **state) {
    (void)state;
    const char *extra[1] = {"kernel"};
    drift_table *t = NULL;
    drift_error err = {0};
    assert_int_equal(drift_table_create(extra, 1, 1, &t, &err), DRIFT_OK);
    const char *d[6] = {"m", "h", "p", "f", "math", "k1"};
    assert_int_equal(drift_table_append(t, "e1", d, 2.5, 5, 200, 1.1, 5.7, &err), DRIFT_OK);
    char *csv = NULL;
    assert_int_equal(drift_table_format_csv(t, &csv, &err), DRIFT_OK);
    assert_string_equal(csv, "experiment_id,model,hardware,precision,framework,workload,flip_rate,num_flips,"
                             "num_comparisons,ci_low,ci_high,kernel\ne1,m,h,p,f,math,2.5,5,200,1.1000000000000001,"
                             "5.7000000000000002,k1\n");
    free(csv);
    drift_table_free(t);
    const char *dup[1] = {"model"};
    assert_int_equal(drift_table_create(dup, 1, 0, &t, &err), DRIFT_ERR_INVALID);
}

/* The fields of CSV text (RFC 4180 quoting), each as its content, to f. */
static void csv_fields(const char *csv, void (*f)(const char *cell, size_t n, void *u), void *u) {
    char cell[4096];
    size_t n = 0;
    int quoted = 0;
    for (const char *p = csv;; p++) {
        if (quoted) {
            if (*p == '"' && p[1] == '"') cell[n++] = *p++;
            else if (*p == '"') quoted = 0;
            else cell[n++] = *p;
            continue;
        }
        if (*p == '"' && n == 0) { quoted = 1; continue; }
        if (*p == ',' || *p == '\n' || !*p) {
            cell[n] = 0;
            f(cell, n, u);
            n = 0;
            if (!*p) break;
            continue;
        }
        cell[n++] = *p;
    }
}

static void no_formula(const char *cell, size_t n, void *u) {
    size_t *count = u;
    (*count)++;
    if (!n) return;
    int number = 1;
    for (size_t i = 0; i < n; i++)
        if (!strchr("+-.0123456789eE", cell[i])) number = 0;
    if (strchr("=+-@\t\r", cell[0]) && !number) fail_msg("a cell starts a formula: '%s'", cell);
}

static void test_formula_cells(void **state) {
    (void)state;
    const char *extra[2] = {"=1+1", "n"};
    drift_table *t = NULL, *u = NULL;
    drift_error err = {0};
    assert_int_equal(drift_table_create(extra, 2, 1, &t, &err), DRIFT_OK);
    const char *d1[7] = {"+cmd|' /C calc'!A0", "-2+3", "@SUM(A1)", "\tvllm", "math", "'=already", "-1.5"};
    const char *d2[7] = {"m", "\rh", "p'", "f", "code", "''x", "+7"};
    assert_int_equal(drift_table_append(t, HOSTILE_FORMULA, d1, 2.5, 5, 200, 1.1, 5.7, &err), DRIFT_OK);
    assert_int_equal(drift_table_append(t, "-x", d2, 0, 0, 10, 0, 30, &err), DRIFT_OK);
    char *csv = NULL;
    assert_int_equal(drift_table_format_csv(t, &csv, &err), DRIFT_OK);
    size_t cells = 0;
    csv_fields(csv, no_formula, &cells);
    assert_int_equal(cells, 3 * 13 + 1); /* the header, two rows, the empty field after the last newline */
    /* the file whole (tests/data/golden/table_formula_cells.csv): formula
     * cells of the header, ids and dimensions get a quote first; a cell that
     * starts with a quote gets one more; plain numbers stay as they are */
    char why[2048];
    if (golden_match("table_formula_cells.csv", csv, strlen(csv), why, sizeof why)) fail_msg("%s", why);
    /* read back: the table as it was */
    assert_int_equal(drift_table_parse_csv(csv, strlen(csv), "back", &u, &err), DRIFT_OK);
    assert_string_equal(u->dim_names[5], "=1+1");
    assert_int_equal(u->n_rows, 2);
    for (size_t r = 0; r < 2; r++) {
        const char *want_id = r ? "-x" : HOSTILE_FORMULA;
        assert_string_equal(u->rows[r].experiment_id, want_id);
        for (size_t k = 0; k < 7; k++) {
            assert_string_equal(u->rows[r].dims[k], (r ? d2 : d1)[k]); /* "\tvllm" too: the quote shields it */
        }
    }
    free(csv);
    drift_table_free(u);
    drift_table_free(t);
}

static void test_text_hostile(void **state) {
    (void)state;
    drift_table *t = NULL;
    drift_error err = {0};
    assert_int_equal(drift_table_create(NULL, 0, 1, &t, &err), DRIFT_OK);
    const char *d[5] = {"m" HOSTILE, "\xe2\x80\xae" "h", "p\x1b[2K", "f\n::error::x", "math"};
    assert_int_equal(drift_table_append(t, "id" HOSTILE, d, 2.5, 5, 200, 1.1, 5.7, &err), DRIFT_OK);
    char *text = NULL;
    assert_int_equal(drift_table_render_text(t, &text, &err), DRIFT_OK);
    const char *why = hostile_check(text, strlen(text), 1);
    if (why) fail_msg("%s in:\n%s", why, text);
    /* the rendering whole (tests/data/golden/table_text_hostile.txt): U+202E
     * shown as \\u202e, the rate as "  2.50%" */
    char golden_why[2048];
    if (golden_match("table_text_hostile.txt", text, strlen(text), golden_why, sizeof golden_why))
        fail_msg("%s", golden_why);
    free(text);
    drift_table_free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paper_file), cmocka_unit_test(test_own_columns_and_roundtrip),
        cmocka_unit_test(test_bad_rows), cmocka_unit_test(test_build),
        cmocka_unit_test(test_formula_cells), cmocka_unit_test(test_text_hostile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
