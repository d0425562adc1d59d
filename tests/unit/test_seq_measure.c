/* test_seq_measure.c - what measure --sequential relies on in
 * sequential.c: the sequential record of a run (drift_seq_recorded, read
 * from a decoding record that may come from any store: malformed ones are
 * no record, never a crash), the prefix property (a partial pair of runs
 * holding only the first h pairs of the seeded order, stored in any order,
 * with the suite's size recorded, replays to exactly the stop of the full
 * suite: what makes measure's verdict and compare --sequential's on its
 * runs the same), the fallback when the stored pairs run out with the gate
 * open, and the stopping curve (drift_seq_curve) against the replay. Built
 * by hand: a comparison with one math workload of N pairs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/compare.h"

#define N 400
#define SEED 7

typedef struct fixture {
    drift_comparison c;
    drift_pair_outcome pairs[N];
    char ids[N][16];
    char decoding[512];
} fixture;

/* Pair i flips when i % every == 0 (every 0: never). */
static void fill(fixture *f, int every, double budget) {
    memset(f, 0, sizeof *f);
    drift_wl_result *w = &f->c.wl[DRIFT_WL_MATH];
    long flips = 0;
    for (int i = 0; i < N; i++) {
        snprintf(f->ids[i], sizeof f->ids[i], "p%03d", i);
        f->pairs[i] = (drift_pair_outcome){.prompt_id = f->ids[i], .flipped = every > 0 && i % every == 0, .risk = NAN};
        flips += f->pairs[i].flipped;
    }
    w->workload = DRIFT_WL_MATH;
    w->pairs = f->pairs;
    w->n_pairs = N;
    w->n = N;
    w->flips = flips;
    w->flip_rate = (double)flips / N;
    w->budget = budget;
    w->pass = w->flip_rate <= budget;
    f->c.present[DRIFT_WL_MATH] = 1;
    for (int k = 0; k < DRIFT_WL_COUNT; k++)
        if (k != DRIFT_WL_MATH) f->c.wl[k].budget = -1;
}

/* Keeps the pairs of seeded rank < h, stored in reverse rank order, and
 * records the suite's size N as measure --sequential does. */
static void keep_prefix(fixture *f, size_t h) {
    const char *ids[N];
    size_t perm[N];
    drift_error err = {0};
    for (int i = 0; i < N; i++) ids[i] = f->pairs[i].prompt_id;
    assert_int_equal(drift_seq_order(ids, NULL, N, SEED, perm, &err), DRIFT_OK);
    drift_pair_outcome kept[N];
    long flips = 0;
    for (size_t r = 0; r < h; r++) {
        kept[h - 1 - r] = f->pairs[perm[r]];
        flips += kept[h - 1 - r].flipped;
    }
    memcpy(f->pairs, kept, h * sizeof *kept);
    drift_wl_result *w = &f->c.wl[DRIFT_WL_MATH];
    w->n_pairs = h;
    w->n = (long)h;
    w->flips = flips;
    w->flip_rate = (double)flips / (double)h;
    w->pass = w->flip_rate <= w->budget;
    snprintf(f->decoding, sizeof f->decoding,
             "{\"seed\":42,\"sequential\":{\"alpha\":0.05,\"order_seed\":%d,\"pairs\":{\"math\":%d},"
             "\"budget\":{\"math\":%.17g}}}",
             SEED, N, w->budget);
    f->c.target.decoding_json = f->decoding;
}

static void test_recorded(void **state) {
    (void)state;
    static fixture f;
    fill(&f, 0, 0.05);
    double alpha = 0, budget[DRIFT_WL_COUNT];
    uint64_t seed = 0;
    long pairs[DRIFT_WL_COUNT];
    assert_int_equal(drift_seq_recorded(&f.c, &alpha, &seed, pairs, budget), 0); /* no decoding record */
    keep_prefix(&f, 50);
    assert_int_equal(drift_seq_recorded(&f.c, &alpha, &seed, pairs, budget), 1);
    assert_true(fabs(alpha - 0.05) < 1e-12);
    assert_int_equal(seed, SEED);
    assert_int_equal(pairs[DRIFT_WL_MATH], N);
    assert_int_equal(pairs[DRIFT_WL_CODE], -1);
    assert_true(fabs(budget[DRIFT_WL_MATH] - 0.05) < 1e-12);
    assert_true(budget[DRIFT_WL_SAFETY] < 0);
    /* hostile records: no record, or the bad field left out */
    static const char *bad[] = {
        "", "not json", "[]", "{\"sequential\":1}", "{\"sequential\":{\"alpha\":\"x\",\"order_seed\":1,\"pairs\":{}}}",
        "{\"sequential\":{\"alpha\":0.05,\"order_seed\":-3,\"pairs\":{}}}",
        "{\"sequential\":{\"alpha\":0.05,\"order_seed\":1}}", "{\"sequential\":{\"alpha\":0.05,\"order_seed\":1.5,\"pairs\":{}}}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        f.c.target.decoding_json = (char *)bad[i];
        assert_int_equal(drift_seq_recorded(&f.c, &alpha, &seed, pairs, budget), 0);
        assert_int_equal(pairs[DRIFT_WL_MATH], -1);
    }
    f.c.target.decoding_json = (char *)"{\"sequential\":{\"alpha\":0.05,\"order_seed\":1,\"pairs\":{\"math\":-5,\"code\":"
                               "99999999999999},\"budget\":{\"math\":7,\"code\":\"x\"}}}";
    assert_int_equal(drift_seq_recorded(&f.c, &alpha, &seed, pairs, budget), 1);
    assert_int_equal(pairs[DRIFT_WL_MATH], -1);
    assert_int_equal(pairs[DRIFT_WL_CODE], -1);
    assert_true(budget[DRIFT_WL_MATH] < 0 && budget[DRIFT_WL_CODE] < 0);
}

