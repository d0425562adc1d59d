/* chat.c - the chat evaluator's pieces: an embedder (texts -> vectors) and
 * the semantic drift rate SDR = 1 - cos(e(baseline answer), e(target answer)).
 *
 * Chat answers have no ground truth, so the paper judges a pair: semantic
 * drift when SDR > 0.30 (all-mpnet-base-v2 embeddings; Spearman 0.804 against
 * human ratings). The embedder is an OpenAI-compatible /v1/embeddings
 * endpoint reached through the target interface (drift_target_embed); its
 * name "embed:" + spec (the spec as a run's record keeps a target: no
 * password, no key variable; util_target_record) is stored with every
 * embedding, so SDRs from two embedders never mix. The embedded engine's mean-pooled hidden state will
 * be the built-in embedder once the shipped models exist (issue 4).
 *
 * drift_sdr accumulates in double: with float accumulation the cosine of two
 * 768-d vectors is off by ~1e-6, the size of the differences we must see. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/eval.h"
#include "eval/evaluator.h"
#include "driftbench/target.h"
#include "util/util.h"

struct drift_embedder {
    drift_target *target;
    char *name;
};

drift_status drift_embedder_open(const char *spec, drift_embedder **out, drift_error *err) {
    if (!out) return drift_error_set(err, DRIFT_ERR_INVALID, "embedder: no output handle");
    *out = NULL;
    if (!spec || !*spec || !strcmp(spec, "builtin"))
        return drift_error_set(err, DRIFT_ERR_UNSUPPORTED,
                               "the built-in embedder needs the embedded engine and the shipped models (issue 4); "
                               "give --embedder 'http://HOST:PORT/v1?model=all-mpnet-base-v2' (an /v1/embeddings "
                               "endpoint)");
    drift_target_opts to;
    drift_target_opts_default(&to);
    drift_target *t = NULL;
    drift_status st = drift_target_open(spec, &to, &t, err);
    if (st != DRIFT_OK) return drift_error_prefix(err, "embedder '%s': ", spec);
    drift_embedder *e = calloc(1, sizeof *e);
    char *rec = util_target_record(spec); /* the name is stored and printed: no secrets in it */
    char *name = rec ? util_asprintf("embed:%s", rec) : NULL;
    free(rec);
    if (!e || !name) {
        free(e);
        free(name);
        drift_target_close(t);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "embedder: out of memory");
    }
    e->target = t;
    e->name = name;
    *out = e;
    return DRIFT_OK;
}

const char *drift_embedder_name(const drift_embedder *e) { return e ? e->name : "none"; }

drift_status drift_embedder_embed(drift_embedder *e, const char *const *texts, size_t n, float **vecs, int *dim,
                                  drift_error *err) {
    if (!e || !vecs || !dim || (n > 0 && !texts))
        return drift_error_set(err, DRIFT_ERR_INVALID, "embedder: missing arguments");
    *vecs = NULL;
    *dim = 0;
    if (n == 0) return DRIFT_OK;
    drift_status st = drift_target_embed(e->target, texts, n, vecs, dim, err);
    if (st != DRIFT_OK) return drift_error_prefix(err, "%s: ", e->name);
    if (!*vecs || *dim <= 0) {
        free(*vecs);
        *vecs = NULL;
        return drift_error_set(err, DRIFT_ERR_PARSE, "%s: the endpoint returned no embeddings", e->name);
    }
    for (size_t i = 0; i < n * (size_t)*dim; i++) {
        if (!isfinite((*vecs)[i])) {
            size_t row = i / (size_t)*dim;
            free(*vecs);
            *vecs = NULL;
            return drift_error_set(err, DRIFT_ERR_NUMERIC, "%s: embedding %zu has a non-finite component", e->name,
                                   row);
        }
    }
    return DRIFT_OK;
}

void drift_embedder_close(drift_embedder *e) {
    if (!e) return;
    drift_target_close(e->target);
    free(e->name);
    free(e);
}

double drift_sdr(const float *a, const float *b, int dim) {
    if (!a || !b || dim <= 0) return NAN;
    double ab = 0, aa = 0, bb = 0;
    for (int i = 0; i < dim; i++) {
        ab += (double)a[i] * b[i];
        aa += (double)a[i] * a[i];
        bb += (double)b[i] * b[i];
    }
    if (aa == 0 || bb == 0) return NAN;
    return 1.0 - ab / (sqrt(aa) * sqrt(bb));
}

/* ---- the method (eval/evaluator.h): the embedder, opened once, embeds batches ---- */

static drift_status chat_open(const eval_config *cfg, void **state, drift_error *err) {
    drift_embedder *e = NULL;
    drift_status rc = drift_embedder_open(cfg->embedder_spec, &e, err);
    if (rc == DRIFT_OK && !e) rc = DRIFT_ERR_UNSUPPORTED; /* no --embedder given */
    *state = e;
    return rc;
}

static const char *chat_name(const void *state) { return drift_embedder_name(state); }

static drift_status chat_embed(void *state, const char *const *texts, size_t n, float **vecs, int *dim,
                               drift_error *err) {
    return drift_embedder_embed(state, texts, n, vecs, dim, err);
}

static void chat_close(void *state) { drift_embedder_close(state); }

const eval_method eval_chat_method = {.how = EVAL_EMBED, .key_input = EVAL_KEY_NONE,
                                      .unavailable = "chat: no embedder available: ",
                                      .no_spec = "no --embedder given", .failed = "chat: embedder failed: ",
                                      .open = chat_open, .state_name = chat_name, .embed = chat_embed,
                                      .close = chat_close};
