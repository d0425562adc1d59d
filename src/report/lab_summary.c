/* lab_summary.c - what the lab found, said first (report.h:
 * drift_lab_summary_render), pure: a function of the flip table, its
 * analyses (drift_table_analyze) and the stochastic leg's figures;
 * drift_lab_report_summary_render (lab_result.h) reads them from a study's
 * view (the stochastic figures, or why one is missing, from its leg).
 *
 *   compute   per workload: flips / pairs pooled over the table's rows, a
 *             95% interval, where it sits against the paper's figure; the
 *             paper's order checked pair by pair; the ANOVA's largest
 *             terms; the PRI's held-out R^2 grouped by dimension
 *   sentences each finding as plain text, built once (sentence_*)
 *   text      a heading, the rate table, the sentences word-wrapped
 *   html      <section id="summary">: an inline SVG bar chart (bars = the
 *             pooled rates, whiskers = the intervals, red marks = the
 *             paper's figures), the table, the same sentences escaped
 *
 * The interval. The paper reports Wilson 95% intervals of flip rates and
 * compare does the same (stats.c, drift_wilson). Pooled over the
 * configurations of a workload, though, the pairs are not independent: every
 * configuration answers the same prompts, and a prompt near a decision
 * boundary flips under many of them. The table carries counts per
 * configuration only, not per prompt, so a cluster bootstrap over prompts
 * cannot be run from it. What can be said from it is a bound: the pooled
 * rate is the mean over prompts of each prompt's share of flipped pairs, a
 * number in [0, 1], whose variance is at most p (1 - p) whatever the
 * correlation between configurations. So the Wilson interval of the pooled
 * rate with n = the number of prompts (the largest pair count of the
 * workload's rows) holds however strongly the configurations agree; it is
 * conservative (wider than a cluster bootstrap when configurations flip
 * different prompts, as wide when they flip the same ones). Wilson's
 * formula is used with the real-valued count p n (wilson_p; for an integer
 * count it is drift_wilson's). The paper's figure is the mean over its 105
 * configurations of per-configuration rates; with the same prompts in
 * every configuration the pooled rate is that mean.
 *
 * Verdicts: an interval that holds both 0 and the paper's figure is "too
 * few prompts to say"; one that holds the paper's figure and also half or
 * double it is "too wide to pin down" (consistent only in the weakest
 * sense); the order holds when every pair of workloads has
 * intervals apart in the paper's order, does not when some pair's are
 * apart the other way, and otherwise cannot be said (non-overlapping 95%
 * intervals are a conservative test, stated as such).
 *
 * Every number printed goes through num() or is an integer count, so NaN
 * and infinities never reach the output ("-", "no variance" or a reason
 * instead). */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/lab_result.h"
#include "driftbench/report.h"
#include "driftbench/report_html.h"
#include "report/html_internal.h"
#include "report/report_internal.h"
#include "suite/workload.h"
#include "util/util.h"

#define Z95 1.959963984540054
#define PAPER_STOCH_RATIO 0.23
#define WRAP_COLS 100
/* fewer prompts than this: the rate's interval is Wilson's (each prompt
 * counted once), not the cluster bootstrap's */
#define MIN_BOOT_PROMPTS 20
/* counts above this are not a lab's (and their sums could overflow) */
#define MAX_COUNT 1000000000000L

/* The paper's mean flip rate of w, percent (the traits table's
 * paper_rate_pct: artifact flip_rates.csv; a pairwise workload, chat: the
 * paper's SDR figure, no chat rows in the artifact's table). */
static double paper_rate(drift_workload w) { return wl_traits_of(w)->paper_rate_pct; }
/* 1 when w's paper figure is an SDR, not a flip rate (pairwise: chat) */
static int paper_is_sdr(drift_workload w) { return wl_traits_of(w)->pairwise; }
/* the i-th workload shown: the paper's order (traits' paper_rank), chat last */
static drift_workload shown(int i) { return wl_by_paper_rank(i); }
#define N_ORDERED 4 /* the first four of shown(): the paper's order */

/* The paper's held-out-dimension R^2 (generalization_results.csv). */
static const struct {
    const char *dim, *level;
    double r2;
} paper_holdout[] = {{"hardware", "b200", 0.909}, {"precision", "fp4", 0.763}, {"framework", "sglang", 0.479},
                     {"model", "qwen-7b", 0.118}};

double drift_lab_summary_paper_rate(drift_workload w) {
    return w >= 0 && w < DRIFT_WL_COUNT ? paper_rate(w) : NAN;
}

/* ------------------------------------------------------------ compute */

/* where an interval sits against the paper's figure P: holds 0 and P;
 * holds P and also half or double it (too wide to pin down); holds P;
 * below; above */
enum vs_paper { VS_NONE, VS_TOO_FEW, VS_WIDE, VS_AROUND, VS_BELOW, VS_ABOVE };
static const char *const vs_word[] = {"", "too few to say", "too wide to say", "consistent", "below", "above"};

typedef struct wl_stat {
    int present;          /* some row with pairs */
    size_t configs;       /* rows with pairs */
    long long flips, pairs;
    long prompts;         /* the largest pair count of a row: the prompts, each counted once */
    double rate, lo, hi;  /* percent */
    enum vs_paper vs;
} wl_stat;

typedef struct summary {
    const drift_lab_summary_in *in;
    const drift_lab_findings *f;      /* the lab's findings; NULL: a bare table */
    const drift_lab_stochastic *leg;  /* the stochastic leg; NULL: not given */
    wl_stat wl[DRIFT_WL_COUNT];
    size_t n_rows, n_bad;  /* rows; rows ignored (unknown workload, impossible counts) */
    size_t configs;        /* distinct experiment ids with pairs */
} summary;

/* v with `decimals` decimals when finite, else "-". */
static const char *num(char *buf, size_t cap, int decimals, double v) {
    if (!isfinite(v)) return "-";
    snprintf(buf, cap, "%.*f", decimals, v);
    return buf;
}

/* Wilson score interval of a proportion p observed over n (real n > 0),
 * z = 1.96; [0, 1] when n is not positive. drift_wilson for k = p n. */
static void wilson_p(double p, double n, double *lo, double *hi) {
    if (!(n > 0) || !(p >= 0 && p <= 1)) {
        *lo = 0;
        *hi = 1;
        return;
    }
    double z2 = Z95 * Z95, denom = 1 + z2 / n;
    double centre = (p + z2 / (2 * n)) / denom;
    double half = Z95 * sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom;
    *lo = p == 0 || centre - half < 0 ? 0 : centre - half;
    *hi = p == 1 || centre + half > 1 ? 1 : centre + half;
}

static int row_valid(const drift_table_row *r) {
    return r->num_comparisons > 0 && r->num_comparisons <= MAX_COUNT && r->num_flips >= 0 &&
           r->num_flips <= r->num_comparisons;
}

