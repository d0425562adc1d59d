/* pri_render.c - the Portability Risk Index as text and JSON (report.h),
 * pure.
 *
 *   drift_pri_eval_render        `driftbench pri eval`: one line per
 *                                held-out evaluation (train/test rows, R^2,
 *                                MAE, the paper's figure, the chosen
 *                                hyper-parameters), CV, ablations, importance.
 *   drift_pri_prediction_render  `driftbench pri predict`: configuration,
 *                                baseline, rate with its interval, risk,
 *                                change, advice.
 *   drift_pri_summary_render     the matrix summary's compact block (lab).
 *   drift_pri_cv_summary         the 5-fold CV sentence that block and the
 *                                HTML report share.
 * JSON: NaN and infinities are null. Text never prints NaN: an R^2 that
 * is not defined reads "no variance" (the rows share one flip rate) or "too
 * few rows" (report_r2_text), any other missing figure "-". Names of
 * levels and features come from the table's file: sanitised in text,
 * repaired in JSON (report_safe.c). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/report.h"
#include "report/report_internal.h"
#include "util/sanitize.h"
#include "util/util.h"

/* See report_internal.h. */
const char *report_r2_text(double r2, size_t n, int decimals, char *buf, size_t cap) {
    if (isfinite(r2)) {
        snprintf(buf, cap, "%.*f", decimals, r2);
        return buf;
    }
    if (!isnan(r2)) return "-";
    return n < 2 ? "too few rows" : "no variance";
}

/* v with `decimals` decimals, "-" when not finite. */
static const char *fig(double v, int decimals, char *buf, size_t cap) {
    if (!isfinite(v)) return "-";
    snprintf(buf, cap, "%.*f", decimals, v);
    return buf;
}

/* See report_internal.h. */
json_t *report_json_num(double v) { return isfinite(v) ? json_real(v) : json_null(); }

/* "%s\n" of a JSON document, hardened; NULL when out of memory. */
static char *dump_line(json_t *root, size_t flags) { return report_json_dump(root, flags); }

/* A text rendering's end (report_text_finish); NULL when out of memory. */
static char *finish(util_buf *b) {
    char *out = NULL;
    drift_error err = {0};
    report_text_finish(b, &out, &err);
    return out;
}

