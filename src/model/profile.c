/* profile.c - named numeric profiles and the key=value spec parser.
 *
 * A profile is plain data (driftbench/profile.h). The named profiles are a
 * static table; a spec starts from one of them (profile=NAME, default
 * cpu-f32) and applies key=value overrides in order through one setter, so
 * the CLI, target specs and tests all share the same vocabulary. to_spec is
 * the inverse of parse (round-trip tested). Format names are read from the
 * traits table (numerics.c) and ISA names from cpu_features.c; no second
 * list of either lives here.
 *
 * backend=cuda: the GPU ignores isa, threads and reduce; its matmuls follow gemm
 * (kernel | vendor) and its attention is split-KV with attn_block positions
 * per split (batch_invariant=1) or a batch-dependent split count (0). So
 * gemm appears in the spec only for cuda (CPU specs are unchanged), and the
 * framework string of a cuda profile names gemm and the split instead of the
 * ISA and the CPU's attention algorithm.
 *
 * Nothing here starts CUDA except drift_cuda_device_count/_name, and those
 * only where the kernel shows an NVIDIA GPU (cuda_node_visible): parsing,
 * describing and listing profiles never touch the device (issue 23). */
#include "driftbench/profile.h"

#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/cpu_features.h"
#include "model/numerics.h"
#include "util/util.h"
#ifdef DRIFT_HAVE_CUDA
#include "model/cuda/cuda_backend.h"
#endif

typedef struct named_profile {
    const char *name;
    const char *summary;
    const char *spec; /* overrides applied to the defaults below */
} named_profile;

/* Defaults every named profile starts from (cpu-f32). */
static const drift_numeric_profile DEFAULTS = {
    .name = "cpu-f32", .weights = DRIFT_DTYPE_F32, .weight_scale = DRIFT_SCALE_PER_CHANNEL,
    .group_size = 32, .acts = DRIFT_DTYPE_F32, .kv = DRIFT_DTYPE_F32, .accum = DRIFT_ACCUM_F32,
    .reduce = DRIFT_REDUCE_SEQUENTIAL, .split_k = 1, .attn = DRIFT_ATTN_TWO_PASS,
    .attn_block = 64, .exp = DRIFT_EXP_LIBM, .threads = 0, .backend = DRIFT_BACKEND_CPU,
    .batch_invariant = 1, .isa = DRIFT_ISA_AUTO, .gemm = DRIFT_GEMM_KERNEL,
    .dtype = DRIFT_DTYPE_NATIVE, .resid = DRIFT_DTYPE_NATIVE, .fma = 1, .acc_bits = 23};

static const named_profile PROFILES[] = {
    {"ref", "portable reference: f32 weights, float64 accumulation in one fixed order, 1 thread; "
            "bit-identical on any x86-64",
     "accum=f64&threads=1&isa=ref"},
    {"cpu-f32", "f32 everywhere, SIMD kernels (AVX-512/AVX2 chosen at run time)", ""},
    {"cpu-bf16", "bf16 weights, activations and KV cache; f32 accumulation",
     "weights=bf16&acts=bf16&kv=bf16"},
    {"cpu-f16", "f16 weights, activations and KV cache; f32 accumulation",
     "weights=f16&acts=f16&kv=f16"},
    {"cpu-fp8", "fp8 e4m3 weights (per-channel scale), bf16 activations and KV",
     "weights=fp8-e4m3&wscale=per-channel&acts=bf16&kv=bf16"},
    {"cpu-int8", "int8 weights (per-channel scale), f32 activations", "weights=int8"},
    {"cpu-int4", "int4 weights (group 32, symmetric), f32 activations", "weights=int4&group=32"},
    {"cpu-mxfp4", "MXFP4 weights (e2m1, e8m0 scale per 32), bf16 activations and KV",
     "weights=mxfp4&acts=bf16&kv=bf16"},
    {"cpu-nvfp4", "NVFP4 weights (e2m1, e4m3 scale per 16, f32 tensor scale), bf16 acts and KV",
     "weights=nvfp4&acts=bf16&kv=bf16"},
    {"gpu-fp8", "emulated GPU fp8 stack: fp8 e4m3 weights (per tensor) and activations, "
                "fp8 KV, split-K 4, online attention (block 64), fast exp",
     "weights=fp8-e4m3&wscale=per-tensor&acts=fp8-e4m3&kv=fp8-e4m3&reduce=blocked:4&"
     "attn=online:64&exp=fast"},
    /* On the GPU (needs a CUDA build and a GPU; see drift_cuda_device_count). */
    {"cuda-f32", "CUDA: f32 weights, activations and KV; DriftBench's fixed-order SIMT kernels; "
                 "split-KV attention, 64 positions per split; batch-invariant",
     "backend=cuda&gemm=kernel&attn=online:64&batch_invariant=1"},
    {"cuda-bf16", "CUDA: bf16 weights, activations and KV; WMMA tensor cores (f32 accumulate); "
                  "split-KV attention, 64 per split; batch-invariant",
     "weights=bf16&acts=bf16&kv=bf16&backend=cuda&gemm=kernel&attn=online:64&batch_invariant=1"},
    {"cuda-fp8", "CUDA: fp8 e4m3 weights (per-channel scale) and activations, bf16 KV; "
                 "cuBLASLt fp8 matmuls (algorithm chosen by cuBLASLt); split-KV attention, 64 per split",
     "weights=fp8-e4m3&wscale=per-channel&acts=fp8-e4m3&kv=bf16&backend=cuda&gemm=vendor&"
     "attn=online:64&batch_invariant=1"},
};
#define N_PROFILES (sizeof PROFILES / sizeof PROFILES[0])

/* ---------------------------------------------------------------------------
 * Presets: precision=NAME, framework=NAME, hardware=NAME. Each resets the
 * fields of its axis to the defaults and applies its spec; the name stays in
 * effect until a key changes one of that axis's fields. They are emulations
 * of the numeric choices of the stacks named, computed by this engine's
 * kernels -- not those stacks' code. Texts are in drift_profile_preset_*.
 * ------------------------------------------------------------------------- */
typedef struct preset {
    const char *name;
    const char *summary; /* what it changes and which real behaviour it models */
    const char *spec;
} preset;

static const preset PRECISION_PRESETS[] = {
    {"w16a16", "bf16 weights, activations, KV cache and every stored tensor; f32 accumulation "
               "(a bf16 serving stack's format; the lab's baseline)",
     "weights=bf16&acts=bf16&kv=bf16&dtype=bf16&store=dtype"},
    {"w16a16-f16", "f16 weights, activations, KV cache and stored tensors; f32 accumulation "
                   "(the paper's FP16 vLLM baseline format)",
     "weights=f16&acts=f16&kv=f16&dtype=f16&store=dtype"},
    {"w8a8-fp8", "fp8 e4m3 weights with one scale per output channel, activations quantized "
                 "to e4m3 per token (dynamic scale amax/448) at every matmul input; bf16 tensors "
                 "between kernels and bf16 KV cache (vLLM's fp8 W8A8 with dynamic per-token "
                 "activation scales)",
     "weights=fp8-e4m3&wscale=per-channel&acts=fp8-e4m3&kv=bf16&dtype=bf16&store=dtype"},
    {"w8a8-int8", "int8 weights with one scale per output channel, activations quantized to "
                  "int8 per token (dynamic symmetric scale amax/127, RNE) at every matmul input; "
                  "bf16 elsewhere (vLLM's compressed-tensors W8A8-INT8 dynamic per-token). "
                  "The product is summed in f32 of the dequantized values, not in int32",
     "weights=int8&acts=int8&kv=bf16&dtype=bf16&store=dtype"},
    {"w4a16", "int4 weights, symmetric, one f32 scale per group of 128 (round to nearest, not "
              "GPTQ's error feedback), bf16 activations, KV and tensors (GPTQ/AWQ-style W4A16 "
              "g128 as Marlin kernels serve it)",
     "weights=int4&group=128&acts=bf16&kv=bf16&dtype=bf16&store=dtype"},
    {"w4a16-g32", "int4 weights, symmetric, one f32 scale per group of 32 (round to nearest), bf16 "
                  "activations, KV and tensors (GPTQ-style W4A16 g32, a group size vLLM's Marlin "
                  "kernels serve: MARLIN_SUPPORTED_GROUP_SIZES = -1, 32, 64, 128)",
     "weights=int4&group=32&acts=bf16&kv=bf16&dtype=bf16&store=dtype"},
    {"w4a16-mxfp4", "MXFP4 weights (OCP MX: e2m1 values, e8m0 scale per 32), bf16 activations, "
                    "KV and tensors (weight-only MXFP4 as vLLM serves gpt-oss on Hopper)",
     "weights=mxfp4&acts=bf16&kv=bf16&dtype=bf16&store=dtype"},
    {"w4a16-nvfp4", "NVFP4 weights (e2m1 values, e4m3 scale per 16, f32 tensor scale), bf16 "
                    "activations, KV and tensors (weight-only NVFP4, as vLLM's Marlin path serves "
                    "NVFP4 checkpoints on GPUs without FP4 tensor cores; not W4A4)",
     "weights=nvfp4&acts=bf16&kv=bf16&dtype=bf16&store=dtype"},
};

