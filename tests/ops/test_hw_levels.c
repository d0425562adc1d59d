/* test_hw_levels.c - the lab's levels at the kernel level:
 *  - hardware dot products (lanes / fma / tree / dot=bf16 / mma / accbits /
 *    promote): the AVX2 kernels give the scalar definition's bits
 *    (hw_ref.c) for every level, length and split, and the matmul gives them
 *    per output whatever the batch and the thread count;
 *  - lanes=8, fma, halving is the isa=avx2 SIMD matmul bit for bit, and
 *    lanes=16 the AVX-512 one where the CPU has it (the definitions are the
 *    kernels the ISA names run);
 *  - hand-worked cases: VDPBF16PS's odd-then-even order, DAZ and FTZ; the
 *    mma accumulator's truncation and promotion;
 *  - each level against float64: its error is that of its accumulator
 *    (tc-fp8 without promotion errs more than with it);
 *  - int8 activations (dynamic per token) and the rounding keys of the
 *    element-wise kernels (norm, swiglu, rope, scores, probs) against
 *    scalar transcriptions of their definitions and against float64. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "model/numerics.h"
#include "ops/ops_common.h"

static const char *HW_SPECS[] = {
    "isa=avx2&lanes=4",
    "isa=avx2&lanes=4&fma=0&tree=linear",
    "isa=avx2&lanes=8",
    "isa=avx2&lanes=8&fma=0",
    "isa=avx2&lanes=16",
    "isa=avx2&lanes=16&tree=linear",
    "isa=avx2&lanes=32",
    "isa=avx2&lanes=64&fma=0",
    "isa=avx2&lanes=8&dot=bf16",
    "isa=avx2&lanes=16&dot=bf16",
    "isa=avx2&lanes=32&dot=bf16&tree=linear",
    "isa=avx2&mma=16",
    "isa=avx2&mma=32&accbits=14&promote=128",
    "isa=avx2&mma=32&accbits=14",
    "isa=avx2&mma=8&accbits=10&promote=64",
};
#define N_HW (sizeof HW_SPECS / sizeof HW_SPECS[0])

static int setup(void **state) {
    (void)state;
    util_rng_seed(&RNG, 36);
    return 0;
}

/* fast == definition, bit for bit, over lengths with every kind of tail */
static void test_hw_dot_bits(void **state) {
    (void)state;
    const int64_t lens[] = {1, 3, 7, 8, 15, 16, 17, 31, 33, 64, 100, 127, 128, 129, 255, 256, 257, 511, 700, 1024, 1500};
    int bad = 0, n = 0;
    for (size_t si = 0; si < N_HW; si++) {
        drift_numeric_profile p = prof(HW_SPECS[si]);
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
            for (int S = 1; S <= 3; S++) {
                int64_t K = lens[li];
                float *x = rand_vec(K, 1.0f), *w = rand_vec(K, 0.05f);
                /* some exact zeros, tiny and large values: the edges of DAZ/FTZ and of the lanes */
                for (int64_t k = 0; k < K; k += 13) x[k] = 0.0f;
                for (int64_t k = 5; k < K; k += 29) x[k] *= 1e-38f;
                for (int64_t k = 7; k < K; k += 31) w[k] *= 1e4f;
                float a = num_hw_dot(&p, x, w, K, S), b = num_hw_dot_ref(&p, x, w, K, S);
                n++;
                if (memcmp(&a, &b, sizeof a)) {
                    if (bad++ < 10) printf("  %s K=%lld S=%d: fast %a, definition %a\n", HW_SPECS[si], (long long)K, S, a, b);
                }
                free(x);
                free(w);
            }
    }
    printf("  hw dot: %d cases, %d differ from the definition\n", n, bad);
    assert_int_equal(bad, 0);
}

/* the matmul: each output is num_hw_dot_ref of its row and weight row
 * (act-rounded x, dequantized w), at B = 1, 5, 32 and 1 or 2 threads; the
 * kernels take eight weight rows at a time (a short last tile repeats a
 * row) and the steps of 4, 8, 16 or 32 lanes, so the shapes include row
 * counts that are not multiples of 8 (1, 7, 9, 23, 50 over panels of 24)
 * and lengths with tails after the last full step (37, 200, 131) */
