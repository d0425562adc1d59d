/* test_report.c - the four renderings of a comparison: JSON field names of
 * DESIGN.md's contract and their values, text table and verdict line,
 * markdown table, JUnit XML (escaping, one testcase per workload, failures),
 * and answer excerpts quoted from the store. Then the pure renderers on
 * hand-built structs, no store anywhere: a comparison with its flips'
 * details, ANOVA, PRI (evaluation, prediction, the matrix summaries),
 * monitor and the flip table. Outside text at its worst (issue 34):
 * hostile labels, configuration values, prompt ids, evaluator and sandbox
 * names, server errors and answers through text, markdown, JUnit and JSON
 * of a comparison and through the monitor, divergence, ANOVA and PRI
 * renderers: nothing commands a terminal or a CI runner (hostile.h's
 * check), the XML keeps to XML's characters, the JSON parses with every
 * flip present.
 * A deterministic rendering is compared whole with its golden file,
 * tests/data/golden/report_TEST_CASE.EXT (DRIFT_UPDATE_GOLDEN=1 rewrites
 * them; read the diff); what a golden file cannot say stays an explicit
 * check beside it: no control byte (hostile.h), XML's characters, "nan"
 * never printed, a markdown row's column count, counts from the test's own
 * data, JSON values through jansson, two renderings that must agree. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>

#include <math.h>

#include "compare_fixture.h"
#include "driftbench/divergence.h"
#include "driftbench/report.h"
#include "support/golden.h"
#include "unit/hostile.h"
#include "util/util.h"

static drift_comparison *cmp_fixture(drift_store **st_out, const char *budgets) {
    drift_store *st = fx_build(fx_path("rep.db"));
    drift_compare_opts o;
    drift_compare_opts_default(&o);
    drift_error err = {0};
    if (budgets) assert_int_equal(drift_compare_parse_budgets(&o, budgets, &err), DRIFT_OK);
    drift_comparison *c = NULL;
    assert_int_equal(drift_compare_runs(st, "base", "targ", &o, &c, &err), DRIFT_OK);
    *st_out = st;
    return c;
}

static int key_set_is(json_t *o, const char *const *keys) {
    size_t n = 0;
    for (; keys[n]; n++)
        if (!json_object_get(o, keys[n])) {
            fprintf(stderr, "missing key %s\n", keys[n]);
            return 0;
        }
    if (json_object_size(o) != n) {
        const char *k;
        json_t *v;
        json_object_foreach(o, k, v) fprintf(stderr, "key: %s\n", k);
        return 0;
    }
    return 1;
}

/* One rendering compared whole with tests/data/golden/NAME (support/golden.h;
 * DRIFT_UPDATE_GOLDEN=1 rewrites it). NAME is report_TEST_CASE.EXT. */
static void golden(const char *name, const char *s) {
    char why[4096];
    if (golden_match(name, s, strlen(s), why, sizeof why)) fail_msg("%s\n--- got\n%s", why, s);
}

static void test_format_parse(void **state) {
    (void)state;
    drift_format f;
    drift_error err = {0};
    assert_int_equal(drift_format_parse("json", &f, &err), DRIFT_OK);
    assert_int_equal(f, DRIFT_FORMAT_JSON);
    assert_int_equal(drift_format_parse("Markdown", &f, &err), DRIFT_OK);
    assert_int_equal(f, DRIFT_FORMAT_MARKDOWN);
    assert_int_equal(drift_format_parse("junit", &f, &err), DRIFT_OK);
    assert_int_equal(f, DRIFT_FORMAT_JUNIT);
    assert_int_equal(drift_format_parse("text", &f, &err), DRIFT_OK);
    assert_int_equal(f, DRIFT_FORMAT_TEXT);
    assert_int_equal(drift_format_parse("yaml", &f, &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "yaml"));
}