/* Each entry was checked against the stack's source (docs/presets.md: the
 * file, function and snapshot read for every key, what no key expresses, and
 * which configurable choice -- attention backend, block size -- each takes). */
static const preset FRAMEWORK_PRESETS[] = {
    {"vllm", "vLLM with its own CUDA kernels (custom ops on, as with --enforce-eager; its default "
             "torch.compile mode runs PyTorch-native ops fused by Inductor instead, see "
             "docs/presets.md): rms_norm rounds x*rsqrt(ms) to the model dtype before the weight "
             "multiply; fused_add_rms_norm forms the sum in the dtype, so the norm reads the "
             "rounded residual; silu_and_mul rounds silu(gate) before the product; RoPE from "
             "the dtype cos/sin cache in f32 arithmetic, one rounding (today's rotary kernel; "
             "the older scalar_t kernel rounded each op: rope=dtype, docs/presets.md); "
             "FlashAttention-3 on Hopper: f32 scores, P rounded to the dtype for P.V, online "
             "softmax over blocks of 128 keys (paged KV); bias in the GEMM epilogue; logits in "
             "the dtype",
     "norm=round&addnorm=rounded&swiglu=round&rope=dtype-table&scores=f32&probs=dtype&bias=fused&"
     "logits=dtype&attn=online:128"},
    {"vllm-compile", "vLLM's default mode (torch.compile with Inductor, custom ops off): RMSNorm, "
                     "fused add+RMSNorm, SiluAndMul and RoPE run their PyTorch-native code fused by "
                     "Inductor, which computes a fused group in f32 and rounds once at its output "
                     "(the downcasts between fused ops are elided): norm in f32 reading the f32 sum, "
                     "SwiGLU in f32, RoPE from the dtype cos/sin cache in f32 arithmetic; attention, "
                     "bias and logits as the vllm preset (FlashAttention-3, blocks of 128; read from "
                     "the sources, not run: docs/presets.md)",
     "norm=f32&addnorm=f32&swiglu=fused&rope=dtype-table&scores=f32&probs=dtype&bias=fused&"
     "logits=dtype&attn=online:128"},
    {"sglang", "SGLang on Hopper with sgl-kernel's flashinfer-derived kernels: RMSNorm and fused "
               "add+RMSNorm in f32 with one rounding, the norm reading the f32 sum; silu_and_mul "
               "in f32, one rounding; RoPE in f32 from an f32 cos/sin cache; its default "
               "attention backend there, FlashAttention-3: f32 scores, P rounded for P.V, online "
               "softmax over blocks of 128 keys (paged KV, page size 1); bias in the GEMM "
               "epilogue; logits in the dtype (--enable-fp32-lm-head off)",
     "norm=f32&addnorm=f32&swiglu=fused&rope=f32&scores=f32&probs=dtype&bias=fused&"
     "logits=dtype&attn=online:128"},
    {"trtllm", "TensorRT-LLM's PyTorch backend on Hopper: flashinfer RMSNorm and fused add+RMSNorm "
               "(f32, the norm reading the f32 sum), SwiGLU in one f32 Triton kernel, RoPE in f32 "
               "fused into attention; XQA decode attention: f32 scores, P rounded for P.V, tiles "
               "of 64 keys; bias in the GEMM epilogue; logits in the dtype (the LM head writes "
               "the model dtype, cast to f32 after); split-K GEMMs in 2 chunks, a tactic its "
               "GEMM libraries may pick at run time (an assumption of this level, not in its "
               "model code)",
     "norm=f32&addnorm=f32&swiglu=fused&rope=f32&scores=f32&probs=dtype&bias=fused&"
     "logits=dtype&attn=online:64&reduce=blocked:2"},
    {"hf-eager", "Hugging Face transformers, eager attention: RMSNorm's normalized value rounded to "
                 "the dtype before the weight, the residual add in the dtype, silu(gate) rounded "
                 "before the product, RoPE in the dtype (cos/sin cast to it, each product and sum "
                 "rounded), scores q.k^T written in the dtype, softmax in f32 then probabilities "
                 "cast to the dtype, two-pass softmax; bias in the GEMM (F.linear is one cuBLASLt "
                 "call with a bias epilogue); logits in the dtype",
     "norm=round&addnorm=rounded&swiglu=round&rope=dtype&scores=dtype&probs=dtype&bias=fused&"
     "logits=dtype&attn=two-pass"},
};

static const preset HARDWARE_PRESETS[] = {
    {"avx2", "x86-64 AVX2+FMA: 8 f32 lanes per dot product, fused multiply-add, lanes combined "
             "by a halving tree (the lab's baseline hardware; isa=avx2's kernels)",
     "isa=avx2"},
    {"avx512", "AVX-512F: 16 f32 lanes, fused multiply-add, halving tree (emulated with two "
               "8-lane AVX2 accumulators: the same bits on any AVX2 host)",
     "isa=avx2&lanes=16"},
    {"avx512-bf16", "AVX512-BF16 VDPBF16PS: operands rounded to bf16, 16 lanes each taking a "
                    "pair per step (odd element first, then even), each add RNE, denormal "
                    "inputs and outputs flushed (DAZ/FTZ); halving tree (as oneDNN's bf16 GEMMs "
                    "on Cooper Lake / Sapphire Rapids)",
     "isa=avx2&lanes=16&dot=bf16"},
    /* No "AVX without FMA" level: at w16a16 every product of two bf16
     * values is exact in f32, so fma=0 gives the same bits as fma=1 there
     * (the pilot found 0 changed answers); fma= stays a key for f32 operands. */
    {"sse2", "x86-64 baseline SSE2: 4 lanes, no FMA, lanes combined linearly",
     "isa=avx2&lanes=4&fma=0&tree=linear"},
    {"tc-bf16", "GPU tensor-core MMA (k = 16 per instruction): one accumulator per output, each "
                "chunk of 16 products added to it at once and the result truncated to f32 "
                "(round toward zero, as Fasi et al. 2021 measured on NVIDIA tensor cores)",
     "isa=avx2&mma=16"},
    {"tc-fp8", "Hopper FP8 tensor-core GEMM with DeepGEMM-style promotion: chunks of 32 "
               "products (one WGMMA k), accumulator truncated to 14 mantissa bits (DeepSeek-V3 "
               "report 3.3.2), added into an f32 accumulator every 128 elements",
     "isa=avx2&mma=32&accbits=14&promote=128"},
    {"tc-fp8-nopromote", "Hopper FP8 tensor-core GEMM without promotion: chunks of 32, the "
                         "whole reduction in a 14-mantissa-bit accumulator",
     "isa=avx2&mma=32&accbits=14&promote=0"},
};

#define N_PREC (sizeof PRECISION_PRESETS / sizeof PRECISION_PRESETS[0])
#define N_FW (sizeof FRAMEWORK_PRESETS / sizeof FRAMEWORK_PRESETS[0])
#define N_HW (sizeof HARDWARE_PRESETS / sizeof HARDWARE_PRESETS[0])

static const preset *axis_table(drift_profile_axis axis, size_t *n) {
    switch (axis) {
    case DRIFT_AXIS_PRECISION: *n = N_PREC; return PRECISION_PRESETS;
    case DRIFT_AXIS_FRAMEWORK: *n = N_FW; return FRAMEWORK_PRESETS;
    case DRIFT_AXIS_HARDWARE: *n = N_HW; return HARDWARE_PRESETS;
    default: break;
    }
    *n = 0;
    return NULL;
}

