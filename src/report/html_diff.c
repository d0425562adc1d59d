/* html_diff.c - the word-level diff of two answers, as HTML (html_word_diff,
 * html_internal.h): the baseline's answer with the words the target lacks
 * in <del>, the target's with the words the baseline lacks in <ins>, shown
 * side by side by the report.
 *
 * Words are runs of bytes other than ASCII whitespace, so a UTF-8 sequence
 * (valid or not) never straddles a word boundary; two words are equal when
 * their bytes are, and each side keeps its own whitespace. Steps, each
 * bounded:
 *   1. the common start: both texts walked word by word while equal (no
 *      memory; a ring keeps where the last HTML_DIFF_CONTEXT common words
 *      start, so a long common start is shown as its last words only);
 *   2. at most HTML_DIFF_MAX_WORDS words of each after it are read; when
 *      both ended within that, their common end is set aside too;
 *   3. an LCS table of the rest, (n+1) x (m+1) 16-bit lengths (at most
 *      2001^2 x 2 bytes = 8 MB, n x m steps), walked from the start: a word
 *      in the LCS is common, the others are removed (a) or added (b);
 *   4. each side is written with a byte budget (HTML_DIFF_MAX_BYTES of its
 *      text, then "... (N more bytes)"); a run of marked words is one
 *      <del> or <ins>, whitespace between two marked words inside it.
 * Past the words read in 2 (answers longer than the cap) the text is
 * shown unmarked and st->capped says so. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "report/html_internal.h"

typedef struct word {
    size_t off, len, ws; /* the word at s + off, len bytes, then ws bytes of whitespace */
    uint32_t hash;       /* FNV-1a of its bytes: most unequal words differ here */
} word;

