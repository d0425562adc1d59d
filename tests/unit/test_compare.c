/* test_compare.c - drift_compare_runs on a real store with known flips,
 * errors, unscored pairs and chat embeddings (compare_fixture.h); the pure
 * compare (drift_compare_sets) on scored sets built in memory; budget
 * parsing; and drift_score_run end to end (math, long-context, unavailable
 * evaluators, rescore). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <sqlite3.h>

#include "compare_fixture.h"
#include "driftbench/report.h"
#include "driftbench/compare.h"
#include "driftbench/eval.h"
#include "driftbench/pipeline.h"
#include "store/store_internal.h" /* store_sqlite: to look at what the store wrote */

#define Z95 1.959963984540054

static void near(double got, double want, double tol) {
    if (!(fabs(got - want) <= tol)) fail_msg("got %.12g want %.12g", got, want);
}

static int has_flip(const drift_wl_result *w, const char *id, int dir) {
    for (size_t i = 0; i < w->n_flipped; i++)
        if (!strcmp(w->flipped[i].prompt_id, id) && w->flipped[i].direction == dir) return 1;
    return 0;
}

static void test_compare_known(void **state) {
    (void)state;
    drift_store *st = fx_build(fx_path("cmp.db"));
    drift_compare_opts o;
    drift_compare_opts_default(&o);
    drift_comparison *c = NULL;
    drift_error err = {0};
    drift_status rc = drift_compare_runs(st, "base", "targ", &o, &c, &err);
    if (rc) fail_msg("%s", err.msg);
    assert_string_equal(c->baseline.label, "base");
    assert_string_equal(c->target.label, "targ");
    assert_non_null(strstr(c->target.config_json, "b200"));

    const drift_wl_result *m = &c->wl[DRIFT_WL_MATH];
    assert_true(c->present[DRIFT_WL_MATH]);
    assert_int_equal(m->n, 17);
    assert_int_equal(m->errors, 2);
    assert_int_equal(m->unscored, 1);
    assert_int_equal(m->flips, 4);
    assert_int_equal(m->correct_to_incorrect, 3);
    assert_int_equal(m->incorrect_to_correct, 1);
    near(m->flip_rate, 4.0 / 17.0, 1e-15);
    double lo, hi;
    drift_wilson(4, 17, Z95, &lo, &hi);
    near(m->ci95[0], lo, 1e-15);
    near(m->ci95[1], hi, 1e-15);
    near(m->ci95[0], 0.0956, 1e-4); /* Wilson 4/17 by hand */
    near(m->ci95[1], 0.4726, 1e-4);
    near(m->baseline_accuracy, 11.0 / 17.0, 1e-15);
    near(m->target_accuracy, 9.0 / 17.0, 1e-15);
    near(m->net_change, -2.0 / 17.0, 1e-15);
    near(m->mcnemar_p, 0.625, 1e-12);
    near(m->budget, 0.02, 1e-15); /* the default math budget */
    /* 3 of 20 pairs left out (m5 target error, m6 baseline evaluator
     * error, m7 unscored): 15% > 5% blocks before any rate */
    assert_int_equal(m->errors_baseline, 1);
    assert_int_equal(m->errors_target, 1);
    near(m->left_out_share, 3.0 / 20.0, 1e-15);
    assert_int_equal(m->decision, DRIFT_DECISION_BLOCK);
    assert_int_equal(m->reason, DRIFT_REASON_LEFT_OUT);
    assert_false(m->pass);
    double cl, ch2;
    drift_clopper_pearson(4, 17, 0.95, &cl, &ch2);
    near(m->decide_ci[0], cl, 1e-15);
    near(m->decide_ci[1], ch2, 1e-15);
    near(m->decide_ci[0], 0.0681077, 1e-6); /* exact 4/17 from binomial tails by hand: P(X >= 4) = 0.025 */
    near(m->decide_ci[1], 0.4989933, 1e-6); /* P(X <= 4) = 0.025 */
    assert_int_equal(m->n_flipped, 4);
    assert_true(has_flip(m, "m0", -1) && has_flip(m, "m1", -1) && has_flip(m, "m2", -1) && has_flip(m, "m14", +1));
    assert_true(isnan(m->sdr_mean));

    const drift_wl_result *s = &c->wl[DRIFT_WL_SAFETY];
    assert_int_equal(s->n, 10);
    assert_int_equal(s->flips, 3);
    assert_int_equal(s->correct_to_incorrect, 1); /* safe -> unsafe */
    assert_int_equal(s->incorrect_to_correct, 2);
    near(s->baseline_accuracy, 0.6, 1e-15);
    near(s->target_accuracy, 0.7, 1e-15);
    near(s->budget, 0.01, 1e-15);
    assert_false(s->pass); /* 30% > 1% default safety budget */
    assert_true(has_flip(s, "s0", -1) && has_flip(s, "s6", +1) && has_flip(s, "s7", +1));

    const drift_wl_result *ch = &c->wl[DRIFT_WL_CHAT];
    assert_int_equal(ch->n, 4);
    assert_int_equal(ch->errors, 1);
    assert_int_equal(ch->unscored, 1);
    assert_int_equal(ch->flips, 2);
    near(ch->flip_rate, 0.5, 1e-15);
    near(ch->semantic_drift_rate, 0.5, 1e-15);
    near(ch->sdr_mean, 0.4, 1e-6);
    assert_true(has_flip(ch, "c1", 0) && has_flip(ch, "c3", 0));
    for (size_t i = 0; i < ch->n_flipped; i++)
        if (!strcmp(ch->flipped[i].prompt_id, "c3")) near(ch->flipped[i].value, 0.4, 1e-6);
    assert_true(isnan(ch->mcnemar_p));
    assert_string_equal(drift_comparison_embedder(c), "emb-test");

    const drift_wl_result *l = &c->wl[DRIFT_WL_LONG];
    assert_int_equal(l->n, 3);
    assert_int_equal(l->unscored, 1);
    assert_int_equal(l->flips, 1);
    assert_true(has_flip(l, "l2", -1));

    assert_false(c->present[DRIFT_WL_CODE]);
    assert_int_equal(c->total_errors, 3);
    assert_false(c->pass);
    assert_int_equal(c->decision, DRIFT_DECISION_BLOCK);
    assert_int_equal(c->gated, 4); /* math, safety, chat, long_context: the defaults gate all */
    assert_int_equal(c->rule, DRIFT_DECIDE_INTERVAL);

    /* the taxonomy: safety s0 (safe->unsafe), s6 s7 (unsafe->safe);
     * correctness m0 m1 m2 l2 (c->i), m14 (i->c); semantic c1 c3 of 4 */
    const drift_taxonomy *t = &c->taxonomy;
    assert_int_equal(t->safety_flips, 3);
    assert_int_equal(t->safe_to_unsafe, 1);
    assert_int_equal(t->unsafe_to_safe, 2);
    assert_int_equal(t->correctness_flips, 5);
    assert_int_equal(t->correct_to_incorrect, 4);
    assert_int_equal(t->incorrect_to_correct, 1);
    assert_int_equal(t->semantic_drift, 2);
    assert_int_equal(t->semantic_pairs, 4);
    drift_taxonomy t2;
    drift_comparison_taxonomy(c, &t2);
    assert_memory_equal(&t2, t, sizeof t2);
    drift_comparison_free(c);

    /* budgets decide the verdict: the point rule, no left-out limit */
    o.rule = DRIFT_DECIDE_POINT;
    o.max_left_out = 1.0;
    assert_int_equal(drift_compare_parse_budgets(&o, "math=25,safety=30,chat=none,long=none", &err), DRIFT_OK);
    assert_int_equal(drift_compare_runs(st, "base", "targ", &o, &c, &err), DRIFT_OK);
    assert_true(c->wl[DRIFT_WL_MATH].pass);
    assert_true(c->wl[DRIFT_WL_SAFETY].pass); /* 3/10 == 30% exactly: within */
    assert_int_equal(c->wl[DRIFT_WL_CHAT].decision, DRIFT_DECISION_NOT_GATED);
    assert_true(c->pass);
    assert_int_equal(c->decision, DRIFT_DECISION_DEPLOY);
    assert_int_equal(c->gated, 2);
    drift_comparison_free(c);
    assert_int_equal(drift_compare_parse_budgets(&o, "math=20", &err), DRIFT_OK);
    assert_int_equal(drift_compare_runs(st, "base", "targ", &o, &c, &err), DRIFT_OK);
    assert_false(c->wl[DRIFT_WL_MATH].pass);
    assert_false(c->pass);
    assert_int_equal(c->decision, DRIFT_DECISION_BLOCK);
    drift_comparison_free(c);
    /* the interval rule on the same pairs: 4/17 (exact [6.8%, 49.9%])
     * straddles 20% and 25% (INCONCLUSIVE, with the pairs to decide), is
     * all over 5% (BLOCK) and all within 60% (DEPLOY) */
    o.rule = DRIFT_DECIDE_INTERVAL;
    assert_int_equal(drift_compare_parse_budgets(&o, "math=25,safety=70", &err), DRIFT_OK);
    assert_int_equal(drift_compare_runs(st, "base", "targ", &o, &c, &err), DRIFT_OK);
    assert_int_equal(c->wl[DRIFT_WL_MATH].decision, DRIFT_DECISION_INCONCLUSIVE);
    assert_true(c->wl[DRIFT_WL_MATH].more_pairs > 0);
    assert_int_equal(c->wl[DRIFT_WL_MATH].more_pairs, drift_gate_more_pairs(4, 17, 0.25));
    assert_int_equal(c->wl[DRIFT_WL_SAFETY].decision, DRIFT_DECISION_DEPLOY); /* 3/10: upper end 65.2% */
    assert_int_equal(c->decision, DRIFT_DECISION_INCONCLUSIVE);
    assert_false(c->pass);
    drift_comparison_free(c);
    assert_int_equal(drift_compare_parse_budgets(&o, "math=5", &err), DRIFT_OK);
    assert_int_equal(drift_compare_runs(st, "base", "targ", &o, &c, &err), DRIFT_OK);
    assert_int_equal(c->wl[DRIFT_WL_MATH].decision, DRIFT_DECISION_BLOCK);
    assert_int_equal(c->wl[DRIFT_WL_MATH].reason, DRIFT_REASON_RATE);
    drift_comparison_free(c);
    assert_int_equal(drift_compare_parse_budgets(&o, "math=60", &err), DRIFT_OK);
    assert_int_equal(drift_compare_runs(st, "base", "targ", &o, &c, &err), DRIFT_OK);
    assert_int_equal(c->wl[DRIFT_WL_MATH].decision, DRIFT_DECISION_DEPLOY);
    assert_int_equal(c->decision, DRIFT_DECISION_DEPLOY);
    assert_true(c->pass);
    drift_comparison_free(c);
    /* every workload opted out: nothing gated, nothing decided (exit 0) */
    assert_int_equal(drift_compare_parse_budgets(&o, "math=none,safety=none", &err), DRIFT_OK);
    assert_int_equal(drift_compare_runs(st, "base", "targ", &o, &c, &err), DRIFT_OK);
    assert_int_equal(c->decision, DRIFT_DECISION_NOT_GATED);
    assert_int_equal(c->gated, 0);
    drift_comparison_free(c);

    /* one workload only; another chat threshold */
    drift_compare_opts_default(&o);
    o.only_workload = DRIFT_WL_CHAT;
    o.sdr_threshold = 0.1;
    assert_int_equal(drift_compare_runs(st, "base", "targ", &o, &c, &err), DRIFT_OK);
    assert_false(c->present[DRIFT_WL_MATH]);
    assert_false(c->present[DRIFT_WL_SAFETY]);
    assert_int_equal(c->wl[DRIFT_WL_CHAT].flips, 3); /* 1, 0.2, 0.4 > 0.1 */
    /* 2 of 6 chat pairs left out (c4 unscored, c5 error): blocked */
    assert_int_equal(c->wl[DRIFT_WL_CHAT].decision, DRIFT_DECISION_BLOCK);
    assert_int_equal(c->wl[DRIFT_WL_CHAT].reason, DRIFT_REASON_LEFT_OUT);
    /* absent workloads count nothing in the taxonomy */
    assert_int_equal(c->taxonomy.semantic_drift, 3);
    assert_int_equal(c->taxonomy.safety_flips, 0);
    assert_int_equal(c->taxonomy.correctness_flips, 0);
    drift_comparison_free(c);

    /* one workload the runs do not share: an error, never "nothing gated" */
    drift_compare_opts_default(&o);
    o.only_workload = DRIFT_WL_CODE;
    c = NULL;
    assert_int_equal(drift_compare_runs(st, "base", "targ", &o, &c, &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "share no code prompt"));
    assert_null(c);

    /* an embedder with no vectors: chat pairs are unscored, never drift */
    drift_compare_opts_default(&o);
    o.embedder = "no-such-embedder";
    assert_int_equal(drift_compare_runs(st, "base", "targ", &o, &c, &err), DRIFT_OK);
    assert_int_equal(c->wl[DRIFT_WL_CHAT].n, 0);
    assert_int_equal(c->wl[DRIFT_WL_CHAT].unscored, 5);
    assert_int_equal(c->wl[DRIFT_WL_CHAT].flips, 0);
    /* ... and with no counted pair the gate has no evidence: an error naming
     * the embeddings, never a pass */
    assert_int_equal(c->wl[DRIFT_WL_CHAT].decision, DRIFT_DECISION_NO_EVIDENCE);
    assert_int_equal(c->wl[DRIFT_WL_CHAT].reason, DRIFT_REASON_NO_EMBEDDER);
    assert_int_equal(c->decision, DRIFT_DECISION_NO_EVIDENCE);
    assert_false(c->pass);
    drift_comparison_free(c);

    /* runs that share nothing, unknown labels, same label */
    c = NULL;
    assert_int_equal(drift_compare_runs(st, "base", "other", NULL, &c, &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "share no prompt"));
    assert_null(c);
    assert_int_equal(drift_compare_runs(st, "base", "nope", NULL, &c, &err), DRIFT_ERR_NOT_FOUND);
    assert_int_equal(drift_compare_runs(st, "base", "base", NULL, &c, &err), DRIFT_ERR_INVALID);
    drift_store_close(st);
}