size_t drift_profile_preset_count(drift_profile_axis axis) {
    size_t n;
    axis_table(axis, &n);
    return n;
}

const char *drift_profile_preset_name(drift_profile_axis axis, size_t i) {
    size_t n;
    const preset *t = axis_table(axis, &n);
    return i < n ? t[i].name : NULL;
}

const char *drift_profile_preset_summary(drift_profile_axis axis, size_t i) {
    size_t n;
    const preset *t = axis_table(axis, &n);
    return i < n ? t[i].summary : NULL;
}

const char *drift_profile_preset_spec(drift_profile_axis axis, size_t i) {
    size_t n;
    const preset *t = axis_table(axis, &n);
    return i < n ? t[i].spec : NULL;
}

/* The fields of an axis, copied from src into dst. */
static void axis_copy(drift_numeric_profile *dst, const drift_numeric_profile *src, drift_profile_axis axis) {
    switch (axis) {
    case DRIFT_AXIS_PRECISION:
        dst->weights = src->weights;
        dst->weight_scale = src->weight_scale;
        dst->group_size = src->group_size;
        dst->acts = src->acts;
        dst->kv = src->kv;
        dst->dtype = src->dtype;
        dst->store = src->store;
        break;
    case DRIFT_AXIS_FRAMEWORK:
        dst->resid = src->resid;
        dst->norm_round = src->norm_round;
        dst->addnorm_f32 = src->addnorm_f32;
        dst->swiglu_round = src->swiglu_round;
        dst->rope_lowp = src->rope_lowp;
        dst->scores_lowp = src->scores_lowp;
        dst->probs_lowp = src->probs_lowp;
        dst->bias_unfused = src->bias_unfused;
        dst->logits_lowp = src->logits_lowp;
        dst->attn = src->attn;
        dst->attn_block = src->attn_block;
        dst->reduce = src->reduce;
        dst->split_k = src->split_k;
        dst->exp = src->exp;
        break;
    case DRIFT_AXIS_HARDWARE:
        dst->isa = src->isa;
        dst->accum = src->accum;
        dst->lanes = src->lanes;
        dst->fma = src->fma;
        dst->tree = src->tree;
        dst->dot_bf16 = src->dot_bf16;
        dst->mma = src->mma;
        dst->acc_bits = src->acc_bits;
        dst->promote = src->promote;
        break;
    default: break;
    }
}

static int axis_same(const drift_numeric_profile *a, const drift_numeric_profile *b, drift_profile_axis axis) {
    drift_numeric_profile x, y;
    memset(&x, 0, sizeof x);
    memset(&y, 0, sizeof y);
    axis_copy(&x, a, axis);
    axis_copy(&y, b, axis);
    return !memcmp(&x, &y, sizeof x);
}

static char *axis_name_field(drift_numeric_profile *p, drift_profile_axis axis) {
    return axis == DRIFT_AXIS_PRECISION ? p->precision_preset
           : axis == DRIFT_AXIS_FRAMEWORK ? p->framework_preset
                                          : p->hardware_preset;
}

static drift_status apply_preset(drift_numeric_profile *p, drift_profile_axis axis, const char *name,
                                 drift_error *err);

/* Format names are the traits table's (numerics.c); "native" is not a format
 * but a choice (keep the file's). */
const char *drift_dtype_name(drift_dtype t) {
    if (t == DRIFT_DTYPE_NATIVE) return "native";
    const num_traits *tr = num_traits_of(t);
    return tr ? tr->name : "?";
}

int drift_dtype_parse(const char *name, drift_dtype *out) {
    if (!name) return -1;
    if (!strcmp(name, "native")) { *out = DRIFT_DTYPE_NATIVE; return 0; }
    if (!strcmp(name, "fp8") || !strcmp(name, "e4m3")) { *out = DRIFT_DTYPE_FP8_E4M3; return 0; }
    if (!strcmp(name, "e5m2")) { *out = DRIFT_DTYPE_FP8_E5M2; return 0; }
    if (!strcmp(name, "fp32") || !strcmp(name, "float32")) { *out = DRIFT_DTYPE_F32; return 0; }
    if (!strcmp(name, "fp16") || !strcmp(name, "float16")) { *out = DRIFT_DTYPE_F16; return 0; }
    for (int i = 0; i < DRIFT_DTYPE_COUNT; i++)
        if (!strcmp(name, num_traits_of((drift_dtype)i)->name)) { *out = (drift_dtype)i; return 0; }
    return -1;
}

size_t drift_profile_count(void) { return N_PROFILES; }

const char *drift_profile_name_at(size_t i) { return i < N_PROFILES ? PROFILES[i].name : NULL; }

static drift_status apply_spec(drift_numeric_profile *p, const char *spec, int allow_profile,
                               drift_error *err);

drift_status drift_profile_get(const char *name, drift_numeric_profile *p, drift_error *err) {
    for (size_t i = 0; i < N_PROFILES; i++)
        if (name && !strcmp(name, PROFILES[i].name)) {
            *p = DEFAULTS;
            drift_status st = apply_spec(p, PROFILES[i].spec, 0, err);
            snprintf(p->name, sizeof p->name, "%s", PROFILES[i].name);
            return st;
        }
    return drift_error_set(err, DRIFT_ERR_INVALID, "profile: unknown profile '%s' (see "
                           "`driftbench profiles`)", name ? name : "(null)");
}

static const char *ACCUM_NAMES[] = {"f32", "f64", "bf16"};
static const char *SCALE_NAMES[] = {"per-channel", "per-tensor"};
static const char *GEMM_NAMES[] = {"kernel", "vendor"};
static const char *AXIS_NAMES[] = {"precision", "framework", "hardware"};

/* Keys of a few named values: value 0 / value 1 (/ value 2) of each, and its
 * field. rope has three (profile.h: DRIFT_ROPE_*). */
static const char *FLAG_KEYS[] = {"store", "norm", "addnorm", "swiglu", "rope", "scores", "probs", "bias", "logits", "tree", "dot"};
static const char *const FLAG_VALUES[][3] = {{"f32", "dtype"},   {"f32", "round"},   {"rounded", "f32"}, {"fused", "round"},
                                             {"f32", "dtype", "dtype-table"}, {"f32", "dtype"}, {"f32", "dtype"}, {"fused", "unfused"},
                                             {"f32", "dtype"},   {"halving", "linear"}, {"f32", "bf16"}};
#define N_FLAGS ((int)(sizeof FLAG_KEYS / sizeof FLAG_KEYS[0]))

static int flag_nvalues(int i) { return FLAG_VALUES[i][2] ? 3 : 2; }

static int *flag_field(drift_numeric_profile *p, int i) {
    int *f[] = {&p->store, &p->norm_round, &p->addnorm_f32, &p->swiglu_round, &p->rope_lowp, &p->scores_lowp,
                &p->probs_lowp, &p->bias_unfused, &p->logits_lowp, &p->tree, &p->dot_bf16};
    return f[i];
}

static int flag_get(const drift_numeric_profile *p, int i) { return *flag_field((drift_numeric_profile *)p, i); }

/* Formats activations and the KV cache may take (the others need side
 * scales or blocks that a vector rounded between ops does not have). */
static const drift_dtype ACT_FORMATS[] = {DRIFT_DTYPE_F32, DRIFT_DTYPE_BF16, DRIFT_DTYPE_F16,
                                          DRIFT_DTYPE_FP8_E4M3, DRIFT_DTYPE_FP8_E5M2, DRIFT_DTYPE_INT8};
#define N_ACT_FORMATS (sizeof ACT_FORMATS / sizeof ACT_FORMATS[0])

static int is_act_format(drift_dtype t) {
    for (size_t i = 0; i < N_ACT_FORMATS; i++)
        if (ACT_FORMATS[i] == t) return 1;
    return 0;
}

/* "f32, bf16, f16, fp8-e4m3 or fp8-e5m2" */
static void act_formats_text(char *out, size_t n) {
    size_t len = 0;
    out[0] = 0;
    for (size_t i = 0; i < N_ACT_FORMATS && len < n; i++)
        len += (size_t)snprintf(out + len, n - len, "%s%s", i == 0 ? "" : i + 1 < N_ACT_FORMATS ? ", " : " or ",
                                drift_dtype_name(ACT_FORMATS[i]));
}

