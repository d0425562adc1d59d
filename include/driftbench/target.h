/* target.h - a serving stack under test: an OpenAI-compatible HTTP endpoint
 * ("http://HOST:PORT/v1?model=NAME&api=chat|completions") or the embedded
 * engine ("embedded:PATH.gguf?profile=P&..."). One interface for both:
 * generate a batch of requests with bounded concurrency, calling back on
 * every outcome (answer or error), and embed texts; and what only some
 * kinds can do (their model, their prompt tokens). */
#ifndef DRIFTBENCH_TARGET_H
#define DRIFTBENCH_TARGET_H

#include "driftbench/model.h"
#include "driftbench/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct drift_target drift_target;

/* Request control: what the user adds to every request of one target
 * (issue 37). All NULL/0 (the default): requests as before. Strings are
 * copied at open. What decides answers (system prompt, template, extra
 * body) is part of a run's identity; headers are not (their values may be
 * secrets, and are never stored).
 * - system_prompt: chat: a first {"role": "system"} message (a messages
 *   prompt that has its own system turn keeps its own); completions: the
 *   text and a blank line before the rendered prompt.
 * - prompt_template: replaces the workload's template for every plain
 *   prompt ("{input}" is the prompt's input; messages prompts are sent as
 *   they are); recorded as template id "custom/<16 hex of its hash>".
 * - extra_body_json: a JSON object merged into every request body
 *   (vLLM's top_k, repetition_penalty, chat_template_kwargs, ...); the keys
 *   that say what is asked (model, messages, prompt, stream, n, echo) are
 *   refused; a decoding key DriftBench sets (temperature, top_p, seed,
 *   max_tokens, stop, logprobs, top_logprobs) takes the user's value.
 *   Checked at open: not JSON, not an object, or one of those keys is
 *   DRIFT_ERR_INVALID naming the key. A "seed" there is sent as it is for
 *   every request (replicates no longer vary it).
 * - headers: n_headers lines "Name: value"; a value "env:VAR" is read from
 *   the environment at open (unset: DRIFT_ERR_INVALID naming VAR). A header
 *   that carries credentials (Authorization, Proxy-Authorization, Cookie,
 *   X-Api-Key, Api-Key, or any "env:" value) follows the API key's rule
 *   below (refused at open for plain http to another host unless
 *   allow_insecure_key); an Authorization header replaces the key (with
 *   api_key_env too: refused); Content-Type, Content-Length,
 *   Transfer-Encoding, Expect and Accept are the target's own (refused).
 *   Values are never stored nor shown in a message (names only).
 * An empty string is no value (as NULL). The pipeline renders
 * prompt_template (run.c, drift_prompt_render_custom, suite.h); a template
 * without "{input}" is refused at open (DRIFT_ERR_INVALID).
 * The embedded engine accepts system_prompt (its chat template's system
 * turn; completions: the same prefix) and prompt_template and refuses
 * extra_body_json and headers (DRIFT_ERR_INVALID). */
typedef struct drift_request_ctl {
    const char *system_prompt;
    const char *prompt_template;
    const char *extra_body_json;
    const char *const *headers;
    size_t n_headers;
} drift_request_ctl;

typedef struct drift_target_opts {
    int concurrency;          /* in-flight requests (http) or batch size (embedded); default 8 */
    double connect_timeout_s; /* default 10 */
    double read_timeout_s;    /* whole-request timeout; default 300 */
    int max_retries;          /* default 4 */
    double backoff_base_s;    /* first retry delay; default 0.5, doubled each retry, + jitter */
    double backoff_max_s;     /* cap on one delay (also caps Retry-After); default 30 */
    /* Credentials (http targets). The key sent as "Authorization: Bearer" is,
     * first found: the variable named by the spec's api_key_env=NAME (it must
     * be set), api_key, then the variable default_key_env names. A key of the
     * first two, or a password in the URL, is refused (DRIFT_ERR_INVALID,
     * before any connection) for plain http to a host that is not this
     * machine (by name or address: localhost, 127.0.0.0/8, ::1; no lookup
     * is made) unless allow_insecure_key or the spec's allow_insecure_key=1
     * says so; the default variable's key is simply not sent there. */
    const char *api_key;         /* the caller's key, or NULL (default); copied at open */
    const char *default_key_env; /* default "OPENAI_API_KEY"; NULL: no default key */
    int allow_insecure_key;      /* 1: credentials may go over plain http to any host */
    /* Cancellation (default NULL: never). The library polls cancel(cancel_user)
     * on the calling thread, at least every 100 ms while generate or embed
     * waits (on the network or in a retry back-off); it knows nothing of
     * signals, so a caller's signal handler may just set a flag that cancel
     * reads. Once it returns nonzero: transfers in flight are aborted, back-off
     * waits end, and the call returns DRIFT_ERR_CANCELLED soon after (http:
     * within about 100 ms; embedded: after the batch being computed). Every
     * outcome delivered before that went through the callback as usual; a
     * request that had not finished gets no callback at all: it is neither an
     * answer nor an error, so a resumed run asks it again. */
    int (*cancel)(void *cancel_user);
    void *cancel_user;
    drift_request_ctl request;   /* default: all NULL (nothing added) */
} drift_target_opts;

/* Fills opts with the defaults above. */
DRIFT_API void drift_target_opts_default(drift_target_opts *opts);

/* Headers by name, for request control given in layers (a file's shared
 * ones, a target's own, flags): out gets base's "Name: value" lines whose
 * name (case-insensitive, blanks before the colon cut) no line of over
 * has, then over's. out must hold n_base + n_over; returns how many. */
