/* fuzz_server_reply.c - fuzzes the server's reply renderers (server_reply.c)
 * with generated data no model would give but none may break: texts, token
 * texts and names of any bytes (invalid UTF-8, NULs cut them), logprobs and
 * embedding values of any bit pattern (NaN, infinities, huge), token ids out
 * of the vocabulary, more alternatives than asked, a tokenizer whose prefix
 * lengths are wild. Every output must be valid JSON (a stream: SSE events of
 * valid JSON, then [DONE]) in OpenAI's shape, holding what went in:
 *   - one choice per generation, its text the generated text made valid UTF-8;
 *   - logprobs: one entry per token, a number or (not finite) null;
 *   - a stream: one chunk per token and a choice's pieces joined = its text;
 *   - embeddings: dim numbers per vector, or base64 of exactly its bytes;
 *   - usage: the token counts.
 *
 * Prompt logprobs (flag bit 5; echo bit 6; not with stream): vLLM's list
 * one entry per prompt token, null first; echo's text the prompt first,
 * its four arrays one length (the prompt's tokens + the completion's).
 *
 * Input layout (missing bytes read as 0): kind (completion, stream,
 * embeddings, error, models + health), flags (chat, logprobs, usage,
 * base64, wild prefixes, prompt logprobs, echo), then the kind's fields in the order the fuzz_*
 * functions below read them (a completion: vocabulary, top_logprobs, model,
 * id, created, prompt tokens, choices with their tokens and logprobs).
 * Numbers are little-endian; a string is a length byte and that many bytes. */
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server_internal.h"
#include "util/util.h"

/* A broken promise: say which, then crash (the driver and libFuzzer report it). */
#define REQUIRE(cond) require((cond) != 0, __LINE__, #cond)

static void require(int ok, int line, const char *what) {
    if (ok) return;
    fprintf(stderr, "fuzz_server_reply.c:%d: %s\n", line, what);
    abort();
}

typedef struct reader {
    const uint8_t *p;
    size_t n, i;
} reader;

static uint8_t rd_u8(reader *r) { return r->i < r->n ? r->p[r->i++] : 0; }

static uint32_t rd_u32(reader *r) {
    uint32_t x = 0;
    for (int k = 0; k < 4; k++) x |= (uint32_t)rd_u8(r) << (8 * k);
    return x;
}

static uint64_t rd_u64(reader *r) {
    uint64_t lo = rd_u32(r);
    return lo | (uint64_t)rd_u32(r) << 32;
}

static double rd_f64(reader *r) {
    uint64_t b = rd_u64(r);
    double x;
    memcpy(&x, &b, sizeof x);
    return x;
}

static float rd_f32(reader *r) {
    uint32_t b = rd_u32(r);
    float x;
    memcpy(&x, &b, sizeof x);
    return x;
}

/* A length byte (at most max) and the bytes, NUL-terminated (malloc'd). */
static char *rd_str(reader *r, size_t max) {
    size_t len = rd_u8(r) % (max + 1);
    char *s = malloc(len + 1);
    REQUIRE(s);
    for (size_t k = 0; k < len; k++) s[k] = (char)rd_u8(r);
    s[len] = 0;
    return s;
}

/* The fuzzer's tokenizer: a table of token texts. */
typedef struct vocab {
    char *text[32];
    size_t n;
    int wild; /* prefix lengths unrelated to the texts */
} vocab;

static const char *vocab_get(const vocab *v, int32_t id) {
    if (id < 0) return NULL;
    return v->text[(size_t)id % v->n];
}

static char *token_text(const void *user, int32_t id) {
    const char *t = vocab_get(user, id);
    return t ? util_strdup(t) : NULL;
}

static size_t prefix_bytes(const void *user, const int32_t *ids, size_t n) {
    const vocab *v = user;
    if (v->wild) return n % 3 == 0 ? SIZE_MAX - n : n * 7919;
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        const char *t = vocab_get(v, ids[i]);
        len += t ? strlen(t) : 0;
    }
    return len;
}

static char *clean(const char *s) {
    char *c = util_utf8_clean(s ? s : "", s ? strlen(s) : 0);
    REQUIRE(c);
    return c;
}

static void check_logprob(const json_t *v, double x) {
    REQUIRE(isfinite(x) ? json_is_number(v) : json_is_null(v));
}

