/* test_ops.c - every kernel x every format x fast vs the float64 reference,
 * in the style of ggml's test-backend-ops.
 *
 * Each case runs the fast kernel (kernels_cpu.c, under some profile) and the
 * reference (kernels_ref.c) on the same inputs, checks the fast output for
 * NaN/Inf first, then the normalized mean squared error
 *     nmse = sum (fast - ref)^2 / sum ref^2
 * against a tolerance per op, format and accumulator. A second family
 * measures each format's own error (quantized weights vs f32 weights, both
 * through the reference) against a per-format tolerance.
 * Then the invariances, bit for bit: batch (a row alone == the row inside
 * any batch), threads (1/2/3), SIMD path == its documented lane emulation,
 * the ref profile run twice; and the study mode (batch_invariant=0) must
 * change some bits. Every case prints one line; failures name the case. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/numerics.h"
#include "util/util.h"

#include "ops/ops_common.h"

/* ------------------------------------------------------------------------- */
enum { MB_ = 5, MN = 37, MK = 224, MK_TAIL = 200 };

static const drift_dtype ALL_W[] = {
    DRIFT_DTYPE_F32,  DRIFT_DTYPE_F16,   DRIFT_DTYPE_BF16,  DRIFT_DTYPE_FP8_E4M3,
    DRIFT_DTYPE_FP8_E5M2, DRIFT_DTYPE_INT8, DRIFT_DTYPE_INT4, DRIFT_DTYPE_MXFP4,
    DRIFT_DTYPE_NVFP4, DRIFT_DTYPE_Q8_0,  DRIFT_DTYPE_Q4_0};
#define N_W (sizeof ALL_W / sizeof ALL_W[0])

static int block_of(drift_dtype t) {
    const num_traits *tr = num_traits_of(t);
    return t == DRIFT_DTYPE_INT4 ? 32 : tr->block_size;
}

/* fast (profile spec) vs reference on the same quantized weights */
static void test_matmul_vs_ref(void **state) {
    (void)state;
    static const struct { const char *spec; double tol; } PROFS[] = {
        {"", 1e-12},                         /* SIMD, f32 accumulation, sequential */
        {"reduce=pairwise", 1e-12},
        {"reduce=blocked:3", 1e-12},
        {"accum=f64", 1e-13},
        {"accum=bf16", 2e-4},
        {"isa=scalar", 1e-12},
        {"isa=avx2", 1e-12},
        {"accum=bf16&reduce=pairwise", 2e-4},
    };
    static const char *ACTS[] = {"f32", "bf16", "fp8-e4m3"};
    drift_error err;
    for (size_t wi = 0; wi < N_W; wi++) {
        drift_dtype t = ALL_W[wi];
        int64_t K = block_of(t) == 1 ? MK_TAIL : MK; /* tail of a SIMD vector when possible */
        float *w = rand_vec(MN * K, 0.05f), *x = rand_vec(MB_ * K, 1.0f);
        float *yf = malloc(MB_ * MN * sizeof(float)), *yr = malloc(MB_ * MN * sizeof(float));
        num_qmat W;
        assert_int_equal(num_qmat_quantize(&W, t, w, MN, K, 32, DRIFT_SCALE_PER_CHANNEL, &err),
                         DRIFT_OK);
        for (size_t ai = 0; ai < 3; ai++)
            for (size_t pi = 0; pi < sizeof PROFS / sizeof PROFS[0]; pi++) {
                char spec[160], what[160];
                snprintf(spec, sizeof spec, "acts=%s%s%s", ACTS[ai], *PROFS[pi].spec ? "&" : "",
                         PROFS[pi].spec);
                drift_numeric_profile p = prof(spec);
                drift_numeric_profile r = prof("profile=ref");
                r.acts = p.acts;
                assert_int_equal(num_fast_matmul(&p, yf, x, &W, MB_, &err), DRIFT_OK);
                assert_int_equal(num_ref_matmul(&r, yr, x, &W, MB_, &err), DRIFT_OK);
                snprintf(what, sizeof what, "w=%s %s", drift_dtype_name(t), spec);
                check_nmse("matmul", what, yf, yr, MB_ * MN, PROFS[pi].tol);
            }
        num_qmat_free(&W);
        free(w), free(x), free(yf), free(yr);
    }
    if (n_failed) fail_msg("%d of %d cases failed", n_failed, n_cases);
}