static drift_status nomem(drift_error *err) { return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory rendering the PRI"); }

static json_t *holdout_json_base(const drift_pri_holdout *h);

static void holdout_text(util_buf *b, const drift_pri_holdout *h) {
    char paper[32] = "", tr[32], te[32], mae[32];
    if (isfinite(h->paper_r2))
        snprintf(paper, sizeof paper, "%8.4f %s", h->paper_r2,
                 !isfinite(h->test_r2) ? "-" : h->test_r2 > h->paper_r2 ? "better" : "worse");
    buf_puts(b, "  ");
    report_put_name_pad(b, h->name, 32);
    buf_printf(b, " %5zu %5zu %12s %12s %8s   %-16s d=%d eta=%.2f mcw=%d n=%d\n", h->n_train, h->n_test, report_r2_text(h->train_r2, h->n_train, 4, tr, sizeof tr),
               report_r2_text(h->test_r2, h->n_test, 4, te, sizeof te), fig(h->test_mae, 3, mae, sizeof mae), paper,
               h->depth, h->eta, h->min_child_weight, h->rounds);
}

static const char *const cannot_names[] = {"says", "no_flips", "no_variance", "at_noise", "too_few_rows",
                                            "no_counts"};

static json_t *holdout_json(const drift_pri_holdout *h) {
    json_t *o = holdout_json_base(h);
    if (!o) return NULL;
    json_t *iv = json_array();
    json_array_append_new(iv, report_json_num(h->r2_lo));
    json_array_append_new(iv, report_json_num(h->r2_hi));
    json_object_set_new(o, "r2_interval", iv);
    json_object_set_new(o, "n_configs", json_integer((json_int_t)h->n_configs));
    json_object_set_new(o, "ceiling", report_json_num(h->ceiling));
    json_object_set_new(o, "obs_sd", report_json_num(h->obs_sd));
    json_object_set_new(o, "noise_sd", report_json_num(h->noise_sd));
    json_object_set_new(o, "n_per_row", report_json_num(h->n_per_row));
    json_object_set_new(o, "n_needed", report_json_num(h->n_needed));
    json_object_set_new(o, "table_true_sd", report_json_num(h->table_true_sd));
    json_object_set_new(o, "test_flips", json_integer((json_int_t)h->test_flips));
    json_object_set_new(o, "test_comparisons", json_integer((json_int_t)h->test_comparisons));
    int c = h->cannot_say >= 0 && h->cannot_say <= DRIFT_PRI_NO_COUNTS ? h->cannot_say : 0;
    json_object_set_new(o, "cannot_say", c == DRIFT_PRI_SAYS ? json_null() : json_string(cannot_names[c]));
    char *v = drift_pri_holdout_text(h, 3);
    json_object_set_new(o, "verdict", v ? report_json_str(v) : json_null());
    free(v);
    return o;
}

static json_t *holdout_json_base(const drift_pri_holdout *h) {
    return json_pack("{s:o,s:I,s:I,s:o,s:o,s:o,s:o,s:{s:i,s:f,s:i,s:i}}", "name", report_json_str(h->name), "n_train",
                     (json_int_t)h->n_train, "n_test", (json_int_t)h->n_test, "train_r2", report_json_num(h->train_r2), "test_r2",
                     report_json_num(h->test_r2), "test_mae", report_json_num(h->test_mae), "paper_r2", report_json_num(h->paper_r2), "params",
                     "max_depth", h->depth, "eta", h->eta, "min_child_weight", h->min_child_weight, "n_estimators",
                     h->rounds);
}

static char *eval_json(const drift_pri_eval *e, const char *table, double elapsed_ms) {
    json_t *root = json_object(), *lv = json_array(), *pp = json_array(), *imp = json_array(), *cv = json_array();
    for (size_t i = 0; i < e->n_levels; i++) json_array_append_new(lv, holdout_json(&e->levels[i]));
    for (size_t i = 0; i < e->n_paper; i++) json_array_append_new(pp, holdout_json(&e->paper[i]));
    for (size_t i = 0; i < e->n_importance; i++)
        json_array_append_new(imp, json_pack("{s:o,s:f}", "feature", report_json_str(e->importance[i].name), "gain_share",
                                             e->importance[i].gain_share));
    for (int k = 0; k < 5; k++) json_array_append_new(cv, report_json_num(e->cv_fold_r2[k]));
    json_object_set_new(root, "table", report_json_str(table));
    json_object_set_new(root, "n_features", json_integer((json_int_t)e->n_features));
    json_object_set_new(root, "random_split", holdout_json(&e->random_split));
    json_object_set_new(root, "cv5", json_pack("{s:o,s:o,s:o,s:i}", "mean_r2", report_json_num(e->cv_r2_mean), "sd_r2",
                                               report_json_num(e->cv_r2_sd), "folds", cv, "folds_defined", e->cv_folds_defined));
    json_object_set_new(root, "held_out_paper", pp);
    json_object_set_new(root, "held_out_levels", lv);
    json_object_set_new(root, "ablations", json_pack("{s:o,s:o,s:o,s:o}", "hardware_only", report_json_num(e->abl_hardware_only),
                                                     "linear", report_json_num(e->abl_linear), "no_interactions",
                                                     report_json_num(e->abl_no_interactions), "full", report_json_num(e->abl_full)));
    json_object_set_new(root, "importance", imp);
    json_t *nh = json_array(), *ab = json_array();
    for (size_t i = 0; i < e->n_not_held; i++) {
        char why[64];
        snprintf(why, sizeof why, "not held out: %zu level%s", e->not_held[i].n_levels,
                 e->not_held[i].n_levels == 1 ? "" : "s");
        json_array_append_new(nh, json_pack("{s:o,s:I,s:s}", "dim", report_json_str(e->not_held[i].dim), "n_levels",
                                            (json_int_t)e->not_held[i].n_levels, "reason", why));
    }
    for (size_t i = 0; i < e->n_ablations; i++)
        json_array_append_new(ab, json_pack("{s:o,s:I,s:o,s:o,s:o}", "name", report_json_str(e->ablations[i].name),
                                            "n_features", (json_int_t)e->ablations[i].n_features, "r2",
                                            report_json_num(e->ablations[i].r2), "r2_min",
                                            report_json_num(e->ablations[i].r2_min), "r2_max",
                                            report_json_num(e->ablations[i].r2_max)));
    json_object_set_new(root, "not_held_out", nh);
    json_object_set_new(root, "min_levels", json_integer(e->min_levels));
    json_object_set_new(root, "ablations_cv", json_pack("{s:i,s:i,s:o}", "repeats", e->ablation_repeats, "folds", 5,
                                                        "variants", ab));
    json_object_set_new(root, "tuning", json_pack("{s:i,s:i}", "cv_folds", e->cv_folds, "cv_repeats", e->cv_repeats));
    json_object_set_new(root, "bootstrap", json_integer(e->bootstrap));
    json_object_set_new(root, "n_descriptors", json_integer((json_int_t)e->n_desc));
    json_object_set_new(root, "table_true_sd", report_json_num(e->table_true_sd));
    json_object_set_new(root, "elapsed_ms", json_real(elapsed_ms));
    char *s = dump_line(root, JSON_INDENT(2) | JSON_REAL_PRECISION(8));
    json_decref(root);
    return s;
}

/* The issue-36 verdicts: each held-out R^2 with its interval beside its
 * noise ceiling, or "cannot say" with why and what size would say it. */
static void verdicts_text(util_buf *b, const drift_pri_eval *e) {
    if (!e->n_levels && !e->random_split.n_configs) return;
    buf_puts(b, "\nWhat each held-out R2 can say: 95% interval by a bootstrap over the held-out configurations\n"
                "(predictions fixed); ceiling = the R2 a perfect predictor (the true rates) would get given the\n"
                "binomial noise of the observed rates, 1 - mean(y(1-y)/(n-1)) / var(y); \"cannot say\" where the\n"
                "ceiling is at or below 0 or the held-out rows have nothing to predict:\n");
    for (size_t i = 0; i <= e->n_levels; i++) {
        const drift_pri_holdout *h = i ? &e->levels[i - 1] : &e->random_split;
        if (!i && !h->n_configs) continue; /* filled before issue 36 */
        char *v = drift_pri_holdout_text(h, 3);
        buf_puts(b, "  ");
        report_put_name_pad(b, h->name, 32);
        buf_printf(b, " %3zu cfg  ", h->n_configs);
        report_put_name(b, v ? v : "(out of memory)");
        buf_puts(b, "\n");
        free(v);
    }
}

static void not_held_text(util_buf *b, const drift_pri_eval *e, const char *indent) {
    for (size_t i = 0; i < e->n_not_held; i++) {
        buf_puts(b, indent);
        report_put_name(b, e->not_held[i].dim);
        buf_printf(b, ": not held out: %zu level%s (leave-one-level-out needs %d: with fewer, the model would train "
                      "on one level and be scored on another)\n",
                   e->not_held[i].n_levels, e->not_held[i].n_levels == 1 ? "" : "s", e->min_levels);
    }
}

static char *eval_text(const drift_pri_eval *e, const char *table, int tuned, double elapsed_ms) {
    util_buf b = {0};
    buf_puts(&b, "PRI evaluation of ");
    report_put_name(&b, table);
    buf_printf(&b, ": %zu features", e->n_features);
    if (e->n_desc) buf_printf(&b, " (%zu caller descriptors)", e->n_desc);
    if (tuned && e->cv_repeats > 1)
        buf_printf(&b, ", hyper-parameters chosen by repeated inner CV (%d x %d folds) inside each training set\n\n",
                   e->cv_repeats, e->cv_folds);
    else
        buf_printf(&b, ", hyper-parameters %s\n\n",
                   tuned ? "chosen by inner CV inside each training set" : "fixed (--no-tune)");
    buf_printf(&b, "  %-32s %5s %5s %12s %12s %8s   %-16s %s\n", "evaluation", "train", "test", "train R2", "test R2",
               "MAE", "paper R2", "chosen");
    holdout_text(&b, &e->random_split);
    char m[32], sd[32];
    buf_printf(&b, "  5-fold CV R2: %s +- %s over %d defined (folds", fig(e->cv_r2_mean, 4, m, sizeof m),
               fig(e->cv_r2_sd, 4, sd, sizeof sd), e->cv_folds_defined);
    for (int k = 0; k < 5; k++) /* a fold's R^2 is not defined when its test rows share one flip rate */
        buf_printf(&b, "%s%s", k ? ", " : " ", isnan(e->cv_fold_r2[k]) ? "no variance" : fig(e->cv_fold_r2[k], 3, m, sizeof m));
    buf_puts(&b, ")\n\nHeld-out dimension, the paper's four cases (generalization_results.csv):\n");
    if (!e->n_paper) buf_puts(&b, "  (none of b200, fp4, sglang, qwen-7b is in this table)\n");
    for (size_t i = 0; i < e->n_paper; i++) holdout_text(&b, &e->paper[i]);
    buf_puts(&b, "\nHeld-out level, every level of every dimension (train without it, test on it):\n");
    for (size_t i = 0; i < e->n_levels; i++) holdout_text(&b, &e->levels[i]);
    not_held_text(&b, e, "  ");
    verdicts_text(&b, e);
    size_t nt = e->random_split.n_test;
    if (e->n_ablations) {
        buf_printf(&b, "\nAblations, R2 of a %d x repeated 5-fold CV, the same folds and hyper-parameters (the full\n"
                       "model's, chosen on all rows: a little optimistic, alike for every variant); mean [min, max]\n"
                       "over the repeats (paper, one split: hardware-only -0.018, linear 0.235, forest without\n"
                       "interactions 0.756, full 0.987):\n",
                   e->ablation_repeats);
        for (size_t i = 0; i < e->n_ablations; i++) {
            const drift_pri_ablation *a = &e->ablations[i];
            char r[32], lo[32], hi[32];
            buf_puts(&b, "  ");
            report_put_name_pad(&b, a->name, 28);
            buf_printf(&b, " %4zu features %8s [%s, %s]\n", a->n_features, report_r2_text(a->r2, 2, 4, r, sizeof r),
                       fig(a->r2_min, 4, lo, sizeof lo), fig(a->r2_max, 4, hi, sizeof hi));
        }
    } else {
        char a1[32], a2[32], a3[32], a4[32];
        buf_printf(&b, "\nAblations, test R2 on the random split (paper: hardware-only -0.018, linear 0.235,\n"
                       "forest without interactions 0.756, full 0.987):\n"
                       "  hardware one-hot only (xgboost)  %8s\n  linear (OLS on one-hot)          %8s\n"
                       "  one-hot only (xgboost)           %8s\n  full                             %8s\n",
                   report_r2_text(e->abl_hardware_only, nt, 4, a1, sizeof a1),
                   report_r2_text(e->abl_linear, nt, 4, a2, sizeof a2),
                   report_r2_text(e->abl_no_interactions, nt, 4, a3, sizeof a3),
                   report_r2_text(e->abl_full, nt, 4, a4, sizeof a4));
    }
    buf_puts(&b, "\nFeature importance (share of total gain, full model on all rows):\n");
    for (size_t i = 0; i < e->n_importance && i < 15; i++) {
        buf_puts(&b, "  ");
        report_put_name_pad(&b, e->importance[i].name, 44);
        buf_printf(&b, " %6.2f%%\n", 100 * e->importance[i].gain_share);
    }
    buf_printf(&b, "\nelapsed %.0f ms\n", elapsed_ms);
    return finish(&b);
}

/* See report.h. */
drift_status drift_pri_eval_render(const drift_pri_eval *e, const char *table, int tuned, double elapsed_ms,
                                   drift_format fmt, char **out, drift_error *err) {
    *out = NULL;
    if (!e) return drift_error_set(err, DRIFT_ERR_INVALID, "no PRI evaluation to render");
    if (!table) table = "";
    if (fmt == DRIFT_FORMAT_TEXT) *out = eval_text(e, table, tuned, elapsed_ms);
    else if (fmt == DRIFT_FORMAT_JSON) *out = eval_json(e, table, elapsed_ms);
    else return drift_error_set(err, DRIFT_ERR_INVALID, "a PRI evaluation renders as text or json");
    return *out ? DRIFT_OK : nomem(err);
}

/* See report.h. */
drift_status drift_pri_prediction_render(const drift_pri_query *q, const drift_pri_query *base,
                                         const drift_pri_prediction *r, drift_format fmt, char **out,
                                         drift_error *err) {
    *out = NULL;
    if (!q || !base || !r) return drift_error_set(err, DRIFT_ERR_INVALID, "no PRI prediction to render");
    if (fmt == DRIFT_FORMAT_JSON) {
        json_t *o = json_pack("{s:{s:o,s:o,s:o,s:o,s:o},s:{s:o,s:o,s:o,s:o},s:f,s:[f,f],s:f,s:s,s:s,s:o,s:s}",
                              "config", "model", report_json_str(q->model), "hardware", report_json_str(q->hardware),
                              "precision", report_json_str(q->precision), "framework", report_json_str(q->framework),
                              "workload", report_json_str(q->workload), "baseline", "model", report_json_str(base->model),
                              "hardware", report_json_str(base->hardware), "precision",
                              report_json_str(base->precision), "framework", report_json_str(base->framework),
                              "flip_rate", r->flip_rate / 100, "interval", r->lo / 100, r->hi / 100, "coverage",
                              r->coverage, "risk", r->risk, "change", r->change, "differs", report_json_str(r->differs), "advice",
                              r->advice);
        *out = dump_line(o, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
        json_decref(o);
    } else if (fmt == DRIFT_FORMAT_TEXT) {
        char *raw = util_asprintf("config    %s / %s / %s / %s, workload %s\n"
                              "baseline  %s / %s / %s / %s\n"
                              "predicted flip rate %.2f%%  (%.0f%% interval %.2f%% .. %.2f%%, from out-of-fold residuals)\n"
                              "risk      %s\n"
                              "change    %s%s%s%s\n"
                              "advice    %s\n",
                              q->model, q->hardware, q->precision, q->framework, q->workload, base->model,
                              base->hardware, base->precision, base->framework, r->flip_rate, 100 * r->coverage, r->lo,
                              r->hi, r->risk, r->change, r->differs[0] ? " (" : "", r->differs,
                              r->differs[0] ? ")" : "", r->advice);
        *out = raw ? util_sanitize(raw, UTIL_SAN_LINES) : NULL; /* the query's names are the user's */
        free(raw);
    } else {
        return drift_error_set(err, DRIFT_ERR_INVALID, "a PRI prediction renders as text or json");
    }
    return *out ? DRIFT_OK : nomem(err);
}

/* See report.h. */
char *drift_pri_cv_summary(const drift_pri_eval *e, const char *r2, const char *pm) {
    if (!isfinite(e->cv_r2_mean) || !isfinite(e->cv_r2_sd))
        return util_asprintf("5-fold CV %s: none defined (every fold's test rows share one flip rate)", r2);
    if (e->cv_folds_defined >= 5) return util_asprintf("5-fold CV %s = %.3f %s %.3f", r2, e->cv_r2_mean, pm, e->cv_r2_sd);
    if (e->cv_folds_defined > 0)
        return util_asprintf("5-fold CV %s = %.3f %s %.3f over %d folds (%d had one flip rate in all test rows: no %s)",
                              r2, e->cv_r2_mean, pm, e->cv_r2_sd, e->cv_folds_defined, 5 - e->cv_folds_defined, r2);
    return util_asprintf("5-fold CV %s: none defined (every fold's test rows share one flip rate)", r2);
}

/* What size would say it. The comparisons per row that would give a
 * ceiling of 0.5 if the held-out rows' true rates spread as the whole
 * table's do: when the rows have fewer, that many would say it; when they
 * have more, the sample is not what is short: the level moves too few
 * answers to be told from noise, and more comparisons would not say more. */
static void size_clause(util_buf *b, const drift_pri_holdout *h) {
    if (h->cannot_say == DRIFT_PRI_NO_FLIPS && h->n_per_row >= 1) /* per row: rows share their prompts */
        buf_printf(b, "; each row's flip rate is below %.2g%% (95%%, rule of three on its ~%.0f comparisons)",
                   300.0 / h->n_per_row, h->n_per_row);
    if (isfinite(h->n_needed) && isfinite(h->table_true_sd) && isfinite(h->n_per_row) && h->n_per_row < h->n_needed)
        buf_printf(b, "; rows whose true rates spread like the whole table's (sd %.2f points) would need about %.0f "
                      "comparisons each for a ceiling of 0.5 (these have %.0f)",
                   h->table_true_sd, ceil(h->n_needed), h->n_per_row);
    else if (isfinite(h->n_needed) && isfinite(h->table_true_sd) && isfinite(h->n_per_row))
        buf_printf(b, "; these rows' %.0f comparisons each would give a ceiling above 0.5 had their true rates spread "
                      "like the whole table's (sd %.2f points; %.0f would do): the level moves too few answers to "
                      "tell, and more comparisons per row would not say more",
                   h->n_per_row, h->table_true_sd, ceil(h->n_needed));
    else if (isfinite(h->n_per_row))
        buf_printf(b, "; the table's own rows vary no more than binomial noise, so no size per row can be read from "
                      "it (these have %.0f comparisons each)", h->n_per_row);
}

/* See report.h. */
char *drift_pri_holdout_text(const drift_pri_holdout *h, int decimals) {
    util_buf b = {0};
    int dp = decimals < 0 ? 3 : decimals > 6 ? 6 : decimals;
    switch (h->cannot_say) {
    case DRIFT_PRI_TOO_FEW:
        buf_printf(&b, "cannot say: %zu held-out row%s (R^2 needs 2)", h->n_test, h->n_test == 1 ? "" : "s");
        break;
    case DRIFT_PRI_NO_FLIPS:
        if (h->test_comparisons > 0)
            buf_printf(&b, "cannot say: no held-out row flipped (0 of %ld comparisons), nothing to predict",
                       h->test_comparisons);
        else
            buf_puts(&b, "cannot say: every held-out flip rate is 0, nothing to predict");
        size_clause(&b, h);
        break;
    case DRIFT_PRI_NO_VARIANCE:
        buf_puts(&b, "cannot say: the held-out rows share one flip rate, nothing to predict");
        size_clause(&b, h);
        break;
    case DRIFT_PRI_AT_NOISE:
        buf_printf(&b, "cannot say: the held-out rows vary no more than binomial noise (ceiling %.*f: sd %.2f points "
                       "against noise %.2f)", dp, h->ceiling, h->obs_sd, h->noise_sd);
        if (isfinite(h->test_r2)) buf_printf(&b, ", so R^2 %.*f measures noise", dp, h->test_r2);
        size_clause(&b, h);
        break;
    default:
        if (!isfinite(h->test_r2)) { /* filled before issue 36: the old words */
            buf_puts(&b, h->n_test < 2 ? "too few rows" : "no variance");
            break;
        }
        buf_printf(&b, "%.*f", dp, h->test_r2);
        if (isfinite(h->r2_lo) && isfinite(h->r2_hi)) buf_printf(&b, " [%.*f, %.*f]", dp, h->r2_lo, dp, h->r2_hi);
        else if (h->n_configs == 1) buf_puts(&b, " (one configuration: no interval)");
        if (h->cannot_say == DRIFT_PRI_NO_COUNTS) buf_puts(&b, ", ceiling unknown (no comparison counts)");
        else if (isfinite(h->ceiling)) buf_printf(&b, ", ceiling %.*f", dp, h->ceiling);
        break;
    }
    return finish(&b);
}

/* See report.h. */
drift_status drift_pri_summary_render(const drift_table_analyses *a, char **out, drift_error *err) {
    *out = NULL;
    if (!a) return drift_error_set(err, DRIFT_ERR_INVALID, "no analyses to render");
    util_buf b = {0};
    const drift_pri_eval *ev = a->pri;
    if (!a->pri_asked) {
        /* nothing asked, nothing said */
    } else if (!a->pri_fits) {
        buf_printf(&b, "PRI: too few rows (%zu, need %d) to fit and evaluate; skipped.\n", a->n_rows,
                   DRIFT_ANALYSES_PRI_MIN_ROWS);
    } else if (!ev) {
        buf_printf(&b, "PRI: not computable: %s\n", a->pri_error.msg);
    } else {
        if (ev->cv_repeats > 1)
            buf_printf(&b, "PRI (xgboost, %zu features%s, hyper-parameters by %d x repeated %d-fold inner CV)\n",
                       ev->n_features, ev->n_desc ? " with the configurations' descriptors" : "", ev->cv_repeats,
                       ev->cv_folds);
        else
            buf_printf(&b, "PRI (xgboost, %zu features, hyper-parameters by inner CV)\n", ev->n_features);
        char r2[32], mae[32];
        size_t nt = ev->random_split.n_test;
        if (ev->random_split.n_configs) { /* with its interval and ceiling (issue 36) */
            char *v = drift_pri_holdout_text(&ev->random_split, 3);
            buf_puts(&b, "  random 80/20 split: test R^2 ");
            report_put_name(&b, v ? v : "(out of memory)");
            buf_printf(&b, "; MAE %s points (train %zu, test %zu)\n", fig(ev->random_split.test_mae, 3, mae, sizeof mae),
                       ev->random_split.n_train, nt);
            free(v);
        } else {
            buf_printf(&b, "  random 80/20 split: test R^2 %s, MAE %s points (train %zu, test %zu)\n",
                       report_r2_text(ev->random_split.test_r2, nt, 3, r2, sizeof r2),
                       fig(ev->random_split.test_mae, 3, mae, sizeof mae), ev->random_split.n_train, nt);
        }
        char *cv = drift_pri_cv_summary(ev, "R^2", "+-");
        buf_printf(&b, "  %s\n", cv ? cv : "5-fold CV: out of memory");
        free(cv);
        if (ev->n_ablations) {
            buf_printf(&b, "  ablations (R^2, %d x repeated 5-fold CV, same folds and hyper-parameters):",
                       ev->ablation_repeats);
            for (size_t i = 0; i < ev->n_ablations; i++) {
                buf_printf(&b, "%s ", i ? "," : "");
                report_put_name(&b, ev->ablations[i].name);
                buf_printf(&b, " %s", report_r2_text(ev->ablations[i].r2, 2, 3, r2, sizeof r2));
            }
            buf_puts(&b, "\n");
        } else {
            char a1[32], a2[32], a3[32], a4[32];
            buf_printf(&b, "  ablations (test R^2): hardware-only %s, linear %s, no interactions %s, full %s\n",
                       report_r2_text(ev->abl_hardware_only, nt, 3, a1, sizeof a1),
                       report_r2_text(ev->abl_linear, nt, 3, a2, sizeof a2),
                       report_r2_text(ev->abl_no_interactions, nt, 3, a3, sizeof a3),
                       report_r2_text(ev->abl_full, nt, 3, a4, sizeof a4));
        }
        int undefined = 0;
        buf_printf(&b, "  held-out level                     train  test    MAE  held-out R^2 [95%% CI over configurations], "
                       "noise ceiling\n");
        for (size_t i = 0; i < ev->n_levels; i++) {
            const drift_pri_holdout *h = &ev->levels[i];
            buf_puts(&b, "  ");
            report_put_name_pad(&b, h->name, 34);
            char *v = drift_pri_holdout_text(h, 3);
            buf_printf(&b, " %5zu %5zu %6s  ", h->n_train, h->n_test, fig(h->test_mae, 3, mae, sizeof mae));
            report_put_name(&b, v ? v : "(out of memory)");
            buf_puts(&b, "\n");
            free(v);
            undefined |= !isfinite(h->test_r2) && h->cannot_say == DRIFT_PRI_SAYS;
        }
        if (undefined)
            buf_puts(&b, "  (no variance: the held-out rows share one flip rate, often none flipped, so R^2 is not "
                         "defined)\n");
        not_held_text(&b, ev, "  ");
        if (ev->n_importance) {
            buf_puts(&b, "  top features by gain:");
            for (size_t i = 0; i < ev->n_importance && i < 5; i++) {
                buf_puts(&b, " ");
                report_put_name(&b, ev->importance[i].name);
                buf_printf(&b, " (%.2f)%s", ev->importance[i].gain_share, i + 1 < ev->n_importance && i < 4 ? "," : "");
            }
            buf_puts(&b, "\n");
        }
    }
    *out = finish(&b);
    return *out ? DRIFT_OK : nomem(err);
}
