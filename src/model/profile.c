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
    .batch_invariant = 1, .isa = DRIFT_ISA_AUTO, .gemm = DRIFT_GEMM_KERNEL};

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

/* Formats activations and the KV cache may take (the others need side
 * scales or blocks that a vector rounded between ops does not have). */
static const drift_dtype ACT_FORMATS[] = {DRIFT_DTYPE_F32, DRIFT_DTYPE_BF16, DRIFT_DTYPE_F16,
                                          DRIFT_DTYPE_FP8_E4M3, DRIFT_DTYPE_FP8_E5M2};
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
    if (!strcmp(key, "profile")) {
        return drift_profile_get(v, p, err);
    } else if (!strcmp(key, "weights") || !strcmp(key, "precision")) {
        drift_dtype t;
        if (drift_dtype_parse(v, &t)) return BAD("a format name: f32 bf16 f16 fp8-e4m3 ...");
        p->weights = t;
    } else if (!strcmp(key, "acts") || !strcmp(key, "kv")) {
        drift_dtype t;
        if (drift_dtype_parse(v, &t) || !is_act_format(t)) {
            char what[96];
            act_formats_text(what, sizeof what);
            return BAD(what);
        }
        if (!strcmp(key, "acts")) p->acts = t;
        else p->kv = t;
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
    return DRIFT_OK;
#undef BAD
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
    return util_asprintf("weights=%s&wscale=%s&group=%d&acts=%s&kv=%s&accum=%s&reduce=%s&"
                          "attn=%s&exp=%s&threads=%d&backend=%s&batch_invariant=%d&isa=%s%s%s",
                          drift_dtype_name(p->weights), SCALE_NAMES[p->weight_scale],
                          p->group_size, drift_dtype_name(p->acts), drift_dtype_name(p->kv),
                          ACCUM_NAMES[p->accum], red, att,
                          p->exp == DRIFT_EXP_FAST ? "fast" : "libm", p->threads,
                          cuda ? "cuda" : "cpu", p->batch_invariant, num_isa_name(p->isa),
                          cuda ? "&gemm=" : "", cuda ? GEMM_NAMES[p->gemm] : "");
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
    snprintf(out, n, "%s", drift_dtype_name(p->weights));
}

void drift_profile_framework(const drift_numeric_profile *p, char *out, size_t n) {
    char red[32], att[32];
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
    snprintf(out, n, "driftbench-embedded/%s/%s/%s/exp-%s/acc-%s%s", num_isa_name(isa), red, att,
             p->exp == DRIFT_EXP_FAST ? "fast" : "libm", ACCUM_NAMES[p->accum],
             p->batch_invariant ? "" : "/batch-variant");
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
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    return s;
}
