/* profile.h - numeric profiles of the embedded engine: the "serving stack".
 *
 * A profile fixes every numeric choice the engine makes, each independently:
 *   weights  number format of the weight matrices (f32, bf16, fp8, int4, ...)
 *   acts     activations are rounded to this format between ops and before
 *            every matmul (f32 = no rounding)
 *   kv       format of the KV cache
 *   accum    matmul / dot accumulation: f32, f64, or bf16-emulated (the
 *            accumulator is rounded to bf16 after every add)
 *   reduce   order of the matmul reduction over K: sequential (the ISA's
 *            natural lane order), pairwise (tree over 32-element leaves),
 *            blocked:S (K split into S chunks, chunk sums added in order)
 *   attn     attention: two-pass softmax, or online (flash-style) over
 *            blocks of B positions
 *   exp      libm expf, or a fast polynomial exp
 *   threads  OpenMP threads (0 = the OpenMP default); never changes results
 *   backend  cpu or cuda
 *   batch_invariant  1 (default): a row's result never depends on the batch
 *            size or thread count. 0: the reduction split may depend on the
 *            batch size (as split-K GPU kernels do), to study that drift.
 *   isa      ref (portable float64 reference kernels), scalar, avx2, avx512,
 *            or auto (best the CPU has; chosen at run time)
 *   gemm     backend=cuda only: kernel (DriftBench's fixed-order kernels) or
 *            vendor (cuBLAS / cuBLASLt)
 *
 *
 * Where values are rounded (the framework's choices; defaults = the
 * engine's historical numerics, see the fields below): dtype (model dtype of
 * the tensors between kernels), resid, store, norm, addnorm, swiglu, rope,
 * scores, probs, bias, logits. How dot products are computed (the
 * hardware's): lanes, fma, tree, dot, mma, accbits, promote -- each defines
 * its bits exactly (src/model/hw_ref.c), the same on any x86-64 with
 * AVX2+FMA, unlike isa=auto whose bits follow the host.
 *
 * Presets set whole axes: precision=NAME (a serving format: weights,
 * activations, KV cache, stored tensors), framework=NAME (the rounding
 * points, attention blocks and split-K of a serving stack, emulated),
 * hardware=NAME (the dot products of a CPU or GPU matrix unit, emulated);
 * drift_profile_preset_* list them. The lab's baseline is
 * "precision=w16a16&framework=vllm&hardware=avx2".
 *
 * Named profiles (`driftbench profiles` lists them) are starting points; a
 * spec "profile=NAME&key=value&..." applies overrides in order. */
#ifndef DRIFTBENCH_PROFILE_H
#define DRIFTBENCH_PROFILE_H

#include <stddef.h>
#include "driftbench/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Number formats. Values only grow. */
typedef enum drift_dtype {
    DRIFT_DTYPE_F32 = 0,
    DRIFT_DTYPE_F16 = 1,
    DRIFT_DTYPE_BF16 = 2,
    DRIFT_DTYPE_FP8_E4M3 = 3, /* OCP e4m3fn: max 448, no inf, saturating     */
    DRIFT_DTYPE_FP8_E5M2 = 4, /* IEEE-like: max 57344, inf and NaN            */
    DRIFT_DTYPE_INT8 = 5,     /* symmetric int8, one f32 scale per row        */
    DRIFT_DTYPE_INT4 = 6,     /* symmetric int4, f32 scale per group (32/128) */
    DRIFT_DTYPE_MXFP4 = 7,    /* e2m1 values, e8m0 scale per 32 (OCP MX)      */
    DRIFT_DTYPE_NVFP4 = 8,    /* e2m1 values, e4m3 scale per 16 + f32 tensor  */
    DRIFT_DTYPE_Q8_0 = 9,     /* GGUF/ggml block: f16 d + 32 x int8           */
    DRIFT_DTYPE_Q4_0 = 10,    /* GGUF/ggml block: f16 d + 16 bytes of nibbles */
    DRIFT_DTYPE_COUNT = 11,
    DRIFT_DTYPE_NATIVE = 100  /* weights only: keep the file's format as is  */
} drift_dtype;