static int parse_int(const char *s, long lo, long hi, int *out) {
    char *end;
    if (!s || !*s) return -1;
    long v = strtol(s, &end, 10);
    if (*end || v < lo || v > hi) return -1;
    *out = (int)v;
    return 0;
}

static int index_of(const char *v, const char *const *names, int n) {
    for (int i = 0; i < n; i++)
        if (!strcmp(v, names[i])) return i;
    return -1;
}

drift_status drift_profile_set(drift_numeric_profile *p, const char *key, const char *v,
                               drift_error *err) {
#define BAD(what) \
    drift_error_set(err, DRIFT_ERR_INVALID, "profile: bad value '%s' for %s (%s)", v, key, what)
    int i;
    if (!key || !v) return drift_error_set(err, DRIFT_ERR_INVALID, "profile: missing key or value");
    if (!strcmp(key, "profile")) return drift_profile_get(v, p, err);
    if (!strcmp(key, "framework")) return apply_preset(p, DRIFT_AXIS_FRAMEWORK, v, err);
    if (!strcmp(key, "hardware")) return apply_preset(p, DRIFT_AXIS_HARDWARE, v, err);
    if (!strcmp(key, "precision")) {
        /* a preset name, or (historically) a weight format */
        for (size_t j = 0; j < N_PREC; j++)
            if (!strcmp(v, PRECISION_PRESETS[j].name)) return apply_preset(p, DRIFT_AXIS_PRECISION, v, err);
    }
    drift_numeric_profile before = *p;
    if (!strcmp(key, "weights") || !strcmp(key, "precision")) {
        drift_dtype t;
        if (drift_dtype_parse(v, &t)) return BAD("a format name: f32 bf16 f16 fp8-e4m3 ...");
        p->weights = t;
    } else if (!strcmp(key, "acts") || !strcmp(key, "kv")) {
        drift_dtype t;
        if (drift_dtype_parse(v, &t) || !is_act_format(t) || (t == DRIFT_DTYPE_INT8 && strcmp(key, "acts"))) {
            char what[128];
            act_formats_text(what, sizeof what);
            return BAD(what);
        }
        if (!strcmp(key, "acts")) p->acts = t;
        else p->kv = t;
    } else if (!strcmp(key, "dtype") || !strcmp(key, "resid")) {
        drift_dtype t;
        int is_dtype = !strcmp(key, "dtype");
        if (!strcmp(v, is_dtype ? "acts" : "dtype")) t = DRIFT_DTYPE_NATIVE;
        else if (drift_dtype_parse(v, &t) || (t != DRIFT_DTYPE_F32 && t != DRIFT_DTYPE_BF16 && t != DRIFT_DTYPE_F16))
            return BAD(is_dtype ? "acts, f32, bf16 or f16" : "dtype, f32, bf16 or f16");
        if (is_dtype) p->dtype = t;
        else p->resid = t;
    } else if ((i = index_of(key, FLAG_KEYS, N_FLAGS)) >= 0) {
        int f = index_of(v, FLAG_VALUES[i], flag_nvalues(i));
        if (f < 0) {
            char what[64];
            if (flag_nvalues(i) == 3)
                snprintf(what, sizeof what, "%s, %s or %s", FLAG_VALUES[i][0], FLAG_VALUES[i][1], FLAG_VALUES[i][2]);
            else snprintf(what, sizeof what, "%s or %s", FLAG_VALUES[i][0], FLAG_VALUES[i][1]);
            return BAD(what);
        }
        *flag_field(p, i) = f;
    } else if (!strcmp(key, "lanes")) {
        int l;
        if (parse_int(v, 0, 64, &l) || (l && l != 4 && l != 8 && l != 16 && l != 32 && l != 64))
            return BAD("0 (the isa's), 4, 8, 16, 32 or 64");
        p->lanes = l;
    } else if (!strcmp(key, "fma")) {
        if (!strcmp(v, "1") || !strcmp(v, "on")) p->fma = 1;
        else if (!strcmp(v, "0") || !strcmp(v, "off")) p->fma = 0;
        else return BAD("1 or 0");
    } else if (!strcmp(key, "mma")) {
        int k;
        if (!strcmp(v, "none")) k = 0;
        else if (parse_int(v, 0, 4096, &k) || (k && k % 4)) return BAD("none, 0 or a chunk K, a multiple of 4");
        p->mma = k;
    } else if (!strcmp(key, "accbits")) {
        if (parse_int(v, 1, 23, &p->acc_bits)) return BAD("1..23 mantissa bits");
    } else if (!strcmp(key, "promote")) {
        if (parse_int(v, 0, 1 << 20, &p->promote)) return BAD("0 (never) or N elements");
    } else if (!strcmp(key, "accum")) {
        if ((i = index_of(v, ACCUM_NAMES, 3)) < 0) return BAD("f32, f64 or bf16");
        p->accum = (drift_accum)i;
    } else if (!strcmp(key, "reduce")) {
        if (!strcmp(v, "sequential")) {
            p->reduce = DRIFT_REDUCE_SEQUENTIAL;
            p->split_k = 1;
        } else if (!strcmp(v, "pairwise")) {
            p->reduce = DRIFT_REDUCE_PAIRWISE;
            p->split_k = 1;
        } else if (!strncmp(v, "blocked", 7)) {
            int s = 4;
            if (v[7] == ':' ? parse_int(v + 8, 1, 4096, &s) : v[7] != 0)
                return BAD("blocked:S with 1 <= S <= 4096");
            p->reduce = DRIFT_REDUCE_BLOCKED;
            p->split_k = s;
        } else {
            return BAD("sequential, pairwise or blocked:S");
        }
    } else if (!strcmp(key, "attn")) {
        if (!strcmp(v, "two-pass")) {
            /* the block is unused by two-pass (CPU and GPU): back to the
             * default so that to_spec, which omits it, stays exact */
            p->attn = DRIFT_ATTN_TWO_PASS;
            p->attn_block = DEFAULTS.attn_block;
        } else if (!strncmp(v, "online", 6)) {
            int b = 64;
            if (v[6] == ':' ? parse_int(v + 7, 1, 1 << 20, &b) : v[6] != 0)
                return BAD("online:B with B >= 1");
            p->attn = DRIFT_ATTN_ONLINE;
            p->attn_block = b;
        } else {
            return BAD("two-pass or online:B");
        }
    } else if (!strcmp(key, "exp")) {
        if (!strcmp(v, "libm")) p->exp = DRIFT_EXP_LIBM;
        else if (!strcmp(v, "fast")) p->exp = DRIFT_EXP_FAST;
        else return BAD("libm or fast");
    } else if (!strcmp(key, "threads")) {
        if (parse_int(v, 0, 1024, &p->threads)) return BAD("0..1024, 0 = OpenMP default");
    } else if (!strcmp(key, "backend")) {
        if (!strcmp(v, "cpu")) p->backend = DRIFT_BACKEND_CPU;
        else if (!strcmp(v, "cuda")) p->backend = DRIFT_BACKEND_CUDA;
        else return BAD("cpu or cuda");
    } else if (!strcmp(key, "batch_invariant")) {
        if (!strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "on")) p->batch_invariant = 1;
        else if (!strcmp(v, "0") || !strcmp(v, "false") || !strcmp(v, "off")) p->batch_invariant = 0;
        else return BAD("0 or 1");
    } else if (!strcmp(key, "isa")) {
        if (num_isa_parse(v, &p->isa)) return BAD("auto, ref, scalar, avx2 or avx512");
    } else if (!strcmp(key, "group")) {
        if (parse_int(v, 2, 4096, &p->group_size) || p->group_size % 2) return BAD("32 or 128");
    } else if (!strcmp(key, "wscale")) {
        if ((i = index_of(v, SCALE_NAMES, 2)) < 0) return BAD("per-channel or per-tensor");
        p->weight_scale = (drift_scale_mode)i;
    } else if (!strcmp(key, "gemm")) {
        if ((i = index_of(v, GEMM_NAMES, 2)) < 0) return BAD("kernel or vendor");
        p->gemm = (drift_gemm)i;
    } else {
        return drift_error_set(err, DRIFT_ERR_NOT_FOUND, "profile: unknown key '%s'", key);
    }
    snprintf(p->name, sizeof p->name, "custom");
    /* a preset stays named only while its axis keeps the values it set */
    for (int a = 0; a < DRIFT_AXIS_COUNT; a++)
        if (!axis_same(&before, p, (drift_profile_axis)a)) memset(axis_name_field(p, (drift_profile_axis)a), 0, DRIFT_PROFILE_NAME_MAX);
    return DRIFT_OK;
