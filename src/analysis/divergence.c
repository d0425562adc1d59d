/* divergence.c - where the two answers of a flipped pair part (compare.h).
 *
 * Three views of the same point, cheapest first:
 *   character  the first differing byte, moved back to the start of its
 *              UTF-8 code point ("é" vs "è" share a lead byte but differ as
 *              characters), reported as a byte offset and a code-point index;
 *   token      when both answers carry stored logprobs, the first index at
 *              which the two token lists differ (token text, else id); there
 *              the baseline's top-1 minus top-2 logprob is its margin (how
 *              close greedy decoding was to taking the other branch) and,
 *              when both sides list alternatives, KL(baseline || target) over
 *              the union of the two top lists;
 *   word       otherwise, the first differing whitespace-separated word.
 * The short diff is an LCS over words: common leading and trailing words are
 * skipped (they are the context), the rest is diffed by dynamic programming
 * bounded to a window of max_words words per side from the first
 * divergence, so a pair of 10^5-word answers costs at most max_words^2
 * cells. Rendered "... common [-removed-] {+added+} common ..." and cut to
 * about max_chars bytes.
 * Nothing here reads the store: the answers of a flip come from the
 * report's loader (src/report/load.c: drift_flip_divergence,
 * drift_flip_divergences and the comparison's details), which computes
 * divergences for flipped pairs only, on demand. */
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/compare.h"
#include "util/util.h"

#define DIV_MAX_WORDS 400   /* LCS window per side */
#define DIV_MAX_CHARS 200   /* rendered diff length, bytes */
#define DIV_CONTEXT 3       /* common words shown on each side of a change */
#define DIV_PROB_FLOOR 1e-10

/* ---- characters ---- */

/* Length of the well-formed UTF-8 sequence at s (1 for an invalid byte). */
static size_t utf8_len(const unsigned char *s) {
    unsigned char c = s[0];
    size_t n;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c >= 0xE0 && c <= 0xEF) n = 3;
    else if (c >= 0xF0 && c <= 0xF4) n = 4;
    else return 1;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80) return 1;
    return n;
}

/* First difference of a and b: byte offset of the first differing code
 * point (of a's decoding) in *byte, its code-point index in *cp. Returns 0
 * when the strings are identical. */
static int first_diff(const char *a, const char *b, size_t *byte, size_t *cp) {
    size_t d = 0;
    while (a[d] && a[d] == b[d]) d++;
    if (!a[d] && !b[d]) return 0;
    size_t i = 0, n = 0;
    while (i < d) {
        size_t l = utf8_len((const unsigned char *)a + i);
        if (i + l > d) break; /* the code point straddles the difference */
        i += l;
        n++;
    }
    *byte = i;
    *cp = n;
    return 1;
}

/* ---- words ---- */

typedef struct word {
    const char *p;
    size_t len;
    uint64_t h;
} word;

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

/* Splits s into whitespace-separated words. Returns -1 on no memory. */
static int split_words(const char *s, word **out, size_t *n) {
    size_t cap = 0, k = 0;
    word *w = NULL;
    const char *p = s;
    for (;;) {
        while (*p && is_space(*p)) p++;
        if (!*p) break;
        const char *q = p;
        while (*q && !is_space(*q)) q++;
        if (k == cap) {
            cap = cap ? cap * 2 : 64;
            word *nw = realloc(w, cap * sizeof *nw);
            if (!nw) {
                free(w);
                return -1;
            }
            w = nw;
        }
        w[k].p = p;
        w[k].len = (size_t)(q - p);
        w[k].h = util_fnv1a64(p, w[k].len, 0);
        k++;
        p = q;
    }
    *out = w;
    *n = k;
    return 0;
}

static int word_eq(const word *x, const word *y) {
    return x->h == y->h && x->len == y->len && !memcmp(x->p, y->p, x->len);
}

/* Index of the first differing word; for a whitespace-only difference,
 * the number of a's words that start before byte d. */
static long first_diff_word(const word *A, size_t na, const word *B, size_t nb, const char *a, size_t d) {
    size_t i = 0;
    while (i < na && i < nb && word_eq(&A[i], &B[i])) i++;
    if (i < na || i < nb) return (long)i;
    long k = 0;
    while ((size_t)k < na && (size_t)(A[k].p - a) < d) k++;
    return k;
}

/* ---- the word diff ---- */

