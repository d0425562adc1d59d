/* cmd_lab.c - `driftbench lab`: the paper's study on the embedded engine, on
 * a machine without servers or GPUs. The study itself is the library's lab
 * stage, one call (drift_lab_run, include/driftbench/lab.h,
 * src/pipeline/lab.c: models, design, cost model, the matrix and its
 * long-context subset, the stochastic leg on its own thread, the analyses);
 * this file parses the flags, prints what each phase of the stage reports
 * (its progress callback, lab_event), writes the files and owns the exit
 * code:
 *
 * 1. models, whether safety can be judged, the matrix written to
 *    DIR/matrix.json and --quick's long-context subset to
 *    DIR/matrix_long.json (so `driftbench matrix` can re-run or shard
 *    them), the size and the time estimate (--full on fewer than 8 cores
 *    adds a WARNING on stderr; it still runs). --dry-run stops here.
 * 2. the matrix legs printed as `matrix` prints them (cli_matrix_printer,
 *    a progress bar weighted by the cost model), then the stochastic leg's
 *    scoring and comparison -> DIR/stochastic.txt, the answers cut by the
 *    token limit -> DIR/cuts.txt, the verdict cache's reuse.
 * 3. from the result: the summary (DIR/summary.txt), the flip table
 *    (DIR/flip_rates.csv), the ANOVA (DIR/anova.txt), the PRI held-out
 *    evaluation (DIR/pri.txt when there are enough rows) and the HTML
 *    report (DIR/report.html) with its note; then the times.
 * Every text block comes from a renderer of src/report/ (report.h, lab.h's
 * drift_lab_result_summary_render and drift_lab_note_render).
 *
 * Exit codes: 0 done, 2 an error. A file that cannot be written is exit 2
 * naming the path: before the matrix runs (DIR/matrix.json,
 * DIR/matrix_long.json) it stops the lab at once; after, the other files
 * are still written. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli.h"
#include "cmd_matrix.h"
#include "driftbench/analysis.h"
#include "driftbench/lab.h"
#include "driftbench/matrix.h"
#include "driftbench/report.h"
#include "driftbench/report_html.h"
#include "pipeline.h"

static const char lab_usage[] =
    "usage: driftbench lab [--quick|--full] [--out DIR] [--models DIR] [options]\n"
    "\n"
    "Runs the embedded matrix (models x hardware x precision x framework levels x workloads;\n"
    "baseline = each model's reduced-precision serving profile, precision=w16a16 (bf16 weights,\n"
    "activations, KV cache) framework=vllm hardware=avx2, with logprobs), then writes DIR/lab.db,\n"
    "DIR/matrix.json, DIR/flip_rates.csv, DIR/anova.txt, DIR/pri.txt, DIR/summary.txt and\n"
    "DIR/report.html and prints the findings, the flip table, the ANOVA and the PRI held-out\n"
    "evaluation. Controls beside the axes: the A/A run (the baseline at another thread count;\n"
    "any flip fails the lab, exit 1) and the ref oracle (how far the baseline is from exact).\n"
    "Re-running resumes what is stored.\n"
    "\n"
    "  --quick            at most 3 models (\"-fragile-\" ones first); framework x precision\n"
    "                     crossed on every model, hardware x precision on the first (3 levels\n"
    "                     each); math 60, code 40, safety 60, chat 30 prompts; long context 16\n"
    "                     prompts on the first model's baseline and 4 levels; 128 new tokens; the\n"
    "                     stochastic leg on the main leg's math prompts x 5 replicates x 4 runs\n"
    "                     (default)\n"
    "  --full             3 hardware x 4 precision x 3 framework crossed on every model, every\n"
    "                     prompt of each suite, long context on every configuration\n"
    "  --out DIR          output directory (default lab)\n"
    "  --models DIR       GGUF models (default models/; the test fixtures when empty)\n"
    "  --limit N          prompts per suite (overrides the mode's)\n"
    "  --long N           --quick's long-context prompts (default 16), each on the baseline and 4\n"
    "                     levels: N x 5 prefills of ~2,000 tokens; with no flip the report counts\n"
    "                     each prompt once, so telling 0 from the paper's 1.55% takes N >= 250\n"
    "  --max-tokens N     new tokens per answer (overrides the mode's)\n"
    "  --guard SPEC       safety guard (LlamaGuard-3 over HTTP, or builtin[:PATH]); default: the\n"
    "                     built-in guard model; safety is skipped (and said so) if none opens\n"
    "  --embedder SPEC    chat embedder (default: the first model not named -fragile-, cpu-f32/avx2)\n"
    "  --threads N        engine threads per configuration (default 1: best on shared machines)\n"
    "  --jobs N           configurations side by side (default: cores / threads); results are\n"
    "                     the same as one at a time\n"
    "  --dry-run          print the design, its size and the time estimate, write DIR/matrix.json,\n"
    "                     run nothing\n"
    "\n"
    "Before it starts, lab prints the design (levels, crossings, controls), its size\n"
    "(configurations x prompts, the pairs per workload and the rate each can resolve) and an\n"
    "estimate of the generation time from tokens/s measured on this machine; --full on fewer\n"
    "than 8 cores also prints a WARNING (on stderr) with the estimate and how to cut or shard\n"
    "the run. Model paths in DIR/matrix.json are relative to the working directory when the\n"
    "models are under it (re-run it from there with driftbench matrix).\n";

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


/* Seconds on the monotonic clock (the lab's wall time). */
static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* What the command keeps while the stage runs. */
typedef struct lab_cli {
    const char *out;            /* DIR */
    int full;
    int threads;                /* engine threads per configuration (--threads) */
    int dry_run;
    char matrix_path[PATH_MAX + 32], long_path[PATH_MAX + 32];
    int rc;                     /* CLI_EXIT_PASS, or the exit code of a failure printed already */
    int stop;                   /* 1: stop the stage (a failure was printed) */
    int write_failed;           /* a file could not be written (printed): exit 2 at the end */
    cli_matrix_opts mo;         /* the running matrix leg's printing */
    cli_matrix_printer *printer;
    const char *leg_cmd;
} lab_cli;

