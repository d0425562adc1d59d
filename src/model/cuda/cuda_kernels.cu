/* cuda_kernels.cu - the CUDA backend's row kernels and their launchers.
 *
 * One block per row for the row-wise ops (DCU_ROWT = 256 threads, norm up to
 * 1024, below); thread t owns elements t, t + T, ... of its row in every pass, so a thread reads
 * back only what it wrote itself between passes. Reductions (sum of squares,
 * amax, softmax sums) are a per-thread sequential sum followed by a fixed xor
 * tree over the warp and then over the warps: the order depends on the row
 * length only, never on the batch.
 *
 *   embed    x = act(deq(E[tok]))
 *   norm     [x = act(x + r)]; y = rmsnorm(x) * w -> hidden and/or a matmul
 *            input (act() rounding and its bf16/f16 or fp8 copies)
 *   prep     a matmul input from f32 rows (optionally gathered by index)
 *   swiglu   a = act(silu(gate) * up)
 *   qkv      q, k (+ qwen2 bias) rotated (RoPE in double, as the reference
 *            kernels), K and V stored into the cache in the KV format
 *   attention split-KV, see below
 *
 * Attention (flash-decoding): the positions [start, pos] of a row are cut
 * into splits of `chunk` positions; one block per (split, group of query
 * heads of one KV head, row) of nw warps, nw = min(8, ceil(chunk / 32)) (a
 * function of the chunk only). Tile k of a split (32 positions) belongs to
 * warp k mod nw: lane j scores position j of the tile for each head of the
 * block (q . k with four partial sums by element index, q from shared
 * memory, the K vector loaded once for all the heads, its pieces in flight
 * together), each head's tile max and sum of exp are fixed xor trees over
 * the warp, and lane l accumulates the weighted V of its dimensions over the
 * tile's positions in order (online softmax over the warp's tiles). The
 * warps' partials are merged in warp order; the splits of a (row, head) are
 * merged in split order with the same merge step by the block that finishes
 * last (a counter per row and head group). A row of one split writes its
 * output directly with the same final operation (acc * (1 / l)). How many
 * heads share a block is chosen from the grid size; the order of every sum
 * depends on (head_dim, chunk, the row's positions) only. When all splits'
 * warps of a row fit one block (splits x nw <= 16 warps, <= 48 KB of shared
 * memory), k_attn_row does that work in one block per (row, head group):
 * the same per-split operations, splits merged in split order through
 * shared memory instead of the global workspace and the counter, so the same
 * bits with fewer round trips (DRIFT_CUDA_FUSE=0: always the split grid).
 * The forward pass has attention write wo's prepared input directly
 * (act() rounding and the bf16/f16 copy: no prep launch) where act() is
 * elementwise, and hands it k_qkv's arguments: for one row served by
 * k_attn_row, each block does k_qkv's operations for its heads itself (bias,
 * RoPE in double with the angles computed before the dependency wait, K and
 * V stored at the row's position; the blocks of a KV head store the same
 * bits) and reads them back, so the pass has no k_qkv launch (the same
 * bits; DRIFT_CUDA_QKA=0 keeps the launch). A one-row pass also prefetches
 * the cache lines of its earlier positions before the wait (stored by
 * earlier passes; the lines of its own position only after it).
 *
 * The row kernels norm, swiglu and prep keep a row in registers (k_*_r): one
 * round of loads instead of one dependent load per element and pass; norm
 * spreads a row over up to 1024 threads (2, 4 or 8 elements each, the count
 * chosen from the row length alone), swiglu and prep over 256; swiglu and
 * prep with acts that need no row amax (not fp8) spread a row over blocks of
 * 256 columns (k_*_e, elementwise). The chunk is fixed by the profile with
 * batch_invariant=1 (so a row's result depends on its own positions only),
 * and chosen from the batch size and the SM count with batch_invariant=0. */
#include "model/cuda/cuda_internal.cuh"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ATT_THREADS 128
#define ATT_TILE 32

static __device__ __forceinline__ bool is_fp8(int t) {
    return t == DRIFT_DTYPE_FP8_E4M3 || t == DRIFT_DTYPE_FP8_E5M2;
}

static inline bool is_fp8_host(int t) { return t == DRIFT_DTYPE_FP8_E4M3 || t == DRIFT_DTYPE_FP8_E5M2; }

static __device__ __forceinline__ float dev_exp(int fast, float x) { return dcu_exp(fast, x); }

/* ------------------------------------------------------------------------
 * act() rounding of one row in place (num_round_acts), with the copies a
 * matmul may need. amax: max |f| over the row (fp8 only). Block-strided.
 * ---------------------------------------------------------------------- */
/* the fp8 scale of a row from its amax (s, and whether it is usable) */
static __device__ __forceinline__ float prep_scale(int acts, float amax, bool *ok) {
    float s = 0.0f;
    *ok = false;
    if (is_fp8(acts)) {
        s = __fdiv_rn(amax, dcu_fp8_max(acts));
        *ok = s > 0.0f && s != __uint_as_float(0x7f800000u);
    }
    return s;
}

/* act() rounding of one element; its bf16/f16 copy to *h, its fp8 code to *q
 * (either may be NULL): dcu_prep_elem */
static __device__ __forceinline__ float prep_elem(int acts, float v, float s, bool ok, uint16_t *h, uint8_t *q) {
    return dcu_prep_elem(acts, v, s, ok, h, q);
}

static __device__ void prep_row(int acts, float *f, uint16_t *h, int64_t kp, uint8_t *q, float *qs, int64_t K,
                                float amax) {
    bool ok;
    float s = prep_scale(acts, amax, &ok);
    for (int64_t i = threadIdx.x; i < K; i += blockDim.x)
        f[i] = prep_elem(acts, f[i], s, ok, h ? h + i : NULL, q ? q + i : NULL);
    if (h)
        for (int64_t i = K + threadIdx.x; i < kp; i += blockDim.x) h[i] = 0;
    if (q && threadIdx.x == 0) *qs = ok ? s : 0.0f;
}

/* prep_row of a row held in registers: thread t's elements t + k * T
 * (k < PER, T = blockDim.x) are v[k]; the rounded values go to f (and v) */
template <int PER>
static __device__ __forceinline__ void prep_row_r(int acts, float *v, float *f, uint16_t *h, int64_t kp, uint8_t *q,
                                                  float *qs, int K, float amax) {
    bool ok;
    float s = prep_scale(acts, amax, &ok);
#pragma unroll
    for (int k = 0; k < PER; k++) {
        int i = (int)(threadIdx.x + k * blockDim.x);
        if (i < K) {
            v[k] = prep_elem(acts, v[k], s, ok, h ? h + i : NULL, q ? q + i : NULL);
            f[i] = v[k];
        }
    }
    if (h)
        for (int64_t i = K + threadIdx.x; i < kp; i += blockDim.x) h[i] = 0;
    if (q && threadIdx.x == 0) *qs = ok ? s : 0.0f;
}

/* a row of h that pads the batch to 16 rows: zeros */
static __device__ void zero_h_row(uint16_t *h, int64_t kp) {
    for (int64_t i = threadIdx.x; i < kp; i += blockDim.x) h[i] = 0;
}

/* ------------------------------------------------------------------ embed */
__global__ void __launch_bounds__(DCU_ROWT) k_embed(int acts, dmat E, const drow *rows, const int *toks, float *x) {
    DCU_PDL_ENTER();
    __shared__ float sm[32];
    int b = blockIdx.x;
    int64_t tok = toks ? toks[b] : rows[b].tok;
    int64_t D = E.cols;
    float *xr = x + (size_t)b * D;
    float am = 0.0f;
    for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
        float v = dcu_deq_elem(E, tok, i);
        xr[i] = v;
        am = fmaxf(am, fabsf(v));
    }
    if (is_fp8(acts)) am = dcu_block_max(am, sm, 0.0f);
    prep_row(acts, xr, NULL, 0, NULL, NULL, D, am);
}

drift_status dcu_launch_embed(dcu_ctx *c, int acts, const dmat *E, const drow *rows, const int *toks, int B,
                              float *x, drift_error *err) {
    if (B <= 0) return DRIFT_OK;
    for (int b0 = 0; b0 < B; b0 += 65535) {
        int nb = B - b0 < 65535 ? B - b0 : 65535;
        dcu_launch(k_embed, nb, DCU_ROWT, 0, c->st, acts, *E, rows ? rows + b0 : NULL, toks ? toks + b0 : NULL,
                                             x + (size_t)b0 * E->cols);
        DCU_LAUNCHED("embedding kernel");
    }
    return DRIFT_OK;
}

/* ---------------------------------------------------------- norm (+ add) */
__global__ void __launch_bounds__(DCU_ROWT) k_norm(int acts, float *x, const float *r, int64_t n, const float *w,
                                                   float eps, float *hidden, dact a, unsigned needs, int B) {
    DCU_PDL_ENTER();
    __shared__ float sm[32];
    int row = blockIdx.x;
    int64_t kp = dcu_pad16(n);
    uint16_t *h = (needs & DCU_NEED_H) && a.h ? a.h + (size_t)row * kp : NULL;
    if (row >= B) { /* batch padding of h */
        if (h) zero_h_row(h, kp);
        return;
    }
    float *xr = x + (size_t)row * n;
    if (r) { /* residual: x = act(x + r) */
        const float *rr = r + (size_t)row * n;
        float am = 0.0f;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
            float v = __fadd_rn(xr[i], rr[i]);
            xr[i] = v;
            am = fmaxf(am, fabsf(v));
        }
        if (is_fp8(acts)) am = dcu_block_max(am, sm, 0.0f);
        prep_row(acts, xr, NULL, 0, NULL, NULL, n, am);
    }
    float ss = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) ss = fmaf(xr[i], xr[i], ss);
    ss = dcu_block_sum(ss, sm);
    float rinv = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(ss, (float)n), eps)));
    float *af = a.f ? a.f + (size_t)row * n : NULL;
    float *hid = hidden ? hidden + (size_t)row * n : NULL;
    float am = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        float y = __fmul_rn(__fmul_rn(xr[i], rinv), w[i]);
        if (hid) hid[i] = y;
        if (af) af[i] = y;
        am = fmaxf(am, fabsf(y));
    }
    if (!af) return;
    if (is_fp8(acts)) am = dcu_block_max(am, sm, 0.0f);
    prep_row(acts, af, h, kp, (needs & DCU_NEED_Q) && a.q ? a.q + (size_t)row * n : NULL,
             a.qs ? a.qs + row : NULL, n, am);
}

/* k_norm with the row in registers and T = blockDim.x threads chosen from
 * n alone (norm_threads: up to 1024, PER elements each; thread t holds
 * elements t + k * T): every load in flight together, the same operations
 * per element; the sums are per thread in k order, then the fixed warp and
 * block trees, so a row's result depends on n only. n <= PER * T. */
#define NORM_MAX_T 1024
template <int PER>
__global__ void __launch_bounds__(NORM_MAX_T) k_norm_r(int acts, float *x, const float *r, int n, const float *w,
                                                     float eps, float *hidden, dact a, unsigned needs, int B) {
    DCU_TR_EXIT();
    dcu_pdl_trigger();
    __shared__ float sm[32];
    int row = blockIdx.x;
    int64_t kp = dcu_pad16(n);
    uint16_t *h = (needs & DCU_NEED_H) && a.h ? a.h + (size_t)row * kp : NULL;
    if (row >= B) { /* batch padding of h */
        dcu_pdl_wait();
        if (h) zero_h_row(h, kp);
        return;
    }
    /* w (a weight: no kernel of the pass writes it) is loaded before the
     * wait, off the critical path: after it, only x and r, which the
     * previous kernels wrote and the cache most likely still holds */
    float xv[PER], wv[PER];
#pragma unroll
    for (int k = 0; k < PER; k++) {
        int i = (int)(threadIdx.x + k * blockDim.x);
        wv[k] = i < n ? w[i] : 0.0f;
    }
    dcu_pdl_wait();
    float *xr = x + (size_t)row * n;
#pragma unroll
    for (int k = 0; k < PER; k++) {
        int i = (int)(threadIdx.x + k * blockDim.x);
        xv[k] = i < n ? xr[i] : 0.0f;
    }
    if (r) { /* residual: x = act(x + r) */
        const float *rr = r + (size_t)row * n;
        float rv[PER];
#pragma unroll
        for (int k = 0; k < PER; k++) {
            int i = (int)(threadIdx.x + k * blockDim.x);
            rv[k] = i < n ? rr[i] : 0.0f;
        }
        float am = 0.0f;
#pragma unroll
        for (int k = 0; k < PER; k++) {
            int i = (int)(threadIdx.x + k * blockDim.x);
            if (i < n) {
                xv[k] = __fadd_rn(xv[k], rv[k]);
                am = fmaxf(am, fabsf(xv[k]));
            }
        }
        if (is_fp8(acts)) am = dcu_block_max(am, sm, 0.0f);
        prep_row_r<PER>(acts, xv, xr, NULL, 0, NULL, NULL, n, am);
    }
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < PER; k++) {
        int i = (int)(threadIdx.x + k * blockDim.x);
        if (i < n) ss = fmaf(xv[k], xv[k], ss);
    }
    ss = dcu_block_sum(ss, sm);
    float rinv = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(ss, (float)n), eps)));
    float *af = a.f ? a.f + (size_t)row * n : NULL;
    float *hid = hidden ? hidden + (size_t)row * n : NULL;
    float am = 0.0f;
