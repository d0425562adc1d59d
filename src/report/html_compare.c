/* html_compare.c - the lead of a comparison's HTML page (html_internal.h):
 * the sections html.c's drift_comparison_html_render (report_html.h) opens
 * one comparison's page with, the page `driftbench report` makes of a store
 * holding one configuration besides its baseline.
 *
 * The page leads with the decision, in the words of decision_render.c, so
 * it says what `driftbench compare` prints:
 *
 *   verdict    the decision in one word, report_verdict_summary's sentence
 *              with what its exit code means, the budgets of the present
 *              workloads, report_rule_text, report_error_rate_text
 *   compared   both runs side by side: label, target (a URL's password
 *              and secret query values redacted), configuration
 *              dimensions, suites, decoding parameters, prompt templates,
 *              the version that ran each and when; rows whose values
 *              differ marked; the DriftBench version and date of the page
 *   decisions  per present workload: its decision, an inline SVG of its
 *              exact 95% interval (bar), its flip rate (dot) and its
 *              budget (vertical line) on a linear scale from 0 to a round
 *              number holding the interval and the budget, and
 *              report_decision_note's sentence; no budget line and "not
 *              gated" for a workload without a budget, no chart for one
 *              without a counted pair
 * Store strings (labels, specs, configuration values) are escaped; the
 * sentences of decision_render.c hold only numbers and fixed words. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "report/html_internal.h"
#include "report/report_internal.h"

const char *html_decision_class(drift_decision d) {
    switch (d) {
    case DRIFT_DECISION_DEPLOY: return "d-deploy";
    case DRIFT_DECISION_BLOCK: return "d-block";
    case DRIFT_DECISION_INCONCLUSIVE: return "d-inconclusive";
    case DRIFT_DECISION_NO_EVIDENCE: return "d-error";
    default: return "d-notgated";
    }
}

/* What the comparison's exit code means, after "exit N: ". */
static const char *exit_meaning(drift_decision d) {
    switch (d) {
    case DRIFT_DECISION_DEPLOY: return "deploy: every gated workload's flip rate is shown to be within its budget";
    case DRIFT_DECISION_BLOCK:
        return "block: a gated workload's flip rate is over its budget, or too many of its pairs were left out";
    case DRIFT_DECISION_INCONCLUSIVE:
        return "inconclusive: a flip rate's interval straddles its budget; more prompts are needed to decide";
    case DRIFT_DECISION_NO_EVIDENCE:
        return "error: a gated workload has no scored pair, so there is no verdict (never a pass)";
    default: return "nothing was gated: no workload has a budget";
    }
}

static void pct(char *out, size_t cap, double f) {
    if (!isfinite(f)) snprintf(out, cap, "-");
    else snprintf(out, cap, "%.2f%%", 100.0 * f);
}

void html_verdict_section(util_buf *b, html_toc *t, const drift_comparison *c) {
    buf_printf(b, "<section class=\"verdict %s\">\n", html_decision_class(c->decision));
    html_h2(b, t, "verdict", "Verdict");
    buf_printf(b, "<div class=\"vword\">%s</div>\n<p class=\"vsum\">", report_decision_word(c->decision));
    report_verdict_summary(b, c);
    buf_printf(b, "</p>\n<p class=\"vexit\">Exit %d: %s. The gate's exit codes (driftbench compare, measure): 0 deploy "
                  "(or nothing gated), 1 block, 2 error, 3 inconclusive.</p>\n",
               drift_decision_exit_code(c->decision), exit_meaning(c->decision));
    buf_puts(b, "<table class=\"gate\">\n<tr><th>budgets</th><td>");
    int first = 1;
    for (int k = 0; k < DRIFT_WL_COUNT; k++) {
        if (!c->present[k]) continue;
        const drift_wl_result *w = &c->wl[k];
        char bud[16];
        pct(bud, sizeof bud, w->budget);
        buf_printf(b, "%s%s %s", first ? "" : " &#183; ", drift_workload_name((drift_workload)k),
                   w->budget < 0 ? "none (not gated)" : bud);
        first = 0;
    }
    if (first) buf_puts(b, "no workload has pairs");
    buf_puts(b, " <span class=\"sub\">(flip rate a workload may reach; --budget W=PCT)</span></td></tr>\n"
                "<tr><th>rule</th><td>");
    report_rule_text(b, c);
    buf_puts(b, "</td></tr>\n<tr><th>error rates</th><td>");
    report_error_rate_text(b, c);
    buf_puts(b, "</td></tr>\n</table>\n</section>\n");
}

