/* html.c - the report as one self-contained HTML page, pure.
 *
 * Data: a drift_matrix_report computed beforehand (src/report/load_matrix.c):
 * the flip table, each configuration's comparison against its baseline
 * (decision, directions, taxonomy, flipped prompts), the analyses and the
 * answers of the flipped prompts shown; nothing here reads the store or
 * runs an analysis. The page is built in util_bufs; every string from the
 * store goes through html_span / html_text (html_text.c; the sanitiser's HTML dialect:
 * escaped, UTF-8 repaired, C1 and bidi controls shown as escapes, runner
 * commands broken by entities that show the same) within a byte budget
 * (html_internal.h: a name 4 KB, an answer HTML_DIFF_MAX_BYTES, a prompt
 * 300 bytes; a budget of 0 shows nothing), so the page's size does not
 * follow its answers'; every number goes through printf. Charts are
 * inline SVG with <title> tooltips; no script runs, so the page renders
 * the same in a browser, a mail client or headless Chromium. Every section opens with html_h2, which records it in
 * the table of contents (nav.toc) the page shows when it has three
 * sections or more.
 *
 * The comparison page (r->comparison: one configuration, experiments[0];
 * drift_comparison_html_render makes that report of one comparison):
 *   title -> the verdict (html_compare.c: decision, exit code, budgets,
 *   rule, error rates) -> the caller's fragment and note -> contents ->
 *   what was compared -> each workload's decision against its budget ->
 *   the shared sections (no heatmap: the decisions show its rates) -> one
 *   line: why no ANOVA and PRI -> flipped prompts.
 * The matrix page:
 *   title -> the caller's summary fragment (o->summary_html: the lab's
 *   findings, first) and note -> summary (flips, decisions counted) ->
 *   contents -> heatmap (config x workload: rate, CI, the cell's decision;
 *   a fixed colour scale with breakpoints at 0.5, 1, 2, 5, 10 and 20%, the
 *   same in every report) -> the shared sections -> ANOVA (type II,
 *   factors with >= 2 levels) and PRI (held-out evaluations), or one line
 *   saying why they are absent -> flipped prompts.
 * The shared sections:
 *   direction bars -> taxonomy (with each configuration's decision)
 *   -> code sandbox (which isolation judged the code answers of each run,
 *   when any were judged; weaker than bubblewrap is flagged)
 *   -> flip risk against outcome (a dot per prompt at its risk, flipped or
 *   kept, with AUC and precision@10%; only when a baseline has logprobs)
 *   -> token KL against flip rate (o->kl: a log-scale scatter per
 *   configuration with Spearman's rho; only when asked)
 *   -> stopping curves of sequential measures (section_seq_curve: for runs
 *   whose decoding record carries measure --sequential's "sequential" entry,
 *   the gate is replayed from the stored pairs in the recorded seeded order
 *   with drift_seq_curve - the one computation done here, cheap and the
 *   same as compare --sequential's; the y axis, square-root scaled, holds
 *   the whole interval).
 * Flipped prompts: both answers side by side with a word diff (html_diff.c),
 * or, for a comparison rendered from compare's details, its text diff. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/divergence.h"
#include "driftbench/report.h"
#include "driftbench/report_html.h"
#include "report/html_internal.h"
#include "report/report_internal.h"
#include "suite/workload.h"
#include "util/util.h"

void drift_html_opts_default(drift_html_opts *o) {
    memset(o, 0, sizeof *o);
    o->title = "DriftBench report";
    o->max_flipped = 5;
    o->analysis = 1;
}

typedef drift_report_experiment experiment;

/* ---- page pieces ---- */

static const char css[] =
    "body{font-family:system-ui,-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;margin:0;color:#1d2330;"
    "background:#f6f7f9;line-height:1.45}\n"
    "main{max-width:1180px;margin:0 auto;padding:24px 28px 60px}\n"
    "h1{font-size:26px;margin:8px 0 4px}h2{font-size:19px;margin:34px 0 8px;padding-bottom:4px;"
    "border-bottom:2px solid #dde1e8}h3{font-size:15px;margin:18px 0 6px}\n"
    ".sub{color:#5b6474;font-size:14px}.note{background:#fff6d6;border:1px solid #ecd9a0;padding:8px 12px;"
    "border-radius:6px;font-size:14px}\n"
    ".card{background:#fff;border:1px solid #e2e5ea;border-radius:8px;padding:14px 16px;margin:10px 0;"
    "overflow-x:auto}\n"
    "table{border-collapse:collapse;font-size:13px}th,td{padding:4px 9px;border-bottom:1px solid #eceef2;"
    "text-align:left;vertical-align:top}th{background:#f0f2f5;font-weight:600}td.num{text-align:right;"
    "font-variant-numeric:tabular-nums}\n"
    ".kpis{display:flex;gap:12px;flex-wrap:wrap}.kpi{background:#fff;border:1px solid #e2e5ea;border-radius:8px;"
    "padding:10px 14px;min-width:150px}.kpi b{display:block;font-size:22px}.kpi span{color:#5b6474;font-size:12px}\n"
    ".pair{display:grid;grid-template-columns:1fr 1fr;gap:10px}.ans{background:#fbfbfc;border:1px solid #e6e8ec;"
    "border-radius:6px;padding:8px;white-space:pre-wrap;word-break:break-word;font-family:ui-monospace,"
    "'DejaVu Sans Mono',Menlo,monospace;font-size:12px;max-height:260px;overflow:auto}\n"
    "mark{background:#ffd7d2;color:#7a1206}.c2i{color:#b2182b;font-weight:600}.i2c{color:#1b7837;font-weight:600}"
    ".drift{color:#6a51a3;font-weight:600}\n"
    ".flip{border-top:1px solid #eceef2;padding:10px 0}.meta{font-size:12px;color:#5b6474;margin-bottom:4px}\n"
    "svg text{font-family:system-ui,Helvetica,Arial,sans-serif}\n"
    "del{background:#ffd7d2;color:#7a1206;text-decoration:line-through}ins{background:#d4f2d9;color:#0b4d1c;"
    "text-decoration:none}.gap{color:#8a93a3;font-style:italic}\n"
    "nav.toc{font-size:13px;margin:14px 0 4px;padding:8px 12px;background:#fff;border:1px solid #e2e5ea;"
    "border-radius:8px}nav.toc a{margin-right:14px;color:#2166ac;text-decoration:none}\n"
    ".verdict{background:#fff;border:1px solid #e2e5ea;border-left:8px solid #8a93a3;border-radius:8px;"
    "padding:4px 18px 12px;margin:14px 0}.verdict h2{border:0;margin:10px 0 0;font-size:14px;color:#5b6474;"
    "text-transform:uppercase;letter-spacing:.06em}\n"
    ".vword{font-size:34px;font-weight:700;margin:2px 0}.vsum{font-size:16px;margin:4px 0}"
    ".vexit{font-size:13px;color:#5b6474;margin:4px 0 10px}\n"
    ".verdict.d-deploy{border-left-color:#1a9850}.verdict.d-deploy .vword{color:#1a9850}"
    ".verdict.d-block{border-left-color:#d73027}.verdict.d-block .vword{color:#d73027}"
    ".verdict.d-inconclusive{border-left-color:#e08214}.verdict.d-inconclusive .vword{color:#b35806}"
    ".verdict.d-error{border-left-color:#7f0000}.verdict.d-error .vword{color:#7f0000}\n"
    "table.gate th{background:none;width:110px}table.compared td{word-break:break-all;max-width:480px}"
    "table.compared th{white-space:nowrap}"
    "tr.differs td,tr.differs th,span.differs{background:#fff6d6}tr.grp th{background:#e6e9ee;font-size:12px}\n"
    ".dword{font-weight:700;font-size:12px;padding:1px 6px;border-radius:4px;color:#fff;background:#8a93a3;"
    "white-space:nowrap}.dword.d-deploy{background:#1a9850}.dword.d-block{background:#d73027}"
    ".dword.d-inconclusive{background:#e08214}.dword.d-error{background:#7f0000}\n";

/* The heatmap's fixed colour scale, the same in every report: a flip rate
 * (fraction) falls in the first bin whose upper end holds it; exactly 0 has
 * its own colour. The breakpoints are the default budgets (0.5, 1, 2, 5%)
 * and 10, 20%. */
