/* cmd_lab.c - `driftbench lab`: the paper's study on the embedded engine, on
 * a machine without servers or GPUs. The study itself is the library's lab
 * stage (include/driftbench/lab.h, src/pipeline/lab_*.c: models, design,
 * cost model, stochastic leg); this file parses the flags, drives the
 * stage's steps, prints between them and owns the exit code:
 *
 * 1. models (drift_lab_models_find; the fixtures when models/ has none, and
 *    the output says their answers are noise; fragile models first), whether
 *    safety can be judged (drift_lab_safety_check), the matrix
 *    (drift_lab_design) written to DIR/matrix.json, and --quick's
 *    long-context subset to DIR/matrix_long.json, so `driftbench matrix` can
 *    re-run or shard them.
 * 2. before anything runs: the size (drift_lab_plan_size) and an estimate
 *    of the generation time from a cost measured on this machine
 *    (drift_lab_plan_estimate); --full on fewer than 8 cores adds a WARNING
 *    with how to cut or shard it (it still runs). --dry-run stops here.
 * 3. run + score every configuration (resumable: DIR/lab.db): the matrix
 *    stage (drift_matrix_run, printed by cli_matrix_run as `matrix` does)
 *    with the chat embedder and the safety guard the study chose, --jobs
 *    configurations side by side (one engine thread each by default), one
 *    verdict cache for every scoring call (drift_score_cache), a progress
 *    bar weighted by the cost model; then --quick's long-context subset
 *    (the same runs gain long-context answers); the answers cut by the
 *    token limit per workload (drift_lab_count_cuts).
 * 3b. the stochastic leg (drift_lab_stochastic_design, _run, _compare) ->
 *    DIR/stochastic.txt: it runs in a thread of its own while the
 *    long-context subset runs (neither needs the other's answers; the long
 *    ref configuration alone would leave a core idle), silent until it ends,
 *    then its runs' scoring summaries and its comparison are printed.
 * 4. flip table -> DIR/flip_rates.csv; the ANOVA and the PRI held-out
 *    evaluations computed once (drift_table_analyze) -> DIR/anova.txt,
 *    DIR/pri.txt (when there are enough rows), and the same PRI evaluation
 *    in the HTML report -> DIR/report.html; the summaries are printed too.
 * Every text block comes from a renderer of src/report/ (report.h). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "cmd_matrix.h"
#include "driftbench/analysis.h"
#include "driftbench/eval.h"
#include "driftbench/lab.h"
#include "driftbench/matrix.h"
#include "driftbench/report.h"
#include "driftbench/report_html.h"
#include "pipeline.h"
#include "driftbench/text.h"

/* Sequences decoded together per configuration and in the stochastic leg:
 * the engine is batch-invariant (the same answers at any batch), and a step
 * of 32 rows does about twice the work per CPU-second of a step of 8. */
#define LAB_BATCH 32

static const char lab_usage[] =
    "usage: driftbench lab [--quick|--full] [--out DIR] [--models DIR] [options]\n"
    "\n"
    "Runs the embedded matrix (models x numeric profiles x workloads, baseline = the ref\n"
    "profile of each model), then writes DIR/lab.db, DIR/matrix.json, DIR/flip_rates.csv,\n"
    "DIR/anova.txt, DIR/pri.txt and DIR/report.html and prints the flip table, the ANOVA\n"
    "and the PRI held-out summary. Re-running resumes what is stored.\n"
    "\n"
    "  --quick            at most 3 models (\"-fragile-\" ones first) x 9 profiles; math 150,\n"
    "                     code 164, safety 100, chat 100 prompts; long context 20 prompts on the\n"
    "                     first model's ref, f32, fp8 and int4 only; 128 new tokens; the\n"
    "                     stochastic leg 100 math prompts x 5 replicates x 4 runs (default)\n"
    "  --full             every profile axis crossed, every prompt of each suite\n"
    "  --out DIR          output directory (default lab)\n"
    "  --models DIR       GGUF models (default models/; the test fixtures when empty)\n"
    "  --limit N          prompts per suite (overrides the mode's)\n"
    "  --max-tokens N     new tokens per answer (overrides the mode's)\n"
    "  --guard SPEC       safety guard (LlamaGuard-3 over HTTP, or builtin[:PATH]); default: the\n"
    "                     built-in guard model; safety is skipped (and said so) if none opens\n"
    "  --embedder SPEC    chat embedder (default: the first model not named -fragile-, cpu-f32/avx2)\n"
    "  --threads N        engine threads per configuration (default 1: best on shared machines)\n"
    "  --jobs N           configurations side by side (default: cores / threads); results are\n"
    "                     the same as one at a time\n"
    "  --dry-run          print the size and the time estimate, write DIR/matrix.json, run nothing\n"
    "\n"
    "Before it starts, lab prints the size (configurations x prompts) and an estimate of the\n"
    "generation time from tokens/s measured on this machine; --full on fewer than 8 cores\n"
    "also prints a WARNING (on stderr) with the estimate and how to cut or shard the run.\n";


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

