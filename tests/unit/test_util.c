/* test_util.c - the internal helpers of src/util/: base64 against the test
 * vectors of RFC 4648 section 10, round trips of every length 0..5 and of
 * all 256 byte values, and malformed text refused; the sanitiser
 * (sanitize.h): each class of hostile text escaped as documented, the
 * output safe (hostile.h's check) and idempotent, and JSON hardened
 * without changing what it parses to; the redaction
 * (drift_redact, redact.c): a table of cases, a fuzz of random URLs,
 * connection strings and messages holding a marker password (the marker
 * never survives; the same texts without secrets come back unchanged),
 * util_target_record, and drift_error_set / drift_error_prefix (a secret
 * past the message's cut still redacted). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "driftbench/status.h"
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

/* ---- redaction ---- */

static void expect_redact(const char *in, const char *want) {
    char *got = drift_redact(in);
    assert_non_null(got);
    if (strcmp(got, want)) fail_msg("redact '%s'\n  got  '%s'\n  want '%s'", in, got, want);
    char *again = drift_redact(got); /* idempotent */
    assert_string_equal(again, got);
    free(again);
    free(got);
}

static void test_redact_cases(void **state) {
    (void)state;
    static const struct { const char *in, *want; } cases[] = {
        /* userinfo: raw and escaped '@', '/', '%' in the password */
        {"postgresql://bob:s3cret@db.example/drift", "postgresql://bob:***@db.example/drift"},
        {"postgresql://bob:p@ss/w@rd@db.example:5432/drift?sslmode=require",
         "postgresql://bob:***@db.example:5432/drift?sslmode=require"},
        {"postgres://bob:p%40ss%2Fw%25rd@/drift?host=/run/pg", "postgres://bob:***@/drift?host=/run/pg"},
        {"postgresql://bob:50%@h/db", "postgresql://bob:***@h/db"},
        {"http://u:pw@127.0.0.1:8000/v1?model=m", "http://u:***@127.0.0.1:8000/v1?model=m"},
        {"https://u:a:b:c@[::1]:8000/v1", "https://u:***@[::1]:8000/v1"},
        /* query and key=value secrets */
        {"postgresql://h/db?password=s3cret&sslmode=require", "postgresql://h/db?password=***&sslmode=require"},
        {"http://h/v1?model=m&api_key=sk-1&Token=t&KEY=k", "http://h/v1?model=m&api_key=***&Token=***&KEY=***"},
        {"host=/run/pg dbname=d password=s3cr&t user=u", "host=/run/pg dbname=d password=*** user=u"},
        {"host=/run/pg password = 'a b\\'c' dbname=d", "host=/run/pg password = '***' dbname=d"},
        {"sslpassword=x access_token=y client_secret=z", "sslpassword=*** access_token=*** client_secret=***"},
        /* in messages */
        {"connect to \"postgresql://u:pw@h/db\" failed", "connect to \"postgresql://u:***@h/db\" failed"},
        {"a http://u:p@h/x and https://v:q@k/y", "a http://u:***@h/x and https://v:***@k/y"},
        {"host=/x password=***: cannot connect", "host=/x password=***: cannot connect"},
        /* nothing to hide: unchanged */
        {"postgresql://bob@db.example/drift", "postgresql://bob@db.example/drift"},
        {"postgresql://bob:@h/db", "postgresql://bob:@h/db"},
        {"http://127.0.0.1:8000/v1?model=m&api_key_env=MY_KEY&allow_insecure_key=1",
         "http://127.0.0.1:8000/v1?model=m&api_key_env=MY_KEY&allow_insecure_key=1"},
        {"http://h/v1?model=a@b&monkey=1&keyboard=2&max_tokens=3", "http://h/v1?model=a@b&monkey=1&keyboard=2&max_tokens=3"},
        {"embedded:models/qwen2-7m.gguf?profile=ref&kernel=avx2", "embedded:models/qwen2-7m.gguf?profile=ref&kernel=avx2"},
        {"profile: 'nonsense' is not key=value", "profile: 'nonsense' is not key=value"},
        {"password= ", "password= "},
        {"ref@qwen2-7m me@example.com", "ref@qwen2-7m me@example.com"},
        {"", ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) expect_redact(cases[i].in, cases[i].want);
    assert_null(drift_redact(NULL));
}

#define MARKER "SECRETMARK"
/* Random text from an alphabet without capitals, so nothing but the
 * marker itself can spell it. */
static const char LOW[] = "abcdefghijklmnopqrstuvwxyz0123456789";

static void rnd_word(util_rng *r, util_buf *b, const char *alpha, int min, int max) {
    int n = min + (int)util_rng_below(r, (uint64_t)(max - min + 1));
    size_t na = strlen(alpha);
    for (int i = 0; i < n; i++) buf_append(b, &alpha[util_rng_below(r, na)], 1);
}

/* A password holding the marker: random text of `alpha` around it, each
 * byte of which `escape` may write as %XX. */
static void rnd_password(util_rng *r, util_buf *b, const char *alpha, int escape) {
    util_buf raw = {0};
    rnd_word(r, &raw, alpha, 0, 6);
    buf_puts(&raw, MARKER);
    rnd_word(r, &raw, alpha, 0, 6);
    for (size_t i = 0; i < raw.len; i++) {
        unsigned char c = (unsigned char)raw.data[i];
        if (escape && !(c >= 'A' && c <= 'Z') && util_rng_below(r, 3) == 0) buf_printf(b, "%%%02X", c);
        else buf_append(b, &raw.data[i], 1);
    }
    buf_free(&raw);
}

static void rnd_host(util_rng *r, util_buf *b) {
    switch (util_rng_below(r, 4)) {
    case 0: rnd_word(r, b, LOW, 1, 8); buf_puts(b, ".example"); break;
    case 1: buf_printf(b, "10.%u.%u.%u", (unsigned)util_rng_below(r, 256), (unsigned)util_rng_below(r, 256),
                       (unsigned)util_rng_below(r, 256)); break;
    case 2: buf_puts(b, "[::1]"); break;
    default: break; /* none: a Unix socket in the query */
    }
    if (util_rng_below(r, 2)) buf_printf(b, ":%u", 1 + (unsigned)util_rng_below(r, 65535));
}

static const char *const SCHEMES[] = {"postgresql", "postgres", "http", "https"};
static const char *const SECRET_KEYS[] = {"password", "PassWord", "api_key", "key", "token", "sslpassword",
                                          "access_token", "secret", "apikey", "passwd"};
static const char *const PLAIN_KEYS[] = {"model", "api", "sslmode", "application_name", "embed_model", "api_key_env",
                                         "max_tokens", "monkey", "keyboard", "host", "options"};

/* "&k=v" params without secrets (the first one after '?' when first). */
static void rnd_params(util_rng *r, util_buf *b, int n, int first) {
    for (int i = 0; i < n; i++) {
        buf_puts(b, first && i == 0 ? "?" : "&");
        buf_puts(b, PLAIN_KEYS[util_rng_below(r, sizeof PLAIN_KEYS / sizeof PLAIN_KEYS[0])]);
        buf_puts(b, "=");
        rnd_word(r, b, "abcdefghijklmnopqrstuvwxyz0123456789/._-", 1, 10);
    }
}

/* A URL or connection string; with_secret: the marker in one of the forms. */
static void rnd_locator(util_rng *r, util_buf *b, int with_secret) {
    int form = (int)util_rng_below(r, 4);
    if (form == 3) { /* libpq key=value */
        buf_puts(b, "host=/tmp/");
        rnd_word(r, b, LOW, 1, 6);
        buf_puts(b, " dbname=");
        rnd_word(r, b, LOW, 1, 6);
        if (with_secret) {
            buf_puts(b, util_rng_below(r, 2) ? " password=" : " password = ");
            if (util_rng_below(r, 2)) { /* quoted: spaces and escaped quotes and backslashes allowed */
                static const char *const bits[] = {"a", "b c", "\\'", "\\\\", "@", "/", "%", "&", "=", ":"};
                buf_puts(b, "'");
                for (int k = (int)util_rng_below(r, 5); k > 0; k--) buf_puts(b, bits[util_rng_below(r, 10)]);
                buf_puts(b, MARKER);
                for (int k = (int)util_rng_below(r, 5); k > 0; k--) buf_puts(b, bits[util_rng_below(r, 10)]);
                buf_puts(b, "'");
            } else {
                rnd_password(r, b, "abcxyz@/%&=:!$()*+,;'", 0);
            }
        }
        buf_puts(b, " user=");
        rnd_word(r, b, LOW, 1, 6);
        return;
    }
    buf_puts(b, SCHEMES[util_rng_below(r, 4)]);
    buf_puts(b, "://");
    int userinfo_secret = with_secret && form != 2;
    if (userinfo_secret || util_rng_below(r, 2)) {
        rnd_word(r, b, LOW, 1, 6);
        if (userinfo_secret) {
            buf_puts(b, ":");
            rnd_password(r, b, "abcxyz0189@/%:!$&'()*+,;=-._~", form == 1);
        }
        buf_puts(b, "@");
    }
    rnd_host(r, b);
    buf_puts(b, "/");
    rnd_word(r, b, "abcdefghijklmnopqrstuvwxyz0123456789/._-", 0, 12);
    int np = (int)util_rng_below(r, 3);
    rnd_params(r, b, np, 1);
    if (with_secret && form == 2) { /* a secret parameter of the query */
        buf_puts(b, np ? "&" : "?");
        buf_puts(b, SECRET_KEYS[util_rng_below(r, sizeof SECRET_KEYS / sizeof SECRET_KEYS[0])]);
        buf_puts(b, "=");
        rnd_password(r, b, "abcxyz0189@/%:!$'()*+,;=-._~", 1);
        rnd_params(r, b, (int)util_rng_below(r, 3), 0);
    }
}

/* The locator alone, or inside a message as errors quote it. */
static void rnd_text(util_rng *r, util_buf *b, int with_secret) {
    static const char *const frames[][2] = {
        {"", ""}, {"could not connect to \"", "\": refused"}, {"target '", "': bad port"}, {"x ", " y"}};
    int f = (int)util_rng_below(r, 4);
    buf_puts(b, frames[f][0]);
    rnd_locator(r, b, with_secret);
    buf_puts(b, frames[f][1]);
}

static void test_redact_fuzz(void **state) {
    (void)state;
    util_rng r;
    util_rng_seed(&r, 34);
    for (int i = 0; i < 20000; i++) {
        util_buf in = {0};
        rnd_text(&r, &in, 1);
        if (!strstr(in.data, MARKER)) fail_msg("case %d: no marker in '%s'", i, in.data);
        char *out = drift_redact(in.data);
        assert_non_null(out);
        if (strstr(out, MARKER)) fail_msg("case %d: the marker survived\n  in  '%s'\n  out '%s'", i, in.data, out);
        assert_non_null(strstr(out, "***"));
        char *again = drift_redact(out);
        assert_string_equal(again, out);
        free(again);
        free(out);
        buf_free(&in);

        rnd_text(&r, &in, 0); /* no secret: unchanged */
        out = drift_redact(in.data);
        assert_non_null(out);
        if (strcmp(out, in.data)) fail_msg("case %d: a text without secrets changed\n  in  '%s'\n  out '%s'", i, in.data, out);
        free(out);
        buf_free(&in);
    }
}

static void test_target_record(void **state) {
    (void)state;
    static const struct { const char *in, *want; } cases[] = {
        {"http://u:pw@h:8000/v1?model=m&api_key_env=K&allow_insecure_key=1", "http://u:***@h:8000/v1?model=m"},
        {"http://h/v1?api_key_env=K&model=m", "http://h/v1?model=m"},
        {"http://h/v1?api_key_env=K", "http://h/v1"},
        {"http://h/v1?model=m&api=chat", "http://h/v1?model=m&api=chat"},
        {"http://h/v1?model=m&", "http://h/v1?model=m&"},
        {"embedded:m.gguf?profile=ref", "embedded:m.gguf?profile=ref"},
        {"import:lmeval:/data/x.jsonl", "import:lmeval:/data/x.jsonl"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *got = util_target_record(cases[i].in);
        assert_non_null(got);
        assert_string_equal(got, cases[i].want);
        free(got);
    }
}

static void test_error_messages_redacted(void **state) {
    (void)state;
    drift_error err = {0};
    assert_int_equal(drift_error_set(&err, DRIFT_ERR_STORE, "%s: cannot connect", "postgresql://u:p@ss" MARKER "@h/db"),
                     DRIFT_ERR_STORE);
    assert_string_equal(err.msg, "postgresql://u:***@h/db: cannot connect");
    /* the URL's '@' lies past the cut of the message: redacted before the cut */
    char pad[DRIFT_ERROR_MSG_MAX];
    memset(pad, 'x', sizeof pad - 40);
    pad[sizeof pad - 40] = '\0';
    drift_error_set(&err, DRIFT_ERR_STORE, "%s http://u:" MARKER "%s@h/", pad, "0123456789012345678901234567890123456789");
    assert_null(strstr(err.msg, "SECRET"));
    assert_null(strstr(err.msg, "0123"));
    assert_non_null(strstr(err.msg, " http://u:***@h/"));
    /* a prefix holding a secret, and an old message passed as an argument */
    drift_error_set(&err, DRIFT_ERR_HTTP, "HTTP 401");
    drift_error_prefix(&err, "target 'http://h/v1?token=%s': ", MARKER);
    /* (a bare value runs to whitespace: the quote after it goes too) */
    assert_string_equal(err.msg, "target 'http://h/v1?token=*** HTTP 401");
    drift_error_set(&err, DRIFT_ERR_HTTP, "%s (password=%s)", err.msg, MARKER);
    assert_null(strstr(err.msg, MARKER));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_b64_rfc4648),
        cmocka_unit_test(test_b64_roundtrip),
        cmocka_unit_test(test_b64_invalid),
        cmocka_unit_test(test_sanitize_classes),
        cmocka_unit_test(test_sanitize_hostile),
        cmocka_unit_test(test_json_harden),
        cmocka_unit_test(test_redact_cases),
        cmocka_unit_test(test_redact_fuzz),
        cmocka_unit_test(test_target_record),
        cmocka_unit_test(test_error_messages_redacted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
