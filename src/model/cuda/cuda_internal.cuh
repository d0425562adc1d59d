/* cuda_internal.cuh - internals shared by the CUDA backend's sources.
 *
 *   cuda_kernels.cu  row kernels (embedding, act rounding, rmsnorm, bias +
 *                    RoPE + KV store, SwiGLU, MoE gather / combine,
 *                    softmax) and their launchers
 *   cuda_attn.cu     split-KV attention's launcher; its kernels are in
 *                    cuda_attn.cuh, instantiated per KV format by
 *                    cuda_attn_<format>.cu
 *   cuda_matmul.cu   the matrix products: SIMT dequantize-in-kernel, WMMA
 *                    tensor cores, cuBLAS / cuBLASLt (gemm=vendor)
 *   cuda_backend.cu  the C interface of cuda_backend.h: devices, uploads,
 *                    KV caches, the forward pass, single ops, benchmarks
 *
 * Device data:
 *   dmat  a weight matrix on the device in its own format. f16/bf16 rows are
 *         padded with zeros to kp = K rounded up to 16 columns and to np =
 *         N rounded up to 16 rows (so tensor-core tiles never read past the
 *         end); other formats keep the host row layout (ld = row bytes).
 *   dact  a matmul input after act() rounding: f (rows, K) the rounded f32
 *         values (every path can use them); h (rows padded to 16, kp) the
 *         same values as bf16/f16 bits with zero padding (tensor cores,
 *         cublasGemmEx); q (rows, K) fp8 e4m3 codes with qs (rows) the
 *         per-row scale (cuBLASLt fp8). h and q are NULL when unused.
 *   drow  one forward row: its session's KV cache, position and token.
 *
 * Every value the host C code computes bit-exactly (deq() of each format,
 * act() rounding, KV vectors) is computed here by a port of the same
 * integer / IEEE operations (numerics.c), with __fmul_rn / __fdiv_rn where a
 * contraction into an FMA would change a rounding. */
#ifndef DRIFT_MODEL_CUDA_INTERNAL_CUH
#define DRIFT_MODEL_CUDA_INTERNAL_CUH

#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cublas_v2.h>
#include <cublasLt.h>
#include <stddef.h>
#include <stdint.h>
#include <vector>

extern "C" {
#include "model/numerics.h"
}
#include "model/cuda/cuda_backend.h"

/* ------------------------------------------------------------------ data */

struct dmat {
    int dt;               /* drift_dtype */
    int64_t rows, cols;   /* N, K */
    int64_t np, kp;       /* f16/bf16: rows, cols padded to 16; else rows, cols */
    size_t ld;            /* bytes per row on the device */
    const uint8_t *data;  /* (np, ld) */
    const float *scales;  /* (rows, gpr) or NULL */
    int gpr;              /* scales per row (0 without scales) */
    int group;            /* elements per scale */
    float ts;             /* tensor scale (fp8 per tensor, nvfp4); 1 otherwise */
};

struct dact {
    float *f;             /* (rows, K) */
    uint16_t *h;          /* (rows padded to 16, kp16(K)) or NULL */
    uint8_t *q;           /* (rows, K) or NULL */
    float *qs;            /* (rows) with q */
};

struct drow {
    uint8_t *kc, *vc;     /* the session's caches (n_layers, n_ctx, n_kv_heads, vb) */
    int pos, tok, n_ctx, pad;
};

/* What a matmul input must hold besides f. */
enum { DCU_NEED_H = 1, DCU_NEED_Q = 2 };

/* How one matrix product runs. */
enum dcu_path { DCU_PATH_SIMT, DCU_PATH_WMMA, DCU_PATH_SGEMM, DCU_PATH_GEMMEX, DCU_PATH_LT };

/* Which product of the forward pass the next dcu_mm calls are (the forward
 * pass sets dcu_ctx.mm_tag; DCU_MM_OTHER elsewhere): per-product launch
 * choices of the batch-1 matvec, DRIFT_CUDA_TC_STAGES and DRIFT_CUDA_EARLY
 * (cuda_matmul.cu, tc_stages). Scheduling only: the same bits. */
enum dcu_mm_tag { DCU_MM_OTHER, DCU_MM_QKV, DCU_MM_WO, DCU_MM_GU, DCU_MM_DOWN, DCU_MM_HEAD, DCU_MM_NTAGS };

