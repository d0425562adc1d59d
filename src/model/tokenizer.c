/* tokenizer.c - GPT-2 byte-level BPE and SentencePiece BPE from GGUF metadata.
 *
 * Both kinds share one merge loop (merge_word): a word is a list of symbols
 * (byte ranges of one string); every adjacent pair gets a priority (BPE: the
 * merge rank, lower first; SPM: the score of the merged vocabulary piece,
 * higher first); the best pair (leftmost on ties) is merged and only its two
 * new neighbour pairs are re-evaluated. Then each symbol maps to a token id,
 * with per-character (BPE) or <0xXX> byte (SPM) fallback.
 *
 * Pre-tokenization (BPE) uses PCRE2 with UTF + UCP so \p{L}, \p{N} and \s are
 * Unicode classes, and PCRE2_MATCH_INVALID_UTF so invalid UTF-8 never makes a
 * match fail: bytes between matches become words of their own, so every
 * input byte is encoded and decode(encode(x)) == x for any x (given the 256
 * byte symbols are in the vocabulary, as in every GPT-2-style vocabulary). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "model/tokenizer.h"

#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- string -> int hash map (open addressing, keys point into owned storage) ---- */
typedef struct smap {
    const char **key;
    uint32_t *klen;
    int32_t *val;
    size_t cap; /* power of two */
} smap;

static uint64_t hash_bytes(const char *p, size_t n) { return util_fnv1a64(p, n, 0); }

static int smap_init(smap *m, size_t n) {
    m->cap = 16;
    while (m->cap < n * 2 + 1) m->cap <<= 1;
    m->key = calloc(m->cap, sizeof *m->key);
    m->klen = calloc(m->cap, sizeof *m->klen);
    m->val = calloc(m->cap, sizeof *m->val);
    return (m->key && m->klen && m->val) ? 0 : -1;
}

static void smap_free(smap *m) {
    free(m->key);
    free(m->klen);
    free(m->val);
}

/* Inserts if absent (first wins, as vocabularies with duplicate pieces keep the lowest id). */
static void smap_put(smap *m, const char *k, size_t n, int32_t v) {
    size_t i = hash_bytes(k, n) & (m->cap - 1);
    while (m->key[i]) {
        if (m->klen[i] == n && !memcmp(m->key[i], k, n)) return;
        i = (i + 1) & (m->cap - 1);
    }
    m->key[i] = k;
    m->klen[i] = (uint32_t)n;
    m->val[i] = v;
}

static int32_t smap_get(const smap *m, const char *k, size_t n) {
    size_t i = hash_bytes(k, n) & (m->cap - 1);
    while (m->key[i]) {
        if (m->klen[i] == n && !memcmp(m->key[i], k, n)) return m->val[i];
        i = (i + 1) & (m->cap - 1);
    }
    return -1;
}

struct drift_tokenizer {
    tok_kind kind;
    int n_vocab;
    char **text;       /* (n_vocab) owned, NUL-terminated */
    uint32_t *len;     /* (n_vocab) */
    float *score;      /* (n_vocab) SPM scores (0 if absent) */
    int32_t *type;     /* (n_vocab) token types */
    smap vocab;
    /* BPE merges: the "left right" strings are owned in merge_text */
    char **merge_text;
    size_t n_merges;
    smap merges;
    pcre2_code *re[4]; /* pre-tokenizer regexes, applied in turn (see bpe_split) */
    int n_re;
    const char *pre;
    int32_t bos, eos, eot, unk;
    int add_bos, add_space_prefix;
    int ignore_merges; /* llama3: a word that is itself a vocabulary piece is not merged */
    int32_t *special;  /* control/user-defined ids, longest text first */
    size_t n_special;
    int32_t byte_tok[256]; /* SPM <0xXX> ids or -1 */
    int32_t eog_extra[8];
    int n_eog_extra;
    /* GPT-2 byte <-> code point tables */
    uint32_t byte_cp[256];
    int16_t cp_byte[512];
};