static void test_hw_matmul(void **state) {
    (void)state;
    const int64_t shapes[][2] = {{50, 200}, {1, 37}, {7, 131}, {9, 64}, {23, 37}, {33, 200}};
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++)
    for (size_t si = 0; si < N_HW; si++)
        for (int fmt = 0; fmt < 2; fmt++) {
            const int64_t N = shapes[sh][0], K = shapes[sh][1];
            char spec[160];
            snprintf(spec, sizeof spec, "%s&acts=%s&reduce=blocked:2", HW_SPECS[si], fmt ? "bf16" : "f32");
            drift_numeric_profile p = prof(spec);
            float *wf = rand_vec(N * K, 0.1f);
            num_qmat W;
            drift_error err;
            assert_int_equal(num_qmat_quantize(&W, fmt ? DRIFT_DTYPE_BF16 : DRIFT_DTYPE_F32, wf, N, K, 32, DRIFT_SCALE_PER_CHANNEL, &err), DRIFT_OK);
            float *x = rand_vec(32 * K, 1.0f), *y = malloc(32 * N * sizeof *y), *wr = malloc(K * sizeof *wr),
                  *xr = malloc(K * sizeof *xr);
            const int64_t Bs[] = {1, 5, 32};
            for (size_t bi = 0; bi < 3; bi++)
                for (int th = 1; th <= 2; th++) {
                    p.threads = th;
                    int64_t B = Bs[bi];
                    assert_int_equal(num_matmul(&p, y, x, &W, B, &err), DRIFT_OK);
                    for (int64_t b = 0; b < B; b++) {
                        memcpy(xr, x + b * K, K * sizeof *xr);
                        num_round_acts(p.acts, xr, K);
                        for (int64_t j = 0; j < N; j++) {
                            num_qmat_dequantize_row(&W, j, wr);
                            float want = num_hw_dot_ref(&p, xr, wr, K, 2);
                            if (memcmp(&want, &y[b * N + j], sizeof want))
                                fail_msg("%s B=%lld threads=%d out (%lld,%lld): %a vs definition %a", spec, (long long)B, th,
                                         (long long)b, (long long)j, y[b * N + j], want);
                        }
                    }
                }
            num_qmat_free(&W);
            free(wf);
            free(x);
            free(y);
            free(wr);
            free(xr);
        }
}

/* lanes=8 fma halving = the AVX2 kernels; lanes=16 = AVX-512's. Shapes:
 * a prefill (B = 7: packed tiles and a leftover row) and a decode (B = 1:
 * the single-row kernel, twelve outputs at a time, weights read in place
 * for bf16 / f16); K with a partial last step (333) and past one k-block
 * (600); N with a short last panel (30, 50) */
static void test_levels_are_the_isa_kernels(void **state) {
    (void)state;
    const int64_t shapes[][3] = {{333, 30, 7}, {333, 30, 1}, {600, 50, 1}, {256, 48, 1}, {600, 50, 5}};
    const drift_dtype fmts[] = {DRIFT_DTYPE_F32, DRIFT_DTYPE_BF16, DRIFT_DTYPE_F16};
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++)
        for (size_t fi = 0; fi < 3; fi++) {
            const int64_t K = shapes[sh][0], N = shapes[sh][1], B = shapes[sh][2];
            float *wf = rand_vec(N * K, 0.1f), *x = rand_vec(B * K, 1.0f), *y1 = malloc(B * N * sizeof(float)),
                  *y2 = malloc(B * N * sizeof(float));
            num_qmat W;
            drift_error err;
            assert_int_equal(num_qmat_quantize(&W, fmts[fi], wf, N, K, 32, DRIFT_SCALE_PER_CHANNEL, &err), DRIFT_OK);
            struct {
                const char *isa, *level;
            } pairs[] = {{"isa=avx2", "isa=avx2&lanes=8"}, {"isa=avx512", "isa=avx2&lanes=16"}};
            for (int i = 0; i < 2; i++) {
                if (i == 1 && num_isa_resolve(DRIFT_ISA_AUTO) != DRIFT_ISA_AVX512) {
                    if (sh == 0 && fi == 0) printf("  lanes=16 vs isa=avx512: this CPU has no AVX-512 (skipped)\n");
                    continue;
                }
                if (i == 0 && num_isa_resolve(DRIFT_ISA_AVX2) != DRIFT_ISA_AVX2) continue;
                for (int S = 1; S <= 4; S += 3)
                for (int via = 0; via <= 1; via++) { /* the level's own emulation, then the isa dispatch */
                    num_fast_hw_via_isa = via;
                    char a[64], b[64];
                    snprintf(a, sizeof a, "%s&reduce=blocked:%d", pairs[i].isa, S);
                    snprintf(b, sizeof b, "%s&reduce=blocked:%d", pairs[i].level, S);
                    drift_numeric_profile pa = prof(a), pb = prof(b);
                    assert_int_equal(num_matmul(&pa, y1, x, &W, B, &err), DRIFT_OK);
                    assert_int_equal(num_matmul(&pb, y2, x, &W, B, &err), DRIFT_OK);
                    if (!bits_equal(y1, y2, B * N))
                        fail_msg("%s and %s differ (K=%lld N=%lld B=%lld weights %d)", a, b, (long long)K, (long long)N,
                                 (long long)B, (int)fmts[fi]);
                    if (sh == 0 && fi == 0) printf("  %-28s = %s bit for bit (%s)\n", b, a, via ? "dispatched to the isa" : "emulated");
                    num_fast_hw_via_isa = 1;
                }
            }
            num_qmat_free(&W);
            free(wf);
            free(x);
            free(y1);
            free(y2);
        }
}

