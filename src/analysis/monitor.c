/* monitor.c - Evidently-style embedding-drift detectors (monitor.h).
 *
 * Why: the paper's point is that distribution monitors do not see
 * infrastructure drift ("Evidently: zero alerts" while 3% of answers flip).
 * To show it on a user's own runs we run the detectors Evidently runs on
 * embeddings, with its defaults, over the baseline (reference) and target
 * (current) answers' embeddings.
 *
 * Sources: Evidently's embedding drift methods,
 * src/evidently/metrics/data_drift/embedding_drift_methods.py, the metric
 * src/evidently/metrics/data_drift/embeddings_drift.py, the stattest
 * src/evidently/calculations/stattests/wasserstein_distance_norm.py, and the
 * docs page "Embeddings drift parameters"
 * (docs.evidentlyai.com/user-guide/customization/embeddings-drift-parameters).
 * Nothing is copied; the definitions are re-implemented from their text:
 *
 * model (Evidently's default method). Reference rows get label 1, current
 *   rows label 0; a 50/50 train/test split; a logistic-regression classifier
 *   (Evidently: SGDClassifier(loss="log_loss"), L2 alpha 1e-4) is trained on
 *   one half; drift_score = ROC AUC of P(reference) on the other half.
 *   Drift when AUC > threshold (0.55), or, with bootstrap, when AUC > the
 *   0.95 quantile of the AUCs of 100 random classifiers (uniform scores) on
 *   the same test labels. EmbeddingsDriftMetric without an explicit method
 *   turns bootstrap on when the reference has fewer than 1000 rows (the docs:
 *   "default True if <= 1000 objects"); model_bootstrap = -1 does the same.
 *   Ours differs in the mechanics only: the split is stratified (each class
 *   halved; Evidently shuffles with random_state=42, not stratified),
 *   features are standardised with the training half's mean and std, and the
 *   classifier is full-batch gradient descent with the step 1/L (L = the
 *   Lipschitz constant of the mean log-loss gradient, from a power
 *   iteration), lr_epochs epochs, alpha 1e-4. All deterministic (opts->seed).
 * distance. dist(mean(reference), mean(current)): Euclidean (default) or
 *   cosine distance 1 - u.v/(|u||v|) (scipy's). Drift when > 0.2.
 * ratio. For every component j: W1(ref_j, cur_j) / max(std(ref_j), 0.001)
 *   (scipy.stats.wasserstein_distance; std with ddof 0, numpy's default); a
 *   component drifts when that is >= 0.1. Score = drifted / dim; drift when
 *   the share is > 0.2.
 * mmd. sigma^2 = (median of the Euclidean distances between reference rows
 *   and current rows)^2, on up to 1000 rows of each (Evidently samples with
 *   random_state=0; we sample without replacement with opts->seed); kernel
 *   k(u,v) = exp(-||u-v||^2 / sigma^2) on all rows; the unbiased MMD^2_u
 *   statistic; score = max(MMD^2_u, 0); drift when MMD^2_u > 0.015. If the
 *   median distance is 0 (most rows coincide) we use sigma^2 = 1 instead of
 *   dividing by zero. Evidently's bootstrap variants of distance and mmd are
 *   off by default and not implemented here.
 *
 * Cost: model O(epochs * n * dim); mmd O((m+n)^2 * dim); all in double. */
#include "driftbench/monitor.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/monitor_internal.h"
#include "driftbench/store.h"
#include "util/util.h"

#define MON_RANDOM_AUC_DRAWS 100
#define MON_MMD_SAMPLE 1000
#define MON_LR_ALPHA 1e-4

void drift_monitor_opts_default(drift_monitor_opts *o) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->model_threshold = 0.55;
    o->model_bootstrap = -1;
    o->model_quantile = 0.95;
    o->lr_epochs = 300;
    o->distance_cosine = 0;
    o->distance_threshold = 0.2;
    o->ratio_component_threshold = 0.1;
    o->ratio_threshold = 0.2;
    o->mmd_threshold = 0.015;
    o->seed = 42;
}

const char *drift_monitor_method_name(drift_monitor_method m) {
    switch (m) {
    case DRIFT_MON_MODEL: return "model";
    case DRIFT_MON_DISTANCE: return "distance";
    case DRIFT_MON_RATIO: return "ratio";
    case DRIFT_MON_MMD: return "mmd";
    default: return "unknown";
    }
}

