/* server_scheduler.c - the batching queue and the generation worker.
 *
 *   handlers --srv_sched_submit_wait--> queue (FIFO of srv_job, under mu)
 *   scheduler thread (owns all engine calls):
 *        take the oldest job + every queued job with the same decoding
 *        parameters (seed aside) up to max_batch sequences ->
 *        drift_model_generate_cancellable(batch = those sequences) -> wake
 *        the handlers; an embedding job runs alone, input by input, and
 *        so does a scoring job (prompt logprobs: run_score)
 *
 * Seeds: the batch runs with params.seed = 0 and seed_offsets[i] = the
 * request's seed + choice index, which the engine adds: choice j of a request
 * with seed S samples with S + j, as the embedded target's replicate j does.
 * Queued + running sequences <= max_queue (503 + Retry-After past it).
 *
 * Cancellation: a job whose client has gone (srv_sched_cancel_departed) or,
 * at the drain deadline, every job (drift_server.abort) ends at once when
 * queued, or at the next decode step of its sequences (the others in the
 * batch go on) or the next input of an embedding. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server_internal.h"
#include "util/util.h"

static int params_same(const drift_gen_params *a, const drift_gen_params *b) {
    if (a->temperature != b->temperature || a->top_p != b->top_p || a->top_k != b->top_k ||
        a->max_tokens != b->max_tokens || a->logprobs != b->logprobs || a->n_stop != b->n_stop)
        return 0;
    for (int i = 0; i < a->n_stop; i++)
        if (strcmp(a->stop[i], b->stop[i])) return 0;
    return 1;
}

static int job_cancelled(drift_server *s, const srv_job *j) {
    pthread_mutex_lock(&s->mu);
    int c = j->cancel || s->abort;
    pthread_mutex_unlock(&s->mu);
    return c;
}

/* Marks j cancelled (under mu: reads departed). */
static void set_cancelled(srv_job *j) {
    j->st = DRIFT_ERR_CANCELLED;
    snprintf(j->errmsg, sizeof j->errmsg, "%s",
             j->departed ? "the client closed the connection" : "the server stopped before this request finished");
}

static void run_embed(drift_server *s, srv_job *j) {
    int D = s->info->dim;
    j->vecs = malloc((j->ntexts ? j->ntexts : 1) * (size_t)D * sizeof *j->vecs);
    if (!j->vecs) {
        j->st = DRIFT_ERR_NOMEM;
        snprintf(j->errmsg, sizeof j->errmsg, "out of memory");
        return;
    }
    for (size_t i = 0; i < j->ntexts; i++) {
        if (job_cancelled(s, j)) {
            pthread_mutex_lock(&s->mu);
            set_cancelled(j);
            pthread_mutex_unlock(&s->mu);
            return;
        }
        drift_error e;
        drift_status st = drift_model_embed(s->m, j->texts[i], j->vecs + i * (size_t)D, &e);
        if (st) {
            j->st = st;
            snprintf(j->errmsg, sizeof j->errmsg, "input %zu: %s", i, e.msg);
            return;
        }
    }
}

#define SCORE_PIECE 64 /* logit rows per forward call while scoring */

/* Prompt k's logprobs of job j: lp[i], rank[i] for tokens 1..n-1 (see
 * srv_prompt_lp): the prompt runs through a session in pieces of
 * SCORE_PIECE tokens with every row's logits, each row's log-softmax in
 * double (drift_log_softmax), the top score_top ids (lowest id first on
 * ties) and the token's rank (1 + the ids with a higher logprob). */
static drift_status score_one(drift_server *s, srv_job *j, size_t k, drift_error *e) {
    const int32_t *t = j->toks[k];
    size_t n = j->lens[k];
    int nv = s->info->n_vocab, top = j->score_top;
    drift_token_logprob *lp = calloc(n ? n : 1, sizeof *lp);
    int *rank = calloc(n ? n : 1, sizeof *rank);
    float *rows = malloc((size_t)SCORE_PIECE * (size_t)nv * sizeof *rows);
    double *ls = malloc((size_t)nv * sizeof *ls);
    j->plp[k] = lp;
    j->prank[k] = rank;
    drift_session *ss = NULL;
    drift_status st = lp && rank && rows && ls ? DRIFT_OK : drift_error_set(e, DRIFT_ERR_NOMEM, "out of memory");
    if (!st) st = drift_session_new(s->m, (int)n, &ss, e);
    /* tokens from-1 .. from-1+cnt-1 give the rows predicting from .. from+cnt-1 */
    for (size_t from = 1; !st && from < n;) {
        if (job_cancelled(s, j)) {
            st = DRIFT_ERR_CANCELLED;
            break;
        }
        size_t cnt = n - from < SCORE_PIECE ? n - from : SCORE_PIECE;
        st = drift_session_forward(ss, t + from - 1, cnt, 1, rows, NULL, e);
        for (size_t r = 0; !st && r < cnt; r++) {
            size_t i = from + r;
            drift_log_softmax(rows + r * (size_t)nv, nv, ls);
            drift_token_logprob *p = &lp[i];
            p->id = t[i];
            p->logprob = ls[t[i]];
            int above = 0;
            for (int v = 0; v < nv; v++) {
                above += ls[v] > p->logprob;
                if (top == 0) continue;
                /* insert v into the sorted top list when it belongs there */
                if (p->n_top == top && !(ls[v] > p->top_logprob[top - 1])) continue;
                int at = p->n_top < top ? p->n_top++ : top - 1;
                while (at > 0 && ls[v] > p->top_logprob[at - 1]) {
                    p->top_id[at] = p->top_id[at - 1];
                    p->top_logprob[at] = p->top_logprob[at - 1];
                    at--;
                }
                p->top_id[at] = v;
                p->top_logprob[at] = ls[v];
            }
            rank[i] = above + 1;
        }
        from += cnt;
    }
    drift_session_free(ss);
    free(rows);
    free(ls);
    return st;
}

