/* matrix.c - the matrix stage: every configuration of a spec in one shard,
 * in spec order, as a labelled run (the run stage) followed by its scoring.
 *
 *   for each configuration i of the shard (i % count == index - 1):
 *       complete in the store?  yes -> SKIP (not asked again; scored, then ITEM)
 *                               no  -> drift_run_execute (resumes what is stored)
 *       scored (the thread's scorer)  -> summed into the summary -> ITEM
 *
 * Scoring: each thread that runs configurations (the calling thread, or
 * each worker) keeps one scorer (drift_scorer, over its store handle),
 * opened at its first scoring and closed when it ends, so the guard, the
 * embedder and the code sandbox's check are opened once per thread, not
 * once per configuration; each configuration's label is scored on its own
 * (drift_scorer_score_labels), so its score summary is what
 * drift_score_run would give (an evaluator found unavailable gives its
 * reason in every configuration's summary).
 *
 * A finished run with an answer is complete: its failed requests (a prompt
 * longer than the model's context, say) would fail the same way again, so
 * they are not retried here (`driftbench run` with the label does). A
 * finished run without a single answer is not: it is run again (its errors
 * asked again), so a matrix called again after a server was down fails
 * again, or succeeds, but never skips it as done. Everything is in the
 * store, so calling again after a failure or a cancel resumes.
 *
 * A configuration that failed entirely (every request failed, or it could
 * not start: its server did not start, its target did not open) stops the
 * matrix as any failure, unless
 * o->all_failed_ok: then it is counted and listed in the summary's
 * failed[] (fixed size, with its message and the kind of failure that
 * dominated) and the others go on.
 *
 * Side by side (o->jobs > 1): worker threads, each with its own store
 * handle on the same file, take the next configuration of the shard in
 * spec order and run + score it as above; the calling thread waits on a
 * condition variable and emits every event (ITEM / SKIP as configurations
 * end, a STEP about once a second with each configuration's progress), so
 * the caller's callback never runs on a worker. Each configuration is its
 * own run, so what is stored does not depend on the order; SQLite's busy
 * timeout serialises the handles' writes. The first failure raises a stop
 * flag that the workers' cancel hook reads, so the others stop at their
 * next request boundary with what they have stored.
 *
 * Servers (a configuration's "server" in the spec): the thread that runs a
 * configuration holds at most one server process (a server_slot).
 *
 *   configuration skipped, or its server another  -> the held one stopped
 *   configuration run with a server               -> the held one reused when
 *       it is the same (start command and health path) and still running;
 *       otherwise started (drift_server_proc_start: free port, /health,
 *       answered from the server's own socket, else refused)
 *   its run                                       -> target "{port}" filled
 *       for the connection (target_url); the stored target keeps "{port}",
 *       so a resume on another port is the same run
 *   the run's cancel hook                         -> also 1 once the server
 *       has exited: the run stops at once, unfinished, with what it received
 *   after the run                                 -> a server that exited is
 *       the configuration's failure (DRIFT_ERR_IO naming the command, its
 *       status and the tail of its output); else the server is kept only
 *       when the next configuration of the shard uses the same one
 *   the end, a failure or a cancel                -> every server stopped
 *
 * The start, the run's watch on its server and the failure of a server
 * that died are server_run.c's, shared with measure.
 *
 * A server that dies mid-run leaves an unfinished run: the failed requests
 * stored before its death was seen (a request that failed while retrying
 * is only stored after its retries, which the dead server's check cuts
 * short) are asked again on resume as any failed request of an unfinished
 * run is (drift_store_pending), so the next call restarts the server and
 * asks only what is missing. */
#include "driftbench/pipeline.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "driftbench/server_proc.h"
#include "pipeline/server_run_internal.h"
#include "util/util.h"

void drift_matrix_opts_default(drift_matrix_opts *o) {
    memset(o, 0, sizeof *o);
    o->shard_index = o->shard_count = 1;
    drift_score_opts_default(&o->score);
}

