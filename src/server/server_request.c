/* server_request.c - request bodies of the OpenAI-compatible server: parse,
 * check every known field's type and range, and say what is wrong in the
 * OpenAI error shape (message, param, code) so a client can tell which field
 * to fix. Unknown fields are ignored, as vLLM does; known fields this engine
 * cannot honour (penalties, logit_bias, best_of > 1, token-id prompts, echo
 * on chat) are refused rather than silently dropped.
 *
 * Prompt logprobs, two shapes (rendered by server_reply.c):
 *   prompt_logprobs: K   vLLM's extension (completions and chat, 0..20):
 *                        docs.vllm.ai, vllm/logprobs.py: "PromptLogprobs =
 *                        list[Optional[dict[int, Logprob]]]", Logprob =
 *                        {logprob, rank, decoded_token}; null for the first
 *                        prompt token;
 *   echo: true           OpenAI's legacy completions (with logprobs: K, the
 *                        prompt's tokens and logprobs come before the
 *                        completion's: tokens, token_logprobs (null for the
 *                        first), top_logprobs, text_offset).
 * With either, max_tokens 0 is allowed (the prompt scored, nothing
 * generated), as OpenAI allowed it with echo. Not with stream. Chat takes
 * vLLM's add_generation_prompt (default true) and continue_final_message
 * (the last message, an assistant's, left open: its tokens can be scored).
 *
 * A pure function of the body bytes and the limits (no model, no I/O): the
 * fuzzer drives it directly. Memory is bounded by the body size, which the
 * daemon caps before calling here. */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server_internal.h"
#include "util/util.h"

int srv_error_set(srv_error *e, int status, const char *param, const char *code, const char *fmt, ...) {
    if (!e) return -1;
    e->http_status = status;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    snprintf(e->code, sizeof e->code, "%s", code ? code : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return -1;
}

void srv_request_free(srv_request *r) {
    if (!r) return;
    free(r->model);
    for (size_t i = 0; i < r->n_prompts; i++) free(r->prompts[i]);
    free(r->prompts);
    for (size_t i = 0; i < r->n_messages; i++) {
        free(r->messages[i].role);
        free(r->messages[i].content);
    }
    free(r->messages);
    for (int i = 0; i < SRV_MAX_STOP; i++) free(r->stop[i]);
    memset(r, 0, sizeof *r);
}

static const char *type_name(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

/* Optional number in [lo, hi]; absent or null keeps *out. */
static int get_number(const json_t *o, const char *key, double lo, double hi, double *out, srv_error *e) {
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_number(v))
        return srv_error_set(e, 400, key, "invalid_type", "'%s' must be a number, not %s", key, type_name(v));
    double x = json_number_value(v);
    if (!(x >= lo && x <= hi))
        return srv_error_set(e, 400, key, "invalid_value", "'%s' = %g is out of range [%g, %g]", key, x, lo, hi);
    *out = x;
    return 0;
}

/* Optional integer in [lo, hi] (a real with an integral value is accepted). */
static int get_int(const json_t *o, const char *key, long long lo, long long hi, long long *out, int *present,
                   srv_error *e) {
    const json_t *v = json_object_get(o, key);
    if (present) *present = 0;
    if (!v || json_is_null(v)) return 0;
    long long x;
    if (json_is_integer(v)) {
        x = json_integer_value(v);
    } else if (json_is_real(v) && json_real_value(v) == (double)(long long)json_real_value(v) &&
               json_real_value(v) > -9e18 && json_real_value(v) < 9e18) {
        x = (long long)json_real_value(v);
    } else {
        return srv_error_set(e, 400, key, "invalid_type", "'%s' must be an integer, not %s", key, type_name(v));
    }
    if (x < lo || x > hi)
        return srv_error_set(e, 400, key, "invalid_value", "'%s' = %lld is out of range [%lld, %lld]", key, x, lo, hi);
    *out = x;
    if (present) *present = 1;
    return 0;
}

static int get_bool(const json_t *o, const char *key, int *out, srv_error *e) {
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_boolean(v))
        return srv_error_set(e, 400, key, "invalid_type", "'%s' must be a boolean, not %s", key, type_name(v));
    *out = json_is_true(v);
    return 0;
}

