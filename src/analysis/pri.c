/* pri.c - Portability Risk Index: an XGBoost regressor of flip rate.
 *
 * Features (built from the levels present in the table, so our own tables
 * work as well as the paper's):
 *   one-hot of model, hardware, precision, framework, workload   (paper: 20)
 *   precision x workload, framework x workload, hardware x precision (36)
 *   optional descriptors: format bits, hardware generation, AMD or not,
 *   model size (B parameters), MoE or not (NaN = missing when a level's
 *   name says nothing).
 * Every model is tuned by k-fold CV inside its own training rows: max_depth
 * 3 or 5 at eta 0.3, the number of trees by early stopping on the inner
 * folds (see the grid below).
 *
 *   drift_pri_evaluate: random 80/20 split, 5-fold CV, held-out level of
 *     every dimension (the paper's four marked), ablations, gain importance.
 *   drift_pri_fit: tuned model on all rows + out-of-fold residuals (each fold
 *     tuned inside its own training rows) -> empirical 2.5% / 97.5%
 *     quantiles, per workload when the workload has >= 40 rows, which give
 *     the prediction interval.
 *   drift_pri_save/load: JSON with the xgboost model (its own JSON format)
 *     base64-encoded inside, the levels, features, residual quantiles and
 *     the baseline configuration.
 *
 * Speed: the evaluations (and fit's folds) are independent jobs run side by
 * side with OpenMP (o->nthread at a time), every booster and matrix on one
 * thread; on a few hundred rows xgboost's cost is its per-node overhead
 * (OpenMP regions, allocations), so the tuning keeps the tree count small.
 * Every xgboost call is checked; its message (XGBGetLastError) becomes a
 * DRIFT_ERR_XGBOOST. Determinism: tree_method=hist, seed set, one thread per
 * booster: the results do not depend on o->nthread. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <xgboost/c_api.h>

#include "analysis/analysis_internal.h"
#include "driftbench/analysis.h"
#include "util/util.h"

#define NDIM DRIFT_TABLE_FIXED_DIMS
enum { D_MODEL, D_HW, D_PREC, D_FW, D_WL };
static const char *const dim_names[NDIM] = {"model", "hardware", "precision", "framework", "workload"};

/* the paper's interactions: (a, b) dimension pairs */
static const int inter_pairs[3][2] = {{D_PREC, D_WL}, {D_FW, D_WL}, {D_HW, D_PREC}};

#define N_DESC 5
static const char *const desc_names[N_DESC] = {"desc:format_bits", "desc:hw_generation", "desc:hw_amd",
                                               "desc:model_size_b", "desc:model_moe"};

/* ------------------------------------------------------------ features */

typedef struct fspec {
    size_t nlev[NDIM];
    char **lev[NDIM];        /* (nlev[d],) sorted level names, owned */
    int use_dim[NDIM];       /* one-hot of this dimension included */
    int interactions, descriptors;
    size_t p;                /* number of features */
} fspec;

static void fspec_free(fspec *f) {
    for (int d = 0; d < NDIM; d++) {
        for (size_t i = 0; i < f->nlev[d]; i++) free(f->lev[d][i]);
        free(f->lev[d]);
        f->lev[d] = NULL;
        f->nlev[d] = 0;
    }
}

static void fspec_count(fspec *f) {
    size_t p = 0;
    for (int d = 0; d < NDIM; d++)
        if (f->use_dim[d]) p += f->nlev[d];
    if (f->interactions)
        for (int k = 0; k < 3; k++) p += f->nlev[inter_pairs[k][0]] * f->nlev[inter_pairs[k][1]];
    if (f->descriptors) p += N_DESC;
    f->p = p;
}