/* each format's own error: quantized W vs f32 W, both through the reference */
static void test_matmul_format_error(void **state) {
    (void)state;
    static const struct { drift_dtype t; double tol; } FT[] = {
        {DRIFT_DTYPE_F16, 1e-6},     {DRIFT_DTYPE_BF16, 3e-5},  {DRIFT_DTYPE_FP8_E4M3, 2e-3},
        {DRIFT_DTYPE_FP8_E5M2, 8e-3}, {DRIFT_DTYPE_INT8, 1e-4}, {DRIFT_DTYPE_INT4, 2e-2},
        {DRIFT_DTYPE_MXFP4, 6e-2},   {DRIFT_DTYPE_NVFP4, 3e-2}, {DRIFT_DTYPE_Q8_0, 1e-4},
        {DRIFT_DTYPE_Q4_0, 2e-2},
    };
    drift_error err;
    int64_t K = 256, N = 64, B = 4;
    float *w = rand_vec(N * K, 0.05f), *x = rand_vec(B * K, 1.0f);
    float *y32 = malloc((size_t)(B * N) * sizeof(float)), *yq = malloc((size_t)(B * N) * sizeof(float));
    drift_numeric_profile r = prof("profile=ref");
    num_qmat W32;
    assert_int_equal(num_qmat_quantize(&W32, DRIFT_DTYPE_F32, w, N, K, 0, 0, &err), DRIFT_OK);
    assert_int_equal(num_ref_matmul(&r, y32, x, &W32, B, &err), DRIFT_OK);
    double prev_e4m3 = 0;
    for (size_t i = 0; i < sizeof FT / sizeof FT[0]; i++) {
        num_qmat W;
        assert_int_equal(num_qmat_quantize(&W, FT[i].t, w, N, K, 32, DRIFT_SCALE_PER_CHANNEL, &err),
                         DRIFT_OK);
        assert_int_equal(num_ref_matmul(&r, yq, x, &W, B, &err), DRIFT_OK);
        char what[64];
        snprintf(what, sizeof what, "w=%s vs f32 weights", drift_dtype_name(FT[i].t));
        check_nmse("format", what, yq, y32, B * N, FT[i].tol);
        /* a lossy format must actually change the result */
        assert_false(bits_equal(yq, y32, B * N));
        if (FT[i].t == DRIFT_DTYPE_FP8_E4M3) prev_e4m3 = 1;
        num_qmat_free(&W);
    }
    assert_true(prev_e4m3 == 1);
    /* convert: profile weights from an f32 matrix; native = zero copy */
    num_qmat V;
    drift_numeric_profile p = prof("weights=native");
    assert_int_equal(num_qmat_convert(&V, &W32, &p, &err), DRIFT_OK);
    assert_ptr_equal(V.data, W32.data);
    assert_null(V.owned);
    p = prof("profile=cpu-int4&group=128");
    assert_int_equal(num_qmat_convert(&V, &W32, &p, &err), DRIFT_OK);
    assert_int_equal(V.dtype, DRIFT_DTYPE_INT4);
    assert_int_equal(V.group, 128);
    num_qmat_free(&V);
    num_qmat_free(&W32);
    free(w), free(x), free(y32), free(yq);
    if (n_failed) fail_msg("%d of %d cases failed", n_failed, n_cases);
}

