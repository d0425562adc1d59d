/* test_formats.c - number formats against known bit patterns and bounds.
 *
 * f16/bf16: known encodings incl. subnormals, RNE ties, overflow, NaN/Inf.
 * fp8 e4m3/e5m2, fp4 e2m1: every code decodes and re-encodes to itself
 * (exhaustive), ties round to even, saturation/inf at the top.
 * Quantize -> dequantize of every format stays within its error bound,
 * checked element by element against the float64 value; GGUF blocks have
 * ggml's exact layout (hand-built block decoded). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/numerics.h"
#include "util/util.h"

static float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

#define EXPECT_HEX(got, want)                                                              \
    do {                                                                                   \
        unsigned g_ = (unsigned)(got), w_ = (unsigned)(want);                              \
        if (g_ != w_) fail_msg("%s: got 0x%x want 0x%x", #got, g_, w_);                   \
    } while (0)

static void test_bf16(void **state) {
    (void)state;
    EXPECT_HEX(num_f32_to_bf16(1.0f), 0x3f80);
    EXPECT_HEX(num_f32_to_bf16(-2.0f), 0xc000);
    EXPECT_HEX(num_f32_to_bf16(u2f(0x3f808000)), 0x3f80); /* tie -> even */
    EXPECT_HEX(num_f32_to_bf16(u2f(0x3f818000)), 0x3f82); /* tie -> even (up) */
    EXPECT_HEX(num_f32_to_bf16(u2f(0x3f808001)), 0x3f81); /* above tie */
    EXPECT_HEX(num_f32_to_bf16(u2f(0x3f807fff)), 0x3f80);
    EXPECT_HEX(num_f32_to_bf16(INFINITY), 0x7f80);
    EXPECT_HEX(num_f32_to_bf16(-INFINITY), 0xff80);
    EXPECT_HEX(num_f32_to_bf16(u2f(0x7f7fffff)), 0x7f80); /* FLT_MAX rounds to inf */
    EXPECT_HEX(num_f32_to_bf16(u2f(0x7fc00000)), 0x7fc0);
    EXPECT_HEX(num_f32_to_bf16(u2f(0x7f800001)), 0x7fc0); /* sNaN stays NaN (quiet) */
    EXPECT_HEX(num_f32_to_bf16(u2f(0x00008000)), 0x0000); /* subnormal tie -> even */
    EXPECT_HEX(num_f32_to_bf16(u2f(0x00018000)), 0x0002);
    EXPECT_HEX(num_f32_to_bf16(u2f(0x80010000)), 0x8001); /* negative subnormal */
    assert_true(num_bf16_to_f32(0x3f80) == 1.0f);
    assert_true(isnan(num_bf16_to_f32(0x7fc1)));
    EXPECT_HEX(f2u(num_bf16_to_f32(0x0001)), 0x00010000);
}

static void test_f16(void **state) {
    (void)state;
    EXPECT_HEX(num_f32_to_f16(1.0f), 0x3c00);
    EXPECT_HEX(num_f32_to_f16(-2.0f), 0xc000);
    EXPECT_HEX(num_f32_to_f16(0.1f), 0x2e66);
    EXPECT_HEX(num_f32_to_f16(65504.0f), 0x7bff);
    EXPECT_HEX(num_f32_to_f16(65519.0f), 0x7bff);
    EXPECT_HEX(num_f32_to_f16(65520.0f), 0x7c00); /* tie at the top rounds to inf */
    EXPECT_HEX(num_f32_to_f16(1e10f), 0x7c00);
    EXPECT_HEX(num_f32_to_f16(-INFINITY), 0xfc00);
    EXPECT_HEX(num_f32_to_f16(NAN) & 0x7fff, 0x7e00);
    EXPECT_HEX(num_f32_to_f16(0x1p-14f), 0x0400);    /* smallest normal */
    EXPECT_HEX(num_f32_to_f16(0x1p-24f), 0x0001);    /* smallest subnormal */
    EXPECT_HEX(num_f32_to_f16(0x1p-25f), 0x0000);    /* tie -> even (0) */
    EXPECT_HEX(num_f32_to_f16(0x1.8p-24f), 0x0002);  /* 1.5 units: tie -> even (2) */
    EXPECT_HEX(num_f32_to_f16(0x1.8p-25f), 0x0001);  /* 0.75 units */
    EXPECT_HEX(num_f32_to_f16(0x1.ffcp-15f), 0x0400); /* rounds up into the normals */
    EXPECT_HEX(num_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);       /* tie -> even */
    EXPECT_HEX(num_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);   /* tie -> even (up) */
    EXPECT_HEX(num_f32_to_f16(-0.0f), 0x8000);
    assert_true(num_f16_to_f32(0x0001) == 0x1p-24f);
    assert_true(num_f16_to_f32(0x7bff) == 65504.0f);
    assert_true(num_f16_to_f32(0xfc00) == -INFINITY);
    assert_true(isnan(num_f16_to_f32(0x7e00)));
    assert_true(num_f16_to_f32(0x3555) == 0x1.554p-2f);
    /* every f16 code round-trips through f32 */
    for (uint32_t h = 0; h < 65536; h++) {
        float f = num_f16_to_f32((uint16_t)h);
        if (isnan(f)) continue;
        if (num_f32_to_f16(f) != h) fail_msg("f16 0x%04x -> %g -> 0x%04x", h, f, num_f32_to_f16(f));
    }
}

