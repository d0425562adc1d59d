/* cuda.c - throughput of the embedded engine's CUDA backend (issue 8).
 *
 *   bench_cuda [OUT.json] [--models DIR] [--big PATH|none] [--prompt 512]
 *              [--ctx 128] [--gen 32] [--batch 64] [--batch-big 1024] [--iters 5]
 *              [--gpu-profiles cuda-f32,cuda-bf16] [--big-profiles cuda-f32,cuda-bf16,cuda-fp8]
 *              [--cpu-profile cpu-f32] [--cpu-threads N] [--cpu-steps 8] [--cpu-iters 3]
 *              [--no-cpu] [--copy-mib 4096] [--gemm-n 8192]
 *
 * What it measures, each figure the median of --iters timed iterations after
 * a warm-up (min and max go to the JSON), wall clock (CLOCK_MONOTONIC):
 *  1. The GPU: dcu_device_get_info; device-to-device copy bandwidth
 *     (dcu_bench_copy of --copy-mib MiB, GB/s counting bytes read + written)
 *     and a bf16 GEMM n x n x n through cuBLAS (dcu_bench_gemm, TFLOP/s).
 *  2. Per model and GPU profile: prefill tokens/s (one forward of --prompt
 *     tokens from position 0), decode tokens/s at batch 1 (drift_session_forward
 *     of one token), at --batch (drift_session_forward_batch over that many
 *     sessions) and, for the shipped models, at --batch-big (0: not run),
 *     each session first prefilled with --ctx tokens, then --gen
 *     steps per iteration. Decode feeds fixed pseudo-random token ids (no
 *     sampling on the host), so the figure is the engine's own step time,
 *     logits download included. Greedy decode (GPU legs, at batch 1 and
 *     --batch-big) runs the same steps through drift_session_forward_greedy,
 *     as generation at temperature 0 does: each row's pick is made on the
 *     GPU and only the ids come back. Models: every GGUF in models/ except guard
 *     models, and a ~1.1B-parameter llama with random F16 weights (TinyLlama-
 *     1.1B's shape: dim 2048, 22 layers, 32 heads, 4 KV heads, FFN 5632,
 *     vocabulary 32000; tokenizer copied from a shipped model and padded),
 *     written once with the project's GGUF writer to --big (default under
 *     /tmp, ~2.2 GB) and reused when present.
 *     For batch-1 decode: the bytes of weights one token reads (every matrix
 *     but the embedding table, in the profile's weight format, plus norms;
 *     for MoE only the experts used) x tokens/s, as a share of the measured
 *     copy bandwidth, for both kinds of step. Target (issue 8): >= 50% for
 *     the 1B model.
 *  3. The CPU backend (--cpu-profile, --cpu-threads) on the shipped models:
 *     batched decode at --batch, --cpu-steps steps x --cpu-iters, and the
 *     GPU/CPU ratios of batched decode tokens/s per GPU profile: GPU at
 *     --batch and GPU at --batch-big, both over the CPU at --batch (the
 *     issue's target does not fix the batch size; the CPU stays at --batch,
 *     its best). Target: >= 100x. --batch-big is 1024: the 7M models' GPU
 *     legs are still launch-bound at 512 (460-520K tok/s on the H200, 555-705K
 *     at 1024), and at 512 the ratio fell below 100x whenever the CPU leg ran
 *     fast (it varies 2x between runs on the device machine).
 * With DRIFT_CUDA_TIMING=1 in the environment, each GPU decode leg also
 * prints (stderr) where a step's time went: host work before the kernels,
 * the kernels, the downloads (dcu_timing_read).
 * Prints markdown tables; writes every figure to OUT.json. Exits 0 when every
 * leg ran (targets missed or not), 1 when a leg failed, 2 on bad arguments;
 * without the CUDA backend or without a GPU it says so and exits 0. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef DRIFT_HAVE_CUDA

int main(int argc, char **argv) {
    const char *why = "no CUDA backend built (no nvcc, DRIFT_CUDA=OFF, or no src/model/cuda/*.cu at configure time)";
    printf("bench_cuda: %s; nothing measured\n", why);
    if (argc > 1 && argv[1][0] != '-') {
        FILE *f = fopen(argv[1], "w");
        if (f) {
            fprintf(f, "{\"status\": \"%s\"}\n", why);
            fclose(f);
        }
    }
    return 0;
}

#else

#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <sys/stat.h>
#include <time.h>

#include "driftbench/model.h"
#include "model/cuda/cuda_backend.h"
#include "model/gguf.h"
#include "model/numerics.h"
#include "util/util.h"

typedef struct opts {
    const char *json_path, *models_dir, *big_path, *tok_from;
    const char *gpu_profiles, *big_profiles, *cpu_profile;
    int prompt, ctx, gen, batch, batch_big, iters;
    int cpu_threads, cpu_steps, cpu_iters, no_cpu;
    int copy_mib, gemm_n;
    int big_dim, big_layers, big_heads, big_kv_heads, big_hidden, big_vocab; /* big_layers 0 = no big model */
} opts;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- statistics over iterations ---- */

typedef struct stat3 {
    double med, min, max; /* 0 when n == 0 */
    int n;
} stat3;

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static stat3 stat_of(double *v, int n) {
    stat3 s = {0, 0, 0, n};
    if (n <= 0) return s;
    qsort(v, (size_t)n, sizeof *v, cmp_dbl);
    s.min = v[0];
    s.max = v[n - 1];
    s.med = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    return s;
}

static json_t *stat_json(stat3 s) {
    if (!s.n) return json_null();
    return json_pack("{s:f, s:f, s:f, s:i}", "median", s.med, "min", s.min, "max", s.max, "iterations", s.n);
}

/* ---- the random ~1B llama ---- */

/* Uniform [-a, a] F16 values for n elements, in parallel chunks each with its
 * own generator (deterministic for a given seed). */
static void fill_f16(uint16_t *out, size_t n, float a, uint64_t seed) {
    const size_t chunk = 1u << 16;
    long n_chunks = (long)((n + chunk - 1) / chunk);
#pragma omp parallel for schedule(static)
    for (long c = 0; c < n_chunks; c++) {
        util_rng r;
        util_rng_seed(&r, seed * 0x9e3779b97f4a7c15ull + (uint64_t)c);
        size_t end = (size_t)(c + 1) * chunk < n ? (size_t)(c + 1) * chunk : n;
        for (size_t i = (size_t)c * chunk; i < end; i++)
            out[i] = gguf_f32_to_f16((float)((util_rng_uniform(&r) * 2.0 - 1.0) * a));
    }
}

