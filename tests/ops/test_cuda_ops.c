/* test_cuda_ops.c - the CUDA backend (src/model/cuda) against the CPU
 * reference: every op x every format, in the style of tests/ops/test_ops.c.
 *
 * Bit for bit: embedding (deq() of every format, then act() rounding), act()
 * rounding alone (bf16, f16, fp8 e4m3 / e5m2 with zero, NaN, inf and tiny
 * rows), KV vectors in every KV format (stored bytes and loaded values).
 * Close to num_ref_* (float64): matmul for every weight format x act format
 * x gemm (kernel, vendor) x accum, each output's error measured against its
 * sum_k |x_k w_k| (the scale of the rounding errors); rmsnorm, softmax,
 * rope, swiglu, attention (nmse, as test_ops).
 * Invariance, bit for bit, with gemm=kernel: a matmul row alone == the row
 * in a batch of 37 or in sub-batches (tensor-core and SIMT paths); and the
 * whole forward pass of small random models (dense llama, qwen2 biases +
 * NEOX RoPE, MoE, sliding window): a sequence's hidden states and logits are
 * the same prefilled at once, a few tokens at a time, one token a call
 * alone (the one-row paths), or batched with other sequences at other
 * positions (attention with a fixed split of
 * a few positions, so several splits are combined). The forward pass itself
 * is checked against a CPU forward built from the num_ref_* ops; MoE both
 * dense (every expert for every row) and through per-expert row lists
 * (DRIFT_CUDA_MOE=gather).
 *
 * Without a CUDA build, or without a GPU, it prints why and exits 77
 * (ctest: skipped). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/kernels_ref.h"
#include "model/numerics.h"
#include "model/sampler.h"
#include "util/util.h"
#ifdef DRIFT_HAVE_CUDA
#include "model/cuda/cuda_backend.h"
#endif

#ifndef DRIFT_HAVE_CUDA
int main(void) {
    printf("skipped: no CUDA backend built (nvcc not found at configure time, DRIFT_CUDA=OFF or "
           "DRIFT_SANITIZE=ON)\n");
    return 77;
}
#else

#define OPS_WHAT_WIDTH 52
#include "ops/ops_common.h"

/* a GPU profile: spec + gemm */
static drift_numeric_profile gprof(const char *spec, drift_gemm g) {
    drift_numeric_profile p = prof(spec);
    p.backend = DRIFT_BACKEND_CUDA;
    p.gemm = g;
    return p;
}

/* the reference kernels with p's formats */
static drift_numeric_profile refprof(const drift_numeric_profile *p) {
    drift_numeric_profile r = prof("profile=ref");
    r.acts = p->acts;
    r.kv = p->kv;
    return r;
}

static int same_or_both_nan(const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!(isnan(a[i]) && isnan(b[i])) && memcmp(a + i, b + i, sizeof(float))) return 0;
    return 1;
}

static const drift_dtype ALL_W[] = {DRIFT_DTYPE_F32,  DRIFT_DTYPE_F16,   DRIFT_DTYPE_BF16,  DRIFT_DTYPE_FP8_E4M3,
                                    DRIFT_DTYPE_FP8_E5M2, DRIFT_DTYPE_INT8, DRIFT_DTYPE_INT4, DRIFT_DTYPE_MXFP4,
                                    DRIFT_DTYPE_NVFP4, DRIFT_DTYPE_Q8_0,  DRIFT_DTYPE_Q4_0};
#define N_W (sizeof ALL_W / sizeof ALL_W[0])
static const drift_dtype ACTS[] = {DRIFT_DTYPE_F32, DRIFT_DTYPE_BF16, DRIFT_DTYPE_F16, DRIFT_DTYPE_FP8_E4M3,
                                   DRIFT_DTYPE_FP8_E5M2};
#define N_ACTS (sizeof ACTS / sizeof ACTS[0])
static const drift_dtype KVF[] = {DRIFT_DTYPE_F32, DRIFT_DTYPE_F16, DRIFT_DTYPE_BF16, DRIFT_DTYPE_FP8_E4M3,
                                  DRIFT_DTYPE_FP8_E5M2};
#define N_KVF (sizeof KVF / sizeof KVF[0])

/* int4 group for K columns (must be even and divide K) */
static int int4_group(int64_t K) { return K % 32 == 0 ? 32 : K % 40 == 0 ? 40 : 30; }

static int fits(drift_dtype t, int64_t K) {
    const num_traits *tr = num_traits_of(t);
    if (K % tr->block_size) return 0;
    return t != DRIFT_DTYPE_INT4 || K % int4_group(K) == 0;
}

static void quantize(num_qmat *W, drift_dtype t, const float *w, int64_t N, int64_t K, drift_scale_mode mode) {
    drift_error err;
    if (num_qmat_quantize(W, t, w, N, K, int4_group(K), mode, &err))
        fail_msg("quantize %s %lldx%lld: %s", drift_dtype_name(t), (long long)N, (long long)K, err.msg);
}

/* ------------------------------------------------------------ the device */
static void test_device(void **state) {
    (void)state;
    dcu_device_info di;
    drift_error err;
    assert_int_equal(dcu_device_get_info(&di, &err), DRIFT_OK);
    printf("  device: %s (%s), cc %d.%d, %d SMs, %.1f GiB, driver %d, runtime %d\n", di.name, di.short_name,
           di.cc_major, di.cc_minor, di.sm_count, (double)di.mem_bytes / (1 << 30), di.driver_version,
           di.runtime_version);
    assert_true(di.name[0] && di.short_name[0] && !strchr(di.short_name, ' '));
    assert_true(di.cc_major >= 7 && di.sm_count > 0 && di.mem_bytes > 0);
    assert_true(di.driver_version > 0 && di.runtime_version > 0);
    assert_true(dcu_device_count() >= 1);
    /* accum=bf16 is refused, with a message */
    drift_numeric_profile p = gprof("", DRIFT_GEMM_KERNEL);
    p.accum = DRIFT_ACCUM_BF16;
    float x[32] = {1}, y[2];
    float w[64];
    for (int i = 0; i < 64; i++) w[i] = (float)i / 64;
    num_qmat W;
    quantize(&W, DRIFT_DTYPE_F32, w, 2, 32, DRIFT_SCALE_PER_CHANNEL);
    assert_int_equal(dcu_op_matmul(&p, y, x, &W, 1, &err), DRIFT_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "bf16"));
    num_qmat_free(&W);
    /* the benchmarks measure something */
    double gbps = 0, tf = 0;
    assert_int_equal(dcu_bench_copy((size_t)64 << 20, 3, &gbps, &err), DRIFT_OK);
    assert_int_equal(dcu_bench_gemm(1024, 3, &tf, &err), DRIFT_OK);
    printf("  bench: copy %.0f GB/s (64 MiB), bf16 gemm %.1f TFLOP/s (n = 1024)\n", gbps, tf);
    assert_true(gbps > 0 && tf > 0);
}

