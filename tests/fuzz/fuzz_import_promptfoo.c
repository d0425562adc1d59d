/* fuzz_import_promptfoo.c - drift_import_parse over arbitrary bytes read as
 * promptfoo's results.json (one run per provider); the invariants are
 * fuzz_import_check.h's. */
#include <stdint.h>

#include "fuzz_import_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    drift_import_opts o;
    drift_import_opts_default(&o);
    o.format = DRIFT_IMPORT_PROMPTFOO;
    drift_import_set *s = NULL;
    drift_error err = {0};
    drift_status rc = drift_import_parse("results.json", (const char *)data, size, &o, &s, &err);
    fuzz_import_check(rc, s, &err);
    return 0;
}
