/* test_traffic.c - the traffic module (traffic.h): request logs of each
 * shape and their errors (file:line: field), the determinism overrides and
 * their record, reply messages, the JSON-Schema subset (each keyword
 * passing and failing), the drift classes of hand-made pairs, and the
 * counting: errors left out of flips, McNemar on the directional classes,
 * the gate's no-evidence and left-out rules. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/eval.h"
#include "driftbench/traffic.h"
#include "support/fake_server.h"

static drift_traffic_log *parse_ok(const char *text) {
    drift_traffic_log *log = NULL;
    drift_error err = {0};
    drift_status st = drift_traffic_log_parse("t.jsonl", text, strlen(text), &log, &err);
    if (st) fprintf(stderr, "unexpected: %s\n", err.msg);
    assert_int_equal(st, DRIFT_OK);
    return log;
}

static void parse_bad(const char *text, const char *want) {
    drift_traffic_log *log = NULL;
    drift_error err = {0};
    assert_int_equal(drift_traffic_log_parse("t.jsonl", text, strlen(text), &log, &err), DRIFT_ERR_PARSE);
    assert_null(log);
    if (!strstr(err.msg, want)) fprintf(stderr, "message '%s' lacks '%s'\n", err.msg, want);
    assert_non_null(strstr(err.msg, want));
}

static void test_log_shapes(void **state) {
    (void)state;
    drift_traffic_log *l = parse_ok("{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"model\":\"m\"}\n\n"
                                    "{\"model\":\"m\",  \"messages\":[{\"content\":\"b\",\"role\":\"user\"}]}\n");
    assert_string_equal(l->format, "chat-jsonl");
    assert_int_equal(l->n, 2);
    assert_string_equal(l->recs[1].id, "line-3");
    assert_int_equal(l->recs[1].line, 3);
    /* canonical: sorted keys, compact, whatever the log's spacing */
    assert_string_equal(l->recs[1].request_json, "{\"messages\":[{\"content\":\"b\",\"role\":\"user\"}],\"model\":\"m\"}");
    drift_traffic_log_free(l);

    l = parse_ok("{\"custom_id\":\"r1\",\"method\":\"POST\",\"url\":\"/v1/chat/completions\",\"body\":{\"messages\":"
                 "[{\"role\":\"user\",\"content\":\"a\"}]},\"response\":{\"status_code\":200,\"body\":{\"choices\":"
                 "[{\"message\":{\"role\":\"assistant\",\"content\":\"x\"}}]}}}\n");
    assert_string_equal(l->format, "openai-batch");
    assert_string_equal(l->recs[0].id, "r1");
    assert_int_equal(l->with_response, 1);
    assert_non_null(strstr(l->recs[0].response_json, "\"choices\""));
    drift_traffic_log_free(l);

    l = parse_ok("{\"id\":\"q\",\"request\":{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]},\"response\":null}\n");
    assert_string_equal(l->format, "request-response");
    assert_string_equal(l->recs[0].id, "q");
    assert_null(l->recs[0].response_json);
    drift_traffic_log_free(l);
}

/* /v1/completions bodies: the chat-jsonl shape and batch lines with that
 * url; the served reply's text is the content; one endpoint per log. */