/* --------------------------------------------------- bit-exact: the formats */
static void test_embedding(void **state) {
    (void)state;
    enum { R = 7 };
    static const int64_t COLS[] = {96, 90};
    drift_error err;
    int n = 0;
    for (size_t wi = 0; wi < N_W; wi++)
        for (size_t ci = 0; ci < 2; ci++)
            for (int mode = 0; mode < 2; mode++) {
                drift_dtype t = ALL_W[wi];
                int64_t C = COLS[ci];
                int fp8 = t == DRIFT_DTYPE_FP8_E4M3 || t == DRIFT_DTYPE_FP8_E5M2;
                if (!fits(t, C) || (mode && !fp8)) continue;
                float *w = rand_vec(R * C, 0.3f);
                float *row = w + 3 * C; /* special values in the row looked up */
                row[0] = 0.0f;
                row[1] = -0.0f;
                row[2] = 1e-6f;
                row[3] = -3e-5f;
                row[4] = 7.5f;
                num_qmat W;
                quantize(&W, t, w, R, C, (drift_scale_mode)mode);
                float *a = malloc((size_t)C * sizeof(float)), *b = malloc((size_t)C * sizeof(float));
                for (size_t ai = 0; ai < N_ACTS; ai++) {
                    drift_numeric_profile p = gprof("", DRIFT_GEMM_KERNEL);
                    p.acts = ACTS[ai];
                    for (int64_t r = 0; r < R; r += 3) {
                        assert_int_equal(dcu_op_embedding(&p, a, &W, r, &err), DRIFT_OK);
                        num_qmat_dequantize_row(&W, r, b);
                        num_round_acts(p.acts, b, C);
                        if (!same_or_both_nan(a, b, C))
                            fail_msg("embedding w=%s (mode %d) cols %lld acts=%s row %lld differs", drift_dtype_name(t),
                                     mode, (long long)C, drift_dtype_name(p.acts), (long long)r);
                        n++;
                    }
                }
                free(a), free(b), free(w);
                num_qmat_free(&W);
            }
    printf("  %-10s %-52s %d rows bit for bit  OK\n", "embedding", "every format x acts, 96 and 90 columns", n);
}

static void test_round_acts(void **state) {
    (void)state;
    enum { ROWS = 5, N = 1000 };
    drift_error err;
    float *x = rand_vec(ROWS * N, 1.0f);
    for (int i = 0; i < N; i++) x[N + i] *= (float)exp(5.0 * randn()); /* wide range */
    for (int i = 0; i < N; i++) x[2 * N + i] = 0.0f;                     /* zero row: scale 0 */
    x[3 * N + 3] = INFINITY;                                             /* amax inf */
    x[4 * N + 7] = NAN;
    x[4 * N + 8] = 1e-30f;
    x[4 * N + 9] = -1e-40f; /* f32 subnormal */
    x[4 * N + 10] = 70000.0f; /* f16 overflow */
    float *a = malloc(sizeof(float) * ROWS * N), *b = malloc(sizeof(float) * ROWS * N);
    for (size_t ai = 0; ai < N_ACTS; ai++) {
        memcpy(a, x, sizeof(float) * ROWS * N);
        memcpy(b, x, sizeof(float) * ROWS * N);
        assert_int_equal(dcu_op_round_acts(ACTS[ai], a, ROWS, N, &err), DRIFT_OK);
        for (int r = 0; r < ROWS; r++) num_round_acts(ACTS[ai], b + r * N, N);
        if (!same_or_both_nan(a, b, ROWS * N)) fail_msg("act rounding to %s differs", drift_dtype_name(ACTS[ai]));
        printf("  %-10s %-52s bit for bit  OK\n", "acts", drift_dtype_name(ACTS[ai]));
    }
    free(a), free(b), free(x);
}

static void test_kv_vectors(void **state) {
    (void)state;
    enum { NV = 5 };
    static const int NS[] = {64, 30};
    drift_error err;
    for (size_t ki = 0; ki < N_KVF; ki++)
        for (int ni = 0; ni < 2; ni++) {
            drift_dtype t = KVF[ki];
            int n = NS[ni];
            size_t vb = num_kv_bytes(t, n);
            float *src = rand_vec(NV * n, 1.0f);
            for (int i = 0; i < n; i++) src[2 * n + i] = 0.0f;   /* scale falls back to 1 */
            for (int i = 0; i < n; i++) src[3 * n + i] *= 1e4f; /* f16 overflow */
            uint8_t *cb = malloc(NV * vb), *gb = malloc(NV * vb);
            float *cl = malloc(sizeof(float) * NV * n), *gl = malloc(sizeof(float) * NV * n);
            for (int v = 0; v < NV; v++) num_kv_store(t, cb + v * vb, src + v * n, n);
            assert_int_equal(dcu_op_kv_store(t, gb, src, NV, n, &err), DRIFT_OK);
            if (memcmp(cb, gb, NV * vb)) fail_msg("KV store %s n=%d: bytes differ", drift_dtype_name(t), n);
            for (int v = 0; v < NV; v++) num_kv_load(t, cl + v * n, cb + v * vb, n);
            assert_int_equal(dcu_op_kv_load(t, gl, cb, NV, n, &err), DRIFT_OK);
            if (!same_or_both_nan(cl, gl, NV * n)) fail_msg("KV load %s n=%d: values differ", drift_dtype_name(t), n);
            printf("  %-10s %-52s store and load bit for bit  OK\n", "kv", drift_dtype_name(t));
            free(src), free(cb), free(gb), free(cl), free(gl);
        }
}

/* -------------------------------------------------------- matmul vs ref */
typedef enum { TP_SIMT, TP_TC, TP_SGEMM, TP_LT } tpath;

/* the path the backend takes (cuda_matmul.cu dcu_mm_path) */
static tpath path_of(const drift_numeric_profile *p, drift_dtype w, int64_t K) {
    int same16 = (w == DRIFT_DTYPE_BF16 && p->acts == DRIFT_DTYPE_BF16) ||
                 (w == DRIFT_DTYPE_F16 && p->acts == DRIFT_DTYPE_F16);
    if (p->gemm == DRIFT_GEMM_VENDOR) {
        if (w == DRIFT_DTYPE_F32) return TP_SGEMM;
        if (same16) return TP_TC;
        if (w == DRIFT_DTYPE_FP8_E4M3 && p->acts == DRIFT_DTYPE_FP8_E4M3 && K % 16 == 0) return TP_LT;
    }
    if (same16 && p->accum == DRIFT_ACCUM_F32) return TP_TC;
    return TP_SIMT;
}

static const char *path_name(tpath t) {
    static const char *N[] = {"simt", "tensor-core", "sgemm", "lt-fp8"};
    return N[t];
}

/* error of each output relative to sum_k |x_k w_k| */
static double tol_of(tpath t, drift_accum a) {
    switch (t) {
    case TP_SIMT: return a == DRIFT_ACCUM_F64 ? 2.5e-7 : 1e-5; /* f64: the final rounding to float */
    case TP_SGEMM: return 1e-5;
    case TP_TC: return 1e-4;
    default: return 2e-3; /* fp8 tensor cores accumulate with fewer bits */
    }
}

static void check_rel(const char *what, const float *got, const float *want, const double *scale, int64_t n,
                      double tol) {
    n_cases++;
    double worst = 0;
    int64_t at = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(got[i]) && isfinite(want[i])) {
            n_failed++;
            printf("  %-10s %-52s FAIL: non-finite at %lld (%g, ref %g)\n", "matmul", what, (long long)i, got[i],
                   want[i]);
            return;
        }
        double e = fabs((double)got[i] - (double)want[i]) / (scale[i] > 0 ? scale[i] : 1e-30);
        if (e > worst) worst = e, at = i;
    }
    int ok = worst <= tol;
    if (!ok) n_failed++;
    printf("  %-10s %-52s max err %.2e of sum|xw| (at %lld)  tol %.0e  %s\n", "matmul", what, worst, (long long)at,
           tol, ok ? "OK" : "FAIL");
}

