/* test_tokenizer.c - tokenizers on small hand-built vocabularies: GPT-2
 * byte-level BPE (merge order, the three pre-tokenizer regexes told apart by
 * how they split digits, special tokens, ignore_merges of llama3) and
 * SentencePiece BPE (scores, U+2581, byte fallback); round trips on odd
 * UTF-8 (emoji, combining marks, CJK, invalid bytes, CRLF, whitespace runs);
 * text whose markers drift_markers_neutralise has neutralised holds no
 * special token for either tokenizer, even parsed for special tokens (a
 * user-defined token is matched even unparsed: the reason the chat template
 * neutralises its message). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "driftbench/model.h"
#include "model/tokenizer.h"

/* GPT-2 byte -> code point, written independently of the tokenizer */
static int byte_to_utf8(int b, char *o) {
    int cp;
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174) {
        cp = b;
    } else {
        int n = 0;
        for (int x = 0; x < b; x++)
            if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || x >= 174)) n++;
        cp = 256 + n;
    }
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    o[0] = (char)(0xc0 | (cp >> 6));
    o[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
}

typedef struct vocab {
    char *tok[600];
    int32_t type[600];
    float score[600];
    int n;
} vocab;

static int add(vocab *v, const char *s, int type, float score) {
    v->tok[v->n] = strdup(s);
    v->type[v->n] = type;
    v->score[v->n] = score;
    return v->n++;
}

static void vocab_free(vocab *v) {
    for (int i = 0; i < v->n; i++) free(v->tok[i]);
}

static const char *merges[] = {"h e", "l l", "he ll", "hell o", "\xc4\xa0 w", "o r", "\xc4\xa0w or", "l d", "\xc4\xa0wor ld",
                               "1 2", "12 3", "123 4", "1234 5", "\xc4\xa0 1", "\xc4\xa0" "1 2"};

static gguf_file *make_bpe(const char *pre, uint8_t **mem, vocab *v) {
    memset(v, 0, sizeof *v);
    for (int b = 0; b < 256; b++) {
        char s[4] = {0};
        byte_to_utf8(b, s);
        add(v, s, TOK_TYPE_NORMAL, 0);
    }
    /* merge results */
    const char *res[] = {"he", "ll", "hell", "hello", "\xc4\xa0w", "or", "\xc4\xa0wor", "ld", "\xc4\xa0world",
                         "12", "123", "1234", "12345", "\xc4\xa0" "1", "\xc4\xa0" "12"};
    for (size_t i = 0; i < sizeof res / sizeof *res; i++) add(v, res[i], TOK_TYPE_NORMAL, 0);
    add(v, "<|begin|>", TOK_TYPE_CONTROL, 0);   /* 271 */
    add(v, "<|im_end|>", TOK_TYPE_CONTROL, 0);  /* 272 */
    add(v, "<|user|>", TOK_TYPE_USER, 0);       /* 273 */
    add(v, "\xc4\xa0" "123", TOK_TYPE_NORMAL, 0); /* 274: a word in the vocab with no merge path (ignore_merges) */
    gguf_writer *w = gguf_writer_new();
    gguf_writer_add_string(w, "tokenizer.ggml.model", "gpt2");
    if (pre) gguf_writer_add_string(w, "tokenizer.ggml.pre", pre);
    gguf_writer_add_string_array(w, "tokenizer.ggml.tokens", (const char *const *)v->tok, (uint64_t)v->n);
    gguf_writer_add_array(w, "tokenizer.ggml.token_type", GGUF_VT_INT32, v->type, (uint64_t)v->n);
    gguf_writer_add_string_array(w, "tokenizer.ggml.merges", merges, sizeof merges / sizeof *merges);
    gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", 271);
    gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", 272);
    size_t len;
    drift_error err;
    assert_int_equal(gguf_writer_to_memory(w, mem, &len, &err), DRIFT_OK);
    gguf_writer_free(w);
    gguf_file *f;
    assert_int_equal(gguf_open_memory(*mem, len, &f, &err), DRIFT_OK);
    return f;
}