/* Per model (or the single-op context): the stream and library handles. */
struct dcu_lt_algo {
    int64_t n, b, k, ldy;
    cublasLtMatmulAlgo_t algo;
    int valid;            /* 0 free, 1 algo, 2 no algorithm (use the kernels) */
};

struct dcu_ctx {
    cudaStream_t st;
    cublasHandle_t blas;
    cublasLtHandle_t lt;
    void *lt_ws;          /* cuBLASLt workspace */
    size_t lt_ws_bytes;
    int sm_count;
    dcu_lt_algo lt_cache[32];
    int lt_next;
    int mm_tag;           /* dcu_mm_tag */
};

static inline __host__ __device__ int64_t dcu_pad16(int64_t n) { return (n + 15) / 16 * 16; }

/* Error helpers: CUDA / cuBLAS status -> drift_error. */
drift_status dcu_fail(drift_error *err, cudaError_t e, const char *what);
drift_status dcu_blas_fail(drift_error *err, cublasStatus_t s, const char *what);
#define DCU_TRY(expr, what)                                                                        \
    do {                                                                                           \
        cudaError_t e_ = (expr);                                                                   \
        if (e_ != cudaSuccess) return dcu_fail(err, e_, what);                                     \
    } while (0)
#define DCU_TRY_BLAS(expr, what)                                                                   \
    do {                                                                                           \
        cublasStatus_t s_ = (expr);                                                                \
        if (s_ != CUBLAS_STATUS_SUCCESS) return dcu_blas_fail(err, s_, what);                      \
    } while (0)
/* After a kernel launch. */
#define DCU_LAUNCHED(what) DCU_TRY(cudaGetLastError(), what)

/* Programmatic dependent launch (sm_90): every kernel of the backend is
 * launched through dcu_launch, which lets it start while the previous
 * kernel on the stream drains, unless DRIFT_CUDA_PDL=0 is in the environment
 * (read once). Every kernel calls dcu_pdl_wait() before it reads or writes
 * anything a kernel of the pass writes (before it, only what no kernel of
 * the pass writes may be read: weights, the rows uploaded before the pass,
 * KV cache positions stored by earlier passes) and dcu_pdl_trigger() to let
 * the next one start. What the previous kernels wrote is read with ordinary
 * loads, never __ldg: the wait makes their writes visible to those only
 * (cuda_matmul.cu). */
int dcu_pdl_on(void);
/* The fused launches (attention of one block per row and head group writing
 * the next matmul's input, SwiGLU in the gate|up product's epilogue): on
 * unless DRIFT_CUDA_FUSE=0 (read once). Same results either way. */
int dcu_fuse_on(void);
/* A switch that is on unless the environment variable name is "0" (read
 * at each call: the callers cache it). */
int dcu_env_not_zero(const char *name);
template <typename... KArgs, typename... Args>
static inline void dcu_launch(void (*k)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t st,
                              Args... args) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = st;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = dcu_pdl_on() ? 1 : 0;
    (void)cudaLaunchKernelEx(&cfg, k, args...); /* an error stays for DCU_LAUNCHED */
}

/* Creates / destroys a context (stream, cuBLAS, cuBLASLt, Lt workspace). */
drift_status dcu_ctx_init(dcu_ctx *c, drift_error *err);

/* Device allocations freed together (a model's weights; an op's buffers). */
struct dcu_allocs {
    std::vector<void *> v;
    ~dcu_allocs() { release(); }
    void release() {
        for (void *p : v) cudaFree(p);
        v.clear();
    }
    drift_status get(size_t bytes, void **out, const char *what, drift_error *err) {
        *out = NULL;
        void *p = NULL;
        cudaError_t e = cudaMalloc(&p, bytes ? bytes : 16);
        if (e != cudaSuccess) {
            cudaGetLastError();
            return drift_error_set(err, e == cudaErrorMemoryAllocation ? DRIFT_ERR_NOMEM : DRIFT_ERR_INTERNAL,
                                   "cuda: allocating %zu bytes for %s (%s)", bytes, what, cudaGetErrorString(e));
        }
        try {
            v.push_back(p);
        } catch (...) {
            cudaFree(p);
            return drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
        }
        *out = p;
        return DRIFT_OK;
    }
};

