/* fuzz_stack_probe.c - fuzzes the parsers of what a serving stack says it
 * is (engine/stack_probe.c): the first byte picks the endpoint's parser
 * (mod ENG_PROBE_COUNT) and whether dims starts with a member; the rest is
 * the reply. Every outcome must keep dims an object whose members are only
 * strings of 1..ENG_PROBE_MAX_VALUE bytes without control characters or
 * positive integers, leave a member that was there untouched, and count
 * exactly the members it added; never a crash or a leak. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/http_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    unsigned sel = data[0];
    json_t *dims = json_object();
    if (!dims) return 0;
    if (sel & 0x80) json_object_set_new(dims, "framework", json_string("preset"));
    size_t before = json_object_size(dims);
    int n = eng_stack_parse((eng_probe_kind)(sel % ENG_PROBE_COUNT), (const char *)data + 1, size - 1, dims);
    if (n < 0 || json_object_size(dims) != before + (size_t)n) abort();
    if ((sel & 0x80) && strcmp(json_string_value(json_object_get(dims, "framework")), "preset")) abort();
    const char *k;
    json_t *v;
    json_object_foreach(dims, k, v) {
        if (json_is_integer(v)) {
            if (json_integer_value(v) <= 0) abort();
            continue;
        }
        if (!json_is_string(v)) abort();
        const char *s = json_string_value(v);
        size_t len = json_string_length(v);
        if (len == 0 || len > ENG_PROBE_MAX_VALUE || strlen(s) != len) abort();
        for (size_t i = 0; i < len; i++)
            if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) abort();
    }
    json_decref(dims);
    return 0;
}
