/* test_round_fast.c - numerics_fast.c's encoders and activation rounding
 * against numerics.c's definitions (minifloat_encode through frexpf, ldexpf
 * and nearbyintf; num_round_acts_ref), bit for bit:
 *  - a structured set: every f32 exponent with mantissas 0, 1, the top bit,
 *    all ones; for each rounding position of each format (every normal
 *    binade, every subnormal step) the tie, tie - 1 ulp and tie + 1 ulp at
 *    an even and an odd code; the largest finite values, the first that
 *    saturate or overflow; +-0, +-inf, quiet and signalling NaNs with
 *    payloads; each with both signs;
 *  - a few million random bit patterns and random floats near the formats;
 *  - random rows (realistic activations: normal, heavy-tailed outliers,
 *    tiny) through num_round_acts for fp8 e4m3/e5m2, int8, f16 and bf16 at
 *    every length 0..40 (the AVX2 steps and the scalar tail) and at 4096.
 * bench/fp8_exhaustive.c runs the encoders over all 2^32 floats. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/numerics.h"
#include "util/util.h"

static util_rng RNG;

static float randn(void) {
    double u1 = util_rng_uniform(&RNG) + 1e-12, u2 = util_rng_uniform(&RNG);
    return (float)(sqrt(-2 * log(u1)) * cos(2 * M_PI * u2));
}

static uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static int n_checked;

/* one float through every fast form against its definition */
static void check_one(float x) {
    uint8_t c;
    if ((c = num_f32_to_e4m3(x)) != num_f32_to_e4m3_ref(x))
        fail_msg("e4m3 of %a (0x%08x): 0x%02x, reference 0x%02x", x, f2u(x), c, num_f32_to_e4m3_ref(x));
    if ((c = num_f32_to_e5m2(x)) != num_f32_to_e5m2_ref(x))
        fail_msg("e5m2 of %a (0x%08x): 0x%02x, reference 0x%02x", x, f2u(x), c, num_f32_to_e5m2_ref(x));
    if ((c = num_f32_to_e2m1(x)) != num_f32_to_e2m1_ref(x))
        fail_msg("e2m1 of %a (0x%08x): 0x%02x, reference 0x%02x", x, f2u(x), c, num_f32_to_e2m1_ref(x));
    float v = num_round_fp8_value(DRIFT_DTYPE_FP8_E4M3, x), w = num_e4m3_to_f32(num_f32_to_e4m3_ref(x));
    if (f2u(v) != f2u(w)) fail_msg("e4m3 value of %a: %a, reference %a", x, v, w);
    v = num_round_fp8_value(DRIFT_DTYPE_FP8_E5M2, x), w = num_e5m2_to_f32(num_f32_to_e5m2_ref(x));
    if (f2u(v) != f2u(w)) fail_msg("e5m2 value of %a: %a, reference %a", x, v, w);
    n_checked++;
}

/* the rows of xs (n each) through num_round_acts and its reference; for
 * fp8 also num_round_fp8_scaled with scale 1 (the values themselves) */
static void check_rows(drift_dtype t, const float *xs, int64_t n) {
    float *a = malloc((size_t)(n ? n : 1) * 4), *b = malloc((size_t)(n ? n : 1) * 4);
    assert_non_null(a);
    assert_non_null(b);
    memcpy(a, xs, (size_t)n * 4);
    memcpy(b, xs, (size_t)n * 4);
    num_round_acts(t, a, n);
    num_round_acts_ref(t, b, n);
    for (int64_t i = 0; i < n; i++)
        if (f2u(a[i]) != f2u(b[i]))
            fail_msg("%s row of %lld: at %lld, %a -> %a, reference %a", drift_dtype_name(t), (long long)n, (long long)i,
                     xs[i], a[i], b[i]);
    if (t == DRIFT_DTYPE_FP8_E4M3 || t == DRIFT_DTYPE_FP8_E5M2) {
        memcpy(a, xs, (size_t)n * 4);
        num_round_fp8_scaled(t, a, n, 1.0f);
        for (int64_t i = 0; i < n; i++) {
            float w = t == DRIFT_DTYPE_FP8_E4M3 ? num_e4m3_to_f32(num_f32_to_e4m3_ref(xs[i]))
                                                : num_e5m2_to_f32(num_f32_to_e5m2_ref(xs[i]));
            if (f2u(a[i]) != f2u(w)) fail_msg("%s at scale 1: %a -> %a, reference %a", drift_dtype_name(t), xs[i], a[i], w);
        }
    }
    free(a);
    free(b);
}

static const drift_dtype ROW_TYPES[] = {DRIFT_DTYPE_FP8_E4M3, DRIFT_DTYPE_FP8_E5M2, DRIFT_DTYPE_INT8, DRIFT_DTYPE_F16,
                                        DRIFT_DTYPE_BF16};
#define N_ROW_TYPES (sizeof ROW_TYPES / sizeof ROW_TYPES[0])