/* Prints the size of the run; 0 when it is known. */
static int print_size(const drift_lab_plan *p, drift_status rc, const drift_error *err) {
    if (rc) {
        printf("size: not known (%s)\n", cli_safe(err->msg));
        return -1;
    }
    printf("size: %zu configurations x %zu prompts (", p->n_configs, p->per_config);
    for (size_t i = 0; i < p->n_suites; i++) printf("%s%s %zu", i ? ", " : "", p->suites[i].name, p->suites[i].n);
    printf(") = %zu answers of at most %d new tokens", p->n_configs * p->per_config, p->max_tokens);
    if (p->long_spec)
        printf(", + long_context %zu prompts on %zu of them (", p->long_suite.n, p->long_spec->n_configs);
    for (size_t i = 0; p->long_spec && i < p->long_spec->n_configs; i++)
        printf("%s%s", i ? ", " : "", p->long_spec->configs[i].label);
    printf("%s, + 4 x %ld x %d sampled answers (stochastic leg: f32, int4, and each again with other seeds)\n", p->long_spec ? ")" : "",
           p->stoch_prompts, p->stoch_replicates);
    return 0;
}

/* Prints the time estimate (and the WARNING of a large --full); for
 * --quick, long_note gets why long_context is left out, with what it would
 * cost here. */
static void print_estimate(const drift_lab_plan *p, drift_status rc, int threads, const char *matrix_path) {
    if (p->todo == 0 && p->long_todo == 0) {
        printf("estimate: every configuration is stored already: nothing to generate but what the stochastic leg "
               "lacks\n");
        return;
    }
    if (rc) {
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
           "tokens/s, attention +%.2g s per token^2 on cpu-f32 (ref: %.0f, %.0f, %.2g); scoring comes on top\n",
           p->todo, d, p->long_s > 0 ? " (long_context " : "", p->long_s > 0 ? dl : "", p->long_s > 0 ? ")" : "", dw,
           p->jobs > 1 ? p->jobs : 1, threads, threads == 1 ? "" : "s", p->cores, 1 / cost->cpu.a,
           cost->cpu.d > 0 ? 1 / cost->cpu.d : 0.0, cost->cpu.b, 1 / cost->ref.a, cost->ref.d > 0 ? 1 / cost->ref.d : 0.0,
           cost->ref.b);
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

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "driftbench lab: cannot write %s: %s\n", path, strerror(errno));
        return;
    }
    fputs(text, f);
    fclose(f);
}

/* The stochastic leg runs in a thread of its own beside the long-context
 * subset (both come after the matrix; the leg needs none of their answers),
 * so the second core is not idle while the long ref configuration runs. It
 * prints nothing while it runs (the long-context lines are being printed);
 * each run's scoring summary is kept and printed after it ends. */
typedef struct stoch_side {
    char db[PATH_MAX + 32];             /* the store's path: the thread opens its own handle */
    drift_lab_stochastic x;             /* the design */
    drift_score_cache *cache;
    atomic_int stop;                    /* 1: the lab failed elsewhere, stop */
    drift_score_summary scores[4];      /* each run's scoring, in run order */
    size_t n_scores;
    drift_lab_stochastic_summary sum;
    drift_status rc;
    drift_error err;
    double wall_s;
} stoch_side;

static int stoch_cancel(void *user) {
    stoch_side *sd = user;
    return atomic_load(&sd->stop) || cli_cancel_requested(NULL);
}

static void stoch_record(void *user, const drift_progress *p) {
    stoch_side *sd = user;
    if (strcmp(p->stage, "run") && p->event == DRIFT_PROGRESS_ITEM && sd->n_scores < 4) {
        const drift_lab_stochastic_summary *s = p->summary;
        sd->scores[sd->n_scores++] = s->score;
    }
}

