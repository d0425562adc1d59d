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
 * cache maps a file shared by several stacks once.
 *
 * HTTP stacks (runs mode): the server is sent the prompt followed by the
 * baseline's answer and returns the top-K logprobs of every token of it
 * (drift_target_answer_logprobs, prompt_logprobs.h): api=completions, the
 * prompt text then the answer text (vLLM's prompt_logprobs, else OpenAI's
 * echo + logprobs; the way that answered is kept for the stack); api=chat,
 * the messages with the answer as a last assistant message left open
 * (vLLM's continue_final_message), so the server applies its own chat
 * template as it did for the run. A server that offers none ends the call
 * with DRIFT_ERR_UNSUPPORTED. The answer's positions are those of tokens that
 * start inside the answer text; the two sides' positions are paired by
 * their byte offset in the answer and their token (id where both sides
 * have ids, else the same span of the answer); a position either side lacks is counted in
 * n_unaligned, not scored. A pair with an HTTP side is compared by
 * drift_tokdiv_compare_top over top-K lists (an embedded side reduced to
 * its top K from its logits, in double as the server does): a lower bound
 * of the full KL (divergence.h). Two embedded stacks keep the exact
 * full-vocabulary path. The report names the method ("logits", "top-K").
 *
 * Request control (target.h) recorded in the baseline's decoding record
 * ("request") is re-created: its system prompt is given to every stack
 * (the sequence forced is the baseline's: its prompt as it was sent) and
 * its prompt template renders the prompts (drift_prompt_render_custom,
 * checked against the template id the run recorded); an HTTP stack also
 * gets the extra body its own run recorded (e.g. vLLM's
 * chat_template_kwargs, which shape the prompt). Header values are never
 * stored: an HTTP stack is asked with the target's default credentials. */
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driftbench/teacher_forced.h"
#include "driftbench/model.h"
#include "driftbench/prompt_logprobs.h"
#include "driftbench/store.h"
#include "driftbench/suite.h"
#include "driftbench/target.h"
#include "util/util.h"

#define TF_PIECE 64

static const char *TF_HTTP_MSG =
    "teacher forcing needs an embedded stack (embedded:PATH.gguf?...) or an HTTP server that returns prompt "
    "logprobs (runs mode)";
static const char *TF_TEXT_HTTP_MSG =
    "the raw-text form needs embedded stacks (embedded:PATH.gguf?...); HTTP servers are compared over runs";

void drift_tokdiv_opts_default(drift_tokdiv_opts *o) {
    memset(o, 0, sizeof *o);
    o->seed = 1;
}

/* ---- the stacks ---- */

typedef struct tf_stack {
    drift_target *t;
    const drift_model *m;      /* NULL for an HTTP stack */
    int http;
    drift_plp_method method;   /* HTTP: the way the server answered (AUTO until it has) */
    int k;                     /* HTTP: alternatives asked per token */
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

/* Opens a stack; sys (NULL: none) is the system prompt its requests get,
 * extra (NULL: none) an HTTP stack's extra body (target.h). */
static drift_status stack_open(tf_stack *k, const char *spec, const char *models_dir, const char *who, char **spec_used,
                               int allow_http, drift_plp_method method, const char *sys, const char *extra,
                               drift_error *err) {
    memset(k, 0, sizeof *k);
    int http = !strncmp(spec, "http://", 7) || !strncmp(spec, "https://", 8);
    if (http && !allow_http) return drift_error_set(err, DRIFT_ERR_UNSUPPORTED, "%s is '%s': %s", who, spec, TF_TEXT_HTTP_MSG);
    if (http) {
        drift_target_opts to;
        drift_target_opts_default(&to);
        to.concurrency = 1;
        to.request.system_prompt = sys;
        to.request.extra_body_json = extra;
        drift_status rc = drift_target_open(spec, &to, &k->t, err);
        if (rc) {
            k->t = NULL;
            return drift_error_prefix(err, "%s: ", who);
        }
        k->http = 1;
        k->method = method;
        k->k = DRIFT_PLP_MAX_TOP;
        *spec_used = util_strdup(spec);
        return *spec_used ? DRIFT_OK : drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    if (strncmp(spec, "embedded:", 9) != 0)
        return drift_error_set(err, DRIFT_ERR_UNSUPPORTED, "%s is '%s': %s", who, spec, TF_HTTP_MSG);
    drift_status rc = resolve_spec(spec, models_dir, who, spec_used, err);
    if (rc) return rc;
    drift_target_opts to;
    drift_target_opts_default(&to);
    to.concurrency = 1;
    to.request.system_prompt = sys;
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
    const char *prompt_template; /* the baseline's request control (NULL: the workloads' own) */
    float *lb, *lt;       /* baseline rows of the current prompt; a target's */
    size_t cap;
    int any_http;         /* a pair with an HTTP side: runs_prompt_top */
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

/* The start of one baseline answer's work, for either path: its prompt added
 * to every report (*p_i its index), the stored answer and prompt read, the
 * prompt rendered as the baseline's target sends it (*rendered, malloc'd)
 * and checked against the template the run recorded. */
static drift_status row_begin(runs_ctx *c, drift_store *st, const drift_scored *row, size_t *p_i, drift_answer *ans,
                              drift_prompt *pm, char **rendered, drift_error *err) {
    drift_status rc = prompt_add_all(c, row, p_i, err);
    if (!rc) rc = drift_store_response_get(st, row->response_id, ans, pm, err);
    char tid[DRIFT_TEMPLATE_ID_MAX] = "";
    if (!rc && !(*rendered = drift_prompt_render_custom(pm, drift_target_api(c->base.t), c->prompt_template, tid)))
        rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    const char *recorded = rc ? "" : run_template(c->templates, row->workload);
    if (!rc && *recorded && *tid && strcmp(recorded, tid) != 0)
        rc = drift_error_set(err, DRIFT_ERR_MISMATCH,
                             "run '%s' rendered %s prompts with template %s; this build renders %s: the prompts "
                             "would not be the ones the run sent",
                             c->baseline_label, drift_workload_name(row->workload), recorded, tid);
    return rc;
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
    drift_status rc = row_begin(c, st, row, &pi, &ans, &pm, &rendered, err);
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

/* ---- runs with an HTTP side: top-K lists paired by answer offset ---- */

/* One stack's view of the answer's positions, in answer order. */
typedef struct tf_side {
    size_t n;
    size_t *off;                  /* (n) byte offset of the token in the answer */
    size_t *end;                  /* (n) where it ends: the next position's offset, the answer's length last */
    int32_t *tok;                 /* (n) the forced token's id, -1 when unknown */
    char **text;                  /* (n) its text */
    double *lp_tok;               /* (n) its logprob */
    int *nt;                      /* (n) alternatives */
    int32_t *ids;                 /* (n * TF_K) */
    char **tt;                    /* (n * TF_K) */
    double *lp;                   /* (n * TF_K) */
    int has_ids;                  /* every alternative has its id */
} tf_side;
#define TF_K (DRIFT_PLP_MAX_TOP + 1)

static void side_clear(tf_side *s) {
    for (size_t i = 0; i < s->n; i++) {
        free(s->text[i]);
        for (int k = 0; k < s->nt[i]; k++) free(s->tt[i * TF_K + (size_t)k]);
    }
    free(s->off);
    free(s->end);
    free(s->tok);
    free(s->text);
    free(s->lp_tok);
    free(s->nt);
    free(s->ids);
    free(s->tt);
    free(s->lp);
    memset(s, 0, sizeof *s);
}

static int side_alloc(tf_side *s, size_t n) {
    size_t m = n ? n : 1;
    s->off = calloc(m, sizeof *s->off);
    s->end = calloc(m, sizeof *s->end);
    s->tok = calloc(m, sizeof *s->tok);
    s->text = calloc(m, sizeof *s->text);
    s->lp_tok = calloc(m, sizeof *s->lp_tok);
    s->nt = calloc(m, sizeof *s->nt);
    s->ids = calloc(m * TF_K, sizeof *s->ids);
    s->tt = calloc(m * TF_K, sizeof *s->tt);
    s->lp = calloc(m * TF_K, sizeof *s->lp);
    return s->off && s->end && s->tok && s->text && s->lp_tok && s->nt && s->ids && s->tt && s->lp ? 0 : -1;
}

/* Each position's end: the next one's offset, alen for the last. */
static void side_ends(tf_side *s, size_t alen) {
    for (size_t i = 0; i < s->n; i++) s->end[i] = i + 1 < s->n ? s->off[i + 1] : alen;
}

/* The side of an embedded model m over answer tokens at (na) whose logit
 * rows are rows (na x n_vocab): each row's log-softmax in double, its top
 * k ids (the lowest id first on ties), the answer's byte offsets from the
 * detokenized prefixes. */
static drift_status side_embedded(const drift_model *m, const int32_t *at, size_t na, const float *rows, int k,
                                  tf_side *s, drift_error *err) {
    int nv = drift_model_get_info(m)->n_vocab;
    double *ls = malloc((size_t)nv * sizeof *ls);
    if (!ls || side_alloc(s, na)) {
        free(ls);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    s->has_ids = 1;
    drift_status rc = DRIFT_OK;
    for (size_t r = 0; r < na && !rc; r++) {
        size_t L = 0;
        free(drift_model_detokenize(m, at, r, &L));
        s->off[r] = L;
        s->tok[r] = at[r];
        s->n = r + 1;
        if (!(s->text[r] = tok_text(m, at[r]))) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        drift_log_softmax(rows + r * (size_t)nv, nv, ls);
        s->lp_tok[r] = ls[at[r]];
        int32_t *ids = s->ids + r * TF_K;
        double *lp = s->lp + r * TF_K;
        int n = 0;
        for (int v = 0; v < nv; v++) {
            if (n == k && !(ls[v] > lp[k - 1])) continue;
            int i = n < k ? n++ : k - 1;
            while (i > 0 && ls[v] > lp[i - 1]) {
                ids[i] = ids[i - 1];
                lp[i] = lp[i - 1];
                i--;
            }
            ids[i] = v;
            lp[i] = ls[v];
        }
        s->nt[r] = n;
        for (int i = 0; i < n && !rc; i++)
            if (!(s->tt[r * TF_K + (size_t)i] = tok_text(m, ids[i])))
                rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    size_t total = 0;
    if (!rc) free(drift_model_detokenize(m, at, na, &total));
    side_ends(s, total);
    free(ls);
    return rc;
}

/* The side of an HTTP stack: the server's logprobs of the answer after the
 * prompt (drift_target_answer_logprobs), the tokens that start inside the
 * answer. The stack's way is found on its first call and kept; a server
 * refusing 20 alternatives is asked for 5 (OpenAI's legacy limit). */
static drift_status side_http(tf_stack *k, const char *prompt, const char *answer, tf_side *s, drift_error *err) {
    size_t alen = strlen(answer);
    drift_plp_result r;
    drift_status rc = drift_target_answer_logprobs(k->t, prompt, answer, k->k, k->method, &r, err);
    if (rc == DRIFT_ERR_UNSUPPORTED && k->k > 5) {
        drift_error e2 = {0};
        if (!drift_target_answer_logprobs(k->t, prompt, answer, 5, k->method, &r, &e2)) {
            rc = DRIFT_OK;
            k->k = 5;
        }
    }
    if (rc) return rc;
    k->method = r.method;
    size_t n = 0;
    for (size_t i = 0; i < r.n; i++) n += r.toks[i].has_lp && r.toks[i].offset < alen;
    if (side_alloc(s, n)) {
        drift_plp_result_clear(&r);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    s->has_ids = r.method == DRIFT_PLP_VLLM;
    for (size_t i = 0; i < r.n && !rc; i++) {
        drift_plp_token *t = &r.toks[i];
        if (!(t->has_lp && t->offset < alen)) continue; /* SIZE_MAX: not in the answer */
        size_t j = s->n++;
        s->off[j] = t->offset;
        s->tok[j] = t->id;
        s->text[j] = util_strdup(t->text ? t->text : "");
        s->lp_tok[j] = t->logprob;
        s->nt[j] = t->n_top < TF_K ? t->n_top : TF_K;
        for (int q = 0; q < s->nt[j]; q++) {
            s->ids[j * TF_K + (size_t)q] = t->top_id[q];
            s->lp[j * TF_K + (size_t)q] = t->top_logprob[q];
            s->tt[j * TF_K + (size_t)q] = util_strdup(t->top_text[q] ? t->top_text[q] : "");
            if (!s->tt[j * TF_K + (size_t)q] || t->top_id[q] < 0) s->has_ids &= t->top_id[q] >= 0;
            if (!s->tt[j * TF_K + (size_t)q]) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        }
        if (!s->text[j]) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    side_ends(s, alen);
    drift_plp_result_clear(&r);
    return rc;
}

static drift_tokdiv_top side_top(const tf_side *s, size_t i) {
    drift_tokdiv_top t = {(size_t)s->nt[i], s->ids + i * TF_K, (const char *const *)(s->tt + i * TF_K),
                          s->lp + i * TF_K, s->lp_tok[i]};
    return t;
}

/* Pairs b's and t's positions by answer offset and token and scores each
 * pair into p and the pools (see the top). */
static drift_status score_sides(const tf_side *b, const tf_side *t, drift_tokdiv_prompt *p, drift_tokdiv_acc *pool_wl,
                                drift_tokdiv_acc *pool_all, drift_error *err) {
    drift_tokdiv_acc acc = {0};
    int by_id = b->has_ids && t->has_ids;
    size_t i = 0, j = 0, paired = 0;
    drift_status rc = DRIFT_OK;
    p->first_diff = -1;
    while (i < b->n && j < t->n && !rc) {
        if (b->off[i] < t->off[j]) {
            i++;
            continue;
        }
        if (t->off[j] < b->off[i]) {
            j++;
            continue;
        }
        /* the same token: by id where both sides have ids, else the same
         * span of the answer (a server's token strings may be vocabulary
         * pieces such as "Ġthe", not the text) */
        int same = b->tok[i] >= 0 && t->tok[j] >= 0 ? b->tok[i] == t->tok[j] : b->end[i] == t->end[j];
        if (same && b->nt[i] > 0 && t->nt[j] > 0) {
            drift_tokdiv_top tb = side_top(b, i), tt = side_top(t, j);
            drift_tokdiv_pos pos = drift_tokdiv_compare_top(&tb, &tt, by_id);
            rc = drift_tokdiv_acc_add(&acc, &pos, err);
            paired++;
            if (!rc && p->first_diff < 0 && pos.top_base != pos.top_target && isfinite(pos.kl)) {
                p->first_diff = (int)i;
                p->first_base_id = by_id ? pos.top_base : -1;
                p->first_target_id = by_id ? pos.top_target : -1;
                p->first_base_text = util_utf8_clean(tb.texts[0], strlen(tb.texts[0]));
                p->first_target_text = util_utf8_clean(tt.texts[0], strlen(tt.texts[0]));
                if (!p->first_base_text || !p->first_target_text) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
            }
        }
        i++;
        j++;
    }
    p->n_answer_tokens = (int)paired;
    p->n_unaligned = (int)(b->n - paired);
    if (!rc && paired == 0) {
        p->error = util_strdup("no answer token of the baseline has its counterpart in the target's tokens");
        if (!p->error) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    if (!rc && !p->error) rc = drift_tokdiv_acc_summary(&acc, &p->s, err);
    if (!rc && !p->error && pool_wl) rc = drift_tokdiv_acc_merge(pool_wl, &acc, err);
    if (!rc && !p->error) rc = drift_tokdiv_acc_merge(pool_all, &acc, err);
    drift_tokdiv_acc_clear(&acc);
    return rc;
}

/* The side of an embedded stack k over prompt tokens pt (np) + answer
 * tokens at (na): its logits, then side_embedded. *why when the sequence
 * does not fit its context. */
static drift_status side_of_embedded(const tf_stack *k, const int32_t *pt, size_t np, const int32_t *at, size_t na,
                                     int kk, tf_side *s, const char **why, drift_error *err) {
    const drift_model *m = k->m;
    size_t nv = (size_t)drift_model_get_info(m)->n_vocab, L = np + na;
    *why = NULL;
    if (L > (size_t)drift_model_get_info(m)->n_ctx_train) {
        *why = "the sequence does not fit the stack's context";
        return DRIFT_OK;
    }
    int32_t *seq = malloc(L * sizeof *seq);
    float *rows = malloc(na * nv * sizeof *rows);
    drift_status rc = seq && rows ? DRIFT_OK : drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    if (!rc) {
        memcpy(seq, pt, np * sizeof *seq);
        memcpy(seq + np, at, na * sizeof *seq);
        rc = seq_logits(m, seq, L, np, rows, err);
    }
    if (!rc) rc = side_embedded(m, at, na, rows, kk, s, err);
    free(seq);
    free(rows);
    return rc;
}

/* The answer tokens of an embedded stack: the stored ids when the baseline
 * is this embedded run (from_lp), else the answer text tokenized. */
static drift_status answer_tokens(const tf_stack *k, const drift_answer *ans, int use_ids, int32_t **at, size_t *na,
                                  int *from_lp, drift_error *err) {
    *at = NULL;
    *na = 0;
    *from_lp = 0;
    if (use_ids) {
        int got = logprob_ids(ans->logprobs_json, drift_model_get_info(k->m)->n_vocab, at, na);
        if (got < 0) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        if (got) {
            *from_lp = 1;
            return DRIFT_OK;
        }
    }
    if (ans->text && *ans->text) return drift_model_tokenize(k->m, ans->text, strlen(ans->text), 0, 0, at, na, err);
    return DRIFT_OK;
}

/* The side of stack k (embedded or HTTP) for one prompt. */
static drift_status side_of(tf_stack *k, int is_base, const char *rendered, const drift_answer *ans, int kk, tf_side *s,
                            int *from_lp, const char **why, drift_error *err) {
    *why = NULL;
    if (k->http) return side_http(k, rendered, ans->text ? ans->text : "", s, err);
    int32_t *pt = NULL, *at = NULL;
    size_t np = 0, na = 0;
    drift_status rc = drift_target_prompt_tokens(k->t, rendered, &pt, &np, err);
    if (!rc) rc = answer_tokens(k, ans, is_base, &at, &na, from_lp, err);
    if (!rc && na == 0) *why = "empty answer: no token to score";
    else if (!rc && np == 0) *why = "empty prompt: no token to start from";
    if (!rc && !*why) rc = side_of_embedded(k, pt, np, at, na, kk, s, why, err);
    free(pt);
    free(at);
    return rc;
}

/* One stored answer of the baseline against every target, some pair having
 * an HTTP side; a pair of two embedded stacks keeps the full logits. */
static drift_status runs_prompt_top(runs_ctx *c, drift_store *st, const drift_scored *row, drift_error *err) {
    drift_answer ans;
    drift_prompt pm;
    memset(&ans, 0, sizeof ans);
    memset(&pm, 0, sizeof pm);
    size_t pi = 0;
    char *rendered = NULL;
    tf_side bs = {0};
    int from_lp = 0, base_done = 0;
    drift_status rc = row_begin(c, st, row, &pi, &ans, &pm, &rendered, err);
    const char *why = NULL;
    if (!rc && (!ans.text || !*ans.text)) why = "empty answer: no token to score";
    for (size_t k = 0; !rc && k < c->n_tg; k++) {
        tf_target *t = &c->tg[k];
        drift_tokdiv_prompt *p = &c->out[k].prompts[pi];
        if (why) {
            if (!(p->error = util_strdup(why))) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
            continue;
        }
        if (!c->base.http && !t->k.http) { /* two embedded stacks: the exact path */
            int32_t *pt = NULL, *pt2 = NULL, *at = NULL, *seq = NULL;
            size_t np = 0, np2 = 0, na = 0;
            const char *w = NULL;
            int flp = 0;
            rc = drift_target_prompt_tokens(c->base.t, rendered, &pt, &np, err);
            if (!rc) rc = drift_target_prompt_tokens(t->k.t, rendered, &pt2, &np2, err);
            if (!rc && (np != np2 || memcmp(pt, pt2, np * sizeof *pt) != 0))
                rc = drift_error_set(err, DRIFT_ERR_MISMATCH,
                                     "prompt '%s': the stacks of '%s' and '%s' tokenize it differently: teacher "
                                     "forcing needs one token sequence for both",
                                     row->prompt_id, c->baseline_label, c->out[k].target);
            if (!rc) rc = answer_tokens(&c->base, &ans, 1, &at, &na, &flp, err);
            if (!rc && (na == 0 || np == 0)) w = na == 0 ? "empty answer: no token to score" : "empty prompt: no token to start from";
            if (!rc && !w && !(seq = malloc((np + na) * sizeof *seq))) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
            if (!rc && !w) {
                memcpy(seq, pt, np * sizeof *seq);
                memcpy(seq + np, at, na * sizeof *seq);
                rc = base_rows(&c->base, seq, np + na, np, &c->lb, &c->lt, &c->cap, &w, err);
            }
            p->tokens_from_logprobs = flp;
            if (!rc && w) {
                p->n_prompt_tokens = (int)np;
                if (!(p->error = util_strdup(w))) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
            } else if (!rc) {
                rc = score_target(&c->base, &t->k, seq, np + na, np, c->lb, c->lt, p, &t->pool[row->workload], &t->all, err);
            }
            free(pt);
            free(pt2);
            free(at);
            free(seq);
            continue;
        }
        const char *bwhy = NULL, *twhy = NULL;
        if (!base_done) {
            rc = side_of(&c->base, 1, rendered, &ans, DRIFT_PLP_MAX_TOP, &bs, &from_lp, &bwhy, err);
            base_done = 1;
            if (!rc && bwhy) why = bwhy;
        }
        if (!rc && why) {
            if (!(p->error = util_strdup(why))) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
            continue;
        }
        tf_side ts = {0};
        int dummy = 0;
        if (!rc) rc = side_of(&t->k, 0, rendered, &ans, DRIFT_PLP_MAX_TOP, &ts, &dummy, &twhy, err);
        p->tokens_from_logprobs = from_lp;
        p->n_prompt_tokens = -1;
        if (!rc && twhy) {
            if (!(p->error = util_strdup(twhy))) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        } else if (!rc) {
            rc = score_sides(&bs, &ts, p, &t->pool[row->workload], &t->all, err);
        }
        side_clear(&ts);
    }
    /* a server without prompt logprobs is about the stack, not this prompt */
    if (rc && rc != DRIFT_ERR_UNSUPPORTED) drift_error_prefix(err, "prompt '%s': ", row->prompt_id);
    for (size_t k = 0; !rc && k < c->n_tg; k++) {
        if (c->out[k].prompts[pi].error) c->out[k].n_skipped++;
        else c->out[k].present[row->workload] = 1;
    }
    side_clear(&bs);
    free(rendered);
    drift_answer_clear(&ans);
    drift_prompt_clear(&pm);
    return rc;
}

/* A string field of a run's recorded request control (decoding record
 * "request", run.c); extra_body as compact JSON. malloc'd; NULL when the
 * run has none (or out of memory: *nomem set). */
static char *run_request(const char *decoding_json, const char *key, int *nomem) {
    json_t *dec = json_loads(decoding_json ? decoding_json : "{}", 0, NULL);
    json_t *v = json_object_get(json_object_get(dec, "request"), key);
    char *out = json_is_string(v) && *json_string_value(v) ? util_strdup(json_string_value(v))
                : json_is_object(v)                     ? json_dumps(v, JSON_COMPACT)
                                                        : NULL;
    if (!out && (json_is_object(v) || (json_is_string(v) && *json_string_value(v)))) *nomem = 1;
    json_decref(dec);
    return out;
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
    char *base_spec = NULL, *sys = NULL, *tmpl = NULL, *extra = NULL;
    int nomem = 0;
    drift_status rc = c.tg && c.out ? DRIFT_OK : drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    if (!rc) rc = drift_store_run_get(st, baseline_label, &rb, err);
    if (!rc) { /* the baseline's request control: see the top */
        sys = run_request(rb.decoding_json, "system_prompt", &nomem);
        tmpl = run_request(rb.decoding_json, "prompt_template", &nomem);
        extra = run_request(rb.decoding_json, "extra_body", &nomem);
        c.prompt_template = tmpl;
        if (nomem) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    if (!rc) {
        char *who = util_asprintf("baseline run '%s'", baseline_label);
        rc = who ? stack_open(&c.base, rb.target, o->models_dir, who, &base_spec, 1, o->http_method, sys, extra, err)
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
        char *textra = rc ? NULL : run_request(rt.decoding_json, "extra_body", &nomem);
        if (!rc && nomem) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        if (!rc)
            rc = stack_open(&c.tg[k].k, rt.target, o->models_dir, who, &r->target_spec, 1, o->http_method, sys, textra,
                            err);
        free(textra);
        if (!rc && !c.base.http && !c.tg[k].k.http) rc = same_vocab(&c.base, &c.tg[k].k, who, err);
        if (!rc && (c.base.http || c.tg[k].k.http)) c.any_http = 1;
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
        rc = c.any_http ? runs_prompt_top(&c, st, &set.rows[i], err) : runs_prompt(&c, st, &set.rows[i], err);
        done++;
        if (o->progress) o->progress(o->progress_user, "divergence", done, n_pick);
    }
    for (size_t k = 0; k < n_targets && !rc; k++) {
        drift_tokdiv_report *r = &c.out[k];
        for (int w = 0; w < DRIFT_WL_COUNT && !rc; w++)
            if (r->present[w]) rc = drift_tokdiv_acc_summary(&c.tg[k].pool[w], &r->wl[w], err);
        if (!rc) rc = drift_tokdiv_acc_summary(&c.tg[k].all, &r->overall, err);
        r->elapsed_ms = util_now_ms() - t0;
        tf_stack *hs = c.base.http ? &c.base : c.tg[k].k.http ? &c.tg[k].k : NULL;
        if (!rc && hs) {
            r->top_k = hs->k;
            r->method = util_asprintf("top-K (%s)", drift_plp_method_name(hs->method));
        } else if (!rc) {
            r->method = util_strdup("logits");
        }
        if (!rc && !r->method) rc = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    free(pick);
    free(base_spec);
    free(sys);
    free(tmpl);
    free(extra);
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
    if (!rc)
        rc = stack_open(&b, baseline_spec, o->models_dir, "baseline", &out->baseline_spec, 0, o->http_method, NULL, NULL,
                        err);
    if (!rc)
        rc = stack_open(&t, target_spec, o->models_dir, "target", &out->target_spec, 0, o->http_method, NULL, NULL, err);
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