/* Adds matrix NAME of shape (rows, cols) (ne = {cols, rows}) with F16 values
 * in [-gain/sqrt(cols), gain/sqrt(cols)]. */
static int add_f16_matrix(gguf_writer *w, const char *name, int64_t rows, int64_t cols, float gain, uint64_t seed) {
    size_t n = (size_t)rows * (size_t)cols;
    uint16_t *h = malloc(n * sizeof *h);
    if (!h) return -1;
    fill_f16(h, n, gain / sqrtf((float)cols), seed);
    uint64_t ne[2] = {(uint64_t)cols, (uint64_t)rows};
    int rc = gguf_writer_add_tensor(w, name, GGUF_DT_F16, 2, ne, h, n * sizeof *h);
    free(h);
    return rc;
}

static int add_ones(gguf_writer *w, const char *name, int64_t n) {
    float *x = malloc((size_t)n * sizeof *x);
    if (!x) return -1;
    for (int64_t i = 0; i < n; i++) x[i] = 1.0f;
    uint64_t ne[1] = {(uint64_t)n};
    int rc = gguf_writer_add_tensor(w, name, GGUF_DT_F32, 1, ne, x, (uint64_t)n * sizeof *x);
    free(x);
    return rc;
}

/* Copies every tokenizer.* key of SRC into W; per-token arrays (tokens,
 * token_type, scores) are padded to n_vocab entries with unused tokens
 * "<|pad_N|>" (type 5, score 0). */
static int copy_tokenizer(gguf_writer *w, const gguf_file *src, int n_vocab, char *msg, size_t msglen) {
    const gguf_kv *toks = gguf_find_kv(src, "tokenizer.ggml.tokens");
    if (!toks || toks->type != GGUF_VT_ARRAY || toks->arr_type != GGUF_VT_STRING || toks->arr_n > (uint64_t)n_vocab)
        return snprintf(msg, msglen, "%s: no tokenizer.ggml.tokens of at most %d strings", src->path, n_vocab), -1;
    uint64_t n_src = toks->arr_n;
    int rc = 0;
    for (uint64_t k = 0; k < src->n_kv && !rc; k++) {
        const gguf_kv *kv = &src->kv[k];
        if (strncmp(kv->key, "tokenizer.", 10)) continue;
        if (kv->type == GGUF_VT_STRING) {
            char *s = util_strndup(kv->s.p, (size_t)kv->s.n);
            rc = s ? gguf_writer_add_string(w, kv->key, s) : -1;
            free(s);
        } else if (kv->type == GGUF_VT_ARRAY && kv->arr_type == GGUF_VT_STRING) {
            uint64_t n = kv->arr_n == n_src ? (uint64_t)n_vocab : kv->arr_n; /* per-token: pad */
            char **v = calloc((size_t)n, sizeof *v);
            if (!v) return -1;
            for (uint64_t i = 0; i < n && !rc; i++) {
                v[i] = i < kv->arr_n ? util_strndup(kv->arr_str[i].p, (size_t)kv->arr_str[i].n) : util_asprintf("<|pad_%llu|>", (unsigned long long)i);
                if (!v[i]) rc = -1;
            }
            if (!rc) rc = gguf_writer_add_string_array(w, kv->key, (const char *const *)v, n);
            for (uint64_t i = 0; i < n; i++) free(v[i]);
            free(v);
        } else if (kv->type == GGUF_VT_ARRAY && gguf_vtype_size(kv->arr_type)) {
            size_t es = gguf_vtype_size(kv->arr_type);
            int per_token = kv->arr_n == n_src;
            uint64_t n = per_token ? (uint64_t)n_vocab : kv->arr_n;
            uint8_t *buf = calloc((size_t)n, es);
            if (!buf) return -1;
            memcpy(buf, kv->arr_data, (size_t)kv->arr_n * es);
            if (per_token && (kv->arr_type == GGUF_VT_INT32 || kv->arr_type == GGUF_VT_UINT32))
                for (uint64_t i = kv->arr_n; i < n; i++) {
                    uint32_t unused = 5; /* llama.cpp's LLAMA_TOKEN_TYPE_UNUSED */
                    memcpy(buf + i * es, &unused, 4);
                }
            else if (per_token && kv->arr_type != GGUF_VT_FLOAT32 && kv->arr_type != GGUF_VT_FLOAT64)
                rc = -1, snprintf(msg, msglen, "%s: per-token array %s of type %s: padding not known", src->path, kv->key,
                                  gguf_vtype_name(kv->arr_type));
            if (!rc) rc = gguf_writer_add_array(w, kv->key, kv->arr_type, buf, n);
            free(buf);
        } else {
            switch (kv->type) {
            case GGUF_VT_BOOL: rc = gguf_writer_add_bool(w, kv->key, (int)kv->v.u); break;
            case GGUF_VT_UINT8: rc = gguf_writer_add_u8(w, kv->key, (uint8_t)kv->v.u); break;
            case GGUF_VT_UINT16: rc = gguf_writer_add_u16(w, kv->key, (uint16_t)kv->v.u); break;
            case GGUF_VT_UINT32: rc = gguf_writer_add_u32(w, kv->key, (uint32_t)kv->v.u); break;
            case GGUF_VT_UINT64: rc = gguf_writer_add_u64(w, kv->key, kv->v.u); break;
            case GGUF_VT_INT8: rc = gguf_writer_add_i8(w, kv->key, (int8_t)kv->v.i); break;
            case GGUF_VT_INT16: rc = gguf_writer_add_i16(w, kv->key, (int16_t)kv->v.i); break;
            case GGUF_VT_INT32: rc = gguf_writer_add_i32(w, kv->key, (int32_t)kv->v.i); break;
            case GGUF_VT_INT64: rc = gguf_writer_add_i64(w, kv->key, kv->v.i); break;
            case GGUF_VT_FLOAT32: rc = gguf_writer_add_f32(w, kv->key, (float)kv->v.f); break;
            case GGUF_VT_FLOAT64: rc = gguf_writer_add_f64(w, kv->key, kv->v.f); break;
            default: break; /* nested arrays: not part of any tokenizer we ship */
            }
        }
    }
    if (rc && !msg[0]) snprintf(msg, msglen, "copying the tokenizer of %s failed (out of memory?)", src->path);
    return rc;
}