static void test_log_completions(void **state) {
    (void)state;
    drift_traffic_log *l = parse_ok("{\"model\":\"m\",\"prompt\":\"Q: 2+2?\\nA:\",\"temperature\":0.5}\n"
                                    "{\"prompt\":[\"The answer is\"]}\n");
    assert_string_equal(l->format, "chat-jsonl");
    assert_int_equal(l->completions, 1);
    assert_int_equal(l->n, 2);
    char *body = NULL, *ov = NULL;
    drift_error err = {0};
    assert_int_equal(drift_traffic_prepare(l->recs[0].request_json, NULL, &body, &ov, &err), DRIFT_OK);
    assert_non_null(strstr(body, "\"temperature\":0"));
    assert_non_null(strstr(body, "\"prompt\":\"Q: 2+2?\\nA:\""));
    free(body);
    free(ov);
    drift_traffic_log_free(l);

    l = parse_ok("{\"custom_id\":\"c1\",\"method\":\"POST\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"x\"},"
                 "\"response\":{\"status_code\":200,\"body\":{\"choices\":[{\"index\":0,\"text\":\" #### 4\"}]}}}\n");
    assert_string_equal(l->format, "openai-batch");
    assert_int_equal(l->completions, 1);
    assert_int_equal(l->with_response, 1);
    char *msg = NULL;
    assert_int_equal(drift_traffic_reply_message(l->recs[0].response_json, &msg, &err), DRIFT_OK);
    assert_string_equal(msg, "{\"content\":\" #### 4\"}");
    /* judged as any answer: the final number */
    drift_traffic_pair p;
    assert_int_equal(drift_traffic_pair_judge(l->recs[0].request_json, msg, "{\"content\":\" #### 5\"}", &p, &err),
                     DRIFT_OK);
    assert_int_equal(p.state[DRIFT_TC_MATH], DRIFT_TP_FLIP);
    assert_int_equal(p.state[DRIFT_TC_JSON], DRIFT_TP_NA);
    free(msg);
    drift_traffic_log_free(l);

    parse_bad("{\"prompt\":\"a\"}\n{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]}\n",
              "t.jsonl:2: a chat/completions request in a log of completions requests");
    parse_bad("{\"prompt\":[\"a\",\"b\"]}\n", "t.jsonl:1: prompt: an array of 2 prompts");
    parse_bad("{\"prompt\":[1,2,3]}\n", "prompt: an array of 3 prompts");
    parse_bad("{\"prompt\":[7]}\n", "prompt: must be a string (token ids are not replayed), not a number");
    parse_bad("{\"custom_id\":\"a\",\"method\":\"POST\",\"url\":\"/v1/completions\",\"body\":{\"messages\":"
              "[{\"role\":\"user\",\"content\":\"a\"}]}}\n",
              "t.jsonl:1: body: a completions url needs a body with a prompt and no messages");
    parse_bad("{\"custom_id\":\"a\",\"method\":\"POST\",\"url\":\"/v1/chat/completions\",\"body\":{\"prompt\":\"a\"}}\n",
              "body: a chat url needs a body with messages");
}

static void test_log_errors(void **state) {
    (void)state;
    parse_bad("", "no request in the log");
    parse_bad("{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]}\n[1]\n", "t.jsonl:2: a line must be a JSON object");
    parse_bad("{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]}\n{\"messages\":\n", "t.jsonl:2: not JSON");
    parse_bad("{\"messages\":[]}\n", "t.jsonl:1: messages: is empty");
    parse_bad("{\"messages\":[{\"role\":3,\"content\":\"a\"}]}\n", "t.jsonl:1: messages[0].role: must be a string");
    parse_bad("{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"tools\":[{\"type\":\"x\"}]}\n",
              "t.jsonl:1: tools[0].type");
    parse_bad("{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"response_format\":{\"type\":\"yaml\"}}\n",
              "response_format.type: 'yaml'");
    parse_bad("{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"response_format\":{\"type\":\"json_schema\","
              "\"json_schema\":{}}}\n",
              "response_format.json_schema.schema");
    parse_bad("{\"custom_id\":\"a\",\"method\":\"POST\",\"url\":\"/v1/chat/completions\",\"body\":{\"messages\":[{"
              "\"role\":\"user\",\"content\":\"a\"}]}}\n{\"custom_id\":\"a\",\"method\":\"POST\",\"url\":\"/v1/chat/"
              "completions\",\"body\":{\"messages\":[{\"role\":\"user\",\"content\":\"b\"}]}}\n",
              "t.jsonl:2: id 'a' is also the id of line 1");
    parse_bad("{\"custom_id\":\"a\",\"method\":\"GET\",\"url\":\"/v1/chat/completions\",\"body\":{}}\n", "method");
    parse_bad("{\"custom_id\":\"a\",\"method\":\"POST\",\"url\":\"/v1/chat/completions\",\"body\":{\"messages\":3}}\n",
              "t.jsonl:1: body.messages: must be an array");
    parse_bad("{\"request\":{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]},\"response\":{\"choices\":[]}}\n",
              "response.choices");
    parse_bad("{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]}\n{\"request\":{}}\n",
              "t.jsonl:2: a request-response line in a chat-jsonl log");
}

