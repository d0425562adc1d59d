/* lab.c - the lab stage in one call (drift_lab_run, lab.h): the paper's
 * study on the embedded engine, in the order a person running it reads it:
 *
 *   models    drift_lab_models_find (the fixtures when models/ has none)
 *   safety    drift_lab_safety_check: can safety be judged?
 *   design    drift_lab_design: the matrix and --quick's long-context subset
 *             (reported even when its parse fails, so the JSON can be kept)
 *   size      the store opened once for the whole session (a dry run opens
 *             it only when it exists, to count what is stored), then
 *             drift_lab_plan_size, drift_lab_plan_estimate and the weights
 *             of each configuration (what a progress bar weighs them by);
 *             a dry run stops here
 *   main leg  the matrix stage (drift_matrix_run) with the chat embedder and
 *             the guard the study chose, one verdict cache for every scoring
 *             call of the session (most configurations give the baseline's
 *             text, judged once), jobs configurations side by side
 *   side legs --quick's long-context subset (recheck: the same runs gain
 *             long-context answers; prompts longer than a model's context
 *             fail, stored, never pairs: all_failed_ok) and, on a thread of
 *             its own beside it, the stochastic leg (neither needs the
 *             other's answers; the long ref configuration alone would leave
 *             a core idle). The thread has its own store handle (a handle
 *             is used by one thread at a time) and records its runs'
 *             scoring; a failure of the long-context leg stops it.
 *   analyses  the stochastic comparison, the answers cut by the token
 *             limit, the flip table against "ref@{model}", its ANOVA and
 *             PRI held-out evaluation (drift_table_analyze, every core),
 *             the store's failed requests
 *
 * After each phase one progress event (stage "lab", ITEM, label = the
 * phase's name, summary = the result) lets the caller print and write what
 * the phase produced, and o->cancel is polled; the matrix legs' own events
 * pass through unchanged. Nothing here prints, writes a file other than
 * the store, or exits: the CLI (cli/cmd_lab.c) does, and the report
 * sentences are renderers over the result's view (drift_lab_result_report
 * here; lab_result.h, rendered by src/report/lab_render.c, lab_summary.c). */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "driftbench/analysis.h"
#include "driftbench/lab.h"
#include "driftbench/matrix.h"
#include "driftbench/profile.h"
#include "matrix/flip_table.h"
#include "suite/workload.h"
#include "util/util.h"

static const char *const phase_names[] = {"none",     "models",     "safety",   "design", "size",
                                          "estimate", "planned",    "leg_begin", "leg_end", "stochastic",
                                          "compared", "cuts",       "done"};

const char *drift_lab_phase_name(drift_lab_phase p) {
    return (unsigned)p < sizeof phase_names / sizeof *phase_names ? phase_names[p] : "?";
}

/* See lab.h. */
double drift_lab_cpu_s(void) {
    struct rusage self, kids;
    if (getrusage(RUSAGE_SELF, &self) || getrusage(RUSAGE_CHILDREN, &kids)) return 0;
    double s = 0;
    const struct rusage *r[2] = {&self, &kids};
    for (int i = 0; i < 2; i++)
        s += (double)r[i]->ru_utime.tv_sec + (double)r[i]->ru_utime.tv_usec / 1e6 + (double)r[i]->ru_stime.tv_sec +
             (double)r[i]->ru_stime.tv_usec / 1e6;
    return s;
}

/* The session: the options, the result being filled and the verdict cache
 * every scoring call shares. */
typedef struct lab_session {
    const drift_lab_opts *o;
    drift_lab_result *r;
    drift_score_cache *cache;
} lab_session;

static int cancelled(const lab_session *s) { return s->o->cancel && s->o->cancel(s->o->cancel_user); }

/* Reports phase p; nonzero when the caller asked to stop. */
static int phase(lab_session *s, drift_lab_phase p) {
    s->r->phase = p;
    if (s->o->progress) {
        drift_progress ev;
        memset(&ev, 0, sizeof ev);
        ev.stage = "lab";
        ev.event = DRIFT_PROGRESS_ITEM;
        ev.label = drift_lab_phase_name(p);
        ev.eta_ms = -1;
        ev.summary = s->r;
        s->o->progress(s->o->progress_user, &ev);
    }
    return cancelled(s);
}

