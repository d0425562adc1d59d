/* gate.c - the deploy/block decision of one workload (compare.h, "the
 * gate's decision"): a verdict needs evidence, and is taken on an interval.
 *
 * Order of the checks, each ending the decision:
 *   1. no budget                       NOT_GATED (reported, not decided)
 *   2. no counted pair                 NO_EVIDENCE (an error; the caller
 *                                      names the missing piece)
 *   3. left-out share > max_left_out   BLOCK, reason LEFT_OUT: pairs lost
 *                                      to request or evaluator errors, or
 *                                      never scored, could hold the drift
 *   4. the rule on the flip rate       reason RATE
 * The interval rule uses the exact (Clopper-Pearson) interval at
 * DRIFT_GATE_CONF, not the Wilson interval the tables print: Wilson's
 * one-sided error is not bounded near 0 (its lower bound for k = 1 is far
 * above the smallest rates that give one flip, so a BLOCK at a 0.1% budget
 * from 100 pairs would be wrong ~9% of the time), while each side of the
 * exact interval errs with probability at most (1 - conf) / 2 = 2.5% for
 * every true rate and n. A DEPLOY needs the upper end within the budget
 * (1e-12 slack, for decimal budgets), a BLOCK the lower end over it.
 *
 * A comparison (drift_comparison_decide) applies it to every workload from
 * its counts and the comparison's rule; a gated workload without a counted
 * pair gets the reason that names what is missing (a pairwise workload,
 * chat: embeddings; else errors only, answers never scored, or both).
 *
 * More pairs (drift_gate_more_pairs): at the observed rate p = flips/n,
 * the exact interval of a rate p over N pairs (its beta quantiles take the
 * fractional count p N) is searched for the smallest N that lies on p's
 * side of the budget: doubling from n, then bisection (the interval
 * narrows as N grows). It is an estimate: the rate seen in the next pairs
 * will differ from p. */
#include <math.h>

#include "analysis/analysis_internal.h"
#include "driftbench/compare.h"
#include "suite/workload.h"

#define GATE_SLACK 1e-12
#define GATE_MAX_PAIRS 1000000000L

const char *drift_decision_name(drift_decision d) {
    switch (d) {
    case DRIFT_DECISION_NOT_GATED: return "not gated";
    case DRIFT_DECISION_DEPLOY: return "deploy";
    case DRIFT_DECISION_BLOCK: return "block";
    case DRIFT_DECISION_INCONCLUSIVE: return "inconclusive";
    case DRIFT_DECISION_NO_EVIDENCE: return "error";
    }
    return "?";
}

int drift_decision_exit_code(drift_decision d) {
    switch (d) {
    case DRIFT_DECISION_BLOCK: return 1;
    case DRIFT_DECISION_NO_EVIDENCE: return 2;
    case DRIFT_DECISION_INCONCLUSIVE: return DRIFT_EXIT_INCONCLUSIVE;
    default: return 0;
    }
}

/* Severity order of the comparison's decision. */
static int severity(drift_decision d) {
    switch (d) {
    case DRIFT_DECISION_NO_EVIDENCE: return 4;
    case DRIFT_DECISION_BLOCK: return 3;
    case DRIFT_DECISION_INCONCLUSIVE: return 2;
    case DRIFT_DECISION_DEPLOY: return 1;
    default: return 0;
    }
}

drift_decision drift_decision_worst(drift_decision a, drift_decision b) { return severity(b) > severity(a) ? b : a; }

double drift_default_budget(drift_workload wl) {
    const wl_traits *t = wl_traits_of(wl);
    return t ? t->default_budget : -1.0;
}

/* The exact interval's ends for a (possibly fractional) count k of n. */
static double cp_hi(double k, double n) {
    return k >= n ? 1.0 : anl_beta_quantile(0.5 + DRIFT_GATE_CONF / 2, k + 1.0, n - k);
}
static double cp_lo(double k, double n) {
    return k <= 0 ? 0.0 : anl_beta_quantile(0.5 - DRIFT_GATE_CONF / 2, k, n - k + 1.0);
}

/* 1 when N pairs at rate p decide (the interval on p's side of budget). */
static int decides(double p, long N, double budget, int below) {
    double k = p * (double)N;
    return below ? cp_hi(k, (double)N) <= budget + GATE_SLACK : cp_lo(k, (double)N) > budget + GATE_SLACK;
}

