/* lab_progress.c - what `driftbench lab` prints while its stage runs
 * (cmd_lab.c runs it): the stage's progress callback, cli_lab_event, and
 * its phases in order: the models, whether safety can be judged, the
 * design (DIR created, DIR/matrix.json and DIR/matrix_long.json written:
 * a failure stops the lab at once), the size and the time estimate (with
 * the WARNING of a large --full), the matrix legs as `matrix` prints them
 * (cli_matrix_printer), the stochastic leg's scoring and comparison
 * (DIR/stochastic.txt), the answers cut by the token limit (DIR/cuts.txt)
 * and the verdict cache's reuse. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "lab_cli.h"
#include "cmd_matrix.h"
#include "driftbench/lab.h"
#include "pipeline.h"

static int mkdir_p(const char *dir) {
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", dir);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(tmp, 0777) && errno != EEXIST) return -1;
            *p = '/';
        }
    if (mkdir(tmp, 0777) && errno != EEXIST) return -1;
    return 0;
}

static void fmt_duration(char *out, size_t cap, double s) {
    if (s < 120) snprintf(out, cap, "%.0f s", s);
    else if (s < 7200) snprintf(out, cap, "%.1f min", s / 60);
    else if (s < 3 * 86400) snprintf(out, cap, "%.1f h", s / 3600);
    else snprintf(out, cap, "%.1f days", s / 86400);
}


/* Prints the size of the run. */
static void print_size(const drift_lab_result *r) {
    const drift_lab_plan *p = &r->plan;
    if (r->size_rc) {
        printf("size: not known (%s)\n", cli_safe(r->size_err.msg));
        return;
    }
    printf("size: %zu configurations x %zu prompts (", p->n_configs, p->per_config);
    for (size_t i = 0; i < p->n_suites; i++) printf("%s%s %zu", i ? ", " : "", p->suites[i].name, p->suites[i].n);
    printf(") = %zu answers of at most %d new tokens", p->n_configs * p->per_config, p->max_tokens);
    if (p->long_spec)
        printf(", + long_context %zu prompts on %zu of them (", p->long_suite.n, p->long_spec->n_configs);
    for (size_t i = 0; p->long_spec && i < p->long_spec->n_configs; i++)
        printf("%s%s", i ? ", " : "", p->long_spec->configs[i].label);
    printf("%s, + 4 x %ld x %d sampled answers (stochastic leg: %s and %s, and each again with other seeds)\n",
           p->long_spec ? ")" : "", p->stoch_prompts, p->stoch_replicates, LAB_BASE_PRECISION, DRIFT_LAB_STOCH_ALT);
    drift_lab_design_size d;
    drift_lab_design_size_of(&r->study, p, &d);
    printf("design: baseline base@MODEL = precision %s, framework %s, hardware %s, its answers with top-%d logprobs; "
           "levels: model %zu, hardware %zu, precision %zu, framework %zu (baseline's included); %zu level "
           "configurations + %zu baselines; controls apart from the axes: %zu A/A (aa@MODEL: the baseline at another "
           "thread count, 0 flips by construction), %zu ref oracle (ref@MODEL: float64 reference kernels)\n",
           LAB_BASE_PRECISION, LAB_BASE_FRAMEWORK, LAB_BASE_HARDWARE, DRIFT_LAB_BASE_LOGPROBS, d.n_model, d.n_hardware,
           d.n_precision, d.n_framework, d.levels, d.bases, d.aa, d.ref);
    printf("resolution (pooled pairs of the level configurations; 0 flips would exclude rates above the first figure "
           "if the pairs were independent, above the second if every configuration flipped the same prompts):");
    for (size_t i = 0; i < d.n_wl; i++)
        printf("%s %s %zu prompts x %zu = %zu pairs: %.2f%% / %.2f%%", i ? ";" : "", d.wl[i].name, d.wl[i].prompts,
               d.wl[i].configs, d.wl[i].pairs, 100 * d.wl[i].resolve_pairs, 100 * d.wl[i].resolve_prompts);
    printf("\n");
    fflush(stdout);
}