static void test_matmul_vs_ref(void **state) {
    (void)state;
    enum { B = 5, N = 37 };
    static const int64_t KS[] = {224, 200, 90};
    drift_error err;
    for (size_t wi = 0; wi < N_W; wi++)
        for (size_t ki = 0; ki < 3; ki++) {
            drift_dtype t = ALL_W[wi];
            int64_t K = KS[ki];
            if (!fits(t, K)) continue;
            float *w = rand_vec(N * K, 0.05f), *x = rand_vec(B * K, 1.0f);
            for (int64_t k = 0; k < K; k++) x[2 * K + k] = 0.0f; /* a zero row (fp8 scale 0) */
            drift_scale_mode mode = ki == 1 ? DRIFT_SCALE_PER_TENSOR : DRIFT_SCALE_PER_CHANNEL;
            num_qmat W;
            quantize(&W, t, w, N, K, mode);
            float *yg = malloc(sizeof(float) * B * N), *yr = malloc(sizeof(float) * B * N);
            float *xa = malloc(sizeof(float) * B * K), *wr = malloc(sizeof(float) * K);
            double *scale = malloc(sizeof(double) * B * N);
            for (size_t ai = 0; ai < N_ACTS; ai++) {
                /* sum |x w| with the rounded acts and the dequantized weights */
                memcpy(xa, x, sizeof(float) * B * K);
                for (int b = 0; b < B; b++) num_round_acts(ACTS[ai], xa + b * K, K);
                for (int n = 0; n < N; n++) {
                    num_qmat_dequantize_row(&W, n, wr);
                    for (int b = 0; b < B; b++) {
                        double s = 0;
                        for (int64_t k = 0; k < K; k++) s += fabs((double)xa[b * K + k] * wr[k]);
                        scale[b * N + n] = s;
                    }
                }
                for (int gi = 0; gi < 3; gi++) {
                    drift_gemm g = gi == 1 ? DRIFT_GEMM_VENDOR : DRIFT_GEMM_KERNEL;
                    drift_numeric_profile p = gprof(gi == 2 ? "accum=f64" : "", g);
                    p.acts = ACTS[ai];
                    drift_numeric_profile r = refprof(&p);
                    assert_int_equal(dcu_op_matmul(&p, yg, x, &W, B, &err), DRIFT_OK);
                    assert_int_equal(num_ref_matmul(&r, yr, x, &W, B, &err), DRIFT_OK);
                    tpath tp = path_of(&p, t, K);
                    char what[128];
                    snprintf(what, sizeof what, "w=%s K=%lld acts=%s %s%s %s", drift_dtype_name(t), (long long)K,
                             drift_dtype_name(p.acts), g == DRIFT_GEMM_VENDOR ? "vendor" : "kernel",
                             gi == 2 ? " f64" : "", path_name(tp));
                    check_rel(what, yg, yr, scale, B * N, tol_of(tp, p.accum));
                }
            }
            num_qmat_free(&W);
            free(w), free(x), free(yg), free(yr), free(xa), free(wr), free(scale);
        }
    if (n_failed) fail_msg("%d of %d cases failed", n_failed, n_cases);
}

/* ----------------------------------------------------- matmul invariance */
static void inv_case(const char *spec, drift_gemm g, drift_dtype t, int64_t N, int64_t K) {
    enum { BB = 37 };
    drift_error err;
    drift_numeric_profile p = gprof(spec, g);
    float *w = rand_vec(N * K, 0.05f), *x = rand_vec(BB * K, 1.0f);
    float *full = malloc(sizeof(float) * BB * N), *part = malloc(sizeof(float) * BB * N);
    num_qmat W;
    quantize(&W, t, w, N, K, p.weight_scale);
    assert_int_equal(dcu_op_matmul(&p, full, x, &W, BB, &err), DRIFT_OK);
    for (int64_t b = 0; b < BB; b++)
        assert_int_equal(dcu_op_matmul(&p, part + b * N, x + b * K, &W, 1, &err), DRIFT_OK);
    int same = bits_equal(full, part, BB * N);
    static const int64_t SUB[][2] = {{5, 16}, {20, 17}, {3, 2}, {36, 1}};
    for (size_t s = 0; s < 4 && same; s++) {
        assert_int_equal(dcu_op_matmul(&p, part, x + SUB[s][0] * K, &W, SUB[s][1], &err), DRIFT_OK);
        same = bits_equal(full + SUB[s][0] * N, part, SUB[s][1] * N);
    }
    char what[160];
    snprintf(what, sizeof what, "w=%s %lldx%lld %s %s", drift_dtype_name(t), (long long)N, (long long)K, spec,
             g == DRIFT_GEMM_VENDOR ? "vendor" : "kernel");
    if (g == DRIFT_GEMM_VENDOR) {
        printf("  %-10s %-52s %s (not required)\n", "invariant", what,
               same ? "bit-identical over B" : "depends on B");
    } else {
        if (!same) fail_msg("batch invariance broken: %s", what);
        printf("  %-10s %-52s bit-identical over B  OK\n", "invariant", what);
    }
    num_qmat_free(&W);
    free(w), free(x), free(full), free(part);
}

static void test_matmul_invariance(void **state) {
    (void)state;
    inv_case("acts=bf16", DRIFT_GEMM_KERNEL, DRIFT_DTYPE_BF16, 300, 4096); /* tensor cores, K split 16 ways */
    inv_case("acts=bf16", DRIFT_GEMM_KERNEL, DRIFT_DTYPE_BF16, 50, 200);   /* tensor cores, K padded */
    inv_case("acts=f16", DRIFT_GEMM_KERNEL, DRIFT_DTYPE_F16, 53, 608);
    /* B <= 16 runs k_mm_tc1, B > 16 k_mm_wmma: one segment with 4 strips a block, and a 16-way split */
    inv_case("acts=bf16", DRIFT_GEMM_KERNEL, DRIFT_DTYPE_BF16, 4100, 64);
    inv_case("acts=f16", DRIFT_GEMM_KERNEL, DRIFT_DTYPE_F16, 1000, 2048);
    /* 300 strips, a 16-way split: more blocks of 16 warps than two an SM hold on the H200 (a second wave) */
    inv_case("acts=bf16", DRIFT_GEMM_KERNEL, DRIFT_DTYPE_BF16, 4800, 2048);
    inv_case("acts=f32", DRIFT_GEMM_KERNEL, DRIFT_DTYPE_BF16, 300, 4096); /* SIMT, 8 warps a row */
    inv_case("acts=f32", DRIFT_GEMM_KERNEL, DRIFT_DTYPE_F32, 53, 600);
    inv_case("acts=f32", DRIFT_GEMM_KERNEL, DRIFT_DTYPE_F32, 53, 601);    /* one-element units */
    inv_case("acts=bf16&accum=f64", DRIFT_GEMM_KERNEL, DRIFT_DTYPE_BF16, 50, 544);
    inv_case("acts=fp8-e4m3&wscale=per-tensor", DRIFT_GEMM_KERNEL, DRIFT_DTYPE_FP8_E4M3, 49, 520);
    inv_case("acts=f32", DRIFT_GEMM_KERNEL, DRIFT_DTYPE_FP8_E5M2, 49, 520);
    inv_case("acts=f32", DRIFT_GEMM_KERNEL, DRIFT_DTYPE_INT8, 49, 520);
    inv_case("acts=bf16", DRIFT_GEMM_KERNEL, DRIFT_DTYPE_INT4, 30, 1056);
    inv_case("acts=f32", DRIFT_GEMM_KERNEL, DRIFT_DTYPE_Q4_0, 50, 544);
    inv_case("acts=f32", DRIFT_GEMM_KERNEL, DRIFT_DTYPE_Q8_0, 50, 544);
    inv_case("acts=bf16", DRIFT_GEMM_KERNEL, DRIFT_DTYPE_MXFP4, 50, 544);
    inv_case("acts=bf16", DRIFT_GEMM_KERNEL, DRIFT_DTYPE_NVFP4, 50, 544);
    /* the vendor libraries: reported, not required */
    inv_case("acts=bf16", DRIFT_GEMM_VENDOR, DRIFT_DTYPE_BF16, 300, 4096);
    inv_case("acts=f32", DRIFT_GEMM_VENDOR, DRIFT_DTYPE_F32, 300, 4096);
    inv_case("acts=fp8-e4m3&wscale=per-tensor", DRIFT_GEMM_VENDOR, DRIFT_DTYPE_FP8_E4M3, 304, 4096);
}

