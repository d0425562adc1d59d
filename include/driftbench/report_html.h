/* report_html.h - the report as one self-contained HTML file: inline CSS
 * and SVG only (no scripts, fonts or images from anywhere), readable
 * offline and printable. Two pages:
 *
 *   the comparison page (one configuration against its baseline): the
 *     verdict first (DEPLOY / BLOCK / INCONCLUSIVE / ERROR, what its exit
 *     code means, the budgets, the rule and its error rates, in the words
 *     of the text report), what was compared (both runs' targets,
 *     configuration, suites, decoding, versions), each workload's decision
 *     with its exact interval drawn against its budget; then the sections
 *     below for that one configuration.
 *   the matrix page (many configurations): the caller's summary fragment
 *     when given (the lab's: what it found, first), summary with the
 *     decisions counted, flip-rate heatmap (configuration x workload, on a
 *     fixed colour scale, with Wilson CIs and each cell's decision),
 *     direction of flips, taxonomy with each configuration's decision,
 *     ANOVA and PRI (when the table has enough rows; one line says why
 *     when not).
 * Both: a table of contents, flip risk, token KL, stopping curves when
 * there are any, and the flipped prompts with both answers side by side
 * and a word-level diff (removed words in <del>, added in <ins>).
 *
 * Two steps: drift_matrix_report_load (src/report/load_matrix.c) computes
 * everything the page shows from a store; drift_html_render (html.c) turns
 * that into the page without touching the store. drift_report_html does
 * both. drift_comparison_html_render renders one comparison already
 * computed (compare's). The two that take a drift_store (the type comes
 * with compare.h) are loaders, implemented in src/report/load_matrix.c: the
 * report layer reads the store only there and in load.c (layers.txt). */
#ifndef DRIFTBENCH_REPORT_HTML_H
#define DRIFTBENCH_REPORT_HTML_H

#include <stddef.h>
#include <stdint.h>

#include "driftbench/analysis.h"
#include "driftbench/compare.h"
#include "driftbench/divergence.h"
#include "driftbench/report.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Teacher-forced token KL per configuration, for the report's "token KL
 * against flip rate" section (report --kl N): the pipeline's step
 * (drift_tokdiv_configs_run, teacher_forced.h) computes it, the caller sets
 * drift_html_opts.kl, drift_html_render draws it. */
typedef drift_tokdiv_config_kl drift_html_kl_point;
typedef drift_tokdiv_configs drift_html_kl;

typedef struct drift_html_opts {
    const char *title;         /* default "DriftBench report" */
    const char *baseline;      /* baseline label, "{dim}" placeholders allowed (see drift_matrix_flip_table) */
    size_t max_flipped;        /* flipped prompts shown per configuration x workload; default 5 */
    const char *note;          /* optional paragraph shown under the title (plain text, escaped) */
    int analysis;              /* 1 (default): ANOVA and PRI sections when the table is large enough */
    const drift_pri_eval *pri; /* PRI evaluation already computed on the same table (not freed), or NULL */
    const char *summary_html;  /* optional HTML fragment shown first, under the title (the lab's summary:
                                * drift_lab_summary_render's html, report.h); inserted as given, so it must
                                * be markup the caller trusts; NULL or "" = none */
    const drift_html_kl *kl;   /* NULL (default): no token-KL section; else KL per configuration against its
                                * flip rate (a log-scale scatter and Spearman's rho), not freed */
    /* Which page (drift_matrix_report_load): */
    const char *target;        /* the comparison page of this run against its baseline (report --target);
                                * NULL: as `comparison` says */
    int comparison;            /* 1: the comparison page when the store holds exactly one run besides the
                                * baseline(s) (report's default); 0 (default): the matrix page */
    const drift_compare_opts *gate; /* the budgets, rule and max_left_out of every decision shown (nothing
                                * else of it is used); NULL = drift_compare_opts_default's; not freed */
    const char *generated;     /* drift_comparison_html_render: the page's date; NULL = now (UTC) */
} drift_html_opts;

DRIFT_API void drift_html_opts_default(drift_html_opts *o);