static void test_elementwise(void **state) {
    (void)state;
    enum { N = 1000 };
    float *x = rand_vec(N, 2.0f), *w = rand_vec(N, 1.0f), *u = rand_vec(N, 1.0f);
    float a[N], b[N];
    static const char *SPECS[] = {"exp=libm", "exp=fast"};
    for (int si = 0; si < 2; si++) {
        drift_numeric_profile p = prof(SPECS[si]), r = prof("profile=ref");
        char what[64];
        num_fast_rmsnorm(&p, a, x, w, N, 1e-5f);
        num_ref_rmsnorm(&r, b, x, w, N, 1e-5f);
        snprintf(what, sizeof what, "n=%d %s", N, SPECS[si]);
        check_nmse("rmsnorm", what, a, b, N, 1e-12);
        memcpy(a, x, sizeof a);
        memcpy(b, x, sizeof b);
        num_fast_softmax(&p, a, N);
        num_ref_softmax(&r, b, N);
        check_nmse("softmax", what, a, b, N, 1e-12);
        num_fast_swiglu(&p, a, x, u, N);
        num_ref_swiglu(&r, b, x, u, N);
        check_nmse("swiglu", what, a, b, N, 1e-12);
        num_silu(&p, a, x, N);
        num_silu(&r, b, x, N);
        check_nmse("silu", what, a, b, N, 1e-12);
        /* softmax of extreme logits stays finite and sums to 1 */
        float big[3] = {1000.0f, -1000.0f, 999.0f};
        num_fast_softmax(&p, big, 3);
        assert_true(isfinite(big[0]) && fabsf(big[0] + big[1] + big[2] - 1.0f) < 1e-6f);
    }
    /* embedding: dequantized row, rounded to the activation format */
    drift_error err;
    num_qmat E;
    assert_int_equal(num_qmat_quantize(&E, DRIFT_DTYPE_Q8_0, x, 10, 96, 0, 0, &err), DRIFT_OK);
    drift_numeric_profile pb = prof("acts=bf16");
    num_embedding(&pb, a, &E, 3);
    num_qmat_dequantize_row(&E, 3, b);
    for (int i = 0; i < 96; i++) assert_true(a[i] == num_bf16_to_f32(num_f32_to_bf16(b[i])));
    check_nmse("embedding", "q8_0 row vs f32 row", b, x + 3 * 96, 96, 1e-4);
    num_qmat_free(&E);
    free(x), free(w), free(u);
    if (n_failed) fail_msg("%d of %d cases failed", n_failed, n_cases);
}

static void test_rope(void **state) {
    (void)state;
    enum { H = 3, D = 64 };
    static const float ff[D / 2] = {[0] = 1.0f, [5] = 2.0f, [31] = 8.0f};
    float fac[D / 2];
    for (int i = 0; i < D / 2; i++) fac[i] = ff[i] ? ff[i] : 1.0f;
    num_rope_params variants[4] = {
        {.head_dim = D, .n_rot = D, .theta_base = 10000.0f, .scaling_factor = 1.0f},
        {.head_dim = D, .n_rot = D, .neox = true, .theta_base = 1000000.0f, .scaling_factor = 1.0f},
        {.head_dim = D, .n_rot = D, .theta_base = 500000.0f, .scaling_factor = 8.0f,
         .low_freq_factor = 1.0f, .high_freq_factor = 4.0f, .orig_ctx = 8192},
        {.head_dim = D, .n_rot = 32, .neox = true, .theta_base = 10000.0f, .scaling_factor = 1.0f,
         .freq_factors = fac},
    };
    static const char *NAMES[4] = {"normal", "neox", "llama3-scaled", "neox partial+factors"};
    static const int64_t POS[3] = {0, 7, 3000};
    drift_numeric_profile p = prof(""), r = prof("profile=ref");
    float *x = rand_vec(H * D, 1.0f);
    float a[H * D], b[H * D];
    for (int v = 0; v < 4; v++)
        for (int pi = 0; pi < 3; pi++) {
            memcpy(a, x, sizeof a);
            memcpy(b, x, sizeof b);
            num_fast_rope(&p, a, H, POS[pi], &variants[v]);
            num_ref_rope(&r, b, H, POS[pi], &variants[v]);
            char what[64];
            snprintf(what, sizeof what, "%s pos=%lld", NAMES[v], (long long)POS[pi]);
            /* float angles at large positions lose ~ulp(pos * freq) */
            check_nmse("rope", what, a, b, H * D, POS[pi] > 100 ? 1e-8 : 1e-12);
            if (POS[pi] == 0) assert_true(bits_equal(a, x, H * D));
        }
    /* known value: normal rope, pair 0 rotates by pos radians */
    float q[D] = {1.0f, 0.0f};
    num_ref_rope(&r, q, 1, 1, &variants[0]);
    assert_true(fabsf(q[0] - cosf(1.0f)) < 1e-7f && fabsf(q[1] - sinf(1.0f)) < 1e-7f);
    /* partial rotation leaves the tail untouched */
    memcpy(a, x, sizeof a);
    num_fast_rope(&p, a, H, 5, &variants[3]);
    for (int h = 0; h < H; h++) assert_true(bits_equal(a + h * D + 32, x + h * D + 32, 32));
    free(x);
    if (n_failed) fail_msg("%d of %d cases failed", n_failed, n_cases);
}

