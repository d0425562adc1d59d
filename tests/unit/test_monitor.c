/* test_monitor.c - the Evidently-style embedding-drift detectors against
 * hand-computed values and synthetic data whose answer is known: identical
 * sets raise no alarm, a shifted mean raises all four, one shifted component
 * is seen by the per-component test but not by the 20% share, separable
 * data gives ROC AUC ~ 1. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <unistd.h>

#include "driftbench/monitor.h"
#include "driftbench/store.h"
#include "analysis/monitor_internal.h"
#include "support/store_builder.h"
#include "util/util.h"

static double gauss(util_rng *r) {
    double u1 = util_rng_uniform(r), u2 = util_rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

/* n x dim standard normal rows, plus shift[k] on component k (shift may be NULL). */
static float *make_rows(size_t n, int dim, uint64_t seed, const double *shift) {
    float *v = malloc(n * (size_t)dim * sizeof *v);
    assert_non_null(v);
    util_rng r;
    util_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < dim; k++) v[i * (size_t)dim + k] = (float)(gauss(&r) + (shift ? shift[k] : 0.0));
    return v;
}

static void test_roc_auc_known(void **state) {
    (void)state;
    /* The classic example: AUC 0.75. */
    double s[] = {0.1, 0.4, 0.35, 0.8};
    int y[] = {0, 0, 1, 1};
    assert_true(fabs(anl_roc_auc(s, y, 4) - 0.75) < 1e-12);
    /* All tied: 0.5. Perfect: 1. Reversed: 0. One class: NAN. */
    double t[] = {1, 1, 1, 1};
    assert_true(fabs(anl_roc_auc(t, y, 4) - 0.5) < 1e-12);
    double p[] = {0, 0.1, 0.9, 1};
    assert_true(fabs(anl_roc_auc(p, y, 4) - 1.0) < 1e-12);
    int yr[] = {1, 1, 0, 0};
    assert_true(fabs(anl_roc_auc(p, yr, 4) - 0.0) < 1e-12);
    int one[] = {1, 1, 1, 1};
    assert_true(isnan(anl_roc_auc(p, one, 4)));
    /* A tie across classes counts half: scores {1,1} labels {0,1} -> 0.5. */
    double q[] = {0.2, 0.5, 0.5, 0.9};
    int yq[] = {0, 0, 1, 1};
    /* positives 0.5, 0.9 vs negatives 0.2, 0.5: pairs won 1+0.5+1+1 = 3.5 of 4. */
    assert_true(fabs(anl_roc_auc(q, yq, 4) - 0.875) < 1e-12);
}

static void test_wasserstein_known(void **state) {
    (void)state;
    double a[] = {0, 1, 3}, b[] = {5, 6, 8};
    assert_true(fabs(anl_wasserstein1(a, 3, b, 3) - 5.0) < 1e-12);
    assert_true(fabs(anl_wasserstein1(a, 3, a, 3)) < 1e-12);
    /* Unequal sizes: F_a = 1 from 0; F_b = 0.5 on [0,2): integral 0.5 * 2 = 1. */
    double c[] = {0}, d[] = {2, 0};
    assert_true(fabs(anl_wasserstein1(c, 1, d, 2) - 1.0) < 1e-12);
    /* Order does not matter; a point mass moved by 0.25 costs 0.25. */
    double e[] = {3, 1, 2}, f[] = {1.25, 2.25, 3.25};
    assert_true(fabs(anl_wasserstein1(e, 3, f, 3) - 0.25) < 1e-12);
    assert_true(isnan(anl_wasserstein1(a, 0, b, 3)));
}

static void test_mmd_known(void **state) {
    (void)state;
    /* x = {0, 1}, y = {0, 2} (1-D), gamma 1:
     * Kx = e^-1, Ky = e^-4, Kxy mean = (1 + e^-4 + 2 e^-1) / 4
     * MMD^2_u = e^-1 + e^-4 - 2 (1 + e^-4 + 2e^-1)/4 = e^-4/2 - 1/2. */
    float x[] = {0, 1}, y[] = {0, 2};
    double want = exp(-4.0) / 2.0 - 0.5;
    assert_true(fabs(anl_mmd2u_rbf(x, 2, y, 2, 1, 1.0) - want) < 1e-12);
    /* Two-dimensional, identical sets of 3 points: never positive. */
    float z[] = {0, 0, 1, 0, 0, 1};
    assert_true(anl_mmd2u_rbf(z, 3, z, 3, 2, 0.5) <= 1e-15);
}

