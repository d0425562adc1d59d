/* pipeline.c - the CLI side of the run, score and compare stages: the
 * signal handlers whose flag is every stage's cancel hook, and what the
 * stages print on stderr (the work is the library's: src/pipeline/).
 *
 * Interruption: the first SIGINT/SIGTERM sets cli_interrupted, which the
 * stages' cancel hook reads: requests in flight are aborted and retry
 * back-offs end at once, nothing is stored for them (they stay missing, so
 * the next run asks them again), what was received is flushed, the run lock
 * released, and the command exits 2. A second signal exits at once: every
 * committed batch is safe in the store (WAL), the lock is taken over by the
 * next run because its owner is gone; servers the command started (matrix,
 * measure) are killed first (drift_server_proc_kill_all).
 *
 * Failed requests: the run stage counts them by kind (drift_run_summary's
 * failures: a cause, or an HTTP status); the CLI prints one line per kind
 * after the "answers, errors stored" line, and, when every request failed,
 * what to check for the kind that failed most (cli_failure_hint,
 * failures.c): "is the server up?" only for connections that could not be
 * made. */
#include "pipeline.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "driftbench/compare.h"
#include "driftbench/server_proc.h"
#include "progress.h"

volatile sig_atomic_t cli_interrupted;

static void on_signal(int sig) {
    (void)sig;
    if (cli_interrupted) { /* the second one: go now (async-signal-safe calls only) */
        static const char msg[] = "\ndriftbench: interrupted again: exiting now; what was stored is kept\n";
        ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
        (void)w;
        drift_server_proc_kill_all();
        _exit(CLI_EXIT_ERROR);
    }
    cli_interrupted = 1;
}

int cli_cancel_requested(void *user) {
    (void)user;
    return cli_interrupted != 0;
}

