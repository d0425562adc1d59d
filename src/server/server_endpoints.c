/* server_endpoints.c - the routes and their handlers: a request's method,
 * path and body in, an srv_reply (status, body, headers) out. No HTTP
 * library here (server_httpd.c sends the reply).
 *
 *   POST /v1/completions, /v1/chat/completions:
 *        parse + validate (server_request.c) -> check the model name ->
 *        tokenize each prompt (chat: the built-in template over every
 *        message, server_chat.c), check the context -> one job of prompts
 *        x n sequences (server_scheduler.c; none when max_tokens is 0),
 *        and with prompt_logprobs or echo a scoring job of the prompts ->
 *        wait -> render (server_reply.c), whole or streamed
 *   POST /v1/embeddings: parse -> check -> one embedding job -> render
 *   GET  /v1/models, /health, /v1/driftbench/info (HEAD too); any other
 *        method on these: 405
 *   /v1/driftbench/info says what this stack is, for clients that record
 *   it (the HTTP target's detection, engine/stack_probe.c): framework (the
 *   embedded engine's framework level of the served profile, as an
 *   embedded run records it), version, model (served name), model_name,
 *   hardware, precision, profile, n_ctx.
 *
 * A request whose work was cancelled gets 503, or, when its client has
 * gone, no reply at all (srv_reply.drop). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "driftbench/profile.h"
#include "driftbench/status.h"
#include "server/server_internal.h"
#include "util/util.h"

void srv_reply_error(srv_reply *r, const srv_error *e) {
    r->status = e->http_status;
    r->body = srv_error_json(e);
    r->ctype = "application/json";
    if (e->http_status == 503) r->retry_after = 1;
}

/* r = status with body (rendered text, malloc'd; NULL: 500). */
static void reply_body(srv_reply *r, int status, char *body, const char *ctype) {
    r->status = status;
    r->body = body;
    r->ctype = ctype;
    if (!r->body) {
        srv_error e;
        srv_error_set(&e, 500, NULL, NULL, "out of memory rendering the reply");
        srv_reply_error(r, &e);
    }
}

/* A cancelled job's reply: none when the client left, else 503. */
static void reply_cancelled(srv_reply *r, const srv_job *j) {
    srv_error e;
    srv_error_set(&e, 503, NULL, "shutting_down", "%s", j->errmsg);
    srv_reply_error(r, &e);
    r->cancelled = 1;
    r->drop = j->departed;
}

static int model_ok(const drift_server *s, const srv_request *rq, srv_error *e) {
    if (!rq->model || !strcmp(rq->model, s->name) || (s->alias && !strcmp(rq->model, s->alias))) return 0;
    return srv_error_set(e, 404, "model", "model_not_found", "the model '%.200s' does not exist (this server serves '%s')",
                         rq->model, s->name);
}

/* The renderer's view of the served model's tokenizer. */
static char *vocab_token_text(const void *user, int32_t id) { return drift_model_token_text(user, id); }

static size_t vocab_prefix_bytes(const void *user, const int32_t *ids, size_t n) {
    size_t len = 0;
    free(drift_model_detokenize(user, ids, n, &len));
    return len;
}

/* Renders the decoded job j of request rq (np prompts of plens tokens) into r;
 * sc: the scoring job (NULL when none). */
