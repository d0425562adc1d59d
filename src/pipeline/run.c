/* run.c - the run stage: a suite against one target, stored under a label.
 *
 *   target open -> config (detected dims + opts.config) -> suites: prompts
 *   stored and rendered -> run begun or resumed (label lock) -> pending
 *   (prompt, replicate) pairs -> target generate -> outcomes buffered and
 *   written in batches -> run finished
 *
 * A batch is one transaction, written at least every FLUSH_EVERY outcomes or
 * FLUSH_MS milliseconds, so a killed process loses at most what was in
 * flight, and calling again with the same label asks only what is missing.
 *
 * Order: the pending pairs come from the store in prompt order; with
 * o->order they are permuted before the requests are built - RANDOM by
 * drift_seq_order's hash of (seed, prompt id, replicate), so a prompt has
 * the same rank in every run and subset; RISK by descending flip risk of
 * the answers of run o->risk_from (risk.c), read once, unknown risks last
 * in the seeded order. A RISK run whose source has no logprobs is an error
 * naming it, not a silent suite order.
 *
 * Sequential asking (o->select, measure --sequential): after ordering, each
 * pending pair is offered to the hook with its workload and its rank in the
 * seeded order among all the workload's pairs of the suites (stored or
 * not), so a caller can ask "the first h pairs of each workload" in chunks
 * and two runs of one measure ask exactly the same pairs, resumed or not.
 * Pairs it declines stay missing and the run is not marked finished. The
 * decoding record then carries "sequential" (alpha, seed, pairs and budget
 * per workload), which a replay of the stored runs needs: the suite's size.
 *
 * Progress: BEGIN, one STEP per outcome received (its request in
 * drift_progress.request: prompt id, replicate, outcome, attempts, latency,
 * tokens, copied before a flush frees the answer), END.
 *
 * Failures: every failed request is stored as an error and counted in the
 * summary by kind (its cause, and the status for an HTTP one: target.h and
 * types.h say who decides), with the first message of each kind, in a
 * fixed table (drift_run_summary.failures), so a caller can say why without
 * reading the store. When every request failed, the stage fails at step
 * CHECK naming the first error.
 *
 * The run's record (drift_store_run_begin) keeps o->target without its
 * secrets: the store records the spec redacted and without its credential
 * parameters, and resumes by comparing that form, so a run asked again
 * with another password or key variable resumes (store_runs.c). The
 * address opened, o->target_url, is never stored; messages that name it
 * are redacted (drift_error_set).
 *
 * Session: drift_run_begin does the steps up to the suites once (target
 * open, config, suites stored and rendered, the run's records built) and
 * holds them; each drift_run_ask then begins or resumes the run (label
 * lock), finds what is missing, orders it, offers it to o->select and asks
 * it, as one call of the one-call stage would; drift_run_end closes the
 * target. drift_run_execute is begin + ask + end. A caller that asks the
 * same run in chunks (measure --sequential) keeps the target and the
 * suites open between chunks: each ask is what a fresh call would ask.
 *
 * Request control (o->target_opts.request, target.h): the target adds the
 * system prompt, extra body and headers to its requests; the prompt
 * template is rendered here (prompts_render: "custom/<hash>" in the
 * templates record). The decoding record holds "request" (system prompt,
 * template, extra body, the headers' names: never their values) and
 * "stop" when given, so a resume with another system prompt, extra body or
 * stop strings is refused (store_runs.c compares it, headers aside) and
 * `runs show` prints what was sent.
 *
 * Cancellation: the caller's cancel hook goes to the target, which aborts
 * requests in flight and ends retry back-offs at once; nothing is stored for
 * them (they stay missing), what was received is flushed, the label lock is
 * released, and the stage returns DRIFT_ERR_CANCELLED. */
#include "driftbench/pipeline.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/compare.h"
#include "util/json_util.h"
#include "util/util.h"

#define FLUSH_EVERY 256   /* outcomes per store transaction, at most */
#define FLUSH_MS 1000.0   /* a batch waits no longer than this */

void drift_run_opts_default(drift_run_opts *o) {
    memset(o, 0, sizeof *o);
    drift_target_opts_default(&o->target_opts);
    drift_gen_params_default(&o->params);
    o->replicates = 1;
}

/* ---- configuration and decoding records ---- */

/* The run's configuration: the target's detected dimensions, then config
 * (which wins); the paper's dimensions missing from both are "unknown". */
static drift_status build_config(const drift_target *t, const char *config, json_t **out, drift_error *err) {
    json_error_t jerr;
    const char *detected = drift_target_config_json(t);
    json_t *obj = detected ? json_loads(detected, 0, &jerr) : NULL;
    if (!json_is_object(obj)) {
        json_decref(obj);
        obj = json_object();
    }
    drift_status rc = util_config_apply(obj, config, err);
    if (rc) {
        json_decref(obj);
        return rc;
    }
    for (int d = 0; d < DRIFT_DIM_CONFIG_COUNT; d++)
        if (!json_object_get(obj, drift_dim_names[d]))
            json_object_set_new(obj, drift_dim_names[d], json_string("unknown"));
    *out = obj;
    return DRIFT_OK;
}

