/* cluster_boot.c - flip rates of clustered pairs and their bootstrap
 * intervals (analysis.h: drift_flip_boot_prompts, drift_flip_boot_two_way),
 * and the real-count Wilson interval the lab printed before
 * (drift_wilson_real), kept for comparison.
 *
 * Pairs are first reduced to cells (prompt, configuration) holding counts
 * (pairs, flips to wrong, flips to right), sorted by configuration then
 * prompt; prompts and configurations are renumbered 0.. in the order of
 * their ids. A resample is a vector of multiplicities: prompt p drawn w_p
 * times (and configuration c drawn v_c times for the two-way bootstrap),
 * drawn with util_rng_below from one stream seeded with o->seed, prompts
 * first then configurations, resample after resample: the same seed gives
 * the same intervals on every machine.
 *
 * Percentile intervals: the (1-level)/2 and (1+level)/2 quantiles of the
 * resampled figures, linear between order statistics (numpy's default). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/analysis_internal.h"
#include "driftbench/analysis.h"
#include "util/util.h"

void drift_boot_opts_init(drift_boot_opts *o) {
    o->resamples = 2000;
    o->seed = 20261206;
    o->level = 0.95;
}

void anl_boot_resolve(const drift_boot_opts *o, int *resamples, uint64_t *seed, double *level) {
    drift_boot_opts d;
    drift_boot_opts_init(&d);
    if (o) {
        d.seed = o->seed;
        if (o->resamples > 0) d.resamples = o->resamples;
        if (o->level > 0 && o->level < 1) d.level = o->level;
    }
    if (d.resamples < 200) d.resamples = 200;
    *resamples = d.resamples;
    *seed = d.seed;
    *level = d.level;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double anl_quantile_sorted(const double *v, size_t n, double q) {
    if (n == 0) return NAN;
    double h = q * (double)(n - 1);
    size_t lo = (size_t)floor(h), hi = lo + 1 < n ? lo + 1 : lo;
    if (isinf(v[lo]) || isinf(v[hi])) return v[h - (double)lo < 0.5 ? lo : hi];
    return v[lo] + (h - (double)lo) * (v[hi] - v[lo]);
}

void anl_percentile_ci(double *v, size_t n, double level, double *lo, double *hi) {
    qsort(v, n, sizeof *v, cmp_double);
    *lo = anl_quantile_sorted(v, n, (1 - level) / 2);
    *hi = anl_quantile_sorted(v, n, (1 + level) / 2);
}

void drift_wilson_real(double p, double n, double z, double *lo, double *hi) {
    if (!(n > 0) || !(p >= 0 && p <= 1)) {
        *lo = 0;
        *hi = 1;
        return;
    }
    double z2 = z * z, denom = 1 + z2 / n;
    double centre = (p + z2 / (2 * n)) / denom;
    double half = z * sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom;
    *lo = p == 0 || centre - half < 0 ? 0 : centre - half;
    *hi = p == 1 || centre + half > 1 ? 1 : centre + half;
}

/* ---- pairs -> cells ---- */

typedef struct cell {
    size_t p, c;          /* renumbered prompt, configuration */
    long n, tw, tr;       /* pairs, flips to wrong, flips to right */
} cell;

typedef struct cells {
    size_t n_prompts, n_configs, n;
    cell *v;              /* sorted by c, then p */
    size_t *c0;           /* (n_configs + 1) first cell of each configuration */
} cells;

static void cells_free(cells *C) {
    free(C->v);
    free(C->c0);
    memset(C, 0, sizeof *C);
}

typedef struct idx_key {
    int64_t key;
    size_t i;
} idx_key;

static int cmp_key(const void *a, const void *b) {
    const idx_key *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

/* Renumbers keys (n) to 0..*k in the order of their values. */
static drift_status renumber(const drift_flip_pair *pairs, size_t n, int which, size_t *id, size_t *k,
                             drift_error *err) {
    idx_key *t = malloc(n * sizeof *t);
    if (!t) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        t[i].key = which ? pairs[i].config : pairs[i].prompt;
        t[i].i = i;
    }
    qsort(t, n, sizeof *t, cmp_key);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && t[i].key != t[i - 1].key) m++;
        id[t[i].i] = m;
    }
    *k = n ? m + 1 : 0;
    free(t);
    return DRIFT_OK;
}

