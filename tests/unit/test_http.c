/* test_http.c - the HTTP target against the real fake server
 * (tests/server/fakeserver.c, started from $DRIFT_BUILD with fixture scripts
 * from tests/data/fake/), one server per test, killed at the end of it.
 * Covers: both APIs, usage, finish_reason, logprobs, request fields, every
 * injected fault class (with /stats proving the retries happened), timing of
 * Retry-After, concurrency, bad specs, unreachable servers, embeddings,
 * cancellation through opts.cancel (in flight, in back-off, before the
 * start, against a peer that never answers; the embedded engine stopped by
 * target.c), the reply parser directly, and the cause every failed outcome
 * carries (drift_answer.cause: HTTP with its status, bad reply, timeout,
 * connection lost, could not connect, request not sent; libcurl's codes
 * through eng_http_transport_cause), and where credentials go (a key
 * named per target or the caller's, the default variable's, a URL's
 * password): to a local http target, yes; to a non-local http one,
 * refused at open before any connection (192.0.2.1, TEST-NET-1, and this
 * host's own non-loopback address, where a listener proves nothing
 * connected) unless allow_insecure_key; the default key silently not
 * sent there; https anywhere; and the reply cap (max_reply_mb): a reply
 * over it fails unparsed and costs no memory past the cap. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <curl/curl.h>
#include <ifaddrs.h>
#include <jansson.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "driftbench/target.h"
#include "engine/http_internal.h"
#include "engine/target_impl.h"
#include "support/fake_server.h"
#include "util/util.h"

/* ---------- fake server control ---------- */

typedef struct server {
    pid_t pid;
    int port;
    char url[256];
} server;

/* Servers started by the running test, killed by teardown even when an
 * assertion failed half way (cmocka longjmps out of the test). */
static pid_t live_pids[8];

static void track_pid(pid_t pid, int add) {
    for (int i = 0; i < 8; i++) {
        if (add && live_pids[i] == 0) {
            live_pids[i] = pid;
            return;
        }
        if (!add && live_pids[i] == pid) {
            live_pids[i] = 0;
            return;
        }
    }
}

static int kill_servers(void **state) {
    for (int i = 0; i < 8; i++) {
        if (live_pids[i] > 0) {
            kill(live_pids[i], SIGKILL);
            waitpid(live_pids[i], NULL, 0);
            live_pids[i] = 0;
        }
    }
    return 0;
}

static const char *env_or(const char *name, const char *dflt) {
    const char *v = getenv(name);
    return v && *v ? v : dflt;
}

/* Starts fakeserver (tests/support/fake_server.h) with tests/data/fake/<script>
 * (or the absolute path script) and extra args; asserts it reported a port. */
static void server_start(server *s, const char *script, const char *extra1, const char *extra2) {
    char path[1024];
    if (script[0] == '/')
        snprintf(path, sizeof path, "%s", script);
    else
        snprintf(path, sizeof path, "%s/tests/data/fake/%s", env_or("DRIFT_SOURCE", DRIFT_SOURCE_DIR), script);
    const char *args[4] = {"--script", path};
    int nargs = 2;
    if (extra1) args[nargs++] = extra1;
    if (extra2) args[nargs++] = extra2;
    fake_server f;
    if (fake_server_start(&f, NULL, 30, args, nargs) != 0) {
        fprintf(stderr, "fakeserver did not start (is $DRIFT_BUILD/fakeserver built?)\n");
        fail();
    }
    track_pid(f.pid, 1);
    s->pid = f.pid;
    s->port = f.port;
    snprintf(s->url, sizeof s->url, "http://127.0.0.1:%d/v1", f.port);
}

static void server_stop(server *s) {
    if (s->pid > 0) {
        fake_server f = {.pid = s->pid, .port = s->port};
        fake_server_stop(&f);
        track_pid(s->pid, 0);
        s->pid = 0;
    }
}

static size_t collect(char *p, size_t size, size_t n, void *user) {
    buf_append(user, p, size * n);
    return size * n;
}

/* GETs a path of the server; returns the body (caller frees). */
static char *server_get(server *s, const char *path) {
    char url[300];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", s->port, path);
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

/* A counter of /stats: "faults.reset" style paths are one level deep. */
static long server_stat(server *s, const char *key, const char *sub) {
    char *body = server_get(s, "/stats");
    json_t *j = json_loads(body, 0, NULL);
    free(body);
    assert_non_null(j);
    json_t *v = json_object_get(j, key);
    if (sub) v = json_object_get(v, sub);
    long r = json_is_integer(v) ? (long)json_integer_value(v) : 0;
    json_decref(j);
    return r;
}

/* ---------- collecting results ---------- */

typedef struct got {
    int calls;
    drift_answer r;
} got;

typedef struct sink {
    got *g;
    size_t n;
    size_t order;
    int stop_after; /* >0: ask to stop after this many callbacks */
} sink;

static int on_result(void *user, const drift_gen_request *req, drift_answer *res) {
    sink *k = user;
    assert_true(req->index < k->n);
    got *g = &k->g[req->index];
    g->calls++;
    if (g->calls == 1) {
        g->r = *res; /* take ownership of the strings */
        res->text = res->finish_reason = res->logprobs_json = res->error = NULL;
    }
    k->order++;
    return k->stop_after > 0 && (int)k->order >= k->stop_after;
}

static void sink_init(sink *k, size_t n) {
    k->g = calloc(n, sizeof *k->g);
    k->n = n;
    k->order = 0;
    k->stop_after = 0;
}

static void sink_free(sink *k) {
    for (size_t i = 0; i < k->n; i++) drift_answer_clear(&k->g[i].r);
    free(k->g);
}

static drift_target_opts fast_opts(void) {
    drift_target_opts o;
    drift_target_opts_default(&o);
    o.api_key = NULL;
    o.default_key_env = NULL; /* whatever $OPENAI_API_KEY holds here stays out */
    o.max_retries = 2;
    o.backoff_base_s = 0.01;
    o.backoff_max_s = 5;
    o.read_timeout_s = 5;
    o.connect_timeout_s = 2;
    return o;
}

static drift_target *open_target(server *s, const char *query, const drift_target_opts *o) {
    char spec[512];
    snprintf(spec, sizeof spec, "%s?%s", s->url, query);
    drift_target *t = NULL;
    drift_error err = {0};
    drift_status st = drift_target_open(spec, o, &t, &err);
    if (st) fprintf(stderr, "open %s: %s\n", spec, err.msg);
    assert_int_equal(st, DRIFT_OK);
    return t;
}

/* Generates one prompt; fills *k (caller frees with sink_free). */
static void gen_one(drift_target *t, const char *prompt, const drift_gen_params *p, sink *k) {
    drift_gen_request rq = {.index = 0, .prompt = prompt, .replicate = 0};
    sink_init(k, 1);
    drift_error err = {0};
    assert_int_equal(drift_target_generate(t, &rq, 1, p, on_result, k, &err), DRIFT_OK);
    assert_int_equal(k->g[0].calls, 1);
}

static int contains(const char *s, const char *sub) { return s && strstr(s, sub) != NULL; }

/* ---------- tests: answers ---------- */

static void test_completions_answer(void **state) {
    server s;
    server_start(&s, "basic.txt", NULL, NULL);
    drift_target_opts o = fast_opts();
    drift_target *t = open_target(&s, "model=m", &o);
    assert_int_equal(drift_target_api(t), DRIFT_API_COMPLETIONS);
    /* the fake server's /v1/models names its model: detected, the spec's kept */
    assert_string_equal(drift_target_config_json(t),
                        "{\"model\":\"m\",\"server_model\":\"fake\",\"detected_from\":\"/models\"}");
    sink k;
    gen_one(t, "What is 6*7? ANSWER=42.", NULL, &k);
    drift_answer *r = &k.g[0].r;
    assert_null(r->error);
    assert_string_equal(r->text, "The answer is 42.\n#### 42");
    assert_string_equal(r->finish_reason, "stop");
    assert_int_equal(r->prompt_tokens, 4);     /* What| is| 6*7?| ANSWER=42. */
    assert_int_equal(r->completion_tokens, 6); /* The| answer| is| 42.|\n####| 42 */
    assert_int_equal(r->http_status, 200);
    assert_int_equal(r->attempts, 1);
    assert_true(r->latency_ms > 0 && r->latency_ms < 5000);
    assert_null(r->logprobs_json);
    sink_free(&k);
    drift_target_close(t);
    server_stop(&s);
}

static void test_chat_answer_and_length(void **state) {
    server s;
    server_start(&s, "basic.txt", NULL, NULL);
    drift_target_opts o = fast_opts();
    drift_target *t = open_target(&s, "model=m&api=chat", &o);
    assert_int_equal(drift_target_api(t), DRIFT_API_CHAT);
    sink k;
    gen_one(t, "What is the capital of France?", NULL, &k);
    assert_null(k.g[0].r.error);
    assert_string_equal(k.g[0].r.text, "Paris is the capital of France.");
    assert_string_equal(k.g[0].r.finish_reason, "stop");
    assert_int_equal(k.g[0].r.completion_tokens, 6);
    sink_free(&k);

    drift_gen_params p;
    drift_gen_params_default(&p);
    p.max_tokens = 3;
    gen_one(t, "count: LONG", &p, &k);
    assert_string_equal(k.g[0].r.text, "one two three");
    assert_string_equal(k.g[0].r.finish_reason, "length");
    assert_int_equal(k.g[0].r.completion_tokens, 3);
    sink_free(&k);
    drift_target_close(t);
    server_stop(&s);
}

static void test_request_fields(void **state) {
    server s;
    server_start(&s, "basic.txt", NULL, NULL);
    drift_target_opts o = fast_opts();
    const char *stops[] = {"\n\n", "END"};
    for (int chat = 0; chat < 2; chat++) {
        drift_target *t = open_target(&s, chat ? "model=my%20model&api=chat" : "model=my%20model", &o);
        drift_gen_params p;
        drift_gen_params_default(&p);
        p.seed = 1000;
        p.temperature = 0.7;
        p.top_p = 0.9;
        p.max_tokens = 77;
        p.stop = stops;
        p.n_stop = 2;
        p.logprobs = 3;
        p.top_k = 0;
        drift_gen_request rq = {.index = 0, .prompt = "hello \"world\" ANSWER=1", .replicate = 5};
        sink k;
        sink_init(&k, 1);
        assert_int_equal(drift_target_generate(t, &rq, 1, &p, on_result, &k, NULL), DRIFT_OK);
        sink_free(&k);
        char *last = server_get(&s, "/last");
        json_t *j = json_loads(last, 0, NULL);
        free(last);
        assert_non_null(j);
        assert_string_equal(json_string_value(json_object_get(j, "model")), "my model");
        assert_int_equal(json_integer_value(json_object_get(j, "seed")), 1005);
        assert_true(fabs(json_number_value(json_object_get(j, "temperature")) - 0.7) < 1e-12);
        assert_true(fabs(json_number_value(json_object_get(j, "top_p")) - 0.9) < 1e-12);
        assert_int_equal(json_integer_value(json_object_get(j, "max_tokens")), 77);
        assert_null(json_object_get(j, "top_k"));
        json_t *st = json_object_get(j, "stop");
        assert_int_equal(json_array_size(st), 2);
        assert_string_equal(json_string_value(json_array_get(st, 1)), "END");
        if (chat) {
            json_t *m = json_array_get(json_object_get(j, "messages"), 0);
            assert_string_equal(json_string_value(json_object_get(m, "role")), "user");
            assert_string_equal(json_string_value(json_object_get(m, "content")), "hello \"world\" ANSWER=1");
            assert_true(json_is_true(json_object_get(j, "logprobs")));
            assert_int_equal(json_integer_value(json_object_get(j, "top_logprobs")), 3);
            assert_null(json_object_get(j, "prompt"));
        } else {
            assert_string_equal(json_string_value(json_object_get(j, "prompt")), "hello \"world\" ANSWER=1");
            assert_int_equal(json_integer_value(json_object_get(j, "logprobs")), 3);
            assert_null(json_object_get(j, "messages"));
        }
        json_decref(j);

        /* top_k is sent only when > 0; logprobs only when asked */
        p.top_k = 5;
        p.logprobs = 0;
        p.n_stop = 0;
        sink_init(&k, 1);
        assert_int_equal(drift_target_generate(t, &rq, 1, &p, on_result, &k, NULL), DRIFT_OK);
        sink_free(&k);
        last = server_get(&s, "/last");
        j = json_loads(last, 0, NULL);
        free(last);
        assert_int_equal(json_integer_value(json_object_get(j, "top_k")), 5);
        assert_null(json_object_get(j, "logprobs"));
        assert_null(json_object_get(j, "top_logprobs"));
        assert_null(json_object_get(j, "stop"));
        json_decref(j);
        drift_target_close(t);
    }
    server_stop(&s);
}

/* Checks the normalised logprobs of "The answer is 7.\n#### 7" with top 2. */
static void check_logprobs(const char *lpj) {
    assert_non_null(lpj);
    json_t *a = json_loads(lpj, 0, NULL);
    assert_non_null(a);
    assert_int_equal(json_array_size(a), 6);
    json_t *e0 = json_array_get(a, 0), *e3 = json_array_get(a, 3);
    assert_string_equal(json_string_value(json_object_get(e0, "token")), "The");
    assert_true(fabs(json_real_value(json_object_get(e0, "logprob")) + 0.01) < 1e-9);
    assert_string_equal(json_string_value(json_object_get(e3, "token")), " 7.");
    assert_true(fabs(json_real_value(json_object_get(e3, "logprob")) + 0.04) < 1e-9);
    json_t *top = json_object_get(e3, "top");
    assert_int_equal(json_array_size(top), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(top, 0), "token")), " 7.");
    assert_string_equal(json_string_value(json_object_get(json_array_get(top, 1), "token")), "<alt1>");
    assert_true(fabs(json_real_value(json_object_get(json_array_get(top, 1), "logprob")) + 1.04) < 1e-9);
    json_decref(a);
}

