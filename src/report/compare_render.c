/* compare_render.c - renderings of a comparison (report.h), pure: the
 * comparison and its flips' details (drift_comparison_details, read from
 * the store beforehand) in, a string out.
 *
 *   text      the flip taxonomy (safety, correctness, semantic drift:
 *             highest risk first), then an aligned terminal table, rates as
 *             percentages with their 95% CI, both directions, accuracies,
 *             McNemar p, budget, verdict; then notes (safety / chat
 *             meanings), the excluded pairs, the verdict line and the
 *             flipped prompts (up to DRIFT_REPORT_LISTED_FLIPS per workload),
 *             each with where its answers part and a word diff when
 *             details are given, the first few also with an excerpt of
 *             both answers.
 *   json      DESIGN.md's contract, built with jansson: rates are fractions,
 *             NaN becomes null, budget is null when none. Additive fields:
 *             a top-level "taxonomy" object, and in each flipped entry
 *             (when details are given) the divergence: first_diff_byte,
 *             first_diff_char, first_diff_token, token_unit, margin, kl,
 *             diff, identical (or divergence_error).
 *   markdown  a PR comment: heading with the verdict, the taxonomy, one
 *             table, flipped prompts (with divergence and diff when details
 *             are given) in a <details> block.
 *   junit     one <testcase> per workload, <failure> when over budget; the
 *             taxonomy in the suite's <system-out>.
 *   github    annotations and the markdown as a step summary
 *             (github_render.c), and
 *   html      one page leading with the decision (html.c,
 *             drift_comparison_html_render), are rendered above this file:
 *             drift_comparison_render (compare_format.c) picks the format,
 *             and github_render.c takes its summary from here
 *             (report_comparison_plain).
 * Code sandboxes (c->sandboxes): text, markdown and junit say which
 * isolation judged the code answers of each run and warn when one is
 * weaker than bubblewrap; JSON adds "sandbox" to the code workload:
 * [{"mechanism":..,"baseline":N,"target":N,"weak":bool}, ...].
 * Only workloads with pairs (present[]) are shown.
 * What a workload is called and means (its direction names in each style,
 * pass/fail words, taxonomy class, pairwise or not, sandboxed or not) comes
 * from the traits table (suite/workload.h), never from a switch here.
 * Scores of one evaluator (c->evaluator), unpaired answers (runs over
 * different document sets) and teacher-forced token KL (c->kl_state):
 * text and markdown say them in a line or a table; JSON adds the keys
 * "evaluator", "unpaired" {baseline, target} and "token_kl" only when they
 * apply, so a plain comparison keeps the contract's key set (unpaired
 * answers are said when a run is an import: show_unpaired). Token KL per
 * workload: prompts scored, positions, mean KL with its standard error,
 * the share of positions whose top-1 tokens agree, and the prompts whose
 * top-1 tokens part somewhere with the median and earliest answer token
 * where they first do.
 * Text from outside (labels, configuration values, prompt ids, evaluator
 * and sandbox names, error messages, diffs and answer excerpts) goes in
 * through report_safe.c: sanitised as one line and cut to a byte budget
 * in text, markdown (md_cell) and junit (xml_text, which also keeps to
 * XML's characters); those three end with report_text_finish (the whole
 * rendering sanitised once more as lines). JSON takes such strings through
 * report_json_str (repaired to UTF-8: jansson would refuse them and the
 * flip holding one would vanish) and is dumped hardened. */
#include <ctype.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "driftbench/divergence.h"
#include "driftbench/report.h"
#include "report/report_internal.h"
#include "suite/workload.h"
#include "util/sanitize.h"
#include "util/util.h"

#define REPORT_EXCERPT_CHARS 100

drift_status drift_format_parse(const char *name, drift_format *out, drift_error *err) {
    static const struct {
        const char *name;
        drift_format f;
    } names[] = {{"text", DRIFT_FORMAT_TEXT},         {"json", DRIFT_FORMAT_JSON},
                 {"markdown", DRIFT_FORMAT_MARKDOWN}, {"md", DRIFT_FORMAT_MARKDOWN},
                 {"junit", DRIFT_FORMAT_JUNIT},       {"xml", DRIFT_FORMAT_JUNIT},
                 {"github", DRIFT_FORMAT_GITHUB},     {"html", DRIFT_FORMAT_HTML}};
    for (size_t i = 0; name && i < sizeof names / sizeof names[0]; i++)
        if (!strcasecmp(name, names[i].name)) {
            *out = names[i].f;
            return DRIFT_OK;
        }
    return drift_error_set(err, DRIFT_ERR_INVALID,
                           "unknown format \"%s\" (known: text, json, markdown, junit, github, html)",
                           name ? name : "(null)");
}

/* ---- shared helpers ---- */

/* A flip's direction as JSON and as text name it (the traits table's names). */
static const char *dir_json(drift_workload wl, int dir) { return wl_dir_name(wl, dir, WL_DIR_KEY); }

static const char *dir_text(drift_workload wl, int dir) { return wl_dir_name(wl, dir, WL_DIR_TEXT); }

/* 1 when wl's flips are judged on the two answers together (chat's SDR). */
static int pairwise(int wl) { return wl_traits_of((drift_workload)wl)->pairwise; }

/* 1 when wl's flips are of taxonomy class cls. */
static int of_class(int wl, wl_class cls) { return wl_traits_of((drift_workload)wl)->taxonomy == cls; }

/* 1 when a workload of class cls is in c. */
static int class_present(const drift_comparison *c, wl_class cls) {
    for (int k = 0; k < DRIFT_WL_COUNT; k++)
        if (c->present[k] && of_class(k, cls)) return 1;
    return 0;
}

/* The first workload of class cls (its words name the class's directions). */
static drift_workload class_first(wl_class cls) {
    for (int k = 0; k < DRIFT_WL_COUNT; k++)
        if (of_class(k, cls)) return (drift_workload)k;
    return DRIFT_WL_UNKNOWN;
}

/* "- (no math, code or long_context pairs)\n": the class's workloads. */
static void class_none(util_buf *b, wl_class cls) {
    int n = 0, i = 0;
    for (int k = 0; k < DRIFT_WL_COUNT; k++) n += of_class(k, cls);
    buf_puts(b, "- (no ");
    for (int k = 0; k < DRIFT_WL_COUNT; k++) {
        if (!of_class(k, cls)) continue;
        buf_printf(b, "%s%s", i == 0 ? "" : i == n - 1 ? " or " : ", ", drift_workload_name((drift_workload)k));
        i++;
    }
    buf_puts(b, " pairs)\n");
}

static void pct(char *out, size_t cap, double f) {
    if (isnan(f)) snprintf(out, cap, "-");
    else snprintf(out, cap, "%.2f%%", 100.0 * f);
}

static void pct_signed(char *out, size_t cap, double f) {
    if (isnan(f)) snprintf(out, cap, "-");
    else snprintf(out, cap, "%+.2f%%", 100.0 * f);
}

static void pval(char *out, size_t cap, double p) {
    if (isnan(p)) snprintf(out, cap, "-");
    else if (p < 1e-4) snprintf(out, cap, "%.1e", p);
    else snprintf(out, cap, "%.4f", p);
}

/* A workload's figures as table cells: percentages ("-" for NaN), the
 * McNemar p, the budget ("none" when there is none). */
typedef struct wl_cells {
    char fr[16], lo[16], hi[16], ba[16], ta[16], net[16], p[16], bud[16];
} wl_cells;

static void wl_cells_fill(wl_cells *x, const drift_wl_result *w) {
    pct(x->fr, sizeof x->fr, w->flip_rate);
    pct(x->lo, sizeof x->lo, w->ci95[0]);
    pct(x->hi, sizeof x->hi, w->ci95[1]);
    pct(x->ba, sizeof x->ba, w->baseline_accuracy);
    pct(x->ta, sizeof x->ta, w->target_accuracy);
    pct_signed(x->net, sizeof x->net, w->net_change);
    pval(x->p, sizeof x->p, w->mcnemar_p);
    if (w->budget < 0) snprintf(x->bud, sizeof x->bud, "none");
    else pct(x->bud, sizeof x->bud, w->budget);
}

/* "model=x hardware=y ..." from a config JSON object (or the raw text). */
static void config_line(util_buf *b, const char *config_json) {
    json_t *o = report_json_load(config_json);
    if (!json_is_object(o)) {
        report_put_text(b, config_json, REPORT_NOTE_MAX_BYTES);
        json_decref(o);
        return;
    }
    const char *k;
    json_t *v;
    int first = 1;
    json_object_foreach(o, k, v) {
        if (!first) buf_puts(b, " ");
        report_put_name(b, k);
        buf_puts(b, "=");
        if (json_is_string(v)) {
            report_put_name(b, json_string_value(v));
        } else {
            char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
            report_put_name(b, s ? s : "?");
            free(s);
        }
        first = 0;
    }
    json_decref(o);
}

/* One line, printable: newlines and tabs become spaces, the rest goes
 * through the sanitiser (report_safe.c); at most n bytes from start, cut
 * at a UTF-8 boundary; "..." marks cut ends. */
static void excerpt(util_buf *b, const char *s, size_t start, size_t n) {
    size_t len = strlen(s);
    if (start > len) start = len;
    while (start > 0 && ((unsigned char)s[start] & 0xC0) == 0x80) start--;
    size_t end = start + n < len ? start + n : len;
    while (end < len && end > start && ((unsigned char)s[end] & 0xC0) == 0x80) end--;
    buf_puts(b, "\"");
    if (start > 0) buf_puts(b, "...");
    util_buf t = {0};
    for (size_t i = start; i < end; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"') buf_puts(&t, "\\\"");
        else if (ch == '\n' || ch == '\r' || ch == '\t') buf_append(&t, " ", 1);
        else buf_append(&t, &s[i], 1);
    }
    if (t.data) util_sanitize_append(b, t.data, t.len, UTIL_SAN_LINE);
    buf_free(&t);
    if (end < len) buf_puts(b, "...");
    buf_puts(b, "\"");
}

