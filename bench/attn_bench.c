/* attn_bench.c - grouped-query attention of a long-context prefill: the query
 * heads that share one KV head one at a time (num_attention per head, each
 * pass reading every K and V vector of the head again) against all of them
 * in one pass (num_attention_group), in one process, on the lab's long
 * context shape: llama-fragile-7m's heads (8 query / 2 KV heads of 32, group
 * 4), the cache's layout (the KV heads' f32 vectors interleaved per
 * position, as forward.c stores them), the prefill's rows at positions 0..N-1
 * (every --every-th row timed, the whole causal window of each).
 *
 *   bench_attn_bench [--n 2000] [--every 8] [--reps 3] [--heads 8] [--kv-heads 2]
 *                    [--head-dim 32] [--profiles 'SPEC;SPEC;...']
 *
 * Default profiles: the long-context leg's attention (kv=f32 as the engine
 * decodes its bf16 cache once; P rounded to bf16; online blocks of 128 (vllm,
 * sglang) and 64 (trtllm)), two-pass f32, and a hardware level's dot product
 * (lanes=16). Per profile: CPU ns per (key, query head) both ways (the
 * thread's CPU time, best of --reps (at most 64): the machine is shared),
 * the ratio grouped / per head (the median over the reps of each rep's
 * pair, the two ways run in turn, with its min-max), and whether
 * the two gave the same bits (they must: "differ" exits 1).
 * Prints the process CPU seconds at the end. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/numerics.h"
#include "util/util.h"

/* this thread's CPU seconds: what the kernel costs, barely moved by the
 * other processes of a shared machine (its wall time is) */
static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int n = 2000, every = 8, reps = 3, nh = 8, nkv = 2, hd = 32;
    const char *profiles = "kv=f32&dtype=bf16&probs=dtype&attn=online:128;"
                           "kv=f32&dtype=bf16&probs=dtype&attn=online:64;"
                           "kv=f32&attn=two-pass;"
                           "kv=f32&attn=online:128&isa=avx2&lanes=16";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int *ip = !strcmp(a, "--n") ? &n : !strcmp(a, "--every") ? &every : !strcmp(a, "--reps") ? &reps
                  : !strcmp(a, "--heads") ? &nh : !strcmp(a, "--kv-heads") ? &nkv : !strcmp(a, "--head-dim") ? &hd : NULL;
        if (ip && v) {
            *ip = atoi(v);
            i++;
        } else if (!strcmp(a, "--profiles") && v) {
            profiles = v;
            i++;
        } else {
            fprintf(stderr, "usage: bench_attn_bench [--n N] [--every K] [--reps R] [--heads H] [--kv-heads KV] "
                            "[--head-dim D] [--profiles 'SPEC;...']\n");
            return 2;
        }
    }
    if (n < 1 || every < 1 || reps < 1 || reps > 64 || nkv < 1 || nh < nkv || nh % nkv || hd < 1) {
        fprintf(stderr, "bench_attn_bench: bad shape\n");
        return 2;
    }
    int G = nh / nkv;
    util_rng rng;
    util_rng_seed(&rng, 36);
    size_t vec = num_kv_bytes(DRIFT_DTYPE_F32, hd), stride = (size_t)nkv * vec;
    uint8_t *kc = malloc((size_t)n * stride), *vc = malloc((size_t)n * stride);
    float *q = malloc((size_t)nh * hd * sizeof *q), *o1 = malloc((size_t)nh * hd * sizeof *o1),
          *o2 = malloc((size_t)nh * hd * sizeof *o2), *tmp = malloc((size_t)hd * sizeof *tmp);
    float *scr = malloc(num_attention_scratch(G, n, hd) * sizeof *scr);
    if (!kc || !vc || !q || !o1 || !o2 || !tmp || !scr) {
        fprintf(stderr, "bench_attn_bench: out of memory\n");
        return 2;
    }
    for (int i = 0; i < nh * hd; i++) q[i] = (float)(util_rng_uniform(&rng) * 2 - 1);
    for (int t = 0; t < n; t++)
        for (int h = 0; h < nkv; h++) {
            for (int d = 0; d < hd; d++) tmp[d] = (float)(util_rng_uniform(&rng) * 2 - 1);
            num_kv_store(DRIFT_DTYPE_F32, kc + t * stride + h * vec, tmp, hd);
            for (int d = 0; d < hd; d++) tmp[d] = (float)(util_rng_uniform(&rng) * 2 - 1);
            num_kv_store(DRIFT_DTYPE_F32, vc + t * stride + h * vec, tmp, hd);
        }
    float scale = 1.0f / sqrtf((float)hd);
    double keys = 0;
    for (int pos = 0; pos < n; pos += every) keys += pos + 1;
    keys *= nh;
    printf("attention of a prefill: %d positions (every %d-th row timed), %d query heads / %d KV heads of %d, "
           "group %d; CPU ns per (key, query head), best of %d\n",
           n, every, nh, nkv, hd, G, reps);
    printf("%-52s %10s %10s %8s %13s %s\n", "profile", "per head", "grouped", "ratio", "min-max", "bits");
    int bad = 0;
    char *list = strdup(profiles);
    for (char *save = NULL, *spec = strtok_r(list, ";", &save); spec; spec = strtok_r(NULL, ";", &save)) {
        drift_numeric_profile p;
        drift_error err;
        if (drift_profile_parse(spec, &p, &err)) {
            fprintf(stderr, "bench_attn_bench: profile '%s': %s\n", spec, err.msg);
            return 2;
        }
        double best[2] = {1e30, 1e30}, ratio[64];
        int same = 1;
        for (int r = 0; r < reps; r++) {
            double took[2];
            for (int way = 0; way < 2; way++) { /* 0: head by head, 1: grouped */
                float *out = way ? o2 : o1;
                double t0 = now();
                for (int pos = 0; pos < n; pos += every)
                    for (int kvh = 0; kvh < nkv; kvh++) {
                        const uint8_t *k = kc + kvh * vec, *v = vc + kvh * vec;
                        float *ob = out + (size_t)kvh * G * hd;
                        const float *qb = q + (size_t)kvh * G * hd;
                        if (way) {
                            num_attention_group(&p, ob, qb, G, k, v, stride, pos + 1, hd, scale, scr);
                        } else {
                            for (int g = 0; g < G; g++)
                                num_attention(&p, ob + g * hd, qb + g * hd, k, v, stride, pos + 1, hd, scale, scr);
                        }
                    }
                took[way] = now() - t0;
                if (took[way] < best[way]) best[way] = took[way];
                if (way && memcmp(o1, o2, (size_t)nh * hd * sizeof *o1)) same = 0;
            }
            ratio[r] = took[1] / took[0];
        }
        qsort(ratio, (size_t)reps, sizeof *ratio, cmp_double);
        printf("%-52s %10.2f %10.2f %8.3f %8.3f-%.3f %s\n", spec, best[0] / keys * 1e9, best[1] / keys * 1e9,
               ratio[reps / 2], ratio[0], ratio[reps - 1], same ? "same" : "DIFFER");
        bad |= !same;
    }
    printf("process CPU %.2f s\n", cpu_now());
    free(list), free(kc), free(vc), free(q), free(o1), free(o2), free(tmp), free(scr);
    return bad;
}
