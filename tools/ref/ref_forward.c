/* ref_forward.c - an independent float64 reference of the engine's forward
 * pass, for tests: plain loops in double, written from the model
 * definitions (Llama / Qwen2 / Mixtral, RoPE incl. Llama-3 scaling, GQA,
 * sliding window, top-k MoE), sharing no kernel code with src/model/
 * (it uses only the GGUF reader to find F32 tensors and metadata).
 *
 *   ref_logits(path, tokens, n, out): out (n, n_vocab) = logits of every
 *   position, computed over the whole sequence at once with a causal mask. */
#ifndef REF_FORWARD_C
#define REF_FORWARD_C

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gguf.h"

typedef struct ref_ctx {
    gguf_file *f;
    char arch[32];
    char *err;
    size_t errlen;
} ref_ctx;

static const float *ref_t(ref_ctx *c, const char *name) {
    const gguf_tensor *t = gguf_find_tensor(c->f, name);
    if (!t || t->type != GGUF_DT_F32) return NULL;
    return (const float *)t->data;
}

static double ref_key(ref_ctx *c, const char *k, double def) {
    char full[160];
    double v;
    snprintf(full, sizeof full, "%s.%s", c->arch, k);
    return gguf_get_float(c->f, full, &v) == 0 ? v : def;
}

/* y (n_out) = W (n_out, n_in) x (n_in), row-major W as GGUF stores it */
static void ref_matvec(double *y, const float *W, const double *x, int n_out, int n_in) {
    for (int o = 0; o < n_out; o++) {
        double s = 0;
        for (int i = 0; i < n_in; i++) s += (double)W[(size_t)o * n_in + i] * x[i];
        y[o] = s;
    }
}

static void ref_rmsnorm(double *y, const double *x, const float *w, int n, double eps) {
    double ss = 0;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    double r = 1.0 / sqrt(ss / n + eps);
    for (int i = 0; i < n; i++) y[i] = x[i] * r * (double)w[i];
}

static double ref_silu(double g) { return g / (1.0 + exp(-g)); }

static void ref_rope(double *v, int pos, int hd, int n_rot, int neox, double theta, const double *inv_scale) {
    int half = n_rot / 2;
    for (int i = 0; i < half; i++) {
        double freq = pow(theta, -2.0 * i / n_rot) / inv_scale[i];
        double a = pos * freq;
        int i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
        double x0 = v[i0], x1 = v[i1];
        v[i0] = x0 * cos(a) - x1 * sin(a);
        v[i1] = x0 * sin(a) + x1 * cos(a);
    }
    (void)hd;
}

