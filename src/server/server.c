/* server.c - the OpenAI-compatible server over the embedded engine.
 *
 *   client --HTTP--> libmicrohttpd (one thread per connection)
 *        handler: cap body, route, parse + validate (server_request.c),
 *                 check the model name, tokenize, check the context,
 *                 queue a job, wait for it, render the reply
 *   scheduler thread (owns all engine calls):
 *        take the oldest job + every queued job with the same decoding
 *        parameters (seed aside) up to max_batch sequences ->
 *        drift_model_generate_cancellable(batch = those sequences) -> wake
 *        the handlers
 *
 * Seeds: the batch runs with params.seed = 0 and seed_offsets[i] = the
 * request's seed + choice index, which the engine adds: choice j of a request
 * with seed S samples with S + j, as the embedded target's replicate j does.
 * Memory: body <= max_body_bytes (413), queued + running sequences <=
 * max_queue (503 + Retry-After), connections bounded (below), so the worst
 * case is bounded by the limits, not by the clients.
 *
 * Connections (slow or abusive clients). Every TCP connection has a tracker
 * (srv_conn, MHD's socket context) in one of three states:
 *   WAIT  no request yet: waiting for headers (new, or keep-alive idle)
 *   BODY  headers in, body being read
 *   BUSY  request complete: being answered (queued, decoding, sending)
 * - A connection must deliver a whole request (headers and body) within
 *   request_timeout_s of opening or of its previous reply; the reaper thread
 *   (every 100 ms) shuts the socket down otherwise. This is a deadline, not
 *   an inactivity timer, so a client trickling one header byte at a time is
 *   dropped too.
 * - Accept policy: at most per_client_connections per source address and
 *   max_connections in all. A newcomer over a limit evicts the oldest WAIT or
 *   BODY connection (of its own address when that limit is hit), so idle or
 *   slow connections cannot lock anyone out of /health; only when every
 *   connection in the way is BUSY is the newcomer refused (closed at once).
 *   MHD's own limits sit above ours (2x) as a backstop for evicted sockets
 *   not yet cleaned up.
 * - A BUSY connection whose client closes it (POLLRDHUP, seen by the reaper)
 *   has its job cancelled: dropped from the queue, or its sequences ended at
 *   the next decode step (drift_model_generate_cancellable). A client that
 *   half-closes its sending side while it waits counts as gone.
 *
 * Shutdown (drift_server_drain): stop listening, refuse new requests with
 * 503, let the scheduler work until the queue is empty and the replies are
 * sent or the drain deadline passes; past it, cancel everything still queued
 * or decoding (503 to those clients), give the replies up to a second, stop
 * the daemon, the reaper and the scheduler. One uninterruptible step (a
 * prefill, an embedding) may still finish first. */

#include <jansson.h>
#include <microhttpd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "driftbench/model.h"
#include "driftbench/server.h"
#include "server/server_internal.h"
#include "util/util.h"

typedef enum job_kind { JOB_GEN, JOB_EMBED } job_kind;

typedef struct job {
    job_kind kind;
    drift_gen_params params;   /* shared part; seed carried in offs */
    int32_t **toks;            /* nseq prompts (owned) */
    size_t *lens;
    int64_t *offs;
    size_t nseq;
    drift_generation *gens;    /* nseq results */
    char **texts;              /* embed: borrowed from the request */
    size_t ntexts;
    float *vecs;               /* embed: ntexts * dim */
    drift_status st;
    char errmsg[512];
    int done;
    int running;               /* taken by the scheduler */
    int cancel;                /* end it: client gone (departed) or drain deadline */
    int departed;
    struct job *next;
} job;

typedef enum conn_state { CONN_WAIT, CONN_BODY, CONN_BUSY } conn_state;

/* One TCP connection (MHD's socket context); see the top of the file. */
typedef struct srv_conn {
    int fd;
    int family;                /* AF_INET / AF_INET6 / other (no per-address limit) */
    unsigned char addr[16];
    conn_state state;
    double since_ms;           /* start of the current wait: accept or the previous reply */
    int closing;               /* shut down (timed out or evicted): no longer counted */
    job *job;                  /* BUSY: the job its request waits for */
    struct srv_conn *prev, *next;
} srv_conn;

struct drift_server {
    drift_server_opts o;
    char *name;        /* served name */
    char *alias;       /* general.name */
    drift_model *m;
    const drift_model_info *info;
    struct MHD_Daemon *d;
    int port;
    srv_limits lim;
    pthread_t sched, reaper;
    int sched_started, reaper_started;
    pthread_mutex_t mu;
    pthread_cond_t cv_sched, cv_done, cv_reap;
    job *head, *tail;
    int queued_seqs;   /* queued + running */
    int stopping;      /* scheduler: exit when the queue is empty */
    int reaper_stop;
    int draining;      /* refuse new work */
    int abort;         /* drain deadline passed: cancel everything */
    int drained;       /* drift_server_drain done */
    int active;        /* requests between first call and completion */
    srv_conn *conns;   /* every open connection */
    int nconns;        /* of them not closing */
    uint64_t next_id;
    drift_server_stats stats;
};

/* ---------------------------------------------------------------------------
 * Scheduler
 * ------------------------------------------------------------------------- */
static int params_same(const drift_gen_params *a, const drift_gen_params *b) {
    if (a->temperature != b->temperature || a->top_p != b->top_p || a->top_k != b->top_k ||
        a->max_tokens != b->max_tokens || a->logprobs != b->logprobs || a->n_stop != b->n_stop)
        return 0;
    for (int i = 0; i < a->n_stop; i++)
        if (strcmp(a->stop[i], b->stop[i])) return 0;
    return 1;
}

static int job_cancelled(drift_server *s, const job *j) {
    pthread_mutex_lock(&s->mu);
    int c = j->cancel || s->abort;
    pthread_mutex_unlock(&s->mu);
    return c;
}

