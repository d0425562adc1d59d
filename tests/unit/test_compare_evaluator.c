/* test_compare_evaluator.c - drift_store_load_scored_evaluator and compare's
 * opts.evaluator on the compare fixture (compare_fixture.h), after a second
 * evaluator "tool" is written over the baseline's math answers with every
 * label inverted: the latest score is then "tool"'s, the per-evaluator
 * loads give each evaluator's own labels, an evaluator nobody used is
 * DRIFT_ERR_NOT_FOUND naming the run's evaluators, and compare with
 * evaluator "math" gives the fixture's known math counts back while the
 * default (latest) counts the inverted ones. Also the unpaired answers
 * (the fixture's x0, base only). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "compare_fixture.h"
#include "driftbench/compare.h"

/* Writes "tool" scores on every labelled math answer of run `label`, PASS
 * and FAIL swapped. Returns how many. */
static size_t add_tool_scores(drift_store *st, const char *label) {
    drift_error err = {0};
    drift_run_info ri = {0};
    assert_int_equal(drift_store_run_get(st, label, &ri, &err), DRIFT_OK);
    drift_scored_set set;
    assert_int_equal(drift_store_load_scored(st, ri.id, &set, &err), DRIFT_OK);
    drift_score *sc = calloc(set.n + 1, sizeof *sc);
    size_t n = 0;
    for (size_t i = 0; i < set.n; i++) {
        const drift_scored *r = &set.rows[i];
        if (r->workload != DRIFT_WL_MATH || (r->label != DRIFT_LABEL_PASS && r->label != DRIFT_LABEL_FAIL)) continue;
        int inv = r->label == DRIFT_LABEL_PASS ? DRIFT_LABEL_FAIL : DRIFT_LABEL_PASS;
        sc[n++] = (drift_score){r->response_id, "tool", inv, inv == DRIFT_LABEL_PASS ? 1.0 : 0.0, NULL};
    }
    assert_int_equal(drift_store_put_scores(st, sc, n, &err), DRIFT_OK);
    free(sc);
    drift_scored_set_clear(&set);
    drift_run_info_clear(&ri);
    return n;
}

static long count_label(const drift_scored_set *s, drift_workload wl, int label) {
    long n = 0;
    for (size_t i = 0; i < s->n; i++) n += s->rows[i].workload == wl && s->rows[i].label == label;
    return n;
}

static void test_load_by_evaluator(void **state) {
    (void)state;
    drift_store *st = fx_build(fx_path("ev.db"));
    size_t n_tool = add_tool_scores(st, "base");
    assert_true(n_tool > 10);
    drift_error err = {0};
    drift_run_info ri = {0};
    assert_int_equal(drift_store_run_get(st, "base", &ri, &err), DRIFT_OK);
    drift_scored_set latest, math, tool, all;
    assert_int_equal(drift_store_load_scored(st, ri.id, &latest, &err), DRIFT_OK);
    assert_int_equal(drift_store_load_scored_evaluator(st, ri.id, "math", &math, &err), DRIFT_OK);
    assert_int_equal(drift_store_load_scored_evaluator(st, ri.id, "tool", &tool, &err), DRIFT_OK);
    assert_int_equal(drift_store_load_scored_evaluator(st, ri.id, NULL, &all, &err), DRIFT_OK);
    assert_int_equal(latest.n, math.n);
    assert_int_equal(latest.n, tool.n);
    assert_int_equal(latest.n, all.n);
    /* base math: PASS m0..m13 except the evaluator error m6, plus x0; FAIL m14..m19 */
    long pass = count_label(&math, DRIFT_WL_MATH, DRIFT_LABEL_PASS);
    long fail = count_label(&math, DRIFT_WL_MATH, DRIFT_LABEL_FAIL);
    assert_int_equal(pass, 14);
    assert_int_equal(fail, 6);
    assert_int_equal(pass + fail, (long)n_tool);
    /* "tool" inverted them, and is the latest */
    assert_int_equal(count_label(&tool, DRIFT_WL_MATH, DRIFT_LABEL_PASS), fail);
    assert_int_equal(count_label(&tool, DRIFT_WL_MATH, DRIFT_LABEL_FAIL), pass);
    assert_int_equal(count_label(&latest, DRIFT_WL_MATH, DRIFT_LABEL_PASS), fail);
    assert_int_equal(count_label(&all, DRIFT_WL_MATH, DRIFT_LABEL_PASS), fail);
    for (size_t i = 0; i < tool.n; i++) {
        /* rows "tool" did not score have no label and no evaluator */
        if (tool.rows[i].workload != DRIFT_WL_MATH) {
            assert_int_equal(tool.rows[i].label, DRIFT_LABEL_NONE);
            assert_null(tool.rows[i].evaluator);
        } else if (tool.rows[i].evaluator) {
            assert_string_equal(tool.rows[i].evaluator, "tool");
        }
        if (math.rows[i].evaluator) assert_string_equal(math.rows[i].evaluator, "math");
    }
    /* an evaluator of no answer: NOT_FOUND naming the run's evaluators, *out empty */
    drift_scored_set none = {0};
    assert_int_equal(drift_store_load_scored_evaluator(st, ri.id, "promptfoo", &none, &err), DRIFT_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "\"promptfoo\""));
    assert_non_null(strstr(err.msg, "its evaluators: emb-test, guard:test, longctx-f1, math, tool"));
    assert_int_equal(none.n, 0);
    assert_null(none.rows);
    drift_scored_set_clear(&latest);
    drift_scored_set_clear(&math);
    drift_scored_set_clear(&tool);
    drift_scored_set_clear(&all);
    drift_run_info_clear(&ri);
    drift_store_close(st);
}

