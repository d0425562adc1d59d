/* server.c - the OpenAI-compatible server over the embedded engine: its
 * public API (server.h) and life cycle.
 *
 *   client --HTTP--> server_httpd.c (libmicrohttpd, one thread per
 *        connection; limits, request deadline, departed clients)
 *     -> server_endpoints.c (route; parse + validate in server_request.c;
 *        check the model, tokenize, check the context; queue a job, wait;
 *        render in server_reply.c)
 *   server_scheduler.c: one thread owns all engine calls and decodes the
 *        queued jobs that share decoding parameters together
 *
 * Start: options checked, profile resolved, model loaded, scheduler thread,
 * then the daemon. Shutdown (drift_server_drain): stop listening, refuse new
 * requests with 503, let the scheduler work until the queue is empty and the
 * replies are sent or the drain deadline passes; past it, cancel everything
 * still queued or decoding (503 to those clients), give the replies up to a
 * second, stop the daemon, the reaper and the scheduler. One uninterruptible
 * step (a prefill, an embedding) may still finish first. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "driftbench/model.h"
#include "driftbench/server.h"
#include "server/server_internal.h"
#include "util/util.h"

void drift_server_opts_default(drift_server_opts *o) {
    memset(o, 0, sizeof *o);
    o->host = "127.0.0.1";
    o->max_batch = 8;
    o->batch_invariant = 1;
    o->max_body_bytes = (size_t)1 << 20;
    o->max_connections = 128;
    o->per_client_connections = 64;
    o->request_timeout_s = 10;
    o->max_queue = 256;
    o->max_n = 16;
    o->max_tokens_limit = 65536;
}

static char *file_stem(const char *path) {
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    const char *dot = strrchr(b, '.');
    return util_strndup(b, dot && dot != b ? (size_t)(dot - b) : strlen(b));
}

/* Profile from a name or a spec, with the server's overrides. */
static drift_status server_profile(const drift_server_opts *o, drift_numeric_profile *p, drift_error *err) {
    const char *spec = o->profile && *o->profile ? o->profile : "cpu-f32";
    drift_status st = strchr(spec, '=') ? drift_profile_parse(spec, p, err) : drift_profile_get(spec, p, err);
    if (st) return drift_error_prefix(err, "--profile: ");
    /* a setting the profile already has keeps its name (set, it would read
     * "custom" in /v1/driftbench/info); threads never change results
     * (profile.h), so they are set without renaming it */
    if (p->batch_invariant != (o->batch_invariant != 0) &&
        (st = drift_profile_set(p, "batch_invariant", o->batch_invariant ? "1" : "0", err)))
        return st;
    if (o->threads > 1024) return drift_error_set(err, DRIFT_ERR_INVALID, "--threads %d: at most 1024", o->threads);
    if (o->threads > 0) p->threads = o->threads;
    return drift_profile_validate(p, err);
}

static void server_free(drift_server *s) {
    if (!s) return;
    if (s->m) drift_model_free(s->m);
    free(s->name);
    free(s->alias);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv_sched);
    pthread_cond_destroy(&s->cv_done);
    pthread_cond_destroy(&s->cv_reap);
    free(s);
}

