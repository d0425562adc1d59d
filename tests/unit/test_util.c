/* test_util.c - the internal helpers of src/util/: base64 against the test
 * vectors of RFC 4648 section 10, round trips of every length 0..5 and of
 * all 256 byte values, and malformed text refused; the sanitiser
 * (sanitize.h): each class of hostile text escaped as documented, the
 * output safe (hostile.h's check) and idempotent, and JSON hardened
 * without changing what it parses to. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "unit/hostile.h"
#include "util/sanitize.h"
#include "util/util.h"

/* RFC 4648 section 10 */
static const struct { const char *plain, *enc; } rfc_vectors[] = {
    {"", ""},         {"f", "Zg=="},         {"fo", "Zm8="},         {"foo", "Zm9v"},
    {"foob", "Zm9vYg=="}, {"fooba", "Zm9vYmE="}, {"foobar", "Zm9vYmFy"},
};

static void test_b64_rfc4648(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof rfc_vectors / sizeof rfc_vectors[0]; i++) {
        const char *plain = rfc_vectors[i].plain, *enc = rfc_vectors[i].enc;
        char *e = util_b64_encode(plain, strlen(plain));
        assert_non_null(e);
        assert_string_equal(e, enc);
        free(e);
        size_t n = 99;
        unsigned char *d = util_b64_decode(enc, &n);
        assert_non_null(d);
        assert_int_equal(n, strlen(plain));
        assert_memory_equal(d, plain, n);
        assert_int_equal(d[n], 0); /* NUL after the bytes */
        free(d);
    }
}

static void roundtrip(const unsigned char *v, size_t n) {
    char *e = util_b64_encode(v, n);
    assert_non_null(e);
    assert_int_equal(strlen(e), 4 * ((n + 2) / 3));
    size_t m = 0;
    unsigned char *d = util_b64_decode(e, &m);
    if (!d) fail_msg("length %zu: '%s' did not decode", n, e);
    assert_int_equal(m, n);
    if (n) assert_memory_equal(d, v, n);
    free(d);
    free(e);
}

static void test_b64_roundtrip(void **state) {
    (void)state;
    unsigned char all[256];
    for (int i = 0; i < 256; i++) all[i] = (unsigned char)(255 - i);
    /* every length 0..5 (each padding case, twice) with high and zero bytes */
    for (size_t n = 0; n <= 5; n++) {
        roundtrip(all, n);
        roundtrip(all + 250, n);
    }
    static const unsigned char zeros[5] = {0};
    for (size_t n = 0; n <= 5; n++) roundtrip(zeros, n);
    /* every byte value, at every offset mod 3 */
    for (size_t off = 0; off < 3; off++) roundtrip(all + off, 256 - off);
}

static void test_b64_invalid(void **state) {
    (void)state;
    static const char *const bad[] = {
        "Zg",        /* length not a multiple of 4 */
        "Zg=",       "Zm9vY",     "=",
        "Z===",      /* '=' too early in the quad */
        "====",
        "Zg=A",      /* data after padding */
        "Zg==Zm9v",  /* padding before the end */
        "Zm9v Zg=",  /* space */
        "Zm9v\nZg==", /* line break (length 9, and not allowed anyway) */
        "Zm9\nYmFy", /* line break inside, length a multiple of 4 */
        "Zm-v",      /* base64url alphabet */
        "Zm_v",
        "Zm9v!A==",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t n = 12345;
        unsigned char *d = util_b64_decode(bad[i], &n);
        if (d) fail_msg("'%s' decoded to %zu bytes", bad[i], n);
        assert_int_equal(n, 12345); /* untouched on failure */
    }
}

/* ---- the sanitiser ---- */

static void expect_san(const char *in, unsigned flags, const char *want) {
    char *got = util_sanitize(in, flags);
    assert_non_null(got);
    if (strcmp(got, want)) fail_msg("sanitised '%s' to '%s', expected '%s'", in, got, want);
    free(got);
}

