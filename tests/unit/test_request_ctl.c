/* test_request_ctl.c - request control (drift_request_ctl, target.h; issue
 * 37): the request bodies built from it (http_reply.c: the system message,
 * the completions prefix, the extra body merged with the user's value
 * winning, the refused keys, a user seed kept across replicates), what the
 * real fake server (tests/server/fakeserver.c: /last, /last_headers)
 * receives through a target (the body and the headers exactly, a value
 * "env:VAR" read at open), the refusals at open (an unset VAR named, a
 * credential header over plain http to another host refused as the API key
 * is unless allow_insecure_key, an Authorization header with api_key_env, a
 * header DriftBench sets, a malformed line, the embedded engine refusing an
 * extra body and headers, a template without {input}) with no header value
 * in any message, the embedded engine's system turn (the tiny ChatML
 * model's prompt tokens; a messages prompt's own system turn; the
 * completions prefix), the custom template's rendering and id, and the run's
 * identity in the store: another system prompt or extra body is another
 * run (a clear message naming the field), other headers are not. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driftbench/measure.h"
#include "driftbench/model.h"
#include "driftbench/store.h"
#include "driftbench/suite.h"
#include "driftbench/target.h"
#include "engine/http_internal.h"
#include "support/fake_server.h"
#include "util/util.h"

/* ---------- bodies (no server) ---------- */

static json_t *render(json_t *tmpl, drift_api api, const char *sys, const char *prompt, const int64_t *seed) {
    util_buf out = {0};
    drift_error err = {0};
    assert_int_equal(eng_http_request_render(tmpl, api, sys, prompt, seed, &out, &err), 0);
    json_t *j = json_loads(out.data, 0, NULL);
    buf_free(&out);
    assert_non_null(j);
    return j;
}

static void assert_turn(json_t *msgs, size_t i, const char *role, const char *content) {
    json_t *m = json_array_get(msgs, i);
    assert_non_null(m);
    assert_string_equal(json_string_value(json_object_get(m, "role")), role);
    assert_string_equal(json_string_value(json_object_get(m, "content")), content);
}

static void test_system_prompt_body(void **state) {
    (void)state;
    drift_gen_params gp;
    drift_gen_params_default(&gp);
    json_t *tmpl = eng_http_request_template(DRIFT_API_CHAT, "m", &gp, NULL);
    int64_t seed = 42;
    /* chat: the system message first, then the user's */
    json_t *j = render(tmpl, DRIFT_API_CHAT, "Answer in French.", "What is 2+2?", &seed);
    json_t *m = json_object_get(j, "messages");
    assert_int_equal(json_array_size(m), 2);
    assert_turn(m, 0, "system", "Answer in French.");
    assert_turn(m, 1, "user", "What is 2+2?");
    json_decref(j);
    /* the template is reused between requests: another system text is sent as it is */
    j = render(tmpl, DRIFT_API_CHAT, "Answer in German.", "What is 3+3?", &seed);
    m = json_object_get(j, "messages");
    assert_int_equal(json_array_size(m), 2);
    assert_turn(m, 0, "system", "Answer in German.");
    assert_turn(m, 1, "user", "What is 3+3?");
    json_decref(j);
    /* no system prompt: one user turn again */
    j = render(tmpl, DRIFT_API_CHAT, NULL, "hi", &seed);
    m = json_object_get(j, "messages");
    assert_int_equal(json_array_size(m), 1);
    assert_turn(m, 0, "user", "hi");
    json_decref(j);
    /* a messages prompt without a system turn gets the target's first */
    j = render(tmpl, DRIFT_API_CHAT, "Be brief.",
               DRIFT_PROMPT_MESSAGES_MARK "[{\"content\":\"a\",\"role\":\"user\"},{\"content\":\"b\",\"role\":"
                                          "\"assistant\"},{\"content\":\"c\",\"role\":\"user\"}]",
               &seed);
    m = json_object_get(j, "messages");
    assert_int_equal(json_array_size(m), 4);
    assert_turn(m, 0, "system", "Be brief.");
    assert_turn(m, 3, "user", "c");
    json_decref(j);
    /* ... and one with a developer turn keeps its own */
    j = render(tmpl, DRIFT_API_CHAT, "Be brief.",
               DRIFT_PROMPT_MESSAGES_MARK "[{\"content\":\"own\",\"role\":\"developer\"},{\"content\":\"c\",\"role\":"
                                          "\"user\"}]",
               &seed);
    m = json_object_get(j, "messages");
    assert_int_equal(json_array_size(m), 2);
    assert_turn(m, 0, "developer", "own");
    json_decref(j);
    /* after a messages prompt, a plain one is [system, user] again */
    j = render(tmpl, DRIFT_API_CHAT, "Be brief.", "plain", &seed);
    m = json_object_get(j, "messages");
    assert_int_equal(json_array_size(m), 2);
    assert_turn(m, 0, "system", "Be brief.");
    assert_turn(m, 1, "user", "plain");
    json_decref(j);
    json_decref(tmpl);

    /* completions: the text and a blank line before the prompt */
    tmpl = eng_http_request_template(DRIFT_API_COMPLETIONS, "m", &gp, NULL);
    j = render(tmpl, DRIFT_API_COMPLETIONS, "You are a calculator.", "Question: 2+2\nAnswer:", &seed);
    assert_string_equal(json_string_value(json_object_get(j, "prompt")),
                        "You are a calculator.\n\nQuestion: 2+2\nAnswer:");
    assert_null(json_object_get(j, "messages"));
    json_decref(j);
    j = render(tmpl, DRIFT_API_COMPLETIONS, "", "plain", &seed);
    assert_string_equal(json_string_value(json_object_get(j, "prompt")), "plain");
    json_decref(j);
    json_decref(tmpl);
}

