/* token_kl.c - the math of teacher-forced token divergence (divergence.h).
 *
 * One position: both logit rows go through a log-softmax in double
 * (lse = max + log(sum exp(x - max))), then
 *     KL(b || t) = sum_i p_b(i) * ((b_i - lse_b) - (t_i - lse_t))
 * over the whole vocabulary, with no cut-off (llama-perplexity skips the
 * terms with log p_b <= -16 and reads the baseline from 16-bit quantized log
 * probabilities; the two agree to about 1e-4 nats). The top-1 tokens are
 * the first maximum of each row, what greedy decoding picks.
 *
 * Many positions: the accumulator keeps every position's KL and delta-p
 * (two doubles each), so the percentiles are exact; the summary sorts
 * copies. Standard errors use a two-pass variance. The correlation helper
 * (Pearson, Spearman with average ranks, percentile bootstrap over pairs)
 * serves the KL-versus-flip-rate study in bench/. The data the pipeline's
 * steps fill (drift_tokdiv_report, drift_tokdiv_configs) is freed here
 * too, beside its math, so that a comparison holding one (compare --kl)
 * or the report's caller does not reach into the pipeline. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/divergence.h"
#include "util/util.h"

static void prompt_clear(drift_tokdiv_prompt *p) {
    free(p->prompt_id);
    free(p->first_base_text);
    free(p->first_target_text);
    free(p->error);
}

/* See divergence.h. */
void drift_tokdiv_report_clear(drift_tokdiv_report *r) {
    if (!r) return;
    for (size_t i = 0; i < r->n_prompts; i++) prompt_clear(&r->prompts[i]);
    free(r->prompts);
    free(r->baseline);
    free(r->target);
    free(r->baseline_spec);
    free(r->target_spec);
    free(r->api);
    free(r->method);
    memset(r, 0, sizeof *r);
}

/* See divergence.h. */
void drift_tokdiv_reports_free(drift_tokdiv_report *r, size_t n) {
    for (size_t i = 0; r && i < n; i++) drift_tokdiv_report_clear(&r[i]);
    free(r);
}

/* See divergence.h. */
void drift_tokdiv_configs_clear(drift_tokdiv_configs *k) {
    if (!k) return;
    for (size_t i = 0; i < k->n; i++) free(k->points[i].label);
    for (size_t i = 0; i < k->n_not_embedded; i++) free(k->not_embedded[i]);
    free(k->points);
    free(k->not_embedded);
    memset(k, 0, sizeof *k);
}

/* log(sum exp(x)) of row x (n), in double; *imax = the first maximum.
 * Returns NaN when a value is NaN or +inf. */
static double row_lse(const float *x, int n, int32_t *imax) {
    double mx = -INFINITY;
    int32_t im = 0;
    for (int i = 0; i < n; i++) {
        double v = x[i];
        if (isnan(v) || v == INFINITY) return NAN;
        if (v > mx) {
            mx = v;
            im = i;
        }
    }
    *imax = im;
    if (mx == -INFINITY) return NAN; /* every logit -inf: no distribution */
    double s = 0;
    for (int i = 0; i < n; i++) s += exp((double)x[i] - mx);
    return mx + log(s);
}

drift_tokdiv_pos drift_tokdiv_compare(const float *base_logits, const float *target_logits, int n_vocab, int32_t token) {
    drift_tokdiv_pos p = {NAN, NAN, NAN, -1, -1, NAN, NAN};
    if (!base_logits || !target_logits || n_vocab <= 0) return p;
    double lb = row_lse(base_logits, n_vocab, &p.top_base);
    double lt = row_lse(target_logits, n_vocab, &p.top_target);
    if (isnan(lb) || isnan(lt)) return p;
    double kl = 0;
    for (int i = 0; i < n_vocab; i++) {
        double lpb = (double)base_logits[i] - lb;
        double pb = exp(lpb);
        if (pb == 0) continue;
        kl += pb * (lpb - ((double)target_logits[i] - lt));
    }
    p.kl = kl < 0 ? 0 : kl;
    if (token >= 0 && token < n_vocab) {
        p.lp_base = (double)base_logits[token] - lb;
        p.lp_target = (double)target_logits[token] - lt;
        p.p_base = exp(p.lp_base);
        p.p_target = exp(p.lp_target);
    }
    return p;
}

