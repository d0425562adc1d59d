/* sanitize.c - the one sanitiser for text from outside (sanitize.h).
 *
 * Model answers, names from imported files (lm-eval filters, promptfoo
 * provider labels, evaluator names), labels, prompt ids and server error
 * bodies are hostile: printed raw they command what reads them.
 *   terminal   ESC, CSI and OSC sequences (and C1 controls, which some
 *              terminals decode as CSI/OSC) move the cursor, erase and
 *              redraw lines, set titles and hyperlinks: an answer can draw
 *              "verdict: PASS" over the real line; bidi overrides reorder
 *              what is shown (Trojan Source).
 *   CI         a GitHub runner takes a stdout or stderr line that starts
 *              with "::" after leading whitespace (String.TrimStart) as a
 *              workflow command (::error, ::add-mask::, ::stop-commands::),
 *              and "##[" anywhere in a line as a legacy one; the Azure
 *              Pipelines agent takes "##vso[" anywhere. Lines end at '\n'
 *              and at a bare '\r'. Both match with culture-aware string
 *              comparison, which may skip default-ignorable code points.
 * So: controls become visible escapes, invalid UTF-8 becomes U+FFFD, and
 * the command patterns are broken by escaping one of their characters.
 *
 * Escapes are plain ASCII that start with a backslash; a backslash in the
 * input is kept as it is. That makes the function idempotent (a second
 * pass finds no control, no invalid byte and no pattern), so a renderer
 * may sanitise the pieces it takes from outside and then its whole output
 * again; the price is that "\x1b" in an answer and ESC print alike, which
 * a human reader can live with (JSON keeps the exact text: jansson escapes
 * controls, util_json_harden the rest).
 *
 * One pass over code points with a little state: whether the line has had
 * a significant code point yet (leading whitespace and ignorables are not)
 * and the last five significant ASCII characters (for "##[" / "##vso[").
 * "::" at a line's start needs one look ahead past ignorables.
 *
 * The HTML dialect (UTIL_SAN_HTML, html.c's escaping) writes the same text
 * as HTML: the five markup characters as entities, C0 controls as U+FFFD
 * (as the page always did; CR is kept, and starts a line), and the command
 * patterns broken with &#58; and &#91;, which a browser shows as ':' and
 * '[': the page reads as the answer did, and printed raw (report --html -)
 * it commands no runner. */
#include "util/sanitize.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

static int is_bidi_control(uint32_t cp) {
    return cp == 0x061C || cp == 0x200E || cp == 0x200F || (cp >= 0x202A && cp <= 0x202E) ||
           (cp >= 0x2066 && cp <= 0x2069);
}

static int is_noncharacter(uint32_t cp) { return (cp >= 0xFDD0 && cp <= 0xFDEF) || (cp & 0xFFFE) == 0xFFFE; }

/* Above ASCII: the code points written as \u escapes (also by JSON). */
static int escaped_above_ascii(uint32_t cp) {
    return (cp >= 0x80 && cp <= 0x9F) || is_bidi_control(cp) || cp == 0x2028 || cp == 0x2029 || is_noncharacter(cp);
}

static int needs_escape(uint32_t cp, unsigned flags) {
    if (cp == '\n' || cp == '\t') return !(flags & UTIL_SAN_LINES);
    return cp < 0x20 || cp == 0x7F || escaped_above_ascii(cp);
}

/* A default-ignorable code point that is printed as it is (not escaped):
 * invisible, and possibly skipped by a culture-aware match. */
static int is_transparent(uint32_t cp) {
    return cp >= 0x80 && !escaped_above_ascii(cp) && utf8proc_get_property((utf8proc_int32_t)cp)->ignorable;
}

/* Whitespace that String.TrimStart removes and that is printed as it is. */
static int is_lead_space(uint32_t cp) {
    return cp == ' ' || cp == '\t' || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x202F ||
           cp == 0x205F || cp == 0x3000;
}

static int put_escape(util_buf *b, uint32_t cp) {
    if (cp == '\n') return buf_puts(b, "\\n");
    if (cp == '\r') return buf_puts(b, "\\r");
    if (cp == '\t') return buf_puts(b, "\\t");
    if (cp < 0x80) return buf_printf(b, "\\x%02x", (unsigned)cp);
    if (cp <= 0xFFFF) return buf_printf(b, "\\u%04x", (unsigned)cp);
    return buf_printf(b, "\\U%08x", (unsigned)cp);
}

/* The last significant ASCII characters of a line (0 for others). */
typedef struct san_hist {
    char c[5];
} san_hist;

static void hist_push(san_hist *h, uint32_t cp) {
    memmove(h->c, h->c + 1, sizeof h->c - 1);
    h->c[sizeof h->c - 1] = cp < 0x80 ? (char)cp : 0;
}

/* "##" or "##vso" just before: a '[' now would open a runner command. */
static int hist_opens_command(const san_hist *h) {
    return (h->c[3] == '#' && h->c[4] == '#') || !memcmp(h->c, "##vso", 5);
}

/* The next code point from s[i..len) that is not transparent (U+FFFD for
 * an invalid byte); -1 at the end. */
