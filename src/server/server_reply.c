/* server_reply.c - the server's reply bodies, OpenAI's shapes:
 *
 *   completions  {"id","object":"text_completion","created","model",
 *                 "choices":[{"index","text","logprobs","finish_reason"}],
 *                 "usage","system_fingerprint"}
 *                logprobs {"tokens":[..],"token_logprobs":[..],"top_logprobs":[{tok:lp}..]}
 *                echo (OpenAI's legacy completions): text = prompt + completion;
 *                logprobs hold the prompt's tokens first (token_logprobs and
 *                top_logprobs null for the first, as OpenAI's and vLLM's
 *                echo) and "text_offset": each token's start in the text in
 *                code points (Python's len, as OpenAI's and vLLM's)
 *                prompt_logprobs (vLLM's extension; docs.vllm.ai
 *                vllm/logprobs.py: PromptLogprobs = list[Optional[dict[int,
 *                Logprob]]], Logprob {logprob, rank, decoded_token}): per
 *                prompt token null for the first, else {"<id>": {"logprob",
 *                "rank","decoded_token"}} with the prompt's own token first
 *                (as vLLM builds it), then the top K; completions: in each
 *                choice, with "prompt_token_ids"; chat: at the top level,
 *                as vLLM's ChatCompletionResponse
 *   chat         the same with "object":"chat.completion" and
 *                "message":{"role":"assistant","content"}; logprobs
 *                {"content":[{"token","logprob","bytes","top_logprobs":[..]}]}
 *   stream       "data: <chunk>\n\n" per token, then "data: [DONE]\n\n"
 *   embeddings   {"object":"list","data":[{"object":"embedding","index","embedding"}],..}
 *   error        {"error":{"message","type","param","code"}}
 *
 * Pure functions of their arguments (the tokenizer is asked through
 * srv_vocab): no model, no I/O, so the fuzzer drives them directly. Whatever
 * the bytes of a generated text, token or name, the output is valid JSON:
 * strings go through util_utf8_clean, and numbers JSON cannot hold (NaN,
 * infinities) become null. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server_internal.h"
#include "util/util.h"

/* A JSON string of s[0..n) made valid UTF-8 (NULL s = ""). */
static json_t *jstr_clean(const char *s, size_t n) {
    char *c = util_utf8_clean(s ? s : "", s ? n : 0);
    json_t *v = c ? json_string(c) : NULL;
    free(c);
    return v;
}

static json_t *jstr(const char *s) { return jstr_clean(s, s ? strlen(s) : 0); }

/* A number, or null when JSON cannot hold it. */
static json_t *jreal(double x) { return isfinite(x) ? json_real(x) : json_null(); }

/* Text of token id as a JSON string; *raw_out (when not NULL) keeps the raw
 * text (malloc'd, may be NULL). */
static json_t *token_json(const srv_vocab *v, int32_t id, char **raw_out) {
    char *t = v->token_text(v->user, id);
    json_t *j = jstr(t);
    if (raw_out) *raw_out = t;
    else free(t);
    return j;
}

static json_t *bytes_json(const char *t) {
    json_t *a = json_array();
    for (const unsigned char *p = (const unsigned char *)(t ? t : ""); *p && a; p++)
        json_array_append_new(a, json_integer(*p));
    return a;
}

/* Alternatives of one token to render: at most top and what the record holds. */
static int n_alternatives(const drift_token_logprob *lp, int top) {
    int n = lp->n_top < top ? lp->n_top : top;
    return n < SRV_MAX_TOP ? n : SRV_MAX_TOP;
}

/* The completions' top_logprobs entry of one token: {text: logprob} of its
 * first n alternatives (a text met again keeps its first logprob). */
static json_t *top_dict(const srv_vocab *v, const drift_token_logprob *lp, int n) {
    json_t *d = json_object();
    for (int k = 0; k < n; k++) {
        json_t *tk = token_json(v, lp->top_id[k], NULL);
        if (tk && !json_object_get(d, json_string_value(tk)))
            json_object_set_new(d, json_string_value(tk), jreal(lp->top_logprob[k]));
        json_decref(tk);
    }
    return d;
}

