/* html.c - the matrix report as one self-contained HTML page, pure.
 *
 * Data: a drift_matrix_report computed beforehand (src/matrix/report_data.c):
 * the flip table, each configuration's comparison against its baseline
 * (directions, taxonomy, flipped prompts), the analyses and the answers of
 * the flipped prompts shown; nothing here reads the store or runs an
 * analysis. The page is built in one util_buf; every string from the store
 * goes through html_text (escape + UTF-8 repair), every number through
 * printf. Charts are inline SVG with <title> tooltips; no script runs, so
 * the page renders the same in a browser, a mail client or headless
 * Chromium.
 *
 *   the caller's summary fragment (o->summary_html: the lab's findings,
 *   first) -> summary -> heatmap (config x workload, rate + CI) -> direction bars
 *   -> taxonomy -> code sandbox (which isolation judged the code answers of
 *   each run, when any were judged; weaker than bubblewrap is flagged)
 *   -> flip risk against outcome (a dot per prompt at its risk, flipped or
 *   kept, with AUC and precision@10%; only when a baseline has logprobs)
 *   -> token KL against flip rate (o->kl: a log-scale scatter per
 *   configuration with Spearman's rho; only when asked)
 *   -> stopping curves of sequential measures (section_seq_curve: for runs
 *   whose decoding record carries measure --sequential's "sequential" entry,
 *   the gate is replayed from the stored pairs in the recorded seeded order
 *   with drift_seq_curve - the one computation done here, cheap and the
 *   same as compare --sequential's) -> ANOVA (type II, factors with >= 2 levels) -> PRI
 *   (held-out evaluations) -> flipped prompts (answers side by side). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/divergence.h"
#include "driftbench/report.h"
#include "driftbench/report_html.h"
#include "report/report_internal.h"
#include "util/util.h"

void drift_html_opts_default(drift_html_opts *o) {
    memset(o, 0, sizeof *o);
    o->title = "DriftBench report";
    o->max_flipped = 5;
    o->analysis = 1;
}

/* Length of the valid UTF-8 sequence at p (1..4), 0 if invalid. */
static size_t utf8_len(const unsigned char *p) {
    unsigned c = p[0];
    if (c < 0x80) return 1;
    size_t n = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (!n || c == 0xC0 || c == 0xC1 || c > 0xF4) return 0;
    for (size_t i = 1; i < n; i++)
        if ((p[i] & 0xC0) != 0x80) return 0;
    if (n == 3 && c == 0xE0 && p[1] < 0xA0) return 0; /* overlong */
    if (n == 3 && c == 0xED && p[1] >= 0xA0) return 0; /* surrogate */
    if (n == 4 && c == 0xF0 && p[1] < 0x90) return 0;
    if (n == 4 && c == 0xF4 && p[1] >= 0x90) return 0;
    return n;
}

/* Appends at most max_bytes of s (0 = all), escaped. */
static void html_text_n(util_buf *b, const char *s, size_t max_bytes) {
    if (!s) return;
    const unsigned char *p = (const unsigned char *)s;
    const unsigned char *end = max_bytes ? p + strnlen(s, max_bytes) : p + strlen(s);
    while (p < end) {
        unsigned c = *p;
        switch (c) {
        case '&': buf_puts(b, "&amp;"); p++; continue;
        case '<': buf_puts(b, "&lt;"); p++; continue;
        case '>': buf_puts(b, "&gt;"); p++; continue;
        case '"': buf_puts(b, "&quot;"); p++; continue;
        case '\'': buf_puts(b, "&#39;"); p++; continue;
        default: break;
        }
        if (c < 0x20 && c != '\n' && c != '\t') {
            buf_puts(b, "\xEF\xBF\xBD");
            p++;
            continue;
        }
        if (c == 0x7F) {
            buf_puts(b, "\xEF\xBF\xBD");
            p++;
            continue;
        }
        size_t n = utf8_len(p);
        if (!n || p + n > end) {
            buf_puts(b, "\xEF\xBF\xBD");
            p++;
            continue;
        }
        buf_append(b, p, n);
        p += n;
    }
}
static void html_text(util_buf *b, const char *s) { html_text_n(b, s, 0); }

char *drift_html_escape(const char *s) {
    util_buf b = {0};
    html_text(&b, s ? s : "");
    return buf_steal(&b);
}

