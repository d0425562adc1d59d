/* numerics.h - number formats and kernels of the embedded engine (internal).
 *
 * Three layers, as ggml:
 *  1. Scalar conversions (f16, bf16, fp8 e4m3/e5m2, fp4 e2m1, e8m0), all
 *     round-to-nearest-even with NaN/Inf handled.
 *  2. A traits table indexed by drift_dtype (name, block layout, quantize,
 *     dequantize), and num_qmat: a weight matrix W (rows, cols) in any
 *     format, quantized from f32 or wrapping GGUF data zero-copy.
 *  3. Kernels. num_* dispatch on the profile: isa=ref -> num_ref_* (in
 *     kernels_ref.c: float64 accumulation in one fixed order that vectorises,
 *     own exp/sin/cos, the same bits whatever the vector width), else
 *     num_fast_* (kernels_cpu.c: AVX-512 / AVX2+FMA chosen at run time,
 *     threads from workers.c). Every fast kernel has its reference beside it with the same
 *     signature; tests/ops compares them.
 *
 * Semantics every matmul follows (both kernel sets):
 *   y[b][n] = sum_k act(x[b][k]) * deq(W[n][k])
 * where act() rounds to profile->acts (fp8 with a dynamic per-row scale
 * amax/max_finite) and deq() is the f32 value the traits' dequantize_row
 * gives. The weight value is thus always an f32, whichever format; the
 * reduction order over k and the accumulator type follow the profile.
 *
 * Block layouts (static_assert'ed in numerics.c), element j of a block:
 *   Q8_0  (32): { uint16 d (f16); int8 qs[32] }           x = qs[j] * d
 *   Q4_0  (32): { uint16 d (f16); uint8 qs[16] }           x = (nib - 8) * d
 *               nib(j) = qs[j] & 15 for j < 16, qs[j-16] >> 4 otherwise
 *   MXFP4 (32): { uint8 e (e8m0); uint8 qs[16] }           x = e2m1(nib) * 2^(e-127)
 *   NVFP4 (16): { uint8 s (e4m3); uint8 qs[8] }            x = e2m1(nib) * e4m3(s) * tensor_scale
 *               (nibble order as Q4_0, halves of 8)
 *   INT4: 2 per byte, element 2i low nibble, 2i+1 high; x = (nib - 8) * scale[group]
 *   INT8: int8 per element, x = q * scale[row]; FP8: one code per element,
 *   x = fp8(code) * s, s = scale[row] (per channel) or tensor_scale.
 *
 * Batch invariance: fast kernels split work over output rows/columns only;
 * each output's reduction order depends on the profile and K alone, never on
 * B or the thread count -- except reduce=blocked/sequential with
 * batch_invariant=0, where the split grows for small B (documented study
 * mode). */
#ifndef DRIFT_MODEL_NUMERICS_H
#define DRIFT_MODEL_NUMERICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "driftbench/profile.h"
#include "driftbench/status.h"
#include "model/cpu_features.h" /* the fast kernels' ISA: num_isa_resolve, num_isa_name */

/* ---------------------------------------------------------------------------
 * 1. Scalar conversions
 * ------------------------------------------------------------------------- */
uint16_t num_f32_to_bf16(float f);    /* RNE; NaN stays a quiet NaN */
float num_bf16_to_f32(uint16_t h);
uint16_t num_f32_to_f16(float f);     /* RNE; overflow -> inf; subnormals */
float num_f16_to_f32(uint16_t h);
uint8_t num_f32_to_e4m3(float f);     /* RNE, saturates to +-448, NaN -> 0x7f */
float num_e4m3_to_f32(uint8_t c);     /* 0x7f/0xff -> NaN */
uint8_t num_f32_to_e5m2(float f);     /* RNE, overflow -> inf, NaN -> 0x7e */
float num_e5m2_to_f32(uint8_t c);
uint8_t num_f32_to_e2m1(float f);     /* 4-bit code, RNE, saturates at +-6, NaN -> 0 */
/* The definitions of the three encoders above (split into exponent and
 * mantissa, ldexpf, nearbyintf; numerics.c): the fast ones (integer bit
 * arithmetic, numerics_fast.c) give their bits for every float. */