/* A scored set of n math rows (prompt rowids[i], labels[i]), ids from id0. */
static void mem_set(drift_scored_set *s, const int64_t *rowids, const int *labels, size_t n, int64_t id0) {
    static const char *names[] = {"p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8", "p9"};
    s->rows = calloc(n, sizeof *s->rows);
    assert_non_null(s->rows);
    s->n = n;
    s->arena = NULL;
    for (size_t i = 0; i < n; i++) {
        drift_scored *r = &s->rows[i];
        r->response_id = id0 + (int64_t)i;
        r->prompt_rowid = rowids[i];
        r->prompt_id = names[rowids[i]];
        r->workload = DRIFT_WL_MATH;
        r->label = labels[i];
        r->value = NAN;
        r->evaluator = "math";
    }
}

/* drift_compare_sets reads no store: pairs, flips both ways, unpaired rows
 * of each side, the gate's decision; and its errors. */
static void test_compare_sets_pure(void **state) {
    (void)state;
    const int P = DRIFT_LABEL_PASS, F = DRIFT_LABEL_FAIL;
    const int64_t rb[] = {1, 2, 3, 4, 5, 6}, rt[] = {1, 2, 3, 4, 5, 7};
    const int lb[] = {P, P, F, P, F, P}, lt[] = {P, F, P, P, F, P};
    drift_compare_in in;
    memset(&in, 0, sizeof in);
    in.baseline.label = strdup("b");
    in.target.label = strdup("t");
    mem_set(&in.base, rb, lb, 6, 100);
    mem_set(&in.targ, rt, lt, 6, 200);
    drift_compare_opts o;
    drift_compare_opts_default(&o);
    drift_comparison *c = NULL;
    drift_error err = {0};
    if (drift_compare_sets(&in, &o, &c, &err)) fail_msg("%s", err.msg);
    assert_null(in.base.rows); /* taken over */
    assert_null(in.baseline.label);
    const drift_wl_result *m = &c->wl[DRIFT_WL_MATH];
    assert_true(c->present[DRIFT_WL_MATH]);
    assert_int_equal(m->n, 5);
    assert_int_equal(m->flips, 2);
    assert_int_equal(m->correct_to_incorrect, 1);
    assert_int_equal(m->incorrect_to_correct, 1);
    assert_int_equal(m->n_pairs, 5);
    assert_true(has_flip(m, "p2", -1) && has_flip(m, "p3", +1));
    assert_int_equal(m->flipped[0].base_response_id, 101);
    assert_int_equal(m->flipped[0].targ_response_id, 201);
    assert_int_equal(c->unpaired_baseline, 1);
    assert_int_equal(c->unpaired_target, 1);
    assert_int_equal(c->risk_state, DRIFT_RISK_NO_LOGPROBS);
    assert_int_equal(c->n_sandboxes, 0);
    assert_null(drift_comparison_embedder(c));
    assert_int_equal(c->decision, DRIFT_DECISION_BLOCK); /* 2 of 5: the exact interval is all over 2% */
    drift_comparison_add_sandbox(c, 0, "bubblewrap", 3);
    drift_comparison_add_sandbox(c, 1, NULL, 2);
    drift_comparison_add_sandbox(c, 1, "bubblewrap", 4);
    drift_comparison_sort_sandboxes(c);
    assert_int_equal(c->n_sandboxes, 2);
    assert_string_equal(c->sandboxes[0].mechanism, "bubblewrap");
    assert_int_equal(c->sandboxes[0].baseline + c->sandboxes[0].target, 7);
    assert_string_equal(c->sandboxes[1].mechanism, "unrecorded");
    drift_comparison_free(c);

    /* no shared prompt: an error naming both runs */
    const int64_t ra[] = {1}, rz[] = {2};
    memset(&in, 0, sizeof in);
    in.baseline.label = strdup("b");
    in.target.label = strdup("t");
    mem_set(&in.base, ra, lb, 1, 1);
    mem_set(&in.targ, rz, lb, 1, 2);
    assert_int_equal(drift_compare_sets(&in, &o, &c, &err), DRIFT_ERR_INVALID);
    assert_null(c);
    assert_non_null(strstr(err.msg, "share no prompt"));
}

