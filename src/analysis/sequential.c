/* sequential.c - an anytime-valid flip-rate gate over a finite suite
 * (compare.h, "sequential gate").
 *
 * Setting. The suite's N counted pairs have outcomes x_1..x_N in {0,1}
 * (flipped or not) and an unknown flip count K0 (rate m0 = K0/N). The
 * gate sees them in a uniformly random order (sampling without
 * replacement: the order is a seeded hash of the prompt ids, which carry
 * no information about the outcomes). After t outcomes with S_t flips,
 * the conditional mean of the next outcome, if the suite's flip count is
 * K, is the without-replacement mean
 *     mu_t(K) = (K - S_{t-1}) / (N - t + 1)
 * (Waudby-Smith & Ramdas, "Confidence sequences for sampling without
 * replacement", NeurIPS 2020, arXiv 2006.04347: their WoR-adjusted mean
 * mu_t^WoR(m) = (N m - sum_{i<t} X_i) / (N - t + 1), the centring of all
 * their WoR martingales; the equation number was not checked against the
 * paper's text, none being at hand here).
 *
 * Capital. For each candidate K two bettors play against mu_t(K) with
 * predictable stakes 0 <= l_t <= LAMBDA_MAX < 1 (functions of the past
 * outcomes and the budget only, never of K):
 *     up_t(K) = prod_{i<=t} (1 - lu_i (x_i - mu_i(K)))   bets "fewer flips than K"
 *     lo_t(K) = prod_{i<=t} (1 + ll_i (x_i - mu_i(K)))   bets "more flips than K"
 * This is the betting ("hedged capital") construction of Waudby-Smith &
 * Ramdas for [0,1]-bounded values, "Estimating means of bounded random
 * variables by betting" (JRSS-B 2024, arXiv 2010.09686, whose WoR section
 * bets against the same centring): hedged capital max(theta K+,
 * (1-theta) K-) >= 1/alpha with theta = 1/2, i.e. each side at alpha/2.
 * Validity: under K = K0, E[x_t | past] = mu_t(K0) exactly, so both
 * products are nonnegative martingales (every factor is >= 1 - LAMBDA_MAX
 * > 0 because mu_t(K) is in [0,1] for every K still consistent with the
 * data), and Ville's inequality gives P(sup_t up_t(K0) >= 2/alpha) <=
 * alpha/2 and the same for lo. The set
 *     C_t = { K : S_t <= K <= S_t + N - t, and no capital at K ever
 *             reached 2/alpha }
 * therefore contains K0 at every t simultaneously with probability
 * >= 1 - alpha, so stopping at any data-dependent time is fine (optional
 * stopping), and the suite being finite is exactly what mu_t uses.
 * Monotonicity: mu_t(K) grows with K and the stakes do not depend on K,
 * so up_t(K) is nondecreasing in K and lo_t(K) nonincreasing: rejecting K
 * by up rejects every larger K at the same step, and C_t is an interval.
 *
 * Gate. With k_hi = the smallest count with k/N >= budget and k_lo = the
 * largest with k/N <= budget: DEPLOY once up(k_hi) has reached 2/alpha or
 * k_hi can no longer be reached (then every K >= k_hi is out of C_t: the
 * interval's upper end is under the budget); BLOCK once lo(k_lo) has
 * reached 2/alpha or S_t > k_lo. A wrong DEPLOY (K0 >= k_hi) needs
 * up(K0) >= up(k_hi) >= 2/alpha, probability <= alpha/2; a wrong BLOCK
 * likewise. Both at the same step (an empty interval, itself an alpha
 * event) decides nothing. When the suite is exhausted the count is known
 * and the gate's verdict is rate <= budget; the replay
 * (drift_compare_sequential) reports an early stop as DEPLOY or BLOCK and,
 * when the pairs ran out first, compare's fixed-size decision (gate.c: the
 * exact interval, which can leave it INCONCLUSIVE), so a replay of every
 * pair says what compare says. The early verdicts are about the suite's
 * own flip rate (the finite population the order samples).
 * Stakes: Kelly's bet for a Bernoulli mean against the boundary's
 * without-replacement mean, l = KELLY_FRACTION * |mu_t(k) - p| /
 * (mu_t(k)(1 - mu_t(k))), with p the past flip rate shrunk towards the
 * budget by PRIOR_WEIGHT pseudo-outcomes, clipped to [0, LAMBDA_MAX]; a
 * bettor whose estimate is on the wrong side of the boundary stakes 0.
 * Only the two budget tests are O(1) per outcome; the whole confidence
 * sequence (keep_interval) is O(N) per outcome.
 *
 * Order. The argument needs the uniformly random order: mu_t(K) is the
 * conditional mean of the next outcome only when every remaining pair is
 * equally likely to come next. A risk order (riskiest first), though fixed
 * before the run, puts the likely flips first, so E[x_t | past] is not
 * mu_t(K0) and neither product is a martingale: measure --sequential
 * refuses --order risk.
 *
 * A sequential measure's runs hold only the pairs asked. Its decoding
 * record says the suite's size per workload ("sequential": "pairs"); the
 * replay then plays a gate over the whole suite (n_total = that size) with
 * the stored pairs in the same seeded order: a prompt's rank key does not
 * depend on which others are present, so the stored pairs come in the
 * order the measure saw them and the replay stops where it stopped. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/compare.h"
#include "util/util.h"

#define LAMBDA_MAX 0.9      /* largest stake: a factor never falls under 0.1 */
#define KELLY_FRACTION 1.0  /* full Kelly at the shrunk estimate (bench/sequential_bench.c compares) */
#define PRIOR_WEIGHT 4.0    /* pseudo-outcomes at the budget in the estimate */
#define RATE_SLACK 1e-9     /* budget*N on an integer counts as that integer */

