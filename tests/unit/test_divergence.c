/* test_divergence.c - where two answers part (divergence.c) on strings with
 * known answers: identical texts, a difference at the start, UTF-8
 * multi-byte and invalid bytes, words vs logprob tokens (margin and KL
 * against hand/python-computed values), malformed logprobs, the word diff's
 * rendering (context, long common runs, cut), the bounded LCS on long
 * texts, and drift_flip_divergence through a real store with logprobs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <time.h>

#include "compare_fixture.h"
#include "driftbench/compare.h"

static void near(double x, double y, double tol) {
    if (!(fabs(x - y) <= tol)) fail_msg("%.17g != %.17g (tol %g)", x, y, tol);
}

static drift_divergence div_of(const char *a, const char *al, const char *b, const char *bl) {
    drift_divergence d;
    drift_error err = {0};
    drift_status rc = drift_divergence_compute(a, al, b, bl, &d, &err);
    if (rc) fail_msg("divergence: %s", err.msg);
    return d;
}

static char *diff_of(const char *a, const char *b, size_t max_words, size_t max_chars) {
    char *s = NULL;
    drift_error err = {0};
    assert_int_equal(drift_word_diff(a, b, max_words, max_chars, &s, &err), DRIFT_OK);
    return s;
}

static void test_identical(void **state) {
    (void)state;
    drift_divergence d = div_of("same text", NULL, "same text", NULL);
    assert_true(d.identical);
    assert_int_equal(d.first_diff_byte, -1);
    assert_int_equal(d.first_diff_char, -1);
    assert_int_equal(d.first_diff_token, -1);
    assert_int_equal(d.token_unit, DRIFT_UNIT_NONE);
    assert_string_equal(d.diff, "");
    assert_true(isnan(d.margin) && isnan(d.kl));
    drift_divergence_clear(&d);
    d = div_of("", NULL, "", NULL);
    assert_true(d.identical);
    drift_divergence_clear(&d);
}

static void test_start_and_prefix(void **state) {
    (void)state;
    drift_divergence d = div_of("abc def", NULL, "xbc def", NULL);
    assert_false(d.identical);
    assert_int_equal(d.first_diff_byte, 0);
    assert_int_equal(d.first_diff_char, 0);
    assert_int_equal(d.first_diff_token, 0);
    assert_int_equal(d.token_unit, DRIFT_UNIT_WORD);
    assert_string_equal(d.diff, "[-abc-] {+xbc+} def");
    drift_divergence_clear(&d);
    /* one is a prefix of the other */
    d = div_of("abc", NULL, "abcdef", NULL);
    assert_int_equal(d.first_diff_byte, 3);
    assert_int_equal(d.first_diff_char, 3);
    assert_int_equal(d.first_diff_token, 0);
    assert_string_equal(d.diff, "[-abc-] {+abcdef+}");
    drift_divergence_clear(&d);
    /* the third word */
    d = div_of("one two three", NULL, "one two four", NULL);
    assert_int_equal(d.first_diff_byte, 8);
    assert_int_equal(d.first_diff_token, 2);
    assert_string_equal(d.diff, "one two [-three-] {+four+}");
    drift_divergence_clear(&d);
    /* an empty answer against a non-empty one */
    d = div_of("", NULL, "hello world", NULL);
    assert_int_equal(d.first_diff_byte, 0);
    assert_int_equal(d.first_diff_token, 0);
    assert_string_equal(d.diff, "{+hello world+}");
    drift_divergence_clear(&d);
    /* only whitespace differs: the word index is that of the next word */
    d = div_of("a  b c", NULL, "a b c", NULL);
    assert_int_equal(d.first_diff_byte, 2);
    assert_int_equal(d.first_diff_token, 1);
    assert_string_equal(d.diff, "(only whitespace differs)");
    drift_divergence_clear(&d);
}

