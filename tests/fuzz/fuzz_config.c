/* fuzz_config.c - config files over arbitrary bytes: the YAML reader
 * (util/yaml_json.c: libyaml's events into a jansson tree, anchors copied
 * under the node cap, merge keys, duplicate keys, tags) and the config
 * reader on top (src/pipeline/config.c: a measure file, then the same
 * bytes as a matrix file). Besides "no crash, no leak, bounded": a failure
 * says what is wrong with a message naming the file; a measure file read
 * gives targets that are specs (non-empty) and request control whose
 * header lines are "Name: value" on one line; the locator knows the root. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/config.h"
#include "util/yaml_json.h"

static void check_err(drift_status rc, const drift_error *err) {
    if (err->code != rc || !err->msg[0] || strncmp(err->msg, "f.yaml", 6)) abort();
}

static void check_request(const drift_request_ctl *q) {
    for (size_t i = 0; i < q->n_headers; i++)
        if (!q->headers[i] || !strstr(q->headers[i], ": ") || strpbrk(q->headers[i], "\r\n")) abort();
    if (q->prompt_template && !strstr(q->prompt_template, "{input}")) abort();
    if (q->extra_body_json && q->extra_body_json[0] != '{') abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *text = (const char *)data;
    drift_error err = {0};
    /* the tree and its places */
    json_t *root = NULL;
    util_yaml_locator *loc = NULL;
    drift_status rc = util_yaml_parse(text, size, "f.yaml", NULL, &root, &loc, &err);
    if (rc) {
        if (root || loc) abort();
        check_err(rc, &err);
    } else {
        int line = 0;
        if (!root || !loc || !util_yaml_where(loc, NULL, NULL, 0, &line, NULL) || line < 1) abort();
        const char *k;
        json_t *v;
        if (json_is_object(root)) json_object_foreach(root, k, v) {
                if (!util_yaml_where(loc, root, k, 0, &line, NULL) || line < 1) abort();
            }
        json_decref(root);
        util_yaml_locator_free(loc);
    }
    /* a measure file */
    drift_config *c = NULL;
    memset(&err, 0, sizeof err);
    rc = drift_config_parse(text, size, "f.yaml", 0, &c, &err);
    if (rc) {
        if (c) abort();
        check_err(rc, &err);
        return 0;
    }
    drift_measure_opts o;
    drift_measure_opts_default(&o);
    drift_measure_file f;
    rc = drift_config_measure(c, &o, &f, &err);
    if (rc) {
        check_err(rc, &err);
    } else {
        for (int k = 0; k < 2; k++) {
            if (o.side[k].target && !o.side[k].target[0]) abort();
            check_request(&o.side[k].request);
        }
        check_request(&o.target_opts.request);
        for (size_t i = 0; i < o.n_suites; i++)
            if (!o.suites[i] || !o.suites[i][0]) abort();
        for (int i = 0; i < o.params.n_stop; i++)
            if (!o.params.stop[i]) abort();
        if (o.replicates < 1 || o.params.max_tokens < 1 || !(o.alpha > 0)) abort();
    }
    drift_config_free(c);
    /* the same bytes as a matrix file */
    c = NULL;
    if (drift_config_parse(text, size, "f.yaml", 0, &c, &err)) abort(); /* it parsed above */
    drift_matrix_spec *s = NULL;
    drift_matrix_file mf;
    rc = drift_config_matrix(c, &s, &mf, &err);
    if (rc) {
        if (s) abort();
        check_err(rc, &err);
    } else {
        if (!s || !s->n_configs || !s->n_suites) abort();
        for (size_t i = 0; i < s->n_configs; i++)
            if (!s->configs[i].target || !s->configs[i].label) abort();
        drift_matrix_spec_free(s);
    }
    drift_config_free(c);
    return 0;
}
