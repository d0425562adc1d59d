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

/* Request control written as fields (system_prompt, template, headers,
 * extra_body; drift_request_ctl of target.h), each malloc'd. */
typedef struct util_request_fields {
    char *system_prompt;
    char *prompt_template;  /* "template": holds "{input}" */
    char *extra_body_json;  /* "extra_body": a mapping, as compact JSON */
    char **headers;         /* "headers": a mapping name -> value, as "Name: value" lines */
    size_t n_headers;
} util_request_fields;

extern const char *const util_request_field_names[]; /* NULL-terminated */
int util_request_field(const char *key);

/* obj's request fields into *out (zeroed first; the ones obj lacks stay
 * NULL): 0 ok; -1 a field is wrong (or nomem: *bad_key NULL), *bad_key
 * the key, *bad_sub the header's name for a bad header (else NULL), why[]
 * what is wrong; *out is then freed. */
int util_request_from_fields(const json_t *obj, util_request_fields *out, const char **bad_key, const char **bad_sub,
                             char *why, size_t why_cap);
void util_request_fields_free(util_request_fields *f);

/* Headers by name (target.h's drift_request_headers_over, which is this):
 * out gets base's "Name: value" lines whose name (case-insensitive, blanks
 * before the colon cut) no line of over has, then over's; out holds
 * n_base + n_over; returns how many. */
size_t util_headers_over(const char *const *base, size_t n_base, const char *const *over, size_t n_over,
                         const char **out);

#endif