static void emit(const drift_matrix_opts *o, const drift_matrix_summary *sum, drift_progress_event ev, double t0_ms) {
    if (!o->progress) return;
    double elapsed = util_now_ms() - t0_ms;
    drift_progress p = {.stage = "matrix", .event = ev, .label = sum->label, .done = sum->configs,
                        .total = sum->in_shard, .elapsed_ms = elapsed, .eta_ms = -1.0, .summary = sum};
    if (sum->configs && sum->in_shard >= sum->configs)
        p.eta_ms = elapsed / (double)sum->configs * (double)(sum->in_shard - sum->configs);
    o->progress(o->progress_user, &p);
}

/* 1 when the store holds run `label` marked finished with at least one
 * answer (or no outcome at all); a finished run whose every stored outcome
 * is an error is not complete. */
static int run_complete(drift_store *st, const char *label) {
    drift_run_info prev;
    memset(&prev, 0, sizeof prev);
    int finished = drift_store_run_get(st, label, &prev, NULL) == DRIFT_OK && prev.finished_at;
    drift_run_info_clear(&prev);
    if (!finished) return 0;
    drift_store_run_counts c;
    if (drift_store_count_run(st, label, &c, NULL)) return 1; /* uncounted: finished is taken as complete */
    size_t answers = 0, errors = 0;
    for (int w = 0; w < DRIFT_WL_COUNT; w++) {
        answers += c.answers[w];
        errors += c.errors[w];
    }
    return answers > 0 || errors == 0;
}

static void score_add(drift_score_summary *total, const drift_score_summary *s) {
    for (int w = 0; w < DRIFT_WL_COUNT; w++) {
        total->scored[w] += s->scored[w];
        total->reused[w] += s->reused[w];
        total->already[w] += s->already[w];
        total->eval_errors[w] += s->eval_errors[w];
        total->not_computable[w] += s->not_computable[w];
        if (!total->reason[w][0] && s->reason[w][0]) memcpy(total->reason[w], s->reason[w], sizeof total->reason[w]);
    }
    if (!total->code_sandbox[0]) memcpy(total->code_sandbox, s->code_sandbox, sizeof total->code_sandbox);
}

/* The run stage's options for configuration c: the spec's suites, limit
 * and decoding, c's dimensions as config (dims: the caller frees it). */
static void run_opts_for(const drift_matrix_spec *spec, const drift_matrix_config *c, const drift_matrix_opts *o,
                         const char *dims, drift_run_opts *r) {
    drift_run_opts_default(r);
    r->label = c->label;
    r->target = c->target;
    r->suites = (const char *const *)spec->suites;
    r->n_suites = spec->n_suites;
    r->config = dims;
    r->limit = spec->limit;
    r->replicates = spec->replicates;
    r->params.temperature = spec->temperature;
    r->params.top_p = spec->top_p;
    r->params.seed = spec->seed;
    r->params.max_tokens = spec->max_tokens;
    if (spec->baseline_logprobs > 0) { /* the baseline's answers carry logprobs (flip risk) */
        char *bl = drift_matrix_baseline_for(spec->baseline, c);
        if (bl && !strcmp(bl, c->label)) r->params.logprobs = spec->baseline_logprobs;
        free(bl);
    }
    if (o->concurrency > 0) r->target_opts.concurrency = o->concurrency;
    r->target_opts.request = (drift_request_ctl){c->system_prompt, c->prompt_template, c->extra_body_json,
                                                 (const char *const *)c->headers, c->n_headers};
    r->cancel = o->cancel;
    r->cancel_user = o->cancel_user;
    r->progress = o->progress;
    r->progress_user = o->progress_user;
}

/* ---- servers ---- */

/* The server a thread holds between configurations. */
typedef struct server_slot {
    drift_server_proc *proc;          /* NULL: none running */
    const drift_matrix_server *spec;  /* the spec entry it was started for */
} server_slot;

