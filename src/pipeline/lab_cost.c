/* lab_cost.c - what a lab study will cost, known before it starts.
 *
 * Size: configurations x prompts per configuration (per suite), the
 * --quick long-context subset, plus the stochastic leg. Time: a cost model measured right now on this machine
 * with the first model and the matrix's engine threads: a request of P
 * prompt tokens and G new tokens takes
 *     a*P + b*P^2 + G*(d + 2*b*P)   seconds
 * (prefill per token a, attention growing with the context b, decode per
 * token d, each new token attending over the prompt), fitted per profile:
 * on the baseline configuration (for every cpu profile), a batch of 8 copies
 * of a short prompt prefilled gives a, the same batch with the run's new
 * tokens gives d (the matrix also sends 8 at a time), and a ~400-token
 * piece of a long-context document prefilled gives b (shorter when the
 * model's context is); the ref profile (reference kernels: slow matmuls,
 * attention less so) gets its own a, d, b from a 2-request batch and a
 * ~200-token piece; each hardware level's cost against the baseline's
 * (4 short prompts generated on each) scales its configurations' seconds.
 * Short timings are the least of two tries. Prompt tokens
 * come from the rendered characters at the measured tokens per character.
 * The requests take a few seconds; on a loaded machine they are noisy, and
 * so is the estimate (the CLI prints it beside the measured generation
 * time at the end).
 *
 *   measure (lab_time, fit_profile, calibrate)  -> drift_lab_cost
 *   solve   (drift_lab_fit_solve)               timings -> a, b, d    pure
 *   price   (drift_lab_suite_seconds, _plan_apply) sizes x cost -> s  pure */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driftbench/lab.h"
#include "driftbench/suite.h"
#include "driftbench/target.h"
#include "pipeline/lab_internal.h"
#include "util/util.h"

/* requests per calibration batch (the matrix sends 8 at a time) */
#define LAB_CALIB_BATCH 8
/* timed measurements per profile: warm-up, prefill, generation, long prefill */
#define LAB_CALIB_STEPS 4

drift_status drift_lab_suite_size_of(const char *spec, long limit, drift_lab_suite_size *out, char **first,
                                     drift_error *err) {
    drift_suite *s = NULL;
    memset(out, 0, sizeof *out);
    drift_status rc = drift_suite_load(spec, &s, err);
    if (rc) return rc;
    size_t n = limit > 0 && s->n > (size_t)limit ? (size_t)limit : s->n;
    out->n = n;
    snprintf(out->name, sizeof out->name, "%s", n ? drift_workload_name(s->prompts[0].workload) : spec);
    for (size_t i = 0; i < n; i++) {
        const char *tid = NULL;
        char *r = drift_prompt_render(&s->prompts[i], DRIFT_API_COMPLETIONS, &tid);
        if (!r) {
            drift_suite_free(s);
            return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        }
        double c = (double)strlen(r);
        out->c1 += c;
        out->c2 += c * c;
        if (first && i == 0) *first = r;
        else free(r);
    }
    drift_suite_free(s);
    return DRIFT_OK;
}

double drift_lab_suite_seconds(const drift_lab_cost *c, const drift_lab_suite_size *s, int max_tokens, int replicates,
                               int ref) {
    const drift_lab_fit *f = ref ? &c->ref : &c->cpu;
    double tpc = strcmp(s->name, "long_context") ? c->tokens_per_char : c->long_tokens_per_char;
    double p1 = s->c1 * tpc, p2 = s->c2 * tpc * tpc, g = max_tokens;
    double t = f->a * p1 + f->b * p2 + g * (f->d * (double)s->n + 2 * f->b * p1);
    return t * (replicates > 0 ? replicates : 1);
}

