/* view_httpd.c - the results browser's HTTP server (libmicrohttpd): the
 * page's files and the JSON API (view_api.c), GET and HEAD only.
 *
 * One MHD polling thread answers every request, so the API and its cache
 * need no lock (a request reads a small store in milliseconds; a viewer has
 * one user). Around it, the defence against slow and abusive clients,
 * written for this server (server_httpd.c does the same for `serve`, whose
 * connections own decode jobs; nothing here is shared with it):
 *   - each connection is tracked (MHD's socket context) as WAIT (no request
 *     yet, or idle after a reply) or BUSY (being answered); a WAIT
 *     connection must deliver its request within request_timeout_s of
 *     opening or of its previous reply, or the reaper thread shuts it
 *     down: a deadline, so trickling one byte at a time does not extend it;
 *   - at most max_connections at once: a newcomer over the limit evicts the
 *     oldest WAIT connection, and is refused only when all are BUSY;
 *   - a request with a body, or another method, is refused (413, 405)
 *     before any of it is read; headers are bounded by MHD's per-connection
 *     memory (32 KB).
 * Every reply carries the page's security headers: a Content-Security-
 * Policy allowing only this server's script, style and API, no framing, no
 * sniffing, no referrer, no caching. A Host header that names neither
 * localhost, an IP address, nor an allowed name is refused (403) before
 * anything is read from the store (DNS rebinding). */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "driftbench/store.h"
#include "util/util.h"
#include "view/view_internal.h"

#define VIEW_MAX_ARGS 32

typedef struct vconn {
    int fd;
    int busy;
    int closing;
    double since_ms;
    struct vconn *prev, *next;
} vconn;

struct drift_view {
    struct MHD_Daemon *d;
    view_api *api;
    int port;
    int max_connections;
    double timeout_ms;
    char **allow;
    size_t n_allow;
    pthread_mutex_t mu;            /* the connection list, for the reaper */
    pthread_cond_t cv;
    vconn *conns;
    int nconns;
    int stop;
    int reaper_started;
    pthread_t reaper;
};

static const char csp[] = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
                          "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

void drift_view_opts_default(drift_view_opts *o) {
    memset(o, 0, sizeof *o);
    o->max_connections = 32;
    o->request_timeout_s = 10;
}

const view_asset *view_asset_find(const char *path) {
    if (!strcmp(path, "/index.html")) path = "/";
    for (size_t i = 0; i < view_n_assets; i++)
        if (!strcmp(view_assets[i].path, path)) return &view_assets[i];
    return NULL;
}

/* ---------------------------------------------------------------------------
 * Replies
 * ------------------------------------------------------------------------- */

static enum MHD_Result send_buf(struct MHD_Connection *mc, int status, const char *ctype, const void *data,
                                size_t len, enum MHD_ResponseMemoryMode mode, const char *allow) {
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, (void *)data, mode);
    if (!resp) {
        if (mode == MHD_RESPMEM_MUST_FREE) free((void *)data);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", ctype);
    MHD_add_response_header(resp, "Content-Security-Policy", csp);
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(resp, "X-Frame-Options", "DENY");
    MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(resp, "Cross-Origin-Resource-Policy", "same-origin");
    MHD_add_response_header(resp, "Cache-Control", "no-store");
    if (allow) MHD_add_response_header(resp, "Allow", allow);
    enum MHD_Result rc = MHD_queue_response(mc, (unsigned)status, resp);
    MHD_destroy_response(resp);
    return rc;
}

static enum MHD_Result send_error(struct MHD_Connection *mc, int status, const char *msg, const char *allow) {
    char *b = util_asprintf("{\"error\":\"%s\"}", msg); /* msg: our own text, no quotes */
    if (!b) return MHD_NO;
    return send_buf(mc, status, "application/json; charset=utf-8", b, strlen(b), MHD_RESPMEM_MUST_FREE, allow);
}

typedef struct args_ctx {
    view_arg a[VIEW_MAX_ARGS];
    size_t n;
    int too_many;
} args_ctx;

static enum MHD_Result collect_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    (void)kind;
    args_ctx *c = cls;
    if (c->n == VIEW_MAX_ARGS) {
        c->too_many = 1;
        return MHD_NO;
    }
    c->a[c->n++] = (view_arg){key ? key : "", value ? value : ""};
    return MHD_YES;
}