drift_status drift_seq_gate_init(drift_seq_gate *g, long n_total, double budget, double alpha, int keep_interval,
                                 long watch, drift_error *err) {
    memset(g, 0, sizeof *g);
    g->watch = -1;
    g->stop_lo = g->stop_hi = NAN;
    if (n_total < 1) return drift_error_set(err, DRIFT_ERR_INVALID, "sequential gate: %ld prompts (need >= 1)", n_total);
    if (!(budget >= 0 && budget <= 1))
        return drift_error_set(err, DRIFT_ERR_INVALID, "sequential gate: budget %g is not a fraction in [0, 1]", budget);
    if (!(alpha > 0 && alpha < 1))
        return drift_error_set(err, DRIFT_ERR_INVALID, "sequential gate: alpha %g is not in (0, 1)", alpha);
    if (watch < -1 || watch > n_total)
        return drift_error_set(err, DRIFT_ERR_INVALID, "sequential gate: watched count %ld is not in 0..%ld", watch,
                               n_total);
    g->n_total = n_total;
    g->budget = budget;
    g->alpha = alpha;
    g->k_hi = (long)ceil(budget * (double)n_total - RATE_SLACK);
    g->k_lo = (long)floor(budget * (double)n_total + RATE_SLACK);
    if (g->k_hi < 0) g->k_hi = 0;
    if (g->k_lo > n_total) g->k_lo = n_total;
    g->watch = watch;
    if (keep_interval) {
        size_t n = (size_t)n_total + 1;
        g->cs_up = calloc(n, sizeof *g->cs_up);
        g->cs_lo = calloc(n, sizeof *g->cs_lo);
        g->cs_out = calloc(n, 1);
        if (!g->cs_up || !g->cs_lo || !g->cs_out) {
            drift_seq_gate_free(g);
            return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory for a %ld-prompt confidence sequence",
                                   n_total);
        }
    }
    return DRIFT_OK;
}

void drift_seq_gate_free(drift_seq_gate *g) {
    if (!g) return;
    free(g->cs_up);
    free(g->cs_lo);
    free(g->cs_out);
    g->cs_up = g->cs_lo = NULL;
    g->cs_out = NULL;
}