static void test_extra_body_merge(void **state) {
    (void)state;
    drift_error err = {0};
    json_t *x = NULL;
    assert_int_equal(eng_http_extra_body_parse(
                         "{\"top_k\":20,\"temperature\":0.6,\"repetition_penalty\":1.05,"
                         "\"chat_template_kwargs\":{\"enable_thinking\":false},\"stop\":[\"</s>\"]}",
                         &x, &err),
                     DRIFT_OK);
    assert_non_null(x);
    drift_gen_params gp;
    drift_gen_params_default(&gp);
    gp.top_k = 5; /* DriftBench's own value, which the user's replaces */
    const char *stops[] = {"\n\n"};
    gp.stop = stops;
    gp.n_stop = 1;
    json_t *tmpl = eng_http_request_template(DRIFT_API_CHAT, "m", &gp, x);
    int64_t seed = 43;
    json_t *j = render(tmpl, DRIFT_API_CHAT, NULL, "hi", &seed);
    assert_int_equal(json_integer_value(json_object_get(j, "top_k")), 20);
    assert_true(json_number_value(json_object_get(j, "temperature")) == 0.6);
    assert_true(json_number_value(json_object_get(j, "repetition_penalty")) == 1.05);
    assert_true(json_is_false(json_object_get(json_object_get(j, "chat_template_kwargs"), "enable_thinking")));
    assert_string_equal(json_string_value(json_array_get(json_object_get(j, "stop"), 0)), "</s>");
    assert_int_equal(json_array_size(json_object_get(j, "stop")), 1);
    assert_int_equal(json_integer_value(json_object_get(j, "seed")), 43); /* no user seed: the replicate's */
    assert_true(json_is_false(json_object_get(j, "stream")));
    assert_string_equal(json_string_value(json_object_get(j, "model")), "m");
    json_decref(j);
    json_decref(tmpl);
    json_decref(x);

    /* a user seed stays (render is given no seed: http.c's rule) */
    assert_int_equal(eng_http_extra_body_parse("{\"seed\":7}", &x, &err), DRIFT_OK);
    tmpl = eng_http_request_template(DRIFT_API_COMPLETIONS, "m", &gp, x);
    j = render(tmpl, DRIFT_API_COMPLETIONS, NULL, "p", NULL);
    assert_int_equal(json_integer_value(json_object_get(j, "seed")), 7);
    json_decref(j);
    json_decref(tmpl);
    json_decref(x);

    /* empty: nothing */
    assert_int_equal(eng_http_extra_body_parse("", &x, &err), DRIFT_OK);
    assert_null(x);
}

