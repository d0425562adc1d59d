/* fuzz_config_kv.c - util_config_apply (src/util/config_kv.c, the reader
 * of --config k=v,...) on arbitrary bytes (up to the first NUL). Accepted:
 * every value of the object is a string and every item of the spec is in
 * it as given (key before the first '=', value after it); refused: the
 * error is DRIFT_ERR_INVALID with a "--config: " message, and the object
 * is unchanged. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/json_util.h"
#include "util/util.h"

static void check_items(const json_t *obj, const char *spec) {
    char *copy = util_strdup(spec), *save = NULL;
    if (!copy) abort();
    for (char *kv = strtok_r(copy, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq || eq == kv || !eq[1]) abort(); /* accepted, so every item is key=value */
        *eq = '\0';
        const char *v = json_string_value(json_object_get(obj, kv));
        if (!v || strcmp(v, eq + 1)) abort();
    }
    free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *spec = util_strndup((const char *)data, size); /* up to the first NUL */
    json_t *obj = json_pack("{s:s}", "model", "detected");
    if (!spec || !obj) abort();
    char *before = json_dumps(obj, JSON_COMPACT | JSON_SORT_KEYS);
    drift_error err = {0};
    drift_status rc = util_config_apply(obj, spec, &err);
    if (rc == DRIFT_OK) {
        const char *k;
        json_t *v;
        json_object_foreach(obj, k, v) if (!json_is_string(v)) abort();
        check_items(obj, spec);
    } else {
        char *after = json_dumps(obj, JSON_COMPACT | JSON_SORT_KEYS);
        if (rc != DRIFT_ERR_INVALID || strncmp(err.msg, "--config: ", 10)) abort();
        if (!before || !after || strcmp(before, after)) abort();
        free(after);
    }
    free(before);
    json_decref(obj);
    free(spec);
    return 0;
}