uint8_t num_f32_to_e4m3_ref(float f);
uint8_t num_f32_to_e5m2_ref(float f);
uint8_t num_f32_to_e2m1_ref(float f);
/* x rounded to fp8 (t: e4m3 or e5m2) and decoded, as the table of the
 * reference code gives it: num_e4m3_to_f32(num_f32_to_e4m3(x)) */
float num_round_fp8_value(drift_dtype t, float x);
float num_e2m1_to_f32(uint8_t c);     /* low 4 bits: s e e m; {0,.5,1,1.5,2,3,4,6} */
float num_e8m0_to_f32(uint8_t e);     /* 2^(e-127); 0xff -> NaN */
/* OCP MX shared scale for a block with max |x| = amax and element max
 * exponent emax_elem (2 for e2m1): e8m0 code of 2^(floor(log2 amax) - emax_elem),
 * clamped to [0, 254]; amax = 0 -> code 0 (2^-127). */
uint8_t num_e8m0_from_amax(float amax, int emax_elem);

/* Largest finite magnitude of a format (448 for e4m3, 6 for e2m1, FLT_MAX
 * for f32 ...); 0 for integer formats. */
float num_dtype_max(drift_dtype t);

/* ---------------------------------------------------------------------------
 * 2. Formats: traits and quantized matrices
 * ------------------------------------------------------------------------- */

/* Quantizes n values of src into dst (n a multiple of block_size; of group
 * for INT4). Group formats write n/group f32 scales into gscales (INT8 and
 * per-channel FP8: group = n, one scale; INT4: group 32/128); tensor_scale is
 * an input (per-tensor FP8, NVFP4: chosen over the whole matrix first; 1
 * otherwise). */
typedef void (*num_quantize_row_fn)(void *dst, float *gscales, const float *src, int64_t n,
                                    int group, float tensor_scale);
/* Inverse: dst[j] = deq(element j). gscales may be NULL for formats without
 * group scales. */
typedef void (*num_dequantize_row_fn)(float *dst, const void *src, const float *gscales,
                                      int64_t n, int group, float tensor_scale);

typedef struct num_traits {
    const char *name;        /* "f32", "bf16", "fp8-e4m3", "q4_0", ... */
    int block_size;          /* elements per block of the row data */
    size_t block_bytes;      /* bytes per block */
    bool is_quantized;       /* not a plain float type */
    bool has_group_scales;   /* INT8, INT4, FP8 per channel: f32 scales aside */
    bool has_tensor_scale;   /* FP8 per tensor, NVFP4 */
    float max_finite;        /* largest element magnitude before scaling */
    num_quantize_row_fn quantize_row_ref;
    num_dequantize_row_fn dequantize_row;
} num_traits;

/* Traits of a format; NULL for DRIFT_DTYPE_NATIVE or out of range. */
const num_traits *num_traits_of(drift_dtype t);

/* Bytes of one row of n elements (n a multiple of block_size). */
size_t num_row_bytes(drift_dtype t, int64_t n);

/* Weight matrix W (rows, cols): rows = output features, cols = input features
 * (the reduction dimension). Row r starts at data + r * row_bytes. */
typedef struct num_qmat {
    drift_dtype dtype;
    int64_t rows, cols;
    const void *data;        /* (rows, row_bytes) */
    size_t row_bytes;
    float *scales;           /* (rows, cols / group) or NULL */
    int group;               /* elements per scale (INT8 / FP8 per channel: cols) */
    drift_scale_mode scale_mode; /* FP8 */
    float tensor_scale;      /* FP8 per tensor, NVFP4; 1 otherwise */
    void *owned;             /* memory freed by num_qmat_free; NULL when wrapping */
} num_qmat;

/* Quantizes src (rows, cols) f32 into *m with format t. group: INT4 group size
 * (32 or 128), ignored otherwise; mode: FP8 per channel / per tensor.
 * cols must be a multiple of the format's block (and group). Errors:
 * DRIFT_ERR_INVALID (shape, format), DRIFT_ERR_NOMEM. */
drift_status num_qmat_quantize(num_qmat *m, drift_dtype t, const float *src, int64_t rows,
                                 int64_t cols, int group, drift_scale_mode mode,
                                 drift_error *err);