#pragma unroll
    for (int k = 0; k < PER; k++) {
        int i = (int)(threadIdx.x + k * blockDim.x);
        if (i < n) {
            float y = __fmul_rn(__fmul_rn(xv[k], rinv), wv[k]);
            if (hid) hid[i] = y;
            xv[k] = y;
            am = fmaxf(am, fabsf(y));
        }
    }
    if (!af) return;
    if (is_fp8(acts)) am = dcu_block_max(am, sm, 0.0f);
    prep_row_r<PER>(acts, xv, af, h, kp, (needs & DCU_NEED_Q) && a.q ? a.q + (size_t)row * n : NULL,
                    a.qs ? a.qs + row : NULL, n, am);
}

drift_status dcu_launch_norm(dcu_ctx *c, int acts, float *x, const float *r, int B, int n, const float *w, float eps,
                             float *hidden, const dact *a, unsigned needs, drift_error *err) {
    if (B <= 0) return DRIFT_OK;
    dact av = a ? *a : dact{NULL, NULL, NULL, NULL};
    if (!av.f) needs = 0;
    int rows = (needs & DCU_NEED_H) ? (int)dcu_pad16(B) : B;
    int per = n <= 2 * NORM_MAX_T ? 2 : n <= 4 * NORM_MAX_T ? 4 : 8;
    int T = ((n + per - 1) / per + 31) / 32 * 32; /* from n only */
    if (n <= 2 * NORM_MAX_T)
        dcu_launch(k_norm_r<2>, rows, T, 0, c->st, acts, x, r, n, w, eps, hidden, av, needs, B);
    else if (n <= 4 * NORM_MAX_T)
        dcu_launch(k_norm_r<4>, rows, T, 0, c->st, acts, x, r, n, w, eps, hidden, av, needs, B);
    else if (n <= 8 * NORM_MAX_T)
        dcu_launch(k_norm_r<8>, rows, T, 0, c->st, acts, x, r, n, w, eps, hidden, av, needs, B);
    else
        dcu_launch(k_norm, rows, DCU_ROWT, 0, c->st, acts, x, r, n, w, eps, hidden, av, needs, B);
    DCU_LAUNCHED("rmsnorm kernel");
    return DRIFT_OK;
}

/* ------------------------------------------------------------------ prep */
__global__ void __launch_bounds__(DCU_ROWT) k_prep(int acts, const float *in, int64_t ldin, const int *idx, int n_out,
                                                   int64_t K, dact a, unsigned needs) {
    DCU_PDL_ENTER();
    __shared__ float sm[32];
    int o = blockIdx.x;
    int64_t kp = dcu_pad16(K);
    uint16_t *h = (needs & DCU_NEED_H) ? a.h + (size_t)o * kp : NULL;
    if (o >= n_out) {
        if (h) zero_h_row(h, kp);
        return;
    }
    const float *src = in + (size_t)(idx ? idx[o] : o) * ldin;
    float *f = a.f + (size_t)o * K;
    float am = 0.0f;
    for (int64_t i = threadIdx.x; i < K; i += blockDim.x) {
        float v = src[i];
        f[i] = v;
        am = fmaxf(am, fabsf(v));
    }
    if (is_fp8(acts)) am = dcu_block_max(am, sm, 0.0f);
    prep_row(acts, f, h, kp, (needs & DCU_NEED_Q) ? a.q + (size_t)o * K : NULL, a.qs ? a.qs + o : NULL, K, am);
}

/* k_prep where act() needs no row-wide value (acts not fp8, no fp8 copy):
 * elementwise, a row spread over blocks of DCU_ROWT columns; grid
 * (ceil(kp / DCU_ROWT), rows). Same per-element operations as k_prep. */
__global__ void __launch_bounds__(DCU_ROWT) k_prep_e(int acts, const float *in, int64_t ldin, const int *idx,
                                                     int n_out, int K, dact a, unsigned needs) {
    DCU_PDL_ENTER();
    int o = blockIdx.y;
    int64_t kp = dcu_pad16(K);
    int64_t i = (int64_t)blockIdx.x * DCU_ROWT + threadIdx.x;
    uint16_t *h = (needs & DCU_NEED_H) ? a.h + (size_t)o * kp : NULL;
    if (o >= n_out || i >= K) { /* batch padding, column padding of h */
        if (h && i < kp) h[i] = 0;
        return;
    }
    float v = in[(size_t)(idx ? idx[o] : o) * ldin + i];
    a.f[(size_t)o * K + i] = prep_elem(acts, v, 0.0f, false, h ? h + i : NULL, NULL);
}

/* k_prep with the row in registers (thread t: elements t + k * DCU_ROWT,
 * k < PER, as k_prep's loops): all loads in flight together, the same
 * operations, so the same results bit for bit. n <= PER * DCU_ROWT. */
template <int PER>
__global__ void __launch_bounds__(DCU_ROWT) k_prep_r(int acts, const float *in, int64_t ldin, const int *idx,
                                                     int n_out, int K, dact a, unsigned needs) {
    DCU_PDL_ENTER();
    __shared__ float sm[32];
    int o = blockIdx.x;
    int64_t kp = dcu_pad16(K);
    uint16_t *h = (needs & DCU_NEED_H) ? a.h + (size_t)o * kp : NULL;
    if (o >= n_out) {
        if (h) zero_h_row(h, kp);
        return;
    }
    const float *src = in + (size_t)(idx ? idx[o] : o) * ldin;
    float v[PER];
#pragma unroll
    for (int k = 0; k < PER; k++) {
        int i = (int)threadIdx.x + k * DCU_ROWT;
        v[k] = i < K ? src[i] : 0.0f;
    }
    float am = 0.0f;
#pragma unroll
    for (int k = 0; k < PER; k++) {
        int i = (int)threadIdx.x + k * DCU_ROWT;
        if (i < K) am = fmaxf(am, fabsf(v[k]));
    }
    if (is_fp8(acts)) am = dcu_block_max(am, sm, 0.0f);
    prep_row_r<PER>(acts, v, a.f + (size_t)o * K, h, kp, (needs & DCU_NEED_Q) ? a.q + (size_t)o * K : NULL,
                    a.qs ? a.qs + o : NULL, K, am);
}

drift_status dcu_launch_prep(dcu_ctx *c, int acts, const float *in, int64_t ldin, const int *idx, int n_out, int K,
                             const dact *a, unsigned needs, drift_error *err) {
    if (n_out <= 0) return DRIFT_OK;
    int rows = (needs & DCU_NEED_H) ? (int)dcu_pad16(n_out) : n_out;
    if (!is_fp8_host(acts) && !(needs & DCU_NEED_Q) && rows <= 65535) {
        dim3 g((unsigned)((dcu_pad16(K) + DCU_ROWT - 1) / DCU_ROWT), (unsigned)rows);
        dcu_launch(k_prep_e, g, DCU_ROWT, 0, c->st, acts, in, ldin, idx, n_out, K, *a, needs);
    } else if (K <= 8 * DCU_ROWT)
        dcu_launch(k_prep_r<8>, rows, DCU_ROWT, 0, c->st, acts, in, ldin, idx, n_out, K, *a, needs);
    else if (K <= 16 * DCU_ROWT)
        dcu_launch(k_prep_r<16>, rows, DCU_ROWT, 0, c->st, acts, in, ldin, idx, n_out, K, *a, needs);
    else if (K <= 24 * DCU_ROWT)
        dcu_launch(k_prep_r<24>, rows, DCU_ROWT, 0, c->st, acts, in, ldin, idx, n_out, K, *a, needs);
    else if (K <= 32 * DCU_ROWT)
        dcu_launch(k_prep_r<32>, rows, DCU_ROWT, 0, c->st, acts, in, ldin, idx, n_out, K, *a, needs);
    else
        dcu_launch(k_prep, rows, DCU_ROWT, 0, c->st, acts, in, ldin, idx, n_out, K, *a, needs);
    DCU_LAUNCHED("act rounding kernel");
    return DRIFT_OK;
}

/* ---------------------------------------------------------------- gather */
__global__ void __launch_bounds__(DCU_ROWT) k_gather(dact s, dact d, const int *idx, int n_out, int64_t K,
                                                     unsigned needs) {
    DCU_PDL_ENTER();
    int o = blockIdx.x;
    int64_t kp = dcu_pad16(K);
    if (o >= n_out) {
        if (needs & DCU_NEED_H) zero_h_row(d.h + (size_t)o * kp, kp);
        return;
    }
    int64_t src = idx[o];
    for (int64_t i = threadIdx.x; i < K; i += blockDim.x) d.f[o * K + i] = s.f[src * K + i];
    if (needs & DCU_NEED_H)
        for (int64_t i = threadIdx.x; i < kp; i += blockDim.x) d.h[o * kp + i] = s.h[src * kp + i];
    if (needs & DCU_NEED_Q) {
        for (int64_t i = threadIdx.x; i < K; i += blockDim.x) d.q[o * K + i] = s.q[src * K + i];
        if (threadIdx.x == 0) d.qs[o] = s.qs[src];
    }
}

drift_status dcu_launch_gather(dcu_ctx *c, const dact *src, const dact *dst, const int *idx, int n_out, int K,
                               unsigned needs, drift_error *err) {
    if (n_out <= 0) return DRIFT_OK;
    int rows = (needs & DCU_NEED_H) ? (int)dcu_pad16(n_out) : n_out;
    dcu_launch(k_gather, rows, DCU_ROWT, 0, c->st, *src, *dst, idx, n_out, K, needs);
    DCU_LAUNCHED("gather kernel");
    return DRIFT_OK;
}

/* ---------------------------------------------------------------- swiglu */
__global__ void __launch_bounds__(DCU_ROWT) k_swiglu(int acts, int fast, const float *gate, const float *up, int64_t ld,
                                                     int B, int64_t n, dact a, unsigned needs) {
    DCU_PDL_ENTER();
    __shared__ float sm[32];
    int b = blockIdx.x;
    int64_t kp = dcu_pad16(n);
    uint16_t *h = (needs & DCU_NEED_H) ? a.h + (size_t)b * kp : NULL;
    if (b >= B) {
        if (h) zero_h_row(h, kp);
        return;
    }
    const float *g = gate + (size_t)b * ld, *u = up + (size_t)b * ld;
    float *f = a.f + (size_t)b * n;
    float am = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        float gv = g[i];
        float v = __fmul_rn(__fdiv_rn(gv, __fadd_rn(1.0f, dev_exp(fast, -gv))), u[i]);
        f[i] = v;
        am = fmaxf(am, fabsf(v));
    }
    if (is_fp8(acts)) am = dcu_block_max(am, sm, 0.0f);
    prep_row(acts, f, h, kp, (needs & DCU_NEED_Q) ? a.q + (size_t)b * n : NULL, a.qs ? a.qs + b : NULL, n, am);
}

/* k_swiglu where act() needs no row-wide value (acts not fp8, no fp8 copy):
 * purely elementwise, so a row is spread over blocks of DCU_ROWT columns;
 * grid (ceil(kp / DCU_ROWT), rows). The same per-element operations as
 * k_swiglu and prep_row: the same results bit for bit. */
