/* report.h - the renderers: text, JSON, markdown and JUnit of what the
 * analyses computed. Every renderer is a pure function of its structs (no
 * store, no analysis, no printing) and returns a malloc'd string; the
 * caller decides where it goes.
 *
 *   comparison        text, json, markdown, junit   (compare_render.c),
 *                     github                        (github_render.c),
 *                     html                          (html.c), the format
 *                     picked by drift_comparison_render (compare_format.c)
 *   ANOVA             text, json; the matrix summary (anova_render.c)
 *   PRI               evaluation text, json; prediction text, json;
 *                     the matrix summary            (pri_render.c)
 *   monitor           text, json                    (monitor_render.c)
 *   flip table        text (CSV: drift_table_format_csv) (table_render.c)
 *   lab               a store's failed requests (lab_render.c); the
 *                     stochastic leg, the cut answers and the lab's note
 *                     over its data are in lab_result.h (lab_render.c)
 *   lab summary       what the lab found, first: text and an HTML
 *                     fragment with an inline SVG chart (lab_summary.c;
 *                     from a study's view: lab_result.h)
 *   matrix report     HTML                          (report_html.h, html.c)
 *
 * Load -> compute -> render: the loaders are the only report code that
 * reads the store, all in this layer: a comparison and what its report
 * shows of its flips beyond it (where the answers part, excerpts of both)
 * in one read transaction, each answer read once (drift_comparison_load,
 * src/report/load.c); the matrix report's data (drift_matrix_report_load,
 * src/report/load_matrix.c). Token KL is the pipeline's step
 * (teacher_forced.h), attached by the caller. */
#ifndef DRIFTBENCH_REPORT_H
#define DRIFTBENCH_REPORT_H

#include "driftbench/analysis.h"
#include "driftbench/compare.h"
#include "driftbench/monitor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum drift_format {
    DRIFT_FORMAT_TEXT = 0,
    DRIFT_FORMAT_JSON = 1,
    DRIFT_FORMAT_MARKDOWN = 2,
    DRIFT_FORMAT_JUNIT = 3,
    DRIFT_FORMAT_GITHUB = 4,  /* GitHub Actions annotations + step summary (comparisons only) */
    DRIFT_FORMAT_HTML = 5     /* one self-contained page (comparisons only: drift_comparison_html_render) */
} drift_format;

/* DRIFT_JSON_SCHEMA_VERSION (types.h): the version of the JSON documents. */
/* DRIFT_JSON_SCHEMA_VERSION of the library (for bindings that load it). */
DRIFT_API int drift_json_schema_version(void);

/* "text", "json", "markdown" (or "md"), "junit" (or "xml"), "github", any case.
 * Anything else is DRIFT_ERR_INVALID naming the known ones. */
DRIFT_API drift_status drift_format_parse(const char *name, drift_format *out, drift_error *err);

/* ------------------------------------------------------------ comparison */

#define DRIFT_REPORT_LISTED_FLIPS 50 /* flipped prompts listed per workload in text, markdown, junit */
#define DRIFT_REPORT_QUOTED_FLIPS 3  /* of those, quoted with an excerpt of both answers */

/* What a report shows of one flip beyond the comparison. */
typedef struct drift_flip_detail {
    drift_divergence div;        /* where the answers part; div.error (malloc'd) when it could not be
                                  * computed, the other fields then unset */
    char *base_text, *targ_text; /* both answers (malloc'd, "" for none) when quoted; NULL otherwise */
} drift_flip_detail;

/* The details of a comparison's flips: flips[k][i] belongs to
 * c->wl[k].flipped[i] for i < n[k]. Zero-initialise; clear with
 * drift_comparison_details_clear. */
typedef struct drift_comparison_details {
    drift_flip_detail *flips[DRIFT_WL_COUNT];
    size_t n[DRIFT_WL_COUNT];
} drift_comparison_details;

/* Loads and compares the two runs and, when details is not NULL, what
 * format fmt shows of their flips (drift_comparison_details_load's), in
 * one read transaction, each answer read once: the baseline answers that
 * flip risk reads (drift_compare_runs) serve the details too. On error
 * *out is NULL and *details empty. Errors as drift_compare_runs, then as
 * drift_comparison_details_load. */
