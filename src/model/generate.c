/* generate.c - generation and embeddings over the forward pass.
 *
 * drift_model_generate decodes n prompts in at most `batch` slots: each
 * sequence is prefilled alone, then the live sequences advance together, one
 * batched step (forward.c) per token, until each stops (an
 * end-of-generation token, a stop string, max_tokens, a full context, or the
 * cancel hook); a slot whose sequence stopped takes the next prompt before
 * the next step (continuous batching: steps stay full while prompts are
 * left, instead of a group finishing its longest answer at a few rows). The
 * engine is batch-invariant, so a sequence's tokens do not depend on its
 * companions or on when it joined. At temperature 0 without logprobs only the greedy
 * picks come back from a step (chosen on the device with backend=cuda);
 * otherwise the logits, and sampler.c picks. One run state serves the whole
 * call: its buffers grow to the longest prompt (prefill) and the batch
 * (steps), and are freed at the end. A prompt that repeats the one before
 * it (replicates) copies that one's prefill instead of computing it again
 * (prefill_snap: the same bits).
 *
 * drift_model_embed mean-pools the final hidden states of one text. */
#include <stdlib.h>
#include <string.h>

#include "model/model_internal.h"
#include "model/sampler.h"
#include "util/util.h"

void drift_generation_clear(drift_generation *g) {
    if (!g) return;
    free(g->text);
    free(g->tokens);
    free(g->lp);
    free(g->error);
    memset(g, 0, sizeof *g);
}

typedef struct seqstate {
    drift_session *s;
    util_rng rng;
    util_buf text;
    int32_t *toks;
    drift_token_logprob *lp;
    int n, cap;
    int done;
    int32_t next;       /* token chosen, to be fed */
} seqstate;

/* Records token id (already sampled from logits) into q; decides whether the
 * sequence is finished. */
static void seq_accept(const drift_model *m, seqstate *q, const float *logits, int32_t id, const drift_gen_params *pr,
                       drift_generation *g) {
    if (tok_is_eog(m->tok, id)) {
        q->done = 1;
        g->finish_reason = "stop";
        return;
    }
    if (q->n == q->cap) {
        int nc = q->cap ? q->cap * 2 : 64;
        int32_t *nt = realloc(q->toks, (size_t)nc * sizeof *nt);
        if (nt) q->toks = nt;
        if (pr->logprobs > 0) {
            drift_token_logprob *nl = realloc(q->lp, (size_t)nc * sizeof *nl);
            if (nl) q->lp = nl;
            if (!nl) nt = NULL;
        }
        if (!nt) {
            q->done = 1;
            g->finish_reason = "length";
            return;
        }
        q->cap = nc;
    }
    if (pr->logprobs > 0) samp_logprobs(logits, m->info.n_vocab, id, pr->logprobs, &q->lp[q->n]);
    q->toks[q->n++] = id;
    size_t before = q->text.len;
    tok_decode_token(m->tok, id, 0, &q->text);
    /* stop strings: search the new tail */
    for (int i = 0; i < pr->n_stop; i++) {
        const char *st = pr->stop[i];
        size_t sl = st ? strlen(st) : 0;
        if (!sl || q->text.len < sl) continue;
        size_t from = before >= sl ? before - sl + 1 : 0;
        const char *hit = q->text.data ? memmem(q->text.data + from, q->text.len - from, st, sl) : NULL;
        if (hit) {
            q->text.len = (size_t)(hit - q->text.data);
            q->text.data[q->text.len] = 0;
            q->done = 1;
            g->finish_reason = "stop";
            return;
        }
    }
    if (q->n >= pr->max_tokens) {
        q->done = 1;
        g->finish_reason = "length";
    } else if (q->s->pos >= q->s->n_ctx) {
        q->done = 1;
        g->finish_reason = "length";
    }
}

