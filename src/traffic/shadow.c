/* shadow.c - the shadow proxy's core (shadow.h): what happens to a request
 * after the primary answered it, off the client's path.
 *
 *   relay thread ──shd_primary_done──> [sample, reserve a mirror slot] ──job──> writer
 *   writer: store prompt + primary answer ──item──> mirror queue (bounded)
 *   workers: item ──drift_target_send_raw──> candidate ──job──> writer
 *   writer: store candidate answer, count, on_pair
 *
 * The relay thread only counts and links a job under the mutex: a full
 * mirror queue (or a writer behind by a queue's worth) drops the mirror,
 * counted, and the request is neither stored nor mirrored. The writer is
 * the only thread that touches the store (a store handle is not
 * thread-safe) and stores in batches (one transaction per batch per kind;
 * each answer is committed before the next batch is taken). A pair whose
 * primary answer is stored and whose candidate row is not (a stop, a kill)
 * is found at the next start and mirrored again: the restart backlog,
 * which the workers take before the queue and which is never dropped
 * (shadow_pairs.c walks the stored pairs). With a retention, the writer
 * also applies it every period, between two batches. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "driftbench/traffic.h"
#include "suite/prompt.h"
#include "traffic/shadow_internal.h"

#define WRITER_BATCH 64

void drift_shadow_opts_default(drift_shadow_opts *o) {
    memset(o, 0, sizeof *o);
    o->listen_host = "127.0.0.1";
    o->name = "default";
    o->primary_label = "shadow-primary";
    o->candidate_label = "shadow-candidate";
    o->sample = 1.0;
    o->queue = 64;
    o->mirror_connections = 4;
    o->max_body_bytes = (size_t)4 << 20;
    o->max_store_reply_bytes = (size_t)8 << 20;
    o->max_connections = 256;
    o->idle_timeout_s = 60;
    o->primary_timeout_s = 600;
    o->drain_timeout_s = 30;
    o->retention_period_s = 3600;
    drift_target_opts_default(&o->candidate_opts);
    o->candidate_opts.max_retries = 1;
}

static void item_free(shd_item *it) {
    if (!it) return;
    free(it->request);
    free(it->primary_msg);
    free(it);
}

static void job_free(shd_job *j) {
    if (!j) return;
    free(j->request);
    drift_answer_clear(&j->ans);
    item_free(j->item);
    free(j);
}

static void set_last_error(drift_shadow *s, const drift_error *e) {
    pthread_mutex_lock(&s->mu);
    snprintf(s->last_error, sizeof s->last_error, "%s", e->msg);
    snprintf(s->stats.last_error, sizeof s->stats.last_error, "%s", e->msg);
    s->stats.store_errors++;
    pthread_mutex_unlock(&s->mu);
}

/* Under s->mu. */
static void push_job_locked(drift_shadow *s, shd_job *j) {
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
        job_free(j);
        j = NULL;
    } else if (ok && s->ring_n + s->reserved >= cap) {
        s->stats.dropped_queue_full++;
        job_free(j);
        j = NULL;
    } else if (s->jobs_primary >= cap) {
        s->stats.dropped_store_busy++;
        job_free(j);
        j = NULL;
    } else {
        if (ok) {
            j->reserved = 1;
            s->reserved++;
        }
        push_job_locked(s, j);
    }
    pthread_mutex_unlock(&s->mu);
}

void shd_observe_added(drift_shadow *s, double seconds) {
    pthread_mutex_lock(&s->mu);
    drift_prom_hist_observe(&s->added, seconds < 0 ? 0 : seconds);
    pthread_mutex_unlock(&s->mu);
}

/* ---- the writer ---- */

void shd_call_pair(drift_shadow *s, const char *req, const char *pm, const char *cm, int pe, int ce, int comp) {
    if (s->o.on_pair) s->o.on_pair(s->o.user, req, pm, cm, pe, ce, comp);
}

