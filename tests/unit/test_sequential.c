/* test_sequential.c - the sequential gate (compare.h, sequential.c).
 *
 * Error control by simulation (fixed seed): tens of thousands of gates on
 * finite suites of N = 500 prompts whose flip count sits just under, at
 * and just over a 5% budget, each suite in a uniformly random order: the
 * share of wrong verdicts (DEPLOY when the rate is over the budget, BLOCK
 * when under; any early stop when it is exactly at it) must stay <= alpha,
 * and the interval must cover the suite's rate at every step at once in
 * >= 1 - alpha of the runs. A control shows the harness can fail: the same
 * rule with a Wilson interval peeked at after every prompt does exceed
 * alpha. Hand-computed values on N = 4; the O(1) gate and the kept
 * confidence sequence give the same verdicts; the seeded order; a replay
 * of the compare fixture and its renderings. Sizes are chosen to run in a
 * few seconds under ASan. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "compare_fixture.h"
#include "driftbench/compare.h"
#include "driftbench/report.h"

#define ALPHA 0.05
#define BUDGET 0.05
#define NSUITE 500

static void near(double got, double want, double tol) {
    if (!(fabs(got - want) <= tol)) fail_msg("got %.12g want %.12g", got, want);
}

/* The next outcome of a uniformly random order of a suite with `left`
 * flips among `remain` prompts. */
static int draw(util_rng *rng, long remain, long left) { return (long)util_rng_below(rng, (uint64_t)remain) < left; }

typedef struct sim {
    long runs, wrong_deploy, wrong_block, early, asked;
} sim;

/* runs gates until their verdict on a suite of NSUITE with k flips. */
static void gates(long k, long runs, util_rng *rng, sim *s) {
    memset(s, 0, sizeof *s);
    for (long r = 0; r < runs; r++) {
        drift_seq_gate g;
        drift_error err = {0};
        assert_int_equal(drift_seq_gate_init(&g, NSUITE, BUDGET, ALPHA, 0, -1, &err), DRIFT_OK);
        long left = k;
        while (g.verdict == DRIFT_SEQ_OPEN) {
            int x = draw(rng, NSUITE - g.asked, left);
            left -= x;
            drift_seq_gate_add(&g, x);
        }
        double rate = (double)k / NSUITE;
        if (g.verdict == DRIFT_SEQ_DEPLOY && (rate > BUDGET + 1e-12 || (rate >= BUDGET - 1e-12 && g.early)))
            s->wrong_deploy++;
        if (g.verdict == DRIFT_SEQ_BLOCK && rate <= BUDGET + 1e-12) s->wrong_block++;
        s->early += g.early;
        s->asked += g.decided_at;
        s->runs++;
        drift_seq_gate_free(&g);
    }
}

static void test_error_control(void **state) {
    (void)state;
    util_rng rng;
    util_rng_seed(&rng, 20260);
    /* 0.8x, at, 1.25x the budget: 20, 25 and 31 flips of 500 */
    static const long ks[] = {20, 25, 31};
    const long runs = 12000;
    long total = 0, wrong = 0;
    for (size_t i = 0; i < 3; i++) {
        sim s;
        gates(ks[i], runs, &rng, &s);
        double w = (double)(s.wrong_deploy + s.wrong_block) / (double)s.runs;
        double se = sqrt(ALPHA * (1 - ALPHA) / (double)s.runs);
        print_message("  K=%ld/%d (%.2fx budget): %ld gates, wrong %.4f (deploy %ld, block %ld; alpha %.2f, "
                      "binomial s.e. at alpha %.4f), early %.1f%%, asked %.1f%% of N\n",
                      ks[i], NSUITE, (double)ks[i] / (BUDGET * NSUITE), s.runs, w, s.wrong_deploy, s.wrong_block,
                      ALPHA, se, 100.0 * (double)s.early / (double)s.runs,
                      100.0 * (double)s.asked / ((double)s.runs * NSUITE));
        if (w > ALPHA) fail_msg("wrong verdict rate %.4f > alpha at K=%ld", w, ks[i]);
        /* each side is a test at alpha/2 */
        if ((double)s.wrong_deploy / (double)s.runs > ALPHA / 2 || (double)s.wrong_block / (double)s.runs > ALPHA / 2)
            fail_msg("a one-sided error over alpha/2 at K=%ld", ks[i]);
        total += s.runs;
        wrong += s.wrong_deploy + s.wrong_block;
    }
    assert_true(total >= 30000);
    print_message("  all: %ld gates, wrong %.4f\n", total, (double)wrong / (double)total);
}