/* ---- UTF-8 helpers ---- */
static int utf8_put(char *o, uint32_t cp) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xc0 | (cp >> 6)); o[1] = (char)(0x80 | (cp & 0x3f)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xe0 | (cp >> 12)); o[1] = (char)(0x80 | ((cp >> 6) & 0x3f)); o[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | (cp >> 18)); o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3f)); o[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* Length of the (valid) UTF-8 sequence at p, or 1 for an invalid byte. */
static size_t utf8_len(const unsigned char *p, size_t n) {
    unsigned c = p[0];
    size_t l = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (l == 0 || l > n) return 1;
    for (size_t i = 1; i < l; i++)
        if ((p[i] & 0xc0) != 0x80) return 1;
    return l;
}

/* Decodes one code point (valid sequence of length l). */
static uint32_t utf8_cp(const unsigned char *p, size_t l) {
    if (l == 1) return p[0];
    if (l == 2) return ((uint32_t)(p[0] & 0x1f) << 6) | (p[1] & 0x3f);
    if (l == 3) return ((uint32_t)(p[0] & 0x0f) << 12) | ((uint32_t)(p[1] & 0x3f) << 6) | (p[2] & 0x3f);
    return ((uint32_t)(p[0] & 0x07) << 18) | ((uint32_t)(p[1] & 0x3f) << 12) | ((uint32_t)(p[2] & 0x3f) << 6) | (p[3] & 0x3f);
}

static void init_byte_tables(drift_tokenizer *t) {
    uint32_t extra = 256;
    for (int i = 0; i < 512; i++) t->cp_byte[i] = -1;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
        t->byte_cp[b] = printable ? (uint32_t)b : extra++;
        t->cp_byte[t->byte_cp[b]] = (int16_t)b;
    }
}

/* ---- regexes of the pre-tokenizers (llama.cpp's, as PCRE2 patterns) ---- */
static const char RE_GPT2[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
static const char RE_LLAMA3[] =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}|"
    " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
/* llama.cpp's "default" BPE pre-tokenizer: four regexes in a row, each
 * splitting the pieces the previous one left (punctuation runs, GPT-2's
 * pattern without its last alternative, digit runs, groups of 3 digits). */
static const char *const RE_DEFAULT[] = {"[\\p{P}\\$\\+<=>\\^~\\|]+",
                                         "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
                                         "\\p{N}+", "[0-9][0-9][0-9]"};
static const char RE_QWEN2[] =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}|"
    " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

void tok_free(drift_tokenizer *t) {
    if (!t) return;
    for (int i = 0; i < t->n_vocab && t->text; i++) free(t->text[i]);
    free(t->text);
    free(t->len);
    free(t->score);
    free(t->type);
    smap_free(&t->vocab);
    for (size_t i = 0; i < t->n_merges && t->merge_text; i++) free(t->merge_text[i]);
    free(t->merge_text);
    smap_free(&t->merges);
    for (int i = 0; i < t->n_re; i++) pcre2_code_free(t->re[i]);
    free(t->special);
    free(t);
}

static int cmp_special(const void *a, const void *b, void *ctx) {
    const drift_tokenizer *t = ctx;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    uint32_t lx = t->len[x], ly = t->len[y];
    if (lx != ly) return lx > ly ? -1 : 1;
    return x < y ? -1 : x > y;
}

static int32_t get_id(const gguf_file *f, const char *key, int n_vocab) {
    int64_t v;
    if (gguf_get_int(f, key, &v) || v < 0 || v >= n_vocab) return -1;
    return (int32_t)v;
}