/* Wraps existing data (zero copy; caller keeps it alive) of a format without
 * side scales: F32, F16, BF16, Q8_0, Q4_0 (what GGUF files hold). */
drift_status num_qmat_wrap(num_qmat *m, drift_dtype t, const void *data, int64_t rows,
                             int64_t cols, drift_error *err);

/* Converts src to the profile's weight format (p->weights, weight_scale,
 * group_size): DRIFT_DTYPE_NATIVE or the same format -> a zero-copy view of
 * src's data. Otherwise dequantizes row by row and quantizes. */
drift_status num_qmat_convert(num_qmat *dst, const num_qmat *src,
                                const drift_numeric_profile *p, drift_error *err);

/* Dequantizes row r (0 <= r < rows) into dst (cols floats). */
void num_qmat_dequantize_row(const num_qmat *m, int64_t r, float *dst);

/* The same values, SIMD where the format has a vector path (bf16, f16, q8_0,
 * q4_0, int8, fp8): bit for bit equal to num_qmat_dequantize_row (NaN
 * payloads aside). For embedding lookups and row conversions. */
void num_fast_dequantize_row(const num_qmat *m, int64_t r, float *dst);

/* Frees owned memory; leaves *m zeroed. NULL-safe. */
void num_qmat_free(num_qmat *m);

/* Rounds x (n) in place to format t as activations are: f32 = no-op;
 * bf16/f16 RNE; fp8 with a dynamic scale amax(x)/max_finite over the n
 * values (one row), values then x = fp8(x / s) * s; int8 with a dynamic
 * symmetric scale s = amax(x)/127, x = clamp(rint(x / s), -127, 127) * s
 * (RNE). Other formats: no-op. */
void num_round_acts(drift_dtype t, float *x, int64_t n);
/* Its definition: the same, scalar, through the reference encoders. The
 * fast one (AVX2 where the CPU has it and F16C) gives its bits. */
void num_round_acts_ref(drift_dtype t, float *x, int64_t n);
/* fp8 rounding of x (n) with a given scale: x = fp8(x / s) * s, as
 * num_round_acts does it after choosing s (s > 0 and finite). */
void num_round_fp8_scaled(drift_dtype t, float *x, int64_t n, float s);

/* The profile's model dtype (dtype=acts -> acts) and residual format. */
static inline drift_dtype num_dtype_of(const drift_numeric_profile *p) {
    return p->dtype == DRIFT_DTYPE_NATIVE ? p->acts : p->dtype;
}
static inline drift_dtype num_resid_of(const drift_numeric_profile *p) {
    return p->resid == DRIFT_DTYPE_NATIVE ? num_dtype_of(p) : p->resid;
}
/* One value rounded to a float format (f32, bf16, f16; others unchanged),
 * as num_round_acts rounds it. */
float num_round1_slow(drift_dtype t, float v);
static inline float num_round1(drift_dtype t, float v) {
    if (t == DRIFT_DTYPE_BF16) { /* RNE to the top 16 bits; NaN by the function (kept quiet) */
        uint32_t u;
        __builtin_memcpy(&u, &v, 4);
        if ((u & 0x7fffffffu) > 0x7f800000u) return num_round1_slow(t, v);
        u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
        __builtin_memcpy(&v, &u, 4);
        return v;
    }
    return t == DRIFT_DTYPE_F16 ? num_round1_slow(t, v) : v;
}
/* store=dtype: x (n) rounded to the model dtype; store=f32: unchanged. */
void num_store_round(const drift_numeric_profile *p, float *x, int64_t n);

/* KV cache vectors: one key or value vector of n floats (one head, one
 * position) stored in format t: F32/F16/BF16 plain; FP8: an f32 scale
 * (amax/max_finite) then n codes. */
size_t num_kv_bytes(drift_dtype t, int n);
void num_kv_store(drift_dtype t, void *dst, const float *src, int n);
void num_kv_load(drift_dtype t, float *dst, const void *src, int n);

/* ---------------------------------------------------------------------------
 * 3. Kernels. Output first. Shapes in comments. The dispatching form takes
 *    the profile; num_ref_* / num_fast_* are the two implementations.
 * ------------------------------------------------------------------------- */

/* RoPE parameters. Llama-3 scaling applies when scaling_factor > 1 and
 * orig_ctx > 0; freq_factors (n_rot/2, may be NULL) divide the frequencies
 * (GGUF rope_freqs tensor). */