static void run_score(drift_server *s, srv_job *j) {
    j->plp = calloc(j->nseq ? j->nseq : 1, sizeof *j->plp);
    j->prank = calloc(j->nseq ? j->nseq : 1, sizeof *j->prank);
    if (!j->plp || !j->prank) {
        j->st = DRIFT_ERR_NOMEM;
        snprintf(j->errmsg, sizeof j->errmsg, "out of memory");
        return;
    }
    for (size_t k = 0; k < j->nseq; k++) {
        drift_error e = {0};
        drift_status st = score_one(s, j, k, &e);
        if (st == DRIFT_ERR_CANCELLED) {
            pthread_mutex_lock(&s->mu);
            set_cancelled(j);
            pthread_mutex_unlock(&s->mu);
            return;
        }
        if (st) {
            j->st = st;
            snprintf(j->errmsg, sizeof j->errmsg, "prompt %zu: %s", k, e.msg);
            return;
        }
    }
}

typedef struct batch_ctx {
    drift_server *s;
    srv_job **seq_job; /* job of each sequence */
} batch_ctx;

/* drift_model_generate_cancellable's hook: the sequence's job is cancelled
 * (client gone) or the drain deadline has passed. */
static int seq_cancelled(void *user, size_t i) {
    batch_ctx *b = user;
    return job_cancelled(b->s, b->seq_job[i]);
}

/* Runs jobs[0..nj) (same params) as one drift_model_generate call. */
static void run_batch(drift_server *s, srv_job **jobs, size_t nj) {
    size_t total = 0;
    for (size_t i = 0; i < nj; i++) total += jobs[i]->nseq;
    const int32_t **toks = malloc(total * sizeof *toks);
    size_t *lens = malloc(total * sizeof *lens);
    int64_t *offs = malloc(total * sizeof *offs);
    srv_job **seq_job = malloc(total * sizeof *seq_job);
    drift_generation *gens = calloc(total, sizeof *gens);
    drift_status st = DRIFT_OK;
    drift_error e;
    if (!toks || !lens || !offs || !seq_job || !gens) {
        st = drift_error_set(&e, DRIFT_ERR_NOMEM, "out of memory");
    } else {
        size_t k = 0;
        for (size_t i = 0; i < nj; i++)
            for (size_t q = 0; q < jobs[i]->nseq; q++, k++) {
                toks[k] = jobs[i]->toks[q];
                lens[k] = jobs[i]->lens[q];
                offs[k] = jobs[i]->offs[q];
                seq_job[k] = jobs[i];
            }
        drift_gen_params p = jobs[0]->params;
        p.seed = 0;
        int batch = (int)(total < (size_t)s->o.max_batch ? total : (size_t)s->o.max_batch);
        batch_ctx bc = {s, seq_job};
        st = drift_model_generate_cancellable(s->m, (const int32_t *const *)toks, lens, total, &p, offs, batch,
                                              seq_cancelled, &bc, gens, &e);
    }
    pthread_mutex_lock(&s->mu);
    s->stats.batches++;
    s->stats.batched_sequences += total;
    int bs = (int)(total < (size_t)s->o.max_batch ? total : (size_t)s->o.max_batch);
    if (bs > s->stats.max_batch_seen) s->stats.max_batch_seen = bs;
    pthread_mutex_unlock(&s->mu);
    size_t k = 0;
    for (size_t i = 0; i < nj; i++) {
        srv_job *j = jobs[i];
        if (st) {
            j->st = st;
            snprintf(j->errmsg, sizeof j->errmsg, "%s", e.msg);
            k += j->nseq;
            continue;
        }
        memcpy(j->gens, gens + k, j->nseq * sizeof *gens);
        int cut = 0;
        for (size_t q = 0; q < j->nseq; q++)
            cut |= j->gens[q].finish_reason && !strcmp(j->gens[q].finish_reason, "cancelled");
        if (cut) {
            pthread_mutex_lock(&s->mu);
            set_cancelled(j);
            pthread_mutex_unlock(&s->mu);
        }
        k += j->nseq;
    }
    if (st && gens)
        for (size_t i = 0; i < total; i++) drift_generation_clear(&gens[i]);
    free(toks);
    free(lens);
    free(offs);
    free(seq_job);
    free(gens);
}