long drift_gate_more_pairs(long flips, long n, double budget) {
    if (n <= 0 || flips < 0 || flips > n || !(budget >= 0)) return -1;
    double p = (double)flips / (double)n;
    if (fabs(p - budget) <= GATE_SLACK) return -1;
    int below = p < budget;
    if (decides(p, n, budget, below)) return 0;
    long lo = n, hi = n;
    while (!decides(p, hi, budget, below)) {
        lo = hi;
        if (hi >= GATE_MAX_PAIRS) return -1;
        hi = hi > GATE_MAX_PAIRS / 2 ? GATE_MAX_PAIRS : hi * 2;
    }
    while (hi - lo > 1) { /* lo does not decide, hi does */
        long mid = lo + (hi - lo) / 2;
        if (decides(p, mid, budget, below)) hi = mid;
        else lo = mid;
    }
    return hi - n;
}

drift_decision drift_gate_decide(long flips, long n, long left_out, double budget, drift_decide_rule rule,
                                 double max_left_out, double *lo, double *hi, long *more,
                                 drift_decision_reason *reason) {
    double l = 0.0, h = 1.0;
    if (n > 0) drift_clopper_pearson(flips, n, DRIFT_GATE_CONF, &l, &h);
    if (lo) *lo = l;
    if (hi) *hi = h;
    if (more) *more = 0;
    drift_decision_reason why = DRIFT_REASON_NONE;
    drift_decision d;
    if (budget < 0) {
        d = DRIFT_DECISION_NOT_GATED;
    } else if (n <= 0) {
        d = DRIFT_DECISION_NO_EVIDENCE;
        why = DRIFT_REASON_ERRORS_UNSCORED;
    } else if (left_out > 0 && (double)left_out / (double)(n + left_out) > max_left_out + GATE_SLACK) {
        d = DRIFT_DECISION_BLOCK;
        why = DRIFT_REASON_LEFT_OUT;
    } else {
        why = DRIFT_REASON_RATE;
        if (rule == DRIFT_DECIDE_POINT) {
            d = (double)flips / (double)n <= budget + GATE_SLACK ? DRIFT_DECISION_DEPLOY : DRIFT_DECISION_BLOCK;
        } else if (h <= budget + GATE_SLACK) {
            d = DRIFT_DECISION_DEPLOY;
        } else if (l > budget + GATE_SLACK) {
            d = DRIFT_DECISION_BLOCK;
        } else {
            d = DRIFT_DECISION_INCONCLUSIVE;
            if (more) *more = drift_gate_more_pairs(flips, n, budget);
        }
    }
    if (reason) *reason = why;
    return d;
}

/* The missing piece of a gated workload without a counted pair. */
static drift_decision_reason no_evidence_reason(const drift_wl_result *w) {
    /* a chat pair is unscored exactly when an embedding is missing */
    const wl_traits *t = wl_traits_of(w->workload);
    if (t && t->pairwise && w->unscored > 0) return DRIFT_REASON_NO_EMBEDDER;
    if (w->errors > 0 && w->unscored == 0) return DRIFT_REASON_ERRORS;
    if (w->unscored > 0 && w->errors == 0) return DRIFT_REASON_UNSCORED;
    return DRIFT_REASON_ERRORS_UNSCORED;
}

void drift_comparison_decide(drift_comparison *c) {
    if (!c) return;
    c->decision = DRIFT_DECISION_NOT_GATED;
    c->gated = 0;
    for (int k = 0; k < DRIFT_WL_COUNT; k++) {
        drift_wl_result *w = &c->wl[k];
        long left = w->errors + w->unscored;
        w->left_out_share = left ? (double)left / (double)(w->n + left) : 0.0;
        w->decision = drift_gate_decide(w->flips, w->n, left, w->budget, c->rule, c->max_left_out, &w->decide_ci[0],
                                        &w->decide_ci[1], &w->more_pairs, &w->reason);
        if (w->decision == DRIFT_DECISION_NO_EVIDENCE) w->reason = no_evidence_reason(w);
        w->pass = w->decision == DRIFT_DECISION_DEPLOY || w->decision == DRIFT_DECISION_NOT_GATED;
        if (!c->present[k]) continue;
        if (w->decision != DRIFT_DECISION_NOT_GATED) c->gated++;
        c->decision = drift_decision_worst(c->decision, w->decision);
    }
    c->pass = c->decision == DRIFT_DECISION_DEPLOY || c->decision == DRIFT_DECISION_NOT_GATED;
}
