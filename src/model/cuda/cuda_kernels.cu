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
 *   attention split-KV: cuda_attn.cuh (kernels), cuda_attn.cu (launcher)
 *
 * The row kernels norm, swiglu and prep keep a row in registers (k_*_r): one
 * round of loads instead of one dependent load per element and pass; norm
 * spreads a row over up to 1024 threads (2, 4 or 8 elements each, the count
 * chosen from the row length alone), swiglu and prep over 256; swiglu and
 * prep with acts that need no row amax (not fp8) spread a row over blocks of
 * 256 columns (k_*_e, elementwise). */
#include "model/cuda/cuda_internal.cuh"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ATT_THREADS 128 /* k_qkv */

static __device__ __forceinline__ float dev_exp(int fast, float x) { return dcu_exp(fast, x); }

/* ------------------------------------------------------------------------
 * act() rounding of one row in place (num_round_acts), with the copies a
 * matmul may need. amax: max |f| over the row (fp8 only). Block-strided.
 * ---------------------------------------------------------------------- */
/* the fp8 scale of a row from its amax (s, and whether it is usable) */
static __device__ __forceinline__ float prep_scale(int acts, float amax, bool *ok) {
    float s = 0.0f;
    *ok = false;
    if (dcu_is_fp8(acts)) {
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
    if (dcu_is_fp8(acts)) am = dcu_block_max(am, sm, 0.0f);
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
        if (dcu_is_fp8(acts)) am = dcu_block_max(am, sm, 0.0f);
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
    if (dcu_is_fp8(acts)) am = dcu_block_max(am, sm, 0.0f);
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
        if (dcu_is_fp8(acts)) am = dcu_block_max(am, sm, 0.0f);
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
    if (dcu_is_fp8(acts)) am = dcu_block_max(am, sm, 0.0f);
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
    if (dcu_is_fp8(acts)) am = dcu_block_max(am, sm, 0.0f);
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
    if (dcu_is_fp8(acts)) am = dcu_block_max(am, sm, 0.0f);
    prep_row_r<PER>(acts, v, a.f + (size_t)o * K, h, kp, (needs & DCU_NEED_Q) ? a.q + (size_t)o * K : NULL,
                    a.qs ? a.qs + o : NULL, K, am);
}

drift_status dcu_launch_prep(dcu_ctx *c, int acts, const float *in, int64_t ldin, const int *idx, int n_out, int K,
                             const dact *a, unsigned needs, drift_error *err) {
    if (n_out <= 0) return DRIFT_OK;
    int rows = (needs & DCU_NEED_H) ? (int)dcu_pad16(n_out) : n_out;
    if (!dcu_is_fp8(acts) && !(needs & DCU_NEED_Q) && rows <= 65535) {
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
    if (dcu_is_fp8(acts)) am = dcu_block_max(am, sm, 0.0f);
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
    if (dcu_is_fp8(acts)) am = dcu_block_max(am, sm, 0.0f);
    prep_row_r<PER>(acts, gv, f, h, kp, (needs & DCU_NEED_Q) ? a.q + (size_t)b * n : NULL, a.qs ? a.qs + b : NULL,
                    n, am);
}

drift_status dcu_launch_swiglu(dcu_ctx *c, int acts, int fast_exp, const float *gate, const float *up, int64_t ld,
                               int B, int n, const dact *a, unsigned needs, drift_error *err) {
    if (B <= 0) return DRIFT_OK;
    int rows = (needs & DCU_NEED_H) ? (int)dcu_pad16(B) : B;
    if (!dcu_is_fp8(acts) && !(needs & DCU_NEED_Q) && rows <= 65535) {
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
/* (dcu_kv_store, dcu_kv_scale, dcu_kv_elem: cuda_internal.cuh) */
__global__ void __launch_bounds__(DCU_ROWT) k_kv_store(int fmt, uint8_t *dst, size_t vb, const float *src, int n) {
    DCU_PDL_ENTER();
    __shared__ float sm[32];
    int r = blockIdx.x;
    dcu_kv_store(fmt, dst + (size_t)r * vb, src + (size_t)r * n, n, sm);
}

__global__ void __launch_bounds__(DCU_ROWT) k_kv_load(int fmt, float *dst, const uint8_t *src, size_t vb, int n) {
    DCU_PDL_ENTER();
    int r = blockIdx.x;
    const uint8_t *vec = src + (size_t)r * vb;
    float s = dcu_kv_scale(fmt, vec);
    for (int i = threadIdx.x; i < n; i += blockDim.x) dst[(size_t)r * n + i] = dcu_kv_elem(fmt, vec, i, s);
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
        dcu_rope_pair(buf, i, npair, A.neox, sn, cs);
    }
    __syncthreads();
    if (isq) {
        for (int d = threadIdx.x; d < hd; d += blockDim.x) vec[d] = buf[d];
        return;
    }
    size_t off = (((size_t)A.layer * (size_t)R.n_ctx + (size_t)R.pos) * (size_t)A.n_kvh + (size_t)j) * A.vb;
    dcu_kv_store(A.kvfmt, R.kc + off, buf, hd, sm);
    __syncthreads();
    const float *vv = A.v + (size_t)b * A.ldv + (size_t)j * hd;
    const float *bv = A.bv ? A.bv + (size_t)j * hd : NULL;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) buf[d] = bv ? __fadd_rn(vv[d], bv[d]) : vv[d];
    __syncthreads();
    dcu_kv_store(A.kvfmt, R.vc + off, buf, hd, sm);
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

/* Attention: cuda_attn.cu (the launcher) and cuda_attn_<format>.cu (the
 * kernels of cuda_attn.cuh, one unit per KV format). */

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
