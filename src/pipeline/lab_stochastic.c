/* lab_stochastic.c - the lab's stochastic-serving leg (the paper's
 * temperature 0.7, N=5 check).
 *
 * The first model's baseline (w16a16) and w4a16 configurations (the same
 * targets as the matrix's "base@MODEL" and "MODEL/avx2/w4a16/vllm", called
 * A and B below, f32 and int4 in the formulas) run again at
 * temperature 0.7 with 5 replicates on math, under their own labels
 * ("stochastic/MODEL/w16a16"), so they are no rows of the flip table. Their
 * comparison gives the expected flip rate over replicate pairs; the
 * deterministic flip rate of the same pair comes from the matrix's runs;
 * the ratio is what the paper reports as ~0.23x.
 *
 * Sampling alone disagrees with itself: two replicates of one stack at
 * temperature 0.7 differ on a prompt whose pass probability p is not 0 or
 * 1 (2p(1-p) of the pairs). So both stacks run a second time with other
 * seeds (the nulls), and the leg reports the disagreement beyond them, per
 * prompt cross - null, with a paired bootstrap interval over prompts, and
 * that over the deterministic flip rate of the same prompts
 * (drift_lab_beyond_null). Every compared pair of runs has different seeds:
 *   cross = mean of d(f32@seed, int4@null_seed) and d(f32@null_seed, int4@seed)
 *   null  = mean of d(f32@seed, f32@null_seed) and d(int4@seed, int4@null_seed)
 * With pass probabilities p (f32) and q (int4), cross - null estimates
 * p + q - 2pq - (p - p^2 + q - q^2) = (p - q)^2 >= 0 without bias: zero
 * exactly when the stacks sample the same. (Comparing runs of the same
 * seed would share random draws between the stacks and pull the cross
 * rate below the null's; a null of f32 alone would leave a signed term
 * (q - p)(1 - 2p).)
 *
 *   design -> run (the run stage + scoring, per label; one scorer for the
 *             four labels) -> compare
 *          -> per prompt (cross, null, det) -> drift_lab_beyond_null */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/compare.h"
#include "driftbench/lab.h"
#include "driftbench/pipeline.h"
#include "pipeline/lab_internal.h"
#include "util/util.h"

void drift_lab_stochastic_design(const drift_lab_study *s, drift_lab_stochastic *x) {
    memset(x, 0, sizeof *x);
    const char *path = s->models[0].path, *name = s->models[0].name;
    snprintf(x->model, sizeof x->model, "%s", name);
    lab_config_target(x->target_base, sizeof x->target_base, path, LAB_BASE_PRECISION, LAB_BASE_HARDWARE,
                      LAB_BASE_FRAMEWORK, s->opts.threads);
    lab_config_target(x->target_alt, sizeof x->target_alt, path, DRIFT_LAB_STOCH_ALT, LAB_BASE_HARDWARE,
                      LAB_BASE_FRAMEWORK, s->opts.threads);
    snprintf(x->label_base, sizeof x->label_base, "stochastic/%s/%s", name, LAB_BASE_PRECISION);
    snprintf(x->label_alt, sizeof x->label_alt, "stochastic/%s/%s", name, DRIFT_LAB_STOCH_ALT);
    snprintf(x->label_null_base, sizeof x->label_null_base, "stochastic/%s/%s-null", name, LAB_BASE_PRECISION);
    snprintf(x->label_null_alt, sizeof x->label_null_alt, "stochastic/%s/%s-null", name, DRIFT_LAB_STOCH_ALT);
    x->seed = 42;
    x->null_seed = DRIFT_LAB_STOCH_NULL_SEED;
    snprintf(x->det_base, sizeof x->det_base, "base@%s", name);
    snprintf(x->det_alt, sizeof x->det_alt, "%s/%s/%s/%s", name, LAB_BASE_HARDWARE, DRIFT_LAB_STOCH_ALT,
             LAB_BASE_FRAMEWORK);
    snprintf(x->pair, sizeof x->pair, "%s -> %s", LAB_BASE_PRECISION, DRIFT_LAB_STOCH_ALT);
    snprintf(x->suite, sizeof x->suite, "builtin:math?n=%ld", s->stoch_prompts);
    x->replicates = DRIFT_LAB_STOCH_REPLICATES;
    x->temperature = 0.7;
    x->max_tokens = s->spec ? s->spec->max_tokens : s->max_tokens;
    x->expected_flip_rate = x->majority_flip_rate = x->det_flip_rate = x->ratio = NAN;
}