static void test_logprobs_both_apis(void **state) {
    server s;
    server_start(&s, "basic.txt", NULL, NULL);
    drift_target_opts o = fast_opts();
    drift_gen_params p;
    drift_gen_params_default(&p);
    p.logprobs = 2;
    for (int chat = 0; chat < 2; chat++) {
        drift_target *t = open_target(&s, chat ? "model=m&api=chat" : "model=m&api=completions", &o);
        sink k;
        gen_one(t, "ANSWER=7", &p, &k);
        assert_null(k.g[0].r.error);
        check_logprobs(k.g[0].r.logprobs_json);
        sink_free(&k);
        drift_target_close(t);
    }
    server_stop(&s);
}

/* ---------- tests: faults ---------- */

static void test_retry_after_honoured(void **state) {
    server s;
    server_start(&s, "faults.txt", NULL, NULL);
    drift_target_opts o = fast_opts();
    drift_target *t = open_target(&s, "model=m", &o);
    sink k;
    double t0 = util_now_ms();
    gen_one(t, "RATE_SECONDS ANSWER=5", NULL, &k);
    double el = util_now_ms() - t0;
    assert_null(k.g[0].r.error);
    assert_string_equal(k.g[0].r.text, "The answer is 5.\n#### 5");
    assert_int_equal(k.g[0].r.attempts, 2);
    assert_true(el >= 1000.0); /* Retry-After: 1 */
    assert_true(el < 3000.0);
    sink_free(&k);
    assert_int_equal(server_stat(&s, "statuses", "429"), 1);

    /* Retry-After as an HTTP date two seconds ahead (1 s resolution): >= 1 s */
    t0 = util_now_ms();
    gen_one(t, "RATE_DATE ANSWER=6", NULL, &k);
    el = util_now_ms() - t0;
    assert_null(k.g[0].r.error);
    assert_int_equal(k.g[0].r.attempts, 2);
    assert_true(el >= 900.0);
    assert_true(el < 4000.0);
    sink_free(&k);
    assert_int_equal(server_stat(&s, "statuses", "503"), 1);
    drift_target_close(t);

    /* backoff_max caps a Retry-After */
    server_stop(&s);
    server_start(&s, "faults.txt", NULL, NULL);
    o.backoff_max_s = 0.05;
    t = open_target(&s, "model=m", &o);
    t0 = util_now_ms();
    gen_one(t, "RATE_SECONDS ANSWER=5", NULL, &k);
    el = util_now_ms() - t0;
    assert_null(k.g[0].r.error);
    assert_true(el < 800.0);
    sink_free(&k);
    drift_target_close(t);
    server_stop(&s);
}

static void test_5xx_retried_then_ok(void **state) {
    server s;
    server_start(&s, "faults.txt", NULL, NULL);
    drift_target_opts o = fast_opts();
    drift_target *t = open_target(&s, "model=m", &o);
    const char *prompts[] = {"FLAKY500 ANSWER=1", "FLAKY502 ANSWER=2", "FLAKY503 ANSWER=3", "FLAKY504 ANSWER=4"};
    const int attempts[] = {3, 2, 2, 2};
    for (int i = 0; i < 4; i++) {
        sink k;
        gen_one(t, prompts[i], NULL, &k);
        assert_null(k.g[0].r.error);
        assert_non_null(k.g[0].r.text);
        assert_int_equal(k.g[0].r.text[14], '1' + i);
        assert_int_equal(k.g[0].r.attempts, attempts[i]);
        assert_int_equal(k.g[0].r.http_status, 200);
        sink_free(&k);
    }
    assert_int_equal(server_stat(&s, "statuses", "500"), 2);
    assert_int_equal(server_stat(&s, "statuses", "502"), 1);
    assert_int_equal(server_stat(&s, "generate", NULL), 9);
    assert_int_equal(server_stat(&s, "answers", NULL), 4);
    drift_target_close(t);
    server_stop(&s);
}