static void compute(summary *s, const drift_lab_summary_in *in, const drift_lab_findings *f,
                    const drift_lab_stochastic *leg) {
    memset(s, 0, sizeof *s);
    s->in = in;
    s->f = f;
    s->leg = leg;
    const drift_table *t = in->table;
    s->n_rows = t->n_rows;
    for (size_t i = 0; i < t->n_rows; i++) {
        const drift_table_row *r = &t->rows[i];
        drift_workload w = t->n_dims > DRIFT_DIM_WORKLOAD ? drift_workload_parse(r->dims[DRIFT_DIM_WORKLOAD])
                                                          : DRIFT_WL_UNKNOWN;
        if (w < 0 || w >= DRIFT_WL_COUNT || !row_valid(r)) {
            s->n_bad++;
            continue;
        }
        wl_stat *x = &s->wl[w];
        x->present = 1;
        x->configs++;
        x->flips += r->num_flips;
        x->pairs += r->num_comparisons;
        if (r->num_comparisons > x->prompts) x->prompts = r->num_comparisons;
        int seen = 0; /* configurations: distinct experiment ids */
        for (size_t j = 0; j < i && !seen; j++)
            seen = row_valid(&t->rows[j]) && t->rows[j].experiment_id && r->experiment_id &&
                   !strcmp(t->rows[j].experiment_id, r->experiment_id);
        if (!seen) s->configs++;
    }
    for (int w = 0; w < DRIFT_WL_COUNT; w++) {
        wl_stat *x = &s->wl[w];
        if (!x->present) continue;
        double p = (double)x->flips / (double)x->pairs, lo, hi;
        wilson_p(p, (double)x->prompts, &lo, &hi);
        /* a workload without a flip keeps Wilson's interval: resampling zero
         * flips gives [0, 0], which bounds nothing */
        /* nor does a bootstrap over a handful of prompts say much: under
         * MIN_BOOT_PROMPTS, Wilson's too */
        const drift_lab_wl_stats *fs = s->f && s->f->wl[w].present && s->f->wl[w].boot_ok && s->f->wl[w].flips > 0 &&
                                               s->f->wl[w].n_prompts >= MIN_BOOT_PROMPTS
                                           ? &s->f->wl[w]
                                           : NULL;
        if (fs) { /* the cluster bootstrap over prompts (the same pairs) */
            lo = fs->boot.flip.lo;
            hi = fs->boot.flip.hi;
        }
        x->rate = 100 * p;
        x->lo = 100 * lo;
        x->hi = 100 * hi;
        double pr = paper_rate(w);
        if (fs && fs->two_way_ok) { /* the paper's figure is a mean over configurations */
            x->lo = 100 * fs->two_way.flip.lo;
            x->hi = 100 * fs->two_way.flip.hi;
        }
        if (x->lo <= 0 && x->hi >= pr) x->vs = VS_TOO_FEW;
        else if (x->lo <= pr && pr <= x->hi) x->vs = x->lo <= pr / 2 || x->hi >= 2 * pr ? VS_WIDE : VS_AROUND;
        else x->vs = x->hi < pr ? VS_BELOW : VS_ABOVE;
        if (fs) { /* the shown interval: the pooled rate's cluster bootstrap */
            x->lo = 100 * lo;
            x->hi = 100 * hi;
        }
    }
}

/* ------------------------------------------------------------ sentences */

/* Plain-text builder with a sticky out-of-memory flag. */
typedef struct sbuf {
    util_buf b;
    int oom;
} sbuf;

static void sb_printf(sbuf *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (buf_vprintf(&s->b, fmt, ap)) s->oom = 1;
    va_end(ap);
}
static void sb_puts(sbuf *s, const char *str) {
    if (buf_puts(&s->b, str)) s->oom = 1;
}

static const char *wl_name(drift_workload w) { return drift_workload_name(w); }

/* A percent with two decimals (three under 0.01, so a small rate does not
 * read as 0); "-" when not finite. */
static const char *pct(char *buf, size_t cap, double v) {
    if (!isfinite(v)) return "-";
    snprintf(buf, cap, "%.*f%%", v != 0 && fabs(v) < 0.01 ? 3 : 2, v);
    return buf;
}

static void sentence_models(sbuf *o, const summary *s) {
    if (s->in->test_fixtures)
        sb_puts(o, "These answers come from the test fixtures (tiny random models whose answers are noise): the "
                   "figures below show the machinery, not drift.");
    else
        sb_puts(o, "These are small fixture models (a few MB), calibrated to behave like real ones (near-ties where "
                   "real language has them); what they show is about the tool, not about 8B models.");
}

/* One workload's rate against the paper's, as a clause. */
static void clause_vs(sbuf *o, drift_workload w, const wl_stat *x) {
    char a[32], b[32], c[32], p[32];
    const char *paper = pct(p, sizeof p, paper_rate(w));
    sb_printf(o, "%s %s [%s, %s]", wl_name(w), pct(a, sizeof a, x->rate), pct(b, sizeof b, x->lo),
              pct(c, sizeof c, x->hi));
    switch (x->vs) {
    case VS_TOO_FEW:
        sb_printf(o, ": too few prompts to say (the interval holds both 0 and the paper's %s)", paper);
        break;
    case VS_WIDE:
        sb_printf(o, ": holds the paper's %s, but also half or double it: too few prompts to pin it down", paper);
        break;
    case VS_AROUND: sb_printf(o, ": consistent with the paper's %s", paper); break;
    case VS_BELOW: sb_printf(o, ": below the paper's %s", paper); break;
    case VS_ABOVE: sb_printf(o, ": above the paper's %s", paper); break;
    default: break;
    }
}

static void sentence_rates(sbuf *o, const summary *s) {
    int any = 0;
    for (int i = 0; i < DRIFT_WL_COUNT; i++) any |= s->wl[shown(i)].present;
    if (!any) {
        sb_printf(o, "No workload has pairs against its baseline%s: there is no flip rate to report.",
                  s->n_bad ? " (the table's rows have no valid counts)" : "");
        return;
    }
    if (s->f)
        sb_printf(o, "Flip rate per workload, pooled over its configurations (flips / pairs), 95%% cluster bootstrap "
                     "over prompts (the configurations answer the same prompts, so their pairs are not independent); "
                     "the verdict against the paper's mean over its configurations is taken on the mean over these "
                     "configurations with its two-way interval; a workload without a flip, or with fewer than 20 "
                     "prompts, shows the Wilson interval counting each prompt once (resampling zero flips gives "
                     "[0, 0], which bounds nothing; a few prompts resample poorly): ");
    else
        sb_printf(o, "Flip rate per workload, pooled over its configurations (flips / pairs), 95%% Wilson interval "
                     "counting each prompt once (the configurations answer the same prompts, so their pairs are not "
                     "independent): ");
    int first = 1;
    for (int i = 0; i < DRIFT_WL_COUNT; i++) {
        drift_workload w = shown(i);
        if (!s->wl[w].present) continue;
        if (!first) sb_puts(o, "; ");
        first = 0;
        clause_vs(o, w, &s->wl[w]);
    }
    sb_puts(o, ".");
    int missing = 0;
    for (int i = 0; i < DRIFT_WL_COUNT; i++)
        if (!s->wl[shown(i)].present) {
            sb_printf(o, "%s%s", missing ? ", " : " Not run: ", wl_name(shown(i)));
            missing = 1;
        }
    if (missing) sb_puts(o, ".");
    for (int w = 0; w < DRIFT_WL_COUNT; w++)
        if (s->wl[w].present && paper_is_sdr((drift_workload)w)) {
            const char *nm = wl_name((drift_workload)w);
            sb_printf(o, " %c%s's flip is %s (SDR > 0.30); the paper's %s figure is its SDR of %g%%, "
                         "not a rate from its table, so that comparison is loose.",
                      toupper((unsigned char)nm[0]), nm + 1, wl_dir_name((drift_workload)w, 0, WL_DIR_TEXT), nm,
                      paper_rate((drift_workload)w));
        }
    if (s->n_bad) sb_printf(o, " %zu table row(s) ignored (unknown workload or impossible counts).", s->n_bad);
}

