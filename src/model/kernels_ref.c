/* kernels_ref.c - the float64 reference kernels (isa=ref, and the oracle of
 * tests/ops).
 *
 * Every value is computed in double from f32 inputs by IEEE operations in
 * one fixed order, compiled with -ffp-contract=off (CMake does this for
 * every *_ref.c). The only roundings to float are the format's own (weights
 * dequantized to f32, activations rounded to p->acts, KV vectors) and the
 * final store. Results are the same on any x86-64 machine, and much closer
 * to the exact value than any fast kernel: a fast kernel's error is
 * measured against this.
 *
 * The order. A dot product x . w over k < K (each matmul output; each
 * attention score q . k_t):
 *     p_k    = (double)x_k * (double)w_k          exact: 24 + 24 bits < 53
 *     lane j = ((+0 + p_j) + p_{j+8}) + p_{j+16} + ...   j = 0..7, k ascending
 *     dot    = ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7))
 *     y      = (float)dot
 * Each lane is a chain of adds in a fixed order, so the bits do not depend
 * on how many lanes a register holds: the same C (GCC vector extensions,
 * element-wise IEEE operations) is compiled for the x86-64 baseline (SSE2),
 * for AVX2 and for AVX-512F and one is picked at run time, for speed only.
 * Nor on the batch (an output is one dot, whatever rows share its tile),
 * nor on threads (ref runs one). Since p_k is exact, even a fused
 * multiply-add would round the same way. tests/unit/test_ref_order.c checks
 * every compiled form against a scalar transcription of this order.
 * Everything else sums in index order: rmsnorm's sum of squares, softmax's
 * sum, and attention's  out = (sum_t e_t v_t) / (sum_t e_t),
 * e_t = exp(s_t - max s), s_t = dot(q, k_t) * scale, summed over positions t
 * in order (per element for v). (Until this order, dots were one serial
 * double sum in index order: that gave other last bits of the double, and
 * now and then of the float.)
 *
 * exp, log, pow, sin, cos are the reference's own (below), not libm's:
 * glibc picks FMA or SSE2 code for them by CPU, and the two differ in the
 * last bit for some arguments. sqrt and division are IEEE operations.
 *
 * Speed: the matmul converts each x row to double once per pass of up to
 * REF_XD_BYTES, reads f32 weight rows in place (other formats dequantized
 * once per pass) and computes tiles of x rows by weight rows in registers
 * (4 x 4 with AVX-512; there the multiply-adds may be fused: exact
 * products, so the same bits, see ref_block_avx512). Attention (head_dim
 * a multiple of 8, ref_attend_fast) scores eight keys per tile and ends
 * their eight lane trees together by shuffles, runs four exp8s interleaved,
 * and sums V with the accumulators in registers over all positions: the
 * same operations on the same operands as the plain loops, so the same
 * bits.
 *
 * These kernels ignore the profile's accum/reduce/attn/exp/threads/isa
 * (drift_profile_validate rejects isa=ref with anything but the reference
 * choices); they honour the formats (weights, acts, kv). */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/kernels_ref.h"
#include "model/numerics.h"

/* ---------------------------------------------------------------------------
 * The lane order, in plain C vectors (GCC vector extensions: elementwise IEEE
 * operations, so a v8d add is eight double adds whatever registers carry it).
 * ------------------------------------------------------------------------- */
typedef double ref_v8d __attribute__((vector_size(64)));
typedef float ref_v8f __attribute__((vector_size(32)));

#define REF_INLINE static inline __attribute__((always_inline))
#define REF_MAX_BR 4 /* x rows per tile */
#define REF_MAX_NR 4 /* weight rows per tile */

/* The fixed tree that ends every dot product: lanes l[0..7] ->
 * ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)). */
REF_INLINE double ref_lanes_sum(const double l[8]) {
    return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}

/* out[i * nr + j] = x[i] . w[j] over k < K in the lane order (i < br,
 * j < nr); x[i] K doubles, w[j] K floats. Inlined into each caller with
 * constant br and nr, so the accumulators stay in registers. */
REF_INLINE void ref_tile(int br, int nr, const double *const *x, const float *const *w, int64_t K,
                         double *out) {
    ref_v8d acc[REF_MAX_BR * REF_MAX_NR];
#pragma GCC unroll 16
    for (int t = 0; t < br * nr; t++) acc[t] = (ref_v8d){0};
    int64_t k = 0;
    for (; k + 8 <= K; k += 8) {
        ref_v8d wv[REF_MAX_NR];
#pragma GCC unroll 4
        for (int j = 0; j < nr; j++) {
            ref_v8f f;
            memcpy(&f, w[j] + k, sizeof f);
            wv[j] = __builtin_convertvector(f, ref_v8d);
        }
#pragma GCC unroll 4
        for (int i = 0; i < br; i++) {
            ref_v8d xv;
            memcpy(&xv, x[i] + k, sizeof xv);
#pragma GCC unroll 4
            for (int j = 0; j < nr; j++) acc[i * nr + j] += xv * wv[j];
        }
    }
    for (int i = 0; i < br; i++)
        for (int j = 0; j < nr; j++) {
            double l[8];
            memcpy(l, &acc[i * nr + j], sizeof l);
            for (int64_t t = k; t < K; t++) l[t - k] += x[i][t] * (double)w[j][t];
            out[i * nr + j] = ref_lanes_sum(l);
        }
}