static void *stoch_thread(void *arg) {
    stoch_side *sd = arg;
    double t0 = cli_now_ms();
    drift_store *st = NULL;
    sd->rc = drift_store_open(sd->db, &st, &sd->err);
    if (!sd->rc) {
        drift_lab_stochastic_opts so;
        drift_lab_stochastic_opts_default(&so);
        so.concurrency = LAB_BATCH;
        so.score.cache = sd->cache; /* no score.progress: the long-context lines are printing */
        so.cancel = stoch_cancel;
        so.cancel_user = sd;
        so.progress = stoch_record;
        so.progress_user = sd;
        sd->rc = drift_lab_stochastic_run(st, &sd->x, &so, &sd->sum, &sd->err);
    }
    drift_store_close(st);
    sd->wall_s = (cli_now_ms() - t0) / 1000.0;
    return NULL;
}

/* Prints what the stochastic leg's thread did, compares its runs, prints
 * and writes DIR/stochastic.txt and appends a sentence to note. */
static int stochastic_report(drift_store *st, stoch_side *sd, const char *out, drift_buf *note,
                             drift_lab_stochastic *xo) {
    drift_lab_stochastic x = sd->x;
    printf("\n== stochastic serving (temperature %.1f, %d replicates, %s, %s: f32 -> int4, and each against itself "
           "with seeds %ld+r: the null; run beside long_context, %.1f s) ==\n",
           x.temperature, x.replicates, x.suite, x.model, x.null_seed, sd->wall_s);
    for (size_t i = 0; i < sd->n_scores; i++) cli_print_score_summary(&sd->scores[i], "not computable");
    fflush(stdout);
    drift_error err = {0};
    if (sd->rc) {
        if (sd->sum.failed_in_run && sd->sum.label)
            return cli_run_failed("lab", sd->sum.label, sd->sum.target, &sd->sum.run, &sd->err);
        return cli_error_lib("lab", &sd->err);
    }
    if (drift_lab_stochastic_compare(st, &x, &err)) return cli_error_lib("lab", &err);
    *xo = x;
    char *txt = NULL;
    if (drift_lab_stochastic_render(&x, &txt, &err)) return cli_error_lib("lab", &err);
    fputs(txt, stdout);
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/stochastic.txt", out);
    write_text(path, txt);
    free(txt);
    if (x.null_ok) {
        const drift_lab_beyond *d = &x.beyond;
        drift_buf_printf(note, "Stochastic serving (temperature 0.7, %d replicates, %zu math prompts, %s f32 -> int4): %.2f%% "
                         "of replicate pairs disagree, %.2f%% for each stack against itself with other seeds (the null), so "
                         "%+.2f points beyond the null (95%% CI %.2f to %.2f). ",
                   x.replicates, d->n, x.model, 100 * d->cross, 100 * d->null_rate, 100 * d->beyond,
                   100 * d->beyond_lo, 100 * d->beyond_hi);
        if (isnan(d->ratio))
            drift_buf_puts(note, "No deterministic flip on those prompts: the ratio to the deterministic rate (the paper: "
                           "0.23x) cannot be said at this size. ");
        else if (isinf(d->ratio_hi))
            drift_buf_printf(note, "Ratio to the deterministic rate: %.2fx (95%% CI from %.2fx, unbounded above: too few "
                             "deterministic flips to bound it; the paper: 0.23x). ",
                       d->ratio, d->ratio_lo);
        else
            drift_buf_printf(note, "Ratio to the deterministic rate: %.2fx (95%% CI %.2fx to %.2fx; the paper: 0.23x). ",
                       d->ratio, d->ratio_lo, d->ratio_hi);
    } else if (!isnan(x.ratio)) {
        drift_buf_printf(note, "Stochastic serving (temperature 0.7, 5 replicates, math, %s f32 -> int4): expected flip rate "
                         "%.2f%%, %.2fx the deterministic figure (the paper: 0.23x); not against its null: %s. ",
                   x.model, 100 * x.expected_flip_rate, x.ratio, x.null_reason);
    }
    return CLI_EXIT_PASS;
}

/* CPU seconds (user + system) this process and its waited-for children
 * (the code sandbox's programs) have used so far. */