static drift_status stop_cancelled(drift_error *err) {
    return drift_error_set(err, DRIFT_ERR_CANCELLED, "stopped");
}

/* The matrix stage's events pass through to the caller. */
static void leg_progress(void *user, const drift_progress *p) {
    const lab_session *s = user;
    if (s->o->progress) s->o->progress(s->o->progress_user, p);
}

static int leg_cancel(void *user) { return cancelled(user); }

/* Runs one matrix leg, between its LEG_BEGIN and LEG_END. */
static drift_status run_leg(lab_session *s, drift_lab_leg leg, drift_error *err) {
    drift_lab_result *r = s->r;
    const drift_matrix_spec *spec = leg == DRIFT_LAB_LEG_MAIN ? r->study.spec : r->study.long_spec;
    drift_matrix_summary *sum = leg == DRIFT_LAB_LEG_MAIN ? &r->main : &r->lng;
    r->leg = leg;
    if (phase(s, DRIFT_LAB_PHASE_LEG_BEGIN)) return stop_cancelled(err);
    drift_matrix_opts mo;
    drift_matrix_opts_default(&mo);
    mo.concurrency = DRIFT_LAB_BATCH;
    mo.jobs = r->jobs;
    mo.recheck = leg == DRIFT_LAB_LEG_LONG;
    mo.all_failed_ok = leg == DRIFT_LAB_LEG_LONG;
    mo.score.guard_spec = s->o->guard_spec;
    mo.score.embedder_spec = r->study.embedder;
    mo.score.cache = s->cache;
    mo.cancel = leg_cancel;
    mo.cancel_user = s;
    mo.progress = leg_progress;
    mo.progress_user = s;
    memset(&r->leg_err, 0, sizeof r->leg_err);
    double t0 = util_now_ms();
    r->leg_rc = drift_matrix_run(r->store, spec, &mo, sum, &r->leg_err);
    double wall_s = (util_now_ms() - t0) / 1000.0;
    if (leg == DRIFT_LAB_LEG_MAIN) {
        r->main_wall_s = wall_s;
        r->cpu_matrix_s = drift_lab_cpu_s();
    } else {
        r->long_wall_s = wall_s;
    }
    int stop = phase(s, DRIFT_LAB_PHASE_LEG_END);
    if (r->leg_rc) {
        *err = r->leg_err;
        return r->leg_rc;
    }
    return stop ? stop_cancelled(err) : DRIFT_OK;
}

/* ---- the stochastic leg's thread ---- */

typedef struct stoch_side {
    lab_session *s;
    atomic_int stop;                    /* 1: the lab failed elsewhere, stop */
} stoch_side;

static int stoch_cancel(void *user) {
    stoch_side *sd = user;
    return atomic_load(&sd->stop) || cancelled(sd->s);
}

/* Keeps each run's scoring summary (no scoring progress: the long-context
 * leg is reporting). */
static void stoch_record(void *user, const drift_progress *p) {
    stoch_side *sd = user;
    drift_lab_result *r = sd->s->r;
    if (strcmp(p->stage, "run") && p->event == DRIFT_PROGRESS_ITEM && r->n_stoch_scores < 4) {
        const drift_lab_stochastic_summary *sum = p->summary;
        r->stoch_scores[r->n_stoch_scores++] = sum->score;
    }
}

static void *stoch_thread(void *arg) {
    stoch_side *sd = arg;
    drift_lab_result *r = sd->s->r;
    double t0 = util_now_ms();
    drift_store *st = NULL;
    r->stoch_rc = drift_store_open(sd->s->o->db, &st, &r->stoch_err);
    if (!r->stoch_rc) {
        drift_lab_stochastic_opts so;
        drift_lab_stochastic_opts_default(&so);
        so.concurrency = DRIFT_LAB_BATCH;
        so.score.cache = sd->s->cache;
        so.cancel = stoch_cancel;
        so.cancel_user = sd;
        so.progress = stoch_record;
        so.progress_user = sd;
        r->stoch_rc = drift_lab_stochastic_run(st, &r->stochastic, &so, &r->stoch_sum, &r->stoch_err);
    }
    drift_store_close(st);
    r->stoch_wall_s = (util_now_ms() - t0) / 1000.0;
    return NULL;
}