#undef BAD
}

static drift_status apply_preset(drift_numeric_profile *p, drift_profile_axis axis, const char *name,
                                 drift_error *err) {
    size_t n;
    const preset *t = axis_table(axis, &n);
    for (size_t i = 0; i < n; i++)
        if (!strcmp(name, t[i].name)) {
            axis_copy(p, &DEFAULTS, axis);
            drift_status st = apply_spec(p, t[i].spec, 0, err);
            if (st) return st;
            char *f = axis_name_field(p, axis);
            memset(f, 0, DRIFT_PROFILE_NAME_MAX);
            snprintf(f, DRIFT_PROFILE_NAME_MAX, "%s", t[i].name);
            snprintf(p->name, sizeof p->name, "custom");
            return DRIFT_OK;
        }
    char names[512];
    size_t len = 0;
    names[0] = 0;
    for (size_t i = 0; i < n && len < sizeof names; i++)
        len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", i ? ", " : "", t[i].name);
    return drift_error_set(err, DRIFT_ERR_INVALID, "profile: unknown %s preset '%s' (%s)", AXIS_NAMES[axis], name, names);
}

drift_status drift_profile_validate(const drift_numeric_profile *p, drift_error *err) {
    if (p->weights != DRIFT_DTYPE_NATIVE && ((int)p->weights < 0 || p->weights >= DRIFT_DTYPE_COUNT))
        return drift_error_set(err, DRIFT_ERR_INVALID, "profile: weights format %d unknown",
                               (int)p->weights);
    /* The reference kernels compute one thing: float64, sequential, two-pass
     * softmax, libm exp. Asking them for anything else is an error, not a
     * silent no-op. */
    if (p->isa == DRIFT_ISA_REF && p->accum != DRIFT_ACCUM_F64)
        return drift_error_set(err, DRIFT_ERR_INVALID,
                               "profile: isa=ref always accumulates in f64 (accum=%s asked); "
                               "use isa=scalar for other accumulators",
                               ACCUM_NAMES[p->accum]);
    if (p->isa == DRIFT_ISA_REF && p->reduce != DRIFT_REDUCE_SEQUENTIAL)
        return drift_error_set(err, DRIFT_ERR_INVALID,
                               "profile: isa=ref always reduces sequentially (reduce asked); "
                               "use isa=scalar or a SIMD isa");
    if (p->isa == DRIFT_ISA_REF && p->attn != DRIFT_ATTN_TWO_PASS)
        return drift_error_set(err, DRIFT_ERR_INVALID,
                               "profile: isa=ref always uses two-pass attention (attn asked)");
    if (p->isa == DRIFT_ISA_REF && p->exp != DRIFT_EXP_LIBM)
        return drift_error_set(err, DRIFT_ERR_INVALID,
                               "profile: isa=ref always uses libm exp (exp=fast asked)");
    if (p->split_k < 1) return drift_error_set(err, DRIFT_ERR_INVALID, "profile: split_k < 1");
    if (p->attn_block < 1) return drift_error_set(err, DRIFT_ERR_INVALID, "profile: attn block < 1");
    if (p->weights == DRIFT_DTYPE_INT4 && p->group_size != 32 && p->group_size != 128)
        return drift_error_set(err, DRIFT_ERR_INVALID, "profile: int4 group %d (32 or 128)",
                               p->group_size);
    if ((int)p->gemm < 0 || p->gemm > DRIFT_GEMM_VENDOR)
        return drift_error_set(err, DRIFT_ERR_INVALID, "profile: gemm %d unknown", (int)p->gemm);
    if (p->backend == DRIFT_BACKEND_CUDA && p->accum == DRIFT_ACCUM_BF16)
        return drift_error_set(err, DRIFT_ERR_INVALID,
                               "profile: backend=cuda does not support accum=bf16 (the GPU "
                               "accumulates in f32, or f64 in its SIMT kernels)");
    if (p->kv == DRIFT_DTYPE_INT8)
        return drift_error_set(err, DRIFT_ERR_INVALID, "profile: kv=int8 is not a KV-cache format");
    drift_dtype dt = p->dtype == DRIFT_DTYPE_NATIVE ? p->acts : p->dtype;
    if (p->store && dt != DRIFT_DTYPE_F32 && dt != DRIFT_DTYPE_BF16 && dt != DRIFT_DTYPE_F16)
        return drift_error_set(err, DRIFT_ERR_INVALID,
                               "profile: store=dtype with acts=%s needs dtype=f32|bf16|f16 (the tensors "
                               "between kernels are not quantized per token)", drift_dtype_name(p->acts));
    int kernel_flags = p->norm_round || p->swiglu_round || p->rope_lowp || p->scores_lowp || p->probs_lowp;
    int hw = p->lanes || p->mma || p->dot_bf16 || !p->fma || p->tree || p->acc_bits != 23 || p->promote;
    if (p->isa == DRIFT_ISA_REF && (kernel_flags || hw))
        return drift_error_set(err, DRIFT_ERR_INVALID,
                               "profile: isa=ref computes its own fixed numerics: the keys norm, swiglu, "
                               "rope, scores, probs and the hardware keys (lanes, fma, tree, dot, mma, "
                               "accbits, promote) need a CPU isa (avx2)");
    if (hw && p->backend == DRIFT_BACKEND_CUDA)
        return drift_error_set(err, DRIFT_ERR_INVALID,
                               "profile: the hardware keys (lanes, fma, tree, dot, mma, accbits, promote) "
                               "emulate CPU/GPU dot products on the CPU: backend=cpu only");
    if ((kernel_flags || p->store || p->bias_unfused || p->logits_lowp || p->addnorm_f32 ||
         p->resid != DRIFT_DTYPE_NATIVE || p->dtype != DRIFT_DTYPE_NATIVE) && p->backend == DRIFT_BACKEND_CUDA)
        return drift_error_set(err, DRIFT_ERR_INVALID,
                               "profile: dtype, resid, store, norm, addnorm, swiglu, rope, scores, probs, "
                               "bias and logits are CPU-engine keys (backend=cpu only)");
    if (hw && (p->accum != DRIFT_ACCUM_F32 || p->reduce == DRIFT_REDUCE_PAIRWISE))
        return drift_error_set(err, DRIFT_ERR_INVALID,
                               "profile: the hardware keys define the accumulator themselves: they need "
                               "accum=f32 and reduce=sequential or blocked:S");
    if (p->mma && (p->lanes || p->dot_bf16 || !p->fma || p->tree))
        return drift_error_set(err, DRIFT_ERR_INVALID,
                               "profile: mma=K is a matrix unit (one accumulator per output): lanes, fma, "
                               "tree and dot do not apply to it");
    if (!p->mma && (p->acc_bits != 23 || p->promote))
        return drift_error_set(err, DRIFT_ERR_INVALID, "profile: accbits and promote need mma=K");
    if (p->mma && p->promote && p->promote % p->mma)
        return drift_error_set(err, DRIFT_ERR_INVALID, "profile: promote=%d is not a multiple of mma=%d",
                               p->promote, p->mma);
    if (!p->lanes && (p->dot_bf16 || !p->fma || p->tree))
        return drift_error_set(err, DRIFT_ERR_INVALID, "profile: fma=0, tree=linear and dot=bf16 need lanes=L");
    if (p->dot_bf16 && p->lanes < 8)
        return drift_error_set(err, DRIFT_ERR_INVALID, "profile: dot=bf16 needs lanes >= 8");
#ifndef DRIFT_HAVE_CUDA
    if (p->backend == DRIFT_BACKEND_CUDA)
        return drift_error_set(err, DRIFT_ERR_UNSUPPORTED,
                               "profile: backend=cuda: this build has no CUDA backend (configured "
                               "without nvcc or without a GPU visible, or DRIFT_CUDA=OFF; `make CUDA=ON` "
                               "builds it)");
#endif
    return DRIFT_OK;
}

#ifdef DRIFT_HAVE_CUDA
/* Whether the kernel shows an NVIDIA GPU at all: a device node /dev/nvidiaN
 * (the Linux driver's; a container gets those of the GPUs it is given) or
 * /dev/dxg (WSL2). Without one CUDA cannot see a GPU either, and asking it
 * would load and start the CUDA runtime for nothing. */
