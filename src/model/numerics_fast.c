/* numerics_fast.c - the narrow-float encoders and activation rounding, in
 * integer bit arithmetic (and AVX2 where the CPU has it), with the bits of
 * numerics.c's reference forms (minifloat_encode, num_round_acts_ref).
 *
 * An fp8/fp4 encode of |x| (f32 bits a) is, with m mantissa bits and bias b:
 *   - NaN (a > 0x7f800000): the format's NaN code, signed (e2m1 has none: 0);
 *   - a normal of the format (a >= 2^(1-b)): round to nearest even on the top
 *     m mantissa bits by one integer add (a carry moves the exponent, as the
 *     reference's "qi == 2^(m+1)" step does); past the largest finite value
 *     (f32 infinity included) the code saturates (e4m3, e2m1) or is infinity
 *     (e5m2); the code is the rounded bits with the exponent rebiased;
 *   - below it, a subnormal: |x| + 2^(1-b-m+23) rounds |x| to a multiple of
 *     the subnormal step 2^(1-b-m) in the FPU's rounding mode (the
 *     reference's nearbyintf), and the low bits of the sum are the code (the
 *     step count 2^m is the smallest normal's code);
 *   - the sign bit on top (so -0 and values that round to 0 keep their sign).
 * Rounding to a value (num_round_acts) does the same and keeps the float:
 * the rounded bits are the decoded value, NaN decodes to +NaN.
 * bench/fp8_exhaustive.c checks every one of the 2^32 floats against the
 * reference; tests/ops/test_round_fast.c a structured set and random rows. */
#include "model/cpu_features.h"
#include "model/numerics.h"

#include <math.h>
#include <string.h>

static inline uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* one format's constants, all from (m, b, largest finite, overflow code) */
typedef struct mf_fast {
    int mbits;           /* mantissa bits */
    uint32_t min_normal; /* f32 bits of 2^(1-b) */
    uint32_t magic;      /* f32 bits of 2^(1-b-m+23): its ulp is the subnormal step */
    uint32_t max_bits;   /* f32 bits of the largest finite value */
    uint32_t ovf_bits;   /* f32 bits of what overflow gives (max or inf) */
    uint32_t rebias;     /* (127 - b) << m: f32 exponent field -> the format's */
    uint8_t sign_bit, nan_code, ovf_code;
} mf_fast;

#define MF_FAST(m, b, maxb, ovfb, nb, nan, ovf)                                                             \
    {(m), (uint32_t)(128 - (b)) << 23, (uint32_t)(151 - (b) - (m)) << 23, (maxb), (ovfb),                 \
     (uint32_t)(127 - (b)) << (m), (uint8_t)(1u << (nb)), (nan), (ovf)}
static const mf_fast FAST_E4M3 = MF_FAST(3, 7, 0x43e00000u, 0x43e00000u, 7, 0x7f, 0x7e);   /* 448, saturates */
static const mf_fast FAST_E5M2 = MF_FAST(2, 15, 0x47600000u, 0x7f800000u, 7, 0x7e, 0x7c);  /* 57344, inf */
static const mf_fast FAST_E2M1 = MF_FAST(1, 1, 0x40c00000u, 0x40c00000u, 3, 0x00, 0x07);   /* 6, saturates */

/* |x| (f32 bits a, a normal of the format) rounded to nearest even on the
 * top m mantissa bits: f32 bits, above max_bits when it overflows */
static inline uint32_t mf_round_bits(const mf_fast *f, uint32_t a) {
    int sh = 23 - f->mbits;
    return (a + (1u << (sh - 1)) - 1u + ((a >> sh) & 1u)) & ~((1u << sh) - 1u);
}

static inline uint8_t mf_encode(const mf_fast *f, float x) {
    uint32_t u = f2u(x), a = u & 0x7fffffffu;
    uint8_t sign = (u >> 31) ? f->sign_bit : 0;
    if (a > 0x7f800000u) return f->nan_code ? (uint8_t)(sign | f->nan_code) : 0;
    if (a < f->min_normal) /* subnormal: the low bits of |x| + magic count the steps */
        return (uint8_t)(sign | (f2u(u2f(a) + u2f(f->magic)) - f->magic));
    uint32_t r = mf_round_bits(f, a);
    if (r > f->max_bits) return (uint8_t)(sign | f->ovf_code);
    return (uint8_t)(sign | ((r >> (23 - f->mbits)) - f->rebias));
}

