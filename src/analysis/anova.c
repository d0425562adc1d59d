/* anova.c - analysis of variance over the flip table.
 *
 * formula "y ~ C(a) + C(b) + C(a):C(b)"  --parse-->  terms (sorted by degree,
 * as patsy sorts them)  --design-->  X = [Intercept | a dummies | b dummies |
 * a:b products]  (treatment coding, levels sorted with strcmp, first level
 * the reference; an interaction column is a product of the factors' dummies,
 * the first factor varying fastest, as patsy names them).
 *
 * Type I : sequential SS from one QR in term order (ols.c); df = the rank a
 *          term adds.
 * Type II: SS(T | every term not containing T) by comparing two nested fits;
 *          this is what statsmodels' anova_lm(typ=2) computes on full-rank
 *          designs (its L12 contrast construction).
 * Type III: Wald test of each term's coefficients (Intercept included) with
 *          the pinv covariance of the full fit, F = W / J, J = rank of the
 *          term's covariance block: exactly statsmodels' anova_lm(typ=3).
 *
 * Rank-deficient designs (empty cells of an interaction): statsmodels prints
 * the number of columns as df and, for Type I and for the lower-order terms
 * of Type II, returns values that depend on floating-point noise (they change
 * when the rows are shuffled; tools/ref/anova_ref.py demonstrates it). We give
 * the well-defined values: df = rank added, SS = F * df * MSE. Where
 * statsmodels is stable (every Type III F and p, and every term of full-rank
 * designs) we agree with it to 1e-6 relative.
 *
 * drift_anova_artifact_read reads the artifact's own Type III table when it
 * sits beside the flip table (the paper's data directory), for `anova` to
 * show beside ours. */
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cdf.h>

#include "analysis/analysis_internal.h"
#include "driftbench/analysis.h"
#include "util/util.h"

#define MAX_TERMS 32
#define MAX_FACTORS 8   /* per term */

static const char *const paper_formula =
    "flip_rate ~ C(hardware)+C(precision)+C(framework)+C(workload)+C(hardware):C(precision)";

const char *drift_anova_default_formula(void) { return paper_formula; }

typedef struct term {
    int nf;
    int f[MAX_FACTORS];  /* dimension indices */
    char name[256];
    size_t col0, ncol;   /* columns in the design */
} term;

typedef struct model {
    int response;        /* 0 flip_rate, 1 num_flips, 2 num_comparisons, 3 ci_low, 4 ci_high */
    char response_name[64];
    size_t nt;
    term t[MAX_TERMS];
} model;

static const char *const response_names[] = {"flip_rate", "num_flips", "num_comparisons", "ci_low", "ci_high"};

static char *strip(char *s) {
    while (*s == ' ' || *s == '\t' || *s == '\n') s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n')) s[--n] = 0;
    return s;
}

/* "C(x)" or "x" -> dimension index */
static drift_status parse_factor(const drift_table *tb, char *s, int *dim, drift_error *err) {
    s = strip(s);
    size_t n = strlen(s);
    if (n > 3 && s[0] == 'C' && s[1] == '(' && s[n - 1] == ')') {
        s[n - 1] = 0;
        s = strip(s + 2);
    }
    if (!*s) return drift_error_set(err, DRIFT_ERR_INVALID, "formula: empty factor");
    int d = drift_table_dim_index(tb, s);
    if (d < 0) {
        util_buf b = {0};
        for (size_t i = 0; i < tb->n_dims; i++) buf_printf(&b, "%s%s", i ? ", " : "", tb->dim_names[i]);
        drift_status st = drift_error_set(err, DRIFT_ERR_INVALID,
                                          "formula: '%s' is not a dimension of the table (dimensions: %s)",
                                          s, b.data ? b.data : "");
        buf_free(&b);
        return st;
    }
    *dim = d;
    return DRIFT_OK;
}

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