static void test_extra_body_refused(void **state) {
    (void)state;
    static const char *const keys[] = {"model", "messages", "prompt", "stream", "n", "echo"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        char body[96], want[64];
        snprintf(body, sizeof body, "{\"top_k\":3,\"%s\":1}", keys[i]);
        snprintf(want, sizeof want, "key '%s' is refused", keys[i]);
        drift_error err = {0};
        json_t *x = (json_t *)1;
        assert_int_equal(eng_http_extra_body_parse(body, &x, &err), DRIFT_ERR_INVALID);
        assert_null(x);
        assert_non_null(strstr(err.msg, want));
    }
    drift_error err = {0};
    json_t *x = NULL;
    assert_int_equal(eng_http_extra_body_parse("[1,2]", &x, &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "must be a JSON object"));
    assert_non_null(strstr(err.msg, "array"));
    assert_int_equal(eng_http_extra_body_parse("{\"top_k\": }", &x, &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "not valid JSON"));
    assert_non_null(strstr(err.msg, "line 1"));
    assert_int_equal(eng_http_extra_body_parse("{\"a\":1,\"a\":2}", &x, &err), DRIFT_ERR_INVALID);

    /* through a target: refused at open, before any connection */
    drift_target_opts o;
    drift_target_opts_default(&o);
    o.default_key_env = NULL;
    o.request.extra_body_json = "{\"stream\":true}";
    drift_target *t = NULL;
    assert_int_equal(drift_target_open("http://127.0.0.1:9/v1?model=m", &o, &t, &err), DRIFT_ERR_INVALID);
    assert_null(t);
    assert_non_null(strstr(err.msg, "key 'stream' is refused"));
    assert_non_null(strstr(err.msg, "127.0.0.1:9"));
}

/* ---------- headers and bodies through the fake server ---------- */

typedef struct server {
    fake_server f;
    char url[128];
} server;

static int server_start(server *s) {
    char path[1024];
    const char *src = getenv("DRIFT_SOURCE");
    snprintf(path, sizeof path, "%s/tests/data/fake/basic.txt", src && *src ? src : DRIFT_SOURCE_DIR);
    const char *args[] = {"--script", path};
    int rc = fake_server_start(&s->f, NULL, 60, args, 2);
    if (rc) return rc;
    snprintf(s->url, sizeof s->url, "http://127.0.0.1:%d/v1", s->f.port);
    return 0;
}

static size_t collect(char *p, size_t size, size_t n, void *user) {
    buf_append(user, p, size * n);
    return size * n;
}

static char *server_get(server *s, const char *path) {
    char url[300];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", s->f.port, path);
    CURL *e = curl_easy_init();
    util_buf b = {0};
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &b);
    CURLcode rc = curl_easy_perform(e);
    curl_easy_cleanup(e);
    assert_int_equal(rc, CURLE_OK);
    return buf_steal(&b);
}

static int on_result(void *user, const drift_gen_request *req, drift_answer *res) {
    (void)req;
    char **text = user;
    free(*text);
    *text = res->error ? util_asprintf("ERROR %s", res->error) : util_strdup(res->text);
    return 0;
}

static drift_target_opts quiet_opts(void) {
    drift_target_opts o;
    drift_target_opts_default(&o);
    o.default_key_env = NULL;
    o.max_retries = 0;
    o.read_timeout_s = 10;
    return o;
}

