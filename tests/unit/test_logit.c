/* test_logit.c - the prompt-clustered logistic model of flips
 * (drift_logit_cluster_fit) against statsmodels' GLM(Binomial) with
 * cov_type='cluster' (tests/data/analysis/logit_fixtures.json, made once by
 * tests/data/analysis/make_logit_fixtures.py): coefficients, cluster-robust
 * standard errors, z, p, per-factor Wald chi^2, log-likelihood, to 1e-6.
 * Separated levels (no flips) are reported as not estimable, never as a
 * number (statsmodels prints -36.9 for one of them), and the fit on the
 * rest is statsmodels' on the same rows; a separated reference hands the
 * reference to the next level. Plus degenerate inputs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/analysis.h"

/* |got - want| <= tol * max(1, |want|) */
static void near(const char *ctx, const char *what, double got, double want, double tol) {
    if (!(fabs(got - want) <= tol * fmax(1.0, fabs(want))))
        fail_msg("%s %s: got %.12g, want %.12g", ctx, what, got, want);
}

static json_t *fixtures(void) {
    const char *src = getenv("DRIFT_SOURCE");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/analysis/logit_fixtures.json", src ? src : ".");
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root) fail_msg("%s: %s", path, je.text);
    return root;
}

typedef struct loaded {
    size_t n, nf;
    unsigned char *y;
    int64_t *cl;
    drift_logit_factor_in f[4];
    const char **lv[4];
} loaded;

static void load_case(json_t *c, loaded *L) {
    memset(L, 0, sizeof *L);
    json_t *y = json_object_get(c, "y"), *cl = json_object_get(c, "cluster"), *fs = json_object_get(c, "factors");
    L->n = json_array_size(y);
    L->y = malloc(L->n);
    L->cl = malloc(L->n * sizeof *L->cl);
    for (size_t i = 0; i < L->n; i++) {
        L->y[i] = (unsigned char)json_integer_value(json_array_get(y, i));
        L->cl[i] = json_integer_value(json_array_get(cl, i));
    }
    L->nf = json_array_size(fs);
    assert_true(L->nf <= 4);
    for (size_t f = 0; f < L->nf; f++) {
        json_t *F = json_array_get(fs, f), *lv = json_object_get(F, "levels");
        L->lv[f] = malloc(L->n * sizeof *L->lv[f]);
        for (size_t i = 0; i < L->n; i++) L->lv[f][i] = json_string_value(json_array_get(lv, i));
        L->f[f].name = json_string_value(json_object_get(F, "name"));
        L->f[f].reference = json_string_value(json_object_get(F, "reference"));
        L->f[f].levels = L->lv[f];
    }
}

static void free_case(loaded *L) {
    free(L->y);
    free(L->cl);
    for (size_t f = 0; f < L->nf; f++) free(L->lv[f]);
}

static const drift_logit_coef *coef(const drift_logit_fit *r, const char *factor, const char *level) {
    for (size_t i = 0; i < r->n_coefs; i++) {
        const drift_logit_coef *c = &r->coefs[i];
        if (!factor && !c->factor) return c;
        if (factor && c->factor && !strcmp(c->factor, factor) && !strcmp(c->level, level)) return c;
    }
    return NULL;
}

static const drift_logit_term *term(const drift_logit_fit *r, const char *factor) {
    for (size_t i = 0; i < r->n_terms; i++)
        if (!strcmp(r->terms[i].factor, factor)) return &r->terms[i];
    return NULL;
}