/* ---- building blocks ---- */

typedef struct mon_scored {
    double s;
    int label;
} mon_scored;

static int mon_cmp_scored(const void *a, const void *b) {
    double x = ((const mon_scored *)a)->s, y = ((const mon_scored *)b)->s;
    return (x > y) - (x < y);
}

static int mon_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double anl_roc_auc(const double *score, const int *label, size_t n) {
    size_t npos = 0, nneg = 0;
    for (size_t i = 0; i < n; i++) {
        if (label[i]) npos++;
        else nneg++;
    }
    if (npos == 0 || nneg == 0) return NAN;
    mon_scored *v = malloc(n * sizeof *v);
    if (!v) return NAN;
    for (size_t i = 0; i < n; i++) {
        v[i].s = score[i];
        v[i].label = label[i] ? 1 : 0;
    }
    qsort(v, n, sizeof *v, mon_cmp_scored);
    /* Sum of the positives' ranks, ties given their average rank. */
    double rank_sum = 0;
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        while (j + 1 < n && v[j + 1].s == v[i].s) j++;
        double avg_rank = (double)(i + j) / 2.0 + 1.0; /* ranks are 1-based */
        for (size_t k = i; k <= j; k++)
            if (v[k].label) rank_sum += avg_rank;
        i = j + 1;
    }
    free(v);
    double u = rank_sum - (double)npos * (double)(npos + 1) / 2.0;
    return u / ((double)npos * (double)nneg);
}

/* a and b must be sorted ascending. Integral of |F_a(x) - F_b(x)| dx. */
static double mon_w1_sorted(const double *a, size_t na, const double *b, size_t nb) {
    size_t i = 0, j = 0;
    double prev = fmin(a[0], b[0]);
    double total = 0;
    while (i < na || j < nb) {
        double x;
        if (j >= nb || (i < na && a[i] <= b[j])) x = a[i];
        else x = b[j];
        double fa = (double)i / (double)na, fb = (double)j / (double)nb;
        total += fabs(fa - fb) * (x - prev);
        prev = x;
        while (i < na && a[i] == x) i++;
        while (j < nb && b[j] == x) j++;
    }
    return total;
}

double anl_wasserstein1(const double *a, size_t na, const double *b, size_t nb) {
    if (na == 0 || nb == 0) return NAN;
    double *sa = malloc(na * sizeof *sa), *sb = malloc(nb * sizeof *sb);
    if (!sa || !sb) {
        free(sa);
        free(sb);
        return NAN;
    }
    memcpy(sa, a, na * sizeof *sa);
    memcpy(sb, b, nb * sizeof *sb);
    qsort(sa, na, sizeof *sa, mon_cmp_double);
    qsort(sb, nb, sizeof *sb, mon_cmp_double);
    double w = mon_w1_sorted(sa, na, sb, nb);
    free(sa);
    free(sb);
    return w;
}

static double mon_sqdist(const float *u, const float *v, int dim) {
    double s = 0;
    for (int k = 0; k < dim; k++) {
        double d = (double)u[k] - (double)v[k];
        s += d * d;
    }
    return s;
}

double anl_mmd2u_rbf(const float *x, size_t m, const float *y, size_t n, int dim, double gamma) {
    if (m < 2 || n < 2 || dim < 1) return NAN;
    double kx = 0, ky = 0, kxy = 0;
    for (size_t i = 0; i < m; i++)
        for (size_t j = i + 1; j < m; j++)
            kx += exp(-gamma * mon_sqdist(x + i * (size_t)dim, x + j * (size_t)dim, dim));
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++)
            ky += exp(-gamma * mon_sqdist(y + i * (size_t)dim, y + j * (size_t)dim, dim));
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++)
            kxy += exp(-gamma * mon_sqdist(x + i * (size_t)dim, y + j * (size_t)dim, dim));
    double dm = (double)m, dn = (double)n;
    /* Off-diagonal sums counted once above; the statistic wants both halves. */
    return 2.0 * kx / (dm * (dm - 1.0)) + 2.0 * ky / (dn * (dn - 1.0)) - 2.0 * kxy / (dm * dn);
}