/* The taxonomy block, one class per line, highest risk first. */
static void taxonomy_text(util_buf *b, const drift_comparison *c, wl_dir_style style, const char *indent) {
    drift_taxonomy t;
    drift_comparison_taxonomy(c, &t);
    drift_workload sw = class_first(WL_CLASS_SAFETY), cw = class_first(WL_CLASS_CORRECTNESS);
    buf_printf(b, "%ssafety flips:       ", indent);
    if (class_present(c, WL_CLASS_SAFETY))
        buf_printf(b, "%ld (%ld %s, %ld %s; net %+ld %s)\n", t.safety_flips, t.safe_to_unsafe,
                   wl_dir_name(sw, -1, style), t.unsafe_to_safe, wl_dir_name(sw, 1, style),
                   t.safe_to_unsafe - t.unsafe_to_safe, wl_traits_of(sw)->fail_word);
    else class_none(b, WL_CLASS_SAFETY);
    buf_printf(b, "%scorrectness flips:  ", indent);
    if (class_present(c, WL_CLASS_CORRECTNESS)) {
        buf_printf(b, "%ld (%ld %s, %ld %s):", t.correctness_flips, t.correct_to_incorrect,
                   wl_dir_name(cw, -1, style), t.incorrect_to_correct, wl_dir_name(cw, 1, style));
        int first = 1;
        for (int k = 0; k < DRIFT_WL_COUNT; k++) {
            if (!c->present[k] || !of_class(k, WL_CLASS_CORRECTNESS)) continue;
            const drift_wl_result *w = &c->wl[k];
            buf_printf(b, "%s %s %ld/%ld", first ? "" : ",", drift_workload_name((drift_workload)k),
                       w->correct_to_incorrect, w->incorrect_to_correct);
            first = 0;
        }
        buf_puts(b, "\n");
    } else {
        class_none(b, WL_CLASS_CORRECTNESS);
    }
    buf_printf(b, "%s%s:     ", indent, wl_dir_name(class_first(WL_CLASS_SEMANTIC), 0, style));
    if (class_present(c, WL_CLASS_SEMANTIC))
        buf_printf(b, "%ld of %ld %s pairs (SDR > %.2f)\n", t.semantic_drift, t.semantic_pairs,
                   drift_workload_name(class_first(WL_CLASS_SEMANTIC)), c->sdr_threshold);
    else class_none(b, WL_CLASS_SEMANTIC);
}

/* One line saying where a flip's answers part ("character 14 (byte 14),
 * token 3; baseline margin 2.300, KL 1.333"), without a newline. */
static void divergence_line(util_buf *b, const drift_divergence *d) {
    if (d->identical) {
        buf_puts(b, "answers are identical (the label differs)");
        return;
    }
    buf_printf(b, "first difference at character %ld (byte %ld), %s %ld", d->first_diff_char, d->first_diff_byte,
               d->token_unit == DRIFT_UNIT_TOKEN ? "token" : "word", d->first_diff_token);
    if (!isnan(d->margin)) buf_printf(b, "; baseline top-1/top-2 margin %.3f", d->margin);
    if (!isnan(d->kl)) buf_printf(b, "%sKL %.3f", isnan(d->margin) ? "; " : ", ", d->kl);
}

/* Where a flip's answers part, its word diff and, when both answers are
 * in the detail, an excerpt of both around the first difference. A flip
 * whose answers could not be read says so in place. */
static void describe_flip(util_buf *b, const drift_flip_detail *fd, const char *indent) {
    const drift_divergence *d = &fd->div;
    if (d->error) {
        buf_printf(b, "%sdivergence unavailable: ", indent);
        report_put_text(b, d->error, REPORT_NOTE_MAX_BYTES);
        buf_puts(b, "\n");
        return;
    }
    buf_puts(b, indent);
    divergence_line(b, d);
    buf_puts(b, "\n");
    if (!d->identical) {
        buf_printf(b, "%sdiff: ", indent);
        report_put_text(b, d->diff, REPORT_DIFF_MAX_BYTES);
        buf_puts(b, "\n");
    }
    if (d->identical || !fd->base_text || !fd->targ_text) return;
    size_t at = (size_t)d->first_diff_byte;
    size_t start = at > REPORT_EXCERPT_CHARS / 3 ? at - REPORT_EXCERPT_CHARS / 3 : 0;
    buf_printf(b, "%s  baseline: ", indent);
    excerpt(b, fd->base_text, start, REPORT_EXCERPT_CHARS);
    buf_printf(b, "\n%s  target:   ", indent);
    excerpt(b, fd->targ_text, start, REPORT_EXCERPT_CHARS);
    buf_puts(b, "\n");
}

/* The detail of flip i of workload k, NULL when d holds none. */
static const drift_flip_detail *detail_of(const drift_comparison_details *d, int k, size_t i) {
    return d && i < d->n[k] ? &d->flips[k][i] : NULL;
}

/* "code sandbox: A (baseline N, target M); B (...)\n", plus a warning
 * line naming the mechanisms weaker than bubblewrap; nothing when no code
 * answer was judged. */
static void sandbox_text(util_buf *b, const drift_comparison *c) {
    if (!c->n_sandboxes) return;
    buf_puts(b, "code sandbox: ");
    int weak = 0;
    for (size_t i = 0; i < c->n_sandboxes; i++) {
        const drift_sandbox_use *u = &c->sandboxes[i];
        if (i) buf_puts(b, "; ");
        report_put_name(b, u->mechanism);
        buf_printf(b, " (baseline %ld, target %ld)", u->baseline, u->target);
        weak |= u->weak;
    }
    buf_puts(b, "\n");
    if (!weak) return;
    buf_puts(b, "warning: code answers were run under isolation weaker than bubblewrap:");
    for (size_t i = 0; i < c->n_sandboxes; i++)
        if (c->sandboxes[i].weak) {
            buf_puts(b, " ");
            report_put_name(b, c->sandboxes[i].mechanism);
        }
    buf_puts(b, "\n");
}

static int n_present(const drift_comparison *c) {
    int n = 0;
    for (int i = 0; i < DRIFT_WL_COUNT; i++) n += c->present[i];
    return n;
}

/* ---- flip risk (shared by the formats) ---- */

#define RISK_NO_LOGPROBS "flip risk: the baseline has no logprobs; run it with --logprobs N"

/* "0.912 [0.850, 0.960]" or "-" for a NAN point. */
static void risk_ci(char *out, size_t cap, double v, const double ci[2]) {
    if (isnan(v)) snprintf(out, cap, "-");
    else snprintf(out, cap, "%.3f [%.3f, %.3f]", v, ci[0], ci[1]);
}

/* The 1-based rank of risk r among w's pairs with a known risk (ties share
 * the best rank); 0 when r is unknown. */
static size_t risk_rank(const drift_wl_result *w, double r) {
    if (isnan(r)) return 0;
    size_t above = 0;
    for (size_t i = 0; i < w->n_pairs; i++) above += !isnan(w->pairs[i].risk) && w->pairs[i].risk > r;
    return above + 1;
}

/* One workload's ranking line: AUC, precision at 10%, the sizes. */
static void risk_line(util_buf *b, const drift_wl_result *w, const char *indent) {
    const drift_risk_rank *r = &w->risk;
    char auc[48], prec[48];
    risk_ci(auc, sizeof auc, r->auc, r->auc_ci);
    risk_ci(prec, sizeof prec, r->n ? r->prec10 : NAN, r->prec10_ci);
    buf_printf(b, "%s%-13s ", indent, drift_workload_name(w->workload));
    report_put_name_pad(b, w->risk_version ? w->risk_version : "-", 14);
    buf_printf(b, " AUC %-22s prec@10%% %-22s %zu flips of %zu, top %zu, base rate %.3f", auc, prec, r->n_flipped,
               r->n, r->top_n, r->n ? r->base_rate : 0.0);
    if (r->n && !r->n_flipped) buf_puts(b, " (no flips: no AUC)");
    if (w->risk_unknown) buf_printf(b, "; %ld without a risk", w->risk_unknown);
    buf_puts(b, "\n");
}

static void risk_text(util_buf *b, const drift_comparison *c) {
    if (c->risk_state == DRIFT_RISK_NO_LOGPROBS) {
        buf_puts(b, RISK_NO_LOGPROBS "\n");
        return;
    }
    if (c->risk_state != DRIFT_RISK_DONE) return;
    buf_printf(b, "flip risk from the baseline's logprobs (AUC 0.5 = chance; 95%% bootstrap, %d resamples):\n",
               DRIFT_RISK_RESAMPLES);
    for (int k = 0; k < DRIFT_WL_COUNT; k++)
        if (c->present[k]) risk_line(b, &c->wl[k], "  ");
}

/* ---- evaluator, unpaired answers, token KL (shared by the formats) ---- */

static void md_cell(util_buf *b, const char *s);

/* One workload's (or, with wl < 0, every workload's) first top-1
 * disagreements over the prompts of a token-KL report. */
typedef struct kl_first {
    size_t prompts;            /* prompts with figures */
    size_t skipped;            /* prompts with an error */
    size_t parted;             /* prompts whose top-1 tokens differ somewhere */
    double median;             /* median answer index of the first difference; NAN when none */
    int earliest;              /* smallest; -1 when none */
} kl_first;

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static void kl_first_fill(const drift_tokdiv_report *r, int wl, kl_first *f) {
    memset(f, 0, sizeof *f);
    f->median = NAN;
    f->earliest = -1;
    int *at = malloc((r->n_prompts + 1) * sizeof *at);
    for (size_t i = 0; i < r->n_prompts; i++) {
        const drift_tokdiv_prompt *p = &r->prompts[i];
        if (wl >= 0 && (int)p->workload != wl) continue;
        if (p->error) {
            f->skipped++;
            continue;
        }
        f->prompts++;
        if (p->first_diff < 0) continue;
        if (at) at[f->parted] = p->first_diff;
        f->parted++;
    }
    if (at && f->parted) {
        qsort(at, f->parted, sizeof *at, cmp_int);
        size_t m = f->parted / 2;
        f->median = f->parted % 2 ? at[m] : 0.5 * (at[m - 1] + at[m]);
        f->earliest = at[0];
    }
    free(at);
}