/* The request control's record (target.h): what was added to every
 * request, header values left out (their names only); NULL when nothing
 * was. The store compares it as part of the decoding, headers aside
 * (store_runs.c). */
static json_t *request_record(const drift_request_ctl *r) {
    if (!(r->system_prompt && *r->system_prompt) && !(r->prompt_template && *r->prompt_template) &&
        !(r->extra_body_json && *r->extra_body_json) && !r->n_headers)
        return NULL;
    json_t *q = json_object();
    if (r->system_prompt && *r->system_prompt) json_object_set_new(q, "system_prompt", json_string(r->system_prompt));
    if (r->prompt_template && *r->prompt_template) {
        char id[DRIFT_TEMPLATE_ID_MAX];
        drift_prompt probe = {0};
        free(drift_prompt_render_custom(&probe, DRIFT_API_COMPLETIONS, r->prompt_template, id));
        json_object_set_new(q, "prompt_template", json_string(r->prompt_template));
        json_object_set_new(q, "template_id", json_string(id));
    }
    if (r->extra_body_json && *r->extra_body_json) {
        json_t *x = json_loads(r->extra_body_json, 0, NULL); /* checked when the target opened */
        json_object_set_new(q, "extra_body", x ? x : json_string(r->extra_body_json));
    }
    if (r->n_headers) {
        json_t *names = json_array();
        for (size_t i = 0; i < r->n_headers; i++) {
            const char *h = r->headers[i], *c = h ? strchr(h, ':') : NULL;
            size_t n = c ? (size_t)(c - h) : 0;
            while (n && (h[n - 1] == ' ' || h[n - 1] == '\t')) n--;
            json_array_append_new(names, json_stringn(h ? h : "", n));
        }
        json_object_set_new(q, "headers", names);
    }
    return q;
}

static json_t *build_decoding(const drift_run_opts *o, drift_api api) {
    json_t *d = json_object();
    json_object_set_new(d, "temperature", json_real(o->params.temperature));
    json_object_set_new(d, "top_p", json_real(o->params.top_p));
    json_object_set_new(d, "top_k", json_integer(o->params.top_k));
    json_object_set_new(d, "seed", json_integer(o->params.seed));
    json_object_set_new(d, "max_tokens", json_integer(o->params.max_tokens));
    json_object_set_new(d, "logprobs", json_integer(o->params.logprobs));
    json_object_set_new(d, "replicates", json_integer(o->replicates));
    json_object_set_new(d, "api", json_string(api == DRIFT_API_CHAT ? "chat" : "completions"));
    if (o->params.n_stop > 0 && o->params.stop) { /* only when given: runs without keep their record */
        json_t *stop = json_array();
        for (int i = 0; i < o->params.n_stop; i++)
            if (o->params.stop[i]) json_array_append_new(stop, json_string(o->params.stop[i]));
        json_object_set_new(d, "stop", stop);
    }
    json_t *req = request_record(&o->target_opts.request);
    if (req) json_object_set_new(d, "request", req);
    return d;
}

static char *dump_sorted(json_t *j) { return json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT | JSON_REAL_PRECISION(17)); }

/* ---- the prompts of the suites ---- */

typedef struct run_prompts {
    drift_suite **suites;     /* (n_suites,) */
    size_t n_suites;
    size_t n;                 /* prompts of all suites */
    int64_t *rowids;          /* (n,) store row id of each prompt, suites in order */
    char **rendered;          /* (n,) what is sent for it */
    char *templates_s;        /* {"workload":"template id",...} */
    char *suites_s;           /* ["suite spec",...] */
} run_prompts;

static void prompts_clear(run_prompts *p) {
    for (size_t i = 0; p->rendered && i < p->n; i++) free(p->rendered[i]);
    for (size_t i = 0; p->suites && i < p->n_suites; i++) drift_suite_free(p->suites[i]);
    free(p->suites);
    free(p->rowids);
    free(p->rendered);
    free(p->templates_s);
    free(p->suites_s);
    memset(p, 0, sizeof *p);
}

/* Loads every suite (keeping the first `limit` prompts of each) and stores
 * its prompts; all suites are stored before any is rendered. */