static void conn_busy(drift_view *v, struct MHD_Connection *mc, int busy) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    vconn *c = ci ? ci->socket_context : NULL;
    if (!c) return;
    pthread_mutex_lock(&v->mu);
    c->busy = busy;
    if (!busy) c->since_ms = util_now_ms();
    pthread_mutex_unlock(&v->mu);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *mc, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
    (void)version;
    (void)upload_data;
    drift_view *v = cls;
    static int first_call_marker;
    if (!*con_cls) { /* headers in: answer now, before any body is read */
        *con_cls = &first_call_marker;
        conn_busy(v, mc, 1);
        if (strcmp(method, "GET") && strcmp(method, "HEAD"))
            return send_error(mc, 405, "only GET and HEAD", "GET, HEAD");
        const char *cl = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        const char *te = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
        if ((cl && strtoull(cl, NULL, 10) > 0) || te) return send_error(mc, 413, "a request has no body here", NULL);
        const char *host = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
        if (!view_host_allowed(host, (const char *const *)v->allow, v->n_allow))
            return send_error(mc, 403, "this Host is not served (DNS rebinding protection; see --allow-host)", NULL);
        const view_asset *as = view_asset_find(url);
        if (as) return send_buf(mc, 200, as->ctype, as->data, as->len, MHD_RESPMEM_PERSISTENT, NULL);
        if (strncmp(url, "/api/", 5)) return send_error(mc, 404, "not found", NULL);
        args_ctx ac = {.n = 0};
        MHD_get_connection_values(mc, MHD_GET_ARGUMENT_KIND, collect_arg, &ac);
        if (ac.too_many) return send_error(mc, 400, "too many parameters", NULL);
        view_reply r;
        view_api_handle(v->api, url, ac.a, ac.n, &r);
        if (!r.body) return send_error(mc, 500, "out of memory", NULL);
        return send_buf(mc, r.status, r.ctype, r.body, r.len, MHD_RESPMEM_MUST_FREE, NULL);
    }
    /* a body despite all (the reply is queued): drop it unread */
    *upload_data_size = 0;
    return MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *mc, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)toe;
    drift_view *v = cls;
    if (*con_cls) conn_busy(v, mc, 0); /* keep-alive: the next request must come within the deadline */
    *con_cls = NULL;
}

/* ---------------------------------------------------------------------------
 * Connections: tracking, the limit with eviction, the deadline
 * ------------------------------------------------------------------------- */

static void conn_shut(drift_view *v, vconn *c) {
    if (c->closing) return;
    c->closing = 1;
    v->nconns--;
    shutdown(c->fd, SHUT_RDWR);
}

static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen) {
    (void)addr;
    (void)addrlen;
    drift_view *v = cls;
    enum MHD_Result ok = MHD_YES;
    pthread_mutex_lock(&v->mu);
    if (v->nconns >= v->max_connections) {
        vconn *oldest = NULL;
        for (vconn *c = v->conns; c; c = c->next)
            if (!c->closing && !c->busy && (!oldest || c->since_ms < oldest->since_ms)) oldest = c;
        if (oldest) conn_shut(v, oldest);
        else ok = MHD_NO;
    }
    pthread_mutex_unlock(&v->mu);
    return ok;
}

static void on_connection(void *cls, struct MHD_Connection *mc, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe) {
    drift_view *v = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *fd = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
        vconn *c = fd ? calloc(1, sizeof *c) : NULL;
        *socket_context = c;
        if (!c) return; /* untracked: MHD's own limit and timeout still hold */
        c->fd = fd->connect_fd;
        c->since_ms = util_now_ms();
        pthread_mutex_lock(&v->mu);
        c->next = v->conns;
        if (v->conns) v->conns->prev = c;
        v->conns = c;
        v->nconns++;
        pthread_mutex_unlock(&v->mu);
        return;
    }
    vconn *c = *socket_context;
    if (!c) return;
    pthread_mutex_lock(&v->mu);
    if (c->prev) c->prev->next = c->next;
    else v->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    if (!c->closing) v->nconns--;
    pthread_mutex_unlock(&v->mu);
    free(c);
    *socket_context = NULL;
}

