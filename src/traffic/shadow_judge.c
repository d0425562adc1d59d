/* shadow_judge.c - the shadow proxy's live judge (shadow.h): a streaming
 * judge (traffic_stream.h) wired into the proxy's callbacks.
 *
 *   writer thread ──on_pair──> [mutex] drift_traffic_stream_add ──events──> log
 *   /metrics (a connection thread) ──metrics_extra──> [mutex] write_prom
 *
 * While the proxy starts (replay_stored), the pairs the store holds come
 * through on_pair first; replaying is 1 until drift_shadow_judge_resumed,
 * and a stored hash is counted as unjudged rather than judged. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "driftbench/shadow.h"
#include "driftbench/traffic_privacy.h"
#include "driftbench/traffic_stream.h"
#include "util/util.h"

struct drift_shadow_judge {
    pthread_mutex_t mu;
    drift_traffic_stream *stream;
    void (*log)(void *log_user, const char *line);
    void *log_user;
    int replaying;       /* 1 while the stored pairs are re-added at start */
    long unjudged;       /* pairs the judge refused (stored as hashes, or an error) */
    char last_err[256];
};

drift_status drift_shadow_judge_new(const drift_traffic_opts *stats, double alpha, drift_guard *guard,
                                    drift_embedder *emb, void (*log)(void *log_user, const char *line),
                                    void *log_user, drift_shadow_judge **out, drift_error *err) {
    *out = NULL;
    drift_shadow_judge *j = calloc(1, sizeof *j);
    if (!j) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    drift_status rc = drift_traffic_stream_new(stats, alpha, guard, emb, &j->stream, err);
    if (rc) {
        free(j);
        return rc;
    }
    pthread_mutex_init(&j->mu, NULL);
    j->log = log;
    j->log_user = log_user;
    j->replaying = 1;
    *out = j;
    return DRIFT_OK;
}

static void judge_pair(void *user, const char *request_json, const char *pm, const char *cm, int pe, int ce,
                       int comparable) {
    drift_shadow_judge *j = user;
    drift_error e = {0};
    pthread_mutex_lock(&j->mu);
    if (j->replaying && (drift_traffic_privacy_is_hash(request_json ? request_json : "") ||
                         (pm && drift_traffic_privacy_is_hash(pm)) || (cm && drift_traffic_privacy_is_hash(cm)))) {
        j->unjudged++;
        pthread_mutex_unlock(&j->mu);
        return;
    }
    /* a request error is left out where a class applies, never a flip */
    if (drift_traffic_stream_add(j->stream, request_json, pm, cm, pe, ce, comparable, 0, NULL, &e)) {
        j->unjudged++;
        snprintf(j->last_err, sizeof j->last_err, "%s", e.msg);
    } else {
        size_t n = 0;
        const drift_traffic_stream_event *ev = drift_traffic_stream_events(j->stream, &n);
        for (size_t i = 0; i < n && j->log; i++) {
            drift_buf b = {0};
            if (!drift_traffic_stream_describe_event(j->stream, &ev[i], &b)) {
                const char *d = b.data ? b.data : "";
                char *line = j->replaying ? util_asprintf("(stored pairs) %s", d) : NULL;
                j->log(j->log_user, line ? line : d);
                free(line);
            }
            drift_buf_free(&b);
        }
    }
    pthread_mutex_unlock(&j->mu);
}

static int judge_metrics(void *user, drift_prom *p) {
    drift_shadow_judge *j = user;
    drift_error e = {0};
    pthread_mutex_lock(&j->mu);
    drift_status rc = drift_traffic_stream_write_prom(j->stream, p, &e);
    pthread_mutex_unlock(&j->mu);
    return rc ? -1 : 0;
}

void drift_shadow_judge_attach(drift_shadow_judge *j, drift_shadow_opts *o) {
    o->on_pair = judge_pair;
    o->metrics_extra = judge_metrics;
    o->user = j;
    o->replay_stored = 1;
}

void drift_shadow_judge_resumed(drift_shadow_judge *j) {
    pthread_mutex_lock(&j->mu);
    j->replaying = 0;
    long rejudged = (long)drift_traffic_stream_pairs(j->stream), unjudged = j->unjudged;
    char *l1 = rejudged ? util_asprintf("the judge resumed from %ld stored pair(s)", rejudged) : NULL;
    char *l2 = unjudged ? util_asprintf("%ld stored pair(s) could not be judged again (stored as hashes, or: %s); "
                                        "the judge counts them no more",
                                        unjudged, j->last_err[0] ? j->last_err : "none other")
                        : NULL;
    pthread_mutex_unlock(&j->mu);
    if (l1 && j->log) j->log(j->log_user, l1);
    if (l2 && j->log) j->log(j->log_user, l2);
    free(l1);
    free(l2);
}

void drift_shadow_judge_free(drift_shadow_judge *j) {
    if (!j) return;
    drift_traffic_stream_free(j->stream);
    pthread_mutex_destroy(&j->mu);
    free(j);
}
