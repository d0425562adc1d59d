/* anova_render.c - ANOVA tables as text and JSON (report.h), pure.
 *
 *   drift_anova_render          what `driftbench anova` prints: every
 *                               table in full (df, design columns, SS, MS,
 *                               F, p, BH, eta^2, partial eta^2, SS share;
 *                               "-" for NaN, null in JSON), then the
 *                               artifact's Type III table beside ours when
 *                               the input is the paper's.
 * The three shares are named for what they are (analysis.h): eta^2 = SS /
 * total SS about the mean, partial eta^2 = SS / (SS + residual SS), share =
 * SS / sum of the printed sum_sq column (the artifact's "eta_squared",
 * Intercept included for type III); every table says so under it.
 *   drift_anova_summary_render  the matrix summary's compact block (the
 *                               lab): one table per type, or why none.
 * Terms are the table file's column names: sanitised in text, repaired in
 * JSON (report_safe.c). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/report.h"
#include "report/report_internal.h"
#include "util/util.h"

/* "%.<prec>g" of v, or "%.<prec>f" when fixed, or "-" for NaN */
static const char *fmt_num(char *buf, size_t n, double v, int prec, int fixed) {
    if (isnan(v)) snprintf(buf, n, "-");
    else if (fixed) snprintf(buf, n, "%.*f", prec, v);
    else snprintf(buf, n, "%.*g", prec, v);
    return buf;
}

static void table_text(util_buf *b, const drift_anova_table *a) {
    static const char *const tn[] = {"", "I (sequential)", "II", "III"};
    buf_printf(b, "ANOVA type %s%s", tn[a->type], a->stratum ? "  stratum " : "");
    report_put_name(b, a->stratum);
    buf_puts(b, "  ");
    report_put_text(b, a->formula, REPORT_NOTE_MAX_BYTES);
    buf_puts(b, "\n");
    buf_printf(b, "%zu rows, %zu design columns, rank %zu, residual df %.0f, MSE %.6g\n", a->nobs, a->n_columns,
               a->rank, a->df_resid, a->mse);
    buf_printf(b, "%-30s %4s %4s %14s %12s %10s %11s %11s %8s %8s %8s\n", "term", "df", "cols", "sum_sq", "mean_sq",
               "F", "p", "p_BH", "eta^2", "part.eta", "SS share");
    for (size_t i = 0; i < a->n_rows; i++) {
        const drift_anova_row *r = &a->rows[i];
        char s1[32], s2[32], s3[32], s4[32], s5[32], s6[32], s7[32];
        report_put_name_pad(b, r->term, 30);
        buf_printf(b, " %4.0f %4d %14.6g %12s %10s %11s %11s %8s %8s %8s\n", r->df, r->n_columns, r->sum_sq,
                   fmt_num(s1, sizeof s1, r->mean_sq, 6, 0), fmt_num(s2, sizeof s2, r->F, 5, 0),
                   fmt_num(s3, sizeof s3, r->p, 4, 0), fmt_num(s4, sizeof s4, r->p_bh, 4, 0),
                   fmt_num(s5, sizeof s5, r->eta_sq, 4, 1), fmt_num(s6, sizeof s6, r->eta_sq_partial, 4, 1),
                   fmt_num(s7, sizeof s7, r->ss_share, 4, 1));
    }
    buf_printf(b, "eta^2 = sum_sq / total SS about the mean (%.6g); part.eta = partial eta^2 = sum_sq / (sum_sq + "
                  "residual SS);\nSS share = sum_sq / the sum of the sum_sq column%s (the artifact's eta_squared; "
                  "equal to eta^2 for type I only).\n",
               a->ss_total, a->type == 3 ? ", Intercept and Residual included" : ", Residual included");
    if (a->rank < a->n_columns)
        buf_printf(b, "note: rank-deficient design (%zu columns, rank %zu; empty interaction cells): df is the rank "
                      "a term adds.\n      statsmodels prints the column count as df with SS = F x columns x MSE "
                      "(so a larger SS and SS share\n      for such a term: the artifact's 0.0017 for hardware:precision); "
                      "its Type III F and p equal ours,\n      its Type I/II values of the terms touched by the "
                      "empty cells change with the row order.\n",
                   a->n_columns, a->rank);
    buf_puts(b, "\n");
}