static int cmp_cell(const void *a, const void *b) {
    const cell *x = a, *y = b;
    if (x->c != y->c) return x->c < y->c ? -1 : 1;
    return (x->p > y->p) - (x->p < y->p);
}

static drift_status build_cells(const drift_flip_pair *pairs, size_t n, cells *C, drift_error *err) {
    memset(C, 0, sizeof *C);
    size_t *pid = malloc(n * sizeof *pid), *cid = malloc(n * sizeof *cid);
    cell *v = malloc(n * sizeof *v);
    drift_status st = DRIFT_OK;
    if (!pid || !cid || !v) {
        st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        if (pairs[i].base_ok > 1 || pairs[i].cfg_ok > 1) {
            st = drift_error_set(err, DRIFT_ERR_INVALID, "flip pairs: pair %zu has an answer judged %d (0 or 1 expected)",
                                 i, pairs[i].base_ok > 1 ? pairs[i].base_ok : pairs[i].cfg_ok);
            goto done;
        }
    if ((st = renumber(pairs, n, 0, pid, &C->n_prompts, err))) goto done;
    if ((st = renumber(pairs, n, 1, cid, &C->n_configs, err))) goto done;
    for (size_t i = 0; i < n; i++) {
        v[i].p = pid[i];
        v[i].c = cid[i];
        v[i].n = 1;
        v[i].tw = pairs[i].base_ok && !pairs[i].cfg_ok;
        v[i].tr = !pairs[i].base_ok && pairs[i].cfg_ok;
    }
    qsort(v, n, sizeof *v, cmp_cell);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m && v[m - 1].p == v[i].p && v[m - 1].c == v[i].c) {
            v[m - 1].n += v[i].n;
            v[m - 1].tw += v[i].tw;
            v[m - 1].tr += v[i].tr;
        } else v[m++] = v[i];
    }
    C->n = m;
    C->v = v;
    v = NULL;
    if (!(C->c0 = calloc(C->n_configs + 1, sizeof *C->c0))) {
        st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < m; i++) C->c0[C->v[i].c + 1]++;
    for (size_t c = 0; c < C->n_configs; c++) C->c0[c + 1] += C->c0[c];
done:
    free(pid);
    free(cid);
    free(v);
    if (st) cells_free(C);
    return st;
}

/* The four figures from the three sums (n > 0). */
static void figures(double n, double tw, double tr, double f[4]) {
    f[0] = (tw + tr) / n;
    f[1] = tw / n;
    f[2] = tr / n;
    f[3] = (tr - tw) / n;
}

static drift_boot_ci *fig_slot(drift_flip_boot *out, int k) {
    return k == 0 ? &out->flip : k == 1 ? &out->to_wrong : k == 2 ? &out->to_right : &out->net;
}

/* Mean over configurations with weights v (NULL = 1 each) of each
 * configuration's figures over prompts with weights w (NULL = 1 each).
 * Returns 0 when no configuration has a pair. */
static int two_way_mean(const cells *C, const double *w, const double *v, double f[4]) {
    double acc[4] = {0, 0, 0, 0}, vs = 0;
    for (size_t c = 0; c < C->n_configs; c++) {
        double vc = v ? v[c] : 1;
        if (vc == 0) continue;
        double n = 0, tw = 0, tr = 0;
        for (size_t i = C->c0[c]; i < C->c0[c + 1]; i++) {
            const cell *x = &C->v[i];
            double wp = w ? w[x->p] : 1;
            n += wp * (double)x->n;
            tw += wp * (double)x->tw;
            tr += wp * (double)x->tr;
        }
        if (n == 0) continue;
        double g[4];
        figures(n, tw, tr, g);
        for (int k = 0; k < 4; k++) acc[k] += vc * g[k];
        vs += vc;
    }
    if (vs == 0) return 0;
    for (int k = 0; k < 4; k++) f[k] = acc[k] / vs;
    return 1;
}

