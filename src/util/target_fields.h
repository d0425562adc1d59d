/* target_fields.h - a target spec written as fields of a config file
 * (url, model, api, api_key_env, ...) made into the one-line spec the
 * targets take ("URL?model=M&api=chat&api_key_env=NAME"): the measure file's
 * targets and the matrix file's explicit configurations share it. */
#ifndef DRIFT_UTIL_TARGET_FIELDS_H
#define DRIFT_UTIL_TARGET_FIELDS_H

#include <jansson.h>
#include <stddef.h>

/* The fields, NULL-terminated: target (a whole spec, alone), url, model,
 * api, api_key_env, embed_model, detect, allow_insecure_key. */
extern const char *const util_target_field_names[];

/* 1 when key is one of util_target_field_names. */
int util_target_field(const char *key);

/* The spec that obj's target fields make: 1 with *spec (malloc'd) when it
 * has "target" or "url"; 0 when it has neither (*spec NULL); -1 when a
 * field is wrong (or on nomem: *bad_key NULL), with *bad_key the field (a
 * key of obj) and why[] what is wrong. A "{port}" in url is kept as it is;
 * model and embed_model are %-escaped where the query needs it. */
int util_target_from_fields(const json_t *obj, char **spec, const char **bad_key, char *why, size_t why_cap);

#endif
