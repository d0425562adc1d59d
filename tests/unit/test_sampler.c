/* test_sampler.c - samp_pick orders the candidates by a radix sort on
 * their probabilities' bits and must pick, draw for draw, the token the
 * definition picks: every candidate sorted by qsort (probability
 * descending, ties by id), then top-k, the top-p cut, the total and the
 * walk, in sorted order (ref_pick below, the sampler as it was written
 * before). Logits of many spreads, sizes up to the models' 2,021 tokens,
 * temperatures from near greedy to flat, top-k and top-p on and off, ties,
 * -inf, NaN and +inf entries; the two must give the same id and leave the
 * generator in the same state. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/sampler.h"
#include "util/util.h"

typedef struct rcand {
    double p;
    int32_t id;
} rcand;

static int ref_cmp(const void *a, const void *b) {
    const rcand *x = a, *y = b;
    if (x->p != y->p) return x->p > y->p ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

static int32_t ref_argmax(const float *x, int n) {
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* the definition: the whole vocabulary sorted */
static int32_t ref_pick(const float *logits, int n, const drift_gen_params *p, util_rng *rng) {
    if (p->temperature <= 0) return ref_argmax(logits, n);
    rcand *c = malloc((size_t)n * sizeof *c);
    assert_non_null(c);
    double mx = logits[ref_argmax(logits, n)], s = 0;
    for (int i = 0; i < n; i++) {
        c[i].id = i;
        c[i].p = exp(((double)logits[i] - mx) / p->temperature);
        s += c[i].p;
    }
    for (int i = 0; i < n; i++) c[i].p /= s;
    qsort(c, (size_t)n, sizeof *c, ref_cmp);
    int keep = n;
    if (p->top_k > 0 && p->top_k < keep) keep = p->top_k;
    if (p->top_p > 0 && p->top_p < 1) {
        double cum = 0;
        for (int i = 0; i < keep; i++) {
            cum += c[i].p;
            if (cum >= p->top_p) {
                keep = i + 1;
                break;
            }
        }
    }
    double tot = 0;
    for (int i = 0; i < keep; i++) tot += c[i].p;
    double u = util_rng_uniform(rng) * tot, acc = 0;
    int32_t id = c[keep - 1].id;
    for (int i = 0; i < keep; i++) {
        acc += c[i].p;
        if (u < acc) {
            id = c[i].id;
            break;
        }
    }
    free(c);
    return id;
}

static util_rng RNG;

static double gauss(void) {
    double u1 = util_rng_uniform(&RNG) + 1e-12, u2 = util_rng_uniform(&RNG);
    return sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
}

/* n logits of one of several shapes */
static void fill(float *lg, int n, int shape) {
    for (int i = 0; i < n; i++) {
        double g = gauss();
        switch (shape) {
        case 0: lg[i] = (float)(g * 3); break;                      /* a model's spread */
        case 1: lg[i] = (float)(g * 30); break;                     /* peaked: few above 2^-54 */
        case 2: lg[i] = (float)(g * 0.01); break;                   /* nearly flat */
        case 3: lg[i] = (float)floor(g * 2); break;                 /* many ties */
        case 4: lg[i] = i % 7 ? (float)(g * 3) : -INFINITY; break;  /* masked tokens */
        case 5: lg[i] = (float)(g * 3) + (i == n / 2 ? 40.0f : 0); break; /* one dominant token */
        default: lg[i] = 0.0f; break;                               /* all equal */
        }
    }
}

static void test_same_as_full_sort(void **state) {
    (void)state;
    static const int N[] = {1, 2, 3, 17, 2021};
    static const double TEMP[] = {0.01, 0.3, 0.7, 1.0, 2.0, 100.0};
    static const int TOPK[] = {0, 1, 5, 40, 3000};
    static const double TOPP[] = {0.0, 0.5, 0.9, 0.999999, 1.0};
    float *lg = malloc(2021 * sizeof *lg);
    long cases = 0, differ = 0;
    for (size_t ni = 0; ni < sizeof N / sizeof *N; ni++)
        for (int shape = 0; shape < 7; shape++) {
            fill(lg, N[ni], shape);
            for (size_t ti = 0; ti < sizeof TEMP / sizeof *TEMP; ti++)
                for (size_t ki = 0; ki < sizeof TOPK / sizeof *TOPK; ki++)
                    for (size_t pi = 0; pi < sizeof TOPP / sizeof *TOPP; pi++) {
                        drift_gen_params p;
                        drift_gen_params_default(&p);
                        p.temperature = TEMP[ti];
                        p.top_k = TOPK[ki];
                        p.top_p = TOPP[pi];
                        util_rng a, b;
                        util_rng_seed(&a, (uint64_t)cases);
                        util_rng_seed(&b, (uint64_t)cases);
                        for (int draw = 0; draw < 4; draw++) {
                            int32_t x = samp_pick(lg, N[ni], &p, &a), y = ref_pick(lg, N[ni], &p, &b);
                            cases++;
                            if ((x != y || memcmp(&a, &b, sizeof a)) && differ++ < 10)
                                printf("differ: n=%d shape=%d T=%g top_k=%d top_p=%g: %d, want %d\n", N[ni], shape,
                                       TEMP[ti], TOPK[ki], TOPP[pi], x, y);
                        }
                    }
        }
    printf("%ld picks, %ld differ\n", cases, differ);
    free(lg);
    assert_int_equal(differ, 0);
}

/* NaN and +inf logits (qsort as before) and all -inf */
static void test_special_logits(void **state) {
    (void)state;
    float lg[64];
    drift_gen_params p;
    drift_gen_params_default(&p);
    p.temperature = 0.7;
    for (int special = 0; special < 3; special++) {
        fill(lg, 64, 0);
        if (special == 0) lg[5] = NAN;
        if (special == 1) lg[9] = INFINITY;
        if (special == 2)
            for (int i = 0; i < 64; i++) lg[i] = -INFINITY;
        util_rng a, b;
        util_rng_seed(&a, 7);
        util_rng_seed(&b, 7);
        for (int draw = 0; draw < 20; draw++) {
            int32_t x = samp_pick(lg, 64, &p, &a), y = ref_pick(lg, 64, &p, &b);
            assert_int_equal(x, y);
        }
        assert_memory_equal(&a, &b, sizeof a);
    }
}

int main(void) {
    util_rng_seed(&RNG, 20261206);
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_same_as_full_sort), cmocka_unit_test(test_special_logits)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
