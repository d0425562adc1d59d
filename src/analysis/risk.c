/* risk.c - per-prompt flip risk from the baseline's own logprobs, and how
 * well a risk score ranks the prompts that actually flipped (compare.h).
 *
 * Features (drift_risk_features_compute), read from one stored logprobs
 * array ([{"token":..,"logprob":..,"top":[{"token":..,"logprob":..}..]}..],
 * divergence.c's form), one element per generated token of the greedy
 * answer:
 *   min margin   the smallest top-1 minus top-2 logprob (nats) over the
 *                tokens whose top list has >= 2 entries, its token index
 *                (first such index on a tie) and the share of the answer's
 *                tokens before it (index / length);
 *   entropy      the mean over those tokens of the entropy of the listed
 *                top-k only, renormalised to sum to 1: the mass outside the
 *                list is unknown, so this is a lower-bound-like proxy of the
 *                true entropy, comparable only between runs with the same k;
 *   length       the number of generated tokens.
 *
 *   near ties    tokens whose margin is under DRIFT_RISK_NEAR_NATS (1 nat);
 *   region       drift_risk_features_for only: the tokens that decide the
 *                label - those overlapping the final answer's number (math:
 *                the evaluator's own extraction, drift_math_extract_ex, its
 *                last occurrence in the text the tokens spell), the code
 *                (inside the first ``` fence, else all of it), the first
 *                DRIFT_RISK_HEAD_TOKENS tokens (safety: refusal or
 *                compliance), the whole answer (others); the smallest margin
 *                inside it and whether the answer's smallest falls there.
 *
 * Score risk/v1 = exp(-min_margin / T), T = 1 nat, in (0, 1]. Why this and
 * nothing fitted: a numerical change of the stack (quantisation, kernel
 * order) perturbs the logits by a small amount; greedy decoding takes a
 * different branch first where the perturbation exceeds the margin between
 * the two best tokens, so the smallest margin along the answer is the
 * first-order bound on how large a perturbation flips it. The transform is
 * monotone, so the ranking (AUC, precision at 10%) is that of -min_margin,
 * and T only makes the figure readable as "near 1 = a near tie". The
 * formula has no parameter fitted on data, so every configuration it is
 * evaluated on is held out. An answer with no token listing two
 * alternatives has no margin: its score is NAN (unknown), never 0.
 *
 * Score risk/v2-logit (drift_risk_logit_*): a logistic regression of
 * "flipped" on six inputs (drift_risk_x: v1's score, the same of the
 * region's margin, the min-in-region flag, entropy, log length, log near
 * ties), standardised, fit by IRLS (Newton on the log-likelihood with a
 * small ridge on the slopes so a separable or flat input cannot diverge;
 * 7x7 Cholesky per step). Its coefficients depend on the stack pairs it
 * was fit on, so it is evaluated on configurations left out of the fit
 * (bench_risk_bench); the shipped coefficients (builtin_models) carry the
 * version string and how many rows they were fit on.
 *
 * Ranking quality (drift_risk_rank_eval): ROC AUC in the Mann-Whitney form
 * (midranks, so a tie between a flipped and an unflipped prompt counts
 * 1/2) and precision among the top 10% of risk (ceil(0.1 n) prompts; a tie
 * group straddling the cut contributes its flip share for the slots it
 * fills, the expectation over random tie-breaking). Both get a bootstrap
 * 95% percentile interval over prompts, resampled with replacement from a
 * seeded util_rng; a resample without a flipped or without an unflipped
 * prompt has no AUC and is skipped for the AUC interval only. */
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/analysis_internal.h"
#include "driftbench/compare.h"
#include "driftbench/eval.h"
#include "suite/workload.h"
#include "util/util.h"

#define RISK_T 1.0 /* nats */

/* ---- one token's margin (analysis_internal.h) ---- */

drift_status anl_logprobs_load(const char *json, json_t **root, size_t *n, drift_error *err) {
    json_error_t je;
    *root = NULL;
    *n = 0;
    json_t *r = json_loads(json, 0, &je);
    if (!r) return drift_error_set(err, DRIFT_ERR_PARSE, "logprobs: line %d column %d: %s", je.line, je.column, je.text);
    if (!json_is_array(r)) {
        json_decref(r);
        return drift_error_set(err, DRIFT_ERR_PARSE, "logprobs: not a JSON array");
    }
    *root = r;
    *n = json_array_size(r);
    return DRIFT_OK;
}