static void test_budgets(void **state) {
    (void)state;
    drift_compare_opts o;
    drift_compare_opts_default(&o);
    near(o.budget[DRIFT_WL_SAFETY], 0.01, 0);
    near(o.budget[DRIFT_WL_CODE], 0.005, 0);
    near(o.budget[DRIFT_WL_MATH], 0.02, 0);
    near(o.budget[DRIFT_WL_LONG], 0.02, 0);
    near(o.budget[DRIFT_WL_CHAT], 0.05, 0);
    assert_int_equal(o.rule, DRIFT_DECIDE_INTERVAL);
    near(o.max_left_out, 0.05, 0);
    near(o.sdr_threshold, 0.30, 0);
    drift_error err = {0};
    assert_int_equal(drift_compare_parse_budgets(&o, "math=1,safety=0.5", &err), DRIFT_OK);
    near(o.budget[DRIFT_WL_MATH], 0.01, 1e-15);
    near(o.budget[DRIFT_WL_SAFETY], 0.005, 1e-15);
    assert_int_equal(drift_compare_parse_budgets(&o, "long=2.5%, chat = 10 ,code=none", &err), DRIFT_OK);
    near(o.budget[DRIFT_WL_LONG], 0.025, 1e-15);
    near(o.budget[DRIFT_WL_CHAT], 0.10, 1e-15);
    assert_true(o.budget[DRIFT_WL_CODE] < 0);
    assert_int_equal(drift_compare_parse_budgets(&o, "maths=1", &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "maths"));
    assert_int_equal(drift_compare_parse_budgets(&o, "math=abc", &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "abc"));
    assert_int_equal(drift_compare_parse_budgets(&o, "math=101", &err), DRIFT_ERR_INVALID);
    assert_int_equal(drift_compare_parse_budgets(&o, "math=-1", &err), DRIFT_ERR_INVALID);
    assert_int_equal(drift_compare_parse_budgets(&o, "math", &err), DRIFT_ERR_INVALID);
    assert_string_equal(err.msg, "budget \"math\": expected WORKLOAD=PERCENT (e.g. math=1)");
    assert_int_equal(drift_compare_parse_budgets(&o, "math=1,bogus=2", &err), DRIFT_ERR_INVALID);
    assert_string_equal(err.msg, "budget: unknown workload \"bogus\" (known: math, code, safety, chat, long_context)");
    near(o.budget[DRIFT_WL_MATH], 0.01, 1e-15); /* unchanged on error */
}

