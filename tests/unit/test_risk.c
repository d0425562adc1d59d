/* test_risk.c - per-prompt flip risk (risk.c): features of hand-written
 * logprobs (min margin, its position and share, renormalised top-k entropy
 * against python-computed values), malformed logprobs, the score, AUC on
 * known rankings (perfect, reversed, all tied, a hand-computed case with
 * ties), precision at 10% by hand (with a tie across the cut), the
 * bootstrap's determinism and that its interval holds the point estimate,
 * and a coverage simulation: outcomes drawn with P(flip | s) = s for s
 * uniform on [0,1], whose population AUC is 5/6 analytically. The
 * critical region per workload (math's final number, code's fence,
 * safety's first tokens) on hand-built answers; the logistic fit recovers
 * the coefficients of data drawn from a known model, shrinks them with a
 * ridge, and refuses separable (ridge 0), one-class and NAN inputs. The
 * shared token margin (anl_logprob_top2, which answer_shape.c reads too):
 * unordered and tied lists, short and absent ones, each malformed element,
 * and the smallest of its margins is the features' min margin. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include <jansson.h>

#include "analysis/analysis_internal.h"
#include "driftbench/compare.h"
#include "util/util.h"

static void near(double x, double y, double tol) {
    if (!(fabs(x - y) <= tol)) fail_msg("%.17g != %.17g (tol %g)", x, y, tol);
}

static void test_features(void **state) {
    (void)state;
    const char *lp = "["
                     "{\"token\":\"The\",\"logprob\":-0.1,\"top\":[{\"token\":\"The\",\"logprob\":-0.1},"
                     "{\"token\":\"A\",\"logprob\":-2.5},{\"token\":\"It\",\"logprob\":-3.0}]},"
                     "{\"token\":\" answer\",\"logprob\":-0.5,\"top\":[{\"token\":\" sum\",\"logprob\":-1.0},"
                     "{\"token\":\" answer\",\"logprob\":-0.5}]},"
                     "{\"token\":\" is\",\"logprob\":-0.3,\"top\":null},"
                     "{\"token\":\" 4\",\"logprob\":-0.2,\"top\":[{\"token\":\" 4\",\"logprob\":-0.2},"
                     "{\"token\":\" 5\",\"logprob\":-0.3},{\"token\":\" 6\",\"logprob\":-5}]},"
                     "{\"token\":\".\",\"logprob\":-0.01,\"top\":[{\"token\":\".\",\"logprob\":-0.01}]},"
                     "{\"id\":2,\"logprob\":-0.01}"
                     "]";
    drift_risk_features f;
    drift_error err = {0};
    assert_int_equal(drift_risk_features_compute(lp, &f, &err), DRIFT_OK);
    assert_int_equal(f.n_tokens, 6);
    assert_int_equal(f.n_margin, 3);
    near(f.min_margin, 0.1, 1e-12);
    assert_int_equal(f.min_margin_pos, 3);
    near(f.min_margin_frac, 0.5, 1e-12);
    near(f.mean_entropy, 0.6149505502552909, 1e-12); /* python: mean of the 3 renormalised entropies */
    near(drift_risk_score(&f), exp(-0.1), 1e-12);

    /* a tie between two margins: the first position */
    assert_int_equal(drift_risk_features_compute("[{\"top\":[{\"logprob\":-1},{\"logprob\":-1.5}]},"
                                                 "{\"top\":[{\"logprob\":-2},{\"logprob\":-1.5}]}]",
                                                 &f, &err),
                     DRIFT_OK);
    near(f.min_margin, 0.5, 1e-12);
    assert_int_equal(f.min_margin_pos, 0);
    near(f.min_margin_frac, 0.0, 0);
    near(f.mean_entropy, -(1 / (1 + exp(-0.5))) * log(1 / (1 + exp(-0.5))) -
                             (exp(-0.5) / (1 + exp(-0.5))) * log(exp(-0.5) / (1 + exp(-0.5))),
         1e-12);
    /* an exact tie: margin 0, score 1, entropy log 2 */
    assert_int_equal(drift_risk_features_compute("[{\"top\":[{\"logprob\":-0.7},{\"logprob\":-0.7}]}]", &f, &err),
                     DRIFT_OK);
    near(f.min_margin, 0, 0);
    near(drift_risk_score(&f), 1.0, 0);
    near(f.mean_entropy, log(2.0), 1e-12);

    /* no alternatives anywhere / empty answer: no margin, unknown score */
    assert_int_equal(drift_risk_features_compute("[{\"token\":\"x\",\"logprob\":-1}]", &f, &err), DRIFT_OK);
    assert_int_equal(f.n_tokens, 1);
    assert_int_equal(f.n_margin, 0);
    assert_true(isnan(f.min_margin) && isnan(f.mean_entropy) && isnan(f.min_margin_frac));
    assert_int_equal(f.min_margin_pos, -1);
    assert_true(isnan(drift_risk_score(&f)));
    assert_int_equal(drift_risk_features_compute("[]", &f, &err), DRIFT_OK);
    assert_int_equal(f.n_tokens, 0);
    assert_true(isnan(drift_risk_score(&f)));
    assert_true(isnan(drift_risk_score(NULL)));
}