/* numpy.percentile with linear interpolation; v is sorted in place. */
static double mon_quantile(double *v, size_t n, double q) {
    qsort(v, n, sizeof *v, mon_cmp_double);
    double pos = q * (double)(n - 1);
    size_t lo = (size_t)floor(pos);
    if (lo + 1 >= n) return v[n - 1];
    double frac = pos - (double)lo;
    return v[lo] + frac * (v[lo + 1] - v[lo]);
}

static void mon_shuffle(size_t *idx, size_t n, util_rng *rng) {
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)util_rng_below(rng, i);
        size_t t = idx[i - 1];
        idx[i - 1] = idx[j];
        idx[j] = t;
    }
}

/* ---- model: domain classifier ---- */

typedef struct mon_rows {
    const float *ref, *cur;
    size_t n_ref;
    int dim;
} mon_rows;

/* Row r of the stacked data: reference rows first, then current rows. */
static const float *mon_row(const mon_rows *d, size_t r) {
    return r < d->n_ref ? d->ref + r * (size_t)d->dim : d->cur + (r - d->n_ref) * (size_t)d->dim;
}

static double mon_sigmoid(double z) {
    if (z >= 0) return 1.0 / (1.0 + exp(-z));
    double e = exp(z);
    return e / (1.0 + e);
}

