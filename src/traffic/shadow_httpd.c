/* shadow_httpd.c - the shadow proxy's listener (libmicrohttpd, one thread
 * per connection) and its relay to the primary (libcurl, one thread per
 * request in flight).
 *
 * A request's body is collected under max_body_bytes (413 past it). Then a
 * relay thread sends it to the primary: the same method, path (the client's
 * path after "/v1" appended to the primary spec's URL), body and headers but
 * the hop-by-hop ones, Host, Content-Length and Accept-Encoding (so the body
 * comes back as the primary encoded it, and is relayed so). The client's
 * Authorization goes to the primary unchanged; without one, the primary
 * spec's api_key_env key is sent. Once the primary's status line and headers
 * are in, the client's response is queued with that status and those
 * headers (hop-by-hop ones, Content-Length, Date and Server left to MHD),
 * its body fed by a callback from a bounded buffer (RELAY_CAP) that the
 * relay thread fills from curl's write callback as bytes arrive: an SSE
 * stream is relayed chunk by chunk, and a slow client slows the primary's
 * transfer rather than growing memory. A primary that cannot be reached is
 * a 502 with a JSON error. When the primary's reply is complete the relay
 * thread hands it to shd_primary_done (shadow_queue.c), which only counts and
 * queues: the client never waits on the candidate or the store. */
#include <microhttpd.h>
#include <curl/curl.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <jansson.h>

#include "traffic/shadow_internal.h"

#define RELAY_CAP ((size_t)256 << 10)
#define MAX_HEADERS 64

typedef struct relay {
    drift_shadow *s;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;
    /* the request */
    char *url, *method;
    util_buf body;
    struct curl_slist *hdrs;
    int api;                 /* a mirrorable endpoint's drift_api, or -1 */
    int too_big;
    /* the reply */
    long status;
    char *rh[MAX_HEADERS];   /* "Name: value" of the final response */
    size_t n_rh;
    char ctype[128];
    long long content_length; /* -1 unknown */
    int headers_done, done, failed, client_gone;
    char curl_error[CURL_ERROR_SIZE];
    util_buf pipe;           /* bytes not yet given to the client: pipe.data[pipe_off..pipe.len) */
    size_t pipe_off;
    uint64_t sent;           /* bytes given to the client */
    struct relay *next_pending; /* waiting for a relay thread (s->relay_head) */
    util_buf copy;           /* the whole reply, for storing, up to max_store_reply_bytes */
    int copy_over;
    int keep_copy;           /* a mirrorable request in the sample: its reply is kept for storing */
    /* timings (util_now_ms) */
    double t_recv, t_up_start, t_up_first, t_sent_first;
} relay;

static void relay_unref(relay *r) {
    pthread_mutex_lock(&r->mu);
    int left = --r->refs;
    pthread_mutex_unlock(&r->mu);
    if (left) return;
    free(r->url);
    free(r->method);
    buf_free(&r->body);
    buf_free(&r->pipe);
    buf_free(&r->copy);
    curl_slist_free_all(r->hdrs);
    for (size_t i = 0; i < r->n_rh; i++) free(r->rh[i]);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free(r);
}

static int hop_by_hop(const char *name) {
    static const char *const hop[] = {"connection", "keep-alive", "proxy-connection", "proxy-authenticate",
                                      "proxy-authorization", "te", "trailer", "transfer-encoding", "upgrade",
                                      "host", "content-length", "expect", "accept-encoding", "date", "server"};
    for (size_t i = 0; i < sizeof hop / sizeof hop[0]; i++)
        if (!strcasecmp(name, hop[i])) return 1;
    return 0;
}

/* ---- the relay thread (curl) ---- */