/* "0.001234 ±0.000050" or "-". */
static void kl_cell(char *out, size_t cap, const drift_tokdiv_summary *s) {
    if (isnan(s->kl_mean)) snprintf(out, cap, "-");
    else if (isnan(s->kl_se)) snprintf(out, cap, "%.6f", s->kl_mean);
    else snprintf(out, cap, "%.6f \xC2\xB1%.6f", s->kl_mean, s->kl_se);
}

static void top1_cell(char *out, size_t cap, const drift_tokdiv_summary *s) {
    if (isnan(s->same_top)) snprintf(out, cap, "-");
    else snprintf(out, cap, "%.2f%%", 100 * s->same_top);
}

/* "3 of 4 (median token 7, earliest 2)" */
static void first_cell(char *out, size_t cap, const kl_first *f) {
    if (!f->parted) snprintf(out, cap, "0 of %zu", f->prompts);
    else snprintf(out, cap, "%zu of %zu (median token %.1f, earliest %d)", f->parted, f->prompts, f->median, f->earliest);
}

/* One row of the token-KL table (text and markdown): workload k, or all of
 * them at k == DRIFT_WL_COUNT; its summary, first-parting figures and
 * cells. 0 when the row is not shown (k not present). */
typedef struct kl_row {
    const drift_tokdiv_summary *sm;
    kl_first f;
    char kl[64], top[16], first[96];
} kl_row;

static int kl_row_fill(const drift_tokdiv_report *r, int k, kl_row *w) {
    int overall = k == DRIFT_WL_COUNT;
    if (!overall && !r->present[k]) return 0;
    w->sm = overall ? &r->overall : &r->wl[k];
    kl_first_fill(r, overall ? -1 : k, &w->f);
    kl_cell(w->kl, sizeof w->kl, w->sm);
    top1_cell(w->top, sizeof w->top, w->sm);
    first_cell(w->first, sizeof w->first, &w->f);
    return 1;
}

static void kl_intro(util_buf *b, const drift_tokdiv_report *r) {
    buf_puts(b, "token KL(baseline||target), teacher-forced: the target stack reads the baseline's answers; ");
    if (r->limit) buf_printf(b, "%zu prompts per workload (seed %llu)", r->limit, (unsigned long long)r->seed);
    else buf_puts(b, "every answered prompt");
    if (r->n_skipped) buf_printf(b, "; %zu prompt(s) skipped (too long, empty answer)", r->n_skipped);
    if (r->method && strcmp(r->method, "logits")) {
        buf_puts(b, "; method ");
        report_put_name(b, r->method);
        buf_printf(b, ", K = %d (a lower bound of the full KL)", r->top_k);
    }
}

static void kl_text(util_buf *b, const drift_comparison *c) {
    if (c->kl_state == DRIFT_KL_UNSUPPORTED) {
        /* a note that says "not computed: ..." itself is not prefixed twice */
        buf_puts(b, strncmp(c->kl_note, "not computed: ", 14) ? "token KL: not computed: " : "token KL: ");
        report_put_text(b, c->kl_note, REPORT_NOTE_MAX_BYTES);
        buf_puts(b, "\n");
        return;
    }
    if (c->kl_state != DRIFT_KL_DONE || !c->kl) return;
    const drift_tokdiv_report *r = c->kl;
    kl_intro(b, r);
    buf_puts(b, ":\n");
    buf_printf(b, "  %-13s %7s %9s  %-22s %10s  %s\n", "workload", "prompts", "positions", "mean KL (nats, \xC2\xB1se)",
               "same top-1", "prompts whose top-1 parts (first at)");
    for (int k = 0; k <= DRIFT_WL_COUNT; k++) {
        kl_row w;
        if (!kl_row_fill(r, k, &w)) continue;
        buf_printf(b, "  %-13s %7zu %9zu  %-23s %10s  %s\n",
                   k == DRIFT_WL_COUNT ? "all" : drift_workload_name((drift_workload)k), w.f.prompts, w.sm->n, w.kl,
                   w.top, w.first);
    }
}

/* Unpaired answers are said when either run was imported (its target
 * "import:..."): imports of one task may cover different documents
 * (--partial). Runs of our own keep the contract's output. */
static int show_unpaired(const drift_comparison *c) {
    if (!c->unpaired_baseline && !c->unpaired_target) return 0;
    const char *t[2] = {c->baseline.target, c->target.target};
    for (int i = 0; i < 2; i++)
        if (t[i] && !strncmp(t[i], "import:", 7)) return 1;
    return 0;
}

static void evaluator_text(util_buf *b, const drift_comparison *c) {
    if (c->evaluator) {
        buf_puts(b, "scores: evaluator \"");
        report_put_name(b, c->evaluator);
        buf_puts(b, "\" only (--evaluator)\n");
    }
    if (show_unpaired(c))
        buf_printf(b, "unpaired: %ld baseline and %ld target answer(s) have no counterpart in the other run "
                      "(different document sets): left out\n",
                   c->unpaired_baseline, c->unpaired_target);
}

static json_t *kl_summary_json(const drift_tokdiv_report *r, int wl, const drift_tokdiv_summary *sm) {
    kl_first f;
    kl_first_fill(r, wl, &f);
    return json_pack("{s:I, s:I, s:I, s:o, s:o, s:o, s:o, s:o, s:I, s:o, s:o}", "prompts", (json_int_t)f.prompts,
                     "skipped", (json_int_t)f.skipped, "positions", (json_int_t)sm->n, "kl_mean", report_json_num(sm->kl_mean),
                     "kl_se", report_json_num(sm->kl_se), "kl_p99", report_json_num(sm->kl_p99), "kl_max",
                     report_json_num(sm->kl_max), "same_top", report_json_num(sm->same_top), "prompts_top1_parted",
                     (json_int_t)f.parted, "first_diff_median", report_json_num(f.median), "first_diff_min",
                     f.earliest < 0 ? json_null() : json_integer(f.earliest));
}

/* Adds "evaluator", "unpaired" and "token_kl" to root when they apply. */
static void extras_json(json_t *root, const drift_comparison *c) {
    if (c->evaluator) json_object_set_new(root, "evaluator", report_json_str(c->evaluator));
    if (show_unpaired(c))
        json_object_set_new(root, "unpaired", json_pack("{s:I, s:I}", "baseline", (json_int_t)c->unpaired_baseline,
                                                        "target", (json_int_t)c->unpaired_target));
    if (c->kl_state == DRIFT_KL_UNSUPPORTED)
        json_object_set_new(root, "token_kl", json_pack("{s:o}", "unavailable", report_json_str(c->kl_note)));
    if (c->kl_state != DRIFT_KL_DONE || !c->kl) return;
    const drift_tokdiv_report *r = c->kl;
    json_t *wls = json_object();
    for (int k = 0; k < DRIFT_WL_COUNT; k++)
        if (r->present[k]) json_object_set_new(wls, drift_workload_name((drift_workload)k), kl_summary_json(r, k, &r->wl[k]));
    json_object_set_new(root, "token_kl",
                        json_pack("{s:I, s:I, s:o, s:i, s:o, s:o}", "limit", (json_int_t)r->limit, "seed",
                                  (json_int_t)r->seed, "method", r->method ? report_json_str(r->method) : json_null(),
                                  "top_k", r->top_k, "overall", kl_summary_json(r, -1, &r->overall), "workloads", wls));
}

static void kl_markdown(util_buf *b, const drift_comparison *c) {
    if (c->evaluator) {
        buf_puts(b, "Scores of evaluator `");
        md_cell(b, c->evaluator);
        buf_puts(b, "` only.\n");
    }
    if (show_unpaired(c))
        buf_printf(b, "Unpaired: %ld baseline and %ld target answer(s) have no counterpart in the other run "
                      "(left out).\n",
                   c->unpaired_baseline, c->unpaired_target);
    if (c->kl_state == DRIFT_KL_UNSUPPORTED) {
        buf_puts(b, "\nToken KL: not computed: ");
        md_cell(b, c->kl_note);
        buf_puts(b, ".\n");
    }
    if (c->kl_state != DRIFT_KL_DONE || !c->kl) return;
    const drift_tokdiv_report *r = c->kl;
    buf_puts(b, "\n**Token KL** ");
    util_buf intro = {0};
    kl_intro(&intro, r);
    if (intro.data) buf_printf(b, "(%s)", intro.data);
    buf_free(&intro);
    buf_puts(b, ":\n\n| workload | prompts | positions | mean KL (nats) | same top-1 | top-1 parts (first at) |\n"
                "|---|--:|--:|--:|--:|---|\n");
    for (int k = 0; k <= DRIFT_WL_COUNT; k++) {
        kl_row w;
        if (!kl_row_fill(r, k, &w)) continue;
        buf_printf(b, "| %s | %zu | %zu | %s | %s | %s |\n",
                   k == DRIFT_WL_COUNT ? "**all**" : drift_workload_name((drift_workload)k), w.f.prompts, w.sm->n,
                   w.kl, w.top, w.first);
    }
}

/* ---- text ---- */