/* The long-context subset with the stochastic leg beside it, then the
 * stochastic comparison. */
static drift_status run_side_legs(lab_session *s, drift_error *err) {
    drift_lab_result *r = s->r;
    double side0 = util_now_ms();
    stoch_side sd = {.s = s};
    atomic_init(&sd.stop, 0);
    drift_lab_stochastic_design(&r->study, &r->stochastic);
    pthread_t th;
    int started = pthread_create(&th, NULL, stoch_thread, &sd) == 0;
    if (!started) stoch_thread(&sd); /* no thread: one after the other */
    drift_status rc = DRIFT_OK;
    if (r->study.long_spec) rc = run_leg(s, DRIFT_LAB_LEG_LONG, err);
    if (started) {
        if (rc) atomic_store(&sd.stop, 1);
        pthread_join(th, NULL);
    }
    r->side_wall_s = (util_now_ms() - side0) / 1000.0;
    r->cpu_side_s = drift_lab_cpu_s();
    drift_error terr = {0};
    drift_store_completion_tokens(r->store, &r->tokens_after, &terr);
    if (rc) return rc;
    int stop = phase(s, DRIFT_LAB_PHASE_STOCHASTIC);
    if (r->stoch_rc) {
        *err = r->stoch_err;
        return r->stoch_rc;
    }
    if (stop) return stop_cancelled(err);
    if ((rc = drift_lab_stochastic_compare(r->store, &r->stochastic, err))) return rc;
    r->stoch_ran = 1;
    return phase(s, DRIFT_LAB_PHASE_COMPARED) ? stop_cancelled(err) : DRIFT_OK;
}

/* Models, safety, design, the store, the size and the estimate. */
static drift_status plan_study(lab_session *s, drift_error *err) {
    const drift_lab_opts *o = s->o;
    drift_lab_result *r = s->r;
    drift_status rc;
    if ((rc = drift_lab_models_find(&r->study, o, err))) return rc;
    if (phase(s, DRIFT_LAB_PHASE_MODELS)) return stop_cancelled(err);
    if ((rc = drift_lab_safety_check(&r->study, err))) return rc;
    if (phase(s, DRIFT_LAB_PHASE_SAFETY)) return stop_cancelled(err);
    r->design_rc = drift_lab_design(&r->study, o->spec_name, err);
    int stop = phase(s, DRIFT_LAB_PHASE_DESIGN);
    if (r->design_rc) return r->design_rc;
    if (stop) return stop_cancelled(err);
    if ((!o->dry_run || access(o->db, F_OK) == 0) && (rc = drift_store_open(o->db, &r->store, err))) return rc;
    const drift_matrix_spec *spec = r->study.spec;
    drift_lab_plan *p = &r->plan;
    r->weights = calloc(spec->n_configs ? spec->n_configs : 1, sizeof *r->weights);
    r->long_weights = calloc(r->study.long_spec ? r->study.long_spec->n_configs + 1 : 1, sizeof *r->long_weights);
    r->size_rc = drift_lab_plan_size(&r->study, r->store, p, &r->size_err);
    if (phase(s, DRIFT_LAB_PHASE_SIZE)) return stop_cancelled(err);
    if (!r->size_rc) {
        p->jobs = r->jobs;
        drift_error eerr = {0};
        r->estimate_rc = drift_lab_plan_estimate(&r->study, p, &eerr);
        if (phase(s, DRIFT_LAB_PHASE_ESTIMATE)) return stop_cancelled(err);
        r->long_n = p->long_suite.n;
        if (!r->estimate_rc && r->long_n)
            r->long_tokens = p->long_suite.c1 / (double)r->long_n * p->cost.long_tokens_per_char;
        for (size_t i = 0; r->weights && !r->estimate_rc && i < spec->n_configs; i++)
            r->est_main_s += r->weights[i] = drift_lab_plan_config_seconds(p, spec, i);
        for (size_t i = 0; r->long_weights && p->long_spec && !r->estimate_rc && i < p->long_spec->n_configs; i++)
            r->est_long_s += r->long_weights[i] = drift_lab_plan_config_seconds(p, p->long_spec, i);
    }
    r->gen_s = p->gen_s;
    return phase(s, DRIFT_LAB_PHASE_PLANNED) ? stop_cancelled(err) : DRIFT_OK;
}

