/* cuda_kernels.cu - the CUDA backend's row kernels and their launchers.
 *
 * One block per row for the row-wise ops (DCU_ROWT = 256 threads); thread t
 * owns elements t, t + 256, ... of its row in every pass, so a thread reads
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
 * into splits of `chunk` positions; one block per (split, head, row) runs an
 * online softmax over its split in tiles of 32 positions (scores: one warp
 * per position, lanes strided over the head dimension, fixed xor tree; then
 * max, exp, and the weighted sum of V per dimension in position order). A
 * second kernel combines the splits of a (row, head) in split order. When
 * every row fits one split the first kernel writes the output directly with
 * the same final operation (acc * (1 / l)), so the result does not depend on
 * whether a combine ran. Where a tile fits in shared memory (head_dim <=
 * 160), k_attn_part_st runs instead: it stages each tile's K and V (deq()'d)
 * in shared memory with all loads of the tile in flight (head_dim <= 64: the
 * next tile's loads issued before the current one is computed), then does the
 * very same operations in the same order, so the results are the same bit
 * for bit. The row kernels norm, swiglu and prep keep a row in registers
 * (k_*_r, rows up to 32 * 256) for the same reason: one round of loads
 * instead of one dependent load per element and pass; swiglu and prep with
 * acts that need no row amax (not fp8) spread a row over blocks of 256
 * columns (k_*_e, elementwise). The chunk is fixed by the profile with
 * batch_invariant=1 (so a row's result depends on its own positions only),
 * and chosen from the batch size and the SM count with batch_invariant=0. */
#include "model/cuda/cuda_internal.cuh"

#include <math.h>

#define ATT_THREADS 128
#define ATT_TILE 32
#define ATT_MAX_PER_THREAD 8 /* head_dim <= 1024 = 8 * 128 */

static __device__ __forceinline__ bool is_fp8(int t) {
    return t == DRIFT_DTYPE_FP8_E4M3 || t == DRIFT_DTYPE_FP8_E5M2;
}

static inline bool is_fp8_host(int t) { return t == DRIFT_DTYPE_FP8_E4M3 || t == DRIFT_DTYPE_FP8_E5M2; }

static __device__ __forceinline__ float dev_exp(int fast, float x) { return fast ? __expf(x) : expf(x); }

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
 * (either may be NULL) */
