/* shadow_writer.c - the shadow proxy's writer thread: the only thread that
 * touches the store (a store handle is not thread-safe).
 *
 *   writer: store prompt + primary answer ──item──> mirror queue (bounded)
 *   writer: store candidate answer, count, on_pair
 *
 * It stores in batches (one transaction per batch per kind; each answer is
 * committed before the next batch is taken). A pair whose primary answer
 * is stored and whose candidate row is not (a stop, a kill) is found at the
 * next start and mirrored again (shadow_pairs.c). With a retention, the
 * writer also applies it every period, between two batches. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "driftbench/traffic.h"
#include "suite/prompt.h"
#include "traffic/shadow_internal.h"

#define WRITER_BATCH 64

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
    if (failed) shd_set_last_error(s, &e);
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
        shd_job_free(j);
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
drift_status shd_apply_retention(drift_shadow *s, size_t pending, drift_error *err) {
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
    if (failed) shd_set_last_error(s, &e);
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
        shd_job_free(j);
        if (stored_msg) free(stored_msg[i]);
    }
    free(stored_msg);
    free(ans);
}

void *shd_writer_main(void *arg) {
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
            if (shd_apply_retention(s, pending, &e)) shd_set_last_error(s, &e); /* its messages say "retention" */
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
