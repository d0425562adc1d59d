/* cuda_ops.cu - single operations for the tests (tests/ops/test_cuda_ops.c):
 * each runs one kernel of the forward pass on host inputs, in a shared
 * context, and copies the result back, so every kernel x format can be
 * compared with the CPU reference (the backend-ops style test). */
#include "model/cuda/cuda_internal.cuh"

#include <math.h>
#include <mutex>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ single ops */

static std::mutex g_op_mu;
static dcu_ctx g_op;
static int g_op_ready;

/* the shared context of the single ops (created once, kept) */
static drift_status op_ctx(dcu_ctx **out, drift_error *err) {
    if (!g_op_ready) {
        if (dcu_device_count() == 0) return drift_error_set(err, DRIFT_ERR_UNSUPPORTED, "cuda: no GPU found");
        drift_status st = dcu_ctx_init(&g_op, err);
        if (st) {
            dcu_ctx_destroy(&g_op);
            return st;
        }
        g_op_ready = 1;
    }
    *out = &g_op;
    return DRIFT_OK;
}

/* A pageable cudaMemcpy to the device may return before its DMA has landed,
 * and the op's stream is non-blocking (not ordered after the legacy
 * stream's copy): the op would read a partly uploaded input (seen once: the
 * last row of a 1.2 MB argmax input, on the H200). So the device is
 * synchronized before the op runs. */
static drift_status op_up(dcu_allocs *al, const void *src, size_t bytes, void **out, drift_error *err) {
    drift_status st = al->get(bytes, out, "op input", err);
    if (st) return st;
    if (bytes) DCU_TRY(cudaMemcpy(*out, src, bytes, cudaMemcpyHostToDevice), "uploading op input");
    if (bytes) DCU_TRY(cudaDeviceSynchronize(), "uploading op input");
    return DRIFT_OK;
}

static drift_status op_finish(dcu_ctx *c, void *dst, const void *src, size_t bytes, drift_error *err) {
    DCU_TRY(cudaStreamSynchronize(c->st), "running the op");
    if (bytes) DCU_TRY(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "copying the op result");
    return DRIFT_OK;
}

extern "C" drift_status dcu_op_matmul(const drift_numeric_profile *p, float *y, const float *x, const num_qmat *W,
                                      int64_t B, drift_error *err) {
    std::lock_guard<std::mutex> lk(g_op_mu);
    dcu_ctx *c;
    drift_status st = dcu_check_profile(p, err);
    if (st || (st = op_ctx(&c, err))) return st;
    if (B <= 0) return DRIFT_OK;
    dcu_allocs al;
    dmat dW;
    if ((st = dcu_upload_mats(&al, &W, 1, &dW, err))) return st;
    unsigned needs = dcu_mm_needs(p, &dW);
    int64_t K = W->cols, N = W->rows;
    void *dx, *dy;
    dact a;
    if ((st = op_up(&al, x, (size_t)(B * K) * sizeof(float), &dx, err)) ||
        (st = dcu_act_alloc(&al, (int)B, K, needs, &a, err)) ||
        (st = al.get((size_t)(B * N) * sizeof(float), &dy, "op output", err)) ||
        (st = dcu_launch_prep(c, p->acts, (const float *)dx, K, NULL, (int)B, (int)K, &a, needs, err)) ||
        (st = dcu_mm(c, p, &dW, &a, B, (float *)dy, N, err)))
        return st;
    return op_finish(c, y, dy, (size_t)(B * N) * sizeof(float), err);
}

extern "C" drift_status dcu_op_rmsnorm(const drift_numeric_profile *p, float *out, const float *x, const float *w,
                                       int64_t rows, int64_t n, float eps, drift_error *err) {
    std::lock_guard<std::mutex> lk(g_op_mu);
    dcu_ctx *c;
    drift_status st = op_ctx(&c, err);
    if (st || rows <= 0) return st;
    dcu_allocs al;
    void *dx, *dw, *dout;
    if ((st = op_up(&al, x, (size_t)(rows * n) * sizeof(float), &dx, err)) ||
        (st = op_up(&al, w, (size_t)n * sizeof(float), &dw, err)) ||
        (st = al.get((size_t)(rows * n) * sizeof(float), &dout, "op output", err)) ||
        (st = dcu_launch_norm(c, p->acts, (float *)dx, NULL, (int)rows, (int)n, (const float *)dw, eps, (float *)dout,
                              NULL, 0, err)))
        return st;
    return op_finish(c, out, dout, (size_t)(rows * n) * sizeof(float), err);
}