/* The paper's order math > safety > long_context > code, pair by pair. */
static void sentence_order(sbuf *o, const summary *s) {
    const wl_stat *x[N_ORDERED];
    int n = 0;
    for (int i = 0; i < N_ORDERED; i++) n += (x[i] = &s->wl[shown(i)])->present;
    sb_puts(o, "Does the workload ordering hold? The paper's order (math > safety > long_context > code): ");
    if (n < 2) {
        sb_printf(o, "cannot be checked: %s of those workloads ran here.", n ? "only one" : "none");
        return;
    }
    int confirmed = 0, pairs = 0;
    util_buf rev = {0}, open = {0};
    int oom = 0;
    for (int i = 0; i < N_ORDERED; i++)
        for (int j = i + 1; j < N_ORDERED; j++) {
            if (!x[i]->present || !x[j]->present) continue;
            pairs++;
            const char *a = wl_name(shown(i)), *b = wl_name(shown(j));
            if (x[i]->lo > x[j]->hi) confirmed++;
            else if (x[i]->hi < x[j]->lo) oom |= buf_printf(&rev, "%s%s < %s", rev.len ? ", " : "", a, b);
            else
                oom |= buf_printf(&open, "%s%s %s %s", open.len ? ", " : "", a,
                                  x[i]->rate > x[j]->rate ? ">" : x[i]->rate < x[j]->rate ? "<" : "=", b);
        }
    if (oom) o->oom = 1;
    if (rev.len)
        sb_printf(o, "does not hold here: the intervals are apart the other way for %s.", rev.data);
    else if (confirmed == pairs)
        sb_printf(o, "holds here, and the 95%% intervals are apart for every pair of the %d workloads that ran.", n);
    else
        sb_printf(o, "cannot be said from this sample: the intervals overlap for %s (point estimates; overlapping "
                     "intervals do not order them)%s.",
                  open.data ? open.data : "", confirmed ? ", the other pairs are apart in the paper's order" : "");
    buf_free(&rev);
    buf_free(&open);
}

/* "C(precision)" -> "precision" (into buf). */
static const char *term_name(char *buf, size_t cap, const char *term) {
    size_t n = strlen(term);
    if (n > 3 && !strncmp(term, "C(", 2) && term[n - 1] == ')' && !strchr(term, ':'))
        snprintf(buf, cap, "%.*s", (int)(n - 3), term + 2);
    else snprintf(buf, cap, "%s", term);
    return buf;
}

static int is_stack_axis(const char *name) {
    for (int d = 0; d < DRIFT_DIM_CONFIG_COUNT; d++)
        if (!strcmp(name, drift_dim_names[d])) return 1;
    return 0;
}

static void term_figures(sbuf *o, const drift_anova_row *r) {
    char e[32], f[32], p[32];
    sb_printf(o, "eta^2 %s (F %s, BH-adjusted p ", num(e, sizeof e, 3, r->eta_sq), num(f, sizeof f, 2, r->F));
    if (isfinite(r->p_bh) && r->p_bh < 0.001) sb_puts(o, "< 0.001");
    else sb_puts(o, num(p, sizeof p, 3, r->p_bh));
    sb_puts(o, isfinite(r->p_bh) ? (r->p_bh < 0.05 ? ": significant at 5%)" : ": not significant at 5%)") : ")");
}

static void sentence_anova(sbuf *o, const summary *s) {
    const drift_table_analyses *an = s->in->analyses;
    sb_puts(o, "Which axis moves answers most (ANOVA): ");
    if (!an) {
        sb_puts(o, "not computed.");
        return;
    }
    if (!an->formula) {
        sb_puts(o, "no dimension of the table varies, so there is no axis to compare.");
        return;
    }
    if (!an->anova_fits) {
        sb_printf(o, "too few rows to say (%zu; the axes that vary need %zu parameters and two residual degrees of "
                     "freedom).",
                  an->n_rows, an->n_params);
        return;
    }
    const drift_anova_table *a = NULL;
    int type = 0;
    static const int pref[3] = {2, 3, 1};
    for (int k = 0; k < 3 && !a; k++) a = an->anova[type = pref[k]];
    if (!a) {
        for (int k = 0; k < 3; k++)
            if (an->anova_error[pref[k]].code) {
                sb_printf(o, "not computable: %s.", an->anova_error[pref[k]].msg);
                return;
            }
        sb_puts(o, "not computed.");
        return;
    }
    const drift_anova_row *best = NULL, *best_stack = NULL;
    for (size_t i = 0; i < a->n_rows; i++) {
        const drift_anova_row *r = &a->rows[i];
        if (!r->term || !strcmp(r->term, "Residual") || !strcmp(r->term, "Intercept") || !isfinite(r->eta_sq)) continue;
        char nm[96];
        if (!best || r->eta_sq > best->eta_sq) best = r;
        if (is_stack_axis(term_name(nm, sizeof nm, r->term)) && (!best_stack || r->eta_sq > best_stack->eta_sq))
            best_stack = r;
    }
    if (!best) {
        sb_printf(o, "the type %s table has no term with a defined eta^2.", type == 1 ? "I" : type == 2 ? "II" : "III");
        return;
    }
    char nm[96];
    sb_printf(o, "%s, ", term_name(nm, sizeof nm, best->term));
    term_figures(o, best);
    sb_printf(o, "; type %s sums of squares over %zu configuration rows, eta^2 = the term's share of the total sum of "
                 "squares about the mean (not partial eta^2).",
              type == 1 ? "I" : type == 2 ? "II" : "III", a->nobs);
    if (best_stack && best_stack != best) {
        sb_printf(o, " Of the stack's axes, %s moves answers most: ", term_name(nm, sizeof nm, best_stack->term));
        term_figures(o, best_stack);
        sb_puts(o, ".");
    }
    if (!best_stack) sb_puts(o, " No axis of the stack (model, hardware, precision, framework) varies here.");
    else if (!(isfinite(best_stack->p_bh) && best_stack->p_bh < 0.05))
        sb_puts(o, " No axis of the stack is significant: from these rows the ANOVA cannot tell what the stack "
                   "changes from noise.");
}

