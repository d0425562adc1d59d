/* test_util.c - the internal helpers of src/util/: base64 against the test
 * vectors of RFC 4648 section 10, round trips of every length 0..5 and of
 * all 256 byte values, and malformed text refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_b64_rfc4648),
        cmocka_unit_test(test_b64_roundtrip),
        cmocka_unit_test(test_b64_invalid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