extern "C" drift_status dcu_op_softmax(const drift_numeric_profile *p, float *x, int64_t rows, int64_t n,
                                       drift_error *err) {
    std::lock_guard<std::mutex> lk(g_op_mu);
    dcu_ctx *c;
    drift_status st = op_ctx(&c, err);
    if (st || rows <= 0) return st;
    dcu_allocs al;
    void *dx;
    if ((st = op_up(&al, x, (size_t)(rows * n) * sizeof(float), &dx, err)) ||
        (st = dcu_launch_softmax(c, p->exp == DRIFT_EXP_FAST, (float *)dx, rows, n, err)))
        return st;
    return op_finish(c, x, dx, (size_t)(rows * n) * sizeof(float), err);
}

extern "C" drift_status dcu_op_argmax(const float *x, int64_t rows, int64_t n, int32_t *out, drift_error *err) {
    std::lock_guard<std::mutex> lk(g_op_mu);
    dcu_ctx *c;
    drift_status st = op_ctx(&c, err);
    if (st || rows <= 0) return st;
    dcu_allocs al;
    void *dx, *dout;
    if ((st = op_up(&al, x, (size_t)(rows * n) * sizeof(float), &dx, err)) ||
        (st = al.get((size_t)rows * sizeof(int), &dout, "op output", err)) ||
        (st = dcu_launch_argmax(c, (const float *)dx, rows, n, (int *)dout, err)))
        return st;
    return op_finish(c, out, dout, (size_t)rows * sizeof(int), err);
}

extern "C" drift_status dcu_op_rope(const drift_numeric_profile *p, float *x, int n_heads, int64_t pos,
                                    const num_rope_params *rp, drift_error *err) {
    std::lock_guard<std::mutex> lk(g_op_mu);
    dcu_ctx *c;
    drift_status st = op_ctx(&c, err);
    if (st || n_heads <= 0) return st;
    if (rp->head_dim < 1 || rp->head_dim > 1024 || rp->n_rot < 0 || rp->n_rot > rp->head_dim || rp->n_rot % 2 ||
        pos < 0 || pos > INT32_MAX)
        return drift_error_set(err, DRIFT_ERR_INVALID, "cuda: rope of head_dim %d, n_rot %d at %lld", rp->head_dim,
                               rp->n_rot, (long long)pos);
    dcu_allocs al;
    size_t bytes = (size_t)n_heads * (size_t)rp->head_dim * sizeof(float);
    drow row = {NULL, NULL, (int)pos, 0, 1, 0};
    const double *freq;
    void *dx, *drw;
    if ((st = op_up(&al, x, bytes, &dx, err)) || (st = op_up(&al, &row, sizeof row, &drw, err)) ||
        (st = dcu_upload_freqs(&al, rp, &freq, err)))
        return st;
    dcu_qkv_args qa;
    memset(&qa, 0, sizeof qa);
    qa.q = (float *)dx;
    qa.ldq = (int64_t)n_heads * rp->head_dim;
    qa.freq = freq;
    qa.n_heads = n_heads;
    qa.n_kvh = 0;
    qa.head_dim = rp->head_dim;
    qa.n_rot = rp->n_rot;
    qa.neox = rp->neox;
    qa.rows = (const drow *)drw;
    qa.kvfmt = p->kv;
    if ((st = dcu_launch_qkv(c, &qa, 1, err))) return st;
    return op_finish(c, x, dx, bytes, err);
}