/* "random-llama-1.10b": the name of the big_* shape, by its parameter count. */
static void big_name(const opts *o, char *out, size_t n) {
    double D = o->big_dim, hd = (double)o->big_dim / o->big_heads, QD = o->big_heads * hd, KVD = o->big_kv_heads * hd;
    double p = o->big_layers * (2 * D * QD + 2 * D * KVD + 3 * D * o->big_hidden) + 2.0 * o->big_vocab * D;
    if (p >= 1e9) snprintf(out, n, "random-llama-%.2fb", p / 1e9);
    else snprintf(out, n, "random-llama-%.0fm", p / 1e6);
}

/* Writes the random llama of the big_* shape to PATH. */
static int write_big_model(const opts *o, const char *path, char *msg, size_t msglen) {
    drift_error err;
    gguf_file *src = NULL;
    if (gguf_open(o->tok_from, &src, &err)) return snprintf(msg, msglen, "tokenizer source: %s", err.msg), -1;
    int D = o->big_dim, L = o->big_layers, H = o->big_hidden, hd = o->big_dim / o->big_heads;
    int QD = o->big_heads * hd, KVD = o->big_kv_heads * hd, V = o->big_vocab;
    gguf_writer *w = gguf_writer_new();
    int rc = w ? 0 : -1;
    msg[0] = 0;
    if (!rc) {
        rc |= gguf_writer_add_string(w, "general.architecture", "llama");
        char name[64];
        big_name(o, name, sizeof name);
        rc |= gguf_writer_add_string(w, "general.name", name);
        rc |= gguf_writer_add_u32(w, "llama.context_length", 4096);
        rc |= gguf_writer_add_u32(w, "llama.embedding_length", (uint32_t)D);
        rc |= gguf_writer_add_u32(w, "llama.block_count", (uint32_t)L);
        rc |= gguf_writer_add_u32(w, "llama.feed_forward_length", (uint32_t)H);
        rc |= gguf_writer_add_u32(w, "llama.attention.head_count", (uint32_t)o->big_heads);
        rc |= gguf_writer_add_u32(w, "llama.attention.head_count_kv", (uint32_t)o->big_kv_heads);
        rc |= gguf_writer_add_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
        rc |= gguf_writer_add_f32(w, "llama.rope.freq_base", 10000.0f);
        rc |= gguf_writer_add_u32(w, "llama.rope.dimension_count", (uint32_t)hd);
        rc = rc || copy_tokenizer(w, src, V, msg, msglen);
    }
    uint64_t seed = 1;
    rc = rc || add_f16_matrix(w, "token_embd.weight", V, D, sqrtf((float)D), seed++); /* entries ~U(-1, 1) */
    rc = rc || add_ones(w, "output_norm.weight", D);
    rc = rc || add_f16_matrix(w, "output.weight", V, D, 3.0f, seed++);
    for (int l = 0; l < L && !rc; l++) {
        char nm[96];
#define N(x) (snprintf(nm, sizeof nm, "blk.%d." x, l), nm)
        rc = rc || add_ones(w, N("attn_norm.weight"), D);
        rc = rc || add_f16_matrix(w, N("attn_q.weight"), QD, D, 2.0f, seed++);
        rc = rc || add_f16_matrix(w, N("attn_k.weight"), KVD, D, 2.0f, seed++);
        rc = rc || add_f16_matrix(w, N("attn_v.weight"), KVD, D, 1.0f, seed++);
        rc = rc || add_f16_matrix(w, N("attn_output.weight"), D, QD, 1.0f, seed++);
        rc = rc || add_ones(w, N("ffn_norm.weight"), D);
        rc = rc || add_f16_matrix(w, N("ffn_gate.weight"), H, D, 2.0f, seed++);
        rc = rc || add_f16_matrix(w, N("ffn_up.weight"), H, D, 2.0f, seed++);
        rc = rc || add_f16_matrix(w, N("ffn_down.weight"), D, H, 1.0f, seed++);
#undef N
    }
    if (rc && !msg[0]) snprintf(msg, msglen, "gguf writer: a tensor could not be added (out of memory?)");
    if (!rc && gguf_writer_save(w, path, &err)) rc = -1, snprintf(msg, msglen, "%s", err.msg);
    gguf_writer_free(w);
    gguf_close(src);
    return rc;
}

/* ---- per-model figures ---- */

/* Matrix parameters one token multiplies (embedding lookup excluded; MoE:
 * the experts used), and the bytes they (plus f32 norms) occupy in format W
 * (native = the file's F16, which all our models use). */
static double bytes_of(drift_dtype w, int64_t rows, int64_t cols) {
    if (w == DRIFT_DTYPE_NATIVE) w = DRIFT_DTYPE_F16;
    const num_traits *tr = num_traits_of(w);
    if (!tr) return 2.0 * (double)rows * (double)cols;
    double b = (double)num_row_bytes(w, cols) * (double)rows;
    if (tr->has_group_scales) b += 4.0 * (double)rows * (w == DRIFT_DTYPE_INT4 ? (double)cols / 32 : 1); /* f32 scales */
    return b;
}

static void token_cost(const drift_model_info *in, drift_dtype w, double *params, double *bytes) {
    int64_t D = in->dim, QD = (int64_t)in->n_heads * in->head_dim, KVD = (int64_t)in->n_kv_heads * in->head_dim;
    int64_t H = in->hidden_dim;
    int n_ffn = in->n_experts ? in->n_experts_used : 1;
    double p = 0, b = 0;
    p += (double)in->n_layers * ((double)(QD * D) * 2 + (double)(KVD * D) * 2 + 3.0 * (double)(H * D) * n_ffn);
    b += (double)in->n_layers * (bytes_of(w, QD, D) + bytes_of(w, D, QD) + 2 * bytes_of(w, KVD, D) + n_ffn * 3 * bytes_of(w, H, D));
    if (in->n_experts) {
        p += (double)in->n_layers * (double)in->n_experts * (double)D;
        b += (double)in->n_layers * 4.0 * (double)in->n_experts * (double)D; /* router, f32 */
    }
    p += (double)in->n_vocab * (double)D; /* output (or the tied embedding) */
    b += bytes_of(w, in->n_vocab, D) + 4.0 * (double)D * (2.0 * in->n_layers + 1);
    *params = p;
    *bytes = b;
}

