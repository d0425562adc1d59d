/* model_load.c - a GGUF file -> drift_model: config, weights, device copy.
 *
 * drift_model_load maps the file (gguf.c), reads the architecture's
 * hyper-parameters from its metadata (llama.cpp's keys, "{arch}.*"), then
 * every tensor by llama.cpp's name, checking its shape (ne0 = input), and
 * converts each weight matrix to the profile's weight format (numerics.c;
 * a zero-copy view when the format is kept, and when f32 is asked of F16 /
 * BF16 tensors that the fast kernels widen as they read). k-quants, which the kernels
 * have no format for, are decoded to f32 and quantized. Mixture-of-experts
 * weights come as one 3-D tensor per projection or, in older Mixtral
 * conversions, one 2-D tensor per expert. With backend=cuda the converted
 * weights are then uploaded once (cuda_backend.h). Any missing key or
 * tensor, or wrong shape, is DRIFT_ERR_PARSE naming it; the model is freed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_internal.h"
#include "util/util.h"

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
        return drift_error_set(err, DRIFT_ERR_UNSUPPORTED, "tensor '%s': type %s not supported (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K are)",
                               t->name, gguf_dtype_name(t->type));
    }
}

/* weights=f32 over F16 / BF16 tensors: the fast CPU kernels' SIMD path reads
 * 16-bit rows in place and widens them in registers (or when packing a
 * panel), exactly the f32 values a converted copy would hold, with half the
 * bytes to stream per token. So the tensor stays a view of the file. Not for
 * the reference, the generic path (scalar ISA, f64 / bf16 accumulation,
 * pairwise) or the GPU, which use the f32 copy. */
static int keeps_16bit(const drift_numeric_profile *p, drift_dtype src) {
    if (p->weights != DRIFT_DTYPE_F32 || (src != DRIFT_DTYPE_F16 && src != DRIFT_DTYPE_BF16)) return 0;
    if (p->backend != DRIFT_BACKEND_CPU || p->isa == DRIFT_ISA_REF || num_isa_resolve(p->isa) == DRIFT_ISA_SCALAR) return 0;
    return p->accum == DRIFT_ACCUM_F32 && p->reduce != DRIFT_REDUCE_PAIRWISE;
}

/* Wraps rows x cols of data in the tensor's format and converts to the profile.
 * Q4_1, Q5_0, Q5_1 and the k-quants (which the kernels have no format for;
 * llama-quantize's Q4_K_M mixes Q5_0 into MoE experts whose rows are no
 * multiple of 256) are decoded to f32 first and
 * quantized to the profile's weight format (f32 when it says native). */
static drift_status mat_from(const drift_model *m, const gguf_tensor *t, const void *data, int64_t rows, int64_t cols,
                             num_qmat *out, drift_error *err) {
    drift_dtype d = DRIFT_DTYPE_F32;
    num_qmat src;
    if (t->type == GGUF_DT_Q4_1 || t->type == GGUF_DT_Q5_0 || t->type == GGUF_DT_Q5_1 || t->type == GGUF_DT_Q4_K ||
        t->type == GGUF_DT_Q5_K || t->type == GGUF_DT_Q6_K) {
        uint32_t be, bb;
        gguf_dtype_info(t->type, &be, &bb);
        uint64_t first = (uint64_t)((const uint8_t *)data - (const uint8_t *)t->data) / bb * be, n = (uint64_t)rows * (uint64_t)cols;
        float *buf = malloc((size_t)n * sizeof *buf);
        if (!buf) return drift_error_set(err, DRIFT_ERR_NOMEM, "tensor '%s': out of memory decoding %s", t->name, gguf_dtype_name(t->type));
        drift_status st = gguf_tensor_to_f32(t, first, n, buf, err);
        drift_dtype w = m->prof.weights == DRIFT_DTYPE_NATIVE ? DRIFT_DTYPE_F32 : m->prof.weights;
        if (!st) st = num_qmat_quantize(out, w, buf, rows, cols, m->prof.group_size, m->prof.weight_scale, err);
        free(buf);
        if (st) drift_error_prefix(err, "tensor '%s': ", t->name);
        return st;
    }
    drift_status st = dtype_of(t, &d, err);
    if (!st) st = num_qmat_wrap(&src, d, data, rows, cols, err);
    if (!st && keeps_16bit(&m->prof, d)) *out = src;
    else if (!st) st = num_qmat_convert(out, &src, &m->prof, err);
    if (st) drift_error_prefix(err, "tensor '%s': ", t->name);
    return st;
}

static drift_status load_mat(const drift_model *m, const char *name, int64_t rows, int64_t cols, num_qmat *out,
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
    /* store=dtype: norm weights and biases are tensors of the model dtype
     * too (as a bf16 checkpoint loaded in bf16 holds them) */
    if (!st) num_store_round(&m->prof, *out, n);
    return st;
}

static drift_status load_experts(const drift_model *m, const char *name, int n_exp, int64_t rows, int64_t cols, num_qmat **out,
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

static void free_mat(num_qmat *q) { num_qmat_free(q); }

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
    m->attn_prof = m->prof;
    m->kv_f32 = m->prof.backend == DRIFT_BACKEND_CPU && m->prof.kv != DRIFT_DTYPE_F32 &&
                m->info.head_dim <= MODEL_KV_F32_MAX_HD;
    if (m->kv_f32) m->attn_prof.kv = DRIFT_DTYPE_F32;
    m->kv_vec_bytes = num_kv_bytes(m->attn_prof.kv, m->info.head_dim);
#ifdef DRIFT_HAVE_CUDA
    if (m->prof.backend == DRIFT_BACKEND_CUDA && (st = cuda_upload(m, err))) {
        drift_model_free(m);
        return st;
    }
#endif
    model_pick_template(m);
    *out = m;
    return DRIFT_OK;
}

const drift_model_info *drift_model_get_info(const drift_model *m) { return &m->info; }
const drift_numeric_profile *drift_model_profile(const drift_model *m) { return &m->prof; }