/* Both answers of one flipped prompt. */
typedef struct drift_report_answers {
    char *input;                 /* the prompt's input (baseline side); NULL when none */
    char *base_text, *targ_text; /* NULL when an answer has no text */
    char *error;                 /* non-NULL (malloc'd) when the answers could not be read; the rest NULL */
} drift_report_answers;

/* One configuration of the report: a run with pairs against its baseline. */
typedef struct drift_report_experiment {
    char *label;                                   /* the run's label */
    char *baseline;                                /* its baseline run's label */
    char *levels[DRIFT_DIM_CONFIG_COUNT];          /* its model, hardware, precision, framework as its
                                                    * config records them; NULL when not a string */
    drift_comparison *cmp;                         /* baseline vs run, default options */
    drift_report_answers *answers[DRIFT_WL_COUNT]; /* (n_answers[w],) of cmp->wl[w].flipped[0..) */
    size_t n_answers[DRIFT_WL_COUNT];
} drift_report_experiment;

/* Everything the report shows. */
typedef struct drift_matrix_report {
    char *baseline;                        /* the baseline label (pattern) */
    int comparison;                        /* 1: the comparison page of experiments[0] (n_experiments 1,
                                            * table NULL, no analyses computed); 0: the matrix page */
    drift_table *table;                    /* drift_matrix_flip_table; NULL for a comparison */
    drift_report_experiment *experiments;  /* (n_experiments,) in the table's order */
    size_t n_experiments;
    int analysis;                          /* the analyses were asked for */
    drift_table_analyses analyses;         /* ANOVA type II and the PRI evaluation, when analysis */
    size_t max_flipped;                    /* flipped prompts loaded per configuration x workload */
    char generated[32];                    /* when it was computed, UTC ISO 8601 */
} drift_matrix_report;

/* Computes the report of st (o->baseline, o->max_flipped, o->analysis,
 * o->pri, o->target, o->comparison, o->gate; NULL o = defaults).
 * The comparison page (out->comparison = 1) when o->target names a run, or
 * when o->comparison is set and the store holds exactly one run that is
 * not a baseline (whose baseline exists): that run compared against its
 * baseline under o->gate, even without a counted pair (its decision is
 * then an error), and the answers of its flipped prompts shown. Else the
 * matrix page: the flip table and its runs' comparisons (under o->gate),
 * the analyses, the answers of the flipped prompts shown. A missing
 * baseline, an o->target that is not a run or is the baseline, or a
 * failing comparison is an error; a failing analysis or unreadable answers
 * are recorded for the page to say. Free with drift_matrix_report_free. */
DRIFT_API drift_status drift_matrix_report_load(drift_store *st, const drift_html_opts *o, drift_matrix_report **out,
                                                drift_error *err);
/* Frees r and all it holds (not o->pri); NULL is fine. */
DRIFT_API void drift_matrix_report_free(drift_matrix_report *r);

/* Renders r as the HTML page, the comparison page when r->comparison
 * (o->title, o->note, o->summary_html, o->kl; NULL o = defaults). Pure:
 * reads nothing but r and o. *out is a malloc'd NUL-terminated HTML
 * document. Every text from the store is escaped (and invalid UTF-8
 * replaced), so answers cannot inject markup. */
DRIFT_API drift_status drift_html_render(const drift_matrix_report *r, const drift_html_opts *o, char **out,
                                         drift_error *err);

/* One comparison (drift_compare_runs) as the comparison page, as
 * drift_html_render draws it for a report of that comparison. d (may be
 * NULL) gives the flipped prompts' answers: those d quotes
 * (base_text/targ_text set) side by side with a word diff, the others as
 * d's text diff (div.diff); at most o->max_flipped per workload. o: title,
 * note, summary_html, max_flipped, analysis (1: one line says why there is
 * no ANOVA and PRI), generated (NULL = now); NULL o = defaults. Pure; *out
 * malloc'd. For `compare --format html`: drift_comparison_details_load
 * (text's details) then this. */
DRIFT_API drift_status drift_comparison_html_render(const drift_comparison *c, const drift_comparison_details *d,
                                                    const drift_html_opts *o, char **out, drift_error *err);

/* drift_matrix_report_load then drift_html_render. */
DRIFT_API drift_status drift_report_html(drift_store *st, const drift_html_opts *o, char **out, drift_error *err);

#ifdef __cplusplus
}
#endif
#endif
