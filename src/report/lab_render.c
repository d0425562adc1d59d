/* lab_render.c - the lab's own text blocks (lab_result.h, report.h), pure:
 * each a function of what the lab stage or the store computed, read through
 * lab_result.h's types (never the lab stage's own).
 *
 *   drift_lab_stochastic_render   the stochastic leg (drift_lab_stochastic
 *                                 after _compare): expected and majority-vote
 *                                 flip rates, the deterministic rate of the
 *                                 same pair and the ratio, or why not; what
 *                                 the lab prints and writes to stochastic.txt.
 *   drift_store_outcomes_render   the failed requests of a store, one
 *                                 sentence per workload with failures; the lab
 *                                 prints it under the flip table and puts it
 *                                 in the report's note.
 *   drift_lab_cuts_render         answers cut by the token limit per
 *                                 workload.
 *   drift_lab_report_note_render  the note at the top of the lab's HTML
 *                                 report, from the study's view
 *                                 (drift_lab_report):
 *                                 what limits the report (fixtures, no
 *                                 safety, --quick's long-context subset,
 *                                 cut answers, chat not computable, failed
 *                                 requests) and the stochastic leg's
 *                                 figures against the paper's 0.23x. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "driftbench/analysis.h"
#include "driftbench/lab_result.h"
#include "driftbench/report.h"
#include "report/report_internal.h"
#include "util/util.h"

/* "[lo, hi]" of an interval; an unbounded end is "inf". */
static void interval(util_buf *b, double lo, double hi, double scale, const char *unit) {
    buf_puts(b, "[");
    if (isinf(lo)) buf_puts(b, lo < 0 ? "-inf" : "inf");
    else buf_printf(b, "%.2f%s", scale * lo, unit);
    buf_puts(b, ", ");
    if (isinf(hi)) buf_puts(b, hi < 0 ? "-inf" : "inf");
    else buf_printf(b, "%.2f%s", scale * hi, unit);
    buf_puts(b, "]");
}

/* The leg against its null: what sampling alone disagrees, the drift
 * beyond it and its ratio to the deterministic rate, or why not. */
static void render_null(util_buf *b, const drift_lab_stochastic *x) {
    if (!x->null_ok) {
        buf_printf(b, "against the null (each stack with seeds %ld+r): not computed (%s)\n", x->null_seed, x->null_reason);
        return;
    }
    const drift_lab_beyond *d = &x->beyond;
    buf_printf(b, "null: each stack against itself with seeds %ld+r disagrees on %.2f%% of replicate pairs (sampling "
                  "alone); %s across seeds: %.2f%%, over the same %zu prompts\n",
               x->null_seed, 100 * d->null_rate, x->pair, 100 * d->cross, d->n);
    buf_printf(b, "drift beyond the null: %+.2f points, 95%% CI ", 100 * d->beyond);
    interval(b, d->beyond_lo, d->beyond_hi, 100, "");
    buf_printf(b, " (paired bootstrap over prompts, %d resamples)%s\n", d->resamples,
               d->beyond_lo <= 0 && d->beyond_hi >= 0 ? ": not distinguishable from sampling noise at this size" : "");
    buf_printf(b, "deterministic flip rate on those prompts: %.2f%%\n", 100 * d->det);
    if (isnan(d->ratio)) {
        buf_printf(b, "ratio beyond-null / deterministic: - (no deterministic flip among the %zu prompts: too small a "
                      "sample to say; the paper: 0.23x)\n",
                   d->n);
        return;
    }
    buf_printf(b, "ratio beyond-null / deterministic: %.2fx, 95%% CI ", d->ratio);
    interval(b, d->ratio_lo, d->ratio_hi, 1, "x");
    /* per-prompt disagreement beyond the null estimates the mean squared
     * change of the pass probability, not a flip rate: no comparison with
     * the paper's 0.23x (the estimand below is the comparable one) */
    buf_puts(b, " (mean squared change of per-prompt pass probability over the deterministic flip rate: another "
                "estimand than the paper's 0.23x, not compared with it)");
    if (isinf(d->ratio_hi))
        buf_printf(b, "; the upper end is unbounded (%.0f%% of resamples have no deterministic flip)",
                   100 * d->det_zero_share);
    buf_puts(b, "\n");
}

/* The flip-rate estimand (analysis.h): majority-vote flips beyond the
 * same-stack null, and its ratio, the figure comparable with the paper's. */