static size_t on_header(char *p, size_t sz, size_t n, void *u) {
    relay *r = u;
    size_t len = sz * n, l = len;
    while (l && (p[l - 1] == '\r' || p[l - 1] == '\n')) l--;
    pthread_mutex_lock(&r->mu);
    if (l >= 5 && !strncmp(p, "HTTP/", 5)) { /* a status line: a new response (after a 100) */
        const char *sp = memchr(p, ' ', l);
        r->status = sp ? strtol(sp + 1, NULL, 10) : 0;
        for (size_t i = 0; i < r->n_rh; i++) free(r->rh[i]);
        r->n_rh = 0;
        r->ctype[0] = 0;
        r->content_length = -1;
    } else if (l == 0) {
        if (r->status >= 200) {
            r->headers_done = 1;
            pthread_cond_broadcast(&r->cv);
        }
    } else {
        const char *colon = memchr(p, ':', l);
        if (colon) {
            char name[64];
            size_t nl = (size_t)(colon - p);
            if (nl < sizeof name) {
                memcpy(name, p, nl);
                name[nl] = 0;
                const char *v = colon + 1;
                while (v < p + l && (*v == ' ' || *v == '\t')) v++;
                size_t vl = (size_t)(p + l - v);
                if (!strcasecmp(name, "content-type")) snprintf(r->ctype, sizeof r->ctype, "%.*s", (int)vl, v);
                if (!strcasecmp(name, "content-length")) r->content_length = strtoll(v, NULL, 10);
                if (!hop_by_hop(name) && r->n_rh < MAX_HEADERS) r->rh[r->n_rh++] = util_strndup(p, l);
            }
        }
    }
    pthread_mutex_unlock(&r->mu);
    return len;
}

static size_t on_body(char *p, size_t sz, size_t n, void *u) {
    relay *r = u;
    size_t len = sz * n;
    pthread_mutex_lock(&r->mu);
    if (!r->t_up_first) r->t_up_first = util_now_ms();
    if (!r->headers_done) { /* a body with no header end seen (HTTP/1.0): the headers are all in */
        r->headers_done = 1;
        pthread_cond_broadcast(&r->cv);
    }
    while (!r->client_gone && r->pipe.len - r->pipe_off >= RELAY_CAP &&
           !__atomic_load_n(&r->s->abort_upstream, __ATOMIC_SEQ_CST)) {
        struct timespec ts;
        util_abstime_in_ms(&ts, 100);
        pthread_cond_timedwait(&r->cv, &r->mu, &ts);
    }
    if (r->client_gone || __atomic_load_n(&r->s->abort_upstream, __ATOMIC_SEQ_CST)) {
        pthread_mutex_unlock(&r->mu);
        return 0; /* aborts the transfer */
    }
    if (r->pipe_off == r->pipe.len) r->pipe.len = r->pipe_off = 0;
    else if (r->pipe_off > RELAY_CAP) { /* compact */
        memmove(r->pipe.data, r->pipe.data + r->pipe_off, r->pipe.len - r->pipe_off);
        r->pipe.len -= r->pipe_off;
        r->pipe_off = 0;
    }
    int bad = buf_append(&r->pipe, p, len);
    if (r->keep_copy && !r->copy_over) {
        if (r->copy.len + len > r->s->o.max_store_reply_bytes) {
            r->copy_over = 1;
            buf_free(&r->copy);
        } else if (buf_append(&r->copy, p, len)) {
            r->copy_over = 1;
        }
    }
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    return bad ? 0 : len;
}

static int on_progress(void *u, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d) {
    (void)a, (void)b, (void)c, (void)d;
    relay *r = u;
    pthread_mutex_lock(&r->mu);
    int stop = r->client_gone;
    pthread_mutex_unlock(&r->mu);
    return stop || __atomic_load_n(&r->s->abort_upstream, __ATOMIC_SEQ_CST);
}

/* Idle curl handles to the primary, each keeping its connection alive: a
 * request takes one (or a new one) and gives it back after a clean
 * transfer, so the relay makes no new TCP connection per request. */
