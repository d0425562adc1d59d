/* test_traffic_privacy.c - what a traffic store keeps (traffic_privacy.h):
 * SHA-256 against FIPS 180-4's test vectors (one block, two blocks, a
 * million a's) and at the padding's edges (55 and 64 bytes, values from
 * Python's hashlib), the
 * built-in redaction kinds and regexes (JSON stays JSON, keys untouched),
 * the hashed form, and bad rules. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/traffic_privacy.h"

static void sha(const char *s, size_t n, const char *want) {
    char hex[65];
    drift_sha256_hex(s, n, hex);
    assert_string_equal(hex, want);
}

static void test_sha256(void **state) {
    (void)state;
    sha("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    sha("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    sha("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56,
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    char *m = malloc(1000000);
    memset(m, 'a', 1000000);
    sha(m, 1000000, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    /* lengths at the padding's edges (hashlib.sha256(b"a" * n).hexdigest()) */
    sha(m, 55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
    sha(m, 64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
    free(m);
}

static char *apply(const drift_traffic_privacy *p, const char *text, size_t *n) {
    char *out = NULL;
    drift_error err = {0};
    assert_int_equal(drift_traffic_privacy_apply(p, text, &out, n, &err), DRIFT_OK);
    return out;
}

static void test_redact(void **state) {
    (void)state;
    const char *rules[] = {"emails", "keys", "digits", "re:order-[A-Z]+"};
    drift_traffic_privacy *p = NULL;
    drift_error err = {0};
    assert_int_equal(drift_traffic_privacy_new("full", rules, 4, &p, &err), DRIFT_OK);
    assert_false(drift_traffic_privacy_is_full(p));
    assert_false(drift_traffic_privacy_hashes(p));
    size_t n = 0;
    char *r = apply(p, "{\"messages\":[{\"role\":\"user\",\"content\":\"mail ann.lee@example.co.uk, key "
                       "sk-abcdefghijklmnop1234, card 4111111111111111, order-XYZ, ok 12345\"}],\"email\":\"x\"}",
                    &n);
    assert_int_equal(n, 4);
    json_t *j = json_loads(r, 0, NULL);
    assert_non_null(j); /* still JSON */
    const char *c = json_string_value(json_object_get(json_array_get(json_object_get(j, "messages"), 0), "content"));
    assert_string_equal(c, "mail [REDACTED:emails], key [REDACTED:keys], card [REDACTED:digits], [REDACTED:re1], ok "
                           "12345");
    assert_string_equal(json_string_value(json_object_get(j, "email")), "x");
    json_decref(j);
    free(r);
    /* plain text (not JSON): the whole text */
    r = apply(p, "call me: bob@x.io", &n);
    assert_string_equal(r, "call me: [REDACTED:emails]");
    free(r);
    char *d = drift_traffic_privacy_describe(p);
    assert_non_null(strstr(d, "redacted by emails, keys, digits, re1"));
    free(d);
    drift_traffic_privacy_free(p);

    const char *ph[] = {"phones"};
    assert_int_equal(drift_traffic_privacy_new(NULL, ph, 1, &p, &err), DRIFT_OK);
    r = apply(p, "ring +1 (555) 010-2030 now", &n);
    assert_string_equal(r, "ring [REDACTED:phones] now");
    free(r);
    drift_traffic_privacy_free(p);
}

static void test_hashes(void **state) {
    (void)state;
    drift_traffic_privacy *p = NULL;
    drift_error err = {0};
    assert_int_equal(drift_traffic_privacy_new("hashes", NULL, 0, &p, &err), DRIFT_OK);
    assert_true(drift_traffic_privacy_hashes(p));
    char *r = apply(p, "abc", NULL);
    assert_string_equal(r, "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    assert_true(drift_traffic_privacy_is_hash(r));
    assert_false(drift_traffic_privacy_is_hash("sha256:abc"));
    assert_false(drift_traffic_privacy_is_hash("{\"content\":\"sha256:\"}"));
    free(r);
    char *d = drift_traffic_privacy_describe(p);
    assert_non_null(strstr(d, "only as SHA-256 hashes"));
    free(d);
    drift_traffic_privacy_free(p);
    /* the default says so */
    d = drift_traffic_privacy_describe(NULL);
    assert_non_null(strstr(d, "in full (no redaction)"));
    free(d);
    assert_true(drift_traffic_privacy_is_full(NULL));
    r = apply(NULL, "as is", NULL);
    assert_string_equal(r, "as is");
    free(r);
}

static void test_bad_rules(void **state) {
    (void)state;
    drift_traffic_privacy *p = NULL;
    drift_error err = {0};
    const char *bad1[] = {"passwords"}, *bad2[] = {"re:(unclosed"}, *bad3[] = {"re:x*"};
    assert_int_equal(drift_traffic_privacy_new(NULL, bad1, 1, &p, &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "unknown rule 'passwords'"));
    assert_int_equal(drift_traffic_privacy_new(NULL, bad2, 1, &p, &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "does not compile"));
    assert_int_equal(drift_traffic_privacy_new(NULL, bad3, 1, &p, &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "empty string"));
    assert_int_equal(drift_traffic_privacy_new("some", NULL, 0, &p, &err), DRIFT_ERR_INVALID);
    assert_null(p);
}

static void test_retention_parse(void **state) {
    (void)state;
    double age;
    int64_t keep;
    drift_error err = {0};
    assert_int_equal(drift_traffic_retention_parse("30d", &age, &keep, &err), DRIFT_OK);
    assert_true(age == 30 * 86400.0 && keep == -1);
    assert_int_equal(drift_traffic_retention_parse("0.5d", &age, &keep, &err), DRIFT_OK);
    assert_true(age == 43200.0);
    assert_int_equal(drift_traffic_retention_parse("12h", &age, &keep, &err), DRIFT_OK);
    assert_true(age == 43200.0);
    assert_int_equal(drift_traffic_retention_parse("1000", &age, &keep, &err), DRIFT_OK);
    assert_true(age == -1 && keep == 1000);
    const char *bad[] = {"", "d", "-3d", "30days", "1.5", "0", "1e3", "x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(drift_traffic_retention_parse(bad[i], &age, &keep, &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "retention: 'x'"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha256),
        cmocka_unit_test(test_redact),
        cmocka_unit_test(test_hashes),
        cmocka_unit_test(test_bad_rules),
        cmocka_unit_test(test_retention_parse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