/* One block of the matmul: rows i < bc of xd (bc, K) doubles against the nw
 * (<= nr) weight rows w[j] (K floats) -> y[i * N + j]. Tiles of br x nr,
 * leftover x rows one at a time; missing weight rows repeat w[0] and their
 * results are dropped. */
REF_INLINE void ref_block(int br, int nr, const double *xd, int64_t bc, const float *const *w,
                          int nw, int64_t K, float *y, int64_t N) {
    const float *wp[REF_MAX_NR];
    const double *xp[REF_MAX_BR];
    double out[REF_MAX_BR * REF_MAX_NR];
    for (int j = 0; j < nr; j++) wp[j] = w[j < nw ? j : 0];
    int64_t i = 0;
    for (; i + br <= bc; i += br) {
        for (int r = 0; r < br; r++) xp[r] = xd + (i + r) * K;
        ref_tile(br, nr, xp, wp, K, out);
        for (int r = 0; r < br; r++)
            for (int j = 0; j < nw; j++) y[(i + r) * N + j] = (float)out[r * nr + j];
    }
    for (; i < bc; i++) {
        xp[0] = xd + i * K;
        ref_tile(1, nr, xp, wp, K, out);
        for (int j = 0; j < nw; j++) y[i * N + j] = (float)out[j];
    }
}

/* The same block compiled three times: for the x86-64 baseline (SSE2), for
 * AVX2 and for AVX-512F. Tile sizes fit each register file; the bits do not
 * depend on them. The AVX2 and AVX-512 forms let GCC fuse acc + x * w into
 * one FMA: every product here is of two floats, exact in double, so the
 * fused and the separate forms round the same way (test_ref_order checks
 * these forms against the unfused scalar order). Only here: attention's
 * e * v products are not exact, and its forms are not fused. (Clang has no
 * per-function contraction switch: there the forms are not fused; same bits.) */
#if defined(__clang__)
#define REF_FUSED
#else
#define REF_FUSED __attribute__((optimize("fp-contract=fast")))
#endif
typedef void ref_block_fn(const double *xd, int64_t bc, const float *const *w, int nw, int64_t K,
                          float *y, int64_t N);

static void ref_block_base(const double *xd, int64_t bc, const float *const *w, int nw, int64_t K,
                           float *y, int64_t N) {
    ref_block(2, 1, xd, bc, w, nw, K, y, N);
}

__attribute__((target("avx2,fma"))) REF_FUSED
static void ref_block_avx2(const double *xd, int64_t bc, const float *const *w, int nw, int64_t K,
                           float *y, int64_t N) {
    ref_block(2, 2, xd, bc, w, nw, K, y, N);
}

__attribute__((target("avx512f,fma"))) REF_FUSED
static void ref_block_avx512(const double *xd, int64_t bc, const float *const *w, int nw, int64_t K,
                             float *y, int64_t N) {
    ref_block(4, 4, xd, bc, w, nw, K, y, N);
}

drift_isa num_ref_isa_cap = DRIFT_ISA_AUTO;

/* The widest compiled form this CPU runs, capped by num_ref_isa_cap:
 * DRIFT_ISA_AVX512, DRIFT_ISA_AVX2 or DRIFT_ISA_SCALAR (the baseline). */
static drift_isa ref_pick_isa(void) {
    drift_isa cap = num_ref_isa_cap;
    if (cap == DRIFT_ISA_SCALAR) return DRIFT_ISA_SCALAR;
    return num_isa_resolve(cap == DRIFT_ISA_AVX2 ? DRIFT_ISA_AVX2 : DRIFT_ISA_AUTO);
}

/* The block compiled for that form, and its weight rows per block. */
static ref_block_fn *ref_pick_block(int *nr) {
    drift_isa isa = ref_pick_isa();
    if (isa == DRIFT_ISA_AVX512) return *nr = 4, ref_block_avx512;
    if (isa == DRIFT_ISA_AVX2) return *nr = 2, ref_block_avx2;
    return *nr = 1, ref_block_base;
}

/* x rows per pass: their double copy stays within this many bytes (L2). */
#define REF_XD_BYTES (512 * 1024)