__global__ void __launch_bounds__(DCU_ROWT) k_swiglu_e(int acts, int fast, const float *gate, const float *up,
                                                       int64_t ld, int B, int n, dact a, unsigned needs) {
    DCU_PDL_ENTER();
    int b = blockIdx.y;
    int64_t kp = dcu_pad16(n);
    int64_t i = (int64_t)blockIdx.x * DCU_ROWT + threadIdx.x;
    uint16_t *h = (needs & DCU_NEED_H) ? a.h + (size_t)b * kp : NULL;
    if (b >= B || i >= n) { /* batch padding, column padding of h */
        if (h && i < kp) h[i] = 0;
        return;
    }
    float gv = gate[(size_t)b * ld + i], uv = up[(size_t)b * ld + i];
    float v = __fmul_rn(__fdiv_rn(gv, __fadd_rn(1.0f, dev_exp(fast, -gv))), uv);
    a.f[(size_t)b * n + i] = prep_elem(acts, v, 0.0f, false, h ? h + i : NULL, NULL);
}

/* k_swiglu with the row in registers (thread t: elements t + k * DCU_ROWT,
 * k < PER, as k_swiglu's loop): all loads in flight together, the same
 * per-element operations, so the same results bit for bit. Launched with
 * DCU_ROWT threads for n <= PER * DCU_ROWT. */
template <int PER>
__global__ void __launch_bounds__(DCU_ROWT) k_swiglu_r(int acts, int fast, const float *gate, const float *up,
                                                       int64_t ld, int B, int n, dact a, unsigned needs) {
    DCU_PDL_ENTER();
    __shared__ float sm[32];
    int b = blockIdx.x;
    int64_t kp = dcu_pad16(n);
    uint16_t *h = (needs & DCU_NEED_H) ? a.h + (size_t)b * kp : NULL;
    if (b >= B) {
        if (h) zero_h_row(h, kp);
        return;
    }
    const float *g = gate + (size_t)b * ld, *u = up + (size_t)b * ld;
    float *f = a.f + (size_t)b * n;
    float gv[PER], uv[PER];
#pragma unroll
    for (int k = 0; k < PER; k++) {
        int i = (int)threadIdx.x + k * DCU_ROWT;
        gv[k] = i < n ? g[i] : 0.0f;
        uv[k] = i < n ? u[i] : 0.0f;
    }
    float am = 0.0f;
#pragma unroll
    for (int k = 0; k < PER; k++) {
        int i = (int)threadIdx.x + k * DCU_ROWT;
        if (i < n) {
            float v = __fmul_rn(__fdiv_rn(gv[k], __fadd_rn(1.0f, dev_exp(fast, -gv[k]))), uv[k]);
            gv[k] = v;
            am = fmaxf(am, fabsf(v));
        }
    }
    if (is_fp8(acts)) am = dcu_block_max(am, sm, 0.0f);
    prep_row_r<PER>(acts, gv, f, h, kp, (needs & DCU_NEED_Q) ? a.q + (size_t)b * n : NULL, a.qs ? a.qs + b : NULL,
                    n, am);
}

drift_status dcu_launch_swiglu(dcu_ctx *c, int acts, int fast_exp, const float *gate, const float *up, int64_t ld,
                               int B, int n, const dact *a, unsigned needs, drift_error *err) {
    if (B <= 0) return DRIFT_OK;
    int rows = (needs & DCU_NEED_H) ? (int)dcu_pad16(B) : B;
    if (!is_fp8_host(acts) && !(needs & DCU_NEED_Q) && rows <= 65535) {
        dim3 g((unsigned)((dcu_pad16(n) + DCU_ROWT - 1) / DCU_ROWT), (unsigned)rows);
        dcu_launch(k_swiglu_e, g, DCU_ROWT, 0, c->st, acts, fast_exp, gate, up, ld, B, n, *a, needs);
    } else if (n <= 8 * DCU_ROWT)
        dcu_launch(k_swiglu_r<8>, rows, DCU_ROWT, 0, c->st, acts, fast_exp, gate, up, ld, B, n, *a, needs);
    else if (n <= 16 * DCU_ROWT)
        dcu_launch(k_swiglu_r<16>, rows, DCU_ROWT, 0, c->st, acts, fast_exp, gate, up, ld, B, n, *a, needs);
    else if (n <= 24 * DCU_ROWT)
        dcu_launch(k_swiglu_r<24>, rows, DCU_ROWT, 0, c->st, acts, fast_exp, gate, up, ld, B, n, *a, needs);
    else if (n <= 32 * DCU_ROWT)
        dcu_launch(k_swiglu_r<32>, rows, DCU_ROWT, 0, c->st, acts, fast_exp, gate, up, ld, B, n, *a, needs);
    else
        dcu_launch(k_swiglu, rows, DCU_ROWT, 0, c->st, acts, fast_exp, gate, up, ld, B, n, *a, needs);
    DCU_LAUNCHED("swiglu kernel");
    return DRIFT_OK;
}

/* ------------------------------------------------------------ KV vectors */
/* Stores v (n floats, shared or global) as one KV vector (num_kv_store).
 * Block-cooperative; fmt is block-uniform. */
static __device__ void kv_store_vec(int fmt, uint8_t *dst, const float *v, int n, float *sm) {
    switch (fmt) {
    case DRIFT_DTYPE_F16:
        for (int i = threadIdx.x; i < n; i += blockDim.x) ((uint16_t *)dst)[i] = dcu_f32_f16(v[i]);
        break;
    case DRIFT_DTYPE_BF16:
        for (int i = threadIdx.x; i < n; i += blockDim.x) ((uint16_t *)dst)[i] = dcu_f32_bf16(v[i]);
        break;
    case DRIFT_DTYPE_FP8_E4M3:
    case DRIFT_DTYPE_FP8_E5M2: {
        float am = 0.0f;
        for (int i = threadIdx.x; i < n; i += blockDim.x) am = fmaxf(am, fabsf(v[i]));
        am = dcu_block_max(am, sm, 0.0f);
        float s = __fdiv_rn(am, dcu_fp8_max(fmt));
        if (!(s > 0.0f) || s == __uint_as_float(0x7f800000u)) s = 1.0f;
        if (threadIdx.x == 0) { /* the scale may be unaligned: bytes */
            uint32_t u = __float_as_uint(s);
            dst[0] = (uint8_t)u;
            dst[1] = (uint8_t)(u >> 8);
            dst[2] = (uint8_t)(u >> 16);
            dst[3] = (uint8_t)(u >> 24);
        }
        for (int i = threadIdx.x; i < n; i += blockDim.x) {
            float y = __fdiv_rn(v[i], s);
            dst[4 + i] = fmt == DRIFT_DTYPE_FP8_E4M3 ? dcu_f32_e4m3(y) : dcu_f32_e5m2(y);
        }
        break;
    }
    default:
        for (int i = threadIdx.x; i < n; i += blockDim.x) ((float *)dst)[i] = v[i];
        break;
    }
}

static __device__ __forceinline__ float kv_scale(int fmt, const uint8_t *vec) {
    if (!is_fp8(fmt)) return 1.0f;
    uint32_t u = (uint32_t)vec[0] | ((uint32_t)vec[1] << 8) | ((uint32_t)vec[2] << 16) | ((uint32_t)vec[3] << 24);
    return __uint_as_float(u);
}

/* element d of a KV vector (num_kv_load); s = kv_scale(vec) */
static __device__ __forceinline__ float kv_elem(int fmt, const uint8_t *vec, int d, float s) {
    switch (fmt) {
    case DRIFT_DTYPE_F16: return dcu_f16_f32(((const uint16_t *)vec)[d]);
    case DRIFT_DTYPE_BF16: return dcu_bf16_f32(((const uint16_t *)vec)[d]);
    case DRIFT_DTYPE_FP8_E4M3: return __fmul_rn(dcu_e4m3_f32(vec[4 + d]), s);
    case DRIFT_DTYPE_FP8_E5M2: return __fmul_rn(dcu_e5m2_f32(vec[4 + d]), s);
    default: return ((const float *)vec)[d];
    }
}

__global__ void __launch_bounds__(DCU_ROWT) k_kv_store(int fmt, uint8_t *dst, size_t vb, const float *src, int n) {
    DCU_PDL_ENTER();
    __shared__ float sm[32];
    int r = blockIdx.x;
    kv_store_vec(fmt, dst + (size_t)r * vb, src + (size_t)r * n, n, sm);
}

__global__ void __launch_bounds__(DCU_ROWT) k_kv_load(int fmt, float *dst, const uint8_t *src, size_t vb, int n) {
    DCU_PDL_ENTER();
    int r = blockIdx.x;
    const uint8_t *vec = src + (size_t)r * vb;
    float s = kv_scale(fmt, vec);
    for (int i = threadIdx.x; i < n; i += blockDim.x) dst[(size_t)r * n + i] = kv_elem(fmt, vec, i, s);
}

drift_status dcu_launch_kv_store(dcu_ctx *c, int fmt, uint8_t *dst, const float *src, int n_vec, int n,
                                 drift_error *err) {
    size_t vb = num_kv_bytes((drift_dtype)fmt, n);
    for (int r0 = 0; r0 < n_vec; r0 += 65535) {
        int nr = n_vec - r0 < 65535 ? n_vec - r0 : 65535;
        dcu_launch(k_kv_store, nr, DCU_ROWT, 0, c->st, fmt, dst + (size_t)r0 * vb, vb, src + (size_t)r0 * n, n);
        DCU_LAUNCHED("KV store kernel");
    }
    return DRIFT_OK;
}

drift_status dcu_launch_kv_load(dcu_ctx *c, int fmt, float *dst, const uint8_t *src, int n_vec, int n,
                                drift_error *err) {
    size_t vb = num_kv_bytes((drift_dtype)fmt, n);
    for (int r0 = 0; r0 < n_vec; r0 += 65535) {
        int nr = n_vec - r0 < 65535 ? n_vec - r0 : 65535;
        dcu_launch(k_kv_load, nr, DCU_ROWT, 0, c->st, fmt, dst + (size_t)r0 * n, src + (size_t)r0 * vb, vb, n);
        DCU_LAUNCHED("KV load kernel");
    }
    return DRIFT_OK;
}

/* ------------------------------------------------- bias, RoPE, KV store */
/* RoPE of pair i of v (npair = n_rot / 2 pairs: neox, elements i and
 * i + npair, else 2i and 2i + 1) by the angle whose sine and cosine are sn
 * and cs, in double, as num_ref_rope: (float)(x0 c - x1 s), (float)(x0 s + x1 c) */
static __device__ __forceinline__ void rope_pair(float *v, int i, int npair, int neox, double sn, double cs) {
    const int i0 = neox ? i : 2 * i, i1 = neox ? i + npair : 2 * i + 1;
    const double x0 = v[i0], x1 = v[i1];
    v[i0] = (float)__dsub_rn(__dmul_rn(x0, cs), __dmul_rn(x1, sn));
    v[i1] = (float)__dadd_rn(__dmul_rn(x0, sn), __dmul_rn(x1, cs));
}

/* grid (n_heads + n_kvh, B): blocks < n_heads rotate a q head in place;
 * the others rotate a k head and store it and the matching v head. */
__global__ void __launch_bounds__(ATT_THREADS) k_qkv(dcu_qkv_args A) {
    dcu_pdl_trigger();
    extern __shared__ float buf[]; /* (head_dim) */
    __shared__ float sm[32];
    int hidx = blockIdx.x, b = blockIdx.y, hd = A.head_dim;
    const drow R = A.rows[b]; /* uploaded before the pass: read before the wait */
    /* the rotation of this thread's first pair needs only the position: its
     * sine and cosine are computed while the previous kernel runs */
    const int npair = A.n_rot / 2;
    double sn0 = 0.0, cs0 = 1.0;
    if ((int)threadIdx.x < npair) sincos(__dmul_rn((double)R.pos, A.freq[threadIdx.x]), &sn0, &cs0);
    dcu_pdl_wait();
    bool isq = hidx < A.n_heads;
    int j = isq ? hidx : hidx - A.n_heads;
    float *vec = isq ? A.q + (size_t)b * A.ldq + (size_t)j * hd : A.k + (size_t)b * A.ldk + (size_t)j * hd;
    const float *bias = isq ? (A.bq ? A.bq + (size_t)j * hd : NULL) : (A.bk ? A.bk + (size_t)j * hd : NULL);
    for (int d = threadIdx.x; d < hd; d += blockDim.x) buf[d] = bias ? __fadd_rn(vec[d], bias[d]) : vec[d];
    __syncthreads();
    for (int i = threadIdx.x; i < npair; i += blockDim.x) {
        double sn = sn0, cs = cs0;
        if (i != (int)threadIdx.x) sincos(__dmul_rn((double)R.pos, A.freq[i]), &sn, &cs);
        rope_pair(buf, i, npair, A.neox, sn, cs);
    }
    __syncthreads();
    if (isq) {
        for (int d = threadIdx.x; d < hd; d += blockDim.x) vec[d] = buf[d];
        return;
    }
    size_t off = (((size_t)A.layer * (size_t)R.n_ctx + (size_t)R.pos) * (size_t)A.n_kvh + (size_t)j) * A.vb;
    kv_store_vec(A.kvfmt, R.kc + off, buf, hd, sm);
    __syncthreads();
    const float *vv = A.v + (size_t)b * A.ldv + (size_t)j * hd;
    const float *bv = A.bv ? A.bv + (size_t)j * hd : NULL;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) buf[d] = bv ? __fadd_rn(vv[d], bv[d]) : vv[d];
    __syncthreads();
    kv_store_vec(A.kvfmt, R.vc + off, buf, hd, sm);
}