/* Scales of fp8 weights. */
typedef enum drift_scale_mode {
    DRIFT_SCALE_PER_CHANNEL = 0, /* one f32 scale per output row */
    DRIFT_SCALE_PER_TENSOR = 1   /* one f32 scale for the matrix */
} drift_scale_mode;

typedef enum drift_accum {
    DRIFT_ACCUM_F32 = 0,
    DRIFT_ACCUM_F64 = 1,
    DRIFT_ACCUM_BF16 = 2 /* emulated: accumulator rounded to bf16 each add */
} drift_accum;

typedef enum drift_reduce {
    DRIFT_REDUCE_SEQUENTIAL = 0,
    DRIFT_REDUCE_PAIRWISE = 1,
    DRIFT_REDUCE_BLOCKED = 2 /* split-K = split_k chunks */
} drift_reduce;

typedef enum drift_attn {
    DRIFT_ATTN_TWO_PASS = 0,
    DRIFT_ATTN_ONLINE = 1 /* online softmax over blocks of attn_block */
} drift_attn;

/* rope= (drift_numeric_profile.rope_lowp): where RoPE rounds. */
typedef enum drift_rope_round {
    DRIFT_ROPE_F32 = 0,   /* f32 cos/sin, f32 arithmetic, one rounding at the store */
    DRIFT_ROPE_DTYPE = 1, /* cos/sin in dtype, each product and sum rounded */
    DRIFT_ROPE_TABLE = 2  /* "dtype-table": cos/sin rounded to dtype, f32
                             arithmetic, one rounding at the store */
} drift_rope_round;

typedef enum drift_exp_impl {
    DRIFT_EXP_LIBM = 0,
    DRIFT_EXP_FAST = 1
} drift_exp_impl;

typedef enum drift_backend {
    DRIFT_BACKEND_CPU = 0,
    DRIFT_BACKEND_CUDA = 1
} drift_backend;

/* Matrix products on backend=cuda (the CPU ignores it). */
typedef enum drift_gemm {
    DRIFT_GEMM_KERNEL = 0, /* DriftBench's kernels: fixed reduction order (WMMA
                              tensor cores for bf16/f16, SIMT otherwise) */
    DRIFT_GEMM_VENDOR = 1  /* cuBLAS / cuBLASLt (fp8 e4m3): the library picks
                              the algorithm by shape */
} drift_gemm;

typedef enum drift_isa {
    DRIFT_ISA_AUTO = 0,
    DRIFT_ISA_REF = 1,    /* kernels_ref.c: float64 accumulation in one fixed
                             order (8 lanes per dot product, a fixed combining
                             tree), its own exp/sin/cos (not libm's), no
                             rounding contraction; vectorised, yet
                             bit-identical on any x86-64 */
    DRIFT_ISA_SCALAR = 2, /* fast kernels' plain-C path (no SIMD intrinsics) */
    DRIFT_ISA_AVX2 = 3,   /* AVX2 + FMA, 8 lanes */
    DRIFT_ISA_AVX512 = 4  /* AVX-512F, 16 lanes */
} drift_isa;

#define DRIFT_PROFILE_NAME_MAX 32

