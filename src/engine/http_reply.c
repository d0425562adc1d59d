/* http_reply.c - the JSON side of the OpenAI-compatible HTTP target: request
 * bodies and reply parsing, kept apart from the libcurl client so that the
 * parser can be fuzzed and tested without a server.
 *
 * Requests: one template object per generate() call holds the fields common to
 * all requests, the user's extra body fields merged over them (request
 * control, target.h: the user's value wins; the keys that say what is asked
 * are refused when the target opens); each request only swaps in its prompt
 * (or messages, a system turn first when the target has a system prompt and
 * the prompt's turns have none; completions: the system text and a blank
 * line before the prompt) and its seed (unless the extra body sets one)
 * before being serialised into a reused buffer.
 *
 * Replies (both APIs):
 *   completions: {"choices":[{"text":..,"finish_reason":..,"logprobs":
 *                 {"tokens":[..],"token_logprobs":[..],"top_logprobs":[{tok:lp}..]}}],
 *                 "usage":{"prompt_tokens":..,"completion_tokens":..}}
 *   chat:        {"choices":[{"message":{"content":..},"finish_reason":..,"logprobs":
 *                 {"content":[{"token":..,"logprob":..,"top_logprobs":[{"token":..,"logprob":..}]}]}}],
 *                 "usage":{..}}
 * Logprobs of either shape become [{"token":..,"logprob":..,"top":[{"token":..,"logprob":..}..]}..]
 * with "top" sorted by decreasing logprob.
 *
 * Size: a reply is parsed whole (jansson), and its tree, the normalised
 * logprobs and their text cost many times the body (~79x measured), so the
 * body is capped while it arrives (eng_http_body_append, called by the
 * client's write callback): at most the target's max_reply_mb (default
 * ENG_HTTP_MAX_BODY_BYTES, 16 MiB) is ever held, and a longer reply is an
 * error ("reply too large") that is never parsed. */
#include "engine/http_internal.h"

#include "driftbench/suite.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------- requests ---------- */

/* The keys of a body that say what is asked, set by DriftBench alone. */
static const char *const ASKED_KEYS[] = {"model", "messages", "prompt", "stream", "n", "echo"};