/* The full suite's replay and a prefix of it stop at the same pair with
 * the same verdict and interval, for a BLOCK (20% against 5%) and a DEPLOY
 * (0% against 5%) alike, for every prefix from the stop to the suite. */
static void check_prefix(int every, double budget, drift_seq_verdict want) {
    static fixture full, part;
    fill(&full, every, budget);
    drift_seq_result a, b;
    drift_error err = {0};
    assert_int_equal(drift_compare_sequential(&full.c, 0.05, SEED, &a, &err), DRIFT_OK);
    const drift_seq_wl *x = &a.wl[DRIFT_WL_MATH];
    assert_int_equal(x->verdict, want);
    assert_true(x->early && x->asked < N);
    for (long h = x->asked; h <= N; h += 17) {
        fill(&part, every, budget);
        keep_prefix(&part, (size_t)h);
        assert_int_equal(drift_compare_sequential(&part.c, 0.05, SEED, &b, &err), DRIFT_OK);
        const drift_seq_wl *y = &b.wl[DRIFT_WL_MATH];
        assert_int_equal(y->n_total, N);
        assert_int_equal(y->asked, x->asked);
        assert_int_equal(y->flips, x->flips);
        assert_int_equal(y->verdict, x->verdict);
        assert_int_equal(y->early, 1);
        assert_true(y->lo == x->lo && y->hi == x->hi);
    }
    /* without the record the same prefix is a smaller suite: another gate */
    fill(&part, every, budget);
    keep_prefix(&part, (size_t)x->asked);
    part.c.target.decoding_json = NULL;
    assert_int_equal(drift_compare_sequential(&part.c, 0.05, SEED, &b, &err), DRIFT_OK);
    assert_int_equal(b.wl[DRIFT_WL_MATH].n_total, x->asked);
}

static void test_prefix_block(void **state) {
    (void)state;
    check_prefix(5, 0.05, DRIFT_SEQ_BLOCK);
}

static void test_prefix_deploy(void **state) {
    (void)state;
    check_prefix(0, 0.05, DRIFT_SEQ_DEPLOY);
}

/* Stored pairs that run out before the gate decides (a suite with errors,
 * an interrupted measure): compare's verdict over them, not early. */
static void test_runs_out(void **state) {
    (void)state;
    static fixture f;
    drift_seq_result r;
    drift_error err = {0};
    fill(&f, 5, 0.05);
    keep_prefix(&f, 3); /* too few to decide either way */
    assert_int_equal(drift_compare_sequential(&f.c, 0.05, SEED, &r, &err), DRIFT_OK);
    const drift_seq_wl *w = &r.wl[DRIFT_WL_MATH];
    assert_int_equal(w->asked, 3);
    assert_int_equal(w->early, 0);
    assert_int_equal(w->verdict, f.c.wl[DRIFT_WL_MATH].pass ? DRIFT_SEQ_DEPLOY : DRIFT_SEQ_BLOCK);
    assert_true(w->lo <= w->hi && w->lo >= 0 && w->hi <= 1);
}

/* The curve: one point per pair until the stop, the interval nested
 * (lower bound never falls, upper never rises), ending at the replay's
 * interval, which is above the budget at a BLOCK. The recorded budget
 * wins over the comparison's. */
static void test_curve(void **state) {
    (void)state;
    static fixture f;
    fill(&f, 5, 0.05);
    keep_prefix(&f, N);
    f.c.wl[DRIFT_WL_MATH].budget = -1; /* the report's compare had no math budget */
    drift_seq_result r;
    drift_seq_wl stop;
    drift_seq_point *pts = NULL;
    size_t np = 0;
    drift_error err = {0};
    assert_int_equal(drift_seq_curve(&f.c, DRIFT_WL_MATH, 0.05, SEED, &stop, &pts, &np, &err), DRIFT_OK);
    f.c.wl[DRIFT_WL_MATH].budget = 0.05;
    assert_int_equal(drift_compare_sequential(&f.c, 0.05, SEED, &r, &err), DRIFT_OK);
    assert_int_equal(np, (size_t)r.wl[DRIFT_WL_MATH].asked);
    assert_int_equal(stop.asked, r.wl[DRIFT_WL_MATH].asked);
    assert_int_equal(stop.verdict, DRIFT_SEQ_BLOCK);
    assert_true(fabs(stop.budget - 0.05) < 1e-12);
    for (size_t k = 0; k < np; k++) {
        assert_int_equal(pts[k].asked, (long)k + 1);
        if (k) assert_true(pts[k].lo >= pts[k - 1].lo && pts[k].hi <= pts[k - 1].hi);
    }
    assert_true(pts[np - 1].lo == stop.lo && pts[np - 1].hi == stop.hi && stop.lo > 0.05);
    free(pts);
    /* no budget anywhere: no curve, an error naming the workload */
    f.c.target.decoding_json = NULL;
    f.c.wl[DRIFT_WL_MATH].budget = -1;
    assert_int_equal(drift_seq_curve(&f.c, DRIFT_WL_MATH, 0.05, SEED, &stop, &pts, &np, &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "math"));
    assert_int_equal(drift_seq_curve(&f.c, DRIFT_WL_CODE, 0.05, SEED, &stop, &pts, &np, &err), DRIFT_ERR_INVALID);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_recorded), cmocka_unit_test(test_prefix_block), cmocka_unit_test(test_prefix_deploy),
        cmocka_unit_test(test_runs_out), cmocka_unit_test(test_curve),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