extern "C" drift_status dcu_op_swiglu(const drift_numeric_profile *p, float *out, const float *gate, const float *up,
                                      int64_t n, drift_error *err) {
    std::lock_guard<std::mutex> lk(g_op_mu);
    dcu_ctx *c;
    drift_status st = op_ctx(&c, err);
    if (st || n <= 0) return st;
    dcu_allocs al;
    void *dg, *du, *dout;
    if ((st = op_up(&al, gate, (size_t)n * sizeof(float), &dg, err)) ||
        (st = op_up(&al, up, (size_t)n * sizeof(float), &du, err)) ||
        (st = al.get((size_t)n * sizeof(float), &dout, "op output", err)))
        return st;
    dact a = {(float *)dout, NULL, NULL, NULL};
    if ((st = dcu_launch_swiglu(c, DRIFT_DTYPE_F32, p->exp == DRIFT_EXP_FAST, (const float *)dg, (const float *)du, n,
                                1, (int)n, &a, 0, err)))
        return st;
    return op_finish(c, out, dout, (size_t)n * sizeof(float), err);
}

extern "C" drift_status dcu_op_attention(const drift_numeric_profile *p, float *out, const float *q, const void *k,
                                         const void *v, size_t stride_bytes, int n_pos, int head_dim, float scale,
                                         drift_error *err) {
    std::lock_guard<std::mutex> lk(g_op_mu);
    dcu_ctx *c;
    drift_status st = op_ctx(&c, err);
    if (st) return st;
    if (n_pos <= 0) {
        for (int d = 0; d < head_dim; d++) out[d] = 0.0f;
        return DRIFT_OK;
    }
    size_t vb = num_kv_bytes(p->kv, head_dim);
    dcu_allocs al;
    void *dq, *dk, *dv, *dout, *drw, *dpart = NULL, *dcnt;
    if ((st = op_up(&al, q, (size_t)head_dim * sizeof(float), &dq, err)) ||
        (st = al.get((size_t)n_pos * vb, &dk, "op K", err)) || (st = al.get((size_t)n_pos * vb, &dv, "op V", err)) ||
        (st = al.get((size_t)head_dim * sizeof(float), &dout, "op output", err)))
        return st;
    DCU_TRY(cudaMemcpy2D(dk, vb, k, stride_bytes, vb, (size_t)n_pos, cudaMemcpyHostToDevice), "uploading K");
    DCU_TRY(cudaMemcpy2D(dv, vb, v, stride_bytes, vb, (size_t)n_pos, cudaMemcpyHostToDevice), "uploading V");
    drow row = {(uint8_t *)dk, (uint8_t *)dv, n_pos - 1, 0, n_pos, 0};
    if ((st = op_up(&al, &row, sizeof row, &drw, err))) return st;
    int chunk = dcu_attn_chunk(p, 1, 1, n_pos, c->sm_count);
    size_t part = dcu_attn_part_floats(1, 1, head_dim, chunk, n_pos);
    if (part && (st = al.get(part * sizeof(float), &dpart, "attention workspace", err))) return st;
    if ((st = al.get(sizeof(unsigned), &dcnt, "attention counter", err))) return st;
    DCU_TRY(cudaMemsetAsync(dcnt, 0, sizeof(unsigned), c->st), "clearing the attention counter");
    dcu_attn_args aa;
    memset(&aa, 0, sizeof aa);
    aa.q = (const float *)dq;
    aa.ldq = head_dim;
    aa.out = (float *)dout;
    aa.ldo = head_dim;
    aa.rows = (const drow *)drw;
    aa.layer = 0;
    aa.n_heads = 1;
    aa.n_kvh = 1;
    aa.head_dim = head_dim;
    aa.window = 0;
    aa.kvfmt = p->kv;
    aa.fast_exp = p->exp == DRIFT_EXP_FAST;
    aa.vb = vb;
    aa.scale = scale;
    aa.chunk = chunk;
    aa.max_npos = n_pos;
    aa.part = (float *)dpart;
    aa.part_floats = part;
    aa.cnt = (unsigned *)dcnt;
    aa.cnt_rows = 1;
    if ((st = dcu_launch_attention(c, &aa, 1, err))) return st;
    return op_finish(c, out, dout, (size_t)head_dim * sizeof(float), err);
}