drift_status drift_lab_fit_solve(const drift_lab_timing *t, drift_lab_fit *f, drift_error *err) {
    if (t->prefill_s <= 0 || t->generate_s <= 0 || t->long_s <= 0 || t->short_tokens <= 0 || t->long_tokens <= 0)
        return drift_error_set(err, DRIFT_ERR_INVALID, "lab cost: a timing or a token count is not positive");
    int ps = t->short_tokens, pl = t->long_tokens;
    f->a = t->prefill_s / ps;
    f->d = t->max_tokens > 1 ? fmax(0, t->generate_s - t->prefill_s) / (t->max_tokens - 1) : f->a;
    /* no attention term when the piece is no longer than the short prompt
     * (a model with a tiny context) */
    f->b = pl > ps ? fmax(0, (t->long_s - f->a * pl) / ((double)pl * pl)) : 0;
    return DRIFT_OK;
}

/* The calibration's progress: one STEP per timed measurement. */
typedef struct lab_meter {
    const drift_lab_opts *o;
    const drift_lab_plan *plan;
    size_t done, total;
    double t0_ms;
} lab_meter;

static void meter_emit(lab_meter *m, drift_progress_event ev, const char *label) {
    if (!m->o->progress) return;
    drift_progress p;
    memset(&p, 0, sizeof p);
    p.stage = "lab";
    p.event = ev;
    p.label = label;
    p.done = m->done;
    p.total = m->total;
    p.elapsed_ms = util_now_ms() - m->t0_ms;
    p.eta_ms = -1;
    p.summary = m->plan;
    m->o->progress(m->o->progress_user, &p);
}

static void meter_step(lab_meter *m, const char *label) {
    m->done++;
    meter_emit(m, DRIFT_PROGRESS_STEP, label);
}

typedef struct lab_calib {
    size_t answers;
    int prompt_tokens;
} lab_calib;

static int lab_calib_cb(void *user, const drift_gen_request *req, drift_answer *res) {
    (void)req;
    lab_calib *c = user;
    if (!res->error && res->prompt_tokens > 0) {
        c->answers++;
        c->prompt_tokens = res->prompt_tokens;
    }
    return 0;
}

/* `copies` requests of one prompt at once on an open target (a batch, as the
 * matrix sends them): seconds per request, the least of `tries` (other jobs
 * on the machine only ever add time); 0 on failure. */
static double lab_time(drift_target *t, const char *prompt, size_t copies, int max_tokens, int tries,
                       int *prompt_tokens) {
    drift_gen_request req[LAB_CALIB_BATCH];
    if (copies > LAB_CALIB_BATCH) copies = LAB_CALIB_BATCH;
    for (size_t i = 0; i < copies; i++) req[i] = (drift_gen_request){i, prompt, 0};
    drift_gen_params gp;
    drift_gen_params_default(&gp);
    gp.max_tokens = max_tokens;
    double best = 0;
    for (int k = 0; k < tries; k++) {
        lab_calib c = {0, 0};
        drift_error err = {0};
        double t0 = util_now_ms();
        if (drift_target_generate(t, req, copies, &gp, lab_calib_cb, &c, &err) || c.answers != copies) return 0;
        double s = (util_now_ms() - t0) / 1000.0 / (double)copies;
        if (k == 0 || s < best) best = s;
        if (prompt_tokens) *prompt_tokens = c.prompt_tokens;
    }
    return best;
}

/* Times one profile: `batch` copies of the short prompt prefilled and with
 * max_tokens new tokens, then the long prompt prefilled, cut in halves
 * until the model takes it (its context); fits a, b, d. Returns 0 and the
 * prompt token counts, or -1. */
static int fit_profile(const char *spec, const char *short_prompt, char *long_prompt, size_t batch, int max_tokens,
                       lab_meter *m, drift_lab_fit *f, int *ps, int *pl, size_t *long_len) {
    drift_target_opts to;
    drift_target_opts_default(&to);
    drift_target *t = NULL;
    drift_error err = {0};
    if (drift_target_open(spec, &to, &t, &err)) return -1;
    lab_time(t, short_prompt, 1, 1, 1, NULL); /* warm-up */
    meter_step(m, spec);
    drift_lab_timing tm = {0};
    tm.max_tokens = max_tokens;
    tm.prefill_s = lab_time(t, short_prompt, batch, 1, 2, ps);
    meter_step(m, spec);
    tm.generate_s = lab_time(t, short_prompt, batch, max_tokens, 2, NULL);
    meter_step(m, spec);
    size_t len = strlen(long_prompt);
    for (; len >= 100; len /= 2) {
        long_prompt[len] = 0;
        if ((tm.long_s = lab_time(t, long_prompt, 1, 1, 1, pl)) > 0) break;
    }
    meter_step(m, spec);
    drift_target_close(t);
    tm.short_tokens = *ps;
    tm.long_tokens = *pl;
    if (drift_lab_fit_solve(&tm, f, NULL)) return -1;
    *long_len = len;
    return 0;
}