/* Logprobs of tokens [t0, t1) of g, as rendered in lp (completions or chat). */
static void check_lp(const srv_completion *c, const drift_generation *g, const json_t *lp, int t0, int t1) {
    int chat = c->ep == SRV_EP_CHAT;
    const json_t *arr = json_object_get(lp, chat ? "content" : "tokens");
    REQUIRE(json_is_array(arr) && json_array_size(arr) == (size_t)(t1 - t0));
    if (!chat) {
        const json_t *lps = json_object_get(lp, "token_logprobs"), *tops = json_object_get(lp, "top_logprobs");
        REQUIRE(json_array_size(lps) == (size_t)(t1 - t0) && json_array_size(tops) == (size_t)(t1 - t0));
    }
    for (int t = t0; t < t1; t++) {
        const drift_token_logprob *x = &g->lp[t];
        size_t k = (size_t)(t - t0);
        int want_top = x->n_top < c->top_logprobs ? x->n_top : c->top_logprobs;
        if (want_top < 0) want_top = 0;
        if (chat) {
            const json_t *e = json_array_get(arr, k);
            check_logprob(json_object_get(e, "logprob"), x->logprob);
            REQUIRE(json_is_string(json_object_get(e, "token")) && json_is_array(json_object_get(e, "bytes")));
            const json_t *alts = json_object_get(e, "top_logprobs");
            REQUIRE(json_is_array(alts) && json_array_size(alts) == (size_t)want_top);
            for (size_t a = 0; a < json_array_size(alts); a++)
                check_logprob(json_object_get(json_array_get(alts, a), "logprob"), x->top_logprob[a]);
        } else {
            check_logprob(json_array_get(json_object_get(lp, "token_logprobs"), k), x->logprob);
            const json_t *d = json_array_get(json_object_get(lp, "top_logprobs"), k);
            REQUIRE(json_is_object(d) && json_object_size(d) <= (size_t)want_top); /* equal texts share a key */
            const char *key;
            const json_t *val;
            json_object_foreach((json_t *)d, key, val) {
                REQUIRE(key && (json_is_number(val) || json_is_null(val)));
            }
        }
    }
}

static long long completion_tokens(const srv_completion *c) {
    long long n = 0;
    for (size_t i = 0; i < c->n_choices; i++) n += c->gens[i].n_tokens;
    return n;
}

static void check_usage(const srv_completion *c, const json_t *u) {
    long long ct = completion_tokens(c);
    REQUIRE(json_integer_value(json_object_get(u, "prompt_tokens")) == c->prompt_tokens);
    REQUIRE(json_integer_value(json_object_get(u, "completion_tokens")) == ct);
    REQUIRE(json_integer_value(json_object_get(u, "total_tokens")) == c->prompt_tokens + ct);
}

static void check_completion(const srv_completion *c) {
    char *out = srv_render_completion(c);
    json_t *o = out ? json_loads(out, 0, NULL) : NULL;
    REQUIRE(o);
    int chat = c->ep == SRV_EP_CHAT;
    const json_t *choices = json_object_get(o, "choices");
    REQUIRE(json_is_array(choices) && json_array_size(choices) == c->n_choices);
    for (size_t i = 0; i < c->n_choices; i++) {
        const drift_generation *g = &c->gens[i];
        const json_t *ch = json_array_get(choices, i);
        const json_t *text = chat ? json_object_get(json_object_get(ch, "message"), "content") : json_object_get(ch, "text");
        char *want = clean(g->text);
        REQUIRE(json_is_string(text) && !strcmp(json_string_value(text), want));
        free(want);
        REQUIRE(json_is_string(json_object_get(ch, "finish_reason")));
        const json_t *lp = json_object_get(ch, "logprobs");
        if (!c->want_logprobs) {
            REQUIRE(json_is_null(lp));
        } else {
            check_lp(c, g, lp, 0, g->lp ? g->n_tokens : 0);
        }
    }
    check_usage(c, json_object_get(o, "usage"));
    REQUIRE(json_is_string(json_object_get(o, "model")) && json_is_string(json_object_get(o, "id")));
    json_decref(o);
    free(out);
}

/* A completion with prompt logprobs (vLLM's prompt_logprobs and/or echo):
 * valid JSON; vLLM's list one entry per prompt token, null first, each
 * entry a dict of {logprob (number or null), rank, decoded_token}; echo's
 * text the prompt then the text, its logprob arrays the prompt's tokens
 * then the completion's, all four of one length. */