static void bad(const char *json, const char *want) {
    drift_risk_features f;
    drift_error err = {0};
    assert_int_equal(drift_risk_features_compute(json, &f, &err), DRIFT_ERR_PARSE);
    if (!strstr(err.msg, want)) fail_msg("'%s' lacks '%s'", err.msg, want);
    assert_int_equal(f.n_tokens, 0);
    assert_true(isnan(f.min_margin));
}

static void test_bad_logprobs(void **state) {
    (void)state;
    bad("[{\"top\":[", "logprobs: line 1");
    bad("{}", "not a JSON array");
    bad("[{\"top\":[]}, 3]", "element 1: not an object");
    bad("[{\"top\":5}]", "element 0: \"top\" is not an array");
    bad("[{},{},{\"top\":[{\"logprob\":-1},{\"logprob\":\"x\"}]}]", "element 2: top[1]: no numeric \"logprob\"");
    bad("[{\"top\":[{\"logprob\":-1},7]}]", "element 0: top[1]");
    drift_risk_features f;
    drift_error err = {0};
    assert_int_equal(drift_risk_features_compute(NULL, &f, &err), DRIFT_ERR_INVALID);
    assert_int_equal(drift_risk_features_compute("[]", NULL, &err), DRIFT_ERR_INVALID);
}

static double auc_of(const double *s, const int *y, size_t n, double *prec) {
    double a;
    drift_error err = {0};
    if (drift_risk_auc(s, y, n, &a, prec, &err)) fail_msg("auc: %s", err.msg);
    return a;
}