drift_status dcu_launch_qkv(dcu_ctx *c, const dcu_qkv_args *a, int B, drift_error *err) {
    if (B <= 0) return DRIFT_OK;
    if (a->n_heads + a->n_kvh > 65535 || a->head_dim > 1024)
        return drift_error_set(err, DRIFT_ERR_UNSUPPORTED, "cuda: %d heads of dimension %d (max 65535, 1024)",
                               a->n_heads + a->n_kvh, a->head_dim);
    size_t smem = (size_t)a->head_dim * sizeof(float);
    for (int b0 = 0; b0 < B; b0 += 65535) {
        int nb = B - b0 < 65535 ? B - b0 : 65535;
        dcu_qkv_args s = *a;
        s.q += (size_t)b0 * s.ldq;
        if (s.k) s.k += (size_t)b0 * s.ldk;
        if (s.v) s.v += (size_t)b0 * s.ldv;
        s.rows += b0;
        dim3 grid((unsigned)(a->n_heads + a->n_kvh), (unsigned)nb);
        dcu_launch(k_qkv, grid, ATT_THREADS, smem, c->st, s);
        DCU_LAUNCHED("bias/RoPE/KV-store kernel");
    }
    return DRIFT_OK;
}

/* ------------------------------------------------------------- attention */
struct att_k {
    const float *q;
    int64_t ldq;
    float *out;
    int64_t ldo;
    const drow *rows;
    float *part;
    unsigned *cnt;
    int layer, n_heads, n_kvh, hd, window, kvfmt, fast, chunk, max_splits;
    size_t vb;
    float scale;
    /* the output as a prepared matmul input (dcu_attn_args.oa): out holds
     * act(o) (acts; F32 leaves o as is), oh (NULL: none) its bf16/f16 bits,
     * rows of okp; rows [B, pad16(B)) of oh and columns [n_heads hd, okp)
     * are zeroed (B: rows of the whole launch, b0: this slice's first) */
    int acts, B, b0;
    uint16_t *oh;
    int64_t okp;
    /* qk = 1 (k_attn_row, one row): k_qkv's work for this block's heads is
     * done here (qa: its arguments; q, k, v unrotated) */
    int qk;
    dcu_qkv_args qa;
};

/* output element (row b of the slice, column col) */
static __device__ __forceinline__ void att_put(const att_k &P, int b, int col, float v) {
    P.out[(size_t)b * P.ldo + col] =
        prep_elem(P.acts, v, 0.0f, false, P.oh ? P.oh + (size_t)b * P.okp + col : NULL, NULL);
}

/* the zero padding of oh that belongs to row b of the slice, shared by the
 * row's nblk blocks (this one is blk): columns [K, okp) of the row, and
 * after the launch's last row the rows up to pad16(B), in 16-byte stores
 * where aligned. (At batch 1 that is 15 rows of okp zeros: one block storing
 * them two bytes at a time finished microseconds after the others.) */
static __device__ void att_pad(const att_k &P, int b, int blk, int nblk) {
    if (!P.oh) return;
    const int K = P.n_heads * P.hd, gb = P.b0 + b;
    const int64_t t = (int64_t)blk * blockDim.x + threadIdx.x, stride = (int64_t)nblk * blockDim.x;
    for (int64_t i = K + t; i < P.okp; i += stride) P.oh[(size_t)b * P.okp + i] = 0;
    if (gb != P.B - 1) return;
    uint16_t *z = P.oh + (size_t)(b + 1) * P.okp;
    const int64_t n = (dcu_pad16(P.B) - P.B) * P.okp; /* a multiple of 16 */
    if (((uintptr_t)z & 15u) == 0) {
        for (int64_t i = t; i < n / 8; i += stride) ((uint4 *)z)[i] = make_uint4(0u, 0u, 0u, 0u);
    } else {
        for (int64_t i = t; i < n; i += stride) z[i] = 0;
    }
}

static __device__ __forceinline__ void row_window(const drow &R, int window, int *start, int *npos) {
    int s = window > 0 && R.pos + 1 > window ? R.pos + 1 - window : 0;
    *start = s;
    *npos = R.pos - s + 1;
}

/* element d of a KV vector in a format fixed at compile time (= kv_elem) */
template <int FMT>
static __device__ __forceinline__ float kv_elem_t(const uint8_t *vec, int d) {
    switch (FMT) {
    case DRIFT_DTYPE_F16: return dcu_f16_f32(((const uint16_t *)vec)[d]);
    case DRIFT_DTYPE_BF16: return dcu_bf16_f32(((const uint16_t *)vec)[d]);
    case DRIFT_DTYPE_FP8_E4M3: return __fmul_rn(dcu_e4m3_f32(vec[4 + d]), kv_scale(FMT, vec));
    case DRIFT_DTYPE_FP8_E5M2: return __fmul_rn(dcu_e5m2_f32(vec[4 + d]), kv_scale(FMT, vec));
    default: return ((const float *)vec)[d];
    }
}

/* one 16-bit KV element (f16 / bf16 bits) */
template <int FMT>
static __device__ __forceinline__ float kv_h(uint32_t h) {
    return FMT == DRIFT_DTYPE_F16 ? dcu_f16_f32(h & 0xffffu) : dcu_bf16_f32(h & 0xffffu);
}

/* one fp8 code with its vector's scale s (= kv_elem) */
template <int FMT>
static __device__ __forceinline__ float kv_q(uint32_t c, float s) {
    return __fmul_rn(FMT == DRIFT_DTYPE_FP8_E4M3 ? dcu_e4m3_f32(c & 0xffu) : dcu_e5m2_f32(c & 0xffu), s);
}

/* o[i] = element d0 + i (i < N, all < head_dim) of a KV vector, the very
 * values kv_elem gives, with the widest loads the address allows (vectors
 * need not be aligned: a KV vector of fp8 starts with its 4-byte scale s,
 * which the caller passes) */
template <int FMT, int N>
static __device__ __forceinline__ void kv_ld(const uint8_t *vec, int d0, float s, float *o) {
    if (FMT == DRIFT_DTYPE_F16 || FMT == DRIFT_DTYPE_BF16) {
        const uint16_t *p = (const uint16_t *)vec + d0;
        uintptr_t a = (uintptr_t)p;
        if (N % 8 == 0 && (a & 15u) == 0) {
#pragma unroll
            for (int i = 0; i < N; i += 8) {
                uint4 w = *(const uint4 *)(p + i);
                o[i + 0] = kv_h<FMT>(w.x), o[i + 1] = kv_h<FMT>(w.x >> 16);
                o[i + 2] = kv_h<FMT>(w.y), o[i + 3] = kv_h<FMT>(w.y >> 16);
                o[i + 4] = kv_h<FMT>(w.z), o[i + 5] = kv_h<FMT>(w.z >> 16);
                o[i + 6] = kv_h<FMT>(w.w), o[i + 7] = kv_h<FMT>(w.w >> 16);
            }
        } else if (N % 2 == 0 && (a & 3u) == 0) {
#pragma unroll
            for (int i = 0; i < N; i += 2) {
                uint32_t w = *(const uint32_t *)(p + i);
                o[i] = kv_h<FMT>(w), o[i + 1] = kv_h<FMT>(w >> 16);
            }
        } else {
#pragma unroll
            for (int i = 0; i < N; i++) o[i] = kv_h<FMT>(p[i]);
        }
    } else if (FMT == DRIFT_DTYPE_FP8_E4M3 || FMT == DRIFT_DTYPE_FP8_E5M2) {
        const uint8_t *p = vec + 4 + d0;
        uintptr_t a = (uintptr_t)p;
        if (N % 4 == 0 && (a & 3u) == 0) {
#pragma unroll
            for (int i = 0; i < N; i += 4) {
                uint32_t w = *(const uint32_t *)(p + i);
                o[i] = kv_q<FMT>(w, s), o[i + 1] = kv_q<FMT>(w >> 8, s);
                o[i + 2] = kv_q<FMT>(w >> 16, s), o[i + 3] = kv_q<FMT>(w >> 24, s);
            }
        } else {
#pragma unroll
            for (int i = 0; i < N; i++) o[i] = kv_q<FMT>(p[i], s);
        }
    } else {
        const float *p = (const float *)vec + d0;
        uintptr_t a = (uintptr_t)p;
        if (N % 4 == 0 && (a & 15u) == 0) {
#pragma unroll
            for (int i = 0; i < N; i += 4) {
                float4 w = *(const float4 *)(p + i);
                o[i] = w.x, o[i + 1] = w.y, o[i + 2] = w.z, o[i + 3] = w.w;
            }
        } else if (N % 2 == 0 && (a & 7u) == 0) {
#pragma unroll
            for (int i = 0; i < N; i += 2) {
                float2 w = *(const float2 *)(p + i);
                o[i] = w.x, o[i + 1] = w.y;
            }
        } else {
#pragma unroll
            for (int i = 0; i < N; i++) o[i] = p[i];
        }
    }
}

/* q . k of one position (q in shared memory, k a KV vector of hd
 * elements): four partial sums (element d into sum d mod 4, each in element
 * order), then (s0 + s1) + (s2 + s3). The order depends on hd only. */
template <int FMT>
static __device__ __forceinline__ float att_dot(const float *qs, const uint8_t *kv, int hd) {
    float s = kv_scale(FMT, kv);
    float p0 = 0.0f, p1 = 0.0f, p2 = 0.0f, p3 = 0.0f;
    int d = 0;
#pragma unroll 4
    for (; d + 8 <= hd; d += 8) {
        float k[8];
        kv_ld<FMT, 8>(kv, d, s, k);
        float4 qa = *(const float4 *)(qs + d), qb = *(const float4 *)(qs + d + 4);
        p0 = fmaf(qa.x, k[0], p0), p1 = fmaf(qa.y, k[1], p1), p2 = fmaf(qa.z, k[2], p2), p3 = fmaf(qa.w, k[3], p3);
        p0 = fmaf(qb.x, k[4], p0), p1 = fmaf(qb.y, k[5], p1), p2 = fmaf(qb.z, k[6], p2), p3 = fmaf(qb.w, k[7], p3);
    }
    for (; d < hd; d++) {
        float k;
        kv_ld<FMT, 1>(kv, d, s, &k);
        switch (d & 3) {
        case 0: p0 = fmaf(qs[d], k, p0); break;
        case 1: p1 = fmaf(qs[d], k, p1); break;
        case 2: p2 = fmaf(qs[d], k, p2); break;
        default: p3 = fmaf(qs[d], k, p3); break;
        }
    }
    return __fadd_rn(__fadd_rn(p0, p1), __fadd_rn(p2, p3));
}

#define ATT_MAX_WARPS 8 /* warps of a partial-attention block (fewer for short chunks) */
#define ATT_KCH 8       /* 8-element pieces of a K vector loaded together (64 elements) */

/* 8 K elements [d, d + 8) of an aligned KV vector (att_kal): one 16-byte
 * load (f16 / bf16), two (f32) or two 4-byte loads (fp8), decoded to the
 * values kv_elem gives */
