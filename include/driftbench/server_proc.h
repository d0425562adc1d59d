/* server_proc.h - a serving stack's server process that DriftBench starts
 * and stops itself (llama-server, vLLM, the PyTorch server under tools/, a
 * test server): the matrix's per-configuration "server" and measure's
 * --baseline-start / --target-start.
 *
 *   start: pick a free TCP port on 127.0.0.1 (one nothing listens on) ->
 *          "{port}" in the command becomes it -> a supervisor of ours runs
 *          /bin/sh -c COMMAND in its own process group, stdout + stderr to a
 *          log file -> GET http://127.0.0.1:PORT/health until 200, the
 *          command exits, the ready timeout or a cancel -> the socket that
 *          answers on the port must belong to the command's processes
 *   alive: has the command exited? (waitpid, no blocking)
 *   stop:  SIGTERM to the command's processes, SIGKILL to them after a grace
 *          period; the log removed unless the server failed
 *
 * A failure (the command exits, never answers 200, dies later) is an error
 * that names the command, how it ended (exit status or signal) and the last
 * lines of its output, with the log file's path (kept for reading). The
 * command must stay in the foreground: one that forks a daemon and exits has
 * exited (the daemon is stopped with it).
 *
 * The server is ours: a port on which another process answers /health (it
 * took the port first, or shares it) is refused, naming that process, so
 * its answers are never stored under a configuration's label. A server
 * that runs as another user or outside the command's process tree (a
 * container's port forwarding) cannot be shown to be ours and is refused
 * too.
 *
 * It dies with us: every process the command starts (children, grandchildren,
 * daemons that left the process group) is SIGKILLed when the process or the
 * thread that started it ends, by kill -9 too (the supervisor's parent-death
 * signal), by drift_server_proc_kill_all (async-signal-safe, for a CLI's
 * last-resort signal path) and at process exit (atexit). server_proc.c's top
 * comment says how and where it stops short. */
#ifndef DRIFTBENCH_SERVER_PROC_H
#define DRIFTBENCH_SERVER_PROC_H

#include <stddef.h>

#include "driftbench/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct drift_server_proc drift_server_proc;

typedef struct drift_server_proc_opts {
    const char *command;          /* shell command (required); "{port}" becomes the port */
    const char *health_path;      /* polled until HTTP 200; NULL = "/health" */
    double ready_timeout_s;       /* default 120 */
    double stop_grace_s;          /* SIGTERM -> SIGKILL; default 10 */
    int port;                     /* 0 (default) = a free port chosen at start; else this one,
                                   * refused when another process listens on it */
    const char *log_dir;          /* where the log goes; NULL = $TMPDIR or /tmp */
    /* Cancellation while waiting for health (NULL: never): the server is
     * stopped and start returns DRIFT_ERR_CANCELLED. */
    int (*cancel)(void *cancel_user);
    void *cancel_user;
} drift_server_proc_opts;

/* Fills o with the defaults above (command NULL). */
DRIFT_API void drift_server_proc_opts_default(drift_server_proc_opts *o);

/* Starts o->command and waits until it answers 200 on its health path from
 * a socket of its own. On success *out is a running server (free with
 * drift_server_proc_free). On failure *out is NULL, nothing is left
 * running, and err says why: DRIFT_ERR_INVALID (no command), DRIFT_ERR_IO
 * (no port, o->port taken by another process, no log file, fork failed,
 * the command exited before it was healthy: its status and the tail of its
 * output, or the port answered from another process's socket: the port and
 * that process, "pid N (`its command line`)" where it can be read),
 * DRIFT_ERR_TIMEOUT (not healthy within ready_timeout_s: the last probe's
 * result and the tail), or DRIFT_ERR_CANCELLED. Never prints. The thread
 * that calls it must outlive the server: its end stops the server. */
DRIFT_API drift_status drift_server_proc_start(const drift_server_proc_opts *o, drift_server_proc **out,
                                               drift_error *err);

/* The port the server was given. */
DRIFT_API int drift_server_proc_port(const drift_server_proc *p);

/* The command as run ("{port}" replaced). */
DRIFT_API const char *drift_server_proc_command(const drift_server_proc *p);

/* 1 while the command runs; 0 once it has exited (it is reaped then and
 * its status kept). Cheap (one waitpid): fit for a cancel hook. A process
 * may only be asked from one thread at a time. */
DRIFT_API int drift_server_proc_alive(drift_server_proc *p);

/* DRIFT_OK while the command runs; otherwise DRIFT_ERR_IO with the message
 * "CONTEXT: server `COMMAND` exited with status N (or: was killed by signal
 * S); last lines of its output (log PATH):\n  ..." fitted into err's size
 * (the log is kept). context may be NULL. */
DRIFT_API drift_status drift_server_proc_check(drift_server_proc *p, const char *context, drift_error *err);

/* Stops the server (as described at the top; does nothing more when it has
 * exited already) and frees p. The log is removed when the server was
 * running until now; kept when it had exited on its own. NULL is a no-op. */
DRIFT_API void drift_server_proc_free(drift_server_proc *p);

/* The last `lines` lines of the server's output (at most max_bytes bytes,
 * whole lines where they fit, control characters replaced by '?');
 * malloc'd, "" when there is none; NULL on nomem. */
DRIFT_API char *drift_server_proc_tail(const drift_server_proc *p, int lines, size_t max_bytes);

/* tmpl with every "{port}" replaced by port (malloc'd; NULL on nomem). */
DRIFT_API char *drift_server_proc_fill_port(const char *tmpl, int port);

/* Has every server started and not yet stopped SIGKILLed with all its
 * processes (by its supervisor, at once). Async-signal-safe: for a signal
 * handler that is about to _exit. */
DRIFT_API void drift_server_proc_kill_all(void);

#ifdef __cplusplus
}
#endif
#endif