static CURL *pool_get(drift_shadow *s) {
    CURL *h = NULL;
    pthread_mutex_lock(&s->mu);
    if (s->n_pool) h = s->pool[--s->n_pool];
    pthread_mutex_unlock(&s->mu);
    if (h) curl_easy_reset(h);
    else h = curl_easy_init();
    return h;
}

static void pool_put(drift_shadow *s, CURL *h, int ok) {
    pthread_mutex_lock(&s->mu);
    if (ok && s->n_pool < SHD_POOL_MAX) {
        s->pool[s->n_pool++] = h;
        h = NULL;
    }
    pthread_mutex_unlock(&s->mu);
    if (h) curl_easy_cleanup(h);
}

static void relay_run(relay *r) {
    drift_shadow *s = r->s;
    CURL *h = pool_get(s);
    CURLcode cc = CURLE_FAILED_INIT;
    if (h) {
        curl_easy_setopt(h, CURLOPT_URL, r->url);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(s->o.primary_timeout_s * 1000));
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, r->hdrs);
        curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(h, CURLOPT_HEADERDATA, r);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, r);
        curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(h, CURLOPT_XFERINFODATA, r);
        curl_easy_setopt(h, CURLOPT_ERRORBUFFER, r->curl_error);
        curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
        if (!strcmp(r->method, "GET")) curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
        else if (!strcmp(r->method, "HEAD")) curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
        else {
            curl_easy_setopt(h, CURLOPT_POSTFIELDS, r->body.data ? r->body.data : "");
            curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body.len);
            if (strcmp(r->method, "POST")) curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, r->method);
        }
        r->t_up_start = util_now_ms();
        cc = curl_easy_perform(h);
        pool_put(s, h, cc == CURLE_OK);
    }
    double t_end = util_now_ms();
    pthread_mutex_lock(&r->mu);
    r->done = 1;
    r->failed = cc != CURLE_OK;
    if (r->failed && !r->curl_error[0]) snprintf(r->curl_error, sizeof r->curl_error, "%s", curl_easy_strerror(cc));
    int gone = r->client_gone;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    if (r->api >= 0 && !gone) {
        const char *terr = r->failed ? r->curl_error : NULL;
        shd_primary_done(s, (drift_api)r->api, r->body.data ? r->body.data : "", r->body.len, r->failed ? 0 : r->status,
                         r->ctype, r->copy_over ? NULL : r->copy.data, r->copy.len, r->copy_over, terr,
                         t_end - r->t_up_start);
    }
    pthread_mutex_lock(&s->mu);
    s->stats.in_flight--;
    pthread_cond_broadcast(&s->cv_idle);
    pthread_mutex_unlock(&s->mu);
    relay_unref(r);
}

/* The relay threads: a pool that grows with the requests in flight (one
 * thread each) and shrinks when a thread has waited RELAY_IDLE_S for work,
 * so a request costs no thread creation in steady traffic. */
#define RELAY_IDLE_S 30

static void *relay_thread(void *arg) {
    drift_shadow *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->relay_head && !s->relay_stop) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += RELAY_IDLE_S;
            s->relay_idle++;
            int rc = pthread_cond_timedwait(&s->cv_relay, &s->mu, &ts);
            s->relay_idle--;
            if (rc && !s->relay_head) break;
        }
        relay *r = s->relay_head;
        if (!r) break; /* idle too long, or the stop */
        s->relay_queued--;
        s->relay_head = r->next_pending;
        if (!s->relay_head) s->relay_tail = NULL;
        pthread_mutex_unlock(&s->mu);
        relay_run(r);
        pthread_mutex_lock(&s->mu);
    }
    s->relay_threads--;
    pthread_cond_broadcast(&s->cv_idle);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* Hands r to an idle relay thread, or starts one. Under s->mu. 0 ok. */