static void write_primaries(drift_shadow *s, shd_job **jobs, size_t n) {
    drift_prompt *pr = calloc(n, sizeof *pr);
    int64_t *rowids = calloc(n, sizeof *rowids);
    drift_answer *ans = calloc(n, sizeof *ans);
    char (*ids)[48] = calloc(n, sizeof *ids);
    char **stored_req = calloc(n, sizeof *stored_req), **stored_msg = calloc(n, sizeof *stored_msg);
    drift_error e = {0};
    int failed = !pr || !rowids || !ans || !ids || !stored_req || !stored_msg;
    if (failed) snprintf(e.msg, sizeof e.msg, "out of memory");
    for (size_t i = 0; !failed && i < n; i++) {
        snprintf(ids[i], sizeof ids[i], "%013.0f-%08llu", s->start_wall_ms, (unsigned long long)++s->next_id);
        pr[i].prompt_id = ids[i];
        pr[i].workload = DRIFT_WL_CHAT;
        pr[i].input = jobs[i]->request;
        if (!drift_traffic_privacy_is_full(s->o.privacy)) {
            if (drift_traffic_privacy_apply(s->o.privacy, jobs[i]->request, &stored_req[i], NULL, &e)) failed = 1;
            else pr[i].input = stored_req[i];
            if (!failed && jobs[i]->ans.text &&
                drift_traffic_privacy_apply(s->o.privacy, jobs[i]->ans.text, &stored_msg[i], NULL, &e))
                failed = 1;
        }
        pr[i].reference_json = "{}";
        pr[i].hash = suite_prompt_hash(DRIFT_WL_CHAT, pr[i].input, "{}", SUITE_HASH_NUL);
        if (!pr[i].hash) failed = 1;
    }
    if (!failed) {
        drift_suite suite = {.name = s->suite, .source = "shadow", .format = "shadow", .prompts = pr, .n = n};
        failed = drift_store_put_prompts(s->st, &suite, rowids, &e) != DRIFT_OK;
    }
    if (!failed) {
        for (size_t i = 0; i < n; i++) {
            ans[i] = jobs[i]->ans; /* shallow: the job keeps owning its strings */
            if (stored_msg[i]) ans[i].text = stored_msg[i];
            ans[i].prompt_rowid = rowids[i];
            ans[i].replicate = 0;
            ans[i].id = 0;
        }
        failed = drift_store_put_responses(s->st, s->run_primary, ans, n, &e) != DRIFT_OK;
    }
    if (failed) set_last_error(s, &e);
    for (size_t i = 0; i < n; i++) {
        shd_job *j = jobs[i];
        shd_item *it = NULL;
        if (!failed && j->reserved && (it = calloc(1, sizeof *it))) {
            it->prompt_rowid = rowids[i];
            it->request = j->request;
            it->primary_msg = j->ans.text;
            it->comparable = j->comparable;
            j->request = NULL;
            j->ans.text = NULL;
        }
        pthread_mutex_lock(&s->mu);
        if (j->reserved) s->reserved--;
        if (it) {
            if (s->ring_tail) s->ring_tail->next = it;
            else s->ring_head = it;
            s->ring_tail = it;
            s->ring_n++;
            s->stats.mirrored++;
            pthread_cond_signal(&s->cv_work);
        } else if (!failed && !j->reserved) {
            s->stats.primary_error_pairs++;
        }
        pthread_mutex_unlock(&s->mu);
        if (!failed && !j->reserved) shd_call_pair(s, j->request, NULL, NULL, 1, 0, j->comparable);
        job_free(j);
        if (pr) free(pr[i].hash);
        if (stored_req) free(stored_req[i]);
        if (stored_msg) free(stored_msg[i]);
    }
    free(stored_req);
    free(stored_msg);
    free(pr);
    free(rowids);
    free(ans);
    free(ids);
}

/* A candidate error stored: on_mirror_error, and the log for the 1st,
 * 10th, 100th, ... (every error stays in /metrics and the store). */