static int acc_grow(drift_tokdiv_acc *a, size_t want) {
    if (want <= a->cap) return 0;
    size_t nc = a->cap ? a->cap : 256;
    while (nc < want) nc *= 2;
    double *k = realloc(a->kl, nc * sizeof *k);
    if (!k) return -1;
    a->kl = k;
    double *d = realloc(a->dp, nc * sizeof *d);
    if (!d) return -1;
    a->dp = d;
    a->cap = nc;
    return 0;
}

drift_status drift_tokdiv_acc_add(drift_tokdiv_acc *a, const drift_tokdiv_pos *p, drift_error *err) {
    double dp = p->p_target - p->p_base;
    if (!isfinite(p->kl) || !isfinite(dp) || !isfinite(p->lp_base) || !isfinite(p->lp_target)) {
        a->n_nonfinite++;
        return DRIFT_OK;
    }
    if (acc_grow(a, a->n + 1)) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    a->kl[a->n] = p->kl;
    a->dp[a->n] = dp;
    a->n++;
    if (p->top_base == p->top_target) a->n_same_top++;
    a->sum_nll_base -= p->lp_base;
    a->sum_nll_target -= p->lp_target;
    return DRIFT_OK;
}

drift_status drift_tokdiv_acc_merge(drift_tokdiv_acc *dst, const drift_tokdiv_acc *src, drift_error *err) {
    if (src->n && acc_grow(dst, dst->n + src->n)) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    if (src->n) {
        memcpy(dst->kl + dst->n, src->kl, src->n * sizeof *src->kl);
        memcpy(dst->dp + dst->n, src->dp, src->n * sizeof *src->dp);
    }
    dst->n += src->n;
    dst->n_same_top += src->n_same_top;
    dst->n_nonfinite += src->n_nonfinite;
    dst->sum_nll_base += src->sum_nll_base;
    dst->sum_nll_target += src->sum_nll_target;
    return DRIFT_OK;
}

void drift_tokdiv_acc_clear(drift_tokdiv_acc *a) {
    if (!a) return;
    free(a->kl);
    free(a->dp);
    memset(a, 0, sizeof *a);
}

double drift_tokdiv_percentile(const double *sorted, size_t n, double fraction) {
    if (!n) return NAN;
    if (fraction <= 0) return sorted[0];
    if (fraction >= 1) return sorted[n - 1];
    double p = fraction * (double)(n - 1);
    size_t ip = (size_t)p;
    p -= (double)ip;
    size_t hi = ip + 1 < n ? ip + 1 : n - 1;
    double a = sorted[ip], b = sorted[hi];
    if (p == 0 || a == b) return a;
    /* a + p (b - a), kept within [a, b]: llama-perplexity's (1 - p) a + p b
     * in exact arithmetic, but never above the next order statistic by a
     * rounding (so p99 <= max holds for any values) */
    double v = a + p * (b - a);
    return v < a ? a : v > b ? b : v;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Mean of v (n) and sqrt(var / (n - 1)) (NaN when n < 2), two passes. */
static void mean_se(const double *v, size_t n, double *mean, double *se) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += v[i];
    double m = n ? s / (double)n : NAN;
    double ss = 0;
    for (size_t i = 0; i < n; i++) ss += (v[i] - m) * (v[i] - m);
    *mean = m;
    *se = n >= 2 ? sqrt(ss / (double)n / (double)(n - 1)) : NAN;
}

