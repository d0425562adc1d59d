/* http_internal.h - pieces of the HTTP target shared between http.c (the
 * libcurl client), http_reply.c (request bodies, reply parsing) and the fuzz
 * and unit tests. Internal: not installed, not part of the public API; the
 * engine module's eng_ prefix. */
#ifndef DRIFT_HTTP_INTERNAL_H
#define DRIFT_HTTP_INTERNAL_H

#include <jansson.h>
#include <stddef.h>

struct curl_slist;

#include "driftbench/target.h"
#include "util/util.h"

/* Largest reply body the client accepts by default: a reply past it fails
 * with "reply too large" before any of it is parsed. Parsing costs many
 * times the body (jansson's tree of a reply with logprobs, the normalised
 * copy, its text: ~79x was measured on a 60 MB reply), so this cap is what
 * bounds the client's memory. A target raises or lowers it with
 * max_reply_mb=N (1..ENG_HTTP_MAX_REPLY_MB_LIMIT) in its spec. */
#define ENG_HTTP_MAX_BODY_BYTES ((size_t)16 << 20)
#define ENG_HTTP_MAX_REPLY_MB_LIMIT 4096

/* A target spec parameter of the reply side: key (klen bytes) with its
 * decoded value val. 1 when it is one (max_reply_mb: *max_body_bytes set),
 * 0 when it is not, -1 when its value is bad (err says why, naming spec). */
int eng_http_reply_param(const char *spec, const char *key, size_t klen, const char *val, size_t *max_body_bytes,
                         drift_error *err);

/* Appends n bytes of a reply body to body unless the body would pass
 * max_bytes: the buffer never grows past max_bytes + 1 bytes (the NUL), so
 * a reply over the cap costs at most the cap. 0 appended, 1 over the cap
 * (nothing appended), -1 out of memory. */
int eng_http_body_append(util_buf *body, const char *p, size_t n, size_t max_bytes);

/* Parses the body of a 2xx reply of `api` (completions or chat) into res:
 * text, finish_reason, prompt/completion token counts (-1 when the reply has
 * no usage) and logprobs_json (normalised, see target.h; NULL when the reply
 * has none). res must be cleared (drift_answer_clear) by the caller; on
 * failure res gets no strings and the return is DRIFT_ERR_PARSE with err
 * saying what is wrong ("malformed JSON reply: ...", "reply has no choices",
 * "reply choice 0 has no text"). body need not be NUL-terminated. */
drift_status eng_http_parse_reply(drift_api api, const char *body, size_t len, drift_answer *res,
                                    drift_error *err);

/* Normalises a choice's "logprobs" member (completions shape: tokens /
 * token_logprobs / top_logprobs; chat shape: content[] with token / logprob /
 * top_logprobs[]) into the array form of target.h. Returns a new reference,
 * json null when lp is null/absent, or NULL with err set when malformed. */
json_t *eng_http_normalize_logprobs(const json_t *lp, drift_error *err);

/* The request control's extra body (target.h) checked: *out = the parsed
 * JSON object (NULL for NULL or ""), or DRIFT_ERR_INVALID when it is not
 * JSON, not an object, or holds a key that says what is asked (model,
 * messages, prompt, stream, n, echo), the message naming the key. */
drift_status eng_http_extra_body_parse(const char *text, json_t **out, drift_error *err);

/* Request template: every field of a generation request except the prompt
 * and the seed (model, temperature, top_p, max_tokens, stop, top_k if > 0,
 * logprobs if asked), then extra's members over them (NULL: none; a key of
 * both takes extra's value). NULL when out of memory. */
json_t *eng_http_request_template(drift_api api, const char *model, const drift_gen_params *p, const json_t *extra);

/* Fills the template with one request's prompt and seed and serialises it
 * into out (reused between requests). system (NULL or "": none): chat, a
 * first system message (a messages prompt with a system or developer turn
 * of its own keeps its own); completions, the text and a blank line before
 * the prompt. seed NULL: the template's stays (the user's extra body set
 * one). 0 ok; -1 when the prompt is not valid UTF-8 or memory runs out
 * (err says which). */
int eng_http_request_render(json_t *tmpl, drift_api api, const char *system, const char *prompt, const int64_t *seed,
                            util_buf *out, drift_error *err);

/* The request control's headers (target.h) checked and resolved: each
 * "Name: value" (a value "env:VAR" read from the environment now) is
 * appended to *list as libcurl takes it. *has_auth: 1 when one of them is
 * Authorization. A header that carries credentials (Authorization,
 * Proxy-Authorization, Cookie, X-Api-Key, Api-Key, or any value read from
 * the environment) is refused unless `safe` (https or this machine) or
 * `allowed` (allow_insecure_key), as the API key is. DRIFT_ERR_INVALID
 * names the header (never its value) or the unset VAR. shown: the target
 * as messages show it. */