/* the structured set, collected into set[] (returns the count) */
static int64_t structured(float *set, int64_t cap) {
    int64_t n = 0;
#define PUT(u)                                                                                                         \
    do {                                                                                                               \
        if (n + 2 > cap) fail_msg("structured set over %lld", (long long)cap);                                         \
        set[n++] = u2f((uint32_t)(u) & 0x7fffffffu);                                                                   \
        set[n++] = u2f((uint32_t)(u) | 0x80000000u);                                                                   \
    } while (0)
    for (uint32_t e = 0; e < 256; e++) { /* every exponent (with it inf and NaNs) */
        const uint32_t mant[] = {0, 1, 2, 0x400000u, 0x400001u, 0x7fffffu, 0x3fffffu, 0x200000u};
        for (size_t k = 0; k < sizeof mant / sizeof mant[0]; k++) PUT(e << 23 | mant[k]);
    }
    /* each format's rounding positions: m mantissa bits kept, the smallest
     * normal 2^(1-b); for normals the tie sits at bit 22-m, for subnormals
     * (steps of 2^(1-b-m)) at half a step */
    const struct { int m, b; } fmt[] = {{3, 7}, {2, 15}, {1, 1}, {10, 15}};
    for (size_t f = 0; f < sizeof fmt / sizeof fmt[0]; f++) {
        int m = fmt[f].m, b = fmt[f].b, emin = 1 - b;
        for (int e = emin; e <= b + 1; e++) /* the binades of the normals, and one past the largest */
            for (uint32_t code = 0; code < (1u << m); code++) {
                if (code >= 4 && code + 4 < (1u << m)) continue; /* f16: the first and last codes of a binade */
                uint32_t base = (uint32_t)(e + 127) << 23 | code << (23 - m), tie = base | 1u << (22 - m);
                PUT(base);
                PUT(tie);
                PUT(tie - 1);
                PUT(tie + 1);
                PUT(base + (1u << (23 - m)) - 1); /* just below the next code */
            }
        for (uint32_t k = 0; k <= (1u << m); k++) { /* subnormal steps k * 2^(emin-m), their ties and neighbours */
            if (k >= 8 && k + 8 < (1u << m)) continue;
            float step = ldexpf(1.0f, emin - m), val = (float)k * step, tie = ((float)k + 0.5f) * step;
            PUT(f2u(val));
            PUT(f2u(tie));
            PUT(f2u(tie) - 1);
            PUT(f2u(tie) + 1);
            PUT(f2u(val) - 1);
            PUT(f2u(val) + 1);
        }
    }
    const uint32_t edge[] = {0x00000000u, 0x00000001u, 0x007fffffu, 0x00800000u, 0x7f7fffffu, 0x7f800000u,
                             0x7f800001u, 0x7fa00000u, 0x7fbfffffu, 0x7fc00000u, 0x7fc00001u, 0x7fffffffu,
                             0x43e00000u, 0x43efffffu, 0x43f00000u, 0x43f00001u, 0x43f80000u, 0x47600000u,
                             0x476fffffu, 0x47700000u, 0x47700001u, 0x477fffffu, 0x47800000u, 0x40c00000u,
                             0x40dfffffu, 0x40e00000u, 0x40e00001u, 0x477ff000u, 0x477fefffu, 0x38800000u};
    for (size_t k = 0; k < sizeof edge / sizeof edge[0]; k++) PUT(edge[k]);
#undef PUT
    return n;
}

static void test_structured(void **state) {
    (void)state;
    enum { CAP = 60000 };
    static float set[CAP];
    int64_t n = structured(set, CAP);
    for (int64_t i = 0; i < n; i++) check_one(set[i]);
    /* the same set as rows: scale 1 (fp8) and the dynamic scale of each
     * format, every start and length of an 8-wide step */
    for (size_t t = 0; t < N_ROW_TYPES; t++) {
        check_rows(ROW_TYPES[t], set, n);
        for (int64_t len = 0; len <= 19; len++) check_rows(ROW_TYPES[t], set + 3 * len, len);
    }
    printf("  structured: %lld floats, each through 5 encoders/roundings; rows of %lld\n", (long long)n, (long long)n);
}

static void test_random_bits(void **state) {
    (void)state;
    util_rng_seed(&RNG, 2536);
    enum { N = 4000000 };
    for (int i = 0; i < N; i++) {
        uint32_t u = (uint32_t)(util_rng_uniform(&RNG) * 4294967296.0);
        check_one(u2f(u));
        /* a float in the formats' range: exponent within [2^-20, 2^17) */
        check_one(u2f((u & 0x807fffffu) | (uint32_t)(107 + (u >> 23) % 38) << 23));
    }
    printf("  random: %d floats\n", 2 * N);
}

static void test_rows(void **state) {
    (void)state;
    util_rng_seed(&RNG, 2537);
    enum { L = 4096 };
    float *x = malloc(L * sizeof *x);
    assert_non_null(x);
    int rows = 0;
    for (int r = 0; r < 600; r++) {
        float scale = ldexpf(1.0f, (int)(util_rng_uniform(&RNG) * 40) - 20); /* 2^-20 .. 2^19 */
        for (int i = 0; i < L; i++) {
            float v = randn() * scale;
            if (r % 3 == 1 && i % 97 == 0) v *= 300.0f;                /* outliers: most values far below amax */
            if (r % 5 == 2 && i % 13 == 0) v = ldexpf(v, -30);         /* tiny values: subnormal steps of fp8 */
            if (r % 7 == 3 && i % 64 == 0) v = -0.0f;
            x[i] = v;
        }
        int64_t len = r < 41 ? r : r % 4 ? L : (int64_t)(util_rng_uniform(&RNG) * L);
        for (size_t t = 0; t < N_ROW_TYPES; t++) check_rows(ROW_TYPES[t], x, len);
        rows++;
    }
    /* NaN in a row (the scale skips it; its value is the reference's NaN) */
    for (int i = 0; i < 64; i++) x[i] = randn();
    x[5] = NAN;
    x[17] = -NAN;
    x[40] = u2f(0x7f800123u);
    for (size_t t = 0; t < N_ROW_TYPES; t++) check_rows(ROW_TYPES[t], x, 64);
    free(x);
    printf("  rows: %d random rows through each of %d formats\n", rows, (int)N_ROW_TYPES);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_structured),
        cmocka_unit_test(test_random_bits),
        cmocka_unit_test(test_rows),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    printf("checked %d single floats\n", n_checked);
    return rc;
}