/* Takes the next work out of the queue into take[] (at most cap jobs): the
 * oldest job, then, for a generation, the compatible ones in arrival order
 * up to max_batch sequences. Returns the number taken. Under mu. */
static size_t take_batch(drift_server *s, srv_job **take, size_t cap) {
    srv_job *first = s->head;
    size_t nj = 0, seqs = 0;
    srv_job **link = &s->head;
    srv_job *prev = NULL;
    for (srv_job *j = s->head; j;) {
        srv_job *nx = j->next;
        int fits = j == first || (j->kind == SRV_JOB_GEN && first->kind == SRV_JOB_GEN &&
                                  params_same(&j->params, &first->params) &&
                                  seqs + j->nseq <= (size_t)s->o.max_batch);
        if (fits && nj < cap && (first->kind == SRV_JOB_GEN || j == first)) {
            j->running = 1;
            take[nj++] = j;
            seqs += j->nseq;
            *link = nx;
            if (s->tail == j) s->tail = prev;
        } else {
            prev = j;
            link = &j->next;
        }
        j = nx;
        if (first->kind != SRV_JOB_GEN || seqs >= (size_t)s->o.max_batch) break;
    }
    return nj;
}

static void *sched_main(void *arg) {
    drift_server *s = arg;
    size_t cap = 64;
    srv_job **take = malloc(cap * sizeof *take);
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->head && !s->stopping) pthread_cond_wait(&s->cv_sched, &s->mu);
        if (!s->head) break; /* stopping and drained */
        if (s->o.batch_window_ms > 0 && s->queued_seqs < s->o.max_batch)
            srv_cond_wait_ms(&s->cv_sched, &s->mu, s->o.batch_window_ms);
        srv_job *first = s->head;
        size_t nj = take_batch(s, take, cap);
        pthread_mutex_unlock(&s->mu);
        if (first->kind == SRV_JOB_EMBED) run_embed(s, first);
        else if (first->kind == SRV_JOB_SCORE) run_score(s, first);
        else run_batch(s, take, nj);
        pthread_mutex_lock(&s->mu);
        for (size_t i = 0; i < nj; i++) {
            take[i]->done = 1;
            s->queued_seqs -= (int)take[i]->nseq;
        }
        pthread_cond_broadcast(&s->cv_done);
    }
    pthread_mutex_unlock(&s->mu);
    free(take);
    return NULL;
}

int srv_sched_start(drift_server *s) {
    if (pthread_create(&s->sched, NULL, sched_main, s)) return -1;
    s->sched_started = 1;
    return 0;
}

void srv_sched_stop(drift_server *s) {
    if (!s->sched_started) return;
    srv_thread_stop(s, s->sched, &s->stopping, &s->cv_sched);
    s->sched_started = 0;
}

/* Takes queued job j out of the queue and completes it as cancelled. Under mu. */
static void cancel_queued(drift_server *s, srv_job *j) {
    srv_job *prev = NULL;
    for (srv_job *q = s->head; q; prev = q, q = q->next) {
        if (q != j) continue;
        if (prev) prev->next = q->next;
        else s->head = q->next;
        if (s->tail == q) s->tail = prev;
        s->queued_seqs -= (int)q->nseq;
        set_cancelled(q);
        q->done = 1;
        pthread_cond_broadcast(&s->cv_done);
        return;
    }
}

void srv_sched_cancel_queued(drift_server *s) {
    while (s->head) cancel_queued(s, s->head);
}

void srv_sched_cancel_departed(drift_server *s, srv_job *j) {
    if (j->done || j->cancel) return;
    j->cancel = 1;
    j->departed = 1;
    if (!j->running) cancel_queued(s, j);
}

int srv_sched_submit_wait(drift_server *s, srv_job *j, srv_job **waiting, srv_error *e) {
    pthread_mutex_lock(&s->mu);
    if (s->draining) {
        pthread_mutex_unlock(&s->mu);
        return srv_error_set(e, 503, NULL, "shutting_down", "the server is shutting down");
    }
    if (s->queued_seqs + (int)j->nseq > s->o.max_queue) {
        pthread_mutex_unlock(&s->mu);
        return srv_error_set(e, 503, NULL, "overloaded", "the server is overloaded (%d sequences queued); retry later",
                             s->o.max_queue);
    }
    s->queued_seqs += (int)j->nseq;
    j->next = NULL;
    if (s->tail) s->tail->next = j;
    else s->head = j;
    s->tail = j;
    if (waiting) *waiting = j;
    pthread_cond_signal(&s->cv_sched);
    while (!j->done) pthread_cond_wait(&s->cv_done, &s->mu);
    if (waiting) *waiting = NULL;
    if (j->st == DRIFT_ERR_CANCELLED) { /* (a job whose sequences had all ended is answered) */
        if (j->departed) s->stats.departed++;
        else s->stats.cancelled++;
    }
    pthread_mutex_unlock(&s->mu);
    return 0;
}
