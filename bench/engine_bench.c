/* engine_bench.c - prefill, decode and batched-generation tokens/s of the
 * embedded engine, per profile and thread count, on a shipped GGUF or on a
 * random-weight llama-shaped model.
 *
 *   bench_engine_bench [--model PATH] [--prompt 128] [--gen 64] [--reps 1]
 *                      [--profiles ref,cpu-f32,...] [--threads 1,2]
 *                      [--tg-from-empty] [--only pp|tg] [--csv]
 *                      [--gen-batch 8,64 [--gen-prompts N] [--peak-gflops G]]
 *                      [--dim 768 --layers 12 --hidden 2048 --heads 12]
 *
 * Without --model, a random-weight model of the given shape is written once
 * with tools/ref/tiny_model.c (F16 weights, the 300-token test vocabulary).
 *
 * Prefill = one forward over --prompt tokens (logits of the last one only);
 * decode = --gen single-token steps with full logits. By default decode
 * follows the prompt in the same session; --tg-from-empty runs it in a fresh
 * session from position 0, as llama-bench's tg test does (its pp and tg are
 * separate tests). Each figure is the mean of --reps runs after one warm-up
 * run, with the standard deviation (llama-bench reports the same way).
 * Per row: tokens/s, the matmul GFLOP/s they imply (2 x matrix parameters
 * per token) and, for decode, the weight bytes streamed per second in the
 * profile's format and the tokens per second of process CPU time ("cpu t/s":
 * what the decode costs, barely moved by other work on a shared machine,
 * unlike wall time; with threads > 1 it counts every thread's time, OpenMP's
 * spinning too; the same for prefill). --csv prints one "csv,..." line per row for scripts
 * (bench/llamacpp_vs.sh).
 *
 * --gen-batch B1,B2: batched generation as the lab and `serve` run it
 * (drift_model_generate, greedy, --gen-prompts chat prompts of different
 * lengths, --gen new tokens at most, batch B): generated tokens/s and the
 * GFLOP/s of everything the engine computed (prefills, every step's
 * matmuls including the vocabulary projection, attention's two products),
 * counted from the tokens actually run, per second of wall time and per
 * second of process CPU time (what one busy core computes: compare it with
 * the 1-thread peak); with --peak-gflops (the FMA peak bench_kernels_bench
 * --peak-only measures at the same thread count), the wall figure's share. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "driftbench/model.h"
#include "model/numerics.h"
#include "util/util.h"
#include "../tools/ref/tiny_model.c"

static double weight_bytes(const drift_numeric_profile *p, double n_params) {
    const num_traits *tr = num_traits_of(p->weights);
    if (!tr) return n_params * 2; /* native: F16 file */
    return n_params * (double)tr->block_bytes / tr->block_size;
}

static double cpu_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Matrix parameters per token without the vocabulary projection (MoE: the
 * experts a token uses), and the projection's. */
static void mat_params(const drift_model_info *in, double *body, double *vocab) {
    double qd = (double)in->n_heads * in->head_dim, kvd = (double)in->n_kv_heads * in->head_dim;
    double ffn = 3.0 * in->dim * in->hidden_dim * (in->n_experts ? in->n_experts_used : 1);
    double router = in->n_experts ? (double)in->n_experts * in->dim : 0;
    *body = (double)in->n_layers * (2 * qd * in->dim + 2 * kvd * in->dim + ffn + router);
    *vocab = (double)in->n_vocab * in->dim;
}

/* FLOPs of attention for a token at position pos (0-based): q.k and w.v over
 * pos + 1 positions, every head, every layer. */
static double attn_flops(const drift_model_info *in, double pos) {
    double n = in->sliding_window > 0 && pos + 1 > in->sliding_window ? in->sliding_window : pos + 1;
    return 4.0 * in->n_layers * in->n_heads * in->head_dim * n;
}

typedef struct stat {
    double sum, sum2;
    int n;
} stat;