/* Fits the case and compares with statsmodels; returns the fit. */
static drift_logit_fit *check_case(json_t *c) {
    const char *name = json_string_value(json_object_get(c, "name"));
    loaded L;
    load_case(c, &L);
    drift_logit_fit *r = NULL;
    drift_error err = {0};
    if (drift_logit_cluster_fit(L.y, L.cl, L.n, L.f, L.nf, &r, &err)) fail_msg("%s: %s", name, err.msg);
    json_t *e = json_object_get(c, "expected");
    assert_int_equal(r->nobs, L.n);
    assert_int_equal(r->nobs_used, (size_t)json_integer_value(json_object_get(c, "rows_used")));
    assert_int_equal(r->n_clusters, (size_t)json_integer_value(json_object_get(e, "n_clusters")));
    assert_true(r->converged);
    near(name, "loglik", r->loglik, json_real_value(json_object_get(e, "loglik")), 1e-8);
    json_t *cs = json_object_get(e, "coefs");
    assert_int_equal(r->n_params, json_array_size(cs));
    size_t estimable = 0;
    for (size_t i = 0; i < r->n_coefs; i++) estimable += r->coefs[i].estimable;
    assert_int_equal(estimable, json_array_size(cs));
    for (size_t i = 0; i < json_array_size(cs); i++) {
        json_t *x = json_array_get(cs, i);
        const char *f = json_string_value(json_object_get(x, "factor")), *l = json_string_value(json_object_get(x, "level"));
        const drift_logit_coef *k = coef(r, f, l);
        char ctx[160];
        snprintf(ctx, sizeof ctx, "%s %s", name, json_string_value(json_object_get(x, "name")));
        if (!k) fail_msg("%s: no such coefficient", ctx);
        if (!k->estimable) fail_msg("%s: not estimable (%s)", ctx, k->why);
        near(ctx, "est", k->est, json_real_value(json_object_get(x, "est")), 1e-6);
        near(ctx, "se", k->se, json_real_value(json_object_get(x, "se")), 1e-6);
        near(ctx, "z", k->z, json_real_value(json_object_get(x, "z")), 1e-6);
        near(ctx, "p", k->p, json_real_value(json_object_get(x, "p")), 1e-6);
    }
    json_t *ts = json_object_get(e, "terms");
    for (size_t i = 0; i < json_array_size(ts); i++) {
        json_t *x = json_array_get(ts, i);
        const char *f = json_string_value(json_object_get(x, "factor"));
        const drift_logit_term *t = term(r, f);
        if (!t) fail_msg("%s: no term %s", name, f);
        assert_int_equal(t->df, (size_t)json_integer_value(json_object_get(x, "df")));
        assert_int_equal(t->n_estimated, t->df);
        near(name, "chi2", t->chi2, json_real_value(json_object_get(x, "chi2")), 1e-6);
        near(name, "term p", t->p, json_real_value(json_object_get(x, "p")), 1e-6);
    }
    free_case(&L);
    return r;
}

static json_t *get_case(json_t *root, const char *name) {
    json_t *cs = json_object_get(root, "cases");
    for (size_t i = 0; i < json_array_size(cs); i++)
        if (!strcmp(json_string_value(json_object_get(json_array_get(cs, i), "name")), name)) return json_array_get(cs, i);
    fail_msg("no fixture %s", name);
    return NULL;
}

static void test_crossed(void **state) {
    (void)state;
    json_t *root = fixtures();
    drift_logit_fit *r = check_case(get_case(root, "crossed"));
    /* the reference is the one asked for, not the first in sort order */
    assert_string_equal(term(r, "hardware")->reference_used, "cpu-best");
    assert_string_equal(term(r, "hardware")->reference, "cpu-best");
    assert_int_equal(r->n_coefs, 5);
    assert_non_null(coef(r, "hardware", "avx2"));
    assert_null(coef(r, "hardware", "cpu-best"));
    assert_string_equal(coef(r, "precision", "int8")->name, "C(precision)[T.int8]");
    assert_true(r->loglik > r->loglik_null);
    near("crossed", "deviance", r->deviance, -2 * r->loglik, 1e-12);
    drift_logit_fit_free(r);
    json_decref(root);
}

