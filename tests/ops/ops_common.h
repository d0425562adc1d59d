/* ops_common.h - what the op tests share (tests/ops/test_ops.c, the CPU
 * kernels; tests/ops/test_cuda_ops.c, the GPU's): one seeded generator, normal
 * samples, random vectors, profiles from specs. Include after cmocka.h. */
#ifndef DRIFT_TESTS_OPS_COMMON_H
#define DRIFT_TESTS_OPS_COMMON_H

#include <math.h>
#include <stdlib.h>

#include "driftbench/profile.h"
#include "util/util.h"

static drift_rng RNG;

static float randn(void) {
    double u1 = drift_rng_uniform(&RNG) + 1e-12, u2 = drift_rng_uniform(&RNG);
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

#endif
