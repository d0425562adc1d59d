/* pri_model.c - the fitted PRI: drift_pri_fit, drift_pri_predict and the
 * model file (drift_pri_save / drift_pri_load).
 *
 *   fit: a model tuned by inner CV on all rows, plus out-of-fold residuals
 *     (5 folds, each tuned inside its own training rows) whose empirical
 *     2.5% / 97.5% quantiles give the prediction interval; per workload
 *     when the workload has >= MIN_WL_RESIDUALS rows, else over all rows.
 *     The baseline configuration (for the advice) is the one given, else
 *     the paper's h100/fp16/vllm, else a reference-like level.
 *   predict: flip rate clamped to [0, 100], the interval, a risk level and
 *     advice from which dimensions differ from the baseline.
 *   save/load: JSON with the levels, feature names, residual quantiles, the
 *     baseline and the xgboost model (its own JSON format) base64-encoded
 *     inside; load checks that the features follow from the levels. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "analysis/pri_internal.h"
#include "util/util.h"

/* fewer residuals of a workload than this: the interval uses all rows' */
#define MIN_WL_RESIDUALS 40

typedef struct quant {
    double lo, hi;  /* 2.5% and 97.5% quantiles of out-of-fold residuals y - pred */
    size_t n;
} quant;

struct drift_pri {
    pri_fspec f;
    pri_hparams hp;
    pri_booster *booster;
    char *baseline[DRIFT_DIM_COUNT];   /* NULL = same as the query */
    quant all;
    quant *by_wl;               /* (f.nlev[DRIFT_DIM_WORKLOAD],), n = 0 when too few rows */
};

void drift_pri_free(drift_pri *p) {
    if (!p) return;
    pri_xgb_free(p->booster);
    for (int d = 0; d < DRIFT_DIM_COUNT; d++) free(p->baseline[d]);
    free(p->by_wl);
    pri_fspec_free(&p->f);
    free(p);
}

/* ------------------------------------------------------------------ fit */

static quant quantiles(double *v, size_t n) {
    qsort(v, n, sizeof *v, pri_cmp_double);
    quant q = {pri_quantile_sorted(v, n, 0.025), pri_quantile_sorted(v, n, 0.975), n};
    return q;
}