/* ---- drift beyond the null ---- */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The q-quantile of sorted v (n > 0), linear between order statistics. */
static double quantile(const double *v, size_t n, double q) {
    double h = q * (double)(n - 1);
    size_t lo = (size_t)floor(h), hi = lo + 1 < n ? lo + 1 : lo;
    if (isinf(v[lo]) || isinf(v[hi])) return v[h - (double)lo < 0.5 ? lo : hi];
    return v[lo] + (h - (double)lo) * (v[hi] - v[lo]);
}

drift_status drift_lab_beyond_null(const double *cross, const double *null_d, const double *det, size_t n,
                                   int resamples, uint64_t seed, drift_lab_beyond *out, drift_error *err) {
    memset(out, 0, sizeof *out);
    out->ratio = out->ratio_lo = out->ratio_hi = NAN;
    out->beyond = out->beyond_lo = out->beyond_hi = NAN;
    if (n < 2) return drift_error_set(err, DRIFT_ERR_INVALID, "beyond the null: %zu prompts (at least 2 are needed)", n);
    for (size_t i = 0; i < n; i++) {
        double v[3] = {cross[i], null_d[i], det[i]};
        for (int k = 0; k < 3; k++)
            if (!(v[k] >= 0 && v[k] <= 1))
                return drift_error_set(err, DRIFT_ERR_INVALID, "beyond the null: prompt %zu has a figure outside [0, 1]", i);
    }
    if (resamples < 200) resamples = 200;
    double sc = 0, sn = 0, sd = 0;
    for (size_t i = 0; i < n; i++) {
        sc += cross[i];
        sn += null_d[i];
        sd += det[i];
    }
    out->n = n;
    out->resamples = resamples;
    out->cross = sc / (double)n;
    out->null_rate = sn / (double)n;
    out->det = sd / (double)n;
    out->beyond = out->cross - out->null_rate;
    double *bd = malloc((size_t)resamples * sizeof *bd), *br = malloc((size_t)resamples * sizeof *br);
    if (!bd || !br) {
        free(bd);
        free(br);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    util_rng rng;
    util_rng_seed(&rng, seed);
    size_t zero = 0;
    for (int b = 0; b < resamples; b++) {
        double d = 0, f = 0;
        for (size_t k = 0; k < n; k++) {
            size_t i = (size_t)util_rng_below(&rng, n);
            d += cross[i] - null_d[i];
            f += det[i];
        }
        bd[b] = d / (double)n;
        if (f > 0) br[b] = d / f;
        else {
            zero++;
            br[b] = d > 0 ? INFINITY : d < 0 ? -INFINITY : 0;
        }
    }
    qsort(bd, (size_t)resamples, sizeof *bd, cmp_double);
    qsort(br, (size_t)resamples, sizeof *br, cmp_double);
    out->beyond_lo = quantile(bd, (size_t)resamples, 0.025);
    out->beyond_hi = quantile(bd, (size_t)resamples, 0.975);
    out->det_zero_share = (double)zero / (double)resamples;
    if (out->det > 0) {
        out->ratio = out->beyond / out->det;
        out->ratio_lo = quantile(br, (size_t)resamples, 0.025);
        out->ratio_hi = out->det_zero_share > 0.025 ? INFINITY : quantile(br, (size_t)resamples, 0.975);
    }
    free(bd);
    free(br);
    return DRIFT_OK;
}

/* One run's math labels per prompt, in prompt row order. */
typedef struct prompt_labels {
    int64_t *rowid;
    long *pass, *fail;
    size_t n;
} prompt_labels;

static void prompt_labels_clear(prompt_labels *p) {
    free(p->rowid);
    free(p->pass);
    free(p->fail);
    memset(p, 0, sizeof *p);
}

static drift_status load_labels(drift_store *st, const char *label, prompt_labels *out, drift_error *err) {
    memset(out, 0, sizeof *out);
    drift_run_info info;
    memset(&info, 0, sizeof info);
    drift_status rc = drift_store_run_get(st, label, &info, err);
    if (rc) return rc;
    drift_scored_set set;
    rc = drift_store_load_scored(st, info.id, &set, err);
    drift_run_info_clear(&info);
    if (rc) return rc;
    size_t cap = set.n ? set.n : 1;
    out->rowid = malloc(cap * sizeof *out->rowid);
    out->pass = calloc(cap, sizeof *out->pass);
    out->fail = calloc(cap, sizeof *out->fail);
    if (!out->rowid || !out->pass || !out->fail) {
        drift_scored_set_clear(&set);
        prompt_labels_clear(out);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < set.n; i++) {
        const drift_scored *r = &set.rows[i];
        if (r->workload != DRIFT_WL_MATH || r->is_error) continue;
        if (r->label != DRIFT_LABEL_PASS && r->label != DRIFT_LABEL_FAIL) continue;
        if (!out->n || out->rowid[out->n - 1] != r->prompt_rowid) {
            out->rowid[out->n] = r->prompt_rowid;
            out->pass[out->n] = out->fail[out->n] = 0;
            out->n++;
        }
        if (r->label == DRIFT_LABEL_PASS) out->pass[out->n - 1]++;
        else out->fail[out->n - 1]++;
    }
    drift_scored_set_clear(&set);
    return DRIFT_OK;
}

/* Index of rowid in p (sorted), or -1. */
static long find_rowid(const prompt_labels *p, int64_t rowid) {
    size_t lo = 0, hi = p->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p->rowid[mid] < rowid) lo = mid + 1;
        else hi = mid;
    }
    return lo < p->n && p->rowid[lo] == rowid ? (long)lo : -1;
}