/* The control: stop when a Wilson 95% interval, recomputed after every
 * prompt, leaves the budget. At K = budget*N every early stop is wrong. */
static void test_wilson_peeking_fails(void **state) {
    (void)state;
    util_rng rng;
    util_rng_seed(&rng, 7);
    const long k = 25, runs = 4000;
    long wrong = 0;
    for (long r = 0; r < runs; r++) {
        long left = k, s = 0;
        for (long t = 1; t <= NSUITE; t++) {
            int x = draw(&rng, NSUITE - t + 1, left);
            left -= x;
            s += x;
            double lo, hi;
            drift_wilson(s, t, 1.959963984540054, &lo, &hi);
            if (t < NSUITE && (hi < BUDGET || lo > BUDGET)) {
                wrong++;
                break;
            }
        }
    }
    double w = (double)wrong / (double)runs;
    print_message("  Wilson peeked after every prompt at K=25/500: wrong %.4f (alpha %.2f)\n", w, ALPHA);
    if (!(w > ALPHA)) fail_msg("the control did not exceed alpha (%.4f): the harness could not fail", w);
}

/* Time-uniform coverage: the whole suite asked, the true rate never out. */
static void test_coverage(void **state) {
    (void)state;
    util_rng rng;
    util_rng_seed(&rng, 99);
    static const long ks[] = {20, 25, 31, 100};
    const long runs = 3000;
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
        long covered = 0;
        for (long r = 0; r < runs; r++) {
            drift_seq_gate g;
            drift_error err = {0};
            assert_int_equal(drift_seq_gate_init(&g, NSUITE, BUDGET, ALPHA, 0, ks[i], &err), DRIFT_OK);
            long left = ks[i];
            for (long t = 0; t < NSUITE; t++) {
                int x = draw(&rng, NSUITE - t, left);
                left -= x;
                drift_seq_gate_add(&g, x);
            }
            assert_int_equal(g.flips, ks[i]);
            covered += drift_seq_gate_covers(&g);
            drift_seq_gate_free(&g);
        }
        double c = (double)covered / (double)runs;
        print_message("  K=%ld/%d: covered at every step in %.4f of %ld runs (need >= %.2f, s.e. %.4f)\n", ks[i],
                      NSUITE, c, runs, 1 - ALPHA, sqrt(ALPHA * (1 - ALPHA) / (double)runs));
        if (c < 1 - ALPHA) fail_msg("time-uniform coverage %.4f < 1 - alpha at K=%ld", c, ks[i]);
    }
}

/* N = 4, budget 50%, alpha 0.5 (threshold 2/alpha = 4), outcomes 1,1,0,0.
 * Step 1: estimate (0 + 4*0.5)/4 = 0.5 = mu(2) = 2/4: both stakes 0.
 * Step 2: estimate (1 + 2)/5 = 0.6, mu(2) = (2-1)/3 = 1/3: the lower
 *   bettor stakes min(0.9, (0.6 - 1/3)/(1/3 * 2/3) = 1.2) = 0.9, so
 *   lo(K) = 1 + 0.9 (1 - (K-1)/3): K=2 1.6, K=3 1.3, K=4 1.0 (< 4).
 *   Feasible counts 2..4: the interval is [0.5, 1].
 * Step 3: mu(2) = 0, estimate 2/3 > 0: lower stake 0.9 against x = 0:
 *   lo(2) *= 1, lo(3) *= 1 - 0.9*0.5; 4 is no longer feasible: [0.5, 0.75].
 * Step 4: the suite is exhausted at 2/4 = the budget: compare's verdict,
 *   DEPLOY, not early, interval [0.5, 0.5]. */