drift_status tok_load(const gguf_file *f, drift_tokenizer **out, drift_error *err) {
    *out = NULL;
    char *model = gguf_get_string(f, "tokenizer.ggml.model");
    if (!model) return drift_error_set(err, DRIFT_ERR_PARSE, "%s: tokenizer.ggml.model missing (string)", f->path);
    tok_kind kind;
    if (!strcmp(model, "gpt2")) kind = TOK_KIND_BPE;
    else if (!strcmp(model, "llama")) kind = TOK_KIND_SPM;
    else {
        drift_status st = drift_error_set(err, DRIFT_ERR_UNSUPPORTED, "%s: tokenizer.ggml.model '%s' not supported (gpt2, llama are)",
                                          f->path, model);
        free(model);
        return st;
    }
    free(model);
    const gguf_kv *toks = gguf_find_kv(f, "tokenizer.ggml.tokens");
    if (!toks || toks->type != GGUF_VT_ARRAY || toks->arr_type != GGUF_VT_STRING || toks->arr_n == 0 || toks->arr_n > (1u << 24))
        return drift_error_set(err, DRIFT_ERR_PARSE, "%s: tokenizer.ggml.tokens missing or not a non-empty string array", f->path);
    drift_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    t->kind = kind;
    t->n_vocab = (int)toks->arr_n;
    init_byte_tables(t);
    t->text = calloc((size_t)t->n_vocab, sizeof *t->text);
    t->len = calloc((size_t)t->n_vocab, sizeof *t->len);
    t->score = calloc((size_t)t->n_vocab, sizeof *t->score);
    t->type = calloc((size_t)t->n_vocab, sizeof *t->type);
    if (!t->text || !t->len || !t->score || !t->type || smap_init(&t->vocab, (size_t)t->n_vocab)) goto nomem;
    for (int i = 0; i < t->n_vocab; i++) {
        t->text[i] = util_strndup(toks->arr_str[i].p, (size_t)toks->arr_str[i].n);
        if (!t->text[i]) goto nomem;
        t->len[i] = (uint32_t)toks->arr_str[i].n;
        t->type[i] = TOK_TYPE_NORMAL;
    }
    const gguf_kv *types = gguf_find_kv(f, "tokenizer.ggml.token_type");
    if (types) {
        if (types->type != GGUF_VT_ARRAY || types->arr_n != (uint64_t)t->n_vocab || types->arr_type == GGUF_VT_STRING ||
            types->arr_type == GGUF_VT_ARRAY) {
            tok_free(t);
            return drift_error_set(err, DRIFT_ERR_PARSE, "%s: tokenizer.ggml.token_type must be an integer array of %d entries", f->path,
                                   (int)toks->arr_n);
        }
        for (int i = 0; i < t->n_vocab; i++) t->type[i] = (int32_t)gguf_arr_int(types, (uint64_t)i);
    }
    const gguf_kv *scores = gguf_find_kv(f, "tokenizer.ggml.scores");
    if (scores) {
        if (scores->type != GGUF_VT_ARRAY || scores->arr_n != (uint64_t)t->n_vocab ||
            (scores->arr_type != GGUF_VT_FLOAT32 && scores->arr_type != GGUF_VT_FLOAT64)) {
            tok_free(t);
            return drift_error_set(err, DRIFT_ERR_PARSE, "%s: tokenizer.ggml.scores must be a float array of %d entries", f->path,
                                   (int)toks->arr_n);
        }
        for (int i = 0; i < t->n_vocab; i++) t->score[i] = (float)gguf_arr_float(scores, (uint64_t)i);
    }
    for (int i = 0; i < t->n_vocab; i++) smap_put(&t->vocab, t->text[i], t->len[i], i);

    if (kind == TOK_KIND_BPE) {
        const gguf_kv *mg = gguf_find_kv(f, "tokenizer.ggml.merges");
        if (!mg || mg->type != GGUF_VT_ARRAY || mg->arr_type != GGUF_VT_STRING) {
            tok_free(t);
            return drift_error_set(err, DRIFT_ERR_PARSE, "%s: tokenizer.ggml.merges missing (string array, needed by gpt2 BPE)", f->path);
        }
        t->merge_text = calloc(mg->arr_n ? (size_t)mg->arr_n : 1, sizeof *t->merge_text);
        if (!t->merge_text || smap_init(&t->merges, (size_t)mg->arr_n)) goto nomem;
        for (uint64_t i = 0; i < mg->arr_n; i++) {
            const gguf_str *s = &mg->arr_str[i];
            const char *sp = s->n > 1 ? memchr(s->p + 1, ' ', (size_t)s->n - 1) : NULL;
            if (!sp) {
                tok_free(t);
                return drift_error_set(err, DRIFT_ERR_PARSE, "%s: tokenizer.ggml.merges[%llu] has no space separating two pieces", f->path,
                                       (unsigned long long)i);
            }
            t->merge_text[i] = util_strndup(s->p, (size_t)s->n);
            if (!t->merge_text[i]) goto nomem;
            t->n_merges = i + 1;
            smap_put(&t->merges, t->merge_text[i], (size_t)s->n, (int32_t)i);
        }
        char *pre = gguf_get_string(f, "tokenizer.ggml.pre");
        const char *pats[4] = {RE_GPT2};
        int n_pats = 1;
        t->pre = "gpt2";
        if (pre && (!strcmp(pre, "llama-bpe") || !strcmp(pre, "llama3") || !strcmp(pre, "llama-v3"))) {
            pats[0] = RE_LLAMA3;
            t->pre = "llama3";
            t->ignore_merges = 1;
        } else if (pre && !strcmp(pre, "qwen2")) {
            pats[0] = RE_QWEN2;
            t->pre = "qwen2";
        } else if (!pre || !strcmp(pre, "default")) {
            for (n_pats = 0; n_pats < 4; n_pats++) pats[n_pats] = RE_DEFAULT[n_pats];
            t->pre = "default";
        } else if (strcmp(pre, "gpt-2") && strcmp(pre, "gpt2")) {
            t->pre = "gpt2 (fallback for an unknown pre-tokenizer)";
        }
        free(pre);
        for (int i = 0; i < n_pats; i++) {
            int ec;
            PCRE2_SIZE eo;
            t->re[i] = pcre2_compile((PCRE2_SPTR)pats[i], PCRE2_ZERO_TERMINATED,
                                     PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &ec, &eo, NULL);
            if (!t->re[i]) {
                tok_free(t);
                return drift_error_set(err, DRIFT_ERR_INTERNAL,
                                       "pre-tokenizer regex %d failed to compile (pcre2 error %d at %zu)", i, ec, (size_t)eo);
            }
            t->n_re = i + 1;
            pcre2_jit_compile(t->re[i], PCRE2_JIT_COMPLETE); /* optional speed-up; falls back to the interpreter */
        }
    } else {
        t->pre = "spm";
        for (int b = 0; b < 256; b++) {
            char name[8];
            snprintf(name, sizeof name, "<0x%02X>", b);
            t->byte_tok[b] = smap_get(&t->vocab, name, 6);
        }
    }
    t->bos = get_id(f, "tokenizer.ggml.bos_token_id", t->n_vocab);
    t->eos = get_id(f, "tokenizer.ggml.eos_token_id", t->n_vocab);
    t->eot = get_id(f, "tokenizer.ggml.eot_token_id", t->n_vocab);
    t->unk = get_id(f, "tokenizer.ggml.unknown_token_id", t->n_vocab);
    int b;
    t->add_bos = gguf_get_bool(f, "tokenizer.ggml.add_bos_token", &b) == 0 ? b : (kind == TOK_KIND_SPM);
    t->add_space_prefix = gguf_get_bool(f, "tokenizer.ggml.add_space_prefix", &b) == 0 ? b : (kind == TOK_KIND_SPM);
    static const char *eog_names[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|endoftext|>", "<|end_of_text|>", "<|eom_id|>"};
    for (size_t i = 0; i < sizeof eog_names / sizeof *eog_names; i++) {
        int32_t id = smap_get(&t->vocab, eog_names[i], strlen(eog_names[i]));
        if (id >= 0 && t->type[id] == TOK_TYPE_CONTROL && t->n_eog_extra < 8) t->eog_extra[t->n_eog_extra++] = id;
    }
    /* special tokens, longest first */
    t->special = malloc((size_t)t->n_vocab * sizeof *t->special);
    if (!t->special) goto nomem;
    for (int i = 0; i < t->n_vocab; i++)
        if ((t->type[i] == TOK_TYPE_CONTROL || t->type[i] == TOK_TYPE_USER) && t->len[i] > 0) t->special[t->n_special++] = i;
    qsort_r(t->special, t->n_special, sizeof *t->special, cmp_special, t);
    *out = t;
    return DRIFT_OK;
nomem:
    tok_free(t);
    return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory loading the tokenizer");
}

/* ---- the merge loop ---- */
typedef struct sym {
    uint32_t start, len; /* into the word's string */
    int prev, next;
} sym;

typedef struct ids_out {
    int32_t *v;
    size_t n, cap;
} ids_out;

static int push_id(ids_out *o, int32_t id) {
    if (o->n == o->cap) {
        size_t nc = o->cap ? o->cap * 2 : 64;
        int32_t *nv = realloc(o->v, nc * sizeof *nv);
        if (!nv) return -1;
        o->v = nv;
        o->cap = nc;
    }
    o->v[o->n++] = id;
    return 0;
}

/* Priority of merging symbols a and b (adjacent): BPE rank (lower better) or
 * -score (SPM: higher score better), as a double; +inf when not mergeable. */
static double pair_prio(const drift_tokenizer *t, const char *s, const sym *a, const sym *b, char *tmp) {
    if (t->kind == TOK_KIND_BPE) {
        memcpy(tmp, s + a->start, a->len);
        tmp[a->len] = ' ';
        memcpy(tmp + a->len + 1, s + b->start, b->len);
        int32_t r = smap_get(&t->merges, tmp, a->len + 1 + b->len);
        return r < 0 ? 1e300 : (double)r;
    }
    int32_t id = smap_get(&t->vocab, s + a->start, a->len + b->len);
    return id < 0 ? 1e300 : -(double)t->score[id];
}

/* A candidate merge of symbol `left` with its next `right`, valid while both
 * still have the lengths recorded here. Ordered by (prio, left): left indices
 * follow text order, so ties go to the leftmost pair. */
typedef struct cand_pair {
    double prio;
    uint32_t left, right, llen, rlen;
} cand_pair;

static int pair_less(const cand_pair *a, const cand_pair *b) {
    return a->prio < b->prio || (a->prio == b->prio && a->left < b->left);
}

static void heap_push_pair(const drift_tokenizer *t, const char *s, const sym *sy, int left, cand_pair *h, size_t *hn, char *tmp) {
    int right = sy[left].next;
    double pr = pair_prio(t, s, &sy[left], &sy[right], tmp);
    if (pr >= 1e300) return; /* not mergeable */
    size_t i = (*hn)++;
    h[i] = (cand_pair){pr, (uint32_t)left, (uint32_t)right, sy[left].len, sy[right].len};
    while (i > 0 && pair_less(&h[i], &h[(i - 1) / 2])) {
        cand_pair x = h[i];
        h[i] = h[(i - 1) / 2];
        h[(i - 1) / 2] = x;
        i = (i - 1) / 2;
    }
}

static cand_pair heap_pop(cand_pair *h, size_t *hn) {
    cand_pair top = h[0];
    h[0] = h[--*hn];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < *hn && pair_less(&h[l], &h[m])) m = l;
        if (r < *hn && pair_less(&h[r], &h[m])) m = r;
        if (m == i) break;
        cand_pair x = h[i];
        h[i] = h[m];
        h[m] = x;
        i = m;
    }
    return top;
}