/* Marks j cancelled (under mu: reads departed). */
static void set_cancelled(job *j) {
    j->st = DRIFT_ERR_CANCELLED;
    snprintf(j->errmsg, sizeof j->errmsg, "%s",
             j->departed ? "the client closed the connection" : "the server stopped before this request finished");
}

static void run_embed(drift_server *s, job *j) {
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

typedef struct batch_ctx {
    drift_server *s;
    job **seq_job; /* job of each sequence */
} batch_ctx;

/* drift_model_generate_cancellable's hook: the sequence's job is cancelled
 * (client gone) or the drain deadline has passed. */
static int seq_cancelled(void *user, size_t i) {
    batch_ctx *b = user;
    return job_cancelled(b->s, b->seq_job[i]);
}

/* Runs jobs[0..nj) (same params) as one drift_model_generate call. */
static void run_batch(drift_server *s, job **jobs, size_t nj) {
    size_t total = 0;
    for (size_t i = 0; i < nj; i++) total += jobs[i]->nseq;
    const int32_t **toks = malloc(total * sizeof *toks);
    size_t *lens = malloc(total * sizeof *lens);
    int64_t *offs = malloc(total * sizeof *offs);
    job **seq_job = malloc(total * sizeof *seq_job);
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
        job *j = jobs[i];
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

static void *sched_main(void *arg) {
    drift_server *s = arg;
    size_t cap = 64;
    job **take = malloc(cap * sizeof *take);
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->head && !s->stopping) pthread_cond_wait(&s->cv_sched, &s->mu);
        if (!s->head) break; /* stopping and drained */
        if (s->o.batch_window_ms > 0 && s->queued_seqs < s->o.max_batch) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            long ns = ts.tv_nsec + (long)(s->o.batch_window_ms * 1e6);
            ts.tv_sec += ns / 1000000000L;
            ts.tv_nsec = ns % 1000000000L;
            pthread_cond_timedwait(&s->cv_sched, &s->mu, &ts);
        }
        /* the oldest job, then compatible ones in arrival order */
        job *first = s->head;
        size_t nj = 0, seqs = 0;
        job **link = &s->head;
        job *prev = NULL;
        for (job *j = s->head; j;) {
            job *nx = j->next;
            int fits = j == first || (j->kind == JOB_GEN && first->kind == JOB_GEN &&
                                      params_same(&j->params, &first->params) &&
                                      seqs + j->nseq <= (size_t)s->o.max_batch);
            if (fits && nj < cap && (first->kind == JOB_GEN || j == first)) {
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
            if (first->kind == JOB_EMBED || seqs >= (size_t)s->o.max_batch) break;
        }
        pthread_mutex_unlock(&s->mu);
        if (first->kind == JOB_EMBED) run_embed(s, first);
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

/* Takes queued job j out of the queue and completes it as cancelled. Under mu. */
static void cancel_queued(drift_server *s, job *j) {
    job *prev = NULL;
    for (job *q = s->head; q; prev = q, q = q->next) {
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

/* Ends job j, whose client no longer waits for it: out of the queue at once,
 * or, running, at its next decode step. Under mu. */
static void cancel_departed(drift_server *s, job *j) {
    if (j->done || j->cancel) return;
    j->cancel = 1;
    j->departed = 1;
    if (!j->running) cancel_queued(s, j);
}

/* Queues j (counting nseq against max_queue) and waits for it. 0 ok; -1 when
 * the queue is full or the server drains (e says 503). The connection's
 * tracker c (NULL when untracked) points at the job while it waits, so the
 * reaper can cancel it when the client leaves. */
static int submit_wait(drift_server *s, job *j, srv_conn *c, srv_error *e) {
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
    if (c) c->job = j;
    pthread_cond_signal(&s->cv_sched);
    while (!j->done) pthread_cond_wait(&s->cv_done, &s->mu);
    if (c) c->job = NULL;
    if (j->st == DRIFT_ERR_CANCELLED) { /* (a job whose sequences had all ended is answered) */
        if (j->departed) s->stats.departed++;
        else s->stats.cancelled++;
    }
    pthread_mutex_unlock(&s->mu);
    return 0;
}

/* ---------------------------------------------------------------------------
 * Replies
 * ------------------------------------------------------------------------- */
typedef struct reply {
    int status;
    char *body;        /* malloc'd */
    const char *ctype;
    int retry_after;   /* seconds, 0 = none */
    const char *allow; /* 405 */
    int cancelled;     /* the request's work was cancelled (counted apart) */
    int drop;          /* the client is gone: close without a reply */
} reply;

static void reply_error(reply *r, const srv_error *e) {
    r->status = e->http_status;
    r->body = srv_error_json(e);
    r->ctype = "application/json";
    if (e->http_status == 503) r->retry_after = 1;
}

static void reply_json(reply *r, int status, json_t *o) {
    r->status = status;
    r->body = o ? json_dumps(o, JSON_COMPACT) : NULL;
    r->ctype = "application/json";
    json_decref(o);
    if (!r->body) {
        srv_error e;
        srv_error_set(&e, 500, NULL, NULL, "out of memory rendering the reply");
        reply_error(r, &e);
    }
}

static json_t *jstr_clean(const char *s, size_t n) {
    char *c = drift_utf8_clean(s ? s : "", s ? n : 0);
    json_t *v = c ? json_string(c) : NULL;
    free(c);
    return v;
}

static json_t *token_json(const drift_server *s, int32_t id, char **raw_out) {
    char *t = drift_model_token_text(s->m, id);
    json_t *v = jstr_clean(t, t ? strlen(t) : 0);
    if (raw_out) *raw_out = t;
    else free(t);
    return v;
}

static json_t *bytes_json(const char *t) {
    json_t *a = json_array();
    for (const unsigned char *p = (const unsigned char *)(t ? t : ""); *p && a; p++) json_array_append_new(a, json_integer(*p));
    return a;
}

/* Completions logprobs of tokens [t0, t1) of g. */
static json_t *lp_completions(const drift_server *s, const drift_generation *g, int t0, int t1, int top) {
    json_t *toks = json_array(), *lps = json_array(), *tops = json_array();
    for (int t = t0; t < t1; t++) {
        const drift_token_logprob *lp = &g->lp[t];
        json_array_append_new(toks, token_json(s, lp->id, NULL));
        json_array_append_new(lps, json_real(lp->logprob));
        json_t *d = json_object();
        for (int k = 0; k < lp->n_top && k < top; k++) {
            json_t *tk = token_json(s, lp->top_id[k], NULL);
            if (tk && !json_object_get(d, json_string_value(tk)))
                json_object_set_new(d, json_string_value(tk), json_real(lp->top_logprob[k]));
            json_decref(tk);
        }
        json_array_append_new(tops, d);
    }
    return json_pack("{s:o, s:o, s:o}", "tokens", toks, "token_logprobs", lps, "top_logprobs", tops);
}

/* Chat logprobs content entries of tokens [t0, t1). */
static json_t *lp_chat(const drift_server *s, const drift_generation *g, int t0, int t1, int top) {
    json_t *content = json_array();
    for (int t = t0; t < t1; t++) {
        const drift_token_logprob *lp = &g->lp[t];
        char *raw;
        json_t *tk = token_json(s, lp->id, &raw);
        json_t *alts = json_array();
        for (int k = 0; k < lp->n_top && k < top; k++) {
            char *r2;
            json_t *tk2 = token_json(s, lp->top_id[k], &r2);
            json_array_append_new(alts, json_pack("{s:o, s:f, s:o}", "token", tk2, "logprob", lp->top_logprob[k], "bytes",
                                                  bytes_json(r2)));
            free(r2);
        }
        json_array_append_new(content, json_pack("{s:o, s:f, s:o, s:o}", "token", tk, "logprob", lp->logprob, "bytes",
                                                 bytes_json(raw), "top_logprobs", alts));
        free(raw);
    }
    return json_pack("{s:o}", "content", content);
}

static json_t *usage_json(int prompt, int completion) {
    return json_pack("{s:i, s:i, s:i}", "prompt_tokens", prompt, "completion_tokens", completion, "total_tokens",
                     prompt + completion);
}

typedef struct gen_ctx {
    const srv_request *rq;
    drift_generation *gens; /* nprompts * n */
    size_t nprompts;
    int *plens;             /* per prompt */
    char id[48];
    long long created;
} gen_ctx;

static void usage_counts(const gen_ctx *c, int *pt, int *ct) {
    *pt = 0;
    *ct = 0;
    for (size_t p = 0; p < c->nprompts; p++) *pt += c->plens[p];
    for (size_t i = 0; i < c->nprompts * (size_t)c->rq->n; i++) *ct += c->gens[i].n_tokens;
}

static json_t *render_full(const drift_server *s, const gen_ctx *c) {
    int chat = c->rq->ep == SRV_EP_CHAT;
    json_t *choices = json_array();
    size_t nc = c->nprompts * (size_t)c->rq->n;
    for (size_t i = 0; i < nc; i++) {
        const drift_generation *g = &c->gens[i];
        json_t *text = jstr_clean(g->text, g->text ? strlen(g->text) : 0);
        json_t *lp = json_null();
        if (c->rq->want_logprobs) { /* empty arrays when no token was generated */
            json_decref(lp);
            int nt = g->lp ? g->n_tokens : 0;
            lp = chat ? lp_chat(s, g, 0, nt, c->rq->top_logprobs) : lp_completions(s, g, 0, nt, c->rq->top_logprobs);
        }
        const char *fr = g->finish_reason ? g->finish_reason : "length";
        json_t *ch = chat ? json_pack("{s:i, s:{s:s, s:o}, s:o, s:s}", "index", (int)i, "message", "role", "assistant",
                                      "content", text, "logprobs", lp, "finish_reason", fr)
                          : json_pack("{s:i, s:o, s:o, s:s}", "index", (int)i, "text", text, "logprobs", lp,
                                      "finish_reason", fr);
        json_array_append_new(choices, ch);
    }
    int pt, ct;
    usage_counts(c, &pt, &ct);
    return json_pack("{s:s, s:s, s:I, s:s, s:o, s:o, s:s}", "id", c->id, "object", chat ? "chat.completion" : "text_completion",
                     "created", (json_int_t)c->created, "model", s->name, "choices", choices, "usage", usage_json(pt, ct),
                     "system_fingerprint", "driftbench");
}

static int sse_add(drift_buf *b, json_t *o) {
    char *t = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    int rc = t ? buf_printf(b, "data: %s\n\n", t) : -1;
    free(t);
    return rc;
}

static json_t *chunk_new(const drift_server *s, const gen_ctx *c, json_t *choice) {
    int chat = c->rq->ep == SRV_EP_CHAT;
    return json_pack("{s:s, s:s, s:I, s:s, s:[o]}", "id", c->id, "object", chat ? "chat.completion.chunk" : "text_completion",
                     "created", (json_int_t)c->created, "model", s->name, "choices", choice);
}

/* Stream: one chunk per token, cut before a non-continuation byte so every
 * chunk is valid UTF-8 and the chunks join to the full reply's text. */
static char *render_stream(const drift_server *s, const gen_ctx *c) {
    int chat = c->rq->ep == SRV_EP_CHAT;
    drift_buf b = {0};
    int bad = 0;
    size_t nc = c->nprompts * (size_t)c->rq->n;
    for (size_t i = 0; i < nc && !bad; i++) {
        const drift_generation *g = &c->gens[i];
        const char *text = g->text ? g->text : "";
        size_t tlen = strlen(text), done = 0;
        if (chat)
            bad |= sse_add(&b, chunk_new(s, c, json_pack("{s:i, s:{s:s, s:s}, s:n, s:n}", "index", (int)i, "delta", "role",
                                                         "assistant", "content", "", "logprobs", "finish_reason")));
        for (int t = 0; t < g->n_tokens && !bad; t++) {
            size_t upto;
            if (t == g->n_tokens - 1) {
                upto = tlen;
            } else {
                size_t L = 0;
                char *pre = drift_model_detokenize(s->m, g->tokens, (size_t)t + 1, &L);
                free(pre);
                upto = L < tlen ? L : tlen;
                while (upto < tlen && ((unsigned char)text[upto] & 0xC0) == 0x80) upto++;
                if (upto < done) upto = done;
            }
            json_t *piece = jstr_clean(text + done, upto - done);
            done = upto;
            json_t *lp = json_null();
            if (c->rq->want_logprobs && g->lp) {
                json_decref(lp);
                lp = chat ? lp_chat(s, g, t, t + 1, c->rq->top_logprobs) : lp_completions(s, g, t, t + 1, c->rq->top_logprobs);
            }
            json_t *ch = chat ? json_pack("{s:i, s:{s:o}, s:o, s:n}", "index", (int)i, "delta", "content", piece, "logprobs",
                                          lp, "finish_reason")
                              : json_pack("{s:i, s:o, s:o, s:n}", "index", (int)i, "text", piece, "logprobs", lp,
                                          "finish_reason");
            bad |= sse_add(&b, chunk_new(s, c, ch));
        }
        const char *fr = g->finish_reason ? g->finish_reason : "length";
        json_t *last = chat ? json_pack("{s:i, s:{}, s:n, s:s}", "index", (int)i, "delta", "logprobs", "finish_reason", fr)
                            : json_pack("{s:i, s:s, s:n, s:s}", "index", (int)i, "text", "", "logprobs", "finish_reason", fr);
        bad |= sse_add(&b, chunk_new(s, c, last));
    }
    if (c->rq->include_usage && !bad) {
        int pt, ct;
        usage_counts(c, &pt, &ct);
        bad |= sse_add(&b, json_pack("{s:s, s:s, s:I, s:s, s:[], s:o}", "id", c->id, "object",
                                     chat ? "chat.completion.chunk" : "text_completion", "created", (json_int_t)c->created,
                                     "model", s->name, "choices", "usage", usage_json(pt, ct)));
    }
    bad |= buf_printf(&b, "data: [DONE]\n\n");
    if (bad) {
        buf_free(&b);
        return NULL;
    }
    return buf_steal(&b);
}

/* ---------------------------------------------------------------------------
 * Endpoints
 * ------------------------------------------------------------------------- */
static int model_ok(const drift_server *s, const srv_request *rq, srv_error *e) {
    if (!rq->model || !strcmp(rq->model, s->name) || (s->alias && !strcmp(rq->model, s->alias))) return 0;
    return srv_error_set(e, 404, "model", "model_not_found", "the model '%.200s' does not exist (this server serves '%s')",
                         rq->model, s->name);
}

/* Prompt tokens of a chat request: the model's built-in template with one
 * user message (what the embedded target's chat api sends). */
static int chat_prompt(const drift_server *s, const srv_request *rq, int32_t **ids, size_t *n, srv_error *e) {
    const char *user = NULL;
    for (size_t i = 0; i < rq->n_messages; i++) {
        const srv_message *m = &rq->messages[i];
        if (!strcmp(m->role, "user") && !user) {
            user = m->content;
        } else {
            return srv_error_set(e, 400, "messages", "unsupported_value",
                                 "the embedded chat template takes one user message; messages[%zu] (%s) is not supported",
                                 i, m->role);
        }
    }
    drift_error err;
    if (drift_model_chat_tokens(s->m, user, ids, n, &err))
        return srv_error_set(e, 400, "messages", "invalid_value", "cannot tokenize the message: %s", err.msg);
    return 0;
}

/* A cancelled job's reply: none when the client left, else 503. */
static void reply_cancelled(reply *r, const job *j) {
    srv_error e;
    srv_error_set(&e, 503, NULL, "shutting_down", "%s", j->errmsg);
    reply_error(r, &e);
    r->cancelled = 1;
    r->drop = j->departed;
}

static void do_generate(drift_server *s, srv_conn *sc, srv_endpoint ep, const char *body, size_t len, reply *r) {
    srv_request rq;
    srv_error e;
    job j;
    memset(&j, 0, sizeof j);
    gen_ctx c;
    memset(&c, 0, sizeof c);
    if (srv_request_parse(ep, body, len, &s->lim, &rq, &e)) {
        reply_error(r, &e);
        return;
    }
    int fail = model_ok(s, &rq, &e);
    size_t np = ep == SRV_EP_CHAT ? 1 : rq.n_prompts;
    size_t nseq = np * (size_t)rq.n;
    if (!fail && nseq > (size_t)s->o.max_queue)
        fail = srv_error_set(&e, 400, "n", "invalid_value", "%zu prompts x n=%d = %zu sequences is more than the server takes (%d)",
                             np, rq.n, nseq, s->o.max_queue);
    int32_t **ptok = fail ? NULL : calloc(np, sizeof *ptok);
    size_t *plen = fail ? NULL : calloc(np, sizeof *plen);
    c.plens = fail ? NULL : calloc(np, sizeof *c.plens);
    j.toks = fail ? NULL : calloc(nseq, sizeof *j.toks);
    j.lens = fail ? NULL : calloc(nseq, sizeof *j.lens);
    j.offs = fail ? NULL : calloc(nseq, sizeof *j.offs);
    j.gens = fail ? NULL : calloc(nseq, sizeof *j.gens);
    if (!fail && (!ptok || !plen || !c.plens || !j.toks || !j.lens || !j.offs || !j.gens))
        fail = srv_error_set(&e, 500, NULL, NULL, "out of memory");
    for (size_t p = 0; p < np && !fail; p++) {
        if (ep == SRV_EP_CHAT) {
            fail = chat_prompt(s, &rq, &ptok[p], &plen[p], &e);
        } else {
            drift_error err;
            if (drift_model_tokenize(s->m, rq.prompts[p], strlen(rq.prompts[p]), -1, 0, &ptok[p], &plen[p], &err))
                fail = srv_error_set(&e, 400, "prompt", "invalid_value", "cannot tokenize prompt %zu: %s", p, err.msg);
        }
        if (fail) break;
        if (plen[p] == 0)
            fail = srv_error_set(&e, 400, ep == SRV_EP_CHAT ? "messages" : "prompt", "invalid_value", "prompt %zu has no tokens", p);
        else if (plen[p] >= (size_t)s->info->n_ctx_train)
            fail = srv_error_set(&e, 400, ep == SRV_EP_CHAT ? "messages" : "prompt", "context_length_exceeded",
                                 "prompt %zu has %zu tokens; this model's context is %d tokens", p, plen[p],
                                 s->info->n_ctx_train);
        c.plens[p] = (int)plen[p];
    }
    if (!fail) {
        j.kind = JOB_GEN;
        j.params = rq.params;
        j.nseq = nseq;
        for (size_t p = 0; p < np; p++)
            for (int q = 0; q < rq.n; q++) {
                size_t k = p * (size_t)rq.n + (size_t)q;
                j.toks[k] = ptok[p];
                j.lens[k] = plen[p];
                j.offs[k] = (int64_t)((uint64_t)rq.params.seed + (uint64_t)q);
            }
        fail = submit_wait(s, &j, sc, &e);
        if (!fail && j.st == DRIFT_ERR_CANCELLED) {
            reply_cancelled(r, &j);
            fail = 1;
        } else if (!fail && j.st) {
            fail = srv_error_set(&e, 500, NULL, NULL, "generation failed: %s", j.errmsg);
        }
        for (size_t k = 0; k < nseq && !fail; k++)
            if (j.gens[k].error) fail = srv_error_set(&e, 400, NULL, "invalid_value", "%s", j.gens[k].error);
    }
    if (fail) {
        if (!r->cancelled) reply_error(r, &e);
    } else {
        c.rq = &rq;
        c.gens = j.gens;
        c.nprompts = np;
        c.created = (long long)time(NULL);
        pthread_mutex_lock(&s->mu);
        uint64_t id = ++s->next_id;
        pthread_mutex_unlock(&s->mu);
        snprintf(c.id, sizeof c.id, "%s-%llx%06llx", ep == SRV_EP_CHAT ? "chatcmpl" : "cmpl", (unsigned long long)c.created,
                 (unsigned long long)id);
        if (rq.stream) {
            r->status = 200;
            r->body = render_stream(s, &c);
            r->ctype = "text/event-stream";
            if (!r->body) {
                srv_error_set(&e, 500, NULL, NULL, "out of memory rendering the reply");
                reply_error(r, &e);
            }
        } else {
            reply_json(r, 200, render_full(s, &c));
        }
    }
    for (size_t k = 0; j.gens && k < nseq; k++) drift_generation_clear(&j.gens[k]);
    for (size_t p = 0; ptok && p < np; p++) free(ptok[p]);
    free(ptok);
    free(plen);
    free(c.plens);
    free(j.toks);
    free(j.lens);
    free(j.offs);
    free(j.gens);
    srv_request_free(&rq);
}

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static json_t *base64_floats(const float *v, int n) {
    const unsigned char *b = (const unsigned char *)v; /* little-endian float32, as OpenAI's */
    size_t len = (size_t)n * 4;
    char *o = malloc((len + 2) / 3 * 4 + 1);
    if (!o) return NULL;
    size_t j = 0;
    for (size_t i = 0; i < len; i += 3) {
        unsigned x = (unsigned)b[i] << 16 | (i + 1 < len ? (unsigned)b[i + 1] << 8 : 0) | (i + 2 < len ? b[i + 2] : 0);
        o[j++] = B64[(x >> 18) & 63];
        o[j++] = B64[(x >> 12) & 63];
        o[j++] = i + 1 < len ? B64[(x >> 6) & 63] : '=';
        o[j++] = i + 2 < len ? B64[x & 63] : '=';
    }
    o[j] = 0;
    json_t *s = json_string(o);
    free(o);
    return s;
}

static void do_embed(drift_server *s, srv_conn *sc, const char *body, size_t len, reply *r) {
    srv_request rq;
    srv_error e;
    if (srv_request_parse(SRV_EP_EMBEDDINGS, body, len, &s->lim, &rq, &e)) {
        reply_error(r, &e);
        return;
    }
    job j;
    memset(&j, 0, sizeof j);
    j.kind = JOB_EMBED;
    j.texts = rq.prompts;
    j.ntexts = rq.n_prompts;
    j.nseq = rq.n_prompts;
    int fail = model_ok(s, &rq, &e);
    int ptok = 0;
    for (size_t i = 0; i < rq.n_prompts && !fail; i++) {
        int32_t *ids;
        size_t n;
        drift_error err;
        if (drift_model_tokenize(s->m, rq.prompts[i], strlen(rq.prompts[i]), -1, 0, &ids, &n, &err)) {
            fail = srv_error_set(&e, 400, "input", "invalid_value", "cannot tokenize input %zu: %s", i, err.msg);
            break;
        }
        free(ids);
        if (n > (size_t)s->info->n_ctx_train)
            fail = srv_error_set(&e, 400, "input", "context_length_exceeded",
                                 "input %zu has %zu tokens; this model's context is %d tokens", i, n, s->info->n_ctx_train);
        ptok += (int)n;
    }
    if (!fail) fail = submit_wait(s, &j, sc, &e);
    if (!fail && j.st == DRIFT_ERR_CANCELLED) {
        reply_cancelled(r, &j);
        fail = 1;
    } else if (!fail && j.st) {
        fail = srv_error_set(&e, 500, NULL, NULL, "embedding failed: %s", j.errmsg);
    }
    if (fail) {
        if (!r->cancelled) reply_error(r, &e);
    } else {
        int D = s->info->dim;
        json_t *data = json_array();
        for (size_t i = 0; i < rq.n_prompts; i++) {
            const float *v = j.vecs + i * (size_t)D;
            json_t *emb;
            if (rq.emb_base64) {
                emb = base64_floats(v, D);
            } else {
                emb = json_array();
                for (int d = 0; d < D && emb; d++) json_array_append_new(emb, json_real(v[d]));
            }
            json_array_append_new(data, json_pack("{s:s, s:i, s:o}", "object", "embedding", "index", (int)i, "embedding", emb));
        }
        reply_json(r, 200,
                   json_pack("{s:s, s:o, s:s, s:{s:i, s:i}}", "object", "list", "data", data, "model", s->name, "usage",
                             "prompt_tokens", ptok, "total_tokens", ptok));
    }
    free(j.vecs);
    srv_request_free(&rq);
}

/* ---------------------------------------------------------------------------
 * libmicrohttpd glue
 * ------------------------------------------------------------------------- */
typedef struct conn { /* one request */
    drift_buf body;
    int too_big;
    int replied;
    srv_conn *sc;      /* its connection's tracker (NULL: untracked) */
} conn;

static void conn_set_state(drift_server *s, srv_conn *sc, conn_state st) {
    if (!sc) return;
    pthread_mutex_lock(&s->mu);
    sc->state = st;
    if (st == CONN_WAIT) sc->since_ms = drift_now_ms();
    pthread_mutex_unlock(&s->mu);
}

static enum MHD_Result send_reply(struct MHD_Connection *c, reply *r) {
    if (!r->body) {
        srv_error e;
        srv_error_set(&e, 500, NULL, NULL, "out of memory");
        reply_error(r, &e);
    }
    const char *b = r->body ? r->body : "";
    struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(b), (void *)b, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(r->body);
        return MHD_NO;
    }
    r->body = NULL; /* owned by the response now */
    MHD_add_response_header(resp, "Content-Type", r->ctype ? r->ctype : "application/json");
    if (r->ctype && !strcmp(r->ctype, "text/event-stream")) MHD_add_response_header(resp, "Cache-Control", "no-cache");
    if (r->retry_after > 0) {
        char ra[16];
        snprintf(ra, sizeof ra, "%d", r->retry_after);
        MHD_add_response_header(resp, "Retry-After", ra);
    }
    if (r->allow) MHD_add_response_header(resp, "Allow", r->allow);
    enum MHD_Result rc = MHD_queue_response(c, (unsigned)r->status, resp);
    MHD_destroy_response(resp);
    return rc;
}

static void count_status(drift_server *s, const reply *r) {
    pthread_mutex_lock(&s->mu);
    if (r->cancelled) { /* counted as cancelled or departed */
    } else if (r->status < 300) {
        s->stats.answered++;
        if (s->draining) s->stats.drained++;
    } else if (r->status == 503) {
        s->stats.overloaded++;
    } else if (r->status < 500) {
        s->stats.rejected++;
    }
    pthread_mutex_unlock(&s->mu);
}

static void route(drift_server *s, srv_conn *sc, const char *url, const char *method, const char *body, size_t len,
                  reply *r) {
    static const struct {
        const char *path;
        const char *method;
    } routes[] = {{"/v1/completions", "POST"}, {"/v1/chat/completions", "POST"}, {"/v1/embeddings", "POST"},
                  {"/v1/models", "GET"},       {"/health", "GET"}};
    srv_error e;
    for (size_t i = 0; i < sizeof routes / sizeof *routes; i++) {
        if (strcmp(url, routes[i].path)) continue;
        int head = !strcmp(method, "HEAD") && !strcmp(routes[i].method, "GET");
        if (strcmp(method, routes[i].method) && !head) {
            srv_error_set(&e, 405, NULL, "method_not_allowed", "%s is not allowed on %s (use %s)", method, url,
                          routes[i].method);
            reply_error(r, &e);
            r->allow = routes[i].method;
            return;
        }
        switch (i) {
        case 0: do_generate(s, sc, SRV_EP_COMPLETIONS, body, len, r); return;
        case 1: do_generate(s, sc, SRV_EP_CHAT, body, len, r); return;
        case 2: do_embed(s, sc, body, len, r); return;
        case 3:
            reply_json(r, 200, json_pack("{s:s, s:[{s:s, s:s, s:I, s:s}]}", "object", "list", "data", "id", s->name, "object",
                                         "model", "created", (json_int_t)0, "owned_by", "driftbench"));
            return;
        default: {
            pthread_mutex_lock(&s->mu);
            int draining = s->draining;
            pthread_mutex_unlock(&s->mu);
            reply_json(r, draining ? 503 : 200, json_pack("{s:s}", "status", draining ? "draining" : "ok"));
            return;
        }
        }
    }
    srv_error_set(&e, 404, NULL, "not_found", "no such endpoint: %s %.200s", method, url);
    reply_error(r, &e);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *mc, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls) {
    (void)version;
    drift_server *s = cls;
    conn *c = *con_cls;
    if (!c) {
        c = calloc(1, sizeof *c);
        if (!c) return MHD_NO;
        *con_cls = c;
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        c->sc = ci ? ci->socket_context : NULL;
        pthread_mutex_lock(&s->mu);
        s->active++;
        s->stats.requests++;
        if (c->sc) c->sc->state = CONN_BODY; /* headers in; the deadline still runs */
        pthread_mutex_unlock(&s->mu);
        const char *cl = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > s->o.max_body_bytes) {
            srv_error e;
            reply r = {0};
            srv_error_set(&e, 413, NULL, "request_too_large", "the body of %s bytes is over the limit of %zu bytes", cl,
                          s->o.max_body_bytes);
            reply_error(&r, &e);
            c->replied = 1;
            conn_set_state(s, c->sc, CONN_BUSY);
            count_status(s, &r);
            return send_reply(mc, &r);
        }
        return MHD_YES;
    }
    if (*upload_data_size) {
        if (!c->too_big && c->body.len + *upload_data_size > s->o.max_body_bytes) {
            c->too_big = 1;
            buf_free(&c->body);
        }
        if (!c->too_big && buf_append(&c->body, upload_data, *upload_data_size)) return MHD_NO;
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (c->replied) return MHD_YES;
    c->replied = 1;
    conn_set_state(s, c->sc, CONN_BUSY);
    reply r = {0};
    if (c->too_big) {
        srv_error e;
        srv_error_set(&e, 413, NULL, "request_too_large", "the body is over the limit of %zu bytes", s->o.max_body_bytes);
        reply_error(&r, &e);
    } else {
        route(s, c->sc, url, method, c->body.data ? c->body.data : "", c->body.len, &r);
    }
    buf_free(&c->body);
    count_status(s, &r);
    if (r.drop) { /* nobody to answer: close the connection */
        free(r.body);
        return MHD_NO;
    }
    return send_reply(mc, &r);
}

static void on_completed(void *cls, struct MHD_Connection *mc, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)mc;
    (void)toe;
    drift_server *s = cls;
    conn *c = *con_cls;
    if (!c) return;
    buf_free(&c->body);
    pthread_mutex_lock(&s->mu);
    if (c->sc) { /* keep-alive: the next request must come within the timeout */
        c->sc->state = CONN_WAIT;
        c->sc->since_ms = drift_now_ms();
    }
    s->active--;
    pthread_cond_broadcast(&s->cv_done);
    pthread_mutex_unlock(&s->mu);
    free(c);
    *con_cls = NULL;
}

/* ---------------------------------------------------------------------------
 * Connection limits, request deadline, departed clients
 * ------------------------------------------------------------------------- */
static void addr_key(const struct sockaddr *a, int *family, unsigned char key[16]) {
    memset(key, 0, 16);
    *family = a ? a->sa_family : AF_UNSPEC;
    if (*family == AF_INET) memcpy(key, &((const struct sockaddr_in *)(const void *)a)->sin_addr, 4);
    else if (*family == AF_INET6) memcpy(key, &((const struct sockaddr_in6 *)(const void *)a)->sin6_addr, 16);
}

/* Closes tracked connection c (its thread sees EOF; MHD cleans up). Under mu:
 * the tracker leaves the list only in on_connection(CLOSED), which MHD calls
 * before it closes the descriptor, so c->fd is still c's. */
static void conn_shut(drift_server *s, srv_conn *c) {
    if (c->closing) return;
    c->closing = 1;
    s->nconns--;
    shutdown(c->fd, SHUT_RDWR);
}

/* MHD's accept policy: our per-address and total limits, with eviction of
 * the oldest waiting connection (see the top of the file). */
static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen) {
    (void)addrlen;
    drift_server *s = cls;
    int fam;
    unsigned char key[16];
    addr_key(addr, &fam, key);
    pthread_mutex_lock(&s->mu);
    int same = 0;
    srv_conn *old_same = NULL, *old_any = NULL;
    for (srv_conn *c = s->conns; c; c = c->next) {
        if (c->closing) continue;
        int mine = (fam == AF_INET || fam == AF_INET6) && c->family == fam && !memcmp(c->addr, key, 16);
        same += mine;
        if (c->state == CONN_BUSY) continue;
        if (!old_any || c->since_ms < old_any->since_ms) old_any = c;
        if (mine && (!old_same || c->since_ms < old_same->since_ms)) old_same = c;
    }
    srv_conn *victim = NULL;
    int need = 0;
    if (same >= s->o.per_client_connections) {
        need = 1;
        victim = old_same;
    } else if (s->nconns >= s->o.max_connections) {
        need = 1;
        victim = old_any;
    }
    enum MHD_Result ok = MHD_YES;
    if (victim) {
        conn_shut(s, victim);
        s->stats.evicted++;
    } else if (need) {
        s->stats.refused_connections++;
        ok = MHD_NO;
    }
    pthread_mutex_unlock(&s->mu);
    return ok;
}

static void on_connection(void *cls, struct MHD_Connection *mc, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe) {
    drift_server *s = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        srv_conn *c = calloc(1, sizeof *c);
        const union MHD_ConnectionInfo *fd = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
        const union MHD_ConnectionInfo *ad = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        if (!c || !fd) { /* untracked: MHD's own limits and timeout still hold */
            free(c);
            *socket_context = NULL;
            return;
        }
        c->fd = fd->connect_fd;
        addr_key(ad ? ad->client_addr : NULL, &c->family, c->addr);
        c->state = CONN_WAIT;
        c->since_ms = drift_now_ms();
        pthread_mutex_lock(&s->mu);
        c->next = s->conns;
        if (s->conns) s->conns->prev = c;
        s->conns = c;
        s->nconns++;
        pthread_mutex_unlock(&s->mu);
        *socket_context = c;
        return;
    }
    srv_conn *c = *socket_context;
    if (!c) return;
    pthread_mutex_lock(&s->mu);
    if (c->prev) c->prev->next = c->next;
    else s->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    if (!c->closing) s->nconns--;
    pthread_mutex_unlock(&s->mu);
    free(c);
    *socket_context = NULL;
}

