/* numerics.c - number formats: scalar conversions, the traits table, row
 * quantize/dequantize, quantized matrices, activation rounding, KV vectors.
 *
 * Every narrow float format is encoded by one routine (minifloat_encode):
 * split |x| into exponent and mantissa with frexpf, scale the mantissa to an
 * integer with ldexpf (exact), round it to nearest-even with nearbyintf, and
 * carry into the exponent when it rounds up. Subnormals use the fixed
 * exponent of the smallest normal. Overflow either saturates (e4m3, e2m1) or
 * becomes inf (e5m2, f16). f16 and bf16 use the classic bit-level forms.
 * minifloat_encode is the definition (num_f32_to_*_ref, num_round_acts_ref);
 * numerics_fast.c encodes and rounds activations with the same bits by
 * integer arithmetic (checked over all 2^32 floats: bench/fp8_exhaustive.c).
 *
 * The layouts of the block formats are documented in numerics.h and checked
 * by the static_asserts below. Q8_0 / Q4_0 follow ggml's reference quantizer
 * (so a tensor we quantize matches what llama.cpp would write). */
#include "model/numerics.h"

#include <assert.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- block layouts ---- */
typedef struct num_block_q8_0 { uint16_t d; int8_t qs[32]; } num_block_q8_0;
typedef struct num_block_q4_0 { uint16_t d; uint8_t qs[16]; } num_block_q4_0;
typedef struct num_block_mxfp4 { uint8_t e; uint8_t qs[16]; } num_block_mxfp4;
typedef struct num_block_nvfp4 { uint8_t s; uint8_t qs[8]; } num_block_nvfp4;
static_assert(sizeof(num_block_q8_0) == 34, "Q8_0 block is 34 bytes");
static_assert(sizeof(num_block_q4_0) == 18, "Q4_0 block is 18 bytes");
static_assert(sizeof(num_block_mxfp4) == 17, "MXFP4 block is 17 bytes");
static_assert(sizeof(num_block_nvfp4) == 9, "NVFP4 block is 9 bytes");