/* Copy of a JSON string's bytes (NUL bytes inside are refused). */
static int dup_string(const json_t *v, const char *param, char **out, srv_error *e) {
    size_t n = json_string_length(v);
    const char *s = json_string_value(v);
    if (memchr(s, 0, n)) return srv_error_set(e, 400, param, "invalid_value", "'%s' contains a NUL character", param);
    *out = util_strndup(s, n);
    if (!*out) return srv_error_set(e, 500, NULL, NULL, "out of memory");
    return 0;
}

/* string | array of strings -> list (1..max entries). */
static int get_texts(const json_t *o, const char *key, size_t max, char ***out, size_t *n, srv_error *e) {
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return srv_error_set(e, 400, key, "missing_field", "'%s' is required", key);
    size_t cnt = json_is_string(v) ? 1 : json_is_array(v) ? json_array_size(v) : 0;
    if (!json_is_string(v) && !json_is_array(v))
        return srv_error_set(e, 400, key, "invalid_type", "'%s' must be a string or an array of strings, not %s", key,
                             type_name(v));
    if (cnt == 0) return srv_error_set(e, 400, key, "invalid_value", "'%s' is an empty array", key);
    if (cnt > max) return srv_error_set(e, 400, key, "invalid_value", "'%s' has %zu entries (at most %zu)", key, cnt, max);
    char **list = calloc(cnt, sizeof *list);
    if (!list) return srv_error_set(e, 500, NULL, NULL, "out of memory");
    *out = list;
    for (size_t i = 0; i < cnt; i++) {
        const json_t *s = json_is_string(v) ? v : json_array_get(v, i);
        if (!json_is_string(s)) {
            *n = i;
            if (json_is_integer(s) || json_is_array(s))
                return srv_error_set(e, 400, key, "unsupported_value",
                                     "'%s' as token ids is not supported: send text", key);
            return srv_error_set(e, 400, key, "invalid_type", "'%s'[%zu] must be a string, not %s", key, i,
                                 type_name(s));
        }
        if (dup_string(s, key, &list[i], e)) {
            *n = i;
            return -1;
        }
    }
    *n = cnt;
    return 0;
}

/* Chat message content: string, null, or an array of {"type":"text","text":..} parts. */
static int get_content(const json_t *v, size_t idx, char **out, srv_error *e) {
    if (!v || json_is_null(v)) {
        *out = util_strdup("");
        return *out ? 0 : srv_error_set(e, 500, NULL, NULL, "out of memory");
    }
    if (json_is_string(v)) return dup_string(v, "messages", out, e);
    if (!json_is_array(v))
        return srv_error_set(e, 400, "messages", "invalid_type",
                             "messages[%zu].content must be a string or an array of text parts, not %s", idx,
                             type_name(v));
    util_buf b = {0};
    for (size_t i = 0; i < json_array_size(v); i++) {
        const json_t *part = json_array_get(v, i);
        const json_t *type = json_object_get(part, "type");
        const json_t *text = json_object_get(part, "text");
        if (!json_is_object(part) || !json_is_string(type) || strcmp(json_string_value(type), "text") ||
            !json_is_string(text)) {
            buf_free(&b);
            return srv_error_set(e, 400, "messages", "unsupported_value",
                                 "messages[%zu].content[%zu] must be {\"type\":\"text\",\"text\":\"...\"}", idx, i);
        }
        if (memchr(json_string_value(text), 0, json_string_length(text)) ||
            buf_append(&b, json_string_value(text), json_string_length(text))) {
            buf_free(&b);
            return srv_error_set(e, 400, "messages", "invalid_value", "messages[%zu].content[%zu] is not usable text",
                                 idx, i);
        }
    }
    *out = b.data ? buf_steal(&b) : util_strdup("");
    return *out ? 0 : srv_error_set(e, 500, NULL, NULL, "out of memory");
}