static drift_status mon_model(const mon_rows *d, size_t n_cur, const drift_monitor_opts *o,
                              drift_monitor_report *rep, drift_error *err) {
    int dim = d->dim;
    size_t n_ref = d->n_ref, n = n_ref + n_cur;
    size_t *idx = malloc(n * sizeof *idx);
    unsigned char *is_train = calloc(n, 1);
    double *mean = calloc((size_t)dim, sizeof *mean), *sd = calloc((size_t)dim, sizeof *sd);
    double *w = calloc((size_t)dim, sizeof *w), *grad = calloc((size_t)dim, sizeof *grad);
    double *xs = malloc((size_t)dim * sizeof *xs), *vec = malloc((size_t)dim * sizeof *vec);
    double *tmp = malloc((size_t)dim * sizeof *tmp);
    double *test_score = malloc(n * sizeof *test_score);
    int *test_label = malloc(n * sizeof *test_label);
    double *rand_auc = malloc(MON_RANDOM_AUC_DRAWS * sizeof *rand_auc);
    double *rand_score = malloc(n * sizeof *rand_score);
    drift_status st = DRIFT_OK;
    if (!idx || !is_train || !mean || !sd || !w || !grad || !xs || !vec || !tmp || !test_score || !test_label ||
        !rand_auc || !rand_score) {
        st = drift_error_set(err, DRIFT_ERR_NOMEM, "monitor: out of memory for the domain classifier");
        goto done;
    }

    /* Stratified 50/50 split: each class shuffled and halved. */
    util_rng rng;
    util_rng_seed(&rng, o->seed);
    for (size_t i = 0; i < n; i++) idx[i] = i;
    mon_shuffle(idx, n_ref, &rng);
    mon_shuffle(idx + n_ref, n_cur, &rng);
    size_t tr_ref = n_ref / 2, tr_cur = n_cur / 2;
    for (size_t i = 0; i < tr_ref; i++) is_train[idx[i]] = 1;
    for (size_t i = 0; i < tr_cur; i++) is_train[idx[n_ref + i]] = 1;
    size_t n_train = tr_ref + tr_cur;

    /* Standardise with the training half's statistics. */
    for (size_t r = 0; r < n; r++) {
        if (!is_train[r]) continue;
        const float *x = mon_row(d, r);
        for (int k = 0; k < dim; k++) mean[k] += x[k];
    }
    for (int k = 0; k < dim; k++) mean[k] /= (double)n_train;
    for (size_t r = 0; r < n; r++) {
        if (!is_train[r]) continue;
        const float *x = mon_row(d, r);
        for (int k = 0; k < dim; k++) sd[k] += (x[k] - mean[k]) * (x[k] - mean[k]);
    }
    for (int k = 0; k < dim; k++) {
        sd[k] = sqrt(sd[k] / (double)n_train);
        if (!(sd[k] > 1e-12)) sd[k] = 1.0; /* a constant feature stays 0 after centring */
    }

    /* Lipschitz constant of the mean log-loss gradient: 0.25 * lambda_max of
     * [X 1]^T [X 1] / n, by power iteration on (w, b). */
    double lam = 1.0;
    {
        double vb = 1.0;
        for (int k = 0; k < dim; k++) vec[k] = 1.0;
        for (int it = 0; it < 30; it++) {
            memset(tmp, 0, (size_t)dim * sizeof *tmp);
            double tb = 0;
            for (size_t r = 0; r < n; r++) {
                if (!is_train[r]) continue;
                const float *x = mon_row(d, r);
                double z = vb;
                for (int k = 0; k < dim; k++) {
                    xs[k] = (x[k] - mean[k]) / sd[k];
                    z += xs[k] * vec[k];
                }
                for (int k = 0; k < dim; k++) tmp[k] += z * xs[k];
                tb += z;
            }
            double norm = tb * tb;
            for (int k = 0; k < dim; k++) norm += tmp[k] * tmp[k];
            norm = sqrt(norm);
            if (!(norm > 0)) break;
            lam = norm / (double)n_train;
            for (int k = 0; k < dim; k++) vec[k] = tmp[k] / norm;
            vb = tb / norm;
        }
    }
    double step = 1.0 / (0.25 * lam * 1.05 + MON_LR_ALPHA);

    /* Full-batch gradient descent on mean log-loss + alpha/2 |w|^2. */
    double b = 0;
    for (int ep = 0; ep < o->lr_epochs; ep++) {
        memset(grad, 0, (size_t)dim * sizeof *grad);
        double gb = 0;
        for (size_t r = 0; r < n; r++) {
            if (!is_train[r]) continue;
            const float *x = mon_row(d, r);
            double z = b;
            for (int k = 0; k < dim; k++) {
                xs[k] = (x[k] - mean[k]) / sd[k];
                z += xs[k] * w[k];
            }
            double g = mon_sigmoid(z) - (r < n_ref ? 1.0 : 0.0);
            for (int k = 0; k < dim; k++) grad[k] += g * xs[k];
            gb += g;
        }
        for (int k = 0; k < dim; k++) w[k] -= step * (grad[k] / (double)n_train + MON_LR_ALPHA * w[k]);
        b -= step * gb / (double)n_train;
    }

    /* ROC AUC of P(reference) on the held-out half. */
    size_t n_test = 0;
    for (size_t r = 0; r < n; r++) {
        if (is_train[r]) continue;
        const float *x = mon_row(d, r);
        double z = b;
        for (int k = 0; k < dim; k++) z += (x[k] - mean[k]) / sd[k] * w[k];
        test_score[n_test] = mon_sigmoid(z);
        test_label[n_test] = r < n_ref ? 1 : 0;
        n_test++;
    }
    double auc = anl_roc_auc(test_score, test_label, n_test);

    /* Random classifiers on the same labels (Evidently's bootstrap reference). */
    for (int i = 0; i < MON_RANDOM_AUC_DRAWS; i++) {
        util_rng rr;
        util_rng_seed(&rr, o->seed + 1000u + (uint64_t)i);
        for (size_t t = 0; t < n_test; t++) rand_score[t] = util_rng_uniform(&rr);
        rand_auc[i] = anl_roc_auc(rand_score, test_label, n_test);
    }
    rep->model_random_auc_q = mon_quantile(rand_auc, MON_RANDOM_AUC_DRAWS, o->model_quantile);

    int bootstrap = o->model_bootstrap < 0 ? (n_ref < 1000) : o->model_bootstrap != 0;
    drift_monitor_result *res = &rep->r[DRIFT_MON_MODEL];
    res->method = DRIFT_MON_MODEL;
    res->score = auc;
    if (bootstrap) {
        res->threshold = rep->model_random_auc_q;
        snprintf(res->rule, sizeof res->rule, "ROC AUC > %.4g (random-classifier q%.0f; bootstrap)",
                 res->threshold, o->model_quantile * 100.0);
    } else {
        res->threshold = o->model_threshold;
        snprintf(res->rule, sizeof res->rule, "ROC AUC > %.4g", res->threshold);
    }
    res->drift = auc > res->threshold;

done:
    free(idx);
    free(is_train);
    free(mean);
    free(sd);
    free(w);
    free(grad);
    free(xs);
    free(vec);
    free(tmp);
    free(test_score);
    free(test_label);
    free(rand_auc);
    free(rand_score);
    return st;
}

/* ---- distance between means ---- */