static drift_status prompts_store(drift_store *st, const drift_run_opts *o, run_prompts *p, drift_error *err) {
    p->suites = calloc(o->n_suites ? o->n_suites : 1, sizeof *p->suites);
    if (!p->suites) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    p->n_suites = o->n_suites;
    for (size_t i = 0; i < o->n_suites; i++) {
        drift_status rc = drift_suite_load(o->suites[i], &p->suites[i], err);
        if (rc) return rc;
        drift_suite *s = p->suites[i];
        if (o->limit > 0 && s->n > (size_t)o->limit) {
            for (size_t j = (size_t)o->limit; j < s->n; j++) drift_prompt_clear(&s->prompts[j]);
            s->n = (size_t)o->limit;
        }
        int64_t *grown = realloc(p->rowids, (p->n + s->n + 1) * sizeof *grown);
        if (!grown) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        p->rowids = grown;
        rc = drift_store_put_prompts(st, s, p->rowids + p->n, err);
        if (rc) return rc;
        p->n += s->n;
    }
    return DRIFT_OK;
}

/* Renders every prompt for api and records the template of each workload:
 * the workload's, or the request control's prompt_template for every
 * plain prompt ("custom/<hash>"; a messages prompt keeps its turns). */
static drift_status prompts_render(const drift_run_opts *o, drift_api api, run_prompts *p, drift_error *err) {
    p->rendered = calloc(p->n ? p->n : 1, sizeof *p->rendered);
    json_t *templates = json_object(), *suites = json_array();
    drift_status rc = DRIFT_OK;
    if (!p->rendered || !templates || !suites) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    size_t k = 0;
    for (size_t i = 0; i < p->n_suites && !rc; i++) {
        const drift_suite *s = p->suites[i];
        for (size_t j = 0; j < s->n && !rc; j++, k++) {
            char tid[DRIFT_TEMPLATE_ID_MAX];
            p->rendered[k] = drift_prompt_render_custom(&s->prompts[j], api, o->target_opts.request.prompt_template, tid);
            if (!p->rendered[k]) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory rendering prompts");
            else json_object_set_new(templates, drift_workload_name(s->prompts[j].workload), json_string(tid));
        }
        json_array_append_new(suites, json_string(o->suites[i]));
    }
    if (!rc) {
        p->templates_s = dump_sorted(templates);
        p->suites_s = dump_sorted(suites);
        if (!p->templates_s || !p->suites_s) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    json_decref(templates);
    json_decref(suites);
    return rc;
}

/* ---- requests of the pending pairs ---- */

typedef struct rowid_at {
    int64_t rowid;
    size_t at;                /* index into run_prompts */
} rowid_at;

static int cmp_rowid_at(const void *a, const void *b) {
    int64_t x = ((const rowid_at *)a)->rowid, y = ((const rowid_at *)b)->rowid;
    return (x > y) - (x < y);
}

static const char *prompt_id_at(const run_prompts *p, size_t at);

/* reqs[i] asks pending pair i: its prompt's rendered text (binary search by
 * row id; "" for a row id the suites do not hold, which cannot happen);
 * ids[i] is its prompt id (pointing into the suites). */
static drift_status build_requests(const run_prompts *p, const int64_t *pend_p, const int *pend_r, size_t n_pend,
                                   drift_gen_request **out, const char ***ids_out, drift_error *err) {
    drift_gen_request *reqs = calloc(n_pend ? n_pend : 1, sizeof *reqs);
    const char **ids = calloc(n_pend ? n_pend : 1, sizeof *ids);
    rowid_at *order = calloc(p->n ? p->n : 1, sizeof *order);
    if (!reqs || !ids || !order) {
        free(reqs);
        free(ids);
        free(order);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < p->n; i++) order[i] = (rowid_at){p->rowids[i], i};
    qsort(order, p->n, sizeof *order, cmp_rowid_at);
    for (size_t i = 0; i < n_pend; i++) {
        size_t lo = 0, hi = p->n;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (order[mid].rowid < pend_p[i]) lo = mid + 1;
            else hi = mid;
        }
        int hit = lo < p->n && order[lo].rowid == pend_p[i];
        reqs[i].index = i;
        reqs[i].prompt = hit ? p->rendered[order[lo].at] : "";
        reqs[i].replicate = pend_r[i];
        ids[i] = hit ? prompt_id_at(p, order[lo].at) : "";
    }
    free(order);
    *out = reqs;
    *ids_out = ids;
    return DRIFT_OK;
}

/* ---- order of the pending pairs ---- */

drift_status drift_run_order_parse(const char *name, drift_run_order *out, drift_error *err) {
    static const char *names[] = {"suite", "random", "risk"};
    for (int i = 0; name && i < 3; i++)
        if (!strcmp(name, names[i])) {
            *out = (drift_run_order)i;
            return DRIFT_OK;
        }
    return drift_error_set(err, DRIFT_ERR_INVALID, "order \"%s\": expected suite, random or risk", name ? name : "");
}

typedef struct rowid_risk {
    int64_t rowid;
    double risk;
} rowid_risk;

static int cmp_rowid_risk(const void *a, const void *b) {
    int64_t x = ((const rowid_risk *)a)->rowid, y = ((const rowid_risk *)b)->rowid;
    return (x > y) - (x < y);
}

/* The risk of each prompt row of run `label` (replicate 0 answers with
 * logprobs), sorted by row id, in *out (*n of them). */
