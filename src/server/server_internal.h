/* server_internal.h - what the server's files share. Internal.
 *
 *   server.c           public API: options, start, statistics, drain, stop
 *   server_httpd.c     libmicrohttpd glue (the only file that includes it):
 *                      daemon, connection tracking and limits, the request
 *                      deadline and departed-client thread, body collection
 *   server_endpoints.c routes and handlers: request body -> srv_reply
 *                      (parse, check the model, tokenize, queue, render)
 *   server_scheduler.c the batching queue and the generation worker thread
 *   server_request.c   request parsing and validation (pure; fuzzed)
 *   server_reply.c     reply rendering: structs in, JSON / SSE text out
 *                      (pure; fuzzed)
 *
 * One mutex (drift_server.mu) guards every mutable field of drift_server and
 * of the queued jobs and tracked connections. */
#ifndef DRIFT_SERVER_INTERNAL_H
#define DRIFT_SERVER_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "driftbench/model.h"
#include "driftbench/server.h"
#include "driftbench/target.h"

/* ---------------------------------------------------------------------------
 * Requests (server_request.c)
 * ------------------------------------------------------------------------- */
typedef enum srv_endpoint {
    SRV_EP_COMPLETIONS = 0,
    SRV_EP_CHAT = 1,
    SRV_EP_EMBEDDINGS = 2
} srv_endpoint;

#define SRV_MAX_STOP 16
#define SRV_MAX_STOP_BYTES 256
#define SRV_MAX_PROMPTS 64   /* prompts of one completions request */
#define SRV_MAX_INPUTS 256   /* texts of one embeddings request */
#define SRV_MAX_MESSAGES 256 /* chat messages */
#define SRV_MAX_TOP 20       /* top alternatives (the engine keeps 20) */

typedef struct srv_limits {
    int max_n;            /* n: 1..max_n */
    int max_tokens_limit; /* max_tokens: 1..this */
} srv_limits;

typedef struct srv_message {
    char *role;    /* system, user, assistant, developer, tool */
    char *content; /* text (array-of-parts content joined) */
} srv_message;

typedef struct srv_request {
    srv_endpoint ep;
    char *model;            /* NULL when not given */
    char **prompts;         /* completions: prompts; embeddings: inputs */
    size_t n_prompts;
    srv_message *messages;  /* chat */
    size_t n_messages;
    drift_gen_params params; /* params.stop points into stop[] */
    char *stop[SRV_MAX_STOP];
    int n;                  /* choices per prompt */
    int stream;
    int include_usage;      /* stream_options.include_usage */
    int want_logprobs;      /* logprobs asked (completions logprobs >= 0, chat logprobs:true) */
    int top_logprobs;       /* alternatives per token, 0..20 */
    int emb_base64;         /* embeddings encoding_format=base64 */
    int prompt_logprobs;    /* vLLM's prompt_logprobs: alternatives per prompt token, 0..20; -1 = not asked */
    int echo;               /* completions echo: the prompt (and its logprobs) before the completion */
    int add_generation_prompt;  /* chat (vLLM's extension, default 1): open the assistant's turn */
    int continue_final_message; /* chat (vLLM's extension): the last message, an assistant's, is left open */
} srv_request;

typedef struct srv_error {
    int http_status;  /* 400, 404, 405, 413, 500, 503 */
    char message[512];
    char param[64];   /* "" = null */
    char code[64];    /* "" = null */
} srv_error;

/* Parses and validates the JSON body of a request to endpoint ep. On success
 * (return 0) *out owns its strings (srv_request_free). On failure (-1) e holds
 * the HTTP status (400) and an OpenAI-style message, param and code, and *out
 * holds nothing. body need not be NUL-terminated; any bytes are accepted. */
int srv_request_parse(srv_endpoint ep, const char *body, size_t len, const srv_limits *lim, srv_request *out,
                      srv_error *e);
void srv_request_free(srv_request *r);