static void test_server_receives(void **state) {
    (void)state;
    server s;
    int rc = server_start(&s);
    if (rc == -1) skip(); /* fakeserver not built */
    assert_int_equal(rc, 0);
    setenv("REQCTL_TEST_TOKEN", "tok-4711-secret", 1);
    const char *headers[] = {"X-Team: drift bench", "X-Token:  env:REQCTL_TEST_TOKEN ", "Authorization: Bearer abc"};
    drift_target_opts o = quiet_opts();
    o.request.system_prompt = "SYSTEM TEXT";
    o.request.extra_body_json = "{\"top_k\":11,\"repetition_penalty\":1.1,\"seed\":5}";
    o.request.headers = headers;
    o.request.n_headers = 3;
    char spec[256];
    snprintf(spec, sizeof spec, "%s?model=m&api=chat", s.url);
    drift_target *t = NULL;
    drift_error err = {0};
    assert_int_equal(drift_target_open(spec, &o, &t, &err), DRIFT_OK);
    drift_gen_params gp;
    drift_gen_params_default(&gp);
    drift_gen_request rq[2] = {{.index = 0, .prompt = "ANSWER=1", .replicate = 0},
                               {.index = 1, .prompt = "ANSWER=1", .replicate = 3}};
    char *text = NULL;
    assert_int_equal(drift_target_generate(t, rq, 2, &gp, on_result, &text, &err), DRIFT_OK);
    assert_non_null(text);
    assert_null(strstr(text, "ERROR"));
    free(text);
    char *last = server_get(&s, "/last");
    json_t *j = json_loads(last, 0, NULL);
    free(last);
    json_t *m = json_object_get(j, "messages");
    assert_int_equal(json_array_size(m), 2);
    assert_turn(m, 0, "system", "SYSTEM TEXT");
    assert_turn(m, 1, "user", "ANSWER=1");
    assert_int_equal(json_integer_value(json_object_get(j, "top_k")), 11);
    assert_int_equal(json_integer_value(json_object_get(j, "seed")), 5); /* the user's, whatever the replicate */
    json_decref(j);
    char *head = server_get(&s, "/last_headers");
    assert_non_null(strstr(head, "\r\nX-Team: drift bench\r\n"));
    assert_non_null(strstr(head, "\r\nX-Token: tok-4711-secret\r\n")); /* read from the environment */
    assert_non_null(strstr(head, "\r\nAuthorization: Bearer abc\r\n"));
    assert_null(strstr(head, "env:"));
    char *a1 = strstr(head, "Authorization"), *a2 = a1 ? strstr(a1 + 1, "Authorization") : NULL;
    assert_null(a2); /* the user's header is the only credential */
    free(head);
    drift_target_close(t);

    /* completions: the system text and a blank line before the prompt */
    snprintf(spec, sizeof spec, "%s?model=m", s.url);
    o.request.headers = NULL;
    o.request.n_headers = 0;
    o.request.extra_body_json = NULL;
    assert_int_equal(drift_target_open(spec, &o, &t, &err), DRIFT_OK);
    text = NULL;
    assert_int_equal(drift_target_generate(t, rq, 1, &gp, on_result, &text, &err), DRIFT_OK);
    free(text);
    last = server_get(&s, "/last");
    j = json_loads(last, 0, NULL);
    free(last);
    assert_string_equal(json_string_value(json_object_get(j, "prompt")), "SYSTEM TEXT\n\nANSWER=1");
    assert_int_equal(json_integer_value(json_object_get(j, "seed")), 42);
    json_decref(j);
    drift_target_close(t);
    unsetenv("REQCTL_TEST_TOKEN");
    fake_server_stop(&s.f);
}

/* Opens spec with headers; returns the status, the message in msg. */
static drift_status open_with(const char *spec, const char *const *headers, size_t n, int allow, char *msg,
                              size_t cap) {
    drift_target_opts o = quiet_opts();
    o.request.headers = headers;
    o.request.n_headers = n;
    o.allow_insecure_key = allow;
    drift_target *t = NULL;
    drift_error err = {0};
    drift_status st = drift_target_open(spec, &o, &t, &err);
    snprintf(msg, cap, "%s", err.msg);
    drift_target_close(t);
    return st;
}

