/* shadow.h - `driftbench shadow`, an OpenAI-compatible mirroring proxy
 * (issue 39; docs/shadow.md). Clients talk to it; every request goes to the
 * primary stack unchanged and the primary's reply comes back unchanged
 * (status, headers but hop-by-hop ones, body byte for byte, SSE streams
 * relayed as they arrive). A sampled share of the chat/completions and
 * completions requests is stored with the primary's answer and mirrored to
 * the candidate stack OFF the request path: a bounded queue that drops (and
 * counts) what it cannot hold, worker threads that send it with
 * drift_target_send_raw (stream false), one writer thread that stores both
 * sides in replay's layout (traffic.h): suite "shadow:NAME" whose prompts are
 * the request bodies (canonical JSON), one run per side, answers in
 * drift_traffic_reply_message's form, request errors as error rows.
 *
 * Threads: libmicrohttpd's (one per client connection), one upstream thread
 * per request in flight to the primary, `mirror_connections` mirror workers,
 * one writer (the only one that touches the store, and the one that calls
 * on_pair). */
#ifndef DRIFTBENCH_SHADOW_H
#define DRIFTBENCH_SHADOW_H

#include <stddef.h>
#include <stdint.h>

#include "driftbench/eval.h"
#include "driftbench/prom.h"
#include "driftbench/store.h"
#include "driftbench/target.h"
#include "driftbench/traffic.h"
#include "driftbench/traffic_privacy.h"
#include "driftbench/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Called once per completed pair, from the writer thread, in completion
 * order (pairs re-mirrored after a restart too). request_json: the request
 * body (canonical JSON); primary_msg / candidate_msg: the answers in
 * drift_traffic_reply_message's form, NULL on that side's error (then
 * *_error is 1; a request the primary failed is not mirrored: its pair comes
 * with primary_error 1, candidate_msg NULL and candidate_error 0); comparable: 1 when the request decodes deterministically
 * (temperature 0, n 1: see drift_shadow_comparable), so a difference is
 * drift, 0 when it samples (a difference means nothing). */
typedef void (*drift_shadow_pair_fn)(void *user, const char *request_json, const char *primary_msg,
                                     const char *candidate_msg, int primary_error, int candidate_error,
                                     int comparable);
/* Called while /metrics is rendered (from a client's connection thread,
 * under no lock of the proxy): appends the caller's families to p. Nonzero
 * is an error: /metrics answers 500. */
typedef int (*drift_shadow_metrics_fn)(void *user, drift_prom *p);

typedef struct drift_shadow_opts {
    const char *listen_host;       /* default "127.0.0.1" */
    int port;                      /* 0: an ephemeral port (drift_shadow_port) */
    const char *primary_spec;      /* http target spec; its URL's path is the upstream's /v1 */
    const char *candidate_spec;    /* http target spec (api=chat or completions) */
    const char *store_path;        /* SQLite path or PostgreSQL URL */
    const char *name;              /* the suite is "shadow:NAME"; default "default" */
    const char *primary_label;     /* default "shadow-primary" */
    const char *candidate_label;   /* default "shadow-candidate" */
    double sample;                 /* share mirrored, [0,1]; default 1 */
    int queue;                     /* mirror queue capacity (requests); default 64 */
    int mirror_connections;        /* mirror workers (requests in flight to the candidate); default 4 */
    int only_deterministic;        /* 1: requests that are not comparable are not mirrored (counted) */
    size_t max_body_bytes;         /* a client's request body; over it 413; default 4 MiB */
    size_t max_store_reply_bytes;  /* a primary reply kept for storing; a longer one is relayed whole
                                    * but neither stored nor mirrored (dropped_reply_too_large);
                                    * default 8 MiB */
    int max_connections;           /* client connections at once; default 256 */
    double idle_timeout_s;         /* an idle client connection is closed; default 60 */
    double primary_timeout_s;      /* a whole primary exchange; default 600 */
    double drain_timeout_s;        /* at stop, how long requests in flight may finish; default 30 */
    drift_target_opts candidate_opts; /* the candidate's timeouts, retries (default 1), key, headers;
                                    * concurrency and cancel are the proxy's own */
    drift_shadow_pair_fn on_pair;
    drift_shadow_metrics_fn metrics_extra;
    /* Called (from the writer thread, may be NULL) each time a mirrored
     * request's candidate answer is stored as an error: the error's text
     * (as stored) and the count of mirror errors so far, so that a caller
     * can say so as it happens rather than only in /metrics. */
    void (*on_mirror_error)(void *user, const char *error, uint64_t n_errors);
    void *user;
    /* What the proxy says as it happens, one line without a newline (may be
     * NULL): the candidate's errors (the 1st, 10th, 100th, ...: a
     * misconfigured candidate fails every mirror; the count stays in
     * /metrics), and each application of the retention that deleted
     * answers. From the caller's thread in drift_shadow_start, then from
     * the writer thread. */
    void (*log)(void *log_user, const char *line);
    void *log_user;
    /* Retention (traffic_privacy.h: "30d", "12h", or each side's newest N;
     * NULL none): applied in drift_shadow_start before the stored pairs are
     * loaded, then every retention_period_s (0: 3600) by the writer thread,
     * between two batches (the only thread that touches the store; the
     * relay never waits for it). */
    const char *retention;
    double retention_period_s;
    /* What is stored (traffic_privacy.h; borrowed, may be NULL: full). The
     * request and both answers are given to on_pair as received and stored
     * in the form privacy allows (redacted, or only their SHA-256). With
     * hashes, a pair left unfinished cannot be mirrored again at the next
     * start (its request is not stored): it is counted in backlog_hashed. */
    const struct drift_traffic_privacy *privacy;
    /* 1: at start, before serving, on_pair is called once per pair the store
     * already holds (finished pairs and primary error pairs), in the order
     * the primaries were stored, with the stored texts (hashes or redacted
     * text under a privacy option), so that a judge rebuilds its state
     * after a restart. */
    int replay_stored;
} drift_shadow_opts;