static drift_tokenizer *load_bpe(const char *pre) {
    uint8_t *mem;
    vocab v;
    gguf_file *f = make_bpe(pre, &mem, &v);
    drift_tokenizer *t;
    drift_error err;
    drift_status st = tok_load(f, &t, &err);
    if (st) fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(st, DRIFT_OK);
    gguf_close(f);
    free(mem);
    vocab_free(&v);
    return t;
}

static size_t enc(const drift_tokenizer *t, const char *s, size_t len, int bos, int special, int32_t *out, size_t cap) {
    int32_t *ids;
    size_t n;
    drift_error err;
    assert_int_equal(tok_encode(t, s, len, bos, special, &ids, &n, &err), DRIFT_OK);
    assert_true(n <= cap);
    memcpy(out, ids, n * sizeof *ids);
    free(ids);
    return n;
}

static void expect_ids(const drift_tokenizer *t, const char *s, int special, const int32_t *want, size_t nwant) {
    int32_t got[256];
    size_t n = enc(t, s, strlen(s), 0, special, got, 256);
    if (n != nwant || memcmp(got, want, n * sizeof *got)) {
        fprintf(stderr, "encode '%s': got", s);
        for (size_t i = 0; i < n; i++) fprintf(stderr, " %d(%s)", got[i], tok_piece(t, got[i]));
        fprintf(stderr, "\n");
    }
    assert_int_equal(n, nwant);
    assert_memory_equal(got, want, n * sizeof *got);
}

static void test_bpe_merges(void **state) {
    (void)state;
    drift_tokenizer *t = load_bpe("qwen2");
    assert_string_equal(tok_pre_name(t), "qwen2");
    int32_t hw[] = {tok_find(t, "hello"), tok_find(t, "\xc4\xa0world")};
    assert_true(hw[0] == 259 && hw[1] == 264);
    expect_ids(t, "hello world", 0, hw, 2);
    /* "held": h e -> he; no "he l"... -> he, l, d ; then "l d" merges first? order: l d (rank 7) applies to l,d */
    int32_t held[] = {256, tok_find(t, "ld")};
    expect_ids(t, "held", 0, held, 2);
    /* specials: control only with parse_special; user-defined always */
    int32_t sp[] = {271, 259, 273, 272};
    expect_ids(t, "<|begin|>hello<|user|><|im_end|>", 1, sp, 4);
    int32_t nosp[64];
    size_t n = enc(t, "<|im_end|>", 10, 0, 0, nosp, 64);
    assert_true(n > 1); /* spelled out */
    assert_int_equal(tok_is_eog(t, 272), 1);
    assert_int_equal(tok_is_eog(t, 259), 0);
    /* BOS */
    n = enc(t, "hello", 5, 1, 0, nosp, 64);
    assert_int_equal(n, 2);
    assert_int_equal(nosp[0], 271);
    char *d = tok_decode(t, nosp, n, 0, NULL);
    assert_string_equal(d, "hello");
    free(d);
    tok_free(t);
}