static void test_header_refusals(void **state) {
    (void)state;
    char msg[1024];
    unsetenv("REQCTL_UNSET_VAR");
    const char *h1[] = {"X-Key: env:REQCTL_UNSET_VAR"};
    assert_int_equal(open_with("http://127.0.0.1:9/v1?model=m", h1, 1, 0, msg, sizeof msg), DRIFT_ERR_INVALID);
    assert_non_null(strstr(msg, "$REQCTL_UNSET_VAR is not set"));
    assert_non_null(strstr(msg, "X-Key"));

    /* a credential over plain http to another host: refused, value unseen */
    const char *h2[] = {"Authorization: Bearer sk-very-secret-1"};
    assert_int_equal(open_with("http://192.0.2.1:8000/v1?model=m", h2, 1, 0, msg, sizeof msg), DRIFT_ERR_INVALID);
    assert_non_null(strstr(msg, "refusing to send header 'Authorization'"));
    assert_non_null(strstr(msg, "allow_insecure_key=1"));
    assert_null(strstr(msg, "sk-very-secret-1"));
    /* ... allowed when said so, over https, and to this machine */
    assert_int_equal(open_with("http://192.0.2.1:8000/v1?model=m", h2, 1, 1, msg, sizeof msg), DRIFT_OK);
    assert_int_equal(open_with("https://192.0.2.1:8000/v1?model=m", h2, 1, 0, msg, sizeof msg), DRIFT_OK);
    assert_int_equal(open_with("http://localhost:8000/v1?model=m", h2, 1, 0, msg, sizeof msg), DRIFT_OK);
    /* a value from the environment is a credential too; a plain header is not */
    setenv("REQCTL_TEST_TOKEN", "tok-4711-secret", 1);
    const char *h3[] = {"X-Org: env:REQCTL_TEST_TOKEN"};
    assert_int_equal(open_with("http://192.0.2.1:8000/v1?model=m", h3, 1, 0, msg, sizeof msg), DRIFT_ERR_INVALID);
    assert_null(strstr(msg, "tok-4711-secret"));
    const char *h4[] = {"X-Org: team-a"};
    assert_int_equal(open_with("http://192.0.2.1:8000/v1?model=m", h4, 1, 0, msg, sizeof msg), DRIFT_OK);
    unsetenv("REQCTL_TEST_TOKEN");

    /* headers DriftBench sets, and lines that are no header */
    const char *h5[] = {"content-type: text/plain"};
    assert_int_equal(open_with("http://127.0.0.1:9/v1?model=m", h5, 1, 0, msg, sizeof msg), DRIFT_ERR_INVALID);
    assert_non_null(strstr(msg, "DriftBench's own"));
    const char *h6[] = {"X-Ok: 1", "sk-pasted-key-without-name"};
    assert_int_equal(open_with("http://127.0.0.1:9/v1?model=m", h6, 2, 0, msg, sizeof msg), DRIFT_ERR_INVALID);
    assert_non_null(strstr(msg, "header 2 is not"));
    assert_null(strstr(msg, "sk-pasted"));
    const char *h7[] = {"X-Empty:   "};
    assert_int_equal(open_with("http://127.0.0.1:9/v1?model=m", h7, 1, 0, msg, sizeof msg), DRIFT_ERR_INVALID);
    assert_non_null(strstr(msg, "has no value"));
    const char *h8[] = {"X-Bad: env:not a name sk-123"};
    assert_int_equal(open_with("http://127.0.0.1:9/v1?model=m", h8, 1, 0, msg, sizeof msg), DRIFT_ERR_INVALID);
    assert_null(strstr(msg, "sk-123"));

    /* an Authorization header and a named key: one way only */
    setenv("REQCTL_TEST_TOKEN", "tok", 1);
    assert_int_equal(open_with("http://127.0.0.1:9/v1?model=m&api_key_env=REQCTL_TEST_TOKEN", h2, 1, 0, msg, sizeof msg),
                     DRIFT_ERR_INVALID);
    assert_non_null(strstr(msg, "give the key one way"));
    unsetenv("REQCTL_TEST_TOKEN");

    /* the embedded engine: no body, no headers (refused before the model loads) */
    drift_target_opts o = quiet_opts();
    o.request.extra_body_json = "{\"top_k\":3}";
    drift_target *t = NULL;
    drift_error err = {0};
    assert_int_equal(drift_target_open("embedded:/nonexistent/m.gguf", &o, &t, &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "only for http targets"));
    o.request.extra_body_json = NULL;
    o.request.headers = h4;
    o.request.n_headers = 1;
    assert_int_equal(drift_target_open("embedded:/nonexistent/m.gguf", &o, &t, &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "request headers"));
    /* a template without {input}, any kind */
    o = quiet_opts();
    o.request.prompt_template = "always the same";
    assert_int_equal(drift_target_open("http://127.0.0.1:9/v1?model=m", &o, &t, &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "no {input}"));
    o.request.prompt_template = NULL;
    o.request.system_prompt = "caf\xe9";
    assert_int_equal(drift_target_open("http://127.0.0.1:9/v1?model=m", &o, &t, &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "system prompt is not valid UTF-8"));
}

