/* embedded.c - the in-process engine as a target:
 *
 *   embedded:PATH.gguf?profile=NAME&KEY=VALUE&...
 *
 * This file splits the spec into the path and the query. Its own keys are
 * api=completions|chat (default completions) and batch=N (sequences decoded
 * together; default = the target's concurrency option); every other key goes
 * to numerics' drift_profile_set in order, after profile=NAME (applied first
 * wherever it appears; default cpu-f32), so a spec reads as "this named stack,
 * with these changes".
 *
 * Completions send the prompt as raw text (model's default BOS, no special
 * token parsing); chat wraps it as one user message in the model's built-in
 * template (drift_model_chat_tokens: ChatML, Llama-3, <|user|>..<|end|>, [INST]).
 * Request control (target.h): a system prompt is the template's system turn
 * (drift_model_chat_system_tokens; a messages prompt's own system turn
 * replaces it) or, for completions, the text and a blank line before the
 * prompt; the prompt template is the pipeline's; an extra body or headers
 * are refused at open (there is no request to put them in).
 * Requests are decoded in groups of `batch`; the engine is batch-invariant, so
 * the outputs do not depend on the grouping. replicate r uses seed + r.
 *
 * Loaded models are cached per (path, canonical profile) in the process, so
 * opening the same stack twice (baseline and target of a run, the server's
 * requests) maps and converts the weights once. Entries live while a target
 * holds them; up to CACHE_KEEP unused ones are kept for reuse.
 *
 * The run's config records hardware "cpu-<isa>", or for backend=cuda the
 * GPU's short name ("h200") with its full name, compute capability, driver
 * and runtime versions beside it (device, compute_capability, cuda_driver,
 * cuda_runtime). */
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/model.h"
#include "driftbench/suite.h"
#include "engine/target_impl.h"
#include "model/cpu_features.h"
#include "util/util.h"
#ifdef DRIFT_HAVE_CUDA
#include "model/cuda/cuda_backend.h"
#endif

#define CACHE_KEEP 2

typedef struct cache_ent {
    char *key;
    drift_model *m;
    int refs;
    uint64_t last_use;
    struct cache_ent *next;
} cache_ent;

static pthread_mutex_t g_cache_mu = PTHREAD_MUTEX_INITIALIZER;
static cache_ent *g_cache;
static uint64_t g_clock;

/* Drops unused entries beyond CACHE_KEEP, oldest first. Caller holds the lock. */
static void cache_trim(void) {
    for (;;) {
        int unused = 0;
        cache_ent *oldest = NULL, **oldest_link = NULL;
        for (cache_ent **l = &g_cache; *l; l = &(*l)->next)
            if ((*l)->refs == 0) {
                unused++;
                if (!oldest || (*l)->last_use < oldest->last_use) {
                    oldest = *l;
                    oldest_link = l;
                }
            }
        if (unused <= CACHE_KEEP || !oldest) return;
        *oldest_link = oldest->next;
        drift_model_free(oldest->m);
        free(oldest->key);
        free(oldest);
    }
}