static void test_e4m3(void **state) {
    (void)state;
    EXPECT_HEX(num_f32_to_e4m3(1.0f), 0x38);
    EXPECT_HEX(num_f32_to_e4m3(448.0f), 0x7e);
    EXPECT_HEX(num_f32_to_e4m3(480.0f), 0x7e);   /* saturates */
    EXPECT_HEX(num_f32_to_e4m3(1e9f), 0x7e);
    EXPECT_HEX(num_f32_to_e4m3(-INFINITY), 0xfe);
    EXPECT_HEX(num_f32_to_e4m3(NAN) & 0x7f, 0x7f);
    EXPECT_HEX(num_f32_to_e4m3(0x1p-9f), 0x01);  /* smallest subnormal */
    EXPECT_HEX(num_f32_to_e4m3(0x1p-10f), 0x00); /* tie -> even (0) */
    EXPECT_HEX(num_f32_to_e4m3(0x1.8p-9f), 0x02); /* 1.5 units: tie -> 2 */
    EXPECT_HEX(num_f32_to_e4m3(0x1p-6f), 0x08);  /* smallest normal */
    EXPECT_HEX(num_f32_to_e4m3(16.0f), 0x58);
    EXPECT_HEX(num_f32_to_e4m3(17.0f), 0x58);    /* tie between 16 and 18 -> 16 */
    EXPECT_HEX(num_f32_to_e4m3(19.0f), 0x5a);    /* tie between 18 and 20 -> 20 */
    EXPECT_HEX(num_f32_to_e4m3(-0.3f), 0xaa);    /* 0.3 -> 0.3125 = 1.25*2^-2 */
    assert_true(num_e4m3_to_f32(0x7e) == 448.0f);
    assert_true(num_e4m3_to_f32(0x01) == 0x1p-9f);
    assert_true(isnan(num_e4m3_to_f32(0x7f)) && isnan(num_e4m3_to_f32(0xff)));
    int n_finite = 0;
    for (int c = 0; c < 256; c++) {
        float f = num_e4m3_to_f32((uint8_t)c);
        if (isnan(f)) continue;
        n_finite++;
        assert_false(isinf(f));
        EXPECT_HEX(num_f32_to_e4m3(f), c);
        /* midpoint to the next code rounds to the even one of the two */
        if ((c & 0x7f) < 0x7e) {
            float g = num_e4m3_to_f32((uint8_t)(c + 1));
            uint8_t mid = num_f32_to_e4m3((f + g) / 2);
            assert_true(mid == c || mid == c + 1);
            assert_int_equal(mid & 1, 0);
        }
    }
    assert_int_equal(n_finite, 254);
}

static void test_e5m2(void **state) {
    (void)state;
    EXPECT_HEX(num_f32_to_e5m2(1.0f), 0x3c);
    EXPECT_HEX(num_f32_to_e5m2(57344.0f), 0x7b);
    EXPECT_HEX(num_f32_to_e5m2(60000.0f), 0x7b);
    EXPECT_HEX(num_f32_to_e5m2(61440.0f), 0x7c);  /* tie above max -> inf (IEEE) */
    EXPECT_HEX(num_f32_to_e5m2(INFINITY), 0x7c);
    EXPECT_HEX(num_f32_to_e5m2(-INFINITY), 0xfc);
    EXPECT_HEX(num_f32_to_e5m2(NAN) & 0x7f, 0x7e);
    EXPECT_HEX(num_f32_to_e5m2(0x1p-16f), 0x01);
    EXPECT_HEX(num_f32_to_e5m2(0x1p-17f), 0x00);
    EXPECT_HEX(num_f32_to_e5m2(1.125f), 0x3c);    /* tie 1 / 1.25 -> 1 */
    EXPECT_HEX(num_f32_to_e5m2(1.375f), 0x3e);    /* tie 1.25 / 1.5 -> 1.5 */
    for (int c = 0; c < 256; c++) {
        float f = num_e5m2_to_f32((uint8_t)c);
        float h = num_f16_to_f32((uint16_t)(c << 8)); /* e5m2 is the top byte of f16 */
        if (isnan(h)) {
            assert_true(isnan(f));
            continue;
        }
        assert_true(f == h);
        EXPECT_HEX(num_f32_to_e5m2(f), c);
    }
}