/* Share of (a replicate, b replicate) pairs that disagree. */
static double disagree(long ap, long af, long bp, long bf) {
    return (double)(ap * bf + af * bp) / (double)((ap + af) * (bp + bf));
}

/* Per-prompt figures over the math prompts labelled in all six runs, then
 * drift_lab_beyond_null. */
static drift_status against_null(drift_store *st, drift_lab_stochastic *x, drift_error *err) {
    const char *labels[6] = {x->label_base, x->label_alt, x->label_null_base, x->label_null_alt, x->det_base, x->det_alt};
    prompt_labels pl[6];
    memset(pl, 0, sizeof pl);
    drift_status rc = DRIFT_OK;
    for (int k = 0; k < 6 && !rc; k++) rc = load_labels(st, labels[k], &pl[k], err);
    double *cross = NULL, *nul = NULL, *det = NULL;
    drift_stoch_prompt *sp = NULL;
    size_t n = 0;
    if (!rc) {
        size_t cap = pl[0].n ? pl[0].n : 1;
        cross = malloc(cap * sizeof *cross);
        nul = malloc(cap * sizeof *nul);
        det = malloc(cap * sizeof *det);
        sp = malloc(cap * sizeof *sp);
        if (!cross || !nul || !det || !sp) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; !rc && i < pl[0].n; i++) {
        long at[6];
        at[0] = (long)i;
        int all = 1;
        for (int k = 1; k < 6 && all; k++) all = (at[k] = find_rowid(&pl[k], pl[0].rowid[i])) >= 0;
        if (!all) continue;
#define D(a, b) disagree(pl[a].pass[at[a]], pl[a].fail[at[a]], pl[b].pass[at[b]], pl[b].fail[at[b]])
        /* 0 f32@seed, 1 int4@seed, 2 f32@null_seed, 3 int4@null_seed: only
         * pairs of different seeds (see the top of the file) */
        cross[n] = (D(0, 3) + D(2, 1)) / 2;
        nul[n] = (D(0, 2) + D(1, 3)) / 2;
#undef D
        /* the deterministic pair has one answer each: a flip when they differ */
        det[n] = (pl[4].pass[at[4]] > 0) != (pl[5].pass[at[5]] > 0);
        for (int k = 0; k < 4; k++) { /* the estimand's sets: A1 B1 A2 B2 = runs 0 1 2 3 */
            sp[n].pass[k] = pl[k].pass[at[k]];
            sp[n].fail[k] = pl[k].fail[at[k]];
        }
        sp[n].det_flip = (int)det[n];
        n++;
    }
    x->estimand_ok = 0;
    if (!rc) {
        drift_error e = {0};
        if (drift_stoch_estimand_compute(sp, n, NULL, &x->estimand, &e))
            snprintf(x->estimand_why, sizeof x->estimand_why, "%s", e.msg);
        else x->estimand_ok = 1;
    }
    if (!rc)
        rc = n < 2 ? drift_error_set(err, DRIFT_ERR_INVALID,
                                     "%zu math prompts are labelled in all six runs (at least 2 are needed)", n)
                   : drift_lab_beyond_null(cross, nul, det, n, 2000, 20261202, &x->beyond, err);
    free(cross);
    free(nul);
    free(det);
    free(sp);
    for (int k = 0; k < 6; k++) prompt_labels_clear(&pl[k]);
    return rc;
}

