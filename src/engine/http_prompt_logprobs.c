/* http_prompt_logprobs.c - a server's logprobs of the tokens of a prompt
 * (prompt_logprobs.h): one request of a kind of its own on an HTTP
 * target's completions endpoint, sent with the target's headers (its key)
 * through one libcurl easy handle per call.
 *
 * The two reply shapes (see prompt_logprobs.h):
 *   vLLM   choices[0].prompt_logprobs: [null, {"<id>": {"logprob", "rank",
 *          "decoded_token"}, ...}, ...] (vllm/logprobs.py: PromptLogprobs =
 *          list[Optional[dict[int, Logprob]]]); the prompt's own token is
 *          choices[0].prompt_token_ids[i] when the reply has them, else the
 *          dict's first entry (vLLM puts it first). Its alternatives: the
 *          entries of rank <= K. Byte offsets are found from the end of the
 *          text sent: the tokens' decoded texts, last to first, must be the
 *          text's suffixes; where one is not (a token that is part of a
 *          UTF-8 character shows as U+FFFD), that token and the ones
 *          before it get no offset.
 *   echo   choices[0].logprobs {tokens, token_logprobs, top_logprobs,
 *          text_offset} over prompt + completion (OpenAI's legacy
 *          completions; text_offset in code points, turned into bytes of
 *          the text sent); the prompt's tokens are those starting before
 *          its end. No ids: top_logprobs maps token text -> logprob.
 * A 4xx reply, or a 2xx without the prompt's logprobs (a server that
 * ignores the field), is DRIFT_ERR_UNSUPPORTED: the server does not offer
 * them that way. Transport failures and 5xx are retried (the target's
 * max_retries, 0.5 s then doubling), except a refused connection or an
 * unknown host (DRIFT_ERR_HTTP at once: no server there). */
#include <curl/curl.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driftbench/prompt_logprobs.h"
#include "engine/http_internal.h"
#include "engine/target_impl.h"
#include "util/util.h"

const char *drift_plp_method_name(drift_plp_method m) {
    return m == DRIFT_PLP_VLLM ? "prompt_logprobs" : m == DRIFT_PLP_ECHO ? "echo" : "auto";
}

static void tok_clear(drift_plp_token *t) {
    free(t->text);
    for (int k = 0; k < t->n_top; k++) free(t->top_text[k]);
}

void drift_plp_result_clear(drift_plp_result *r) {
    if (!r) return;
    for (size_t i = 0; i < r->n; i++) tok_clear(&r->toks[i]);
    free(r->toks);
    memset(r, 0, sizeof *r);
}

/* ---- transport ---- */

typedef struct reply_sink {
    util_buf b;
    size_t max;
    int too_big;
} reply_sink;

static size_t on_body(char *p, size_t size, size_t nmemb, void *user) {
    reply_sink *s = user;
    int r = eng_http_body_append(&s->b, p, size * nmemb, s->max);
    if (r == 1) s->too_big = 1;
    return r == 0 ? size * nmemb : 0;
}

/* POSTs body to url; *status and the reply in *reply (malloc'd text).
 * Retries transport failures and 5xx. DRIFT_ERR_HTTP when it never got a
 * reply that is not 5xx. */
