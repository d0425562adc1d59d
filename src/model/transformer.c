/* transformer.c - the forward pass of the embedded engine, llama2.c style.
 *
 *   drift_model     = config (drift_model_info + rope params) + weights
 *                     (layer_w: drift_qmat views into the GGUF mapping, or
 *                     copies converted to the profile's weight format)
 *   drift_session   = run state of one sequence: position + KV cache
 *                     (layer, n_ctx, n_kv_heads, kv_vec_bytes) in the
 *                     profile's KV format
 *   forward_rows    = one batch of B rows; row b is token tok[b] of session
 *                     sess[b] at position pos[b]. Prefill = B rows of one
 *                     session; batched decode = one row of each of B sessions.
 *
 * Per layer: rmsnorm -> q,k,v matmuls over all B rows (+ qwen2 biases) ->
 * RoPE -> K,V stored into each row's cache -> attention per (row, head) over
 * positions [max(0, pos - window + 1), pos] -> output matmul -> residual ->
 * rmsnorm -> SwiGLU FFN (dense, or MoE: softmax router, top-k, weights
 * renormalised, each expert's rows gathered into one matmul, slots summed in
 * rank order) -> residual. Then output_norm and the vocabulary matmul.
 *
 * Batch invariance: every matmul is batch-invariant (numerics' contract),
 * attention and norms are per row, the MoE sum order depends on the row's
 * own routing only; so a sequence's numbers never depend on its batch
 * companions, on prefill-vs-incremental feeding, or on the thread count.
 *
 * backend=cuda (built with DRIFT_HAVE_CUDA): the same rows go to
 * model/cuda/cuda_backend.h instead of forward_rows. The model keeps its host
 * weights (converted as above) and, after loading, a dcu_model holding a
 * device copy of them; a session holds a dcu_kv (its KV cache on the device)
 * instead of kc/vc, plus its position on the host. Token range and context
 * checks stay here; the vocabulary matmul runs on the device too (only the
 * logit rows asked for come back). Calls into the backend for one model are
 * serialized by the model's mutex, so a model stays shareable by threads
 * whatever the backend does with its scratch memory. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/model.h"
#include "model/gguf.h"
#include "model/numerics.h"
#include "model/sampler.h"
#include "model/tokenizer.h"
#include "util/util.h"
#ifdef DRIFT_HAVE_CUDA
#include <pthread.h>
#include "model/cuda/cuda_backend.h"
#endif

typedef struct layer_w {
    float *attn_norm;          /* (dim) */
    drift_qmat wq;             /* (n_heads * head_dim, dim) */
    drift_qmat wk, wv;         /* (n_kv_heads * head_dim, dim) */
    float *bq, *bk, *bv;       /* (q_dim), (kv_dim), (kv_dim): qwen2 only, else NULL */
    drift_qmat wo;             /* (dim, n_heads * head_dim) */
    float *ffn_norm;           /* (dim) */
    drift_qmat w_gate, w_up;   /* (hidden, dim)   dense FFN */
    drift_qmat w_down;         /* (dim, hidden) */
    drift_qmat router;         /* (n_experts, dim)               MoE */
    drift_qmat *e_gate, *e_up; /* n_experts x (hidden, dim) */
    drift_qmat *e_down;        /* n_experts x (dim, hidden) */
} layer_w;

enum { TPL_NONE, TPL_CHATML, TPL_LLAMA3, TPL_PHI3, TPL_INST };

struct drift_model {
    gguf_file *f;
    drift_tokenizer *tok;
    drift_numeric_profile prof;
    drift_model_info info;
    num_rope_params rope;
    float *rope_freqs;         /* (n_rot / 2) or NULL */
    drift_qmat tok_embd;       /* (n_vocab, dim) */
    drift_qmat output;         /* (n_vocab, dim); a view of tok_embd when tied */
    float *output_norm;        /* (dim) */
    layer_w *layers;           /* (n_layers) */
    int q_dim, kv_dim;
    size_t kv_vec_bytes;       /* one head's K or V vector in the KV format */
    int tpl;
#ifdef DRIFT_HAVE_CUDA
    dcu_model *dcu;            /* backend=cuda: the weights on the device; NULL on the CPU */
    pthread_mutex_t dcu_mu;    /* serializes this model's backend calls (init when dcu) */
#endif
};

struct drift_session {
    const drift_model *m;
    int n_ctx, pos;
    uint8_t *kc, *vc;          /* (n_layers, n_ctx, n_kv_heads, kv_vec_bytes); NULL on cuda */
#ifdef DRIFT_HAVE_CUDA
    dcu_kv *dkv;               /* backend=cuda: (n_layers, n_ctx, ...) on the device */
#endif
};

/* ------------------------------------------------------------------ loading */

static drift_status want_tensor(const drift_model *m, const char *name, int n_dims_min, const uint64_t *ne, int nd,
                                const gguf_tensor **out, drift_error *err) {
    const gguf_tensor *t = gguf_find_tensor(m->f, name);
    *out = t;
    if (!t) return drift_error_set(err, DRIFT_ERR_PARSE, "%s: tensor '%s' missing", m->f->path, name);
    int ok = (int)t->n_dims >= n_dims_min;
    for (int d = 0; d < GGUF_MAX_DIMS && ok; d++) ok = t->ne[d] == (d < nd ? ne[d] : 1);
    if (!ok)
        return drift_error_set(err, DRIFT_ERR_PARSE,
                               "%s: tensor '%s' has shape [%llu, %llu, %llu, %llu], expected [%llu, %llu, %llu] (ne0 = input)",
                               m->f->path, name, (unsigned long long)t->ne[0], (unsigned long long)t->ne[1],
                               (unsigned long long)t->ne[2], (unsigned long long)t->ne[3], (unsigned long long)ne[0],
                               (unsigned long long)(nd > 1 ? ne[1] : 1), (unsigned long long)(nd > 2 ? ne[2] : 1));
    return DRIFT_OK;
}

static drift_status dtype_of(const gguf_tensor *t, drift_dtype *d, drift_error *err) {
    switch (t->type) {
    case GGUF_DT_F32: *d = DRIFT_DTYPE_F32; return DRIFT_OK;
    case GGUF_DT_F16: *d = DRIFT_DTYPE_F16; return DRIFT_OK;
    case GGUF_DT_BF16: *d = DRIFT_DTYPE_BF16; return DRIFT_OK;
    case GGUF_DT_Q8_0: *d = DRIFT_DTYPE_Q8_0; return DRIFT_OK;
    case GGUF_DT_Q4_0: *d = DRIFT_DTYPE_Q4_0; return DRIFT_OK;
    default:
        return drift_error_set(err, DRIFT_ERR_UNSUPPORTED, "tensor '%s': type %s not supported (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K are)",
                               t->name, gguf_dtype_name(t->type));
    }
}