static void test_prepare(void **state) {
    (void)state;
    drift_traffic_prep_opts o = {42, "served"};
    char *body = NULL, *ov = NULL;
    drift_error err = {0};
    assert_int_equal(drift_traffic_prepare("{\"model\":\"prod\",\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],"
                                           "\"temperature\":0.7,\"top_p\":0.9,\"n\":3,\"stream\":true,"
                                           "\"stream_options\":{\"include_usage\":true},\"max_tokens\":5,"
                                           "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]}",
                                           &o, &body, &ov, &err),
                     DRIFT_OK);
    json_t *b = json_loads(body, 0, NULL), *v = json_loads(ov, 0, NULL);
    assert_true(json_number_value(json_object_get(b, "temperature")) == 0);
    assert_true(json_number_value(json_object_get(b, "top_p")) == 1);
    assert_int_equal(json_integer_value(json_object_get(b, "seed")), 42);
    assert_int_equal(json_integer_value(json_object_get(b, "n")), 1);
    assert_true(json_is_false(json_object_get(b, "stream")));
    assert_null(json_object_get(b, "stream_options"));
    assert_string_equal(json_string_value(json_object_get(b, "model")), "served");
    assert_int_equal(json_integer_value(json_object_get(b, "max_tokens")), 5); /* its own */
    assert_non_null(json_object_get(b, "tools"));
    assert_int_equal(json_object_size(v), 7);
    assert_true(json_real_value(json_object_get(json_object_get(v, "temperature"), "was")) == 0.7);
    assert_true(json_is_null(json_object_get(json_object_get(v, "seed"), "was")));
    assert_string_equal(json_string_value(json_object_get(json_object_get(v, "model"), "was")), "prod");
    json_decref(b);
    json_decref(v);
    free(body);
    free(ov);
    /* already deterministic, own seed: nothing overridden */
    assert_int_equal(drift_traffic_prepare("{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"temperature\":0,"
                                           "\"seed\":7}",
                                           NULL, &body, &ov, &err),
                     DRIFT_OK);
    assert_string_equal(ov, "{}");
    assert_non_null(strstr(body, "\"seed\":7"));
    free(body);
    free(ov);
    assert_int_equal(drift_traffic_prepare("{\"messages\":5}", NULL, &body, &ov, &err), DRIFT_ERR_PARSE);
    assert_null(body);
}

static void test_reply_message(void **state) {
    (void)state;
    char *m = NULL;
    drift_error err = {0};
    assert_int_equal(drift_traffic_reply_message(
                         "{\"id\":\"x\",\"created\":1,\"choices\":[{\"message\":{\"role\":\"assistant\",\"content\":null,"
                         "\"tool_calls\":[{\"id\":\"c\",\"type\":\"function\",\"function\":{\"name\":\"f\","
                         "\"arguments\":\"{\\\"b\\\": 1, \\\"a\\\": 2}\"}}]}}]}",
                         &m, &err),
                     DRIFT_OK);
    assert_string_equal(m, "{\"content\":null,\"tool_calls\":[{\"arguments\":{\"a\":2,\"b\":1},\"name\":\"f\"}]}");
    free(m);
    assert_int_equal(drift_traffic_reply_message("{\"choices\":[{\"text\":\"hi\"}]}", &m, &err), DRIFT_OK);
    assert_string_equal(m, "{\"content\":\"hi\"}");
    free(m);
    assert_int_equal(drift_traffic_reply_message("{\"choices\":[]}", &m, &err), DRIFT_ERR_PARSE);
    assert_int_equal(drift_traffic_reply_message("nope", &m, &err), DRIFT_ERR_PARSE);
}

static void schema_is(const char *schema, const char *value, int want) {
    char why[200];
    int r = drift_traffic_schema_check(schema, value, why, sizeof why);
    if (r != want) fprintf(stderr, "%s on %s: %d (%s), want %d\n", schema, value, r, why, want);
    assert_int_equal(r, want);
    if (want == 0) assert_true(why[0] != '\0');
}

static void test_schema(void **state) {
    (void)state;
    const char *s = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\",\"minimum\":0},"
                    "\"b\":{\"enum\":[\"x\",\"y\"]},\"c\":{\"type\":\"array\",\"items\":{\"type\":\"string\","
                    "\"maxLength\":3},\"minItems\":1}},\"required\":[\"a\"],\"additionalProperties\":false}";
    schema_is(s, "{\"a\":1}", 1);
    schema_is(s, "{\"a\":1.0,\"b\":\"y\",\"c\":[\"abc\"]}", 1);
    schema_is(s, "{\"b\":\"x\"}", 0);              /* required */
    schema_is(s, "{\"a\":\"1\"}", 0);              /* type */
    schema_is(s, "{\"a\":1.5}", 0);                /* integer */
    schema_is(s, "{\"a\":-1}", 0);                 /* minimum */
    schema_is(s, "{\"a\":1,\"b\":\"z\"}", 0);      /* enum */
    schema_is(s, "{\"a\":1,\"c\":[]}", 0);         /* minItems */
    schema_is(s, "{\"a\":1,\"c\":[\"abcd\"]}", 0); /* items maxLength */
    schema_is(s, "{\"a\":1,\"d\":0}", 0);          /* additionalProperties */
    schema_is(s, "[1]", 0);
    schema_is("{\"type\":[\"string\",\"null\"]}", "null", 1);
    schema_is("{\"const\":3}", "4", 0);
    schema_is("{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"integer\"}]}", "2", 1);
    schema_is("{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"integer\"}]}", "2.5", 0);
    schema_is("{\"$defs\":{\"p\":{\"type\":\"object\",\"required\":[\"n\"]}},\"type\":\"array\",\"items\":{\"$ref\":"
              "\"#/$defs/p\"}}",
              "[{\"n\":1},{}]", 0);
    schema_is("{\"pattern\":\"^a\"}", "\"b\"", 1); /* not covered: passes */
    schema_is("{\"type\":\"frog\"}", "1", -1);
    schema_is("{\"$ref\":\"#/$defs/none\"}", "1", -1);
    schema_is("{\"$defs\":{\"r\":{\"$ref\":\"#/$defs/r\"}},\"$ref\":\"#/$defs/r\"}", "1", -1); /* loops end */
}