typedef struct drift_numeric_profile {
    char name[DRIFT_PROFILE_NAME_MAX]; /* base named profile; "custom" if overridden */
    drift_dtype weights;          /* DRIFT_DTYPE_NATIVE keeps the GGUF's format */
    drift_scale_mode weight_scale; /* fp8 weights: per channel or per tensor */
    int group_size;               /* int4 weights: 32 or 128 */
    drift_dtype acts;             /* f32, bf16, f16, fp8-e4m3, fp8-e5m2 */
    drift_dtype kv;               /* f32, bf16, f16, fp8-e4m3, fp8-e5m2 */
    drift_accum accum;
    drift_reduce reduce;
    int split_k;                  /* reduce=blocked: number of K chunks, >= 1 */
    drift_attn attn;
    int attn_block;               /* attn=online: positions per block, >= 1 */
    drift_exp_impl exp;
    int threads;                  /* 0 = OpenMP default */
    drift_backend backend;
    int batch_invariant;          /* 1 = results independent of batch size */
    drift_isa isa;
    drift_gemm gemm;              /* backend=cuda: kernel or vendor */

    /* ---- Where values are rounded (framework and serving-format knobs).
     * Defaults keep the engine's historical numerics: only matmul inputs,
     * the embedding and the residual stream are rounded (to acts). ---- */
    drift_dtype dtype;    /* dtype=: the model dtype, format of the tensors
                             between kernels (residual, GEMM outputs, norm
                             outputs ...). DRIFT_DTYPE_NATIVE = "acts": the
                             same as acts (historical). A float format. */
    drift_dtype resid;    /* resid=: format of the residual stream after each
                             add; DRIFT_DTYPE_NATIVE = "dtype" (as dtype) */
    int store;            /* store=f32|dtype: 1 = every tensor a kernel writes
                             (GEMM outputs incl. bias, RoPE output, SwiGLU
                             output, norm output) is stored in dtype, as a
                             bf16/f16 serving stack's tensors are */
    int norm_round;       /* norm=f32|round: 1 = RMSNorm rounds x*rsqrt(ms)
                             to dtype before the weight multiply (HF
                             LlamaRMSNorm, vLLM's rms_norm CUDA kernel;
                             store=dtype rounds the product too); 0 = f32
                             inside, one rounding (flashinfer, hence SGLang
                             and TensorRT-LLM) */
    int addnorm_f32;      /* addnorm=rounded|f32: 1 = the norm after a
                             residual add reads the f32 sum (fused
                             add+RMSNorm, flashinfer); 0 = it reads the
                             rounded residual (unfused, or vLLM's
                             fused_add_rms_norm whose sum is scalar_t) */
    int swiglu_round;     /* swiglu=fused|round: 1 = silu(gate) rounded to
                             dtype before the product (HF act_fn(gate)*up,
                             vLLM silu_and_mul); 0 = f32 inside */
    int rope_lowp;        /* rope=f32|dtype|dtype-table (DRIFT_ROPE_*):
                             1 dtype = cos/sin tables in dtype and each
                             product and the sum rounded to dtype (HF
                             rotary; vLLM's older rotary kernel in
                             scalar_t); 2 dtype-table = cos/sin tables
                             rounded to dtype, products and sums in f32,
                             one rounding at the store (vLLM's rotary
                             kernel today, and its compiled native RoPE);
                             0 f32 = f32 tables and arithmetic, one
                             rounding (flashinfer). docs/presets.md */
    int scores_lowp;      /* scores=f32|dtype: 1 = attention scores q.k*scale
                             rounded to dtype once (eager attention: the
                             QK^T matmul writes dtype; HF then rounds the
                             product with the scale a second time, which
                             no key models) */
    int probs_lowp;       /* probs=f32|dtype: 1 = softmax weights rounded to
                             dtype before the P.V product (FlashAttention
                             and TensorRT-LLM's XQA convert P to bf16/f16
                             for their second GEMM; flashinfer's decode
                             kernel keeps P in f32) */
    int bias_unfused;     /* bias=fused|unfused: 1 = GEMM output rounded to
                             dtype, then the bias added and rounded again
                             (a separate bias kernel); 0 = bias added in f32
                             in the GEMM epilogue (one rounding) */
    int logits_lowp;      /* logits=f32|dtype: 1 = the LM head writes its
                             logits in dtype (vLLM, SGLang, HF and
                             TensorRT-LLM's PyTorch backend, which cast to
                             f32 only after); 0 = f32 logits (an LM head
                             computed in f32, e.g. SGLang's
                             --enable-fp32-lm-head) */

    /* ---- Hardware: how a matmul's dot products are computed. lanes = 0 and
     * mma = 0: the isa's own kernels (historical). Otherwise the level defines
     * the bits, the same on any x86-64 with AVX2+FMA (emulated). ---- */
    int lanes;            /* lanes=: accumulator lanes per dot product (4, 8,
                             16, 32, 64); element k goes to lane k mod lanes
                             (dot=bf16: pair (k mod 2*lanes)/2); 0 = the isa's */
    int fma;              /* fma=1|0: 0 = product rounded to f32 before the add
                             (no effect where the product is exact in f32:
                             bf16 x bf16, f16 x f16) */
    int tree;             /* tree=halving|linear: lanes combined a[i]+=a[i+h]
                             for h = lanes/2 .. 1, or ((a0+a1)+a2)+... */
    int dot_bf16;         /* dot=f32|bf16: 1 = AVX512-BF16 VDPBF16PS: operands
                             rounded to bf16 (RNE), denormal inputs zero
                             (DAZ), per lane acc += odd pair product, then
                             += even, each add RNE with FTZ */
    int mma;              /* mma=K: matrix-unit dot: one accumulator per
                             output; each chunk of K products and the
                             accumulator summed in float64 (4 lanes, k mod 4)
                             then cut to acc_bits mantissa bits toward zero
                             (tensor cores truncate: Fasi et al. 2021);
                             0 = lanes path */
    int acc_bits;         /* accbits=: mantissa bits the mma accumulator keeps
                             (23 = f32; ~14 = H800 FP8 GEMM, DeepSeek-V3 tech.
                             report 3.3.2) */
    int promote;          /* promote=N: every N elements the mma accumulator
                             is added to an f32 accumulator (RNE) and reset
                             (DeepGEMM's N_C = 128); 0 = never */

    /* Names of the presets in effect (precision=, framework=, hardware=), ""
     * when none or after a key of that axis changed one of its fields. */
    char precision_preset[DRIFT_PROFILE_NAME_MAX];
    char framework_preset[DRIFT_PROFILE_NAME_MAX];
    char hardware_preset[DRIFT_PROFILE_NAME_MAX];
} drift_numeric_profile;

