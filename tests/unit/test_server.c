/* test_server.c - `driftbench serve` in process on 127.0.0.1:0 with the tiny
 * qwen2 fixture (tests/data/models/tiny-qwen2-f16.gguf, random weights, so
 * answers are byte soup: texts are compared after the server's UTF-8
 * cleaning, which JSON forces on any server).
 * Covers: every endpoint and its OpenAI shape; the HTTP target against the
 * server gives the embedded target's answers (texts, token counts, finish
 * reasons, logprobs bit for bit); bad requests each get their 4xx and error
 * body; batch invariance on (load 1 vs load 32, n=1 vs n=8) and off (the
 * difference is measured and reported); a load test from a second process
 * (tests/server/loadgen) with steady RSS; slow and abusive clients (idle
 * connections evicted under the per-address and total limits, a busy
 * address refused, the request deadline against a header trickler) and
 * cancellation (a client that leaves, the drain deadline with a long
 * generation of models/qwen2-7m.gguf in flight). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <spawn.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/util.h"
#include "driftbench/model.h"
#include "driftbench/server.h"
#include "driftbench/target.h"
#include "server/server_internal.h"

extern char **environ;

static char g_model[600];

static drift_server *start(int invariant, int max_batch, size_t max_body) {
    drift_server_opts o;
    drift_server_opts_default(&o);
    o.model_path = g_model;
    o.profile = "cpu-f32";
    o.threads = 1;
    o.max_batch = max_batch;
    o.batch_invariant = invariant;
    if (max_body) o.max_body_bytes = max_body;
    drift_server *s;
    drift_error err;
    drift_status st = drift_server_start(&o, &s, &err);
    if (st) fprintf(stderr, "start: %s\n", err.msg);
    assert_int_equal(st, DRIFT_OK);
    assert_true(drift_server_port(s) > 0);
    return s;
}

typedef struct sink {
    char *d;
    size_t n;
} sink;

static size_t on_data(char *p, size_t sz, size_t n, void *u) {
    sink *s = u;
    char *r = realloc(s->d, s->n + sz * n + 1);
    if (!r) return 0;
    memcpy(r + s->n, p, sz * n);
    s->d = r;
    s->n += sz * n;
    s->d[s->n] = 0;
    return sz * n;
}

/* One request; returns the status, *out = body (malloc'd). */
static long http(const char *method, int port, const char *path, const char *body, size_t blen, char **out) {
    CURL *h = curl_easy_init();
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    sink s = {0};
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &s);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 60L);
    struct curl_slist *hd = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    if (body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)(blen ? blen : strlen(body)));
    }
    CURLcode rc = curl_easy_perform(h);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(hd);
    curl_easy_cleanup(h);
    if (rc != CURLE_OK) fprintf(stderr, "curl: %s\n", curl_easy_strerror(rc));
    assert_int_equal(rc, CURLE_OK);
    *out = s.d ? s.d : strdup("");
    return status;
}

static json_t *post_json(int port, const char *path, const char *body, long want) {
    char *r;
    long st = http("POST", port, path, body, 0, &r);
    if (st != want) fprintf(stderr, "POST %s %s -> %ld %s\n", path, body, st, r);
    assert_int_equal(st, want);
    json_t *o = json_loads(r, 0, NULL);
    free(r);
    assert_non_null(o);
    return o;
}

static const char *jstr(json_t *o, const char *path) {
    /* "a.b.0.c" */
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path);
    json_t *v = o;
    for (char *save = NULL, *k = strtok_r(buf, ".", &save); k && v; k = strtok_r(NULL, ".", &save))
        v = json_is_array(v) ? json_array_get(v, (size_t)atoi(k)) : json_object_get(v, k);
    return json_string_value(v);
}

static json_t *jget(json_t *o, const char *path) {
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path);
    json_t *v = o;
    for (char *save = NULL, *k = strtok_r(buf, ".", &save); k && v; k = strtok_r(NULL, ".", &save))
        v = json_is_array(v) ? json_array_get(v, (size_t)atoi(k)) : json_object_get(v, k);
    return v;
}

/* ---------------------------------------------------------------------------
 * Endpoints and shapes
 * ------------------------------------------------------------------------- */
