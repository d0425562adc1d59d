/* test_stages.c - the stages' sessions without the CLI, against the
 * embedded engine (tests/data/models' tiny qwen2) into a temporary store:
 *
 * run session: one begin, then asks moved by the select hook (the first
 * asks one pair and leaves the run unfinished, the second the rest and
 * finishes it, a third asks nothing); a begin that cannot open its target
 * fails at step TARGET with no session.
 * scorer: opened once, it scores the labels it is given and only them (a
 * third run stays unscored), a later call finds them scored; an unknown
 * label is an error that scores nothing.
 * measure: the stage runs both sides, scores the two labels only (a third
 * run in the store stays unscored) and returns the comparison; the
 * sequential form asks in chunks and replays the gate. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driftbench/measure.h"
#include "driftbench/pipeline.h"
#include "support/store_builder.h"

#define N_PROMPTS 3

static char *tmpdir;
static char db[300];
static char target_qwen[600];
static const char *const SUITES[] = {"builtin:math?n=3"};

static int setup(void **state) {
    (void)state;
    tmpdir = sb_tmpdir("drift_stages_");
    snprintf(db, sizeof db, "%s/store.db", tmpdir);
    const char *src = getenv("DRIFT_SOURCE");
    snprintf(target_qwen, sizeof target_qwen, "embedded:%s/tests/data/models/tiny-qwen2-f16.gguf?profile=ref",
             src ? src : "..");
    return 0;
}

static int teardown(void **state) {
    (void)state;
    sb_rmtree(tmpdir);
    free(tmpdir);
    return 0;
}

/* A new, empty store at db (the store builder's). */
static drift_store *open_fresh(void) { return sb_open_new(db); }

/* Answers of run `label` stored, and of those scored (*scored). */
static size_t stored(drift_store *st, const char *label, size_t *scored) {
    drift_run_info info;
    memset(&info, 0, sizeof info);
    drift_error err = {0};
    assert_int_equal(drift_store_run_get(st, label, &info, &err), DRIFT_OK);
    drift_scored_set set;
    assert_int_equal(drift_store_load_scored(st, info.id, &set, &err), DRIFT_OK);
    size_t n = 0, k = 0;
    for (size_t i = 0; i < set.n; i++) {
        if (set.rows[i].is_error) continue;
        n++;
        if (set.rows[i].evaluator) k++;
    }
    drift_scored_set_clear(&set);
    drift_run_info_clear(&info);
    if (scored) *scored = k;
    return n;
}

static void run_opts(drift_run_opts *o, const char *label) {
    drift_run_opts_default(o);
    o->label = label;
    o->target = target_qwen;
    o->suites = SUITES;
    o->n_suites = 1;
    o->params.max_tokens = 6;
    o->target_opts.concurrency = 2;
}

/* Stores run `label` (every prompt), unscored. */
static void store_run(drift_store *st, const char *label) {
    drift_run_opts o;
    run_opts(&o, label);
    drift_run_summary sum;
    drift_error err = {0};
    assert_int_equal(drift_run_execute(st, &o, &sum, &err), DRIFT_OK);
}

static int ask_below(void *user, drift_workload wl, size_t rank, size_t n_wl) {
    (void)wl;
    assert_int_equal(n_wl, N_PROMPTS);
    return rank < *(size_t *)user;
}

static void test_run_session(void **state) {
    (void)state;
    drift_store *st = open_fresh();
    drift_run_opts o;
    run_opts(&o, "chunked");
    size_t horizon = 1;
    o.order = DRIFT_ORDER_RANDOM;
    o.order_seed = 42;
    o.select = ask_below;
    o.select_user = &horizon;
    o.seq_alpha = 0.05;
    drift_run_session *ss = NULL;
    drift_run_summary sum;
    drift_error err = {0};
    assert_int_equal(drift_run_begin(st, &o, &ss, &sum, &err), DRIFT_OK);
    assert_non_null(ss);
    assert_int_equal(sum.prompts, N_PROMPTS);

    assert_int_equal(drift_run_ask(ss, &sum, &err), DRIFT_OK);
    assert_int_equal(sum.step, DRIFT_RUN_STEP_DONE);
    assert_int_equal(sum.requested, 1);
    assert_int_equal(sum.deferred, N_PROMPTS - 1);
    assert_int_equal(stored(st, "chunked", NULL), 1);
    drift_run_info info;
    memset(&info, 0, sizeof info);
    assert_int_equal(drift_store_run_get(st, "chunked", &info, &err), DRIFT_OK);
    assert_null(info.finished_at); /* deferred pairs: not finished */
    drift_run_info_clear(&info);

    horizon = N_PROMPTS; /* the next ask: the rest */
    assert_int_equal(drift_run_ask(ss, &sum, &err), DRIFT_OK);
    assert_int_equal(sum.resumed, 1);
    assert_int_equal(sum.requested, N_PROMPTS - 1);
    assert_int_equal(sum.deferred, 0);
    assert_int_equal(stored(st, "chunked", NULL), N_PROMPTS);
    memset(&info, 0, sizeof info);
    assert_int_equal(drift_store_run_get(st, "chunked", &info, &err), DRIFT_OK);
    assert_non_null(info.finished_at);
    drift_run_info_clear(&info);

    assert_int_equal(drift_run_ask(ss, &sum, &err), DRIFT_OK); /* nothing missing */
    assert_int_equal(sum.requested, 0);
    drift_run_end(ss);

    /* a target that does not open: no session, step TARGET */
    run_opts(&o, "none");
    o.target = "embedded:/nonexistent/none.gguf";
    ss = NULL;
    assert_int_not_equal(drift_run_begin(st, &o, &ss, &sum, &err), DRIFT_OK);
    assert_null(ss);
    assert_int_equal(sum.step, DRIFT_RUN_STEP_TARGET);
    drift_run_end(NULL);
    drift_store_close(st);
}