DRIFT_API drift_status drift_comparison_load(drift_store *st, const char *baseline_label, const char *target_label,
                                             const drift_compare_opts *opts, drift_format fmt,
                                             drift_comparison **out, drift_comparison_details *details,
                                             drift_error *err);

/* Reads from the store what format fmt shows of c's flips (workloads with
 * pairs only), in one read transaction: JSON every flip's divergence
 * (drift_flip_divergences); text, markdown, github and html the divergence of the first
 * DRIFT_REPORT_LISTED_FLIPS per workload (drift_flip_divergence) and the
 * answers of the first DRIFT_REPORT_QUOTED_FLIPS that are not identical;
 * JUnit nothing. A flip whose answers cannot be read gets div.error; an
 * error is returned (and *out left empty) only when JSON's batch read
 * fails as a whole or memory runs out. */
DRIFT_API drift_status drift_comparison_details_load(drift_store *st, const drift_comparison *c, drift_format fmt,
                                                     drift_comparison_details *out, drift_error *err);
/* Frees what d holds and leaves it empty (d itself is the caller's). */
DRIFT_API void drift_comparison_details_clear(drift_comparison_details *d);

/* Renders c in fmt (see compare_render.c for each format's layout). d may
 * be NULL (no divergences, diffs or excerpts: the contract's fields only);
 * details beyond d->n[k] are rendered without. *out is malloc'd. */
DRIFT_API drift_status drift_comparison_render(const drift_comparison *c, const drift_comparison_details *d,
                                               drift_format fmt, char **out, drift_error *err);

/* GitHub Actions: in *out, one workflow-command annotation per finding
 * (::error for a workload over its budget; ::warning for one within it
 * whose 95% CI reaches over it, for pairs left out with errors, for code
 * run under isolation weaker than bubblewrap), each one line with labels
 * and prompt ids escaped as workflow commands require, then the Markdown
 * summary (drift_comparison_render's markdown) fenced by ::stop-commands::
 * so that none of its lines is run as a command. When summary is not
 * NULL, *summary is that Markdown alone, for $GITHUB_STEP_SUMMARY. d as
 * for drift_comparison_render. Both strings malloc'd; on error both NULL.
 * drift_comparison_render with DRIFT_FORMAT_GITHUB gives the same *out. */
DRIFT_API drift_status drift_github_render(const drift_comparison *c, const drift_comparison_details *d, char **out,
                                           char **summary, drift_error *err);

/* Renders a sequential replay r of c (drift_compare_sequential) in text,
 * json or markdown (junit: DRIFT_ERR_INVALID). *out is malloc'd. */
DRIFT_API drift_status drift_seq_render(const drift_comparison *c, const drift_seq_result *r, drift_format fmt,
                                        char **out, drift_error *err);

/* drift_comparison_details_load from st (when st is not NULL) followed by
 * drift_comparison_render. Returns a malloc'd string in *out. */
DRIFT_API drift_status drift_report_comparison(const drift_comparison *c, drift_store *st, drift_format fmt,
                                               char **out, drift_error *err);

/* ----------------------------------------------------------------- ANOVA */

/* What `driftbench anova` prints. */
typedef struct drift_anova_doc {
    const char *table;                        /* the flip table's file name, as given */
    const char *formula;                      /* the formula used */
    const drift_anova_table *const *tables;   /* (n_tables,) in the order shown */
    size_t n_tables;
    const drift_anova_table *type3;           /* our Type III table beside the artifact's; NULL = no
                                               * artifact section */
    const drift_anova_artifact_row *artifact; /* (n_artifact,) */
    size_t n_artifact;
} drift_anova_doc;

/* Text: each table (type, stratum, formula, fit, then one row per term
 * with "-" for NaN) and the artifact's table beside ours. JSON: {table,
 * formula, [artifact_type3, artifact_note], tables}, NaN as null. Other
 * formats are DRIFT_ERR_INVALID. *out is malloc'd. */