static int get_messages(const json_t *o, srv_request *r, srv_error *e) {
    const json_t *v = json_object_get(o, "messages");
    if (!v || json_is_null(v)) return srv_error_set(e, 400, "messages", "missing_field", "'messages' is required");
    if (!json_is_array(v))
        return srv_error_set(e, 400, "messages", "invalid_type", "'messages' must be an array, not %s", type_name(v));
    size_t n = json_array_size(v);
    if (n == 0) return srv_error_set(e, 400, "messages", "invalid_value", "'messages' is empty");
    if (n > SRV_MAX_MESSAGES)
        return srv_error_set(e, 400, "messages", "invalid_value", "'messages' has %zu entries (at most %d)", n,
                             SRV_MAX_MESSAGES);
    r->messages = calloc(n, sizeof *r->messages);
    if (!r->messages) return srv_error_set(e, 500, NULL, NULL, "out of memory");
    static const char *const roles[] = {"system", "user", "assistant", "developer", "tool"};
    for (size_t i = 0; i < n; i++) {
        const json_t *m = json_array_get(v, i);
        if (!json_is_object(m))
            return srv_error_set(e, 400, "messages", "invalid_type", "messages[%zu] must be an object, not %s", i,
                                 type_name(m));
        const json_t *role = json_object_get(m, "role");
        if (!json_is_string(role))
            return srv_error_set(e, 400, "messages", "invalid_type", "messages[%zu].role must be a string", i);
        int known = 0;
        for (size_t k = 0; k < sizeof roles / sizeof *roles; k++) known |= !strcmp(json_string_value(role), roles[k]);
        if (!known)
            return srv_error_set(e, 400, "messages", "invalid_value",
                                 "messages[%zu].role must be system, user, assistant, developer or tool", i);
        r->n_messages = i + 1;
        r->messages[i].role = util_strdup(json_string_value(role));
        if (!r->messages[i].role) return srv_error_set(e, 500, NULL, NULL, "out of memory");
        if (get_content(json_object_get(m, "content"), i, &r->messages[i].content, e)) return -1;
    }
    return 0;
}

static int get_stop(const json_t *o, srv_request *r, srv_error *e) {
    const json_t *v = json_object_get(o, "stop");
    if (!v || json_is_null(v)) return 0;
    size_t cnt = json_is_string(v) ? 1 : json_is_array(v) ? json_array_size(v) : 0;
    if (!json_is_string(v) && !json_is_array(v))
        return srv_error_set(e, 400, "stop", "invalid_type", "'stop' must be a string or an array of strings, not %s",
                             type_name(v));
    if (cnt > SRV_MAX_STOP)
        return srv_error_set(e, 400, "stop", "invalid_value", "'stop' has %zu strings (at most %d)", cnt, SRV_MAX_STOP);
    for (size_t i = 0; i < cnt; i++) {
        const json_t *s = json_is_string(v) ? v : json_array_get(v, i);
        if (!json_is_string(s))
            return srv_error_set(e, 400, "stop", "invalid_type", "'stop'[%zu] must be a string, not %s", i, type_name(s));
        if (json_string_length(s) > SRV_MAX_STOP_BYTES)
            return srv_error_set(e, 400, "stop", "invalid_value", "'stop'[%zu] is longer than %d bytes", i,
                                 SRV_MAX_STOP_BYTES);
        if (json_string_length(s) == 0) continue;
        if (dup_string(s, "stop", &r->stop[r->params.n_stop], e)) return -1;
        r->params.n_stop++;
    }
    r->params.stop = (const char *const *)r->stop;
    return 0;
}

