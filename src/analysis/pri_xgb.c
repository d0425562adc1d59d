/* pri_xgb.c - the PRI's xgboost wrapper: the only file that includes
 * <xgboost/c_api.h>. The rest of the PRI sees pri_booster / pri_dmatrix,
 * opaque pointers to xgboost's own handles.
 *
 * Every booster is a squared-error regressor with tree_method=hist, its seed
 * set and one thread (nthread): on a few hundred rows xgboost's cost is its
 * per-node overhead (OpenMP regions, allocations), and one thread per
 * booster keeps the results independent of how many boosters run side by
 * side. Matrices are built on one thread for the same reason.
 *
 * Every xgboost call is checked; a failure becomes DRIFT_ERR_XGBOOST with
 * the name of the call and xgboost's message (XGBGetLastError). */
#include <math.h>
#include <stdio.h>

#include <xgboost/c_api.h>

#include "analysis/pri_internal.h"

/* Our opaque pointers are xgboost's handles (void *), converted both ways. */
static BoosterHandle bh(pri_booster *b) { return (BoosterHandle)b; }
static DMatrixHandle dh(pri_dmatrix *m) { return (DMatrixHandle)m; }

static drift_status xgb_fail(drift_error *err, const char *what) {
    const char *m = XGBGetLastError();
    return drift_error_set(err, DRIFT_ERR_XGBOOST, "xgboost %s: %s", what, m && *m ? m : "unknown error");
}

/* Checks one xgboost call; on failure sets st and jumps to done. */
#define XGB(call, what)                                                                            \
    do {                                                                                           \
        if ((call) != 0) { st = xgb_fail(err, what); goto done; }                                  \
    } while (0)

drift_status pri_xgb_dmatrix(const float *X, const float *y, size_t n, size_t p, pri_dmatrix **out,
                             drift_error *err) {
    drift_status st = DRIFT_OK;
    DMatrixHandle m = NULL;
    *out = NULL;
    /* one thread: the default (all cores) wakes an OpenMP team for a few hundred rows */
    XGB(XGDMatrixCreateFromMat_omp(X, (bst_ulong)n, (bst_ulong)p, NAN, &m, 1), "XGDMatrixCreateFromMat_omp");
    if (y) XGB(XGDMatrixSetFloatInfo(m, "label", y, (bst_ulong)n), "XGDMatrixSetFloatInfo");
    *out = (pri_dmatrix *)m;
    m = NULL;
done:
    if (m) XGDMatrixFree(m);
    return st;
}

void pri_xgb_dmatrix_free(pri_dmatrix *m) {
    if (m) XGDMatrixFree(dh(m));
}

drift_status pri_xgb_create(pri_dmatrix *const *cache, int ncache, const pri_hparams *hp, unsigned seed,
                            int nthread, pri_booster **out, drift_error *err) {
    drift_status st = DRIFT_OK;
    DMatrixHandle dms[PRI_XGB_MAX_CACHE];
    BoosterHandle b = NULL;
    char buf[64];
    *out = NULL;
    if (ncache < 0 || ncache > PRI_XGB_MAX_CACHE)
        return drift_error_set(err, DRIFT_ERR_INVALID, "xgboost: %d cached matrices (at most %d)", ncache,
                               PRI_XGB_MAX_CACHE);
    for (int i = 0; i < ncache; i++) dms[i] = dh(cache[i]);
    XGB(XGBoosterCreate(dms, (bst_ulong)ncache, &b), "XGBoosterCreate");
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
    *out = (pri_booster *)b;
    b = NULL;
done:
    if (b) XGBoosterFree(b);
    return st;
}

drift_status pri_xgb_update_one_iter(pri_booster *b, int iter, pri_dmatrix *m, drift_error *err) {
    drift_status st = DRIFT_OK;
    XGB(XGBoosterUpdateOneIter(bh(b), iter, dh(m)), "XGBoosterUpdateOneIter");
done:
    return st;
}