static drift_status load_risks(drift_store *st, const char *label, rowid_risk **out, size_t *n, drift_error *err) {
    *out = NULL;
    *n = 0;
    drift_run_info ri = {0};
    drift_scored_set set = {0};
    drift_status rc = drift_store_run_get(st, label, &ri, err);
    if (rc) return drift_error_prefix(err, "--risk-from: "), rc;
    rc = drift_store_load_scored(st, ri.id, &set, err);
    rowid_risk *r = rc ? NULL : malloc((set.n + 1) * sizeof *r);
    if (!rc && !r) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    size_t k = 0, with_lp = 0;
    drift_store_read_begin(st);
    for (size_t i = 0; !rc && i < set.n; i++) {
        const drift_scored *s = &set.rows[i];
        if (s->is_error || s->replicate != 0) continue;
        drift_answer a = {0};
        drift_error e = {0};
        drift_status g = drift_store_response_get(st, s->response_id, &a, NULL, &e);
        if (g == DRIFT_ERR_NOMEM) rc = drift_error_set(err, g, "out of memory reading run '%s'", label);
        if (!g && a.logprobs_json) {
            drift_risk_features f;
            with_lp++;
            double risk = drift_risk_features_for(a.logprobs_json, s->workload, &f, &e) == DRIFT_OK
                              ? drift_risk_score_for(&f, s->workload, NULL)
                              : NAN;
            r[k++] = (rowid_risk){s->prompt_rowid, risk};
        }
        drift_answer_clear(&a);
    }
    drift_store_read_end(st);
    if (!rc && with_lp == 0)
        rc = drift_error_set(err, DRIFT_ERR_INVALID,
                             "--order risk: run '%s' has no stored logprobs to rank prompts by (run it with --logprobs N)",
                             label);
    drift_scored_set_clear(&set);
    drift_run_info_clear(&ri);
    if (rc) {
        free(r);
        return rc;
    }
    qsort(r, k, sizeof *r, cmp_rowid_risk);
    *out = r;
    *n = k;
    return DRIFT_OK;
}

typedef struct pend_key {
    size_t at;                /* index into the pending arrays */
    double risk;              /* NAN last */
    size_t seq;               /* rank in the seeded order */
} pend_key;

