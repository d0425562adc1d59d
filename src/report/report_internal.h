/* report_internal.h - helpers the renderers of src/report/ share (not
 * exported; report.h is the public side). */
#ifndef DRIFT_REPORT_INTERNAL_H
#define DRIFT_REPORT_INTERNAL_H

#include <jansson.h>
#include <stddef.h>

#include "driftbench/compare.h"
#include "util/util.h"

/* An R^2 as the reports say it: with `decimals` decimals when finite;
 * otherwise why it is not defined (drift_r2's two cases): "too few rows"
 * when it was computed over fewer than two rows (n < 2), else "no
 * variance" (the rows share one flip rate: nothing to predict). Returns buf
 * or a literal. */
const char *report_r2_text(double r2, size_t n, int decimals, char *buf, size_t cap);

/* A number for the JSON outputs: v, or null when it is not finite (NaN or
 * an infinity). A new reference. */
json_t *report_json_num(double v);

/* ---- the gate's decision in words (decision_render.c) ---- */
/* "DEPLOY", "BLOCK", "INCONCLUSIVE", "ERROR", "not gated". */
const char *report_decision_word(drift_decision d);
/* JSON values: "deploy", "block", "inconclusive", "error", "not_gated". */
const char *report_decision_json(drift_decision d);
/* JSON values of a reason: "rate", "left_out", "unscored", "errors",
 * "no_embedder", "errors_and_unscored", "none". */
const char *report_reason_json(drift_decision_reason r);
/* One workload's decision as a sentence (no newline): the counts, the
 * exact interval against the budget, how many more pairs would likely
 * decide an INCONCLUSIVE one; for no evidence, what is missing and the
 * command that supplies it. Numbers and fixed words only. */
void report_decision_note(util_buf *b, const drift_comparison *c, const drift_wl_result *w);
/* "BLOCK (exit 1): math 18.33% over budget 2.00%" (no newline). */
void report_verdict_summary(util_buf *b, const drift_comparison *c);
/* Which rule decided and the left-out limit (no newline). */
void report_rule_text(util_buf *b, const drift_comparison *c);
/* How the workloads' error rates combine into the verdict's (no newline). */
void report_error_rate_text(util_buf *b, const drift_comparison *c);
/* The text report's first section: the verdict line, a line per present
 * workload, the rule and the error rates. */
void report_decision_text(util_buf *b, const drift_comparison *c);

#endif
