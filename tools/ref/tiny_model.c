/* tiny_model.c - writes tiny random-weight GGUF models (llama, qwen2, MoE,
 * sliding window) with llama.cpp's tensor names and metadata keys, and a
 * GPT-2 byte-level vocabulary (256 byte symbols + a few merges + ChatML
 * control tokens). Used by tests/unit/test_transformer.c (which #includes
 * this file) and to make the fixtures in tests/data/models/.
 *
 * Weights are uniform in [-a, a] with a = 1/sqrt(fan_in) (xorshift64*,
 * seeded), norms around 1, biases small: activations stay O(1), so the
 * logits of different numeric profiles differ measurably but sanely. */
#ifndef TINY_MODEL_C
#define TINY_MODEL_C

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gguf.h"

typedef struct tiny_cfg {
    const char *arch;      /* "llama" or "qwen2" */
    const char *pre;       /* tokenizer.ggml.pre */
    int dim, n_layers, n_heads, n_kv_heads, hidden;
    int n_experts, n_used; /* 0 = dense */
    int sliding_window;    /* 0 = none */
    int tied;              /* no output.weight */
    int qkv_bias;
    int llama3_scaling;    /* rope.scaling.type = llama3, factor 8, orig ctx 32 */
    int rope_freqs_tensor; /* with llama3_scaling: also write rope_freqs.weight (as llama.cpp's converter does) */
    int legacy_experts;    /* MoE as one 2-D tensor per expert (blk.N.ffn_gate.E.weight), same values */
    int ctx;
    float theta;
    uint64_t seed;
    gguf_dtype wtype;      /* type of the 2-D/3-D weight tensors */
} tiny_cfg;

static tiny_cfg tiny_default(const char *arch) {
    tiny_cfg c;
    memset(&c, 0, sizeof c);
    c.arch = arch;
    c.pre = !strcmp(arch, "qwen2") ? "qwen2" : "llama-bpe";
    c.dim = 64;
    c.n_layers = 2;
    c.n_heads = 4;
    c.n_kv_heads = 2;
    c.hidden = 128;
    c.ctx = 256;
    c.theta = 10000.0f;
    c.seed = 1234;
    c.wtype = GGUF_DT_F32;
    c.qkv_bias = !strcmp(arch, "qwen2");
    return c;
}

static uint64_t tiny_rng(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

static float tiny_unif(uint64_t *s, float a) { return (float)(((double)(tiny_rng(s) >> 11) * 0x1.0p-53 * 2.0 - 1.0) * a); }

static int tiny_tensor(gguf_writer *w, uint64_t *s, const char *name, gguf_dtype type, int nd, uint64_t n0, uint64_t n1, uint64_t n2,
                       float center, float a) {
    uint64_t ne[3] = {n0, n1, n2};
    size_t n = (size_t)(n0 * n1 * n2);
    float *x = malloc(n * sizeof *x);
    if (!x) return -1;
    for (size_t i = 0; i < n; i++) x[i] = center + tiny_unif(s, a);
    int rc = gguf_writer_add_tensor_f32(w, name, type, (uint32_t)nd, ne, x);
    free(x);
    return rc;
}

/* GPT-2 byte -> code point (bytes_to_unicode) as UTF-8 */
static int tiny_byte_utf8(int b, char *o) {
    int cp = b;
    if (!((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174)) {
        int n = 0;
        for (int x = 0; x < b; x++)
            if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || x >= 174)) n++;
        cp = 256 + n;
    }
    if (cp < 0x80) {
        o[0] = (char)cp;
        o[1] = 0;
        return 1;
    }
    o[0] = (char)(0xc0 | (cp >> 6));
    o[1] = (char)(0x80 | (cp & 0x3f));
    o[2] = 0;
    return 2;
}

#define TINY_N_MERGES 24
static const char *tiny_merges[TINY_N_MERGES] = {
    "\xc4\xa0 t", "h e", "\xc4\xa0t he", "i n", "a n", "e r", "o n", "\xc4\xa0 a", "r e", "a t", "e n", "o r",
    "\xc4\xa0 s", "i s", "\xc4\xa0 w", "e s", "\xc4\xa0 o", "i t", "a r", "o u", "\xc4\xa0 c", "l l", "\xc4\xa0 1", "1 2"};