static void test_pretokenizer_regexes(void **state) {
    (void)state;
    /* " 12345": gpt2 keeps " 12345" as one word -> Ġ12 (via Ġ 1, Ġ1 2) then 3 4 5? merges are ranked:
     * "1 2"(9) first -> Ġ,12,3,4,5 -> "12 3" -> Ġ,123,4,5 -> "123 4" -> Ġ,1234,5 -> "1234 5" -> Ġ,12345 */
    drift_tokenizer *g = load_bpe("gpt-2");
    assert_string_equal(tok_pre_name(g), "gpt2");
    int32_t want_g[] = {'a', tok_find(g, "\xc4\xa0"), tok_find(g, "12345")};
    expect_ids(g, "a 12345", 0, want_g, 3);
    tok_free(g);
    /* default (also when the file names none), as llama.cpp: GPT-2's split,
     * then digit runs apart from what precedes them, then groups of 3 digits:
     * "a", " ", "123", "45" */
    drift_tokenizer *d = load_bpe(NULL);
    assert_string_equal(tok_pre_name(d), "default");
    int32_t want_d[] = {'a', tok_find(d, "\xc4\xa0"), tok_find(d, "123"), '4', '5'};
    expect_ids(d, "a 12345", 0, want_d, 5);
    /* punctuation runs are pieces of their own: "x" "+=" "y" */
    int32_t want_p[] = {'x', '+', '=', 'y'};
    expect_ids(d, "x+=y", 0, want_p, 4);
    tok_free(d);
    /* llama3: " " alone, then digits in runs of 3: "123" "45" */
    drift_tokenizer *l = load_bpe("llama-bpe");
    assert_string_equal(tok_pre_name(l), "llama3");
    int32_t want_l[] = {'a', tok_find(l, "\xc4\xa0"), tok_find(l, "123"), '4', '5'};
    expect_ids(l, "a 12345", 0, want_l, 5);
    /* ignore_merges: " 123" after a letter-free start: "x 123"? the regex gives " " and "123";
     * ignore_merges shows on a word that is a vocabulary piece: "Ġ123" cannot be a llama3 word, so test "hello" */
    int32_t want_h[] = {tok_find(l, "hello")};
    expect_ids(l, "hello", 0, want_h, 1);
    tok_free(l);
    /* qwen2: single digits */
    drift_tokenizer *q = load_bpe("qwen2");
    int32_t want_q[] = {'a', tok_find(q, "\xc4\xa0"), '1', '2', '3', '4', '5'};
    expect_ids(q, "a 12345", 0, want_q, 7);
    /* contractions are their own words; case-insensitive in llama3/qwen2 */
    int32_t ids[64];
    size_t n = enc(q, "I'VE", 4, 0, 0, ids, 64);
    assert_int_equal(n, 4);
    tok_free(q);
    drift_tokenizer *u = load_bpe("some-new-pre");
    assert_non_null(strstr(tok_pre_name(u), "fallback"));
    tok_free(u);
}

static void round_trip(const drift_tokenizer *t, const char *s, size_t len, int strip) {
    int32_t *ids;
    size_t n;
    drift_error err;
    assert_int_equal(tok_encode(t, s, len, 1, 0, &ids, &n, &err), DRIFT_OK);
    size_t dl;
    char *d = tok_decode(t, ids, n, strip, &dl);
    if (dl != len || memcmp(d, s, len)) fprintf(stderr, "round trip failed for %zu bytes -> %zu bytes\n", len, dl);
    assert_int_equal(dl, len);
    assert_memory_equal(d, s, len);
    free(d);
    free(ids);
}

static const char *odd[] = {
    "",
    "hello world",
    "emoji \xf0\x9f\x98\x80\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd family \xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa7",
    "e\xcc\x81 combining a\xcc\x8a\xcc\x81",
    "\xe4\xb8\xad\xe6\x96\x87\xe5\xad\x97\xe7\xac\xa6 \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x81\xa7\xe3\x81\x99",
    "line1\r\nline2\r\n\r\n  \tx",
    "            many spaces                 ",
    "\n\n\n\t\t\t   \n",
    "don't I'LL we've 3.14159 $100,000 ++--==",
    "a\x00" "b",
};

static void test_round_trips_bpe(void **state) {
    (void)state;
    const char *pres[] = {"llama-bpe", "qwen2", "default"};
    for (int p = 0; p < 3; p++) {
        drift_tokenizer *t = load_bpe(pres[p]);
        for (size_t i = 0; i < sizeof odd / sizeof *odd; i++) round_trip(t, odd[i], i == 9 ? 3 : strlen(odd[i]), 0);
        /* invalid UTF-8: lone continuation bytes, truncated sequences, overlong, 0xff */
        const char bad[] = "ok\x80\xbf x\xc3 y\xe2\x82 z\xf0\x9f\x98 \xc0\xaf \xff\xfe end";
        round_trip(t, bad, sizeof bad - 1, 0);
        /* long runs: the merge loop is O(n log n), this must be quick */
        size_t big = 200000;
        char *run = malloc(big);
        for (size_t k = 0; k < big; k++) run[k] = k < big / 2 ? ' ' : (k % 7 ? 'l' : 'o');
        round_trip(t, run, big, 0);
        free(run);
        /* every byte value */
        char all[256];
        for (int b = 0; b < 256; b++) all[b] = (char)b;
        round_trip(t, all, 256, 0);
        tok_free(t);
    }
}

