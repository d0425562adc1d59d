/* test_anova.c - ANOVA against statsmodels (tests/data/anova/expected.csv,
 * made by tools/ref/anova_ref.py from the paper's flip_rates.csv), the
 * issue's Type III acceptance figures, Benjamini-Hochberg against the
 * textbook example, strata and formula errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/analysis.h"

static drift_table *paper_table(void) {
    const char *shared = getenv("DRIFT_SHARED");
    char path[1024];
    snprintf(path, sizeof path, "%s/driftbench-ae/data/flip_rates.csv", shared ? shared : "../shared");
    drift_table *t = NULL;
    drift_error err = {0};
    if (drift_table_read_csv(path, &t, &err)) fail_msg("%s", err.msg);
    return t;
}

static const drift_anova_row *find_row(const drift_anova_table *a, const char *term) {
    for (size_t i = 0; i < a->n_rows; i++)
        if (!strcmp(a->rows[i].term, term)) return &a->rows[i];
    return NULL;
}

/* |got - want| <= rel * |want| + abs */
static void near(const char *what, const char *ctx, double got, double want, double rel, double abs_) {
    if (isnan(want) && isnan(got)) return;
    if (!(fabs(got - want) <= rel * fabs(want) + abs_))
        fail_msg("%s %s: got %.10g, want %.10g", ctx, what, got, want);
}

static void test_acceptance_type3(void **state) {
    (void)state;
    drift_table *t = paper_table();
    drift_anova_table *a = NULL;
    drift_error err = {0};
    assert_int_equal(drift_anova_run(t, NULL, 3, &a, &err), DRIFT_OK);
    /* the figures, rounded to 5 significant digits */
    near("F", "workload", find_row(a, "C(workload)")->F, 53.543, 5e-5, 0);
    near("F", "hardware", find_row(a, "C(hardware)")->F, 0.40795, 5e-5, 0);
    near("F", "precision", find_row(a, "C(precision)")->F, 3.4499, 5e-5, 0);
    near("F", "framework", find_row(a, "C(framework)")->F, 2.8130, 5e-5, 0);
    near("F", "hw x prec", find_row(a, "C(hardware):C(precision)")->F, 0.16602, 1e-4, 0);
    assert_int_equal(a->nobs, 420);
    assert_int_equal(a->n_columns, 17);
    assert_int_equal(a->rank, 14);
    near("df", "residual", a->df_resid, 406, 0, 0);
    /* the interaction has 6 columns but only 3 cells beyond the main effects exist */
    near("df", "hw x prec", find_row(a, "C(hardware):C(precision)")->df, 3, 0, 0);
    assert_int_equal(find_row(a, "C(hardware):C(precision)")->n_columns, 6);
    /* the share of the SS column close to the artifact's "eta_squared" (0.2752, computed on slightly
     * different data; its column includes the Intercept row) */
    near("SS share", "workload", find_row(a, "C(workload)")->ss_share, 0.27522, 0.01, 0);
    /* eta^2 = SS / total SS about the mean: for type III not the share of the column */
    const drift_anova_row *w = find_row(a, "C(workload)"), *res = find_row(a, "Residual");
    near("eta2", "workload", w->eta_sq, w->sum_sq / a->ss_total, 1e-14, 0);
    near("partial eta2", "workload", w->eta_sq_partial, w->sum_sq / (w->sum_sq + res->sum_sq), 1e-14, 0);
    assert_true(fabs(w->eta_sq - w->ss_share) > 1e-3);
    assert_true(isnan(find_row(a, "Intercept")->eta_sq) && isnan(find_row(a, "Intercept")->eta_sq_partial));
    assert_true(isnan(res->eta_sq_partial));
    double sst = 0, mean = 0;
    for (size_t i = 0; i < t->n_rows; i++) mean += t->rows[i].flip_rate;
    mean /= (double)t->n_rows;
    for (size_t i = 0; i < t->n_rows; i++) sst += (t->rows[i].flip_rate - mean) * (t->rows[i].flip_rate - mean);
    near("ss_total", "all", a->ss_total, sst, 1e-12, 0);
    /* type I: the SS column adds up to the total SS, so eta^2 and the share agree */
    drift_anova_table *a1 = NULL;
    assert_int_equal(drift_anova_run(t, NULL, 1, &a1, &err), DRIFT_OK);
    double col = 0;
    for (size_t i = 0; i < a1->n_rows; i++) col += a1->rows[i].sum_sq;
    near("type I column", "sum", col, a1->ss_total, 1e-9, 0);
    for (size_t i = 0; i < a1->n_rows; i++) near("type I eta2 = share", a1->rows[i].term, a1->rows[i].eta_sq,
                                                 a1->rows[i].ss_share, 1e-9, 0);
    drift_anova_free(a1);
    drift_anova_free(a);
    drift_table_free(t);
}