static void test_permanent_errors(void **state) {
    server s;
    server_start(&s, "faults.txt", NULL, NULL);
    drift_target_opts o = fast_opts();
    drift_target *t = open_target(&s, "model=m", &o);
    sink k;

    gen_one(t, "BROKEN ANSWER=1", NULL, &k);
    assert_null(k.g[0].r.text);
    assert_true(contains(k.g[0].r.error, "HTTP 500 after 3 attempts: "));
    assert_true(contains(k.g[0].r.error, "injected fault: HTTP 500"));
    assert_int_equal(k.g[0].r.http_status, 500);
    assert_int_equal(k.g[0].r.cause, DRIFT_FAIL_HTTP);
    assert_int_equal(k.g[0].r.attempts, 3);
    sink_free(&k);
    assert_int_equal(server_stat(&s, "statuses", "500"), 3);

    gen_one(t, "BADREQ", NULL, &k); /* 400: not retried, the body's message */
    assert_null(k.g[0].r.text);
    assert_string_equal(k.g[0].r.error, "HTTP 400: injected fault: HTTP 400");
    assert_int_equal(k.g[0].r.attempts, 1);
    assert_int_equal(k.g[0].r.cause, DRIFT_FAIL_HTTP);
    assert_int_equal(k.g[0].r.http_status, 400);
    sink_free(&k);

    gen_one(t, "ALWAYS_GARBLED", NULL, &k);
    assert_null(k.g[0].r.text);
    assert_true(contains(k.g[0].r.error, "malformed JSON reply"));
    assert_int_equal(k.g[0].r.attempts, 3);
    assert_int_equal(k.g[0].r.cause, DRIFT_FAIL_REPLY);
    sink_free(&k);

    gen_one(t, "GARBLED_ONCE ANSWER=3", NULL, &k);
    assert_null(k.g[0].r.error);
    assert_int_equal(k.g[0].r.cause, DRIFT_FAIL_NONE); /* an answer after a failed attempt */
    assert_int_equal(k.g[0].r.attempts, 2);
    sink_free(&k);

    gen_one(t, "NOCHOICES", NULL, &k);
    assert_null(k.g[0].r.text);
    assert_true(contains(k.g[0].r.error, "reply has no choices"));
    assert_int_equal(k.g[0].r.cause, DRIFT_FAIL_REPLY);
    sink_free(&k);

    gen_one(t, "HTMLPAGE", NULL, &k);
    assert_null(k.g[0].r.text);
    assert_true(contains(k.g[0].r.error, "unexpected content-type text/html"));
    assert_int_equal(k.g[0].r.attempts, 1);
    assert_int_equal(k.g[0].r.cause, DRIFT_FAIL_REPLY);
    sink_free(&k);
    assert_int_equal(server_stat(&s, "faults", "content_type"), 1);
    assert_int_equal(server_stat(&s, "faults", "empty_choices"), 3);
    assert_int_equal(server_stat(&s, "faults", "malformed"), 4);
    drift_target_close(t);
    server_stop(&s);

    /* a wrong model name: the server's 404 message, no retry */
    server_start(&s, "basic.txt", "--model", "served");
    t = open_target(&s, "model=other", &o);
    gen_one(t, "hi", NULL, &k);
    assert_true(contains(k.g[0].r.error, "HTTP 404: The model `other` does not exist."));
    assert_int_equal(k.g[0].r.attempts, 1);
    assert_int_equal(k.g[0].r.cause, DRIFT_FAIL_HTTP);
    assert_int_equal(k.g[0].r.http_status, 404);
    sink_free(&k);
    drift_target_close(t);
    server_stop(&s);
}

static void test_api_key(void **state) {
    server s;
    server_start(&s, "basic.txt", "--api-key", "sk-test-123");
    drift_target_opts o = fast_opts();
    drift_target *t = open_target(&s, "model=m", &o); /* no key */
    sink k;
    gen_one(t, "ANSWER=1", NULL, &k);
    assert_string_equal(k.g[0].r.error, "HTTP 401: Incorrect API key provided.");
    assert_int_equal(k.g[0].r.attempts, 1);
    assert_int_equal(k.g[0].r.http_status, 401);
    sink_free(&k);
    drift_target_close(t);

    char key[32];
    snprintf(key, sizeof key, "sk-test-%d", 123);
    o.api_key = key;
    t = open_target(&s, "model=m", &o);
    memset(key, 'x', sizeof key - 1); /* the target keeps its own copy */
    gen_one(t, "ANSWER=1", NULL, &k);
    assert_null(k.g[0].r.error);
    sink_free(&k);
    char *head = server_get(&s, "/last_headers");
    assert_true(contains(head, "POST /v1/completions HTTP/1.1\r\n"));
    assert_true(contains(head, "\r\nAuthorization: Bearer sk-test-123\r\n"));
    assert_true(contains(head, "\r\nContent-Type: application/json\r\n"));
    assert_false(contains(head, "Expect:"));
    free(head);
    drift_target_close(t);
    server_stop(&s);
}

static void test_timeout(void **state) {
    server s;
    server_start(&s, "faults.txt", NULL, NULL);
    drift_target_opts o = fast_opts();
    o.read_timeout_s = 0.3;
    o.max_retries = 1;
    drift_target *t = open_target(&s, "model=m", &o);
    sink k;
    double t0 = util_now_ms();
    gen_one(t, "SLOW ANSWER=1", NULL, &k);
    double el = util_now_ms() - t0;
    assert_null(k.g[0].r.text);
    assert_true(contains(k.g[0].r.error, "timeout after 0.3 s"));
    assert_int_equal(k.g[0].r.attempts, 2);
    assert_int_equal(k.g[0].r.cause, DRIFT_FAIL_TIMEOUT); /* connected: not a connection failure */
    assert_true(el >= 600.0 && el < 2500.0);
    sink_free(&k);
    /* the target still works afterwards */
    gen_one(t, "ANSWER=8", NULL, &k);
    assert_string_equal(k.g[0].r.text, "The answer is 8.\n#### 8");
    sink_free(&k);
    drift_target_close(t);
    server_stop(&s);
}

static void test_reset_mid_body(void **state) {
    server s;
    server_start(&s, "faults.txt", NULL, NULL);
    drift_target_opts o = fast_opts();
    drift_target *t = open_target(&s, "model=m", &o);
    sink k;
    gen_one(t, "RESET_ONCE ANSWER=9", NULL, &k);
    assert_null(k.g[0].r.error);
    assert_string_equal(k.g[0].r.text, "The answer is 9.\n#### 9");
    assert_int_equal(k.g[0].r.attempts, 2);
    sink_free(&k);
    gen_one(t, "RESET_ALWAYS", NULL, &k);
    assert_null(k.g[0].r.text);
    assert_true(contains(k.g[0].r.error, "transfer failed"));
    assert_true(contains(k.g[0].r.error, "(3 attempts)"));
    assert_int_equal(k.g[0].r.cause, DRIFT_FAIL_LOST);
    sink_free(&k);
    assert_int_equal(server_stat(&s, "faults", "reset"), 4);
    drift_target_close(t);
    server_stop(&s);
}

static void test_request_numbered_faults(void **state) {
    server s;
    server_start(&s, "numbered.txt", NULL, NULL);
    drift_target_opts o = fast_opts();
    o.concurrency = 1;
    drift_target *t = open_target(&s, "model=m", &o);
    drift_gen_request rq[3] = {{0, "ANSWER=10", 0}, {1, "ANSWER=11", 0}, {2, "ANSWER=12", 0}};
    sink k;
    sink_init(&k, 3);
    assert_int_equal(drift_target_generate(t, rq, 3, NULL, on_result, &k, NULL), DRIFT_OK);
    assert_string_equal(k.g[0].r.text, "#### 10");
    assert_int_equal(k.g[0].r.attempts, 1);
    assert_string_equal(k.g[1].r.text, "#### 11");
    assert_int_equal(k.g[1].r.attempts, 3); /* #2 -> 500, #3 -> 503, #4 ok */
    assert_string_equal(k.g[2].r.text, "#### 12");
    assert_int_equal(k.g[2].r.attempts, 1);
    sink_free(&k);
    assert_int_equal(server_stat(&s, "generate", NULL), 5);
    drift_target_close(t);
    server_stop(&s);
}

/* The answers-from-jsonl fixtures the e2e tests also use: two servers that
 * differ on known prompts. */
static void test_answer_file_fixtures(void **state) {
    const char *prompts[5] = {
        "Question: Tom has 3 apples and buys 4 more. How many apples does he have?\nAnswer:",
        "Question: A box holds 12 eggs. How many eggs are in 5 boxes?\nAnswer:",
        "Question: Sara reads 15 pages a day for 6 days. How many pages does she read?\nAnswer:",
        "Question: A train travels 80 km per hour for 3 hours. How far does it go?\nAnswer:",
        "Question: There are 45 birds and 18 fly away. How many birds are left?\nAnswer:",
    };
    const char *want_base[5] = {"#### 7", "#### 60", "#### 90", "#### 240", "#### 27"};
    const char *want_target[5] = {"#### 7", "#### 50", "#### 90", "It goes 240 km.", NULL};
    drift_gen_request rq[5];
    for (size_t i = 0; i < 5; i++) rq[i] = (drift_gen_request){i, prompts[i], 0};
    drift_target_opts o = fast_opts();
    for (int which = 0; which < 2; which++) {
        server s;
        server_start(&s, which ? "math5_target.txt" : "math5_baseline.txt", NULL, NULL);
        drift_target *t = open_target(&s, "model=m", &o);
        sink k;
        sink_init(&k, 5);
        assert_int_equal(drift_target_generate(t, rq, 5, NULL, on_result, &k, NULL), DRIFT_OK);
        for (int i = 0; i < 5; i++) {
            const char *want = which ? want_target[i] : want_base[i];
            if (want) {
                assert_true(contains(k.g[i].r.text, want));
            } else {
                assert_null(k.g[i].r.text);
                assert_true(contains(k.g[i].r.error, "HTTP 500 after 3 attempts"));
            }
        }
        sink_free(&k);
        drift_target_close(t);
        server_stop(&s);
    }
}

/* ---------- tests: concurrency, cancel, bad input ---------- */

