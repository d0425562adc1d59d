/* ops_common.h - what the op tests share (tests/ops/test_ops.c, the CPU
 * kernels; tests/ops/test_cuda_ops.c, the GPU's): one seeded generator, normal
 * samples, random vectors, profiles from specs, and the case counting and
 * nmse check every op test prints a line for. Include after cmocka.h; define
 * OPS_WHAT_WIDTH first for another width of the printed case column. */
#ifndef DRIFT_TESTS_OPS_COMMON_H
#define DRIFT_TESTS_OPS_COMMON_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driftbench/profile.h"
#include "util/util.h"

static util_rng RNG;

static float randn(void) {
    double u1 = util_rng_uniform(&RNG) + 1e-12, u2 = util_rng_uniform(&RNG);
    return (float)(sqrt(-2 * log(u1)) * cos(2 * M_PI * u2));
}

static float *rand_vec(int64_t n, float scale) {
    float *v = malloc((size_t)n * sizeof(float));
    assert_non_null(v);
    for (int64_t i = 0; i < n; i++) v[i] = randn() * scale;
    return v;
}

static drift_numeric_profile prof(const char *spec) {
    drift_numeric_profile p;
    drift_error err;
    if (drift_profile_parse(spec, &p, &err)) fail_msg("profile '%s': %s", spec, err.msg);
    return p;
}

#ifndef OPS_WHAT_WIDTH
#define OPS_WHAT_WIDTH 46
#endif

static int n_cases, n_failed;

/* each test counts its own failed cases */
static int reset_failed(void **state) {
    (void)state;
    n_failed = 0;
    return 0;
}

/* NaN/Inf first, then nmse <= tol. Prints one line. */
static void check_nmse(const char *op, const char *what, const float *got, const float *want,
                       int64_t n, double tol) {
    n_cases++;
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(got[i]) && isfinite(want[i])) {
            n_failed++;
            printf("  %-10s %-*s FAIL: non-finite at %lld (%g, ref %g)\n", op, OPS_WHAT_WIDTH, what, (long long)i,
                   got[i], want[i]);
            return;
        }
    double se = 0, ss = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)got[i] - (double)want[i];
        se += d * d;
        ss += (double)want[i] * want[i];
    }
    double nmse = ss > 0 ? se / ss : se;
    int ok = nmse <= tol;
    if (!ok) n_failed++;
    printf("  %-10s %-*s nmse %.3e  tol %.1e  %s\n", op, OPS_WHAT_WIDTH, what, nmse, tol, ok ? "OK" : "FAIL");
}

static int bits_equal(const float *a, const float *b, int64_t n) {
    return memcmp(a, b, (size_t)n * sizeof(float)) == 0;
}

#endif