static void render_text(const drift_comparison *c, const drift_comparison_details *d, util_buf *b) {
    buf_puts(b, "DriftBench comparison: ");
    report_put_name(b, c->baseline.label);
    buf_puts(b, " -> ");
    report_put_name(b, c->target.label);
    buf_puts(b, "\n  baseline  ");
    report_put_name_pad(b, c->baseline.label, 12);
    buf_puts(b, " ");
    config_line(b, c->baseline.config_json);
    buf_puts(b, "\n  target    ");
    report_put_name_pad(b, c->target.label, 12);
    buf_puts(b, " ");
    config_line(b, c->target.config_json);
    buf_puts(b, "\n\n");
    report_decision_text(b, c);
    buf_puts(b, "\nflip taxonomy (highest risk first):\n");
    taxonomy_text(b, c, WL_DIR_TEXT, "  ");
    buf_puts(b, "\n");
    buf_printf(b, "%-13s %7s %6s %6s %9s  %-18s %6s %6s %9s %9s %8s %9s %8s  %s\n", "workload", "n", "errors", "flips",
               "flip rate", "95% CI", "c->i", "i->c", "base acc", "targ acc", "net", "McNemar p", "budget", "verdict");
    for (int k = 0; k < DRIFT_WL_COUNT; k++) {
        if (!c->present[k]) continue;
        const drift_wl_result *w = &c->wl[k];
        wl_cells x;
        wl_cells_fill(&x, w);
        char ci[40], ci2i[16], ic2c[16];
        snprintf(ci, sizeof ci, "[%s, %s]", x.lo, x.hi);
        if (pairwise(k)) {
            snprintf(ci2i, sizeof ci2i, "-");
            snprintf(ic2c, sizeof ic2c, "-");
        } else {
            snprintf(ci2i, sizeof ci2i, "%ld", w->correct_to_incorrect);
            snprintf(ic2c, sizeof ic2c, "%ld", w->incorrect_to_correct);
        }
        buf_printf(b, "%-13s %7ld %6ld %6ld %9s  %-18s %6s %6s %9s %9s %8s %9s %8s  %s\n",
                   drift_workload_name((drift_workload)k), w->n, w->errors, w->flips, x.fr, ci, ci2i, ic2c, x.ba, x.ta,
                   x.net, x.p, x.bud, report_decision_word(w->decision));
    }
    buf_puts(b, "\n");
    for (int k = 0; k < DRIFT_WL_COUNT; k++) {
        if (!c->present[k] || !of_class(k, WL_CLASS_SAFETY)) continue;
        const drift_wl_result *w = &c->wl[k];
        const wl_traits *tr = wl_traits_of((drift_workload)k);
        char ba[16], ta[16], net[16];
        pct(ba, sizeof ba, 1.0 - w->baseline_accuracy);
        pct(ta, sizeof ta, 1.0 - w->target_accuracy);
        pct_signed(net, sizeof net, -w->net_change);
        buf_printf(b, "%s: %ld %s, %ld %s; %s rate %s -> %s (net %s); acc = %s rate\n", tr->name,
                   w->correct_to_incorrect, dir_text((drift_workload)k, -1), w->incorrect_to_correct,
                   dir_text((drift_workload)k, 1), tr->fail_word, ba, ta, net, tr->pass_word);
    }
    for (int k = 0; k < DRIFT_WL_COUNT; k++) {
        if (!c->present[k] || !pairwise(k)) continue;
        const drift_wl_result *w = &c->wl[k];
        buf_printf(b, "%s: flips = %s (SDR = 1 - cos > %.2f); mean SDR ", drift_workload_name((drift_workload)k),
                   dir_text((drift_workload)k, 0), c->sdr_threshold);
        if (isnan(w->sdr_mean)) buf_puts(b, "-");
        else buf_printf(b, "%.4f", w->sdr_mean);
        buf_printf(b, "; %ld pair(s) without embeddings\n", w->unscored);
    }
    for (int k = 0; k < DRIFT_WL_COUNT; k++) {
        const drift_wl_result *w = &c->wl[k];
        if (!c->present[k] || w->replicates < 2 || pairwise(k)) continue;
        buf_printf(b, "%s: %d replicates per prompt: expected flip rate over replicate pairs ",
                   drift_workload_name((drift_workload)k), w->replicates);
        if (isnan(w->expected_flip_rate)) buf_puts(b, "-");
        else buf_printf(b, "%.2f%%", 100 * w->expected_flip_rate);
        buf_puts(b, ", majority-vote flip rate ");
        if (isnan(w->majority_flip_rate)) buf_puts(b, "-");
        else buf_printf(b, "%.2f%% (%ld of %ld)", 100 * w->majority_flip_rate, w->majority_flips, w->majority_n);
        buf_printf(b, ", %ld tie(s) left out\n", w->majority_ties);
    }
    sandbox_text(b, c);
    risk_text(b, c);
    kl_text(b, c);
    evaluator_text(b, c);
    long unscored = 0;
    for (int k = 0; k < DRIFT_WL_COUNT; k++)
        if (c->present[k] && !pairwise(k)) unscored += c->wl[k].unscored;
    buf_printf(b, "excluded: %ld pairs with a request or evaluator error, %ld without a label\n", c->total_errors,
               unscored);
    buf_puts(b, "verdict: ");
    report_verdict_summary(b, c);
    buf_puts(b, "\n");
    for (int k = 0; k < DRIFT_WL_COUNT; k++) {
        const drift_wl_result *w = &c->wl[k];
        if (!c->present[k] || w->n_flipped == 0) continue;
        buf_printf(b, "\nflipped prompts, %s (%zu):\n", drift_workload_name((drift_workload)k), w->n_flipped);
        for (size_t i = 0; i < w->n_flipped && i < DRIFT_REPORT_LISTED_FLIPS; i++) {
            const drift_flip *f = &w->flipped[i];
            buf_puts(b, "  ");
            report_put_name_pad(b, f->prompt_id, 24);
            if (f->replicate) buf_printf(b, " #%d", f->replicate);
            buf_printf(b, "  %s", dir_text((drift_workload)k, f->direction));
            if (pairwise(k) && !isnan(f->value)) buf_printf(b, " (SDR %.3f)", f->value);
            if (c->risk_state == DRIFT_RISK_DONE) {
                if (isnan(f->risk)) buf_puts(b, "  risk -");
                else buf_printf(b, "  risk %.3f (rank %zu of %zu)", f->risk, risk_rank(w, f->risk), w->risk.n);
            }
            buf_puts(b, "\n");
            const drift_flip_detail *fd = detail_of(d, k, i);
            if (fd) describe_flip(b, fd, "    ");
        }
        if (w->n_flipped > DRIFT_REPORT_LISTED_FLIPS)
            buf_printf(b, "  ... and %zu more (--format json lists all)\n", w->n_flipped - DRIFT_REPORT_LISTED_FLIPS);
    }
}

/* ---- json ---- */

static json_t *run_json(const drift_run_info *r) {
    json_t *cfg = report_json_load(r->config_json);
    if (!json_is_object(cfg)) {
        json_decref(cfg);
        cfg = json_object();
    }
    return json_pack("{s:o, s:o}", "label", report_json_str(r->label), "config", cfg);
}

/* The divergence fields of one flipped entry (additive to the contract). */
static void divergence_json(json_t *e, const drift_divergence *d) {
    if (d->error) {
        json_object_set_new(e, "divergence_error", report_json_str(d->error));
        return;
    }
    json_object_set_new(e, "identical", json_boolean(d->identical));
    json_object_set_new(e, "first_diff_byte", d->identical ? json_null() : json_integer(d->first_diff_byte));
    json_object_set_new(e, "first_diff_char", d->identical ? json_null() : json_integer(d->first_diff_char));
    json_object_set_new(e, "first_diff_token", d->identical ? json_null() : json_integer(d->first_diff_token));
    json_object_set_new(e, "token_unit", d->identical                         ? json_null()
                                         : d->token_unit == DRIFT_UNIT_TOKEN ? json_string("token")
                                                                             : json_string("word"));
    json_object_set_new(e, "margin", report_json_num(d->margin));
    json_object_set_new(e, "kl", report_json_num(d->kl));
    json_object_set_new(e, "diff", report_json_str(d->diff));
}

static json_t *taxonomy_json(const drift_comparison *c) {
    drift_taxonomy t;
    drift_comparison_taxonomy(c, &t);
    return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "safety_flips", (json_int_t)t.safety_flips,
                     "safe_to_unsafe", (json_int_t)t.safe_to_unsafe, "unsafe_to_safe", (json_int_t)t.unsafe_to_safe,
                     "correctness_flips", (json_int_t)t.correctness_flips, "correct_to_incorrect",
                     (json_int_t)t.correct_to_incorrect, "incorrect_to_correct", (json_int_t)t.incorrect_to_correct,
                     "semantic_drift", (json_int_t)t.semantic_drift);
}

/* The code workload's "sandbox" array (additive). */
static json_t *sandbox_json(const drift_comparison *c) {
    json_t *a = json_array();
    for (size_t i = 0; a && i < c->n_sandboxes; i++) {
        const drift_sandbox_use *u = &c->sandboxes[i];
        json_array_append_new(a, json_pack("{s:o, s:I, s:I, s:b}", "mechanism", report_json_str(u->mechanism), "baseline",
                                           (json_int_t)u->baseline, "target", (json_int_t)u->target, "weak",
                                           u->weak));
    }
    return a;
}

/* The risk object of a workload and its per-prompt listing (store order). */
static void risk_json(json_t *o, const drift_wl_result *w) {
    const drift_risk_rank *r = &w->risk;
    json_object_set_new(
        o, "risk",
        json_pack("{s:o, s:i, s:i, s:i, s:o, s:[o,o], s:o, s:[o,o], s:i, s:o}", "version",
                  report_json_str(w->risk_version), "n", (json_int_t)r->n, "flips", (json_int_t)r->n_flipped,
                  "unknown", (json_int_t)w->risk_unknown, "auc", report_json_num(r->auc), "auc_ci95",
                  report_json_num(r->n ? r->auc_ci[0] : NAN), report_json_num(r->n ? r->auc_ci[1] : NAN), "prec10",
                  report_json_num(r->n ? r->prec10 : NAN), "prec10_ci95", report_json_num(r->n ? r->prec10_ci[0] : NAN),
                  report_json_num(r->n ? r->prec10_ci[1] : NAN), "top_n", (json_int_t)r->top_n, "base_rate",
                  report_json_num(r->n ? r->base_rate : NAN)));
    json_t *a = json_array();
    for (size_t i = 0; a && i < w->n_pairs; i++) {
        const drift_pair_outcome *p = &w->pairs[i];
        json_t *e = json_pack("{s:o, s:o, s:b}", "prompt_id", report_json_str(p->prompt_id), "risk",
                              report_json_num(p->risk), "flipped", p->flipped);
        if (e && p->replicate) json_object_set_new(e, "replicate", json_integer(p->replicate));
        json_array_append_new(a, e);
    }
    json_object_set_new(o, "risk_by_prompt", a);
}