static void test_json(void **state) {
    (void)state;
    drift_store *st;
    drift_comparison *c = cmp_fixture(&st, "math=20");
    char *s = NULL;
    drift_error err = {0};
    assert_int_equal(drift_report_comparison(c, st, DRIFT_FORMAT_JSON, &s, &err), DRIFT_OK);
    json_error_t je;
    json_t *root = json_loads(s, 0, &je);
    assert_non_null(root);
    static const char *const top[] = {"schema_version", "verdict", "decision", "baseline",
                                      "target", "taxonomy", "workloads", NULL};
    assert_true(key_set_is(root, top));
    /* the schema version first (docs/json-schema.md), then the decision leads:
     * "verdict", then its object */
    static const char lead[] = "{\n  \"schema_version\": 1,\n  \"verdict\": \"block\",\n  \"decision\": {";
    assert_int_equal(json_integer_value(json_object_get(root, "schema_version")), DRIFT_JSON_SCHEMA_VERSION);
    assert_true(!strncmp(s, lead, sizeof lead - 1));
    json_t *dec = json_object_get(root, "decision");
    static const char *const dec_keys[] = {"verdict", "exit_code", "summary", "rule", "confidence", "max_left_out",
                                           "gated", "rule_text", "error_rates", "workloads", NULL};
    assert_true(key_set_is(dec, dec_keys));
    assert_int_equal(json_integer_value(json_object_get(dec, "exit_code")), 1);
    assert_string_equal(json_string_value(json_object_get(dec, "rule")), "interval");
    json_t *dm = json_array_get(json_object_get(dec, "workloads"), 0);
    assert_string_equal(json_string_value(json_object_get(dm, "workload")), "math");
    assert_string_equal(json_string_value(json_object_get(dm, "decision")), "block");
    assert_string_equal(json_string_value(json_object_get(dm, "reason")), "left_out");
    assert_int_equal(json_integer_value(json_object_get(dm, "left_out")), 3);
    assert_non_null(strstr(json_string_value(json_object_get(dm, "note")), "3 of 20 pairs left out"));
    /* the taxonomy (additive): exactly these keys, the fixture's counts */
    json_t *tx = json_object_get(root, "taxonomy");
    static const char *const tx_keys[] = {"safety_flips", "safe_to_unsafe", "unsafe_to_safe", "correctness_flips",
                                          "correct_to_incorrect", "incorrect_to_correct", "semantic_drift", NULL};
    assert_true(key_set_is(tx, tx_keys));
    assert_int_equal(json_integer_value(json_object_get(tx, "safety_flips")), 3);
    assert_int_equal(json_integer_value(json_object_get(tx, "safe_to_unsafe")), 1);
    assert_int_equal(json_integer_value(json_object_get(tx, "unsafe_to_safe")), 2);
    assert_int_equal(json_integer_value(json_object_get(tx, "correctness_flips")), 5);
    assert_int_equal(json_integer_value(json_object_get(tx, "correct_to_incorrect")), 4);
    assert_int_equal(json_integer_value(json_object_get(tx, "incorrect_to_correct")), 1);
    assert_int_equal(json_integer_value(json_object_get(tx, "semantic_drift")), 2);
    static const char *const run[] = {"label", "config", NULL};
    assert_true(key_set_is(json_object_get(root, "baseline"), run));
    assert_string_equal(json_string_value(json_object_get(json_object_get(root, "baseline"), "label")), "base");
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(json_object_get(root, "target"), "config"), "hardware")),
                        "b200");
    assert_string_equal(json_string_value(json_object_get(root, "verdict")), "block");
    json_t *wls = json_object_get(root, "workloads");
    {
        /* without a store: no divergence, the contract's flip fields only */
        char *s2 = NULL;
        assert_int_equal(drift_report_comparison(c, NULL, DRIFT_FORMAT_JSON, &s2, &err), DRIFT_OK);
        json_t *r2 = json_loads(s2, 0, &je);
        assert_non_null(r2);
        json_t *f2 = json_array_get(json_object_get(json_array_get(json_object_get(r2, "workloads"), 0), "flipped"), 0);
        static const char *const contract_flip[] = {"prompt_id", "direction", NULL};
        assert_true(key_set_is(f2, contract_flip));
        assert_non_null(json_object_get(r2, "taxonomy"));
        json_decref(r2);
        free(s2);
    }
    assert_int_equal(json_array_size(wls), 4); /* math, safety, chat, long_context; no code */
    static const char *const base_keys[] = {"workload", "n", "errors", "flips", "flip_rate", "ci95",
                                            "correct_to_incorrect", "incorrect_to_correct", "baseline_accuracy",
                                            "target_accuracy", "net_change", "mcnemar_p", "budget", "verdict",
                                            "decision_reason", "decision_ci95", "unscored", "left_out_share",
                                            "more_pairs", "flipped", NULL};
    static const char *const safety_keys[] = {"workload", "n", "errors", "flips", "flip_rate", "ci95",
                                              "correct_to_incorrect", "incorrect_to_correct", "baseline_accuracy",
                                              "target_accuracy", "net_change", "mcnemar_p", "budget", "verdict",
                                              "decision_reason", "decision_ci95", "unscored", "left_out_share",
                                              "more_pairs", "flipped", "safe_to_unsafe", "unsafe_to_safe", NULL};
    static const char *const chat_keys[] = {"workload", "n", "errors", "flips", "flip_rate", "ci95",
                                            "correct_to_incorrect", "incorrect_to_correct", "baseline_accuracy",
                                            "target_accuracy", "net_change", "mcnemar_p", "budget", "verdict",
                                            "decision_reason", "decision_ci95", "unscored", "left_out_share",
                                            "more_pairs", "flipped", "sdr_mean", "semantic_drift_rate", NULL};
    size_t i;
    json_t *w;
    int seen = 0;
    json_array_foreach(wls, i, w) {
        const char *name = json_string_value(json_object_get(w, "workload"));
        if (!strcmp(name, "math")) {
            seen |= 1;
            assert_true(key_set_is(w, base_keys));
            assert_int_equal(json_integer_value(json_object_get(w, "n")), 17);
            assert_int_equal(json_integer_value(json_object_get(w, "errors")), 2);
            assert_int_equal(json_integer_value(json_object_get(w, "flips")), 4);
            assert_true(json_is_real(json_object_get(w, "flip_rate")));
            assert_true(fabs(json_real_value(json_object_get(w, "flip_rate")) - 4.0 / 17.0) < 1e-15);
            assert_true(fabs(json_real_value(json_array_get(json_object_get(w, "ci95"), 0)) - 0.09555044322080117) <
                        1e-12);
            assert_int_equal(json_integer_value(json_object_get(w, "correct_to_incorrect")), 3);
            assert_int_equal(json_integer_value(json_object_get(w, "incorrect_to_correct")), 1);
            assert_true(fabs(json_real_value(json_object_get(w, "mcnemar_p")) - 0.625) < 1e-12);
            assert_true(fabs(json_real_value(json_object_get(w, "budget")) - 0.2) < 1e-15);
            assert_string_equal(json_string_value(json_object_get(w, "verdict")), "block");
            assert_string_equal(json_string_value(json_object_get(w, "decision_reason")), "left_out");
            json_t *fl = json_object_get(w, "flipped");
            assert_int_equal(json_array_size(fl), 4);
            /* the contract's two fields plus the divergence (a store was given) */
            static const char *const flip_keys[] = {"prompt_id",        "direction",  "identical", "first_diff_byte",
                                                    "first_diff_char",  "first_diff_token", "token_unit", "margin",
                                                    "kl",               "diff",       NULL};
            json_t *f0 = json_array_get(fl, 0);
            assert_true(key_set_is(f0, flip_keys));
            assert_string_equal(json_string_value(json_object_get(f0, "prompt_id")), "m0");
            assert_true(json_is_false(json_object_get(f0, "identical")));
            assert_int_equal(json_integer_value(json_object_get(f0, "first_diff_char")), 0);
            assert_int_equal(json_integer_value(json_object_get(f0, "first_diff_byte")), 0);
            assert_int_equal(json_integer_value(json_object_get(f0, "first_diff_token")), 0);
            assert_string_equal(json_string_value(json_object_get(f0, "token_unit")), "word"); /* no logprobs */
            assert_true(json_is_null(json_object_get(f0, "margin")));
            assert_true(json_is_null(json_object_get(f0, "kl")));
            assert_string_equal(json_string_value(json_object_get(f0, "diff")),
                                "[-baseline-] {+target+} answer of m0: shared words here, then [-BASE-] {+TARGET+} "
                                "TAIL");
            assert_string_equal(json_string_value(json_object_get(json_array_get(fl, 0), "direction")),
                                "correct_to_incorrect");
            assert_string_equal(json_string_value(json_object_get(json_array_get(fl, 3), "direction")),
                                "incorrect_to_correct");
        } else if (!strcmp(name, "safety")) {
            seen |= 2;
            assert_true(key_set_is(w, safety_keys));
            assert_int_equal(json_integer_value(json_object_get(w, "safe_to_unsafe")), 1);
            assert_int_equal(json_integer_value(json_object_get(w, "unsafe_to_safe")), 2);
            assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(w, "flipped"), 0),
                                                                  "direction")),
                                "safe_to_unsafe");
        } else if (!strcmp(name, "chat")) {
            seen |= 4;
            assert_true(key_set_is(w, chat_keys));
            assert_true(fabs(json_real_value(json_object_get(w, "sdr_mean")) - 0.4) < 1e-6);
            assert_true(fabs(json_real_value(json_object_get(w, "semantic_drift_rate")) - 0.5) < 1e-15);
            assert_true(json_is_null(json_object_get(w, "mcnemar_p")));
            assert_true(fabs(json_real_value(json_object_get(w, "budget")) - 0.05) < 1e-15); /* chat's default */
            assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(w, "flipped"), 0),
                                                                  "direction")),
                                "semantic_drift");
        } else if (!strcmp(name, "long_context")) {
            seen |= 8;
            assert_true(key_set_is(w, base_keys));
        }
    }
    assert_int_equal(seen, 15);
    json_decref(root);
    free(s);
    drift_comparison_free(c);
    drift_store_close(st);
}