void cli_install_signal_handlers(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

void cli_run_args_default(cli_run_args *a) {
    memset(a, 0, sizeof *a);
    drift_target_opts_default(&a->topts);
    drift_gen_params_default(&a->params);
    a->replicates = 1;
}

/* ---- run ---- */

void cli_run_progress(void *user, const drift_progress *p) {
    (void)user;
    const drift_run_summary *s = p->summary;
    switch (p->event) {
    case DRIFT_PROGRESS_BEGIN:
        if (!cli_quiet)
            fprintf(stderr, "%s run '%s': %zu prompts x %d replicate(s), %zu to request%s\n",
                    s->resumed ? "resuming" : "starting", cli_safe(p->label), s->prompts, s->replicates, s->requested,
                    s->deferred ? " now (the others are stored or left for later)"
                    : s->resumed ? " (the rest are stored)" : "");
        char name[96];
        snprintf(name, sizeof name, "%s '%s'", p->stage, cli_safe(p->label));
        cli_progress_begin(name, p->total);
        break;
    case DRIFT_PROGRESS_STEP:
        cli_progress_update(p->done, p->total, p->errors,
                            p->request && p->request->completion_tokens >= 0 ? p->request->completion_tokens : -1);
        cli_progress_request(p); /* -v */
        break;
    case DRIFT_PROGRESS_END:
        cli_progress_end();
        if (!cli_quiet && s->step >= DRIFT_RUN_STEP_CHECK) {
            fprintf(stderr, "run '%s': %zu answers, %zu errors stored%s\n", cli_safe(p->label), s->answers, s->errors,
                    s->errors ? " (errors are kept out of flip counts; run again to retry them)" : "");
            if (s->errors) cli_print_failures(s, "  ");
        }
        break;
    default: break;
    }
}

int cli_run_failed(const char *cmd, const char *label, const char *target, const drift_run_summary *s,
                   const drift_error *err) {
    if (err->code == DRIFT_ERR_CANCELLED && s->step <= DRIFT_RUN_STEP_BEGIN) {
        fprintf(stderr, "%s: interrupted before run '%s' started; nothing was asked\n", cmd, cli_safe(label));
        return CLI_EXIT_ERROR;
    }
    if (err->code == DRIFT_ERR_CANCELLED) {
        fprintf(stderr, "%s: interrupted: %zu of %zu stored in run '%s'; run the same command again to resume\n", cmd,
                s->done, s->requested, cli_safe(label));
        return CLI_EXIT_ERROR;
    }
    if (s->step == DRIFT_RUN_STEP_CHECK) {
        int only = 0;
        const drift_run_failure *f = drift_run_failure_main(s, &only);
        if (!f) {
            char *shown = drift_redact(target);
            int rc = cli_error(cmd, "every request to %s failed (first error: %s)", shown ? shown : "the target",
                               s->first_error);
            free(shown);
            return rc;
        }
        char why[1024];
        return cli_error(cmd, "%s", cli_all_failed_why(target, f, only, why, sizeof why));
    }
    if (s->step == DRIFT_RUN_STEP_CONFIG || err->code == DRIFT_ERR_NOMEM) return cli_error(cmd, "%s", err->msg);
    return cli_error_lib(cmd, err);
}

int cli_do_run(const char *cmd, drift_store *st, const cli_run_args *a) {
    drift_run_opts o;
    drift_run_opts_default(&o);
    o.label = a->label;
    o.target = a->target;
    o.suites = a->suites;
    o.n_suites = (size_t)a->n_suites;
    o.config = a->config;
    o.target_opts = a->topts;
    o.params = a->params;
    o.replicates = a->replicates;
    o.limit = a->limit;
    o.order = a->order;
    o.order_seed = a->order_seed;
    o.risk_from = a->risk_from;
    o.select = a->select;
    o.select_user = a->select_user;
    o.seq_alpha = a->seq_alpha;
    o.seq_budget = a->seq_budget;
    o.cancel = cli_cancel_requested;
    o.progress = cli_run_progress;
    drift_run_summary s;
    drift_error err = {0};
    if (drift_run_execute(st, &o, &s, &err)) return cli_run_failed(cmd, a->label, a->target, &s, &err);
    return CLI_EXIT_PASS;
}

/* ---- score ---- */

void cli_print_score_summary(const drift_score_summary *s, const char *not_computable) {
    /* the isolation that ran code answers; weaker than bubblewrap is a
     * warning even when quiet */
    if (s->code_sandbox[0] && !cli_quiet) fprintf(stderr, "score: code sandbox: %s\n", cli_safe(s->code_sandbox));
    if (s->code_sandbox[0] && drift_sandbox_weak(s->code_sandbox))
        fprintf(stderr, "score: warning: code sandbox '%s' is weaker than bubblewrap: generated code runs with "
                        "less isolation than it should\n", cli_safe(s->code_sandbox));
    if (cli_quiet) return;
    for (int w = 0; w < DRIFT_WL_COUNT; w++) {
        size_t any = s->scored[w] + s->already[w] + s->eval_errors[w] + s->not_computable[w];
        if (!any) continue;
        fprintf(stderr, "score %-12s %6zu scored, %6zu already, %4zu evaluator errors", drift_workload_name(w),
                s->scored[w], s->already[w], s->eval_errors[w]);
        if (s->reused[w]) fprintf(stderr, " (%zu of the scored reused: same text judged before)", s->reused[w]);
        if (s->not_computable[w])
            fprintf(stderr, ", %zu %s: %s", s->not_computable[w], not_computable, cli_safe(s->reason[w]));
        fputc('\n', stderr);
    }
}

int cli_do_score(const char *cmd, drift_store *st, const char *label, const drift_score_opts *o) {
    drift_error err = {0};
    drift_score_summary sum;
    memset(&sum, 0, sizeof sum);
    drift_score_opts opts = *o;
    opts.progress = cli_progress;
    opts.cancel = cli_cancel_requested; /* a signal stops scoring, programs in flight included */
    /* one verdict cache for the whole call: the runs of a matrix stored with
     * --no-score mostly repeat the baseline's texts, each judged once */
    drift_score_cache *own = NULL;
    if (!opts.cache) opts.cache = own = drift_score_cache_new();
    cli_progress_begin("score", 0); /* the clock starts now, not at the first batch */
    drift_status rc = drift_score_run(st, label, &opts, &sum, &err);
    drift_score_cache_free(own);
    cli_progress_done();
    if (rc == DRIFT_ERR_CANCELLED) {
        fprintf(stderr, "%s: interrupted: what was judged is stored; run score again to finish\n", cmd);
        return CLI_EXIT_ERROR;
    }
    if (rc) return cli_error_lib(cmd, &err);
    cli_print_score_summary(&sum, "not computable");
    return CLI_EXIT_PASS;
}

/* ---- compare ---- */

int cli_render_compare(const char *cmd, drift_store *st, const drift_comparison *c, const cli_compare_args *a) {
    drift_error err = {0};
    char *text = NULL;
    if (drift_report_comparison(c, st, a->fmt, &text, &err)) return cli_error_lib(cmd, &err);
    int rc = cli_write_output(cmd, a->out, text) ? CLI_EXIT_ERROR : cli_gate_exit(cmd, st, c, c->decision);
    free(text);
    return rc;
}