static void test_endpoints(void **state) {
    (void)state;
    drift_server *s = start(1, 8, 0);
    int port = drift_server_port(s);
    char *r;
    assert_int_equal(http("GET", port, "/health", NULL, 0, &r), 200);
    assert_string_equal(r, "{\"status\":\"ok\"}");
    free(r);
    assert_int_equal(http("GET", port, "/v1/models", NULL, 0, &r), 200);
    json_t *o = json_loads(r, 0, NULL);
    free(r);
    assert_string_equal(jstr(o, "object"), "list");
    assert_string_equal(jstr(o, "data.0.id"), "tiny-qwen2-f16");
    assert_string_equal(jstr(o, "data.0.object"), "model");
    json_decref(o);

    /* completions with logprobs */
    o = post_json(port, "/v1/completions",
                  "{\"model\":\"tiny-qwen2-f16\",\"prompt\":\"hello world\",\"max_tokens\":6,\"temperature\":0,\"logprobs\":2}", 200);
    assert_string_equal(jstr(o, "object"), "text_completion");
    assert_string_equal(jstr(o, "model"), "tiny-qwen2-f16");
    assert_true(!strncmp(jstr(o, "id"), "cmpl-", 5));
    assert_true(json_is_integer(jget(o, "created")));
    assert_int_equal(json_integer_value(jget(o, "choices.0.index")), 0);
    assert_non_null(jstr(o, "choices.0.text"));
    assert_string_equal(jstr(o, "choices.0.finish_reason"), "length");
    json_int_t ct = json_integer_value(jget(o, "usage.completion_tokens"));
    json_int_t pt = json_integer_value(jget(o, "usage.prompt_tokens"));
    assert_int_equal(ct, 6);
    assert_true(pt > 0);
    assert_int_equal(json_integer_value(jget(o, "usage.total_tokens")), pt + ct);
    assert_int_equal(json_array_size(jget(o, "choices.0.logprobs.tokens")), 6);
    assert_int_equal(json_array_size(jget(o, "choices.0.logprobs.token_logprobs")), 6);
    json_t *tops = jget(o, "choices.0.logprobs.top_logprobs");
    assert_int_equal(json_array_size(tops), 6);
    for (size_t i = 0; i < 6; i++) {
        json_t *d = json_array_get(tops, i);
        assert_true(json_is_object(d) && json_object_size(d) >= 1 && json_object_size(d) <= 2);
        /* greedy: the chosen token is the most likely one */
        double lp = json_real_value(json_array_get(jget(o, "choices.0.logprobs.token_logprobs"), i));
        const char *key;
        json_t *v;
        double best = -INFINITY;
        json_object_foreach(d, key, v) best = fmax(best, json_real_value(v));
        assert_true(lp <= 0 && lp == best);
    }
    char *full_text = strdup(jstr(o, "choices.0.text"));
    json_decref(o);

    /* the "same" request streamed: the chunks join to the same text */
    assert_int_equal(http("POST", port, "/v1/completions",
                          "{\"prompt\":\"hello world\",\"max_tokens\":6,\"temperature\":0,\"stream\":true,"
                          "\"stream_options\":{\"include_usage\":true}}",
                          0, &r),
                     200);
    char joined[4096] = "";
    int chunks = 0, saw_finish = 0, saw_usage = 0;
    for (char *line = strtok(r, "\n"); line; line = strtok(NULL, "\n")) {
        assert_true(!strncmp(line, "data: ", 6));
        if (!strcmp(line + 6, "[DONE]")) {
            assert_null(strtok(NULL, "\n"));
            break;
        }
        json_t *c = json_loads(line + 6, 0, NULL);
        assert_non_null(c);
        if (json_array_size(jget(c, "choices")) == 0) {
            saw_usage = json_integer_value(jget(c, "usage.completion_tokens")) == 6;
        } else {
            strncat(joined, jstr(c, "choices.0.text"), sizeof joined - strlen(joined) - 1);
            if (jstr(c, "choices.0.finish_reason")) saw_finish = !strcmp(jstr(c, "choices.0.finish_reason"), "length");
            chunks++;
        }
        json_decref(c);
    }
    free(r);
    assert_string_equal(joined, full_text);
    assert_int_equal(chunks, 7); /* one per token + the finishing one */
    assert_true(saw_finish && saw_usage);

    /* stop string: the first printable ASCII character after the start (JSON-safe) */
    const char *stop_at = NULL;
    for (const char *p = full_text + 1; *p; p++)
        if (*p >= 0x20 && *p < 0x7f && *p != '"' && *p != '\\') {
            stop_at = p;
            break;
        }
    if (stop_at) {
        char body[256];
        snprintf(body, sizeof body, "{\"prompt\":\"hello world\",\"max_tokens\":6,\"temperature\":0,\"stop\":[\"%c\"]}", *stop_at);
        o = post_json(port, "/v1/completions", body, 200);
        assert_string_equal(jstr(o, "choices.0.finish_reason"), "stop");
        assert_int_equal(strlen(jstr(o, "choices.0.text")), (size_t)(strchr(full_text, *stop_at) - full_text));
        json_decref(o);
    } else {
        fprintf(stderr, "no printable ASCII in the reply: stop test skipped\n");
    }
    free(full_text);

    /* n = 3, sampled: choice j is the single request with seed + j */
    o = post_json(port, "/v1/completions", "{\"prompt\":\"abc\",\"max_tokens\":5,\"temperature\":1.0,\"seed\":7,\"n\":3}", 200);
    assert_int_equal(json_array_size(jget(o, "choices")), 3);
    json_int_t sum_ct = 0;
    for (int j = 0; j < 3; j++) {
        char body[256], p[32];
        snprintf(body, sizeof body, "{\"prompt\":\"abc\",\"max_tokens\":5,\"temperature\":1.0,\"seed\":%d}", 7 + j);
        json_t *one = post_json(port, "/v1/completions", body, 200);
        sum_ct += json_integer_value(jget(one, "usage.completion_tokens"));
        snprintf(p, sizeof p, "choices.%d.text", j);
        assert_string_equal(jstr(o, p), jstr(one, "choices.0.text"));
        snprintf(p, sizeof p, "choices.%d.index", j);
        assert_int_equal(json_integer_value(jget(o, p)), j);
        json_decref(one);
    }
    assert_int_equal(json_integer_value(jget(o, "usage.completion_tokens")), sum_ct);
    json_decref(o);

    /* chat with logprobs: chat shape */
    o = post_json(port, "/v1/chat/completions",
                  "{\"model\":\"tiny-qwen2\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":4,"
                  "\"logprobs\":true,\"top_logprobs\":3}",
                  200);
    assert_string_equal(jstr(o, "object"), "chat.completion");
    assert_string_equal(jstr(o, "choices.0.message.role"), "assistant");
    assert_non_null(jstr(o, "choices.0.message.content"));
    json_t *content = jget(o, "choices.0.logprobs.content");
    assert_int_equal(json_array_size(content), 4);
    for (size_t i = 0; i < 4; i++) {
        json_t *e = json_array_get(content, i);
        assert_true(json_is_string(json_object_get(e, "token")));
        assert_true(json_is_real(json_object_get(e, "logprob")));
        assert_true(json_is_array(json_object_get(e, "bytes")));
        assert_int_equal(json_array_size(json_object_get(e, "top_logprobs")), 3);
        assert_true(json_is_string(jget(e, "top_logprobs.2.token")));
    }
    assert_true(json_integer_value(jget(o, "usage.prompt_tokens")) > 6); /* the template's tokens */
    json_decref(o);

    /* chat streamed: role first, deltas join to the content */
    o = post_json(port, "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}],\"max_tokens\":4}", 200);
    char *chat_text = strdup(jstr(o, "choices.0.message.content"));
    json_decref(o);
    assert_int_equal(http("POST", port, "/v1/chat/completions",
                          "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":4,\"stream\":true}", 0, &r),
                     200);
    joined[0] = 0;
    int first = 1;
    for (char *line = strtok(r, "\n"); line; line = strtok(NULL, "\n")) {
        if (!strcmp(line, "data: [DONE]")) break;
        json_t *c = json_loads(line + 6, 0, NULL);
        assert_non_null(c);
        assert_string_equal(jstr(c, "object"), "chat.completion.chunk");
        if (first) assert_string_equal(jstr(c, "choices.0.delta.role"), "assistant");
        first = 0;
        const char *piece = jstr(c, "choices.0.delta.content");
        if (piece) strncat(joined, piece, sizeof joined - strlen(joined) - 1);
        json_decref(c);
    }
    free(r);
    assert_string_equal(joined, chat_text);
    free(chat_text);

    /* embeddings: the engine's vector, exactly */
    o = post_json(port, "/v1/embeddings", "{\"input\":[\"one\",\"two words\"],\"model\":\"tiny-qwen2-f16\"}", 200);
    assert_string_equal(jstr(o, "object"), "list");
    assert_int_equal(json_array_size(jget(o, "data")), 2);
    drift_numeric_profile p;
    drift_error err;
    assert_int_equal(drift_profile_parse("profile=cpu-f32&threads=1", &p, &err), DRIFT_OK);
    drift_model *m;
    assert_int_equal(drift_model_load(g_model, &p, &m, &err), DRIFT_OK);
    int D = drift_model_get_info(m)->dim;
    float *v = malloc((size_t)D * sizeof *v);
    assert_int_equal(drift_model_embed(m, "two words", v, &err), DRIFT_OK);
    json_t *emb = jget(o, "data.1.embedding");
    assert_int_equal(json_array_size(emb), (size_t)D);
    assert_int_equal(json_integer_value(jget(o, "data.1.index")), 1);
    for (int d = 0; d < D; d++) assert_true((float)json_real_value(json_array_get(emb, (size_t)d)) == v[d]);
    json_decref(o);
    o = post_json(port, "/v1/embeddings", "{\"input\":\"two words\",\"encoding_format\":\"base64\"}", 200);
    const char *b64 = jstr(o, "data.0.embedding");
    assert_int_equal(strlen(b64), ((size_t)D * 4 + 2) / 3 * 4);
    json_decref(o);
    free(v);
    drift_model_free(m);
    drift_server_stop(s, 10);
}

/* ---------------------------------------------------------------------------
 * Same answers as the embedded target
 * ------------------------------------------------------------------------- */
typedef struct got {
    char *text[16], *lp[16], *fr[16];
    int pt[16], ct[16];
    int n;
} got;

static int collect(void *user, const drift_gen_request *req, drift_answer *res) {
    got *g = user;
    if (res->error) fprintf(stderr, "request %zu: %s\n", req->index, res->error);
    assert_null(res->error);
    size_t i = req->index;
    g->text[i] = util_utf8_clean(res->text, strlen(res->text)); /* what JSON can carry */
    g->lp[i] = res->logprobs_json;
    res->logprobs_json = NULL;
    g->fr[i] = res->finish_reason;
    res->finish_reason = NULL;
    g->pt[i] = res->prompt_tokens;
    g->ct[i] = res->completion_tokens;
    g->n++;
    return 0;
}