drift_status pri_xgb_train(const float *X, const float *y, size_t n, size_t p, const pri_hparams *hp,
                           unsigned seed, int nthread, pri_booster **out, drift_error *err) {
    drift_status st;
    pri_dmatrix *dm = NULL;
    pri_booster *b = NULL;
    *out = NULL;
    if ((st = pri_xgb_dmatrix(X, y, n, p, &dm, err))) return st;
    if ((st = pri_xgb_create(&dm, 1, hp, seed, nthread, &b, err))) goto done;
    for (int it = 0; it < hp->rounds && !st; it++) st = pri_xgb_update_one_iter(b, it, dm, err);
    if (st) goto done;
    *out = b;
    b = NULL;
done:
    pri_xgb_free(b);
    pri_xgb_dmatrix_free(dm);
    return st;
}

drift_status pri_xgb_predict_dm(pri_booster *b, pri_dmatrix *m, size_t n, int rounds, double *pred,
                                drift_error *err) {
    drift_status st = DRIFT_OK;
    char cfg[160];
    snprintf(cfg, sizeof cfg,
             "{\"type\":0,\"training\":false,\"iteration_begin\":0,\"iteration_end\":%d,\"strict_shape\":false}",
             rounds);
    const bst_ulong *shape;
    bst_ulong dim;
    const float *res;
    XGB(XGBoosterPredictFromDMatrix(bh(b), dh(m), cfg, &shape, &dim, &res), "XGBoosterPredictFromDMatrix");
    bst_ulong total = 1;
    for (bst_ulong i = 0; i < dim; i++) total *= shape[i];
    if (total != n) {
        st = drift_error_set(err, DRIFT_ERR_XGBOOST, "xgboost returned %lu predictions for %zu rows",
                             (unsigned long)total, n);
        goto done;
    }
    for (size_t i = 0; i < n; i++) pred[i] = res[i];
done:
    return st;
}

drift_status pri_xgb_predict(pri_booster *b, const float *X, size_t n, size_t p, int rounds, double *pred,
                             drift_error *err) {
    pri_dmatrix *dm = NULL;
    drift_status st = pri_xgb_dmatrix(X, NULL, n, p, &dm, err);
    if (!st) st = pri_xgb_predict_dm(b, dm, n, rounds, pred, err);
    pri_xgb_dmatrix_free(dm);
    return st;
}

drift_status pri_xgb_total_gain(pri_booster *b, size_t *n, const char *const **names, const float **scores,
                                drift_error *err) {
    drift_status st = DRIFT_OK;
    bst_ulong nf = 0, dim;
    const char **fn = NULL;
    const bst_ulong *shape;
    const float *sc = NULL;
    XGB(XGBoosterFeatureScore(bh(b), "{\"importance_type\":\"total_gain\"}", &nf, &fn, &dim, &shape, &sc),
        "XGBoosterFeatureScore");
done:
    *n = st ? 0 : (size_t)nf;
    *names = st ? NULL : fn;
    *scores = st ? NULL : sc;
    return st;
}

drift_status pri_xgb_save_json(pri_booster *b, const char **buf, size_t *len, drift_error *err) {
    drift_status st = DRIFT_OK;
    bst_ulong n = 0;
    const char *raw = NULL;
    XGB(XGBoosterSaveModelToBuffer(bh(b), "{\"format\":\"json\"}", &n, &raw), "XGBoosterSaveModelToBuffer");
done:
    *buf = st ? NULL : raw;
    *len = st ? 0 : (size_t)n;
    return st;
}

drift_status pri_xgb_load(const void *buf, size_t len, pri_booster **out, drift_error *err) {
    drift_status st = DRIFT_OK;
    BoosterHandle b = NULL;
    *out = NULL;
    XGB(XGBoosterCreate(NULL, 0, &b), "XGBoosterCreate");
    XGB(XGBoosterLoadModelFromBuffer(b, buf, (bst_ulong)len), "XGBoosterLoadModelFromBuffer");
    XGB(XGBoosterSetParam(b, "nthread", "1"), "XGBoosterSetParam");
    *out = (pri_booster *)b;
    b = NULL;
done:
    if (b) XGBoosterFree(b);
    return st;
}

drift_status pri_xgb_num_features(pri_booster *b, size_t *n, drift_error *err) {
    drift_status st = DRIFT_OK;
    bst_ulong nf = 0;
    XGB(XGBoosterGetNumFeature(bh(b), &nf), "XGBoosterGetNumFeature");
done:
    *n = (size_t)nf;
    return st;
}

void pri_xgb_free(pri_booster *b) {
    if (b) XGBoosterFree(bh(b));
}
