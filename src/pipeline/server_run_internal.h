/* server_run_internal.h - a run with a server DriftBench started, shared
 * by the stages that start servers (matrix.c, measure.c): the start with
 * the stage's options, the run's cancel hook that also watches the server,
 * the target with "{port}" filled for the connection, and the verdict after
 * the run (a server that exited before the run was whole is the failure,
 * with the command, its status and the tail of its output). The server
 * itself is server_proc.h's. */
#ifndef DRIFT_PIPELINE_SERVER_RUN_INTERNAL_H
#define DRIFT_PIPELINE_SERVER_RUN_INTERNAL_H

#include "driftbench/pipeline.h"
#include "driftbench/server_proc.h"

/* The run's cancel hook while a server runs (server_run_cancel): the
 * caller's cancel, or the server has exited (died set). */
typedef struct server_run_watch {
    int (*cancel)(void *);
    void *cancel_user;
    drift_server_proc *proc;
    int died;
} server_run_watch;

int server_run_cancel(void *user);

/* drift_server_proc_start of command ("{port}" a free port), healthy on
 * health (NULL: /health) within ready_timeout_s (<= 0: the default),
 * cancel polled while it starts. */
drift_status server_run_start(const char *command, const char *health, double ready_timeout_s,
                              int (*cancel)(void *), void *cancel_user, drift_server_proc **out, drift_error *err);

/* Points r at the server: r->target_url = target with "{port}" filled (in
 * *url, malloc'd, the caller frees it after the run) and r's cancel hook
 * = server_run_cancel over w (filled from r's own hook and proc). */
drift_status server_run_attach(drift_run_opts *r, drift_server_proc *proc, server_run_watch *w, char **url,
                               drift_error *err);

/* After a run (or an ask) with the server: 1 when the server has exited
 * and the run was not whole (run_rc not OK, or a request failed); 0 while
 * it runs, or when it ended after the run's last answer. */
int server_run_died(drift_server_proc *proc, const server_run_watch *w, drift_status run_rc,
                    const drift_run_summary *run);

/* The failure of a run whose server died: DRIFT_ERR_IO with "STOPPED
 * (D of R requests stored; the same command again restarts the server and
 * asks what is missing): server `COMMAND` exited with ...; last lines of
 * its output ..." (drift_server_proc_check's; DRIFT_OK if it still runs). */
drift_status server_run_died_error(drift_server_proc *proc, const char *stopped, const drift_run_summary *run,
                                   drift_error *err);

#endif
