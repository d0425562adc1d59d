/* test_stack_probe.c - the parsers of what a serving stack says it is
 * (engine/stack_probe.c): each server's documented reply shape -> the
 * dimensions it gives; junk, wrong types, overlong or control-character
 * strings, another server's shape -> nothing; members already set are kept.
 * The sample replies follow the docs named at the top of stack_probe.c
 * (shortened; the values are made up). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/http_internal.h"

static json_t *parse(eng_probe_kind k, const char *body, int *n) {
    json_t *d = json_object();
    *n = eng_stack_parse(k, body, strlen(body), d);
    return d;
}

static const char *str(const json_t *d, const char *k) { return json_string_value(json_object_get(d, k)); }

static void test_driftbench(void **state) {
    (void)state;
    int n;
    json_t *d = parse(ENG_PROBE_DRIFTBENCH,
                      "{\"framework\":\"driftbench-embedded/cpu/x\",\"version\":\"0.9\",\"model\":\"tiny\","
                      "\"model_name\":\"Tiny\",\"hardware\":\"cpu-avx2\",\"precision\":\"f32\",\"profile\":\"cpu-f32\","
                      "\"n_ctx\":512}",
                      &n);
    assert_int_equal(n, 6);
    assert_string_equal(str(d, "framework"), "driftbench-embedded/cpu/x");
    assert_string_equal(str(d, "framework_version"), "0.9");
    assert_string_equal(str(d, "hardware"), "cpu-avx2");
    assert_string_equal(str(d, "precision"), "f32");
    assert_string_equal(str(d, "server_model"), "tiny");
    json_decref(d);
    /* a framework that is not ours: not our endpoint */
    d = parse(ENG_PROBE_DRIFTBENCH, "{\"framework\":\"other\",\"precision\":\"f32\"}", &n);
    assert_int_equal(n, 0);
    assert_int_equal(json_object_size(d), 0);
    json_decref(d);
}

static void test_sglang(void **state) {
    (void)state;
    int n;
    json_t *d = parse(ENG_PROBE_SGLANG,
                      "{\"model_path\":\"Qwen/Qwen2.5-7B-Instruct\",\"tokenizer_path\":\"Qwen/Qwen2.5-7B-Instruct\","
                      "\"dtype\":\"bfloat16\",\"quantization\":null,\"tp_size\":2,\"version\":\"0.4.1\","
                      "\"port\":30000}",
                      &n);
    assert_string_equal(str(d, "framework"), "sglang");
    assert_string_equal(str(d, "framework_version"), "0.4.1");
    assert_string_equal(str(d, "server_model"), "Qwen/Qwen2.5-7B-Instruct");
    assert_string_equal(str(d, "precision"), "bfloat16");
    assert_int_equal(json_integer_value(json_object_get(d, "tensor_parallel")), 2);
    assert_int_equal(n, 5);
    json_decref(d);
    /* a quantization names the weights' format; dtype auto says nothing */
    d = parse(ENG_PROBE_SGLANG, "{\"model_path\":\"m\",\"dtype\":\"auto\",\"quantization\":\"fp8\"}", &n);
    assert_string_equal(str(d, "precision"), "fp8");
    json_decref(d);
    d = parse(ENG_PROBE_SGLANG, "{\"model_path\":\"m\",\"dtype\":\"auto\"}", &n);
    assert_null(json_object_get(d, "precision"));
    json_decref(d);
}

static void test_llamacpp(void **state) {
    (void)state;
    int n;
    json_t *d = parse(ENG_PROBE_LLAMACPP,
                      "{\"default_generation_settings\":{\"n_ctx\":4096,\"temperature\":0.8},\"total_slots\":4,"
                      "\"model_alias\":\"qwen\",\"model_path\":\"/m/qwen.gguf\",\"build_info\":\"b4500-abc\","
                      "\"chat_template\":\"...\"}",
                      &n);
    assert_string_equal(str(d, "framework"), "llama.cpp");
    assert_string_equal(str(d, "framework_version"), "b4500-abc");
    assert_string_equal(str(d, "server_model"), "qwen");
    assert_int_equal(json_integer_value(json_object_get(d, "n_ctx")), 4096);
    assert_null(json_object_get(d, "precision"));
    json_decref(d);
}

static void test_tgi(void **state) {
    (void)state;
    int n;
    json_t *d = parse(ENG_PROBE_TGI,
                      "{\"model_id\":\"bigscience/blomm-560m\",\"model_sha\":\"e985a63\",\"model_dtype\":\"torch.float16\","
                      "\"model_device_type\":\"cuda\",\"max_concurrent_requests\":128,\"version\":\"2.0.1\","
                      "\"sha\":\"abc\",\"router\":\"text-generation-router\"}",
                      &n);
    assert_int_equal(n, 5);
    assert_string_equal(str(d, "framework"), "tgi");
    assert_string_equal(str(d, "framework_version"), "2.0.1");
    assert_string_equal(str(d, "precision"), "torch.float16");
    assert_string_equal(str(d, "hardware"), "cuda");
    assert_string_equal(str(d, "server_model"), "bigscience/blomm-560m");
    json_decref(d);
}

