/* cmd_matrix.c - `driftbench matrix --spec F --db F [--shard I/N]`: runs the
 * configurations of a matrix spec (each a labelled run, its server started
 * and stopped around it when the spec gives one; a run that is complete is
 * skipped), then scores them: the library's matrix stage
 * (drift_matrix_run) with the CLI's printing, which `lab` shares
 * (cli_matrix_printer, cli_matrix_finish). A configuration that fails entirely (every request
 * failed, or it could not start: its server, its target) does not stop
 * the others (all_failed_ok): once they are done, matrix names each one
 * and why, and exits 2.
 *
 * Job arrays: without --shard, the shard comes from the scheduler's
 * environment (shard_from_env), and stderr says which:
 *   Slurm       SLURM_ARRAY_TASK_ID, with SLURM_ARRAY_TASK_COUNT or
 *               SLURM_ARRAY_TASK_MIN/MAX (and _STEP): shard
 *               (ID - MIN) / STEP + 1 of COUNT (or of the MIN..MAX span);
 *               an array with gaps (--array=1,3,7) does not map to shards.
 *   Kubernetes  JOB_COMPLETION_INDEX (an Indexed Job), with the count from
 *               --shard-count N or DRIFT_SHARD_COUNT (the Job's completions).
 * Values that are not numbers, out of range or inconsistent are exit 2
 * naming the variable. A task the scheduler retries runs the same shard
 * into the same store: complete runs are skipped, an interrupted one
 * resumes. */
#include "cmd_matrix.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "config_file.h"
#include "pipeline.h"
#include "progress.h"

void cli_matrix_opts_default(cli_matrix_opts *o) {
    memset(o, 0, sizeof *o);
    o->shard_index = o->shard_count = 1;
    drift_score_opts_default(&o->score);
}

typedef struct matrix_view {
    const char *cmd;
    const drift_matrix_spec *spec;
    const cli_matrix_opts *o;
    int tty;                  /* stderr is a terminal: one bar, redrawn */
    double last_draw_ms;
    int drawn;                /* the bar is on the screen (a newline ends it) */
    const drift_matrix_summary *msum; /* the stage's summary (from BEGIN to END) */
    double t0_ms;
} matrix_view;