static drift_status parse_formula(const drift_table *tb, const char *formula, model *m, drift_error *err) {
    memset(m, 0, sizeof *m);
    char *copy = util_strdup(formula);
    if (!copy) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    drift_status st = DRIFT_OK;
    char *tilde = strchr(copy, '~');
    if (!tilde) {
        st = drift_error_set(err, DRIFT_ERR_INVALID, "formula '%s': no '~'", formula);
        goto done;
    }
    *tilde = 0;
    char *lhs = strip(copy);
    m->response = -1;
    for (int i = 0; i < 5; i++)
        if (!strcmp(lhs, response_names[i])) m->response = i;
    if (m->response < 0) {
        st = drift_error_set(err, DRIFT_ERR_INVALID,
                             "formula: response '%s' is not one of flip_rate, num_flips, num_comparisons, "
                             "ci_low, ci_high", lhs);
        goto done;
    }
    if (m->response >= 3 && !tb->has_ci) {
        st = drift_error_set(err, DRIFT_ERR_INVALID, "formula: the table has no %s column", lhs);
        goto done;
    }
    snprintf(m->response_name, sizeof m->response_name, "%s", lhs);
    char *save = NULL;
    for (char *tok = strtok_r(tilde + 1, "+", &save); tok; tok = strtok_r(NULL, "+", &save)) {
        char *ts = strip(tok);
        if (!*ts) {
            st = drift_error_set(err, DRIFT_ERR_INVALID, "formula '%s': empty term", formula);
            goto done;
        }
        if (!strcmp(ts, "1")) continue; /* the intercept is always there */
        if (strpbrk(ts, "*-/|^")) {
            st = drift_error_set(err, DRIFT_ERR_INVALID,
                                 "formula: term '%s': only C(x), x and C(x):C(y) terms joined by '+' are "
                                 "supported", ts);
            goto done;
        }
        if (m->nt == MAX_TERMS) {
            st = drift_error_set(err, DRIFT_ERR_INVALID, "formula: more than %d terms", MAX_TERMS);
            goto done;
        }
        term *t = &m->t[m->nt];
        memset(t, 0, sizeof *t);
        snprintf(t->name, sizeof t->name, "%s", ts);
        char *save2 = NULL;
        for (char *f = strtok_r(ts, ":", &save2); f; f = strtok_r(NULL, ":", &save2)) {
            if (t->nf == MAX_FACTORS) {
                st = drift_error_set(err, DRIFT_ERR_INVALID, "formula: term with more than %d factors",
                                     MAX_FACTORS);
                goto done;
            }
            if ((st = parse_factor(tb, f, &t->f[t->nf], err))) goto done;
            for (int k = 0; k < t->nf; k++)
                if (t->f[k] == t->f[t->nf]) {
                    st = drift_error_set(err, DRIFT_ERR_INVALID, "formula: term '%s' repeats a factor",
                                         t->name);
                    goto done;
                }
            t->nf++;
        }
        if (t->nf == 0) {
            st = drift_error_set(err, DRIFT_ERR_INVALID, "formula: empty term");
            goto done;
        }
        /* normalise the displayed name: C(a):C(b) in the order written */
        int dup = 0;
        for (size_t k = 0; k < m->nt && !dup; k++) {
            if (m->t[k].nf != t->nf) continue;
            int a[MAX_FACTORS], b[MAX_FACTORS];
            memcpy(a, m->t[k].f, sizeof a);
            memcpy(b, t->f, sizeof b);
            qsort(a, (size_t)t->nf, sizeof *a, cmp_int);
            qsort(b, (size_t)t->nf, sizeof *b, cmp_int);
            dup = !memcmp(a, b, (size_t)t->nf * sizeof *a);
        }
        if (!dup) m->nt++;
    }
    if (m->nt == 0) {
        st = drift_error_set(err, DRIFT_ERR_INVALID, "formula '%s': no terms", formula);
        goto done;
    }
    /* patsy orders terms by degree, stable within a degree */
    for (size_t i = 1; i < m->nt; i++)
        for (size_t j = i; j > 0 && m->t[j - 1].nf > m->t[j].nf; j--) {
            term tmp = m->t[j];
            m->t[j] = m->t[j - 1];
            m->t[j - 1] = tmp;
        }
done:
    free(copy);
    return st;
}