drift_status eng_http_headers_add(const drift_request_ctl *r, const char *shown, int safe, int allowed,
                                  struct curl_slist **list, int *has_auth, drift_error *err);

/* Why a transfer that libcurl ended with curl_code (a CURLcode) failed:
 * CONNECT for refused / unresolved / a connect timeout (connected 0), TIMEOUT
 * for a timeout once connected, TLS, LOST for a connection that broke, REPLY
 * for a reply libcurl could not read, OTHER for the rest; NONE for CURLE_OK. */
drift_fail_cause eng_http_transport_cause(int curl_code, int connected);

/* Writes into out (cap bytes) the error message of an error reply: the
 * OpenAI shape {"error":{"message":..}}, {"error":".."}, {"detail":..},
 * {"message":..}, or else the first 200 bytes of the body, made printable. */
void eng_http_error_message(const char *body, size_t len, char *out, size_t cap);

/* Parses an /v1/embeddings reply holding `n` vectors into vecs (n*dim floats,
 * malloc'd by the callee when *vecs is NULL, else with room for n * *dim
 * floats, where *dim must match). Vectors are placed by their "index".
 * DRIFT_ERR_PARSE with err set on any mismatch. */
drift_status eng_http_parse_embeddings(const char *body, size_t len, size_t n, float **vecs, int *dim,
                                         drift_error *err);


/* ---- what the stack says it is (stack_probe.c) ---- */

/* The introspection endpoints, in the order they are asked; their paths in
 * eng_probe_paths (from the server's root, except ENG_PROBE_MODELS: from
 * the target's base URL, e.g. .../v1/models). */
typedef enum eng_probe_kind {
    ENG_PROBE_DRIFTBENCH = 0, /* driftbench serve: /v1/driftbench/info */
    ENG_PROBE_SGLANG,         /* /get_server_info */
    ENG_PROBE_LLAMACPP,       /* /props */
    ENG_PROBE_TGI,            /* /info */
    ENG_PROBE_VLLM,           /* /version */
    ENG_PROBE_MODELS,         /* <base>/models */
    ENG_PROBE_COUNT
} eng_probe_kind;
extern const char *const eng_probe_paths[ENG_PROBE_COUNT];

#define ENG_PROBE_MAX_BODY ((size_t)256 << 10) /* a longer reply is ignored */
#define ENG_PROBE_MAX_VALUE 200                /* a longer string is no level */

/* Parses the reply of endpoint `kind` (len bytes; need not be NUL-
 * terminated) into dims (a JSON object): sets framework, framework_version,
 * precision, hardware, server_model (and a few more) where the reply has
 * them and dims has not. Anything unexpected (not JSON, wrong types,
 * strings too long or with control characters, another server's shape)
 * sets nothing. Returns how many members it set. */
int eng_stack_parse(eng_probe_kind kind, const char *body, size_t len, json_t *dims);

/* One GET of url (one try, timeout_s for all of it, headers sent, no
 * redirects) parsed by eng_stack_parse into dims. -1: the server could not
 * be reached (no point asking it more); else what eng_stack_parse set (0 on
 * any other failure). Silent. */
int eng_stack_get(const char *url, const struct curl_slist *headers, int local, double timeout_s, json_t *dims,
                  eng_probe_kind kind);

/* Asks an http target's server what it is (eng_probe_paths in order, at
 * most ENG_PROBE_TIMEOUT_S each and ENG_PROBE_BUDGET_S in all) and merges
 * what it says into t->config_json, members already there kept, with
 * "detected_from" listing the endpoints that answered. Never fails: a
 * server that says nothing leaves the config as it was. Once per target;
 * nothing for a target opened with detect=0 or of another kind. */
#define ENG_PROBE_TIMEOUT_S 2.0
#define ENG_PROBE_BUDGET_S 6.0
void eng_http_detect(drift_target *t);

/* ---- requests of another kind (http_prompt_logprobs.c) ---- */

/* An http target's connection settings, borrowed (valid while t is open). */
typedef struct eng_http_conn_info {
    const char *url_base;               /* e.g. http://h:p/v1 */
    const char *model;
    const struct curl_slist *headers;   /* content type, accept, authorization */
    int local;                          /* this machine: never through a proxy */
    size_t max_reply;                   /* largest reply body */
} eng_http_conn_info;

/* 0 and *out filled for an http target; -1 for any other kind (http.c). */
int eng_http_conn(const drift_target *t, eng_http_conn_info *out);

#endif