static void test_utf8(void **state) {
    (void)state;
    /* "naïve café" vs "naïve cafè": é = C3 A9, è = C3 A8 share the lead
     * byte; the difference starts at the code point, byte 10, char 9 */
    drift_divergence d = div_of("na\xC3\xAFve caf\xC3\xA9 ok", NULL, "na\xC3\xAFve caf\xC3\xA8 ok", NULL);
    assert_int_equal(d.first_diff_byte, 10);
    assert_int_equal(d.first_diff_char, 9);
    assert_int_equal(d.first_diff_token, 1);
    assert_string_equal(d.diff, "na\xC3\xAFve [-caf\xC3\xA9-] {+caf\xC3\xA8+} ok");
    drift_divergence_clear(&d);
    /* a 4-byte emoji before the difference counts as one character */
    d = div_of("\xF0\x9F\x98\x80" "a", NULL, "\xF0\x9F\x98\x80" "b", NULL);
    assert_int_equal(d.first_diff_byte, 4);
    assert_int_equal(d.first_diff_char, 1);
    drift_divergence_clear(&d);
    /* two different emoji sharing three bytes: the difference is at byte 0 */
    d = div_of("\xF0\x9F\x98\x80", NULL, "\xF0\x9F\x98\x81", NULL);
    assert_int_equal(d.first_diff_byte, 0);
    assert_int_equal(d.first_diff_char, 0);
    drift_divergence_clear(&d);
    /* invalid bytes count one character each */
    d = div_of("\xFF\xFE" "a", NULL, "\xFF\xFE" "b", NULL);
    assert_int_equal(d.first_diff_byte, 2);
    assert_int_equal(d.first_diff_char, 2);
    drift_divergence_clear(&d);
    /* a truncated sequence (lead byte without its continuation) */
    d = div_of("x\xC3" "a", NULL, "x\xC3" "b", NULL);
    assert_int_equal(d.first_diff_byte, 2);
    assert_int_equal(d.first_diff_char, 2);
    drift_divergence_clear(&d);
}

static const char *LP_BASE =
    "[{\"token\":\"The\",\"logprob\":-0.01,\"top\":[{\"token\":\"The\",\"logprob\":-0.01}]},"
    "{\"token\":\" answer\",\"logprob\":-0.02,\"top\":[]},"
    "{\"token\":\" is\",\"logprob\":-0.03,\"top\":[{\"token\":\" is\",\"logprob\":-0.03}]},"
    "{\"token\":\" 4\",\"logprob\":-0.1,\"top\":[{\"token\":\" 5\",\"logprob\":-2.4},{\"token\":\" 4\",\"logprob\":-0.1}]}]";
static const char *LP_TARG =
    "[{\"token\":\"The\",\"logprob\":-0.01,\"top\":[]},"
    "{\"token\":\" answer\",\"logprob\":-0.02,\"top\":[]},"
    "{\"token\":\" is\",\"logprob\":-0.03,\"top\":[]},"
    "{\"token\":\" 5\",\"logprob\":-0.2,\"top\":[{\"token\":\" 5\",\"logprob\":-0.2},{\"token\":\" 4\",\"logprob\":-1.8}]}]";

static void test_logprob_tokens(void **state) {
    (void)state;
    drift_divergence d = div_of("The answer is 4", LP_BASE, "The answer is 5", LP_TARG);
    assert_int_equal(d.token_unit, DRIFT_UNIT_TOKEN);
    assert_int_equal(d.first_diff_token, 3);
    assert_int_equal(d.first_diff_char, 14);
    near(d.margin, 2.3, 1e-12); /* the top list is sorted here: -0.1 - (-2.4) */
    near(d.kl, 1.332975728332437, 1e-12); /* python reference, same union rule */
    assert_string_equal(d.diff, "The answer is [-4-] {+5+}");
    drift_divergence_clear(&d);

    /* only one side has logprobs: words */
    d = div_of("The answer is 4", LP_BASE, "The answer is 5", NULL);
    assert_int_equal(d.token_unit, DRIFT_UNIT_WORD);
    assert_int_equal(d.first_diff_token, 3);
    assert_true(isnan(d.margin) && isnan(d.kl));
    drift_divergence_clear(&d);

    /* tokens absent from the other side's list share its residual mass */
    d = div_of("x a", "[{\"token\":\"x\",\"logprob\":0},{\"token\":\"a\",\"logprob\":-0.5,\"top\":["
                       "{\"token\":\"a\",\"logprob\":-0.5},{\"token\":\"b\",\"logprob\":-1.5}]}]",
               "x c", "[{\"token\":\"x\",\"logprob\":0},{\"token\":\"c\",\"logprob\":-0.1,\"top\":["
                       "{\"token\":\"c\",\"logprob\":-0.1}]}]");
    assert_int_equal(d.first_diff_token, 1);
    near(d.margin, 1.0, 1e-12);
    near(d.kl, 1.604158262463986, 1e-12);
    drift_divergence_clear(&d);

    /* the target goes on after the baseline stopped: no baseline token there */
    d = div_of("ab", "[{\"token\":\"a\",\"logprob\":0},{\"token\":\"b\",\"logprob\":0}]", "abc",
               "[{\"token\":\"a\",\"logprob\":0},{\"token\":\"b\",\"logprob\":0},{\"token\":\"c\",\"logprob\":0,"
               "\"top\":[{\"token\":\"c\",\"logprob\":0}]}]");
    assert_int_equal(d.token_unit, DRIFT_UNIT_TOKEN);
    assert_int_equal(d.first_diff_token, 2);
    assert_true(isnan(d.margin) && isnan(d.kl));
    drift_divergence_clear(&d);

    /* ids when the token text is missing (null) */
    d = div_of("p q", "[{\"token\":null,\"id\":7,\"logprob\":0},{\"token\":null,\"id\":8,\"logprob\":0}]", "p r",
               "[{\"token\":null,\"id\":7,\"logprob\":0},{\"token\":null,\"id\":9,\"logprob\":0}]");
    assert_int_equal(d.token_unit, DRIFT_UNIT_TOKEN);
    assert_int_equal(d.first_diff_token, 1);
    drift_divergence_clear(&d);

    /* identical token lists but different texts (inconsistent): words */
    d = div_of("a b", "[{\"token\":\"a\",\"logprob\":0}]", "a c", "[{\"token\":\"a\",\"logprob\":0}]");
    assert_int_equal(d.token_unit, DRIFT_UNIT_WORD);
    assert_int_equal(d.first_diff_token, 1);
    drift_divergence_clear(&d);
}