static void say_mirror_error(drift_shadow *s, const char *error, uint64_t n) {
    if (s->o.on_mirror_error) s->o.on_mirror_error(s->o.user, error, n);
    uint64_t k = n;
    while (k >= 10 && k % 10 == 0) k /= 10;
    if (k != 1 || !s->o.log) return;
    char *line = util_asprintf("the candidate failed a mirrored request (%llu so far; an error pair, never a flip): "
                               "%.300s",
                               (unsigned long long)n, error ? error : "(no text)");
    if (line) s->o.log(s->o.log_user, line);
    free(line);
}

/* The retention (o.retention) applied to both runs, counted, and said when
 * it deleted answers; from drift_shadow_start, then from the writer only.
 * pending: pairs whose candidate answer may still come (queued, at a worker,
 * in the writer's queue): a count limit keeps that many more primaries, so
 * that a waiting pair's primary answer and request stay for its candidate
 * row (an age limit cannot know: docs/shadow.md, Limits). */
static drift_status apply_retention(drift_shadow *s, size_t pending, drift_error *err) {
    const char *labels[2] = {s->primary_label, s->candidate_label};
    int64_t deleted = 0, d = 0, keep = s->retention_keep_newest;
    double age = s->retention_max_age_s;
    drift_status rc;
    if (keep < 0) {
        rc = drift_traffic_retention_apply(s->st, labels, 2, age, -1, 0, &deleted, err);
    } else {
        rc = drift_traffic_retention_apply(s->st, labels, 1, age, keep + (int64_t)pending, 0, &deleted, err);
        if (!rc) rc = drift_traffic_retention_apply(s->st, labels + 1, 1, age, keep, 0, &d, err);
        deleted += d;
    }
    s->retention_next_ms = util_now_ms() + s->retention_period_ms;
    if (rc) return rc;
    pthread_mutex_lock(&s->mu);
    s->stats.retention_deleted += (uint64_t)deleted;
    s->stats.retention_runs++;
    pthread_mutex_unlock(&s->mu);
    if (s->o.log && (deleted || s->stats.retention_runs == 1)) {
        char *line = util_asprintf("retention %s: %lld stored answers deleted", s->o.retention, (long long)deleted);
        if (line) s->o.log(s->o.log_user, line);
        free(line);
    }
    return DRIFT_OK;
}

static void write_candidates(drift_shadow *s, shd_job **jobs, size_t n) {
    drift_answer *ans = calloc(n, sizeof *ans);
    char **stored_msg = calloc(n, sizeof *stored_msg);
    drift_error e = {0};
    int failed = !ans || !stored_msg;
    if (failed) snprintf(e.msg, sizeof e.msg, "out of memory");
    for (size_t i = 0; !failed && i < n; i++) {
        ans[i] = jobs[i]->ans;
        if (ans[i].text && !drift_traffic_privacy_is_full(s->o.privacy)) {
            if (drift_traffic_privacy_apply(s->o.privacy, ans[i].text, &stored_msg[i], NULL, &e)) failed = 1;
            else ans[i].text = stored_msg[i];
        }
        ans[i].prompt_rowid = jobs[i]->item->prompt_rowid;
        ans[i].replicate = 0;
        ans[i].id = 0;
    }
    if (!failed) failed = drift_store_put_responses(s->st, s->run_candidate, ans, n, &e) != DRIFT_OK;
    if (failed) set_last_error(s, &e);
    for (size_t i = 0; i < n; i++) {
        shd_job *j = jobs[i];
        int ce = j->ans.error != NULL;
        if (!failed) {
            uint64_t n_err = 0;
            pthread_mutex_lock(&s->mu);
            s->stats.pairs++;
            if (ce) n_err = ++s->stats.mirror_errors;
            else if (j->item->comparable) s->stats.compared++;
            else s->stats.not_comparable++;
            pthread_mutex_unlock(&s->mu);
            if (ce) say_mirror_error(s, j->ans.error, n_err);
            shd_call_pair(s, j->item->request, j->item->primary_msg, ce ? NULL : j->ans.text, 0, ce,
                          j->item->comparable);
        }
        job_free(j);
        if (stored_msg) free(stored_msg[i]);
    }
    free(stored_msg);
    free(ans);
}