static void test_concurrency_each_once(void **state) {
    server s;
    server_start(&s, "faults.txt", NULL, NULL);
    drift_target_opts o = fast_opts();
    o.concurrency = 16;
    drift_target *t = open_target(&s, "model=m", &o);
    enum { N = 300 };
    drift_gen_request *rq = calloc(N, sizeof *rq);
    char **prompts = calloc(N, sizeof *prompts);
    for (size_t i = 0; i < N; i++) {
        /* a few requests hit faults that recover, so retries interleave */
        prompts[i] = util_asprintf("%s Q%zu ANSWER=%zu", i == 17 ? "RESET_ONCE" : i == 99 ? "FLAKY503" : "", i, i * 3);
        rq[i].index = i;
        rq[i].prompt = prompts[i];
    }
    sink k;
    sink_init(&k, N);
    assert_int_equal(drift_target_generate(t, rq, N, NULL, on_result, &k, NULL), DRIFT_OK);
    assert_int_equal(k.order, N);
    for (size_t i = 0; i < N; i++) {
        assert_int_equal(k.g[i].calls, 1);
        assert_null(k.g[i].r.error);
        char want[64];
        snprintf(want, sizeof want, "#### %zu", i * 3);
        assert_true(contains(k.g[i].r.text, want));
    }
    sink_free(&k);
    assert_int_equal(server_stat(&s, "generate", NULL), N + 2);
    /* keep-alive: 16 connections, one more after the reset, plus this
     * test's own /stats requests (one connection each) */
    long conns = server_stat(&s, "connections", NULL);
    assert_true(conns >= 16 && conns <= 16 + 1 + 2);
    /* a second batch on the same target reuses the pool */
    sink_init(&k, 10);
    assert_int_equal(drift_target_generate(t, rq, 10, NULL, on_result, &k, NULL), DRIFT_OK);
    for (size_t i = 0; i < 10; i++) assert_int_equal(k.g[i].calls, 1);
    sink_free(&k);
    for (size_t i = 0; i < N; i++) free(prompts[i]);
    free(prompts);
    free(rq);
    drift_target_close(t);
    server_stop(&s);
}

static void test_cancel_and_bad_prompt(void **state) {
    server s;
    server_start(&s, "basic.txt", NULL, NULL);
    drift_target_opts o = fast_opts();
    o.concurrency = 4;
    drift_target *t = open_target(&s, "model=m", &o);
    drift_gen_request rq[20];
    for (int i = 0; i < 20; i++) rq[i] = (drift_gen_request){(size_t)i, "ANSWER=1", 0};
    sink k;
    sink_init(&k, 20);
    k.stop_after = 3;
    drift_error err = {0};
    assert_int_equal(drift_target_generate(t, rq, 20, NULL, on_result, &k, &err), DRIFT_ERR_CANCELLED);
    assert_int_equal(k.order, 3);
    sink_free(&k);

    /* an invalid UTF-8 prompt is an error result; the others are answered */
    rq[1].prompt = "bad \xff\xfe utf8";
    sink_init(&k, 3);
    assert_int_equal(drift_target_generate(t, rq, 3, NULL, on_result, &k, &err), DRIFT_OK);
    assert_null(k.g[0].r.error);
    assert_true(contains(k.g[1].r.error, "not valid UTF-8"));
    assert_null(k.g[1].r.text);
    assert_int_equal(k.g[1].r.cause, DRIFT_FAIL_REQUEST);
    assert_null(k.g[2].r.error);
    for (int i = 0; i < 3; i++) assert_int_equal(k.g[i].calls, 1);
    sink_free(&k);
    drift_target_close(t);
    server_stop(&s);
}

static void test_bad_specs(void **state) {
    const char *bad[] = {
        "http://127.0.0.1:8000/v1",                   /* no model */
        "http://127.0.0.1:8000/v1?model=",            /* empty model */
        "http://127.0.0.1:99999/v1?model=m",          /* bad port */
        "http://127.0.0.1:abc/v1?model=m",            /* bad port */
        "ftp://127.0.0.1:8000/v1?model=m",            /* unknown scheme */
        "127.0.0.1:8000/v1?model=m",                  /* no scheme */
        "http://127.0.0.1:8000/v1?model=m&foo=1",     /* unknown parameter */
        "http://127.0.0.1:8000/v1?model=m&api=json",  /* bad api */
        "http://127.0.0.1:8000/v1?model=m&model=n",   /* repeated */
        "http://127.0.0.1:8000/v1?model=m&api",       /* no value */
        "http://:8000/v1?model=m",                    /* no host */
        "",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        drift_target *t = (drift_target *)1;
        drift_error err = {0};
        drift_status st = drift_target_open(bad[i], NULL, &t, &err);
        if (st != DRIFT_ERR_INVALID) fprintf(stderr, "spec '%s' gave %d: %s\n", bad[i], st, err.msg);
        assert_int_equal(st, DRIFT_ERR_INVALID);
        assert_null(t);
        assert_true(err.msg[0] != '\0');
    }
    drift_error err = {0};
    drift_target *t = NULL;
    drift_target_open("http://127.0.0.1:8000/v1?model=m&foo=1", NULL, &t, &err);
    assert_true(contains(err.msg, "unknown parameter 'foo'"));
    drift_target_open("http://127.0.0.1:8000/v1", NULL, &t, &err);
    assert_true(contains(err.msg, "no model"));
    drift_target_open("gopher://x?model=m", NULL, &t, &err);
    assert_true(contains(err.msg, "gopher://x?model=m"));
    drift_target_opts o = fast_opts();
    o.concurrency = 0;
    assert_int_equal(drift_target_open("http://127.0.0.1:8000/v1?model=m", &o, &t, &err), DRIFT_ERR_INVALID);

    /* embedded targets go to the engine, which names the missing file */
    drift_status st = drift_target_open("embedded:/nonexistent.gguf", NULL, &t, &err);
    assert_int_not_equal(st, DRIFT_OK);
    assert_true(contains(err.msg, "/nonexistent.gguf"));

    /* good specs: path default, https, api spelled out */
    const char *good[] = {"http://127.0.0.1:8000?model=m", "https://example.invalid/v1/?model=a%2Fb&api=chat",
                          "http://localhost:1/v1?api=completions&model=m&embed_model=e"};
    for (size_t i = 0; i < 3; i++) {
        st = drift_target_open(good[i], NULL, &t, &err);
        if (st) fprintf(stderr, "%s: %s\n", good[i], err.msg);
        assert_int_equal(st, DRIFT_OK);
        assert_string_equal(drift_target_spec(t), good[i]);
        drift_target_close(t);
    }
}

static void test_unreachable(void **state) {
    /* a port that was just bound and closed: connection refused */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    socklen_t sl = sizeof sa;
    getsockname(fd, (struct sockaddr *)&sa, &sl);
    close(fd);
    char spec[128];
    snprintf(spec, sizeof spec, "http://127.0.0.1:%d/v1?model=m", ntohs(sa.sin_port));
    drift_target_opts o = fast_opts();
    drift_target *t = NULL;
    assert_int_equal(drift_target_open(spec, &o, &t, NULL), DRIFT_OK);
    drift_gen_request rq[5];
    for (int i = 0; i < 5; i++) rq[i] = (drift_gen_request){(size_t)i, "ANSWER=1", 0};
    sink k;
    sink_init(&k, 5);
    double t0 = util_now_ms();
    assert_int_equal(drift_target_generate(t, rq, 5, NULL, on_result, &k, NULL), DRIFT_OK);
    assert_true(util_now_ms() - t0 < 2000.0);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(k.g[i].calls, 1);
        assert_null(k.g[i].r.text);
        assert_true(contains(k.g[i].r.error, "connection failed"));
        assert_int_equal(k.g[i].r.attempts, 3);
        assert_int_equal(k.g[i].r.http_status, 0);
        assert_int_equal(k.g[i].r.cause, DRIFT_FAIL_CONNECT);
    }
    sink_free(&k);
    float *v = NULL;
    int dim = 0;
    drift_error err = {0};
    const char *texts[] = {"x"};
    assert_int_equal(drift_target_embed(t, texts, 1, &v, &dim, &err), DRIFT_ERR_HTTP);
    assert_null(v);
    assert_true(contains(err.msg, "connection failed"));
    drift_target_close(t);
}

static void test_embed(void **state) {
    server s;
    server_start(&s, "basic.txt", NULL, NULL);
    drift_target_opts o = fast_opts();
    drift_target *t = open_target(&s, "model=m&api=chat&embed_model=e", &o);
    enum { N = 150 }; /* more than one batch */
    const char *texts[N];
    for (int i = 0; i < N; i++) texts[i] = (i % 3 == 0) ? "a b a" : (i % 3 == 1) ? "c" : "The cat sat on the mat";
    float *v = NULL;
    int dim = 0;
    drift_error err = {0};
    assert_int_equal(drift_target_embed(t, texts, N, &v, &dim, &err), DRIFT_OK);
    assert_int_equal(dim, 16);
    for (int i = 0; i < N; i++) {
        double sum = 0, mx = 0;
        for (int j = 0; j < dim; j++) {
            sum += v[i * dim + j];
            if (v[i * dim + j] > mx) mx = v[i * dim + j];
        }
        assert_true(fabs(sum - (i % 3 == 0 ? 3 : i % 3 == 1 ? 1 : 6)) < 1e-6);
        if (i % 3 == 0) assert_true(fabs(mx - 2.0) < 1e-6);
        if (i >= 3) assert_memory_equal(v + i * dim, v + (i - 3) * dim, (size_t)dim * sizeof *v);
    }
    free(v);
    assert_int_equal(server_stat(&s, "embeddings", NULL), 3);
    char *last_model = NULL;
    (void)last_model;
    /* generation still works on the same target after embedding */
    sink k;
    gen_one(t, "ANSWER=2", NULL, &k);
    assert_string_equal(k.g[0].r.text, "The answer is 2.\n#### 2");
    sink_free(&k);
    drift_target_close(t);
    server_stop(&s);
}

/* ---------- tests: cancellation through opts.cancel ---------- */

/* A cancel hook that says stop once the clock passes at_ms. */
typedef struct cancel_clock {
    double at_ms;
    long calls;
} cancel_clock;

static int cancel_after(void *user) {
    cancel_clock *c = user;
    c->calls++;
    return util_now_ms() >= c->at_ms;
}

