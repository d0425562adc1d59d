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
#define MAX_FOLDS 20

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
    pri_booster *b[MAX_FOLDS] = {0};
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
    *best_sse = best;
    *best_rounds = br;
    return st;
}

/* Chooses hyper-parameters by k-fold CV inside rows tr (never looks at
 * other rows). With group (a group id per row of the data set, e.g. the
 * level of the dimension being held out) the inner folds hold out whole
 * groups, so the choice is made for the same kind of extrapolation the
 * outer split measures; without, the folds are random. Small training sets
 * keep the defaults. */
static drift_status tune_grouped(const pri_dset *ds, const size_t *tr, size_t ntr, const int *group,
                                 const drift_pri_options *o, pri_hparams *best, drift_error *err) {
    *best = default_hp;
    int k = o->cv_folds < 2 ? 2 : o->cv_folds > MAX_FOLDS ? MAX_FOLDS : o->cv_folds;
    if (!o->tune || ntr < (size_t)(5 * k)) return DRIFT_OK;
    ifold fo[MAX_FOLDS];
    memset(fo, 0, sizeof fo);
    int nfo = 0;
    size_t *perm = malloc(ntr * sizeof *perm), *itr = malloc(ntr * sizeof *itr), *iva = malloc(ntr * sizeof *iva);
    int *fold = malloc(ntr * sizeof *fold);
    float *Xtr = NULL, *ytr = NULL, *Xva = NULL;
    double *pred = malloc((ntr + 1) * sizeof *pred);
    drift_status st = DRIFT_OK;
    if (!perm || !itr || !iva || !fold || !pred) { st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory"); goto done; }
    memcpy(perm, tr, ntr * sizeof *perm);
    pri_shuffle(perm, ntr, o->seed + 7919u);
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
    for (int f = 0; f < k; f++) {
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
    free(perm); free(itr); free(iva); free(fold); free(pred);
    free(Xtr); free(ytr); free(Xva);
    return st;
}


/* Tuned fit on tr, evaluated on te; fills h (name set by caller). */
static drift_status eval_split(const pri_dset *ds, const size_t *tr, size_t ntr, const size_t *te, size_t nte,
                               const int *group, const drift_pri_options *o, drift_pri_holdout *h,
                               double *pred_te_out, drift_error *err) {
    pri_hparams hp;
    drift_status st = tune_grouped(ds, tr, ntr, group, o, &hp, err);
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
        else j->st = eval_split(j->ds, j->tr, j->ntr, j->te, j->nte, j->group, o, j->h, j->pred_te, &j->err);
    }
    for (size_t i = 0; i < n; i++)
        if (jobs[i].st) {
            if (err) *err = jobs[i].err;
            return jobs[i].st;
        }
    return DRIFT_OK;
}

/* ------------------------------------------------------------ evaluation */

/* OLS on the one-hot features of rows tr (pinv, intercept added), R^2 on te. */
static drift_status linear_r2(const pri_dset *ds, const pri_fspec *f, const size_t *tr, size_t ntr, const size_t *te,
                              size_t nte, double *r2, drift_error *err) {
    size_t q = 1;
    for (int d = 0; d < DRIFT_DIM_COUNT; d++) q += f->nlev[d];   /* one-hot columns are first */
    double *X = malloc((ntr * q + 1) * sizeof *X), *y = malloc((ntr + 1) * sizeof *y);
    double *beta = malloc(q * sizeof *beta), *pt = malloc((nte + 1) * sizeof *pt), *yt = malloc((nte + 1) * sizeof *yt);
    drift_status st = DRIFT_OK;
    if (!X || !y || !beta || !pt || !yt) { st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory"); goto out; }
    for (size_t i = 0; i < ntr; i++) {
        X[i] = 1.0;
        for (size_t j = 1; j < q; j++) X[j * ntr + i] = ds->X[tr[i] * ds->p + j - 1];
        y[i] = ds->y[tr[i]];
    }
    if ((st = anl_pinv_fit(X, ntr, q, y, beta, NULL, NULL, err))) goto out;
    for (size_t i = 0; i < nte; i++) {
        double s = beta[0];
        for (size_t j = 1; j < q; j++) s += beta[j] * ds->X[te[i] * ds->p + j - 1];
        pt[i] = s;
        yt[i] = ds->y[te[i]];
    }
    *r2 = drift_r2(yt, pt, nte);
out:
    free(X); free(y); free(beta); free(pt); free(yt);
    return st;
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

drift_status drift_pri_evaluate(const drift_table *t, const drift_pri_options *opt, drift_pri_eval **out,
                                drift_error *err) {
    drift_pri_options def;
    if (!opt) { drift_pri_options_init(&def); opt = &def; }
    *out = NULL;
    if (t->n_rows < 10) return drift_error_set(err, DRIFT_ERR_INVALID, "PRI needs at least 10 rows, the table has %zu", t->n_rows);
    pri_fspec f, fno, fhw;
    float *X = NULL, *y = NULL, *Xno = NULL, *yno = NULL, *Xhw = NULL, *yhw = NULL;
    size_t N = t->n_rows;
    size_t *perm = malloc(N * sizeof *perm);
    int *group = malloc((DRIFT_DIM_COUNT * N + 1) * sizeof *group); /* (DRIFT_DIM_COUNT, N) level of every row */
    char **names = NULL;
    drift_pri_eval *e = calloc(1, sizeof *e);
    pri_job *jobs = NULL;
    size_t njobs = 0;
    drift_pri_holdout tmp[3 + 5];
    drift_status st = pri_fspec_from_table(t, opt, &f, err);
    if (st) { free(perm); free(e); free(group); return st; }
    /* ablation feature sets: no interactions; hardware one-hot only */
    fno = f; fhw = f;
    fno.interactions = 0; fno.descriptors = 0;
    pri_fspec_count(&fno);
    for (int d = 0; d < DRIFT_DIM_COUNT; d++) fhw.use_dim[d] = d == DRIFT_DIM_HARDWARE;
    fhw.interactions = 0; fhw.descriptors = 0;
    pri_fspec_count(&fhw);
    pri_booster *full = NULL;
    size_t nl = 0;
    for (int d = 0; d < DRIFT_DIM_COUNT; d++) nl += f.nlev[d];
    if (!perm || !e || !group) { st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory"); goto done; }
    e->levels = calloc(nl ? nl : 1, sizeof *e->levels);
    /* random split + 2 ablations, 5 folds, the levels, the full model */
    jobs = calloc(3 + 5 + nl + 1, sizeof *jobs);
    if (!e->levels || !jobs) { st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory"); goto done; }
    if ((st = pri_build_dset(t, &f, &X, &y, err))) goto done;
    if ((st = pri_build_dset(t, &fno, &Xno, &yno, err))) goto done;
    if ((st = pri_build_dset(t, &fhw, &Xhw, &yhw, err))) goto done;
    pri_dset ds = {X, y, f.p}, dsno = {Xno, yno, fno.p}, dshw = {Xhw, yhw, fhw.p};
    e->n_features = f.p;
    for (int d = 0; d < DRIFT_DIM_COUNT; d++)
        for (size_t i = 0; i < N; i++) group[(size_t)d * N + i] = pri_level_index(&f, d, t->rows[i].dims[d]);

    /* random 80/20 split, and the two xgboost ablations on the same rows */
    for (size_t i = 0; i < N; i++) perm[i] = i;
    pri_shuffle(perm, N, opt->seed);
    size_t nte = N / 5, ntr = N - nte;
    const pri_dset *abl[3] = {&ds, &dsno, &dshw};
    for (int a = 0; a < 3; a++) {
        pri_job *j = &jobs[njobs++];
        if ((st = pri_job_alloc(j, abl[a], N, err))) goto done;
        memcpy(j->te, perm, nte * sizeof *j->te);
        memcpy(j->tr, perm + nte, ntr * sizeof *j->tr);
        j->nte = nte;
        j->ntr = ntr;
        j->h = a == 0 ? &e->random_split : &tmp[a];
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
        j->h = &tmp[3 + k];
    }
    /* held-out level of every dimension */
    for (int d = 0; d < DRIFT_DIM_COUNT; d++)
        for (size_t l = 0; l < f.nlev[d]; l++) {
            const int *g = group + (size_t)d * N;
            size_t a = 0, b = 0;
            for (size_t i = 0; i < N; i++) {
                if (g[i] == (int)l) b++;
                else a++;
            }
            if (a < 10 || b < 2) continue; /* nothing to learn from or to score */
            pri_job *j = &jobs[njobs++];
            if ((st = pri_job_alloc(j, &ds, N, err))) goto done;
            for (size_t i = 0; i < N; i++) {
                if (g[i] == (int)l) j->te[j->nte++] = i;
                else j->tr[j->ntr++] = i;
            }
            j->group = opt->grouped_cv ? g : NULL;
            drift_pri_holdout *h = j->h = &e->levels[e->n_levels++];
            snprintf(h->name, sizeof h->name, "%s=%s", drift_dim_names[d], f.lev[d][l]);
            h->paper_r2 = NAN;
            for (int c = 0; c < 4; c++)
                if (!strcmp(paper_cases[c].dim, drift_dim_names[d]) && !strcmp(paper_cases[c].level, f.lev[d][l]))
                    h->paper_r2 = paper_cases[c].r2;
        }
    /* the full model (for importance): hyper-parameters on all rows */
    pri_job *jf = &jobs[njobs++];
    if ((st = pri_job_alloc(jf, &ds, N, err))) goto done;
    for (size_t i = 0; i < N; i++) jf->tr[i] = i;
    jf->ntr = N;
    jf->tune_only = 1;

    if ((st = pri_jobs_run(jobs, njobs, opt, err))) goto done;

    e->abl_full = e->random_split.test_r2;
    e->abl_no_interactions = tmp[1].test_r2;
    e->abl_hardware_only = tmp[2].test_r2;
    if ((st = linear_r2(&ds, &f, jobs[0].tr, ntr, jobs[0].te, nte, &e->abl_linear, err))) goto done;
    {
        double s = 0, s2 = 0;
        int nd = 0;
        for (int k = 0; k < 5; k++) {
            double r = e->cv_fold_r2[k] = tmp[3 + k].test_r2;
            if (isnan(r)) continue; /* a fold whose test rows share one flip rate */
            s += r;
            s2 += r * r;
            nd++;
        }
        e->cv_folds_defined = nd;
        e->cv_r2_mean = nd ? s / nd : NAN;
        e->cv_r2_sd = nd > 1 ? sqrt(fmax(0, (s2 - s * s / nd) / (nd - 1))) : (nd ? 0 : NAN);
    }
    for (size_t i = 0; i < e->n_levels; i++)
        if (!isnan(e->levels[i].paper_r2) && e->n_paper < 4) e->paper[e->n_paper++] = e->levels[i];
    if ((st = pri_xgb_train(X, y, N, f.p, &jf->hp, opt->seed, 1, &full, err))) goto done;
    if ((st = pri_fspec_names(&f, &names, err))) goto done;
    if ((st = importance(full, names, f.p, e, err))) goto done;
done:
    pri_xgb_free(full);
    pri_jobs_free(jobs, njobs);
    pri_names_free(names, f.p);
    pri_fspec_free(&f);
    free(X); free(y); free(Xno); free(yno); free(Xhw); free(yhw);
    free(perm); free(group);
    if (st) drift_pri_eval_free(e);
    else *out = e;
    return st;
}