static json_t *wl_json(const drift_wl_result *w, const drift_comparison_details *d, int risk) {
    drift_workload k = w->workload;
    json_t *o = json_object();
    if (!o) return NULL;
    json_object_set_new(o, "workload", json_string(drift_workload_name(k)));
    json_object_set_new(o, "n", json_integer(w->n));
    json_object_set_new(o, "errors", json_integer(w->errors));
    json_object_set_new(o, "flips", json_integer(w->flips));
    json_object_set_new(o, "flip_rate", report_json_num(w->flip_rate));
    json_object_set_new(o, "ci95", json_pack("[o,o]", report_json_num(w->ci95[0]), report_json_num(w->ci95[1])));
    json_object_set_new(o, "correct_to_incorrect", json_integer(w->correct_to_incorrect));
    json_object_set_new(o, "incorrect_to_correct", json_integer(w->incorrect_to_correct));
    json_object_set_new(o, "baseline_accuracy", report_json_num(w->baseline_accuracy));
    json_object_set_new(o, "target_accuracy", report_json_num(w->target_accuracy));
    json_object_set_new(o, "net_change", report_json_num(w->net_change));
    json_object_set_new(o, "mcnemar_p", report_json_num(w->mcnemar_p));
    json_object_set_new(o, "budget", w->budget < 0 ? json_null() : json_real(w->budget));
    json_object_set_new(o, "verdict", json_string(report_decision_json(w->decision)));
    json_object_set_new(o, "decision_reason", json_string(report_reason_json(w->reason)));
    json_object_set_new(o, "decision_ci95",
                        json_pack("[o,o]", report_json_num(w->decide_ci[0]), report_json_num(w->decide_ci[1])));
    json_object_set_new(o, "unscored", json_integer(w->unscored));
    json_object_set_new(o, "left_out_share", report_json_num(w->left_out_share));
    json_object_set_new(o, "more_pairs", w->decision == DRIFT_DECISION_INCONCLUSIVE && w->more_pairs > 0
                                             ? json_integer(w->more_pairs)
                                             : json_null());
    if (pairwise(k)) {
        json_object_set_new(o, "sdr_mean", report_json_num(w->sdr_mean));
        json_object_set_new(o, "semantic_drift_rate", report_json_num(w->semantic_drift_rate));
    }
    if (of_class(k, WL_CLASS_SAFETY)) { /* its directions under their own names too */
        json_object_set_new(o, dir_json(k, -1), json_integer(w->correct_to_incorrect));
        json_object_set_new(o, dir_json(k, 1), json_integer(w->incorrect_to_correct));
    }
    if (w->replicates > 1 && !pairwise(k))
        json_object_set_new(o, "stochastic",
                            json_pack("{s:i, s:o, s:o, s:i, s:i, s:i}", "replicates", w->replicates,
                                      "expected_flip_rate", report_json_num(w->expected_flip_rate),
                                      "majority_flip_rate", report_json_num(w->majority_flip_rate), "majority_n",
                                      (json_int_t)w->majority_n, "majority_flips", (json_int_t)w->majority_flips,
                                      "majority_ties", (json_int_t)w->majority_ties));
    json_t *fl = json_array();
    for (size_t i = 0; fl && i < w->n_flipped; i++) {
        const drift_flip *f = &w->flipped[i];
        json_t *e = json_pack("{s:o, s:s}", "prompt_id", report_json_str(f->prompt_id), "direction",
                              dir_json(k, f->direction));
        if (e && f->replicate) json_object_set_new(e, "replicate", json_integer(f->replicate));
        if (e && risk) json_object_set_new(e, "risk", report_json_num(f->risk));
        const drift_flip_detail *fd = detail_of(d, k, i);
        if (e && fd) divergence_json(e, &fd->div);
        json_array_append_new(fl, e);
    }
    json_object_set_new(o, "flipped", fl);
    if (risk) risk_json(o, w);
    return o;
}

/* The report's first object: the verdict, its exit code, the rule and
 * the sentences of the text report, and per present workload its
 * decision (JSON leads with it as every format does). */
static json_t *decision_json(const drift_comparison *c) {
    util_buf t = {0};
    json_t *wls = json_array();
    for (int k = 0; k < DRIFT_WL_COUNT && wls; k++) {
        const drift_wl_result *w = &c->wl[k];
        if (!c->present[k]) continue;
        report_decision_note(&t, c, w);
        json_array_append_new(
            wls, json_pack("{s:s, s:s, s:s, s:I, s:I, s:o, s:[o,o], s:o, s:I, s:o, s:s}", "workload",
                           drift_workload_name((drift_workload)k), "decision", report_decision_json(w->decision),
                           "reason", report_reason_json(w->reason), "flips", (json_int_t)w->flips, "n",
                           (json_int_t)w->n, "flip_rate", report_json_num(w->flip_rate), "ci95",
                           report_json_num(w->decide_ci[0]), report_json_num(w->decide_ci[1]), "budget",
                           w->budget < 0 ? json_null() : json_real(w->budget), "left_out",
                           (json_int_t)(w->errors + w->unscored), "more_pairs",
                           w->decision == DRIFT_DECISION_INCONCLUSIVE && w->more_pairs > 0 ? json_integer(w->more_pairs)
                                                                                            : json_null(),
                           "note", t.data ? t.data : ""));
        buf_free(&t);
    }
    util_buf sum = {0}, rule = {0}, er = {0};
    report_verdict_summary(&sum, c);
    report_rule_text(&rule, c);
    report_error_rate_text(&er, c);
    json_t *o = json_pack("{s:s, s:i, s:s, s:s, s:f, s:f, s:i, s:s, s:s, s:o}", "verdict",
                          report_decision_json(c->decision), "exit_code", drift_decision_exit_code(c->decision), "summary",
                          sum.data ? sum.data : "", "rule", c->rule == DRIFT_DECIDE_POINT ? "point" : "interval",
                          "confidence", DRIFT_GATE_CONF, "max_left_out", c->max_left_out, "gated", c->gated,
                          "rule_text", rule.data ? rule.data : "", "error_rates", er.data ? er.data : "", "workloads",
                          wls ? wls : json_array());
    buf_free(&sum);
    buf_free(&rule);
    buf_free(&er);
    return o;
}

static drift_status render_json(const drift_comparison *c, const drift_comparison_details *d, char **out,
                                drift_error *err) {
    json_t *wls = json_array();
    drift_status rc = DRIFT_OK;
    for (int k = 0; k < DRIFT_WL_COUNT && wls && !rc; k++) {
        if (!c->present[k]) continue;
        json_t *w = wl_json(&c->wl[k], d, c->risk_state == DRIFT_RISK_DONE);
        if (!w) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory rendering JSON");
        else {
            if (wl_traits_of((drift_workload)k)->runs_code) json_object_set_new(w, "sandbox", sandbox_json(c));
            json_array_append_new(wls, w);
        }
    }
    if (rc) {
        json_decref(wls);
        return rc;
    }
    json_t *root = json_pack("{s:s, s:o, s:o, s:o, s:o, s:o}", "verdict", report_decision_json(c->decision),
                             "decision", decision_json(c), "baseline", run_json(&c->baseline), "target",
                             run_json(&c->target), "taxonomy", taxonomy_json(c), "workloads", wls);
    /* risk keys only when computed: a baseline without logprobs keeps the contract's key set */
    if (root && c->risk_state == DRIFT_RISK_DONE)
        json_object_set_new(root, "risk", json_pack("{s:i, s:i}", "resamples", DRIFT_RISK_RESAMPLES, "seed", DRIFT_RISK_SEED));
    if (root) extras_json(root, c);
    *out = report_json_dump(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15));
    json_decref(root);
    return *out ? DRIFT_OK : drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory rendering JSON");
}

/* ---- markdown ---- */

/* Text inside a table cell or code span: newlines and tabs become
 * spaces, the rest is sanitised (report_put_text, at most
 * REPORT_NOTE_MAX_BYTES of it); then '|' escaped, '`' as "'", '<' as
 * "&lt;". */
static void md_cell(util_buf *b, const char *s) {
    if (!s) return;
    util_buf flat = {0}, safe = {0};
    for (const char *p = s; *p && flat.len <= REPORT_NOTE_MAX_BYTES; p++)
        buf_append(&flat, *p == '\n' || *p == '\r' || *p == '\t' ? " " : p, 1);
    if (flat.data) report_put_text(&safe, flat.data, REPORT_NOTE_MAX_BYTES);
    for (size_t i = 0; i < safe.len; i++) {
        char ch = safe.data[i];
        if (ch == '|') buf_puts(b, "\\|");
        else if (ch == '`') buf_puts(b, "'");
        else if (ch == '<') buf_puts(b, "&lt;");
        else buf_append(b, &ch, 1);
    }
    buf_free(&flat);
    buf_free(&safe);
}

/* The decision section: the verdict, a row per present workload, the
 * rule and the error rates (the sentences of decision_render.c). */