static void test_hand_values(void **state) {
    (void)state;
    drift_seq_gate g;
    drift_error err = {0};
    double lo, hi;
    assert_int_equal(drift_seq_gate_init(&g, 4, 0.5, 0.5, 1, -1, &err), DRIFT_OK);
    assert_int_equal(g.k_hi, 2);
    assert_int_equal(g.k_lo, 2);
    assert_int_equal(drift_seq_gate_add(&g, 1), DRIFT_SEQ_OPEN);
    near(g.log_lo, 0.0, 1e-15);
    near(g.log_up, 0.0, 1e-15);
    drift_seq_gate_interval(&g, &lo, &hi);
    near(lo, 0.25, 1e-15);
    near(hi, 1.0, 1e-15);
    assert_int_equal(drift_seq_gate_add(&g, 1), DRIFT_SEQ_OPEN);
    near(g.log_lo, log(1.6), 1e-12);
    near(g.cs_lo[3], log(1.3), 1e-12);
    near(g.cs_lo[4], 0.0, 1e-12);
    near(g.log_up, 0.0, 1e-15);
    drift_seq_gate_interval(&g, &lo, &hi);
    near(lo, 0.5, 1e-15);
    near(hi, 1.0, 1e-15);
    assert_int_equal(drift_seq_gate_add(&g, 0), DRIFT_SEQ_OPEN);
    near(g.log_lo, log(1.6), 1e-12);
    near(g.cs_lo[3], log(1.3 * 0.55), 1e-12);
    drift_seq_gate_interval(&g, &lo, &hi);
    near(lo, 0.5, 1e-15);
    near(hi, 0.75, 1e-15);
    assert_int_equal(drift_seq_gate_add(&g, 0), DRIFT_SEQ_DEPLOY);
    assert_int_equal(g.decided_at, 4);
    assert_int_equal(g.early, 0);
    near(g.stop_lo, 0.5, 1e-15);
    near(g.stop_hi, 0.5, 1e-15);
    drift_seq_gate_free(&g);

    /* budget 25% of 4 (k = 1): two flips make it certain, early */
    assert_int_equal(drift_seq_gate_init(&g, 4, 0.25, 0.5, 1, -1, &err), DRIFT_OK);
    assert_int_equal(drift_seq_gate_add(&g, 1), DRIFT_SEQ_OPEN);
    assert_int_equal(drift_seq_gate_add(&g, 1), DRIFT_SEQ_BLOCK);
    assert_int_equal(g.decided_at, 2);
    assert_int_equal(g.early, 1);
    near(g.stop_lo, 0.5, 1e-15);
    near(g.stop_hi, 1.0, 1e-15);
    /* sticky: later outcomes only count */
    assert_int_equal(drift_seq_gate_add(&g, 0), DRIFT_SEQ_BLOCK);
    assert_int_equal(g.asked, 3);
    drift_seq_gate_free(&g);

    /* bad arguments name themselves */
    assert_int_equal(drift_seq_gate_init(&g, 0, 0.05, 0.05, 0, -1, &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "prompts"));
    assert_int_equal(drift_seq_gate_init(&g, 10, 1.5, 0.05, 0, -1, &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "budget"));
    assert_int_equal(drift_seq_gate_init(&g, 10, 0.05, 0, 0, -1, &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "alpha"));
    assert_int_equal(drift_seq_gate_init(&g, 10, 0.05, 0.05, 0, 11, &err), DRIFT_ERR_INVALID);
}

/* The O(1) gate and the kept confidence sequence decide alike, and the
 * interval at a stop lies on the verdict's side of the budget. */
static void test_modes_agree(void **state) {
    (void)state;
    util_rng rng;
    util_rng_seed(&rng, 3);
    const long n = 200;
    for (long r = 0; r < 300; r++) {
        long k = (long)util_rng_below(&rng, 41); /* 0..20% */
        drift_seq_gate a, b;
        drift_error err = {0};
        assert_int_equal(drift_seq_gate_init(&a, n, BUDGET, ALPHA, 0, -1, &err), DRIFT_OK);
        assert_int_equal(drift_seq_gate_init(&b, n, BUDGET, ALPHA, 1, k, &err), DRIFT_OK);
        long left = k;
        int inside = 1;
        for (long t = 0; t < n; t++) {
            int x = draw(&rng, n - t, left);
            left -= x;
            assert_int_equal(drift_seq_gate_add(&a, x), drift_seq_gate_add(&b, x));
            double lo, hi;
            assert_int_equal(drift_seq_gate_interval(&b, &lo, &hi), 0);
            /* the watched truth is covered exactly while it is inside */
            int in = lo <= (double)k / n + 1e-12 && (double)k / n <= hi + 1e-12;
            inside = inside && in;
            assert_int_equal(drift_seq_gate_covers(&b), inside);
        }
        assert_int_equal(a.decided_at, b.decided_at);
        assert_int_equal(a.verdict, b.verdict);
        assert_true(b.verdict != DRIFT_SEQ_OPEN);
        if (b.early && b.verdict == DRIFT_SEQ_DEPLOY) assert_true(b.stop_hi < BUDGET);
        if (b.early && b.verdict == DRIFT_SEQ_BLOCK) assert_true(b.stop_lo > BUDGET);
        assert_true(isnan(a.stop_lo));
        drift_seq_gate_free(&a);
        drift_seq_gate_free(&b);
    }
}

