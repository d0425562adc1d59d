/* fuzz_sanitize.c - the sanitiser (src/util/sanitize.h) on arbitrary bytes.
 * For one line and for lines: the output passes hostile.h's check (no raw
 * control, C1 or bidi control, separator or noncharacter; valid UTF-8; no
 * line that starts a workflow command, no "##[" or "##vso["), a one-line
 * output has no newline, and sanitising it again changes nothing. The HTML
 * dialect: valid UTF-8, no raw markup character, no command (CR ends a
 * line). util_json_harden of the bytes as a JSON string: the check passes,
 * the text parses to the same string, hardening again changes nothing. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "unit/hostile.h"
#include "util/sanitize.h"
#include "util/util.h"

static void check_text(const uint8_t *data, size_t size, unsigned flags) {
    util_buf b = {0};
    if (util_sanitize_append(&b, (const char *)data, size, flags)) abort();
    if (!b.data || strlen(b.data) != b.len) abort(); /* no NUL inside: NULs are escaped */
    if (hostile_check(b.data, b.len, flags & UTIL_SAN_LINES ? 1 : 0)) abort();
    util_buf again = {0};
    if (util_sanitize_append(&again, b.data, b.len, flags)) abort();
    if (again.len != b.len || memcmp(again.data, b.data, b.len)) abort(); /* idempotent */
    buf_free(&again);
    buf_free(&b);
}

static void check_html(const uint8_t *data, size_t size) {
    util_buf b = {0};
    if (util_sanitize_append(&b, (const char *)data, size, UTIL_SAN_LINES | UTIL_SAN_HTML)) abort();
    if (!b.data || strlen(b.data) != b.len) abort();
    if (strpbrk(b.data, "<>\"'")) abort();
    for (char *p = b.data; *p; p++)
        if (*p == '\r') *p = '\n';
    if (hostile_check(b.data, b.len, 1)) abort();
    buf_free(&b);
}

static void check_json(const uint8_t *data, size_t size) {
    char *clean = util_utf8_clean((const char *)data, size); /* NUL bytes become U+FFFD too */
    if (!clean) abort();
    json_t *s = json_string(clean);
    if (!s) abort();
    char *text = json_dumps(s, JSON_ENCODE_ANY);
    char *hard = text ? util_json_harden(text) : NULL;
    if (!hard || hostile_check(hard, strlen(hard), 1)) abort();
    json_error_t je;
    json_t *back = json_loads(hard, JSON_DECODE_ANY, &je);
    if (!back || !json_equal(back, s)) abort(); /* the same data */
    char *again = util_json_harden(hard);
    if (!again || strcmp(again, hard)) abort();
    free(again);
    json_decref(back);
    free(hard);
    free(text);
    json_decref(s);
    free(clean);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    check_text(data, size, UTIL_SAN_LINE);
    check_text(data, size, UTIL_SAN_LINES);
    check_html(data, size);
    check_json(data, size);
    return 0;
}
