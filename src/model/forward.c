/* forward.c - sessions and the forward pass of the embedded engine.
 *
 *   forward_rows = one batch of B rows; row b is token tok[b] of session
 *                  sess[b] at position pos[b]. Prefill = B rows of one
 *                  session; batched decode = one row of each of B sessions.
 *
 * Per layer: rmsnorm -> q,k,v matmuls over all B rows (+ qwen2 biases) ->
 * RoPE -> K,V stored into each row's cache -> attention per (row, KV head),
 * its query heads in one pass, over positions [max(0, pos - window + 1), pos]
 * -> output matmul -> residual ->
 * rmsnorm -> SwiGLU FFN (dense, or MoE: softmax router, top-k, weights
 * renormalised, each expert's rows gathered into one matmul, slots summed in
 * rank order) -> residual. Then output_norm and the vocabulary matmul.
 *
 * The activations live in a model_run_state (model_internal.h) that the
 * caller owns and that keeps its buffers between calls, grown to the largest
 * batch seen: on the CPU a decode step allocates nothing once they have grown.
 *
 * Batch invariance: every matmul is batch-invariant (numerics' contract),
 * attention and norms are per row, the MoE sum order depends on the row's
 * own routing only; so a sequence's numbers never depend on its batch
 * companions, on prefill-vs-incremental feeding, or on the thread count.
 *
 * backend=cuda: the same rows go to model/cuda/cuda_backend.h (dcu_forward)
 * instead of forward_rows. Token range and context checks stay here; the
 * vocabulary matmul runs on the device too (only the logit rows asked for
 * come back, or only the greedy picks). */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "model/kernels_ref.h"
#include "model/model_internal.h"
#include "model/sampler.h"
#include "model/workers.h"

/* ---------------------------------------------------------------- sessions */

drift_status drift_session_new(const drift_model *m, int n_ctx, drift_session **out, drift_error *err) {
    *out = NULL;
    if (n_ctx <= 0) n_ctx = m->info.n_ctx_train < 4096 ? m->info.n_ctx_train : 4096;
    drift_session *s = calloc(1, sizeof *s);
    if (!s) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    s->m = m;
    s->n_ctx = n_ctx;
#ifdef DRIFT_HAVE_CUDA
    if (m->dcu) {
        pthread_mutex_lock((pthread_mutex_t *)&m->dcu_mu);
        drift_status st = dcu_kv_new(m->dcu, n_ctx, &s->dkv, err);
        pthread_mutex_unlock((pthread_mutex_t *)&m->dcu_mu);
        if (st) {
            s->dkv = NULL;
            drift_session_free(s);
            return drift_error_prefix(err, "backend=cuda: KV cache of %d positions: ", n_ctx);
        }
        *out = s;
        return DRIFT_OK;
    }
#endif
    size_t bytes = (size_t)m->info.n_layers * (size_t)n_ctx * (size_t)m->info.n_kv_heads * m->kv_vec_bytes;
    s->kc = malloc(bytes ? bytes : 1);
    s->vc = malloc(bytes ? bytes : 1);
    if (!s->kc || !s->vc) {
        drift_session_free(s);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "KV cache: cannot allocate 2 x %zu bytes for %d positions", bytes, n_ctx);
    }
    *out = s;
    return DRIFT_OK;
}

void drift_session_free(drift_session *s) {
    if (!s) return;
#ifdef DRIFT_HAVE_CUDA
    dcu_kv_free(s->dkv);
#endif
    model_run_state_free(&s->rs);
    free(s->kc);
    free(s->vc);
    free(s);
}

void drift_session_reset(drift_session *s) { s->pos = 0; }
int drift_session_pos(const drift_session *s) { return s->pos; }

/* --------------------------------------------------------------- run state */

static void free_acts(model_run_state *rs) {
    void *bufs[] = {rs->x,      rs->xb,  rs->xb2, rs->q,    rs->k,    rs->v,   rs->att, rs->h1, rs->h3,
                    rs->hid,    rs->router, rs->sel, rs->wt, rs->slot, rs->gath, rs->eout, rs->who, rs->prob};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    rs->x = rs->xb = rs->xb2 = rs->q = rs->k = rs->v = rs->att = rs->h1 = rs->h3 = rs->hid = NULL;
    rs->router = rs->wt = rs->slot = rs->gath = rs->eout = NULL;
    rs->sel = rs->who = NULL;
    rs->prob = NULL;
    rs->act_rows = 0;
}

