/* cuda_backend.h - C interface of the embedded engine's CUDA backend (internal).
 *
 * Built only where CMake finds nvcc and (DRIFT_CUDA=AUTO, the default) a GPU
 * (DRIFT_HAVE_CUDA); the sources beside this file (*.cu) implement it.
 * model_load.c and forward.c call it when a profile says backend=cuda: the
 * whole forward pass runs on the GPU, weights uploaded once
 * (dcu_model_upload), each session's KV cache on the device (dcu_kv).
 * Nothing here runs at start-up: the CUDA runtime starts at the first call,
 * and cuBLAS/cuBLASLt are opened when first used (cuda_blas_lazy.c), so a
 * process that opens no cuda profile pays nothing for the backend being
 * built in.
 *
 * Numerics on the GPU follow numerics.h's semantics (act() rounding, deq()
 * of every format, KV formats, RoPE, rmsnorm, SwiGLU, MoE routing), with the
 * GPU's own reduction orders:
 *   gemm=kernel (default): DriftBench's kernels. bf16/f16 weights with acts
 *     of the same 16-bit type go through tensor cores (WMMA, f32 accumulate);
 *     every other format through a dequantize-in-kernel SIMT kernel. The
 *     reduction order over K is fixed by K alone: batch-invariant.
 *   gemm=vendor: cuBLAS (f32 SGEMM without TF32, bf16/f16 GemmEx on tensor
 *     cores) and cuBLASLt fp8 e4m3 x e4m3 (per-row act scale and per-channel
 *     weight scale applied after the product); the library picks algorithms
 *     by shape, so results may depend on the batch size. Formats without a
 *     vendor path use the kernels.
 *   attention: split-KV (flash-decoding): positions cut into splits, each an
 *     online softmax, splits combined in order. batch_invariant=1: the split
 *     size is the profile's attn_block (fixed). batch_invariant=0: the number
 *     of splits is chosen from the batch size to fill the GPU (batch-variant).
 *   accum=f32 (and f64 in the SIMT kernels); accum=bf16 -> UNSUPPORTED.
 * All functions return DRIFT_OK or an error with a message; none prints or
 * exits. Host pointers everywhere in this interface; device memory is
 * private to the backend. */
#ifndef DRIFT_MODEL_CUDA_BACKEND_H
#define DRIFT_MODEL_CUDA_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include "driftbench/profile.h"
#include "driftbench/status.h"
#include "model/numerics.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the run records as its hardware. */
typedef struct dcu_device_info {
    char name[96];           /* "NVIDIA H200" */
    char short_name[32];     /* "h200": lower case, vendor dropped, spaces -> '-' */
    int cc_major, cc_minor;  /* compute capability (9, 0) */
    int driver_version;      /* cudaDriverGetVersion: 13000 = 13.0 */
    int runtime_version;     /* cudaRuntimeGetVersion */
    int sm_count;
    size_t mem_bytes;
} dcu_device_info;

/* Number of usable GPUs (0 when there is no driver or no device; never an
 * error). */
int dcu_device_count(void);

/* Device 0's description. DRIFT_ERR_UNSUPPORTED when there is no GPU. */
drift_status dcu_device_get_info(dcu_device_info *out, drift_error *err);

/* One layer's weights, as model_load.c holds them (host memory, already in
 * the profile's weight format). Dense: w_gate/w_up/w_down set, router and
 * experts NULL. MoE: router (n_experts, dim) and e_* arrays of n_experts. */
typedef struct dcu_layer_desc {
    const float *attn_norm, *ffn_norm;           /* (dim) */
    const num_qmat *wq, *wk, *wv, *wo;
    const float *bq, *bk, *bv;                   /* NULL unless qwen2 */
    const num_qmat *w_gate, *w_up, *w_down;    /* dense FFN or NULL */
    const num_qmat *router;                    /* MoE or NULL */
    const num_qmat *e_gate, *e_up, *e_down;    /* n_experts each, MoE */
} dcu_layer_desc;

typedef struct dcu_model_desc {
    int dim, hidden_dim, n_layers, n_heads, n_kv_heads, head_dim, n_vocab;
    int n_experts, n_experts_used;               /* 0 = dense */
    int sliding_window;                          /* 0 = none */
    float norm_eps;
    num_rope_params rope;                        /* freq_factors: host, may be NULL */
    const num_qmat *tok_embd;                  /* (n_vocab, dim) */
    const num_qmat *output;                    /* (n_vocab, dim); may equal tok_embd */
    const float *output_norm;                    /* (dim) */
    const dcu_layer_desc *layers;                /* (n_layers) */
} dcu_model_desc;

typedef struct dcu_model dcu_model;              /* weights on the device */
typedef struct dcu_kv dcu_kv;                    /* one session's KV cache on the device */

/* Uploads every tensor (in its format) once. The profile is copied. Errors:
 * UNSUPPORTED (no GPU, accum=bf16), NOMEM (device memory), INTERNAL (CUDA
 * error, message has cudaGetErrorString). */
