/* decision_render.c - the gate's decision in words, shared by every
 * rendering of a comparison (report_internal.h): every format leads with
 * it, so every format says it from these functions and none can word a
 * decision differently from another.
 *
 *   report_decision_word    DEPLOY / BLOCK / INCONCLUSIVE / ERROR / not gated
 *   report_decision_note    one workload's decision as a sentence: what was
 *                           counted, the exact interval against the budget,
 *                           and for INCONCLUSIVE how many more pairs would
 *                           likely decide; for no evidence, what is missing
 *                           and the command that supplies it
 *   report_verdict_summary  the comparison's verdict with its exit code and
 *                           the workloads that made it (report_verdict_open:
 *                           its start, shared with the sequential replay's)
 *   report_rule_text        which rule decided, and the left-out limit
 *   report_error_rate_text  how the per-workload error rates combine: a
 *                           union bound over the gated workloads
 *   report_decision_text    the text report's first section (all of the
 *                           above, a line per present workload)
 * Labels and ids never enter these sentences: only numbers, workload
 * names and fixed words, so they need no escaping in any format. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "driftbench/report.h"
#include "report/report_internal.h"

static void pct(char *out, size_t cap, double f) {
    if (isnan(f)) snprintf(out, cap, "-");
    else snprintf(out, cap, "%.2f%%", 100.0 * f);
}

const char *report_decision_word(drift_decision d) {
    switch (d) {
    case DRIFT_DECISION_DEPLOY: return "DEPLOY";
    case DRIFT_DECISION_BLOCK: return "BLOCK";
    case DRIFT_DECISION_INCONCLUSIVE: return "INCONCLUSIVE";
    case DRIFT_DECISION_NO_EVIDENCE: return "ERROR";
    default: return "not gated";
    }
}

const char *report_decision_json(drift_decision d) {
    return d == DRIFT_DECISION_NOT_GATED ? "not_gated" : drift_decision_name(d);
}

const char *report_reason_json(drift_decision_reason r) {
    switch (r) {
    case DRIFT_REASON_RATE: return "rate";
    case DRIFT_REASON_LEFT_OUT: return "left_out";
    case DRIFT_REASON_UNSCORED: return "unscored";
    case DRIFT_REASON_ERRORS: return "errors";
    case DRIFT_REASON_NO_EMBEDDER: return "no_embedder";
    case DRIFT_REASON_ERRORS_UNSCORED: return "errors_and_unscored";
    default: return "none";
    }
}

/* "1,234" */
static void grouped(char *out, size_t cap, long v) {
    char raw[32];
    snprintf(raw, sizeof raw, "%ld", v);
    size_t len = strlen(raw), o = 0;
    for (size_t i = 0; i < len && o + 2 < cap; i++) {
        if (i && (len - i) % 3 == 0) out[o++] = ',';
        out[o++] = raw[i];
    }
    out[o] = '\0';
}

static const char *pairs_word(const drift_wl_result *w, long n) {
    if (w->replicates > 1) return n == 1 ? "pair" : "pairs";
    return n == 1 ? "prompt" : "prompts";
}

void report_decision_note(util_buf *b, const drift_comparison *c, const drift_wl_result *w) {
    const char *name = drift_workload_name(w->workload);
    char fr[16], lo[16], hi[16], bud[16];
    pct(fr, sizeof fr, w->flip_rate);
    pct(lo, sizeof lo, w->decide_ci[0]);
    pct(hi, sizeof hi, w->decide_ci[1]);
    pct(bud, sizeof bud, w->budget);
    long left = w->errors + w->unscored;
    switch (w->reason) {
    case DRIFT_REASON_NONE:
        buf_printf(b, "no budget (--budget %s=none): %ld of %ld flipped (%s), reported, not decided", name, w->flips,
                   w->n, fr);
        return;
    case DRIFT_REASON_ERRORS:
        buf_printf(b, "no scored pair: all %ld pairs have a failed request or an evaluator error (baseline %ld, "
                      "target %ld); the run's failure summary says why; fix the stack or the evaluator and run the "
                      "same label again to retry them",
                   w->errors, w->errors_baseline, w->errors_target);
        return;
    case DRIFT_REASON_NO_EMBEDDER:
        buf_printf(b, "no scored pair: the %ld chat pairs have no embeddings; score them with an embedder "
                      "(driftbench score --embedder URL|embedded:MODEL.gguf) or opt out (--budget chat=none)",
                   w->unscored);
        return;
    case DRIFT_REASON_UNSCORED:
        buf_printf(b, "no scored pair: the answers of its %ld pairs were never scored; run driftbench score first",
                   w->unscored);
        return;
    case DRIFT_REASON_ERRORS_UNSCORED:
        buf_printf(b, "no scored pair: %ld pairs have errors (baseline %ld, target %ld) and %ld were never scored; "
                      "run driftbench score, and run again the label whose requests failed",
                   w->errors, w->errors_baseline, w->errors_target, w->unscored);
        return;
    case DRIFT_REASON_LEFT_OUT:
        buf_printf(b, "%ld of %ld pairs left out (%ld with errors, %ld unscored): %.1f%% is over the %.1f%% limit "
                      "(--max-left-out); left-out pairs can hide drift",
                   left, w->n + left, w->errors, w->unscored, 100.0 * w->left_out_share, 100.0 * c->max_left_out);
        return;
    case DRIFT_REASON_RATE: break;
    }
    buf_printf(b, "%ld of %ld flipped: %s, exact 95%% CI [%s, %s], ", w->flips, w->n, fr, lo, hi);
    if (c->rule == DRIFT_DECIDE_POINT) {
        buf_printf(b, "%s the budget %s (point rule)", w->decision == DRIFT_DECISION_DEPLOY ? "within" : "over", bud);
    } else if (w->decision == DRIFT_DECISION_DEPLOY) {
        buf_printf(b, "all within the budget %s", bud);
    } else if (w->decision == DRIFT_DECISION_BLOCK) {
        buf_printf(b, "all over the budget %s", bud);
    } else {
        buf_printf(b, "straddles the budget %s: ", bud);
        if (w->more_pairs > 0) {
            char more[32];
            grouped(more, sizeof more, w->more_pairs);
            buf_printf(b, "about %s more %s at the rate seen would likely decide it", more,
                       pairs_word(w, w->more_pairs));
        } else if (w->budget <= 0) {
            buf_puts(b, "a budget of 0 cannot be shown met by any number of pairs");
        } else {
            buf_puts(b, "the rate seen equals the budget: more pairs would not decide it");
        }
    }
    if (left)
        buf_printf(b, " (%ld %s left out: %ld with errors, %ld unscored)", left, left == 1 ? "pair" : "pairs",
                   w->errors, w->unscored);
}