static void test_auc_known(void **state) {
    (void)state;
    double s[6] = {0.9, 0.8, 0.7, 0.3, 0.2, 0.1};
    int up[6] = {1, 1, 1, 0, 0, 0}, down[6] = {0, 0, 0, 1, 1, 1};
    near(auc_of(s, up, 6, NULL), 1.0, 0);
    near(auc_of(s, down, 6, NULL), 0.0, 0);
    double flat[6] = {0.5, 0.5, 0.5, 0.5, 0.5, 0.5};
    near(auc_of(flat, up, 6, NULL), 0.5, 0);
    /* hand: positives 0.9 (beats 3), 0.8 (tie 0.8 -> 1/2, beats 2), 0.5 (tie -> 1/2, beats 1): 7/9 */
    double t[6] = {0.5, 0.8, 0.1, 0.9, 0.8, 0.5};
    int ty[6] = {1, 0, 0, 1, 1, 0};
    double p;
    near(auc_of(t, ty, 6, &p), 7.0 / 9.0, 1e-15);
    near(p, 1.0, 0); /* top ceil(0.6) = 1 prompt: the 0.9, flipped */
    /* one class only: no AUC, still a precision */
    int none[6] = {0};
    assert_true(isnan(auc_of(s, none, 6, &p)));
    near(p, 0.0, 0);

    /* precision@10% by hand: n = 20, top 2; 0.95 flipped, then a tie group
     * of three at 0.9 with one flip takes the last slot: (1 + 1/3) / 2 */
    double s20[20];
    int y20[20] = {0};
    for (int i = 0; i < 20; i++) s20[i] = 0.5 - 0.01 * i;
    s20[7] = 0.95, y20[7] = 1;
    s20[3] = s20[11] = s20[15] = 0.9, y20[11] = 1;
    y20[19] = 1;
    near(auc_of(s20, y20, 20, &p), (17 + (1 + 15) + 0) / (3.0 * 17.0), 1e-15); /* 0.9 ties two negatives at 0.9 */
    near(p, (1 + 1.0 / 3.0) / 2.0, 1e-15);
    /* n = 25: top ceil(2.5) = 3 */
    double s25[25];
    int y25[25] = {0};
    for (int i = 0; i < 25; i++) s25[i] = 1.0 - 0.01 * i;
    y25[0] = y25[2] = y25[3] = 1;
    auc_of(s25, y25, 25, &p);
    near(p, 2.0 / 3.0, 1e-15);

    drift_error err = {0};
    double a;
    double bads[2] = {0.1, NAN};
    int by[2] = {0, 1};
    assert_int_equal(drift_risk_auc(bads, by, 2, &a, NULL, &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "score 1"));
    assert_int_equal(drift_risk_auc(s, up, 0, &a, NULL, &err), DRIFT_ERR_INVALID);
}

static void test_bootstrap(void **state) {
    (void)state;
    util_rng g;
    util_rng_seed(&g, 7);
    enum { N = 150 };
    double s[N];
    int y[N];
    for (int i = 0; i < N; i++) {
        s[i] = floor(util_rng_uniform(&g) * 20) / 20; /* ties on purpose */
        y[i] = util_rng_uniform(&g) < 0.1 + 0.6 * s[i];
    }
    drift_risk_rank a, b, c;
    drift_error err = {0};
    assert_int_equal(drift_risk_rank_eval(s, y, N, 2000, 42, &a, &err), DRIFT_OK);
    assert_int_equal(drift_risk_rank_eval(s, y, N, 2000, 42, &b, &err), DRIFT_OK);
    assert_int_equal(drift_risk_rank_eval(s, y, N, 2000, 43, &c, &err), DRIFT_OK);
    assert_memory_equal(&a, &b, sizeof a);
    assert_true(a.auc_ci[0] != c.auc_ci[0] || a.auc_ci[1] != c.auc_ci[1]);
    double pa, pp;
    assert_int_equal(drift_risk_auc(s, y, N, &pa, &pp, &err), DRIFT_OK);
    near(a.auc, pa, 0);
    near(a.prec10, pp, 0);
    assert_true(a.auc_ci[0] <= a.auc && a.auc <= a.auc_ci[1]);
    assert_true(a.auc_ci[0] < a.auc_ci[1]);
    assert_true(a.prec10_ci[0] <= a.prec10 && a.prec10 <= a.prec10_ci[1]);
    assert_true(a.auc > 0.5);
    assert_int_equal(a.n, N);
    assert_int_equal(a.top_n, 15);
    assert_int_equal(a.auc_resamples, 2000);
    long k = 0;
    for (int i = 0; i < N; i++) k += y[i];
    assert_int_equal(a.n_flipped, k);
    near(a.base_rate, (double)k / N, 1e-15);
    assert_int_equal(drift_risk_rank_eval(s, y, N, 50, 42, &a, &err), DRIFT_ERR_INVALID);
}