static const struct heat_bin {
    double upto;       /* upper end (fraction), inclusive */
    const char *label; /* legend */
    const char *fill, *fg;
} heat_bins[] = {
    {0.0, "0", "#eef3f8", "#1d2330"},        {0.005, "&#8804; 0.5%", "#fff5eb", "#1d2330"},
    {0.01, "&#8804; 1%", "#fee6ce", "#1d2330"}, {0.02, "&#8804; 2%", "#fdd0a2", "#1d2330"},
    {0.05, "&#8804; 5%", "#fdae6b", "#1d2330"}, {0.10, "&#8804; 10%", "#f16913", "#ffffff"},
    {0.20, "&#8804; 20%", "#d94801", "#ffffff"}, {1.0, "&gt; 20%", "#8c2d04", "#ffffff"},
};
#define N_HEAT_BINS (sizeof heat_bins / sizeof heat_bins[0])

static const struct heat_bin *heat_bin_of(double rate) {
    for (size_t i = 0; i < N_HEAT_BINS - 1; i++)
        if (rate <= heat_bins[i].upto + 1e-12) return &heat_bins[i];
    return &heat_bins[N_HEAT_BINS - 1];
}

static void section_heatmap(util_buf *b, html_toc *toc, const experiment *e, size_t n, const int *wl_on, int n_wl,
                            char *const *dim_names) {
    const int left = 280, cw = 160, ch = 52, top = 30;
    int width = left + cw * (n_wl ? n_wl : 1) + 10, height = top + ch * (int)n + 44;
    if (width < left + 60 * (int)N_HEAT_BINS + 10) width = left + 60 * (int)N_HEAT_BINS + 10;
    html_h2(b, toc, "heatmap", "Flip rate by configuration and workload");
    buf_puts(b, "<div class=\"card\">\n<p class=\"sub\">Share of paired prompts whose label changed against the "
                "baseline (chat: semantic drift, SDR &gt; threshold); 95% Wilson interval and pairs below, then the "
                "gate's decision against the budget. The colour scale is fixed, the same in every report: "
                "breakpoints at 0.5, 1, 2 and 5% (the default budgets), 10 and 20%.</p>\n");
    buf_printf(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" role=\"img\" "
                  "aria-label=\"flip-rate heatmap\">\n",
               width, height);
    int col = 0;
    for (int w = 0; w < DRIFT_WL_COUNT; w++)
        if (wl_on[w]) {
            buf_printf(b, "<text x=\"%d\" y=\"20\" text-anchor=\"middle\" font-size=\"13\" font-weight=\"600\">%s</text>\n",
                       left + col * cw + cw / 2, drift_workload_name((drift_workload)w));
            col++;
        }
    for (size_t i = 0; i < n; i++) {
        int y = top + (int)i * ch;
        buf_printf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\" font-size=\"12\"><title>", left - 8, y + ch / 2 + 4);
        html_text(b, e[i].label);
        buf_puts(b, " (");
        util_buf dt = {0};
        for (int d = 0; d < DRIFT_DIM_CONFIG_COUNT; d++)
            buf_printf(&dt, "%s%s=%s", d ? ", " : "", dim_names ? dim_names[d] : drift_dim_names[d],
                       e[i].levels[d] ? e[i].levels[d] : "?");
        html_text(b, dt.data);
        buf_free(&dt);
        buf_puts(b, ")</title>");
        html_text_n(b, e[i].label, 44);
        buf_puts(b, "</text>\n");
        col = 0;
        for (int w = 0; w < DRIFT_WL_COUNT; w++) {
            if (!wl_on[w]) continue;
            int x = left + col * cw;
            col++;
            const drift_wl_result *r = &e[i].cmp->wl[w];
            if (!e[i].cmp->present[w] || r->n <= 0) {
                buf_printf(b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#eef0f3\" stroke=\"#fff\"/>"
                              "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"11\" fill=\"#8a93a3\">"
                              "not computable</text>\n",
                           x, y, cw, ch, x + cw / 2, y + 20);
                if (e[i].cmp->present[w])
                    buf_printf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"10\" font-weight=\"700\" "
                                  "fill=\"#7f0000\">%s</text>\n",
                               x + cw / 2, y + 36, report_decision_word(r->decision));
                continue;
            }
            const struct heat_bin *hb = heat_bin_of(r->flip_rate);
            buf_printf(b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\" stroke=\"#fff\"><title>",
                       x, y, cw, ch, hb->fill);
            html_text(b, e[i].label);
            buf_printf(b, " %s: %ld of %ld pairs flipped (%.2f%%, 95%% CI %.2f-%.2f%%); %s</title></rect>\n",
                       drift_workload_name((drift_workload)w), r->flips, r->n, 100 * r->flip_rate, 100 * r->ci95[0],
                       100 * r->ci95[1], r->decision == DRIFT_DECISION_NOT_GATED ? "not gated" : report_decision_word(r->decision));
            buf_printf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"14\" font-weight=\"600\" "
                          "fill=\"%s\">%.1f%%</text>\n",
                       x + cw / 2, y + 17, hb->fg, 100 * r->flip_rate);
            buf_printf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"10\" fill=\"%s\">"
                          "[%.1f, %.1f] n=%ld</text>\n",
                       x + cw / 2, y + 31, hb->fg, 100 * r->ci95[0], 100 * r->ci95[1], r->n);
            if (r->decision == DRIFT_DECISION_NOT_GATED)
                buf_printf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"10\" fill=\"%s\">"
                              "not gated</text>\n", x + cw / 2, y + 45, hb->fg);
            else
                buf_printf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"9\" font-weight=\"700\" "
                              "fill=\"%s\">%s &#183; budget %.2g%%</text>\n",
                           x + cw / 2, y + 45, hb->fg, report_decision_word(r->decision), 100 * r->budget);
        }
    }
    /* legend: the fixed bins */
    int ly = top + ch * (int)n + 12;
    buf_printf(b, "<text x=\"%d\" y=\"%d\" font-size=\"11\" text-anchor=\"end\">flip rate</text>", left - 8, ly + 11);
    for (size_t k = 0; k < N_HEAT_BINS; k++) {
        int lx = left + (int)k * 60;
        buf_printf(b, "<rect x=\"%d\" y=\"%d\" width=\"56\" height=\"14\" fill=\"%s\" stroke=\"#d0d4da\"/>"
                      "<text x=\"%d\" y=\"%d\" font-size=\"10\" text-anchor=\"middle\" fill=\"%s\">%s</text>",
                   lx, ly, heat_bins[k].fill, lx + 28, ly + 11, heat_bins[k].fg, heat_bins[k].label);
    }
    buf_puts(b, "\n</svg>\n</div>\n");
}