static void test_attention(void **state) {
    (void)state;
    enum { D = 64, T = 50 };
    static const drift_dtype KV[] = {DRIFT_DTYPE_F32, DRIFT_DTYPE_F16, DRIFT_DTYPE_BF16,
                                     DRIFT_DTYPE_FP8_E4M3, DRIFT_DTYPE_FP8_E5M2};
    static const char *ALG[] = {"attn=two-pass", "attn=online:7", "attn=online:64&exp=fast",
                                "attn=online:1"};
    float *q = rand_vec(D, 1.0f), *kf = rand_vec(T * D, 1.0f), *vf = rand_vec(T * D, 1.0f);
    size_t stride = num_kv_bytes(DRIFT_DTYPE_F32, D);
    uint8_t *kc = malloc(T * stride), *vc = malloc(T * stride);
    float scratch[T + 2 * D], a[D], b[D];
    for (size_t ki = 0; ki < sizeof KV / sizeof KV[0]; ki++) {
        drift_dtype kt = KV[ki];
        for (int t = 0; t < T; t++) {
            num_kv_store(kt, kc + t * stride, kf + t * D, D);
            num_kv_store(kt, vc + t * stride, vf + t * D, D);
        }
        for (int ai = 0; ai < 4; ai++)
            for (int np = 1; np <= T; np += T - 1) {
                char spec[64], what[96];
                snprintf(spec, sizeof spec, "kv=%s&%s", drift_dtype_name(kt), ALG[ai]);
                drift_numeric_profile p = prof(spec), r = prof("profile=ref");
                r.kv = kt;
                num_fast_attention(&p, a, q, kc, vc, stride, np, D, 0.125f, scratch);
                num_ref_attention(&r, b, q, kc, vc, stride, np, D, 0.125f, scratch);
                snprintf(what, sizeof what, "%s n_pos=%d", spec, np);
                check_nmse("attention", what, a, b, D, 1e-11);
            }
    }
    /* one position: the output is that position's V */
    drift_numeric_profile p = prof("");
    for (int t = 0; t < T; t++) num_kv_store(DRIFT_DTYPE_F32, kc + t * stride, kf + t * D, D);
    for (int t = 0; t < T; t++) num_kv_store(DRIFT_DTYPE_F32, vc + t * stride, vf + t * D, D);
    num_fast_attention(&p, a, q, kc, vc, stride, 1, D, 0.125f, scratch);
    assert_true(bits_equal(a, vf, D));
    free(q), free(kf), free(vf), free(kc), free(vc);
    if (n_failed) fail_msg("%d of %d cases failed", n_failed, n_cases);
}

/* SIMD dequantizers give the traits' values bit for bit */
static int same_or_both_nan(const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!(isnan(a[i]) && isnan(b[i])) && memcmp(a + i, b + i, sizeof(float))) return 0;
    return 1;
}

static void test_fast_dequantize(void **state) {
    (void)state;
    enum { R = 5, C = 288 };
    drift_error err;
    float *w = rand_vec(R * C, 0.3f), a[C], b[C];
    w[7] = 0.0f;
    w[8] = -0.0f;
    for (size_t wi = 0; wi < N_W; wi++)
        for (int mode = 0; mode < 2; mode++) {
            num_qmat W;
            assert_int_equal(num_qmat_quantize(&W, ALL_W[wi], w, R, C, 32, (drift_scale_mode)mode, &err),
                             DRIFT_OK);
            for (int r = 0; r < R; r++) {
                num_fast_dequantize_row(&W, r, a);
                num_qmat_dequantize_row(&W, r, b);
                if (!same_or_both_nan(a, b, C))
                    fail_msg("fast dequantize of %s (mode %d) row %d differs",
                             drift_dtype_name(ALL_W[wi]), mode, r);
            }
            num_qmat_free(&W);
        }
    /* every fp8 code, with a scale */
    uint8_t codes[256];
    for (int c = 0; c < 256; c++) codes[c] = (uint8_t)c;
    float big_a[256], big_b[256];
    for (int t = 0; t < 2; t++) {
        num_qmat W = {.dtype = t ? DRIFT_DTYPE_FP8_E5M2 : DRIFT_DTYPE_FP8_E4M3, .rows = 1,
                        .cols = 256, .data = codes, .row_bytes = 256, .group = 256,
                        .tensor_scale = 0.375f};
        num_fast_dequantize_row(&W, 0, big_a);
        num_qmat_dequantize_row(&W, 0, big_b);
        if (!same_or_both_nan(big_a, big_b, 256)) fail_msg("fp8 codes (%d) differ", t);
    }
    printf("  %-10s %-46s SIMD == traits, bit for bit  OK\n", "dequant", "all formats, all fp8 codes");
    free(w);
}

