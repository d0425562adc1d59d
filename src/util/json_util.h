/* json_util.h - small helpers over jansson values shared by the modules
 * that read JSON input and name what they found in their messages. */
#ifndef DRIFT_UTIL_JSON_UTIL_H
#define DRIFT_UTIL_JSON_UTIL_H

#include <jansson.h>

/* What a value is, for a message: "an object", "an array", "a string",
 * "a number", "a boolean", "null"; "missing" for NULL. Static text. */
const char *util_json_kind(const json_t *v);

#endif