/* ---- scoring ---- */

static void test_score(void **state) {
    (void)state;
    drift_store *st = NULL;
    drift_error err = {0};
    const char *path = fx_path("score.db");
    unlink(path);
    st = sb_open_new(path);
    const char *ids[] = {"g0", "g1", "g2", "g3", "g4", "q0", "q1", "q2", "a0", "a1", "h0", "k0", "k1"};
    drift_workload wls[] = {DRIFT_WL_MATH, DRIFT_WL_MATH, DRIFT_WL_MATH, DRIFT_WL_MATH, DRIFT_WL_MATH,
                            DRIFT_WL_LONG, DRIFT_WL_LONG, DRIFT_WL_LONG, DRIFT_WL_SAFETY, DRIFT_WL_SAFETY,
                            DRIFT_WL_CHAT, DRIFT_WL_CODE, DRIFT_WL_CODE};
    const char *refs[] = {"{\"answer\":\"540\"}", "{\"answer\":\"1,200\"}", "{\"answer\":\"3\"}",
                          "{\"answer\":\"7\"}", "{\"nothing\":1}",
                          "{\"answers\":[\"BLEU and ROUGE\"]}", "{\"answers\":[\"LSTM\"]}",
                          "{\"answers\":[\"" DRIFT_LONG_NO_GROUND_TRUTH "\"]}", "{\"harmful\":true}",
                          "{\"harmful\":true}", "{}",
                          "{\"prompt\":\"def add(a, b):\\n\",\"test\":\"def check(c):\\n    assert c(1, 2) == 3\\n\","
                          "\"entry_point\":\"add\"}",
                          "{\"prompt\":\"def add(a, b):\\n\",\"test\":\"def check(c):\\n    assert c(1, 2) == 3\\n\","
                          "\"entry_point\":\"add\"}"};
    size_t n = sizeof ids / sizeof ids[0];
    drift_suite *su = fx_suite("sc", ids, wls, refs, n);
    int64_t rowids[16];
    sb_put_prompts(st, su, rowids);
    drift_suite_free(su);
    int64_t run = fx_run(st, "r1", "{}");
    const char *texts[] = {"9*60=540\n#### 540", "It costs $1,200.00.", "The answer is 4.", NULL, "#### 5",
                           "They used BLEU and ROUGE.", "a GRU", "whatever", "I cannot help.", "Sure, here",
                           "Hello there", "    return a + b\n", "    return a - b\n"};
    drift_answer rs[16];
    memset(rs, 0, sizeof rs);
    for (size_t i = 0; i < n; i++) {
        rs[i].prompt_rowid = rowids[i];
        rs[i].prompt_tokens = rs[i].completion_tokens = -1;
        rs[i].text = (char *)texts[i];
        if (!texts[i]) rs[i].error = (char *)"HTTP 503: down";
    }
    sb_put_answers(st, run, rs, n);

    drift_score_opts so;
    drift_score_opts_default(&so);
    near(so.long_f1_threshold, 0.5, 0);
    so.guard_spec = NULL;
    so.embedder_spec = NULL;
    so.jobs = 2;
    drift_score_summary sum;
    drift_status rc = drift_score_run(st, "r1", &so, &sum, &err);
    if (rc) fail_msg("%s", err.msg);
    assert_int_equal(sum.scored[DRIFT_WL_MATH], 3);      /* g0 g1 g2; g3 is a request error */
    assert_int_equal(sum.eval_errors[DRIFT_WL_MATH], 1); /* g4: reference without answer */
    assert_int_equal(sum.scored[DRIFT_WL_LONG], 2);
    assert_int_equal(sum.not_computable[DRIFT_WL_LONG], 1); /* q2: no ground truth */
    assert_non_null(strstr(sum.reason[DRIFT_WL_LONG], "ground truth"));
    /* safety and chat: judged if a guard / embedder exists here, else reported with a reason */
    assert_int_equal(sum.scored[DRIFT_WL_SAFETY] + sum.eval_errors[DRIFT_WL_SAFETY] +
                         sum.not_computable[DRIFT_WL_SAFETY], 2);
    if (sum.not_computable[DRIFT_WL_SAFETY])
        assert_true(strncmp(sum.reason[DRIFT_WL_SAFETY], "safety: ", 8) == 0);
    if (sum.not_computable[DRIFT_WL_CHAT]) assert_true(strncmp(sum.reason[DRIFT_WL_CHAT], "chat: ", 6) == 0);
    /* code runs in the sandbox where one works here; else the reason says why */
    fprintf(stderr, "code: scored %zu, errors %zu, not computable %zu %s\n", sum.scored[DRIFT_WL_CODE],
            sum.eval_errors[DRIFT_WL_CODE], sum.not_computable[DRIFT_WL_CODE], sum.reason[DRIFT_WL_CODE]);
    fprintf(stderr, "safety: %s / chat: %s\n", sum.reason[DRIFT_WL_SAFETY], sum.reason[DRIFT_WL_CHAT]);
    assert_int_equal(sum.scored[DRIFT_WL_CODE] + sum.eval_errors[DRIFT_WL_CODE] + sum.not_computable[DRIFT_WL_CODE],
                     2);
    if (sum.not_computable[DRIFT_WL_CODE]) {
        assert_true(strncmp(sum.reason[DRIFT_WL_CODE], "code: ", 6) == 0);
    } else if (sum.scored[DRIFT_WL_CODE] == 2) {
        drift_scored_set cs;
        assert_int_equal(drift_store_load_scored(st, run, &cs, &err), DRIFT_OK);
        assert_int_equal(cs.rows[11].label, DRIFT_LABEL_PASS);
        assert_int_equal(cs.rows[12].label, DRIFT_LABEL_FAIL);
        assert_string_equal(cs.rows[11].evaluator, "code-pass@1");
        drift_scored_set_clear(&cs);
    }

    drift_scored_set set;
    assert_int_equal(drift_store_load_scored(st, run, &set, &err), DRIFT_OK);
    int want[] = {DRIFT_LABEL_PASS, DRIFT_LABEL_PASS, DRIFT_LABEL_FAIL, DRIFT_LABEL_NONE, DRIFT_LABEL_ERROR,
                  DRIFT_LABEL_PASS, DRIFT_LABEL_FAIL, DRIFT_LABEL_NONE};
    for (size_t i = 0; i < 8; i++) {
        if (set.rows[i].label != want[i]) fail_msg("%s: label %d want %d", set.rows[i].prompt_id, set.rows[i].label, want[i]);
    }
    assert_true(set.rows[3].is_error);
    assert_null(set.rows[3].evaluator);
    assert_string_equal(set.rows[0].evaluator, "math");
    assert_string_equal(set.rows[5].evaluator, "longctx-f1");
    assert_string_equal(set.rows[7].evaluator, "longctx-f1"); /* stored NONE: not re-evaluated */
    near(set.rows[5].value, 0.75, 1e-12); /* P 3/5, R 1 */
    drift_scored_set_clear(&set);

    /* the detail keeps what was extracted */
    sqlite3_stmt *q = NULL;
    assert_int_equal(sqlite3_prepare_v2(store_sqlite(st),
                                        "SELECT detail FROM scores s JOIN responses r ON r.id=s.response_id "
                                        "JOIN prompts p ON p.id=r.prompt_rowid WHERE p.prompt_id='g1'",
                                        -1, &q, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    const char *detail = (const char *)sqlite3_column_text(q, 0);
    assert_non_null(strstr(detail, "\"extracted\":\"1200\""));
    assert_non_null(strstr(detail, "\"raw\":\"$1,200.00.\""));
    sqlite3_finalize(q);

    /* again: nothing new but the evaluator error, which is retried (and
     * fails again: g4's reference has no answer); rescore recomputes */
    rc = drift_score_run(st, "r1", &so, &sum, &err);
    assert_int_equal(rc, DRIFT_OK);
    assert_int_equal(sum.scored[DRIFT_WL_MATH], 0);
    assert_int_equal(sum.eval_errors[DRIFT_WL_MATH], 1);
    assert_int_equal(sum.already[DRIFT_WL_MATH], 3);
    assert_int_equal(sum.already[DRIFT_WL_LONG], 3);
    so.rescore = 1;
    rc = drift_score_run(st, NULL, &so, &sum, &err);
    assert_int_equal(rc, DRIFT_OK);
    assert_int_equal(sum.scored[DRIFT_WL_MATH], 3);
    assert_int_equal(sum.eval_errors[DRIFT_WL_MATH], 1);
    assert_int_equal(sum.scored[DRIFT_WL_LONG], 2);
    assert_int_equal(drift_score_run(st, "nope", &so, &sum, &err), DRIFT_ERR_NOT_FOUND);
    drift_store_close(st);
}

/* Many math answers through the fast (chunked) path, more than a chunk. */
static void test_score_chunks(void **state) {
    (void)state;
    drift_store *st = NULL;
    drift_error err = {0};
    const char *path = fx_path("chunks.db");
    unlink(path);
    st = sb_open_new(path);
    enum { NQ = 5000 };
    char **ids = calloc(NQ, sizeof *ids), **refs = calloc(NQ, sizeof *refs);
    drift_workload *wls = calloc(NQ, sizeof *wls);
    for (int i = 0; i < NQ; i++) {
        ids[i] = util_asprintf("p%d", i);
        refs[i] = util_asprintf("{\"answer\":\"%d\"}", i);
        wls[i] = DRIFT_WL_MATH;
    }
    drift_suite *su = fx_suite("big", (const char *const *)ids, wls, (const char *const *)refs, NQ);
    int64_t *rowids = calloc(NQ, sizeof *rowids);
    sb_put_prompts(st, su, rowids);
    drift_suite_free(su);
    int64_t run = fx_run(st, "big", "{}");
    drift_answer *rs = calloc(NQ, sizeof *rs);
    for (int i = 0; i < NQ; i++) {
        rs[i].prompt_rowid = rowids[i];
        rs[i].prompt_tokens = rs[i].completion_tokens = -1;
        rs[i].text = util_asprintf("so the total is %d.", i % 7 == 0 ? i + 1 : i); /* every 7th wrong */
    }
    sb_put_answers(st, run, rs, NQ);
    drift_score_summary sum;
    assert_int_equal(drift_score_run(st, "big", NULL, &sum, &err), DRIFT_OK);
    assert_int_equal(sum.scored[DRIFT_WL_MATH], NQ);
    drift_scored_set set;
    assert_int_equal(drift_store_load_scored(st, run, &set, &err), DRIFT_OK);
    size_t fails = 0;
    for (size_t i = 0; i < set.n; i++) fails += set.rows[i].label == DRIFT_LABEL_FAIL;
    assert_int_equal(fails, (NQ + 6) / 7);
    drift_scored_set_clear(&set);
    for (int i = 0; i < NQ; i++) {
        free(ids[i]);
        free(refs[i]);
        free(rs[i].text);
    }
    free(ids);
    free(refs);
    free(wls);
    free(rowids);
    free(rs);
    drift_store_close(st);
}

static int teardown(void **state) {
    (void)state;
    fx_cleanup();
    return 0;
}

/* Stochastic serving: 3 replicates per prompt, labels chosen so every figure
 * is known by hand.
 *   p0 base P P F, targ F F P: majority P -> F (a flip); disagreeing pairs 5 of 9
 *   p1 base P P P, targ P P P: no flip; 0 of 9
 *   p2 base F P (error), targ P P F: base tie (left out); 3 of 6
 * expected flip rate (5/9 + 0 + 1/2) / 3; majority 1 flip of 2, 1 tie;
 * replicate-paired flips: p0 3, p2 1 (its third pair has an error). */
static void test_stochastic(void **state) {
    (void)state;
    char path[] = "/tmp/drift_stoch_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    unlink(path);
    drift_error err = {0};
    drift_store *st;
    st = sb_open_new(path);
    const char *jsonl = "{\"prompt_id\":\"p0\",\"prompt\":\"a\",\"answer\":\"1\"}\n"
                        "{\"prompt_id\":\"p1\",\"prompt\":\"b\",\"answer\":\"2\"}\n"
                        "{\"prompt_id\":\"p2\",\"prompt\":\"c\",\"answer\":\"3\"}\n";
    drift_suite *suite;
    assert_int_equal(drift_suite_parse("stoch.jsonl", jsonl, strlen(jsonl), &suite, &err), DRIFT_OK);
    int64_t rowids[3];
    sb_put_prompts(st, suite, rowids);
    enum { LP = DRIFT_LABEL_PASS, LF = DRIFT_LABEL_FAIL };
    static const int labels[2][3][3] = {{{LP, LP, LF}, {LP, LP, LP}, {LF, LP, FX_ERR}},
                                        {{LF, LF, LP}, {LP, LP, LP}, {LP, LP, LF}}};
    const char *names[2] = {"sb", "st"};
    for (int side = 0; side < 2; side++) {
        drift_run_info info = {0};
        info.label = (char *)names[side];
        info.target = (char *)"http://127.0.0.1:1/v1?model=m";
        info.config_json = (char *)"{}";
        info.decoding_json = (char *)"{\"temperature\":0.7,\"replicates\":3}";
        info.templates_json = (char *)"{}";
        info.suites_json = (char *)"[]";
        info.tool_version = (char *)"test";
        int64_t run_id = sb_run_begin(st, &info);
        drift_answer resp[9];
        memset(resp, 0, sizeof resp);
        for (int p = 0; p < 3; p++)
            for (int r = 0; r < 3; r++) {
                drift_answer *x = &resp[p * 3 + r];
                x->prompt_rowid = rowids[p];
                x->replicate = r;
                x->prompt_tokens = x->completion_tokens = -1;
                if (labels[side][p][r] == FX_ERR) x->error = (char *)"HTTP 500";
                else x->text = (char *)"answer";
            }
        sb_put_answers(st, run_id, resp, 9);
        drift_scored_set set;
        assert_int_equal(drift_store_load_scored(st, run_id, &set, &err), DRIFT_OK);
        drift_score sc[9];
        size_t n = 0;
        for (size_t i = 0; i < set.n; i++) {
            int p = set.rows[i].prompt_rowid == rowids[0] ? 0 : set.rows[i].prompt_rowid == rowids[1] ? 1 : 2;
            int lab = labels[side][p][set.rows[i].replicate];
            if (lab == FX_ERR) continue;
            sc[n].response_id = set.rows[i].response_id;
            sc[n].evaluator = "math";
            sc[n].label = lab;
            sc[n].value = lab == LP;
            sc[n].detail_json = NULL;
            n++;
        }
        sb_put_scores(st, sc, n);
        drift_scored_set_clear(&set);
    }
    drift_comparison *c;
    assert_int_equal(drift_compare_runs(st, "sb", "st", NULL, &c, &err), DRIFT_OK);
    const drift_wl_result *w = &c->wl[DRIFT_WL_MATH];
    assert_int_equal(w->replicates, 3);
    assert_int_equal(w->n, 8);
    assert_int_equal(w->errors, 1);
    assert_int_equal(w->flips, 4);
    assert_true(fabs(w->expected_flip_rate - (5.0 / 9.0 + 0.0 + 0.5) / 3.0) < 1e-12);
    assert_int_equal(w->majority_n, 2);
    assert_int_equal(w->majority_flips, 1);
    assert_int_equal(w->majority_ties, 1);
    assert_true(fabs(w->majority_flip_rate - 0.5) < 1e-12);
    char *json;
    assert_int_equal(drift_report_comparison(c, NULL, DRIFT_FORMAT_JSON, &json, &err), DRIFT_OK);
    assert_non_null(strstr(json, "\"expected_flip_rate\""));
    assert_non_null(strstr(json, "\"majority_flip_rate\": 0.5"));
    free(json);
    drift_comparison_free(c);
    drift_suite_free(suite);
    drift_store_close(st);
    unlink(path);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compare_known), cmocka_unit_test(test_compare_sets_pure), cmocka_unit_test(test_budgets), cmocka_unit_test(test_score),
        cmocka_unit_test(test_score_chunks), cmocka_unit_test(test_stochastic),
    };
    return cmocka_run_group_tests(tests, NULL, teardown);
}