static void reply_completion(drift_server *s, const srv_request *rq, const srv_job *j, const srv_job *sc, size_t np,
                             const size_t *plens, srv_reply *r) {
    long long created = (long long)time(NULL);
    pthread_mutex_lock(&s->mu);
    uint64_t seq = ++s->next_id;
    pthread_mutex_unlock(&s->mu);
    char id[48];
    snprintf(id, sizeof id, "%s-%llx%06llx", rq->ep == SRV_EP_CHAT ? "chatcmpl" : "cmpl", (unsigned long long)created,
             (unsigned long long)seq);
    srv_completion c = {.ep = rq->ep,
                        .id = id,
                        .created = created,
                        .model = s->name,
                        .gens = j->gens,
                        .n_choices = j->nseq,
                        .want_logprobs = rq->want_logprobs,
                        .top_logprobs = rq->top_logprobs,
                        .include_usage = rq->include_usage,
                        .vocab = {vocab_token_text, vocab_prefix_bytes, s->m},
                        .prompt_logprobs = rq->prompt_logprobs,
                        .echo = rq->echo};
    for (size_t p = 0; p < np; p++) c.prompt_tokens += (long long)plens[p];
    srv_prompt_lp *plp = NULL;
    const char **texts = NULL;
    if (sc) { /* choice k is prompt k / n */
        plp = calloc(j->nseq ? j->nseq : 1, sizeof *plp);
        texts = calloc(j->nseq ? j->nseq : 1, sizeof *texts);
        if (!plp || !texts) {
            free(plp);
            free(texts);
            reply_body(r, 500, NULL, NULL);
            return;
        }
        for (size_t k = 0; k < j->nseq; k++) {
            size_t p = k / (size_t)rq->n;
            plp[k] = (srv_prompt_lp){sc->toks[p], sc->lens[p], sc->plp[p], sc->prank[p]};
            texts[k] = rq->ep == SRV_EP_COMPLETIONS ? rq->prompts[p] : "";
        }
        c.plp = plp;
        c.prompts = texts;
    }
    if (rq->stream) reply_body(r, 200, srv_render_stream(&c), "text/event-stream");
    else reply_body(r, 200, srv_render_completion(&c), "application/json");
    free(plp);
    free(texts);
}

/* Tokenizes prompt p of rq into ptok/plen and checks it against the context. */
static int prompt_tokens(const drift_server *s, const srv_request *rq, size_t p, int32_t **ptok, size_t *plen,
                         srv_error *e) {
    int chat = rq->ep == SRV_EP_CHAT;
    if (chat) {
        if (srv_chat_tokens(s->m, rq, ptok, plen, e)) return -1;
    } else {
        drift_error err;
        if (drift_model_tokenize(s->m, rq->prompts[p], strlen(rq->prompts[p]), -1, 0, ptok, plen, &err))
            return srv_error_set(e, 400, "prompt", "invalid_value", "cannot tokenize prompt %zu: %s", p, err.msg);
    }
    if (*plen == 0)
        return srv_error_set(e, 400, chat ? "messages" : "prompt", "invalid_value", "prompt %zu has no tokens", p);
    if (*plen >= (size_t)s->info->n_ctx_train)
        return srv_error_set(e, 400, chat ? "messages" : "prompt", "context_length_exceeded",
                             "prompt %zu has %zu tokens; this model's context is %d tokens", p, *plen,
                             s->info->n_ctx_train);
    return 0;
}