template <int FMT> struct att_kraw { uint4 a, b; };
template <int FMT>
static __device__ __forceinline__ void att_kload(const uint8_t *kv, int d, att_kraw<FMT> &r) {
    if (FMT == DRIFT_DTYPE_F16 || FMT == DRIFT_DTYPE_BF16) {
        r.a = *(const uint4 *)(kv + (size_t)d * 2);
    } else if (FMT == DRIFT_DTYPE_FP8_E4M3 || FMT == DRIFT_DTYPE_FP8_E5M2) {
        const uint32_t *p = (const uint32_t *)(kv + 4 + d);
        r.a.x = p[0], r.a.y = p[1];
    } else {
        r.a = *(const uint4 *)(kv + (size_t)d * 4);
        r.b = *(const uint4 *)(kv + (size_t)d * 4 + 16);
    }
}
template <int FMT>
static __device__ __forceinline__ void att_kdec(const att_kraw<FMT> &r, float s, float *k) {
    if (FMT == DRIFT_DTYPE_F16 || FMT == DRIFT_DTYPE_BF16) {
        k[0] = kv_h<FMT>(r.a.x), k[1] = kv_h<FMT>(r.a.x >> 16), k[2] = kv_h<FMT>(r.a.y), k[3] = kv_h<FMT>(r.a.y >> 16);
        k[4] = kv_h<FMT>(r.a.z), k[5] = kv_h<FMT>(r.a.z >> 16), k[6] = kv_h<FMT>(r.a.w), k[7] = kv_h<FMT>(r.a.w >> 16);
    } else if (FMT == DRIFT_DTYPE_FP8_E4M3 || FMT == DRIFT_DTYPE_FP8_E5M2) {
        k[0] = kv_q<FMT>(r.a.x, s), k[1] = kv_q<FMT>(r.a.x >> 8, s);
        k[2] = kv_q<FMT>(r.a.x >> 16, s), k[3] = kv_q<FMT>(r.a.x >> 24, s);
        k[4] = kv_q<FMT>(r.a.y, s), k[5] = kv_q<FMT>(r.a.y >> 8, s);
        k[6] = kv_q<FMT>(r.a.y >> 16, s), k[7] = kv_q<FMT>(r.a.y >> 24, s);
    } else {
        k[0] = __uint_as_float(r.a.x), k[1] = __uint_as_float(r.a.y), k[2] = __uint_as_float(r.a.z);
        k[3] = __uint_as_float(r.a.w), k[4] = __uint_as_float(r.b.x), k[5] = __uint_as_float(r.b.y);
        k[6] = __uint_as_float(r.b.z), k[7] = __uint_as_float(r.b.w);
    }
}

/* Whether every K and V vector of a (row, kv head) can take att_kload and
 * att_vload: hd a multiple of 8 and the vectors 16-byte (fp8: 4-byte)
 * aligned. Uniform over the block. */
template <int FMT>
static __device__ __forceinline__ bool att_kal(const uint8_t *kb, const uint8_t *vb, size_t pstride, int hd) {
    uintptr_t m = (FMT == DRIFT_DTYPE_FP8_E4M3 || FMT == DRIFT_DTYPE_FP8_E5M2) ? 3u : 15u;
    return hd % 8 == 0 && ((uintptr_t)kb & m) == 0 && ((uintptr_t)vb & m) == 0 && (pstride & m) == 0;
}

/* o[i] = element d0 + i (i < N) of an aligned V vector (att_kal holds, d0 =
 * lane * N, d0 + N <= hd): the values kv_elem gives, one load of N elements
 * (two or more 4-byte loads for fp8 N >= 8, 16-byte ones for N = 32) */
template <int FMT, int N>
static __device__ __forceinline__ void att_vload(const uint8_t *vec, int d0, float *o) {
    if (FMT == DRIFT_DTYPE_F16 || FMT == DRIFT_DTYPE_BF16) {
        const uint16_t *p = (const uint16_t *)vec + d0;
        if (N == 1) {
            o[0] = kv_h<FMT>(p[0]);
        } else if (N == 2) {
            uint32_t w = *(const uint32_t *)p;
            o[0] = kv_h<FMT>(w), o[1] = kv_h<FMT>(w >> 16);
        } else if (N == 4) {
            uint2 w = *(const uint2 *)p;
            o[0] = kv_h<FMT>(w.x), o[1] = kv_h<FMT>(w.x >> 16), o[2] = kv_h<FMT>(w.y), o[3] = kv_h<FMT>(w.y >> 16);
        } else {
#pragma unroll
            for (int i = 0; i < N; i += 8) {
                uint4 w = *(const uint4 *)(p + i);
                o[i + 0] = kv_h<FMT>(w.x), o[i + 1] = kv_h<FMT>(w.x >> 16);
                o[i + 2] = kv_h<FMT>(w.y), o[i + 3] = kv_h<FMT>(w.y >> 16);
                o[i + 4] = kv_h<FMT>(w.z), o[i + 5] = kv_h<FMT>(w.z >> 16);
                o[i + 6] = kv_h<FMT>(w.w), o[i + 7] = kv_h<FMT>(w.w >> 16);
            }
        }
    } else if (FMT == DRIFT_DTYPE_FP8_E4M3 || FMT == DRIFT_DTYPE_FP8_E5M2) {
        float s = __uint_as_float(*(const uint32_t *)vec);
        const uint8_t *p = vec + 4 + d0;
        if (N == 1) {
            o[0] = kv_q<FMT>(p[0], s);
        } else if (N == 2) {
            uint32_t w = *(const uint16_t *)p;
            o[0] = kv_q<FMT>(w, s), o[1] = kv_q<FMT>(w >> 8, s);
        } else {
#pragma unroll
            for (int i = 0; i < N; i += 4) {
                uint32_t w = *(const uint32_t *)(p + i);
                o[i] = kv_q<FMT>(w, s), o[i + 1] = kv_q<FMT>(w >> 8, s);
                o[i + 2] = kv_q<FMT>(w >> 16, s), o[i + 3] = kv_q<FMT>(w >> 24, s);
            }
        }
    } else {
        const float *p = (const float *)vec + d0;
        if (N == 1) {
            o[0] = p[0];
        } else if (N == 2) {
            float2 w = *(const float2 *)p;
            o[0] = w.x, o[1] = w.y;
        } else {
#pragma unroll
            for (int i = 0; i < N; i += 4) {
                float4 w = *(const float4 *)(p + i);
                o[i] = w.x, o[i + 1] = w.y, o[i + 2] = w.z, o[i + 3] = w.w;
            }
        }
    }
}

/* q . k for GM query heads sharing one K vector (att_kal holds): the
 * vector's pieces are loaded ATT_KCH at a time, all in flight together, and
 * each head's sum is att_dot's exactly (element d into partial d mod 4, in
 * element order; then (s0 + s1) + (s2 + s3)). qs: head g at qs + g * hq. */
template <int FMT, int GM>
static __device__ __forceinline__ void att_dot_al(const float *qs, int hq, const uint8_t *kv, int hd, float *out) {
    float s = kv_scale(FMT, kv);
    float p[GM][4];
#pragma unroll
    for (int g = 0; g < GM; g++) p[g][0] = p[g][1] = p[g][2] = p[g][3] = 0.0f;
    for (int c0 = 0; c0 < hd; c0 += 8 * ATT_KCH) {
        att_kraw<FMT> r[ATT_KCH];
#pragma unroll
        for (int c = 0; c < ATT_KCH; c++)
            if (c0 + 8 * c < hd) att_kload<FMT>(kv, c0 + 8 * c, r[c]);
#pragma unroll
        for (int c = 0; c < ATT_KCH; c++) {
            int d = c0 + 8 * c;
            if (d < hd) {
                float k[8];
                att_kdec<FMT>(r[c], s, k);
#pragma unroll
                for (int g = 0; g < GM; g++) {
                    float4 qa = *(const float4 *)(qs + g * hq + d), qb = *(const float4 *)(qs + g * hq + d + 4);
                    p[g][0] = fmaf(qa.x, k[0], p[g][0]), p[g][1] = fmaf(qa.y, k[1], p[g][1]);
                    p[g][2] = fmaf(qa.z, k[2], p[g][2]), p[g][3] = fmaf(qa.w, k[3], p[g][3]);
                    p[g][0] = fmaf(qb.x, k[4], p[g][0]), p[g][1] = fmaf(qb.y, k[5], p[g][1]);
                    p[g][2] = fmaf(qb.z, k[6], p[g][2]), p[g][3] = fmaf(qb.w, k[7], p[g][3]);
                }
            }
        }
    }
#pragma unroll
    for (int g = 0; g < GM; g++) out[g] = __fadd_rn(__fadd_rn(p[g][0], p[g][1]), __fadd_rn(p[g][2], p[g][3]));
}

/* merges a split / warp partial (mi, li, ai) into (M, L, a): the combine
 * step, the same for the warps of a block and for the splits of a row */
static __device__ __forceinline__ void att_merge(int fast, float &M, float &L, float &a, float mi, float li,
                                                 float ai) {
    float mn = fmaxf(M, mi);
    float c1 = dev_exp(fast, M - mn), c2 = dev_exp(fast, mi - mn);
    L = __fadd_rn(__fmul_rn(L, c1), __fmul_rn(li, c2));
    a = __fadd_rn(__fmul_rn(a, c1), __fmul_rn(ai, c2));
    M = mn;
}

/* A warp's tiles of one split for GM query heads of one KV head (see
 * k_attn_part): per head the online softmax of the previous kernel, with
 * the K and V loads shared by the heads. AL: att_kal holds. */
template <int FMT, int NPL, int GM, bool AL>
static __device__ __forceinline__ void att_tiles(const att_k &P, const float *qs, int hq, const uint8_t *kb,
                                                 const uint8_t *vbp, size_t pstride, int t0, int t1, int hd,
                                                 float (&m)[GM], float (&l)[GM], float (&acc)[GM][NPL], int warp,
                                                 int nw) {
    const int lane = threadIdx.x & 31;
    const int ntiles = (t1 - t0 + ATT_TILE - 1) / ATT_TILE;
    const int d0 = lane * NPL;
    const bool full = d0 + NPL <= hd;
    bool first = true;
    for (int k = warp; k < ntiles; k += nw) {
        int tt = t0 + k * ATT_TILE, nt = min(ATT_TILE, t1 - tt);
        float s[GM];
        if (lane < nt) {
            const uint8_t *kv = kb + (size_t)(tt + lane) * pstride;
            if (AL) {
                att_dot_al<FMT, GM>(qs, hq, kv, hd, s);
            } else {
#pragma unroll
                for (int g = 0; g < GM; g++) s[g] = att_dot<FMT>(qs + g * hq, kv, hd);
            }
#pragma unroll
            for (int g = 0; g < GM; g++) s[g] = __fmul_rn(s[g], P.scale);
        } else {
#pragma unroll
            for (int g = 0; g < GM; g++) s[g] = -INFINITY;
        }
        float pw[GM];
#pragma unroll
        for (int g = 0; g < GM; g++) {
            float mt = dcu_warp_max(s[g]);
            float mn = first ? mt : fmaxf(m[g], mt);
            float corr = first ? 0.0f : dev_exp(P.fast, m[g] - mn);
            pw[g] = lane < nt ? dev_exp(P.fast, s[g] - mn) : 0.0f;
            float ls = dcu_warp_sum(pw[g]);
            l[g] = first ? ls : __fadd_rn(__fmul_rn(l[g], corr), ls);
#pragma unroll
            for (int i = 0; i < NPL; i++) acc[g][i] = first ? 0.0f : __fmul_rn(acc[g][i], corr);
            m[g] = mn;
        }
        const uint8_t *vt = vbp + (size_t)tt * pstride;
        /* weighted V, positions in order; U positions' loads issued together: on the aligned path one
         * straight run of loads without a branch per position (positions past the tile load the tile's
         * last vector, a valid address, and are not used), so no load waits for the one before it */
        constexpr int U = NPL <= 1 ? 32 : NPL <= 2 ? 16 : NPL <= 4 ? 8 : NPL <= 8 ? 4 : 1;
        for (int j0 = 0; j0 < nt; j0 += U) {
            float v[U][NPL];
            if (AL && full) {
#pragma unroll
                for (int u = 0; u < U; u++)
                    att_vload<FMT, NPL>(vt + (size_t)min(j0 + u, nt - 1) * pstride, d0, v[u]);
            } else
#pragma unroll
            for (int u = 0; u < U; u++) {
                int j = j0 + u;
                const uint8_t *vec = vt + (size_t)j * pstride;
                if (j < nt && full) {
                    kv_ld<FMT, NPL>(vec, d0, kv_scale(FMT, vec), v[u]);
                } else {
#pragma unroll
                    for (int i = 0; i < NPL; i++) v[u][i] = j < nt && d0 + i < hd ? kv_elem_t<FMT>(vec, d0 + i) : 0.0f;
                }
            }
#pragma unroll
            for (int u = 0; u < U; u++) {
                float pj[GM];
#pragma unroll
                for (int g = 0; g < GM; g++) pj[g] = __shfl_sync(0xffffffffu, pw[g], (j0 + u) & 31);
                if (j0 + u < nt)
#pragma unroll
                    for (int g = 0; g < GM; g++)
#pragma unroll
                        for (int i = 0; i < NPL; i++) acc[g][i] = fmaf(pj[g], v[u][i], acc[g][i]);
            }
        }
        first = false;
    }
}

