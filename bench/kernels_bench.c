/* kernels_bench.c - the embedded engine's kernels against the machine's limits.
 *
 * 1. FMA peak: independent FMA chains in registers (AVX-512 and AVX2), 1 and
 *    2 threads -> GFLOP/s.
 * 2. Memory bandwidth: a copy loop (memcpy, counted read + write) and a read
 *    loop over buffers much bigger than the caches -> GB/s.
 * 3. Prefill: matmul y (B, N) = x (B, K) @ W^T at B = 64..512, f32 and bf16
 *    weights (and the other formats at B=256), GFLOP/s and the fraction of
 *    the FMA peak with the same thread count.
 * 4. Decode: B = 1 over a weight matrix far bigger than the caches, per
 *    format: weight bytes streamed per second and the fraction of the
 *    measured bandwidth.
 * 5. The lab's hardware levels: each hardware=NAME preset's matmul against
 *    the baseline's (hardware=avx2) at decode and prefill shapes.
 * Every figure is the best of several repetitions (the machine is shared).
 * usage: bench_kernels_bench [--quick] [--threads N] [--only f32,bf16] [--peak-only]
 *   N: max threads (default 2); --only: prefill formats to run; --peak-only:
 *   the FMA peak (part 1) alone, e.g. for bench_engine_bench --peak-gflops */
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/numerics.h"
#include "util/util.h"

static int QUICK;
static const char *ONLY; /* --only f32,bf16: prefill formats to run (default all) */
static int PEAK_ONLY;    /* --peak-only: the FMA peak lines, nothing else */

static int wanted(drift_dtype t) {
    if (!ONLY) return 1;
    const char *name = drift_dtype_name(t), *p = ONLY;
    size_t n = strlen(name);
    while ((p = strstr(p, name))) {
        if ((p == ONLY || p[-1] == ',') && (p[n] == 0 || p[n] == ',')) return 1;
        p += n;
    }
    return 0;
}

/* ---- FMA peak ---- */
__attribute__((target("avx512f"))) static float fma_loop_512(long iters) {
    __m512 a[12];
    __m512 b = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-6f);
    for (int j = 0; j < 12; j++) a[j] = _mm512_set1_ps((float)j);
    for (long i = 0; i < iters; i++) {
#pragma GCC unroll 12
        for (int j = 0; j < 12; j++) a[j] = _mm512_fmadd_ps(a[j], b, c);
    }
    __m512 s = a[0];
    for (int j = 1; j < 12; j++) s = _mm512_add_ps(s, a[j]);
    return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx2,fma"))) static float fma_loop_256(long iters) {
    __m256 a[12];
    __m256 b = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-6f);
    for (int j = 0; j < 12; j++) a[j] = _mm256_set1_ps((float)j);
    for (long i = 0; i < iters; i++) {
#pragma GCC unroll 12
        for (int j = 0; j < 12; j++) a[j] = _mm256_fmadd_ps(a[j], b, c);
    }
    float out[8], s = 0;
    for (int j = 1; j < 12; j++) a[0] = _mm256_add_ps(a[0], a[j]);
    _mm256_storeu_ps(out, a[0]);
    for (int j = 0; j < 8; j++) s += out[j];
    return s;
}

static volatile float SINK;

static double fma_peak_iters(drift_isa isa, int threads, long iters);

static double fma_peak(drift_isa isa, int threads) {
    return fma_peak_iters(isa, threads, QUICK ? 2000000 : 20000000);
}

static double fma_peak_iters(drift_isa isa, int threads, long iters) {
    int lanes = isa == DRIFT_ISA_AVX512 ? 16 : 8;
    double best = 0;
    for (int rep = 0; rep < 6; rep++) { /* rep 0 warms up clocks and the vector units */
        double t0 = util_now_ms();
#pragma omp parallel num_threads(threads)
        {
            float s = isa == DRIFT_ISA_AVX512 ? fma_loop_512(iters) : fma_loop_256(iters);
#pragma omp critical
            SINK += s;
        }
        double s = (util_now_ms() - t0) / 1e3;
        double gf = (double)iters * 12 * lanes * 2 * threads / s / 1e9;
        if (rep > 0 && gf > best) best = gf;
    }
    return best;
}

