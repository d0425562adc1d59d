/* pri_eval.c - how well the PRI predicts flip rates it has not seen
 * (drift_pri_evaluate), and the tuned fits that drift_pri_fit shares.
 *
 * Every evaluation is a tuned fit on some rows scored on the others:
 * random 80/20 split, 5-fold CV, held-out level of every dimension (the
 * paper's four marked beside its figures), ablations (no interactions,
 * hardware one-hot only, OLS on the one-hots), and gain importance of a
 * model on all rows. Tuning never sees the scored rows: hyper-parameters
 * are chosen by k-fold CV inside each fit's own training rows (max_depth 3
 * or 5 at eta 0.3, the number of trees by early stopping on the inner
 * folds); --no-tune uses fixed defaults.
 *
 * The fits are independent pri_jobs, run side by side with OpenMP
 * (o->nthread at a time), every booster and matrix on one thread, so the
 * results do not depend on the thread count. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/analysis_internal.h"
#include "analysis/pri_internal.h"
#include "util/util.h"

/* --no-tune: fixed (the values python3-xgboost is checked against) */
static const pri_hparams default_hp = {4, 0.1, 1, 200};

/* ------------------------------------------------------------- one fit */

double drift_r2(const double *y, const double *pred, size_t n) {
    if (n < 2) return NAN;
    double m = 0, sst = 0, sse = 0;
    for (size_t i = 0; i < n; i++) m += y[i];
    m /= (double)n;
    for (size_t i = 0; i < n; i++) {
        sst += (y[i] - m) * (y[i] - m);
        sse += (y[i] - pred[i]) * (y[i] - pred[i]);
    }
    return sst > 0 ? 1.0 - sse / sst : NAN;
}

/* Xo (n, p), yo (n): rows `rows` of ds, malloc'd. */
static drift_status gather(const pri_dset *ds, const size_t *rows, size_t n, float **Xo, float **yo, drift_error *err) {
    *Xo = malloc((n * ds->p + 1) * sizeof **Xo);
    *yo = malloc((n + 1) * sizeof **yo);
    if (!*Xo || !*yo) {
        free(*Xo); free(*yo);
        *Xo = *yo = NULL;
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        memcpy(*Xo + i * ds->p, ds->X + rows[i] * ds->p, ds->p * sizeof **Xo);
        (*yo)[i] = ds->y[rows[i]];
    }
    return DRIFT_OK;
}

void pri_shuffle(size_t *v, size_t n, unsigned seed) {
    util_rng r;
    util_rng_seed(&r, seed);
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)util_rng_below(&r, i);
        size_t t = v[i - 1]; v[i - 1] = v[j]; v[j] = t;
    }
}

/* See pri_internal.h. */
int pri_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* numpy's default (linear) quantile of sorted v */
double pri_quantile_sorted(const double *v, size_t n, double q) {
    if (n == 0) return NAN;
    double h = (double)(n - 1) * q;
    size_t i = (size_t)floor(h);
    if (i + 1 >= n) return v[n - 1];
    return v[i] + (h - (double)i) * (v[i + 1] - v[i]);
}

/* Trains on rows tr and predicts rows te with the given parameters. */
static drift_status fit_predict(const pri_dset *ds, const size_t *tr, size_t ntr, const size_t *te, size_t nte,
                                const pri_hparams *hp, const drift_pri_options *o, double *pred_te,
                                double *pred_tr, drift_error *err) {
    float *Xtr = NULL, *ytr = NULL, *Xte = NULL, *yte = NULL;
    pri_booster *b = NULL;
    drift_status st = gather(ds, tr, ntr, &Xtr, &ytr, err);
    if (!st) st = gather(ds, te, nte, &Xte, &yte, err);
    if (!st) st = pri_xgb_train(Xtr, ytr, ntr, ds->p, hp, o->seed, 1, &b, err);
    if (!st && nte) st = pri_xgb_predict(b, Xte, nte, ds->p, hp->rounds, pred_te, err);
    if (!st && pred_tr) st = pri_xgb_predict(b, Xtr, ntr, ds->p, hp->rounds, pred_tr, err);
    pri_xgb_free(b);
    free(Xtr); free(ytr); free(Xte); free(yte);
    return st;
}

/* -------------------------------------------------------------- tuning */

/* The tuning grid: a shallow and a deep tree at xgboost's default learning
 * rate. The number of trees is not on it: each configuration is grown on
 * the k inner folds side by side, one tree at a time, and the validation
 * error summed over the folds after every tree picks the count (early
 * stopping: stop once PATIENCE trees in a row have not lowered it by
 * MIN_GAIN of its value; at most MAX_ROUNDS). xgboost's cost is per tree
 * node, not per row, so the grid stays small and the tree count is found
 * once per configuration rather than tried value by value. */
static const pri_hparams grid[] = {{3, 0.3, 1, 0}, {5, 0.3, 1, 0}};
#define N_GRID (sizeof grid / sizeof grid[0])
#define MAX_ROUNDS 300
#define PATIENCE 10
#define MIN_GAIN 0.003
#define MAX_FOLDS 200   /* repeats x folds: at most 10 x 20 */

/* one inner fold: its matrices, built once and shared by the whole grid */
typedef struct ifold {
    pri_dmatrix *dtr, *dva;
    float *yva;    /* (nva,) validation labels */
    size_t nva;
} ifold;

