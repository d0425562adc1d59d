/* github_render.c - a comparison for GitHub Actions (report.h,
 * drift_github_render): workflow-command annotations on the job's log and a
 * Markdown summary for $GITHUB_STEP_SUMMARY.
 *
 *   ::error title=DriftBench math (A -> B)::flip rate ... exceeds the budget ...
 *   ::warning title=...::...            one line per finding, escaped
 *   ::stop-commands::<token>
 *   <the Markdown summary: compare's markdown rendering>
 *   ::<token>::
 *
 * Annotations, the verdict first (error for BLOCK or ERROR, warning for
 * INCONCLUSIVE, notice for DEPLOY, with the rule), then one per workload
 * and finding:
 *   error    the workload is BLOCKed, or has no scored pair (the gate's
 *            decision, report_internal.h's sentence: rate, exact interval,
 *            budget, pairs), with the first flipped prompts of a BLOCK.
 *   warning  the workload is INCONCLUSIVE (its interval straddles the
 *            budget: how many more pairs would likely decide); pairs of the
 *            workload left out for request or evaluator errors; code answers
 *            judged under isolation weaker than bubblewrap (one warning).
 * Labels and prompt ids come from the store and model text is in the
 * summary: all of it is hostile input to the runner, which reads every
 * stdout line that starts with "::" as a command. So: a message is escaped
 * as the runner's toolkit does (% CR LF -> %25 %0D %0A), a property also
 * ':' and ',' (%3A %2C), other control characters become spaces (each
 * annotation stays one line); and the summary, printed after them, is
 * fenced by ::stop-commands:: with a token that does not occur in it, so no
 * line of it can be read as a command. The summary written to the step
 * summary file is the same Markdown without the fence (that file is not
 * parsed for commands). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/report.h"
#include "report/report_internal.h"
#include "suite/workload.h"
#include "util/util.h"

#define GITHUB_LISTED_FLIPS 5 /* prompt ids named in an error annotation */

/* Appends s escaped for a workflow command: as a message (property = 0) or
 * as a property value (property = 1). */
static void gh_escape(util_buf *b, const char *s, int property) {
    for (; s && *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '%') buf_puts(b, "%25");
        else if (ch == '\r') buf_puts(b, "%0D");
        else if (ch == '\n') buf_puts(b, "%0A");
        else if (property && ch == ':') buf_puts(b, "%3A");
        else if (property && ch == ',') buf_puts(b, "%2C");
        else if (ch < 0x20 || ch == 0x7f) buf_puts(b, " ");
        else buf_append(b, s, 1);
    }
}

static const char *dir_text(drift_workload wl, int dir) { return wl_dir_name(wl, dir, WL_DIR_TEXT); }

/* "::LEVEL title=DriftBench WHAT (BASE -> TARGET)::" */
static void gh_open(util_buf *b, const char *level, const char *what, const drift_comparison *c) {
    buf_printf(b, "::%s title=", level);
    util_buf t = {0};
    buf_printf(&t, "DriftBench %s (", what);
    buf_puts(&t, c->baseline.label ? c->baseline.label : "");
    buf_puts(&t, " -> ");
    buf_puts(&t, c->target.label ? c->target.label : "");
    buf_puts(&t, ")");
    gh_escape(b, t.data, 1);
    buf_free(&t);
    buf_puts(b, "::");
}

/* One workload's annotations: its decision when it is not DEPLOY (BLOCK
 * and no evidence are errors, INCONCLUSIVE a warning; the sentence is the
 * text report's), then its pairs left out with errors. */
