/* fuzz_table.c - the flip-table CSV reader on arbitrary bytes: it must
 * either return a table or a parse error, never crash; a table it returns
 * must survive a write/read round trip with the same rows and values. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/analysis.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    drift_table *t = NULL;
    drift_error err = {0};
    if (drift_table_parse_csv((const char *)data, size, "fuzz", &t, &err) != DRIFT_OK) {
        if (!err.msg[0]) abort(); /* every failure names its cause */
        return 0;
    }
    char *csv = NULL;
    if (drift_table_format_csv(t, &csv, &err) != DRIFT_OK) abort();
    drift_table *u = NULL;
    if (drift_table_parse_csv(csv, strlen(csv), "roundtrip", &u, &err) != DRIFT_OK) abort();
    if (u->n_rows != t->n_rows || u->n_dims != t->n_dims) abort();
    for (size_t r = 0; r < t->n_rows; r++) {
        if (u->rows[r].flip_rate != t->rows[r].flip_rate || u->rows[r].num_flips != t->rows[r].num_flips)
            abort();
        for (size_t d = 0; d < t->n_dims; d++)
            if (strcmp(u->rows[r].dims[d], t->rows[r].dims[d])) abort();
    }
    free(csv);
    drift_table_free(u);
    drift_table_free(t);
    return 0;
}