typedef struct num_rope_params {
    int head_dim;            /* elements per head */
    int n_rot;               /* rotated dims per head (<= head_dim, even) */
    bool neox;               /* pairs (i, i + n_rot/2) instead of (2i, 2i+1) */
    float theta_base;        /* 10000, 500000, 1000000 ... */
    float scaling_factor;    /* llama3: factor (8); 1 = none */
    float low_freq_factor;   /* llama3: 1 */
    float high_freq_factor;  /* llama3: 4 */
    int orig_ctx;            /* llama3: original_max_position_embeddings (8192) */
    const float *freq_factors;
} num_rope_params;

/* Frequency of rotation pair i (0 <= i < n_rot/2), with Llama-3 scaling and
 * GGUF frequency factors, in double (kernels_ref.c: -ffp-contract=off, so the
 * CUDA backend's table of frequencies has the CPU reference's bits). */
double num_rope_freq(const num_rope_params *rp, int i);

/* y (B, rows) = act(x) (B, cols) @ W^T, W (rows, cols) any format.
 * DRIFT_ERR_NOMEM if scratch cannot be allocated. */
drift_status num_matmul(const drift_numeric_profile *p, float *y, const float *x,
                        const num_qmat *W, int64_t B, drift_error *err);
drift_status num_ref_matmul(const drift_numeric_profile *p, float *y, const float *x,
                            const num_qmat *W, int64_t B, drift_error *err);
drift_status num_fast_matmul(const drift_numeric_profile *p, float *y, const float *x,
                             const num_qmat *W, int64_t B, drift_error *err);

/* out (n) = x (n) / sqrt(mean(x^2) + eps) * w (n). out may alias x. */
void num_rmsnorm(const drift_numeric_profile *p, float *out, const float *x, const float *w,
                 int64_t n, float eps);
void num_ref_rmsnorm(const drift_numeric_profile *p, float *out, const float *x, const float *w,
                     int64_t n, float eps);
void num_fast_rmsnorm(const drift_numeric_profile *p, float *out, const float *x, const float *w,
                      int64_t n, float eps);

/* x (n) <- softmax(x) in place, max-subtracted, with the profile's exp. */
void num_softmax(const drift_numeric_profile *p, float *x, int64_t n);
void num_ref_softmax(const drift_numeric_profile *p, float *x, int64_t n);
void num_fast_softmax(const drift_numeric_profile *p, float *x, int64_t n);

/* x (n_heads, head_dim) rotated in place for position pos. */
void num_rope(const drift_numeric_profile *p, float *x, int n_heads, int64_t pos,
              const num_rope_params *rp);
void num_ref_rope(const drift_numeric_profile *p, float *x, int n_heads, int64_t pos,
                  const num_rope_params *rp);
void num_fast_rope(const drift_numeric_profile *p, float *x, int n_heads, int64_t pos,
                   const num_rope_params *rp);

/* out (n) = silu(gate) * up, silu(g) = g / (1 + exp(-g)). out may alias. */
void num_swiglu(const drift_numeric_profile *p, float *out, const float *gate, const float *up,
                int64_t n);
void num_ref_swiglu(const drift_numeric_profile *p, float *out, const float *gate,
                    const float *up, int64_t n);
void num_fast_swiglu(const drift_numeric_profile *p, float *out, const float *gate,
                     const float *up, int64_t n);

/* out (n) = silu(x). out may alias x. */
void num_silu(const drift_numeric_profile *p, float *out, const float *x, int64_t n);

/* out (n) = a + b. out may alias. (Identical in both kernel sets: one f32 add.) */
void num_add(float *out, const float *a, const float *b, int64_t n);

/* Attention of one query head at one position over n_pos cached positions:
 *   s[t] = scale * q . k_t,  w = softmax(s),  out = sum_t w[t] v_t
 * q (head_dim) f32; k_t = k + t * stride_bytes, v_t likewise, each a KV
 * vector of head_dim values in format p->kv (num_kv_store). Causal masking /
 * sliding window = the caller picks the first position and n_pos.
 * scratch: at least n_pos + 2 * head_dim floats. p->attn picks two-pass or
 * online-blocked (p->attn_block positions per block). */
