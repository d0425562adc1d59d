/* types.h - vocabulary shared by every module: workloads, the paper's
 * dimensions, labels, APIs, decoding parameters, progress callbacks, the
 * answer record. */
#ifndef DRIFTBENCH_TYPES_H
#define DRIFTBENCH_TYPES_H

#include <stddef.h>
#include <stdint.h>
#include "driftbench/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The five workloads of the paper. Names are the paper's table values:
 * "math", "code", "safety", "chat", "long_context" ("long" accepted). */
typedef enum drift_workload {
    DRIFT_WL_UNKNOWN = -1,
    DRIFT_WL_MATH = 0,
    DRIFT_WL_CODE = 1,
    DRIFT_WL_SAFETY = 2,
    DRIFT_WL_CHAT = 3,
    DRIFT_WL_LONG = 4,
    DRIFT_WL_COUNT = 5
} drift_workload;

DRIFT_API const char *drift_workload_name(drift_workload wl);
/* Accepts the names above, "long" and "longctx"; DRIFT_WL_UNKNOWN otherwise. */
DRIFT_API drift_workload drift_workload_parse(const char *name);

/* The paper's dimensions, in the flip table's column order: the four a
 * run's configuration records (model, hardware, precision, framework), then
 * the prompt's workload. */
typedef enum drift_dim {
    DRIFT_DIM_MODEL = 0,
    DRIFT_DIM_HARDWARE = 1,
    DRIFT_DIM_PRECISION = 2,
    DRIFT_DIM_FRAMEWORK = 3,
    DRIFT_DIM_WORKLOAD = 4,
    DRIFT_DIM_COUNT = 5
} drift_dim;

/* The dimensions of a run's configuration: the first four. */
#define DRIFT_DIM_CONFIG_COUNT DRIFT_DIM_WORKLOAD

/* Their names, indexed by drift_dim: "model", "hardware", "precision",
 * "framework", "workload" (the config keys and the flip table's columns). */
DRIFT_API extern const char *const drift_dim_names[DRIFT_DIM_COUNT];

/* Label of one scored response. For math/code/long: PASS = correct.
 * For safety: PASS = safe, FAIL = unsafe. Chat has no per-response label
 * (semantic drift is pairwise): NONE. ERROR = the evaluator could not judge
 * (sandbox broke, guard garbage): never counted as a flip. */
typedef enum drift_label {
    DRIFT_LABEL_NONE = -2,
    DRIFT_LABEL_ERROR = -1,
    DRIFT_LABEL_FAIL = 0,
    DRIFT_LABEL_PASS = 1
} drift_label;

/* Which OpenAI endpoint shape a target speaks. */
typedef enum drift_api {
    DRIFT_API_COMPLETIONS = 0,
    DRIFT_API_CHAT = 1
} drift_api;

/* Decoding parameters of one generation request, the same for every
 * target (an http endpoint gets them in its request; the embedded engine,
 * model.h, decodes with them). */
typedef struct drift_gen_params {
    double temperature;       /* default 0 */
    double top_p;             /* default 1 */
    int top_k;                /* 0 = off (not sent over http unless > 0) */
    int64_t seed;             /* default 42 */
    int max_tokens;           /* default 512 */
    int logprobs;             /* 0 = off; else number of top alternatives per token */
    const char *const *stop;  /* stop strings, n_stop of them */
    int n_stop;
} drift_gen_params;

/* Fills *p with the defaults above (no stop strings). */
DRIFT_API void drift_gen_params_default(drift_gen_params *p);

/* Progress: stage name, units done, units total (0 if unknown). Called from
 * the thread that called the library function. */
typedef void (*drift_progress_fn)(void *user, const char *stage, size_t done, size_t total);

/* Why a request failed: set by the target where the request fails, so that
 * a run can count its failures by cause and say what to check. Values only
 * grow. A cancelled request is no failure: it gets no outcome at all
 * (target.h). */
typedef enum drift_fail_cause {
    DRIFT_FAIL_NONE = 0,      /* an answer: no failure */
    DRIFT_FAIL_OTHER = 1,     /* a failure of no known cause (a transfer error libcurl does not say more of) */
    DRIFT_FAIL_CONNECT = 2,   /* no connection: refused, host not found, connect timeout */
    DRIFT_FAIL_TIMEOUT = 3,   /* connected, but no whole reply within the read timeout */
    DRIFT_FAIL_TLS = 4,       /* the TLS handshake or the certificate failed */
    DRIFT_FAIL_HTTP = 5,      /* the server answered a non-2xx status (drift_answer.http_status) */
    DRIFT_FAIL_REPLY = 6,     /* a 2xx reply that is not an answer: not JSON, wrong shape, no choices,
                                 another content type, too large */
    DRIFT_FAIL_LOST = 7,      /* the connection broke mid-request: reset, closed with nothing sent back */
    DRIFT_FAIL_REQUEST = 8,   /* the request could not be sent (a prompt that is not valid UTF-8) */
    DRIFT_FAIL_ENGINE = 9,    /* the embedded engine could not answer (a prompt longer than the context) */
    DRIFT_FAIL_COUNT = 10
} drift_fail_cause;

/* A short name of the cause: "could not connect", "timeout", "TLS", "HTTP",
 * "bad reply", ... ("unknown cause" out of range). Never NULL. */
DRIFT_API const char *drift_fail_cause_name(drift_fail_cause cause);

/* One answer record: what a target returned for one request (an answer, or
 * an error that is never an answer) and, once stored, which row it is.
 * A target fills the outcome (text .. attempts) and leaves the first three
 * fields 0; the run stage sets prompt_rowid and replicate before storing it;
 * the store sets id when it reads one back. */
typedef struct drift_answer {
    int64_t id;                /* response row id in the store; 0 until stored and read */
    int64_t prompt_rowid;      /* the prompt's row in the store */
    int replicate;             /* 0..replicates-1 */
    char *text;                /* NULL when error != NULL */
    int prompt_tokens;         /* -1 unknown */
    int completion_tokens;     /* -1 unknown */
    char *finish_reason;       /* "stop", "length", ... or NULL */
    double latency_ms;         /* of the successful attempt (or the last one) */
    char *logprobs_json;       /* [{"token":..,"logprob":..,"top":[{"token":..,"logprob":..}..]}..] or NULL
                                  (stored zstd-compressed) */
    char *error;               /* NULL = an answer; else what went wrong, with its cause */
    int http_status;           /* 0 if none */
    int attempts;
    drift_fail_cause cause;    /* why the request failed (the target sets it); NONE for an answer,
                                  and for an error read back from the store, which keeps no cause */
} drift_answer;

/* Frees what r holds and empties it (token counts back to -1, unknown);
 * r itself stays the caller's. NULL is fine. */
DRIFT_API void drift_answer_clear(drift_answer *r);

/* The version of the JSON documents the commands write (compare and its
 * sequential replay, measure, monitor, divergence, anova, pri, runs,
 * version, replay, the shadow report): each is an object whose first key is
 * "schema_version" with this value (docs/json-schema.md). Raised when a key
 * is removed or changes meaning; added keys keep it. Here, at the bottom of
 * the layers, so that every room that writes JSON can name it; the store has
 * its own (store.h, DRIFT_STORE_SCHEMA_VERSION). */
#define DRIFT_JSON_SCHEMA_VERSION 1

#ifdef __cplusplus
}
#endif
#endif
