/* test_pri.c - the Portability Risk Index on the paper's table: the 56
 * features, held-out accuracy in a sane band, save/load giving identical
 * predictions, intervals that come from residuals, advice classes, unknown
 * levels refused. Fixed hyper-parameters (tune = 0) keep most of it fast;
 * tuning is exercised on a small table, then once on the whole paper table
 * (held-out R^2 beside the paper's) and for thread independence. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "driftbench/analysis.h"
#include "driftbench/report.h"
#include "analysis/pri_internal.h"

static drift_table *paper_table(void) {
    const char *shared = getenv("DRIFT_SHARED");
    char path[1024];
    snprintf(path, sizeof path, "%s/driftbench-ae/data/flip_rates.csv", shared ? shared : "../shared");
    drift_table *t = NULL;
    drift_error err = {0};
    if (drift_table_read_csv(path, &t, &err)) fail_msg("%s", err.msg);
    return t;
}

static drift_pri_options fast_opts(void) {
    drift_pri_options o;
    drift_pri_options_init(&o);
    o.tune = 0;
    return o;
}

static void test_features(void **state) {
    (void)state;
    drift_table *t = paper_table();
    drift_pri_options o = fast_opts();
    char **names;
    size_t n;
    drift_error err = {0};
    assert_int_equal(pri_feature_names(t, &o, &names, &n, &err), DRIFT_OK);
    assert_int_equal(n, 56); /* the paper's 20 one-hot + 36 interactions */
    int found = 0;
    for (size_t i = 0; i < n; i++) found += !strcmp(names[i], "precision=fp8 x workload=math");
    assert_int_equal(found, 1);
    assert_string_equal(names[0], "model=llama-3.1-70b");
    pri_names_free(names, n);
    o.descriptors = 1;
    assert_int_equal(pri_feature_names(t, &o, &names, &n, &err), DRIFT_OK);
    assert_int_equal(n, 61);
    pri_names_free(names, n);
    o.descriptors = 0;
    o.interactions = 0;
    assert_int_equal(pri_feature_names(t, &o, &names, &n, &err), DRIFT_OK);
    assert_int_equal(n, 20);
    pri_names_free(names, n);
    drift_table_free(t);
}

static void test_r2(void **state) {
    (void)state;
    double y[4] = {1, 2, 3, 4}, p[4] = {1, 2, 3, 5}, m[4] = {2.5, 2.5, 2.5, 2.5};
    assert_true(fabs(drift_r2(y, p, 4) - (1 - 1.0 / 5.0)) < 1e-12);
    assert_true(fabs(drift_r2(y, m, 4)) < 1e-12);
    assert_true(isnan(drift_r2(y, p, 1)));
}

static void test_evaluate(void **state) {
    (void)state;
    drift_table *t = paper_table();
    drift_pri_options o = fast_opts();
    drift_pri_eval *e = NULL;
    drift_error err = {0};
    assert_int_equal(drift_pri_evaluate(t, &o, &e, &err), DRIFT_OK);
    assert_int_equal(e->n_features, 56);
    assert_int_equal(e->n_paper, 4);
    assert_int_equal(e->n_levels, 20);
    assert_int_equal(e->random_split.n_test, 84);
    /* interpolation is easy, extrapolation to an unseen GPU almost as easy
     * (paper: 0.987 and 0.909); a model that learnt nothing fails here */
    assert_true(e->random_split.test_r2 > 0.8 && e->random_split.test_r2 <= 1.0);
    assert_true(e->cv_r2_mean > 0.7 && e->cv_r2_mean <= 1.0);
    assert_int_equal(e->cv_folds_defined, 5);
    for (size_t i = 0; i < e->n_paper; i++) {
        assert_true(isfinite(e->paper[i].test_r2));
        if (!strcmp(e->paper[i].name, "hardware=b200")) {
            assert_true(e->paper[i].test_r2 > 0.5);
            assert_int_equal(e->paper[i].n_test, 136);
            assert_true(fabs(e->paper[i].paper_r2 - 0.9094) < 1e-9);
        }
        if (!strcmp(e->paper[i].name, "precision=fp4")) assert_int_equal(e->paper[i].n_test, 16);
    }
    /* ablations: the hardware alone explains nothing, the full model most */
    assert_true(e->abl_hardware_only < 0.2);
    assert_true(e->abl_full > e->abl_linear);
    assert_true(e->abl_linear > 0 && e->abl_linear < 0.6); /* paper 0.235; rank-deficient OLS must not explode */
    /* every held-out level against python3-xgboost with the same features and
     * parameters (tools/ref/pri_ref.py -> tests/data/anova/pri_heldout_fixed.csv) */
    const char *src = getenv("DRIFT_SOURCE");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/anova/pri_heldout_fixed.csv", src ? src : ".");
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[256];
    int matched = 0;
    assert_non_null(fgets(line, sizeof line, f));
    while (fgets(line, sizeof line, f)) {
        char name[96];
        unsigned long ntr, nte;
        double tr2, te2;
        if (sscanf(line, "%95[^,],%lu,%lu,%lf,%lf", name, &ntr, &nte, &tr2, &te2) != 5) fail_msg("bad line %s", line);
        for (size_t i = 0; i < e->n_levels; i++) {
            const drift_pri_holdout *h = &e->levels[i];
            if (strcmp(h->name, name)) continue;
            assert_int_equal(h->n_train, ntr);
            assert_int_equal(h->n_test, nte);
            if (fabs(h->test_r2 - te2) > 1e-4 * fmax(1, fabs(te2)) || fabs(h->train_r2 - tr2) > 1e-4)
                fail_msg("%s: R2 %.6f / %.6f, python %.6f / %.6f", name, h->train_r2, h->test_r2, tr2, te2);
            matched++;
        }
    }
    fclose(f);
    assert_int_equal(matched, 20);
    double s = 0;
    for (size_t i = 0; i < e->n_importance; i++) s += e->importance[i].gain_share;
    assert_true(fabs(s - 1) < 1e-6);
    for (size_t i = 1; i < e->n_importance; i++)
        assert_true(e->importance[i - 1].gain_share >= e->importance[i].gain_share);
    drift_pri_eval_free(e);
    drift_table_free(t);
}

