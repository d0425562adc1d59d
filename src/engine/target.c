/* target.c - the target interface of target.h: picks the kind of target from
 * the spec's scheme and forwards every call through the kind's vtable
 * (target_impl.h).
 *
 *   "http://..." / "https://..."  -> http.c      (OpenAI-compatible endpoint)
 *   "embedded:..."                -> embedded.c  (in-process engine)
 *
 * Every outcome a kind calls back passes through relay_result on its way to
 * the caller: a failure the kind left without a cause gets DRIFT_FAIL_OTHER
 * (and an answer DRIFT_FAIL_NONE), so a caller counting failures by cause
 * never sees an error without one; and, for a kind that never looks at the
 * cancel hook itself (the embedded engine), the hook is asked after each
 * outcome.
 *
 * Request control (opts.request, target.h): copied at open into the
 * target's own memory (req_copy), so the caller's strings may go away; a
 * prompt_template without "{input}" is refused here for every kind (it
 * would send every prompt the same text); each kind takes what it can
 * (http.c: all of it; embedded.c: system prompt and template).
 *
 * Credentials: the default options carry no key of their own and name
 * $OPENAI_API_KEY as the default variable, read when an http target opens
 * and sent only where it is safe; http.c says which key goes where. A
 * target keeps its spec as given (drift_target_spec); every message that
 * quotes it passes drift_error_set's redaction. */
#include "engine/http_internal.h"
#include "engine/target_impl.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/target_fields.h"
#include "util/util.h"

size_t drift_request_headers_over(const char *const *base, size_t n_base, const char *const *over, size_t n_over,
                                  const char **out) {
    return util_headers_over(base, n_base, over, n_over, out); /* util/target_fields.c: the matrix spec's too */
}

void drift_request_ctl_over(drift_request_ctl *out, const drift_request_ctl *base, const drift_request_ctl *over,
                            const char **hbuf) {
    *out = *base;
    if (over->system_prompt) out->system_prompt = over->system_prompt;
    if (over->prompt_template) out->prompt_template = over->prompt_template;
    if (over->extra_body_json) out->extra_body_json = over->extra_body_json;
    size_t n = drift_request_headers_over(base->headers, base->n_headers, over->headers, over->n_headers, hbuf);
    out->headers = n ? hbuf : NULL;
    out->n_headers = n;
}

int drift_request_ctl_any(const drift_request_ctl *q) {
    return q->system_prompt || q->prompt_template || q->extra_body_json || q->n_headers;
}

void drift_target_opts_default(drift_target_opts *opts) {
    if (!opts) return;
    memset(opts, 0, sizeof *opts);
    opts->concurrency = 8;
    opts->connect_timeout_s = 10.0;
    opts->read_timeout_s = 300.0;
    opts->max_retries = 4;
    opts->backoff_base_s = 0.5;
    opts->backoff_max_s = 30.0;
    opts->api_key = NULL;
    opts->default_key_env = "OPENAI_API_KEY"; /* read at open, sent only where safe (http.c) */
    opts->allow_insecure_key = 0;
}