static __device__ __forceinline__ float prep_elem(int acts, float v, float s, bool ok, uint16_t *h, uint8_t *q) {
    switch (acts) {
    case DRIFT_DTYPE_BF16: {
        uint16_t b = dcu_f32_bf16(v);
        v = dcu_bf16_f32(b);
        if (h) *h = b;
        break;
    }
    case DRIFT_DTYPE_F16: {
        uint16_t b = dcu_f32_f16(v);
        v = dcu_f16_f32(b);
        if (h) *h = b;
        break;
    }
    case DRIFT_DTYPE_FP8_E4M3:
    case DRIFT_DTYPE_FP8_E5M2: {
        uint8_t c = 0;
        if (ok) v = dcu_fp8_round(acts, v, s, &c); /* else: left as is, like the CPU */
        if (q) *q = c;
        break;
    }
    default: break;
    }
    return v;
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

/* prep_row of a row held in registers: thread t's elements t + k * DCU_ROWT
 * (k < PER) are v[k]; the rounded values go to f (and v) */
template <int PER>
static __device__ __forceinline__ void prep_row_r(int acts, float *v, float *f, uint16_t *h, int64_t kp, uint8_t *q,
                                                  float *qs, int K, float amax) {
    bool ok;
    float s = prep_scale(acts, amax, &ok);
#pragma unroll
    for (int k = 0; k < PER; k++) {
        int i = (int)threadIdx.x + k * DCU_ROWT;
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
        k_embed<<<nb, DCU_ROWT, 0, c->st>>>(acts, *E, rows ? rows + b0 : NULL, toks ? toks + b0 : NULL,
                                             x + (size_t)b0 * E->cols);
        DCU_LAUNCHED("embedding kernel");
    }
    return DRIFT_OK;
}

/* ---------------------------------------------------------- norm (+ add) */
__global__ void __launch_bounds__(DCU_ROWT) k_norm(int acts, float *x, const float *r, int64_t n, const float *w,
                                                   float eps, float *hidden, dact a, unsigned needs, int B) {
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

/* k_norm with the row in registers (thread t: elements t + k * DCU_ROWT,
 * k < PER, as k_norm's loops): every load of a pass in flight together, the
 * same operations in the same order, so the same results bit for bit.
 * Launched with DCU_ROWT threads for n <= PER * DCU_ROWT. */
template <int PER>
__global__ void __launch_bounds__(DCU_ROWT) k_norm_r(int acts, float *x, const float *r, int n, const float *w,
                                                     float eps, float *hidden, dact a, unsigned needs, int B) {
    __shared__ float sm[32];
    int row = blockIdx.x;
    int64_t kp = dcu_pad16(n);
    uint16_t *h = (needs & DCU_NEED_H) && a.h ? a.h + (size_t)row * kp : NULL;
    if (row >= B) { /* batch padding of h */
        if (h) zero_h_row(h, kp);
        return;
    }
    float *xr = x + (size_t)row * n;
    float xv[PER], wv[PER]; /* w loaded with x: no second round of loads */
#pragma unroll
    for (int k = 0; k < PER; k++) {
        int i = (int)threadIdx.x + k * DCU_ROWT;
        xv[k] = i < n ? xr[i] : 0.0f;
        wv[k] = i < n ? w[i] : 0.0f;
    }
    if (r) { /* residual: x = act(x + r) */
        const float *rr = r + (size_t)row * n;
        float rv[PER];
#pragma unroll
        for (int k = 0; k < PER; k++) {
            int i = (int)threadIdx.x + k * DCU_ROWT;
            rv[k] = i < n ? rr[i] : 0.0f;
        }
        float am = 0.0f;
#pragma unroll
        for (int k = 0; k < PER; k++) {
            int i = (int)threadIdx.x + k * DCU_ROWT;
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
        int i = (int)threadIdx.x + k * DCU_ROWT;
        if (i < n) ss = fmaf(xv[k], xv[k], ss);
    }
    ss = dcu_block_sum(ss, sm);
    float rinv = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(ss, (float)n), eps)));
    float *af = a.f ? a.f + (size_t)row * n : NULL;
    float *hid = hidden ? hidden + (size_t)row * n : NULL;
    float am = 0.0f;
#pragma unroll
    for (int k = 0; k < PER; k++) {
        int i = (int)threadIdx.x + k * DCU_ROWT;
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
    if (n <= 8 * DCU_ROWT)
        k_norm_r<8><<<rows, DCU_ROWT, 0, c->st>>>(acts, x, r, n, w, eps, hidden, av, needs, B);
    else if (n <= 16 * DCU_ROWT)
        k_norm_r<16><<<rows, DCU_ROWT, 0, c->st>>>(acts, x, r, n, w, eps, hidden, av, needs, B);
    else if (n <= 32 * DCU_ROWT)
        k_norm_r<32><<<rows, DCU_ROWT, 0, c->st>>>(acts, x, r, n, w, eps, hidden, av, needs, B);
    else
        k_norm<<<rows, DCU_ROWT, 0, c->st>>>(acts, x, r, n, w, eps, hidden, av, needs, B);
    DCU_LAUNCHED("rmsnorm kernel");
    return DRIFT_OK;
}

/* ------------------------------------------------------------------ prep */
__global__ void __launch_bounds__(DCU_ROWT) k_prep(int acts, const float *in, int64_t ldin, const int *idx, int n_out,
                                                   int64_t K, dact a, unsigned needs) {
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
        k_prep_e<<<g, DCU_ROWT, 0, c->st>>>(acts, in, ldin, idx, n_out, K, *a, needs);
    } else if (K <= 8 * DCU_ROWT)
        k_prep_r<8><<<rows, DCU_ROWT, 0, c->st>>>(acts, in, ldin, idx, n_out, K, *a, needs);
    else if (K <= 16 * DCU_ROWT)
        k_prep_r<16><<<rows, DCU_ROWT, 0, c->st>>>(acts, in, ldin, idx, n_out, K, *a, needs);
    else if (K <= 24 * DCU_ROWT)
        k_prep_r<24><<<rows, DCU_ROWT, 0, c->st>>>(acts, in, ldin, idx, n_out, K, *a, needs);
    else if (K <= 32 * DCU_ROWT)
        k_prep_r<32><<<rows, DCU_ROWT, 0, c->st>>>(acts, in, ldin, idx, n_out, K, *a, needs);
    else
        k_prep<<<rows, DCU_ROWT, 0, c->st>>>(acts, in, ldin, idx, n_out, K, *a, needs);
    DCU_LAUNCHED("act rounding kernel");
    return DRIFT_OK;
}