extern "C" drift_status dcu_op_embedding(const drift_numeric_profile *p, float *out, const num_qmat *W, int64_t row,
                                         drift_error *err) {
    std::lock_guard<std::mutex> lk(g_op_mu);
    dcu_ctx *c;
    drift_status st = op_ctx(&c, err);
    if (st) return st;
    if (row < 0 || row >= W->rows)
        return drift_error_set(err, DRIFT_ERR_INVALID, "cuda: embedding row %lld outside %lld", (long long)row,
                               (long long)W->rows);
    dcu_allocs al;
    dmat dW;
    int tok = (int)row;
    void *dtok, *dout;
    if ((st = dcu_upload_mats(&al, &W, 1, &dW, err)) || (st = op_up(&al, &tok, sizeof tok, &dtok, err)) ||
        (st = al.get((size_t)W->cols * sizeof(float), &dout, "op output", err)) ||
        (st = dcu_launch_embed(c, p->acts, &dW, NULL, (const int *)dtok, 1, (float *)dout, err)))
        return st;
    return op_finish(c, out, dout, (size_t)W->cols * sizeof(float), err);
}

extern "C" drift_status dcu_op_round_acts(drift_dtype t, float *x, int64_t rows, int64_t n, drift_error *err) {
    std::lock_guard<std::mutex> lk(g_op_mu);
    dcu_ctx *c;
    drift_status st = op_ctx(&c, err);
    if (st || rows <= 0 || n <= 0) return st;
    dcu_allocs al;
    size_t bytes = (size_t)(rows * n) * sizeof(float);
    void *dx;
    dact a;
    unsigned needs = (t == DRIFT_DTYPE_BF16 || t == DRIFT_DTYPE_F16)   ? DCU_NEED_H
                     : t == DRIFT_DTYPE_FP8_E4M3                          ? DCU_NEED_Q
                                                                          : 0;
    if ((st = op_up(&al, x, bytes, &dx, err)) || (st = dcu_act_alloc(&al, (int)rows, n, needs, &a, err)) ||
        (st = dcu_launch_prep(c, t, (const float *)dx, n, NULL, (int)rows, (int)n, &a, needs, err)))
        return st;
    return op_finish(c, x, a.f, bytes, err);
}

extern "C" drift_status dcu_op_kv_store(drift_dtype t, void *dst, const float *src, int n_vec, int n,
                                        drift_error *err) {
    std::lock_guard<std::mutex> lk(g_op_mu);
    dcu_ctx *c;
    drift_status st = op_ctx(&c, err);
    if (st || n_vec <= 0 || n <= 0) return st;
    size_t vb = num_kv_bytes(t, n);
    dcu_allocs al;
    void *ds, *dd;
    if ((st = op_up(&al, src, (size_t)n_vec * n * sizeof(float), &ds, err)) ||
        (st = al.get((size_t)n_vec * vb, &dd, "op output", err)) ||
        (st = dcu_launch_kv_store(c, t, (uint8_t *)dd, (const float *)ds, n_vec, n, err)))
        return st;
    return op_finish(c, dst, dd, (size_t)n_vec * vb, err);
}

extern "C" drift_status dcu_op_kv_load(drift_dtype t, float *dst, const void *src, int n_vec, int n, drift_error *err) {
    std::lock_guard<std::mutex> lk(g_op_mu);
    dcu_ctx *c;
    drift_status st = op_ctx(&c, err);
    if (st || n_vec <= 0 || n <= 0) return st;
    size_t vb = num_kv_bytes(t, n);
    dcu_allocs al;
    void *ds, *dd;
    if ((st = op_up(&al, src, (size_t)n_vec * vb, &ds, err)) ||
        (st = al.get((size_t)n_vec * n * sizeof(float), &dd, "op output", err)) ||
        (st = dcu_launch_kv_load(c, t, (float *)dd, (const uint8_t *)ds, n_vec, n, err)))
        return st;
    return op_finish(c, dst, dd, (size_t)n_vec * n * sizeof(float), err);
}
