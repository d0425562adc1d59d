/* test_score.c - issue 21 of the scoring stage and the code sandbox:
 *   - an evaluator error is retried by the next score (math: a reference
 *     fixed in the store; code: a stored sandbox_error, a bad reference, an
 *     interpreter that does not exist), while a stored PASS / FAIL is not
 *     judged again (its score row and detail stay as they were);
 *   - the sandbox mechanism is written into each code score's detail;
 *   - compare counts which mechanisms judged the code answers of each run,
 *     weak ones flagged, and text / JSON / markdown / JUnit / HTML say so;
 *   - `driftbench score` names the sandbox once on stderr and warns when it
 *     is weaker than bubblewrap (the CLI run as a child process). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "driftbench/compare.h"
#include "driftbench/eval.h"
#include "driftbench/pipeline.h"
#include "driftbench/report.h"
#include "driftbench/report_html.h"
#include "driftbench/store.h"
#include "support/store_builder.h"
#include "store/store_internal.h" /* store_sqlite: to look at what the store wrote */
#include "util/util.h"

#include "labelled_runs.h"

#define REF_ADD                                                                                                   \
    "{\"prompt\":\"def add(a, b):\\n\",\"test\":\"def check(c):\\n    assert c(1, 2) == 3\\n\","                  \
    "\"entry_point\":\"add\"}"
#define REF_ADD_NO_TEST "{\"prompt\":\"def add(a, b):\\n\",\"entry_point\":\"add\"}"

