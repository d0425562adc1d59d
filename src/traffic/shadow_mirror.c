/* shadow_mirror.c - the shadow proxy's mirror workers (o.mirror_connections
 * threads, each with its own candidate target):
 *
 *   workers: item ──drift_target_send_raw──> candidate ──job──> writer
 *
 * A worker takes the restart backlog before the mirror queue; an item
 * cancelled by a stop is counted and mirrored again at the next start. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/traffic.h"
#include "traffic/shadow_internal.h"

static int cancel_mirror(void *user) {
    drift_shadow *s = user;
    pthread_mutex_lock(&s->mu);
    int c = s->stop_mirror;
    pthread_mutex_unlock(&s->mu);
    return c;
}

/* The body the candidate gets: the request as the primary got it, but
 * stream false (stream_options dropped) and the candidate spec's model. */
static char *candidate_body(const drift_shadow *s, const char *request) {
    json_t *r = json_loads(request, 0, NULL);
    if (!r) return NULL;
    if (json_object_get(r, "stream")) json_object_set_new(r, "stream", json_false());
    json_object_del(r, "stream_options");
    if (s->candidate_model) json_object_set_new(r, "model", json_string(s->candidate_model));
    char *b = json_dumps(r, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(r);
    return b;
}

typedef struct got {
    drift_answer a;
    int have;
} got;

static int on_candidate(void *user, const drift_gen_request *req, drift_answer *res) {
    (void)req;
    got *g = user;
    g->a = *res;
    memset(res, 0, sizeof *res);
    drift_answer_clear(res);
    g->have = 1;
    return 0;
}

void *shd_mirror_main(void *arg) {
    drift_shadow *s = arg;
    drift_target_opts to = s->o.candidate_opts;
    to.concurrency = 1;
    to.cancel = cancel_mirror;
    to.cancel_user = s;
    drift_target *t = NULL;
    drift_error e = {0};
    if (drift_target_open(s->candidate_spec, &to, &t, &e)) {
        shd_set_last_error(s, &e);
        return NULL;
    }
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (!s->backlog_head && !s->ring_head && !s->stop_mirror) pthread_cond_wait(&s->cv_work, &s->mu);
        if (s->stop_mirror) {
            pthread_mutex_unlock(&s->mu);
            break;
        }
        shd_item *it;
        if (s->backlog_head) {
            it = s->backlog_head;
            s->backlog_head = it->next;
            if (!s->backlog_head) s->backlog_tail = NULL;
            s->backlog_n--;
        } else {
            it = s->ring_head;
            s->ring_head = it->next;
            if (!s->ring_head) s->ring_tail = NULL;
            s->ring_n--;
        }
        it->next = NULL;
        s->at_workers++;
        pthread_mutex_unlock(&s->mu);

        got g = {0};
        drift_answer_clear(&g.a);
        char *body = candidate_body(s, it->request);
        drift_status rc = DRIFT_OK;
        if (body) {
            drift_gen_request rq = {.index = 0, .prompt = body, .replicate = 0};
            rc = drift_target_send_raw(t, &rq, 1, on_candidate, &g, &e);
        } else {
            g.a.error = util_strdup("the request could not be prepared for the candidate");
            g.a.cause = DRIFT_FAIL_REQUEST;
            g.have = 1;
        }
        free(body);
        if (!g.have) { /* cancelled (a stop) or the target failed as a whole: mirrored again at the next start */
            if (rc != DRIFT_ERR_CANCELLED) shd_set_last_error(s, &e);
            pthread_mutex_lock(&s->mu);
            s->left_cancelled++;
            s->at_workers--;
            pthread_mutex_unlock(&s->mu);
            shd_item_free(it);
            continue;
        }
        if (!g.a.error) {
            char *msg = NULL;
            drift_error pe = {0};
            if (drift_traffic_reply_message(g.a.text, &msg, &pe)) {
                g.a.error = util_asprintf("reply is not a chat message: %s", pe.msg);
                g.a.cause = DRIFT_FAIL_REPLY;
            }
            free(g.a.text);
            g.a.text = msg;
        }
        free(g.a.logprobs_json);
        g.a.logprobs_json = NULL;
        shd_job *j = calloc(1, sizeof *j);
        if (!j) {
            drift_answer_clear(&g.a);
            shd_item_free(it);
            pthread_mutex_lock(&s->mu);
            s->at_workers--;
            pthread_mutex_unlock(&s->mu);
            continue;
        }
        j->kind = SHD_JOB_CANDIDATE;
        j->ans = g.a;
        j->item = it;
        pthread_mutex_lock(&s->mu);
        s->at_workers--;
        shd_push_job_locked(s, j);
        pthread_mutex_unlock(&s->mu);
    }
    drift_target_close(t);
    return NULL;
}
