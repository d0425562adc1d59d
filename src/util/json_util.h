/* json_util.h - small helpers over jansson values shared by the modules
 * that read JSON input and name what they found in their messages. */
#ifndef DRIFT_UTIL_JSON_UTIL_H
#define DRIFT_UTIL_JSON_UTIL_H

#include <jansson.h>

#include "driftbench/status.h"

/* What a value is, for a message: "an object", "an array", "a string",
 * "a number", "a boolean", "null"; "missing" for NULL. Static text. */
const char *util_json_kind(const json_t *v);

/* A run's configuration dimensions "k=v,k=v" (--config; config_kv.c) set
 * in obj as strings, over what obj holds. Each item needs a key of a-z,
 * 0-9, '_' and '-', an '=' and a non-empty UTF-8 value; a key may come
 * once; empty items (",,") are skipped. A bad item is DRIFT_ERR_INVALID
 * naming it ("--config: ..."), obj unchanged. spec NULL or "": DRIFT_OK. */
drift_status util_config_apply(json_t *obj, const char *spec, drift_error *err);

#endif