static void seq_finish(seqstate *q, drift_generation *g) {
    g->text = buf_steal(&q->text);
    g->tokens = q->toks;
    g->n_tokens = q->n;
    g->lp = q->lp;
    q->toks = NULL;
    q->lp = NULL;
    drift_session_free(q->s);
    q->s = NULL;
}

static int ctx_for(const drift_model *m, size_t plen, const drift_gen_params *pr) {
    size_t want = plen + (size_t)(pr->max_tokens > 0 ? pr->max_tokens : 0) + 1;
    size_t cap = (size_t)m->info.n_ctx_train;
    return (int)(want < cap ? want : cap);
}

/* A prompt's prefill kept for the prompts after it with the same tokens (a
 * run's replicates of one prompt come one after another): the K/V of its
 * positions [0, len) in a session of len positions, and its last logits.
 * The engine is deterministic and a prefill depends on its tokens alone, so
 * a copy is what prefilling the same tokens again would compute, bit for
 * bit, without the forward pass (at the lab's stochastic leg, 5 replicates
 * of math prompts about as long as their answers, that was 4/5 of the
 * prefills, about 40% of the leg's tokens). CPU sessions only. */
typedef struct prefill_snap {
    const int32_t *toks; /* the tokens it was made from (the caller's prompt) */
    size_t len;
    drift_session *s; /* NULL: none */
    float *logits;    /* n_vocab */
} prefill_snap;

static void snap_free(prefill_snap *sn) {
    drift_session_free(sn->s);
    free(sn->logits);
    memset(sn, 0, sizeof *sn);
}

static int snap_matches(const prefill_snap *sn, const int32_t *prompt, size_t plen) {
    return sn->s && sn->len == plen && (sn->toks == prompt || !memcmp(sn->toks, prompt, plen * sizeof *prompt));
}

/* Positions [0, n) of src's K/V cache into dst's (both CPU sessions of one
 * model; their n_ctx may differ), dst's position then n. */
static void kv_copy(drift_session *dst, const drift_session *src, int n) {
    const drift_model *m = dst->m;
    size_t vec = (size_t)m->info.n_kv_heads * m->kv_vec_bytes;
    for (int l = 0; l < m->info.n_layers; l++) {
        memcpy(dst->kc + (size_t)l * (size_t)dst->n_ctx * vec, src->kc + (size_t)l * (size_t)src->n_ctx * vec, (size_t)n * vec);
        memcpy(dst->vc + (size_t)l * (size_t)dst->n_ctx * vec, src->vc + (size_t)l * (size_t)src->n_ctx * vec, (size_t)n * vec);
    }
    dst->pos = n;
}

/* sn <- the prefill of session s (prompt of plen tokens, last logits); on
 * failure to allocate, no snapshot (the next prompt is prefilled). */
static void snap_take(const drift_model *m, prefill_snap *sn, const drift_session *s, const int32_t *prompt, size_t plen,
                      const float *logits) {
    snap_free(sn);
    drift_error e;
    if (!s->kc || drift_session_new(m, (int)plen, &sn->s, &e)) return;
    if (!sn->s->kc || !(sn->logits = malloc((size_t)m->info.n_vocab * sizeof *sn->logits))) {
        snap_free(sn);
        return;
    }
    kv_copy(sn->s, s, (int)plen);
    memcpy(sn->logits, logits, (size_t)m->info.n_vocab * sizeof *logits);
    sn->toks = prompt;
    sn->len = plen;
}

/* Prefills sequence i with rs's buffers, its last logits into logits
 * (n_vocab) -- or copies them from sn when it holds the same tokens' prefill;
 * on failure records the error in g and marks it done. */