/* cuda_backend.cu's helpers that the single ops (cuda_ops.cu) share. */
drift_status dcu_check_profile(const drift_numeric_profile *p, drift_error *err);
drift_status dcu_act_alloc(dcu_allocs *al, int rows, int64_t K, unsigned needs, dact *a, drift_error *err);
drift_status dcu_upload_mats(dcu_allocs *al, const num_qmat *const *ms, int n, dmat *out, drift_error *err);
drift_status dcu_upload_freqs(dcu_allocs *al, const num_rope_params *rp, const double **out, drift_error *err);
int dcu_attn_chunk(const drift_numeric_profile *p, int B, int n_heads, int max_npos, int sm_count);
void dcu_ctx_destroy(dcu_ctx *c);

/* ------------------------------------------------------------ launchers */
/* All asynchronous on c->st; pointers are device pointers. */

/* The path of W under p, and what its input must hold (DCU_NEED_*). */
dcu_path dcu_mm_path(const drift_numeric_profile *p, const dmat *W);
unsigned dcu_mm_needs(const drift_numeric_profile *p, const dmat *W);
/* y (B, ldy) columns [0, N) = act(x) (B, K) @ W^T. x prepared (dcu_launch_prep
 * or the fused row kernels) with at least dcu_mm_needs(p, W). */
drift_status dcu_mm(dcu_ctx *c, const drift_numeric_profile *p, const dmat *W, const dact *x, int64_t B,
                    float *y, int64_t ldy, drift_error *err);

/* out (B, H) = act(silu(gate) * up) as dcu_launch_swiglu makes it (f, and
 * h with DCU_NEED_H), where gate | up = act(x) @ W^T (W: 2H rows, gate over
 * up) is not materialised: one launch, the same values. *done = 0 (nothing
 * launched) where it does not apply: batches over 16, other paths, fp8
 * acts, H % 16 != 0, DRIFT_CUDA_FUSE=0. */
drift_status dcu_mm_swiglu(dcu_ctx *c, const drift_numeric_profile *p, const dmat *W, const dact *x, int64_t B,
                           int64_t H, const dact *out, unsigned needs, int *done, drift_error *err);

/* x (B, dim) = act(deq(E[rows[b].tok])) (tok from rows, or toks when non-NULL). */
drift_status dcu_launch_embed(dcu_ctx *c, int acts, const dmat *E, const drow *rows, const int *toks, int B,
                              float *x, drift_error *err);
/* Per row of x (B, n): if r: x = act(x + r); then
 *   y = rmsnorm(x) * w -> hidden (when non-NULL), and -> a prepared for a
 *   matmul (a.f non-NULL; needs: DCU_NEED_*). rows_pad: rows of a.h to fill
 *   (B rounded up to 16 when h is written). */
drift_status dcu_launch_norm(dcu_ctx *c, int acts, float *x, const float *r, int B, int n, const float *w, float eps,
                             float *hidden, const dact *a, unsigned needs, drift_error *err);
/* a (n_out, K) = act(in[idx[o]]) (idx NULL: row o). */
drift_status dcu_launch_prep(dcu_ctx *c, int acts, const float *in, int64_t ldin, const int *idx, int n_out, int K,
                             const dact *a, unsigned needs, drift_error *err);
/* dst row o = src row idx[o] of a prepared input (every present part). */
drift_status dcu_launch_gather(dcu_ctx *c, const dact *src, const dact *dst, const int *idx, int n_out, int K,
                               unsigned needs, drift_error *err);
/* a (B, n) = act(silu(gate) * up) (acts F32: no rounding). */
drift_status dcu_launch_swiglu(dcu_ctx *c, int acts, int fast_exp, const float *gate, const float *up, int64_t ld,
                               int B, int n, const dact *a, unsigned needs, drift_error *err);

/* Bias + RoPE on q and k, K/V into the caches (layer). q, k, v rows of
 * stride ldq/ldk/ldv floats; n_kvh = 0 rotates q only (the rope op). */
struct dcu_qkv_args {
    float *q, *k, *v;
    int64_t ldq, ldk, ldv;
    const float *bq, *bk, *bv;
    const double *freq;   /* (n_rot / 2) */
    int n_heads, n_kvh, head_dim, n_rot, neox;
    const drow *rows;
    int layer, kvfmt;
    size_t vb;
};
drift_status dcu_launch_qkv(dcu_ctx *c, const dcu_qkv_args *a, int B, drift_error *err);

