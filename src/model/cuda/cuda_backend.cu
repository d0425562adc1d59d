/* cuda_backend.cu - the C interface of the CUDA backend (cuda_backend.h):
 * devices, weight upload, KV caches, the forward pass. The single ops for
 * the tests are in cuda_ops.cu, the device benchmarks in cuda_bench.cu.
 *
 * A dcu_model owns one CUDA stream, a cuBLAS and a cuBLASLt handle, every
 * weight (uploaded once, in its format, with its scales) and a workspace of
 * activation buffers that grows with the largest batch seen (never freed and
 * re-allocated inside a forward). dcu_forward queues the whole pass on the
 * stream and synchronizes once at the end (and, for MoE layers with large
 * experts, once per layer: the host lists each expert's rows).
 *
 * Forward, per layer (kernels in cuda_kernels.cu, products in cuda_matmul.cu):
 *   norm+prep (the residual add and act() rounding of the previous block
 *   fused in) -> q|k|v in one product when the three matrices can be stacked
 *   (same format and scales), else three into one buffer -> bias + RoPE +
 *   K/V store for all rows (so every row of a prefill sees all K/V written
 *   before any attends: the next kernel starts after this one) -> split-KV
 *   attention -> prep -> wo -> add+norm+prep -> gate|up (stacked when
 *   possible) -> SwiGLU+prep -> down (or the MoE: router, top-k on the
 *   GPU, then every expert for every row and the chosen outputs weighted in
 *   rank order (small experts), or per-expert gather / products / scatter
 *   from the host's lists and the weighted sum in rank order) ->
 *   the next layer's add+norm+prep, or the final rmsnorm into hidden.
 *   Logits: the rows asked for are gathered from hidden, rounded, and go
 *   through the output matrix.
 *
 * Errors: every CUDA / cuBLAS status is checked; messages say "cuda: ..."
 * with the library's own error string. Nothing prints or exits. */
#include "model/cuda/cuda_internal.cuh"

#include <math.h>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <new>
#include <thread>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <vector>

/* ------------------------------------------------------------------ errors */

drift_status dcu_fail(drift_error *err, cudaError_t e, const char *what) {
    drift_status code = e == cudaErrorMemoryAllocation ? DRIFT_ERR_NOMEM
                        : (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver) ? DRIFT_ERR_UNSUPPORTED
                                                                                          : DRIFT_ERR_INTERNAL;
    return drift_error_set(err, code, "cuda: %s (%s)", what, cudaGetErrorString(e));
}

drift_status dcu_blas_fail(drift_error *err, cublasStatus_t s, const char *what) {
    drift_status code = s == CUBLAS_STATUS_ALLOC_FAILED     ? DRIFT_ERR_NOMEM
                        : s == CUBLAS_STATUS_NOT_SUPPORTED ? DRIFT_ERR_UNSUPPORTED
                                                           : DRIFT_ERR_INTERNAL;
    return drift_error_set(err, code, "cuda: %s (%s)", what, cublasGetStatusString(s));
}

/* ----------------------------------------------------------------- context */

int dcu_env_not_zero(const char *name) {
    const char *e = getenv(name);
    return !(e && !strcmp(e, "0"));
}

/* dcu_env_not_zero(name), read once into *cache (-1: not yet) */
static int env_switch_on(int *cache, const char *name) {
    if (*cache < 0) *cache = dcu_env_not_zero(name);
    return *cache;
}

int dcu_pdl_on(void) {
    static int on = -1;
    return env_switch_on(&on, "DRIFT_CUDA_PDL");
}

int dcu_fuse_on(void) {
    static int on = -1;
    return env_switch_on(&on, "DRIFT_CUDA_FUSE");
}

#define LT_WORKSPACE (32u << 20)

drift_status dcu_ctx_init(dcu_ctx *c, drift_error *err) {
    memset(c, 0, sizeof *c);
    DCU_TRY(cudaSetDevice(0), "selecting device 0");
    int sm = 0;
    DCU_TRY(cudaDeviceGetAttribute(&sm, cudaDevAttrMultiProcessorCount, 0), "querying the SM count");
    c->sm_count = sm > 0 ? sm : 1;
    DCU_TRY(cudaStreamCreateWithFlags(&c->st, cudaStreamNonBlocking), "creating a stream");
    DCU_TRY_BLAS(cublasCreate(&c->blas), "cublasCreate");
    DCU_TRY_BLAS(cublasSetStream(c->blas, c->st), "cublasSetStream");
    DCU_TRY_BLAS(cublasSetMathMode(c->blas, CUBLAS_DEFAULT_MATH), "cublasSetMathMode"); /* no TF32 */
    DCU_TRY_BLAS(cublasLtCreate(&c->lt), "cublasLtCreate");
    DCU_TRY(cudaMalloc(&c->lt_ws, LT_WORKSPACE), "allocating the cuBLASLt workspace");
    c->lt_ws_bytes = LT_WORKSPACE;
    return DRIFT_OK;
}

void dcu_ctx_destroy(dcu_ctx *c) {
    if (c->st) cudaStreamSynchronize(c->st);
    if (c->lt_ws) cudaFree(c->lt_ws);
    if (c->lt) cublasLtDestroy(c->lt);
    if (c->blas) cublasDestroy(c->blas);
    if (c->st) cudaStreamDestroy(c->st);
    memset(c, 0, sizeof *c);
}

/* ------------------------------------------------------------------ device */

extern "C" int dcu_device_count(void) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        cudaGetLastError(); /* clear it */
        return 0;
    }
    return n > 0 ? n : 0;
}

extern "C" drift_status dcu_device_get_info(dcu_device_info *out, drift_error *err) {
    memset(out, 0, sizeof *out);
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return drift_error_set(err, DRIFT_ERR_UNSUPPORTED, "cuda: no GPU (%s)", cudaGetErrorString(e));
    }
    if (n < 1) return drift_error_set(err, DRIFT_ERR_UNSUPPORTED, "cuda: no GPU (no CUDA device visible)");
    cudaDeviceProp prop;
    DCU_TRY(cudaGetDeviceProperties(&prop, 0), "reading device 0's properties");
    snprintf(out->name, sizeof out->name, "%s", prop.name);
    /* short name: lower case, vendor dropped, spaces -> '-' */
    const char *s = prop.name;
    if (!strncmp(s, "NVIDIA ", 7)) s += 7;
    size_t j = 0;
    for (; *s && j + 1 < sizeof out->short_name; s++) {
        char ch = *s;
        if (ch >= 'A' && ch <= 'Z') ch = (char)(ch - 'A' + 'a');
        if (ch == ' ') ch = '-';
        out->short_name[j++] = ch;
    }
    out->short_name[j] = 0;
    out->cc_major = prop.major;
    out->cc_minor = prop.minor;
    out->sm_count = prop.multiProcessorCount;
    out->mem_bytes = prop.totalGlobalMem;
    DCU_TRY(cudaDriverGetVersion(&out->driver_version), "cudaDriverGetVersion");
    DCU_TRY(cudaRuntimeGetVersion(&out->runtime_version), "cudaRuntimeGetVersion");
    return DRIFT_OK;
}

/* ----------------------------------------------------------------- uploads */

static bool is16(int dt) { return dt == DRIFT_DTYPE_F16 || dt == DRIFT_DTYPE_BF16; }

/* Matrices that can be stacked into one (rows concatenated): the same
 * format, columns, group, scale layout and tensor scale. */
static bool can_stack(const num_qmat *const *ms, int n) {
    for (int i = 1; i < n; i++) {
        const num_qmat *a = ms[0], *b = ms[i];
        if (a->dtype != b->dtype || a->cols != b->cols || (a->scales == NULL) != (b->scales == NULL) ||
            memcmp(&a->tensor_scale, &b->tensor_scale, sizeof(float)))
            return false;
        if (a->scales && a->group != b->group) return false;
    }
    return true;
}