/* Writes DIR/name; a failure is printed naming the path and makes the exit
 * code 2. Returns 0 or -1. */
static int write_file(lab_cli *c, const char *name, const char *text) {
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/%s", c->out, name);
    FILE *f = fopen(path, "w");
    int ok = f && fputs(text, f) >= 0, e = errno;
    if (f && fclose(f) && ok) ok = 0, e = errno;
    if (ok) return 0;
    cli_error("lab", "cannot write %s: %s", path, strerror(e));
    c->write_failed = 1;
    return -1;
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
}

/* The design: DIR, the matrix files, the matrix line. */
static void on_design(lab_cli *c, const drift_lab_result *r) {
    if (mkdir_p(c->out)) {
        c->rc = cli_error("lab", "cannot create %s: %s", c->out, strerror(errno));
        c->stop = 1;
        return;
    }
    if (r->study.gpu[0]) printf("hardware: the GPU (%s) joins the matrix beside the CPU\n", r->study.gpu);
    if (write_file(c, "matrix.json", r->study.spec_json ? r->study.spec_json : "") ||
        (r->study.long_spec_json && write_file(c, "matrix_long.json", r->study.long_spec_json))) {
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
    printf("\n== stochastic serving (temperature %.1f, %d replicates, %s, %s: f32 -> int4, and each against itself "
           "with seeds %ld+r: the null; run beside long_context, %.1f s) ==\n",
           x->temperature, x->replicates, x->suite, x->model, x->null_seed, r->stoch_wall_s);
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
    write_file(c, "stochastic.txt", txt);
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
    write_file(c, "cuts.txt", cut_text);
    free(cut_text);
    const drift_score_cache_stats *cs = &r->cache;
    size_t reused = 0;
    for (int w = 0; w < DRIFT_WL_COUNT; w++) reused += cs->hits[w];
    printf("scoring: %zu distinct verdicts kept, %zu reused (", cs->entries, reused);
    for (int w = 0; w < DRIFT_WL_COUNT; w++)
        printf("%s%s %zu", w ? ", " : "", drift_workload_name((drift_workload)w), (size_t)cs->hits[w]);
    printf(")\n");
}

/* The stage's progress: its phases (stage "lab", ITEM) and its matrix
 * legs' events; the calibration's batches are not shown. */
static void lab_event(void *user, const drift_progress *p) {
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

static int lab_cancel(void *user) {
    const lab_cli *c = user;
    return c->stop || cli_cancel_requested(NULL);
}

/* A failure of the stage that no phase printed. */
static int lab_failed(const drift_lab_result *r, const drift_error *err) {
    if (r->phase == DRIFT_LAB_PHASE_NONE) return cli_error("lab", "%s", err->msg); /* no models: the user's words */
    if (err->code == DRIFT_ERR_NOMEM) return cli_error("lab", "out of memory");
    if (err->code == DRIFT_ERR_CANCELLED) return cli_error("lab", "interrupted; run the same command again to resume");
    return cli_error_lib("lab", err);
}

/* Prints and writes what the study found, from its result: the summary,
 * the flip table, the ANOVA, the PRI evaluation and the HTML report.
 * Returns an exit code. */
static int lab_report(lab_cli *c, const drift_lab_result *r) {
    int rc = CLI_EXIT_PASS;
    drift_error err = {0};
    char *sum_text = NULL, *sum_html = NULL;
    if (drift_lab_result_summary_render(r, &sum_text, &sum_html, &err)) rc = cli_error_lib("lab", &err);
    else {
        printf("\n%s", sum_text);
        write_file(c, "summary.txt", sum_text);
    }
    free(sum_text);
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/flip_rates.csv", c->out);
    if (drift_table_write_csv(r->table, path, &err)) rc = cli_error_lib("lab", &err);
    printf("\n== flip rate by workload (percent, 95%% Wilson CI; baseline = ref profile of the same model) ==");
    char *text = NULL;
    if (drift_table_render_text(r->table, &text, &err)) cli_error_lib("lab", &err);
    else fputs(text, stdout);
    free(text);
    char *why = NULL;
    if (r->outcomes_ok && drift_store_outcomes_render(&r->outcomes, &why, &err) == DRIFT_OK && why[0])
        printf("%s\n", why);
    free(why);
    for (int w = 0; w < DRIFT_WL_COUNT; w++)
        if (r->main.score.not_computable[w])
            printf("%s: %zu answers not computable: %s\n", drift_workload_name((drift_workload)w),
                   r->main.score.not_computable[w], cli_safe(r->main.score.reason[w]));
    printf("(written to %s)\n\n== ANOVA ==\n", path);
    fflush(stdout);
    char *at = NULL;
    if (drift_anova_summary_render(&r->analyses, &at, &err)) rc = cli_error_lib("lab", &err);
    else {
        fputs(at, stdout);
        write_file(c, "anova.txt", at);
    }
    free(at);
    printf("== PRI held-out evaluation ==\n");
    fflush(stdout);
    char *pt = NULL;
    if (drift_pri_summary_render(&r->analyses, &pt, &err)) rc = cli_error_lib("lab", &err);
    else {
        fputs(pt, stdout);
        if (r->analyses.pri_fits) write_file(c, "pri.txt", pt);
    }
    free(pt);

    drift_html_opts ho;
    drift_html_opts_default(&ho);
    ho.title = c->full ? "DriftBench lab (full matrix)" : "DriftBench lab (quick matrix)";
    ho.baseline = "ref@{model}";
    char *note = NULL, *page = NULL;
    drift_error herr = {0};
    if (drift_lab_note_render(r, &note, &herr) == DRIFT_OK) {
        ho.note = note;
        ho.pri = r->analyses.pri;
        ho.summary_html = sum_html;
        if (drift_report_html(r->store, &ho, &page, &herr) == DRIFT_OK) write_file(c, "report.html", page);
    }
    if (herr.code) rc = cli_error_lib("lab", &herr);
    free(page);
    free(note);
    free(sum_html);
    return rc;
}

/* The A/A check: the baseline against itself must not flip. Returns
 * CLI_EXIT_PASS, or CLI_EXIT_FAIL after saying so on stderr. */
static int aa_check(const drift_lab_result *r) {
    const drift_lab_findings *f = &r->findings;
    if (!f->computed) return CLI_EXIT_PASS;
    if (!f->aa_runs) {
        printf("A/A check: no A/A row in the flip table (no aa@MODEL run was compared)\n");
        return CLI_EXIT_PASS;
    }
    if (!f->aa_flips && !(f->aa_sdr_max > DRIFT_LAB_AA_SDR_TOL)) {
        printf("A/A check: passed: %zu A/A run(s), 0 flips, chat SDR at most %.2g against their baselines\n", f->aa_runs, f->aa_sdr_max);
        return CLI_EXIT_PASS;
    }
    fflush(stdout);
    fprintf(stderr, "driftbench lab: A/A CHECK FAILED: the baseline against itself at another thread count gave %zu "
                    "flip(s), largest chat SDR %.4f, over %zu A/A run(s); the engine is meant to be thread- and "
                    "batch-invariant, so every figure of this lab is suspect\n",
            f->aa_flips, f->aa_sdr_max, f->aa_runs);
    return CLI_EXIT_FAIL;
}

/* The closing lines: sizes, times, tokens, CPU. */
static void print_times(const drift_lab_result *r, double wall_s, const char *out) {
    double run_s = r->main_wall_s + r->side_wall_s;
    int64_t tokens = r->tokens_after - r->tokens_before;
    size_t answers = 0;
    for (int w = 0; w < DRIFT_WL_COUNT; w++) answers += r->cuts.answers[w];
    char est[64] = "";
    if (r->gen_s > 0) snprintf(est, sizeof est, ", estimated %.0f s", (r->est_main_s + r->est_long_s) / (double)r->jobs);
    printf("\nlab: %zu configurations, %d side by side, %zu table rows; wall %.1f s (generation %.1f s%s: matrix "
           "%.1f s, then long_context %.1f s with the stochastic leg beside it %.1f s, together %.1f s; in the "
           "configurations' own time generating %.1f s, scoring %.1f s); %zu answers in the matrix's runs",
           r->main.configs, r->jobs, r->table->n_rows, wall_s, run_s, est, r->main_wall_s, r->long_wall_s,
           r->stoch_wall_s, r->side_wall_s, (r->main.run_ms + r->lng.run_ms) / 1000.0,
           (r->main.score_ms + r->lng.score_ms) / 1000.0, answers);
    if (r->tokens_before == 0 && run_s > 0) printf(", %.1f answers/s", (double)answers / run_s);
    printf("; %lld tokens generated now (the stochastic leg's too), %.0f tokens/s\n", (long long)tokens,
           run_s > 0 ? (double)tokens / run_s : 0.0);
    double cpu = drift_lab_cpu_s();
    printf("lab CPU (user + system, with the code sandbox's programs): %.1f s in all; before the matrix %.1f s, "
           "matrix %.1f s, long_context with the stochastic leg %.1f s, tables and report %.1f s\n",
           cpu, r->cpu_before_s, r->cpu_matrix_s - r->cpu_before_s, r->cpu_side_s - r->cpu_matrix_s,
           cpu - r->cpu_side_s);
    printf("report: %s/report.html\n", out);
}

static int cmd_lab(int argc, char **argv) {
    lab_cli c;
    memset(&c, 0, sizeof c);
    c.out = "lab";
    long limit = -1, long_prompts = -1, max_tokens = -1, threads = 1, jobs = 0;
    drift_lab_opts lo;
    drift_lab_opts_default(&lo);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(lab_usage, stdout);
            return 0;
        }
        if (!strcmp(a, "--quick")) {
            lo.full = 0;
            continue;
        }
        if (!strcmp(a, "--full")) {
            lo.full = 1;
            continue;
        }
        if (!strcmp(a, "--dry-run")) {
            c.dry_run = 1;
            continue;
        }
        if (i + 1 >= argc) return cli_error("lab", "unknown option or missing value '%s' (see --help)", a);
        const char *v = argv[++i];
        if (!strcmp(a, "--out")) c.out = v;
        else if (!strcmp(a, "--models")) lo.models_dir = v;
        else if (!strcmp(a, "--guard")) lo.guard_spec = v;
        else if (!strcmp(a, "--embedder")) lo.embedder_spec = v;
        else if (!strcmp(a, "--limit")) {
            if (cli_parse_int("lab", "--limit", v, 1, 1000000, &limit)) return CLI_EXIT_ERROR;
        } else if (!strcmp(a, "--long")) {
            if (cli_parse_int("lab", "--long", v, 1, 100000, &long_prompts)) return CLI_EXIT_ERROR;
        } else if (!strcmp(a, "--max-tokens")) {
            if (cli_parse_int("lab", "--max-tokens", v, 1, 100000, &max_tokens)) return CLI_EXIT_ERROR;
        } else if (!strcmp(a, "--threads")) {
            if (cli_parse_int("lab", "--threads", v, 0, 1024, &threads)) return CLI_EXIT_ERROR;
        } else if (!strcmp(a, "--jobs")) {
            if (cli_parse_int("lab", "--jobs", v, 0, 1024, &jobs)) return CLI_EXIT_ERROR;
        } else return cli_error("lab", "unknown option '%s' (see --help)", a);
    }
    if (lo.full && long_prompts > 0)
        return cli_error("lab", "--long sets --quick's long-context prompts; --full runs every one of them on every "
                                "configuration (use --limit to make it smaller)");
    c.full = lo.full;
    c.threads = (int)threads;
    lo.limit = limit;
    lo.long_prompts = long_prompts;
    lo.max_tokens = (int)max_tokens;
    lo.threads = (int)threads;
    lo.jobs = (int)jobs;
    lo.dry_run = c.dry_run;
    char db[PATH_MAX + 32];
    snprintf(c.matrix_path, sizeof c.matrix_path, "%s/matrix.json", c.out);
    snprintf(c.long_path, sizeof c.long_path, "%s/matrix_long.json", c.out);
    snprintf(db, sizeof db, "%s/lab.db", c.out);
    lo.db = db;
    lo.spec_name = c.matrix_path;
    lo.progress = lab_event;
    lo.progress_user = &c;
    lo.cancel = lab_cancel;
    lo.cancel_user = &c;
    double t_start = now_s();

    drift_lab_result *r = calloc(1, sizeof *r); /* large: on the heap */
    if (!r) return cli_error("lab", "out of memory");
    drift_error err = {0};
    drift_status src = drift_lab_run(&lo, r, &err);
    cli_matrix_printer_free(c.printer);
    int rc = c.rc;
    if (rc == CLI_EXIT_PASS && src) rc = lab_failed(r, &err);
    if (rc == CLI_EXIT_PASS && r->dry_run) printf("dry run: nothing generated (the matrix is in %s)\n", c.matrix_path);
    else if (rc == CLI_EXIT_PASS) {
        rc = lab_report(&c, r);
        print_times(r, now_s() - t_start, c.out);
        int aa = aa_check(r);
        if (rc == CLI_EXIT_PASS && !c.write_failed) rc = aa;
    }
    if ((rc == CLI_EXIT_PASS || rc == CLI_EXIT_FAIL) && c.write_failed) rc = CLI_EXIT_ERROR;
    drift_lab_result_clear(r);
    free(r);
    return rc;
}
CLI_COMMAND(lab, "lab", "the embedded study: matrix, flip table, ANOVA, PRI, report", cmd_lab)