static void do_generate(drift_server *s, srv_job **waiting, srv_endpoint ep, const char *body, size_t len,
                        srv_reply *r) {
    srv_request rq;
    srv_error e;
    srv_job j, sc;
    memset(&j, 0, sizeof j);
    memset(&sc, 0, sizeof sc);
    if (srv_request_parse(ep, body, len, &s->lim, &rq, &e)) {
        srv_reply_error(r, &e);
        return;
    }
    int fail = model_ok(s, &rq, &e);
    size_t np = ep == SRV_EP_CHAT ? 1 : rq.n_prompts;
    size_t nseq = np * (size_t)rq.n;
    if (!fail && nseq > (size_t)s->o.max_queue)
        fail = srv_error_set(&e, 400, "n", "invalid_value",
                             "%zu prompts x n=%d = %zu sequences is more than the server takes (%d)", np, rq.n, nseq,
                             s->o.max_queue);
    int32_t **ptok = fail ? NULL : calloc(np, sizeof *ptok);
    size_t *plen = fail ? NULL : calloc(np, sizeof *plen);
    j.toks = fail ? NULL : calloc(nseq, sizeof *j.toks);
    j.lens = fail ? NULL : calloc(nseq, sizeof *j.lens);
    j.offs = fail ? NULL : calloc(nseq, sizeof *j.offs);
    j.gens = fail ? NULL : calloc(nseq, sizeof *j.gens);
    if (!fail && (!ptok || !plen || !j.toks || !j.lens || !j.offs || !j.gens))
        fail = srv_error_set(&e, 500, NULL, NULL, "out of memory");
    for (size_t p = 0; p < np && !fail; p++) fail = prompt_tokens(s, &rq, p, &ptok[p], &plen[p], &e);
    int scoring = rq.prompt_logprobs >= 0 || rq.echo;
    if (!fail && scoring) { /* the prompts' logprobs, before any generation */
        sc.kind = SRV_JOB_SCORE;
        sc.toks = ptok;
        sc.lens = plen;
        sc.nseq = np;
        sc.score_top = rq.prompt_logprobs > rq.top_logprobs ? rq.prompt_logprobs : rq.top_logprobs;
        fail = srv_sched_submit_wait(s, &sc, waiting, &e);
        if (!fail && sc.st == DRIFT_ERR_CANCELLED) {
            reply_cancelled(r, &sc);
            fail = 1;
        } else if (!fail && sc.st) {
            fail = srv_error_set(&e, 500, NULL, NULL, "scoring the prompt failed: %s", sc.errmsg);
        }
    }
    if (!fail && rq.params.max_tokens == 0) { /* scored only: empty choices */
        for (size_t k = 0; k < nseq; k++) {
            j.gens[k].text = util_strdup("");
            j.gens[k].finish_reason = "length";
            j.gens[k].prompt_tokens = (int)plen[k / (size_t)rq.n];
            if (!j.gens[k].text) fail = srv_error_set(&e, 500, NULL, NULL, "out of memory");
        }
        j.nseq = nseq;
    } else if (!fail) {
        j.kind = SRV_JOB_GEN;
        j.params = rq.params;
        j.nseq = nseq;
        for (size_t p = 0; p < np; p++)
            for (int q = 0; q < rq.n; q++) {
                size_t k = p * (size_t)rq.n + (size_t)q;
                j.toks[k] = ptok[p];
                j.lens[k] = plen[p];
                j.offs[k] = (int64_t)((uint64_t)rq.params.seed + (uint64_t)q);
            }
        fail = srv_sched_submit_wait(s, &j, waiting, &e);
        if (!fail && j.st == DRIFT_ERR_CANCELLED) {
            reply_cancelled(r, &j);
            fail = 1;
        } else if (!fail && j.st) {
            fail = srv_error_set(&e, 500, NULL, NULL, "generation failed: %s", j.errmsg);
        }
        for (size_t k = 0; k < nseq && !fail; k++)
            if (j.gens[k].error) fail = srv_error_set(&e, 400, NULL, "invalid_value", "%s", j.gens[k].error);
    }
    if (fail) {
        if (!r->cancelled) srv_reply_error(r, &e);
    } else {
        reply_completion(s, &rq, &j, scoring ? &sc : NULL, np, plen, r);
    }
    for (size_t p = 0; p < np && sc.plp; p++) free(sc.plp[p]);
    for (size_t p = 0; p < np && sc.prank; p++) free(sc.prank[p]);
    free(sc.plp);
    free(sc.prank);
    for (size_t k = 0; j.gens && k < nseq; k++) drift_generation_clear(&j.gens[k]);
    for (size_t p = 0; ptok && p < np; p++) free(ptok[p]);
    free(ptok);
    free(plen);
    free(j.toks);
    free(j.lens);
    free(j.offs);
    free(j.gens);
    srv_request_free(&rq);
}