/* Token id i of sequence s: pseudo-random, deterministic, not 0. */
static int32_t tok_id(const drift_model_info *in, int s, int i) {
    uint64_t h = (uint64_t)(s + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)(i + 1) * 0xbf58476d1ce4e5b9ull;
    h ^= h >> 31;
    return (int32_t)(1 + h % (uint64_t)(in->n_vocab - 1));
}

/* Prefill: `iters` forwards of `prompt` tokens from position 0 (last token's
 * logits), after one warm-up. tokens/s per iteration into *out. */
static drift_status bench_prefill(drift_model *m, int prompt, int iters, stat3 *out, drift_error *err) {
    const drift_model_info *in = drift_model_get_info(m);
    drift_session *s = NULL;
    int32_t *toks = malloc((size_t)prompt * sizeof *toks);
    float *lg = malloc((size_t)in->n_vocab * sizeof *lg);
    double *r = calloc((size_t)iters, sizeof *r);
    drift_status st = toks && lg && r ? drift_session_new(m, prompt, &s, err) : drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    for (int i = 0; i < prompt && !st; i++) toks[i] = tok_id(in, 0, i);
    int done = 0;
    for (int it = -1; it < iters && !st; it++) {
        drift_session_reset(s);
        double t0 = now_s();
        st = drift_session_forward(s, toks, (size_t)prompt, 0, lg, NULL, err);
        double t1 = now_s();
        if (!st && it >= 0) r[done++] = prompt / (t1 - t0);
    }
    *out = stat_of(r, done);
    drift_session_free(s);
    free(toks);
    free(lg);
    free(r);
    return st;
}

/* Decode at batch B: B sessions each prefilled with `ctx` tokens, 2 warm-up
 * steps, then `iters` x `steps` timed steps (B = 1: drift_session_forward of
 * one token; else drift_session_forward_batch; greedy: always
 * drift_session_forward_greedy, the step generation runs at temperature 0,
 * which brings back each row's pick instead of its logits). tokens/s = B x
 * steps / time. */
static drift_status bench_decode(drift_model *m, int B, int ctx, int steps, int iters, int greedy, stat3 *out,
                                 drift_error *err) {
    const drift_model_info *in = drift_model_get_info(m);
    const int warm = 2;
    int n_ctx = ctx + warm + steps * iters + 1;
    drift_session **ss = calloc((size_t)B, sizeof *ss);
    int32_t *toks = malloc((size_t)(ctx > B ? ctx : B) * sizeof *toks);
    float *lg = malloc((size_t)B * (size_t)in->n_vocab * sizeof *lg);
    int32_t *picks = malloc((size_t)B * sizeof *picks);
    double *r = calloc((size_t)iters, sizeof *r);
    drift_status st = ss && toks && lg && picks && r ? DRIFT_OK : drift_error_set(err, DRIFT_ERR_NOMEM, "out of memory");
    for (int b = 0; b < B && !st; b++) {
        st = drift_session_new(m, n_ctx, &ss[b], err);
        for (int i = 0; i < ctx && !st; i++) toks[i] = tok_id(in, b, i);
        if (!st) st = drift_session_forward(ss[b], toks, (size_t)ctx, 0, lg, NULL, err);
    }
    /* DRIFT_BENCH_PROFILE_BATCH=B: the timed steps at batch B run between
     * cudaProfilerStart and Stop (ncu/nsys --profile-from-start off) */
    const char *pb = getenv("DRIFT_BENCH_PROFILE_BATCH");
    int prof = pb && atoi(pb) == B;
    int pos = ctx, done = 0;
    double tm[5], wall = 0;
    for (int it = -1; it < iters && !st; it++) {
        int n = it < 0 ? warm : steps;
        if (prof && it == 0) dcu_profiler(1);
        if (it == 0) dcu_timing_read(tm, 1);
        double t0 = now_s();
        for (int k = 0; k < n && !st; k++, pos++) {
            for (int b = 0; b < B; b++) toks[b] = tok_id(in, b, pos);
            st = greedy ? drift_session_forward_greedy(ss, toks, (size_t)B, picks, err)
                 : B == 1   ? drift_session_forward(ss[0], toks, 1, 0, lg, NULL, err)
                            : drift_session_forward_batch(ss, toks, (size_t)B, lg, err);
        }
        double t1 = now_s();
        if (!st && it >= 0) r[done++] = (double)B * steps / (t1 - t0), wall += t1 - t0;
    }
    if (prof) dcu_profiler(0);
    /* DRIFT_CUDA_TIMING=1: where a timed step's time went (dcu_timing_read) */
    dcu_timing_read(tm, 1);
    if (tm[0] > 0 && done)
        fprintf(stderr, "bench_cuda: b%d%s step %.3f ms: dcu_forward %.3f ms (host before kernels %.3f, kernels %.3f, "
                "downloads %.3f; %.0f calls)\n", B, greedy ? " greedy" : "", wall * 1e3 / (done * steps), tm[4] / tm[0],
                tm[1] / tm[0], tm[2] / tm[0], tm[3] / tm[0], tm[0]);
    *out = stat_of(r, done);
    for (int b = 0; ss && b < B; b++) drift_session_free(ss[b]);
    free(ss);
    free(toks);
    free(lg);
    free(picks);
    free(r);
    return st;
}

/* One model under one profile: the legs that apply. */
typedef struct leg {
    char model[128], profile[96];
    int is_cpu;                 /* the CPU leg (batched decode only) */
    char backend[8], weights[16]; /* as loaded */
    double params, wbytes;      /* per token: active matrix params, batch-1 weight bytes */
    double load_s;
    stat3 prefill, dec1, decB;  /* tokens/s */
    stat3 dec1g;                /* tokens/s, greedy steps at batch 1 (GPU legs) */
    stat3 decBig, decBigG;      /* tokens/s at --batch-big, logits and greedy (GPU legs of shipped models) */
    char error[512];
} leg;