/* Returns 0 or -1 with a message. */
static int ref_logits(const char *path, const int *tok, int n, double *out, char *err, size_t errlen) {
    ref_ctx c = {0};
    drift_error gerr;
    if (gguf_open(path, &c.f, &gerr)) {
        snprintf(err, errlen, "%s", gerr.msg);
        return -1;
    }
    char *arch = gguf_get_string(c.f, "general.architecture");
    snprintf(c.arch, sizeof c.arch, "%s", arch ? arch : "?");
    free(arch);
    int D = (int)ref_key(&c, "embedding_length", 0), L = (int)ref_key(&c, "block_count", 0);
    int H = (int)ref_key(&c, "feed_forward_length", 0), NH = (int)ref_key(&c, "attention.head_count", 0);
    int NKV = (int)ref_key(&c, "attention.head_count_kv", NH), hd = D / NH;
    int n_rot = (int)ref_key(&c, "rope.dimension_count", hd);
    int E = (int)ref_key(&c, "expert_count", 0), EK = (int)ref_key(&c, "expert_used_count", 0);
    int win = (int)ref_key(&c, "attention.sliding_window", 0);
    double eps = ref_key(&c, "attention.layer_norm_rms_epsilon", 1e-5), theta = ref_key(&c, "rope.freq_base", 10000);
    int neox = !strcmp(c.arch, "qwen2");
    const gguf_kv *tk = gguf_find_kv(c.f, "tokenizer.ggml.tokens");
    int V = tk ? (int)tk->arr_n : 0;
    /* frequency divisors: 1, or the Llama-3 rule */
    double *inv = malloc(sizeof(double) * (size_t)(n_rot / 2));
    char sk[160];
    snprintf(sk, sizeof sk, "%s.rope.scaling.type", c.arch);
    char *stype = gguf_get_string(c.f, sk);
    double factor = ref_key(&c, "rope.scaling.factor", 1), lo = ref_key(&c, "rope.scaling.low_freq_factor", 1),
           hi = ref_key(&c, "rope.scaling.high_freq_factor", 4), octx = ref_key(&c, "rope.scaling.original_context_length", 8192);
    for (int i = 0; i < n_rot / 2; i++) {
        inv[i] = 1.0;
        if (stype && !strcmp(stype, "llama3") && factor > 1) {
            double f0 = pow(theta, -2.0 * i / n_rot), wl = 2 * M_PI / f0, f1;
            if (wl < octx / hi) f1 = f0;
            else if (wl > octx / lo) f1 = f0 / factor;
            else {
                double sm = (octx / wl - lo) / (hi - lo);
                f1 = (1 - sm) * f0 / factor + sm * f0;
            }
            inv[i] = f0 / f1;
        }
    }
    free(stype);
    const float *emb = ref_t(&c, "token_embd.weight"), *onorm = ref_t(&c, "output_norm.weight");
    const float *outw = ref_t(&c, "output.weight");
    if (!outw) outw = emb;
    if (!D || !L || !V || !emb || !onorm) {
        snprintf(err, errlen, "reference: model incomplete or not F32");
        gguf_close(c.f);
        free(inv);
        return -1;
    }
    int QD = NH * hd, KVD = NKV * hd;
    double *x = calloc((size_t)n * D, sizeof *x), *xb = malloc(sizeof(double) * D), *q = malloc(sizeof(double) * (size_t)n * QD);
    double *k = malloc(sizeof(double) * (size_t)n * KVD), *v = malloc(sizeof(double) * (size_t)n * KVD);
    double *att = malloc(sizeof(double) * QD), *o = malloc(sizeof(double) * D), *h1 = malloc(sizeof(double) * H),
           *h3 = malloc(sizeof(double) * H), *sc = malloc(sizeof(double) * (size_t)n), *ffn = malloc(sizeof(double) * D);
    double *xn = malloc(sizeof(double) * (size_t)n * D);
    for (int t = 0; t < n; t++)
        for (int d = 0; d < D; d++) x[(size_t)t * D + d] = emb[(size_t)tok[t] * D + d];
    char nm[96];
    for (int l = 0; l < L; l++) {
#define T(s) (snprintf(nm, sizeof nm, "blk.%d." s, l), ref_t(&c, nm))
        const float *an = T("attn_norm.weight"), *wq = T("attn_q.weight"), *wk = T("attn_k.weight"), *wv = T("attn_v.weight");
        const float *wo = T("attn_output.weight"), *fn = T("ffn_norm.weight");
        const float *bq = T("attn_q.bias"), *bk = T("attn_k.bias"), *bv = T("attn_v.bias");
        for (int t = 0; t < n; t++) {
            ref_rmsnorm(xn + (size_t)t * D, x + (size_t)t * D, an, D, eps);
            ref_matvec(q + (size_t)t * QD, wq, xn + (size_t)t * D, QD, D);
            ref_matvec(k + (size_t)t * KVD, wk, xn + (size_t)t * D, KVD, D);
            ref_matvec(v + (size_t)t * KVD, wv, xn + (size_t)t * D, KVD, D);
            for (int i = 0; i < QD && bq; i++) q[(size_t)t * QD + i] += bq[i];
            for (int i = 0; i < KVD && bk; i++) k[(size_t)t * KVD + i] += bk[i];
            for (int i = 0; i < KVD && bv; i++) v[(size_t)t * KVD + i] += bv[i];
            for (int h = 0; h < NH; h++) ref_rope(q + (size_t)t * QD + h * hd, t, hd, n_rot, neox, theta, inv);
            for (int h = 0; h < NKV; h++) ref_rope(k + (size_t)t * KVD + h * hd, t, hd, n_rot, neox, theta, inv);
        }
        for (int t = 0; t < n; t++) {
            int t0 = win > 0 && t + 1 > win ? t + 1 - win : 0;
            for (int h = 0; h < NH; h++) {
                int g = h / (NH / NKV);
                double mx = -INFINITY, sum = 0;
                for (int u = t0; u <= t; u++) {
                    double s = 0;
                    for (int d = 0; d < hd; d++) s += q[(size_t)t * QD + h * hd + d] * k[(size_t)u * KVD + g * hd + d];
                    sc[u] = s / sqrt((double)hd);
                    if (sc[u] > mx) mx = sc[u];
                }
                for (int u = t0; u <= t; u++) sum += (sc[u] = exp(sc[u] - mx));
                for (int d = 0; d < hd; d++) {
                    double a = 0;
                    for (int u = t0; u <= t; u++) a += sc[u] / sum * v[(size_t)u * KVD + g * hd + d];
                    att[h * hd + d] = a;
                }
            }
            ref_matvec(o, wo, att, D, QD);
            for (int d = 0; d < D; d++) x[(size_t)t * D + d] += o[d];
            ref_rmsnorm(xb, x + (size_t)t * D, fn, D, eps);
            if (E) {
                const float *router = T("ffn_gate_inp.weight"), *eg = T("ffn_gate_exps.weight"), *eu = T("ffn_up_exps.weight"),
                            *ed = T("ffn_down_exps.weight");
                double lg[64], p[64], tot = 0;
                int sel[16];
                ref_matvec(lg, router, xb, E, D);
                double mx = lg[0], s = 0;
                for (int e = 1; e < E; e++) mx = lg[e] > mx ? lg[e] : mx;
                for (int e = 0; e < E; e++) s += (p[e] = exp(lg[e] - mx));
                for (int e = 0; e < E; e++) p[e] /= s;
                for (int j = 0; j < EK; j++) {
                    int best = -1;
                    for (int e = 0; e < E; e++) {
                        int used = 0;
                        for (int i = 0; i < j; i++) used |= sel[i] == e;
                        if (!used && (best < 0 || p[e] > p[best])) best = e;
                    }
                    sel[j] = best;
                    tot += p[best];
                }
                for (int d = 0; d < D; d++) ffn[d] = 0;
                for (int j = 0; j < EK; j++) {
                    int e = sel[j];
                    ref_matvec(h1, eg + (size_t)e * H * D, xb, H, D);
                    ref_matvec(h3, eu + (size_t)e * H * D, xb, H, D);
                    for (int i = 0; i < H; i++) h1[i] = ref_silu(h1[i]) * h3[i];
                    ref_matvec(o, ed + (size_t)e * D * H, h1, D, H);
                    for (int d = 0; d < D; d++) ffn[d] += p[e] / tot * o[d];
                }
            } else {
                ref_matvec(h1, T("ffn_gate.weight"), xb, H, D);
                ref_matvec(h3, T("ffn_up.weight"), xb, H, D);
                for (int i = 0; i < H; i++) h1[i] = ref_silu(h1[i]) * h3[i];
                ref_matvec(ffn, T("ffn_down.weight"), h1, D, H);
            }
            for (int d = 0; d < D; d++) x[(size_t)t * D + d] += ffn[d];
        }
#undef T
    }
    for (int t = 0; t < n; t++) {
        ref_rmsnorm(xb, x + (size_t)t * D, onorm, D, eps);
        ref_matvec(out + (size_t)t * V, outw, xb, V, D);
    }
    free(x); free(xb); free(q); free(k); free(v); free(att); free(o); free(h1); free(h3); free(sc); free(ffn); free(xn); free(inv);
    gguf_close(c.f);
    return 0;
}

#endif