/* Grows hp (its rounds ignored) on the k folds in lockstep; *best_sse: the
 * validation SSE summed over the folds at the best tree count *best_rounds.
 * pred: scratch of the largest nva. */
static drift_status cv_curve(const ifold *fo, int k, const pri_hparams *hp, unsigned seed, double *pred,
                             double *best_sse, int *best_rounds, drift_error *err) {
    drift_status st = DRIFT_OK;
    *best_sse = INFINITY;
    *best_rounds = 0;
    pri_booster **b = calloc((size_t)k + 1, sizeof *b);
    if (!b) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    double best = INFINITY;
    int br = 0, last_gain = 0;
    for (int f = 0; f < k && !st; f++) {
        pri_dmatrix *cache[2] = {fo[f].dtr, fo[f].dva};
        st = pri_xgb_create(cache, 2, hp, seed, 1, &b[f], err);
    }
    for (int r = 0; r < MAX_ROUNDS && !st; r++) {
        double s = 0;
        for (int f = 0; f < k; f++) {
            if ((st = pri_xgb_update_one_iter(b[f], r, fo[f].dtr, err))) goto done;
            /* all trees: xgboost adds the newest to its cached predictions */
            if ((st = pri_xgb_predict_dm(b[f], fo[f].dva, fo[f].nva, 0, pred, err))) goto done;
            for (size_t i = 0; i < fo[f].nva; i++) s += (pred[i] - fo[f].yva[i]) * (pred[i] - fo[f].yva[i]);
        }
        if (s < best) {
            if (s < best * (1 - MIN_GAIN)) last_gain = r + 1;
            best = s;
            br = r + 1;
        }
        if (r + 1 - last_gain >= PATIENCE) break;
    }
done:
    for (int f = 0; f < k; f++) pri_xgb_free(b[f]);
    free(b);
    *best_sse = best;
    *best_rounds = br;
    return st;
}

/* Chooses hyper-parameters by repeated k-fold CV inside rows tr (never
 * looks at other rows): o->cv_repeats shuffles of the rows, each cut into
 * k folds, every grid point grown on all repeats x k folds in lockstep and
 * scored by the validation error summed over them. One k-fold split is one
 * random draw of which rows validate which, and on a few hundred noisy rows
 * that draw decided between a single tree and dozens (issue 36); summing
 * over repeats averages the draw out. Repeat r shuffles with seed + 7919 +
 * 104729 r, so a fixed seed gives the same choice (one repeat is the old
 * single split). With group (a group id per row of the data set, e.g. the
 * level of the dimension being held out) the inner folds hold out whole
 * groups, so the choice is made for the same kind of extrapolation the
 * outer split measures; without, the folds are random. Small training sets
 * keep the defaults. */
