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

#include "driftbench/compare.h"
#include "util/util.h"

#define RISK_T 1.0 /* nats */

/* ---- features ---- */

drift_status drift_risk_features_compute(const char *logprobs_json, drift_risk_features *out, drift_error *err) {
    if (!out) return drift_error_set(err, DRIFT_ERR_INVALID, "risk features need an output");
    memset(out, 0, sizeof *out);
    out->min_margin = NAN;
    out->min_margin_pos = -1;
    out->min_margin_frac = NAN;
    out->mean_entropy = NAN;
    if (!logprobs_json) return drift_error_set(err, DRIFT_ERR_INVALID, "risk features need logprobs");
    json_error_t je;
    json_t *root = json_loads(logprobs_json, 0, &je);
    if (!root)
        return drift_error_set(err, DRIFT_ERR_PARSE, "logprobs: line %d column %d: %s", je.line, je.column, je.text);
    drift_status rc = DRIFT_OK;
    if (!json_is_array(root)) {
        rc = drift_error_set(err, DRIFT_ERR_PARSE, "logprobs: not a JSON array");
        goto done;
    }
    size_t n = json_array_size(root);
    double ent_sum = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(root, i);
        if (!json_is_object(e)) {
            rc = drift_error_set(err, DRIFT_ERR_PARSE, "logprobs: element %zu: not an object", i);
            goto done;
        }
        json_t *top = json_object_get(e, "top");
        if (!top || json_is_null(top)) continue;
        if (!json_is_array(top)) {
            rc = drift_error_set(err, DRIFT_ERR_PARSE, "logprobs: element %zu: \"top\" is not an array", i);
            goto done;
        }
        size_t m = json_array_size(top);
        double best = -INFINITY, second = -INFINITY;
        for (size_t k = 0; k < m; k++) {
            json_t *a = json_array_get(top, k);
            json_t *lp = json_is_object(a) ? json_object_get(a, "logprob") : NULL;
            if (!json_is_number(lp)) {
                rc = drift_error_set(err, DRIFT_ERR_PARSE, "logprobs: element %zu: top[%zu]: no numeric \"logprob\"",
                                     i, k);
                goto done;
            }
            double v = json_number_value(lp);
            if (!isfinite(v)) {
                rc = drift_error_set(err, DRIFT_ERR_PARSE, "logprobs: element %zu: top[%zu]: logprob not finite", i, k);
                goto done;
            }
            if (v > best) {
                second = best;
                best = v;
            } else if (v > second) {
                second = v;
            }
        }
        if (m < 2) continue;
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
        double margin = best - second;
        if (out->min_margin_pos < 0 || margin < out->min_margin) {
            out->min_margin = margin;
            out->min_margin_pos = (long)i;
        }
    }
    out->n_tokens = (long)n;
    if (out->n_margin > 0) {
        out->mean_entropy = ent_sum / (double)out->n_margin;
        out->min_margin_frac = (double)out->min_margin_pos / (double)n;
    }
done:
    json_decref(root);
    if (rc) {
        memset(out, 0, sizeof *out);
        out->min_margin = out->min_margin_frac = out->mean_entropy = NAN;
        out->min_margin_pos = -1;
    }
    return rc;
}

double drift_risk_score(const drift_risk_features *f) {
    if (!f || f->n_margin <= 0 || !(f->min_margin >= 0)) return NAN;
    return exp(-f->min_margin / RISK_T);
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