static int relay_submit_locked(drift_shadow *s, relay *r) {
    r->next_pending = NULL;
    if (s->relay_idle > s->relay_queued) {
        if (s->relay_tail) s->relay_tail->next_pending = r;
        else s->relay_head = r;
        s->relay_tail = r;
        s->relay_queued++;
        pthread_cond_signal(&s->cv_relay);
        return 0;
    }
    pthread_t th;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    int bad = pthread_create(&th, &at, relay_thread, s);
    pthread_attr_destroy(&at);
    if (bad) return -1;
    s->relay_threads++;
    if (s->relay_tail) s->relay_tail->next_pending = r;
    else s->relay_head = r;
    s->relay_tail = r;
    s->relay_queued++;
    pthread_cond_signal(&s->cv_relay);
    return 0;
}

/* ---- the client side (MHD) ---- */

static ssize_t read_reply(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    relay *r = cls;
    pthread_mutex_lock(&r->mu);
    while (r->pipe.len == r->pipe_off && !r->done) pthread_cond_wait(&r->cv, &r->mu);
    ssize_t n;
    if (r->pipe.len > r->pipe_off) {
        size_t k = r->pipe.len - r->pipe_off;
        if (k > max) k = max;
        memcpy(buf, r->pipe.data + r->pipe_off, k);
        r->pipe_off += k;
        r->sent += k;
        n = (ssize_t)k;
        if (!r->t_sent_first) {
            r->t_sent_first = util_now_ms();
            double added = (r->t_sent_first - r->t_recv) - (r->t_up_first - r->t_up_start);
            pthread_mutex_unlock(&r->mu);
            shd_observe_added(r->s, added / 1000.0);
            pthread_mutex_lock(&r->mu);
        }
        pthread_cond_broadcast(&r->cv);
    } else {
        n = r->failed ? MHD_CONTENT_READER_END_WITH_ERROR : MHD_CONTENT_READER_END_OF_STREAM;
    }
    pthread_mutex_unlock(&r->mu);
    return n;
}

static void free_reply(void *cls) {
    relay *r = cls;
    pthread_mutex_lock(&r->mu);
    /* the client went away before it had it all: a transfer still running stops (and is not stored) */
    int all = (r->done && r->pipe_off == r->pipe.len && !r->failed) ||
              (r->content_length >= 0 && r->sent >= (uint64_t)r->content_length);
    if (!all) r->client_gone = 1;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    relay_unref(r);
}

static enum MHD_Result reply_text(struct MHD_Connection *c, unsigned status, const char *ctype, const char *body) {
    struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!resp) return MHD_NO;
    MHD_add_response_header(resp, "Content-Type", ctype);
    enum MHD_Result rc = MHD_queue_response(c, status, resp);
    MHD_destroy_response(resp);
    return rc;
}

static enum MHD_Result reply_error(struct MHD_Connection *c, unsigned status, const char *type, const char *msg) {
    json_t *j = json_pack("{s:{s:s,s:s}}", "error", "message", msg, "type", type);
    char *b = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    enum MHD_Result rc = reply_text(c, status, "application/json", b ? b : "{}");
    free(b);
    return rc;
}

static enum MHD_Result add_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    (void)kind;
    relay *r = cls;
    if (!key || hop_by_hop(key)) return MHD_YES;
    char *line = util_asprintf("%s: %s", key, value ? value : "");
    struct curl_slist *n = line ? curl_slist_append(r->hdrs, line) : NULL;
    free(line);
    if (n) r->hdrs = n;
    return MHD_YES;
}

static int has_header(struct MHD_Connection *c, const char *name) {
    return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name) != NULL;
}