static void section_directions(util_buf *b, html_toc *toc, const experiment *e, size_t n, const int *wl_on) {
    html_h2(b, toc, "direction", "Direction of flips");
    /* the legend names each class's directions as the traits table does */
    drift_workload cw = DRIFT_WL_UNKNOWN, sw = DRIFT_WL_UNKNOWN, dw = DRIFT_WL_UNKNOWN;
    for (int w = DRIFT_WL_COUNT - 1; w >= 0; w--) {
        wl_class cls = wl_traits_of((drift_workload)w)->taxonomy;
        if (cls == WL_CLASS_CORRECTNESS) cw = (drift_workload)w;
        else if (cls == WL_CLASS_SAFETY) sw = (drift_workload)w;
        else dw = (drift_workload)w;
    }
    buf_printf(b, "<div class=\"card\">\n"
                  "<p class=\"sub\"><span class=\"c2i\">&#9632; %s</span> (%s: %s) "
                  "&nbsp; <span class=\"i2c\">&#9632; %s</span> (%s: %s) &nbsp; "
                  "<span class=\"drift\">&#9632; %s</span> (%s). Bar length: share of pairs.</p>\n"
                  "<table><tr><th>configuration</th>",
               wl_dir_name(cw, -1, WL_DIR_HTML), drift_workload_name(sw), wl_dir_name(sw, -1, WL_DIR_HTML),
               wl_dir_name(cw, 1, WL_DIR_HTML), drift_workload_name(sw), wl_dir_name(sw, 1, WL_DIR_HTML),
               wl_dir_name(dw, 0, WL_DIR_HTML), drift_workload_name(dw));
    for (int w = 0; w < DRIFT_WL_COUNT; w++)
        if (wl_on[w]) buf_printf(b, "<th>%s</th>", drift_workload_name((drift_workload)w));
    buf_puts(b, "</tr>\n");
    for (size_t i = 0; i < n; i++) {
        buf_puts(b, "<tr><td>");
        html_text(b, e[i].label);
        buf_puts(b, "</td>");
        for (int w = 0; w < DRIFT_WL_COUNT; w++) {
            if (!wl_on[w]) continue;
            const drift_wl_result *r = &e[i].cmp->wl[w];
            if (!e[i].cmp->present[w] || r->n <= 0) {
                buf_puts(b, "<td class=\"sub\">&#8212;</td>");
                continue;
            }
            int pw = wl_traits_of((drift_workload)w)->pairwise;
            long down = pw ? 0 : r->correct_to_incorrect;
            long up = pw ? 0 : r->incorrect_to_correct;
            long drift = pw ? r->flips : 0;
            double k = 140.0 / (double)r->n;
            double wd = down * k, wu = up * k, wc = drift * k;
            buf_printf(b, "<td><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"150\" height=\"16\">"
                          "<rect x=\"0\" y=\"3\" width=\"140\" height=\"10\" fill=\"#eef0f3\"/>"
                          "<rect x=\"0\" y=\"3\" width=\"%.1f\" height=\"10\" fill=\"#b2182b\"/>"
                          "<rect x=\"%.1f\" y=\"3\" width=\"%.1f\" height=\"10\" fill=\"#1b7837\"/>"
                          "<rect x=\"%.1f\" y=\"3\" width=\"%.1f\" height=\"10\" fill=\"#6a51a3\"/></svg><br>",
                       wd, wd, wu, wd + wu, wc);
            if (pw)
                buf_printf(b, "<span class=\"drift\">%ld drift</span> of %ld", drift, r->n);
            else
                buf_printf(b, "<span class=\"c2i\">%ld&#8595;</span> <span class=\"i2c\">%ld&#8593;</span> of %ld", down,
                           up, r->n);
            buf_puts(b, "</td>");
        }
        buf_puts(b, "</tr>\n");
    }
    buf_puts(b, "</table>\n</div>\n");
}

/* Flip risk against outcome (only when some configuration's baseline has
 * logprobs, cmp->risk_state DRIFT_RISK_DONE): per configuration and
 * workload with a known risk, every pair as a dot at its risk (x, 0..1),
 * flipped ones on the upper row in red, kept ones below in grey, with the
 * ROC AUC and precision at the top 10% and their bootstrap intervals. */
static void section_risk(util_buf *b, html_toc *toc, const experiment *e, size_t n) {
    int any = 0;
    for (size_t i = 0; i < n; i++) any |= e[i].cmp->risk_state == DRIFT_RISK_DONE;
    if (!any) return;
    html_h2(b, toc, "risk", "Flip risk against outcome");
    buf_puts(b, "<div class=\"card\">\n"
                "<p class=\"sub\">Each dot is a prompt at the flip risk of its baseline answer (from the baseline's own "
                "logprobs; right = riskier). <span class=\"c2i\">&#9679; flipped</span> on the upper row, "
                "<span class=\"sub\">&#9679; kept</span> below. AUC 0.5 = a random ranking; precision@10% = flipped "
                "share of the riskiest tenth (random: the base rate). 95% bootstrap intervals.</p>\n"
                "<table><tr><th>configuration</th><th>workload</th><th>risk vs outcome</th><th>AUC</th>"
                "<th>precision@10%</th></tr>\n");
    const int W = 320, H = 44;
    for (size_t i = 0; i < n; i++) {
        const drift_comparison *c = e[i].cmp;
        if (c->risk_state != DRIFT_RISK_DONE) continue;
        for (int w = 0; w < DRIFT_WL_COUNT; w++) {
            const drift_wl_result *r = &c->wl[w];
            if (!c->present[w] || r->risk.n == 0) continue;
            buf_puts(b, "<tr><td>");
            html_text(b, e[i].label);
            buf_printf(b, "</td><td>%s<br><span class=\"sub\">", drift_workload_name((drift_workload)w));
            html_text(b, r->risk_version ? r->risk_version : "");
            buf_printf(b, "</span></td><td><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                          "role=\"img\" aria-label=\"flip risk of each prompt, flipped above, kept below\">"
                          "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#f7f8fa\"/>"
                          "<line x1=\"0\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#d0d4da\"/>",
                       W, H + 12, W, H, H / 2, W, H / 2);
            for (size_t k = 0; k < r->n_pairs; k++) {
                const drift_pair_outcome *p = &r->pairs[k];
                if (isnan(p->risk)) continue;
                double x = 4 + p->risk * (W - 8);
                double y = (p->flipped ? 4.0 : H / 2.0 + 4.0) + (double)((k * 7) % 13); /* fixed jitter */
                buf_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%s\" fill=\"%s\" fill-opacity=\"%s\"><title>",
                           x, y, p->flipped ? "3" : "2", p->flipped ? "#b2182b" : "#8a94a3",
                           p->flipped ? "0.9" : "0.5");
                html_text(b, p->prompt_id);
                buf_printf(b, ": risk %.3f, %s</title></circle>", p->risk, p->flipped ? "flipped" : "kept");
            }
            buf_printf(b, "<text x=\"0\" y=\"%d\" font-size=\"10\" fill=\"#667\">0</text>"
                          "<text x=\"%d\" y=\"%d\" font-size=\"10\" fill=\"#667\" text-anchor=\"end\">risk 1</text>"
                          "</svg></td>",
                       H + 11, W, H + 11);
            if (isnan(r->risk.auc))
                buf_printf(b, "<td class=\"num\">&#8212;<br><span class=\"sub\">%zu flips</span></td>", r->risk.n_flipped);
            else
                buf_printf(b, "<td class=\"num\">%.3f<br><span class=\"sub\">[%.3f, %.3f]; %zu flips of %zu</span></td>",
                           r->risk.auc, r->risk.auc_ci[0], r->risk.auc_ci[1], r->risk.n_flipped, r->risk.n);
            buf_printf(b, "<td class=\"num\">%.3f<br><span class=\"sub\">[%.3f, %.3f]; base %.3f</span></td></tr>\n",
                       r->risk.prec10, r->risk.prec10_ci[0], r->risk.prec10_ci[1], r->risk.base_rate);
        }
    }
    buf_puts(b, "</table>\n</div>\n");
}

/* Token KL against flip rate (o->kl, report --kl N): one dot per embedded
 * configuration at its mean teacher-forced KL (log scale; a KL of exactly
 * 0, the baseline's own arithmetic, sits in a lane left of the axis) and
 * its flip rate (every workload's flips / pairs pooled), with Spearman's
 * rho and Pearson's r over the configurations (drift_tokdiv_correlate,
 * bootstrap 95% intervals); then the figures as a table. */