static void test_fit_save_load_predict(void **state) {
    (void)state;
    drift_table *t = paper_table();
    drift_pri_options o = fast_opts();
    drift_pri *m = NULL, *m2 = NULL;
    drift_error err = {0};
    assert_int_equal(drift_pri_fit(t, &o, &m, &err), DRIFT_OK);
    char tmp[] = "/tmp/test_pri_XXXXXX";
    int fd = mkstemp(tmp);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(drift_pri_save(m, tmp, &err), DRIFT_OK);
    assert_int_equal(drift_pri_load(tmp, &m2, &err), DRIFT_OK);
    unlink(tmp);
    double width_code = 0, width_math = 0;
    int asym = 0;
    for (size_t r = 0; r < t->n_rows; r++) {
        char **d = t->rows[r].dims;
        drift_pri_query q = {d[0], d[1], d[2], d[3], d[4]};
        drift_pri_prediction a, b;
        assert_int_equal(drift_pri_predict(m, &q, NULL, &a, &err), DRIFT_OK);
        assert_int_equal(drift_pri_predict(m2, &q, NULL, &b, &err), DRIFT_OK);
        assert_true(a.flip_rate == b.flip_rate && a.lo == b.lo && a.hi == b.hi); /* identical */
        assert_true(a.lo <= a.flip_rate && a.flip_rate <= a.hi);
        if (a.lo > 0 && fabs((a.hi - a.flip_rate) - (a.flip_rate - a.lo)) > 0.05) asym = 1;
        if (!strcmp(d[4], "code")) width_code = fmax(width_code, a.hi - a.lo);
        if (!strcmp(d[4], "math")) width_math = fmax(width_math, a.hi - a.lo);
    }
    /* intervals come from out-of-fold residuals: per workload, not symmetric */
    assert_true(asym);
    assert_true(width_math > 2 * width_code);
    /* the paper's production case: Llama-3.1-8B B200/FP8/SGLang safety, measured 23.85% */
    drift_pri_query q = {"llama-3.1-8b", "b200", "fp8", "sglang", "safety"};
    drift_pri_prediction p;
    assert_int_equal(drift_pri_predict(m, &q, NULL, &p, &err), DRIFT_OK);
    assert_string_equal(p.risk, "high");
    assert_string_equal(p.change, "combined");
    assert_string_equal(p.differs, "hardware,precision,framework");
    /* advice classes against the stored baseline h100/fp16/vllm */
    drift_pri_query qs = {"llama-3.1-8b", "h200", "fp8", "vllm", "math"};
    assert_int_equal(drift_pri_predict(m, &qs, NULL, &p, &err), DRIFT_OK);
    assert_string_equal(p.change, "systematic");
    assert_non_null(strstr(p.advice, "~100 prompts"));
    drift_pri_query qf = {"llama-3.1-8b", "h100", "fp16", "tensorrt-llm", "math"};
    assert_int_equal(drift_pri_predict(m, &qf, NULL, &p, &err), DRIFT_OK);
    assert_string_equal(p.change, "idiosyncratic");
    assert_non_null(strstr(p.advice, "measure fully"));
    drift_pri_query bm = {"mistral-7b", NULL, NULL, NULL, NULL}; /* a model change */
    drift_pri_query qm = {"llama-3.1-8b", "h100", "fp16", "vllm", "math"};
    assert_int_equal(drift_pri_predict(m, &qm, &bm, &p, &err), DRIFT_OK);
    assert_string_equal(p.change, "idiosyncratic");
    assert_int_equal(drift_pri_predict(m, &qm, NULL, &p, &err), DRIFT_OK);
    assert_string_equal(p.change, "none");
    /* unknown levels are refused with the known ones listed */
    drift_pri_query qu = {"llama-3.1-8b", "a100", "fp16", "vllm", "math"};
    assert_int_equal(drift_pri_predict(m, &qu, NULL, &p, &err), DRIFT_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "a100"));
    assert_non_null(strstr(err.msg, "b200, h100, h200, mi300x"));
    drift_pri_query bu = {NULL, "tpu", NULL, NULL, NULL};
    assert_int_equal(drift_pri_predict(m, &qm, &bu, &p, &err), DRIFT_ERR_NOT_FOUND);
    drift_pri_free(m);
    drift_pri_free(m2);
    drift_table_free(t);
}

/* The interval is as wide as the out-of-fold residuals: a table the model
 * fits almost exactly gives a narrow interval, the paper's a wide one. */
static void test_interval_from_residuals(void **state) {
    (void)state;
    drift_table *t = paper_table();
    drift_pri_options o = fast_opts();
    drift_error err = {0};
    drift_pri *a = NULL, *b = NULL;
    assert_int_equal(drift_pri_fit(t, &o, &a, &err), DRIFT_OK);
    for (size_t r = 0; r < t->n_rows; r++) t->rows[r].flip_rate = 3.0 + 0.01 * (double)(r % 3);
    o.baseline[2] = "tf32"; /* not a level: refused */
    assert_int_equal(drift_pri_fit(t, &o, &b, &err), DRIFT_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "fp16, fp4, fp8"));
    o.baseline[2] = "fp8";  /* a stored baseline other than the paper's */
    assert_int_equal(drift_pri_fit(t, &o, &b, &err), DRIFT_OK);
    assert_string_equal(drift_pri_baseline(b, 2), "fp8");
    assert_string_equal(drift_pri_baseline(a, 2), "fp16");
    drift_pri_query q = {"qwen-7b", "h200", "fp8", "sglang", "math"};
    drift_pri_prediction pa, pb;
    assert_int_equal(drift_pri_predict(a, &q, NULL, &pa, &err), DRIFT_OK);
    assert_int_equal(drift_pri_predict(b, &q, NULL, &pb, &err), DRIFT_OK);
    if (!(pa.hi - pa.lo > 3 && pb.hi - pb.lo < 0.1 && fabs(pb.flip_rate - 3.01) < 0.05))
        fail_msg("paper %.3f [%.3f,%.3f] flat %.3f [%.3f,%.3f]", pa.flip_rate, pa.lo, pa.hi, pb.flip_rate, pb.lo, pb.hi);
    drift_pri_free(a);
    drift_pri_free(b);
    drift_table_free(t);
}

