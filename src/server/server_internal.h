/* server_internal.h - pieces of the server shared between server.c (the
 * daemon and scheduler), server_request.c (request parsing and validation, a
 * pure function the fuzzer drives) and the tests. Internal. */
#ifndef DRIFT_SERVER_INTERNAL_H
#define DRIFT_SERVER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "driftbench/target.h"

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

/* {"error":{"message":..,"type":..,"param":..,"code":..}} as malloc'd text. */
char *srv_error_json(const srv_error *e);

/* Copy of s[0..len) as valid UTF-8: each byte that does not start a valid
 * sequence (overlong, surrogate, > U+10FFFF, truncated) and NUL bytes become
 * U+FFFD. Cleaning pieces cut before non-continuation bytes gives the same
 * text as cleaning the whole. malloc'd (NULL when out of memory). */

#endif