static void test_identical_sets_no_drift(void **state) {
    (void)state;
    size_t n = 200;
    int dim = 16;
    float *ref = make_rows(n, dim, 1, NULL);
    drift_monitor_opts o;
    drift_monitor_opts_default(&o);
    drift_monitor_report rep;
    drift_error err = {0};
    assert_int_equal(drift_monitor_run(ref, n, ref, n, dim, &o, &rep, &err), DRIFT_OK);
    assert_int_equal(rep.alarms, 0);
    for (int m = 0; m < DRIFT_MON_COUNT; m++) assert_false(rep.r[m].drift);
    assert_true(rep.r[DRIFT_MON_DISTANCE].score < 1e-12);
    assert_true(rep.r[DRIFT_MON_RATIO].score == 0.0);
    assert_true(rep.r[DRIFT_MON_MMD].score == 0.0);
    assert_true(rep.r[DRIFT_MON_MODEL].score <= 0.55);
    /* n_ref < 1000: Evidently's default decides the model method by bootstrap. */
    assert_non_null(strstr(rep.r[DRIFT_MON_MODEL].rule, "bootstrap"));
    assert_true(rep.model_random_auc_q > 0.5 && rep.model_random_auc_q < 0.7);
    free(ref);
}

/* Two samples of one distribution. Evidently's fixed thresholds are scale
 * dependent: with n = 300 standard-normal rows the noise alone moves the
 * mean by ~sqrt(2 dim / n) and the normed W1 of a component by ~0.09, so the
 * distance and ratio methods alarm on pure noise (measured: 5 of 5 seeds at
 * n = 300, dim = 8). With 1200 rows they stay quiet. */
static void test_same_distribution_no_drift(void **state) {
    (void)state;
    size_t n = 1200;
    int dim = 4;
    float *ref = make_rows(n, dim, 2, NULL);
    float *cur = make_rows(n, dim, 3, NULL);
    drift_monitor_report rep;
    drift_error err = {0};
    assert_int_equal(drift_monitor_run(ref, n, cur, n, dim, NULL, &rep, &err), DRIFT_OK);
    assert_int_equal(rep.alarms, 0);
    assert_true(fabs(rep.r[DRIFT_MON_MODEL].score - 0.5) < 0.1);
    assert_true(rep.r[DRIFT_MON_DISTANCE].score < 0.2);
    assert_true(rep.r[DRIFT_MON_MMD].score < 0.015);
    free(ref);
    free(cur);
}

static void test_shifted_mean_drifts_everywhere(void **state) {
    (void)state;
    size_t n = 200;
    int dim = 16;
    double shift[16];
    for (int k = 0; k < dim; k++) shift[k] = 1.0;
    float *ref = make_rows(n, dim, 4, NULL);
    float *cur = make_rows(n, dim, 5, shift);
    drift_monitor_opts o;
    drift_monitor_opts_default(&o);
    o.model_bootstrap = 0; /* the fixed 0.55 threshold */
    drift_monitor_report rep;
    drift_error err = {0};
    assert_int_equal(drift_monitor_run(ref, n, cur, n, dim, &o, &rep, &err), DRIFT_OK);
    assert_int_equal(rep.alarms, 4);
    assert_true(rep.r[DRIFT_MON_MODEL].score > 0.95);
    assert_true(fabs(rep.r[DRIFT_MON_MODEL].threshold - 0.55) < 1e-12);
    /* Mean distance ~ sqrt(16) = 4. */
    assert_true(fabs(rep.r[DRIFT_MON_DISTANCE].score - 4.0) < 0.4);
    assert_true(rep.r[DRIFT_MON_RATIO].score == 1.0);
    assert_int_equal(rep.ratio_drifted, 16);
    assert_true(rep.r[DRIFT_MON_MMD].score > 0.015);
    free(ref);
    free(cur);
}