static int cuda_node_visible(void) {
    DIR *d = opendir("/dev");
    if (!d) return 1; /* cannot tell: let CUDA say */
    int found = 0;
    for (struct dirent *e; !found && (e = readdir(d));)
        found = !strcmp(e->d_name, "dxg") ||
                (!strncmp(e->d_name, "nvidia", 6) && e->d_name[6] >= '0' && e->d_name[6] <= '9');
    closedir(d);
    return found;
}
#endif

int drift_cuda_device_count(void) {
#ifdef DRIFT_HAVE_CUDA
    return cuda_node_visible() ? dcu_device_count() : 0;
#else
    return 0;
#endif
}

int drift_cuda_device_name(char *out, size_t n) {
    if (n) out[0] = 0;
#ifdef DRIFT_HAVE_CUDA
    dcu_device_info info;
    drift_error e = {0};
    if (drift_cuda_device_count() > 0 && dcu_device_get_info(&info, &e) == DRIFT_OK) {
        snprintf(out, n, "%s", info.short_name);
        return 0;
    }
#endif
    return -1;
}

/* Applies "k=v&k=v" to *p in order. profile= is allowed only first. */
static drift_status apply_spec(drift_numeric_profile *p, const char *spec, int allow_profile,
                               drift_error *err) {
    if (!spec || !*spec) return DRIFT_OK;
    char *s = util_strdup(spec);
    if (!s) return drift_error_set(err, DRIFT_ERR_NOMEM, "profile: spec copy");
    drift_status st = DRIFT_OK;
    int idx = 0;
    char *save = NULL;
    for (char *tok = strtok_r(s, "&,", &save); tok; tok = strtok_r(NULL, "&,", &save), idx++) {
        char *eq = strchr(tok, '=');
        if (!eq) {
            st = drift_error_set(err, DRIFT_ERR_INVALID, "profile: '%s' is not key=value", tok);
            break;
        }
        *eq = 0;
        if (!strcmp(tok, "profile") && (idx > 0 || !allow_profile)) {
            st = drift_error_set(err, DRIFT_ERR_INVALID,
                                 "profile: profile=%s must come first in the spec", eq + 1);
            break;
        }
        st = drift_profile_set(p, tok, eq + 1, err);
        if (st == DRIFT_ERR_NOT_FOUND)
            st = drift_error_set(err, DRIFT_ERR_INVALID, "profile: unknown key '%s'", tok);
        if (st) break;
    }
    free(s);
    return st;
}

drift_status drift_profile_parse(const char *spec, drift_numeric_profile *p, drift_error *err) {
    drift_status st = drift_profile_get("cpu-f32", p, err);
    if (st) return st;
    st = apply_spec(p, spec, 1, err);
    if (st) return st;
    return drift_profile_validate(p, err);
}

static void reduce_text(const drift_numeric_profile *p, char *out, size_t n) {
    if (p->reduce == DRIFT_REDUCE_BLOCKED) snprintf(out, n, "blocked:%d", p->split_k);
    else snprintf(out, n, "%s", p->reduce == DRIFT_REDUCE_PAIRWISE ? "pairwise" : "sequential");
}

static void attn_text(const drift_numeric_profile *p, char *out, size_t n) {
    if (p->attn == DRIFT_ATTN_ONLINE) snprintf(out, n, "online:%d", p->attn_block);
    else snprintf(out, n, "two-pass");
}

char *drift_profile_to_spec(const drift_numeric_profile *p) {
    char red[32], att[32];
    reduce_text(p, red, sizeof red);
    attn_text(p, att, sizeof att);
    int cuda = p->backend == DRIFT_BACKEND_CUDA;
    util_buf b = {0};
    /* presets first: the keys after them set the values they already have,
     * so the names stay in effect when parsed back */
    if (p->precision_preset[0]) buf_printf(&b, "precision=%s&", p->precision_preset);
    if (p->framework_preset[0]) buf_printf(&b, "framework=%s&", p->framework_preset);
    if (p->hardware_preset[0]) buf_printf(&b, "hardware=%s&", p->hardware_preset);
    buf_printf(&b, "weights=%s&wscale=%s&group=%d&acts=%s&kv=%s&accum=%s&reduce=%s&"
                   "attn=%s&exp=%s&threads=%d&backend=%s&batch_invariant=%d&isa=%s%s%s",
               drift_dtype_name(p->weights), SCALE_NAMES[p->weight_scale], p->group_size,
               drift_dtype_name(p->acts), drift_dtype_name(p->kv), ACCUM_NAMES[p->accum], red, att,
               p->exp == DRIFT_EXP_FAST ? "fast" : "libm", p->threads, cuda ? "cuda" : "cpu",
               p->batch_invariant, num_isa_name(p->isa), cuda ? "&gemm=" : "", cuda ? GEMM_NAMES[p->gemm] : "");
    /* the newer keys only where they differ from the defaults, so that the
     * specs of profiles that do not use them are unchanged */
    if (p->dtype != DEFAULTS.dtype) buf_printf(&b, "&dtype=%s", drift_dtype_name(p->dtype));
    if (p->resid != DEFAULTS.resid) buf_printf(&b, "&resid=%s", drift_dtype_name(p->resid));
    for (int i = 0; i < N_FLAGS; i++)
        if (flag_get(p, i) != flag_get(&DEFAULTS, i)) buf_printf(&b, "&%s=%s", FLAG_KEYS[i], FLAG_VALUES[i][flag_get(p, i)]);
    if (p->lanes != DEFAULTS.lanes) buf_printf(&b, "&lanes=%d", p->lanes);
    if (p->fma != DEFAULTS.fma) buf_printf(&b, "&fma=%d", p->fma);
    if (p->mma != DEFAULTS.mma) buf_printf(&b, "&mma=%d", p->mma);
    if (p->acc_bits != DEFAULTS.acc_bits) buf_printf(&b, "&accbits=%d", p->acc_bits);
    if (p->promote != DEFAULTS.promote) buf_printf(&b, "&promote=%d", p->promote);
    return buf_steal(&b);
}

/* backend=cuda: positions per attention split when batch-invariant:
 * attn_block with attn=online, the backend's fixed 256 with attn=two-pass
 * (model/cuda/cuda_backend.cu, attn_chunk). */
#define CUDA_TWO_PASS_SPLIT 256

/* "split:B" (fixed, batch-invariant) or "split:auto" (split count chosen from
 * the batch size). */
static void cuda_split_text(const drift_numeric_profile *p, char *out, size_t n) {
    if (p->batch_invariant)
        snprintf(out, n, "split:%d", p->attn == DRIFT_ATTN_ONLINE ? p->attn_block : CUDA_TWO_PASS_SPLIT);
    else snprintf(out, n, "split:auto");
}

void drift_profile_precision(const drift_numeric_profile *p, char *out, size_t n) {
    if (p->precision_preset[0]) snprintf(out, n, "%s", p->precision_preset);
    else snprintf(out, n, "%s", drift_dtype_name(p->weights));
}

void drift_profile_hardware(const drift_numeric_profile *p, char *out, size_t n) {
    if (p->hardware_preset[0]) {
        snprintf(out, n, "%s", p->hardware_preset);
        return;
    }
    if (p->backend == DRIFT_BACKEND_CUDA) {
        snprintf(out, n, "cuda");
        return;
    }
    drift_isa isa = p->isa == DRIFT_ISA_REF ? DRIFT_ISA_SCALAR : num_isa_resolve(p->isa);
    util_buf b = {0};
    buf_printf(&b, "cpu-%s", num_isa_name(isa));
    if (p->lanes) buf_printf(&b, "/lanes-%d", p->lanes);
    if (!p->fma) buf_printf(&b, "/nofma");
    if (p->tree) buf_printf(&b, "/tree-linear");
    if (p->dot_bf16) buf_printf(&b, "/dot-bf16");
    if (p->mma) buf_printf(&b, "/mma-%d/acc-%d/promote-%d", p->mma, p->acc_bits, p->promote);
    char *s = buf_steal(&b);
    snprintf(out, n, "%s", s ? s : "?");
    free(s);
}