static int is_ws(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

static size_t ws_run(const char *s, size_t pos) {
    size_t n = 0;
    while (s[pos + n] && is_ws((unsigned char)s[pos + n])) n++;
    return n;
}

/* The word at pos (not whitespace) into *w; 0 when the text has ended. */
static int word_at(const char *s, size_t pos, word *w) {
    if (!s[pos]) return 0;
    size_t n = 0;
    uint32_t h = 2166136261u;
    while (s[pos + n] && !is_ws((unsigned char)s[pos + n])) h = (h ^ (unsigned char)s[pos + n++]) * 16777619u;
    w->hash = h;
    w->off = pos;
    w->len = n;
    w->ws = ws_run(s, pos + n);
    return 1;
}

static int word_eq(const char *a, const word *x, const char *b, const word *y) {
    return x->hash == y->hash && x->len == y->len && !memcmp(a + x->off, b + y->off, x->len);
}

/* ---- writing one side under a byte budget ---- */
typedef struct emit {
    util_buf *b;
    const char *s;     /* the side's text */
    size_t total;      /* strlen(s) */
    size_t shown;      /* bytes of s written so far */
    const char *tag;   /* "del" or "ins" */
    int open;          /* inside <tag> */
    int cut;           /* the budget ran out: nothing more is written */
    size_t cut_at;     /* offset of the first byte not shown */
} emit;

static void em_close(emit *e) {
    if (e->open) buf_printf(e->b, "</%s>", e->tag);
    e->open = 0;
}

/* len bytes at s + off, inside <tag> when marked. */
static void em_run(emit *e, size_t off, size_t len, int marked) {
    if (e->cut || !len) return;
    size_t room = HTML_DIFF_MAX_BYTES > e->shown ? HTML_DIFF_MAX_BYTES - e->shown : 0;
    size_t n = len;
    if (n > room) { /* cut at a UTF-8 lead byte */
        n = room;
        while (n > 0 && ((unsigned char)e->s[off + n] & 0xC0) == 0x80) n--;
    }
    if (n) {
        if (marked && !e->open) buf_printf(e->b, "<%s>", e->tag);
        if (!marked) em_close(e);
        e->open = marked;
        html_span(e->b, e->s + off, n);
        e->shown += n;
    }
    if (n < len) {
        e->cut = 1;
        e->cut_at = off + n;
    }
}

static void em_gap(emit *e, long words) {
    if (e->cut) return;
    em_close(e);
    buf_printf(e->b, "<span class=\"gap\">[&#8230; %ld words in common &#8230;]</span> ", words);
}

static void em_end(emit *e) {
    em_close(e);
    if (e->cut) buf_printf(e->b, "<span class=\"gap\">&#8230; (%zu more bytes)</span>", e->total - e->cut_at);
}

/* Words w[0..n) with their marks (NULL: all common); the whitespace after a
 * marked word is marked when the next word is too. */
static void em_words(emit *e, const word *w, size_t n, const unsigned char *mark) {
    for (size_t i = 0; i < n && !e->cut; i++) {
        int m = mark ? mark[i] : 0;
        em_run(e, w[i].off, w[i].len, m);
        em_run(e, w[i].off + w[i].len, w[i].ws, m && i + 1 < n && mark[i + 1]);
    }
}

/* Up to HTML_DIFF_MAX_WORDS words from pos into *out (malloc'd, n in *n);
 * *more = 1 when words remain after them. -1 when out of memory. */
static int read_words(const char *s, size_t pos, word **out, size_t *n, int *more) {
    *out = NULL;
    *n = 0;
    *more = 0;
    word *w = malloc(HTML_DIFF_MAX_WORDS * sizeof *w);
    if (!w) return -1;
    word x;
    while (word_at(s, pos, &x)) {
        if (*n == HTML_DIFF_MAX_WORDS) {
            *more = 1;
            break;
        }
        w[(*n)++] = x;
        pos = x.off + x.len + x.ws;
    }
    *out = w;
    return 0;
}

/* Marks of the LCS of a[0..n) and b[0..m): ma[i] = 1 when a[i] is not in
 * it, mb[j] likewise. -1 when out of memory. */
static int lcs_marks(const char *sa, const word *a, size_t n, const char *sb, const word *b, size_t m,
                     unsigned char *ma, unsigned char *mb) {
    for (size_t i = 0; i < n; i++) ma[i] = 1;
    for (size_t j = 0; j < m; j++) mb[j] = 1;
    if (!n || !m) return 0;
    size_t W = m + 1;
    uint16_t *L = calloc((n + 1) * W, sizeof *L); /* L[i][j]: LCS of a[i..) and b[j..) */
    if (!L) return -1;
    for (size_t i = n; i-- > 0;)
        for (size_t j = m; j-- > 0;) {
            uint16_t down = L[(i + 1) * W + j], right = L[i * W + j + 1];
            L[i * W + j] = word_eq(sa, &a[i], sb, &b[j]) ? (uint16_t)(L[(i + 1) * W + j + 1] + 1)
                                                         : (down > right ? down : right);
        }
    size_t i = 0, j = 0;
    while (i < n && j < m) {
        if (word_eq(sa, &a[i], sb, &b[j]) && L[i * W + j] == L[(i + 1) * W + j + 1] + 1) {
            ma[i++] = 0;
            mb[j++] = 0;
        } else if (L[(i + 1) * W + j] >= L[i * W + j + 1]) {
            i++;
        } else {
            j++;
        }
    }
    free(L);
    return 0;
}

/* One side: leading whitespace, the common start (its last CONTEXT words
 * when longer than twice that), the diffed words, the common end (its
 * first CONTEXT words when longer), the unread rest. */
static void write_side(emit *e, size_t lead, size_t head_from, size_t head_to, long head_skipped, const word *w,
                       size_t n, const unsigned char *mark, size_t tail_n, size_t rest_from) {
    em_run(e, 0, lead, 0);
    if (head_skipped > 0) em_gap(e, head_skipped);
    em_run(e, head_from, head_to - head_from, 0);
    em_words(e, w, n, mark);
    size_t shown_tail = tail_n > 2 * HTML_DIFF_CONTEXT ? HTML_DIFF_CONTEXT : tail_n;
    em_words(e, w + n, shown_tail, NULL);
    if (shown_tail < tail_n) em_gap(e, (long)(tail_n - shown_tail));
    if (rest_from < e->total) em_run(e, rest_from, e->total - rest_from, 0);
    em_end(e);
}

int html_word_diff(const char *a, const char *b, util_buf *a_html, util_buf *b_html, html_diff_stats *st) {
    html_diff_stats dummy;
    if (!st) st = &dummy;
    memset(st, 0, sizeof *st);
    if (!a) a = "";
    if (!b) b = "";
    emit ea = {.b = a_html, .s = a, .total = strlen(a), .tag = "del"};
    emit eb = {.b = b_html, .s = b, .total = strlen(b), .tag = "ins"};
    /* 1. the common start, with where its last CONTEXT words start */
    size_t la = ws_run(a, 0), lb = ws_run(b, 0), pa = la, pb = lb;
    size_t ring_a[HTML_DIFF_CONTEXT], ring_b[HTML_DIFF_CONTEXT];
    long k = 0;
    word wa, wb;
    int has_a, has_b;
    for (;;) {
        has_a = word_at(a, pa, &wa);
        has_b = word_at(b, pb, &wb);
        if (!has_a || !has_b || !word_eq(a, &wa, b, &wb)) break;
        ring_a[k % HTML_DIFF_CONTEXT] = wa.off;
        ring_b[k % HTML_DIFF_CONTEXT] = wb.off;
        k++;
        pa = wa.off + wa.len + wa.ws;
        pb = wb.off + wb.len + wb.ws;
    }
    if (!has_a && !has_b) { /* the same words: both shown as they are */
        em_run(&ea, 0, ea.total, 0);
        em_end(&ea);
        em_run(&eb, 0, eb.total, 0);
        em_end(&eb);
        return 0;
    }
    size_t head_a = la, head_b = lb;
    long skipped = 0;
    if (k > 2 * HTML_DIFF_CONTEXT) {
        skipped = k - HTML_DIFF_CONTEXT;
        head_a = ring_a[k % HTML_DIFF_CONTEXT]; /* the oldest of the last CONTEXT */
        head_b = ring_b[k % HTML_DIFF_CONTEXT];
    }
    /* 2. the words after it, and their common end when both were read whole */
    word *A = NULL, *B = NULL;
    size_t n = 0, m = 0;
    int more_a = 0, more_b = 0;
    unsigned char *ma = NULL, *mb = NULL;
    int rc = -1;
    if (read_words(a, pa, &A, &n, &more_a) || read_words(b, pb, &B, &m, &more_b)) goto out;
    size_t tail = 0;
    if (!more_a && !more_b)
        while (tail < n && tail < m && word_eq(a, &A[n - 1 - tail], b, &B[m - 1 - tail])) tail++;
    st->capped = more_a || more_b;
    /* 3. the LCS of the middle */
    ma = malloc(n - tail + 1);
    mb = malloc(m - tail + 1);
    if (!ma || !mb || lcs_marks(a, A, n - tail, b, B, m - tail, ma, mb)) goto out;
    for (size_t i = 0; i < n - tail; i++) st->removed += ma[i];
    for (size_t j = 0; j < m - tail; j++) st->added += mb[j];
    /* 4. both sides */
    size_t rest_a = n ? A[n - 1].off + A[n - 1].len + A[n - 1].ws : pa;
    size_t rest_b = m ? B[m - 1].off + B[m - 1].len + B[m - 1].ws : pb;
    write_side(&ea, skipped ? 0 : la, head_a, pa, skipped, A, n - tail, ma, tail, rest_a);
    write_side(&eb, skipped ? 0 : lb, head_b, pb, skipped, B, m - tail, mb, tail, rest_b);
    rc = 0;
out:
    free(A);
    free(B);
    free(ma);
    free(mb);
    return rc;
}

/* See html_internal.h. */
drift_status html_word_diff_text(const char *a, const char *b, char **a_html, char **b_html, long *removed,
                                  long *added, drift_error *err) {
    if (!a_html || !b_html) return drift_error_set(err, DRIFT_ERR_INVALID, "word diff: missing arguments");
    *a_html = *b_html = NULL;
    util_buf x = {0}, y = {0};
    html_diff_stats st;
    if (html_word_diff(a, b, &x, &y, &st) || !(*a_html = buf_steal(&x)) || !(*b_html = buf_steal(&y))) {
        buf_free(&x);
        buf_free(&y);
        free(*a_html);
        *a_html = NULL;
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    if (removed) *removed = st.removed;
    if (added) *added = st.added;
    return DRIFT_OK;
}