/* ---- what was compared ---- */

static int secret_key(const char *k, size_t n) {
    static const char *const keys[] = {"password", "passwd", "pass", "pwd", "secret", "token", "access_token",
                                       "api_key", "apikey", "api-key", "key", "auth", "authorization"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (strlen(keys[i]) == n && !strncasecmp(k, keys[i], n)) return 1;
    return 0;
}

char *html_redact(const char *spec) {
    if (!spec) return util_strdup("");
    util_buf b = {0};
    const char *p = spec, *scheme = strstr(spec, "://");
    if (scheme) { /* scheme://user:PASS@host... */
        const char *auth = scheme + 3, *end = auth + strcspn(auth, "/?#"), *at = NULL;
        for (const char *q = auth; q < end; q++)
            if (*q == '@') at = q;
        const char *colon = at ? memchr(auth, ':', (size_t)(at - auth)) : NULL;
        if (colon) {
            buf_append(&b, spec, (size_t)(colon + 1 - spec));
            buf_puts(&b, "***");
            p = at;
        }
    }
    const char *q = strchr(p, '?');
    if (!q) {
        buf_puts(&b, p);
    } else { /* ?k=v&k=v: the values of secret keys */
        buf_append(&b, p, (size_t)(q + 1 - p));
        for (const char *s = q + 1; *s;) {
            size_t len = strcspn(s, "&#");
            const char *eq = memchr(s, '=', len);
            if (eq && secret_key(s, (size_t)(eq - s))) {
                buf_append(&b, s, (size_t)(eq + 1 - s));
                buf_puts(&b, "***");
            } else {
                buf_append(&b, s, len);
            }
            s += len;
            if (*s == '#') {
                buf_puts(&b, s);
                break;
            }
            if (*s == '&') buf_append(&b, s++, 1);
        }
    }
    return b.data ? buf_steal(&b) : util_strdup("");
}

/* A JSON value as text: a string as it is, anything else compact JSON;
 * NULL (malloc'd "") for an absent value. */
static char *json_text(json_t *v) {
    if (!v) return NULL;
    if (json_is_string(v)) return util_strdup(json_string_value(v));
    return json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
}

/* One row: name, both values (NULL shown as a dash), marked when they differ. */
static void compared_row(util_buf *b, const char *name, const char *base, const char *targ, int redact) {
    int differ = strcmp(base ? base : "", targ ? targ : "") != 0 || (!base) != (!targ);
    buf_printf(b, "<tr%s><th>", differ ? " class=\"differs\"" : "");
    html_text(b, name);
    buf_puts(b, "</th>");
    const char *v[2] = {base, targ};
    for (int s = 0; s < 2; s++) {
        buf_puts(b, "<td>");
        if (!v[s]) {
            buf_puts(b, "<span class=\"sub\">&#8212;</span>");
        } else if (redact) {
            char *r = html_redact(v[s]);
            html_text(b, r ? r : "");
            free(r);
        } else {
            html_text(b, v[s]);
        }
        buf_puts(b, "</td>");
    }
    buf_puts(b, "</tr>\n");
}

static json_t *parse_object(const char *s) {
    json_error_t je;
    json_t *o = s ? json_loads(s, 0, &je) : NULL;
    if (json_is_object(o)) return o;
    json_decref(o);
    return NULL;
}

/* A row per key of either object (the baseline's keys first, in its
 * order), prefix before the key's name; raw text rows when a record is not
 * a JSON object. */
static void object_rows(util_buf *b, const char *what, const char *base_json, const char *targ_json, const char *prefix) {
    json_t *o[2] = {parse_object(base_json), parse_object(targ_json)};
    if ((base_json && !o[0]) || (targ_json && !o[1])) {
        compared_row(b, what, base_json, targ_json, 0);
    } else {
        for (int s = 0; s < 2; s++) {
            const char *k;
            json_t *v;
            json_object_foreach(o[s], k, v) {
                if (s == 1 && json_object_get(o[0], k)) continue; /* shown with the baseline's keys */
                char *x = json_text(json_object_get(o[0], k)), *y = json_text(json_object_get(o[1], k));
                util_buf name = {0};
                buf_printf(&name, "%s%s", prefix, k);
                compared_row(b, name.data ? name.data : k, x, y, 0);
                buf_free(&name);
                free(x);
                free(y);
            }
        }
    }
    json_decref(o[0]);
    json_decref(o[1]);
}

/* The suites of a run: its JSON array as "a, b", each redacted. */
static char *suites_text(const char *json) {
    if (!json) return NULL;
    json_error_t je;
    json_t *a = json_loads(json, 0, &je);
    if (!json_is_array(a)) {
        json_decref(a);
        return util_strdup(json);
    }
    util_buf b = {0};
    size_t i;
    json_t *v;
    json_array_foreach(a, i, v) {
        char *s = json_text(v), *r = html_redact(s);
        buf_printf(&b, "%s%s", i ? ", " : "", r ? r : "");
        free(s);
        free(r);
    }
    json_decref(a);
    return b.data ? buf_steal(&b) : util_strdup("");
}

void html_compared_section(util_buf *b, html_toc *t, const drift_comparison *c, const char *generated) {
    const drift_run_info *x = &c->baseline, *y = &c->target;
    buf_puts(b, "<section>\n");
    html_h2(b, t, "compared", "What was compared");
    buf_puts(b, "<div class=\"card\">\n<p class=\"sub\">The two runs as the store records them; "
                "<span class=\"differs\">marked rows</span> differ.</p>\n"
                "<table class=\"compared\"><tr><th></th><th>baseline</th><th>target</th></tr>\n");
    compared_row(b, "run label", x->label, y->label, 0);
    compared_row(b, "target", x->target, y->target, 1);
    buf_puts(b, "<tr class=\"grp\"><th colspan=\"3\">configuration dimensions</th></tr>\n");
    object_rows(b, "configuration", x->config_json, y->config_json, "");
    buf_puts(b, "<tr class=\"grp\"><th colspan=\"3\">prompts and decoding</th></tr>\n");
    char *sx = suites_text(x->suites_json), *sy = suites_text(y->suites_json);
    compared_row(b, "suites", sx, sy, 0);
    free(sx);
    free(sy);
    object_rows(b, "decoding", x->decoding_json, y->decoding_json, "decoding: ");
    object_rows(b, "prompt templates", x->templates_json, y->templates_json, "template: ");
    buf_puts(b, "<tr class=\"grp\"><th colspan=\"3\">runs</th></tr>\n");
    compared_row(b, "run by", x->tool_version, y->tool_version, 0);
    compared_row(b, "started", x->started_at, y->started_at, 0);
    compared_row(b, "finished", x->finished_at, y->finished_at, 0);
    buf_puts(b, "</table>\n<p class=\"sub\">This page: driftbench ");
    html_text(b, drift_version());
    buf_puts(b, ", made ");
    html_text(b, generated);
    buf_puts(b, ".</p>\n</div>\n</section>\n");
}

/* ---- each workload's decision against its budget ---- */

/* The smallest of 1, 2, 2.5, 5 x 10^k at or above v (v > 0), at most 1. */
double html_round_up(double v) {
    if (!(v > 0)) return 0.01;
    double e = pow(10.0, floor(log10(v)));
    static const double steps[] = {1, 2, 2.5, 5, 10};
    double r = 10 * e;
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
        if (steps[i] * e >= v * (1 - 1e-12)) {
            r = steps[i] * e;
            break;
        }
    return r > 1 ? 1 : r;
}

static const char *decision_colour(drift_decision d) {
    switch (d) {
    case DRIFT_DECISION_DEPLOY: return "#1a9850";
    case DRIFT_DECISION_BLOCK: return "#d73027";
    case DRIFT_DECISION_INCONCLUSIVE: return "#e08214";
    case DRIFT_DECISION_NO_EVIDENCE: return "#7f0000";
    default: return "#8a93a3";
    }
}

/* The interval bar, the rate dot and the budget line of w. */
enum { IV_W = 300, IV_H = 46, IV_L = 12, IV_PW = 270 };

static void interval_svg(util_buf *b, const drift_wl_result *w) {
    if (w->n <= 0) {
        buf_puts(b, "<span class=\"sub\">no counted pair: nothing to draw</span>");
        return;
    }
    int gated = w->budget >= 0;
    double top = w->decide_ci[1];
    if (gated && w->budget > top) top = w->budget;
    double xmax = html_round_up(top * 1.05);
    const char *col = decision_colour(w->decision);
#define IVX(v) (IV_L + ((v) > xmax ? xmax : (v)) / xmax * IV_PW)
    char fr[16], lo[16], hi[16], bud[16], mx[16];
    pct(fr, sizeof fr, w->flip_rate);
    pct(lo, sizeof lo, w->decide_ci[0]);
    pct(hi, sizeof hi, w->decide_ci[1]);
    pct(bud, sizeof bud, w->budget);
    snprintf(mx, sizeof mx, "%g%%", 100 * xmax);
    buf_printf(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" role=\"img\" "
                  "aria-label=\"%s: flip rate %s, exact 95%% interval %s to %s%s%s\">",
               IV_W, IV_H, drift_workload_name(w->workload), fr, lo, hi, gated ? ", budget " : ", no budget",
               gated ? bud : "");
    buf_printf(b, "<line x1=\"%d\" y1=\"32\" x2=\"%d\" y2=\"32\" stroke=\"#b8bec8\"/>"
                  "<line x1=\"%d\" y1=\"29\" x2=\"%d\" y2=\"35\" stroke=\"#b8bec8\"/>"
                  "<line x1=\"%d\" y1=\"29\" x2=\"%d\" y2=\"35\" stroke=\"#b8bec8\"/>",
               IV_L, IV_L + IV_PW, IV_L, IV_L, IV_L + IV_PW, IV_L + IV_PW);
    double x0 = IVX(w->decide_ci[0]), x1 = IVX(w->decide_ci[1]);
    buf_printf(b, "<rect x=\"%.1f\" y=\"18\" width=\"%.1f\" height=\"9\" rx=\"2\" fill=\"%s\" fill-opacity=\"0.35\" "
                  "stroke=\"%s\"><title>exact 95%% interval %s to %s</title></rect>",
               x0, x1 - x0 < 1 ? 1 : x1 - x0, col, col, lo, hi);
    buf_printf(b, "<circle cx=\"%.1f\" cy=\"22.5\" r=\"3.5\" fill=\"%s\"><title>flip rate %s (%ld of %ld)</title>"
                  "</circle>",
               IVX(w->flip_rate), col, fr, w->flips, w->n);
    if (gated) {
        double xb = IVX(w->budget);
        buf_printf(b, "<line x1=\"%.1f\" y1=\"12\" x2=\"%.1f\" y2=\"35\" stroke=\"#1d2330\" stroke-width=\"1.5\" "
                      "stroke-dasharray=\"3,2\"><title>budget %s</title></line>"
                      "<text x=\"%.1f\" y=\"10\" font-size=\"9\" fill=\"#1d2330\" text-anchor=\"%s\">budget %s</text>",
                   xb, xb, bud, xb, xb > IV_L + IV_PW * 0.8 ? "end" : xb < IV_L + IV_PW * 0.2 ? "start" : "middle",
                   bud);
    }
    buf_printf(b, "<text x=\"%d\" y=\"44\" font-size=\"9\" fill=\"#667\" text-anchor=\"middle\">0</text>"
                  "<text x=\"%d\" y=\"44\" font-size=\"9\" fill=\"#667\" text-anchor=\"end\">%s</text></svg>",
               IV_L, IV_L + IV_PW, mx);
#undef IVX
}

void html_decisions_section(util_buf *b, html_toc *t, const drift_comparison *c) {
    buf_puts(b, "<section>\n");
    html_h2(b, t, "decisions", "Decision per workload");
    buf_puts(b, "<div class=\"card\">\n<p class=\"sub\">Each workload's flip rate (dot) with the exact 95% interval "
                "the decision is taken on (bar) against its budget (dashed line), on a scale from 0 that holds "
                "both.</p>\n<table class=\"decisions\"><tr><th>workload</th><th>decision</th>"
                "<th>interval against the budget</th><th>why</th></tr>\n");
    int any = 0;
    for (int k = 0; k < DRIFT_WL_COUNT; k++) {
        if (!c->present[k]) continue;
        const drift_wl_result *w = &c->wl[k];
        buf_printf(b, "<tr><td>%s</td><td><span class=\"dword %s\">%s</span></td><td>",
                   drift_workload_name((drift_workload)k), html_decision_class(w->decision),
                   w->decision == DRIFT_DECISION_NOT_GATED ? "NOT GATED" : report_decision_word(w->decision));
        interval_svg(b, w);
        buf_puts(b, "</td><td>");
        report_decision_note(b, c, w);
        buf_puts(b, "</td></tr>\n");
        any = 1;
    }
    if (!any) buf_puts(b, "<tr><td colspan=\"4\">No workload has pairs.</td></tr>\n");
    buf_puts(b, "</table>\n</div>\n</section>\n");
}