/* ---- SentencePiece ---- */
static drift_tokenizer *load_spm(void) {
    vocab v;
    memset(&v, 0, sizeof v);
    add(&v, "<unk>", TOK_TYPE_UNKNOWN, 0);
    add(&v, "<s>", TOK_TYPE_CONTROL, 0);
    add(&v, "</s>", TOK_TYPE_CONTROL, 0);
    for (int b = 0; b < 256; b++) {
        char s[8];
        snprintf(s, sizeof s, "<0x%02X>", b);
        add(&v, s, TOK_TYPE_BYTE, 0);
    }
    /* pieces: 259.. */
    add(&v, "\xe2\x96\x81", TOK_TYPE_NORMAL, -1);        /* 259 ▁ */
    add(&v, "h", TOK_TYPE_NORMAL, -2);                    /* 260 */
    add(&v, "e", TOK_TYPE_NORMAL, -2);                    /* 261 */
    add(&v, "l", TOK_TYPE_NORMAL, -2);                    /* 262 */
    add(&v, "o", TOK_TYPE_NORMAL, -2);                    /* 263 */
    add(&v, "ll", TOK_TYPE_NORMAL, -3);                   /* 264 */
    add(&v, "he", TOK_TYPE_NORMAL, -5);                   /* 265 */
    add(&v, "llo", TOK_TYPE_NORMAL, -4);                  /* 266 */
    add(&v, "\xe2\x96\x81h", TOK_TYPE_NORMAL, -6);        /* 267 ▁h */
    add(&v, "\xe2\x96\x81hello", TOK_TYPE_NORMAL, -7);    /* 268 */
    add(&v, "\xe2\x96\x81he", TOK_TYPE_NORMAL, -4.5f);    /* 269 */
    add(&v, "\xe4\xb8\xad", TOK_TYPE_NORMAL, -2);         /* 270 中 */
    gguf_writer *w = gguf_writer_new();
    gguf_writer_add_string(w, "tokenizer.ggml.model", "llama");
    gguf_writer_add_string_array(w, "tokenizer.ggml.tokens", (const char *const *)v.tok, (uint64_t)v.n);
    gguf_writer_add_array(w, "tokenizer.ggml.token_type", GGUF_VT_INT32, v.type, (uint64_t)v.n);
    gguf_writer_add_array(w, "tokenizer.ggml.scores", GGUF_VT_FLOAT32, v.score, (uint64_t)v.n);
    gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", 1);
    gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", 2);
    gguf_writer_add_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    uint8_t *mem;
    size_t len;
    drift_error err;
    assert_int_equal(gguf_writer_to_memory(w, &mem, &len, &err), DRIFT_OK);
    gguf_writer_free(w);
    gguf_file *f;
    assert_int_equal(gguf_open_memory(mem, len, &f, &err), DRIFT_OK);
    drift_tokenizer *t;
    assert_int_equal(tok_load(f, &t, &err), DRIFT_OK);
    gguf_close(f);
    free(mem);
    vocab_free(&v);
    return t;
}

static void test_spm(void **state) {
    (void)state;
    drift_tokenizer *t = load_spm();
    assert_int_equal(tok_get_kind(t), TOK_KIND_SPM);
    assert_int_equal(tok_add_bos_default(t), 1);
    /* "hello" -> "▁hello": merges by score: ▁h(-6)? candidates first round: ▁h -6, he -5, el none, ll -3, lo none
     * -> ll; then: ▁h -6, he -5, e+ll none, llo -4 -> llo; then ▁h -6, he -5 -> he; then ▁he -4.5 -> ▁he;
     * then ▁he+llo = ▁hello -7 -> one token */
    int32_t want[] = {268};
    expect_ids(t, "hello", 0, want, 1);
    /* "hel": ▁,h,e,l: ▁h -6, he -5 -> he; ▁he -4.5 -> ▁he; ▁he+l none -> [▁he, l] */
    int32_t want2[] = {269, 262};
    expect_ids(t, "hel", 0, want2, 2);
    /* byte fallback: "z" is not a piece -> <0x7A> = 3 + 0x7a */
    int32_t want3[] = {259, 3 + 0x7a, 270};
    expect_ids(t, "z中", 0, want3, 3);
    /* specials */
    int32_t want4[] = {1, 268, 2};
    expect_ids(t, "<s>hello</s>", 1, want4, 3);
    for (size_t i = 0; i < sizeof odd / sizeof *odd; i++) round_trip(t, odd[i], i == 9 ? 3 : strlen(odd[i]), 1);
    const char bad[] = "\x80\xbf x\xc3 y\xe2\x82 \xff";
    round_trip(t, bad, sizeof bad - 1, 1);
    tok_free(t);
}