static int cmp_pend_key(const void *a, const void *b) {
    const pend_key *x = a, *y = b;
    int xn = isnan(x->risk), yn = isnan(y->risk);
    if (xn != yn) return xn - yn;
    if (!xn && x->risk != y->risk) return x->risk > y->risk ? -1 : 1;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

/* The prompt id of prompt `at` of the suites (in suite order). */
static const char *prompt_id_at(const run_prompts *p, size_t at) {
    for (size_t i = 0; i < p->n_suites; i++) {
        if (at < p->suites[i]->n) return p->suites[i]->prompts[at].prompt_id;
        at -= p->suites[i]->n;
    }
    return "";
}

/* The workload of prompt `at` of the suites. */
static drift_workload prompt_wl_at(const run_prompts *p, size_t at) {
    for (size_t i = 0; i < p->n_suites; i++) {
        if (at < p->suites[i]->n) return p->suites[i]->prompts[at].workload;
        at -= p->suites[i]->n;
    }
    return DRIFT_WL_UNKNOWN;
}

/* Pairs (prompts x replicates) of each workload in the suites. */
static void count_pairs(const run_prompts *p, int replicates, size_t n_wl[DRIFT_WL_COUNT]) {
    memset(n_wl, 0, DRIFT_WL_COUNT * sizeof *n_wl);
    for (size_t at = 0; at < p->n; at++) {
        drift_workload w = prompt_wl_at(p, at);
        if (w >= 0 && w < DRIFT_WL_COUNT) n_wl[w] += (size_t)replicates;
    }
}

/* o->select over the n pending pairs (already in o->order): keeps the ones
 * it asks for, in order, and counts the others in sum->deferred. A pair's
 * rank is its place in the seeded order among all pairs of its workload. */
static drift_status select_pending(const drift_run_opts *o, const run_prompts *p, int64_t *pend_p, int *pend_r,
                                   size_t *n, size_t *deferred, drift_error *err) {
    size_t R = (size_t)o->replicates, n_all = p->n * R, n_wl[DRIFT_WL_COUNT], cnt[DRIFT_WL_COUNT] = {0};
    count_pairs(p, o->replicates, n_wl);
    const char **ids = calloc(n_all ? n_all : 1, sizeof *ids);
    int *reps = calloc(n_all ? n_all : 1, sizeof *reps);
    size_t *perm = calloc(n_all ? n_all : 1, sizeof *perm), *rank = calloc(n_all ? n_all : 1, sizeof *rank);
    rowid_at *byrow = calloc(p->n ? p->n : 1, sizeof *byrow);
    drift_status rc = DRIFT_OK;
    if (!ids || !reps || !perm || !rank || !byrow) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    for (size_t i = 0; !rc && i < n_all; i++) {
        ids[i] = prompt_id_at(p, i / R);
        reps[i] = (int)(i % R);
    }
    if (!rc) rc = drift_seq_order(ids, reps, n_all, o->order_seed, perm, err);
    for (size_t k = 0; !rc && k < n_all; k++) {
        drift_workload w = prompt_wl_at(p, perm[k] / R);
        rank[perm[k]] = (w >= 0 && w < DRIFT_WL_COUNT) ? cnt[w]++ : 0;
    }
    if (!rc) {
        for (size_t i = 0; i < p->n; i++) byrow[i] = (rowid_at){p->rowids[i], i};
        qsort(byrow, p->n, sizeof *byrow, cmp_rowid_at);
        size_t kept = 0;
        for (size_t i = 0; i < *n; i++) {
            rowid_at key = {pend_p[i], 0};
            const rowid_at *hit = bsearch(&key, byrow, p->n, sizeof *byrow, cmp_rowid_at);
            drift_workload w = hit ? prompt_wl_at(p, hit->at) : DRIFT_WL_UNKNOWN;
            int ask = 0;
            if (hit && w >= 0 && w < DRIFT_WL_COUNT && pend_r[i] >= 0 && (size_t)pend_r[i] < R)
                ask = o->select(o->select_user, w, rank[hit->at * R + (size_t)pend_r[i]], n_wl[w]);
            if (ask) {
                pend_p[kept] = pend_p[i];
                pend_r[kept] = pend_r[i];
                kept++;
            } else {
                (*deferred)++;
            }
        }
        *n = kept;
    }
    free(ids);
    free(reps);
    free(perm);
    free(rank);
    free(byrow);
    return rc;
}

/* The decoding record's "sequential" entry (see select_pending). */
static void decoding_add_sequential(json_t *d, const drift_run_opts *o, const run_prompts *p) {
    size_t n_wl[DRIFT_WL_COUNT];
    count_pairs(p, o->replicates, n_wl);
    json_t *pairs = json_object(), *seq = json_object();
    for (int w = 0; w < DRIFT_WL_COUNT; w++)
        if (n_wl[w]) json_object_set_new(pairs, drift_workload_name((drift_workload)w), json_integer((json_int_t)n_wl[w]));
    json_object_set_new(seq, "alpha", json_real(o->seq_alpha));
    json_object_set_new(seq, "order_seed", json_integer((json_int_t)o->order_seed));
    json_object_set_new(seq, "pairs", pairs);
    json_t *budget = json_object();
    for (int w = 0; o->seq_budget && w < DRIFT_WL_COUNT; w++)
        if (n_wl[w] && o->seq_budget[w] >= 0)
            json_object_set_new(budget, drift_workload_name((drift_workload)w), json_real(o->seq_budget[w]));
    json_object_set_new(seq, "budget", budget);
    json_object_set_new(d, "sequential", seq);
}

/* Permutes the n pending pairs (pend_p, pend_r) into o->order. */
static drift_status order_pending(const drift_run_opts *o, const run_prompts *p, const rowid_risk *risks,
                                  size_t n_risks, int64_t *pend_p, int *pend_r, size_t n, drift_error *err) {
    if (o->order == DRIFT_ORDER_SUITE || n < 2) return DRIFT_OK;
    const char **ids = calloc(n, sizeof *ids);
    size_t *perm = calloc(n, sizeof *perm);
    pend_key *keys = calloc(n, sizeof *keys);
    rowid_at *byrow = calloc(p->n ? p->n : 1, sizeof *byrow);
    int64_t *np = malloc(n * sizeof *np);
    int *nr = malloc(n * sizeof *nr);
    drift_status rc = DRIFT_OK;
    if (!ids || !perm || !keys || !byrow || !np || !nr) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    if (!rc) {
        /* prompt ids of the pending rows (the suites hold every one) */
        for (size_t i = 0; i < p->n; i++) byrow[i] = (rowid_at){p->rowids[i], i};
        qsort(byrow, p->n, sizeof *byrow, cmp_rowid_at);
        for (size_t i = 0; i < n; i++) {
            rowid_at key = {pend_p[i], 0};
            const rowid_at *hit = bsearch(&key, byrow, p->n, sizeof *byrow, cmp_rowid_at);
            ids[i] = hit ? prompt_id_at(p, hit->at) : "";
        }
        rc = drift_seq_order(ids, pend_r, n, o->order_seed, perm, err);
    }
    if (!rc) {
        for (size_t r = 0; r < n; r++) keys[perm[r]] = (pend_key){perm[r], NAN, r};
        for (size_t i = 0; i < n && risks; i++) {
            rowid_risk key = {pend_p[i], 0};
            const rowid_risk *hit = bsearch(&key, risks, n_risks, sizeof *risks, cmp_rowid_risk);
            if (hit) keys[i].risk = hit->risk;
        }
        qsort(keys, n, sizeof *keys, cmp_pend_key);
        for (size_t i = 0; i < n; i++) {
            np[i] = pend_p[keys[i].at];
            nr[i] = pend_r[keys[i].at];
        }
        memcpy(pend_p, np, n * sizeof *np);
        memcpy(pend_r, nr, n * sizeof *nr);
    }
    free(ids);
    free(perm);
    free(keys);
    free(byrow);
    free(np);
    free(nr);
    return rc;
}

/* ---- outcomes: buffered, written in batches, progress reported ---- */

typedef struct run_sink {
    drift_store *st;
    const drift_run_opts *o;
    drift_run_summary *sum;
    int64_t run_id;
    const int64_t *req_prompt;      /* request index -> prompt row id */
    const int *req_rep;             /* request index -> replicate */
    const char *const *req_id;      /* request index -> prompt id */
    drift_answer buf[FLUSH_EVERY];
    size_t n;
    double t0_ms, last_flush_ms;
    drift_status failed;            /* a batch could not be written */
    rowid_risk *risks;              /* --order risk: the source run's risks by prompt row (n_risks) */
    size_t n_risks;
    drift_error err;
} run_sink;

static void emit(const run_sink *s, drift_progress_event ev, const drift_request_outcome *req) {
    if (!s->o->progress) return;
    const drift_run_summary *sum = s->sum;
    double elapsed = util_now_ms() - s->t0_ms;
    drift_progress p = {.stage = "run", .event = ev, .label = s->o->label, .done = sum->done,
                        .total = sum->requested, .errors = sum->errors, .elapsed_ms = elapsed, .eta_ms = -1.0,
                        .summary = sum, .request = req};
    if (sum->done && sum->requested >= sum->done)
        p.eta_ms = elapsed / (double)sum->done * (double)(sum->requested - sum->done);
    s->o->progress(s->o->progress_user, &p);
}

static int sink_flush(run_sink *s) {
    if (!s->n) return 0;
    drift_status rc = drift_store_put_responses(s->st, s->run_id, s->buf, s->n, &s->err);
    for (size_t i = 0; i < s->n; i++) drift_answer_clear(&s->buf[i]);
    s->n = 0;
    s->last_flush_ms = util_now_ms();
    if (rc) {
        s->failed = rc;
        return -1;
    }
    return 0;
}

/* Counts a failed request in its kind's row of sum->failures (a new row
 * for a kind not seen yet, while there is room). */
static void count_failure(drift_run_summary *sum, const drift_answer *r) {
    int status = r->cause == DRIFT_FAIL_HTTP ? r->http_status : 0;
    for (size_t i = 0; i < sum->n_failures; i++) {
        drift_run_failure *f = &sum->failures[i];
        if (f->cause == r->cause && f->http_status == status) {
            f->count++;
            return;
        }
    }
    if (sum->n_failures == DRIFT_RUN_FAILURE_KINDS) {
        sum->failures_other++;
        return;
    }
    drift_run_failure *f = &sum->failures[sum->n_failures++];
    f->cause = r->cause;
    f->http_status = status;
    f->count = 1;
    snprintf(f->first, sizeof f->first, "%s", r->error);
}

const drift_run_failure *drift_run_failure_main(const drift_run_summary *s, int *only) {
    const drift_run_failure *best = NULL;
    for (size_t i = 0; s && i < s->n_failures; i++)
        if (!best || s->failures[i].count > best->count) best = &s->failures[i];
    if (only) *only = best && s->n_failures == 1 && s->failures_other == 0;
    return best;
}

static int on_result(void *user, const drift_gen_request *req, drift_answer *res) {
    run_sink *s = user;
    drift_answer *r = &s->buf[s->n++];
    *r = *res; /* the answer is ours now */
    memset(res, 0, sizeof *res);
    r->prompt_rowid = s->req_prompt[req->index];
    r->replicate = s->req_rep[req->index];
    if (r->error) {
        if (!s->sum->errors++) snprintf(s->sum->first_error, sizeof s->sum->first_error, "%s", r->error);
        count_failure(s->sum, r);
    } else {
        s->sum->answers++;
    }
    s->sum->done++;
    /* the request for the progress event, copied: a flush frees the answer */
    char msg[256];
    if (r->error) snprintf(msg, sizeof msg, "%s", r->error);
    drift_request_outcome out = {.prompt_id = s->req_id[req->index], .replicate = r->replicate, .ok = !r->error,
                                 .cause = r->error ? r->cause : DRIFT_FAIL_NONE, .http_status = r->http_status,
                                 .error = r->error ? msg : NULL, .attempts = r->attempts, .latency_ms = r->latency_ms,
                                 .prompt_tokens = r->prompt_tokens, .completion_tokens = r->completion_tokens};
    char finish[32];
    if (r->finish_reason) {
        snprintf(finish, sizeof finish, "%s", r->finish_reason);
        out.finish_reason = finish;
    }
    if (s->n == FLUSH_EVERY || util_now_ms() - s->last_flush_ms > FLUSH_MS) {
        if (sink_flush(s)) return 1;
    }
    emit(s, DRIFT_PROGRESS_STEP, &out);
    return 0; /* a cancel stops the target through its hook, which first hands over every answer it has */
}

/* ---- the stage ---- */

static int cancelled(const drift_run_opts *o) { return o->cancel && o->cancel(o->cancel_user); }

/* Asks the pending pairs and stores their outcomes; then finishes the run. */
static drift_status generate(run_sink *s, drift_target *t, const drift_gen_request *reqs, drift_error *err) {
    const drift_run_opts *o = s->o;
    drift_run_summary *sum = s->sum;
    sum->step = DRIFT_RUN_STEP_GENERATE;
    drift_status grc = DRIFT_OK;
    if (sum->requested) grc = drift_target_generate(t, reqs, sum->requested, &o->params, on_result, s, err);
    sink_flush(s);
    if (s->failed) {
        *err = s->err;
        return s->failed;
    }
    if (grc == DRIFT_ERR_CANCELLED || cancelled(o))
        return drift_error_set(err, DRIFT_ERR_CANCELLED, "cancelled: %zu of %zu stored in run '%s'; calling again resumes",
                               sum->done, sum->requested, o->label);
    if (grc) return grc;
    sum->step = DRIFT_RUN_STEP_FINISH;
    drift_status rc = sum->deferred ? DRIFT_OK : drift_store_run_finish(s->st, s->run_id, err); /* partial: not finished */
    if (rc) return rc;
    sum->step = DRIFT_RUN_STEP_CHECK;
    if (sum->answers == 0 && sum->errors > 0)
        return drift_error_set(err, strncmp(o->target, "embedded:", 9) ? DRIFT_ERR_HTTP : DRIFT_ERR_MODEL,
                               "every request to %s failed (first error: %s)", o->target_url ? o->target_url : o->target,
                               sum->first_error);
    sum->step = DRIFT_RUN_STEP_DONE;
    return DRIFT_OK;
}

/* From run_begin on: the label is locked until the end of the ask. */
static drift_status begin_and_generate(drift_store *st, drift_run_opts *o, drift_target *t,
                                       const run_prompts *p, const char *config_s, const char *decoding_s,
                                       run_sink *s, char *label_buf, size_t label_cap, drift_error *err) {
    drift_run_summary *sum = s->sum;
    char version[64];
    snprintf(version, sizeof version, "driftbench %s", drift_version());
    drift_run_info info = {.label = (char *)o->label, .target = (char *)o->target, .config_json = (char *)config_s,
                           .decoding_json = (char *)decoding_s, .templates_json = p->templates_s,
                           .suites_json = p->suites_s, .tool_version = version};
    sum->step = DRIFT_RUN_STEP_BEGIN;
    if (cancelled(o))
        return drift_error_set(err, DRIFT_ERR_CANCELLED, "cancelled before run '%s' began; nothing was asked", o->label);
    drift_status rc = o->label_free ? drift_store_run_begin_free(st, &info, label_buf, label_cap, &s->run_id,
                                                                 &sum->resumed, err)
                                    : drift_store_run_begin(st, &info, &s->run_id, &sum->resumed, err);
    if (rc) return rc;
    if (o->label_free) { /* later asks resume the label taken */
        o->label = label_buf;
        o->label_free = 0;
    }
    int64_t *pend_p = NULL;
    int *pend_r = NULL;
    drift_gen_request *reqs = NULL;
    const char **ids = NULL;
    rc = drift_store_pending(st, s->run_id, p->rowids, p->n, o->replicates, &pend_p, &pend_r, &sum->requested, err);
    if (!rc) rc = order_pending(o, p, s->risks, s->n_risks, pend_p, pend_r, sum->requested, err);
    if (!rc && o->select) rc = select_pending(o, p, pend_p, pend_r, &sum->requested, &sum->deferred, err);
    if (!rc) rc = build_requests(p, pend_p, pend_r, sum->requested, &reqs, &ids, err);
    if (!rc) {
        s->req_prompt = pend_p;
        s->req_rep = pend_r;
        s->req_id = ids;
        s->last_flush_ms = util_now_ms();
        emit(s, DRIFT_PROGRESS_BEGIN, NULL);
        rc = generate(s, t, reqs, err);
        emit(s, DRIFT_PROGRESS_END, NULL);
    }
    drift_store_run_unlock(st, o->label, NULL); /* run_finish released it already when it ran */
    free(reqs);
    free(ids);
    free(pend_p);
    free(pend_r);
    return rc;
}

/* ---- the session: begin / ask / end ---- */

/* What begin opened and ask reuses: the target, the run's records, the
 * suites (stored and rendered). */
struct drift_run_session {
    drift_store *st;
    drift_run_opts o;          /* the caller's options (pointers borrowed) */
    drift_target *t;
    json_t *config, *decoding;
    char *config_s, *decoding_s;
    run_prompts p;
    double t0_ms;              /* begin's start: the first ask's clock starts there */
    char label[256];           /* the label taken, with o.label_free */
    int asked;                 /* asks so far */
};

void drift_run_end(drift_run_session *ss) {
    if (!ss) return;
    prompts_clear(&ss->p);
    json_decref(ss->config);
    json_decref(ss->decoding);
    free(ss->config_s);
    free(ss->decoding_s);
    drift_target_close(ss->t);
    free(ss);
}

drift_status drift_run_begin(drift_store *st, const drift_run_opts *o, drift_run_session **out, drift_run_summary *sum,
                             drift_error *err) {
    double t0 = util_now_ms();
    *out = NULL;
    memset(sum, 0, sizeof *sum);
    sum->replicates = o->replicates;
    if (!st || !o->label || !o->target || !o->n_suites || !o->suites || o->replicates < 1)
        return drift_error_set(err, DRIFT_ERR_INVALID, "run: a store, a label, a target, suites and replicates >= 1 are needed");
    if (o->select && (o->order != DRIFT_ORDER_RANDOM || !(o->seq_alpha > 0 && o->seq_alpha < 1)))
        return drift_error_set(err, DRIFT_ERR_INVALID,
                               "run: sequential asking needs the random order and an alpha in (0, 1) (order %d, alpha %g)",
                               (int)o->order, o->seq_alpha);
    drift_run_session *ss = calloc(1, sizeof *ss);
    if (!ss) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    ss->st = st;
    ss->o = *o;
    ss->t0_ms = t0;
    drift_target_opts topts = o->target_opts;
    topts.cancel = o->cancel; /* a cancel ends requests and back-offs at once */
    topts.cancel_user = o->cancel_user;
    drift_status rc = drift_target_open(o->target_url ? o->target_url : o->target, &topts, &ss->t, err);
    if (!rc) {
        sum->step = DRIFT_RUN_STEP_CONFIG;
        rc = build_config(ss->t, o->config, &ss->config, err);
    }
    if (!rc) {
        sum->step = DRIFT_RUN_STEP_SUITES;
        ss->decoding = build_decoding(o, drift_target_api(ss->t));
        rc = prompts_store(st, o, &ss->p, err);
    }
    if (!rc) {
        sum->prompts = ss->p.n;
        if (o->select) decoding_add_sequential(ss->decoding, o, &ss->p);
        ss->config_s = dump_sorted(ss->config);
        ss->decoding_s = dump_sorted(ss->decoding);
        rc = prompts_render(o, drift_target_api(ss->t), &ss->p, err);
        if (!rc && (!ss->config_s || !ss->decoding_s)) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    sum->elapsed_ms = util_now_ms() - t0;
    if (rc) {
        drift_run_end(ss);
        return rc;
    }
    *out = ss;
    return DRIFT_OK;
}

const char *drift_run_label(const drift_run_session *ss) { return ss ? ss->o.label : NULL; }

drift_status drift_run_ask(drift_run_session *ss, drift_run_summary *sum, drift_error *err) {
    drift_run_opts *o = &ss->o;
    double t0 = ss->asked++ ? util_now_ms() : ss->t0_ms;
    memset(sum, 0, sizeof *sum);
    sum->replicates = o->replicates;
    sum->prompts = ss->p.n;
    sum->step = DRIFT_RUN_STEP_SUITES;
    run_sink *s = calloc(1, sizeof *s);
    drift_status rc = s ? DRIFT_OK : drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    if (!rc) {
        *s = (run_sink){.st = ss->st, .o = o, .sum = sum, .t0_ms = t0};
        /* the risk order's source is read before the run begins: a bad source creates no run */
        if (o->order == DRIFT_ORDER_RISK)
            rc = load_risks(ss->st, o->risk_from ? o->risk_from : o->label, &s->risks, &s->n_risks, err);
    }
    if (!rc) {
        rc = begin_and_generate(ss->st, o, ss->t, &ss->p, ss->config_s, ss->decoding_s, s, ss->label, sizeof ss->label,
                                err);
        for (size_t i = 0; i < s->n; i++) drift_answer_clear(&s->buf[i]);
    }
    sum->elapsed_ms = util_now_ms() - t0;
    if (s) free(s->risks);
    free(s);
    return rc;
}

/* begin + ask + end: the one-call run. */
drift_status drift_run_execute(drift_store *st, const drift_run_opts *o, drift_run_summary *sum, drift_error *err) {
    drift_run_session *ss = NULL;
    drift_status rc = drift_run_begin(st, o, &ss, sum, err);
    if (rc) return rc;
    rc = drift_run_ask(ss, sum, err);
    drift_run_end(ss);
    return rc;
}