#define REQ_SCHEMA                                                                                                    \
    "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"response_format\":{\"type\":\"json_schema\","          \
    "\"json_schema\":{\"schema\":{\"type\":\"object\",\"required\":[\"a\"]}}}}"
#define REQ_TOOLS                                                                                                     \
    "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"tools\":[{\"type\":\"function\",\"function\":{\"name\":" \
    "\"f\"}}]}"
#define REQ_PLAIN "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}"

static drift_traffic_pair judge(const char *req, const char *a, const char *b) {
    drift_traffic_pair p;
    drift_error err = {0};
    assert_int_equal(drift_traffic_pair_judge(req, a, b, &p, &err), DRIFT_OK);
    return p;
}

static void test_pair_classes(void **state) {
    (void)state;
    drift_traffic_pair p = judge(REQ_PLAIN, "{\"content\":\"one two three\"}", "{\"content\":\"one two three\"}");
    assert_int_equal(p.state[DRIFT_TC_EXACT], DRIFT_TP_SAME);
    assert_int_equal(p.first_diff_char, -1);
    assert_int_equal(p.state[DRIFT_TC_JSON], DRIFT_TP_NA);
    assert_int_equal(p.state[DRIFT_TC_TOOL_NAME], DRIFT_TP_NA);
    assert_int_equal(p.state[DRIFT_TC_MATH], DRIFT_TP_NA);

    p = judge(REQ_PLAIN, "{\"content\":\"caf\\u00e9 two three\"}", "{\"content\":\"caf\\u00e9 two thre\"}");
    assert_int_equal(p.state[DRIFT_TC_EXACT], DRIFT_TP_FLIP);
    assert_int_equal(p.first_diff_char, 13); /* code points, not bytes */
    assert_int_equal(p.first_diff_word, 2);

    p = judge(REQ_PLAIN, "{\"content\":\"so 5.\\n#### 5\"}", "{\"content\":\"The answer is 5.0\"}");
    assert_int_equal(p.state[DRIFT_TC_MATH], DRIFT_TP_SAME);
    p = judge(REQ_PLAIN, "{\"content\":\"#### 1,200\"}", "{\"content\":\"I think 7\"}");
    assert_int_equal(p.state[DRIFT_TC_MATH], DRIFT_TP_FLIP);

    p = judge(REQ_SCHEMA, "{\"content\":\"{\\\"a\\\":1}\"}", "{\"content\":\"{\\\"b\\\":1}\"}");
    assert_int_equal(p.state[DRIFT_TC_JSON], DRIFT_TP_SAME);
    assert_int_equal(p.state[DRIFT_TC_SCHEMA], DRIFT_TP_FLIP);
    assert_int_equal(p.direction[DRIFT_TC_SCHEMA], -1);
    p = judge(REQ_SCHEMA, "{\"content\":\"not json\"}", "{\"content\":\"{\\\"a\\\":1}\"}");
    assert_int_equal(p.state[DRIFT_TC_JSON], DRIFT_TP_FLIP);
    assert_int_equal(p.direction[DRIFT_TC_JSON], +1);
    assert_int_equal(p.direction[DRIFT_TC_SCHEMA], +1);

    const char *call_a = "{\"content\":null,\"tool_calls\":[{\"name\":\"f\",\"arguments\":{\"x\":1,\"y\":[1,2]}}]}";
    const char *call_b = "{\"content\":null,\"tool_calls\":[{\"arguments\":{\"y\":[1,2],\"x\":1.0},\"name\":\"f\"}]}";
    const char *call_c = "{\"content\":null,\"tool_calls\":[{\"name\":\"f\",\"arguments\":{\"x\":2,\"y\":[1,2]}}]}";
    const char *call_g = "{\"content\":null,\"tool_calls\":[{\"name\":\"g\",\"arguments\":{}}]}";
    p = judge(REQ_TOOLS, call_a, call_c);
    assert_int_equal(p.state[DRIFT_TC_TOOL_NAME], DRIFT_TP_SAME);
    assert_int_equal(p.state[DRIFT_TC_TOOL_ARGS], DRIFT_TP_FLIP);
    p = judge(REQ_TOOLS, call_a, call_g);
    assert_int_equal(p.state[DRIFT_TC_TOOL_NAME], DRIFT_TP_FLIP);
    assert_int_equal(p.state[DRIFT_TC_TOOL_ARGS], DRIFT_TP_NA);
    p = judge(REQ_TOOLS, call_a, "{\"content\":\"no tool\"}");
    assert_int_equal(p.state[DRIFT_TC_TOOL_NAME], DRIFT_TP_FLIP);
    /* arguments compared as JSON values: key order and 1 / 1.0 are no drift,
     * the order of an array is */
    p = judge(REQ_TOOLS, call_a, call_b);
    assert_int_equal(p.state[DRIFT_TC_TOOL_NAME], DRIFT_TP_SAME);
    assert_int_equal(p.state[DRIFT_TC_TOOL_ARGS], DRIFT_TP_SAME);
    p = judge(REQ_TOOLS, call_a, "{\"content\":null,\"tool_calls\":[{\"arguments\":{\"y\":[2,1],\"x\":1},\"name\":\"f\"}]}");
    assert_int_equal(p.state[DRIFT_TC_TOOL_ARGS], DRIFT_TP_FLIP);
    p = judge(REQ_TOOLS, call_a, "{\"content\":null,\"tool_calls\":[{\"arguments\":{\"y\":[1,2],\"x\":1,\"z\":0},\"name\":\"f\"}]}");
    assert_int_equal(p.state[DRIFT_TC_TOOL_ARGS], DRIFT_TP_FLIP);

    drift_traffic_pair_set_guard(&p, 1, 0);
    assert_int_equal(p.state[DRIFT_TC_GUARD], DRIFT_TP_FLIP);
    assert_int_equal(p.direction[DRIFT_TC_GUARD], -1);
    drift_traffic_pair_set_guard(&p, 1, -1);
    assert_int_equal(p.state[DRIFT_TC_GUARD], DRIFT_TP_ERROR);
    drift_traffic_pair_set_sdr(&p, 0.5, 0.3);
    assert_int_equal(p.state[DRIFT_TC_SEMANTIC], DRIFT_TP_FLIP);
    drift_traffic_pair_set_sdr(&p, NAN, 0.3);
    assert_int_equal(p.state[DRIFT_TC_SEMANTIC], DRIFT_TP_ERROR);

    drift_error err = {0};
    assert_int_equal(drift_traffic_pair_judge(REQ_PLAIN, "[]", "{}", &p, &err), DRIFT_ERR_PARSE);
}