/* VDPBF16PS by hand: lane 0 takes pairs (0,1) and (16,17) with 8 lanes */
static void test_bf16_dot_semantics(void **state) {
    (void)state;
    drift_numeric_profile p = prof("isa=avx2&lanes=8&dot=bf16");
    float x[32] = {0}, w[32] = {0};
    x[0] = 1.0f, w[0] = 1.0f;         /* even of the first pair: lane 0 = 1 */
    x[17] = 4096.0f, w[17] = 4096.0f; /* odd of the second pair: 1 + 2^24 = 2^24 (tie to even) */
    x[16] = 1.0f, w[16] = 1.0f;       /* then even: 2^24 + 1 = 2^24; even-first would give 2^24 + 2 */
    float y = num_hw_dot(&p, x, w, 32, 1);
    assert_true(y == 16777216.0f);
    assert_true(num_hw_dot_ref(&p, x, w, 32, 1) == 16777216.0f);
    /* DAZ: a subnormal input is zero (a plain f32 product would give 1e-9) */
    float xs[16] = {1e-39f}, ws[16] = {1e30f};
    assert_true(num_hw_dot(&p, xs, ws, 16, 1) == 0.0f);
    /* FTZ: a subnormal product-sum is flushed */
    float xf[16] = {1e-20f}, wf[16] = {1e-20f};
    assert_true(num_hw_dot(&p, xf, wf, 16, 1) == 0.0f);
    /* the operands are rounded to bf16: 1 + 2^-9 becomes 1 */
    float xr[16] = {1.0f + 0x1p-9f}, wr[16] = {1.0f};
    assert_true(num_hw_dot(&p, xr, wr, 16, 1) == 1.0f);
}