static void test_separated(void **state) {
    (void)state;
    json_t *root = fixtures();
    json_t *c = get_case(root, "separated");
    drift_logit_fit *r = check_case(c);
    const drift_logit_coef *trt = coef(r, "framework", "trt");
    assert_non_null(trt);
    assert_false(trt->estimable);
    assert_true(isnan(trt->est) && isnan(trt->se) && isnan(trt->p));
    assert_non_null(strstr(trt->why, "no flips in its 360 pairs"));
    assert_int_equal(trt->n_obs, 360);
    assert_int_equal(trt->n_events, 0);
    /* statsmodels on all rows prints a finite absurd number for it */
    json_t *full = json_object_get(json_object_get(c, "statsmodels_full_fit"), "coefs");
    double sm_trt = NAN;
    for (size_t i = 0; i < json_array_size(full); i++)
        if (strstr(json_string_value(json_object_get(json_array_get(full, i), "name")), "[T.trt]"))
            sm_trt = json_real_value(json_object_get(json_array_get(full, i), "est"));
    assert_true(sm_trt < -20);
    assert_int_equal(term(r, "framework")->n_levels, 3);
    assert_int_equal(term(r, "framework")->n_estimated, 1);
    drift_logit_fit_free(r);
    json_decref(root);
}

static void test_reference_separated(void **state) {
    (void)state;
    json_t *root = fixtures();
    drift_logit_fit *r = check_case(get_case(root, "reference_separated"));
    const drift_logit_term *t = term(r, "precision");
    assert_string_equal(t->reference, "bf16");
    assert_string_equal(t->reference_used, "fp8");
    const drift_logit_coef *b = coef(r, "precision", "bf16");
    assert_non_null(b);
    assert_false(b->estimable);
    assert_non_null(strstr(b->why, "reference"));
    assert_non_null(strstr(b->why, "no flips"));
    assert_null(coef(r, "precision", "fp8"));
    drift_logit_fit_free(r);
    json_decref(root);
}

/* The audited lab's math pairs: f32 (the reference), cpu-avx2 and splitk4
 * never flip; what remains is model and precision against bf16. */
static void test_lab_math(void **state) {
    (void)state;
    json_t *root = fixtures();
    drift_logit_fit *r = check_case(get_case(root, "lab_math"));
    assert_int_equal(r->nobs, 3600);
    assert_int_equal(r->nobs_used, 2250);
    const drift_logit_term *p = term(r, "precision"), *h = term(r, "hardware"), *f = term(r, "framework");
    assert_string_equal(p->reference, "f32");
    assert_string_equal(p->reference_used, "bf16");
    assert_int_equal(p->n_estimated, 4);
    assert_int_equal(h->n_estimated, 0);
    assert_true(isnan(h->chi2));
    assert_int_equal(f->n_estimated, 0);
    assert_string_equal(coef(r, "hardware", "cpu-avx2")->why, "no flips in its 450 pairs");
    assert_string_equal(coef(r, "framework", "splitk4")->why, "no flips in its 450 pairs");
    assert_string_equal(coef(r, "precision", "f32")->why, "reference, no flips in its 1350 pairs");
    print_message("lab math: %zu of %zu pairs in the fit, Newton %s in %d iterations; precision chi2 %.2f on %zu df "
                  "(p %.2g), model chi2 %.2f on %zu df (p %.2g)\n",
                  r->nobs_used, r->nobs, r->converged ? "converged" : "did not converge", r->iterations, p->chi2, p->df,
                  p->p, term(r, "model")->chi2, term(r, "model")->df, term(r, "model")->p);
    drift_logit_fit_free(r);
    json_decref(root);
}

