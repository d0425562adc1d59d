/* test_cluster_boot.c - the cluster bootstrap over prompts and the two-way
 * bootstrap over prompts and configurations (drift_flip_boot_prompts,
 * drift_flip_boot_two_way):
 *   - the figures on hand-made pairs (pooled, mean over configurations,
 *     both directions and the net), fixed seed -> identical intervals;
 *   - the bootstrap's spread against the analytic cluster (ratio estimator)
 *     standard error on a large sample;
 *   - coverage by simulation: clustered flips with a known rate (each
 *     prompt has its own flip propensity, drawn from a beta distribution;
 *     each configuration flips it independently with that propensity; for
 *     the two-way case each configuration also scales it by its own
 *     factor). The nominal 95% cluster interval must cover the true rate in
 *     [0.88, 0.985] of the simulated studies; the interval that takes every
 *     pair as independent (Wilson over pairs) covers far less, the "each
 *     prompt counted once" interval (Wilson with n = prompts) more and is
 *     wider. Printed figures are recorded in bench/BENCHMARKS.md
 *     ("Statistics: coverage of the cluster bootstrap");
 *   - the lab's math pairs that issue 36's audit read
 *     (tests/data/analysis/lab_math_pairs.csv, lab_pairs.py): the old
 *     interval [0.74%, 5.87%] and the audit's cluster bootstrap
 *     [1.58%, 2.67%] (its seed and resample count unknown: within 0.15
 *     points). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/analysis.h"

#define Z95 1.959963984540054

static void near(const char *what, double got, double want, double tol) {
    if (!(fabs(got - want) <= tol)) fail_msg("%s: got %.10g, want %.10g (tol %g)", what, got, want, tol);
}

static drift_flip_pair P(int64_t prompt, int64_t config, int b, int c) {
    drift_flip_pair x = {.prompt = prompt, .config = config, .base_ok = (unsigned char)b, .cfg_ok = (unsigned char)c};
    return x;
}

static void test_figures(void **state) {
    (void)state;
    /* config 10: 4 prompts, 1 to wrong, 1 to right; config 20: 2 prompts, 1 to wrong */
    drift_flip_pair v[] = {P(1, 10, 1, 0), P(2, 10, 0, 1), P(3, 10, 1, 1), P(4, 10, 0, 0),
                           P(1, 20, 1, 0), P(3, 20, 1, 1)};
    drift_flip_boot a, b, c;
    drift_error err = {0};
    drift_boot_opts o;
    drift_boot_opts_init(&o);
    assert_int_equal(o.resamples, 2000);
    assert_int_equal(drift_flip_boot_prompts(v, 6, &o, &a, &err), DRIFT_OK);
    assert_int_equal(a.n_pairs, 6);
    assert_int_equal(a.n_prompts, 4);
    assert_int_equal(a.n_configs, 2);
    near("pooled flip", a.flip.est, 3.0 / 6, 1e-15);
    near("pooled to_wrong", a.to_wrong.est, 2.0 / 6, 1e-15);
    near("pooled to_right", a.to_right.est, 1.0 / 6, 1e-15);
    near("pooled net", a.net.est, -1.0 / 6, 1e-15);
    assert_true(a.flip.lo <= a.flip.est && a.flip.est <= a.flip.hi);
    assert_true(a.net.lo < 0 && a.net.hi > -1);
    /* same seed, same figures, whatever the order of the pairs */
    drift_flip_pair w[6];
    for (int i = 0; i < 6; i++) w[i] = v[5 - i];
    assert_int_equal(drift_flip_boot_prompts(w, 6, &o, &b, &err), DRIFT_OK);
    assert_memory_equal(&a, &b, sizeof a);
    /* the mean over configurations: (2/4 + 1/2) / 2 for flips, (1/4 + 1/2) / 2 to wrong */
    assert_int_equal(drift_flip_boot_two_way(v, 6, &o, &c, &err), DRIFT_OK);
    assert_int_equal(c.two_way, 1);
    near("mean flip", c.flip.est, 0.5, 1e-15);
    near("mean to_wrong", c.to_wrong.est, 0.375, 1e-15);
    near("mean to_right", c.to_right.est, 0.125, 1e-15);
    near("mean net", c.net.est, -0.25, 1e-15);
    /* errors */
    assert_int_equal(drift_flip_boot_prompts(v, 1, &o, &a, &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "at least 2"));
    drift_flip_pair one_config[] = {P(1, 10, 1, 0), P(2, 10, 1, 1)};
    assert_int_equal(drift_flip_boot_two_way(one_config, 2, &o, &c, &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "configuration"));
    one_config[0].cfg_ok = 2;
    assert_int_equal(drift_flip_boot_prompts(one_config, 2, &o, &a, &err), DRIFT_ERR_INVALID);
    assert_int_equal(drift_flip_boot_prompts(NULL, 0, NULL, &a, &err), DRIFT_ERR_INVALID);
}