enum { OP_EQ, OP_DEL, OP_INS };

typedef struct diff_op {
    int op;
    const word *w;
} diff_op;

static void put_words(util_buf *b, const word *w, size_t n, int *first) {
    for (size_t i = 0; i < n; i++) {
        if (!*first) buf_append(b, " ", 1);
        buf_append(b, w[i].p, w[i].len);
        *first = 0;
    }
}

static void put_op_words(util_buf *b, const diff_op *ops, size_t from, size_t to, int want, int *first) {
    for (size_t i = from; i < to; i++) {
        if (ops[i].op != want) continue;
        if (!*first) buf_append(b, " ", 1);
        buf_append(b, ops[i].w->p, ops[i].w->len);
        *first = 0;
    }
}

/* Renders ops (the middle part) with DIV_CONTEXT words of context. */
static void render_ops(util_buf *b, const diff_op *ops, size_t n, int *first) {
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        if (ops[i].op == OP_EQ) {
            while (j < n && ops[j].op == OP_EQ) j++;
            size_t run = j - i;
            /* the middle never starts with common words (the prefix was
             * skipped); it ends with some only when the LCS window cut it,
             * and the caller then adds "..." itself */
            if (j == n && run > DIV_CONTEXT) {
                put_op_words(b, ops, i, i + DIV_CONTEXT, OP_EQ, first);
            } else if (j < n && run > 2 * DIV_CONTEXT + 1) {
                put_op_words(b, ops, i, i + DIV_CONTEXT, OP_EQ, first);
                if (!*first) buf_append(b, " ", 1);
                buf_puts(b, "...");
                *first = 0;
                put_op_words(b, ops, j - DIV_CONTEXT, j, OP_EQ, first);
            } else {
                put_op_words(b, ops, i, j, OP_EQ, first);
            }
        } else {
            int dels = 0, ins = 0;
            while (j < n && ops[j].op != OP_EQ) {
                dels += ops[j].op == OP_DEL;
                ins += ops[j].op == OP_INS;
                j++;
            }
            if (dels) {
                if (!*first) buf_append(b, " ", 1);
                buf_puts(b, "[-");
                int f = 1;
                put_op_words(b, ops, i, j, OP_DEL, &f);
                buf_puts(b, "-]");
                *first = 0;
            }
            if (ins) {
                if (!*first) buf_append(b, " ", 1);
                buf_puts(b, "{+");
                int f = 1;
                put_op_words(b, ops, i, j, OP_INS, &f);
                buf_puts(b, "+}");
                *first = 0;
            }
        }
        i = j;
    }
}

/* LCS of A[0..na) and B[0..nb) as an edit script in *ops (n_ops). */
static int lcs_ops(const word *A, size_t na, const word *B, size_t nb, diff_op **ops, size_t *n_ops) {
    size_t W = nb + 1;
    uint32_t *L = calloc((na + 1) * W, sizeof *L); /* L[i][j] = LCS(A[i..], B[j..]) */
    diff_op *o = malloc((na + nb + 1) * sizeof *o);
    if (!L || !o) {
        free(L);
        free(o);
        return -1;
    }
    for (size_t i = na; i-- > 0;)
        for (size_t j = nb; j-- > 0;)
            L[i * W + j] = word_eq(&A[i], &B[j]) ? L[(i + 1) * W + j + 1] + 1
                           : L[(i + 1) * W + j] >= L[i * W + j + 1] ? L[(i + 1) * W + j]
                                                                    : L[i * W + j + 1];
    size_t i = 0, j = 0, k = 0;
    while (i < na || j < nb) {
        if (i < na && j < nb && word_eq(&A[i], &B[j])) {
            o[k++] = (diff_op){OP_EQ, &A[i]};
            i++;
            j++;
        } else if (j == nb || (i < na && L[(i + 1) * W + j] >= L[i * W + j + 1])) {
            o[k++] = (diff_op){OP_DEL, &A[i++]};
        } else {
            o[k++] = (diff_op){OP_INS, &B[j++]};
        }
    }
    free(L);
    *ops = o;
    *n_ops = k;
    return 0;
}

/* Cuts b to about max bytes at a UTF-8 boundary, marking the cut. */
static void cut(util_buf *b, size_t max) {
    if (!b->data || b->len <= max) return;
    size_t e = max;
    while (e > 0 && ((unsigned char)b->data[e] & 0xC0) == 0x80) e--;
    b->len = e;
    b->data[e] = '\0';
    buf_puts(b, " ...");
}