/* Fills e (status, param and code may be NULL) and returns -1. */
int srv_error_set(srv_error *e, int status, const char *param, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* ---------------------------------------------------------------------------
 * Reply rendering (server_reply.c): pure functions, each returning malloc'd
 * text that is valid JSON (SSE: every data line but [DONE] is), or NULL only
 * when out of memory. Strings of any bytes are rendered as valid UTF-8
 * (util_utf8_clean); a logprob or embedding value that is not finite
 * (NaN, +-inf: JSON has no such numbers) is rendered as null.
 * ------------------------------------------------------------------------- */

/* The logprobs of one prompt's tokens (prompt_logprobs, echo): lp[i] for
 * token i >= 1 is its log-probability given tokens 0..i-1 with the top
 * alternatives (ids sorted by logprob, the lowest id first on ties), rank[i]
 * its rank in the whole vocabulary (1 = most likely); token 0 has none. */
typedef struct srv_prompt_lp {
    const int32_t *ids;         /* (n) the prompt's tokens */
    size_t n;
    const drift_token_logprob *lp; /* (n), entry 0 unused */
    const int *rank;            /* (n), entry 0 unused */
} srv_prompt_lp;

/* {"error":{"message":..,"type":..,"param":..,"code":..}}. */
char *srv_error_json(const srv_error *e);

/* What the renderer asks of the tokenizer (the served model, or a fuzzer's
 * table). */
typedef struct srv_vocab {
    /* Text of token id: malloc'd, NUL-terminated; NULL counts as "". */
    char *(*token_text)(const void *user, int32_t id);
    /* Length in bytes of the text of the first n of ids[]. */
    size_t (*prefix_bytes)(const void *user, const int32_t *ids, size_t n);
    const void *user;
} srv_vocab;

/* A completions or chat completion reply, its choices decoded. */
typedef struct srv_completion {
    srv_endpoint ep;              /* SRV_EP_COMPLETIONS or SRV_EP_CHAT */
    const char *id;               /* "cmpl-.." or "chatcmpl-.." */
    long long created;            /* unix seconds */
    const char *model;            /* the served name */
    const drift_generation *gens; /* choice i = gens[i]: text, tokens (n_tokens), lp (n_tokens or NULL), finish_reason */
    size_t n_choices;
    long long prompt_tokens;      /* usage: over all prompts */
    int want_logprobs;            /* render logprobs (empty when a choice has none) */
    int top_logprobs;             /* alternatives per token, 0..SRV_MAX_TOP */
    int include_usage;            /* stream: the usage chunk before [DONE] */
    srv_vocab vocab;
    const srv_prompt_lp *plp;     /* NULL, or per choice its prompt's logprobs (prompt_logprobs or echo) */
    int prompt_logprobs;          /* -1, or alternatives per prompt token (vLLM's shape) */
    int echo;                     /* completions: the prompt before the text, its tokens before the logprobs */
    const char *const *prompts;   /* echo: per choice its prompt's text */
} srv_completion;

/* The whole reply as one JSON object (text_completion / chat.completion). */
char *srv_render_completion(const srv_completion *c);

/* The reply as server-sent events: per choice (chat: a role chunk first) one
 * chunk per token, cut before a non-continuation byte so every chunk is valid
 * UTF-8 and a choice's chunks join to the whole reply's text (a text is its
 * tokens': empty when there are none), then a chunk with the finish reason;
 * the usage chunk when asked; "data: [DONE]". */
char *srv_render_stream(const srv_completion *c);

/* /v1/embeddings: n vectors of dim floats (vecs: n * dim), as arrays or as
 * base64 of their little-endian float32 bytes (OpenAI's encoding_format). */
char *srv_render_embeddings(const char *model, const float *vecs, size_t n, int dim, int base64,
                            long long prompt_tokens);

/* /v1/models: the one served model. */
char *srv_render_models(const char *model);

/* /health: {"status":"ok"} or {"status":"draining"}. */
char *srv_render_health(int draining);

/* ---------------------------------------------------------------------------
 * The server (shared by the files below)
 * ------------------------------------------------------------------------- */
typedef enum srv_job_kind { SRV_JOB_GEN, SRV_JOB_EMBED, SRV_JOB_SCORE } srv_job_kind;

/* One request's work, queued for the scheduler. The handler owns it (on its
 * stack) and fills the inputs; the scheduler fills the results. */
typedef struct srv_job {
    srv_job_kind kind;
    drift_gen_params params;   /* shared part; seed carried in offs */
    int32_t **toks;            /* gen: nseq prompts (owned by the handler) */
    size_t *lens;
    int64_t *offs;             /* gen: seed of each sequence */
    size_t nseq;               /* sequences (embed: ntexts), counted against max_queue */
    drift_generation *gens;    /* gen: nseq results */
    char **texts;              /* embed: borrowed from the request */
    size_t ntexts;
    float *vecs;               /* embed: ntexts * dim (malloc'd by the scheduler) */
    int score_top;             /* score: alternatives kept per prompt token (0..SRV_MAX_TOP) */
    drift_token_logprob **plp; /* score: nseq arrays of lens[k] entries (malloc'd by the scheduler) */
    int **prank;               /* score: nseq arrays of lens[k] ranks (malloc'd by the scheduler) */
    drift_status st;
    char errmsg[512];
    int done;
    int running;               /* taken by the scheduler */
    int cancel;                /* end it: client gone (departed) or drain deadline */
    int departed;
    struct srv_job *next;
} srv_job;

typedef struct srv_conn srv_conn; /* a tracked TCP connection (server_httpd.c) */
struct MHD_Daemon;

struct drift_server {
    drift_server_opts o;
    char *name;        /* served name */
    char *alias;       /* general.name */
    drift_model *m;
    const drift_model_info *info;
    srv_limits lim;
    pthread_mutex_t mu;
    pthread_cond_t cv_sched, cv_done, cv_reap;
    /* scheduler */
    pthread_t sched;
    int sched_started;
    srv_job *head, *tail;
    int queued_seqs;   /* queued + running */
    int stopping;      /* scheduler: exit when the queue is empty */
    int abort;         /* drain deadline passed: cancel everything */
    /* daemon and connections */
    struct MHD_Daemon *d;
    int port;
    pthread_t reaper;
    int reaper_started;
    int reaper_stop;
    srv_conn *conns;   /* every open connection */
    int nconns;        /* of them not closing */
    /* life cycle and replies */
    int draining;      /* refuse new work */
    int drained;       /* drift_server_drain done */
    int active;        /* requests between first call and completion */
    uint64_t next_id;
    drift_server_stats stats;
};

/* Waits on cv (mu held) for at most ms milliseconds (server.c). */
void srv_cond_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, double ms);