static void gh_workload(util_buf *b, const drift_comparison *c, int k) {
    const drift_wl_result *w = &c->wl[k];
    const char *name = drift_workload_name((drift_workload)k);
    util_buf m = {0};
    if (w->decision == DRIFT_DECISION_BLOCK || w->decision == DRIFT_DECISION_NO_EVIDENCE ||
        w->decision == DRIFT_DECISION_INCONCLUSIVE) {
        gh_open(b, w->decision == DRIFT_DECISION_INCONCLUSIVE ? "warning" : "error", name, c);
        buf_printf(&m, "%s %s: ", name, report_decision_word(w->decision));
        report_decision_note(&m, c, w);
        if (w->decision == DRIFT_DECISION_BLOCK && w->n_flipped) buf_puts(&m, "\nfirst flipped prompts:");
        for (size_t i = 0; w->decision == DRIFT_DECISION_BLOCK && i < w->n_flipped && i < GITHUB_LISTED_FLIPS; i++) {
            buf_puts(&m, "\n  ");
            buf_puts(&m, w->flipped[i].prompt_id ? w->flipped[i].prompt_id : "");
            buf_printf(&m, " (%s)", dir_text((drift_workload)k, w->flipped[i].direction));
        }
        if (w->decision == DRIFT_DECISION_BLOCK && w->n_flipped > GITHUB_LISTED_FLIPS)
            buf_printf(&m, "\n  ... %zu more", w->n_flipped - GITHUB_LISTED_FLIPS);
        gh_escape(b, m.data, 0);
        buf_puts(b, "\n");
        buf_free(&m);
    }
    if (w->errors > 0 && w->decision != DRIFT_DECISION_NO_EVIDENCE) {
        gh_open(b, "warning", name, c);
        buf_printf(&m, "%s: %ld pair(s) left out for request or evaluator errors (%ld compared)", name, w->errors,
                   w->n);
        gh_escape(b, m.data, 0);
        buf_puts(b, "\n");
        buf_free(&m);
    }
}

/* The verdict, first: an error for BLOCK and ERROR, a warning for
 * INCONCLUSIVE, a notice for DEPLOY and not gated. */
static void gh_verdict(util_buf *b, const drift_comparison *c) {
    drift_decision d = c->decision;
    gh_open(b, d == DRIFT_DECISION_BLOCK || d == DRIFT_DECISION_NO_EVIDENCE ? "error"
               : d == DRIFT_DECISION_INCONCLUSIVE                          ? "warning"
                                                                           : "notice",
            "verdict", c);
    util_buf m = {0};
    buf_puts(&m, "verdict: ");
    report_verdict_summary(&m, c);
    buf_puts(&m, "\nrule: ");
    report_rule_text(&m, c);
    gh_escape(b, m.data, 0);
    buf_puts(b, "\n");
    buf_free(&m);
}

static void gh_sandbox(util_buf *b, const drift_comparison *c) {
    int weak = 0;
    for (size_t i = 0; i < c->n_sandboxes; i++) weak |= c->sandboxes[i].weak;
    if (!weak) return;
    gh_open(b, "warning", "code sandbox", c);
    util_buf m = {0};
    buf_puts(&m, "code answers were run under isolation weaker than bubblewrap:");
    for (size_t i = 0; i < c->n_sandboxes; i++)
        if (c->sandboxes[i].weak)
            buf_printf(&m, " %s (baseline %ld, target %ld)", c->sandboxes[i].mechanism, c->sandboxes[i].baseline,
                       c->sandboxes[i].target);
    gh_escape(b, m.data, 0);
    buf_puts(b, "\n");
    buf_free(&m);
}

/* A stop-commands token that does not occur in text. */
static void gh_token(const char *text, char out[40]) {
    size_t n = strlen(text);
    for (uint64_t seed = 0;; seed++) {
        uint64_t h1 = util_fnv1a64(text, n, 0x9e3779b97f4a7c15ULL + seed);
        uint64_t h2 = util_fnv1a64(text, n, 0xc2b2ae3d27d4eb4fULL ^ (seed << 1));
        snprintf(out, 40, "db%016llx%016llx", (unsigned long long)h1, (unsigned long long)h2);
        if (!strstr(text, out)) return;
    }
}

/* See report.h. */
drift_status drift_github_render(const drift_comparison *c, const drift_comparison_details *d, char **out,
                                 char **summary, drift_error *err) {
    *out = NULL;
    if (summary) *summary = NULL;
    if (!c) return drift_error_set(err, DRIFT_ERR_INVALID, "no comparison to report");
    char *md = NULL;
    drift_status rc = report_comparison_plain(c, d, DRIFT_FORMAT_MARKDOWN, &md, err);
    if (rc) return rc;
    util_buf b = {0};
    gh_verdict(&b, c);
    for (int k = 0; k < DRIFT_WL_COUNT; k++)
        if (c->present[k]) gh_workload(&b, c, k);
    gh_sandbox(&b, c);
    char token[40];
    gh_token(md, token);
    buf_printf(&b, "::stop-commands::%s\n", token);
    buf_puts(&b, md);
    if (md[0] && md[strlen(md) - 1] != '\n') buf_puts(&b, "\n");
    buf_printf(&b, "::%s::\n", token);
    if (!b.data) {
        buf_free(&b);
        free(md);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory rendering the GitHub report");
    }
    *out = buf_steal(&b);
    if (summary) *summary = md;
    else free(md);
    return DRIFT_OK;
}