/* ----------------------------------------------------------- element-wise */
static void test_elementwise(void **state) {
    (void)state;
    enum { N = 1000, ROWS = 3 };
    drift_error err;
    float *x = rand_vec(ROWS * N, 2.0f), *w = rand_vec(N, 1.0f), *u = rand_vec(N, 1.0f);
    float *a = malloc(sizeof(float) * ROWS * N), *b = malloc(sizeof(float) * ROWS * N);
    static const char *SPECS[] = {"exp=libm", "exp=fast"};
    for (int si = 0; si < 2; si++) {
        drift_numeric_profile p = gprof(SPECS[si], DRIFT_GEMM_KERNEL), r = prof("profile=ref");
        char what[64];
        snprintf(what, sizeof what, "%d x %d %s", ROWS, N, SPECS[si]);
        assert_int_equal(dcu_op_rmsnorm(&p, a, x, w, ROWS, N, 1e-5f, &err), DRIFT_OK);
        for (int i = 0; i < ROWS; i++) num_ref_rmsnorm(&r, b + i * N, x + i * N, w, N, 1e-5f);
        check_nmse("rmsnorm", what, a, b, ROWS * N, 1e-11);
        memcpy(a, x, sizeof(float) * ROWS * N);
        memcpy(b, x, sizeof(float) * ROWS * N);
        assert_int_equal(dcu_op_softmax(&p, a, ROWS, N, &err), DRIFT_OK);
        for (int i = 0; i < ROWS; i++) num_ref_softmax(&r, b + i * N, N);
        check_nmse("softmax", what, a, b, ROWS * N, si ? 1e-9 : 1e-11);
        assert_int_equal(dcu_op_swiglu(&p, a, x, u, N, &err), DRIFT_OK);
        num_ref_swiglu(&r, b, x, u, N);
        check_nmse("swiglu", what, a, b, N, si ? 1e-9 : 1e-11);
        /* extreme logits stay finite and sum to 1 */
        float big[3] = {1000.0f, -1000.0f, 999.0f};
        assert_int_equal(dcu_op_softmax(&p, big, 1, 3, &err), DRIFT_OK);
        assert_true(isfinite(big[0]) && fabsf(big[0] + big[1] + big[2] - 1.0f) < 1e-6f);
    }
    free(x), free(w), free(u), free(a), free(b);
    if (n_failed) fail_msg("%d of %d cases failed", n_failed, n_cases);
}

/* dcu_op_argmax (the forward pass's greedy pick) against the sampler's
 * argmax: random rows, the largest value twice, NaN first / in the middle /
 * everywhere, all -inf, -0 before +0, rows longer than the block */
static void test_argmax(void **state) {
    (void)state;
    static const int NS[] = {1, 7, 1000, 32000, 151936};
    enum { ROWS = 9 };
    drift_error err;
    util_rng rng; /* its own generator: the shared RNG's stream (the other tests' data) stays as it was */
    util_rng_seed(&rng, 8);
    for (size_t k = 0; k < sizeof NS / sizeof NS[0]; k++) {
        int n = NS[k];
        float *x = malloc(sizeof(float) * ROWS * (size_t)n);
        assert_non_null(x);
        for (size_t i = 0; i < (size_t)ROWS * (size_t)n; i++) x[i] = (float)(util_rng_uniform(&rng) * 8.0 - 4.0);
        int32_t got[ROWS];
        float *r;
        r = x + 1 * n; /* the largest value twice: the first one */
        r[n / 2] = 9.0f, r[n - 1] = 9.0f;
        r = x + 2 * n; /* NaN at 0: index 0 */
        r[0] = NAN, r[n - 1] = 9.0f;
        r = x + 3 * n; /* NaN in the middle: skipped */
        r[n / 2] = NAN;
        r = x + 4 * n; /* all NaN */
        for (int i = 0; i < n; i++) r[i] = NAN;
        r = x + 5 * n; /* all -inf */
        for (int i = 0; i < n; i++) r[i] = -INFINITY;
        r = x + 6 * n; /* -0 then +0 as the largest: the first */
        for (int i = 0; i < n; i++) r[i] = -1.0f;
        r[n / 3] = -0.0f, r[n - 1] = 0.0f;
        r = x + 7 * n; /* +inf last */
        r[n - 1] = INFINITY;
        r = x + 8 * n; /* the largest at index 0 */
        r[0] = 9.0f;
        assert_int_equal(dcu_op_argmax(x, ROWS, n, got, &err), DRIFT_OK);
        char what[64];
        snprintf(what, sizeof what, "%d rows of %d", ROWS, n);
        int ok = 1;
        for (int i = 0; i < ROWS; i++)
            if (got[i] != samp_argmax(x + (size_t)i * n, n)) {
                fprintf(stderr, "argmax %s: row %d: device %d, host %d\n", what, i, got[i], samp_argmax(x + (size_t)i * n, n));
                ok = 0;
            }
        n_cases++;
        if (!ok) n_failed++;
        printf("  %-10s %-52s %s\n", "argmax", what, ok ? "the host's picks  OK" : "FAILED");
        free(x);
    }
    if (n_failed) fail_msg("%d of %d cases failed", n_failed, n_cases);
}

static void test_rope(void **state) {
    (void)state;
    enum { H = 3, D = 64 };
    drift_error err;
    float fac[D / 2];
    for (int i = 0; i < D / 2; i++) fac[i] = 1.0f + (float)(i % 5) * 0.5f;
    num_rope_params variants[4] = {
        {.head_dim = D, .n_rot = D, .theta_base = 10000.0f, .scaling_factor = 1.0f},
        {.head_dim = D, .n_rot = D, .neox = true, .theta_base = 1000000.0f, .scaling_factor = 1.0f},
        {.head_dim = D, .n_rot = D, .theta_base = 500000.0f, .scaling_factor = 8.0f, .low_freq_factor = 1.0f,
         .high_freq_factor = 4.0f, .orig_ctx = 8192},
        {.head_dim = D, .n_rot = 32, .neox = true, .theta_base = 10000.0f, .scaling_factor = 1.0f,
         .freq_factors = fac},
    };
    static const char *NAMES[4] = {"normal", "neox", "llama3-scaled", "neox partial+factors"};
    static const int64_t POS[3] = {0, 7, 3000};
    drift_numeric_profile p = gprof("", DRIFT_GEMM_KERNEL), r = prof("profile=ref");
    float *x = rand_vec(H * D, 1.0f);
    float a[H * D], b[H * D];
    for (int v = 0; v < 4; v++)
        for (int pi = 0; pi < 3; pi++) {
            memcpy(a, x, sizeof a);
            memcpy(b, x, sizeof b);
            assert_int_equal(dcu_op_rope(&p, a, H, POS[pi], &variants[v], &err), DRIFT_OK);
            num_ref_rope(&r, b, H, POS[pi], &variants[v]);
            char what[64];
            snprintf(what, sizeof what, "%s pos=%lld", NAMES[v], (long long)POS[pi]);
            check_nmse("rope", what, a, b, H * D, 1e-13); /* double angles and rotations, as the reference */
            if (POS[pi] == 0) assert_true(bits_equal(a, x, H * D));
            if (v == 3)
                for (int h = 0; h < H; h++) assert_true(bits_equal(a + h * D + 32, x + h * D + 32, 32));
        }
    free(x);
    if (n_failed) fail_msg("%d of %d cases failed", n_failed, n_cases);
}

