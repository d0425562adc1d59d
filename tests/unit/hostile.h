/* hostile.h - text from outside at its worst, and the check that what we
 * print of it is safe (tests of the sanitiser, of every renderer and the
 * sanitiser's fuzz target share them).
 *
 * HOSTILE holds, in one string: ESC[2K (erase the line) with a carriage
 * return and a fake verdict, an OSC 8 hyperlink ended by BEL, a C1 CSI
 * (U+009B), bidi overrides and isolates, GitHub workflow commands after a
 * newline ("::error::", "::add-mask::", the legacy "##[error]" and one
 * hidden behind a zero-width joiner), an Azure "##vso[" command, U+FFFE
 * (not an XML character), invalid UTF-8 and a CSV formula.
 *
 * hostile_check(s, n, lines) says what is wrong with printed text s (NULL
 * when nothing): invalid UTF-8; a C0 control (other than '\n' and, when
 * lines, '\t'; with lines == 0 also no '\n'), DEL, a C1 control, a bidi
 * control, U+2028/2029 or a noncharacter; a line whose first character
 * after whitespace and default-ignorable code points is "::"; "##[" or
 * "##vso[" with ignorables removed. Written apart from src/util/sanitize.c
 * on purpose: it checks the property, not the implementation. */
#ifndef DRIFT_TEST_HOSTILE_H
#define DRIFT_TEST_HOSTILE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <utf8proc.h>

#define HOSTILE_HEAD                                                                                \
    "id\x1b[2K\rverdict: PASS\x1b]8;;https://evil.example/\x07link\x1b]8;;\x07"                     \
    "\xc2\x9b" "31m\xe2\x80\xae" "desrever\xe2\x81\xa6" "iso\xe2\x81\xa9"                             \
    "\n::error::x\n  ::add-mask::secret\n##[error]x\n\xe2\x80\x8d::warning::zwj #\xe2\x80\x8d#[debug]y" \
    " ##vso[task.setvariable variable=a]b \xef\xbf\xbe "
#define HOSTILE HOSTILE_HEAD "\xff\xc0\xaf tail"
/* HOSTILE with its invalid bytes as U+FFFD (what a JSON string holds). */
#define HOSTILE_REPAIRED HOSTILE_HEAD "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd tail"

/* A prompt id or label that a spreadsheet would run as a formula. */
#define HOSTILE_FORMULA "=HYPERLINK(\"http://evil.example\",\"x\")"

/* The well-formed UTF-8 code point at s (n bytes), its length or 0. */
static inline size_t hostile_utf8(const unsigned char *s, size_t n, uint32_t *cp) {
    unsigned c = s[0];
    size_t need;
    uint32_t min;
    if (c < 0x80) return *cp = c, 1;
    if (c >= 0xC2 && c <= 0xDF) need = 2, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF) need = 3, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4) need = 4, min = 0x10000;
    else return 0;
    if (n < need) return 0;
    uint32_t v = c & (0x7F >> need);
    for (size_t i = 1; i < need; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        v = v << 6 | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    *cp = v;
    return need;
}

static inline int hostile_ignorable(uint32_t cp) {
    return cp >= 0x80 && utf8proc_get_property((utf8proc_int32_t)cp)->ignorable;
}

static inline const char *hostile_check(const char *str, size_t n, int lines) {
    const unsigned char *s = (const unsigned char *)str;
    int at_start = 1;           /* nothing but whitespace and ignorables yet on this line */
    uint32_t prev_sig = 0;      /* the line's first significant code point, while it is the only one */
    char last[6] = {0};         /* the last significant ASCII characters */
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t k = hostile_utf8(s + i, n - i, &cp);
        if (!k) return "invalid UTF-8";
        i += k;
        if (cp == '\n') {
            if (!lines) return "a newline in a one-line text";
            at_start = 1;
            prev_sig = 0;
            memset(last, 0, sizeof last);
            continue;
        }
        if (cp == '\t' && !lines) return "a tab in a one-line text";
        if ((cp < 0x20 && cp != '\t') || cp == 0x7F) return "a C0 control or DEL";
        if (cp >= 0x80 && cp <= 0x9F) return "a C1 control";
        if (cp == 0x061C || cp == 0x200E || cp == 0x200F || (cp >= 0x202A && cp <= 0x202E) ||
            (cp >= 0x2066 && cp <= 0x2069))
            return "a bidi control";
        if (cp == 0x2028 || cp == 0x2029) return "a line or paragraph separator";
        if ((cp >= 0xFDD0 && cp <= 0xFDEF) || (cp & 0xFFFE) == 0xFFFE) return "a noncharacter";
        if (hostile_ignorable(cp)) continue;
        int space = cp == ' ' || cp == '\t' || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
                    cp == 0x202F || cp == 0x205F || cp == 0x3000;
        if (at_start && space) continue;
        if (at_start) {
            at_start = 0;
            prev_sig = cp;
        } else if (prev_sig == ':' && cp == ':') {
            return "a line that starts with \"::\" (a workflow command)";
        } else {
            prev_sig = 0;
        }
        memmove(last, last + 1, sizeof last - 1);
        last[sizeof last - 1] = cp < 0x80 ? (char)cp : 0;
        if (!memcmp(last + 3, "##[", 3) || !memcmp(last, "##vso[", 6)) return "\"##[\" or \"##vso[\" (a runner command)";
    }
    return NULL;
}

#endif