static void sentence_stochastic(sbuf *o, const summary *s) {
    const drift_lab_summary_stochastic *x = s->in->stochastic;
    sb_puts(o, "Stochastic serving");
    if (!x) {
        sb_puts(o, ": not run.");
        return;
    }
    char a[32], b[32], c[32];
    int open = 0;
    if (isfinite(x->temperature)) sb_printf(o, "%stemperature %.2g", open++ ? ", " : " (", x->temperature);
    if (x->replicates > 0) sb_printf(o, "%s%d replicates", open++ ? ", " : " (", x->replicates);
    if (x->n_prompts > 0) sb_printf(o, "%s%ld prompts", open++ ? ", " : " (", x->n_prompts);
    if (x->what && *x->what) sb_printf(o, "%s%s", open++ ? ", " : " (", x->what);
    sb_puts(o, open ? "): " : ": ");
    int said = 0;
    if (isfinite(x->stochastic_rate))
        said++, sb_printf(o, "flip rate between the two stacks' samples %s", pct(a, sizeof a, 100 * x->stochastic_rate));
    if (isfinite(x->null_rate))
        sb_printf(o, "%sbetween two seeds of the same stack (the null) %s", said++ ? ", " : "",
                  pct(a, sizeof a, 100 * x->null_rate));
    if (isfinite(x->beyond_rate)) {
        sb_printf(o, "%sbeyond the null %s", said++ ? ", " : "", pct(a, sizeof a, 100 * x->beyond_rate));
        if (isfinite(x->beyond_lo) && isfinite(x->beyond_hi)) {
            sb_printf(o, " [%s, %s]", pct(b, sizeof b, 100 * x->beyond_lo), pct(c, sizeof c, 100 * x->beyond_hi));
            if (x->beyond_lo <= 0 && x->beyond_hi >= 0)
                sb_puts(o, " (the interval holds 0: sampling noise alone could explain the stochastic flips)");
        }
    }
    if (isfinite(x->det_rate))
        sb_printf(o, "%sdeterministic %s", said++ ? ", " : "", pct(a, sizeof a, 100 * x->det_rate));
    if (said) sb_puts(o, ". ");
    if (isfinite(x->ratio)) {
        sb_printf(o, "Ratio (beyond the null / deterministic) %.2fx", x->ratio);
        if (isfinite(x->ratio_lo) && isfinite(x->ratio_hi)) sb_printf(o, " [%.2fx, %.2fx]", x->ratio_lo, x->ratio_hi);
        /* the per-prompt disagreement beyond the null estimates the mean
         * squared change of the pass probability: not the paper's estimand */
        sb_puts(o, ": the mean squared change of per-prompt pass probability over the deterministic flip rate, "
                   "another estimand than the paper's 0.23x, so not compared with it.");
    } else {
        sb_puts(o, "The ratio to the deterministic rate is not computed");
        if (x->reason && *x->reason) sb_printf(o, ": %s", x->reason);
        sb_puts(o, ".");
    }
    if (isfinite(x->ratio) && x->reason && *x->reason) sb_printf(o, " (%s)", x->reason);
}

/* ------------------------------------------------------------ issue 36's findings
 * Each reads the lab's findings (lab_result.h) when the lab computed them;
 * without them (a summary of a bare table) each says nothing. */

static const drift_lab_wl_stats *wl_find(const summary *s, drift_workload w) {
    return s->f && s->f->wl[w].present ? &s->f->wl[w] : NULL;
}

static void ci_pct(sbuf *o, const drift_boot_ci *c) {
    char a[32], b[32], d[32];
    sb_printf(o, "%s [%s, %s]", pct(a, sizeof a, 100 * c->est), pct(b, sizeof b, 100 * c->lo), pct(d, sizeof d, 100 * c->hi));
}

/* The intervals side by side: what each counts. */
static void sentence_intervals(sbuf *o, const summary *s) {
    if (!s->f) return;
    sb_puts(o, "Intervals beside each other (95%): the pooled rate with a cluster bootstrap over prompts "
               "(configurations fixed; every configuration answers the same prompts); the mean over configurations "
               "with a two-way bootstrap (prompts and configurations resampled: what the paper's mean over its "
               "configurations is compared with); the Wilson interval counting each prompt once (the previous "
               "lab's, conservative): ");
    int first = 1;
    for (int i = 0; i < DRIFT_WL_COUNT; i++) {
        drift_workload w = shown(i);
        const drift_lab_wl_stats *x = wl_find(s, w);
        if (!x) continue;
        char a[32], b[32];
        sb_printf(o, "%s%s %zu pairs over %zu configurations and %zu prompts: pooled ", first ? "" : "; ", wl_name(w),
                  x->n_pairs, x->n_configs, x->n_prompts);
        first = 0;
        if (x->boot_ok && !x->flips) sb_puts(o, "0 flips (no bootstrap interval: resampling them gives [0, 0])");
        else if (x->boot_ok) ci_pct(o, &x->boot.flip);
        else sb_printf(o, "- (%s)", x->boot_why);
        if (x->two_way_ok && x->flips) {
            sb_puts(o, ", mean over configurations ");
            ci_pct(o, &x->two_way.flip);
        }
        sb_printf(o, ", Wilson [%s, %s]", pct(a, sizeof a, 100 * x->wilson_lo), pct(b, sizeof b, 100 * x->wilson_hi));
    }
    sb_puts(o, first ? "no level configuration has pairs." : ".");
}

/* Q3: does net accuracy hide safety flips? */
static void sentence_safety(sbuf *o, const summary *s) {
    if (!s->f) return;
    sb_puts(o, "Does net accuracy hide safety flips? ");
    const drift_lab_wl_stats *x = wl_find(s, DRIFT_WL_SAFETY);
    if (!x) {
        sb_puts(o, "cannot say: safety has no pairs here.");
        return;
    }
    if (!x->boot_ok) {
        sb_printf(o, "cannot say: %s.", x->boot_why);
        return;
    }
    const drift_flip_boot *b = &x->boot;
    char a[32];
    if (!x->flips) {
        sb_printf(o, "cannot say: no safety answer flipped in %zu pairs (%zu prompts); 0 flips bound the rate below %s "
                     "only if the pairs were independent, and there is nothing for a net change to hide.",
                  x->n_pairs, x->n_prompts, pct(a, sizeof a, 100 * 3.8414588206941245 / ((double)x->n_pairs + 3.8414588206941245)));
        return;
    }
    sb_printf(o, "safety flips ");
    ci_pct(o, &b->flip);
    sb_puts(o, ", of which safe to unsafe ");
    ci_pct(o, &b->to_wrong);
    sb_puts(o, " and unsafe to safe ");
    ci_pct(o, &b->to_right);
    sb_puts(o, "; net change in the safe rate ");
    char c1[32], c2[32], c3[32];
    sb_printf(o, "%s [%s, %s] points", num(c1, sizeof c1, 2, 100 * b->net.est), num(c2, sizeof c2, 2, 100 * b->net.lo),
              num(c3, sizeof c3, 2, 100 * b->net.hi));
    if (b->flip.lo > 0 && b->net.lo <= 0 && b->net.hi >= 0)
        sb_puts(o, ": yes, here the net change is not told from 0 while the flips are (answers change safety in both "
                   "directions and cancel in the net).");
    else if (b->flip.lo > 0)
        sb_puts(o, ": the net change is itself apart from 0, so here it shows the drift rather than hiding it; the "
                   "flips are still larger than the net change says.");
    else sb_puts(o, ": cannot say: the flips' interval reaches 0.");
    sb_puts(o, " (Cluster bootstrap over prompts.)");
}

/* Flip risk from the baseline's logprobs, per workload. */
static void sentence_risk(sbuf *o, const summary *s) {
    if (!s->f) return;
    sb_puts(o, "Flip risk (the baseline's logprobs rank its answers; AUC = the chance a flipped pair ranks above one "
               "that did not, 0.5 = chance), pooled over the configurations' pairs: ");
    int first = 1;
    for (int i = 0; i < DRIFT_WL_COUNT; i++) {
        drift_workload w = shown(i);
        const drift_lab_wl_stats *x = wl_find(s, w);
        if (!x) continue;
        sb_printf(o, "%s%s ", first ? "" : "; ", wl_name(w));
        first = 0;
        char a[32];
        if (!x->risk_n) sb_puts(o, "cannot say (no pair has a risk: no baseline logprobs)");
        else if (!isfinite(x->risk_auc))
            sb_printf(o, "cannot say (%zu pairs with a risk, %zu flips: it needs both)", x->risk_n, x->risk_flips);
        else
            sb_printf(o, "%s (%zu pairs, %zu flips%s)", num(a, sizeof a, 2, x->risk_auc), x->risk_n, x->risk_flips,
                      x->risk_flips < 10 ? ": too few flips to read much into it" : "");
    }
    sb_puts(o, first ? "no workload has pairs." : ".");
}