/* ---------------------------------------------------------------- gather */
__global__ void __launch_bounds__(DCU_ROWT) k_gather(dact s, dact d, const int *idx, int n_out, int64_t K,
                                                     unsigned needs) {
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
    k_gather<<<rows, DCU_ROWT, 0, c->st>>>(*src, *dst, idx, n_out, K, needs);
    DCU_LAUNCHED("gather kernel");
    return DRIFT_OK;
}

/* ---------------------------------------------------------------- swiglu */
__global__ void __launch_bounds__(DCU_ROWT) k_swiglu(int acts, int fast, const float *gate, const float *up, int64_t ld,
                                                     int B, int64_t n, dact a, unsigned needs) {
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
        k_swiglu_e<<<g, DCU_ROWT, 0, c->st>>>(acts, fast_exp, gate, up, ld, B, n, *a, needs);
    } else if (n <= 8 * DCU_ROWT)
        k_swiglu_r<8><<<rows, DCU_ROWT, 0, c->st>>>(acts, fast_exp, gate, up, ld, B, n, *a, needs);
    else if (n <= 16 * DCU_ROWT)
        k_swiglu_r<16><<<rows, DCU_ROWT, 0, c->st>>>(acts, fast_exp, gate, up, ld, B, n, *a, needs);
    else if (n <= 24 * DCU_ROWT)
        k_swiglu_r<24><<<rows, DCU_ROWT, 0, c->st>>>(acts, fast_exp, gate, up, ld, B, n, *a, needs);
    else if (n <= 32 * DCU_ROWT)
        k_swiglu_r<32><<<rows, DCU_ROWT, 0, c->st>>>(acts, fast_exp, gate, up, ld, B, n, *a, needs);
    else
        k_swiglu<<<rows, DCU_ROWT, 0, c->st>>>(acts, fast_exp, gate, up, ld, B, n, *a, needs);
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
    __shared__ float sm[32];
    int r = blockIdx.x;
    kv_store_vec(fmt, dst + (size_t)r * vb, src + (size_t)r * n, n, sm);
}

__global__ void __launch_bounds__(DCU_ROWT) k_kv_load(int fmt, float *dst, const uint8_t *src, size_t vb, int n) {
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
        k_kv_store<<<nr, DCU_ROWT, 0, c->st>>>(fmt, dst + (size_t)r0 * vb, vb, src + (size_t)r0 * n, n);
        DCU_LAUNCHED("KV store kernel");
    }
    return DRIFT_OK;
}

drift_status dcu_launch_kv_load(dcu_ctx *c, int fmt, float *dst, const uint8_t *src, int n_vec, int n,
                                drift_error *err) {
    size_t vb = num_kv_bytes((drift_dtype)fmt, n);
    for (int r0 = 0; r0 < n_vec; r0 += 65535) {
        int nr = n_vec - r0 < 65535 ? n_vec - r0 : 65535;
        k_kv_load<<<nr, DCU_ROWT, 0, c->st>>>(fmt, dst + (size_t)r0 * n, src + (size_t)r0 * vb, vb, n);
        DCU_LAUNCHED("KV load kernel");
    }
    return DRIFT_OK;
}

/* ------------------------------------------------- bias, RoPE, KV store */
/* grid (n_heads + n_kvh, B): blocks < n_heads rotate a q head in place;
 * the others rotate a k head and store it and the matching v head. */