drift_status num_ref_matmul(const drift_numeric_profile *p, float *y, const float *x,
                            const num_qmat *W, int64_t B, drift_error *err) {
    int64_t K = W->cols, N = W->rows;
    int64_t bc_max = REF_XD_BYTES / (K > 0 ? K * (int64_t)sizeof(double) : 1);
    if (bc_max < REF_MAX_BR) bc_max = REF_MAX_BR;
    if (bc_max > B) bc_max = B;
    bool f32 = W->dtype == DRIFT_DTYPE_F32;
    size_t n_xd = (size_t)(bc_max * K), n_wf = f32 ? 0 : (size_t)(REF_MAX_NR * K);
    double *xd = malloc(n_xd * sizeof(double) + ((size_t)K + n_wf) * sizeof(float) + 1);
    if (!xd)
        return drift_error_set(err, DRIFT_ERR_NOMEM, "ref matmul: scratch for %lld x %lld",
                               (long long)bc_max, (long long)K);
    float *xrow = (float *)(xd + n_xd), *wf = xrow + K; /* (K) one x row; (nr, K) weight rows */
    int nr;
    ref_block_fn *block = ref_pick_block(&nr);
    for (int64_t b0 = 0; b0 < B; b0 += bc_max) {
        int64_t bc = B - b0 < bc_max ? B - b0 : bc_max;
        /* act(x) rows, as doubles, once per pass */
        for (int64_t i = 0; i < bc; i++) {
            memcpy(xrow, x + (b0 + i) * K, (size_t)K * sizeof(float));
            num_round_acts(p->acts, xrow, K);
            for (int64_t k = 0; k < K; k++) xd[i * K + k] = (double)xrow[k];
        }
        for (int64_t n0 = 0; n0 < N; n0 += nr) {
            int nw = N - n0 < nr ? (int)(N - n0) : nr;
            const float *w[REF_MAX_NR];
            for (int j = 0; j < nw; j++) {
                if (f32) {
                    w[j] = (const float *)((const char *)W->data + (size_t)(n0 + j) * W->row_bytes);
                } else {
                    num_qmat_dequantize_row(W, n0 + j, wf + j * K);
                    w[j] = wf + j * K;
                }
            }
            block(xd, bc, w, nw, K, y + b0 * N + n0, N);
        }
    }
    free(xd);
    return DRIFT_OK;
}

/* ---------------------------------------------------------------------------
 * exp, log, pow, sin, cos of the reference, in plain double arithmetic.
 * glibc's libm picks FMA or SSE2 code for these at run time and the two
 * differ in the last bit for some arguments, so the reference does not call
 * it. Each is a fixed sequence of IEEE operations (argument reduction by a
 * constant split in pieces whose products are exact, then a Taylor
 * polynomial by Horner's rule): within a few units in the last place of
 * double, and the same bits on every x86-64 CPU.
 * ------------------------------------------------------------------------- */
static const double REF_LN2_HI = 6.93147180369123816490e-01; /* 32 bits: k * LN2_HI exact */
static const double REF_LN2_LO = 1.90821492927058770002e-10;

/* e^x of 8 values, lane by lane: every lane runs the same sequence of IEEE
 * operations, so the bits do not depend on how many lanes a register holds
 * (num_ref_exp is lane 0 of it). x is clamped to [-746, 710] (beyond, the
 * result is 0 or inf either way); x = k ln2 + r with k = x log2(e) rounded
 * to nearest by the 1.5 * 2^52 shift, |r| <= ln2 / 2; e^r = sum_{i <= 13}
 * r^i / i! by Horner's rule; then e^r 2^k1 2^k2 (k1 + k2 = k, each a normal
 * power of two: the first product is exact, the second rounds once, also
 * for subnormal results). NaN stays NaN. Within 1.2 units in the last
 * place of double. */
typedef int64_t ref_v8l __attribute__((vector_size(64)));
typedef uint64_t ref_v8u __attribute__((vector_size(64)));

REF_INLINE void ref_exp8(double *y, const double *xs) {
    static const double C[] = {1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0,
                               1.0 / 3628800.0,    1.0 / 362880.0,    1.0 / 40320.0,
                               1.0 / 5040.0,       1.0 / 720.0,       1.0 / 120.0,
                               1.0 / 24.0,         1.0 / 6.0,         1.0 / 2.0,
                               1.0,                1.0};
    const ref_v8d shift = (ref_v8d){0} + 0x1.8p52;
    ref_v8d x;
    memcpy(&x, xs, sizeof x);
    ref_v8l nan = x != x, lo = x < -746.0, hi = x > 710.0;
    ref_v8l keep = ~(nan | lo | hi);
    ref_v8d lo_v = (ref_v8d){0} - 746.0, hi_v = (ref_v8d){0} + 710.0;
    ref_v8d xc = (ref_v8d)(((ref_v8l)x & keep) | ((ref_v8l)lo_v & lo) | ((ref_v8l)hi_v & hi));
    ref_v8d t = xc * 1.4426950408889634 + shift, kd = t - shift;
    ref_v8d r = (xc - kd * REF_LN2_HI) - kd * REF_LN2_LO;
    ref_v8d e = (ref_v8d){0} + C[0];
    for (size_t i = 1; i < sizeof C / sizeof C[0]; i++) e = e * r + C[i];
    ref_v8l k = (ref_v8l)t - (ref_v8l)shift; /* the integer in t's low bits */
    ref_v8l k1 = (ref_v8l)((ref_v8u)(k + 2048) >> 1) - 1024;
    ref_v8l k2 = k - k1;
    ref_v8d s1 = (ref_v8d)((k1 + 1023) << 52), s2 = (ref_v8d)((k2 + 1023) << 52);
    ref_v8d res = e * s1 * s2;
    res = (ref_v8d)(((ref_v8l)res & ~nan) | ((ref_v8l)x & nan));
    memcpy(y, &res, sizeof res);
}

double num_ref_exp(double x) {
    double in[8] = {x, 0, 0, 0, 0, 0, 0, 0}, out[8];
    ref_exp8(out, in);
    return out[0];
}