/* The framework keys that differ from the defaults, "/key-value" each. */
static void framework_flags_text(const drift_numeric_profile *p, char *out, size_t n) {
    size_t len = 0;
    out[0] = 0;
    if (p->resid != DEFAULTS.resid && len < n)
        len += (size_t)snprintf(out + len, n - len, "/resid-%s", drift_dtype_name(p->resid));
    for (int i = 1; i < 9 && len < n; i++) /* norm .. logits: the framework's flags */
        if (flag_get(p, i) != flag_get(&DEFAULTS, i))
            len += (size_t)snprintf(out + len, n - len, "/%s-%s", FLAG_KEYS[i], FLAG_VALUES[i][flag_get(p, i)]);
}

void drift_profile_framework(const drift_numeric_profile *p, char *out, size_t n) {
    if (p->framework_preset[0]) {
        snprintf(out, n, "%s", p->framework_preset);
        return;
    }
    char red[32], att[32], flags[160];
    framework_flags_text(p, flags, sizeof flags);
    reduce_text(p, red, sizeof red);
    attn_text(p, att, sizeof att);
    if (p->backend == DRIFT_BACKEND_CUDA) {
        char spl[32];
        cuda_split_text(p, spl, sizeof spl);
        /* reduce is not in it: the GPU's matmuls fix their own order (gemm) */
        snprintf(out, n, "driftbench-embedded/cuda/gemm-%s/attn-%s/exp-%s/acc-%s%s", GEMM_NAMES[p->gemm],
                 spl, p->exp == DRIFT_EXP_FAST ? "fast" : "libm", ACCUM_NAMES[p->accum],
                 p->batch_invariant ? "" : "/batch-variant");
        return;
    }
    if (p->isa == DRIFT_ISA_REF) {
        snprintf(out, n, "driftbench-embedded/ref");
        return;
    }
    drift_isa isa = num_isa_resolve(p->isa);
    snprintf(out, n, "driftbench-embedded/%s/%s/%s/exp-%s/acc-%s%s%s", num_isa_name(isa), red, att,
             p->exp == DRIFT_EXP_FAST ? "fast" : "libm", ACCUM_NAMES[p->accum],
             p->batch_invariant ? "" : "/batch-variant", flags);
}

char *drift_profile_describe(const drift_numeric_profile *p) {
    util_buf b = {0};
    char red[32], att[32];
    reduce_text(p, red, sizeof red);
    attn_text(p, att, sizeof att);
    const char *summary = "";
    for (size_t i = 0; i < N_PROFILES; i++)
        if (!strcmp(p->name, PROFILES[i].name)) summary = PROFILES[i].summary;
    buf_printf(&b, "profile %s%s%s\n", p->name, *summary ? ": " : "", summary);
    buf_printf(&b, "  weights=%-12s weight matrices are stored and multiplied in this format",
               drift_dtype_name(p->weights));
    if (p->weights == DRIFT_DTYPE_FP8_E4M3 || p->weights == DRIFT_DTYPE_FP8_E5M2)
        buf_printf(&b, " (%s scale)", SCALE_NAMES[p->weight_scale]);
    if (p->weights == DRIFT_DTYPE_INT4) buf_printf(&b, " (group %d)", p->group_size);
    buf_puts(&b, "\n");
    buf_printf(&b, "  acts=%-15s activations are rounded to this format between ops\n",
               drift_dtype_name(p->acts));
    buf_printf(&b, "  kv=%-17s KV-cache vectors are stored in this format\n",
               drift_dtype_name(p->kv));
    buf_printf(&b, "  accum=%-14s matmul and dot-product accumulator\n", ACCUM_NAMES[p->accum]);
    buf_printf(&b, "  reduce=%-13s order of the sum over the reduction dimension%s\n", red,
               p->backend == DRIFT_BACKEND_CUDA ? " (CPU only: the GPU's order is gemm's)" : "");
    if (p->backend == DRIFT_BACKEND_CUDA) {
        char spl[32];
        cuda_split_text(p, spl, sizeof spl);
        buf_printf(&b, "  attn=%-15s on cuda: split-KV attention, %s (online softmax per split, "
                   "splits combined in order)\n", att, p->batch_invariant ? spl : "split count chosen from the batch size");
        buf_printf(&b, "  gemm=%-15s %s\n", GEMM_NAMES[p->gemm],
                   p->gemm == DRIFT_GEMM_VENDOR
                       ? "cuBLAS / cuBLASLt (fp8 e4m3) matmuls: the library picks the algorithm by shape"
                       : "DriftBench's GPU kernels: reduction order fixed by K (WMMA tensor cores for "
                         "bf16/f16, SIMT otherwise)");
    } else {
        buf_printf(&b, "  attn=%-15s attention softmax algorithm\n", att);
    }
    buf_printf(&b, "  exp=%-16s exponential in softmax and silu\n",
               p->exp == DRIFT_EXP_FAST ? "fast" : "libm");
    buf_printf(&b, "  threads=%-12d OpenMP threads (0 = default); never changes results%s\n",
               p->threads, p->backend == DRIFT_BACKEND_CUDA ? " (CPU only)" : "");
    if (p->backend == DRIFT_BACKEND_CUDA)
        buf_printf(&b, "  backend=%-12s device: the whole forward pass on the GPU\n", "cuda");
    else
        buf_printf(&b, "  backend=%-12s device\n", "cpu");
    buf_printf(&b, "  batch_invariant=%-4d %s\n", p->batch_invariant,
               p->batch_invariant ? "a row's result never depends on the batch it is in"
                                  : "reduction split depends on the batch size (study mode)");
    buf_printf(&b, "  isa=%-16s kernel set (auto -> %s on this CPU)%s\n", num_isa_name(p->isa),
               num_isa_name(p->isa == DRIFT_ISA_REF ? DRIFT_ISA_REF : num_isa_resolve(p->isa)),
               p->backend == DRIFT_BACKEND_CUDA ? "; CPU only" : "");
    /* where values are rounded */
    drift_dtype dt = p->dtype == DRIFT_DTYPE_NATIVE ? p->acts : p->dtype;
    buf_printf(&b, "  dtype=%-14s tensors between kernels (%s)\n",
               p->dtype == DRIFT_DTYPE_NATIVE ? "acts" : drift_dtype_name(p->dtype), drift_dtype_name(dt));
    buf_printf(&b, "  resid=%-14s residual stream rounded to this after each add\n",
               p->resid == DRIFT_DTYPE_NATIVE ? "dtype" : drift_dtype_name(p->resid));
    static const char *FLAG_TEXT[] = {
        "GEMM, RoPE, norm and SwiGLU outputs stored in dtype (f32: only matmul inputs, embedding and residual rounded)",
        "RMSNorm: round: x*rsqrt(ms) rounded to dtype before the weight multiply; f32: one rounding",
        "norm after a residual add reads: rounded = the rounded residual, f32 = the f32 sum (fused add+norm)",
        "SwiGLU: round: silu(gate) rounded to dtype before the product; fused: f32 inside",
        "RoPE: dtype: cos/sin in dtype, each product and the sum rounded; dtype-table: cos/sin in dtype, "
        "f32 arithmetic, one rounding; f32: computed in f32",
        "attention scores q.k*scale: dtype = rounded to dtype",
        "attention weights exp(s - m): dtype = rounded to dtype before multiplying V (the sum stays f32)",
        "bias: unfused = GEMM output rounded, bias added, rounded again; fused = one rounding",
        "logits: dtype = the LM head writes them in dtype",
        "combining tree of the lanes: halving (a[i] += a[i+h]) or linear ((a0+a1)+a2 ...)",
        "dot products: bf16 = VDPBF16PS (bf16 pairs, odd then even, DAZ/FTZ, RNE)"};
    for (int i = 0; i < N_FLAGS; i++) {
        char kv[48];
        snprintf(kv, sizeof kv, "%s=%s", FLAG_KEYS[i], FLAG_VALUES[i][flag_get(p, i)]);
        buf_printf(&b, "  %-20s %s\n", kv, FLAG_TEXT[i]);
    }
    buf_printf(&b, "  lanes=%-14d accumulator lanes per dot product (0 = the isa's own kernels)\n", p->lanes);
    buf_printf(&b, "  fma=%-16d %s\n", p->fma, p->fma ? "fused multiply-add" : "product rounded before the add");
    buf_printf(&b, "  mma=%-16d matrix-unit chunk of products (0 = lanes path)\n", p->mma);
    buf_printf(&b, "  accbits=%-12d mantissa bits the mma accumulator keeps (truncation)\n", p->acc_bits);
    buf_printf(&b, "  promote=%-12d elements between promotions of the mma accumulator to f32 (0 = never)\n", p->promote);
    char hwn[128], fwn[160], prn[64];
    drift_profile_hardware(p, hwn, sizeof hwn);
    drift_profile_framework(p, fwn, sizeof fwn);
    drift_profile_precision(p, prn, sizeof prn);
    buf_printf(&b, "  recorded as: precision %s, framework %s, hardware %s\n", prn, fwn, hwn);
    return buf_steal(&b);
}