long drift_first_difference(const char *a, const char *b) {
    if (!a) a = "";
    if (!b) b = "";
    long i = 0;
    while (a[i] && a[i] == b[i]) i++;
    if (!a[i] && !b[i]) return -1;
    return i;
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
    "svg text{font-family:system-ui,Helvetica,Arial,sans-serif}\n";

static void wl_colour(double intensity, char out[8]) {
    /* #f7fbff -> #fdae61 -> #b2182b */
    if (intensity < 0) intensity = 0;
    if (intensity > 1) intensity = 1;
    double a[3] = {247, 251, 255}, m[3] = {253, 174, 97}, z[3] = {178, 24, 43};
    int rgb[3];
    for (int i = 0; i < 3; i++) {
        double v = intensity < 0.5 ? a[i] + (m[i] - a[i]) * intensity * 2 : m[i] + (z[i] - m[i]) * (intensity - 0.5) * 2;
        rgb[i] = (int)lround(v);
    }
    snprintf(out, 8, "#%02x%02x%02x", rgb[0] & 255, rgb[1] & 255, rgb[2] & 255);
}

static void section_heatmap(util_buf *b, const experiment *e, size_t n, const int *wl_on, int n_wl,
                            char *const *dim_names) {
    double maxr = 0.0;
    for (size_t i = 0; i < n; i++)
        for (int w = 0; w < DRIFT_WL_COUNT; w++)
            if (e[i].cmp->present[w] && e[i].cmp->wl[w].n > 0 && e[i].cmp->wl[w].flip_rate > maxr)
                maxr = e[i].cmp->wl[w].flip_rate;
    double scale = maxr > 0.05 ? maxr : 0.05;
    const int left = 300, cw = 150, ch = 40, top = 30;
    int width = left + cw * (n_wl ? n_wl : 1) + 10, height = top + ch * (int)n + 40;
    buf_puts(b, "<h2 id=\"heatmap\">Flip rate by configuration and workload</h2>\n<div class=\"card\">\n");
    buf_printf(b, "<p class=\"sub\">Share of paired prompts whose label changed against the baseline (chat: semantic "
                  "drift, SDR &gt; threshold); 95%% Wilson interval below. Colour scale 0 to %.1f%%.</p>\n",
               100 * scale);
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
            buf_printf(&dt, "%s%s=%s", d ? ", " : "", dim_names[d], e[i].levels[d] ? e[i].levels[d] : "?");
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
                           x, y, cw, ch, x + cw / 2, y + ch / 2 + 4);
                continue;
            }
            char colour[8];
            double inten = r->flip_rate / scale;
            wl_colour(inten, colour);
            const char *fg = inten > 0.65 ? "#ffffff" : "#1d2330";
            buf_printf(b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\" stroke=\"#fff\"><title>",
                       x, y, cw, ch, colour);
            html_text(b, e[i].label);
            buf_printf(b, " %s: %ld of %ld pairs flipped (%.2f%%, 95%% CI %.2f-%.2f%%)</title></rect>\n",
                       drift_workload_name((drift_workload)w), r->flips, r->n, 100 * r->flip_rate, 100 * r->ci95[0],
                       100 * r->ci95[1]);
            buf_printf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"14\" font-weight=\"600\" "
                          "fill=\"%s\">%.1f%%</text>\n",
                       x + cw / 2, y + 17, fg, 100 * r->flip_rate);
            buf_printf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"10\" fill=\"%s\">"
                          "[%.1f, %.1f] n=%ld</text>\n",
                       x + cw / 2, y + 32, fg, 100 * r->ci95[0], 100 * r->ci95[1], r->n);
        }
    }
    /* legend */
    int ly = top + ch * (int)n + 14;
    for (int k = 0; k < 10; k++) {
        char colour[8];
        wl_colour(k / 9.0, colour);
        buf_printf(b, "<rect x=\"%d\" y=\"%d\" width=\"24\" height=\"10\" fill=\"%s\"/>", left + k * 24, ly, colour);
    }
    buf_printf(b, "<text x=\"%d\" y=\"%d\" font-size=\"11\">0%%</text><text x=\"%d\" y=\"%d\" font-size=\"11\">"
                  "%.1f%%</text>\n</svg>\n</div>\n",
               left - 22, ly + 9, left + 244, ly + 9, 100 * scale);
}