static drift_status tune_grouped(const pri_dset *ds, const size_t *tr, size_t ntr, const int *group,
                                 const drift_pri_options *o, pri_hparams *best, drift_error *err) {
    *best = default_hp;
    int k0 = o->cv_folds < 2 ? 2 : o->cv_folds > 20 ? 20 : o->cv_folds;
    int reps = o->cv_repeats < 1 ? 1 : o->cv_repeats > 10 ? 10 : o->cv_repeats;
    if (!o->tune || ntr < (size_t)(5 * k0)) return DRIFT_OK;
    ifold *fo = calloc(MAX_FOLDS, sizeof *fo);
    int nfo = 0;
    size_t *perm = malloc(ntr * sizeof *perm), *itr = malloc(ntr * sizeof *itr), *iva = malloc(ntr * sizeof *iva);
    int *fold = malloc(ntr * sizeof *fold);
    float *Xtr = NULL, *ytr = NULL, *Xva = NULL;
    double *pred = malloc((ntr + 1) * sizeof *pred);
    drift_status st = DRIFT_OK;
    if (!fo || !perm || !itr || !iva || !fold || !pred) { st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory"); goto done; }
    for (int rep = 0; rep < reps; rep++) {
        int k = k0;
        memcpy(perm, tr, ntr * sizeof *perm);
        pri_shuffle(perm, ntr, o->seed + 7919u + 104729u * (unsigned)rep);
        for (size_t i = 0; i < ntr; i++) fold[i] = (int)(i % (size_t)k);
        if (group) {
            /* distinct group ids in order of first appearance after the shuffle */
            int ids[256];
            int nid = 0;
            for (size_t i = 0; i < ntr && nid < 256; i++) {
                int g = group[perm[i]], seen = 0;
                for (int j = 0; j < nid; j++) seen |= ids[j] == g;
                if (!seen) ids[nid++] = g;
            }
            if (nid >= 2 && nid < 256) {
                if (k > nid) k = nid;
                for (size_t i = 0; i < ntr; i++)
                    for (int j = 0; j < nid; j++)
                        if (ids[j] == group[perm[i]]) fold[i] = j % k;
            }
        }
        for (int f = 0; f < k && nfo < MAX_FOLDS; f++) {
            size_t a = 0, v = 0;
            for (size_t i = 0; i < ntr; i++) {
                if (fold[i] == f) iva[v++] = perm[i];
                else itr[a++] = perm[i];
            }
            if (a < 2 || v < 1) continue;
            ifold *F = &fo[nfo];
            if ((st = gather(ds, itr, a, &Xtr, &ytr, err))) goto done;
            if ((st = gather(ds, iva, v, &Xva, &F->yva, err))) goto done;
            F->nva = v;
            nfo++;
            if ((st = pri_xgb_dmatrix(Xtr, ytr, a, ds->p, &F->dtr, err))) goto done;
            if ((st = pri_xgb_dmatrix(Xva, NULL, v, ds->p, &F->dva, err))) goto done;
            free(Xtr); free(ytr); free(Xva);
            Xtr = ytr = Xva = NULL;
        }
    }
    if (nfo == 0) goto done;
    double best_sse = INFINITY;
    for (size_t c = 0; c < N_GRID; c++) {
        pri_hparams hp = grid[c];
        double sse;
        if ((st = cv_curve(fo, nfo, &hp, o->seed, pred, &sse, &hp.rounds, err))) goto done;
        if (sse < best_sse && hp.rounds > 0) {
            best_sse = sse;
            *best = hp;
        }
    }
done:
    for (int f = 0; f < nfo; f++) {
        pri_xgb_dmatrix_free(fo[f].dtr);
        pri_xgb_dmatrix_free(fo[f].dva);
        free(fo[f].yva);
    }
    free(fo);
    free(perm); free(itr); free(iva); free(fold); free(pred);
    free(Xtr); free(ytr); free(Xva);
    return st;
}


/* Tuned fit on tr, evaluated on te; fills h (name set by caller). */
static drift_status eval_split(const pri_dset *ds, const size_t *tr, size_t ntr, const size_t *te, size_t nte,
                               const int *group, const pri_hparams *fixed, const drift_pri_options *o,
                               drift_pri_holdout *h, double *pred_te_out, drift_error *err) {
    pri_hparams hp = fixed ? *fixed : default_hp;
    drift_status st = fixed ? DRIFT_OK : tune_grouped(ds, tr, ntr, group, o, &hp, err);
    if (st) return st;
    double *pte = calloc(nte + 1, sizeof *pte), *ptr = calloc(ntr + 1, sizeof *ptr);
    double *yte = calloc(nte + 1, sizeof *yte), *ytr = calloc(ntr + 1, sizeof *ytr);
    if (!pte || !ptr || !yte || !ytr) { st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory"); goto out; }
    if ((st = fit_predict(ds, tr, ntr, te, nte, &hp, o, pte, ptr, err))) goto out;
    double mae = 0;
    for (size_t i = 0; i < nte; i++) {
        yte[i] = ds->y[te[i]];
        mae += fabs(yte[i] - pte[i]);
    }
    for (size_t i = 0; i < ntr; i++) ytr[i] = ds->y[tr[i]];
    h->n_train = ntr;
    h->n_test = nte;
    h->train_r2 = drift_r2(ytr, ptr, ntr);
    h->test_r2 = drift_r2(yte, pte, nte);
    h->test_mae = nte ? mae / (double)nte : NAN;
    h->depth = hp.depth;
    h->eta = hp.eta;
    h->min_child_weight = (int)hp.mcw;
    h->rounds = hp.rounds;
    if (pred_te_out) memcpy(pred_te_out, pte, nte * sizeof *pte);
out:
    free(pte); free(ptr); free(yte); free(ytr);
    return st;
}

/* ----------------------------------------------------------------- jobs */

drift_status pri_job_alloc(pri_job *j, const pri_dset *ds, size_t N, drift_error *err) {
    memset(j, 0, sizeof *j);
    j->ds = ds;
    j->tr = malloc((N + 1) * sizeof *j->tr);
    j->te = malloc((N + 1) * sizeof *j->te);
    if (!j->tr || !j->te) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    return DRIFT_OK;
}

void pri_jobs_free(pri_job *jobs, size_t n) {
    if (!jobs) return;
    for (size_t i = 0; i < n; i++) {
        free(jobs[i].tr);
        free(jobs[i].te);
    }
    free(jobs);
}

/* Every booster on one thread, so the order jobs run in changes nothing. */
drift_status pri_jobs_run(pri_job *jobs, size_t n, const drift_pri_options *o, drift_error *err) {
    int nt = o->nthread > 1 ? o->nthread : 1;
    if ((size_t)nt > n) nt = n ? (int)n : 1;
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1)
    for (size_t i = 0; i < n; i++) {
        pri_job *j = &jobs[i];
        if (j->tune_only) j->st = tune_grouped(j->ds, j->tr, j->ntr, j->group, o, &j->hp, &j->err);
        else j->st = eval_split(j->ds, j->tr, j->ntr, j->te, j->nte, j->group, j->fixed_hp ? &j->hp : NULL, o, j->h,
                                j->pred_te, &j->err);
    }
    for (size_t i = 0; i < n; i++)
        if (jobs[i].st) {
            if (err) *err = jobs[i].err;
            return jobs[i].st;
        }
    return DRIFT_OK;
}

/* ------------------------------------------------------------ evaluation */

/* OLS on the one-hot features of rows tr (pinv, intercept added);
 * predictions of rows te in pred (nte). */
static drift_status linear_predict(const pri_dset *ds, const pri_fspec *f, const size_t *tr, size_t ntr,
                                   const size_t *te, size_t nte, double *pred, drift_error *err) {
    size_t q = 1 + pri_fspec_onehot_count(f); /* one-hot columns are first */
    double *X = malloc((ntr * q + 1) * sizeof *X), *y = malloc((ntr + 1) * sizeof *y);
    double *beta = malloc(q * sizeof *beta);
    drift_status st = DRIFT_OK;
    if (!X || !y || !beta) { st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory"); goto out; }
    for (size_t i = 0; i < ntr; i++) {
        X[i] = 1.0;
        for (size_t j = 1; j < q; j++) X[j * ntr + i] = ds->X[tr[i] * ds->p + j - 1];
        y[i] = ds->y[tr[i]];
    }
    if ((st = anl_pinv_fit(X, ntr, q, y, beta, NULL, NULL, err))) goto out;
    for (size_t i = 0; i < nte; i++) {
        double s = beta[0];
        for (size_t j = 1; j < q; j++) s += beta[j] * ds->X[te[i] * ds->p + j - 1];
        pred[i] = s;
    }
out:
    free(X); free(y); free(beta);
    return st;
}

/* ------------------------------------------- what a held-out R^2 can say */


/* binomial noise of one row: y(1-y)/(n-1) with y = flips/n, the unbiased
 * estimate of p(1-p)/n; -1 when the row has no counts */
static double row_noise(const drift_table_row *r) {
    if (r->num_comparisons < 2 || r->num_flips < 0 || r->num_flips > r->num_comparisons) return -1;
    double n = (double)r->num_comparisons, q = (double)r->num_flips / n;
    return q * (1 - q) / (n - 1);
}

void pri_noise_ceiling(const drift_table *t, const size_t *rows, size_t n, double *ceiling, double *obs_var,
                       double *noise_var) {
    double m = 0, ss = 0, noise = 0;
    int counts = 1;
    for (size_t i = 0; i < n; i++) m += t->rows[rows[i]].flip_rate / 100;
    m = n ? m / (double)n : NAN;
    for (size_t i = 0; i < n; i++) {
        const drift_table_row *r = &t->rows[rows[i]];
        double d = r->flip_rate / 100 - m, e = row_noise(r);
        ss += d * d;
        if (e < 0) counts = 0;
        else noise += e;
    }
    *obs_var = n ? ss / (double)n : NAN;
    *noise_var = counts && n ? noise / (double)n : NAN;
    *ceiling = isfinite(*noise_var) && *obs_var > 0 ? 1 - *noise_var / *obs_var : NAN;
}

/* A 64-bit FNV-1a of s: each held-out level's bootstrap draws its own stream. */
static uint64_t fnv(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

drift_status pri_cluster_bootstrap_r2(const drift_table *t, const size_t *rows, size_t n, const double *pred, int reps,
                                      uint64_t seed, double *lo, double *hi, size_t *n_clusters, drift_error *err) {
    *lo = *hi = NAN;
    *n_clusters = 0;
    size_t *cl = malloc((n + 1) * sizeof *cl), *first = malloc((n + 1) * sizeof *first);
    size_t *cnt = calloc(n + 1, sizeof *cnt), *order = malloc((n + 1) * sizeof *order);
    size_t *start = calloc(n + 2, sizeof *start);
    double *r2 = malloc(((size_t)(reps > 0 ? reps : 0) + 1) * sizeof *r2);
    drift_status st = DRIFT_OK;
    if (!cl || !first || !cnt || !order || !start || !r2) { st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory"); goto out; }
    /* clusters: configurations (experiment_id), in order of first appearance */
    size_t nc = 0;
    for (size_t i = 0; i < n; i++) {
        const char *id = t->rows[rows[i]].experiment_id;
        size_t c = 0;
        while (c < nc && strcmp(t->rows[rows[first[c]]].experiment_id, id)) c++;
        if (c == nc) first[nc++] = i;
        cl[i] = c;
        cnt[c]++;
    }
    *n_clusters = nc;
    if (nc < 2 || reps <= 0) goto out;
    for (size_t c = 0; c < nc; c++) start[c + 1] = start[c] + cnt[c];
    {
        size_t *fill = calloc(nc + 1, sizeof *fill);
        if (!fill) { st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory"); goto out; }
        for (size_t i = 0; i < n; i++) order[start[cl[i]] + fill[cl[i]]++] = i;
        free(fill);
    }
    util_rng rng;
    util_rng_seed(&rng, seed);
    size_t nd = 0;
    for (int b = 0; b < reps; b++) {
        double sy = 0, syy = 0, sse = 0, m = 0;
        for (size_t k = 0; k < nc; k++) {
            size_t c = (size_t)util_rng_below(&rng, nc);
            for (size_t j = start[c]; j < start[c + 1]; j++) {
                size_t i = order[j];
                double y = t->rows[rows[i]].flip_rate, e = y - pred[i];
                sy += y;
                syy += y * y;
                sse += e * e;
                m += 1;
            }
        }
        double sst = syy - sy * sy / m;
        if (sst > 1e-12 * (syy > 1 ? syy : 1)) r2[nd++] = 1 - sse / sst;
    }
    if (nd < (size_t)reps / 2) goto out; /* mostly replicates with nothing to predict: no interval */
    qsort(r2, nd, sizeof *r2, pri_cmp_double);
    *lo = pri_quantile_sorted(r2, nd, 0.025);
    *hi = pri_quantile_sorted(r2, nd, 0.975);
out:
    free(cl); free(first); free(cnt); free(order); free(start); free(r2);
    return st;
}

/* Table-wide spread of the true rates: var(y) - mean noise over every row,
 * and the mean rate (proportions). */
static void table_spread(const drift_table *t, double *tau2, double *pbar) {
    size_t n = t->n_rows;
    size_t *all = calloc(n + 1, sizeof *all);
    *tau2 = *pbar = NAN;
    if (!all) return;
    double c, v, e, m = 0;
    for (size_t i = 0; i < n; i++) all[i] = i, m += t->rows[i].flip_rate / 100;
    pri_noise_ceiling(t, all, n, &c, &v, &e);
    free(all);
    *tau2 = isfinite(e) ? v - e : NAN;
    *pbar = n ? m / (double)n : NAN;
}

/* Fills the issue-36 figures of h (test rows te, predictions pred). */
static drift_status holdout_figures(const drift_table *t, const size_t *te, size_t nte, const double *pred,
                                    const drift_pri_options *o, double tau2, double pbar_table, drift_pri_holdout *h,
                                    drift_error *err) {
    long flips = 0, comps = 0;
    int counts = 1;
    for (size_t i = 0; i < nte; i++) {
        const drift_table_row *r = &t->rows[te[i]];
        flips += r->num_flips > 0 ? r->num_flips : 0;
        comps += r->num_comparisons > 0 ? r->num_comparisons : 0;
        counts &= r->num_comparisons >= 2;
    }
    h->test_flips = flips;
    h->test_comparisons = comps;
    h->n_per_row = nte ? (double)comps / (double)nte : NAN;
    double ov, nv;
    pri_noise_ceiling(t, te, nte, &h->ceiling, &ov, &nv);
    h->obs_sd = isfinite(ov) ? 100 * sqrt(ov) : NAN;
    h->noise_sd = isfinite(nv) ? 100 * sqrt(nv) : NAN;
    h->table_true_sd = tau2 > 0 ? 100 * sqrt(tau2) : NAN;
    /* comparisons per row for a ceiling of 0.5: noise p(1-p)/n equal to the
     * table's spread tau^2, at these rows' mean rate (the table's when none
     * of them flipped) */
    double pbar = comps > 0 ? (double)flips / (double)comps : NAN;
    if (!(pbar > 0)) pbar = pbar_table;
    h->n_needed = tau2 > 0 && pbar > 0 && pbar < 1 ? pbar * (1 - pbar) / tau2 : NAN;
    drift_status st = pri_cluster_bootstrap_r2(t, te, nte, pred, o->bootstrap, (uint64_t)o->seed ^ fnv(h->name),
                                               &h->r2_lo, &h->r2_hi, &h->n_configs, err);
    if (st) return st;
    if (!isfinite(h->test_r2)) h->r2_lo = h->r2_hi = NAN;
    int all_zero = 1;
    for (size_t i = 0; i < nte; i++) all_zero &= t->rows[te[i]].flip_rate == 0;
    if (nte < 2) h->cannot_say = DRIFT_PRI_TOO_FEW;
    else if (all_zero) h->cannot_say = DRIFT_PRI_NO_FLIPS;
    else if (!(ov > 0)) h->cannot_say = DRIFT_PRI_NO_VARIANCE;
    else if (!counts) h->cannot_say = DRIFT_PRI_NO_COUNTS;
    else if (!(h->ceiling > 0)) h->cannot_say = DRIFT_PRI_AT_NOISE;
    else h->cannot_say = DRIFT_PRI_SAYS;
    return DRIFT_OK;
}

static const struct { const char *dim, *level; double r2; } paper_cases[4] = {
    {"hardware", "b200", 0.9094}, {"precision", "fp4", 0.7626}, {"framework", "sglang", 0.4789},
    {"model", "qwen-7b", 0.1181}};

void drift_pri_eval_free(drift_pri_eval *e) {
    if (!e) return;
    free(e->levels);
    free(e->importance);
    free(e);
}

/* e->importance: b's total gain per feature as a share of the whole,
 * descending; names (p) name xgboost's f0, f1, ... */
static drift_status importance(pri_booster *b, char **names, size_t p, drift_pri_eval *e, drift_error *err) {
    size_t nf;
    const char *const *fn;
    const float *sc;
    drift_status st = pri_xgb_total_gain(b, &nf, &fn, &sc, err);
    if (st) return st;
    e->importance = calloc(nf ? nf : 1, sizeof *e->importance);
    if (!e->importance) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    double tot = 0;
    for (size_t i = 0; i < nf; i++) tot += sc[i];
    for (size_t i = 0; i < nf; i++) {
        /* without names xgboost calls features f0, f1, ... */
        size_t idx = fn[i][0] == 'f' ? (size_t)strtoul(fn[i] + 1, NULL, 10) : p;
        snprintf(e->importance[i].name, sizeof e->importance[i].name, "%s", idx < p ? names[idx] : fn[i]);
        e->importance[i].gain_share = tot > 0 ? sc[i] / tot : 0;
    }
    e->n_importance = nf;
    /* sort descending */
    for (size_t i = 1; i < e->n_importance; i++)
        for (size_t j = i; j > 0 && e->importance[j - 1].gain_share < e->importance[j].gain_share; j--) {
            drift_pri_importance tmp = e->importance[j];
            e->importance[j] = e->importance[j - 1];
            e->importance[j - 1] = tmp;
        }
    return DRIFT_OK;
}

/* ------------------------------------------------------------ ablations */

/* One ablation variant: a feature set (or OLS) scored on the shared folds. */
typedef struct abl_variant {
    const char *name;
    pri_fspec f;          /* shallow copy of the full spec with groups switched */
    float *X, *y;
    pri_dset ds;
    int linear;           /* OLS on the one-hots instead of xgboost */
} abl_variant;

#define ABL_FOLDS 5
#define MAX_VARIANTS 8

/* ------------------------------------------------------------ evaluation */

drift_status drift_pri_evaluate(const drift_table *t, const drift_pri_options *opt, drift_pri_eval **out,
                                drift_error *err) {
    drift_pri_options def;
    if (!opt) { drift_pri_options_init(&def); opt = &def; }
    *out = NULL;
    if (t->n_rows < 10) return drift_error_set(err, DRIFT_ERR_INVALID, "PRI needs at least 10 rows, the table has %zu", t->n_rows);
    pri_fspec f;
    float *X = NULL, *y = NULL;
    size_t N = t->n_rows;
    size_t *perm = malloc(N * sizeof *perm);
    int *group = malloc((DRIFT_DIM_COUNT * N + 1) * sizeof *group); /* (DRIFT_DIM_COUNT, N) level of every row */
    char **names = NULL;
    drift_pri_eval *e = calloc(1, sizeof *e);
    pri_job *jobs = NULL, *ajobs = NULL;
    size_t njobs = 0, najobs = 0, nvar = 0;
    double **lvpred = NULL;      /* (n_levels,) test predictions of each held-out level */
    size_t *lvjob = NULL;        /* (n_levels,) its job */
    double *apred = NULL;        /* (nvar, reps, N) out-of-fold predictions of the ablations */
    size_t *aperm = NULL;        /* (reps, N) the ablations' shuffles, shared by every variant */
    double *rspred = NULL;       /* (N / 5) the random split's test predictions */
    drift_pri_holdout *ahold = NULL;
    abl_variant var[MAX_VARIANTS];
    memset(var, 0, sizeof var);
    drift_pri_holdout tmp[5];
    int reps = opt->ablation_repeats < 1 ? 1 : opt->ablation_repeats > 20 ? 20 : opt->ablation_repeats;
    pri_booster *full = NULL;
    drift_status st = pri_fspec_from_table(t, opt, &f, err);
    if (st) { free(perm); free(e); free(group); return st; }
    size_t nl = 0;
    for (int d = 0; d < DRIFT_DIM_COUNT; d++) nl += f.nlev[d];
    if (!perm || !e || !group) { st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory"); goto done; }
    e->levels = calloc(nl ? nl : 1, sizeof *e->levels);
    lvpred = calloc(nl ? nl : 1, sizeof *lvpred);
    lvjob = calloc(nl ? nl : 1, sizeof *lvjob);
    /* random split, 5 folds, the levels, the full model's tuning */
    jobs = calloc(1 + 5 + nl + 1, sizeof *jobs);
    if (!e->levels || !jobs || !lvpred || !lvjob) { st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory"); goto done; }
    if ((st = pri_build_dset(t, &f, &X, &y, err))) goto done;
    pri_dset ds = {X, y, f.p};
    e->n_features = f.p;
    e->min_levels = opt->min_levels > 2 ? opt->min_levels : 2;
    e->cv_folds = opt->cv_folds < 2 ? 2 : opt->cv_folds > 20 ? 20 : opt->cv_folds;
    e->cv_repeats = opt->cv_repeats < 1 ? 1 : opt->cv_repeats > 10 ? 10 : opt->cv_repeats;
    e->bootstrap = opt->bootstrap > 0 ? opt->bootstrap : 0;
    e->ablation_repeats = reps;
    e->n_desc = f.use_ud ? f.n_ud : 0;
    for (int d = 0; d < DRIFT_DIM_COUNT; d++)
        for (size_t i = 0; i < N; i++) group[(size_t)d * N + i] = pri_level_index(&f, d, t->rows[i].dims[d]);
    double tau2, pbar_table;
    table_spread(t, &tau2, &pbar_table);
    e->table_true_sd = tau2 > 0 ? 100 * sqrt(tau2) : NAN;

    /* random 80/20 split */
    for (size_t i = 0; i < N; i++) perm[i] = i;
    pri_shuffle(perm, N, opt->seed);
    size_t nte = N / 5, ntr = N - nte;
    {
        pri_job *j = &jobs[njobs++];
        if ((st = pri_job_alloc(j, &ds, N, err))) goto done;
        memcpy(j->te, perm, nte * sizeof *j->te);
        memcpy(j->tr, perm + nte, ntr * sizeof *j->tr);
        j->nte = nte;
        j->ntr = ntr;
        j->h = &e->random_split;
        if (!(rspred = calloc(nte + 1, sizeof *rspred))) { st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory"); goto done; }
        j->pred_te = rspred;
    }
    snprintf(e->random_split.name, sizeof e->random_split.name, "random 80/20 (seed %u)", opt->seed);
    e->random_split.paper_r2 = 0.987;
    /* 5-fold CV */
    for (int k = 0; k < 5; k++) {
        pri_job *j = &jobs[njobs++];
        if ((st = pri_job_alloc(j, &ds, N, err))) goto done;
        for (size_t i = 0; i < N; i++) {
            if ((int)(i % 5) == k) j->te[j->nte++] = perm[i];
            else j->tr[j->ntr++] = perm[i];
        }
        j->h = &tmp[k];
    }
    /* held-out level of every dimension with min_levels levels or more
     * (leave one level out): with two levels the model would learn from
     * one level and be scored on the other, nothing to generalise from */
    for (int d = 0; d < DRIFT_DIM_COUNT; d++) {
        if (f.nlev[d] < (size_t)e->min_levels) {
            drift_pri_not_held *nh = &e->not_held[e->n_not_held++];
            snprintf(nh->dim, sizeof nh->dim, "%s", drift_dim_names[d]);
            nh->n_levels = f.nlev[d];
            continue;
        }
        for (size_t l = 0; l < f.nlev[d]; l++) {
            const int *g = group + (size_t)d * N;
            size_t a = 0, b = 0;
            for (size_t i = 0; i < N; i++) {
                if (g[i] == (int)l) b++;
                else a++;
            }
            if (a < 10 || b < 2) continue; /* nothing to learn from or to score */
            lvjob[e->n_levels] = njobs;
            pri_job *j = &jobs[njobs++];
            if ((st = pri_job_alloc(j, &ds, N, err))) goto done;
            for (size_t i = 0; i < N; i++) {
                if (g[i] == (int)l) j->te[j->nte++] = i;
                else j->tr[j->ntr++] = i;
            }
            j->group = opt->grouped_cv ? g : NULL;
            if (!(lvpred[e->n_levels] = calloc(b + 1, sizeof **lvpred))) {
                st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
                goto done;
            }
            j->pred_te = lvpred[e->n_levels];
            drift_pri_holdout *h = j->h = &e->levels[e->n_levels++];
            snprintf(h->name, sizeof h->name, "%s=%s", drift_dim_names[d], f.lev[d][l]);
            h->paper_r2 = NAN;
            for (int c = 0; c < 4; c++)
                if (!strcmp(paper_cases[c].dim, drift_dim_names[d]) && !strcmp(paper_cases[c].level, f.lev[d][l]))
                    h->paper_r2 = paper_cases[c].r2;
        }
    }
    /* the full model (importance, ablations): hyper-parameters on all rows */
    pri_job *jf = &jobs[njobs++];
    if ((st = pri_job_alloc(jf, &ds, N, err))) goto done;
    for (size_t i = 0; i < N; i++) jf->tr[i] = i;
    jf->ntr = N;
    jf->tune_only = 1;

    if ((st = pri_jobs_run(jobs, njobs, opt, err))) goto done;

    {
        double s = 0, s2 = 0;
        int nd = 0;
        for (int k = 0; k < 5; k++) {
            double r = e->cv_fold_r2[k] = tmp[k].test_r2;
            if (isnan(r)) continue; /* a fold whose test rows share one flip rate */
            s += r;
            s2 += r * r;
            nd++;
        }
        e->cv_folds_defined = nd;
        e->cv_r2_mean = nd ? s / nd : NAN;
        e->cv_r2_sd = nd > 1 ? sqrt(fmax(0, (s2 - s * s / nd) / (nd - 1))) : (nd ? 0 : NAN);
    }
    if ((st = holdout_figures(t, jobs[0].te, jobs[0].nte, rspred, opt, tau2, pbar_table, &e->random_split, err)))
        goto done;
    for (size_t i = 0; i < e->n_levels; i++) {
        const pri_job *j = &jobs[lvjob[i]];
        if ((st = holdout_figures(t, j->te, j->nte, lvpred[i], opt, tau2, pbar_table, &e->levels[i], err))) goto done;
    }
    for (size_t i = 0; i < e->n_levels; i++)
        if (!isnan(e->levels[i].paper_r2) && e->n_paper < 4) e->paper[e->n_paper++] = e->levels[i];

    /* ablations: every variant on the same folds (reps shuffles x 5) with
     * the full model's hyper-parameters */
    {
        int has_desc = f.descriptors || f.use_ud, has_inter = f.interactions, has_off = 0;
        for (int d = 0; d < DRIFT_DIM_COUNT; d++) has_off |= !f.use_dim[d];
        var[nvar].name = "full";
        var[nvar++].f = f;
        if (has_desc && has_inter) {
            var[nvar].name = "no interactions";
            var[nvar].f = f;
            var[nvar++].f.interactions = 0;
        }
        if (has_desc) {
            var[nvar].name = "no descriptors";
            var[nvar].f = f;
            var[nvar].f.descriptors = 0;
            var[nvar++].f.use_ud = 0;
        }
        if (has_desc || has_inter || has_off) {
            abl_variant *v = &var[nvar++];
            v->name = "one-hot only";
            v->f = f;
            for (int d = 0; d < DRIFT_DIM_COUNT; d++) v->f.use_dim[d] = 1;
            v->f.interactions = v->f.descriptors = v->f.use_ud = 0;
        }
        if (f.use_ud) {
            abl_variant *v = &var[nvar++];
            v->name = "descriptors + workload only";
            v->f = f;
            for (int d = 0; d < DRIFT_DIM_COUNT; d++) v->f.use_dim[d] = d == DRIFT_DIM_WORKLOAD;
            v->f.interactions = v->f.descriptors = 0;
        }
        {
            abl_variant *v = &var[nvar++];
            v->name = "hardware one-hot only";
            v->f = f;
            for (int d = 0; d < DRIFT_DIM_COUNT; d++) v->f.use_dim[d] = d == DRIFT_DIM_HARDWARE;
            v->f.interactions = v->f.descriptors = v->f.use_ud = 0;
        }
        {
            abl_variant *v = &var[nvar++];
            v->name = "linear (OLS on one-hot)";
            v->f = f;
            for (int d = 0; d < DRIFT_DIM_COUNT; d++) v->f.use_dim[d] = 1;
            v->f.interactions = v->f.descriptors = v->f.use_ud = 0;
            v->linear = 1;
        }
    }
    for (size_t v = 0; v < nvar; v++) {
        pri_fspec_count(&var[v].f);
        if (v == 0) { var[v].ds = ds; continue; }
        if ((st = pri_build_dset(t, &var[v].f, &var[v].X, &var[v].y, err))) goto done;
        var[v].ds = (pri_dset){var[v].X, var[v].y, var[v].f.p};
    }
    apred = malloc((nvar * (size_t)reps * N + 1) * sizeof *apred);
    aperm = malloc(((size_t)reps * N + 1) * sizeof *aperm);
    ajobs = calloc(nvar * (size_t)reps * ABL_FOLDS + 1, sizeof *ajobs);
    ahold = calloc(nvar * (size_t)reps * ABL_FOLDS + 1, sizeof *ahold);
    if (!apred || !aperm || !ajobs || !ahold) { st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory"); goto done; }
    for (int r = 0; r < reps; r++) {
        size_t *pr = aperm + (size_t)r * N;
        for (size_t i = 0; i < N; i++) pr[i] = i;
        pri_shuffle(pr, N, opt->seed + 31337u + 7727u * (unsigned)r);
    }
    for (size_t v = 0; v < nvar; v++)
        for (int r = 0; r < reps; r++)
            for (int k = 0; k < ABL_FOLDS; k++) {
                const size_t *pr = aperm + (size_t)r * N;
                pri_job *j = &ajobs[najobs];
                if ((st = pri_job_alloc(j, &var[v].ds, N, err))) goto done;
                for (size_t i = 0; i < N; i++) {
                    if ((int)(i % ABL_FOLDS) == k) j->te[j->nte++] = pr[i];
                    else j->tr[j->ntr++] = pr[i];
                }
                j->fixed_hp = 1;
                j->hp = jf->hp;
                j->h = &ahold[najobs];
                najobs++;
                if (!(j->pred_te = malloc((j->nte + 1) * sizeof *j->pred_te))) {
                    st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
                    goto done;
                }
            }
    /* the xgboost variants side by side (the OLS one is not a booster: the
     * jobs list ends before it, since it is the last variant) */
    if ((st = pri_jobs_run(ajobs, (nvar - 1) * (size_t)reps * ABL_FOLDS, opt, err))) goto done;
    for (size_t i = 0; i < najobs; i++) {
        pri_job *j = &ajobs[i];
        size_t v = i / ((size_t)reps * ABL_FOLDS), r = (i / ABL_FOLDS) % (size_t)reps;
        if (var[v].linear &&
            (st = linear_predict(j->ds, &var[v].f, j->tr, j->ntr, j->te, j->nte, j->pred_te, err)))
            goto done;
        for (size_t q = 0; q < j->nte; q++) apred[(v * (size_t)reps + r) * N + j->te[q]] = j->pred_te[q];
    }
    {
        double *yy = malloc((N + 1) * sizeof *yy);
        if (!yy) { st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory"); goto done; }
        for (size_t i = 0; i < N; i++) yy[i] = y[i];
        for (size_t v = 0; v < nvar; v++) {
            drift_pri_ablation *ab = &e->ablations[e->n_ablations++];
            snprintf(ab->name, sizeof ab->name, "%s", var[v].name);
            ab->n_features = var[v].linear ? pri_fspec_onehot_count(&var[v].f) : var[v].f.p;
            double s = 0, mn = INFINITY, mx = -INFINITY;
            int nd = 0;
            for (int r = 0; r < reps; r++) {
                double r2 = drift_r2(yy, apred + (v * (size_t)reps + (size_t)r) * N, N);
                if (!isfinite(r2)) continue;
                s += r2;
                nd++;
                mn = fmin(mn, r2);
                mx = fmax(mx, r2);
            }
            ab->r2 = nd ? s / nd : NAN;
            ab->r2_min = nd ? mn : NAN;
            ab->r2_max = nd ? mx : NAN;
            if (!strcmp(var[v].name, "full")) e->abl_full = ab->r2;
            else if (!strcmp(var[v].name, "one-hot only")) e->abl_no_interactions = ab->r2;
            else if (!strcmp(var[v].name, "hardware one-hot only")) e->abl_hardware_only = ab->r2;
            else if (var[v].linear) e->abl_linear = ab->r2;
        }
        /* the full spec is one-hot only: its own figure */
        if (nvar && !(f.descriptors || f.use_ud || f.interactions)) e->abl_no_interactions = e->abl_full;
        free(yy);
    }

    if ((st = pri_xgb_train(X, y, N, f.p, &jf->hp, opt->seed, 1, &full, err))) goto done;
    if ((st = pri_fspec_names(&f, &names, err))) goto done;
    if ((st = importance(full, names, f.p, e, err))) goto done;
done:
    pri_xgb_free(full);
    pri_jobs_free(jobs, njobs);
    for (size_t i = 0; i < najobs; i++) free(ajobs ? ajobs[i].pred_te : NULL);
    pri_jobs_free(ajobs, najobs);
    for (size_t v = 1; v < nvar; v++) { free(var[v].X); free(var[v].y); }
    for (size_t i = 0; lvpred && i < nl; i++) free(lvpred[i]);
    free(lvpred); free(lvjob); free(apred); free(aperm); free(ahold); free(rspred);
    pri_names_free(names, f.p);
    pri_fspec_free(&f);
    free(X); free(y);
    free(perm); free(group);
    if (st) drift_pri_eval_free(e);
    else *out = e;
    return st;
}