/* Tuning runs inside the training rows and picks values from the grid. On
 * 11 rows only the final model is big enough to tune (the out-of-fold models
 * train on 8-9 rows and keep the defaults), which keeps the test quick; the
 * saved depth then comes from the grid {3,5}, never the default 4. */
static void test_tuned_small(void **state) {
    (void)state;
    drift_table *t = paper_table();
    drift_table *s = NULL;
    drift_error err = {0};
    assert_int_equal(drift_table_create(NULL, 0, 0, &s, &err), DRIFT_OK);
    for (size_t r = 0; r < t->n_rows && s->n_rows < 11; r++)
        if (!strcmp(t->rows[r].dims[0], "llama-3.1-8b"))
            assert_int_equal(drift_table_append(s, t->rows[r].experiment_id, (const char *const *)t->rows[r].dims,
                                                t->rows[r].flip_rate, t->rows[r].num_flips,
                                                t->rows[r].num_comparisons, NAN, NAN, &err), DRIFT_OK);
    drift_pri_options o;
    drift_pri_options_init(&o);
    o.cv_folds = 2;
    drift_pri *m = NULL;
    assert_int_equal(drift_pri_fit(s, &o, &m, &err), DRIFT_OK);
    drift_pri_query q = {"llama-3.1-8b", s->rows[0].dims[1], s->rows[0].dims[2], s->rows[0].dims[3], s->rows[0].dims[4]};
    drift_pri_prediction p;
    assert_int_equal(drift_pri_predict(m, &q, NULL, &p, &err), DRIFT_OK);
    assert_true(isfinite(p.flip_rate) && p.lo <= p.hi);
    char tmp[] = "/tmp/test_pri_tuned_XXXXXX";
    int fd = mkstemp(tmp);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(drift_pri_save(m, tmp, &err), DRIFT_OK);
    FILE *f = fopen(tmp, "r");
    assert_non_null(f);
    char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    unlink(tmp);
    const char *d = strstr(buf, "\"max_depth\": ");
    assert_non_null(d);
    int depth = atoi(d + strlen("\"max_depth\": "));
    assert_true(depth == 3 || depth == 5);
    drift_pri_free(m);
    drift_table_free(s);
    drift_table_free(t);
}

/* The tuned evaluation (the CLI's default) on the paper's table: every
 * model's depth from the grid and its tree count from early stopping (not
 * the fixed 200), and held-out R^2 beside the paper's
 * (generalization_results.csv). Ours measured 0.922 / 0.771 / 0.562 / 0.126
 * against 0.909 / 0.763 / 0.479 / 0.118 with xgboost 1.7; the bound leaves
 * 0.02 for another xgboost build, and a model that learnt nothing (or a
 * tuner that looked at the test rows and then broke) lands far outside. */
static void test_evaluate_tuned(void **state) {
    (void)state;
    drift_table *t = paper_table();
    drift_pri_options o;
    drift_pri_options_init(&o);
    o.nthread = 2;
    drift_pri_eval *e = NULL;
    drift_error err = {0};
    assert_int_equal(drift_pri_evaluate(t, &o, &e, &err), DRIFT_OK);
    assert_int_equal(e->n_paper, 4);
    int not_default = 0;
    for (size_t i = 0; i < e->n_levels; i++) {
        const drift_pri_holdout *h = &e->levels[i];
        assert_true(h->depth == 3 || h->depth == 5);
        assert_true(fabs(h->eta - 0.3) < 1e-12);
        assert_true(h->rounds >= 1 && h->rounds <= 300);
        not_default += h->rounds != 200;
    }
    assert_true(not_default > 10);
    for (size_t i = 0; i < e->n_paper; i++) {
        const drift_pri_holdout *h = &e->paper[i];
        print_message("  %-18s ours %.4f  paper %.4f  (d=%d n=%d)\n", h->name, h->test_r2, h->paper_r2, h->depth,
                      h->rounds);
        assert_true(h->test_r2 > h->paper_r2 - 0.02);
    }
    assert_true(e->random_split.test_r2 > 0.8);
    assert_true(e->cv_r2_mean > 0.7);
    /* issue 36 on the paper's table: every dimension has >= 3 levels, so
     * every level is held out; each R^2 has its interval (but the one
     * model with a single configuration) and a ceiling above 0 */
    assert_int_equal(e->n_not_held, 0);
    assert_int_equal(e->cv_repeats, 3);
    for (size_t i = 0; i < e->n_levels; i++) {
        const drift_pri_holdout *h = &e->levels[i];
        assert_int_equal(h->cannot_say, DRIFT_PRI_SAYS);
        assert_true(h->ceiling > 0.5 && h->ceiling < 1);
        if (h->n_configs >= 2) assert_true(isfinite(h->r2_lo) && h->r2_lo <= h->r2_hi);
        else assert_true(isnan(h->r2_lo));
    }
    /* ablations on the same folds and hyper-parameters: the paper's order
     * (hardware alone < linear < the forests) */
    assert_true(e->n_ablations == 4);
    assert_true(e->abl_hardware_only < 0.05 && e->abl_linear > 0.1 && e->abl_linear < 0.5);
    assert_true(e->abl_no_interactions > e->abl_linear + 0.3 && e->abl_full > e->abl_linear + 0.3);
    for (size_t i = 0; i < e->n_ablations; i++)
        assert_true(e->ablations[i].r2_min <= e->ablations[i].r2 && e->ablations[i].r2 <= e->ablations[i].r2_max);
    /* the same result from run to run at a fixed seed, on 1 thread or 2 */
    drift_pri_eval *e2 = NULL;
    o.nthread = 1;
    assert_int_equal(drift_pri_evaluate(t, &o, &e2, &err), DRIFT_OK);
    assert_int_equal(e2->n_levels, e->n_levels);
    for (size_t i = 0; i < e->n_levels; i++) {
        const drift_pri_holdout *a = &e->levels[i], *b = &e2->levels[i];
        assert_string_equal(a->name, b->name);
        assert_true(a->test_r2 == b->test_r2 && a->train_r2 == b->train_r2 && a->depth == b->depth &&
                    a->rounds == b->rounds && a->ceiling == b->ceiling && a->cannot_say == b->cannot_say);
        assert_true((isnan(a->r2_lo) && isnan(b->r2_lo)) || (a->r2_lo == b->r2_lo && a->r2_hi == b->r2_hi));
    }
    for (size_t i = 0; i < e->n_ablations; i++)
        assert_true(e->ablations[i].r2 == e2->ablations[i].r2 && e->ablations[i].r2_min == e2->ablations[i].r2_min);
    assert_true(e->random_split.test_r2 == e2->random_split.test_r2 && e->cv_r2_mean == e2->cv_r2_mean);
    drift_pri_eval_free(e2);
    drift_pri_eval_free(e);
    drift_table_free(t);
}

