/* shadow_internal.h - what the shadow proxy's files share: shadow.c (start,
 * stop, the store's runs), shadow_queue.c (the relay's hand-off, items and
 * jobs), shadow_writer.c (the writer thread, retention), shadow_mirror.c
 * (the mirror workers), shadow_pairs.c (the stored pairs), shadow_metrics.c
 * (/metrics) and shadow_httpd.c (the listener and the relay to the primary). */
#ifndef DRIFT_SHADOW_INTERNAL_H
#define DRIFT_SHADOW_INTERNAL_H

#include <pthread.h>

#include "driftbench/shadow.h"
#include "driftbench/types.h"
#include "util/util.h"

#define SHD_POOL_MAX 256

/* A pair waiting for the candidate (mirror queue or restart backlog). */
typedef struct shd_item {
    int64_t prompt_rowid;
    char *request;       /* canonical JSON */
    char *primary_msg;   /* drift_traffic_reply_message's form */
    int comparable;
    struct shd_item *next;
} shd_item;

typedef enum { SHD_JOB_PRIMARY, SHD_JOB_CANDIDATE } shd_job_kind;

/* Work for the writer thread. */
typedef struct shd_job {
    shd_job_kind kind;
    /* PRIMARY: a sampled request and its primary outcome; reserved: it holds
     * a mirror queue slot (an answer to mirror), else store the error only */
    char *request;
    drift_answer ans;    /* PRIMARY: the primary's; CANDIDATE: the candidate's (text: message form) */
    int comparable;
    int reserved;
    shd_item *item;      /* CANDIDATE */
    struct shd_job *next;
} shd_job;

struct drift_shadow {
    drift_shadow_opts o;
    char *listen_host, *name, *primary_label, *candidate_label, *primary_spec, *candidate_spec;
    char *primary_base;          /* the primary's URL up to the "?" (its /v1), no trailing '/' */
    char *primary_key;           /* from the primary spec's api_key_env, or NULL */
    char *candidate_model;       /* the candidate spec's model=, or NULL */
    drift_api candidate_api;
    char suite[300];
    double start_wall_ms;
    uint64_t next_id;

    drift_store *st;
    int64_t run_primary, run_candidate;

    pthread_mutex_t mu;
    pthread_cond_t cv_work;      /* workers: an item or stop */
    pthread_cond_t cv_writer;    /* writer: a job or stop */
    pthread_cond_t cv_idle;      /* in_flight changed */
    shd_item *ring_head, *ring_tail, *backlog_head, *backlog_tail;
    size_t ring_n, backlog_n, reserved;
    size_t at_workers;           /* items a mirror worker holds (taken, its candidate job not queued yet) */
    shd_job *jobs_head, *jobs_tail;
    size_t jobs_n, jobs_primary;
    int draining, stop_mirror, stop_writer, abort_upstream;
    size_t left_cancelled;
    drift_shadow_stats stats;
    drift_prom_hist added;       /* seconds */
    int retention;               /* o.retention given: applied at start and every retention_period_ms */
    double retention_max_age_s;  /* drift_traffic_retention_parse's: -1 none */
    int64_t retention_keep_newest;
    double retention_period_ms, retention_next_ms; /* util_now_ms clock */
    char last_error[512];

    pthread_t writer;
    pthread_t *workers;
    int n_workers, writer_started;
    void *httpd;                 /* struct MHD_Daemon * */
    void *pool[SHD_POOL_MAX];    /* idle CURL * to the primary (shadow_httpd.c) */
    size_t n_pool;
    pthread_cond_t cv_relay;     /* relay threads: a request or the stop */
    struct relay *relay_head, *relay_tail; /* requests waiting for a relay thread */
    size_t relay_threads, relay_idle, relay_queued;
    int relay_stop;
    int port;
};

/* shadow.c: the store's error e kept for drift_shadow_last_error and
 * counted (stats.store_errors); takes s->mu. */
void shd_set_last_error(drift_shadow *s, const drift_error *e);