/* Writes a fake-server script to a temporary file; returns its path (static). */
static const char *temp_script(const char *text) {
    static char path[64];
    snprintf(path, sizeof path, "/tmp/test_http_script.XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    size_t n = strlen(text);
    assert_int_equal(write(fd, text, n), (ssize_t)n);
    close(fd);
    return path;
}

static void test_cancel_in_flight(void **state) {
    server s;
    const char *script = temp_script("default | echo\nfault | HANG | sleep | seconds=600\n");
    server_start(&s, script, NULL, NULL);
    unlink(script);
    cancel_clock cc = {util_now_ms() + 1e12, 0};
    drift_target_opts o = fast_opts();
    o.read_timeout_s = 120; /* the hanging requests would outlive the test: only the hook can end them */
    o.concurrency = 4;
    o.cancel = cancel_after;
    o.cancel_user = &cc;
    drift_target *t = open_target(&s, "model=m", &o);
    drift_gen_request rq[4] = {
        {0, "ANSWER=1", 0}, {1, "HANG ANSWER=2", 0}, {2, "ANSWER=3", 0}, {3, "HANG ANSWER=4", 0}};
    sink k;
    sink_init(&k, 4);
    drift_error err = {0};
    double t0 = util_now_ms();
    cc.at_ms = t0 + 400;
    assert_int_equal(drift_target_generate(t, rq, 4, NULL, on_result, &k, &err), DRIFT_ERR_CANCELLED);
    double el = util_now_ms() - t0;
    assert_true(el >= 400 && el < 1200);
    assert_true(contains(err.msg, "cancelled"));
    assert_true(cc.calls > 0);
    /* what was answered came back; the hanging ones got no callback at all
     * (neither an answer nor an error) */
    assert_int_equal(k.g[0].calls, 1);
    assert_string_equal(k.g[0].r.text, "The answer is 1.\n#### 1");
    assert_int_equal(k.g[2].calls, 1);
    assert_string_equal(k.g[2].r.text, "The answer is 3.\n#### 3");
    assert_int_equal(k.g[1].calls, 0);
    assert_int_equal(k.g[3].calls, 0);
    sink_free(&k);
    assert_int_equal(server_stat(&s, "generate", NULL), 4);

    /* the target still works once the hook says go on */
    cc.at_ms = util_now_ms() + 1e12;
    gen_one(t, "ANSWER=8", NULL, &k);
    assert_string_equal(k.g[0].r.text, "The answer is 8.\n#### 8");
    sink_free(&k);
    drift_target_close(t);
    server_stop(&s);
}

static void test_cancel_in_backoff(void **state) {
    server s;
    const char *script = temp_script("default | echo\nfault | BUSY | 503 | retry_after=30\n");
    server_start(&s, script, NULL, NULL);
    unlink(script);
    cancel_clock cc = {util_now_ms() + 1e12, 0};
    drift_target_opts o = fast_opts();
    o.backoff_max_s = 60; /* Retry-After: 30 is honoured in full */
    o.max_retries = 4;
    o.cancel = cancel_after;
    o.cancel_user = &cc;
    drift_target *t = open_target(&s, "model=m", &o);
    drift_gen_request rq[2] = {{0, "BUSY ANSWER=1", 0}, {1, "ANSWER=2", 0}};
    sink k;
    sink_init(&k, 2);
    drift_error err = {0};
    double t0 = util_now_ms();
    cc.at_ms = t0 + 400;
    assert_int_equal(drift_target_generate(t, rq, 2, NULL, on_result, &k, &err), DRIFT_ERR_CANCELLED);
    double el = util_now_ms() - t0;
    assert_true(el >= 400 && el < 1200);
    assert_int_equal(k.g[0].calls, 0); /* waiting for its retry: no outcome, not an error */
    assert_int_equal(k.g[1].calls, 1);
    assert_null(k.g[1].r.error);
    sink_free(&k);
    assert_int_equal(server_stat(&s, "statuses", "503"), 1); /* the retry was never sent */

    /* a hook that says stop before anything starts: no request at all */
    cc.at_ms = 0;
    sink_init(&k, 2);
    assert_int_equal(drift_target_generate(t, rq + 1, 1, NULL, on_result, &k, &err), DRIFT_ERR_CANCELLED);
    assert_int_equal(k.order, 0);
    sink_free(&k);
    assert_int_equal(server_stat(&s, "generate", NULL), 2);
    float *v = NULL;
    int dim = 0;
    const char *texts[1] = {"x"};
    assert_int_equal(drift_target_embed(t, texts, 1, &v, &dim, &err), DRIFT_ERR_CANCELLED);
    assert_null(v);
    assert_int_equal(server_stat(&s, "embeddings", NULL), 0);
    drift_target_close(t);
    server_stop(&s);
}

/* A TCP peer on 127.0.0.1 that completes connections (the kernel's backlog)
 * but never reads or answers. Returns the listening fd; sets *port. */
static int silent_peer(int *port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(fd, 16), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

static void test_cancel_silent_peer_and_embed(void **state) {
    int port = 0;
    int fd = silent_peer(&port);
    char spec[128];
    snprintf(spec, sizeof spec, "http://127.0.0.1:%d/v1?model=m&embed_model=e", port);
    cancel_clock cc = {0, 0};
    drift_target_opts o = fast_opts();
    o.read_timeout_s = 120;
    o.cancel = cancel_after;
    o.cancel_user = &cc;
    drift_target *t = NULL;
    drift_error err = {0};
    assert_int_equal(drift_target_open(spec, &o, &t, &err), DRIFT_OK);

    /* generate: the request waits for a reply that never comes */
    drift_gen_request rq = {0, "ANSWER=1", 0};
    sink k;
    sink_init(&k, 1);
    double t0 = util_now_ms();
    cc.at_ms = t0 + 300;
    assert_int_equal(drift_target_generate(t, &rq, 1, NULL, on_result, &k, &err), DRIFT_ERR_CANCELLED);
    double el = util_now_ms() - t0;
    assert_true(el >= 300 && el < 1100);
    assert_int_equal(k.order, 0);
    sink_free(&k);

    /* embed is a blocking transfer: libcurl's progress callback ends it (it
     * runs about once a second while nothing moves) */
    float *v = NULL;
    int dim = 0;
    const char *texts[2] = {"a", "b"};
    t0 = util_now_ms();
    cc.at_ms = t0 + 300;
    memset(&err, 0, sizeof err);
    assert_int_equal(drift_target_embed(t, texts, 2, &v, &dim, &err), DRIFT_ERR_CANCELLED);
    el = util_now_ms() - t0;
    assert_true(el >= 300 && el < 2000);
    assert_null(v);
    assert_true(contains(err.msg, "cancelled"));
    drift_target_close(t);
    close(fd);
}

static void test_cancel_embed_backoff(void **state) {
    /* a peer that accepts and hangs up at once: every embed attempt fails
     * (empty reply) and is retried after a long back-off */
    int port = 0;
    int fd = silent_peer(&port);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(30);
        for (;;) {
            int c = accept(fd, NULL, NULL);
            if (c >= 0) close(c);
        }
    }
    track_pid(pid, 1);
    close(fd);
    char spec[128];
    snprintf(spec, sizeof spec, "http://127.0.0.1:%d/v1?model=m", port);
    cancel_clock cc = {0, 0};
    drift_target_opts o = fast_opts();
    o.backoff_base_s = 20;
    o.backoff_max_s = 20;
    o.max_retries = 3;
    o.cancel = cancel_after;
    o.cancel_user = &cc;
    drift_target *t = NULL;
    drift_error err = {0};
    assert_int_equal(drift_target_open(spec, &o, &t, &err), DRIFT_OK);
    float *v = NULL;
    int dim = 0;
    const char *texts[1] = {"a"};
    /* full jitter: the delays are uniform in [0, 20] s, so the three retries
     * all fall within 300 ms with a chance of about 1e-6 */
    double t0 = util_now_ms();
    cc.at_ms = t0 + 300;
    assert_int_equal(drift_target_embed(t, texts, 1, &v, &dim, &err), DRIFT_ERR_CANCELLED);
    double el = util_now_ms() - t0;
    assert_true(el >= 300 && el < 1000);
    assert_null(v);
    drift_target_close(t);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    track_pid(pid, 0);
}

/* The embedded engine never looks at the hook: target.c stops it at the first
 * outcome after a cancel. */
static int cancel_after_two(void *user) { return ((sink *)user)->order >= 2; }

static void test_cancel_embedded_relay(void **state) {
    (void)state;
    char spec[1024];
    snprintf(spec, sizeof spec, "embedded:%s/tests/data/models/tiny-qwen2-f16.gguf?profile=cpu-f32",
             env_or("DRIFT_SOURCE", DRIFT_SOURCE_DIR));
    sink k;
    sink_init(&k, 6);
    drift_target_opts o;
    drift_target_opts_default(&o);
    o.concurrency = 1; /* one prompt per batch: an outcome after each */
    o.cancel = cancel_after_two;
    o.cancel_user = &k;
    drift_target *t = NULL;
    drift_error err = {0};
    drift_status st = drift_target_open(spec, &o, &t, &err);
    if (st) fprintf(stderr, "open %s: %s\n", spec, err.msg);
    assert_int_equal(st, DRIFT_OK);
    drift_gen_request rq[6];
    for (int i = 0; i < 6; i++) rq[i] = (drift_gen_request){(size_t)i, "Once upon a time", 0};
    drift_gen_params p;
    drift_gen_params_default(&p);
    p.max_tokens = 4;
    assert_int_equal(drift_target_generate(t, rq, 6, &p, on_result, &k, &err), DRIFT_ERR_CANCELLED);
    assert_int_equal(k.order, 2);
    for (int i = 0; i < 6; i++) assert_int_equal(k.g[i].calls, i < 2 ? 1 : 0);
    sink_free(&k);
    drift_target_close(t);
}

/* ---------- tests: the parser alone ---------- */

/* libcurl's codes -> causes, for the ones no local server can provoke
 * (DNS, TLS, a connect timeout), and the names the CLI prints. */
static void test_transport_causes(void **state) {
    (void)state;
    assert_int_equal(eng_http_transport_cause(CURLE_OK, 1), DRIFT_FAIL_NONE);
    assert_int_equal(eng_http_transport_cause(CURLE_COULDNT_CONNECT, 0), DRIFT_FAIL_CONNECT);
    assert_int_equal(eng_http_transport_cause(CURLE_COULDNT_RESOLVE_HOST, 0), DRIFT_FAIL_CONNECT);
    assert_int_equal(eng_http_transport_cause(CURLE_OPERATION_TIMEDOUT, 0), DRIFT_FAIL_CONNECT);
    assert_int_equal(eng_http_transport_cause(CURLE_OPERATION_TIMEDOUT, 1), DRIFT_FAIL_TIMEOUT);
    assert_int_equal(eng_http_transport_cause(CURLE_SSL_CONNECT_ERROR, 1), DRIFT_FAIL_TLS);
    assert_int_equal(eng_http_transport_cause(CURLE_PEER_FAILED_VERIFICATION, 1), DRIFT_FAIL_TLS);
    assert_int_equal(eng_http_transport_cause(CURLE_GOT_NOTHING, 1), DRIFT_FAIL_LOST);
    assert_int_equal(eng_http_transport_cause(CURLE_RECV_ERROR, 1), DRIFT_FAIL_LOST);
    assert_int_equal(eng_http_transport_cause(CURLE_WEIRD_SERVER_REPLY, 1), DRIFT_FAIL_REPLY);
    assert_int_equal(eng_http_transport_cause(CURLE_UNSUPPORTED_PROTOCOL, 0), DRIFT_FAIL_OTHER);
    assert_string_equal(drift_fail_cause_name(DRIFT_FAIL_CONNECT), "could not connect");
    assert_string_equal(drift_fail_cause_name(DRIFT_FAIL_HTTP), "HTTP");
    assert_string_equal(drift_fail_cause_name(DRIFT_FAIL_REPLY), "bad reply");
    assert_string_equal(drift_fail_cause_name(DRIFT_FAIL_COUNT), "unknown cause");
    for (int c = 0; c < DRIFT_FAIL_COUNT; c++) assert_non_null(drift_fail_cause_name((drift_fail_cause)c));
}

static void test_parse_reply_shapes(void **state) {
    drift_answer r = {0};
    drift_error err = {0};
    const char *c1 = "{\"choices\":[{\"text\":\" 42\",\"finish_reason\":\"length\",\"logprobs\":{\"tokens\":[\" 4\",\"2\"],"
                     "\"token_logprobs\":[null,-0.5],\"top_logprobs\":[null,{\"3\":-2.0,\"2\":-0.5,\"x\":-1}]}}],"
                     "\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":2}}";
    assert_int_equal(eng_http_parse_reply(DRIFT_API_COMPLETIONS, c1, strlen(c1), &r, &err), DRIFT_OK);
    assert_string_equal(r.text, " 42");
    assert_string_equal(r.finish_reason, "length");
    assert_int_equal(r.prompt_tokens, 10);
    assert_int_equal(r.completion_tokens, 2);
    assert_string_equal(r.logprobs_json,
                        "[{\"token\":\" 4\",\"logprob\":null,\"top\":[]},{\"token\":\"2\",\"logprob\":-0.5,\"top\":"
                        "[{\"token\":\"2\",\"logprob\":-0.5},{\"token\":\"x\",\"logprob\":-1.0},{\"token\":\"3\","
                        "\"logprob\":-2.0}]}]");
    drift_answer_clear(&r);

    const char *c2 = "{\"choices\":[{\"message\":{\"role\":\"assistant\",\"content\":null}}]}";
    assert_int_equal(eng_http_parse_reply(DRIFT_API_CHAT, c2, strlen(c2), &r, &err), DRIFT_OK);
    assert_string_equal(r.text, "");
    assert_null(r.finish_reason);
    assert_int_equal(r.prompt_tokens, -1);
    drift_answer_clear(&r);

    const struct {
        const char *body;
        const char *msg;
    } bad[] = {
        {"", "empty reply"},
        {"{\"choices\":[", "malformed JSON reply"},
        {"[1]", "not an object"},
        {"{\"choices\":[]}", "reply has no choices"},
        {"{\"error\":{\"message\":\"overloaded\"}}", "overloaded"},
        {"{\"choices\":[{\"text\":5}]}", "not a string"},
        {"{\"choices\":[{\"index\":0}]}", "has no text"},
        {"{\"choices\":[{\"text\":\"a\",\"logprobs\":{\"tokens\":[\"a\"],\"token_logprobs\":[]}}]}", "differ"},
        {"{\"choices\":[{\"message\":{\"content\":\"a\"},\"logprobs\":{\"content\":[{\"token\":1}]}}]}", "content[0]"},
        {"{\"choices\":[{\"text\":\"a\",\"logprobs\":{\"tokens\":[\"a\"],\"token_logprobs\":[-1],"
         "\"top_logprobs\":[{\"a\":\"x\"}]}}]}",
         "logprobs: top_logprobs[0] has a non-numeric value"},
        {"{\"choices\":[{\"message\":{\"content\":\"a\"},\"logprobs\":{\"content\":[{\"token\":\"a\",\"logprob\":-1,"
         "\"top_logprobs\":[{\"token\":\"a\"}]}]}}]}",
         "logprobs: content[0].top_logprobs[] is not {token, logprob}"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        drift_api api = strstr(bad[i].body, "message") ? DRIFT_API_CHAT : DRIFT_API_COMPLETIONS;
        drift_status st = eng_http_parse_reply(api, bad[i].body, strlen(bad[i].body), &r, &err);
        if (st == DRIFT_OK || !strstr(err.msg, bad[i].msg))
            fprintf(stderr, "body %zu: st %d msg '%s' (want '%s')\n", i, st, err.msg, bad[i].msg);
        assert_int_equal(st, DRIFT_ERR_PARSE);
        assert_true(contains(err.msg, bad[i].msg));
        assert_null(r.text);
        assert_null(r.logprobs_json);
    }

    char msg[256];
    eng_http_error_message("{\"detail\":\"Not Found\"}", 22, msg, sizeof msg);
    assert_string_equal(msg, "Not Found");
    eng_http_error_message("<html>\n<b>bad gateway</b>", 25, msg, sizeof msg);
    assert_string_equal(msg, "<html> <b>bad gateway</b>");
}