static void artifact_text(util_buf *b, const drift_anova_artifact_row *art, size_t n, const drift_anova_table *ours) {
    buf_puts(b, "The artifact's table (driftbench-ae/data/anova_flip_rate_corrected.csv, Type III) beside ours.\n"
                "It was computed on slightly different data than the published flip_rates.csv (its workload F is\n"
                "53.597, the published rows give 53.543): shown for reference, not a target.\n");
    buf_printf(b, "%-30s %12s %12s %10s %10s %11s %11s\n", "term", "F artifact", "F ours", "p_BH art.", "p_BH ours",
               "share art.", "share ours");
    for (size_t i = 0; i < n; i++) {
        const drift_anova_row *r = NULL;
        for (size_t k = 0; k < ours->n_rows; k++)
            if (!strcmp(ours->rows[k].term, art[i].term)) r = &ours->rows[k];
        char s[6][32];
        report_put_name_pad(b, art[i].term, 30);
        buf_printf(b, " %12s %12s %10s %10s %11s %11s\n", fmt_num(s[0], 32, art[i].F, 5, 0),
                   fmt_num(s[1], 32, r ? r->F : NAN, 5, 0), fmt_num(s[2], 32, art[i].p_corrected, 4, 0),
                   fmt_num(s[3], 32, r ? r->p_bh : NAN, 4, 0), fmt_num(s[4], 32, art[i].eta_sq, 4, 1),
                   fmt_num(s[5], 32, r ? r->ss_share : NAN, 4, 1));
    }
    buf_puts(b, "share = sum_sq / the sum of the sum_sq column (the artifact's column \"eta_squared\").\n\n");
}

static drift_status render_text(const drift_anova_doc *doc, char **out, drift_error *err) {
    util_buf b = {0};
    for (size_t i = 0; i < doc->n_tables; i++) table_text(&b, doc->tables[i]);
    if (doc->type3 && doc->n_artifact) artifact_text(&b, doc->artifact, doc->n_artifact, doc->type3);
    return report_text_finish(&b, out, err);
}

/* NaN is null; a value jansson refuses (an infinity) leaves its key out. */
static json_t *jnum(double v) { return isnan(v) ? json_null() : json_real(v); }

static json_t *table_json(const drift_anova_table *a) {
    json_t *rows = json_array();
    for (size_t i = 0; i < a->n_rows; i++) {
        const drift_anova_row *r = &a->rows[i];
        json_t *o = json_object();
        json_object_set_new(o, "term", report_json_str(r->term));
        json_object_set_new(o, "df", jnum(r->df));
        json_object_set_new(o, "n_columns", json_integer(r->n_columns));
        json_object_set_new(o, "sum_sq", jnum(r->sum_sq));
        json_object_set_new(o, "mean_sq", jnum(r->mean_sq));
        json_object_set_new(o, "F", jnum(r->F));
        json_object_set_new(o, "p", jnum(r->p));
        json_object_set_new(o, "p_bh", jnum(r->p_bh));
        json_object_set_new(o, "eta_sq", jnum(r->eta_sq));
        json_object_set_new(o, "eta_sq_partial", jnum(r->eta_sq_partial));
        json_object_set_new(o, "ss_share", jnum(r->ss_share));
        json_array_append_new(rows, o);
    }
    json_t *o = json_object();
    json_object_set_new(o, "type", json_integer(a->type));
    json_object_set_new(o, "formula", report_json_str(a->formula));
    json_object_set_new(o, "stratum", a->stratum ? report_json_str(a->stratum) : json_null());
    json_object_set_new(o, "nobs", json_integer((json_int_t)a->nobs));
    json_object_set_new(o, "n_columns", json_integer((json_int_t)a->n_columns));
    json_object_set_new(o, "rank", json_integer((json_int_t)a->rank));
    json_object_set_new(o, "df_resid", jnum(a->df_resid));
    json_object_set_new(o, "mse", jnum(a->mse));
    json_object_set_new(o, "ss_total", jnum(a->ss_total));
    json_object_set_new(o, "eta_sq_note", json_string("eta_sq = sum_sq / ss_total (total SS about the mean); "
                                                      "eta_sq_partial = sum_sq / (sum_sq + residual sum_sq); "
                                                      "ss_share = sum_sq / sum of the sum_sq column"));
    json_object_set_new(o, "rows", rows);
    return o;
}