static void render_estimand(util_buf *b, const drift_lab_stochastic *x) {
    if (!x->estimand_ok) {
        buf_printf(b, "flip-rate estimand: not computed (%s)\n", x->estimand_why[0] ? x->estimand_why : "no data");
        return;
    }
    const drift_stoch_estimand *e = &x->estimand;
    const struct {
        const char *name;
        const drift_boot_ci *c;
    } rows[] = {{"cross (majority-vote flips between the stacks)", &e->cross},
                {"null (between two seed sets of one stack)", &e->null},
                {"beyond (cross - null)", &e->beyond},
                {"deterministic (temperature 0, same pair)", &e->det}};
    buf_printf(b, "flip-rate estimand over %zu prompts (%zu with the deterministic pair; 95%% percentile bootstrap "
                  "over prompts, %d resamples; %.1f%% of replicate sets tie):\n",
               e->n, e->n_det, e->resamples, 100 * e->tie_share);
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        buf_printf(b, "  %s: ", rows[i].name);
        if (!isfinite(rows[i].c->est)) buf_puts(b, "-\n");
        else {
            buf_printf(b, "%.2f%% ", 100 * rows[i].c->est);
            interval(b, rows[i].c->lo, rows[i].c->hi, 100, "%");
            buf_puts(b, "\n");
        }
    }
    const drift_boot_ci *r = &e->ratio_beyond;
    if (!isfinite(r->est)) buf_puts(b, "  ratio beyond / deterministic: - (no deterministic flip: cannot say)\n");
    else {
        buf_printf(b, "  ratio beyond / deterministic: %.2fx ", r->est);
        interval(b, r->lo, r->hi, 1, "x");
        if (isinf(r->hi) || (r->lo <= 0 && r->hi >= 0.23)) buf_puts(b, ": cannot say against the paper's 0.23x at this size\n");
        else if (r->lo <= 0.23 && 0.23 <= r->hi) buf_puts(b, ": the paper's 0.23x is inside the interval\n");
        else buf_printf(b, ": %s the paper's 0.23x\n", r->hi < 0.23 ? "below" : "above");
    }
    buf_printf(b, "what these mean: %s\n", drift_stoch_estimand_definition());
}

/* See lab.h. */
drift_status drift_lab_cuts_render(const drift_lab_cuts *c, char **out, drift_error *err) {
    *out = NULL;
    if (!c) return drift_error_set(err, DRIFT_ERR_INVALID, "no cut counts to render");
    util_buf b = {0};
    size_t over = 0;
    for (int w = 0; w < DRIFT_WL_COUNT; w++) {
        if (!c->answers[w]) continue;
        double share = (double)c->cut[w] / (double)c->answers[w];
        int bad = share > DRIFT_LAB_CUT_GOAL;
        over += (size_t)bad;
        buf_printf(&b, "%s: %zu of %zu answers cut at %d new tokens (%.2f%%)%s\n",
                   drift_workload_name((drift_workload)w), c->cut[w], c->answers[w], c->max_tokens, 100 * share,
                   bad ? "  <- above the 2% goal: raise --max-tokens" : "");
    }
    if (!b.data) buf_puts(&b, "no answers stored\n");
    else if (!over) buf_puts(&b, "every workload is within the 2% goal\n");
    return report_text_finish(&b, out, err);
}

/* See lab_result.h. */
drift_status drift_lab_stochastic_render(const drift_lab_stochastic *x, char **out, drift_error *err) {
    *out = NULL;
    if (!x) return drift_error_set(err, DRIFT_ERR_INVALID, "no stochastic leg to render");
    util_buf b = {0};
    buf_printf(&b, "expected flip rate over replicate pairs (same seeds on both stacks): ");
    if (isnan(x->expected_flip_rate)) buf_puts(&b, "-");
    else buf_printf(&b, "%.2f%%", 100 * x->expected_flip_rate);
    buf_puts(&b, "; majority-vote flip rate: ");
    if (isnan(x->majority_flip_rate)) buf_puts(&b, "-");
    else buf_printf(&b, "%.2f%% (%ld of %ld, %ld ties)", 100 * x->majority_flip_rate, x->majority_flips,
                    x->majority_n, x->majority_ties);
    buf_puts(&b, "\n");
    if (x->det_ok) {
        buf_printf(&b, "deterministic flip rate (temperature 0, same pair, %ld prompts): %.2f%%\n", x->det_n,
                   100 * x->det_flip_rate);
        if (isnan(x->ratio))
            buf_puts(&b, "ratio stochastic / deterministic: - (no deterministic flips to compare with)\n");
        else
            buf_printf(&b, "ratio stochastic / deterministic: %.2fx (same seeds, not against the null: see below)\n", x->ratio);
    } else {
        buf_printf(&b, "deterministic flip rate: not available (%s)\n", x->det_reason);
    }
    render_null(&b, x);
    render_estimand(&b, x);
    return report_text_finish(&b, out, err);
}