static void test_text(void **state) {
    (void)state;
    drift_store *st;
    drift_comparison *c = cmp_fixture(&st, NULL);
    char *s = NULL;
    drift_error err = {0};
    /* with a store: the decision, the taxonomy, the table, every flip with
     * where its answers part, its diff and excerpts */
    assert_int_equal(drift_report_comparison(c, st, DRIFT_FORMAT_TEXT, &s, &err), DRIFT_OK);
    golden("report_text_store.txt", s);
    free(s);
    /* no store: no excerpts */
    assert_int_equal(drift_report_comparison(c, NULL, DRIFT_FORMAT_TEXT, &s, &err), DRIFT_OK);
    golden("report_text_nostore.txt", s);
    free(s);
    drift_comparison_free(c);
    drift_store_close(st);

    /* safety alone gated: DEPLOY, math reported, not decided */
    c = cmp_fixture(&st, "safety=70,math=none,chat=none,long=none");
    assert_int_equal(drift_report_comparison(c, NULL, DRIFT_FORMAT_TEXT, &s, &err), DRIFT_OK);
    golden("report_text_deploy.txt", s);
    free(s);
    drift_comparison_free(c);
    drift_store_close(st);
}

static void test_markdown(void **state) {
    (void)state;
    drift_store *st;
    drift_comparison *c = cmp_fixture(&st, NULL);
    char *s = NULL;
    drift_error err = {0};
    assert_int_equal(drift_report_comparison(c, st, DRIFT_FORMAT_MARKDOWN, &s, &err), DRIFT_OK);
    golden("report_markdown_store.md", s);
    /* beside the golden file, the rule: a row has its table's column count */
    const char *fh = strstr(s, "| workload | prompt | direction | first difference | diff |");
    assert_non_null(fh);
    int fcols = 0, rcols = 0;
    for (const char *p = fh; *p && *p != '\n'; p++) fcols += *p == '|';
    for (const char *p = strstr(s, "| safety | `s0`"); *p && *p != '\n'; p++) rcols += *p == '|';
    assert_int_equal(rcols, fcols);
    /* every table row has the header's column count */
    int header_cols = 0;
    for (const char *p = strstr(s, "| workload | n |"); *p && *p != '\n'; p++) header_cols += *p == '|';
    const char *row = strstr(s, "| math | 17");
    int cols = 0;
    for (const char *p = row; *p && *p != '\n'; p++) cols += *p == '|';
    assert_int_equal(cols, header_cols);
    free(s);
    drift_comparison_free(c);
    drift_store_close(st);
}

static void test_junit(void **state) {
    (void)state;
    /* a hand-built comparison with labels that need escaping */
    drift_comparison c;
    memset(&c, 0, sizeof c);
    c.baseline.label = (char *)"h100 <fp16> & \"vllm\"";
    c.target.label = (char *)"b200'fp8";
    c.baseline.config_json = c.target.config_json = (char *)"{}";
    c.present[DRIFT_WL_MATH] = c.present[DRIFT_WL_CODE] = 1;
    drift_flip fl = {.prompt_id = "id<&>\x01", .direction = -1};
    c.wl[DRIFT_WL_MATH] = (drift_wl_result){.workload = DRIFT_WL_MATH, .n = 100, .flips = 5, .flip_rate = 0.05,
                                            .ci95 = {0.02, 0.11}, .correct_to_incorrect = 5, .budget = 0.01,
                                            .pass = 0, .flipped = &fl, .n_flipped = 1, .mcnemar_p = 0.0625,
                                            .sdr_mean = NAN, .semantic_drift_rate = NAN};
    c.wl[DRIFT_WL_CODE] = (drift_wl_result){.workload = DRIFT_WL_CODE, .n = 164, .pass = 1, .budget = 0.005,
                                            .mcnemar_p = 1, .baseline_accuracy = NAN, .sdr_mean = NAN, .semantic_drift_rate = NAN};
    c.max_left_out = 0.05;
    drift_comparison_decide(&c); /* math 5/100 over 1%: BLOCK; code 0/164 at 0.5%: INCONCLUSIVE */
    char *s = NULL;
    drift_error err = {0};
    assert_int_equal(drift_report_comparison(&c, NULL, DRIFT_FORMAT_JUNIT, &s, &err), DRIFT_OK);
    golden("report_junit_escaping.xml", s);
    assert_null(strchr(s, '\x01')); /* a control byte in an id: a visible escape, never the byte */
    /* one testcase per present workload, both failing (BLOCK, INCONCLUSIVE) */
    int failures = 0;
    for (const char *p = s; (p = strstr(p, "<failure")) != NULL; p++) failures++;
    assert_int_equal(failures, 2);
    int cases = 0;
    for (const char *p = s; (p = strstr(p, "<testcase ")) != NULL; p++) cases++;
    assert_int_equal(cases, 2);
    free(s);

    /* and JSON of the same: NaN and no budget become null */
    c.wl[DRIFT_WL_CODE].budget = -1;
    assert_int_equal(drift_report_comparison(&c, NULL, DRIFT_FORMAT_JSON, &s, &err), DRIFT_OK);
    json_error_t je;
    json_t *root = json_loads(s, 0, &je);
    assert_non_null(root);
    json_t *code = json_array_get(json_object_get(root, "workloads"), 1);
    assert_string_equal(json_string_value(json_object_get(code, "workload")), "code");
    assert_true(json_is_null(json_object_get(code, "budget")));
    assert_true(json_is_null(json_object_get(code, "baseline_accuracy"))); /* NaN -> null */
    assert_true(json_is_real(json_object_get(code, "target_accuracy")));
    json_decref(root);
    free(s);
}

/* ---- the pure renderers, on hand-built structs ---- */

/* A comparison of two flips in math, built by hand. */
static void hand_comparison(drift_comparison *c, drift_flip *fl) {
    memset(c, 0, sizeof *c);
    c->baseline.label = (char *)"base";
    c->target.label = (char *)"targ";
    c->baseline.config_json = c->target.config_json = (char *)"{\"model\":\"m\"}";
    c->present[DRIFT_WL_MATH] = 1;
    fl[0] = (drift_flip){.prompt_id = "p0", .direction = -1, .value = NAN};
    fl[1] = (drift_flip){.prompt_id = "p1", .direction = 1, .value = NAN};
    c->wl[DRIFT_WL_MATH] = (drift_wl_result){.workload = DRIFT_WL_MATH, .n = 10, .flips = 2, .flip_rate = 0.2,
                                             .ci95 = {0.05, 0.5}, .correct_to_incorrect = 1, .incorrect_to_correct = 1,
                                             .budget = -1, .pass = 1, .flipped = fl, .n_flipped = 2, .mcnemar_p = 1,
                                             .sdr_mean = NAN, .semantic_drift_rate = NAN};
    c->pass = 1;
}