static inline uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* ---- f16 / bf16 ---- */
uint16_t num_f32_to_bf16(float f) {
    uint32_t u = f2u(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float num_bf16_to_f32(uint16_t h) { return u2f((uint32_t)h << 16); }

uint16_t num_f32_to_f16(float f) {
    uint32_t x = f2u(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return sign | 0x7e00u;           /* NaN */
    if (ax >= 0x477ff000u) return sign | 0x7c00u;          /* >= 65520 -> inf */
    if (ax >= 0x38800000u) {                               /* normal: >= 2^-14 */
        uint32_t m = ax + 0xfffu + ((ax >> 13) & 1u);
        return (uint16_t)(sign | ((m - 0x38000000u) >> 13));
    }
    /* subnormal: multiples of 2^-24, RNE */
    float a = u2f(ax) * 0x1p24f;
    return (uint16_t)(sign | (uint16_t)nearbyintf(a));
}

float num_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) {
        float v = (float)m * 0x1p-24f;
        return (h & 0x8000u) ? -v : v;
    }
    if (e == 31) return u2f(sign | 0x7f800000u | (m << 13));
    return u2f(sign | ((e + 112u) << 23) | (m << 13));
}

/* ---- minifloats ---- */
typedef struct minifloat {
    int ebits, mbits, bias;
    int saturate;      /* 1: clamp to max code; 0: overflow -> inf code */
    uint8_t max_code;  /* largest finite magnitude code */
    uint8_t nan_code;  /* code for NaN (magnitude) */
    uint8_t inf_code;  /* for !saturate */
} minifloat;

static const minifloat MF_E4M3 = {4, 3, 7, 1, 0x7e, 0x7f, 0};
static const minifloat MF_E5M2 = {5, 2, 15, 0, 0x7b, 0x7e, 0x7c};
static const minifloat MF_E2M1 = {2, 1, 1, 1, 0x7, 0x0, 0};

static uint8_t minifloat_encode(const minifloat *mf, float f) {
    uint8_t sign = signbit(f) ? (uint8_t)(1u << (mf->ebits + mf->mbits)) : 0;
    if (isnan(f)) return mf->nan_code == 0 ? 0 : (uint8_t)(sign | mf->nan_code);
    float a = fabsf(f);
    if (isinf(a)) return (uint8_t)(sign | (mf->saturate ? mf->max_code : mf->inf_code));
    int emin = 1 - mf->bias; /* exponent of the smallest normal */
    int e;
    frexpf(a, &e);
    e -= 1; /* a = 1.xxx * 2^e */
    uint32_t code;
    if (a == 0.0f) {
        code = 0;
    } else if (e < emin) {
        float q = nearbyintf(ldexpf(a, mf->mbits - emin)); /* subnormal */
        code = (uint32_t)q;                               /* q == 2^mbits -> min normal */
    } else {
        float q = nearbyintf(ldexpf(a, mf->mbits - e)); /* in [2^m, 2^(m+1)] */
        uint32_t qi = (uint32_t)q;
        if (qi == (1u << (mf->mbits + 1))) { e += 1; qi = 1u << mf->mbits; }
        int ef = e + mf->bias;
        if (ef >= (1 << mf->ebits)) code = 0xffffu; /* past the exponent field */
        else code = ((uint32_t)ef << mf->mbits) | (qi - (1u << mf->mbits));
    }
    if (code > mf->max_code) code = mf->saturate ? mf->max_code : mf->inf_code;
    return (uint8_t)(sign | code);
}

static float minifloat_decode(const minifloat *mf, uint8_t c) {
    int nb = mf->ebits + mf->mbits;
    uint32_t mag = c & ((1u << nb) - 1u);
    int neg = (c >> nb) & 1;
    float v;
    if (mf->nan_code && mag == mf->nan_code) return NAN;
    if (!mf->saturate && mag >= mf->inf_code) {
        v = mag == mf->inf_code ? INFINITY : NAN;
        return neg ? -v : v;
    }
    uint32_t ef = mag >> mf->mbits, m = mag & ((1u << mf->mbits) - 1u);
    if (ef == 0) v = ldexpf((float)m, 1 - mf->bias - mf->mbits);
    else v = ldexpf((float)((1u << mf->mbits) | m), (int)ef - mf->bias - mf->mbits);
    return neg ? -v : v;
}

static float TAB_E4M3[256], TAB_E5M2[256], TAB_E2M1[16];

__attribute__((constructor)) static void num_init_tables(void) {
    for (int i = 0; i < 256; i++) {
        TAB_E4M3[i] = minifloat_decode(&MF_E4M3, (uint8_t)i);
        TAB_E5M2[i] = minifloat_decode(&MF_E5M2, (uint8_t)i);
    }
    for (int i = 0; i < 16; i++) TAB_E2M1[i] = minifloat_decode(&MF_E2M1, (uint8_t)i);
}

/* the definitions; numerics_fast.c's num_f32_to_e4m3/e5m2/e2m1 give their bits */
uint8_t num_f32_to_e4m3_ref(float f) { return minifloat_encode(&MF_E4M3, f); }
float num_e4m3_to_f32(uint8_t c) { return TAB_E4M3[c]; }
uint8_t num_f32_to_e5m2_ref(float f) { return minifloat_encode(&MF_E5M2, f); }
float num_e5m2_to_f32(uint8_t c) { return TAB_E5M2[c]; }
uint8_t num_f32_to_e2m1_ref(float f) { return minifloat_encode(&MF_E2M1, f); }
float num_e2m1_to_f32(uint8_t c) { return TAB_E2M1[c & 15u]; }

float num_e8m0_to_f32(uint8_t e) {
    if (e == 0xff) return NAN;
    return ldexpf(1.0f, (int)e - 127);
}

uint8_t num_e8m0_from_amax(float amax, int emax_elem) {
    if (isnan(amax)) return 0xff;
    if (!(amax > 0.0f)) return 0;
    if (isinf(amax)) return 254;
    int e;
    frexpf(amax, &e);
    int x = (e - 1) - emax_elem + 127;
    if (x < 0) x = 0;
    if (x > 254) x = 254;
    return (uint8_t)x;
}

float num_dtype_max(drift_dtype t) {
    switch (t) {
    case DRIFT_DTYPE_F32: return FLT_MAX;
    case DRIFT_DTYPE_F16: return 65504.0f;
    case DRIFT_DTYPE_BF16: return 0x1.fep127f;
    case DRIFT_DTYPE_FP8_E4M3: return 448.0f;
    case DRIFT_DTYPE_FP8_E5M2: return 57344.0f;
    case DRIFT_DTYPE_MXFP4:
    case DRIFT_DTYPE_NVFP4: return 6.0f;
    default: return 0.0f;
    }
}

/* ---- rows: plain floats ---- */
static void q_f32(void *dst, float *gs, const float *src, int64_t n, int group, float ts) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}
static void dq_f32(float *dst, const void *src, const float *gs, int64_t n, int group, float ts) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}
static void q_f16(void *dst, float *gs, const float *src, int64_t n, int group, float ts) {
    uint16_t *d = dst;
    for (int64_t i = 0; i < n; i++) d[i] = num_f32_to_f16(src[i]);
}
static void dq_f16(float *dst, const void *src, const float *gs, int64_t n, int group, float ts) {
    const uint16_t *s = src;
    for (int64_t i = 0; i < n; i++) dst[i] = num_f16_to_f32(s[i]);
}
static void q_bf16(void *dst, float *gs, const float *src, int64_t n, int group, float ts) {
    uint16_t *d = dst;
    /* num_f32_to_bf16, written branch-free so that it vectorises (a load
     * converts every weight matrix) */
    for (int64_t i = 0; i < n; i++) {
        uint32_t u = f2u(src[i]);
        uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16, q = (u >> 16) | 0x40u;
        d[i] = (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? q : r);
    }
}
static void dq_bf16(float *dst, const void *src, const float *gs, int64_t n, int group, float ts) {
    const uint16_t *s = src;
    for (int64_t i = 0; i < n; i++) dst[i] = num_bf16_to_f32(s[i]);
}