drift_status drift_server_start(const drift_server_opts *o, drift_server **out, drift_error *err) {
    *out = NULL;
    if (!o || !o->model_path) return drift_error_set(err, DRIFT_ERR_INVALID, "server: no model path");
    if (o->max_batch < 1 || o->max_batch > 4096 || o->max_queue < 1 || o->max_connections < 1 ||
        o->max_connections > 65536 || o->per_client_connections < 1 || o->max_n < 1 || o->max_tokens_limit < 1 ||
        o->max_body_bytes < 64 || o->port < 0 || o->port > 65535 || !(o->request_timeout_s > 0) ||
        o->request_timeout_s > 86400)
        return drift_error_set(err, DRIFT_ERR_INVALID,
                               "server: an option is out of range (max_batch 1..4096, max_queue/max_n/max_tokens_limit/"
                               "per_client_connections >= 1, max_connections 1..65536, max_body_bytes >= 64, "
                               "request_timeout_s in (0, 86400], port 0..65535)");
    drift_server *s = calloc(1, sizeof *s);
    if (!s) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    s->o = *o;
    if (s->o.per_client_connections > s->o.max_connections) s->o.per_client_connections = s->o.max_connections;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv_sched, NULL);
    pthread_cond_init(&s->cv_done, NULL);
    pthread_cond_init(&s->cv_reap, NULL);
    s->lim.max_n = o->max_n;
    s->lim.max_tokens_limit = o->max_tokens_limit;
    drift_numeric_profile p;
    drift_status st = server_profile(o, &p, err);
    if (!st) st = drift_model_load(o->model_path, &p, &s->m, err);
    if (st) {
        server_free(s);
        return st;
    }
    s->info = drift_model_get_info(s->m);
    s->name = o->model_name && *o->model_name ? util_strdup(o->model_name) : file_stem(o->model_path);
    s->alias = util_strdup(s->info->name);
    if (!s->name || !s->alias) {
        server_free(s);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    if (srv_sched_start(s)) {
        server_free(s);
        return drift_error_set(err, DRIFT_ERR_INTERNAL, "server: cannot start the scheduler thread");
    }
    if ((st = srv_httpd_start(s, err))) {
        srv_sched_stop(s);
        server_free(s);
        return st;
    }
    *out = s;
    return DRIFT_OK;
}

int drift_server_port(const drift_server *s) { return s ? s->port : 0; }

const char *drift_server_model_name(const drift_server *s) { return s ? s->name : NULL; }

void drift_server_get_stats(drift_server *s, drift_server_stats *out) {
    pthread_mutex_lock(&s->mu);
    *out = s->stats;
    pthread_mutex_unlock(&s->mu);
}

void srv_cond_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, double ms) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long long ns = ts.tv_nsec + (long long)(ms * 1e6);
    ts.tv_sec += (time_t)(ns / 1000000000LL);
    ts.tv_nsec = (long)(ns % 1000000000LL);
    pthread_cond_timedwait(cv, mu, &ts);
}

void srv_thread_stop(drift_server *s, pthread_t t, int *flag, pthread_cond_t *cv) {
    pthread_mutex_lock(&s->mu);
    *flag = 1;
    pthread_cond_broadcast(cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(t, NULL);
}

/* Waits on cv_done (under mu) until cond() is false or until_ms passes. */
static void wait_until(drift_server *s, double until_ms, int (*cond)(const drift_server *)) {
    while (cond(s) && util_now_ms() < until_ms) srv_cond_wait_ms(&s->cv_done, &s->mu, 20);
}

static int work_left(const drift_server *s) { return s->active > 0 || s->head; }

static int replies_left(const drift_server *s) { return s->active > 0; }

void drift_server_drain(drift_server *s, double drain_timeout_s) {
    if (!s || s->drained) return;
    srv_httpd_quiesce(s); /* no new connections */
    pthread_mutex_lock(&s->mu);
    s->draining = 1;
    /* requests already received finish: the scheduler keeps running */
    wait_until(s, util_now_ms() + (drain_timeout_s > 0 ? drain_timeout_s : 0) * 1000, work_left);
    if (work_left(s)) { /* deadline: cancel what is queued or decoding */
        s->abort = 1;
        srv_sched_cancel_queued(s);
        pthread_cond_broadcast(&s->cv_done);
        wait_until(s, util_now_ms() + 1000, replies_left); /* the 503s go out */
    }
    pthread_mutex_unlock(&s->mu);
    srv_httpd_stop(s); /* closes every connection, joins their threads */
    srv_sched_stop(s);
    s->drained = 1;
}

void drift_server_stop(drift_server *s, double drain_timeout_s) {
    if (!s) return;
    drift_server_drain(s, drain_timeout_s);
    server_free(s);
}
