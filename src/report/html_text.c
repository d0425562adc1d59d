/* html_text.c - the HTML renderers' bottom layer (html_internal.h):
 * escaping (html_span, html_text_n, html_text, html_escape), the section
 * heading that feeds the table of contents (html_h2) and where two
 * answers first part (html_first_difference). html.c (the pages),
 * html_compare.c (a comparison's lead) and html_diff.c (the word diff)
 * all write through it. */
#include <string.h>

#include "report/html_internal.h"
#include "util/sanitize.h"
#include "util/util.h"

void html_span(util_buf *b, const char *s, size_t len) {
    if (s) util_sanitize_append(b, s, len, UTIL_SAN_LINES | UTIL_SAN_HTML);
}

/* At most max_bytes of s (0: nothing), cut before a UTF-8 lead byte; 1
 * when s was longer. */
static int text_cut(util_buf *b, const char *s, size_t max_bytes) {
    if (!s) return 0;
    size_t n = strnlen(s, max_bytes);
    int cut = n == max_bytes && s[n];
    if (cut)
        while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80) n--;
    html_span(b, s, n);
    return cut;
}

void html_text_n(util_buf *b, const char *s, size_t max_bytes) { text_cut(b, s, max_bytes); }

void html_text(util_buf *b, const char *s) {
    if (text_cut(b, s, HTML_TEXT_MAX_BYTES)) buf_puts(b, "&#8230;");
}

void html_h2(util_buf *b, html_toc *t, const char *id, const char *title) {
    buf_printf(b, "<h2 id=\"%s\">%s</h2>\n", id, title);
    if (t && t->n < HTML_TOC_MAX) {
        t->id[t->n] = id;
        t->title[t->n] = title;
        t->n++;
    }
}

char *html_escape(const char *s) {
    util_buf b = {0};
    if (s) html_span(&b, s, strlen(s));
    return buf_steal(&b);
}

long html_first_difference(const char *a, const char *b) {
    if (!a) a = "";
    if (!b) b = "";
    long i = 0;
    while (a[i] && a[i] == b[i]) i++;
    if (!a[i] && !b[i]) return -1;
    return i;
}