static void slot_stop(server_slot *s) {
    drift_server_proc_free(s->proc);
    s->proc = NULL;
    s->spec = NULL;
}

/* Makes slot run c's server (reused when the same and alive). */
static drift_status slot_ensure(server_slot *slot, const drift_matrix_config *c, int (*cancel)(void *),
                                void *cancel_user, drift_error *err) {
    if (slot->proc && (!drift_matrix_server_same(slot->spec, &c->server) || !drift_server_proc_alive(slot->proc)))
        slot_stop(slot);
    if (slot->proc) return DRIFT_OK;
    drift_status rc = server_run_start(c->server.start, c->server.health, c->server.ready_timeout_s, cancel,
                                       cancel_user, &slot->proc, err);
    if (rc) {
        if (rc != DRIFT_ERR_CANCELLED) drift_error_prefix(err, "configuration '%s': ", c->label);
        return rc;
    }
    slot->spec = &c->server;
    return DRIFT_OK;
}

/* What one configuration did (either mode). */
typedef struct config_result {
    int skipped;
    int failed_in_run;
    int server_failed;     /* its server did not start or died: err says how (not a run failure) */
    int server_unstarted;  /* of those, it did not start (nothing was asked) */
    drift_status rc;
    drift_error err;
    drift_run_summary run;
    drift_score_summary score;
    double run_ms, score_ms, config_ms;
} config_result;

/* The run of configuration c with its server (slot) running: the run's
 * cancel hook also watches the server; a server that exited during the run
 * is the failure (out->rc, out->err), whatever the run returned. */
static void run_with_server(drift_store *st, const drift_matrix_config *c, drift_run_opts *r, server_slot *slot,
                            config_result *out) {
    server_run_watch w;
    char *url = NULL;
    if ((out->rc = server_run_attach(r, slot->proc, &w, &url, &out->err)) != DRIFT_OK) return;
    out->rc = drift_run_execute(st, r, &out->run, &out->err);
    free(url);
    if (server_run_died(slot->proc, &w, out->rc, &out->run)) {
        char stopped[160];
        snprintf(stopped, sizeof stopped, "configuration '%s': run stopped", c->label);
        out->rc = server_run_died_error(slot->proc, stopped, &out->run, &out->err);
        if (!out->rc) out->rc = drift_error_set(&out->err, DRIFT_ERR_INTERNAL, "configuration '%s': server state", c->label);
        out->server_failed = 1;
        slot_stop(slot); /* reaped already; its log is kept */
    } else if (w.died || !drift_server_proc_alive(slot->proc)) {
        slot_stop(slot); /* it ended after the last answer: the run is whole */
    }
}

/* Runs (unless finished and not rechecked) and scores configuration c into
 * st; run's cancel and progress hooks are r_cancel / r_progress (also the
 * scorer's cancel hook: the same for every configuration of the thread).
 * slot: the thread's server; next: the configuration the thread is likely
 * to run next (NULL: none), whose server, when the same, is kept running.
 * scorer: the thread's scorer over st (*scorer NULL: opened here at the
 * first scoring; the thread closes it when it ends). */