/* Completions logprobs of tokens [t0, t1) of g. */
static json_t *lp_completions(const srv_vocab *v, const drift_generation *g, int t0, int t1, int top) {
    json_t *toks = json_array(), *lps = json_array(), *tops = json_array();
    for (int t = t0; t < t1; t++) {
        const drift_token_logprob *lp = &g->lp[t];
        json_array_append_new(toks, token_json(v, lp->id, NULL));
        json_array_append_new(lps, jreal(lp->logprob));
        json_array_append_new(tops, top_dict(v, lp, n_alternatives(lp, top)));
    }
    return json_pack("{s:o, s:o, s:o}", "tokens", toks, "token_logprobs", lps, "top_logprobs", tops);
}

/* Chat logprobs content entries of tokens [t0, t1). */
static json_t *lp_chat(const srv_vocab *v, const drift_generation *g, int t0, int t1, int top) {
    json_t *content = json_array();
    for (int t = t0; t < t1; t++) {
        const drift_token_logprob *lp = &g->lp[t];
        char *raw;
        json_t *tk = token_json(v, lp->id, &raw);
        json_t *alts = json_array();
        for (int k = 0; k < n_alternatives(lp, top); k++) {
            char *r2;
            json_t *tk2 = token_json(v, lp->top_id[k], &r2);
            json_array_append_new(alts, json_pack("{s:o, s:o, s:o}", "token", tk2, "logprob", jreal(lp->top_logprob[k]),
                                                  "bytes", bytes_json(r2)));
            free(r2);
        }
        json_array_append_new(content, json_pack("{s:o, s:o, s:o, s:o}", "token", tk, "logprob", jreal(lp->logprob),
                                                 "bytes", bytes_json(raw), "top_logprobs", alts));
        free(raw);
    }
    return json_pack("{s:o}", "content", content);
}

/* Code points of s[0..n) (continuation bytes not counted). */
static long long code_points(const char *s, size_t n) {
    long long k = 0;
    for (size_t i = 0; i < n; i++) k += ((unsigned char)s[i] & 0xC0) != 0x80;
    return k;
}

/* vLLM's prompt_logprobs of one prompt: [null, {"id": {logprob, rank,
 * decoded_token}}, ...], the prompt's token first, then up to top others. */
static json_t *plp_vllm(const srv_vocab *v, const srv_prompt_lp *p, int top) {
    json_t *a = json_array();
    for (size_t i = 0; i < p->n && a; i++) {
        if (i == 0) {
            json_array_append_new(a, json_null());
            continue;
        }
        const drift_token_logprob *lp = &p->lp[i];
        json_t *d = json_object();
        char key[16];
        snprintf(key, sizeof key, "%d", (int)lp->id);
        json_object_set_new(d, key, json_pack("{s:o, s:i, s:o}", "logprob", jreal(lp->logprob), "rank", p->rank[i],
                                              "decoded_token", token_json(v, lp->id, NULL)));
        for (int k = 0; k < lp->n_top && k < top; k++) {
            snprintf(key, sizeof key, "%d", (int)lp->top_id[k]);
            if (json_object_get(d, key)) continue;
            json_object_set_new(d, key, json_pack("{s:o, s:i, s:o}", "logprob", jreal(lp->top_logprob[k]), "rank", k + 1,
                                                  "decoded_token", token_json(v, lp->top_id[k], NULL)));
        }
        json_array_append_new(a, d);
    }
    return a;
}

/* The echo's logprobs: the prompt's tokens (p), then tokens [0, n) of g
 * (none when g has no logprobs), with text_offset over prompt + text. */