/* Starts the relay and answers the client once the primary's headers are in. */
static enum MHD_Result proxy(drift_shadow *s, struct MHD_Connection *c, relay *r) {
    MHD_get_connection_values(c, MHD_HEADER_KIND, add_header, r);
    struct curl_slist *n = curl_slist_append(r->hdrs, "Expect:"); /* no 100-continue round trip */
    if (n) r->hdrs = n;
    if (!has_header(c, "Authorization") && s->primary_key) {
        char *a = util_asprintf("Authorization: Bearer %s", s->primary_key);
        if (a && (n = curl_slist_append(r->hdrs, a))) r->hdrs = n;
        free(a);
    }
    pthread_mutex_lock(&s->mu);
    if (s->draining) {
        pthread_mutex_unlock(&s->mu);
        return reply_error(c, 503, "shadow_stopping", "the shadow proxy is stopping");
    }
    s->stats.requests++;
    s->stats.in_flight++;
    pthread_mutex_unlock(&s->mu);
    r->t_recv = util_now_ms();
    pthread_mutex_lock(&r->mu);
    r->refs++; /* the relay thread's (the request context holds one, on_completed drops it) */
    pthread_mutex_unlock(&r->mu);
    pthread_mutex_lock(&s->mu);
    int bad = relay_submit_locked(s, r);
    if (bad) {
        s->stats.in_flight--;
        pthread_cond_broadcast(&s->cv_idle);
    }
    pthread_mutex_unlock(&s->mu);
    if (bad) {
        relay_unref(r);
        return reply_error(c, 503, "shadow_overloaded", "the shadow proxy cannot start a relay thread");
    }
    pthread_mutex_lock(&r->mu);
    while (!r->headers_done && !r->done) pthread_cond_wait(&r->cv, &r->mu);
    int no_reply = !r->headers_done;
    long status = r->status;
    char why[CURL_ERROR_SIZE + 64];
    snprintf(why, sizeof why, "the primary did not answer: %s", r->curl_error[0] ? r->curl_error : "no reply");
    pthread_mutex_unlock(&r->mu);
    if (no_reply) return reply_error(c, 502, "shadow_primary_unreachable", why);
    int sse = !strncmp(r->ctype, "text/event-stream", 17);
    pthread_mutex_lock(&r->mu);
    r->refs++; /* the response's (free_reply drops it) */
    pthread_mutex_unlock(&r->mu);
    uint64_t size = !sse && r->content_length >= 0 ? (uint64_t)r->content_length : MHD_SIZE_UNKNOWN;
    struct MHD_Response *resp = MHD_create_response_from_callback(size, 32 * 1024, read_reply, r, free_reply);
    if (!resp) {
        free_reply(r);
        return MHD_NO;
    }
    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; i < r->n_rh; i++) {
        char *colon = strchr(r->rh[i], ':');
        if (!colon) continue;
        *colon = 0;
        const char *v = colon + 1;
        while (*v == ' ') v++;
        MHD_add_response_header(resp, r->rh[i], v);
        *colon = ':';
    }
    pthread_mutex_unlock(&r->mu);
    enum MHD_Result rc = MHD_queue_response(c, (unsigned)status, resp);
    MHD_destroy_response(resp);
    return rc;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **ctx) {
    (void)version;
    drift_shadow *s = cls;
    relay *r = *ctx;
    if (!r) {
        r = calloc(1, sizeof *r);
        if (!r) return MHD_NO;
        r->s = s;
        r->refs = 1;
        r->api = -1;
        r->content_length = -1;
        pthread_mutex_init(&r->mu, NULL);
        pthread_cond_init(&r->cv, NULL);
        *ctx = r;
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > s->o.max_body_bytes) r->too_big = 1;
        return MHD_YES;
    }
    if (*upload_size) {
        if (!r->too_big && r->body.len + *upload_size > s->o.max_body_bytes) r->too_big = 1;
        if (!r->too_big && buf_append(&r->body, upload, *upload_size)) r->too_big = 1;
        *upload_size = 0;
        return MHD_YES;
    }
    if (r->too_big) {
        char m[96];
        snprintf(m, sizeof m, "the request body is over the limit of %zu bytes", s->o.max_body_bytes);
        return reply_error(c, 413, "request_too_large", m);
    }
    if (!strcmp(url, "/health") && !strcmp(method, "GET")) {
        pthread_mutex_lock(&s->mu);
        int dr = s->draining;
        pthread_mutex_unlock(&s->mu);
        return reply_text(c, dr ? 503 : 200, "application/json",
                          dr ? "{\"status\":\"stopping\"}" : "{\"status\":\"ok\"}");
    }
    if (!strcmp(url, "/metrics") && !strcmp(method, "GET")) {
        char *m = shd_metrics(s);
        enum MHD_Result rc = m ? reply_text(c, 200, DRIFT_PROM_CONTENT_TYPE, m)
                               : reply_error(c, 500, "metrics_failed", "rendering the metrics failed");
        free(m);
        return rc;
    }
    if (strncmp(url, "/v1/", 4) || strstr(url, ".."))
        return reply_error(c, 404, "not_found", "the shadow proxy relays /v1/ paths only");
    if (!strcmp(method, "POST") && !strcmp(url, "/v1/chat/completions")) r->api = DRIFT_API_CHAT;
    else if (!strcmp(method, "POST") && !strcmp(url, "/v1/completions")) r->api = DRIFT_API_COMPLETIONS;
    r->keep_copy = r->api >= 0 && drift_shadow_sampled(r->body.data ? r->body.data : "", r->body.len, s->o.sample);
    r->url = util_asprintf("%s%s", s->primary_base, url + 3);
    r->method = util_strdup(method);
    if (!r->url || !r->method) return MHD_NO;
    return proxy(s, c, r);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **ctx, enum MHD_RequestTerminationCode toe) {
    (void)cls, (void)c, (void)toe;
    relay *r = *ctx;
    if (r) relay_unref(r);
    *ctx = NULL;
}