/* "1:05" / "12:40" / "2:03:00" */
static void fmt_clock(char *out, size_t cap, double s) {
    long t = s > 0 ? (long)(s + 0.5) : 0;
    if (t >= 3600) snprintf(out, cap, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else snprintf(out, cap, "%ld:%02ld", t / 60, t % 60);
}

/* Seconds left: the weighted work not done, at the pace so far once a
 * twentieth of it is done, else at the cost model's estimate. */
static double time_left(const matrix_view *v, const drift_progress *p, double *share) {
    const drift_matrix_summary *s = p->summary;
    double total = 0, done = 0;
    for (size_t i = 0; i < v->spec->n_configs; i++) {
        if (!drift_matrix_in_shard(i, v->o->shard_index, v->o->shard_count)) continue;
        double w = v->o->weights ? v->o->weights[i] : 1.0;
        total += w;
        done += w * (s->progress ? s->progress[i] : 0);
    }
    *share = total > 0 ? done / total : 0;
    double elapsed = p->elapsed_ms / 1000.0;
    if (*share >= 0.05) return elapsed * (1 - *share) / *share;
    if (v->o->est_wall_s > 0) return v->o->est_wall_s * (1 - *share);
    return -1;
}

/* The bar (tty) or a line (otherwise) for a matrix event. */
static void matrix_bar(matrix_view *v, const drift_progress *p) {
    const drift_matrix_summary *s = p->summary;
    double share = 0, left = time_left(v, p, &share);
    char el[32], lf[32] = "?";
    fmt_clock(el, sizeof el, p->elapsed_ms / 1000.0);
    if (left >= 0) fmt_clock(lf, sizeof lf, left);
    if (v->tty) {
        double now = cli_now_ms();
        if (p->event == DRIFT_PROGRESS_STEP && now - v->last_draw_ms < 500) return;
        v->last_draw_ms = now;
        char bar[31];
        int fill = (int)(share * 30 + 0.5);
        for (int i = 0; i < 30; i++) bar[i] = i < fill ? '#' : '.';
        bar[30] = 0;
        fprintf(stderr, "\r%s [%s] %zu/%zu configurations %3.0f%%  elapsed %s  left ~%s  (%d side by side)  ", v->cmd,
                bar, p->done, p->total, 100 * share, el, lf, s->jobs);
        v->drawn = 1;
    } else if (p->event != DRIFT_PROGRESS_STEP) {
        fprintf(stderr, "  [%zu/%zu] %-40s %6.1f s  (%3.0f%% of the work, elapsed %s, left ~%s)\n", p->done, p->total,
                cli_safe(p->label ? p->label : ""), s->config_ms / 1000.0, 100 * share, el, lf);
    }
}

/* The matrix stage's printer: its header line, then per configuration the
 * run stage's own lines (or, with progress_lines, one line when done). */
static void matrix_progress(void *user, const drift_progress *p) {
    matrix_view *v = user;
    if (strcmp(p->stage, "matrix") != 0) {
        if (!v->o->progress_lines) cli_run_progress(NULL, p);
        else if (p->request && cli_verbose && !cli_quiet) { /* -v: the request's line, the bar off first */
            if (v->drawn) fputs("\r\033[K", stderr);
            v->drawn = 0;
            cli_progress_request(p);
        } else if (!cli_quiet && v->tty && p->event == DRIFT_PROGRESS_STEP && v->msum) {
            /* one at a time: the run's steps move the bar */
            drift_progress q = {.stage = "matrix", .event = DRIFT_PROGRESS_STEP, .done = v->msum->configs,
                                .total = v->msum->in_shard, .elapsed_ms = cli_now_ms() - v->t0_ms, .eta_ms = -1,
                                .summary = v->msum};
            matrix_bar(v, &q);
        }
        return;
    }
    if (cli_quiet) return;
    switch (p->event) {
    case DRIFT_PROGRESS_BEGIN:
        v->msum = p->summary;
        v->t0_ms = cli_now_ms();
        fprintf(stderr, "%s: %zu of %zu configurations in shard %d/%d, %zu suite(s)%s\n", v->cmd, p->total,
                v->spec->n_configs, v->o->shard_index, v->o->shard_count, v->spec->n_suites,
                v->spec->limit ? " (limited)" : "");
        /* side by side, no run stage reports here: the configurations' own meter */
        if (!v->o->progress_lines && v->msum->jobs > 1) cli_progress_begin("matrix", p->total);
        break;
    case DRIFT_PROGRESS_SKIP:
        if (!v->o->progress_lines) fprintf(stderr, "run '%s': complete, skipped\n", cli_safe(p->label));
        break; /* its ITEM follows once it is scored */
    case DRIFT_PROGRESS_ITEM:
    case DRIFT_PROGRESS_STEP:
        if (v->o->progress_lines) matrix_bar(v, p);
        else if (v->msum && v->msum->jobs > 1) {
            if (cli_verbose && p->event == DRIFT_PROGRESS_ITEM) { /* -v: a line per finished configuration */
                char line[512];
                const drift_run_summary *r = &v->msum->run;
                snprintf(line, sizeof line, "%s [%zu/%zu] '%s': done in %.1f s, %zu answers and %zu errors stored now",
                         v->cmd, p->done, p->total, cli_safe(p->label ? p->label : ""), v->msum->config_ms / 1000.0,
                         r->answers, r->errors);
                cli_progress_note(line);
            }
            cli_progress_update(p->done, p->total, v->msum->all_failed, -1);
        }
        break;
    case DRIFT_PROGRESS_END:
        if (!v->o->progress_lines && v->msum && v->msum->jobs > 1) cli_progress_end();
        if (v->drawn) fputc('\n', stderr);
        v->drawn = 0;
        v->msum = NULL;
        break;
    default: break;
    }
}

struct cli_matrix_printer {
    matrix_view v;
};

cli_matrix_printer *cli_matrix_printer_new(const char *cmd, const drift_matrix_spec *spec, const cli_matrix_opts *o) {
    cli_matrix_printer *pr = calloc(1, sizeof *pr);
    if (pr) pr->v = (matrix_view){cmd, spec, o, isatty(STDERR_FILENO), 0, 0, NULL, 0};
    return pr;
}

void cli_matrix_printer_event(cli_matrix_printer *pr, const drift_progress *p) { matrix_progress(&pr->v, p); }

void cli_matrix_printer_free(cli_matrix_printer *pr) { free(pr); }

int cli_matrix_finish(const char *cmd, const drift_matrix_spec *spec, const cli_matrix_stats *stats, drift_status rc,
                      const drift_error *err) {
    if (rc) {
        if (stats->failed_in_run)
            return cli_run_failed(cmd, stats->label, spec->configs[stats->config_index].target, &stats->run, err);
        if (err->code == DRIFT_ERR_CANCELLED) return cli_error(cmd, "interrupted; run the same command again to resume");
        return cli_error_lib(cmd, err);
    }
    cli_print_score_summary(&stats->score, "NOT COMPUTABLE");
    return CLI_EXIT_PASS;
}

int cli_matrix_run(const char *cmd, drift_store *st, const drift_matrix_spec *spec, const cli_matrix_opts *o,
                   cli_matrix_stats *stats) {
    cli_matrix_stats local;
    if (!stats) stats = &local;
    matrix_view view = {cmd, spec, o, isatty(STDERR_FILENO), 0, 0, NULL, 0};
    drift_matrix_opts mo;
    drift_matrix_opts_default(&mo);
    mo.shard_index = o->shard_index;
    mo.shard_count = o->shard_count;
    mo.concurrency = o->concurrency;
    mo.jobs = o->jobs;
    mo.recheck = o->recheck;
    mo.all_failed_ok = o->all_failed_ok;
    mo.no_score = o->no_score;
    mo.score = o->score;
    mo.cancel = cli_cancel_requested;
    mo.progress = matrix_progress;
    mo.progress_user = &view;
    drift_error err = {0};
    drift_status rc = drift_matrix_run(st, spec, &mo, stats, &err);
    return cli_matrix_finish(cmd, spec, stats, rc, &err);
}

/* ---- shard from a job array's environment ---- */

#define SHARD_MAX 100000 /* drift_matrix_shard_parse's bound */

/* getenv(name) as a number in [0, SHARD_MAX]: 1 set (in *v), 0 unset, -1
 * bad (printed). */
static int env_num(const char *name, long *v) {
    const char *s = getenv(name);
    if (!s) return 0;
    char *end;
    long x = *s >= '0' && *s <= '9' ? strtol(s, &end, 10) : -1;
    if (x < 0 || *end || x > SHARD_MAX) {
        cli_error("matrix", "%s='%s' is not an integer in [0, %d]", name, s, SHARD_MAX);
        return -1;
    }
    *v = x;
    return 1;
}

/* Slurm's array task: 0 ok (*index0, *count), -1 bad (printed). count_flag
 * is --shard-count (0: none), which must agree. */
static int shard_slurm(long id, long count_flag, long *index0, long *count, char *said, size_t cap) {
    long mn = 0, mx = 0, step = 1, n = 0;
    int has_min, has_max, has_step, has_count;
    if ((has_min = env_num("SLURM_ARRAY_TASK_MIN", &mn)) < 0 || (has_max = env_num("SLURM_ARRAY_TASK_MAX", &mx)) < 0 ||
        (has_step = env_num("SLURM_ARRAY_TASK_STEP", &step)) < 0 ||
        (has_count = env_num("SLURM_ARRAY_TASK_COUNT", &n)) < 0)
        return -1;
    if (has_step && step < 1) return cli_error("matrix", "SLURM_ARRAY_TASK_STEP=%ld must be at least 1", step), -1;
    if (id < mn)
        return cli_error("matrix", "SLURM_ARRAY_TASK_ID=%ld is below SLURM_ARRAY_TASK_MIN=%ld", id, mn), -1;
    if ((id - mn) % step)
        return cli_error("matrix", "SLURM_ARRAY_TASK_ID=%ld is not SLURM_ARRAY_TASK_MIN=%ld plus a multiple of "
                                   "SLURM_ARRAY_TASK_STEP=%ld", id, mn, step), -1;
    long span = 0;
    if (has_max) {
        if (mx < id)
            return cli_error("matrix", "SLURM_ARRAY_TASK_ID=%ld is above SLURM_ARRAY_TASK_MAX=%ld", id, mx), -1;
        if ((mx - mn) % step)
            return cli_error("matrix", "SLURM_ARRAY_TASK_MAX=%ld is not SLURM_ARRAY_TASK_MIN=%ld plus a multiple of "
                                       "SLURM_ARRAY_TASK_STEP=%ld", mx, mn, step), -1;
        span = (mx - mn) / step + 1;
    }
    if (has_count && n < 1) return cli_error("matrix", "SLURM_ARRAY_TASK_COUNT=%ld must be at least 1", n), -1;
    if (has_count && has_max && n != span)
        return cli_error("matrix", "SLURM_ARRAY_TASK_COUNT=%ld but SLURM_ARRAY_TASK_MIN..MAX (%ld..%ld, step %ld) "
                                   "holds %ld task ids: an array with gaps (--array=1,3,7) does not map to shards; "
                                   "use --shard I/N", n, mn, mx, step, span), -1;
    if (!has_count) n = has_max ? span : count_flag;
    if (!n)
        return cli_error("matrix", "SLURM_ARRAY_TASK_ID is set but neither SLURM_ARRAY_TASK_COUNT nor "
                                   "SLURM_ARRAY_TASK_MAX is: give --shard-count N or --shard I/N"), -1;
    if (count_flag && count_flag != n)
        return cli_error("matrix", "--shard-count %ld but the Slurm array has %ld tasks", count_flag, n), -1;
    *index0 = (id - mn) / step;
    if (*index0 >= n)
        return cli_error("matrix", "SLURM_ARRAY_TASK_ID=%ld is task %ld of an array of %ld (SLURM_ARRAY_TASK_COUNT)",
                         id, *index0 + 1, n), -1;
    *count = n;
    int k = snprintf(said, cap, "Slurm (SLURM_ARRAY_TASK_ID=%ld", id);
    if (has_count && k > 0 && (size_t)k < cap) k += snprintf(said + k, cap - (size_t)k, ", SLURM_ARRAY_TASK_COUNT=%ld", n);
    if (has_max && k > 0 && (size_t)k < cap)
        k += snprintf(said + k, cap - (size_t)k, ", SLURM_ARRAY_TASK_MIN..MAX=%ld..%ld", mn, mx);
    if (step > 1 && k > 0 && (size_t)k < cap) k += snprintf(said + k, cap - (size_t)k, ", STEP=%ld", step);
    if (!has_count && !has_max && k > 0 && (size_t)k < cap) k += snprintf(said + k, cap - (size_t)k, ", --shard-count %ld", n);
    if (k > 0 && (size_t)k < cap) snprintf(said + k, cap - (size_t)k, ")");
    return 0;
}

/* The shard of a job array's task when --shard is not given: Slurm or a
 * Kubernetes Indexed Job (see the top of the file). 0 ok: o->shard_* set
 * (left 1/1 without a job array) and *said what was used ("" for none);
 * -1 bad (printed). */
static int shard_from_env(long count_flag, cli_matrix_opts *o, char *said, size_t cap) {
    long id = 0, k8s = 0, index0 = 0, count = 0, env_count = 0;
    said[0] = 0;
    int has_slurm = env_num("SLURM_ARRAY_TASK_ID", &id), has_k8s = env_num("JOB_COMPLETION_INDEX", &k8s);
    if (has_slurm < 0 || has_k8s < 0) return -1;
    if (has_slurm && has_k8s)
        return cli_error("matrix", "both SLURM_ARRAY_TASK_ID and JOB_COMPLETION_INDEX are set: which shard is "
                                   "ambiguous; give --shard I/N"), -1;
    if (!has_slurm && !has_k8s) {
        if (count_flag)
            return cli_error("matrix", "--shard-count goes with a job array's index (JOB_COMPLETION_INDEX or "
                                       "SLURM_ARRAY_TASK_ID), which is not set; use --shard I/N"), -1;
        return 0;
    }
    if (has_slurm) {
        if (shard_slurm(id, count_flag, &index0, &count, said, cap)) return -1;
    } else {
        int has_env = env_num("DRIFT_SHARD_COUNT", &env_count);
        if (has_env < 0) return -1;
        if (has_env && env_count < 1) return cli_error("matrix", "DRIFT_SHARD_COUNT=%ld must be at least 1", env_count), -1;
        if (count_flag && has_env && count_flag != env_count)
            return cli_error("matrix", "--shard-count %ld but DRIFT_SHARD_COUNT=%ld", count_flag, env_count), -1;
        count = count_flag ? count_flag : env_count;
        if (!count)
            return cli_error("matrix", "JOB_COMPLETION_INDEX is set but not the shard count: give --shard-count N "
                                       "or DRIFT_SHARD_COUNT (the Job's completions)"), -1;
        if (k8s >= count)
            return cli_error("matrix", "JOB_COMPLETION_INDEX=%ld is not below the shard count %ld (%s)", k8s, count,
                             count_flag ? "--shard-count" : "DRIFT_SHARD_COUNT"), -1;
        index0 = k8s;
        snprintf(said, cap, "a Kubernetes Indexed Job (JOB_COMPLETION_INDEX=%ld, %s%ld)", k8s,
                 count_flag ? "--shard-count " : "DRIFT_SHARD_COUNT=", count);
    }
    o->shard_index = (int)index0 + 1;
    o->shard_count = (int)count;
    return 0;
}

/* The configurations that failed entirely (every request failed, or it
 * could not start), each with why; returns CLI_EXIT_ERROR. Printed
 * even with --quiet: they make the exit code. */
static int print_failed_configs(const drift_matrix_spec *spec, const cli_matrix_stats *s) {
    cli_error("matrix", "%zu of %zu configurations failed entirely (%sthe same command again asks them again):",
              s->all_failed, s->in_shard, s->all_failed < s->in_shard ? "the others are done; " : "");
    char why[1024], named[300];
    for (size_t k = 0; k < s->all_failed && k < DRIFT_MATRIX_FAILURES_MAX; k++) {
        const drift_matrix_failure *f = &s->failed[k];
        const drift_matrix_config *c = &spec->configs[f->config_index];
        const char *msg = f->msg;
        if (f->unstarted || f->main.cause == DRIFT_FAIL_NONE) {
            /* the server's message names the configuration already */
            int n = snprintf(named, sizeof named, "configuration '%s': ", c->label);
            if (n > 0 && (size_t)n < sizeof named && !strncmp(msg, named, (size_t)n)) msg += n;
        } else {
            msg = cli_all_failed_why(c->target, &f->main, f->main_only, why, sizeof why);
        }
        fprintf(stderr, "  configuration '%s': %s\n", cli_safe(c->label), cli_safe(msg)); /* msg: a server's words */
    }
    if (s->all_failed > DRIFT_MATRIX_FAILURES_MAX)
        fprintf(stderr, "  and %zu more\n", s->all_failed - DRIFT_MATRIX_FAILURES_MAX);
    return CLI_EXIT_ERROR;
}

static const char matrix_usage[] =
    "usage: driftbench matrix --spec FILE --db STORE [--shard I/N] [options]\n"
    "       driftbench matrix -c matrix.yaml [--shard I/N] [options]\n"
    "\n"
    "Runs every configuration of the matrix spec (JSON, or YAML for a .yaml/.yml name;\n"
    "see tests/data/matrix/example.json and docs/config.md)\n"
    "as a labelled run in the store, then scores the answers. Runs already complete are\n"
    "skipped (their failed requests are not retried: use `driftbench run` with the label)\n"
    "and interrupted ones resume. --shard I/N runs configurations whose index\n"
    "(0-based, spec order) is I-1 modulo N; join shard stores with `driftbench merge`.\n"
    "Without --shard, a job array's task picks its shard from the environment, and\n"
    "says which on stderr: Slurm (SLURM_ARRAY_TASK_ID with SLURM_ARRAY_TASK_COUNT or\n"
    "SLURM_ARRAY_TASK_MIN/MAX/STEP: shard (ID-MIN)/STEP+1 of the array's tasks) or a\n"
    "Kubernetes Indexed Job (JOB_COMPLETION_INDEX, with the count from --shard-count N\n"
    "or DRIFT_SHARD_COUNT). A retried task resumes its shard (give each its own --db).\n"
    "A configuration with a \"server\" has it started (its command, {port} = a free port),\n"
    "waited for (GET /health until 200) and stopped after its run; configurations in a\n"
    "row with the same command share one. A server that exits mid-run stops the matrix\n"
    "(exit 2, with the command and the end of its output); running the same command\n"
    "again restarts it and asks only what is missing.\n"
    "A configuration that fails entirely (every request failed: a server down, a wrong\n"
    "URL or model name; or it could not start: its server never started or got healthy,\n"
    "its target did not open) does not stop the others: once they are done, matrix\n"
    "exits 2 naming each failed configuration and why. The same command again asks a\n"
    "run whose every request failed again.\n"
    "\n"
    "  -c, --config FILE        a matrix file (docs/config.md): the spec's keys plus store,\n"
    "                           parallel, no_score, evaluators, requests; flags override it\n"
    "  --list                   print the configurations (label, target[, server command]) and exit\n"
    "  --shard-count N          the number of shards of a Kubernetes Indexed Job (its completions)\n"
    "  --concurrency N          batch size / in-flight requests per target\n"
    "  --parallel N             configurations run side by side (default 1), each with its\n"
    "                           own store connection and server; answers do not depend on N\n"
    "  --no-score               store the answers only; score them later (`driftbench score`),\n"
    "                           e.g. on a machine with the code sandbox\n"
    "  --guard SPEC --embedder SPEC --unsafe-code-exec --jobs N   (as `score`)\n";

/* *cfg: the config file (-c), *held: the spec; both freed by the caller. */
static int matrix_cmd(int argc, char **argv, drift_config **cfg, drift_matrix_spec **held) {
    enum { O_SPEC = 500, O_DB, O_SHARD, O_LIST, O_CONC, O_PAR, O_NOSCORE, O_GUARD, O_EMB, O_UNSAFE, O_JOBS, O_HELP,
           O_SHARDN, O_CFGFILE };
    static const struct option longopts[] = {
        {"spec", required_argument, 0, O_SPEC}, {"db", required_argument, 0, O_DB},
        {"shard", required_argument, 0, O_SHARD}, {"list", no_argument, 0, O_LIST},
        {"concurrency", required_argument, 0, O_CONC}, {"parallel", required_argument, 0, O_PAR},
        {"no-score", no_argument, 0, O_NOSCORE}, {"guard", required_argument, 0, O_GUARD},
        {"embedder", required_argument, 0, O_EMB}, {"unsafe-code-exec", no_argument, 0, O_UNSAFE},
        {"jobs", required_argument, 0, O_JOBS}, {"help", no_argument, 0, O_HELP},
        {"shard-count", required_argument, 0, O_SHARDN}, {"config", required_argument, 0, O_CFGFILE}, {0, 0, 0, 0}};
    const char *spec_path = NULL, *db = NULL;
    int list = 0, shard_given = 0;
    long shard_count = 0;
    char shard_said[256];
    cli_matrix_opts mo;
    cli_matrix_opts_default(&mo);
    drift_error err = {0};
    long v;
    int opt;
    drift_matrix_spec *spec = NULL;
    const char *cfg_path = cli_config_path(argc, argv, "hc:", longopts, O_CFGFILE);
    if (cfg_path && cli_matrix_config(cfg_path, cfg, held, &mo, &db)) return CLI_EXIT_ERROR; /* flags override it */
    spec = *held;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "hc:", longopts, NULL)) != -1) {
        switch (opt) {
        case 'c':
        case O_CFGFILE: break; /* read above */
        case O_SPEC: spec_path = optarg; break;
        case O_DB: db = optarg; break;
        case O_SHARD:
            if (drift_matrix_shard_parse(optarg, &mo.shard_index, &mo.shard_count, &err)) return cli_error_lib("matrix", &err);
            shard_given = 1;
            break;
        case O_SHARDN:
            if (cli_parse_int("matrix", "--shard-count", optarg, 1, SHARD_MAX, &shard_count)) return CLI_EXIT_ERROR;
            break;
        case O_LIST: list = 1; break;
        case O_CONC:
            if (cli_parse_int("matrix", "--concurrency", optarg, 1, 4096, &v)) return CLI_EXIT_ERROR;
            mo.concurrency = (int)v;
            break;
        case O_PAR:
            if (cli_parse_int("matrix", "--parallel", optarg, 1, 256, &v)) return CLI_EXIT_ERROR;
            mo.jobs = (int)v;
            break;
        case O_NOSCORE: mo.no_score = 1; break;
        case O_GUARD: mo.score.guard_spec = optarg; break;
        case O_EMB: mo.score.embedder_spec = optarg; break;
        case O_UNSAFE: mo.score.unsafe_code_exec = 1; break;
        case O_JOBS:
            if (cli_parse_int("matrix", "--jobs", optarg, 0, 1024, &v)) return CLI_EXIT_ERROR;
            mo.score.jobs = (int)v;
            break;
        case 'h':
        case O_HELP: fputs(matrix_usage, stdout); return 0;
        default: return cli_error("matrix", "unknown or incomplete option '%s' (see --help)", argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_error("matrix", "unexpected argument '%s'", argv[optind]);
    if (spec && spec_path) return cli_error("matrix", "--spec and -c: give one (a matrix file holds the spec)");
    if ((!spec_path && !spec) || (!db && !list)) return cli_error("matrix", "--spec and --db are required (see --help)");
    if (shard_given && shard_count) return cli_error("matrix", "--shard and --shard-count: give one");
    if (!shard_given) {
        if (shard_from_env(shard_count, &mo, shard_said, sizeof shard_said)) return CLI_EXIT_ERROR;
        if (shard_said[0] && !cli_quiet)
            fprintf(stderr, "matrix: shard %d/%d from %s\n", mo.shard_index, mo.shard_count, shard_said);
    }
    if (!spec && drift_matrix_spec_load(spec_path, held, &err)) return cli_error_lib("matrix", &err);
    spec = *held;
    if (list) {
        for (size_t i = 0; i < spec->n_configs; i++)
            if (drift_matrix_in_shard(i, mo.shard_index, mo.shard_count)) {
                char *target = drift_redact(spec->configs[i].target); /* never a password on the screen */
                printf("%zu\t%s\t%s%s%s\n", i, cli_safe(spec->configs[i].label),
                       cli_safe(target ? target : "(target withheld)"), spec->configs[i].server.start ? "\t" : "",
                       spec->configs[i].server.start ? cli_safe(spec->configs[i].server.start) : "");
                free(target);
            }
        return 0;
    }
    drift_store *st = NULL;
    if (drift_store_open(db, &st, &err)) return cli_error_lib("matrix", &err);
    cli_install_signal_handlers();
    mo.all_failed_ok = 1; /* a configuration that failed entirely is named at the end, after the others */
    cli_matrix_stats stats;
    int rc = cli_matrix_run("matrix", st, spec, &mo, &stats);
    if (rc == CLI_EXIT_PASS && stats.all_failed) rc = print_failed_configs(spec, &stats);
    if (rc == CLI_EXIT_PASS && !cli_quiet)
        fprintf(stderr, "matrix: store %s; next: driftbench table --db '%s' --baseline '%s'\n",
                cli_safe(drift_store_display(st)), cli_safe(drift_store_display(st)), cli_safe(spec->baseline));
    drift_store_close(st);
    return rc;
}

static int cmd_matrix(int argc, char **argv) {
    drift_config *cfg = NULL;
    drift_matrix_spec *spec = NULL;
    int rc = matrix_cmd(argc, argv, &cfg, &spec);
    drift_matrix_spec_free(spec);
    drift_config_free(cfg);
    return rc;
}
CLI_COMMAND(matrix, "matrix", "run a configuration matrix (spec JSON), resumable, in shards", cmd_matrix)