/* A reply message {"content": text}, malloc'd. */
static char *code_msg(const char *text) {
    json_t *m = json_pack("{s:s}", "content", text);
    char *s = json_dumps(m, JSON_COMPACT);
    json_decref(m);
    return s;
}

static int code_state(const char *req, const char *a, const char *b, const drift_code_opts *o, int *dir) {
    char *ma = code_msg(a), *mb = code_msg(b);
    drift_traffic_pair p = judge(req, ma, mb);
    assert_int_equal(p.state[DRIFT_TC_CODE], DRIFT_TP_NA); /* pair_judge never runs code */
    drift_traffic_pair_set_code(&p, req, ma, mb, o);
    free(ma);
    free(mb);
    if (dir) *dir = p.direction[DRIFT_TC_CODE];
    return p.state[DRIFT_TC_CODE];
}

#define REQ_CODE_TESTS                                                                                                \
    "{\"messages\":[{\"role\":\"user\",\"content\":\"write sq\"}],\"metadata\":{\"driftbench_tests\":"              \
    "\"assert sq(2) == 4\\nassert sq(-3) == 9\",\"driftbench_entry_point\":\"sq\"}}"

static void test_pair_code(void **state) {
    (void)state;
    int dir = 0;
    const char *good = "Here:\n```python\ndef sq(x):\n    return x * x\n```\n";
    const char *good2 = "```Python\ndef sq(x):\n    return x ** 2\n```";
    const char *wrong = "```py\ndef sq(x):\n    return x + x\n```";
    const char *broken = "```python\ndef sq(x)\n    return x * x\n```";
    /* no Python block on either side (an untagged or other-language block is not code) */
    assert_int_equal(code_state(REQ_CODE_TESTS, "no code", "```\nx = (\n```\n```sh\nls (\n```", NULL, &dir),
                     DRIFT_TP_NA);
    /* with tests: both pass though the code differs; one fails a carried test */
    assert_int_equal(code_state(REQ_CODE_TESTS, good, good2, NULL, &dir), DRIFT_TP_SAME);
    assert_int_equal(code_state(REQ_CODE_TESTS, good, wrong, NULL, &dir), DRIFT_TP_FLIP); /* 2+2 == 4, -3-3 != 9 */
    assert_int_equal(dir, -1);
    assert_int_equal(code_state(REQ_CODE_TESTS, broken, good, NULL, &dir), DRIFT_TP_FLIP);
    assert_int_equal(dir, +1);
    /* code on one side only: the side without is the worse */
    assert_int_equal(code_state(REQ_CODE_TESTS, good, "sq is x times x", NULL, &dir), DRIFT_TP_FLIP);
    assert_int_equal(dir, -1);
    /* the answer cannot decide its verdict: exiting 0 early, printing the
     * runner's words, or raising SystemExit in the entry point is a fail */
    const char *cheat = "```python\nimport os\nprint('passed')\ndef sq(x):\n    os._exit(0)\n```";
    assert_int_equal(code_state(REQ_CODE_TESTS, good, cheat, NULL, &dir), DRIFT_TP_FLIP);
    assert_int_equal(dir, -1);
    /* without tests: it compiles (never executed: an infinite loop or an
     * exit at import time still compiles), or has a syntax error */
    const char *spin = "```python\nwhile True:\n    pass\n```";
    const char *quit = "```python\nraise SystemExit(3)\n```";
    assert_int_equal(code_state(REQ_PLAIN, spin, quit, NULL, &dir), DRIFT_TP_SAME);
    assert_int_equal(code_state(REQ_PLAIN, spin, broken, NULL, &dir), DRIFT_TP_FLIP);
    assert_int_equal(dir, -1);
    /* code that tries to break out of the hex literal is just bytes to compile */
    assert_int_equal(code_state(REQ_PLAIN, broken, "```python\n'), 'a', 'exec')\n    return 1\n```", NULL, &dir),
                     DRIFT_TP_SAME);
    /* the same code both sides: SAME without a run */
    assert_int_equal(code_state(REQ_PLAIN, broken, broken, NULL, &dir), DRIFT_TP_SAME);
    /* a sandbox that cannot run: ERROR, never a flip (no interpreter; an
     * "interpreter" under which the runner is never ready) */
    drift_code_opts o;
    drift_code_opts_default(&o);
    o.python = "/no/such/python";
    assert_int_equal(code_state(REQ_CODE_TESTS, good, wrong, &o, &dir), DRIFT_TP_ERROR);
    o.python = "/bin/false";
    o.unsafe_exec = 1;
    assert_int_equal(code_state(REQ_PLAIN, spin, broken, &o, &dir), DRIFT_TP_ERROR);
    /* tests without an entry point: ERROR; the class applies to such a request */
    const char *no_entry = "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"metadata\":{\"driftbench_tests\":"
                           "\"assert sq(2) == 4\"}}";
    assert_int_equal(code_state(no_entry, good, wrong, NULL, &dir), DRIFT_TP_ERROR);

    /* counting: an error pair counts against code only when its request carries tests */
    drift_traffic_pair pairs[3];
    memset(pairs, 0, sizeof pairs);
    pairs[0].state[DRIFT_TC_CODE] = DRIFT_TP_FLIP;
    pairs[0].direction[DRIFT_TC_CODE] = -1;
    int error[3] = {0, 1, 1};
    const char *reqs[3] = {REQ_PLAIN, REQ_CODE_TESTS, REQ_PLAIN};
    drift_traffic_summary s;
    drift_traffic_summarize(pairs, error, reqs, 3, 0, 0, NULL, &s);
    assert_int_equal(s.cls[DRIFT_TC_CODE].n, 1);
    assert_int_equal(s.cls[DRIFT_TC_CODE].worse, 1);
    assert_int_equal(s.cls[DRIFT_TC_CODE].left_out, 1);
    assert_true(fabs(s.cls[DRIFT_TC_CODE].budget - 0.02) < 1e-12);
    assert_int_equal(s.taxonomy.functional, 1);
    assert_int_equal(s.taxonomy.functional_worse, 1);
    assert_string_equal(drift_traffic_class_name(DRIFT_TC_CODE), "code");
    assert_int_equal(drift_traffic_class_parse("code"), DRIFT_TC_CODE);
}