/* Split-KV attention of B rows over their caches. */
struct dcu_attn_args {
    const float *q;
    int64_t ldq;
    float *out;
    int64_t ldo;
    const drow *rows;
    int layer, n_heads, n_kvh, head_dim, window, kvfmt, fast_exp;
    size_t vb;
    float scale;
    int chunk;            /* positions per split */
    int max_npos;         /* largest n_pos of the batch (host knows it) */
    float *part;          /* workspace, part_floats floats */
    size_t part_floats;
    unsigned *cnt;        /* (cnt_rows, n_heads) split counters, zero (kept zero between launches) */
    size_t cnt_rows;
    /* oa non-NULL: the output goes to oa as a prepared matmul input (what
     * dcu_launch_prep(oacts, out rows, ..., oneeds) would make of it; acts
     * not fp8, no DCU_NEED_Q) and out / ldo are not used */
    const dact *oa;
    int oacts;
    unsigned oneeds;
    /* qkv non-NULL: q, k, v are the q|k|v product as is, and the launcher
     * does dcu_launch_qkv(qkv)'s work first: inside the attention kernel
     * where one block serves a row (one row, the rotation's pairs within
     * the block's threads), else as its own launch. q must be qkv->q. */
    const dcu_qkv_args *qkv;
};
/* Floats of workspace attention needs for B rows (a bound; the launcher
 * slices the batch when the workspace or the counters are smaller). Rows of
 * more than one split need both. */
size_t dcu_attn_part_floats(int B, int n_heads, int head_dim, int chunk, int max_npos);
drift_status dcu_launch_attention(dcu_ctx *c, const dcu_attn_args *a, int B, drift_error *err);

/* slot[who[r]] (D) = src row r, r < cnt. */
drift_status dcu_launch_scatter(dcu_ctx *c, const float *src, float *slot, const int *who, int cnt, int D,
                                drift_error *err);
/* out (B, D) = sum_k wt[b][k] * slot[b][k] in k order. */
drift_status dcu_launch_moe_sum(dcu_ctx *c, const float *slot, const float *wt, float *out, int B, int K, int D,
                                drift_error *err);
/* Router top-k of B rows of logits rl (B, E) as moe_ffn: sel (B, K) expert
 * ids, wt (B, K) renormalised weights. K <= DCU_MOE_KMAX. */
#define DCU_MOE_KMAX 64
drift_status dcu_launch_moe_route(dcu_ctx *c, const float *rl, int B, int E, int K, int *sel, float *wt,
                                  drift_error *err);
/* out (B, D) = sum_k wt[b][k] * ye[sel[b][k]] row b, k in order (ye: every
 * expert's output for every row, (E, B, D)). */
drift_status dcu_launch_moe_comb(dcu_ctx *c, const float *ye, const int *sel, const float *wt, float *out, int B,
                                 int K, int D, drift_error *err);
/* x (rows, n) <- softmax in place. */
drift_status dcu_launch_softmax(dcu_ctx *c, int fast_exp, float *x, int64_t rows, int64_t n, drift_error *err);
/* out[r] (device ints) = the host argmax's pick in row r of x (rows of n):
 * the first index of the largest value, NaN never chosen unless x[0] is
 * NaN (then 0), as sampler.c's greedy choice. */
drift_status dcu_launch_argmax(dcu_ctx *c, const float *x, int64_t rows, int64_t n, int *out, drift_error *err);
/* KV vectors: dst (n_vec, vb) <- src (n_vec, n); dst (n_vec, n) <- src (n_vec, vb). */
drift_status dcu_launch_kv_store(dcu_ctx *c, int fmt, uint8_t *dst, const float *src, int n_vec, int n,
                                 drift_error *err);
drift_status dcu_launch_kv_load(dcu_ctx *c, int fmt, float *dst, const uint8_t *src, int n_vec, int n,
                                drift_error *err);

/* ======================================================================
 * Device helpers (header-only; each .cu compiles its own copy)
 * ==================================================================== */
#ifdef __CUDACC__

#define DCU_ROWT 256 /* threads of the per-row kernels */

#ifdef DCU_TRACE
#include <stdio.h>
#include <stdlib.h>
/* DCU_TRACE (cmake -DDRIFT_CUDA_TRACE=ON; for measuring only, the pass
 * runs slower): while dcu_tr_on is set, thread 0 of every block
 * stamps %globaltimer into its translation unit's buffer at its kernel's
 * start (kind 0, in dcu_pdl_trigger), at each return of dcu_pdl_wait (1),
 * at exit (2, kernels that declare DCU_TR_EXIT) and where a product kernel's
 * warps have their weights multiplied (3). dcu_forward traces one pass of
 * one row (DRIFT_CUDA_TRACE_OUT, DRIFT_CUDA_TRACE_AT); bench/cuda_trace.py
 * reads the file. */
