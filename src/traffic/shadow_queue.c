/* shadow_queue.c - what a relay thread hands on once the primary answered
 * a mirrorable request (shd_primary_done), and the queues' items and jobs.
 *
 *   relay thread ──shd_primary_done──> [sample, reserve a mirror slot] ──job──> writer
 *
 * The relay thread only counts and links a job under the mutex: a full
 * mirror queue (or a writer behind by a queue's worth) drops the mirror,
 * counted, and the request is neither stored nor mirrored; it never blocks
 * on the candidate (shadow_writer.c stores, shadow_mirror.c mirrors). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/traffic.h"
#include "traffic/shadow_internal.h"

void shd_item_free(shd_item *it) {
    if (!it) return;
    free(it->request);
    free(it->primary_msg);
    free(it);
}

void shd_job_free(shd_job *j) {
    if (!j) return;
    free(j->request);
    drift_answer_clear(&j->ans);
    shd_item_free(j->item);
    free(j);
}

void shd_push_job_locked(drift_shadow *s, shd_job *j) {
    j->next = NULL;
    if (s->jobs_tail) s->jobs_tail->next = j;
    else s->jobs_head = j;
    s->jobs_tail = j;
    s->jobs_n++;
    if (j->kind == SHD_JOB_PRIMARY) s->jobs_primary++;
    pthread_cond_signal(&s->cv_writer);
}

/* ---- after the primary answered (a relay thread) ---- */

static char *canonical(const char *body, size_t len) {
    json_t *r = json_loadb(body, len, 0, NULL);
    char *c = json_is_object(r) ? json_dumps(r, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(r);
    return c;
}

/* The primary's reply in the message form: *msg, or *why (static or malloc'd into whybuf). */
static int primary_message(const char *ctype, const char *reply, size_t len, char **msg, char *why, size_t cap) {
    char *whole = NULL;
    drift_error e = {0};
    int sse = ctype && !strncmp(ctype, "text/event-stream", 17);
    if (sse && drift_shadow_sse_reassemble(reply, len, &whole, &e)) {
        snprintf(why, cap, "the primary's stream: %s", e.msg);
        return -1;
    }
    char *own = whole ? NULL : util_strndup(reply, len);
    drift_status rc = drift_traffic_reply_message(whole ? whole : own, msg, &e);
    free(whole);
    free(own);
    if (rc) {
        snprintf(why, cap, "the primary's reply is not a chat message: %s", e.msg);
        return -1;
    }
    return 0;
}

void shd_primary_done(drift_shadow *s, drift_api api, const char *body, size_t len, long status, const char *ctype,
                      const char *reply, size_t reply_len, int reply_over, const char *transfer_error,
                      double latency_ms) {
    int ok = status >= 200 && status < 300 && !transfer_error;
    pthread_mutex_lock(&s->mu);
    if (!ok) s->stats.primary_errors++;
    pthread_mutex_unlock(&s->mu);
    if (!drift_shadow_sampled(body, len, s->o.sample)) {
        pthread_mutex_lock(&s->mu);
        s->stats.sampled_out++;
        pthread_mutex_unlock(&s->mu);
        return;
    }
    char *req = canonical(body, len);
    if (!req || api != s->candidate_api) { /* not mirrorable */
        free(req);
        pthread_mutex_lock(&s->mu);
        s->stats.skipped_other++;
        pthread_mutex_unlock(&s->mu);
        return;
    }
    int comparable = drift_shadow_comparable(req);
    if (s->o.only_deterministic && !comparable) {
        free(req);
        pthread_mutex_lock(&s->mu);
        s->stats.skipped_not_comparable++;
        pthread_mutex_unlock(&s->mu);
        return;
    }
    if (ok && reply_over) { /* relayed whole; too long to keep for the store */
        free(req);
        pthread_mutex_lock(&s->mu);
        s->stats.dropped_reply_too_large++;
        pthread_mutex_unlock(&s->mu);
        return;
    }
    shd_job *j = calloc(1, sizeof *j);
    if (!j) {
        free(req);
        return;
    }
    j->kind = SHD_JOB_PRIMARY;
    j->request = req;
    j->comparable = comparable;
    drift_answer_clear(&j->ans);
    j->ans.latency_ms = latency_ms;
    j->ans.http_status = (int)status;
    j->ans.attempts = 1;
    char why[600];
    if (ok && primary_message(ctype, reply ? reply : "", reply_len, &j->ans.text, why, sizeof why)) {
        ok = 0;
        j->ans.error = util_strdup(why);
        j->ans.cause = DRIFT_FAIL_REPLY;
    } else if (!ok) {
        if (transfer_error) {
            j->ans.error = util_asprintf("the primary did not answer: %s", transfer_error);
            j->ans.cause = DRIFT_FAIL_CONNECT;
        } else {
            j->ans.error = util_asprintf("HTTP %ld: %.300s", status, reply ? reply : "");
            j->ans.cause = DRIFT_FAIL_HTTP;
        }
    }
    pthread_mutex_lock(&s->mu);
    size_t cap = (size_t)s->o.queue;
    if (s->stop_writer) {
        shd_job_free(j);
        j = NULL;
    } else if (ok && s->ring_n + s->reserved >= cap) {
        s->stats.dropped_queue_full++;
        shd_job_free(j);
        j = NULL;
    } else if (s->jobs_primary >= cap) {
        s->stats.dropped_store_busy++;
        shd_job_free(j);
        j = NULL;
    } else {
        if (ok) {
            j->reserved = 1;
            s->reserved++;
        }
        shd_push_job_locked(s, j);
    }
    pthread_mutex_unlock(&s->mu);
}

void shd_observe_added(drift_shadow *s, double seconds) {
    pthread_mutex_lock(&s->mu);
    drift_prom_hist_observe(&s->added, seconds < 0 ? 0 : seconds);
    pthread_mutex_unlock(&s->mu);
}