/* Every 100 ms: shut down WAIT connections past their deadline. */
static void *reaper_main(void *arg) {
    drift_view *v = arg;
    pthread_mutex_lock(&v->mu);
    while (!v->stop) {
        struct timespec ts;
        util_abstime_in_ms(&ts, 100);
        pthread_cond_timedwait(&v->cv, &v->mu, &ts);
        double now = util_now_ms();
        for (vconn *c = v->conns; c; c = c->next)
            if (!c->busy && !c->closing && now - c->since_ms >= v->timeout_ms) conn_shut(v, c);
    }
    pthread_mutex_unlock(&v->mu);
    return NULL;
}

/* ---------------------------------------------------------------------------
 * Start and stop
 * ------------------------------------------------------------------------- */

drift_status drift_view_start(const drift_view_opts *o, drift_view **out, drift_error *err) {
    *out = NULL;
    if (!o || !o->store || !*o->store) return drift_error_set(err, DRIFT_ERR_INVALID, "view: no store given");
    if (o->port < 0 || o->port > 65535)
        return drift_error_set(err, DRIFT_ERR_INVALID, "view: port %d is not in [0, 65535]", o->port);
    /* the store must open (read-only) now, not at the first request */
    drift_store *st = NULL;
    drift_status rc = drift_store_open_readonly(o->store, &st, err);
    if (rc) return rc;
    drift_run_overview *runs = NULL;
    size_t nr = 0;
    rc = drift_store_run_overviews(st, &runs, &nr, err);
    drift_run_overview_array_free(runs, nr);
    drift_store_close(st);
    if (rc) return rc;
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)o->port);
    const char *host = o->host && *o->host ? o->host : "127.0.0.1";
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1)
        return drift_error_set(err, DRIFT_ERR_INVALID, "view: host '%s' is not an IPv4 address", host);
    drift_view *v = calloc(1, sizeof *v);
    if (!v) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    v->max_connections = o->max_connections > 0 ? o->max_connections : 32;
    v->timeout_ms = (o->request_timeout_s > 0 ? o->request_timeout_s : 10) * 1000;
    pthread_mutex_init(&v->mu, NULL);
    pthread_cond_init(&v->cv, NULL);
    v->api = view_api_new(o->store);
    v->allow = o->n_allow_hosts ? calloc(o->n_allow_hosts, sizeof *v->allow) : NULL;
    int nomem = !v->api || (o->n_allow_hosts && !v->allow);
    for (size_t i = 0; i < o->n_allow_hosts && !nomem; i++) {
        if (!(v->allow[i] = util_strdup(o->allow_hosts[i]))) nomem = 1;
        v->n_allow = i + 1;
    }
    if (nomem) {
        drift_view_stop(v);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    if (pthread_create(&v->reaper, NULL, reaper_main, v)) {
        drift_view_stop(v);
        return drift_error_set(err, DRIFT_ERR_INTERNAL, "view: cannot start the reaper thread");
    }
    v->reaper_started = 1;
    unsigned idle_s = (unsigned)(v->timeout_ms / 1000 + 0.999);
    v->d = MHD_start_daemon(MHD_USE_AUTO | MHD_USE_INTERNAL_POLLING_THREAD, 0, on_accept, v, on_request, v,
                            MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr, MHD_OPTION_CONNECTION_LIMIT,
                            (unsigned)v->max_connections * 2, MHD_OPTION_CONNECTION_TIMEOUT, idle_s < 1 ? 1u : idle_s,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, v, MHD_OPTION_NOTIFY_CONNECTION, on_connection,
                            v, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)32 * 1024, MHD_OPTION_END);
    if (!v->d) {
        drift_view_stop(v);
        return drift_error_set(err, DRIFT_ERR_IO, "view: cannot listen on %s:%d (in use, or not permitted)", host,
                               o->port);
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(v->d, MHD_DAEMON_INFO_BIND_PORT);
    v->port = di ? di->port : o->port;
    *out = v;
    return DRIFT_OK;
}

int drift_view_port(const drift_view *v) { return v ? v->port : 0; }

void drift_view_stop(drift_view *v) {
    if (!v) return;
    if (v->d) MHD_stop_daemon(v->d); /* closes every connection */
    if (v->reaper_started) {
        pthread_mutex_lock(&v->mu);
        v->stop = 1;
        pthread_cond_broadcast(&v->cv);
        pthread_mutex_unlock(&v->mu);
        pthread_join(v->reaper, NULL);
    }
    view_api_free(v->api);
    for (size_t i = 0; i < v->n_allow; i++) free(v->allow[i]);
    free(v->allow);
    pthread_mutex_destroy(&v->mu);
    pthread_cond_destroy(&v->cv);
    free(v);
}