/* Natural log of a positive finite x. */
static double ref_log(double x) {
    int ex;
    double m = frexp(x, &ex); /* exact: x = m 2^ex, 0.5 <= m < 1 */
    if (m < 0.70710678118654752440) {
        m *= 2.0;
        ex--;
    }
    double f = m - 1.0, s = f / (2.0 + f), z = s * s; /* log m = 2 atanh s */
    double t = 1.0 / 25.0;
    for (int n = 23; n >= 1; n -= 2) t = t * z + 1.0 / (double)n;
    double lm = 2.0 * s * t;
    return (double)ex * REF_LN2_HI + ((double)ex * REF_LN2_LO + lm);
}

/* b^e for b > 0 finite (RoPE bases); anything else goes to libm. */
static double ref_pow(double b, double e) {
    if (!(b > 0.0) || isinf(b) || !isfinite(e)) return pow(b, e);
    return num_ref_exp(e * ref_log(b));
}

/* sin a, cos a. Reduction by pi/2 in three 33-bit pieces (exact products
 * for |a| < 2^20 pi/2; beyond, still the same bits everywhere, less
 * accurate), then Taylor polynomials on |r| <= pi/4. */
static void ref_sincos(double a, double *sn, double *cs) {
    if (!isfinite(a)) {
        *sn = *cs = a - a;
        return;
    }
    static const double PIO2_1 = 1.57079632673412561417e+00, PIO2_2 = 6.07710050630396597660e-11,
                        PIO2_3 = 2.02226624871116645580e-21;
    double n = floor(a * 6.36619772367581382433e-01 + 0.5);
    double r = ((a - n * PIO2_1) - n * PIO2_2) - n * PIO2_3, z = r * r;
    /* sin r = r + r z (-1/3! + z (1/5! - ...)), cos r = 1 + z (-1/2! + z (1/4! - ...)), z = r^2 */
    static const double S[] = {-1.0 / 121645100408832000.0, 1.0 / 355687428096000.0,
                               -1.0 / 1307674368000.0,       1.0 / 6227020800.0,
                               -1.0 / 39916800.0,            1.0 / 362880.0,
                               -1.0 / 5040.0,                1.0 / 120.0,
                               -1.0 / 6.0};
    static const double C[] = {1.0 / 2432902008176640000.0, -1.0 / 6402373705728000.0,
                               1.0 / 20922789888000.0,      -1.0 / 87178291200.0,
                               1.0 / 479001600.0,           -1.0 / 3628800.0,
                               1.0 / 40320.0,               -1.0 / 720.0,
                               1.0 / 24.0,                  -1.0 / 2.0};
    double sp = S[0], cp = C[0];
    for (size_t i = 1; i < sizeof S / sizeof S[0]; i++) sp = sp * z + S[i];
    for (size_t i = 1; i < sizeof C / sizeof C[0]; i++) cp = cp * z + C[i];
    double s = r + r * z * sp, c = 1.0 + z * cp;
    switch ((int)(fmod(n, 4.0) + 4.0) % 4) {
    case 0: *sn = s, *cs = c; break;
    case 1: *sn = c, *cs = -s; break;
    case 2: *sn = -s, *cs = -c; break;
    default: *sn = -c, *cs = s; break;
    }
}

void num_ref_rmsnorm(const drift_numeric_profile *p, float *out, const float *x, const float *w,
                     int64_t n, float eps) {
    double ss = 0.0;
    for (int64_t i = 0; i < n; i++) ss += (double)x[i] * (double)x[i];
    double r = 1.0 / sqrt(ss / (double)n + (double)eps);
    for (int64_t i = 0; i < n; i++) out[i] = (float)((double)x[i] * r * (double)w[i]);
}

void num_ref_softmax(const drift_numeric_profile *p, float *x, int64_t n) {
    double m = -INFINITY, sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        if (x[i] > m) m = x[i];
    for (int64_t i = 0; i < n; i++) sum += num_ref_exp((double)x[i] - m);
    for (int64_t i = 0; i < n; i++) x[i] = (float)(num_ref_exp((double)x[i] - m) / sum);
}

double num_rope_freq(const num_rope_params *rp, int i) {
    double freq = ref_pow((double)rp->theta_base, -2.0 * i / (double)rp->n_rot);
    if (rp->scaling_factor > 1.0f && rp->orig_ctx > 0) {
        double factor = rp->scaling_factor, lo = rp->low_freq_factor, hi = rp->high_freq_factor;
        double wavelen = 2.0 * M_PI / freq;
        double lo_wl = rp->orig_ctx / lo, hi_wl = rp->orig_ctx / hi;
        if (wavelen > lo_wl) {
            freq = freq / factor;
        } else if (wavelen >= hi_wl && hi != lo) {
            double smooth = (rp->orig_ctx / wavelen - lo) / (hi - lo);
            freq = (1.0 - smooth) * freq / factor + smooth * freq;
        }
    }
    if (rp->freq_factors) freq /= (double)rp->freq_factors[i];
    return freq;
}