static drift_status boot(const drift_flip_pair *pairs, size_t n, const drift_boot_opts *o, int two_way,
                         drift_flip_boot *out, drift_error *err) {
    memset(out, 0, sizeof *out);
    for (int k = 0; k < 4; k++) fig_slot(out, k)->est = fig_slot(out, k)->lo = fig_slot(out, k)->hi = NAN;
    const char *what = two_way ? "two-way bootstrap" : "cluster bootstrap";
    if (!pairs || n == 0) return drift_error_set(err, DRIFT_ERR_INVALID, "%s: no pairs", what);
    int R;
    uint64_t seed;
    double level;
    anl_boot_resolve(o, &R, &seed, &level);
    cells C;
    drift_status st = build_cells(pairs, n, &C, err);
    if (st) return st;
    out->n_pairs = n;
    out->n_prompts = C.n_prompts;
    out->n_configs = C.n_configs;
    out->resamples = R;
    out->level = level;
    out->two_way = two_way;
    if (C.n_prompts < 2) {
        cells_free(&C);
        return drift_error_set(err, DRIFT_ERR_INVALID, "%s: %zu prompt (at least 2 are needed)", what, C.n_prompts);
    }
    if (two_way && C.n_configs < 2) {
        cells_free(&C);
        return drift_error_set(err, DRIFT_ERR_INVALID, "two-way bootstrap: %zu configuration (at least 2 are needed)",
                               C.n_configs);
    }
    double *w = calloc(C.n_prompts, sizeof *w), *v = calloc(C.n_configs, sizeof *v);
    double *fig = malloc(4 * (size_t)R * sizeof *fig);
    /* per prompt sums (the one-way bootstrap) */
    double *pn = calloc(C.n_prompts, sizeof *pn), *ptw = calloc(C.n_prompts, sizeof *ptw),
           *ptr = calloc(C.n_prompts, sizeof *ptr);
    if (!w || !v || !fig || !pn || !ptw || !ptr) {
        st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        goto done;
    }
    double tn = 0, ttw = 0, ttr = 0;
    for (size_t i = 0; i < C.n; i++) {
        const cell *x = &C.v[i];
        pn[x->p] += (double)x->n;
        ptw[x->p] += (double)x->tw;
        ptr[x->p] += (double)x->tr;
        tn += (double)x->n;
        ttw += (double)x->tw;
        ttr += (double)x->tr;
    }
    double f[4];
    if (two_way) two_way_mean(&C, NULL, NULL, f);
    else figures(tn, ttw, ttr, f);
    for (int k = 0; k < 4; k++) fig_slot(out, k)->est = f[k];
    util_rng rng;
    util_rng_seed(&rng, seed);
    int got = 0;
    for (int b = 0; b < R; b++) {
        memset(w, 0, C.n_prompts * sizeof *w);
        for (size_t k = 0; k < C.n_prompts; k++) w[util_rng_below(&rng, C.n_prompts)] += 1;
        int ok;
        if (two_way) {
            memset(v, 0, C.n_configs * sizeof *v);
            for (size_t k = 0; k < C.n_configs; k++) v[util_rng_below(&rng, C.n_configs)] += 1;
            ok = two_way_mean(&C, w, v, f);
        } else {
            double sn = 0, stw = 0, str = 0;
            for (size_t p = 0; p < C.n_prompts; p++) {
                if (w[p] == 0) continue;
                sn += w[p] * pn[p];
                stw += w[p] * ptw[p];
                str += w[p] * ptr[p];
            }
            ok = sn > 0;
            if (ok) figures(sn, stw, str, f);
        }
        if (!ok) continue; /* a resample with no pair (the drawn configurations saw none of the drawn prompts) */
        for (int k = 0; k < 4; k++) fig[(size_t)k * (size_t)R + (size_t)got] = f[k];
        got++;
    }
    if (got < R / 2) {
        st = drift_error_set(err, DRIFT_ERR_INVALID, "%s: only %d of %d resamples hold a pair (too sparse a design)",
                             what, got, R);
        goto done;
    }
    for (int k = 0; k < 4; k++) {
        drift_boot_ci *s = fig_slot(out, k);
        anl_percentile_ci(fig + (size_t)k * (size_t)R, (size_t)got, level, &s->lo, &s->hi);
    }
    out->resamples = got;
done:
    free(w);
    free(v);
    free(fig);
    free(pn);
    free(ptw);
    free(ptr);
    cells_free(&C);
    return st;
}

drift_status drift_flip_boot_prompts(const drift_flip_pair *pairs, size_t n, const drift_boot_opts *o,
                                     drift_flip_boot *out, drift_error *err) {
    return boot(pairs, n, o, 0, out, err);
}

drift_status drift_flip_boot_two_way(const drift_flip_pair *pairs, size_t n, const drift_boot_opts *o,
                                     drift_flip_boot *out, drift_error *err) {
    return boot(pairs, n, o, 1, out, err);
}