typedef struct expect {
    char stratum[64], source[16], term[64];
    int type, stable;
    double df, ss, F, p, pbh;
} expect;

static double num(const char *s) { return *s ? strtod(s, NULL) : NAN; }

static int read_expect(FILE *f, expect *e) {
    char line[512];
    if (!fgets(line, sizeof line, f)) return 0;
    line[strcspn(line, "\r\n")] = 0;
    char *fld[10] = {0};
    int n = 0;
    char *p = line;
    for (; n < 10; n++) {
        fld[n] = p;
        char *c = strchr(p, ',');
        if (!c) { n++; break; }
        *c = 0;
        p = c + 1;
    }
    if (n != 10) fail_msg("expected.csv: bad line");
    snprintf(e->stratum, sizeof e->stratum, "%s", fld[0]);
    e->type = atoi(fld[1]);
    snprintf(e->source, sizeof e->source, "%s", fld[2]);
    snprintf(e->term, sizeof e->term, "%s", fld[3]);
    e->df = num(fld[4]);
    e->ss = num(fld[5]);
    e->F = num(fld[6]);
    e->p = num(fld[7]);
    e->pbh = num(fld[8]);
    e->stable = atoi(fld[9]);
    return 1;
}

static void test_against_statsmodels(void **state) {
    (void)state;
    drift_table *t = paper_table();
    drift_error err = {0};
    /* tables[type-1][0] = all, [1..4] = strata in sorted order */
    drift_anova_table *tabs[3][5] = {{0}};
    drift_anova_table **strata[3] = {0};
    size_t nstrata[3] = {0};
    for (int ty = 1; ty <= 3; ty++) {
        if (drift_anova_run(t, NULL, ty, &tabs[ty - 1][0], &err)) fail_msg("%s", err.msg);
        if (drift_anova_stratified(t, NULL, ty, "workload", &strata[ty - 1], &nstrata[ty - 1], &err))
            fail_msg("%s", err.msg);
        assert_int_equal(nstrata[ty - 1], 4);
        for (size_t k = 0; k < 4; k++) tabs[ty - 1][k + 1] = strata[ty - 1][k];
    }
    const char *src = getenv("DRIFT_SOURCE");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/anova/expected.csv", src ? src : ".");
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    expect e;
    char header[256];
    assert_non_null(fgets(header, sizeof header, f));
    int compared = 0, skipped = 0;
    while (read_expect(f, &e)) {
        drift_anova_table *a = NULL;
        for (int k = 0; k < 5; k++) {
            drift_anova_table *c = tabs[e.type - 1][k];
            if ((!strcmp(e.stratum, "all") && !c->stratum) || (c->stratum && !strcmp(c->stratum, e.stratum)))
                a = c;
        }
        if (!a) fail_msg("no table for %s", e.stratum);
        const drift_anova_row *r = find_row(a, e.term);
        if (!r) fail_msg("%s type %d: no term %s", e.stratum, e.type, e.term);
        char ctx[192];
        snprintf(ctx, sizeof ctx, "%s type %d %s %s", e.stratum, e.type, e.source, e.term);
        if (!e.stable) { skipped++; continue; } /* statsmodels' noise-dependent values */
        const double rel = 1e-5;                /* better than 4 significant digits */
        if (!strcmp(e.source, "nested") || r->df == e.df) {
            near("df", ctx, r->df, e.df, 0, 1e-9);
            near("sum_sq", ctx, r->sum_sq, e.ss, rel, 1e-9);
        }
        near("F", ctx, r->F, e.F, rel, 1e-12);
        near("p", ctx, r->p, e.p, rel, 1e-300);
        /* BH mixes the rows of a table: statsmodels' unstable Type I/II rows
         * shift the others, so its p_bh is compared for Type III only (the
         * nested rows check BH for Types I and II) */
        if (!strcmp(e.source, "nested") || e.type == 3) near("p_bh", ctx, r->p_bh, e.pbh, rel, 1e-300);
        compared++;
    }
    fclose(f);
    assert_true(compared > 100);
    assert_int_equal(skipped, 15);   /* 3 per table: type 1 hw:prec, type 2 hw and prec */
    for (int ty = 0; ty < 3; ty++) {
        drift_anova_free(tabs[ty][0]);
        for (size_t k = 0; k < nstrata[ty]; k++) drift_anova_free(strata[ty][k]);
        free(strata[ty]);
    }
    drift_table_free(t);
}