static void *writer_main(void *arg) {
    drift_shadow *s = arg;
    shd_job *batch[WRITER_BATCH], *prim[WRITER_BATCH], *cand[WRITER_BATCH];
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (!s->jobs_head && !s->stop_writer) {
            if (!s->retention) {
                pthread_cond_wait(&s->cv_writer, &s->mu);
                continue;
            }
            double wait_ms = s->retention_next_ms - util_now_ms();
            if (wait_ms <= 0) break;
            struct timespec ts;
            util_abstime_in_ms(&ts, (long)wait_ms + 1);
            pthread_cond_timedwait(&s->cv_writer, &s->mu, &ts);
        }
        if (s->retention && !s->stop_writer && util_now_ms() >= s->retention_next_ms) { /* between two batches */
            size_t pending = s->ring_n + s->backlog_n + s->at_workers + (s->jobs_n - s->jobs_primary);
            pthread_mutex_unlock(&s->mu);
            drift_error e = {0};
            if (apply_retention(s, pending, &e)) set_last_error(s, &e); /* its messages say "retention" */
            continue;
        }
        size_t n = 0;
        while (s->jobs_head && n < WRITER_BATCH) {
            shd_job *j = s->jobs_head;
            s->jobs_head = j->next;
            if (!s->jobs_head) s->jobs_tail = NULL;
            s->jobs_n--;
            if (j->kind == SHD_JOB_PRIMARY) s->jobs_primary--;
            batch[n++] = j;
        }
        int stop = s->stop_writer && !n;
        pthread_mutex_unlock(&s->mu);
        if (stop) break;
        /* in order: a run of primaries, then a run of candidates, ... (a
         * candidate job never precedes its own primary's) */
        size_t i = 0;
        while (i < n) {
            size_t np = 0, nc = 0;
            while (i < n && batch[i]->kind == SHD_JOB_PRIMARY) prim[np++] = batch[i++];
            if (np) write_primaries(s, prim, np);
            while (i < n && batch[i]->kind == SHD_JOB_CANDIDATE) cand[nc++] = batch[i++];
            if (nc) write_candidates(s, cand, nc);
        }
    }
    return NULL;
}

/* ---- the mirror workers ---- */

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

static void *worker_main(void *arg) {
    drift_shadow *s = arg;
    drift_target_opts to = s->o.candidate_opts;
    to.concurrency = 1;
    to.cancel = cancel_mirror;
    to.cancel_user = s;
    drift_target *t = NULL;
    drift_error e = {0};
    if (drift_target_open(s->candidate_spec, &to, &t, &e)) {
        set_last_error(s, &e);
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
            if (rc != DRIFT_ERR_CANCELLED) set_last_error(s, &e);
            pthread_mutex_lock(&s->mu);
            s->left_cancelled++;
            s->at_workers--;
            pthread_mutex_unlock(&s->mu);
            item_free(it);
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
            item_free(it);
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
        push_job_locked(s, j);
        pthread_mutex_unlock(&s->mu);
    }
    drift_target_close(t);
    return NULL;
}

/* ---- start: the store, what it holds, the threads ---- */

/* The value of query parameter `key` in spec (malloc'd), NULL when absent. */
static char *spec_param(const char *spec, const char *key) {
    const char *q = strchr(spec, '?');
    size_t kl = strlen(key);
    while (q) {
        q++;
        if (!strncmp(q, key, kl) && q[kl] == '=') {
            const char *v = q + kl + 1;
            return util_strndup(v, strcspn(v, "&#"));
        }
        q = strchr(q, '&');
    }
    return NULL;
}