static void section_kl(util_buf *b, html_toc *toc, const experiment *e, size_t n, const drift_html_kl *kl) {
    if (!kl) return;
    html_h2(b, toc, "kl", "Token KL against flip rate");
    buf_printf(b, "<div class=\"card\">\n"
                  "<p class=\"sub\">Each dot is a configuration: its mean KL(baseline&#8201;||&#8201;configuration) "
                  "per token, teacher-forced over %zu sampled prompts per workload (seed %llu; the configuration's "
                  "stack reads the baseline's answers), against its flip rate over every workload. KL on a log "
                  "scale; KL 0 (the baseline's own arithmetic) on the left lane.</p>\n",
               kl->limit, (unsigned long long)kl->seed);
    size_t m = 0;
    double *x = malloc((kl->n + 1) * sizeof *x), *y = malloc((kl->n + 1) * sizeof *y);
    const experiment **ex = malloc((kl->n + 1) * sizeof *ex);
    const drift_html_kl_point **pt = malloc((kl->n + 1) * sizeof *pt);
    if (!x || !y || !ex || !pt) {
        buf_puts(b, "<p>Out of memory drawing the chart.</p></div>\n");
        free(x);
        free(y);
        free(ex);
        free(pt);
        return;
    }
    for (size_t i = 0; i < kl->n; i++) {
        const drift_html_kl_point *p = &kl->points[i];
        const experiment *hit = NULL;
        for (size_t j = 0; j < n && !hit; j++)
            if (!strcmp(e[j].label, p->label)) hit = &e[j];
        if (!hit || isnan(p->kl_mean)) continue;
        long f = 0, pairs = 0;
        for (int w = 0; w < DRIFT_WL_COUNT; w++)
            if (hit->cmp->present[w]) {
                f += hit->cmp->wl[w].flips;
                pairs += hit->cmp->wl[w].n;
            }
        if (!pairs) continue;
        x[m] = p->kl_mean;
        y[m] = (double)f / (double)pairs;
        ex[m] = hit;
        pt[m++] = p;
    }
    if (m == 0) {
        buf_puts(b, "<p>No embedded configuration with pairs and a KL: nothing to draw.</p>\n");
    } else {
        double lo = INFINITY, hi = -INFINITY, ymax = 0;
        for (size_t i = 0; i < m; i++) {
            if (x[i] > 0 && x[i] < lo) lo = x[i];
            if (x[i] > 0 && x[i] > hi) hi = x[i];
            if (y[i] > ymax) ymax = y[i];
        }
        int any_pos = hi > 0;
        double d0 = any_pos ? floor(log10(lo)) : -6, d1 = any_pos ? ceil(log10(hi)) : -5;
        if (d1 <= d0) d1 = d0 + 1;
        double ytop = ymax > 0 ? ymax * 1.1 : 0.01;
        const int W = 560, H = 260, L = 90, R = 16, T = 12, B = 40, LANE = 30;
        const int px0 = L, px1 = W - R, py0 = H - B, py1 = T;
        buf_printf(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" role=\"img\" "
                      "aria-label=\"mean token KL per configuration against its flip rate\">"
                      "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#fff\"/>"
                      "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#889\"/>"
                      "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#889\"/>",
                   W, H, W, H, px0, py0, px1, py0, px0, py0, px0, py1);
        int step = (int)ceil((d1 - d0) / 7); /* at most about 8 decade labels */
        for (int d = (int)d0; d <= (int)d1; d++) {
            double gx = px0 + (d - d0) / (d1 - d0) * (px1 - px0);
            buf_printf(b, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#eceef2\"/>", gx, py0, gx, py1);
            if ((d - (int)d0) % step == 0)
                buf_printf(b, "<text x=\"%.1f\" y=\"%d\" font-size=\"10\" fill=\"#667\" text-anchor=\"middle\">1e%d</text>",
                           gx, py0 + 13, d);
        }
        for (int k = 0; k <= 4; k++) {
            double v = ytop * k / 4, gy = py0 - (double)k / 4 * (py0 - py1);
            buf_printf(b, "<text x=\"%d\" y=\"%.1f\" font-size=\"10\" fill=\"#667\" text-anchor=\"end\">%.2f%%</text>",
                       px0 - 4, gy + 3, 100 * v);
        }
        buf_printf(b, "<text x=\"%d\" y=\"%d\" font-size=\"10\" fill=\"#667\" text-anchor=\"middle\">KL 0</text>"
                      "<text x=\"%d\" y=\"%d\" font-size=\"11\" fill=\"#334\" text-anchor=\"middle\">mean KL per token "
                      "(nats, log scale)</text>",
                   px0 - LANE - 12, py0 + 13, (px0 + px1) / 2, H - 6);
        for (size_t i = 0; i < m; i++) {
            double cx = x[i] > 0 ? px0 + (log10(x[i]) - d0) / (d1 - d0) * (px1 - px0) : px0 - LANE - 12;
            double cy = py0 - y[i] / ytop * (py0 - py1);
            buf_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"#2166ac\" fill-opacity=\"0.8\"><title>", cx,
                       cy);
            html_text(b, ex[i]->label);
            buf_printf(b, ": KL %.3g, flip rate %.2f%%</title></circle>", x[i], 100 * y[i]);
        }
        buf_puts(b, "</svg>\n");
        drift_tokdiv_corr cr;
        drift_error cerr = {0};
        if (m >= 3 && drift_tokdiv_correlate(x, y, m, 1000, kl->seed, &cr, &cerr) == DRIFT_OK && !isnan(cr.spearman))
            buf_printf(b, "<p>Spearman's rho = <b>%.3f</b> [%.3f, %.3f], Pearson's r = %.3f [%.3f, %.3f] over %zu "
                          "configurations (bootstrap 95%%, %d resamples).</p>\n",
                       cr.spearman, cr.spearman_ci[0], cr.spearman_ci[1], cr.pearson, cr.pearson_ci[0],
                       cr.pearson_ci[1], cr.n, cr.n_boot);
        else
            buf_printf(b, "<p>Spearman's rho: not defined for these %zu configuration(s) (needs 3 or more, with "
                          "spread in both KL and flip rate).</p>\n", m);
        buf_puts(b, "<table><tr><th>configuration</th><th>mean KL (nats)</th><th>same top-1</th><th>positions</th>"
                    "<th>flip rate</th></tr>\n");
        for (size_t i = 0; i < m; i++) {
            buf_puts(b, "<tr><td>");
            html_text(b, ex[i]->label);
            buf_printf(b, "</td><td class=\"num\">%.3e</td><td class=\"num\">%.2f%%</td><td class=\"num\">%zu</td>"
                          "<td class=\"num\">%.2f%%</td></tr>\n",
                       x[i], 100 * pt[i]->same_top, pt[i]->positions, 100 * y[i]);
        }
        buf_puts(b, "</table>\n");
    }
    if (kl->n_not_embedded) {
        buf_puts(b, "<p class=\"sub\">Not drawn (teacher forcing needs the engine's logits or a server's prompt "
                    "logprobs; each with why): ");
        for (size_t i = 0; i < kl->n_not_embedded; i++) {
            if (i) buf_puts(b, ", ");
            html_text(b, kl->not_embedded[i]);
        }
        buf_puts(b, ".</p>\n");
    }
    buf_puts(b, "</div>\n");
    free(x);
    free(y);
    free(ex);
    free(pt);
}

/* Stopping curves: per configuration from a sequential measure and gated
 * workload, the flip-rate confidence sequence (lower and upper bound)
 * against pairs asked, the budget, the stop and the suite's end. The
 * points come from drift_seq_curve over the stored pairs in the recorded
 * seeded order (a prompt's rank does not depend on which others were
 * asked, so this is the order the measure asked them in). */
enum { SEQ_W = 440, SEQ_H = 150, SEQ_L = 44, SEQ_TOP = 8 }; /* plot box at (SEQ_L, SEQ_TOP) */

/* Pairs asked -> x; a rate in [0, ymax] -> y on a square-root scale (it
 * holds the wide interval of the first pairs and still shows a budget of a
 * few percent). */
static double seq_x(double asked, double n_total) { return SEQ_L + asked / n_total * SEQ_W; }
static double seq_y(double rate, double ymax) {
    double r = rate < 0 ? 0 : rate > ymax ? ymax : rate;
    return SEQ_TOP + SEQ_H - sqrt(r / ymax) * SEQ_H;
}

/* The y axis of a stopping curve: labels at the budget, 0 and the top,
 * then gridlines at the round rates between that stay 11 px clear of the
 * others. */
static void seq_label(util_buf *b, double y, double v, const char *fill, int grid) {
    if (grid)
        buf_printf(b, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#e3e6eb\"/>", SEQ_L, y,
                   SEQ_L + SEQ_W, y);
    buf_printf(b, "<text x=\"%d\" y=\"%.1f\" font-size=\"10\" fill=\"%s\" text-anchor=\"end\">%g%%</text>",
               SEQ_L - 3, y + 3, fill, 100 * v);
}

static void seq_axis(util_buf *b, double ymax, double budget) {
    static const double ticks[] = {0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5};
    double used[3 + sizeof ticks / sizeof ticks[0]];
    int n_used = 0;
    const double cand[3] = {budget, 0, ymax};
    for (size_t k = 0; k < sizeof ticks / sizeof ticks[0] + 3; k++) {
        double v = k < 3 ? cand[k] : ticks[k - 3];
        if (v > ymax * (1 + 1e-9)) continue;
        double y = seq_y(v, ymax);
        int clear = 1;
        for (int u = 0; u < n_used; u++) clear &= fabs(used[u] - y) >= 11;
        if (!clear) continue;
        used[n_used++] = y;
        seq_label(b, y, v, k == 0 ? "#333" : "#667", k >= 3);
    }
}