static void test_sanitize_classes(void **state) {
    (void)state;
    expect_san("plain text, caf\xc3\xa9 \\x1b", UTIL_SAN_LINE, "plain text, caf\xc3\xa9 \\x1b");
    expect_san("a\x1b[2Kb\x07" "c\x7f", UTIL_SAN_LINE, "a\\x1b[2Kb\\x07c\\x7f");
    expect_san("l1\nl2\tx\r", UTIL_SAN_LINE, "l1\\nl2\\tx\\r");
    expect_san("l1\nl2\tx\r", UTIL_SAN_LINES, "l1\nl2\tx\\r");
    expect_san("\xc2\x9b" "31m", UTIL_SAN_LINE, "\\u009b31m");                 /* C1 CSI */
    expect_san("a\xe2\x80\xae" "b\xe2\x81\xa6" "c", UTIL_SAN_LINE, "a\\u202eb\\u2066c"); /* bidi */
    expect_san("\xef\xbf\xbe\xef\xbf\xbf", UTIL_SAN_LINE, "\\ufffe\\uffff");
    expect_san("a\xff" "b\xc0\xaf", UTIL_SAN_LINE, "a\xef\xbf\xbd" "b\xef\xbf\xbd\xef\xbf\xbd");
    /* workflow commands: "::" at a line's start (after whitespace), "##[" and "##vso[" anywhere */
    expect_san("::error::x", UTIL_SAN_LINE, "\\x3a:error::x");
    expect_san("  \xc2\xa0::error::x", UTIL_SAN_LINE, "  \xc2\xa0\\x3a:error::x");
    expect_san("a\n::error::x\n ::add-mask::s", UTIL_SAN_LINES, "a\n\\x3a:error::x\n \\x3a:add-mask::s");
    expect_san("a\n::error::x", UTIL_SAN_LINE, "a\\n::error::x");
    expect_san("key: a::b", UTIL_SAN_LINE, "key: a::b");
    expect_san("x ##[error]y ##vso[task.x]z", UTIL_SAN_LINE, "x ##\\x5berror]y ##vso\\x5btask.x]z");
    expect_san("\xe2\x80\x8d:\xe2\x80\x8d:e #\xe2\x80\x8d#[x", UTIL_SAN_LINE,
               "\xe2\x80\x8d\\x3a\xe2\x80\x8d:e #\xe2\x80\x8d#\\x5bx");
    expect_san("# heading [link]", UTIL_SAN_LINE, "# heading [link]");
    expect_san("", UTIL_SAN_LINE, "");
    /* the HTML dialect: markup as entities, the command patterns broken by entities that show the same */
    expect_san("a\n::error::x\r::e ##[y] <&>\"'\x1b\xc2\x9b", UTIL_SAN_LINES | UTIL_SAN_HTML,
               "a\n&#58;:error::x\r&#58;:e ##&#91;y] &lt;&amp;&gt;&quot;&#39;\xef\xbf\xbd\\u009b");
    char *empty = util_json_harden("");
    assert_string_equal(empty, "");
    free(empty);
    /* NUL bytes inside a length-given text */
    util_buf b = {0};
    assert_int_equal(util_sanitize_append(&b, "a\0b", 3, UTIL_SAN_LINE), 0);
    assert_string_equal(b.data, "a\\x00b");
    buf_free(&b);
    assert_int_equal(util_sanitize_pad(&b, "ab", 5, UTIL_SAN_LINE), 0);
    assert_string_equal(b.data, "ab   ");
    buf_free(&b);
}

static void test_sanitize_hostile(void **state) {
    (void)state;
    const char *in = HOSTILE;
    assert_non_null(hostile_check(in, strlen(in), 1)); /* the check sees the danger */
    for (unsigned flags = 0; flags < 2; flags++) {
        char *once = util_sanitize(in, flags);
        assert_non_null(once);
        const char *why = hostile_check(once, strlen(once), (int)flags);
        if (why) fail_msg("flags %u: %s in '%s'", flags, why, once);
        char *twice = util_sanitize(once, flags);
        assert_string_equal(once, twice); /* idempotent */
        free(twice);
        free(once);
    }
}

static void test_json_harden(void **state) {
    (void)state;
    json_t *o = json_pack("{s:s}", "id", "a\xc2\x9b\xe2\x80\xae ##[error]x \xef\xbf\xbe \xe2\x80\xa8 \x7f \xf0\x9f\xbf\xbe");
    assert_non_null(o);
    char *text = json_dumps(o, JSON_COMPACT);
    char *hard = util_json_harden(text);
    assert_non_null(hard);
    const char *why = hostile_check(hard, strlen(hard), 1);
    if (why) fail_msg("%s in '%s'", why, hard);
    json_error_t je;
    json_t *back = json_loads(hard, 0, &je);
    assert_non_null(back);
    assert_true(json_equal(o, back)); /* the same data */
    char *again = util_json_harden(hard);
    assert_string_equal(again, hard);
    free(again);
    json_decref(back);
    free(hard);
    free(text);
    json_decref(o);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_b64_rfc4648),
        cmocka_unit_test(test_b64_roundtrip),
        cmocka_unit_test(test_b64_invalid),
        cmocka_unit_test(test_sanitize_classes),
        cmocka_unit_test(test_sanitize_hostile),
        cmocka_unit_test(test_json_harden),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