/* The three axes a run records, each with named presets. */
typedef enum drift_profile_axis {
    DRIFT_AXIS_PRECISION = 0,
    DRIFT_AXIS_FRAMEWORK = 1,
    DRIFT_AXIS_HARDWARE = 2,
    DRIFT_AXIS_COUNT = 3
} drift_profile_axis;

/* Presets of an axis: count, and the i-th name, one-paragraph summary (what
 * it changes, which real behaviour it emulates) and spec (the keys it sets
 * after resetting its axis's fields); NULL past the end. `precision=NAME`,
 * `framework=NAME` and `hardware=NAME` apply them in a spec.
 *   precision: w16a16 w16a16-f16 w8a8-fp8 w8a8-int8 w4a16 w4a16-mxfp4 w4a16-nvfp4
 *   framework: vllm sglang trtllm hf-eager
 *   hardware:  avx2 avx512 avx512-bf16 sse2 tc-bf16 tc-fp8 tc-fp8-nopromote
 * The texts (profile.c) say exactly what each sets; all are emulations of
 * those stacks' numeric choices by this engine's kernels. */
DRIFT_API size_t drift_profile_preset_count(drift_profile_axis axis);
DRIFT_API const char *drift_profile_preset_name(drift_profile_axis axis, size_t i);
DRIFT_API const char *drift_profile_preset_summary(drift_profile_axis axis, size_t i);
DRIFT_API const char *drift_profile_preset_spec(drift_profile_axis axis, size_t i);

/* Number of named profiles, and the i-th name (NULL past the end). */
DRIFT_API size_t drift_profile_count(void);
DRIFT_API const char *drift_profile_name_at(size_t i);

/* Fills *p with the named profile ("ref", "cpu-f32", "cpu-bf16", "cpu-f16",
 * "cpu-fp8", "cpu-int8", "cpu-int4", "cpu-mxfp4", "cpu-nvfp4", "gpu-fp8",
 * "cuda-f32", "cuda-bf16", "cuda-fp8"). Unknown name -> DRIFT_ERR_INVALID
 * naming it. Not validated: a cuda profile is returned even by a build
 * without CUDA (drift_profile_validate then says UNSUPPORTED). */