/* Merges the word s (n bytes, already mapped / space-replaced) and emits ids. */
static int merge_word(const drift_tokenizer *t, const char *s, size_t n, ids_out *o) {
    if (n == 0) return 0;
    size_t ns = 0;
    for (size_t i = 0; i < n; i += utf8_len((const unsigned char *)s + i, n - i)) ns++;
    sym *sy = malloc(ns * sizeof *sy);
    cand_pair *heap = malloc((3 * ns + 1) * sizeof *heap);
    char *tmp = malloc(2 * n + 2);
    if (!sy || !heap || !tmp) {
        free(sy);
        free(heap);
        free(tmp);
        return -1;
    }
    size_t k = 0, hn = 0;
    for (size_t i = 0; i < n; k++) {
        size_t l = utf8_len((const unsigned char *)s + i, n - i);
        sy[k].start = (uint32_t)i;
        sy[k].len = (uint32_t)l;
        sy[k].prev = (int)k - 1;
        sy[k].next = k + 1 < ns ? (int)k + 1 : -1;
        i += l;
    }
    for (size_t i = 0; i + 1 < ns; i++) heap_push_pair(t, s, sy, (int)i, heap, &hn, tmp);
    /* merge the best pair (lowest priority, leftmost on ties) until none is left;
     * stale entries (a side merged since) are skipped when popped */
    while (hn) {
        cand_pair c = heap_pop(heap, &hn);
        if (sy[c.left].len != c.llen || sy[c.left].next != (int)c.right || sy[c.right].len != c.rlen) continue;
        int best = (int)c.left, nx = (int)c.right;
        sy[best].len += sy[nx].len;
        sy[best].next = sy[nx].next;
        if (sy[nx].next >= 0) sy[sy[nx].next].prev = best;
        sy[nx].len = 0;
        if (sy[best].next >= 0) heap_push_pair(t, s, sy, best, heap, &hn, tmp);
        if (sy[best].prev >= 0) heap_push_pair(t, s, sy, sy[best].prev, heap, &hn, tmp);
    }
    free(heap);
    int rc = 0;
    for (int i = 0; i >= 0 && !rc; i = sy[i].next) {
        int32_t id = smap_get(&t->vocab, s + sy[i].start, sy[i].len);
        if (id >= 0) {
            rc = push_id(o, id);
            continue;
        }
        /* fallback: per character (BPE) or per byte (SPM) */
        for (uint32_t j = 0; j < sy[i].len && !rc;) {
            size_t l = utf8_len((const unsigned char *)s + sy[i].start + j, sy[i].len - j);
            int32_t cid = smap_get(&t->vocab, s + sy[i].start + j, l);
            if (cid >= 0) {
                rc = push_id(o, cid);
            } else if (t->kind == TOK_KIND_SPM) {
                for (size_t q = 0; q < l && !rc; q++) {
                    int32_t bid = t->byte_tok[(unsigned char)s[sy[i].start + j + q]];
                    if (bid < 0) bid = t->unk;
                    if (bid >= 0) rc = push_id(o, bid);
                }
            } else if (t->unk >= 0) {
                rc = push_id(o, t->unk);
            }
            j += (uint32_t)l;
        }
    }
    free(sy);
    free(tmp);
    return rc;
}