/* ------------------------------------------------------------------------- */
/* Invariance: row b of a batch == the row alone, whatever B and threads */
static void check_invariance(const char *spec, drift_dtype t, int64_t N, int64_t K) {
    enum { BB = 61 };
    drift_error err;
    drift_numeric_profile p = prof(spec);
    float *w = rand_vec(N * K, 0.05f), *x = rand_vec(BB * K, 1.0f);
    float *full = malloc((size_t)(BB * N) * sizeof(float)), *part = malloc((size_t)(BB * N) * sizeof(float));
    num_qmat W;
    assert_int_equal(num_qmat_quantize(&W, t, w, N, K, 32, p.weight_scale, &err), DRIFT_OK);
    p.threads = 2;
    assert_int_equal(num_fast_matmul(&p, full, x, &W, BB, &err), DRIFT_OK);
    /* one row at a time, threads 1 and 3 */
    for (int64_t b = 0; b < BB; b++) {
        p.threads = 1 + 2 * (int)(b % 2);
        assert_int_equal(num_fast_matmul(&p, part + b * N, x + b * K, &W, 1, &err), DRIFT_OK);
    }
    if (!bits_equal(full, part, BB * N)) fail_msg("batch invariance broken: %s w=%s", spec, drift_dtype_name(t));
    /* odd sub-batches at odd offsets */
    static const int64_t SUB[][2] = {{3, 13}, {0, 6}, {17, 7}, {50, 11}};
    for (size_t s = 0; s < 4; s++) {
        p.threads = (int)s + 1;
        assert_int_equal(num_fast_matmul(&p, part, x + SUB[s][0] * K, &W, SUB[s][1], &err), DRIFT_OK);
        if (!bits_equal(full + SUB[s][0] * N, part, SUB[s][1] * N))
            fail_msg("batch invariance broken: %s w=%s rows %lld+%lld", spec, drift_dtype_name(t),
                     (long long)SUB[s][0], (long long)SUB[s][1]);
    }
    printf("  %-10s %-46s bit-identical over B and threads  OK\n", "invariant", spec);
    num_qmat_free(&W);
    free(w), free(x), free(full), free(part);
}

static void test_batch_thread_invariance(void **state) {
    (void)state;
    check_invariance("profile=cpu-f32", DRIFT_DTYPE_F32, 53, 600);
    check_invariance("profile=cpu-f32&isa=avx2", DRIFT_DTYPE_F32, 53, 600);
    check_invariance("profile=cpu-bf16", DRIFT_DTYPE_BF16, 50, 544);
    check_invariance("profile=cpu-bf16&isa=avx2", DRIFT_DTYPE_BF16, 50, 262);
    check_invariance("profile=cpu-f16", DRIFT_DTYPE_F16, 49, 520);
    check_invariance("profile=cpu-f16&isa=avx2", DRIFT_DTYPE_F16, 25, 203);
    check_invariance("profile=cpu-int4", DRIFT_DTYPE_INT4, 30, 1056);
    check_invariance("weights=native", DRIFT_DTYPE_Q8_0, 50, 544);
    check_invariance("weights=native&reduce=blocked:5", DRIFT_DTYPE_Q4_0, 50, 544);
    check_invariance("weights=native&reduce=blocked:5&acts=bf16", DRIFT_DTYPE_Q8_0, 26, 320);
    check_invariance("weights=native&isa=avx2", DRIFT_DTYPE_Q4_0, 25, 320);
    check_invariance("profile=gpu-fp8", DRIFT_DTYPE_FP8_E4M3, 49, 520);
    check_invariance("profile=cpu-f32&accum=bf16&reduce=pairwise", DRIFT_DTYPE_Q4_0, 26, 320);
    check_invariance("profile=cpu-f32&isa=scalar&reduce=blocked:5", DRIFT_DTYPE_F32, 26, 333);
}