static float amax_of(const float *x, int64_t n) {
    float m = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        if (a > m) m = a;
    }
    return m;
}

/* ---- fp8: per-group scales (gs != NULL) or the tensor scale ---- */
static void q_fp8(uint8_t (*enc)(float), float maxf, uint8_t *d, float *gs, const float *src,
                  int64_t n, int group, float ts) {
    if (group <= 0) group = (int)n;
    for (int64_t g0 = 0; g0 < n; g0 += group) {
        float s = ts;
        if (gs) {
            s = amax_of(src + g0, group) / maxf;
            gs[g0 / group] = s;
        }
        for (int64_t i = g0; i < g0 + group; i++)
            d[i] = s > 0.0f ? enc(src[i] / s) : 0;
    }
}
static void dq_fp8(const float *tab, float *dst, const uint8_t *s8, const float *gs, int64_t n,
                   int group, float ts) {
    if (group <= 0) group = (int)n;
    for (int64_t g0 = 0; g0 < n; g0 += group) {
        float s = gs ? gs[g0 / group] * ts : ts;
        for (int64_t i = g0; i < g0 + group; i++) dst[i] = tab[s8[i]] * s;
    }
}
static void q_e4m3(void *dst, float *gs, const float *src, int64_t n, int group, float ts) {
    q_fp8(num_f32_to_e4m3, 448.0f, dst, gs, src, n, group, ts);
}
static void dq_e4m3(float *dst, const void *src, const float *gs, int64_t n, int group, float ts) {
    dq_fp8(TAB_E4M3, dst, src, gs, n, group, ts);
}
static void q_e5m2(void *dst, float *gs, const float *src, int64_t n, int group, float ts) {
    q_fp8(num_f32_to_e5m2, 57344.0f, dst, gs, src, n, group, ts);
}
static void dq_e5m2(float *dst, const void *src, const float *gs, int64_t n, int group, float ts) {
    dq_fp8(TAB_E5M2, dst, src, gs, n, group, ts);
}

/* ---- int8 / int4 with group scales ---- */
static void q_int8(void *dst, float *gs, const float *src, int64_t n, int group, float ts) {
    int8_t *d = dst;
    if (group <= 0) group = (int)n;
    for (int64_t g0 = 0; g0 < n; g0 += group) {
        float s = amax_of(src + g0, group) / 127.0f;
        gs[g0 / group] = s;
        for (int64_t i = g0; i < g0 + group; i++) {
            float q = s > 0.0f ? roundf(src[i] / s) : 0.0f;
            d[i] = (int8_t)(q > 127.0f ? 127 : q < -127.0f ? -127 : (int)q);
        }
    }
}
static void dq_int8(float *dst, const void *src, const float *gs, int64_t n, int group, float ts) {
    const int8_t *s8 = src;
    if (group <= 0) group = (int)n;
    for (int64_t g0 = 0; g0 < n; g0 += group) {
        float s = gs[g0 / group];
        for (int64_t i = g0; i < g0 + group; i++) dst[i] = (float)s8[i] * s;
    }
}
static void q_int4(void *dst, float *gs, const float *src, int64_t n, int group, float ts) {
    uint8_t *d = dst;
    memset(d, 0, (size_t)(n / 2));
    for (int64_t g0 = 0; g0 < n; g0 += group) {
        float s = amax_of(src + g0, group) / 7.0f;
        gs[g0 / group] = s;
        for (int64_t i = g0; i < g0 + group; i++) {
            float q = s > 0.0f ? roundf(src[i] / s) : 0.0f;
            int qi = q > 7.0f ? 7 : q < -8.0f ? -8 : (int)q;
            uint8_t nib = (uint8_t)(qi + 8);
            d[i / 2] |= (uint8_t)((i & 1) ? nib << 4 : nib);
        }
    }
}
static void dq_int4(float *dst, const void *src, const float *gs, int64_t n, int group, float ts) {
    const uint8_t *s8 = src;
    for (int64_t g0 = 0; g0 < n; g0 += group) {
        float s = gs[g0 / group];
        for (int64_t i = g0; i < g0 + group; i++) {
            int nib = (i & 1) ? s8[i / 2] >> 4 : s8[i / 2] & 15;
            dst[i] = (float)(nib - 8) * s;
        }
    }
}