struct dcu_trec {
    unsigned long long t;
    unsigned grid, blk, nthr, sm_kind;
};
#define DCU_TR_CAP (1u << 20)
static __device__ dcu_trec dcu_tr_buf[DCU_TR_CAP];
static __device__ unsigned dcu_tr_n;
static __device__ int dcu_tr_on;
static __device__ __forceinline__ void dcu_tr(unsigned kind) {
    if (!*(volatile int *)&dcu_tr_on || (threadIdx.x | threadIdx.y | threadIdx.z)) return;
    unsigned long long t;
    unsigned sm;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    unsigned i = atomicAdd(&dcu_tr_n, 1u);
    if (i >= DCU_TR_CAP) return;
    dcu_trec r;
    r.t = t;
    r.grid = gridDim.x * gridDim.y * gridDim.z;
    r.blk = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    r.nthr = blockDim.x * blockDim.y * blockDim.z;
    r.sm_kind = sm | kind << 16;
    dcu_tr_buf[i] = r;
}
/* the host side, one per translation unit (name, unit tag): op 0 clears the
 * buffer and starts, op 1 stops and appends the records to f (NULL: none),
 * a line each "t kind grid block threads sm unit"; returns the records
 * taken, -1 on a CUDA or allocation failure */
#define DCU_TRACE_HOST(name, tu)                                                                   \
    extern "C" int name(int op, FILE *f) {                                                         \
        int on = op == 0;                                                                          \
        unsigned n = 0;                                                                            \
        if ((op == 0 && cudaMemcpyToSymbol(dcu_tr_n, &n, sizeof n) != cudaSuccess) ||              \
            cudaMemcpyToSymbol(dcu_tr_on, &on, sizeof on) != cudaSuccess)                          \
            return -1;                                                                             \
        if (op == 0) return 0;                                                                     \
        if (cudaMemcpyFromSymbol(&n, dcu_tr_n, sizeof n) != cudaSuccess) return -1;                \
        if (n > DCU_TR_CAP) n = DCU_TR_CAP;                                                        \
        dcu_trec *h = (dcu_trec *)malloc((size_t)n * sizeof *h + 1);                               \
        if (!h) return -1;                                                                         \
        if (cudaMemcpyFromSymbol(h, dcu_tr_buf, (size_t)n * sizeof *h) != cudaSuccess) {           \
            free(h);                                                                               \
            return -1;                                                                             \
        }                                                                                          \
        for (unsigned i = 0; f && i < n; i++)                                                      \
            fprintf(f, "%llu %u %u %u %u %u %s\n", h[i].t, h[i].sm_kind >> 16, h[i].grid, h[i].blk,  \
                    h[i].nthr, h[i].sm_kind & 0xffffu, tu);                                        \
        free(h);                                                                                   \
        return (int)n;                                                                             \
    }
/* a block's exit (kind 2), at any return of the kernel that declares it */
struct dcu_tr_exit {
    __device__ ~dcu_tr_exit() { dcu_tr(2); }
};
#define DCU_TR_EXIT() dcu_tr_exit tr_exit_
#else
#define dcu_tr(kind) ((void)0)
#define DCU_TR_EXIT() ((void)0)
#endif