static void test_degenerate(void **state) {
    (void)state;
    drift_error err = {0};
    drift_logit_fit *r = NULL;
    unsigned char y[6] = {0, 0, 0, 0, 0, 0};
    int64_t cl[6] = {1, 1, 2, 2, 3, 3};
    const char *hw[6] = {"a", "b", "a", "b", "a", "b"};
    drift_logit_factor_in f = {.name = "hardware", .levels = hw, .reference = "a"};
    /* no flip at all: a fit with nothing estimable, not an error */
    assert_int_equal(drift_logit_cluster_fit(y, cl, 6, &f, 1, &r, &err), DRIFT_OK);
    assert_int_equal(r->nobs_used, 0);
    assert_false(r->converged);
    for (size_t i = 0; i < r->n_coefs; i++) {
        assert_false(r->coefs[i].estimable);
        assert_true(isnan(r->coefs[i].est));
        assert_true(r->coefs[i].why[0] != 0);
    }
    assert_true(isnan(r->terms[0].chi2));
    drift_logit_fit_free(r);
    /* y not 0/1 */
    y[2] = 2;
    assert_int_equal(drift_logit_cluster_fit(y, cl, 6, &f, 1, &r, &err), DRIFT_ERR_INVALID);
    assert_null(r);
    assert_non_null(strstr(err.msg, "observation 2"));
    y[2] = 0;
    /* a missing level */
    hw[3] = NULL;
    assert_int_equal(drift_logit_cluster_fit(y, cl, 6, &f, 1, &r, &err), DRIFT_ERR_INVALID);
    hw[3] = "b";
    assert_int_equal(drift_logit_cluster_fit(y, cl, 1, &f, 1, &r, &err), DRIFT_ERR_INVALID);
    /* an unknown reference falls back to the first level */
    unsigned char y2[6] = {1, 0, 0, 1, 1, 0};
    f.reference = "zzz";
    assert_int_equal(drift_logit_cluster_fit(y2, cl, 6, &f, 1, &r, &err), DRIFT_OK);
    assert_string_equal(r->terms[0].reference_used, "a");
    assert_true(r->coefs[1].estimable);
    drift_logit_fit_free(r);
    /* a collinear factor (the same split as hardware under other names) */
    const char *fw[6] = {"x", "y", "x", "y", "x", "y"};
    drift_logit_factor_in two[2] = {{.name = "hardware", .levels = hw, .reference = "a"},
                                    {.name = "framework", .levels = fw, .reference = "x"}};
    assert_int_equal(drift_logit_cluster_fit(y2, cl, 6, two, 2, &r, &err), DRIFT_OK);
    assert_true(coef(r, "hardware", "b")->estimable);
    assert_false(coef(r, "framework", "y")->estimable);
    assert_non_null(strstr(coef(r, "framework", "y")->why, "collinear"));
    drift_logit_fit_free(r);
    /* a level whose every pair flips; a level seen on one prompt only */
    unsigned char y3[12] = {1, 0, 1, 0, 1, 1, 1, 0, 1, 0, 0, 1};
    int64_t cl3[12] = {1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4};
    const char *hw3[12] = {"a", "b", "c", "a", "b", "c", "a", "b", "c", "a", "d", "d"};
    drift_logit_factor_in f3 = {.name = "hardware", .levels = hw3, .reference = "a"};
    assert_int_equal(drift_logit_cluster_fit(y3, cl3, 12, &f3, 1, &r, &err), DRIFT_OK);
    assert_false(coef(r, "hardware", "c")->estimable);
    assert_string_equal(coef(r, "hardware", "c")->why, "every one of its 3 pairs flips");
    assert_false(coef(r, "hardware", "d")->estimable);
    assert_non_null(strstr(coef(r, "hardware", "d")->why, "1 prompt"));
    assert_true(coef(r, "hardware", "b")->estimable);
    assert_int_equal(r->terms[0].n_estimated, 1);
    assert_int_equal(r->nobs_used, 9);
    drift_logit_fit_free(r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crossed),
        cmocka_unit_test(test_separated),
        cmocka_unit_test(test_reference_separated),
        cmocka_unit_test(test_lab_math),
        cmocka_unit_test(test_degenerate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