drift_status dcu_model_upload(const dcu_model_desc *d, const drift_numeric_profile *p, dcu_model **out,
                              drift_error *err);
void dcu_model_free(dcu_model *m);               /* NULL-safe */

/* KV cache of n_ctx positions for all layers, in the profile's kv format. */
drift_status dcu_kv_new(dcu_model *m, int n_ctx, dcu_kv **out, drift_error *err);
void dcu_kv_free(dcu_kv *kv);                    /* NULL-safe */

/* B rows: token tok[b] at position pos[b] of cache kv[b] (rows of one session
 * may repeat kv with consecutive positions: a prefill). K/V of every row are
 * written before any row attends, as on the CPU. Outputs (host, may be NULL):
 * hidden (B, dim) the final normed hidden states; logits (n_logit_rows,
 * n_vocab) for the rows listed in logit_rows (e.g. only the last row of a
 * prefill); next (n_logit_rows) the greedy pick of each of those rows (the
 * index samp_pick chooses at temperature 0), computed on the device, so
 * with logits NULL only the picks come back. Validation (token range,
 * positions < n_ctx) is the caller's. */
drift_status dcu_forward(dcu_model *m, dcu_kv *const *kv, const int *pos, const int32_t *tok, int B, float *hidden,
                         float *logits, int32_t *next, const int *logit_rows, int n_logit_rows, drift_error *err);

/* ---- single ops, for tests/ops/test_cuda_ops.c (host in, host out; each
 * call uploads, runs the same device code the forward pass uses, downloads).
 * Same shapes and meaning as the num_* functions of numerics.h. */
drift_status dcu_op_matmul(const drift_numeric_profile *p, float *y, const float *x, const num_qmat *W, int64_t B,
                           drift_error *err);
drift_status dcu_op_rmsnorm(const drift_numeric_profile *p, float *out, const float *x, const float *w, int64_t rows,
                            int64_t n, float eps, drift_error *err);
drift_status dcu_op_softmax(const drift_numeric_profile *p, float *x, int64_t rows, int64_t n, drift_error *err);
/* The greedy pick of each of rows rows of n values (out: rows ints), as
 * dcu_forward's next. */
drift_status dcu_op_argmax(const float *x, int64_t rows, int64_t n, int32_t *out, drift_error *err);
drift_status dcu_op_rope(const drift_numeric_profile *p, float *x, int n_heads, int64_t pos, const num_rope_params *rp,
                         drift_error *err);
drift_status dcu_op_swiglu(const drift_numeric_profile *p, float *out, const float *gate, const float *up, int64_t n,
                           drift_error *err);
/* One query head over n_pos cached vectors k/v (host, KV format p->kv, laid
 * out as num_attention's: vector t at byte offset t * stride_bytes). */
drift_status dcu_op_attention(const drift_numeric_profile *p, float *out, const float *q, const void *k, const void *v,
                              size_t stride_bytes, int n_pos, int head_dim, float scale, drift_error *err);
drift_status dcu_op_embedding(const drift_numeric_profile *p, float *out, const num_qmat *W, int64_t row,
                              drift_error *err);
/* act() rounding of rows x n values in place (num_round_acts on each row):
 * the kernel every matmul input goes through. */
drift_status dcu_op_round_acts(drift_dtype t, float *x, int64_t rows, int64_t n, drift_error *err);
/* n_vec KV vectors of n values in format t: store (num_kv_store; dst holds
 * n_vec * num_kv_bytes(t, n) bytes) and load (num_kv_load), as the forward
 * pass writes and reads its caches. */
drift_status dcu_op_kv_store(drift_dtype t, void *dst, const float *src, int n_vec, int n, drift_error *err);
drift_status dcu_op_kv_load(drift_dtype t, float *dst, const void *src, int n_vec, int n, drift_error *err);

/* Benchmarks (bench/): device-to-device copy of `bytes`, repeated `reps`
 * times; returns GB/s counting bytes read and written. And a bf16 GEMM of
 * n x n x n through cuBLAS; returns TFLOP/s. */
drift_status dcu_bench_copy(size_t bytes, int reps, double *gbps, drift_error *err);
drift_status dcu_bench_gemm(int n, int reps, double *tflops, drift_error *err);
/* cudaProfilerStart (on = 1) / Stop (0): brackets what a profiler started with
 * --profile-from-start off (ncu, nsys) records; bench_cuda uses it */
void dcu_profiler(int on);
/* Where dcu_forward's time goes, summed over the calls since the last reset
 * while DRIFT_CUDA_TIMING=1 is in the environment (read once; otherwise
 * nothing is recorded): out[0] calls, out[1] host ms before the kernels are
 * queued, out[2] GPU ms of the pass (kernels), out[3] ms from the kernels'
 * end to the return (downloads of hidden states and logits into the
 * caller's memory), out[4] wall ms of the calls. Timing waits for the
 * kernels before the downloads start, so it costs a little itself. */
void dcu_timing_read(double out[5], int reset);

#ifdef __cplusplus
}
#endif
#endif