static void test_comparison_details(void **state) {
    (void)state;
    drift_comparison c;
    drift_flip fl[2];
    hand_comparison(&c, fl);
    drift_flip_detail det[2];
    memset(det, 0, sizeof det);
    det[0].div = (drift_divergence){.first_diff_byte = 4, .first_diff_char = 4, .first_diff_token = 1,
                                    .token_unit = DRIFT_UNIT_WORD, .margin = NAN, .kl = NAN,
                                    .diff = (char *)"the [-4-] {+5+}"};
    det[0].base_text = (char *)"the 4\nanswer";
    det[0].targ_text = (char *)"the 5 answer";
    det[1].div.error = (char *)"prompt p1: gone";
    drift_comparison_details d;
    memset(&d, 0, sizeof d);
    d.flips[DRIFT_WL_MATH] = det;
    d.n[DRIFT_WL_MATH] = 2;
    char *s = NULL;
    drift_error err = {0};
    assert_int_equal(drift_comparison_render(&c, &d, DRIFT_FORMAT_TEXT, &s, &err), DRIFT_OK);
    golden("report_comparison_details_details.txt", s);
    free(s);
    assert_int_equal(drift_comparison_render(&c, &d, DRIFT_FORMAT_MARKDOWN, &s, &err), DRIFT_OK);
    golden("report_comparison_details_details.md", s);
    free(s);
    assert_int_equal(drift_comparison_render(&c, &d, DRIFT_FORMAT_JSON, &s, &err), DRIFT_OK);
    json_error_t je;
    json_t *root = json_loads(s, 0, &je);
    json_t *f = json_object_get(json_array_get(json_object_get(root, "workloads"), 0), "flipped");
    assert_int_equal(json_integer_value(json_object_get(json_array_get(f, 0), "first_diff_char")), 4);
    assert_string_equal(json_string_value(json_object_get(json_array_get(f, 0), "token_unit")), "word");
    assert_string_equal(json_string_value(json_object_get(json_array_get(f, 1), "divergence_error")),
                        "prompt p1: gone");
    json_decref(root);
    free(s);
    /* without details: the same as the convenience without a store */
    char *s2 = NULL;
    assert_int_equal(drift_comparison_render(&c, NULL, DRIFT_FORMAT_TEXT, &s, &err), DRIFT_OK);
    assert_int_equal(drift_report_comparison(&c, NULL, DRIFT_FORMAT_TEXT, &s2, &err), DRIFT_OK);
    assert_string_equal(s, s2);
    golden("report_comparison_details_none.txt", s);
    free(s);
    free(s2);
    assert_int_equal(drift_comparison_render(&c, NULL, (drift_format)9, &s, &err), DRIFT_ERR_INVALID);
    assert_null(s);
}

/* An ANOVA table of two rows, built by hand. */
static void hand_anova(drift_anova_table *a, drift_anova_row *rows) {
    memset(a, 0, sizeof *a);
    rows[0] = (drift_anova_row){.term = (char *)"C(hardware)", .df = 1, .n_columns = 1, .sum_sq = 2.5,
                                .mean_sq = 2.5, .F = 5, .p = 0.04, .p_bh = 0.04, .eta_sq = 0.25,
                                .eta_sq_partial = 0.25, .ss_share = 0.25};
    rows[1] = (drift_anova_row){.term = (char *)"Residual", .df = 15, .n_columns = 0, .sum_sq = 7.5, .mean_sq = 0.5,
                                .F = NAN, .p = NAN, .p_bh = NAN, .eta_sq = 0.75,
                                .eta_sq_partial = NAN, .ss_share = 0.75};
    a->type = 2;
    a->formula = (char *)"flip_rate ~ C(hardware)";
    a->nobs = 17;
    a->n_columns = a->rank = 2;
    a->df_resid = 15;
    a->mse = 0.5;
    a->ss_total = 10;
    a->n_rows = 2;
    a->rows = rows;
}

static void test_anova_render(void **state) {
    (void)state;
    drift_anova_table a;
    drift_anova_row rows[2];
    hand_anova(&a, rows);
    const drift_anova_table *tables[] = {&a};
    drift_anova_artifact_row art = {.term = "C(hardware)", .F = 4.5, .p_corrected = 0.05, .eta_sq = 0.2,
                                    .sum_sq = 2, .df = 1, .p = 0.05};
    drift_anova_doc doc = {.table = "t.csv", .formula = a.formula, .tables = tables, .n_tables = 1};
    char *s = NULL;
    drift_error err = {0};
    assert_int_equal(drift_anova_render(&doc, DRIFT_FORMAT_TEXT, &s, &err), DRIFT_OK);
    golden("report_anova_render_type2.txt", s);
    free(s);
    doc.type3 = &a;
    doc.artifact = &art;
    doc.n_artifact = 1;
    assert_int_equal(drift_anova_render(&doc, DRIFT_FORMAT_TEXT, &s, &err), DRIFT_OK);
    golden("report_anova_render_artifact.txt", s);
    free(s);
    assert_int_equal(drift_anova_render(&doc, DRIFT_FORMAT_JSON, &s, &err), DRIFT_OK);
    json_error_t je;
    json_t *root = json_loads(s, 0, &je);
    assert_non_null(root);
    assert_string_equal(json_string_value(json_object_get(root, "table")), "t.csv");
    json_t *r1 = json_array_get(json_object_get(json_array_get(json_object_get(root, "tables"), 0), "rows"), 1);
    assert_true(json_is_null(json_object_get(r1, "F")));
    assert_int_equal(json_array_size(json_object_get(root, "artifact_type3")), 1);
    json_decref(root);
    free(s);
    assert_int_equal(drift_anova_render(&doc, DRIFT_FORMAT_MARKDOWN, &s, &err), DRIFT_ERR_INVALID);
}

static void test_summaries_render(void **state) {
    (void)state;
    drift_table_analyses an;
    memset(&an, 0, sizeof an);
    an.n_rows = 3;
    an.n_params = 4;
    an.pri_asked = 1;
    char *s = NULL;
    drift_error err = {0};
    assert_int_equal(drift_anova_summary_render(&an, &s, &err), DRIFT_OK);
    assert_string_equal(s, "ANOVA: too few rows (3) for the 4 parameters of the factors that vary plus two residual "
                           "degrees of freedom; skipped.\n");
    free(s);
    assert_int_equal(drift_pri_summary_render(&an, &s, &err), DRIFT_OK);
    assert_string_equal(s, "PRI: too few rows (3, need 20) to fit and evaluate; skipped.\n");
    free(s);
    /* type 1 failed, type 2 computed; the PRI failed */
    drift_anova_table a;
    drift_anova_row rows[2];
    hand_anova(&a, rows);
    an.n_rows = 40;
    an.anova_fits = an.pri_fits = 1;
    an.formula = a.formula;
    an.anova[2] = &a;
    an.anova_error[1].code = DRIFT_ERR_NUMERIC;
    snprintf(an.anova_error[1].msg, sizeof an.anova_error[1].msg, "singular");
    an.pri_error.code = DRIFT_ERR_XGBOOST;
    snprintf(an.pri_error.msg, sizeof an.pri_error.msg, "no booster");
    assert_int_equal(drift_anova_summary_render(&an, &s, &err), DRIFT_OK);
    golden("report_summaries_render_anova.txt", s);
    /* the rule beside it: a missing F or p prints "-", never "nan" */
    assert_null(strcasestr(s, "nan"));
    free(s);
    assert_int_equal(drift_pri_summary_render(&an, &s, &err), DRIFT_OK);
    assert_string_equal(s, "PRI: not computable: no booster\n");
    free(s);
    an.pri_asked = 0;
    assert_int_equal(drift_pri_summary_render(&an, &s, &err), DRIFT_OK);
    assert_string_equal(s, "");
    free(s);
}

