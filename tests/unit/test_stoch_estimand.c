/* test_stoch_estimand.c - the stochastic leg's flip-rate estimand
 * (drift_stoch_estimand_compute):
 *   - hand-computed majority labels, ties as coin tosses, the ratios;
 *   - by simulation: replicate sets of R = 5 answers per prompt with known
 *     pass probabilities p (stack A) and q (stack B); a set's majority
 *     passes with P = P(Binomial(5, p) >= 3). Over many simulated studies
 *     the mean of beyond is the mean of (P - Q)^2 (unbiased), null is
 *     mean P(1-P) + Q(1-Q), and the 95% interval of beyond covers the
 *     truth in [0.90, 0.99] of the studies;
 *   - with both stacks alike (q = p) beyond is centred on 0 while cross
 *     (the raw majority-vote flip rate) is not;
 *   - the stochastic leg of the lab issue 36's audit read
 *     (tests/data/analysis/lab_stoch.csv, made by lab_stoch.py): the
 *     figures a separate Python computation of the same definition gives
 *     (cross 0.19, null 0.14, beyond 0.05, det 0.10). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/analysis.h"

static void near(const char *what, double got, double want, double tol) {
    if (!(fabs(got - want) <= tol)) fail_msg("%s: got %.10g, want %.10g (tol %g)", what, got, want, tol);
}

static drift_stoch_prompt SP(long a1, long b1, long a2, long b2, int det) {
    /* passes out of 5 in A1, B1, A2, B2 */
    drift_stoch_prompt x = {.pass = {a1, b1, a2, b2}, .fail = {5 - a1, 5 - b1, 5 - a2, 5 - b2}, .det_flip = det};
    return x;
}

static void test_hand(void **state) {
    (void)state;
    drift_stoch_prompt v[4] = {
        SP(5, 0, 4, 1, 1), /* majorities A1 1, B1 0, A2 1, B2 0: cross 1, null 0 */
        SP(3, 3, 2, 2, 0), /* 1, 1, 0, 0: cross (d(1,0) + d(0,1)) / 2 = 1, null (1 + 1) / 2 = 1 */
        SP(5, 5, 5, 5, 0), /* all pass: 0, 0 */
        SP(0, 5, 0, 5, 1), /* 0, 1, 0, 1: cross 1, null 0 */
    };
    drift_stoch_estimand e;
    drift_error err = {0};
    assert_int_equal(drift_stoch_estimand_compute(v, 4, NULL, &e, &err), DRIFT_OK);
    assert_int_equal(e.n, 4);
    assert_int_equal(e.n_det, 4);
    near("cross", e.cross.est, 3.0 / 4, 1e-15);
    near("null", e.null.est, 1.0 / 4, 1e-15);
    near("beyond", e.beyond.est, 2.0 / 4, 1e-15);
    near("det", e.det.est, 2.0 / 4, 1e-15);
    near("ratio cross", e.ratio_cross.est, 1.5, 1e-15);
    near("ratio beyond", e.ratio_beyond.est, 1.0, 1e-15);
    near("ties", e.tie_share, 0, 0);
    assert_true(e.beyond.lo <= e.beyond.est && e.beyond.est <= e.beyond.hi);
    /* a tie (4 labelled replicates, 2 pass) disagrees with anything half the time */
    drift_stoch_prompt t[2] = {{.pass = {2, 5, 2, 5}, .fail = {2, 0, 2, 0}, .det_flip = -1},
                               {.pass = {0, 0, 0, 0}, .fail = {5, 5, 5, 5}, .det_flip = -1}};
    assert_int_equal(drift_stoch_estimand_compute(t, 2, NULL, &e, &err), DRIFT_OK);
    /* prompt 0: A = 1/2, B = 1: cross = (0.5 + 0.5) / 2, null = (0.5 + 0) / 2 */
    near("tie cross", e.cross.est, 0.25, 1e-15);
    near("tie null", e.null.est, 0.125, 1e-15);
    near("tie share", e.tie_share, 2.0 / 8, 1e-15);
    assert_int_equal(e.n_det, 0);
    assert_true(isnan(e.det.est) && isnan(e.ratio_cross.est));
    /* a prompt lacking a labelled replicate in one set is skipped; too few left is an error */
    t[1].fail[2] = 0;
    assert_int_equal(drift_stoch_estimand_compute(t, 2, NULL, &e, &err), DRIFT_ERR_INVALID);
    assert_int_equal(e.n, 1);
    t[1].fail[2] = -1;
    assert_int_equal(drift_stoch_estimand_compute(t, 2, NULL, &e, &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "negative"));
    /* det all 0: ratios undefined */
    for (int i = 0; i < 4; i++) v[i].det_flip = 0;
    assert_int_equal(drift_stoch_estimand_compute(v, 4, NULL, &e, &err), DRIFT_OK);
    near("det 0", e.det.est, 0, 0);
    assert_true(isnan(e.ratio_beyond.est));
    assert_non_null(strstr(drift_stoch_estimand_definition(), "majority"));
}