/* Writes the model; returns 0 or -1 (message in errbuf). */
static int tiny_model_write(const tiny_cfg *c, const char *path, char *errbuf, size_t errlen) {
    gguf_writer *w = gguf_writer_new();
    uint64_t s = c->seed * 0x9e3779b97f4a7c15ull + 1;
    const char *A = c->arch;
    char key[128];
#define K(x) (snprintf(key, sizeof key, "%s." x, A), key)
    gguf_writer_add_string(w, "general.architecture", A);
    gguf_writer_add_string(w, "general.name", !strcmp(A, "qwen2") ? "tiny-qwen2" : c->n_experts ? "tiny-moe" : "tiny-llama");
    gguf_writer_add_u32(w, K("context_length"), (uint32_t)c->ctx);
    gguf_writer_add_u32(w, K("embedding_length"), (uint32_t)c->dim);
    gguf_writer_add_u32(w, K("block_count"), (uint32_t)c->n_layers);
    gguf_writer_add_u32(w, K("feed_forward_length"), (uint32_t)c->hidden);
    gguf_writer_add_u32(w, K("attention.head_count"), (uint32_t)c->n_heads);
    gguf_writer_add_u32(w, K("attention.head_count_kv"), (uint32_t)c->n_kv_heads);
    gguf_writer_add_f32(w, K("attention.layer_norm_rms_epsilon"), 1e-5f);
    gguf_writer_add_f32(w, K("rope.freq_base"), c->theta);
    gguf_writer_add_u32(w, K("rope.dimension_count"), (uint32_t)(c->dim / c->n_heads));
    if (c->n_experts) {
        gguf_writer_add_u32(w, K("expert_count"), (uint32_t)c->n_experts);
        gguf_writer_add_u32(w, K("expert_used_count"), (uint32_t)c->n_used);
    }
    if (c->sliding_window) gguf_writer_add_u32(w, K("attention.sliding_window"), (uint32_t)c->sliding_window);
    if (c->llama3_scaling) {
        gguf_writer_add_string(w, K("rope.scaling.type"), "llama3");
        gguf_writer_add_f32(w, K("rope.scaling.factor"), 8.0f);
        gguf_writer_add_f32(w, K("rope.scaling.low_freq_factor"), 1.0f);
        gguf_writer_add_f32(w, K("rope.scaling.high_freq_factor"), 4.0f);
        gguf_writer_add_u32(w, K("rope.scaling.original_context_length"), 32);
    }
#undef K
    /* vocabulary: 256 bytes, merge results, specials */
    int nv = 0;
    char *toks[320];
    int32_t types[320];
    for (int b = 0; b < 256; b++) {
        char u[4];
        tiny_byte_utf8(b, u);
        toks[nv] = strdup(u);
        types[nv++] = 1;
    }
    for (int i = 0; i < TINY_N_MERGES; i++) {
        const char *sp = strchr(tiny_merges[i], ' ');
        char buf[32];
        size_t l = (size_t)(sp - tiny_merges[i]);
        memcpy(buf, tiny_merges[i], l);
        strcpy(buf + l, sp + 1);
        toks[nv] = strdup(buf);
        types[nv++] = 1;
    }
    const char *specials[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
    int first_special = nv;
    for (int i = 0; i < 3; i++) {
        toks[nv] = strdup(specials[i]);
        types[nv++] = 3;
    }
    while (nv < 300) { /* padding tokens, as real vocabularies have */
        char buf[32];
        snprintf(buf, sizeof buf, "<|extra_%d|>", nv);
        toks[nv] = strdup(buf);
        types[nv++] = 5;
    }
    gguf_writer_add_string(w, "tokenizer.ggml.model", "gpt2");
    gguf_writer_add_string(w, "tokenizer.ggml.pre", c->pre);
    gguf_writer_add_string_array(w, "tokenizer.ggml.tokens", (const char *const *)toks, (uint64_t)nv);
    gguf_writer_add_array(w, "tokenizer.ggml.token_type", GGUF_VT_INT32, types, (uint64_t)nv);
    gguf_writer_add_string_array(w, "tokenizer.ggml.merges", tiny_merges, TINY_N_MERGES);
    gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)first_special);
    gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)first_special + 2);
    gguf_writer_add_bool(w, "tokenizer.ggml.add_bos_token", 0);
    for (int i = 0; i < nv; i++) free(toks[i]);

    int D = c->dim, hd = c->dim / c->n_heads, QD = c->n_heads * hd, KVD = c->n_kv_heads * hd, H = c->hidden;
    gguf_dtype wt = c->wtype;
    int rc = 0;
    rc |= tiny_tensor(w, &s, "token_embd.weight", wt, 2, (uint64_t)D, (uint64_t)nv, 1, 0.0f, 1.0f);
    rc |= tiny_tensor(w, &s, "output_norm.weight", GGUF_DT_F32, 1, (uint64_t)D, 1, 1, 1.0f, 0.2f);
    if (c->llama3_scaling && c->rope_freqs_tensor) {
        /* divisors of the base frequencies: 1 (high freq), factor (low freq), smoothed between */
        int half = hd / 2;
        float ff[512];
        for (int i = 0; i < half && i < 512; i++) {
            double f0 = pow((double)c->theta, -2.0 * i / hd), wl = 2 * M_PI / f0, lo = 1, hi = 4, octx = 32, factor = 8;
            if (wl < octx / hi) ff[i] = 1.0f;
            else if (wl > octx / lo) ff[i] = (float)factor;
            else {
                double sm = (octx / wl - lo) / (hi - lo);
                ff[i] = (float)(1.0 / ((1 - sm) / factor + sm));
            }
        }
        uint64_t ne[1] = {(uint64_t)half};
        rc |= gguf_writer_add_tensor_f32(w, "rope_freqs.weight", GGUF_DT_F32, 1, ne, ff);
    }
    if (!c->tied) rc |= tiny_tensor(w, &s, "output.weight", wt, 2, (uint64_t)D, (uint64_t)nv, 1, 0.0f, 1.0f / sqrtf((float)D) * 3);
    for (int l = 0; l < c->n_layers; l++) {
        char nm[96];
#define N(x) (snprintf(nm, sizeof nm, "blk.%d." x, l), nm)
        float aD = 1.0f / sqrtf((float)D), aH = 1.0f / sqrtf((float)H), aQ = 1.0f / sqrtf((float)QD);
        rc |= tiny_tensor(w, &s, N("attn_norm.weight"), GGUF_DT_F32, 1, (uint64_t)D, 1, 1, 1.0f, 0.2f);
        rc |= tiny_tensor(w, &s, N("attn_q.weight"), wt, 2, (uint64_t)D, (uint64_t)QD, 1, 0.0f, aD * 2);
        rc |= tiny_tensor(w, &s, N("attn_k.weight"), wt, 2, (uint64_t)D, (uint64_t)KVD, 1, 0.0f, aD * 2);
        rc |= tiny_tensor(w, &s, N("attn_v.weight"), wt, 2, (uint64_t)D, (uint64_t)KVD, 1, 0.0f, aD);
        if (c->qkv_bias) {
            rc |= tiny_tensor(w, &s, N("attn_q.bias"), GGUF_DT_F32, 1, (uint64_t)QD, 1, 1, 0.0f, 0.1f);
            rc |= tiny_tensor(w, &s, N("attn_k.bias"), GGUF_DT_F32, 1, (uint64_t)KVD, 1, 1, 0.0f, 0.1f);
            rc |= tiny_tensor(w, &s, N("attn_v.bias"), GGUF_DT_F32, 1, (uint64_t)KVD, 1, 1, 0.0f, 0.1f);
        }
        rc |= tiny_tensor(w, &s, N("attn_output.weight"), wt, 2, (uint64_t)QD, (uint64_t)D, 1, 0.0f, aQ);
        rc |= tiny_tensor(w, &s, N("ffn_norm.weight"), GGUF_DT_F32, 1, (uint64_t)D, 1, 1, 1.0f, 0.2f);
        if (c->n_experts) {
            rc |= tiny_tensor(w, &s, N("ffn_gate_inp.weight"), GGUF_DT_F32, 2, (uint64_t)D, (uint64_t)c->n_experts, 1, 0.0f, aD * 3);
            if (c->legacy_experts) {
                const char *kinds[3] = {"gate", "up", "down"};
                for (int k = 0; k < 3; k++)
                    for (int e = 0; e < c->n_experts; e++) {
                        snprintf(nm, sizeof nm, "blk.%d.ffn_%s.%d.weight", l, kinds[k], e);
                        rc |= tiny_tensor(w, &s, nm, wt, 2, (uint64_t)(k == 2 ? H : D), (uint64_t)(k == 2 ? D : H), 1, 0.0f,
                                          k == 2 ? aH : aD);
                    }
            } else {
                rc |= tiny_tensor(w, &s, N("ffn_gate_exps.weight"), wt, 3, (uint64_t)D, (uint64_t)H, (uint64_t)c->n_experts, 0.0f, aD);
                rc |= tiny_tensor(w, &s, N("ffn_up_exps.weight"), wt, 3, (uint64_t)D, (uint64_t)H, (uint64_t)c->n_experts, 0.0f, aD);
                rc |= tiny_tensor(w, &s, N("ffn_down_exps.weight"), wt, 3, (uint64_t)H, (uint64_t)D, (uint64_t)c->n_experts, 0.0f, aH);
            }
        } else {
            rc |= tiny_tensor(w, &s, N("ffn_gate.weight"), wt, 2, (uint64_t)D, (uint64_t)H, 1, 0.0f, aD * 2);
            rc |= tiny_tensor(w, &s, N("ffn_up.weight"), wt, 2, (uint64_t)D, (uint64_t)H, 1, 0.0f, aD * 2);
            rc |= tiny_tensor(w, &s, N("ffn_down.weight"), wt, 2, (uint64_t)H, (uint64_t)D, 1, 0.0f, aH);
        }
#undef N
    }
    drift_error err;
    drift_status st = rc ? DRIFT_ERR_INVALID : gguf_writer_save(w, path, &err);
    gguf_writer_free(w);
    if (st) snprintf(errbuf, errlen, "%s", rc ? "writer: a tensor could not be added" : err.msg);
    return st ? -1 : 0;
}

#endif