static void check_prompt_lp(const srv_completion *c) {
    char *out = srv_render_completion(c);
    json_t *o = out ? json_loads(out, 0, NULL) : NULL;
    REQUIRE(o);
    int chat = c->ep == SRV_EP_CHAT;
    const json_t *choices = json_object_get(o, "choices");
    REQUIRE(json_is_array(choices) && json_array_size(choices) == c->n_choices);
    for (size_t i = 0; i < c->n_choices; i++) {
        const drift_generation *g = &c->gens[i];
        const srv_prompt_lp *p = &c->plp[i];
        const json_t *ch = json_array_get(choices, i);
        const json_t *pl = chat ? (i == 0 ? json_object_get(o, "prompt_logprobs") : NULL) : json_object_get(ch, "prompt_logprobs");
        if (c->prompt_logprobs >= 0 && (!chat || i == 0)) {
            REQUIRE(json_is_array(pl) && json_array_size(pl) == p->n);
            for (size_t k = 0; k < p->n; k++) {
                const json_t *d = json_array_get(pl, k);
                if (k == 0) {
                    REQUIRE(json_is_null(d));
                    continue;
                }
                REQUIRE(json_is_object(d) && json_object_size(d) >= 1);
                const char *key;
                const json_t *v;
                json_object_foreach((json_t *)d, key, v) {
                    const json_t *l = json_object_get(v, "logprob");
                    REQUIRE(json_is_number(l) || json_is_null(l));
                    REQUIRE(json_is_integer(json_object_get(v, "rank")) && json_is_string(json_object_get(v, "decoded_token")));
                }
            }
        }
        if (chat || !c->echo) continue;
        char *want_p = clean(c->prompts[i]), *want_t = clean(g->text);
        const json_t *text = json_object_get(ch, "text");
        REQUIRE(json_is_string(text) && !strncmp(json_string_value(text), want_p, strlen(want_p)));
        free(want_p);
        free(want_t);
        if (!c->want_logprobs) continue;
        const json_t *lp = json_object_get(ch, "logprobs");
        size_t n = p->n + (size_t)(g->lp ? g->n_tokens : 0);
        const char *arrays[] = {"tokens", "token_logprobs", "top_logprobs", "text_offset"};
        for (int a = 0; a < 4; a++) REQUIRE(json_array_size(json_object_get(lp, arrays[a])) == n);
        if (p->n) REQUIRE(json_is_null(json_array_get(json_object_get(lp, "token_logprobs"), 0)));
    }
    json_decref(o);
    free(out);
}

static void check_stream(const srv_completion *c) {
    char *out = srv_render_stream(c);
    REQUIRE(out);
    int chat = c->ep == SRV_EP_CHAT;
    util_buf *joined = calloc(c->n_choices ? c->n_choices : 1, sizeof *joined);
    size_t *chunks = calloc(c->n_choices ? c->n_choices : 1, sizeof *chunks);
    REQUIRE(joined && chunks);
    int done = 0, usage = 0;
    for (char *ev = out; *ev;) {
        REQUIRE(!done && !strncmp(ev, "data: ", 6)); /* nothing after [DONE] */
        char *end = strstr(ev, "\n\n");
        REQUIRE(end);
        *end = 0;
        const char *data = ev + 6;
        ev = end + 2;
        if (!strcmp(data, "[DONE]")) {
            done = 1;
            continue;
        }
        json_t *o = json_loads(data, 0, NULL);
        REQUIRE(o);
        const json_t *choices = json_object_get(o, "choices");
        REQUIRE(json_is_array(choices));
        if (json_array_size(choices) == 0) { /* the usage chunk, last */
            REQUIRE(c->include_usage && !usage);
            check_usage(c, json_object_get(o, "usage"));
            usage = 1;
        } else {
            REQUIRE(!usage && json_array_size(choices) == 1);
            const json_t *ch = json_array_get(choices, 0);
            json_int_t i = json_integer_value(json_object_get(ch, "index"));
            REQUIRE(i >= 0 && (size_t)i < c->n_choices);
            const json_t *piece = chat ? json_object_get(json_object_get(ch, "delta"), "content")
                                       : json_object_get(ch, "text");
            REQUIRE(!piece || !buf_append(&joined[i], json_string_value(piece), json_string_length(piece)));
            const json_t *lp = json_object_get(ch, "logprobs");
            int token_chunk = json_is_null(json_object_get(ch, "finish_reason")) &&
                              !(chat && json_object_get(json_object_get(ch, "delta"), "role"));
            if (token_chunk) {
                const drift_generation *g = &c->gens[i];
                REQUIRE(chunks[i] < (size_t)g->n_tokens);
                if (c->want_logprobs && g->lp) check_lp(c, g, lp, (int)chunks[i], (int)chunks[i] + 1);
                else REQUIRE(json_is_null(lp));
                chunks[i]++;
            }
        }
        json_decref(o);
    }
    REQUIRE(done && usage == (c->include_usage != 0));
    for (size_t i = 0; i < c->n_choices; i++) {
        char *want = clean(c->gens[i].text);
        const char *got = joined[i].data ? joined[i].data : "";
        REQUIRE(!strcmp(got, want) && chunks[i] == (size_t)(c->gens[i].n_tokens > 0 ? c->gens[i].n_tokens : 0));
        free(want);
        buf_free(&joined[i]);
    }
    free(joined);
    free(chunks);
    free(out);
}