/* Wraps rows x cols of data in the tensor's format and converts to the profile.
 * k-quants (which the kernels have no format for) are decoded to f32 first and
 * quantized to the profile's weight format (f32 when it says native). */
static drift_status mat_from(const drift_model *m, const gguf_tensor *t, const void *data, int64_t rows, int64_t cols,
                             drift_qmat *out, drift_error *err) {
    drift_dtype d = DRIFT_DTYPE_F32;
    drift_qmat src;
    if (t->type == GGUF_DT_Q4_K || t->type == GGUF_DT_Q5_K || t->type == GGUF_DT_Q6_K) {
        uint32_t be, bb;
        gguf_dtype_info(t->type, &be, &bb);
        uint64_t first = (uint64_t)((const uint8_t *)data - (const uint8_t *)t->data) / bb * be, n = (uint64_t)rows * (uint64_t)cols;
        float *buf = malloc((size_t)n * sizeof *buf);
        if (!buf) return drift_error_set(err, DRIFT_ERR_NOMEM, "tensor '%s': out of memory decoding %s", t->name, gguf_dtype_name(t->type));
        drift_status st = gguf_tensor_to_f32(t, first, n, buf, err);
        drift_dtype w = m->prof.weights == DRIFT_DTYPE_NATIVE ? DRIFT_DTYPE_F32 : m->prof.weights;
        if (!st) st = drift_qmat_quantize(out, w, buf, rows, cols, m->prof.group_size, m->prof.weight_scale, err);
        free(buf);
        if (st) drift_error_prefix(err, "tensor '%s': ", t->name);
        return st;
    }
    drift_status st = dtype_of(t, &d, err);
    if (!st) st = drift_qmat_wrap(&src, d, data, rows, cols, err);
    if (!st) st = drift_qmat_convert(out, &src, &m->prof, err);
    if (st) drift_error_prefix(err, "tensor '%s': ", t->name);
    return st;
}

static drift_status load_mat(const drift_model *m, const char *name, int64_t rows, int64_t cols, drift_qmat *out,
                             drift_error *err) {
    const gguf_tensor *t;
    uint64_t ne[2] = {(uint64_t)cols, (uint64_t)rows};
    drift_status st = want_tensor(m, name, 1, ne, 2, &t, err);
    if (st) return st;
    return mat_from(m, t, t->data, rows, cols, out, err);
}

static drift_status load_vec(const drift_model *m, const char *name, int64_t n, int optional, float **out, drift_error *err) {
    *out = NULL;
    if (optional && !gguf_find_tensor(m->f, name)) return DRIFT_OK;
    const gguf_tensor *t;
    uint64_t ne[1] = {(uint64_t)n};
    drift_status st = want_tensor(m, name, 1, ne, 1, &t, err);
    if (st) return st;
    *out = malloc((size_t)n * sizeof(float));
    if (!*out) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    st = gguf_tensor_to_f32(t, 0, (uint64_t)n, *out, err);
    return st;
}

static drift_status load_experts(const drift_model *m, const char *name, int n_exp, int64_t rows, int64_t cols, drift_qmat **out,
                                 drift_error *err) {
    const gguf_tensor *t;
    uint64_t ne[3] = {(uint64_t)cols, (uint64_t)rows, (uint64_t)n_exp};
    drift_status st = want_tensor(m, name, 3, ne, 3, &t, err);
    if (st) return st;
    *out = calloc((size_t)n_exp, sizeof **out);
    if (!*out) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    size_t slice = (size_t)(t->n_bytes / (uint64_t)n_exp);
    for (int e = 0; e < n_exp && !st; e++) st = mat_from(m, t, (const uint8_t *)t->data + slice * (size_t)e, rows, cols, &(*out)[e], err);
    return st;
}

static int meta_int(const drift_model *m, const char *key, int64_t def, int64_t *out) {
    char full[160];
    snprintf(full, sizeof full, "%s.%s", m->info.arch, key);
    if (gguf_get_int(m->f, full, out) == 0) return 1;
    *out = def;
    return 0;
}

static int meta_float(const drift_model *m, const char *key, double def, double *out) {
    char full[160];
    snprintf(full, sizeof full, "%s.%s", m->info.arch, key);
    if (gguf_get_float(m->f, full, out) == 0) return 1;
    *out = def;
    return 0;
}

static drift_status need_int(const drift_model *m, const char *key, int64_t lo, int64_t hi, int *out, drift_error *err) {
    int64_t v;
    if (!meta_int(m, key, 0, &v))
        return drift_error_set(err, DRIFT_ERR_PARSE, "%s: metadata key '%s.%s' missing (integer)", m->f->path, m->info.arch, key);
    if (v < lo || v > hi)
        return drift_error_set(err, DRIFT_ERR_PARSE, "%s: %s.%s = %lld out of range [%lld, %lld]", m->f->path, m->info.arch, key,
                               (long long)v, (long long)lo, (long long)hi);
    *out = (int)v;
    return DRIFT_OK;
}

static void free_mat(drift_qmat *q) { drift_qmat_free(q); }

void drift_model_free(drift_model *m) {
    if (!m) return;
#ifdef DRIFT_HAVE_CUDA
    if (m->dcu) {
        dcu_model_free(m->dcu);
        pthread_mutex_destroy(&m->dcu_mu);
    }
#endif
    for (int l = 0; m->layers && l < m->info.n_layers; l++) {
        layer_w *w = &m->layers[l];
        free(w->attn_norm);
        free(w->ffn_norm);
        free(w->bq);
        free(w->bk);
        free(w->bv);
        free_mat(&w->wq);
        free_mat(&w->wk);
        free_mat(&w->wv);
        free_mat(&w->wo);
        free_mat(&w->w_gate);
        free_mat(&w->w_up);
        free_mat(&w->w_down);
        free_mat(&w->router);
        for (int e = 0; e < m->info.n_experts; e++) {
            if (w->e_gate) free_mat(&w->e_gate[e]);
            if (w->e_up) free_mat(&w->e_up[e]);
            if (w->e_down) free_mat(&w->e_down[e]);
        }
        free(w->e_gate);
        free(w->e_up);
        free(w->e_down);
    }
    free(m->layers);
    if (!m->info.tied_output) free_mat(&m->output);
    free_mat(&m->tok_embd);
    free(m->output_norm);
    free(m->rope_freqs);
    tok_free(m->tok);
    gguf_close(m->f);
    free(m);
}