static double maj(double p) { return gsl_cdf_binomial_Q(2, p, 5); } /* P(X >= 3) */

static void test_simulation(void **state) {
    (void)state;
    const size_t n = 150;
    const int studies = 400;
    gsl_rng *g = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(g, 20261206);
    double *p = malloc(n * sizeof *p), *q = malloc(n * sizeof *q);
    /* pass probabilities: most prompts settled, some near the boundary;
     * stack B moves a quarter of the prompts by a random amount */
    double truth = 0, tnull = 0;
    for (size_t i = 0; i < n; i++) {
        double u = gsl_rng_uniform(g);
        p[i] = u < 0.6 ? 0.97 : u < 0.8 ? 0.03 : gsl_rng_uniform(g);
        q[i] = gsl_rng_uniform(g) < 0.25 ? fmin(1, fmax(0, p[i] + gsl_ran_gaussian(g, 0.3))) : p[i];
        double P = maj(p[i]), Q = maj(q[i]);
        truth += (P - Q) * (P - Q);
        tnull += P * (1 - P) + Q * (1 - Q);
    }
    truth /= (double)n;
    tnull /= (double)n;
    drift_stoch_prompt *v = malloc(n * sizeof *v);
    drift_boot_opts o;
    drift_boot_opts_init(&o);
    o.resamples = 1000;
    double mean_beyond = 0, mean_null = 0, cover = 0, mean_same = 0, mean_same_cross = 0;
    for (int t = 0; t < studies; t++) {
        for (size_t i = 0; i < n; i++) {
            double pr[4] = {p[i], q[i], p[i], q[i]};
            for (int s = 0; s < 4; s++) {
                v[i].pass[s] = (long)gsl_ran_binomial(g, pr[s], 5);
                v[i].fail[s] = 5 - v[i].pass[s];
            }
            v[i].det_flip = -1;
        }
        o.seed = (uint64_t)t;
        drift_stoch_estimand e;
        drift_error err = {0};
        if (drift_stoch_estimand_compute(v, n, &o, &e, &err)) fail_msg("%s", err.msg);
        mean_beyond += e.beyond.est;
        mean_null += e.null.est;
        cover += e.beyond.lo <= truth && truth <= e.beyond.hi;
        /* the same stack twice: q = p */
        for (size_t i = 0; i < n; i++)
            for (int s = 1; s < 4; s += 2) {
                v[i].pass[s] = (long)gsl_ran_binomial(g, p[i], 5);
                v[i].fail[s] = 5 - v[i].pass[s];
            }
        if (drift_stoch_estimand_compute(v, n, &o, &e, &err)) fail_msg("%s", err.msg);
        mean_same += e.beyond.est;
        mean_same_cross += e.cross.est;
    }
    mean_beyond /= studies;
    mean_null /= studies;
    cover /= studies;
    mean_same /= studies;
    mean_same_cross /= studies;
    print_message("truth (P-Q)^2 %.5f: mean beyond %.5f, coverage %.3f; null %.5f (expected %.5f); same stack: "
                  "beyond %.5f, cross %.5f\n",
                  truth, mean_beyond, cover, mean_null, tnull, mean_same, mean_same_cross);
    /* standard error of a mean over 400 studies: a study's sd is ~0.01 here */
    near("unbiased beyond", mean_beyond, truth, 0.002);
    near("null", mean_null, tnull, 0.002);
    near("same stack beyond", mean_same, 0, 0.002);
    assert_true(mean_same_cross > 0.02); /* the raw majority flip rate is not 0 for the same stack */
    if (cover < 0.90 || cover > 0.99) fail_msg("coverage %.3f outside [0.90, 0.99]", cover);
    free(v);
    free(p);
    free(q);
    gsl_rng_free(g);
}

