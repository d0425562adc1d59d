/* teacher_forced.c - token-level divergence of two embedded stacks over the
 * same tokens (divergence.h): loads both models, builds each sequence, runs
 * both forward passes in lock-step and feeds every scored position to
 * token_kl.c's math.
 *
 * A sequence is scored from index k0 on: the first pass runs tokens
 * [0, k0) and keeps only the last row's logits (the distribution of token
 * k0); then the rest goes through in pieces of TF_PIECE tokens with every
 * row's logits, row r of a piece starting at j predicting token j + 1 + r.
 * The engine is batch-invariant, so the pieces give the logits one whole
 * pass would, with at most TF_PIECE x n_vocab floats per model in memory.
 *
 *   runs  the sequence is the prompt tokens exactly as the baseline run's
 *         target made them (drift_prompt_render with the run's api, then
 *         engine/embedded.c's eng_embedded_prompt_tokens: the one code path
 *         generation uses) followed by the baseline's answer tokens, k0 =
 *         the prompt's length. The target must tokenize every prompt the
 *         same way (else the vocabularies differ: DRIFT_ERR_MISMATCH).
 *   text  llama-perplexity's chunks (see divergence.h), k0 = ctx/2 + 1.
 * Models are opened as targets (drift_target_open), so the engine's model
 * cache maps a file shared by both stacks once. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driftbench/divergence.h"
#include "driftbench/model.h"
#include "driftbench/store.h"
#include "driftbench/suite.h"
#include "driftbench/target.h"
#include "engine/target_impl.h"
#include "util/util.h"

#define TF_PIECE 64

static const char *TF_HTTP_MSG =
    "teacher forcing needs an embedded stack (embedded:PATH.gguf?...); HTTP servers: not available; the server's "
    "prompt logprobs (echo) are not used yet";

void drift_tokdiv_opts_default(drift_tokdiv_opts *o) {
    memset(o, 0, sizeof *o);
    o->workload = DRIFT_WL_UNKNOWN;
    o->seed = 1;
}

static void prompt_clear(drift_tokdiv_prompt *p) {
    free(p->prompt_id);
    free(p->first_base_text);
    free(p->first_target_text);
    free(p->error);
}

void drift_tokdiv_report_clear(drift_tokdiv_report *r) {
    if (!r) return;
    for (size_t i = 0; i < r->n_prompts; i++) prompt_clear(&r->prompts[i]);
    free(r->prompts);
    free(r->baseline);
    free(r->target);
    free(r->baseline_spec);
    free(r->target_spec);
    free(r->api);
    memset(r, 0, sizeof *r);
}

/* ---- the two stacks ---- */

typedef struct tf_pair {
    drift_target *tb, *tt;
    const drift_model *mb, *mt;
    int n_vocab;
    int n_ctx_max;        /* the smaller of the two context lengths */
    float *lb, *lt;       /* (TF_PIECE, n_vocab) logits of each */
} tf_pair;

static void pair_close(tf_pair *p) {
    drift_target_close(p->tb);
    drift_target_close(p->tt);
    free(p->lb);
    free(p->lt);
    memset(p, 0, sizeof *p);
}

/* spec with its model path replaced by models_dir/<file name> when the path
 * does not exist and that file does; else a copy of spec. who names the
 * stack in the error when the model file is nowhere. */
static drift_status resolve_spec(const char *spec, const char *models_dir, const char *who, char **out,
                                 drift_error *err) {
    const char *body = spec + strlen("embedded:");
    const char *q = strchr(body, '?');
    char *path = q ? util_strndup(body, (size_t)(q - body)) : util_strdup(body);
    if (!path) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    drift_status rc = DRIFT_OK;
    if (!*path || access(path, R_OK) == 0) {
        *out = util_strdup(spec); /* an empty path: drift_target_open names it */
    } else {
        const char *slash = strrchr(path, '/');
        const char *base = slash ? slash + 1 : path;
        char *alt = models_dir ? util_asprintf("%s/%s", models_dir, base) : NULL;
        if (alt && access(alt, R_OK) == 0) {
            *out = util_asprintf("embedded:%s%s", alt, q ? q : "");
        } else if (models_dir) {
            rc = drift_error_set(err, DRIFT_ERR_NOT_FOUND, "%s: model file '%s' does not exist, nor '%s'", who, path,
                                 alt ? alt : base);
        } else {
            rc = drift_error_set(err, DRIFT_ERR_NOT_FOUND,
                                 "%s: model file '%s' does not exist (a store made elsewhere? --models DIR looks for "
                                 "'%s' in DIR)",
                                 who, path, base);
        }
        free(alt);
    }
    free(path);
    if (!rc && !*out) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    return rc;
}