static void test_pri_render(void **state) {
    (void)state;
    drift_pri_query q = {"m", "b200", "fp8", "vllm", "math"}, b = {"m", "h100", "fp16", "vllm", NULL};
    drift_pri_prediction r = {.flip_rate = 2.5, .lo = 1, .hi = 4, .coverage = 0.95, .risk = "medium",
                              .change = "systematic", .advice = "confirm on ~100 prompts"};
    snprintf(r.differs, sizeof r.differs, "hardware,precision");
    char *s = NULL;
    drift_error err = {0};
    assert_int_equal(drift_pri_prediction_render(&q, &b, &r, DRIFT_FORMAT_TEXT, &s, &err), DRIFT_OK);
    assert_string_equal(s, "config    m / b200 / fp8 / vllm, workload math\n"
                           "baseline  m / h100 / fp16 / vllm\n"
                           "predicted flip rate 2.50%  (95% interval 1.00% .. 4.00%, from out-of-fold residuals)\n"
                           "risk      medium\n"
                           "change    systematic (hardware,precision)\n"
                           "advice    confirm on ~100 prompts\n");
    free(s);
    assert_int_equal(drift_pri_prediction_render(&q, &b, &r, DRIFT_FORMAT_JSON, &s, &err), DRIFT_OK);
    json_error_t je;
    json_t *root = json_loads(s, 0, &je);
    assert_true(fabs(json_real_value(json_object_get(root, "flip_rate")) - 0.025) < 1e-12);
    assert_string_equal(json_string_value(json_object_get(json_object_get(root, "baseline"), "hardware")), "h100");
    json_decref(root);
    free(s);
    /* an evaluation: NaN R^2 is null in JSON; in text it says why ("no variance": the test rows share one
     * flip rate; "too few rows" under two), never "nan" */
    drift_pri_eval e;
    memset(&e, 0, sizeof e);
    e.random_split = (drift_pri_holdout){.name = "random 80/20", .n_train = 16, .n_test = 4, .train_r2 = 0.9,
                                         .test_r2 = NAN, .test_mae = 0.5, .paper_r2 = NAN, .depth = 3, .eta = 0.3};
    e.n_features = 7;
    e.abl_full = NAN;
    e.cv_r2_mean = e.cv_r2_sd = NAN;
    for (int k = 0; k < 5; k++) e.cv_fold_r2[k] = NAN;
    assert_int_equal(drift_pri_eval_render(&e, "t.csv", 1, 12, DRIFT_FORMAT_TEXT, &s, &err), DRIFT_OK);
    golden("report_pri_render_eval.txt", s);
    assert_null(strcasestr(s, "nan")); /* the rule: an undefined R^2 says why */
    free(s);
    /* the lab's PRI block: the same words, and one line that says what they mean */
    drift_pri_holdout lv[2] = {{.name = "precision=fp8", .n_train = 9, .n_test = 3, .test_r2 = NAN, .test_mae = 0},
                               {.name = "hardware=b200", .n_train = 11, .n_test = 1, .test_r2 = NAN, .test_mae = 0.25}};
    e.levels = lv;
    e.n_levels = 2;
    drift_table_analyses an;
    memset(&an, 0, sizeof an);
    an.n_rows = 20;
    an.pri_asked = an.pri_fits = 1;
    an.pri = &e;
    assert_int_equal(drift_pri_summary_render(&an, &s, &err), DRIFT_OK);
    golden("report_pri_render_summary.txt", s);
    assert_null(strcasestr(s, "nan"));
    free(s);
    e.levels = NULL;
    e.n_levels = 0;
    assert_int_equal(drift_pri_eval_render(&e, "t.csv", 0, 12, DRIFT_FORMAT_JSON, &s, &err), DRIFT_OK);
    root = json_loads(s, 0, &je);
    assert_non_null(root);
    assert_true(json_is_null(json_object_get(json_object_get(root, "random_split"), "test_r2")));
    assert_int_equal(json_integer_value(json_object_get(json_object_get(root, "random_split"), "n_train")), 16);
    json_decref(root);
    free(s);
}

static void test_monitor_render(void **state) {
    (void)state;
    drift_monitor_data d;
    memset(&d, 0, sizeof d);
    snprintf(d.embedder, sizeof d.embedder, "embed:x");
    d.dim = 8;
    d.n_ref = d.answered_ref = 10;
    d.n_cur = 9;
    d.answered_cur = 10;
    drift_monitor_report rep;
    memset(&rep, 0, sizeof rep);
    rep.dim = 8;
    for (int m = 0; m < DRIFT_MON_COUNT; m++) {
        rep.r[m].method = (drift_monitor_method)m;
        rep.r[m].score = 0.1;
        rep.r[m].threshold = 0.2;
        snprintf(rep.r[m].rule, sizeof rep.r[m].rule, "score > 0.2");
    }
    drift_comparison c;
    drift_flip fl[2];
    hand_comparison(&c, fl);
    char *s = NULL;
    drift_error err = {0};
    assert_int_equal(drift_monitor_render(&d, &rep, &c, "base", "targ", DRIFT_FORMAT_TEXT, &s, &err), DRIFT_OK);
    golden("report_monitor_render_text.txt", s);
    free(s);
    assert_int_equal(drift_monitor_render(&d, &rep, &c, "base", "targ", DRIFT_FORMAT_JSON, &s, &err), DRIFT_OK);
    json_error_t je;
    json_t *root = json_loads(s, 0, &je);
    assert_int_equal(json_integer_value(json_object_get(root, "total_flips")), 2);
    assert_int_equal(json_array_size(json_object_get(root, "detectors")), DRIFT_MON_COUNT);
    json_decref(root);
    free(s);
    assert_int_equal(drift_monitor_render(&d, &rep, &c, "base", "targ", DRIFT_FORMAT_JUNIT, &s, &err),
                     DRIFT_ERR_INVALID);
}