static void test_attention(void **state) {
    (void)state;
    enum { T = 1100 };
    static const char *ALG[] = {"attn=two-pass", "attn=online:7", "attn=online:64&exp=fast", "attn=online:1",
                                "attn=online:64&batch_invariant=0", "attn=online:4096"};
    static const int NP[] = {1, 50, 300, T};
    /* head dims: one lane's worth and less (16, 32), odd (33: partial lanes,
     * unaligned vectors), 64 / 128, and past 256 (300: 32-dimension lanes) */
    static const int DS[] = {16, 32, 33, 64, 128, 300};
    drift_error err;
    for (int di = 0; di < (int)(sizeof DS / sizeof DS[0]); di++) {
        int D = DS[di];
        float *q = rand_vec(D, 1.0f), *kf = rand_vec(T * D, 1.0f), *vf = rand_vec(T * D, 1.0f);
        size_t stride = num_kv_bytes(DRIFT_DTYPE_F32, D) + 12; /* vectors not packed */
        uint8_t *kc = malloc(T * stride), *vc = malloc(T * stride);
        float *scratch = malloc(sizeof(float) * (T + 2 * D)), *a = malloc(sizeof(float) * D),
              *b = malloc(sizeof(float) * D);
        for (size_t ki = 0; ki < N_KVF; ki++) {
            drift_dtype kt = KVF[ki];
            for (int t = 0; t < T; t++) {
                num_kv_store(kt, kc + t * stride, kf + t * D, D);
                num_kv_store(kt, vc + t * stride, vf + t * D, D);
            }
            for (size_t ai = 0; ai < sizeof ALG / sizeof ALG[0]; ai++)
                for (int ni = 0; ni < 4; ni++) {
                    char spec[96], what[128];
                    snprintf(spec, sizeof spec, "kv=%s&%s", drift_dtype_name(kt), ALG[ai]);
                    drift_numeric_profile p = gprof(spec, DRIFT_GEMM_KERNEL), r = refprof(&p);
                    assert_int_equal(dcu_op_attention(&p, a, q, kc, vc, stride, NP[ni], D, 0.125f, &err), DRIFT_OK);
                    num_ref_attention(&r, b, q, kc, vc, stride, NP[ni], D, 0.125f, scratch);
                    snprintf(what, sizeof what, "D=%d %s n_pos=%d", D, spec, NP[ni]);
                    check_nmse("attention", what, a, b, D, p.exp == DRIFT_EXP_FAST ? 1e-9 : 1e-10);
                }
        }
        /* one position: exactly that position's V */
        drift_numeric_profile p = gprof("", DRIFT_GEMM_KERNEL);
        for (int t = 0; t < 2; t++) {
            num_kv_store(DRIFT_DTYPE_F32, kc + t * stride, kf + t * D, D);
            num_kv_store(DRIFT_DTYPE_F32, vc + t * stride, vf + t * D, D);
        }
        assert_int_equal(dcu_op_attention(&p, a, q, kc, vc, stride, 1, D, 0.125f, &err), DRIFT_OK);
        assert_true(bits_equal(a, vf, D));
        free(q), free(kf), free(vf), free(kc), free(vc), free(scratch), free(a), free(b);
    }
    if (n_failed) fail_msg("%d of %d cases failed", n_failed, n_cases);
}

/* ---------------------------------------------------------- forward pass */
enum { TM_LAYERS = 2, TM_EXP = 4, TM_CTX = 32 };

typedef struct tlayer {
    float *an, *fn, *bq, *bk, *bv;
    num_qmat wq, wk, wv, wo, wg, wu, wd, router;
    num_qmat eg[TM_EXP], eu[TM_EXP], ed[TM_EXP];
} tlayer;

typedef struct tmodel {
    int dim, hidden, n_layers, n_heads, n_kvh, hd, vocab, n_exp, n_used, window;
    float eps;
    num_rope_params rope;
    float freqf[8];
    num_qmat tok;
    float *onorm;
    tlayer L[TM_LAYERS];
} tmodel;

static void tm_mat(num_qmat *m, const drift_numeric_profile *p, int64_t rows, int64_t cols, float scale) {
    float *w = rand_vec(rows * cols, scale);
    drift_error err;
    drift_dtype t = p->weights == DRIFT_DTYPE_NATIVE ? DRIFT_DTYPE_F32 : p->weights;
    if (num_qmat_quantize(m, t, w, rows, cols, p->group_size, p->weight_scale, &err)) fail_msg("%s", err.msg);
    free(w);
}

static float *tm_vec(int n, float base, float scale) {
    float *v = rand_vec(n, scale);
    for (int i = 0; i < n; i++) v[i] += base;
    return v;
}

static void tm_build(tmodel *m, const drift_numeric_profile *p, int qwen, int moe, int window) {
    memset(m, 0, sizeof *m);
    m->dim = 64;
    m->hidden = 96;
    m->n_layers = TM_LAYERS;
    m->n_heads = 4;
    m->n_kvh = 2;
    m->hd = 16;
    m->vocab = 50;
    m->n_exp = moe ? TM_EXP : 0;
    m->n_used = moe ? 2 : 0;
    m->window = window;
    m->eps = 1e-5f;
    m->rope.head_dim = m->hd;
    m->rope.n_rot = qwen ? 16 : 12;
    m->rope.neox = qwen;
    m->rope.theta_base = 10000.0f;
    m->rope.scaling_factor = 1.0f;
    m->rope.low_freq_factor = 1.0f;
    m->rope.high_freq_factor = 4.0f;
    if (!qwen) {
        for (int i = 0; i < 8; i++) m->freqf[i] = 1.0f + 0.25f * (float)i;
        m->rope.freq_factors = m->freqf;
    }
    int D = m->dim, H = m->hidden, QD = m->n_heads * m->hd, KVD = m->n_kvh * m->hd;
    tm_mat(&m->tok, p, m->vocab, D, 0.5f);
    m->onorm = tm_vec(D, 1.0f, 0.1f);
    for (int l = 0; l < m->n_layers; l++) {
        tlayer *L = &m->L[l];
        L->an = tm_vec(D, 1.0f, 0.1f);
        L->fn = tm_vec(D, 1.0f, 0.1f);
        if (qwen) {
            L->bq = rand_vec(QD, 0.1f);
            L->bk = rand_vec(KVD, 0.1f);
            L->bv = rand_vec(KVD, 0.1f);
        }
        tm_mat(&L->wq, p, QD, D, 0.15f);
        tm_mat(&L->wk, p, KVD, D, 0.15f);
        tm_mat(&L->wv, p, KVD, D, 0.15f);
        tm_mat(&L->wo, p, D, QD, 0.15f);
        if (moe) {
            tm_mat(&L->router, p, m->n_exp, D, 0.3f);
            for (int e = 0; e < m->n_exp; e++) {
                tm_mat(&L->eg[e], p, H, D, 0.15f);
                tm_mat(&L->eu[e], p, H, D, 0.15f);
                tm_mat(&L->ed[e], p, D, H, 0.1f);
            }
        } else {
            tm_mat(&L->wg, p, H, D, 0.15f);
            tm_mat(&L->wu, p, H, D, 0.15f);
            tm_mat(&L->wd, p, D, H, 0.1f);
        }
    }
}

