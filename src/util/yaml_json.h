/* yaml_json.h - a YAML document as a jansson tree, with where each node
 * was written (yaml_json.c says how scalars are typed and what is refused).
 *
 * The tree is plain JSON (objects, arrays, strings, integers, reals, true,
 * false, null), so the code that reads a JSON file reads a YAML one the same
 * way; the locator answers "which line was this node on" for messages:
 * "drift.yaml:12: targets.baseline.hedaers: unknown key". */
#ifndef DRIFT_UTIL_YAML_JSON_H
#define DRIFT_UTIL_YAML_JSON_H

#include <jansson.h>
#include <stddef.h>

#include "driftbench/status.h"

/* Caps on one document (0 in a field: its default). A document past one is
 * DRIFT_ERR_PARSE naming the cap: bounded work and memory for any input,
 * aliases expanded included (an alias is a copy of its anchor's node and
 * counts as many nodes as it copies). */
#define UTIL_YAML_MAX_BYTES (4u << 20)  /* 4 MiB of text */
#define UTIL_YAML_MAX_NODES 100000      /* scalars, sequences and mappings, copies included */
#define UTIL_YAML_MAX_DEPTH 64          /* nested sequences and mappings */

typedef struct util_yaml_limits {
    size_t max_bytes, max_nodes, max_depth;
} util_yaml_limits;

/* Where nodes were written: 1-based line and column of a node, and, for a
 * mapping's value, of its key. */
typedef struct util_yaml_locator util_yaml_locator;

/* Parses one YAML document (text, len bytes; name is the file name used in
 * messages) into *root (a new reference) and, when loc is non-NULL, *loc
 * (free with util_yaml_locator_free). lim NULL: the defaults. Errors are
 * DRIFT_ERR_PARSE "name:LINE:COL: what" (a syntax error, a duplicate key
 * with the line of the first, an unsupported tag, a number JSON cannot
 * hold, a cap) or DRIFT_ERR_NOMEM; then *root and *loc are NULL. An empty
 * document is null. */
drift_status util_yaml_parse(const char *text, size_t len, const char *name, const util_yaml_limits *lim,
                             json_t **root, util_yaml_locator **loc, drift_error *err);
void util_yaml_locator_free(util_yaml_locator *loc);

/* Where a member was written: of mapping parent's member key (its key's
 * place), or of sequence parent's item index (key NULL); parent NULL (and
 * key NULL): the root. 1 with *line, *col (1-based; either may be NULL),
 * 0 when the locator does not know it (loc NULL: a JSON file). Places are
 * kept per member because jansson's true, false and null are shared
 * nodes. */
int util_yaml_where(const util_yaml_locator *loc, const json_t *parent, const char *key, size_t index, int *line,
                    int *col);

/* The line of the node a field path names in root ("targets.baseline.url",
 * "configs[2].dims.model", "suites[0]"): of the deepest node the path
 * reaches (a member's key line; a name that is not there stops the walk at
 * its parent). 0 when nothing is known (loc NULL). */
int util_yaml_path_line(const util_yaml_locator *loc, const json_t *root, const char *path);

#endif