static void test_table_render(void **state) {
    (void)state;
    drift_table *t = NULL;
    drift_error err = {0};
    assert_int_equal(drift_table_create(NULL, 0, 1, &t, &err), DRIFT_OK);
    char *s = NULL;
    assert_int_equal(drift_table_render_text(t, &s, &err), DRIFT_OK);
    assert_string_equal(s, "(no configuration has pairs against its baseline)\n");
    free(s);
    const char *safety[] = {"m", "b200", "fp8", "vllm", "safety"}, *math[] = {"m", "b200", "fp8", "vllm", "math"};
    assert_int_equal(drift_table_append(t, "m/b200", safety, 10, 1, 10, 2.5, 40, &err), DRIFT_OK);
    assert_int_equal(drift_table_append(t, "m/b200", math, 0, 0, 20, 0, 16.1, &err), DRIFT_OK);
    assert_int_equal(drift_table_render_text(t, &s, &err), DRIFT_OK);
    golden("report_table_render_two.txt", s); /* math first (the workloads' order), then safety */
    free(s);
    drift_table_free(t);
}

static int teardown(void **state) {
    (void)state;
    fx_cleanup();
    return 0;
}

/* ---- golden files: the first section of every format ----
 * Each format leads with the gate's decision; its first section (text: to
 * the "error rates:" line; JSON: the "verdict" and "decision" members;
 * markdown: to the flip taxonomy; JUnit: to the end of <properties>;
 * GitHub: the annotations before the fenced summary) is compared byte for
 * byte with tests/data/golden/compare_CASE.FMT (tests/support/golden.h:
 * DRIFT_UPDATE_GOLDEN=1 rewrites the files instead; then read the diff
 * before committing). */

static char *first_section(const char *s, drift_format fmt) {
    const char *end = NULL;
    switch (fmt) {
    case DRIFT_FORMAT_TEXT: {
        const char *e = strstr(s, "\nerror rates: ");
        end = e ? strchr(e + 1, '\n') + 1 : NULL;
        break;
    }
    case DRIFT_FORMAT_MARKDOWN: end = strstr(s, "**Flip taxonomy**"); break;
    case DRIFT_FORMAT_JUNIT: {
        const char *e = strstr(s, "</properties>\n");
        end = e ? e + strlen("</properties>\n") : NULL;
        break;
    }
    case DRIFT_FORMAT_GITHUB: end = strstr(s, "::stop-commands::"); break;
    case DRIFT_FORMAT_JSON: {
        json_error_t je;
        json_t *root = json_loads(s, 0, &je), *out = json_object();
        json_object_set(out, "verdict", json_object_get(root, "verdict"));
        json_object_set(out, "decision", json_object_get(root, "decision"));
        char *d = json_dumps(out, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15));
        json_decref(root);
        json_decref(out);
        char *r = d ? util_asprintf("%s\n", d) : NULL;
        free(d);
        return r;
    }
    default: break;
    }
    if (!end) return NULL;
    char *r = malloc((size_t)(end - s) + 1);
    memcpy(r, s, (size_t)(end - s));
    r[end - s] = '\0';
    return r;
}

static void golden_check(const drift_comparison *c, const char *name) {
    static const struct {
        drift_format f;
        const char *ext;
    } fmts[] = {{DRIFT_FORMAT_TEXT, "txt"},
                {DRIFT_FORMAT_JSON, "json"},
                {DRIFT_FORMAT_MARKDOWN, "md"},
                {DRIFT_FORMAT_JUNIT, "xml"},
                {DRIFT_FORMAT_GITHUB, "github"}};
    for (size_t i = 0; i < sizeof fmts / sizeof fmts[0]; i++) {
        char *s = NULL;
        drift_error err = {0};
        assert_int_equal(drift_comparison_render(c, NULL, fmts[i].f, &s, &err), DRIFT_OK);
        char *got = first_section(s, fmts[i].f);
        if (!got) fail_msg("%s.%s: no first section in:\n%s", name, fmts[i].ext, s);
        char file[256], why[4096];
        snprintf(file, sizeof file, "compare_%s.%s", name, fmts[i].ext);
        if (golden_match(file, got, strlen(got), why, sizeof why)) fail_msg("%s\n--- got\n%s", why, got);
        free(got);
        free(s);
    }
}

static void test_golden_first_sections(void **state) {
    (void)state;
    /* BLOCK: the store fixture (math left out, safety over, chat and
     * long_context left out), the defaults */
    drift_store *st;
    drift_comparison *c = cmp_fixture(&st, NULL);
    golden_check(c, "block");
    drift_comparison_free(c);
    drift_store_close(st);

    /* INCONCLUSIVE and not gated, hand-built: 0 of 12 math pairs against
     * 0.5% (the case), code deployed, chat opted out */
    drift_comparison h;
    memset(&h, 0, sizeof h);
    h.baseline.label = (char *)"h100";
    h.target.label = (char *)"b200";
    h.baseline.config_json = h.target.config_json = (char *)"{}";
    h.present[DRIFT_WL_MATH] = h.present[DRIFT_WL_CODE] = h.present[DRIFT_WL_CHAT] = 1;
    h.wl[DRIFT_WL_MATH] = (drift_wl_result){.workload = DRIFT_WL_MATH, .n = 12, .budget = 0.005, .mcnemar_p = 1,
                                            .baseline_accuracy = 0.5, .target_accuracy = 0.5, .sdr_mean = NAN,
                                            .semantic_drift_rate = NAN};
    h.wl[DRIFT_WL_CODE] = (drift_wl_result){.workload = DRIFT_WL_CODE, .n = 2000, .flips = 1, .flip_rate = 0.0005,
                                            .budget = 0.005, .mcnemar_p = 1, .sdr_mean = NAN, .semantic_drift_rate = NAN};
    h.wl[DRIFT_WL_CHAT] = (drift_wl_result){.workload = DRIFT_WL_CHAT, .n = 10, .flips = 3, .flip_rate = 0.3,
                                            .budget = -1, .mcnemar_p = NAN, .sdr_mean = 0.2,
                                            .semantic_drift_rate = 0.3};
    h.max_left_out = 0.05;
    h.sdr_threshold = 0.3;
    drift_comparison_decide(&h);
    assert_int_equal(h.decision, DRIFT_DECISION_INCONCLUSIVE);
    golden_check(&h, "inconclusive");

    /* ERROR: the target's requests all failed for math; safety never scored */
    memset(&h, 0, sizeof h);
    h.baseline.label = (char *)"h100";
    h.target.label = (char *)"down";
    h.baseline.config_json = h.target.config_json = (char *)"{}";
    h.present[DRIFT_WL_MATH] = h.present[DRIFT_WL_SAFETY] = 1;
    h.wl[DRIFT_WL_MATH] = (drift_wl_result){.workload = DRIFT_WL_MATH, .errors = 6, .errors_target = 6,
                                            .budget = 0.02, .mcnemar_p = 1, .baseline_accuracy = NAN,
                                            .target_accuracy = NAN, .sdr_mean = NAN, .semantic_drift_rate = NAN};
    h.wl[DRIFT_WL_SAFETY] = (drift_wl_result){.workload = DRIFT_WL_SAFETY, .unscored = 6, .budget = 0.01,
                                              .mcnemar_p = 1, .baseline_accuracy = NAN, .target_accuracy = NAN,
                                              .sdr_mean = NAN, .semantic_drift_rate = NAN};
    h.max_left_out = 0.05;
    h.rule = DRIFT_DECIDE_POINT; /* even the point rule: no evidence is an error */
    drift_comparison_decide(&h);
    assert_int_equal(h.decision, DRIFT_DECISION_NO_EVIDENCE);
    assert_int_equal(h.wl[DRIFT_WL_MATH].reason, DRIFT_REASON_ERRORS);
    assert_int_equal(h.wl[DRIFT_WL_SAFETY].reason, DRIFT_REASON_UNSCORED);
    golden_check(&h, "error");
}

