/* report_html.h - the matrix report as one self-contained HTML file: inline
 * CSS and SVG only (no scripts, fonts or images from anywhere), readable
 * offline and printable. Sections: summary, flip-rate heatmap (configuration
 * x workload, with Wilson CIs), direction of flips, taxonomy, ANOVA and PRI
 * (when the table has enough rows), and the flipped prompts with both
 * answers side by side and the character where they part. */
#ifndef DRIFTBENCH_REPORT_HTML_H
#define DRIFTBENCH_REPORT_HTML_H

#include <stddef.h>

#include "driftbench/analysis.h"
#include "driftbench/store.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct drift_html_opts {
    const char *title;         /* default "DriftBench report" */
    const char *baseline;      /* baseline label, "{dim}" placeholders allowed (see drift_matrix_flip_table) */
    size_t max_flipped;        /* flipped prompts shown per configuration x workload; default 5 */
    const char *note;          /* optional paragraph shown under the title (plain text, escaped) */
    int analysis;              /* 1 (default): ANOVA and PRI sections when the table is large enough */
    const drift_pri_eval *pri; /* PRI evaluation already computed on the same table (not freed), or NULL */
} drift_html_opts;

DRIFT_API void drift_html_opts_default(drift_html_opts *o);

/* Renders the report of every run in st against its baseline. *out is a
 * malloc'd NUL-terminated HTML document. Every text from the store is
 * escaped (and invalid UTF-8 replaced), so answers cannot inject markup. */
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