static void got_free(got *g) {
    for (int i = 0; i < 16; i++) {
        free(g->text[i]);
        free(g->lp[i]);
        free(g->fr[i]);
    }
    memset(g, 0, sizeof *g);
}

static const char *const prompts[16] = {"The capital of France is", "1 + 1 =", "def add(a, b):", "Once upon a time",
                                            "hello", "Q: why? A:", "zzz", "a b c d e f g",
                                            "prompt 9", "prompt ten", "{\"json\": 1}", "über café",
                                            "tabs\tand\nlines", "12345", "the the the", "last one"};
static const char *prompts_of(int i) { return prompts[i]; }

static void run(const char *spec, int concurrency, const drift_gen_params *gp, size_t n, got *g) {
    drift_gen_request reqs[16];
    for (size_t i = 0; i < n; i++) reqs[i] = (drift_gen_request){i, prompts[i], (int)(i % 2)};
    drift_target_opts o;
    drift_target_opts_default(&o);
    o.concurrency = concurrency;
    o.max_retries = 0;
    drift_target *t;
    drift_error err;
    assert_int_equal(drift_target_open(spec, &o, &t, &err), DRIFT_OK);
    memset(g, 0, sizeof *g);
    assert_int_equal(drift_target_generate(t, reqs, n, gp, collect, g, &err), DRIFT_OK);
    assert_int_equal(g->n, (int)n);
    drift_target_close(t);
}

/* x rounded to 9 significant digits: logprobs of the HTTP answer and of the
 * embedded target are compared at this precision (both keep 17 digits). */
static double r9(double x) {
    char b[64];
    snprintf(b, sizeof b, "%.9g", x);
    return strtod(b, NULL);
}

/* Logprob values of a normalised logprobs array, chosen then sorted tops. */
static int has_duplicate_text(json_t *top) {
    for (size_t i = 0; i < json_array_size(top); i++)
        for (size_t j = i + 1; j < json_array_size(top); j++)
            if (!strcmp(json_string_value(json_object_get(json_array_get(top, i), "token")),
                        json_string_value(json_object_get(json_array_get(top, j), "token"))))
                return 1;
    return 0;
}

static void lp_compare(const char *a, const char *b, int *diffs, int *total) {
    json_t *x = json_loads(a, 0, NULL), *y = json_loads(b, 0, NULL);
    assert_non_null(x);
    assert_non_null(y);
    assert_int_equal(json_array_size(x), json_array_size(y));
    for (size_t t = 0; t < json_array_size(x); t++) {
        json_t *ex = json_array_get(x, t), *ey = json_array_get(y, t);
        (*total)++;
        if (r9(json_real_value(json_object_get(ex, "logprob"))) != r9(json_real_value(json_object_get(ey, "logprob")))) (*diffs)++;
        json_t *tx = json_object_get(ex, "top"), *ty = json_object_get(ey, "top");
        /* the completions shape keys alternatives by their text, so two
         * alternatives that print the same (byte tokens shown as U+FFFD)
         * collapse into one over HTTP: compare lists whose texts are distinct */
        if (json_array_size(tx) != json_array_size(ty) || has_duplicate_text(ty)) continue;
        for (size_t k = 0; k < json_array_size(tx); k++) {
            double vx = json_real_value(json_object_get(json_array_get(tx, k), "logprob"));
            double vy = json_real_value(json_object_get(json_array_get(ty, k), "logprob"));
            (*total)++;
            if (r9(vx) != r9(vy)) (*diffs)++;
        }
    }
    json_decref(x);
    json_decref(y);
}

/* Compares the HTTP answer's logprobs with drift_model_generate's own for the
 * same prompt (seed + replicate, as the targets use). */
static void engine_compare(const drift_model *m, int chat, const drift_gen_params *gp, const char *prompt, int replicate,
                           const char *http_lp, int *diffs, int *total) {
    drift_error err;
    int32_t *ids;
    size_t n;
    if (chat) assert_int_equal(drift_model_chat_tokens(m, prompt, &ids, &n, &err), DRIFT_OK);
    else assert_int_equal(drift_model_tokenize(m, prompt, strlen(prompt), -1, 0, &ids, &n, &err), DRIFT_OK);
    int64_t off = replicate;
    drift_generation g;
    const int32_t *pp = ids;
    assert_int_equal(drift_model_generate(m, &pp, &n, 1, gp, &off, 1, &g, &err), DRIFT_OK);
    json_t *a = json_loads(http_lp, 0, NULL);
    assert_int_equal(json_array_size(a), (size_t)g.n_tokens);
    for (int t = 0; t < g.n_tokens; t++) {
        json_t *e = json_array_get(a, (size_t)t);
        (*total)++;
        *diffs += json_real_value(json_object_get(e, "logprob")) != (double)g.lp[t].logprob;
        json_t *top = json_object_get(e, "top");
        /* tops whose texts collide are merged in the completions shape; compare the chat shape fully */
        if (chat) assert_int_equal(json_array_size(top), (size_t)g.lp[t].n_top);
        for (size_t k = 0; k < json_array_size(top) && chat; k++) {
            (*total)++;
            *diffs += json_real_value(json_object_get(json_array_get(top, k), "logprob")) != (double)g.lp[t].top_logprob[k];
        }
    }
    json_decref(a);
    drift_generation_clear(&g);
    free(ids);
}

static void test_same_as_embedded(void **state) {
    (void)state;
    drift_server *s = start(1, 8, 0);
    drift_numeric_profile prof;
    drift_error perr;
    assert_int_equal(drift_profile_parse("profile=cpu-f32&threads=1", &prof, &perr), DRIFT_OK);
    drift_model *m;
    assert_int_equal(drift_model_load(g_model, &prof, &m, &perr), DRIFT_OK);
    for (int api = 0; api < 2; api++)
        for (int sampled = 0; sampled < 2; sampled++) {
            drift_gen_params gp;
            drift_gen_params_default(&gp);
            gp.max_tokens = 8;
            gp.logprobs = 3;
            gp.seed = 42;
            if (sampled) {
                gp.temperature = 0.9;
                gp.top_p = 0.95;
                gp.top_k = 40;
            }
            const char *stops[] = {"\n"};
            if (api == 1) {
                gp.stop = stops;
                gp.n_stop = 1;
            }
            const char *apiname = api ? "chat" : "completions";
            char hspec[300], espec[800];
            snprintf(hspec, sizeof hspec, "http://127.0.0.1:%d/v1?model=tiny-qwen2-f16&api=%s", drift_server_port(s), apiname);
            snprintf(espec, sizeof espec, "embedded:%s?profile=cpu-f32&threads=1&api=%s", g_model, apiname);
            got h, e;
            run(hspec, 4, &gp, 12, &h);
            run(espec, 3, &gp, 12, &e);
            int diffs = 0, total = 0, stops_seen = 0, embedded_dropped = 0, ediffs = 0, etotal = 0;
            for (int i = 0; i < 12; i++) {
                assert_string_equal(h.text[i], e.text[i]);
                assert_string_equal(h.fr[i], e.fr[i]);
                assert_int_equal(h.pt[i], e.pt[i]);
                assert_int_equal(h.ct[i], e.ct[i]);
                /* compare with the embedded target's logprobs JSON, and
                 * always against the engine's own logprobs below */
                json_t *ea = e.lp[i] ? json_loads(e.lp[i], 0, NULL) : NULL, *ha = json_loads(h.lp[i], 0, NULL);
                if (!json_is_array(ha)) fprintf(stderr, "prompt %d: http logprobs %s\n", i, h.lp[i] ? h.lp[i] : "(none)");
                assert_true(json_is_array(ha));
                if (ea && json_array_size(ea) == json_array_size(ha)) lp_compare(h.lp[i], e.lp[i], &diffs, &total);
                else embedded_dropped++;
                json_decref(ea);
                json_decref(ha);
                engine_compare(m, api, &gp, prompts_of(i), i % 2, h.lp[i], &ediffs, &etotal);
                stops_seen += !strcmp(h.fr[i], "stop");
            }
            fprintf(stderr,
                    "%s %s: 12 prompts, same texts; logprobs vs embedded target: %d of %d values differ (%d answers "
                    "not comparable); vs the engine: %d of %d differ; %d stopped\n",
                    apiname, sampled ? "sampled" : "greedy", diffs, total, embedded_dropped, ediffs, etotal, stops_seen);
            assert_int_equal(diffs, 0);
            assert_int_equal(ediffs, 0);
            assert_true(etotal > 12 * 4);
            got_free(&h);
            got_free(&e);
        }
    drift_model_free(m);
    drift_server_stop(s, 10);
}

