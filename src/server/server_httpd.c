/* server_httpd.c - the libmicrohttpd glue (the only file that includes it):
 * the daemon (one thread per connection), a request's body collected under
 * max_body_bytes (413 past it) and handed to srv_route, the reply sent and
 * counted; and the defence against slow or abusive clients.
 *
 * Connections. Every TCP connection has a tracker (srv_conn, MHD's socket
 * context) in one of three states:
 *   WAIT  no request yet: waiting for headers (new, or keep-alive idle)
 *   BODY  headers in, body being read
 *   BUSY  request complete: being answered (queued, decoding, sending)
 * - A connection must deliver a whole request (headers and body) within
 *   request_timeout_s of opening or of its previous reply; the reaper thread
 *   (every 100 ms) shuts the socket down otherwise. This is a deadline, not
 *   an inactivity timer, so a client trickling one header byte at a time is
 *   dropped too.
 * - Accept policy: at most per_client_connections per source address and
 *   max_connections in all. A newcomer over a limit evicts the oldest WAIT or
 *   BODY connection (of its own address when that limit is hit), so idle or
 *   slow connections cannot lock anyone out of /health; only when every
 *   connection in the way is BUSY is the newcomer refused (closed at once).
 *   MHD's own limits sit above ours (2x) as a backstop for evicted sockets
 *   not yet cleaned up.
 * - A BUSY connection whose client closes it (POLLRDHUP, seen by the reaper)
 *   has its job cancelled (srv_sched_cancel_departed): dropped from the
 *   queue, or its sequences ended at the next decode step. A client that
 *   half-closes its sending side while it waits counts as gone. */
#include <microhttpd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/server_internal.h"
#include "util/util.h"

typedef enum conn_state { CONN_WAIT, CONN_BODY, CONN_BUSY } conn_state;

/* One TCP connection (MHD's socket context); see the top of the file. */
struct srv_conn {
    int fd;
    int family;                /* AF_INET / AF_INET6 / other (no per-address limit) */
    unsigned char addr[16];
    conn_state state;
    double since_ms;           /* start of the current wait: accept or the previous reply */
    int closing;               /* shut down (timed out or evicted): no longer counted */
    srv_job *job;              /* BUSY: the job its request waits for */
    struct srv_conn *prev, *next;
};

/* ---------------------------------------------------------------------------
 * Requests
 * ------------------------------------------------------------------------- */
typedef struct request { /* one request (MHD's per-request context) */
    util_buf body;
    int too_big;
    int replied;
    srv_conn *sc;      /* its connection's tracker (NULL: untracked) */
} request;

static void conn_set_state(drift_server *s, srv_conn *sc, conn_state st) {
    if (!sc) return;
    pthread_mutex_lock(&s->mu);
    sc->state = st;
    if (st == CONN_WAIT) sc->since_ms = util_now_ms();
    pthread_mutex_unlock(&s->mu);
}

static enum MHD_Result send_reply(struct MHD_Connection *c, srv_reply *r) {
    if (!r->body) {
        srv_error e;
        srv_error_set(&e, 500, NULL, NULL, "out of memory");
        srv_reply_error(r, &e);
    }
    const char *b = r->body ? r->body : "";
    struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(b), (void *)b, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(r->body);
        return MHD_NO;
    }
    r->body = NULL; /* owned by the response now */
    MHD_add_response_header(resp, "Content-Type", r->ctype ? r->ctype : "application/json");
    if (r->ctype && !strcmp(r->ctype, "text/event-stream")) MHD_add_response_header(resp, "Cache-Control", "no-cache");
    if (r->retry_after > 0) {
        char ra[16];
        snprintf(ra, sizeof ra, "%d", r->retry_after);
        MHD_add_response_header(resp, "Retry-After", ra);
    }
    if (r->allow) MHD_add_response_header(resp, "Allow", r->allow);
    enum MHD_Result rc = MHD_queue_response(c, (unsigned)r->status, resp);
    MHD_destroy_response(resp);
    return rc;
}