static drift_status fspec_from_table(const drift_table *t, const drift_pri_options *o, fspec *f,
                                     drift_error *err) {
    memset(f, 0, sizeof *f);
    for (int d = 0; d < NDIM; d++) {
        const char **lv;
        size_t n;
        drift_status st = drift_table_levels(t, (size_t)d, &lv, &n, err);
        if (st) { fspec_free(f); return st; }
        f->lev[d] = calloc(n ? n : 1, sizeof *f->lev[d]);
        if (!f->lev[d]) { free(lv); fspec_free(f); return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory"); }
        f->nlev[d] = n;
        for (size_t i = 0; i < n; i++)
            if (!(f->lev[d][i] = drift_strdup(lv[i]))) {
                free(lv);
                fspec_free(f);
                return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
            }
        free(lv);
        f->use_dim[d] = 1;
    }
    f->interactions = o->interactions;
    f->descriptors = o->descriptors;
    fspec_count(f);
    return DRIFT_OK;
}

static int level_index(const fspec *f, int d, const char *v) {
    size_t lo = 0, hi = f->nlev[d];
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(f->lev[d][mid], v);
        if (c == 0) return (int)mid;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

/* trailing number of a format name: fp16 -> 16, nvfp4 -> 4, e4m3 -> 8 */
static double desc_format_bits(const char *s) {
    if (strstr(s, "e4m3") || strstr(s, "e5m2")) return 8;
    if (strstr(s, "e2m1")) return 4;
    size_t n = strlen(s);
    while (n && isdigit((unsigned char)s[n - 1])) n--;
    if (!s[n]) return NAN;
    return atof(s + n);
}

static double desc_hw_generation(const char *s) {
    static const struct { const char *name; double gen; } tab[] = {
        {"v100", 7.0}, {"a100", 8.0}, {"a10", 8.6}, {"l4", 8.9}, {"l40", 8.9}, {"h100", 9.0},
        {"h200", 9.0}, {"gh200", 9.0}, {"b100", 10.0}, {"b200", 10.0}, {"gb200", 10.0},
        {"mi250", 8.0}, {"mi300", 9.0}, {"mi325", 9.0}, {"mi355", 10.0}};
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        if (!strncmp(s, tab[i].name, strlen(tab[i].name))) return tab[i].gen;
    return NAN;
}

/* model size in billions: "llama-3.1-70b" -> 70, "mixtral-8x7b" -> 56 */
static double desc_model_size(const char *s, double *moe) {
    *moe = strstr(s, "mixtral") || strstr(s, "moe") ? 1 : 0;
    double best = NAN;
    for (const char *c = s; *c; c++) {
        if (!isdigit((unsigned char)*c) || (c > s && (isdigit((unsigned char)c[-1]) || c[-1] == '.'))) continue;
        char *e;
        double a = strtod(c, &e);
        if (*e == 'x' && isdigit((unsigned char)e[1])) {
            double b = strtod(e + 1, &e);
            if (*e == 'b' || *e == 'B') { *moe = 1; best = a * b; }
        } else if ((*e == 'b' || *e == 'B') && !isalpha((unsigned char)e[1])) {
            best = a;
        }
    }
    return best;
}

/* Features of one configuration; an unknown level leaves its one-hot at 0. */
static void fspec_row(const fspec *f, const char *const dims[NDIM], float *out) {
    int idx[NDIM];
    for (int d = 0; d < NDIM; d++) idx[d] = level_index(f, d, dims[d]);
    size_t k = 0;
    for (int d = 0; d < NDIM; d++) {
        if (!f->use_dim[d]) continue;
        for (size_t i = 0; i < f->nlev[d]; i++) out[k++] = (int)i == idx[d] ? 1.0f : 0.0f;
    }
    if (f->interactions)
        for (int q = 0; q < 3; q++) {
            int a = inter_pairs[q][0], b = inter_pairs[q][1];
            for (size_t i = 0; i < f->nlev[a]; i++)
                for (size_t j = 0; j < f->nlev[b]; j++)
                    out[k++] = ((int)i == idx[a] && (int)j == idx[b]) ? 1.0f : 0.0f;
        }
    if (f->descriptors) {
        double moe;
        double size = desc_model_size(dims[D_MODEL], &moe);
        out[k++] = (float)desc_format_bits(dims[D_PREC]);
        out[k++] = (float)desc_hw_generation(dims[D_HW]);
        out[k++] = strncmp(dims[D_HW], "mi", 2) ? 0.0f : 1.0f;
        out[k++] = (float)size;
        out[k++] = (float)moe;
    }
}

static drift_status fspec_names(const fspec *f, char ***names, drift_error *err) {
    char **v = calloc(f->p ? f->p : 1, sizeof *v);
    if (!v) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    size_t k = 0;
    for (int d = 0; d < NDIM; d++) {
        if (!f->use_dim[d]) continue;
        for (size_t i = 0; i < f->nlev[d]; i++) v[k++] = drift_asprintf("%s=%s", dim_names[d], f->lev[d][i]);
    }
    if (f->interactions)
        for (int q = 0; q < 3; q++) {
            int a = inter_pairs[q][0], b = inter_pairs[q][1];
            for (size_t i = 0; i < f->nlev[a]; i++)
                for (size_t j = 0; j < f->nlev[b]; j++)
                    v[k++] = drift_asprintf("%s=%s x %s=%s", dim_names[a], f->lev[a][i], dim_names[b],
                                            f->lev[b][j]);
        }
    if (f->descriptors)
        for (int i = 0; i < N_DESC; i++) v[k++] = drift_strdup(desc_names[i]);
    for (size_t i = 0; i < k; i++)
        if (!v[i]) {
            drift_pri_names_free(v, k);
            return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        }
    *names = v;
    return DRIFT_OK;
}

void drift_pri_names_free(char **names, size_t n) {
    if (!names) return;
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
}

void drift_pri_options_init(drift_pri_options *o) {
    memset(o, 0, sizeof *o);
    o->nthread = 1;
    o->seed = 42;
    o->cv_folds = 3;
    o->interactions = 1;
    o->tune = 1;
}

drift_status drift_pri_feature_names(const drift_table *t, const drift_pri_options *o, char ***names,
                                     size_t *n, drift_error *err) {
    drift_pri_options def;
    if (!o) { drift_pri_options_init(&def); o = &def; }
    fspec f;
    *names = NULL;
    *n = 0;
    drift_status st = fspec_from_table(t, o, &f, err);
    if (st) return st;
    st = fspec_names(&f, names, err);
    if (!st) *n = f.p;
    fspec_free(&f);
    return st;
}

/* (n, p) features of every table row, row-major floats */
static float *table_features(const drift_table *t, const fspec *f) {
    float *X = malloc((t->n_rows * f->p + 1) * sizeof *X);
    if (!X) return NULL;
    for (size_t r = 0; r < t->n_rows; r++) {
        const char *dims[NDIM];
        for (int d = 0; d < NDIM; d++) dims[d] = t->rows[r].dims[d];
        fspec_row(f, dims, X + r * f->p);
    }
    return X;
}

/* -------------------------------------------------------------- xgboost */

typedef struct hparams {
    int depth;
    double eta;
    double mcw;
    int rounds;
} hparams;

/* --no-tune: fixed (the values python3-xgboost is checked against) */
static const hparams default_hp = {4, 0.1, 1, 200};

static drift_status xgb_fail(drift_error *err, const char *what) {
    const char *m = XGBGetLastError();
    return drift_error_set(err, DRIFT_ERR_XGBOOST, "xgboost %s: %s", what, m && *m ? m : "unknown error");
}

#define XGB(call, what)                                                                            \
    do {                                                                                           \
        if ((call) != 0) { st = xgb_fail(err, what); goto done; }                                  \
    } while (0)

static drift_status xgb_dmatrix(const float *X, const float *y, size_t n, size_t p, DMatrixHandle *out,
                                drift_error *err) {
    drift_status st = DRIFT_OK;
    *out = NULL;
    /* one thread: the default (all cores) wakes an OpenMP team for a few hundred rows */
    XGB(XGDMatrixCreateFromMat_omp(X, (bst_ulong)n, (bst_ulong)p, NAN, out, 1), "XGDMatrixCreateFromMat_omp");
    if (y) XGB(XGDMatrixSetFloatInfo(*out, "label", y, (bst_ulong)n), "XGDMatrixSetFloatInfo");
done:
    if (st && *out) { XGDMatrixFree(*out); *out = NULL; }
    return st;
}

/* A booster with the parameters set, no tree yet; cache: the matrices it
 * will train on and predict again (xgboost then predicts new trees only). */
static drift_status xgb_booster(DMatrixHandle *cache, int ncache, const hparams *hp, unsigned seed, int nthread,
                                BoosterHandle *out, drift_error *err) {
    drift_status st = DRIFT_OK;
    BoosterHandle b = NULL;
    char buf[64];
    *out = NULL;
    XGB(XGBoosterCreate(cache, (bst_ulong)ncache, &b), "XGBoosterCreate");
    XGB(XGBoosterSetParam(b, "verbosity", "0"), "XGBoosterSetParam");
    XGB(XGBoosterSetParam(b, "objective", "reg:squarederror"), "XGBoosterSetParam");
    XGB(XGBoosterSetParam(b, "tree_method", "hist"), "XGBoosterSetParam");
    snprintf(buf, sizeof buf, "%d", hp->depth);
    XGB(XGBoosterSetParam(b, "max_depth", buf), "XGBoosterSetParam");
    snprintf(buf, sizeof buf, "%.17g", hp->eta);
    XGB(XGBoosterSetParam(b, "eta", buf), "XGBoosterSetParam");
    snprintf(buf, sizeof buf, "%.17g", hp->mcw);
    XGB(XGBoosterSetParam(b, "min_child_weight", buf), "XGBoosterSetParam");
    snprintf(buf, sizeof buf, "%u", seed);
    XGB(XGBoosterSetParam(b, "seed", buf), "XGBoosterSetParam");
    snprintf(buf, sizeof buf, "%d", nthread > 0 ? nthread : 1);
    XGB(XGBoosterSetParam(b, "nthread", buf), "XGBoosterSetParam");
    *out = b;
    b = NULL;
done:
    if (b) XGBoosterFree(b);
    return st;
}

static drift_status xgb_train(const float *X, const float *y, size_t n, size_t p, const hparams *hp,
                              unsigned seed, int nthread, BoosterHandle *out, drift_error *err) {
    drift_status st;
    DMatrixHandle dm = NULL;
    BoosterHandle b = NULL;
    *out = NULL;
    if ((st = xgb_dmatrix(X, y, n, p, &dm, err))) return st;
    if ((st = xgb_booster(&dm, 1, hp, seed, nthread, &b, err))) goto done;
    for (int it = 0; it < hp->rounds; it++) XGB(XGBoosterUpdateOneIter(b, it, dm), "XGBoosterUpdateOneIter");
    *out = b;
    b = NULL;
done:
    if (b) XGBoosterFree(b);
    XGDMatrixFree(dm);
    return st;
}

/* pred (n) of matrix dm from the first `rounds` trees (0 = all) */
static drift_status xgb_predict_dm(BoosterHandle b, DMatrixHandle dm, size_t n, int rounds, double *pred,
                                   drift_error *err) {
    drift_status st = DRIFT_OK;
    char cfg[160];
    snprintf(cfg, sizeof cfg,
             "{\"type\":0,\"training\":false,\"iteration_begin\":0,\"iteration_end\":%d,\"strict_shape\":false}",
             rounds);
    const bst_ulong *shape;
    bst_ulong dim;
    const float *res;
    XGB(XGBoosterPredictFromDMatrix(b, dm, cfg, &shape, &dim, &res), "XGBoosterPredictFromDMatrix");
    bst_ulong total = 1;
    for (bst_ulong i = 0; i < dim; i++) total *= shape[i];
    if (total != n) { st = drift_error_set(err, DRIFT_ERR_XGBOOST, "xgboost returned %lu predictions for %zu rows", (unsigned long)total, n); goto done; }
    for (size_t i = 0; i < n; i++) pred[i] = res[i];
done:
    return st;
}

/* pred (n) from the first `rounds` trees (0 = all) */
static drift_status xgb_predict(BoosterHandle b, const float *X, size_t n, size_t p, int rounds, double *pred,
                                drift_error *err) {
    DMatrixHandle dm = NULL;
    drift_status st = xgb_dmatrix(X, NULL, n, p, &dm, err);
    if (!st) st = xgb_predict_dm(b, dm, n, rounds, pred, err);
    if (dm) XGDMatrixFree(dm);
    return st;
}

/* ----------------------------------------------------------- evaluation */

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

/* a data set: all rows' features and labels */
typedef struct dset {
    const float *X;   /* (N, p) */
    const float *y;   /* (N,) */
    size_t p;
} dset;

static drift_status gather(const dset *ds, const size_t *rows, size_t n, float **Xo, float **yo, drift_error *err) {
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

/* Shuffles rows in place with a seeded generator (Fisher-Yates). */
static void shuffle(size_t *v, size_t n, unsigned seed) {
    drift_rng r;
    drift_rng_seed(&r, seed);
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)drift_rng_below(&r, i);
        size_t t = v[i - 1]; v[i - 1] = v[j]; v[j] = t;
    }
}

/* Trains on rows tr and predicts rows te with the given parameters. */
static drift_status fit_predict(const dset *ds, const size_t *tr, size_t ntr, const size_t *te, size_t nte,
                                const hparams *hp, const drift_pri_options *o, double *pred_te,
                                double *pred_tr, drift_error *err) {
    float *Xtr = NULL, *ytr = NULL, *Xte = NULL, *yte = NULL;
    BoosterHandle b = NULL;
    drift_status st = gather(ds, tr, ntr, &Xtr, &ytr, err);
    if (!st) st = gather(ds, te, nte, &Xte, &yte, err);
    if (!st) st = xgb_train(Xtr, ytr, ntr, ds->p, hp, o->seed, 1, &b, err);
    if (!st && nte) st = xgb_predict(b, Xte, nte, ds->p, hp->rounds, pred_te, err);
    if (!st && pred_tr) st = xgb_predict(b, Xtr, ntr, ds->p, hp->rounds, pred_tr, err);
    if (b) XGBoosterFree(b);
    free(Xtr); free(ytr); free(Xte); free(yte);
    return st;
}

/* The tuning grid: a shallow and a deep tree at xgboost's default learning
 * rate. The number of trees is not on it: each configuration is grown on
 * the k inner folds side by side, one tree at a time, and the validation
 * error summed over the folds after every tree picks the count (early
 * stopping: stop once PATIENCE trees in a row have not lowered it by
 * MIN_GAIN of its value; at most MAX_ROUNDS). Two configurations x ~60
 * trees x 3 folds keep the 29 tuned fits of `pri eval` on the paper's 420
 * rows near 1.5 s of CPU: xgboost's cost is per tree node, not per row. */
static const hparams grid[] = {{3, 0.3, 1, 0}, {5, 0.3, 1, 0}};
#define N_GRID (sizeof grid / sizeof grid[0])
#define MAX_ROUNDS 300
#define PATIENCE 10
#define MIN_GAIN 0.003
#define MAX_FOLDS 20

/* one inner fold: its matrices, built once and shared by the whole grid */
typedef struct ifold {
    DMatrixHandle dtr, dva;
    float *yva;    /* (nva,) validation labels */
    size_t nva;
} ifold;

/* Grows hp (its rounds ignored) on the k folds in lockstep; *best_sse: the
 * validation SSE summed over the folds at the best tree count *best_rounds.
 * pred: scratch of the largest nva. */
static drift_status cv_curve(const ifold *fo, int k, const hparams *hp, unsigned seed, double *pred,
                             double *best_sse, int *best_rounds, drift_error *err) {
    drift_status st = DRIFT_OK;
    BoosterHandle b[MAX_FOLDS] = {0};
    double best = INFINITY;
    int br = 0, last_gain = 0;
    for (int f = 0; f < k && !st; f++) {
        DMatrixHandle cache[2] = {fo[f].dtr, fo[f].dva};
        st = xgb_booster(cache, 2, hp, seed, 1, &b[f], err);
    }
    for (int r = 0; r < MAX_ROUNDS && !st; r++) {
        double s = 0;
        for (int f = 0; f < k; f++) {
            XGB(XGBoosterUpdateOneIter(b[f], r, fo[f].dtr), "XGBoosterUpdateOneIter");
            /* all trees: xgboost adds the newest to its cached predictions */
            if ((st = xgb_predict_dm(b[f], fo[f].dva, fo[f].nva, 0, pred, err))) goto done;
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
    for (int f = 0; f < k; f++)
        if (b[f]) XGBoosterFree(b[f]);
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
static drift_status tune_grouped(const dset *ds, const size_t *tr, size_t ntr, const int *group,
                                 const drift_pri_options *o, hparams *best, drift_error *err) {
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
    shuffle(perm, ntr, o->seed + 7919u);
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
        if ((st = xgb_dmatrix(Xtr, ytr, a, ds->p, &F->dtr, err))) goto done;
        if ((st = xgb_dmatrix(Xva, NULL, v, ds->p, &F->dva, err))) goto done;
        free(Xtr); free(ytr); free(Xva);
        Xtr = ytr = Xva = NULL;
    }
    if (nfo == 0) goto done;
    double best_sse = INFINITY;
    for (size_t c = 0; c < N_GRID; c++) {
        hparams hp = grid[c];
        double sse;
        if ((st = cv_curve(fo, nfo, &hp, o->seed, pred, &sse, &hp.rounds, err))) goto done;
        if (sse < best_sse && hp.rounds > 0) {
            best_sse = sse;
            *best = hp;
        }
    }
done:
    for (int f = 0; f < nfo; f++) {
        if (fo[f].dtr) XGDMatrixFree(fo[f].dtr);
        if (fo[f].dva) XGDMatrixFree(fo[f].dva);
        free(fo[f].yva);
    }
    free(perm); free(itr); free(iva); free(fold); free(pred);
    free(Xtr); free(ytr); free(Xva);
    return st;
}


/* Tuned fit on tr, evaluated on te; fills h (name set by caller). */
static drift_status eval_split(const dset *ds, const size_t *tr, size_t ntr, const size_t *te, size_t nte,
                               const int *group, const drift_pri_options *o, drift_pri_holdout *h,
                               double *pred_te_out, drift_error *err) {
    hparams hp;
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

/* One tuned fit: the evaluations of drift_pri_evaluate and the folds of
 * drift_pri_fit are independent, so they run side by side (o->nthread of
 * them at a time, every booster on one thread: the results do not depend on
 * the thread count). */
typedef struct job {
    const dset *ds;
    size_t *tr, *te;        /* (ntr,), (nte,) rows, owned */
    size_t ntr, nte;
    const int *group;       /* inner folds hold out whole groups, or NULL */
    int tune_only;          /* only choose hp: no fit, no test rows */
    hparams hp;             /* chosen */
    drift_pri_holdout *h;   /* filled when !tune_only (name set by the caller) */
    double *pred_te;        /* (nte,) test predictions, or NULL */
    drift_status st;
    drift_error err;
} job;

static drift_status job_alloc(job *j, const dset *ds, size_t N, drift_error *err) {
    memset(j, 0, sizeof *j);
    j->ds = ds;
    j->tr = malloc((N + 1) * sizeof *j->tr);
    j->te = malloc((N + 1) * sizeof *j->te);
    if (!j->tr || !j->te) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    return DRIFT_OK;
}

static void jobs_free(job *jobs, size_t n) {
    if (!jobs) return;
    for (size_t i = 0; i < n; i++) {
        free(jobs[i].tr);
        free(jobs[i].te);
    }
    free(jobs);
}

/* Runs every job; returns the first failure in job order (deterministic). */
static drift_status jobs_run(job *jobs, size_t n, const drift_pri_options *o, drift_error *err) {
    int nt = o->nthread > 1 ? o->nthread : 1;
    if ((size_t)nt > n) nt = n ? (int)n : 1;
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1)
    for (size_t i = 0; i < n; i++) {
        job *j = &jobs[i];
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
/* OLS on the one-hot features of rows tr (pinv, intercept added), R^2 on te. */
static drift_status linear_r2(const dset *ds, const fspec *f, const size_t *tr, size_t ntr, const size_t *te,
                              size_t nte, double *r2, drift_error *err) {
    size_t q = 1;
    for (int d = 0; d < NDIM; d++) q += f->nlev[d];   /* one-hot columns are first */
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

/* See analysis.h. */
char *drift_pri_cv_summary(const drift_pri_eval *e, const char *r2, const char *pm) {
    if (e->cv_folds_defined >= 5) return drift_asprintf("5-fold CV %s = %.3f %s %.3f", r2, e->cv_r2_mean, pm, e->cv_r2_sd);
    if (e->cv_folds_defined > 0)
        return drift_asprintf("5-fold CV %s = %.3f %s %.3f over %d folds (%d had one flip rate in all test rows: no %s)",
                              r2, e->cv_r2_mean, pm, e->cv_r2_sd, e->cv_folds_defined, 5 - e->cv_folds_defined, r2);
    return drift_asprintf("5-fold CV %s: none defined (every fold's test rows share one flip rate)", r2);
}

void drift_pri_eval_free(drift_pri_eval *e) {
    if (!e) return;
    free(e->levels);
    free(e->importance);
    free(e);
}

static drift_status build_dset(const drift_table *t, const fspec *f, float **X, float **y, drift_error *err) {
    *X = table_features(t, f);
    *y = malloc((t->n_rows + 1) * sizeof **y);
    if (!*X || !*y) {
        free(*X); free(*y);
        *X = *y = NULL;
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < t->n_rows; i++) (*y)[i] = (float)t->rows[i].flip_rate;
    return DRIFT_OK;
}

static drift_status importance(BoosterHandle b, char **names, size_t p, drift_pri_eval *e, drift_error *err) {
    drift_status st = DRIFT_OK;
    bst_ulong nf, dim;
    const char **fn;
    const bst_ulong *shape;
    const float *sc;
    XGB(XGBoosterFeatureScore(b, "{\"importance_type\":\"total_gain\"}", &nf, &fn, &dim, &shape, &sc),
        "XGBoosterFeatureScore");
    e->importance = calloc(nf ? nf : 1, sizeof *e->importance);
    if (!e->importance) { st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory"); goto done; }
    double tot = 0;
    for (bst_ulong i = 0; i < nf; i++) tot += sc[i];
    for (bst_ulong i = 0; i < nf; i++) {
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
done:
    return st;
}

drift_status drift_pri_evaluate(const drift_table *t, const drift_pri_options *opt, drift_pri_eval **out,
                                drift_error *err) {
    drift_pri_options def;
    if (!opt) { drift_pri_options_init(&def); opt = &def; }
    *out = NULL;
    if (t->n_rows < 10) return drift_error_set(err, DRIFT_ERR_INVALID, "PRI needs at least 10 rows, the table has %zu", t->n_rows);
    fspec f, fno, fhw;
    float *X = NULL, *y = NULL, *Xno = NULL, *yno = NULL, *Xhw = NULL, *yhw = NULL;
    size_t N = t->n_rows;
    size_t *perm = malloc(N * sizeof *perm);
    int *group = malloc((NDIM * N + 1) * sizeof *group);   /* (NDIM, N) level index of every row */
    char **names = NULL;
    drift_pri_eval *e = calloc(1, sizeof *e);
    job *jobs = NULL;
    size_t njobs = 0;
    drift_pri_holdout tmp[3 + 5];
    drift_status st = fspec_from_table(t, opt, &f, err);
    if (st) { free(perm); free(e); free(group); return st; }
    /* ablation feature sets: no interactions; hardware one-hot only */
    fno = f; fhw = f;
    fno.interactions = 0; fno.descriptors = 0;
    fspec_count(&fno);
    for (int d = 0; d < NDIM; d++) fhw.use_dim[d] = d == D_HW;
    fhw.interactions = 0; fhw.descriptors = 0;
    fspec_count(&fhw);
    BoosterHandle full = NULL;
    size_t nl = 0;
    for (int d = 0; d < NDIM; d++) nl += f.nlev[d];
    if (!perm || !e || !group) { st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory"); goto done; }
    e->levels = calloc(nl ? nl : 1, sizeof *e->levels);
    /* random split + 2 ablations, 5 folds, the levels, the full model */
    jobs = calloc(3 + 5 + nl + 1, sizeof *jobs);
    if (!e->levels || !jobs) { st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory"); goto done; }
    if ((st = build_dset(t, &f, &X, &y, err))) goto done;
    if ((st = build_dset(t, &fno, &Xno, &yno, err))) goto done;
    if ((st = build_dset(t, &fhw, &Xhw, &yhw, err))) goto done;
    dset ds = {X, y, f.p}, dsno = {Xno, yno, fno.p}, dshw = {Xhw, yhw, fhw.p};
    e->n_features = f.p;
    for (int d = 0; d < NDIM; d++)
        for (size_t i = 0; i < N; i++) group[(size_t)d * N + i] = level_index(&f, d, t->rows[i].dims[d]);

    /* random 80/20 split, and the two xgboost ablations on the same rows */
    for (size_t i = 0; i < N; i++) perm[i] = i;
    shuffle(perm, N, opt->seed);
    size_t nte = N / 5, ntr = N - nte;
    const dset *abl[3] = {&ds, &dsno, &dshw};
    for (int a = 0; a < 3; a++) {
        job *j = &jobs[njobs++];
        if ((st = job_alloc(j, abl[a], N, err))) goto done;
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
        job *j = &jobs[njobs++];
        if ((st = job_alloc(j, &ds, N, err))) goto done;
        for (size_t i = 0; i < N; i++) {
            if ((int)(i % 5) == k) j->te[j->nte++] = perm[i];
            else j->tr[j->ntr++] = perm[i];
        }
        j->h = &tmp[3 + k];
    }
    /* held-out level of every dimension */
    for (int d = 0; d < NDIM; d++)
        for (size_t l = 0; l < f.nlev[d]; l++) {
            const int *g = group + (size_t)d * N;
            size_t a = 0, b = 0;
            for (size_t i = 0; i < N; i++) {
                if (g[i] == (int)l) b++;
                else a++;
            }
            if (a < 10 || b < 2) continue; /* nothing to learn from or to score */
            job *j = &jobs[njobs++];
            if ((st = job_alloc(j, &ds, N, err))) goto done;
            for (size_t i = 0; i < N; i++) {
                if (g[i] == (int)l) j->te[j->nte++] = i;
                else j->tr[j->ntr++] = i;
            }
            j->group = opt->grouped_cv ? g : NULL;
            drift_pri_holdout *h = j->h = &e->levels[e->n_levels++];
            snprintf(h->name, sizeof h->name, "%s=%s", dim_names[d], f.lev[d][l]);
            h->paper_r2 = NAN;
            for (int c = 0; c < 4; c++)
                if (!strcmp(paper_cases[c].dim, dim_names[d]) && !strcmp(paper_cases[c].level, f.lev[d][l]))
                    h->paper_r2 = paper_cases[c].r2;
        }
    /* the full model (for importance): hyper-parameters on all rows */
    job *jf = &jobs[njobs++];
    if ((st = job_alloc(jf, &ds, N, err))) goto done;
    for (size_t i = 0; i < N; i++) jf->tr[i] = i;
    jf->ntr = N;
    jf->tune_only = 1;

    if ((st = jobs_run(jobs, njobs, opt, err))) goto done;

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
    if ((st = xgb_train(X, y, N, f.p, &jf->hp, opt->seed, 1, &full, err))) goto done;
    if ((st = fspec_names(&f, &names, err))) goto done;
    if ((st = importance(full, names, f.p, e, err))) goto done;
done:
    if (full) XGBoosterFree(full);
    jobs_free(jobs, njobs);
    drift_pri_names_free(names, f.p);
    fspec_free(&f);
    free(X); free(y); free(Xno); free(yno); free(Xhw); free(yhw);
    free(perm); free(group);
    if (st) drift_pri_eval_free(e);
    else *out = e;
    return st;
}

/* ---------------------------------------------------------- fitted model */

typedef struct quant {
    double lo, hi;  /* 2.5% and 97.5% quantiles of out-of-fold residuals y - pred */
    size_t n;
} quant;

struct drift_pri {
    fspec f;
    hparams hp;
    BoosterHandle booster;
    char *baseline[NDIM];     /* NULL = same as the query */
    quant all;
    quant *by_wl;             /* (f.nlev[D_WL],), n = 0 when too few rows */
};

void drift_pri_free(drift_pri *p) {
    if (!p) return;
    if (p->booster) XGBoosterFree(p->booster);
    for (int d = 0; d < NDIM; d++) free(p->baseline[d]);
    free(p->by_wl);
    fspec_free(&p->f);
    free(p);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* numpy's default (linear) quantile of sorted v */
static double quantile_sorted(const double *v, size_t n, double q) {
    if (n == 0) return NAN;
    double h = (double)(n - 1) * q;
    size_t i = (size_t)floor(h);
    if (i + 1 >= n) return v[n - 1];
    return v[i] + (h - (double)i) * (v[i + 1] - v[i]);
}

static quant quantiles(double *v, size_t n) {
    qsort(v, n, sizeof *v, cmp_double);
    quant q = {quantile_sorted(v, n, 0.025), quantile_sorted(v, n, 0.975), n};
    return q;
}

#define MIN_WL_RESIDUALS 40

drift_status drift_pri_fit(const drift_table *t, const drift_pri_options *opt, drift_pri **out, drift_error *err) {
    drift_pri_options def;
    if (!opt) { drift_pri_options_init(&def); opt = &def; }
    *out = NULL;
    if (t->n_rows < 10) return drift_error_set(err, DRIFT_ERR_INVALID, "PRI needs at least 10 rows, the table has %zu", t->n_rows);
    drift_pri *p = calloc(1, sizeof *p);
    if (!p) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    size_t N = t->n_rows;
    float *X = NULL, *y = NULL;
    size_t *perm = malloc(N * sizeof *perm);
    double *res = malloc(N * sizeof *res), *pred = malloc(5 * (N / 5 + 1) * sizeof *pred), *tmp = malloc(N * sizeof *tmp);
    job *jobs = NULL;
    size_t njobs = 0;
    drift_pri_holdout fold_h[5];
    drift_status st = fspec_from_table(t, opt, &p->f, err);
    if (st) goto done;
    if (!perm || !res || !pred || !tmp) { st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory"); goto done; }
    if ((st = build_dset(t, &p->f, &X, &y, err))) goto done;
    dset ds = {X, y, p->f.p};
    /* out-of-fold residuals, each fold tuned inside its own training rows;
     * job 5 tunes the final model on all rows */
    for (size_t i = 0; i < N; i++) perm[i] = i;
    shuffle(perm, N, opt->seed + 1u);
    if (!(jobs = calloc(6, sizeof *jobs))) { st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory"); goto done; }
    for (int k = 0; k < 6; k++) {
        job *j = &jobs[njobs++];
        if ((st = job_alloc(j, &ds, N, err))) goto done;
        for (size_t i = 0; i < N; i++) {
            if (k < 5 && (int)(i % 5) == k) j->te[j->nte++] = perm[i];
            else j->tr[j->ntr++] = perm[i];
        }
        j->tune_only = k == 5;
        j->h = &fold_h[k < 5 ? k : 0];
        j->pred_te = k < 5 ? pred + (size_t)k * (N / 5 + 1) : NULL;
    }
    if ((st = jobs_run(jobs, njobs, opt, err))) goto done;
    for (int k = 0; k < 5; k++)
        for (size_t i = 0; i < jobs[k].nte; i++) res[jobs[k].te[i]] = y[jobs[k].te[i]] - jobs[k].pred_te[i];
    memcpy(tmp, res, N * sizeof *tmp);
    p->all = quantiles(tmp, N);
    p->by_wl = calloc(p->f.nlev[D_WL] ? p->f.nlev[D_WL] : 1, sizeof *p->by_wl);
    if (!p->by_wl) { st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory"); goto done; }
    for (size_t l = 0; l < p->f.nlev[D_WL]; l++) {
        size_t n = 0;
        for (size_t i = 0; i < N; i++)
            if (!strcmp(t->rows[i].dims[D_WL], p->f.lev[D_WL][l])) tmp[n++] = res[i];
        if (n >= MIN_WL_RESIDUALS) p->by_wl[l] = quantiles(tmp, n);
    }
    /* final model on all rows */
    p->hp = jobs[5].hp;
    if ((st = xgb_train(X, y, N, p->f.p, &p->hp, opt->seed, 1, &p->booster, err))) goto done;
    /* baseline: given, else the paper's h100/fp16/vllm, else a reference-like level */
    static const char *const paper_base[NDIM] = {NULL, "h100", "fp16", "vllm", NULL};
    for (int d = D_HW; d <= D_FW; d++) {
        const char *b = NULL;
        if (opt->baseline[d]) {
            if (level_index(&p->f, d, opt->baseline[d]) < 0) {
                drift_buf kb = {0};
                for (size_t i = 0; i < p->f.nlev[d]; i++) buf_printf(&kb, "%s%s", i ? ", " : "", p->f.lev[d][i]);
                st = drift_error_set(err, DRIFT_ERR_NOT_FOUND, "baseline %s '%s' is not in the table (known: %s)",
                                     dim_names[d], opt->baseline[d], kb.data ? kb.data : "");
                buf_free(&kb);
                goto done;
            }
            b = opt->baseline[d];
        } else if (level_index(&p->f, d, paper_base[d]) >= 0) {
            b = paper_base[d];
        } else if (d == D_FW && level_index(&p->f, d, "ref") >= 0) {
            b = "ref";
        } else {
            size_t best = 0, bi = 0;
            double best_bits = -1;
            for (size_t l = 0; l < p->f.nlev[d]; l++) {
                size_t c = 0;
                for (size_t i = 0; i < N; i++) c += !strcmp(t->rows[i].dims[d], p->f.lev[d][l]);
                double bits = d == D_PREC ? desc_format_bits(p->f.lev[d][l]) : 0;
                if (isnan(bits)) bits = 0;
                if (bits > best_bits || (bits == best_bits && c > best)) { best_bits = bits; best = c; bi = l; }
            }
            b = p->f.lev[d][bi];
        }
        if (!(p->baseline[d] = drift_strdup(b))) { st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory"); goto done; }
    }
done:
    jobs_free(jobs, njobs);
    free(X); free(y); free(perm); free(res); free(pred); free(tmp);
    if (st) drift_pri_free(p);
    else *out = p;
    return st;
}

size_t drift_pri_levels(const drift_pri *p, int dim, const char *const **levels) {
    if (dim < 0 || dim >= NDIM) { *levels = NULL; return 0; }
    *levels = (const char *const *)p->f.lev[dim];
    return p->f.nlev[dim];
}

const char *drift_pri_baseline(const drift_pri *p, int dim) {
    return dim >= 0 && dim < NDIM ? p->baseline[dim] : NULL;
}

static drift_status unknown_level(const drift_pri *p, int d, const char *v, const char *what,
                                  drift_error *err) {
    drift_buf b = {0};
    for (size_t i = 0; i < p->f.nlev[d]; i++) buf_printf(&b, "%s%s", i ? ", " : "", p->f.lev[d][i]);
    drift_status st = drift_error_set(err, DRIFT_ERR_NOT_FOUND, "unknown %s%s '%s' (known: %s)", what,
                                      dim_names[d], v ? v : "(none)", b.data ? b.data : "");
    buf_free(&b);
    return st;
}

drift_status drift_pri_predict(const drift_pri *p, const drift_pri_query *q, const drift_pri_query *base,
                               drift_pri_prediction *out, drift_error *err) {
    memset(out, 0, sizeof *out);
    const char *dims[NDIM] = {q->model, q->hardware, q->precision, q->framework, q->workload};
    for (int d = 0; d < NDIM; d++)
        if (!dims[d] || level_index(&p->f, d, dims[d]) < 0) return unknown_level(p, d, dims[d], "", err);
    const char *bq[NDIM] = {0};
    if (base) {
        bq[D_MODEL] = base->model; bq[D_HW] = base->hardware; bq[D_PREC] = base->precision;
        bq[D_FW] = base->framework; bq[D_WL] = base->workload;
    }
    const char *bl[NDIM];
    for (int d = 0; d < NDIM; d++) {
        bl[d] = bq[d] ? bq[d] : p->baseline[d] ? p->baseline[d] : dims[d];
        if (level_index(&p->f, d, bl[d]) < 0) return unknown_level(p, d, bl[d], "baseline ", err);
    }
    float *x = malloc((p->f.p + 1) * sizeof *x);
    if (!x) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    fspec_row(&p->f, dims, x);
    double pr = NAN;
    drift_status st = xgb_predict(p->booster, x, 1, p->f.p, 0, &pr, err);
    free(x);
    if (st) return st;
    quant qq = p->all;
    int wl = level_index(&p->f, D_WL, dims[D_WL]);
    if (p->by_wl && wl >= 0 && p->by_wl[wl].n >= MIN_WL_RESIDUALS) qq = p->by_wl[wl];
    out->flip_rate = fmin(100.0, fmax(0.0, pr));
    out->lo = fmin(100.0, fmax(0.0, pr + qq.lo));
    out->hi = fmin(100.0, fmax(0.0, pr + qq.hi));
    out->coverage = 0.95;
    out->risk = out->flip_rate < 1.0 ? "low" : out->flip_rate < 5.0 ? "medium" : "high";
    /* what changes vs the baseline (workload is never a change) */
    int diff[4] = {0}, ndiff = 0;
    size_t off = 0;
    for (int d = 0; d < 4; d++) {
        diff[d] = strcmp(bl[d], dims[d]) != 0;
        if (diff[d]) {
            ndiff++;
            int w = snprintf(out->differs + off, sizeof out->differs - off, "%s%s", off ? "," : "", dim_names[d]);
            if (w > 0 && (size_t)w < sizeof out->differs - off) off += (size_t)w;
        }
    }
    if (ndiff == 0) {
        out->change = "none";
        out->advice = "no change from the baseline: nothing to gate";
    } else if (!diff[D_MODEL] && !diff[D_FW]) {
        out->change = "systematic";
        out->advice = "systematic: predict, then confirm on ~100 prompts";
    } else {
        out->change = ndiff > 1 ? "combined" : "idiosyncratic";
        out->advice = "idiosyncratic/combined: measure fully before deploying";
    }
    return DRIFT_OK;
}

/* --------------------------------------------------------------- save/load */

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static char *b64_encode(const unsigned char *s, size_t n) {
    char *o = malloc(4 * ((n + 2) / 3) + 1);
    if (!o) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)s[i] << 16 | (i + 1 < n ? (unsigned)s[i + 1] << 8 : 0) | (i + 2 < n ? s[i + 2] : 0);
        o[k++] = b64[v >> 18 & 63];
        o[k++] = b64[v >> 12 & 63];
        o[k++] = i + 1 < n ? b64[v >> 6 & 63] : '=';
        o[k++] = i + 2 < n ? b64[v & 63] : '=';
    }
    o[k] = 0;
    return o;
}

/* returns malloc'd bytes or NULL on bad input / no memory */
static unsigned char *b64_decode(const char *s, size_t *n) {
    size_t len = strlen(s);
    if (len % 4) return NULL;
    unsigned char *o = malloc(len / 4 * 3 + 1);
    if (!o) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < len; i += 4) {
        unsigned v = 0;
        int pad = 0;
        for (int j = 0; j < 4; j++) {
            char c = s[i + j];
            const char *pos = c ? strchr(b64, c) : NULL;
            if (c == '=' && i + 4 == len && j >= 2) { pad++; v <<= 6; continue; }
            if (!pos || pad) { free(o); return NULL; }
            v = v << 6 | (unsigned)(pos - b64);
        }
        o[k++] = (unsigned char)(v >> 16);
        if (pad < 2) o[k++] = (unsigned char)(v >> 8);
        if (pad < 1) o[k++] = (unsigned char)v;
    }
    *n = k;
    return o;
}

static json_t *quant_json(const quant *q) {
    return json_pack("{s:f,s:f,s:I}", "q025", q->lo, "q975", q->hi, "n", (json_int_t)q->n);
}

drift_status drift_pri_save(const drift_pri *p, const char *path, drift_error *err) {
    drift_status st = DRIFT_OK;
    bst_ulong len;
    const char *raw;
    char *enc = NULL, **names = NULL;
    json_t *root = NULL;
    XGB(XGBoosterSaveModelToBuffer(p->booster, "{\"format\":\"json\"}", &len, &raw), "XGBoosterSaveModelToBuffer");
    if (!(enc = b64_encode((const unsigned char *)raw, len))) { st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory"); goto done; }
    if ((st = fspec_names(&p->f, &names, err))) goto done;
    root = json_object();
    json_object_set_new(root, "format", json_string("driftbench-pri"));
    json_object_set_new(root, "version", json_integer(1));
    json_t *lv = json_object(), *bl = json_object(), *fn = json_array(), *rq = json_object(), *bw = json_object();
    for (int d = 0; d < NDIM; d++) {
        json_t *a = json_array();
        for (size_t i = 0; i < p->f.nlev[d]; i++) json_array_append_new(a, json_string(p->f.lev[d][i]));
        json_object_set_new(lv, dim_names[d], a);
        json_object_set_new(bl, dim_names[d], p->baseline[d] ? json_string(p->baseline[d]) : json_null());
    }
    for (size_t i = 0; i < p->f.p; i++) json_array_append_new(fn, json_string(names[i]));
    json_object_set_new(rq, "all", quant_json(&p->all));
    for (size_t l = 0; l < p->f.nlev[D_WL]; l++)
        if (p->by_wl[l].n) json_object_set_new(bw, p->f.lev[D_WL][l], quant_json(&p->by_wl[l]));
    json_object_set_new(rq, "by_workload", bw);
    json_object_set_new(root, "levels", lv);
    json_object_set_new(root, "baseline", bl);
    json_object_set_new(root, "features", fn);
    json_object_set_new(root, "interactions", json_boolean(p->f.interactions));
    json_object_set_new(root, "descriptors", json_boolean(p->f.descriptors));
    json_object_set_new(root, "params", json_pack("{s:i,s:f,s:f,s:i}", "max_depth", p->hp.depth, "eta", p->hp.eta,
                                                  "min_child_weight", p->hp.mcw, "n_estimators", p->hp.rounds));
    json_object_set_new(root, "residual_quantiles", rq);
    json_object_set_new(root, "xgboost_model_json_base64", json_string(enc));
    if (json_dump_file(root, path, JSON_INDENT(1) | JSON_REAL_PRECISION(17)) != 0)
        st = drift_error_set(err, DRIFT_ERR_IO, "%s: cannot write", path);
done:
    json_decref(root);
    free(enc);
    drift_pri_names_free(names, p->f.p);
    return st;
}

static drift_status load_fail(drift_error *err, const char *path, const char *field) {
    return drift_error_set(err, DRIFT_ERR_PARSE, "%s: field %s: missing or malformed", path, field);
}

static int quant_from_json(json_t *o, quant *q) {
    json_t *a = json_object_get(o, "q025"), *b = json_object_get(o, "q975"), *n = json_object_get(o, "n");
    if (!json_is_number(a) || !json_is_number(b) || !json_is_integer(n) || json_integer_value(n) < 0) return -1;
    q->lo = json_number_value(a);
    q->hi = json_number_value(b);
    q->n = (size_t)json_integer_value(n);
    return q->lo <= q->hi ? 0 : -1;
}

drift_status drift_pri_load(const char *path, drift_pri **out, drift_error *err) {
    *out = NULL;
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root) {
        if (je.line < 0) return drift_error_set(err, DRIFT_ERR_IO, "%s: %s", path, je.text);
        return drift_error_set(err, DRIFT_ERR_PARSE, "%s:%d: %s", path, je.line, je.text);
    }
    drift_status st = DRIFT_OK;
    unsigned char *raw = NULL;
    char **names = NULL;
    drift_pri *p = calloc(1, sizeof *p);
    if (!p) { json_decref(root); return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory"); }
    json_t *fmt = json_object_get(root, "format");
    if (!json_is_string(fmt) || strcmp(json_string_value(fmt), "driftbench-pri")) { st = load_fail(err, path, "format"); goto done; }
    json_t *lv = json_object_get(root, "levels"), *bl = json_object_get(root, "baseline");
    if (!json_is_object(lv)) { st = load_fail(err, path, "levels"); goto done; }
    for (int d = 0; d < NDIM; d++) {
        json_t *a = json_object_get(lv, dim_names[d]);
        if (!json_is_array(a) || json_array_size(a) == 0) { st = load_fail(err, path, dim_names[d]); goto done; }
        size_t n = json_array_size(a);
        p->f.lev[d] = calloc(n, sizeof *p->f.lev[d]);
        if (!p->f.lev[d]) { st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory"); goto done; }
        for (size_t i = 0; i < n; i++) {
            json_t *s = json_array_get(a, i);
            if (!json_is_string(s) || (i && strcmp(p->f.lev[d][i - 1], json_string_value(s)) >= 0)) {
                p->f.nlev[d] = i;
                st = load_fail(err, path, "levels (sorted strings)");
                goto done;
            }
            p->f.lev[d][i] = drift_strdup(json_string_value(s));
            p->f.nlev[d] = i + 1;
            if (!p->f.lev[d][i]) { st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory"); goto done; }
        }
        p->f.use_dim[d] = 1;
        json_t *b = json_is_object(bl) ? json_object_get(bl, dim_names[d]) : NULL;
        if (json_is_string(b)) {
            if (level_index(&p->f, d, json_string_value(b)) < 0) { st = load_fail(err, path, "baseline"); goto done; }
            p->baseline[d] = drift_strdup(json_string_value(b));
        }
    }
    p->f.interactions = json_is_true(json_object_get(root, "interactions"));
    p->f.descriptors = json_is_true(json_object_get(root, "descriptors"));
    fspec_count(&p->f);
    /* the features must be the ones these levels give, in this order */
    json_t *fn = json_object_get(root, "features");
    if (!json_is_array(fn) || json_array_size(fn) != p->f.p) { st = load_fail(err, path, "features"); goto done; }
    if ((st = fspec_names(&p->f, &names, err))) goto done;
    for (size_t i = 0; i < p->f.p; i++) {
        json_t *s = json_array_get(fn, i);
        if (!json_is_string(s) || strcmp(json_string_value(s), names[i])) { st = load_fail(err, path, "features"); goto done; }
    }
    json_t *hp = json_object_get(root, "params");
    if (json_unpack(hp, "{s:i,s:F,s:F,s:i}", "max_depth", &p->hp.depth, "eta", &p->hp.eta, "min_child_weight",
                    &p->hp.mcw, "n_estimators", &p->hp.rounds)) { st = load_fail(err, path, "params"); goto done; }
    json_t *rq = json_object_get(root, "residual_quantiles");
    if (!json_is_object(rq) || quant_from_json(json_object_get(rq, "all"), &p->all)) { st = load_fail(err, path, "residual_quantiles.all"); goto done; }
    p->by_wl = calloc(p->f.nlev[D_WL], sizeof *p->by_wl);
    if (!p->by_wl) { st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory"); goto done; }
    json_t *bw = json_object_get(rq, "by_workload");
    for (size_t l = 0; l < p->f.nlev[D_WL]; l++) {
        json_t *o = json_is_object(bw) ? json_object_get(bw, p->f.lev[D_WL][l]) : NULL;
        if (o && quant_from_json(o, &p->by_wl[l])) { st = load_fail(err, path, "residual_quantiles.by_workload"); goto done; }
    }
    json_t *m = json_object_get(root, "xgboost_model_json_base64");
    size_t rlen = 0;
    if (!json_is_string(m) || !(raw = b64_decode(json_string_value(m), &rlen))) { st = load_fail(err, path, "xgboost_model_json_base64"); goto done; }
    XGB(XGBoosterCreate(NULL, 0, &p->booster), "XGBoosterCreate");
    XGB(XGBoosterLoadModelFromBuffer(p->booster, raw, (bst_ulong)rlen), "XGBoosterLoadModelFromBuffer");
    XGB(XGBoosterSetParam(p->booster, "nthread", "1"), "XGBoosterSetParam");
    {
        bst_ulong nf = 0;
        XGB(XGBoosterGetNumFeature(p->booster, &nf), "XGBoosterGetNumFeature");
        if (nf != p->f.p) { st = drift_error_set(err, DRIFT_ERR_PARSE, "%s: the xgboost model has %lu features, the file lists %zu", path, (unsigned long)nf, p->f.p); goto done; }
    }
done:
    drift_pri_names_free(names, p->f.p);
    free(raw);
    json_decref(root);
    if (st) drift_pri_free(p);
    else *out = p;
    return st;
}