/* ---------------------------------------------------------------------------
 * Prompt logprobs (vLLM's prompt_logprobs, OpenAI's echo) and chat turns
 * ------------------------------------------------------------------------- */

/* The engine's log-softmax rows predicting ids[1..n) (rows (n-1) x nv). */
static double *engine_prompt_ls(drift_model *m, const int32_t *ids, size_t n) {
    int nv = drift_model_get_info(m)->n_vocab;
    float *rows = malloc((n - 1) * (size_t)nv * sizeof *rows);
    double *ls = malloc((n - 1) * (size_t)nv * sizeof *ls);
    drift_session *ss;
    drift_error err;
    assert_int_equal(drift_session_new(m, (int)n, &ss, &err), DRIFT_OK);
    assert_int_equal(drift_session_forward(ss, ids, n - 1, 1, rows, NULL, &err), DRIFT_OK);
    drift_session_free(ss);
    for (size_t r = 0; r + 1 < n; r++) drift_log_softmax(rows + r * (size_t)nv, nv, ls + r * (size_t)nv);
    free(rows);
    return ls;
}

static void test_prompt_logprobs(void **state) {
    (void)state;
    drift_server *s = start(1, 8, 0);
    int port = drift_server_port(s);
    drift_numeric_profile prof;
    drift_error err;
    assert_int_equal(drift_profile_parse("profile=cpu-f32&threads=1", &prof, &err), DRIFT_OK);
    drift_model *m;
    assert_int_equal(drift_model_load(g_model, &prof, &m, &err), DRIFT_OK);
    int nv = drift_model_get_info(m)->n_vocab;
    const char *prompt = "The quick brown fox jumps over the lazy dog.";
    int32_t *ids;
    size_t n;
    assert_int_equal(drift_model_tokenize(m, prompt, strlen(prompt), -1, 0, &ids, &n, &err), DRIFT_OK);
    assert_true(n > 4);
    double *ls = engine_prompt_ls(m, ids, n);

    /* vLLM's shape: null first, the prompt's token first in each dict with
     * its rank, then the top 3; every value the engine's, bit for bit */
    json_t *o = post_json(port, "/v1/completions",
                          "{\"prompt\":\"The quick brown fox jumps over the lazy dog.\",\"max_tokens\":0,"
                          "\"prompt_logprobs\":3}", 200);
    assert_string_equal(jstr(o, "choices.0.text"), "");
    assert_int_equal(json_integer_value(jget(o, "usage.completion_tokens")), 0);
    json_t *pl = jget(o, "choices.0.prompt_logprobs"), *pid = jget(o, "choices.0.prompt_token_ids");
    assert_int_equal(json_array_size(pl), n);
    assert_int_equal(json_array_size(pid), n);
    assert_true(json_is_null(json_array_get(pl, 0)));
    for (size_t i = 1; i < n; i++) {
        const double *row = ls + (i - 1) * (size_t)nv;
        assert_int_equal(json_integer_value(json_array_get(pid, i)), ids[i]);
        json_t *d = json_array_get(pl, i);
        void *it = json_object_iter(d);
        assert_int_equal(atoi(json_object_iter_key(it)), ids[i]); /* the prompt's token first */
        int rank = 1;
        for (int v = 0; v < nv; v++) rank += row[v] > row[ids[i]];
        json_t *e = json_object_iter_value(it);
        assert_true(json_real_value(json_object_get(e, "logprob")) == row[ids[i]]);
        assert_int_equal(json_integer_value(json_object_get(e, "rank")), rank);
        assert_true(json_is_string(json_object_get(e, "decoded_token")));
        int tops = 0;
        const char *key;
        json_t *val;
        json_object_foreach(d, key, val) {
            int id = atoi(key);
            assert_true(json_real_value(json_object_get(val, "logprob")) == row[id]);
            int r = (int)json_integer_value(json_object_get(val, "rank"));
            int above = 0;
            for (int v = 0; v < nv; v++) above += row[v] > row[id];
            if (id != ids[i] || r <= 3) {
                assert_int_equal(r, above + 1); /* no tie in these rows: rank = 1 + the ids above */
                tops += r <= 3;
            }
        }
        assert_int_equal(tops, 3);
    }
    json_decref(o);

    /* OpenAI's echo: the prompt then the completion, in text and logprobs */
    o = post_json(port, "/v1/completions",
                  "{\"prompt\":\"The quick brown fox jumps over the lazy dog.\",\"max_tokens\":2,\"temperature\":0,"
                  "\"echo\":true,\"logprobs\":2}", 200);
    const char *text = jstr(o, "choices.0.text");
    assert_true(!strncmp(text, prompt, strlen(prompt)));
    json_t *toks = jget(o, "choices.0.logprobs.tokens"), *tlp = jget(o, "choices.0.logprobs.token_logprobs"),
           *offs = jget(o, "choices.0.logprobs.text_offset"), *tops = jget(o, "choices.0.logprobs.top_logprobs");
    assert_int_equal(json_array_size(toks), n + 2);
    assert_int_equal(json_array_size(offs), n + 2);
    assert_int_equal(json_array_size(tops), n + 2);
    assert_true(json_is_null(json_array_get(tlp, 0)) && json_is_null(json_array_get(tops, 0)));
    for (size_t i = 1; i < n; i++) {
        assert_true(json_real_value(json_array_get(tlp, i)) == ls[(i - 1) * (size_t)nv + (size_t)ids[i]]);
        assert_true(json_object_size(json_array_get(tops, i)) >= 2);
        assert_true(json_integer_value(json_array_get(offs, i)) >= json_integer_value(json_array_get(offs, i - 1)));
    }
    assert_int_equal(json_integer_value(json_array_get(offs, n)), (json_int_t)strlen(prompt));
    json_decref(o);
    /* max_tokens 0 is refused without them */
    o = post_json(port, "/v1/completions", "{\"prompt\":\"x\",\"max_tokens\":0}", 400);
    json_decref(o);

    /* chat turns, through srv_chat_tokens and over HTTP */
    srv_limits lim = {4, 64};
    srv_request rq;
    srv_error e;
    int32_t *a, *b, *c, *want, *ans;
    size_t na, nb, nc, nw, nans;
    assert_int_equal(srv_request_parse(SRV_EP_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi there\"}]}", 51,
                                       &lim, &rq, &e), 0);
    assert_int_equal(srv_chat_tokens(m, &rq, &a, &na, &e), 0);
    srv_request_free(&rq);
    assert_int_equal(drift_model_chat_tokens(m, "Hi there", &want, &nw, &err), DRIFT_OK);
    assert_int_equal(na, nw);
    assert_memory_equal(a, want, na * sizeof *a);
    const char *cont = "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi there\"},{\"role\":\"assistant\",\"content\":"
                       "\"Hello friend\"}],\"add_generation_prompt\":false,\"continue_final_message\":true}";
    assert_int_equal(srv_request_parse(SRV_EP_CHAT, cont, strlen(cont), &lim, &rq, &e), 0);
    assert_int_equal(srv_chat_tokens(m, &rq, &b, &nb, &e), 0);
    srv_request_free(&rq);
    const char *tpl = drift_model_get_info(m)->chat_template;
    if (strcmp(tpl, "none") && strcmp(tpl, "inst")) { /* turns of special markers: the one-turn prompt, then the answer */
        assert_int_equal(drift_model_tokenize(m, "Hello friend", 12, 0, 0, &ans, &nans, &err), DRIFT_OK);
        assert_int_equal(nb, na + nans);
        assert_memory_equal(b, a, na * sizeof *a);
        assert_memory_equal(b + na, ans, nans * sizeof *ans);
        free(ans);
    }
    const char *sys = "{\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":"
                      "\"Hi there\"}]}";
    assert_int_equal(srv_request_parse(SRV_EP_CHAT, sys, strlen(sys), &lim, &rq, &e), 0);
    assert_int_equal(srv_chat_tokens(m, &rq, &c, &nc, &e), 0);
    srv_request_free(&rq);
    char *ct = drift_model_detokenize(m, c, nc, NULL);
    assert_true(nc > na && strstr(ct, "Be brief.") && strstr(ct, "Hi there"));
    { /* a system turn: the embedded target's tokens, so teacher forcing pairs them (".\n\n" is one BPE piece) */
        int32_t *ws;
        size_t nws;
        assert_int_equal(drift_model_chat_system_tokens(m, "Be brief.", "Hi there", &ws, &nws, &err), DRIFT_OK);
        assert_int_equal(nc, nws);
        assert_memory_equal(c, ws, nc * sizeof *c);
        free(ws);
    }
    fprintf(stderr, "chat template %s: one turn %zu tokens, + open assistant turn %zu, + system %zu: %s\n", tpl, na, nb,
            nc, ct);
    free(ct);
    o = post_json(port, "/v1/chat/completions",
                  "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"assistant\",\"content\":\"b\"},"
                  "{\"role\":\"user\",\"content\":\"c\"}],\"max_tokens\":2,\"prompt_logprobs\":1}", 200);
    assert_true(json_integer_value(jget(o, "usage.prompt_tokens")) > (json_int_t)na);
    assert_int_equal(json_array_size(jget(o, "prompt_logprobs")), json_integer_value(jget(o, "usage.prompt_tokens")));
    json_decref(o);
    free(a);
    free(b);
    free(c);
    free(want);
    free(ls);
    free(ids);
    drift_model_free(m);
    drift_server_stop(s, 10);
}