static void test_bad_logprobs(void **state) {
    (void)state;
    drift_divergence d;
    drift_error err = {0};
    assert_int_equal(drift_divergence_compute("a", "[{\"token\":", "b", "[]", &d, &err), DRIFT_ERR_PARSE);
    assert_non_null(strstr(err.msg, "baseline logprobs"));
    assert_int_equal(drift_divergence_compute("a", "[]", "b", "{}", &d, &err), DRIFT_ERR_PARSE);
    assert_non_null(strstr(err.msg, "target logprobs: not a JSON array"));
    assert_int_equal(drift_divergence_compute("a", "[]", "b", "[{\"token\":\"b\",\"top\":[{\"token\":\"b\"}]}]", &d, &err),
                     DRIFT_ERR_PARSE);
    assert_non_null(strstr(err.msg, "target logprobs[0].top[0]"));
    assert_int_equal(drift_divergence_compute("a", "[1]", "b", "[]", &d, &err), DRIFT_ERR_PARSE);
    assert_non_null(strstr(err.msg, "baseline logprobs[0]"));
    assert_int_equal(drift_divergence_compute(NULL, NULL, "b", NULL, &d, &err), DRIFT_ERR_INVALID);
}

static void test_diff_render(void **state) {
    (void)state;
    char *s = diff_of("the cat sat on the mat", "the dog sat on a mat", 0, 0);
    assert_string_equal(s, "the [-cat-] {+dog+} sat on [-the-] {+a+} mat");
    free(s);
    /* context: three common words each side, "..." beyond */
    s = diff_of("w0 w1 w2 w3 w4 A s1 s2 s3 s4", "w0 w1 w2 w3 w4 B s1 s2 s3 s4", 0, 0);
    assert_string_equal(s, "... w2 w3 w4 [-A-] {+B+} s1 s2 s3 ...");
    free(s);
    /* a long common run between two changes keeps three words each side */
    s = diff_of("x 1 2 3 4 5 6 7 8 9 10 y", "X 1 2 3 4 5 6 7 8 9 10 Y", 0, 0);
    assert_string_equal(s, "[-x-] {+X+} 1 2 3 ... 8 9 10 [-y-] {+Y+}");
    free(s);
    /* insertions only, deletions only, words equal */
    s = diff_of("a b", "a new b", 0, 0);
    assert_string_equal(s, "a {+new+} b");
    free(s);
    s = diff_of("a old b", "a b", 0, 0);
    assert_string_equal(s, "a [-old-] b");
    free(s);
    s = diff_of("a\tb\n", " a b", 0, 0);
    assert_string_equal(s, "");
    free(s);
    /* the cut: at most max_chars bytes, then " ..." */
    s = diff_of("alpha beta gamma delta epsilon", "one two three four five", 0, 20);
    assert_true(strlen(s) <= 24);
    assert_non_null(strstr(s, " ..."));
    assert_int_equal(strncmp(s, "[-alpha beta gamma d", 20), 0);
    free(s);
    /* the cut never splits a UTF-8 sequence */
    s = diff_of("\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9", "b", 0, 6); /* "[-" + 4 bytes = 6: ends after 2 chars */
    assert_string_equal(s, "[-\xC3\xA9\xC3\xA9 ...");
    free(s);
    s = diff_of("\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9", "b", 0, 5); /* 5 would split the second é */
    assert_string_equal(s, "[-\xC3\xA9 ...");
    free(s);
}