char *drift_profile_to_json(const drift_numeric_profile *p) {
    char red[32], att[32], prec[64], fw[160];
    reduce_text(p, red, sizeof red);
    attn_text(p, att, sizeof att);
    drift_profile_precision(p, prec, sizeof prec);
    drift_profile_framework(p, fw, sizeof fw);
    json_t *o = json_pack("{s:s, s:s, s:s, s:i, s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:s, s:b, "
                          "s:s, s:s, s:s}",
                          "name", p->name, "weights", drift_dtype_name(p->weights), "wscale",
                          SCALE_NAMES[p->weight_scale], "group", p->group_size, "acts",
                          drift_dtype_name(p->acts), "kv", drift_dtype_name(p->kv), "accum",
                          ACCUM_NAMES[p->accum], "reduce", red, "attn", att, "exp",
                          p->exp == DRIFT_EXP_FAST ? "fast" : "libm", "threads", p->threads,
                          "backend", p->backend == DRIFT_BACKEND_CUDA ? "cuda" : "cpu",
                          "batch_invariant", p->batch_invariant, "isa", num_isa_name(p->isa),
                          "precision", prec, "framework", fw);
    if (!o) return NULL;
    if (p->backend == DRIFT_BACKEND_CUDA) json_object_set_new(o, "gemm", json_string(GEMM_NAMES[p->gemm]));
    char hw[128];
    drift_profile_hardware(p, hw, sizeof hw);
    json_object_set_new(o, "hardware", json_string(hw));
    json_object_set_new(o, "dtype", json_string(p->dtype == DRIFT_DTYPE_NATIVE ? "acts" : drift_dtype_name(p->dtype)));
    json_object_set_new(o, "resid", json_string(p->resid == DRIFT_DTYPE_NATIVE ? "dtype" : drift_dtype_name(p->resid)));
    for (int i = 0; i < N_FLAGS; i++) json_object_set_new(o, FLAG_KEYS[i], json_string(FLAG_VALUES[i][flag_get(p, i)]));
    json_object_set_new(o, "lanes", json_integer(p->lanes));
    json_object_set_new(o, "fma", json_integer(p->fma));
    json_object_set_new(o, "mma", json_integer(p->mma));
    json_object_set_new(o, "accbits", json_integer(p->acc_bits));
    json_object_set_new(o, "promote", json_integer(p->promote));
    json_object_set_new(o, "precision_preset", json_string(p->precision_preset));
    json_object_set_new(o, "framework_preset", json_string(p->framework_preset));
    json_object_set_new(o, "hardware_preset", json_string(p->hardware_preset));
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    return s;
}

/* ---------------------------------------------------------------------------
 * Descriptors (profile.h documents each)
 * ------------------------------------------------------------------------- */
/* Mantissa and exponent bits of a format (integers: magnitude bits, 0). */
static void format_bits(drift_dtype t, double *mant, double *exp) {
    switch (t) {
    case DRIFT_DTYPE_F16: *mant = 10; *exp = 5; return;
    case DRIFT_DTYPE_BF16: *mant = 7; *exp = 8; return;
    case DRIFT_DTYPE_FP8_E4M3: *mant = 3; *exp = 4; return;
    case DRIFT_DTYPE_FP8_E5M2: *mant = 2; *exp = 5; return;
    case DRIFT_DTYPE_INT8:
    case DRIFT_DTYPE_Q8_0: *mant = 7; *exp = 0; return;
    case DRIFT_DTYPE_INT4:
    case DRIFT_DTYPE_Q4_0: *mant = 3; *exp = 0; return;
    case DRIFT_DTYPE_MXFP4:
    case DRIFT_DTYPE_NVFP4: *mant = 1; *exp = 2; return;
    default: *mant = 23; *exp = 8; return; /* f32, native */
    }
}

static double weight_block(const drift_numeric_profile *p) {
    switch (p->weights) {
    case DRIFT_DTYPE_INT8: return -1;
    case DRIFT_DTYPE_FP8_E4M3:
    case DRIFT_DTYPE_FP8_E5M2: return p->weight_scale == DRIFT_SCALE_PER_TENSOR ? -2 : -1;
    case DRIFT_DTYPE_INT4: return p->group_size;
    case DRIFT_DTYPE_MXFP4:
    case DRIFT_DTYPE_Q8_0:
    case DRIFT_DTYPE_Q4_0: return 32;
    case DRIFT_DTYPE_NVFP4: return 16;
    default: return 0;
    }
}

size_t drift_profile_descriptors(const drift_numeric_profile *p, const char **names, double *values, size_t cap) {
    double wm, we, am, ae, km, ke, dm, de, rm, re;
    format_bits(p->weights, &wm, &we);
    format_bits(p->acts, &am, &ae);
    format_bits(p->kv, &km, &ke);
    drift_dtype dt = p->dtype == DRIFT_DTYPE_NATIVE ? p->acts : p->dtype;
    format_bits(dt, &dm, &de);
    format_bits(p->resid == DRIFT_DTYPE_NATIVE ? dt : p->resid, &rm, &re);
    (void)de;
    (void)re;
    double acc = p->mma ? p->acc_bits : p->accum == DRIFT_ACCUM_F64 || p->isa == DRIFT_ISA_REF ? 52 : p->accum == DRIFT_ACCUM_BF16 ? 7 : 23;
    double lanes = p->mma ? 1 : p->lanes ? p->lanes : p->isa == DRIFT_ISA_REF ? 8 : 0;
    if (!p->mma && !p->lanes && p->isa != DRIFT_ISA_REF) {
        drift_isa isa = num_isa_resolve(p->isa);
        lanes = isa == DRIFT_ISA_AVX512 ? 16 : isa == DRIFT_ISA_AVX2 ? 8 : 1;
    }
    const struct {
        const char *name;
        double v;
    } d[] = {
        {"w_mant", wm},
        {"w_exp", we},
        {"w_block", weight_block(p)},
        {"a_mant", am},
        {"a_exp", ae},
        {"a_dynamic", p->acts == DRIFT_DTYPE_FP8_E4M3 || p->acts == DRIFT_DTYPE_FP8_E5M2 || p->acts == DRIFT_DTYPE_INT8},
        {"kv_mant", km},
        {"kv_exp", ke},
        {"dtype_mant", dm},
        {"resid_mant", rm},
        {"store_lowp", p->store && dt != DRIFT_DTYPE_F32},
        {"norm_round", p->norm_round},
        {"addnorm_f32", p->addnorm_f32},
        {"swiglu_round", p->swiglu_round},
        {"rope_lowp", p->rope_lowp == DRIFT_ROPE_DTYPE ? 1 : p->rope_lowp == DRIFT_ROPE_TABLE ? 0.5 : 0},
        {"scores_lowp", p->scores_lowp},
        {"probs_lowp", p->probs_lowp},
        {"bias_unfused", p->bias_unfused},
        {"logits_lowp", p->logits_lowp},
        {"attn_block", p->attn == DRIFT_ATTN_ONLINE ? p->attn_block : 0},
        {"split_k", p->reduce == DRIFT_REDUCE_BLOCKED ? p->split_k : 1},
        {"exp_fast", p->exp == DRIFT_EXP_FAST},
        {"acc_mant", acc},
        {"lanes", lanes},
        {"fma", p->mma ? 1 : p->lanes ? p->fma : 1},
        {"tree_linear", p->tree},
        {"dot_bf16", p->dot_bf16},
        {"mma_k", p->mma},
        {"promote", p->mma ? p->promote : 0},
        {"acc_trunc", p->mma != 0},
    };
    size_t n = sizeof d / sizeof d[0];
    for (size_t i = 0; i < n && i < cap; i++) {
        if (names) names[i] = d[i].name;
        if (values) values[i] = d[i].v;
    }
    return n;
}