/* ---------------------------------------------------------------------------
 * Bad requests
 * ------------------------------------------------------------------------- */
typedef struct bad {
    const char *method, *path, *body;
    long status;
    const char *param; /* NULL = null */
    const char *code;
} bad;

static void test_bad_requests(void **state) {
    (void)state;
    drift_server *s = start(1, 8, 64 * 1024);
    int port = drift_server_port(s);
    drift_numeric_profile p;
    drift_error err;
    drift_profile_get("cpu-f32", &p, &err);
    /* a prompt longer than the context */
    drift_model *m;
    assert_int_equal(drift_model_load(g_model, &p, &m, &err), DRIFT_OK);
    int ctx = drift_model_get_info(m)->n_ctx_train;
    drift_model_free(m);
    size_t longn = (size_t)ctx * 4 + 64;
    char *longbody = malloc(longn + 64);
    strcpy(longbody, "{\"prompt\":\"");
    for (size_t i = 0; i < (size_t)ctx * 2; i++) strcat(longbody + strlen(longbody) - 0, "a ");
    strcat(longbody, "\"}");
    const bad cases[] = {
        {"POST", "/v1/completions", "{\"prompt\": \"x\",", 400, NULL, "invalid_json"},
        {"POST", "/v1/completions", "", 400, NULL, "invalid_json"},
        {"POST", "/v1/completions", "[1,2]", 400, NULL, "invalid_json"},
        {"POST", "/v1/completions", "{\"max_tokens\":3}", 400, "prompt", "missing_field"},
        {"POST", "/v1/completions", "{\"prompt\":5}", 400, "prompt", "invalid_type"},
        {"POST", "/v1/completions", "{\"prompt\":[1,2,3]}", 400, "prompt", "unsupported_value"},
        {"POST", "/v1/completions", "{\"prompt\":\"x\",\"temperature\":\"hot\"}", 400, "temperature", "invalid_type"},
        {"POST", "/v1/completions", "{\"prompt\":\"x\",\"temperature\":-1}", 400, "temperature", "invalid_value"},
        {"POST", "/v1/completions", "{\"prompt\":\"x\",\"top_p\":0}", 400, "top_p", "invalid_value"},
        {"POST", "/v1/completions", "{\"prompt\":\"x\",\"max_tokens\":-1}", 400, "max_tokens", "invalid_value"},
        {"POST", "/v1/completions", "{\"prompt\":\"x\",\"max_tokens\":0}", 400, "max_tokens", "invalid_value"},
        {"POST", "/v1/completions", "{\"prompt\":\"x\",\"max_tokens\":1000000000000}", 400, "max_tokens", "invalid_value"},
        {"POST", "/v1/completions", "{\"prompt\":\"x\",\"max_tokens\":2.5}", 400, "max_tokens", "invalid_type"},
        {"POST", "/v1/completions", "{\"prompt\":\"x\",\"n\":0}", 400, "n", "invalid_value"},
        {"POST", "/v1/completions", "{\"prompt\":\"x\",\"n\":1000}", 400, "n", "invalid_value"},
        {"POST", "/v1/completions", "{\"prompt\":\"x\",\"seed\":\"42\"}", 400, "seed", "invalid_type"},
        {"POST", "/v1/completions", "{\"prompt\":\"x\",\"stop\":5}", 400, "stop", "invalid_type"},
        {"POST", "/v1/completions", "{\"prompt\":\"x\",\"stop\":[\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",\"9\",\"10\",\"11\",\"12\",\"13\",\"14\",\"15\",\"16\",\"17\"]}", 400, "stop", "invalid_value"},
        {"POST", "/v1/completions", "{\"prompt\":\"x\",\"stream\":\"yes\"}", 400, "stream", "invalid_type"},
        {"POST", "/v1/completions", "{\"prompt\":\"x\",\"logprobs\":50}", 400, "logprobs", "invalid_value"},
        {"POST", "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"echo\":true}", 400, "echo", "unsupported_value"},
        {"POST", "/v1/completions", "{\"prompt\":\"x\",\"prompt_logprobs\":21}", 400, "prompt_logprobs", "invalid_value"},
        {"POST", "/v1/completions", "{\"prompt\":\"x\",\"echo\":true,\"stream\":true}", 400, "stream", "unsupported_value"},
        {"POST", "/v1/completions", "{\"prompt\":\"x\",\"echo\":\"yes\"}", 400, "echo", "invalid_type"},
        {"POST", "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"continue_final_message\":true,\"add_generation_prompt\":false}", 400, "continue_final_message", "invalid_value"},
        {"POST", "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"assistant\",\"content\":\"b\"}],\"continue_final_message\":true}", 400, "continue_final_message", "invalid_value"},
        {"POST", "/v1/completions", "{\"prompt\":\"x\",\"presence_penalty\":0.5}", 400, "presence_penalty", "unsupported_value"},
        {"POST", "/v1/completions", "{\"prompt\":\"x\",\"prompt\":\"y\"}", 400, NULL, "invalid_json"},
        {"POST", "/v1/completions", "{\"model\":\"gpt-4\",\"prompt\":\"x\"}", 404, "model", "model_not_found"},
        {"POST", "/v1/completions", "{\"model\":7,\"prompt\":\"x\"}", 400, "model", "invalid_type"},
        {"POST", "/v1/completions", longbody, 400, "prompt", "context_length_exceeded"},
        {"POST", "/v1/chat/completions", "{\"messages\":[]}", 400, "messages", "invalid_value"},
        {"POST", "/v1/chat/completions", "{\"messages\":\"hi\"}", 400, "messages", "invalid_type"},
        {"POST", "/v1/chat/completions", "{\"messages\":[{\"role\":\"wizard\",\"content\":\"x\"}]}", 400, "messages", "invalid_value"},
        {"POST", "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":5}]}", 400, "messages", "invalid_type"},
        {"POST", "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"tool\",\"content\":\"b\"}]}", 400, "messages", "unsupported_value"},
        {"POST", "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"top_logprobs\":3}", 400, "top_logprobs", "invalid_value"},
        {"POST", "/v1/embeddings", "{\"input\":5}", 400, "input", "invalid_type"},
        {"POST", "/v1/embeddings", "{\"input\":\"x\",\"encoding_format\":\"hex\"}", 400, "encoding_format", "invalid_value"},
        {"GET", "/v1/completions", NULL, 405, NULL, "method_not_allowed"},
        {"DELETE", "/v1/chat/completions", NULL, 405, NULL, "method_not_allowed"},
        {"POST", "/v1/models", "{}", 405, NULL, "method_not_allowed"},
        {"GET", "/v2/everything", NULL, 404, NULL, "not_found"},
        {"POST", "/", "{}", 404, NULL, "not_found"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const bad *c = &cases[i];
        char *r;
        long st = http(c->method, port, c->path, c->body, 0, &r);
        json_t *o = json_loads(r, 0, NULL);
        const char *param = jstr(o, "error.param"), *code = jstr(o, "error.code");
        int okay = st == c->status && o && jstr(o, "error.message") && jstr(o, "error.type") &&
                   (c->param ? param && !strcmp(param, c->param) : json_is_null(jget(o, "error.param"))) && code &&
                   !strcmp(code, c->code) && !strcmp(jstr(o, "error.type"), "invalid_request_error");
        if (!okay) fprintf(stderr, "case %zu: %s %s %.80s -> %ld %s\n", i, c->method, c->path, c->body ? c->body : "", st, r);
        assert_true(okay);
        json_decref(o);
        free(r);
    }
    free(longbody);
    /* body over the limit: 413, via Content-Length and via a chunked upload */
    size_t big = 100 * 1024;
    char *bb = malloc(big + 1);
    memset(bb, ' ', big);
    bb[0] = '{';
    bb[big - 1] = '}';
    bb[big] = 0;
    char *r;
    assert_int_equal(http("POST", port, "/v1/completions", bb, big, &r), 413);
    assert_non_null(strstr(r, "\"code\":\"request_too_large\""));
    free(r);
    free(bb);
    /* the server still answers after all that */
    json_t *o = post_json(port, "/v1/completions", "{\"prompt\":\"x\",\"max_tokens\":2}", 200);
    json_decref(o);
    drift_server_stats st;
    drift_server_get_stats(s, &st);
    assert_int_equal(st.rejected, sizeof cases / sizeof *cases + 1);
    drift_server_stop(s, 10);
}