__global__ void __launch_bounds__(ATT_THREADS) k_qkv(dcu_qkv_args A) {
    extern __shared__ float buf[]; /* (head_dim) */
    __shared__ float sm[32];
    int hidx = blockIdx.x, b = blockIdx.y, hd = A.head_dim;
    const drow R = A.rows[b];
    bool isq = hidx < A.n_heads;
    int j = isq ? hidx : hidx - A.n_heads;
    float *vec = isq ? A.q + (size_t)b * A.ldq + (size_t)j * hd : A.k + (size_t)b * A.ldk + (size_t)j * hd;
    const float *bias = isq ? (A.bq ? A.bq + (size_t)j * hd : NULL) : (A.bk ? A.bk + (size_t)j * hd : NULL);
    for (int d = threadIdx.x; d < hd; d += blockDim.x) buf[d] = bias ? __fadd_rn(vec[d], bias[d]) : vec[d];
    __syncthreads();
    /* RoPE in double, as num_ref_rope: (float)(x0 c - x1 s), (float)(x0 s + x1 c) */
    int npair = A.n_rot / 2;
    for (int i = threadIdx.x; i < npair; i += blockDim.x) {
        int i0 = A.neox ? i : 2 * i, i1 = A.neox ? i + npair : 2 * i + 1;
        double ang = __dmul_rn((double)R.pos, A.freq[i]);
        double sn, cs;
        sincos(ang, &sn, &cs);
        double x0 = buf[i0], x1 = buf[i1];
        buf[i0] = (float)__dsub_rn(__dmul_rn(x0, cs), __dmul_rn(x1, sn));
        buf[i1] = (float)__dadd_rn(__dmul_rn(x0, sn), __dmul_rn(x1, cs));
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
        k_qkv<<<grid, ATT_THREADS, smem, c->st>>>(s);
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
    int layer, n_heads, n_kvh, hd, window, kvfmt, fast, chunk, max_splits, direct;
    size_t vb;
    float scale;
};

static __device__ __forceinline__ void row_window(const drow &R, int window, int *start, int *npos) {
    int s = window > 0 && R.pos + 1 > window ? R.pos + 1 - window : 0;
    *start = s;
    *npos = R.pos - s + 1;
}

/* grid (splits, heads, rows) */
__global__ void __launch_bounds__(ATT_THREADS) k_attn_part(att_k P) {
    extern __shared__ float smf[];
    float *qs = smf;                  /* (hd) */
    float *sc = qs + P.hd;            /* (TILE) scores, then weights */
    float *ks = sc + ATT_TILE;        /* (TILE) K vector scales */
    float *vs = ks + ATT_TILE;        /* (TILE) V vector scales */
    int sp = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    const drow R = P.rows[b];
    int start, npos;
    row_window(R, P.window, &start, &npos);
    int t0 = sp * P.chunk;
    if (t0 >= npos) return;
    int t1 = min(npos, t0 + P.chunk);
    int hd = P.hd, kvh = h / (P.n_heads / P.n_kvh);
    size_t pstride = (size_t)P.n_kvh * P.vb;
    size_t base = (((size_t)P.layer * (size_t)R.n_ctx + (size_t)start) * (size_t)P.n_kvh + (size_t)kvh) * P.vb;
    const uint8_t *kb = R.kc + base, *vbp = R.vc + base;
    const float *q = P.q + (size_t)b * P.ldq + (size_t)h * hd;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) qs[d] = q[d];
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
    float m = -INFINITY, l = 0.0f;
    float acc[ATT_MAX_PER_THREAD];
#pragma unroll
    for (int i = 0; i < ATT_MAX_PER_THREAD; i++) acc[i] = 0.0f;
    bool first = true;
    for (int tt = t0; tt < t1; tt += ATT_TILE) {
        int nt = min(ATT_TILE, t1 - tt);
        if (threadIdx.x < nt) {
            ks[threadIdx.x] = kv_scale(P.kvfmt, kb + (size_t)(tt + threadIdx.x) * pstride);
            vs[threadIdx.x] = kv_scale(P.kvfmt, vbp + (size_t)(tt + threadIdx.x) * pstride);
        }
        __syncthreads();
        /* scores: one warp per position */
        for (int j = warp; j < nt; j += nw) {
            const uint8_t *kv = kb + (size_t)(tt + j) * pstride;
            float s = ks[j], part = 0.0f;
            for (int d = lane; d < hd; d += 32) part = fmaf(qs[d], kv_elem(P.kvfmt, kv, d, s), part);
            part = dcu_warp_sum(part);
            if (lane == 0) sc[j] = __fmul_rn(part, P.scale);
        }
        __syncthreads();
        float mt = -INFINITY;
        for (int j = 0; j < nt; j++) mt = fmaxf(mt, sc[j]);
        float mn = fmaxf(mt, m);
        float corr = first ? 0.0f : dev_exp(P.fast, m - mn);
        __syncthreads(); /* everyone has read the scores */
        if (threadIdx.x < nt) sc[threadIdx.x] = dev_exp(P.fast, sc[threadIdx.x] - mn);
        __syncthreads();
        float ln = first ? 0.0f : __fmul_rn(l, corr);
        for (int j = 0; j < nt; j++) ln = __fadd_rn(ln, sc[j]);
        l = ln;
#pragma unroll
        for (int i = 0; i < ATT_MAX_PER_THREAD; i++) {
            int d = threadIdx.x + i * ATT_THREADS;
            if (d < hd) {
                float a = first ? 0.0f : __fmul_rn(acc[i], corr);
                for (int j = 0; j < nt; j++)
                    a = fmaf(sc[j], kv_elem(P.kvfmt, vbp + (size_t)(tt + j) * pstride, d, vs[j]), a);
                acc[i] = a;
            }
        }
        m = mn;
        first = false;
        __syncthreads(); /* before the next tile overwrites sc, ks, vs */
    }
    if (P.direct) {
        float inv = __fdiv_rn(1.0f, l);
        float *o = P.out + (size_t)b * P.ldo + (size_t)h * hd;
#pragma unroll
        for (int i = 0; i < ATT_MAX_PER_THREAD; i++) {
            int d = threadIdx.x + i * ATT_THREADS;
            if (d < hd) o[d] = __fmul_rn(acc[i], inv);
        }
        return;
    }
    float *pp = P.part + (((size_t)b * P.n_heads + h) * P.max_splits + sp) * (size_t)(hd + 2);
    if (threadIdx.x == 0) {
        pp[0] = m;
        pp[1] = l;
    }
#pragma unroll
    for (int i = 0; i < ATT_MAX_PER_THREAD; i++) {
        int d = threadIdx.x + i * ATT_THREADS;
        if (d < hd) pp[2 + d] = acc[i];
    }
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

#define ATT_STAGE_PER 32 /* loads a thread has in flight while staging: a whole tile for head_dim <= 64 */

/* Stages positions [tt, tt + nt) of K into kf and of V into vf (floats,
 * (nt, hd) each, already deq()'d: the very values kv_elem returns), with
 * every load of a round issued before any store. */
template <int FMT>
static __device__ void att_stage(float *kf, float *vf, const uint8_t *kb, const uint8_t *vbp, size_t pstride, int tt,
                                 int nt, int hd) {
    int half = nt * hd, total = 2 * half;
    for (int i0 = 0; i0 < total; i0 += ATT_THREADS * ATT_STAGE_PER) {
        float r[ATT_STAGE_PER];
#pragma unroll
        for (int u = 0; u < ATT_STAGE_PER; u++) {
            int i = i0 + u * ATT_THREADS + (int)threadIdx.x;
            r[u] = 0.0f;
            if (i < total) {
                bool isv = i >= half;
                int e = isv ? i - half : i;
                int j = e / hd, d = e - j * hd;
                r[u] = kv_elem_t<FMT>((isv ? vbp : kb) + (size_t)(tt + j) * pstride, d);
            }
        }
#pragma unroll
        for (int u = 0; u < ATT_STAGE_PER; u++) {
            int i = i0 + u * ATT_THREADS + (int)threadIdx.x;
            if (i < total) {
                if (i >= half)
                    vf[i - half] = r[u];
                else
                    kf[i] = r[u];
            }
        }
    }
}

/* att_stage in two halves for a tile that takes one round (2 * nt * hd <=
 * ATT_THREADS * ATT_STAGE_PER): att_fetch issues the loads into r, att_put
 * stores r; a tile's loads are issued before the previous tile is computed. */
template <int FMT>
static __device__ __forceinline__ void att_fetch(float *r, const uint8_t *kb, const uint8_t *vbp, size_t pstride,
                                                 int tt, int nt, int hd) {
    int half = nt * hd, total = 2 * half;
#pragma unroll
    for (int u = 0; u < ATT_STAGE_PER; u++) {
        int i = u * ATT_THREADS + (int)threadIdx.x;
        r[u] = 0.0f;
        if (i < total) {
            bool isv = i >= half;
            int e = isv ? i - half : i;
            int j = e / hd, d = e - j * hd;
            r[u] = kv_elem_t<FMT>((isv ? vbp : kb) + (size_t)(tt + j) * pstride, d);
        }
    }
}

static __device__ __forceinline__ void att_put(const float *r, float *kf, float *vf, int nt, int hd) {
    int half = nt * hd, total = 2 * half;
#pragma unroll
    for (int u = 0; u < ATT_STAGE_PER; u++) {
        int i = u * ATT_THREADS + (int)threadIdx.x;
        if (i < total) {
            if (i >= half)
                vf[i - half] = r[u];
            else
                kf[i] = r[u];
        }
    }
}

/* k_attn_part with each tile's K and V staged through shared memory first
 * (all loads of a tile in flight together instead of one dependent load per
 * position): the same operations in the same order on the same values as
 * k_attn_part, so the same results bit for bit. Used where the tile fits in
 * shared memory (head_dim <= ATT_STAGED_MAX_HD). grid (splits, heads, rows). */
#define ATT_STAGED_MAX_HD 160
#define ATT_ST_PER_THREAD 2 /* head_dim <= ATT_STAGED_MAX_HD <= 2 * ATT_THREADS */
static_assert(ATT_STAGED_MAX_HD <= ATT_ST_PER_THREAD * ATT_THREADS, "staged attention accumulators");
template <int FMT>
__global__ void __launch_bounds__(ATT_THREADS) k_attn_part_st(att_k P) {
    extern __shared__ float smf[];
    float *qs = smf;                   /* (hd) */
    float *sc = qs + P.hd;             /* (TILE) scores, then weights */
    float *kf = sc + ATT_TILE;         /* (TILE, hd) */
    float *vf = kf + ATT_TILE * P.hd;  /* (TILE, hd) */
    int sp = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    const drow R = P.rows[b];
    int start, npos;
    row_window(R, P.window, &start, &npos);
    int t0 = sp * P.chunk;
    if (t0 >= npos) return;
    int t1 = min(npos, t0 + P.chunk);
    int hd = P.hd, kvh = h / (P.n_heads / P.n_kvh);
    size_t pstride = (size_t)P.n_kvh * P.vb;
    size_t base = (((size_t)P.layer * (size_t)R.n_ctx + (size_t)start) * (size_t)P.n_kvh + (size_t)kvh) * P.vb;
    const uint8_t *kb = R.kc + base, *vbp = R.vc + base;
    const float *q = P.q + (size_t)b * P.ldq + (size_t)h * hd;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) qs[d] = q[d];
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
    float m = -INFINITY, l = 0.0f;
    float acc[ATT_ST_PER_THREAD];
#pragma unroll
    for (int i = 0; i < ATT_ST_PER_THREAD; i++) acc[i] = 0.0f;
    bool first = true;
    bool one = 2 * ATT_TILE * hd <= ATT_THREADS * ATT_STAGE_PER; /* a tile in one round: prefetched */
    float pre[ATT_STAGE_PER];
    if (one) att_fetch<FMT>(pre, kb, vbp, pstride, t0, min(ATT_TILE, t1 - t0), hd);
    for (int tt = t0; tt < t1; tt += ATT_TILE) {
        int nt = min(ATT_TILE, t1 - tt);
        if (one) {
            att_put(pre, kf, vf, nt, hd);
            int tn = tt + ATT_TILE;
            if (tn < t1) att_fetch<FMT>(pre, kb, vbp, pstride, tn, min(ATT_TILE, t1 - tn), hd);
        } else {
            att_stage<FMT>(kf, vf, kb, vbp, pstride, tt, nt, hd);
        }
        __syncthreads();
        /* scores: one warp per position (positions independent: unrolled) */
#pragma unroll 4
        for (int j = warp; j < nt; j += nw) {
            const float *kr = kf + (size_t)j * hd;
            float part = 0.0f;
            for (int d = lane; d < hd; d += 32) part = fmaf(qs[d], kr[d], part);
            part = dcu_warp_sum(part);
            if (lane == 0) sc[j] = __fmul_rn(part, P.scale);
        }
        __syncthreads();
        float mt = -INFINITY;
#pragma unroll 8
        for (int j = 0; j < nt; j++) mt = fmaxf(mt, sc[j]);
        float mn = fmaxf(mt, m);
        float corr = first ? 0.0f : dev_exp(P.fast, m - mn);
        __syncthreads(); /* everyone has read the scores */
        if (threadIdx.x < nt) sc[threadIdx.x] = dev_exp(P.fast, sc[threadIdx.x] - mn);
        __syncthreads();
        float ln = first ? 0.0f : __fmul_rn(l, corr);
#pragma unroll 8
        for (int j = 0; j < nt; j++) ln = __fadd_rn(ln, sc[j]);
        l = ln;
#pragma unroll
        for (int i = 0; i < ATT_ST_PER_THREAD; i++) {
            int d = threadIdx.x + i * ATT_THREADS;
            if (i * ATT_THREADS < hd && d < hd) {
                float a = first ? 0.0f : __fmul_rn(acc[i], corr);
#pragma unroll 8
                for (int j = 0; j < nt; j++) a = fmaf(sc[j], vf[(size_t)j * hd + d], a);
                acc[i] = a;
            }
        }
        m = mn;
        first = false;
        __syncthreads(); /* before the next tile overwrites sc, kf, vf */
    }
    if (P.direct) {
        float inv = __fdiv_rn(1.0f, l);
        float *o = P.out + (size_t)b * P.ldo + (size_t)h * hd;
#pragma unroll
        for (int i = 0; i < ATT_ST_PER_THREAD; i++) {
            int d = threadIdx.x + i * ATT_THREADS;
            if (d < hd) o[d] = __fmul_rn(acc[i], inv);
        }
        return;
    }
    float *pp = P.part + (((size_t)b * P.n_heads + h) * P.max_splits + sp) * (size_t)(hd + 2);
    if (threadIdx.x == 0) {
        pp[0] = m;
        pp[1] = l;
    }
#pragma unroll
    for (int i = 0; i < ATT_ST_PER_THREAD; i++) {
        int d = threadIdx.x + i * ATT_THREADS;
        if (d < hd) pp[2 + d] = acc[i];
    }
}