/* ---- the analyses of issue 36 ---- */

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* The target of the spec configuration labelled label (NULL: none). */
static const char *target_of(const drift_lab_study *s, const char *label) {
    const drift_matrix_spec *sp[2] = {s->spec, s->long_spec};
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; sp[k] && i < sp[k]->n_configs; i++)
            if (!strcmp(sp[k]->configs[i].label, label)) return sp[k]->configs[i].target;
    return NULL;
}

/* Each level configuration's descriptors (drift_profile_descriptors of its
 * target's profile) into d; 0 or -1 with why. */
static int describe(const drift_lab_study *s, const matrix_table_run *kept, size_t n_kept, drift_pri_descriptors *d,
                    char *why, size_t cap) {
    for (size_t k = 0; k < n_kept; k++) {
        if (drift_lab_label_role(kept[k].label) != DRIFT_LAB_ROLE_LEVEL) continue;
        const char *t = target_of(s, kept[k].label);
        const char *q = t ? strchr(t, '?') : NULL;
        if (!q) {
            snprintf(why, cap, "'%s' is not a configuration of the lab's design", kept[k].label);
            return -1;
        }
        drift_numeric_profile prof;
        drift_error e = {0};
        if (drift_profile_parse(q + 1, &prof, &e)) {
            snprintf(why, cap, "'%s': %s", kept[k].label, e.msg);
            return -1;
        }
        const char *names[64];
        double values[64];
        size_t n = drift_profile_descriptors(&prof, names, values, 64);
        if (n > 64) n = 64;
        if (drift_pri_descriptors_set_all(d, kept[k].label, names, values, n, &e)) {
            snprintf(why, cap, "%s", e.msg);
            return -1;
        }
    }
    return 0;
}

/* The controls (A/A, ref) of the kept comparisons. */
static void controls(drift_lab_findings *f, const matrix_table_run *kept, size_t n_kept) {
    for (size_t k = 0; k < n_kept && f->n_controls < DRIFT_LAB_MAX_CONTROLS; k++) {
        drift_lab_role role = drift_lab_label_role(kept[k].label);
        if (role != DRIFT_LAB_ROLE_AA && role != DRIFT_LAB_ROLE_REF) continue;
        drift_lab_control *c = &f->controls[f->n_controls++];
        memset(c, 0, sizeof *c);
        snprintf(c->label, sizeof c->label, "%s", kept[k].label);
        snprintf(c->model, sizeof c->model, "%s", kept[k].levels[DRIFT_DIM_MODEL] ? kept[k].levels[DRIFT_DIM_MODEL] : "?");
        c->role = (int)role;
        c->sdr_mean = NAN;
        for (int w = 0; w < DRIFT_WL_COUNT; w++) {
            if (!kept[k].cmp->present[w]) continue;
            c->flips[w] = kept[k].cmp->wl[w].flips;
            c->pairs[w] = kept[k].cmp->wl[w].n;
            if (wl_traits_of((drift_workload)w)->pairwise && isfinite(kept[k].cmp->wl[w].sdr_mean))
                c->sdr_mean = kept[k].cmp->wl[w].sdr_mean; /* chat's SDR */
        }
        if (role == DRIFT_LAB_ROLE_AA) {
            f->aa_runs++;
            for (int w = 0; w < DRIFT_WL_COUNT; w++) f->aa_flips += (size_t)c->flips[w];
            if (isfinite(c->sdr_mean) && c->sdr_mean > f->aa_sdr_max) f->aa_sdr_max = c->sdr_mean;
        }
    }
}

/* Direction of the flip of (prompt, replicate) in w's flip list: -1 to
 * wrong, +1 to right, 0 unknown or chat. */
static int flip_direction(const drift_wl_result *w, const char *prompt, int replicate) {
    for (size_t i = 0; i < w->n_flipped; i++)
        if (w->flipped[i].replicate == replicate && w->flipped[i].prompt_id && !strcmp(w->flipped[i].prompt_id, prompt))
            return w->flipped[i].direction;
    return 0;
}