static void count_status(drift_server *s, const srv_reply *r) {
    pthread_mutex_lock(&s->mu);
    if (r->cancelled) { /* counted as cancelled or departed */
    } else if (r->status < 300) {
        s->stats.answered++;
        if (s->draining) s->stats.drained++;
    } else if (r->status == 503) {
        s->stats.overloaded++;
    } else if (r->status < 500) {
        s->stats.rejected++;
    }
    pthread_mutex_unlock(&s->mu);
}

/* A request's headers are in: count it, refuse a declared body over the limit. */
static enum MHD_Result on_headers(drift_server *s, struct MHD_Connection *mc, request *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    c->sc = ci ? ci->socket_context : NULL;
    pthread_mutex_lock(&s->mu);
    s->active++;
    s->stats.requests++;
    if (c->sc) c->sc->state = CONN_BODY; /* headers in; the deadline still runs */
    pthread_mutex_unlock(&s->mu);
    const char *cl = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && strtoull(cl, NULL, 10) > s->o.max_body_bytes) {
        srv_error e;
        srv_reply r = {0};
        srv_error_set(&e, 413, NULL, "request_too_large", "the body of %s bytes is over the limit of %zu bytes", cl,
                      s->o.max_body_bytes);
        srv_reply_error(&r, &e);
        c->replied = 1;
        conn_set_state(s, c->sc, CONN_BUSY);
        count_status(s, &r);
        return send_reply(mc, &r);
    }
    return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *mc, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls) {
    (void)version;
    drift_server *s = cls;
    request *c = *con_cls;
    if (!c) {
        c = calloc(1, sizeof *c);
        if (!c) return MHD_NO;
        *con_cls = c;
        return on_headers(s, mc, c);
    }
    if (*upload_data_size) {
        if (!c->too_big && c->body.len + *upload_data_size > s->o.max_body_bytes) {
            c->too_big = 1;
            buf_free(&c->body);
        }
        if (!c->too_big && buf_append(&c->body, upload_data, *upload_data_size)) return MHD_NO;
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (c->replied) return MHD_YES;
    c->replied = 1;
    conn_set_state(s, c->sc, CONN_BUSY);
    srv_reply r = {0};
    if (c->too_big) {
        srv_error e;
        srv_error_set(&e, 413, NULL, "request_too_large", "the body is over the limit of %zu bytes", s->o.max_body_bytes);
        srv_reply_error(&r, &e);
    } else {
        srv_route(s, url, method, c->body.data ? c->body.data : "", c->body.len, c->sc ? &c->sc->job : NULL, &r);
    }
    buf_free(&c->body);
    count_status(s, &r);
    if (r.drop) { /* nobody to answer: close the connection */
        free(r.body);
        return MHD_NO;
    }
    return send_reply(mc, &r);
}

static void on_completed(void *cls, struct MHD_Connection *mc, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)mc;
    (void)toe;
    drift_server *s = cls;
    request *c = *con_cls;
    if (!c) return;
    buf_free(&c->body);
    pthread_mutex_lock(&s->mu);
    if (c->sc) { /* keep-alive: the next request must come within the timeout */
        c->sc->state = CONN_WAIT;
        c->sc->since_ms = util_now_ms();
    }
    s->active--;
    pthread_cond_broadcast(&s->cv_done);
    pthread_mutex_unlock(&s->mu);
    free(c);
    *con_cls = NULL;
}

/* ---------------------------------------------------------------------------
 * Connection limits, request deadline, departed clients
 * ------------------------------------------------------------------------- */
static void addr_key(const struct sockaddr *a, int *family, unsigned char key[16]) {
    memset(key, 0, 16);
    *family = a ? a->sa_family : AF_UNSPEC;
    if (*family == AF_INET) memcpy(key, &((const struct sockaddr_in *)(const void *)a)->sin_addr, 4);
    else if (*family == AF_INET6) memcpy(key, &((const struct sockaddr_in6 *)(const void *)a)->sin6_addr, 16);
}

