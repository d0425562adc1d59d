/* sanitize.h - the one sanitiser for text from outside (model answers,
 * names from imported files, labels, prompt ids, evaluator names, server
 * error bodies) before it leaves the program for a terminal, a CI log or a
 * report (sanitize.c says what it does and why). util_ tier: internal,
 * cross-module. */
#ifndef DRIFT_UTIL_SANITIZE_H
#define DRIFT_UTIL_SANITIZE_H

#include <stddef.h>
#include <stdint.h>

#include "util/util.h"

/* Flags of util_sanitize_append. */
#define UTIL_SAN_LINE 0u      /* one line: '\n' and '\t' are escaped like every control */
#define UTIL_SAN_LINES 1u     /* lines of a text: '\n' and '\t' are kept */
#define UTIL_SAN_HTML 2u      /* HTML text: & < > " ' as entities, C0 controls but LF, TAB, CR
                               * as U+FFFD, the command patterns broken as &#58; and &#91;
                               * (shown as ':' and '['); not idempotent (HTML escaping) */

/* Appends len bytes at s to b, made safe to print:
 *   - invalid UTF-8 (each byte that does not start a well-formed sequence)
 *     becomes U+FFFD;
 *   - C0 controls and DEL become visible escapes (\n \r \t, else \xNN),
 *     except '\n' and '\t' with UTIL_SAN_LINES; C1 controls (U+0080-009F),
 *     bidi controls (U+061C, U+200E-200F, U+202A-202E, U+2066-2069), line
 *     and paragraph separators (U+2028-2029) and noncharacters (U+FDD0-FDEF,
 *     U+xFFFE-xFFFF) become \uXXXX (\UXXXXXXXX above the BMP);
 *   - a line that would start with "::" after whitespace (a GitHub Actions
 *     workflow command) gets its first ':' as \x3a, and the '[' of "##[" or
 *     "##vso[" anywhere (legacy runner and Azure Pipelines commands) as \x5b;
 *     default-ignorable code points (ZWJ, soft hyphen, ...) count as absent
 *     when these are looked for, as the runners' culture-aware matching
 *     may ignore them.
 * Everything else, backslashes included, is copied as is, so the function
 * is idempotent: sanitising its output again changes nothing. s may hold
 * NUL bytes (escaped). Returns 0, or -1 when out of memory. */
int util_sanitize_append(util_buf *b, const char *s, size_t len, unsigned flags);

/* util_sanitize_append of the NUL-terminated s (NULL appends nothing). */
int util_sanitize_puts(util_buf *b, const char *s, unsigned flags);

/* util_sanitize_puts, then spaces up to `width` bytes from where it began
 * (as printf's "%-Ns" pads). */
int util_sanitize_pad(util_buf *b, const char *s, size_t width, unsigned flags);

/* A malloc'd sanitised copy of s (NULL is taken as ""); NULL when out of
 * memory. */
char *util_sanitize(const char *s, unsigned flags);

/* A JSON text (as json_dumps writes it: controls already escaped) made as
 * safe to print as the sanitiser's output without changing the data it
 * parses to: the code points the sanitiser escapes (C1, bidi controls,
 * separators, noncharacters) and the '[' of "##[" / "##vso[" are written
 * as \uXXXX escapes (they can only stand inside strings); invalid UTF-8
 * becomes U+FFFD. malloc'd, NUL-terminated; NULL when out of memory. */
char *util_json_harden(const char *json);

#endif