/* The hardware level of configuration c ("" when it has none). */
static const char *config_hardware(const drift_matrix_config *c) {
    for (size_t i = 0; i < c->n_dims; i++)
        if (!strcmp(c->dim_names[i], "hardware")) return c->dim_values[i];
    return "";
}

/* Cost of each hardware level of the study against the baseline's: a batch
 * of short prompts generated on the baseline and on the level (hardware
 * levels compute per-output dot products: 2-4x slower); a level whose
 * timing fails keeps factor 1. */
static void hardware_factors(const drift_lab_study *s, const char *short_prompt, int max_tokens, lab_meter *m,
                             drift_lab_cost *c) {
    drift_lab_levels_t lv;
    drift_lab_levels(s->opts.full, &lv);
    char spec[PATH_MAX + 160];
    drift_target_opts to;
    drift_target_opts_default(&to);
    double base = 0;
    for (size_t h = 0; h < lv.n_hardware && c->n_hw < DRIFT_LAB_MAX_HW; h++) {
        lab_config_target(spec, sizeof spec, s->models[0].path, LAB_BASE_PRECISION, lv.hardware[h], LAB_BASE_FRAMEWORK,
                          s->opts.threads);
        drift_target *t = NULL;
        drift_error err = {0};
        double secs = 0;
        if (!drift_target_open(spec, &to, &t, &err)) {
            secs = lab_time(t, short_prompt, 4, max_tokens, 1, NULL);
            drift_target_close(t);
        }
        meter_step(m, spec);
        if (h == 0) {
            base = secs;
            continue;
        }
        snprintf(c->hw_name[c->n_hw], sizeof c->hw_name[0], "%s", lv.hardware[h]);
        c->hw_factor[c->n_hw++] = base > 0 && secs > 0 ? secs / base : 1;
    }
}

double drift_lab_cost_factor(const drift_lab_cost *c, const drift_matrix_config *cfg) {
    const char *hw = config_hardware(cfg);
    for (size_t i = 0; i < c->n_hw; i++)
        if (!strcmp(c->hw_name[i], hw)) return c->hw_factor[i];
    return 1;
}

/* Measures the cost model (see above) for the study's first model; 0 on success. */
static int calibrate(const drift_lab_study *s, const char *short_prompt, int max_tokens, lab_meter *m,
                     drift_lab_cost *c) {
    memset(c, 0, sizeof *c);
    const char *model_path = s->models[0].path;
    char cpu_spec[PATH_MAX + 160], ref_spec[PATH_MAX + 64];
    lab_config_target(cpu_spec, sizeof cpu_spec, model_path, LAB_BASE_PRECISION, LAB_BASE_HARDWARE,
                      LAB_BASE_FRAMEWORK, s->opts.threads);
    snprintf(ref_spec, sizeof ref_spec, "embedded:%s?profile=ref", model_path);
    /* a piece of a long-context document: ~400 tokens on cpu-f32, ~200 on
     * the slower ref profile */
    drift_suite *ls = NULL;
    drift_error err = {0};
    char long_prompt[1601] = "";
    if (drift_suite_load("builtin:long?n=1", &ls, &err) == DRIFT_OK && ls->n) {
        const char *tid = NULL;
        char *r = drift_prompt_render(&ls->prompts[0], DRIFT_API_COMPLETIONS, &tid);
        if (r) snprintf(long_prompt, sizeof long_prompt, "%s", r);
        free(r);
    }
    drift_suite_free(ls);
    if (!long_prompt[0]) return -1;
    int ps = 0, pl = 0;
    size_t len = 0;
    if (fit_profile(cpu_spec, short_prompt, long_prompt, LAB_CALIB_BATCH, max_tokens, m, &c->cpu, &ps, &pl, &len))
        return -1;
    c->tokens_per_char = (double)ps / (double)strlen(short_prompt);
    c->long_tokens_per_char = (double)pl / (double)len;
    long_prompt[len / 2] = 0;
    if (fit_profile(ref_spec, short_prompt, long_prompt, 2, max_tokens, m, &c->ref, &ps, &pl, &len)) return -1;
    hardware_factors(s, short_prompt, max_tokens, m, c);
    return 0;
}