/* Benjamini & Hochberg (1995), section 4: 15 p-values, q = 0.05 rejects 4. */
static void test_bh_textbook(void **state) {
    (void)state;
    double p[15] = {0.0001, 0.0004, 0.0019, 0.0095, 0.0201, 0.0278, 0.0298, 0.0344,
                    0.0459, 0.3240, 0.4262, 0.5719, 0.6528, 0.7590, 1.000};
    double want[15] = {0.0015, 0.003, 0.0095, 0.035625, 0.0603, 0.0638571428571, 0.0638571428571,
                       0.0645, 0.0765, 0.486, 0.581181818181818, 0.714875, 0.753230769230769,
                       0.813214285714286, 1.0};
    /* shuffled input order, NaN skipped */
    int perm[15] = {7, 3, 14, 0, 9, 12, 1, 5, 11, 2, 13, 4, 8, 6, 10};
    double in[16], out[16];
    for (int i = 0; i < 15; i++) in[i] = p[perm[i]];
    in[15] = NAN;
    drift_bh_adjust(in, 16, out);
    int rejected = 0;
    for (int i = 0; i < 15; i++) {
        near("bh", "textbook", out[i], want[perm[i]], 1e-9, 0);
        rejected += out[i] <= 0.05;
    }
    assert_true(isnan(out[15]));
    assert_int_equal(rejected, 4);
    drift_bh_adjust(in, 16, in); /* in place */
    for (int i = 0; i < 15; i++) near("bh", "in place", in[i], want[perm[i]], 1e-9, 0);
}

static void test_formulas(void **state) {
    (void)state;
    drift_table *t = paper_table();
    drift_anova_table *a = NULL;
    drift_error err = {0};
    assert_int_equal(drift_anova_run(t, "flip_rate ~ C(gpu)", 2, &a, &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "gpu"));
    assert_non_null(strstr(err.msg, "hardware")); /* lists the dimensions */
    assert_int_equal(drift_anova_run(t, "flip_rate ~ C(hardware)*C(precision)", 2, &a, &err),
                     DRIFT_ERR_INVALID);
    assert_int_equal(drift_anova_run(t, "C(hardware)", 2, &a, &err), DRIFT_ERR_INVALID);
    assert_int_equal(drift_anova_run(t, "accuracy ~ C(hardware)", 2, &a, &err), DRIFT_ERR_INVALID);
    assert_int_equal(drift_anova_run(t, NULL, 4, &a, &err), DRIFT_ERR_INVALID);
    /* plain names are categorical, same as C(x); term order is by degree */
    drift_anova_table *b = NULL;
    assert_int_equal(drift_anova_run(t, "flip_rate ~ hardware:precision + workload + hardware + precision",
                                     1, &a, &err), DRIFT_OK);
    assert_int_equal(drift_anova_run(t, "flip_rate ~ C(workload)+C(hardware)+C(precision)+"
                                        "C(hardware):C(precision)", 1, &b, &err), DRIFT_OK);
    assert_int_equal(a->n_rows, 5);
    assert_string_equal(a->rows[3].term, "hardware:precision");
    for (size_t i = 0; i < a->n_rows; i++) near("F", a->rows[i].term, a->rows[i].F, b->rows[i].F, 1e-9, 0);
    /* Type I SS add up to the total sum of squares */
    double s = 0;
    for (size_t i = 0; i < a->n_rows; i++) s += a->rows[i].sum_sq;
    near("ss", "total", s, a->ss_total, 1e-9, 0);
    drift_anova_free(a);
    drift_anova_free(b);
    drift_table_free(t);
}