drift_status eng_http_extra_body_parse(const char *text, json_t **out, drift_error *err) {
    *out = NULL;
    if (!text || !*text) return DRIFT_OK;
    json_error_t je;
    json_t *j = json_loads(text, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
    if (!j)
        return drift_error_set(err, DRIFT_ERR_INVALID, "extra body: not valid JSON: %s (line %d, column %d)", je.text,
                               je.line, je.column);
    if (!json_is_object(j)) {
        const char *kind = json_is_array(j) ? "array" : json_is_string(j) ? "string" : "value";
        json_decref(j);
        return drift_error_set(err, DRIFT_ERR_INVALID,
                               "extra body: must be a JSON object of request fields (e.g. {\"top_k\": 20}), not a "
                               "JSON %s",
                               kind);
    }
    for (size_t i = 0; i < sizeof ASKED_KEYS / sizeof *ASKED_KEYS; i++)
        if (json_object_get(j, ASKED_KEYS[i])) {
            json_decref(j);
            return drift_error_set(err, DRIFT_ERR_INVALID,
                                   "extra body: key '%s' is refused: it says what is asked (model, messages, prompt, "
                                   "stream, n and echo are DriftBench's: the target's model=, the suite's prompts, one "
                                   "whole answer per request)",
                                   ASKED_KEYS[i]);
        }
    *out = j;
    return DRIFT_OK;
}

json_t *eng_http_request_template(drift_api api, const char *model, const drift_gen_params *p, const json_t *extra) {
    json_t *o = json_object();
    if (!o) return NULL;
    int bad = 0;
    bad |= json_object_set_new(o, "model", json_string(model ? model : ""));
    if (api == DRIFT_API_CHAT) {
        json_t *msg = json_pack("{s:s, s:s}", "role", "user", "content", "");
        bad |= json_object_set_new(o, "messages", json_pack("[o]", msg));
    } else {
        bad |= json_object_set_new(o, "prompt", json_string(""));
    }
    bad |= json_object_set_new(o, "temperature", json_real(p->temperature));
    bad |= json_object_set_new(o, "top_p", json_real(p->top_p));
    bad |= json_object_set_new(o, "seed", json_integer(p->seed));
    bad |= json_object_set_new(o, "max_tokens", json_integer(p->max_tokens));
    if (p->n_stop > 0) {
        json_t *stop = json_array();
        for (int i = 0; i < p->n_stop && stop; i++)
            if (p->stop[i]) bad |= json_array_append_new(stop, json_string(p->stop[i]));
        bad |= json_object_set_new(o, "stop", stop);
    }
    if (p->top_k > 0) bad |= json_object_set_new(o, "top_k", json_integer(p->top_k));
    if (p->logprobs > 0) {
        if (api == DRIFT_API_CHAT) {
            bad |= json_object_set_new(o, "logprobs", json_true());
            bad |= json_object_set_new(o, "top_logprobs", json_integer(p->logprobs));
        } else {
            bad |= json_object_set_new(o, "logprobs", json_integer(p->logprobs));
        }
    }
    bad |= json_object_set_new(o, "stream", json_false());
    /* the user's fields: a decoding key of the above takes the user's value
     * (the asked keys were refused at open: eng_http_extra_body_parse) */
    if (json_is_object(extra)) bad |= json_object_update(o, (json_t *)extra);
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* 1 when a messages array has a system (or developer) turn of its own. */
static int has_system_turn(const json_t *turns) {
    size_t i;
    json_t *m;
    json_array_foreach(turns, i, m) {
        const char *role = json_string_value(json_object_get(m, "role"));
        if (role && (!strcmp(role, "system") || !strcmp(role, "developer"))) return 1;
    }
    return 0;
}

int eng_http_request_render(json_t *tmpl, drift_api api, const char *system, const char *prompt, const int64_t *seed,
                            util_buf *out, drift_error *err) {
    /* a prompt in chat messages form (suite.h) goes out as its turns */
    const char *turns = api == DRIFT_API_CHAT ? drift_prompt_messages(prompt) : NULL;
    json_t *s;
    if (turns) s = json_loads(turns, 0, NULL);
    else if (system && *system && api != DRIFT_API_CHAT) {
        /* completions: the system text and a blank line before the prompt */
        char *text = util_asprintf("%s\n\n%s", system, prompt);
        s = text ? json_string(text) : NULL;
        if (!text) {
            drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory building request");
            return -1;
        }
        free(text);
    } else s = json_string(prompt);
    if (!s || (turns && !json_is_array(s))) {
        json_decref(s);
        drift_error_set(err, DRIFT_ERR_INVALID, turns ? "prompt messages are not a JSON array" : "prompt is not valid UTF-8");
        return -1;
    }
    int want_sys = api == DRIFT_API_CHAT && system && *system && !(turns && has_system_turn(s));
    int bad = 0;
    if (turns) {
        if (want_sys) bad |= json_array_insert_new(s, 0, json_pack("{s:s, s:s}", "role", "system", "content", system));
        bad |= json_object_set_new(tmpl, "messages", s);
    } else if (api == DRIFT_API_CHAT) {
        /* the messages of the request before are reused when they have this
         * shape ([system,] user, the same system text): only the user's
         * content changes, as before request control */
        json_t *msgs = json_object_get(tmpl, "messages");
        size_t want = want_sys ? 2 : 1;
        json_t *m0 = json_array_get(msgs, 0), *mu = json_array_get(msgs, want - 1);
        const char *r0 = json_string_value(json_object_get(m0, "role"));
        const char *ru = json_string_value(json_object_get(mu, "role"));
        int reuse = json_array_size(msgs) == want && ru && !strcmp(ru, "user");
        if (reuse && want_sys) {
            const char *c0 = json_string_value(json_object_get(m0, "content"));
            reuse = r0 && !strcmp(r0, "system") && c0 && !strcmp(c0, system);
        }
        if (reuse) {
            bad |= json_object_set_new(mu, "content", s);
        } else {
            json_t *user = json_pack("{s:s, s:o}", "role", "user", "content", s);
            json_t *sys_msg = want_sys ? json_pack("{s:s, s:s}", "role", "system", "content", system) : NULL;
            if (want_sys && !sys_msg) {
                json_decref(user);
                drift_error_set(err, DRIFT_ERR_INVALID, "system prompt is not valid UTF-8");
                return -1;
            }
            json_t *list = sys_msg ? json_pack("[o, o]", sys_msg, user) : json_pack("[o]", user);
            bad |= json_object_set_new(tmpl, "messages", list);
        }
    } else {
        bad |= json_object_set_new(tmpl, "prompt", s);
    }
    if (seed) bad |= json_object_set_new(tmpl, "seed", json_integer(*seed));
    if (bad) {
        drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory building request");
        return -1;
    }
    for (int tries = 0; tries < 2; tries++) {
        size_t cap = out->cap ? out->cap - 1 : 0;
        size_t need = json_dumpb(tmpl, out->data, cap, JSON_COMPACT);
        if (need == 0) break;
        if (need <= cap) {
            out->len = need;
            out->data[need] = '\0';
            return 0;
        }
        out->len = 0;
        if (buf_reserve(out, need)) break;
    }
    drift_error_set(err, DRIFT_ERR_NOMEM, "cannot serialise request JSON");
    return -1;
}

/* ---------- replies ---------- */

int eng_http_reply_param(const char *spec, const char *key, size_t klen, const char *val, size_t *max_body_bytes,
                         drift_error *err) {
    if (!(klen == 12 && !memcmp(key, "max_reply_mb", 12))) return 0;
    char *end = NULL;
    long mb = isdigit((unsigned char)val[0]) ? strtol(val, &end, 10) : -1;
    if (!end || *end || mb < 1 || mb > ENG_HTTP_MAX_REPLY_MB_LIMIT) {
        drift_error_set(err, DRIFT_ERR_INVALID, "target '%s': max_reply_mb=%s: expected a whole number of MiB, 1 to %d",
                        spec, val, ENG_HTTP_MAX_REPLY_MB_LIMIT);
        return -1;
    }
    *max_body_bytes = (size_t)mb << 20;
    return 1;
}

int eng_http_body_append(util_buf *body, const char *p, size_t n, size_t max_bytes) {
    if (n > max_bytes || body->len > max_bytes - n) return 1;
    size_t need = body->len + n + 1;
    if (need > body->cap) {
        size_t cap = body->cap ? body->cap : 4096;
        while (cap < need) cap = cap > SIZE_MAX / 2 ? need : cap * 2;
        if (cap > max_bytes + 1) cap = max_bytes + 1; /* need <= max_bytes + 1 */
        char *d = realloc(body->data, cap);
        if (!d) return -1;
        body->data = d;
        body->cap = cap;
    }
    memcpy(body->data + body->len, p, n);
    body->len += n;
    body->data[body->len] = '\0';
    return 0;
}

static int json_to_int(const json_t *v) {
    if (json_is_integer(v)) {
        json_int_t x = json_integer_value(v);
        if (x < 0 || x > 0x7fffffff) return -1;
        return (int)x;
    }
    if (json_is_real(v)) {
        double x = json_real_value(v);
        if (!(x >= 0 && x <= 2147483647.0)) return -1;
        return (int)x;
    }
    return -1;
}

/* A logprob value: a number, or null (some servers send null for the first
 * token). Anything else is malformed (-1). */
static int logprob_value(const json_t *v, json_t **out) {
    if (json_is_number(v)) {
        *out = json_real(json_number_value(v));
        return *out ? 0 : -1;
    }
    if (!v || json_is_null(v)) {
        *out = json_null();
        return 0;
    }
    return -1;
}

static int cmp_top(const void *a, const void *b) {
    const json_t *x = json_object_get(*(json_t *const *)a, "logprob");
    const json_t *y = json_object_get(*(json_t *const *)b, "logprob");
    double dx = json_is_number(x) ? json_number_value(x) : -INFINITY;
    double dy = json_is_number(y) ? json_number_value(y) : -INFINITY;
    if (dx > dy) return -1;
    if (dx < dy) return 1;
    const char *tx = json_string_value(json_object_get(*(json_t *const *)a, "token"));
    const char *ty = json_string_value(json_object_get(*(json_t *const *)b, "token"));
    return strcmp(tx ? tx : "", ty ? ty : "");
}

/* Sorts an array of {"token","logprob"} objects by decreasing logprob (ties by token). */
static int sort_top(json_t *arr) {
    size_t n = json_array_size(arr);
    if (n < 2) return 0;
    json_t **items = malloc(n * sizeof *items);
    if (!items) return -1;
    for (size_t i = 0; i < n; i++) items[i] = json_incref(json_array_get(arr, i));
    qsort(items, n, sizeof *items, cmp_top);
    json_array_clear(arr);
    int bad = 0;
    for (size_t i = 0; i < n; i++) bad |= json_array_append_new(arr, items[i]);
    free(items);
    return bad ? -1 : 0;
}

static json_t *entry_new(const char *token, json_t *logprob, json_t *top) {
    json_t *e = json_object();
    if (!e || json_object_set_new(e, "token", json_string(token)) ||
        json_object_set_new(e, "logprob", logprob) || json_object_set_new(e, "top", top)) {
        json_decref(e);
        return NULL;
    }
    return e;
}

/* One alternative of "top": {"token","logprob"}. Steals logprob. */
static json_t *pair_new(const char *token, json_t *logprob) {
    json_t *e = json_object();
    if (!e || json_object_set_new(e, "token", json_string(token)) || json_object_set_new(e, "logprob", logprob)) {
        json_decref(e);
        return NULL;
    }
    return e;
}

/* The end of one token's entry, both shapes: bad 2 (an alternative that
 * is malformed) frees the token's value and alternatives and out and sets
 * "logprobs: FIELD[i]WHY"; any other bad (no memory), or a failed sort or
 * append, frees out and sets the out-of-memory error; otherwise the
 * alternatives are sorted and the entry appended to out. 0, or -1 with out
 * freed and err set. */
static int entry_finish(json_t *out, const char *tok, json_t *v, json_t *top, int bad, const char *field, size_t i,
                        const char *why, drift_error *err) {
    if (bad == 2) {
        json_decref(v);
        json_decref(top);
        json_decref(out);
        drift_error_set(err, DRIFT_ERR_PARSE, "logprobs: %s[%zu]%s", field, i, why);
        return -1;
    }
    if (bad || sort_top(top) || json_array_append_new(out, entry_new(tok, v, top))) {
        json_decref(out);
        drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory normalising logprobs");
        return -1;
    }
    return 0;
}

/* Completions shape: parallel arrays tokens / token_logprobs / top_logprobs. */
static json_t *normalize_completions(const json_t *lp, drift_error *err) {
    const json_t *toks = json_object_get(lp, "tokens");
    const json_t *lps = json_object_get(lp, "token_logprobs");
    const json_t *tops = json_object_get(lp, "top_logprobs");
    if (!json_is_array(toks) || !json_is_array(lps)) {
        drift_error_set(err, DRIFT_ERR_PARSE, "logprobs: tokens and token_logprobs must be arrays");
        return NULL;
    }
    if (json_array_size(toks) != json_array_size(lps) ||
        (json_is_array(tops) && json_array_size(tops) != json_array_size(toks))) {
        drift_error_set(err, DRIFT_ERR_PARSE, "logprobs: tokens (%zu), token_logprobs (%zu) and top_logprobs (%zu) differ in length",
                        json_array_size(toks), json_array_size(lps), json_array_size(tops));
        return NULL;
    }
    if (tops && !json_is_array(tops) && !json_is_null(tops)) {
        drift_error_set(err, DRIFT_ERR_PARSE, "logprobs: top_logprobs must be an array");
        return NULL;
    }
    json_t *out = json_array();
    if (!out) goto nomem;
    for (size_t i = 0; i < json_array_size(toks); i++) {
        const char *tok = json_string_value(json_array_get(toks, i));
        json_t *v;
        if (!tok || logprob_value(json_array_get(lps, i), &v)) {
            drift_error_set(err, DRIFT_ERR_PARSE, "logprobs: token %zu is not a string with a numeric logprob", i);
            json_decref(out);
            return NULL;
        }
        json_t *top = json_array();
        const json_t *d = json_array_get(tops, i);
        if (d && !json_is_null(d) && !json_is_object(d)) {
            json_decref(v);
            json_decref(top);
            json_decref(out);
            drift_error_set(err, DRIFT_ERR_PARSE, "logprobs: top_logprobs[%zu] is not an object", i);
            return NULL;
        }
        const char *k;
        json_t *x;
        int bad = !top;
        json_object_foreach((json_t *)d, k, x) {
            json_t *xv;
            if (!json_is_number(x) || logprob_value(x, &xv)) {
                bad = 2;
                break;
            }
            bad |= json_array_append_new(top, pair_new(k, xv));
        }
        if (entry_finish(out, tok, v, top, bad, "top_logprobs", i, " has a non-numeric value", err)) return NULL;
    }
    return out;
nomem:
    drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory normalising logprobs");
    return NULL;
}

/* Chat shape: content[] of {"token","logprob","top_logprobs":[{"token","logprob"}]}. */
static json_t *normalize_chat(const json_t *content, drift_error *err) {
    json_t *out = json_array();
    if (!out) goto nomem;
    for (size_t i = 0; i < json_array_size(content); i++) {
        const json_t *c = json_array_get(content, i);
        const char *tok = json_string_value(json_object_get(c, "token"));
        json_t *v;
        if (!json_is_object(c) || !tok || logprob_value(json_object_get(c, "logprob"), &v)) {
            drift_error_set(err, DRIFT_ERR_PARSE, "logprobs: content[%zu] is not {token, logprob}", i);
            json_decref(out);
            return NULL;
        }
        const json_t *tl = json_object_get(c, "top_logprobs");
        if (tl && !json_is_array(tl) && !json_is_null(tl)) {
            json_decref(v);
            json_decref(out);
            drift_error_set(err, DRIFT_ERR_PARSE, "logprobs: content[%zu].top_logprobs is not an array", i);
            return NULL;
        }
        json_t *top = json_array();
        int bad = !top;
        for (size_t j = 0; j < json_array_size(tl) && !bad; j++) {
            const json_t *a = json_array_get(tl, j);
            const char *at = json_string_value(json_object_get(a, "token"));
            const json_t *al = json_object_get(a, "logprob");
            json_t *av;
            if (!at || !json_is_number(al) || logprob_value(al, &av)) {
                bad = 2;
                break;
            }
            if (json_array_append_new(top, pair_new(at, av))) bad = 1;
        }
        if (entry_finish(out, tok, v, top, bad, "content", i, ".top_logprobs[] is not {token, logprob}", err))
            return NULL;
    }
    return out;
nomem:
    drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory normalising logprobs");
    return NULL;
}

json_t *eng_http_normalize_logprobs(const json_t *lp, drift_error *err) {
    if (!lp || json_is_null(lp)) return json_null();
    if (!json_is_object(lp)) {
        drift_error_set(err, DRIFT_ERR_PARSE, "logprobs is not an object");
        return NULL;
    }
    const json_t *content = json_object_get(lp, "content");
    if (json_is_array(content)) return normalize_chat(content, err);
    if (json_object_get(lp, "tokens")) return normalize_completions(lp, err);
    if (!content || json_is_null(content)) return json_null();
    drift_error_set(err, DRIFT_ERR_PARSE, "logprobs has neither content[] nor tokens[]");
    return NULL;
}

drift_status eng_http_parse_reply(drift_api api, const char *body, size_t len, drift_answer *res,
                                    drift_error *err) {
    res->text = res->finish_reason = res->logprobs_json = NULL;
    res->prompt_tokens = res->completion_tokens = -1;
    if (!body || len == 0) return drift_error_set(err, DRIFT_ERR_PARSE, "empty reply");
    json_error_t je;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return drift_error_set(err, DRIFT_ERR_PARSE, "malformed JSON reply: %s (at byte %d)", je.text, je.position);
    drift_status st = DRIFT_OK;
    const json_t *choices = json_object_get(root, "choices");
    if (!json_is_object(root)) {
        st = drift_error_set(err, DRIFT_ERR_PARSE, "malformed JSON reply: not an object");
        goto done;
    }
    if (!json_is_array(choices) || json_array_size(choices) == 0) {
        const json_t *e = json_object_get(root, "error");
        if (e) {
            char msg[256];
            eng_http_error_message(body, len, msg, sizeof msg);
            st = drift_error_set(err, DRIFT_ERR_PARSE, "reply is an error: %s", msg);
        } else {
            st = drift_error_set(err, DRIFT_ERR_PARSE, "reply has no choices");
        }
        goto done;
    }
    const json_t *c0 = json_array_get(choices, 0);
    if (!json_is_object(c0)) {
        st = drift_error_set(err, DRIFT_ERR_PARSE, "reply choice 0 is not an object");
        goto done;
    }
    /* Text: completions' "text", chat's message.content; accept either shape
     * from either API (some servers answer chat-style on /completions). */
    const json_t *text = json_object_get(c0, "text");
    const json_t *msg = json_object_get(c0, "message");
    if (api == DRIFT_API_CHAT || !text) {
        if (json_is_object(msg)) {
            const json_t *content = json_object_get(msg, "content");
            if (content || !text) text = content;
            if (!content && !text) {
                st = drift_error_set(err, DRIFT_ERR_PARSE, "reply choice 0 message has no content");
                goto done;
            }
        }
    }
    if (!text) {
        st = drift_error_set(err, DRIFT_ERR_PARSE, "reply choice 0 has no %s",
                             api == DRIFT_API_CHAT ? "message.content" : "text");
        goto done;
    }
    if (json_is_null(text)) {
        res->text = util_strdup(""); /* e.g. a chat reply with only tool calls */
    } else if (json_is_string(text)) {
        res->text = util_strndup(json_string_value(text), json_string_length(text));
    } else {
        st = drift_error_set(err, DRIFT_ERR_PARSE, "reply choice 0 text is not a string");
        goto done;
    }
    if (!res->text) {
        st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        goto done;
    }
    const json_t *fr = json_object_get(c0, "finish_reason");
    if (json_is_string(fr)) res->finish_reason = util_strdup(json_string_value(fr));

    const json_t *usage = json_object_get(root, "usage");
    if (json_is_object(usage)) {
        res->prompt_tokens = json_to_int(json_object_get(usage, "prompt_tokens"));
        res->completion_tokens = json_to_int(json_object_get(usage, "completion_tokens"));
    }

    json_t *lp = eng_http_normalize_logprobs(json_object_get(c0, "logprobs"), err);
    if (!lp) {
        st = err ? err->code : DRIFT_ERR_PARSE;
        if (st == DRIFT_OK) st = DRIFT_ERR_PARSE;
        goto done;
    }
    if (!json_is_null(lp)) {
        res->logprobs_json = json_dumps(lp, JSON_COMPACT | JSON_REAL_PRECISION(17));
        if (!res->logprobs_json) st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    json_decref(lp);
done:
    json_decref(root);
    if (st) {
        free(res->text);
        free(res->finish_reason);
        free(res->logprobs_json);
        res->text = res->finish_reason = res->logprobs_json = NULL;
        res->prompt_tokens = res->completion_tokens = -1;
    }
    return st;
}

/* Copies up to 200 bytes of s into out with control bytes and quotes made
 * visible, so an HTML error page or binary garbage stays one readable line. */
static void printable(const char *s, size_t len, char *out, size_t cap) {
    size_t o = 0, lim = len < 200 ? len : 200;
    if (cap == 0) return;
    for (size_t i = 0; i < lim && o + 1 < cap; i++) {
        unsigned char ch = (unsigned char)s[i];
        out[o++] = (ch == '\n' || ch == '\r' || ch == '\t') ? ' ' : (ch < 0x20 || ch == 0x7f) ? '?' : (char)ch;
    }
    out[o] = '\0';
}

void eng_http_error_message(const char *body, size_t len, char *out, size_t cap) {
    if (cap == 0) return;
    out[0] = '\0';
    if (!body || len == 0) {
        snprintf(out, cap, "(empty body)");
        return;
    }
    json_t *root = json_loadb(body, len, 0, NULL);
    const char *m = NULL;
    if (json_is_object(root)) {
        const json_t *e = json_object_get(root, "error");
        if (json_is_object(e)) m = json_string_value(json_object_get(e, "message"));
        if (!m && json_is_string(e)) m = json_string_value(e);
        if (!m) m = json_string_value(json_object_get(root, "detail"));
        if (!m) m = json_string_value(json_object_get(root, "message"));
    }
    if (m)
        printable(m, strlen(m), out, cap);
    else
        printable(body, len, out, cap);
    json_decref(root);
}

drift_status eng_http_parse_embeddings(const char *body, size_t len, size_t n, float **vecs, int *dim,
                                         drift_error *err) {
    json_error_t je;
    json_t *root = json_loadb(body ? body : "", len, 0, &je);
    if (!root) return drift_error_set(err, DRIFT_ERR_PARSE, "malformed JSON embeddings reply: %s", je.text);
    drift_status st = DRIFT_OK;
    const json_t *data = json_object_get(root, "data");
    float *own = NULL;
    if (!json_is_array(data) || json_array_size(data) != n) {
        st = drift_error_set(err, DRIFT_ERR_PARSE, "embeddings reply has %zu vectors in data[], expected %zu",
                             json_array_size(data), n);
        goto done;
    }
    unsigned char *seen = calloc(n ? n : 1, 1);
    if (!seen) {
        st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *d = json_array_get(data, i);
        const json_t *emb = json_object_get(d, "embedding");
        const json_t *ix = json_object_get(d, "index");
        size_t at = i;
        if (json_is_integer(ix)) {
            json_int_t v = json_integer_value(ix);
            if (v < 0 || (size_t)v >= n) {
                st = drift_error_set(err, DRIFT_ERR_PARSE, "embeddings data[%zu].index %lld out of range", i, (long long)v);
                break;
            }
            at = (size_t)v;
        }
        if (seen[at]) {
            st = drift_error_set(err, DRIFT_ERR_PARSE, "embeddings data[%zu]: index %zu repeated", i, at);
            break;
        }
        seen[at] = 1;
        size_t m = json_array_size(emb);
        if (!json_is_array(emb) || m == 0 || m > 1000000) {
            st = drift_error_set(err, DRIFT_ERR_PARSE, "embeddings data[%zu].embedding is not a non-empty array", i);
            break;
        }
        if (*dim == 0 && !*vecs && !own) {
            *dim = (int)m;
            own = malloc((n ? n : 1) * m * sizeof *own);
            if (!own) {
                st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory for %zu x %zu embeddings", n, m);
                break;
            }
        }
        if (m != (size_t)*dim) {
            st = drift_error_set(err, DRIFT_ERR_PARSE, "embeddings data[%zu] has dimension %zu, expected %d", i, m, *dim);
            break;
        }
        float *dst = (own ? own : *vecs) + at * m;
        for (size_t j = 0; j < m; j++) {
            const json_t *x = json_array_get(emb, j);
            if (!json_is_number(x)) {
                st = drift_error_set(err, DRIFT_ERR_PARSE, "embeddings data[%zu].embedding[%zu] is not a number", i, j);
                break;
            }
            dst[j] = (float)json_number_value(x);
        }
        if (st) break;
    }
    free(seen);
    if (!st && own) {
        *vecs = own;
        own = NULL;
    }
done:
    if (own) {
        free(own);
        *dim = 0;
    }
    json_decref(root);
    return st;
}