/* 1 when run label holds an outcome for each of n long-context prompts. */
static int long_done(drift_store *st, const char *label, size_t n) {
    if (!st) return 0;
    drift_store_run_counts c;
    drift_error err = {0};
    if (drift_store_count_run(st, label, &c, &err)) return 0;
    return c.answers[DRIFT_WL_LONG] + c.errors[DRIFT_WL_LONG] >= n;
}

static int config_done(drift_store *st, const char *label) {
    if (!st) return 0;
    drift_run_info info;
    memset(&info, 0, sizeof info);
    drift_error err = {0};
    int done = drift_store_run_get(st, label, &info, &err) == DRIFT_OK && info.finished_at;
    drift_run_info_clear(&info);
    return done;
}

drift_status drift_lab_plan_size(const drift_lab_study *s, drift_store *st, drift_lab_plan *p, drift_error *err) {
    memset(p, 0, sizeof *p);
    const drift_matrix_spec *spec = s->spec;
    if (!spec) return drift_error_set(err, DRIFT_ERR_INVALID, "lab plan: no design (drift_lab_design first)");
    p->n_configs = spec->n_configs;
    p->max_tokens = spec->max_tokens;
    p->stoch_prompts = s->stoch_prompts;
    p->stoch_replicates = 5;
    p->n_suites = spec->n_suites < DRIFT_LAB_MAX_SUITES ? spec->n_suites : DRIFT_LAB_MAX_SUITES;
    for (size_t i = 0; i < p->n_suites; i++) {
        drift_status rc =
            drift_lab_suite_size_of(spec->suites[i], spec->limit, &p->suites[i], i == 0 ? &p->first_prompt : NULL, err);
        if (rc) return rc;
        p->per_config += p->suites[i].n;
    }
    p->done = calloc(spec->n_configs ? spec->n_configs : 1, 1);
    if (!p->done) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    for (size_t c = 0; c < spec->n_configs; c++) {
        p->done[c] = (unsigned char)config_done(st, spec->configs[c].label);
        p->todo += !p->done[c];
    }
    const drift_matrix_spec *ls = s->long_spec;
    if (ls && ls->n_suites) {
        p->long_spec = ls;
        drift_status rc = drift_lab_suite_size_of(ls->suites[0], ls->limit, &p->long_suite, NULL, err);
        if (rc) return rc;
        p->long_done = calloc(ls->n_configs ? ls->n_configs : 1, 1);
        if (!p->long_done) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        for (size_t c = 0; c < ls->n_configs; c++) {
            p->long_done[c] = (unsigned char)long_done(st, ls->configs[c].label, p->long_suite.n);
            p->long_todo += !p->long_done[c];
        }
    }
    return DRIFT_OK;
}

static int is_ref(const drift_matrix_config *c) { return strstr(c->target, "profile=ref") != NULL; }

/* Seconds of the long spec's configuration with label (0: none or done). */
static double long_seconds(const drift_lab_plan *p, const char *label) {
    const drift_matrix_spec *ls = p->long_spec;
    if (!ls || !p->long_suite.n) return 0;
    for (size_t c = 0; c < ls->n_configs; c++)
        if (!strcmp(ls->configs[c].label, label))
            return p->long_done && p->long_done[c]
                       ? 0
                       : drift_lab_suite_seconds(&p->cost, &p->long_suite, ls->max_tokens, ls->replicates,
                                                 is_ref(&ls->configs[c])) *
                             drift_lab_cost_factor(&p->cost, &ls->configs[c]);
    return 0;
}