/* Prints the time estimate (and the WARNING of a large --full). */
static void print_estimate(const drift_lab_result *r, int threads, const char *matrix_path) {
    const drift_lab_plan *p = &r->plan;
    if (p->todo == 0 && p->long_todo == 0) {
        printf("estimate: every configuration is stored already: nothing to generate but what the stochastic leg "
               "lacks\n");
        return;
    }
    if (r->estimate_rc) {
        printf("estimate: not available (the calibration requests failed)\n");
        return;
    }
    const drift_lab_cost *cost = &p->cost;
    char d[32], dl[32], dw[32];
    fmt_duration(d, sizeof d, p->gen_s);
    fmt_duration(dl, sizeof dl, p->long_s);
    fmt_duration(dw, sizeof dw, p->wall_s);
    printf("estimate: %zu configurations to run: about %s of generation%s%s%s, %s of wall time %d side by side, "
           "from a cost measured just now on %d engine thread%s (%ld cores): prefill %.0f tokens/s, decode %.0f "
           "tokens/s, attention +%.2g s per token^2 on the baseline (ref: %.0f, %.0f, %.2g); scoring comes on top\n",
           p->todo, d, p->long_s > 0 ? " (long_context " : "", p->long_s > 0 ? dl : "", p->long_s > 0 ? ")" : "", dw,
           p->jobs > 1 ? p->jobs : 1, threads, threads == 1 ? "" : "s", p->cores, 1 / cost->cpu.a,
           cost->cpu.d > 0 ? 1 / cost->cpu.d : 0.0, cost->cpu.b, 1 / cost->ref.a, cost->ref.d > 0 ? 1 / cost->ref.d : 0.0,
           cost->ref.b);
    if (cost->n_hw) {
        printf("estimate: hardware levels against the baseline's time (a short batch on each):");
        for (size_t i = 0; i < cost->n_hw; i++) printf("%s %s %.1fx", i ? "," : "", cost->hw_name[i], cost->hw_factor[i]);
        printf("\n");
    }
    if (p->warn_large) {
        fflush(stdout);
        fprintf(stderr,
                "WARNING: --full is large for a %ld-core machine: %zu configurations x %zu prompts, about %s of "
                "generation here (an estimate). It is not refused: it resumes where it stops (run the same command "
                "again). To make it smaller use --limit N; to spread it, shard %s over machines (driftbench matrix "
                "--spec %s --db M.db --shard I/N, then driftbench merge).\n",
                p->cores, p->todo, p->per_config, d, matrix_path, matrix_path);
    }
}

static void print_models(const drift_lab_result *r, int full) {
    const drift_lab_study *s = &r->study;
    if (s->fixtures) printf("NOTE: no shipped models found in models/: using the test fixtures, whose answers are noise\n");
    printf("lab (%s): %zu model(s):", full ? "full" : "quick", s->n_models);
    for (size_t i = 0; i < s->n_models; i++)
        printf(" %s%s", s->models[i].name, strstr(s->models[i].name, "-fragile-") ? " (fragile)" : "");
    if (s->n_found > s->n_models)
        printf(" (%zu found; the lab takes \"-fragile-\" models first, then the others by name, up to %d: the "
               "paper's three)",
               s->n_found, DRIFT_LAB_QUICK_MODELS);
    else if (!full && !s->n_fragile)
        printf(" (no \"-fragile-\" model in the folder: robust models only)");
    printf("\n");
    if (s->models_from) printf("models: %s (%s)\n", cli_safe(s->models_dir), s->models_from);
}

/* The design: DIR, the matrix files, the matrix line. */
static void on_design(lab_cli *c, const drift_lab_result *r) {
    if (mkdir_p(c->out)) {
        c->rc = cli_error("lab", "cannot create %s: %s", c->out, strerror(errno));
        c->stop = 1;
        return;
    }
    if (r->study.gpu[0]) printf("hardware: the GPU (%s) joins the matrix beside the CPU\n", r->study.gpu);
    if (cli_lab_write_file(c, "matrix.json", r->study.spec_json ? r->study.spec_json : "") ||
        (r->study.long_spec_json && cli_lab_write_file(c, "matrix_long.json", r->study.long_spec_json))) {
        c->rc = CLI_EXIT_ERROR; /* nothing runs that could not be re-run or sharded from its files */
        c->stop = 1;
        return;
    }
    if (r->design_rc) return;
    const drift_matrix_spec *spec = r->study.spec;
    printf("matrix: %zu configurations x %zu suites, %s, %d new tokens (%s)\n", spec->n_configs, spec->n_suites,
           r->study.opts.limit > 0 ? "--limit prompts per suite" : c->full ? "whole suites" : "quick suite sizes",
           spec->max_tokens, c->matrix_path);
    fflush(stdout);
}

static void on_planned(lab_cli *c, const drift_lab_result *r) {
    if (!c->full && r->study.long_spec)
        printf("quick: long_context (%zu prompts, each a prefill of ~%.0f tokens) runs on %zu configurations only "
               "(%s); --full runs it on every one\n",
               r->long_n, r->long_tokens, r->study.long_spec->n_configs, c->long_path);
    fflush(stdout);
    if (!c->dry_run) cli_install_signal_handlers();
}

/* A matrix leg begins: its printer, as `matrix` prints (one line or a bar
 * per configuration, weighted by the cost model). */
static void on_leg_begin(lab_cli *c, const drift_lab_result *r) {
    int lng = r->leg == DRIFT_LAB_LEG_LONG;
    cli_matrix_opts_default(&c->mo);
    c->mo.progress_lines = 1;
    c->mo.jobs = r->jobs;
    c->mo.concurrency = DRIFT_LAB_BATCH;
    c->mo.weights = lng ? r->long_weights : r->weights;
    c->mo.est_wall_s = (lng ? r->est_long_s : r->est_main_s) / (double)r->jobs;
    c->leg_cmd = lng ? "lab long_context" : "lab";
    c->printer = cli_matrix_printer_new(c->leg_cmd, lng ? r->study.long_spec : r->study.spec, &c->mo);
}