static drift_status word_diff_words(const word *A, size_t na, const word *B, size_t nb, size_t max_words,
                                    size_t max_chars, char **out, drift_error *err) {
    *out = NULL;
    size_t pre = 0;
    while (pre < na && pre < nb && word_eq(&A[pre], &B[pre])) pre++;
    size_t suf = 0;
    while (suf < na - pre && suf < nb - pre && word_eq(&A[na - 1 - suf], &B[nb - 1 - suf])) suf++;
    size_t ma = na - pre - suf, mb = nb - pre - suf;
    if (ma == 0 && mb == 0) {
        *out = util_strdup("");
        return *out ? DRIFT_OK : drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory rendering a diff");
    }
    int window = 0;
    if (max_words == 0) max_words = DIV_MAX_WORDS;
    if (ma > max_words || mb > max_words) {
        window = 1;
        if (ma > max_words) ma = max_words;
        if (mb > max_words) mb = max_words;
    }
    diff_op *ops = NULL;
    size_t n_ops = 0;
    if (lcs_ops(A + pre, ma, B + pre, mb, &ops, &n_ops))
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory diffing %zu x %zu words", ma, mb);
    util_buf b = {0};
    int first = 1;
    if (pre > DIV_CONTEXT) {
        buf_puts(&b, "...");
        first = 0;
    }
    size_t ctx = pre < DIV_CONTEXT ? pre : DIV_CONTEXT;
    put_words(&b, A + pre - ctx, ctx, &first);
    render_ops(&b, ops, n_ops, &first);
    free(ops);
    if (window) {
        if (!first) buf_append(&b, " ", 1);
        buf_puts(&b, "...");
    } else {
        size_t sctx = suf < DIV_CONTEXT ? suf : DIV_CONTEXT;
        put_words(&b, A + na - suf, sctx, &first);
        if (suf > DIV_CONTEXT) buf_puts(&b, " ...");
    }
    cut(&b, max_chars ? max_chars : DIV_MAX_CHARS);
    if (!b.data) {
        buf_free(&b);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory rendering a diff");
    }
    *out = buf_steal(&b);
    return DRIFT_OK;
}

/* See compare.h. */
drift_status drift_word_diff(const char *a, const char *b, size_t max_words, size_t max_chars, char **out,
                             drift_error *err) {
    *out = NULL;
    if (!a || !b) return drift_error_set(err, DRIFT_ERR_INVALID, "word diff needs two strings");
    word *A = NULL, *B = NULL;
    size_t na = 0, nb = 0;
    if (split_words(a, &A, &na) || split_words(b, &B, &nb)) {
        free(A);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory splitting words");
    }
    drift_status rc = word_diff_words(A, na, B, nb, max_words, max_chars, out, err);
    free(A);
    free(B);
    return rc;
}

/* ---- logprob tokens ---- */

typedef struct lp_alt {
    const char *tok;   /* NULL when only an id is known */
    json_int_t id;     /* -1 unknown */
    double logprob;
} lp_alt;

typedef struct lp_tok {
    const char *tok;
    json_int_t id;
    json_t *top;       /* borrowed; array or NULL */
} lp_tok;

typedef struct lp_list {
    json_t *root;
    lp_tok *t;
    size_t n;
} lp_list;

static void lp_free(lp_list *l) {
    json_decref(l->root);
    free(l->t);
    memset(l, 0, sizeof *l);
}

static drift_status lp_parse(const char *json, const char *side, lp_list *l, drift_error *err) {
    memset(l, 0, sizeof *l);
    json_error_t je;
    l->root = json_loads(json, 0, &je);
    if (!l->root)
        return drift_error_set(err, DRIFT_ERR_PARSE, "%s logprobs: line %d column %d: %s", side, je.line, je.column,
                               je.text);
    if (!json_is_array(l->root)) {
        lp_free(l);
        return drift_error_set(err, DRIFT_ERR_PARSE, "%s logprobs: not a JSON array", side);
    }
    size_t n = json_array_size(l->root);
    l->t = calloc(n ? n : 1, sizeof *l->t);
    if (!l->t) {
        lp_free(l);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory reading logprobs");
    }
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(l->root, i);
        json_t *tok = json_object_get(e, "token"), *id = json_object_get(e, "id"), *top = json_object_get(e, "top");
        if (!json_is_object(e) || (!json_is_string(tok) && !json_is_integer(id)) ||
            (top && !json_is_array(top) && !json_is_null(top))) {
            lp_free(l);
            return drift_error_set(err, DRIFT_ERR_PARSE,
                                   "%s logprobs[%zu]: expected {\"token\":..,\"logprob\":..,\"top\":[..]}", side, i);
        }
        l->t[i].tok = json_string_value(tok);
        l->t[i].id = json_is_integer(id) ? json_integer_value(id) : -1;
        l->t[i].top = json_is_array(top) ? top : NULL;
    }
    l->n = n;
    return DRIFT_OK;
}