double drift_lab_plan_config_seconds(const drift_lab_plan *p, const drift_matrix_spec *spec, size_t i) {
    if (i >= spec->n_configs) return 0;
    const drift_matrix_config *c = &spec->configs[i];
    if (p->long_spec && spec == p->long_spec) return long_seconds(p, c->label);
    double secs = 0;
    if (!(p->done && p->done[i]))
        for (size_t k = 0; k < p->n_suites; k++)
            secs += drift_lab_suite_seconds(&p->cost, &p->suites[k], p->max_tokens, spec->replicates, is_ref(c));
    return secs * drift_lab_cost_factor(&p->cost, c);
}

void drift_lab_plan_apply(drift_lab_plan *p, const drift_matrix_spec *spec) {
    double secs = 0, long_s = 0;
    for (size_t c = 0; c < spec->n_configs; c++) {
        if (p->done && p->done[c]) continue;
        for (size_t i = 0; i < p->n_suites; i++) {
            double s = drift_lab_suite_seconds(&p->cost, &p->suites[i], p->max_tokens, spec->replicates,
                                               is_ref(&spec->configs[c])) *
                       drift_lab_cost_factor(&p->cost, &spec->configs[c]);
            secs += s;
            if (!strcmp(p->suites[i].name, "long_context")) long_s += s;
        }
    }
    /* the long spec's runs (the main spec's long suites are in secs already) */
    for (size_t c = 0; p->long_spec && c < p->long_spec->n_configs; c++) {
        double s = long_seconds(p, p->long_spec->configs[c].label);
        secs += s;
        long_s += s;
    }
    /* the stochastic leg: 4 cpu runs (f32, int4, each again at the null seed) x stoch_prompts math prompts x its replicates */
    for (size_t i = 0; i < p->n_suites; i++)
        if (!strcmp(p->suites[i].name, "math") && p->suites[i].n) {
            drift_lab_suite_size m = p->suites[i];
            double scale = (double)p->stoch_prompts / (double)m.n;
            m.c1 *= scale;
            m.c2 *= scale;
            m.n = (size_t)p->stoch_prompts;
            p->stoch_s = 4 * drift_lab_suite_seconds(&p->cost, &m, p->max_tokens, p->stoch_replicates, 0);
            secs += p->stoch_s;
        }
    p->gen_s = secs;
    p->long_s = long_s;
    size_t left = p->todo + p->long_todo;
    int ways = p->jobs > 1 ? p->jobs : 1;
    if (left && (size_t)ways > left) ways = (int)left;
    p->wall_s = secs / ways;
}

drift_status drift_lab_plan_estimate(const drift_lab_study *s, drift_lab_plan *p, drift_error *err) {
    p->gen_s = p->long_s = p->stoch_s = p->wall_s = 0;
    if (!p->todo && !p->long_todo) return DRIFT_OK;
    drift_lab_levels_t lv;
    drift_lab_levels(s->opts.full, &lv);
    lab_meter m = {&s->opts, p, 0, 2 * LAB_CALIB_STEPS + lv.n_hardware, util_now_ms()};
    meter_emit(&m, DRIFT_PROGRESS_BEGIN, NULL);
    int cal = p->first_prompt ? calibrate(s, p->first_prompt, p->max_tokens, &m, &p->cost) : -1;
    meter_emit(&m, DRIFT_PROGRESS_END, NULL);
    if (cal) return drift_error_set(err, DRIFT_ERR_MODEL, "the calibration requests failed");
    p->cores = sysconf(_SC_NPROCESSORS_ONLN);
    p->warn_large = s->opts.full && p->cores < DRIFT_LAB_FEW_CORES;
    drift_lab_plan_apply(p, s->spec);
    return DRIFT_OK;
}

void drift_lab_plan_clear(drift_lab_plan *p) {
    if (!p) return;
    free(p->first_prompt);
    free(p->done);
    free(p->long_done);
    memset(p, 0, sizeof *p);
}