/* Wilson with a real count (the old "each prompt counted once" interval). */
static void test_wilson_real(void **state) {
    (void)state;
    double lo, hi;
    drift_wilson_real(0.5, 10, Z95, &lo, &hi); /* = drift_wilson(5, 10): 0.2366 - 0.7634 */
    near("lo", lo, 0.2366, 1e-4);
    near("hi", hi, 0.7634, 1e-4);
    drift_wilson_real(0, 10, Z95, &lo, &hi);
    near("lo0", lo, 0, 0);
    near("hi0", hi, 0.2775, 1e-4);
    drift_wilson_real(0.3, 0, Z95, &lo, &hi);
    near("lo none", lo, 0, 0);
    near("hi none", hi, 1, 0);
}

/* ---- simulated clustered flips ---- */

typedef struct sim {
    size_t n_prompts, n_configs;
    double a, b;        /* prompt propensity ~ Beta(a, b), mean a / (a + b) */
    double cfg_shape;   /* > 0: configuration factor ~ Gamma(shape, 1/shape) (mean 1); 0: none */
} sim;

/* One study: pairs (baseline always correct, so every flip is to wrong). */
static void simulate(gsl_rng *g, const sim *s, drift_flip_pair *v) {
    double *k = malloc(s->n_configs * sizeof *k);
    for (size_t c = 0; c < s->n_configs; c++) k[c] = s->cfg_shape > 0 ? gsl_ran_gamma(g, s->cfg_shape, 1 / s->cfg_shape) : 1;
    size_t m = 0;
    for (size_t p = 0; p < s->n_prompts; p++) {
        double pi = gsl_ran_beta(g, s->a, s->b);
        for (size_t c = 0; c < s->n_configs; c++) {
            double q = fmin(1.0, pi * k[c]);
            v[m++] = P((int64_t)p, (int64_t)c, 1, gsl_rng_uniform(g) < q ? 0 : 1);
        }
    }
    free(k);
}

typedef struct cover {
    double cluster, pairs, once, two_way;     /* share of studies covering the true rate */
    double w_cluster, w_pairs, w_once, w_two; /* mean widths */
} cover;

static cover run_sim(const sim *s, int studies, int resamples, int two_way) {
    gsl_rng *g = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(g, 20261206);
    size_t n = s->n_prompts * s->n_configs;
    drift_flip_pair *v = malloc(n * sizeof *v);
    double truth = s->a / (s->a + s->b); /* E pi * E k (E k = 1; min(1, .) rarely binds at these rates) */
    cover c = {0};
    drift_boot_opts o;
    drift_boot_opts_init(&o);
    o.resamples = resamples;
    for (int t = 0; t < studies; t++) {
        simulate(g, s, v);
        o.seed = (uint64_t)t + 1;
        drift_flip_boot r;
        drift_error err = {0};
        if (drift_flip_boot_prompts(v, n, &o, &r, &err)) fail_msg("%s", err.msg);
        c.cluster += r.flip.lo <= truth && truth <= r.flip.hi;
        c.w_cluster += r.flip.hi - r.flip.lo;
        double lo, hi;
        drift_wilson_real(r.flip.est, (double)n, Z95, &lo, &hi);
        c.pairs += lo <= truth && truth <= hi;
        c.w_pairs += hi - lo;
        drift_wilson_real(r.flip.est, (double)s->n_prompts, Z95, &lo, &hi);
        c.once += lo <= truth && truth <= hi;
        c.w_once += hi - lo;
        if (two_way) {
            if (drift_flip_boot_two_way(v, n, &o, &r, &err)) fail_msg("%s", err.msg);
            c.two_way += r.flip.lo <= truth && truth <= r.flip.hi;
            c.w_two += r.flip.hi - r.flip.lo;
        }
    }
    double k = studies;
    c.cluster /= k; c.pairs /= k; c.once /= k; c.two_way /= k;
    c.w_cluster /= k; c.w_pairs /= k; c.w_once /= k; c.w_two /= k;
    free(v);
    gsl_rng_free(g);
    return c;
}