#define ATT_COMBINE_REG 8 /* up to this many splits: all loaded before combining */

/* grid (heads, rows): splits combined in order */
__global__ void __launch_bounds__(ATT_THREADS) k_attn_combine(att_k P) {
    int h = blockIdx.x, b = blockIdx.y, hd = P.hd;
    const drow R = P.rows[b];
    int start, npos;
    row_window(R, P.window, &start, &npos);
    int ns = (npos + P.chunk - 1) / P.chunk;
    const float *p0 = P.part + (((size_t)b * P.n_heads + h) * P.max_splits) * (size_t)(hd + 2);
    float *o = P.out + (size_t)b * P.ldo + (size_t)h * hd;
    if (ns <= ATT_COMBINE_REG) { /* the same loop with every load issued first */
        for (int d = threadIdx.x; d < hd; d += blockDim.x) {
            float mv[ATT_COMBINE_REG], lv[ATT_COMBINE_REG], av[ATT_COMBINE_REG];
#pragma unroll
            for (int s = 0; s < ATT_COMBINE_REG; s++) {
                const float *ps = p0 + (size_t)s * (hd + 2);
                mv[s] = s < ns ? ps[0] : 0.0f;
                lv[s] = s < ns ? ps[1] : 0.0f;
                av[s] = s < ns ? ps[2 + d] : 0.0f;
            }
            float M = mv[0], L = lv[0], a = av[0];
#pragma unroll
            for (int s = 1; s < ATT_COMBINE_REG; s++) {
                if (s < ns) {
                    float mi = mv[s], mn = fmaxf(M, mi);
                    float c1 = dev_exp(P.fast, M - mn), c2 = dev_exp(P.fast, mi - mn);
                    L = __fadd_rn(__fmul_rn(L, c1), __fmul_rn(lv[s], c2));
                    a = __fadd_rn(__fmul_rn(a, c1), __fmul_rn(av[s], c2));
                    M = mn;
                }
            }
            o[d] = __fmul_rn(a, __fdiv_rn(1.0f, L));
        }
        return;
    }
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float M = p0[0], L = p0[1], a = p0[2 + d];
        for (int s = 1; s < ns; s++) {
            const float *ps = p0 + (size_t)s * (hd + 2);
            float mi = ps[0], mn = fmaxf(M, mi);
            float c1 = dev_exp(P.fast, M - mn), c2 = dev_exp(P.fast, mi - mn);
            L = __fadd_rn(__fmul_rn(L, c1), __fmul_rn(ps[1], c2));
            a = __fadd_rn(__fmul_rn(a, c1), __fmul_rn(ps[2 + d], c2));
            M = mn;
        }
        o[d] = __fmul_rn(a, __fdiv_rn(1.0f, L));
    }
}