/* mma: truncation toward zero to accbits, and promotion */
static void test_mma_semantics(void **state) {
    (void)state;
    /* 1 + 2^-20 in a 14-bit accumulator: cut to 1 */
    drift_numeric_profile p = prof("isa=avx2&mma=4&accbits=14");
    float x[8] = {1.0f, 0x1p-20f, 0, 0, 0, 0, 0, 0}, w[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    assert_true(num_hw_dot(&p, x, w, 8, 1) == 1.0f);
    /* toward zero for negatives too */
    x[0] = -1.0f, x[1] = -0x1p-20f;
    assert_true(num_hw_dot(&p, x, w, 8, 1) == -1.0f);
    /* f32 accumulator (23 bits) truncates: 1 + 2^-24 + 2^-25 is 1 (RNE would give 1 + 2^-23) */
    drift_numeric_profile q = prof("isa=avx2&mma=4");
    float y3[4] = {1.0f, 0x1p-24f, 0x1p-25f, 0}, o[4] = {1, 1, 1, 1};
    assert_true(num_hw_dot(&q, y3, o, 4, 1) == 1.0f);
    /* promotion: 65 chunks of 4 x 2^-17 onto 1. Alone, 1 + 2^-15 cuts to 1
     * in 14 bits: all lost. Promoted after every chunk, the first chunk
     * (1 + 3 x 2^-17) still cuts to 1, the 64 others are kept: 1 + 2^-9 */
    float big[260], ones[260];
    for (int i = 0; i < 260; i++) big[i] = 0x1p-17f, ones[i] = 1.0f;
    big[0] = 1.0f;
    drift_numeric_profile np = prof("isa=avx2&mma=4&accbits=14"), pp = prof("isa=avx2&mma=4&accbits=14&promote=4");
    float lost = num_hw_dot(&np, big, ones, 260, 1), kept = num_hw_dot(&pp, big, ones, 260, 1);
    assert_true(lost == 1.0f);
    assert_true(kept == 1.0f + 0x1p-9f);
    assert_true(num_hw_dot_ref(&np, big, ones, 260, 1) == lost);
    assert_true(num_hw_dot_ref(&pp, big, ones, 260, 1) == kept);
}

/* each level against float64, relative to sum |x w|: within its
 * accumulator's bound; tc-fp8 without promotion worse than with it */
static void test_levels_vs_f64(void **state) {
    (void)state;
    const int64_t K = 4096;
    const int T = 40;
    double worst[N_HW] = {0}, mean[N_HW] = {0};
    for (int t = 0; t < T; t++) {
        float *x = rand_vec(K, 1.0f), *w = rand_vec(K, 1.0f);
        for (int64_t k = 0; k < K; k++) x[k] = fabsf(x[k]) + 0.5f; /* a sum that grows: accumulator width shows */
        double ex = 0, mag = 0;
        for (int64_t k = 0; k < K; k++) {
            ex += (double)x[k] * w[k];
            mag += fabs((double)x[k] * w[k]);
        }
        for (size_t si = 0; si < N_HW; si++) {
            drift_numeric_profile p = prof(HW_SPECS[si]);
            double e = fabs(num_hw_dot(&p, x, w, K, 1) - ex) / mag;
            if (p.dot_bf16) { /* the operands' own rounding: against the dot of bf16 values */
                double eb = 0;
                for (int64_t k = 0; k < K; k++) eb += (double)num_round1(DRIFT_DTYPE_BF16, x[k]) * num_round1(DRIFT_DTYPE_BF16, w[k]);
                e = fabs(num_hw_dot(&p, x, w, K, 1) - eb) / mag;
            }
            mean[si] += e / T;
            if (e > worst[si]) worst[si] = e;
        }
        free(x);
        free(w);
    }
    for (size_t si = 0; si < N_HW; si++) {
        drift_numeric_profile p = prof(HW_SPECS[si]);
        int bits = p.mma ? p.acc_bits : 23;
        /* a deterministic bound: every add errs at most 2^-bits of the
         * running |sum| <= mag (truncation: twice RNE's half ulp) */
        double bound = (double)K * ldexp(1.0, -bits);
        printf("  %-42s vs f64: mean %.2e worst %.2e (bound %.1e)\n", HW_SPECS[si], mean[si], worst[si], bound);
        assert_true(worst[si] <= bound);
        assert_true(worst[si] > 0); /* each level rounds: none is exact */
    }
    /* without promotion the 14-bit accumulator errs more than with it */
    assert_true(mean[13] > 4 * mean[12]);
}

/* int8 activations: per row, s = amax/127, x = rint(x/s)*s */
static void test_int8_acts(void **state) {
    (void)state;
    const int64_t n = 300;
    float *x = rand_vec(n, 3.0f), *y = malloc(n * sizeof *y);
    memcpy(y, x, n * sizeof *y);
    num_round_acts(DRIFT_DTYPE_INT8, y, n);
    float amax = 0;
    for (int64_t i = 0; i < n; i++) amax = fmaxf(amax, fabsf(x[i]));
    float s = amax / 127.0f;
    for (int64_t i = 0; i < n; i++) {
        float q = y[i] / s;
        assert_true(fabsf(q - rintf(q)) < 1e-3f);    /* on the grid */
        assert_true(fabsf(y[i] - x[i]) <= 0.5f * s * (1 + 1e-5f) + 1e-6f); /* nearest point */
    }
    float max_abs = 0;
    for (int64_t i = 0; i < n; i++) max_abs = fmaxf(max_abs, fabsf(y[i]));
    assert_true(fabsf(max_abs - amax) <= 1e-5f * amax);
    free(x);
    free(y);
}

/* the element-wise rounding keys against a scalar transcription */
static void test_rounding_keys(void **state) {
    (void)state;
    const int64_t n = 256;
    drift_numeric_profile base = prof("weights=bf16&acts=bf16&kv=bf16&dtype=bf16&store=dtype&isa=avx2");
    drift_numeric_profile nr = prof("weights=bf16&acts=bf16&kv=bf16&dtype=bf16&store=dtype&isa=avx2&norm=round&swiglu=round");
    float *x = rand_vec(n, 1.0f), *w = rand_vec(n, 1.0f), *o1 = malloc(n * 4), *o2 = malloc(n * 4), *up = rand_vec(n, 1.0f);
    num_rmsnorm(&base, o1, x, w, n, 1e-5f);
    num_rmsnorm(&nr, o2, x, w, n, 1e-5f);
    double ss = 0;
    for (int64_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
    int differ = 0;
    for (int64_t i = 0; i < n; i++) {
        /* norm=round: (bf16(x*r)) * w with the same r as the f32 path (o1 = x*r*w) */
        double exact = x[i] / sqrt(ss / n + 1e-5) * w[i];
        assert_true(fabs(o1[i] - exact) <= 1e-5 * fabs(exact) + 1e-6);
        assert_true(fabs(o2[i] - exact) <= 0x1p-8 * fabs(exact) * 1.01 + 1e-6); /* one bf16 rounding */
        differ += o1[i] != o2[i];
    }
    assert_true(differ > n / 4);
    num_swiglu(&base, o1, x, up, n);
    num_swiglu(&nr, o2, x, up, n);
    for (int64_t i = 0; i < n; i++) {
        float silu = x[i] / (1.0f + expf(-x[i]));
        float want = num_round1(DRIFT_DTYPE_BF16, silu) * up[i];
        assert_true(memcmp(&o2[i], &want, 4) == 0);
    }
    /* rope=dtype: every product and sum on the bf16 grid; close to f32 rope */
    num_rope_params rp = {.head_dim = 64, .n_rot = 64, .neox = false, .theta_base = 10000.0f, .scaling_factor = 1.0f};
    drift_numeric_profile rl = prof("weights=bf16&acts=bf16&kv=bf16&dtype=bf16&store=dtype&isa=avx2&rope=dtype");
    float q1[128], q2[128];
    for (int i = 0; i < 128; i++) q1[i] = q2[i] = num_round1(DRIFT_DTYPE_BF16, randn());
    num_rope(&base, q1, 2, 37, &rp);
    num_rope(&rl, q2, 2, 37, &rp);
    for (int i = 0; i < 128; i++) {
        assert_true(num_round1(DRIFT_DTYPE_BF16, q2[i]) == q2[i]);
        assert_true(fabsf(q1[i] - q2[i]) <= 0x1p-6f * (fabsf(q1[i]) + 1.0f));
    }
    free(x);
    free(w);
    free(o1);
    free(o2);
    free(up);
}

/* rope=dtype-table (vLLM's rotary kernel today: a dtype cos/sin cache, the
 * rotation in f32, one rounding at the store), against float64:
 *  - the table the kernel uses (read back by rotating unit vectors) is on the
 *    bf16 grid and within half a bf16 ulp (2^-8 relative) of the float64 cos/sin (plus the
 *    f32 angle's own error);
 *  - with bf16 inputs every product is exact, so the f32 result must equal,
 *    bit for bit, the float64 rotation by that table rounded once to f32;
 *  - after the store's rounding, its error against the exact rotation
 *    (float64 angle, cos, sin) lies strictly between rope=f32's and
 *    rope=dtype's over many values: a third value, not a copy of either. */
static void test_rope_table(void **state) {
    (void)state;
    const char *B = "weights=bf16&acts=bf16&kv=bf16&dtype=bf16&store=dtype&isa=avx2";
    char spec[256];
    drift_numeric_profile pr[3]; /* f32, dtype, dtype-table */
    const char *V[3] = {"f32", "dtype", "dtype-table"};
    for (int k = 0; k < 3; k++) {
        snprintf(spec, sizeof spec, "%s&rope=%s", B, V[k]);
        pr[k] = prof(spec);
        assert_int_equal(pr[k].rope_lowp, k == 0 ? DRIFT_ROPE_F32 : k == 1 ? DRIFT_ROPE_DTYPE : DRIFT_ROPE_TABLE);
    }
    enum { H = 16, D = 64 };
    const int64_t POS[] = {1, 37, 511, 3000};
    const num_rope_params RP[2] = {
        {.head_dim = D, .n_rot = D, .neox = false, .theta_base = 10000.0f, .scaling_factor = 1.0f},
        {.head_dim = D, .n_rot = D, .neox = true, .theta_base = 500000.0f, .scaling_factor = 1.0f},
    };
    double se[3] = {0, 0, 0};
    long n_vals = 0;
    for (int r = 0; r < 2; r++)
        for (size_t pi = 0; pi < sizeof POS / sizeof *POS; pi++) {
            const num_rope_params *rp = &RP[r];
            int64_t pos = POS[pi];
            /* the table: rotate (1, 0) in each pair */
            float unit[D] = {0};
            for (int i = 0; i < D / 2; i++) unit[rp->neox ? i : 2 * i] = 1.0f;
            num_rope(&pr[2], unit, 1, pos, rp);
            float cs[D / 2], sn[D / 2];
            for (int i = 0; i < D / 2; i++) {
                int i0 = rp->neox ? i : 2 * i, i1 = rp->neox ? i + D / 2 : 2 * i + 1;
                cs[i] = unit[i0];
                sn[i] = unit[i1];
                assert_true(num_round1(DRIFT_DTYPE_BF16, cs[i]) == cs[i] && num_round1(DRIFT_DTYPE_BF16, sn[i]) == sn[i]);
                double a = (double)pos * num_rope_freq(rp, i);
                /* half a bf16 ulp (2^-8 relative: 8 significant bits), plus the f32 angle's error */
                double tol = 0x1p-22 * fabs(a);
                assert_true(fabs(cs[i] - cos(a)) <= 0x1p-8 * fabs(cos(a)) + tol);
                assert_true(fabs(sn[i] - sin(a)) <= 0x1p-8 * fabs(sin(a)) + tol);
            }
            /* random bf16 q: the f32 rotation by the table, one rounding */
            float x[H * D], y[3][H * D];
            for (int j = 0; j < H * D; j++) x[j] = num_round1(DRIFT_DTYPE_BF16, randn());
            for (int k = 0; k < 3; k++) {
                memcpy(y[k], x, sizeof x);
                num_rope(&pr[k], y[k], H, pos, rp);
            }
            for (int h = 0; h < H; h++)
                for (int i = 0; i < D / 2; i++) {
                    int i0 = h * D + (rp->neox ? i : 2 * i), i1 = h * D + (rp->neox ? i + D / 2 : 2 * i + 1);
                    float w0 = (float)((double)x[i0] * cs[i] - (double)x[i1] * sn[i]);
                    float w1 = (float)((double)x[i0] * sn[i] + (double)x[i1] * cs[i]);
                    assert_true(memcmp(&y[2][i0], &w0, 4) == 0 && memcmp(&y[2][i1], &w1, 4) == 0);
                    /* the error of each value, after the store, against float64 */
                    double a = (double)pos * num_rope_freq(rp, i), c = cos(a), s = sin(a);
                    double e0 = (double)x[i0] * c - (double)x[i1] * s, e1 = (double)x[i0] * s + (double)x[i1] * c;
                    for (int k = 0; k < 3; k++) {
                        double g0 = num_round1(DRIFT_DTYPE_BF16, y[k][i0]), g1 = num_round1(DRIFT_DTYPE_BF16, y[k][i1]);
                        se[k] += (g0 - e0) * (g0 - e0) + (g1 - e1) * (g1 - e1);
                    }
                    n_vals += 2;
                }
        }
    print_message("rope vs float64, rms error after the bf16 store over %ld values: f32 %.3g, dtype-table %.3g, "
                  "dtype %.3g\n", n_vals, sqrt(se[0] / n_vals), sqrt(se[2] / n_vals), sqrt(se[1] / n_vals));
    assert_true(se[0] < se[2] && se[2] < se[1]);
}

/* precision=w4a16-g32 (GPTQ/AWQ-style int4, one scale per 32 weights, as
 * Marlin serves g32 checkpoints): the preset's matmul against float64 over
 * weights dequantized here from their definition (s = amax of the group / 7,
 * q = round(w / s) clamped to [-8, 7], w' = q s), with bf16 activations; and
 * g32's error against the f32 weights is below the g128 level's (w4a16). */
static void test_w4a16_g32(void **state) {
    (void)state;
    drift_numeric_profile g32 = prof("precision=w4a16-g32&framework=vllm&hardware=avx2");
    drift_numeric_profile g128 = prof("precision=w4a16&framework=vllm&hardware=avx2");
    assert_int_equal(g32.weights, DRIFT_DTYPE_INT4);
    assert_int_equal(g32.group_size, 32);
    assert_int_equal(g128.group_size, 128);
    assert_int_equal(g32.acts, DRIFT_DTYPE_BF16);
    const int64_t N = 96, K = 384, B = 3;
    drift_error err;
    float *w = rand_vec(N * K, 0.05f), *x = rand_vec(B * K, 1.0f);
    for (int64_t i = 0; i < B * K; i++) x[i] = num_round1(DRIFT_DTYPE_BF16, x[i]);
    for (int64_t i = 0; i < N * K; i += 97) w[i] *= 6.0f; /* outliers: what makes the group size matter */
    num_qmat W32, Wq[2];
    assert_int_equal(num_qmat_quantize(&W32, DRIFT_DTYPE_F32, w, N, K, 0, 0, &err), DRIFT_OK);
    assert_int_equal(num_qmat_convert(&Wq[0], &W32, &g32, &err), DRIFT_OK);
    assert_int_equal(num_qmat_convert(&Wq[1], &W32, &g128, &err), DRIFT_OK);
    assert_int_equal(Wq[0].group, 32);
    float y[2][3 * 96];
    assert_int_equal(num_matmul(&g32, y[0], x, &Wq[0], B, &err), DRIFT_OK);
    assert_int_equal(num_matmul(&g128, y[1], x, &Wq[1], B, &err), DRIFT_OK);
    double se[2] = {0, 0}, ss = 0;
    for (int q = 0; q < 2; q++) {
        int G = q == 0 ? 32 : 128;
        for (int64_t n = 0; n < N; n++) {
            double wd[384];
            for (int64_t g0 = 0; g0 < K; g0 += G) {
                double am = 0;
                for (int64_t k = g0; k < g0 + G; k++) am = fmax(am, fabs((double)w[n * K + k]));
                double sc = am / 7.0;
                for (int64_t k = g0; k < g0 + G; k++) {
                    double qq = sc > 0 ? round((double)w[n * K + k] / sc) : 0;
                    wd[k] = fmin(fmax(qq, -8), 7) * sc;
                }
            }
            for (int64_t b = 0; b < B; b++) {
                double ref = 0, mag = 0, exact = 0;
                for (int64_t k = 0; k < K; k++) {
                    ref += (double)x[b * K + k] * wd[k];
                    mag += fabs((double)x[b * K + k] * wd[k]);
                    exact += (double)x[b * K + k] * w[n * K + k];
                }
                double got = y[q][b * N + n];
                /* f32 accumulation over K terms (and the f32 scale's own rounding) */
                if (fabs(got - ref) > 2e-6 * mag + 1e-9)
                    fail_msg("w4a16 g%d row %lld batch %lld: %.9g vs float64 %.9g (|x||w| %.3g)", G, (long long)n,
                             (long long)b, got, ref, mag);
                se[q] += (got - exact) * (got - exact);
                if (q == 0) ss += exact * exact;
            }
        }
    }
    print_message("w4a16 vs f32 weights, nmse: g32 %.3g, g128 %.3g\n", se[0] / ss, se[1] / ss);
    assert_true(se[0] > 0 && se[0] < se[1]);
    num_qmat_free(&W32);
    num_qmat_free(&Wq[0]);
    num_qmat_free(&Wq[1]);
    free(w);
    free(x);
}

/* scores=dtype / probs=dtype: the attention against a scalar transcription */
static void test_attention_rounding(void **state) {
    (void)state;
    const int hd = 64, npos = 150;
    drift_numeric_profile p = prof("weights=bf16&acts=bf16&kv=f32&dtype=bf16&store=dtype&isa=avx2&scores=dtype&probs=dtype&attn=two-pass");
    float *q = rand_vec(hd, 1.0f), *k = rand_vec((int64_t)npos * hd, 1.0f), *v = rand_vec((int64_t)npos * hd, 1.0f);
    float *out = malloc(hd * 4), *scr = malloc((size_t)(npos + 2 * hd + 16) * 4);
    float scale = 0.125f;
    num_attention(&p, out, q, k, v, (size_t)hd * 4, npos, hd, scale, scr);
    /* the definition in double: s_t = bf16(q.k_t * scale), e_t = exp(s_t - max),
     * out = sum bf16(e_t) v_t / sum e_t */
    double s[150], m = -INFINITY, l = 0, acc[64] = {0};
    for (int t = 0; t < npos; t++) {
        double d = 0;
        for (int i = 0; i < hd; i++) d += (double)q[i] * k[t * hd + i];
        s[t] = num_round1(DRIFT_DTYPE_BF16, (float)(d * scale));
        if (s[t] > m) m = s[t];
    }
    for (int t = 0; t < npos; t++) {
        double e = exp(s[t] - m);
        l += e;
        double eb = num_round1(DRIFT_DTYPE_BF16, (float)e);
        for (int i = 0; i < hd; i++) acc[i] += eb * v[t * hd + i];
    }
    float want[64];
    for (int i = 0; i < hd; i++) want[i] = (float)(acc[i] / l);
    check_nmse("attention", "scores=dtype&probs=dtype vs f64 definition", out, want, hd, 1e-8);
    assert_int_equal(n_failed, 0);
    free(q);
    free(k);
    free(v);
    free(out);
    free(scr);
}


/* the accumulator cut by bits = by nextafterf, on random and edge values */
static void test_trunc(void **state) {
    (void)state;
    const double edge[] = {0.0, -0.0, 1.0, -1.0, 0x1.fffffffffffffp-1, 3.4028235677973366e38, 3.5e38, -3.5e38, 1e-45, 1e-39,
                           -1e-40, INFINITY, -INFINITY, 0x1.000001p0, 0x1.0000018p0, -0x1.0000008p0};
    int bad = 0;
    for (int bits = 1; bits <= 23; bits++) {
        for (size_t i = 0; i < sizeof edge / sizeof *edge; i++) {
            float a = num_hw_trunc(edge[i], bits), b = num_hw_trunc_ref(edge[i], bits);
            bad += memcmp(&a, &b, 4) != 0;
        }
        for (int i = 0; i < 20000; i++) {
            double v = (double)randn() * ldexp(1.0, (int)(util_rng_uniform(&RNG) * 60) - 30);
            float a = num_hw_trunc(v, bits), b = num_hw_trunc_ref(v, bits);
            bad += memcmp(&a, &b, 4) != 0;
            assert_true(fabs((double)a) <= fabs(v)); /* toward zero */
        }
    }
    assert_int_equal(bad, 0);
}


/* a hardware level's attention: scores by its dot product (the
 * definition), the rest as the plain path: a scalar transcription */
static void test_hw_attention(void **state) {
    (void)state;
    const int hd = 64, npos = 77;
    const char *specs[] = {"isa=avx2&lanes=16&attn=two-pass", "isa=avx2&mma=32&accbits=14&promote=128&attn=two-pass",
                           "isa=avx2&lanes=8&fma=0&attn=two-pass", "isa=avx2&lanes=16&dot=bf16&attn=two-pass"};
    float *q = rand_vec(hd, 1.0f), *k = rand_vec((int64_t)npos * hd, 1.0f), *v = rand_vec((int64_t)npos * hd, 1.0f);
    float out[64], want[64], s[77], acc[64], *scr = malloc((size_t)(npos + 2 * hd + 16) * 4);
    for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
        drift_numeric_profile p = prof(specs[i]);
        num_attention(&p, out, q, k, v, (size_t)hd * 4, npos, hd, 0.125f, scr);
        float m = -INFINITY, l = 0.0f;
        for (int t = 0; t < npos; t++) {
            s[t] = num_hw_dot_ref(&p, q, k + t * hd, hd, 1) * 0.125f;
            if (s[t] > m) m = s[t];
        }
        for (int d = 0; d < hd; d++) acc[d] = 0.0f;
        for (int t = 0; t < npos; t++) {
            float e = expf(s[t] - m);
            l += e;
            for (int d = 0; d < hd; d++) {
                float pr = e * v[t * hd + d];
                acc[d] = acc[d] + pr;
            }
        }
        float inv = 1.0f / l;
        for (int d = 0; d < hd; d++) want[d] = acc[d] * inv;
        if (!bits_equal(out, want, hd)) fail_msg("%s: attention differs from its definition", specs[i]);
    }
    free(q);
    free(k);
    free(v);
    free(scr);
}


/* num_round_acts (AVX2, 8 at a time, and its scalar tail) / num_round1 to
 * bf16 = num_f32_to_bf16 then back, on random bit patterns and on the
 * special values (zeros, infinities, quiet and signalling NaNs with payloads,
 * the largest finite values that round to infinity, subnormals, ties to
 * even both ways) */
static void test_bf16_rounding_paths(void **state) {
    (void)state;
    enum { N = 100000 };
    static float x[N], y[N];
    for (int i = 0; i < N; i++) {
        uint32_t u = (uint32_t)(util_rng_uniform(&RNG) * 4294967296.0);
        if (i % 7 == 0) u = (u & 0xffff0000u) | 0x8000u; /* a tie */
        memcpy(&x[i], &u, 4);
    }
    /* the special values at the head, each at every position of an 8-wide step */
    const uint32_t edge[] = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u, 0x7f800001u,
                             0xff80ffffu, 0x7fbfffffu, 0x7f7fffffu, 0xff7fffffu, 0x7f7f8000u, 0x7f7f7fffu, 0x00000001u,
                             0x807fffffu, 0x007f8000u, 0x00008000u, 0x80018000u, 0x3f808000u, 0x3f818000u, 0x3f80ffffu,
                             0xbf7f8000u, 0x00800000u, 0x0080ffffu};
    const int ne = (int)(sizeof edge / sizeof edge[0]);
    for (int i = 0; i < 8 * ne; i++) memcpy(&x[i], &edge[(i / 8 + i % 8) % ne], 4);
    memcpy(y, x, sizeof x);
    num_round_acts(DRIFT_DTYPE_BF16, y, N);
    for (int i = 0; i < N; i++) {
        float want = num_bf16_to_f32(num_f32_to_bf16(x[i])), one = num_round1(DRIFT_DTYPE_BF16, x[i]);
        if (memcmp(&want, &y[i], 4) || memcmp(&want, &one, 4)) fail_msg("bf16 rounding of %a differs", x[i]);
    }
    /* lengths with a scalar tail after the 8-wide steps, from an odd start */
    for (int n = 0; n <= 19; n++) {
        float z[20];
        memcpy(z, x + 3, (size_t)n * 4);
        num_round_acts(DRIFT_DTYPE_BF16, z, n);
        for (int i = 0; i < n; i++) {
            float want = num_bf16_to_f32(num_f32_to_bf16(x[3 + i]));
            if (memcmp(&want, &z[i], 4)) fail_msg("bf16 rounding of %a (n = %d, at %d) differs", x[3 + i], n, i);
        }
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_hw_dot_bits, setup),
        cmocka_unit_test_setup(test_hw_matmul, setup),
        cmocka_unit_test_setup(test_levels_are_the_isa_kernels, setup),
        cmocka_unit_test(test_bf16_dot_semantics),
        cmocka_unit_test(test_mma_semantics),
        cmocka_unit_test_setup(test_trunc, setup),
        cmocka_unit_test_setup(test_hw_attention, setup),
        cmocka_unit_test_setup(test_levels_vs_f64, setup),
        cmocka_unit_test_setup(test_int8_acts, setup),
        cmocka_unit_test_setup(test_bf16_rounding_paths, setup),
        cmocka_unit_test_setup(test_rounding_keys, setup),
        cmocka_unit_test_setup(test_rope_table, setup),
        cmocka_unit_test_setup(test_w4a16_g32, setup),
        cmocka_unit_test_setup_teardown(test_attention_rounding, setup, reset_failed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
