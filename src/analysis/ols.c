/* ols.c - least squares for ANOVA and the linear PRI baseline.
 *
 * Two solvers, because statsmodels uses two and we reproduce it:
 *  - anl_qr_sequential: Householder QR in column order. Q'y splits the model
 *    sum of squares column by column ("effects"), which is exactly the
 *    sequential (Type I) decomposition. A column that the earlier columns
 *    already span gets no reflection and no effect, so a rank-deficient
 *    design gives each term its true rank increase as df.
 *  - anl_pinv_fit: minimum-norm solution through the SVD (one-sided Jacobi,
 *    GSL), the covariance pinv(X'X), used for the Wald tests of Type III.
 * Tolerances follow numpy: rank counts singular values above
 * s_max * max(n, p) * DBL_EPSILON, and pinv drops the singular values below
 * that (statsmodels: 1e-15 * s_max; see anl_pinv_fit). */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_matrix.h>
#include <gsl/gsl_vector.h>

#include "analysis/analysis_internal.h"

drift_status anl_qr_sequential(const double *X, size_t n, size_t p, const double *y, int *indep,
                               double *eff2, size_t *rank, double *ssr, drift_error *err) {
    double *A = malloc((n * p + n + 1) * sizeof *A);
    if (!A) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    double *z = A + n * p;            /* (n,) transformed y */
    memcpy(A, X, n * p * sizeof *A);
    memcpy(z, y, n * sizeof *z);
    size_t r = 0;                     /* reflections applied = rank so far */
    for (size_t j = 0; j < p; j++) {
        double *a = A + j * n;
        double norm0 = 0, tail = 0;
        for (size_t i = 0; i < n; i++) norm0 += X[j * n + i] * X[j * n + i];
        for (size_t i = r; i < n; i++) tail += a[i] * a[i];
        norm0 = sqrt(norm0);
        tail = sqrt(tail);
        if (r >= n || norm0 == 0 || tail <= 1e-9 * norm0) {
            if (indep) indep[j] = 0;
            if (eff2) eff2[j] = 0;
            continue;
        }
        /* Householder v = a[r..] - beta e_r, beta = -sign(a_r) * tail (LAPACK's sign) */
        double alpha = a[r];
        double beta = alpha >= 0 ? -tail : tail;
        double v0 = alpha - beta;
        /* H = I - 2 v v' / (v'v); v = (v0, a[r+1..]); v'v = v0^2 + tail^2 - alpha^2 */
        double vtv = v0 * v0 + tail * tail - alpha * alpha;
        /* apply to the remaining columns and to z */
        for (size_t k = j + 1; k <= p; k++) {
            double *c = k < p ? A + k * n : z;
            double d = v0 * c[r];
            for (size_t i = r + 1; i < n; i++) d += a[i] * c[i];
            double s = 2 * d / vtv;
            c[r] -= s * v0;
            for (size_t i = r + 1; i < n; i++) c[i] -= s * a[i];
        }
        a[r] = beta;
        for (size_t i = r + 1; i < n; i++) a[i] = 0;
        if (indep) indep[j] = 1;
        if (eff2) eff2[j] = z[r] * z[r];
        r++;
    }
    double res = 0;
    for (size_t i = r; i < n; i++) res += z[i] * z[i];
    if (rank) *rank = r;
    if (ssr) *ssr = res;
    free(A);
    return DRIFT_OK;
}

/* SVD of a (rows, cols) column-major matrix padded to rows >= cols.
 * Fills U (m, p) as gsl, V (p, p), S (p). */