static void test_order(void **state) {
    (void)state;
    const char *ids[6] = {"a", "b", "c", "d", "e", "f"};
    size_t p1[6], p2[6], p3[6], q[5];
    drift_error err = {0};
    assert_int_equal(drift_seq_order(ids, NULL, 6, 42, p1, &err), DRIFT_OK);
    assert_int_equal(drift_seq_order(ids, NULL, 6, 42, p2, &err), DRIFT_OK);
    assert_memory_equal(p1, p2, sizeof p1);
    int seen[6] = {0};
    for (int i = 0; i < 6; i++) seen[p1[i]]++;
    for (int i = 0; i < 6; i++) assert_int_equal(seen[i], 1);
    /* another seed gives another order (for this input: checked once) */
    int differs = 0;
    for (uint64_t s = 1; s < 5 && !differs; s++) {
        assert_int_equal(drift_seq_order(ids, NULL, 6, s, p3, &err), DRIFT_OK);
        differs = memcmp(p1, p3, sizeof p1) != 0;
    }
    assert_true(differs);
    /* a subset keeps the relative order of its prompts */
    assert_int_equal(drift_seq_order(ids + 1, NULL, 5, 42, q, &err), DRIFT_OK);
    size_t j = 0;
    for (int i = 0; i < 6; i++)
        if (p1[i] != 0) assert_int_equal(q[j++] + 1, p1[i]);
}

/* The compare fixture (compare_fixture.h): math 17 pairs with 4 flips,
 * safety 10 with 3, chat 4 with 2, long_context 3 with 1. */