/* See report.h. */
drift_status drift_store_outcomes_render(const drift_store_outcomes *o, char **out, drift_error *err) {
    *out = NULL;
    if (!o) return drift_error_set(err, DRIFT_ERR_INVALID, "no store outcomes to render");
    util_buf b = {0};
    for (int w = 0; w < DRIFT_WL_COUNT; w++)
        if (o->errors[w]) { /* a stored error may quote a server's body: sanitised, bounded */
            buf_printf(&b, "%s: %zu of %zu requests failed (e.g. \"", drift_workload_name((drift_workload)w), o->errors[w],
                       o->errors[w] + o->answers[w]);
            report_put_text(&b, o->common_error[w], REPORT_NOTE_MAX_BYTES);
            buf_printf(&b, "\"): failed requests are never pairs%s. ", o->answers[w] ? "" : ", so this workload has no rows");
        }
    return report_text_finish(&b, out, err);
}

/* The stochastic leg's sentences of the note: against the null when it
 * was computed, else the expected rate against the deterministic one. */
static void note_stochastic(util_buf *note, const drift_lab_stochastic *x) {
    if (x->null_ok) {
        const drift_lab_beyond *d = &x->beyond;
        buf_printf(note, "Stochastic serving (temperature 0.7, %d replicates, %zu math prompts, %s %s): %.2f%% "
                         "of replicate pairs disagree, %.2f%% for each stack against itself with other seeds (the null), so "
                         "%+.2f points beyond the null (95%% CI %.2f to %.2f). ",
                   x->replicates, d->n, x->model, x->pair, 100 * d->cross, 100 * d->null_rate, 100 * d->beyond,
                   100 * d->beyond_lo, 100 * d->beyond_hi);
        if (isnan(d->ratio))
            buf_puts(note, "No deterministic flip on those prompts: the ratio to the deterministic rate (the paper: "
                           "0.23x) cannot be said at this size. ");
        if (x->estimand_ok && isfinite(x->estimand.ratio_beyond.est)) {
            const drift_boot_ci *rb = &x->estimand.ratio_beyond;
            char hi[32];
            if (isinf(rb->hi)) snprintf(hi, sizeof hi, "unbounded");
            else snprintf(hi, sizeof hi, "%.2fx", rb->hi);
            buf_printf(note, "Majority-vote flips beyond the same-stack null over the deterministic flip rate (the "
                             "figure comparable with the paper's 0.23x): %.2fx (95%% CI %.2fx to %s). ",
                       rb->est, rb->lo, hi);
        }
    } else if (!isnan(x->ratio)) {
        buf_printf(note, "Stochastic serving (temperature 0.7, 5 replicates, math, %s %s): expected flip rate "
                         "%.2f%%, %.2fx the deterministic figure (sampling noise included, not against its null: "
                         "%s). ",
                   x->model, x->pair, 100 * x->expected_flip_rate, x->ratio, x->null_reason);
    }
}

/* See lab_result.h. */
drift_status drift_lab_report_note_render(const drift_lab_report *r, char **out, drift_error *err) {
    *out = NULL;
    if (!r || !r->cuts) return drift_error_set(err, DRIFT_ERR_INVALID, "no lab result to render");
    util_buf note = {0};
    if (r->fixtures)
        buf_puts(&note, "No shipped models were found in models/: this report uses the test fixtures, whose "
                        "answers are noise, so it shows the machinery rather than real drift. ");
    if (!r->with_safety) buf_printf(&note, "Safety was not run: %s. ", r->safety_reason);
    if (!r->full && r->long_n)
        buf_printf(&note, "The quick matrix runs long-context (%zu prompts, each a prefill of ~%.0f tokens) on the "
                          "first model's baseline and four of its levels only; `driftbench lab --full` runs it "
                          "on every one. ",
                   r->long_n, r->long_tokens);
    buf_printf(&note, "Answers cut by the %d-token limit: ", r->cuts->max_tokens);
    for (int w = 0, first = 1; w < DRIFT_WL_COUNT; w++)
        if (r->cuts->answers[w]) {
            buf_printf(&note, "%s%s %zu of %zu", first ? "" : ", ", drift_workload_name((drift_workload)w),
                       r->cuts->cut[w], r->cuts->answers[w]);
            first = 0;
        }
    buf_puts(&note, ". ");
    if (r->chat_reason) buf_printf(&note, "%s. ", r->chat_reason);
    char *why = NULL;
    drift_error werr = {0};
    if (r->outcomes && drift_store_outcomes_render(r->outcomes, &why, &werr) == DRIFT_OK && why[0])
        buf_puts(&note, why);
    free(why);
    if (r->stochastic) note_stochastic(&note, r->stochastic);
    /* not sanitised here: the HTML renderer escapes the note (ho.note) as
     * it always did */
    if (!(*out = buf_steal(&note))) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    return DRIFT_OK;
}