static void test_summarize(void **state) {
    (void)state;
    enum { N = 40 };
    drift_traffic_pair pairs[N];
    int error[N] = {0};
    const char *reqs[N];
    for (int i = 0; i < N; i++) {
        memset(&pairs[i], 0, sizeof pairs[i]);
        reqs[i] = i < 20 ? REQ_SCHEMA : REQ_PLAIN;
        pairs[i].state[DRIFT_TC_EXACT] = i < 10 ? DRIFT_TP_FLIP : DRIFT_TP_SAME;
        if (i < 20) {
            pairs[i].state[DRIFT_TC_JSON] = DRIFT_TP_SAME;
            pairs[i].state[DRIFT_TC_SCHEMA] = i < 6 ? DRIFT_TP_FLIP : DRIFT_TP_SAME;
            pairs[i].direction[DRIFT_TC_SCHEMA] = i < 5 ? -1 : (i < 6 ? +1 : 0);
        }
    }
    error[0] = 1; /* a request error on a schema request: left out, never a flip */
    drift_traffic_opts o;
    drift_traffic_opts_default(&o);
    drift_traffic_summary s;
    drift_traffic_summarize(pairs, error, reqs, N, 0, 0, &o, &s);
    assert_int_equal(s.answered, N - 1);
    assert_int_equal(s.cls[DRIFT_TC_EXACT].n, N - 1);
    assert_int_equal(s.cls[DRIFT_TC_EXACT].flips, 9);
    assert_int_equal(s.cls[DRIFT_TC_EXACT].left_out, 1);
    assert_int_equal(s.cls[DRIFT_TC_EXACT].decision, DRIFT_DECISION_NOT_GATED);
    const drift_traffic_class_result *sc = &s.cls[DRIFT_TC_SCHEMA];
    assert_int_equal(sc->n, 19);
    assert_int_equal(sc->flips, 5);
    assert_int_equal(sc->worse, 4);
    assert_int_equal(sc->better, 1);
    assert_int_equal(sc->left_out, 1);
    assert_true(fabs(sc->mcnemar_p - drift_mcnemar_exact(4, 1)) < 1e-12);
    assert_int_equal(sc->decision, DRIFT_DECISION_BLOCK); /* 1/20 left out = 5%: not over; 5/19 over 1% */
    assert_true(isnan(s.cls[DRIFT_TC_EXACT].mcnemar_p));
    assert_false(s.cls[DRIFT_TC_MATH].present); /* no math-like pair: an error counts nowhere */
    assert_false(s.cls[DRIFT_TC_TOOL_NAME].present);
    assert_int_equal(s.decision, DRIFT_DECISION_BLOCK);
    /* taxonomy: pairs 1..5 flip schema (1..4 worse), pairs 1..9 flip exact:
     * 4 of those (6..9) flip nothing else */
    assert_int_equal(s.taxonomy.functional, 5);
    assert_int_equal(s.taxonomy.functional_worse, 4);
    assert_int_equal(s.taxonomy.textual_only, 4);
    assert_int_equal(s.taxonomy.safety, 0);

    /* a gated class whose every pair is an error: no evidence, an error */
    for (int i = 0; i < 20; i++) error[i] = 1;
    drift_traffic_summarize(pairs, error, reqs, N, 0, 0, &o, &s);
    assert_int_equal(s.cls[DRIFT_TC_SCHEMA].n, 0);
    assert_int_equal(s.cls[DRIFT_TC_SCHEMA].decision, DRIFT_DECISION_NO_EVIDENCE);
    assert_int_equal(s.decision, DRIFT_DECISION_NO_EVIDENCE);

    /* budgets */
    assert_int_equal(drift_traffic_parse_budgets(&o, "schema=none, exact=1.5", NULL), DRIFT_OK);
    assert_true(o.budget[DRIFT_TC_SCHEMA] < 0);
    assert_true(fabs(o.budget[DRIFT_TC_EXACT] - 0.015) < 1e-12);
    drift_error err = {0};
    assert_int_equal(drift_traffic_parse_budgets(&o, "frogs=1", &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "unknown class"));
    assert_int_equal(drift_traffic_parse_budgets(&o, "json=200", &err), DRIFT_ERR_INVALID);
    assert_string_equal(err.msg, "budget for json: \"200\" is not a percentage between 0 and 100");
    assert_int_equal(drift_traffic_parse_budgets(&o, " json ,", &err), DRIFT_ERR_INVALID);
    assert_string_equal(err.msg, "budget \"json\": expected CLASS=PERCENT (e.g. json=1)");
    assert_true(fabs(o.budget[DRIFT_TC_EXACT] - 0.015) < 1e-12); /* unchanged on error */
}