drift_status drift_pri_fit(const drift_table *t, const drift_pri_options *opt, drift_pri **out, drift_error *err) {
    drift_pri_options def;
    if (!opt) { drift_pri_options_init(&def); opt = &def; }
    *out = NULL;
    if (t->n_rows < 10) return drift_error_set(err, DRIFT_ERR_INVALID, "PRI needs at least 10 rows, the table has %zu", t->n_rows);
    if (opt->onehot_off && !opt->desc)
        return drift_error_set(err, DRIFT_ERR_INVALID, "PRI fit: onehot_off needs descriptors");
    drift_pri *p = calloc(1, sizeof *p);
    if (!p) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    size_t N = t->n_rows;
    float *X = NULL, *y = NULL;
    size_t *perm = malloc(N * sizeof *perm);
    double *res = malloc(N * sizeof *res), *pred = malloc(5 * (N / 5 + 1) * sizeof *pred), *tmp = malloc(N * sizeof *tmp);
    pri_job *jobs = NULL;
    size_t njobs = 0;
    drift_pri_holdout fold_h[5];
    drift_status st = pri_fspec_from_table(t, opt, &p->f, err);
    if (st) goto done;
    if (!perm || !res || !pred || !tmp) { st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory"); goto done; }
    if ((st = pri_build_dset(t, &p->f, &X, &y, err))) goto done;
    pri_dset ds = {X, y, p->f.p};
    /* out-of-fold residuals, each fold tuned inside its own training rows;
     * job 5 tunes the final model on all rows */
    for (size_t i = 0; i < N; i++) perm[i] = i;
    pri_shuffle(perm, N, opt->seed + 1u);
    if (!(jobs = calloc(6, sizeof *jobs))) { st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory"); goto done; }
    for (int k = 0; k < 6; k++) {
        pri_job *j = &jobs[njobs++];
        if ((st = pri_job_alloc(j, &ds, N, err))) goto done;
        for (size_t i = 0; i < N; i++) {
            if (k < 5 && (int)(i % 5) == k) j->te[j->nte++] = perm[i];
            else j->tr[j->ntr++] = perm[i];
        }
        j->tune_only = k == 5;
        j->h = &fold_h[k < 5 ? k : 0];
        j->pred_te = k < 5 ? pred + (size_t)k * (N / 5 + 1) : NULL;
    }
    if ((st = pri_jobs_run(jobs, njobs, opt, err))) goto done;
    for (int k = 0; k < 5; k++)
        for (size_t i = 0; i < jobs[k].nte; i++) res[jobs[k].te[i]] = y[jobs[k].te[i]] - jobs[k].pred_te[i];
    memcpy(tmp, res, N * sizeof *tmp);
    p->all = quantiles(tmp, N);
    p->by_wl = calloc(p->f.nlev[DRIFT_DIM_WORKLOAD] ? p->f.nlev[DRIFT_DIM_WORKLOAD] : 1, sizeof *p->by_wl);
    if (!p->by_wl) { st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory"); goto done; }
    for (size_t l = 0; l < p->f.nlev[DRIFT_DIM_WORKLOAD]; l++) {
        size_t n = 0;
        for (size_t i = 0; i < N; i++)
            if (!strcmp(t->rows[i].dims[DRIFT_DIM_WORKLOAD], p->f.lev[DRIFT_DIM_WORKLOAD][l])) tmp[n++] = res[i];
        if (n >= MIN_WL_RESIDUALS) p->by_wl[l] = quantiles(tmp, n);
    }
    /* final model on all rows */
    p->hp = jobs[5].hp;
    if ((st = pri_xgb_train(X, y, N, p->f.p, &p->hp, opt->seed, 1, &p->booster, err))) goto done;
    /* the caller's table is theirs: from now on the model knows its
     * descriptors by name, and predict hands the values in that order */
    p->f.ud = NULL;
    for (size_t c = 0; c < p->f.n_ud; c++) p->f.ud_col[c] = c;
    /* baseline: given, else the paper's h100/fp16/vllm, else a reference-like level */
    static const char *const paper_base[DRIFT_DIM_COUNT] = {NULL, "h100", "fp16", "vllm", NULL};
    for (int d = DRIFT_DIM_HARDWARE; d <= DRIFT_DIM_FRAMEWORK; d++) {
        const char *b = NULL;
        if (opt->baseline[d]) {
            if (pri_level_index(&p->f, d, opt->baseline[d]) < 0) {
                util_buf kb = {0};
                for (size_t i = 0; i < p->f.nlev[d]; i++) buf_printf(&kb, "%s%s", i ? ", " : "", p->f.lev[d][i]);
                st = drift_error_set(err, DRIFT_ERR_NOT_FOUND, "baseline %s '%s' is not in the table (known: %s)",
                                     drift_dim_names[d], opt->baseline[d], kb.data ? kb.data : "");
                buf_free(&kb);
                goto done;
            }
            b = opt->baseline[d];
        } else if (pri_level_index(&p->f, d, paper_base[d]) >= 0) {
            b = paper_base[d];
        } else if (d == DRIFT_DIM_FRAMEWORK && pri_level_index(&p->f, d, "ref") >= 0) {
            b = "ref";
        } else {
            size_t best = 0, bi = 0;
            double best_bits = -1;
            for (size_t l = 0; l < p->f.nlev[d]; l++) {
                size_t c = 0;
                for (size_t i = 0; i < N; i++) c += !strcmp(t->rows[i].dims[d], p->f.lev[d][l]);
                double bits = d == DRIFT_DIM_PRECISION ? pri_format_bits(p->f.lev[d][l]) : 0;
                if (isnan(bits)) bits = 0;
                if (bits > best_bits || (bits == best_bits && c > best)) { best_bits = bits; best = c; bi = l; }
            }
            b = p->f.lev[d][bi];
        }
        if (!(p->baseline[d] = util_strdup(b))) { st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory"); goto done; }
    }
done:
    pri_jobs_free(jobs, njobs);
    free(X); free(y); free(perm); free(res); free(pred); free(tmp);
    if (st) drift_pri_free(p);
    else *out = p;
    return st;
}

/* -------------------------------------------------------------- predict */

size_t drift_pri_levels(const drift_pri *p, int dim, const char *const **levels) {
    if (dim < 0 || dim >= DRIFT_DIM_COUNT) { *levels = NULL; return 0; }
    *levels = (const char *const *)p->f.lev[dim];
    return p->f.nlev[dim];
}

size_t drift_pri_descriptor_names(const drift_pri *p, const char *const **names) {
    *names = (const char *const *)p->f.ud_names;
    return p->f.use_ud ? p->f.n_ud : 0;
}

const char *drift_pri_baseline(const drift_pri *p, int dim) {
    return dim >= 0 && dim < DRIFT_DIM_COUNT ? p->baseline[dim] : NULL;
}

static drift_status unknown_level(const drift_pri *p, int d, const char *v, const char *what,
                                  drift_error *err) {
    util_buf b = {0};
    for (size_t i = 0; i < p->f.nlev[d]; i++) buf_printf(&b, "%s%s", i ? ", " : "", p->f.lev[d][i]);
    drift_status st = drift_error_set(err, DRIFT_ERR_NOT_FOUND, "unknown %s%s '%s' (known: %s)", what,
                                      drift_dim_names[d], v ? v : "(none)", b.data ? b.data : "");
    buf_free(&b);
    return st;
}

drift_status drift_pri_predict(const drift_pri *p, const drift_pri_query *q, const drift_pri_query *base,
                               drift_pri_prediction *out, drift_error *err) {
    return drift_pri_predict_described(p, q, NULL, NULL, 0, base, out, err);
}

drift_status drift_pri_predict_described(const drift_pri *p, const drift_pri_query *q, const char *const *names,
                                         const double *values, size_t n_desc, const drift_pri_query *base,
                                         drift_pri_prediction *out, drift_error *err) {
    memset(out, 0, sizeof *out);
    const char *dims[DRIFT_DIM_COUNT] = {q->model, q->hardware, q->precision, q->framework, q->workload};
    /* with descriptors a level the model never saw is predicted from them */
    int described = p->f.use_ud && p->f.n_ud > 0;
    for (int d = 0; d < DRIFT_DIM_COUNT; d++)
        if (!dims[d] || (!described && pri_level_index(&p->f, d, dims[d]) < 0))
            return unknown_level(p, d, dims[d], "", err);
    double *dv = NULL;
    if (described) {
        dv = malloc((p->f.n_ud + 1) * sizeof *dv);
        if (!dv) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        for (size_t c = 0; c < p->f.n_ud; c++) {
            size_t i = 0;
            while (i < n_desc && strcmp(names[i], p->f.ud_names[c])) i++;
            if (i == n_desc) {
                util_buf b = {0};
                for (size_t k = 0; k < p->f.n_ud; k++) buf_printf(&b, "%s%s", k ? ", " : "", p->f.ud_names[k]);
                drift_status st = drift_error_set(err, DRIFT_ERR_INVALID,
                                                  "descriptor '%s' of the configuration not given (the model uses: %s)",
                                                  p->f.ud_names[c], b.data ? b.data : "");
                buf_free(&b);
                free(dv);
                return st;
            }
            dv[c] = values[i];
        }
    }
    const char *bq[DRIFT_DIM_COUNT] = {0};
    if (base) {
        bq[DRIFT_DIM_MODEL] = base->model;
        bq[DRIFT_DIM_HARDWARE] = base->hardware;
        bq[DRIFT_DIM_PRECISION] = base->precision;
        bq[DRIFT_DIM_FRAMEWORK] = base->framework;
        bq[DRIFT_DIM_WORKLOAD] = base->workload;
    }
    const char *bl[DRIFT_DIM_COUNT];
    for (int d = 0; d < DRIFT_DIM_COUNT; d++) {
        bl[d] = bq[d] ? bq[d] : p->baseline[d] ? p->baseline[d] : dims[d];
        if (!described && pri_level_index(&p->f, d, bl[d]) < 0) return unknown_level(p, d, bl[d], "baseline ", err);
    }
    float *x = malloc((p->f.p + 1) * sizeof *x);
    if (!x) { free(dv); return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory"); }
    pri_fspec_row(&p->f, dims, dv, x);
    free(dv);
    double pr = NAN;
    drift_status st = pri_xgb_predict(p->booster, x, 1, p->f.p, 0, &pr, err);
    free(x);
    if (st) return st;
    quant qq = p->all;
    int wl = pri_level_index(&p->f, DRIFT_DIM_WORKLOAD, dims[DRIFT_DIM_WORKLOAD]);
    if (p->by_wl && wl >= 0 && p->by_wl[wl].n >= MIN_WL_RESIDUALS) qq = p->by_wl[wl];
    out->flip_rate = fmin(100.0, fmax(0.0, pr));
    out->lo = fmin(100.0, fmax(0.0, pr + qq.lo));
    out->hi = fmin(100.0, fmax(0.0, pr + qq.hi));
    out->coverage = 0.95;
    out->risk = out->flip_rate < 1.0 ? "low" : out->flip_rate < 5.0 ? "medium" : "high";
    /* what changes vs the baseline (workload is never a change) */
    int diff[DRIFT_DIM_CONFIG_COUNT] = {0}, ndiff = 0;
    size_t off = 0;
    for (int d = 0; d < DRIFT_DIM_CONFIG_COUNT; d++) {
        diff[d] = strcmp(bl[d], dims[d]) != 0;
        if (diff[d]) {
            ndiff++;
            int w = snprintf(out->differs + off, sizeof out->differs - off, "%s%s", off ? "," : "", drift_dim_names[d]);
            if (w > 0 && (size_t)w < sizeof out->differs - off) off += (size_t)w;
        }
    }
    if (ndiff == 0) {
        out->change = "none";
        out->advice = "no change from the baseline: nothing to gate";
    } else if (!diff[DRIFT_DIM_MODEL] && !diff[DRIFT_DIM_FRAMEWORK]) {
        out->change = "systematic";
        out->advice = "systematic: predict, then confirm on ~100 prompts";
    } else {
        out->change = ndiff > 1 ? "combined" : "idiosyncratic";
        out->advice = "idiosyncratic/combined: measure fully before deploying";
    }
    return DRIFT_OK;
}

/* --------------------------------------------------------------- save/load */

static json_t *quant_json(const quant *q) {
    return json_pack("{s:f,s:f,s:I}", "q025", q->lo, "q975", q->hi, "n", (json_int_t)q->n);
}

drift_status drift_pri_save(const drift_pri *p, const char *path, drift_error *err) {
    drift_status st;
    size_t len;
    const char *raw;
    char *enc = NULL, **names = NULL;
    json_t *root = NULL;
    if ((st = pri_xgb_save_json(p->booster, &raw, &len, err))) goto done;
    if (!(enc = util_b64_encode(raw, len))) { st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory"); goto done; }
    if ((st = pri_fspec_names(&p->f, &names, err))) goto done;
    root = json_object();
    json_object_set_new(root, "format", json_string("driftbench-pri"));
    json_object_set_new(root, "version", json_integer(1));
    json_t *lv = json_object(), *bl = json_object(), *fn = json_array(), *rq = json_object(), *bw = json_object();
    for (int d = 0; d < DRIFT_DIM_COUNT; d++) {
        json_t *a = json_array();
        for (size_t i = 0; i < p->f.nlev[d]; i++) json_array_append_new(a, json_string(p->f.lev[d][i]));
        json_object_set_new(lv, drift_dim_names[d], a);
        json_object_set_new(bl, drift_dim_names[d], p->baseline[d] ? json_string(p->baseline[d]) : json_null());
    }
    for (size_t i = 0; i < p->f.p; i++) json_array_append_new(fn, json_string(names[i]));
    json_object_set_new(rq, "all", quant_json(&p->all));
    for (size_t l = 0; l < p->f.nlev[DRIFT_DIM_WORKLOAD]; l++)
        if (p->by_wl[l].n) json_object_set_new(bw, p->f.lev[DRIFT_DIM_WORKLOAD][l], quant_json(&p->by_wl[l]));
    json_object_set_new(rq, "by_workload", bw);
    json_object_set_new(root, "levels", lv);
    json_object_set_new(root, "baseline", bl);
    json_object_set_new(root, "features", fn);
    json_object_set_new(root, "interactions", json_boolean(p->f.interactions));
    json_object_set_new(root, "descriptors", json_boolean(p->f.descriptors));
    if (p->f.use_ud && p->f.n_ud) { /* the caller's descriptors (issue 36) */
        json_t *dn = json_array();
        for (size_t c = 0; c < p->f.n_ud; c++) json_array_append_new(dn, json_string(p->f.ud_names[c]));
        json_object_set_new(root, "descriptor_names", dn);
    }
    unsigned off = 0;
    for (int d = 0; d < DRIFT_DIM_COUNT; d++) off |= p->f.use_dim[d] ? 0u : 1u << d;
    if (off) json_object_set_new(root, "onehot_off", json_integer((json_int_t)off));
    json_object_set_new(root, "params", json_pack("{s:i,s:f,s:f,s:i}", "max_depth", p->hp.depth, "eta", p->hp.eta,
                                                  "min_child_weight", p->hp.mcw, "n_estimators", p->hp.rounds));
    json_object_set_new(root, "residual_quantiles", rq);
    json_object_set_new(root, "xgboost_model_json_base64", json_string(enc));
    if (json_dump_file(root, path, JSON_INDENT(1) | JSON_REAL_PRECISION(17)) != 0)
        st = drift_error_set(err, DRIFT_ERR_IO, "%s: cannot write", path);
done:
    json_decref(root);
    free(enc);
    pri_names_free(names, p->f.p);
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
    for (int d = 0; d < DRIFT_DIM_COUNT; d++) {
        json_t *a = json_object_get(lv, drift_dim_names[d]);
        if (!json_is_array(a) || json_array_size(a) == 0) { st = load_fail(err, path, drift_dim_names[d]); goto done; }
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
            p->f.lev[d][i] = util_strdup(json_string_value(s));
            p->f.nlev[d] = i + 1;
            if (!p->f.lev[d][i]) { st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory"); goto done; }
        }
        p->f.use_dim[d] = 1;
        json_t *b = json_is_object(bl) ? json_object_get(bl, drift_dim_names[d]) : NULL;
        if (json_is_string(b)) {
            if (pri_level_index(&p->f, d, json_string_value(b)) < 0) { st = load_fail(err, path, "baseline"); goto done; }
            p->baseline[d] = util_strdup(json_string_value(b));
        }
    }
    p->f.interactions = json_is_true(json_object_get(root, "interactions"));
    p->f.descriptors = json_is_true(json_object_get(root, "descriptors"));
    json_t *dn = json_object_get(root, "descriptor_names"), *off = json_object_get(root, "onehot_off");
    if (dn) {
        if (!json_is_array(dn) || !json_array_size(dn)) { st = load_fail(err, path, "descriptor_names"); goto done; }
        size_t n = json_array_size(dn);
        p->f.ud_names = calloc(n, sizeof *p->f.ud_names);
        p->f.ud_col = calloc(n, sizeof *p->f.ud_col);
        if (!p->f.ud_names || !p->f.ud_col) { st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory"); goto done; }
        p->f.n_ud = n;
        for (size_t c = 0; c < n; c++) {
            json_t *v = json_array_get(dn, c);
            if (!json_is_string(v) || !*json_string_value(v)) { st = load_fail(err, path, "descriptor_names"); goto done; }
            if (!(p->f.ud_names[c] = util_strdup(json_string_value(v)))) {
                st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
                goto done;
            }
            p->f.ud_col[c] = c;
        }
        p->f.use_ud = 1;
    }
    if (off) {
        if (!json_is_integer(off) || json_integer_value(off) < 0 || json_integer_value(off) >= (1 << DRIFT_DIM_COUNT) ||
            !dn) { st = load_fail(err, path, "onehot_off"); goto done; }
        for (int d = 0; d < DRIFT_DIM_COUNT; d++)
            if (json_integer_value(off) & (1 << d)) p->f.use_dim[d] = 0;
    }
    pri_fspec_count(&p->f);
    /* the features must be the ones these levels give, in this order */
    json_t *fn = json_object_get(root, "features");
    if (!json_is_array(fn) || json_array_size(fn) != p->f.p) { st = load_fail(err, path, "features"); goto done; }
    if ((st = pri_fspec_names(&p->f, &names, err))) goto done;
    for (size_t i = 0; i < p->f.p; i++) {
        json_t *s = json_array_get(fn, i);
        if (!json_is_string(s) || strcmp(json_string_value(s), names[i])) { st = load_fail(err, path, "features"); goto done; }
    }
    json_t *hp = json_object_get(root, "params");
    if (json_unpack(hp, "{s:i,s:F,s:F,s:i}", "max_depth", &p->hp.depth, "eta", &p->hp.eta, "min_child_weight",
                    &p->hp.mcw, "n_estimators", &p->hp.rounds)) { st = load_fail(err, path, "params"); goto done; }
    json_t *rq = json_object_get(root, "residual_quantiles");
    if (!json_is_object(rq) || quant_from_json(json_object_get(rq, "all"), &p->all)) { st = load_fail(err, path, "residual_quantiles.all"); goto done; }
    p->by_wl = calloc(p->f.nlev[DRIFT_DIM_WORKLOAD], sizeof *p->by_wl);
    if (!p->by_wl) { st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory"); goto done; }
    json_t *bw = json_object_get(rq, "by_workload");
    for (size_t l = 0; l < p->f.nlev[DRIFT_DIM_WORKLOAD]; l++) {
        json_t *o = json_is_object(bw) ? json_object_get(bw, p->f.lev[DRIFT_DIM_WORKLOAD][l]) : NULL;
        if (o && quant_from_json(o, &p->by_wl[l])) { st = load_fail(err, path, "residual_quantiles.by_workload"); goto done; }
    }
    json_t *m = json_object_get(root, "xgboost_model_json_base64");
    size_t rlen = 0;
    if (!json_is_string(m) || !(raw = util_b64_decode(json_string_value(m), &rlen))) { st = load_fail(err, path, "xgboost_model_json_base64"); goto done; }
    if ((st = pri_xgb_load(raw, rlen, &p->booster, err))) goto done;
    size_t nf = 0;
    if ((st = pri_xgb_num_features(p->booster, &nf, err))) goto done;
    if (nf != p->f.p) {
        st = drift_error_set(err, DRIFT_ERR_PARSE, "%s: the xgboost model has %lu features, the file lists %zu", path,
                             (unsigned long)nf, p->f.p);
        goto done;
    }
done:
    pri_names_free(names, p->f.p);
    free(raw);
    json_decref(root);
    if (st) drift_pri_free(p);
    else *out = p;
    return st;
}

