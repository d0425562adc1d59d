/* sampler.c - greedy and seeded temperature / top-k / top-p sampling, and
 * logprobs. Everything is computed in double from the float logits, with
 * ties broken by the lower token id, so a given (logits, params, rng state)
 * always gives the same token on any machine. */
#include "model/sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void drift_log_softmax(const float *x, int n, double *out) {
    double mx = -INFINITY;
    for (int i = 0; i < n; i++)
        if ((double)x[i] > mx) mx = x[i];
    double s = 0;
    for (int i = 0; i < n; i++) s += exp((double)x[i] - mx);
    double lse = mx + log(s);
    for (int i = 0; i < n; i++) out[i] = (double)x[i] - lse;
}

typedef struct cand {
    double p;
    int32_t id;
} cand;

static int cmp_cand(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->p != y->p) return x->p > y->p ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

int32_t samp_argmax(const float *x, int n) {
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* c (n, in id order) in cmp_cand's order -- probability
 * descending, ties by id -- by a stable LSD radix sort on the bits of the
 * probabilities (non-negative doubles, no NaN: their bits order as their
 * values; complemented, ascending = descending): 8 passes of 8 bits, a pass
 * skipped where one bucket holds everything. The same order as qsort with
 * cmp_cand (a total order: one sorted sequence) in a few dozen microseconds
 * instead of a few hundred for the 2,021 tokens of the shipped models; the
 * sort was most of a sampled step's CPU time. tmp: n more. Returns the
 * array that holds the result (c or tmp). */
static cand *radix_sort(cand *c, cand *tmp, int n) {
    size_t cnt[8][256];
    memset(cnt, 0, sizeof cnt);
    for (int i = 0; i < n; i++) {
        uint64_t k;
        memcpy(&k, &c[i].p, sizeof k);
        k = ~k;
        for (int d = 0; d < 8; d++) cnt[d][(k >> (8 * d)) & 255]++;
    }
    cand *src = c, *dst = tmp;
    for (int d = 0; d < 8; d++) {
        size_t *h = cnt[d], sum = 0;
        int trivial = 0;
        for (int b = 0; b < 256; b++) {
            if (h[b] == (size_t)n) trivial = 1;
            size_t x = h[b];
            h[b] = sum;
            sum += x;
        }
        if (trivial) continue;
        for (int i = 0; i < n; i++) {
            uint64_t k;
            memcpy(&k, &src[i].p, sizeof k);
            dst[h[(~k >> (8 * d)) & 255]++] = src[i];
        }
        cand *t = src;
        src = dst;
        dst = t;
    }
    return src;
}

int32_t samp_pick(const float *logits, int n, const drift_gen_params *p, util_rng *rng) {
    if (n <= 0) return -1;
    if (p->temperature <= 0) return samp_argmax(logits, n);
    cand *buf = malloc(2 * (size_t)n * sizeof *buf), *c = buf;
    if (!buf) return -1;
    double mx = logits[samp_argmax(logits, n)], s = 0;
    for (int i = 0; i < n; i++) {
        c[i].id = i;
        c[i].p = exp(((double)logits[i] - mx) / p->temperature);
        s += c[i].p;
    }
    int nan = 0;
    for (int i = 0; i < n; i++) {
        c[i].p /= s;
        nan |= c[i].p != c[i].p;
    }
    /* NaN (a NaN or +inf logit): qsort as before, whatever it makes of them */
    if (nan) qsort(c, (size_t)n, sizeof *c, cmp_cand);
    else c = radix_sort(buf, buf + n, n);
    int keep = n;
    if (p->top_k > 0 && p->top_k < keep) keep = p->top_k;
    if (p->top_p > 0 && p->top_p < 1) {
        double cum = 0;
        for (int i = 0; i < keep; i++) {
            cum += c[i].p;
            if (cum >= p->top_p) {
                keep = i + 1;
                break;
            }
        }
    }
    double tot = 0;
    for (int i = 0; i < keep; i++) tot += c[i].p;
    double u = util_rng_uniform(rng) * tot, acc = 0;
    int32_t id = c[keep - 1].id;
    for (int i = 0; i < keep; i++) {
        acc += c[i].p;
        if (u < acc) {
            id = c[i].id;
            break;
        }
    }
    free(buf);
    return id;
}

void samp_logprobs(const float *logits, int n, int32_t chosen, int k, drift_token_logprob *out) {
    memset(out, 0, sizeof *out);
    out->id = chosen;
    double mx = -INFINITY, s = 0;
    for (int i = 0; i < n; i++)
        if ((double)logits[i] > mx) mx = logits[i];
    for (int i = 0; i < n; i++) s += exp((double)logits[i] - mx);
    double lse = mx + log(s);
    out->logprob = chosen >= 0 && chosen < n ? (double)logits[chosen] - lse : -INFINITY;
    if (k > 20) k = 20;
    if (k > n) k = n;
    /* selection of the k best by insertion (k <= 20) */
    int cnt = 0;
    for (int i = 0; i < n && k > 0; i++) {
        double v = logits[i];
        if (cnt == k && v <= (double)logits[out->top_id[cnt - 1]]) continue;
        int j = cnt < k ? cnt++ : k - 1;
        while (j > 0 && (double)logits[out->top_id[j - 1]] < v) {
            out->top_id[j] = out->top_id[j - 1];
            j--;
        }
        out->top_id[j] = i;
    }
    out->n_top = cnt;
    for (int i = 0; i < cnt; i++) out->top_logprob[i] = (double)logits[out->top_id[i]] - lse;
}