static void run_leg(const char *path, const char *model_name, const char *profile, const char *extra, int is_cpu, int big_batch,
                    const opts *o, leg *g) {
    memset(g, 0, sizeof *g);
    snprintf(g->model, sizeof g->model, "%s", model_name);
    snprintf(g->profile, sizeof g->profile, "%s", profile);
    g->is_cpu = is_cpu;
    char spec[256];
    snprintf(spec, sizeof spec, "profile=%s%s", profile, extra);
    drift_numeric_profile p;
    drift_error err = {0};
    drift_model *m = NULL;
    fprintf(stderr, "bench_cuda: %s under %s ...\n", model_name, spec);
    double t0 = now_s();
    drift_status st = drift_profile_parse(spec, &p, &err);
    if (!st) st = drift_model_load(path, &p, &m, &err);
    g->load_s = now_s() - t0;
    if (!st) {
        const drift_numeric_profile *mp = drift_model_profile(m);
        token_cost(drift_model_get_info(m), mp->weights, &g->params, &g->wbytes);
        snprintf(g->backend, sizeof g->backend, "%s", mp->backend == DRIFT_BACKEND_CUDA ? "cuda" : "cpu");
        snprintf(g->weights, sizeof g->weights, "%s", drift_dtype_name(mp->weights));
    }
    if (!st && !is_cpu) st = bench_prefill(m, o->prompt, o->iters, &g->prefill, &err);
    if (!st && !is_cpu) st = bench_decode(m, 1, o->ctx, o->gen, o->iters, 0, &g->dec1, &err);
    if (!st && !is_cpu) st = bench_decode(m, 1, o->ctx, o->gen, o->iters, 1, &g->dec1g, &err);
    if (!st) st = is_cpu ? bench_decode(m, o->batch, o->ctx, o->cpu_steps, o->cpu_iters, 0, &g->decB, &err)
                         : bench_decode(m, o->batch, o->ctx, o->gen, o->iters, 0, &g->decB, &err);
    if (!st && !is_cpu && big_batch > 0) st = bench_decode(m, big_batch, o->ctx, o->gen, o->iters, 0, &g->decBig, &err);
    if (!st && !is_cpu && big_batch > 0) st = bench_decode(m, big_batch, o->ctx, o->gen, o->iters, 1, &g->decBigG, &err);
    if (st) {
        snprintf(g->error, sizeof g->error, "%s: %s", drift_strerror(st), err.msg);
        fprintf(stderr, "bench_cuda: %s under %s: FAILED: %s\n", model_name, spec, g->error);
    }
    drift_model_free(m);
}

/* the weight bytes a batch-1 step reads at rate's median, as a % of copy bandwidth */
static double share_pct(stat3 rate, double wbytes, double copy_gbps) { return 100 * rate.med * wbytes / 1e9 / copy_gbps; }

/* "50.12%" (two decimals, so a share just under the target never prints as
 * 50%), with the target's verdict for the 1B model (target); "-" without a
 * figure */
static void share_str(char *out, size_t n, stat3 rate, double wbytes, double copy_gbps, int target) {
    if (!rate.n || copy_gbps <= 0) {
        snprintf(out, n, "-");
        return;
    }
    double share = share_pct(rate, wbytes, copy_gbps);
    snprintf(out, n, "%.2f%%%s", share, !target ? "" : share >= 50.0 ? " (target 50%: met)" : " (target 50%: missed)");
}

static json_t *leg_json(const leg *g, double copy_gbps) {
    json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:b, s:f, s:f, s:f}", "model", g->model, "profile", g->profile, "backend",
                          g->backend, "weights", g->weights, "cpu_leg", g->is_cpu, "active_matrix_params", g->params,
                          "weight_bytes_per_token", g->wbytes, "load_s", g->load_s);
    json_object_set_new(j, "prefill_tok_s", stat_json(g->prefill));
    json_object_set_new(j, "decode_b1_tok_s", stat_json(g->dec1));
    json_object_set_new(j, "decode_batch_tok_s", stat_json(g->decB));
    if (g->decBig.n) json_object_set_new(j, "decode_batch_big_tok_s", stat_json(g->decBig));
    if (g->decBigG.n) json_object_set_new(j, "decode_batch_big_greedy_tok_s", stat_json(g->decBigG));
    if (g->dec1g.n) {
        json_object_set_new(j, "decode_b1_greedy_tok_s", stat_json(g->dec1g));
        if (copy_gbps > 0)
            json_object_set_new(j, "decode_b1_greedy_pct_of_copy", json_real(share_pct(g->dec1g, g->wbytes, copy_gbps)));
    }
    if (g->prefill.n) json_object_set_new(j, "prefill_tflops", json_real(g->prefill.med * 2 * g->params / 1e12));
    if (g->dec1.n) {
        json_object_set_new(j, "decode_b1_weight_gbps", json_real(g->dec1.med * g->wbytes / 1e9));
        if (copy_gbps > 0) json_object_set_new(j, "decode_b1_pct_of_copy", json_real(share_pct(g->dec1, g->wbytes, copy_gbps)));
    }
    json_object_set_new(j, "error", g->error[0] ? json_string(g->error) : json_null());
    return j;
}

/* ---- model list ---- */

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The .gguf files of models_dir without "guard" in the name, sorted; *n set. */
static char **list_models(const char *dir, size_t *n) {
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return NULL;
    char **v = NULL;
    size_t cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 6 || strcmp(e->d_name + l - 5, ".gguf") || strstr(e->d_name, "guard")) continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 8;
            char **nv = realloc(v, cap * sizeof *nv);
            if (!nv) break;
            v = nv;
        }
        v[(*n)++] = util_asprintf("%s/%s", dir, e->d_name);
    }
    closedir(d);
    if (*n) qsort(v, *n, sizeof *v, cmp_str);
    return v;
}

static size_t count_items(const char *list) {
    size_t n = 1;
    for (; *list; list++) n += *list == ',';
    return n;
}

static void stem_of(const char *path, char *out, size_t n) {
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    snprintf(out, n, "%s", b);
    char *dot = strstr(out, ".gguf");
    if (dot) *dot = 0;
}

/* ---- main ---- */

