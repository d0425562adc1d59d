/* test_suite_formats.c - suites in the forms users have (loaders.c): chat
 * messages JSONL, OpenAI batch API input, plain prompt JSONL, with the
 * workload rules (record, then "FILE?workload=W", else an error naming file
 * and line), multi-turn prompts kept through rendering (messages/chat/v1,
 * messages/completions/v1) and into the HTTP chat request's "messages". */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/suite.h"
#include "engine/http_internal.h"
#include "util/util.h"

static char *fixture(const char *file, const char *query) {
    const char *src = getenv("DRIFT_SOURCE");
    return util_asprintf("%s/tests/data/suites/%s%s", src ? src : DRIFT_SOURCE_DIR, file, query ? query : "");
}

static drift_suite *load(const char *file, const char *query, drift_status want, const char *frag1,
                         const char *frag2) {
    char *path = fixture(file, query);
    drift_suite *s = NULL;
    drift_error err = {0};
    drift_status rc = drift_suite_load(path, &s, &err);
    if (rc != want) fprintf(stderr, "load %s: %d %s\n", path, rc, err.msg);
    assert_int_equal(rc, want);
    if (rc) {
        assert_null(s);
        fprintf(stderr, "  %s -> %s\n", file, err.msg);
        if (frag1 && !strstr(err.msg, frag1)) fprintf(stderr, "missing \"%s\"\n", frag1);
        if (frag1) assert_non_null(strstr(err.msg, frag1));
        if (frag2) assert_non_null(strstr(err.msg, frag2));
    }
    free(path);
    return s;
}

/* The turns of a prompt in messages form, parsed. */
static json_t *turns_of(const drift_prompt *p) {
    const char *js = drift_prompt_messages(p->input);
    assert_non_null(js);
    json_t *a = json_loads(js, 0, NULL);
    assert_true(json_is_array(a));
    return a;
}

static void assert_turn(json_t *a, size_t i, const char *role, const char *content) {
    json_t *m = json_array_get(a, i);
    assert_string_equal(json_string_value(json_object_get(m, "role")), role);
    assert_string_equal(json_string_value(json_object_get(m, "content")), content);
}

static void test_messages_jsonl(void **state) {
    (void)state;
    /* line 3 gives no workload and the spec none: the error names file, line, field */
    assert_null(load("messages_chat.jsonl", NULL, DRIFT_ERR_PARSE, "messages_chat.jsonl:3: field \"workload\" missing",
                     "?workload="));
    drift_suite *s = load("messages_chat.jsonl", "?workload=safety", DRIFT_OK, NULL, NULL);
    assert_string_equal(s->format, "messages-jsonl");
    assert_int_equal(s->n, 3);
    assert_non_null(strstr(s->source, "?workload=safety"));
    /* ids: the record's, else messages_<index> */
    assert_string_equal(s->prompts[0].prompt_id, "greet");
    assert_string_equal(s->prompts[1].prompt_id, "messages_0001");
    assert_string_equal(s->prompts[2].prompt_id, "plain");
    /* workload: the record's wins over the spec's, which fills the rest */
    assert_int_equal(s->prompts[0].workload, DRIFT_WL_CHAT);
    assert_int_equal(s->prompts[1].workload, DRIFT_WL_MATH);
    assert_int_equal(s->prompts[2].workload, DRIFT_WL_SAFETY);
    /* references: "reference" string, "answer" number, "ideal" */
    assert_string_equal(s->prompts[0].reference_json, "{\"answer\":\"Bye.\"}");
    assert_string_equal(s->prompts[1].reference_json, "{\"answer\":\"5\"}");
    assert_string_equal(s->prompts[2].reference_json, "{\"answer\":\"red\"}");
    /* multi-turn kept, in order, roles and all */
    json_t *a = turns_of(&s->prompts[0]);
    assert_int_equal(json_array_size(a), 4);
    assert_turn(a, 0, "system", "You are terse.");
    assert_turn(a, 1, "user", "Say hi.");
    assert_turn(a, 2, "assistant", "Hi.");
    assert_turn(a, 3, "user", "Now say bye.");
    json_decref(a);
    /* the hash covers the turns: the same text in another turn is another prompt */
    drift_suite *t = NULL;
    drift_error err = {0};
    const char *alt = "{\"id\":\"greet\",\"messages\":[{\"role\":\"system\",\"content\":\"You are terse.\"},"
                      "{\"role\":\"user\",\"content\":\"Say hi.\"},{\"role\":\"user\",\"content\":\"Hi.\"},"
                      "{\"role\":\"user\",\"content\":\"Now say bye.\"}],\"reference\":\"Bye.\",\"workload\":\"chat\"}\n";
    assert_int_equal(drift_suite_parse("alt.jsonl", alt, strlen(alt), &t, &err), DRIFT_OK);
    assert_string_not_equal(t->prompts[0].hash, s->prompts[0].hash);
    drift_suite_free(t);
    /* renders: chat keeps the turns (mark and all); completions writes them out */
    const char *tid = NULL;
    char *chat = drift_prompt_render(&s->prompts[0], DRIFT_API_CHAT, &tid);
    assert_string_equal(tid, "messages/chat/v1");
    assert_string_equal(chat, s->prompts[0].input);
    free(chat);
    char *comp = drift_prompt_render(&s->prompts[0], DRIFT_API_COMPLETIONS, &tid);
    assert_string_equal(tid, "messages/completions/v1");
    assert_string_equal(comp, "System: You are terse.\n\nUser: Say hi.\nAssistant: Hi.\nUser: Now say bye.\nAssistant:");
    free(comp);
    drift_suite_free(s);
}