static void section_seq_curve(util_buf *b, html_toc *toc, const experiment *e, size_t n) {
    util_buf rows = {0};
    const int W = SEQ_W, H = SEQ_H, L = SEQ_L, TOP = SEQ_TOP;
    for (size_t i = 0; i < n; i++) {
        const drift_comparison *c = e[i].cmp;
        double alpha, budget[DRIFT_WL_COUNT];
        uint64_t seed;
        long pairs[DRIFT_WL_COUNT];
        if (!drift_seq_recorded(c, &alpha, &seed, pairs, budget)) continue;
        for (int w = 0; w < DRIFT_WL_COUNT; w++) {
            drift_seq_wl stop;
            drift_seq_point *pts = NULL;
            size_t np = 0;
            drift_error err = {0};
            if (!c->present[w] || drift_seq_curve(c, (drift_workload)w, alpha, seed, &stop, &pts, &np, &err)) continue;
            /* the y axis holds every interval drawn, the stop's and the budget */
            double top = stop.budget > stop.hi ? stop.budget : stop.hi;
            for (size_t k = 0; k < np; k++)
                if (pts[k].lo <= pts[k].hi && pts[k].hi > top) top = pts[k].hi;
            double ymax = html_round_up(top);
            double nx = (double)(stop.n_total > 0 ? stop.n_total : 1);
            buf_puts(&rows, "<tr><td>");
            html_text(&rows, e[i].label);
            buf_printf(&rows, "</td><td>%s</td><td><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
                              "height=\"%d\" role=\"img\" aria-label=\"flip-rate confidence sequence against "
                              "pairs asked\"><rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#f7f8fa\"/>",
                       drift_workload_name((drift_workload)w), L + W + 10, TOP + H + 28, L, TOP, W, H);
            /* the band between the bounds, then each bound as a line */
            util_buf lo = {0}, hi = {0};
            for (size_t k = 0; k < np; k++) {
                if (pts[k].lo > pts[k].hi) continue; /* empty: itself a chance <= alpha */
                buf_printf(&lo, "%.1f,%.1f ", seq_x((double)pts[k].asked, nx), seq_y(pts[k].lo, ymax));
                buf_printf(&hi, "%.1f,%.1f ", seq_x((double)pts[k].asked, nx), seq_y(pts[k].hi, ymax));
            }
            if (lo.data && hi.data) {
                buf_printf(&rows, "<polyline points=\"%s\" fill=\"none\" stroke=\"#2166ac\" stroke-width=\"1.5\">"
                                  "<title>lower bound</title></polyline>", lo.data);
                buf_printf(&rows, "<polyline points=\"%s\" fill=\"none\" stroke=\"#b2182b\" stroke-width=\"1.5\">"
                                  "<title>upper bound</title></polyline>", hi.data);
            }
            buf_free(&lo);
            buf_free(&hi);
            seq_axis(&rows, ymax, stop.budget);
            buf_printf(&rows, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#333\" "
                              "stroke-dasharray=\"5,3\"><title>budget %.2f%%</title></line>",
                       L, seq_y(stop.budget, ymax), L + W, seq_y(stop.budget, ymax), 100 * stop.budget);
            const char *verdict = report_decision_word(stop.decision);
            buf_printf(&rows, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2\">"
                              "<title>stop after %ld of %ld pairs: %s</title></line>",
                       seq_x((double)stop.asked, nx), TOP, seq_x((double)stop.asked, nx), TOP + H,
                       stop.decision == DRIFT_DECISION_DEPLOY ? "#1a9850"
                       : stop.decision == DRIFT_DECISION_INCONCLUSIVE ? "#e08214" : "#d73027",
                       stop.asked, stop.n_total, verdict);
            buf_printf(&rows, "<text x=\"%d\" y=\"%d\" font-size=\"10\" fill=\"#667\">0</text><text x=\"%d\" "
                              "y=\"%d\" font-size=\"10\" fill=\"#667\" text-anchor=\"end\">%ld pairs (suite)</text>"
                              "</svg></td>",
                       L, TOP + H + 14, L + W, TOP + H + 14, stop.n_total);
            char lo_s[24], hi_s[24];
            snprintf(lo_s, sizeof lo_s, "%.2f%%", 100 * stop.lo);
            snprintf(hi_s, sizeof hi_s, "%.2f%%", 100 * stop.hi);
            buf_printf(&rows, "<td class=\"num\">%ld / %ld<br><span class=\"sub\">%ld flips</span></td>"
                              "<td class=\"num\">[%s, %s]<br><span class=\"sub\">budget %.2f%%</span></td>"
                              "<td><b>%s</b><br><span class=\"sub\">%s</span></td></tr>\n",
                       stop.asked, stop.n_total, stop.flips, lo_s, hi_s, 100 * stop.budget, verdict,
                       stop.early ? "early" : "suite end");
            free(pts);
        }
    }
    if (!rows.data) return;
    html_h2(b, toc, "sequential", "Stopping curves of sequential measures");
    buf_puts(b, "<div class=\"card\">\n"
                "<p class=\"sub\">measure --sequential asked both stacks in a seeded random order and stopped a "
                "workload once its anytime-valid interval for the flip rate left the budget. "
                "<span style=\"color:#2166ac\">lower</span> and <span style=\"color:#b2182b\">upper</span> bound "
                "against pairs asked (x up to the suite's size; y on a square-root scale from 0 to a round rate that "
                "holds every interval), the budget dashed, the stop as a vertical line (green deploy, red block, "
                "amber inconclusive). Replayed from the stored pairs in the recorded order, at the recorded "
                "alpha and budget.</p>\n<table><tr><th>configuration</th><th>workload</th><th>confidence sequence"
                "</th><th>asked</th><th>interval at the stop</th><th>verdict</th></tr>\n");
    buf_puts(b, rows.data);
    buf_puts(b, "</table>\n</div>\n");
    buf_free(&rows);
}

static void section_taxonomy(util_buf *b, html_toc *toc, const experiment *e, size_t n) {
    long tot_s = 0, tot_c = 0, tot_d = 0, tot_err = 0;
    util_buf rows = {0};
    for (size_t i = 0; i < n; i++) {
        long s = 0, c = 0, d = 0;
        for (int w = 0; w < DRIFT_WL_COUNT; w++) {
            if (!e[i].cmp->present[w]) continue;
            long f = e[i].cmp->wl[w].flips;
            wl_class cls = wl_traits_of((drift_workload)w)->taxonomy;
            if (cls == WL_CLASS_SAFETY) s += f;
            else if (cls == WL_CLASS_SEMANTIC) d += f;
            else c += f;
        }
        tot_s += s;
        tot_c += c;
        tot_d += d;
        tot_err += e[i].cmp->total_errors;
        buf_puts(&rows, "<tr><td>");
        html_text(&rows, e[i].label);
        const drift_comparison *cm = e[i].cmp;
        buf_printf(&rows, "</td><td><span class=\"dword %s\">%s</span><br><span class=\"sub\">",
                   html_decision_class(cm->decision),
                   cm->decision == DRIFT_DECISION_NOT_GATED ? "NOT GATED" : report_decision_word(cm->decision));
        report_verdict_summary(&rows, cm);
        buf_printf(&rows, "</span></td><td class=\"num\">%ld</td><td class=\"num\">%ld</td><td class=\"num\">%ld</td>"
                          "<td class=\"num\">%ld</td></tr>\n",
                   s, c, d, cm->total_errors);
    }
    html_h2(b, toc, "taxonomy", "Taxonomy of flips");
    buf_puts(b, "<div class=\"kpis\">");
    buf_printf(b, "<div class=\"kpi\"><b>%ld</b><span>safety flips (safe&#8596;unsafe)</span></div>"
                  "<div class=\"kpi\"><b>%ld</b><span>correctness flips (math, code, long context)</span></div>"
                  "<div class=\"kpi\"><b>%ld</b><span>semantic drift (chat)</span></div>"
                  "<div class=\"kpi\"><b>%ld</b><span>pairs excluded for errors</span></div></div>\n",
               tot_s, tot_c, tot_d, tot_err);
    buf_puts(b, "<div class=\"card\"><table><tr><th>configuration</th><th>decision</th><th>safety</th>"
                "<th>correctness</th><th>semantic drift</th><th>errors excluded</th></tr>\n");
    buf_puts(b, rows.data ? rows.data : "");
    buf_puts(b, "</table></div>\n");
    buf_free(&rows);
}

/* One row per (run, mechanism) of a comparison side: side 0 baseline, 1 target. */
static void sandbox_rows(util_buf *b, const drift_comparison *c, int side, int *weak) {
    const char *label = side ? c->target.label : c->baseline.label;
    for (size_t k = 0; k < c->n_sandboxes; k++) {
        const drift_sandbox_use *u = &c->sandboxes[k];
        long cnt = side ? u->target : u->baseline;
        if (!cnt) continue;
        buf_puts(b, "<tr><td>");
        html_text(b, label ? label : "");
        buf_printf(b, "</td><td>%s</td><td>", side ? "target" : "baseline");
        html_text(b, u->mechanism);
        buf_printf(b, "%s</td><td class=\"num\">%ld</td></tr>\n",
                   u->weak ? " <span class=\"c2i\">weaker than bubblewrap</span>" : "", cnt);
        *weak |= u->weak;
    }
}