static json_t *lp_echo(const srv_completion *c, const srv_prompt_lp *p, const char *prompt, const drift_generation *g) {
    const srv_vocab *v = &c->vocab;
    int top = c->top_logprobs;
    json_t *toks = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    size_t plen = strlen(prompt);
    for (size_t i = 0; i < p->n; i++) {
        size_t b = v->prefix_bytes(v->user, p->ids, i);
        json_array_append_new(toks, token_json(v, p->ids[i], NULL));
        json_array_append_new(offs, json_integer(code_points(prompt, b < plen ? b : plen)));
        if (i == 0) {
            json_array_append_new(lps, json_null());
            json_array_append_new(tops, json_null());
            continue;
        }
        const drift_token_logprob *lp = &p->lp[i];
        json_array_append_new(lps, jreal(lp->logprob));
        json_t *d = top_dict(v, lp, lp->n_top < top ? lp->n_top : top);
        json_t *tk = token_json(v, lp->id, NULL); /* the chosen token too: up to K + 1, as OpenAI's */
        if (tk && !json_object_get(d, json_string_value(tk))) json_object_set_new(d, json_string_value(tk), jreal(lp->logprob));
        json_decref(tk);
        json_array_append_new(tops, d);
    }
    long long base = code_points(prompt, plen);
    for (int t = 0; g->lp && t < g->n_tokens; t++) {
        const drift_token_logprob *lp = &g->lp[t];
        size_t b = v->prefix_bytes(v->user, g->tokens, (size_t)t);
        size_t tl = g->text ? strlen(g->text) : 0;
        json_array_append_new(toks, token_json(v, lp->id, NULL));
        json_array_append_new(lps, jreal(lp->logprob));
        json_array_append_new(offs, json_integer(base + code_points(g->text ? g->text : "", b < tl ? b : tl)));
        json_array_append_new(tops, top_dict(v, lp, n_alternatives(lp, top)));
    }
    return json_pack("{s:o, s:o, s:o, s:o}", "tokens", toks, "token_logprobs", lps, "top_logprobs", tops, "text_offset",
                     offs);
}

/* Logprobs of tokens [t0, t1) of g in the endpoint's shape. */
static json_t *lp_json(const srv_completion *c, const drift_generation *g, int t0, int t1) {
    if (c->ep == SRV_EP_CHAT) return lp_chat(&c->vocab, g, t0, t1, c->top_logprobs);
    return lp_completions(&c->vocab, g, t0, t1, c->top_logprobs);
}

static json_t *usage_json(const srv_completion *c) {
    long long completion = 0;
    for (size_t i = 0; i < c->n_choices; i++) completion += c->gens[i].n_tokens;
    return json_pack("{s:I, s:I, s:I}", "prompt_tokens", (json_int_t)c->prompt_tokens, "completion_tokens",
                     (json_int_t)completion, "total_tokens", (json_int_t)(c->prompt_tokens + completion));
}

static json_t *finish_json(const drift_generation *g) { return jstr(g->finish_reason ? g->finish_reason : "length"); }

/* json_dumps(o) (compact), o released; NULL when o is. */
static char *dump(json_t *o) {
    char *t = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return t;
}

