/* tokcheck.c - prints the engine's token ids (add_bos = model default, no
 * special-token parsing: what api=completions sends) of each string of a
 * JSON array file, one JSON array of ids per line, so tools/train can
 * compare its Python BPE with the engine. With a third argument N it also
 * prints the last position's logits of each string (profile ref), N values.
 * Built with the project (CMake target tokcheck: build/tokcheck). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "driftbench/model.h"
#include "driftbench/profile.h"

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: tokcheck MODEL.gguf STRINGS.json [N_LOGITS]\n");
        return 2;
    }
    drift_error err;
    drift_numeric_profile p;
    drift_model *m;
    if (drift_profile_get("ref", &p, &err) || drift_model_load(argv[1], &p, &m, &err)) {
        fprintf(stderr, "tokcheck: %s\n", err.msg);
        return 2;
    }
    json_error_t je;
    json_t *arr = json_load_file(argv[2], 0, &je);
    if (!json_is_array(arr)) {
        fprintf(stderr, "tokcheck: %s: %s\n", argv[2], je.text);
        return 2;
    }
    int nlog = argc > 3 ? atoi(argv[3]) : 0;
    int V = drift_model_get_info(m)->n_vocab;
    for (size_t i = 0; i < json_array_size(arr); i++) {
        const char *s = json_string_value(json_array_get(arr, i));
        int32_t *ids;
        size_t n;
        if (!s || drift_model_tokenize(m, s, json_string_length(json_array_get(arr, i)), -1, 0, &ids, &n, &err)) return 2;
        printf("[");
        for (size_t k = 0; k < n; k++) printf("%s%d", k ? "," : "", ids[k]);
        printf("]\n");
        if (nlog > 0) {
            drift_session *ss;
            float *lg = malloc((size_t)V * sizeof *lg);
            if (!lg || drift_session_new(m, 0, &ss, &err) || drift_session_forward(ss, ids, n, 0, lg, NULL, &err)) return 2;
            printf("[");
            for (int k = 0; k < nlog && k < V; k++) printf("%s%.9g", k ? "," : "", lg[k]);
            printf("]\n");
            drift_session_free(ss);
            free(lg);
        }
        free(ids);
    }
    json_decref(arr);
    drift_model_free(m);
    return 0;
}