/* Every 100 ms: close connections past the request deadline; cancel the jobs
 * of BUSY connections whose client has gone. */
static void *reaper_main(void *arg) {
    drift_server *s = arg;
    const double timeout_ms = s->o.request_timeout_s * 1000;
    struct pollfd *pf = NULL;
    srv_conn **pc = NULL;
    size_t cap = 0;
    pthread_mutex_lock(&s->mu);
    while (!s->reaper_stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&s->cv_reap, &s->mu, &ts);
        if (s->reaper_stop) break;
        double now = drift_now_ms();
        size_t n = 0;
        for (srv_conn *c = s->conns; c; c = c->next) {
            if (c->state != CONN_BUSY) {
                if (!c->closing && now - c->since_ms >= timeout_ms) {
                    conn_shut(s, c);
                    s->stats.timed_out++;
                }
            } else if (c->job && !c->job->done && !c->job->cancel) {
                if (c->closing) { /* shut while its body came in: nobody to answer */
                    cancel_departed(s, c->job);
                    continue;
                }
                if (n == cap) {
                    size_t nc = cap ? cap * 2 : 64;
                    struct pollfd *npf = realloc(pf, nc * sizeof *npf);
                    if (npf) pf = npf;
                    srv_conn **npc = npf ? realloc(pc, nc * sizeof *npc) : NULL;
                    if (npc) pc = npc;
                    if (!npf || !npc) break;
                    cap = nc;
                }
                pf[n] = (struct pollfd){.fd = c->fd, .events = POLLRDHUP};
                pc[n++] = c;
            }
        }
        /* under mu: no descriptor here can be closed and reused meanwhile */
        if (n && poll(pf, (nfds_t)n, 0) > 0)
            for (size_t i = 0; i < n; i++)
                if (pf[i].revents & (POLLRDHUP | POLLHUP | POLLERR)) cancel_departed(s, pc[i]->job);
    }
    pthread_mutex_unlock(&s->mu);
    free(pf);
    free(pc);
    return NULL;
}