DRIFT_API drift_status drift_profile_get(const char *name, drift_numeric_profile *p,
                                         drift_error *err);

/* Parses "profile=NAME&key=value&..." ('&' or ',' separate pairs). Starts from
 * `cpu-f32` when no profile= is given; profile= must come first when present.
 * Keys: profile weights acts kv accum reduce attn exp threads backend
 * batch_invariant isa group (int4 group size) wscale (per-channel|per-tensor)
 * gemm (kernel|vendor; emitted by to_spec only when backend=cuda); the
 * presets precision= framework= hardware= (precision=FORMAT still means
 * weights=FORMAT); dtype resid store norm addnorm swiglu rope scores probs
 * bias logits lanes fma tree dot mma accbits promote (emitted by to_spec
 * only where they differ from the defaults; acts=int8 is the dynamic
 * per-token int8 activation format).
 * Values: formats by name (f32 bf16 f16 fp8-e4m3 fp8-e5m2 int8 int4 mxfp4
 * nvfp4 q8_0 q4_0 native; "fp8" = fp8-e4m3), reduce=sequential|pairwise|
 * blocked:S, attn=two-pass|online:B, exp=libm|fast, isa=auto|ref|scalar|
 * avx2|avx512. Keys the caller handles itself (e.g. a target's "model") are
 * rejected: strip them first. Bad key/value -> DRIFT_ERR_INVALID naming it;
 * *p is then unspecified. */
DRIFT_API drift_status drift_profile_parse(const char *spec, drift_numeric_profile *p,
                                           drift_error *err);

/* Applies one key=value override to *p (the parser's step), so callers with
 * their own spec syntax can feed keys one by one. Unknown key ->
 * DRIFT_ERR_NOT_FOUND (so a caller can try its own keys); bad value ->
 * DRIFT_ERR_INVALID. */
DRIFT_API drift_status drift_profile_set(drift_numeric_profile *p, const char *key,
                                         const char *value, drift_error *err);

/* Checks cross-field consistency (e.g. acts=int4 is not an activation
 * format; isa=ref requires accum=f64; backend=cuda excludes accum=bf16).
 * DRIFT_ERR_INVALID names the field; backend=cuda in a build without CUDA ->
 * DRIFT_ERR_UNSUPPORTED. Whether a GPU is present is checked by
 * drift_model_load, not here. */
DRIFT_API drift_status drift_profile_validate(const drift_numeric_profile *p, drift_error *err);

/* Number of CUDA GPUs this process can use: 0 when the build has no CUDA
 * backend, there is no driver, or no device. Never an error. */
DRIFT_API int drift_cuda_device_count(void);

/* Short name of GPU 0 as runs record it for the hardware dimension ("h200"),
 * written NUL-terminated into out (n bytes). Returns 0, or -1 (out = "")
 * when there is no CUDA GPU. */
DRIFT_API int drift_cuda_device_name(char *out, size_t n);

/* Canonical spec string that drift_profile_parse maps back to *p
 * ("weights=bf16&acts=f32&..."). Returns a malloc'd string (free()), NULL on
 * allocation failure. */
DRIFT_API char *drift_profile_to_spec(const drift_numeric_profile *p);

/* Multi-line human text: each setting, its value and what it means. malloc'd. */
DRIFT_API char *drift_profile_describe(const drift_numeric_profile *p);

/* JSON object (compact text, malloc'd) with every field, plus "precision"
 * (the precision preset's name, or the weight format name), "framework"
 * (the framework preset's name, or "driftbench-embedded/" + the kernel
 * choices), "hardware" (drift_profile_hardware) and the three preset names
 * ("" when none), for recording with a run. */
DRIFT_API char *drift_profile_to_json(const drift_numeric_profile *p);