DRIFT_API void drift_shadow_opts_default(drift_shadow_opts *o);

typedef struct drift_shadow drift_shadow;

/* Counters, as /metrics shows them. Those marked (store) start from what
 * the store holds (a restart resumes them); the others count this process. */
typedef struct drift_shadow_stats {
    uint64_t requests;             /* client requests proxied to the primary (every path) */
    uint64_t primary_errors;       /* of chat/completions, completions: the primary failed (non-2xx, unreachable) */
    uint64_t sampled_out;          /* not in the sample (not a drop) */
    uint64_t skipped_not_comparable; /* --only-deterministic: not mirrored */
    uint64_t skipped_other;        /* not mirrorable: not a JSON object, the candidate's other api */
    uint64_t mirrored;             /* (store) stored with the primary's answer and queued for the candidate */
    uint64_t dropped_queue_full;   /* sampled, but the mirror queue was full: neither stored nor mirrored */
    uint64_t dropped_store_busy;   /* sampled, but the writer's queue was full */
    uint64_t dropped_reply_too_large; /* sampled, but the primary's reply was over max_store_reply_bytes
                                    * (relayed whole to the client, neither stored nor mirrored) */
    uint64_t mirror_errors;        /* (store) the candidate failed */
    uint64_t pairs;                /* (store) pairs completed (candidate answer or error stored) */
    uint64_t compared;             /* (store) completed, both answered, comparable */
    uint64_t not_comparable;       /* (store) completed, both answered, not comparable */
    uint64_t primary_error_pairs;  /* (store) sampled requests whose primary failed: an error pair, not mirrored */
    uint64_t store_errors;         /* store writes that failed, or a mirror worker whose candidate could not
                                    * work at all (last_error says which) */
    uint64_t resumed;              /* pairs found unfinished in the store at start and mirrored again */
    uint64_t backlog_hashed;       /* pairs found unfinished at start whose request is stored as a hash:
                                    * not mirrored again */
    uint64_t retention_deleted;    /* answers the retention deleted (this process, the start's included) */
    uint64_t retention_runs;       /* times the retention was applied (this process) */
    size_t queue_depth;            /* mirror queue + restart backlog, now */
    size_t queue_capacity;
    size_t in_flight;              /* client requests being answered now */
    char last_error[256];          /* the last failed store write's message ("" none) */
} drift_shadow_stats;

/* Opens the store (runs labelled primary_label / candidate_label, taking
 * their writer locks), the targets and the listener, loads the pairs the
 * store holds unfinished (a primary answer and no candidate row) into the
 * backlog the workers mirror first, and starts serving. Bad options,
 * specs, a port in use: DRIFT_ERR_INVALID / DRIFT_ERR_IO naming the part. */
DRIFT_API drift_status drift_shadow_start(const drift_shadow_opts *o, drift_shadow **out, drift_error *err);
DRIFT_API int drift_shadow_port(const drift_shadow *s);
DRIFT_API void drift_shadow_get_stats(drift_shadow *s, drift_shadow_stats *out);
/* The last store error's message ("" none), copied into buf. */
DRIFT_API void drift_shadow_last_error(drift_shadow *s, char *buf, size_t cap);

/* The clean stop: new requests get 503, requests in flight get up to
 * drain_timeout_s to finish (their answers stored), mirroring stops (in
 * flight mirrors are abandoned, not stored), the writer stores what it
 * holds, the runs are unlocked and the store closed. *left_queued (may be
 * NULL): pairs left unmirrored, which the next start with this store
 * mirrors; *final (may be NULL): the counters after all that. Frees s. */
DRIFT_API void drift_shadow_stop(drift_shadow *s, size_t *left_queued, drift_shadow_stats *final);