/* Uploads n matrices (can_stack) as one device matrix of their rows. */
drift_status dcu_upload_mats(dcu_allocs *al, const num_qmat *const *ms, int n, dmat *out, drift_error *err) {
    memset(out, 0, sizeof *out);
    const num_qmat *m0 = ms[0];
    const num_traits *tr = num_traits_of(m0->dtype);
    if (!tr) return drift_error_set(err, DRIFT_ERR_INVALID, "cuda: weight format %d has no traits", (int)m0->dtype);
    int64_t K = m0->cols, N = 0;
    size_t rb = num_row_bytes(m0->dtype, K);
    for (int i = 0; i < n; i++) {
        if (ms[i]->rows <= 0 || ms[i]->row_bytes != rb || !ms[i]->data)
            return drift_error_set(err, DRIFT_ERR_INVALID, "cuda: malformed %s matrix (%lld x %lld)", tr->name,
                                   (long long)ms[i]->rows, (long long)ms[i]->cols);
        N += ms[i]->rows;
    }
    out->dt = m0->dtype;
    out->rows = N;
    out->cols = K;
    out->ts = m0->tensor_scale;
    out->group = m0->group > 0 ? m0->group : (int)K;
    drift_status st;
    void *p;
    if (is16(m0->dtype)) {
        out->kp = dcu_pad16(K);
        out->np = dcu_pad16(N);
        out->ld = (size_t)out->kp * 2;
        size_t bytes = (size_t)out->np * out->ld;
        if ((st = al->get(bytes, &p, "weights", err))) return st;
        DCU_TRY(cudaMemset(p, 0, bytes), "clearing weight padding");
        int64_t r0 = 0;
        for (int i = 0; i < n; i++) {
            DCU_TRY(cudaMemcpy2D((uint8_t *)p + (size_t)r0 * out->ld, out->ld, ms[i]->data, rb, rb,
                                 (size_t)ms[i]->rows, cudaMemcpyHostToDevice),
                    "uploading weights");
            r0 += ms[i]->rows;
        }
    } else {
        out->kp = K;
        out->np = N;
        out->ld = rb;
        if ((st = al->get((size_t)N * rb, &p, "weights", err))) return st;
        int64_t r0 = 0;
        for (int i = 0; i < n; i++) {
            DCU_TRY(cudaMemcpy((uint8_t *)p + (size_t)r0 * rb, ms[i]->data, (size_t)ms[i]->rows * rb,
                               cudaMemcpyHostToDevice),
                    "uploading weights");
            r0 += ms[i]->rows;
        }
    }
    out->data = (const uint8_t *)p;
    if (m0->scales) {
        out->gpr = (int)(K / out->group);
        size_t per = (size_t)out->gpr * sizeof(float);
        if ((st = al->get((size_t)N * per, &p, "weight scales", err))) return st;
        int64_t r0 = 0;
        for (int i = 0; i < n; i++) {
            DCU_TRY(cudaMemcpy((uint8_t *)p + (size_t)r0 * per, ms[i]->scales, (size_t)ms[i]->rows * per,
                               cudaMemcpyHostToDevice),
                    "uploading weight scales");
            r0 += ms[i]->rows;
        }
        out->scales = (const float *)p;
    }
    return DRIFT_OK;
}

/* rows [r0, r0 + rows) of an uploaded matrix as a matrix of its own (16-bit
 * formats: rows a multiple of 16, so the view holds no padding) */
static dmat mat_view(const dmat &S, int64_t r0, int64_t rows) {
    dmat v = S;
    v.rows = rows;
    v.np = is16(S.dt) ? dcu_pad16(rows) : rows;
    v.data = S.data + (size_t)r0 * S.ld;
    if (S.scales) v.scales = S.scales + (size_t)r0 * (size_t)S.gpr;
    return v;
}

static drift_status upload_vec(dcu_allocs *al, const float *v, int64_t n, const float **out, drift_error *err) {
    *out = NULL;
    if (!v) return DRIFT_OK;
    void *p;
    drift_status st = al->get((size_t)n * sizeof(float), &p, "a vector", err);
    if (st) return st;
    DCU_TRY(cudaMemcpy(p, v, (size_t)n * sizeof(float), cudaMemcpyHostToDevice), "uploading a vector");
    *out = (const float *)p;
    return DRIFT_OK;
}

drift_status dcu_upload_freqs(dcu_allocs *al, const num_rope_params *rp, const double **out, drift_error *err) {
    int npair = rp->n_rot / 2 > 0 ? rp->n_rot / 2 : 1;
    std::vector<double> f;
    try {
        f.assign((size_t)npair, 0.0);
    } catch (...) {
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < rp->n_rot / 2; i++) f[(size_t)i] = num_rope_freq(rp, i);
    void *p;
    drift_status st = al->get((size_t)npair * sizeof(double), &p, "RoPE frequencies", err);
    if (st) return st;
    DCU_TRY(cudaMemcpy(p, f.data(), (size_t)npair * sizeof(double), cudaMemcpyHostToDevice), "uploading RoPE");
    *out = (const double *)p;
    return DRIFT_OK;
}

/* ------------------------------------------------------------------- model */

struct dcu_layer {
    const float *attn_norm, *ffn_norm, *bq, *bk, *bv;
    int qkv_stacked;          /* 1: qkv holds q|k|v rows */
    dmat qkv, wq, wk, wv, wo;
    int gu_stacked;           /* 1: gu holds gate|up rows */
    dmat gu, gate, up, down;
    dmat router;
    int egu_stacked;          /* 1: egu holds gate0|up0|gate1|up1|... rows; eg, eu are views of it */
    dmat egu;
    std::vector<dmat> eg, eu, ed;
};

/* activation workspace, grown to the largest batch */
struct dcu_ws {
    int cap;                  /* rows */
    float *x, *y, *qkv, *att, *hb, *hid, *slot, *ye, *rl, *wt;
    dact aA, aB, aG;
    int *moe_idx;             /* (cap * n_experts_used) rows, then as many slot ids */
    int *msel;                /* (cap, n_experts_used) the router's choices */
    float *hbE, *yE;          /* dense MoE: (cap, 2 E H) gate|up of every expert; (E, cap, D) outputs */
    dact aE;                  /* dense MoE: E blocks of pad16(cap) rows of H: SwiGLU per expert */
    unsigned *acnt;           /* (cap, n_heads) attention split counters, zero */
    drow *rows;
    drow *h_rows;             /* pinned */
    int *h_moe;               /* pinned (2 * cap * n_used) */
    int *h_sel;               /* pinned (cap * n_used) */
    int lcap;                 /* logit rows */
    dact aL;
    float *logits;
    float *h_hid, *h_lg;      /* pinned (cap, dim), (lcap, n_vocab): downloads land here first */
    int *lidx, *h_lidx;
    int *amax, *h_amax;       /* (lcap) greedy picks of the logit rows (dcu_forward's next), pinned copy */
    float *part;
    size_t part_floats;
    dcu_allocs al, al_l, al_p;
    std::vector<void *> pinned, pinned_l;
};

/* a captured forward pass and what its launches baked in */
struct dcu_graph {
    cudaGraphExec_t exec;
    unsigned gen;             /* workspace generation */
    int B, n_logit, chunk, splits;
    unsigned long last_use;
};
#define DCU_MAX_GRAPHS 64
#define DL_CHUNKS 4                    /* logits downloads in up to this many pieces (copied out as they land) */
#define DL_PINNED_MIN ((size_t)1 << 20) /* downloads from this many bytes go through pinned memory */
#define DCU_MOE_DENSE_BYTES (16.0 * 1024 * 1024) /* expert weights of a layer up to which MoE runs dense */

struct dcu_model {
    drift_numeric_profile p;
    int dim, hidden, n_layers, n_heads, n_kvh, hd, n_vocab, n_exp, n_used, window;
    int moe_dense;            /* 1: every expert for every row (small experts; no host round trip) */
    int q_dim, kv_dim;
    float eps;
    num_rope_params rope;
    const double *freq;
    dmat tok, out;
    const float *onorm;
    std::vector<dcu_layer> layers;
    unsigned needs;           /* DCU_NEED_* over all matrices */
    size_t vb;                /* one head's K or V vector */
    dcu_ctx ctx;
    dcu_allocs al;
    dcu_ws ws;
    unsigned ws_gen;          /* bumped whenever a workspace buffer moves */
    int graphs_on;
    std::vector<dcu_graph> graphs;
    std::vector<dcu_graph> seen;  /* shapes run once (exec unused) */
    size_t seen_next;
    unsigned long graph_clock;
    cudaEvent_t dl_ev[1 + DL_CHUNKS]; /* pinned downloads: hidden, then each logits chunk */
};

struct dcu_kv {
    const dcu_model *owner;
    int n_ctx;
    uint8_t *kc, *vc;
};

static void ws_free_pinned(std::vector<void *> &v) {
    for (void *p : v) cudaFreeHost(p);
    v.clear();
}

static void graphs_clear(dcu_model *m);

static void model_destroy(dcu_model *m) {
    if (m->ctx.st) cudaStreamSynchronize(m->ctx.st);
    graphs_clear(m);
    for (cudaEvent_t e : m->dl_ev)
        if (e) cudaEventDestroy(e);
    m->ws.al.release();
    m->ws.al_l.release();
    m->ws.al_p.release();
    ws_free_pinned(m->ws.pinned);
    ws_free_pinned(m->ws.pinned_l);
    m->al.release();
    dcu_ctx_destroy(&m->ctx);
    delete m;
}

extern "C" void dcu_model_free(dcu_model *m) {
    if (m) model_destroy(m);
}

drift_status dcu_check_profile(const drift_numeric_profile *p, drift_error *err) {
    if (p->accum == DRIFT_ACCUM_BF16)
        return drift_error_set(err, DRIFT_ERR_UNSUPPORTED,
                               "cuda: accum=bf16 is not supported on the GPU (f32 or f64 are)");
    return DRIFT_OK;
}

static void add_needs(dcu_model *m, const dmat *W) { m->needs |= dcu_mm_needs(&m->p, W); }