/* ---------------------------------------------------------------------------
 * Batch invariance
 * ------------------------------------------------------------------------- */
/* Greedy n=1 vs n=8 in one request (one batch of 8): differing logprob values. */
static int n8_diffs(int port, int *total) {
    json_t *one = post_json(port, "/v1/completions",
                            "{\"prompt\":\"batch me\",\"max_tokens\":8,\"temperature\":0,\"logprobs\":3}", 200);
    json_t *eight = post_json(port, "/v1/completions",
                              "{\"prompt\":\"batch me\",\"max_tokens\":8,\"temperature\":0,\"logprobs\":3,\"n\":8}", 200);
    json_t *a = jget(one, "choices.0.logprobs.token_logprobs");
    int diffs = 0;
    for (int j = 0; j < 8; j++) {
        char p[64];
        snprintf(p, sizeof p, "choices.%d.logprobs.token_logprobs", j);
        json_t *b = jget(eight, p);
        for (size_t t = 0; t < json_array_size(a) && t < json_array_size(b); t++) {
            (*total)++;
            diffs += json_real_value(json_array_get(a, t)) != json_real_value(json_array_get(b, t));
        }
    }
    json_decref(one);
    json_decref(eight);
    return diffs;
}

static void test_batch_invariance(void **state) {
    (void)state;
    for (int inv = 1; inv >= 0; inv--) {
        drift_server *s = start(inv, 8, 0);
        int port = drift_server_port(s);
        char spec[300];
        snprintf(spec, sizeof spec, "http://127.0.0.1:%d/v1?model=tiny-qwen2-f16&api=completions", port);
        drift_gen_params gp;
        drift_gen_params_default(&gp);
        gp.max_tokens = 8;
        gp.logprobs = 2;
        got l1, l32;
        run(spec, 1, &gp, 16, &l1);
        drift_server_stats st1;
        drift_server_get_stats(s, &st1);
        assert_int_equal(st1.max_batch_seen, 1);
        /* 16 requests in flight together, twice, so batches form */
        got extra;
        run(spec, 32, &gp, 16, &extra);
        got_free(&extra);
        run(spec, 32, &gp, 16, &l32);
        drift_server_stats st;
        drift_server_get_stats(s, &st);
        int tdiff = 0, ldiff = 0, total = 0;
        for (int i = 0; i < 16; i++) {
            tdiff += strcmp(l1.text[i], l32.text[i]) != 0;
            lp_compare(l1.lp[i], l32.lp[i], &ldiff, &total);
        }
        int ntotal = 0;
        int nd = n8_diffs(port, &ntotal);
        fprintf(stderr,
                "batch invariance %s: load 1 vs load 32 (largest batch %d, %.2f sequences per batch): %d of 16 texts and "
                "%d of %d logprobs differ; n=1 vs n=8 in one batch: %d of %d logprobs differ\n",
                inv ? "on" : "off", st.max_batch_seen,
                (double)(st.batched_sequences - st1.batched_sequences) / (double)(st.batches - st1.batches), tdiff, ldiff,
                total, nd, ntotal);
        if (inv) {
            assert_true(st.max_batch_seen > 1); /* batching happened */
            assert_int_equal(tdiff, 0);
            assert_int_equal(ldiff, 0);
            assert_int_equal(nd, 0);
        } else {
            /* kernels_cpu.c: with batch_invariant=0 a batch of <= 4 rows splits
             * the reduction 4x finer, so the lone n=1 decode rounds differently
             * from the batch of 8 */
            assert_true(nd > 0);
        }
        got_free(&l1);
        got_free(&l32);
        drift_server_stop(s, 10);
    }
}

/* ---------------------------------------------------------------------------
 * Load from a second process
 * ------------------------------------------------------------------------- */
static long rss_kb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) kb = atol(line + 6);
    if (f) fclose(f);
    return kb;
}