/* ---- outside text at its worst (issue 34) ---- */

static void expect_safe(const char *what, const char *s) {
    const char *why = hostile_check(s, strlen(s), 1);
    if (why) fail_msg("%s: %s in:\n%s", what, why, s);
}

/* Only XML 1.0's characters (valid UTF-8, no C0 but tab/LF/CR, no U+FFFE/FFFF), no stray '<' or '&'. */
static void expect_xml_chars(const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        uint32_t cp = 0;
        size_t k = hostile_utf8(p, strlen((const char *)p), &cp);
        if (!k) fail_msg("invalid UTF-8 in the XML at %ld", (long)(p - (const unsigned char *)s));
        if ((cp < 0x20 && cp != '\t' && cp != '\n' && cp != '\r') || cp == 0xFFFE || cp == 0xFFFF)
            fail_msg("U+%04X is not an XML character", (unsigned)cp);
        if (cp == '&' && strncmp((const char *)p, "&amp;", 5) && strncmp((const char *)p, "&lt;", 4) &&
            strncmp((const char *)p, "&gt;", 4) && strncmp((const char *)p, "&quot;", 6) && strncmp((const char *)p, "&apos;", 6))
            fail_msg("a bare '&' in the XML");
        p += k;
    }
}

#define N_HOSTILE_FLIPS 5

static void test_hostile_comparison(void **state) {
    (void)state;
    drift_comparison c;
    drift_flip unused[2];
    hand_comparison(&c, unused);
    c.baseline.label = (char *)"base" HOSTILE;
    c.target.label = (char *)"\n::error::targ\x1b[2K";
    c.baseline.config_json = (char *)"{\"model\":\"m\\u001b[31m\\u202e\",\"zone\\n::error::k\":\"eu\xff\"}";
    c.target.config_json = (char *)"not json " HOSTILE;
    c.evaluator = (char *)"eval" HOSTILE;
    snprintf(c.sandboxes[0].mechanism, sizeof c.sandboxes[0].mechanism, "bwrap\x1b[2K\n::error::x\xe2\x80\xae\xff");
    c.sandboxes[0].baseline = c.sandboxes[0].target = c.sandboxes[0].weak = 1;
    c.n_sandboxes = 1;
    c.present[DRIFT_WL_CODE] = 1;
    c.wl[DRIFT_WL_CODE] = (drift_wl_result){.workload = DRIFT_WL_CODE, .n = 3, .budget = -1, .pass = 1, .mcnemar_p = 1,
                                            .sdr_mean = NAN, .semantic_drift_rate = NAN};
    drift_flip fl[N_HOSTILE_FLIPS] = {{.prompt_id = "p" HOSTILE, .direction = -1, .value = NAN},
                                      {.prompt_id = "\xff\xfe" "bad utf8 \xc3", .direction = 1, .value = NAN},
                                      {.prompt_id = "nonchar \xef\xbf\xbe\xef\xbf\xbf", .direction = -1, .value = NAN},
                                      {.prompt_id = HOSTILE_FORMULA, .direction = -1, .value = NAN},
                                      {.prompt_id = "##[error]x", .direction = 1, .value = NAN}};
    drift_wl_result *w = &c.wl[DRIFT_WL_MATH];
    w->flipped = fl;
    w->n_flipped = N_HOSTILE_FLIPS;
    w->flips = N_HOSTILE_FLIPS;
    w->flip_rate = 0.5;
    w->budget = 0.01;
    drift_comparison_decide(&c); /* math BLOCKs: JUnit lists its flipped ids */
    drift_flip_detail det[N_HOSTILE_FLIPS];
    memset(det, 0, sizeof det);
    for (int i = 0; i < N_HOSTILE_FLIPS; i++) {
        det[i].div = (drift_divergence){.first_diff_byte = 3, .first_diff_char = 3, .first_diff_token = 1,
                                        .token_unit = DRIFT_UNIT_WORD, .margin = NAN, .kl = NAN,
                                        .diff = (char *)"[-ok-] {+" HOSTILE "+}"};
        det[i].base_text = (char *)"ok, the answer is 4";
        det[i].targ_text = (char *)"ok," HOSTILE;
    }
    det[1].div = (drift_divergence){.error = (char *)"HTTP 500: " HOSTILE};
    drift_comparison_details d;
    memset(&d, 0, sizeof d);
    d.flips[DRIFT_WL_MATH] = det;
    d.n[DRIFT_WL_MATH] = N_HOSTILE_FLIPS;
    drift_error err = {0};
    char *s = NULL;
    /* text and markdown: nothing left to command */
    assert_int_equal(drift_comparison_render(&c, &d, DRIFT_FORMAT_TEXT, &s, &err), DRIFT_OK);
    expect_safe("text", s);
    golden("report_hostile_comparison_text.txt", s); /* every control shown as a visible escape */
    free(s);
    assert_int_equal(drift_comparison_render(&c, &d, DRIFT_FORMAT_MARKDOWN, &s, &err), DRIFT_OK);
    expect_safe("markdown", s);
    free(s);
    /* JUnit: XML's characters only, the ids escaped */
    assert_int_equal(drift_comparison_render(&c, &d, DRIFT_FORMAT_JUNIT, &s, &err), DRIFT_OK);
    expect_safe("junit", s);
    expect_xml_chars(s);
    golden("report_hostile_comparison_junit.xml", s);
    free(s);
    /* JSON: it parses, every flip is there (ids repaired), and it prints safely */
    assert_int_equal(drift_comparison_render(&c, &d, DRIFT_FORMAT_JSON, &s, &err), DRIFT_OK);
    expect_safe("json", s);
    json_error_t je;
    json_t *root = json_loads(s, 0, &je);
    if (!root) fail_msg("JSON does not parse: %s", je.text);
    json_t *wls = json_object_get(root, "workloads"), *math = NULL;
    for (size_t i = 0; i < json_array_size(wls); i++)
        if (!strcmp(json_string_value(json_object_get(json_array_get(wls, i), "workload")), "math"))
            math = json_array_get(wls, i);
    assert_non_null(math);
    json_t *flipped = json_object_get(math, "flipped");
    assert_int_equal(json_array_size(flipped), N_HOSTILE_FLIPS);
    assert_string_equal(json_string_value(json_object_get(json_array_get(flipped, 0), "prompt_id")), "p" HOSTILE_REPAIRED);
    assert_string_equal(json_string_value(json_object_get(json_array_get(flipped, 1), "prompt_id")),
                        "\xef\xbf\xbd\xef\xbf\xbd" "bad utf8 \xef\xbf\xbd");
    assert_string_equal(json_string_value(json_object_get(json_array_get(flipped, 4), "prompt_id")), "##[error]x");
    assert_string_equal(json_string_value(json_object_get(json_object_get(root, "target"), "label")),
                        "\n::error::targ\x1b[2K");
    assert_string_equal(json_string_value(json_object_get(json_object_get(json_object_get(root, "baseline"), "config"),
                                                           "zone\n::error::k")),
                        "eu\xef\xbf\xbd");
    json_decref(root);
    free(s);
}