/* Closes tracked connection c (its thread sees EOF; MHD cleans up). Under mu:
 * the tracker leaves the list only in on_connection(CLOSED), which MHD calls
 * before it closes the descriptor, so c->fd is still c's. */
static void conn_shut(drift_server *s, srv_conn *c) {
    if (c->closing) return;
    c->closing = 1;
    s->nconns--;
    shutdown(c->fd, SHUT_RDWR);
}

/* MHD's accept policy: our per-address and total limits, with eviction of
 * the oldest waiting connection (see the top of the file). */
static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen) {
    (void)addrlen;
    drift_server *s = cls;
    int fam;
    unsigned char key[16];
    addr_key(addr, &fam, key);
    pthread_mutex_lock(&s->mu);
    int same = 0;
    srv_conn *old_same = NULL, *old_any = NULL;
    for (srv_conn *c = s->conns; c; c = c->next) {
        if (c->closing) continue;
        int mine = (fam == AF_INET || fam == AF_INET6) && c->family == fam && !memcmp(c->addr, key, 16);
        same += mine;
        if (c->state == CONN_BUSY) continue;
        if (!old_any || c->since_ms < old_any->since_ms) old_any = c;
        if (mine && (!old_same || c->since_ms < old_same->since_ms)) old_same = c;
    }
    srv_conn *victim = NULL;
    int need = 0;
    if (same >= s->o.per_client_connections) {
        need = 1;
        victim = old_same;
    } else if (s->nconns >= s->o.max_connections) {
        need = 1;
        victim = old_any;
    }
    enum MHD_Result ok = MHD_YES;
    if (victim) {
        conn_shut(s, victim);
        s->stats.evicted++;
    } else if (need) {
        s->stats.refused_connections++;
        ok = MHD_NO;
    }
    pthread_mutex_unlock(&s->mu);
    return ok;
}

static void on_connection(void *cls, struct MHD_Connection *mc, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe) {
    drift_server *s = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        srv_conn *c = calloc(1, sizeof *c);
        const union MHD_ConnectionInfo *fd = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
        const union MHD_ConnectionInfo *ad = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        if (!c || !fd) { /* untracked: MHD's own limits and timeout still hold */
            free(c);
            *socket_context = NULL;
            return;
        }
        c->fd = fd->connect_fd;
        addr_key(ad ? ad->client_addr : NULL, &c->family, c->addr);
        c->state = CONN_WAIT;
        c->since_ms = util_now_ms();
        pthread_mutex_lock(&s->mu);
        c->next = s->conns;
        if (s->conns) s->conns->prev = c;
        s->conns = c;
        s->nconns++;
        pthread_mutex_unlock(&s->mu);
        *socket_context = c;
        return;
    }
    srv_conn *c = *socket_context;
    if (!c) return;
    pthread_mutex_lock(&s->mu);
    if (c->prev) c->prev->next = c->next;
    else s->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    if (!c->closing) s->nconns--;
    pthread_mutex_unlock(&s->mu);
    free(c);
    *socket_context = NULL;
}

/* Every 100 ms: close connections past the request deadline; cancel the jobs
 * of BUSY connections whose client has gone. */