static int has_prefix(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

/* Checks an options struct for values no target can work with. */
static drift_status check_opts(const drift_target_opts *o, drift_error *err) {
    if (o->concurrency < 1 || o->concurrency > 4096)
        return drift_error_set(err, DRIFT_ERR_INVALID, "target option concurrency=%d: must be 1..4096",
                               o->concurrency);
    if (!(o->connect_timeout_s > 0) || !(o->read_timeout_s > 0))
        return drift_error_set(err, DRIFT_ERR_INVALID, "target timeouts must be > 0 (connect %.3g s, read %.3g s)",
                               o->connect_timeout_s, o->read_timeout_s);
    if (o->max_retries < 0 || o->max_retries > 100)
        return drift_error_set(err, DRIFT_ERR_INVALID, "target option max_retries=%d: must be 0..100",
                               o->max_retries);
    if (!(o->backoff_base_s >= 0) || !(o->backoff_max_s >= 0))
        return drift_error_set(err, DRIFT_ERR_INVALID, "target backoff delays must be >= 0");
    return DRIFT_OK;
}

/* Frees the request control's strings, which the target owns (t->opts.request). */
static void req_free(drift_target *t) {
    drift_request_ctl *r = &t->opts.request;
    free((char *)r->system_prompt);
    free((char *)r->prompt_template);
    free((char *)r->extra_body_json);
    for (size_t i = 0; r->headers && i < r->n_headers; i++) free((char *)r->headers[i]);
    free((void *)r->headers);
    memset(r, 0, sizeof *r);
}

/* Copies the caller's request control into t->opts.request (an empty
 * string is no value: NULL). */
static drift_status req_copy(drift_target *t, const drift_request_ctl *in, drift_error *err) {
    drift_request_ctl *r = &t->opts.request;
    memset(r, 0, sizeof *r);
    if (in->n_headers && !in->headers)
        return drift_error_set(err, DRIFT_ERR_INVALID, "request control: n_headers=%zu but no headers", in->n_headers);
    if (in->prompt_template && *in->prompt_template && !strstr(in->prompt_template, "{input}"))
        return drift_error_set(err, DRIFT_ERR_INVALID,
                               "request control: the prompt template has no {input} (where each prompt's text goes): "
                               "every prompt would be sent as the same text");
    const char *texts[2] = {in->system_prompt, in->prompt_template};
    for (int i = 0; i < 2; i++) {
        json_t *j = texts[i] ? json_string(texts[i]) : NULL; /* NULL: not UTF-8 (or a NUL-free check failed) */
        if (texts[i] && !j)
            return drift_error_set(err, DRIFT_ERR_INVALID, "request control: the %s is not valid UTF-8",
                                   i ? "prompt template" : "system prompt");
        json_decref(j);
    }
    int bad = 0;
#define REQ_DUP(f) \
    if (in->f && *in->f) bad |= !(r->f = util_strdup(in->f))
    REQ_DUP(system_prompt);
    REQ_DUP(prompt_template);
    REQ_DUP(extra_body_json);
#undef REQ_DUP
    if (in->n_headers) {
        char **h = calloc(in->n_headers, sizeof *h);
        bad |= !h;
        for (size_t i = 0; h && i < in->n_headers; i++) {
            if (!in->headers[i]) {
                free(h);
                req_free(t);
                return drift_error_set(err, DRIFT_ERR_INVALID, "request control: header %zu is NULL", i);
            }
            bad |= !(h[i] = util_strdup(in->headers[i]));
        }
        r->headers = (const char *const *)h;
        r->n_headers = h ? in->n_headers : 0;
    }
    if (bad) {
        req_free(t);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory copying the request control");
    }
    return DRIFT_OK;
}

/* Opens a target: see target.h. On failure *out is NULL and err names the
 * part of the spec that is wrong. */
drift_status drift_target_open(const char *spec, const drift_target_opts *opts, drift_target **out,
                               drift_error *err) {
    if (out) *out = NULL;
    if (!spec || !*spec || !out) return drift_error_set(err, DRIFT_ERR_INVALID, "target spec is empty");
    drift_target_opts o;
    if (opts)
        o = *opts;
    else
        drift_target_opts_default(&o);
    drift_status st = check_opts(&o, err);
    if (st) return st;

    drift_target *t = calloc(1, sizeof *t);
    if (!t) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory opening target");
    t->opts = o;
    st = req_copy(t, &o.request, err);
    if (st) {
        free(t);
        return st;
    }
    t->spec = util_strdup(spec);
    if (!t->spec) {
        req_free(t);
        free(t);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory opening target");
    }

    if (has_prefix(spec, "http://") || has_prefix(spec, "https://")) {
        st = eng_http_open(t, spec, err);
    } else if (has_prefix(spec, "embedded:")) {
        st = eng_embedded_open(t, spec, err);
    } else {
        st = drift_error_set(err, DRIFT_ERR_INVALID,
                             "target '%s': unknown scheme (expected http://, https:// or embedded:)", spec);
    }
    if (st) {
        /* openers clean up their own state on failure */
        free(t->config_json);
        free(t->spec);
        req_free(t);
        free(t);
        return st;
    }
    if (!t->config_json) t->config_json = util_strdup("{}");
    *out = t;
    return DRIFT_OK;
}

void drift_target_close(drift_target *t) {
    if (!t) return;
    if (t->vt && t->vt->close) t->vt->close(t);
    free(t->config_json);
    free(t->spec);
    req_free(t);
    free(t);
}

drift_api drift_target_api(const drift_target *t) { return t ? t->api : DRIFT_API_COMPLETIONS; }

const char *drift_target_spec(const drift_target *t) { return t ? t->spec : NULL; }

const char *drift_target_config_json(const drift_target *t) {
    /* an http target asks its server what it is, once, on the first call
     * (the start of a run; http_internal.h): the config is the target's own
     * state, filled lazily, so the const is set aside here */
    if (t && t->vt && !strcmp(t->vt->kind, "http")) eng_http_detect((drift_target *)t);
    return (t && t->config_json) ? t->config_json : "{}";
}

/* Capabilities (target.h): only the embedded engine has them today;
 * embedded.c answers NULL / DRIFT_ERR_UNSUPPORTED for any other kind. */
const drift_model *drift_target_model(const drift_target *t) { return eng_embedded_model(t); }

drift_status drift_target_prompt_tokens(const drift_target *t, const char *prompt, int32_t **ids, size_t *n,
                                        drift_error *err) {
    if (ids) *ids = NULL;
    if (n) *n = 0;
    if (!prompt || !ids || !n) return drift_error_set(err, DRIFT_ERR_INVALID, "prompt tokens: bad arguments");
    return eng_embedded_prompt_tokens(t, prompt, ids, n, err);
}

int eng_target_cancelled(const drift_target *t) {
    return t && t->opts.cancel && t->opts.cancel(t->opts.cancel_user) != 0;
}

/* Between a kind and the caller's callback: gives a failure without a cause
 * DRIFT_FAIL_OTHER, then calls back, then (unless the kind polls the hook
 * itself) looks at the cancel hook: so the embedded engine stops at the
 * first outcome after a cancel. */
typedef struct result_relay {
    const drift_target *t;
    drift_result_fn cb;
    void *user;
} result_relay;

static int relay_result(void *user, const drift_gen_request *req, drift_answer *res) {
    result_relay *r = user;
    if (!res->error) res->cause = DRIFT_FAIL_NONE;
    else if (res->cause <= DRIFT_FAIL_NONE || res->cause >= DRIFT_FAIL_COUNT) res->cause = DRIFT_FAIL_OTHER;
    int stop = r->cb(r->user, req, res);
    return stop || (!r->t->polls_cancel && eng_target_cancelled(r->t));
}

drift_status drift_target_generate(drift_target *t, const drift_gen_request *reqs, size_t n,
                                   const drift_gen_params *params, drift_result_fn cb, void *user,
                                   drift_error *err) {
    if (!t || !t->vt || !t->vt->generate)
        return drift_error_set(err, DRIFT_ERR_INVALID, "generate: target is not open");
    if (n && (!reqs || !cb)) return drift_error_set(err, DRIFT_ERR_INVALID, "generate: requests or callback missing");
    drift_gen_params def;
    if (!params) {
        drift_gen_params_default(&def);
        params = &def;
    }
    if (params->n_stop < 0 || (params->n_stop > 0 && !params->stop))
        return drift_error_set(err, DRIFT_ERR_INVALID, "generate: n_stop=%d but no stop strings", params->n_stop);
    if (params->max_tokens < 1)
        return drift_error_set(err, DRIFT_ERR_INVALID, "generate: max_tokens=%d must be >= 1", params->max_tokens);
    if (params->logprobs < 0)
        return drift_error_set(err, DRIFT_ERR_INVALID, "generate: logprobs=%d must be >= 0", params->logprobs);
    for (size_t i = 0; i < n; i++)
        if (!reqs[i].prompt)
            return drift_error_set(err, DRIFT_ERR_INVALID, "generate: request %zu has no prompt", i);
    if (n && eng_target_cancelled(t))
        return drift_error_set(err, DRIFT_ERR_CANCELLED, "generate cancelled before the first request");
    result_relay relay = {t, cb, user};
    return t->vt->generate(t, reqs, n, params, relay_result, &relay, err);
}

drift_status drift_target_send_raw(drift_target *t, const drift_gen_request *reqs, size_t n, drift_result_fn cb,
                                   void *user, drift_error *err) {
    if (!t || !t->vt) return drift_error_set(err, DRIFT_ERR_INVALID, "send: target is not open");
    if (n && (!reqs || !cb)) return drift_error_set(err, DRIFT_ERR_INVALID, "send: requests or callback missing");
    if (!t->vt->send_raw)
        return drift_error_set(err, DRIFT_ERR_UNSUPPORTED, "target kind '%s' cannot send whole request bodies (http only)",
                               t->vt->kind);
    for (size_t i = 0; i < n; i++)
        if (!reqs[i].prompt)
            return drift_error_set(err, DRIFT_ERR_INVALID, "send: request %zu has no body", i);
    if (n && eng_target_cancelled(t))
        return drift_error_set(err, DRIFT_ERR_CANCELLED, "send cancelled before the first request");
    result_relay relay = {t, cb, user};
    return t->vt->send_raw(t, reqs, n, relay_result, &relay, err);
}

drift_status drift_target_embed(drift_target *t, const char *const *texts, size_t n, float **vecs, int *dim,
                                drift_error *err) {
    if (vecs) *vecs = NULL;
    if (dim) *dim = 0;
    if (!t || !t->vt) return drift_error_set(err, DRIFT_ERR_INVALID, "embed: target is not open");
    if (!vecs || !dim || (n && !texts)) return drift_error_set(err, DRIFT_ERR_INVALID, "embed: bad arguments");
    if (!t->vt->embed)
        return drift_error_set(err, DRIFT_ERR_UNSUPPORTED, "embed: target kind '%s' cannot embed", t->vt->kind);
    if (n && eng_target_cancelled(t))
        return drift_error_set(err, DRIFT_ERR_CANCELLED, "embed cancelled before the first request");
    return t->vt->embed(t, texts, n, vecs, dim, err);
}
