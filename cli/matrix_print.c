/* matrix_print.c - the matrix stage as `matrix` and `lab` print it
 * (cmd_matrix.h; the runner is the library's drift_matrix_run): the
 * header line, per configuration the run stage's own lines or, for the
 * lab (progress_lines), a bar on a terminal (done/total, the time left
 * from the cost model's weights, corrected by the pace so far) or a line
 * per configuration; with configurations side by side, one meter; then
 * the failure or the scoring summary. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cmd_matrix.h"
#include "meter.h"
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
    cli_fmt_clock(p->elapsed_ms / 1000.0, el, sizeof el);
    if (left >= 0) cli_fmt_clock(left, lf, sizeof lf);
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