/* ---- fp4 block formats ---- */
static void q_mxfp4(void *dst, float *gs, const float *src, int64_t n, int group, float ts) {
    num_block_mxfp4 *b = dst;
    for (int64_t i = 0; i < n / 32; i++) {
        const float *x = src + i * 32;
        uint8_t e = num_e8m0_from_amax(amax_of(x, 32), 2);
        float s = num_e8m0_to_f32(e);
        b[i].e = e;
        for (int j = 0; j < 16; j++) {
            uint8_t lo = num_f32_to_e2m1(x[j] / s), hi = num_f32_to_e2m1(x[j + 16] / s);
            b[i].qs[j] = (uint8_t)(lo | (hi << 4));
        }
    }
}
static void dq_mxfp4(float *dst, const void *src, const float *gs, int64_t n, int group, float ts) {
    const num_block_mxfp4 *b = src;
    for (int64_t i = 0; i < n / 32; i++) {
        float s = num_e8m0_to_f32(b[i].e);
        float *y = dst + i * 32;
        for (int j = 0; j < 16; j++) {
            y[j] = TAB_E2M1[b[i].qs[j] & 15] * s;
            y[j + 16] = TAB_E2M1[b[i].qs[j] >> 4] * s;
        }
    }
}
static void q_nvfp4(void *dst, float *gs, const float *src, int64_t n, int group, float ts) {
    num_block_nvfp4 *b = dst;
    for (int64_t i = 0; i < n / 16; i++) {
        const float *x = src + i * 16;
        uint8_t sc = num_f32_to_e4m3(amax_of(x, 16) / 6.0f / ts);
        float s = TAB_E4M3[sc] * ts;
        b[i].s = sc;
        for (int j = 0; j < 8; j++) {
            uint8_t lo = s > 0.0f ? num_f32_to_e2m1(x[j] / s) : 0;
            uint8_t hi = s > 0.0f ? num_f32_to_e2m1(x[j + 8] / s) : 0;
            b[i].qs[j] = (uint8_t)(lo | (hi << 4));
        }
    }
}
static void dq_nvfp4(float *dst, const void *src, const float *gs, int64_t n, int group, float ts) {
    const num_block_nvfp4 *b = src;
    for (int64_t i = 0; i < n / 16; i++) {
        float s = TAB_E4M3[b[i].s] * ts;
        float *y = dst + i * 16;
        for (int j = 0; j < 8; j++) {
            y[j] = TAB_E2M1[b[i].qs[j] & 15] * s;
            y[j + 8] = TAB_E2M1[b[i].qs[j] >> 4] * s;
        }
    }
}