uint8_t num_f32_to_e4m3(float f) { return mf_encode(&FAST_E4M3, f); }
uint8_t num_f32_to_e5m2(float f) { return mf_encode(&FAST_E5M2, f); }
uint8_t num_f32_to_e2m1(float f) { return mf_encode(&FAST_E2M1, f); }

/* x rounded to the format and decoded: num_e4m3_to_f32(num_f32_to_e4m3(x)) */
static inline float mf_round_value(const mf_fast *f, float x) {
    uint32_t u = f2u(x), a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return u2f(0x7fc00000u); /* every NaN code decodes to +NaN */
    uint32_t v;
    if (a < f->min_normal) {
        v = f2u((u2f(a) + u2f(f->magic)) - u2f(f->magic));
    } else {
        v = mf_round_bits(f, a);
        if (v > f->max_bits) v = f->ovf_bits;
    }
    return u2f((u & 0x80000000u) | v);
}

float num_round_fp8_value(drift_dtype t, float x) {
    return mf_round_value(t == DRIFT_DTYPE_FP8_E5M2 ? &FAST_E5M2 : &FAST_E4M3, x);
}

static float amax_of(const float *x, int64_t n) {
    float m = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        if (a > m) m = a;
    }
    return m;
}

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SET1(v) _mm256_set1_epi32((int)(v))

/* bf16 rounding of x[0..n), 8 at a time: RNE on the top 16 bits, a NaN kept
 * quiet (0x00400000 set, low half cleared), the rest -- infinities, zeros,
 * subnormals, ties -- by the same integer add. Each of these returns how
 * many it did (a multiple of 8); the caller's scalar loop does the rest. */
__attribute__((target("avx2"))) static int64_t round_bf16_avx2(float *x, int64_t n) {
    const __m256i one = SET1(1), bias = SET1(0x7fff), hi = SET1(0xffff0000u), quiet = SET1(0x00400000),
                  abs = SET1(0x7fffffff), inf = SET1(0x7f800000);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i u = _mm256_loadu_si256((const __m256i *)(const void *)(x + i));
        __m256i r = _mm256_and_si256(_mm256_add_epi32(u, _mm256_add_epi32(bias, _mm256_and_si256(_mm256_srli_epi32(u, 16), one))), hi);
        __m256i q = _mm256_or_si256(_mm256_and_si256(u, hi), quiet);
        __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs), inf); /* |u| <= 0x7fffffff: signed compare is exact */
        _mm256_storeu_si256((__m256i *)(void *)(x + i), _mm256_blendv_epi8(r, q, nan));
    }
    return i;
}

/* fp8: x = mf_round_value(x / s) * s, 8 at a time. The integer compares are
 * signed: |y| <= 0x7fffffff, and a rounded non-NaN stays below 2^31. */
__attribute__((target("avx2"))) static int64_t round_mf_avx2(const mf_fast *f, float *x, int64_t n, float s) {
    const int sh = 23 - f->mbits;
    const __m256i abs = SET1(0x7fffffff), half = SET1((1u << (sh - 1)) - 1u), one = SET1(1),
                  keep = SET1(~((1u << sh) - 1u)), minn = SET1(f->min_normal), maxb = SET1(f->max_bits),
                  ovf = SET1(f->ovf_bits), inf = SET1(0x7f800000), qnan = SET1(0x7fc00000);
    const __m128i cnt = _mm_cvtsi32_si128(sh);
    const __m256 magic = _mm256_castsi256_ps(SET1(f->magic)), vs = _mm256_set1_ps(s);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i u = _mm256_castps_si256(_mm256_div_ps(_mm256_loadu_ps(x + i), vs));
        __m256i a = _mm256_and_si256(u, abs);
        __m256i r = _mm256_and_si256(_mm256_add_epi32(_mm256_add_epi32(a, half), _mm256_and_si256(_mm256_srl_epi32(a, cnt), one)), keep);
        r = _mm256_blendv_epi8(r, ovf, _mm256_cmpgt_epi32(r, maxb));
        __m256 af = _mm256_castsi256_ps(a);
        __m256i sub = _mm256_castps_si256(_mm256_sub_ps(_mm256_add_ps(af, magic), magic));
        __m256i v = _mm256_blendv_epi8(r, sub, _mm256_cmpgt_epi32(minn, a));
        v = _mm256_or_si256(v, _mm256_andnot_si256(abs, u));
        v = _mm256_blendv_epi8(v, qnan, _mm256_cmpgt_epi32(a, inf));
        _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_castsi256_ps(v), vs));
    }
    return i;
}