/* Kelly-type stake against the without-replacement mean mu at a boundary,
 * for an estimate p: positive only when p is on the bettor's side
 * (side +1: p above mu, -1: below); the largest stake when mu is 0 or 1
 * (the next outcome can only move one way). */
static double stake(double mu, double p, int side) {
    double edge = side > 0 ? p - mu : mu - p;
    if (edge <= 0) return 0.0;
    double var = mu * (1.0 - mu);
    if (var <= 0) return LAMBDA_MAX;
    double l = KELLY_FRACTION * edge / var;
    return l > LAMBDA_MAX ? LAMBDA_MAX : l;
}

/* One outcome into the log capitals at flip count k: mu = (k - S)/r. */
static void bet(double *up, double *lo, long k, long s, long r, double lu, double ll, int x) {
    double mu = (double)(k - s) / (double)r;
    *up += log1p(-lu * ((double)x - mu));
    *lo += log1p(ll * ((double)x - mu));
}

static void set_interval(const drift_seq_gate *g, double *lo, double *hi) {
    long a = 0, b = g->n_total;
    while (a <= g->n_total && g->cs_out[a]) a++;
    while (b >= 0 && g->cs_out[b]) b--;
    *lo = (double)a / (double)g->n_total;
    *hi = (double)b / (double)g->n_total;
}

drift_seq_verdict drift_seq_gate_add(drift_seq_gate *g, int flipped) {
    if (g->asked >= g->n_total) return g->verdict;
    int x = flipped ? 1 : 0;
    long s = g->flips, r = g->n_total - g->asked; /* before this outcome: r remain, this one included */
    double p = ((double)s + PRIOR_WEIGHT * g->budget) / ((double)g->asked + PRIOR_WEIGHT);
    double mu_hi = (double)(g->k_hi - s) / (double)r, mu_lo = (double)(g->k_lo - s) / (double)r;
    double lu = stake(mu_hi, p, -1), ll = stake(mu_lo, p, +1);
    double thr = log(2.0 / g->alpha);
    /* the two budget tests, while their boundary is feasible */
    int hi_ok = g->k_hi >= s && g->k_hi <= s + r, lo_ok = g->k_lo >= s && g->k_lo <= s + r;
    double dummy = 0; /* the side each call does not track */
    if (hi_ok) bet(&g->log_up, &dummy, g->k_hi, s, r, lu, ll, x);
    dummy = 0;
    if (lo_ok) bet(&dummy, &g->log_lo, g->k_lo, s, r, lu, ll, x);
    if (g->watch >= 0 && !g->watch_out) {
        if (g->watch >= s && g->watch <= s + r) bet(&g->watch_up, &g->watch_lo, g->watch, s, r, lu, ll, x);
        if (g->watch_up >= thr || g->watch_lo >= thr) g->watch_out = 1;
    }
    if (g->cs_out)
        for (long k = s; k <= s + r; k++) {
            if (g->cs_out[k]) continue;
            bet(&g->cs_up[k], &g->cs_lo[k], k, s, r, lu, ll, x);
            if (g->cs_up[k] >= thr || g->cs_lo[k] >= thr) g->cs_out[k] = 1;
        }
    g->asked++;
    g->flips += x;
    s = g->flips;
    r = g->n_total - g->asked;
    /* counts no longer consistent with the data leave the sequence */
    if (g->watch >= 0 && (g->watch < s || g->watch > s + r)) g->watch_out = 1;
    if (g->cs_out) {
        if (x && s - 1 >= 0) g->cs_out[s - 1] = 1;
        if (!x && s + r + 1 <= g->n_total) g->cs_out[s + r + 1] = 1;
    }
    if (g->verdict != DRIFT_SEQ_OPEN) return g->verdict;
    int deploy = g->k_hi > s + r || g->log_up >= thr;
    int block = g->k_lo < s || g->log_lo >= thr;
    if (g->asked == g->n_total && !deploy && !block) {
        /* exhausted with the rate exactly at the budget: compare's verdict */
        deploy = (double)s / (double)g->n_total <= g->budget + 1e-12;
        block = !deploy;
    }
    if (deploy == block) return g->verdict; /* undecided, or an empty interval */
    g->verdict = deploy ? DRIFT_SEQ_DEPLOY : DRIFT_SEQ_BLOCK;
    g->decided_at = g->asked;
    g->early = g->asked < g->n_total;
    if (g->cs_out) set_interval(g, &g->stop_lo, &g->stop_hi);
    return g->verdict;
}

