/* logit.c - prompt-level logistic model of flips with prompt-clustered
 * errors (analysis.h: drift_logit_cluster_fit).
 *
 *   levels      each factor's distinct levels (strcmp order), the level of
 *               every observation, the reference asked for
 *   separation  a level whose observations (among those still in) are all
 *               0 or all 1 is separated: its maximum-likelihood coefficient
 *               is infinite. Its observations leave the fit (the limit of
 *               the likelihood: they are fitted exactly and say nothing on
 *               the other coefficients) and the check runs again on what is
 *               left, until nothing changes
 *   design      intercept + one treatment column per remaining level other
 *               than the reference used; a column the earlier ones span
 *               (anl_qr_sequential) is not estimable and left out
 *   Newton      on the log-likelihood from beta = (logit(mean y), 0, ...),
 *               Cholesky of X'WX, step halving while the log-likelihood
 *               falls; converged when the largest step is below 1e-10
 *   sandwich    V = H^-1 (sum_g s_g s_g') H^-1 * G/(G-1) * (N-1)/(N-K),
 *               s_g = sum over the cluster's observations of x_i (y_i -
 *               mu_i), H = X'WX at the estimate: statsmodels' cov_cluster
 *               with its default correction (use_correction=True)
 *   tests       z = est / se with the normal distribution (statsmodels'
 *               GLM default); per factor the Wald chi^2 of its estimable
 *               coefficients (anl_wald: b' pinv(V_S) b, df = rank V_S).
 *               A level whose pairs all come from one prompt has a
 *               clustered variance of 0 by construction (its residuals sum
 *               to 0 within that prompt at the estimate): not estimable,
 *               where statsmodels would print a standard error of ~1e-9. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_matrix.h>

#include "analysis/analysis_internal.h"
#include "driftbench/analysis.h"
#include "util/util.h"

#define MAX_ITER 100
#define STEP_TOL 1e-10
#define ABSURD 10.0 /* |log odds ratio| beyond which an unconverged fit's coefficient is not shown */

typedef struct level {
    const char *name;
    long n_all, ev_all;   /* observations and events in the data given */
    long n, ev;           /* among the observations still in */
    int separated;        /* 1: all 0 / all 1 among those still in when found */
    char why[96];         /* set when the level has no estimable coefficient */
    long col;             /* design column, -1 none */
} level;

typedef struct factor {
    const char *name;
    size_t nl;
    level *lv;            /* (nl) sorted by name */
    size_t *of;           /* (n) level index of each observation */
    size_t ref_asked, ref;
    int has_ref;          /* a level usable as reference remains */
} factor;

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static void factors_free(factor *F, size_t k) {
    if (!F) return;
    for (size_t f = 0; f < k; f++) {
        free(F[f].lv);
        free(F[f].of);
    }
    free(F);
}

