/* teacher_forced.c - token-level divergence of embedded stacks over the
 * same tokens (teacher_forced.h, over divergence.h's data): loads the
 * models, builds each sequence, runs the forward passes and feeds every
 * scored position to token_kl.c's math.
 *
 * A sequence is scored from index k0 on: a first pass runs tokens [0, k0)
 * and keeps only the last row's logits (the distribution of token k0); the
 * rest goes through in pieces of TF_PIECE tokens with every row's logits,
 * row r of a piece starting at j predicting token j + 1 + r. The engine is
 * batch-invariant, so the pieces give the logits one whole pass would. The
 * baseline's rows of a sequence ((L - k0) x n_vocab floats) are computed
 * once and kept while every target is compared with them, so N
 * configurations against one baseline cost one baseline pass per prompt,
 * not N (drift_tokdiv_runs_many).
 *
 *   runs  the sequence is the prompt tokens exactly as the baseline run's
 *         target made them (drift_prompt_render with the run's api, then
 *         the target's drift_target_prompt_tokens (target.h): the one code
 *         path generation uses) followed by the baseline's answer tokens, k0 =
 *         the prompt's length. Every target must tokenize every prompt the
 *         same way (else DRIFT_ERR_MISMATCH).
 *   text  llama-perplexity's chunks (see divergence.h), k0 = ctx/2 + 1.
 * Models are opened as targets (drift_target_open), so the engine's model
 * cache maps a file shared by several stacks once. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driftbench/teacher_forced.h"
#include "driftbench/model.h"
#include "driftbench/store.h"
#include "driftbench/suite.h"
#include "driftbench/target.h"
#include "util/util.h"

#define TF_PIECE 64

static const char *TF_HTTP_MSG =
    "teacher forcing needs an embedded stack (embedded:PATH.gguf?...); HTTP servers: not available; the server's "
    "prompt logprobs (echo) are not used yet";

void drift_tokdiv_opts_default(drift_tokdiv_opts *o) {
    memset(o, 0, sizeof *o);
    o->seed = 1;
}

/* ---- the stacks ---- */

typedef struct tf_stack {
    drift_target *t;
    const drift_model *m;
} tf_stack;