/* BPE: maps raw bytes to GPT-2 code points (UTF-8) and merges. */
static int bpe_word(const drift_tokenizer *t, const char *p, size_t n, ids_out *o) {
    char *m = malloc(n * 4 + 1); /* 2 bytes a byte suffice (code points < 0x800); 4 = utf8_put's most */
    if (!m) return -1;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += (size_t)utf8_put(m + k, t->byte_cp[(unsigned char)p[i]]);
    int rc;
    int32_t whole = t->ignore_merges ? smap_get(&t->vocab, m, k) : -1;
    rc = whole >= 0 ? push_id(o, whole) : merge_word(t, m, k, o);
    free(m);
    return rc;
}

/* Splits [p, p+n) with regex number `level`: every match and every stretch
 * between matches is a piece, which the next regex splits further; the last
 * level's pieces are BPE words (llama.cpp's sequence of pre-tokenizer
 * regexes). */
static int bpe_split(const drift_tokenizer *t, int level, const char *p, size_t n, ids_out *o) {
    /* n_re <= 4 (the array's size): the >= keeps the compiler's bounds
     * analysis of the recursion (-O3) from seeing level past it */
    if (level >= t->n_re || level >= (int)(sizeof t->re / sizeof t->re[0])) return n ? bpe_word(t, p, n, o) : 0;
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(t->re[level], NULL);
    if (!md) return -1;
    size_t pos = 0;
    int rc = 0;
    while (pos < n && !rc) {
        int r = pcre2_match(t->re[level], (PCRE2_SPTR)p, n, pos, 0, md, NULL);
        if (r < 0) { /* no more matches: the rest is one piece */
            rc = bpe_split(t, level + 1, p + pos, n - pos, o);
            break;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t s = ov[0], e = ov[1];
        if (s > pos) rc = bpe_split(t, level + 1, p + pos, s - pos, o); /* what no alternative matched */
        if (!rc && e > s) rc = bpe_split(t, level + 1, p + s, e - s, o);
        if (e == s) {
            /* empty match: cannot happen with these patterns; step one byte to be safe */
            if (!rc) rc = bpe_split(t, level + 1, p + s, 1, o);
            e = s + 1;
        }
        pos = e;
    }
    pcre2_match_data_free(md);
    return rc;
}

static int bpe_fragment(const drift_tokenizer *t, const char *p, size_t n, ids_out *o) { return bpe_split(t, 0, p, n, o); }

/* SPM: spaces -> U+2581 (and a prefix U+2581 at the start of the text), then merge by score. */
static int spm_fragment(const drift_tokenizer *t, const char *p, size_t n, int at_start, ids_out *o) {
    char *m = malloc(n * 3 + 4);
    if (!m) return -1;
    size_t k = 0;
    if (at_start && t->add_space_prefix) {
        memcpy(m, "\xe2\x96\x81", 3);
        k = 3;
    }
    for (size_t i = 0; i < n; i++) {
        if (p[i] == ' ') {
            memcpy(m + k, "\xe2\x96\x81", 3);
            k += 3;
        } else {
            m[k++] = p[i];
        }
    }
    int rc = merge_word(t, m, k, o);
    free(m);
    return rc;
}

drift_status tok_encode(const drift_tokenizer *t, const char *text, size_t len, int add_bos, int parse_special, int32_t **ids,
                        size_t *n, drift_error *err) {
    ids_out o = {0};
    int rc = 0;
    if (add_bos && t->bos >= 0) rc = push_id(&o, t->bos);
    size_t pos = 0, frag = 0;
    int first_frag = 1;
    while (!rc && pos <= len) {
        int32_t sp = -1;
        if (pos < len) {
            for (size_t i = 0; i < t->n_special; i++) {
                int32_t id = t->special[i];
                if (!parse_special && t->type[id] == TOK_TYPE_CONTROL) continue;
                if (t->len[id] <= len - pos && t->text[id][0] == text[pos] && !memcmp(t->text[id], text + pos, t->len[id])) {
                    sp = id;
                    break;
                }
            }
        }
        if (sp < 0 && pos < len) {
            pos++;
            continue;
        }
        if (pos > frag) {
            rc = t->kind == TOK_KIND_BPE ? bpe_fragment(t, text + frag, pos - frag, &o)
                                         : spm_fragment(t, text + frag, pos - frag, first_frag, &o);
            first_frag = 0;
        }
        if (sp < 0) break;
        if (!rc) rc = push_id(&o, sp);
        first_frag = 1; /* as llama.cpp: SPM text after a special token gets the space prefix again */
        pos += t->len[sp];
        frag = pos;
    }
    if (rc) {
        free(o.v);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory tokenizing %zu bytes", len);
    }
    *ids = o.v ? o.v : malloc(sizeof(int32_t));
    *n = o.n;
    return DRIFT_OK;
}

int tok_decode_token(const drift_tokenizer *t, int32_t id, int render_special, util_buf *out) {
    if (id < 0 || id >= t->n_vocab) return -1;
    int ty = t->type[id];
    if (ty == TOK_TYPE_CONTROL || ty == TOK_TYPE_UNUSED) return render_special ? buf_append(out, t->text[id], t->len[id]) : 0;
    if (ty == TOK_TYPE_USER) return buf_append(out, t->text[id], t->len[id]);
    const unsigned char *s = (const unsigned char *)t->text[id];
    size_t n = t->len[id];
    if (t->kind == TOK_KIND_SPM) {
        if (ty == TOK_TYPE_BYTE && n == 6 && !memcmp(s, "<0x", 3)) {
            char b = (char)strtol((const char *)s + 3, NULL, 16);
            return buf_append(out, &b, 1);
        }
        for (size_t i = 0; i < n;) {
            if (i + 3 <= n && !memcmp(s + i, "\xe2\x96\x81", 3)) {
                if (buf_append(out, " ", 1)) return -1;
                i += 3;
            } else {
                if (buf_append(out, s + i, 1)) return -1;
                i++;
            }
        }
        return 0;
    }
    for (size_t i = 0; i < n;) {
        size_t l = utf8_len(s + i, n - i);
        uint32_t cp = utf8_cp(s + i, l);
        if (l > 1 || s[i] < 0x80) {
            if (cp < 512 && t->cp_byte[cp] >= 0) {
                char b = (char)t->cp_byte[cp];
                if (buf_append(out, &b, 1)) return -1;
            } else if (buf_append(out, s + i, l)) {
                return -1;
            }
        } else if (buf_append(out, s + i, 1)) {
            return -1;
        }
        i += l;
    }
    return 0;
}

char *tok_decode(const drift_tokenizer *t, const int32_t *ids, size_t n, int strip_prefix_space, size_t *len_out) {
    util_buf b = {0};
    size_t i = 0;
    if (n && t->bos >= 0 && ids[0] == t->bos) i = 1;
    size_t first = i;
    for (; i < n; i++) {
        size_t before = b.len;
        if (tok_decode_token(t, ids[i], 0, &b)) {
            buf_free(&b);
            return NULL;
        }
        if (i == first && strip_prefix_space && t->kind == TOK_KIND_SPM && t->add_space_prefix && b.len > before && b.data[before] == ' ') {
            memmove(b.data + before, b.data + before + 1, b.len - before - 1);
            b.len--;
            b.data[b.len] = 0;
        }
    }
    if (len_out) *len_out = b.len;
    return buf_steal(&b);
}

int tok_n_vocab(const drift_tokenizer *t) { return t->n_vocab; }
int32_t tok_bos(const drift_tokenizer *t) { return t->bos; }
int32_t tok_eos(const drift_tokenizer *t) { return t->eos; }
int tok_add_bos_default(const drift_tokenizer *t) { return t->add_bos; }
tok_kind tok_get_kind(const drift_tokenizer *t) { return t->kind; }
const char *tok_pre_name(const drift_tokenizer *t) { return t->pre; }

int tok_is_eog(const drift_tokenizer *t, int32_t id) {
    if (id < 0) return 0;
    if (id == t->eos || id == t->eot) return 1;
    for (int i = 0; i < t->n_eog_extra; i++)
        if (t->eog_extra[i] == id) return 1;
    return 0;
}

int32_t tok_find(const drift_tokenizer *t, const char *piece) { return smap_get(&t->vocab, piece, strlen(piece)); }

const char *tok_piece(const drift_tokenizer *t, int32_t id) { return id >= 0 && id < t->n_vocab ? t->text[id] : NULL; }