/* ---- GGUF blocks (ggml's reference quantizers) ---- */
static void q_q8_0(void *dst, float *gs, const float *src, int64_t n, int group, float ts) {
    num_block_q8_0 *b = dst;
    for (int64_t i = 0; i < n / 32; i++) {
        const float *x = src + i * 32;
        float d = amax_of(x, 32) / 127.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = num_f32_to_f16(d);
        for (int j = 0; j < 32; j++) b[i].qs[j] = (int8_t)roundf(x[j] * id);
    }
}
static void dq_q8_0(float *dst, const void *src, const float *gs, int64_t n, int group, float ts) {
    const num_block_q8_0 *b = src;
    for (int64_t i = 0; i < n / 32; i++) {
        float d = num_f16_to_f32(b[i].d);
        for (int j = 0; j < 32; j++) dst[i * 32 + j] = (float)b[i].qs[j] * d;
    }
}
static void q_q4_0(void *dst, float *gs, const float *src, int64_t n, int group, float ts) {
    num_block_q4_0 *b = dst;
    for (int64_t i = 0; i < n / 32; i++) {
        const float *x = src + i * 32;
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < 32; j++) {
            if (amax < fabsf(x[j])) { amax = fabsf(x[j]); max = x[j]; }
        }
        float d = max / -8.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = num_f32_to_f16(d);
        for (int j = 0; j < 16; j++) {
            int x0 = (int)(int8_t)(x[j] * id + 8.5f), x1 = (int)(int8_t)(x[j + 16] * id + 8.5f);
            if (x0 > 15) x0 = 15;
            if (x1 > 15) x1 = 15;
            b[i].qs[j] = (uint8_t)(x0 | (x1 << 4));
        }
    }
}
static void dq_q4_0(float *dst, const void *src, const float *gs, int64_t n, int group, float ts) {
    const num_block_q4_0 *b = src;
    for (int64_t i = 0; i < n / 32; i++) {
        float d = num_f16_to_f32(b[i].d);
        for (int j = 0; j < 16; j++) {
            dst[i * 32 + j] = (float)((b[i].qs[j] & 15) - 8) * d;
            dst[i * 32 + j + 16] = (float)((b[i].qs[j] >> 4) - 8) * d;
        }
    }
}

static const num_traits TRAITS[DRIFT_DTYPE_COUNT] = {
    [DRIFT_DTYPE_F32] = {.name = "f32", .block_size = 1, .block_bytes = 4, .max_finite = FLT_MAX,
                         .quantize_row_ref = q_f32, .dequantize_row = dq_f32},
    [DRIFT_DTYPE_F16] = {.name = "f16", .block_size = 1, .block_bytes = 2, .max_finite = 65504.0f,
                         .quantize_row_ref = q_f16, .dequantize_row = dq_f16},
    [DRIFT_DTYPE_BF16] = {.name = "bf16", .block_size = 1, .block_bytes = 2,
                          .max_finite = 0x1.fep127f, .quantize_row_ref = q_bf16,
                          .dequantize_row = dq_bf16},
    [DRIFT_DTYPE_FP8_E4M3] = {.name = "fp8-e4m3", .block_size = 1, .block_bytes = 1,
                              .is_quantized = true, .max_finite = 448.0f,
                              .quantize_row_ref = q_e4m3, .dequantize_row = dq_e4m3},
    [DRIFT_DTYPE_FP8_E5M2] = {.name = "fp8-e5m2", .block_size = 1, .block_bytes = 1,
                              .is_quantized = true, .max_finite = 57344.0f,
                              .quantize_row_ref = q_e5m2, .dequantize_row = dq_e5m2},
    [DRIFT_DTYPE_INT8] = {.name = "int8", .block_size = 1, .block_bytes = 1, .is_quantized = true,
                          .has_group_scales = true, .max_finite = 127.0f,
                          .quantize_row_ref = q_int8, .dequantize_row = dq_int8},
    [DRIFT_DTYPE_INT4] = {.name = "int4", .block_size = 2, .block_bytes = 1, .is_quantized = true,
                          .has_group_scales = true, .max_finite = 7.0f,
                          .quantize_row_ref = q_int4, .dequantize_row = dq_int4},
    [DRIFT_DTYPE_MXFP4] = {.name = "mxfp4", .block_size = 32, .block_bytes = 17,
                           .is_quantized = true, .max_finite = 6.0f,
                           .quantize_row_ref = q_mxfp4, .dequantize_row = dq_mxfp4},
    [DRIFT_DTYPE_NVFP4] = {.name = "nvfp4", .block_size = 16, .block_bytes = 9,
                           .is_quantized = true, .has_tensor_scale = true, .max_finite = 6.0f,
                           .quantize_row_ref = q_nvfp4, .dequantize_row = dq_nvfp4},
    [DRIFT_DTYPE_Q8_0] = {.name = "q8_0", .block_size = 32, .block_bytes = 34,
                          .is_quantized = true, .max_finite = 127.0f,
                          .quantize_row_ref = q_q8_0, .dequantize_row = dq_q8_0},
    [DRIFT_DTYPE_Q4_0] = {.name = "q4_0", .block_size = 32, .block_bytes = 18,
                          .is_quantized = true, .max_finite = 8.0f,
                          .quantize_row_ref = q_q4_0, .dequantize_row = dq_q4_0},
};