static drift_status open_stack(const char *spec, const char *models_dir, const char *who, drift_target **t,
                               char **spec_used, drift_error *err) {
    if (strncmp(spec, "embedded:", 9) != 0)
        return drift_error_set(err, DRIFT_ERR_UNSUPPORTED, "%s is '%s': %s", who, spec, TF_HTTP_MSG);
    drift_status rc = resolve_spec(spec, models_dir, who, spec_used, err);
    if (rc) return rc;
    drift_target_opts to;
    drift_target_opts_default(&to);
    to.concurrency = 1;
    rc = drift_target_open(*spec_used, &to, t, err);
    if (rc) return drift_error_prefix(err, "%s: ", who);
    if (!eng_embedded_model(*t)) return drift_error_set(err, DRIFT_ERR_UNSUPPORTED, "%s: %s", who, TF_HTTP_MSG);
    return DRIFT_OK;
}

static drift_status pair_open(tf_pair *p, const char *spec_b, const char *spec_t, const char *who_b, const char *who_t,
                              const char *models_dir, drift_tokdiv_report *r, drift_error *err) {
    memset(p, 0, sizeof *p);
    drift_status rc = open_stack(spec_b, models_dir, who_b, &p->tb, &r->baseline_spec, err);
    if (!rc) rc = open_stack(spec_t, models_dir, who_t, &p->tt, &r->target_spec, err);
    if (rc) return rc;
    p->mb = eng_embedded_model(p->tb);
    p->mt = eng_embedded_model(p->tt);
    const drift_model_info *ib = drift_model_get_info(p->mb), *it = drift_model_get_info(p->mt);
    if (ib->n_vocab != it->n_vocab)
        return drift_error_set(err, DRIFT_ERR_MISMATCH,
                               "the two stacks have different vocabularies (%d and %d tokens): teacher forcing needs "
                               "one token sequence for both",
                               ib->n_vocab, it->n_vocab);
    p->n_vocab = ib->n_vocab;
    p->n_ctx_max = ib->n_ctx_train < it->n_ctx_train ? ib->n_ctx_train : it->n_ctx_train;
    p->lb = malloc((size_t)TF_PIECE * (size_t)p->n_vocab * sizeof *p->lb);
    p->lt = malloc((size_t)TF_PIECE * (size_t)p->n_vocab * sizeof *p->lt);
    if (!p->lb || !p->lt) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    return DRIFT_OK;
}

/* ---- one sequence ---- */

/* Scores seq[k0..L) (0 < k0 < L) under both models into acc; the first
 * top-1 disagreement (index from k0) into p's first_* fields. */
static drift_status force(tf_pair *pr, const int32_t *seq, size_t L, size_t k0, drift_tokdiv_acc *acc,
                          drift_tokdiv_prompt *p, drift_error *err) {
    drift_session *sb = NULL, *st = NULL;
    drift_status rc = drift_session_new(pr->mb, (int)L, &sb, err);
    if (!rc) rc = drift_session_new(pr->mt, (int)L, &st, err);
    size_t nv = (size_t)pr->n_vocab;
    p->first_diff = -1;
    /* rows: the logits of the tokens that predict seq[next .. next + rows) */
    size_t next = k0, rows = 1;
    if (!rc) rc = drift_session_forward(sb, seq, k0, 0, pr->lb, NULL, err);
    if (!rc) rc = drift_session_forward(st, seq, k0, 0, pr->lt, NULL, err);
    while (!rc) {
        for (size_t r = 0; r < rows && !rc; r++) {
            int32_t tok = seq[next + r];
            drift_tokdiv_pos pos = drift_tokdiv_compare(pr->lb + r * nv, pr->lt + r * nv, pr->n_vocab, tok);
            rc = drift_tokdiv_acc_add(acc, &pos, err);
            if (!rc && p->first_diff < 0 && pos.top_base != pos.top_target) {
                p->first_diff = (int)(next + r - k0);
                p->first_base_id = pos.top_base;
                p->first_target_id = pos.top_target;
            }
        }
        next += rows;
        if (rc || next >= L) break;
        /* tokens next-1 .. next-1+rows-1 predict next .. next+rows-1 */
        rows = L - next < TF_PIECE ? L - next : TF_PIECE;
        rc = drift_session_forward(sb, seq + next - 1, rows, 1, pr->lb, NULL, err);
        if (!rc) rc = drift_session_forward(st, seq + next - 1, rows, 1, pr->lt, NULL, err);
    }
    drift_session_free(sb);
    drift_session_free(st);
    return rc;
}