/* ---- bandwidth ---- */
/* Streams n doubles through 4 independent vector adds (never compute-bound). */
__attribute__((target("avx2"))) static double read_sum(const double *p, size_t n) {
    __m256d s0 = _mm256_setzero_pd(), s1 = s0, s2 = s0, s3 = s0;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_add_pd(s0, _mm256_loadu_pd(p + i));
        s1 = _mm256_add_pd(s1, _mm256_loadu_pd(p + i + 4));
        s2 = _mm256_add_pd(s2, _mm256_loadu_pd(p + i + 8));
        s3 = _mm256_add_pd(s3, _mm256_loadu_pd(p + i + 12));
    }
    double o[4];
    _mm256_storeu_pd(o, _mm256_add_pd(_mm256_add_pd(s0, s1), _mm256_add_pd(s2, s3)));
    return o[0] + o[1] + o[2] + o[3];
}

static void bandwidth(int threads, double *copy_gbs, double *read_gbs) {
    size_t n = (QUICK ? 64u : 256u) << 20; /* bytes per buffer */
    char *a = malloc(n), *b = malloc(n);
    if (!a || !b) {
        *copy_gbs = *read_gbs = 0;
        free(a), free(b);
        return;
    }
    memset(a, 1, n);
    memset(b, 2, n);
    double bc = 0, br = 0;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = util_now_ms();
#pragma omp parallel num_threads(threads)
        {
            int t = omp_get_thread_num(), nt = omp_get_num_threads();
            size_t chunk = n / (size_t)nt;
            memcpy(b + t * chunk, a + t * chunk, chunk);
        }
        double s = (util_now_ms() - t0) / 1e3;
        if (2.0 * n / s / 1e9 > bc) bc = 2.0 * n / s / 1e9;
        t0 = util_now_ms();
        double tot = 0;
#pragma omp parallel num_threads(threads) reduction(+ : tot)
        {
            int t = omp_get_thread_num(), nt = omp_get_num_threads();
            size_t chunk = n / (size_t)nt / sizeof(double);
            tot += read_sum((const double *)a + t * chunk, chunk);
        }
        SINK += (float)tot;
        s = (util_now_ms() - t0) / 1e3;
        if ((double)n / s / 1e9 > br) br = (double)n / s / 1e9;
    }
    *copy_gbs = bc;
    *read_gbs = br;
    free(a), free(b);
}

/* ---- matmul ---- */
static double time_matmul(const drift_numeric_profile *p, const num_qmat *W, const float *x,
                          float *y, int64_t B, int reps) {
    double best = 1e30;
    drift_error err;
    for (int r = 0; r < reps; r++) {
        double t0 = util_now_ms();
        if (num_fast_matmul(p, y, x, W, B, &err)) {
            fprintf(stderr, "matmul: %s\n", err.msg);
            exit(2);
        }
        double s = (util_now_ms() - t0) / 1e3;
        if (s < best) best = s;
    }
    return best;
}

static float *rand_buf(size_t n, uint64_t seed) {
    float *v = malloc(n * sizeof(float));
    if (!v) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    util_rng r;
    util_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) v[i] = (float)(util_rng_uniform(&r) - 0.5);
    return v;
}