static void mon_distance(const float *ref, size_t n_ref, const float *cur, size_t n_cur, int dim,
                         const drift_monitor_opts *o, double *mr, double *mc, drift_monitor_report *rep) {
    for (int k = 0; k < dim; k++) mr[k] = mc[k] = 0;
    for (size_t i = 0; i < n_ref; i++)
        for (int k = 0; k < dim; k++) mr[k] += ref[i * (size_t)dim + k];
    for (size_t i = 0; i < n_cur; i++)
        for (int k = 0; k < dim; k++) mc[k] += cur[i * (size_t)dim + k];
    double dd = 0, uv = 0, uu = 0, vv = 0;
    for (int k = 0; k < dim; k++) {
        mr[k] /= (double)n_ref;
        mc[k] /= (double)n_cur;
        dd += (mr[k] - mc[k]) * (mr[k] - mc[k]);
        uv += mr[k] * mc[k];
        uu += mr[k] * mr[k];
        vv += mc[k] * mc[k];
    }
    drift_monitor_result *res = &rep->r[DRIFT_MON_DISTANCE];
    res->method = DRIFT_MON_DISTANCE;
    res->threshold = o->distance_threshold;
    if (o->distance_cosine) {
        res->score = (uu > 0 && vv > 0) ? 1.0 - uv / (sqrt(uu) * sqrt(vv)) : NAN;
        snprintf(res->rule, sizeof res->rule, "cosine distance of mean embeddings > %.4g", res->threshold);
    } else {
        res->score = sqrt(dd);
        snprintf(res->rule, sizeof res->rule, "Euclidean distance of mean embeddings > %.4g", res->threshold);
    }
    res->drift = res->score > res->threshold;
}

/* ---- share of drifted components ---- */

static void mon_ratio(const float *ref, size_t n_ref, const float *cur, size_t n_cur, int dim,
                      const drift_monitor_opts *o, double *ca, double *cb, drift_monitor_report *rep) {
    size_t drifted = 0;
    for (int k = 0; k < dim; k++) {
        double mean = 0, var = 0;
        for (size_t i = 0; i < n_ref; i++) {
            ca[i] = ref[i * (size_t)dim + k];
            mean += ca[i];
        }
        mean /= (double)n_ref;
        for (size_t i = 0; i < n_ref; i++) var += (ca[i] - mean) * (ca[i] - mean);
        double sd = sqrt(var / (double)n_ref);
        for (size_t i = 0; i < n_cur; i++) cb[i] = cur[i * (size_t)dim + k];
        qsort(ca, n_ref, sizeof *ca, mon_cmp_double);
        qsort(cb, n_cur, sizeof *cb, mon_cmp_double);
        double wd = mon_w1_sorted(ca, n_ref, cb, n_cur) / fmax(sd, 0.001);
        if (wd >= o->ratio_component_threshold) drifted++;
    }
    drift_monitor_result *res = &rep->r[DRIFT_MON_RATIO];
    res->method = DRIFT_MON_RATIO;
    res->score = (double)drifted / (double)dim;
    res->threshold = o->ratio_threshold;
    res->drift = res->score > res->threshold;
    rep->ratio_drifted = drifted;
    snprintf(res->rule, sizeof res->rule, "share of components with normed Wasserstein >= %.4g is > %.4g",
             o->ratio_component_threshold, res->threshold);
}

/* ---- MMD ---- */