static drift_status post(drift_target *t, const eng_http_conn_info *ci, const char *url, const char *body, long *status,
                         util_buf *reply, drift_error *err) {
    CURL *e = curl_easy_init();
    if (!e) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory (libcurl)");
    reply_sink s = {.max = ci->max_reply};
    char ebuf[CURL_ERROR_SIZE];
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_POST, 1L);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, ci->headers);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &s);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, ebuf);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)ceil(t->opts.connect_timeout_s * 1000.0));
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)ceil(t->opts.read_timeout_s * 1000.0));
    curl_easy_setopt(e, CURLOPT_USERAGENT, "driftbench/" DRIFT_VERSION);
    if (ci->local) curl_easy_setopt(e, CURLOPT_NOPROXY, "*");
    drift_status st = DRIFT_OK;
    double wait = 0.5;
    for (int attempt = 0;; attempt++) {
        s.b.len = 0;
        s.too_big = 0;
        ebuf[0] = '\0';
        CURLcode rc = curl_easy_perform(e);
        *status = 0;
        curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, status);
        /* a refused connection is no server at all: no point waiting for it */
        int retry = (rc != CURLE_OK && rc != CURLE_WRITE_ERROR && rc != CURLE_COULDNT_CONNECT &&
                     rc != CURLE_COULDNT_RESOLVE_HOST) ||
                    *status >= 500;
        if (!retry && rc != CURLE_OK && rc != CURLE_WRITE_ERROR) {
            st = drift_error_set(err, DRIFT_ERR_HTTP, "%s: the server cannot be reached: %s", url,
                                 ebuf[0] ? ebuf : curl_easy_strerror(rc));
            break;
        }
        if (!retry) {
            if (s.too_big)
                st = drift_error_set(err, DRIFT_ERR_HTTP, "%s: reply too large (over %zu bytes)", url, ci->max_reply);
            else if (rc != CURLE_OK)
                st = drift_error_set(err, DRIFT_ERR_NOMEM, "%s: out of memory reading the reply", url);
            break;
        }
        if (attempt >= t->opts.max_retries || eng_target_cancelled(t)) {
            char msg[256];
            if (rc != CURLE_OK) snprintf(msg, sizeof msg, "%s", ebuf[0] ? ebuf : curl_easy_strerror(rc));
            else eng_http_error_message(s.b.data, s.b.len, msg, sizeof msg);
            st = drift_error_set(err, DRIFT_ERR_HTTP, "%s: %s%s (after %d attempts)", url,
                                 rc == CURLE_OK ? "HTTP error: " : "", msg, attempt + 1);
            break;
        }
        usleep((useconds_t)(wait * 1e6));
        wait = wait * 2 > t->opts.backoff_max_s ? t->opts.backoff_max_s : wait * 2;
    }
    curl_easy_cleanup(e);
    if (st) buf_free(&s.b);
    else *reply = s.b;
    return st;
}

/* ---- parsing ---- */

typedef struct alt {
    int32_t id;
    const char *text;
    double lp;
} alt;