void model_run_state_free(model_run_state *rs) {
    for (int i = 0; i < rs->n_wcopy; i++) free(rs->wcopy[i].data);
    free(rs->wcopy);
    free_acts(rs);
    free(rs->pos);
    free(rs->sess);
    free(rs->sorted);
    free(rs->logits);
    free(rs->scratch);
    memset(rs, 0, sizeof *rs);
}

/* The per-row index arrays (pos, sess, sorted) for B rows. */
static drift_status rs_index(model_run_state *rs, int B, drift_error *err) {
    if (B <= rs->idx_rows) return DRIFT_OK;
    free(rs->pos);
    free(rs->sess);
    free(rs->sorted);
    rs->pos = malloc((size_t)B * sizeof *rs->pos);
    rs->sess = malloc((size_t)B * sizeof *rs->sess);
    rs->sorted = malloc((size_t)B * sizeof *rs->sorted);
    if (!rs->pos || !rs->sess || !rs->sorted) {
        free(rs->pos);
        free(rs->sess);
        free(rs->sorted);
        rs->pos = NULL;
        rs->sess = rs->sorted = NULL;
        rs->idx_rows = 0;
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    rs->idx_rows = B;
    return DRIFT_OK;
}

/* The activation buffers of m's forward pass for B rows. */
static drift_status rs_acts(model_run_state *rs, const drift_model *m, int B, drift_error *err) {
    if (B <= rs->act_rows) return DRIFT_OK;
    free_acts(rs);
    const drift_model_info *in = &m->info;
    size_t b = (size_t)B, D = (size_t)in->dim, H = (size_t)in->hidden_dim, E = (size_t)in->n_experts,
           K = (size_t)in->n_experts_used;
    int ok = (rs->x = malloc(b * D * sizeof(float))) && (rs->xb = malloc(b * D * sizeof(float))) &&
             (rs->xb2 = malloc(b * D * sizeof(float))) && (rs->q = malloc(b * (size_t)m->q_dim * sizeof(float))) &&
             (rs->k = malloc(b * (size_t)m->kv_dim * sizeof(float))) && (rs->v = malloc(b * (size_t)m->kv_dim * sizeof(float))) &&
             (rs->att = malloc(b * (size_t)m->q_dim * sizeof(float))) && (rs->h1 = malloc(b * H * sizeof(float))) &&
             (rs->h3 = malloc(b * H * sizeof(float))) && (rs->hid = malloc(b * D * sizeof(float)));
    if (ok && E)
        ok = (rs->router = malloc(b * E * sizeof(float))) && (rs->sel = malloc(b * K * sizeof(int))) &&
             (rs->wt = malloc(b * K * sizeof(float))) && (rs->slot = malloc(b * K * D * sizeof(float))) &&
             (rs->gath = malloc(b * D * sizeof(float))) && (rs->eout = malloc(b * D * sizeof(float))) &&
             (rs->who = malloc(b * sizeof(int))) && (rs->prob = malloc(E * sizeof(double)));
    if (!ok) {
        free_acts(rs);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory for a batch of %d rows", B);
    }
    rs->act_rows = B;
    return DRIFT_OK;
}

/* B rows of logits for a step that keeps only the greedy picks. */
static float *rs_logits(model_run_state *rs, const drift_model *m, int B) {
    if (B > rs->logit_rows) {
        free(rs->logits);
        rs->logits = malloc((size_t)B * (size_t)m->info.n_vocab * sizeof *rs->logits);
        rs->logit_rows = rs->logits ? B : 0;
    }
    return rs->logits;
}

/* Attention scratch: nt threads x at least per floats each. The stride at
 * least doubles when it grows, so a decode position after position does not
 * grow it every step. */
static drift_status rs_scratch(model_run_state *rs, int nt, size_t per, drift_error *err) {
    if (nt <= rs->scratch_threads && per <= rs->scratch_stride) return DRIFT_OK;
    size_t stride = per > rs->scratch_stride ? (per > 2 * rs->scratch_stride ? per : 2 * rs->scratch_stride) : rs->scratch_stride;
    int threads = nt > rs->scratch_threads ? nt : rs->scratch_threads;
    free(rs->scratch);
    rs->scratch = malloc((size_t)threads * stride * sizeof *rs->scratch);
    if (!rs->scratch) {
        rs->scratch_threads = 0;
        rs->scratch_stride = 0;
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory for attention over %zu positions", per);
    }
    rs->scratch_threads = threads;
    rs->scratch_stride = stride;
    return DRIFT_OK;
}

/* ---------------------------------------------------------------- forward */

/* What the f32 weight copies of one run state may hold in all. */
#define WCOPY_MAX_BYTES ((size_t)512 << 20)
/* ... and at most this much of copies of 16-bit matrices (rs_weights) */
#define WCOPY_SMALL_BYTES ((size_t)64 << 20)

/* The matrix a matmul of rs should read for W: for a format the fast matmul
 * converts to f32 panel by panel in every call (all but f32, bf16, f16,
 * q8_0 and q4_0, which it reads in place), an f32 copy made once per run
 * state -- a batched decode would otherwise convert every weight at every
 * step. The matmul works on the converted values either way (the copy is
 * num_fast_dequantize_row's, the converters the panels used, equal to
 * num_qmat_dequantize_row bit for bit), so the bits do not change. W itself for the ref profile (its own
 * kernels), and when the copy would not fit WCOPY_MAX_BYTES or memory. */
static const num_qmat *rs_weights(model_run_state *rs, const drift_numeric_profile *p, const num_qmat *W) {
    if (p->isa == DRIFT_ISA_REF || W->dtype == DRIFT_DTYPE_F32) return W;
    /* the hardware levels' dot products read f32 rows (num_hw_dot): a copy
     * of every other format, or each call would convert the whole matrix */
    int hw = p->lanes || p->mma;
    /* bf16 / f16 matrices of a small model: an f32 copy too, while all the
     * copies stay under WCOPY_SMALL_BYTES. Its weights then sit in the
     * caches, where widening 16-bit values in the tile kernel costs more
     * than reading twice the bytes (same values: the widening is exact); a
     * big model streams its 16-bit weights from memory, in place. */
    int small16 = (W->dtype == DRIFT_DTYPE_BF16 || W->dtype == DRIFT_DTYPE_F16) &&
                  rs->wcopy_bytes + (size_t)W->rows * (size_t)W->cols * sizeof(float) <= WCOPY_SMALL_BYTES;
    switch (hw || small16 ? DRIFT_DTYPE_COUNT : W->dtype) {
    case DRIFT_DTYPE_BF16:
    case DRIFT_DTYPE_F16:
    case DRIFT_DTYPE_Q8_0:
    case DRIFT_DTYPE_Q4_0: return W;
    default: break;
    }
    for (int i = 0; i < rs->n_wcopy; i++)
        if (rs->wcopy[i].src == W) return &rs->wcopy[i].f32;
    size_t bytes = (size_t)W->rows * (size_t)W->cols * sizeof(float);
    if (rs->wcopy_bytes + bytes > WCOPY_MAX_BYTES) return W;
    if (rs->n_wcopy == rs->cap_wcopy) {
        int cap = rs->cap_wcopy ? 2 * rs->cap_wcopy : 16;
        struct model_wcopy *g = realloc(rs->wcopy, (size_t)cap * sizeof *g);
        if (!g) return W;
        rs->wcopy = g;
        rs->cap_wcopy = cap;
    }
    float *d = malloc(bytes ? bytes : 1);
    if (!d) return W;
    for (int64_t r = 0; r < W->rows; r++) num_fast_dequantize_row(W, r, d + r * W->cols);
    struct model_wcopy *c = &rs->wcopy[rs->n_wcopy];
    if (num_qmat_wrap(&c->f32, DRIFT_DTYPE_F32, d, W->rows, W->cols, NULL)) {
        free(d);
        return W;
    }
    c->src = W;
    c->data = d;
    rs->n_wcopy++;
    rs->wcopy_bytes += bytes;
    return &c->f32;
}

/* One head's K or V vector into the cache slot dst: in the profile's KV
 * format, or (kv_f32) as the f32 values that format's vector decodes to. */
static void kv_put(const drift_model *m, uint8_t *dst, const float *src, int hd) {
    if (!m->kv_f32) {
        num_kv_store(m->prof.kv, dst, src, hd);
        return;
    }
    uint8_t coded[sizeof(float) * (MODEL_KV_F32_MAX_HD + 1)];
    num_kv_store(m->prof.kv, coded, src, hd);
    num_kv_load(m->prof.kv, (float *)(void *)dst, coded, hd);
}

static uint8_t *kv_at(const drift_session *s, uint8_t *base, int layer, int pos, int kvh) {
    const drift_model *m = s->m;
    size_t idx = ((size_t)layer * (size_t)s->n_ctx + (size_t)pos) * (size_t)m->info.n_kv_heads + (size_t)kvh;
    return base + idx * m->kv_vec_bytes;
}

static int n_threads(const drift_numeric_profile *p) { return p->threads > 0 ? p->threads : omp_get_max_threads(); }

/* MoE FFN for B rows of xb (B, dim) -> out (B, dim), in rs's MoE buffers
 * (and h1, h3 for one expert's rows at a time). */
static drift_status moe_ffn(const drift_model *m, model_run_state *rs, const layer_w *w, const float *xb, int B, float *out,
                            drift_error *err) {
    const drift_model_info *in = &m->info;
    const drift_numeric_profile *p = &m->prof;
    int D = in->dim, H = in->hidden_dim, E = in->n_experts, K = in->n_experts_used;
    float *logits = rs->router, *wt = rs->wt, *slot = rs->slot, *g = rs->gath, *h1 = rs->h1, *h3 = rs->h3, *o = rs->eout;
    int *sel = rs->sel, *who = rs->who;
    double *pr = rs->prob;
    drift_status st;
    if ((st = num_matmul(p, logits, xb, rs_weights(rs, p, &w->router), B, err))) return st;
    num_store_round(p, logits, (int64_t)B * E);
    /* the router (kernels_ref.h): softmax, top-k (ties: lower index), renormalised;
     * ref's results must not depend on the CPU's libm (it picks FMA code or not) */
    double (*exp_fn)(double) = p->isa == DRIFT_ISA_REF ? num_ref_exp : exp;
    for (int b = 0; b < B; b++)
        num_ref_moe_route(logits + (size_t)b * E, E, K, exp_fn, pr, sel + (size_t)b * K, wt + (size_t)b * K);
    for (int e = 0; e < E; e++) {
        /* the rows that chose expert e (each at most once), through its FFN as one batch */
        int cnt = 0;
        for (int b = 0; b < B; b++)
            for (int k = 0; k < K; k++)
                if (sel[b * K + k] == e) {
                    who[cnt] = b * K + k;
                    memcpy(g + (size_t)cnt * D, xb + (size_t)b * D, (size_t)D * sizeof *g);
                    cnt++;
                }
        if (!cnt) continue;
        if ((st = num_matmul(p, h1, g, rs_weights(rs, p, &w->e_gate[e]), cnt, err)) || (st = num_matmul(p, h3, g, rs_weights(rs, p, &w->e_up[e]), cnt, err))) return st;
        num_store_round(p, h1, (int64_t)cnt * H);
        num_store_round(p, h3, (int64_t)cnt * H);
        for (int r = 0; r < cnt; r++) num_swiglu(p, h1 + (size_t)r * H, h1 + (size_t)r * H, h3 + (size_t)r * H, H);
        num_store_round(p, h1, (int64_t)cnt * H);
        if ((st = num_matmul(p, o, h1, rs_weights(rs, p, &w->e_down[e]), cnt, err))) return st;
        num_store_round(p, o, (int64_t)cnt * D);
        for (int r = 0; r < cnt; r++) memcpy(slot + (size_t)who[r] * D, o + (size_t)r * D, (size_t)D * sizeof *o);
    }
    /* each row: its K slots weighted, summed in rank order */
    for (int b = 0; b < B; b++) {
        float *ob = out + (size_t)b * D;
        for (int d = 0; d < D; d++) {
            float acc = 0;
            for (int k = 0; k < K; k++) acc += wt[b * K + k] * slot[((size_t)b * K + k) * D + d];
            ob[d] = acc;
        }
        num_store_round(p, ob, D);
    }
    return DRIFT_OK;
}

/* Token ids in range and positions inside their sessions, before any row runs. */
static drift_status check_rows(const drift_model *m, drift_session *const *sess, const int *pos, const int32_t *tok, int B,
                               drift_error *err) {
    for (int b = 0; b < B; b++) {
        if (tok[b] < 0 || tok[b] >= m->info.n_vocab)
            return drift_error_set(err, DRIFT_ERR_INVALID, "token id %d out of range [0, %d)", tok[b], m->info.n_vocab);
        if (pos[b] >= sess[b]->n_ctx)
            return drift_error_set(err, DRIFT_ERR_INVALID, "context full: position %d, session holds %d", pos[b], sess[b]->n_ctx);
    }
    return DRIFT_OK;
}

#ifdef DRIFT_HAVE_CUDA
/* forward_rows on the GPU: hidden (B, dim; NULL: not downloaded); logits
 * and / or next (the greedy picks, chosen on the device; NULL: none) of
 * every row (all_logits) or of the last row only. */
static drift_status cuda_rows(const drift_model *m, drift_session *const *sess, const int *pos, const int32_t *tok, int B,
                              float *hidden, float *logits, int32_t *next, int all_logits, drift_error *err) {
    drift_status st = check_rows(m, sess, pos, tok, B, err);
    if (st) return st;
    int n_rows = logits || next ? (all_logits ? B : 1) : 0;
    dcu_kv **kv = malloc((size_t)B * sizeof *kv);
    int *rows = malloc((size_t)(n_rows ? n_rows : 1) * sizeof *rows);
    if (!kv || !rows) {
        free(kv);
        free(rows);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    for (int b = 0; b < B; b++) kv[b] = sess[b]->dkv;
    for (int r = 0; r < n_rows; r++) rows[r] = all_logits ? r : B - 1;
    pthread_mutex_lock((pthread_mutex_t *)&m->dcu_mu);
    st = dcu_forward(m->dcu, kv, pos, tok, B, hidden, n_rows ? logits : NULL, n_rows ? next : NULL, rows, n_rows, err);
    pthread_mutex_unlock((pthread_mutex_t *)&m->dcu_mu);
    free(kv);
    free(rows);
    return st;
}
#endif

/* A GEMM output row y (n) with its bias (NULL: none) as the profile
 * stores it: store=f32 -> y + bias in f32; store=dtype -> rounded to the
 * dtype once (bias=fused, the GEMM epilogue) or before and after the bias
 * add (bias=unfused, a separate kernel). */
static void gemm_out(const drift_numeric_profile *p, float *y, const float *bias, int n) {
    if (bias && p->bias_unfused) num_store_round(p, y, n);
    if (bias) num_add(y, y, bias, n);
    num_store_round(p, y, n);
}

/* Residual add and the rmsnorm after it, for one row: x += d, x rounded to
 * the residual format rfmt; out = rmsnorm(x) * w, stored. The norm reads
 * the rounded x (addnorm=rounded), or the f32 sum (addnorm=f32: fused
 * add+norm). */
static void add_norm(const drift_numeric_profile *p, float *x, const float *d, float *out, const float *w, int n,
                     float eps, drift_dtype rfmt) {
    num_add(x, x, d, n);
    if (!p->addnorm_f32) num_round_acts(rfmt, x, n);
    num_rmsnorm(p, out, x, w, n, eps);
    if (p->addnorm_f32) num_round_acts(rfmt, x, n);
    num_store_round(p, out, n);
}

/* Attention of one layer for a batch, shared by the threads running it. */
typedef struct attn_job {
    const drift_model *m;
    model_run_state *rs;
    drift_session *const *sess;
    const int *pos;
    int layer;
    float scale;
} attn_job;

/* Item bk = (row b, KV head kvh) of an attn_job: the query heads that share
 * kvh (GQA) in one pass over its K and V vectors, rs->att's slices from
 * rs->q's, with worker's attention scratch. */
static void attn_item(void *ctx, int64_t bk, int worker) {
    const attn_job *j = ctx;
    const drift_model *m = j->m;
    const drift_model_info *in = &m->info;
    int hd = in->head_dim, QD = m->q_dim, group = in->n_heads / in->n_kv_heads;
    int b = (int)(bk / in->n_kv_heads), kvh = (int)(bk % in->n_kv_heads), pos = j->pos[b];
    int start = in->sliding_window > 0 && pos + 1 > in->sliding_window ? pos + 1 - in->sliding_window : 0;
    size_t stride = (size_t)in->n_kv_heads * m->kv_vec_bytes, off = (size_t)b * QD + (size_t)kvh * group * hd;
    float *scr = j->rs->scratch + (size_t)worker * j->rs->scratch_stride;
    drift_session *s = j->sess[b];
    num_attention_group(&m->attn_prof, j->rs->att + off, j->rs->q + off, group, kv_at(s, s->kc, j->layer, start, kvh),
                        kv_at(s, s->vc, j->layer, start, kvh), stride, pos - start + 1, hd, j->scale, scr);
}

/* B rows: token tok[b] of session sess[b] at position pos[b] (its K/V are
 * written there), with rs's activation buffers (rs_acts(B) done). hidden
 * (B, dim) receives the final normed hidden states. */
static drift_status forward_rows(const drift_model *m, model_run_state *rs, drift_session *const *sess, const int *pos,
                                 const int32_t *tok, int B, float *hidden, drift_error *err) {
    const drift_model_info *in = &m->info;
    const drift_numeric_profile *p = &m->prof;
    int D = in->dim, H = in->hidden_dim, hd = in->head_dim, QD = m->q_dim, KVD = m->kv_dim;
    int nt = n_threads(p);
    drift_status st = check_rows(m, sess, pos, tok, B, err);
    if (st) return st;
    int max_pos = 0;
    for (int b = 0; b < B; b++)
        if (pos[b] + 1 > max_pos) max_pos = pos[b] + 1;
    if ((st = rs_scratch(rs, nt, num_attention_scratch(in->n_heads / in->n_kv_heads, max_pos, hd), err))) return st;
    float *x = rs->x, *xb = rs->xb, *xb2 = rs->xb2, *q = rs->q, *k = rs->k, *v = rs->v, *att = rs->att, *h1 = rs->h1, *h3 = rs->h3;
    for (int b = 0; b < B; b++) num_embedding(p, x + (size_t)b * D, &m->tok_embd, tok[b]);
    float scale = 1.0f / sqrtf((float)hd);
    drift_dtype rfmt = num_resid_of(p);
    /* the first attention rmsnorm; later ones follow the residual add before them */
    for (int b = 0; b < B; b++) {
        num_rmsnorm(p, xb + (size_t)b * D, x + (size_t)b * D, m->layers[0].attn_norm, D, in->norm_eps);
        num_store_round(p, xb + (size_t)b * D, D);
    }
    for (int l = 0; l < in->n_layers; l++) {
        const layer_w *w = &m->layers[l];
        /* q, k, v = xb @ Wq^T, Wk^T, Wv^T (+ bias) */
        if ((st = num_matmul(p, q, xb, rs_weights(rs, p, &w->wq), B, err)) || (st = num_matmul(p, k, xb, rs_weights(rs, p, &w->wk), B, err)) ||
            (st = num_matmul(p, v, xb, rs_weights(rs, p, &w->wv), B, err)))
            return st;
        for (int b = 0; b < B; b++) {
            gemm_out(p, q + (size_t)b * QD, w->bq, QD);
            gemm_out(p, k + (size_t)b * KVD, w->bk, KVD);
            gemm_out(p, v + (size_t)b * KVD, w->bv, KVD);
            /* RoPE on q and k at the row's position */
            num_rope(p, q + (size_t)b * QD, in->n_heads, pos[b], &m->rope);
            num_rope(p, k + (size_t)b * KVD, in->n_kv_heads, pos[b], &m->rope);
            num_store_round(p, q + (size_t)b * QD, QD);
            num_store_round(p, k + (size_t)b * KVD, KVD);
            /* K, V into the cache */
            for (int j = 0; j < in->n_kv_heads; j++) {
                kv_put(m, kv_at(sess[b], sess[b]->kc, l, pos[b], j), k + (size_t)b * KVD + (size_t)j * hd, hd);
                kv_put(m, kv_at(sess[b], sess[b]->vc, l, pos[b], j), v + (size_t)b * KVD + (size_t)j * hd, hd);
            }
        }
        /* attention per (row, KV head) over the causal (and sliding) window;
         * threads only when there is enough work to pay for waking them */
        attn_job aj = {.m = m, .rs = rs, .sess = sess, .pos = pos, .layer = l, .scale = scale};
        int par = (long)B * in->n_heads * max_pos * hd >= 262144L;
        num_par_for(par ? nt : 1, (int64_t)B * in->n_kv_heads, attn_item, &aj);
        for (int b = 0; b < B; b++) num_store_round(p, att + (size_t)b * QD, QD);
        /* output projection, residual, FFN rmsnorm */
        if ((st = num_matmul(p, xb2, att, rs_weights(rs, p, &w->wo), B, err))) return st;
        for (int b = 0; b < B; b++) {
            gemm_out(p, xb2 + (size_t)b * D, NULL, D);
            add_norm(p, x + (size_t)b * D, xb2 + (size_t)b * D, xb + (size_t)b * D, w->ffn_norm, D, in->norm_eps, rfmt);
        }
        /* SwiGLU FFN (dense or MoE), residual, the next rmsnorm */
        if (in->n_experts) {
            if ((st = moe_ffn(m, rs, w, xb, B, xb2, err))) return st;
        } else {
            if ((st = num_matmul(p, h1, xb, rs_weights(rs, p, &w->w_gate), B, err)) || (st = num_matmul(p, h3, xb, rs_weights(rs, p, &w->w_up), B, err))) return st;
            for (int b = 0; b < B; b++) {
                gemm_out(p, h1 + (size_t)b * H, NULL, H);
                gemm_out(p, h3 + (size_t)b * H, NULL, H);
                num_swiglu(p, h1 + (size_t)b * H, h1 + (size_t)b * H, h3 + (size_t)b * H, H);
                num_store_round(p, h1 + (size_t)b * H, H);
            }
            if ((st = num_matmul(p, xb2, h1, rs_weights(rs, p, &w->w_down), B, err))) return st;
            for (int b = 0; b < B; b++) gemm_out(p, xb2 + (size_t)b * D, NULL, D);
        }
        const float *next_norm = l + 1 < in->n_layers ? m->layers[l + 1].attn_norm : m->output_norm;
        float *next_out = l + 1 < in->n_layers ? xb : hidden;
        for (int b = 0; b < B; b++)
            add_norm(p, x + (size_t)b * D, xb2 + (size_t)b * D, next_out + (size_t)b * D, next_norm, D, in->norm_eps, rfmt);
    }
    return DRIFT_OK;
}

/* logits=dtype: the LM head writes its logits in the model dtype. */
static void logits_out(const drift_numeric_profile *p, float *lg, int64_t n) {
    if (p->logits_lowp) num_round_acts(num_dtype_of(p), lg, n);
}

drift_status model_forward_seq(model_run_state *rs, drift_session *s, const int32_t *tokens, size_t n, int all_logits,
                               float *logits, float *hidden, drift_error *err) {
    const drift_model *m = s->m;
    if (n == 0) return DRIFT_OK;
    if (n > (size_t)(s->n_ctx - s->pos))
        return drift_error_set(err, DRIFT_ERR_INVALID, "context full: %zu tokens at position %d, session holds %d", n, s->pos, s->n_ctx);
    int B = (int)n, D = m->info.dim;
    drift_status st = rs_index(rs, B, err);
    if (st) return st;
    for (int b = 0; b < B; b++) {
        rs->sess[b] = s;
        rs->pos[b] = s->pos + b;
    }
#ifdef DRIFT_HAVE_CUDA
    if (m->dcu) { /* hidden states come back only when asked for */
        st = cuda_rows(m, rs->sess, rs->pos, tokens, B, hidden, logits, NULL, all_logits, err);
        if (!st) s->pos += B;
        return st;
    }
#endif
    if ((st = rs_acts(rs, m, B, err))) return st;
    float *hid = hidden ? hidden : rs->hid;
    if ((st = forward_rows(m, rs, rs->sess, rs->pos, tokens, B, hid, err))) return st;
    s->pos += B;
    if (logits) {
        if (all_logits) st = num_matmul(&m->prof, logits, hid, rs_weights(rs, &m->prof, &m->output), B, err);
        else st = num_matmul(&m->prof, logits, hid + (size_t)(B - 1) * D, rs_weights(rs, &m->prof, &m->output), 1, err);
        if (!st) logits_out(&m->prof, logits, (int64_t)(all_logits ? B : 1) * m->info.n_vocab);
    }
    return st;
}

drift_status drift_session_forward(drift_session *s, const int32_t *tokens, size_t n, int all_logits, float *logits, float *hidden,
                                   drift_error *err) {
    return model_forward_seq(&s->rs, s, tokens, n, all_logits, logits, hidden, err);
}

static int cmp_ptr(const void *a, const void *b) {
    uintptr_t x = (uintptr_t)*(void *const *)a, y = (uintptr_t)*(void *const *)b;
    return (x > y) - (x < y);
}

/* No session twice in one batch (sorted copy in rs->sorted: n log n, not
 * n^2 at batch 512). */
static drift_status check_distinct(model_run_state *rs, drift_session *const *sessions, size_t n, drift_error *err) {
    if (n < 2) return DRIFT_OK;
    drift_session **c = rs->sorted;
    memcpy(c, sessions, n * sizeof *c);
    qsort(c, n, sizeof *c, cmp_ptr);
    size_t i = 1;
    while (i < n && c[i] != c[i - 1]) i++;
    return i < n ? drift_error_set(err, DRIFT_ERR_INVALID, "session appears twice in one batch") : DRIFT_OK;
}

drift_status model_forward_step(model_run_state *rs, drift_session *const *sessions, const int32_t *tokens, size_t n,
                                float *logits, int32_t *next, drift_error *err) {
    if (n == 0) return DRIFT_OK;
    const drift_model *m = sessions[0]->m;
    int B = (int)n;
    drift_status st = rs_index(rs, B, err);
    if (st) return st;
    for (int b = 0; b < B; b++) {
        if (sessions[b]->m != m)
            return drift_error_set(err, DRIFT_ERR_INVALID, "batch mixes sessions of different models");
        rs->pos[b] = sessions[b]->pos;
    }
    if ((st = check_distinct(rs, sessions, n, err))) return st;
#ifdef DRIFT_HAVE_CUDA
    if (m->dcu) { /* no hidden states back; the greedy picks chosen on the device */
        st = cuda_rows(m, sessions, rs->pos, tokens, B, NULL, logits, next, 1, err);
        if (!st)
            for (int b = 0; b < B; b++) sessions[b]->pos++;
        return st;
    }
#endif
    if ((st = rs_acts(rs, m, B, err))) return st;
    if ((st = forward_rows(m, rs, sessions, rs->pos, tokens, B, rs->hid, err))) return st;
    for (int b = 0; b < B; b++) sessions[b]->pos++;
    if (logits || next) {
        int V = m->info.n_vocab;
        float *lg = logits ? logits : rs_logits(rs, m, B);
        if (!lg) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        st = num_matmul(&m->prof, lg, rs->hid, rs_weights(rs, &m->prof, &m->output), B, err);
        if (!st) logits_out(&m->prof, lg, (int64_t)B * V);
        for (int b = 0; !st && next && b < B; b++) next[b] = samp_argmax(lg + (size_t)b * V, V);
    }
    return st;
}

drift_status drift_session_forward_batch(drift_session *const *sessions, const int32_t *tokens, size_t n, float *logits,
                                         drift_error *err) {
    if (n == 0) return DRIFT_OK;
    return model_forward_step(&sessions[0]->rs, sessions, tokens, n, logits, NULL, err);
}

drift_status drift_session_forward_greedy(drift_session *const *sessions, const int32_t *tokens, size_t n, int32_t *next,
                                          drift_error *err) {
    if (n == 0) return DRIFT_OK;
    return model_forward_step(&sessions[0]->rs, sessions, tokens, n, NULL, next, err);
}