static double row_response(const drift_table_row *r, int resp) {
    switch (resp) {
    case 0: return r->flip_rate;
    case 1: return (double)r->num_flips;
    case 2: return (double)r->num_comparisons;
    case 3: return r->ci_low;
    default: return r->ci_high;
    }
}

typedef struct design {
    size_t n, p;
    double *X;      /* (n, p) column-major */
    double *y;      /* (n,) */
} design;

/* Level index of each row for dimension d (sorted levels); returns count. */
static drift_status level_codes(const drift_table *tb, const size_t *rows, size_t n, int d, int *code,
                                size_t *nlev, drift_error *err) {
    const char **lv = malloc((n ? n : 1) * sizeof *lv);
    if (!lv) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const char *v = tb->rows[rows[i]].dims[d];
        size_t lo = 0, hi = k;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            int c = strcmp(lv[mid], v);
            if (c < 0) lo = mid + 1;
            else hi = mid;
        }
        if (lo < k && !strcmp(lv[lo], v)) continue;
        memmove(lv + lo + 1, lv + lo, (k - lo) * sizeof *lv);
        lv[lo] = v;
        k++;
    }
    for (size_t i = 0; i < n; i++) {
        const char *v = tb->rows[rows[i]].dims[d];
        size_t lo = 0, hi = k;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (strcmp(lv[mid], v) < 0) lo = mid + 1;
            else hi = mid;
        }
        code[i] = (int)lo;
    }
    free(lv);
    *nlev = k;
    return DRIFT_OK;
}