/* ---------- credentials per target ---------- */

#define MARKER "SECRETMARK"

static drift_status try_open(const char *spec, const drift_target_opts *o, drift_error *err) {
    drift_target *t = NULL;
    drift_status st = drift_target_open(spec, o, &t, err);
    drift_target_close(t);
    return st;
}

static void test_key_local_http(void **state) {
    (void)state;
    server s;
    server_start(&s, "basic.txt", "--api-key", "sk-local-1");
    setenv("DRIFT_TEST_KEY", "sk-local-1", 1);
    drift_target_opts o = fast_opts();
    /* a key named by the target, to 127.0.0.1 */
    drift_target *t = open_target(&s, "model=m&api_key_env=DRIFT_TEST_KEY", &o);
    sink k;
    gen_one(t, "ANSWER=1", NULL, &k);
    assert_null(k.g[0].r.error);
    sink_free(&k);
    drift_target_close(t);
    char *head = server_get(&s, "/last_headers");
    assert_true(contains(head, "\r\nAuthorization: Bearer sk-local-1\r\n"));
    free(head);
    /* the default variable's key, to localhost */
    setenv("DRIFT_TEST_DEFAULT_KEY", "sk-local-1", 1);
    o.default_key_env = "DRIFT_TEST_DEFAULT_KEY";
    char spec[256];
    snprintf(spec, sizeof spec, "http://localhost:%d/v1?model=m", s.port);
    drift_error err = {0};
    assert_int_equal(drift_target_open(spec, &o, &t, &err), DRIFT_OK);
    gen_one(t, "ANSWER=1", NULL, &k);
    assert_null(k.g[0].r.error);
    sink_free(&k);
    drift_target_close(t);
    o.default_key_env = NULL;
    /* a variable that is not set, a key in the spec, a key with a line break */
    unsetenv("DRIFT_TEST_UNSET");
    snprintf(spec, sizeof spec, "%s?model=m&api_key_env=DRIFT_TEST_UNSET", s.url);
    assert_int_equal(try_open(spec, &o, &err), DRIFT_ERR_INVALID);
    assert_true(contains(err.msg, "$DRIFT_TEST_UNSET is not set"));
    snprintf(spec, sizeof spec, "%s?model=m&api_key=sk-" MARKER, s.url);
    assert_int_equal(try_open(spec, &o, &err), DRIFT_ERR_INVALID);
    assert_true(contains(err.msg, "api_key_env=NAME"));
    assert_false(contains(err.msg, MARKER));
    snprintf(spec, sizeof spec, "%s?model=m&api_key_env=no-such-name", s.url);
    assert_int_equal(try_open(spec, &o, &err), DRIFT_ERR_INVALID);
    /* the key given as api_key_env by mistake: refused unseen, even when
     * another parameter is wrong first, or when it could be a name */
    snprintf(spec, sizeof spec, "%s?model=m&foo=1&api_key_env=sk-" MARKER, s.url);
    assert_int_equal(try_open(spec, &o, &err), DRIFT_ERR_INVALID);
    assert_true(contains(err.msg, "not the key itself"));
    assert_false(contains(err.msg, MARKER));
    snprintf(spec, sizeof spec, "%s?model=m&api_key_env=abc" MARKER, s.url);
    assert_int_equal(try_open(spec, &o, &err), DRIFT_ERR_INVALID);
    assert_true(contains(err.msg, "is not set"));
    assert_false(contains(err.msg, MARKER));
    setenv("DRIFT_TEST_BAD_KEY", "sk-1\r\nX-Injected: 1", 1);
    snprintf(spec, sizeof spec, "%s?model=m&api_key_env=DRIFT_TEST_BAD_KEY", s.url);
    assert_int_equal(try_open(spec, &o, &err), DRIFT_ERR_INVALID);
    assert_true(contains(err.msg, "line break"));
    server_stop(&s);
}