/* The config dimensions a run records. out buffers receive NUL-terminated
 * text (truncated to their size). precision: the precision preset's name
 * when one is in effect, else the weight format; framework: the framework
 * preset's name, else "driftbench-embedded/ISA/reduce/attn/exp-E/acc-A" with
 * "/key-value" for each rounding key that differs from the defaults. */
DRIFT_API void drift_profile_precision(const drift_numeric_profile *p, char *out, size_t n);
DRIFT_API void drift_profile_framework(const drift_numeric_profile *p, char *out, size_t n);
/* The hardware dimension: the hardware preset's name when one is in effect,
 * else "cpu-ISA" (the isa the CPU kernels resolve to; "cuda" for
 * backend=cuda, whose device name a run records instead) with "/lanes-L",
 * "/nofma", "/tree-linear", "/dot-bf16", "/mma-K/acc-B/promote-N" for the
 * hardware keys that differ from the isa's own kernels. */
DRIFT_API void drift_profile_hardware(const drift_numeric_profile *p, char *out, size_t n);

/* Numeric descriptors of a profile: what it is, as numbers, for models that
 * predict drift from them (PRI). Writes min(cap, total) pairs (names[i]
 * static strings, values[i]) and returns the total (call with cap = 0 to
 * size). Names and order are stable (new ones only appended):
 *   w_mant, w_exp      weight format's mantissa / exponent bits (int8: 7/0,
 *                      int4: 3/0, e2m1: 1/2, e4m3: 3/4, bf16: 7/8, f16:
 *                      10/5, f32: 23/8; native: f32's)
 *   w_block            elements per weight scale (0 = no scale: float
 *                      formats; per-channel int8/fp8: -1 = a whole row;
 *                      per-tensor fp8: -2; int4: group; mxfp4 32; nvfp4 16)
 *   a_mant, a_exp      matmul-input activation format's bits
 *   a_dynamic          1 = activations quantized with a dynamic per-token
 *                      scale (fp8, int8), 0 = plain rounding
 *   kv_mant, kv_exp    KV cache format's bits
 *   dtype_mant         mantissa bits of the tensors between kernels (dtype)
 *   resid_mant         mantissa bits of the residual stream
 *   store_lowp         1 = kernel outputs stored in dtype (store=dtype)
 *   norm_round, addnorm_f32, swiglu_round, rope_lowp, scores_lowp,
 *   probs_lowp, bias_unfused, logits_lowp   the framework flags (0/1;
 *                      rope_lowp 0.5 for rope=dtype-table: the table
 *                      rounded, the arithmetic not)
 *   attn_block         positions per online-softmax block (0 = two-pass)
 *   split_k            chunks of the matmul reduction (1 = none)
 *   exp_fast           1 = fast polynomial exp
 *   acc_mant           mantissa bits of the dot-product accumulator (23 for
 *                      f32, 52 for f64, 7 for accum=bf16, acc_bits with mma)
 *   lanes              accumulator lanes per dot product (1 for mma, the
 *                      isa's width when lanes = 0: 8 avx2, 16 avx512, 1 scalar/ref)
 *   fma                1 = fused multiply-add (mma: products exact = 1)
 *   tree_linear        1 = lanes combined linearly, 0 = halving tree
 *   dot_bf16           1 = VDPBF16PS pair dot products
 *   mma_k              products per matrix-unit chunk (0 = lanes path)
 *   promote            elements between promotions to f32 (0 = never / n.a.)
 *   acc_trunc          1 = accumulator rounded toward zero (mma), 0 = RNE */
DRIFT_API size_t drift_profile_descriptors(const drift_numeric_profile *p, const char **names, double *values,
                                           size_t cap);

/* Name of a format ("bf16", "fp8-e4m3", "native"); "?" if out of range.
 * drift_dtype_parse returns 0 and sets *out, or -1 for an unknown name. */
DRIFT_API const char *drift_dtype_name(drift_dtype t);
DRIFT_API int drift_dtype_parse(const char *name, drift_dtype *out);

#ifdef __cplusplus
}
#endif
#endif
