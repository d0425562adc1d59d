/* fuzz_import_lmeval.c - drift_import_parse over arbitrary bytes read as an
 * lm-evaluation-harness samples file (JSON lines), under a name whose task
 * (gsm8k) gives a workload, so a parse can go all the way through; the
 * invariants are fuzz_import_check.h's. */
#include <stdint.h>

#include "fuzz_import_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    drift_import_opts o;
    drift_import_opts_default(&o);
    o.format = DRIFT_IMPORT_LMEVAL;
    drift_import_set *s = NULL;
    drift_error err = {0};
    drift_status rc = drift_import_parse("m/samples_gsm8k_2026.jsonl", (const char *)data, size, &o, &s, &err);
    fuzz_import_check(rc, s, &err);
    /* detection too, with a task nobody knows: an error or a consistent set */
    s = NULL;
    drift_error e2 = {0};
    rc = drift_import_parse("samples_other_2026.jsonl", (const char *)data, size, NULL, &s, &e2);
    fuzz_import_check(rc, s, &e2);
    return 0;
}