/* "w0 w1 ... w{n-1}" with word k replaced by "<tag>k" from `from` on. */
static char *words_text(size_t n, size_t from, const char *tag) {
    util_buf b = {0};
    for (size_t k = 0; k < n; k++) buf_printf(&b, "%s%s%zu", k ? " " : "", k >= from ? tag : "w", k);
    return buf_steal(&b);
}

static void test_long_texts(void **state) {
    (void)state;
    /* 100,000 words differing in one word in the middle: prefix/suffix
     * stripping leaves one word each */
    char *a = words_text(100000, 100000, "x"), *b = words_text(100000, 100000, "x");
    char *p = strstr(b, " w50000 ");
    assert_non_null(p);
    memcpy(p + 1, "W", 1);
    clock_t t0 = clock();
    drift_divergence d = div_of(a, NULL, b, NULL);
    assert_int_equal(d.first_diff_token, 50000);
    assert_int_equal(d.first_diff_byte, (long)(p + 1 - b));
    assert_string_equal(d.diff, "... w49997 w49998 w49999 [-w50000-] {+W50000+} w50001 w50002 w50003 ...");
    drift_divergence_clear(&d);
    free(a);
    free(b);
    /* 20,000 words each, all different after word 1000: the LCS runs on a
     * 400-word window from the divergence on (else 4x10^8 cells) */
    a = words_text(20000, 1000, "a");
    b = words_text(20000, 1000, "b");
    d = div_of(a, NULL, b, NULL);
    assert_int_equal(d.first_diff_token, 1000);
    assert_true(strlen(d.diff) <= 204);
    assert_int_equal(strncmp(d.diff, "... w997 w998 w999 [-a1000 a1001", 32), 0);
    drift_divergence_clear(&d);
    /* the window ends inside a common run: three of its words, then "..." */
    {
        util_buf x = {0}, y = {0};
        buf_puts(&x, "w0 X");
        buf_puts(&y, "w0 Y");
        for (int k = 1; k <= 500; k++) {
            buf_printf(&x, " c%d", k);
            buf_printf(&y, " c%d", k);
        }
        buf_puts(&x, " t");
        buf_puts(&y, " u");
        char *s = diff_of(x.data, y.data, 400, 1000);
        assert_string_equal(s, "w0 [-X-] {+Y+} c1 c2 c3 ...");
        free(s);
        buf_free(&x);
        buf_free(&y);
    }
    char *s = diff_of(a, b, 400, 100000); /* uncut: the window's end is marked */
    assert_non_null(strstr(s, "a1399-] {+b1000"));
    assert_null(strstr(s, "a1400"));
    assert_non_null(strstr(s, "b1399+} ..."));
    free(s);
    free(a);
    free(b);
    double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    assert_true(secs < 5.0); /* unbounded LCS would take minutes and GBs */
}