static drift_status load_config(drift_model *m, const char *path, drift_error *err) {
    drift_model_info *in = &m->info;
    char *arch = gguf_get_string(m->f, "general.architecture");
    if (!arch) return drift_error_set(err, DRIFT_ERR_PARSE, "%s: general.architecture missing (string)", path);
    if (strcmp(arch, "llama") && strcmp(arch, "qwen2") && strcmp(arch, "mistral") && strcmp(arch, "mixtral")) {
        drift_status st = drift_error_set(err, DRIFT_ERR_UNSUPPORTED, "%s: architecture '%s' not supported (llama, qwen2, mistral, mixtral are)",
                                          path, arch);
        free(arch);
        return st;
    }
    snprintf(in->arch, sizeof in->arch, "%s", arch);
    free(arch);
    char *name = gguf_get_string(m->f, "general.name");
    if (name && *name) {
        snprintf(in->name, sizeof in->name, "%s", name);
    } else {
        const char *base = strrchr(path, '/');
        base = base ? base + 1 : path;
        snprintf(in->name, sizeof in->name, "%s", base);
        char *dot = strrchr(in->name, '.');
        if (dot && !strcmp(dot, ".gguf")) *dot = 0;
    }
    free(name);
    drift_status st;
    if ((st = need_int(m, "embedding_length", 1, 1 << 16, &in->dim, err)) ||
        (st = need_int(m, "block_count", 1, 1024, &in->n_layers, err)) ||
        (st = need_int(m, "feed_forward_length", 1, 1 << 20, &in->hidden_dim, err)) ||
        (st = need_int(m, "attention.head_count", 1, 1024, &in->n_heads, err)))
        return st;
    int64_t v;
    meta_int(m, "attention.head_count_kv", in->n_heads, &v);
    if (v < 1 || v > in->n_heads || in->n_heads % v)
        return drift_error_set(err, DRIFT_ERR_PARSE, "%s: attention.head_count_kv %lld must divide head_count %d", path, (long long)v,
                               in->n_heads);
    in->n_kv_heads = (int)v;
    meta_int(m, "attention.key_length", in->dim / in->n_heads, &v);
    if (v < 2 || v > 1024 || v % 2)
        return drift_error_set(err, DRIFT_ERR_PARSE, "%s: head dimension %lld must be even and in [2, 1024]", path, (long long)v);
    in->head_dim = (int)v;
    meta_int(m, "context_length", 4096, &v);
    in->n_ctx_train = v > 0 && v < (1 << 24) ? (int)v : 4096;
    meta_int(m, "expert_count", 0, &v);
    in->n_experts = (int)(v > 0 && v <= 256 ? v : 0);
    meta_int(m, "expert_used_count", 0, &v);
    in->n_experts_used = (int)v;
    if (in->n_experts && (in->n_experts_used < 1 || in->n_experts_used > in->n_experts || in->n_experts_used > 16))
        return drift_error_set(err, DRIFT_ERR_PARSE, "%s: expert_used_count %d must be in [1, min(16, expert_count %d)]", path,
                               in->n_experts_used, in->n_experts);
    if (!in->n_experts) in->n_experts_used = 0;
    meta_int(m, "attention.sliding_window", 0, &v);
    in->sliding_window = v > 0 && v < (1 << 24) ? (int)v : 0;
    double d;
    meta_float(m, "attention.layer_norm_rms_epsilon", 1e-5, &d);
    in->norm_eps = (float)d;
    meta_float(m, "rope.freq_base", 10000.0, &d);
    in->rope_theta = (float)d;
    in->rope_neox = !strcmp(in->arch, "qwen2");
    meta_int(m, "rope.dimension_count", in->head_dim, &v);
    if (v < 2 || v > in->head_dim || v % 2)
        return drift_error_set(err, DRIFT_ERR_PARSE, "%s: rope.dimension_count %lld must be even and <= head dim %d", path, (long long)v,
                               in->head_dim);
    num_rope_params *rp = &m->rope;
    rp->head_dim = in->head_dim;
    rp->n_rot = (int)v;
    rp->neox = in->rope_neox;
    rp->theta_base = in->rope_theta;
    rp->scaling_factor = 1.0f;
    rp->low_freq_factor = 1.0f;
    rp->high_freq_factor = 4.0f;
    char key[160];
    snprintf(key, sizeof key, "%s.rope.scaling.type", in->arch);
    char *stype = gguf_get_string(m->f, key);
    double factor = 1.0;
    int has_factor = meta_float(m, "rope.scaling.factor", 1.0, &factor);
    if (!has_factor) has_factor = meta_float(m, "rope.scale_linear", 1.0, &factor);
    if (gguf_find_tensor(m->f, "rope_freqs.weight")) {
        st = load_vec(m, "rope_freqs.weight", rp->n_rot / 2, 0, &m->rope_freqs, err);
        if (st) {
            free(stype);
            return st;
        }
        rp->freq_factors = m->rope_freqs;
    } else if (stype && !strcmp(stype, "llama3") && factor > 1) {
        rp->scaling_factor = (float)factor;
        meta_float(m, "rope.scaling.low_freq_factor", 1.0, &d);
        rp->low_freq_factor = (float)d;
        meta_float(m, "rope.scaling.high_freq_factor", 4.0, &d);
        rp->high_freq_factor = (float)d;
        meta_int(m, "rope.scaling.original_context_length", 8192, &v);
        rp->orig_ctx = (int)v;
    } else if (factor > 1 && (!stype || !strcmp(stype, "linear"))) {
        /* linear: theta = (pos / factor) * freq = pos * freq / factor */
        m->rope_freqs = malloc((size_t)(rp->n_rot / 2) * sizeof(float));
        if (!m->rope_freqs) {
            free(stype);
            return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        }
        for (int i = 0; i < rp->n_rot / 2; i++) m->rope_freqs[i] = (float)factor;
        rp->freq_factors = m->rope_freqs;
    } else if (stype && strcmp(stype, "none") && strcmp(stype, "linear") && strcmp(stype, "llama3")) {
        drift_status st2 = drift_error_set(err, DRIFT_ERR_UNSUPPORTED, "%s: rope scaling '%s' not supported (none, linear, llama3 are)", path, stype);
        free(stype);
        return st2;
    }
    free(stype);
    m->q_dim = in->n_heads * in->head_dim;
    m->kv_dim = in->n_kv_heads * in->head_dim;
    return DRIFT_OK;
}