/* Token text for the report: valid UTF-8, control tokens rendered. */
static char *tok_text(const drift_model *m, int32_t id) {
    char *raw = drift_model_token_text(m, id);
    char *clean = raw ? util_utf8_clean(raw, strlen(raw)) : NULL;
    free(raw);
    return clean;
}

/* Scores one sequence into p and merges its positions into the pools. A
 * failure of this sequence alone (context) becomes p->error. */
static drift_status score_seq(tf_pair *pr, const int32_t *seq, size_t L, size_t k0, drift_tokdiv_prompt *p,
                              drift_tokdiv_acc *pool_wl, drift_tokdiv_acc *pool_all, drift_error *err) {
    p->n_prompt_tokens = (int)k0;
    p->n_answer_tokens = (int)(L - k0);
    p->first_diff = -1;
    if (L > (size_t)pr->n_ctx_max) {
        p->error = util_asprintf("%zu tokens (prompt %zu + answer %zu) do not fit the context of %d", L, k0, L - k0,
                                 pr->n_ctx_max);
        return p->error ? DRIFT_OK : drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    drift_tokdiv_acc acc = {0};
    drift_status rc = force(pr, seq, L, k0, &acc, p, err);
    if (!rc) rc = drift_tokdiv_acc_summary(&acc, &p->s, err);
    if (!rc && pool_wl) rc = drift_tokdiv_acc_merge(pool_wl, &acc, err);
    if (!rc) rc = drift_tokdiv_acc_merge(pool_all, &acc, err);
    if (!rc && p->first_diff >= 0) {
        p->first_base_text = tok_text(pr->mb, p->first_base_id);
        p->first_target_text = tok_text(pr->mt, p->first_target_id);
    }
    drift_tokdiv_acc_clear(&acc);
    return rc;
}

/* ---- runs mode ---- */

/* The answer's token ids from its stored logprobs JSON ([{"id":N,..},..]),
 * validated against n_vocab; 0 when there are none usable (then *ids is
 * NULL), -1 on nomem. Stored data is outside input: a missing or bad id
 * makes the whole list unusable. */
static int logprob_ids(const char *json, int n_vocab, int32_t **ids, size_t *n) {
    *ids = NULL;
    *n = 0;
    if (!json) return 0;
    json_t *arr = json_loads(json, 0, NULL);
    if (!json_is_array(arr) || json_array_size(arr) == 0) {
        json_decref(arr);
        return 0;
    }
    size_t k = json_array_size(arr);
    int32_t *v = malloc(k * sizeof *v);
    if (!v) {
        json_decref(arr);
        return -1;
    }
    for (size_t i = 0; i < k; i++) {
        json_t *id = json_object_get(json_array_get(arr, i), "id");
        json_int_t x = json_is_integer(id) ? json_integer_value(id) : -1;
        if (x < 0 || x >= n_vocab) {
            free(v);
            json_decref(arr);
            return 0;
        }
        v[i] = (int32_t)x;
    }
    json_decref(arr);
    *ids = v;
    *n = k;
    return 1;
}

/* The template the run recorded for workload wl ("" when none). */
static const char *run_template(json_t *templates, drift_workload wl) {
    json_t *v = json_object_get(templates, drift_workload_name(wl));
    return json_is_string(v) ? json_string_value(v) : "";
}

/* Which rows to score: replicate 0, answered, of the chosen workload(s);
 * with a limit, a seeded random sample of that many per workload. Returns
 * a malloc'd flag per row. */
static unsigned char *pick_rows(const drift_scored_set *set, const drift_tokdiv_opts *o, size_t *n_picked) {
    unsigned char *pick = calloc(set->n ? set->n : 1, 1);
    size_t *idx = malloc((set->n ? set->n : 1) * sizeof *idx);
    if (!pick || !idx) {
        free(pick);
        free(idx);
        return NULL;
    }
    util_rng rng;
    util_rng_seed(&rng, o->seed);
    *n_picked = 0;
    for (int w = 0; w < DRIFT_WL_COUNT; w++) {
        if (o->workload != DRIFT_WL_UNKNOWN && o->workload != (drift_workload)w) continue;
        size_t k = 0;
        for (size_t i = 0; i < set->n; i++) {
            const drift_scored *r = &set->rows[i];
            if (r->workload == (drift_workload)w && r->replicate == 0 && !r->is_error) idx[k++] = i;
        }
        size_t take = o->limit && o->limit < k ? o->limit : k;
        for (size_t i = 0; i < take; i++) { /* partial Fisher-Yates */
            size_t j = i + (size_t)util_rng_below(&rng, k - i);
            size_t t = idx[i];
            idx[i] = idx[j];
            idx[j] = t;
            pick[idx[i]] = 1;
        }
        *n_picked += take;
    }
    free(idx);
    return pick;
}

typedef struct runs_ctx {
    tf_pair pr;
    drift_run_info rb, rt;
    json_t *templates;
    drift_scored_set set;
    drift_tokdiv_acc pool[DRIFT_WL_COUNT], all;
} runs_ctx;

/* One stored answer of the baseline into p. */
static drift_status runs_prompt(runs_ctx *c, drift_store *st, const drift_scored *row, drift_tokdiv_report *r,
                                drift_tokdiv_prompt *p, drift_error *err) {
    drift_answer ans;
    drift_prompt pm;
    memset(&ans, 0, sizeof ans);
    memset(&pm, 0, sizeof pm);
    int32_t *pt = NULL, *pt2 = NULL, *at = NULL, *seq = NULL;
    size_t np = 0, np2 = 0, na = 0;
    char *rendered = NULL;
    drift_api api = drift_target_api(c->pr.tb);
    drift_status rc = drift_store_response_get(st, row->response_id, &ans, &pm, err);
    p->workload = row->workload;
    p->first_diff = -1;
    if (!rc && !(p->prompt_id = util_strdup(row->prompt_id)))
        rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    const char *tid = NULL;
    if (!rc && !(rendered = drift_prompt_render(&pm, api, &tid)))
        rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    const char *recorded = rc ? "" : run_template(c->templates, row->workload);
    if (!rc && *recorded && tid && strcmp(recorded, tid) != 0)
        rc = drift_error_set(err, DRIFT_ERR_MISMATCH,
                             "run '%s' rendered %s prompts with template %s; this build renders %s: the prompts "
                             "would not be the ones the run sent",
                             r->baseline, drift_workload_name(row->workload), recorded, tid);
    if (!rc) rc = eng_embedded_prompt_tokens(c->pr.tb, rendered, &pt, &np, err);
    if (!rc) rc = eng_embedded_prompt_tokens(c->pr.tt, rendered, &pt2, &np2, err);
    if (!rc && (np != np2 || memcmp(pt, pt2, np * sizeof *pt) != 0))
        rc = drift_error_set(err, DRIFT_ERR_MISMATCH,
                             "prompt '%s': the two stacks tokenize it differently (%zu and %zu tokens): teacher "
                             "forcing needs one token sequence for both",
                             row->prompt_id, np, np2);
    if (!rc) {
        int got = logprob_ids(ans.logprobs_json, c->pr.n_vocab, &at, &na);
        if (got < 0) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        else if (got) p->tokens_from_logprobs = 1;
        else if (ans.text && *ans.text)
            rc = drift_model_tokenize(c->pr.mb, ans.text, strlen(ans.text), 0, 0, &at, &na, err);
    }
    if (!rc && na == 0) {
        p->n_prompt_tokens = (int)np;
        if (!(p->error = util_strdup("empty answer: no token to score"))) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    } else if (!rc && np == 0) {
        if (!(p->error = util_strdup("empty prompt: no token to start from"))) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    } else if (!rc) {
        seq = malloc((np + na) * sizeof *seq);
        if (!seq) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        else {
            memcpy(seq, pt, np * sizeof *seq);
            memcpy(seq + np, at, na * sizeof *seq);
            rc = score_seq(&c->pr, seq, np + na, np, p, &c->pool[row->workload], &c->all, err);
            if (rc) drift_error_prefix(err, "prompt '%s': ", row->prompt_id);
        }
    }
    free(seq);
    free(pt);
    free(pt2);
    free(at);
    free(rendered);
    drift_answer_clear(&ans);
    drift_prompt_clear(&pm);
    return rc;
}

static drift_status finish_pools(drift_tokdiv_acc *pool, const drift_tokdiv_acc *all, drift_tokdiv_report *r,
                                 drift_error *err) {
    drift_status rc = DRIFT_OK;
    for (int w = 0; w < DRIFT_WL_COUNT && !rc; w++)
        if (r->present[w]) rc = drift_tokdiv_acc_summary(&pool[w], &r->wl[w], err);
    if (!rc) rc = drift_tokdiv_acc_summary(all, &r->overall, err);
    return rc;
}

drift_status drift_tokdiv_runs(drift_store *st, const char *baseline_label, const char *target_label,
                               const drift_tokdiv_opts *o, drift_tokdiv_report *out, drift_error *err) {
    drift_tokdiv_opts dflt;
    if (!o) {
        drift_tokdiv_opts_default(&dflt);
        o = &dflt;
    }
    memset(out, 0, sizeof *out);
    double t0 = util_now_ms();
    runs_ctx c;
    memset(&c, 0, sizeof c);
    unsigned char *pick = NULL;
    drift_status rc = DRIFT_OK;
    out->baseline = util_strdup(baseline_label);
    out->target = util_strdup(target_label);
    out->limit = o->limit;
    out->seed = o->seed;
    if (!out->baseline || !out->target) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    if (!rc) rc = drift_store_run_get(st, baseline_label, &c.rb, err);
    if (!rc) rc = drift_store_run_get(st, target_label, &c.rt, err);
    if (!rc) {
        char *wb = util_asprintf("baseline run '%s'", baseline_label), *wt = util_asprintf("target run '%s'", target_label);
        if (!wb || !wt) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        else rc = pair_open(&c.pr, c.rb.target, c.rt.target, wb, wt, o->models_dir, out, err);
        free(wb);
        free(wt);
    }
    if (!rc && drift_target_api(c.pr.tb) != drift_target_api(c.pr.tt))
        rc = drift_error_set(err, DRIFT_ERR_MISMATCH,
                             "baseline run '%s' used api=%s and target run '%s' api=%s: their prompts differ, so "
                             "there is no one token sequence to force",
                             baseline_label, drift_target_api(c.pr.tb) == DRIFT_API_CHAT ? "chat" : "completions",
                             target_label, drift_target_api(c.pr.tt) == DRIFT_API_CHAT ? "chat" : "completions");
    if (!rc) {
        out->api = util_strdup(drift_target_api(c.pr.tb) == DRIFT_API_CHAT ? "chat" : "completions");
        c.templates = json_loads(c.rb.templates_json ? c.rb.templates_json : "{}", 0, NULL);
        if (!out->api) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    if (!rc) rc = drift_store_load_scored(st, c.rb.id, &c.set, err);
    size_t n_pick = 0;
    if (!rc && !(pick = pick_rows(&c.set, o, &n_pick))) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    if (!rc && n_pick == 0)
        rc = drift_error_set(err, DRIFT_ERR_INVALID, "baseline run '%s' has no answers%s%s to score", baseline_label,
                             o->workload != DRIFT_WL_UNKNOWN ? " of workload " : "",
                             o->workload != DRIFT_WL_UNKNOWN ? drift_workload_name(o->workload) : "");
    if (!rc && !(out->prompts = calloc(n_pick, sizeof *out->prompts)))
        rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < c.set.n && !rc; i++) {
        if (!pick[i]) continue;
        if (o->cancel && o->cancel(o->cancel_user)) {
            rc = drift_error_set(err, DRIFT_ERR_CANCELLED, "divergence stopped after %zu of %zu prompts",
                                 out->n_prompts, n_pick);
            break;
        }
        drift_tokdiv_prompt *p = &out->prompts[out->n_prompts++];
        rc = runs_prompt(&c, st, &c.set.rows[i], out, p, err);
        if (!rc) {
            if (p->error) out->n_skipped++;
            else out->present[p->workload] = 1;
        }
        if (o->progress) o->progress(o->progress_user, "divergence", out->n_prompts, n_pick);
    }
    if (!rc) rc = finish_pools(c.pool, &c.all, out, err);
    out->elapsed_ms = util_now_ms() - t0;
    free(pick);
    for (int w = 0; w < DRIFT_WL_COUNT; w++) drift_tokdiv_acc_clear(&c.pool[w]);
    drift_tokdiv_acc_clear(&c.all);
    drift_scored_set_clear(&c.set);
    json_decref(c.templates);
    drift_run_info_clear(&c.rb);
    drift_run_info_clear(&c.rt);
    pair_close(&c.pr);
    if (rc) drift_tokdiv_report_clear(out);
    return rc;
}

/* ---- text mode ---- */

drift_status drift_tokdiv_text(const char *baseline_spec, const char *target_spec, const char *text, size_t len,
                               int ctx, const drift_tokdiv_opts *o, drift_tokdiv_report *out, drift_error *err) {
    drift_tokdiv_opts dflt;
    if (!o) {
        drift_tokdiv_opts_default(&dflt);
        o = &dflt;
    }
    memset(out, 0, sizeof *out);
    double t0 = util_now_ms();
    out->text_mode = 1;
    out->ctx = ctx;
    tf_pair pr;
    memset(&pr, 0, sizeof pr);
    drift_tokdiv_acc all = {0};
    int32_t *toks = NULL, *bos = NULL, *chunk = NULL;
    size_t nt = 0, nbos = 0;
    drift_status rc = DRIFT_OK;
    out->baseline = util_strdup(baseline_spec);
    out->target = util_strdup(target_spec);
    if (!out->baseline || !out->target) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    if (!rc && ctx < 4) rc = drift_error_set(err, DRIFT_ERR_INVALID, "--ctx %d: at least 4 tokens", ctx);
    if (!rc) rc = pair_open(&pr, baseline_spec, target_spec, "baseline", "target", o->models_dir, out, err);
    if (!rc && ctx > pr.n_ctx_max)
        rc = drift_error_set(err, DRIFT_ERR_INVALID, "--ctx %d exceeds the models' context length %d", ctx, pr.n_ctx_max);
    /* as llama-perplexity: the model's BOS before the text; the empty text
     * tokenizes to just that BOS when the model adds one */
    if (!rc) rc = drift_model_tokenize(pr.mb, text, len, -1, 0, &toks, &nt, err);
    if (!rc) rc = drift_model_tokenize(pr.mb, "", 0, -1, 0, &bos, &nbos, err);
    out->n_text_tokens = nt;
    if (!rc && nt < 2 * (size_t)ctx)
        rc = drift_error_set(err, DRIFT_ERR_INVALID,
                             "the text tokenizes to %zu tokens; a context of %d needs at least %d (two chunks)", nt,
                             ctx, 2 * ctx);
    size_t n_chunk = rc ? 0 : nt / (size_t)ctx;
    if (!rc && (!(chunk = malloc((size_t)ctx * sizeof *chunk)) || !(out->prompts = calloc(n_chunk, sizeof *out->prompts))))
        rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n_chunk && !rc; i++) {
        if (o->cancel && o->cancel(o->cancel_user)) {
            rc = drift_error_set(err, DRIFT_ERR_CANCELLED, "divergence stopped after %zu of %zu chunks", i, n_chunk);
            break;
        }
        memcpy(chunk, toks + i * (size_t)ctx, (size_t)ctx * sizeof *chunk);
        if (nbos == 1) chunk[0] = bos[0];
        drift_tokdiv_prompt *p = &out->prompts[out->n_prompts++];
        p->workload = DRIFT_WL_UNKNOWN;
        if (!(p->prompt_id = util_asprintf("chunk %zu", i + 1))) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        if (!rc) rc = score_seq(&pr, chunk, (size_t)ctx, (size_t)(ctx / 2) + 1, p, NULL, &all, err);
        if (!rc && p->error) out->n_skipped++;
        out->n_chunks = (int)out->n_prompts;
        if (o->progress) o->progress(o->progress_user, "divergence", i + 1, n_chunk);
    }
    if (!rc) rc = drift_tokdiv_acc_summary(&all, &out->overall, err);
    out->elapsed_ms = util_now_ms() - t0;
    drift_tokdiv_acc_clear(&all);
    free(toks);
    free(bos);
    free(chunk);
    pair_close(&pr);
    if (rc) drift_tokdiv_report_clear(out);
    return rc;
}