/* study mode: with batch_invariant=0 a row alone differs from the row in a batch */
static void test_batch_variant_mode(void **state) {
    (void)state;
    enum { B = 16, N = 64, K = 1024 };
    drift_error err;
    drift_numeric_profile p = prof("batch_invariant=0");
    float *w = rand_vec(N * K, 0.05f), *x = rand_vec(B * K, 1.0f);
    float *full = malloc(B * N * sizeof(float)), *one = malloc(B * N * sizeof(float));
    num_qmat W;
    assert_int_equal(num_qmat_quantize(&W, DRIFT_DTYPE_F32, w, N, K, 0, 0, &err), DRIFT_OK);
    assert_int_equal(num_fast_matmul(&p, full, x, &W, B, &err), DRIFT_OK);
    for (int b = 0; b < B; b++)
        assert_int_equal(num_fast_matmul(&p, one + b * N, x + b * K, &W, 1, &err), DRIFT_OK);
    int differ = 0;
    for (int i = 0; i < B * N; i++) differ += full[i] != one[i];
    printf("  %-10s %-46s %d of %d outputs change with B\n", "variant", "batch_invariant=0", differ,
           B * N);
    assert_true(differ > 0);
    check_nmse("variant", "B=1 vs B=16, batch_invariant=0", one, full, B * N, 1e-10);
    num_qmat_free(&W);
    free(w), free(x), free(full), free(one);
    if (n_failed) fail_msg("%d of %d cases failed", n_failed, n_cases);
}

/* the SIMD path computes exactly its documented lane order */
static void test_simd_equals_emulation(void **state) {
    (void)state;
    static const char *SPECS[] = {"isa=avx512", "isa=avx2", "isa=avx512&reduce=blocked:3",
                                  "isa=avx2&reduce=blocked:7&acts=bf16",
                                  "isa=avx512&acts=fp8-e4m3"};
    enum { B = 9, N = 30, K = 1100 };
    drift_error err;
    float *w = rand_vec(N * K, 0.05f), *x = rand_vec(B * K, 1.0f);
    float *ys = malloc(B * N * sizeof(float)), *yg = malloc(B * N * sizeof(float));
    num_qmat W;
    assert_int_equal(num_qmat_quantize(&W, DRIFT_DTYPE_F32, w, N, K, 0, 0, &err), DRIFT_OK);
    for (size_t i = 0; i < sizeof SPECS / sizeof SPECS[0]; i++) {
        drift_numeric_profile p = prof(SPECS[i]);
        if (num_isa_resolve(p.isa) != p.isa) {
            printf("  %-10s %-46s skipped: CPU lacks it\n", "simd", SPECS[i]);
            continue;
        }
        assert_int_equal(num_fast_matmul(&p, ys, x, &W, B, &err), DRIFT_OK);
        num_fast_generic_only = 1;
        assert_int_equal(num_fast_matmul(&p, yg, x, &W, B, &err), DRIFT_OK);
        num_fast_generic_only = 0;
        if (!bits_equal(ys, yg, B * N)) fail_msg("SIMD != lane emulation for %s", SPECS[i]);
        printf("  %-10s %-46s SIMD == lane emulation, bit for bit  OK\n", "simd", SPECS[i]);
    }
    /* different ISAs / orders differ in the last bits but agree closely */
    drift_numeric_profile p512 = prof("isa=avx512"), pp = prof("reduce=pairwise");
    assert_int_equal(num_fast_matmul(&p512, ys, x, &W, B, &err), DRIFT_OK);
    assert_int_equal(num_fast_matmul(&pp, yg, x, &W, B, &err), DRIFT_OK);
    assert_false(bits_equal(ys, yg, B * N));
    num_qmat_free(&W);
    free(w), free(x), free(ys), free(yg);
}

/* the 8-lane tiles at the batch sizes of decode steps and prefill (full
 * row tiles in pairs, on AVX-512 hosts computed in 512-bit registers), with
 * weights read in place (bf16, f16, f32) and packed (B >= 48), K with a
 * partial last step: the lane order the emulation documents, bit for bit */
