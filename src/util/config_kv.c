/* config_kv.c - a run's configuration dimensions given as "k=v,k=v"
 * (json_util.h, util_config_apply): the one reader of --config for both
 * of its users, the run stage (pipeline/run.c: over the target's detected
 * dimensions) and the import (import/import_store.c: over the imported
 * run's model and framework), so that both take the same spellings and
 * refuse the same mistakes with the same words.
 *
 * The items are read into an object of their own first and merged only
 * when every one is good, so a refused spec leaves the caller's object as
 * it was. */
#include <stdlib.h>
#include <string.h>

#include "util/json_util.h"
#include "util/util.h"

#define CONFIG_EXAMPLE "model=llama-3.1-8b,hardware=h100"

static int key_char_ok(char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

/* One item "k=v" (written to: the '=' becomes a NUL) into dims. */
static drift_status read_item(json_t *dims, char *kv, drift_error *err) {
    char *eq = strchr(kv, '=');
    if (!eq || eq == kv || !eq[1])
        return drift_error_set(err, DRIFT_ERR_INVALID, "--config: '%s' is not key=value (expected e.g. %s)", kv,
                               CONFIG_EXAMPLE);
    *eq = '\0';
    for (const char *c = kv; *c; c++)
        if (!key_char_ok(*c))
            return drift_error_set(err, DRIFT_ERR_INVALID, "--config: key '%s' may only use a-z, 0-9, '_' and '-'",
                                   kv);
    if (json_object_get(dims, kv))
        return drift_error_set(err, DRIFT_ERR_INVALID, "--config: key '%s' is given twice", kv);
    json_t *v = json_string(eq + 1);
    if (!v) return drift_error_set(err, DRIFT_ERR_INVALID, "--config: the value of '%s' is not valid UTF-8", kv);
    if (json_object_set_new(dims, kv, v)) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    return DRIFT_OK;
}

drift_status util_config_apply(json_t *obj, const char *spec, drift_error *err) {
    if (!spec || !*spec) return DRIFT_OK;
    json_t *dims = json_object();
    char *copy = dims ? util_strdup(spec) : NULL;
    if (!copy) {
        json_decref(dims);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    drift_status rc = DRIFT_OK;
    char *save = NULL;
    for (char *kv = strtok_r(copy, ",", &save); kv && !rc; kv = strtok_r(NULL, ",", &save))
        rc = read_item(dims, kv, err);
    if (!rc && json_object_update(obj, dims)) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    json_decref(dims);
    free(copy);
    return rc;
}
