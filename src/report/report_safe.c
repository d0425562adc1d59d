/* report_safe.c - how the renderers put text from outside (labels, prompt
 * ids, names from imports, evaluator names, error messages, model answers)
 * into what they render (report_internal.h).
 *
 * Text and Markdown: each such string goes through the sanitiser
 * (src/util/sanitize.h) as one line and is cut to a byte budget, so a name
 * cannot break a line, draw on the terminal or command a CI runner, and an
 * answer cannot make a report of its own size; then the whole rendering
 * goes through the sanitiser once more as lines (report_text_finish), which
 * changes nothing in what was sanitised (the sanitiser is idempotent) and
 * catches what a renderer forgot. JSON: a string from outside is repaired
 * to valid UTF-8 before jansson sees it (json_string refuses invalid UTF-8
 * and returns NULL, and a NULL appended to an array is silently dropped:
 * flips vanished), and the dumped text is hardened (util_json_harden:
 * the same data, printed safely). */
#include <stdlib.h>
#include <string.h>

#include "driftbench/report.h"
#include "report/report_internal.h"
#include "util/sanitize.h"

/* The length of s cut to at most max bytes at a UTF-8 lead byte; *cut = 1
 * when that is shorter than s. */
static size_t cut_len(const char *s, size_t max, int *cut) {
    size_t n = strnlen(s, max + 1);
    *cut = n > max;
    if (!*cut) return n;
    n = max;
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80) n--;
    return n;
}

void report_put_text(util_buf *b, const char *s, size_t max_bytes) {
    if (!s) return;
    int cut;
    size_t n = cut_len(s, max_bytes, &cut);
    util_sanitize_append(b, s, n, UTIL_SAN_LINE);
    if (cut) buf_puts(b, "...");
}

void report_put_name(util_buf *b, const char *s) { report_put_text(b, s, REPORT_NAME_MAX_BYTES); }

void report_put_name_pad(util_buf *b, const char *s, size_t width) {
    size_t at = b->len;
    report_put_name(b, s);
    size_t n = b->len - at;
    if (n < width) buf_printf(b, "%*s", (int)(width - n), "");
}

drift_status report_text_finish(util_buf *b, char **out, drift_error *err) {
    util_buf t = {0};
    *out = NULL;
    if (!util_sanitize_append(&t, b->data ? b->data : "", b->len, UTIL_SAN_LINES)) *out = buf_steal(&t);
    buf_free(&t);
    buf_free(b);
    return *out ? DRIFT_OK : drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory rendering the report");
}

json_t *report_json_str(const char *s) {
    if (!s) s = "";
    size_t len = strlen(s);
    char *clean = util_utf8_clean(s, len);
    if (!clean) return NULL;
    json_t *j = json_string(clean);
    free(clean);
    return j;
}

json_t *report_json_load(const char *text) {
    if (!text) return NULL;
    char *clean = util_utf8_clean(text, strlen(text));
    json_error_t je;
    json_t *j = clean ? json_loads(clean, JSON_DECODE_ANY, &je) : NULL;
    free(clean);
    return j;
}

/* See report.h. */
int drift_json_schema_version(void) { return DRIFT_JSON_SCHEMA_VERSION; }

char *report_json_dump(json_t *root, size_t flags) {
    /* a document (an object) gets "schema_version" as its first key, then
     * root's keys in their order (report.h, DRIFT_JSON_SCHEMA_VERSION) */
    json_t *doc = json_is_object(root) ? json_object() : json_incref(root);
    if (doc && json_is_object(root) &&
        (json_object_set_new(doc, "schema_version", json_integer(DRIFT_JSON_SCHEMA_VERSION)) ||
         json_object_update(doc, root))) {
        json_decref(doc);
        doc = NULL;
    }
    char *s = doc ? json_dumps(doc, flags) : NULL;
    json_decref(doc);
    char *h = s ? util_json_harden(s) : NULL;
    char *line = h ? util_asprintf("%s\n", h) : NULL;
    free(s);
    free(h);
    return line;
}