static void section_directions(util_buf *b, const experiment *e, size_t n, const int *wl_on) {
    buf_puts(b, "<h2 id=\"direction\">Direction of flips</h2>\n<div class=\"card\">\n"
                "<p class=\"sub\"><span class=\"c2i\">&#9632; correct&#8594;incorrect</span> (safety: safe&#8594;unsafe) "
                "&nbsp; <span class=\"i2c\">&#9632; incorrect&#8594;correct</span> (safety: unsafe&#8594;safe) &nbsp; "
                "<span class=\"drift\">&#9632; semantic drift</span> (chat). Bar length: share of pairs.</p>\n"
                "<table><tr><th>configuration</th>");
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
            long down = w == DRIFT_WL_CHAT ? 0 : r->correct_to_incorrect;
            long up = w == DRIFT_WL_CHAT ? 0 : r->incorrect_to_correct;
            long drift = w == DRIFT_WL_CHAT ? r->flips : 0;
            double k = 140.0 / (double)r->n;
            double wd = down * k, wu = up * k, wc = drift * k;
            buf_printf(b, "<td><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"150\" height=\"16\">"
                          "<rect x=\"0\" y=\"3\" width=\"140\" height=\"10\" fill=\"#eef0f3\"/>"
                          "<rect x=\"0\" y=\"3\" width=\"%.1f\" height=\"10\" fill=\"#b2182b\"/>"
                          "<rect x=\"%.1f\" y=\"3\" width=\"%.1f\" height=\"10\" fill=\"#1b7837\"/>"
                          "<rect x=\"%.1f\" y=\"3\" width=\"%.1f\" height=\"10\" fill=\"#6a51a3\"/></svg><br>",
                       wd, wd, wu, wd + wu, wc);
            if (w == DRIFT_WL_CHAT)
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
static void section_risk(util_buf *b, const experiment *e, size_t n) {
    int any = 0;
    for (size_t i = 0; i < n; i++) any |= e[i].cmp->risk_state == DRIFT_RISK_DONE;
    if (!any) return;
    buf_puts(b, "<h2 id=\"risk\">Flip risk against outcome</h2>\n<div class=\"card\">\n"
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
static void section_kl(util_buf *b, const experiment *e, size_t n, const drift_html_kl *kl) {
    if (!kl) return;
    buf_printf(b, "<h2 id=\"kl\">Token KL against flip rate</h2>\n<div class=\"card\">\n"
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
        buf_puts(b, "<p class=\"sub\">Not drawn (the configuration or its baseline is not an embedded stack: "
                    "teacher forcing needs the engine's logits): ");
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
enum { SEQ_W = 440, SEQ_H = 150, SEQ_L = 40, SEQ_TOP = 8 }; /* plot box at (SEQ_L, SEQ_TOP) */

/* Pairs asked -> x; a rate (clipped at ymax) -> y. */
static double seq_x(double asked, double n_total) { return SEQ_L + asked / n_total * SEQ_W; }
static double seq_y(double rate, double ymax) { return SEQ_TOP + SEQ_H - (rate > ymax ? ymax : rate) / ymax * SEQ_H; }

static void section_seq_curve(util_buf *b, const experiment *e, size_t n) {
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
            double ymax = 3 * stop.budget;
            if (stop.asked > 0 && 1.5 * (double)stop.flips / (double)stop.asked > ymax)
                ymax = 1.5 * (double)stop.flips / (double)stop.asked;
            if (ymax < 0.02) ymax = 0.02;
            if (ymax > 1) ymax = 1;
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
                                  "<title>upper bound (clipped at %.0f%%)</title></polyline>", hi.data, 100 * ymax);
            }
            buf_free(&lo);
            buf_free(&hi);
            buf_printf(&rows, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#333\" "
                              "stroke-dasharray=\"5,3\"><title>budget %.2f%%</title></line>",
                       L, seq_y(stop.budget, ymax), L + W, seq_y(stop.budget, ymax), 100 * stop.budget);
            const char *verdict = stop.verdict == DRIFT_SEQ_DEPLOY ? "DEPLOY" : "BLOCK";
            buf_printf(&rows, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2\">"
                              "<title>stop after %ld of %ld pairs: %s</title></line>",
                       seq_x((double)stop.asked, nx), TOP, seq_x((double)stop.asked, nx), TOP + H,
                       stop.verdict == DRIFT_SEQ_DEPLOY ? "#1a9850" : "#d73027", stop.asked, stop.n_total, verdict);
            buf_printf(&rows, "<text x=\"%d\" y=\"%d\" font-size=\"10\" fill=\"#667\" text-anchor=\"end\">"
                              "%.0f%%</text><text x=\"%d\" y=\"%d\" font-size=\"10\" fill=\"#667\" "
                              "text-anchor=\"end\">0</text><text x=\"%d\" y=\"%d\" font-size=\"10\" "
                              "fill=\"#667\">0</text><text x=\"%d\" y=\"%d\" font-size=\"10\" fill=\"#667\" "
                              "text-anchor=\"end\">%ld pairs (suite)</text></svg></td>",
                       L - 3, TOP + 8, 100 * ymax, L - 3, TOP + H, L, TOP + H + 14, L + W, TOP + H + 14,
                       stop.n_total);
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
    buf_puts(b, "<h2 id=\"sequential\">Stopping curves of sequential measures</h2>\n<div class=\"card\">\n"
                "<p class=\"sub\">measure --sequential asked both stacks in a seeded random order and stopped a "
                "workload once its anytime-valid interval for the flip rate left the budget. "
                "<span style=\"color:#2166ac\">lower</span> and <span style=\"color:#b2182b\">upper</span> bound "
                "against pairs asked (x up to the suite's size), the budget dashed, the stop as a vertical line "
                "(green deploy, red block). Replayed from the stored pairs in the recorded order, at the recorded "
                "alpha and budget.</p>\n<table><tr><th>configuration</th><th>workload</th><th>confidence sequence"
                "</th><th>asked</th><th>interval at the stop</th><th>verdict</th></tr>\n");
    buf_puts(b, rows.data);
    buf_puts(b, "</table>\n</div>\n");
    buf_free(&rows);
}

static void section_taxonomy(util_buf *b, const experiment *e, size_t n) {
    long tot_s = 0, tot_c = 0, tot_d = 0, tot_err = 0;
    util_buf rows = {0};
    for (size_t i = 0; i < n; i++) {
        long s = 0, c = 0, d = 0;
        for (int w = 0; w < DRIFT_WL_COUNT; w++) {
            if (!e[i].cmp->present[w]) continue;
            long f = e[i].cmp->wl[w].flips;
            if (w == DRIFT_WL_SAFETY) s += f;
            else if (w == DRIFT_WL_CHAT) d += f;
            else c += f;
        }
        tot_s += s;
        tot_c += c;
        tot_d += d;
        tot_err += e[i].cmp->total_errors;
        buf_puts(&rows, "<tr><td>");
        html_text(&rows, e[i].label);
        buf_printf(&rows, "</td><td class=\"num\">%ld</td><td class=\"num\">%ld</td><td class=\"num\">%ld</td>"
                          "<td class=\"num\">%ld</td></tr>\n",
                   s, c, d, e[i].cmp->total_errors);
    }
    buf_puts(b, "<h2 id=\"taxonomy\">Taxonomy of flips</h2>\n<div class=\"kpis\">");
    buf_printf(b, "<div class=\"kpi\"><b>%ld</b><span>safety flips (safe&#8596;unsafe)</span></div>"
                  "<div class=\"kpi\"><b>%ld</b><span>correctness flips (math, code, long context)</span></div>"
                  "<div class=\"kpi\"><b>%ld</b><span>semantic drift (chat)</span></div>"
                  "<div class=\"kpi\"><b>%ld</b><span>pairs excluded for errors</span></div></div>\n",
               tot_s, tot_c, tot_d, tot_err);
    buf_puts(b, "<div class=\"card\"><table><tr><th>configuration</th><th>safety</th><th>correctness</th>"
                "<th>semantic drift</th><th>errors excluded</th></tr>\n");
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
static void section_sandbox(util_buf *b, const experiment *e, size_t n) {
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
    buf_puts(b, "<h2 id=\"sandbox\">Code sandbox</h2>\n");
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
static void section_anova(util_buf *b, const drift_table_analyses *an) {
    buf_puts(b, "<h2 id=\"anova\">Analysis of variance</h2>\n<div class=\"card\">\n");
    if (!an->anova_fits) {
        buf_printf(b, "<p>Too few configurations for an ANOVA: %zu rows, and the factors that vary need %zu "
                      "parameters plus at least two residual degrees of freedom.</p>\n</div>\n",
                   an->n_rows, an->n_params);
        return;
    }
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
static void section_pri(util_buf *b, const drift_table_analyses *an) {
    buf_puts(b, "<h2 id=\"pri\">Portability Risk Index: held-out accuracy</h2>\n<div class=\"card\">\n");
    if (!an->pri_fits) {
        buf_printf(b, "<p>Too few rows to fit and evaluate the PRI (%zu; it needs at least %d).</p>\n</div>\n",
                   an->n_rows, DRIFT_ANALYSES_PRI_MIN_ROWS);
        return;
    }
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
    int undefined = 0;
    for (size_t i = 0; i < ev->n_levels; i++) {
        const drift_pri_holdout *h = &ev->levels[i];
        buf_puts(b, "<tr><td>");
        html_text(b, h->name);
        buf_printf(b, "</td><td class=\"num\">%zu</td><td class=\"num\">%zu</td><td class=\"num\">%s</td>", h->n_train,
                   h->n_test, report_r2_text(h->test_r2, h->n_test, 3, r2, sizeof r2));
        undefined |= !isfinite(h->test_r2);
        num_cell(b, h->test_mae, 3);
        buf_puts(b, "</tr>\n");
    }
    buf_puts(b, "</table>\n");
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

/* One answer with the part after the first difference marked. */
static void answer_box(util_buf *b, const char *text, long diff) {
    const size_t cap = 1500;
    buf_puts(b, "<div class=\"ans\">");
    if (!text) {
        buf_puts(b, "<i>(no text)</i></div>");
        return;
    }
    size_t len = strlen(text);
    if (diff < 0 || (size_t)diff >= len) {
        html_text_n(b, text, cap);
    } else {
        size_t pre = (size_t)diff;
        if (pre > cap) pre = cap;
        html_text_n(b, text, pre);
        if (pre < cap) {
            buf_puts(b, "<mark>");
            html_text_n(b, text + pre, cap - pre);
            buf_puts(b, "</mark>");
        }
    }
    if (len > cap) buf_printf(b, "&#8230; (%zu more bytes)", len - cap);
    buf_puts(b, "</div>");
}

static void section_flipped(util_buf *b, const experiment *e, size_t n, size_t max_flipped) {
    buf_puts(b, "<h2 id=\"flipped\">Flipped prompts</h2>\n");
    buf_printf(b, "<p class=\"sub\">Up to %zu per configuration and workload; the highlighted text starts at the first "
                  "character where the two answers differ.</p>\n",
               max_flipped);
    size_t shown = 0;
    for (size_t i = 0; i < n; i++) {
        for (int w = 0; w < DRIFT_WL_COUNT; w++) {
            const drift_wl_result *r = &e[i].cmp->wl[w];
            if (!e[i].cmp->present[w] || !r->n_flipped) continue;
            buf_puts(b, "<div class=\"card\"><h3>");
            html_text(b, e[i].label);
            buf_printf(b, " &#8212; %s: %ld flips of %ld</h3>\n", drift_workload_name((drift_workload)w), r->flips, r->n);
            for (size_t f = 0; f < r->n_flipped && f < max_flipped && f < e[i].n_answers[w]; f++) {
                const drift_flip *fl = &r->flipped[f];
                const drift_report_answers *an = &e[i].answers[w][f];
                const char *dir = fl->direction < 0 ? (w == DRIFT_WL_SAFETY ? "safe&#8594;unsafe" : "correct&#8594;incorrect")
                                  : fl->direction > 0 ? (w == DRIFT_WL_SAFETY ? "unsafe&#8594;safe" : "incorrect&#8594;correct")
                                                      : "semantic drift";
                const char *cls = fl->direction < 0 ? "c2i" : fl->direction > 0 ? "i2c" : "drift";
                buf_puts(b, "<div class=\"flip\"><div class=\"meta\">prompt <b>");
                html_text(b, fl->prompt_id);
                buf_printf(b, "</b> &#183; <span class=\"%s\">%s</span>", cls, dir);
                if (!isnan(fl->value)) buf_printf(b, " &#183; SDR %.3f", fl->value);
                if (!an->error) {
                    long d = drift_first_difference(an->base_text, an->targ_text);
                    if (d < 0) buf_puts(b, " &#183; identical text (the label changed through the evaluator)");
                    else buf_printf(b, " &#183; answers part at character %ld", d);
                    buf_puts(b, "</div>\n<div class=\"meta\">");
                    html_text_n(b, an->input, 300);
                    if (an->input && strlen(an->input) > 300) buf_puts(b, "&#8230;");
                    buf_puts(b, "</div>\n<div class=\"pair\"><div><div class=\"meta\">baseline ");
                    html_text(b, e[i].baseline);
                    buf_puts(b, "</div>");
                    answer_box(b, an->base_text, d);
                    buf_puts(b, "</div><div><div class=\"meta\">target ");
                    html_text(b, e[i].label);
                    buf_puts(b, "</div>");
                    answer_box(b, an->targ_text, d);
                    buf_puts(b, "</div></div>");
                } else {
                    buf_puts(b, "</div><p>answers unavailable: ");
                    html_text(b, an->error);
                    buf_puts(b, "</p>");
                }
                buf_puts(b, "</div>\n");
                shown++;
            }
            if (r->n_flipped > max_flipped)
                buf_printf(b, "<p class=\"sub\">&#8230; and %zu more (driftbench compare shows all).</p>", r->n_flipped - max_flipped);
            buf_puts(b, "</div>\n");
        }
    }
    if (!shown) buf_puts(b, "<div class=\"card\"><p>No prompt flipped.</p></div>\n");
}

/* See report_html.h. */
drift_status drift_html_render(const drift_matrix_report *r, const drift_html_opts *o, char **out, drift_error *err) {
    if (!r || !out) return drift_error_set(err, DRIFT_ERR_INVALID, "html report: missing arguments");
    *out = NULL;
    drift_html_opts def;
    drift_html_opts_default(&def);
    if (!o) o = &def;
    const experiment *e = r->experiments;
    size_t n = r->n_experiments;
    int wl_on[DRIFT_WL_COUNT] = {0}, n_wl = 0;
    for (size_t i = 0; i < n; i++)
        for (int w = 0; w < DRIFT_WL_COUNT; w++)
            if (e[i].cmp->present[w] && !wl_on[w]) {
                wl_on[w] = 1;
                n_wl++;
            }
    util_buf b = {0};
    buf_puts(&b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                 "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>");
    html_text(&b, o->title ? o->title : def.title);
    buf_puts(&b, "</title>\n<style>\n");
    buf_puts(&b, css);
    buf_puts(&b, "</style>\n</head>\n<body>\n<main>\n<h1>");
    html_text(&b, o->title ? o->title : def.title);
    buf_puts(&b, "</h1>\n<p class=\"sub\">Baseline <b>");
    html_text(&b, r->baseline);
    buf_printf(&b, "</b> &#183; %zu configurations &#183; %zu table rows &#183; generated %s by driftbench %s</p>\n", n,
               r->table->n_rows, r->generated, drift_version());
    if (o->summary_html && *o->summary_html) buf_puts(&b, o->summary_html);
    if (o->note && *o->note) {
        buf_puts(&b, "<p class=\"note\">");
        html_text(&b, o->note);
        buf_puts(&b, "</p>\n");
    }
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
    buf_printf(&b, "<div class=\"kpis\"><div class=\"kpi\"><b>%ld</b><span>flips in %ld paired answers</span></div>"
                   "<div class=\"kpi\"><b>%.2f%%</b><span>overall flip rate</span></div>"
                   "<div class=\"kpi\"><b>%.1f%%</b><span>worst cell: ",
               flips, pairs, pairs ? 100.0 * (double)flips / (double)pairs : 0.0, 100 * worst);
    html_text(&b, worst_l);
    buf_printf(&b, " / %s</span></div></div>\n", n ? drift_workload_name((drift_workload)worst_w) : "-");
    if (!n) buf_puts(&b, "<div class=\"card\"><p>No configuration with pairs against its baseline.</p></div>\n");
    else {
        section_heatmap(&b, e, n, wl_on, n_wl, r->table->dim_names);
        section_directions(&b, e, n, wl_on);
        section_taxonomy(&b, e, n);
        section_sandbox(&b, e, n);
        section_risk(&b, e, n);
        section_kl(&b, e, n, o->kl);
        section_seq_curve(&b, e, n);
    }
    if (r->analysis) {
        section_anova(&b, &r->analyses);
        section_pri(&b, &r->analyses);
    }
    section_flipped(&b, e, n, r->max_flipped);
    buf_puts(&b, "<p class=\"sub\" style=\"margin-top:30px\">Flip: the workload's label of one prompt differs between "
                 "baseline and target with deterministic decoding. Errors on either side are excluded, never counted "
                 "as flips.</p>\n</main>\n</body>\n</html>\n");
    if (!b.data) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    *out = buf_steal(&b);
    return DRIFT_OK;
}