static void stat_add(stat *s, double v) {
    s->sum += v;
    s->sum2 += v * v;
    s->n++;
}
static double stat_mean(const stat *s) { return s->n ? s->sum / s->n : 0; }
static double stat_sd(const stat *s) {
    if (s->n < 2) return 0;
    double m = stat_mean(s), v = (s->sum2 - s->n * m * m) / (s->n - 1);
    return v > 0 ? sqrt(v) : 0;
}

static int in_list(const char *list, const char *item) {
    size_t n = strlen(item);
    for (const char *p = list; (p = strstr(p, item)); p += n)
        if ((p == list || p[-1] == ',') && (p[n] == 0 || p[n] == ',')) return 1;
    return 0;
}

/* Batched generation: n chat prompts, batch B, greedy, up to gen tokens. */
static int gen_batch(drift_model *m, const char *pn, const char *tn, int B, int n, int gen, int reps, double peak, int csv) {
    const drift_model_info *in = drift_model_get_info(m);
    int32_t **pt = calloc((size_t)n, sizeof *pt);
    size_t *pl = calloc((size_t)n, sizeof *pl);
    drift_generation *g = calloc((size_t)n, sizeof *g);
    drift_error err;
    for (int i = 0; i < n; i++) {
        char msg[160];
        snprintf(msg, sizeof msg, "Question %d: what is %d + %d? Show each step, then give the answer.%s", i, 17 + 7 * i, 3 + 5 * i,
                 i % 3 ? " Be brief." : "");
        if (drift_model_chat_tokens(m, msg, &pt[i], &pl[i], &err)) return fprintf(stderr, "%s\n", err.msg), 1;
    }
    drift_gen_params gp;
    drift_gen_params_default(&gp);
    gp.temperature = 0;
    gp.max_tokens = gen;
    double body, vocab;
    mat_params(in, &body, &vocab);
    stat tps = {0}, gfl = {0}, gflc = {0};
    long toks = 0;
    for (int r = 0; r <= reps; r++) { /* r = 0: warm-up */
        double t0 = util_now_ms(), c0 = cpu_now_s();
        if (drift_model_generate(m, (const int32_t *const *)pt, pl, (size_t)n, &gp, NULL, B, g, &err))
            return fprintf(stderr, "%s\n", err.msg), 1;
        double dt = (util_now_ms() - t0) / 1000, dc = cpu_now_s() - c0, flops = 0;
        toks = 0;
        for (int i = 0; i < n; i++) {
            double p = (double)pl[i];
            flops += 2 * (p * body + vocab); /* prefill: the last row's logits only */
            for (double t = 0; t < p; t++) flops += attn_flops(in, t);
            /* each generated token but the last was fed back through one step */
            for (int t = 0; t + 1 < g[i].n_tokens; t++) flops += 2 * (body + vocab) + attn_flops(in, p + t);
            toks += g[i].n_tokens;
            drift_generation_clear(&g[i]);
        }
        if (r == 0) continue;
        stat_add(&tps, (double)toks / dt);
        stat_add(&gfl, flops / dt / 1e9);
        stat_add(&gflc, flops / dc / 1e9);
    }
    if (csv)
        printf("csv,gen,%s,%s,%d,%d,%ld,%.2f,%.2f,%.3f,%.3f,%.3f\n", pn, tn, B, n, toks, stat_mean(&tps), stat_sd(&tps),
               stat_mean(&gfl), stat_sd(&gfl), stat_mean(&gflc));
    printf("%-10s %7s %6d %8d %8ld %12.1f %8.1f %10.2f %8.2f %10.2f", pn, tn, B, n, toks, stat_mean(&tps), stat_sd(&tps),
           stat_mean(&gfl), stat_sd(&gfl), stat_mean(&gflc));
    if (peak > 0) printf(" %7.1f%%", 100 * stat_mean(&gfl) / peak);
    printf("\n");
    fflush(stdout);
    for (int i = 0; i < n; i++) free(pt[i]);
    free(pt);
    free(pl);
    free(g);
    return 0;
}