static void do_embed(drift_server *s, srv_job **waiting, const char *body, size_t len, srv_reply *r) {
    srv_request rq;
    srv_error e;
    if (srv_request_parse(SRV_EP_EMBEDDINGS, body, len, &s->lim, &rq, &e)) {
        srv_reply_error(r, &e);
        return;
    }
    srv_job j;
    memset(&j, 0, sizeof j);
    j.kind = SRV_JOB_EMBED;
    j.texts = rq.prompts;
    j.ntexts = rq.n_prompts;
    j.nseq = rq.n_prompts;
    int fail = model_ok(s, &rq, &e);
    long long ptok = 0;
    for (size_t i = 0; i < rq.n_prompts && !fail; i++) {
        int32_t *ids;
        size_t n;
        drift_error err;
        if (drift_model_tokenize(s->m, rq.prompts[i], strlen(rq.prompts[i]), -1, 0, &ids, &n, &err)) {
            fail = srv_error_set(&e, 400, "input", "invalid_value", "cannot tokenize input %zu: %s", i, err.msg);
            break;
        }
        free(ids);
        if (n > (size_t)s->info->n_ctx_train)
            fail = srv_error_set(&e, 400, "input", "context_length_exceeded",
                                 "input %zu has %zu tokens; this model's context is %d tokens", i, n, s->info->n_ctx_train);
        ptok += (long long)n;
    }
    if (!fail) fail = srv_sched_submit_wait(s, &j, waiting, &e);
    if (!fail && j.st == DRIFT_ERR_CANCELLED) {
        reply_cancelled(r, &j);
        fail = 1;
    } else if (!fail && j.st) {
        fail = srv_error_set(&e, 500, NULL, NULL, "embedding failed: %s", j.errmsg);
    }
    if (fail) {
        if (!r->cancelled) srv_reply_error(r, &e);
    } else {
        reply_body(r, 200, srv_render_embeddings(s->name, j.vecs, rq.n_prompts, s->info->dim, rq.emb_base64, ptok),
                   "application/json");
    }
    free(j.vecs);
    srv_request_free(&rq);
}

/* GET /v1/driftbench/info (see the top); NULL when out of memory. */
static char *render_info(const drift_server *s) {
    const drift_numeric_profile *p = drift_model_profile(s->m);
    char fw[256] = "driftbench", prec[64] = "unknown", hw[128] = "unknown";
    if (p) {
        drift_profile_framework(p, fw, sizeof fw);
        drift_profile_precision(p, prec, sizeof prec);
        drift_profile_hardware(p, hw, sizeof hw);
    }
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:i}", "framework", fw, "version", drift_version(),
                          "model", s->name, "model_name", s->alias, "hardware", hw, "precision", prec, "profile",
                          p ? p->name : "unknown", "n_ctx", (json_int_t)s->info->n_ctx_train);
    char *out = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return out;
}

void srv_route(drift_server *s, const char *url, const char *method, const char *body, size_t len,
               srv_job **waiting, srv_reply *r) {
    static const struct {
        const char *path;
        const char *method;
    } routes[] = {{"/v1/completions", "POST"}, {"/v1/chat/completions", "POST"}, {"/v1/embeddings", "POST"},
                  {"/v1/models", "GET"},       {"/health", "GET"},
                  {"/v1/driftbench/info", "GET"}};
    srv_error e;
    for (size_t i = 0; i < sizeof routes / sizeof *routes; i++) {
        if (strcmp(url, routes[i].path)) continue;
        int head = !strcmp(method, "HEAD") && !strcmp(routes[i].method, "GET");
        if (strcmp(method, routes[i].method) && !head) {
            srv_error_set(&e, 405, NULL, "method_not_allowed", "%s is not allowed on %s (use %s)", method, url,
                          routes[i].method);
            srv_reply_error(r, &e);
            r->allow = routes[i].method;
            return;
        }
        switch (i) {
        case 0: do_generate(s, waiting, SRV_EP_COMPLETIONS, body, len, r); return;
        case 1: do_generate(s, waiting, SRV_EP_CHAT, body, len, r); return;
        case 2: do_embed(s, waiting, body, len, r); return;
        case 3: reply_body(r, 200, srv_render_models(s->name), "application/json"); return;
        case 5: reply_body(r, 200, render_info(s), "application/json"); return;
        default: {
            pthread_mutex_lock(&s->mu);
            int draining = s->draining;
            pthread_mutex_unlock(&s->mu);
            reply_body(r, draining ? 503 : 200, srv_render_health(draining), "application/json");
            return;
        }
        }
    }
    srv_error_set(&e, 404, NULL, "not_found", "no such endpoint: %s %.200s", method, url);
    srv_reply_error(r, &e);
}