/* Workload w's pairs over the level configurations: the intervals, the
 * logistic model and flip risk. */
static void workload_stats(drift_lab_wl_stats *x, int w, const matrix_table_run *kept, size_t n_kept) {
    memset(x, 0, sizeof *x);
    x->risk_auc = NAN;
    x->wilson_lo = x->wilson_hi = NAN;
    size_t n = 0;
    for (size_t k = 0; k < n_kept; k++)
        if (drift_lab_label_role(kept[k].label) == DRIFT_LAB_ROLE_LEVEL && kept[k].cmp->present[w]) {
            n += kept[k].cmp->wl[w].n_pairs;
            x->n_configs++;
        }
    if (!n) return;
    x->present = 1;
    const char **ids = malloc(n * sizeof *ids);
    drift_flip_pair *pairs = malloc(n * sizeof *pairs);
    unsigned char *y = malloc(n);
    int64_t *cl = malloc(n * sizeof *cl);
    double *risk = malloc(n * sizeof *risk);
    const char **lv[DRIFT_DIM_CONFIG_COUNT];
    for (int d = 0; d < DRIFT_DIM_CONFIG_COUNT; d++) lv[d] = malloc(n * sizeof *lv[d]);
    const char **uniq = malloc(n * sizeof *uniq);
    int oom = !ids || !pairs || !y || !cl || !risk || !uniq;
    for (int d = 0; d < DRIFT_DIM_CONFIG_COUNT; d++) oom |= !lv[d];
    if (oom) {
        snprintf(x->boot_why, sizeof x->boot_why, "out of memory");
        snprintf(x->logit_why, sizeof x->logit_why, "out of memory");
        goto out;
    }
    size_t m = 0;
    for (size_t k = 0; k < n_kept; k++) {
        if (drift_lab_label_role(kept[k].label) != DRIFT_LAB_ROLE_LEVEL || !kept[k].cmp->present[w]) continue;
        const drift_wl_result *r = &kept[k].cmp->wl[w];
        for (size_t i = 0; i < r->n_pairs; i++) {
            const drift_pair_outcome *po = &r->pairs[i];
            ids[m] = po->prompt_id ? po->prompt_id : "";
            int dir = po->flipped ? flip_direction(r, ids[m], po->replicate) : 0;
            pairs[m].config = (int64_t)k;
            pairs[m].base_ok = (unsigned char)(!po->flipped || dir <= 0);
            pairs[m].cfg_ok = (unsigned char)(!po->flipped || dir > 0);
            y[m] = (unsigned char)(po->flipped != 0);
            x->flips += y[m];
            risk[m] = po->risk;
            for (int d = 0; d < DRIFT_DIM_CONFIG_COUNT; d++) lv[d][m] = kept[k].levels[d] ? kept[k].levels[d] : "?";
            m++;
        }
    }
    x->n_pairs = m;
    /* prompts: ids in sorted order */
    memcpy(uniq, ids, m * sizeof *uniq);
    qsort(uniq, m, sizeof *uniq, cmp_str);
    size_t nu = 0;
    for (size_t i = 0; i < m; i++)
        if (!nu || strcmp(uniq[nu - 1], uniq[i])) uniq[nu++] = uniq[i];
    x->n_prompts = nu;
    for (size_t i = 0; i < m; i++) {
        const char **hit = bsearch(&ids[i], uniq, nu, sizeof *uniq, cmp_str);
        cl[i] = pairs[i].prompt = hit ? (int64_t)(hit - uniq) : 0;
    }
    double p = m ? (double)x->flips / (double)m : 0;
    drift_wilson_real(p, (double)nu, 1.959963984540054, &x->wilson_lo, &x->wilson_hi);
    drift_error e = {0};
    if (drift_flip_boot_prompts(pairs, m, NULL, &x->boot, &e)) snprintf(x->boot_why, sizeof x->boot_why, "%s", e.msg);
    else x->boot_ok = 1;
    memset(&e, 0, sizeof e);
    if (x->n_configs >= 2 && !drift_flip_boot_two_way(pairs, m, NULL, &x->two_way, &e)) x->two_way_ok = 1;
    /* the logistic model: flip ~ model + hardware + precision + framework */
    static const char *const refs[DRIFT_DIM_CONFIG_COUNT] = {NULL, LAB_BASE_HARDWARE, LAB_BASE_PRECISION,
                                                             LAB_BASE_FRAMEWORK};
    drift_logit_factor_in fac[DRIFT_DIM_CONFIG_COUNT];
    for (int d = 0; d < DRIFT_DIM_CONFIG_COUNT; d++)
        fac[d] = (drift_logit_factor_in){drift_dim_names[d], lv[d], refs[d]};
    memset(&e, 0, sizeof e);
    if (!x->flips) snprintf(x->logit_why, sizeof x->logit_why, "no flips in %zu pairs", m);
    else if (drift_logit_cluster_fit(y, cl, m, fac, DRIFT_DIM_CONFIG_COUNT, &x->logit, &e))
        snprintf(x->logit_why, sizeof x->logit_why, "%s", e.msg);
    /* flip risk pooled: AUC = P(risk of a flip > risk of a pair that did not flip), ties 1/2 */
    size_t nf = 0, nn = 0;
    for (size_t i = 0; i < m; i++)
        if (isfinite(risk[i])) y[i] ? nf++ : nn++;
    x->risk_n = nf + nn;
    x->risk_flips = nf;
    if (nf && nn) {
        double wins = 0;
        for (size_t i = 0; i < m; i++) {
            if (!isfinite(risk[i]) || !y[i]) continue;
            for (size_t j = 0; j < m; j++) {
                if (!isfinite(risk[j]) || y[j]) continue;
                wins += risk[i] > risk[j] ? 1 : risk[i] == risk[j] ? 0.5 : 0;
            }
        }
        x->risk_auc = wins / ((double)nf * (double)nn);
    }
out:
    free(ids);
    free(pairs);
    free(y);
    free(cl);
    free(risk);
    free(uniq);
    for (int d = 0; d < DRIFT_DIM_CONFIG_COUNT; d++) free(lv[d]);
}