static void loadgen(int port, const char *clients, const char *per, long *ok, long *refused) {
    const char *build = getenv("DRIFT_BUILD");
    char exe[600], url[64], outp[128];
    snprintf(exe, sizeof exe, "%s/loadgen", build ? build : ".");
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    snprintf(outp, sizeof outp, "/tmp/drift_test_server_loadgen_%d.txt", (int)getpid());
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, outp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    char *argv[] = {exe, url, (char *)clients, (char *)per, "3", "4", NULL};
    pid_t pid;
    assert_int_equal(posix_spawn(&pid, exe, &fa, NULL, argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    int wst;
    assert_int_equal(waitpid(pid, &wst, 0), pid);
    FILE *f = fopen(outp, "r");
    char line[512] = "";
    assert_non_null(f);
    assert_non_null(fgets(line, sizeof line, f));
    fclose(f);
    unlink(outp);
    fprintf(stderr, "loadgen %s x %s: %s", clients, per, line);
    assert_true(WIFEXITED(wst) && WEXITSTATUS(wst) == 0);
    long un = -1, ov = -1;
    assert_int_equal(sscanf(line, "ok=%ld refused=%ld unexpected=%ld overloaded=%ld", ok, refused, &un, &ov), 4);
    assert_int_equal(un, 0);
    assert_int_equal(ov, 0);
}

static void test_load(void **state) {
    (void)state;
    drift_server *s = start(1, 8, 0);
    int port = drift_server_port(s);
    long ok, refused;
    loadgen(port, "32", "3", &ok, &refused); /* warm up: thread stacks, allocator arenas */
    long before = rss_kb();
    for (int round = 0; round < 2; round++) {
        loadgen(port, "32", "3", &ok, &refused);
        /* every third request is invalid */
        assert_int_equal(ok, 64);
        assert_int_equal(refused, 32);
    }
    long after = rss_kb();
    fprintf(stderr, "RSS %ld kB before, %ld kB after two rounds of 96 requests\n", before, after);
#ifdef __SANITIZE_ADDRESS__
    /* under ASan freed memory waits in its quarantine, so RSS grows with the
     * bytes allocated and freed, not with what is kept (it passes with
     * quarantine_size_mb=0); LeakSanitizer checks what is kept at exit */
    (void)before;
    (void)after;
#else
    assert_true(after - before < 8 * 1024);
#endif
    char *r;
    assert_int_equal(http("GET", port, "/health", NULL, 0, &r), 200);
    free(r);
    drift_server_stop(s, 10);
}

/* ---------------------------------------------------------------------------
 * Slow and abusive clients; cancellation
 * ------------------------------------------------------------------------- */
/* The engine's cancel hook the scheduler uses: sequence 1 ends after its
 * 3rd token, sequence 2 before its prefill; sequences 0 and 3 decode as
 * without the hook (batch invariance), in one batch of 4. */
typedef struct cancel_plan {
    int asked[4];
} cancel_plan;

static int cancel_some(void *user, size_t i) {
    cancel_plan *c = user;
    int k = c->asked[i]++; /* 0: before the prefill, k: before decode step k */
    return (i == 1 && k >= 3) || i == 2;
}

static void test_generate_cancel(void **state) {
    (void)state;
    drift_numeric_profile p;
    drift_error err;
    assert_int_equal(drift_profile_get("cpu-f32", &p, &err), DRIFT_OK);
    drift_model *m;
    assert_int_equal(drift_model_load(g_model, &p, &m, &err), DRIFT_OK);
    int32_t *ids;
    size_t n;
    assert_int_equal(drift_model_tokenize(m, "cancel me", 9, -1, 0, &ids, &n, &err), DRIFT_OK);
    const int32_t *pr[4] = {ids, ids, ids, ids};
    size_t lens[4] = {n, n, n, n};
    int64_t offs[4] = {0, 1, 2, 3};
    drift_gen_params gp;
    drift_gen_params_default(&gp);
    gp.max_tokens = 12;
    gp.temperature = 0.8;
    drift_generation full[4], cut[4];
    assert_int_equal(drift_model_generate(m, pr, lens, 4, &gp, offs, 4, full, &err), DRIFT_OK);
    cancel_plan plan = {{0}};
    assert_int_equal(drift_model_generate_cancellable(m, pr, lens, 4, &gp, offs, 4, cancel_some, &plan, cut, &err),
                     DRIFT_OK);
    for (int i = 0; i < 4; i += 3) {
        assert_int_equal(cut[i].n_tokens, full[i].n_tokens);
        assert_memory_equal(cut[i].tokens, full[i].tokens, (size_t)full[i].n_tokens * sizeof(int32_t));
        assert_string_equal(cut[i].finish_reason, full[i].finish_reason);
    }
    /* 1: the prefill's token and two decode steps' tokens, then cut */
    assert_string_equal(cut[1].finish_reason, "cancelled");
    assert_true(full[1].n_tokens > 3);
    assert_int_equal(cut[1].n_tokens, 3);
    assert_memory_equal(cut[1].tokens, full[1].tokens, 3 * sizeof(int32_t));
    assert_string_equal(cut[2].finish_reason, "cancelled");
    assert_int_equal(cut[2].n_tokens, 0);
    assert_int_equal(plan.asked[2], 1);
    for (int i = 0; i < 4; i++) {
        drift_generation_clear(&full[i]);
        drift_generation_clear(&cut[i]);
    }
    free(ids);
    drift_model_free(m);
}

/* A TCP connection to 127.0.0.1:port from source address src. */
static int tcp_from(const char *src, int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    assert_int_equal(inet_pton(AF_INET, src, &a.sin_addr), 1);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    struct sockaddr_in d = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &d.sin_addr);
    assert_int_equal(connect(fd, (struct sockaddr *)&d, sizeof d), 0);
    return fd;
}

/* GET /health from source address src with a timeout; the curl code, and the
 * status in *status. */
static CURLcode health_from(const char *src, int port, long timeout_s, long *status) {
    CURL *h = curl_easy_init();
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/health", port);
    sink sk = {0};
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_INTERFACE, src);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &sk);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, timeout_s);
    CURLcode rc = curl_easy_perform(h);
    *status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
    curl_easy_cleanup(h);
    free(sk.d);
    return rc;
}

static drift_server *start_opts(const char *model, int max_conn, int per_client, double timeout_s) {
    drift_server_opts o;
    drift_server_opts_default(&o);
    o.model_path = model;
    o.profile = "cpu-f32";
    o.threads = 1;
    o.max_connections = max_conn;
    o.per_client_connections = per_client;
    o.request_timeout_s = timeout_s;
    drift_server *s;
    drift_error err;
    drift_status st = drift_server_start(&o, &s, &err);
    if (st) fprintf(stderr, "start: %s\n", err.msg);
    assert_int_equal(st, DRIFT_OK);
    return s;
}

/* Waits up to secs for the uint64_t counter at offset off of the server's
 * statistics to reach want. */
static void wait_stat(drift_server *s, size_t off, uint64_t want, int secs) {
    for (int i = 0; i < secs * 50; i++) {
        drift_server_stats st;
        drift_server_get_stats(s, &st);
        uint64_t v;
        memcpy(&v, (const char *)&st + off, sizeof v);
        if (v >= want) return;
        usleep(20000);
    }
}