static void test_e2m1_e8m0(void **state) {
    (void)state;
    static const float vals[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
    for (int c = 0; c < 16; c++) {
        float want = (c & 8) ? -vals[c & 7] : vals[c & 7];
        assert_true(num_e2m1_to_f32((uint8_t)c) == want);
        EXPECT_HEX(num_f32_to_e2m1(want), c);
    }
    EXPECT_HEX(num_f32_to_e2m1(5.0f), 0x6);   /* tie 4/6 -> 4 (even) */
    EXPECT_HEX(num_f32_to_e2m1(2.5f), 0x4);   /* tie 2/3 -> 2 */
    EXPECT_HEX(num_f32_to_e2m1(0.25f), 0x0);  /* tie 0/0.5 -> 0 */
    EXPECT_HEX(num_f32_to_e2m1(0.75f), 0x2);  /* tie 0.5/1 -> 1 */
    EXPECT_HEX(num_f32_to_e2m1(7.0f), 0x7);   /* saturates at 6 */
    EXPECT_HEX(num_f32_to_e2m1(-100.0f), 0xf);
    EXPECT_HEX(num_f32_to_e2m1(-1.5f), 0xb);
    EXPECT_HEX(num_e8m0_from_amax(6.0f, 2), 127);   /* floor(log2 6) - 2 = 0 */
    EXPECT_HEX(num_e8m0_from_amax(1.0f, 2), 125);
    EXPECT_HEX(num_e8m0_from_amax(7.99f, 2), 127);
    EXPECT_HEX(num_e8m0_from_amax(8.0f, 2), 128);
    EXPECT_HEX(num_e8m0_from_amax(0.0f, 2), 0);
    assert_true(num_e8m0_to_f32(127) == 1.0f);
    assert_true(num_e8m0_to_f32(0) == 0x1p-127f);
    assert_true(isnan(num_e8m0_to_f32(255)));
}

static void test_fast_exp(void **state) {
    (void)state;
    double worst = 0;
    for (double x = -87.0; x <= 88.0; x += 0.001953125 * 7.3) {
        double want = exp((double)(float)x);
        double got = num_exp_fast((float)x);
        double rel = fabs(got - want) / want;
        if (rel > worst) worst = rel;
    }
    if (worst > 4e-7) fail_msg("fast exp worst rel err %g", worst);
    assert_true(num_exp_fast(0.0f) == 1.0f);
    assert_true(num_exp_fast(-100.0f) == 0.0f);
    assert_true(isinf(num_exp_fast(100.0f)));
    assert_true(isnan(num_exp_fast(NAN)));
}

/* quantize -> dequantize error bound per element, vs the float64 input */
static void check_roundtrip(drift_dtype t, int group, drift_scale_mode mode) {
    enum { R = 8, C = 256 };
    static float src[R * C], back[C];
    util_rng rng;
    util_rng_seed(&rng, 42 + (uint64_t)t);
    for (int i = 0; i < R * C; i++) {
        /* normal-ish values of varied magnitude per row, some exact zeros */
        double u1 = util_rng_uniform(&rng) + 1e-12, u2 = util_rng_uniform(&rng);
        double g = sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
        src[i] = (i % 97 == 0) ? 0.0f : (float)(g * pow(10.0, (i / C) - 3));
    }
    num_qmat m;
    drift_error err;
    assert_int_equal(num_qmat_quantize(&m, t, src, R, C, group, mode, &err), DRIFT_OK);
    const num_traits *tr = num_traits_of(t);
    assert_non_null(tr);
    assert_int_equal(m.row_bytes, num_row_bytes(t, C));
    double se = 0, ss = 0;
    for (int r = 0; r < R; r++) {
        num_qmat_dequantize_row(&m, r, back);
        const float *x = src + r * C;
        for (int c = 0; c < C; c++) {
            double e = fabs((double)back[c] - (double)x[c]), a = fabs((double)x[c]);
            se += e * e;
            ss += a * a;
            double bound;
            int g0 = (c / 32) * 32, g16 = (c / 16) * 16;
            float amax_row = 0, amax_g = 0, amax16 = 0;
            for (int k = 0; k < C; k++) amax_row = fmaxf(amax_row, fabsf(x[k]));
            for (int k = g0; k < g0 + 32; k++) amax_g = fmaxf(amax_g, fabsf(x[k]));
            for (int k = g16; k < g16 + 16; k++) amax16 = fmaxf(amax16, fabsf(x[k]));
            switch (t) {
            case DRIFT_DTYPE_F32: bound = 0; break;
            case DRIFT_DTYPE_BF16: bound = a * 0x1p-8; break;
            case DRIFT_DTYPE_F16: bound = fmax(a * 0x1p-11, 0x1p-25); break;
            case DRIFT_DTYPE_FP8_E4M3: {
                double s = mode == DRIFT_SCALE_PER_TENSOR ? m.tensor_scale : amax_row / 448.0;
                bound = fmax(a * 0x1p-4, s * 0x1p-10) * 1.0001;
                break;
            }
            case DRIFT_DTYPE_FP8_E5M2: {
                double s = amax_row / 57344.0;
                bound = fmax(a * 0x1p-3, s * 0x1p-17) * 1.0001;
                break;
            }
            case DRIFT_DTYPE_INT8: bound = amax_row / 127.0 * 0.5001; break;
            case DRIFT_DTYPE_INT4: {
                int gg = (c / group) * group;
                float am = 0;
                for (int k = gg; k < gg + group; k++) am = fmaxf(am, fabsf(x[k]));
                bound = am / 7.0 * 0.5001;
                break;
            }
            case DRIFT_DTYPE_MXFP4: {
                double s = ldexp(1.0, (int)floor(log2(amax_g)) - 2);
                bound = fmax(fmax(a * 0.25, 0.25 * s), a - 6 * s) * 1.0001;
                break;
            }
            case DRIFT_DTYPE_NVFP4: {
                double s = num_e4m3_to_f32(num_f32_to_e4m3(amax16 / 6.0f / m.tensor_scale)) *
                           (double)m.tensor_scale;
                bound = fmax(fmax(a * 0.25, 0.25 * s), a - 6 * s) * 1.0001 + 1e-30;
                break;
            }
            case DRIFT_DTYPE_Q8_0: { /* rounds with f32 d, decodes with f16 d */
                float dq = amax_g / 127.0f;
                double d16 = num_f16_to_f32(num_f32_to_f16(dq));
                bound = 0.5001 * dq + 127 * fabs(dq - d16);
                break;
            }
            case DRIFT_DTYPE_Q4_0: {
                float dq = amax_g / 8.0f;
                double d16 = num_f16_to_f32(num_f32_to_f16(dq));
                bound = 1.0001 * dq + 8 * fabs(dq - d16);
                break;
            }
            default: bound = 0;
            }
            if (e > bound)
                fail_msg("%s row %d col %d: x=%.9g back=%.9g err %.3g > bound %.3g", tr->name, r,
                         c, x[c], back[c], e, bound);
        }
    }
    /* normalized MSE sanity: quantization noise is nonzero for lossy formats */
    double nmse = se / ss;
    if (t == DRIFT_DTYPE_F32) assert_true(nmse == 0);
    else assert_true(nmse > 0 && nmse < 0.05);
    num_qmat_free(&m);
}

static void test_roundtrip_all(void **state) {
    (void)state;
    for (int t = 0; t < DRIFT_DTYPE_COUNT; t++)
        check_roundtrip((drift_dtype)t, 32, DRIFT_SCALE_PER_CHANNEL);
    check_roundtrip(DRIFT_DTYPE_INT4, 128, DRIFT_SCALE_PER_CHANNEL);
    check_roundtrip(DRIFT_DTYPE_FP8_E4M3, 0, DRIFT_SCALE_PER_TENSOR);
}

/* GGUF blocks: hand-built bytes in ggml's layout decode to the right values */
static void test_gguf_blocks(void **state) {
    (void)state;
    uint8_t q8[34], q4[18];
    uint16_t d = num_f32_to_f16(0.5f);
    memcpy(q8, &d, 2);
    for (int j = 0; j < 32; j++) q8[2 + j] = (uint8_t)(int8_t)(j - 16);
    memcpy(q4, &d, 2);
    for (int j = 0; j < 16; j++) q4[2 + j] = (uint8_t)(j | ((15 - j) << 4));
    num_qmat m;
    drift_error err;
    float out[32];
    assert_int_equal(num_qmat_wrap(&m, DRIFT_DTYPE_Q8_0, q8, 1, 32, &err), DRIFT_OK);
    num_qmat_dequantize_row(&m, 0, out);
    for (int j = 0; j < 32; j++) assert_true(out[j] == (float)(j - 16) * 0.5f);
    assert_int_equal(num_qmat_wrap(&m, DRIFT_DTYPE_Q4_0, q4, 1, 32, &err), DRIFT_OK);
    num_qmat_dequantize_row(&m, 0, out);
    for (int j = 0; j < 16; j++) {
        assert_true(out[j] == (float)(j - 8) * 0.5f);           /* low nibbles first */
        assert_true(out[j + 16] == (float)(15 - j - 8) * 0.5f); /* then high nibbles */
    }
    /* ggml's Q4_0 quantizer: d = max/-8 where max is the signed extreme */
    float x[32];
    for (int j = 0; j < 32; j++) x[j] = (float)j - 8.0f; /* extreme +23 */
    assert_int_equal(num_qmat_quantize(&m, DRIFT_DTYPE_Q4_0, x, 1, 32, 0, 0, &err), DRIFT_OK);
    uint16_t dd;
    memcpy(&dd, m.data, 2);
    assert_true(num_f16_to_f32(dd) == num_f16_to_f32(num_f32_to_f16(23.0f / -8.0f)));
    num_qmat_free(&m);
    /* wrapping refuses formats that need side scales; bad shapes are errors */
    assert_int_equal(num_qmat_wrap(&m, DRIFT_DTYPE_INT4, q4, 1, 32, &err), DRIFT_ERR_INVALID);
    assert_int_equal(num_qmat_wrap(&m, DRIFT_DTYPE_Q8_0, q8, 1, 31, &err), DRIFT_ERR_INVALID);
    assert_non_null(strstr(err.msg, "multiple of 32"));
}

static void test_acts_kv(void **state) {
    (void)state;
    float x[40], y[40], z[40];
    for (int i = 0; i < 40; i++) x[i] = sinf((float)i) * 3.0f;
    memcpy(y, x, sizeof x);
    num_round_acts(DRIFT_DTYPE_BF16, y, 40);
    for (int i = 0; i < 40; i++) assert_true(y[i] == num_bf16_to_f32(num_f32_to_bf16(x[i])));
    memcpy(y, x, sizeof x);
    num_round_acts(DRIFT_DTYPE_FP8_E4M3, y, 40);
    float amax = 0;
    for (int i = 0; i < 40; i++) amax = fmaxf(amax, fabsf(x[i]));
    for (int i = 0; i < 40; i++) assert_true(fabsf(y[i] - x[i]) <= fmaxf(fabsf(x[i]) / 16, amax / 448 / 1024) * 1.001f);
    /* KV vectors: fp8 keeps a scale, f16 exact for f16 values */
    uint8_t buf[4 + 40 * 4];
    for (int t = 0; t < 5; t++) {
        drift_dtype kt = (drift_dtype[]){DRIFT_DTYPE_F32, DRIFT_DTYPE_F16, DRIFT_DTYPE_BF16,
                                         DRIFT_DTYPE_FP8_E4M3, DRIFT_DTYPE_FP8_E5M2}[t];
        assert_true(num_kv_bytes(kt, 40) <= sizeof buf);
        num_kv_store(kt, buf, x, 40);
        num_kv_load(kt, z, buf, 40);
        memcpy(y, x, sizeof x);
        num_round_acts(kt, y, 40); /* same rounding as activations */
        for (int i = 0; i < 40; i++)
            if (z[i] != y[i]) fail_msg("kv %s [%d]: %g vs %g", drift_dtype_name(kt), i, z[i], y[i]);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16),        cmocka_unit_test(test_f16),
        cmocka_unit_test(test_e4m3),        cmocka_unit_test(test_e5m2),
        cmocka_unit_test(test_e2m1_e8m0),   cmocka_unit_test(test_fast_exp),
        cmocka_unit_test(test_roundtrip_all), cmocka_unit_test(test_gguf_blocks),
        cmocka_unit_test(test_acts_kv),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