char *srv_render_completion(const srv_completion *c) {
    int chat = c->ep == SRV_EP_CHAT;
    int echo = !chat && c->echo && c->plp && c->prompts;
    json_t *choices = json_array();
    for (size_t i = 0; i < c->n_choices; i++) {
        const drift_generation *g = &c->gens[i];
        json_t *text;
        if (echo) {
            char *both = util_asprintf("%s%s", c->prompts[i], g->text ? g->text : "");
            text = jstr(both);
            free(both);
        } else {
            text = jstr(g->text);
        }
        json_t *lp = !c->want_logprobs ? json_null()
                     : echo            ? lp_echo(c, &c->plp[i], c->prompts[i], g)
                                       : lp_json(c, g, 0, g->lp ? g->n_tokens : 0); /* empty when no token */
        json_t *ch = chat ? json_pack("{s:i, s:{s:s, s:o}, s:o, s:o}", "index", (int)i, "message", "role", "assistant",
                                      "content", text, "logprobs", lp, "finish_reason", finish_json(g))
                          : json_pack("{s:i, s:o, s:o, s:o}", "index", (int)i, "text", text, "logprobs", lp,
                                      "finish_reason", finish_json(g));
        if (ch && !chat && c->plp && c->prompt_logprobs >= 0) {
            json_t *ids = json_array();
            for (size_t k = 0; k < c->plp[i].n; k++) json_array_append_new(ids, json_integer(c->plp[i].ids[k]));
            json_object_set_new(ch, "prompt_logprobs", plp_vllm(&c->vocab, &c->plp[i], c->prompt_logprobs));
            json_object_set_new(ch, "prompt_token_ids", ids);
        }
        json_array_append_new(choices, ch);
    }
    json_t *o = json_pack("{s:o, s:s, s:I, s:o, s:o, s:o, s:s}", "id", jstr(c->id), "object",
                          chat ? "chat.completion" : "text_completion", "created", (json_int_t)c->created, "model",
                          jstr(c->model), "choices", choices, "usage", usage_json(c), "system_fingerprint", "driftbench");
    if (o && chat && c->plp && c->prompt_logprobs >= 0 && c->n_choices)
        json_object_set_new(o, "prompt_logprobs", plp_vllm(&c->vocab, &c->plp[0], c->prompt_logprobs));
    return dump(o);
}

/* Appends "data: <o>\n\n" (o released). 0, or -1 when out of memory. */
static int sse_add(util_buf *b, json_t *o) {
    char *t = dump(o);
    int rc = t ? buf_printf(b, "data: %s\n\n", t) : -1;
    free(t);
    return rc;
}

static json_t *chunk_new(const srv_completion *c, json_t *choice) {
    int chat = c->ep == SRV_EP_CHAT;
    return json_pack("{s:o, s:s, s:I, s:o, s:[o]}", "id", jstr(c->id), "object",
                     chat ? "chat.completion.chunk" : "text_completion", "created", (json_int_t)c->created, "model",
                     jstr(c->model), "choices", choice);
}

/* End of token t's piece of text (tlen bytes): the text of tokens [0, t]
 * cut before a non-continuation byte, never before done (the previous end). */
static size_t piece_end(const srv_completion *c, const drift_generation *g, int t, const char *text, size_t tlen,
                        size_t done) {
    if (t == g->n_tokens - 1) return tlen;
    size_t L = c->vocab.prefix_bytes(c->vocab.user, g->tokens, (size_t)t + 1);
    size_t upto = L < tlen ? L : tlen;
    while (upto < tlen && ((unsigned char)text[upto] & 0xC0) == 0x80) upto++;
    return upto < done ? done : upto;
}

/* The chunks of choice i. 0, or -1 when out of memory. */
static int stream_choice(const srv_completion *c, size_t i, util_buf *b) {
    int chat = c->ep == SRV_EP_CHAT;
    const drift_generation *g = &c->gens[i];
    const char *text = g->text ? g->text : "";
    size_t tlen = strlen(text), done = 0;
    int bad = 0;
    if (chat)
        bad |= sse_add(b, chunk_new(c, json_pack("{s:i, s:{s:s, s:s}, s:n, s:n}", "index", (int)i, "delta", "role",
                                                 "assistant", "content", "", "logprobs", "finish_reason")));
    for (int t = 0; t < g->n_tokens && !bad; t++) {
        size_t upto = piece_end(c, g, t, text, tlen, done);
        json_t *piece = jstr_clean(text + done, upto - done);
        done = upto;
        json_t *lp = c->want_logprobs && g->lp ? lp_json(c, g, t, t + 1) : json_null();
        json_t *ch = chat ? json_pack("{s:i, s:{s:o}, s:o, s:n}", "index", (int)i, "delta", "content", piece, "logprobs",
                                      lp, "finish_reason")
                          : json_pack("{s:i, s:o, s:o, s:n}", "index", (int)i, "text", piece, "logprobs", lp,
                                      "finish_reason");
        bad |= sse_add(b, chunk_new(c, ch));
    }
    json_t *last = chat ? json_pack("{s:i, s:{}, s:n, s:o}", "index", (int)i, "delta", "logprobs", "finish_reason",
                                    finish_json(g))
                        : json_pack("{s:i, s:s, s:n, s:o}", "index", (int)i, "text", "", "logprobs", "finish_reason",
                                    finish_json(g));
    return bad | sse_add(b, chunk_new(c, last));
}