static int parse_args(int argc, char **argv, opts *o) {
    *o = (opts){.models_dir = "models", .gpu_profiles = "cuda-f32,cuda-bf16", .big_profiles = "cuda-f32,cuda-bf16,cuda-fp8",
                .cpu_profile = "cpu-f32", .prompt = 512, .ctx = 128, .gen = 32, .batch = 64, .batch_big = 1024, .iters = 5,
                .cpu_steps = 8,
                .cpu_iters = 3, .copy_mib = 4096, .gemm_n = 8192, .big_dim = 2048, .big_layers = 22, .big_heads = 32,
                .big_kv_heads = 4, .big_hidden = 5632, .big_vocab = 32000};
    int i = 1;
    if (argc > 1 && argv[1][0] != '-') o->json_path = argv[i++];
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--no-cpu")) {
            o->no_cpu = 1;
            continue;
        }
        if (i + 1 >= argc) return fprintf(stderr, "bench_cuda: %s needs a value\n", a), -1;
        const char *v = argv[++i];
        int *num = NULL;
        if (!strcmp(a, "--models")) o->models_dir = v;
        else if (!strcmp(a, "--big")) o->big_path = v;
        else if (!strcmp(a, "--tokenizer-from")) o->tok_from = v;
        else if (!strcmp(a, "--gpu-profiles")) o->gpu_profiles = v;
        else if (!strcmp(a, "--big-profiles")) o->big_profiles = v;
        else if (!strcmp(a, "--cpu-profile")) o->cpu_profile = v;
        else if (!strcmp(a, "--prompt")) num = &o->prompt;
        else if (!strcmp(a, "--ctx")) num = &o->ctx;
        else if (!strcmp(a, "--gen")) num = &o->gen;
        else if (!strcmp(a, "--batch")) num = &o->batch;
        else if (!strcmp(a, "--batch-big")) num = &o->batch_big;
        else if (!strcmp(a, "--iters")) num = &o->iters;
        else if (!strcmp(a, "--cpu-threads")) num = &o->cpu_threads;
        else if (!strcmp(a, "--cpu-steps")) num = &o->cpu_steps;
        else if (!strcmp(a, "--cpu-iters")) num = &o->cpu_iters;
        else if (!strcmp(a, "--copy-mib")) num = &o->copy_mib;
        else if (!strcmp(a, "--gemm-n")) num = &o->gemm_n;
        else if (!strcmp(a, "--big-dim")) num = &o->big_dim;
        else if (!strcmp(a, "--big-layers")) num = &o->big_layers;
        else if (!strcmp(a, "--big-heads")) num = &o->big_heads;
        else if (!strcmp(a, "--big-kv-heads")) num = &o->big_kv_heads;
        else if (!strcmp(a, "--big-hidden")) num = &o->big_hidden;
        else if (!strcmp(a, "--big-vocab")) num = &o->big_vocab;
        else return fprintf(stderr, "bench_cuda: unknown option %s (see the comment at the top of bench/cuda.c)\n", a), -1;
        if (num) {
            char *end;
            long x = strtol(v, &end, 10);
            if (*end || x < 0 || x > 1000000) return fprintf(stderr, "bench_cuda: %s %s: not an integer in [0, 1000000]\n", a, v), -1;
            *num = (int)x;
        }
    }
    if (o->prompt < 1 || o->ctx < 1 || o->gen < 1 || o->batch < 1 || o->iters < 1 || o->cpu_steps < 1 || o->cpu_iters < 1)
        return fprintf(stderr, "bench_cuda: --prompt, --ctx, --gen, --batch, --iters, --cpu-steps, --cpu-iters must be >= 1\n"), -1;
    if (o->big_path && !strcmp(o->big_path, "none")) o->big_layers = 0;
    if (o->big_layers && (o->big_heads < 1 || o->big_kv_heads < 1 || o->big_dim % o->big_heads || o->big_heads % o->big_kv_heads))
        return fprintf(stderr, "bench_cuda: --big-dim must divide by --big-heads, and --big-heads by --big-kv-heads\n"), -1;
    return 0;
}

static void host_cpu(char *out, size_t n) {
    snprintf(out, n, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10)) {
            char *c = strchr(line, ':');
            if (c) {
                snprintf(out, n, "%s", c + 2);
                out[strcspn(out, "\n")] = 0;
            }
            break;
        }
    fclose(f);
}

static void fmt_rate(char *out, size_t n, stat3 s) {
    if (!s.n) snprintf(out, n, "-");
    else if (s.med >= 1000) snprintf(out, n, "%.0f", s.med);
    else snprintf(out, n, "%.1f", s.med);
}