/* ---------- the embedded engine ---------- */

/* The prompt's tokens as text (control tokens rendered). */
static char *tokens_text(const drift_target *t, const char *prompt) {
    int32_t *ids = NULL;
    size_t n = 0;
    drift_error err = {0};
    assert_int_equal(drift_target_prompt_tokens(t, prompt, &ids, &n, &err), DRIFT_OK);
    util_buf b = {0};
    for (size_t i = 0; i < n; i++) {
        char *tt = drift_model_token_text(drift_target_model(t), ids[i]);
        buf_puts(&b, tt ? tt : "");
        free(tt);
    }
    free(ids);
    return buf_steal(&b);
}

static void test_embedded_system(void **state) {
    (void)state;
    const char *src = getenv("DRIFT_SOURCE");
    char spec[1024];
    snprintf(spec, sizeof spec, "embedded:%s/tests/data/models/tiny-qwen2-f16.gguf?profile=cpu-f32&api=chat",
             src && *src ? src : DRIFT_SOURCE_DIR);
    drift_target_opts o;
    drift_target_opts_default(&o);
    drift_target *plain = NULL, *sys = NULL;
    drift_error err = {0};
    assert_int_equal(drift_target_open(spec, &o, &plain, &err), DRIFT_OK);
    o.request.system_prompt = "Be terse.";
    assert_int_equal(drift_target_open(spec, &o, &sys, &err), DRIFT_OK);
    assert_string_equal(drift_model_get_info(drift_target_model(sys))->chat_template, "chatml");
    char *a = tokens_text(plain, "hi"), *b = tokens_text(sys, "hi");
    assert_null(strstr(a, "system"));
    /* ChatML: the system turn, then the user turn as before */
    assert_non_null(strstr(b, "<|im_start|>system\nBe terse.<|im_end|>\n<|im_start|>user\nhi<|im_end|>"));
    assert_non_null(strstr(b, a + (strstr(a, "<|im_start|>user") - a)));
    free(a);
    free(b);
    /* a messages prompt's own system turn replaces the target's */
    b = tokens_text(sys, DRIFT_PROMPT_MESSAGES_MARK "[{\"content\":\"Own.\",\"role\":\"system\"},"
                         "{\"content\":\"hi\",\"role\":\"user\"}]");
    assert_non_null(strstr(b, "<|im_start|>system\nOwn.<|im_end|>"));
    assert_null(strstr(b, "Be terse."));
    free(b);
    drift_target_close(plain);
    drift_target_close(sys);
    /* completions: the text and a blank line before the prompt, as http */
    snprintf(spec, sizeof spec, "embedded:%s/tests/data/models/tiny-qwen2-f16.gguf?profile=cpu-f32",
             src && *src ? src : DRIFT_SOURCE_DIR);
    assert_int_equal(drift_target_open(spec, &o, &sys, &err), DRIFT_OK);
    b = tokens_text(sys, "Question: 1+1\nAnswer:");
    assert_non_null(strstr(b, "Be terse.\n\nQuestion: 1+1\nAnswer:"));
    free(b);
    drift_target_close(sys);
}

/* ---------- the custom template ---------- */