void num_attention(const drift_numeric_profile *p, float *out, const float *q, const void *k,
                   const void *v, size_t stride_bytes, int n_pos, int head_dim, float scale,
                   float *scratch);
void num_ref_attention(const drift_numeric_profile *p, float *out, const float *q,
                       const void *k, const void *v, size_t stride_bytes, int n_pos,
                       int head_dim, float scale, float *scratch);
void num_fast_attention(const drift_numeric_profile *p, float *out, const float *q,
                        const void *k, const void *v, size_t stride_bytes, int n_pos,
                        int head_dim, float scale, float *scratch);

/* num_attention for n_q query heads that share k and v (grouped-query
 * attention): q and out (n_q, head_dim), head g's output the bits
 * num_attention gives for it alone. The fast kernels read each K and V
 * vector once for the heads (up to 8 in one pass), not once per head.
 * scratch: num_attention_scratch(n_q, n_pos, head_dim) floats. */
void num_attention_group(const drift_numeric_profile *p, float *out, const float *q, int n_q, const void *k,
                         const void *v, size_t stride_bytes, int n_pos, int head_dim, float scale, float *scratch);
void num_fast_attention_group(const drift_numeric_profile *p, float *out, const float *q, int n_q, const void *k,
                              const void *v, size_t stride_bytes, int n_pos, int head_dim, float scale,
                              float *scratch);
size_t num_attention_scratch(int n_q, int n_pos, int head_dim);

/* out (cols) = deq(W[row]), then rounded to the residual format (num_resid_of: acts by default). */
void num_embedding(const drift_numeric_profile *p, float *out, const num_qmat *W, int64_t row);

/* exp as the profile asks (libm expf or the fast polynomial). */
float num_exp(const drift_numeric_profile *p, float x);
/* Fast exp: 2^n * P(r), degree-6 polynomial on |r| <= ln2/2; relative error
 * < 4e-7 for x in [-87, 88]; under -87.3 -> 0, over 88.7 -> inf, NaN -> NaN. */
float num_exp_fast(float x);

/* Length of each of the S chunks of a reduction over K (a multiple of 16;
 * the last chunk may be shorter). */
int64_t num_chunk_len(int64_t K, int S);

/* One matmul output under the hardware keys (p->lanes or p->mma set):
 * x . w over K elements in S chunks. num_hw_dot_ref (hw_ref.c) is the
 * definition, element by element; num_hw_dot computes the same bits with
 * AVX2+FMA (the reference where the CPU lacks them). */
float num_hw_dot_ref(const drift_numeric_profile *p, const float *x, const float *w, int64_t K, int S);
float num_hw_dot(const drift_numeric_profile *p, const float *x, const float *w, int64_t K, int S);
/* s rounded toward zero to f32, then cut to acc_bits mantissa bits (toward
 * zero). num_hw_trunc_ref (hw_ref.c) by nextafterf; num_hw_trunc the same by
 * bits: RNE overshot in magnitude -> one step down in magnitude (from inf:
 * FLT_MAX); NaN kept. */
float num_hw_trunc_ref(double s, int acc_bits);
static inline float num_hw_trunc(double s, int acc_bits) {
    float f = (float)s;
    uint32_t u;
    __builtin_memcpy(&u, &f, 4);
    if ((u & 0x7f800000u) == 0x7f800000u && s != s) return f; /* NaN */
    if (__builtin_fabs((double)f) > __builtin_fabs(s)) u -= 1u;
    if (acc_bits < 23 && (u & 0x7f800000u) != 0x7f800000u) u &= ~((1u << (23 - acc_bits)) - 1u);
    __builtin_memcpy(&f, &u, 4);
    return f;
}

/* Test hook: 1 makes num_fast_matmul use its generic (lane-emulating C)
 * path even where the SIMD path applies; the two must agree bit for bit. */
extern int num_fast_generic_only;
/* 1 (default): a hardware level whose dot product is exactly a SIMD isa's
 * (lanes 8 or 16, FMA, halving tree, f32 dots, no mma) runs that isa's
 * matmul kernels where the host has them (the same bits; tests/ops'
 * test_hw_levels proves it with 0 here: the level's own emulation against
 * the isa). */
extern int num_fast_hw_via_isa;

#endif
