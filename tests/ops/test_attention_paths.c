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

static int setup(void **state) {
    (void)state;
    (void)check_nmse;
    util_rng_seed(&RNG, 20261202);
    return reset_failed(state);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test_setup(test_paths_agree, setup)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