const num_traits *num_traits_of(drift_dtype t) {
    if ((int)t < 0 || t >= DRIFT_DTYPE_COUNT) return NULL;
    return &TRAITS[t];
}

size_t num_row_bytes(drift_dtype t, int64_t n) {
    const num_traits *tr = num_traits_of(t);
    if (!tr) return 0;
    return (size_t)(n / tr->block_size) * tr->block_bytes;
}

/* ---- quantized matrices ---- */
static drift_status qmat_check_shape(drift_dtype t, int64_t rows, int64_t cols, int group,
                                     drift_error *err) {
    const num_traits *tr = num_traits_of(t);
    if (!tr) return drift_error_set(err, DRIFT_ERR_INVALID, "qmat: format %d has no traits", (int)t);
    if (rows <= 0 || cols <= 0)
        return drift_error_set(err, DRIFT_ERR_INVALID, "qmat: bad shape (%lld, %lld)",
                               (long long)rows, (long long)cols);
    if (cols % tr->block_size)
        return drift_error_set(err, DRIFT_ERR_INVALID,
                               "qmat: %s needs cols a multiple of %d, got %lld", tr->name,
                               tr->block_size, (long long)cols);
    if (t == DRIFT_DTYPE_INT4 && (group <= 0 || group % 2 || cols % group))
        return drift_error_set(err, DRIFT_ERR_INVALID,
                               "qmat: int4 group %d must be even and divide cols %lld", group,
                               (long long)cols);
    return DRIFT_OK;
}

/* Row r of a quantizer's source: a pointer to its cols floats (buf, cols
 * floats, is scratch the function may fill). */
typedef const float *(*qmat_row_fn)(void *ctx, int64_t r, float *buf);

typedef struct f32_rows {
    const float *src;
    int64_t cols;
} f32_rows;

static const float *f32_row(void *ctx, int64_t r, float *buf) {
    (void)buf;
    const f32_rows *f = ctx;
    return f->src + r * f->cols;
}

static const float *qmat_row(void *ctx, int64_t r, float *buf) {
    num_fast_dequantize_row(ctx, r, buf);
    return buf;
}

/* num_qmat_quantize over rows given one at a time (a conversion then needs
 * no f32 copy of the whole matrix: fresh pages cost a fault each). */
static drift_status qmat_quantize_rows(num_qmat *m, drift_dtype t, qmat_row_fn row, void *ctx, int64_t rows,
                                       int64_t cols, int group, drift_scale_mode mode, drift_error *err) {
    memset(m, 0, sizeof *m);
    drift_status st = qmat_check_shape(t, rows, cols, group, err);
    if (st) return st;
    const num_traits *tr = num_traits_of(t);
    bool fp8 = t == DRIFT_DTYPE_FP8_E4M3 || t == DRIFT_DTYPE_FP8_E5M2;
    int64_t n_scales = 0;
    if (t == DRIFT_DTYPE_INT8 || (fp8 && mode == DRIFT_SCALE_PER_CHANNEL)) {
        group = (int)cols;
        n_scales = rows;
    } else if (t == DRIFT_DTYPE_INT4) {
        n_scales = rows * (cols / group);
    } else {
        group = (int)cols;
    }
    size_t row_bytes = num_row_bytes(t, cols);
    size_t data_bytes = (row_bytes * (size_t)rows + 63) & ~(size_t)63;
    size_t total = (data_bytes + (size_t)n_scales * sizeof(float) + 63) & ~(size_t)63;
    char *mem = aligned_alloc(64, total); /* size must be a multiple of the alignment */
    float *buf = malloc((size_t)cols * sizeof *buf);
    if (!mem || !buf) {
        free(mem);
        free(buf);
        return drift_error_set(err, DRIFT_ERR_NOMEM, "qmat: %lld x %lld %s", (long long)rows, (long long)cols, tr->name);
    }
    m->dtype = t;
    m->rows = rows;
    m->cols = cols;
    m->data = mem;
    m->row_bytes = row_bytes;
    m->scales = n_scales ? (float *)(mem + data_bytes) : NULL;
    m->group = group;
    m->scale_mode = fp8 ? mode : DRIFT_SCALE_PER_CHANNEL;
    m->tensor_scale = 1.0f;
    m->owned = mem;
    if ((fp8 && mode == DRIFT_SCALE_PER_TENSOR) || t == DRIFT_DTYPE_NVFP4) {
        float amax = 0.0f; /* amax_of over the whole matrix, row by row */
        for (int64_t r = 0; r < rows; r++) {
            float a = amax_of(row(ctx, r, buf), cols);
            if (a > amax) amax = a;
        }
        float div = fp8 ? tr->max_finite : 448.0f * 6.0f;
        m->tensor_scale = amax > 0.0f ? amax / div : 1.0f;
    }
    int64_t gpr = n_scales ? n_scales / rows : 0;
    for (int64_t r = 0; r < rows; r++)
        tr->quantize_row_ref(mem + (size_t)r * row_bytes, gpr ? m->scales + r * gpr : NULL, row(ctx, r, buf), cols, group,
                             m->tensor_scale);
    free(buf);
    return DRIFT_OK;
}