static void tm_free(tmodel *m) {
    num_qmat_free(&m->tok);
    free(m->onorm);
    for (int l = 0; l < m->n_layers; l++) {
        tlayer *L = &m->L[l];
        free(L->an), free(L->fn), free(L->bq), free(L->bk), free(L->bv);
        num_qmat *ms[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->wg, &L->wu, &L->wd, &L->router};
        for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) num_qmat_free(ms[i]);
        for (int e = 0; e < TM_EXP; e++) num_qmat_free(&L->eg[e]), num_qmat_free(&L->eu[e]), num_qmat_free(&L->ed[e]);
    }
}

static void tm_desc(const tmodel *m, dcu_model_desc *d, dcu_layer_desc *ld) {
    memset(d, 0, sizeof *d);
    memset(ld, 0, sizeof(dcu_layer_desc) * TM_LAYERS);
    for (int l = 0; l < m->n_layers; l++) {
        const tlayer *L = &m->L[l];
        ld[l].attn_norm = L->an;
        ld[l].ffn_norm = L->fn;
        ld[l].wq = &L->wq;
        ld[l].wk = &L->wk;
        ld[l].wv = &L->wv;
        ld[l].wo = &L->wo;
        ld[l].bq = L->bq;
        ld[l].bk = L->bk;
        ld[l].bv = L->bv;
        if (m->n_exp) {
            ld[l].router = &L->router;
            ld[l].e_gate = L->eg;
            ld[l].e_up = L->eu;
            ld[l].e_down = L->ed;
        } else {
            ld[l].w_gate = &L->wg;
            ld[l].w_up = &L->wu;
            ld[l].w_down = &L->wd;
        }
    }
    d->dim = m->dim;
    d->hidden_dim = m->hidden;
    d->n_layers = m->n_layers;
    d->n_heads = m->n_heads;
    d->n_kv_heads = m->n_kvh;
    d->head_dim = m->hd;
    d->n_vocab = m->vocab;
    d->n_experts = m->n_exp;
    d->n_experts_used = m->n_used;
    d->sliding_window = m->window;
    d->norm_eps = m->eps;
    d->rope = m->rope;
    d->tok_embd = &m->tok;
    d->output = &m->tok; /* tied */
    d->output_norm = m->onorm;
    d->layers = ld;
}

/* a CPU session of the reference forward */
typedef struct tsess {
    uint8_t *kc, *vc; /* (layers, TM_CTX, n_kvh, vb) */
} tsess;

static uint8_t *tkv_at(const tmodel *m, size_t vb, uint8_t *base, int l, int pos, int kvh) {
    return base + (((size_t)l * TM_CTX + (size_t)pos) * (size_t)m->n_kvh + (size_t)kvh) * vb;
}

/* moe_ffn of forward.c with the reference kernels; the router is forward.c's
 * own (num_ref_moe_route, kernels_ref.h), with libm's exp as before */
static void ref_moe(const tmodel *m, const drift_numeric_profile *r, const tlayer *L, const float *xb, int B,
                    float *out) {
    drift_error err;
    int D = m->dim, H = m->hidden, E = m->n_exp, K = m->n_used;
    float *lg = malloc(sizeof(float) * B * E), *wt = malloc(sizeof(float) * B * K);
    int *sel = malloc(sizeof(int) * B * K), *who = malloc(sizeof(int) * B);
    float *slot = malloc(sizeof(float) * B * K * D), *g = malloc(sizeof(float) * B * D);
    float *h1 = malloc(sizeof(float) * B * H), *h3 = malloc(sizeof(float) * B * H), *o = malloc(sizeof(float) * B * D);
    double pr[TM_EXP];
    assert_int_equal(num_matmul(r, lg, xb, &L->router, B, &err), DRIFT_OK);
    for (int b = 0; b < B; b++) num_ref_moe_route(lg + b * E, E, K, exp, pr, sel + b * K, wt + b * K);
    for (int e = 0; e < E; e++) {
        int cnt = 0;
        for (int b = 0; b < B; b++)
            for (int k = 0; k < K; k++)
                if (sel[b * K + k] == e) {
                    who[cnt] = b * K + k;
                    memcpy(g + cnt * D, xb + b * D, sizeof(float) * D);
                    cnt++;
                }
        if (!cnt) continue;
        assert_int_equal(num_matmul(r, h1, g, &L->eg[e], cnt, &err), DRIFT_OK);
        assert_int_equal(num_matmul(r, h3, g, &L->eu[e], cnt, &err), DRIFT_OK);
        for (int i = 0; i < cnt; i++) num_swiglu(r, h1 + i * H, h1 + i * H, h3 + i * H, H);
        assert_int_equal(num_matmul(r, o, h1, &L->ed[e], cnt, &err), DRIFT_OK);
        for (int i = 0; i < cnt; i++) memcpy(slot + who[i] * D, o + i * D, sizeof(float) * D);
    }
    for (int b = 0; b < B; b++)
        for (int d = 0; d < D; d++) {
            float acc = 0;
            for (int k = 0; k < K; k++) acc += wt[b * K + k] * slot[(b * K + k) * D + d];
            out[b * D + d] = acc;
        }
    free(lg), free(wt), free(sel), free(who), free(slot), free(g), free(h1), free(h3), free(o);
}