/* Fields the engine cannot honour: refused unless at their neutral value. */
static int check_unsupported(srv_endpoint ep, const json_t *o, srv_error *e) {
    static const char *const zero_num[] = {"presence_penalty", "frequency_penalty"};
    for (size_t i = 0; i < 2; i++) {
        const json_t *v = json_object_get(o, zero_num[i]);
        if (!v || json_is_null(v)) continue;
        if (!json_is_number(v))
            return srv_error_set(e, 400, zero_num[i], "invalid_type", "'%s' must be a number, not %s", zero_num[i],
                                 type_name(v));
        if (json_number_value(v) != 0)
            return srv_error_set(e, 400, zero_num[i], "unsupported_value", "'%s' is not supported (only 0)", zero_num[i]);
    }
    const json_t *rp = json_object_get(o, "repetition_penalty");
    if (rp && !json_is_null(rp) && (!json_is_number(rp) || json_number_value(rp) != 1))
        return srv_error_set(e, 400, "repetition_penalty", "unsupported_value", "'repetition_penalty' is not supported (only 1)");
    int echo = 0;
    if (get_bool(o, "echo", &echo, e)) return -1;
    if (echo && ep == SRV_EP_CHAT)
        return srv_error_set(e, 400, "echo", "unsupported_value", "'echo' is not supported on chat (use prompt_logprobs)");
    const json_t *lb = json_object_get(o, "logit_bias");
    if (lb && !json_is_null(lb) && (!json_is_object(lb) || json_object_size(lb) > 0))
        return srv_error_set(e, 400, "logit_bias", "unsupported_value", "'logit_bias' is not supported");
    long long best_of = 1;
    if (get_int(o, "best_of", 1, 1, &best_of, NULL, e)) return -1;
    return 0;
}