/* P(flip | s) = s, s ~ U(0,1): flipped scores have density 2s, the others
 * 2(1-s); AUC = int_0^1 2s int_0^s 2(1-t) dt ds = 5/6. */
static void test_coverage(void **state) {
    (void)state;
    enum { N = 200, REPS = 200 };
    const double truth = 5.0 / 6.0;
    double s[N];
    int y[N];
    util_rng g;
    util_rng_seed(&g, 2026);
    int covered = 0, above = 0;
    for (int r = 0; r < REPS; r++) {
        for (int i = 0; i < N; i++) {
            s[i] = util_rng_uniform(&g);
            y[i] = util_rng_uniform(&g) < s[i];
        }
        drift_risk_rank rk;
        drift_error err = {0};
        assert_int_equal(drift_risk_rank_eval(s, y, N, 1000, (uint64_t)r + 1, &rk, &err), DRIFT_OK);
        covered += rk.auc_ci[0] <= truth && truth <= rk.auc_ci[1];
        above += rk.auc > 0.5;
    }
    print_message("coverage of the true AUC 5/6: %d/%d\n", covered, REPS);
    assert_int_equal(above, REPS);
    assert_true(covered >= (int)(0.90 * REPS));
}

/* One logprobs element: token text and its top-2 logprobs (margin a - b). */
static void lp_elem(util_buf *b, const char *tok, double a, double c) {
    buf_printf(b, "%s{\"token\":\"%s\",\"logprob\":%g,\"top\":[{\"token\":\"x\",\"logprob\":%g},"
                  "{\"token\":\"y\",\"logprob\":%g}]}",
               b->len > 1 ? "," : "", tok, a, a, c);
}

static void test_region(void **state) {
    (void)state;
    drift_risk_features f;
    drift_error err = {0};
    /* math: "3*2=6. #### 6" - the final number is the last token; the smallest margin (0.05) is in "=" */
    util_buf b = {0};
    buf_puts(&b, "[");
    lp_elem(&b, " 3*2", -0.1, -3.1);
    lp_elem(&b, "=", -0.6, -0.65);
    lp_elem(&b, "6.", -0.2, -2.2);
    lp_elem(&b, " ####", -0.01, -5.0);
    lp_elem(&b, " 6", -0.3, -1.0);
    buf_puts(&b, "]");
    assert_int_equal(drift_risk_features_for(b.data, DRIFT_WL_MATH, &f, &err), DRIFT_OK);
    assert_int_equal(f.n_tokens, 5);
    assert_int_equal(f.region_found, 1);
    assert_int_equal(f.region_lo, 4);
    assert_int_equal(f.region_hi, 5);
    near(f.region_margin, 0.7, 1e-12);
    near(f.min_margin, 0.05, 1e-12);
    assert_int_equal(f.min_in_region, 0);
    assert_int_equal(f.n_near, 2); /* 0.05 and 0.7 are under 1 nat */
    near(f.soft_fine, exp(-3 / 0.25) + exp(-0.05 / 0.25) + exp(-2 / 0.25) + exp(-4.99 / 0.25) + exp(-0.7 / 0.25),
         1e-12);
    near(f.soft_coarse, exp(-3 / 2.0) + exp(-0.05 / 2.0) + exp(-2 / 2.0) + exp(-4.99 / 2.0) + exp(-0.7 / 2.0), 1e-12);
    /* the same answer without a workload: no region; safety: the first 8 tokens (all 5 here) */
    assert_int_equal(drift_risk_features_for(b.data, DRIFT_WL_UNKNOWN, &f, &err), DRIFT_OK);
    assert_int_equal(f.region_found, 0);
    assert_true(isnan(f.region_margin));
    assert_int_equal(drift_risk_features_for(b.data, DRIFT_WL_SAFETY, &f, &err), DRIFT_OK);
    assert_int_equal(f.region_lo, 0);
    assert_int_equal(f.region_hi, 5);
    assert_int_equal(f.min_in_region, 1);
    near(f.region_margin, 0.05, 1e-12);
    buf_free(&b);

    /* code: only the fenced part; the number spanning two tokens in math */
    buf_puts(&b, "[");
    lp_elem(&b, "Here:\\n```py\\n", -0.1, -0.2); /* margin 0.1, outside the code */
    lp_elem(&b, "return 1", -0.1, -0.5);
    lp_elem(&b, "2\\n", -0.1, -1.5);
    lp_elem(&b, "```", -0.1, -4.1);
    lp_elem(&b, " done", -0.1, -0.15);
    buf_puts(&b, "]");
    assert_int_equal(drift_risk_features_for(b.data, DRIFT_WL_CODE, &f, &err), DRIFT_OK);
    assert_int_equal(f.region_lo, 1);
    assert_int_equal(f.region_hi, 3);
    near(f.region_margin, 0.4, 1e-12);
    near(f.min_margin, 0.05, 1e-12);
    assert_int_equal(f.min_in_region, 0);
    assert_int_equal(drift_risk_features_for(b.data, DRIFT_WL_MATH, &f, &err), DRIFT_OK);
    assert_int_equal(f.region_lo, 1); /* "12" = "...1" + "2\n": tokens 1 and 2 */
    assert_int_equal(f.region_hi, 3);
    buf_free(&b);

    /* math without any number: no region; a token that is not a string is a parse error */
    assert_int_equal(drift_risk_features_for("[{\"token\":\"no\",\"top\":[{\"logprob\":-1},{\"logprob\":-2}]}]",
                                             DRIFT_WL_MATH, &f, &err),
                     DRIFT_OK);
    assert_int_equal(f.region_found, 0);
    assert_int_equal(drift_risk_features_for("[{\"token\":3}]", DRIFT_WL_MATH, &f, &err), DRIFT_ERR_PARSE);
    assert_non_null(strstr(err.msg, "element 0"));
    assert_int_equal(f.n_tokens, 0);
}

