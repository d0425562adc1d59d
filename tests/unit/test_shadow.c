/* test_shadow.c - the shadow proxy's pure parts (shadow.h): SSE streams
 * reassembled into the whole reply (content, refusal, tool calls by index,
 * completions text, CRLF lines, comments, a last event without its blank
 * line, bad events), the message form of a streamed reply equal to the
 * non-streamed one's, which requests are comparable, and the deterministic
 * sample (the same body always, the share near the fraction); the proxy's
 * live judge (drift_shadow_judge_*): stored pairs re-added at start, hashes
 * among them counted as not judged and said, then live pairs judged and
 * shown on /metrics. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/shadow.h"
#include "driftbench/traffic.h"

static char *reassemble_ok(const char *sse) {
    char *r = NULL;
    drift_error err = {0};
    drift_status st = drift_shadow_sse_reassemble(sse, strlen(sse), &r, &err);
    if (st) fprintf(stderr, "unexpected: %s\n", err.msg);
    assert_int_equal(st, DRIFT_OK);
    return r;
}

static char *message_of(const char *reply) {
    char *m = NULL;
    drift_error err = {0};
    assert_int_equal(drift_traffic_reply_message(reply, &m, &err), DRIFT_OK);
    return m;
}

static void test_chat_content(void **state) {
    (void)state;
    const char *sse =
        "data: {\"id\":\"a\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n"
        ": a comment\n"
        "data: {\"id\":\"a\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"The answer\"}}]}\r\n\r\n"
        "data: {\"id\":\"a\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" is 4.\\n#### 4\"},"
        "\"finish_reason\":\"stop\"}]}\n\n"
        "data: {\"id\":\"a\",\"choices\":[],\"usage\":{\"prompt_tokens\":3}}\n\n"
        "data: [DONE]\n\n";
    char *r = reassemble_ok(sse);
    char *m = message_of(r);
    char *w = message_of("{\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":"
                         "\"The answer is 4.\\n#### 4\"},\"finish_reason\":\"stop\"}]}");
    assert_string_equal(m, w); /* the same stored answer as the whole reply's */
    json_t *j = json_loads(r, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(j, "choices"), 0),
                                                          "finish_reason")),
                        "stop");
    json_decref(j);
    free(r);
    free(m);
    free(w);
}

static void test_tool_calls_and_refusal(void **state) {
    (void)state;
    const char *sse =
        "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"index\":0,"
        "\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"\"}}]}}]}\n\n"
        "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"c2\",\"function\":{\"name\":\"time\","
        "\"arguments\":\"{}\"}}]}}]}\n\n"
        "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":"
        "{\"arguments\":\"{\\\"city\\\":\"}}]}}]}\n\n"
        "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":"
        "{\"arguments\":\"\\\"Oslo\\\"}\"}}]},"
        "\"finish_reason\":\"tool_calls\"}]}\n\n"
        "data: [DONE]"; /* no blank line after the last event */
    char *r = reassemble_ok(sse);
    char *m = message_of(r);
    json_t *j = json_loads(m, 0, NULL);
    json_t *calls = json_object_get(j, "tool_calls");
    assert_int_equal(json_array_size(calls), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(calls, 0), "name")), "get_weather");
    json_t *args0 = json_object_get(json_array_get(calls, 0), "arguments");
    assert_string_equal(json_string_value(json_object_get(args0, "city")), "Oslo");
    assert_string_equal(json_string_value(json_object_get(json_array_get(calls, 1), "name")), "time");
    assert_true(json_is_null(json_object_get(j, "content")));
    json_decref(j);
    free(r);
    free(m);

    r = reassemble_ok("data: {\"choices\":[{\"delta\":{\"refusal\":\"I can't\"}}]}\n\n"
                      "data: {\"choices\":[{\"delta\":{\"refusal\":\" help.\"}}]}\n\n");
    m = message_of(r);
    j = json_loads(m, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(j, "refusal")), "I can't help.");
    json_decref(j);
    free(r);
    free(m);
}

static void test_completions_text(void **state) {
    (void)state;
    char *r = reassemble_ok("data: {\"choices\":[{\"text\":\"4\",\"index\":0}]}\n\n"
                            "data: {\"choices\":[{\"text\":\"2\",\"index\":0,\"finish_reason\":\"length\"}]}\n"
                            "\ndata: [DONE]\n\n");
    char *m = message_of(r);
    json_t *j = json_loads(m, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(j, "content")), "42");
    json_decref(j);
    free(r);
    free(m);
}

static void test_bad_streams(void **state) {
    (void)state;
    char *r = NULL;
    drift_error err = {0};
    const char *bad = "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {not json\n\n";
    assert_int_equal(drift_shadow_sse_reassemble(bad, strlen(bad), &r, &err), DRIFT_ERR_PARSE);
    assert_non_null(strstr(err.msg, "event 2"));
    assert_null(r);
    const char *none = "data: [DONE]\n\n";
    assert_int_equal(drift_shadow_sse_reassemble(none, strlen(none), &r, &err), DRIFT_ERR_PARSE);
    assert_int_equal(drift_shadow_sse_reassemble("", 0, &r, &err), DRIFT_ERR_PARSE);
    /* a JSON reply mistaken for a stream: no data lines, no choice */
    const char *whole = "{\"choices\":[{\"message\":{\"content\":\"x\"}}]}";
    assert_int_equal(drift_shadow_sse_reassemble(whole, strlen(whole), &r, &err), DRIFT_ERR_PARSE);
}