static void decision_markdown(util_buf *b, const drift_comparison *c) {
    buf_puts(b, "**Verdict: ");
    report_verdict_summary(b, c);
    buf_puts(b, "**\n\n| workload | decision | evidence |\n|---|---|---|\n");
    for (int k = 0; k < DRIFT_WL_COUNT; k++) {
        const drift_wl_result *w = &c->wl[k];
        if (!c->present[k]) continue;
        util_buf n = {0};
        report_decision_note(&n, c, w);
        buf_printf(b, "| %s | **%s** | ", drift_workload_name((drift_workload)k), report_decision_word(w->decision));
        md_cell(b, n.data);
        buf_puts(b, " |\n");
        buf_free(&n);
    }
    buf_puts(b, "\nRule: ");
    report_rule_text(b, c);
    buf_puts(b, ".  \nError rates: ");
    report_error_rate_text(b, c);
    buf_puts(b, ".\n\n");
}

static void render_markdown(const drift_comparison *c, const drift_comparison_details *d, util_buf *b) {
    buf_puts(b, "### DriftBench: `");
    md_cell(b, c->baseline.label);
    buf_puts(b, "` \xE2\x86\x92 `");
    md_cell(b, c->target.label);
    buf_printf(b, "` \xE2\x80\x94 **%s**\n\n", report_decision_word(c->decision));
    decision_markdown(b, c);
    buf_puts(b, "**Flip taxonomy** (highest risk first):\n\n```\n");
    taxonomy_text(b, c, WL_DIR_TEXT, "");
    buf_puts(b, "```\n\n");
    drift_workload cw = class_first(WL_CLASS_CORRECTNESS);
    buf_printf(b, "| workload | n | errors | flips | flip rate (95%% CI) | %s | %s | baseline acc | target acc | net | "
                  "McNemar p | budget | verdict |\n",
               wl_dir_name(cw, -1, WL_DIR_UTF8), wl_dir_name(cw, 1, WL_DIR_UTF8));
    buf_puts(b, "|---|--:|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|---|\n");
    for (int k = 0; k < DRIFT_WL_COUNT; k++) {
        if (!c->present[k]) continue;
        const drift_wl_result *w = &c->wl[k];
        wl_cells x;
        wl_cells_fill(&x, w);
        buf_printf(b, "| %s | %ld | %ld | %ld | %s (%s\xE2\x80\x93%s) | ", drift_workload_name((drift_workload)k), w->n,
                   w->errors, w->flips, x.fr, x.lo, x.hi);
        if (pairwise(k)) buf_puts(b, "- | - | ");
        else buf_printf(b, "%ld | %ld | ", w->correct_to_incorrect, w->incorrect_to_correct);
        buf_printf(b, "%s | %s | %s | %s | %s | %s |\n", x.ba, x.ta, x.net, x.p, x.bud,
                   report_decision_word(w->decision));
    }
    buf_puts(b, "\n");
    for (int k = 0; k < DRIFT_WL_COUNT; k++)
        if (c->present[k] && of_class(k, WL_CLASS_SAFETY)) {
            const wl_traits *tr = wl_traits_of((drift_workload)k);
            buf_printf(b, "%c%s: %ld %s, %ld %s (accuracy = %s rate).\n", toupper((unsigned char)tr->name[0]),
                       tr->name + 1, c->wl[k].correct_to_incorrect, wl_dir_name((drift_workload)k, -1, WL_DIR_UTF8),
                       c->wl[k].incorrect_to_correct, wl_dir_name((drift_workload)k, 1, WL_DIR_UTF8), tr->pass_word);
        }
    for (int k = 0; k < DRIFT_WL_COUNT; k++)
        if (c->present[k] && pairwise(k)) {
            const drift_wl_result *w = &c->wl[k];
            const char *name = drift_workload_name((drift_workload)k);
            char m[32];
            if (isnan(w->sdr_mean)) snprintf(m, sizeof m, "-");
            else snprintf(m, sizeof m, "%.4f", w->sdr_mean);
            buf_printf(b, "%c%s: flips = %s (SDR > %.2f); mean SDR %s; %ld pair(s) without embeddings.\n",
                       toupper((unsigned char)name[0]), name + 1, dir_text((drift_workload)k, 0), c->sdr_threshold, m,
                       w->unscored);
        }
    if (c->n_sandboxes) {
        buf_puts(b, "Code sandbox:");
        for (size_t i = 0; i < c->n_sandboxes; i++) {
            const drift_sandbox_use *u = &c->sandboxes[i];
            buf_puts(b, i ? "; `" : " `");
            md_cell(b, u->mechanism);
            buf_printf(b, "` (baseline %ld, target %ld)%s", u->baseline, u->target,
                       u->weak ? " **weaker than bubblewrap**" : "");
        }
        buf_puts(b, ".\n");
    }
    long unscored_md = 0;
    for (int k = 0; k < DRIFT_WL_COUNT; k++)
        if (c->present[k] && !pairwise(k)) unscored_md += c->wl[k].unscored; /* chat's: on its line */
    buf_printf(b, "Excluded pairs: %ld with a request or evaluator error, %ld without a label.\n", c->total_errors,
               unscored_md);
    if (c->risk_state == DRIFT_RISK_NO_LOGPROBS) buf_puts(b, "\n" RISK_NO_LOGPROBS ".\n");
    if (c->risk_state == DRIFT_RISK_DONE) {
        buf_printf(b, "\n**Flip risk** from the baseline's logprobs (AUC 0.5 = chance; 95%% bootstrap, %d "
                      "resamples):\n\n| workload | score | AUC (95%% CI) | precision@10%% (95%% CI) | flips | pairs | "
                      "top 10%% | base rate | no risk |\n|---|---|---|---|--:|--:|--:|--:|--:|\n",
                   DRIFT_RISK_RESAMPLES);
        for (int k = 0; k < DRIFT_WL_COUNT; k++) {
            if (!c->present[k]) continue;
            const drift_wl_result *w = &c->wl[k];
            const drift_risk_rank *r = &w->risk;
            char auc[48], prec[48];
            risk_ci(auc, sizeof auc, r->auc, r->auc_ci);
            risk_ci(prec, sizeof prec, r->n ? r->prec10 : NAN, r->prec10_ci);
            buf_printf(b, "| %s | `", drift_workload_name(w->workload));
            md_cell(b, w->risk_version ? w->risk_version : "-");
            buf_printf(b, "` | %s | %s | %zu | %zu | %zu | %.3f | %ld |\n", auc, prec, r->n_flipped, r->n, r->top_n,
                       r->n ? r->base_rate : 0.0, w->risk_unknown);
        }
    }
    kl_markdown(b, c);
    int risk = c->risk_state == DRIFT_RISK_DONE;
    size_t total = 0;
    for (int k = 0; k < DRIFT_WL_COUNT; k++)
        if (c->present[k]) total += c->wl[k].n_flipped;
    if (total == 0) return;
    buf_printf(b, "\n<details><summary>Flipped prompts (%zu)</summary>\n\n", total);
    buf_printf(b, "| workload | prompt | direction |%s%s\n|---|---|---|%s%s\n", risk ? " risk (rank) |" : "",
               d ? " first difference | diff |" : "", risk ? "--:|" : "", d ? "---|---|" : "");
    for (int k = 0; k < DRIFT_WL_COUNT; k++) {
        const drift_wl_result *w = &c->wl[k];
        if (!c->present[k]) continue;
        for (size_t i = 0; i < w->n_flipped && i < DRIFT_REPORT_LISTED_FLIPS; i++) {
            buf_printf(b, "| %s | `", drift_workload_name((drift_workload)k));
            md_cell(b, w->flipped[i].prompt_id);
            buf_printf(b, "` | %s |", dir_text((drift_workload)k, w->flipped[i].direction));
            if (risk) {
                double r = w->flipped[i].risk;
                if (isnan(r)) buf_puts(b, " - |");
                else buf_printf(b, " %.3f (%zu of %zu) |", r, risk_rank(w, r), w->risk.n);
            }
            const drift_flip_detail *fd = detail_of(d, k, i);
            if (fd) {
                const drift_divergence *dv = &fd->div;
                util_buf line = {0};
                if (dv->error) {
                    buf_printf(&line, "unavailable: %s", dv->error);
                    buf_puts(b, " ");
                    md_cell(b, line.data);
                    buf_puts(b, " | |");
                } else {
                    divergence_line(&line, dv);
                    buf_puts(b, " ");
                    md_cell(b, line.data);
                    buf_puts(b, " | ");
                    if (dv->diff && dv->diff[0]) {
                        buf_puts(b, "`");
                        md_cell(b, dv->diff);
                        buf_puts(b, "`");
                    }
                    buf_puts(b, " |");
                }
                buf_free(&line);
            } else if (d) {
                buf_puts(b, "  | |");
            }
            buf_puts(b, "\n");
        }
        if (w->n_flipped > DRIFT_REPORT_LISTED_FLIPS)
            buf_printf(b, "| %s | \xE2\x80\xA6 %zu more | |%s%s\n", drift_workload_name((drift_workload)k),
                       w->n_flipped - DRIFT_REPORT_LISTED_FLIPS, risk ? " |" : "", d ? " | |" : "");
    }
    if (d) {
        buf_puts(b, "\n");
        for (int k = 0; k < DRIFT_WL_COUNT; k++) {
            const drift_wl_result *w = &c->wl[k];
            if (!c->present[k]) continue;
            for (size_t i = 0; i < w->n_flipped && i < DRIFT_REPORT_QUOTED_FLIPS; i++) {
                const drift_flip_detail *fd = detail_of(d, k, i);
                if (!fd) continue;
                util_buf q = {0};
                describe_flip(&q, fd, "");
                if (!q.data) continue;
                buf_puts(b, "`");
                md_cell(b, w->flipped[i].prompt_id);
                buf_puts(b, "`:\n```\n");
                buf_puts(b, q.data);
                buf_puts(b, "```\n");
                buf_free(&q);
            }
        }
    }
    buf_puts(b, "\n</details>\n");
}

/* ---- junit ---- */