static int alt_cmp(const void *a, const void *b) {
    const alt *x = a, *y = b;
    if (x->lp != y->lp) return x->lp > y->lp ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Copies alternatives a (n, sorted) into tok, at most k. -1 on nomem. */
static int set_top(drift_plp_token *tok, alt *a, size_t n, int k) {
    qsort(a, n, sizeof *a, alt_cmp);
    for (size_t i = 0; i < n && tok->n_top < k; i++) {
        int j = tok->n_top;
        tok->top_id[j] = a[i].id;
        tok->top_logprob[j] = a[i].lp;
        if (!(tok->top_text[j] = util_strdup(a[i].text ? a[i].text : ""))) return -1;
        tok->n_top++;
    }
    return 0;
}

/* Offsets from the end (vLLM's shape): see the top. */
static void offsets_from_end(drift_plp_result *r, const char *text, size_t len) {
    size_t end = len;
    int broken = 0;
    for (size_t i = r->n; i-- > 0;) {
        drift_plp_token *t = &r->toks[i];
        t->offset = SIZE_MAX;
        if (broken || !t->text || end == 0) { /* nothing left before it: not in the text */
            broken = 1;
            continue;
        }
        size_t l = strlen(t->text);
        if (l > end || memcmp(text + end - l, t->text, l) != 0) {
            broken = 1;
            continue;
        }
        end -= l;
        t->offset = end;
    }
}

static drift_status parse_vllm(const json_t *choice, const char *text, size_t len, int k, drift_plp_result *r,
                               char *why, size_t why_cap, drift_error *err) {
    const json_t *pl = json_object_get(choice, "prompt_logprobs");
    if (!json_is_array(pl) || json_array_size(pl) == 0) {
        snprintf(why, why_cap, "the reply has no prompt_logprobs");
        return DRIFT_ERR_UNSUPPORTED;
    }
    const json_t *pids = json_object_get(choice, "prompt_token_ids");
    if (!json_is_array(pids) || json_array_size(pids) != json_array_size(pl)) pids = NULL;
    size_t n = json_array_size(pl);
    r->toks = calloc(n, sizeof *r->toks);
    if (!r->toks) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    r->n = n;
    for (size_t i = 0; i < n; i++) {
        drift_plp_token *t = &r->toks[i];
        t->id = -1;
        const json_t *d = json_array_get(pl, i);
        if (pids) t->id = (int32_t)json_integer_value(json_array_get(pids, i));
        if (json_is_null(d)) continue; /* the first token: nothing before it */
        if (!json_is_object(d) || json_object_size(d) == 0)
            return drift_error_set(err, DRIFT_ERR_PARSE, "prompt_logprobs[%zu] is not an object of token ids", i);
        alt *a = calloc(json_object_size(d), sizeof *a);
        if (!a) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        size_t na = 0;
        const char *key;
        const json_t *v;
        int first = 1, bad = 0;
        json_object_foreach((json_t *)d, key, v) {
            char *endp;
            long id = strtol(key, &endp, 10);
            const json_t *lp = json_object_get(v, "logprob"), *rk = json_object_get(v, "rank"),
                         *dt = json_object_get(v, "decoded_token");
            if (*endp || id < 0 || id > INT32_MAX || !json_is_number(lp)) {
                bad = 1;
                break;
            }
            if (!pids && first) t->id = (int32_t)id;
            first = 0;
            if ((int32_t)id == t->id) {
                t->has_lp = 1;
                t->logprob = json_number_value(lp);
                free(t->text);
                if (!(t->text = util_strdup(json_is_string(dt) ? json_string_value(dt) : ""))) bad = 2;
                if (json_is_string(dt) == 0) { /* no text: no offset */
                    free(t->text);
                    t->text = NULL;
                }
                /* the prompt's own token counts as an alternative only within the top K */
                if (json_is_integer(rk) && json_integer_value(rk) > k) continue;
            }
            if (json_is_integer(rk) && json_integer_value(rk) > k) continue;
            a[na++] = (alt){(int32_t)id, json_is_string(dt) ? json_string_value(dt) : "", json_number_value(lp)};
        }
        if (!bad && set_top(t, a, na, k)) bad = 2;
        free(a);
        if (bad == 2) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        if (bad || !t->has_lp)
            return drift_error_set(err, DRIFT_ERR_PARSE,
                                   "prompt_logprobs[%zu]: %s", i, bad ? "an entry is not {\"<id>\": {\"logprob\": x}}"
                                                                      : "the prompt's token is not among the entries");
    }
    offsets_from_end(r, text, len);
    return DRIFT_OK;
}

/* Byte offset of code point cp in text (len bytes); SIZE_MAX past its end. */
static size_t cp_to_byte(const char *text, size_t len, long long cp) {
    long long k = 0;
    for (size_t i = 0; i < len; i++) {
        if (((unsigned char)text[i] & 0xC0) == 0x80) continue;
        if (k == cp) return i;
        k++;
    }
    return k == cp ? len : SIZE_MAX;
}

static drift_status parse_echo(const json_t *choice, const char *text, size_t len, int k, drift_plp_result *r,
                               char *why, size_t why_cap, drift_error *err) {
    const json_t *lp = json_object_get(choice, "logprobs");
    const json_t *toks = json_object_get(lp, "tokens"), *tlp = json_object_get(lp, "token_logprobs"),
                 *tops = json_object_get(lp, "top_logprobs"), *offs = json_object_get(lp, "text_offset");
    if (!json_is_array(toks) || !json_is_array(tlp) || !json_is_array(offs)) {
        snprintf(why, why_cap, "the reply has no logprobs with tokens, token_logprobs and text_offset");
        return DRIFT_ERR_UNSUPPORTED;
    }
    size_t n = json_array_size(toks);
    if (json_array_size(tlp) != n || json_array_size(offs) != n || (json_is_array(tops) && json_array_size(tops) != n))
        return drift_error_set(err, DRIFT_ERR_PARSE, "echo logprobs: tokens, token_logprobs, top_logprobs and "
                                                     "text_offset differ in length");
    /* the prompt's tokens: those starting before its end */
    size_t m = 0;
    while (m < n) {
        const json_t *o = json_array_get(offs, m);
        if (!json_is_integer(o)) return drift_error_set(err, DRIFT_ERR_PARSE, "echo logprobs: text_offset[%zu] is not an integer", m);
        size_t b = cp_to_byte(text, len, json_integer_value(o));
        if (b == SIZE_MAX || b >= len) break;
        m++;
    }
    if (m == 0 || !json_is_string(json_object_get(choice, "text")) ||
        strncmp(json_string_value(json_object_get(choice, "text")), text, len) != 0) {
        snprintf(why, why_cap, "the reply does not echo the prompt");
        return DRIFT_ERR_UNSUPPORTED;
    }
    r->toks = calloc(m, sizeof *r->toks);
    if (!r->toks) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    r->n = m;
    for (size_t i = 0; i < m; i++) {
        drift_plp_token *t = &r->toks[i];
        t->id = -1;
        t->offset = cp_to_byte(text, len, json_integer_value(json_array_get(offs, i)));
        const json_t *tk = json_array_get(toks, i), *l = json_array_get(tlp, i);
        if (!(t->text = util_strdup(json_is_string(tk) ? json_string_value(tk) : "")))
            return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        if (json_is_null(l)) continue;
        if (!json_is_number(l)) return drift_error_set(err, DRIFT_ERR_PARSE, "echo logprobs: token_logprobs[%zu] is not a number", i);
        t->has_lp = 1;
        t->logprob = json_number_value(l);
        const json_t *d = json_is_array(tops) ? json_array_get(tops, i) : NULL;
        if (!json_is_object(d)) continue;
        alt *a = calloc(json_object_size(d) + 1, sizeof *a);
        if (!a) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        size_t na = 0;
        const char *key;
        const json_t *v;
        json_object_foreach((json_t *)d, key, v)
            if (json_is_number(v)) a[na++] = (alt){-1, key, json_number_value(v)};
        int bad = set_top(t, a, na, k + 1); /* OpenAI: up to K + 1 (the chosen token too) */
        free(a);
        if (bad) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    return DRIFT_OK;
}

/* The request body of t: the target's extra body (request control,
 * target.h) with model, max_tokens 1 and temperature 0 over it, less the
 * fields that would make the server generate more than that one token
 * (max_completion_tokens, min_tokens). NULL with err set when out of
 * memory (the extra body was checked at open). */
static json_t *body_base(const drift_target *t, const eng_http_conn_info *ci, drift_error *err) {
    json_t *body = NULL;
    if (eng_http_extra_body_parse(t->opts.request.extra_body_json, &body, err)) return NULL;
    if (!body) body = json_object();
    json_object_del(body, "max_completion_tokens");
    json_object_del(body, "min_tokens");
    if (!body || json_object_set_new(body, "model", json_string(ci->model ? ci->model : "")) ||
        json_object_set_new(body, "max_tokens", json_integer(1)) ||
        json_object_set_new(body, "temperature", json_real(0.0))) {
        json_decref(body);
        drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        return NULL;
    }
    return body;
}

/* One way: the request (body, taken: body_base's with the prompt or the
 * messages in it), the reply, its parse. chat: /chat/completions with the
 * last assistant message left open (vLLM's continue_final_message), the
 * reply's prompt_logprobs at its top level (vLLM) or in its choice; text
 * (len bytes): what the offsets are found in (completions: all the text
 * sent; chat: the assistant message's content, the end of what is sent).
 * UNSUPPORTED with why set when the server does not offer it that way. */
static drift_status try_method(drift_target *t, const eng_http_conn_info *ci, json_t *body, int chat, const char *text,
                               size_t len, int k, drift_plp_method m, drift_plp_result *out, char *why, size_t why_cap,
                               drift_error *err) {
    int bad = 0;
    if (m == DRIFT_PLP_VLLM) bad |= json_object_set_new(body, "prompt_logprobs", json_integer(k));
    if (m == DRIFT_PLP_ECHO) {
        bad |= json_object_set_new(body, "echo", json_true());
        bad |= json_object_set_new(body, "logprobs", json_integer(k));
    }
    if (chat) {
        bad |= json_object_set_new(body, "add_generation_prompt", json_false());
        bad |= json_object_set_new(body, "continue_final_message", json_true());
    }
    char *js = bad ? NULL : json_dumps(body, JSON_COMPACT);
    json_decref(body);
    char *url = util_asprintf("%s/%s", ci->url_base, chat ? "chat/completions" : "completions");
    if (!js || !url) {
        free(js);
        free(url);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    long status = 0;
    util_buf reply = {0};
    drift_status st = post(t, ci, url, js, &status, &reply, err);
    free(js);
    if (!st && (status < 200 || status >= 300)) {
        char msg[256];
        eng_http_error_message(reply.data, reply.len, msg, sizeof msg);
        snprintf(why, why_cap, "HTTP %ld: %s", status, msg);
        st = DRIFT_ERR_UNSUPPORTED;
    }
    json_t *o = NULL;
    if (!st) {
        json_error_t je;
        o = json_loadb(reply.data ? reply.data : "", reply.len, 0, &je);
        const json_t *choice = json_array_get(json_object_get(o, "choices"), 0);
        if (!json_is_object(choice))
            st = drift_error_set(err, DRIFT_ERR_PARSE, "%s: the reply has no choices%s%s", url, o ? "" : ": ", o ? "" : je.text);
        else if (m == DRIFT_PLP_VLLM)
            st = parse_vllm(chat && json_object_get(o, "prompt_logprobs") ? o : choice, text, len, k, out, why,
                            why_cap, err);
        else
            st = parse_echo(choice, text, len, k, out, why, why_cap, err);
        if (st && st != DRIFT_ERR_UNSUPPORTED) drift_error_prefix(err, "%s (%s): ", url, drift_plp_method_name(m));
    }
    json_decref(o);
    buf_free(&reply);
    free(url);
    if (st) drift_plp_result_clear(out);
    else {
        out->method = m;
        out->k = k;
    }
    return st;
}

/* try_method over a completions prompt (text, len bytes). */
static drift_status try_text(drift_target *t, const eng_http_conn_info *ci, const char *text, size_t len, int k,
                             drift_plp_method m, drift_plp_result *out, char *why, size_t why_cap, drift_error *err) {
    json_t *str = json_stringn(text, len);
    if (!str) return drift_error_set(err, DRIFT_ERR_INVALID, "the prompt is not valid UTF-8");
    json_t *body = body_base(t, ci, err);
    if (!body) {
        json_decref(str);
        return err->code;
    }
    if (json_object_set_new(body, "prompt", str)) {
        json_decref(body);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    return try_method(t, ci, body, 0, text, len, k, m, out, why, why_cap, err);
}

static drift_status check_k(int k, drift_error *err) {
    if (k < 1 || k > DRIFT_PLP_MAX_TOP)
        return drift_error_set(err, DRIFT_ERR_INVALID, "prompt logprobs: k = %d is out of range [1, %d]", k,
                               DRIFT_PLP_MAX_TOP);
    return DRIFT_OK;
}

static drift_status not_offered(drift_error *err, const char *why_v, const char *why_e) {
    return drift_error_set(err, DRIFT_ERR_UNSUPPORTED,
                           "not computed: the server does not return prompt logprobs (vLLM: prompt_logprobs; "
                           "OpenAI-style: echo+logprobs)%s%s%s%s",
                           why_v[0] ? "; prompt_logprobs: " : "", why_v, why_e[0] ? "; echo: " : "", why_e);
}

drift_status drift_target_prompt_logprobs(drift_target *t, const char *text, size_t len, int k, drift_plp_method method,
                                          drift_plp_result *out, drift_error *err) {
    memset(out, 0, sizeof *out);
    eng_http_conn_info ci;
    if (eng_http_conn(t, &ci))
        return drift_error_set(err, DRIFT_ERR_UNSUPPORTED, "prompt logprobs come from HTTP targets only");
    if (check_k(k, err)) return err->code;
    char why_v[320] = "", why_e[320] = "";
    drift_status st = DRIFT_ERR_UNSUPPORTED;
    if (method != DRIFT_PLP_ECHO) st = try_text(t, &ci, text, len, k, DRIFT_PLP_VLLM, out, why_v, sizeof why_v, err);
    if (st == DRIFT_ERR_UNSUPPORTED && method != DRIFT_PLP_VLLM)
        st = try_text(t, &ci, text, len, k, DRIFT_PLP_ECHO, out, why_e, sizeof why_e, err);
    if (st == DRIFT_ERR_UNSUPPORTED) return not_offered(err, why_v, why_e);
    return st;
}

/* The chat request's body: the messages as generation sends them
 * (eng_http_request_render: the target's system prompt, a messages prompt's
 * turns) and the answer as a last assistant message. */
static json_t *chat_body(drift_target *t, const eng_http_conn_info *ci, const char *prompt, const char *answer,
                         drift_error *err) {
    json_t *body = body_base(t, ci, err);
    if (!body) return NULL;
    util_buf scratch = {0};
    int bad = eng_http_request_render(body, DRIFT_API_CHAT, t->opts.request.system_prompt, prompt, NULL, &scratch, err);
    buf_free(&scratch);
    json_t *msgs = json_object_get(body, "messages");
    json_t *a = bad ? NULL : json_string(answer);
    if (!bad && !a) {
        drift_error_set(err, DRIFT_ERR_INVALID, "the answer is not valid UTF-8");
        bad = 1;
    }
    if (!bad && (!json_is_array(msgs) ||
                 json_array_append_new(msgs, json_pack("{s:s, s:o}", "role", "assistant", "content", a)))) {
        drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        bad = 1;
    }
    if (bad) {
        json_decref(body);
        return NULL;
    }
    return body;
}

drift_status drift_target_answer_logprobs(drift_target *t, const char *prompt, const char *answer, int k,
                                          drift_plp_method method, drift_plp_result *out, drift_error *err) {
    memset(out, 0, sizeof *out);
    eng_http_conn_info ci;
    if (eng_http_conn(t, &ci))
        return drift_error_set(err, DRIFT_ERR_UNSUPPORTED, "prompt logprobs come from HTTP targets only");
    if (check_k(k, err)) return err->code;
    size_t alen = strlen(answer);
    if (t->api == DRIFT_API_CHAT) {
        if (method == DRIFT_PLP_ECHO)
            return drift_error_set(err, DRIFT_ERR_UNSUPPORTED,
                                   "not computed: echo+logprobs is a completions field; an api=chat stack is asked "
                                   "with prompt_logprobs and continue_final_message");
        char why[320] = "";
        json_t *body = chat_body(t, &ci, prompt, answer, err);
        if (!body) return err->code;
        drift_status st = try_method(t, &ci, body, 1, answer, alen, k, DRIFT_PLP_VLLM, out, why, sizeof why, err);
        if (st == DRIFT_ERR_UNSUPPORTED)
            return drift_error_set(err, DRIFT_ERR_UNSUPPORTED,
                                   "not computed: the server does not return prompt logprobs for chat (vLLM: "
                                   "prompt_logprobs with continue_final_message)%s%s",
                                   why[0] ? "; " : "", why);
        return st; /* the offsets are the answer's already */
    }
    /* completions: the text generation sends (the system prompt and a blank line first), then the answer */
    const char *sys = t->opts.request.system_prompt;
    char *text = sys && *sys ? util_asprintf("%s\n\n%s%s", sys, prompt, answer) : util_asprintf("%s%s", prompt, answer);
    if (!text) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    size_t len = strlen(text), plen = len - alen;
    drift_status st = drift_target_prompt_logprobs(t, text, len, k, method, out, err);
    free(text);
    for (size_t i = 0; !st && i < out->n; i++) {
        size_t *o = &out->toks[i].offset;
        *o = *o != SIZE_MAX && *o >= plen && *o < len ? *o - plen : SIZE_MAX;
    }
    return st;
}