static void do_config(drift_store *st, const drift_matrix_spec *spec, const drift_matrix_config *c,
                      const drift_matrix_config *next, const drift_matrix_opts *o, int (*r_cancel)(void *),
                      void *r_cancel_user, drift_progress_cb r_progress, void *r_progress_user, server_slot *slot,
                      drift_scorer **scorer, config_result *out) {
    memset(out, 0, sizeof *out);
    double c0 = util_now_ms();
    if (!o->recheck && run_complete(st, c->label)) {
        out->skipped = 1;
        out->run.step = DRIFT_RUN_STEP_DONE;
        if (slot->proc) slot_stop(slot); /* not needed now */
    } else {
        char *dims = drift_matrix_config_dims(c);
        if (!dims) {
            out->rc = drift_error_set(&out->err, DRIFT_ERR_NOMEM, "out of memory");
            out->failed_in_run = 1;
            return;
        }
        drift_run_opts r;
        run_opts_for(spec, c, o, dims, &r);
        r.cancel = r_cancel;
        r.cancel_user = r_cancel_user;
        r.progress = r_progress;
        r.progress_user = r_progress_user;
        if (!c->server.start) {
            if (slot->proc) slot_stop(slot);
            out->rc = drift_run_execute(st, &r, &out->run, &out->err);
        } else if ((out->rc = slot_ensure(slot, c, r_cancel, r_cancel_user, &out->err)) != DRIFT_OK) {
            out->server_failed = 1;
            out->server_unstarted = out->rc != DRIFT_ERR_CANCELLED;
        } else {
            run_with_server(st, c, &r, slot, out);
        }
        free(dims);
        /* scoring needs no server: keep it only for the next configuration */
        if (slot->proc && !(next && drift_matrix_server_same(slot->spec, &next->server))) slot_stop(slot);
    }
    double c1 = util_now_ms();
    out->run_ms = c1 - c0;
    if (out->rc) {
        out->failed_in_run = !out->server_failed;
        return;
    }
    if (o->no_score) {
        out->config_ms = util_now_ms() - c0;
        return;
    }
    if (!*scorer) {
        drift_score_opts so = o->score;
        so.cancel = r_cancel;
        so.cancel_user = r_cancel_user;
        out->rc = drift_scorer_open(st, &so, scorer, &out->err);
    }
    const char *label = c->label;
    if (!out->rc) out->rc = drift_scorer_score_labels(*scorer, &label, 1, &out->score, &out->err);
    out->score_ms = util_now_ms() - c1;
    out->config_ms = util_now_ms() - c0;
}

/* 1 when r could not start: its server did not start, or its target did
 * not open (a missing model file, a CUDA profile without a GPU). */
static int unstarted(const config_result *r) {
    if (r->server_unstarted) return 1;
    return r->failed_in_run && r->run.step == DRIFT_RUN_STEP_TARGET && r->rc != DRIFT_ERR_CANCELLED &&
           r->rc != DRIFT_ERR_NOMEM;
}

/* 1 when r failed entirely and o lets the matrix go on past that: every
 * request failed (the run stage's step CHECK) or it could not start. */
static int failed_entirely_ok(const drift_matrix_opts *o, const config_result *r) {
    if (!r->rc || !o->all_failed_ok) return 0;
    return (r->failed_in_run && r->run.step == DRIFT_RUN_STEP_CHECK) || unstarted(r);
}

/* Folds one configuration's result into sum; returns its status (err set). */
static drift_status fold(drift_matrix_summary *sum, size_t i, const drift_matrix_spec *spec, const config_result *r,
                         const drift_matrix_opts *o, drift_error *err) {
    sum->config_index = i;
    sum->label = spec->configs[i].label;
    sum->run = r->run;
    sum->run_ms += r->run_ms;
    if (failed_entirely_ok(o, r)) {
        if (sum->all_failed < DRIFT_MATRIX_FAILURES_MAX) {
            drift_matrix_failure *f = &sum->failed[sum->all_failed];
            memset(f, 0, sizeof *f);
            f->config_index = i;
            f->unstarted = unstarted(r);
            const drift_run_failure *m = f->unstarted ? NULL : drift_run_failure_main(&r->run, &f->main_only);
            if (m) f->main = *m;
            snprintf(f->msg, sizeof f->msg, "%s", r->err.msg);
        }
        if (!sum->all_failed++) snprintf(sum->all_failed_msg, sizeof sum->all_failed_msg, "%s", r->err.msg);
        sum->configs++;
        sum->config_ms = r->config_ms;
        return DRIFT_OK;
    }
    if (r->rc) {
        sum->failed_in_run = r->failed_in_run;
        if (err) *err = r->err;
        return r->rc;
    }
    sum->score_ms += r->score_ms;
    score_add(&sum->score, &r->score);
    sum->skipped += (size_t)r->skipped;
    sum->configs++;
    sum->config_ms = r->config_ms;
    return DRIFT_OK;
}