static void stack_close(tf_stack *k) {
    drift_target_close(k->t);
    memset(k, 0, sizeof *k);
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

static drift_status stack_open(tf_stack *k, const char *spec, const char *models_dir, const char *who, char **spec_used,
                               drift_error *err) {
    memset(k, 0, sizeof *k);
    if (strncmp(spec, "embedded:", 9) != 0)
        return drift_error_set(err, DRIFT_ERR_UNSUPPORTED, "%s is '%s': %s", who, spec, TF_HTTP_MSG);
    drift_status rc = resolve_spec(spec, models_dir, who, spec_used, err);
    if (rc) return rc;
    drift_target_opts to;
    drift_target_opts_default(&to);
    to.concurrency = 1;
    rc = drift_target_open(*spec_used, &to, &k->t, err);
    if (rc) {
        k->t = NULL;
        return drift_error_prefix(err, "%s: ", who);
    }
    if (!(k->m = drift_target_model(k->t))) return drift_error_set(err, DRIFT_ERR_UNSUPPORTED, "%s: %s", who, TF_HTTP_MSG);
    return DRIFT_OK;
}

/* The target stack must read the baseline's token ids: same vocabulary size. */
static drift_status same_vocab(const tf_stack *b, const tf_stack *t, const char *who, drift_error *err) {
    int nb = drift_model_get_info(b->m)->n_vocab, nt = drift_model_get_info(t->m)->n_vocab;
    if (nb != nt)
        return drift_error_set(err, DRIFT_ERR_MISMATCH,
                               "%s: the two stacks have different vocabularies (%d and %d tokens): teacher forcing "
                               "needs one token sequence for both",
                               who, nb, nt);
    return DRIFT_OK;
}

/* ---- one sequence ---- */

/* The logits of model m that predict seq[k0..L) (0 < k0 < L): rows (L - k0,
 * n_vocab) into out. The first pass runs seq[0..k0) keeping the last row;
 * then pieces of TF_PIECE tokens with every row. */
static drift_status seq_logits(const drift_model *m, const int32_t *seq, size_t L, size_t k0, float *out,
                               drift_error *err) {
    size_t nv = (size_t)drift_model_get_info(m)->n_vocab;
    drift_session *s = NULL;
    drift_status rc = drift_session_new(m, (int)L, &s, err);
    if (!rc) rc = drift_session_forward(s, seq, k0, 0, out, NULL, err);
    /* tokens next-1 .. next-1+rows-1 predict next .. next+rows-1 */
    for (size_t next = k0 + 1; !rc && next < L;) {
        size_t rows = L - next < TF_PIECE ? L - next : TF_PIECE;
        rc = drift_session_forward(s, seq + next - 1, rows, 1, out + (next - k0) * nv, NULL, err);
        next += rows;
    }
    drift_session_free(s);
    return rc;
}

/* Token text for the report: valid UTF-8, control tokens rendered. */
static char *tok_text(const drift_model *m, int32_t id) {
    char *raw = drift_model_token_text(m, id);
    char *clean = raw ? util_utf8_clean(raw, strlen(raw)) : NULL;
    free(raw);
    return clean;
}

/* Compares the target t over seq[k0..L) against the baseline's rows lb into
 * p (figures, first top-1 disagreement) and merges the positions into the
 * pools (pool_wl may be NULL). lt: scratch of the same size as lb. A
 * sequence too long for the target's context becomes p->error. */
static drift_status score_target(const tf_stack *b, const tf_stack *t, const int32_t *seq, size_t L, size_t k0,
                                 const float *lb, float *lt, drift_tokdiv_prompt *p, drift_tokdiv_acc *pool_wl,
                                 drift_tokdiv_acc *pool_all, drift_error *err) {
    int nv = drift_model_get_info(b->m)->n_vocab;
    int ctx_t = drift_model_get_info(t->m)->n_ctx_train;
    p->n_prompt_tokens = (int)k0;
    p->n_answer_tokens = (int)(L - k0);
    p->first_diff = -1;
    if (L > (size_t)ctx_t) {
        p->error = util_asprintf("%zu tokens (prompt %zu + answer %zu) do not fit the target's context of %d", L, k0,
                                 L - k0, ctx_t);
        return p->error ? DRIFT_OK : drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    drift_tokdiv_acc acc = {0};
    drift_status rc = seq_logits(t->m, seq, L, k0, lt, err);
    for (size_t r = 0; !rc && r < L - k0; r++) {
        drift_tokdiv_pos pos = drift_tokdiv_compare(lb + r * (size_t)nv, lt + r * (size_t)nv, nv, seq[k0 + r]);
        rc = drift_tokdiv_acc_add(&acc, &pos, err);
        if (!rc && p->first_diff < 0 && pos.top_base != pos.top_target) {
            p->first_diff = (int)r;
            p->first_base_id = pos.top_base;
            p->first_target_id = pos.top_target;
        }
    }
    if (!rc) rc = drift_tokdiv_acc_summary(&acc, &p->s, err);
    if (!rc && pool_wl) rc = drift_tokdiv_acc_merge(pool_wl, &acc, err);
    if (!rc) rc = drift_tokdiv_acc_merge(pool_all, &acc, err);
    if (!rc && p->first_diff >= 0) {
        p->first_base_text = tok_text(b->m, p->first_base_id);
        p->first_target_text = tok_text(t->m, p->first_target_id);
    }
    drift_tokdiv_acc_clear(&acc);
    return rc;
}

/* Baseline rows for seq[k0..L) into *lb (grown as needed, with *lt the same
 * size); the sequence must fit the baseline's context (else *why is set). */
static drift_status base_rows(const tf_stack *b, const int32_t *seq, size_t L, size_t k0, float **lb, float **lt,
                              size_t *cap, const char **why, drift_error *err) {
    size_t nv = (size_t)drift_model_get_info(b->m)->n_vocab;
    *why = NULL;
    if (L > (size_t)drift_model_get_info(b->m)->n_ctx_train) {
        *why = "the sequence does not fit the baseline's context";
        return DRIFT_OK;
    }
    size_t need = (L - k0) * nv;
    if (need > *cap) {
        float *a = realloc(*lb, need * sizeof *a);
        if (!a) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        *lb = a;
        float *c = realloc(*lt, need * sizeof *c);
        if (!c) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        *lt = c;
        *cap = need;
    }
    return seq_logits(b->m, seq, L, k0, *lb, err);
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
        if (o->workloads && !(o->workloads & (1u << w))) continue;
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

typedef struct tf_target {
    tf_stack k;
    drift_tokdiv_acc pool[DRIFT_WL_COUNT], all;
} tf_target;

typedef struct runs_ctx {
    const char *baseline_label;
    tf_stack base;
    tf_target *tg;        /* (n_tg) */
    size_t n_tg;
    drift_tokdiv_report *out; /* (n_tg) */
    json_t *templates;
    float *lb, *lt;       /* baseline rows of the current prompt; a target's */
    size_t cap;
} runs_ctx;

static const char *api_name(drift_api a) {
    return a == DRIFT_API_CHAT ? "chat" : "completions";
}

/* Sets the prompt's identity in every report; *p_i = the index it got. */
static drift_status prompt_add_all(runs_ctx *c, const drift_scored *row, size_t *p_i, drift_error *err) {
    *p_i = c->out[0].n_prompts;
    for (size_t k = 0; k < c->n_tg; k++) {
        drift_tokdiv_prompt *p = &c->out[k].prompts[c->out[k].n_prompts++];
        p->workload = row->workload;
        p->first_diff = -1;
        if (!(p->prompt_id = util_strdup(row->prompt_id))) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    return DRIFT_OK;
}

/* The same error for one prompt in every report. */
static drift_status prompt_error_all(runs_ctx *c, size_t i, int np, const char *why, drift_error *err) {
    for (size_t k = 0; k < c->n_tg; k++) {
        drift_tokdiv_prompt *p = &c->out[k].prompts[i];
        p->n_prompt_tokens = np;
        if (!(p->error = util_strdup(why))) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    return DRIFT_OK;
}

/* One stored answer of the baseline, forced through every target. */
static drift_status runs_prompt(runs_ctx *c, drift_store *st, const drift_scored *row, drift_error *err) {
    drift_answer ans;
    drift_prompt pm;
    memset(&ans, 0, sizeof ans);
    memset(&pm, 0, sizeof pm);
    int32_t *pt = NULL, *pt2 = NULL, *at = NULL, *seq = NULL;
    size_t np = 0, np2 = 0, na = 0, pi = 0;
    char *rendered = NULL;
    int from_lp = 0;
    int nv = drift_model_get_info(c->base.m)->n_vocab;
    drift_status rc = prompt_add_all(c, row, &pi, err);
    if (!rc) rc = drift_store_response_get(st, row->response_id, &ans, &pm, err);
    const char *tid = NULL;
    if (!rc && !(rendered = drift_prompt_render(&pm, drift_target_api(c->base.t), &tid)))
        rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    const char *recorded = rc ? "" : run_template(c->templates, row->workload);
    if (!rc && *recorded && tid && strcmp(recorded, tid) != 0)
        rc = drift_error_set(err, DRIFT_ERR_MISMATCH,
                             "run '%s' rendered %s prompts with template %s; this build renders %s: the prompts "
                             "would not be the ones the run sent",
                             c->baseline_label, drift_workload_name(row->workload), recorded, tid);
    if (!rc) rc = drift_target_prompt_tokens(c->base.t, rendered, &pt, &np, err);
    if (!rc) {
        int got = logprob_ids(ans.logprobs_json, nv, &at, &na);
        if (got < 0) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        else if (got) from_lp = 1;
        else if (ans.text && *ans.text)
            rc = drift_model_tokenize(c->base.m, ans.text, strlen(ans.text), 0, 0, &at, &na, err);
    }
    const char *why = NULL;
    if (!rc && na == 0) why = "empty answer: no token to score";
    else if (!rc && np == 0) why = "empty prompt: no token to start from";
    if (!rc && !why) {
        if (!(seq = malloc((np + na) * sizeof *seq))) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        else {
            memcpy(seq, pt, np * sizeof *seq);
            memcpy(seq + np, at, na * sizeof *seq);
            rc = base_rows(&c->base, seq, np + na, np, &c->lb, &c->lt, &c->cap, &why, err);
        }
    }
    if (!rc && why) rc = prompt_error_all(c, pi, (int)np, why, err);
    for (size_t k = 0; !rc && !why && k < c->n_tg; k++) {
        tf_target *t = &c->tg[k];
        drift_tokdiv_prompt *p = &c->out[k].prompts[pi];
        free(pt2);
        pt2 = NULL;
        rc = drift_target_prompt_tokens(t->k.t, rendered, &pt2, &np2, err);
        if (!rc && (np != np2 || memcmp(pt, pt2, np * sizeof *pt) != 0))
            rc = drift_error_set(err, DRIFT_ERR_MISMATCH,
                                 "prompt '%s': the stacks of '%s' and '%s' tokenize it differently (%zu and %zu "
                                 "tokens): teacher forcing needs one token sequence for both",
                                 row->prompt_id, c->baseline_label, c->out[k].target, np, np2);
        p->tokens_from_logprobs = from_lp;
        if (!rc) rc = score_target(&c->base, &t->k, seq, np + na, np, c->lb, c->lt, p, &t->pool[row->workload], &t->all, err);
    }
    if (rc) drift_error_prefix(err, "prompt '%s': ", row->prompt_id);
    for (size_t k = 0; !rc && k < c->n_tg; k++) {
        if (c->out[k].prompts[pi].error) c->out[k].n_skipped++;
        else c->out[k].present[row->workload] = 1;
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

drift_status drift_tokdiv_runs_many(drift_store *st, const char *baseline_label, const char *const *target_labels,
                                    size_t n_targets, const drift_tokdiv_opts *o, drift_tokdiv_report **out,
                                    drift_error *err) {
    drift_tokdiv_opts dflt;
    if (!o) {
        drift_tokdiv_opts_default(&dflt);
        o = &dflt;
    }
    *out = NULL;
    if (n_targets == 0) return drift_error_set(err, DRIFT_ERR_INVALID, "no target run given");
    double t0 = util_now_ms();
    runs_ctx c;
    memset(&c, 0, sizeof c);
    c.baseline_label = baseline_label;
    c.n_tg = n_targets;
    c.tg = calloc(n_targets, sizeof *c.tg);
    c.out = calloc(n_targets, sizeof *c.out);
    drift_run_info rb = {0};
    drift_scored_set set = {0};
    unsigned char *pick = NULL;
    char *base_spec = NULL;
    drift_status rc = c.tg && c.out ? DRIFT_OK : drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    if (!rc) rc = drift_store_run_get(st, baseline_label, &rb, err);
    if (!rc) {
        char *who = util_asprintf("baseline run '%s'", baseline_label);
        rc = who ? stack_open(&c.base, rb.target, o->models_dir, who, &base_spec, err)
                 : drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        free(who);
    }
    for (size_t k = 0; k < n_targets && !rc; k++) {
        drift_tokdiv_report *r = &c.out[k];
        drift_run_info rt = {0};
        r->baseline = util_strdup(baseline_label);
        r->target = util_strdup(target_labels[k]);
        r->baseline_spec = util_strdup(base_spec);
        r->api = util_strdup(api_name(drift_target_api(c.base.t)));
        r->limit = o->limit;
        r->seed = o->seed;
        if (!r->baseline || !r->target || !r->baseline_spec || !r->api)
            rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        if (!rc) rc = drift_store_run_get(st, target_labels[k], &rt, err);
        char *who = rc ? NULL : util_asprintf("target run '%s'", target_labels[k]);
        if (!rc && !who) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        if (!rc) rc = stack_open(&c.tg[k].k, rt.target, o->models_dir, who, &r->target_spec, err);
        if (!rc) rc = same_vocab(&c.base, &c.tg[k].k, who, err);
        if (!rc && drift_target_api(c.base.t) != drift_target_api(c.tg[k].k.t))
            rc = drift_error_set(err, DRIFT_ERR_MISMATCH,
                                 "baseline run '%s' used api=%s and target run '%s' api=%s: their prompts differ, so "
                                 "there is no one token sequence to force",
                                 baseline_label, api_name(drift_target_api(c.base.t)), target_labels[k],
                                 api_name(drift_target_api(c.tg[k].k.t)));
        free(who);
        drift_run_info_clear(&rt);
    }
    if (!rc && !(c.templates = json_loads(rb.templates_json ? rb.templates_json : "{}", 0, NULL)))
        c.templates = json_object();
    if (!rc) { /* a system prompt (request control, target.h) is not re-created here: its tokens would be missing */
        json_t *dec = json_loads(rb.decoding_json ? rb.decoding_json : "{}", 0, NULL);
        if (json_object_get(json_object_get(dec, "request"), "system_prompt"))
            rc = drift_error_set(err, DRIFT_ERR_UNSUPPORTED,
                                 "baseline run '%s' was asked with a system prompt (--system): teacher forcing does not "
                                 "re-create it yet, so its prompts would not be the ones the run sent",
                                 baseline_label);
        json_decref(dec);
    }
    if (!rc) rc = drift_store_load_scored(st, rb.id, &set, err);
    size_t n_pick = 0;
    if (!rc && !(pick = pick_rows(&set, o, &n_pick))) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    if (!rc && n_pick == 0)
        rc = drift_error_set(err, DRIFT_ERR_INVALID, "baseline run '%s' has no answers%s to score", baseline_label,
                             o->workloads ? " of the workloads asked for" : "");
    for (size_t k = 0; k < n_targets && !rc; k++)
        if (!(c.out[k].prompts = calloc(n_pick, sizeof *c.out[k].prompts)))
            rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    size_t done = 0;
    for (size_t i = 0; i < set.n && !rc; i++) {
        if (!pick[i]) continue;
        if (o->cancel && o->cancel(o->cancel_user)) {
            rc = drift_error_set(err, DRIFT_ERR_CANCELLED, "divergence stopped after %zu of %zu prompts", done, n_pick);
            break;
        }
        rc = runs_prompt(&c, st, &set.rows[i], err);
        done++;
        if (o->progress) o->progress(o->progress_user, "divergence", done, n_pick);
    }
    for (size_t k = 0; k < n_targets && !rc; k++) {
        drift_tokdiv_report *r = &c.out[k];
        for (int w = 0; w < DRIFT_WL_COUNT && !rc; w++)
            if (r->present[w]) rc = drift_tokdiv_acc_summary(&c.tg[k].pool[w], &r->wl[w], err);
        if (!rc) rc = drift_tokdiv_acc_summary(&c.tg[k].all, &r->overall, err);
        r->elapsed_ms = util_now_ms() - t0;
    }
    free(pick);
    free(base_spec);
    free(c.lb);
    free(c.lt);
    drift_scored_set_clear(&set);
    json_decref(c.templates);
    drift_run_info_clear(&rb);
    for (size_t k = 0; c.tg && k < n_targets; k++) {
        for (int w = 0; w < DRIFT_WL_COUNT; w++) drift_tokdiv_acc_clear(&c.tg[k].pool[w]);
        drift_tokdiv_acc_clear(&c.tg[k].all);
        stack_close(&c.tg[k].k);
    }
    stack_close(&c.base);
    free(c.tg);
    if (rc) drift_tokdiv_reports_free(c.out, c.out ? n_targets : 0);
    else *out = c.out;
    return rc;
}

drift_status drift_tokdiv_runs(drift_store *st, const char *baseline_label, const char *target_label,
                               const drift_tokdiv_opts *o, drift_tokdiv_report *out, drift_error *err) {
    memset(out, 0, sizeof *out);
    drift_tokdiv_report *r = NULL;
    drift_status rc = drift_tokdiv_runs_many(st, baseline_label, &target_label, 1, o, &r, err);
    if (rc) return rc;
    *out = r[0];
    free(r);
    return DRIFT_OK;
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
    tf_stack b, t;
    memset(&b, 0, sizeof b);
    memset(&t, 0, sizeof t);
    drift_tokdiv_acc all = {0};
    int32_t *toks = NULL, *bos = NULL, *chunk = NULL;
    float *lb = NULL, *lt = NULL;
    size_t nt = 0, nbos = 0, cap = 0;
    drift_status rc = DRIFT_OK;
    out->baseline = util_strdup(baseline_spec);
    out->target = util_strdup(target_spec);
    if (!out->baseline || !out->target) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    if (!rc && ctx < 4) rc = drift_error_set(err, DRIFT_ERR_INVALID, "--ctx %d: at least 4 tokens", ctx);
    if (!rc) rc = stack_open(&b, baseline_spec, o->models_dir, "baseline", &out->baseline_spec, err);
    if (!rc) rc = stack_open(&t, target_spec, o->models_dir, "target", &out->target_spec, err);
    if (!rc) rc = same_vocab(&b, &t, "text", err);
    if (!rc) {
        int cb = drift_model_get_info(b.m)->n_ctx_train, ct = drift_model_get_info(t.m)->n_ctx_train;
        int cm = cb < ct ? cb : ct;
        if (ctx > cm) rc = drift_error_set(err, DRIFT_ERR_INVALID, "--ctx %d exceeds the models' context length %d", ctx, cm);
    }
    /* as llama-perplexity: the model's BOS before the text; the empty text
     * tokenizes to just that BOS when the model adds one */
    if (!rc) rc = drift_model_tokenize(b.m, text, len, -1, 0, &toks, &nt, err);
    if (!rc) rc = drift_model_tokenize(b.m, "", 0, -1, 0, &bos, &nbos, err);
    out->n_text_tokens = nt;
    if (!rc && nt < 2 * (size_t)ctx)
        rc = drift_error_set(err, DRIFT_ERR_INVALID,
                             "the text tokenizes to %zu tokens; a context of %d needs at least %d (two chunks)", nt,
                             ctx, 2 * ctx);
    size_t n_chunk = rc ? 0 : nt / (size_t)ctx;
    size_t k0 = (size_t)(ctx / 2) + 1; /* scored: the logits at ctx/2 .. ctx-2, predicting tokens k0 .. ctx-1 */
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
        p->first_diff = -1;
        if (!(p->prompt_id = util_asprintf("chunk %zu", i + 1))) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        const char *why = NULL;
        if (!rc) rc = base_rows(&b, chunk, (size_t)ctx, k0, &lb, &lt, &cap, &why, err);
        if (!rc) rc = score_target(&b, &t, chunk, (size_t)ctx, k0, lb, lt, p, NULL, &all, err);
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
    free(lb);
    free(lt);
    stack_close(&b);
    stack_close(&t);
    if (rc) drift_tokdiv_report_clear(out);
    return rc;
}
