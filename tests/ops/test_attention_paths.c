/* test_attention_paths.c - num_fast_attention's two CPU paths give the same
 * bits: the AVX2 path (8 positions' scores at a time, expf vectorised, the
 * V sums in registers; kernels_cpu.c) against the SSE path with libm's expf
 * (the test hook num_fast_attention_sse_only), over every KV format, both
 * softmax algorithms (two-pass, online blocks of several sizes), the
 * rounding keys scores=dtype and probs=dtype, head
 * dimensions 8..128, lengths that leave every remainder of 8, and scores
 * spread wide enough that exp meets its special cases (|x| >= 88). On a
 * CPU where the AVX2 path is not taken the comparison still runs (both
 * calls then take the SSE path) and the test says so. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_internal.h"
#include "model/numerics.h"
#include "util/util.h"

#include "ops/ops_common.h"

static void test_paths_agree(void **state) {
    (void)state;
    static const drift_dtype KV[] = {DRIFT_DTYPE_F32, DRIFT_DTYPE_F16, DRIFT_DTYPE_BF16, DRIFT_DTYPE_FP8_E4M3,
                                     DRIFT_DTYPE_FP8_E5M2};
    static const char *ALG[] = {"attn=two-pass", "attn=online:7", "attn=online:64", "attn=online:1",
                                /* the rounding keys: scores / weights rounded to the dtype, in both paths */
                                "attn=online:64&dtype=bf16&scores=dtype&probs=dtype", "attn=two-pass&dtype=bf16&probs=dtype",
                                "attn=online:7&dtype=f16&scores=dtype"};
    static const int HD[] = {8, 32, 64, 128};
    static const int NP[] = {1, 2, 3, 7, 8, 9, 15, 16, 17, 64, 333};
    static const float SCALE[] = {0.125f, 1.0f, 3.0f, 8.0f, 40.0f}; /* 40: differences far below -88 */
    enum { TMAX = 333, DMAX = 128 };
    printf("AVX2 attention path: %s\n", num_fast_attention_avx2_active() ? "taken" : "not available here");
    float *q = rand_vec(DMAX, 1.0f), *kf = rand_vec((int64_t)TMAX * DMAX, 1.0f), *vf = rand_vec((int64_t)TMAX * DMAX, 1.0f);
    size_t stride = num_kv_bytes(DRIFT_DTYPE_F32, DMAX) + 64; /* room between positions, as heads interleave */
    uint8_t *kc = malloc(TMAX * stride), *vc = malloc(TMAX * stride);
    float *scratch = malloc((TMAX + 2 * DMAX) * sizeof *scratch);
    float a[DMAX], b[DMAX];
    long cases = 0, differ = 0;
    for (size_t ki = 0; ki < sizeof KV / sizeof KV[0]; ki++)
        for (size_t hi = 0; hi < sizeof HD / sizeof HD[0]; hi++) {
            int D = HD[hi];
            for (int t = 0; t < TMAX; t++) {
                num_kv_store(KV[ki], kc + t * stride, kf + (size_t)t * DMAX, D);
                num_kv_store(KV[ki], vc + t * stride, vf + (size_t)t * DMAX, D);
            }
            for (size_t ai = 0; ai < sizeof ALG / sizeof ALG[0]; ai++)
                for (size_t ni = 0; ni < sizeof NP / sizeof NP[0]; ni++)
                    for (size_t si = 0; si < sizeof SCALE / sizeof SCALE[0]; si++) {
                        char spec[128];
                        snprintf(spec, sizeof spec, "kv=%s&%s", drift_dtype_name(KV[ki]), ALG[ai]);
                        drift_numeric_profile p = prof(spec);
                        num_fast_attention_sse_only = 0;
                        num_fast_attention(&p, a, q, kc, vc, stride, NP[ni], D, SCALE[si], scratch);
                        num_fast_attention_sse_only = 1;
                        num_fast_attention(&p, b, q, kc, vc, stride, NP[ni], D, SCALE[si], scratch);
                        num_fast_attention_sse_only = 0;
                        cases++;
                        if (!bits_equal(a, b, D)) {
                            if (differ++ < 10)
                                printf("differ: %s head_dim=%d n_pos=%d scale=%g\n", spec, D, NP[ni], SCALE[si]);
                        }
                    }
        }
    printf("%ld cases, %ld differ\n", cases, differ);
    free(q), free(kf), free(vf), free(kc), free(vc), free(scratch);
    assert_int_equal(differ, 0);
}