/* The configuration after i in the shard, or NULL. */
static const drift_matrix_config *next_in_shard(const drift_matrix_spec *spec, const drift_matrix_opts *o, size_t i) {
    for (size_t j = i + 1; j < spec->n_configs; j++)
        if (drift_matrix_in_shard(j, o->shard_index, o->shard_count)) return &spec->configs[j];
    return NULL;
}

/* ---- one at a time ---- */

typedef struct serial_ctx {
    const drift_matrix_opts *o;
    drift_matrix_summary *sum;
    double *frac;
    size_t i;
} serial_ctx;

/* The run stage's events pass through, after noting how far the run is. */
static void serial_progress(void *user, const drift_progress *p) {
    serial_ctx *x = user;
    if (p->total) x->frac[x->i] = (double)p->done / (double)p->total;
    if (x->o->progress) x->o->progress(x->o->progress_user, p);
}

static drift_status run_serial(drift_store *st, const drift_matrix_spec *spec, const drift_matrix_opts *o,
                               drift_matrix_summary *sum, double *frac, double t0, drift_error *err) {
    drift_status rc = DRIFT_OK;
    serial_ctx x = {o, sum, frac, 0};
    server_slot slot = {0};
    drift_scorer *scorer = NULL;
    config_result *r = calloc(1, sizeof *r);
    if (!r) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < spec->n_configs && !rc; i++) {
        if (!drift_matrix_in_shard(i, o->shard_index, o->shard_count)) continue;
        sum->config_index = i;
        sum->label = spec->configs[i].label;
        x.i = i;
        do_config(st, spec, &spec->configs[i], next_in_shard(spec, o, i), o, o->cancel, o->cancel_user,
                  serial_progress, &x, &slot, &scorer, r);
        rc = fold(sum, i, spec, r, o, err);
        if (rc) break;
        frac[i] = 1;
        if (r->skipped) emit(o, sum, DRIFT_PROGRESS_SKIP, t0);
        emit(o, sum, DRIFT_PROGRESS_ITEM, t0);
        if (o->cancel && o->cancel(o->cancel_user))
            rc = drift_error_set(err, DRIFT_ERR_CANCELLED, "cancelled after configuration '%s'; calling again resumes",
                                 sum->label);
    }
    slot_stop(&slot);
    drift_scorer_close(scorer);
    free(r);
    return rc;
}

/* ---- side by side ---- */

typedef struct pool {
    const drift_matrix_spec *spec;
    const drift_matrix_opts *o;
    const char *path;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t next;               /* next configuration to take */
    int stop;                  /* a failure or a cancel: take nothing more, cancel runs */
    int failed;                /* a configuration failed (not cancelled): the others' cancels are its doing */
    double *frac;              /* (n_configs,) */
    config_result *res;        /* (n_configs,) */
    unsigned char *state;      /* (n_configs,) 0 waiting, 1 running, 2 ended (not yet reported), 3 reported */
    size_t running;            /* workers alive */
} pool;

typedef struct worker_ctx {
    pool *p;
    size_t i;                  /* configuration being run */
} worker_ctx;

static int pool_cancel(void *user) {
    worker_ctx *w = user;
    pool *p = w->p;
    pthread_mutex_lock(&p->mu);
    int stop = p->stop;
    pthread_mutex_unlock(&p->mu);
    if (stop) return 1;
    return p->o->cancel && p->o->cancel(p->o->cancel_user);
}