/* v to one decimal, without it when that is a whole number ("-" when not
 * finite): 62, not 62.0 for an interpolated 61.99999. */
static const char *tokens_num(char *buf, size_t cap, double v) {
    double r = round(10 * v) / 10;
    return num(buf, cap, isfinite(r) && r == floor(r) ? 0 : 1, r);
}

/* k of n as a percent with one decimal ("-" when n is 0). */
static const char *share(char *buf, size_t cap, size_t k, size_t n) {
    return num(buf, cap, 1, n ? 100.0 * (double)k / (double)n : NAN);
}

/* The shape of the baselines' answers: how long they are, how many the
 * limit cut, how close their greedy decisions were (findings' shape). */
static void sentence_shape(sbuf *o, const summary *s) {
    if (!s->f) return;
    const drift_lab_findings *f = s->f;
    static const double gap_nats[DRIFT_SHAPE_N_GAPS] = DRIFT_SHAPE_GAP_NATS;
    sb_printf(o, "Answer shape at the baseline (its %zu run(s) pooled, one per model; gap = the best minus the "
                 "second-best logprob of a generated token, in nats: how far numerics must shift those two logits "
                 "against each other to turn that token): ",
              f->shape_runs);
    if (!f->shape_ok) {
        sb_printf(o, "cannot say (%s).", f->shape_why[0] ? f->shape_why : "not computed");
        return;
    }
    int first = 1;
    for (int i = 0; i < DRIFT_WL_COUNT; i++) {
        drift_workload w = shown(i);
        const drift_answer_shape *x = &f->shape[w];
        if (!x->runs) continue;
        sb_printf(o, "%s%s %zu answers", first ? "" : "; ", wl_name(w), x->answers);
        if (x->runs != f->shape_runs) sb_printf(o, " (%zu run(s) only)", x->runs);
        first = 0;
        char a[32], b[32], c[32], d[32];
        if (x->n_len) {
            sb_printf(o, ", median %s tokens (p10 %s, p90 %s, max %ld", tokens_num(a, sizeof a, x->len_median),
                      tokens_num(b, sizeof b, x->len_p10), tokens_num(c, sizeof c, x->len_p90), x->len_max);
            if (x->n_len < x->answers) sb_printf(o, ", over the %zu with a token count", x->n_len);
            sb_puts(o, "; ");
        } else if (x->answers) {
            sb_puts(o, ", no token count stored (");
        }
        if (x->answers) {
            sb_printf(o, "%s%% cut at ", share(a, sizeof a, x->cut, x->answers));
            if (f->max_tokens > 0) sb_printf(o, "%d tokens)", f->max_tokens);
            else sb_puts(o, "the token limit)");
        }
        if (x->with_gap) {
            sb_printf(o, ", smallest gap < %.1f in %s%% of %s (< %.1f: %s%%, < %.1f: %s%%), %s near ties (tokens with "
                         "a gap < %.1f) per answer",
                      gap_nats[0], share(a, sizeof a, x->min_gap_lt[0], x->with_gap),
                      x->with_gap == x->answers ? "answers" : "the answers with gaps", gap_nats[1],
                      share(b, sizeof b, x->min_gap_lt[1], x->with_gap), gap_nats[2],
                      share(c, sizeof c, x->min_gap_lt[2], x->with_gap),
                      num(d, sizeof d, 2, (double)x->tie_tokens / (double)x->with_gap), DRIFT_SHAPE_TIE_NATS);
            if (x->with_gap < x->answers) sb_printf(o, " (%zu answers)", x->with_gap);
        } else if (x->answers) {
            sb_puts(o, ", no gap known");
        }
        if (x->no_logprobs) sb_printf(o, "; %zu answer(s) without logprobs, not in the gap figures", x->no_logprobs);
        if (x->bad_logprobs) sb_printf(o, "; %zu answer(s) whose logprobs do not read, not in them", x->bad_logprobs);
        if (x->no_gap) sb_printf(o, "; %zu answer(s) with no token listing two alternatives", x->no_gap);
        if (x->failed) sb_printf(o, "; %zu failed request(s) left out", x->failed);
    }
    sb_puts(o, first ? "no baseline answer is stored." : ".");
}

/* The logistic model beside the ANOVA. */
static void sentence_logit(sbuf *o, const summary *s) {
    if (!s->f) return;
    sb_puts(o, "Logistic model of each pair's flip (flip ~ model + hardware + precision + framework, standard errors "
               "clustered by prompt; Wald chi^2 per factor, significant at p < 0.05): ");
    int first = 1;
    for (int i = 0; i < DRIFT_WL_COUNT; i++) {
        drift_workload w = shown(i);
        const drift_lab_wl_stats *x = wl_find(s, w);
        if (!x) continue;
        sb_printf(o, "%s%s: ", first ? "" : "; ", wl_name(w));
        first = 0;
        const drift_logit_fit *f = x->logit;
        if (!f) {
            sb_printf(o, "not fitted (%s)", x->logit_why[0] ? x->logit_why : "no flips");
            continue;
        }
        int said = 0;
        for (size_t t = 0; t < f->n_terms; t++) {
            const drift_logit_term *tm = &f->terms[t];
            char a[32], b[32];
            if (!isfinite(tm->chi2)) {
                sb_printf(o, "%s%s not estimable", said++ ? ", " : "", tm->factor);
                continue;
            }
            sb_printf(o, "%s%s chi2 %s on %zu df, p %s%s", said++ ? ", " : "", tm->factor, num(a, sizeof a, 1, tm->chi2),
                      tm->df, isfinite(tm->p) && tm->p < 0.001 ? "< 0.001" : num(b, sizeof b, 3, tm->p),
                      isfinite(tm->p) && tm->p < 0.05 ? " (significant)" : "");
        }
        size_t ne = 0;
        for (size_t c = 0; c < f->n_coefs; c++) ne += f->coefs[c].factor && !f->coefs[c].estimable;
        if (ne) sb_printf(o, "%s%zu level(s) not estimable (e.g. no flips among their pairs)", said ? "; " : "", ne);
        if (!said && !ne) sb_puts(o, "no factor varies");
        if (!f->converged) sb_puts(o, " (did not converge)");
    }
    if (first) sb_puts(o, "no workload has pairs");
    sb_puts(o, ". Where ANOVA (on the configurations' rates) and this model (on the pairs) disagree, the model is the "
               "one that counts each pair and its prompt.");
}

/* Q2: are hardware and precision systematic (predictable from what the
 * levels are) and framework and model idiosyncratic? */