static void test_custom_template(void **state) {
    (void)state;
    drift_prompt p = {.prompt_id = "p1", .workload = DRIFT_WL_MATH, .input = "What is 2+2?"};
    char id[DRIFT_TEMPLATE_ID_MAX], id2[DRIFT_TEMPLATE_ID_MAX];
    char *r = drift_prompt_render_custom(&p, DRIFT_API_COMPLETIONS, "Q: {input}\nA ({input}):", id);
    assert_string_equal(r, "Q: What is 2+2?\nA (What is 2+2?):");
    free(r);
    assert_int_equal(strlen(id), strlen("custom/") + 16);
    assert_memory_equal(id, "custom/", 7);
    char hex[17];
    util_hash_hex("Q: {input}\nA ({input}):", strlen("Q: {input}\nA ({input}):"), hex);
    assert_string_equal(id + 7, hex);
    /* chat the same; another wording, another id */
    r = drift_prompt_render_custom(&p, DRIFT_API_CHAT, "{input} Think.", id2);
    assert_string_equal(r, "What is 2+2? Think.");
    free(r);
    assert_string_not_equal(id, id2);
    /* no template: the workload's */
    r = drift_prompt_render_custom(&p, DRIFT_API_COMPLETIONS, NULL, id);
    assert_string_equal(r, "Question: What is 2+2?\nAnswer:");
    assert_string_equal(id, "math/completions/v1");
    free(r);
    /* a messages prompt keeps its turns */
    drift_prompt pm = {.prompt_id = "p2", .workload = DRIFT_WL_CHAT,
                       .input = DRIFT_PROMPT_MESSAGES_MARK "[{\"content\":\"hi\",\"role\":\"user\"}]"};
    r = drift_prompt_render_custom(&pm, DRIFT_API_CHAT, "X {input}", id);
    assert_string_equal(r, pm.input);
    assert_string_equal(id, "messages/chat/v1");
    free(r);
}

/* ---------- identity in the store ---------- */

static void test_identity(void **state) {
    (void)state;
    char path[] = "/tmp/test_request_ctl_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    unlink(path);
    char db[64];
    snprintf(db, sizeof db, "%s.db", path);
    drift_store *st = NULL;
    drift_error err = {0};
    assert_int_equal(drift_store_open(db, &st, &err), DRIFT_OK);
    const char *dec_a = "{\"api\":\"chat\",\"seed\":42,\"request\":{\"system_prompt\":\"A\",\"headers\":[\"X-One\"]}}";
    const char *dec_h = "{\"api\":\"chat\",\"seed\":42,\"request\":{\"system_prompt\":\"A\",\"headers\":[\"X-Two\"]}}";
    const char *dec_b = "{\"api\":\"chat\",\"seed\":42,\"request\":{\"system_prompt\":\"B\"}}";
    const char *dec_x = "{\"api\":\"chat\",\"seed\":42,\"request\":{\"system_prompt\":\"A\",\"extra_body\":{\"top_k\":2}}}";
    drift_run_info info = {.label = "r", .target = "http://127.0.0.1:1/v1?model=m", .config_json = "{}",
                           .decoding_json = (char *)dec_a, .templates_json = "{}", .suites_json = "[]"};
    int64_t id = 0, id2 = 0;
    int resumed = 0;
    assert_int_equal(drift_store_run_begin(st, &info, &id, &resumed, &err), DRIFT_OK);
    assert_int_equal(resumed, 0);
    assert_int_equal(drift_store_run_unlock(st, "r", &err), DRIFT_OK);
    /* other headers: the same run */
    info.decoding_json = (char *)dec_h;
    assert_int_equal(drift_store_run_begin(st, &info, &id2, &resumed, &err), DRIFT_OK);
    assert_int_equal(resumed, 1);
    assert_true(id2 == id);
    assert_int_equal(drift_store_run_unlock(st, "r", &err), DRIFT_OK);
    /* another system prompt: refused, the field named */
    info.decoding_json = (char *)dec_b;
    assert_int_equal(drift_store_run_begin(st, &info, &id2, &resumed, &err), DRIFT_ERR_MISMATCH);
    assert_non_null(strstr(err.msg, "decoding.request.system_prompt: stored \"A\", requested \"B\""));
    /* another extra body: refused */
    info.decoding_json = (char *)dec_x;
    assert_int_equal(drift_store_run_begin(st, &info, &id2, &resumed, &err), DRIFT_ERR_MISMATCH);
    assert_non_null(strstr(err.msg, "decoding.request.extra_body"));
    /* none at all (the run had one): refused */
    info.decoding_json = "{\"api\":\"chat\",\"seed\":42}";
    assert_int_equal(drift_store_run_begin(st, &info, &id2, &resumed, &err), DRIFT_ERR_MISMATCH);
    assert_non_null(strstr(err.msg, "decoding.request"));
    drift_store_close(st);
    unlink(db);
}