static drift_status cache_get(const char *path, const drift_numeric_profile *p, drift_model **out, drift_error *err) {
    char *spec = drift_profile_to_spec(p);
    char *key = spec ? util_asprintf("%s?%s", path, spec) : NULL;
    free(spec);
    if (!key) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    pthread_mutex_lock(&g_cache_mu);
    for (cache_ent *e = g_cache; e; e = e->next)
        if (!strcmp(e->key, key)) {
            e->refs++;
            e->last_use = ++g_clock;
            *out = e->m;
            pthread_mutex_unlock(&g_cache_mu);
            free(key);
            return DRIFT_OK;
        }
    /* load under the lock: two targets asking for the same model load it once */
    drift_model *m;
    drift_status st = drift_model_load(path, p, &m, err);
    cache_ent *e = st ? NULL : calloc(1, sizeof *e);
    if (!st && !e) {
        drift_model_free(m);
        st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    if (!st) {
        e->key = key;
        key = NULL;
        e->m = m;
        e->refs = 1;
        e->last_use = ++g_clock;
        e->next = g_cache;
        g_cache = e;
        *out = m;
    }
    pthread_mutex_unlock(&g_cache_mu);
    free(key);
    return st;
}

static void cache_release(drift_model *m) {
    pthread_mutex_lock(&g_cache_mu);
    for (cache_ent *e = g_cache; e; e = e->next)
        if (e->m == m && e->refs > 0) {
            e->refs--;
            break;
        }
    cache_trim();
    pthread_mutex_unlock(&g_cache_mu);
}

typedef struct emb_state {
    drift_model *m;
    int batch;
} emb_state;

/* A token's text as valid UTF-8 (byte tokens become U+FFFD), so that every
 * token has its entry in the logprobs JSON. */
static char *token_text_utf8(const drift_model *m, int32_t id) {
    char *raw = drift_model_token_text(m, id);
    char *clean = raw ? util_utf8_clean(raw, strlen(raw)) : NULL;
    free(raw);
    return clean;
}

static char *logprobs_json(const drift_model *m, const drift_generation *g) {
    json_t *arr = json_array();
    for (int t = 0; t < g->n_tokens && arr; t++) {
        const drift_token_logprob *lp = &g->lp[t];
        char *txt = token_text_utf8(m, lp->id);
        json_t *top = json_array();
        for (int k = 0; k < lp->n_top; k++) {
            char *tt = token_text_utf8(m, lp->top_id[k]);
            json_array_append_new(top, json_pack("{s:s?, s:i, s:f}", "token", tt, "id", (json_int_t)lp->top_id[k], "logprob",
                                                 lp->top_logprob[k]));
            free(tt);
        }
        json_array_append_new(arr, json_pack("{s:s?, s:i, s:f, s:o}", "token", txt, "id", (json_int_t)lp->id, "logprob",
                                             lp->logprob, "top", top));
        free(txt);
    }
    char *s = arr ? json_dumps(arr, JSON_COMPACT) : NULL;
    json_decref(arr);
    return s;
}

const drift_model *eng_embedded_model(const drift_target *t) {
    return t && t->vt && !strcmp(t->vt->kind, "embedded") ? ((const emb_state *)t->impl)->m : NULL;
}

drift_status eng_embedded_prompt_tokens(const drift_target *t, const char *prompt, int32_t **ids, size_t *n,
                                        drift_error *err) {
    const drift_model *m = eng_embedded_model(t);
    if (!m) return drift_error_set(err, DRIFT_ERR_UNSUPPORTED, "not an embedded target");
    const char *sys = t->opts.request.system_prompt; /* NULL: none (target.c drops "") */
    const char *turns = t->api == DRIFT_API_CHAT ? drift_prompt_messages(prompt) : NULL;
    if (turns) { /* a prompt in messages form (suite.h): the built-in template takes one user turn, after one
                  * system turn of its own (which replaces the target's system prompt) */
        json_t *a = json_loads(turns, 0, NULL);
        size_t na = json_array_size(a);
        json_t *m0 = json_array_get(a, 0), *mu = json_array_get(a, na - 1);
        const char *r0 = json_string_value(json_object_get(m0, "role"));
        int own_sys = na == 2 && r0 && (!strcmp(r0, "system") || !strcmp(r0, "developer"));
        const char *role = json_string_value(json_object_get(mu, "role"));
        const char *user = (na == 1 || own_sys) && role && !strcmp(role, "user")
                               ? json_string_value(json_object_get(mu, "content"))
                               : NULL;
        if (own_sys) sys = json_string_value(json_object_get(m0, "content"));
        drift_status st = user && (!own_sys || sys)
                              ? drift_model_chat_system_tokens(m, sys, user, ids, n, err)
                              : drift_error_set(err, DRIFT_ERR_UNSUPPORTED,
                                                "the embedded chat template takes one user message (after at most one "
                                                "system message); this prompt has %zu turns (use api=completions, which "
                                                "renders them as text)",
                                                na);
        json_decref(a);
        return st;
    }
    if (t->api == DRIFT_API_CHAT) return drift_model_chat_system_tokens(m, sys, prompt, ids, n, err);
    if (!sys) return drift_model_tokenize(m, prompt, strlen(prompt), -1, 0, ids, n, err);
    /* completions: the system text and a blank line before the prompt */
    char *text = util_asprintf("%s\n\n%s", sys, prompt);
    if (!text) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    drift_status st = drift_model_tokenize(m, text, strlen(text), -1, 0, ids, n, err);
    free(text);
    return st;
}

static drift_status emb_generate(drift_target *t, const drift_gen_request *reqs, size_t n, const drift_gen_params *params,
                                 drift_result_fn cb, void *user, drift_error *err) {
    emb_state *es = t->impl;
    drift_model *m = es->m;
    /* prompts per engine call: four batches, so the engine's continuous
     * batching keeps its steps full past a batch's longest answer */
    size_t batch = (size_t)es->batch * 4 < 4096 ? (size_t)es->batch * 4 : 4096;
    int32_t **ptoks = calloc(batch, sizeof *ptoks);
    size_t *plens = calloc(batch, sizeof *plens);
    int64_t *offs = calloc(batch, sizeof *offs);
    drift_generation *gens = calloc(batch, sizeof *gens);
    char **perr = calloc(batch, sizeof *perr);
    drift_status st = DRIFT_OK;
    if (!ptoks || !plens || !offs || !gens || !perr) {
        st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t g0 = 0; g0 < n && !st; g0 += batch) {
        size_t nb = n - g0 < batch ? n - g0 : batch;
        double t0 = util_now_ms();
        /* tokenize; a request that cannot be tokenized becomes an error result with an empty prompt slot */
        size_t nrun = 0;
        size_t map[4096];
        for (size_t i = 0; i < nb; i++) {
            const drift_gen_request *r = &reqs[g0 + i];
            drift_error e;
            drift_status ts = eng_embedded_prompt_tokens(t, r->prompt, &ptoks[nrun], &plens[nrun], &e);
            if (ts) {
                perr[i] = util_strdup(e.msg);
                continue;
            }
            offs[nrun] = r->replicate;
            map[nrun++] = i;
        }
        if (nrun) st = drift_model_generate(m, (const int32_t *const *)ptoks, plens, nrun, params, offs, es->batch, gens, err);
        double dt = util_now_ms() - t0;
        size_t j = 0;
        for (size_t i = 0; i < nb && !st; i++) {
            drift_answer res;
            memset(&res, 0, sizeof res);
            res.prompt_tokens = res.completion_tokens = -1;
            res.latency_ms = dt;
            res.attempts = 1;
            if (j < nrun && map[j] == i) {
                drift_generation *g = &gens[j++];
                if (g->error) {
                    res.error = g->error;
                    res.cause = DRIFT_FAIL_ENGINE;
                    g->error = NULL;
                } else {
                    res.text = g->text;
                    g->text = NULL;
                    res.prompt_tokens = g->prompt_tokens;
                    res.completion_tokens = g->n_tokens;
                    res.finish_reason = util_strdup(g->finish_reason ? g->finish_reason : "length");
                    if (params->logprobs > 0) res.logprobs_json = logprobs_json(m, g);
                }
            } else {
                res.error = perr[i] ? perr[i] : util_strdup("tokenization failed");
                res.cause = DRIFT_FAIL_ENGINE;
                perr[i] = NULL;
            }
            int stop = cb(user, &reqs[g0 + i], &res);
            drift_answer_clear(&res);
            if (stop) st = drift_error_set(err, DRIFT_ERR_CANCELLED, "generation stopped by the caller");
        }
        for (size_t i = 0; i < nrun; i++) {
            drift_generation_clear(&gens[i]);
            free(ptoks[i]);
            ptoks[i] = NULL;
        }
        for (size_t i = 0; i < nb; i++) {
            free(perr[i]);
            perr[i] = NULL;
        }
    }
done:
    free(ptoks);
    free(plens);
    free(offs);
    free(gens);
    free(perr);
    return st;
}

static drift_status emb_embed(drift_target *t, const char *const *texts, size_t n, float **vecs, int *dim, drift_error *err) {
    emb_state *es = t->impl;
    int D = drift_model_get_info(es->m)->dim;
    float *v = malloc((n ? n : 1) * (size_t)D * sizeof *v);
    if (!v) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        drift_status st = drift_model_embed(es->m, texts[i] ? texts[i] : "", v + i * (size_t)D, err);
        if (st) {
            free(v);
            return drift_error_prefix(err, "embed text %zu: ", i);
        }
    }
    *vecs = v;
    *dim = D;
    return DRIFT_OK;
}