drift_status anl_logprob_top2(const json_t *elem, size_t i, anl_top2 *out, drift_error *err) {
    out->n_top = 0;
    out->best = out->second = -INFINITY;
    out->margin = NAN;
    if (!json_is_object(elem)) return drift_error_set(err, DRIFT_ERR_PARSE, "logprobs: element %zu: not an object", i);
    json_t *top = json_object_get(elem, "top");
    if (!top || json_is_null(top)) return DRIFT_OK;
    if (!json_is_array(top))
        return drift_error_set(err, DRIFT_ERR_PARSE, "logprobs: element %zu: \"top\" is not an array", i);
    size_t m = json_array_size(top);
    double best = -INFINITY, second = -INFINITY;
    for (size_t k = 0; k < m; k++) {
        json_t *a = json_array_get(top, k);
        json_t *lp = json_is_object(a) ? json_object_get(a, "logprob") : NULL;
        if (!json_is_number(lp))
            return drift_error_set(err, DRIFT_ERR_PARSE, "logprobs: element %zu: top[%zu]: no numeric \"logprob\"", i,
                                   k);
        double v = json_number_value(lp);
        if (!isfinite(v))
            return drift_error_set(err, DRIFT_ERR_PARSE, "logprobs: element %zu: top[%zu]: logprob not finite", i, k);
        if (v > best) {
            second = best;
            best = v;
        } else if (v > second) {
            second = v;
        }
    }
    out->n_top = m;
    out->best = best;
    out->second = second;
    if (m >= 2) out->margin = best - second;
    return DRIFT_OK;
}

/* ---- features ---- */

static void features_reset(drift_risk_features *out) {
    memset(out, 0, sizeof *out);
    out->min_margin = out->min_margin_frac = out->mean_entropy = out->region_margin = NAN;
    out->min_margin_pos = -1;
}

/* Byte span [*s, *e) of wl's critical text (its traits' risk_region) in text[0..n); 0 when none
 * (math without a number). Safety and others are token spans, not here. */
static int region_bytes(const char *text, size_t n, drift_workload wl, size_t *s, size_t *e) {
    const wl_traits *t = wl_traits_of(wl);
    wl_region region = t ? t->risk_region : WL_REGION_WHOLE;
    if (region == WL_REGION_FINAL_NUMBER) {
        char num[128], raw[128];
        if (!drift_math_extract_ex(text, num, sizeof num, raw, sizeof raw) || !raw[0]) return 0;
        size_t rl = strlen(raw);
        const char *last = NULL;
        for (const char *p = strstr(text, raw); p; p = strstr(p + 1, raw)) last = p;
        if (!last) return 0;
        *s = (size_t)(last - text);
        *e = *s + rl;
        return 1;
    }
    if (region == WL_REGION_CODE_BLOCK) {
        const char *f = strstr(text, "```");
        *s = 0;
        *e = n;
        if (f) {
            const char *nl = strchr(f + 3, '\n');
            *s = nl ? (size_t)(nl + 1 - text) : (size_t)(f + 3 - text);
            const char *close = strstr(text + *s, "```");
            *e = close ? (size_t)(close - text) : n;
        }
        return *e > *s;
    }
    *s = 0;
    *e = n;
    return n > 0;
}