/* drift_measure_request_layer: the shared control is the file's with the
 * flags' fields over it; a side with a file entry or flags of its own gets
 * its entry (else the shared file one), the shared flags, its own over
 * that, headers replaced by name at each layer; a side with nothing of its
 * own is left all NULL (asked with the shared one). */
static void test_measure_layers(void **state) {
    (void)state;
    const char *file_h[] = {"X-A: file", "X-B: file"}, *tside_h[] = {"X-A: file-target", "X-T: t"};
    const char *flag_h[] = {"x-b: flag"}, *bflag_h[] = {"X-A: base-flag"};
    drift_measure_request_layers l;
    memset(&l, 0, sizeof l);
    l.file = (drift_request_ctl){.system_prompt = "file sys", .extra_body_json = "{\"f\":1}", .headers = file_h,
                                 .n_headers = 2};
    l.file_side[DRIFT_MEASURE_TARGET] = (drift_request_ctl){.system_prompt = "target sys", .headers = tside_h,
                                                            .n_headers = 2};
    l.flags = (drift_request_ctl){.extra_body_json = "{\"flag\":1}", .headers = flag_h, .n_headers = 1};
    l.side_flags[DRIFT_MEASURE_BASELINE] = (drift_request_ctl){.headers = bflag_h, .n_headers = 1};
    drift_request_ctl shared, side[2];
    const char **hbuf = NULL;
    drift_error err = {0};
    assert_int_equal(drift_measure_request_layer(&l, &shared, side, &hbuf, &err), DRIFT_OK);
    assert_string_equal(shared.system_prompt, "file sys");
    assert_string_equal(shared.extra_body_json, "{\"flag\":1}");
    assert_int_equal(shared.n_headers, 2);
    assert_string_equal(shared.headers[0], "X-A: file");
    assert_string_equal(shared.headers[1], "x-b: flag");
    /* the baseline: the shared file entry, the flags, its own header */
    const drift_request_ctl *b = &side[DRIFT_MEASURE_BASELINE];
    assert_string_equal(b->system_prompt, "file sys");
    assert_string_equal(b->extra_body_json, "{\"flag\":1}");
    assert_int_equal(b->n_headers, 2);
    assert_string_equal(b->headers[0], "x-b: flag");
    assert_string_equal(b->headers[1], "X-A: base-flag");
    /* the target: its file entry, the flags over it */
    const drift_request_ctl *t = &side[DRIFT_MEASURE_TARGET];
    assert_string_equal(t->system_prompt, "target sys");
    assert_string_equal(t->extra_body_json, "{\"flag\":1}");
    assert_int_equal(t->n_headers, 3);
    assert_string_equal(t->headers[0], "X-A: file-target");
    assert_string_equal(t->headers[1], "X-T: t");
    assert_string_equal(t->headers[2], "x-b: flag");
    free(hbuf);
    /* nothing of a side's own: all NULL */
    memset(&l.side_flags, 0, sizeof l.side_flags);
    memset(&l.file_side, 0, sizeof l.file_side);
    assert_int_equal(drift_measure_request_layer(&l, &shared, side, &hbuf, &err), DRIFT_OK);
    assert_int_equal(drift_request_ctl_any(&side[0]) || drift_request_ctl_any(&side[1]), 0);
    assert_int_equal(shared.n_headers, 2);
    free(hbuf);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_system_prompt_body), cmocka_unit_test(test_extra_body_merge),
        cmocka_unit_test(test_extra_body_refused), cmocka_unit_test(test_server_receives),
        cmocka_unit_test(test_header_refusals),    cmocka_unit_test(test_custom_template),
        cmocka_unit_test(test_identity),          cmocka_unit_test(test_embedded_system),
        cmocka_unit_test(test_measure_layers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