static void test_key_refused_nonlocal(void **state) {
    (void)state;
    setenv("DRIFT_TEST_KEY", "sk-" MARKER, 1);
    setenv("DRIFT_TEST_DEFAULT_KEY", "sk-default-" MARKER, 1);
    drift_target_opts o = fast_opts();
    o.connect_timeout_s = 0.5;
    o.max_retries = 0;
    drift_error err = {0};
    /* refused at open: named key, URL password, the caller's key; to
     * addresses and names that are not this machine */
    static const char *const refused[] = {
        "http://192.0.2.1:9/v1?model=m&api_key_env=DRIFT_TEST_KEY",
        "http://bob:" MARKER "@192.0.2.1:9/v1?model=m",
        "http://bob:p%40ss%2F" MARKER "@192.0.2.1:9/v1?model=m",
        "http://192.0.2.1:9/v1?model=m&api_key_env=DRIFT_TEST_KEY&allow_insecure_key=0",
        "http://localhost.example:9/v1?model=m&api_key_env=DRIFT_TEST_KEY",
        "http://127.0.0.1.nip.io:9/v1?model=m&api_key_env=DRIFT_TEST_KEY",
        "http://[::ffff:10.0.0.1]:9/v1?model=m&api_key_env=DRIFT_TEST_KEY",
        "http://[fd00::1]:9/v1?model=m&api_key_env=DRIFT_TEST_KEY",
        "http://10.0.0.1:9/v1?model=m&api_key_env=DRIFT_TEST_KEY",
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        double t0 = util_now_ms();
        drift_status st = try_open(refused[i], &o, &err);
        double ms = util_now_ms() - t0;
        if (st != DRIFT_ERR_INVALID || !contains(err.msg, "allow_insecure_key=1") || contains(err.msg, MARKER) ||
            !contains(err.msg, "target 'http://"))
            fail_msg("%s: %d %s", refused[i], st, err.msg);
        assert_true(ms < 250); /* no connection was tried: well under the connect timeout */
    }
    o.api_key = "sk-caller-" MARKER;
    assert_int_equal(try_open("http://192.0.2.1:9/v1?model=m", &o, &err), DRIFT_ERR_INVALID);
    assert_false(contains(err.msg, MARKER));
    assert_true(contains(err.msg, "192.0.2.1"));
    o.api_key = NULL;
    /* allowed: https anywhere, this machine by name or address, the option */
    static const char *const allowed[] = {
        "https://192.0.2.1:9/v1?model=m&api_key_env=DRIFT_TEST_KEY",
        "http://127.8.9.10:9/v1?model=m&api_key_env=DRIFT_TEST_KEY",
        "http://LOCALHOST:9/v1?model=m&api_key_env=DRIFT_TEST_KEY",
        "http://[::1]:9/v1?model=m&api_key_env=DRIFT_TEST_KEY",
        "http://[::ffff:127.0.0.1]:9/v1?model=m&api_key_env=DRIFT_TEST_KEY",
        "http://bob:pw@127.0.0.1:9/v1?model=m",
        "http://192.0.2.1:9/v1?model=m&api_key_env=DRIFT_TEST_KEY&allow_insecure_key=1",
        "http://bob:pw@192.0.2.1:9/v1?model=m&allow_insecure_key=1",
    };
    for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; i++)
        if (try_open(allowed[i], &o, &err)) fail_msg("%s: %s", allowed[i], err.msg);
    o.allow_insecure_key = 1; /* the option as the caller's */
    assert_int_equal(try_open(refused[0], &o, &err), DRIFT_OK);
    o.allow_insecure_key = 0;
    /* the default variable's key: not refused, not sent (see the next test) */
    o.default_key_env = "DRIFT_TEST_DEFAULT_KEY";
    assert_int_equal(try_open("http://192.0.2.1:9/v1?model=m", &o, &err), DRIFT_OK);
    /* with the option, the request is made: it fails on the network, not at open */
    drift_target *t = NULL;
    assert_int_equal(drift_target_open(allowed[6], &o, &t, &err), DRIFT_OK);
    sink k;
    gen_one(t, "ANSWER=1", NULL, &k);
    assert_non_null(k.g[0].r.error);
    assert_false(contains(k.g[0].r.error, MARKER));
    sink_free(&k);
    drift_target_close(t);
}

/* A listener on this host's own non-loopback IPv4 address: a "non-local"
 * host by the rule (no lookup), which we can watch. It answers every POST
 * with a completion and writes each request's head, then a NUL, to a pipe. */
typedef struct peer {
    pid_t pid;
    int rfd;
    char url[128];
} peer;

static int own_ipv4(char *out, size_t cap) {
    struct ifaddrs *ifs = NULL, *i;
    int found = 0;
    if (getifaddrs(&ifs)) return 0;
    for (i = ifs; i && !found; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
        struct in_addr a = ((struct sockaddr_in *)i->ifa_addr)->sin_addr;
        if ((ntohl(a.s_addr) >> 24) == 127) continue;
        found = inet_ntop(AF_INET, &a, out, (socklen_t)cap) != NULL;
    }
    freeifaddrs(ifs);
    return found;
}

static void peer_serve(int lfd, int wfd) {
    static const char body[] = "{\"id\":\"c\",\"object\":\"text_completion\",\"created\":0,\"model\":\"m\",\"choices\":"
                               "[{\"index\":0,\"text\":\"ANSWER=1\",\"finish_reason\":\"stop\",\"logprobs\":null}],"
                               "\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1,\"total_tokens\":2}}";
    for (;;) {
        struct pollfd pf = {lfd, POLLIN, 0};
        if (poll(&pf, 1, 20000) <= 0) _exit(0);
        int c = accept(lfd, NULL, NULL);
        if (c < 0) continue;
        char req[16384];
        size_t n = 0;
        char *end = NULL;
        while (n < sizeof req - 1 && !end) {
            ssize_t r = read(c, req + n, sizeof req - 1 - n);
            if (r <= 0) break;
            n += (size_t)r;
            req[n] = '\0';
            end = strstr(req, "\r\n\r\n");
        }
        if (end) {
            size_t head = (size_t)(end + 4 - req);
            const char *cl = strcasestr(req, "\r\nContent-Length:");
            size_t want = cl && cl < end ? (size_t)strtoul(cl + 17, NULL, 10) : 0;
            while (n - head < want && n < sizeof req - 1) {
                ssize_t r = read(c, req + n, sizeof req - 1 - n);
                if (r <= 0) break;
                n += (size_t)r;
            }
            if (write(wfd, req, head) < 0 || write(wfd, "", 1) < 0) _exit(1);
            char out[1024];
            int m = snprintf(out, sizeof out,
                             "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                             "Connection: close\r\n\r\n%s",
                             strlen(body), body);
            if (write(c, out, (size_t)m) < 0) _exit(1);
        }
        close(c);
    }
}

static int peer_start(peer *p) {
    char ip[64];
    if (!own_ipv4(ip, sizeof ip)) return -1;
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    inet_pton(AF_INET, ip, &sa.sin_addr);
    socklen_t sl = sizeof sa;
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof sa) || listen(lfd, 16) ||
        getsockname(lfd, (struct sockaddr *)&sa, &sl))
        return -1;
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        peer_serve(lfd, fds[1]);
        _exit(0);
    }
    close(fds[1]);
    close(lfd);
    track_pid(pid, 1);
    p->pid = pid;
    p->rfd = fds[0];
    snprintf(p->url, sizeof p->url, "http://%s:%d/v1", ip, ntohs(sa.sin_port));
    return 0;
}

/* The head of the next request the peer saw (malloc'd), or NULL when none
 * came within wait_ms. */
static char *peer_next(peer *p, int wait_ms) {
    util_buf b = {0};
    for (;;) {
        struct pollfd pf = {p->rfd, POLLIN, 0};
        if (poll(&pf, 1, wait_ms) <= 0) break;
        char c;
        if (read(p->rfd, &c, 1) != 1) break;
        if (c == '\0') return buf_steal(&b);
        buf_append(&b, &c, 1);
    }
    buf_free(&b);
    return NULL;
}