int main(int argc, char **argv) {
    opts o;
    if (parse_args(argc, argv, &o)) return 2;
    int n_dev = dcu_device_count();
    if (n_dev <= 0) {
        printf("bench_cuda: no GPU (the CUDA backend is built, but the driver reports no device); nothing measured\n");
        if (o.json_path) {
            FILE *f = fopen(o.json_path, "w");
            if (f) fprintf(f, "{\"status\": \"no GPU\"}\n"), fclose(f);
        }
        return 0;
    }
    int failures = 0;
    drift_error err = {0};
    json_t *root = json_object();
    char date[32], cpu[256];
    util_utc_iso(date);
    host_cpu(cpu, sizeof cpu);
    json_object_set_new(root, "date", json_string(date));
    json_object_set_new(root, "host_cpu", json_string(cpu));
    json_object_set_new(root, "settings", json_pack("{s:i, s:i, s:i, s:i, s:i, s:i, s:s, s:i, s:i, s:i}", "prompt", o.prompt, "ctx",
                                                    o.ctx, "gen", o.gen, "batch", o.batch, "batch_big", o.batch_big, "iters",
                                                    o.iters, "cpu_profile", o.cpu_profile,
                                                    "cpu_threads", o.cpu_threads, "cpu_steps", o.cpu_steps, "cpu_iters", o.cpu_iters));

    /* 1. the device */
    dcu_device_info di;
    memset(&di, 0, sizeof di);
    if (dcu_device_get_info(&di, &err)) {
        fprintf(stderr, "bench_cuda: device info: %s\n", err.msg);
        failures++;
    }
    json_object_set_new(root, "device",
                        json_pack("{s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:I, s:i}", "name", di.name, "short_name", di.short_name, "cc_major",
                                  di.cc_major, "cc_minor", di.cc_minor, "driver_version", di.driver_version, "runtime_version",
                                  di.runtime_version, "sm_count", di.sm_count, "mem_bytes", (json_int_t)di.mem_bytes, "device_count", n_dev));
    double *v = calloc((size_t)o.iters, sizeof *v);
    int nv = 0;
    size_t copy_bytes = (size_t)o.copy_mib << 20;
    double x;
    if (dcu_bench_copy(copy_bytes, 2, &x, &err)) { /* warm-up */
        fprintf(stderr, "bench_cuda: copy: %s\n", err.msg);
        failures++;
    } else
        for (int it = 0; it < o.iters; it++)
            if (!dcu_bench_copy(copy_bytes, 10, &x, &err)) v[nv++] = x;
    stat3 copy = stat_of(v, nv);
    nv = 0;
    if (dcu_bench_gemm(o.gemm_n, 2, &x, &err)) {
        fprintf(stderr, "bench_cuda: gemm: %s\n", err.msg);
        failures++;
    } else
        for (int it = 0; it < o.iters; it++)
            if (!dcu_bench_gemm(o.gemm_n, 10, &x, &err)) v[nv++] = x;
    stat3 gemm = stat_of(v, nv);
    free(v);
    json_object_set_new(root, "copy_gbps", stat_json(copy));
    json_object_set_new(root, "copy_bytes", json_integer((json_int_t)copy_bytes));
    json_object_set_new(root, "gemm_bf16_tflops", stat_json(gemm));
    json_object_set_new(root, "gemm_n", json_integer(o.gemm_n));

    /* 2. models x GPU profiles; 3. the CPU leg */
    size_t n_models = 0;
    char **models = list_models(o.models_dir, &n_models);
    if (!n_models) fprintf(stderr, "bench_cuda: no models in %s (run from the repository root or pass --models)\n", o.models_dir);
    char big_path[512] = "";
    if (o.big_layers) {
        snprintf(big_path, sizeof big_path, "%s", o.big_path ? o.big_path : "");
        if (!big_path[0])
            snprintf(big_path, sizeof big_path, "/tmp/driftbench_random_llama_%d_%d_%d_%d.gguf", o.big_dim, o.big_layers, o.big_hidden,
                     o.big_vocab);
        struct stat sb;
        if (stat(big_path, &sb) == 0) {
            fprintf(stderr, "bench_cuda: reusing %s (%.2f GB)\n", big_path, (double)sb.st_size / 1e9);
        } else if (!o.tok_from && !n_models) {
            fprintf(stderr, "bench_cuda: the 1B model needs a tokenizer to copy (--tokenizer-from or a shipped model)\n");
            big_path[0] = 0;
            failures++;
        } else {
            if (!o.tok_from) o.tok_from = models[0];
            char msg[512] = "";
            double t0 = now_s();
            fprintf(stderr, "bench_cuda: writing %s ...\n", big_path);
            if (write_big_model(&o, big_path, msg, sizeof msg)) {
                fprintf(stderr, "bench_cuda: writing the 1B model: %s\n", msg);
                big_path[0] = 0;
                failures++;
            } else {
                fprintf(stderr, "bench_cuda: wrote it in %.1f s\n", now_s() - t0);
            }
        }
    }
    size_t n_all = n_models + (big_path[0] ? 1 : 0);
    json_t *jlegs = json_array(), *jratios = json_array();
    size_t cap_legs = n_models * (count_items(o.gpu_profiles) + 1) + count_items(o.big_profiles);
    leg *legs = calloc(cap_legs + 1, sizeof *legs);
    size_t n_legs = 0;
    size_t first_big = (size_t)-1;
    char cpu_extra[64] = "";
    if (o.cpu_threads > 0) snprintf(cpu_extra, sizeof cpu_extra, "&threads=%d", o.cpu_threads);
    for (size_t mi = 0; mi < n_all && legs; mi++) {
        int is_big = mi == n_models;
        const char *path = is_big ? big_path : models[mi];
        char name[128];
        stem_of(path, name, sizeof name);
        if (is_big) big_name(&o, name, sizeof name);
        char *pl = util_strdup(is_big ? o.big_profiles : o.gpu_profiles), *save = NULL;
        size_t first_gpu = n_legs;
        if (is_big) first_big = n_legs;
        for (char *pn = strtok_r(pl, ",", &save); pn && n_legs < cap_legs; pn = strtok_r(NULL, ",", &save)) {
            run_leg(path, name, pn, "", 0, is_big ? 0 : o.batch_big, &o, &legs[n_legs]);
            if (legs[n_legs].error[0]) failures++;
            json_array_append_new(jlegs, leg_json(&legs[n_legs], copy.med));
            n_legs++;
        }
        free(pl);
        size_t end_gpu = n_legs;
        if (!is_big && !o.no_cpu && n_legs < cap_legs) {
            leg *c = &legs[n_legs];
            run_leg(path, name, o.cpu_profile, cpu_extra, 1, 0, &o, c);
            if (c->error[0]) failures++;
            json_array_append_new(jlegs, leg_json(c, 0));
            n_legs++;
            for (size_t k = first_gpu; k < end_gpu; k++) {
                if (!legs[k].decB.n || !c->decB.n) continue;
                double ratio = legs[k].decB.med / c->decB.med;
                json_t *jr = json_pack("{s:s, s:s, s:s, s:i, s:f, s:f, s:f, s:f, s:b}", "model", name, "gpu_profile",
                                       legs[k].profile, "cpu_profile", c->profile, "batch", o.batch, "gpu_tok_s",
                                       legs[k].decB.med, "cpu_tok_s", c->decB.med, "ratio", ratio, "target", 100.0, "met",
                                       ratio >= 100.0);
                if (legs[k].decBig.n) { /* the GPU at --batch-big over the same CPU figure (CPU at --batch) */
                    double rb = legs[k].decBig.med / c->decB.med;
                    json_object_set_new(jr, "batch_big", json_integer(o.batch_big));
                    json_object_set_new(jr, "gpu_big_tok_s", json_real(legs[k].decBig.med));
                    json_object_set_new(jr, "ratio_big", json_real(rb));
                    json_object_set_new(jr, "met_big", json_boolean(rb >= 100.0));
                }
                json_array_append_new(jratios, jr);
            }
        }
    }
    json_object_set_new(root, "legs", jlegs);
    json_object_set_new(root, "gpu_cpu_ratios", jratios);

    /* markdown */
    printf("## CUDA backend (bench_cuda, %s)\n\n", date);
    printf("| GPU | cc | driver | runtime | SMs | memory | copy GB/s (r+w) | bf16 GEMM %d TFLOP/s |\n", o.gemm_n);
    printf("|---|---|---|---|---:|---:|---:|---:|\n");
    printf("| %s (%d GPU%s) | %d.%d | %d.%d | %d.%d | %d | %.0f GiB | %.0f (%.0f-%.0f) | %.0f (%.0f-%.0f) |\n\n", di.name, n_dev,
           n_dev > 1 ? "s" : "", di.cc_major, di.cc_minor, di.driver_version / 1000, di.driver_version % 1000 / 10,
           di.runtime_version / 1000, di.runtime_version % 1000 / 10, di.sm_count, (double)di.mem_bytes / 1073741824.0, copy.med,
           copy.min, copy.max, gemm.med, gemm.min, gemm.max);
    printf("Host CPU: %s. Prefill: one %d-token prompt. Decode: sessions prefilled with %d tokens, %d steps x %d iterations "
           "(CPU: %d x %d), batch %d (GPU, shipped models: also batch %d); medians.\n\n",
           cpu, o.prompt, o.ctx, o.gen, o.iters, o.cpu_steps, o.cpu_iters, o.batch, o.batch_big);
    printf("Decode b1 brings each step's logits back; greedy b1 / b%d bring back only each row's pick (chosen on the GPU), "
           "as generation at temperature 0 runs.\n\n", o.batch_big);
    printf("| model | profile | load s | prefill tok/s | prefill TFLOP/s | decode b1 tok/s | b1 weight GB/s | %% of copy "
           "| greedy b1 tok/s | greedy %% of copy | decode b%d tok/s | decode b%d tok/s | greedy b%d tok/s |\n",
           o.batch, o.batch_big, o.batch_big);
    printf("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (size_t k = 0; k < n_legs; k++) {
        const leg *g = &legs[k];
        char pre[32], d1[32], d1g[32], dB[32], dG[32], dGG[32], tf[32] = "-", gb[32] = "-", pct[48] = "-", pctg[48] = "-";
        fmt_rate(pre, sizeof pre, g->prefill);
        fmt_rate(d1, sizeof d1, g->dec1);
        fmt_rate(d1g, sizeof d1g, g->dec1g);
        fmt_rate(dB, sizeof dB, g->decB);
        fmt_rate(dG, sizeof dG, g->decBig);
        fmt_rate(dGG, sizeof dGG, g->decBigG);
        if (g->prefill.n) snprintf(tf, sizeof tf, "%.2f", g->prefill.med * 2 * g->params / 1e12);
        if (g->dec1.n) snprintf(gb, sizeof gb, "%.0f", g->dec1.med * g->wbytes / 1e9);
        if (copy.n) {
            share_str(pct, sizeof pct, g->dec1, g->wbytes, copy.med, k >= first_big);
            share_str(pctg, sizeof pctg, g->dec1g, g->wbytes, copy.med, k >= first_big);
        }
        if (g->error[0])
            printf("| %s | %s | | FAILED: %.120s | | | | | | | | | |\n", g->model, g->profile, g->error);
        else
            printf("| %s | %s%s%s | %.1f | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", g->model, g->profile,
                   g->is_cpu ? cpu_extra : "", !g->is_cpu && strcmp(g->backend, "cuda") ? " (ran on the CPU!)" : "",
                   g->load_s, pre, tf, d1, gb, pct, d1g, pctg, dB, dG, dGG);
    }
    size_t n_ratio = json_array_size(jratios);
    if (n_ratio) {
        printf("\nBatched decode, GPU over CPU. The CPU runs batch %d only (its best batch size); the GPU at batch %d and at "
               "batch %d, both divided by that CPU figure.\n",
               o.batch, o.batch, o.batch_big);
        printf("\n| model | GPU profile | GPU b%d tok/s | GPU b%d tok/s | CPU (%s%s) b%d tok/s | GPU b%d / CPU (target 100x) "
               "| GPU b%d / CPU (target 100x) |\n",
               o.batch, o.batch_big, o.cpu_profile, cpu_extra, o.batch, o.batch, o.batch_big);
        printf("|---|---|---:|---:|---:|---:|---:|\n");
        for (size_t k = 0; k < n_ratio; k++) {
            json_t *r = json_array_get(jratios, k);
            char gbig[32] = "-", rbig[48] = "-";
            if (json_object_get(r, "ratio_big")) {
                snprintf(gbig, sizeof gbig, "%.0f", json_real_value(json_object_get(r, "gpu_big_tok_s")));
                snprintf(rbig, sizeof rbig, "%.1fx%s", json_real_value(json_object_get(r, "ratio_big")),
                         json_is_true(json_object_get(r, "met_big")) ? " met" : " missed");
            }
            printf("| %s | %s | %.0f | %s | %.0f | %.1fx%s | %s |\n", json_string_value(json_object_get(r, "model")),
                   json_string_value(json_object_get(r, "gpu_profile")), json_real_value(json_object_get(r, "gpu_tok_s")), gbig,
                   json_real_value(json_object_get(r, "cpu_tok_s")), json_real_value(json_object_get(r, "ratio")),
                   json_is_true(json_object_get(r, "met")) ? " met" : " missed", rbig);
        }
    }
    printf("\n%s\n", failures ? "bench_cuda: some legs FAILED (see above)" : "bench_cuda: all legs ran");
    json_object_set_new(root, "failures", json_integer(failures));
    if (o.json_path && json_dump_file(root, o.json_path, JSON_INDENT(1) | JSON_REAL_PRECISION(6))) {
        fprintf(stderr, "bench_cuda: cannot write %s\n", o.json_path);
        failures++;
    }
    json_decref(root);
    for (size_t i = 0; i < n_models; i++) free(models[i]);
    free(models);
    free(legs);
    return failures ? 1 : 0;
}

#endif