static double cpu_s(void) {
    struct rusage self, kids;
    if (getrusage(RUSAGE_SELF, &self) || getrusage(RUSAGE_CHILDREN, &kids)) return 0;
    double s = 0;
    const struct rusage *r[2] = {&self, &kids};
    for (int i = 0; i < 2; i++)
        s += (double)r[i]->ru_utime.tv_sec + (double)r[i]->ru_utime.tv_usec / 1e6 + (double)r[i]->ru_stime.tv_sec +
             (double)r[i]->ru_stime.tv_usec / 1e6;
    return s;
}

static int cmd_lab(int argc, char **argv) {
    const char *out = "lab";
    int dry_run = 0;
    long limit = -1, max_tokens = -1, threads = 1, jobs = 0;
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
            dry_run = 1;
            continue;
        }
        if (i + 1 >= argc) return cli_error("lab", "unknown option or missing value '%s' (see --help)", a);
        const char *v = argv[++i];
        if (!strcmp(a, "--out")) out = v;
        else if (!strcmp(a, "--models")) lo.models_dir = v;
        else if (!strcmp(a, "--guard")) lo.guard_spec = v;
        else if (!strcmp(a, "--embedder")) lo.embedder_spec = v;
        else if (!strcmp(a, "--limit")) {
            if (cli_parse_int("lab", "--limit", v, 1, 1000000, &limit)) return CLI_EXIT_ERROR;
        } else if (!strcmp(a, "--max-tokens")) {
            if (cli_parse_int("lab", "--max-tokens", v, 1, 100000, &max_tokens)) return CLI_EXIT_ERROR;
        } else if (!strcmp(a, "--threads")) {
            if (cli_parse_int("lab", "--threads", v, 0, 1024, &threads)) return CLI_EXIT_ERROR;
        } else if (!strcmp(a, "--jobs")) {
            if (cli_parse_int("lab", "--jobs", v, 0, 1024, &jobs)) return CLI_EXIT_ERROR;
        } else return cli_error("lab", "unknown option '%s' (see --help)", a);
    }
    const int full = lo.full;
    lo.limit = limit;
    lo.max_tokens = (int)max_tokens;
    lo.threads = (int)threads;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (jobs <= 0) jobs = cores / (threads > 0 ? threads : 1);
    if (jobs < 1) jobs = 1;
    double t_start = cli_now_ms();

    /* 1. models */
    drift_lab_study study;
    memset(&study, 0, sizeof study);
    drift_error err = {0};
    if (drift_lab_models_find(&study, &lo, &err)) {
        drift_lab_study_clear(&study);
        return cli_error("lab", "%s", err.msg);
    }
    if (study.fixtures) printf("NOTE: no shipped models found in models/: using the test fixtures, whose answers are noise\n");
    printf("lab (%s): %zu model(s):", full ? "full" : "quick", study.n_models);
    for (size_t i = 0; i < study.n_models; i++)
        printf(" %s%s", study.models[i].name, strstr(study.models[i].name, "-fragile-") ? " (fragile)" : "");
    if (study.n_found > study.n_models)
        printf(" (%zu found; --quick takes \"-fragile-\" models first, then the others by name, up to %d; --full "
               "uses all)",
               study.n_found, DRIFT_LAB_QUICK_MODELS);
    else if (!full && !study.n_fragile)
        printf(" (no \"-fragile-\" model in the folder: robust models only)");
    printf("\n");

    /* evaluators: say up front what can and cannot be judged */
    if (drift_lab_safety_check(&study, &err)) {
        drift_lab_study_clear(&study);
        return cli_error_lib("lab", &err);
    }
    if (!study.with_safety) printf("safety: not computable, so not run: %s\n", study.safety_reason);

    /* 2. the matrix */
    if (mkdir_p(out)) {
        drift_lab_study_clear(&study);
        return cli_error("lab", "cannot create %s: %s", out, strerror(errno));
    }
    char matrix_path[PATH_MAX + 32];
    snprintf(matrix_path, sizeof matrix_path, "%s/matrix.json", out);
    drift_status prc = drift_lab_design(&study, matrix_path, &err);
    if (study.gpu[0]) printf("hardware: the GPU (%s) joins the matrix beside the CPU\n", study.gpu);
    write_text(matrix_path, study.spec_json ? study.spec_json : "");
    char long_path[PATH_MAX + 32];
    snprintf(long_path, sizeof long_path, "%s/matrix_long.json", out);
    if (study.long_spec_json) write_text(long_path, study.long_spec_json);
    if (prc) {
        drift_lab_study_clear(&study);
        if (prc == DRIFT_ERR_NOMEM) return cli_error("lab", "out of memory");
        return cli_error_lib("lab", &err);
    }
    const drift_matrix_spec *spec = study.spec;
    printf("matrix: %zu configurations x %zu suites, %s, %d new tokens (%s)\n", spec->n_configs, spec->n_suites,
           limit > 0 ? "--limit prompts per suite" : full ? "whole suites" : "quick suite sizes", spec->max_tokens,
           matrix_path);
    fflush(stdout);

    /* 3. the size and the time estimate, then run + score (a dry run opens
     * the store only when it exists, to count what is stored) */
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/lab.db", out);
    drift_store *st = NULL;
    if ((!dry_run || access(path, F_OK) == 0) && drift_store_open(path, &st, &err)) {
        drift_lab_study_clear(&study);
        return cli_error_lib("lab", &err);
    }
    drift_lab_plan plan;
    double *weights = calloc(spec->n_configs ? spec->n_configs : 1, sizeof *weights);
    double *long_weights = calloc(study.long_spec ? study.long_spec->n_configs + 1 : 1, sizeof *long_weights);
    double est_main_s = 0, est_long_s = 0;
    size_t long_n = 0;
    double long_tokens = 0; /* prompt tokens of a long-context prompt, by the cost model */
    if (print_size(&plan, drift_lab_plan_size(&study, st, &plan, &err), &err) == 0) {
        fflush(stdout);
        plan.jobs = (int)jobs;
        drift_status erc = drift_lab_plan_estimate(&study, &plan, &err);
        print_estimate(&plan, erc, (int)threads, matrix_path);
        long_n = plan.long_suite.n;
        if (!erc && long_n) long_tokens = plan.long_suite.c1 / (double)long_n * plan.cost.long_tokens_per_char;
        /* the progress bars' weights and wall-time estimates */
        for (size_t i = 0; weights && !erc && i < spec->n_configs; i++)
            est_main_s += weights[i] = drift_lab_plan_config_seconds(&plan, spec, i);
        for (size_t i = 0; long_weights && plan.long_spec && !erc && i < plan.long_spec->n_configs; i++)
            est_long_s += long_weights[i] = drift_lab_plan_config_seconds(&plan, plan.long_spec, i);
    }
    double gen_s = plan.gen_s;
    drift_lab_plan_clear(&plan);
    if (!full && study.long_spec)
        printf("quick: long_context (%zu prompts, each a prefill of ~%.0f tokens) runs on %zu configurations only "
               "(%s); --full runs it on every one\n",
               long_n, long_tokens, study.long_spec->n_configs, long_path);
    fflush(stdout);
    if (dry_run) {
        printf("dry run: nothing generated (the matrix is in %s)\n", matrix_path);
        free(weights);
        free(long_weights);
        drift_store_close(st);
        drift_lab_study_clear(&study);
        return CLI_EXIT_PASS;
    }
    cli_install_signal_handlers();
    int64_t tok0 = 0, tok1 = 0;
    drift_store_completion_tokens(st, &tok0, &err);
    /* one verdict cache for every scoring call: most configurations give
     * the baseline's text, judged once */
    drift_score_cache *cache = drift_score_cache_new();
    if (!cache) {
        free(weights);
        free(long_weights);
        drift_store_close(st);
        drift_lab_study_clear(&study);
        return cli_error("lab", "out of memory");
    }
    cli_matrix_opts mo;
    cli_matrix_opts_default(&mo);
    mo.progress_lines = 1;
    mo.score.guard_spec = lo.guard_spec;
    mo.score.embedder_spec = study.embedder;
    mo.score.cache = cache;
    mo.jobs = (int)jobs;
    mo.concurrency = LAB_BATCH;
    mo.weights = weights;
    mo.est_wall_s = est_main_s / (double)jobs;
    cli_matrix_stats ms;
    double g0 = cli_now_ms(), cpu0 = cpu_s();
    int rc = cli_matrix_run("lab", st, spec, &mo, &ms);
    double main_wall_s = (cli_now_ms() - g0) / 1000.0, cpu1 = cpu_s();
    cli_matrix_stats ls_stats;
    memset(&ls_stats, 0, sizeof ls_stats);
    double long_wall_s = 0;
    /* the stochastic leg in its own thread, beside the long-context subset */
    double side0 = cli_now_ms();
    stoch_side *sd = calloc(1, sizeof *sd); /* large: on the heap */
    pthread_t stoch_th;
    int stoch_started = 0;
    if (!sd && rc == CLI_EXIT_PASS) rc = cli_error("lab", "out of memory");
    if (rc == CLI_EXIT_PASS) {
        snprintf(sd->db, sizeof sd->db, "%s", path);
        sd->cache = cache;
        drift_lab_stochastic_design(&study, &sd->x);
        stoch_started = pthread_create(&stoch_th, NULL, stoch_thread, sd) == 0;
        if (!stoch_started) stoch_thread(sd); /* no thread: one after the other */
    }
    if (rc == CLI_EXIT_PASS && study.long_spec) {
        /* the long-context subset: the same runs gain long-context answers */
        cli_matrix_opts lmo = mo;
        lmo.recheck = 1;
        lmo.all_failed_ok = 1; /* prompts longer than a model's context fail, stored, never pairs */
        lmo.weights = long_weights;
        lmo.est_wall_s = est_long_s / (double)jobs;
        g0 = cli_now_ms();
        rc = cli_matrix_run("lab long_context", st, study.long_spec, &lmo, &ls_stats);
        long_wall_s = (cli_now_ms() - g0) / 1000.0;
        if (ls_stats.all_failed)
            printf("long_context: every request failed on %zu of %zu configurations (e.g. %s): no long-context rows "
                   "from them\n",
                   ls_stats.all_failed, study.long_spec->n_configs, cli_safe(ls_stats.all_failed_msg));
    }
    free(weights);
    free(long_weights);
    if (stoch_started) {
        if (rc != CLI_EXIT_PASS) atomic_store(&sd->stop, 1);
        pthread_join(stoch_th, NULL);
    }
    double side_wall_s = (cli_now_ms() - side0) / 1000.0, cpu2 = cpu_s();
    drift_store_completion_tokens(st, &tok1, &err);
    drift_buf stoch_note = {0};
    drift_lab_stochastic *sx = calloc(1, sizeof *sx); /* large: on the heap */
    int stoch_ran = 0;
    double stoch_wall_s = sd ? sd->wall_s : 0;
    if (!sx && rc == CLI_EXIT_PASS) rc = cli_error("lab", "out of memory");
    if (rc == CLI_EXIT_PASS) {
        rc = stochastic_report(st, sd, out, &stoch_note, sx);
        stoch_ran = rc == CLI_EXIT_PASS;
    }
    free(sd);
    drift_score_cache_stats cstats;
    drift_score_cache_stats_get(cache, &cstats);
    drift_score_cache_free(cache);
    int fixtures = study.fixtures, with_safety = study.with_safety;
    char safety_reason[sizeof study.safety_reason];
    memcpy(safety_reason, study.safety_reason, sizeof safety_reason);
    /* answers cut by the token limit, per workload, over the matrix's runs */
    drift_lab_cuts cuts;
    char *cut_text = NULL;
    if (rc == CLI_EXIT_PASS && (drift_lab_count_cuts(st, spec, &cuts, &err) || drift_lab_cuts_render(&cuts, &cut_text, &err)))
        rc = cli_error_lib("lab", &err);
    drift_lab_study_clear(&study);
    if (rc != CLI_EXIT_PASS) {
        free(sx);
        free(cut_text);
        drift_buf_free(&stoch_note);
        drift_store_close(st);
        return rc;
    }
    printf("\n== answers cut by the token limit (the matrix's runs) ==\n%s", cut_text);
    snprintf(path, sizeof path, "%s/cuts.txt", out);
    write_text(path, cut_text);
    free(cut_text);
    printf("scoring: %zu distinct verdicts kept, %zu reused (math %zu, code %zu, safety %zu, chat %zu, "
           "long_context %zu)\n",
           cstats.entries, (size_t)0 + cstats.hits[DRIFT_WL_MATH] + cstats.hits[DRIFT_WL_CODE] +
                               cstats.hits[DRIFT_WL_SAFETY] + cstats.hits[DRIFT_WL_CHAT] + cstats.hits[DRIFT_WL_LONG],
           cstats.hits[DRIFT_WL_MATH], cstats.hits[DRIFT_WL_CODE], cstats.hits[DRIFT_WL_SAFETY],
           cstats.hits[DRIFT_WL_CHAT], cstats.hits[DRIFT_WL_LONG]);

    /* 4. table, anova, pri, report */
    drift_table *t = NULL;
    if (drift_matrix_flip_table(st, "ref@{model}", &t, &err)) {
        free(sx);
        drift_buf_free(&stoch_note);
        drift_store_close(st);
        return cli_error_lib("lab", &err);
    }
    drift_pri_options po;
    drift_pri_options_init(&po);
    /* PRI evaluations side by side on every core; same results */
    po.nthread = cores > 1 ? (int)(cores < 64 ? cores : 64) : 1;
    drift_table_analyses an;
    drift_table_analyze(t, 1u << 1 | 1u << 2 | 1u << 3, &po, NULL, &an, &err);
    /* what the lab found, first (src/report/lab_summary.c) */
    char stoch_what[DRIFT_LAB_LABEL_MAX + 64] = "";
    drift_lab_summary_stochastic ss = {0};
    if (stoch_ran) {
        const drift_lab_beyond *d = &sx->beyond;
        snprintf(stoch_what, sizeof stoch_what, "%s f32 -> int4, math", sx->model);
        ss = (drift_lab_summary_stochastic){
            .what = stoch_what, .n_prompts = sx->null_ok ? (long)d->n : 0, .replicates = sx->replicates,
            .temperature = sx->temperature, .stochastic_rate = sx->null_ok ? d->cross : sx->expected_flip_rate,
            .null_rate = sx->null_ok ? d->null_rate : NAN, .beyond_rate = sx->null_ok ? d->beyond : NAN,
            .beyond_lo = sx->null_ok ? d->beyond_lo : NAN, .beyond_hi = sx->null_ok ? d->beyond_hi : NAN,
            .det_rate = sx->null_ok ? d->det : NAN, .ratio = sx->null_ok ? d->ratio : NAN,
            .ratio_lo = sx->null_ok ? d->ratio_lo : NAN, .ratio_hi = sx->null_ok ? d->ratio_hi : NAN,
            .reason = !sx->null_ok ? sx->null_reason
                      : isnan(d->ratio) ? "no deterministic flip among the leg's prompts: too small a sample to say"
                      : isinf(d->ratio_hi) ? "too few deterministic flips to bound the ratio above"
                                           : NULL};
    }
    drift_lab_summary_in si = {.table = t, .analyses = &an, .stochastic = stoch_ran ? &ss : NULL,
                               .test_fixtures = fixtures};
    char *sum_text = NULL, *sum_html = NULL;
    if (drift_lab_summary_render(&si, &sum_text, &sum_html, &err)) rc = cli_error_lib("lab", &err);
    else {
        printf("\n%s", sum_text);
        snprintf(path, sizeof path, "%s/summary.txt", out);
        write_text(path, sum_text);
    }
    free(sum_text);
    free(sx);
    snprintf(path, sizeof path, "%s/flip_rates.csv", out);
    if (drift_table_write_csv(t, path, &err)) rc = cli_error_lib("lab", &err);
    printf("\n== flip rate by workload (percent, 95%% Wilson CI; baseline = ref profile of the same model) ==");
    char *text = NULL;
    if (drift_table_render_text(t, &text, &err)) cli_error_lib("lab", &err);
    else fputs(text, stdout);
    free(text);
    drift_store_outcomes outcomes;
    char *why = NULL;
    if (drift_store_count_outcomes(st, &outcomes, &err) == DRIFT_OK &&
        drift_store_outcomes_render(&outcomes, &why, &err) == DRIFT_OK && why[0])
        printf("%s\n", why);
    for (int w = 0; w < DRIFT_WL_COUNT; w++)
        if (ms.score.not_computable[w])
            printf("%s: %zu answers not computable: %s\n", drift_workload_name((drift_workload)w), ms.score.not_computable[w],
                   cli_safe(ms.score.reason[w]));
    printf("(written to %s)\n\n== ANOVA ==\n", path);
    fflush(stdout);
    char *at = NULL;
    if (drift_anova_summary_render(&an, &at, &err)) rc = cli_error_lib("lab", &err);
    else {
        fputs(at, stdout);
        snprintf(path, sizeof path, "%s/anova.txt", out);
        write_text(path, at);
    }
    free(at);
    printf("== PRI held-out evaluation ==\n");
    fflush(stdout);
    char *pt = NULL;
    if (drift_pri_summary_render(&an, &pt, &err)) rc = cli_error_lib("lab", &err);
    else {
        fputs(pt, stdout);
        if (an.pri_fits) {
            snprintf(path, sizeof path, "%s/pri.txt", out);
            write_text(path, pt);
        }
    }
    free(pt);
    size_t n_rows = t->n_rows;

    drift_html_opts ho;
    drift_html_opts_default(&ho);
    ho.title = full ? "DriftBench lab (full matrix)" : "DriftBench lab (quick matrix)";
    ho.baseline = "ref@{model}";
    drift_buf note = {0};
    if (fixtures) drift_buf_puts(&note, "No shipped models were found in models/: this report uses the test fixtures, whose "
                                  "answers are noise, so it shows the machinery rather than real drift. ");
    if (!with_safety) drift_buf_printf(&note, "Safety was not run: %s. ", safety_reason);
    if (!full && long_n)
        drift_buf_printf(&note, "The quick matrix runs long-context (%zu prompts, each a prefill of ~%.0f tokens) on the "
                          "first model's ref, f32, fp8 and int4 configurations only; `driftbench lab --full` runs it "
                          "on every one. ",
                   long_n, long_tokens);
    drift_buf_printf(&note, "Answers cut by the %d-token limit: ", cuts.max_tokens);
    for (int w = 0, first = 1; w < DRIFT_WL_COUNT; w++)
        if (cuts.answers[w]) {
            drift_buf_printf(&note, "%s%s %zu of %zu", first ? "" : ", ", drift_workload_name((drift_workload)w), cuts.cut[w],
                       cuts.answers[w]);
            first = 0;
        }
    drift_buf_puts(&note, ". ");
    if (ms.score.not_computable[DRIFT_WL_CHAT]) drift_buf_printf(&note, "%s. ", ms.score.reason[DRIFT_WL_CHAT]);
    if (why && why[0]) drift_buf_puts(&note, why);
    if (stoch_note.data) drift_buf_puts(&note, stoch_note.data);
    drift_buf_free(&stoch_note);
    ho.note = note.data;
    ho.pri = an.pri;
    ho.summary_html = sum_html;
    char *page = NULL;
    if (drift_report_html(st, &ho, &page, &err)) rc = cli_error_lib("lab", &err);
    else {
        snprintf(path, sizeof path, "%s/report.html", out);
        write_text(path, page);
    }
    free(page);
    free(sum_html);
    drift_buf_free(&note);
    free(why);
    drift_table_analyses_clear(&an);
    drift_table_free(t);
    drift_store_close(st);

    double wall_s = (cli_now_ms() - t_start) / 1000.0, run_s = main_wall_s + side_wall_s;
    int64_t tokens = tok1 - tok0;
    size_t answers = 0;
    for (int w = 0; w < DRIFT_WL_COUNT; w++) answers += cuts.answers[w];
    char est[64] = "";
    if (gen_s > 0) snprintf(est, sizeof est, ", estimated %.0f s", (est_main_s + est_long_s) / (double)jobs);
    printf("\nlab: %zu configurations, %ld side by side, %zu table rows; wall %.1f s (generation %.1f s%s: matrix "
           "%.1f s, then long_context %.1f s with the stochastic leg beside it %.1f s, together %.1f s; in the "
           "configurations' own time generating %.1f s, scoring %.1f s); %zu answers in the matrix's runs",
           ms.configs, jobs, n_rows, wall_s, run_s, est, main_wall_s, long_wall_s, stoch_wall_s, side_wall_s,
           (ms.run_ms + ls_stats.run_ms) / 1000.0, (ms.score_ms + ls_stats.score_ms) / 1000.0, answers);
    if (tok0 == 0 && run_s > 0) printf(", %.1f answers/s", (double)answers / run_s);
    printf("; %lld tokens generated now (the stochastic leg's too), %.0f tokens/s\n", (long long)tokens,
           run_s > 0 ? (double)tokens / run_s : 0.0);
    double cpu3 = cpu_s();
    printf("lab CPU (user + system, with the code sandbox's programs): %.1f s in all; before the matrix %.1f s, "
           "matrix %.1f s, long_context with the stochastic leg %.1f s, tables and report %.1f s\n",
           cpu3, cpu0, cpu1 - cpu0, cpu2 - cpu1, cpu3 - cpu2);
    printf("report: %s/report.html\n", out);
    return rc;
}
CLI_COMMAND(lab, "lab", "the embedded study: matrix, flip table, ANOVA, PRI, report", cmd_lab)