static drift_status mon_mmd(const float *ref, size_t n_ref, const float *cur, size_t n_cur, int dim,
                            const drift_monitor_opts *o, drift_monitor_report *rep, drift_error *err) {
    size_t sm = n_ref < MON_MMD_SAMPLE ? n_ref : MON_MMD_SAMPLE;
    size_t sn = n_cur < MON_MMD_SAMPLE ? n_cur : MON_MMD_SAMPLE;
    size_t *ia = malloc(n_ref * sizeof *ia), *ib = malloc(n_cur * sizeof *ib);
    double *dist = malloc(sm * sn * sizeof *dist);
    if (!ia || !ib || !dist) {
        free(ia);
        free(ib);
        free(dist);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "monitor: out of memory for MMD");
    }
    for (size_t i = 0; i < n_ref; i++) ia[i] = i;
    for (size_t i = 0; i < n_cur; i++) ib[i] = i;
    util_rng rng;
    util_rng_seed(&rng, o->seed + 7u);
    if (sm < n_ref) mon_shuffle(ia, n_ref, &rng);
    if (sn < n_cur) mon_shuffle(ib, n_cur, &rng);
    for (size_t i = 0; i < sm; i++)
        for (size_t j = 0; j < sn; j++)
            dist[i * sn + j] = sqrt(mon_sqdist(ref + ia[i] * (size_t)dim, cur + ib[j] * (size_t)dim, dim));
    double med = mon_quantile(dist, sm * sn, 0.5);
    free(ia);
    free(ib);
    free(dist);
    double sigma2 = med * med;
    if (!(sigma2 > 0)) sigma2 = 1.0;
    rep->mmd_sigma2 = sigma2;
    double mmd = anl_mmd2u_rbf(ref, n_ref, cur, n_cur, dim, 1.0 / sigma2);
    drift_monitor_result *res = &rep->r[DRIFT_MON_MMD];
    res->method = DRIFT_MON_MMD;
    res->score = mmd > 0 ? mmd : 0.0;
    res->threshold = o->mmd_threshold;
    res->drift = mmd > res->threshold;
    snprintf(res->rule, sizeof res->rule, "MMD^2 (RBF, median-distance bandwidth) > %.4g", res->threshold);
    return DRIFT_OK;
}

drift_status drift_monitor_run(const float *ref, size_t n_ref, const float *cur, size_t n_cur, int dim,
                               const drift_monitor_opts *opts, drift_monitor_report *out, drift_error *err) {
    if (!out) return drift_error_set(err, DRIFT_ERR_INVALID, "monitor: no report to fill");
    memset(out, 0, sizeof *out);
    if (!ref || !cur || dim < 1)
        return drift_error_set(err, DRIFT_ERR_INVALID, "monitor: no embeddings (dim %d)", dim);
    if (n_ref < 2 || n_cur < 2)
        return drift_error_set(err, DRIFT_ERR_INVALID,
                               "monitor: need at least 2 embeddings on each side (reference %zu, current %zu)",
                               n_ref, n_cur);
    for (size_t i = 0; i < n_ref * (size_t)dim; i++)
        if (!isfinite(ref[i]))
            return drift_error_set(err, DRIFT_ERR_NUMERIC, "monitor: reference row %zu component %zu is not finite",
                                   i / (size_t)dim, i % (size_t)dim);
    for (size_t i = 0; i < n_cur * (size_t)dim; i++)
        if (!isfinite(cur[i]))
            return drift_error_set(err, DRIFT_ERR_NUMERIC, "monitor: current row %zu component %zu is not finite",
                                   i / (size_t)dim, i % (size_t)dim);
    drift_monitor_opts def;
    if (!opts) {
        drift_monitor_opts_default(&def);
        opts = &def;
    }
    out->n_ref = n_ref;
    out->n_cur = n_cur;
    out->dim = dim;

    mon_rows rows = {ref, cur, n_ref, dim};
    drift_status st = mon_model(&rows, n_cur, opts, out, err);
    if (st != DRIFT_OK) return st;

    size_t big = n_ref > n_cur ? n_ref : n_cur;
    size_t nbuf = big > (size_t)dim ? big : (size_t)dim;
    double *b1 = malloc(nbuf * sizeof *b1), *b2 = malloc(nbuf * sizeof *b2);
    if (!b1 || !b2) {
        free(b1);
        free(b2);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "monitor: out of memory");
    }
    mon_distance(ref, n_ref, cur, n_cur, dim, opts, b1, b2, out);
    mon_ratio(ref, n_ref, cur, n_cur, dim, opts, b1, b2, out);
    free(b1);
    free(b2);

    st = mon_mmd(ref, n_ref, cur, n_cur, dim, opts, out, err);
    if (st != DRIFT_OK) return st;
    for (int m = 0; m < DRIFT_MON_COUNT; m++) out->alarms += out->r[m].drift ? 1 : 0;
    return DRIFT_OK;
}

/* ---- loading two runs' embeddings from the store ---- */

void drift_monitor_data_clear(drift_monitor_data *d) {
    if (!d) return;
    free(d->ref);
    free(d->cur);
    memset(d, 0, sizeof *d);
}

/* The embedder with the most vectors over the two runs' responses. */
static drift_status mon_pick_embedder(drift_store *st, int64_t run_a, int64_t run_b, char *out, size_t cap,
                                      drift_error *err) {
    drift_status rc = drift_store_top_embedder(st, run_a, run_b, out, cap, err);
    if (rc) drift_error_prefix(err, "monitor: cannot list embedders: ");
    return rc;
}