/* dcu_launch's two halves on the device (no-ops without a dependency) */
static __device__ __forceinline__ void dcu_pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
    dcu_tr(1);
}
static __device__ __forceinline__ void dcu_pdl_trigger() {
    dcu_tr(0);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
#define DCU_PDL_ENTER() (dcu_pdl_trigger(), dcu_pdl_wait())

static __device__ __forceinline__ float dcu_bf16_f32(uint32_t h) { return __uint_as_float(h << 16); }

/* num_f32_to_bf16: RNE; NaN stays a quiet NaN */
static __device__ __forceinline__ uint16_t dcu_f32_bf16(float f) {
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* num_f32_to_f16 */
static __device__ __forceinline__ uint16_t dcu_f32_f16(float f) {
    uint32_t x = __float_as_uint(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
    if (ax >= 0x38800000u) {
        uint32_t m = ax + 0xfffu + ((ax >> 13) & 1u);
        return (uint16_t)(sign | ((m - 0x38000000u) >> 13));
    }
    float a = __fmul_rn(__uint_as_float(ax), 0x1p24f);
    return (uint16_t)(sign | (uint32_t)rintf(a));
}

/* num_f16_to_f32, NaN payloads included */
static __device__ __forceinline__ float dcu_f16_f32(uint32_t h) {
    uint32_t sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) {
        float v = __fmul_rn((float)m, 0x1p-24f);
        return (h & 0x8000u) ? -v : v;
    }
    if (e == 31) return __uint_as_float(sign | 0x7f800000u | (m << 13));
    return __uint_as_float(sign | ((e + 112u) << 23) | (m << 13));
}

/* Decoders equal to numerics.c's tables (NaN as C's NAN). */
static __device__ __forceinline__ float dcu_e4m3_f32(uint32_t c) {
    uint32_t mag = c & 0x7fu;
    if (mag == 0x7fu) return __uint_as_float(0x7fc00000u);
    uint32_t ef = mag >> 3, m = mag & 7u;
    float v = ef == 0 ? __fmul_rn((float)m, 0x1p-9f) : __uint_as_float(((ef + 120u) << 23) | (m << 20));
    return (c & 0x80u) ? -v : v;
}

static __device__ __forceinline__ float dcu_e5m2_f32(uint32_t c) {
    uint32_t mag = c & 0x7fu;
    if (mag == 0x7eu) return __uint_as_float(0x7fc00000u);
    float v;
    if (mag >= 0x7cu) {
        v = mag == 0x7cu ? __uint_as_float(0x7f800000u) : __uint_as_float(0x7fc00000u);
    } else {
        uint32_t ef = mag >> 2, m = mag & 3u;
        v = ef == 0 ? __fmul_rn((float)m, 0x1p-16f) : __uint_as_float(((ef + 112u) << 23) | (m << 21));
    }
    return (c & 0x80u) ? -v : v;
}

/* e2m1 code (low 4 bits) -> {0, .5, 1, 1.5, 2, 3, 4, 6} with sign */
static __device__ __forceinline__ float dcu_e2m1_f32(uint32_t c) {
    uint32_t mag = c & 7u;
    uint32_t bits = mag >= 2u ? ((((mag >> 1) + 126u) << 23) | ((mag & 1u) << 22)) : (mag ? 0x3f000000u : 0u);
    return __uint_as_float(bits | ((c & 8u) << 28));
}

static __device__ __forceinline__ float dcu_e8m0_f32(uint32_t e) {
    if (e == 0xffu) return __uint_as_float(0x7fc00000u);
    return e == 0 ? __uint_as_float(0x00400000u) : __uint_as_float(e << 23);
}

/* minifloat_encode of numerics.c, same operations */
template <int EB, int MB, int BIAS, bool SAT, uint32_t MAXC, uint32_t NANC, uint32_t INFC>
static __device__ __forceinline__ uint8_t dcu_mf_encode(float f) {
    uint32_t u = __float_as_uint(f);
    uint32_t sign = (u >> 31) ? (1u << (EB + MB)) : 0u;
    if ((u & 0x7fffffffu) > 0x7f800000u) return NANC == 0 ? (uint8_t)0 : (uint8_t)(sign | NANC);
    float a = fabsf(f);
    if ((u & 0x7fffffffu) == 0x7f800000u) return (uint8_t)(sign | (SAT ? MAXC : INFC));
    const int emin = 1 - BIAS;
    int e;
    frexpf(a, &e);
    e -= 1;
    uint32_t code;
    if (a == 0.0f) {
        code = 0;
    } else if (e < emin) {
        float q = rintf(ldexpf(a, MB - emin));
        code = (uint32_t)q;
    } else {
        float q = rintf(ldexpf(a, MB - e));
        uint32_t qi = (uint32_t)q;
        if (qi == (1u << (MB + 1))) {
            e += 1;
            qi = 1u << MB;
        }
        int ef = e + BIAS;
        if (ef >= (1 << EB)) code = 0xffffu;
        else code = ((uint32_t)ef << MB) | (qi - (1u << MB));
    }
    if (code > MAXC) code = SAT ? MAXC : INFC;
    return (uint8_t)(sign | code);
}

static __device__ __forceinline__ uint8_t dcu_f32_e4m3(float f) {
    return dcu_mf_encode<4, 3, 7, true, 0x7eu, 0x7fu, 0u>(f);
}
static __device__ __forceinline__ uint8_t dcu_f32_e5m2(float f) {
    return dcu_mf_encode<5, 2, 15, false, 0x7bu, 0x7eu, 0x7cu>(f);
}

static __device__ __forceinline__ float dcu_fp8_max(int t) {
    return t == DRIFT_DTYPE_FP8_E4M3 ? 448.0f : 57344.0f;
}

/* One fp8 value through its code with scale s (s > 0 finite): fp8(x / s) * s. */
static __device__ __forceinline__ float dcu_fp8_round(int t, float x, float s, uint8_t *code) {
    float y = __fdiv_rn(x, s);
    uint8_t c = t == DRIFT_DTYPE_FP8_E4M3 ? dcu_f32_e4m3(y) : dcu_f32_e5m2(y);
    *code = c;
    float d = t == DRIFT_DTYPE_FP8_E4M3 ? dcu_e4m3_f32(c) : dcu_e5m2_f32(c);
    return __fmul_rn(d, s);
}

/* Element k of row r of W, as num_qmat_dequantize_row gives it. */
static __device__ float dcu_deq_elem(const dmat &W, int64_t r, int64_t k) {
    const uint8_t *row = W.data + (size_t)r * W.ld;
    switch (W.dt) {
    case DRIFT_DTYPE_F32: return ((const float *)row)[k];
    case DRIFT_DTYPE_F16: return dcu_f16_f32(((const uint16_t *)row)[k]);
    case DRIFT_DTYPE_BF16: return dcu_bf16_f32(((const uint16_t *)row)[k]);
    case DRIFT_DTYPE_FP8_E4M3:
    case DRIFT_DTYPE_FP8_E5M2: {
        float s = W.scales ? __fmul_rn(W.scales[r * W.gpr + k / W.group], W.ts) : W.ts;
        float v = W.dt == DRIFT_DTYPE_FP8_E4M3 ? dcu_e4m3_f32(row[k]) : dcu_e5m2_f32(row[k]);
        return __fmul_rn(v, s);
    }
    case DRIFT_DTYPE_INT8: return __fmul_rn((float)(int8_t)row[k], W.scales[r * W.gpr + k / W.group]);
    case DRIFT_DTYPE_INT4: {
        uint32_t byte = row[k / 2];
        int nib = (k & 1) ? (int)(byte >> 4) : (int)(byte & 15u);
        return __fmul_rn((float)(nib - 8), W.scales[r * W.gpr + k / W.group]);
    }
    case DRIFT_DTYPE_MXFP4: {
        const uint8_t *b = row + (size_t)(k / 32) * 17;
        int j = (int)(k % 32);
        uint32_t q = b[1 + (j & 15)];
        return __fmul_rn(dcu_e2m1_f32(j < 16 ? q & 15u : q >> 4), dcu_e8m0_f32(b[0]));
    }
    case DRIFT_DTYPE_NVFP4: {
        const uint8_t *b = row + (size_t)(k / 16) * 9;
        int j = (int)(k % 16);
        uint32_t q = b[1 + (j & 7)];
        float s = __fmul_rn(dcu_e4m3_f32(b[0]), W.ts);
        return __fmul_rn(dcu_e2m1_f32(j < 8 ? q & 15u : q >> 4), s);
    }
    case DRIFT_DTYPE_Q8_0: {
        const uint8_t *b = row + (size_t)(k / 32) * 34;
        float d = dcu_f16_f32((uint32_t)b[0] | ((uint32_t)b[1] << 8));
        return __fmul_rn((float)(int8_t)b[2 + k % 32], d);
    }
    case DRIFT_DTYPE_Q4_0: {
        const uint8_t *b = row + (size_t)(k / 32) * 18;
        float d = dcu_f16_f32((uint32_t)b[0] | ((uint32_t)b[1] << 8));
        int j = (int)(k % 32);
        uint32_t q = b[2 + (j & 15)];
        int nib = j < 16 ? (int)(q & 15u) : (int)(q >> 4);
        return __fmul_rn((float)(nib - 8), d);
    }
    default: return 0.0f;
    }
}

/* exp of the profile (exp=fast: __expf) */
static __device__ __forceinline__ float dcu_exp(int fast, float x) { return fast ? __expf(x) : expf(x); }

/* act() rounding of one element (num_round_acts); its bf16/f16 copy to *h,
 * its fp8 code to *q (either may be NULL; fp8: s the row's scale, ok
 * whether it is usable) */
static __device__ __forceinline__ float dcu_prep_elem(int acts, float v, float s, bool ok, uint16_t *h, uint8_t *q) {
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

/* SwiGLU of one element, as k_swiglu: silu(g) * u */
static __device__ __forceinline__ float dcu_swiglu(int fast, float g, float u) {
    return __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, dcu_exp(fast, -g))), u);
}