/* The shape of the baselines' answers ("base@MODEL" of the main spec,
 * pooled per workload) into f; a failure is recorded, not returned. */
static void baseline_shape(drift_lab_findings *f, drift_store *st, const drift_matrix_spec *spec) {
    const char **labels = malloc((spec->n_configs + 1) * sizeof *labels);
    if (!labels) {
        snprintf(f->shape_why, sizeof f->shape_why, "out of memory");
        return;
    }
    size_t n = 0;
    for (size_t i = 0; i < spec->n_configs; i++)
        if (drift_lab_label_role(spec->configs[i].label) == DRIFT_LAB_ROLE_BASE) labels[n++] = spec->configs[i].label;
    f->shape_runs = n;
    f->max_tokens = spec->max_tokens;
    drift_error e = {0};
    if (drift_answer_shape_runs(st, labels, n, f->shape, &e)) snprintf(f->shape_why, sizeof f->shape_why, "%s", e.msg);
    else f->shape_ok = 1;
    free(labels);
}

/* The flip table of the level configurations (rows of the controls left out). */
static drift_status levels_table(const drift_table *all, drift_table **out, drift_error *err) {
    const char **extras = (const char **)all->dim_names + DRIFT_DIM_COUNT;
    drift_status rc = drift_table_create(extras, all->n_dims - DRIFT_DIM_COUNT, all->has_ci, out, err);
    for (size_t i = 0; !rc && i < all->n_rows; i++) {
        const drift_table_row *r = &all->rows[i];
        if (drift_lab_label_role(r->experiment_id) != DRIFT_LAB_ROLE_LEVEL) continue;
        rc = drift_table_append(*out, r->experiment_id, (const char *const *)r->dims, r->flip_rate, r->num_flips,
                                r->num_comparisons, r->ci_low, r->ci_high, err);
    }
    return rc;
}

/* The flip table's rows and the kept runs in the spec's order of
 * configurations (stable: a run's rows keep their workload order, a label not
 * in the spec goes after, in store order). The store's order is the order
 * the runs were first started in: one lab run gives the spec's order anyway,
 * but a store merged from shards (tools/lab_shard) holds them shard by
 * shard, and the analyses that draw folds or resamples by row position
 * (PRI's cross-validation, the bootstraps) would then differ from an
 * unsharded run's. */