static void fuzz_completion(reader *r, uint8_t flags, int stream, vocab *v) {
    srv_completion c = {0};
    c.ep = flags & 1 ? SRV_EP_CHAT : SRV_EP_COMPLETIONS;
    c.want_logprobs = (flags >> 1) & 1;
    c.include_usage = (flags >> 2) & 1;
    v->wild = (flags >> 4) & 1;
    c.top_logprobs = rd_u8(r) % (SRV_MAX_TOP + 1);
    char *model = rd_str(r, 64), *id = rd_str(r, 48);
    c.model = model;
    c.id = id;
    c.created = (long long)rd_u64(r);
    c.prompt_tokens = rd_u32(r);
    c.vocab = (srv_vocab){token_text, prefix_bytes, v};
    c.n_choices = rd_u8(r) % 5;
    drift_generation *gens = calloc(c.n_choices ? c.n_choices : 1, sizeof *gens);
    REQUIRE(gens);
    static const char *const reasons[] = {NULL, "stop", "length", "cancelled"};
    char *reason_text[5] = {0};
    for (size_t i = 0; i < c.n_choices; i++) {
        drift_generation *g = &gens[i];
        g->text = rd_str(r, 255);
        uint8_t fr = rd_u8(r) % 5;
        g->finish_reason = fr < 4 ? reasons[fr] : (reason_text[i] = rd_str(r, 16));
        g->n_tokens = rd_u8(r) % 16;
        if (g->n_tokens == 0) g->text[0] = 0; /* the text is the tokens' (the engine's promise) */
        int has_lp = rd_u8(r) & 1;
        g->tokens = calloc((size_t)g->n_tokens + 1, sizeof *g->tokens);
        g->lp = has_lp ? calloc((size_t)g->n_tokens + 1, sizeof *g->lp) : NULL;
        REQUIRE(g->tokens && (!has_lp || g->lp));
        for (int t = 0; t < g->n_tokens; t++) {
            g->tokens[t] = (int32_t)rd_u32(r);
            if (!g->lp) continue;
            drift_token_logprob *lp = &g->lp[t];
            lp->id = g->tokens[t];
            lp->logprob = rd_f64(r);
            lp->n_top = rd_u8(r) % (SRV_MAX_TOP + 1);
            for (int k = 0; k < lp->n_top; k++) {
                lp->top_id[k] = (int32_t)rd_u32(r);
                lp->top_logprob[k] = rd_f64(r);
            }
        }
    }
    c.gens = gens;
    /* prompt logprobs (not with stream): one prompt per choice */
    int plp_on = !stream && ((flags >> 5) & 1);
    srv_prompt_lp *plp = calloc(c.n_choices ? c.n_choices : 1, sizeof *plp);
    char **prompts = calloc(c.n_choices ? c.n_choices : 1, sizeof *prompts);
    REQUIRE(plp && prompts);
    for (size_t i = 0; plp_on && i < c.n_choices; i++) {
        prompts[i] = rd_str(r, 64);
        size_t n = rd_u8(r) % 12;
        int32_t *ids = calloc(n + 1, sizeof *ids);
        drift_token_logprob *lps = calloc(n + 1, sizeof *lps);
        int *rank = calloc(n + 1, sizeof *rank);
        REQUIRE(ids && lps && rank);
        for (size_t k = 0; k < n; k++) {
            ids[k] = (int32_t)rd_u32(r);
            lps[k].id = ids[k];
            lps[k].logprob = rd_f64(r);
            rank[k] = (int)(rd_u32(r) & 0xffffff);
            lps[k].n_top = rd_u8(r) % (SRV_MAX_TOP + 1);
            for (int q = 0; q < lps[k].n_top; q++) {
                lps[k].top_id[q] = (int32_t)rd_u32(r);
                lps[k].top_logprob[q] = rd_f64(r);
            }
        }
        plp[i] = (srv_prompt_lp){ids, n, lps, rank};
    }
    if (plp_on) {
        c.plp = plp;
        c.prompts = (const char *const *)prompts;
        uint8_t pl = rd_u8(r);
        c.prompt_logprobs = pl & 0x80 ? -1 : pl % (SRV_MAX_TOP + 1);
        c.echo = (flags >> 6) & 1;
        check_prompt_lp(&c);
    } else if (stream) {
        check_stream(&c);
    } else {
        check_completion(&c);
    }
    for (size_t i = 0; plp_on && i < c.n_choices; i++) {
        free((void *)plp[i].ids);
        free((void *)plp[i].lp);
        free((void *)plp[i].rank);
        free(prompts[i]);
    }
    free(plp);
    free(prompts);
    for (size_t i = 0; i < c.n_choices; i++) {
        free(gens[i].text);
        free(gens[i].tokens);
        free(gens[i].lp);
        free(reason_text[i]);
    }
    free(gens);
    free(model);
    free(id);
}