void num_ref_rope(const drift_numeric_profile *p, float *x, int n_heads, int64_t pos,
                  const num_rope_params *rp) {
    int half = rp->n_rot / 2;
    for (int i = 0; i < half; i++) {
        double a = (double)pos * num_rope_freq(rp, i);
        double c, s;
        ref_sincos(a, &s, &c);
        for (int h = 0; h < n_heads; h++) {
            float *v = x + (size_t)h * rp->head_dim;
            int i0 = rp->neox ? i : 2 * i, i1 = rp->neox ? i + half : 2 * i + 1;
            double x0 = v[i0], x1 = v[i1];
            v[i0] = (float)(x0 * c - x1 * s);
            v[i1] = (float)(x0 * s + x1 * c);
        }
    }
}

/* out[i] = g / (1 + e^-g) * up[i], g = gate[i], in double, 8 at a time. */
REF_INLINE void ref_swiglu8(float *out, const float *gate, const float *up, int m) {
    double ng[8] = {0, 0, 0, 0, 0, 0, 0, 0}, e[8];
    for (int j = 0; j < m; j++) ng[j] = -(double)gate[j];
    ref_exp8(e, ng);
    for (int j = 0; j < m; j++) out[j] = (float)(-ng[j] / (1.0 + e[j]) * (double)up[j]);
}

REF_INLINE void ref_swiglu(float *out, const float *gate, const float *up, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) ref_swiglu8(out + i, gate + i, up + i, 8);
    if (i < n) ref_swiglu8(out + i, gate + i, up + i, (int)(n - i));
}

typedef void ref_swiglu_fn(float *out, const float *gate, const float *up, int64_t n);

static void ref_swiglu_base(float *out, const float *gate, const float *up, int64_t n) {
    ref_swiglu(out, gate, up, n);
}

__attribute__((target("avx2"))) static void ref_swiglu_avx2(float *out, const float *gate,
                                                           const float *up, int64_t n) {
    ref_swiglu(out, gate, up, n);
}

__attribute__((target("avx512f"))) static void ref_swiglu_avx512(float *out, const float *gate,
                                                                const float *up, int64_t n) {
    ref_swiglu(out, gate, up, n);
}

void num_ref_swiglu(const drift_numeric_profile *p, float *out, const float *gate,
                    const float *up, int64_t n) {
    drift_isa isa = ref_pick_isa();
    ref_swiglu_fn *fn = isa == DRIFT_ISA_AVX512 ? ref_swiglu_avx512
                        : isa == DRIFT_ISA_AVX2 ? ref_swiglu_avx2
                                                : ref_swiglu_base;
    fn(out, gate, up, n);
}

#define REF_MAX_HEAD_DIM 1024
#define REF_ATT_STACK 2048 /* scores kept on the stack up to this many positions */
#define REF_ATT_KEYS 8     /* keys per score tile (the fast path) */
#define REF_ATT_EXP 4      /* exp8 calls interleaved (the fast path) */

/* e^x of REF_ATT_EXP * 8 values: ref_exp8's sequence of operations on each
 * lane, with the REF_ATT_EXP vectors interleaved step by step so that their
 * Horner chains overlap (lanes are independent: the same bits as
 * REF_ATT_EXP calls of ref_exp8). */
REF_INLINE void ref_exp8x(double *y, const double *xs) {
    static const double C[] = {1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0,
                               1.0 / 3628800.0,    1.0 / 362880.0,    1.0 / 40320.0,
                               1.0 / 5040.0,       1.0 / 720.0,       1.0 / 120.0,
                               1.0 / 24.0,         1.0 / 6.0,         1.0 / 2.0,
                               1.0,                1.0};
    const ref_v8d shift = (ref_v8d){0} + 0x1.8p52;
    const ref_v8d lo_v = (ref_v8d){0} - 746.0, hi_v = (ref_v8d){0} + 710.0;
    ref_v8d x[REF_ATT_EXP], t[REF_ATT_EXP], r[REF_ATT_EXP], e[REF_ATT_EXP];
    ref_v8l nan[REF_ATT_EXP];
#pragma GCC unroll 4
    for (int u = 0; u < REF_ATT_EXP; u++) {
        memcpy(&x[u], xs + 8 * u, sizeof x[u]);
        ref_v8l lo = x[u] < -746.0, hi = x[u] > 710.0;
        nan[u] = x[u] != x[u];
        ref_v8l keep = ~(nan[u] | lo | hi);
        ref_v8d xc =
            (ref_v8d)(((ref_v8l)x[u] & keep) | ((ref_v8l)lo_v & lo) | ((ref_v8l)hi_v & hi));
        t[u] = xc * 1.4426950408889634 + shift;
        ref_v8d kd = t[u] - shift;
        r[u] = (xc - kd * REF_LN2_HI) - kd * REF_LN2_LO;
        e[u] = (ref_v8d){0} + C[0];
    }
    for (size_t i = 1; i < sizeof C / sizeof C[0]; i++)
#pragma GCC unroll 4
        for (int u = 0; u < REF_ATT_EXP; u++) e[u] = e[u] * r[u] + C[i];
#pragma GCC unroll 4
    for (int u = 0; u < REF_ATT_EXP; u++) {
        ref_v8l k = (ref_v8l)t[u] - (ref_v8l)shift;
        ref_v8l k1 = (ref_v8l)((ref_v8u)(k + 2048) >> 1) - 1024;
        ref_v8l k2 = k - k1;
        ref_v8d s1 = (ref_v8d)((k1 + 1023) << 52), s2 = (ref_v8d)((k2 + 1023) << 52);
        ref_v8d res = e[u] * s1 * s2;
        res = (ref_v8d)(((ref_v8l)res & ~nan[u]) | ((ref_v8l)x[u] & nan[u]));
        memcpy(y + 8 * u, &res, sizeof res);
    }
}