static drift_status upload_layer(dcu_model *m, const dcu_model_desc *d, int l, drift_error *err) {
    const dcu_layer_desc *s = &d->layers[l];
    dcu_layer *L = &m->layers[(size_t)l];
    dcu_allocs *al = &m->al;
    drift_status st;
    if (!s->attn_norm || !s->ffn_norm || !s->wq || !s->wk || !s->wv || !s->wo)
        return drift_error_set(err, DRIFT_ERR_INVALID, "cuda: layer %d lacks attention weights", l);
    if ((st = upload_vec(al, s->attn_norm, d->dim, &L->attn_norm, err)) ||
        (st = upload_vec(al, s->ffn_norm, d->dim, &L->ffn_norm, err)) ||
        (st = upload_vec(al, s->bq, m->q_dim, &L->bq, err)) || (st = upload_vec(al, s->bk, m->kv_dim, &L->bk, err)) ||
        (st = upload_vec(al, s->bv, m->kv_dim, &L->bv, err)))
        return st;
    const num_qmat *qkv[3] = {s->wq, s->wk, s->wv};
    if (s->wq->rows != m->q_dim || s->wk->rows != m->kv_dim || s->wv->rows != m->kv_dim || s->wq->cols != d->dim ||
        s->wk->cols != d->dim || s->wv->cols != d->dim || s->wo->rows != d->dim || s->wo->cols != m->q_dim)
        return drift_error_set(err, DRIFT_ERR_INVALID, "cuda: layer %d: attention matrices of the wrong shape", l);
    L->qkv_stacked = can_stack(qkv, 3);
    if (L->qkv_stacked) {
        if ((st = dcu_upload_mats(al, qkv, 3, &L->qkv, err))) return st;
        add_needs(m, &L->qkv);
    } else {
        if ((st = dcu_upload_mats(al, &qkv[0], 1, &L->wq, err)) || (st = dcu_upload_mats(al, &qkv[1], 1, &L->wk, err)) ||
            (st = dcu_upload_mats(al, &qkv[2], 1, &L->wv, err)))
            return st;
        add_needs(m, &L->wq);
        add_needs(m, &L->wk);
        add_needs(m, &L->wv);
    }
    if ((st = dcu_upload_mats(al, &s->wo, 1, &L->wo, err))) return st;
    add_needs(m, &L->wo);
    if (d->n_experts) {
        if (!s->router || !s->e_gate || !s->e_up || !s->e_down)
            return drift_error_set(err, DRIFT_ERR_INVALID, "cuda: layer %d lacks expert weights", l);
        if (s->router->rows != d->n_experts || s->router->cols != d->dim)
            return drift_error_set(err, DRIFT_ERR_INVALID, "cuda: layer %d: router of the wrong shape", l);
        for (int e = 0; e < d->n_experts; e++)
            if (s->e_gate[e].rows != d->hidden_dim || s->e_gate[e].cols != d->dim || s->e_up[e].rows != d->hidden_dim ||
                s->e_up[e].cols != d->dim || s->e_down[e].rows != d->dim || s->e_down[e].cols != d->hidden_dim)
                return drift_error_set(err, DRIFT_ERR_INVALID, "cuda: layer %d: expert %d of the wrong shape", l, e);
        if ((st = dcu_upload_mats(al, &s->router, 1, &L->router, err))) return st;
        add_needs(m, &L->router);
        try {
            L->eg.resize((size_t)d->n_experts);
            L->eu.resize((size_t)d->n_experts);
            L->ed.resize((size_t)d->n_experts);
        } catch (...) {
            return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        }
        /* gate|up of every expert stacked (one product for the dense path); eg / eu are views of it.
         * 16-bit rows are padded to 16 per matrix, so only when H is a multiple of 16. */
        std::vector<const num_qmat *> gu;
        try {
            for (int e = 0; e < d->n_experts; e++) {
                gu.push_back(&s->e_gate[e]);
                gu.push_back(&s->e_up[e]);
            }
        } catch (...) {
            return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        }
        L->egu_stacked = can_stack(gu.data(), (int)gu.size()) && (!is16(s->e_gate[0].dtype) || d->hidden_dim % 16 == 0);
        if (L->egu_stacked) {
            if ((st = dcu_upload_mats(al, gu.data(), (int)gu.size(), &L->egu, err))) return st;
            add_needs(m, &L->egu);
            for (int e = 0; e < d->n_experts; e++) {
                L->eg[(size_t)e] = mat_view(L->egu, (int64_t)2 * e * d->hidden_dim, d->hidden_dim);
                L->eu[(size_t)e] = mat_view(L->egu, (int64_t)(2 * e + 1) * d->hidden_dim, d->hidden_dim);
            }
        }
        for (int e = 0; e < d->n_experts; e++) {
            const num_qmat *g = &s->e_gate[e], *u = &s->e_up[e], *w = &s->e_down[e];
            if ((!L->egu_stacked && ((st = dcu_upload_mats(al, &g, 1, &L->eg[(size_t)e], err)) ||
                                     (st = dcu_upload_mats(al, &u, 1, &L->eu[(size_t)e], err)))) ||
                (st = dcu_upload_mats(al, &w, 1, &L->ed[(size_t)e], err)))
                return st;
            add_needs(m, &L->eg[(size_t)e]);
            add_needs(m, &L->eu[(size_t)e]);
            add_needs(m, &L->ed[(size_t)e]);
        }
    } else {
        if (!s->w_gate || !s->w_up || !s->w_down)
            return drift_error_set(err, DRIFT_ERR_INVALID, "cuda: layer %d lacks FFN weights", l);
        if (s->w_gate->rows != d->hidden_dim || s->w_gate->cols != d->dim || s->w_up->rows != d->hidden_dim ||
            s->w_up->cols != d->dim || s->w_down->rows != d->dim || s->w_down->cols != d->hidden_dim)
            return drift_error_set(err, DRIFT_ERR_INVALID, "cuda: layer %d: FFN matrices of the wrong shape", l);
        const num_qmat *gu[2] = {s->w_gate, s->w_up};
        L->gu_stacked = can_stack(gu, 2);
        if (L->gu_stacked) {
            if ((st = dcu_upload_mats(al, gu, 2, &L->gu, err))) return st;
            add_needs(m, &L->gu);
        } else {
            if ((st = dcu_upload_mats(al, &gu[0], 1, &L->gate, err)) || (st = dcu_upload_mats(al, &gu[1], 1, &L->up, err)))
                return st;
            add_needs(m, &L->gate);
            add_needs(m, &L->up);
        }
        if ((st = dcu_upload_mats(al, &s->w_down, 1, &L->down, err))) return st;
        add_needs(m, &L->down);
    }
    return DRIFT_OK;
}

