/* test_lab_null.c - the stochastic leg against its null
 * (drift_lab_beyond_null): the point figures against hand-computed means,
 * bad input refused, "too small to say" cases (no deterministic flip, too
 * few to bound the ratio), and the 95% intervals' coverage checked by
 * simulation: prompts with known pass probabilities under two stacks,
 * 5 replicates per stack and a null run, the true beyond-null drift and
 * ratio computed from the probabilities, and the share of simulated
 * studies whose interval holds the truth. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/lab.h"
#include "util/util.h"

/* Means by hand: cross (0.5 + 0.1 + 0) / 3 = 0.2, null (0.3 + 0.1 + 0) / 3,
 * det 1/3; beyond = (0.2 + 0 + 0) / 3, ratio = beyond / det = 0.2. */
static void test_point_figures(void **state) {
    (void)state;
    const double cross[3] = {0.5, 0.1, 0}, nul[3] = {0.3, 0.1, 0}, det[3] = {1, 0, 0};
    drift_lab_beyond b;
    drift_error err = {0};
    assert_int_equal(drift_lab_beyond_null(cross, nul, det, 3, 500, 7, &b, &err), DRIFT_OK);
    assert_int_equal(b.n, 3);
    assert_int_equal(b.resamples, 500);
    assert_float_equal(b.cross, 0.2, 1e-12);
    assert_float_equal(b.null_rate, 0.4 / 3, 1e-12);
    assert_float_equal(b.det, 1.0 / 3, 1e-12);
    assert_float_equal(b.beyond, 0.2 / 3, 1e-12);
    assert_float_equal(b.ratio, 0.2, 1e-12);
    assert_true(b.beyond_lo <= b.beyond && b.beyond <= b.beyond_hi);
    /* 1 in 27 resamples draws no prompt 0 -> (2/3)^3 = 29.6% of resamples have no flip: unbounded */
    assert_true(b.det_zero_share > 0.2 && b.det_zero_share < 0.4);
    assert_true(isinf(b.ratio_hi));
    /* the same seed gives the same interval */
    drift_lab_beyond b2;
    assert_int_equal(drift_lab_beyond_null(cross, nul, det, 3, 500, 7, &b2, &err), DRIFT_OK);
    assert_memory_equal(&b, &b2, sizeof b);
}

static void test_no_det_flip(void **state) {
    (void)state;
    const double cross[4] = {0.4, 0.2, 0, 0}, nul[4] = {0.4, 0, 0, 0}, det[4] = {0, 0, 0, 0};
    drift_lab_beyond b;
    drift_error err = {0};
    assert_int_equal(drift_lab_beyond_null(cross, nul, det, 4, 300, 1, &b, &err), DRIFT_OK);
    assert_float_equal(b.beyond, 0.05, 1e-12);
    assert_true(isnan(b.ratio) && isnan(b.ratio_lo) && isnan(b.ratio_hi));
    assert_float_equal(b.det_zero_share, 1.0, 0);
}

static void test_bad_input(void **state) {
    (void)state;
    const double ok[2] = {0.1, 0.2}, bad[2] = {0.1, 1.5}, nan2[2] = {0.1, NAN};
    drift_lab_beyond b;
    drift_error err = {0};
    assert_int_equal(drift_lab_beyond_null(ok, ok, ok, 1, 300, 1, &b, &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "at least 2"));
    assert_int_equal(drift_lab_beyond_null(ok, bad, ok, 2, 300, 1, &b, &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "outside [0, 1]"));
    assert_int_equal(drift_lab_beyond_null(ok, ok, nan2, 2, 300, 1, &b, &err), DRIFT_ERR_INVALID);
}

/* Passes of `reps` draws at probability p. */
static long binom(util_rng *r, int reps, double p) {
    long k = 0;
    for (int i = 0; i < reps; i++) k += util_rng_uniform(r) < p;
    return k;
}

static double disagree(long ap, long af, long bp, long bf) {
    return (double)(ap * bf + af * bp) / (double)((ap + af) * (bp + bf));
}

/* A population of prompt types (pass probability under A, under B, and
 * the chance the deterministic answers flip), drawn uniformly: the truth
 * is the average over the types. */
typedef struct ptype {
    double pa, pb, flip;
} ptype;

static const ptype TYPES[] = {
    {0.95, 0.95, 0.00}, {0.90, 0.70, 0.30}, {0.50, 0.40, 0.20}, {0.10, 0.10, 0.00}, {0.70, 0.75, 0.05},
    {0.99, 0.60, 0.60}, {0.30, 0.30, 0.00}, {0.80, 0.80, 0.00}, {0.60, 0.30, 0.40}, {0.05, 0.20, 0.15},
};
#define N_TYPES (sizeof TYPES / sizeof TYPES[0])

static void truth(double *beyond, double *ratio) {
    double d = 0, f = 0;
    for (size_t t = 0; t < N_TYPES; t++) {
        const ptype *p = &TYPES[t];
        double cross = p->pa * (1 - p->pb) + p->pb * (1 - p->pa);
        double nul = 2 * p->pa * (1 - p->pa);
        d += cross - nul;
        f += p->flip;
    }
    *beyond = d / N_TYPES;
    *ratio = d / f;
}

/* Coverage of the 95% intervals over simulated studies of n prompts x 5
 * replicates: near 95% (binomial noise over `studies` studies: +-3.5
 * points at 2 sd for 150 studies, plus the percentile bootstrap's known
 * small undercoverage at n = 100). */
static void test_coverage(void **state) {
    (void)state;
    double tb, tr;
    truth(&tb, &tr);
    const size_t n = 100;
    const int reps = 5, studies = 150;
    double cross[100], nul[100], det[100];
    util_rng r;
    util_rng_seed(&r, 12345);
    int cover_b = 0, cover_r = 0, bounded = 0;
    for (int s = 0; s < studies; s++) {
        for (size_t i = 0; i < n; i++) {
            const ptype *p = &TYPES[util_rng_below(&r, N_TYPES)];
            long ap = binom(&r, reps, p->pa), bp = binom(&r, reps, p->pb), np = binom(&r, reps, p->pa);
            cross[i] = disagree(ap, reps - ap, bp, reps - bp);
            nul[i] = disagree(ap, reps - ap, np, reps - np);
            det[i] = util_rng_uniform(&r) < p->flip;
        }
        drift_lab_beyond b;
        drift_error err = {0};
        assert_int_equal(drift_lab_beyond_null(cross, nul, det, n, 400, (uint64_t)s + 1, &b, &err), DRIFT_OK);
        cover_b += b.beyond_lo <= tb && tb <= b.beyond_hi;
        if (!isnan(b.ratio) && !isinf(b.ratio_hi)) {
            bounded++;
            cover_r += b.ratio_lo <= tr && tr <= b.ratio_hi;
        }
    }
    double cb = (double)cover_b / studies, cr = bounded ? (double)cover_r / bounded : 0;
    print_message("coverage over %d studies: beyond the null %.3f (truth %.4f), ratio %.3f of %d bounded (truth %.3f)\n",
                  studies, cb, tb, cr, bounded, tr);
    assert_true(bounded >= studies * 9 / 10);
    assert_true(cb >= 0.89 && cb <= 0.995);
    assert_true(cr >= 0.89 && cr <= 0.995);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_point_figures),
        cmocka_unit_test(test_no_det_flip),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_coverage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
