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
} drift_numeric_profile;

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
 * gemm (kernel|vendor; emitted by to_spec only when backend=cuda).
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
 * (the weight format name) and "framework" ("driftbench-embedded/" + the
 * kernel choices), for recording with a run. */
DRIFT_API char *drift_profile_to_json(const drift_numeric_profile *p);

/* The config dimensions a run records. out buffers receive NUL-terminated
 * text (truncated to their size). */
DRIFT_API void drift_profile_precision(const drift_numeric_profile *p, char *out, size_t n);
DRIFT_API void drift_profile_framework(const drift_numeric_profile *p, char *out, size_t n);

/* Name of a format ("bf16", "fp8-e4m3", "native"); "?" if out of range.
 * drift_dtype_parse returns 0 and sets *out, or -1 for an unknown name. */
DRIFT_API const char *drift_dtype_name(drift_dtype t);
DRIFT_API int drift_dtype_parse(const char *name, drift_dtype *out);

#ifdef __cplusplus
}
#endif
#endif