static void fuzz_embeddings(reader *r, uint8_t flags) {
    int base64 = (flags >> 3) & 1;
    char *model = rd_str(r, 64);
    long long ptok = rd_u32(r);
    size_t n = rd_u8(r) % 5;
    int dim = rd_u8(r) % 17;
    float *vecs = calloc(n * (size_t)dim + 1, sizeof *vecs);
    REQUIRE(vecs);
    for (size_t k = 0; k < n * (size_t)dim; k++) vecs[k] = rd_f32(r);
    char *out = srv_render_embeddings(model, vecs, n, dim, base64, ptok);
    json_t *o = out ? json_loads(out, 0, NULL) : NULL;
    REQUIRE(o);
    const json_t *data = json_object_get(o, "data");
    REQUIRE(json_is_array(data) && json_array_size(data) == n);
    for (size_t i = 0; i < n; i++) {
        const json_t *emb = json_object_get(json_array_get(data, i), "embedding");
        const float *v = vecs + i * (size_t)dim;
        if (base64) {
            size_t len = 0;
            unsigned char *b = json_is_string(emb) ? util_b64_decode(json_string_value(emb), &len) : NULL;
            REQUIRE(b && len == (size_t)dim * sizeof *v && !memcmp(b, v, len));
            free(b);
        } else {
            REQUIRE(json_is_array(emb) && json_array_size(emb) == (size_t)dim);
            for (int d = 0; d < dim; d++) check_logprob(json_array_get(emb, (size_t)d), v[d]);
        }
    }
    REQUIRE(json_integer_value(json_object_get(json_object_get(o, "usage"), "prompt_tokens")) == ptok);
    json_decref(o);
    free(out);
    free(vecs);
    free(model);
}

static void fuzz_error(reader *r) {
    srv_error e;
    memset(&e, 0, sizeof e);
    e.http_status = (int)(rd_u32(r) % 600);
    char *msg = rd_str(r, 255), *param = rd_str(r, 63), *code = rd_str(r, 63);
    memcpy(e.message, msg, strlen(msg) + 1);
    memcpy(e.param, param, strlen(param) + 1);
    memcpy(e.code, code, strlen(code) + 1);
    char *out = srv_error_json(&e);
    json_t *o = out ? json_loads(out, 0, NULL) : NULL;
    const json_t *err = json_object_get(o, "error");
    REQUIRE(json_is_string(json_object_get(err, "message")) && json_is_string(json_object_get(err, "type")));
    REQUIRE(json_is_null(json_object_get(err, "param")) == !param[0]);
    REQUIRE(json_is_null(json_object_get(err, "code")) == !code[0]);
    json_decref(o);
    free(out);
    free(msg);
    free(param);
    free(code);
}

static void fuzz_small(reader *r, uint8_t flags) {
    char *model = rd_str(r, 64);
    char *outs[2] = {srv_render_models(model), srv_render_health(flags & 1)};
    for (int k = 0; k < 2; k++) {
        json_t *o = outs[k] ? json_loads(outs[k], 0, NULL) : NULL;
        REQUIRE(json_is_object(o));
        json_decref(o);
        free(outs[k]);
    }
    free(model);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    reader r = {data, size, 0};
    uint8_t kind = rd_u8(&r) % 5, flags = rd_u8(&r);
    vocab v = {{0}, 0, 0};
    if (kind <= 1) {
        v.n = 1 + rd_u8(&r) % 32;
        for (size_t k = 0; k < v.n; k++) v.text[k] = rd_str(&r, 16);
    }
    switch (kind) {
    case 0: fuzz_completion(&r, flags, 0, &v); break;
    case 1: fuzz_completion(&r, flags, 1, &v); break;
    case 2: fuzz_embeddings(&r, flags); break;
    case 3: fuzz_error(&r); break;
    default: fuzz_small(&r, flags); break;
    }
    for (size_t k = 0; k < v.n; k++) free(v.text[k]);
    return 0;
}