static void on_leg_end(lab_cli *c, const drift_lab_result *r) {
    int lng = r->leg == DRIFT_LAB_LEG_LONG;
    const drift_matrix_spec *spec = lng ? r->study.long_spec : r->study.spec;
    const drift_matrix_summary *s = lng ? &r->lng : &r->main;
    cli_matrix_printer_free(c->printer);
    c->printer = NULL;
    int rc = cli_matrix_finish(c->leg_cmd, spec, s, r->leg_rc, &r->leg_err);
    if (rc != CLI_EXIT_PASS) c->rc = rc;
    if (lng && s->all_failed)
        printf("long_context: every request failed on %zu of %zu configurations (e.g. %s): no long-context rows "
               "from them\n",
               s->all_failed, spec->n_configs, cli_safe(s->all_failed_msg));
}

/* The stochastic leg's runs ended (beside the long-context leg, silent
 * until now): their scoring, or why they failed. */
static void on_stochastic(lab_cli *c, const drift_lab_result *r) {
    const drift_lab_stochastic *x = &r->stochastic;
    printf("\n== stochastic serving (temperature %.1f, %d replicates, %s, %s: %s, and each against itself "
           "with seeds %ld+r: the null; run beside long_context, %.1f s) ==\n",
           x->temperature, x->replicates, x->suite, x->model, x->pair, x->null_seed, r->stoch_wall_s);
    for (size_t i = 0; i < r->n_stoch_scores; i++) cli_print_score_summary(&r->stoch_scores[i], "not computable");
    fflush(stdout);
    if (!r->stoch_rc) return;
    const drift_lab_stochastic_summary *s = &r->stoch_sum;
    c->rc = s->failed_in_run && s->label ? cli_run_failed("lab", s->label, s->target, &s->run, &r->stoch_err)
                                         : cli_error_lib("lab", &r->stoch_err);
}

static void on_compared(lab_cli *c, const drift_lab_result *r) {
    char *txt = NULL;
    drift_error err = {0};
    if (drift_lab_stochastic_render(&r->stochastic, &txt, &err)) {
        c->rc = cli_error_lib("lab", &err);
        c->stop = 1;
        return;
    }
    fputs(txt, stdout);
    cli_lab_write_file(c, "stochastic.txt", txt);
    free(txt);
}

static void on_cuts(lab_cli *c, const drift_lab_result *r) {
    char *cut_text = NULL;
    drift_error err = {0};
    if (drift_lab_cuts_render(&r->cuts, &cut_text, &err)) {
        c->rc = cli_error_lib("lab", &err);
        c->stop = 1;
        return;
    }
    printf("\n== answers cut by the token limit (the matrix's runs) ==\n%s", cut_text);
    cli_lab_write_file(c, "cuts.txt", cut_text);
    free(cut_text);
    const drift_score_cache_stats *cs = &r->cache;
    size_t reused = 0;
    for (int w = 0; w < DRIFT_WL_COUNT; w++) reused += cs->hits[w];
    printf("scoring: %zu distinct verdicts kept, %zu reused (", cs->entries, reused);
    for (int w = 0; w < DRIFT_WL_COUNT; w++)
        printf("%s%s %zu", w ? ", " : "", drift_workload_name((drift_workload)w), (size_t)cs->hits[w]);
    printf(")\n");
}

/* See lab_cli.h. Its phases (stage "lab", ITEM) and its matrix legs'
 * events; the calibration's batches are not shown. */
void cli_lab_event(void *user, const drift_progress *p) {
    lab_cli *c = user;
    if (strcmp(p->stage, "lab") != 0) {
        if (c->printer) cli_matrix_printer_event(c->printer, p);
        return;
    }
    if (p->event != DRIFT_PROGRESS_ITEM) return;
    const drift_lab_result *r = p->summary;
    switch (r->phase) {
    case DRIFT_LAB_PHASE_MODELS: print_models(r, c->full); break;
    case DRIFT_LAB_PHASE_SAFETY:
        if (!r->study.with_safety) printf("safety: not computable, so not run: %s\n", r->study.safety_reason);
        break;
    case DRIFT_LAB_PHASE_DESIGN: on_design(c, r); break;
    case DRIFT_LAB_PHASE_SIZE: print_size(r); break;
    case DRIFT_LAB_PHASE_ESTIMATE: print_estimate(r, c->threads, c->matrix_path); break;
    case DRIFT_LAB_PHASE_PLANNED: on_planned(c, r); break;
    case DRIFT_LAB_PHASE_LEG_BEGIN: on_leg_begin(c, r); break;
    case DRIFT_LAB_PHASE_LEG_END: on_leg_end(c, r); break;
    case DRIFT_LAB_PHASE_STOCHASTIC: on_stochastic(c, r); break;
    case DRIFT_LAB_PHASE_COMPARED: on_compared(c, r); break;
    case DRIFT_LAB_PHASE_CUTS: on_cuts(c, r); break;
    default: break;
    }
}
