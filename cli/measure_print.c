/* measure_print.c - the measure stage (drift_measure_run) as `measure`
 * prints it (measure_print.h): servers starting and ready, the run stage's
 * progress, one line per gated workload after each chunk of the sequential
 * gate, the score summary, why the stage failed, the report written to
 * stdout or -o, the store and labels; and the exit code: the gate's
 * decision, 2 for an error (a report that cannot be written included). */
#include "measure_print.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char *const SIDE[2] = {"baseline", "target"};

static void on_server(void *user, int side, const char *command, int port) {
    (void)user;
    if (cli_quiet) return;
    if (!port) fprintf(stderr, "measure: starting the %s server: %s\n", SIDE[side], cli_safe(command));
    else fprintf(stderr, "measure: %s server ready on port %d\n", SIDE[side], port);
}

/* One line per gated workload after a chunk. */
static void on_chunk(void *user, int chunk, const drift_seq_result *r, const int stopped[DRIFT_WL_COUNT]) {
    (void)user;
    if (cli_quiet) return;
    for (int k = 0; k < DRIFT_WL_COUNT; k++) {
        const drift_seq_wl *w = &r->wl[k];
        if (!r->present[k] || !w->gated) continue;
        fprintf(stderr, "measure: chunk %d %-12s %ld of %ld pairs, %ld flips, interval [%.2f%%, %.2f%%] vs budget "
                        "%.2f%%: %s\n",
                chunk, drift_workload_name((drift_workload)k), w->asked, w->n_total, w->flips, 100 * w->lo,
                100 * w->hi, 100 * w->budget,
                !stopped[k]                                  ? "open"
                : w->decision == DRIFT_DECISION_DEPLOY       ? "DEPLOY"
                : w->decision == DRIFT_DECISION_BLOCK        ? "BLOCK"
                : w->decision == DRIFT_DECISION_INCONCLUSIVE ? "INCONCLUSIVE"
                                                             : "ERROR");
    }
}

/* Prints why the stage failed (sum->step says where). */
static int measure_failed(const drift_measure_opts *o, const drift_measure_summary *sum, const drift_error *err) {
    const char *side = SIDE[sum->side];
    int cancel = err->code == DRIFT_ERR_CANCELLED;
    switch (sum->step) {
    case DRIFT_MEASURE_STEP_CHECK: return cli_error("measure", "%s", err->msg);
    case DRIFT_MEASURE_STEP_SERVER:
        if (cancel) return cli_error("measure", "interrupted while the %s server started", side);
        return cli_error("measure", "--%s-start: %s", side, err->msg);
    case DRIFT_MEASURE_STEP_RUN:
        if (sum->server_died) return cli_error("measure", "%s", err->msg);
        return cli_run_failed("measure", sum->label[sum->side][0] ? sum->label[sum->side] : SIDE[sum->side],
                              sum->run_target, &sum->run, err);
    case DRIFT_MEASURE_STEP_STOPPED: return cli_error("measure", "interrupted; run the same command to resume");
    case DRIFT_MEASURE_STEP_CHUNK:
        if (cancel) return cli_error("measure", "interrupted; run the same command to resume");
        return cli_error_lib("measure", err);
    case DRIFT_MEASURE_STEP_SCORE:
        if (cancel) {
            fprintf(stderr, "measure: interrupted: what was judged is stored; run score again to finish\n");
            return CLI_EXIT_ERROR;
        }
        return cli_error_lib("measure", err);
    default: return cli_error_lib("measure", err);
    }
}

/* Runs the stage and prints, renders and writes what it gives. */
static int measure(drift_store *st, const drift_measure_opts *o, const cli_compare_args *co,
                   drift_measure_summary *sump) {
    drift_measure_summary sum;
    drift_comparison *c = NULL;
    drift_error err = {0};
    drift_status r = drift_measure_run(st, o, &c, &sum, &err);
    memcpy(sump->label, sum.label, sizeof sum.label);
    if (sum.scored || sum.step == DRIFT_MEASURE_STEP_SCORE) cli_progress_done();
    if (sum.scored) cli_print_score_summary(&sum.score, "not computable");
    if (r) return measure_failed(o, &sum, &err);
    int rc;
    if (o->sequential) {
        char *text = NULL;
        if (drift_seq_render(c, &sum.seq, co->fmt, &text, &err)) rc = cli_error_lib("measure", &err);
        else rc = cli_write_output("measure", co->out, text) ? CLI_EXIT_ERROR : cli_gate_exit("measure", st, c, sum.seq.decision);
        free(text);
    } else {
        rc = cli_render_compare("measure", st, c, co);
    }
    drift_comparison_free(c);
    return rc;
}

/* See measure_print.h. */
int cli_measure_run(const char *db, drift_measure_opts *mo, const cli_compare_args *co) {
    drift_error err = {0};
    mo->score.progress = cli_progress;
    mo->cancel = cli_cancel_requested;
    mo->progress = cli_run_progress;
    mo->on_server = on_server;
    mo->on_chunk = on_chunk;
    drift_store *st = NULL;
    if (drift_store_open(db, &st, &err)) return cli_error_lib("measure", &err);
    cli_install_signal_handlers();
    drift_measure_summary sum;
    memset(&sum, 0, sizeof sum);
    int rc = measure(st, mo, co, &sum);
    if (!cli_quiet && rc != CLI_EXIT_ERROR)
        fprintf(stderr, "measure: store %s (labels '%s', '%s')\n", cli_safe(drift_store_display(st)),
                cli_safe(sum.label[0]), cli_safe(sum.label[1]));
    drift_store_close(st);
    return rc;
}