static drift_status load_weights(drift_model *m, drift_error *err) {
    drift_model_info *in = &m->info;
    drift_status st;
    int D = in->dim, H = in->hidden_dim;
    if ((st = load_mat(m, "token_embd.weight", in->n_vocab, D, &m->tok_embd, err))) return st;
    if (gguf_find_tensor(m->f, "output.weight")) {
        if ((st = load_mat(m, "output.weight", in->n_vocab, D, &m->output, err))) return st;
    } else {
        m->output = m->tok_embd;
        m->output.owned = NULL;
        in->tied_output = 1;
    }
    if ((st = load_vec(m, "output_norm.weight", D, 0, &m->output_norm, err))) return st;
    m->layers = calloc((size_t)in->n_layers, sizeof *m->layers);
    if (!m->layers) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    char nm[96];
#define NAME(s) (snprintf(nm, sizeof nm, "blk.%d." s, l), nm)
    for (int l = 0; l < in->n_layers; l++) {
        layer_w *w = &m->layers[l];
        if ((st = load_vec(m, NAME("attn_norm.weight"), D, 0, &w->attn_norm, err)) ||
            (st = load_mat(m, NAME("attn_q.weight"), m->q_dim, D, &w->wq, err)) ||
            (st = load_mat(m, NAME("attn_k.weight"), m->kv_dim, D, &w->wk, err)) ||
            (st = load_mat(m, NAME("attn_v.weight"), m->kv_dim, D, &w->wv, err)) ||
            (st = load_mat(m, NAME("attn_output.weight"), D, m->q_dim, &w->wo, err)) ||
            (st = load_vec(m, NAME("attn_q.bias"), m->q_dim, 1, &w->bq, err)) ||
            (st = load_vec(m, NAME("attn_k.bias"), m->kv_dim, 1, &w->bk, err)) ||
            (st = load_vec(m, NAME("attn_v.bias"), m->kv_dim, 1, &w->bv, err)) ||
            (st = load_vec(m, NAME("ffn_norm.weight"), D, 0, &w->ffn_norm, err)))
            return st;
        if (in->n_experts && !gguf_find_tensor(m->f, NAME("ffn_gate_exps.weight")) && gguf_find_tensor(m->f, NAME("ffn_gate.0.weight"))) {
            /* older Mixtral conversions: one 2-D tensor per expert, blk.N.ffn_{gate,up,down}.E.weight */
            if ((st = load_mat(m, NAME("ffn_gate_inp.weight"), in->n_experts, D, &w->router, err))) return st;
            w->e_gate = calloc((size_t)in->n_experts, sizeof *w->e_gate);
            w->e_up = calloc((size_t)in->n_experts, sizeof *w->e_up);
            w->e_down = calloc((size_t)in->n_experts, sizeof *w->e_down);
            if (!w->e_gate || !w->e_up || !w->e_down) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
            for (int e = 0; e < in->n_experts; e++) {
                snprintf(nm, sizeof nm, "blk.%d.ffn_gate.%d.weight", l, e);
                if ((st = load_mat(m, nm, H, D, &w->e_gate[e], err))) return st;
                snprintf(nm, sizeof nm, "blk.%d.ffn_up.%d.weight", l, e);
                if ((st = load_mat(m, nm, H, D, &w->e_up[e], err))) return st;
                snprintf(nm, sizeof nm, "blk.%d.ffn_down.%d.weight", l, e);
                if ((st = load_mat(m, nm, D, H, &w->e_down[e], err))) return st;
            }
        } else if (in->n_experts) {
            if ((st = load_mat(m, NAME("ffn_gate_inp.weight"), in->n_experts, D, &w->router, err)) ||
                (st = load_experts(m, NAME("ffn_gate_exps.weight"), in->n_experts, H, D, &w->e_gate, err)) ||
                (st = load_experts(m, NAME("ffn_up_exps.weight"), in->n_experts, H, D, &w->e_up, err)) ||
                (st = load_experts(m, NAME("ffn_down_exps.weight"), in->n_experts, D, H, &w->e_down, err)))
                return st;
        } else {
            if ((st = load_mat(m, NAME("ffn_gate.weight"), H, D, &w->w_gate, err)) ||
                (st = load_mat(m, NAME("ffn_up.weight"), H, D, &w->w_up, err)) ||
                (st = load_mat(m, NAME("ffn_down.weight"), D, H, &w->w_down, err)))
                return st;
        }
    }
#undef NAME
    return DRIFT_OK;
}

static void pick_template(drift_model *m) {
    const char *name = "none";
    m->tpl = TPL_NONE;
    if (tok_find(m->tok, "<|im_start|>") >= 0 && tok_find(m->tok, "<|im_end|>") >= 0) {
        m->tpl = TPL_CHATML;
        name = "chatml";
    } else if (tok_find(m->tok, "<|start_header_id|>") >= 0 && tok_find(m->tok, "<|eot_id|>") >= 0) {
        m->tpl = TPL_LLAMA3;
        name = "llama3";
    } else if (tok_find(m->tok, "<|user|>") >= 0 && tok_find(m->tok, "<|assistant|>") >= 0 && tok_find(m->tok, "<|end|>") >= 0) {
        m->tpl = TPL_PHI3;
        name = "phi3";
    } else if (tok_get_kind(m->tok) == TOK_KIND_SPM) {
        m->tpl = TPL_INST;
        name = "inst";
    }
    snprintf(m->info.chat_template, sizeof m->info.chat_template, "%s", name);
}

#ifdef DRIFT_HAVE_CUDA
/* Uploads the loaded (converted) weights to the GPU: m->dcu. */
static drift_status cuda_upload(drift_model *m, drift_error *err) {
    const drift_model_info *in = &m->info;
    dcu_layer_desc *ld = calloc((size_t)in->n_layers, sizeof *ld);
    if (!ld) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    for (int l = 0; l < in->n_layers; l++) {
        const layer_w *w = &m->layers[l];
        dcu_layer_desc *d = &ld[l];
        d->attn_norm = w->attn_norm;
        d->ffn_norm = w->ffn_norm;
        d->wq = &w->wq;
        d->wk = &w->wk;
        d->wv = &w->wv;
        d->wo = &w->wo;
        d->bq = w->bq;
        d->bk = w->bk;
        d->bv = w->bv;
        if (in->n_experts) {
            d->router = &w->router;
            d->e_gate = w->e_gate;
            d->e_up = w->e_up;
            d->e_down = w->e_down;
        } else {
            d->w_gate = &w->w_gate;
            d->w_up = &w->w_up;
            d->w_down = &w->w_down;
        }
    }
    dcu_model_desc md = {
        .dim = in->dim, .hidden_dim = in->hidden_dim, .n_layers = in->n_layers, .n_heads = in->n_heads,
        .n_kv_heads = in->n_kv_heads, .head_dim = in->head_dim, .n_vocab = in->n_vocab, .n_experts = in->n_experts,
        .n_experts_used = in->n_experts_used, .sliding_window = in->sliding_window, .norm_eps = in->norm_eps,
        .rope = m->rope, .tok_embd = &m->tok_embd, .output = in->tied_output ? &m->tok_embd : &m->output,
        .output_norm = m->output_norm, .layers = ld};
    drift_status st = dcu_model_upload(&md, &m->prof, &m->dcu, err);
    free(ld);
    if (st) {
        m->dcu = NULL;
        return drift_error_prefix(err, "backend=cuda: uploading the weights: ");
    }
    if (pthread_mutex_init(&m->dcu_mu, NULL)) {
        dcu_model_free(m->dcu);
        m->dcu = NULL;
        return drift_error_set(err, DRIFT_ERR_INTERNAL, "backend=cuda: cannot create the model's mutex");
    }
    return DRIFT_OK;
}
#endif