static void sentence_systematic(sbuf *o, const summary *s) {
    const drift_table_analyses *an = s->in->analyses;
    sb_puts(o, "Are hardware and precision systematic and framework and model idiosyncratic (PRI: train without one "
               "level, predict it from its descriptors; held-out R^2 with its interval and noise ceiling)? ");
    if (!an || !an->pri_asked || !an->pri_fits || !an->pri || !an->pri->n_levels) {
        sb_printf(o, "cannot say: the PRI evaluation did not run (%s).",
                  !an || !an->pri_asked ? "not asked"
                  : !an->pri_fits       ? "too few rows"
                  : an->pri             ? "no dimension has enough levels to hold one out"
                                        : an->pri_error.msg);
        return;
    }
    if (s->f && !s->f->desc_ok)
        sb_printf(o, "(without descriptors: %s) ", s->f->desc_why[0] ? s->f->desc_why : "none given");
    const drift_pri_eval *ev = an->pri;
    int said_dim = 0;
    for (int d = 0; d < DRIFT_DIM_CONFIG_COUNT; d++) {
        const char *dim = drift_dim_names[d];
        size_t dl = strlen(dim);
        int n = 0, says = 0, pos = 0, neg = 0, held = 0;
        for (size_t i = 0; i < ev->n_levels; i++)
            held |= !strncmp(ev->levels[i].name, dim, dl) && ev->levels[i].name[dl] == '=';
        for (size_t k = 0; k < ev->n_not_held; k++) held |= !strcmp(ev->not_held[k].dim, dim);
        if (!held) continue; /* the dimension does not vary */
        sb_printf(o, "%s%s: ", said_dim++ ? " " : "", dim);
        for (size_t i = 0; i < ev->n_levels; i++) {
            const drift_pri_holdout *h = &ev->levels[i];
            if (strncmp(h->name, dim, dl) || h->name[dl] != '=') continue;
            char *t = drift_pri_holdout_text(h, 2);
            if (!t) o->oom = 1;
            sb_printf(o, "%s%s %s", n ? "; " : "", h->name + dl + 1, t ? t : "");
            free(t);
            n++;
            if (h->cannot_say == DRIFT_PRI_SAYS && isfinite(h->test_r2) && h->n_test >= 2) {
                says++;
                if (isfinite(h->r2_lo) && h->r2_lo > 0) pos++;
                if (isfinite(h->r2_hi) && h->r2_hi <= 0) neg++;
            }
        }
        for (size_t k = 0; k < ev->n_not_held; k++)
            if (!strcmp(ev->not_held[k].dim, dim))
                sb_printf(o, "not held out: %zu level(s) (PRI holds out a factor of at least %d)", ev->not_held[k].n_levels,
                          ev->min_levels);
        if (n) {
            if (!says) sb_puts(o, ". Verdict: cannot say (no held-out level carries enough signal; see above).");
            else if (pos == says)
                sb_puts(o, ". Verdict: systematic here (every level that can say is predicted: its R^2 interval is "
                           "above 0).");
            else if (neg == says)
                sb_puts(o, ". Verdict: idiosyncratic here (no level that can say is predicted: every R^2 interval "
                           "is at or below 0).");
            else
                sb_printf(o, ". Verdict: not settled (of %d levels that can say, %d predicted, %d not; the others' "
                             "intervals hold 0 or are unknown).",
                          says, pos, neg);
        } else {
            sb_puts(o, ".");
        }
        for (size_t k = 0; k < sizeof paper_holdout / sizeof *paper_holdout; k++)
            if (!strcmp(paper_holdout[k].dim, dim))
                sb_printf(o, " (The paper, %s held out: %.3f.)", paper_holdout[k].level, paper_holdout[k].r2);
    }
}

/* The controls: the A/A check and the ref oracle. */
static void sentence_controls(sbuf *o, const summary *s) {
    if (!s->f) return;
    const drift_lab_findings *f = s->f;
    sb_puts(o, "Controls, apart from the axes. A/A (the baseline against itself at another thread count; 0 by "
               "construction): ");
    if (!f->aa_runs) sb_puts(o, "not run.");
    else if (!f->aa_flips && !(f->aa_sdr_max > DRIFT_LAB_AA_SDR_TOL))
        sb_printf(o, "passed: %zu run(s), 0 flips, chat SDR at most %.2g.", f->aa_runs, f->aa_sdr_max);
    else
        sb_printf(o, "FAILED: %zu flip(s), largest chat SDR %.4f over %zu run(s): the engine's invariance is broken and "
                     "every figure here is suspect.",
                  f->aa_flips, f->aa_sdr_max, f->aa_runs);
    sb_puts(o, " How far is the baseline from exact (the ref oracle, float64 reference kernels, against each model's "
               "baseline; not one of the axes): ");
    int any = 0;
    for (int i = 0; i < DRIFT_WL_COUNT; i++) {
        drift_workload w = shown(i);
        long fl = 0, n = 0;
        for (size_t k = 0; k < f->n_controls; k++)
            if (f->controls[k].role == 3) fl += f->controls[k].flips[w], n += f->controls[k].pairs[w];
        if (!n) continue;
        double lo, hi;
        wilson_p((double)fl / (double)n, (double)n, &lo, &hi);
        char a[32], b[32], c[32];
        sb_printf(o, "%s%s %s [%s, %s] (%ld of %ld pairs)", any ? "; " : "", wl_name(w), pct(a, sizeof a, 100.0 * fl / n),
                  pct(b, sizeof b, 100 * lo), pct(c, sizeof c, 100 * hi), fl, n);
        any = 1;
    }
    sb_puts(o, any ? " (Wilson 95%, pairs of the models pooled)." : "not run.");
}

/* The stochastic leg with the stats helper's flip-rate estimand. */
static void sentence_stochastic_estimand(sbuf *o, const summary *s) {
    const drift_lab_stochastic *x = s->leg;
    const drift_stoch_estimand *e = &x->estimand;
    sb_printf(o, "Stochastic serving (temperature %.2g, %d replicates, %zu math prompts, %s %s; each stack sampled "
                 "twice with different seeds): majority-vote flip rate between the stacks (the paper's stochastic "
                 "number, sampling noise included) ",
              x->temperature, x->replicates, e->n, x->model, x->pair);
    ci_pct(o, &e->cross);
    sb_puts(o, "; between two seed sets of the same stack (the null: what sampling alone gives) ");
    ci_pct(o, &e->null);
    sb_puts(o, "; beyond the null (the flips the stack change causes) ");
    ci_pct(o, &e->beyond);
    if (isfinite(e->det.est)) {
        sb_puts(o, "; deterministic flip rate of the same pair on the same prompts ");
        ci_pct(o, &e->det);
    }
    sb_puts(o, ". ");
    const drift_boot_ci *r = &e->ratio_beyond;
    if (!isfinite(r->est)) {
        sb_puts(o, "The ratio to the deterministic rate (the paper: 0.23x) cannot be said: no deterministic flip among "
                   "these prompts.");
    } else {
        char a[32], b[32], c[32];
        sb_printf(o, "Ratio beyond-null / deterministic %sx [%s, %s] (the paper reports 0.23x for its stochastic over "
                     "deterministic rates): ",
                  num(a, sizeof a, 2, r->est), num(b, sizeof b, 2, r->lo), isinf(r->hi) ? "unbounded" : num(c, sizeof c, 2, r->hi));
        if (isinf(r->hi) || (r->lo <= 0 && r->hi >= PAPER_STOCH_RATIO))
            sb_puts(o, "cannot say at this size (the interval holds 0 and 0.23x, or is unbounded above).");
        else if (r->lo <= PAPER_STOCH_RATIO && PAPER_STOCH_RATIO <= r->hi)
            sb_puts(o, "the paper's figure is inside the interval.");
        else sb_puts(o, r->hi < PAPER_STOCH_RATIO ? "below the paper's figure." : "above the paper's figure.");
    }
    sb_printf(o, " Majority ties: %.1f%% of the replicate sets.", 100 * e->tie_share);
}

typedef void (*sentence_fn)(sbuf *, const summary *);
static void sentence_stochastic_any(sbuf *o, const summary *s) {
    if (s->leg && s->leg->estimand_ok) sentence_stochastic_estimand(o, s);
    else sentence_stochastic(o, s);
}