/* The bootstrap's spread matches the analytic standard error of a ratio
 * estimator with clusters: se^2 = sum_p (f_p - r n_p)^2 / (P (P - 1) nbar^2)
 * (nbar = mean pairs per prompt); the 95% percentile interval's width is
 * then about 2 x 1.96 se. */
static void test_against_analytic(void **state) {
    (void)state;
    sim s = {.n_prompts = 400, .n_configs = 8, .a = 0.3, .b = 5.7, .cfg_shape = 0};
    gsl_rng *g = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(g, 5);
    size_t n = s.n_prompts * s.n_configs;
    drift_flip_pair *v = malloc(n * sizeof *v);
    simulate(g, &s, v);
    drift_boot_opts o;
    drift_boot_opts_init(&o);
    o.resamples = 8000;
    drift_flip_boot r;
    drift_error err = {0};
    assert_int_equal(drift_flip_boot_prompts(v, n, &o, &r, &err), DRIFT_OK);
    double *f = calloc(s.n_prompts, sizeof *f);
    for (size_t i = 0; i < n; i++) f[v[i].prompt] += v[i].cfg_ok == 0;
    double rate = r.flip.est, ss = 0, nbar = (double)s.n_configs;
    for (size_t p = 0; p < s.n_prompts; p++) ss += (f[p] - rate * nbar) * (f[p] - rate * nbar);
    double se = sqrt(ss / ((double)s.n_prompts * (double)(s.n_prompts - 1) * nbar * nbar));
    double want = 2 * Z95 * se, got = r.flip.hi - r.flip.lo;
    print_message("analytic cluster se %.5f: 95%% width %.5f, bootstrap %.5f\n", se, want, got);
    near("width / analytic", got / want, 1.0, 0.06);
    /* the pairs-independent width is far narrower on such clustered data */
    double lo, hi;
    drift_wilson_real(rate, (double)n, Z95, &lo, &hi);
    assert_true(hi - lo < 0.8 * got);
    /* fixed seed: the same interval again; another seed: about the same one
     * (the resampled rates are multiples of 1/3200, so the quantiles of two
     * seeds often coincide exactly) */
    drift_flip_boot r2;
    assert_int_equal(drift_flip_boot_prompts(v, n, &o, &r2, &err), DRIFT_OK);
    assert_memory_equal(&r, &r2, sizeof r);
    o.seed = 7;
    assert_int_equal(drift_flip_boot_prompts(v, n, &o, &r2, &err), DRIFT_OK);
    near("another seed, lo", r2.flip.lo, r.flip.lo, 0.05 * got);
    near("another seed, hi", r2.flip.hi, r.flip.hi, 0.05 * got);
    free(f);
    free(v);
    gsl_rng_free(g);
}

static void test_coverage_prompts(void **state) {
    (void)state;
    /* 100 prompts x 12 configurations, mean flip rate 3%, strongly clustered */
    sim s = {.n_prompts = 100, .n_configs = 12, .a = 0.15, .b = 4.85, .cfg_shape = 0};
    cover c = run_sim(&s, 400, 1000, 0);
    print_message("one-way, 400 studies: coverage cluster %.3f (width %.4f), pairs-independent %.3f (%.4f), "
                  "each prompt once %.3f (%.4f)\n",
                  c.cluster, c.w_cluster, c.pairs, c.w_pairs, c.once, c.w_once);
    if (c.cluster < 0.88 || c.cluster > 0.985) fail_msg("cluster bootstrap coverage %.3f outside [0.88, 0.985]", c.cluster);
    if (c.pairs > 0.85) fail_msg("pairs-independent coverage %.3f: the simulation is not clustered enough", c.pairs);
    assert_true(c.once >= c.cluster);
    assert_true(c.w_once > 1.3 * c.w_cluster);
}