drift_status drift_model_load(const char *path, const drift_numeric_profile *profile, drift_model **out, drift_error *err) {
    *out = NULL;
    drift_status st = drift_profile_validate(profile, err);
    if (st) return st;
#ifdef DRIFT_HAVE_CUDA
    /* before mapping and converting anything: fail fast and clearly */
    if (profile->backend == DRIFT_BACKEND_CUDA && dcu_device_count() == 0)
        return drift_error_set(err, DRIFT_ERR_UNSUPPORTED, "backend=cuda: no CUDA GPU found (no device, or no driver)");
#endif
    drift_model *m = calloc(1, sizeof *m);
    if (!m) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    m->prof = *profile;
    if ((st = gguf_open(path, &m->f, err)) || (st = load_config(m, path, err)) || (st = tok_load(m->f, &m->tok, err))) {
        drift_model_free(m);
        return st;
    }
    m->info.n_vocab = tok_n_vocab(m->tok);
    snprintf(m->info.tokenizer, sizeof m->info.tokenizer, "%s/%s", tok_get_kind(m->tok) == TOK_KIND_SPM ? "llama" : "gpt2",
             tok_pre_name(m->tok));
    if ((st = load_weights(m, err))) {
        drift_model_free(m);
        return st;
    }
    m->kv_vec_bytes = num_kv_bytes(m->prof.kv, m->info.head_dim);
#ifdef DRIFT_HAVE_CUDA
    if (m->prof.backend == DRIFT_BACKEND_CUDA && (st = cuda_upload(m, err))) {
        drift_model_free(m);
        return st;
    }
#endif
    pick_template(m);
    *out = m;
    return DRIFT_OK;
}

const drift_model_info *drift_model_get_info(const drift_model *m) { return &m->info; }
const drift_numeric_profile *drift_model_profile(const drift_model *m) { return &m->prof; }

/* ------------------------------------------------------------ tokenization */

drift_status drift_model_tokenize(const drift_model *m, const char *text, size_t len, int add_bos, int parse_special, int32_t **ids,
                                  size_t *n, drift_error *err) {
    if (add_bos < 0) add_bos = tok_add_bos_default(m->tok);
    return tok_encode(m->tok, text, len, add_bos, parse_special, ids, n, err);
}

char *drift_model_detokenize(const drift_model *m, const int32_t *ids, size_t n, size_t *len) {
    return tok_decode(m->tok, ids, n, 0, len);
}

char *drift_model_token_text(const drift_model *m, int32_t id) {
    drift_buf b = {0};
    if (tok_decode_token(m->tok, id, 1, &b)) {
        buf_free(&b);
        return NULL;
    }
    return buf_steal(&b);
}

int drift_model_is_eog(const drift_model *m, int32_t id) { return tok_is_eog(m->tok, id); }

typedef struct idvec {
    int32_t *v;
    size_t n, cap;
} idvec;

static drift_status idvec_add_text(const drift_model *m, idvec *o, const char *text, int add_bos, int special, drift_error *err) {
    int32_t *ids;
    size_t n;
    drift_status st = tok_encode(m->tok, text, strlen(text), add_bos, special, &ids, &n, err);
    if (st) return st;
    if (o->n + n > o->cap) {
        size_t nc = (o->n + n) * 2 + 16;
        int32_t *nv = realloc(o->v, nc * sizeof *nv);
        if (!nv) {
            free(ids);
            return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        }
        o->v = nv;
        o->cap = nc;
    }
    memcpy(o->v + o->n, ids, n * sizeof *ids);
    o->n += n;
    free(ids);
    return DRIFT_OK;
}

drift_status drift_model_chat_tokens(const drift_model *m, const char *msg, int32_t **ids, size_t *n, drift_error *err) {
    idvec o = {0};
    drift_status st;
    int bos = tok_add_bos_default(m->tok);
    switch (m->tpl) {
    case TPL_CHATML:
        st = idvec_add_text(m, &o, "<|im_start|>user\n", bos, 1, err);
        if (!st) st = idvec_add_text(m, &o, msg, 0, 0, err);
        if (!st) st = idvec_add_text(m, &o, "<|im_end|>\n<|im_start|>assistant\n", 0, 1, err);
        break;
    case TPL_LLAMA3:
        st = idvec_add_text(m, &o, "<|start_header_id|>user<|end_header_id|>\n\n", bos, 1, err);
        if (!st) st = idvec_add_text(m, &o, msg, 0, 0, err);
        if (!st) st = idvec_add_text(m, &o, "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n", 0, 1, err);
        break;
    case TPL_PHI3:
        st = idvec_add_text(m, &o, "<|user|>\n", bos, 1, err);
        if (!st) st = idvec_add_text(m, &o, msg, 0, 0, err);
        if (!st) st = idvec_add_text(m, &o, "<|end|>\n<|assistant|>\n", 0, 1, err);
        break;
    case TPL_INST: {
        drift_buf b = {0};
        if (buf_printf(&b, "[INST] %s [/INST]", msg)) {
            st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        } else {
            st = idvec_add_text(m, &o, b.data, bos, 0, err);
        }
        buf_free(&b);
        break;
    }
    default:
        st = idvec_add_text(m, &o, msg, bos, 0, err);
        break;
    }
    if (st) {
        free(o.v);
        return st;
    }
    *ids = o.v ? o.v : malloc(sizeof(int32_t));
    *n = o.n;
    return DRIFT_OK;
}

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
    free(s->kc);
    free(s->vc);
    free(s);
}

void drift_session_reset(drift_session *s) { s->pos = 0; }
int drift_session_pos(const drift_session *s) { return s->pos; }

/* ---------------------------------------------------------------- forward */

static uint8_t *kv_at(const drift_session *s, uint8_t *base, int layer, int pos, int kvh) {
    const drift_model *m = s->m;
    size_t idx = ((size_t)layer * (size_t)s->n_ctx + (size_t)pos) * (size_t)m->info.n_kv_heads + (size_t)kvh;
    return base + idx * m->kv_vec_bytes;
}

static int n_threads(const drift_numeric_profile *p) { return p->threads > 0 ? p->threads : omp_get_max_threads(); }

