/* prompt_logprobs.h - the log-probabilities an HTTP server gives the tokens
 * of a text it is sent as a prompt (src/engine/http_prompt_logprobs.c):
 * what teacher forcing over HTTP reads (src/pipeline/teacher_forced.c).
 *
 * Two ways a server offers them, asked with max_tokens 1 and temperature 0
 * on the target's completions endpoint:
 *   DRIFT_PLP_VLLM  vLLM's extension "prompt_logprobs": K; the reply's
 *                   choice holds prompt_logprobs, a list per prompt token
 *                   (null for the first), each a dict token id -> {logprob,
 *                   rank, decoded_token} with the prompt's own token first
 *                   (or named by the choice's prompt_token_ids);
 *   DRIFT_PLP_ECHO  OpenAI's legacy "echo": true with "logprobs": K; the
 *                   choice's logprobs start with the prompt's tokens:
 *                   tokens, token_logprobs, top_logprobs (token text ->
 *                   logprob), text_offset (code points).
 * DRIFT_PLP_AUTO tries vLLM's, then echo. An api=chat target is asked on
 * its chat endpoint instead (drift_target_answer_logprobs). Nothing here
 * prints. */
#ifndef DRIFTBENCH_PROMPT_LOGPROBS_H
#define DRIFTBENCH_PROMPT_LOGPROBS_H

#include <stddef.h>
#include <stdint.h>
#include "driftbench/status.h"
#include "driftbench/target.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum drift_plp_method {
    DRIFT_PLP_AUTO = 0,
    DRIFT_PLP_VLLM = 1,
    DRIFT_PLP_ECHO = 2
} drift_plp_method;

/* "auto", "prompt_logprobs", "echo". */
DRIFT_API const char *drift_plp_method_name(drift_plp_method m);

#define DRIFT_PLP_MAX_TOP 20

/* One prompt token: its text, where it starts in the text sent (bytes), its
 * logprob given the tokens before it, and the top alternatives there. */
typedef struct drift_plp_token {
    int32_t id;                 /* -1 when the reply gives no ids (echo) */
    char *text;                 /* as the server shows it (decoded_token, tokens[i]) */
    size_t offset;              /* byte offset of its start in the text sent; SIZE_MAX when unknown */
    int has_lp;                 /* 0 for the first token (nothing before it) */
    double logprob;
    int n_top;
    int32_t top_id[DRIFT_PLP_MAX_TOP]; /* -1 with echo */
    char *top_text[DRIFT_PLP_MAX_TOP];
    double top_logprob[DRIFT_PLP_MAX_TOP];  /* sorted, highest first */
} drift_plp_token;

typedef struct drift_plp_result {
    drift_plp_token *toks;      /* (n) every token of the text sent, in order */
    size_t n;
    drift_plp_method method;    /* the way that answered */
    int k;                      /* alternatives asked for per token */
} drift_plp_result;

DRIFT_API void drift_plp_result_clear(drift_plp_result *r);

/* The prompt logprobs of text (len bytes) from the HTTP target t's server:
 * k alternatives per token (1..DRIFT_PLP_MAX_TOP), by method (AUTO: vLLM's
 * then echo). Errors: DRIFT_ERR_UNSUPPORTED when t is not an HTTP target
 * or the server refuses the request (a 4xx) or answers without the prompt's
 * logprobs (the message says which ways were tried); DRIFT_ERR_HTTP when
 * the server cannot be reached or keeps failing (the target's retries);
 * DRIFT_ERR_PARSE for a malformed reply. */
DRIFT_API drift_status drift_target_prompt_logprobs(drift_target *t, const char *text, size_t len, int k,
                                                   drift_plp_method method, drift_plp_result *out, drift_error *err);

/* The logprobs of answer after prompt as the HTTP target t asks it: prompt
 * is a prompt rendered for t's api (drift_prompt_render: completions, the
 * whole text; chat, the user message or a prompt in messages form), sent
 * with t's request control (target.h: the system prompt as generation adds
 * it, the extra body under the fields set here and without
 * max_completion_tokens and min_tokens, the headers). One request:
 *   completions  the text then the answer, as drift_target_prompt_logprobs
 *                (by method);
 *   chat         POST .../chat/completions with the messages and the
 *                answer as a last {"role": "assistant"} message, vLLM's
 *                "add_generation_prompt": false, "continue_final_message":
 *                true and "prompt_logprobs": K (vLLM, driftbench serve);
 *                the reply's prompt_logprobs at its top level (vLLM's
 *                ChatCompletionResponse) or in its choice. Echo is a
 *                completions field: method ECHO is DRIFT_ERR_UNSUPPORTED.
 * out holds every token of what the server scored; their offsets are
 * bytes of answer, SIZE_MAX for a token before it (the prompt, the chat
 * template's markers) or one not found in it (chat: the tokens' texts are
 * matched from the answer's end, so a template that trims or rewrites the
 * content leaves them unplaced). Errors as drift_target_prompt_logprobs. */
DRIFT_API drift_status drift_target_answer_logprobs(drift_target *t, const char *prompt, const char *answer, int k,
                                                   drift_plp_method method, drift_plp_result *out, drift_error *err);

#ifdef __cplusplus
}
#endif
#endif