/* shadow_queue.c: an item or a job freed with what it owns (NULL: nothing). */
void shd_item_free(shd_item *it);
void shd_job_free(shd_job *j);
/* shadow_queue.c: j appended to the writer's jobs, the writer woken. Under s->mu. */
void shd_push_job_locked(drift_shadow *s, shd_job *j);
/* shadow_queue.c: a mirrorable request's outcome at the primary, from the relay
 * thread once the primary's reply is complete. body: the client's bytes;
 * reply: the primary's body as kept (NULL: over the store cap), ctype its
 * Content-Type; status 0: unreachable (why in transfer_error). api: the
 * endpoint's (chat or completions). Counts, samples, reserves a mirror
 * slot and hands the writer its job; never blocks on the candidate. */
void shd_primary_done(drift_shadow *s, drift_api api, const char *body, size_t len, long status, const char *ctype,
                      const char *reply, size_t reply_len, int reply_over, const char *transfer_error,
                      double latency_ms);
void shd_observe_added(drift_shadow *s, double seconds);
/* shadow_metrics.c: the /metrics text (malloc'd) or NULL when metrics_extra failed / nomem. */
char *shd_metrics(drift_shadow *s);

/* shadow_writer.c: on_pair, if any. */
void shd_call_pair(drift_shadow *s, const char *req, const char *pm, const char *cm, int pe, int ce, int comp);
/* shadow_writer.c: the writer thread (arg: the drift_shadow); returns once
 * stop_writer is set and its jobs are stored. */
void *shd_writer_main(void *arg);
/* shadow_writer.c: the retention (o.retention) applied to both runs,
 * counted and logged; pending: pairs whose candidate answer may still come.
 * From drift_shadow_start, then from the writer only (it uses the store). */
drift_status shd_apply_retention(drift_shadow *s, size_t pending, drift_error *err);
/* shadow_mirror.c: a mirror worker (arg: the drift_shadow); returns once
 * stop_mirror is set. */
void *shd_mirror_main(void *arg);

/* shadow_pairs.c: one stored pair as shd_walk_pairs gives it. The callback
 * may take request or primary_msg (it sets the field NULL); the rest is the
 * walker's. */
typedef struct shd_stored_pair {
    int64_t prompt_rowid;
    char *request;             /* as stored (canonical JSON, redacted, or a hash) */
    char *primary_msg;         /* NULL on a primary error */
    const char *candidate_msg; /* NULL: no candidate row, an error row, or not loaded */
    int finished;              /* a candidate row exists, or the primary failed (an error pair) */
    int primary_error, candidate_error;
    int comparable;            /* drift_shadow_comparable of the request */
    int64_t t_unix_s;          /* the later of the two answers' stored times (shd_walk_opts.times) */
} shd_stored_pair;
/* 0: go on; > 0: stop; < 0: an error (err set). */
typedef int (*shd_pair_fn)(void *user, shd_stored_pair *p, drift_error *err);
typedef struct shd_walk_opts {
    int candidate_texts;       /* load the candidate's answers (else candidate_msg is NULL) */
    int finished_only;         /* skip the pairs with no candidate row yet */
    int times;                 /* fill t_unix_s */
} shd_walk_opts;
/* The primary run's rows (replicate 0) merged with the candidate run's by
 * prompt_rowid, in the order the primaries were stored, each pair's stored
 * texts loaded (the primary's always) and given to fn. */
drift_status shd_walk_pairs(drift_store *st, int64_t run_primary, int64_t run_candidate, const shd_walk_opts *w,
                            shd_pair_fn fn, void *user, drift_error *err);
/* At start: the counters that resume from the store, the unfinished pairs
 * into the restart backlog, the finished ones to on_pair (replay_stored). */
drift_status shd_load_state(drift_shadow *s, drift_error *err);

/* shadow_httpd.c */
drift_status shd_httpd_start(drift_shadow *s, drift_error *err);
void shd_httpd_stop(drift_shadow *s);

#endif