typedef struct order_key {
    size_t key, pos;
} order_key;

static int cmp_order(const void *a, const void *b) {
    const order_key *x = a, *y = b;
    return x->key != y->key ? (x->key < y->key ? -1 : 1) : (x->pos < y->pos ? -1 : x->pos > y->pos);
}

static size_t spec_index(const drift_matrix_spec *spec, const char *label) {
    for (size_t i = 0; spec && label && i < spec->n_configs; i++)
        if (spec->configs[i].label && !strcmp(spec->configs[i].label, label)) return i;
    return spec ? spec->n_configs : 0;
}

static drift_status spec_order(const drift_matrix_spec *spec, drift_table *t, matrix_table_run *kept, size_t n_kept,
                               drift_error *err) {
    size_t n = t->n_rows > n_kept ? t->n_rows : n_kept;
    order_key *k = malloc((n ? n : 1) * sizeof *k);
    void *tmp = malloc((n ? n : 1) * (sizeof(drift_table_row) > sizeof(matrix_table_run) ? sizeof(drift_table_row)
                                                                                         : sizeof(matrix_table_run)));
    if (!k || !tmp) {
        free(k);
        free(tmp);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < t->n_rows; i++) k[i] = (order_key){spec_index(spec, t->rows[i].experiment_id), i};
    qsort(k, t->n_rows, sizeof *k, cmp_order);
    drift_table_row *rows = tmp;
    for (size_t i = 0; i < t->n_rows; i++) rows[i] = t->rows[k[i].pos];
    memcpy(t->rows, rows, t->n_rows * sizeof *rows);
    for (size_t i = 0; i < n_kept; i++) k[i] = (order_key){spec_index(spec, kept[i].label), i};
    qsort(k, n_kept, sizeof *k, cmp_order);
    matrix_table_run *runs = tmp;
    for (size_t i = 0; i < n_kept; i++) runs[i] = kept[k[i].pos];
    memcpy(kept, runs, n_kept * sizeof *runs);
    free(k);
    free(tmp);
    return DRIFT_OK;
}

/* The cut answers, the flip table, its analyses and the failed requests. */
static drift_status analyze(lab_session *s, drift_error *err) {
    drift_lab_result *r = s->r;
    drift_status rc;
    if ((rc = drift_lab_count_cuts(r->store, r->study.spec, &r->cuts, err))) return rc;
    if (phase(s, DRIFT_LAB_PHASE_CUTS)) return stop_cancelled(err);
    drift_table *all = NULL;
    matrix_table_run *kept = NULL;
    size_t n_kept = 0;
    if ((rc = matrix_flip_table_runs(r->store, "base@{model}", NULL, &all, &kept, &n_kept, err))) return rc;
    if ((rc = spec_order(r->study.spec, all, kept, n_kept, err))) {
        drift_table_free(all);
        matrix_table_runs_free(kept, n_kept);
        return rc;
    }
    rc = levels_table(all, &r->table, err);
    drift_table_free(all);
    if (rc) {
        matrix_table_runs_free(kept, n_kept);
        return rc;
    }
    drift_lab_findings *f = &r->findings;
    f->computed = 1;
    controls(f, kept, n_kept);
    baseline_shape(f, r->store, r->study.spec);
    for (int w = 0; w < DRIFT_WL_COUNT; w++) workload_stats(&f->wl[w], w, kept, n_kept);
    drift_pri_options po;
    drift_pri_options_init(&po);
    /* PRI evaluations side by side on every core; same results */
    po.nthread = r->cores > 1 ? (int)(r->cores < 64 ? r->cores : 64) : 1;
    drift_pri_descriptors *desc = NULL;
    drift_error derr = {0};
    if (drift_pri_descriptors_create(&desc, &derr)) snprintf(f->desc_why, sizeof f->desc_why, "%s", derr.msg);
    else if (!describe(&r->study, kept, n_kept, desc, f->desc_why, sizeof f->desc_why)) {
        f->desc_ok = 1;
        po.desc = desc;
        /* the stack's axes described by what their levels are, so a held-out
         * level is predicted from its descriptors (the model stays one-hot) */
        po.onehot_off = 1u << DRIFT_DIM_HARDWARE | 1u << DRIFT_DIM_PRECISION | 1u << DRIFT_DIM_FRAMEWORK;
    }
    matrix_table_runs_free(kept, n_kept);
    drift_error aerr = {0}; /* a failing analysis is recorded in r->analyses */
    drift_table_analyze(r->table, 1u << 1 | 1u << 2 | 1u << 3, &po, NULL, &r->analyses, &aerr);
    drift_pri_descriptors_free(desc);
    r->outcomes_ok = drift_store_count_outcomes(r->store, &r->outcomes, &aerr) == DRIFT_OK;
    phase(s, DRIFT_LAB_PHASE_DONE); /* nothing left to stop */
    return DRIFT_OK;
}

