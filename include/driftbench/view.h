/* view.h - `driftbench view`: a results browser over a store, served by a
 * small local HTTP server (libmicrohttpd) as one page (HTML, script and
 * style built into the binary; nothing loaded from anywhere else) and a
 * JSON API the page reads:
 *
 *   GET /api/runs                     every run with its counts
 *   GET /api/comparisons              pairs of runs that share prompts
 *   GET /api/pairs?baseline=B[&target=T][&workload=W][&flipped=1]
 *                 [&direction=D][&config=K=V][&q=TEXT][&offset=N][&limit=N]
 *                                     the answer pairs, filtered and paged
 *   GET /api/pair?baseline=B&target=T&response=ID
 *                                     one pair: prompt, both answers, their
 *                                     scores with the evaluators' details,
 *                                     flip risk from the baseline's logprobs
 *   GET /api/history?label=L          a run's endpoints and the runs of the
 *                                     same stack under other labels
 * (docs/view.md has every field). The store is opened read-only for each
 * request (drift_store_open_readonly: no lock, nothing written), so runs
 * being written show their answers as they come.
 *
 * Hostile input: everything from the store is data; the page puts it in
 * the document with textContent only, and every reply carries a
 * Content-Security-Policy that allows this server's own script and style
 * and nothing else. A request whose Host header names neither localhost,
 * an IP address, nor a name the caller allowed is refused (403): a DNS
 * rebinding page cannot read the store through the user's browser. Only
 * GET and HEAD; a request with a body is refused. Slow clients: each
 * connection must deliver its request within request_timeout_s of opening
 * or of its previous reply; at most max_connections at once, a newcomer
 * over the limit evicting the oldest connection still waiting for its
 * request. */
#ifndef DRIFTBENCH_VIEW_H
#define DRIFTBENCH_VIEW_H

#include <stddef.h>
#include "driftbench/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct drift_view drift_view;

typedef struct drift_view_opts {
    const char *store;               /* path or PostgreSQL URL (required) */
    const char *host;                /* listen address (IPv4); NULL = 127.0.0.1 */
    int port;                        /* 0 = a free port (drift_view_port) */
    const char *const *allow_hosts;  /* extra names accepted in the Host header, n_allow_hosts of them */
    size_t n_allow_hosts;
    int max_connections;             /* default 32 */
    double request_timeout_s;        /* default 10 */
} drift_view_opts;

DRIFT_API void drift_view_opts_default(drift_view_opts *o);

/* Checks that o->store opens read-only as a DriftBench store (its error,
 * e.g. DRIFT_ERR_NOT_FOUND, otherwise), then listens. The server runs on
 * its own threads until drift_view_stop. */
DRIFT_API drift_status drift_view_start(const drift_view_opts *o, drift_view **out, drift_error *err);

/* The port it listens on. */
DRIFT_API int drift_view_port(const drift_view *v);

/* Stops listening, closes every connection and frees v. NULL is fine. */
DRIFT_API void drift_view_stop(drift_view *v);

#ifdef __cplusplus
}
#endif
#endif
