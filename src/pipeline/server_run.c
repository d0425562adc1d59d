/* server_run.c - a run with a server the stage started (matrix's
 * configurations with a "server", measure's --baseline-start /
 * --target-start), written once for both stages:
 *
 *   start  drift_server_proc_start: a free port for "{port}", GET the
 *          health path until 200 from a socket of the server's own (another
 *          process on the port is refused), the stage's cancel polled
 *   attach the run connects to the target with "{port}" filled
 *          (target_url), while the stored target keeps "{port}", so a
 *          resumed run on another port is the same run; the run's cancel
 *          hook is also 1 once the server has exited, so the run stops at
 *          once, unfinished, with what it received
 *   after  a server that exited before the run was whole is the failure:
 *          DRIFT_ERR_IO naming the command, its status and the tail of its
 *          output (drift_server_proc_check), after how far the run got; a
 *          server that ended after the run's last answer is no failure
 *
 * Who stops the server, and when, is the stage's (matrix keeps one for the
 * next configuration with the same one; measure.c says its rule). */
#include "pipeline/server_run_internal.h"

#include <stdio.h>
#include <stdlib.h>

int server_run_cancel(void *user) {
    server_run_watch *w = user;
    if (w->proc && !drift_server_proc_alive(w->proc)) {
        w->died = 1;
        return 1;
    }
    return w->cancel && w->cancel(w->cancel_user);
}

drift_status server_run_start(const char *command, const char *health, double ready_timeout_s,
                              int (*cancel)(void *), void *cancel_user, drift_server_proc **out, drift_error *err) {
    drift_server_proc_opts so;
    drift_server_proc_opts_default(&so);
    so.command = command;
    so.health_path = health;
    if (ready_timeout_s > 0) so.ready_timeout_s = ready_timeout_s;
    so.cancel = cancel;
    so.cancel_user = cancel_user;
    return drift_server_proc_start(&so, out, err);
}

drift_status server_run_attach(drift_run_opts *r, drift_server_proc *proc, server_run_watch *w, char **url,
                               drift_error *err) {
    *url = drift_server_proc_fill_port(r->target, drift_server_proc_port(proc));
    if (!*url) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    *w = (server_run_watch){r->cancel, r->cancel_user, proc, 0};
    r->target_url = *url;
    r->cancel = server_run_cancel;
    r->cancel_user = w;
    return DRIFT_OK;
}

int server_run_died(drift_server_proc *proc, const server_run_watch *w, drift_status run_rc,
                    const drift_run_summary *run) {
    int alive = !w->died && drift_server_proc_alive(proc);
    return !alive && !(run_rc == DRIFT_OK && run->errors == 0);
}

drift_status server_run_died_error(drift_server_proc *proc, const char *stopped, const drift_run_summary *run,
                                   drift_error *err) {
    char ctx[256];
    snprintf(ctx, sizeof ctx,
             "%s (%zu of %zu requests stored; the same command again restarts the server and asks what is missing)",
             stopped, run->done, run->requested);
    return drift_server_proc_check(proc, ctx, err);
}