static void test_vllm_and_models(void **state) {
    (void)state;
    int n;
    json_t *d = parse(ENG_PROBE_VLLM, "{\"version\":\"0.6.3\"}", &n);
    assert_int_equal(n, 1);
    assert_string_equal(str(d, "framework_version"), "0.6.3");
    /* /models adds the framework; the version already there is kept */
    const char *models = "{\"object\":\"list\",\"data\":[{\"id\":\"m\",\"object\":\"model\",\"owned_by\":\"vllm\"}]}";
    n = eng_stack_parse(ENG_PROBE_MODELS, models, strlen(models), d);
    assert_int_equal(n, 2);
    assert_string_equal(str(d, "framework"), "vllm");
    assert_string_equal(str(d, "server_model"), "m");
    json_decref(d);
    /* another owner: the model, no framework */
    d = parse(ENG_PROBE_MODELS, "{\"data\":[{\"id\":\"gpt\",\"owned_by\":\"openai\"}]}", &n);
    assert_null(json_object_get(d, "framework"));
    assert_string_equal(str(d, "server_model"), "gpt");
    json_decref(d);
    d = parse(ENG_PROBE_MODELS, "{\"data\":[{\"id\":\"x\",\"owned_by\":\"llamacpp\"}]}", &n);
    assert_string_equal(str(d, "framework"), "llama.cpp");
    json_decref(d);
    /* a /version with more than a version is not vLLM's */
    d = parse(ENG_PROBE_VLLM, "{\"version\":\"1\",\"name\":\"x\"}", &n);
    assert_int_equal(n, 0);
    json_decref(d);
}

static void test_kept(void **state) {
    (void)state;
    json_t *d = json_pack("{s:s}", "precision", "user-set");
    const char *b = "{\"model_id\":\"m\",\"model_dtype\":\"f16\",\"version\":\"1\"}";
    eng_stack_parse(ENG_PROBE_TGI, b, strlen(b), d);
    assert_string_equal(str(d, "precision"), "user-set");
    assert_string_equal(str(d, "framework"), "tgi");
    json_decref(d);
}

static void test_junk(void **state) {
    (void)state;
    static const char *const junk[] = {
        "", "not json", "[]", "null", "42", "\"s\"", "{", "{\"version\":1}", "{\"version\":\"\"}",
        "{\"version\":\"a\\nb\"}", "{\"version\":\"a\\u0001b\"}", "{\"model_path\":7}",
        "{\"model_path\":\"m\",\"model_path\":\"n\"}", "{\"build_info\":[]}", "{\"model_id\":\"m\"}",
        "{\"data\":{}}", "{\"data\":[]}", "{\"data\":[7]}", "{\"framework\":null}",
    };
    for (size_t i = 0; i < sizeof junk / sizeof *junk; i++)
        for (int k = 0; k < ENG_PROBE_COUNT; k++) {
            json_t *d = json_object();
            int n = eng_stack_parse((eng_probe_kind)k, junk[i], strlen(junk[i]), d);
            if (n != 0 || json_object_size(d) != 0) fail_msg("junk %zu gave %d members to kind %d", i, n, k);
            json_decref(d);
        }
    /* a string past ENG_PROBE_MAX_VALUE is no level */
    char big[ENG_PROBE_MAX_VALUE + 64];
    int w = snprintf(big, sizeof big, "{\"version\":\"");
    memset(big + w, 'a', ENG_PROBE_MAX_VALUE + 1);
    strcpy(big + w + ENG_PROBE_MAX_VALUE + 1, "\"}");
    json_t *d = json_object();
    assert_int_equal(eng_stack_parse(ENG_PROBE_VLLM, big, strlen(big), d), 0);
    big[w + ENG_PROBE_MAX_VALUE] = '"'; /* exactly the limit: kept */
    big[w + ENG_PROBE_MAX_VALUE + 1] = '}';
    big[w + ENG_PROBE_MAX_VALUE + 2] = '\0';
    assert_int_equal(eng_stack_parse(ENG_PROBE_VLLM, big, strlen(big), d), 1);
    json_decref(d);
    /* a body past ENG_PROBE_MAX_BODY is not parsed; NULL dims or body: nothing */
    d = json_object();
    assert_int_equal(eng_stack_parse(ENG_PROBE_VLLM, "{\"version\":\"1\"}", ENG_PROBE_MAX_BODY + 1, d), 0);
    assert_int_equal(eng_stack_parse(ENG_PROBE_VLLM, NULL, 5, d), 0);
    assert_int_equal(eng_stack_parse(ENG_PROBE_VLLM, "{\"version\":\"1\"}", 15, NULL), 0);
    assert_int_equal(eng_stack_parse(ENG_PROBE_COUNT, "{\"version\":\"1\"}", 15, d), 0);
    json_decref(d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_driftbench), cmocka_unit_test(test_sglang), cmocka_unit_test(test_llamacpp),
        cmocka_unit_test(test_tgi),        cmocka_unit_test(test_vllm_and_models), cmocka_unit_test(test_kept),
        cmocka_unit_test(test_junk),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