/* forward_rows of forward.c with the reference kernels */
static void ref_forward(const tmodel *m, const drift_numeric_profile *r, tsess *const *sess, const int *pos,
                        const int32_t *tok, int B, float *hidden) {
    drift_error err;
    int D = m->dim, H = m->hidden, hd = m->hd, QD = m->n_heads * hd, KVD = m->n_kvh * hd;
    size_t vb = num_kv_bytes(r->kv, hd);
    float *x = malloc(sizeof(float) * B * D), *xb = malloc(sizeof(float) * B * D), *xb2 = malloc(sizeof(float) * B * D);
    float *q = malloc(sizeof(float) * B * QD), *k = malloc(sizeof(float) * B * KVD), *v = malloc(sizeof(float) * B * KVD);
    float *att = malloc(sizeof(float) * B * QD), *h1 = malloc(sizeof(float) * B * H), *h3 = malloc(sizeof(float) * B * H);
    float *scratch = malloc(sizeof(float) * (TM_CTX + 2 * hd + 16));
    for (int b = 0; b < B; b++) num_embedding(r, x + b * D, &m->tok, tok[b]);
    float scale = 1.0f / sqrtf((float)hd);
    int group = m->n_heads / m->n_kvh;
    for (int l = 0; l < m->n_layers; l++) {
        const tlayer *L = &m->L[l];
        for (int b = 0; b < B; b++) num_rmsnorm(r, xb + b * D, x + b * D, L->an, D, m->eps);
        assert_int_equal(num_matmul(r, q, xb, &L->wq, B, &err), DRIFT_OK);
        assert_int_equal(num_matmul(r, k, xb, &L->wk, B, &err), DRIFT_OK);
        assert_int_equal(num_matmul(r, v, xb, &L->wv, B, &err), DRIFT_OK);
        for (int b = 0; b < B; b++) {
            if (L->bq) num_add(q + b * QD, q + b * QD, L->bq, QD);
            if (L->bk) num_add(k + b * KVD, k + b * KVD, L->bk, KVD);
            if (L->bv) num_add(v + b * KVD, v + b * KVD, L->bv, KVD);
            num_rope(r, q + b * QD, m->n_heads, pos[b], &m->rope);
            num_rope(r, k + b * KVD, m->n_kvh, pos[b], &m->rope);
            for (int j = 0; j < m->n_kvh; j++) {
                num_kv_store(r->kv, tkv_at(m, vb, sess[b]->kc, l, pos[b], j), k + b * KVD + j * hd, hd);
                num_kv_store(r->kv, tkv_at(m, vb, sess[b]->vc, l, pos[b], j), v + b * KVD + j * hd, hd);
            }
        }
        for (int bh = 0; bh < B * m->n_heads; bh++) {
            int b = bh / m->n_heads, h = bh % m->n_heads, kvh = h / group;
            int start = m->window > 0 && pos[b] + 1 > m->window ? pos[b] + 1 - m->window : 0;
            num_attention(r, att + b * QD + h * hd, q + b * QD + h * hd, tkv_at(m, vb, sess[b]->kc, l, start, kvh),
                          tkv_at(m, vb, sess[b]->vc, l, start, kvh), (size_t)m->n_kvh * vb, pos[b] - start + 1, hd,
                          scale, scratch);
        }
        assert_int_equal(num_matmul(r, xb2, att, &L->wo, B, &err), DRIFT_OK);
        for (int b = 0; b < B; b++) {
            num_add(x + b * D, x + b * D, xb2 + b * D, D);
            num_round_acts(r->acts, x + b * D, D);
        }
        for (int b = 0; b < B; b++) num_rmsnorm(r, xb + b * D, x + b * D, L->fn, D, m->eps);
        if (m->n_exp) {
            ref_moe(m, r, L, xb, B, xb2);
        } else {
            assert_int_equal(num_matmul(r, h1, xb, &L->wg, B, &err), DRIFT_OK);
            assert_int_equal(num_matmul(r, h3, xb, &L->wu, B, &err), DRIFT_OK);
            for (int b = 0; b < B; b++) num_swiglu(r, h1 + b * H, h1 + b * H, h3 + b * H, H);
            assert_int_equal(num_matmul(r, xb2, h1, &L->wd, B, &err), DRIFT_OK);
        }
        for (int b = 0; b < B; b++) {
            num_add(x + b * D, x + b * D, xb2 + b * D, D);
            num_round_acts(r->acts, x + b * D, D);
        }
    }
    for (int b = 0; b < B; b++) num_rmsnorm(r, hidden + b * D, x + b * D, m->onorm, D, m->eps);
    free(x), free(xb), free(xb2), free(q), free(k), free(v), free(att), free(h1), free(h3), free(scratch);
}

/* rows of one GPU call: B rows of the given caches */
static void gpu_rows(dcu_model *gm, dcu_kv **kv, const int *pos, const int32_t *tok, int B, float *hidden,
                     float *logits, const int *lrows, int nl) {
    drift_error err;
    if (dcu_forward(gm, kv, pos, tok, B, hidden, logits, NULL, lrows, nl, &err)) fail_msg("dcu_forward: %s", err.msg);
}

enum { SEQ = 10 };

/* Forward of sequence A (SEQ tokens) on the GPU vs the CPU reference, then
 * (check_inv) A fed in pieces and batched with other sequences: the same bits. */