static void test_replay_fixture(void **state) {
    (void)state;
    drift_store *st = fx_build(fx_path("seq.db"));
    drift_compare_opts o;
    drift_compare_opts_default(&o);
    drift_error err = {0};
    assert_int_equal(drift_compare_parse_budgets(&o, "math=1,safety=90,code=none,chat=none,long=none", &err),
                     DRIFT_OK);
    o.max_left_out = 1.0; /* math leaves 3 of 20 pairs out: not what this test is about */
    drift_comparison *c = NULL;
    if (drift_compare_runs(st, "base", "targ", &o, &c, &err)) fail_msg("%s", err.msg);
    assert_int_equal(c->wl[DRIFT_WL_MATH].n_pairs, 17);
    long flips = 0;
    for (size_t i = 0; i < c->wl[DRIFT_WL_MATH].n_pairs; i++) flips += c->wl[DRIFT_WL_MATH].pairs[i].flipped;
    assert_int_equal(flips, 4);
    drift_seq_result r;
    assert_int_equal(drift_compare_sequential(c, 0.05, 42, &r, &err), DRIFT_OK);
    /* math: budget 1% of 17 -> no flip allowed: BLOCK at the first flip of the order */
    const drift_wl_result *m = &c->wl[DRIFT_WL_MATH];
    const char *ids[17];
    int reps[17];
    size_t perm[17];
    for (size_t i = 0; i < 17; i++) {
        ids[i] = m->pairs[i].prompt_id;
        reps[i] = m->pairs[i].replicate;
    }
    assert_int_equal(drift_seq_order(ids, reps, 17, 42, perm, &err), DRIFT_OK);
    long first = 0;
    while (!m->pairs[perm[first]].flipped) first++;
    const drift_seq_wl *w = &r.wl[DRIFT_WL_MATH];
    assert_true(w->gated);
    assert_int_equal(w->verdict, DRIFT_SEQ_BLOCK);
    assert_int_equal(w->asked, first + 1);
    assert_int_equal(w->flips, 1);
    assert_int_equal(w->n_total, 17);
    assert_true(w->lo > 0.01 && w->hi >= w->lo);
    /* safety: 3 flips of 10 at a 90% budget: certain once 2 prompts are asked without 9 flips possible */
    assert_int_equal(r.wl[DRIFT_WL_SAFETY].verdict, DRIFT_SEQ_DEPLOY);
    assert_true(r.wl[DRIFT_WL_SAFETY].asked <= 10);
    /* chat and long_context: no budget, not gated */
    assert_true(r.present[DRIFT_WL_CHAT] && !r.wl[DRIFT_WL_CHAT].gated);
    assert_int_equal(r.wl[DRIFT_WL_CHAT].decision, DRIFT_DECISION_NOT_GATED);
    assert_int_equal(r.pass, 0);
    /* the decisions, in the gate's words: an early stop is certain */
    assert_int_equal(w->decision, DRIFT_DECISION_BLOCK);
    assert_int_equal(w->reason, DRIFT_REASON_RATE);
    assert_int_equal(r.wl[DRIFT_WL_SAFETY].decision, DRIFT_DECISION_DEPLOY);
    assert_int_equal(r.decision, DRIFT_DECISION_BLOCK);

    char *text = NULL;
    assert_int_equal(drift_seq_render(c, &r, DRIFT_FORMAT_TEXT, &text, &err), DRIFT_OK);
    assert_non_null(strstr(text, "BLOCK"));
    assert_non_null(strstr(text, "no budget"));
    free(text);
    assert_int_equal(drift_seq_render(c, &r, DRIFT_FORMAT_JSON, &text, &err), DRIFT_OK);
    assert_non_null(strstr(text, "\"sequential\""));
    assert_non_null(strstr(text, "\"asked\""));
    free(text);
    assert_int_equal(drift_seq_render(c, &r, DRIFT_FORMAT_MARKDOWN, &text, &err), DRIFT_OK);
    assert_non_null(strstr(text, "| math |"));
    free(text);
    assert_int_equal(drift_seq_render(c, &r, DRIFT_FORMAT_JUNIT, &text, &err), DRIFT_ERR_INVALID);
    assert_int_equal(drift_compare_sequential(c, 1.5, 42, &r, &err), DRIFT_ERR_INVALID);
    drift_comparison_free(c);

    /* the pairs run out undecided: compare's decision. Safety 3 of 10 at a
     * 40% budget: no early stop, and the exact interval [6.7%, 65.2%]
     * straddles 40%: INCONCLUSIVE (the gate's own end-of-suite verdict,
     * 30% <= 40%, is not a decision about the stack) */
    assert_int_equal(drift_compare_parse_budgets(&o, "math=none,safety=40", &err), DRIFT_OK);
    if (drift_compare_runs(st, "base", "targ", &o, &c, &err)) fail_msg("%s", err.msg);
    assert_int_equal(drift_compare_sequential(c, 0.05, 42, &r, &err), DRIFT_OK);
    assert_false(r.wl[DRIFT_WL_SAFETY].early);
    assert_int_equal(r.wl[DRIFT_WL_SAFETY].decision, DRIFT_DECISION_INCONCLUSIVE);
    assert_int_equal(r.decision, DRIFT_DECISION_INCONCLUSIVE);
    assert_int_equal(drift_seq_render(c, &r, DRIFT_FORMAT_TEXT, &text, &err), DRIFT_OK);
    assert_non_null(strstr(text, "verdict: INCONCLUSIVE (exit 3)"));
    free(text);
    drift_comparison_free(c);

    /* too many pairs left out blocks the sequential gate too, whatever its
     * early stop: math's 3 of 20 at the default 5% limit */
    drift_compare_opts_default(&o);
    assert_int_equal(drift_compare_parse_budgets(&o, "math=50,safety=none,chat=none,long=none", &err), DRIFT_OK);
    if (drift_compare_runs(st, "base", "targ", &o, &c, &err)) fail_msg("%s", err.msg);
    assert_int_equal(drift_compare_sequential(c, 0.05, 42, &r, &err), DRIFT_OK);
    assert_int_equal(r.wl[DRIFT_WL_MATH].decision, DRIFT_DECISION_BLOCK);
    assert_int_equal(r.wl[DRIFT_WL_MATH].reason, DRIFT_REASON_LEFT_OUT);
    drift_comparison_free(c);
    drift_store_close(st);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand_values),   cmocka_unit_test(test_order),
        cmocka_unit_test(test_modes_agree),   cmocka_unit_test(test_error_control),
        cmocka_unit_test(test_coverage),      cmocka_unit_test(test_wilson_peeking_fails),
        cmocka_unit_test(test_replay_fixture),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    fx_cleanup();
    return rc;
}
