/* engine_bench.c - prefill and decode tokens/s of the embedded engine on a
 * random-weight llama-shaped model, per profile and thread count.
 *
 *   bench_engine_bench [--dim 768] [--layers 12] [--hidden 2048] [--heads 12]
 *                      [--prompt 128] [--gen 32] [--profiles ref,cpu-f32,...]
 *                      [--threads 1,2] [--model PATH (reuse a file)]
 *
 * The model is written once with tools/ref/tiny_model.c (F16 weights, the
 * 300-token test vocabulary). Prefill = one forward over --prompt tokens;
 * decode = --gen single-token steps after it. Reported per row: tokens/s,
 * the matmul GFLOP/s they imply (2 x matrix parameters per token) and, for
 * decode, the weight bytes streamed per second in the profile's format and
 * the tokens per second of process CPU time ("cpu t/s": what the decode
 * costs, barely moved by other work on a shared machine, unlike wall time;
 * with threads > 1 it counts every thread's time, OpenMP's spinning too). */
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

int main(int argc, char **argv) {
    int dim = 768, layers = 12, hidden = 2048, heads = 12, prompt = 128, gen = 32;
    const char *profiles = "ref,cpu-f32,cpu-bf16,cpu-fp8,cpu-int4", *threads = "1,2", *model = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (!strcmp(a, "--dim")) dim = atoi(v);
        else if (!strcmp(a, "--layers")) layers = atoi(v);
        else if (!strcmp(a, "--hidden")) hidden = atoi(v);
        else if (!strcmp(a, "--heads")) heads = atoi(v);
        else if (!strcmp(a, "--prompt")) prompt = atoi(v);
        else if (!strcmp(a, "--gen")) gen = atoi(v);
        else if (!strcmp(a, "--profiles")) profiles = v;
        else if (!strcmp(a, "--threads")) threads = v;
        else if (!strcmp(a, "--model")) model = v;
        else return fprintf(stderr, "unknown flag %s\n", a), 2;
    }
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
    for (int i = 0; i < prompt + gen; i++) toks[i] = 33 + (i * 7) % 200;
    printf("# model %s: dim %d, layers %d, hidden %d, heads %d; prompt %d, decode %d tokens\n", model, dim, layers, hidden, heads,
           prompt, gen);
    printf("%-10s %7s %12s %10s %12s %10s %10s %10s\n", "profile", "threads", "prefill t/s", "GFLOP/s", "decode t/s", "GFLOP/s", "GB/s",
           "cpu t/s");
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
            double qd = (double)in->n_heads * in->head_dim, kvd = (double)in->n_kv_heads * in->head_dim;
            double mat = (double)in->n_layers * (2 * qd * in->dim + 2 * kvd * in->dim + 3.0 * in->dim * in->hidden_dim) +
                         (double)in->n_vocab * in->dim;
            drift_session *s;
            if (drift_session_new(m, prompt + gen + 1, &s, &err)) return fprintf(stderr, "%s\n", err.msg), 1;
            float *lg = malloc((size_t)in->n_vocab * sizeof *lg);
            double t0 = util_now_ms();
            if (drift_session_forward(s, toks, (size_t)prompt, 0, lg, NULL, &err)) return fprintf(stderr, "%s\n", err.msg), 1;
            double t1 = util_now_ms(), c1 = cpu_now_s();
            for (int i = 0; i < gen; i++)
                if (drift_session_forward(s, toks + prompt + i, 1, 0, lg, NULL, &err)) return fprintf(stderr, "%s\n", err.msg), 1;
            double t2 = util_now_ms(), c2 = cpu_now_s();
            double pre = prompt / ((t1 - t0) / 1000), dec = gen / ((t2 - t1) / 1000);
            printf("%-10s %7s %12.1f %10.2f %12.2f %10.2f %10.2f %10.2f\n", pn, tn, pre, pre * 2 * mat / 1e9, dec, dec * 2 * mat / 1e9,
                   dec * weight_bytes(&p, mat) / 1e9, gen / (c2 - c1));
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