/* The pairs a shadow store holds, for a report after the fact (drift over
 * time): the runs labelled primary_label / candidate_label (NULL: the
 * defaults) of an open store, each finished pair (a candidate row; primary
 * error pairs too) in the order the primaries were stored, given to fn with
 * the stored texts and the pair's time (the later of the two answers'
 * stored times, unix ms; the primary's for a primary error pair). Pairs
 * with no candidate row yet are skipped. fn returns nonzero to stop.
 * DRIFT_ERR_NOT_FOUND naming a label with no run. */
typedef int (*drift_shadow_stored_fn)(void *user, const char *request_json, const char *primary_msg,
                                      const char *candidate_msg, int primary_error, int candidate_error,
                                      int comparable, int64_t t_unix_ms);
DRIFT_API drift_status drift_shadow_read_pairs(drift_store *st, const char *primary_label,
                                               const char *candidate_label, drift_shadow_stored_fn fn, void *user,
                                               drift_error *err);

/* Drift over time of a shadow store, after the fact (shadow --report): the
 * stored pairs (drift_shadow_read_pairs) in time order, judged by a new
 * streaming judge (traffic_stream.h: stats' budgets, alpha; the guard and
 * semantic classes are not judged), rendered as text (per class flips and
 * alarm, then the time windows) or, json, as the judge's JSON state. Pairs
 * stored as hashes are counted, not judged. window_s: seconds per window,
 * 0 none, < 0 automatic (the smallest of 1 min .. 30 days that cuts the span
 * into at most 20). *out malloc'd. No request is sent. */
typedef struct drift_shadow_report_opts {
    const char *store_name;        /* named in the text's first line */
    const char *primary_label;     /* NULL: shadow-primary */
    const char *candidate_label;   /* NULL: shadow-candidate */
    drift_traffic_opts stats;
    double alpha;
    int64_t window_s;
    int json;
} drift_shadow_report_opts;
DRIFT_API drift_status drift_shadow_report(drift_store *st, const drift_shadow_report_opts *o, char **out,
                                           drift_error *err);

/* The live judge of a proxy (shadow_judge.c): one streaming judge
 * (traffic_stream.h) fed every pair from on_pair (the writer thread) and
 * read by /metrics (a connection thread), under a mutex. With
 * replay_stored, the pairs the store holds are re-added at start, so that a
 * restart (even after kill -9) resumes the counts and the alarms; pairs
 * stored as hashes are not judged again (judging a hash would be wrong for
 * every class but exact): counted. Each alarm event is given to log (one
 * line, no newline; "(stored pairs) " first while re-adding) the moment a
 * pair causes it. */
typedef struct drift_shadow_judge drift_shadow_judge;
/* stats: budgets and thresholds; guard, emb: borrowed, may be NULL (then
 * the guard / semantic class is not judged); log may be NULL. */
DRIFT_API drift_status drift_shadow_judge_new(const drift_traffic_opts *stats, double alpha, drift_guard *guard,
                                              drift_embedder *emb, void (*log)(void *log_user, const char *line),
                                              void *log_user, drift_shadow_judge **out, drift_error *err);
/* Wires j into o: on_pair, metrics_extra (the judge's families on
 * /metrics), user (j: other callbacks get j as user) and replay_stored 1. */
DRIFT_API void drift_shadow_judge_attach(drift_shadow_judge *j, drift_shadow_opts *o);
/* Once drift_shadow_start returned: ends the re-adding of stored pairs and
 * says on log what it gave: the pairs the judge resumed from, and those it
 * refused (stored as hashes, or an error: the last one's message). */
DRIFT_API void drift_shadow_judge_resumed(drift_shadow_judge *j);
/* After drift_shadow_stop (or a failed start). NULL is fine. */
DRIFT_API void drift_shadow_judge_free(drift_shadow_judge *j);

/* 1 when a request body decodes deterministically: "temperature" present
 * and 0, and "n" absent or 1 (OpenAI's default temperature is 1); a top_p
 * does not matter then. 0 otherwise (also for a body that is not a JSON
 * object). */
DRIFT_API int drift_shadow_comparable(const char *request_json);

/* The deterministic sample: 1 when the body (its bytes as the client sent
 * them) is in a share `sample` of all bodies: FNV-1a 64 of the bytes,
 * scaled to [0,1), below sample. The same traffic samples the same requests. */
DRIFT_API int drift_shadow_sampled(const char *body, size_t len, double sample);

/* Reassembles an SSE stream of chat.completion.chunk (or completions)
 * events ("data: {...}" lines, "data: [DONE]") into the reply a
 * non-streamed request gets ({"choices":[{"message":{"role":"assistant",
 * "content":..,"tool_calls":[..],"refusal":..},"finish_reason":..}]}, or
 * {"choices":[{"text":..,..}]} for completions chunks): the deltas' content,
 * refusal and text concatenated, tool calls by their index with name and
 * arguments concatenated. malloc'd; DRIFT_ERR_PARSE when an event is not
 * JSON or no event has a choice. */
DRIFT_API drift_status drift_shadow_sse_reassemble(const char *sse, size_t len, char **reply_json, drift_error *err);

#ifdef __cplusplus
}
#endif
#endif