size_t dcu_attn_part_floats(int B, int n_heads, int head_dim, int chunk, int max_npos) {
    size_t splits = (size_t)((max_npos + chunk - 1) / chunk);
    if (splits <= 1) return 0;
    return (size_t)B * (size_t)n_heads * splits * (size_t)(head_dim + 2);
}

drift_status dcu_launch_attention(dcu_ctx *c, const dcu_attn_args *a, int B, drift_error *err) {
    if (B <= 0) return DRIFT_OK;
    if (a->head_dim > ATT_MAX_PER_THREAD * ATT_THREADS || a->n_heads > 65535 || a->chunk < 1 || a->n_kvh < 1 ||
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
    P.layer = a->layer;
    P.n_heads = a->n_heads;
    P.n_kvh = a->n_kvh;
    P.hd = a->head_dim;
    P.window = a->window;
    P.kvfmt = a->kvfmt;
    P.fast = a->fast_exp;
    P.chunk = a->chunk;
    P.max_splits = max_splits;
    P.direct = max_splits == 1;
    P.vb = a->vb;
    P.scale = a->scale;
    size_t smem = (size_t)(a->head_dim + 3 * ATT_TILE) * sizeof(float);
    size_t smem_st = (size_t)(a->head_dim + ATT_TILE + 2 * ATT_TILE * a->head_dim) * sizeof(float);
    bool staged = a->head_dim <= ATT_STAGED_MAX_HD; /* smem_st <= 41.6 KB: no opt-in needed */
    size_t per_row = (size_t)a->n_heads * (size_t)max_splits * (size_t)(a->head_dim + 2);
    int slice = 65535;
    if (!P.direct) {
        size_t fit = a->part ? a->part_floats / per_row : 0;
        if (fit < 1)
            return drift_error_set(err, DRIFT_ERR_INTERNAL, "cuda: attention workspace of %zu floats < %zu",
                                   a->part_floats, per_row);
        if (fit < (size_t)slice) slice = (int)fit;
    }
    for (int b0 = 0; b0 < B; b0 += slice) {
        int nb = B - b0 < slice ? B - b0 : slice;
        att_k S = P;
        S.q += (size_t)b0 * P.ldq;
        S.out += (size_t)b0 * P.ldo;
        S.rows += b0;
        dim3 g1((unsigned)max_splits, (unsigned)a->n_heads, (unsigned)nb);
        if (staged) {
            switch (a->kvfmt) {
            case DRIFT_DTYPE_F16: k_attn_part_st<DRIFT_DTYPE_F16><<<g1, ATT_THREADS, smem_st, c->st>>>(S); break;
            case DRIFT_DTYPE_BF16: k_attn_part_st<DRIFT_DTYPE_BF16><<<g1, ATT_THREADS, smem_st, c->st>>>(S); break;
            case DRIFT_DTYPE_FP8_E4M3:
                k_attn_part_st<DRIFT_DTYPE_FP8_E4M3><<<g1, ATT_THREADS, smem_st, c->st>>>(S);
                break;
            case DRIFT_DTYPE_FP8_E5M2:
                k_attn_part_st<DRIFT_DTYPE_FP8_E5M2><<<g1, ATT_THREADS, smem_st, c->st>>>(S);
                break;
            default: k_attn_part_st<DRIFT_DTYPE_F32><<<g1, ATT_THREADS, smem_st, c->st>>>(S); break;
            }
        } else {
            k_attn_part<<<g1, ATT_THREADS, smem, c->st>>>(S);
        }
        DCU_LAUNCHED("attention kernel");
        if (!P.direct) {
            dim3 g2((unsigned)a->n_heads, (unsigned)nb);
            k_attn_combine<<<g2, ATT_THREADS, 0, c->st>>>(S);
            DCU_LAUNCHED("attention combine kernel");
        }
    }
    return DRIFT_OK;
}

/* ------------------------------------------------------------------- MoE */
__global__ void k_scatter(const float *src, float *slot, const int *who, int64_t D) {
    int r = blockIdx.x;
    const float *s = src + (size_t)r * D;
    float *d = slot + (size_t)who[r] * D;
    for (int64_t i = threadIdx.x; i < D; i += blockDim.x) d[i] = s[i];
}

drift_status dcu_launch_scatter(dcu_ctx *c, const float *src, float *slot, const int *who, int cnt, int D,
                                drift_error *err) {
    for (int r0 = 0; r0 < cnt; r0 += 65535) {
        int nr = cnt - r0 < 65535 ? cnt - r0 : 65535;
        k_scatter<<<nr, DCU_ROWT, 0, c->st>>>(src + (size_t)r0 * D, slot, who + r0, D);
        DCU_LAUNCHED("MoE scatter kernel");
    }
    return DRIFT_OK;
}

/* out[b][d] = sum_k wt[b][k] * slot[b][k][d], k in order, multiply then add
 * (as the CPU's loop) */
__global__ void k_moe_sum(const float *slot, const float *wt, float *out, int K, int64_t D) {
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
        k_moe_sum<<<nb, DCU_ROWT, 0, c->st>>>(slot + (size_t)b0 * K * D, wt + (size_t)b0 * K, out + (size_t)b0 * D,
                                              K, D);
        DCU_LAUNCHED("MoE sum kernel");
    }
    return DRIFT_OK;
}

/* --------------------------------------------------------------- softmax */
__global__ void __launch_bounds__(DCU_ROWT) k_softmax(int fast, float *x, int64_t n) {
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
        k_softmax<<<(unsigned)nr, DCU_ROWT, 0, c->st>>>(fast_exp, x + (size_t)r0 * n, n);
        DCU_LAUNCHED("softmax kernel");
    }
    return DRIFT_OK;
}