static void test_batch_input(void **state) {
    (void)state;
    drift_suite *s = load("batch_chat.jsonl", "?workload=chat", DRIFT_OK, NULL, NULL);
    assert_string_equal(s->format, "openai-batch");
    assert_int_equal(s->n, 2);
    assert_string_equal(s->prompts[0].prompt_id, "req-1");
    assert_string_equal(s->prompts[1].prompt_id, "req-2");
    assert_string_equal(s->prompts[0].reference_json, "{}");
    json_t *a = turns_of(&s->prompts[1]);
    assert_int_equal(json_array_size(a), 3);
    assert_turn(a, 1, "assistant", "Hello! How can I help?");
    json_decref(a);
    /* body's model/max_tokens/temperature are not part of the prompt */
    assert_null(strstr(s->prompts[0].input, "gpt-4o-mini"));
    assert_null(strstr(s->prompts[0].input, "max_tokens"));
    drift_suite_free(s);
    /* no workload anywhere: an error on line 1 */
    assert_null(load("batch_chat.jsonl", NULL, DRIFT_ERR_PARSE, "batch_chat.jsonl:1: field \"workload\" missing",
                     "format openai-batch"));
    assert_null(load("bad_batch_url.jsonl", "?workload=chat", DRIFT_ERR_PARSE, "bad_batch_url.jsonl:1: field \"url\"",
                     "/v1/embeddings"));
    /* a bad spec workload is refused before the file is read */
    assert_null(load("batch_chat.jsonl", "?workload=poetry", DRIFT_ERR_INVALID, "workload=poetry", NULL));
}

static void test_prompt_jsonl(void **state) {
    (void)state;
    drift_suite *s = load("prompts_plain.jsonl", NULL, DRIFT_OK, NULL, NULL);
    assert_string_equal(s->format, "prompt-jsonl");
    assert_int_equal(s->n, 2);
    assert_string_equal(s->prompts[0].prompt_id, "p1");
    assert_int_equal(s->prompts[0].workload, DRIFT_WL_CHAT);
    assert_string_equal(s->prompts[0].input, "Write a haiku about rain.");
    assert_null(drift_prompt_messages(s->prompts[0].input));
    assert_int_equal(s->prompts[1].workload, DRIFT_WL_MATH);
    assert_string_equal(s->prompts[1].reference_json, "{\"answer\":\"42\"}");
    /* a plain prompt renders through its workload's template as before */
    const char *tid = NULL;
    char *r = drift_prompt_render(&s->prompts[1], DRIFT_API_COMPLETIONS, &tid);
    assert_string_equal(r, "Question: What is 7*6? End with #### N.\nAnswer:");
    free(r);
    drift_suite_free(s);
    /* a bare {"prompt"} file is still the paper's chat file, hashes unchanged */
    drift_suite *t = NULL;
    drift_error err = {0};
    const char *bare = "{\"prompt\":\"hello\"}\n";
    assert_int_equal(drift_suite_parse("bare.jsonl", bare, strlen(bare), &t, &err), DRIFT_OK);
    assert_string_equal(t->format, "paper-jsonl");
    drift_suite_free(t);
}