/* ---------------------------------------------------------------------------
 * Life cycle
 * ------------------------------------------------------------------------- */
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
    return drift_strndup(b, dot && dot != b ? (size_t)(dot - b) : strlen(b));
}

/* Profile from a name or a spec, with the server's overrides. */
static drift_status server_profile(const drift_server_opts *o, drift_numeric_profile *p, drift_error *err) {
    const char *spec = o->profile && *o->profile ? o->profile : "cpu-f32";
    drift_status st = strchr(spec, '=') ? drift_profile_parse(spec, p, err) : drift_profile_get(spec, p, err);
    if (st) return drift_error_prefix(err, "--profile: ");
    if ((st = drift_profile_set(p, "batch_invariant", o->batch_invariant ? "1" : "0", err))) return st;
    if (o->threads > 0) {
        char t[16];
        snprintf(t, sizeof t, "%d", o->threads);
        if ((st = drift_profile_set(p, "threads", t, err))) return st;
    }
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

/* Stops and joins the scheduler (after it empties its queue) and the reaper. */
static void stop_threads(drift_server *s) {
    pthread_mutex_lock(&s->mu);
    s->stopping = 1;
    s->reaper_stop = 1;
    pthread_cond_broadcast(&s->cv_sched);
    pthread_cond_broadcast(&s->cv_reap);
    pthread_mutex_unlock(&s->mu);
    if (s->sched_started) pthread_join(s->sched, NULL);
    if (s->reaper_started) pthread_join(s->reaper, NULL);
    s->sched_started = s->reaper_started = 0;
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
    s->name = o->model_name && *o->model_name ? drift_strdup(o->model_name) : file_stem(o->model_path);
    s->alias = drift_strdup(s->info->name);
    if (!s->name || !s->alias) {
        server_free(s);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)o->port);
    const char *host = o->host && *o->host ? o->host : "127.0.0.1";
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) {
        server_free(s);
        return drift_error_set(err, DRIFT_ERR_INVALID, "server: host '%s' is not an IPv4 address", host);
    }
    if (pthread_create(&s->sched, NULL, sched_main, s)) {
        server_free(s);
        return drift_error_set(err, DRIFT_ERR_INTERNAL, "server: cannot start the scheduler thread");
    }
    s->sched_started = 1;
    if (pthread_create(&s->reaper, NULL, reaper_main, s)) {
        stop_threads(s);
        server_free(s);
        return drift_error_set(err, DRIFT_ERR_INTERNAL, "server: cannot start the reaper thread");
    }
    s->reaper_started = 1;
    /* MHD's limits: a backstop 2x above ours (evicted sockets linger until
     * MHD cleans them up); its inactivity timeout covers slow readers of a
     * reply */
    unsigned mhd_total = (unsigned)s->o.max_connections * 2, mhd_per_ip = (unsigned)s->o.per_client_connections * 2;
    unsigned idle_s = (unsigned)(s->o.request_timeout_s + 0.999);
    s->d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC, 0, on_accept,
                            s, on_request, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr, MHD_OPTION_CONNECTION_LIMIT,
                            mhd_total, MHD_OPTION_PER_IP_CONNECTION_LIMIT, mhd_per_ip, MHD_OPTION_CONNECTION_TIMEOUT,
                            idle_s < 1 ? 1u : idle_s, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                            MHD_OPTION_NOTIFY_CONNECTION, on_connection, s, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                            (size_t)64 * 1024, MHD_OPTION_END);
    if (!s->d) {
        stop_threads(s);
        server_free(s);
        return drift_error_set(err, DRIFT_ERR_IO, "server: cannot listen on %s:%d (in use, or not permitted)", host, o->port);
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : o->port;
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

/* Waits on cv_done (under mu) until cond() is false or until_ms passes. */
static void wait_until(drift_server *s, double until_ms, int (*cond)(const drift_server *)) {
    while (cond(s) && drift_now_ms() < until_ms) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 20 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&s->cv_done, &s->mu, &ts);
    }
}