/* Which isolation judged each run's code answers (baselines listed once). */
static void section_sandbox(util_buf *b, html_toc *toc, const experiment *e, size_t n) {
    int any = 0, weak = 0;
    for (size_t i = 0; i < n; i++) any |= e[i].cmp->n_sandboxes > 0;
    if (!any) return;
    util_buf rows = {0};
    for (size_t i = 0; i < n; i++) {
        const drift_comparison *c = e[i].cmp;
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++) seen = !strcmp(e[j].baseline, e[i].baseline);
        if (!seen) sandbox_rows(&rows, c, 0, &weak);
        sandbox_rows(&rows, c, 1, &weak);
    }
    html_h2(b, toc, "sandbox", "Code sandbox");
    if (weak)
        buf_puts(b, "<p class=\"note\">Some code answers were run under isolation weaker than bubblewrap "
                    "(see below).</p>\n");
    buf_puts(b, "<div class=\"card\"><table><tr><th>run</th><th>role</th><th>mechanism</th>"
                "<th>code answers judged</th></tr>\n");
    buf_puts(b, rows.data ? rows.data : "");
    buf_puts(b, "</table></div>\n");
    buf_free(&rows);
}

/* A numeric cell: kind 0 = integer, 1 = %.4g, 2 = %.3g, 3 = %.3f; NAN = empty. */
static void num_cell(util_buf *b, double v, int kind) {
    buf_puts(b, "<td class=\"num\">");
    if (!isnan(v)) {
        switch (kind) {
        case 0: buf_printf(b, "%.0f", v); break;
        case 1: buf_printf(b, "%.4g", v); break;
        case 2: buf_printf(b, "%.3g", v); break;
        default: buf_printf(b, "%.3f", v); break;
        }
    }
    buf_puts(b, "</td>");
}

/* The Type II table of the analyses. */
static void section_anova(util_buf *b, html_toc *toc, const drift_table_analyses *an) {
    html_h2(b, toc, "anova", "Analysis of variance");
    buf_puts(b, "<div class=\"card\">\n");
    const drift_anova_table *a = an->anova[2];
    if (!a) {
        buf_puts(b, "<p>ANOVA could not be computed: ");
        html_text(b, an->anova_error[2].msg);
        buf_puts(b, "</p>\n</div>\n");
        return;
    }
    buf_puts(b, "<p class=\"sub\">Type II sums of squares, OLS with treatment coding. Formula: <code>");
    html_text(b, an->formula);
    buf_printf(b, "</code>; %zu observations. &#951;&#178; = SS / total SS.</p>\n", a->nobs);
    buf_puts(b, "<table><tr><th>term</th><th>df</th><th>sum sq</th><th>F</th><th>p</th><th>p (BH)</th>"
                "<th>&#951;&#178;</th></tr>\n");
    for (size_t i = 0; i < a->n_rows; i++) {
        const drift_anova_row *r = &a->rows[i];
        buf_puts(b, "<tr><td>");
        html_text(b, r->term);
        buf_puts(b, "</td>");
        num_cell(b, r->df, 0);
        num_cell(b, r->sum_sq, 1);
        num_cell(b, r->F, 1);
        num_cell(b, r->p, 2);
        num_cell(b, r->p_bh, 2);
        num_cell(b, r->eta_sq, 3);
        buf_puts(b, "</tr>\n");
    }
    buf_puts(b, "</table>\n</div>\n");
}

/* The PRI's held-out evaluation of the analyses. */
static void section_pri(util_buf *b, html_toc *toc, const drift_table_analyses *an) {
    html_h2(b, toc, "pri", "Portability Risk Index: held-out accuracy");
    buf_puts(b, "<div class=\"card\">\n");
    const drift_pri_eval *ev = an->pri;
    if (!ev) {
        buf_puts(b, "<p>PRI could not be evaluated: ");
        html_text(b, an->pri_error.msg);
        buf_puts(b, "</p>\n</div>\n");
        return;
    }
    char r2[32];
    buf_printf(b, "<p>Random 80/20 split: test R&#178; = %s (MAE ",
               report_r2_text(ev->random_split.test_r2, ev->random_split.n_test, 3, r2, sizeof r2));
    if (isfinite(ev->random_split.test_mae)) buf_printf(b, "%.3f points). ", ev->random_split.test_mae);
    else buf_puts(b, "-). ");
    char *cv = drift_pri_cv_summary(ev, "R&#178;", "&#177;");
    buf_printf(b, "%s. ", cv ? cv : "5-fold CV: out of memory");
    free(cv);
    buf_printf(b, "%zu features.</p>\n", ev->n_features);
    buf_puts(b, "<table><tr><th>held out</th><th>train rows</th><th>test rows</th><th>test R&#178;</th>"
                "<th>test MAE (points)</th></tr>\n");
    int undefined = 0, issue36 = 0;
    for (size_t i = 0; i < ev->n_levels; i++) {
        const drift_pri_holdout *h = &ev->levels[i];
        buf_puts(b, "<tr><td>");
        html_text(b, h->name);
        /* the R^2 with its interval and noise ceiling, or "cannot say" and why
         * (drift_pri_holdout_text; an evaluation without them reads as before) */
        char *v = drift_pri_holdout_text(h, 3);
        buf_printf(b, "</td><td class=\"num\">%zu</td><td class=\"num\">%zu</td><td class=\"num\">", h->n_train,
                   h->n_test);
        html_text(b, v ? v : report_r2_text(h->test_r2, h->n_test, 3, r2, sizeof r2));
        buf_puts(b, "</td>");
        free(v);
        undefined |= !isfinite(h->test_r2);
        issue36 |= h->n_configs > 0;
        num_cell(b, h->test_mae, 3);
        buf_puts(b, "</tr>\n");
    }
    buf_puts(b, "</table>\n");
    for (size_t i = 0; i < ev->n_not_held; i++) {
        buf_puts(b, "<p class=\"sub\">");
        html_text(b, ev->not_held[i].dim);
        buf_printf(b, ": not held out: %zu level%s (leave-one-level-out needs %d).</p>\n", ev->not_held[i].n_levels,
                   ev->not_held[i].n_levels == 1 ? "" : "s", ev->min_levels);
    }
    if (issue36)
        buf_puts(b, "<p class=\"sub\">Each held-out R&#178; with a 95% interval (a bootstrap over the held-out "
                    "configurations) and its noise ceiling, the R&#178; that the true rates would get given the "
                    "binomial noise of the observed ones; &#8220;cannot say&#8221; where the ceiling is at or below 0 "
                    "or the held-out rows have nothing to predict.</p>\n");
    if (undefined)
        buf_puts(b, "<p class=\"sub\">No variance: the held-out rows share one flip rate (often: none of them "
                    "flipped), so R&#178; is not defined; too few rows: fewer than two.</p>\n");
    if (ev->n_importance) {
        buf_puts(b, "<h3>Feature importance (gain share)</h3><table><tr><th>feature</th><th>gain</th></tr>\n");
        for (size_t i = 0; i < ev->n_importance && i < 10; i++) {
            buf_puts(b, "<tr><td>");
            html_text(b, ev->importance[i].name);
            buf_printf(b, "</td><td class=\"num\">%.3f</td></tr>\n", ev->importance[i].gain_share);
        }
        buf_puts(b, "</table>\n");
    }
    buf_puts(b, "</div>\n");
}

/* One answer shown as it is (a side without text, or a pair not diffed). */
static void answer_plain(util_buf *b, const char *text) {
    buf_puts(b, "<div class=\"ans\">");
    if (!text) {
        buf_puts(b, "<i>(no text)</i></div>");
        return;
    }
    size_t len = strlen(text);
    html_text_n(b, text, HTML_DIFF_MAX_BYTES);
    if (len > HTML_DIFF_MAX_BYTES) buf_printf(b, "<span class=\"gap\">&#8230; (%zu more bytes)</span>", len - HTML_DIFF_MAX_BYTES);
    buf_puts(b, "</div>");
}