static void test_comparable(void **state) {
    (void)state;
    assert_int_equal(drift_shadow_comparable("{\"messages\":[],\"temperature\":0}"), 1);
    assert_int_equal(drift_shadow_comparable("{\"messages\":[],\"temperature\":0.0,\"n\":1,\"top_p\":0.5}"), 1);
    assert_int_equal(drift_shadow_comparable("{\"messages\":[]}"), 0); /* OpenAI's default is 1 */
    assert_int_equal(drift_shadow_comparable("{\"messages\":[],\"temperature\":0.7}"), 0);
    assert_int_equal(drift_shadow_comparable("{\"messages\":[],\"temperature\":0,\"n\":2}"), 0);
    assert_int_equal(drift_shadow_comparable("{\"messages\":[],\"temperature\":\"0\"}"), 0);
    assert_int_equal(drift_shadow_comparable("[1]"), 0);
    assert_int_equal(drift_shadow_comparable("not json"), 0);
    assert_int_equal(drift_shadow_comparable(NULL), 0);
}

static void test_sample(void **state) {
    (void)state;
    char body[64];
    int in = 0;
    for (int i = 0; i < 10000; i++) {
        snprintf(body, sizeof body, "{\"messages\":[{\"content\":\"q%d\"}]}", i);
        int a = drift_shadow_sampled(body, strlen(body), 0.25);
        assert_int_equal(a, drift_shadow_sampled(body, strlen(body), 0.25)); /* the same body, the same answer */
        if (a) assert_int_equal(drift_shadow_sampled(body, strlen(body), 0.5), 1); /* nested shares */
        in += a;
        assert_int_equal(drift_shadow_sampled(body, strlen(body), 1.0), 1);
        assert_int_equal(drift_shadow_sampled(body, strlen(body), 0.0), 0);
    }
    /* 10000 x 0.25: sd 43; 6 sd either side */
    assert_true(in > 2500 - 260 && in < 2500 + 260);
}

typedef struct log_lines {
    int n;
    char all[2048];
} log_lines;

static void log_to(void *user, const char *line) {
    log_lines *l = user;
    l->n++;
    size_t k = strlen(l->all);
    snprintf(l->all + k, sizeof l->all - k, "%s\n", line);
}

static void test_judge(void **state) {
    (void)state;
    drift_traffic_opts t;
    drift_traffic_opts_default(&t);
    drift_shadow_judge *j = NULL;
    drift_error err = {0};
    log_lines lines = {0};
    assert_int_equal(drift_shadow_judge_new(&t, 0.05, NULL, NULL, log_to, &lines, &j, &err), DRIFT_OK);
    drift_shadow_opts o;
    drift_shadow_opts_default(&o);
    drift_shadow_judge_attach(j, &o);
    assert_ptr_equal(o.user, j);
    assert_int_equal(o.replay_stored, 1);
    assert_non_null(o.on_pair);
    assert_non_null(o.metrics_extra);
    const char *req = "{\"messages\":[{\"content\":\"hi\",\"role\":\"user\"}],\"temperature\":0}";
    const char *hello = "{\"content\":\"hello\"}", *bye = "{\"content\":\"bye\"}";
    char hash[80];
    snprintf(hash, sizeof hash, "sha256:%064d", 7);
    /* at start: the stored pairs, one in full and one as hashes (not judged again) */
    o.on_pair(o.user, req, hello, hello, 0, 0, 1);
    o.on_pair(o.user, hash, hash, hash, 0, 0, 1);
    drift_shadow_judge_resumed(j);
    assert_int_equal(lines.n, 2);
    assert_non_null(strstr(lines.all, "the judge resumed from 1 stored pair(s)\n"));
    assert_non_null(strstr(lines.all, "1 stored pair(s) could not be judged again (stored as hashes, or: none other)"));
    /* live: judged, on /metrics with the stored one */
    o.on_pair(o.user, req, hello, bye, 0, 0, 1);
    drift_prom p;
    drift_prom_init(&p);
    assert_int_equal(o.metrics_extra(o.user, &p), 0);
    char *text = drift_prom_steal(&p);
    drift_prom_free(&p);
    assert_non_null(text);
    assert_non_null(strstr(text, "\ndriftbench_traffic_pairs_total 2\n"));
    assert_non_null(strstr(text, "\ndriftbench_traffic_compared_total 2\n"));
    free(text);
    drift_shadow_judge_free(j);
    drift_shadow_judge_free(NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chat_content), cmocka_unit_test(test_tool_calls_and_refusal),
        cmocka_unit_test(test_completions_text), cmocka_unit_test(test_bad_streams),
        cmocka_unit_test(test_comparable),   cmocka_unit_test(test_sample), cmocka_unit_test(test_judge),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