/* A balanced 2x3 design with replicates: textbook Type I = II = III. */
static void test_balanced(void **state) {
    (void)state;
    drift_table *t = NULL;
    drift_error err = {0};
    assert_int_equal(drift_table_create(NULL, 0, 0, &t, &err), DRIFT_OK);
    const char *hw[2] = {"a100", "h100"}, *pr[3] = {"fp16", "fp8", "fp4"};
    double y[2][3][2] = {{{1, 3}, {4, 6}, {8, 9}}, {{2, 2}, {7, 8}, {12, 15}}};
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int r = 0; r < 2; r++) {
                const char *d[5] = {"m", hw[i], pr[j], "vllm", "math"};
                assert_int_equal(drift_table_append(t, "x", d, y[i][j][r], 0, 10, NAN, NAN, &err), DRIFT_OK);
            }
    /* by hand: grand mean 6.4167; SS_hw = 6*(mean_a - gm)^2*2 ... computed exactly below */
    double gm = 0, ma[2] = {0}, mb[3] = {0}, cell[2][3], sst = 0, sse = 0;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) {
            cell[i][j] = (y[i][j][0] + y[i][j][1]) / 2;
            for (int r = 0; r < 2; r++) { gm += y[i][j][r] / 12; ma[i] += y[i][j][r] / 6; mb[j] += y[i][j][r] / 4; }
        }
    double ssa = 0, ssb = 0;
    for (int i = 0; i < 2; i++) ssa += 6 * (ma[i] - gm) * (ma[i] - gm);
    for (int j = 0; j < 3; j++) ssb += 4 * (mb[j] - gm) * (mb[j] - gm);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int r = 0; r < 2; r++) {
                sst += (y[i][j][r] - gm) * (y[i][j][r] - gm);
                sse += (y[i][j][r] - cell[i][j]) * (y[i][j][r] - cell[i][j]);
            }
    double ssab = sst - ssa - ssb - sse;
    const char *f = "flip_rate ~ C(hardware) + C(precision) + C(hardware):C(precision)";
    for (int ty = 1; ty <= 3; ty++) {
        drift_anova_table *a = NULL;
        assert_int_equal(drift_anova_run(t, f, ty, &a, &err), DRIFT_OK);
        near("ss_res", "balanced", a->ssr, sse, 1e-9, 1e-9);
        near("ss_ab", "balanced", find_row(a, "C(hardware):C(precision)")->sum_sq, ssab, 1e-9, 1e-9);
        if (ty < 3) { /* type III main effects use treatment contrasts: not the textbook SS */
            near("ss_a", "balanced", find_row(a, "C(hardware)")->sum_sq, ssa, 1e-9, 1e-9);
            near("ss_b", "balanced", find_row(a, "C(precision)")->sum_sq, ssb, 1e-9, 1e-9);
        }
        near("df", "balanced", a->df_resid, 6, 0, 0);
        drift_anova_free(a);
    }
    drift_table_free(t);
}

/* The lab's flip table that issue 36's audit read (tests/data/analysis/lab_flip_rates.csv, the
 * `make lab` of 2026-12-06): its summary printed precision's "eta^2 0.303, the term's share of the
 * total sum of squares"; 0.303 was the share of the type II SS column, the share of the total SS
 * is 0.289. */
static void test_lab_eta(void **state) {
    (void)state;
    const char *src = getenv("DRIFT_SOURCE");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/analysis/lab_flip_rates.csv", src ? src : ".");
    drift_table *t = NULL;
    drift_error err = {0};
    if (drift_table_read_csv(path, &t, &err)) fail_msg("%s", err.msg);
    drift_anova_table *a = NULL;
    assert_int_equal(drift_anova_run(t, "flip_rate ~ C(model) + C(hardware) + C(precision) + C(framework) + C(workload)",
                                     2, &a, &err),
                     DRIFT_OK);
    const drift_anova_row *p = find_row(a, "C(precision)");
    near("eta2", "lab precision", p->eta_sq, 0.2894, 0, 5e-5);
    near("SS share", "lab precision", p->ss_share, 0.3031, 0, 5e-5);
    near("partial eta2", "lab precision", p->eta_sq_partial, 0.3478, 0, 5e-5);
    drift_anova_free(a);
    drift_table_free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lab_eta),
        cmocka_unit_test(test_acceptance_type3), cmocka_unit_test(test_against_statsmodels),
        cmocka_unit_test(test_bh_textbook),      cmocka_unit_test(test_formulas),
        cmocka_unit_test(test_balanced),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