/* See lab.h. */
drift_status drift_lab_run(const drift_lab_opts *o, drift_lab_result *r, drift_error *err) {
    memset(r, 0, sizeof *r);
    if (!o || !o->db) return drift_error_set(err, DRIFT_ERR_INVALID, "lab: no store given");
    r->cores = sysconf(_SC_NPROCESSORS_ONLN);
    long jobs = o->jobs;
    if (jobs <= 0) jobs = r->cores / (o->threads > 0 ? o->threads : 1);
    r->jobs = jobs < 1 ? 1 : (int)jobs;
    lab_session s = {o, r, NULL};
    drift_status rc = plan_study(&s, err);
    if (rc || o->dry_run) {
        r->dry_run = !rc;
        return rc;
    }
    drift_error terr = {0};
    drift_store_completion_tokens(r->store, &r->tokens_before, &terr);
    if (!(s.cache = drift_score_cache_new())) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    r->cpu_before_s = drift_lab_cpu_s();
    rc = run_leg(&s, DRIFT_LAB_LEG_MAIN, err);
    if (!rc) rc = run_side_legs(&s, err);
    drift_score_cache_stats_get(s.cache, &r->cache);
    drift_score_cache_free(s.cache);
    if (!rc) rc = analyze(&s, err);
    return rc;
}

/* See lab.h. */
/* See lab.h: the report layer's view of the result (lab_result.h). */
void drift_lab_result_report(const drift_lab_result *r, drift_lab_report *out) {
    *out = (drift_lab_report){
        .fixtures = r->study.fixtures, .with_safety = r->study.with_safety, .safety_reason = r->study.safety_reason,
        .full = r->study.opts.full, .long_n = r->long_n, .long_tokens = r->long_tokens, .cuts = &r->cuts,
        .chat_reason = r->main.score.not_computable[DRIFT_WL_CHAT] ? r->main.score.reason[DRIFT_WL_CHAT] : NULL,
        .outcomes = r->outcomes_ok ? &r->outcomes : NULL, .stochastic = r->stoch_ran ? &r->stochastic : NULL,
        .table = r->table, .analyses = &r->analyses, .findings = r->findings.computed ? &r->findings : NULL};
}

/* See lab.h: the view, rendered by the report layer. */
drift_status drift_lab_result_summary_render(const drift_lab_result *r, char **text, char **html, drift_error *err) {
    drift_lab_report v;
    if (r) drift_lab_result_report(r, &v);
    return drift_lab_report_summary_render(r ? &v : NULL, text, html, err);
}

/* See lab.h. */
drift_status drift_lab_note_render(const drift_lab_result *r, char **out, drift_error *err) {
    drift_lab_report v;
    if (r) drift_lab_result_report(r, &v);
    return drift_lab_report_note_render(r ? &v : NULL, out, err);
}

void drift_lab_result_clear(drift_lab_result *r) {
    if (!r) return;
    for (int w = 0; w < DRIFT_WL_COUNT; w++) drift_logit_fit_free(r->findings.wl[w].logit);
    drift_table_analyses_clear(&r->analyses);
    drift_table_free(r->table);
    drift_store_close(r->store);
    drift_lab_plan_clear(&r->plan);
    drift_lab_study_clear(&r->study);
    free(r->weights);
    free(r->long_weights);
    memset(r, 0, sizeof *r);
}