static void emb_close(drift_target *t) {
    emb_state *es = t->impl;
    if (!es) return;
    cache_release(es->m);
    free(es);
    t->impl = NULL;
}


static const eng_target_vtable EMB_VT = {"embedded", emb_generate, emb_embed, emb_close, NULL};

/* Decodes %XX and '+' in a query value in place. */
static void url_decode(char *s) {
    char *o = s;
    for (; *s; s++) {
        if (*s == '%' && s[1] && s[2]) {
            char hex[3] = {s[1], s[2], 0};
            char *end;
            long v = strtol(hex, &end, 16);
            if (!*end) {
                *o++ = (char)v;
                s += 2;
                continue;
            }
        }
        *o++ = *s == '+' ? ' ' : *s;
    }
    *o = 0;
}

static char *config_json(const drift_model *m, const drift_numeric_profile *p) {
    char prec[64], fw[256];
    drift_profile_precision(p, prec, sizeof prec);
    drift_profile_framework(p, fw, sizeof fw);
    char hw[128]; /* "cpu-ISA", a hardware preset's name, or "cuda" (the device's name replaces it below) */
    drift_profile_hardware(p, hw, sizeof hw);
    char *spec = drift_profile_to_spec(p);
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s?}", "model", drift_model_get_info(m)->name, "hardware", hw, "precision", prec,
                          "framework", fw, "profile", p->name, "profile_spec", spec);
    free(spec);