/* Through the store: two runs of one prompt, with logprobs. */
static void test_flip_divergence_store(void **state) {
    (void)state;
    drift_store *st = fx_build(fx_path("div.db"));
    drift_error err = {0};
    drift_scored_set set;
    drift_run_info bi;
    assert_int_equal(drift_store_run_get(st, "base", &bi, &err), DRIFT_OK);
    assert_int_equal(drift_store_load_scored(st, bi.id, &set, &err), DRIFT_OK);
    drift_run_info_clear(&bi);
    int64_t rowid = -1;
    for (size_t i = 0; i < set.n; i++)
        if (!strcmp(set.rows[i].prompt_id, "m1")) rowid = set.rows[i].prompt_rowid;
    drift_scored_set_clear(&set);
    assert_true(rowid > 0);
    int64_t runs[2] = {fx_run(st, "lp-base", "{}"), fx_run(st, "lp-targ", "{}")};
    const char *texts[2] = {"The answer is 4", "The answer is 5"};
    const char *lps[2] = {LP_BASE, LP_TARG};
    int64_t rid[2];
    for (int k = 0; k < 2; k++) {
        drift_answer r = {.prompt_rowid = rowid, .text = (char *)texts[k], .prompt_tokens = -1,
                            .completion_tokens = 4, .logprobs_json = (char *)lps[k], .http_status = 200,
                            .attempts = 1};
        assert_int_equal(drift_store_put_responses(st, runs[k], &r, 1, &err), DRIFT_OK);
        assert_int_equal(drift_store_load_scored(st, runs[k], &set, &err), DRIFT_OK);
        assert_int_equal(set.n, 1);
        rid[k] = set.rows[0].response_id;
        drift_scored_set_clear(&set);
    }
    drift_flip f = {.prompt_id = "m1", .direction = -1, .base_response_id = rid[0], .targ_response_id = rid[1]};
    drift_divergence d;
    assert_int_equal(drift_flip_divergence(st, &f, &d, &err), DRIFT_OK);
    assert_int_equal(d.token_unit, DRIFT_UNIT_TOKEN);
    assert_int_equal(d.first_diff_token, 3);
    near(d.margin, 2.3, 1e-9);
    near(d.kl, 1.332975728332437, 1e-9);
    drift_divergence_clear(&d);
    /* the batch: the logprob pair, a fixture pair without logprobs (m1 of
     * base/targ), a pair whose target is missing, the logprob pair again */
    int64_t fx_ids[2] = {0, 0};
    const char *fx_runs[2] = {"base", "targ"};
    for (int k = 0; k < 2; k++) {
        drift_run_info ri;
        assert_int_equal(drift_store_run_get(st, fx_runs[k], &ri, &err), DRIFT_OK);
        assert_int_equal(drift_store_load_scored(st, ri.id, &set, &err), DRIFT_OK);
        for (size_t i = 0; i < set.n; i++)
            if (!strcmp(set.rows[i].prompt_id, "m1")) fx_ids[k] = set.rows[i].response_id;
        drift_scored_set_clear(&set);
        drift_run_info_clear(&ri);
    }
    drift_flip batch[4] = {f, f, f, f};
    batch[1].base_response_id = fx_ids[0];
    batch[1].targ_response_id = fx_ids[1];
    batch[2].targ_response_id = 987654;
    drift_divergence dv[4];
    assert_int_equal(drift_flip_divergences(st, batch, 4, dv, &err), DRIFT_OK);
    for (int k = 0; k < 4; k += 3) {
        assert_null(dv[k].error);
        assert_int_equal(dv[k].token_unit, DRIFT_UNIT_TOKEN);
        assert_int_equal(dv[k].first_diff_token, 3);
        near(dv[k].margin, 2.3, 1e-9);
        near(dv[k].kl, 1.332975728332437, 1e-9);
        assert_string_equal(dv[k].diff, "The answer is [-4-] {+5+}");
    }
    assert_null(dv[1].error);
    assert_int_equal(dv[1].token_unit, DRIFT_UNIT_WORD);
    assert_int_equal(dv[1].first_diff_char, 0);
    assert_string_equal(dv[1].diff, "[-baseline-] {+target+} answer of m1: shared words here, then [-BASE-] {+TARGET+} TAIL");
    assert_non_null(dv[2].error);
    assert_non_null(strstr(dv[2].error, "prompt m1"));
    assert_non_null(strstr(dv[2].error, "987654"));
    for (int k = 0; k < 4; k++) drift_divergence_clear(&dv[k]);
    assert_int_equal(drift_flip_divergences(st, batch, 0, dv, &err), DRIFT_OK);

    /* a missing response is an error naming the prompt */
    f.targ_response_id = 987654;
    assert_int_equal(drift_flip_divergence(st, &f, &d, &err), DRIFT_ERR_NOT_FOUND);
    assert_non_null(strstr(err.msg, "prompt m1"));
    drift_store_close(st);
    fx_cleanup();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_identical),      cmocka_unit_test(test_start_and_prefix),
        cmocka_unit_test(test_utf8),           cmocka_unit_test(test_logprob_tokens),
        cmocka_unit_test(test_bad_logprobs),   cmocka_unit_test(test_diff_render),
        cmocka_unit_test(test_long_texts),     cmocka_unit_test(test_flip_divergence_store),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