static void test_key_reachable_nonlocal(void **state) {
    (void)state;
    peer p;
    if (peer_start(&p)) {
        fprintf(stderr, "SKIP: no non-loopback IPv4 address here to listen on\n");
        return;
    }
    unsetenv("http_proxy"), unsetenv("HTTP_PROXY"), unsetenv("all_proxy"), unsetenv("ALL_PROXY");
    setenv("DRIFT_TEST_KEY", "sk-named-" MARKER, 1);
    setenv("DRIFT_TEST_DEFAULT_KEY", "sk-default-" MARKER, 1);
    drift_target_opts o = fast_opts();
    o.default_key_env = "DRIFT_TEST_DEFAULT_KEY";
    drift_error err = {0};
    char spec[256];
    /* the default variable's key: the request goes, without it */
    snprintf(spec, sizeof spec, "%s?model=m", p.url);
    drift_target *t = NULL;
    assert_int_equal(drift_target_open(spec, &o, &t, &err), DRIFT_OK);
    sink k;
    gen_one(t, "ANSWER=1", NULL, &k);
    assert_null(k.g[0].r.error);
    sink_free(&k);
    drift_target_close(t);
    char *head = peer_next(&p, 5000);
    assert_non_null(head);
    assert_true(contains(head, "POST /v1/completions"));
    assert_false(contains(head, "Authorization"));
    assert_false(contains(head, MARKER));
    free(head);
    /* a named key: refused, and nothing connected */
    snprintf(spec, sizeof spec, "%s?model=m&api_key_env=DRIFT_TEST_KEY", p.url);
    assert_int_equal(try_open(spec, &o, &err), DRIFT_ERR_INVALID);
    assert_true(contains(err.msg, "allow_insecure_key=1"));
    head = peer_next(&p, 300);
    assert_null(head);
    /* with the option: sent */
    snprintf(spec, sizeof spec, "%s?model=m&api_key_env=DRIFT_TEST_KEY&allow_insecure_key=1", p.url);
    assert_int_equal(drift_target_open(spec, &o, &t, &err), DRIFT_OK);
    gen_one(t, "ANSWER=1", NULL, &k);
    assert_null(k.g[0].r.error);
    sink_free(&k);
    drift_target_close(t);
    head = peer_next(&p, 5000);
    assert_non_null(head);
    assert_true(contains(head, "\r\nAuthorization: Bearer sk-named-" MARKER "\r\n"));
    free(head);
    kill(p.pid, SIGKILL);
    waitpid(p.pid, NULL, 0);
    track_pid(p.pid, 0);
    close(p.rfd);
}

/* ---------- issue 34: a reply past the target's cap is never parsed ---------- */

/* eng_http_body_append keeps at most the cap, never allocates past it, and
 * says when a chunk would pass it; max_reply_mb is checked. */
static void test_reply_cap_bound(void **state) {
    (void)state;
    util_buf b = {0};
    char chunk[300];
    memset(chunk, 'x', sizeof chunk);
    for (int i = 0; i < 3; i++) assert_int_equal(eng_http_body_append(&b, chunk, sizeof chunk, 1000), 0);
    assert_int_equal(eng_http_body_append(&b, chunk, sizeof chunk, 1000), 1); /* 1200 > 1000: refused whole */
    assert_int_equal(b.len, 900);
    assert_int_equal(eng_http_body_append(&b, chunk, 100, 1000), 0); /* exactly the cap */
    assert_int_equal(b.len, 1000);
    assert_true(b.cap <= 1001);
    assert_int_equal(b.data[1000], '\0');
    assert_int_equal(eng_http_body_append(&b, chunk, 1, 1000), 1);
    assert_int_equal(eng_http_body_append(&b, chunk, SIZE_MAX, 1000), 1); /* no overflow */
    buf_free(&b);
    size_t cap = 0;
    drift_error err = {0};
    assert_int_equal(eng_http_reply_param("T", "max_reply_mb", 12, "2", &cap, &err), 1);
    assert_int_equal(cap, (size_t)2 << 20);
    static const char *const bad[] = {"0", "-1", "1.5", "", "x", "4097", "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(eng_http_reply_param("T", "max_reply_mb", 12, bad[i], &cap, &err), -1);
        assert_non_null(strstr(err.msg, "max_reply_mb="));
    }
    assert_int_equal(eng_http_reply_param("T", "model", 5, "m", &cap, &err), 0);
}

/* Peak resident memory of this process, KiB. */
static long peak_rss_kb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmHWM:", 6)) kb = strtol(line + 6, NULL, 10);
    if (f) fclose(f);
    return kb;
}

/* A server (a child) that answers every request with 200 and a JSON body of
 * `bytes` bytes, streamed from a small chunk. */
static pid_t huge_reply_server(int *port, size_t bytes) {
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(ls >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    assert_int_equal(bind(ls, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(ls, 4), 0);
    assert_int_equal(getsockname(ls, (struct sockaddr *)&a, &al), 0);
    *port = ntohs(a.sin_port);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGPIPE, SIG_IGN);
        alarm(30);
        for (;;) {
            int c = accept(ls, NULL, NULL);
            if (c < 0) _exit(0);
            char req[8192];
            size_t have = 0;
            while (have < sizeof req - 1) { /* the headers and the short body: read what comes */
                ssize_t r = read(c, req + have, sizeof req - 1 - have);
                if (r <= 0) break;
                have += (size_t)r;
                req[have] = '\0';
                char *hend = strstr(req, "\r\n\r\n");
                const char *cl = strcasestr(req, "Content-Length:");
                if (hend && (!cl || have >= (size_t)(hend + 4 - req) + (size_t)strtol(cl + 15, NULL, 10))) break;
            }
            char head[256];
            int hn = snprintf(head, sizeof head,
                              "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
                              bytes);
            if (write(c, head, (size_t)hn) != hn) _exit(0);
            static char chunk[65536];
            memset(chunk, 'a', sizeof chunk);
            const char *open = "{\"choices\":[{\"text\":\"";
            size_t sent = strlen(open);
            if (write(c, open, sent) != (ssize_t)sent) sent = bytes;
            while (sent < bytes) {
                size_t n = bytes - sent < sizeof chunk ? bytes - sent : sizeof chunk;
                ssize_t w = write(c, chunk, n);
                if (w <= 0) break; /* the client hung up: over its cap */
                sent += (size_t)w;
            }
            close(c);
        }
    }
    close(ls);
    track_pid(pid, 1);
    return pid;
}

/* A 128 MiB reply to a target capped at 1 MiB: the request fails at once
 * ("reply too large", a bad reply, not retried), nothing of it is parsed,
 * and the client's peak memory grows by far less than the reply. */
static void test_reply_too_large(void **state) {
    (void)state;
    int port = 0;
    pid_t pid = huge_reply_server(&port, (size_t)128 << 20);
    char spec[256];
    snprintf(spec, sizeof spec, "http://127.0.0.1:%d/v1?model=m&max_reply_mb=1", port);
    drift_target_opts o = fast_opts();
    drift_target *t = NULL;
    drift_error err = {0};
    assert_int_equal(drift_target_open(spec, &o, &t, &err), DRIFT_OK);
    long before = peak_rss_kb();
    sink k;
    gen_one(t, "hello", NULL, &k);
    long after = peak_rss_kb();
    assert_true(before > 0 && after - before < 48 * 1024); /* the reply is 128 MiB */
    drift_answer *r = &k.g[0].r;
    assert_null(r->text);
    assert_true(contains(r->error, "reply too large: over 1 MiB"));
    assert_int_equal(r->cause, DRIFT_FAIL_REPLY);
    assert_int_equal(r->attempts, 1);
    sink_free(&k);
    drift_target_close(t);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    track_pid(pid, 0);
    /* and the default cap: a bad value is refused at open */
    snprintf(spec, sizeof spec, "http://127.0.0.1:%d/v1?model=m&max_reply_mb=0", port);
    assert_int_equal(drift_target_open(spec, &o, &t, &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "max_reply_mb=0"));
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_parse_reply_shapes, kill_servers),
        cmocka_unit_test(test_transport_causes),
        cmocka_unit_test_teardown(test_bad_specs, kill_servers),
        cmocka_unit_test_teardown(test_completions_answer, kill_servers),
        cmocka_unit_test_teardown(test_chat_answer_and_length, kill_servers),
        cmocka_unit_test_teardown(test_request_fields, kill_servers),
        cmocka_unit_test_teardown(test_logprobs_both_apis, kill_servers),
        cmocka_unit_test_teardown(test_retry_after_honoured, kill_servers),
        cmocka_unit_test_teardown(test_5xx_retried_then_ok, kill_servers),
        cmocka_unit_test_teardown(test_permanent_errors, kill_servers),
        cmocka_unit_test_teardown(test_api_key, kill_servers),
        cmocka_unit_test_teardown(test_key_local_http, kill_servers),
        cmocka_unit_test_teardown(test_key_refused_nonlocal, kill_servers),
        cmocka_unit_test_teardown(test_key_reachable_nonlocal, kill_servers),
        cmocka_unit_test_teardown(test_timeout, kill_servers),
        cmocka_unit_test_teardown(test_reset_mid_body, kill_servers),
        cmocka_unit_test_teardown(test_request_numbered_faults, kill_servers),
        cmocka_unit_test_teardown(test_answer_file_fixtures, kill_servers),
        cmocka_unit_test_teardown(test_concurrency_each_once, kill_servers),
        cmocka_unit_test_teardown(test_cancel_and_bad_prompt, kill_servers),
        cmocka_unit_test_teardown(test_unreachable, kill_servers),
        cmocka_unit_test_teardown(test_embed, kill_servers),
        cmocka_unit_test_teardown(test_cancel_in_flight, kill_servers),
        cmocka_unit_test_teardown(test_cancel_in_backoff, kill_servers),
        cmocka_unit_test_teardown(test_cancel_silent_peer_and_embed, kill_servers),
        cmocka_unit_test_teardown(test_cancel_embed_backoff, kill_servers),
        cmocka_unit_test(test_cancel_embedded_relay),
        cmocka_unit_test(test_reply_cap_bound),
        cmocka_unit_test_teardown(test_reply_too_large, kill_servers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