static void pool_progress(void *user, const drift_progress *e) {
    worker_ctx *w = user;
    if (!e->total) return;
    pthread_mutex_lock(&w->p->mu);
    w->p->frac[w->i] = (double)e->done / (double)e->total;
    pthread_mutex_unlock(&w->p->mu);
}

/* Marks configuration i ended with status rc (mutex held). */
static void pool_end(pool *p, size_t i, drift_status rc) {
    p->state[i] = 2;
    if (rc) p->stop = 1;
    if (rc && rc != DRIFT_ERR_CANCELLED) p->failed = 1;
    pthread_cond_broadcast(&p->cv);
}

static void *pool_worker(void *arg) {
    pool *p = arg;
    drift_store *st = NULL;
    drift_error oerr = {0};
    drift_status orc = drift_store_open(p->path, &st, &oerr);
    worker_ctx w = {p, 0};
    server_slot slot = {0};
    drift_scorer *scorer = NULL; /* over st, this worker's own: one thread at a time */
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while (p->next < p->spec->n_configs && !drift_matrix_in_shard(p->next, p->o->shard_index, p->o->shard_count))
            p->next++;
        if (p->stop || p->next >= p->spec->n_configs) {
            pthread_mutex_unlock(&p->mu);
            break;
        }
        size_t i = p->next++;
        p->state[i] = 1;
        pthread_mutex_unlock(&p->mu);
        w.i = i;
        config_result *r = &p->res[i];
        if (orc) {
            memset(r, 0, sizeof *r);
            r->rc = orc;
            r->err = oerr;
            r->failed_in_run = 1;
            r->run.step = DRIFT_RUN_STEP_BEGIN;
        } else {
            do_config(st, p->spec, &p->spec->configs[i], next_in_shard(p->spec, p->o, i), p->o, pool_cancel, &w,
                      pool_progress, &w, &slot, &scorer, r);
        }
        int tolerated = failed_entirely_ok(p->o, r);
        pthread_mutex_lock(&p->mu);
        if (!r->rc || tolerated) p->frac[i] = 1;
        pool_end(p, i, tolerated ? DRIFT_OK : r->rc);
        pthread_mutex_unlock(&p->mu);
    }
    slot_stop(&slot); /* before the thread ends: the server's parent-death signal follows this thread */
    drift_scorer_close(scorer); /* before its store handle */
    drift_store_close(st);
    pthread_mutex_lock(&p->mu);
    p->running--;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static drift_status run_pool(drift_store *st, const drift_matrix_spec *spec, const drift_matrix_opts *o,
                             drift_matrix_summary *sum, double *frac, double t0, drift_error *err) {
    size_t n = spec->n_configs;
    pool p = {.spec = spec, .o = o, .path = drift_store_path(st), .frac = frac};
    p.res = calloc(n ? n : 1, sizeof *p.res);
    p.state = calloc(n ? n : 1, 1);
    pthread_t *th = calloc((size_t)o->jobs, sizeof *th);
    if (!p.res || !p.state || !th) {
        free(p.res);
        free(p.state);
        free(th);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    pthread_mutex_init(&p.mu, NULL);
    pthread_cond_init(&p.cv, NULL);
    int started = 0;
    pthread_mutex_lock(&p.mu);
    for (int t = 0; t < o->jobs; t++)
        if (pthread_create(&th[t], NULL, pool_worker, &p) == 0) started++;
    p.running = (size_t)started;
    drift_status rc = DRIFT_OK;
    if (!started) rc = drift_error_set(err, DRIFT_ERR_INTERNAL, "matrix: no worker thread could be started");
    int cancel_seen = 0;
    while (p.running > 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        int w = pthread_cond_timedwait(&p.cv, &p.mu, &ts);
        /* report ended configurations in spec order of their ending */
        for (size_t i = 0; i < n; i++) {
            if (p.state[i] != 2) continue;
            p.state[i] = 3;
            if (rc) continue; /* the first failure is the one returned */
            if (p.failed && p.res[i].rc == DRIFT_ERR_CANCELLED) continue; /* stopped by another's failure */
            drift_error e = {0};
            drift_status r = fold(sum, i, spec, &p.res[i], o, &e);
            if (r) {
                rc = r;
                if (err) *err = e;
                p.stop = 1;
                continue;
            }
            pthread_mutex_unlock(&p.mu);
            if (p.res[i].skipped) emit(o, sum, DRIFT_PROGRESS_SKIP, t0);
            emit(o, sum, DRIFT_PROGRESS_ITEM, t0);
            pthread_mutex_lock(&p.mu);
        }
        if (!cancel_seen && o->cancel) {
            pthread_mutex_unlock(&p.mu);
            cancel_seen = o->cancel(o->cancel_user);
            pthread_mutex_lock(&p.mu);
            if (cancel_seen) p.stop = 1;
        }
        if (w == ETIMEDOUT && p.running > 0 && o->progress) {
            pthread_mutex_unlock(&p.mu);
            emit(o, sum, DRIFT_PROGRESS_STEP, t0);
            pthread_mutex_lock(&p.mu);
        }
    }
    pthread_mutex_unlock(&p.mu);
    for (int t = 0; t < started; t++) pthread_join(th[t], NULL);
    /* what ended after the last wake-up */
    for (size_t i = 0; i < n; i++)
        if (p.state[i] == 2 && !rc && !(p.failed && p.res[i].rc == DRIFT_ERR_CANCELLED)) {
            drift_error e = {0};
            rc = fold(sum, i, spec, &p.res[i], o, &e);
            if (rc && err) *err = e;
            else {
                if (p.res[i].skipped) emit(o, sum, DRIFT_PROGRESS_SKIP, t0);
                emit(o, sum, DRIFT_PROGRESS_ITEM, t0);
            }
        }
    if (!rc && cancel_seen)
        rc = drift_error_set(err, DRIFT_ERR_CANCELLED, "cancelled after %zu of %zu configurations; calling again resumes",
                             sum->configs, sum->in_shard);
    pthread_cond_destroy(&p.cv);
    pthread_mutex_destroy(&p.mu);
    free(p.res);
    free(p.state);
    free(th);
    return rc;
}

drift_status drift_matrix_run(drift_store *st, const drift_matrix_spec *spec, const drift_matrix_opts *o,
                              drift_matrix_summary *sum, drift_error *err) {
    memset(sum, 0, sizeof *sum);
    if (!st || !spec || o->shard_count < 1 || o->shard_index < 1 || o->shard_index > o->shard_count)
        return drift_error_set(err, DRIFT_ERR_INVALID, "matrix: a store, a spec and a shard I/N with 1 <= I <= N are needed");
    double t0 = util_now_ms();
    for (size_t i = 0; i < spec->n_configs; i++)
        sum->in_shard += (size_t)drift_matrix_in_shard(i, o->shard_index, o->shard_count);
    double *frac = calloc(spec->n_configs ? spec->n_configs : 1, sizeof *frac);
    if (!frac) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    sum->progress = frac;
    const char *path = drift_store_path(st);
    int jobs = o->jobs;
    if ((size_t)jobs > sum->in_shard) jobs = (int)sum->in_shard;
    if (!path || !strcmp(path, ":memory:") || !strncmp(path, "file:", 5)) jobs = 1;
    sum->jobs = jobs > 1 ? jobs : 1;
    emit(o, sum, DRIFT_PROGRESS_BEGIN, t0);
    drift_status rc;
    if (jobs > 1) {
        drift_matrix_opts po = *o;
        po.jobs = jobs;
        rc = run_pool(st, spec, &po, sum, frac, t0, err);
    } else {
        rc = run_serial(st, spec, o, sum, frac, t0, err);
    }
    emit(o, sum, DRIFT_PROGRESS_END, t0);
    sum->progress = NULL;
    free(frac);
    return rc;
}