/* MoE FFN for B rows of xb (B, dim) -> out (B, dim). */
static drift_status moe_ffn(const drift_model *m, const layer_w *w, const float *xb, int B, float *out, drift_error *err) {
    const drift_model_info *in = &m->info;
    const drift_numeric_profile *p = &m->prof;
    int D = in->dim, H = in->hidden_dim, E = in->n_experts, K = in->n_experts_used;
    drift_status st = DRIFT_OK;
    float *logits = malloc((size_t)B * E * sizeof *logits);
    int *sel = malloc((size_t)B * K * sizeof *sel);
    float *wt = malloc((size_t)B * K * sizeof *wt);
    float *slot = malloc((size_t)B * K * D * sizeof *slot);   /* (B, K, dim) expert outputs */
    float *g = malloc((size_t)B * D * sizeof *g);             /* gathered rows */
    float *h1 = malloc((size_t)B * H * sizeof *h1), *h3 = malloc((size_t)B * H * sizeof *h3);
    float *o = malloc((size_t)B * D * sizeof *o);
    int *who = malloc((size_t)B * sizeof *who);
    double *pr = malloc((size_t)E * sizeof *pr);
    if (!logits || !sel || !wt || !slot || !g || !h1 || !h3 || !o || !who || !pr) {
        st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory (MoE, %d rows)", B);
        goto done;
    }
    if ((st = num_matmul(p, logits, xb, &w->router, B, err))) goto done;
    for (int b = 0; b < B; b++) {
        /* softmax over all experts in double, top-k (ties: lower index), renormalise */
        const float *lg = logits + (size_t)b * E;
        double mx = lg[0], s = 0;
        for (int e = 1; e < E; e++)
            if (lg[e] > mx) mx = lg[e];
        for (int e = 0; e < E; e++) s += (pr[e] = exp((double)lg[e] - mx));
        double tot = 0;
        for (int k = 0; k < K; k++) {
            int best = -1;
            for (int e = 0; e < E; e++) {
                int used = 0;
                for (int j = 0; j < k; j++) used |= sel[b * K + j] == e;
                if (!used && (best < 0 || pr[e] > pr[best])) best = e;
            }
            sel[b * K + k] = best;
            tot += pr[best] / s;
        }
        for (int k = 0; k < K; k++) wt[b * K + k] = (float)(pr[sel[b * K + k]] / s / tot);
    }
    for (int e = 0; e < E; e++) {
        int cnt = 0;
        for (int b = 0; b < B; b++)
            for (int k = 0; k < K; k++)
                if (sel[b * K + k] == e) {
                    who[cnt] = b * K + k;
                    memcpy(g + (size_t)cnt * D, xb + (size_t)b * D, (size_t)D * sizeof *g);
                    cnt++;
                }
        if (!cnt) continue;
        if ((st = num_matmul(p, h1, g, &w->e_gate[e], cnt, err)) || (st = num_matmul(p, h3, g, &w->e_up[e], cnt, err))) goto done;
        for (int r = 0; r < cnt; r++) num_swiglu(p, h1 + (size_t)r * H, h1 + (size_t)r * H, h3 + (size_t)r * H, H);
        if ((st = num_matmul(p, o, h1, &w->e_down[e], cnt, err))) goto done;
        for (int r = 0; r < cnt; r++) memcpy(slot + (size_t)who[r] * D, o + (size_t)r * D, (size_t)D * sizeof *o);
    }
    for (int b = 0; b < B; b++) {
        float *ob = out + (size_t)b * D;
        for (int d = 0; d < D; d++) {
            float acc = 0;
            for (int k = 0; k < K; k++) acc += wt[b * K + k] * slot[((size_t)b * K + k) * D + d];
            ob[d] = acc;
        }
    }
done:
    free(logits);
    free(sel);
    free(wt);
    free(slot);
    free(g);
    free(h1);
    free(h3);
    free(o);
    free(who);
    free(pr);
    return st;
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

/* B rows: token tok[b] of session sess[b] at position pos[b] (its K/V are
 * written there). hidden (B, dim) receives the final normed hidden states. */
static drift_status forward_rows(const drift_model *m, drift_session *const *sess, const int *pos, const int32_t *tok, int B,
                                 float *hidden, drift_error *err) {
    const drift_model_info *in = &m->info;
    const drift_numeric_profile *p = &m->prof;
    int D = in->dim, H = in->hidden_dim, hd = in->head_dim, QD = m->q_dim, KVD = m->kv_dim;
    int nt = n_threads(p);
    drift_status st = check_rows(m, sess, pos, tok, B, err);
    if (st) return st;
    int max_pos = 0;
    for (int b = 0; b < B; b++)
        if (pos[b] + 1 > max_pos) max_pos = pos[b] + 1;
    float *x = malloc((size_t)B * D * sizeof *x);          /* (B, dim) residual stream */
    float *xb = malloc((size_t)B * D * sizeof *xb);        /* (B, dim) normed input */
    float *xb2 = malloc((size_t)B * D * sizeof *xb2);      /* (B, dim) branch output */
    float *q = malloc((size_t)B * QD * sizeof *q);         /* (B, n_heads * hd) */
    float *k = malloc((size_t)B * KVD * sizeof *k);        /* (B, n_kv_heads * hd) */
    float *v = malloc((size_t)B * KVD * sizeof *v);
    float *att = malloc((size_t)B * QD * sizeof *att);     /* (B, n_heads * hd) */
    float *h1 = in->n_experts ? NULL : malloc((size_t)B * H * sizeof *h1); /* (B, hidden) */
    float *h3 = in->n_experts ? NULL : malloc((size_t)B * H * sizeof *h3);
    size_t scr_n = (size_t)max_pos + 2 * (size_t)hd + 16;
    float *scratch = malloc((size_t)nt * scr_n * sizeof *scratch);
    if (!x || !xb || !xb2 || !q || !k || !v || !att || (!in->n_experts && (!h1 || !h3)) || !scratch) {
        st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory for a batch of %d rows", B);
        goto done;
    }
    for (int b = 0; b < B; b++) num_embedding(p, x + (size_t)b * D, &m->tok_embd, tok[b]);
    float scale = 1.0f / sqrtf((float)hd);
    int group = in->n_heads / in->n_kv_heads;
    for (int l = 0; l < in->n_layers; l++) {
        const layer_w *w = &m->layers[l];
        /* attention rmsnorm */
        for (int b = 0; b < B; b++) num_rmsnorm(p, xb + (size_t)b * D, x + (size_t)b * D, w->attn_norm, D, in->norm_eps);
        /* q, k, v = xb @ Wq^T, Wk^T, Wv^T (+ bias) */
        if ((st = num_matmul(p, q, xb, &w->wq, B, err)) || (st = num_matmul(p, k, xb, &w->wk, B, err)) ||
            (st = num_matmul(p, v, xb, &w->wv, B, err)))
            goto done;
        for (int b = 0; b < B; b++) {
            if (w->bq) num_add(q + (size_t)b * QD, q + (size_t)b * QD, w->bq, QD);
            if (w->bk) num_add(k + (size_t)b * KVD, k + (size_t)b * KVD, w->bk, KVD);
            if (w->bv) num_add(v + (size_t)b * KVD, v + (size_t)b * KVD, w->bv, KVD);
            /* RoPE on q and k at the row's position */
            num_rope(p, q + (size_t)b * QD, in->n_heads, pos[b], &m->rope);
            num_rope(p, k + (size_t)b * KVD, in->n_kv_heads, pos[b], &m->rope);
            /* K, V into the cache */
            for (int j = 0; j < in->n_kv_heads; j++) {
                num_kv_store(p->kv, kv_at(sess[b], sess[b]->kc, l, pos[b], j), k + (size_t)b * KVD + (size_t)j * hd, hd);
                num_kv_store(p->kv, kv_at(sess[b], sess[b]->vc, l, pos[b], j), v + (size_t)b * KVD + (size_t)j * hd, hd);
            }
        }
        /* attention per (row, head) over the causal (and sliding) window */
        /* threads only when there is enough work to pay for a parallel region */
        int par = (long)B * in->n_heads * max_pos * hd >= 262144L;
#pragma omp parallel for num_threads(nt) schedule(static) if (par)
        for (int bh = 0; bh < B * in->n_heads; bh++) {
            int b = bh / in->n_heads, h = bh % in->n_heads, kvh = h / group;
            int start = in->sliding_window > 0 && pos[b] + 1 > in->sliding_window ? pos[b] + 1 - in->sliding_window : 0;
            int n_pos = pos[b] - start + 1;
            size_t stride = (size_t)in->n_kv_heads * m->kv_vec_bytes;
            float *scr = scratch + (size_t)omp_get_thread_num() * scr_n;
            num_attention(p, att + (size_t)b * QD + (size_t)h * hd, q + (size_t)b * QD + (size_t)h * hd,
                          kv_at(sess[b], sess[b]->kc, l, start, kvh), kv_at(sess[b], sess[b]->vc, l, start, kvh), stride, n_pos,
                          hd, scale, scr);
        }
        /* output projection and residual */
        if ((st = num_matmul(p, xb2, att, &w->wo, B, err))) goto done;
        for (int b = 0; b < B; b++) {
            num_add(x + (size_t)b * D, x + (size_t)b * D, xb2 + (size_t)b * D, D);
            num_round_acts(p->acts, x + (size_t)b * D, D);
        }
        /* FFN rmsnorm, SwiGLU FFN (dense or MoE), residual */
        for (int b = 0; b < B; b++) num_rmsnorm(p, xb + (size_t)b * D, x + (size_t)b * D, w->ffn_norm, D, in->norm_eps);
        if (in->n_experts) {
            if ((st = moe_ffn(m, w, xb, B, xb2, err))) goto done;
        } else {
            if ((st = num_matmul(p, h1, xb, &w->w_gate, B, err)) || (st = num_matmul(p, h3, xb, &w->w_up, B, err))) goto done;
            for (int b = 0; b < B; b++) num_swiglu(p, h1 + (size_t)b * H, h1 + (size_t)b * H, h3 + (size_t)b * H, H);
            if ((st = num_matmul(p, xb2, h1, &w->w_down, B, err))) goto done;
        }
        for (int b = 0; b < B; b++) {
            num_add(x + (size_t)b * D, x + (size_t)b * D, xb2 + (size_t)b * D, D);
            num_round_acts(p->acts, x + (size_t)b * D, D);
        }
    }
    /* final rmsnorm */
    for (int b = 0; b < B; b++) num_rmsnorm(p, hidden + (size_t)b * D, x + (size_t)b * D, m->output_norm, D, in->norm_eps);
done:
    free(x);
    free(xb);
    free(xb2);
    free(q);
    free(k);
    free(v);
    free(att);
    free(h1);
    free(h3);
    free(scratch);
    return st;
}

drift_status drift_session_forward(drift_session *s, const int32_t *tokens, size_t n, int all_logits, float *logits, float *hidden,
                                   drift_error *err) {
    const drift_model *m = s->m;
    if (n == 0) return DRIFT_OK;
    if (n > (size_t)(s->n_ctx - s->pos))
        return drift_error_set(err, DRIFT_ERR_INVALID, "context full: %zu tokens at position %d, session holds %d", n, s->pos, s->n_ctx);
    int B = (int)n, D = m->info.dim;
    drift_session **sess = malloc(n * sizeof *sess);
    int *pos = malloc(n * sizeof *pos);
    float *hid = hidden ? hidden : malloc(n * (size_t)D * sizeof *hid);
    drift_status st = DRIFT_OK;
    if (!sess || !pos || !hid) {
        st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int b = 0; b < B; b++) {
        sess[b] = s;
        pos[b] = s->pos + b;
    }
#ifdef DRIFT_HAVE_CUDA
    if (m->dcu) { /* hidden states come back only when asked for */
        st = cuda_rows(m, sess, pos, tokens, B, hidden, logits, NULL, all_logits, err);
        if (!st) s->pos += B;
        goto done;
    }
#endif
    st = forward_rows(m, sess, pos, tokens, B, hid, err);
    if (st) goto done;
    s->pos += B;
    if (logits) {
        if (all_logits) st = num_matmul(&m->prof, logits, hid, &m->output, B, err);
        else st = num_matmul(&m->prof, logits, hid + (size_t)(B - 1) * D, &m->output, 1, err);
    }
done:
    free(sess);
    free(pos);
    if (hid != hidden) free(hid);
    return st;
}

static int cmp_ptr(const void *a, const void *b) {
    uintptr_t x = (uintptr_t)*(void *const *)a, y = (uintptr_t)*(void *const *)b;
    return (x > y) - (x < y);
}

/* No session twice in one batch (sorted copy: n log n, not n^2 at batch 512). */
static drift_status check_distinct(drift_session *const *sessions, size_t n, drift_error *err) {
    if (n < 2) return DRIFT_OK;
    drift_session **c = malloc(n * sizeof *c);
    if (!c) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    memcpy(c, sessions, n * sizeof *c);
    qsort(c, n, sizeof *c, cmp_ptr);
    size_t i = 1;
    while (i < n && c[i] != c[i - 1]) i++;
    free(c);
    return i < n ? drift_error_set(err, DRIFT_ERR_INVALID, "session appears twice in one batch") : DRIFT_OK;
}

/* One step of n sessions: logits (n, n_vocab) and / or next (n greedy picks)
 * of every row; either may be NULL. */
static drift_status batch_step(drift_session *const *sessions, const int32_t *tokens, size_t n, float *logits, int32_t *next,
                               drift_error *err) {
    if (n == 0) return DRIFT_OK;
    const drift_model *m = sessions[0]->m;
    int B = (int)n, D = m->info.dim;
#ifdef DRIFT_HAVE_CUDA
    const int on_gpu = m->dcu != NULL;
#else
    const int on_gpu = 0;
#endif
    int *pos = calloc(n, sizeof *pos);
    float *hid = on_gpu ? NULL : malloc(n * (size_t)D * sizeof *hid); /* the GPU's stay on the GPU */
    drift_status st = DRIFT_OK;
    if (!pos || (!on_gpu && !hid)) {
        st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int b = 0; b < B; b++) {
        if (sessions[b]->m != m) {
            st = drift_error_set(err, DRIFT_ERR_INVALID, "batch mixes sessions of different models");
            goto done;
        }
        pos[b] = sessions[b]->pos;
    }
    if ((st = check_distinct(sessions, n, err))) goto done;
#ifdef DRIFT_HAVE_CUDA
    if (on_gpu) { /* no hidden states back; the greedy picks chosen on the device */
        st = cuda_rows(m, sessions, pos, tokens, B, NULL, logits, next, 1, err);
        if (!st)
            for (int b = 0; b < B; b++) sessions[b]->pos++;
        goto done;
    }
#endif
    if ((st = forward_rows(m, sessions, pos, tokens, B, hid, err))) goto done;
    for (int b = 0; b < B; b++) sessions[b]->pos++;
    if (logits || next) {
        int V = m->info.n_vocab;
        float *lg = logits ? logits : malloc((size_t)B * V * sizeof *lg);
        if (!lg) {
            st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
            goto done;
        }
        st = num_matmul(&m->prof, lg, hid, &m->output, B, err);
        for (int b = 0; !st && next && b < B; b++) next[b] = samp_argmax(lg + (size_t)b * V, V);
        if (lg != logits) free(lg);
    }
done:
    free(pos);
    free(hid);
    return st;
}

drift_status drift_session_forward_batch(drift_session *const *sessions, const int32_t *tokens, size_t n, float *logits,
                                         drift_error *err) {
    return batch_step(sessions, tokens, n, logits, NULL, err);
}

drift_status drift_session_forward_greedy(drift_session *const *sessions, const int32_t *tokens, size_t n, int32_t *next,
                                          drift_error *err) {
    return batch_step(sessions, tokens, n, NULL, next, err);
}

/* -------------------------------------------------------------- generation */

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
    drift_rng rng;
    drift_buf text;
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

/* Prefills sequence i; on failure records the error in g and marks it done. */
static void seq_start(const drift_model *m, seqstate *q, const int32_t *prompt, size_t plen, const drift_gen_params *pr, uint64_t seed,
                      drift_generation *g) {
    drift_error e;
    float *logits = malloc((size_t)m->info.n_vocab * sizeof *logits);
    drift_rng_seed(&q->rng, seed);
    g->prompt_tokens = (int)plen;
    drift_status st = logits ? DRIFT_OK : drift_error_set(&e, DRIFT_ERR_NOMEM, "out of memory");
    if (!st && plen == 0) st = drift_error_set(&e, DRIFT_ERR_INVALID, "empty prompt (no tokens)");
    if (!st && plen >= (size_t)m->info.n_ctx_train)
        st = drift_error_set(&e, DRIFT_ERR_INVALID, "prompt of %zu tokens does not fit the context of %d", plen, m->info.n_ctx_train);
    if (!st) st = drift_session_new(m, ctx_for(m, plen, pr), &q->s, &e);
    if (!st) st = drift_session_forward(q->s, prompt, plen, 0, logits, NULL, &e);
    if (st) {
        g->error = drift_strdup(e.msg);
        q->done = 1;
        free(logits);
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
    free(logits);
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
    drift_status st = DRIFT_OK;
    if (!qs || !live || !feed || !idx || (!greedy && !logits) || (greedy && !picks)) {
        st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t g0 = 0; g0 < n; g0 += (size_t)batch) {
        int nb = (int)(n - g0 < (size_t)batch ? n - g0 : (size_t)batch);
        for (int i = 0; i < nb; i++) {
            memset(&qs[i], 0, sizeof qs[i]);
            out[g0 + i].finish_reason = "length";
            if (cancel && cancel(cancel_user, g0 + (size_t)i)) { /* no prefill */
                qs[i].done = 1;
                out[g0 + i].finish_reason = "cancelled";
                continue;
            }
            uint64_t seed = (uint64_t)params->seed + (uint64_t)(seed_offsets ? seed_offsets[g0 + i] : 0);
            seq_start(m, &qs[i], prompts[g0 + i], prompt_lens[g0 + i], params, seed, &out[g0 + i]);
        }
        for (;;) {
            int nl = 0;
            for (int i = 0; i < nb; i++) {
                if (!qs[i].done && cancel && cancel(cancel_user, g0 + (size_t)i)) {
                    qs[i].done = 1;
                    out[g0 + i].finish_reason = "cancelled";
                }
                if (!qs[i].done) {
                    live[nl] = qs[i].s;
                    feed[nl] = qs[i].next;
                    idx[nl++] = i;
                }
            }
            if (!nl) break;
            drift_error e;
            drift_status s2 = greedy ? drift_session_forward_greedy(live, feed, (size_t)nl, picks, &e)
                                     : drift_session_forward_batch(live, feed, (size_t)nl, logits, &e);
            if (s2) {
                for (int j = 0; j < nl; j++) {
                    out[g0 + idx[j]].error = drift_strdup(e.msg);
                    qs[idx[j]].done = 1;
                }
                continue;
            }
            for (int j = 0; j < nl; j++) {
                seqstate *q = &qs[idx[j]];
                const float *lg = greedy ? NULL : logits + (size_t)j * V; /* seq_accept reads it for logprobs only */
                int32_t id = greedy ? picks[j] : samp_pick(lg, V, params, &q->rng);
                seq_accept(m, q, lg, id, params, &out[g0 + idx[j]]);
                q->next = id;
            }
        }
        for (int i = 0; i < nb; i++) {
            seq_finish(&qs[i], &out[g0 + i]);
            buf_free(&qs[i].text);
            free(qs[i].toks);
            free(qs[i].lp);
        }
    }
done:
    free(qs);
    free(live);
    free(feed);
    free(idx);
    free(logits);
    free(picks);
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