static drift_status build_design(const drift_table *tb, const size_t *rows, size_t n, model *m, design *D,
                                 drift_error *err) {
    memset(D, 0, sizeof *D);
    int *codes[64] = {0};
    size_t nlev[64] = {0};
    drift_status st = DRIFT_OK;
    int main_effect[64] = {0};
    if (tb->n_dims > 64) return drift_error_set(err, DRIFT_ERR_INVALID, "more than 64 dimensions");
    for (size_t k = 0; k < m->nt; k++)
        if (m->t[k].nf == 1) main_effect[m->t[k].f[0]] = 1;
    /* columns per term */
    size_t p = 1;
    for (size_t k = 0; k < m->nt; k++) {
        term *t = &m->t[k];
        size_t c = 1;
        for (int f = 0; f < t->nf; f++) {
            int d = t->f[f];
            if (!codes[d]) {
                codes[d] = malloc((n ? n : 1) * sizeof *codes[d]);
                if (!codes[d]) { st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory"); goto done; }
                if ((st = level_codes(tb, rows, n, d, codes[d], &nlev[d], err))) goto done;
            }
            /* reduced (treatment) coding when the factor's main effect is in
             * the model or the term is itself a main effect, full otherwise */
            size_t lv = nlev[d];
            c *= (t->nf == 1 || main_effect[d]) ? (lv ? lv - 1 : 0) : lv;
        }
        t->col0 = p;
        t->ncol = c;
        p += c;
    }
    D->n = n;
    D->p = p;
    D->X = calloc(n * p + 1, sizeof *D->X);
    D->y = malloc((n ? n : 1) * sizeof *D->y);
    if (!D->X || !D->y) { st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory"); goto done; }
    for (size_t i = 0; i < n; i++) {
        D->X[i] = 1.0;
        D->y[i] = row_response(&tb->rows[rows[i]], m->response);
        if (!isfinite(D->y[i])) {
            st = drift_error_set(err, DRIFT_ERR_INVALID, "row %zu (%s): %s is missing", rows[i] + 1,
                                 tb->rows[rows[i]].experiment_id, m->response_name);
            goto done;
        }
    }
    for (size_t k = 0; k < m->nt; k++) {
        term *t = &m->t[k];
        if (t->ncol == 0) continue;
        for (size_t i = 0; i < n; i++) {
            /* mixed-radix column index, first factor fastest; -1 = no column */
            size_t idx = 0, radix = 1;
            int on = 1;
            for (int f = 0; f < t->nf && on; f++) {
                int d = t->f[f];
                int full = !(t->nf == 1 || main_effect[d]);
                int c = codes[d][i];
                size_t width = full ? nlev[d] : nlev[d] - 1;
                if (!full) {
                    if (c == 0) { on = 0; break; }
                    c -= 1;
                }
                idx += (size_t)c * radix;
                radix *= width;
            }
            if (on) D->X[(t->col0 + idx) * n + i] = 1.0;
        }
    }
done:
    for (int d = 0; d < 64; d++) free(codes[d]);
    if (st) {
        free(D->X);
        free(D->y);
        memset(D, 0, sizeof *D);
    }
    return st;
}

/* Least squares over a subset of columns (mask); returns ssr and rank. */
static drift_status fit_subset(const design *D, const int *use, double *ssr, size_t *rank, drift_error *err) {
    size_t q = 0;
    for (size_t j = 0; j < D->p; j++) q += use[j] != 0;
    double *Xs = malloc((D->n * q + 1) * sizeof *Xs);
    if (!Xs) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    size_t c = 0;
    for (size_t j = 0; j < D->p; j++)
        if (use[j]) memcpy(Xs + (c++) * D->n, D->X + j * D->n, D->n * sizeof *Xs);
    drift_status st = anl_qr_sequential(Xs, D->n, q, D->y, NULL, NULL, rank, ssr, err);
    free(Xs);
    return st;
}

/* term a contains term b (b's factors are a subset of a's, a != b) */
static int term_contains(const term *a, const term *b) {
    if (a->nf <= b->nf) return 0;
    for (int i = 0; i < b->nf; i++) {
        int found = 0;
        for (int j = 0; j < a->nf; j++) found |= a->f[j] == b->f[i];
        if (!found) return 0;
    }
    return 1;
}

void drift_anova_free(drift_anova_table *a) {
    if (!a) return;
    for (size_t i = 0; i < a->n_rows; i++) free(a->rows[i].term);
    free(a->rows);
    free(a->formula);
    free(a->stratum);
    free(a);
}

void drift_bh_adjust(const double *p, size_t n, double *out) {
    size_t m = 0;
    size_t *idx = malloc((n ? n : 1) * sizeof *idx);
    double *tmp = malloc((n ? n : 1) * sizeof *tmp);
    if (!idx || !tmp) { /* cannot sort: fall back to Bonferroni, never smaller than BH */
        for (size_t i = 0; i < n; i++) out[i] = isnan(p[i]) ? NAN : fmin(1.0, p[i] * (double)n);
        free(idx);
        free(tmp);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        tmp[i] = p[i];
        if (!isnan(p[i])) idx[m++] = i;
    }
    /* insertion sort by p (tables are small) */
    for (size_t i = 1; i < m; i++)
        for (size_t j = i; j > 0 && tmp[idx[j - 1]] > tmp[idx[j]]; j--) {
            size_t s = idx[j]; idx[j] = idx[j - 1]; idx[j - 1] = s;
        }
    double run = 1.0;
    for (size_t r = m; r > 0; r--) {
        size_t i = idx[r - 1];
        double v = tmp[i] * (double)m / (double)r;
        if (v < run) run = v;
        out[i] = run;
    }
    for (size_t i = 0; i < n; i++)
        if (isnan(tmp[i])) out[i] = NAN;
    free(idx);
    free(tmp);
}

static drift_status anova_on_rows(const drift_table *tb, const size_t *rows, size_t n, const char *formula,
                                  int type, drift_anova_table **out, drift_error *err) {
    *out = NULL;
    model m;
    design D = {0};
    drift_status st = parse_formula(tb, formula, &m, err);
    if (st) return st;
    if ((st = build_design(tb, rows, n, &m, &D, err))) return st;
    drift_anova_table *a = calloc(1, sizeof *a);
    int *use = calloc(D.p, sizeof *use);
    int *indep = calloc(D.p, sizeof *indep);
    double *eff2 = calloc(D.p, sizeof *eff2);
    double *beta = calloc(D.p, sizeof *beta);
    double *cov = calloc(D.p * D.p, sizeof *cov);
    size_t *cols = calloc(D.p, sizeof *cols);
    double *pv = NULL;
    if (!a || !use || !indep || !eff2 || !beta || !cov || !cols) goto nomem;
    a->type = type;
    a->nobs = n;
    a->n_columns = D.p;
    if (!(a->formula = util_strdup(formula))) goto nomem;

    double ssr;
    size_t rank;
    if ((st = anl_qr_sequential(D.X, D.n, D.p, D.y, indep, eff2, &rank, &ssr, err))) goto fail;
    double mean = 0, sst = 0;
    for (size_t i = 0; i < n; i++) mean += D.y[i];
    mean /= (double)(n ? n : 1);
    for (size_t i = 0; i < n; i++) sst += (D.y[i] - mean) * (D.y[i] - mean);
    if (type == 3) {
        size_t rk2;
        if ((st = anl_pinv_fit(D.X, D.n, D.p, D.y, beta, cov, &rk2, err))) goto fail;
        /* statsmodels' ssr is from the pinv fit; it equals the QR one up to rounding */
        rank = rk2;
    }
    a->rank = rank;
    a->ssr = ssr;
    a->ss_total = sst;
    a->df_resid = (double)n - (double)rank;
    if (a->df_resid <= 0) {
        st = drift_error_set(err, DRIFT_ERR_INVALID,
                             "ANOVA: %zu rows and %zu independent columns leave no residual degrees of freedom",
                             n, rank);
        goto fail;
    }
    a->mse = ssr / a->df_resid;
    size_t nrows = m.nt + 1 + (type == 3);
    a->rows = calloc(nrows, sizeof *a->rows);
    if (!a->rows) goto nomem;
    a->n_rows = nrows;
    size_t r0 = 0;
    if (type == 3) {
        drift_anova_row *row = &a->rows[0];
        if (!(row->term = util_strdup("Intercept"))) goto nomem;
        row->n_columns = 1;
        r0 = 1;
    }
    for (size_t k = 0; k < m.nt; k++) {
        drift_anova_row *row = &a->rows[r0 + k];
        if (!(row->term = util_strdup(m.t[k].name))) goto nomem;
        row->n_columns = (int)m.t[k].ncol;
    }
    drift_anova_row *res = &a->rows[nrows - 1];
    if (!(res->term = util_strdup("Residual"))) goto nomem;
    res->df = a->df_resid;
    res->n_columns = 0;
    res->sum_sq = ssr;
    res->mean_sq = a->mse;
    res->F = res->p = res->p_bh = NAN;

    for (size_t k = 0; k < m.nt + (type == 3); k++) {
        drift_anova_row *row = &a->rows[k];
        double ss = 0, df = 0;
        if (type == 1) {
            term *t = &m.t[k];
            for (size_t j = t->col0; j < t->col0 + t->ncol; j++) {
                ss += eff2[j];
                df += indep[j];
            }
        } else if (type == 2) {
            term *t = &m.t[k];
            /* model A: intercept + every term that neither is t nor contains t */
            for (size_t j = 0; j < D.p; j++) use[j] = 0;
            use[0] = 1;
            for (size_t q = 0; q < m.nt; q++) {
                if (q == k || term_contains(&m.t[q], t)) continue;
                for (size_t j = m.t[q].col0; j < m.t[q].col0 + m.t[q].ncol; j++) use[j] = 1;
            }
            double ssr_a, ssr_b;
            size_t rk_a, rk_b;
            if ((st = fit_subset(&D, use, &ssr_a, &rk_a, err))) goto fail;
            for (size_t j = t->col0; j < t->col0 + t->ncol; j++) use[j] = 1;
            if ((st = fit_subset(&D, use, &ssr_b, &rk_b, err))) goto fail;
            ss = fmax(0.0, ssr_a - ssr_b);
            df = (double)(rk_b - rk_a);
        } else {
            size_t c0 = 0, nc = 1;
            if (k > 0) { c0 = m.t[k - 1].col0; nc = m.t[k - 1].ncol; }
            for (size_t j = 0; j < nc; j++) cols[j] = c0 + j;
            /* covariance = pinv(X'X) * MSE */
            double W;
            size_t J;
            if ((st = anl_wald(beta, cov, D.p, cols, nc, &W, &J, err))) goto fail;
            df = (double)J;
            ss = J ? W : 0;                       /* unscaled W = b' pinv(C_u) b = SS */
        }
        row->df = df;
        row->sum_sq = ss;
        if (df > 0) {
            row->mean_sq = ss / df;
            row->F = row->mean_sq / a->mse;
            row->p = gsl_cdf_fdist_Q(row->F, df, a->df_resid);
        } else {
            row->mean_sq = row->F = row->p = NAN;
        }
    }
    /* BH over the term rows. Three shares of a term's SS (analysis.h):
     * eta^2 over the total SS about the mean (the paper's definition),
     * partial eta^2 over SS + residual SS, and the share of the SS column
     * (the artifact's "eta_squared"; for type I the column adds up to the
     * total SS and the two agree, for types II and III it does not). */
    pv = calloc(nrows, sizeof *pv);
    if (!pv) goto nomem;
    double sum_ss = 0;
    for (size_t k = 0; k < nrows; k++) {
        pv[k] = k + 1 < nrows ? a->rows[k].p : NAN;
        sum_ss += a->rows[k].sum_sq;
    }
    drift_bh_adjust(pv, nrows, pv);
    for (size_t k = 0; k < nrows; k++) {
        a->rows[k].p_bh = pv[k];
        drift_anova_row *row = &a->rows[k];
        int intercept = type == 3 && k == 0, resid = k + 1 == nrows;
        row->ss_share = sum_ss > 0 ? row->sum_sq / sum_ss : NAN;
        row->eta_sq = !intercept && sst > 0 ? row->sum_sq / sst : NAN;
        row->eta_sq_partial = !intercept && !resid && row->sum_sq + ssr > 0 ? row->sum_sq / (row->sum_sq + ssr) : NAN;
    }
    goto cleanup;
nomem:
    st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
fail:
    drift_anova_free(a);
    a = NULL;
cleanup:
    free(pv);
    free(use);
    free(indep);
    free(eff2);
    free(beta);
    free(cov);
    free(cols);
    free(D.X);
    free(D.y);
    if (!st) *out = a;
    return st;
}

drift_status drift_anova_run(const drift_table *t, const char *formula, int type, drift_anova_table **out,
                             drift_error *err) {
    *out = NULL;
    if (type < 1 || type > 3)
        return drift_error_set(err, DRIFT_ERR_INVALID, "ANOVA type %d: use 1, 2 or 3", type);
    if (!formula) formula = paper_formula;
    size_t *rows = malloc((t->n_rows ? t->n_rows : 1) * sizeof *rows);
    if (!rows) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < t->n_rows; i++) rows[i] = i;
    drift_status st = anova_on_rows(t, rows, t->n_rows, formula, type, out, err);
    free(rows);
    return st;
}

/* Removes the terms that mention dimension `name` from formula. */
static char *formula_without(const drift_table *tb, const char *formula, int dim, drift_error *err) {
    model m;
    if (parse_formula(tb, formula, &m, err)) return NULL;
    util_buf b = {0};
    buf_printf(&b, "%s ~ ", m.response_name);
    int first = 1;
    for (size_t k = 0; k < m.nt; k++) {
        int mentions = 0;
        for (int f = 0; f < m.t[k].nf; f++) mentions |= m.t[k].f[f] == dim;
        if (mentions) continue;
        buf_printf(&b, "%s%s", first ? "" : " + ", m.t[k].name);
        first = 0;
    }
    if (first) {
        buf_free(&b);
        drift_error_set(err, DRIFT_ERR_INVALID, "formula has no term left after removing '%s'",
                        tb->dim_names[dim]);
        return NULL;
    }
    return buf_steal(&b);
}

drift_status drift_anova_stratified(const drift_table *t, const char *formula, int type, const char *strata,
                                    drift_anova_table ***out, size_t *n_out, drift_error *err) {
    *out = NULL;
    *n_out = 0;
    if (!formula) formula = paper_formula;
    if (type < 1 || type > 3)
        return drift_error_set(err, DRIFT_ERR_INVALID, "ANOVA type %d: use 1, 2 or 3", type);
    int d = drift_table_dim_index(t, strata);
    if (d < 0) return drift_error_set(err, DRIFT_ERR_INVALID, "--strata %s: not a dimension of the table", strata);
    const char **lv;
    size_t nl;
    drift_status st = drift_table_levels(t, (size_t)d, &lv, &nl, err);
    if (st) return st;
    char *f2 = formula_without(t, formula, d, err);
    size_t *rows = malloc((t->n_rows ? t->n_rows : 1) * sizeof *rows);
    drift_anova_table **res = calloc(nl ? nl : 1, sizeof *res);
    size_t nres = 0;
    if (!f2) { st = err ? err->code : DRIFT_ERR_INVALID; goto done; }
    if (!rows || !res) { st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory"); goto done; }
    for (size_t l = 0; l < nl; l++) {
        size_t n = 0;
        for (size_t i = 0; i < t->n_rows; i++)
            if (!strcmp(t->rows[i].dims[d], lv[l])) rows[n++] = i;
        drift_anova_table *a = NULL;
        drift_error e2 = {0};
        st = anova_on_rows(t, rows, n, f2, type, &a, &e2);
        if (st == DRIFT_ERR_INVALID && strstr(e2.msg, "no residual")) { st = DRIFT_OK; continue; }
        if (st) {
            drift_error_set(err, st, "stratum %s=%s: %s", strata, lv[l], e2.msg);
            goto done;
        }
        a->stratum = util_asprintf("%s=%s", strata, lv[l]);
        if (!a->stratum) {
            drift_anova_free(a);
            st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
            goto done;
        }
        res[nres++] = a;
    }
done:
    if (st) {
        for (size_t i = 0; i < nres; i++) drift_anova_free(res[i]);
        free(res);
    } else {
        *out = res;
        *n_out = nres;
    }
    free(rows);
    free(f2);
    free(lv);
    return st;
}

/* See analysis.h. */
size_t drift_anova_artifact_read(const char *table_path, drift_anova_artifact_row *rows, size_t max) {
    char *copy = util_strdup(table_path);
    char *path = copy ? util_asprintf("%s/anova_flip_rate_corrected.csv", dirname(copy)) : NULL;
    FILE *f = path ? fopen(path, "r") : NULL;
    free(path);
    free(copy);
    if (!f) return 0;
    char line[512];
    size_t n = 0;
    if (!fgets(line, sizeof line, f)) {
        fclose(f);
        return 0;
    }
    while (n < max && fgets(line, sizeof line, f)) {
        char *fld[7];
        int k = 0;
        char *p = line;
        line[strcspn(line, "\r\n")] = 0;
        for (; k < 7; k++) {
            fld[k] = p;
            char *c = strchr(p, ',');
            if (!c) {
                k++;
                break;
            }
            *c = 0;
            p = c + 1;
        }
        if (k != 7) continue;
        drift_anova_artifact_row *r = &rows[n++];
        snprintf(r->term, sizeof r->term, "%s", fld[0]);
        double *v[6] = {&r->sum_sq, &r->df, &r->F, &r->p, &r->p_corrected, &r->eta_sq};
        for (int j = 0; j < 6; j++) *v[j] = *fld[j + 1] ? strtod(fld[j + 1], NULL) : NAN;
    }
    fclose(f);
    return n;
}