/* The folds of a tuned fit run side by side; one thread or three gives the
 * same model (same hyper-parameters, same predictions, same interval). */
static void test_fit_threads_identical(void **state) {
    (void)state;
    drift_table *t = paper_table();
    drift_pri_options o;
    drift_pri_options_init(&o);
    drift_pri *a = NULL, *b = NULL;
    drift_error err = {0};
    o.nthread = 1;
    assert_int_equal(drift_pri_fit(t, &o, &a, &err), DRIFT_OK);
    o.nthread = 3;
    assert_int_equal(drift_pri_fit(t, &o, &b, &err), DRIFT_OK);
    for (size_t r = 0; r < t->n_rows; r += 7) {
        char **d = t->rows[r].dims;
        drift_pri_query q = {d[0], d[1], d[2], d[3], d[4]};
        drift_pri_prediction pa, pb;
        assert_int_equal(drift_pri_predict(a, &q, NULL, &pa, &err), DRIFT_OK);
        assert_int_equal(drift_pri_predict(b, &q, NULL, &pb, &err), DRIFT_OK);
        assert_true(pa.flip_rate == pb.flip_rate && pa.lo == pb.lo && pa.hi == pb.hi);
    }
    drift_pri_free(a);
    drift_pri_free(b);
    drift_table_free(t);
}

/* The CV sentence the lab and the report share: all folds, some, none. */
static void test_cv_summary(void **state) {
    (void)state;
    drift_pri_eval e = {0};
    e.cv_r2_mean = 0.5124;
    e.cv_r2_sd = 0.1009;
    e.cv_folds_defined = 5;
    char *s = drift_pri_cv_summary(&e, "R^2", "+-");
    assert_string_equal(s, "5-fold CV R^2 = 0.512 +- 0.101");
    free(s);
    e.cv_folds_defined = 3;
    s = drift_pri_cv_summary(&e, "R&#178;", "&#177;");
    assert_string_equal(s, "5-fold CV R&#178; = 0.512 &#177; 0.101 over 3 folds (2 had one flip rate in all test rows: "
                           "no R&#178;)");
    free(s);
    e.cv_folds_defined = 0;
    s = drift_pri_cv_summary(&e, "R^2", "+-");
    assert_string_equal(s, "5-fold CV R^2: none defined (every fold's test rows share one flip rate)");
    free(s);
}

static void test_load_errors(void **state) {
    (void)state;
    drift_pri *m = NULL;
    drift_error err = {0};
    char tmp[] = "/tmp/test_pri_bad_XXXXXX";
    int fd = mkstemp(tmp);
    assert_true(fd >= 0);
    assert_true(write(fd, "{\"format\":\"driftbench-pri\",\"levels\":{}}", 39) == 39);
    close(fd);
    assert_int_equal(drift_pri_load(tmp, &m, &err), DRIFT_ERR_PARSE);
    assert_non_null(strstr(err.msg, "field"));
    fd = open(tmp, O_WRONLY | O_TRUNC);
    assert_true(write(fd, "{not json", 9) == 9);
    close(fd);
    assert_int_equal(drift_pri_load(tmp, &m, &err), DRIFT_ERR_PARSE);
    unlink(tmp);
    assert_null(m);
}


/* ------------------------------------------------------------ issue 36 */