/* num_attention_group: G query heads that share one KV head in one pass
 * give, head by head, the bits of num_attention on each head alone. The
 * K/V vectors interleave with other heads' (the cache's layout: a stride
 * of n_kv_heads vectors); G crosses the pass width (8) and lengths cross
 * the V tile (64) and the online blocks; the profiles cover the KV
 * formats, both softmax algorithms, the rounding keys, a hardware level's
 * dot product, libm's exp (the AVX2 path) and exp=fast, isa=ref; each also
 * with the SSE path forced (num_fast_attention_sse_only). */
static void test_group_agrees(void **state) {
    (void)state;
    static const char *SPEC[] = {"kv=f32&attn=two-pass", "kv=f32&attn=online:64", "kv=f32&attn=online:7",
                                 "kv=bf16&attn=online:128&dtype=bf16&probs=dtype",
                                 "kv=f32&attn=online:128&dtype=bf16&probs=dtype",
                                 "kv=f16&attn=two-pass&dtype=f16&scores=dtype&probs=dtype", "kv=fp8-e4m3&attn=online:64",
                                 "kv=f32&attn=online:64&isa=avx2&lanes=16", "kv=f32&attn=two-pass&exp=fast",
                                 "kv=f32&attn=two-pass&isa=ref&accum=f64"};
    static const int G[] = {1, 2, 3, 4, 5, 8, 9, 12};
    static const int HD[] = {8, 32, 40, 64, 128};
    static const int NP[] = {1, 7, 8, 9, 63, 64, 65, 130, 333};
    enum { TMAX = 333, DMAX = 128, GMAX = 12, NKV = 3 };
    float *kf = rand_vec((int64_t)TMAX * DMAX, 1.0f), *vf = rand_vec((int64_t)TMAX * DMAX, 1.0f);
    float *q = rand_vec((int64_t)GMAX * DMAX, 1.0f);
    float *a = malloc(GMAX * DMAX * sizeof *a), *b = malloc(GMAX * DMAX * sizeof *b);
    size_t vec = num_kv_bytes(DRIFT_DTYPE_F32, DMAX) + 16, stride = NKV * vec; /* this head's vector, then two others' */
    uint8_t *kc = calloc(TMAX, stride), *vc = calloc(TMAX, stride);
    float *scr = malloc(num_attention_scratch(GMAX, TMAX, DMAX) * sizeof *scr);
    long cases = 0, differ = 0;
    for (size_t si = 0; si < sizeof SPEC / sizeof *SPEC; si++) {
        drift_numeric_profile p = prof(SPEC[si]);
        for (size_t hi = 0; hi < sizeof HD / sizeof *HD; hi++) {
            int D = HD[hi];
            for (int t = 0; t < TMAX; t++) {
                num_kv_store(p.kv, kc + t * stride + vec, kf + (size_t)t * DMAX, D);
                num_kv_store(p.kv, vc + t * stride + vec, vf + (size_t)t * DMAX, D);
            }
            for (size_t gi = 0; gi < sizeof G / sizeof *G; gi++)
                for (size_t ni = 0; ni < sizeof NP / sizeof *NP; ni++)
                    for (int sse = 0; sse < 2; sse++) {
                        float scale = ni % 2 ? 0.125f : 6.0f;
                        num_fast_attention_sse_only = sse;
                        for (int g = 0; g < G[gi]; g++)
                            num_attention(&p, a + g * D, q + g * D, kc + vec, vc + vec, stride, NP[ni], D, scale, scr);
                        memset(b, 0xff, GMAX * DMAX * sizeof *b);
                        num_attention_group(&p, b, q, G[gi], kc + vec, vc + vec, stride, NP[ni], D, scale, scr);
                        num_fast_attention_sse_only = 0;
                        cases++;
                        if (!bits_equal(a, b, (int64_t)G[gi] * D) && differ++ < 10)
                            printf("differ: %s head_dim=%d G=%d n_pos=%d sse=%d\n", SPEC[si], D, G[gi], NP[ni], sse);
                    }
        }
    }
    printf("%ld grouped cases, %ld differ\n", cases, differ);
    free(kf), free(vf), free(q), free(a), free(b), free(kc), free(vc), free(scr);
    assert_true(cases > 0);
    assert_int_equal(differ, 0);
}

static int setup(void **state) {
    (void)state;
    (void)check_nmse;
    util_rng_seed(&RNG, 20261202);
    return reset_failed(state);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test_setup(test_paths_agree, setup),
                                       cmocka_unit_test_setup(test_group_agrees, setup)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