static drift_status levels_of(const drift_logit_factor_in *in, const unsigned char *y, size_t n, factor *F,
                              drift_error *err) {
    const char **v = malloc(n * sizeof *v);
    F->of = malloc(n * sizeof *F->of);
    if (!v || !F->of) {
        free(v);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    F->name = in->name ? in->name : "factor";
    for (size_t i = 0; i < n; i++) {
        if (!in->levels || !in->levels[i]) {
            free(v);
            return drift_error_set(err, DRIFT_ERR_INVALID, "logistic model: factor %s has no level for observation %zu",
                                   F->name, i);
        }
        v[i] = in->levels[i];
    }
    qsort(v, n, sizeof *v, cmp_str);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (!m || strcmp(v[m - 1], v[i])) v[m++] = v[i];
    F->lv = calloc(m, sizeof *F->lv);
    if (!F->lv) {
        free(v);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    F->nl = m;
    for (size_t l = 0; l < m; l++) {
        F->lv[l].name = v[l];
        F->lv[l].col = -1;
    }
    free(v);
    for (size_t i = 0; i < n; i++) {
        size_t lo = 0, hi = m;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (strcmp(F->lv[mid].name, in->levels[i]) < 0) lo = mid + 1;
            else hi = mid;
        }
        F->of[i] = lo;
        F->lv[lo].n_all++;
        F->lv[lo].ev_all += y[i];
    }
    F->ref_asked = 0;
    if (in->reference)
        for (size_t l = 0; l < m; l++)
            if (!strcmp(F->lv[l].name, in->reference)) F->ref_asked = l;
    return DRIFT_OK;
}

/* Removes separated levels' observations until none is left separated. */
static void separate(factor *F, size_t k, const unsigned char *y, size_t n, unsigned char *in) {
    for (;;) {
        for (size_t f = 0; f < k; f++)
            for (size_t l = 0; l < F[f].nl; l++) F[f].lv[l].n = F[f].lv[l].ev = 0;
        for (size_t i = 0; i < n; i++) {
            if (!in[i]) continue;
            for (size_t f = 0; f < k; f++) {
                F[f].lv[F[f].of[i]].n++;
                F[f].lv[F[f].of[i]].ev += y[i];
            }
        }
        int changed = 0;
        for (size_t f = 0; f < k; f++) {
            if (F[f].nl < 2) continue; /* a single level is the intercept's business */
            for (size_t l = 0; l < F[f].nl; l++) {
                level *L = &F[f].lv[l];
                if (L->separated || L->n == 0 || (L->ev > 0 && L->ev < L->n)) continue;
                L->separated = 1;
                changed = 1;
                const char *what = L->ev == 0 ? "no flips in its" : "every one of its";
                if (L->n == L->n_all)
                    snprintf(L->why, sizeof L->why, "%s %ld pairs%s", what, L->n, L->ev ? " flips" : "");
                else
                    snprintf(L->why, sizeof L->why, "%s %ld pairs left once other separated levels are out%s", what,
                             L->n, L->ev ? " flips" : "");
            }
        }
        if (!changed) return;
        for (size_t i = 0; i < n; i++)
            if (in[i])
                for (size_t f = 0; f < k; f++)
                    if (F[f].lv[F[f].of[i]].separated) in[i] = 0;
    }
}

static double loglik(const double *X, size_t N, size_t K, const double *y, const double *b, double *eta) {
    double ll = 0;
    for (size_t i = 0; i < N; i++) eta[i] = 0;
    for (size_t j = 0; j < K; j++)
        for (size_t i = 0; i < N; i++) eta[i] += X[j * N + i] * b[j];
    for (size_t i = 0; i < N; i++) {
        double e = eta[i];
        ll += y[i] * e - (fmax(e, 0) + log1p(exp(-fabs(e))));
    }
    return ll;
}

static double sigmoid(double e) { return e >= 0 ? 1 / (1 + exp(-e)) : exp(e) / (1 + exp(e)); }

/* H = X'WX at eta into G (K x K, gsl), gradient into g (K). */
static void hess_grad(const double *X, size_t N, size_t K, const double *y, const double *eta, gsl_matrix *G,
                      double *g) {
    gsl_matrix_set_zero(G);
    for (size_t j = 0; j < K; j++) g[j] = 0;
    for (size_t i = 0; i < N; i++) {
        double mu = sigmoid(eta[i]), w = mu * (1 - mu), r = y[i] - mu;
        for (size_t a = 0; a < K; a++) {
            double xa = X[a * N + i];
            if (xa == 0) continue;
            g[a] += xa * r;
            for (size_t c = 0; c <= a; c++) {
                double xc = X[c * N + i];
                if (xc != 0) *gsl_matrix_ptr(G, a, c) += w * xa * xc;
            }
        }
    }
    for (size_t a = 0; a < K; a++)
        for (size_t c = 0; c < a; c++) gsl_matrix_set(G, c, a, gsl_matrix_get(G, a, c));
}

typedef struct fit_state {
    size_t N, K;
    double *X, *y, *b, *eta, *g, *d, *bt, *V;
    size_t *ncl;          /* (K) clusters with a nonzero entry in each column */
    gsl_matrix *H;
} fit_state;

static drift_status newton(fit_state *s, int *converged, int *iterations, drift_error *err) {
    size_t N = s->N, K = s->K;
    double ybar = 0;
    for (size_t i = 0; i < N; i++) ybar += s->y[i];
    ybar /= (double)N;
    for (size_t j = 0; j < K; j++) s->b[j] = 0;
    s->b[0] = log(ybar / (1 - ybar));
    double ll = loglik(s->X, N, K, s->y, s->b, s->eta);
    gsl_vector_view dv = gsl_vector_view_array(s->d, K);
    *converged = 0;
    int it;
    for (it = 0; it < MAX_ITER; it++) {
        hess_grad(s->X, N, K, s->y, s->eta, s->H, s->g);
        gsl_error_handler_t *old = gsl_set_error_handler_off();
        int rc = gsl_linalg_cholesky_decomp1(s->H);
        if (!rc) {
            gsl_vector_const_view gv = gsl_vector_const_view_array(s->g, K);
            rc = gsl_linalg_cholesky_solve(s->H, &gv.vector, &dv.vector);
        }
        gsl_set_error_handler(old);
        if (rc)
            return drift_error_set(err, DRIFT_ERR_NUMERIC, "logistic model: the information matrix cannot be factorised "
                                                           "at iteration %d (%s)", it + 1, gsl_strerror(rc));
        double step = 1, nll = ll;
        for (int h = 0; h < 40; h++) {
            for (size_t j = 0; j < K; j++) s->bt[j] = s->b[j] + step * s->d[j];
            nll = loglik(s->X, N, K, s->y, s->bt, s->eta);
            if (nll >= ll - 1e-12 * fabs(ll)) break;
            step /= 2;
        }
        double big = 0;
        for (size_t j = 0; j < K; j++) {
            big = fmax(big, fabs(s->bt[j] - s->b[j]));
            s->b[j] = s->bt[j];
        }
        ll = nll;
        if (big < STEP_TOL) {
            *converged = 1;
            it++;
            break;
        }
    }
    *iterations = it;
    /* the information matrix at the estimate, inverted */
    loglik(s->X, N, K, s->y, s->b, s->eta);
    hess_grad(s->X, N, K, s->y, s->eta, s->H, s->g);
    gsl_error_handler_t *old = gsl_set_error_handler_off();
    int rc = gsl_linalg_cholesky_decomp1(s->H);
    if (!rc) rc = gsl_linalg_cholesky_invert(s->H);
    gsl_set_error_handler(old);
    if (rc)
        return drift_error_set(err, DRIFT_ERR_NUMERIC, "logistic model: the information matrix at the estimate cannot be "
                                                       "inverted (%s)", gsl_strerror(rc));
    return DRIFT_OK;
}

typedef struct key_idx {
    int64_t key;
    size_t i;
} key_idx;

static int cmp_key(const void *a, const void *b) {
    const key_idx *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

/* Cluster-robust covariance into s->V (K x K column-major); *G clusters. */
static drift_status sandwich(fit_state *s, const int64_t *cl, size_t *G_out, drift_error *err) {
    size_t N = s->N, K = s->K;
    key_idx *t = malloc(N * sizeof *t);
    double *sg = calloc(K, sizeof *sg), *M = calloc(K * K, sizeof *M), *T = calloc(K * K, sizeof *T);
    if (!t || !sg || !M || !T) {
        free(t); free(sg); free(M); free(T);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < N; i++) {
        t[i].key = cl[i];
        t[i].i = i;
    }
    qsort(t, N, sizeof *t, cmp_key);
    size_t G = 0;
    for (size_t a = 0; a < N;) {
        size_t e = a;
        for (size_t j = 0; j < K; j++) sg[j] = T[j] = 0; /* T: column seen in this cluster */
        while (e < N && t[e].key == t[a].key) {
            size_t i = t[e].i;
            double r = s->y[i] - sigmoid(s->eta[i]);
            for (size_t j = 0; j < K; j++) {
                sg[j] += s->X[j * N + i] * r;
                if (s->X[j * N + i] != 0) T[j] = 1;
            }
            e++;
        }
        for (size_t j = 0; j < K; j++) s->ncl[j] += T[j] != 0;
        for (size_t p = 0; p < K; p++)
            for (size_t q = 0; q < K; q++) M[q * K + p] += sg[p] * sg[q];
        G++;
        a = e;
    }
    /* V = Hinv M Hinv * c */
    double c = G > 1 && N > K ? (double)G / (double)(G - 1) * ((double)N - 1) / (double)(N - K) : NAN;
    for (size_t p = 0; p < K; p++)
        for (size_t q = 0; q < K; q++) {
            double v = 0;
            for (size_t r = 0; r < K; r++) v += gsl_matrix_get(s->H, p, r) * M[q * K + r];
            T[q * K + p] = v;
        }
    for (size_t p = 0; p < K; p++)
        for (size_t q = 0; q < K; q++) {
            double v = 0;
            for (size_t r = 0; r < K; r++) v += T[r * K + p] * gsl_matrix_get(s->H, r, q);
            s->V[q * K + p] = v * c;
        }
    *G_out = G;
    free(t); free(sg); free(M); free(T);
    return DRIFT_OK;
}

void drift_logit_fit_free(drift_logit_fit *f) {
    if (!f) return;
    for (size_t i = 0; i < f->n_coefs; i++) {
        free(f->coefs[i].name);
        free(f->coefs[i].factor);
        free(f->coefs[i].level);
    }
    for (size_t i = 0; i < f->n_terms; i++) {
        free(f->terms[i].factor);
        free(f->terms[i].reference);
        free(f->terms[i].reference_used);
    }
    free(f->coefs);
    free(f->terms);
    free(f);
}

drift_status drift_logit_cluster_fit(const unsigned char *y, const int64_t *cluster, size_t n,
                                     const drift_logit_factor_in *factors, size_t n_factors, drift_logit_fit **out,
                                     drift_error *err) {
    *out = NULL;
    if (!y || !cluster || n < 2)
        return drift_error_set(err, DRIFT_ERR_INVALID, "logistic model: %zu observations (at least 2 are needed)", n);
    if (n_factors && !factors) return drift_error_set(err, DRIFT_ERR_INVALID, "logistic model: no factors");
    for (size_t i = 0; i < n; i++)
        if (y[i] > 1)
            return drift_error_set(err, DRIFT_ERR_INVALID, "logistic model: observation %zu has y = %d (0 or 1 expected)",
                                   i, y[i]);
    drift_status st = DRIFT_OK;
    factor *F = calloc(n_factors ? n_factors : 1, sizeof *F);
    unsigned char *in = malloc(n);
    drift_logit_fit *R = calloc(1, sizeof *R);
    fit_state s = {0};
    int64_t *cl = NULL;
    if (!F || !in || !R) goto nomem;
    for (size_t f = 0; f < n_factors; f++)
        if ((st = levels_of(&factors[f], y, n, &F[f], err))) goto fail;
    memset(in, 1, n);
    separate(F, n_factors, y, n, in);
    size_t N = 0;
    double ysum = 0;
    for (size_t i = 0; i < n; i++)
        if (in[i]) {
            N++;
            ysum += y[i];
        }
    int fit_ok = N > 0 && ysum > 0 && ysum < (double)N;
    /* references and columns */
    size_t K = 1;
    for (size_t f = 0; f < n_factors; f++) {
        factor *A = &F[f];
        if (A->nl < 2) continue;
        A->has_ref = 0;
        if (!A->lv[A->ref_asked].separated && A->lv[A->ref_asked].n > 0) {
            A->ref = A->ref_asked;
            A->has_ref = 1;
        } else
            for (size_t l = 0; l < A->nl && !A->has_ref; l++)
                if (!A->lv[l].separated && A->lv[l].n > 0) {
                    A->ref = l;
                    A->has_ref = 1;
                }
        if (!A->has_ref) A->ref = A->ref_asked;
        for (size_t l = 0; l < A->nl; l++) {
            level *L = &A->lv[l];
            if (l == A->ref) continue;
            if (!L->separated && L->n == 0)
                snprintf(L->why, sizeof L->why, "no pairs left once the separated levels are out");
            if (l == A->ref_asked && L->separated) {
                char w[96];
                snprintf(w, sizeof w, "%s", L->why);
                snprintf(L->why, sizeof L->why, "reference, %s", w);
            }
            if (L->separated || L->n == 0 || !fit_ok) continue;
            L->col = (long)K++;
        }
    }
    R->nobs = n;
    /* the design over the observations in */
    if (fit_ok) {
        s.N = N;
        s.X = calloc(N * K, sizeof *s.X);
        s.y = malloc(N * sizeof *s.y);
        cl = malloc(N * sizeof *cl);
        if (!s.X || !s.y || !cl) goto nomem;
        size_t r = 0;
        for (size_t i = 0; i < n; i++) {
            if (!in[i]) continue;
            s.X[r] = 1;
            s.y[r] = y[i];
            cl[r] = cluster[i];
            for (size_t f = 0; f < n_factors; f++) {
                long c = F[f].nl >= 2 ? F[f].lv[F[f].of[i]].col : -1;
                if (c > 0) s.X[(size_t)c * N + r] = 1;
            }
            r++;
        }
        /* collinear columns leave */
        int *indep = malloc(K * sizeof *indep);
        if (!indep) goto nomem;
        if ((st = anl_qr_sequential(s.X, N, K, s.y, indep, NULL, NULL, NULL, err))) {
            free(indep);
            goto fail;
        }
        size_t K2 = 0;
        long *newcol = malloc(K * sizeof *newcol);
        if (!newcol) {
            free(indep);
            goto nomem;
        }
        for (size_t j = 0; j < K; j++) {
            newcol[j] = indep[j] ? (long)K2 : -1;
            if (indep[j]) {
                if (K2 != j) memmove(s.X + K2 * N, s.X + j * N, N * sizeof *s.X);
                K2++;
            }
        }
        for (size_t f = 0; f < n_factors; f++)
            for (size_t l = 0; l < F[f].nl; l++) {
                level *L = &F[f].lv[l];
                if (L->col < 0) continue;
                if (newcol[L->col] < 0)
                    snprintf(L->why, sizeof L->why, "collinear with the earlier columns (confounded with other levels)");
                L->col = newcol[L->col];
            }
        free(indep);
        free(newcol);
        K = K2;
        s.K = K;
        s.b = calloc(K, sizeof *s.b);
        s.bt = calloc(K, sizeof *s.bt);
        s.g = calloc(K, sizeof *s.g);
        s.d = calloc(K, sizeof *s.d);
        s.eta = calloc(N, sizeof *s.eta);
        s.V = calloc(K * K, sizeof *s.V);
        s.H = gsl_matrix_alloc(K, K);
        s.ncl = calloc(K, sizeof *s.ncl);
        if (!s.b || !s.bt || !s.g || !s.d || !s.eta || !s.V || !s.H || !s.ncl) goto nomem;
        if ((st = newton(&s, &R->converged, &R->iterations, err))) goto fail;
        if ((st = sandwich(&s, cl, &R->n_clusters, err))) goto fail;
        R->nobs_used = N;
        R->n_params = K;
        R->loglik = loglik(s.X, N, K, s.y, s.b, s.eta);
        R->deviance = -2 * R->loglik;
        double yb = ysum / (double)N;
        R->loglik_null = (double)N * (yb * log(yb) + (1 - yb) * log1p(-yb));
    } else {
        R->nobs_used = 0;
        R->loglik = R->deviance = R->loglik_null = NAN;
    }
    /* coefficients: the intercept, then every level other than the reference used */
    size_t nc = 1, nt = 0;
    for (size_t f = 0; f < n_factors; f++)
        if (F[f].nl >= 2) {
            nc += F[f].nl - 1;
            nt++;
        }
    R->coefs = calloc(nc, sizeof *R->coefs);
    R->terms = calloc(nt ? nt : 1, sizeof *R->terms);
    if (!R->coefs || !R->terms) goto nomem;
    R->n_coefs = nc;
    R->n_terms = nt;
    size_t *cols = malloc((K ? K : 1) * sizeof *cols);
    if (!cols) goto nomem;
    for (size_t c = 0, t = 0; c < nc;) {
        drift_logit_coef *C = &R->coefs[c];
        long col = -1;
        if (c == 0) {
            if (!(C->name = util_strdup("Intercept"))) goto nomem_cols;
            C->n_obs = (long)n;
            C->n_events = 0;
            for (size_t i = 0; i < n; i++) C->n_events += y[i];
            if (fit_ok) col = 0;
            else snprintf(C->why, sizeof C->why, "%s", N == 0 ? "no pairs left once the separated levels are out"
                                                              : ysum == 0 ? "no flips" : "every pair flips");
            c++;
        } else {
            factor *A = NULL;
            size_t seen = 0, f;
            for (f = 0; f < n_factors; f++)
                if (F[f].nl >= 2 && seen++ == t) {
                    A = &F[f];
                    break;
                }
            drift_logit_term *T = &R->terms[t];
            if (!(T->factor = util_strdup(A->name)) ||
                !(T->reference = util_strdup(A->lv[A->ref_asked].name)) ||
                !(T->reference_used = util_strdup(A->lv[A->ref].name)))
                goto nomem_cols;
            T->n_levels = A->nl;
            size_t k = 0;
            for (size_t l = 0; l < A->nl; l++) {
                if (l == A->ref) continue;
                level *L = &A->lv[l];
                drift_logit_coef *D = &R->coefs[c++];
                if (!(D->name = util_asprintf("C(%s)[T.%s]", A->name, L->name)) ||
                    !(D->factor = util_strdup(A->name)) || !(D->level = util_strdup(L->name)))
                    goto nomem_cols;
                D->n_obs = L->n_all;
                D->n_events = L->ev_all;
                snprintf(D->why, sizeof D->why, "%s", L->why);
                D->est = D->se = D->z = D->p = NAN;
                if (fit_ok && L->col >= 0 && !L->why[0] && s.ncl[L->col] < 2) {
                    /* the estimate's residuals sum to 0 within its only prompt: the
                     * prompt-clustered variance is 0 by construction, not information */
                    snprintf(D->why, sizeof D->why, "its pairs come from %zu prompt: too few for a prompt-clustered error",
                             s.ncl[L->col]);
                } else if (fit_ok && L->col >= 0 && !L->why[0]) {
                    D->estimable = 1;
                    D->est = s.b[L->col];
                    D->se = sqrt(s.V[(size_t)L->col * K + (size_t)L->col]);
                    D->z = D->est / D->se;
                    D->p = 2 * gsl_cdf_ugaussian_Q(fabs(D->z));
                    if (!R->converged && fabs(D->est) > ABSURD) {
                        D->estimable = 0;
                        D->est = D->se = D->z = D->p = NAN;
                        snprintf(D->why, sizeof D->why, "the fit did not converge and its estimate diverges "
                                                        "(separated by a combination of levels)");
                    } else if (!(D->se > 0 && isfinite(D->se))) {
                        D->estimable = 0;
                        D->est = D->se = D->z = D->p = NAN;
                        snprintf(D->why, sizeof D->why, "no usable prompt-clustered standard error");
                    } else cols[k++] = (size_t)L->col;
                }
            }
            T->n_estimated = k;
            T->chi2 = T->p = NAN;
            if (k) {
                double W;
                size_t J;
                if ((st = anl_wald(s.b, s.V, K, cols, k, &W, &J, err))) {
                    free(cols);
                    goto fail;
                }
                T->df = J;
                if (J > 0 && isfinite(W)) {
                    T->chi2 = W;
                    T->p = gsl_cdf_chisq_Q(W, (double)J);
                }
            }
            t++;
            continue;
        }
        C->est = C->se = C->z = C->p = NAN;
        if (col == 0) {
            C->estimable = 1;
            C->est = s.b[0];
            C->se = sqrt(s.V[0]);
            C->z = C->est / C->se;
            C->p = 2 * gsl_cdf_ugaussian_Q(fabs(C->z));
            if (!R->converged && fabs(C->est) > ABSURD) {
                C->estimable = 0;
                C->est = C->se = C->z = C->p = NAN;
                snprintf(C->why, sizeof C->why, "the fit did not converge and its estimate diverges");
            }
        }
    }
    free(cols);
    goto done;
nomem_cols:
    free(cols);
nomem:
    st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
fail:
    drift_logit_fit_free(R);
    R = NULL;
done:
    factors_free(F, n_factors);
    free(in);
    free(cl);
    free(s.X); free(s.y); free(s.b); free(s.bt); free(s.g); free(s.d); free(s.eta); free(s.V); free(s.ncl);
    if (s.H) gsl_matrix_free(s.H);
    if (!st) *out = R;
    return st;
}