static void *reaper_main(void *arg) {
    drift_server *s = arg;
    const double timeout_ms = s->o.request_timeout_s * 1000;
    struct pollfd *pf = NULL;
    srv_conn **pc = NULL;
    size_t cap = 0;
    pthread_mutex_lock(&s->mu);
    while (!s->reaper_stop) {
        srv_cond_wait_ms(&s->cv_reap, &s->mu, 100);
        if (s->reaper_stop) break;
        double now = util_now_ms();
        size_t n = 0;
        for (srv_conn *c = s->conns; c; c = c->next) {
            if (c->state != CONN_BUSY) {
                if (!c->closing && now - c->since_ms >= timeout_ms) {
                    conn_shut(s, c);
                    s->stats.timed_out++;
                }
            } else if (c->job && !c->job->done && !c->job->cancel) {
                if (c->closing) { /* shut while its body came in: nobody to answer */
                    srv_sched_cancel_departed(s, c->job);
                    continue;
                }
                if (n == cap) {
                    size_t nc = cap ? cap * 2 : 64;
                    struct pollfd *npf = realloc(pf, nc * sizeof *npf);
                    if (npf) pf = npf;
                    srv_conn **npc = npf ? realloc(pc, nc * sizeof *npc) : NULL;
                    if (npc) pc = npc;
                    if (!npf || !npc) break;
                    cap = nc;
                }
                pf[n] = (struct pollfd){.fd = c->fd, .events = POLLRDHUP};
                pc[n++] = c;
            }
        }
        /* under mu: no descriptor here can be closed and reused meanwhile */
        if (n && poll(pf, (nfds_t)n, 0) > 0)
            for (size_t i = 0; i < n; i++)
                if (pf[i].revents & (POLLRDHUP | POLLHUP | POLLERR)) srv_sched_cancel_departed(s, pc[i]->job);
    }
    pthread_mutex_unlock(&s->mu);
    free(pf);
    free(pc);
    return NULL;
}

static void reaper_stop(drift_server *s) {
    if (!s->reaper_started) return;
    srv_thread_stop(s, s->reaper, &s->reaper_stop, &s->cv_reap);
    s->reaper_started = 0;
}

/* ---------------------------------------------------------------------------
 * The daemon
 * ------------------------------------------------------------------------- */
drift_status srv_httpd_start(drift_server *s, drift_error *err) {
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)s->o.port);
    const char *host = s->o.host && *s->o.host ? s->o.host : "127.0.0.1";
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1)
        return drift_error_set(err, DRIFT_ERR_INVALID, "server: host '%s' is not an IPv4 address", host);
    if (pthread_create(&s->reaper, NULL, reaper_main, s))
        return drift_error_set(err, DRIFT_ERR_INTERNAL, "server: cannot start the reaper thread");
    s->reaper_started = 1;
    /* MHD's limits: a backstop 2x above ours (evicted sockets linger until
     * MHD cleans them up); its inactivity timeout covers slow readers of a
     * reply */
    unsigned mhd_total = (unsigned)s->o.max_connections * 2, mhd_per_ip = (unsigned)s->o.per_client_connections * 2;
    unsigned idle_s = (unsigned)(s->o.request_timeout_s + 0.999);
    s->d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC, 0, on_accept,
                            s, on_request, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr, MHD_OPTION_CONNECTION_LIMIT,
                            mhd_total, MHD_OPTION_PER_IP_CONNECTION_LIMIT, mhd_per_ip, MHD_OPTION_CONNECTION_TIMEOUT,
                            idle_s < 1 ? 1u : idle_s, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                            MHD_OPTION_NOTIFY_CONNECTION, on_connection, s, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                            (size_t)64 * 1024, MHD_OPTION_END);
    if (!s->d) {
        reaper_stop(s);
        return drift_error_set(err, DRIFT_ERR_IO, "server: cannot listen on %s:%d (in use, or not permitted)", host,
                               s->o.port);
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : s->o.port;
    return DRIFT_OK;
}

void srv_httpd_quiesce(drift_server *s) {
    MHD_socket ls = MHD_quiesce_daemon(s->d);
    if (ls != MHD_INVALID_SOCKET) close(ls);
}

void srv_httpd_stop(drift_server *s) {
    if (s->d) MHD_stop_daemon(s->d); /* closes every connection, joins their threads */
    s->d = NULL;
    reaper_stop(s);
}