drift_status num_qmat_quantize(num_qmat *m, drift_dtype t, const float *src, int64_t rows,
                                 int64_t cols, int group, drift_scale_mode mode,
                                 drift_error *err) {
    f32_rows f = {src, cols};
    return qmat_quantize_rows(m, t, f32_row, &f, rows, cols, group, mode, err);
}

drift_status num_qmat_wrap(num_qmat *m, drift_dtype t, const void *data, int64_t rows,
                             int64_t cols, drift_error *err) {
    memset(m, 0, sizeof *m);
    if (t != DRIFT_DTYPE_F32 && t != DRIFT_DTYPE_F16 && t != DRIFT_DTYPE_BF16 &&
        t != DRIFT_DTYPE_Q8_0 && t != DRIFT_DTYPE_Q4_0 && t != DRIFT_DTYPE_MXFP4)
        return drift_error_set(err, DRIFT_ERR_INVALID,
                               "qmat: cannot wrap format %s (it needs side scales)",
                               drift_dtype_name(t));
    drift_status st = qmat_check_shape(t, rows, cols, 0, err);
    if (st) return st;
    m->dtype = t;
    m->rows = rows;
    m->cols = cols;
    m->data = data;
    m->row_bytes = num_row_bytes(t, cols);
    m->group = (int)cols;
    m->tensor_scale = 1.0f;
    return DRIFT_OK;
}

void num_qmat_dequantize_row(const num_qmat *m, int64_t r, float *dst) {
    const num_traits *tr = num_traits_of(m->dtype);
    int64_t gpr = m->scales ? m->cols / m->group : 0;
    tr->dequantize_row(dst, (const char *)m->data + (size_t)r * m->row_bytes,
                       m->scales ? m->scales + r * gpr : NULL, m->cols, m->group,
                       m->tensor_scale);
}

drift_status num_qmat_convert(num_qmat *dst, const num_qmat *src,
                                const drift_numeric_profile *p, drift_error *err) {
    drift_dtype t = p->weights;
    bool same = t == src->dtype;
    if (same && (t == DRIFT_DTYPE_INT4) && src->group != p->group_size) same = false;
    if (same && (t == DRIFT_DTYPE_FP8_E4M3 || t == DRIFT_DTYPE_FP8_E5M2) &&
        src->scale_mode != p->weight_scale)
        same = false;
    if (t == DRIFT_DTYPE_NATIVE || same) {
        *dst = *src;
        dst->owned = NULL;
        return DRIFT_OK;
    }
    /* row by row through the SIMD dequantizer (the same values as
     * num_qmat_dequantize_row) */
    return qmat_quantize_rows(dst, t, qmat_row, (void *)src, src->rows, src->cols, p->group_size, p->weight_scale, err);
}

void num_qmat_free(num_qmat *m) {
    if (!m) return;
    free(m->owned);
    memset(m, 0, sizeof *m);
}

/* ---- activations and KV vectors ---- */
/* num_round_acts' definition, scalar, through the reference encoders
 * (numerics_fast.c's num_round_acts gives its bits) */