DRIFT_API drift_status drift_anova_render(const drift_anova_doc *doc, drift_format fmt, char **out,
                                          drift_error *err);

/* The ANOVA block of the matrix summary (the lab's text): each computed
 * type of a->anova[] compactly, "not computable" with the reason for a
 * failed one, one sentence when the table is too small. */
DRIFT_API drift_status drift_anova_summary_render(const drift_table_analyses *a, char **out, drift_error *err);

/* ------------------------------------------------------------------- PRI */

/* `driftbench pri eval`: text (tables of every evaluation, ablations, the
 * first 15 features by gain, elapsed time) or JSON (every figure, NaN and
 * infinities as null). table names the input; tuned says whether the
 * hyper-parameters came from inner CV. */
DRIFT_API drift_status drift_pri_eval_render(const drift_pri_eval *e, const char *table, int tuned,
                                             double elapsed_ms, drift_format fmt, char **out, drift_error *err);

/* `driftbench pri predict`: the configuration q (workload included), the
 * baseline it is compared with (model .. framework; workload unused) and
 * the prediction, as text lines or JSON (rates as fractions). */
DRIFT_API drift_status drift_pri_prediction_render(const drift_pri_query *q, const drift_pri_query *baseline,
                                                   const drift_pri_prediction *r, drift_format fmt, char **out,
                                                   drift_error *err);

/* The 5-fold CV result as one sentence without a final stop, the same in
 * every report ("5-fold CV R^2 = 0.512 +- 0.101", and how many folds had no
 * R^2 when some had a constant flip rate); r2 and pm spell R^2 and +- for
 * the medium (text or HTML entities). NULL when out of memory; free() it. */
DRIFT_API char *drift_pri_cv_summary(const drift_pri_eval *e, const char *r2, const char *pm);

/* One held-out R^2 as every report says it (issue 36), plain text:
 *   "0.421 [0.103, 0.611], ceiling 0.803"                       it can say
 *   "cannot say: <why>; <what size would say it>"               it cannot
 * e.g. "cannot say: no held-out row flipped (0 of 1800 comparisons); ..." or
 * "cannot say: the rows vary no more than binomial noise (ceiling -0.12);
 * rows spread like the table's (sd 1.30 points) need about 420 comparisons
 * each for a ceiling of 0.5 (these have 150)". decimals: of the figures.
 * malloc'd, free() it; NULL when out of memory. */
DRIFT_API char *drift_pri_holdout_text(const drift_pri_holdout *h, int decimals);

/* The PRI block of the matrix summary (the lab's text): random split, CV,
 * ablations, held-out levels, the top five features; one sentence when the
 * table is too small or the evaluation failed; "" when none was asked. */
DRIFT_API drift_status drift_pri_summary_render(const drift_table_analyses *a, char **out, drift_error *err);

/* --------------------------------------------------------------- monitor */

/* `driftbench monitor`: the four detectors of rep on the embeddings d
 * describes, beside the flips of cmp per workload and the verdict, as text
 * or JSON. baseline and target are the two runs' labels. */
DRIFT_API drift_status drift_monitor_render(const drift_monitor_data *d, const drift_monitor_report *rep,
                                            const drift_comparison *cmp, const char *baseline, const char *target,
                                            drift_format fmt, char **out, drift_error *err);

/* ------------------------------------------------------------ flip table */

/* The flip table as text grouped by workload (configuration, the four
 * fixed dimensions, rate, 95% CI, flips/n), each group after a blank line;
 * one line when the table has no row. *out is malloc'd. */
DRIFT_API drift_status drift_table_render_text(const drift_table *t, char **out, drift_error *err);

/* ------------------------------------------------------------------- lab */

/* The failed requests of a store (drift_store_count_outcomes): one
 * sentence per workload with failures ("math: 3 of 12 requests failed
 * (e.g. "..."): failed requests are never pairs. "), each ending in a
 * space; "" when no request failed. *out is malloc'd. */
DRIFT_API drift_status drift_store_outcomes_render(const drift_store_outcomes *o, char **out, drift_error *err);


/* ----------------------------------------------------------- lab summary */