/* Split-KV attention, grid (splits, heads / GM, rows), 32 * nw threads with
 * nw = min(ATT_MAX_WARPS, ceil(chunk / ATT_TILE)): a function of the chunk
 * only. A block serves GM query heads of one KV head (GM divides the group;
 * the launcher picks it from the grid size: it changes which block does a
 * head's work, never the operations). Tile k of the split (positions t0 +
 * 32k ...) belongs to warp k mod nw; in a tile lane j scores position j for
 * every head (att_dot / att_dot_al: the K vector loaded once for the GM
 * heads), each head's tile max and sum of exp are fixed xor trees over the
 * warp, and lane l accumulates the weighted V of its NPL dimensions l * NPL
 * ... over the tile's positions in order (online softmax across the warp's
 * tiles). The warps' partials are merged in warp order (att_merge). A row of
 * one split writes acc * (1 / l) directly; otherwise each split writes its
 * (m, l, acc) and the block that finishes last (a counter per row and head
 * group, reset by that block) merges the row's splits in split order and
 * writes the output with the same final operation. So the order of every
 * sum depends on (head_dim, chunk, the row's positions) only. */
template <int FMT, int NPL, int GM>
__global__ void __launch_bounds__(32 * ATT_MAX_WARPS) k_attn_part(att_k P) {
    DCU_PDL_ENTER();
    extern __shared__ __align__(16) float smf[];
    __shared__ unsigned s_last;
    const int sp = blockIdx.x, hg = blockIdx.y, b = blockIdx.z;
    const int hd = P.hd, hq = (hd + 3) & ~3, h0 = hg * GM;
    const drow R = P.rows[b]; /* loads in flight with q's */
    float *qs = smf;          /* GM x hq, then per warp and head (2 + hd): m, l, acc */
    const float *q = P.q + (size_t)b * P.ldq + (size_t)h0 * hd;
    for (int i = threadIdx.x; i < GM * hd; i += blockDim.x) qs[(i / hd) * hq + i % hd] = q[i];
    att_pad(P, b, hg * gridDim.x + sp, gridDim.x * gridDim.y);
    int start, npos;
    row_window(R, P.window, &start, &npos);
    const int t0 = sp * P.chunk;
    if (t0 >= npos) return;
    const int t1 = min(npos, t0 + P.chunk), ns = (npos + P.chunk - 1) / P.chunk;
    const int kvh = h0 / (P.n_heads / P.n_kvh);
    const size_t pstride = (size_t)P.n_kvh * P.vb;
    const size_t base = (((size_t)P.layer * (size_t)R.n_ctx + (size_t)start) * (size_t)P.n_kvh + (size_t)kvh) * P.vb;
    const uint8_t *kb = R.kc + base, *vbp = R.vc + base;
    __syncthreads();
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
    const int nused = min(nw, (t1 - t0 + ATT_TILE - 1) / ATT_TILE);
    float m[GM], l[GM], acc[GM][NPL];
#pragma unroll
    for (int g = 0; g < GM; g++) {
        m[g] = -INFINITY, l[g] = 0.0f;
#pragma unroll
        for (int i = 0; i < NPL; i++) acc[g][i] = 0.0f;
    }
    if (att_kal<FMT>(kb, vbp, pstride, hd))
        att_tiles<FMT, NPL, GM, true>(P, qs, hq, kb, vbp, pstride, t0, t1, hd, m, l, acc, warp, nw);
    else att_tiles<FMT, NPL, GM, false>(P, qs, hq, kb, vbp, pstride, t0, t1, hd, m, l, acc, warp, nw);
    float *wbase = smf + GM * hq;
    const int d0 = lane * NPL;
    if (warp < nused) {
#pragma unroll
        for (int g = 0; g < GM; g++) {
            float *wb = wbase + (size_t)(warp * GM + g) * (hd + 2);
            if (lane == 0) wb[0] = m[g], wb[1] = l[g];
#pragma unroll
            for (int i = 0; i < NPL; i++)
                if (d0 + i < hd) wb[2 + d0 + i] = acc[g][i];
        }
    }
    __syncthreads();
    for (int e = threadIdx.x; e < GM * hd; e += blockDim.x) {
        int g = e / hd, d = e % hd;
        const float *w0 = wbase + (size_t)g * (hd + 2);
        float M = w0[0], L = w0[1], a = w0[2 + d];
        for (int w = 1; w < nused; w++) {
            const float *wi = wbase + (size_t)(w * GM + g) * (hd + 2);
            att_merge(P.fast, M, L, a, wi[0], wi[1], wi[2 + d]);
        }
        if (ns == 1) {
            att_put(P, b, h0 * hd + e, __fmul_rn(a, __fdiv_rn(1.0f, L)));
        } else {
            float *pp = P.part + (((size_t)b * P.n_heads + h0 + g) * P.max_splits + sp) * (size_t)(hd + 2);
            if (d == 0) pp[0] = M, pp[1] = L;
            pp[2 + d] = a;
        }
    }
    if (ns == 1) return;
    /* the last split of (row, head group) to finish combines them */
    __threadfence();
    __syncthreads();
    unsigned *cnt = P.cnt + (size_t)b * P.n_heads + hg;
    if (threadIdx.x == 0) s_last = atomicAdd(cnt, 1u) == (unsigned)ns - 1;
    __syncthreads();
    if (!s_last) return;
    __threadfence();
    for (int e = threadIdx.x; e < GM * hd; e += blockDim.x) {
        int g = e / hd, d = e % hd;
        const float *p0 = P.part + (((size_t)b * P.n_heads + h0 + g) * P.max_splits) * (size_t)(hd + 2);
        float M = __ldcg(p0), L = __ldcg(p0 + 1), a = __ldcg(p0 + 2 + d);
        for (int s = 1; s < ns; s++) {
            const float *ps = p0 + (size_t)s * (hd + 2);
            att_merge(P.fast, M, L, a, __ldcg(ps), __ldcg(ps + 1), __ldcg(ps + 2 + d));
        }
        att_put(P, b, h0 * hd + e, __fmul_rn(a, __fdiv_rn(1.0f, L)));
    }
    if (threadIdx.x == 0) *cnt = 0u;
}

/* L1 prefetch of the KV vector at cache + off (the loads att_tiles issues
 * next, started earlier), its lines split at the one that holds byte cur:
 * below = 1 the lines wholly before that one, 0 the others */
static __device__ __forceinline__ void att_prefetch_split(const uint8_t *cache, size_t off, size_t vb, size_t cur,
                                                          int below) {
    const uintptr_t lim = ((uintptr_t)(cache + cur)) & ~(uintptr_t)127;
    for (size_t o = 0; o < vb; o += 128) {
        const uint8_t *a = cache + off + o;
        if ((((uintptr_t)a | 127u) < lim) == (below != 0)) asm volatile("prefetch.L1 [%0];" ::"l"(a));
    }
}
/* k_attn_part's work for one (row, head group) in one block: grid (heads /
 * GM, rows), ATT_RW = splits x nw warps (splits = ceil(max_npos / chunk)).
 * Warp w does what warp w % nw of split w / nw's block does in k_attn_part
 * (att_tiles over the same tiles, the same operations); the warps of a split
 * are merged in warp order, then the splits in split order, with the same
 * merge step and final operation, through shared memory instead of the
 * global workspace: the same values (floats stored and read back exactly),
 * so the same bits, without the counter and the second round trip. Each
 * lane first prefetches the K and V vectors of its positions, so their
 * loads overlap the q load. Used when splits x nw <= ATT_RW_MAX. */
#define ATT_RW_MAX 16
template <int FMT, int NPL, int GM>
__global__ void __launch_bounds__(32 * ATT_RW_MAX) k_attn_row(att_k P) {
    DCU_TR_EXIT();
    dcu_pdl_trigger();
    extern __shared__ __align__(16) float smf[];
    const int hg = blockIdx.x, b = blockIdx.y;
    const int hd = P.hd, hq = (hd + 3) & ~3, h0 = hg * GM;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nwt = blockDim.x >> 5;
    const int nw = nwt / P.max_splits, sp = warp / nw, wi = warp % nw;
    /* before the wait: the row (uploaded before the pass) and, in a pass of
     * one row, the cache lines of the positions before its own, which
     * earlier passes stored (k_qkv stores this pass's position only: the
     * lines from the one holding it on are prefetched after the wait, so no
     * stale line sits in L1). Passes of several rows (a prefill's rows
     * share a cache) prefetch after the wait. */
    const drow R = P.rows[b];
    int start, npos;
    row_window(R, P.window, &start, &npos);
    const int ns = (npos + P.chunk - 1) / P.chunk;
    const int t0 = sp * P.chunk, t1 = min(npos, t0 + P.chunk);
    const int kvh = h0 / (P.n_heads / P.n_kvh);
    const size_t pstride = (size_t)P.n_kvh * P.vb;
    const size_t rbase = ((size_t)P.layer * (size_t)R.n_ctx + (size_t)start) * (size_t)P.n_kvh * P.vb;
    const size_t base = rbase + (size_t)kvh * P.vb;
    const uint8_t *kb = R.kc + base, *vbp = R.vc + base;
    /* the row's own position (all KV heads); 0 when the pass has other rows: no line is below it */
    const size_t cur = P.B == 1 ? rbase + (size_t)(npos - 1) * pstride : 0;
    const int tw0 = t0 + wi * ATT_TILE, tw1 = min(t1, t0 + (wi + 1) * ATT_TILE); /* this warp's first tile */
    if (sp < ns && P.B == 1)
        for (int t = tw0 + lane; t < tw1; t += 32) {
            att_prefetch_split(R.kc, base + (size_t)t * pstride, P.vb, cur, 1);
            att_prefetch_split(R.vc, base + (size_t)t * pstride, P.vb, cur, 1);
        }
    float *qs = smf; /* GM x hq, then per warp and head (2 + hd): m, l, acc; with qk: k, v (hq each), sin, cos */
    float *kx = smf + GM * hq + (size_t)nwt * GM * (hd + 2), *vx = kx + hq;
    double *rsn = (double *)(smf + ((GM * hq + (size_t)nwt * GM * (hd + 2) + 2 * hq + 1) & ~(size_t)1));
    const int npair = P.qk ? P.qa.n_rot / 2 : 0; /* <= blockDim.x (the launcher checks) */
    if ((int)threadIdx.x < npair) /* the rotation's angles need only the position */
        sincos(__dmul_rn((double)R.pos, P.qa.freq[threadIdx.x]), rsn + threadIdx.x, rsn + npair + threadIdx.x);
    dcu_pdl_wait();
    if (sp < ns && !P.qk) /* (with qk the row's own position is stored below, then loaded) */
        for (int t = tw0 + lane; t < tw1; t += 32) {
            att_prefetch_split(R.kc, base + (size_t)t * pstride, P.vb, cur, 0);
            att_prefetch_split(R.vc, base + (size_t)t * pstride, P.vb, cur, 0);
        }
    if (P.qk) {
        /* k_qkv's operations for query heads h0 .. h0 + GM - 1 and KV head
         * kvh: bias, RoPE in double, K and V into the cache. Every block of
         * the KV head stores the same bits at position pos, then reads them
         * back as its own stores. */
        __shared__ float ssm[32];
        const dcu_qkv_args &A = P.qa;
        const float *q = A.q + (size_t)b * A.ldq + (size_t)h0 * hd, *bq = A.bq ? A.bq + (size_t)h0 * hd : NULL;
        for (int e = threadIdx.x; e < GM * hd; e += blockDim.x)
            qs[(e / hd) * hq + e % hd] = bq ? __fadd_rn(q[e], bq[e]) : q[e];
        const float *k = A.k + (size_t)b * A.ldk + (size_t)kvh * hd, *v = A.v + (size_t)b * A.ldv + (size_t)kvh * hd;
        const float *bk = A.bk ? A.bk + (size_t)kvh * hd : NULL, *bv = A.bv ? A.bv + (size_t)kvh * hd : NULL;
        for (int d = threadIdx.x; d < hd; d += blockDim.x) {
            kx[d] = bk ? __fadd_rn(k[d], bk[d]) : k[d];
            vx[d] = bv ? __fadd_rn(v[d], bv[d]) : v[d];
        }
        __syncthreads();
        for (int e = threadIdx.x; e < (GM + 1) * npair; e += blockDim.x) {
            const int g = e / npair, i = e % npair;
            rope_pair(g < GM ? qs + (size_t)g * hq : kx, i, npair, A.neox, rsn[i], rsn[npair + i]);
        }
        __syncthreads();
        const size_t off = (((size_t)A.layer * (size_t)R.n_ctx + (size_t)R.pos) * (size_t)A.n_kvh + (size_t)kvh) * A.vb;
        kv_store_vec(A.kvfmt, R.kc + off, kx, hd, ssm);
        __syncthreads();
        kv_store_vec(A.kvfmt, R.vc + off, vx, hd, ssm);
    } else {
        const float *q = P.q + (size_t)b * P.ldq + (size_t)h0 * hd;
        float qv[4];
#pragma unroll
        for (int k = 0; k < 4; k++) {
            int i = threadIdx.x + k * blockDim.x;
            qv[k] = i < GM * hd ? q[i] : 0.0f;
        }
#pragma unroll
        for (int k = 0; k < 4; k++) {
            int i = threadIdx.x + k * blockDim.x;
            if (i < GM * hd) qs[(i / hd) * hq + i % hd] = qv[k];
        }
        for (int i = threadIdx.x + 4 * blockDim.x; i < GM * hd; i += blockDim.x) qs[(i / hd) * hq + i % hd] = q[i];
    }
    att_pad(P, b, hg, gridDim.x);
    __syncthreads();
    float m[GM], l[GM], acc[GM][NPL];
#pragma unroll
    for (int g = 0; g < GM; g++) {
        m[g] = -INFINITY, l[g] = 0.0f;
#pragma unroll
        for (int i = 0; i < NPL; i++) acc[g][i] = 0.0f;
    }
    if (sp < ns) {
        if (att_kal<FMT>(kb, vbp, pstride, hd))
            att_tiles<FMT, NPL, GM, true>(P, qs, hq, kb, vbp, pstride, t0, t1, hd, m, l, acc, wi, nw);
        else att_tiles<FMT, NPL, GM, false>(P, qs, hq, kb, vbp, pstride, t0, t1, hd, m, l, acc, wi, nw);
    }
    float *wbase = smf + GM * hq;
    const int d0 = lane * NPL;
    if (sp < ns && wi < (t1 - t0 + ATT_TILE - 1) / ATT_TILE) {
#pragma unroll
        for (int g = 0; g < GM; g++) {
            float *wb = wbase + (size_t)(warp * GM + g) * (hd + 2);
            if (lane == 0) wb[0] = m[g], wb[1] = l[g];
#pragma unroll
            for (int i = 0; i < NPL; i++)
                if (d0 + i < hd) wb[2 + d0 + i] = acc[g][i];
        }
    }
    __syncthreads();
    for (int e = threadIdx.x; e < GM * hd; e += blockDim.x) {
        int g = e / hd, d = e % hd;
        float M = 0.0f, L = 0.0f, a = 0.0f;
        for (int s = 0; s < ns; s++) {
            int s0 = s * P.chunk, s1 = min(npos, s0 + P.chunk);
            int nused = min(nw, (s1 - s0 + ATT_TILE - 1) / ATT_TILE);
            const float *w0 = wbase + (size_t)(s * nw * GM + g) * (hd + 2);
            float Ms = w0[0], Ls = w0[1], as = w0[2 + d];
            for (int w = 1; w < nused; w++) {
                const float *wx = wbase + (size_t)((s * nw + w) * GM + g) * (hd + 2);
                att_merge(P.fast, Ms, Ls, as, wx[0], wx[1], wx[2 + d]);
            }
            if (s == 0) M = Ms, L = Ls, a = as;
            else att_merge(P.fast, M, L, a, Ms, Ls, as);
        }
        att_put(P, b, h0 * hd + e, __fmul_rn(a, __fdiv_rn(1.0f, L)));
    }
}