static void test_scorer_labels(void **state) {
    (void)state;
    drift_store *st = open_fresh();
    store_run(st, "a");
    store_run(st, "b");
    store_run(st, "other");
    drift_scorer *sc = NULL;
    drift_error err = {0};
    assert_int_equal(drift_scorer_open(st, NULL, &sc, &err), DRIFT_OK);
    drift_score_summary sum;
    const char *unknown[] = {"a", "nope"};
    assert_int_not_equal(drift_scorer_score_labels(sc, unknown, 2, &sum, &err), DRIFT_OK);
    size_t k = 0, n = stored(st, "a", &k);
    assert_int_equal(k, 0); /* nothing scored before every label was found */
    const char *two[] = {"a", "b"};
    assert_int_equal(drift_scorer_score_labels(sc, two, 2, &sum, &err), DRIFT_OK);
    assert_int_equal(sum.scored[DRIFT_WL_MATH] + sum.not_computable[DRIFT_WL_MATH], 2 * n);
    assert_int_equal(stored(st, "a", &k), n);
    assert_int_equal(k, n);
    assert_int_equal(stored(st, "b", &k), n);
    assert_int_equal(k, n);
    assert_int_equal(stored(st, "other", &k), n);
    assert_int_equal(k, 0); /* not given: not scored */
    assert_int_equal(drift_scorer_score_labels(sc, two, 2, &sum, &err), DRIFT_OK);
    assert_int_equal(sum.scored[DRIFT_WL_MATH], 0);
    assert_int_equal(sum.already[DRIFT_WL_MATH], 2 * n);
    drift_scorer_close(sc);
    drift_scorer_close(NULL);
    drift_store_close(st);
}

static void measure_opts(drift_measure_opts *o) {
    drift_measure_opts_default(o);
    o->side[0] = (drift_measure_side){.label = "baseline", .target = target_qwen};
    o->side[1] = (drift_measure_side){.label = "target", .target = target_qwen};
    o->suites = SUITES;
    o->n_suites = 1;
    o->params.max_tokens = 6;
    o->target_opts.concurrency = 2;
}

static int chunks_seen;
static void on_chunk(void *user, int chunk, const drift_seq_result *r, const int stopped[DRIFT_WL_COUNT]) {
    (void)user;
    assert_non_null(r);
    assert_true(stopped[DRIFT_WL_MATH]); /* 3 pairs: asked whole in the first chunk */
    chunks_seen = chunk;
}

static void test_measure(void **state) {
    (void)state;
    drift_store *st = open_fresh();
    store_run(st, "other");
    drift_measure_opts o;
    measure_opts(&o);
    drift_measure_summary sum;
    drift_comparison *c = NULL;
    drift_error err = {0};
    assert_int_equal(drift_measure_run(st, &o, &c, &sum, &err), DRIFT_OK);
    assert_non_null(c);
    assert_int_equal(sum.step, DRIFT_MEASURE_STEP_DONE);
    assert_true(sum.scored);
    size_t k = 0;
    assert_int_equal(stored(st, "baseline", &k), N_PROMPTS);
    assert_int_equal(k, N_PROMPTS);
    assert_int_equal(stored(st, "target", &k), N_PROMPTS);
    assert_int_equal(k, N_PROMPTS);
    assert_int_equal(stored(st, "other", &k), N_PROMPTS);
    assert_int_equal(k, 0); /* measure scores its two labels only */
    drift_comparison_free(c);

    /* sequential, new labels: one chunk asks the 3 pairs whole */
    measure_opts(&o);
    o.side[0].label = "sb";
    o.side[1].label = "st";
    o.sequential = 1;
    o.on_chunk = on_chunk;
    chunks_seen = 0;
    c = NULL;
    assert_int_equal(drift_measure_run(st, &o, &c, &sum, &err), DRIFT_OK);
    assert_non_null(c);
    assert_int_equal(sum.chunks, 1);
    assert_int_equal(chunks_seen, 1);
    assert_int_equal(stored(st, "st", &k), N_PROMPTS);
    assert_int_equal(k, N_PROMPTS);
    assert_int_equal(stored(st, "other", &k), N_PROMPTS);
    assert_int_equal(k, 0);
    drift_comparison_free(c);

    /* {port} without a start command: step CHECK, nothing run */
    measure_opts(&o);
    o.side[0].label = "pb";
    o.side[0].target = "http://127.0.0.1:{port}/v1?model=m";
    c = NULL;
    assert_int_equal(drift_measure_run(st, &o, &c, &sum, &err), DRIFT_ERR_INVALID);
    assert_null(c);
    assert_int_equal(sum.step, DRIFT_MEASURE_STEP_CHECK);
    assert_int_equal(sum.side, DRIFT_MEASURE_BASELINE);
    assert_non_null(strstr(err.msg, "uses {port}"));
    drift_store_close(st);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_session),
        cmocka_unit_test(test_scorer_labels),
        cmocka_unit_test(test_measure),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
