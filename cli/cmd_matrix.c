/* cmd_matrix.c - `driftbench matrix --spec F --db F [--shard I/N]`: runs the
 * configurations of a matrix spec (each a labelled run, its server started
 * and stopped around it when the spec gives one; a run that is complete is
 * skipped), then scores them: the library's matrix stage
 * (drift_matrix_run) with the CLI's printing, which `lab` shares
 * (cli_matrix_run). */
#include "cmd_matrix.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "pipeline.h"
#include "util/util.h"

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
        double now = util_now_ms();
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
                p->label ? p->label : "", s->config_ms / 1000.0, 100 * share, el, lf);
    }
}

/* The matrix stage's printer: its header line, then per configuration the
 * run stage's own lines (or, with progress_lines, one line when done). */
static void matrix_progress(void *user, const drift_progress *p) {
    matrix_view *v = user;
    if (strcmp(p->stage, "matrix") != 0) {
        if (!v->o->progress_lines) cli_run_progress(NULL, p);
        else if (!cli_quiet && v->tty && p->event == DRIFT_PROGRESS_STEP && v->msum) {
            /* one at a time: the run's steps move the bar */
            drift_progress q = {.stage = "matrix", .event = DRIFT_PROGRESS_STEP, .done = v->msum->configs,
                                .total = v->msum->in_shard, .elapsed_ms = util_now_ms() - v->t0_ms, .eta_ms = -1,
                                .summary = v->msum};
            matrix_bar(v, &q);
        }
        return;
    }
    if (cli_quiet) return;
    switch (p->event) {
    case DRIFT_PROGRESS_BEGIN:
        v->msum = p->summary;
        v->t0_ms = util_now_ms();
        fprintf(stderr, "%s: %zu of %zu configurations in shard %d/%d, %zu suite(s)%s\n", v->cmd, p->total,
                v->spec->n_configs, v->o->shard_index, v->o->shard_count, v->spec->n_suites,
                v->spec->limit ? " (limited)" : "");
        break;
    case DRIFT_PROGRESS_SKIP:
        if (!v->o->progress_lines) fprintf(stderr, "run '%s': complete, skipped\n", p->label);
        break; /* its ITEM follows once it is scored */
    case DRIFT_PROGRESS_ITEM:
    case DRIFT_PROGRESS_STEP:
        if (v->o->progress_lines) matrix_bar(v, p);
        break;
    case DRIFT_PROGRESS_END:
        if (v->drawn) fputc('\n', stderr);
        v->drawn = 0;
        v->msum = NULL;
        break;
    default: break;
    }
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
    if (drift_matrix_run(st, spec, &mo, stats, &err)) {
        if (stats->failed_in_run)
            return cli_run_failed(cmd, stats->label, spec->configs[stats->config_index].target, &stats->run, &err);
        if (err.code == DRIFT_ERR_CANCELLED) return cli_error(cmd, "interrupted; run the same command again to resume");
        return cli_error_lib(cmd, &err);
    }
    cli_print_score_summary(&stats->score, "NOT COMPUTABLE");
    return CLI_EXIT_PASS;
}

static const char matrix_usage[] =
    "usage: driftbench matrix --spec FILE --db FILE [--shard I/N] [options]\n"
    "\n"
    "Runs every configuration of the matrix spec (JSON; see tests/data/matrix/example.json)\n"
    "as a labelled run in the store, then scores the answers. Runs already complete are\n"
    "skipped (their failed requests are not retried: use `driftbench run` with the label)\n"
    "and interrupted ones resume. --shard I/N runs configurations whose index\n"
    "(0-based, spec order) is I-1 modulo N; join shard stores with `driftbench merge`.\n"
    "A configuration with a \"server\" has it started (its command, {port} = a free port),\n"
    "waited for (GET /health until 200) and stopped after its run; configurations in a\n"
    "row with the same command share one. A server that exits or never gets healthy stops\n"
    "the matrix (exit 2, with the command and the end of its output); running the same\n"
    "command again restarts it and asks only what is missing.\n"
    "\n"
    "  --list                   print the configurations (label, target[, server command]) and exit\n"
    "  --concurrency N          batch size / in-flight requests per target\n"
    "  --parallel N             configurations run side by side (default 1), each with its\n"
    "                           own store connection and server; answers do not depend on N\n"
    "  --no-score               store the answers only; score them later (`driftbench score`),\n"
    "                           e.g. on a machine with the code sandbox\n"
    "  --guard SPEC --embedder SPEC --unsafe-code-exec --jobs N   (as `score`)\n";

static int cmd_matrix(int argc, char **argv) {
    enum { O_SPEC = 500, O_DB, O_SHARD, O_LIST, O_CONC, O_PAR, O_NOSCORE, O_GUARD, O_EMB, O_UNSAFE, O_JOBS, O_HELP };
    static const struct option longopts[] = {
        {"spec", required_argument, 0, O_SPEC}, {"db", required_argument, 0, O_DB},
        {"shard", required_argument, 0, O_SHARD}, {"list", no_argument, 0, O_LIST},
        {"concurrency", required_argument, 0, O_CONC}, {"parallel", required_argument, 0, O_PAR},
        {"no-score", no_argument, 0, O_NOSCORE}, {"guard", required_argument, 0, O_GUARD},
        {"embedder", required_argument, 0, O_EMB}, {"unsafe-code-exec", no_argument, 0, O_UNSAFE},
        {"jobs", required_argument, 0, O_JOBS}, {"help", no_argument, 0, O_HELP}, {0, 0, 0, 0}};
    const char *spec_path = NULL, *db = NULL;
    int list = 0;
    cli_matrix_opts mo;
    cli_matrix_opts_default(&mo);
    drift_error err = {0};
    long v;
    int opt;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (opt) {
        case O_SPEC: spec_path = optarg; break;
        case O_DB: db = optarg; break;
        case O_SHARD:
            if (drift_matrix_shard_parse(optarg, &mo.shard_index, &mo.shard_count, &err)) return cli_error_lib("matrix", &err);
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
    if (!spec_path || (!db && !list)) return cli_error("matrix", "--spec and --db are required (see --help)");
    drift_matrix_spec *spec = NULL;
    if (drift_matrix_spec_load(spec_path, &spec, &err)) return cli_error_lib("matrix", &err);
    if (list) {
        for (size_t i = 0; i < spec->n_configs; i++)
            if (drift_matrix_in_shard(i, mo.shard_index, mo.shard_count))
                printf("%zu\t%s\t%s%s%s\n", i, spec->configs[i].label, spec->configs[i].target,
                       spec->configs[i].server.start ? "\t" : "",
                       spec->configs[i].server.start ? spec->configs[i].server.start : "");
        drift_matrix_spec_free(spec);
        return 0;
    }
    drift_store *st = NULL;
    if (drift_store_open(db, &st, &err)) {
        drift_matrix_spec_free(spec);
        return cli_error_lib("matrix", &err);
    }
    cli_install_signal_handlers();
    int rc = cli_matrix_run("matrix", st, spec, &mo, NULL);
    if (rc == CLI_EXIT_PASS && !cli_quiet)
        fprintf(stderr, "matrix: store %s; next: driftbench table --db %s --baseline '%s'\n", db, db, spec->baseline);
    drift_store_close(st);
    drift_matrix_spec_free(spec);
    return rc;
}
CLI_COMMAND(matrix, "matrix", "run a configuration matrix (spec JSON), resumable, in shards", cmd_matrix)