static int local_host(const char *url) {
    const char *h = strstr(url, "://");
    h = h ? h + 3 : url;
    const char *at = strchr(h, '@'), *slash = strchr(h, '/');
    if (at && (!slash || at < slash)) h = at + 1;
    return !strncmp(h, "localhost", 9) || !strncmp(h, "127.", 4) || !strncmp(h, "[::1]", 5);
}

static drift_status begin_run(drift_shadow *s, const char *label, const char *spec, int64_t *run_id,
                              drift_error *err) {
    drift_target *t = NULL;
    drift_target_opts to;
    drift_target_opts_default(&to);
    to.default_key_env = NULL;
    drift_status rc = drift_target_open(spec, &to, &t, err);
    if (rc) return rc;
    const char *cfg = drift_target_config_json(t);
    char *config = util_strdup(cfg ? cfg : "{}");
    drift_target_close(t);
    json_t *sj = json_pack("[s]", s->suite);
    char *suites = sj ? json_dumps(sj, JSON_COMPACT) : NULL;
    json_decref(sj);
    char version[64];
    snprintf(version, sizeof version, "driftbench %s", drift_version());
    drift_run_info info = {.label = (char *)label, .target = (char *)spec, .config_json = config,
                           .decoding_json = "{\"shadow\":\"as-requested\",\"stream\":false}",
                           .templates_json = "{}", .suites_json = suites, .tool_version = version};
    int resumed = 0;
    if (!config || !suites) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    else rc = drift_store_run_begin(s->st, &info, run_id, &resumed, err);
    free(config);
    free(suites);
    return rc;
}

static void shadow_free(drift_shadow *s) {
    if (!s) return;
    shd_item *it = s->ring_head;
    while (it) {
        shd_item *nx = it->next;
        item_free(it);
        it = nx;
    }
    it = s->backlog_head;
    while (it) {
        shd_item *nx = it->next;
        item_free(it);
        it = nx;
    }
    shd_job *j = s->jobs_head;
    while (j) {
        shd_job *nx = j->next;
        job_free(j);
        j = nx;
    }
    if (s->st) {
        if (s->run_primary) drift_store_run_unlock(s->st, s->primary_label, NULL);
        if (s->run_candidate) drift_store_run_unlock(s->st, s->candidate_label, NULL);
        drift_store_close(s->st);
    }
    free(s->listen_host);
    free(s->name);
    free(s->primary_label);
    free(s->candidate_label);
    free(s->primary_spec);
    free(s->candidate_spec);
    free(s->primary_base);
    free(s->primary_key);
    free(s->candidate_model);
    free(s->workers);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv_work);
    pthread_cond_destroy(&s->cv_writer);
    pthread_cond_destroy(&s->cv_idle);
    pthread_cond_destroy(&s->cv_relay);
    free(s);
}

static drift_status check_opts(const drift_shadow_opts *o, drift_error *err) {
    if (!o->primary_spec || !o->candidate_spec || !o->store_path)
        return drift_error_set(err, DRIFT_ERR_INVALID, "shadow: a primary, a candidate and a store are needed");
    if (strncmp(o->primary_spec, "http://", 7) && strncmp(o->primary_spec, "https://", 8))
        return drift_error_set(err, DRIFT_ERR_INVALID, "the primary must be an http(s) target, not '%.*s'",
                               (int)strcspn(o->primary_spec, ":?"), o->primary_spec);
    if (strncmp(o->candidate_spec, "http://", 7) && strncmp(o->candidate_spec, "https://", 8))
        return drift_error_set(err, DRIFT_ERR_INVALID, "the candidate must be an http(s) target");
    if (!(o->sample >= 0 && o->sample <= 1)) return drift_error_set(err, DRIFT_ERR_INVALID, "sample must be in [0,1]");
    if (o->queue < 1 || o->queue > 1000000)
        return drift_error_set(err, DRIFT_ERR_INVALID, "queue must be 1..1000000");
    if (o->mirror_connections < 1 || o->mirror_connections > 1024)
        return drift_error_set(err, DRIFT_ERR_INVALID, "mirror connections must be 1..1024");
    if (o->max_connections < 1) return drift_error_set(err, DRIFT_ERR_INVALID, "max connections must be >= 1");
    if (o->port < 0 || o->port > 65535) return drift_error_set(err, DRIFT_ERR_INVALID, "port must be 0..65535");
    if (!o->name || !*o->name) return drift_error_set(err, DRIFT_ERR_INVALID, "the name is empty");
    if (!(o->retention_period_s >= 0 && o->retention_period_s <= 31536000))
        return drift_error_set(err, DRIFT_ERR_INVALID, "the retention period must be 0..31536000 seconds");
    double age;
    int64_t keep;
    if (o->retention) return drift_traffic_retention_parse(o->retention, &age, &keep, err);
    return DRIFT_OK;
}