int main(int argc, char **argv) {
    int max_threads = 2;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) QUICK = 1;
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) max_threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) ONLY = argv[++i];
        else if (!strcmp(argv[i], "--peak-only")) PEAK_ONLY = 1;
    }
    if (max_threads < 1) max_threads = 1;
    drift_isa isa = num_isa_resolve(DRIFT_ISA_AUTO);
    char when[32];
    util_utc_iso(when);
    printf("kernels_bench  %s  isa=%s  omp_max_threads=%d\n", when, num_isa_name(isa),
           omp_get_max_threads());

    int nthr[2] = {1, max_threads};
    int nn = max_threads > 1 ? 2 : 1;
    double peak[2], copy[2], rd[2];
    for (int t = 0; t < nn; t++) {
        peak[t] = fma_peak(isa == DRIFT_ISA_SCALAR ? DRIFT_ISA_AVX2 : isa, nthr[t]);
        if (PEAK_ONLY) {
            printf("threads=%d  FMA peak %.1f GFLOP/s\n", nthr[t], peak[t]);
            continue;
        }
        bandwidth(nthr[t], &copy[t], &rd[t]);
        printf("threads=%d  FMA peak %.1f GFLOP/s   copy %.1f GB/s   read %.1f GB/s\n", nthr[t],
               peak[t], copy[t], rd[t]);
    }
    if (PEAK_ONLY) return 0;

    /* prefill */
    int64_t K = 1024, N = QUICK ? 512 : 2048;
    static const int64_t BS[] = {64, 128, 256, 512};
    float *w = rand_buf((size_t)(N * K), 1), *x = rand_buf((size_t)(512 * K), 2);
    float *y = malloc((size_t)(512 * N) * sizeof(float));
    drift_error err;
    printf("\nprefill matmul  N=%lld K=%lld\n", (long long)N, (long long)K);
    printf("%-9s %-7s %5s %10s %8s %11s %8s\n", "weights", "threads", "B", "GFLOP/s", "of peak",
           "peak now", "of now");
    static const drift_dtype PF[] = {DRIFT_DTYPE_F32, DRIFT_DTYPE_BF16, DRIFT_DTYPE_F16,
                                     DRIFT_DTYPE_FP8_E4M3, DRIFT_DTYPE_INT8, DRIFT_DTYPE_INT4,
                                     DRIFT_DTYPE_MXFP4, DRIFT_DTYPE_NVFP4, DRIFT_DTYPE_Q8_0,
                                     DRIFT_DTYPE_Q4_0, DRIFT_DTYPE_F32};
    /* f32 runs again last: a drop there means the machine changed under us */
    for (size_t fi = 0; fi < sizeof PF / sizeof PF[0]; fi++) {
        if (!wanted(PF[fi])) continue;
        num_qmat W;
        if (num_qmat_quantize(&W, PF[fi], w, N, K, 32, DRIFT_SCALE_PER_CHANNEL, &err)) {
            fprintf(stderr, "%s\n", err.msg);
            return 2;
        }
        for (int t = 0; t < nn; t++)
            for (size_t bi = 0; bi < 4; bi++) {
                int64_t B = BS[bi];
                if (fi >= 2 && B != 256) continue; /* other formats: one shape */
                if (fi == sizeof PF / sizeof PF[0] - 1 && B != 256) continue;
                drift_numeric_profile p;
                drift_profile_parse(NULL, &p, &err);
                p.threads = nthr[t];
                /* the machine is shared: the peak is re-measured next to each point */
                double pk = fma_peak_iters(isa == DRIFT_ISA_SCALAR ? DRIFT_ISA_AVX2 : isa, nthr[t],
                                           QUICK ? 500000 : 4000000);
                double s = time_matmul(&p, &W, x, y, B, QUICK ? 2 : 5);
                double gf = 2.0 * (double)B * (double)N * (double)K / s / 1e9;
                printf("%-9s %-7d %5lld %10.1f %7.0f%% %11.1f %7.0f%%\n", drift_dtype_name(PF[fi]),
                       nthr[t], (long long)B, gf, 100 * gf / peak[t], pk, 100 * gf / pk);
            }
        num_qmat_free(&W);
    }
    free(w), free(x), free(y);

    /* decode: B = 1 over a matrix much bigger than the caches */
    int64_t DN = QUICK ? 4096 : 8192, DK = 4096;
    float *wd = rand_buf((size_t)(DN * DK), 3), *xd = rand_buf((size_t)DK, 4);
    float *yd = malloc((size_t)DN * sizeof(float));
    printf("\ndecode matvec  N=%lld K=%lld (f32 matrix %.0f MB)\n", (long long)DN, (long long)DK,
           (double)DN * DK * 4 / 1e6);
    printf("%-9s %-7s %9s %9s %9s %9s\n", "weights", "threads", "MB", "GB/s", "of copy",
           "of read");
    static const drift_dtype DF[] = {DRIFT_DTYPE_F32, DRIFT_DTYPE_BF16, DRIFT_DTYPE_F16,
                                     DRIFT_DTYPE_FP8_E4M3, DRIFT_DTYPE_INT8, DRIFT_DTYPE_Q8_0,
                                     DRIFT_DTYPE_Q4_0};
    for (size_t fi = 0; fi < sizeof DF / sizeof DF[0]; fi++) {
        num_qmat W;
        if (num_qmat_quantize(&W, DF[fi], wd, DN, DK, 32, DRIFT_SCALE_PER_CHANNEL, &err)) {
            fprintf(stderr, "%s\n", err.msg);
            return 2;
        }
        double bytes = (double)W.row_bytes * (double)DN + (W.scales ? (double)DN * 4 : 0);
        for (int t = 0; t < nn; t++) {
            drift_numeric_profile p;
            drift_profile_parse(NULL, &p, &err);
            p.threads = nthr[t];
            double s = time_matmul(&p, &W, xd, yd, 1, QUICK ? 3 : 6);
            double gbs = bytes / s / 1e9;
            printf("%-9s %-7d %9.1f %9.1f %8.0f%% %8.0f%%\n", drift_dtype_name(DF[fi]), nthr[t],
                   bytes / 1e6, gbs, 100 * gbs / copy[t], 100 * gbs / rd[t]);
        }
        num_qmat_free(&W);
    }
    free(wd), free(xd), free(yd);

    /* 5. the lab's hardware levels (hardware=NAME): their dot products
     * against the baseline's kernels (hardware=avx2) at a small model's
     * shapes, decode (B = 1) and a prefill block (B = 32), f32 weights */
    int64_t HK = 512, HN = 1536;
    float *wh = rand_buf((size_t)(HN * HK), 5), *xh = rand_buf((size_t)(32 * HK), 6);
    float *yh = malloc((size_t)(32 * HN) * sizeof(float));
    num_qmat WH;
    if (num_qmat_quantize(&WH, DRIFT_DTYPE_F32, wh, HN, HK, 32, DRIFT_SCALE_PER_CHANNEL, &err)) return 2;
    printf("\nhardware levels  N=%lld K=%lld, 1 thread (x baseline = time / hardware=avx2's)\n", (long long)HN, (long long)HK);
    printf("%-18s %5s %10s %12s\n", "hardware", "B", "GFLOP/s", "x baseline");
    for (int64_t B = 1; B <= 32; B += 31) {
        double base = 0;
        for (size_t i = 0; i < drift_profile_preset_count(DRIFT_AXIS_HARDWARE); i++) {
            char spec[96];
            snprintf(spec, sizeof spec, "hardware=%s&threads=1", drift_profile_preset_name(DRIFT_AXIS_HARDWARE, i));
            drift_numeric_profile p;
            if (drift_profile_parse(spec, &p, &err)) {
                fprintf(stderr, "%s\n", err.msg);
                return 2;
            }
            double s = time_matmul(&p, &WH, xh, yh, B, QUICK ? 5 : 20);
            if (i == 0) base = s;
            printf("%-18s %5lld %10.2f %12.2f\n", drift_profile_preset_name(DRIFT_AXIS_HARDWARE, i), (long long)B,
                   2.0 * (double)B * (double)HN * (double)HK / s / 1e9, s / base);
        }
    }
    num_qmat_free(&WH);
    free(wh), free(xh), free(yh);
    return 0;
}