/* int8: x = clamp(rint(x / s), -127, 127) * s; the compares keep a NaN as
 * the scalar ternaries do, the rounding is the FPU's mode as rintf's */
__attribute__((target("avx2"))) static int64_t round_int8_avx2(float *x, int64_t n, float s) {
    const __m256 vs = _mm256_set1_ps(s), hi = _mm256_set1_ps(127.0f), lo = _mm256_set1_ps(-127.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 q = _mm256_round_ps(_mm256_div_ps(_mm256_loadu_ps(x + i), vs), _MM_FROUND_CUR_DIRECTION);
        q = _mm256_blendv_ps(q, hi, _mm256_cmp_ps(q, hi, _CMP_GT_OQ));
        q = _mm256_blendv_ps(q, lo, _mm256_cmp_ps(q, lo, _CMP_LT_OQ));
        _mm256_storeu_ps(x + i, _mm256_mul_ps(q, vs));
    }
    return i;
}

/* f16 through F16C (RNE, subnormals, overflow to inf as num_f32_to_f16); a
 * NaN becomes the signed quiet NaN num_f32_to_f16 gives (payload dropped) */
__attribute__((target("avx2,f16c"))) static int64_t round_f16_f16c(float *x, int64_t n) {
    const __m256i abs = SET1(0x7fffffff), inf = SET1(0x7f800000), qnan = SET1(0x7fc00000);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        __m256i u = _mm256_castps_si256(v), a = _mm256_and_si256(u, abs);
        __m256i r = _mm256_castps_si256(_mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
        __m256i nan = _mm256_or_si256(qnan, _mm256_andnot_si256(abs, u));
        _mm256_storeu_ps(x + i, _mm256_castsi256_ps(_mm256_blendv_epi8(r, nan, _mm256_cmpgt_epi32(a, inf))));
    }
    return i;
}

/* AVX2 and F16C (num_isa_resolve's avx2 level needs both) */
static int round_avx2_ok(void) {
    static int ok = -1;
    if (ok < 0) ok = num_isa_resolve(DRIFT_ISA_AVX2) == DRIFT_ISA_AVX2;
    return ok;
}
#define VEC(call) (round_avx2_ok() ? (call) : 0)
#else
#define VEC(call) 0
#endif

void num_round_fp8_scaled(drift_dtype t, float *x, int64_t n, float s) {
    const mf_fast *f = t == DRIFT_DTYPE_FP8_E5M2 ? &FAST_E5M2 : &FAST_E4M3;
    for (int64_t i = VEC(round_mf_avx2(f, x, n, s)); i < n; i++) x[i] = mf_round_value(f, x[i] / s) * s;
}

void num_round_acts(drift_dtype t, float *x, int64_t n) {
    switch (t) {
    case DRIFT_DTYPE_BF16:
        for (int64_t i = VEC(round_bf16_avx2(x, n)); i < n; i++) {
            uint32_t u = f2u(x[i]);
            uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u, q = (u & 0xffff0000u) | 0x00400000u;
            x[i] = u2f((u & 0x7fffffffu) > 0x7f800000u ? q : r);
        }
        break;
    case DRIFT_DTYPE_F16:
        for (int64_t i = VEC(round_f16_f16c(x, n)); i < n; i++) x[i] = num_f16_to_f32(num_f32_to_f16(x[i]));
        break;
    case DRIFT_DTYPE_FP8_E4M3:
    case DRIFT_DTYPE_FP8_E5M2: {
        float s = amax_of(x, n) / num_dtype_max(t);
        if (!(s > 0.0f) || isinf(s)) return;
        num_round_fp8_scaled(t, x, n, s);
        break;
    }
    case DRIFT_DTYPE_INT8: { /* dynamic per-row symmetric: s = amax / 127, RNE */
        float s = amax_of(x, n) / 127.0f;
        if (!(s > 0.0f) || isinf(s)) return;
        for (int64_t i = VEC(round_int8_avx2(x, n, s)); i < n; i++) {
            float q = rintf(x[i] / s);
            q = q > 127.0f ? 127.0f : q < -127.0f ? -127.0f : q;
            x[i] = q * s;
        }
        break;
    }
    default:
        break;
    }
}