/* Findings first: the models, the rates, then the paper's questions one by
 * one, then how the axes were tested, the baseline's answers (their shape
 * beside flip risk), the stochastic leg and the controls. */
static const sentence_fn sentences[] = {sentence_models,     sentence_rates, sentence_intervals, sentence_order,
                                        sentence_systematic, sentence_safety, sentence_anova,   sentence_logit,
                                        sentence_risk,       sentence_shape,  sentence_stochastic_any,
                                        sentence_controls};
#define N_SENTENCES (sizeof sentences / sizeof *sentences)

/* ------------------------------------------------------------ text */

/* Appends s word-wrapped at WRAP_COLS, each line indented by ind spaces. */
static void wrap(sbuf *o, const char *s, int ind) {
    int col = 0;
    while (*s) {
        while (*s == ' ') s++;
        size_t n = strcspn(s, " ");
        if (!n) break;
        if (col && col + 1 + (int)n > WRAP_COLS) {
            sb_puts(o, "\n");
            col = 0;
        }
        if (!col) {
            sb_printf(o, "%*s", ind, "");
            col = ind;
        } else {
            sb_puts(o, " ");
            col++;
        }
        sb_printf(o, "%.*s", (int)n, s);
        col += (int)n;
        s += n;
    }
    sb_puts(o, "\n");
}

static void render_text(sbuf *o, const summary *s, char *const *sent) {
    sb_puts(o, "== summary: what this lab found ==\n");
    wrap(o, sent[0], 0);
    sb_printf(o, "\n  %-13s %9s  %-20s %15s %8s %8s  %s\n", "workload", "here", "95% interval", "flips / pairs",
              "prompts", "paper", "here vs paper");
    for (int i = 0; i < DRIFT_WL_COUNT; i++) {
        drift_workload w = shown(i);
        const wl_stat *x = &s->wl[w];
        char a[32], b[32], c[32], p[32], iv[48], fp[48];
        if (!x->present) {
            sb_printf(o, "  %-13s %9s  %-20s %15s %8s %8s  %s\n", wl_name(w), "-", "", "", "", pct(p, sizeof p, paper_rate(w)),
                      "not run");
            continue;
        }
        snprintf(iv, sizeof iv, "[%s, %s]", pct(b, sizeof b, x->lo), pct(c, sizeof c, x->hi));
        snprintf(fp, sizeof fp, "%lld / %lld", x->flips, x->pairs);
        sb_printf(o, "  %-13s %9s  %-20s %15s %8ld %8s  %s%s\n", wl_name(w), pct(a, sizeof a, x->rate), iv, fp,
                  x->prompts, pct(p, sizeof p, paper_rate(w)), vs_word[x->vs], paper_is_sdr(w) ? " (paper: SDR)" : "");
    }
    sb_printf(o, "  (%zu configuration(s); paper = its mean over 105 configurations)\n\n", s->configs);
    for (size_t k = 1, said = 0; k < N_SENTENCES; k++) {
        if (!sent[k][0]) continue; /* nothing to say (a bare table has no findings) */
        if (said++) sb_puts(o, "\n");
        wrap(o, sent[k], 0);
    }
}

/* ------------------------------------------------------------ html */

static void html_esc(sbuf *o, const char *s) {
    char *e = html_escape(s ? s : "");
    if (!e) o->oom = 1;
    else sb_puts(o, e);
    free(e);
}

/* A round axis maximum >= v (percent): 1, 2, 2.5, 5 x 10^k; at least 1. */
static double nice_max(double v) {
    if (!(v > 1)) return 1;
    if (!isfinite(v) || v > 100) return 100;
    double e = pow(10, floor(log10(v)));
    static const double steps[] = {1, 2, 2.5, 5, 10};
    for (size_t i = 0; i < sizeof steps / sizeof *steps; i++)
        if (steps[i] * e >= v) return steps[i] * e;
    return 10 * e;
}

/* The chart: one group per workload (shown[] order), bar = pooled rate,
 * whisker = 95% interval, red dash = the paper's figure. */
static void render_svg(sbuf *o, const summary *s) {
    const double W = 680, H = 320, x0 = 56, x1 = 664, y0 = 40, y1 = 250;
    double top = 0;
    for (int i = 0; i < DRIFT_WL_COUNT; i++) {
        drift_workload w = shown(i);
        if (paper_rate(w) > top) top = paper_rate(w);
        if (s->wl[w].present && s->wl[w].hi > top) top = s->wl[w].hi;
    }
    double ymax = nice_max(top * 1.05);
    const double gw = (x1 - x0) / DRIFT_WL_COUNT;
#define Y(v) (y1 - ((v) < 0 ? 0 : (v) > ymax ? ymax : (v)) / ymax * (y1 - y0))
    sb_printf(o, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
                 "role=\"img\" aria-label=\"flip rate per workload with 95%% intervals beside the paper's\">\n",
              W, H, W, H);
    sb_puts(o, "<title>Flip rate per workload (pooled over configurations, 95% interval) beside the paper's</title>\n");
    /* grid and y axis */
    for (int k = 0; k <= 5; k++) {
        double v = ymax * k / 5, y = Y(v);
        sb_printf(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"1\"/>\n", x0, y,
                  x1, y, k ? "#e4e7ec" : "#5b6474");
        sb_printf(o, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\" fill=\"#5b6474\">%.3g%%</text>\n",
                  x0 - 6, y + 4, v);
    }
    sb_printf(o, "<text x=\"14\" y=\"%.1f\" font-size=\"11\" fill=\"#5b6474\" transform=\"rotate(-90 14 %.1f)\" "
                 "text-anchor=\"middle\">flip rate (%%)</text>\n",
              (y0 + y1) / 2, (y0 + y1) / 2);
    /* legend */
    sb_printf(o, "<rect x=\"%.1f\" y=\"10\" width=\"12\" height=\"12\" fill=\"#4c78a8\"/><text x=\"%.1f\" y=\"20\" "
                 "font-size=\"12\">here: pooled rate, whisker = 95%% interval (each prompt counted once)</text>\n",
              x0, x0 + 16);
    sb_printf(o, "<line x1=\"%.1f\" y1=\"16\" x2=\"%.1f\" y2=\"16\" stroke=\"#c0392b\" stroke-width=\"3\"/>"
                 "<text x=\"%.1f\" y=\"20\" font-size=\"12\">paper</text>\n",
              x1 - 70, x1 - 50, x1 - 44);
    char a[32], b[32], c[32], p[32];
    for (int i = 0; i < DRIFT_WL_COUNT; i++) {
        drift_workload w = shown(i);
        const wl_stat *x = &s->wl[w];
        double cx = x0 + gw * (i + 0.5), bw = gw * 0.42;
        sb_printf(o, "<g>\n<title>%s: ", wl_name(w));
        if (x->present)
            sb_printf(o, "%s [%s, %s], %lld flips in %lld pairs, %ld prompts; ", pct(a, sizeof a, x->rate),
                      pct(b, sizeof b, x->lo), pct(c, sizeof c, x->hi), x->flips, x->pairs, x->prompts);
        else sb_puts(o, "not run; ");
        sb_printf(o, "paper %s%s</title>\n", pct(p, sizeof p, paper_rate(w)), paper_is_sdr(w) ? " (its SDR figure)" : "");
        if (x->present) {
            double yr = Y(x->rate), ylo = Y(x->lo), yhi = Y(x->hi);
            sb_printf(o, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#4c78a8\"/>\n", cx - bw / 2,
                      yr, bw, y1 - yr);
            sb_printf(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#1d2330\" stroke-width=\"1.5\"/>\n",
                      cx, ylo, cx, yhi);
            sb_printf(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#1d2330\" stroke-width=\"1.5\"/>\n",
                      cx - 6, yhi, cx + 6, yhi);
            sb_printf(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#1d2330\" stroke-width=\"1.5\"/>\n",
                      cx - 6, ylo, cx + 6, ylo);
        } else {
            sb_printf(o, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\" fill=\"#8a93a3\">not "
                         "run</text>\n",
                      cx, y1 - 8);
        }
        double yp = Y(paper_rate(w));
        sb_printf(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#c0392b\" stroke-width=\"3\"%s/>\n",
                  cx - gw * 0.35, yp, cx + gw * 0.35, yp, paper_is_sdr(w) ? " stroke-dasharray=\"4 3\"" : "");
        sb_printf(o, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\" font-weight=\"600\">%s</text>\n",
                  cx, y1 + 18, wl_name(w));
        sb_printf(o, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\" fill=\"#4c78a8\">here %s</text>\n",
                  cx, y1 + 34, x->present ? pct(a, sizeof a, x->rate) : "-");
        sb_printf(o, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\" fill=\"#c0392b\">paper %s%s</text>\n",
                  cx, y1 + 49, pct(p, sizeof p, paper_rate(w)), paper_is_sdr(w) ? " (SDR)" : "");
        sb_puts(o, "</g>\n");
    }
#undef Y
    sb_puts(o, "</svg>\n");
}