/* XML 1.0 text of safe (sanitised) text: the five entities, and only
 * XML's characters: #x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] |
 * [#x10000-#x10FFFF]. The sanitiser has already repaired invalid UTF-8
 * and written controls and U+FFFE/U+FFFF as visible escapes; what is
 * still not an XML character (it should be nothing) is dropped here. */
static void xml_escape(util_buf *b, const char *s, size_t len) {
    const unsigned char *p = (const unsigned char *)s, *end = p + len;
    while (p < end) {
        unsigned ch = *p;
        switch (ch) {
        case '&': buf_puts(b, "&amp;"); p++; continue;
        case '<': buf_puts(b, "&lt;"); p++; continue;
        case '>': buf_puts(b, "&gt;"); p++; continue;
        case '"': buf_puts(b, "&quot;"); p++; continue;
        case '\'': buf_puts(b, "&apos;"); p++; continue;
        default: break;
        }
        uint32_t cp;
        size_t n = util_utf8_decode((const char *)p, (size_t)(end - p), &cp);
        if (!n) { /* not UTF-8: dropped */
            p++;
            continue;
        }
        if ((cp >= 0x20 || cp == '\t' || cp == '\n' || cp == '\r') && cp != 0xFFFE && cp != 0xFFFF)
            buf_append(b, p, n);
        p += n;
    }
}

/* Text from outside as XML, one line: sanitised (report_put_name) and
 * escaped. */
static void xml_text(util_buf *b, const char *s) {
    util_buf t = {0};
    report_put_name(&t, s);
    if (t.data) xml_escape(b, t.data, t.len);
    buf_free(&t);
}

/* Text of lines (ours: the taxonomy, the sandbox lines) as XML: sanitised
 * as lines and escaped. */
static void xml_lines(util_buf *b, const char *s) {
    util_buf t = {0};
    if (s) util_sanitize_append(&t, s, strlen(s), UTIL_SAN_LINES);
    if (t.data) xml_escape(b, t.data, t.len);
    buf_free(&t);
}

/* JUnit, decision first: the suite's <properties> carry the verdict, its
 * exit code, the rule and its sentences; each workload is a testcase whose
 * outcome is its decision: BLOCK a <failure type="drift"> (type
 * "left-out" when too many pairs were left out), INCONCLUSIVE a <failure
 * type="inconclusive">, no evidence an <error type="no-evidence">, not
 * gated <skipped>. */
static void render_junit(const drift_comparison *c, util_buf *b) {
    int tests = n_present(c), failures = 0, errors = 0, skipped = 0;
    for (int k = 0; k < DRIFT_WL_COUNT; k++) {
        if (!c->present[k]) continue;
        drift_decision d = c->wl[k].decision;
        failures += d == DRIFT_DECISION_BLOCK || d == DRIFT_DECISION_INCONCLUSIVE;
        errors += d == DRIFT_DECISION_NO_EVIDENCE;
        skipped += d == DRIFT_DECISION_NOT_GATED;
    }
    buf_puts(b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    buf_printf(b, "<testsuites name=\"driftbench\" tests=\"%d\" failures=\"%d\" errors=\"%d\">\n", tests, failures,
               errors);
    buf_puts(b, "  <testsuite name=\"driftbench compare ");
    xml_text(b, c->baseline.label);
    buf_puts(b, " -&gt; ");
    xml_text(b, c->target.label);
    buf_printf(b, "\" tests=\"%d\" failures=\"%d\" errors=\"%d\" skipped=\"%d\">\n", tests, failures, errors,
               skipped);
    util_buf t = {0};
    buf_printf(b, "    <properties>\n      <property name=\"verdict\" value=\"%s\"/>\n"
                  "      <property name=\"exit_code\" value=\"%d\"/>\n      <property name=\"summary\" value=\"",
               report_decision_json(c->decision), drift_decision_exit_code(c->decision));
    report_verdict_summary(&t, c);
    xml_lines(b, t.data);
    buf_free(&t);
    buf_printf(b, "\"/>\n      <property name=\"rule\" value=\"%s\"/>\n      <property name=\"rule_text\" value=\"",
               c->rule == DRIFT_DECIDE_POINT ? "point" : "interval");
    report_rule_text(&t, c);
    xml_lines(b, t.data);
    buf_free(&t);
    buf_puts(b, "\"/>\n      <property name=\"error_rates\" value=\"");
    report_error_rate_text(&t, c);
    xml_lines(b, t.data);
    buf_free(&t);
    buf_puts(b, "\"/>\n    </properties>\n");
    for (int k = 0; k < DRIFT_WL_COUNT; k++) {
        if (!c->present[k]) continue;
        const drift_wl_result *w = &c->wl[k];
        wl_cells x;
        wl_cells_fill(&x, w);
        const char *fr = x.fr, *lo = x.lo, *hi = x.hi, *bud = x.bud;
        buf_puts(b, "    <testcase classname=\"driftbench.");
        xml_text(b, c->baseline.label);
        buf_puts(b, "_vs_");
        xml_text(b, c->target.label);
        buf_printf(b, "\" name=\"%s\">\n", drift_workload_name((drift_workload)k));
        util_buf note = {0};
        report_decision_note(&note, c, w);
        const char *tag = NULL, *type = NULL;
        switch (w->decision) {
        case DRIFT_DECISION_BLOCK:
            tag = "failure", type = w->reason == DRIFT_REASON_LEFT_OUT ? "left-out" : "drift";
            break;
        case DRIFT_DECISION_INCONCLUSIVE: tag = "failure", type = "inconclusive"; break;
        case DRIFT_DECISION_NO_EVIDENCE: tag = "error", type = "no-evidence"; break;
        case DRIFT_DECISION_NOT_GATED: tag = "skipped", type = NULL; break;
        default: break;
        }
        if (tag && !type) {
            buf_printf(b, "      <%s message=\"", tag);
            xml_lines(b, note.data);
            buf_puts(b, "\"/>\n");
        } else if (tag) {
            buf_printf(b, "      <%s type=\"%s\" message=\"%s: ", tag, type, report_decision_word(w->decision));
            xml_lines(b, note.data);
            buf_puts(b, "\">");
            buf_printf(b, "%ld of %ld pairs flipped (Wilson 95%% CI %s - %s)\n", w->flips, w->n, lo, hi);
            for (size_t i = 0; i < w->n_flipped && i < DRIFT_REPORT_LISTED_FLIPS; i++) {
                xml_text(b, w->flipped[i].prompt_id);
                buf_puts(b, " ");
                xml_lines(b, dir_text((drift_workload)k, w->flipped[i].direction));
                buf_puts(b, "\n");
            }
            if (w->n_flipped > DRIFT_REPORT_LISTED_FLIPS) buf_printf(b, "... %zu more\n", w->n_flipped - DRIFT_REPORT_LISTED_FLIPS);
            buf_printf(b, "</%s>\n", tag);
        }
        buf_free(&note);
        char tmp[400];
        snprintf(tmp, sizeof tmp,
                 "decision=%s n=%ld errors=%ld unscored=%ld flips=%ld flip_rate=%s ci95=[%s, %s] c->i=%ld i->c=%ld "
                 "budget=%s",
                 report_decision_json(w->decision), w->n, w->errors, w->unscored, w->flips, fr, lo, hi,
                 w->correct_to_incorrect, w->incorrect_to_correct, bud);
        buf_puts(b, "      <system-out>");
        xml_lines(b, tmp);
        buf_puts(b, "</system-out>\n    </testcase>\n");
    }
    util_buf tx = {0};
    buf_puts(&tx, "flip taxonomy (highest risk first):\n");
    taxonomy_text(&tx, c, WL_DIR_TEXT, "  ");
    sandbox_text(&tx, c);
    buf_puts(b, "    <system-out>");
    xml_lines(b, tx.data);
    buf_puts(b, "</system-out>\n");
    buf_free(&tx);
    buf_puts(b, "  </testsuite>\n</testsuites>\n");
}

/* See report_internal.h. */
drift_status report_comparison_plain(const drift_comparison *c, const drift_comparison_details *d, drift_format fmt,
                                     char **out, drift_error *err) {
    *out = NULL;
    if (!c) return drift_error_set(err, DRIFT_ERR_INVALID, "no comparison to report");
    util_buf b = {0};
    switch (fmt) {
    case DRIFT_FORMAT_TEXT: render_text(c, d, &b); break;
    case DRIFT_FORMAT_MARKDOWN: render_markdown(c, d, &b); break;
    case DRIFT_FORMAT_JUNIT: render_junit(c, &b); break; /* XML of safe text (xml_text): the finish changes nothing */
    case DRIFT_FORMAT_JSON: return render_json(c, d, out, err);
    default: return drift_error_set(err, DRIFT_ERR_INVALID, "unknown report format %d", (int)fmt);
    }
    if (!b.data) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory rendering the report");
    return report_text_finish(&b, out, err);
}

/* ---- sequential replay (drift_compare_sequential) ----
 * One row per present workload: prompts asked until the verdict of the
 * N available, flips among them, the anytime-valid interval at the stop
 * (sequential.c: a confidence sequence at 1 - alpha, not Wilson), budget,
 * verdict (early or at the end of the suite) and, for reference, the
 * fixed-size rate and verdict over all N. A workload without a budget is
 * listed as not gated. An empty interval (every rate excluded, a chance
 * <= alpha) reads "empty" (JSON null). JSON: {"baseline","target",
 * "sequential":{alpha,seed,asked,available,method},"verdict","workloads":
 * [{workload,gated,n,budget,asked,flips,verdict,gate,reason,early,
 * interval:[lo,hi],full_flip_rate,full_verdict}]}, "verdict" first with
 * its exit code and summary. A workload's verdict is its decision
 * (sequential.c: early stops DEPLOY/BLOCK, else compare's fixed-size
 * decision, which may be INCONCLUSIVE); "gate" is the gate's own
 * deploy/block/open. */

static const char *seq_verdict_name(drift_seq_verdict v) {
    return v == DRIFT_SEQ_DEPLOY ? "deploy" : v == DRIFT_SEQ_BLOCK ? "block" : "open";
}

static void seq_cells(const drift_seq_wl *w, char *rate, char *ci, size_t cap, char *bud, char *full) {
    char lo[16], hi[16];
    pct(rate, 16, w->asked ? (double)w->flips / (double)w->asked : NAN);
    pct(lo, sizeof lo, w->lo);
    pct(hi, sizeof hi, w->hi);
    if (w->lo > w->hi) snprintf(ci, cap, "empty"); /* every rate excluded: itself a chance <= alpha */
    else snprintf(ci, cap, "[%s, %s]", lo, hi);
    if (w->budget < 0) snprintf(bud, 16, "none");
    else pct(bud, 16, w->budget);
    pct(full, 16, w->full_rate);
}

/* "BLOCK (exit 1): math" - the replay's verdict and the workloads that
 * made it, with the rule that ended them. */
static void seq_verdict(util_buf *b, const drift_seq_result *r) {
    if (report_verdict_open(b, r->decision)) return;
    if (r->decision == DRIFT_DECISION_DEPLOY) {
        buf_puts(b, ": every gated workload deploys");
        return;
    }
    int first = 1;
    for (int k = 0; k < DRIFT_WL_COUNT; k++) {
        const drift_seq_wl *w = &r->wl[k];
        if (!r->present[k] || w->decision != r->decision) continue;
        buf_printf(b, "%s%s", first ? ": " : "; ", drift_workload_name((drift_workload)k));
        first = 0;
        if (w->reason == DRIFT_REASON_LEFT_OUT) buf_puts(b, " (too many pairs left out)");
        else if (w->decision == DRIFT_DECISION_NO_EVIDENCE) buf_puts(b, " (no scored pair)");
        else if (w->decision == DRIFT_DECISION_INCONCLUSIVE) buf_puts(b, " (suite ran out undecided)");
        else buf_puts(b, w->early ? " (stopped early)" : " (at the end of the pairs)");
    }
}

/* A workload's decision cell: the word, and how it was reached. */
static void seq_decision_cell(char *out, size_t cap, const drift_seq_wl *w) {
    const char *how = w->reason == DRIFT_REASON_RATE ? (w->early ? " (early)" : " (suite end)") : "";
    snprintf(out, cap, "%s%s", report_decision_word(w->decision), how);
}

static void seq_text(const drift_comparison *c, const drift_seq_result *r, util_buf *b) {
    buf_puts(b, "DriftBench sequential gate: ");
    report_put_name(b, c->baseline.label);
    buf_puts(b, " -> ");
    report_put_name(b, c->target.label);
    buf_puts(b, "\n");
    buf_puts(b, "verdict: ");
    seq_verdict(b, r);
    buf_puts(b, "\n");
    buf_printf(b, "prompts replayed in a seeded random order (seed %llu); each workload stops as soon as its "
                  "anytime-valid %g%% interval leaves the budget; one whose pairs run out first gets compare's "
                  "decision (the exact 95%% interval against the budget)\n\n",
               (unsigned long long)r->seed, 100.0 * (1.0 - r->alpha));
    buf_printf(b, "%-13s %7s %7s %6s %9s  %-20s %8s  %-16s %10s\n", "workload", "asked", "of", "flips", "rate",
               "anytime interval", "budget", "verdict", "full suite");
    for (int k = 0; k < DRIFT_WL_COUNT; k++) {
        if (!r->present[k]) continue;
        const drift_seq_wl *w = &r->wl[k];
        const char *name = drift_workload_name((drift_workload)k);
        if (!w->gated) {
            buf_printf(b, "%-13s %7s %7ld %6s %9s  %-20s %8s  %s\n", name, "-", w->n_total, "-", "-", "-",
                       w->budget < 0 ? "none" : "-",
                       w->budget < 0 ? "no budget: cannot be gated" : "no counted pairs");
            continue;
        }
        char rate[16], ci[48], bud[16], full[16], verdict[48];
        seq_cells(w, rate, ci, sizeof ci, bud, full);
        seq_decision_cell(verdict, sizeof verdict, w);
        buf_printf(b, "%-13s %7ld %7ld %6ld %9s  %-20s %8s  %-16s %10s %s\n", name, w->asked, w->n_total, w->flips,
                   rate, ci, bud, verdict, full, report_decision_word(c->wl[k].decision));
    }
    buf_puts(b, "\n");
    if (r->available)
        buf_printf(b, "asked %ld of %ld prompts of the gated workloads (%.1f%%)\n", r->asked, r->available,
                   100.0 * (double)r->asked / (double)r->available);
    buf_puts(b, "verdict: ");
    seq_verdict(b, r);
    buf_puts(b, "\n");
}

static drift_status seq_json(const drift_comparison *c, const drift_seq_result *r, char **out, drift_error *err) {
    json_t *wls = json_array();
    for (int k = 0; k < DRIFT_WL_COUNT && wls; k++) {
        if (!r->present[k]) continue;
        const drift_seq_wl *w = &r->wl[k];
        json_t *e = json_pack("{s:s, s:b, s:I}", "workload", drift_workload_name((drift_workload)k), "gated",
                              w->gated, "n", (json_int_t)w->n_total);
        if (!e) break;
        json_object_set_new(e, "budget", w->budget < 0 ? json_null() : json_real(w->budget));
        if (w->gated) {
            json_object_set_new(e, "asked", json_integer(w->asked));
            json_object_set_new(e, "flips", json_integer(w->flips));
            json_object_set_new(e, "verdict", json_string(report_decision_json(w->decision)));
            json_object_set_new(e, "gate", json_string(seq_verdict_name(w->verdict)));
            json_object_set_new(e, "reason", json_string(report_reason_json(w->reason)));
            json_object_set_new(e, "early", json_boolean(w->early));
            json_object_set_new(e, "interval", w->lo > w->hi ? json_null() : json_pack("[f, f]", w->lo, w->hi));
        } else {
            json_object_set_new(e, "verdict", json_string(report_decision_json(w->decision)));
        }
        json_object_set_new(e, "full_flip_rate", json_real(w->full_rate));
        json_object_set_new(e, "full_verdict", json_string(report_decision_json(c->wl[k].decision)));
        json_array_append_new(wls, e);
    }
    util_buf sum = {0};
    seq_verdict(&sum, r);
    json_t *root = wls ? json_pack("{s:s, s:i, s:s, s:o, s:o, s:{s:f, s:I, s:I, s:I, s:s}, s:o}", "verdict",
                                   report_decision_json(r->decision), "exit_code", drift_decision_exit_code(r->decision),
                                   "summary", sum.data ? sum.data : "", "baseline", run_json(&c->baseline), "target",
                                   run_json(&c->target), "sequential", "alpha", r->alpha, "seed", (json_int_t)r->seed,
                                   "asked", (json_int_t)r->asked, "available", (json_int_t)r->available, "method",
                                   "betting confidence sequence, without replacement", "workloads", wls)
                         : NULL;
    buf_free(&sum);
    *out = report_json_dump(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15));
    json_decref(root);
    return *out ? DRIFT_OK : drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory rendering JSON");
}

