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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_features),        cmocka_unit_test(test_r2),
        cmocka_unit_test(test_evaluate),        cmocka_unit_test(test_fit_save_load_predict),
        cmocka_unit_test(test_interval_from_residuals), cmocka_unit_test(test_tuned_small),
        cmocka_unit_test(test_load_errors),     cmocka_unit_test(test_evaluate_tuned),
        cmocka_unit_test(test_fit_threads_identical), cmocka_unit_test(test_cv_summary),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