static void seq_start(const drift_model *m, model_run_state *rs, seqstate *q, const int32_t *prompt, size_t plen,
                      const drift_gen_params *pr, uint64_t seed, float *logits, const prefill_snap *sn, drift_generation *g) {
    drift_error e;
    util_rng_seed(&q->rng, seed);
    g->prompt_tokens = (int)plen;
    drift_status st = DRIFT_OK;
    if (plen == 0) st = drift_error_set(&e, DRIFT_ERR_INVALID, "empty prompt (no tokens)");
    if (!st && plen >= (size_t)m->info.n_ctx_train)
        st = drift_error_set(&e, DRIFT_ERR_INVALID, "prompt of %zu tokens does not fit the context of %d", plen, m->info.n_ctx_train);
    if (!st) st = drift_session_new(m, ctx_for(m, plen, pr), &q->s, &e);
    if (!st && q->s->kc && snap_matches(sn, prompt, plen)) {
        kv_copy(q->s, sn->s, (int)plen);
        memcpy(logits, sn->logits, (size_t)m->info.n_vocab * sizeof *logits);
    } else if (!st) {
        st = model_forward_seq(rs, q->s, prompt, plen, 0, logits, NULL, &e);
    }
    if (st) {
        g->error = util_strdup(e.msg);
        q->done = 1;
        return;
    }
    if (pr->max_tokens <= 0) {
        q->done = 1;
        g->finish_reason = "length";
    } else {
        int32_t id = samp_pick(logits, m->info.n_vocab, pr, &q->rng);
        seq_accept(m, q, logits, id, pr, g);
        q->next = id;
    }
}

drift_status drift_model_generate(const drift_model *m, const int32_t *const *prompts, const size_t *prompt_lens, size_t n,
                                  const drift_gen_params *params, const int64_t *seed_offsets, int batch, drift_generation *out,
                                  drift_error *err) {
    return drift_model_generate_cancellable(m, prompts, prompt_lens, n, params, seed_offsets, batch, NULL, NULL, out, err);
}