drift_status drift_tokdiv_acc_summary(const drift_tokdiv_acc *a, drift_tokdiv_summary *out, drift_error *err) {
    drift_tokdiv_summary s;
    double *fields[] = {&s.kl_mean, &s.kl_se, &s.kl_p50, &s.kl_p90, &s.kl_p99, &s.kl_max, &s.same_top,
                        &s.same_top_se, &s.dp_mean, &s.dp_se, &s.dp_rms, &s.dp_min, &s.dp_p01, &s.dp_p05,
                        &s.dp_p10, &s.dp_p25, &s.dp_p50, &s.dp_p75, &s.dp_p90, &s.dp_p95, &s.dp_p99, &s.dp_max,
                        &s.ppl_base, &s.ppl_target};
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) *fields[i] = NAN;
    s.n = a->n;
    s.n_nonfinite = a->n_nonfinite;
    if (a->n) {
        size_t n = a->n;
        double *k = malloc(n * sizeof *k), *d = malloc(n * sizeof *d);
        if (!k || !d) {
            free(k);
            free(d);
            return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        }
        memcpy(k, a->kl, n * sizeof *k);
        memcpy(d, a->dp, n * sizeof *d);
        mean_se(k, n, &s.kl_mean, &s.kl_se);
        mean_se(d, n, &s.dp_mean, &s.dp_se);
        double sq = 0;
        for (size_t i = 0; i < n; i++) sq += d[i] * d[i];
        s.dp_rms = sqrt(sq / (double)n);
        qsort(k, n, sizeof *k, cmp_double);
        qsort(d, n, sizeof *d, cmp_double);
        s.kl_p50 = drift_tokdiv_percentile(k, n, 0.50);
        s.kl_p90 = drift_tokdiv_percentile(k, n, 0.90);
        s.kl_p99 = drift_tokdiv_percentile(k, n, 0.99);
        s.kl_max = k[n - 1];
        s.dp_min = d[0];
        s.dp_p01 = drift_tokdiv_percentile(d, n, 0.01);
        s.dp_p05 = drift_tokdiv_percentile(d, n, 0.05);
        s.dp_p10 = drift_tokdiv_percentile(d, n, 0.10);
        s.dp_p25 = drift_tokdiv_percentile(d, n, 0.25);
        s.dp_p50 = drift_tokdiv_percentile(d, n, 0.50);
        s.dp_p75 = drift_tokdiv_percentile(d, n, 0.75);
        s.dp_p90 = drift_tokdiv_percentile(d, n, 0.90);
        s.dp_p95 = drift_tokdiv_percentile(d, n, 0.95);
        s.dp_p99 = drift_tokdiv_percentile(d, n, 0.99);
        s.dp_max = d[n - 1];
        s.ppl_base = exp(a->sum_nll_base / (double)n);
        s.ppl_target = exp(a->sum_nll_target / (double)n);
        s.same_top = (double)a->n_same_top / (double)n;
        s.same_top_se = n >= 2 ? sqrt(s.same_top * (1 - s.same_top) / (double)(n - 1)) : NAN;
        free(k);
        free(d);
    }
    *out = s;
    return DRIFT_OK;
}

/* ---- correlation ---- */

static double pearson(const double *x, const double *y, size_t n) {
    if (n < 3) return NAN;
    double mx = 0, my = 0;
    for (size_t i = 0; i < n; i++) {
        mx += x[i];
        my += y[i];
    }
    mx /= (double)n;
    my /= (double)n;
    double sxy = 0, sxx = 0, syy = 0;
    for (size_t i = 0; i < n; i++) {
        sxy += (x[i] - mx) * (y[i] - my);
        sxx += (x[i] - mx) * (x[i] - mx);
        syy += (y[i] - my) * (y[i] - my);
    }
    if (!(sxx > 0) || !(syy > 0)) return NAN;
    return sxy / sqrt(sxx * syy);
}

typedef struct rank_item {
    double v;
    size_t i;
} rank_item;

static int cmp_rank(const void *a, const void *b) {
    const rank_item *p = a, *q = b;
    return p->v < q->v ? -1 : p->v > q->v;
}

/* r[i] = the rank of v[i] (1-based; ties get their average rank). tmp: n items. */
static void ranks(const double *v, size_t n, double *r, rank_item *tmp) {
    for (size_t i = 0; i < n; i++) tmp[i] = (rank_item){v[i], i};
    qsort(tmp, n, sizeof *tmp, cmp_rank);
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j + 1 < n && tmp[j + 1].v == tmp[i].v) j++;
        double avg = (double)(i + j) / 2.0 + 1.0;
        for (size_t k = i; k <= j; k++) r[tmp[k].i] = avg;
        i = j + 1;
    }
}

static double spearman(const double *x, const double *y, size_t n, double *rx, double *ry, rank_item *tmp) {
    if (n < 3) return NAN;
    ranks(x, n, rx, tmp);
    ranks(y, n, ry, tmp);
    return pearson(rx, ry, n);
}

static double quantile_of(double *v, size_t n, double f) {
    qsort(v, n, sizeof *v, cmp_double);
    return drift_tokdiv_percentile(v, n, f);
}