static drift_status render_json(const drift_anova_doc *doc, char **out, drift_error *err) {
    json_t *root = json_object(), *jt = json_array();
    json_object_set_new(root, "table", report_json_str(doc->table));
    json_object_set_new(root, "formula", report_json_str(doc->formula));
    for (size_t i = 0; i < doc->n_tables; i++) json_array_append_new(jt, table_json(doc->tables[i]));
    if (doc->type3 && doc->n_artifact) {
        json_t *ja = json_array();
        for (size_t i = 0; i < doc->n_artifact; i++) {
            const drift_anova_artifact_row *r = &doc->artifact[i];
            json_array_append_new(ja, json_pack("{s:o,s:o,s:o,s:o,s:o}", "term", report_json_str(r->term), "F", jnum(r->F),
                                                "p_corrected", jnum(r->p_corrected), "eta_squared", jnum(r->eta_sq),
                                                "sum_sq", jnum(r->sum_sq)));
        }
        json_object_set_new(root, "artifact_type3", ja);
        json_object_set_new(root, "artifact_note",
                            json_string("the artifact's table was computed on slightly different data"));
    }
    json_object_set_new(root, "tables", jt);
    *out = report_json_dump(root, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
    json_decref(root);
    return *out ? DRIFT_OK : drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory rendering the ANOVA");
}

/* See report.h. */
drift_status drift_anova_render(const drift_anova_doc *doc, drift_format fmt, char **out, drift_error *err) {
    *out = NULL;
    if (!doc) return drift_error_set(err, DRIFT_ERR_INVALID, "no ANOVA to render");
    if (fmt == DRIFT_FORMAT_TEXT) return render_text(doc, out, err);
    if (fmt == DRIFT_FORMAT_JSON) return render_json(doc, out, err);
    return drift_error_set(err, DRIFT_ERR_INVALID, "an ANOVA renders as text or json");
}

/* See report.h. */
drift_status drift_anova_summary_render(const drift_table_analyses *a, char **out, drift_error *err) {
    *out = NULL;
    if (!a) return drift_error_set(err, DRIFT_ERR_INVALID, "no analyses to render");
    util_buf b = {0};
    if (!a->anova_fits) {
        buf_printf(&b, "ANOVA: too few rows (%zu) for the %zu parameters of the factors that vary plus two residual "
                       "degrees of freedom; skipped.\n",
                   a->n_rows, a->n_params);
    }
    for (int type = 1; type <= 3 && a->anova_fits; type++) {
        const drift_anova_table *t = a->anova[type];
        if (a->anova_error[type].code) {
            buf_printf(&b, "ANOVA type %d: not computable: ", type);
            report_put_text(&b, a->anova_error[type].msg, REPORT_NOTE_MAX_BYTES);
            buf_puts(&b, "\n");
            continue;
        }
        if (!t) continue;
        buf_printf(&b, "ANOVA type %d  ", type);
        report_put_text(&b, a->formula, REPORT_NOTE_MAX_BYTES);
        buf_printf(&b, "  (n=%zu, rank %zu of %zu columns)\n", t->nobs, t->rank, t->n_columns);
        buf_printf(&b, "  %-34s %5s %12s %10s %10s %10s %7s %8s\n", "term", "df", "sum_sq", "F", "p", "p_BH", "eta^2",
                   "part.eta");
        for (size_t i = 0; i < t->n_rows; i++) {
            const drift_anova_row *r = &t->rows[i];
            char s1[32], s2[32], s3[32], s4[32], s5[32];
            buf_puts(&b, "  ");
            report_put_name_pad(&b, r->term, 34);
            buf_printf(&b, " %5.0f %12.5g %10s %10s %10s %7s %8s\n", r->df, r->sum_sq,
                       fmt_num(s1, sizeof s1, r->F, 4, 0), fmt_num(s2, sizeof s2, r->p, 3, 0),
                       fmt_num(s3, sizeof s3, r->p_bh, 3, 0), fmt_num(s4, sizeof s4, r->eta_sq, 3, 1),
                       fmt_num(s5, sizeof s5, r->eta_sq_partial, 3, 1));
        }
        buf_puts(&b, "  eta^2 = sum_sq / total sum of squares about the mean; part.eta = partial eta^2 = sum_sq / "
                     "(sum_sq + residual sum_sq).\n");
        buf_puts(&b, "\n");
    }
    return report_text_finish(&b, out, err);
}