/* Sum / max over a warp by a fixed xor tree: every lane gets the same
 * value (each step adds a pair in both orders, and + is commutative). */
static __device__ __forceinline__ float dcu_warp_sum(float v) {
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
static __device__ __forceinline__ double dcu_warp_sum(double v) {
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
static __device__ __forceinline__ float dcu_warp_max(float v) {
    for (int o = 16; o; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Block-wide sum / max (blockDim a multiple of 32, <= 1024); every thread
 * gets the result. sm: 32 floats of shared memory. Fixed order. */
static __device__ __forceinline__ float dcu_block_sum(float v, float *sm) {
    int w = threadIdx.x >> 5, l = threadIdx.x & 31, nw = blockDim.x >> 5;
    v = dcu_warp_sum(v);
    __syncthreads();
    if (l == 0) sm[w] = v;
    __syncthreads();
    v = l < nw ? sm[l] : 0.0f;
    return dcu_warp_sum(v);
}
/* ident: the max's identity (0 for an amax, -inf for a plain max) */
static __device__ __forceinline__ float dcu_block_max(float v, float *sm, float ident) {
    int w = threadIdx.x >> 5, l = threadIdx.x & 31, nw = blockDim.x >> 5;
    v = dcu_warp_max(v);
    __syncthreads();
    if (l == 0) sm[w] = v;
    __syncthreads();
    v = l < nw ? sm[l] : ident;
    return dcu_warp_max(v);
}

/* KV vectors (num_kv_store / num_kv_load) and RoPE, shared by k_qkv, the KV
 * kernels (cuda_kernels.cu) and attention (cuda_attn.cuh). */
static __host__ __device__ __forceinline__ bool dcu_is_fp8(int t) {
    return t == DRIFT_DTYPE_FP8_E4M3 || t == DRIFT_DTYPE_FP8_E5M2;
}

/* Stores v (n floats, shared or global) as one KV vector (num_kv_store).
 * Block-cooperative; fmt is block-uniform. */
static __device__ void dcu_kv_store(int fmt, uint8_t *dst, const float *v, int n, float *sm) {
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

static __device__ __forceinline__ float dcu_kv_scale(int fmt, const uint8_t *vec) {
    if (!dcu_is_fp8(fmt)) return 1.0f;
    uint32_t u = (uint32_t)vec[0] | ((uint32_t)vec[1] << 8) | ((uint32_t)vec[2] << 16) | ((uint32_t)vec[3] << 24);
    return __uint_as_float(u);
}

/* element d of a KV vector (num_kv_load); s = dcu_kv_scale(vec) */
static __device__ __forceinline__ float dcu_kv_elem(int fmt, const uint8_t *vec, int d, float s) {
    switch (fmt) {
    case DRIFT_DTYPE_F16: return dcu_f16_f32(((const uint16_t *)vec)[d]);
    case DRIFT_DTYPE_BF16: return dcu_bf16_f32(((const uint16_t *)vec)[d]);
    case DRIFT_DTYPE_FP8_E4M3: return __fmul_rn(dcu_e4m3_f32(vec[4 + d]), s);
    case DRIFT_DTYPE_FP8_E5M2: return __fmul_rn(dcu_e5m2_f32(vec[4 + d]), s);
    default: return ((const float *)vec)[d];
    }
}

/* RoPE of pair i of v (npair = n_rot / 2 pairs: neox, elements i and
 * i + npair, else 2i and 2i + 1) by the angle whose sine and cosine are sn
 * and cs, in double, as num_ref_rope: (float)(x0 c - x1 s), (float)(x0 s + x1 c) */
static __device__ __forceinline__ void dcu_rope_pair(float *v, int i, int npair, int neox, double sn, double cs) {
    const int i0 = neox ? i : 2 * i, i1 = neox ? i + npair : 2 * i + 1;
    const double x0 = v[i0], x1 = v[i1];
    v[i0] = (float)__dsub_rn(__dmul_rn(x0, cs), __dmul_rn(x1, sn));
    v[i1] = (float)__dadd_rn(__dmul_rn(x0, sn), __dmul_rn(x1, cs));
}

#endif /* __CUDACC__ */
#endif