static void test_connection_limits(void **state) {
    (void)state;
    /* 8 in all, 4 per address; a deadline far beyond the test */
    drift_server *s = start_opts(g_model, 8, 4, 600);
    int port = drift_server_port(s);
    int fds[8], nf = 0;
    for (int i = 0; i < 4; i++) fds[nf++] = tcp_from("127.0.0.1", port); /* idle: its address is full */
    usleep(200000); /* accepted */
    long status;
    double t0 = util_now_ms();
    CURLcode rc = health_from("127.0.0.1", port, 3, &status);
    fprintf(stderr, "/health from a full address: curl %d, status %ld, %.0f ms\n", (int)rc, status, util_now_ms() - t0);
    assert_int_equal(rc, CURLE_OK);
    assert_int_equal(status, 200);
    /* fill the total: 3 idle left from .1, 4 from .2, 1 from .3 */
    for (int i = 0; i < 4; i++) fds[nf++] = tcp_from("127.0.0.2", port);
    int last = tcp_from("127.0.0.3", port);
    usleep(200000);
    t0 = util_now_ms();
    rc = health_from("127.0.0.4", port, 3, &status);
    fprintf(stderr, "/health with every slot taken: curl %d, status %ld, %.0f ms\n", (int)rc, status, util_now_ms() - t0);
    assert_int_equal(rc, CURLE_OK);
    assert_int_equal(status, 200);
    drift_server_stats st;
    drift_server_get_stats(s, &st);
    fprintf(stderr, "evicted %llu, refused %llu, timed out %llu\n", (unsigned long long)st.evicted,
            (unsigned long long)st.refused_connections, (unsigned long long)st.timed_out);
    assert_true(st.evicted >= 2);
    assert_int_equal(st.refused_connections, 0);
    assert_int_equal(st.timed_out, 0);
    /* the oldest idle connection (from 127.0.0.1) was closed by the server */
    struct pollfd pf = {.fd = fds[0], .events = POLLIN};
    assert_int_equal(poll(&pf, 1, 2000), 1);
    char b;
    assert_true(recv(fds[0], &b, 1, 0) <= 0);
    for (int i = 0; i < nf; i++) close(fds[i]);
    close(last);
    drift_server_stop(s, 10);
}

static void test_request_timeout(void **state) {
    (void)state;
    drift_server *s = start_opts(g_model, 16, 8, 1.0);
    int port = drift_server_port(s);
    int fd = tcp_from("127.0.0.1", port);
    const char *hdr = "GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ";
    assert_int_equal(send(fd, hdr, strlen(hdr), MSG_NOSIGNAL), (ssize_t)strlen(hdr));
    /* a header byte every 100 ms: an inactivity timer would never fire */
    double t0 = util_now_ms(), closed_ms = -1;
    while (util_now_ms() - t0 < 15000) {
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        if (poll(&pf, 1, 100) == 1) {
            char b[64];
            if (recv(fd, b, sizeof b, 0) <= 0) {
                closed_ms = util_now_ms() - t0;
                break;
            }
        }
        if (send(fd, "a", 1, MSG_NOSIGNAL) < 0) {
            closed_ms = util_now_ms() - t0;
            break;
        }
    }
    close(fd);
    fprintf(stderr, "request deadline 1 s: header trickler closed after %.0f ms\n", closed_ms);
    assert_true(closed_ms >= 500 && closed_ms <= 8000);
    drift_server_stats st;
    drift_server_get_stats(s, &st);
    assert_int_equal(st.timed_out, 1);
    long status;
    assert_int_equal(health_from("127.0.0.1", port, 3, &status), CURLE_OK);
    assert_int_equal(status, 200);
    drift_server_stop(s, 10);
}

typedef struct bg_req {
    int port;
    const char *body;
    long status;
    char *reply;
    CURLcode rc;
} bg_req;

static void *bg_post(void *arg) {
    bg_req *q = arg;
    CURL *h = curl_easy_init();
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/completions", q->port);
    sink sk = {0};
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, q->body);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &sk);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 600L);
    q->rc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &q->status);
    curl_easy_cleanup(h);
    q->reply = sk.d;
    return NULL;
}

/* models/qwen2-7m.gguf decoding 8 x 4000 sampled tokens: well over 30 s on
 * any CPU, so every check below passes only when the work is cut short. */
static void test_cancel(void **state) {
    (void)state;
    const char *src = getenv("DRIFT_SOURCE");
    char model[600];
    snprintf(model, sizeof model, "%s/models/qwen2-7m.gguf", src ? src : ".");
    drift_server *s = start_opts(model, 8, 1, 600); /* one connection per address */
    int port = drift_server_port(s);
    bg_req q = {port, "{\"prompt\":\"Once upon a time\",\"max_tokens\":4000,\"n\":8,\"temperature\":0.7,\"seed\":7}", 0, NULL,
                CURLE_OK};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, bg_post, &q), 0);
    wait_stat(s, offsetof(drift_server_stats, requests), 1, 30); /* received; decoding soon after */
    usleep(500000);
    /* 127.0.0.1's one connection is busy: a second is refused at once */
    long status;
    double t0 = util_now_ms();
    CURLcode rc = health_from("127.0.0.1", port, 3, &status);
    fprintf(stderr, "/health from a busy address: curl %d (%s), %.0f ms\n", (int)rc, curl_easy_strerror(rc),
            util_now_ms() - t0);
    assert_true(rc == CURLE_GOT_NOTHING || rc == CURLE_RECV_ERROR || rc == CURLE_COULDNT_CONNECT);
    drift_server_stats st;
    drift_server_get_stats(s, &st);
    assert_int_equal(st.refused_connections, 1);
    assert_int_equal(health_from("127.0.0.2", port, 3, &status), CURLE_OK); /* another address is served */
    assert_int_equal(status, 200);
    /* a client that queues a request behind the long one, then leaves */
    int fd = tcp_from("127.0.0.3", port);
    const char *body = "{\"prompt\":\"queued\",\"max_tokens\":4000,\"temperature\":0.9}";
    char req[512];
    int n = snprintf(req, sizeof req,
                     "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     strlen(body), body);
    assert_int_equal(send(fd, req, (size_t)n, MSG_NOSIGNAL), n);
    usleep(500000);
    close(fd);
    wait_stat(s, offsetof(drift_server_stats, departed), 1, 10);
    drift_server_get_stats(s, &st);
    assert_int_equal(st.departed, 1);
    /* the drain deadline cuts the long generation */
    t0 = util_now_ms();
    drift_server_drain(s, 1.0);
    double drain_ms = util_now_ms() - t0;
    pthread_join(th, NULL);
    fprintf(stderr, "drain with a 1 s deadline took %.0f ms; the long request got curl %d, status %ld: %.120s\n", drain_ms,
            (int)q.rc, q.status, q.reply ? q.reply : "");
    assert_true(drain_ms < 10000);
    assert_int_equal(q.rc, CURLE_OK);
    assert_int_equal(q.status, 503);
    assert_non_null(strstr(q.reply, "\"code\":\"shutting_down\""));
    drift_server_get_stats(s, &st);
    assert_int_equal(st.cancelled, 1);
    assert_int_equal(st.answered, 1); /* the /health from 127.0.0.2 */
    free(q.reply);
    drift_server_stop(s, 0);
}

static int setup(void **state) {
    (void)state;
    const char *src = getenv("DRIFT_SOURCE");
    snprintf(g_model, sizeof g_model, "%s/tests/data/models/tiny-qwen2-f16.gguf", src ? src : ".");
    curl_global_init(CURL_GLOBAL_ALL);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_endpoints),       cmocka_unit_test(test_same_as_embedded),
        cmocka_unit_test(test_bad_requests),    cmocka_unit_test(test_batch_invariance),
        cmocka_unit_test(test_load),            cmocka_unit_test(test_connection_limits),
        cmocka_unit_test(test_request_timeout), cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_generate_cancel), cmocka_unit_test(test_prompt_logprobs),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