/* Rows drawn from a known logistic model over the inputs; the fit must
 * recover the generating coefficients (standardised scale) closely. */
static void test_logit_fit(void **state) {
    (void)state;
    enum { N = 20000 };
    static double x[N * DRIFT_RISK_NX];
    static int y[N];
    const double beta[DRIFT_RISK_NX + 1] = {-1.0, 1.2, 0, -0.5, 0.8, 0, 0, 0.3, 0};
    util_rng rng;
    util_rng_seed(&rng, 7);
    for (size_t i = 0; i < N; i++) {
        double t = beta[0];
        for (int j = 0; j < DRIFT_RISK_NX; j++) {
            double u = util_rng_uniform(&rng) * 2 - 1; /* mean 0, sd 1/sqrt(3) */
            x[i * DRIFT_RISK_NX + j] = 5 + u;          /* an offset the standardisation removes */
            t += beta[j + 1] * u * sqrt(3.0);
        }
        y[i] = util_rng_uniform(&rng) < 1 / (1 + exp(-t));
    }
    drift_risk_model m;
    drift_error err = {0};
    assert_int_equal(drift_risk_logit_fit(x, y, N, 0.0, DRIFT_WL_MATH, &m, &err), DRIFT_OK);
    assert_string_equal(m.version, DRIFT_RISK_V2);
    assert_int_equal(m.n_fit, N);
    for (int j = 0; j <= DRIFT_RISK_NX; j++) near(m.beta[j], beta[j], 0.08);
    /* the probability is the model's: the mean input gives the intercept's */
    near(drift_risk_logit_prob(&m, m.mean), 1 / (1 + exp(-m.beta[0])), 1e-12);
    /* a ridge shrinks the slopes */
    drift_risk_model r;
    assert_int_equal(drift_risk_logit_fit(x, y, N, 2000.0, DRIFT_WL_MATH, &r, &err), DRIFT_OK);
    assert_true(fabs(r.beta[1]) < fabs(m.beta[1]));
    /* separable: input 0 decides the outcome; ridge 0 cannot converge, a ridge can */
    for (size_t i = 0; i < 200; i++) y[i] = x[i * DRIFT_RISK_NX] > 5;
    assert_int_equal(drift_risk_logit_fit(x, y, 200, 0.0, DRIFT_WL_MATH, &m, &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "ridge"));
    assert_int_equal(drift_risk_logit_fit(x, y, 200, 1.0, DRIFT_WL_MATH, &m, &err), DRIFT_OK);
    assert_true(m.beta[1] > 1);
    /* one class only, a NAN input */
    for (size_t i = 0; i < 200; i++) y[i] = 0;
    assert_int_equal(drift_risk_logit_fit(x, y, 200, 1.0, DRIFT_WL_MATH, &m, &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "both outcomes"));
    y[0] = 1;
    x[3] = NAN;
    assert_int_equal(drift_risk_logit_fit(x, y, 200, 1.0, DRIFT_WL_MATH, &m, &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "row 0 input 3"));
}