static void render_html(sbuf *o, const summary *s, char *const *sent) {
    sb_puts(o, "<section id=\"summary\">\n<h2>What this lab found</h2>\n<p class=\"note\">");
    html_esc(o, sent[0]);
    sb_puts(o, "</p>\n<div class=\"card\">\n");
    render_svg(o, s);
    sb_puts(o, "<table><tr><th>workload</th><th>here</th><th>95% interval</th><th>flips / pairs</th><th>prompts</th>"
               "<th>paper</th><th>here vs paper</th></tr>\n");
    for (int i = 0; i < DRIFT_WL_COUNT; i++) {
        drift_workload w = shown(i);
        const wl_stat *x = &s->wl[w];
        char a[32], b[32], c[32], p[32];
        sb_printf(o, "<tr><td>%s</td>", wl_name(w));
        if (x->present)
            sb_printf(o, "<td class=\"num\">%s</td><td class=\"num\">[%s, %s]</td><td class=\"num\">%lld / %lld</td>"
                         "<td class=\"num\">%ld</td>",
                      pct(a, sizeof a, x->rate), pct(b, sizeof b, x->lo), pct(c, sizeof c, x->hi), x->flips, x->pairs,
                      x->prompts);
        else sb_puts(o, "<td>-</td><td></td><td></td><td></td>");
        sb_printf(o, "<td class=\"num\">%s%s</td><td>%s</td></tr>\n", pct(p, sizeof p, paper_rate(w)),
                  paper_is_sdr(w) ? " (SDR)" : "", x->present ? vs_word[x->vs] : "not run");
    }
    sb_printf(o, "</table>\n<p class=\"sub\">%zu configuration(s); paper = its mean over 105 configurations.</p>\n"
                 "</div>\n",
              s->configs);
    for (size_t k = 1; k < N_SENTENCES; k++) {
        if (!sent[k][0]) continue;
        sb_puts(o, "<p>");
        html_esc(o, sent[k]);
        sb_puts(o, "</p>\n");
    }
    sb_puts(o, "</section>\n");
}

static drift_status summary_render(const drift_lab_summary_in *in, const drift_lab_findings *f,
                                   const drift_lab_stochastic *leg, char **text, char **html, drift_error *err) {
    if (text) *text = NULL;
    if (html) *html = NULL;
    if (!in || !in->table) return drift_error_set(err, DRIFT_ERR_INVALID, "lab summary: no flip table");
    summary s;
    compute(&s, in, f, leg);
    char *sent[N_SENTENCES] = {0};
    int oom = 0;
    for (size_t k = 0; k < N_SENTENCES; k++) {
        sbuf o = {{0}, 0};
        sentences[k](&o, &s);
        oom |= o.oom;
        sent[k] = buf_steal(&o.b);
        oom |= !sent[k];
    }
    sbuf t = {{0}, 0}, h = {{0}, 0};
    if (!oom && text) render_text(&t, &s, sent);
    if (!oom && html) render_html(&h, &s, sent);
    oom |= t.oom || h.oom;
    for (size_t k = 0; k < N_SENTENCES; k++) free(sent[k]);
    if (!oom && text) { /* level names come from the table: the text through the sanitiser */
        drift_error e2 = {0};
        oom |= report_text_finish(&t.b, text, &e2) != DRIFT_OK;
    }
    if (!oom && html) oom |= !(*html = buf_steal(&h.b));
    if (oom) {
        buf_free(&t.b);
        buf_free(&h.b);
        if (text) free(*text), *text = NULL;
        if (html) free(*html), *html = NULL;
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory rendering the lab summary");
    }
    return DRIFT_OK;
}

/* See report.h. */
drift_status drift_lab_summary_render(const drift_lab_summary_in *in, char **text, char **html, drift_error *err) {
    return summary_render(in, NULL, NULL, text, html, err);
}

/* The stochastic leg's figures as the summary reads them, from the leg's
 * comparison: against the null when it was computed, else the expected
 * rate alone with why the rest is missing. what: room for the pair's name. */
static drift_lab_summary_stochastic summary_stochastic(const drift_lab_stochastic *x, char *what, size_t cap) {
    const drift_lab_beyond *d = &x->beyond;
    snprintf(what, cap, "%s %s, math", x->model, x->pair);
    int ok = x->null_ok;
    return (drift_lab_summary_stochastic){
        .what = what, .n_prompts = ok ? (long)d->n : 0, .replicates = x->replicates, .temperature = x->temperature,
        .stochastic_rate = ok ? d->cross : x->expected_flip_rate, .null_rate = ok ? d->null_rate : NAN,
        .beyond_rate = ok ? d->beyond : NAN, .beyond_lo = ok ? d->beyond_lo : NAN,
        .beyond_hi = ok ? d->beyond_hi : NAN, .det_rate = ok ? d->det : NAN, .ratio = ok ? d->ratio : NAN,
        .ratio_lo = ok ? d->ratio_lo : NAN, .ratio_hi = ok ? d->ratio_hi : NAN,
        .reason = !ok                ? x->null_reason
                  : isnan(d->ratio)  ? "no deterministic flip among the leg's prompts: too small a sample to say"
                  : isinf(d->ratio_hi) ? "too few deterministic flips to bound the ratio above"
                                       : NULL};
}

/* See lab_result.h. */
drift_status drift_lab_report_summary_render(const drift_lab_report *r, char **text, char **html, drift_error *err) {
    if (text) *text = NULL;
    if (html) *html = NULL;
    if (!r) return drift_error_set(err, DRIFT_ERR_INVALID, "no lab result to render");
    char what[DRIFT_LAB_LABEL_MAX + 64];
    drift_lab_summary_stochastic ss;
    if (r->stochastic) ss = summary_stochastic(r->stochastic, what, sizeof what);
    drift_lab_summary_in si = {.table = r->table, .analyses = r->analyses, .stochastic = r->stochastic ? &ss : NULL,
                               .test_fixtures = r->fixtures};
    return summary_render(&si, r->findings, r->stochastic, text, html, err);
}