/* Sets *flag under s->mu, wakes cv and joins thread t (server.c). */
void srv_thread_stop(drift_server *s, pthread_t t, int *flag, pthread_cond_t *cv);

/* ---------------------------------------------------------------------------
 * Chat prompts (server_chat.c)
 * ------------------------------------------------------------------------- */

/* The prompt tokens of a chat request's messages through the model's
 * built-in template (drift_model_info.chat_template). One user message,
 * generation prompt on: drift_model_chat_tokens exactly (the embedded
 * target's chat api). Otherwise every turn rendered as the template renders
 * one (see server_chat.c). -1 with e set (400) when the messages cannot be
 * rendered. */
int srv_chat_tokens(const drift_model *m, const srv_request *rq, int32_t **ids, size_t *n, srv_error *e);

/* ---------------------------------------------------------------------------
 * Scheduler (server_scheduler.c)
 * ------------------------------------------------------------------------- */

/* Starts the scheduler thread. 0, or -1 when it cannot start. */
int srv_sched_start(drift_server *s);

/* Lets the scheduler empty its queue, then joins it. No-op when not started. */
void srv_sched_stop(drift_server *s);

/* Queues j (counting nseq against max_queue) and waits until it is done.
 * 0: done (j->st says how); -1 when the queue is full or the server drains
 * (e says 503). *waiting (when not NULL) points at j while it waits, so that
 * the connection's tracker can cancel it (srv_sched_cancel_departed). */
int srv_sched_submit_wait(drift_server *s, srv_job *j, srv_job **waiting, srv_error *e);

/* Ends job j, whose client no longer waits for it: out of the queue at once,
 * or, running, at its next decode step. Under mu. */
void srv_sched_cancel_departed(drift_server *s, srv_job *j);

/* Completes every queued job as cancelled (the drain deadline). Under mu. */
void srv_sched_cancel_queued(drift_server *s);

/* ---------------------------------------------------------------------------
 * Endpoints (server_endpoints.c)
 * ------------------------------------------------------------------------- */

/* An HTTP reply, before the daemon sends it. */
typedef struct srv_reply {
    int status;
    char *body;        /* malloc'd */
    const char *ctype;
    int retry_after;   /* seconds, 0 = none */
    const char *allow; /* 405 */
    int cancelled;     /* the request's work was cancelled (counted apart) */
    int drop;          /* the client is gone: close without a reply */
} srv_reply;

/* r = e's status and JSON body (503: Retry-After 1). */
void srv_reply_error(srv_reply *r, const srv_error *e);

/* Answers method url with body (len bytes) into r. *waiting: the
 * connection's job slot (NULL when untracked), see srv_sched_submit_wait. */
void srv_route(drift_server *s, const char *url, const char *method, const char *body, size_t len,
               srv_job **waiting, srv_reply *r);

/* ---------------------------------------------------------------------------
 * libmicrohttpd glue (server_httpd.c)
 * ------------------------------------------------------------------------- */

/* Starts the deadline thread and the daemon on o.host:o.port; sets s->port.
 * DRIFT_ERR_INVALID (host), DRIFT_ERR_INTERNAL (thread), DRIFT_ERR_IO
 * (cannot listen). On error nothing is left running. */
drift_status srv_httpd_start(drift_server *s, drift_error *err);

/* Stops accepting connections (those open stay). */
void srv_httpd_quiesce(drift_server *s);

/* Stops the daemon (closing every connection, joining their threads) and
 * the deadline thread. No-op for what is not running. */
void srv_httpd_stop(drift_server *s);

#endif