drift_status drift_risk_features_for(const char *logprobs_json, drift_workload wl, drift_risk_features *out,
                                     drift_error *err) {
    if (!out) return drift_error_set(err, DRIFT_ERR_INVALID, "risk features need an output");
    features_reset(out);
    if (!logprobs_json) return drift_error_set(err, DRIFT_ERR_INVALID, "risk features need logprobs");
    json_t *root = NULL;
    size_t n = 0;
    drift_status rc = anl_logprobs_load(logprobs_json, &root, &n, err);
    if (rc) return rc;
    double *margin = malloc((n + 1) * sizeof *margin);   /* (n,) per token, NAN without two alternatives */
    size_t *tok_end = malloc((n + 1) * sizeof *tok_end); /* (n,) byte offset just past each token in text */
    util_buf text = {0};
    if (!margin || !tok_end) {
        rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory reading %zu logprobs", n);
        goto done;
    }
    double ent_sum = 0;
    int oom = 0;
    for (size_t i = 0; i < n; i++) {
        margin[i] = NAN;
        json_t *e = json_array_get(root, i);
        /* (a non-object has no "token": anl_logprob_top2 below names it) */
        json_t *tok = json_object_get(e, "token");
        if (tok && !json_is_null(tok)) {
            if (!json_is_string(tok)) {
                rc = drift_error_set(err, DRIFT_ERR_PARSE, "logprobs: element %zu: \"token\" is not a string", i);
                goto done;
            }
            /* a NUL inside the token would cut the text: count its bytes, keep the text a C string */
            const char *ts = json_string_value(tok);
            size_t tl = json_string_length(tok);
            for (size_t k = 0; k < tl && !oom; k++) oom = buf_append(&text, ts[k] ? &ts[k] : " ", 1) != 0;
        }
        tok_end[i] = text.len;
        anl_top2 t2;
        if ((rc = anl_logprob_top2(e, i, &t2, err))) goto done;
        if (t2.n_top < 2) continue;
        json_t *top = json_object_get(e, "top");
        size_t m = t2.n_top;
        double best = t2.best;
        /* entropy of the listed alternatives, renormalised (log-sum-exp from best) */
        double z = 0;
        for (size_t k = 0; k < m; k++) z += exp(json_number_value(json_object_get(json_array_get(top, k), "logprob")) - best);
        double h = 0;
        for (size_t k = 0; k < m; k++) {
            double p = exp(json_number_value(json_object_get(json_array_get(top, k), "logprob")) - best) / z;
            if (p > 0) h -= p * log(p);
        }
        ent_sum += h;
        out->n_margin++;
        margin[i] = t2.margin;
        out->n_near += margin[i] < DRIFT_RISK_NEAR_NATS;
        out->soft_fine += exp(-margin[i] / 0.25);
        out->soft_coarse += exp(-margin[i] / 2.0);
        if (out->min_margin_pos < 0 || margin[i] < out->min_margin) {
            out->min_margin = margin[i];
            out->min_margin_pos = (long)i;
        }
    }
    if (oom) {
        rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory reading %zu logprobs", n);
        goto done;
    }
    out->n_tokens = (long)n;
    if (out->n_margin > 0) {
        out->mean_entropy = ent_sum / (double)out->n_margin;
        out->min_margin_frac = (double)out->min_margin_pos / (double)n;
    }
    /* the critical region: a token span */
    size_t lo = 0, hi = 0;
    const wl_traits *wt = wl_traits_of(wl);
    if (wt && wt->risk_region == WL_REGION_HEAD) {
        hi = n < DRIFT_RISK_HEAD_TOKENS ? n : DRIFT_RISK_HEAD_TOKENS;
    } else if (wl != DRIFT_WL_UNKNOWN && n > 0) {
        size_t bs = 0, be = 0;
        if (region_bytes(text.data ? text.data : "", text.len, wl, &bs, &be)) {
            /* token i covers bytes [tok_end[i-1], tok_end[i]); it is in when it overlaps [bs, be) */
            lo = n;
            for (size_t i = 0; i < n; i++) {
                size_t ts = i ? tok_end[i - 1] : 0, te = tok_end[i];
                if (te > bs && ts < be) {
                    if (lo == n) lo = i;
                    hi = i + 1;
                }
            }
            if (lo == n) lo = hi = 0;
        }
    }
    if (hi > lo) {
        out->region_found = 1;
        out->region_lo = (long)lo;
        out->region_hi = (long)hi;
        for (size_t i = lo; i < hi; i++)
            if (!isnan(margin[i]) && (isnan(out->region_margin) || margin[i] < out->region_margin))
                out->region_margin = margin[i];
        out->min_in_region = out->min_margin_pos >= (long)lo && out->min_margin_pos < (long)hi;
    }
done:
    json_decref(root);
    free(margin);
    free(tok_end);
    buf_free(&text);
    if (rc) features_reset(out);
    return rc;
}

drift_status drift_risk_features_compute(const char *logprobs_json, drift_risk_features *out, drift_error *err) {
    return drift_risk_features_for(logprobs_json, DRIFT_WL_UNKNOWN, out, err);
}

double drift_risk_score(const drift_risk_features *f) {
    if (!f || f->n_margin <= 0 || !(f->min_margin >= 0)) return NAN;
    return exp(-f->min_margin / RISK_T);
}

/* ---- the fitted model (risk/v2-logit) ---- */