drift_status shd_httpd_start(drift_shadow *s, drift_error *err) {
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)s->o.port);
    const char *host = s->listen_host;
    if (!strcmp(host, "localhost")) host = "127.0.0.1";
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1)
        return drift_error_set(err, DRIFT_ERR_INVALID, "listen address '%s' is not an IPv4 address", host);
    unsigned idle = (unsigned)(s->o.idle_timeout_s + 0.999);
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC, 0, NULL, NULL, on_request, s,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr, MHD_OPTION_CONNECTION_LIMIT, (unsigned)s->o.max_connections,
        MHD_OPTION_CONNECTION_TIMEOUT, idle < 1 ? 1u : idle, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)64 * 1024, MHD_OPTION_END);
    if (!d) return drift_error_set(err, DRIFT_ERR_IO, "cannot listen on %s:%d (in use?)", host, s->o.port);
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : s->o.port;
    s->httpd = d;
    return DRIFT_OK;
}

void shd_httpd_stop(drift_shadow *s) {
    if (!s->httpd) return;
    pthread_mutex_lock(&s->mu);
    s->draining = 1;
    double until = util_now_ms() + s->o.drain_timeout_s * 1000;
    while (s->stats.in_flight && util_now_ms() < until) {
        struct timespec ts;
        util_abstime_in_ms(&ts, 100);
        pthread_cond_timedwait(&s->cv_idle, &s->mu, &ts);
    }
    /* what still runs is cut (its client gets a cut reply) */
    __atomic_store_n(&s->abort_upstream, 1, __ATOMIC_SEQ_CST);
    while (s->stats.in_flight) pthread_cond_wait(&s->cv_idle, &s->mu);
    s->relay_stop = 1; /* the idle relay threads end */
    pthread_cond_broadcast(&s->cv_relay);
    while (s->relay_threads) pthread_cond_wait(&s->cv_idle, &s->mu);
    pthread_mutex_unlock(&s->mu);
    MHD_stop_daemon(s->httpd);
    s->httpd = NULL;
    while (s->n_pool) curl_easy_cleanup(s->pool[--s->n_pool]);
}