drift_status drift_lab_count_cuts(drift_store *st, const drift_matrix_spec *spec, drift_lab_cuts *out,
                                  drift_error *err) {
    memset(out, 0, sizeof *out);
    out->max_tokens = spec->max_tokens;
    for (size_t c = 0; c < spec->n_configs; c++) {
        drift_store_run_counts rc;
        drift_status s = drift_store_count_run(st, spec->configs[c].label, &rc, err);
        if (s) return s;
        for (int w = 0; w < DRIFT_WL_COUNT; w++) {
            out->answers[w] += rc.answers[w];
            out->cut[w] += rc.cut[w];
            out->errors[w] += rc.errors[w];
        }
    }
    return DRIFT_OK;
}

/* ---- the design's size ---- */

double drift_lab_resolvable(double n) {
    const double z2 = 1.959963984540054 * 1.959963984540054;
    return n > 0 ? z2 / (n + z2) : 1;
}

/* The level of dimension dim of c ("" when none). */
static const char *dim_of(const drift_matrix_config *c, const char *dim) {
    for (size_t i = 0; i < c->n_dims; i++)
        if (!strcmp(c->dim_names[i], dim)) return c->dim_values[i];
    return "";
}

/* Distinct levels of dim over the configurations of spec that are levels or baselines. */
static size_t distinct(const drift_matrix_spec *spec, const char *dim) {
    size_t n = 0;
    for (size_t i = 0; i < spec->n_configs; i++) {
        drift_lab_role r = drift_lab_label_role(spec->configs[i].label);
        if (r != DRIFT_LAB_ROLE_LEVEL && r != DRIFT_LAB_ROLE_BASE) continue;
        const char *v = dim_of(&spec->configs[i], dim);
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++) {
            drift_lab_role rj = drift_lab_label_role(spec->configs[j].label);
            seen = (rj == DRIFT_LAB_ROLE_LEVEL || rj == DRIFT_LAB_ROLE_BASE) && !strcmp(dim_of(&spec->configs[j], dim), v);
        }
        n += !seen;
    }
    return n;
}

static void size_wl(drift_lab_size_wl *w, const char *name, size_t prompts, size_t configs) {
    snprintf(w->name, sizeof w->name, "%s", name);
    w->prompts = prompts;
    w->configs = configs;
    w->pairs = prompts * configs;
    w->resolve_pairs = drift_lab_resolvable((double)w->pairs);
    w->resolve_prompts = drift_lab_resolvable(configs ? (double)prompts : 0);
}

void drift_lab_design_size_of(const drift_lab_study *s, const drift_lab_plan *p, drift_lab_design_size *out) {
    memset(out, 0, sizeof *out);
    const drift_matrix_spec *spec = s->spec;
    if (!spec) return;
    for (size_t i = 0; i < spec->n_configs; i++) switch (drift_lab_label_role(spec->configs[i].label)) {
        case DRIFT_LAB_ROLE_LEVEL: out->levels++; break;
        case DRIFT_LAB_ROLE_BASE: out->bases++; break;
        case DRIFT_LAB_ROLE_AA: out->aa++; break;
        case DRIFT_LAB_ROLE_REF: out->ref++; break;
        }
    out->n_model = distinct(spec, "model");
    out->n_hardware = distinct(spec, "hardware");
    out->n_precision = distinct(spec, "precision");
    out->n_framework = distinct(spec, "framework");
    for (size_t i = 0; i < p->n_suites && out->n_wl < DRIFT_LAB_MAX_SUITES; i++)
        size_wl(&out->wl[out->n_wl++], p->suites[i].name, p->suites[i].n, out->levels);
    const drift_matrix_spec *ls = s->long_spec;
    if (ls && p->long_suite.n) {
        size_t lv = 0;
        for (size_t i = 0; i < ls->n_configs; i++) lv += drift_lab_label_role(ls->configs[i].label) == DRIFT_LAB_ROLE_LEVEL;
        size_wl(&out->wl[out->n_wl++], p->long_suite.name, p->long_suite.n, lv);
    }
}