int drift_risk_x(const drift_risk_features *f, double x[DRIFT_RISK_NX]) {
    if (!f || f->n_margin <= 0 || !(f->min_margin >= 0)) return -1;
    x[0] = exp(-f->min_margin / RISK_T);
    x[1] = f->region_margin >= 0 ? exp(-f->region_margin / RISK_T) : x[0];
    x[2] = f->min_in_region ? 1.0 : 0.0;
    x[3] = f->mean_entropy >= 0 ? f->mean_entropy : 0.0;
    x[4] = log1p((double)f->n_tokens);
    x[5] = log1p((double)f->n_near);
    x[6] = log1p(f->soft_fine);
    x[7] = log1p(f->soft_coarse);
    return 0;
}

static double logistic(double t) { return t >= 0 ? 1.0 / (1.0 + exp(-t)) : exp(t) / (1.0 + exp(t)); }

double drift_risk_logit_prob(const drift_risk_model *m, const double x[DRIFT_RISK_NX]) {
    double t = m->beta[0];
    for (int j = 0; j < DRIFT_RISK_NX; j++) t += m->beta[j + 1] * (x[j] - m->mean[j]) / m->sd[j];
    return logistic(t);
}

/* Solves the symmetric positive definite system a (p, p) x = b in place
 * (Cholesky); b gets x. Returns -1 when a is not positive definite. */
static int chol_solve(double *a, double *b, int p) {
    for (int j = 0; j < p; j++) {
        double d = a[j * p + j];
        for (int k = 0; k < j; k++) d -= a[j * p + k] * a[j * p + k];
        if (!(d > 1e-300)) return -1;
        d = sqrt(d);
        a[j * p + j] = d;
        for (int i = j + 1; i < p; i++) {
            double v = a[i * p + j];
            for (int k = 0; k < j; k++) v -= a[i * p + k] * a[j * p + k];
            a[i * p + j] = v / d;
        }
    }
    for (int i = 0; i < p; i++) { /* L y = b */
        double v = b[i];
        for (int k = 0; k < i; k++) v -= a[i * p + k] * b[k];
        b[i] = v / a[i * p + i];
    }
    for (int i = p - 1; i >= 0; i--) { /* L^T x = y */
        double v = b[i];
        for (int k = i + 1; k < p; k++) v -= a[k * p + i] * b[k];
        b[i] = v / a[i * p + i];
    }
    return 0;
}

drift_status drift_risk_logit_fit(const double *x, const int *y, size_t n, double ridge, drift_workload wl,
                                  drift_risk_model *m, drift_error *err) {
    enum { P = DRIFT_RISK_NX + 1 };
    if (!m) return drift_error_set(err, DRIFT_ERR_INVALID, "risk fit needs an output");
    memset(m, 0, sizeof *m);
    if (!x || !y || n < 2) return drift_error_set(err, DRIFT_ERR_INVALID, "risk fit needs at least 2 rows");
    if (!(ridge >= 0) || !isfinite(ridge)) return drift_error_set(err, DRIFT_ERR_INVALID, "risk fit: ridge %g < 0", ridge);
    snprintf(m->version, sizeof m->version, "%s", DRIFT_RISK_V2);
    m->workload = wl;
    m->ridge = ridge;
    m->n_fit = n;
    for (size_t i = 0; i < n; i++) {
        m->n_fit_flips += y[i] != 0;
        for (int j = 0; j < DRIFT_RISK_NX; j++)
            if (!isfinite(x[i * DRIFT_RISK_NX + j]))
                return drift_error_set(err, DRIFT_ERR_INVALID, "risk fit: row %zu input %d is not finite", i, j);
    }
    if (m->n_fit_flips == 0 || m->n_fit_flips == n)
        return drift_error_set(err, DRIFT_ERR_INVALID, "risk fit: %zu of %zu rows flipped (both outcomes needed)",
                               m->n_fit_flips, n);
    for (int j = 0; j < DRIFT_RISK_NX; j++) {
        double s = 0, ss = 0;
        for (size_t i = 0; i < n; i++) s += x[i * DRIFT_RISK_NX + j];
        m->mean[j] = s / (double)n;
        for (size_t i = 0; i < n; i++) {
            double d = x[i * DRIFT_RISK_NX + j] - m->mean[j];
            ss += d * d;
        }
        m->sd[j] = sqrt(ss / (double)n);
        if (!(m->sd[j] > 1e-12)) m->sd[j] = 1.0;
    }
    double base = (double)m->n_fit_flips / (double)n;
    m->beta[0] = log(base / (1 - base));
    for (int it = 1; it <= 100; it++) {
        double h[P * P] = {0}, g[P] = {0};
        for (size_t i = 0; i < n; i++) {
            double z[P];
            z[0] = 1;
            for (int j = 0; j < DRIFT_RISK_NX; j++) z[j + 1] = (x[i * DRIFT_RISK_NX + j] - m->mean[j]) / m->sd[j];
            double t = 0;
            for (int j = 0; j < P; j++) t += m->beta[j] * z[j];
            double p = logistic(t), w = p * (1 - p), r = (y[i] != 0) - p;
            for (int a = 0; a < P; a++) {
                g[a] += z[a] * r;
                for (int b = 0; b <= a; b++) h[a * P + b] += w * z[a] * z[b];
            }
        }
        for (int a = 0; a < P; a++) {
            for (int b = a + 1; b < P; b++) h[a * P + b] = h[b * P + a];
            if (a) {
                h[a * P + a] += ridge;
                g[a] -= ridge * m->beta[a];
            }
        }
        h[0] += 1e-12; /* keeps a flat intercept direction solvable */
        if (chol_solve(h, g, P))
            return drift_error_set(err, DRIFT_ERR_INVALID, "risk fit: singular curvature at step %d (use ridge > 0)", it);
        double big = 0;
        for (int a = 0; a < P; a++) {
            m->beta[a] += g[a];
            if (fabs(g[a]) > big) big = fabs(g[a]);
        }
        m->iterations = it;
        if (big < 1e-9) return DRIFT_OK;
        if (!isfinite(big) || fabs(m->beta[0]) > 1e6) break;
    }
    return drift_error_set(err, DRIFT_ERR_INVALID, "risk fit: no convergence in %d steps (separable data? use ridge > 0)",
                           m->iterations);
}