static void test_coverage_two_way(void **state) {
    (void)state;
    /* 80 prompts x 15 configurations whose own rates vary (gamma factor, cv 0.7) */
    sim s = {.n_prompts = 80, .n_configs = 15, .a = 0.3, .b = 5.7, .cfg_shape = 2};
    cover c = run_sim(&s, 300, 1000, 1);
    print_message("two-way, 300 studies: coverage two-way %.3f (width %.4f), prompts only %.3f (%.4f), "
                  "each prompt once %.3f (%.4f)\n",
                  c.two_way, c.w_two, c.cluster, c.w_cluster, c.once, c.w_once);
    if (c.two_way < 0.88 || c.two_way > 0.995) fail_msg("two-way bootstrap coverage %.3f outside [0.88, 0.995]", c.two_way);
    /* resampling prompts alone ignores the configurations' own spread */
    assert_true(c.cluster < c.two_way - 0.03);
}

static void test_lab_math(void **state) {
    (void)state;
    const char *src = getenv("DRIFT_SOURCE");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/analysis/lab_math_pairs.csv", src ? src : ".");
    FILE *f = fopen(path, "r");
    if (!f) fail_msg("cannot open %s", path);
    char line[128];
    assert_non_null(fgets(line, sizeof line, f));
    size_t n = 0, cap = 4096;
    drift_flip_pair *v = malloc(cap * sizeof *v);
    long long pr, cf;
    int b, c;
    while (fscanf(f, "%lld,%lld,%d,%d", &pr, &cf, &b, &c) == 4) {
        assert_true(n < cap);
        v[n++] = P(pr, cf, b, c);
    }
    fclose(f);
    assert_int_equal(n, 3600);
    drift_flip_boot r, t;
    drift_error err = {0};
    assert_int_equal(drift_flip_boot_prompts(v, n, NULL, &r, &err), DRIFT_OK);
    assert_int_equal(drift_flip_boot_two_way(v, n, NULL, &t, &err), DRIFT_OK);
    assert_int_equal(r.n_prompts, 150);
    assert_int_equal(r.n_configs, 24);
    near("math pooled", r.flip.est, 76.0 / 3600, 1e-15);
    double lo, hi;
    drift_wilson_real(r.flip.est, (double)r.n_prompts, Z95, &lo, &hi);
    print_message("lab math: %.2f%%, each prompt once [%.2f%%, %.2f%%], cluster over prompts [%.2f%%, %.2f%%], "
                  "two-way [%.2f%%, %.2f%%] (mean over configurations %.2f%%); to wrong %.2f%% [%.2f%%, %.2f%%], "
                  "to right %.2f%% [%.2f%%, %.2f%%], net %.2f%% [%.2f%%, %.2f%%]\n",
                  100 * r.flip.est, 100 * lo, 100 * hi, 100 * r.flip.lo, 100 * r.flip.hi, 100 * t.flip.lo,
                  100 * t.flip.hi, 100 * t.flip.est, 100 * r.to_wrong.est, 100 * r.to_wrong.lo, 100 * r.to_wrong.hi,
                  100 * r.to_right.est, 100 * r.to_right.lo, 100 * r.to_right.hi, 100 * r.net.est, 100 * r.net.lo,
                  100 * r.net.hi);
    near("old lo", 100 * lo, 0.74, 0.005);
    near("old hi", 100 * hi, 5.87, 0.005);
    near("cluster lo", 100 * r.flip.lo, 1.58, 0.15);
    near("cluster hi", 100 * r.flip.hi, 2.67, 0.15);
    near("directions add up", r.to_wrong.est + r.to_right.est, r.flip.est, 1e-15);
    /* every configuration has the same 150 prompts: the mean over configurations is the pooled rate */
    near("two-way est", t.flip.est, r.flip.est, 1e-15);
    assert_true(t.flip.hi - t.flip.lo >= r.flip.hi - r.flip.lo);
    free(v);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_figures),
        cmocka_unit_test(test_wilson_real),
        cmocka_unit_test(test_against_analytic),
        cmocka_unit_test(test_coverage_prompts),
        cmocka_unit_test(test_coverage_two_way),
        cmocka_unit_test(test_lab_math),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