static int parse_fields(srv_endpoint ep, const json_t *o, const srv_limits *lim, srv_request *r, srv_error *e) {
    const json_t *model = json_object_get(o, "model");
    if (model && !json_is_null(model)) {
        if (!json_is_string(model))
            return srv_error_set(e, 400, "model", "invalid_type", "'model' must be a string, not %s", type_name(model));
        if (dup_string(model, "model", &r->model, e)) return -1;
    }
    if (ep == SRV_EP_EMBEDDINGS) {
        if (get_texts(o, "input", SRV_MAX_INPUTS, &r->prompts, &r->n_prompts, e)) return -1;
        const json_t *fmt = json_object_get(o, "encoding_format");
        if (fmt && !json_is_null(fmt)) {
            if (!json_is_string(fmt))
                return srv_error_set(e, 400, "encoding_format", "invalid_type", "'encoding_format' must be a string");
            if (!strcmp(json_string_value(fmt), "base64")) r->emb_base64 = 1;
            else if (strcmp(json_string_value(fmt), "float"))
                return srv_error_set(e, 400, "encoding_format", "invalid_value", "'encoding_format' must be float or base64");
        }
        const json_t *dims = json_object_get(o, "dimensions");
        if (dims && !json_is_null(dims))
            return srv_error_set(e, 400, "dimensions", "unsupported_value", "'dimensions' is not supported");
        return 0;
    }
    if (ep == SRV_EP_COMPLETIONS) {
        if (get_texts(o, "prompt", SRV_MAX_PROMPTS, &r->prompts, &r->n_prompts, e)) return -1;
    } else if (get_messages(o, r, e)) {
        return -1;
    }
    if (check_unsupported(ep, o, e)) return -1;
    drift_gen_params_default(&r->params);
    long long x;
    int present;
    r->prompt_logprobs = -1;
    if (get_int(o, "prompt_logprobs", 0, SRV_MAX_TOP, &x, &present, e)) return -1;
    if (present) r->prompt_logprobs = (int)x;
    if (ep == SRV_EP_COMPLETIONS && get_bool(o, "echo", &r->echo, e)) return -1;
    r->add_generation_prompt = 1;
    if (ep == SRV_EP_CHAT) {
        if (get_bool(o, "add_generation_prompt", &r->add_generation_prompt, e)) return -1;
        if (get_bool(o, "continue_final_message", &r->continue_final_message, e)) return -1;
        if (r->continue_final_message && r->add_generation_prompt)
            return srv_error_set(e, 400, "continue_final_message", "invalid_value",
                                 "'continue_final_message' needs 'add_generation_prompt': false");
        if (r->continue_final_message && strcmp(r->messages[r->n_messages - 1].role, "assistant"))
            return srv_error_set(e, 400, "continue_final_message", "invalid_value",
                                 "'continue_final_message' needs an assistant message last");
    }
    int scores = r->prompt_logprobs >= 0 || r->echo;
    long long min_tokens = scores ? 0 : 1; /* the prompt scored, nothing generated */
    r->params.max_tokens = ep == SRV_EP_COMPLETIONS ? 16 : lim->max_tokens_limit; /* OpenAI's defaults; chat: to the context */
    if (get_number(o, "temperature", 0, 100, &r->params.temperature, e)) return -1;
    if (get_number(o, "top_p", 0, 1, &r->params.top_p, e)) return -1;
    if (json_is_number(json_object_get(o, "top_p")) && r->params.top_p <= 0)
        return srv_error_set(e, 400, "top_p", "invalid_value", "'top_p' must be greater than 0");
    if (get_int(o, "top_k", -1, 1 << 20, &x, &present, e)) return -1;
    if (present) r->params.top_k = x < 0 ? 0 : (int)x;
    if (get_int(o, "seed", INT64_MIN, INT64_MAX, &x, &present, e)) return -1;
    if (present) r->params.seed = x;
    if (get_int(o, "max_tokens", min_tokens, lim->max_tokens_limit, &x, &present, e)) return -1;
    if (present) r->params.max_tokens = (int)x;
    if (ep == SRV_EP_CHAT) {
        if (get_int(o, "max_completion_tokens", min_tokens, lim->max_tokens_limit, &x, &present, e)) return -1;
        if (present) r->params.max_tokens = (int)x;
    }
    r->n = 1;
    if (get_int(o, "n", 1, lim->max_n, &x, &present, e)) return -1;
    if (present) r->n = (int)x;
    if (get_stop(o, r, e)) return -1;
    if (get_bool(o, "stream", &r->stream, e)) return -1;
    if (r->stream && scores)
        return srv_error_set(e, 400, "stream", "unsupported_value",
                             "'stream' with 'prompt_logprobs' or 'echo' is not supported");
    const json_t *so = json_object_get(o, "stream_options");
    if (so && !json_is_null(so)) {
        if (!json_is_object(so))
            return srv_error_set(e, 400, "stream_options", "invalid_type", "'stream_options' must be an object");
        if (get_bool(so, "include_usage", &r->include_usage, e)) return -1;
    }
    if (ep == SRV_EP_COMPLETIONS) {
        if (get_int(o, "logprobs", 0, SRV_MAX_TOP, &x, &present, e)) return -1;
        if (present) {
            r->want_logprobs = 1;
            r->top_logprobs = (int)x;
        }
    } else {
        if (get_bool(o, "logprobs", &r->want_logprobs, e)) return -1;
        if (get_int(o, "top_logprobs", 0, SRV_MAX_TOP, &x, &present, e)) return -1;
        if (present) {
            if (!r->want_logprobs && x > 0)
                return srv_error_set(e, 400, "top_logprobs", "invalid_value", "'top_logprobs' requires 'logprobs': true");
            r->top_logprobs = (int)x;
        }
    }
    /* the engine records logprobs when params.logprobs > 0 (alternatives kept) */
    r->params.logprobs = r->want_logprobs ? (r->top_logprobs > 0 ? r->top_logprobs : 1) : 0;
    return 0;
}

int srv_request_parse(srv_endpoint ep, const char *body, size_t len, const srv_limits *lim, srv_request *out,
                      srv_error *e) {
    memset(out, 0, sizeof *out);
    out->ep = ep;
    json_error_t je;
    json_t *o = json_loadb(body ? body : "", len, JSON_REJECT_DUPLICATES, &je);
    if (!o)
        return srv_error_set(e, 400, NULL, "invalid_json", "malformed JSON body: %s (line %d, column %d)", je.text,
                             je.line, je.column);
    if (!json_is_object(o)) {
        srv_error_set(e, 400, NULL, "invalid_json", "the body must be a JSON object, not %s", type_name(o));
        json_decref(o);
        return -1;
    }
    int rc = parse_fields(ep, o, lim, out, e);
    json_decref(o);
    if (rc) srv_request_free(out);
    return rc;
}