drift_status drift_shadow_start(const drift_shadow_opts *o, drift_shadow **out, drift_error *err) {
    *out = NULL;
    drift_status rc = check_opts(o, err);
    if (rc) return rc;
    drift_shadow *s = calloc(1, sizeof *s);
    if (!s) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv_work, NULL);
    pthread_cond_init(&s->cv_writer, NULL);
    pthread_cond_init(&s->cv_idle, NULL);
    pthread_cond_init(&s->cv_relay, NULL);
    s->o = *o;
    s->listen_host = util_strdup(o->listen_host ? o->listen_host : "127.0.0.1");
    s->name = util_strdup(o->name);
    s->primary_label = util_strdup(o->primary_label ? o->primary_label : "shadow-primary");
    s->candidate_label = util_strdup(o->candidate_label ? o->candidate_label : "shadow-candidate");
    s->primary_spec = util_strdup(o->primary_spec);
    s->candidate_spec = util_strdup(o->candidate_spec);
    s->primary_base = util_strndup(o->primary_spec, strcspn(o->primary_spec, "?#"));
    s->candidate_model = spec_param(o->candidate_spec, "model");
    s->retention = o->retention != NULL;
    if (s->retention) /* checked by check_opts */
        drift_traffic_retention_parse(o->retention, &s->retention_max_age_s, &s->retention_keep_newest, err);
    s->retention_period_ms = (o->retention_period_s > 0 ? o->retention_period_s : 3600) * 1000;
    if (!s->listen_host || !s->name || !s->primary_label || !s->candidate_label || !s->primary_spec ||
        !s->candidate_spec || !s->primary_base) {
        shadow_free(s);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    size_t bl = strlen(s->primary_base);
    while (bl && s->primary_base[bl - 1] == '/') s->primary_base[--bl] = 0;
    if (!strcmp(s->primary_label, s->candidate_label)) {
        shadow_free(s);
        return drift_error_set(err, DRIFT_ERR_INVALID, "the primary and candidate labels are the same");
    }
    /* the primary's key: the spec's api_key_env (for a client that sends no Authorization) */
    char *kenv = spec_param(o->primary_spec, "api_key_env");
    if (kenv) {
        const char *v = getenv(kenv);
        char *insecure = spec_param(o->primary_spec, "allow_insecure_key");
        int allow = insecure && !strcmp(insecure, "1");
        free(insecure);
        if (!v || !*v) rc = drift_error_set(err, DRIFT_ERR_INVALID, "the primary's api_key_env %s is not set", kenv);
        else if (!strncmp(s->primary_base, "http://", 7) && !local_host(s->primary_base) && !allow)
            rc = drift_error_set(err, DRIFT_ERR_INVALID,
                                 "the primary's key would go over plain http to another host "
                                 "(use https, or allow_insecure_key=1)");
        else s->primary_key = util_strdup(v);
        free(kenv);
        if (rc) {
            shadow_free(s);
            return rc;
        }
    }
    double bounds[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1};
    drift_prom_hist_init(&s->added, bounds, sizeof bounds / sizeof bounds[0], NULL);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    s->start_wall_ms = (double)ts.tv_sec * 1000.0 + (double)(ts.tv_nsec / 1000000);
    snprintf(s->suite, sizeof s->suite, "shadow:%s", s->name);

    /* the candidate's api, and its spec checked, before anything is stored */
    drift_target *ct = NULL;
    drift_target_opts cto = o->candidate_opts;
    if ((rc = drift_target_open(s->candidate_spec, &cto, &ct, err))) {
        drift_error_prefix(err, "the candidate: ");
        shadow_free(s);
        return rc;
    }
    s->candidate_api = drift_target_api(ct);
    drift_target_close(ct);
    drift_target *pt = NULL;
    drift_target_opts pto;
    drift_target_opts_default(&pto);
    pto.default_key_env = NULL;
    if ((rc = drift_target_open(s->primary_spec, &pto, &pt, err))) {
        drift_error_prefix(err, "the primary: ");
        shadow_free(s);
        return rc;
    }
    drift_target_close(pt);

    if ((rc = drift_store_open(o->store_path, &s->st, err)) ||
        (rc = begin_run(s, s->primary_label, s->primary_spec, &s->run_primary, err)) ||
        (rc = begin_run(s, s->candidate_label, s->candidate_spec, &s->run_candidate, err)) ||
        (s->retention && (rc = apply_retention(s, 0, err))) || (rc = shd_load_state(s, err))) {
        shadow_free(s);
        return rc;
    }
    s->stats.queue_capacity = (size_t)o->queue;
    if (pthread_create(&s->writer, NULL, writer_main, s)) {
        shadow_free(s);
        return drift_error_set(err, DRIFT_ERR_IO, "cannot start the writer thread");
    }
    s->writer_started = 1;
    s->workers = calloc((size_t)o->mirror_connections, sizeof *s->workers);
    for (int i = 0; s->workers && i < o->mirror_connections; i++) {
        if (pthread_create(&s->workers[i], NULL, worker_main, s)) break;
        s->n_workers++;
    }
    if (s->n_workers != o->mirror_connections)
        rc = drift_error_set(err, DRIFT_ERR_IO, "cannot start the mirror workers");
    if (!rc) rc = shd_httpd_start(s, err);
    if (rc) {
        drift_shadow_stop(s, NULL, NULL);
        return rc;
    }
    *out = s;
    return DRIFT_OK;
}