static void test_one_component_shifted(void **state) {
    (void)state;
    size_t n = 1200;
    int dim = 10;
    double shift[10] = {0};
    shift[3] = 3.0;
    float *ref = make_rows(n, dim, 6, NULL);
    float *cur = make_rows(n, dim, 7, shift);
    drift_monitor_report rep;
    drift_error err = {0};
    assert_int_equal(drift_monitor_run(ref, n, cur, n, dim, NULL, &rep, &err), DRIFT_OK);
    /* The per-component test sees component 3 only; 1/10 is not > 20%. */
    assert_int_equal(rep.ratio_drifted, 1);
    assert_true(fabs(rep.r[DRIFT_MON_RATIO].score - 0.1) < 1e-12);
    assert_false(rep.r[DRIFT_MON_RATIO].drift);
    /* The mean moved by 3 along one axis. */
    assert_true(fabs(rep.r[DRIFT_MON_DISTANCE].score - 3.0) < 0.3);
    assert_true(rep.r[DRIFT_MON_DISTANCE].drift);
    assert_true(rep.r[DRIFT_MON_MODEL].drift);
    free(ref);
    free(cur);
}

static void test_separable_auc_one(void **state) {
    (void)state;
    size_t n = 100;
    int dim = 4;
    double up[4] = {4, 0, 0, 0}, down[4] = {-4, 0, 0, 0};
    float *ref = make_rows(n, dim, 8, up);
    float *cur = make_rows(n, dim, 9, down);
    drift_monitor_report rep;
    drift_error err = {0};
    assert_int_equal(drift_monitor_run(ref, n, cur, n, dim, NULL, &rep, &err), DRIFT_OK);
    assert_true(rep.r[DRIFT_MON_MODEL].score > 0.999);
    assert_true(rep.r[DRIFT_MON_MODEL].drift);
    free(ref);
    free(cur);
}

static void test_cosine_distance_option(void **state) {
    (void)state;
    /* Means (1,0) and (0,1): cosine distance 1, Euclidean sqrt(2). */
    float ref[] = {1, 0, 1, 0, 1, 0};
    float cur[] = {0, 1, 0, 1, 0, 1};
    drift_monitor_opts o;
    drift_monitor_opts_default(&o);
    drift_monitor_report rep;
    assert_int_equal(drift_monitor_run(ref, 3, cur, 3, 2, &o, &rep, NULL), DRIFT_OK);
    assert_true(fabs(rep.r[DRIFT_MON_DISTANCE].score - sqrt(2.0)) < 1e-12);
    o.distance_cosine = 1;
    assert_int_equal(drift_monitor_run(ref, 3, cur, 3, 2, &o, &rep, NULL), DRIFT_OK);
    assert_true(fabs(rep.r[DRIFT_MON_DISTANCE].score - 1.0) < 1e-12);
}

static void test_bad_input(void **state) {
    (void)state;
    float v[] = {1, 2, 3, 4};
    drift_monitor_report rep;
    drift_error err = {0};
    assert_int_equal(drift_monitor_run(v, 1, v, 2, 2, NULL, &rep, &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "at least 2"));
    float bad[] = {1, 2, NAN, 4};
    assert_int_equal(drift_monitor_run(v, 2, bad, 2, 2, NULL, &rep, &err), DRIFT_ERR_NUMERIC);
    assert_non_null(strstr(err.msg, "current row 1"));
    assert_int_equal(drift_monitor_run(v, 2, v, 2, 0, NULL, &rep, &err), DRIFT_ERR_INVALID);
    assert_string_equal(drift_monitor_method_name(DRIFT_MON_MMD), "mmd");
}