static size_t occurrences(const char *hay, const char *needle) {
    size_t n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

/* Stores prompts (suite `suite`) and returns their row ids in rowids. */
static void put_prompts(drift_store *st, const char *suite, const char *const *ids, const drift_workload *wls,
                        const char *const *refs, size_t n, int64_t *rowids) {
    drift_suite *s = sb_suite_new(suite, suite, "test", n);
    for (size_t i = 0; i < n; i++) sb_prompt_set(s, i, ids[i], wls[i], NULL, refs[i]);
    sb_put_prompts(st, s, rowids);
    drift_suite_free(s);
}

static int64_t new_run(drift_store *st, const char *label) {
    drift_run_info ri = {0};
    ri.label = (char *)label;
    ri.target = (char *)"http://127.0.0.1:9/v1?model=m";
    ri.config_json = (char *)"{\"model\":\"m\",\"hardware\":\"h100\",\"precision\":\"fp16\",\"framework\":\"vllm\"}";
    ri.decoding_json = (char *)"{\"temperature\":0}";
    ri.templates_json = (char *)"{}";
    ri.suites_json = (char *)"[\"t\"]";
    return sb_run_begin(st, &ri);
}

/* Answers (texts[i] NULL: a failed request) for rowids in run. */
static void put_answers(drift_store *st, int64_t run, const int64_t *rowids, const char *const *texts, size_t n) {
    drift_answer rs[16];
    assert_true(n <= 16);
    memset(rs, 0, sizeof rs);
    for (size_t i = 0; i < n; i++) {
        rs[i].prompt_rowid = rowids[i];
        rs[i].prompt_tokens = rs[i].completion_tokens = -1;
        rs[i].attempts = 1;
        rs[i].text = (char *)texts[i];
        if (!texts[i]) rs[i].error = (char *)"HTTP 503: down";
    }
    sb_put_answers(st, run, rs, n);
}

static int64_t response_of(drift_store *st, int64_t run, const char *prompt_id) {
    sqlite3_stmt *q = NULL;
    assert_int_equal(sqlite3_prepare_v2(store_sqlite(st),
                                        "SELECT r.id FROM responses r JOIN prompts p ON p.id = r.prompt_rowid "
                                        "WHERE r.run_id = ?1 AND p.prompt_id = ?2",
                                        -1, &q, NULL),
                     SQLITE_OK);
    sqlite3_bind_int64(q, 1, run);
    sqlite3_bind_text(q, 2, prompt_id, -1, SQLITE_STATIC);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    int64_t id = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    return id;
}

/* The latest score of a response: its row id (0 when none), label, detail (malloc'd). */
typedef struct latest {
    int64_t id;
    int label;
    char *detail;
} latest;

static latest latest_score(drift_store *st, int64_t response_id) {
    latest l = {0, DRIFT_LABEL_NONE, NULL};
    sqlite3_stmt *q = NULL;
    assert_int_equal(sqlite3_prepare_v2(store_sqlite(st),
                                        "SELECT id, label, detail FROM scores WHERE response_id = ?1 "
                                        "ORDER BY id DESC LIMIT 1",
                                        -1, &q, NULL),
                     SQLITE_OK);
    sqlite3_bind_int64(q, 1, response_id);
    if (sqlite3_step(q) == SQLITE_ROW) {
        l.id = sqlite3_column_int64(q, 0);
        l.label = sqlite3_column_int(q, 1);
        const char *d = (const char *)sqlite3_column_text(q, 2);
        l.detail = d ? util_strdup(d) : NULL;
    }
    sqlite3_finalize(q);
    return l;
}

static int64_t latest_id(drift_store *st, int64_t response_id) {
    latest l = latest_score(st, response_id);
    free(l.detail);
    return l.id;
}

static int latest_label(drift_store *st, int64_t response_id) {
    latest l = latest_score(st, response_id);
    free(l.detail);
    return l.label;
}

/* A string field of a detail JSON ("" when absent). */
static void detail_field(const char *detail, const char *key, char *out, size_t cap) {
    out[0] = '\0';
    json_error_t je;
    json_t *d = detail ? json_loads(detail, 0, &je) : NULL;
    const char *v = json_string_value(json_object_get(d, key));
    if (v) snprintf(out, cap, "%s", v);
    json_decref(d);
}

static void exec_sql(drift_store *st, const char *sql) {
    char *msg = NULL;
    if (sqlite3_exec(store_sqlite(st), sql, NULL, NULL, &msg) != SQLITE_OK) fail_msg("%s: %s", sql, msg);
}

static void put_score(drift_store *st, int64_t response_id, const char *evaluator, int label, const char *detail) {
    drift_score sc = {response_id, evaluator, label, label == DRIFT_LABEL_PASS ? 1.0 : label == DRIFT_LABEL_FAIL ? 0.0 : NAN,
                      detail};
    sb_put_scores(st, &sc, 1);
}

/* ---- retrying evaluator errors ---- */

static void test_retry_math(void **state) {
    (void)state;
    drift_store *st = open_store("math.db");
    const char *ids[] = {"g0", "g1", "g2", "g3"};
    const drift_workload wls[] = {DRIFT_WL_MATH, DRIFT_WL_MATH, DRIFT_WL_MATH, DRIFT_WL_MATH};
    const char *refs[] = {"{\"answer\":\"540\"}", "{\"answer\":\"7\"}", "{\"nothing\":1}", "{\"answer\":\"1\"}"};
    int64_t rowids[4];
    put_prompts(st, "m", ids, wls, refs, 4, rowids);
    int64_t run = new_run(st, "r");
    const char *texts[] = {"#### 540", "#### 5", "#### 12", NULL};
    put_answers(st, run, rowids, texts, 4);

    drift_score_opts so;
    drift_score_opts_default(&so);
    drift_score_summary sum;
    drift_error err = {0};
    assert_int_equal(drift_score_run(st, "r", &so, &sum, &err), DRIFT_OK);
    assert_int_equal(sum.scored[DRIFT_WL_MATH], 2);
    assert_int_equal(sum.eval_errors[DRIFT_WL_MATH], 1); /* g2: a reference without an answer */
    assert_string_equal(sum.code_sandbox, ""); /* no code answer in this call */
    latest g0 = latest_score(st, response_of(st, run, "g0")), g1 = latest_score(st, response_of(st, run, "g1"));
    latest g2 = latest_score(st, response_of(st, run, "g2"));
    assert_int_equal(g0.label, DRIFT_LABEL_PASS);
    assert_int_equal(g1.label, DRIFT_LABEL_FAIL);
    assert_int_equal(g2.label, DRIFT_LABEL_ERROR);

    /* the reference is mended; g1's too, but g1 already has a FAIL and must keep it */
    exec_sql(st, "UPDATE prompts SET reference = '{\"answer\":\"12\"}' WHERE prompt_id = 'g2'");
    exec_sql(st, "UPDATE prompts SET reference = '{\"answer\":\"5\"}' WHERE prompt_id = 'g1'");
    assert_int_equal(drift_score_run(st, "r", &so, &sum, &err), DRIFT_OK);
    assert_int_equal(sum.scored[DRIFT_WL_MATH], 1);
    assert_int_equal(sum.eval_errors[DRIFT_WL_MATH], 0);
    assert_int_equal(sum.already[DRIFT_WL_MATH], 2);
    latest g2b = latest_score(st, response_of(st, run, "g2"));
    assert_int_equal(g2b.label, DRIFT_LABEL_PASS);
    latest g0b = latest_score(st, response_of(st, run, "g0")), g1b = latest_score(st, response_of(st, run, "g1"));
    assert_true(g0b.id == g0.id && g1b.id == g1.id); /* not rewritten */
    assert_int_equal(g1b.label, DRIFT_LABEL_FAIL);
    assert_string_equal(g1b.detail, g1.detail);
    /* g3 is a failed request: never scored here (run asks it again) */
    assert_int_equal(latest_id(st, response_of(st, run, "g3")), 0);

    /* nothing left: a third score judges nothing */
    assert_int_equal(drift_score_run(st, NULL, &so, &sum, &err), DRIFT_OK);
    assert_int_equal(sum.scored[DRIFT_WL_MATH] + sum.eval_errors[DRIFT_WL_MATH], 0);
    assert_int_equal(sum.already[DRIFT_WL_MATH], 3);
    free(g0.detail);
    free(g1.detail);
    free(g2.detail);
    free(g0b.detail);
    free(g1b.detail);
    free(g2b.detail);
    drift_store_close(st);
}

/* Skips the test where no isolation works for code; mech gets its name. */
static void require_sandbox(char *mech, size_t cap) {
    drift_code_opts co;
    drift_code_opts_default(&co);
    drift_error err = {0};
    if (drift_sandbox_check(&co, mech, cap, &err) != DRIFT_OK) {
        fprintf(stderr, "no sandbox here (%s): skipped\n", err.msg);
        skip();
    }
}

static void test_retry_code(void **state) {
    (void)state;
    char mech[128];
    require_sandbox(mech, sizeof mech);
    drift_error err = {0};
    drift_store *st = open_store("code.db");
    const char *ids[] = {"k0", "k1", "k2", "k3"};
    const drift_workload wls[] = {DRIFT_WL_CODE, DRIFT_WL_CODE, DRIFT_WL_CODE, DRIFT_WL_CODE};
    const char *refs[] = {REF_ADD, REF_ADD_NO_TEST, REF_ADD, REF_ADD};
    int64_t rowids[4];
    put_prompts(st, "c", ids, wls, refs, 4, rowids);
    int64_t run = new_run(st, "r");
    const char *texts[] = {"    return a + b\n", "    return a + b\n", "    return a + b\n", "    return a - b\n"};
    put_answers(st, run, rowids, texts, 4);
    int64_t k0 = response_of(st, run, "k0"), k1 = response_of(st, run, "k1"), k2 = response_of(st, run, "k2"),
            k3 = response_of(st, run, "k3");
    /* k2: an earlier score whose sandbox failed; k3: a PASS that must stay
     * (its answer would fail if it were run again) */
    put_score(st, k2, "code-pass@1", DRIFT_LABEL_ERROR,
              "{\"reason\":\"sandbox_error\",\"message\":\"bwrap: setting up uid map: Permission denied\"}");
    put_score(st, k3, "code-pass@1", DRIFT_LABEL_PASS, "{\"marker\":\"kept\"}");
    int64_t k3_id = latest_id(st, k3);

    /* an interpreter that does not exist: nothing can be judged, nothing is stored */
    drift_score_opts so;
    drift_score_opts_default(&so);
    so.jobs = 2;
    so.python = "/no/such/python3";
    drift_score_summary sum;
    assert_int_equal(drift_score_run(st, "r", &so, &sum, &err), DRIFT_OK);
    assert_int_equal(sum.not_computable[DRIFT_WL_CODE], 3);
    assert_int_equal(sum.already[DRIFT_WL_CODE], 1);
    assert_int_equal(strncmp(sum.reason[DRIFT_WL_CODE], "code: ", 6), 0);
    assert_string_equal(sum.code_sandbox, ""); /* no code answer ran */
    assert_int_equal(latest_id(st, k0), 0);
    assert_int_equal(latest_label(st, k2), DRIFT_LABEL_ERROR);

    /* a working interpreter: k0 judged, k2 retried, k1 an evaluator error, k3 kept */
    so.python = NULL;
    assert_int_equal(drift_score_run(st, "r", &so, &sum, &err), DRIFT_OK);
    assert_int_equal(sum.scored[DRIFT_WL_CODE], 2);
    assert_int_equal(sum.eval_errors[DRIFT_WL_CODE], 1);
    assert_int_equal(sum.already[DRIFT_WL_CODE], 1);
    assert_string_equal(sum.code_sandbox, mech); /* the isolation that ran them */
    latest l0 = latest_score(st, k0), l1 = latest_score(st, k1), l2 = latest_score(st, k2), l3 = latest_score(st, k3);
    assert_int_equal(l0.label, DRIFT_LABEL_PASS);
    assert_int_equal(l1.label, DRIFT_LABEL_ERROR);
    assert_int_equal(l2.label, DRIFT_LABEL_PASS);
    assert_int_equal(l3.label, DRIFT_LABEL_PASS);
    assert_true(l3.id == k3_id);
    assert_string_equal(l3.detail, "{\"marker\":\"kept\"}");
    char f[128];
    detail_field(l0.detail, "sandbox", f, sizeof f);
    assert_string_equal(f, mech); /* the store says which isolation judged it */
    detail_field(l2.detail, "sandbox", f, sizeof f);
    assert_string_equal(f, mech);
    detail_field(l2.detail, "reason", f, sizeof f);
    assert_string_equal(f, "passed");

    /* the reference mended: the error is retried and judged */
    exec_sql(st, "UPDATE prompts SET reference = '" REF_ADD "' WHERE prompt_id = 'k1'");
    assert_int_equal(drift_score_run(st, "r", &so, &sum, &err), DRIFT_OK);
    assert_int_equal(sum.scored[DRIFT_WL_CODE], 1);
    assert_int_equal(sum.already[DRIFT_WL_CODE], 3);
    latest l1b = latest_score(st, k1);
    assert_int_equal(l1b.label, DRIFT_LABEL_PASS);
    detail_field(l1b.detail, "sandbox", f, sizeof f);
    assert_string_equal(f, mech);
    free(l0.detail);
    free(l1.detail);
    free(l2.detail);
    free(l3.detail);
    free(l1b.detail);
    drift_store_close(st);
}

/* ---- which isolation: compare and the reports ---- */

static void test_sandbox_weak(void **state) {
    (void)state;
    assert_false(drift_sandbox_weak("bubblewrap"));
    assert_false(drift_sandbox_weak("bubblewrap+seccomp+uid"));
    assert_false(drift_sandbox_weak("bubblewrap+seccomp+uid+cgroup"));
    assert_true(drift_sandbox_weak("seccomp+uid"));
    assert_true(drift_sandbox_weak("seccomp+uid+cgroup"));
    assert_true(drift_sandbox_weak("none (unsafe)"));
    assert_true(drift_sandbox_weak("bubblewrap (unsafe)"));
    assert_true(drift_sandbox_weak("unrecorded"));
    assert_true(drift_sandbox_weak(""));
    assert_true(drift_sandbox_weak(NULL));
}

static const char BWRAP[] = "bubblewrap+seccomp+uid";
static const char WEAK[] = "seccomp+uid (unsafe)";

/* Code prompts c0..c3 answered in run `label` (created by add_run) with
 * the given labels and details. */
static void add_code(drift_store *st, const char *label, const int *labels, const char *const *details) {
    const char *ids[] = {"c0", "c1", "c2", "c3"};
    const drift_workload wls[] = {DRIFT_WL_CODE, DRIFT_WL_CODE, DRIFT_WL_CODE, DRIFT_WL_CODE};
    const char *refs[] = {REF_ADD, REF_ADD, REF_ADD, REF_ADD};
    int64_t rowids[4];
    put_prompts(st, "code", ids, wls, refs, 4, rowids);
    drift_run_info ri;
    drift_error err = {0};
    assert_int_equal(drift_store_run_get(st, label, &ri, &err), DRIFT_OK);
    const char *texts[] = {"    return a + b\n", "    return a + b\n", "    return a + b\n", "    return a + b\n"};
    put_answers(st, ri.id, rowids, texts, 4);
    for (int i = 0; i < 4; i++) put_score(st, response_of(st, ri.id, ids[i]), "code-pass@1", labels[i], details[i]);
    drift_run_info_clear(&ri);
}

static drift_store *sandbox_store(void) {
    drift_store *st = open_store("sbx.db");
    add_run(st, "base", "http://a/v1", "{\"model\":\"m\",\"hardware\":\"h100\",\"precision\":\"fp16\",\"framework\":\"vllm\"}", 0);
    add_run(st, "targ", "http://b/v1", "{\"model\":\"m\",\"hardware\":\"b200\",\"precision\":\"fp16\",\"framework\":\"vllm\"}", 1);
    add_run(st, "safe", "http://c/v1", "{\"model\":\"m\",\"hardware\":\"h200\",\"precision\":\"fp16\",\"framework\":\"vllm\"}", 0);
    const int base_l[] = {DRIFT_LABEL_PASS, DRIFT_LABEL_FAIL, DRIFT_LABEL_PASS, DRIFT_LABEL_ERROR};
    const char *base_d[] = {"{\"reason\":\"passed\",\"sandbox\":\"bubblewrap+seccomp+uid\"}",
                            "{\"reason\":\"failed_test\",\"sandbox\":\"bubblewrap+seccomp+uid\"}",
                            "{\"reason\":\"passed\",\"sandbox\":\"bubblewrap+seccomp+uid\"}",
                            "{\"reason\":\"sandbox_error\",\"sandbox\":\"none (unsafe)\"}"}; /* an error: not counted */
    add_code(st, "base", base_l, base_d);
    const int targ_l[] = {DRIFT_LABEL_PASS, DRIFT_LABEL_PASS, DRIFT_LABEL_FAIL, DRIFT_LABEL_PASS};
    const char *targ_d[] = {"{\"reason\":\"passed\",\"sandbox\":\"bubblewrap+seccomp+uid\"}",
                            "{\"reason\":\"passed\",\"sandbox\":\"seccomp+uid (unsafe)\"}",
                            "{\"reason\":\"failed_test\"}", /* scored before the field existed */
                            "not json"};
    add_code(st, "targ", targ_l, targ_d);
    const int safe_l[] = {DRIFT_LABEL_PASS, DRIFT_LABEL_PASS, DRIFT_LABEL_PASS, DRIFT_LABEL_PASS};
    const char *safe_d[] = {"{\"sandbox\":\"bubblewrap+seccomp+uid\"}", "{\"sandbox\":\"bubblewrap+seccomp+uid\"}",
                            "{\"sandbox\":\"bubblewrap+seccomp+uid\"}", "{\"sandbox\":\"bubblewrap+seccomp+uid\"}"};
    add_code(st, "safe", safe_l, safe_d);
    return st;
}

static void test_sandbox_compare(void **state) {
    (void)state;
    drift_store *st = sandbox_store();
    drift_comparison *c = NULL;
    drift_error err = {0};
    assert_int_equal(drift_compare_runs(st, "base", "targ", NULL, &c, &err), DRIFT_OK);
    assert_true(c->present[DRIFT_WL_CODE]);
    assert_int_equal(c->n_sandboxes, 3);
    /* most used first */
    assert_string_equal(c->sandboxes[0].mechanism, BWRAP);
    assert_int_equal(c->sandboxes[0].baseline, 3);
    assert_int_equal(c->sandboxes[0].target, 1);
    assert_false(c->sandboxes[0].weak);
    assert_string_equal(c->sandboxes[1].mechanism, "unrecorded");
    assert_int_equal(c->sandboxes[1].baseline, 0);
    assert_int_equal(c->sandboxes[1].target, 2);
    assert_true(c->sandboxes[1].weak);
    assert_string_equal(c->sandboxes[2].mechanism, WEAK);
    assert_int_equal(c->sandboxes[2].target, 1);
    assert_true(c->sandboxes[2].weak);

    char *s = NULL;
    assert_int_equal(drift_report_comparison(c, st, DRIFT_FORMAT_TEXT, &s, &err), DRIFT_OK);
    assert_non_null(strstr(s, "code sandbox: bubblewrap+seccomp+uid (baseline 3, target 1); unrecorded (baseline 0, "
                              "target 2); seccomp+uid (unsafe) (baseline 0, target 1)\n"));
    assert_non_null(
        strstr(s, "warning: code answers were run under isolation weaker than bubblewrap: unrecorded seccomp+uid "
                  "(unsafe)\n"));
    free(s);
    assert_int_equal(drift_report_comparison(c, NULL, DRIFT_FORMAT_JSON, &s, &err), DRIFT_OK);
    json_error_t je;
    json_t *root = json_loads(s, 0, &je);
    assert_non_null(root);
    json_t *code = NULL, *w;
    size_t i;
    json_array_foreach(json_object_get(root, "workloads"), i, w) {
        json_t *sb = json_object_get(w, "sandbox");
        if (!strcmp(json_string_value(json_object_get(w, "workload")), "code")) code = w;
        else assert_null(sb); /* only the code workload carries it */
    }
    assert_non_null(code);
    json_t *arr = json_object_get(code, "sandbox");
    assert_int_equal(json_array_size(arr), 3);
    json_t *e0 = json_array_get(arr, 0), *e2 = json_array_get(arr, 2);
    assert_string_equal(json_string_value(json_object_get(e0, "mechanism")), BWRAP);
    assert_int_equal(json_integer_value(json_object_get(e0, "baseline")), 3);
    assert_int_equal(json_integer_value(json_object_get(e0, "target")), 1);
    assert_true(json_is_false(json_object_get(e0, "weak")));
    assert_string_equal(json_string_value(json_object_get(e2, "mechanism")), WEAK);
    assert_true(json_is_true(json_object_get(e2, "weak")));
    json_decref(root);
    free(s);
    assert_int_equal(drift_report_comparison(c, NULL, DRIFT_FORMAT_MARKDOWN, &s, &err), DRIFT_OK);
    assert_non_null(strstr(s, "Code sandbox: `bubblewrap+seccomp+uid` (baseline 3, target 1); `unrecorded`"));
    assert_non_null(strstr(s, "`seccomp+uid (unsafe)` (baseline 0, target 1) **weaker than bubblewrap**."));
    free(s);
    assert_int_equal(drift_report_comparison(c, NULL, DRIFT_FORMAT_JUNIT, &s, &err), DRIFT_OK);
    assert_non_null(strstr(s, "code sandbox: bubblewrap+seccomp+uid (baseline 3, target 1)"));
    free(s);
    drift_comparison_free(c);

    /* bubblewrap on both sides: said, no warning */
    assert_int_equal(drift_compare_runs(st, "base", "safe", NULL, &c, &err), DRIFT_OK);
    assert_int_equal(c->n_sandboxes, 1);
    assert_int_equal(c->sandboxes[0].baseline, 3);
    assert_int_equal(c->sandboxes[0].target, 4);
    assert_int_equal(drift_report_comparison(c, NULL, DRIFT_FORMAT_TEXT, &s, &err), DRIFT_OK);
    assert_non_null(strstr(s, "code sandbox: bubblewrap+seccomp+uid (baseline 3, target 4)\n"));
    assert_null(strstr(s, "warning"));
    free(s);
    drift_comparison_free(c);

    /* no code pairs in the comparison: nothing about sandboxes */
    drift_compare_opts o;
    drift_compare_opts_default(&o);
    o.only_workload = DRIFT_WL_MATH;
    assert_int_equal(drift_compare_runs(st, "base", "targ", &o, &c, &err), DRIFT_OK);
    assert_int_equal(c->n_sandboxes, 0);
    assert_int_equal(drift_report_comparison(c, NULL, DRIFT_FORMAT_TEXT, &s, &err), DRIFT_OK);
    assert_null(strstr(s, "sandbox"));
    free(s);
    drift_comparison_free(c);

    /* the HTML report: one row per run and mechanism, the baseline once */
    drift_html_opts ho;
    drift_html_opts_default(&ho);
    ho.baseline = "base";
    ho.analysis = 0;
    char *html = NULL;
    assert_int_equal(drift_report_html(st, &ho, &html, &err), DRIFT_OK);
    assert_non_null(strstr(html, "<h2 id=\"sandbox\">Code sandbox</h2>"));
    assert_non_null(strstr(html, "isolation weaker than bubblewrap"));
    assert_int_equal(occurrences(html, "<tr><td>base</td><td>baseline</td><td>bubblewrap+seccomp+uid</td>"
                                       "<td class=\"num\">3</td></tr>"),
                     1);
    assert_int_equal(occurrences(html, "<tr><td>targ</td><td>target</td><td>seccomp+uid (unsafe) <span "
                                       "class=\"c2i\">weaker than bubblewrap</span></td><td class=\"num\">1</td></tr>"),
                     1);
    assert_int_equal(occurrences(html, "<tr><td>safe</td><td>target</td><td>bubblewrap+seccomp+uid</td>"
                                       "<td class=\"num\">4</td></tr>"),
                     1);
    free(html);
    drift_store_close(st);
}

/* ---- the CLI names the sandbox ---- */

/* Runs `driftbench ARGS` with stderr into a malloc'd string; returns the exit code. */
static int run_cli(const char *args, char **err_out) {
    const char *b = getenv("DRIFT_BUILD");
    if (!b) fail_msg("DRIFT_BUILD is not set (run through ctest)");
    char out[600], cmd[2048];
    snprintf(out, sizeof out, "%s/cli.err", tmpdir);
    snprintf(cmd, sizeof cmd, "'%s/driftbench' %s >/dev/null 2>'%s'", b, args, out);
    int rc = system(cmd);
    FILE *f = fopen(out, "rb");
    assert_non_null(f);
    util_buf buf = {0};
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) buf_append(&buf, chunk, n);
    fclose(f);
    *err_out = buf.data ? buf_steal(&buf) : util_strdup("");
    fprintf(stderr, "$ driftbench %s\n%s", args, *err_out);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* A store with one unscored code answer; returns its path. */
static void code_store(const char *name, char *path, size_t cap) {
    drift_store *st = open_store(name);
    db_path(path, cap, name);
    const char *ids[] = {"k0"};
    const drift_workload wls[] = {DRIFT_WL_CODE};
    const char *refs[] = {REF_ADD};
    int64_t rowid;
    put_prompts(st, "c", ids, wls, refs, 1, &rowid);
    int64_t run = new_run(st, "r");
    const char *texts[] = {"    return a + b\n"};
    put_answers(st, run, &rowid, texts, 1);
    drift_store_close(st);
}

static void test_cli_sandbox_line(void **state) {
    (void)state;
    char db[512], args[1024];
    char *e = NULL;
    drift_code_opts co;
    drift_code_opts_default(&co);
    char mech[128];
    drift_error err = {0};
    int have = drift_sandbox_check(&co, mech, sizeof mech, &err) == DRIFT_OK;

    code_store("cli1.db", db, sizeof db);
    snprintf(args, sizeof args, "score --db '%s' --jobs 1", db);
    assert_int_equal(run_cli(args, &e), 0);
    if (have) {
        char line[256];
        snprintf(line, sizeof line, "score: code sandbox: %s\n", mech);
        assert_int_equal(occurrences(e, "score: code sandbox: "), 1);
        assert_non_null(strstr(e, line));
        assert_int_equal(occurrences(e, "score: warning: code sandbox"), drift_sandbox_weak(mech) ? 1 : 0);
    } else {
        assert_null(strstr(e, "score: code sandbox: ")); /* the summary says why nothing ran */
    }
    free(e);
    /* nothing left to run: nothing said */
    assert_int_equal(run_cli(args, &e), 0);
    assert_null(strstr(e, "code sandbox"));
    free(e);

    /* an interpreter no isolation works with, run anyway: a warning */
    code_store("cli2.db", db, sizeof db);
    snprintf(args, sizeof args, "score --db '%s' --jobs 1 --python /bin/false --unsafe-code-exec", db);
    assert_int_equal(run_cli(args, &e), 0);
    assert_int_equal(occurrences(e, "score: code sandbox: "), 1);
    assert_non_null(strstr(e, "(unsafe)\n"));
    assert_int_equal(occurrences(e, "score: warning: code sandbox '"), 1);
    assert_non_null(strstr(e, "is weaker than bubblewrap"));
    free(e);
    /* --quiet keeps the warning, not the line */
    code_store("cli3.db", db, sizeof db);
    snprintf(args, sizeof args, "--quiet score --db '%s' --jobs 1 --python /bin/false --unsafe-code-exec", db);
    assert_int_equal(run_cli(args, &e), 0);
    assert_null(strstr(e, "score: code sandbox: "));
    assert_int_equal(occurrences(e, "score: warning: code sandbox '"), 1);
    free(e);
}

/* ---- interruption ---- */

static double g_cancel_at_ms;
static int cancel_after(void *user) {
    (void)user;
    return util_now_ms() >= g_cancel_at_ms;
}

/* A Ctrl-C while code answers run (each would sleep 30 s): scoring stops in
 * well under the programs' timeout, nothing half-judged is stored, and the
 * answers stay pending for the next score. */
static void test_cancel_code(void **state) {
    (void)state;
    char mech[128];
    require_sandbox(mech, sizeof mech);
    drift_error err = {0};
    drift_store *st = open_store("cancel.db");
    const char *ids[] = {"s0", "s1", "s2"};
    const drift_workload wls[] = {DRIFT_WL_CODE, DRIFT_WL_CODE, DRIFT_WL_CODE};
    const char *refs[] = {REF_ADD, REF_ADD, REF_ADD};
    int64_t rowids[3];
    put_prompts(st, "c", ids, wls, refs, 3, rowids);
    int64_t run = new_run(st, "r");
    const char *texts[] = {"    import time\n    time.sleep(30)\n", "    import time\n    time.sleep(30)\n",
                           "    import time\n    time.sleep(30)\n"};
    put_answers(st, run, rowids, texts, 3);
    drift_score_opts so;
    drift_score_opts_default(&so);
    so.jobs = 2;
    so.cancel = cancel_after;
    double t0 = util_now_ms();
    g_cancel_at_ms = t0 + 500;
    drift_score_summary sum;
    assert_int_equal(drift_score_run(st, "r", &so, &sum, &err), DRIFT_ERR_CANCELLED);
    double took = util_now_ms() - t0;
    fprintf(stderr, "score cancelled after %.0f ms\n", took);
    assert_true(took < 3000);
    for (int i = 0; i < 3; i++) assert_int_equal(latest_id(st, response_of(st, run, ids[i])), 0);
    drift_store_close(st);
}

static int setup(void **state) {
    (void)state;
    make_tmpdir();
    return 0;
}

static int teardown(void **state) {
    (void)state;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "cleanup of %s failed\n", tmpdir);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_retry_math),      cmocka_unit_test(test_retry_code),
        cmocka_unit_test(test_sandbox_weak),    cmocka_unit_test(test_sandbox_compare),
        cmocka_unit_test(test_cli_sandbox_line), cmocka_unit_test(test_cancel_code),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