int main(int argc, char **argv) {
    int dim = 768, layers = 12, hidden = 2048, heads = 12, prompt = 128, gen = 32, reps = 1, from_empty = 0, csv = 0, n_gen_prompts = 64;
    double peak = 0;
    const char *profiles = "ref,cpu-f32,cpu-bf16,cpu-fp8,cpu-int4", *threads = "1,2", *model = NULL, *only = "pp,tg", *gen_b = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--tg-from-empty")) {
            from_empty = 1;
            continue;
        }
        if (!strcmp(a, "--csv")) {
            csv = 1;
            continue;
        }
        if (!v) return fprintf(stderr, "flag %s needs a value\n", a), 2;
        i++;
        if (!strcmp(a, "--dim")) dim = atoi(v);
        else if (!strcmp(a, "--layers")) layers = atoi(v);
        else if (!strcmp(a, "--hidden")) hidden = atoi(v);
        else if (!strcmp(a, "--heads")) heads = atoi(v);
        else if (!strcmp(a, "--prompt")) prompt = atoi(v);
        else if (!strcmp(a, "--gen")) gen = atoi(v);
        else if (!strcmp(a, "--reps")) reps = atoi(v);
        else if (!strcmp(a, "--profiles")) profiles = v;
        else if (!strcmp(a, "--threads")) threads = v;
        else if (!strcmp(a, "--model")) model = v;
        else if (!strcmp(a, "--only")) only = v;
        else if (!strcmp(a, "--gen-batch")) gen_b = v;
        else if (!strcmp(a, "--gen-prompts")) n_gen_prompts = atoi(v);
        else if (!strcmp(a, "--peak-gflops")) peak = atof(v);
        else return fprintf(stderr, "unknown flag %s\n", a), 2;
    }
    if (prompt < 1 || gen < 1 || reps < 1 || n_gen_prompts < 1)
        return fprintf(stderr, "--prompt, --gen, --reps and --gen-prompts must be at least 1\n"), 2;
    char path[512];
    if (!model) {
        snprintf(path, sizeof path, "/tmp/engine_bench_%d_%d_%d.gguf", dim, layers, hidden);
        tiny_cfg c = tiny_default("llama");
        c.dim = dim;
        c.n_layers = layers;
        c.hidden = hidden;
        c.n_heads = heads;
        c.n_kv_heads = heads / 4 > 0 ? heads / 4 : 1;
        c.ctx = prompt + gen + 8;
        c.wtype = GGUF_DT_F16;
        char err[256];
        if (tiny_model_write(&c, path, err, sizeof err)) return fprintf(stderr, "%s\n", err), 1;
        model = path;
    }
    int32_t *toks = malloc((size_t)(prompt + gen) * sizeof *toks);
    int header = 0;
    char *pl = util_strdup(profiles);
    char *s1 = NULL;
    for (char *pn = strtok_r(pl, ",", &s1); pn; pn = strtok_r(NULL, ",", &s1)) {
        char *tl = util_strdup(threads), *s2 = NULL;
        for (char *tn = strtok_r(tl, ",", &s2); tn; tn = strtok_r(NULL, ",", &s2)) {
            drift_numeric_profile p;
            drift_error err;
            char spec[128];
            snprintf(spec, sizeof spec, "profile=%s&threads=%s", pn, tn);
            if (drift_profile_parse(spec, &p, &err)) {
                fprintf(stderr, "%s\n", err.msg);
                continue;
            }
            if (!strcmp(pn, "ref") && strcmp(tn, "1")) continue; /* ref is single-threaded by definition */
            drift_model *m;
            if (drift_model_load(model, &p, &m, &err)) {
                fprintf(stderr, "%s\n", err.msg);
                continue;
            }
            const drift_model_info *in = drift_model_get_info(m);
            for (int i = 0; i < prompt + gen; i++) toks[i] = (int32_t)(33 + (i * 7) % (in->n_vocab > 240 ? 200 : in->n_vocab - 40));
            double body, vocab;
            mat_params(in, &body, &vocab);
            double mat = body + vocab;
            if (!header++) {
                printf("# model %s: %s, dim %d, layers %d, hidden %d, heads %d/%d, vocab %d; prompt %d, decode %d tokens%s; "
                       "mean +- sd of %d runs\n",
                       model, in->arch, in->dim, in->n_layers, in->hidden_dim, in->n_heads, in->n_kv_heads, in->n_vocab, prompt, gen,
                       from_empty ? " (from an empty context)" : " (after the prompt)", reps);
                if (!gen_b)
                    printf("%-10s %7s %12s %8s %9s %10s %12s %8s %9s %8s %10s\n", "profile", "threads", "prefill t/s", "sd", "GFLOP/s",
                           "cpu t/s", "decode t/s", "sd", "GFLOP/s", "GB/s", "cpu t/s");
                else
                    printf("%-10s %7s %6s %8s %8s %12s %8s %10s %8s %10s %8s\n", "profile", "threads", "batch", "prompts", "tokens",
                           "gen t/s", "sd", "GFLOP/s", "sd", "GFLOP/cpu-s", "of peak");
            }
            if (gen_b) {
                char *bl = util_strdup(gen_b), *s3 = NULL;
                for (char *bn = strtok_r(bl, ",", &s3); bn; bn = strtok_r(NULL, ",", &s3))
                    if (gen_batch(m, pn, tn, atoi(bn), n_gen_prompts, gen, reps, peak, csv)) return 1;
                free(bl);
                drift_model_free(m);
                continue;
            }
            drift_session *s;
            if (drift_session_new(m, prompt + gen + 1, &s, &err)) return fprintf(stderr, "%s\n", err.msg), 1;
            float *lg = malloc((size_t)in->n_vocab * sizeof *lg);
            stat pp = {0}, ppc = {0}, tg = {0}, tgc = {0};
            for (int r = 0; r <= reps; r++) { /* r = 0: warm-up */
                drift_session_reset(s);
                if (in_list(only, "pp") || !from_empty) {
                    double t0 = util_now_ms(), c0 = cpu_now_s();
                    if (drift_session_forward(s, toks, (size_t)prompt, 0, lg, NULL, &err)) return fprintf(stderr, "%s\n", err.msg), 1;
                    if (r) {
                        stat_add(&pp, prompt / ((util_now_ms() - t0) / 1000));
                        stat_add(&ppc, prompt / (cpu_now_s() - c0));
                    }
                }
                if (!in_list(only, "tg")) continue;
                if (from_empty) drift_session_reset(s);
                double t1 = util_now_ms(), c1 = cpu_now_s();
                for (int i = 0; i < gen; i++)
                    if (drift_session_forward(s, toks + prompt + i, 1, 0, lg, NULL, &err)) return fprintf(stderr, "%s\n", err.msg), 1;
                double t2 = util_now_ms(), c2 = cpu_now_s();
                if (r) {
                    stat_add(&tg, gen / ((t2 - t1) / 1000));
                    stat_add(&tgc, gen / (c2 - c1));
                }
            }
            double pre = stat_mean(&pp), dec = stat_mean(&tg);
            if (csv)
                printf("csv,engine,%s,%s,%d,%d,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f\n", pn, tn, prompt, gen, pre, stat_sd(&pp), dec, stat_sd(&tg),
                       stat_mean(&ppc), stat_mean(&tgc));
            printf("%-10s %7s %12.1f %8.1f %9.2f %10.1f %12.2f %8.2f %9.2f %8.2f %10.2f\n", pn, tn, pre, stat_sd(&pp),
                   pre * 2 * (body + vocab / prompt) / 1e9, stat_mean(&ppc), dec, stat_sd(&tg), dec * 2 * mat / 1e9,
                   dec * weight_bytes(&p, mat) / 1e9, stat_mean(&tgc));
            fflush(stdout);
            free(lg);
            drift_session_free(s);
            drift_model_free(m);
        }
        free(tl);
    }
    free(pl);
    free(toks);
    return 0;
}
