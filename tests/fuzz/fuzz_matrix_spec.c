/* fuzz_matrix_spec.c - drift_matrix_spec_parse over arbitrary bytes (the
 * matrix spec: explicit configurations, the product of dimensions, servers).
 * Besides "no crash, no leak", a successful parse must hold the spec's
 * invariants: at least one suite and one configuration, unique non-empty
 * labels, a target for each, dimension names and values present, and a
 * server's "{port}" in both its start command and its target (and nowhere
 * without a server). A failed parse must say what is wrong. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/matrix.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    drift_matrix_spec *s = NULL;
    drift_error err = {0};
    drift_status rc = drift_matrix_spec_parse((const char *)data, size, "fuzz.json", &s, &err);
    if (rc != DRIFT_OK) {
        if (s || err.msg[0] == '\0' || err.code != rc) abort();
        return 0;
    }
    if (!s || s->n_suites == 0 || s->n_configs == 0 || !s->baseline) abort();
    for (size_t i = 0; i < s->n_suites; i++)
        if (!s->suites[i]) abort();
    for (size_t i = 0; i < s->n_configs; i++) {
        const drift_matrix_config *c = &s->configs[i];
        if (!c->label || !*c->label || !c->target) abort();
        for (size_t d = 0; d < c->n_dims; d++)
            if (!c->dim_names[d] || !c->dim_values[d]) abort();
        int port_in_target = strstr(c->target, "{port}") != NULL;
        if (c->server.start) {
            if (!strstr(c->server.start, "{port}") || !port_in_target || !c->server.health) abort();
            if (!(c->server.ready_timeout_s > 0)) abort();
            if (!drift_matrix_server_same(&c->server, &c->server)) abort();
        } else if (port_in_target) {
            abort();
        }
        for (size_t j = i + 1; j < s->n_configs && j < i + 256; j++)
            if (strcmp(c->label, s->configs[j].label) == 0) abort();
        char *dims = drift_matrix_config_dims(c);
        if (!dims) abort();
        free(dims);
    }
    drift_matrix_spec_free(s);
    return 0;
}