void drift_lab_stochastic_opts_default(drift_lab_stochastic_opts *o) {
    memset(o, 0, sizeof *o);
    o->concurrency = 8;
    drift_score_opts_default(&o->score);
}

drift_status drift_lab_stochastic_run(drift_store *st, const drift_lab_stochastic *x, const drift_lab_stochastic_opts *o,
                                      drift_lab_stochastic_summary *sum, drift_error *err) {
    memset(sum, 0, sizeof *sum);
    const char *labels[4] = {x->label_base, x->label_alt, x->label_null_base, x->label_null_alt};
    const char *targets[4] = {x->target_base, x->target_alt, x->target_base, x->target_alt};
    long seeds[4] = {x->seed, x->seed, x->null_seed, x->null_seed};
    const char *suites[1] = {x->suite};
    drift_scorer *scorer = NULL; /* opened at the first scoring, closed at the end */
    drift_status rc = DRIFT_OK;
    for (int k = 0; k < 4 && !rc; k++) {
        sum->label = labels[k];
        sum->target = targets[k];
        drift_run_opts r;
        drift_run_opts_default(&r);
        r.label = labels[k];
        r.target = targets[k];
        r.suites = suites;
        r.n_suites = 1;
        r.replicates = x->replicates;
        r.params.temperature = x->temperature;
        r.params.seed = seeds[k];
        r.params.max_tokens = x->max_tokens;
        if (o->concurrency > 0) r.target_opts.concurrency = o->concurrency;
        r.cancel = o->cancel;
        r.cancel_user = o->cancel_user;
        r.progress = o->progress;
        r.progress_user = o->progress_user;
        rc = drift_run_execute(st, &r, &sum->run, err);
        if (rc) {
            sum->failed_in_run = 1;
            break;
        }
        memset(&sum->score, 0, sizeof sum->score);
        if (!scorer) rc = drift_scorer_open(st, &o->score, &scorer, err);
        if (!rc) rc = drift_scorer_score_labels(scorer, &labels[k], 1, &sum->score, err);
        if (rc) break;
        sum->done++;
        if (o->progress) {
            drift_progress p = {.stage = "lab", .event = DRIFT_PROGRESS_ITEM, .label = labels[k], .done = sum->done,
                                .total = 4, .eta_ms = -1.0, .summary = sum};
            o->progress(o->progress_user, &p);
        }
    }
    drift_scorer_close(scorer);
    return rc;
}

drift_status drift_lab_stochastic_compare(drift_store *st, drift_lab_stochastic *x, drift_error *err) {
    drift_comparison *sc = NULL, *dc = NULL;
    drift_status rc = drift_compare_runs(st, x->label_base, x->label_alt, NULL, &sc, err);
    if (rc) return rc;
    const drift_wl_result *sw = &sc->wl[DRIFT_WL_MATH];
    x->expected_flip_rate = sw->expected_flip_rate;
    x->majority_flip_rate = sw->majority_flip_rate;
    x->majority_flips = sw->majority_flips;
    x->majority_n = sw->majority_n;
    x->majority_ties = sw->majority_ties;
    drift_error derr = {0};
    drift_status drc = drift_compare_runs(st, x->det_base, x->det_alt, NULL, &dc, &derr);
    x->det_ok = drc == DRIFT_OK && dc->present[DRIFT_WL_MATH];
    x->ratio = NAN;
    if (x->det_ok) {
        const drift_wl_result *dw = &dc->wl[DRIFT_WL_MATH];
        x->det_n = dw->n;
        x->det_flip_rate = dw->flip_rate;
        if (dw->flip_rate > 0 && !isnan(sw->expected_flip_rate)) x->ratio = sw->expected_flip_rate / dw->flip_rate;
    } else {
        snprintf(x->det_reason, sizeof x->det_reason, "%s", drc ? derr.msg : "no math pairs");
    }
    drift_comparison_free(sc);
    drift_comparison_free(dc);
    x->null_ok = 0;
    drift_error nerr = {0};
    if (against_null(st, x, &nerr)) {
        snprintf(x->null_reason, sizeof x->null_reason, "%s", nerr.msg);
        if (!x->estimand_ok && !x->estimand_why[0]) snprintf(x->estimand_why, sizeof x->estimand_why, "%s", nerr.msg);
    }
    else x->null_ok = 1;
    return DRIFT_OK;
}