static long next_significant(const unsigned char *s, size_t len, size_t i) {
    while (i < len) {
        uint32_t cp;
        size_t k = util_utf8_decode((const char *)s + i, len - i, &cp);
        if (!k) return 0xFFFD;
        if (!is_transparent(cp)) return (long)cp;
        i += k;
    }
    return -1;
}

int util_sanitize_append(util_buf *b, const char *str, size_t len, unsigned flags) {
    const unsigned char *s = (const unsigned char *)str;
    int line_start = 1, bad = 0, html = (flags & UTIL_SAN_HTML) != 0;
    san_hist h;
    memset(&h, 0, sizeof h);
    if (buf_reserve(b, len)) return -1;
    b->data[b->len] = '\0'; /* NUL-terminated even when nothing is appended */
    for (size_t i = 0; i < len && !bad;) {
        uint32_t cp;
        size_t k = util_utf8_decode((const char *)s + i, len - i, &cp);
        if (!k) { /* an invalid byte: U+FFFD, significant */
            bad = buf_puts(b, "\xEF\xBF\xBD");
            line_start = 0;
            hist_push(&h, 0xFFFD);
            i++;
            continue;
        }
        if ((cp == '\n' && (flags & UTIL_SAN_LINES)) || (cp == '\r' && html)) { /* a runner ends a line at either */
            bad = buf_append(b, s + i, 1);
            line_start = 1;
            memset(&h, 0, sizeof h);
        } else if (needs_escape(cp, flags)) {
            bad = html && (cp < 0x20 || cp == 0x7F) ? buf_puts(b, "\xEF\xBF\xBD") : put_escape(b, cp);
            line_start = 0;
            hist_push(&h, '\\');
        } else if (is_transparent(cp) || (line_start && is_lead_space(cp))) {
            bad = buf_append(b, s + i, k);
        } else if (line_start && cp == ':' && next_significant(s, len, i + 1) == ':') {
            bad = buf_puts(b, html ? "&#58;" : "\\x3a");
            line_start = 0;
            hist_push(&h, '\\');
        } else if (cp == '[' && hist_opens_command(&h)) {
            bad = buf_puts(b, html ? "&#91;" : "\\x5b");
            line_start = 0;
            hist_push(&h, '\\');
        } else {
            const char *ent = !html ? NULL
                              : cp == '&' ? "&amp;" : cp == '<' ? "&lt;" : cp == '>' ? "&gt;"
                              : cp == '"' ? "&quot;" : cp == '\'' ? "&#39;" : NULL;
            bad = ent ? buf_puts(b, ent) : buf_append(b, s + i, k);
            line_start = 0;
            hist_push(&h, ent ? ';' : cp);
        }
        i += k;
    }
    return bad ? -1 : 0;
}

int util_sanitize_puts(util_buf *b, const char *s, unsigned flags) {
    return s ? util_sanitize_append(b, s, strlen(s), flags) : 0;
}

int util_sanitize_pad(util_buf *b, const char *s, size_t width, unsigned flags) {
    size_t at = b->len;
    if (util_sanitize_puts(b, s, flags)) return -1;
    size_t n = b->len - at;
    return n < width ? buf_printf(b, "%*s", (int)(width - n), "") : 0;
}

char *util_sanitize(const char *s, unsigned flags) {
    util_buf b = {0};
    if (util_sanitize_puts(&b, s ? s : "", flags)) {
        buf_free(&b);
        return NULL;
    }
    return buf_steal(&b);
}

/* \uXXXX for cp, a surrogate pair above the BMP. */
static int json_escape(util_buf *b, uint32_t cp) {
    if (cp <= 0xFFFF) return buf_printf(b, "\\u%04x", (unsigned)cp);
    cp -= 0x10000;
    return buf_printf(b, "\\u%04x\\u%04x", (unsigned)(0xD800 + (cp >> 10)), (unsigned)(0xDC00 + (cp & 0x3FF)));
}

char *util_json_harden(const char *json) {
    const unsigned char *s = (const unsigned char *)(json ? json : "");
    size_t len = strlen((const char *)s);
    util_buf b = {0};
    san_hist h;
    memset(&h, 0, sizeof h);
    int bad = buf_reserve(&b, len);
    if (!bad) b.data[0] = '\0';
    for (size_t i = 0; i < len && !bad;) {
        uint32_t cp;
        size_t k = util_utf8_decode((const char *)s + i, len - i, &cp);
        if (!k) {
            bad = buf_puts(&b, "\xEF\xBF\xBD");
            hist_push(&h, 0xFFFD);
            i++;
            continue;
        }
        if (cp == 0x7F || escaped_above_ascii(cp) || (cp == '[' && hist_opens_command(&h))) {
            bad = json_escape(&b, cp);
            hist_push(&h, '\\');
        } else {
            bad = buf_append(&b, s + i, k);
            if (!is_transparent(cp)) hist_push(&h, cp);
        }
        i += k;
    }
    if (bad) {
        buf_free(&b);
        return NULL;
    }
    return buf_steal(&b);
}