/* Both answers of a flip side by side, with the word diff when both have
 * text; the meta line first (where they part, words removed and added). */
static void answers_pair(util_buf *b, const experiment *x, const drift_report_answers *an) {
    util_buf ha = {0}, hb = {0};
    html_diff_stats ds = {0};
    int diffed = an->base_text && an->targ_text && !html_word_diff(an->base_text, an->targ_text, &ha, &hb, &ds);
    long d = html_first_difference(an->base_text, an->targ_text);
    if (an->base_text && an->targ_text && d < 0)
        buf_puts(b, " &#183; identical text (the label changed through the evaluator)");
    else if (an->base_text && an->targ_text)
        buf_printf(b, " &#183; answers part at character %ld", d);
    if (diffed && (ds.removed || ds.added))
        buf_printf(b, " &#183; <del>%ld word%s</del> removed, <ins>%ld word%s</ins> added", ds.removed,
                   ds.removed == 1 ? "" : "s", ds.added, ds.added == 1 ? "" : "s");
    if (diffed && ds.capped)
        buf_printf(b, " &#183; only the first %d words past their common start were compared", HTML_DIFF_MAX_WORDS);
    buf_puts(b, "</div>\n");
    if (an->input) {
        buf_puts(b, "<div class=\"meta\">");
        html_text_n(b, an->input, 300);
        if (strlen(an->input) > 300) buf_puts(b, "&#8230;");
        buf_puts(b, "</div>\n");
    }
    buf_puts(b, "<div class=\"pair\"><div><div class=\"meta\">baseline ");
    html_text(b, x->baseline);
    buf_puts(b, "</div>");
    if (diffed) buf_printf(b, "<div class=\"ans\">%s</div>", ha.data ? ha.data : "");
    else answer_plain(b, an->base_text);
    buf_puts(b, "</div><div><div class=\"meta\">target ");
    html_text(b, x->label);
    buf_puts(b, "</div>");
    if (diffed) buf_printf(b, "<div class=\"ans\">%s</div>", hb.data ? hb.data : "");
    else answer_plain(b, an->targ_text);
    buf_puts(b, "</div></div>");
    buf_free(&ha);
    buf_free(&hb);
}

/* The flipped prompts: per configuration and workload the first
 * max_flipped, each with both answers (r's, or d's for a single
 * comparison: its quoted answers, else its text diff). */
static void section_flipped(util_buf *b, html_toc *toc, const experiment *e, size_t n, size_t max_flipped,
                            const drift_comparison_details *d) {
    html_h2(b, toc, "flipped", "Flipped prompts");
    buf_printf(b, "<p class=\"sub\">Up to %zu per configuration and workload, both answers side by side with a word "
                  "diff: <del>words only the baseline's answer has</del>, <ins>words only the target's has</ins> (a "
                  "longest common subsequence of their words).</p>\n",
               max_flipped);
    size_t shown = 0;
    for (size_t i = 0; i < n; i++) {
        for (int w = 0; w < DRIFT_WL_COUNT; w++) {
            const drift_wl_result *r = &e[i].cmp->wl[w];
            if (!e[i].cmp->present[w] || !r->n_flipped) continue;
            buf_puts(b, "<div class=\"card\"><h3>");
            html_text(b, e[i].label);
            buf_printf(b, " &#8212; %s: %ld flips of %ld</h3>\n", drift_workload_name((drift_workload)w), r->flips, r->n);
            size_t have = e[i].n_answers[w];
            if (d && d->n[w] > have) have = d->n[w];
            size_t f = 0;
            for (; f < r->n_flipped && f < max_flipped && f < have; f++) {
                const drift_flip *fl = &r->flipped[f];
                const drift_report_answers *an = f < e[i].n_answers[w] ? &e[i].answers[w][f] : NULL;
                const drift_flip_detail *fd = d && f < d->n[w] ? &d->flips[w][f] : NULL;
                const char *dir = wl_dir_name((drift_workload)w, fl->direction, WL_DIR_HTML);
                const char *cls = fl->direction < 0 ? "c2i" : fl->direction > 0 ? "i2c" : "drift";
                buf_puts(b, "<div class=\"flip\"><div class=\"meta\">prompt <b>");
                html_text(b, fl->prompt_id);
                buf_printf(b, "</b> &#183; <span class=\"%s\">%s</span>", cls, dir);
                if (!isnan(fl->value)) buf_printf(b, " &#183; SDR %.3f", fl->value);
                if (an && an->error) {
                    buf_puts(b, "</div><p>answers unavailable: ");
                    html_text(b, an->error);
                    buf_puts(b, "</p>");
                } else if (an && (an->base_text || an->targ_text || !fd)) {
                    answers_pair(b, &e[i], an);
                } else if (fd && fd->div.diff) {
                    buf_puts(b, " &#183; word diff as compare prints it ([-removed-] {+added+})</div>\n"
                                "<div class=\"ans\">");
                    html_text_n(b, fd->div.diff, HTML_DIFF_MAX_BYTES);
                    buf_puts(b, "</div>");
                } else {
                    buf_puts(b, "</div><p>answers not loaded.</p>");
                }
                buf_puts(b, "</div>\n");
                shown++;
            }
            if (r->n_flipped > f)
                buf_printf(b, "<p class=\"sub\">&#8230; and %zu more (driftbench compare shows all).</p>", r->n_flipped - f);
            buf_puts(b, "</div>\n");
        }
    }
    if (!shown) buf_puts(b, "<div class=\"card\"><p>No prompt flipped.</p></div>\n");
}

/* ANOVA and PRI, or one line saying why they are absent. */
static void section_analyses(util_buf *b, html_toc *toc, const drift_matrix_report *r) {
    if (!r->analysis) return;
    const drift_table_analyses *an = &r->analyses;
    if (r->comparison) {
        buf_puts(b, "<p class=\"sub\" id=\"no-analyses\">No ANOVA or PRI here: they explain flip rates across many "
                    "configurations, and this page compares one (driftbench report --matrix on a store of several "
                    "shows them).</p>\n");
        return;
    }
    int pri = an->pri_asked;
    if (an->anova_fits) section_anova(b, toc, an);
    if (pri && an->pri_fits) section_pri(b, toc, an);
    if (an->anova_fits && (!pri || an->pri_fits)) return;
    size_t configs = r->n_experiments;
    buf_printf(b, "<p class=\"sub\" id=\"no-analyses\">");
    if (!an->anova_fits) {
        buf_printf(b, "No %s: ", pri && !an->pri_fits ? "ANOVA or PRI" : "ANOVA");
        if (!an->formula)
            buf_printf(b, "no configuration dimension varies across the %zu configuration%s.", configs,
                       configs == 1 ? "" : "s");
        else
            buf_printf(b, "too few configurations (%zu; the flip table has %zu row%s): the ANOVA of the dimensions "
                          "that vary needs %zu parameters plus at least two residual degrees of freedom.",
                       configs, an->n_rows, an->n_rows == 1 ? "" : "s", an->n_params);
        if (pri && !an->pri_fits) buf_printf(b, " The PRI needs at least %d rows.", DRIFT_ANALYSES_PRI_MIN_ROWS);
    } else {
        buf_printf(b, "No PRI: too few rows to fit and evaluate it (%zu; it needs at least %d).", an->n_rows,
                   DRIFT_ANALYSES_PRI_MIN_ROWS);
    }
    buf_puts(b, "</p>\n");
}

/* "3 of 5" decisions counted, for the matrix page's summary. */
static void kpi_decisions(util_buf *b, const experiment *e, size_t n) {
    size_t cnt[5] = {0};
    for (size_t i = 0; i < n; i++) cnt[e[i].cmp->decision <= 4 ? e[i].cmp->decision : 0]++;
    buf_printf(b, "<div class=\"kpi\"><b>%zu of %zu</b><span>to DEPLOY &#183; BLOCK %zu &#183; INCONCLUSIVE %zu &#183; "
                  "ERROR %zu &#183; not gated %zu</span></div>",
               cnt[DRIFT_DECISION_DEPLOY], n, cnt[DRIFT_DECISION_BLOCK], cnt[DRIFT_DECISION_INCONCLUSIVE],
               cnt[DRIFT_DECISION_NO_EVIDENCE], cnt[DRIFT_DECISION_NOT_GATED]);
}