/* The stochastic leg's figures as the summary reads them. Rates are
 * fractions (0..1); any figure may be NAN = not computed (then reason
 * says why). drift_lab_report_summary_render fills it from a
 * drift_lab_stochastic (lab_result.h). */
typedef struct drift_lab_summary_stochastic {
    const char *what;          /* the pair and workload, e.g. "m f32 -> int4, math"; NULL = unnamed */
    long n_prompts;            /* prompts of the leg (0 = unknown) */
    int replicates;            /* samples per prompt and stack (0 = unknown) */
    double temperature;        /* NAN = unknown */
    double stochastic_rate;    /* expected flip rate between a sample of each stack */
    double null_rate;          /* the same between two seeds of the baseline stack (the null) */
    double beyond_rate;        /* drift beyond the null: stochastic_rate - null_rate ... */
    double beyond_lo, beyond_hi; /* ... with its 95% interval */
    double det_rate;           /* deterministic (temperature 0) flip rate of the same pair and prompts */
    double ratio;              /* beyond_rate / det_rate: the figure set against the paper's 0.23x ... */
    double ratio_lo, ratio_hi; /* ... with its 95% interval */
    const char *reason;        /* why figures are NAN; NULL or "" when none is */
} drift_lab_summary_stochastic;

/* What the summary is computed from. */
typedef struct drift_lab_summary_in {
    const drift_table *table;                       /* the flip table (required; may have no rows) */
    const drift_table_analyses *analyses;           /* drift_table_analyze of table; NULL = not computed */
    const drift_lab_summary_stochastic *stochastic; /* NULL = the stochastic leg did not run */
    int test_fixtures;                              /* 1: the models are the test fixtures (answers are noise) */
} drift_lab_summary_in;

/* The summary at the top of the lab's report, pure (reads nothing but in):
 *  - which models: small fixture models calibrated to behave like real
 *    ones, so what they show is about the tool, not about 8B models (or,
 *    with test_fixtures, that the answers are noise);
 *  - the flip rate per workload pooled over the table's configurations
 *    (flips / pairs) with a 95% Wilson interval that counts each prompt
 *    once (the configurations share their prompts: see lab_summary.c),
 *    beside the paper's mean (math 16.74%, safety 7.97%, long_context
 *    1.55%, code 0.09%; chat: its SDR figure 12.4%), and whether each
 *    interval is above, below or around the paper's figure, "too few to
 *    say" (it holds both 0 and the paper's figure) or "too wide to say"
 *    (it holds the paper's figure and also half or double it);
 *  - whether the paper's order math > safety > long_context > code holds
 *    (every pair's intervals apart in that order), does not hold (some
 *    pair's intervals apart the other way) or cannot be said;
 *  - which axis moves answers most: the ANOVA term with the largest
 *    eta^2 (type II, else III, else I), and the largest of the stack's
 *    axes, with F and the BH-adjusted p;
 *  - how predictable each axis is: the PRI's held-out R^2 per level,
 *    grouped by dimension, beside the paper's held-out figure; "no
 *    variance" (and "no flips" when every row of the level has none)
 *    where R^2 is not defined, "too few rows" under two test rows;
 *  - the stochastic ratio with its interval against the paper's 0.23x.
 * text: plain text (lines of at most ~110 columns); html: a fragment
 * (<section id="summary">, an inline SVG bar chart of the rates with
 * interval whiskers and the paper's marks, a table and the same sentences;
 * no script, no external asset; every string from the table escaped).
 * Either output may be NULL (not wanted); each is malloc'd. No output
 * contains "nan" or "inf" for any input. DRIFT_ERR_INVALID when in or
 * in->table is NULL; DRIFT_ERR_NOMEM. */
DRIFT_API drift_status drift_lab_summary_render(const drift_lab_summary_in *in, char **text, char **html,
                                                drift_error *err);

/* The paper's mean flip rate of a workload over its 105 configurations
 * (percent; chat: its SDR figure); NAN for an unknown workload. */
DRIFT_API double drift_lab_summary_paper_rate(drift_workload w);

#ifdef __cplusplus
}
#endif
#endif