size_t dcu_attn_part_floats(int B, int n_heads, int head_dim, int chunk, int max_npos) {
    size_t splits = (size_t)((max_npos + chunk - 1) / chunk);
    if (splits <= 1) return 0;
    return (size_t)B * (size_t)n_heads * splits * (size_t)(head_dim + 2);
}

/* k_attn_part<FMT, npl, gm> */
template <int FMT, int NPL>
static void launch_attn_gm(int gm, dim3 g, int threads, size_t smem, cudaStream_t st, const att_k &S) {
    if (NPL <= 4 && gm == 4) dcu_launch(k_attn_part<FMT, NPL, (NPL <= 4 ? 4 : 1)>, g, threads, smem, st, S);
    else if (NPL <= 8 && gm == 2) dcu_launch(k_attn_part<FMT, NPL, (NPL <= 8 ? 2 : 1)>, g, threads, smem, st, S);
    else dcu_launch(k_attn_part<FMT, NPL, 1>, g, threads, smem, st, S);
}
/* k_attn_row<FMT, npl, gm> */
template <int FMT, int NPL>
static void launch_attn_row_gm(int gm, dim3 g, int threads, size_t smem, cudaStream_t st, const att_k &S) {
    if (NPL <= 4 && gm == 4) dcu_launch(k_attn_row<FMT, NPL, (NPL <= 4 ? 4 : 1)>, g, threads, smem, st, S);
    else if (NPL <= 8 && gm == 2) dcu_launch(k_attn_row<FMT, NPL, (NPL <= 8 ? 2 : 1)>, g, threads, smem, st, S);
    else dcu_launch(k_attn_row<FMT, NPL, 1>, g, threads, smem, st, S);
}
template <int FMT>
static void launch_attn_part(int npl, int gm, bool row, dim3 g, int threads, size_t smem, cudaStream_t st,
                             const att_k &S) {
    if (row) {
        switch (npl) {
        case 1: launch_attn_row_gm<FMT, 1>(gm, g, threads, smem, st, S); break;
        case 2: launch_attn_row_gm<FMT, 2>(gm, g, threads, smem, st, S); break;
        case 4: launch_attn_row_gm<FMT, 4>(gm, g, threads, smem, st, S); break;
        case 8: launch_attn_row_gm<FMT, 8>(gm, g, threads, smem, st, S); break;
        default: launch_attn_row_gm<FMT, 32>(gm, g, threads, smem, st, S); break;
        }
        return;
    }
    switch (npl) {
    case 1: launch_attn_gm<FMT, 1>(gm, g, threads, smem, st, S); break;
    case 2: launch_attn_gm<FMT, 2>(gm, g, threads, smem, st, S); break;
    case 4: launch_attn_gm<FMT, 4>(gm, g, threads, smem, st, S); break;
    case 8: launch_attn_gm<FMT, 8>(gm, g, threads, smem, st, S); break;
    default: launch_attn_gm<FMT, 32>(gm, g, threads, smem, st, S); break;
    }
}

#define ATT_MAX_HD 1024 /* 32 lanes x 32 dimensions */

/* Scheduling overrides (read once; the same operations per head either
 * way): DRIFT_CUDA_ATT_GM=1, 2 or 4 query heads per block where that
 * divides the group and the head size allows it (else chosen from the grid
 * size); DRIFT_CUDA_ATT_ROW=0 keeps the split grid where k_attn_row would
 * serve a row in one block. */
static void att_env(int *gm, int *row) {
    static int g = -1, r = -1;
    if (g < 0) {
        const char *e = getenv("DRIFT_CUDA_ATT_GM");
        g = e && (!strcmp(e, "1") || !strcmp(e, "2") || !strcmp(e, "4")) ? e[0] - '0' : 0;
        r = dcu_env_not_zero("DRIFT_CUDA_ATT_ROW");
    }
    *gm = g;
    *row = r;
}

drift_status dcu_launch_attention(dcu_ctx *c, const dcu_attn_args *a, int B, drift_error *err) {
    if (B <= 0) return DRIFT_OK;
    if (a->head_dim < 1 || a->head_dim > ATT_MAX_HD || a->n_heads > 65535 || a->chunk < 1 || a->n_kvh < 1 ||
        a->n_heads % a->n_kvh)
        return drift_error_set(err, DRIFT_ERR_UNSUPPORTED,
                               "cuda: attention with %d heads (%d kv) of dimension %d, chunk %d", a->n_heads,
                               a->n_kvh, a->head_dim, a->chunk);
    int max_splits = (a->max_npos + a->chunk - 1) / a->chunk;
    if (max_splits < 1) max_splits = 1;
    att_k P;
    P.q = a->q;
    P.ldq = a->ldq;
    P.out = a->out;
    P.ldo = a->ldo;
    P.rows = a->rows;
    P.part = a->part;
    P.cnt = a->cnt;
    P.layer = a->layer;
    P.n_heads = a->n_heads;
    P.n_kvh = a->n_kvh;
    P.hd = a->head_dim;
    P.window = a->window;
    P.kvfmt = a->kvfmt;
    P.fast = a->fast_exp;
    P.chunk = a->chunk;
    P.max_splits = max_splits;
    P.vb = a->vb;
    P.scale = a->scale;
    P.B = B;
    P.b0 = 0;
    P.acts = DRIFT_DTYPE_F32;
    P.oh = NULL;
    P.okp = 0;
    P.qk = 0;
    memset(&P.qa, 0, sizeof P.qa);
    if (a->oa) {
        if (is_fp8_host(a->oacts) || (a->oneeds & DCU_NEED_Q))
            return drift_error_set(err, DRIFT_ERR_INTERNAL, "cuda: attention cannot write fp8 matmul inputs");
        P.out = a->oa->f;
        P.ldo = (int64_t)a->n_heads * a->head_dim;
        P.acts = a->oacts;
        P.oh = (a->oneeds & DCU_NEED_H) ? a->oa->h : NULL;
        P.okp = dcu_pad16(P.ldo);
    }
    int hd = a->head_dim;
    int npl = hd <= 32 ? 1 : hd <= 64 ? 2 : hd <= 128 ? 4 : hd <= 256 ? 8 : 32;
    long nwl = ((long)a->chunk + ATT_TILE - 1) / ATT_TILE; /* warps: from the chunk only */
    int nw = nwl < ATT_MAX_WARPS ? (int)nwl : ATT_MAX_WARPS;
    size_t per_row = (size_t)a->n_heads * (size_t)max_splits * (size_t)(a->head_dim + 2);
    int slice = 65535;
    if (max_splits > 1) {
        size_t fit = a->part ? a->part_floats / per_row : 0;
        size_t cfit = a->cnt ? a->cnt_rows : 0;
        if (fit < 1 || cfit < 1)
            return drift_error_set(err, DRIFT_ERR_INTERNAL, "cuda: attention workspace of %zu floats < %zu (%zu counter rows)",
                                   a->part_floats, per_row, cfit);
        if (fit < (size_t)slice) slice = (int)fit;
        if (cfit < (size_t)slice) slice = (int)cfit;
    }
    /* query heads per block: the largest of 4, 2, 1 dividing the group (2 at
     * most for head_dim > 128, 1 above 256), halved while the grid would
     * leave SMs idle. A scheduling choice only: per head the same operations. */
    int group = a->n_heads / a->n_kvh;
    int gm = npl <= 4 ? 4 : npl <= 8 ? 2 : 1;
    while (gm > 1 && group % gm) gm /= 2;
    int nb0 = B < slice ? B : slice;
    while (gm > 1 && (long)nb0 * (a->n_heads / gm) * max_splits < 2L * c->sm_count) gm /= 2;
    int gm_env, row_env;
    att_env(&gm_env, &row_env);
    if (gm_env && group % gm_env == 0 && gm_env <= (npl <= 4 ? 4 : npl <= 8 ? 2 : 1)) gm = gm_env;
    int hq = (hd + 3) & ~3;
    /* one block per (row, head group) when its splits' warps fit (k_attn_row: the same operations) */
    const bool row = dcu_fuse_on() && row_env && (long)max_splits * nw <= ATT_RW_MAX &&
                     (size_t)(gm * hq + max_splits * nw * gm * (hd + 2)) * sizeof(float) <= 48u * 1024u;
    const int threads = row ? 32 * max_splits * nw : 32 * nw;
    size_t smem = (size_t)(gm * hq + (threads / 32) * gm * (hd + 2)) * sizeof(float); /* <= 37 KB */
    if (row) slice = 65535; /* no workspace */
    static int qka = -1; /* DRIFT_CUDA_QKA=0: k_qkv always its own launch (read once; the same bits) */
    if (qka < 0) qka = dcu_env_not_zero("DRIFT_CUDA_QKA");
    if (a->qkv) { /* k_qkv's work: in k_attn_row (one row), else its own launch first */
        const int npair = a->qkv->n_rot / 2;
        const size_t qk_smem = ((smem / sizeof(float) + 2 * (size_t)hq + 1) & ~(size_t)1) * sizeof(float) +
                               2 * (size_t)npair * sizeof(double);
        if (qka && row && B == 1 && npair <= threads && qk_smem <= 48u * 1024u && a->qkv->q == a->q) {
            P.qk = 1;
            P.qa = *a->qkv;
            smem = qk_smem;
        } else {
            drift_status st = dcu_launch_qkv(c, a->qkv, B, err);
            if (st) return st;
        }
    }
    for (int b0 = 0; b0 < B; b0 += slice) {
        int nb = B - b0 < slice ? B - b0 : slice;
        att_k S = P;
        S.q += (size_t)b0 * P.ldq;
        S.out += (size_t)b0 * P.ldo;
        if (S.oh) S.oh += (size_t)b0 * P.okp;
        S.b0 = b0;
        S.rows += b0;
        dim3 g1 = row ? dim3((unsigned)(a->n_heads / gm), (unsigned)nb)
                      : dim3((unsigned)max_splits, (unsigned)(a->n_heads / gm), (unsigned)nb);
        switch (a->kvfmt) {
        case DRIFT_DTYPE_F16: launch_attn_part<DRIFT_DTYPE_F16>(npl, gm, row, g1, threads, smem, c->st, S); break;
        case DRIFT_DTYPE_BF16: launch_attn_part<DRIFT_DTYPE_BF16>(npl, gm, row, g1, threads, smem, c->st, S); break;
        case DRIFT_DTYPE_FP8_E4M3:
            launch_attn_part<DRIFT_DTYPE_FP8_E4M3>(npl, gm, row, g1, threads, smem, c->st, S);
            break;
        case DRIFT_DTYPE_FP8_E5M2:
            launch_attn_part<DRIFT_DTYPE_FP8_E5M2>(npl, gm, row, g1, threads, smem, c->st, S);
            break;
        default: launch_attn_part<DRIFT_DTYPE_F32>(npl, gm, row, g1, threads, smem, c->st, S); break;
        }
        DCU_LAUNCHED("attention kernel");
    }
    return DRIFT_OK;
}

