/* hw_ref.c - the scalar definition of the hardware keys' dot products
 * (lanes, fma, tree, dot=bf16, mma, accbits, promote; profile.h), one
 * element at a time, compiled with -ffp-contract=off (CMake does so for
 * every *_ref.c): the fast AVX2 kernels in kernels_cpu.c must give these
 * bits exactly (tests/ops/test_hw_levels.c), on any x86-64 with AVX2+FMA.
 *
 * A matmul output y = x . w over k < K is split into S chunks as every CPU
 * matmul is (reduce=blocked:S; chunk boundaries at multiples of 16); each
 * chunk is one dot below, and y = ((c0 + c1) + c2) + ... in f32.
 *
 * Lanes path (mma = 0), L lanes a[0..L-1] = +0 in f32:
 *   dot=f32:  element k (counted from the chunk start) goes to lane k mod L
 *             in increasing k: a = fma(x, w, a) (fma=1, one rounding) or
 *             a = a + (x * w) (fma=0: the product rounded to f32 first).
 *   dot=bf16: VDPBF16PS. x and w rounded to bf16 (RNE), a subnormal input
 *             becomes a zero of its sign (DAZ). Pairs (2i, 2i+1) of each
 *             step of 2L elements go to lane i: a = ftz(a + x[2i+1]*w[2i+1]),
 *             then a = ftz(a + x[2i]*w[2i]); each product and each add in f32
 *             RNE, ftz = a subnormal sum becomes a zero of its sign. A
 *             missing last odd element counts as 0.
 *   tree=halving: a[i] += a[i + h] for h = L/2, L/4, .., 1; result a[0].
 *   tree=linear:  ((a[0] + a[1]) + a[2]) + ... + a[L-1].
 * Matrix-unit path (mma = C): acc = +0 (f32), hi = +0 (f32). For each chunk
 *   of C elements (the last may be shorter): d[0..3] = +0 in double,
 *   d[k mod 4] = fma(x, w, d) in double (the products are exact), then
 *   s = ((d0 + d1) + (d2 + d3)) + acc in double, acc = s rounded toward zero
 *   to f32 and cut to accbits mantissa bits (toward zero). promote = N > 0:
 *   after every N elements, hi = hi + acc (f32 RNE) and acc = +0; the result
 *   is hi + acc. promote = 0: the result is acc. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "model/numerics.h"

static float bits_f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t f_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* bf16 rounding (RNE) then DAZ. */
static float bf16_daz(float v) {
    float r = num_bf16_to_f32(num_f32_to_bf16(v));
    uint32_t u = f_bits(r);
    if ((u & 0x7f800000u) == 0) u &= 0x80000000u;
    return bits_f(u);
}

static float ftz(float v) {
    uint32_t u = f_bits(v);
    if ((u & 0x7f800000u) == 0) u &= 0x80000000u;
    return bits_f(u);
}

float num_hw_trunc_ref(double s, int acc_bits) {
    float f = (float)s;
    if (isfinite(s) && fabs((double)f) > fabs(s)) f = nextafterf(f, 0.0f);
    if (acc_bits < 23 && isfinite(f)) f = bits_f(f_bits(f) & ~((1u << (23 - acc_bits)) - 1u));
    return f;
}

static float lanes_dot(const drift_numeric_profile *p, const float *x, const float *w, int64_t n) {
    float a[64] = {0};
    int L = p->lanes;
    if (!p->dot_bf16) {
        for (int64_t k = 0; k < n; k++) {
            int l = (int)(k % L);
            if (p->fma) a[l] = fmaf(x[k], w[k], a[l]);
            else {
                float pr = x[k] * w[k];
                a[l] = a[l] + pr;
            }
        }
    } else {
        for (int64_t k0 = 0; k0 < n; k0 += 2) {
            int l = (int)((k0 % (2 * L)) / 2);
            float xo = k0 + 1 < n ? bf16_daz(x[k0 + 1]) : 0.0f, wo = k0 + 1 < n ? bf16_daz(w[k0 + 1]) : 0.0f;
            float xe = bf16_daz(x[k0]), we = bf16_daz(w[k0]);
            float po = xo * wo, pe = xe * we;
            a[l] = ftz(a[l] + po);
            a[l] = ftz(a[l] + pe);
        }
    }
    if (p->tree) {
        float s = a[0];
        for (int i = 1; i < L; i++) s = s + a[i];
        return s;
    }
    for (int h = L / 2; h >= 1; h /= 2)
        for (int i = 0; i < h; i++) a[i] = a[i] + a[i + h];
    return a[0];
}

static float mma_dot(const drift_numeric_profile *p, const float *x, const float *w, int64_t n) {
    float acc = 0.0f, hi = 0.0f;
    int64_t since = 0;
    for (int64_t c0 = 0; c0 < n; c0 += p->mma) {
        int64_t c1 = c0 + p->mma < n ? c0 + p->mma : n;
        double d[4] = {0, 0, 0, 0};
        for (int64_t k = c0; k < c1; k++) d[(k - c0) % 4] = fma((double)x[k], (double)w[k], d[(k - c0) % 4]);
        double s = ((d[0] + d[1]) + (d[2] + d[3])) + (double)acc;
        acc = num_hw_trunc_ref(s, p->acc_bits);
        if (p->promote) {
            since += c1 - c0;
            if (since >= p->promote) {
                hi = hi + acc;
                acc = 0.0f;
                since = 0;
            }
        }
    }
    return p->promote ? hi + acc : acc;
}

float num_hw_dot_ref(const drift_numeric_profile *p, const float *x, const float *w, int64_t K, int S) {
    int64_t clen = num_chunk_len(K, S);
    float y = 0.0f;
    for (int64_t c0 = 0; c0 < K; c0 += clen) {
        int64_t c1 = c0 + clen < K ? c0 + clen : K;
        float c = p->mma ? mma_dot(p, x + c0, w + c0, c1 - c0) : lanes_dot(p, x + c0, w + c0, c1 - c0);
        y = c0 == 0 ? c : y + c;
    }
    return y;
}
