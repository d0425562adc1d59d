/* text.h - text on its way out of the program, for the CLI and other
 * callers of the library: a growable buffer, the one sanitiser for text from
 * outside (model answers, imported names, server error bodies) before it
 * reaches a terminal, a CI log or a report, UTF-8 repair, JSON hardening,
 * and reading a whole file. The library's own code uses the same functions
 * under their internal names (util/util.h, util/sanitize.h); these are
 * their public faces, with the same contracts. */
#ifndef DRIFTBENCH_TEXT_H
#define DRIFTBENCH_TEXT_H

#include <stdarg.h>
#include <stddef.h>
#include "driftbench/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Growable NUL-terminated byte buffer. Zero-initialise; free with
 * drift_buf_free. The append functions return 0, or -1 when out of memory. */
typedef struct drift_buf {
    char *data;
    size_t len;
    size_t cap;
} drift_buf;

DRIFT_API int drift_buf_append(drift_buf *b, const void *p, size_t n);
DRIFT_API int drift_buf_puts(drift_buf *b, const char *s);
DRIFT_API int drift_buf_printf(drift_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
DRIFT_API int drift_buf_vprintf(drift_buf *b, const char *fmt, va_list ap);
/* Returns the data ("" if empty; the caller frees it) and resets b. */
DRIFT_API char *drift_buf_steal(drift_buf *b);
DRIFT_API void drift_buf_free(drift_buf *b);

/* Flags of drift_sanitize_append. */
#define DRIFT_SAN_LINE 0u   /* one line: '\n' and '\t' are escaped like every control */
#define DRIFT_SAN_LINES 1u  /* lines of a text: '\n' and '\t' are kept */
#define DRIFT_SAN_HTML 2u   /* HTML text: & < > " ' as entities, C0 controls but LF, TAB, CR
                             * as U+FFFD, the command patterns broken as &#58; and &#91; */

/* Appends len bytes at s to b, made safe to print: invalid UTF-8 becomes
 * U+FFFD; C0 controls and DEL become visible escapes (\n \r \t, else \xNN;
 * '\n' and '\t' kept with DRIFT_SAN_LINES); C1 controls, bidi controls,
 * line and paragraph separators and noncharacters become \uXXXX; a line
 * that would start a CI runner's workflow command ("::", "##[", "##vso[")
 * gets it broken. Everything else is copied as is, so sanitising the output
 * again changes nothing. s may hold NUL bytes (escaped). src/util/sanitize.c
 * says what and why in full. Returns 0, or -1 when out of memory. */
DRIFT_API int drift_sanitize_append(drift_buf *b, const char *s, size_t len, unsigned flags);

/* A malloc'd sanitised copy of s (NULL is taken as ""); NULL when out of
 * memory. */
DRIFT_API char *drift_sanitize(const char *s, unsigned flags);

/* A JSON text (as json_dumps writes it) made as safe to print as the
 * sanitiser's output without changing the data it parses to. malloc'd;
 * NULL when out of memory. */
DRIFT_API char *drift_json_harden(const char *json);

/* Copy of s (len bytes) as valid UTF-8: every byte that does not start a
 * valid sequence becomes U+FFFD. malloc'd; NULL when out of memory. */
DRIFT_API char *drift_utf8_clean(const char *s, size_t len);

/* Reads a whole file: *out malloc'd and NUL-terminated, *len excludes the
 * NUL. DRIFT_ERR_IO naming the file when it cannot be read. */
DRIFT_API drift_status drift_file_read(const char *path, char **out, size_t *len, drift_error *err);

#ifdef __cplusplus
}
#endif
#endif
