/* traffic_internal.h - what the traffic module's files share (trf_ prefix).
 * Internal: not installed. */
#ifndef DRIFT_TRAFFIC_INTERNAL_H
#define DRIFT_TRAFFIC_INTERNAL_H

#include <jansson.h>

#include "driftbench/traffic.h"

/* drift_traffic_request_check over a parsed body. */
drift_status trf_request_check_json(const json_t *o, drift_error *err);

/* 1 when a request body is a /v1/completions one ("prompt", no "messages"). */
int trf_is_completions(const json_t *o);

/* The request's response_format type: 0 none/text, 1 json_object,
 * 2 json_schema (*schema then borrows the schema object). */
int trf_response_format(const json_t *req, const json_t **schema);

/* 1 when the request offers tools. */
int trf_has_tools(const json_t *req);

/* The text of the last user message (string content, or the "text" parts
 * of an array joined by newlines), or a completions request's prompt;
 * malloc'd, "" when none. */
char *trf_last_user_text(const json_t *req);

/* drift_traffic_schema_check over parsed values (root: the schema's root,
 * for $ref). */
int trf_schema_check(const json_t *root, const json_t *schema, const json_t *v, char *path, size_t pathcap,
                     char *why, size_t cap, int depth);

/* Whether class c applies to a request (for an error pair, whose answers
 * are unknown); math applies to every request (counted once some pair is
 * math-like). */
int trf_class_applies(int c, const json_t *req, int guard_on, int semantic_on);

/* The text a guard or an embedder reads of a message: its content, or the
 * whole message when it has none. malloc'd; NULL on nomem. */
char *trf_readable(const char *msg);

/* The tests a request carries for the code class (metadata.driftbench_tests,
 * a non-empty string): 0 none; 1 with a valid entry point
 * (metadata.driftbench_entry_point, an identifier); -1 tests without a
 * valid entry point. *tests / *entry borrow from req when not NULL. */
int trf_code_tests(const json_t *req, const char **tests, const char **entry);

/* 1 for the classes with a direction (json, schema, guard, code). */
int trf_class_directional(int c);

#endif