int drift_shadow_port(const drift_shadow *s) {
    return s ? s->port : 0;
}

void drift_shadow_get_stats(drift_shadow *s, drift_shadow_stats *out) {
    pthread_mutex_lock(&s->mu);
    *out = s->stats;
    out->queue_depth = s->ring_n + s->backlog_n;
    out->queue_capacity = (size_t)s->o.queue;
    pthread_mutex_unlock(&s->mu);
}

void drift_shadow_last_error(drift_shadow *s, char *buf, size_t cap) {
    pthread_mutex_lock(&s->mu);
    snprintf(buf, cap, "%s", s->last_error);
    pthread_mutex_unlock(&s->mu);
}

void drift_shadow_stop(drift_shadow *s, size_t *left_queued, drift_shadow_stats *final) {
    if (!s) return;
    shd_httpd_stop(s); /* drains the requests in flight; their primary jobs are queued */
    pthread_mutex_lock(&s->mu);
    s->stop_mirror = 1;
    pthread_cond_broadcast(&s->cv_work);
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < s->n_workers; i++) pthread_join(s->workers[i], NULL);
    pthread_mutex_lock(&s->mu);
    s->stop_writer = 1;
    pthread_cond_broadcast(&s->cv_writer);
    pthread_mutex_unlock(&s->mu);
    if (s->writer_started) pthread_join(s->writer, NULL);
    /* the writer stored every primary it held: those items are in the ring now */
    if (left_queued) *left_queued = s->ring_n + s->backlog_n + s->left_cancelled;
    if (final) {
        *final = s->stats;
        final->queue_depth = s->ring_n + s->backlog_n;
        final->queue_capacity = (size_t)s->o.queue;
    }
    shadow_free(s);
}
