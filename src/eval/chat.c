/* chat.c - placeholder until the chat embedder lands (issue 5). */
#include <math.h>
#include "driftbench/eval.h"

drift_status drift_embedder_open(const char *spec, drift_embedder **out, drift_error *err) {
    (void)spec;
    *out = NULL;
    return drift_error_set(err, DRIFT_ERR_UNSUPPORTED, "chat embedder not built yet");
}
const char *drift_embedder_name(const drift_embedder *e) { (void)e; return "none"; }
drift_status drift_embedder_embed(drift_embedder *e, const char *const *texts, size_t n, float **vecs, int *dim,
                                  drift_error *err) {
    (void)e; (void)texts; (void)n; (void)vecs; (void)dim;
    return drift_error_set(err, DRIFT_ERR_UNSUPPORTED, "chat embedder not built yet");
}
void drift_embedder_close(drift_embedder *e) { (void)e; }
double drift_sdr(const float *a, const float *b, int dim) {
    double ab = 0, aa = 0, bb = 0;
    for (int i = 0; i < dim; i++) {
        ab += (double)a[i] * b[i];
        aa += (double)a[i] * a[i];
        bb += (double)b[i] * b[i];
    }
    if (aa == 0 || bb == 0) return NAN;
    return 1.0 - ab / (sqrt(aa) * sqrt(bb));
}