static int tok_same(const char *ta, json_int_t ia, const char *tb, json_int_t ib) {
    if (ta && tb) return !strcmp(ta, tb);
    return ia >= 0 && ib >= 0 && ia == ib;
}

/* The alternatives of one token, sorted by decreasing logprob. */
static drift_status read_top(const json_t *top, const char *side, size_t at, lp_alt **out, size_t *n,
                             drift_error *err) {
    *out = NULL;
    *n = 0;
    size_t m = top ? json_array_size(top) : 0;
    if (!m) return DRIFT_OK;
    lp_alt *a = calloc(m, sizeof *a);
    if (!a) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory reading logprobs");
    for (size_t k = 0; k < m; k++) {
        json_t *e = json_array_get(top, k);
        json_t *tok = json_object_get(e, "token"), *id = json_object_get(e, "id"), *lp = json_object_get(e, "logprob");
        if (!json_is_number(lp) || (!json_is_string(tok) && !json_is_integer(id))) {
            free(a);
            return drift_error_set(err, DRIFT_ERR_PARSE,
                                   "%s logprobs[%zu].top[%zu]: expected {\"token\":..,\"logprob\":<number>}", side, at, k);
        }
        a[k].tok = json_string_value(tok);
        a[k].id = json_is_integer(id) ? json_integer_value(id) : -1;
        a[k].logprob = json_number_value(lp);
    }
    for (size_t k = 1; k < m; k++) { /* insertion sort: lists are short and usually sorted */
        lp_alt x = a[k];
        size_t j = k;
        while (j > 0 && a[j - 1].logprob < x.logprob) {
            a[j] = a[j - 1];
            j--;
        }
        a[j] = x;
    }
    *out = a;
    *n = m;
    return DRIFT_OK;
}

static long find_alt(const lp_alt *a, size_t n, const lp_alt *x) {
    for (size_t k = 0; k < n; k++)
        if (tok_same(a[k].tok, a[k].id, x->tok, x->id)) return (long)k;
    return -1;
}

/* Probabilities over the union U (n_u entries: side 0 = p's, side 1 = q's)
 * of one top list: listed tokens get exp(logprob), absent ones share the
 * list's residual mass 1 - sum (floored), then normalised to sum 1. */
static void union_probs(const lp_alt *list, size_t n, const lp_alt *const *U, size_t n_u, double *p) {
    double sum = 0;
    size_t missing = 0;
    for (size_t u = 0; u < n_u; u++) {
        long k = find_alt(list, n, U[u]);
        if (k >= 0) {
            p[u] = exp(list[k].logprob);
            sum += p[u];
        } else {
            p[u] = -1;
            missing++;
        }
    }
    double resid = sum < 1 ? 1 - sum : 0;
    double fill = missing ? resid / (double)missing : 0;
    if (fill < DIV_PROB_FLOOR) fill = DIV_PROB_FLOOR;
    double tot = 0;
    for (size_t u = 0; u < n_u; u++) {
        if (p[u] < 0) p[u] = fill;
        if (p[u] < DIV_PROB_FLOOR) p[u] = DIV_PROB_FLOOR;
        tot += p[u];
    }
    for (size_t u = 0; u < n_u; u++) p[u] /= tot;
}

