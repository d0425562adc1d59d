/* spec_tree.h - the matrix spec from a parsed tree (a YAML or JSON file
 * read by someone else: the config reader, src/pipeline/config.c). */
#ifndef DRIFT_MATRIX_SPEC_TREE_H
#define DRIFT_MATRIX_SPEC_TREE_H

#include <jansson.h>

#include "driftbench/matrix.h"
#include "util/yaml_json.h"

/* drift_matrix_spec_parse's work over root (borrowed); with loc (a YAML
 * file's locator, or NULL) a bad field's message carries its line:
 * "m.yaml:7: configs[1].target: missing ...". */
drift_status matrix_spec_from_tree(json_t *root, const char *name, const util_yaml_locator *loc,
                                   drift_matrix_spec **out, drift_error *err);

#endif