#ifdef DRIFT_HAVE_CUDA
    dcu_device_info di;
    drift_error e;
    if (o && p->backend == DRIFT_BACKEND_CUDA && dcu_device_get_info(&di, &e) == DRIFT_OK) {
        /* versions as CUDA writes them: 13000 = 13.0, 12040 = 12.4 */
        char cc[16], drv[16], rt[16];
        snprintf(cc, sizeof cc, "%d.%d", di.cc_major, di.cc_minor);
        snprintf(drv, sizeof drv, "%d.%d", di.driver_version / 1000, di.driver_version % 1000 / 10);
        snprintf(rt, sizeof rt, "%d.%d", di.runtime_version / 1000, di.runtime_version % 1000 / 10);
        json_object_set_new(o, "hardware", json_string(di.short_name));
        json_object_set_new(o, "device", json_string(di.name));
        json_object_set_new(o, "compute_capability", json_string(cc));
        json_object_set_new(o, "cuda_driver", json_string(drv));
        json_object_set_new(o, "cuda_runtime", json_string(rt));
    }
#endif
    char *s = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(o);
    return s;
}

drift_status eng_embedded_open(drift_target *t, const char *spec, drift_error *err) {
    const drift_request_ctl *rq = &t->opts.request;
    if (rq->extra_body_json || rq->n_headers)
        return drift_error_set(err, DRIFT_ERR_INVALID,
                               "target '%s': %s only for http targets: the embedded engine has no request body nor "
                               "headers (it takes a system prompt and a prompt template)",
                               spec, rq->extra_body_json ? "an extra request body is" : "request headers are");
    const char *body = spec + strlen("embedded:");
    const char *q = strchr(body, '?');
    char *path = q ? util_strndup(body, (size_t)(q - body)) : util_strdup(body);
    char *query = util_strdup(q ? q + 1 : "");
    drift_status st = DRIFT_OK;
    drift_numeric_profile p;
    drift_api api = DRIFT_API_COMPLETIONS;
    long batch = t->opts.concurrency > 0 ? t->opts.concurrency : 8;
    if (!path || !query) {
        st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        goto fail;
    }
    url_decode(path);
    if (!*path) {
        st = drift_error_set(err, DRIFT_ERR_INVALID, "target '%s': no model path after 'embedded:'", spec);
        goto fail;
    }
    /* profile= first, wherever it is */
    const char *pname = "cpu-f32";
    char *save = NULL;
    char *qcopy = util_strdup(query);
    if (!qcopy) {
        st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (char *kv = strtok_r(qcopy, "&", &save); kv; kv = strtok_r(NULL, "&", &save))
        if (!strncmp(kv, "profile=", 8)) pname = kv + 8;
    st = drift_profile_get(pname, &p, err);
    free(qcopy);
    if (st) {
        drift_error_prefix(err, "target '%s': ", spec);
        goto fail;
    }
    save = NULL;
    for (char *kv = strtok_r(query, "&", &save); kv && !st; kv = strtok_r(NULL, "&", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq) {
            st = drift_error_set(err, DRIFT_ERR_INVALID, "target '%s': query item '%s' is not key=value", spec, kv);
            break;
        }
        *eq = 0;
        char *key = kv, *val = eq + 1;
        url_decode(val);
        if (!strcmp(key, "profile")) continue;
        if (!strcmp(key, "api")) {
            if (!strcmp(val, "chat")) api = DRIFT_API_CHAT;
            else if (!strcmp(val, "completions")) api = DRIFT_API_COMPLETIONS;
            else st = drift_error_set(err, DRIFT_ERR_INVALID, "target '%s': api=%s (chat or completions)", spec, val);
            continue;
        }
        if (!strcmp(key, "batch")) {
            char *end;
            batch = strtol(val, &end, 10);
            if (*end || batch < 1 || batch > 4096) st = drift_error_set(err, DRIFT_ERR_INVALID, "target '%s': batch=%s (1..4096)", spec, val);
            continue;
        }
        st = drift_profile_set(&p, key, val, err);
        if (st == DRIFT_ERR_NOT_FOUND)
            st = drift_error_set(err, DRIFT_ERR_INVALID, "target '%s': unknown key '%s' (api, batch, or a profile key: see `driftbench profiles`)",
                                 spec, key);
        else if (st)
            drift_error_prefix(err, "target '%s': ", spec);
    }
    if (!st) {
        st = drift_profile_validate(&p, err);
        if (st) drift_error_prefix(err, "target '%s': ", spec);
    }
    if (st) goto fail;
    drift_model *m = NULL;
    if ((st = cache_get(path, &p, &m, err))) goto fail;
    emb_state *es = calloc(1, sizeof *es);
    char *cfg = config_json(m, &p);
    if (!es || !cfg) {
        free(es);
        free(cfg);
        cache_release(m);
        st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        goto fail;
    }
    es->m = m;
    es->batch = (int)(batch > 4096 ? 4096 : batch);
    t->impl = es;
    t->vt = &EMB_VT;
    t->api = api;
    t->config_json = cfg;
    free(path);
    free(query);
    return DRIFT_OK;
fail:
    free(path);
    free(query);
    return st;
}