/* ------------------------------------------------------------------- MoE */
__global__ void k_scatter(const float *src, float *slot, const int *who, int64_t D) {
    DCU_PDL_ENTER();
    int r = blockIdx.x;
    const float *s = src + (size_t)r * D;
    float *d = slot + (size_t)who[r] * D;
    for (int64_t i = threadIdx.x; i < D; i += blockDim.x) d[i] = s[i];
}

drift_status dcu_launch_scatter(dcu_ctx *c, const float *src, float *slot, const int *who, int cnt, int D,
                                drift_error *err) {
    for (int r0 = 0; r0 < cnt; r0 += 65535) {
        int nr = cnt - r0 < 65535 ? cnt - r0 : 65535;
        dcu_launch(k_scatter, nr, DCU_ROWT, 0, c->st, src + (size_t)r0 * D, slot, who + r0, D);
        DCU_LAUNCHED("MoE scatter kernel");
    }
    return DRIFT_OK;
}

/* out[b][d] = sum_k wt[b][k] * slot[b][k][d], k in order, multiply then add
 * (as the CPU's loop) */
__global__ void k_moe_sum(const float *slot, const float *wt, float *out, int K, int64_t D) {
    DCU_PDL_ENTER();
    int b = blockIdx.x;
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
        float acc = 0.0f;
        for (int k = 0; k < K; k++)
            acc = __fadd_rn(acc, __fmul_rn(wt[(size_t)b * K + k], slot[((size_t)b * K + k) * D + d]));
        out[(size_t)b * D + d] = acc;
    }
}

drift_status dcu_launch_moe_sum(dcu_ctx *c, const float *slot, const float *wt, float *out, int B, int K, int D,
                                drift_error *err) {
    for (int b0 = 0; b0 < B; b0 += 65535) {
        int nb = B - b0 < 65535 ? B - b0 : 65535;
        dcu_launch(k_moe_sum, nb, DCU_ROWT, 0, c->st, slot + (size_t)b0 * K * D, wt + (size_t)b0 * K, out + (size_t)b0 * D,
                                              K, D);
        DCU_LAUNCHED("MoE sum kernel");
    }
    return DRIFT_OK;
}

/* The router's top-k of a row, as moe_ffn on the host: softmax in double
 * (exp of logit - max, summed in expert order), the k largest probabilities
 * in turn (ties to the lower index), weights p / s / tot renormalised over
 * the chosen ones. One thread per row. */
__global__ void k_moe_route(const float *rl, int B, int E, int K, int *sel, float *wt) {
    DCU_PDL_ENTER();
    int b = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (b >= B) return;
    const float *lg = rl + (size_t)b * E;
    double mx = lg[0], s = 0;
    for (int e = 1; e < E; e++)
        if (lg[e] > mx) mx = lg[e];
    for (int e = 0; e < E; e++) s += exp((double)lg[e] - mx);
    int sk[DCU_MOE_KMAX];
    double tot = 0;
    for (int k = 0; k < K; k++) {
        int best = -1;
        double pb = 0;
        for (int e = 0; e < E; e++) {
            bool used = false;
            for (int j = 0; j < k; j++) used |= sk[j] == e;
            if (used) continue;
            double pe = exp((double)lg[e] - mx);
            if (best < 0 || pe > pb) best = e, pb = pe;
        }
        sk[k] = best;
        sel[(size_t)b * K + k] = best;
        tot += pb / s;
    }
    for (int k = 0; k < K; k++) wt[(size_t)b * K + k] = (float)(exp((double)lg[sk[k]] - mx) / s / tot);
}

drift_status dcu_launch_moe_route(dcu_ctx *c, const float *rl, int B, int E, int K, int *sel, float *wt,
                                  drift_error *err) {
    if (B <= 0) return DRIFT_OK;
    if (K < 1 || K > DCU_MOE_KMAX || K > E)
        return drift_error_set(err, DRIFT_ERR_UNSUPPORTED, "cuda: %d of %d experts per token (at most %d)", K, E,
                               DCU_MOE_KMAX);
    dcu_launch(k_moe_route, (unsigned)((B + 127) / 128), 128, 0, c->st, rl, B, E, K, sel, wt);
    DCU_LAUNCHED("MoE router kernel");
    return DRIFT_OK;
}

/* out[b][d] = sum_k wt[b][k] * ye[sel[b][k]][b][d], k in order, multiply
 * then add (k_moe_sum's operations, with every expert's output at hand) */
__global__ void k_moe_comb(const float *ye, const int *sel, const float *wt, float *out, int B, int K, int64_t D) {
    DCU_PDL_ENTER();
    int b = blockIdx.x;
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
        float acc = 0.0f;
        for (int k = 0; k < K; k++)
            acc = __fadd_rn(acc, __fmul_rn(wt[(size_t)b * K + k], ye[((size_t)sel[(size_t)b * K + k] * B + b) * D + d]));
        out[(size_t)b * D + d] = acc;
    }
}

drift_status dcu_launch_moe_comb(dcu_ctx *c, const float *ye, const int *sel, const float *wt, float *out, int B,
                                 int K, int D, drift_error *err) {
    for (int b0 = 0; b0 < B; b0 += 65535) {
        int nb = B - b0 < 65535 ? B - b0 : 65535;
        /* rows b0.. of the batch: ye keeps the whole batch's stride B, shifted by b0 rows */
        dcu_launch(k_moe_comb, nb, DCU_ROWT, 0, c->st, ye + (size_t)b0 * D, sel + (size_t)b0 * K, wt + (size_t)b0 * K,
                                               out + (size_t)b0 * D, B, K, D);
        DCU_LAUNCHED("MoE combine kernel");
    }
    return DRIFT_OK;
}

/* --------------------------------------------------------------- softmax */
__global__ void __launch_bounds__(DCU_ROWT) k_softmax(int fast, float *x, int64_t n) {
    DCU_PDL_ENTER();
    __shared__ float sm[32];
    float *r = x + (size_t)blockIdx.x * n;
    float m = -INFINITY;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) m = fmaxf(m, r[i]);
    m = dcu_block_max(m, sm, -INFINITY);
    float s = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        float e = dev_exp(fast, r[i] - m);
        r[i] = e;
        s = __fadd_rn(s, e);
    }
    s = dcu_block_sum(s, sm);
    float inv = __fdiv_rn(1.0f, s);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) r[i] = __fmul_rn(r[i], inv);
}

drift_status dcu_launch_softmax(dcu_ctx *c, int fast_exp, float *x, int64_t rows, int64_t n, drift_error *err) {
    for (int64_t r0 = 0; r0 < rows; r0 += 65535) {
        int64_t nr = rows - r0 < 65535 ? rows - r0 : 65535;
        dcu_launch(k_softmax, (unsigned)nr, DCU_ROWT, 0, c->st, fast_exp, x + (size_t)r0 * n, n);
        DCU_LAUNCHED("softmax kernel");
    }
    return DRIFT_OK;
}

/* ---------------------------------------------------------------- argmax */
/* (value, index) a thread or lane keeps: the larger value, the smaller
 * index on ties; NaN is never larger, nor equal */
static __device__ __forceinline__ void amax_take(float &bv, int &bi, float v, int i) {
    if (v > bv || (v == bv && i < bi)) bv = v, bi = i;
}

/* out[r] = the index the host's argmax (sampler.c) picks in row r of x
 * (rows of n): it keeps index 0 until a value is larger than the current
 * best, so the first index of the largest non-NaN value, or 0 when x[0] is
 * NaN (nothing compares larger than NaN) or every value is. Each thread
 * takes its values (16-byte loads, AMAX_UNR of them in flight, where the
 * row allows) in any order, then lanes and warps combine (value, index)
 * pairs, ties to the smaller index: the same choice in any order. One
 * block of AMAX_T threads a row: a decode step's row of 32000 logits is
 * one round of loads. */
#define AMAX_T 1024
#define AMAX_UNR 8
__global__ void __launch_bounds__(AMAX_T) k_argmax(const float *x, int64_t n, int *out) {
    DCU_PDL_ENTER();
    __shared__ float sv[32];
    __shared__ int si[32];
    const float *r = x + (size_t)blockIdx.x * n;
    float bv = -INFINITY;
    int bi = INT_MAX;
    if (n % 4 == 0 && ((uintptr_t)r & 15u) == 0) {
        const float4 *r4 = (const float4 *)r;
        const int64_t n4 = n / 4, step = (int64_t)AMAX_UNR * blockDim.x;
        for (int64_t j0 = threadIdx.x; j0 < n4; j0 += step) {
            float4 v[AMAX_UNR];
#pragma unroll
            for (int u = 0; u < AMAX_UNR; u++) {
                const int64_t j = j0 + (int64_t)u * blockDim.x;
                v[u] = j < n4 ? r4[j] : make_float4(NAN, NAN, NAN, NAN); /* NaN: never taken */
            }
#pragma unroll
            for (int u = 0; u < AMAX_UNR; u++) {
                const int i = (int)((j0 + (int64_t)u * blockDim.x) * 4);
                amax_take(bv, bi, v[u].x, i);
                amax_take(bv, bi, v[u].y, i + 1);
                amax_take(bv, bi, v[u].z, i + 2);
                amax_take(bv, bi, v[u].w, i + 3);
            }
        }
    } else {
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) amax_take(bv, bi, r[i], (int)i);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, bv, o);
        int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        amax_take(bv, bi, ov, oi);
    }
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
    if (lane == 0) sv[warp] = bv, si[warp] = bi;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < nw; w++) amax_take(bv, bi, sv[w], si[w]);
        out[blockIdx.x] = n < 1 || isnan(r[0]) || bi == INT_MAX ? 0 : bi;
    }
}

drift_status dcu_launch_argmax(dcu_ctx *c, const float *x, int64_t rows, int64_t n, int *out, drift_error *err) {
    if (n > INT_MAX) return drift_error_set(err, DRIFT_ERR_INVALID, "cuda: argmax over %lld values", (long long)n);
    for (int64_t r0 = 0; r0 < rows; r0 += 65535) {
        int64_t nr = rows - r0 < 65535 ? rows - r0 : 65535;
        dcu_launch(k_argmax, (unsigned)nr, AMAX_T, 0, c->st, x + (size_t)r0 * n, n, out + r0);
        DCU_LAUNCHED("argmax kernel");
    }
    return DRIFT_OK;
}

#ifdef DCU_TRACE
DCU_TRACE_HOST(dcu_trace_k, "k")
#endif