extern "C" drift_status dcu_model_upload(const dcu_model_desc *d, const drift_numeric_profile *p, dcu_model **out,
                                         drift_error *err) {
    *out = NULL;
    drift_status st = dcu_check_profile(p, err);
    if (st) return st;
    if (dcu_device_count() == 0) return drift_error_set(err, DRIFT_ERR_UNSUPPORTED, "cuda: no GPU found");
    if (d->dim < 1 || d->n_layers < 0 || d->n_heads < 1 || d->n_kv_heads < 1 || d->n_heads % d->n_kv_heads ||
        d->head_dim < 2 || d->head_dim > 1024 || d->head_dim % 2 || d->n_vocab < 1 || d->hidden_dim < 1 ||
        d->rope.n_rot < 0 || d->rope.n_rot > d->head_dim || d->rope.n_rot % 2 || !d->tok_embd || !d->output ||
        !d->output_norm || (d->n_layers > 0 && !d->layers) ||
        (d->n_experts && (d->n_experts_used < 1 || d->n_experts_used > d->n_experts)))
        return drift_error_set(err, DRIFT_ERR_INVALID, "cuda: model description out of range (dim %d, heads %d/%d, "
                               "head_dim %d, rot %d, experts %d/%d)", d->dim, d->n_heads, d->n_kv_heads,
                               d->head_dim, d->rope.n_rot, d->n_experts_used, d->n_experts);
    dcu_model *m = new (std::nothrow) dcu_model();
    if (!m) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    m->p = *p;
    m->dim = d->dim;
    m->hidden = d->hidden_dim;
    m->n_layers = d->n_layers;
    m->n_heads = d->n_heads;
    m->n_kvh = d->n_kv_heads;
    m->hd = d->head_dim;
    m->n_vocab = d->n_vocab;
    m->n_exp = d->n_experts;
    m->n_used = d->n_experts ? d->n_experts_used : 0;
    if (m->n_used > DCU_MOE_KMAX) {
        st = drift_error_set(err, DRIFT_ERR_UNSUPPORTED, "cuda: %d experts per token (at most %d)", m->n_used,
                             DCU_MOE_KMAX);
        delete m;
        return st;
    }
    m->window = d->sliding_window;
    m->eps = d->norm_eps;
    m->q_dim = d->n_heads * d->head_dim;
    m->kv_dim = d->n_kv_heads * d->head_dim;
    m->rope = d->rope;
    m->rope.freq_factors = NULL;
    m->vb = num_kv_bytes(p->kv, d->head_dim);
    m->graphs_on = dcu_env_not_zero("DRIFT_CUDA_GRAPHS"); /* read at every load */
    if ((st = dcu_ctx_init(&m->ctx, err))) goto fail;
    for (cudaEvent_t &e : m->dl_ev) {
        cudaError_t ce = cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
        if (ce != cudaSuccess) {
            st = dcu_fail(err, ce, "creating an event");
            goto fail;
        }
    }
    if (d->tok_embd->cols != d->dim || d->tok_embd->rows != d->n_vocab || d->output->cols != d->dim ||
        d->output->rows != d->n_vocab) {
        st = drift_error_set(err, DRIFT_ERR_INVALID, "cuda: embedding / output matrices of the wrong shape");
        goto fail;
    }
    if ((st = dcu_upload_mats(&m->al, &d->tok_embd, 1, &m->tok, err))) goto fail;
    if (d->output == d->tok_embd ||
        (d->output->data == d->tok_embd->data && d->output->dtype == d->tok_embd->dtype &&
         d->output->scales == d->tok_embd->scales)) {
        m->out = m->tok; /* tied */
    } else if ((st = dcu_upload_mats(&m->al, &d->output, 1, &m->out, err))) {
        goto fail;
    }
    add_needs(m, &m->out);
    if ((st = upload_vec(&m->al, d->output_norm, d->dim, &m->onorm, err))) goto fail;
    if ((st = dcu_upload_freqs(&m->al, &d->rope, &m->freq, err))) goto fail;
    try {
        m->layers.resize((size_t)d->n_layers);
    } catch (...) {
        st = drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (int l = 0; l < d->n_layers; l++)
        if ((st = upload_layer(m, d, l, err))) goto fail;
    if (m->n_exp) { /* dense MoE when a layer's experts are small: reading them all costs less than a host round trip */
        double eb = 0;
        for (int e = 0; e < d->n_experts && d->n_layers > 0; e++)
            eb += (double)d->layers[0].e_gate[e].row_bytes * d->layers[0].e_gate[e].rows +
                  (double)d->layers[0].e_up[e].row_bytes * d->layers[0].e_up[e].rows +
                  (double)d->layers[0].e_down[e].row_bytes * d->layers[0].e_down[e].rows;
        const char *ev = getenv("DRIFT_CUDA_MOE");
        m->moe_dense = ev && !strcmp(ev, "gather") ? 0 : ev && !strcmp(ev, "dense") ? 1 : eb <= DCU_MOE_DENSE_BYTES;
    }
    {
        cudaError_t e = cudaDeviceSynchronize();
        if (e != cudaSuccess) {
            st = dcu_fail(err, e, "uploading the weights");
            goto fail;
        }
    }
    *out = m;
    return DRIFT_OK;
fail:
    model_destroy(m);
    return st;
}

/* ---------------------------------------------------------------- KV cache */

extern "C" drift_status dcu_kv_new(dcu_model *m, int n_ctx, dcu_kv **out, drift_error *err) {
    *out = NULL;
    if (n_ctx < 1) return drift_error_set(err, DRIFT_ERR_INVALID, "cuda: KV cache of %d positions", n_ctx);
    dcu_kv *kv = new (std::nothrow) dcu_kv();
    if (!kv) return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    kv->owner = m;
    kv->n_ctx = n_ctx;
    size_t bytes = (size_t)(m->n_layers > 0 ? m->n_layers : 1) * (size_t)n_ctx * (size_t)m->n_kvh * m->vb;
    cudaError_t e = cudaMalloc((void **)&kv->kc, bytes);
    if (e == cudaSuccess) e = cudaMalloc((void **)&kv->vc, bytes);
    /* cleared on the model's stream, so that its kernels see the zeros
     * first: a plain cudaMemset runs on the legacy default stream, which a
     * non-blocking stream does not wait for. It could land after a forward
     * pass had written the cache, and did when other work kept the GPU busy
     * (bench/BENCHMARKS.md, issue 24's CUDA lead). */
    if (e == cudaSuccess) e = cudaMemsetAsync(kv->kc, 0, bytes, m->ctx.st);
    if (e == cudaSuccess) e = cudaMemsetAsync(kv->vc, 0, bytes, m->ctx.st);
    if (e != cudaSuccess) {
        cudaGetLastError();
        drift_status st = drift_error_set(err, e == cudaErrorMemoryAllocation ? DRIFT_ERR_NOMEM : DRIFT_ERR_INTERNAL,
                                          "cuda: KV cache: 2 x %zu bytes for %d positions (%s)", bytes, n_ctx,
                                          cudaGetErrorString(e));
        dcu_kv_free(kv);
        return st;
    }
    *out = kv;
    return DRIFT_OK;
}

extern "C" void dcu_kv_free(dcu_kv *kv) {
    if (!kv) return;
    if (kv->kc) cudaFree(kv->kc);
    if (kv->vc) cudaFree(kv->vc);
    delete kv;
}

/* --------------------------------------------------------------- workspace */

static drift_status pinned_get(std::vector<void *> &v, size_t bytes, void **out, drift_error *err) {
    void *p = NULL;
    cudaError_t e = cudaMallocHost(&p, bytes ? bytes : 16);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return drift_error_set(err, DRIFT_ERR_NOMEM, "cuda: pinned host buffer of %zu bytes (%s)", bytes,
                               cudaGetErrorString(e));
    }
    try {
        v.push_back(p);
    } catch (...) {
        cudaFreeHost(p);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    *out = p;
    return DRIFT_OK;
}

/* A pinned staging buffer for downloads, or NULL (too large, or the host
 * refuses: the downloads then stay pageable) */
#define PINNED_STAGE_MAX ((size_t)256 << 20)
static void *pinned_try(std::vector<void *> &v, size_t bytes) {
    if (bytes > PINNED_STAGE_MAX) return NULL;
    drift_error e2;
    void *p = NULL;
    return pinned_get(v, bytes, &p, &e2) ? NULL : p;
}

/* An act buffer of rows x K (h and q per needs). */
drift_status dcu_act_alloc(dcu_allocs *al, int rows, int64_t K, unsigned needs, dact *a, drift_error *err) {
    memset(a, 0, sizeof *a);
    drift_status st;
    void *p;
    if ((st = al->get((size_t)rows * (size_t)K * sizeof(float), &p, "activations", err))) return st;
    a->f = (float *)p;
    if (needs & DCU_NEED_H) {
        if ((st = al->get((size_t)dcu_pad16(rows) * (size_t)dcu_pad16(K) * 2, &p, "activations (16-bit)", err)))
            return st;
        a->h = (uint16_t *)p;
    }
    if (needs & DCU_NEED_Q) {
        if ((st = al->get((size_t)rows * (size_t)K, &p, "activations (fp8)", err))) return st;
        a->q = (uint8_t *)p;
    }
    if ((st = al->get((size_t)rows * sizeof(float), &p, "activation scales", err))) return st;
    a->qs = (float *)p;
    return DRIFT_OK;
}

static drift_status ws_rows(dcu_model *m, int B, drift_error *err) {
    dcu_ws *w = &m->ws;
    if (B <= w->cap) return DRIFT_OK;
    DCU_TRY(cudaStreamSynchronize(m->ctx.st), "waiting for the stream");
    w->al.release();
    ws_free_pinned(w->pinned);
    w->h_hid = NULL;
    w->cap = 0;
    int cap = B < 16 ? 16 : B;
    int64_t D = m->dim, H = m->hidden, QKV = m->q_dim + 2 * (int64_t)m->kv_dim, KB = m->q_dim > H ? m->q_dim : H;
    int KE = m->n_used > 0 ? m->n_used : 1, E = m->n_exp > 0 ? m->n_exp : 1;
    size_t c = (size_t)cap;
    drift_status st;
    void *p;
#define WS_GET(field, bytes)                                                                                           \
    do {                                                                                                               \
        if ((st = w->al.get((bytes), &p, "workspace", err))) return st;                                                \
        w->field = (decltype(w->field))p;                                                                              \
    } while (0)
    WS_GET(x, c * D * 4);
    WS_GET(y, c * D * 4);
    WS_GET(qkv, c * QKV * 4);
    WS_GET(att, c * m->q_dim * 4);
    WS_GET(hb, c * 2 * H * 4);
    WS_GET(hid, c * D * 4);
    WS_GET(rows, c * sizeof(drow));
    WS_GET(acnt, c * (size_t)m->n_heads * sizeof(unsigned));
    DCU_TRY(cudaMemsetAsync(w->acnt, 0, c * (size_t)m->n_heads * sizeof(unsigned), m->ctx.st),
            "clearing the attention counters");
    if ((st = dcu_act_alloc(&w->al, cap, D, m->needs, &w->aA, err)) || (st = dcu_act_alloc(&w->al, cap, KB, m->needs, &w->aB, err)))
        return st;
    if (m->n_exp) {
        WS_GET(rl, c * E * 4);
        WS_GET(wt, c * KE * 4);
        WS_GET(msel, c * KE * sizeof(int));
        if (m->moe_dense) {
            WS_GET(hbE, c * 2 * E * H * 4);
            WS_GET(yE, (size_t)E * c * D * 4);
            if ((st = dcu_act_alloc(&w->al, E * (int)dcu_pad16(cap), H, m->needs, &w->aE, err))) return st;
        } else {
            WS_GET(slot, c * KE * D * 4);
            WS_GET(ye, c * D * 4);
            WS_GET(moe_idx, c * KE * 2 * sizeof(int));
            if ((st = dcu_act_alloc(&w->al, cap, D, m->needs, &w->aG, err))) return st;
        }
    }
#undef WS_GET
    if ((st = pinned_get(w->pinned, c * sizeof(drow), &p, err))) return st;
    w->h_rows = (drow *)p;
    w->h_hid = (float *)pinned_try(w->pinned, c * (size_t)D * sizeof(float));
    if (m->n_exp && !m->moe_dense) {
        if ((st = pinned_get(w->pinned, c * KE * 2 * sizeof(int), &p, err))) return st;
        w->h_moe = (int *)p;
        if ((st = pinned_get(w->pinned, c * KE * sizeof(int), &p, err))) return st;
        w->h_sel = (int *)p;
    }
    w->cap = cap;
    return DRIFT_OK;
}

static drift_status ws_logits(dcu_model *m, int n, drift_error *err) {
    dcu_ws *w = &m->ws;
    if (n <= w->lcap) return DRIFT_OK;
    DCU_TRY(cudaStreamSynchronize(m->ctx.st), "waiting for the stream");
    w->al_l.release();
    ws_free_pinned(w->pinned_l);
    w->h_lg = NULL;
    w->lcap = 0;
    int cap = n < 16 ? 16 : n;
    drift_status st;
    void *p;
    if ((st = dcu_act_alloc(&w->al_l, cap, m->dim, m->needs, &w->aL, err))) return st;
    if ((st = w->al_l.get((size_t)cap * (size_t)m->n_vocab * sizeof(float), &p, "logits", err))) return st;
    w->logits = (float *)p;
    if ((st = w->al_l.get((size_t)cap * sizeof(int), &p, "logit rows", err))) return st;
    w->lidx = (int *)p;
    if ((st = pinned_get(w->pinned_l, (size_t)cap * sizeof(int), &p, err))) return st;
    w->h_lidx = (int *)p;
    if ((st = w->al_l.get((size_t)cap * sizeof(int), &p, "greedy picks", err))) return st;
    w->amax = (int *)p;
    if ((st = pinned_get(w->pinned_l, (size_t)cap * sizeof(int), &p, err))) return st;
    w->h_amax = (int *)p;
    w->h_lg = (float *)pinned_try(w->pinned_l, (size_t)cap * (size_t)m->n_vocab * sizeof(float));
    w->lcap = cap;
    return DRIFT_OK;
}

#define PART_MAX_FLOATS ((size_t)64 << 20) /* 256 MB: attention slices the batch beyond this */

static drift_status ws_part(dcu_model *m, size_t floats, size_t min_floats, drift_error *err) {
    dcu_ws *w = &m->ws;
    if (floats > PART_MAX_FLOATS) floats = PART_MAX_FLOATS > min_floats ? PART_MAX_FLOATS : min_floats;
    if (floats <= w->part_floats) return DRIFT_OK;
    DCU_TRY(cudaStreamSynchronize(m->ctx.st), "waiting for the stream");
    w->al_p.release();
    w->part = NULL;
    w->part_floats = 0;
    void *p;
    drift_status st = w->al_p.get(floats * sizeof(float), &p, "attention workspace", err);
    if (st) return st;
    w->part = (float *)p;
    w->part_floats = floats;
    return DRIFT_OK;
}

/* positions per attention split (see cuda_kernels.cu) */
int dcu_attn_chunk(const drift_numeric_profile *p, int B, int n_heads, int max_npos, int sm_count) {
    if (p->batch_invariant) return p->attn == DRIFT_ATTN_ONLINE ? (p->attn_block > 0 ? p->attn_block : 1) : 256;
    /* batch-variant: about two blocks per SM over the batch's (row, head) pairs */
    long work = (long)B * n_heads;
    long S = (2L * sm_count + work - 1) / work;
    if (S < 1) S = 1;
    long c = (max_npos + S - 1) / S;
    c = (c + 31) / 32 * 32;
    return (int)(c < 32 ? 32 : c);
}

/* --------------------------------------------------------------- forward */

static drift_status mm(dcu_model *m, const dmat *W, const dact *x, int B, float *y, int64_t ldy, drift_error *err) {
    return dcu_mm(&m->ctx, &m->p, W, x, B, y, ldy, err);
}

/* MoE FFN of the B rows prepared in aA -> ws.y. The router's top-k runs on
 * the GPU (k_moe_route: moe_ffn's operations). Dense (small experts): every
 * expert's gate|up, SwiGLU and down for every row, then each row's chosen
 * outputs weighted in rank order; nothing goes through the host, so the
 * pass can be a graph. Otherwise the choices go to the host, which lists
 * each expert's rows (in row order); per expert: gather, products, scatter
 * into the row's rank slot; then the weighted sum in rank order. The
 * kernels are batch-invariant, so a row's expert outputs are the same bits
 * either way. */
static drift_status moe_layer(dcu_model *m, const dcu_layer *L, int B, drift_error *err) {
    dcu_ws *w = &m->ws;
    dcu_ctx *c = &m->ctx;
    const drift_numeric_profile *p = &m->p;
    int D = m->dim, H = m->hidden, E = m->n_exp, K = m->n_used;
    int fast = p->exp == DRIFT_EXP_FAST;
    drift_status st;
    if ((st = mm(m, &L->router, &w->aA, B, w->rl, E, err)) ||
        (st = dcu_launch_moe_route(c, w->rl, B, E, K, w->msel, w->wt, err)))
        return st;
    if (m->moe_dense) {
        int64_t ld = 2 * (int64_t)E * H;
        if (L->egu_stacked) {
            if ((st = mm(m, &L->egu, &w->aA, B, w->hbE, ld, err))) return st;
        } else {
            for (int e = 0; e < E; e++)
                if ((st = mm(m, &L->eg[(size_t)e], &w->aA, B, w->hbE + (size_t)2 * e * H, ld, err)) ||
                    (st = mm(m, &L->eu[(size_t)e], &w->aA, B, w->hbE + (size_t)(2 * e + 1) * H, ld, err)))
                    return st;
        }
        size_t rows16 = (size_t)dcu_pad16(w->cap);
        for (int e = 0; e < E; e++) {
            dact ae = w->aE;
            ae.f += (size_t)e * rows16 * H;
            if (ae.h) ae.h += (size_t)e * rows16 * dcu_pad16(H);
            if (ae.q) ae.q += (size_t)e * rows16 * H;
            ae.qs += (size_t)e * rows16;
            const float *g = w->hbE + (size_t)2 * e * H;
            if ((st = dcu_launch_swiglu(c, p->acts, fast, g, g + H, ld, B, H, &ae, m->needs, err)) ||
                (st = mm(m, &L->ed[(size_t)e], &ae, B, w->yE + (size_t)e * B * D, D, err)))
                return st;
        }
        return dcu_launch_moe_comb(c, w->yE, w->msel, w->wt, w->y, B, K, D, err);
    }
    DCU_TRY(cudaMemcpyAsync(w->h_sel, w->msel, (size_t)B * K * sizeof(int), cudaMemcpyDeviceToHost, c->st),
            "copying the router's choices");
    DCU_TRY(cudaStreamSynchronize(c->st), "running the router");
    std::vector<int> off;
    try {
        off.resize((size_t)E + 1);
    } catch (...) {
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory (MoE, %d rows)", B);
    }
    const int *sel = w->h_sel;
    /* per expert: the rows it serves (in row order) and their slots */
    int *h_idx = w->h_moe, *h_who = w->h_moe + (size_t)B * K;
    int n = 0;
    for (int e = 0; e < E; e++) {
        off[(size_t)e] = n;
        for (int b = 0; b < B; b++)
            for (int k = 0; k < K; k++)
                if (sel[(size_t)b * K + k] == e) {
                    h_idx[n] = b;
                    h_who[n] = b * K + k;
                    n++;
                }
    }
    off[(size_t)E] = n;
    int *d_idx = w->moe_idx, *d_who = w->moe_idx + (size_t)B * K;
    DCU_TRY(cudaMemcpyAsync(d_idx, h_idx, (size_t)n * sizeof(int), cudaMemcpyHostToDevice, c->st), "MoE rows");
    DCU_TRY(cudaMemcpyAsync(d_who, h_who, (size_t)n * sizeof(int), cudaMemcpyHostToDevice, c->st), "MoE slots");
    for (int e = 0; e < E; e++) {
        int cnt = off[(size_t)e + 1] - off[(size_t)e];
        if (!cnt) continue;
        if ((st = dcu_launch_gather(c, &w->aA, &w->aG, d_idx + off[(size_t)e], cnt, D, m->needs, err)) ||
            (st = mm(m, &L->eg[(size_t)e], &w->aG, cnt, w->hb, 2 * (int64_t)H, err)) ||
            (st = mm(m, &L->eu[(size_t)e], &w->aG, cnt, w->hb + H, 2 * (int64_t)H, err)) ||
            (st = dcu_launch_swiglu(c, p->acts, fast, w->hb, w->hb + H, 2 * (int64_t)H, cnt, H, &w->aB, m->needs,
                                    err)) ||
            (st = mm(m, &L->ed[(size_t)e], &w->aB, cnt, w->ye, D, err)) ||
            (st = dcu_launch_scatter(c, w->ye, w->slot, d_who + off[(size_t)e], cnt, D, err)))
            return st;
    }
    return dcu_launch_moe_sum(c, w->slot, w->wt, w->y, B, K, D, err);
}

/* The kernels of one forward pass of B rows (rows, logit row indices
 * already uploaded): embedding ... final norm into ws.hid, and the logits
 * of n_logit_rows rows into ws.logits. No allocation, copy or sync except
 * inside moe_layer (so a dense model's pass can be captured as a graph). */
static drift_status fwd_enqueue(dcu_model *m, int B, int chunk, int max_npos, int n_logit_rows, drift_error *err) {
    const drift_numeric_profile *p = &m->p;
    dcu_ctx *c = &m->ctx;
    dcu_ws *w = &m->ws;
    int D = m->dim, H = m->hidden, QD = m->q_dim, KVD = m->kv_dim, QKV = QD + 2 * KVD;
    int acts = p->acts, fast = p->exp == DRIFT_EXP_FAST;
    unsigned nd = m->needs;
    drift_status st;
    if ((st = dcu_launch_embed(c, acts, &m->tok, w->rows, NULL, B, w->x, err))) return st;
    if (m->n_layers > 0)
        st = dcu_launch_norm(c, acts, w->x, NULL, B, D, m->layers[0].attn_norm, m->eps, NULL, &w->aA, nd, err);
    else
        st = dcu_launch_norm(c, acts, w->x, NULL, B, D, m->onorm, m->eps, w->hid, NULL, 0, err);
    if (st) return st;
    float scale = 1.0f / sqrtf((float)m->hd);
    for (int l = 0; l < m->n_layers; l++) {
        const dcu_layer *L = &m->layers[(size_t)l];
        /* q | k | v */
        c->mm_tag = DCU_MM_QKV;
        if (L->qkv_stacked) {
            if ((st = mm(m, &L->qkv, &w->aA, B, w->qkv, QKV, err))) return st;
        } else if ((st = mm(m, &L->wq, &w->aA, B, w->qkv, QKV, err)) ||
                   (st = mm(m, &L->wk, &w->aA, B, w->qkv + QD, QKV, err)) ||
                   (st = mm(m, &L->wv, &w->aA, B, w->qkv + QD + KVD, QKV, err))) {
            return st;
        }
        /* bias, RoPE, K/V into the caches (all rows before any attends) */
        dcu_qkv_args qa;
        qa.q = w->qkv;
        qa.k = w->qkv + QD;
        qa.v = w->qkv + QD + KVD;
        qa.ldq = qa.ldk = qa.ldv = QKV;
        qa.bq = L->bq;
        qa.bk = L->bk;
        qa.bv = L->bv;
        qa.freq = m->freq;
        qa.n_heads = m->n_heads;
        qa.n_kvh = m->n_kvh;
        qa.head_dim = m->hd;
        qa.n_rot = m->rope.n_rot;
        qa.neox = m->rope.neox;
        qa.rows = w->rows;
        qa.layer = l;
        qa.kvfmt = p->kv;
        qa.vb = m->vb;
        /* attention (with the bias, RoPE and KV store above: dcu_launch_attention does them first) */
        dcu_attn_args aa;
        aa.qkv = &qa;
        aa.q = w->qkv;
        aa.ldq = QKV;
        aa.out = w->att;
        aa.ldo = QD;
        aa.rows = w->rows;
        aa.layer = l;
        aa.n_heads = m->n_heads;
        aa.n_kvh = m->n_kvh;
        aa.head_dim = m->hd;
        aa.window = m->window;
        aa.kvfmt = p->kv;
        aa.fast_exp = fast;
        aa.vb = m->vb;
        aa.scale = scale;
        aa.chunk = chunk;
        aa.max_npos = max_npos;
        aa.part = w->part;
        aa.part_floats = w->part_floats;
        aa.cnt = w->acnt;
        aa.cnt_rows = (size_t)w->cap;
        /* attention writes wo's input itself where act() is elementwise (no prep launch) */
        const bool att_fused = dcu_fuse_on() && acts != DRIFT_DTYPE_FP8_E4M3 && acts != DRIFT_DTYPE_FP8_E5M2 &&
                               !(nd & DCU_NEED_Q);
        aa.oa = att_fused ? &w->aB : NULL;
        aa.oacts = acts;
        aa.oneeds = nd;
        if ((st = dcu_launch_attention(c, &aa, B, err))) return st;
        c->mm_tag = DCU_MM_WO;
        /* output projection; residual + ffn norm */
        if ((!att_fused && (st = dcu_launch_prep(c, acts, w->att, QD, NULL, B, QD, &w->aB, nd, err))) ||
            (st = mm(m, &L->wo, &w->aB, B, w->y, D, err)) ||
            (st = dcu_launch_norm(c, acts, w->x, w->y, B, D, L->ffn_norm, m->eps, NULL, &w->aA, nd, err)))
            return st;
        /* FFN */
        if (m->n_exp) {
            c->mm_tag = DCU_MM_OTHER;
            if ((st = moe_layer(m, L, B, err))) return st;
        } else {
            c->mm_tag = DCU_MM_GU;
            int sw_done = 0; /* gate|up with SwiGLU in one launch where it applies */
            if (L->gu_stacked) {
                if ((st = dcu_mm_swiglu(c, p, &L->gu, &w->aA, B, H, &w->aB, nd, &sw_done, err))) return st;
                if (!sw_done && (st = mm(m, &L->gu, &w->aA, B, w->hb, 2 * (int64_t)H, err))) return st;
            } else if ((st = mm(m, &L->gate, &w->aA, B, w->hb, 2 * (int64_t)H, err)) ||
                       (st = mm(m, &L->up, &w->aA, B, w->hb + H, 2 * (int64_t)H, err))) {
                return st;
            }
            if (!sw_done &&
                (st = dcu_launch_swiglu(c, acts, fast, w->hb, w->hb + H, 2 * (int64_t)H, B, H, &w->aB, nd, err)))
                return st;
            c->mm_tag = DCU_MM_DOWN;
            if ((st = mm(m, &L->down, &w->aB, B, w->y, D, err))) return st;
        }
        /* residual, then the next layer's norm or the final one */
        if (l + 1 < m->n_layers)
            st = dcu_launch_norm(c, acts, w->x, w->y, B, D, m->layers[(size_t)l + 1].attn_norm, m->eps, NULL, &w->aA,
                                 nd, err);
        else
            st = dcu_launch_norm(c, acts, w->x, w->y, B, D, m->onorm, m->eps, w->hid, NULL, 0, err);
        if (st) return st;
    }
    st = DRIFT_OK;
    c->mm_tag = DCU_MM_HEAD;
    if (n_logit_rows > 0 &&
        !(st = dcu_launch_prep(c, acts, w->hid, D, w->lidx, n_logit_rows, D, &w->aL, nd, err)))
        st = mm(m, &m->out, &w->aL, n_logit_rows, w->logits, m->n_vocab, err);
    c->mm_tag = DCU_MM_OTHER;
    return st;
}

/* ---- CUDA graphs: a dense model's pass with gemm=kernel is the same
 * sequence of launches for the same (B, logit rows, attention split) and
 * workspace, so it is captured once and replayed: small-batch decode is
 * bound by launch overhead otherwise. Rows and logit indices are uploaded
 * before the replay (the kernels read them from device memory). Any
 * capture failure turns graphs off for the model and runs the pass
 * eagerly. DRIFT_CUDA_GRAPHS=0 in the environment turns them off. */

static void graphs_clear(dcu_model *m) {
    for (dcu_graph &g : m->graphs)
        if (g.exec) cudaGraphExecDestroy(g.exec);
    m->graphs.clear();
}

static bool graphs_usable(const dcu_model *m) {
    return m->graphs_on && (m->n_exp == 0 || m->moe_dense) && m->p.gemm == DRIFT_GEMM_KERNEL;
}

/* enqueues the pass through a cached or new graph; *done = 0 when the
 * caller must run it eagerly */
static drift_status fwd_graph(dcu_model *m, int B, int chunk, int max_npos, int n_logit_rows, int *done,
                              drift_error *err) {
    *done = 0;
    dcu_ctx *c = &m->ctx;
    int splits = (max_npos + chunk - 1) / chunk;
    for (dcu_graph &g : m->graphs)
        if (g.gen == m->ws_gen && g.B == B && g.n_logit == n_logit_rows && g.chunk == chunk && g.splits == splits) {
            DCU_TRY(cudaGraphLaunch(g.exec, c->st), "launching a CUDA graph");
            g.last_use = ++m->graph_clock;
            *done = 1;
            return DRIFT_OK;
        }
    /* capture on a shape's second pass only: a one-off shape (a prefill of
     * some length) runs eagerly and evicts nothing */
    bool seen = false;
    for (const dcu_graph &k : m->seen)
        if (k.gen == m->ws_gen && k.B == B && k.n_logit == n_logit_rows && k.chunk == chunk && k.splits == splits)
            seen = true;
    if (!seen) {
        dcu_graph k = {};
        k.gen = m->ws_gen;
        k.B = B;
        k.n_logit = n_logit_rows;
        k.chunk = chunk;
        k.splits = splits;
        if (m->seen.size() < DCU_MAX_GRAPHS) {
            try {
                m->seen.push_back(k);
            } catch (...) {
                return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
            }
        } else {
            m->seen[m->seen_next] = k;
        }
        m->seen_next = (m->seen_next + 1) % DCU_MAX_GRAPHS;
        return DRIFT_OK;
    }
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    if (cudaStreamBeginCapture(c->st, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
        cudaGetLastError();
        m->graphs_on = 0;
        return DRIFT_OK;
    }
    drift_error e2;
    drift_status st = fwd_enqueue(m, B, chunk, max_npos, n_logit_rows, &e2);
    cudaError_t ce = cudaStreamEndCapture(c->st, &graph);
    if (!st && ce == cudaSuccess && graph) ce = cudaGraphInstantiate(&exec, graph, 0);
    if (graph) cudaGraphDestroy(graph);
    if (st || ce != cudaSuccess || !exec) {
        /* not capturable here: off for this model, run eagerly */
        cudaGetLastError();
        if (exec) cudaGraphExecDestroy(exec);
        m->graphs_on = 0;
        graphs_clear(m);
        return DRIFT_OK;
    }
    dcu_graph g = {};
    g.exec = exec;
    g.gen = m->ws_gen;
    g.B = B;
    g.n_logit = n_logit_rows;
    g.chunk = chunk;
    g.splits = splits;
    g.last_use = ++m->graph_clock;
    try {
        if (m->graphs.size() >= DCU_MAX_GRAPHS) { /* evict the least recently used */
            size_t old = 0;
            for (size_t i = 1; i < m->graphs.size(); i++)
                if (m->graphs[i].last_use < m->graphs[old].last_use) old = i;
            cudaGraphExecDestroy(m->graphs[old].exec);
            m->graphs[old] = g;
        } else {
            m->graphs.push_back(g);
        }
    } catch (...) {
        cudaGraphExecDestroy(exec);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    }
    DCU_TRY(cudaGraphLaunch(exec, c->st), "launching a CUDA graph");
    *done = 1;
    return DRIFT_OK;
}

/* ---- Downloads. Large results (hidden states, logits of many rows) go
 * from the device into pinned buffers (DMA at full PCIe speed) and from
 * there into the caller's memory by a few threads, logits in pieces copied
 * out as each lands; a pageable cudaMemcpy stages through the driver's
 * buffers and copies on one thread. DRIFT_CUDA_COPY_THREADS=N sets the
 * threads (default: half the cores, at most 8); 0 keeps the pageable copy. */

/* memcpy split over worker threads (created once, process-wide, never joined);
 * one copy at a time (busy) */
struct copy_pool {
    std::mutex busy, mu;
    std::condition_variable cv, cv_done;
    std::vector<std::thread> th;
    char *dst = NULL;
    const char *src = NULL;
    size_t bytes = 0, piece = 0, next = 0, n_pieces = 0, left = 0;
    unsigned long gen = 0;

    /* takes pieces of the current copy until none is left (lk held on entry and exit) */
    void run(std::unique_lock<std::mutex> &lk) {
        while (next < n_pieces) {
            size_t off = next++ * piece, n = bytes - off < piece ? bytes - off : piece;
            char *d = dst + off;
            const char *sp = src + off;
            lk.unlock();
            memcpy(d, sp, n);
            lk.lock();
            if (--left == 0) cv_done.notify_all();
        }
    }
    void worker() {
        std::unique_lock<std::mutex> lk(mu);
        unsigned long seen = gen;
        for (;;) {
            cv.wait(lk, [&] { return gen != seen; });
            seen = gen;
            run(lk);
        }
    }
    void copy(void *d, const void *sp, size_t n) {
        std::lock_guard<std::mutex> one(busy);
        std::unique_lock<std::mutex> lk(mu);
        dst = (char *)d;
        src = (const char *)sp;
        bytes = n;
        size_t parts = th.size() + 1;
        piece = ((n + parts - 1) / parts + 4095) & ~(size_t)4095;
        n_pieces = (n + piece - 1) / piece;
        next = 0;
        left = n_pieces;
        gen++;
        lk.unlock();
        cv.notify_all();
        lk.lock();
        run(lk);
        cv_done.wait(lk, [&] { return left == 0; });
    }
};

static std::mutex g_pool_mu;
static copy_pool *g_pool;   /* never freed: its threads outlive every model */
static int g_pool_threads = -1;

/* the pool, or NULL when downloads stay pageable */
static copy_pool *pool_get(void) {
    std::lock_guard<std::mutex> lk(g_pool_mu);
    if (g_pool_threads < 0) {
        const char *e = getenv("DRIFT_CUDA_COPY_THREADS");
        unsigned hc = std::thread::hardware_concurrency();
        int n = e ? atoi(e) : (int)(hc / 2 < 8 ? hc / 2 : 8);
        g_pool_threads = n < 0 ? 0 : n > 64 ? 64 : n;
        if (g_pool_threads > 0) {
            copy_pool *p = new (std::nothrow) copy_pool();
            if (!p) {
                g_pool_threads = 0;
                return NULL;
            }
            try {
                for (int i = 1; i < g_pool_threads; i++) { /* the caller is the last one */
                    p->th.emplace_back(&copy_pool::worker, p);
                    p->th.back().detach();
                }
            } catch (...) { /* fewer threads: still correct */
            }
            g_pool = p;
        }
    }
    return g_pool;
}

/* DRIFT_CUDA_STAGE=0: small downloads straight into the caller's (pageable) memory */
static int small_staged_on(void) {
    static int on = -1;
    return env_switch_on(&on, "DRIFT_CUDA_STAGE");
}

/* Queues the downloads of hidden (B rows), the logits and the greedy picks
 * (each when asked for), and waits for them: through pinned memory and the
 * pool when large, through pinned memory and one memcpy when small. */
static drift_status fwd_download(dcu_model *m, int B, float *hidden, float *logits, int32_t *next, int n_logit_rows,
                                 drift_error *err) {
    dcu_ctx *c = &m->ctx;
    dcu_ws *w = &m->ws;
    size_t hb = hidden ? (size_t)B * m->dim * sizeof(float) : 0;
    size_t row = (size_t)m->n_vocab * sizeof(float), lb = logits ? (size_t)n_logit_rows * row : 0;
    const size_t nb = next ? (size_t)n_logit_rows * sizeof(int) : 0; /* the greedy picks: first, then the rest */
    if (nb) DCU_TRY(cudaMemcpyAsync(w->h_amax, w->amax, nb, cudaMemcpyDeviceToHost, c->st), "copying greedy picks");
    const bool pinned = (!hb || w->h_hid) && (!lb || w->h_lg);
    copy_pool *pool = hb + lb >= DL_PINNED_MIN && pinned ? pool_get() : NULL;
    if (!pool) {
        /* small (a decode step's logits), or no pinned buffers: into the pinned buffers where they exist, then
         * copied out here, else straight into the caller's memory. A copy into pageable
         * memory goes through the driver's own staging, which is slower for a batch-1 step's logits
         * (bench/BENCHMARKS.md, session 10) */
        const bool staged = pinned && small_staged_on();
        float *hd = staged ? w->h_hid : hidden, *ld = staged ? w->h_lg : logits;
        if (hb) DCU_TRY(cudaMemcpyAsync(hd, w->hid, hb, cudaMemcpyDeviceToHost, c->st), "copying hidden states");
        if (lb) DCU_TRY(cudaMemcpyAsync(ld, w->logits, lb, cudaMemcpyDeviceToHost, c->st), "copying logits");
        DCU_TRY(cudaStreamSynchronize(c->st), "running the forward pass");
        if (staged && hb) memcpy(hidden, w->h_hid, hb);
        if (staged && lb) memcpy(logits, w->h_lg, lb);
        if (nb) memcpy(next, w->h_amax, nb);
        return DRIFT_OK;
    }
    if (hb) {
        DCU_TRY(cudaMemcpyAsync(w->h_hid, w->hid, hb, cudaMemcpyDeviceToHost, c->st), "copying hidden states");
        DCU_TRY(cudaEventRecord(m->dl_ev[0], c->st), "recording an event");
    }
    int nch = lb >= (size_t)DL_CHUNKS * DL_PINNED_MIN / 4 ? DL_CHUNKS : 1;
    int per = (n_logit_rows + nch - 1) / (nch > 0 ? nch : 1);
    for (int i = 0; i < nch && lb; i++) {
        int r0 = i * per, nr = n_logit_rows - r0 < per ? n_logit_rows - r0 : per;
        if (nr <= 0) break;
        DCU_TRY(cudaMemcpyAsync(w->h_lg + (size_t)r0 * m->n_vocab, w->logits + (size_t)r0 * m->n_vocab,
                                (size_t)nr * row, cudaMemcpyDeviceToHost, c->st),
                "copying logits");
        DCU_TRY(cudaEventRecord(m->dl_ev[1 + i], c->st), "recording an event");
    }
    if (hb) {
        DCU_TRY(cudaEventSynchronize(m->dl_ev[0]), "running the forward pass");
        pool->copy(hidden, w->h_hid, hb);
    }
    for (int i = 0; i < nch && lb; i++) {
        int r0 = i * per, nr = n_logit_rows - r0 < per ? n_logit_rows - r0 : per;
        if (nr <= 0) break;
        DCU_TRY(cudaEventSynchronize(m->dl_ev[1 + i]), "downloading logits");
        pool->copy(logits + (size_t)r0 * m->n_vocab, w->h_lg + (size_t)r0 * m->n_vocab, (size_t)nr * row);
    }
    DCU_TRY(cudaStreamSynchronize(c->st), "running the forward pass");
    if (nb) memcpy(next, w->h_amax, nb);
    return DRIFT_OK;
}

/* DRIFT_CUDA_TIMING: dcu_timing_read's sums */
static std::mutex g_tm_mu;
static double g_tm[5];

static int timing_on(void) {
    static int on = -1;
    if (on < 0) {
        const char *e = getenv("DRIFT_CUDA_TIMING");
        on = e && strcmp(e, "0") ? 1 : 0;
    }
    return on;
}

static double wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

extern "C" void dcu_timing_read(double out[5], int reset) {
    std::lock_guard<std::mutex> lk(g_tm_mu);
    for (int i = 0; i < 5; i++) out[i] = g_tm[i];
    if (reset) memset(g_tm, 0, sizeof g_tm);
}

/* events of one timed dcu_forward */
struct fwd_timer {
    cudaEvent_t e[2] = {NULL, NULL};
    double t0 = 0, t_pre = 0;
    bool on = false;
    ~fwd_timer() {
        for (cudaEvent_t x : e)
            if (x) cudaEventDestroy(x);
    }
    void start() {
        on = timing_on() != 0;
        if (!on) return;
        t0 = wall_ms();
        for (cudaEvent_t &x : e)
            if (cudaEventCreate(&x) != cudaSuccess) {
                cudaGetLastError();
                on = false;
            }
    }
    void mark(int i, cudaStream_t st) {
        if (!on) return;
        if (i == 0) t_pre = wall_ms() - t0;
        if (cudaEventRecord(e[i], st) != cudaSuccess) {
            cudaGetLastError();
            on = false;
        }
    }
    double t_k = 0;
    void kernels_done() { /* waits for the kernels (timing only): the downloads are timed from here */
        if (!on) return;
        if (cudaEventSynchronize(e[1]) != cudaSuccess) {
            cudaGetLastError();
            on = false;
        }
        t_k = wall_ms();
    }
    void finish() { /* after the downloads */
        if (!on) return;
        float g = 0;
        if (cudaEventElapsedTime(&g, e[0], e[1]) != cudaSuccess) {
            cudaGetLastError();
            return;
        }
        double t1 = wall_ms();
        std::lock_guard<std::mutex> lk(g_tm_mu);
        g_tm[0] += 1, g_tm[1] += t_pre, g_tm[2] += g, g_tm[3] += t1 - t_k, g_tm[4] += t1 - t0;
    }
};

#ifdef DCU_TRACE
extern "C" int dcu_trace_k(int op, FILE *f);
extern "C" int dcu_trace_m(int op, FILE *f);
extern "C" int dcu_trace_a(int op, FILE *f);
#endif

extern "C" drift_status dcu_forward(dcu_model *m, dcu_kv *const *kv, const int *pos, const int32_t *tok, int B,
                                    float *hidden, float *logits, int32_t *next, const int *logit_rows,
                                    int n_logit_rows, drift_error *err) {
    if (B <= 0) return DRIFT_OK;
    const drift_numeric_profile *p = &m->p;
    dcu_ctx *c = &m->ctx;
    dcu_ws *w = &m->ws;
    if (!logits && !next) n_logit_rows = 0;
    drift_status st;
    fwd_timer tm;
    tm.start();
    DCU_TRY(cudaSetDevice(0), "selecting device 0");
    for (int i = 0; i < n_logit_rows; i++)
        if (logit_rows[i] < 0 || logit_rows[i] >= B)
            return drift_error_set(err, DRIFT_ERR_INVALID, "cuda: logit row %d outside the batch of %d", logit_rows[i],
                                   B);
    int max_npos = 1;
    for (int b = 0; b < B; b++) {
        if (!kv[b] || kv[b]->owner != m)
            return drift_error_set(err, DRIFT_ERR_INVALID, "cuda: row %d's KV cache belongs to another model", b);
        if (pos[b] < 0 || pos[b] >= kv[b]->n_ctx)
            return drift_error_set(err, DRIFT_ERR_INVALID, "cuda: position %d outside the cache of %d", pos[b],
                                   kv[b]->n_ctx);
        int start = m->window > 0 && pos[b] + 1 > m->window ? pos[b] + 1 - m->window : 0;
        if (pos[b] - start + 1 > max_npos) max_npos = pos[b] - start + 1;
    }
    int chunk = dcu_attn_chunk(p, B, m->n_heads, max_npos, c->sm_count);
    size_t part = dcu_attn_part_floats(B, m->n_heads, m->hd, chunk, max_npos);
    size_t part_row = dcu_attn_part_floats(1, m->n_heads, m->hd, chunk, max_npos);
    int cap0 = w->cap, lcap0 = w->lcap;
    size_t pf0 = w->part_floats;
    if ((st = ws_rows(m, B, err)) || (n_logit_rows > 0 && (st = ws_logits(m, n_logit_rows, err))) ||
        (part && (st = ws_part(m, part, part_row, err))))
        return st;
    if (w->cap != cap0 || w->lcap != lcap0 || w->part_floats != pf0) { /* buffers moved: graphs are stale */
        m->ws_gen++;
        graphs_clear(m);
    }
    for (int b = 0; b < B; b++) {
        drow *r = &w->h_rows[b];
        r->kc = kv[b]->kc;
        r->vc = kv[b]->vc;
        r->pos = pos[b];
        r->tok = tok[b];
        r->n_ctx = kv[b]->n_ctx;
        r->pad = 0;
    }
    for (int i = 0; i < n_logit_rows; i++) w->h_lidx[i] = logit_rows[i];
    DCU_TRY(cudaMemcpyAsync(w->rows, w->h_rows, (size_t)B * sizeof(drow), cudaMemcpyHostToDevice, c->st),
            "uploading the rows");
    if (n_logit_rows > 0)
        DCU_TRY(cudaMemcpyAsync(w->lidx, w->h_lidx, (size_t)n_logit_rows * sizeof(int), cudaMemcpyHostToDevice, c->st),
                "uploading logit rows");
#ifdef DCU_TRACE
    /* DRIFT_CUDA_TRACE_OUT=file: the DRIFT_CUDA_TRACE_AT-th (default 40th) pass of one row in the process is
     * traced (cuda_internal.cuh: DCU_TRACE); the file is not written when it cannot be opened */
    static std::atomic<int> tr_count;
    const char *tr_out = getenv("DRIFT_CUDA_TRACE_OUT");
    const char *tr_at = getenv("DRIFT_CUDA_TRACE_AT");
    bool tr = tr_out && B == 1 && ++tr_count == (tr_at ? atoi(tr_at) : 40);
    if (tr) {
        DCU_TRY(cudaStreamSynchronize(c->st), "trace");
        dcu_trace_k(0, NULL);
        dcu_trace_m(0, NULL);
        dcu_trace_a(0, NULL);
    }
#endif
    int done = 0;
    tm.mark(0, c->st);
    if (graphs_usable(m) && (st = fwd_graph(m, B, chunk, max_npos, n_logit_rows, &done, err))) return st;
    if (!done && (st = fwd_enqueue(m, B, chunk, max_npos, n_logit_rows, err))) return st;
    tm.mark(1, c->st);
#ifdef DCU_TRACE
    if (tr) {
        DCU_TRY(cudaStreamSynchronize(c->st), "trace");
        FILE *f = fopen(tr_out, "w");
        dcu_trace_k(1, f);
        dcu_trace_m(1, f);
        dcu_trace_a(1, f);
        if (f) fclose(f);
    }
#endif
    if (next && n_logit_rows > 0 && (st = dcu_launch_argmax(c, w->logits, n_logit_rows, m->n_vocab, w->amax, err)))
        return st;
    tm.kernels_done();
    if ((st = fwd_download(m, B, hidden, logits, next, n_logit_rows, err))) return st;
    tm.finish();
    return DRIFT_OK;
}
