/* report_internal.h - helpers the renderers of src/report/ share (not
 * exported; report.h is the public side). */
#ifndef DRIFT_REPORT_INTERNAL_H
#define DRIFT_REPORT_INTERNAL_H

#include <jansson.h>
#include <stddef.h>

#include "driftbench/compare.h"
#include "driftbench/report.h"
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

/* ---- text from outside (report_safe.c) ----
 * Labels, prompt ids, names from imports, evaluator names, error messages
 * and model answers are hostile. In text and Markdown they go in through
 * report_put_*: sanitised as one line (src/util/sanitize.h: controls and
 * bidi controls as visible escapes, invalid UTF-8 repaired, CI runner
 * commands broken) and cut to a byte budget ("..." marks a cut). */
#define REPORT_NAME_MAX_BYTES 1024   /* a label, prompt id or name */
#define REPORT_NOTE_MAX_BYTES 2048   /* an error message or a note */
#define REPORT_DIFF_MAX_BYTES 1024   /* a word diff of two answers */
/* At most max_bytes of s (cut at a UTF-8 lead byte), sanitised as one
 * line; NULL appends nothing. */
void report_put_text(util_buf *b, const char *s, size_t max_bytes);
/* report_put_text with REPORT_NAME_MAX_BYTES. */
void report_put_name(util_buf *b, const char *s);
/* report_put_name, then spaces up to width bytes (printf's "%-Ns"). */
void report_put_name_pad(util_buf *b, const char *s, size_t width);
/* A text rendering's end: *out = b's text sanitised once more as lines
 * (a no-op on what went in through report_put_*; a guard for the rest),
 * b freed; an empty b gives "". DRIFT_ERR_NOMEM when out of memory. */
drift_status report_text_finish(util_buf *b, char **out, drift_error *err);
/* A JSON string of s repaired to valid UTF-8 (NULL is ""): never NULL
 * but out of memory, where json_string(s) is NULL for invalid UTF-8 and
 * the entry holding it would be dropped. A new reference. */
json_t *report_json_str(const char *s);
/* The JSON value of text (a stored JSON document) after UTF-8 repair;
 * NULL when it does not parse. A new reference. */
json_t *report_json_load(const char *text);
/* json_dumps(root, flags) hardened (util_json_harden: C1 and bidi
 * controls, "##[" as \u escapes; the same data) and "\n"; NULL when
 * root is NULL or out of memory. root is not released. Every caller dumps
 * a whole document: an object root is written with "schema_version":
 * DRIFT_JSON_SCHEMA_VERSION (report.h) as its first key. */
char *report_json_dump(json_t *root, size_t flags);

/* ---- a comparison's renderings (compare_render.c) ---- */
/* drift_comparison_render (report.h) for the formats compare_render.c
 * writes itself: text, markdown, junit and json; any other is
 * DRIFT_ERR_INVALID. github_render.c's summary is its markdown;
 * compare_format.c's drift_comparison_render adds github and html. */
drift_status report_comparison_plain(const drift_comparison *c, const drift_comparison_details *d, drift_format fmt,
                                     char **out, drift_error *err);

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
/* A verdict sentence's start, "BLOCK (exit 1)"; for NOT_GATED the whole
 * sentence (returns 1: nothing more to say), else 0. */
int report_verdict_open(util_buf *b, drift_decision d);
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