/* The matrix page's summary: flips, the overall rate, the worst cell, the decisions. */
static void matrix_summary(util_buf *b, const experiment *e, size_t n) {
    long flips = 0, pairs = 0;
    double worst = 0;
    const char *worst_l = "";
    int worst_w = 0;
    for (size_t i = 0; i < n; i++)
        for (int w = 0; w < DRIFT_WL_COUNT; w++)
            if (e[i].cmp->present[w]) {
                flips += e[i].cmp->wl[w].flips;
                pairs += e[i].cmp->wl[w].n;
                if (e[i].cmp->wl[w].n > 0 && e[i].cmp->wl[w].flip_rate >= worst) {
                    worst = e[i].cmp->wl[w].flip_rate;
                    worst_l = e[i].label;
                    worst_w = w;
                }
            }
    buf_printf(b, "<div class=\"kpis\"><div class=\"kpi\"><b>%ld</b><span>flips in %ld paired answers</span></div>"
                  "<div class=\"kpi\"><b>%.2f%%</b><span>overall flip rate</span></div>"
                  "<div class=\"kpi\"><b>%.1f%%</b><span>worst cell: ",
               flips, pairs, pairs ? 100.0 * (double)flips / (double)pairs : 0.0, 100 * worst);
    html_text(b, worst_l);
    buf_printf(b, " / %s</span></div>", n ? drift_workload_name((drift_workload)worst_w) : "-");
    if (n) kpi_decisions(b, e, n);
    buf_puts(b, "</div>\n");
}

/* See html_internal.h. */
static drift_status html_page(const drift_matrix_report *r, const drift_html_opts *o, const drift_comparison_details *d,
                       char **out, drift_error *err) {
    if (!r || !out) return drift_error_set(err, DRIFT_ERR_INVALID, "html report: missing arguments");
    *out = NULL;
    drift_html_opts def;
    drift_html_opts_default(&def);
    if (!o) o = &def;
    const experiment *e = r->experiments;
    size_t n = r->n_experiments;
    int one = r->comparison && n == 1;
    if (r->comparison && n != 1)
        return drift_error_set(err, DRIFT_ERR_INVALID, "html report: a comparison page needs one configuration, got %zu",
                               n);
    int wl_on[DRIFT_WL_COUNT] = {0}, n_wl = 0;
    for (size_t i = 0; i < n; i++)
        for (int w = 0; w < DRIFT_WL_COUNT; w++)
            if (e[i].cmp->present[w] && !wl_on[w]) {
                wl_on[w] = 1;
                n_wl++;
            }
    html_toc toc = {0};
    util_buf b = {0}, lead = {0}, body = {0};
    const char *title = o->title ? o->title : def.title;
    /* head and title */
    buf_puts(&b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                 "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>");
    html_text(&b, title);
    buf_puts(&b, "</title>\n<style>\n");
    buf_puts(&b, css);
    buf_puts(&b, "</style>\n</head>\n<body>\n<main>\n<h1>");
    html_text(&b, title);
    if (one) {
        buf_puts(&b, "</h1>\n<p class=\"sub\">Comparison of <b>");
        html_text(&b, e[0].label);
        buf_puts(&b, "</b> against the baseline <b>");
        html_text(&b, e[0].baseline);
        buf_puts(&b, "</b>");
    } else {
        buf_puts(&b, "</h1>\n<p class=\"sub\">Baseline <b>");
        html_text(&b, r->baseline);
        buf_printf(&b, "</b> &#183; %zu configurations &#183; %zu table rows", n, r->table ? r->table->n_rows : 0);
    }
    buf_puts(&b, " &#183; generated ");
    html_text(&b, r->generated);
    buf_puts(&b, " by driftbench ");
    html_text(&b, drift_version());
    buf_puts(&b, "</p>\n");
    /* the lead: the verdict (a comparison) or the summary (a matrix) */
    if (one) html_verdict_section(&lead, &toc, e[0].cmp);
    if (o->summary_html && *o->summary_html) {
        if (strstr(o->summary_html, "id=\"summary\"") && toc.n < HTML_TOC_MAX) {
            toc.id[toc.n] = "summary";
            toc.title[toc.n++] = "Summary";
        }
        buf_puts(&lead, o->summary_html);
    }
    if (o->note && *o->note) {
        buf_puts(&lead, "<p class=\"note\">");
        html_text_n(&lead, o->note, HTML_NOTE_MAX_BYTES);
        buf_puts(&lead, "</p>\n");
    }
    if (!one) matrix_summary(&lead, e, n);
    /* the body */
    if (one) {
        html_compared_section(&body, &toc, e[0].cmp, r->generated);
        html_decisions_section(&body, &toc, e[0].cmp);
    }
    if (!n) {
        buf_puts(&body, "<div class=\"card\"><p>No configuration with pairs against its baseline.</p></div>\n");
    } else {
        if (!one) section_heatmap(&body, &toc, e, n, wl_on, n_wl, r->table ? r->table->dim_names : NULL);
        section_directions(&body, &toc, e, n, wl_on);
        section_taxonomy(&body, &toc, e, n);
        section_sandbox(&body, &toc, e, n);
        section_risk(&body, &toc, e, n);
        section_kl(&body, &toc, e, n, o->kl);
        section_seq_curve(&body, &toc, e, n);
    }
    section_analyses(&body, &toc, r);
    section_flipped(&body, &toc, e, n, r->max_flipped, d);
    /* assembled: title, lead, contents, body */
    buf_puts(&b, lead.data ? lead.data : "");
    if (toc.n >= 3) {
        buf_puts(&b, "<nav class=\"toc\"><b>Contents</b> &#160;");
        for (int i = 0; i < toc.n; i++) buf_printf(&b, "<a href=\"#%s\">%s</a>", toc.id[i], toc.title[i]);
        buf_puts(&b, "</nav>\n");
    }
    buf_puts(&b, body.data ? body.data : "");
    buf_free(&lead);
    buf_free(&body);
    buf_puts(&b, "<p class=\"sub\" style=\"margin-top:30px\">Flip: the workload's label of one prompt differs between "
                 "baseline and target with deterministic decoding. Errors on either side are excluded, never counted "
                 "as flips.</p>\n</main>\n</body>\n</html>\n");
    if (!b.data) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    *out = buf_steal(&b);
    return DRIFT_OK;
}

/* See report_html.h. */
drift_status drift_html_render(const drift_matrix_report *r, const drift_html_opts *o, char **out, drift_error *err) {
    return html_page(r, o, NULL, out, err);
}

/* ---- one comparison as a page ---- */

/* See report_html.h. */
drift_status drift_comparison_html_render(const drift_comparison *c, const drift_comparison_details *d,
                                          const drift_html_opts *o, char **out, drift_error *err) {
    if (!c || !out) return drift_error_set(err, DRIFT_ERR_INVALID, "html comparison: missing arguments");
    *out = NULL;
    drift_html_opts def;
    drift_html_opts_default(&def);
    if (!o) o = &def;
    drift_report_experiment e;
    memset(&e, 0, sizeof e);
    e.label = c->target.label ? c->target.label : (char *)"target";
    e.baseline = c->baseline.label ? c->baseline.label : (char *)"baseline";
    e.cmp = (drift_comparison *)c; /* read only */
    drift_matrix_report r;
    memset(&r, 0, sizeof r);
    r.baseline = e.baseline;
    r.experiments = &e;
    r.n_experiments = 1;
    r.comparison = 1;
    r.analysis = o->analysis;
    r.max_flipped = o->max_flipped ? o->max_flipped : def.max_flipped;
    if (o->generated) snprintf(r.generated, sizeof r.generated, "%s", o->generated);
    else util_utc_iso(r.generated);
    /* the answers d quotes (the rest show d's text diff) */
    drift_status rc = DRIFT_OK;
    for (int k = 0; k < DRIFT_WL_COUNT && d; k++) {
        size_t n = d->n[k] < r.max_flipped ? d->n[k] : r.max_flipped;
        if (!n || !c->present[k]) continue;
        if (!(e.answers[k] = calloc(n, sizeof *e.answers[k]))) {
            rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
            break;
        }
        e.n_answers[k] = n;
        for (size_t i = 0; i < n; i++) {
            const drift_flip_detail *fd = &d->flips[k][i];
            e.answers[k][i].base_text = fd->base_text;
            e.answers[k][i].targ_text = fd->targ_text;
            e.answers[k][i].error = fd->div.error;
        }
    }
    if (!rc) rc = html_page(&r, o, d, out, err);
    for (int k = 0; k < DRIFT_WL_COUNT; k++) free(e.answers[k]);
    return rc;
}
