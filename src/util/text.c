/* text.c - the public faces of util's text helpers (text.h): the buffer,
 * the sanitiser, UTF-8 repair, JSON hardening and file reading, for the
 * CLI, which sees only include/. Each is a call of the internal function
 * (util.h, sanitize.h) that the library itself uses, so there is one
 * implementation and one behaviour; drift_buf is util_buf (util.h's
 * typedef), so a buffer passes between the two tiers as it is. */
#include "driftbench/text.h"

#include <assert.h>

#include "util/sanitize.h"
#include "util/util.h"

static_assert(DRIFT_SAN_LINE == UTIL_SAN_LINE && DRIFT_SAN_LINES == UTIL_SAN_LINES && DRIFT_SAN_HTML == UTIL_SAN_HTML,
              "text.h's sanitiser flags are sanitize.h's");

int drift_buf_append(drift_buf *b, const void *p, size_t n) { return buf_append(b, p, n); }

int drift_buf_puts(drift_buf *b, const char *s) { return buf_puts(b, s); }

int drift_buf_printf(drift_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = buf_vprintf(b, fmt, ap);
    va_end(ap);
    return rc;
}

int drift_buf_vprintf(drift_buf *b, const char *fmt, va_list ap) { return buf_vprintf(b, fmt, ap); }

char *drift_buf_steal(drift_buf *b) { return buf_steal(b); }

void drift_buf_free(drift_buf *b) { buf_free(b); }

int drift_sanitize_append(drift_buf *b, const char *s, size_t len, unsigned flags) {
    return util_sanitize_append(b, s, len, flags);
}

char *drift_sanitize(const char *s, unsigned flags) { return util_sanitize(s, flags); }

char *drift_json_harden(const char *json) { return util_json_harden(json); }

char *drift_utf8_clean(const char *s, size_t len) { return util_utf8_clean(s, len); }

drift_status drift_file_read(const char *path, char **out, size_t *len, drift_error *err) {
    return util_read_file(path, out, len, err);
}