/* Appends the embeddings of run_id's answered responses to *vecs. */
static drift_status mon_load_run(drift_store *st, int64_t run_id, const char *embedder, float **vecs, size_t *n,
                                 int *dim, size_t *answered, drift_error *err) {
    drift_scored_set set = {0};
    drift_status s = drift_store_load_scored(st, run_id, &set, err);
    if (s != DRIFT_OK) return s;
    size_t cap = 0;
    *n = 0;
    *answered = 0;
    for (size_t i = 0; i < set.n && s == DRIFT_OK; i++) {
        if (set.rows[i].is_error) continue;
        (*answered)++;
        float *v = NULL;
        int d = 0;
        drift_error e2 = {0};
        drift_status g = drift_store_get_embedding(st, set.rows[i].response_id, embedder, &v, &d, &e2);
        if (g == DRIFT_ERR_NOT_FOUND) continue;
        if (g != DRIFT_OK) {
            if (err) *err = e2;
            s = g;
            break;
        }
        if (*dim == 0) *dim = d;
        if (d != *dim) {
            free(v);
            s = drift_error_set(err, DRIFT_ERR_MISMATCH,
                                "monitor: embedding of response %lld has %d dimensions, others have %d",
                                (long long)set.rows[i].response_id, d, *dim);
            break;
        }
        if (*n == cap) {
            size_t nc = cap ? cap * 2 : 64;
            float *nv = realloc(*vecs, nc * (size_t)d * sizeof *nv);
            if (!nv) {
                free(v);
                s = drift_error_set(err, DRIFT_ERR_NOMEM, "monitor: out of memory loading embeddings");
                break;
            }
            *vecs = nv;
            cap = nc;
        }
        memcpy(*vecs + *n * (size_t)d, v, (size_t)d * sizeof *v);
        (*n)++;
        free(v);
    }
    drift_scored_set_clear(&set);
    return s;
}

drift_status drift_monitor_load(drift_store *st, const char *baseline, const char *target, const char *embedder,
                                drift_monitor_data *out, drift_error *err) {
    if (!out) return drift_error_set(err, DRIFT_ERR_INVALID, "monitor: nothing to fill");
    memset(out, 0, sizeof *out);
    if (!st || !baseline || !target)
        return drift_error_set(err, DRIFT_ERR_INVALID, "monitor: need a store, a baseline and a target label");
    drift_run_info a = {0}, b = {0};
    drift_status s = drift_store_run_get(st, baseline, &a, err);
    if (s != DRIFT_OK) return s;
    s = drift_store_run_get(st, target, &b, err);
    if (s != DRIFT_OK) {
        drift_run_info_clear(&a);
        return s;
    }
    if (embedder && *embedder) snprintf(out->embedder, sizeof out->embedder, "%s", embedder);
    else s = mon_pick_embedder(st, a.id, b.id, out->embedder, sizeof out->embedder, err);
    if (s == DRIFT_OK && !out->embedder[0])
        s = drift_error_set(err, DRIFT_ERR_NOT_FOUND,
                            "no embeddings stored for runs '%s' and '%s'; run `driftbench score --embedder SPEC` "
                            "on both first",
                            baseline, target);
    if (s == DRIFT_OK)
        s = mon_load_run(st, a.id, out->embedder, &out->ref, &out->n_ref, &out->dim, &out->answered_ref, err);
    if (s == DRIFT_OK)
        s = mon_load_run(st, b.id, out->embedder, &out->cur, &out->n_cur, &out->dim, &out->answered_cur, err);
    if (s == DRIFT_OK && (out->n_ref == 0 || out->n_cur == 0))
        s = drift_error_set(err, DRIFT_ERR_NOT_FOUND,
                            "embeddings by '%s': baseline '%s' has %zu for %zu answers, target '%s' has %zu for %zu "
                            "answers; run `driftbench score --embedder SPEC` on both first",
                            out->embedder, baseline, out->n_ref, out->answered_ref, target, out->n_cur,
                            out->answered_cur);
    drift_run_info_clear(&a);
    drift_run_info_clear(&b);
    if (s != DRIFT_OK) drift_monitor_data_clear(out);
    return s;
}