static void test_compare_by_evaluator(void **state) {
    (void)state;
    drift_store *st = fx_build(fx_path("ev2.db"));
    add_tool_scores(st, "base");
    add_tool_scores(st, "targ");
    drift_compare_opts o;
    drift_compare_opts_default(&o);
    o.risk = 0;
    drift_error err = {0};
    drift_comparison *c = NULL;
    /* "math" only: the fixture's known answer */
    o.evaluator = "math";
    assert_int_equal(drift_compare_runs(st, "base", "targ", &o, &c, &err), DRIFT_OK);
    const drift_wl_result *w = &c->wl[DRIFT_WL_MATH];
    assert_int_equal(w->n, 17);
    assert_int_equal(w->flips, 4);
    assert_int_equal(w->correct_to_incorrect, 3);
    assert_int_equal(w->incorrect_to_correct, 1);
    assert_string_equal(c->evaluator, "math");
    /* the other workloads have no "math" score: unscored, not counted */
    assert_int_equal(c->wl[DRIFT_WL_SAFETY].n, 0);
    assert_int_equal(c->unpaired_baseline, 1); /* x0 */
    assert_int_equal(c->unpaired_target, 0);
    drift_comparison_free(c);
    /* the default reads the latest, "tool": same flips, directions swapped */
    o.evaluator = NULL;
    assert_int_equal(drift_compare_runs(st, "base", "targ", &o, &c, &err), DRIFT_OK);
    w = &c->wl[DRIFT_WL_MATH];
    assert_int_equal(w->n, 17);
    assert_int_equal(w->correct_to_incorrect, 1);
    assert_int_equal(w->incorrect_to_correct, 3);
    assert_null(c->evaluator);
    assert_int_equal(c->wl[DRIFT_WL_SAFETY].n, 10);
    drift_comparison_free(c);
    /* only math: x0 is the one unpaired answer; only safety: none */
    o.only_workload = DRIFT_WL_SAFETY;
    assert_int_equal(drift_compare_runs(st, "base", "targ", &o, &c, &err), DRIFT_OK);
    assert_int_equal(c->unpaired_baseline, 0);
    drift_comparison_free(c);
    o.only_workload = DRIFT_WL_UNKNOWN;
    /* an evaluator the target lacks: NOT_FOUND naming the target */
    o.evaluator = "promptfoo";
    assert_int_equal(drift_compare_runs(st, "base", "targ", &o, &c, &err), DRIFT_ERR_NOT_FOUND);
    assert_null(c);
    assert_non_null(strstr(err.msg, "baseline \"base\""));
    assert_non_null(strstr(err.msg, "its evaluators:"));
    drift_store_close(st);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_by_evaluator),
        cmocka_unit_test(test_compare_by_evaluator),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    fx_cleanup();
    return rc;
}