static void test_hostile_other_renderers(void **state) {
    (void)state;
    drift_error err = {0};
    char *s = NULL;
    /* monitor */
    drift_monitor_data md;
    memset(&md, 0, sizeof md);
    snprintf(md.embedder, sizeof md.embedder, "emb\x1b]8;;x\x07\n::error::e");
    drift_monitor_report rep;
    memset(&rep, 0, sizeof rep);
    drift_comparison c;
    drift_flip fl[2];
    hand_comparison(&c, fl);
    assert_int_equal(drift_monitor_render(&md, &rep, &c, "b" HOSTILE, "t" HOSTILE, DRIFT_FORMAT_TEXT, &s, &err), DRIFT_OK);
    expect_safe("monitor text", s);
    free(s);
    assert_int_equal(drift_monitor_render(&md, &rep, &c, "b" HOSTILE, "t" HOSTILE, DRIFT_FORMAT_JSON, &s, &err), DRIFT_OK);
    expect_safe("monitor json", s);
    json_error_t je;
    json_t *root = json_loads(s, 0, &je);
    assert_non_null(root);
    assert_string_equal(json_string_value(json_object_get(root, "baseline")), "b" HOSTILE_REPAIRED);
    json_decref(root);
    free(s);
    /* token divergence */
    drift_tokdiv_prompt pr[2];
    memset(pr, 0, sizeof pr);
    pr[0] = (drift_tokdiv_prompt){.prompt_id = (char *)"p" HOSTILE, .workload = DRIFT_WL_MATH, .n_answer_tokens = 3,
                                  .first_diff = 1, .first_base_text = (char *)"\x1b[2K", .first_target_text = (char *)"\xe2\x80\xae"};
    pr[0].s.n = 3;
    pr[0].s.kl_mean = 0.5;
    pr[1] = (drift_tokdiv_prompt){.prompt_id = (char *)"q\xff", .workload = DRIFT_WL_MATH, .first_diff = -1,
                                  .error = (char *)"server said " HOSTILE};
    drift_tokdiv_report tr;
    memset(&tr, 0, sizeof tr);
    tr.baseline = (char *)"b" HOSTILE;
    tr.target = (char *)"t\n##[error]x";
    tr.baseline_spec = (char *)"http://x/v1?" HOSTILE;
    tr.target_spec = (char *)"embedded:m.gguf";
    tr.api = (char *)"chat";
    tr.prompts = pr;
    tr.n_prompts = 2;
    tr.n_skipped = 1;
    tr.present[DRIFT_WL_MATH] = 1;
    const int fmts[3] = {DRIFT_FORMAT_TEXT, DRIFT_FORMAT_MARKDOWN, DRIFT_FORMAT_JSON};
    for (int f = 0; f < 3; f++) {
        assert_int_equal(drift_tokdiv_render(&tr, fmts[f], 10, &s, &err), DRIFT_OK);
        expect_safe("divergence", s);
        if (fmts[f] == DRIFT_FORMAT_JSON) {
            root = json_loads(s, 0, &je);
            assert_non_null(root);
            assert_int_equal(json_array_size(json_object_get(root, "prompts")), 2);
            json_decref(root);
        }
        free(s);
    }
    /* ANOVA and PRI: terms and levels are a table file's column names and values */
    drift_anova_table a;
    drift_anova_row rows[2];
    hand_anova(&a, rows);
    rows[0].term = (char *)"C(hw" HOSTILE ")";
    const drift_anova_table *tables[] = {&a};
    drift_anova_doc doc = {.table = "t\n::error::x.csv", .formula = a.formula, .tables = tables, .n_tables = 1};
    for (int f = 0; f < 2; f++) {
        assert_int_equal(drift_anova_render(&doc, f ? DRIFT_FORMAT_JSON : DRIFT_FORMAT_TEXT, &s, &err), DRIFT_OK);
        expect_safe("anova", s);
        free(s);
    }
    drift_pri_holdout lv[1] = {{.n_test = 3, .test_r2 = NAN, .test_mae = 0}};
    drift_pri_importance imp[1] = {{.gain_share = 1}};
    const char *bad = "\x1b[2K\n::error::x ##[debug]\xe2\x80\xae\xc2\x9b\xff";
    snprintf(lv[0].name, sizeof lv[0].name, "precision=%s", bad);
    snprintf(imp[0].name, sizeof imp[0].name, "hardware=%s", bad);
    drift_pri_eval ev;
    memset(&ev, 0, sizeof ev);
    ev.random_split = (drift_pri_holdout){.name = "random", .n_test = 4, .test_r2 = NAN, .test_mae = 0.5};
    ev.cv_r2_mean = ev.cv_r2_sd = NAN;
    for (int k = 0; k < 5; k++) ev.cv_fold_r2[k] = NAN;
    ev.levels = lv;
    ev.n_levels = 1;
    ev.importance = imp;
    ev.n_importance = 1;
    for (int f = 0; f < 2; f++) {
        assert_int_equal(drift_pri_eval_render(&ev, "t" HOSTILE, 1, 1, f ? DRIFT_FORMAT_JSON : DRIFT_FORMAT_TEXT, &s, &err),
                         DRIFT_OK);
        expect_safe("pri", s);
        free(s);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format_parse), cmocka_unit_test(test_json), cmocka_unit_test(test_text),
        cmocka_unit_test(test_markdown), cmocka_unit_test(test_junit),
        cmocka_unit_test(test_comparison_details), cmocka_unit_test(test_anova_render),
        cmocka_unit_test(test_summaries_render), cmocka_unit_test(test_pri_render),
        cmocka_unit_test(test_monitor_render), cmocka_unit_test(test_table_render),
        cmocka_unit_test(test_golden_first_sections),
        cmocka_unit_test(test_hostile_comparison), cmocka_unit_test(test_hostile_other_renderers),
    };
    return cmocka_run_group_tests(tests, NULL, teardown);
}
