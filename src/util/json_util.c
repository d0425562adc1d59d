/* json_util.c - helpers over jansson values (json_util.h). */
#include "util/json_util.h"

const char *util_json_kind(const json_t *v) {
    if (!v) return "missing";
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER:
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "?";
}
