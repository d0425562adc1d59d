/* test_config_kv.c - util_config_apply (src/util/config_kv.c), the one
 * reader of --config k=v,... for run and import: good specs set strings
 * over what the object held; every bad item (no '=', empty key or value,
 * a key outside a-z 0-9 _ -, a key given twice, a value not UTF-8) is
 * DRIFT_ERR_INVALID with a message naming it, and leaves the object as it
 * was, even when good items came before the bad one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "driftbench/status.h"
#include "util/json_util.h"

static json_t *start_obj(void) {
    json_t *o = json_pack("{s:s, s:s}", "model", "detected", "precision", "fp16");
    assert_non_null(o);
    return o;
}

static char *dump(const json_t *o) {
    char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    assert_non_null(s);
    return s;
}

/* spec applied to start_obj() gives want (sorted compact JSON). */
static void expect_good(const char *spec, const char *want) {
    json_t *o = start_obj();
    drift_error err = {0};
    assert_int_equal(util_config_apply(o, spec, &err), DRIFT_OK);
    char *got = dump(o);
    assert_string_equal(got, want);
    free(got);
    json_decref(o);
}

static void test_good_specs(void **state) {
    (void)state;
    const char *untouched = "{\"model\":\"detected\",\"precision\":\"fp16\"}";
    expect_good(NULL, untouched);
    expect_good("", untouched);
    expect_good(",,", untouched);
    expect_good("hardware=h100", "{\"hardware\":\"h100\",\"model\":\"detected\",\"precision\":\"fp16\"}");
    /* the spec wins over what the object held */
    expect_good("model=llama-3.1-8b,framework=vllm",
                "{\"framework\":\"vllm\",\"model\":\"llama-3.1-8b\",\"precision\":\"fp16\"}");
    /* empty items skipped; the value is everything after the first '=' */
    expect_good(",batch_size=2,,extra=a=b,", "{\"batch_size\":\"2\",\"extra\":\"a=b\",\"model\":\"detected\","
                                             "\"precision\":\"fp16\"}");
    /* any UTF-8 text is a value */
    expect_good("note=caf\xc3\xa9 au lait", "{\"model\":\"detected\",\"note\":\"caf\xc3\xa9 au lait\","
                                            "\"precision\":\"fp16\"}");
}

/* spec refused with a message holding want; the object unchanged. */
static void expect_bad(const char *spec, const char *want) {
    json_t *o = start_obj();
    char *before = dump(o);
    drift_error err = {0};
    assert_int_equal(util_config_apply(o, spec, &err), DRIFT_ERR_INVALID);
    if (!strstr(err.msg, want)) fail_msg("spec '%s': message '%s' lacks '%s'", spec, err.msg, want);
    assert_non_null(strstr(err.msg, "--config: "));
    char *after = dump(o);
    assert_string_equal(after, before);
    free(before);
    free(after);
    json_decref(o);
}

static void test_bad_specs(void **state) {
    (void)state;
    expect_bad("nonsense", "'nonsense' is not key=value (expected e.g. model=");
    expect_bad("model=tiny,nonsense", "'nonsense' is not key=value");
    expect_bad("=h100", "'=h100' is not key=value");
    expect_bad("hardware=", "'hardware=' is not key=value");
    expect_bad("hardware=h100,=", "'=' is not key=value");
    expect_bad("Hardware=h100", "key 'Hardware' may only use a-z, 0-9, '_' and '-'");
    expect_bad("gpu type=h100", "key 'gpu type' may only use");
    expect_bad("model.name=x", "key 'model.name' may only use");
    expect_bad("caf\xc3\xa9=x", "may only use a-z");
    expect_bad("model=a,hardware=h100,model=b", "key 'model' is given twice");
    expect_bad("precision=fp8,precision=fp8", "key 'precision' is given twice");
    expect_bad("note=\xff\xfe", "the value of 'note' is not valid UTF-8");
    expect_bad("hardware=h100,note=caf\xc3", "the value of 'note' is not valid UTF-8");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_specs),
        cmocka_unit_test(test_bad_specs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