/* Two runs of 6 chat prompts in a store; embeddings for the answered ones. */
static void test_load_from_store(void **state) {
    (void)state;
    char path[] = "/tmp/drift_monitor_storeXXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    unlink(path);
    drift_store *st = sb_open_new(path);
    drift_error err = {0};

    drift_suite *suite = sb_suite_new("t", "t", "builtin", 6);
    for (int i = 0; i < 6; i++) {
        char id[8], input[16];
        snprintf(id, sizeof id, "c%d", i);
        snprintf(input, sizeof input, "question %d", i);
        sb_prompt_set(suite, (size_t)i, id, DRIFT_WL_CHAT, input, "{}");
    }
    int64_t rowids[6];
    sb_put_prompts(st, suite, rowids);
    drift_suite_free(suite);

    /* Before any embedding: a clear "run score --embedder" error. */
    const char *labels[2] = {"base", "targ"};
    int64_t run_ids[2];
    for (int r = 0; r < 2; r++) {
        drift_run_info info = {0};
        info.label = (char *)labels[r];
        info.target = (char *)"http://x/v1?model=m";
        info.config_json = (char *)"{}";
        info.decoding_json = (char *)"{}";
        info.templates_json = (char *)"{}";
        info.suites_json = (char *)"[]";
        info.tool_version = (char *)"test";
        run_ids[r] = sb_run_begin(st, &info);
        drift_answer resp[6];
        memset(resp, 0, sizeof resp);
        for (int i = 0; i < 6; i++) {
            resp[i].prompt_rowid = rowids[i];
            resp[i].prompt_tokens = resp[i].completion_tokens = -1;
            if (i == 5) resp[i].error = (char *)"HTTP 500"; /* a failed request: never loaded */
            else resp[i].text = (char *)"an answer";
        }
        sb_put_answers(st, run_ids[r], resp, 6);
    }
    drift_monitor_data d;
    assert_int_equal(drift_monitor_load(st, "base", "targ", NULL, &d, &err), DRIFT_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "driftbench score --embedder"));
    assert_int_equal(drift_monitor_load(st, "base", "nope", NULL, &d, &err), DRIFT_ERR_NOT_FOUND);

    /* Embeddings: baseline rows at (i, 0, 0), target rows at (i, 1, 0); a
     * second embedder with fewer vectors is not the one picked by default. */
    for (int r = 0; r < 2; r++) {
        drift_scored_set set = {0};
        assert_int_equal(drift_store_load_scored(st, run_ids[r], &set, &err), DRIFT_OK);
        assert_int_equal(set.n, 6);
        for (size_t i = 0; i < set.n; i++) {
            if (set.rows[i].is_error) continue;
            float v[3] = {(float)i, (float)r, 0};
            assert_int_equal(drift_store_put_embedding(st, set.rows[i].response_id, "embed:a", v, 3, &err), DRIFT_OK);
            if (i == 0) assert_int_equal(drift_store_put_embedding(st, set.rows[i].response_id, "embed:b", v, 3, &err), DRIFT_OK);
        }
        drift_scored_set_clear(&set);
    }
    assert_int_equal(drift_monitor_load(st, "base", "targ", NULL, &d, &err), DRIFT_OK);
    assert_string_equal(d.embedder, "embed:a");
    assert_int_equal(d.dim, 3);
    assert_int_equal(d.n_ref, 5);
    assert_int_equal(d.n_cur, 5);
    assert_int_equal(d.answered_ref, 5);
    for (size_t i = 0; i < 5; i++) {
        assert_true(d.ref[i * 3 + 1] == 0.0f);
        assert_true(d.cur[i * 3 + 1] == 1.0f);
    }
    drift_monitor_report rep;
    assert_int_equal(drift_monitor_run(d.ref, d.n_ref, d.cur, d.n_cur, d.dim, NULL, &rep, &err), DRIFT_OK);
    assert_true(fabs(rep.r[DRIFT_MON_DISTANCE].score - 1.0) < 1e-12); /* means differ by (0,1,0) */
    drift_monitor_data_clear(&d);
    assert_int_equal(drift_monitor_load(st, "base", "targ", "embed:b", &d, &err), DRIFT_OK);
    assert_int_equal(d.n_ref, 1);
    drift_monitor_data_clear(&d);

    drift_store_close(st);
    unlink(path);
    char side[sizeof path + 8];
    snprintf(side, sizeof side, "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", path);
    unlink(side);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roc_auc_known),
        cmocka_unit_test(test_wasserstein_known),
        cmocka_unit_test(test_mmd_known),
        cmocka_unit_test(test_identical_sets_no_drift),
        cmocka_unit_test(test_same_distribution_no_drift),
        cmocka_unit_test(test_shifted_mean_drifts_everywhere),
        cmocka_unit_test(test_one_component_shifted),
        cmocka_unit_test(test_separable_auc_one),
        cmocka_unit_test(test_cosine_distance_option),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_load_from_store),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