void num_round_acts_ref(drift_dtype t, float *x, int64_t n) {
    switch (t) {
    case DRIFT_DTYPE_BF16:
        for (int64_t i = 0; i < n; i++) x[i] = num_bf16_to_f32(num_f32_to_bf16(x[i]));
        break;
    case DRIFT_DTYPE_F16:
        for (int64_t i = 0; i < n; i++) x[i] = num_f16_to_f32(num_f32_to_f16(x[i]));
        break;
    case DRIFT_DTYPE_FP8_E4M3:
    case DRIFT_DTYPE_FP8_E5M2: {
        const minifloat *mf = t == DRIFT_DTYPE_FP8_E4M3 ? &MF_E4M3 : &MF_E5M2;
        const float *tab = t == DRIFT_DTYPE_FP8_E4M3 ? TAB_E4M3 : TAB_E5M2;
        float s = amax_of(x, n) / num_dtype_max(t);
        if (!(s > 0.0f) || isinf(s)) return;
        for (int64_t i = 0; i < n; i++) x[i] = tab[minifloat_encode(mf, x[i] / s)] * s;
        break;
    }
    case DRIFT_DTYPE_INT8: { /* dynamic per-row symmetric: s = amax / 127, RNE */
        float s = amax_of(x, n) / 127.0f;
        if (!(s > 0.0f) || isinf(s)) return;
        for (int64_t i = 0; i < n; i++) {
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

float num_round1_slow(drift_dtype t, float v) {
    if (t == DRIFT_DTYPE_BF16) return num_bf16_to_f32(num_f32_to_bf16(v));
    if (t == DRIFT_DTYPE_F16) return num_f16_to_f32(num_f32_to_f16(v));
    return v;
}

void num_store_round(const drift_numeric_profile *p, float *x, int64_t n) {
    if (p->store) num_round_acts(num_dtype_of(p), x, n);
}

size_t num_kv_bytes(drift_dtype t, int n) {
    switch (t) {
    case DRIFT_DTYPE_F16:
    case DRIFT_DTYPE_BF16: return (size_t)n * 2;
    case DRIFT_DTYPE_FP8_E4M3:
    case DRIFT_DTYPE_FP8_E5M2: return sizeof(float) + (size_t)n;
    default: return (size_t)n * 4;
    }
}

void num_kv_store(drift_dtype t, void *dst, const float *src, int n) {
    switch (t) {
    case DRIFT_DTYPE_F16: q_f16(dst, NULL, src, n, 0, 1.0f); break;
    case DRIFT_DTYPE_BF16: q_bf16(dst, NULL, src, n, 0, 1.0f); break;
    case DRIFT_DTYPE_FP8_E4M3:
    case DRIFT_DTYPE_FP8_E5M2: {
        float s = amax_of(src, n) / num_dtype_max(t);
        if (!(s > 0.0f) || isinf(s)) s = 1.0f;
        memcpy(dst, &s, sizeof s);
        q_fp8(t == DRIFT_DTYPE_FP8_E4M3 ? num_f32_to_e4m3 : num_f32_to_e5m2, 0, (uint8_t *)dst + sizeof s,
              NULL, src, n, n, s);
        break;
    }
    default: memcpy(dst, src, (size_t)n * sizeof(float)); break;
    }
}

void num_kv_load(drift_dtype t, float *dst, const void *src, int n) {
    switch (t) {
    case DRIFT_DTYPE_F16: dq_f16(dst, src, NULL, n, 0, 1.0f); break;
    case DRIFT_DTYPE_BF16: dq_bf16(dst, src, NULL, n, 0, 1.0f); break;
    case DRIFT_DTYPE_FP8_E4M3:
    case DRIFT_DTYPE_FP8_E5M2: {
        float s;
        memcpy(&s, src, sizeof s);
        dq_fp8(t == DRIFT_DTYPE_FP8_E4M3 ? TAB_E4M3 : TAB_E5M2, dst,
               (const uint8_t *)src + sizeof s, NULL, n, n, s);
        break;
    }
    default: memcpy(dst, src, (size_t)n * sizeof(float)); break;
    }
}

/* exp: 2^n * P(r), x = n ln2 + r, |r| <= ln2/2. ln2 split in two (Cody-Waite)
 * so r is exact to float precision; P is the degree-6 Taylor polynomial
 * (truncation error < 2e-8 relative on the interval). */
float num_exp_fast(float x) {
    if (isnan(x)) return x;
    if (x > 88.72283f) return INFINITY;
    if (x < -87.33654f) return 0.0f;
    float n = nearbyintf(x * 1.44269504088896341f);
    float r = x - n * 0.693145751953125f;
    r = r - n * 1.42860682030941723212e-6f;
    float p = 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    int ni = (int)n;
    /* 2^ni may be subnormal for ni < -126: scale in two steps */
    if (ni < -126) return p * u2f((uint32_t)(ni + 126 + 127) << 23) * 0x1p-126f;
    if (ni > 127) return p * 2.0f * u2f((uint32_t)(ni - 1 + 127) << 23);
    return p * u2f((uint32_t)(ni + 127) << 23);
}

float num_exp(const drift_numeric_profile *p, float x) {
    return p->exp == DRIFT_EXP_FAST ? num_exp_fast(x) : expf(x);
}
