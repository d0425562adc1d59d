/* html_internal.h - what the HTML renderers of src/report/ share (not
 * exported; report_html.h is the public side):
 *
 *   html.c          the pages (drift_html_render, drift_comparison_html_render):
 *                   the frame (head, style, table of contents, foot) and
 *                   the sections of the matrix page
 *   html_compare.c  the lead of a comparison's page: the verdict with the
 *                   budgets and the rule, what was compared, each
 *                   workload's decision drawn against its budget
 *   html_diff.c     the word-level diff of two answers, as marked-up HTML
 *   html_text.c     escaping and the section heading, which the three
 *                   above write through (the bottom: it calls none of them)
 *
 * Every string that comes from a store goes through html_span / html_text
 * (escape + UTF-8 repair), each with a byte budget (html_text's, the
 * answers' HTML_DIFF_MAX_BYTES, the prompt's 300): a page's size does not
 * grow with its answers; sentences from decision_render.c hold only
 * numbers, workload names and fixed words and go in as they are. */
#ifndef DRIFT_HTML_INTERNAL_H
#define DRIFT_HTML_INTERNAL_H

#include <stddef.h>

#include "driftbench/compare.h"
#include "driftbench/report.h"
#include "driftbench/report_html.h"
#include "util/util.h"

/* Appends len bytes at p, escaped by the sanitiser's HTML dialect
 * (src/util/sanitize.h: &, <, >, ", ' as entities; control bytes other
 * than \n, \r and \t, and invalid UTF-8, as U+FFFD; C1 and bidi
 * controls, line separators and noncharacters as visible \uXXXX; a
 * runner command's ':' or '[' as an entity, shown the same). Unbounded:
 * callers bound len. */
void html_span(util_buf *b, const char *p, size_t len);
/* A NUL-terminated string (NULL appends nothing), html_span-escaped: at
 * most max_bytes of it (0: nothing), cut before a UTF-8 lead byte. */
void html_text_n(util_buf *b, const char *s, size_t max_bytes);
/* html_text_n with HTML_TEXT_MAX_BYTES, "&#8230;" marking a cut: every
 * label, id, name, value and message from a store, so no string makes a
 * page of its own size. */
#define HTML_TEXT_MAX_BYTES 4096
#define HTML_NOTE_MAX_BYTES 16384   /* the caller's note under the title */
void html_text(util_buf *b, const char *s);

/* The page's table of contents: every <h2> a section opens with html_h2,
 * in page order. ids and titles are fixed strings (not escaped). */
#define HTML_TOC_MAX 24
typedef struct html_toc {
    const char *id[HTML_TOC_MAX];
    const char *title[HTML_TOC_MAX];
    int n;
} html_toc;
/* Appends <h2 id="ID">TITLE</h2> and records it in t (may be NULL). */
void html_h2(util_buf *b, html_toc *t, const char *id, const char *title);

/* ---- a comparison's lead (html_compare.c) ---- */
/* CSS class of a decision: "d-deploy", "d-block", "d-inconclusive",
 * "d-error", "d-notgated". */
const char *html_decision_class(drift_decision d);
/* <section id="verdict">: the decision in one word, the verdict sentence
 * (report_verdict_summary) with what its exit code means, the budgets of
 * the present workloads, the rule and the error rates (report_rule_text,
 * report_error_rate_text). */
void html_verdict_section(util_buf *b, html_toc *t, const drift_comparison *c);
/* <section id="compared">: both runs side by side (label, target with any
 * password redacted, configuration dimensions, suites, decoding, prompt
 * templates, the version that ran each, when), values that differ
 * marked; the DriftBench version and date of the page (generated). */
void html_compared_section(util_buf *b, html_toc *t, const drift_comparison *c, const char *generated);
/* <section id="decisions">: per present workload its decision, its exact
 * interval drawn against its budget (inline SVG) and the decision's
 * sentence (report_decision_note). */
void html_decisions_section(util_buf *b, html_toc *t, const drift_comparison *c);
/* The smallest of 1, 2, 2.5, 5 x 10^k at or above v, at most 1 (an
 * axis's end); 0.01 for v <= 0. */
double html_round_up(double v);
/* spec with the password of a URL's user:PASS@ and the values of secret
 * query parameters (password, token, key, ...) replaced by "***"; not
 * escaped. malloc'd; NULL when out of memory. */
char *html_redact(const char *spec);

/* ---- word diff (html_diff.c) ---- */
#define HTML_DIFF_MAX_WORDS 2000   /* words per answer compared after their common start */
#define HTML_DIFF_MAX_BYTES 6000   /* bytes of each answer shown */
#define HTML_DIFF_CONTEXT 30       /* common words kept beside a change when a common run is elided */

typedef struct html_diff_stats {
    long removed, added;           /* words only in a, only in b (within the compared part) */
    int capped;                    /* the answers were longer than HTML_DIFF_MAX_WORDS past their common
                                    * start: the rest is shown unmarked */
} html_diff_stats;

/* The word diff of a -> b (an LCS over whitespace-separated words):
 * a_html gets a with the words b lacks in <del>, b_html gets b with the
 * words a lacks in <ins>; common runs of more than 2 x HTML_DIFF_CONTEXT
 * words at the start or end are shortened to the context next to the
 * change ("[N words in common]"), each side is cut after about
 * HTML_DIFF_MAX_BYTES bytes. Everything escaped. st may be NULL. Returns
 * 0, -1 when out of memory. */
int html_word_diff(const char *a, const char *b, util_buf *a_html, util_buf *b_html, html_diff_stats *st);

/* Escaping and the answers' diff on their own, the tests' way in (html_text.c,
 * html_diff.c); lab_summary.c's page escapes with html_escape too. */
/* Appends s to the HTML-escaped form (&, <, >, ", ' escaped; control bytes
 * other than \n, \r and \t and invalid UTF-8 become U+FFFD). Returns a malloc'd
 * string. */
char *html_escape(const char *s);

/* Index (in bytes) of the first character where a and b differ; the length
 * of the shorter one when one is a prefix of the other; -1 when equal. */
long html_first_difference(const char *a, const char *b);

/* The word-level diff the page shows of two answers (an LCS over
 * whitespace-separated words, at most 2,000 words of each past their
 * common start compared, about 6,000 bytes of each shown): *a_html is a
 * escaped with the words b lacks in <del>, *b_html is b with the words a
 * lacks in <ins>; long common runs at the start and end are shortened to
 * the words next to the change. removed/added (may be NULL) get the
 * counts of marked words. Both malloc'd. */
drift_status html_word_diff_text(const char *a, const char *b, char **a_html, char **b_html, long *removed,
                                  long *added, drift_error *err);

#endif