drift_status drift_model_generate_cancellable(const drift_model *m, const int32_t *const *prompts, const size_t *prompt_lens,
                                              size_t n, const drift_gen_params *params, const int64_t *seed_offsets, int batch,
                                              drift_gen_cancel_fn cancel, void *cancel_user, drift_generation *out,
                                              drift_error *err) {
    memset(out, 0, n * sizeof *out);
    if (batch < 1) batch = 1;
    int V = m->info.n_vocab;
    seqstate *qs = calloc((size_t)batch, sizeof *qs);
    drift_session **live = malloc((size_t)batch * sizeof *live);
    int32_t *feed = malloc((size_t)batch * sizeof *feed);
    int *idx = malloc((size_t)batch * sizeof *idx);
    /* greedy without logprobs: only the picks come back (chosen on the device with the CUDA backend) */
    const int greedy = params->temperature <= 0 && params->logprobs <= 0;
    float *logits = greedy ? NULL : malloc((size_t)batch * V * sizeof *logits);
    int32_t *picks = greedy ? malloc((size_t)batch * sizeof *picks) : NULL;
    float *first = malloc((size_t)V * sizeof *first); /* a prefill's last logits */
    model_run_state rs = {0}; /* the activations of every prefill and step of this call */
    prefill_snap snap = {0};  /* the last prefill, while the prompts after it repeat it */
    drift_status st = DRIFT_OK;
    if (!qs || !live || !feed || !idx || (!greedy && !logits) || (greedy && !picks) || !first) {
        st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        goto done;
    }
    /* continuous batching: a slot whose sequence ends takes the next
     * prompt at once (prefilled alone), so steps stay full until the
     * prompts run out; slot[i] = the prompt in slot i, or -1 */
    size_t next_prompt = 0;
    long *slot = malloc((size_t)batch * sizeof *slot);
    if (!slot) {
        st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < batch; i++) slot[i] = -1;
    for (;;) {
        /* fill the free slots; a sequence that ends at its first token is
         * finished here and its slot filled again */
        for (int i = 0; i < batch; i++) {
            while (slot[i] < 0 && next_prompt < n) {
                size_t k = next_prompt++;
                seqstate *q = &qs[i];
                memset(q, 0, sizeof *q);
                out[k].finish_reason = "length";
                if (cancel && cancel(cancel_user, k)) { /* no prefill */
                    out[k].finish_reason = "cancelled";
                    seq_finish(q, &out[k]);
                    continue;
                }
                uint64_t seed = (uint64_t)params->seed + (uint64_t)(seed_offsets ? seed_offsets[k] : 0);
                seq_start(m, &rs, q, prompts[k], prompt_lens[k], params, seed, first, &snap, &out[k]);
                /* the next prompt repeats this one: keep its prefill */
                if (k + 1 < n && q->s && !out[k].error && !snap_matches(&snap, prompts[k], prompt_lens[k]) && prompt_lens[k + 1] == prompt_lens[k] &&
                    !memcmp(prompts[k + 1], prompts[k], prompt_lens[k] * sizeof *prompts[k]))
                    snap_take(m, &snap, q->s, prompts[k], prompt_lens[k], first);
                if (q->done) {
                    seq_finish(q, &out[k]);
                    buf_free(&q->text);
                    free(q->toks);
                    free(q->lp);
                    continue;
                }
                slot[i] = (long)k;
            }
        }
        int nl = 0;
        for (int i = 0; i < batch; i++) {
            if (slot[i] < 0) continue;
            if (cancel && cancel(cancel_user, (size_t)slot[i])) {
                qs[i].done = 1;
                out[slot[i]].finish_reason = "cancelled";
            } else {
                live[nl] = qs[i].s;
                feed[nl] = qs[i].next;
                idx[nl++] = i;
            }
        }
        if (nl) {
            drift_error e;
            drift_status s2 = model_forward_step(&rs, live, feed, (size_t)nl, logits, picks, &e);
            for (int j = 0; j < nl; j++) {
                seqstate *q = &qs[idx[j]];
                if (s2) {
                    out[slot[idx[j]]].error = util_strdup(e.msg);
                    q->done = 1;
                    continue;
                }
                const float *lg = greedy ? NULL : logits + (size_t)j * V; /* seq_accept reads it for logprobs only */
                int32_t id = greedy ? picks[j] : samp_pick(lg, V, params, &q->rng);
                seq_accept(m, q, lg, id, params, &out[slot[idx[j]]]);
                q->next = id;
            }
        }
        /* the ended sequences give their slots back */
        int active = 0;
        for (int i = 0; i < batch; i++) {
            if (slot[i] < 0) continue;
            if (qs[i].done) {
                seq_finish(&qs[i], &out[slot[i]]);
                buf_free(&qs[i].text);
                free(qs[i].toks);
                free(qs[i].lp);
                slot[i] = -1;
            } else {
                active++;
            }
        }
        if (!active && next_prompt >= n) break;
    }
    free(slot);
done:
    free(qs);
    free(live);
    free(feed);
    free(idx);
    free(logits);
    free(picks);
    free(first);
    model_run_state_free(&rs);
    snap_free(&snap);
    return st;
}

drift_status drift_model_embed(const drift_model *m, const char *text, float *vec, drift_error *err) {
    int32_t *ids;
    size_t n;
    drift_status st = drift_model_tokenize(m, text, strlen(text), -1, 0, &ids, &n, err);
    if (st) return st;
    int D = m->info.dim;
    if (n == 0) {
        free(ids);
        memset(vec, 0, (size_t)D * sizeof *vec);
        return DRIFT_OK;
    }
    if (n > (size_t)m->info.n_ctx_train) n = (size_t)m->info.n_ctx_train;
    drift_session *s = NULL;
    float *hid = malloc(n * (size_t)D * sizeof *hid);
    if (!hid) st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    if (!st) st = drift_session_new(m, (int)n, &s, err);
    if (!st) st = drift_session_forward(s, ids, n, 0, NULL, hid, err);
    if (!st) {
        for (int d = 0; d < D; d++) {
            double acc = 0;
            for (size_t t = 0; t < n; t++) acc += hid[t * (size_t)D + (size_t)d];
            vec[d] = (float)(acc / (double)n);
        }
    }
    drift_session_free(s);
    free(hid);
    free(ids);
    return st;
}

