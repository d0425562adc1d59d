/* server.h - `driftbench serve`: an OpenAI-compatible HTTP server over the
 * embedded engine (libmicrohttpd).
 *
 * Endpoints: POST /v1/completions, POST /v1/chat/completions (the model's
 * built-in chat template), POST /v1/embeddings, GET /v1/models, GET /health.
 * A scheduler thread owns the model: connection threads parse and validate a
 * request, tokenize it and queue it; the scheduler takes the queued requests
 * that share decoding parameters (the seed aside) and decodes them together,
 * up to max_batch sequences, with the same engine call the `embedded:` target
 * makes (drift_model_generate), so an answer is the embedded target's answer.
 * With batch invariance on (the default) it does not depend on the load;
 * with it off, the profile's batch-variant kernels make it depend on how many
 * sequences share each decode step.
 *
 * Memory is bounded: body size, connections, queued sequences (503 with
 * Retry-After when full), n, stop strings, max_tokens (clamped to the
 * context as the embedded target does).
 *
 * Slow and abusive clients: a connection must deliver a whole request
 * (headers and body) within request_timeout_s of opening or of its previous
 * reply, else it is closed (a deadline: trickling bytes does not extend it).
 * At most per_client_connections come from one address and max_connections
 * in all; a new connection over a limit evicts the oldest one that is idle or
 * still sending its request, and is refused only when every connection in the
 * way is being answered. So idle or slowloris connections cannot lock other
 * clients, or the same one, out of /health and the endpoints. When a client
 * closes its connection while its request waits or decodes, that work is
 * cancelled (its sequences end at the next decode step; the others in the
 * batch go on).
 *
 * Request defaults and limits: seed 42 when absent (answers are
 * reproducible); max_tokens 16 (completions, as OpenAI) or up to the
 * context (chat); choice j of n samples with seed + j. Chat takes one user
 * message (the engine's built-in template has no system or multi-turn
 * form): other conversations get a 400. Streaming sends the SSE chunks
 * (one per token, then [DONE]) once the sequence is decoded, not token by
 * token. Not supported (400): echo, penalties, logit_bias, best_of > 1,
 * token-id prompts. */
#ifndef DRIFTBENCH_SERVER_H
#define DRIFTBENCH_SERVER_H

#include <stddef.h>
#include <stdint.h>
#include "driftbench/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct drift_server drift_server;

typedef struct drift_server_opts {
    const char *model_path;    /* GGUF file (required) */
    const char *profile;       /* named profile or "profile=NAME&k=v..." spec; NULL = cpu-f32 */
    const char *model_name;    /* name clients send; NULL = the file's stem. general.name is accepted too */
    const char *host;          /* listen address; NULL = 127.0.0.1 */
    int port;                  /* 0 = ephemeral (read it back with drift_server_port) */
    int max_batch;             /* sequences decoded together; default 8 */
    int batch_invariant;       /* 1 (default) or 0: the profile's batch_invariant */
    int threads;               /* engine threads; 0 = keep the profile's */
    size_t max_body_bytes;     /* request body limit (413 past it); default 1 MiB */
    int max_connections;       /* concurrent connections; default 128 */
    int per_client_connections;/* concurrent connections from one IP address; default 64 (clamped to max_connections) */
    double request_timeout_s;  /* deadline for a whole request (headers + body), from the connection's
                                  opening or its previous reply; default 10 */
    int max_queue;             /* queued + running sequences before 503; default 256 */
    int max_n;                 /* largest n (choices per prompt); default 16 */
    int max_tokens_limit;      /* largest max_tokens accepted; default 65536 */
    double batch_window_ms;    /* scheduler waits this long for more arrivals; default 0 */
} drift_server_opts;

/* Fills o with the defaults above (model_path NULL). */
DRIFT_API void drift_server_opts_default(drift_server_opts *o);

/* Loads the model, starts the scheduler and the HTTP daemon. Errors: the
 * model's (drift_model_load), DRIFT_ERR_INVALID (bad profile or option),
 * DRIFT_ERR_IO (cannot listen: the message names host and port). */
DRIFT_API drift_status drift_server_start(const drift_server_opts *o, drift_server **out, drift_error *err);

/* The bound port (the ephemeral one when opts.port was 0). */
DRIFT_API int drift_server_port(const drift_server *s);

/* The served model name (what /v1/models lists). */
DRIFT_API const char *drift_server_model_name(const drift_server *s);

typedef struct drift_server_stats {
    uint64_t requests;         /* HTTP requests received */
    uint64_t answered;         /* 2xx replies */
    uint64_t rejected;         /* 4xx replies */
    uint64_t overloaded;       /* 503 replies (queue full, draining) */
    uint64_t batches;          /* drift_model_generate calls */
    uint64_t batched_sequences;/* sequences over all batches */
    int max_batch_seen;        /* largest batch decoded */
    uint64_t drained;          /* 2xx replies sent while draining (part of answered) */
    uint64_t cancelled;        /* requests cut at the drain deadline (503) */
    uint64_t departed;         /* requests whose work was cancelled because the client closed the connection */
    uint64_t timed_out;        /* connections closed for missing the request deadline */
    uint64_t evicted;          /* idle / slow connections closed to admit a new one */
    uint64_t refused_connections; /* connections refused: over a limit with every connection in the way busy */
} drift_server_stats;

/* Counters since start (a consistent snapshot). Valid after
 * drift_server_drain too, until drift_server_stop. */
DRIFT_API void drift_server_get_stats(drift_server *s, drift_server_stats *out);

/* Stops accepting connections and new requests (503 "shutting_down"), lets
 * the requests already received finish (queued ones are decoded) for up to
 * drain_timeout_s; past that deadline it cancels every request still queued
 * or decoding (their clients get 503; a decoding batch ends at its next step,
 * an embedding at its next input) and gives the replies up to one more
 * second. Then it stops the daemon (closing every connection) and the
 * threads. The server stays allocated so its final statistics can be read.
 * Blocking; call it from one thread. A second call is a no-op. */
DRIFT_API void drift_server_drain(drift_server *s, double drain_timeout_s);

/* drift_server_drain (unless done already), then frees everything. NULL is
 * a no-op. */
DRIFT_API void drift_server_stop(drift_server *s, double drain_timeout_s);

#ifdef __cplusplus
}
#endif
#endif
