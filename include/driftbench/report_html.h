/* report_html.h - the matrix report as one self-contained HTML file: inline
 * CSS and SVG only (no scripts, fonts or images from anywhere), readable
 * offline and printable. Sections: the caller's summary fragment when given
 * (the lab's: what it found, first), summary, flip-rate heatmap (configuration
 * x workload, with Wilson CIs), direction of flips, taxonomy, ANOVA and PRI
 * (when the table has enough rows), and the flipped prompts with both
 * answers side by side and the character where they part.
 *
 * Two steps: drift_matrix_report_load (src/matrix/report_data.c) computes
 * everything the page shows from a store; drift_html_render (html.c) turns
 * that into the page without touching the store. drift_report_html does
 * both. */
#ifndef DRIFTBENCH_REPORT_HTML_H
#define DRIFTBENCH_REPORT_HTML_H

#include <stddef.h>
#include <stdint.h>

#include "driftbench/analysis.h"
#include "driftbench/compare.h"
#include "driftbench/store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Teacher-forced token KL per configuration, for the report's "token KL
 * against flip rate" section (report --kl N): drift_html_kl_load fills it
 * from the store, drift_html_render draws it when drift_html_opts.kl is set. */
typedef struct drift_html_kl_point {
    char *label;               /* the configuration's run label */
    double kl_mean;            /* mean KL(baseline || configuration), nats, over every sampled position */
    double same_top;           /* share of those positions whose top-1 tokens agree */
    size_t positions;          /* positions scored */
} drift_html_kl_point;

typedef struct drift_html_kl {
    size_t limit;              /* prompts per workload sampled */
    uint64_t seed;             /* the sample's seed */
    drift_html_kl_point *points; /* (n) one per embedded configuration whose baseline is embedded */
    size_t n;
    char **not_embedded;       /* (n_not_embedded) configurations left out: they or their baseline are
                                * not embedded stacks (teacher forcing needs the engine's logits) */
    size_t n_not_embedded;
    double elapsed_ms;
} drift_html_kl;

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

/* Everything the matrix report shows. */
typedef struct drift_matrix_report {
    char *baseline;                        /* the baseline label (pattern) */
    drift_table *table;                    /* drift_matrix_flip_table */
    drift_report_experiment *experiments;  /* (n_experiments,) in the table's order */
    size_t n_experiments;
    int analysis;                          /* the analyses were asked for */
    drift_table_analyses analyses;         /* ANOVA type II and the PRI evaluation, when analysis */
    size_t max_flipped;                    /* flipped prompts loaded per configuration x workload */
    char generated[32];                    /* when it was computed, UTC ISO 8601 */
} drift_matrix_report;

/* Computes the report of every run in st against its baseline
 * (o->baseline, o->max_flipped, o->analysis, o->pri; NULL o = defaults):
 * the flip table and its runs' comparisons, the analyses, the answers of
 * the flipped prompts shown. A missing baseline or a failing comparison is
 * an error; a failing analysis or unreadable answers are recorded for the
 * page to say. Free with drift_matrix_report_free. */
DRIFT_API drift_status drift_matrix_report_load(drift_store *st, const drift_html_opts *o, drift_matrix_report **out,
                                                drift_error *err);
/* Frees r and all it holds (not o->pri); NULL is fine. */
DRIFT_API void drift_matrix_report_free(drift_matrix_report *r);

/* Token KL of every configuration of r against its baseline
 * (drift_tokdiv_runs_many, one call per baseline): limit prompts per
 * workload (>= 1), a sample drawn from seed; models_dir as
 * drift_tokdiv_opts. Configurations whose run or baseline is not an
 * embedded stack are listed in out->not_embedded, not an error. progress
 * (may be NULL) is called after each prompt. Errors of drift_tokdiv_runs_many
 * (a model file gone, vocabularies that differ) fail the call, the message
 * naming the baseline. Free with drift_html_kl_clear. */
DRIFT_API drift_status drift_html_kl_load(drift_store *st, const drift_matrix_report *r, size_t limit, uint64_t seed,
                                          const char *models_dir, drift_progress_fn progress, void *progress_user,
                                          drift_html_kl *out, drift_error *err);
/* Frees what k holds and empties it. */
DRIFT_API void drift_html_kl_clear(drift_html_kl *k);

/* Renders r as the HTML page (o->title and o->note; NULL o = defaults).
 * Pure: reads nothing but r and o. *out is a malloc'd NUL-terminated HTML
 * document. Every text from the store is escaped (and invalid UTF-8
 * replaced), so answers cannot inject markup. */
DRIFT_API drift_status drift_html_render(const drift_matrix_report *r, const drift_html_opts *o, char **out,
                                         drift_error *err);

/* drift_matrix_report_load then drift_html_render. */
DRIFT_API drift_status drift_report_html(drift_store *st, const drift_html_opts *o, char **out, drift_error *err);

/* Appends s to the HTML-escaped form (&, <, >, ", ' escaped; control bytes
 * other than \n and \t and invalid UTF-8 become U+FFFD). Returns a malloc'd
 * string. Exposed for tests. */
DRIFT_API char *drift_html_escape(const char *s);

/* Index (in bytes) of the first character where a and b differ; the length
 * of the shorter one when one is a prefix of the other; -1 when equal. */
DRIFT_API long drift_first_difference(const char *a, const char *b);

#ifdef __cplusplus
}
#endif
#endif