int drift_seq_gate_interval(const drift_seq_gate *g, double *lo, double *hi) {
    if (!g->cs_out) {
        *lo = *hi = NAN;
        return -1;
    }
    set_interval(g, lo, hi);
    return 0;
}

int drift_seq_gate_covers(const drift_seq_gate *g) { return g->watch >= 0 && !g->watch_out; }

/* ---- the seeded order ---- */

typedef struct order_key {
    uint64_t key;
    size_t idx;
} order_key;

static int cmp_order_key(const void *a, const void *b) {
    const order_key *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* splitmix64's finalizer: spreads a hash over all 64 bits. */
static uint64_t mix64(uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

drift_status drift_seq_order(const char *const *ids, const int *reps, size_t n, uint64_t seed, size_t *perm,
                             drift_error *err) {
    if (n == 0) return DRIFT_OK;
    order_key *k = malloc(n * sizeof *k);
    if (!k) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory ordering %zu prompts", n);
    for (size_t i = 0; i < n; i++) {
        const char *id = ids[i] ? ids[i] : "";
        uint64_t h = util_fnv1a64(id, strlen(id), mix64(seed));
        k[i].key = mix64(h ^ mix64((uint64_t)(reps ? reps[i] : 0) + seed));
        k[i].idx = i;
    }
    qsort(k, n, sizeof *k, cmp_order_key);
    for (size_t i = 0; i < n; i++) perm[i] = k[i].idx;
    free(k);
    return DRIFT_OK;
}

/* ---- replay of a comparison ---- */

/* One workload's pairs through a gate of n_total pairs in the seeded order.
 * n_total >= n_pairs: a sequential measure's partial runs hold only the
 * pairs asked, the gate's population is the whole suite (its recorded
 * size); pairs never asked simply never come. With curve: the confidence
 * sequence after every pair until the verdict ((asked) points). */
static drift_status replay_wl(const drift_wl_result *w, long n_total, double budget, double alpha, uint64_t seed,
                              drift_decide_rule rule, double max_left_out, drift_seq_wl *o, drift_seq_point **curve,
                              drift_error *err) {
    size_t n = w->n_pairs;
    const char **ids = malloc((n ? n : 1) * sizeof *ids);
    int *reps = malloc((n ? n : 1) * sizeof *reps);
    size_t *perm = malloc((n ? n : 1) * sizeof *perm);
    drift_seq_point *pts = curve ? calloc(n ? n : 1, sizeof *pts) : NULL;
    drift_status rc = DRIFT_OK;
    if (!ids || !reps || !perm || (curve && !pts))
        rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory replaying %zu pairs", n);
    for (size_t i = 0; !rc && i < n; i++) {
        ids[i] = w->pairs[i].prompt_id;
        reps[i] = w->pairs[i].replicate;
    }
    if (!rc) rc = drift_seq_order(ids, reps, n, seed, perm, err);
    drift_seq_gate g;
    if (!rc) rc = drift_seq_gate_init(&g, n_total, budget, alpha, 1, -1, err);
    if (!rc) {
        for (size_t i = 0; i < n && g.verdict == DRIFT_SEQ_OPEN; i++) {
            drift_seq_gate_add(&g, w->pairs[perm[i]].flipped);
            if (pts) {
                pts[i].asked = g.asked;
                pts[i].flips = g.flips;
                drift_seq_gate_interval(&g, &pts[i].lo, &pts[i].hi);
            }
        }
        o->asked = g.asked;
        o->flips = g.flips;
        o->verdict = g.verdict;
        o->early = g.early;
        o->lo = g.stop_lo;
        o->hi = g.stop_hi;
        if (g.verdict == DRIFT_SEQ_OPEN) {
            /* the stored pairs ran out before the suite (a sequential
             * measure's errors or an interrupted one): compare's verdict
             * over them, at the interval reached */
            o->verdict = w->flip_rate <= budget + 1e-12 ? DRIFT_SEQ_DEPLOY : DRIFT_SEQ_BLOCK;
            drift_seq_gate_interval(&g, &o->lo, &o->hi);
        }
        /* the outcome in the gate's words: an early stop is certain; at
         * the end of the pairs it is compare's fixed-size decision at this
         * budget (the interval rule can leave it INCONCLUSIVE); no
         * evidence and too many pairs left out decide before any rate */
        drift_decision_reason why;
        drift_decision fixed = drift_gate_decide(w->flips, w->n, w->errors + w->unscored, budget, rule,
                                                 max_left_out, NULL, NULL, NULL, &why);
        if (why == DRIFT_REASON_RATE && o->early) {
            o->decision = o->verdict == DRIFT_SEQ_DEPLOY ? DRIFT_DECISION_DEPLOY : DRIFT_DECISION_BLOCK;
            o->reason = DRIFT_REASON_RATE;
        } else {
            o->decision = fixed;
            o->reason = why;
        }
        drift_seq_gate_free(&g);
    }
    free(ids);
    free(reps);
    free(perm);
    if (curve && !rc) *curve = pts;
    else free(pts);
    return rc;
}

int drift_seq_recorded(const drift_comparison *c, double *alpha, uint64_t *seed, long pairs[DRIFT_WL_COUNT],
                       double budget[DRIFT_WL_COUNT]) {
    for (int k = 0; k < DRIFT_WL_COUNT; k++) pairs[k] = -1, budget[k] = -1;
    const char *dj = c ? c->target.decoding_json : NULL;
    json_t *d = dj ? json_loads(dj, 0, NULL) : NULL;
    json_t *seq = json_object_get(d, "sequential");
    json_t *a = json_object_get(seq, "alpha"), *s = json_object_get(seq, "order_seed");
    json_t *p = json_object_get(seq, "pairs");
    int ok = json_is_object(seq) && json_is_number(a) && json_is_integer(s) && json_integer_value(s) >= 0 &&
             json_is_object(p);
    if (ok) {
        *alpha = json_number_value(a);
        *seed = (uint64_t)json_integer_value(s);
        for (int k = 0; k < DRIFT_WL_COUNT; k++) {
            json_t *v = json_object_get(p, drift_workload_name((drift_workload)k));
            if (json_is_integer(v) && json_integer_value(v) > 0 && json_integer_value(v) <= 1000000000)
                pairs[k] = (long)json_integer_value(v);
            json_t *b = json_object_get(json_object_get(seq, "budget"), drift_workload_name((drift_workload)k));
            if (json_is_number(b) && json_number_value(b) >= 0 && json_number_value(b) <= 1)
                budget[k] = json_number_value(b);
        }
    }
    json_decref(d);
    return ok;
}

/* The gate's population for workload k: the recorded suite size of a
 * sequential measure (never under the pairs present), else the pairs. */
static long population(const drift_wl_result *w, const long *pairs, int k) {
    long n = (long)w->n_pairs;
    return pairs && pairs[k] > n ? pairs[k] : n;
}

drift_status drift_seq_curve(const drift_comparison *c, drift_workload wl, double alpha, uint64_t seed,
                             drift_seq_wl *stop, drift_seq_point **out, size_t *n_out, drift_error *err) {
    *out = NULL;
    *n_out = 0;
    memset(stop, 0, sizeof *stop);
    if (!c || wl < 0 || wl >= DRIFT_WL_COUNT || !c->present[wl])
        return drift_error_set(err, DRIFT_ERR_INVALID, "stopping curve: no pairs of that workload");
    const drift_wl_result *w = &c->wl[wl];
    double a0, budget[DRIFT_WL_COUNT];
    uint64_t s0;
    long pairs[DRIFT_WL_COUNT];
    int rec = drift_seq_recorded(c, &a0, &s0, pairs, budget);
    double bud = rec && budget[wl] >= 0 ? budget[wl] : w->budget;
    if (bud < 0 || w->n_pairs == 0)
        return drift_error_set(err, DRIFT_ERR_INVALID, "stopping curve: %s has no budget or no pairs",
                               drift_workload_name(wl));
    stop->workload = wl;
    stop->gated = 1;
    stop->budget = bud;
    stop->n_total = population(w, rec ? pairs : NULL, wl);
    stop->full_rate = w->flip_rate;
    stop->full_pass = w->flip_rate <= bud + 1e-12;
    drift_seq_point *pts = NULL;
    drift_status rc = replay_wl(w, stop->n_total, bud, alpha, seed, c->rule, c->max_left_out, stop, &pts, err);
    if (rc) return rc;
    *out = pts;
    *n_out = (size_t)stop->asked;
    return DRIFT_OK;
}

drift_status drift_compare_sequential(const drift_comparison *c, double alpha, uint64_t seed, drift_seq_result *out,
                                      drift_error *err) {
    memset(out, 0, sizeof *out);
    if (!c) return drift_error_set(err, DRIFT_ERR_INVALID, "sequential replay: no comparison");
    if (!(alpha > 0 && alpha < 1)) return drift_error_set(err, DRIFT_ERR_INVALID, "--alpha %g is not in (0, 1)", alpha);
    out->alpha = alpha;
    out->seed = seed;
    out->decision = DRIFT_DECISION_NOT_GATED;
    double rec_alpha;
    uint64_t rec_seed;
    long pairs[DRIFT_WL_COUNT];
    double rec_budget[DRIFT_WL_COUNT];
    int rec = drift_seq_recorded(c, &rec_alpha, &rec_seed, pairs, rec_budget);
    for (int k = 0; k < DRIFT_WL_COUNT; k++) {
        const drift_wl_result *w = &c->wl[k];
        drift_seq_wl *o = &out->wl[k];
        o->workload = (drift_workload)k;
        o->budget = w->budget;
        o->n_total = population(w, rec ? pairs : NULL, k);
        o->full_rate = w->flip_rate;
        o->full_pass = w->pass;
        o->lo = o->hi = NAN;
        o->decision = DRIFT_DECISION_NOT_GATED;
        out->present[k] = c->present[k];
        if (!c->present[k]) continue;
        if (w->n_pairs != (size_t)w->n)
            return drift_error_set(err, DRIFT_ERR_INVALID,
                                   "sequential replay: %s has %zu recorded pairs for %ld counted (a comparison built "
                                   "without pair outcomes)",
                                   drift_workload_name((drift_workload)k), w->n_pairs, w->n);
        o->gated = w->budget >= 0;
        if (!o->gated) continue;
        if (w->n_pairs == 0) { /* no evidence: compare's error, nothing to replay */
            o->decision = w->decision;
            o->reason = w->reason;
            out->decision = drift_decision_worst(out->decision, o->decision);
            continue;
        }
        drift_status rc = replay_wl(w, o->n_total, w->budget, alpha, seed, c->rule, c->max_left_out, o, NULL, err);
        if (rc) {
            drift_error_prefix(err, "%s: ", drift_workload_name((drift_workload)k));
            return rc;
        }
        out->asked += o->asked;
        out->available += o->n_total;
        out->decision = drift_decision_worst(out->decision, o->decision);
    }
    out->pass = out->decision == DRIFT_DECISION_DEPLOY || out->decision == DRIFT_DECISION_NOT_GATED;
    return DRIFT_OK;
}