/* KL(p || q) over the union of the two top lists (see union_probs). */
static double kl_tops(const lp_alt *a, size_t na, const lp_alt *b, size_t nb) {
    const lp_alt **U = malloc((na + nb) * sizeof *U);
    double *p = malloc((na + nb) * sizeof *p), *q = malloc((na + nb) * sizeof *q);
    double kl = NAN;
    if (U && p && q) {
        size_t n_u = 0;
        for (size_t k = 0; k < na; k++) U[n_u++] = &a[k];
        for (size_t k = 0; k < nb; k++)
            if (find_alt(a, na, &b[k]) < 0) U[n_u++] = &b[k];
        union_probs(a, na, U, n_u, p);
        union_probs(b, nb, U, n_u, q);
        kl = 0;
        for (size_t u = 0; u < n_u; u++) kl += p[u] * log(p[u] / q[u]);
        if (kl < 0) kl = 0; /* rounding */
    }
    free(U);
    free(p);
    free(q);
    return kl;
}

/* Token view: first differing token index in *idx, margin and KL there.
 * Returns 0 if the token lists are identical (inconsistent with the texts:
 * the caller falls back to words), 1 when idx was set. */
static drift_status token_view(const char *bj, const char *tj, long *idx, double *margin, double *kl, int *found,
                               drift_error *err) {
    lp_list A, B;
    *found = 0;
    drift_status rc = lp_parse(bj, "baseline", &A, err);
    if (rc) return rc;
    rc = lp_parse(tj, "target", &B, err);
    if (rc) {
        lp_free(&A);
        return rc;
    }
    size_t i = 0;
    while (i < A.n && i < B.n && tok_same(A.t[i].tok, A.t[i].id, B.t[i].tok, B.t[i].id)) i++;
    if (i < A.n || i < B.n) {
        *found = 1;
        *idx = (long)i;
        lp_alt *ta = NULL, *tb = NULL;
        size_t nta = 0, ntb = 0;
        if (i < A.n) rc = read_top(A.t[i].top, "baseline", i, &ta, &nta, err);
        if (!rc && i < B.n) rc = read_top(B.t[i].top, "target", i, &tb, &ntb, err);
        if (!rc) {
            if (nta >= 2) *margin = ta[0].logprob - ta[1].logprob;
            if (nta && ntb) *kl = kl_tops(ta, nta, tb, ntb);
        }
        free(ta);
        free(tb);
    }
    lp_free(&A);
    lp_free(&B);
    return rc;
}

/* ---- the divergence ---- */

/* See compare.h. */
drift_status drift_divergence_compute(const char *base_text, const char *base_logprobs_json, const char *targ_text,
                                      const char *targ_logprobs_json, drift_divergence *out, drift_error *err) {
    memset(out, 0, sizeof *out);
    out->first_diff_byte = out->first_diff_char = out->first_diff_token = -1;
    out->margin = out->kl = NAN;
    if (!base_text || !targ_text) return drift_error_set(err, DRIFT_ERR_INVALID, "divergence needs two texts");
    size_t d = 0, cp = 0;
    if (!first_diff(base_text, targ_text, &d, &cp)) {
        out->identical = 1;
        out->token_unit = DRIFT_UNIT_NONE;
        out->diff = util_strdup("");
        return out->diff ? DRIFT_OK : drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    out->first_diff_byte = (long)d;
    out->first_diff_char = (long)cp;
    drift_status rc = DRIFT_OK;
    if (base_logprobs_json && targ_logprobs_json) {
        int found = 0;
        rc = token_view(base_logprobs_json, targ_logprobs_json, &out->first_diff_token, &out->margin, &out->kl, &found,
                        err);
        if (rc) return rc;
        if (found) out->token_unit = DRIFT_UNIT_TOKEN;
    }
    word *A = NULL, *B = NULL;
    size_t na = 0, nb = 0;
    if (split_words(base_text, &A, &na) || split_words(targ_text, &B, &nb)) {
        free(A);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory splitting words");
    }
    if (out->token_unit != DRIFT_UNIT_TOKEN) {
        out->token_unit = DRIFT_UNIT_WORD;
        out->first_diff_token = first_diff_word(A, na, B, nb, base_text, d);
    }
    rc = word_diff_words(A, na, B, nb, DIV_MAX_WORDS, DIV_MAX_CHARS, &out->diff, err);
    free(A);
    free(B);
    if (rc == DRIFT_OK && out->diff && !out->diff[0]) {
        free(out->diff);
        out->diff = util_strdup("(only whitespace differs)");
        if (!out->diff) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    if (rc) drift_divergence_clear(out);
    return rc;
}

void drift_divergence_clear(drift_divergence *d) {
    if (!d) return;
    free(d->diff);
    free(d->error);
    d->diff = NULL;
    d->error = NULL;
}