/* Occurrences of id in ids[0, n). */
static int count_id(const int32_t *ids, size_t n, int32_t id) {
    int c = 0;
    for (size_t i = 0; i < n; i++) c += ids[i] == id;
    return c;
}

static void test_neutralised_specials(void **state) {
    (void)state;
    int32_t ids[256];
    drift_tokenizer *t = load_bpe("qwen2"); /* 271 <|begin|>, 272 <|im_end|> control; 273 <|user|> user-defined */
    const char *text = "hello<|begin|><|user|> world<|im_end|>";
    size_t n = enc(t, text, strlen(text), 0, 1, ids, 256);
    assert_true(count_id(ids, n, 271) == 1 && count_id(ids, n, 272) == 1 && count_id(ids, n, 273) == 1);
    n = enc(t, text, strlen(text), 0, 0, ids, 256);
    assert_int_equal(count_id(ids, n, 273), 1); /* user-defined: a special token even unparsed */
    size_t nn = 0;
    char *neut = drift_markers_neutralise(text, strlen(text), DRIFT_MARKER_SET_CHAT, &nn);
    for (int parse = 0; parse < 2; parse++) {
        n = enc(t, neut, nn, 0, parse, ids, 256);
        assert_true(count_id(ids, n, 271) + count_id(ids, n, 272) + count_id(ids, n, 273) == 0);
        char *d = tok_decode(t, ids, n, 0, NULL);
        assert_string_equal(d, neut); /* the text itself, zero-width spaces and all */
        free(d);
    }
    free(neut);
    tok_free(t);

    t = load_spm(); /* 1 <s>, 2 </s> control */
    text = "<s>hello</s>";
    neut = drift_markers_neutralise(text, strlen(text), DRIFT_MARKER_SET_CHAT, &nn);
    assert_string_equal(neut, "<\xe2\x80\x8bs>hello<\xe2\x80\x8b/s>");
    n = enc(t, neut, nn, 0, 1, ids, 256);
    assert_int_equal(count_id(ids, n, 1) + count_id(ids, n, 2), 0);
    free(neut);
    tok_free(t);
}

static void test_bad_metadata(void **state) {
    (void)state;
    gguf_writer *w = gguf_writer_new();
    gguf_writer_add_string(w, "tokenizer.ggml.model", "gpt2");
    const char *toks[] = {"a", "b"};
    gguf_writer_add_string_array(w, "tokenizer.ggml.tokens", toks, 2);
    int32_t ty[] = {1};
    gguf_writer_add_array(w, "tokenizer.ggml.token_type", GGUF_VT_INT32, ty, 1);
    uint8_t *mem;
    size_t len;
    drift_error err;
    assert_int_equal(gguf_writer_to_memory(w, &mem, &len, &err), DRIFT_OK);
    gguf_writer_free(w);
    gguf_file *f;
    assert_int_equal(gguf_open_memory(mem, len, &f, &err), DRIFT_OK);
    drift_tokenizer *t;
    assert_int_equal(tok_load(f, &t, &err), DRIFT_ERR_PARSE);
    assert_non_null(strstr(err.msg, "token_type"));
    gguf_close(f);
    free(mem);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bpe_merges), cmocka_unit_test(test_pretokenizer_regexes), cmocka_unit_test(test_round_trips_bpe),
        cmocka_unit_test(test_spm),        cmocka_unit_test(test_bad_metadata),
        cmocka_unit_test(test_neutralised_specials),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