char *srv_render_stream(const srv_completion *c) {
    int chat = c->ep == SRV_EP_CHAT;
    util_buf b = {0};
    int bad = 0;
    for (size_t i = 0; i < c->n_choices && !bad; i++) bad |= stream_choice(c, i, &b);
    if (c->include_usage && !bad)
        bad |= sse_add(&b, json_pack("{s:o, s:s, s:I, s:o, s:[], s:o}", "id", jstr(c->id), "object",
                                     chat ? "chat.completion.chunk" : "text_completion", "created", (json_int_t)c->created,
                                     "model", jstr(c->model), "choices", "usage", usage_json(c)));
    bad |= buf_printf(&b, "data: [DONE]\n\n");
    if (bad) {
        buf_free(&b);
        return NULL;
    }
    return buf_steal(&b);
}

/* Base64 of the vector's little-endian float32 bytes, as OpenAI's. */
static json_t *base64_floats(const float *v, int n) {
    char *o = util_b64_encode(v, (size_t)n * sizeof *v);
    json_t *s = o ? json_string(o) : NULL;
    free(o);
    return s;
}

char *srv_render_embeddings(const char *model, const float *vecs, size_t n, int dim, int base64,
                            long long prompt_tokens) {
    json_t *data = json_array();
    for (size_t i = 0; i < n; i++) {
        const float *v = vecs + i * (size_t)dim;
        json_t *emb;
        if (base64) {
            emb = base64_floats(v, dim);
        } else {
            emb = json_array();
            for (int d = 0; d < dim && emb; d++) json_array_append_new(emb, jreal(v[d]));
        }
        json_array_append_new(data, json_pack("{s:s, s:i, s:o}", "object", "embedding", "index", (int)i, "embedding", emb));
    }
    return dump(json_pack("{s:s, s:o, s:o, s:{s:I, s:I}}", "object", "list", "data", data, "model", jstr(model), "usage",
                          "prompt_tokens", (json_int_t)prompt_tokens, "total_tokens", (json_int_t)prompt_tokens));
}

char *srv_render_models(const char *model) {
    return dump(json_pack("{s:s, s:[{s:o, s:s, s:I, s:s}]}", "object", "list", "data", "id", jstr(model), "object",
                          "model", "created", (json_int_t)0, "owned_by", "driftbench"));
}

char *srv_render_health(int draining) { return dump(json_pack("{s:s}", "status", draining ? "draining" : "ok")); }

/* A fixed-size field of srv_error as a JSON string ("" = null when nullable). */
static json_t *field_json(const char *f, size_t size, int nullable) {
    size_t n = strnlen(f, size);
    return nullable && n == 0 ? json_null() : jstr_clean(f, n);
}

char *srv_error_json(const srv_error *e) {
    const char *type = e->http_status >= 500 ? "server_error" : "invalid_request_error";
    if (e->http_status == 404 && !strcmp(e->code, "model_not_found")) type = "invalid_request_error";
    return dump(json_pack("{s:{s:o, s:s, s:o, s:o}}", "error", "message", field_json(e->message, sizeof e->message, 0),
                          "type", type, "param", field_json(e->param, sizeof e->param, 1), "code",
                          field_json(e->code, sizeof e->code, 1)));
}