static int work_left(const drift_server *s) { return s->active > 0 || s->head; }

static int replies_left(const drift_server *s) { return s->active > 0; }

void drift_server_drain(drift_server *s, double drain_timeout_s) {
    if (!s || s->drained) return;
    MHD_socket ls = MHD_quiesce_daemon(s->d); /* no new connections */
    if (ls != MHD_INVALID_SOCKET) close(ls);
    pthread_mutex_lock(&s->mu);
    s->draining = 1;
    /* requests already received finish: the scheduler keeps running */
    wait_until(s, drift_now_ms() + (drain_timeout_s > 0 ? drain_timeout_s : 0) * 1000, work_left);
    if (work_left(s)) { /* deadline: cancel what is queued or decoding */
        s->abort = 1;
        while (s->head) cancel_queued(s, s->head);
        pthread_cond_broadcast(&s->cv_done);
        wait_until(s, drift_now_ms() + 1000, replies_left); /* the 503s go out */
    }
    pthread_mutex_unlock(&s->mu);
    MHD_stop_daemon(s->d); /* closes every connection, joins their threads */
    s->d = NULL;
    stop_threads(s);
    s->drained = 1;
}

void drift_server_stop(drift_server *s, double drain_timeout_s) {
    if (!s) return;
    drift_server_drain(s, drain_timeout_s);
    server_free(s);
}