/* drift_target_send_raw (target.h), the replay's transport: whole bodies
 * through the HTTP client, the reply body as the answer, faults and
 * retries as generate's; another kind of target refuses. */
typedef struct raw_seen {
    drift_answer a[3];
} raw_seen;

static int on_raw(void *user, const drift_gen_request *req, drift_answer *res) {
    raw_seen *s = user;
    s->a[req->index] = *res;
    memset(res, 0, sizeof *res);
    return 0;
}

static void test_send_raw(void **state) {
    (void)state;
    char script[1024];
    const char *src = getenv("DRIFT_SOURCE");
    snprintf(script, sizeof script, "%s/tests/data/fake/faults.txt", src ? src : ".");
    const char *args[] = {"--script", script};
    fake_server f;
    int started = fake_server_start(&f, NULL, 60, args, 2);
    if (started == -2) fail_msg("fakeserver did not report its port");
    if (started != 0) {
        print_message("skipping: fakeserver is not built\n");
        skip();
    }
    char spec[256];
    snprintf(spec, sizeof spec, "http://127.0.0.1:%d/v1?model=m&api=chat", f.port);
    drift_target_opts o;
    drift_target_opts_default(&o);
    o.max_retries = 1;
    o.backoff_base_s = 0.01;
    drift_target *t = NULL;
    drift_error err = {0};
    assert_int_equal(drift_target_open(spec, &o, &t, &err), DRIFT_OK);
    drift_gen_request rq[3] = {
        {.index = 0, .prompt = "{\"messages\":[{\"role\":\"user\",\"content\":\"ANSWER=5\"}],\"model\":\"own\"}"},
        {.index = 1, .prompt = "{\"messages\":[{\"role\":\"user\",\"content\":\"BROKEN\"}]}"},
        {.index = 2, .prompt = "{\"messages\":[{\"role\":\"user\",\"content\":\"GARBLED_ONCE ANSWER=2\"}]}"},
    };
    raw_seen seen;
    memset(&seen, 0, sizeof seen);
    assert_int_equal(drift_target_send_raw(t, rq, 3, on_raw, &seen, &err), DRIFT_OK);
    /* the answer is the whole reply; its message reads as the content */
    assert_null(seen.a[0].error);
    assert_non_null(strstr(seen.a[0].text, "\"choices\""));
    char *m = NULL;
    assert_int_equal(drift_traffic_reply_message(seen.a[0].text, &m, &err), DRIFT_OK);
    assert_string_equal(m, "{\"content\":\"The answer is 5.\\n#### 5\"}");
    free(m);
    assert_non_null(seen.a[1].error);
    assert_int_equal(seen.a[1].http_status, 500);
    assert_int_equal(seen.a[1].cause, DRIFT_FAIL_HTTP);
    assert_int_equal(seen.a[1].attempts, 2);
    assert_null(seen.a[2].error); /* malformed once, then retried */
    assert_int_equal(seen.a[2].attempts, 2);
    for (int i = 0; i < 3; i++) drift_answer_clear(&seen.a[i]);
    drift_target_close(t);
    fake_server_stop(&f);

    char mpath[1024];
    snprintf(mpath, sizeof mpath, "embedded:%s/models/qwen2-7m.gguf", src ? src : ".");
    if (drift_target_open(mpath, NULL, &t, &err) == DRIFT_OK) {
        assert_int_equal(drift_target_send_raw(t, rq, 1, on_raw, &seen, &err), DRIFT_ERR_UNSUPPORTED);
        drift_target_close(t);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_log_shapes),   cmocka_unit_test(test_log_errors), cmocka_unit_test(test_log_completions), cmocka_unit_test(test_prepare),
        cmocka_unit_test(test_reply_message), cmocka_unit_test(test_schema),    cmocka_unit_test(test_pair_classes), cmocka_unit_test(test_pair_code),
        cmocka_unit_test(test_summarize),    cmocka_unit_test(test_send_raw),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