static void test_score_for(void **state) {
    (void)state;
    drift_risk_features f;
    drift_error err = {0};
    assert_int_equal(drift_risk_features_for("[{\"token\":\"a\",\"top\":[{\"logprob\":-1},{\"logprob\":-1.25}]}]",
                                             DRIFT_WL_CHAT, &f, &err),
                     DRIFT_OK);
    double x[DRIFT_RISK_NX];
    assert_int_equal(drift_risk_x(&f, x), 0);
    near(x[0], exp(-0.25), 1e-12);
    near(x[1], exp(-0.25), 1e-12);
    near(x[2], 1, 0);
    near(x[4], log(2), 1e-12);
    near(x[5], log(2), 1e-12);
    for (int k = 0; k < DRIFT_WL_COUNT; k++) {
        const char *v = NULL;
        double s = drift_risk_score_for(&f, (drift_workload)k, &v);
        const drift_risk_model *m = drift_risk_model_builtin((drift_workload)k);
        assert_non_null(v);
        if (m) {
            assert_string_equal(v, DRIFT_RISK_V2);
            near(s, drift_risk_logit_prob(m, x), 1e-15);
        } else {
            assert_string_equal(v, DRIFT_RISK_VERSION);
            near(s, exp(-0.25), 1e-12);
        }
    }
    /* no margin: unknown under either version, and no inputs */
    assert_int_equal(drift_risk_features_for("[{\"token\":\"a\"}]", DRIFT_WL_MATH, &f, &err), DRIFT_OK);
    assert_true(isnan(drift_risk_score_for(&f, DRIFT_WL_MATH, NULL)));
    assert_int_equal(drift_risk_x(&f, x), -1);
}