static void fwd_case(const char *spec, drift_gemm g, int qwen, int moe, int window, double tol, int check_inv) {
    drift_error err;
    drift_numeric_profile p = gprof(spec, g), r = refprof(&p);
    tmodel m;
    tm_build(&m, &p, qwen, moe, window);
    dcu_model_desc d;
    dcu_layer_desc ld[TM_LAYERS];
    tm_desc(&m, &d, ld);
    dcu_model *gm = NULL;
    if (dcu_model_upload(&d, &p, &gm, &err)) fail_msg("upload (%s): %s", spec, err.msg);
    int D = m.dim, V = m.vocab;
    int32_t seq[SEQ];
    for (int i = 0; i < SEQ; i++) seq[i] = (int32_t)util_rng_below(&RNG, (uint64_t)V);
    int pos[SEQ + 8], rows[SEQ];
    for (int i = 0; i < SEQ; i++) pos[i] = i, rows[i] = i;
    /* reference: A prefilled at once */
    size_t vb = num_kv_bytes(p.kv, m.hd), kvbytes = (size_t)TM_LAYERS * TM_CTX * m.n_kvh * vb;
    tsess cs = {malloc(kvbytes), malloc(kvbytes)};
    tsess *cref[SEQ];
    for (int i = 0; i < SEQ; i++) cref[i] = &cs;
    float *hid_r = malloc(sizeof(float) * SEQ * D), *lg_r = malloc(sizeof(float) * SEQ * V);
    ref_forward(&m, &r, cref, pos, seq, SEQ, hid_r);
    assert_int_equal(num_matmul(&r, lg_r, hid_r, &m.tok, SEQ, &err), DRIFT_OK);
    /* GPU: A prefilled at once, logits of every row */
    dcu_kv *ka = NULL;
    assert_int_equal(dcu_kv_new(gm, TM_CTX, &ka, &err), DRIFT_OK);
    dcu_kv *kv[SEQ + 8];
    for (int i = 0; i < SEQ; i++) kv[i] = ka;
    float *hid_g = malloc(sizeof(float) * SEQ * D), *lg_g = malloc(sizeof(float) * SEQ * V);
    gpu_rows(gm, kv, pos, seq, SEQ, hid_g, lg_g, rows, SEQ);
    char what[128];
    snprintf(what, sizeof what, "%s %s hidden", spec, g == DRIFT_GEMM_VENDOR ? "vendor" : "kernel");
    check_nmse("forward", what, hid_g, hid_r, SEQ * D, tol);
    snprintf(what, sizeof what, "%s %s logits", spec, g == DRIFT_GEMM_VENDOR ? "vendor" : "kernel");
    check_nmse("forward", what, lg_g, lg_r, SEQ * V, tol);
    /* only the last row's logits: the same as the last of all rows */
    float *last = malloc(sizeof(float) * V);
    dcu_kv *kb = NULL;
    assert_int_equal(dcu_kv_new(gm, TM_CTX, &kb, &err), DRIFT_OK);
    for (int i = 0; i < SEQ; i++) kv[i] = kb;
    int lastrow = SEQ - 1;
    gpu_rows(gm, kv, pos, seq, SEQ, NULL, last, &lastrow, 1);
    if (check_inv && !bits_equal(last, lg_g + (SEQ - 1) * V, V)) fail_msg("%s: last-row logits differ", spec);
    /* greedy picks on the device (dcu_forward's next, no logits back): the host's argmax of the same logits */
    if (check_inv) {
        dcu_kv *kg = NULL;
        assert_int_equal(dcu_kv_new(gm, TM_CTX, &kg, &err), DRIFT_OK);
        for (int i = 0; i < SEQ; i++) kv[i] = kg;
        int32_t nx[SEQ];
        if (dcu_forward(gm, kv, pos, seq, SEQ, NULL, NULL, nx, rows, SEQ, &err)) fail_msg("dcu_forward: %s", err.msg);
        for (int i = 0; i < SEQ; i++)
            if (nx[i] != samp_argmax(lg_g + (size_t)i * V, V))
                fail_msg("%s: row %d: device pick %d, host argmax %d", spec, i, nx[i], samp_argmax(lg_g + (size_t)i * V, V));
        dcu_kv_free(kg);
    }
    if (check_inv) {
        /* A2: tokens 0..3 in one call with C's prefill of 5, then one token a
         * call with C (decoding) and D (prefilled with 7 before) */
        dcu_kv *k2 = NULL, *kc = NULL, *kd = NULL;
        assert_int_equal(dcu_kv_new(gm, TM_CTX, &k2, &err), DRIFT_OK);
        assert_int_equal(dcu_kv_new(gm, TM_CTX, &kc, &err), DRIFT_OK);
        assert_int_equal(dcu_kv_new(gm, TM_CTX, &kd, &err), DRIFT_OK);
        float *hid2 = malloc(sizeof(float) * SEQ * D), *lg2 = malloc(sizeof(float) * SEQ * V);
        float *hb = malloc(sizeof(float) * (SEQ + 8) * D), *lb = malloc(sizeof(float) * (SEQ + 8) * V);
        int32_t tk[SEQ + 8];
        int lr[SEQ + 8];
        int B = 0;
        for (int i = 0; i < 7; i++) kv[i] = kd, pos[i] = i, tk[i] = (int32_t)util_rng_below(&RNG, (uint64_t)V);
        gpu_rows(gm, kv, pos, tk, 7, NULL, NULL, NULL, 0);
        for (int i = 0; i < 4; i++) kv[B] = k2, pos[B] = i, tk[B] = seq[i], lr[B] = B, B++;
        for (int i = 0; i < 5; i++) kv[B] = kc, pos[B] = i, tk[B] = (int32_t)util_rng_below(&RNG, (uint64_t)V), lr[B] = B, B++;
        gpu_rows(gm, kv, pos, tk, B, hb, lb, lr, B);
        memcpy(hid2, hb, sizeof(float) * 4 * D);
        memcpy(lg2, lb, sizeof(float) * 4 * V);
        for (int t = 4; t < SEQ; t++) {
            /* A2 in the middle of the batch */
            kv[0] = kc, pos[0] = 5 + (t - 4), tk[0] = 7;
            kv[1] = k2, pos[1] = t, tk[1] = seq[t];
            kv[2] = kd, pos[2] = 7 + (t - 4), tk[2] = 3;
            int one = 1;
            gpu_rows(gm, kv, pos, tk, 3, hb, lg2 + t * V, &one, 1);
            memcpy(hid2 + t * D, hb + D, sizeof(float) * D);
        }
        if (!bits_equal(hid2, hid_g, SEQ * D) || !bits_equal(lg2, lg_g, SEQ * V))
            fail_msg("forward batch invariance broken: %s", spec);
        printf("  %-10s %-52s prefill == pieces == batched, bit for bit  OK\n", "invariant", spec);
        /* A3: one token a call, alone: the one-row paths (k_qkv's work inside
         * attention, gate|up in one wave, KV lines prefetched before the wait) */
        dcu_kv *k3 = NULL;
        assert_int_equal(dcu_kv_new(gm, TM_CTX, &k3, &err), DRIFT_OK);
        for (int t = 0; t < SEQ; t++) {
            int p1 = t, zero = 0;
            gpu_rows(gm, &k3, &p1, seq + t, 1, hid2 + t * D, lg2 + t * V, &zero, 1);
        }
        if (!bits_equal(hid2, hid_g, SEQ * D) || !bits_equal(lg2, lg_g, SEQ * V))
            fail_msg("forward, one token a call, differs from the prefill: %s", spec);
        printf("  %-10s %-52s prefill == one token a call, bit for bit  OK\n", "invariant", spec);
        free(hid2), free(lg2), free(hb), free(lb);
        dcu_kv_free(k2), dcu_kv_free(kc), dcu_kv_free(kd), dcu_kv_free(k3);
    }
    dcu_kv_free(ka);
    dcu_kv_free(kb);
    dcu_model_free(gm);
    tm_free(&m);
    free(cs.kc), free(cs.vc), free(hid_r), free(lg_r), free(hid_g), free(lg_g), free(last);
}

static void test_forward(void **state) {
    (void)state;
    fwd_case("weights=f32&acts=f32&kv=f32&attn=online:4", DRIFT_GEMM_KERNEL, 1, 0, 0, 1e-9, 1);
    fwd_case("weights=bf16&acts=bf16&kv=bf16&attn=online:4", DRIFT_GEMM_KERNEL, 0, 0, 0, 1e-4, 1);
    fwd_case("weights=q4_0&acts=f32&kv=f16&attn=online:3", DRIFT_GEMM_KERNEL, 0, 1, 6, 1e-8, 1);
    fwd_case("weights=f16&acts=f16&kv=f16&attn=two-pass", DRIFT_GEMM_KERNEL, 1, 1, 0, 1e-5, 1);
    fwd_case("weights=int4&group=32&acts=fp8-e4m3&kv=fp8-e4m3&accum=f64&attn=online:2", DRIFT_GEMM_KERNEL, 1, 0, 0,
             1e-2, 1);
    fwd_case("weights=nvfp4&acts=bf16&kv=bf16&batch_invariant=0", DRIFT_GEMM_KERNEL, 0, 0, 0, 1e-4, 0);
    fwd_case("weights=fp8-e4m3&wscale=per-tensor&acts=fp8-e4m3&kv=fp8-e5m2", DRIFT_GEMM_VENDOR, 0, 0, 0, 1e-2, 0);
    fwd_case("weights=bf16&acts=bf16&kv=bf16", DRIFT_GEMM_VENDOR, 1, 1, 0, 1e-4, 0);
    fwd_case("weights=f32&acts=f32&kv=f32", DRIFT_GEMM_VENDOR, 0, 0, 5, 1e-9, 0);
    /* MoE through the host's per-expert lists (the path of large experts;
     * these small ones run dense by default): the same checks */
    setenv("DRIFT_CUDA_MOE", "gather", 1);
    fwd_case("weights=q4_0&acts=f32&kv=f16&attn=online:3", DRIFT_GEMM_KERNEL, 0, 1, 6, 1e-8, 1);
    fwd_case("weights=f16&acts=f16&kv=f16&attn=two-pass", DRIFT_GEMM_KERNEL, 1, 1, 0, 1e-5, 1);
    unsetenv("DRIFT_CUDA_MOE");
    if (n_failed) fail_msg("%d of %d cases failed", n_failed, n_cases);
}

int main(void) {
    int n = dcu_device_count();
    if (n == 0) {
        dcu_device_info di;
        drift_error err;
        if (dcu_device_get_info(&di, &err) == DRIFT_OK) snprintf(err.msg, sizeof err.msg, "no device visible");
        printf("skipped: no GPU (%s)\n", err.msg);
        return 77;
    }
    util_rng_seed(&RNG, 20261201);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_device, reset_failed),        cmocka_unit_test_setup(test_embedding, reset_failed),
        cmocka_unit_test_setup(test_round_acts, reset_failed),    cmocka_unit_test_setup(test_kv_vectors, reset_failed),
        cmocka_unit_test_setup(test_matmul_vs_ref, reset_failed), cmocka_unit_test_setup(test_matmul_invariance, reset_failed),
        cmocka_unit_test_setup(test_elementwise, reset_failed),   cmocka_unit_test_setup(test_rope, reset_failed),
        cmocka_unit_test_setup(test_argmax, reset_failed),
        cmocka_unit_test_setup(test_attention, reset_failed),     cmocka_unit_test_setup(test_forward, reset_failed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