static void test_lab(void **state) {
    (void)state;
    const char *src = getenv("DRIFT_SOURCE");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/analysis/lab_stoch.csv", src ? src : ".");
    FILE *f = fopen(path, "r");
    if (!f) fail_msg("cannot open %s", path);
    char line[256];
    assert_non_null(fgets(line, sizeof line, f));
    drift_stoch_prompt v[200];
    size_t n = 0;
    long id;
    while (n < 200 && fscanf(f, "%ld,%ld,%ld,%ld,%ld,%ld,%ld,%ld,%ld,%d", &id, &v[n].pass[0], &v[n].fail[0], &v[n].pass[1],
                             &v[n].fail[1], &v[n].pass[2], &v[n].fail[2], &v[n].pass[3], &v[n].fail[3],
                             &v[n].det_flip) == 10)
        n++;
    fclose(f);
    assert_int_equal(n, 100);
    drift_stoch_estimand e;
    drift_error err = {0};
    assert_int_equal(drift_stoch_estimand_compute(v, n, NULL, &e, &err), DRIFT_OK);
    print_message("lab: cross %.2f%% [%.2f%%, %.2f%%], null %.2f%% [%.2f%%, %.2f%%], beyond %.2f%% [%.2f%%, %.2f%%], "
                  "det %.2f%% [%.2f%%, %.2f%%], cross/det %.2fx [%.2fx, %.2fx], beyond/det %.2fx [%.2fx, %.2fx], "
                  "det 0 in %.1f%% of resamples\n",
                  100 * e.cross.est, 100 * e.cross.lo, 100 * e.cross.hi, 100 * e.null.est, 100 * e.null.lo,
                  100 * e.null.hi, 100 * e.beyond.est, 100 * e.beyond.lo, 100 * e.beyond.hi, 100 * e.det.est,
                  100 * e.det.lo, 100 * e.det.hi, e.ratio_cross.est, e.ratio_cross.lo, e.ratio_cross.hi,
                  e.ratio_beyond.est, e.ratio_beyond.lo, e.ratio_beyond.hi, 100 * e.det_zero_share);
    near("cross", e.cross.est, 0.19, 1e-12);
    near("null", e.null.est, 0.14, 1e-12);
    near("beyond", e.beyond.est, 0.05, 1e-12);
    near("det", e.det.est, 0.10, 1e-12);
    near("ratio cross", e.ratio_cross.est, 1.9, 1e-12);
    near("ratio beyond", e.ratio_beyond.est, 0.5, 1e-12);
    assert_true(e.beyond.lo < e.beyond.est && e.beyond.est < e.beyond.hi);
    assert_true(e.ratio_beyond.lo < 0.5 && e.ratio_beyond.hi > 0.5);
    /* the same seed again: the same intervals */
    drift_stoch_estimand e2;
    assert_int_equal(drift_stoch_estimand_compute(v, n, NULL, &e2, &err), DRIFT_OK);
    assert_memory_equal(&e, &e2, sizeof e);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand),
        cmocka_unit_test(test_simulation),
        cmocka_unit_test(test_lab),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