DRIFT_API size_t drift_request_headers_over(const char *const *base, size_t n_base, const char *const *over,
                                            size_t n_over, const char **out);

/* *out = base with each field over sets taken from over (system prompt,
 * template, extra body), headers by name as drift_request_headers_over
 * into hbuf (room for base->n_headers + over->n_headers); the strings stay
 * the caller's. drift_request_ctl_any: 1 when q sets any field. */
DRIFT_API void drift_request_ctl_over(drift_request_ctl *out, const drift_request_ctl *base,
                                      const drift_request_ctl *over, const char **hbuf);
DRIFT_API int drift_request_ctl_any(const drift_request_ctl *q);

typedef struct drift_gen_request {
    size_t index;             /* caller's index, passed back */
    const char *prompt;       /* completions: full text; chat: the user message */
    int replicate;            /* replicate number (varies the seed: seed + replicate) */
} drift_gen_request;

/* Called once per request, on the calling thread, in completion order, with
 * the outcome in res (a drift_answer of types.h: the outcome fields set, a
 * failure with its cause, never DRIFT_FAIL_NONE; id, prompt_rowid and
 * replicate 0). The callee may take ownership of its
 * strings by setting them to NULL (or of all of it: copy the struct, then
 * zero res). Return nonzero to stop (in-flight requests are abandoned). */
typedef int (*drift_result_fn)(void *user, const drift_gen_request *req, drift_answer *res);

/* Opens a target from its spec. Unknown schemes, bad URLs and bad
 * parameters are DRIFT_ERR_INVALID with a message naming the part. */
DRIFT_API drift_status drift_target_open(const char *spec, const drift_target_opts *opts,
                                         drift_target **out, drift_error *err);
DRIFT_API void drift_target_close(drift_target *t);

DRIFT_API drift_api drift_target_api(const drift_target *t);
DRIFT_API const char *drift_target_spec(const drift_target *t);
/* Configuration dimensions the target knows by itself, as a JSON object
 * (embedded: model, hardware, precision, framework, ...; http: model, and
 * what the server says it is: on the first call an http target asks its
 * server's introspection endpoints (driftbench serve's /v1/driftbench/info,
 * SGLang's /get_server_info, llama.cpp's /props, TGI's /info, vLLM's
 * /version, then .../models), one short GET each, a few seconds at most in
 * all, and adds framework, framework_version, precision, hardware,
 * server_model and "detected_from" where they answer; a server that says
 * nothing changes nothing, and the spec's detect=0 turns this off). Not
 * thread-safe on its first call for an http target. */
DRIFT_API const char *drift_target_config_json(const drift_target *t);

/* Capabilities beyond generate and embed, which not every kind has.
 *
 * drift_target_model: the model an in-process target answers with (the
 * embedded engine's, model.h), for work that needs its logits or its
 * tokenizer (teacher forcing); NULL for a kind with no model in this
 * process (http). The target keeps owning it.
 *
 * drift_target_prompt_tokens: the prompt tokens the target feeds its model
 * for a request's prompt (*ids malloc'd, *n of them): completions = the raw
 * text with the model's default BOS, no special-token parsing; chat = one
 * user message in the model's built-in template; the request control's
 * system prompt included (target.h, above). The same code path as the
 * target's own generation, so teacher forcing scores exactly what generation
 * saw. DRIFT_ERR_UNSUPPORTED for a kind with no model in this process. */
DRIFT_API const drift_model *drift_target_model(const drift_target *t);
DRIFT_API drift_status drift_target_prompt_tokens(const drift_target *t, const char *prompt, int32_t **ids,
                                                  size_t *n, drift_error *err);

/* Runs all n requests; every one produces exactly one callback (answer or
 * error). Returns DRIFT_OK even if individual requests failed: failures are
 * results. Returns an error only if the target as a whole cannot work, or
 * DRIFT_ERR_CANCELLED when the callback asked to stop or opts.cancel fired:
 * then the requests not yet called back got no callback (none will come). */
DRIFT_API drift_status drift_target_generate(drift_target *t, const drift_gen_request *reqs, size_t n,
                                             const drift_gen_params *params, drift_result_fn cb, void *user,
                                             drift_error *err);

/* Sends n whole request bodies as they are (replay, issue 39): reqs[i].prompt
 * is a JSON object an OpenAI client would POST to the target's endpoint
 * (chat/completions or completions, the spec's api); nothing of the target's
 * decoding, model, system prompt or extra body is applied to it (the caller
 * owns the body). Headers, key, concurrency, timeouts, retries, faults and
 * cancellation are generate's. A 2xx reply that parses as generate's answer
 * (choices[0] with a text or a message, content null allowed for tool calls)
 * is an answer whose text is the WHOLE reply body (JSON, as received), with
 * finish_reason, token counts and logprobs read from it; anything else is an
 * error outcome as in generate. http targets only: another kind is
 * DRIFT_ERR_UNSUPPORTED. */
DRIFT_API drift_status drift_target_send_raw(drift_target *t, const drift_gen_request *reqs, size_t n,
                                             drift_result_fn cb, void *user, drift_error *err);

/* Embeds n texts: *vecs = n*dim floats (malloc'd), *dim set.
 * DRIFT_ERR_CANCELLED (and no vectors) when opts.cancel fired. */
DRIFT_API drift_status drift_target_embed(drift_target *t, const char *const *texts, size_t n, float **vecs,
                                          int *dim, drift_error *err);

#ifdef __cplusplus
}
#endif
#endif