static void test_simd_tiles_equal_emulation(void **state) {
    (void)state;
    static const char *SPECS[] = {"isa=avx2", "isa=avx2&acts=bf16", "isa=avx2&reduce=blocked:3"};
    static const drift_dtype FMT[] = {DRIFT_DTYPE_F32, DRIFT_DTYPE_BF16, DRIFT_DTYPE_F16};
    static const int BS[] = {8, 13, 32, 50};
    static const int KS[] = {1100, 1104, 256, 76};
    enum { N = 53, BMAX = 50, KMAX = 1104 };
    drift_error err;
    float *w = rand_vec(N * KMAX, 0.05f), *x = rand_vec(BMAX * KMAX, 1.0f);
    float *ys = malloc(BMAX * N * sizeof(float)), *yg = malloc(BMAX * N * sizeof(float));
    int checked = 0;
    for (size_t si = 0; si < sizeof SPECS / sizeof SPECS[0]; si++) {
        drift_numeric_profile p = prof(SPECS[si]);
        if (num_isa_resolve(p.isa) != p.isa) continue;
        for (size_t fi = 0; fi < sizeof FMT / sizeof FMT[0]; fi++)
            for (size_t ki = 0; ki < sizeof KS / sizeof KS[0]; ki++) {
                int K = KS[ki];
                num_qmat W;
                assert_int_equal(num_qmat_quantize(&W, FMT[fi], w, N, K, 0, 0, &err), DRIFT_OK);
                for (size_t bi = 0; bi < sizeof BS / sizeof BS[0]; bi++) {
                    int B = BS[bi];
                    assert_int_equal(num_fast_matmul(&p, ys, x, &W, B, &err), DRIFT_OK);
                    num_fast_generic_only = 1;
                    assert_int_equal(num_fast_matmul(&p, yg, x, &W, B, &err), DRIFT_OK);
                    num_fast_generic_only = 0;
                    if (!bits_equal(ys, yg, B * N))
                        fail_msg("SIMD != lane emulation: %s, weights %s, B %d, K %d", SPECS[si],
                                 num_traits_of(FMT[fi])->name, B, K);
                    checked++;
                }
                num_qmat_free(&W);
            }
    }
    printf("  %-10s %-46s %d cases, SIMD == lane emulation, bit for bit  OK\n", "tiles", "avx2: f32/bf16/f16, B 8-50",
           checked);
    free(w), free(x), free(ys), free(yg);
}

/* the `ref` profile: same input twice -> the same bits; profiles differ */
static void test_ref_determinism(void **state) {
    (void)state;
    enum { B = 3, N = 20, K = 96 };
    drift_error err;
    drift_numeric_profile r = prof("profile=ref"), g = prof("profile=gpu-fp8");
    float *w = rand_vec(N * K, 0.05f), *x = rand_vec(B * K, 1.0f);
    float y1[B * N], y2[B * N], y3[B * N];
    num_qmat W, Wg;
    assert_int_equal(num_qmat_quantize(&W, DRIFT_DTYPE_F32, w, N, K, 0, 0, &err), DRIFT_OK);
    assert_int_equal(num_matmul(&r, y1, x, &W, B, &err), DRIFT_OK);
    assert_int_equal(num_matmul(&r, y2, x, &W, B, &err), DRIFT_OK);
    assert_true(bits_equal(y1, y2, B * N));
    assert_int_equal(num_qmat_convert(&Wg, &W, &g, &err), DRIFT_OK);
    assert_int_equal(num_matmul(&g, y3, x, &Wg, B, &err), DRIFT_OK);
    assert_false(bits_equal(y1, y3, B * N));
    check_nmse("profiles", "gpu-fp8 vs ref (measurably different)", y3, y1, B * N, 5e-3);
    double se = 0;
    for (int i = 0; i < B * N; i++) se += (y3[i] - y1[i]) * (double)(y3[i] - y1[i]);
    assert_true(se > 0);
    num_qmat_free(&W);
    num_qmat_free(&Wg);
    free(w), free(x);
    if (n_failed) fail_msg("%d of %d cases failed", n_failed, n_cases);
}

int main(void) {
    util_rng_seed(&RNG, 20261130);
    printf("fast ISA on this CPU: %s\n", num_isa_name(num_isa_resolve(DRIFT_ISA_AUTO)));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_matmul_vs_ref, reset_failed),        cmocka_unit_test_setup(test_matmul_format_error, reset_failed),
        cmocka_unit_test_setup(test_elementwise, reset_failed),          cmocka_unit_test_setup(test_rope, reset_failed),
        cmocka_unit_test_setup(test_attention, reset_failed),            cmocka_unit_test_setup(test_batch_thread_invariance, reset_failed),
        cmocka_unit_test_setup(test_batch_variant_mode, reset_failed),   cmocka_unit_test_setup(test_simd_equals_emulation, reset_failed),
        cmocka_unit_test_setup(test_ref_determinism, reset_failed),      cmocka_unit_test_setup(test_fast_dequantize, reset_failed),
        cmocka_unit_test_setup(test_simd_tiles_equal_emulation, reset_failed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