static void test_errors(void **state) {
    (void)state;
    assert_null(load("bad_messages_role.jsonl", NULL, DRIFT_ERR_PARSE,
                     "bad_messages_role.jsonl:3: field \"messages\"[0].role is \"robot\"", NULL));
    assert_null(load("bad_messages_last.jsonl", NULL, DRIFT_ERR_PARSE, "bad_messages_last.jsonl:1: field \"messages\"",
                     "last message is from \"assistant\""));
    assert_null(load("bad_messages_noworkload.jsonl", NULL, DRIFT_ERR_PARSE,
                     "bad_messages_noworkload.jsonl:2: field \"workload\" missing", NULL));
    static const struct {
        const char *data, *frag;
    } bad[] = {
        {"{\"messages\":[],\"workload\":\"chat\"}", "x.jsonl:1: field \"messages\" is empty"},
        {"{\"messages\":\"hi\",\"workload\":\"chat\"}", "x.jsonl:1: field \"messages\" is not an array (it is a string)"},
        {"{\"messages\":[{\"role\":\"user\"}],\"workload\":\"chat\"}", "field \"messages\"[0].content missing"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":[1]}],\"workload\":\"chat\"}",
         "field \"messages\"[0].content is not a string: it is an array"},
        {"{\"messages\":[{\"content\":\"x\"}],\"workload\":\"chat\"}", "field \"messages\"[0].role missing"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"workload\":\"poetry\"}",
         "field \"workload\" is \"poetry\""},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"workload\":\"chat\",\"reference\":[1]}",
         "field \"reference\" is an array"},
        {"{\"custom_id\":\"a\",\"body\":{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]},\"workload\":\"chat\"}\n"
         "{\"custom_id\":\"a\",\"body\":{\"messages\":[{\"role\":\"user\",\"content\":\"y\"}]},\"workload\":\"chat\"}",
         "x.jsonl:2: duplicate prompt id \"a\" (first on line 1)"},
        {"{\"custom_id\":\"a\",\"body\":{},\"workload\":\"chat\"}", "x.jsonl:1: field \"body.messages\" missing"},
        {"{\"custom_id\":\"a\",\"method\":\"GET\",\"body\":{},\"workload\":\"chat\"}", "field \"method\" is \"GET\""},
        {"{\"custom_id\":\"\",\"body\":{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]},\"workload\":\"chat\"}",
         "field \"custom_id\" is empty"},
        {"{\"id\":\"p\",\"prompt\":\"a\"}", "x.jsonl:1: field \"workload\" missing (format prompt-jsonl)"},
        {"{\"custom_id\":\"a\",\"body\":{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]},\"workload\":\"chat\"}\n"
         "{\"custom_id\":\"b\",\"workload\":\"chat\"}",
         "x.jsonl:2: field \"body\" is not an object (it is missing)"},
        {"{\"prompt_id\":\"a\",\"workload\":\"chat\",\"input\":\"x\",\"reference\":{}}\n"
         "{\"prompt_id\":\"b\",\"workload\":\"chat\",\"input\":\"y\"}",
         "x.jsonl:2: field \"reference\" is not an object (it is missing)"},
        {"{\"id\":\"a\",\"prompt\":\"\\u001emessages:[1]\",\"workload\":\"chat\"}",
         "x.jsonl:1: field \"input (after the messages mark)\"[0] is not an object"},
        {"{\"id\":\"a\",\"prompt\":\"\\u001emessages:{\",\"workload\":\"chat\"}",
         "x.jsonl:1: the input starts with the messages mark but is not a JSON messages array"},
        {"{\"nothing\":1}", "chat messages JSONL"},
        {"{\"nothing\":1}", "OpenAI batch API input"},
        {"{\"nothing\":1}", "prompt JSONL"},
        {"{\"nothing\":1}", "DriftBench export"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        drift_suite *s = NULL;
        drift_error err = {0};
        drift_status rc = drift_suite_parse("x.jsonl", bad[i].data, strlen(bad[i].data), &s, &err);
        if (rc != DRIFT_ERR_PARSE || !strstr(err.msg, bad[i].frag))
            fprintf(stderr, "case %zu: rc %d \"%s\" (want \"%s\")\n", i, rc, err.msg, bad[i].frag);
        assert_int_equal(rc, DRIFT_ERR_PARSE);
        assert_null(s);
        assert_non_null(strstr(err.msg, bad[i].frag));
    }
}