/* The dots q . w[j] of REF_ATT_KEYS = 8 key vectors in the lane order, K a
 * multiple of 8: lane vectors a[j] as in ref_tile, then the fixed tree
 * ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)) of each, done for
 * eight keys at once by shuffles that pair the same lanes, with the same
 * operands on the same sides of every add (so the same bits as
 * ref_lanes_sum). o[j] = key j's dot times scale. */
REF_INLINE void ref_dots8(double *o, const double *q, const float *const *w, int64_t K,
                          double scale) {
    ref_v8d a[REF_ATT_KEYS];
#pragma GCC unroll 8
    for (int j = 0; j < REF_ATT_KEYS; j++) a[j] = (ref_v8d){0};
    for (int64_t k = 0; k < K; k += 8) {
        ref_v8d qv;
        memcpy(&qv, q + k, sizeof qv);
#pragma GCC unroll 8
        for (int j = 0; j < REF_ATT_KEYS; j++) {
            ref_v8f f;
            memcpy(&f, w[j] + k, sizeof f);
            a[j] += qv * __builtin_convertvector(f, ref_v8d);
        }
    }
    /* b[i]: lanes 0-3 = (l_i + l_{i+4}) of key 2i, lanes 4-7 of key 2i+1 */
    ref_v8d b[4], c[2];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++)
        b[i] = __builtin_shufflevector(a[2 * i], a[2 * i + 1], 0, 1, 2, 3, 8, 9, 10, 11) +
               __builtin_shufflevector(a[2 * i], a[2 * i + 1], 4, 5, 6, 7, 12, 13, 14, 15);
    /* c[i]: lane pairs (l0+l4)+(l2+l6), (l1+l5)+(l3+l7) of keys 4i .. 4i+3 */
#pragma GCC unroll 2
    for (int i = 0; i < 2; i++)
        c[i] = __builtin_shufflevector(b[2 * i], b[2 * i + 1], 0, 1, 4, 5, 8, 9, 12, 13) +
               __builtin_shufflevector(b[2 * i], b[2 * i + 1], 2, 3, 6, 7, 10, 11, 14, 15);
    ref_v8d dot = __builtin_shufflevector(c[0], c[1], 0, 2, 4, 6, 8, 10, 12, 14) +
                  __builtin_shufflevector(c[0], c[1], 1, 3, 5, 7, 9, 11, 13, 15);
    dot = dot * scale;
    memcpy(o, &dot, sizeof dot);
}

/* acc[d] += e[t] * (double)row_t[d] for t < n in index order (row_t = rows
 * + t * stride bytes), d < 8 * nv: the accumulators stay in registers over
 * all of t; each element's chain of adds is the one of the plain loop. */