static uint64_t sm_state;
static uint64_t sm_next(void) {
    uint64_t z = (sm_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double sm_unif(void) { return (double)(sm_next() >> 11) / 9007199254740992.0; }
static long sm_binom(long n, double p) {
    long k = 0;
    for (long i = 0; i < n; i++) k += sm_unif() < p;
    return k;
}
static double sm_norm(void) {
    double u = sm_unif(), v = sm_unif();
    return sqrt(-2 * log(u + 1e-300)) * cos(6.283185307179586 * v);
}

/* A table of m rows, one configuration each, rates p (proportions), n
 * comparisons each, flips drawn binomially; dims vary so the table is valid. */
static drift_table *binom_table(size_t m, const double *p, const long *n, long *k_out) {
    drift_table *t = NULL;
    drift_error err = {0};
    assert_int_equal(drift_table_create(NULL, 0, 0, &t, &err), DRIFT_OK);
    for (size_t i = 0; i < m; i++) {
        char id[32], hw[16];
        snprintf(id, sizeof id, "c%zu", i);
        snprintf(hw, sizeof hw, "h%zu", i % 7);
        const char *dims[5] = {"m", hw, "fp16", "f", "math"};
        long k = sm_binom(n[i], p[i]);
        if (k_out) k_out[i] = k;
        assert_int_equal(drift_table_append(t, id, dims, 100.0 * (double)k / (double)n[i], k, n[i], NAN, NAN, &err),
                         DRIFT_OK);
    }
    return t;
}

/* The noise ceiling against a simulation: known per-row rates, binomial
 * draws; the R^2 that the true rates get (the perfect predictor's) and the
 * ceiling estimated from the draws alone agree. Two designs: rates that
 * spread (ceiling well above 0) and rates all equal (ceiling about 0: the
 * observed spread is all noise, "cannot say"). */
static void test_ceiling_simulation(void **state) {
    (void)state;
    enum { M = 120, SIMS = 300 };
    double p[M], yt[M], pt[M];
    long n[M];
    size_t rows[M];
    for (size_t i = 0; i < M; i++) rows[i] = i;
    for (int design = 0; design < 2; design++) {
        sm_state = 1234 + (uint64_t)design;
        double bias = 0, absdiff = 0, sum_ceiling = 0, sum_true = 0;
        int within = 0, at_or_below_0 = 0;
        for (int s = 0; s < SIMS; s++) {
            for (size_t i = 0; i < M; i++) {
                p[i] = design == 0 ? 0.005 + 0.06 * sm_unif() : 0.03;
                n[i] = 100 + (long)(sm_unif() * 400);
            }
            drift_table *t = binom_table(M, p, n, NULL);
            for (size_t i = 0; i < M; i++) {
                yt[i] = t->rows[i].flip_rate;
                pt[i] = 100 * p[i];
            }
            double r2_true = drift_r2(yt, pt, M), ceiling, ov, nv;
            pri_noise_ceiling(t, rows, M, &ceiling, &ov, &nv);
            assert_true(isfinite(ceiling) && isfinite(r2_true));
            bias += ceiling - r2_true;
            absdiff += fabs(ceiling - r2_true);
            within += fabs(ceiling - r2_true) < 0.1;
            at_or_below_0 += ceiling <= 0;
            sum_ceiling += ceiling;
            sum_true += r2_true;
            drift_table_free(t);
        }
        print_message("  design %d: mean ceiling %.4f, mean R^2 of the true rates %.4f, bias %.4f, mean |diff| %.4f, "
                      "%d/%d within 0.1, %d at or below 0\n",
                      design, sum_ceiling / SIMS, sum_true / SIMS, bias / SIMS, absdiff / SIMS, within, SIMS,
                      at_or_below_0);
        /* about unbiased: measured -0.007 (spread) and -0.020 (noise only, where
         * 1/var(y) is the most variable and the ratio leans low) */
        assert_true(fabs(bias / SIMS) < 0.03);
        if (design == 0) {
            assert_true(sum_true / SIMS > 0.5);          /* the rates spread well beyond noise */
            assert_true(within >= SIMS * 90 / 100);      /* and each draw's estimate is close (measured 286/300) */
            assert_int_equal(at_or_below_0, 0);
        } else {
            assert_true(fabs(sum_true / SIMS) < 0.05);   /* nothing but noise: a perfect predictor gets ~0 */
            assert_true(at_or_below_0 > SIMS / 4);       /* so "cannot say" is often the verdict */
        }
    }
}

/* The configuration bootstrap of a held-out R^2 against a simulation:
 * configurations drawn from a population whose R^2 (of a fixed, biased
 * predictor) is known; the 95% interval covers it about 95% of the time. */
static void test_bootstrap_coverage(void **state) {
    (void)state;
    enum { M = 40, SIMS = 400 };
    /* y = 10 x + N(0, 3^2), x ~ U(0,1); pred = 10 x + 2:
     * R^2 = 1 - (9 + 4) / (100/12 + 9) */
    const double r2_pop = 1 - 13.0 / (100.0 / 12 + 9);
    sm_state = 99;
    double pred[M];
    size_t rows[M];
    for (size_t i = 0; i < M; i++) rows[i] = i;
    int cover = 0;
    drift_error err = {0};
    for (int s = 0; s < SIMS; s++) {
        drift_table *t = NULL;
        assert_int_equal(drift_table_create(NULL, 0, 0, &t, &err), DRIFT_OK);
        for (size_t i = 0; i < M; i++) {
            double x = sm_unif(), y = 10 * x + 3 * sm_norm();
            char id[32];
            snprintf(id, sizeof id, "c%zu", i);
            const char *dims[5] = {"m", "h", "p", "f", "w"};
            assert_int_equal(drift_table_append(t, id, dims, y, 0, 0, NAN, NAN, &err), DRIFT_OK);
            pred[i] = 10 * x + 2;
        }
        double lo, hi;
        size_t nc;
        assert_int_equal(pri_cluster_bootstrap_r2(t, rows, M, pred, 1000, (uint64_t)s, &lo, &hi, &nc, &err), DRIFT_OK);
        assert_int_equal(nc, M);
        cover += lo <= r2_pop && r2_pop <= hi;
        drift_table_free(t);
    }
    print_message("  bootstrap 95%% interval covered the population R^2 (%.3f) in %d of %d samples of %d "
                  "configurations\n", r2_pop, cover, SIMS, M);
    /* measured 364/400 (91%): the percentile interval is a little short at
     * 40 configurations, as percentile bootstraps of a ratio are */
    assert_true(cover >= SIMS * 88 / 100 && cover <= SIMS * 99 / 100);
}

/* The ceiling of every held-out level of the paper's table against numpy
 * (tests/data/pri/ceiling_ref.py -> ceiling_paper.csv). */
static void test_ceiling_fixture(void **state) {
    (void)state;
    drift_table *t = paper_table();
    const char *src = getenv("DRIFT_SOURCE");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/pri/ceiling_paper.csv", src ? src : ".");
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[512];
    assert_non_null(fgets(line, sizeof line, f));
    size_t *rows = malloc(t->n_rows * sizeof *rows);
    int matched = 0;
    drift_error err = {0};
    while (fgets(line, sizeof line, f)) {
        char name[128];
        unsigned long nte, ncfg;
        double ov, nv, c;
        if (sscanf(line, "%127[^,],%lu,%lu,%lf,%lf,%lf", name, &nte, &ncfg, &ov, &nv, &c) != 6) fail_msg("bad line %s", line);
        size_t n = 0;
        if (!strcmp(name, "table_tau2")) {
            for (size_t i = 0; i < t->n_rows; i++) rows[n++] = i;
        } else {
            char *eq = strchr(name, '=');
            *eq = 0;
            int d = drift_table_dim_index(t, name);
            assert_true(d >= 0);
            for (size_t i = 0; i < t->n_rows; i++)
                if (!strcmp(t->rows[i].dims[d], eq + 1)) rows[n++] = i;
        }
        assert_int_equal(n, nte);
        double cc, oo, nn, lo, hi;
        size_t nc;
        pri_noise_ceiling(t, rows, n, &cc, &oo, &nn);
        if (!strcmp(name, "table_tau2")) cc = oo - nn;
        assert_int_equal(pri_cluster_bootstrap_r2(t, rows, n, NULL, 0, 1, &lo, &hi, &nc, &err), DRIFT_OK);
        assert_int_equal(nc, ncfg);
        if (fabs(oo - ov) > 1e-9 * ov || fabs(nn - nv) > 1e-9 * nv || fabs(cc - c) > 1e-9)
            fail_msg("%s: var %.12g noise %.12g ceiling %.12g, numpy %.12g %.12g %.12g", name, oo, nn, cc, ov, nv, c);
        matched++;
    }
    fclose(f);
    free(rows);
    assert_int_equal(matched, 21);
    drift_table_free(t);
}

/* A study whose precision levels are named p0..p5 (names say nothing) but
 * described by their mantissa bits, and whose flip rate follows the bits:
 * held out, p1 is predicted from what it is only with the descriptors. A
 * framework with 2 levels is not held out; a workload that never flips
 * says "cannot say". Flips are binomial draws from known rates. */
static drift_table *described_table(drift_pri_descriptors **dout) {
    static const int bits[6] = {2, 3, 4, 8, 9, 10};
    static const char *const hw[3] = {"h0", "h1", "h2"}, *const fw[2] = {"f0", "f1"};
    static const char *const wl[4] = {"code", "math", "chat", "zero"};
    static const double wmul[4] = {0.5, 1.5, 1.0, 0.0};
    drift_table *t = NULL;
    drift_pri_descriptors *d = NULL;
    drift_error err = {0};
    assert_int_equal(drift_table_create(NULL, 0, 0, &t, &err), DRIFT_OK);
    assert_int_equal(drift_pri_descriptors_create(&d, &err), DRIFT_OK);
    sm_state = 7;
    for (int h = 0; h < 3; h++)
        for (int q = 0; q < 6; q++)
            for (int f = 0; f < 2; f++) {
                char id[64], prec[8];
                snprintf(prec, sizeof prec, "p%d", q);
                snprintf(id, sizeof id, "m--%s--%s--%s", hw[h], prec, fw[f]);
                const char *names[2] = {"mantissa_bits", "lanes"};
                double vals[2] = {bits[q], 8.0 * (h + 1)};
                assert_int_equal(drift_pri_descriptors_set_all(d, id, names, vals, 2, &err), DRIFT_OK);
                double base = bits[q] <= 4 ? 0.08 : 0.01; /* a step in what the format is */
                for (int w = 0; w < 4; w++) {
                    const char *dims[5] = {"m", hw[h], prec, fw[f], wl[w]};
                    long n = 400, k = sm_binom(n, base * wmul[w] * (1 + 0.1 * h));
                    assert_int_equal(drift_table_append(t, id, dims, 100.0 * (double)k / (double)n, k, n, NAN, NAN, &err),
                                     DRIFT_OK);
                }
            }
    *dout = d;
    return t;
}

static const drift_pri_holdout *find_level(const drift_pri_eval *e, const char *name) {
    for (size_t i = 0; i < e->n_levels; i++)
        if (!strcmp(e->levels[i].name, name)) return &e->levels[i];
    return NULL;
}

static void test_descriptors_unseen_level(void **state) {
    (void)state;
    drift_pri_descriptors *d = NULL;
    drift_table *t = described_table(&d);
    drift_pri_options o;
    drift_pri_options_init(&o);
    o.nthread = 2;
    o.bootstrap = 500;
    o.ablation_repeats = 1;
    drift_pri_eval *plain = NULL, *desc = NULL;
    drift_error err = {0};
    assert_int_equal(drift_pri_evaluate(t, &o, &plain, &err), DRIFT_OK);
    o.desc = d;
    o.onehot_off = 1u << DRIFT_DIM_PRECISION; /* precision known by its bits alone */
    assert_int_equal(drift_pri_evaluate(t, &o, &desc, &err), DRIFT_OK);
    assert_int_equal(desc->n_desc, 2);
    assert_int_equal(plain->n_desc, 0);
    /* framework has 2 levels, model 1: not held out */
    assert_int_equal(desc->n_not_held, 2);
    assert_string_equal(desc->not_held[0].dim, "model");
    assert_int_equal(desc->not_held[0].n_levels, 1);
    assert_string_equal(desc->not_held[1].dim, "framework");
    assert_int_equal(desc->not_held[1].n_levels, 2);
    assert_null(find_level(desc, "framework=f0"));
    /* the unseen format, from what it is */
    const drift_pri_holdout *a = find_level(plain, "precision=p1"), *b = find_level(desc, "precision=p1");
    assert_non_null(a);
    assert_non_null(b);
    print_message("  precision=p1 held out: one-hot %.3f [%.3f, %.3f], descriptors %.3f [%.3f, %.3f], ceiling %.3f\n",
                  a->test_r2, a->r2_lo, a->r2_hi, b->test_r2, b->r2_lo, b->r2_hi, b->ceiling);
    assert_int_equal(b->cannot_say, DRIFT_PRI_SAYS);
    assert_true(b->ceiling > 0.5);
    assert_true(b->test_r2 > 0.5);
    assert_true(b->test_r2 > a->test_r2 + 0.3);
    assert_int_equal(b->n_configs, 6);
    assert_true(b->r2_lo <= b->r2_hi);
    /* a workload that never flips: nothing to predict */
    const drift_pri_holdout *z = find_level(desc, "workload=zero");
    assert_non_null(z);
    assert_int_equal(z->cannot_say, DRIFT_PRI_NO_FLIPS);
    assert_int_equal(z->test_flips, 0);
    assert_int_equal(z->test_comparisons, 36 * 400);
    char *v = drift_pri_holdout_text(z, 3);
    assert_non_null(strstr(v, "cannot say: no held-out row flipped (0 of 14400 comparisons)"));
    assert_non_null(strstr(v, "each row's flip rate is below 0.75% (95%, rule of three on its ~400 comparisons)"));
    assert_true(z->n_per_row == 400 && z->n_needed < 400);
    assert_non_null(strstr(v, "more comparisons per row would not say more"));
    free(v);
    v = drift_pri_holdout_text(b, 3);
    assert_non_null(strstr(v, ", ceiling 0."));
    assert_null(strstr(v, "cannot say"));
    free(v);
    /* the ablations name the descriptor variants */
    int seen = 0;
    for (size_t i = 0; i < desc->n_ablations; i++)
        seen += !strcmp(desc->ablations[i].name, "no descriptors") + !strcmp(desc->ablations[i].name, "descriptors + workload only");
    assert_int_equal(seen, 2);
    /* a configuration without descriptors is refused, naming it */
    drift_pri_descriptors *d2 = NULL;
    assert_int_equal(drift_pri_descriptors_create(&d2, &err), DRIFT_OK);
    assert_int_equal(drift_pri_descriptors_set(d2, "m--h0--p0--f0", "bits", 2, &err), DRIFT_OK);
    o.desc = d2;
    drift_pri_eval *bad = NULL;
    assert_int_equal(drift_pri_evaluate(t, &o, &bad, &err), DRIFT_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "m--h0--p0--f1"));
    assert_null(bad);
    /* fit keeps the descriptors' names; predict takes a configuration's
     * values and accepts a format it never saw, predicted from its bits */
    drift_pri *m = NULL, *m2 = NULL;
    o.desc = d;
    o.cv_repeats = 1;
    assert_int_equal(drift_pri_fit(t, &o, &m, &err), DRIFT_OK);
    drift_pri_descriptors_free(d2);
    drift_pri_descriptors_free(d); /* the model keeps no pointer into it */
    d = NULL;
    const char *const *dn;
    assert_int_equal(drift_pri_descriptor_names(m, &dn), 2);
    assert_string_equal(dn[0], "mantissa_bits");
    char tmp[] = "/tmp/test_pri_desc_model_XXXXXX";
    int fd = mkstemp(tmp);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(drift_pri_save(m, tmp, &err), DRIFT_OK);
    assert_int_equal(drift_pri_load(tmp, &m2, &err), DRIFT_OK);
    unlink(tmp);
    drift_pri_query q = {"m", "h0", "p9", "f0", "math"};
    const char *names[2] = {"lanes", "mantissa_bits"};
    double few[2] = {8, 3}, many[2] = {8, 9};
    drift_pri_prediction pf, pm, pf2;
    assert_int_equal(drift_pri_predict_described(m, &q, names, few, 2, NULL, &pf, &err), DRIFT_OK);
    assert_int_equal(drift_pri_predict_described(m, &q, names, many, 2, NULL, &pm, &err), DRIFT_OK);
    assert_int_equal(drift_pri_predict_described(m2, &q, names, few, 2, NULL, &pf2, &err), DRIFT_OK);
    print_message("  unseen format p9: 3 mantissa bits %.2f%%, 9 bits %.2f%% (true 12.0%% and 1.5%%)\n", pf.flip_rate,
                  pm.flip_rate);
    assert_true(pf.flip_rate > 3 * pm.flip_rate);
    assert_true(pf.flip_rate == pf2.flip_rate && pf.lo == pf2.lo && pf.hi == pf2.hi);
    assert_int_equal(drift_pri_predict_described(m, &q, names, few, 1, NULL, &pf, &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "mantissa_bits"));
    assert_int_equal(drift_pri_predict(m, &q, NULL, &pf, &err), DRIFT_ERR_INVALID);
    drift_pri_free(m);
    drift_pri_free(m2);
    /* a model without descriptors still refuses a level it never saw */
    o.desc = NULL;
    o.onehot_off = 0;
    o.tune = 0;
    assert_int_equal(drift_pri_fit(t, &o, &m, &err), DRIFT_OK);
    assert_int_equal(drift_pri_descriptor_names(m, &dn), 0);
    assert_int_equal(drift_pri_predict_described(m, &q, names, few, 2, NULL, &pf, &err), DRIFT_ERR_NOT_FOUND);
    drift_pri_free(m);
    drift_pri_eval_free(plain);
    drift_pri_eval_free(desc);
    drift_pri_descriptors_free(d);
    drift_table_free(t);
}

static void test_descriptors_csv(void **state) {
    (void)state;
    char tmp[] = "/tmp/test_pri_desc_XXXXXX";
    int fd = mkstemp(tmp);
    assert_true(fd >= 0);
    const char *ok = "experiment_id,bits,lanes\nc1,7,8\n\"c,2\",, nan\n";
    assert_true(write(fd, ok, strlen(ok)) == (ssize_t)strlen(ok));
    close(fd);
    drift_pri_descriptors *d = NULL;
    drift_error err = {0};
    assert_int_equal(drift_pri_descriptors_read_csv(tmp, &d, &err), DRIFT_OK);
    assert_int_equal(d->n_names, 2);
    assert_int_equal(d->n_configs, 2);
    assert_int_equal(drift_pri_descriptors_find(d, "c,2"), 1);
    assert_true(d->values[0] == 7 && d->values[1] == 8 && isnan(d->values[2]) && isnan(d->values[3]));
    /* a new name later: NAN for the configurations already there */
    assert_int_equal(drift_pri_descriptors_set(d, "c3", "fma", 1, &err), DRIFT_OK);
    assert_int_equal(d->n_names, 3);
    assert_true(isnan(d->values[2]) && d->values[8] == 1 && d->values[0] == 7 && d->values[1] == 8 && isnan(d->values[6]));
    assert_int_equal(drift_pri_descriptors_set(d, "c3", "x,y", 1, &err), DRIFT_ERR_INVALID);
    assert_int_equal(drift_pri_descriptors_set(d, "c3", "inf", INFINITY, &err), DRIFT_ERR_INVALID);
    drift_pri_descriptors_free(d);
    static const struct { const char *text, *want; } bad[] = {
        {"id,bits\nc1,7\n", "first column must be experiment_id"},
        {"experiment_id,bits\nc1,seven\n", ":2: field bits: 'seven'"},
        {"experiment_id,bits\nc1,7,8\n", ":2: more fields"},
        {"experiment_id,bits,lanes\nc1,7\n", ":2: fewer fields"},
        {"experiment_id,bits\nc1,7\nc1,8\n", ":3: field experiment_id: 'c1' given twice"},
        {"experiment_id,bits,bits\nc1,7,8\n", "field 3: descriptor name 'bits'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fd = open(tmp, O_WRONLY | O_TRUNC);
        assert_true(write(fd, bad[i].text, strlen(bad[i].text)) == (ssize_t)strlen(bad[i].text));
        close(fd);
        d = NULL;
        assert_int_equal(drift_pri_descriptors_read_csv(tmp, &d, &err), DRIFT_ERR_PARSE);
        if (!strstr(err.msg, bad[i].want)) fail_msg("case %zu: '%s' lacks '%s'", i, err.msg, bad[i].want);
        assert_null(d);
    }
    unlink(tmp);
}

/* The verdict sentences, one per reason (what the renderers print). */
static void test_holdout_text(void **state) {
    (void)state;
    drift_pri_holdout h = {.name = "precision=fp8", .n_test = 12, .test_r2 = 0.4213, .r2_lo = 0.1034, .r2_hi = 0.6111,
                           .ceiling = 0.8031, .n_configs = 4, .cannot_say = DRIFT_PRI_SAYS};
    char *s = drift_pri_holdout_text(&h, 3);
    assert_string_equal(s, "0.421 [0.103, 0.611], ceiling 0.803");
    free(s);
    h.cannot_say = DRIFT_PRI_AT_NOISE;
    h.test_r2 = -6.25;
    h.ceiling = -0.12;
    h.obs_sd = 0.5;
    h.noise_sd = 0.53;
    h.n_needed = 419.2;
    h.table_true_sd = 1.3;
    h.n_per_row = 150;
    s = drift_pri_holdout_text(&h, 2);
    assert_string_equal(s, "cannot say: the held-out rows vary no more than binomial noise (ceiling -0.12: sd 0.50 "
                           "points against noise 0.53), so R^2 -6.25 measures noise; rows whose true rates spread like "
                           "the whole table's (sd 1.30 points) would need about 420 comparisons each for a ceiling "
                           "of 0.5 (these have 150)");
    free(s);
    h.n_needed = NAN;
    h.table_true_sd = NAN;
    h.cannot_say = DRIFT_PRI_NO_VARIANCE;
    s = drift_pri_holdout_text(&h, 2);
    assert_non_null(strstr(s, "share one flip rate"));
    assert_non_null(strstr(s, "no size per row can be read from it"));
    assert_null(strcasestr(s, "nan"));
    free(s);
    h.cannot_say = DRIFT_PRI_TOO_FEW;
    h.n_test = 1;
    s = drift_pri_holdout_text(&h, 2);
    assert_string_equal(s, "cannot say: 1 held-out row (R^2 needs 2)");
    free(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_features),        cmocka_unit_test(test_r2),
        cmocka_unit_test(test_evaluate),        cmocka_unit_test(test_fit_save_load_predict),
        cmocka_unit_test(test_interval_from_residuals), cmocka_unit_test(test_tuned_small),
        cmocka_unit_test(test_load_errors),     cmocka_unit_test(test_evaluate_tuned),
        cmocka_unit_test(test_fit_threads_identical), cmocka_unit_test(test_cv_summary),
        cmocka_unit_test(test_ceiling_simulation), cmocka_unit_test(test_bootstrap_coverage),
        cmocka_unit_test(test_ceiling_fixture),   cmocka_unit_test(test_descriptors_unseen_level),
        cmocka_unit_test(test_descriptors_csv),   cmocka_unit_test(test_holdout_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
