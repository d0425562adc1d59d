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
} drift_server_stats;

/* Counters since start (a consistent snapshot). */
DRIFT_API void drift_server_get_stats(drift_server *s, drift_server_stats *out);

/* Stops accepting connections, answers every request already received
 * (queued ones are decoded), waits up to drain_timeout_s for replies to be
 * sent, then stops the daemon and the scheduler and frees everything.
 * NULL is a no-op. */
DRIFT_API void drift_server_stop(drift_server *s, double drain_timeout_s);

#ifdef __cplusplus
}
#endif
#endif