/* The shipped models, one per workload at most (drift_risk_score_for falls
 * back to risk/v1 for a workload without one). None is shipped. On the
 * fragile models' stores (bench_risk_bench, figures in bench/BENCHMARKS.md)
 * math: held out by precision the fit ranked the coarse formats' flips
 * (int4, mxfp4) better than v1 and the fine ones' (bf16, fp8, int8) worse,
 * v1 winning on average; code: the fit won held out by precision but lost
 * held out by model, on few flips; safety: no flips to fit. A fit earns a
 * row here only by beating v1 held out both ways. A row: bench_risk_bench
 * --emit's output for that workload. */
static const drift_risk_model builtin_models[] = {
    {.version = DRIFT_RISK_V2, .workload = DRIFT_WL_UNKNOWN},
};

const drift_risk_model *drift_risk_model_builtin(drift_workload wl) {
    for (size_t i = 0; i < sizeof builtin_models / sizeof builtin_models[0]; i++)
        if (builtin_models[i].workload == wl && builtin_models[i].n_fit > 0) return &builtin_models[i];
    return NULL;
}

double drift_risk_score_for(const drift_risk_features *f, drift_workload wl, const char **version) {
    const drift_risk_model *m = drift_risk_model_builtin(wl);
    double x[DRIFT_RISK_NX];
    if (version) *version = m ? m->version : DRIFT_RISK_VERSION;
    if (!m) return drift_risk_score(f);
    if (drift_risk_x(f, x)) return NAN;
    return drift_risk_logit_prob(m, x);
}

/* ---- ranking quality ---- */

typedef struct risk_item {
    double s;
    int y;
} risk_item;

static int item_cmp_desc(const void *a, const void *b) {
    double x = ((const risk_item *)a)->s, y = ((const risk_item *)b)->s;
    return (x < y) - (x > y);
}

/* AUC and precision at frac of it[0..n) (sorted here, descending). AUC is
 * NAN without both classes. */
static void rank_stats(risk_item *it, size_t n, double frac, double *auc, double *prec) {
    qsort(it, n, sizeof *it, item_cmp_desc);
    size_t npos = 0;
    for (size_t i = 0; i < n; i++) npos += it[i].y != 0;
    size_t nneg = n - npos;
    /* Mann-Whitney over tie groups: a positive beats every negative below
     * its group and half of those in it */
    double wins = 0;
    size_t neg_below = nneg;
    size_t top = (size_t)ceil(frac * (double)n - 1e-9);
    if (top < 1) top = 1;
    if (top > n) top = n;
    double hits = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i, gp = 0;
        while (j < n && it[j].s == it[i].s) gp += it[j++].y != 0;
        size_t gn = (j - i) - gp;
        neg_below -= gn;
        wins += (double)gp * ((double)neg_below + 0.5 * (double)gn);
        if (i < top) {
            size_t take = (j <= top ? j : top) - i;
            hits += (double)gp * (double)take / (double)(j - i);
        }
        i = j;
    }
    *auc = (npos && nneg) ? wins / ((double)npos * (double)nneg) : NAN;
    *prec = n ? hits / (double)top : NAN;
}

