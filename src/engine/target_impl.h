/* target_impl.h - how a kind of target plugs into target.c: a table of
 * function pointers, as ggml's backends. Internal: what the engine's files
 * share carries the module's eng_ prefix. */
#ifndef DRIFT_TARGET_IMPL_H
#define DRIFT_TARGET_IMPL_H

#include "driftbench/model.h"
#include "driftbench/target.h"

typedef struct eng_target_vtable {
    const char *kind; /* "http", "embedded" */
    drift_status (*generate)(drift_target *t, const drift_gen_request *reqs, size_t n,
                             const drift_gen_params *params, drift_result_fn cb, void *user, drift_error *err);
    drift_status (*embed)(drift_target *t, const char *const *texts, size_t n, float **vecs, int *dim,
                          drift_error *err);
    void (*close)(drift_target *t);
    /* drift_target_send_raw (target.h); NULL: the kind cannot */
    drift_status (*send_raw)(drift_target *t, const drift_gen_request *reqs, size_t n, drift_result_fn cb,
                             void *user, drift_error *err);
} eng_target_vtable;

struct drift_target {
    const eng_target_vtable *vt;
    char *spec;
    char *config_json;   /* owned */
    drift_api api;
    drift_target_opts opts;
    void *impl;          /* the kind's own state */
    int polls_cancel;    /* 1: the kind asks opts.cancel itself while it waits and
                          * calls back every outcome it has before it stops; 0:
                          * target.c stops it at the first outcome after a cancel */
};

/* 1 when the caller's cancel hook (t->opts.cancel) says stop; 0 when there is
 * no hook or it says go on. Kinds call it while they wait (target.h). */
int eng_target_cancelled(const drift_target *t);

/* Openers of each kind (spec already matched to the scheme). Each fills t->vt,
 * t->impl, t->api, t->config_json. */
drift_status eng_http_open(drift_target *t, const char *spec, drift_error *err);
/* The embedded engine's opener (embedded.c). */
drift_status eng_embedded_open(drift_target *t, const char *spec, drift_error *err);
/* The model behind an embedded target; NULL for any other kind
 * (drift_target_model, target.h). */
const drift_model *eng_embedded_model(const drift_target *t);
/* The prompt tokens an embedded target feeds its model for a request's
 * prompt: completions = the raw text with the model's default BOS, no
 * special-token parsing; chat = one user message in the model's built-in
 * template. emb_generate and drift_target_prompt_tokens (target.h; teacher
 * forcing) both tokenize through it. DRIFT_ERR_UNSUPPORTED for another kind. */
drift_status eng_embedded_prompt_tokens(const drift_target *t, const char *prompt, int32_t **ids, size_t *n,
                                        drift_error *err);

#endif