static drift_status svd(const double *X, size_t n, size_t p, gsl_matrix **U, gsl_matrix **V,
                        gsl_vector **S, drift_error *err) {
    size_t m = n > p ? n : p;
    *U = gsl_matrix_calloc(m, p);
    *V = gsl_matrix_alloc(p, p);
    *S = gsl_vector_alloc(p);
    if (!*U || !*V || !*S) {
        gsl_matrix_free(*U); gsl_matrix_free(*V); gsl_vector_free(*S);
        *U = *V = NULL; *S = NULL;
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    for (size_t j = 0; j < p; j++)
        for (size_t i = 0; i < n; i++) gsl_matrix_set(*U, i, j, X[j * n + i]);
    gsl_error_handler_t *old = gsl_set_error_handler_off();
    int rc = gsl_linalg_SV_decomp_jacobi(*U, *V, *S);
    gsl_set_error_handler(old);
    if (rc) {
        gsl_matrix_free(*U); gsl_matrix_free(*V); gsl_vector_free(*S);
        *U = *V = NULL; *S = NULL;
        return drift_error_set(err, DRIFT_ERR_NUMERIC, "SVD failed: %s", gsl_strerror(rc));
    }
    return DRIFT_OK;
}

drift_status anl_pinv_fit(const double *X, size_t n, size_t p, const double *y, double *beta,
                          double *covu, size_t *rank, drift_error *err) {
    gsl_matrix *U, *V;
    gsl_vector *S;
    drift_status st = svd(X, n, p, &U, &V, &S, err);
    if (st) return st;
    size_t m = n > p ? n : p;
    double smax = 0;
    for (size_t k = 0; k < p; k++) smax = fmax(smax, gsl_vector_get(S, k));
    double tol_rank = smax * (double)m * DBL_EPSILON;
    /* statsmodels cuts pinv at 1e-15 * s_max; a design with exact linear
     * dependencies (full one-hot + intercept) then inverts singular values
     * that are rounding noise (~1e-15 s_max) and the coefficients explode.
     * Cutting at the rank tolerance drops exactly those; where statsmodels is
     * stable (no singular values between the two cut-offs) nothing changes. */
    double tol_pinv = tol_rank;
    size_t rk = 0;
    double *inv = malloc(p * sizeof *inv);  /* 1/s or 0 */
    double *uty = malloc(p * sizeof *uty);
    if (!inv || !uty) {
        free(inv); free(uty);
        gsl_matrix_free(U); gsl_matrix_free(V); gsl_vector_free(S);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    for (size_t k = 0; k < p; k++) {
        double s = gsl_vector_get(S, k);
        if (s > tol_rank) rk++;
        inv[k] = s > tol_pinv ? 1.0 / s : 0.0;
        double d = 0;
        for (size_t i = 0; i < n; i++) d += gsl_matrix_get(U, i, k) * y[i];
        uty[k] = d * inv[k];
    }
    for (size_t j = 0; j < p; j++) {
        double b = 0;
        for (size_t k = 0; k < p; k++) b += gsl_matrix_get(V, j, k) * uty[k];
        beta[j] = b;
    }
    if (covu)
        for (size_t a = 0; a < p; a++)
            for (size_t b = 0; b < p; b++) {
                double c = 0;
                for (size_t k = 0; k < p; k++)
                    c += gsl_matrix_get(V, a, k) * inv[k] * inv[k] * gsl_matrix_get(V, b, k);
                covu[b * p + a] = c;
            }
    if (rank) *rank = rk;
    free(inv);
    free(uty);
    gsl_matrix_free(U);
    gsl_matrix_free(V);
    gsl_vector_free(S);
    return DRIFT_OK;
}

drift_status anl_wald(const double *beta, const double *cov, size_t p, const size_t *cols, size_t k,
                      double *W, size_t *J, drift_error *err) {
    *W = NAN;
    *J = 0;
    if (k == 0) return DRIFT_OK;
    double *C = malloc(k * k * sizeof *C);
    double *b = malloc(k * sizeof *b);
    if (!C || !b) {
        free(C); free(b);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    for (size_t a = 0; a < k; a++) {
        b[a] = beta[cols[a]];
        for (size_t c = 0; c < k; c++) C[c * k + a] = cov[cols[c] * p + cols[a]];
    }
    gsl_matrix *U, *V;
    gsl_vector *S;
    drift_status st = svd(C, k, k, &U, &V, &S, err);
    free(C);
    if (st) { free(b); return st; }
    double smax = 0;
    for (size_t i = 0; i < k; i++) smax = fmax(smax, gsl_vector_get(S, i));
    size_t rk = 0;
    double w = 0;
    /* pinv(C) = V diag(1/s) U'; W = (U'b)' diag(1/s) (V'b) */
    for (size_t i = 0; i < k; i++) {
        double s = gsl_vector_get(S, i);
        if (s > smax * (double)k * DBL_EPSILON) rk++;
        if (!(s > smax * (double)k * DBL_EPSILON)) continue;
        double ub = 0, vb = 0;
        for (size_t a = 0; a < k; a++) {
            ub += gsl_matrix_get(U, a, i) * b[a];
            vb += gsl_matrix_get(V, a, i) * b[a];
        }
        w += ub * vb / s;
    }
    gsl_matrix_free(U);
    gsl_matrix_free(V);
    gsl_vector_free(S);
    free(b);
    *W = w;
    *J = rk;
    return DRIFT_OK;
}