static int dbl_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Percentile (type 7: linear between order statistics) of sorted v[0..n). */
static double quantile(const double *v, size_t n, double q) {
    if (n == 0) return NAN;
    double h = q * (double)(n - 1);
    size_t lo = (size_t)floor(h);
    if (lo + 1 >= n) return v[n - 1];
    return v[lo] + (h - (double)lo) * (v[lo + 1] - v[lo]);
}

static drift_status check_input(const double *score, const int *outcome, size_t n, drift_error *err) {
    if (!score || !outcome || n == 0) return drift_error_set(err, DRIFT_ERR_INVALID, "risk ranking needs n > 0 scores and outcomes");
    for (size_t i = 0; i < n; i++)
        if (isnan(score[i]))
            return drift_error_set(err, DRIFT_ERR_INVALID, "risk ranking: score %zu is NAN (leave unknown scores out)", i);
    return DRIFT_OK;
}

drift_status drift_risk_auc(const double *score, const int *outcome, size_t n, double *auc, double *prec10,
                            drift_error *err) {
    drift_status rc = check_input(score, outcome, n, err);
    if (rc) return rc;
    risk_item *it = malloc(n * sizeof *it);
    if (!it) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory ranking %zu prompts", n);
    for (size_t i = 0; i < n; i++) it[i] = (risk_item){score[i], outcome[i] != 0};
    double a, p;
    rank_stats(it, n, 0.10, &a, &p);
    free(it);
    if (auc) *auc = a;
    if (prec10) *prec10 = p;
    return DRIFT_OK;
}

drift_status drift_risk_rank_eval(const double *score, const int *outcome, size_t n, int resamples, uint64_t seed,
                                  drift_risk_rank *out, drift_error *err) {
    if (!out) return drift_error_set(err, DRIFT_ERR_INVALID, "risk ranking needs an output");
    memset(out, 0, sizeof *out);
    drift_status rc = check_input(score, outcome, n, err);
    if (rc) return rc;
    if (resamples < 100) return drift_error_set(err, DRIFT_ERR_INVALID, "risk ranking: %d resamples (at least 100)", resamples);
    risk_item *it = malloc(n * sizeof *it);
    double *ba = malloc((size_t)resamples * sizeof *ba), *bp = malloc((size_t)resamples * sizeof *bp);
    if (!it || !ba || !bp) {
        free(it);
        free(ba);
        free(bp);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory bootstrapping %zu prompts", n);
    }
    out->n = n;
    for (size_t i = 0; i < n; i++) {
        it[i] = (risk_item){score[i], outcome[i] != 0};
        out->n_flipped += outcome[i] != 0;
    }
    out->top_n = (size_t)ceil(0.10 * (double)n - 1e-9);
    if (out->top_n < 1) out->top_n = 1;
    out->base_rate = (double)out->n_flipped / (double)n;
    rank_stats(it, n, 0.10, &out->auc, &out->prec10);
    util_rng rng;
    util_rng_seed(&rng, seed);
    size_t na = 0;
    for (int b = 0; b < resamples; b++) {
        for (size_t i = 0; i < n; i++) {
            size_t j = (size_t)util_rng_below(&rng, n);
            it[i] = (risk_item){score[j], outcome[j] != 0};
        }
        double a, p;
        rank_stats(it, n, 0.10, &a, &p);
        if (!isnan(a)) ba[na++] = a;
        bp[b] = p;
    }
    qsort(ba, na, sizeof *ba, dbl_cmp);
    qsort(bp, (size_t)resamples, sizeof *bp, dbl_cmp);
    out->auc_resamples = na;
    out->auc_ci[0] = quantile(ba, na, 0.025);
    out->auc_ci[1] = quantile(ba, na, 0.975);
    out->prec10_ci[0] = quantile(bp, (size_t)resamples, 0.025);
    out->prec10_ci[1] = quantile(bp, (size_t)resamples, 0.975);
    free(it);
    free(ba);
    free(bp);
    return DRIFT_OK;
}