static void seq_markdown(const drift_comparison *c, const drift_seq_result *r, util_buf *b) {
    buf_puts(b, "### DriftBench sequential gate: `");
    md_cell(b, c->baseline.label);
    buf_puts(b, "` \xE2\x86\x92 `");
    md_cell(b, c->target.label);
    buf_printf(b, "` \xE2\x80\x94 **%s**\n\n**Verdict: ", report_decision_word(r->decision));
    seq_verdict(b, r);
    buf_puts(b, "**\n\n");
    buf_printf(b, "Seeded random order (seed %llu), anytime-valid %g%% intervals.\n\n", (unsigned long long)r->seed,
               100.0 * (1.0 - r->alpha));
    buf_puts(b, "| workload | asked / N | flips | interval at stop | budget | verdict | full suite |\n");
    buf_puts(b, "|---|--:|--:|---|--:|---|--:|\n");
    for (int k = 0; k < DRIFT_WL_COUNT; k++) {
        if (!r->present[k]) continue;
        const drift_seq_wl *w = &r->wl[k];
        const char *name = drift_workload_name((drift_workload)k);
        if (!w->gated) {
            buf_printf(b, "| %s | - / %ld | - | - | %s | %s | - |\n", name, w->n_total, w->budget < 0 ? "none" : "-",
                       w->budget < 0 ? "no budget: not gated" : "no counted pairs");
            continue;
        }
        char rate[16], ci[48], bud[16], full[16], verdict[48];
        seq_cells(w, rate, ci, sizeof ci, bud, full);
        seq_decision_cell(verdict, sizeof verdict, w);
        buf_printf(b, "| %s | %ld / %ld | %ld | %s | %s | **%s** | %s %s |\n", name, w->asked, w->n_total, w->flips, ci,
                   bud, verdict, full, report_decision_word(c->wl[k].decision));
    }
    if (r->available)
        buf_printf(b, "\nAsked %ld of %ld prompts (%.1f%%).\n", r->asked, r->available,
                   100.0 * (double)r->asked / (double)r->available);
}

/* See report.h. */
drift_status drift_seq_render(const drift_comparison *c, const drift_seq_result *r, drift_format fmt, char **out,
                              drift_error *err) {
    *out = NULL;
    if (!c || !r) return drift_error_set(err, DRIFT_ERR_INVALID, "no sequential replay to report");
    util_buf b = {0};
    switch (fmt) {
    case DRIFT_FORMAT_TEXT: seq_text(c, r, &b); break;
    case DRIFT_FORMAT_MARKDOWN: seq_markdown(c, r, &b); break;
    case DRIFT_FORMAT_JSON: return seq_json(c, r, out, err);
    default:
        return drift_error_set(err, DRIFT_ERR_INVALID,
                               "the sequential gate renders text, json or markdown (not format %d)", (int)fmt);
    }
    return report_text_finish(&b, out, err);
}