drift_status drift_tokdiv_correlate(const double *x, const double *y, size_t n, int n_boot, uint64_t seed,
                                    drift_tokdiv_corr *out, drift_error *err) {
    memset(out, 0, sizeof *out);
    out->n = n;
    out->pearson = out->spearman = NAN;
    out->pearson_ci[0] = out->pearson_ci[1] = out->spearman_ci[0] = out->spearman_ci[1] = NAN;
    if (n_boot < 0) return drift_error_set(err, DRIFT_ERR_INVALID, "bootstrap resamples %d < 0", n_boot);
    size_t m = n ? n : 1, nb = n_boot > 0 ? (size_t)n_boot : 1;
    double *bx = malloc(m * sizeof *bx), *by = malloc(m * sizeof *by), *rx = malloc(m * sizeof *rx),
           *ry = malloc(m * sizeof *ry), *bp = malloc(nb * sizeof *bp), *bs = malloc(nb * sizeof *bs);
    rank_item *tmp = malloc(m * sizeof *tmp);
    drift_status rc = DRIFT_OK;
    if (!bx || !by || !rx || !ry || !bp || !bs || !tmp) {
        rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        goto done;
    }
    out->pearson = pearson(x, y, n);
    out->spearman = spearman(x, y, n, rx, ry, tmp);
    if (isnan(out->pearson) || n_boot == 0) goto done;
    util_rng rng;
    util_rng_seed(&rng, seed);
    size_t got = 0, redraws = 0;
    while (got < (size_t)n_boot && redraws <= (size_t)n_boot) {
        for (size_t i = 0; i < n; i++) {
            size_t j = (size_t)util_rng_below(&rng, n);
            bx[i] = x[j];
            by[i] = y[j];
        }
        double p = pearson(bx, by, n), s = spearman(bx, by, n, rx, ry, tmp);
        if (isnan(p) || isnan(s)) {
            redraws++;
            continue;
        }
        bp[got] = p;
        bs[got] = s;
        got++;
    }
    out->n_boot = (int)got;
    if (got) {
        out->pearson_ci[0] = quantile_of(bp, got, 0.025);
        out->pearson_ci[1] = quantile_of(bp, got, 0.975);
        out->spearman_ci[0] = quantile_of(bs, got, 0.025);
        out->spearman_ci[1] = quantile_of(bs, got, 0.975);
    }
done:
    free(bx);
    free(by);
    free(rx);
    free(ry);
    free(bp);
    free(bs);
    free(tmp);
    return rc;
}

/* ---- top-K lists (HTTP servers' prompt logprobs) ---- */

#define TOP_REST_FLOOR 1e-12

static long top_find(const drift_tokdiv_top *l, const drift_tokdiv_top *o, size_t i, int by_id) {
    for (size_t k = 0; k < l->n; k++) {
        if (by_id ? l->ids[k] == o->ids[i] : !strcmp(l->texts[k], o->texts[i])) return (long)k;
    }
    return -1;
}

/* See divergence.h. */
drift_tokdiv_pos drift_tokdiv_compare_top(const drift_tokdiv_top *b, const drift_tokdiv_top *t, int by_id) {
    drift_tokdiv_pos p = {NAN, NAN, NAN, -1, -1, NAN, NAN};
    if (!b || !t || b->n == 0 || t->n == 0) return p;
    if (by_id ? (!b->ids || !t->ids) : (!b->texts || !t->texts)) return p;
    double kl = 0, sb = 0, st = 0;
    for (size_t i = 0; i < b->n; i++) {
        long j = top_find(t, b, i, by_id);
        if (j < 0) continue;
        double pb = exp(b->lp[i]), pt = exp(t->lp[j]);
        if (!isfinite(b->lp[i]) && b->lp[i] != -INFINITY) return p;
        if (!isfinite(t->lp[j]) && t->lp[j] != -INFINITY) return p;
        sb += pb;
        st += pt;
        if (pb > 0) kl += pb * (b->lp[i] - t->lp[j]);
    }
    double rb = sb < 1 ? 1 - sb : 0, rt = st < 1 ? 1 - st : 0;
    if (rb > 0) kl += rb * log(rb / (rt > TOP_REST_FLOOR ? rt : TOP_REST_FLOOR));
    p.kl = kl < 0 || !isfinite(kl) ? (isfinite(kl) ? 0 : NAN) : kl;
    if (by_id) {
        p.top_base = b->ids[0];
        p.top_target = t->ids[0];
    } else {
        p.top_base = 0;
        p.top_target = strcmp(b->texts[0], t->texts[0]) != 0;
    }
    p.lp_base = b->lp_token;
    p.lp_target = t->lp_token;
    p.p_base = exp(b->lp_token);
    p.p_target = exp(t->lp_token);
    return p;
}