REF_INLINE void ref_vacc(int nv, double *acc, const double *e, const char *rows, size_t stride,
                         int n) {
    ref_v8d a[4];
#pragma GCC unroll 4
    for (int i = 0; i < nv; i++) memcpy(&a[i], acc + 8 * i, sizeof a[i]);
    for (int t = 0; t < n; t++) {
        const float *row = (const float *)(rows + (size_t)t * stride);
        ref_v8d ev = (ref_v8d){0} + e[t];
#pragma GCC unroll 4
        for (int i = 0; i < nv; i++) {
            ref_v8f f;
            memcpy(&f, row + 8 * i, sizeof f);
            a[i] += ev * __builtin_convertvector(f, ref_v8d);
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < nv; i++) memcpy(acc + 8 * i, &a[i], sizeof a[i]);
}

/* ref_vacc over all of d < head_dim (a multiple of 8), 32 at a time. */
REF_INLINE void ref_vacc_all(double *acc, const double *e, const char *rows, size_t stride, int n,
                             int head_dim) {
    int d = 0;
    for (; d + 32 <= head_dim; d += 32) ref_vacc(4, acc + d, e, rows + 4 * d, stride, n);
    switch ((head_dim - d) / 8) {
    case 3: ref_vacc(3, acc + d, e, rows + 4 * d, stride, n); break;
    case 2: ref_vacc(2, acc + d, e, rows + 4 * d, stride, n); break;
    case 1: ref_vacc(1, acc + d, e, rows + 4 * d, stride, n); break;
    default: break;
    }
}

/* ref_attend's computation when head_dim is a multiple of 8 and the scores
 * fit in s: the same operations in the same order per score, weight and
 * element, arranged for speed: eight keys per score tile (ref_dots8),
 * REF_ATT_EXP exp8s at a time, and V summed a block of positions at a time
 * with the accumulators in registers (ref_vacc). kv: scratch of
 * REF_ATT_KEYS * REF_MAX_HEAD_DIM floats for vectors of other formats, acc
 * (head_dim) for the sums. */
REF_INLINE void ref_attend_fast(const drift_numeric_profile *p, float *out, const double *qd,
                                const void *k, const void *v, size_t stride_bytes, int n_pos,
                                int head_dim, float scale, double *s, float *kv, double *acc) {
    bool direct = p->kv == DRIFT_DTYPE_F32;
    double m = -INFINITY;
    /* pass 1: scores and their max */
    for (int t0 = 0; t0 < n_pos; t0 += REF_ATT_KEYS) {
        int nw = n_pos - t0 < REF_ATT_KEYS ? n_pos - t0 : REF_ATT_KEYS;
        const float *wp[REF_ATT_KEYS];
        for (int j = 0; j < REF_ATT_KEYS; j++) {
            const char *src = (const char *)k + (size_t)(t0 + (j < nw ? j : 0)) * stride_bytes;
            if (direct) {
                wp[j] = (const float *)src;
            } else if (j < nw) {
                num_kv_load(p->kv, kv + (size_t)j * head_dim, src, head_dim);
                wp[j] = kv + (size_t)j * head_dim;
            } else {
                wp[j] = kv;
            }
        }
        double o[REF_ATT_KEYS];
        ref_dots8(o, qd, wp, head_dim, (double)scale);
        for (int j = 0; j < nw; j++) {
            s[t0 + j] = o[j];
            m = o[j] > m ? o[j] : m; /* the plain loop's if, without a branch */
        }
    }
    /* pass 2: weights, 8 * REF_ATT_EXP at a time */
    for (int t0 = 0; t0 < n_pos; t0 += 8 * REF_ATT_EXP) {
        int nb = n_pos - t0 < 8 * REF_ATT_EXP ? n_pos - t0 : 8 * REF_ATT_EXP;
        double a[8 * REF_ATT_EXP], e[8 * REF_ATT_EXP];
        for (int j = 0; j < 8 * REF_ATT_EXP; j++) a[j] = j < nb ? s[t0 + j] - m : 0.0;
        ref_exp8x(e, a);
        for (int j = 0; j < nb; j++) s[t0 + j] = e[j];
    }
    /* pass 3: their sum, and the weighted sum of V */
    double sum = 0.0;
    for (int t = 0; t < n_pos; t++) sum += s[t];
    for (int d = 0; d < head_dim; d++) acc[d] = 0.0;
    if (direct) {
        ref_vacc_all(acc, s, v, stride_bytes, n_pos, head_dim);
    } else {
        int rows = REF_ATT_KEYS * REF_MAX_HEAD_DIM / head_dim;
        for (int t0 = 0; t0 < n_pos; t0 += rows) {
            int nb = n_pos - t0 < rows ? n_pos - t0 : rows;
            for (int j = 0; j < nb; j++)
                num_kv_load(p->kv, kv + (size_t)j * head_dim,
                            (const char *)v + (size_t)(t0 + j) * stride_bytes, head_dim);
            ref_vacc_all(acc, s + t0, (const char *)kv, (size_t)head_dim * sizeof(float), nb,
                         head_dim);
        }
    }
    for (int d = 0; d < head_dim; d++) out[d] = n_pos > 0 ? (float)(acc[d] / sum) : 0.0f;
}

/* Attention of one query head (num_ref_attention's contract), s (n_pos)
 * scratch for the scores or NULL (then each score is computed twice, with
 * the same bits). Scores: q . k_t in the lane order (four positions per
 * tile), times scale, in double; weights exp(s_t - max); V summed per
 * element over t in index order; out = acc / sum. When head_dim is a
 * multiple of 8 and s is given, ref_attend_fast does the same in a faster
 * arrangement. */
REF_INLINE void ref_attend(const drift_numeric_profile *p, float *out, const float *q,
                           const void *k, const void *v, size_t stride_bytes, int n_pos,
                           int head_dim, float scale, double *s) {
    double qd[REF_MAX_HEAD_DIM], acc[REF_MAX_HEAD_DIM];
    float kv[REF_ATT_KEYS * REF_MAX_HEAD_DIM]; /* loaded K or V vectors */
    for (int d = 0; d < head_dim; d++) qd[d] = (double)q[d];
    if (s && head_dim % 8 == 0) {
        ref_attend_fast(p, out, qd, k, v, stride_bytes, n_pos, head_dim, scale, s, kv, acc);
        return;
    }
    bool direct = p->kv == DRIFT_DTYPE_F32; /* read f32 vectors in place */
    const double *xp[1] = {qd};
    double m = -INFINITY;
    /* pass 1: scores (kept in s when there is room) and their max */
    for (int t0 = 0; t0 < n_pos; t0 += REF_MAX_NR) {
        int nw = n_pos - t0 < REF_MAX_NR ? n_pos - t0 : REF_MAX_NR;
        const float *wp[REF_MAX_NR];
        for (int j = 0; j < REF_MAX_NR; j++) {
            const char *src = (const char *)k + (size_t)(t0 + (j < nw ? j : 0)) * stride_bytes;
            if (direct) {
                wp[j] = (const float *)src;
            } else {
                num_kv_load(p->kv, kv + (size_t)j * head_dim, src, head_dim);
                wp[j] = kv + (size_t)j * head_dim;
            }
        }
        double o[REF_MAX_NR];
        ref_tile(1, REF_MAX_NR, xp, wp, head_dim, o);
        for (int j = 0; j < nw; j++) {
            double sc = o[j] * (double)scale;
            if (s) s[t0 + j] = sc;
            if (sc > m) m = sc;
        }
    }
    /* pass 2: weights (8 at a time when the scores were kept) and the
     * weighted sum of V */
    if (s)
        for (int t0 = 0; t0 < n_pos; t0 += 8) {
            int nb = n_pos - t0 < 8 ? n_pos - t0 : 8;
            double a[8] = {0, 0, 0, 0, 0, 0, 0, 0}, e[8];
            for (int j = 0; j < nb; j++) a[j] = s[t0 + j] - m;
            ref_exp8(e, a);
            for (int j = 0; j < nb; j++) s[t0 + j] = e[j];
        }
    double sum = 0.0;
    for (int d = 0; d < head_dim; d++) acc[d] = 0.0;
    for (int t = 0; t < n_pos; t++) {
        double e;
        if (s) {
            e = s[t];
        } else {
            const char *src = (const char *)k + (size_t)t * stride_bytes;
            const float *wp[1] = {(const float *)src};
            if (!direct) {
                num_kv_load(p->kv, kv, src, head_dim);
                wp[0] = kv;
            }
            double o;
            ref_tile(1, 1, xp, wp, head_dim, &o);
            e = num_ref_exp(o * (double)scale - m);
        }
        sum += e;
        const char *src = (const char *)v + (size_t)t * stride_bytes;
        const float *vt = (const float *)src;
        if (!direct) {
            num_kv_load(p->kv, kv, src, head_dim);
            vt = kv;
        }
        for (int d = 0; d < head_dim; d++) acc[d] += e * (double)vt[d];
    }
    for (int d = 0; d < head_dim; d++) out[d] = n_pos > 0 ? (float)(acc[d] / sum) : 0.0f;
}

typedef void ref_attend_fn(const drift_numeric_profile *p, float *out, const float *q,
                           const void *k, const void *v, size_t stride_bytes, int n_pos,
                           int head_dim, float scale, double *s);

static void ref_attend_base(const drift_numeric_profile *p, float *out, const float *q,
                            const void *k, const void *v, size_t stride_bytes, int n_pos,
                            int head_dim, float scale, double *s) {
    ref_attend(p, out, q, k, v, stride_bytes, n_pos, head_dim, scale, s);
}

__attribute__((target("avx2"))) static void ref_attend_avx2(const drift_numeric_profile *p,
                                                           float *out, const float *q,
                                                           const void *k, const void *v,
                                                           size_t stride_bytes, int n_pos,
                                                           int head_dim, float scale,
                                                           double *s) {
    ref_attend(p, out, q, k, v, stride_bytes, n_pos, head_dim, scale, s);
}

__attribute__((target("avx512f"))) static void ref_attend_avx512(const drift_numeric_profile *p,
                                                                float *out, const float *q,
                                                                const void *k, const void *v,
                                                                size_t stride_bytes, int n_pos,
                                                                int head_dim, float scale,
                                                                double *s) {
    ref_attend(p, out, q, k, v, stride_bytes, n_pos, head_dim, scale, s);
}

void num_ref_attention(const drift_numeric_profile *p, float *out, const float *q,
                       const void *k, const void *v, size_t stride_bytes, int n_pos,
                       int head_dim, float scale, float *scratch) {
    assert(head_dim <= REF_MAX_HEAD_DIM);
    double s_stack[REF_ATT_STACK];
    double *s = n_pos <= REF_ATT_STACK ? s_stack : malloc((size_t)n_pos * sizeof *s);
    drift_isa isa = ref_pick_isa();
    ref_attend_fn *fn = isa == DRIFT_ISA_AVX512 ? ref_attend_avx512
                        : isa == DRIFT_ISA_AVX2 ? ref_attend_avx2
                                                : ref_attend_base;
    /* the caller's scratch is not needed: K/V vectors of other formats are
     * loaded into a buffer on the stack */
    (void)scratch;
    fn(p, out, q, k, v, stride_bytes, n_pos, head_dim, scale, s);
    if (s != s_stack) free(s);
}

/* ---------------------------------------------------------------- MoE router */

void num_ref_moe_route(const float *lg, int E, int K, double (*exp_fn)(double), double *pr, int *sel, float *wt) {
    /* softmax over all experts in double, top-k (ties: lower index), renormalise */
    double mx = lg[0], s = 0;
    for (int e = 1; e < E; e++)
        if (lg[e] > mx) mx = lg[e];
    for (int e = 0; e < E; e++) s += (pr[e] = exp_fn((double)lg[e] - mx));
    double tot = 0;
    for (int k = 0; k < K; k++) {
        int best = -1;
        for (int e = 0; e < E; e++) {
            int used = 0;
            for (int j = 0; j < k; j++) used |= sel[j] == e;
            if (!used && (best < 0 || pr[e] > pr[best])) best = e;
        }
        sel[k] = best;
        tot += pr[best] / s;
    }
    for (int k = 0; k < K; k++) wt[k] = (float)(pr[sel[k]] / s / tot);
}