/* A DriftBench export of a messages suite loads back to the same prompts. */
static void test_export_round_trip(void **state) {
    (void)state;
    drift_suite *s = load("messages_chat.jsonl", "?workload=chat", DRIFT_OK, NULL, NULL);
    util_buf b = {0};
    for (size_t i = 0; i < s->n; i++) {
        json_t *ref = json_loads(s->prompts[i].reference_json, 0, NULL);
        json_t *o = json_pack("{s:s,s:s,s:s,s:o}", "prompt_id", s->prompts[i].prompt_id, "workload",
                              drift_workload_name(s->prompts[i].workload), "input", s->prompts[i].input, "reference", ref);
        char *line = json_dumps(o, JSON_COMPACT);
        assert_int_equal(buf_printf(&b, "%s\n", line), 0);
        free(line);
        json_decref(o);
    }
    drift_suite *t = NULL;
    drift_error err = {0};
    assert_int_equal(drift_suite_parse("export.jsonl", b.data, b.len, &t, &err), DRIFT_OK);
    assert_string_equal(t->format, "driftbench-jsonl");
    assert_int_equal(t->n, s->n);
    for (size_t i = 0; i < s->n; i++) {
        assert_string_equal(t->prompts[i].input, s->prompts[i].input);
        assert_string_equal(t->prompts[i].hash, s->prompts[i].hash);
        const char *tid = NULL;
        char *r = drift_prompt_render(&t->prompts[i], DRIFT_API_COMPLETIONS, &tid);
        assert_string_equal(tid, "messages/completions/v1");
        free(r);
    }
    drift_suite_free(t);
    drift_suite_free(s);
    buf_free(&b);
}

/* The HTTP chat request carries a messages prompt's turns; a plain prompt
 * after it goes back to one user turn. */
static void test_http_chat_body(void **state) {
    (void)state;
    drift_suite *s = load("messages_chat.jsonl", "?workload=chat", DRIFT_OK, NULL, NULL);
    drift_gen_params gp = {.temperature = 0, .top_p = 1, .seed = 7, .max_tokens = 16};
    json_t *tmpl = eng_http_request_template(DRIFT_API_CHAT, "m", &gp, NULL);
    assert_non_null(tmpl);
    util_buf out = {0};
    drift_error err = {0};
    char *r = drift_prompt_render(&s->prompts[0], DRIFT_API_CHAT, NULL);
    int64_t seed = 7;
    assert_int_equal(eng_http_request_render(tmpl, DRIFT_API_CHAT, NULL, r, &seed, &out, &err), 0);
    json_t *body = json_loads(out.data, 0, NULL);
    json_t *m = json_object_get(body, "messages");
    assert_int_equal(json_array_size(m), 4);
    assert_turn(m, 0, "system", "You are terse.");
    assert_turn(m, 2, "assistant", "Hi.");
    assert_turn(m, 3, "user", "Now say bye.");
    assert_int_equal(json_integer_value(json_object_get(body, "max_tokens")), 16);
    json_decref(body);
    /* the target's system prompt does not replace the turns' own */
    assert_int_equal(eng_http_request_render(tmpl, DRIFT_API_CHAT, "Be verbose.", r, &seed, &out, &err), 0);
    free(r);
    body = json_loads(out.data, 0, NULL);
    m = json_object_get(body, "messages");
    assert_int_equal(json_array_size(m), 4);
    assert_turn(m, 0, "system", "You are terse.");
    json_decref(body);
    seed = 8;
    assert_int_equal(eng_http_request_render(tmpl, DRIFT_API_CHAT, NULL, "plain text", &seed, &out, &err), 0);
    body = json_loads(out.data, 0, NULL);
    m = json_object_get(body, "messages");
    assert_int_equal(json_array_size(m), 1);
    assert_turn(m, 0, "user", "plain text");
    json_decref(body);
    buf_free(&out);
    json_decref(tmpl);
    drift_suite_free(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_messages_jsonl), cmocka_unit_test(test_batch_input), cmocka_unit_test(test_prompt_jsonl),
        cmocka_unit_test(test_errors),         cmocka_unit_test(test_http_chat_body),
        cmocka_unit_test(test_export_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