/* The token margin that risk.c and answer_shape.c share, element by element. */
static void test_top2(void **state) {
    (void)state;
    json_t *root = NULL;
    size_t n = 99;
    drift_error err = {0};
    const char *lp = "[{\"top\":[{\"logprob\":-2.5},{\"logprob\":-0.25},{\"logprob\":-1}]},"
                     "{\"top\":[{\"logprob\":-0.7},{\"logprob\":-0.7}]},"
                     "{\"token\":5,\"top\":[{\"logprob\":-3}]},"
                     "{\"top\":null},{},{\"top\":[]}]";
    assert_int_equal(anl_logprobs_load(lp, &root, &n, &err), DRIFT_OK);
    assert_int_equal(n, 6);
    anl_top2 t;
    assert_int_equal(anl_logprob_top2(json_array_get(root, 0), 0, &t, &err), DRIFT_OK);
    assert_int_equal(t.n_top, 3); /* order of the list does not matter */
    near(t.best, -0.25, 0);
    near(t.second, -1, 0);
    near(t.margin, 0.75, 0);
    assert_int_equal(anl_logprob_top2(json_array_get(root, 1), 1, &t, &err), DRIFT_OK);
    assert_int_equal(t.n_top, 2); /* a tie: margin 0 */
    near(t.margin, 0, 0);
    /* one alternative: no margin; "token" is not the helper's to read */
    assert_int_equal(anl_logprob_top2(json_array_get(root, 2), 2, &t, &err), DRIFT_OK);
    assert_int_equal(t.n_top, 1);
    near(t.best, -3, 0);
    assert_true(isinf(t.second) && t.second < 0);
    assert_true(isnan(t.margin));
    for (size_t i = 3; i < 6; i++) { /* null, absent, empty */
        assert_int_equal(anl_logprob_top2(json_array_get(root, i), i, &t, &err), DRIFT_OK);
        assert_int_equal(t.n_top, 0);
        assert_true(isnan(t.margin));
    }
    json_decref(root);

    /* malformed: the element named, as risk.c's messages say it; NULL err is allowed */
    const char *bad_elem[][2] = {
        {"[{}, 3]", "element 1: not an object"},
        {"[{},{\"top\":\"x\"}]", "element 1: \"top\" is not an array"},
        {"[{\"top\":[{\"logprob\":-1},{\"logprob\":true}]}]", "element 0: top[1]: no numeric \"logprob\""},
        {"[{\"top\":[{\"logprob\":-1},[-2]]}]", "element 0: top[1]: no numeric"},
    };
    for (size_t c = 0; c < sizeof bad_elem / sizeof bad_elem[0]; c++) {
        assert_int_equal(anl_logprobs_load(bad_elem[c][0], &root, &n, NULL), DRIFT_OK);
        size_t i = n - 1;
        assert_int_equal(anl_logprob_top2(json_array_get(root, i), i, &t, NULL), DRIFT_ERR_PARSE);
        assert_int_equal(anl_logprob_top2(json_array_get(root, i), i, &t, &err), DRIFT_ERR_PARSE);
        if (!strstr(err.msg, bad_elem[c][1])) fail_msg("'%s' lacks '%s'", err.msg, bad_elem[c][1]);
        assert_true(isnan(t.margin));
        json_decref(root);
    }
    root = (json_t *)1;
    assert_int_equal(anl_logprobs_load("[{", &root, &n, &err), DRIFT_ERR_PARSE);
    assert_null(root);
    assert_non_null(strstr(err.msg, "logprobs: line 1"));
    assert_int_equal(anl_logprobs_load("{\"top\":[]}", &root, &n, &err), DRIFT_ERR_PARSE);
    assert_null(root);
    assert_non_null(strstr(err.msg, "not a JSON array"));

    /* the smallest margin over the elements is the features' min margin */
    const char *lp2 = "[{\"token\":\"a\",\"top\":[{\"logprob\":-0.1},{\"logprob\":-2.1}]},"
                      "{\"token\":\"b\",\"top\":[{\"logprob\":-0.4},{\"logprob\":-0.9},{\"logprob\":-4}]},"
                      "{\"token\":\"c\",\"top\":[{\"logprob\":-0.05}]}]";
    assert_int_equal(anl_logprobs_load(lp2, &root, &n, &err), DRIFT_OK);
    double min = NAN;
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(anl_logprob_top2(json_array_get(root, i), i, &t, &err), DRIFT_OK);
        if (t.n_top >= 2 && (isnan(min) || t.margin < min)) min = t.margin;
    }
    json_decref(root);
    drift_risk_features f;
    assert_int_equal(drift_risk_features_compute(lp2, &f, &err), DRIFT_OK);
    near(min, 0.5, 1e-15);
    near(f.min_margin, min, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_features),  cmocka_unit_test(test_bad_logprobs), cmocka_unit_test(test_auc_known),
        cmocka_unit_test(test_bootstrap), cmocka_unit_test(test_coverage),    cmocka_unit_test(test_region),
        cmocka_unit_test(test_logit_fit), cmocka_unit_test(test_score_for),  cmocka_unit_test(test_top2),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