int report_verdict_open(util_buf *b, drift_decision d) {
    buf_printf(b, "%s (exit %d)", report_decision_word(d), drift_decision_exit_code(d));
    if (d != DRIFT_DECISION_NOT_GATED) return 0;
    buf_puts(b, ": no workload has a budget, nothing was decided");
    return 1;
}

void report_verdict_summary(util_buf *b, const drift_comparison *c) {
    if (report_verdict_open(b, c->decision)) return;
    if (c->decision == DRIFT_DECISION_DEPLOY) {
        buf_printf(b, ": %s within its budget", c->gated == 1 ? "the gated workload is" : "every gated workload is");
        return;
    }
    buf_puts(b, ": ");
    int first = 1;
    for (int k = 0; k < DRIFT_WL_COUNT; k++) {
        const drift_wl_result *w = &c->wl[k];
        if (!c->present[k] || w->decision != c->decision) continue;
        buf_printf(b, "%s%s ", first ? "" : "; ", drift_workload_name((drift_workload)k));
        first = 0;
        if (w->decision == DRIFT_DECISION_NO_EVIDENCE) buf_puts(b, "has no scored pair");
        else if (w->decision == DRIFT_DECISION_INCONCLUSIVE) buf_puts(b, "needs more pairs");
        else if (w->reason == DRIFT_REASON_LEFT_OUT) buf_puts(b, "has too many pairs left out");
        else {
            char fr[16], bud[16];
            pct(fr, sizeof fr, w->flip_rate);
            pct(bud, sizeof bud, w->budget);
            buf_printf(b, "%s over budget %s", fr, bud);
        }
    }
}

void report_rule_text(util_buf *b, const drift_comparison *c) {
    if (c->rule == DRIFT_DECIDE_POINT)
        buf_puts(b, "point estimate (--decide point): DEPLOY when the flip rate seen is within the budget, else "
                    "BLOCK, however few the pairs; the exact 95% interval is shown for reference");
    else
        buf_puts(b, "interval: the exact (Clopper-Pearson) 95% interval of each flip rate against its budget: "
                    "DEPLOY when all of it is within, BLOCK when all of it is over, INCONCLUSIVE when it straddles");
    buf_printf(b, "; a workload with over %.1f%% of its pairs left out (errors, unscored) is blocked, one with no "
                  "scored pair is an error",
               100.0 * c->max_left_out);
}

void report_error_rate_text(util_buf *b, const drift_comparison *c) {
    if (c->rule == DRIFT_DECIDE_POINT) {
        buf_puts(b, "not controlled: near the budget the point rule's decision is often wrong (up to 99% of the time "
                    "with few pairs in tests/unit/test_gate.c)");
        return;
    }
    double each = (1.0 - DRIFT_GATE_CONF) / 2.0;
    buf_printf(b, "a DEPLOY or BLOCK of one workload is wrong with probability at most %.1f%%", 100.0 * each);
    if (c->gated > 1) {
        double all = each * (double)c->gated;
        buf_printf(b, "; over %d gated workloads the verdict is wrong with probability at most %.1f%% (their sum: "
                      "a wrong verdict needs at least one wrong workload)",
                   c->gated, 100.0 * (all < 1 ? all : 1));
    }
}

void report_decision_text(util_buf *b, const drift_comparison *c) {
    buf_puts(b, "verdict: ");
    report_verdict_summary(b, c);
    buf_puts(b, "\n");
    for (int k = 0; k < DRIFT_WL_COUNT; k++) {
        const drift_wl_result *w = &c->wl[k];
        if (!c->present[k]) continue;
        buf_printf(b, "  %-13s %-13s ", drift_workload_name((drift_workload)k), report_decision_word(w->decision));
        report_decision_note(b, c, w);
        buf_puts(b, "\n");
    }
    buf_puts(b, "rule: ");
    report_rule_text(b, c);
    buf_puts(b, "\nerror rates: ");
    report_error_rate_text(b, c);
    buf_puts(b, "\n");
}
