/* kernels_cpu.c - fast CPU kernels (AVX-512 / AVX2+FMA chosen at run time,
 * threads of workers.c's pool) and the dispatchers num_* (isa=ref ->
 * kernels_ref.c).
 *
 * Matmul y (B, N) = act(x) (B, K) @ W^T, W (N, K) in any format.
 *
 *   for each panel of NP=24 weight rows      (threads split the panels)
 *     dequantize the panel to f32 (zero rows pad a short last panel;
 *       full f32 panels are used in place)
 *     for each block of MB=48 activation rows
 *       for each reduction chunk (split-K; one chunk unless reduce=blocked)
 *         for each k-block of KC=512 within the chunk
 *           register tiles of MR x NR outputs (AVX-512 6x4, AVX2 4x3; 1xNR
 *           for leftover rows); each output owns one L-lane accumulator
 *           vector kept in a block buffer between k-blocks
 *         chunk result = lanes summed by a fixed halving tree;
 *         y = chunk results added in chunk order
 *
 * Prefill (B >= MR): x is packed once into MR-row tiles and each w panel into
 * NR-row tiles, [step][row][L] (two sequential streams per tile, no 4 KiB
 * aliasing between rows). Batched decode (MR <= B < MB): x packed, full
 * f32/bf16/f16 panels read in place (converting a panel per call would cost
 * as much as its few tiles); bf16/f16 panels in place at any B too, unless
 * their rows are a multiple of 4 KiB apart. Decode (B < MR): plain rows, and f32/bf16/f16
 * weights are read in place (bf16/f16 converted in registers; Q8_0/Q4_0
 * blocks too with AVX-512), so decode streams the weights once at memory
 * speed. Scratch: the activation copies
 * live in a per-thread buffer kept between calls (page faults of a fresh
 * allocation per call were half of prefill time in a VM).
 *
 * So output (b, n) is always: lane l accumulates fma(x[k], w[k]) over the k
 * of its chunk with k = l (mod L) in increasing k; lanes halve-summed; chunks
 * added in order. That depends on K, the ISA's L and the profile only -- not
 * on B, on where the row falls in a tile, or on the thread count: batch and
 * thread invariance hold by construction (tests/ops proves it bit for bit).
 * Chunk boundaries are multiples of 16 so they are the same for every ISA.
 *
 * Other accumulators (f64, bf16-emulated), pairwise reduction and the
 * scalar ISA go through a generic per-output path that uses the same lane
 * structure (L = 1 for scalar, which multiplies then adds: no FMA).
 * batch_invariant=0 (study mode): B <= 4 uses 4x more chunks, as GPU split-K
 * kernels do for small batches, so a row's result depends on its batch.
 *
 * The element-wise kernels (rmsnorm, softmax, rope, swiglu, attention) work
 * in float with 8 explicit lanes (SSE2 intrinsics, a multiply then an add,
 * never an FMA; scalar C elsewhere, no FMA contraction without -march), so
 * they give the same bits on any x86-64. */
#include <assert.h>
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "model/kernels_ref.h"
#include "model/model_internal.h"
#include "model/numerics.h"
#include "model/workers.h"

#define NP 24   /* weight rows per panel (multiple of every NR) */
#define MB 48   /* activation rows per block (multiple of every MR) */
#define KC 512  /* k-block (multiple of 16) */
#define LMAX 16
/* multiply-adds below which a matmul runs on the calling thread alone */
#define MT_MIN_MACS 65536.0

/* ---------------------------------------------------------------------------
 * Per-thread scratch, kept between calls: the calling thread's activation
 * copies, and each worker's weight panel, row and accumulator buffers (the
 * pool's threads live on, so theirs are reused too). A fresh allocation per
 * call costs a page fault per 4 KiB (in a VM ~10% of a prefill matmul) and,
 * per decode step, a malloc / free round trip per matmul and thread. Freed
 * when the thread exits (pthread key destructor).
 * ------------------------------------------------------------------------- */
enum { SCR_XA, SCR_XPK, SCR_WBUF, SCR_ROWBUF, SCR_CBUF, SCR_SLOTS };

typedef struct tl_scratch {
    void *p[SCR_SLOTS];
    size_t cap[SCR_SLOTS];
} tl_scratch;

static pthread_key_t g_scratch_key;
static pthread_once_t g_scratch_once = PTHREAD_ONCE_INIT;

static void scratch_destroy(void *v) {
    tl_scratch *s = v;
    for (int i = 0; i < SCR_SLOTS; i++) free(s->p[i]);
    free(s);
}

static void scratch_init(void) { (void)pthread_key_create(&g_scratch_key, scratch_destroy); }

/* 64-byte aligned buffer of >= bytes in slot (SCR_*) of the calling
 * thread; NULL if out of memory. */
static float *scratch_get(int slot, size_t bytes) {
    pthread_once(&g_scratch_once, scratch_init);
    tl_scratch *s = pthread_getspecific(g_scratch_key);
    if (!s) {
        s = calloc(1, sizeof *s);
        if (!s || pthread_setspecific(g_scratch_key, s)) {
            free(s);
            return NULL;
        }
    }
    if (s->cap[slot] < bytes) {
        size_t n = (bytes + 4095) / 4096 * 4096;
        free(s->p[slot]);
        s->p[slot] = aligned_alloc(64, n);
        s->cap[slot] = s->p[slot] ? n : 0;
    }
    return s->p[slot];
}

/* ---------------------------------------------------------------------------
 * ISA (chosen by cpu_features.c)
 * ------------------------------------------------------------------------- */
static int isa_lanes(drift_isa isa) {
    return isa == DRIFT_ISA_AVX512 ? 16 : isa == DRIFT_ISA_AVX2 ? 8 : 1;
}

/* ---------------------------------------------------------------------------
 * Panel dequantization (bf16/f16 with SIMD; other formats via the traits,
 * which give the same f32 values)
 * ------------------------------------------------------------------------- */
__attribute__((target("avx512f"))) static void deq_bf16_avx512(float *dst, const uint16_t *src,
                                                               int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i h = _mm256_loadu_si256((const __m256i *)(src + i));
        __m512i w = _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16);
        _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(w));
    }
    for (; i < n; i++) dst[i] = num_bf16_to_f32(src[i]);
}

__attribute__((target("avx2"))) static void deq_bf16_avx2(float *dst, const uint16_t *src,
                                                          int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(src + i));
        __m256i w = _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
        _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(w));
    }
    for (; i < n; i++) dst[i] = num_bf16_to_f32(src[i]);
}

__attribute__((target("avx2,f16c"))) static void deq_f16_f16c(float *dst, const uint16_t *src,
                                                              int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    for (; i < n; i++) dst[i] = num_f16_to_f32(src[i]);
}

/* GGUF blocks and per-row int8 / fp8, AVX-512. Each value is computed with
 * the same f32 operations as the traits' scalar dequantizer (a convert, one
 * multiply), so the results are the same bits. */
__attribute__((target("avx512f"))) static void deq_q8_0_avx512(float *dst, const uint8_t *src,
                                                               int64_t n) {
    for (int64_t b = 0; b < n / 32; b++, src += 34) {
        uint16_t h;
        memcpy(&h, src, 2);
        __m512 d = _mm512_set1_ps(num_f16_to_f32(h));
        for (int half = 0; half < 2; half++) {
            __m128i q = _mm_loadu_si128((const __m128i *)(src + 2 + 16 * half));
            __m512 v = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q));
            _mm512_storeu_ps(dst + b * 32 + 16 * half, _mm512_mul_ps(v, d));
        }
    }
}

__attribute__((target("avx512f"))) static void deq_q4_0_avx512(float *dst, const uint8_t *src,
                                                               int64_t n) {
    const __m512i m15 = _mm512_set1_epi32(15), eight = _mm512_set1_epi32(8);
    for (int64_t b = 0; b < n / 32; b++, src += 18) {
        uint16_t h;
        memcpy(&h, src, 2);
        __m512 d = _mm512_set1_ps(num_f16_to_f32(h));
        __m512i q = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(src + 2)));
        __m512i lo = _mm512_sub_epi32(_mm512_and_si512(q, m15), eight);
        __m512i hi = _mm512_sub_epi32(_mm512_srli_epi32(q, 4), eight);
        _mm512_storeu_ps(dst + b * 32, _mm512_mul_ps(_mm512_cvtepi32_ps(lo), d));
        _mm512_storeu_ps(dst + b * 32 + 16, _mm512_mul_ps(_mm512_cvtepi32_ps(hi), d));
    }
}

__attribute__((target("avx512f"))) static void deq_int8_avx512(float *dst, const int8_t *src,
                                                               float s, int64_t n) {
    __m512 sv = _mm512_set1_ps(s);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m128i q = _mm_loadu_si128((const __m128i *)(src + i));
        _mm512_storeu_ps(dst + i, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), sv));
    }
    for (; i < n; i++) dst[i] = (float)src[i] * s;
}

/* e4m3 by bits: normal = sign | (e + 120) << 23 | m << 20; e = 0: m * 2^-9;
 * 0x7f / 0xff: NaN (0x7fc00000, as the table holds). */
__attribute__((target("avx512f"))) static void deq_e4m3_avx512(float *dst, const uint8_t *src,
                                                               float s, int64_t n) {
    __m512 sv = _mm512_set1_ps(s);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i c = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(src + i)));
        __m512i sign = _mm512_slli_epi32(_mm512_and_si512(c, _mm512_set1_epi32(0x80)), 24);
        __m512i e = _mm512_and_si512(_mm512_srli_epi32(c, 3), _mm512_set1_epi32(15));
        __m512i m = _mm512_and_si512(c, _mm512_set1_epi32(7));
        __m512i nb = _mm512_or_si512(
            sign, _mm512_or_si512(_mm512_slli_epi32(_mm512_add_epi32(e, _mm512_set1_epi32(120)), 23),
                                  _mm512_slli_epi32(m, 20)));
        __m512 sub = _mm512_mul_ps(_mm512_cvtepi32_ps(m), _mm512_set1_ps(0x1p-9f));
        sub = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(sub), sign));
        __mmask16 is_sub = _mm512_cmpeq_epi32_mask(e, _mm512_setzero_si512());
        __mmask16 is_nan = _mm512_cmpeq_epi32_mask(_mm512_and_si512(c, _mm512_set1_epi32(0x7f)),
                                                   _mm512_set1_epi32(0x7f));
        __m512 v = _mm512_mask_blend_ps(is_sub, _mm512_castsi512_ps(nb), sub);
        v = _mm512_mask_blend_ps(is_nan, v, _mm512_castsi512_ps(_mm512_set1_epi32(0x7fc00000)));
        _mm512_storeu_ps(dst + i, _mm512_mul_ps(v, sv));
    }
    for (; i < n; i++) dst[i] = num_e4m3_to_f32(src[i]) * s;
}

/* e5m2 is the top byte of an f16 (exact; NaN payloads may differ). */
__attribute__((target("avx512f"))) static void deq_e5m2_avx512(float *dst, const uint8_t *src,
                                                               float s, int64_t n) {
    __m512 sv = _mm512_set1_ps(s);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i c = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(src + i)));
        __m256i h = _mm512_cvtepi32_epi16(_mm512_slli_epi32(c, 8));
        _mm512_storeu_ps(dst + i, _mm512_mul_ps(_mm512_cvtph_ps(h), sv));
    }
    for (; i < n; i++) dst[i] = num_e5m2_to_f32(src[i]) * s;
}

static void deq_row(const num_qmat *W, int64_t r, float *dst, drift_isa isa) {
    const void *src = (const char *)W->data + (size_t)r * W->row_bytes;
    int one_scale = W->group == W->cols; /* INT8 / FP8: a single scale per row */
    float s = W->scales ? W->scales[r * (W->cols / W->group)] * W->tensor_scale : W->tensor_scale;
    if (isa == DRIFT_ISA_AVX512) {
        switch (W->dtype) {
        case DRIFT_DTYPE_BF16: deq_bf16_avx512(dst, src, W->cols); return;
        case DRIFT_DTYPE_Q8_0: deq_q8_0_avx512(dst, src, W->cols); return;
        case DRIFT_DTYPE_Q4_0: deq_q4_0_avx512(dst, src, W->cols); return;
        case DRIFT_DTYPE_INT8:
            if (one_scale) { deq_int8_avx512(dst, src, W->scales[r], W->cols); return; }
            break;
        case DRIFT_DTYPE_FP8_E4M3:
            if (one_scale) { deq_e4m3_avx512(dst, src, s, W->cols); return; }
            break;
        case DRIFT_DTYPE_FP8_E5M2:
            if (one_scale) { deq_e5m2_avx512(dst, src, s, W->cols); return; }
            break;
        default: break;
        }
    }
    if (W->dtype == DRIFT_DTYPE_BF16 && isa == DRIFT_ISA_AVX2)
        deq_bf16_avx2(dst, src, W->cols);
    else if (W->dtype == DRIFT_DTYPE_F16 && isa != DRIFT_ISA_SCALAR && num_cpu_has_f16c())
        deq_f16_f16c(dst, src, W->cols); /* F16C conversion is exact, as the scalar one */
    else
        num_qmat_dequantize_row(W, r, dst);
}

void num_fast_dequantize_row(const num_qmat *m, int64_t r, float *dst) {
    deq_row(m, r, dst, num_isa_resolve(DRIFT_ISA_AUTO));
}

/* Pointer to an f32 panel of NP rows starting at row n0 (ld = K): W's own
 * memory for full f32 panels, otherwise buf filled (zero rows past N). */
static const float *panel_get(const num_qmat *W, int64_t n0, float *buf, drift_isa isa) {
    int64_t K = W->cols, N = W->rows;
    if (W->dtype == DRIFT_DTYPE_F32 && n0 + NP <= N) return (const float *)W->data + n0 * K;
    for (int64_t j = 0; j < NP; j++) {
        if (n0 + j < N) deq_row(W, n0 + j, buf + j * K, isa);
        else memset(buf + j * K, 0, (size_t)K * sizeof(float));
    }
    return buf;
}

/* ---------------------------------------------------------------------------
 * Micro-kernels. A tile is mr x NR outputs, mr = MR (full) or 1 (leftover
 * rows); acc holds their lane vectors (mr*NR, L) in the block buffer. The
 * operands are addressed by step (L consecutive k) and row:
 *   x row i, step s: x + s*xs + i*xi        w row j, step s: w + s*ws + j*wj
 * which covers both the packed layouts (tile-contiguous, [s][row][L]) and
 * plain rows (xs = L, xi = ld). k0 is a multiple of L; lanes past k1 are
 * masked, never added (so -0.0 accumulators stay -0.0 as in the emulation).
 * wkind: 0 = f32 (strided as above), 1 = bf16 and 2 = f16 plain rows of ld
 * wj elements (converted in registers: decode streams them from memory).
 * ------------------------------------------------------------------------- */
#define A512_MR 6
#define A512_NR 4

__attribute__((target("avx512f,avx512bw,avx512vl"))) static inline __m512 ld512_w(const void *w, int wkind,
                                                                size_t off, __mmask16 m) {
    if (wkind == 1) {
        __m256i h = _mm256_maskz_loadu_epi16(m, (const uint16_t *)w + off);
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    if (wkind == 2) return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *)w + off));
    return _mm512_maskz_loadu_ps(m, (const float *)w + off);
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) static inline void
mk512_tile(float *acc, int first, const float *x, size_t xs, size_t xi, int mr, const void *w, int wkind,
           size_t ws, size_t wj, int64_t k0, int64_t k1) {
    __m512 c[A512_MR][A512_NR];
#pragma GCC unroll 6
    for (int i = 0; i < A512_MR; i++)
#pragma GCC unroll 4
        for (int j = 0; j < A512_NR; j++)
            c[i][j] = i < mr && !first ? _mm512_loadu_ps(acc + (i * A512_NR + j) * 16) : _mm512_setzero_ps();
    int64_t s = k0 / 16, k = k0;
    const float *xp = x + (size_t)s * xs;
    size_t wo = (size_t)s * ws;
    if (mr == A512_MR && wkind) { /* 16-bit weight rows in place, widened in registers */
        for (; k + 16 <= k1; k += 16, xp += xs, wo += ws) {
            __m512 wv[A512_NR];
#pragma GCC unroll 4
            for (int j = 0; j < A512_NR; j++) wv[j] = ld512_w(w, wkind, wo + j * wj, 0xffff);
#pragma GCC unroll 6
            for (int i = 0; i < A512_MR; i++) {
                __m512 xv = _mm512_loadu_ps(xp + i * xi);
#pragma GCC unroll 4
                for (int j = 0; j < A512_NR; j++) c[i][j] = _mm512_fmadd_ps(xv, wv[j], c[i][j]);
            }
        }
    } else if (mr == A512_MR) { /* f32 operands (packed, or weight rows in place) */
        const float *wp = (const float *)w + wo;
        for (; k + 16 <= k1; k += 16, xp += xs, wp += ws) {
            __m512 wv[A512_NR];
#pragma GCC unroll 4
            for (int j = 0; j < A512_NR; j++) wv[j] = _mm512_loadu_ps(wp + j * wj);
#pragma GCC unroll 6
            for (int i = 0; i < A512_MR; i++) {
                __m512 xv = _mm512_loadu_ps(xp + i * xi);
#pragma GCC unroll 4
                for (int j = 0; j < A512_NR; j++) c[i][j] = _mm512_fmadd_ps(xv, wv[j], c[i][j]);
            }
        }
        wo = (size_t)(wp - (const float *)w);
    } else {
        for (; k + 16 <= k1; k += 16, xp += xs, wo += ws) {
            __m512 xv = _mm512_loadu_ps(xp);
#pragma GCC unroll 4
            for (int j = 0; j < A512_NR; j++)
                c[0][j] = _mm512_fmadd_ps(xv, ld512_w(w, wkind, wo + j * wj, 0xffff), c[0][j]);
        }
    }
    if (k < k1) { /* masked tail */
        __mmask16 m = (__mmask16)((1u << (k1 - k)) - 1u);
        __m512 wv[A512_NR];
#pragma GCC unroll 4
        for (int j = 0; j < A512_NR; j++) wv[j] = ld512_w(w, wkind, wo + j * wj, m);
#pragma GCC unroll 6
        for (int i = 0; i < A512_MR; i++) {
            if (i >= mr) break;
            __m512 xv = _mm512_maskz_loadu_ps(m, xp + i * xi);
#pragma GCC unroll 4
            for (int j = 0; j < A512_NR; j++) c[i][j] = _mm512_mask3_fmadd_ps(xv, wv[j], c[i][j], m);
        }
    }
#pragma GCC unroll 6
    for (int i = 0; i < A512_MR; i++)
#pragma GCC unroll 4
        for (int j = 0; j < A512_NR; j++)
            if (i < mr) _mm512_storeu_ps(acc + (i * A512_NR + j) * 16, c[i][j]);
}

/* Decode over GGUF blocks in place: 1 row x NR outputs, w = the panel's first
 * row (row_bytes apart), wkind 3 = Q8_0, 4 = Q4_0. Each weight is computed
 * as the dequantizer does (convert, one multiply by d), then fma'd: the
 * same bits as dequantizing first. K is a multiple of 32, chunk bounds are
 * multiples of 16, so every step is a full half-block. */
__attribute__((target("avx512f,f16c"))) static void mk512_row_q(float *acc, int first, const float *x,
                                                                const uint8_t *w, int wkind,
                                                                size_t row_bytes, int64_t k0,
                                                                int64_t k1) {
    __m512 c[A512_NR];
    for (int j = 0; j < A512_NR; j++) c[j] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(acc + j * 16);
    const size_t bb = wkind == 3 ? 34 : 18;
    const __m512i m15 = _mm512_set1_epi32(15), eight = _mm512_set1_epi32(8);
    for (int64_t k = k0; k < k1; k += 16) {
        __m512 xv = _mm512_loadu_ps(x + k);
        int64_t blk = k / 32;
        int half = (int)((k / 16) & 1);
#pragma GCC unroll 4
        for (int j = 0; j < A512_NR; j++) {
            const uint8_t *b = w + (size_t)j * row_bytes + (size_t)blk * bb;
            uint16_t h;
            memcpy(&h, b, 2);
            __m512 d = _mm512_set1_ps(_cvtsh_ss(h));
            __m512 wv;
            if (wkind == 3) {
                __m128i q = _mm_loadu_si128((const __m128i *)(b + 2 + 16 * half));
                wv = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), d);
            } else {
                __m512i q = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(b + 2)));
                q = half ? _mm512_srli_epi32(q, 4) : _mm512_and_si512(q, m15);
                wv = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(q, eight)), d);
            }
            c[j] = _mm512_fmadd_ps(xv, wv, c[j]);
        }
    }
    for (int j = 0; j < A512_NR; j++) _mm512_storeu_ps(acc + j * 16, c[j]);
}

#define A2_MR 4
#define A2_NR 3

__attribute__((target("avx2,fma,f16c"))) static inline __m256 ld256_w(const void *w, int wkind,
                                                                     size_t off, int rem) {
    if (rem >= 8) {
        if (wkind == 1) {
            __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)w + off));
            return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
        }
        if (wkind == 2) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)w + off)));
        return _mm256_loadu_ps((const float *)w + off);
    }
    float t[8] = {0};
    for (int l = 0; l < rem; l++) {
        if (wkind == 1) t[l] = num_bf16_to_f32(((const uint16_t *)w)[off + l]);
        else if (wkind == 2) t[l] = num_f16_to_f32(((const uint16_t *)w)[off + l]);
        else t[l] = ((const float *)w)[off + l];
    }
    return _mm256_loadu_ps(t);
}

__attribute__((target("avx2,fma,f16c"))) static inline void
mk2_tile(float *acc, int first, const float *x, size_t xs, size_t xi, int mr, const void *w, int wkind,
         size_t ws, size_t wj, int64_t k0, int64_t k1) {
    __m256 c[A2_MR][A2_NR];
#pragma GCC unroll 4
    for (int i = 0; i < A2_MR; i++)
#pragma GCC unroll 3
        for (int j = 0; j < A2_NR; j++)
            c[i][j] = i < mr && !first ? _mm256_loadu_ps(acc + (i * A2_NR + j) * 8) : _mm256_setzero_ps();
    int64_t s = k0 / 8, k = k0;
    const float *xp = x + (size_t)s * xs;
    size_t wo = (size_t)s * ws;
    if (mr == A2_MR && wkind) { /* 16-bit weight rows in place, widened in registers */
        for (; k + 8 <= k1; k += 8, xp += xs, wo += ws) {
            __m256 wv[A2_NR];
#pragma GCC unroll 3
            for (int j = 0; j < A2_NR; j++) wv[j] = ld256_w(w, wkind, wo + j * wj, 8);
#pragma GCC unroll 4
            for (int i = 0; i < A2_MR; i++) {
                __m256 xv = _mm256_loadu_ps(xp + i * xi);
#pragma GCC unroll 3
                for (int j = 0; j < A2_NR; j++) c[i][j] = _mm256_fmadd_ps(xv, wv[j], c[i][j]);
            }
        }
    } else if (mr == A2_MR) {
        const float *wp = (const float *)w + wo;
        for (; k + 8 <= k1; k += 8, xp += xs, wp += ws) {
            __m256 wv[A2_NR];
#pragma GCC unroll 3
            for (int j = 0; j < A2_NR; j++) wv[j] = _mm256_loadu_ps(wp + j * wj);
#pragma GCC unroll 4
            for (int i = 0; i < A2_MR; i++) {
                __m256 xv = _mm256_loadu_ps(xp + i * xi);
#pragma GCC unroll 3
                for (int j = 0; j < A2_NR; j++) c[i][j] = _mm256_fmadd_ps(xv, wv[j], c[i][j]);
            }
        }
        wo = (size_t)(wp - (const float *)w);
    } else {
        for (; k + 8 <= k1; k += 8, xp += xs, wo += ws) {
            __m256 xv = _mm256_loadu_ps(xp);
#pragma GCC unroll 3
            for (int j = 0; j < A2_NR; j++)
                c[0][j] = _mm256_fmadd_ps(xv, ld256_w(w, wkind, wo + j * wj, 8), c[0][j]);
        }
    }
    if (k < k1) {
        int rem = (int)(k1 - k);
        __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(rem),
                                       _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        __m256 mf = _mm256_castsi256_ps(m);
        __m256 wv[A2_NR];
#pragma GCC unroll 3
        for (int j = 0; j < A2_NR; j++) wv[j] = ld256_w(w, wkind, wo + j * wj, rem);
#pragma GCC unroll 4
        for (int i = 0; i < A2_MR; i++) {
            if (i >= mr) break;
            __m256 xv = _mm256_maskload_ps(xp + i * xi, m);
#pragma GCC unroll 3
            for (int j = 0; j < A2_NR; j++)
                c[i][j] = _mm256_blendv_ps(c[i][j], _mm256_fmadd_ps(xv, wv[j], c[i][j]), mf);
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < A2_MR; i++)
#pragma GCC unroll 3
        for (int j = 0; j < A2_NR; j++)
            if (i < mr) _mm256_storeu_ps(acc + (i * A2_NR + j) * 8, c[i][j]);
}

/* The 8-lane tile (isa=avx2) computed with AVX-512 registers where the host
 * has them: two row tiles (8 activation rows) x two output tiles (6
 * outputs) per call, each zmm holding two outputs' 8-lane accumulators side
 * by side ([output a | output b]), the activation step broadcast to both
 * halves. Every lane sees the same FMAs in the same order as mk2_tile (a
 * lane is a lane: the halves never mix), so the bits are mk2_tile's; the
 * gain is half the loads and widenings per multiply-add (the weight step is
 * widened once for 8 rows, not 4) and 24 accumulators instead of 12.
 *   xr[r]  row r's first element (r < 8), steps xs apart
 *   wr[o]  output o's first element (o < 6), steps ws apart, kind wkind
 *   acc[t] the block buffer of tile t = (row tile r / 4, output tile o / 3):
 *          t = 2 * (r / 4) + o / 3, lanes of (r % 4, o % 3) at
 *          acc[t] + ((r % 4) * 3 + o % 3) * 8, as mk2_tile keeps them
 * Whole 8-element steps only: z_tiles passes [k0, kf) and gives a partial
 * last step to mk2_tile, from the stored lanes. */
#define A2Z_ROWS 8
#define A2Z_OUTS 6
/* [lo | hi] (AVX-512F only: no DQ needed) */
__attribute__((target("avx512f"))) static inline __m512 z512_pair(__m256 lo, __m256 hi) {
    return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(lo)), _mm256_castps_pd(hi), 1));
}

/* 1 when the host runs mk2z_tile (AVX-512 F, BW and VL; cpuid read once) */
static int mk2z_ok(void) {
    static atomic_int ok = -1;
    int v = atomic_load(&ok);
    if (v < 0) {
        __builtin_cpu_init();
        v = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
        atomic_store(&ok, v);
    }
    return v;
}

/* outputs o and o + 1's weight step at off, as [o | o + 1], widened to f32 */
__attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c"))) static inline __m512
ld512_w2(const void *const *wr, int o, int wkind, size_t off) {
    if (wkind == 0)
        return z512_pair(_mm256_loadu_ps((const float *)wr[o] + off), _mm256_loadu_ps((const float *)wr[o + 1] + off));
    __m256i h = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)((const uint16_t *)wr[o] + off))),
                                        _mm_loadu_si128((const __m128i *)((const uint16_t *)wr[o + 1] + off)), 1);
    if (wkind == 2) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* The halving tree of 8 lanes (hsum4x8's adds: a[i] + a[i + 4], then + 2,
 * then + 1) on both halves of v at once: element 0 of 128-bit block 0 is
 * the low output's sum, of block 2 the high one's. */
__attribute__((target("avx512f"))) static inline __m512 tree2x8(__m512 v) {
    __m512 t = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(2, 3, 0, 1)));
    __m512 u = _mm512_add_ps(t, _mm512_permute_ps(t, _MM_SHUFFLE(1, 0, 3, 2)));
    return _mm512_add_ps(u, _mm512_permute_ps(u, _MM_SHUFFLE(2, 3, 0, 1)));
}

/* y (fin): the block's last lanes summed in registers and written to
 * y[r * ldy + o] for the nv <= 6 valid outputs (the whole reduction in one
 * chunk: finish256's y = sum), instead of stored for the finish. */
__attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c"))) static void
mk2z_tile(float *const acc[4], int first, const float *const xr[A2Z_ROWS], size_t xs, const void *const wr[A2Z_OUTS],
          int wkind, size_t ws, int64_t k0, int64_t k1, float *y, int64_t ldy, int nv) {
    /* pair p of row r: outputs (2p, 2p + 1); their lanes in the buffers */
    __m512 c[A2Z_ROWS][3];
#pragma GCC unroll 8
    for (int r = 0; r < A2Z_ROWS; r++) {
        float *a0 = acc[2 * (r / 4)] + (r % 4) * 3 * 8, *a1 = acc[2 * (r / 4) + 1] + (r % 4) * 3 * 8;
        if (first) {
            c[r][0] = c[r][1] = c[r][2] = _mm512_setzero_ps();
        } else {
            c[r][0] = _mm512_loadu_ps(a0);                                                  /* (0, 1) */
            c[r][1] = z512_pair(_mm256_loadu_ps(a0 + 16), _mm256_loadu_ps(a1)); /* (2, 3) */
            c[r][2] = _mm512_loadu_ps(a1 + 8); /* (4, 5) */
        }
    }
    int64_t s = k0 / 8, k = k0;
    size_t xo = (size_t)s * xs, wo = (size_t)s * ws;
    for (; k + 8 <= k1; k += 8, xo += xs, wo += ws) {
        __m512 wv[3];
#pragma GCC unroll 3
        for (int q = 0; q < 3; q++) wv[q] = ld512_w2(wr, 2 * q, wkind, wo);
#pragma GCC unroll 8
        for (int r = 0; r < A2Z_ROWS; r++) {
            __m256 x8 = _mm256_loadu_ps(xr[r] + xo);
            __m512 xv = z512_pair(x8, x8);
#pragma GCC unroll 3
            for (int q = 0; q < 3; q++) c[r][q] = _mm512_fmadd_ps(xv, wv[q], c[r][q]);
        }
    }
    if (y) {
        for (int r = 0; r < A2Z_ROWS; r++) {
            float sum[A2Z_OUTS];
            for (int q = 0; q < 3; q++) {
                __m512 t = tree2x8(c[r][q]);
                sum[2 * q] = _mm512_cvtss_f32(t);
                sum[2 * q + 1] = _mm_cvtss_f32(_mm512_extractf32x4_ps(t, 2));
            }
            for (int o = 0; o < nv; o++) y[r * ldy + o] = sum[o];
        }
        return;
    }
#pragma GCC unroll 8
    for (int r = 0; r < A2Z_ROWS; r++) {
        float *a0 = acc[2 * (r / 4)] + (r % 4) * 3 * 8, *a1 = acc[2 * (r / 4) + 1] + (r % 4) * 3 * 8;
        _mm512_storeu_ps(a0, c[r][0]);
        _mm256_storeu_ps(a0 + 16, _mm512_castps512_ps256(c[r][1]));
        _mm256_storeu_ps(a1, _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(c[r][1]), 1)));
        _mm512_storeu_ps(a1 + 8, c[r][2]);
    }
}

/* One activation row (mr = 1) against A2_ROWC plain weight rows (w + j * wj,
 * 16-bit rows widened in registers): mk2_tile's single-row steps, one
 * accumulator per output, for twelve outputs at a time (mk2_tile takes
 * three: three FMA chains cannot hide the FMA's latency). Each output sees
 * the same FMAs in the same order; the partial last step is mk2_tile's. */
#define A2_ROWC 12
__attribute__((target("avx2,fma,f16c"))) static void mk2_row(float *acc, int first, const float *x, const void *w,
                                                             int wkind, size_t wj, int64_t k0, int64_t k1) {
    __m256 c[A2_ROWC];
#pragma GCC unroll 12
    for (int j = 0; j < A2_ROWC; j++) c[j] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(acc + j * 8);
    int64_t k = k0;
    if (wkind == 0) {
        const float *wf = w;
        for (; k + 8 <= k1; k += 8) {
            __m256 xv = _mm256_loadu_ps(x + k);
#pragma GCC unroll 12
            for (int j = 0; j < A2_ROWC; j++) c[j] = _mm256_fmadd_ps(xv, _mm256_loadu_ps(wf + j * wj + k), c[j]);
        }
    } else {
        for (; k + 8 <= k1; k += 8) {
            __m256 xv = _mm256_loadu_ps(x + k);
#pragma GCC unroll 12
            for (int j = 0; j < A2_ROWC; j++) c[j] = _mm256_fmadd_ps(xv, ld256_w(w, wkind, j * wj + (size_t)k, 8), c[j]);
        }
    }
#pragma GCC unroll 12
    for (int j = 0; j < A2_ROWC; j++) _mm256_storeu_ps(acc + j * 8, c[j]);
    if (k < k1) { /* the partial step: mk2_tile's masked one, from the stored lanes */
        size_t wel = wkind ? 2 : 4;
        for (int j = 0; j < A2_ROWC; j += A2_NR)
            mk2_tile(acc + j * 8, 0, x, 8, 0, 1, (const char *)w + (size_t)j * wj * wel, wkind, 8, wj, k, k1);
    }
}

/* The halving tree of four lane vectors at once, in registers: output o
 * (lanes v_o[0..15]) gets v[i] += v[i + 8], then + 4, + 2, + 1 -- the same
 * pairs added as one vector at a time, with the four vectors' lanes
 * interleaved so that each add serves all of them. Lane o of the result is
 * output o's sum. */
__attribute__((target("avx512f"))) static inline __m128 tree4x16(__m512 v0, __m512 v1, __m512 v2, __m512 v3) {
    const __m512i lo8 = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
    const __m512i hi8 = _mm512_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
    const __m512i lo4 = _mm512_setr_epi32(0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27);
    const __m512i hi4 = _mm512_setr_epi32(4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
    const __m512i lo2 = _mm512_setr_epi32(0, 1, 4, 5, 8, 9, 12, 13, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i hi2 = _mm512_setr_epi32(2, 3, 6, 7, 10, 11, 14, 15, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i od = _mm512_setr_epi32(1, 3, 5, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    /* lanes 8o'..8o'+7 of s01 / s23: v[i] + v[i + 8] of outputs 0, 1 / 2, 3 */
    __m512 s01 = _mm512_add_ps(_mm512_permutex2var_ps(v0, lo8, v1), _mm512_permutex2var_ps(v0, hi8, v1));
    __m512 s23 = _mm512_add_ps(_mm512_permutex2var_ps(v2, lo8, v3), _mm512_permutex2var_ps(v2, hi8, v3));
    /* lanes 4o..4o+3: + 4 */
    __m512 t = _mm512_add_ps(_mm512_permutex2var_ps(s01, lo4, s23), _mm512_permutex2var_ps(s01, hi4, s23));
    /* lanes 2o, 2o+1: + 2 */
    __m512 u = _mm512_add_ps(_mm512_permutexvar_ps(lo2, t), _mm512_permutexvar_ps(hi2, t));
    /* lane o: + 1 */
    __m512 w = _mm512_add_ps(_mm512_permutexvar_ps(ev, u), _mm512_permutexvar_ps(od, u));
    return _mm512_castps512_ps128(w);
}

/* One tile's chunk sums into y: mr rows (y, y + ldy, ...) x nj <= 4 outputs,
 * lane vectors acc (mr * 4, 16); first chunk: y = sum, else y += sum. */
__attribute__((target("avx512f,avx512vl"))) static void finish512(float *y, int64_t ldy, const float *acc, int mr, int nj,
                                                                 int first_chunk) {
    __mmask8 m = (__mmask8)((1u << nj) - 1u);
    for (int ii = 0; ii < mr; ii++) {
        const float *a = acc + ii * A512_NR * 16;
        __m128 sum = tree4x16(_mm512_loadu_ps(a), _mm512_loadu_ps(a + 16), _mm512_loadu_ps(a + 32),
                              _mm512_loadu_ps(a + 48));
        float *yr = y + ii * ldy;
        if (!first_chunk) sum = _mm_add_ps(_mm_maskz_loadu_ps(m, yr), sum);
        _mm_mask_storeu_ps(yr, m, sum);
    }
}

/* hsum256 (the halving tree of 8 lanes) of four lane vectors at once: lane
 * o of the result is v_o's a[i] + a[i + 4], then + 2, then + 1 -- the same
 * adds in the same order, the four vectors' lanes interleaved so that each
 * add serves all of them. hsum4x4_pairs: the last two levels, for four
 * 4-lane vectors held as pairs t01 = [x0 | x1], t23 = [x2 | x3]. */
__attribute__((target("avx2"))) static inline __m128 hsum4x4_pairs(__m256 t01, __m256 t23) {
    /* per half: [a4_0[0], a4_0[1], a4_2[0], a4_2[1]] + [a4_0[2], a4_0[3], a4_2[2], a4_2[3]] (low: 0, 2; high: 1, 3) */
    __m256 u = _mm256_add_ps(_mm256_shuffle_ps(t01, t23, _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm256_shuffle_ps(t01, t23, _MM_SHUFFLE(3, 2, 3, 2)));
    /* per half: [a2[0] + a2[1]] of outputs (0, 2 | 1, 3) */
    __m256 z = _mm256_add_ps(_mm256_shuffle_ps(u, u, _MM_SHUFFLE(2, 0, 2, 0)), _mm256_shuffle_ps(u, u, _MM_SHUFFLE(3, 1, 3, 1)));
    /* lanes 0, 1 of each half: outputs 0, 2 and 1, 3 -> 0, 1, 2, 3 */
    return _mm_unpacklo_ps(_mm256_castps256_ps128(z), _mm256_extractf128_ps(z, 1));
}

__attribute__((target("avx2"))) static inline __m128 hsum4x8(__m256 v0, __m256 v1, __m256 v2, __m256 v3) {
    /* halves: [v0 lo | v1 lo] + [v0 hi | v1 hi] = v0's a4 | v1's a4 */
    __m256 t01 = _mm256_add_ps(_mm256_permute2f128_ps(v0, v1, 0x20), _mm256_permute2f128_ps(v0, v1, 0x31));
    __m256 t23 = _mm256_add_ps(_mm256_permute2f128_ps(v2, v3, 0x20), _mm256_permute2f128_ps(v2, v3, 0x31));
    return hsum4x4_pairs(t01, t23);
}

/* One tile's chunk sums into y: mr rows (y, y + ldy, ...) x nj <= A2_NR
 * outputs, lane vectors acc (mr * A2_NR, 8); first chunk: y = sum, else
 * y += sum. */
__attribute__((target("avx2"))) static void finish256(float *y, int64_t ldy, const float *acc, int mr, int nj,
                                                      int first_chunk) {
    for (int ii = 0; ii < mr; ii++) {
        const float *a = acc + ii * A2_NR * 8;
        float sum[4];
        _mm_storeu_ps(sum, hsum4x8(_mm256_loadu_ps(a), _mm256_loadu_ps(a + 8), _mm256_loadu_ps(a + 16), _mm256_setzero_ps()));
        float *yr = y + ii * ldy;
        for (int jj = 0; jj < nj; jj++) yr[jj] = first_chunk ? sum[jj] : yr[jj] + sum[jj];
    }
}


/* ---------------------------------------------------------------------------
 * Chunks of the reduction
 * ------------------------------------------------------------------------- */
static int64_t chunk_len(int64_t K, int S) {
    int64_t c = (K + S - 1) / S;
    return (c + 15) / 16 * 16;
}

int64_t num_chunk_len(int64_t K, int S) { return chunk_len(K, S); }

static int effective_split(const drift_numeric_profile *p, int64_t B) {
    int S = p->reduce == DRIFT_REDUCE_BLOCKED ? p->split_k : 1;
    if (!p->batch_invariant && p->reduce != DRIFT_REDUCE_PAIRWISE && B <= 4) S *= 4;
    return S;
}

/* ---------------------------------------------------------------------------
 * SIMD f32 path: one panel, all B rows
 * ------------------------------------------------------------------------- */
/* Operand views for simd_panel. x: full MR-row tiles packed [s][i][L]
 * (tile t at x + t*MR*Kp), leftover rows plain (ld Kp) after them; or all
 * rows plain (ld K) when no row is in a full tile. w: the panel, packed
 * [jt][s][j][L] (tile jt at w + jt*NR*Kp) or plain rows (ld K). */
typedef struct simd_ops {
    const float *x;
    int x_packed;
    int64_t ldx;        /* plain x row stride (K or Kp) */
    const void *w;
    int w_packed, wkind;
    int64_t ldw;        /* plain w row stride */
} simd_ops;

/* Copies one row (K floats) into steps of L floats at dst + s * stride,
 * zero-padding the last step up to Kp. */
__attribute__((target("avx512f"))) static void copy_steps16(float *dst, size_t stride,
                                                            const float *row, int64_t K,
                                                            int64_t Kp) {
    int64_t s = 0;
    for (; (s + 1) * 16 <= K; s++) _mm512_storeu_ps(dst + s * stride, _mm512_loadu_ps(row + s * 16));
    if (s * 16 < Kp) {
        __mmask16 m = (__mmask16)((1u << (K - s * 16)) - 1u);
        _mm512_storeu_ps(dst + s * stride, _mm512_maskz_loadu_ps(m, row + s * 16));
    }
}

__attribute__((target("avx2"))) static void copy_steps8(float *dst, size_t stride,
                                                        const float *row, int64_t K, int64_t Kp) {
    int64_t s = 0;
    for (; (s + 1) * 8 <= K; s++) _mm256_storeu_ps(dst + s * stride, _mm256_loadu_ps(row + s * 8));
    for (; s * 8 < Kp; s++)
        for (int l = 0; l < 8; l++) dst[s * stride + l] = s * 8 + l < K ? row[s * 8 + l] : 0.0f;
}

static void copy_steps(float *dst, size_t stride, const float *row, int64_t K, int64_t Kp, int L) {
    if (L == 16) copy_steps16(dst, stride, row, K, Kp);
    else copy_steps8(dst, stride, row, K, Kp);
}

/* Packs B rows of x (B, K) into dst: full MR tiles [s][i][L], then the
 * leftover rows plain with stride Kp (zero-padded). */
static void pack_x(float *dst, const float *x, int64_t B, int64_t K, int64_t Kp, int MR, int L) {
    int64_t full = B / MR * MR;
    for (int64_t t = 0; t < full; t += MR) {
        float *d = dst + t * Kp;
        for (int i = 0; i < MR; i++)
            copy_steps(d + i * L, (size_t)(MR * L), x + (t + i) * K, K, Kp, L);
    }
    for (int64_t b = full; b < B; b++) {
        memcpy(dst + b * Kp, x + b * K, (size_t)K * sizeof(float));
        memset(dst + b * Kp + K, 0, (size_t)(Kp - K) * sizeof(float));
    }
}

/* Packs panel rows n0.. (NP of them, zero past N) into dst [jt][s][j][L];
 * rowbuf (K floats) receives dequantized rows. */
static void pack_w(float *dst, const num_qmat *W, int64_t n0, int64_t Kp, int NR, int L,
                   float *rowbuf, drift_isa isa) {
    int64_t K = W->cols, N = W->rows, steps = Kp / L;
    for (int64_t j = 0; j < NP; j++) {
        const float *row = NULL;
        if (n0 + j < N) {
            if (W->dtype == DRIFT_DTYPE_F32) row = (const float *)W->data + (n0 + j) * K;
            else {
                deq_row(W, n0 + j, rowbuf, isa);
                row = rowbuf;
            }
        }
        float *d = dst + (j / NR) * NR * Kp + (j % NR) * L;
        if (row) {
            copy_steps(d, (size_t)(NR * L), row, K, Kp, L);
        } else {
            for (int64_t s = 0; s < steps; s++) memset(d + s * NR * L, 0, (size_t)L * sizeof(float));
        }
    }
}

/* The first weight row of the panel's output tile starting at output j, as
 * simd_ops holds the panel (packed [jt][s][j][L], or plain rows), with the
 * step stride *ws and the row stride *wj in elements. */
static const void *tile_w(const simd_ops *o, int64_t j, int64_t Kp, int NR, int L, size_t *ws, size_t *wj) {
    if (o->w_packed) {
        *ws = (size_t)(NR * L);
        *wj = (size_t)L;
        return (const float *)o->w + j * Kp;
    }
    /* bytes per unit of ldw: f32 4, bf16/f16 2, GGUF blocks: ldw is row bytes */
    size_t wel = o->wkind >= 3 ? 1 : o->wkind ? 2 : 4;
    *ws = (size_t)L;
    *wj = (size_t)o->ldw;
    return (const char *)o->w + (size_t)(j * o->ldw) * wel;
}

/* Rows b .. b + 2 * A2_MR - 1 (block rows i ..) against the whole panel:
 * mk2z_tile on each pair of output tiles, then the partial last step of
 * [k0, k1), if any, by mk2_tile on each of the four tiles from the stored
 * lanes. x packed (full A2_MR tiles), w as simd_ops holds it. y (the rows'
 * outputs n0.., stride N; nvalid of the panel's outputs exist): this is
 * the last k-block of the only chunk and has no partial step, so the tiles
 * write their sums to y (simd_panel's finish skips these rows). */
static void z_tiles(const simd_ops *o, int64_t b, int64_t i, int64_t Kp, int L, float *cbuf, int first, int64_t k0,
                    int64_t k1, float *y, int64_t N, int64_t nvalid) {
    const int MR = A2_MR, NR = A2_NR;
    size_t wel = o->wkind ? 2 : 4, xs = (size_t)(MR * L);
    const float *xt[2] = {o->x + b * Kp, o->x + (b + MR) * Kp};
    const float *xr[A2Z_ROWS];
    for (int r = 0; r < A2Z_ROWS; r++) xr[r] = xt[r / MR] + (r % MR) * L;
    int64_t kf = k0 + (k1 - k0) / 8 * 8; /* the full steps end here */
    for (int64_t j = 0; j < NP; j += 2 * NR) {
        float *acc[4];
        size_t ws, wj;
        for (int t = 0; t < 4; t++) acc[t] = cbuf + ((i + (t / 2) * MR) * NP + (j + (t % 2) * NR) * MR) * L;
        /* the two output tiles' first rows */
        const void *wt[2] = {tile_w(o, j, Kp, NR, L, &ws, &wj), tile_w(o, j + NR, Kp, NR, L, &ws, &wj)};
        const void *wr[A2Z_OUTS];
        for (int q = 0; q < A2Z_OUTS; q++) wr[q] = (const char *)wt[q / NR] + (size_t)(q % NR) * wj * wel;
        int nv = nvalid - j < A2Z_OUTS ? (int)(nvalid - j) : A2Z_OUTS;
        if (y && kf == k1) { /* the sums straight into y */
            if (nv > 0) mk2z_tile(acc, first, xr, xs, wr, o->wkind, ws, k0, kf, y + j, N, nv);
            continue;
        }
        if (kf > k0) mk2z_tile(acc, first, xr, xs, wr, o->wkind, ws, k0, kf, NULL, 0, 0);
        if (kf < k1)
            for (int t = 0; t < 4; t++)
                mk2_tile(acc[t], first && kf == k0, xt[t / 2], xs, (size_t)L, MR, wt[t % 2], o->wkind, ws, wj, kf, k1);
    }
}

static void simd_panel(drift_isa isa, float *y, const simd_ops *o, int64_t B, int64_t K,
                       int64_t Kp, int64_t N, int64_t n0, float *cbuf, int S) {
    int L = isa_lanes(isa);
    int MR = isa == DRIFT_ISA_AVX512 ? A512_MR : A2_MR;
    int NR = isa == DRIFT_ISA_AVX512 ? A512_NR : A2_NR;
    int64_t clen = chunk_len(K, S);
    int64_t nvalid = N - n0 < NP ? N - n0 : NP;
    /* the 8-lane tiles in AVX-512 registers where the host has them (the same bits) */
    int z = isa == DRIFT_ISA_AVX2 && o->wkind < 3 && o->x_packed && mk2z_ok();
    /* ... which sum their lanes in registers when the reduction is one chunk of whole steps */
    int zfin = z && clen >= K && K % 8 == 0;
    for (int64_t b0 = 0; b0 < B; b0 += MB) {
        int64_t bn = B - b0 < MB ? B - b0 : MB;
        for (int64_t c0 = 0; c0 < K; c0 += clen) {
            int64_t c1 = c0 + clen < K ? c0 + clen : K;
            for (int64_t k0 = c0; k0 < c1; k0 += KC) {
                int64_t k1 = k0 + KC < c1 ? k0 + KC : c1;
                int first = k0 == c0; /* the tiles start from zero accumulators */
                for (int64_t i = 0; i < bn;) {
                    if (z && bn - i >= 2 * MR) { /* two packed row tiles x two output tiles at a time */
                        z_tiles(o, b0 + i, i, Kp, L, cbuf, first, k0, k1,
                                zfin && k1 == c1 ? y + (b0 + i) * N + n0 : NULL, N, nvalid);
                        i += 2 * MR;
                        continue;
                    }
                    int mr = bn - i >= MR ? MR : 1;
                    int64_t b = b0 + i;
                    const float *xr;
                    size_t xs, xi;
                    if (mr == MR) { /* a full tile: packed */
                        xr = o->x + b * Kp;
                        xs = (size_t)(MR * L);
                        xi = (size_t)L;
                    } else {
                        xr = o->x + b * o->ldx;
                        xs = (size_t)L;
                        xi = 0;
                    }
                    for (int64_t j = 0; j < NP; j += NR) {
                        float *acc = cbuf + (i * NP + j * mr) * L;
                        size_t ws, wj;
                        const void *wr = tile_w(o, j, Kp, NR, L, &ws, &wj);
                        if (mr == 1 && isa != DRIFT_ISA_AVX512 && o->wkind < 3 && !o->w_packed && j % A2_ROWC == 0 &&
                            j + A2_ROWC <= NP) {
                            mk2_row(acc, first, xr, wr, o->wkind, (size_t)o->ldw, k0, k1);
                            j += A2_ROWC - NR; /* the loop adds NR */
                        } else if (o->wkind >= 3)
                            mk512_row_q(acc, first, xr, wr, o->wkind, (size_t)o->ldw, k0, k1);
                        else if (isa == DRIFT_ISA_AVX512)
                            mk512_tile(acc, first, xr, xs, xi, mr, wr, o->wkind, ws, wj, k0, k1);
                        else
                            mk2_tile(acc, first, xr, xs, xi, mr, wr, o->wkind, ws, wj, k0, k1);
                    }
                    i += mr;
                }
            }
            /* lanes -> chunk sum -> y (chunks added in order) */
            for (int64_t i = 0; i < bn;) {
                if (zfin && bn - i >= 2 * MR) { /* summed by z_tiles */
                    i += 2 * MR;
                    continue;
                }
                int mr = bn - i >= MR ? MR : 1;
                for (int64_t j = 0; j < NP && j < nvalid; j += NR) {
                    float *acc = cbuf + (i * NP + j * mr) * L;
                    int nj = nvalid - j < NR ? (int)(nvalid - j) : NR;
                    float *yo = y + (b0 + i) * N + n0 + j;
                    if (L == 16) {
                        finish512(yo, N, acc, mr, nj, c0 == 0);
                        continue;
                    }
                    finish256(yo, N, acc, mr, nj, c0 == 0);
                }
                i += mr;
            }
        }
    }
}

/* ---------------------------------------------------------------------------
 * Generic path: any accumulator, any reduction, L lanes emulated
 * ------------------------------------------------------------------------- */
static inline float bf16_round(float v) { return num_bf16_to_f32(num_f32_to_bf16(v)); }

/* Sum of x[k]*w[k] over [k0,k1) in L lanes (lane = (k-k0) % L), lanes
 * halve-summed, in the profile's accumulator. fused: use fma. */
static double gen_lanes(const drift_numeric_profile *p, const float *x, const float *w,
                        int64_t k0, int64_t k1, int L, int fused) {
    if (p->accum == DRIFT_ACCUM_F64) {
        double a[LMAX] = {0};
        for (int64_t k = k0; k < k1; k++) {
            int l = (int)((k - k0) % L);
            a[l] = fused ? fma((double)x[k], (double)w[k], a[l]) : a[l] + (double)x[k] * (double)w[k];
        }
        for (int h = L / 2; h >= 1; h /= 2)
            for (int i = 0; i < h; i++) a[i] += a[i + h];
        return a[0];
    }
    float a[LMAX] = {0};
    int bf = p->accum == DRIFT_ACCUM_BF16;
    for (int64_t k = k0; k < k1; k++) {
        int l = (int)((k - k0) % L);
        float v = fused ? fmaf(x[k], w[k], a[l]) : a[l] + x[k] * w[k];
        a[l] = bf ? bf16_round(v) : v;
    }
    for (int h = L / 2; h >= 1; h /= 2)
        for (int i = 0; i < h; i++) a[i] = bf ? bf16_round(a[i] + a[i + h]) : a[i] + a[i + h];
    return a[0];
}

/* Pairwise: leaves of up to 32 elements summed in one accumulator, halves
 * split at multiples of 32, added as a tree. */
static double gen_pairwise(const drift_numeric_profile *p, const float *x, const float *w,
                           int64_t k0, int64_t k1, int fused) {
    if (k1 - k0 <= 32) return gen_lanes(p, x, w, k0, k1, 1, fused);
    int64_t blocks = (k1 - k0 + 31) / 32;
    int64_t mid = k0 + (blocks + 1) / 2 * 32;
    double a = gen_pairwise(p, x, w, k0, mid, fused), b = gen_pairwise(p, x, w, mid, k1, fused);
    if (p->accum == DRIFT_ACCUM_F64) return a + b;
    float s = (float)a + (float)b;
    return p->accum == DRIFT_ACCUM_BF16 ? bf16_round(s) : s;
}

static float gen_dot(const drift_numeric_profile *p, const float *x, const float *w, int64_t K,
                     int L, int fused, int S) {
    if (p->reduce == DRIFT_REDUCE_PAIRWISE) return (float)gen_pairwise(p, x, w, 0, K, fused);
    int64_t clen = chunk_len(K, S);
    double tot = 0.0;
    float totf = 0.0f;
    for (int64_t c0 = 0; c0 < K; c0 += clen) {
        int64_t c1 = c0 + clen < K ? c0 + clen : K;
        double s = gen_lanes(p, x, w, c0, c1, L, fused);
        if (p->accum == DRIFT_ACCUM_F64) tot += s;
        else totf = p->accum == DRIFT_ACCUM_BF16 ? bf16_round(totf + (float)s) : totf + (float)s;
    }
    return p->accum == DRIFT_ACCUM_F64 ? (float)tot : totf;
}

int num_fast_generic_only = 0;
int num_fast_hw_via_isa = 1;

/* ---------------------------------------------------------------------------
 * Hardware levels (lanes / fma / tree / dot=bf16 / mma): hw_ref.c defines
 * the bits; these compute the same with AVX2+FMA, L lanes as L/8 vector
 * accumulators. The scalar tails live in plain functions (this file is
 * compiled without -mfma, so no product-add there is ever contracted).
 * ------------------------------------------------------------------------- */
static float hw_combine(const drift_numeric_profile *p, float *a, int L) {
    if (p->tree) {
        float s = a[0];
        for (int i = 1; i < L; i++) s = s + a[i];
        return s;
    }
    for (int h = L / 2; h >= 1; h /= 2)
        for (int i = 0; i < h; i++) a[i] = a[i] + a[i + h];
    return a[0];
}

/* elements [k, n) of a step that starts at k into lanes a[(j - k) % L] */
static void hw_tail_f32(const drift_numeric_profile *p, float *a, const float *x, const float *w, int64_t k, int64_t n) {
    for (int64_t j = k; j < n; j++) {
        int l = (int)(j - k);
        if (p->fma) a[l] = fmaf(x[j], w[j], a[l]);
        else {
            float pr = x[j] * w[j];
            a[l] = a[l] + pr;
        }
    }
}

static float bf16_daz_s(float v) {
    float r = num_bf16_to_f32(num_f32_to_bf16(v));
    uint32_t u;
    memcpy(&u, &r, 4);
    if ((u & 0x7f800000u) == 0) u &= 0x80000000u;
    memcpy(&r, &u, 4);
    return r;
}

static float ftz_s(float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    if ((u & 0x7f800000u) == 0) u &= 0x80000000u;
    memcpy(&v, &u, 4);
    return v;
}

static void hw_tail_bf16(float *a, const float *x, const float *w, int64_t k, int64_t n) {
    for (int64_t j = k; j < n; j += 2) {
        int l = (int)((j - k) / 2);
        float xo = j + 1 < n ? bf16_daz_s(x[j + 1]) : 0.0f, wo = j + 1 < n ? bf16_daz_s(w[j + 1]) : 0.0f;
        float xe = bf16_daz_s(x[j]), we = bf16_daz_s(w[j]);
        float po = xo * wo, pe = xe * we;
        a[l] = ftz_s(a[l] + po);
        a[l] = ftz_s(a[l] + pe);
    }
}

__attribute__((target("avx2"))) static inline __m256 bf16_daz_v(__m256 v) {
    __m256i u = _mm256_castps_si256(v);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    u = _mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb));
    u = _mm256_and_si256(u, _mm256_set1_epi32((int)0xffff0000u));
    __m256i den = _mm256_cmpeq_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7f800000)), _mm256_setzero_si256());
    u = _mm256_blendv_epi8(u, _mm256_and_si256(u, _mm256_set1_epi32((int)0x80000000u)), den);
    return _mm256_castsi256_ps(u);
}

__attribute__((target("avx2"))) static inline __m256 ftz_v(__m256 v) {
    __m256i u = _mm256_castps_si256(v);
    __m256i den = _mm256_cmpeq_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7f800000)), _mm256_setzero_si256());
    return _mm256_castsi256_ps(_mm256_blendv_epi8(u, _mm256_and_si256(u, _mm256_set1_epi32((int)0x80000000u)), den));
}

/* the lanes' halving tree on one 4-lane vector: a[i] += a[i + 2], then
 * a[0] += a[1] (the same adds as hw_combine's last two levels) */
__attribute__((target("avx2"))) static inline float hw_halve4(__m128 h) {
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_shuffle_ps(h, h, _MM_SHUFFLE(1, 1, 1, 1)));
    return _mm_cvtss_f32(h);
}

/* one output from its lane vectors after the vector steps ended at k: the
 * tail [k, n) and the combine. The halving tree over 8 or 16 lanes is done
 * as vector adds (lane i + lane i + h for each h, as hw_combine does). */
__attribute__((target("avx2"))) static float hw_finish(const drift_numeric_profile *p, const __m256 *acc, int V,
                                                       const float *x, const float *w, int64_t k, int64_t n) {
    int L = p->lanes;
    if (k == n && !p->tree && V <= 2) {
        __m256 t = V == 2 ? _mm256_add_ps(acc[0], acc[1]) : acc[0];
        return hw_halve4(_mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1)));
    }
    float a[64];
    for (int v = 0; v < V; v++) _mm256_storeu_ps(a + 8 * v, acc[v]);
    if (p->dot_bf16) hw_tail_bf16(a, x, w, k, n);
    else hw_tail_f32(p, a, x, w, k, n);
    return hw_combine(p, a, L);
}

/* the same for 4 lanes (one half of a pair vector) */
__attribute__((target("avx2"))) static float hw_finish4(const drift_numeric_profile *p, __m128 acc, const float *x,
                                                        const float *w, int64_t k, int64_t n) {
    if (k == n && !p->tree) return hw_halve4(acc);
    float a[4];
    _mm_storeu_ps(a, acc);
    hw_tail_f32(p, a, x, w, k, n);
    return hw_combine(p, a, 4);
}

/* The lane loops. Products that must round before their add are in
 * functions compiled for AVX2 without FMA, where GCC cannot contract them. */
__attribute__((target("avx2,fma"))) static int64_t hw_loop_fma(__m256 *acc, int V, const float *x, const float *w, int64_t n) {
    int L = 8 * V;
    int64_t k = 0;
    for (; k + L <= n; k += L)
        for (int v = 0; v < V; v++) acc[v] = _mm256_fmadd_ps(_mm256_loadu_ps(x + k + 8 * v), _mm256_loadu_ps(w + k + 8 * v), acc[v]);
    return k;
}

__attribute__((target("avx2"))) static int64_t hw_loop_nofma(__m256 *acc, int V, const float *x, const float *w, int64_t n) {
    int L = 8 * V;
    int64_t k = 0;
    for (; k + L <= n; k += L)
        for (int v = 0; v < V; v++)
            acc[v] = _mm256_add_ps(acc[v], _mm256_mul_ps(_mm256_loadu_ps(x + k + 8 * v), _mm256_loadu_ps(w + k + 8 * v)));
    return k;
}

__attribute__((target("avx2,fma"))) static int64_t hw_loop4_fma(__m128 *acc, const float *x, const float *w, int64_t n) {
    int64_t k = 0;
    for (; k + 4 <= n; k += 4) *acc = _mm_fmadd_ps(_mm_loadu_ps(x + k), _mm_loadu_ps(w + k), *acc);
    return k;
}

static int64_t hw_loop4_nofma(__m128 *acc, const float *x, const float *w, int64_t n) {
    int64_t k = 0;
    for (; k + 4 <= n; k += 4) *acc = _mm_add_ps(*acc, _mm_mul_ps(_mm_loadu_ps(x + k), _mm_loadu_ps(w + k)));
    return k;
}

__attribute__((target("avx2"))) static int64_t hw_loop_bf16(__m256 *acc, int V, const float *x, const float *w, int64_t n) {
    int L = 8 * V;
    const __m256i perm = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
    int64_t k = 0;
    for (; k + 2 * L <= n; k += 2 * L)
        for (int v = 0; v < V; v++) {
            const float *xs = x + k + 16 * v, *ws = w + k + 16 * v;
            __m256 x0 = bf16_daz_v(_mm256_loadu_ps(xs)), x1 = bf16_daz_v(_mm256_loadu_ps(xs + 8));
            __m256 w0 = bf16_daz_v(_mm256_loadu_ps(ws)), w1 = bf16_daz_v(_mm256_loadu_ps(ws + 8));
            __m256 xe = _mm256_permutevar8x32_ps(_mm256_shuffle_ps(x0, x1, _MM_SHUFFLE(2, 0, 2, 0)), perm);
            __m256 xo = _mm256_permutevar8x32_ps(_mm256_shuffle_ps(x0, x1, _MM_SHUFFLE(3, 1, 3, 1)), perm);
            __m256 we = _mm256_permutevar8x32_ps(_mm256_shuffle_ps(w0, w1, _MM_SHUFFLE(2, 0, 2, 0)), perm);
            __m256 wo = _mm256_permutevar8x32_ps(_mm256_shuffle_ps(w0, w1, _MM_SHUFFLE(3, 1, 3, 1)), perm);
            acc[v] = ftz_v(_mm256_add_ps(acc[v], _mm256_mul_ps(xo, wo)));
            acc[v] = ftz_v(_mm256_add_ps(acc[v], _mm256_mul_ps(xe, we)));
        }
    return k;
}

__attribute__((target("avx2"))) static float hw_lanes_avx2(const drift_numeric_profile *p, const float *x,
                                                           const float *w, int64_t n) {
    int L = p->lanes;
    float a[64];
    if (L == 4) { /* dot=f32 only (validated) */
        __m128 v = _mm_setzero_ps();
        int64_t k = p->fma ? hw_loop4_fma(&v, x, w, n) : hw_loop4_nofma(&v, x, w, n);
        _mm_storeu_ps(a, v);
        hw_tail_f32(p, a, x, w, k, n);
        return hw_combine(p, a, L);
    }
    int V = L / 8;
    __m256 acc[8];
    for (int v = 0; v < V; v++) acc[v] = _mm256_setzero_ps();
    int64_t k = p->dot_bf16 ? hw_loop_bf16(acc, V, x, w, n) : p->fma ? hw_loop_fma(acc, V, x, w, n) : hw_loop_nofma(acc, V, x, w, n);
    return hw_finish(p, acc, V, x, w, k, n);
}

/* the tail of an mma chunk: elements [k, c1) into d[(j - c0) % 4] */
static void hw_mma_tail(double *d, const float *x, const float *w, int64_t c0, int64_t k, int64_t c1) {
    for (int64_t j = k; j < c1; j++) d[(j - c0) % 4] = fma((double)x[j], (double)w[j], d[(j - c0) % 4]);
}

__attribute__((target("avx2,fma"))) static float hw_mma_avx2(const drift_numeric_profile *p, const float *x,
                                                             const float *w, int64_t n) {
    float acc = 0.0f, hi = 0.0f;
    int64_t since = 0;
    for (int64_t c0 = 0; c0 < n; c0 += p->mma) {
        int64_t c1 = c0 + p->mma < n ? c0 + p->mma : n, k = c0;
        __m256d d = _mm256_setzero_pd();
        for (; k + 4 <= c1; k += 4)
            d = _mm256_fmadd_pd(_mm256_cvtps_pd(_mm_loadu_ps(x + k)), _mm256_cvtps_pd(_mm_loadu_ps(w + k)), d);
        double dl[4];
        _mm256_storeu_pd(dl, d);
        hw_mma_tail(dl, x, w, c0, k, c1);
        double s = ((dl[0] + dl[1]) + (dl[2] + dl[3])) + (double)acc;
        acc = num_hw_trunc(s, p->acc_bits);
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

static int hw_avx2_ok(void) {
    static int ok = -1;
    if (ok < 0) ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return ok;
}

float num_hw_dot(const drift_numeric_profile *p, const float *x, const float *w, int64_t K, int S) {
    if (!hw_avx2_ok() || num_fast_generic_only) return num_hw_dot_ref(p, x, w, K, S);
    int64_t clen = chunk_len(K, S);
    float y = 0.0f;
    for (int64_t c0 = 0; c0 < K; c0 += clen) {
        int64_t c1 = c0 + clen < K ? c0 + clen : K;
        float c = p->mma ? hw_mma_avx2(p, x + c0, w + c0, c1 - c0) : hw_lanes_avx2(p, x + c0, w + c0, c1 - c0);
        y = c0 == 0 ? c : y + c;
    }
    return y;
}

/* Eight outputs at once (eight weight rows, one x): the same operations per
 * output as above, x loaded (and for dot=bf16 rounded and split) once per
 * step and the accumulators held in registers (R rows x V vectors, R and V
 * constants in each instance below). A tile with fewer than eight rows
 * repeats a row pointer; its extra outputs are not used. */
#define HW_R 8

/* dot=f32 steps, rows w[0..R-1], V vectors of 8 lanes each: acc[r * V + v] */
#define HW_F32_TILE(NAME, TGT, MAC)                                                                                    \
    __attribute__((target(TGT), always_inline)) static inline int64_t NAME(__m256 *out, const int R, const int V,      \
                                                                           const float *x, const float *const *w,     \
                                                                           int64_t n) {                                \
        __m256 acc[HW_R][2];                                                                                           \
        const float *wr[HW_R];                                                                                         \
        _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {                                                          \
            wr[r] = w[r];                                                                                              \
            _Pragma("GCC unroll 2") for (int v = 0; v < V; v++) acc[r][v] = _mm256_setzero_ps();                       \
        }                                                                                                              \
        int64_t k = 0;                                                                                                 \
        for (; k + 8 * V <= n; k += 8 * V) {                                                                           \
            _Pragma("GCC unroll 2") for (int v = 0; v < V; v++) {                                                      \
                __m256 xv = _mm256_loadu_ps(x + k + 8 * v);                                                            \
                _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) acc[r][v] =                                        \
                    MAC(xv, _mm256_loadu_ps(wr[r] + k + 8 * v), acc[r][v]);                                            \
            }                                                                                                          \
        }                                                                                                              \
        _Pragma("GCC unroll 8") for (int r = 0; r < R; r++)                                                            \
            _Pragma("GCC unroll 2") for (int v = 0; v < V; v++) out[r * V + v] = acc[r][v];                            \
        return k;                                                                                                      \
    }

/* 4 lanes: rows 2i and 2i + 1 share one vector (low half, high half) */
#define HW_PAIR_TILE(NAME, TGT, MAC)                                                                                   \
    __attribute__((target(TGT))) static int64_t NAME(__m256 *out, const float *x, const float *const *w, int64_t n) {  \
        __m256 acc[HW_R / 2];                                                                                          \
        const float *wr[HW_R];                                                                                         \
        _Pragma("GCC unroll 8") for (int r = 0; r < HW_R; r++) wr[r] = w[r];                                           \
        _Pragma("GCC unroll 4") for (int i = 0; i < HW_R / 2; i++) acc[i] = _mm256_setzero_ps();                       \
        int64_t k = 0;                                                                                                 \
        for (; k + 4 <= n; k += 4) {                                                                                   \
            __m256 xv = _mm256_broadcast_ps((const __m128 *)(const void *)(x + k));                                    \
            _Pragma("GCC unroll 4") for (int i = 0; i < HW_R / 2; i++) {                                               \
                __m256 wv = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(wr[2 * i] + k)),                  \
                                                 _mm_loadu_ps(wr[2 * i + 1] + k), 1);                                  \
                acc[i] = MAC(xv, wv, acc[i]);                                                                          \
            }                                                                                                          \
        }                                                                                                              \
        _Pragma("GCC unroll 4") for (int i = 0; i < HW_R / 2; i++) out[i] = acc[i];                                    \
        return k;                                                                                                      \
    }

/* the same for two activation rows x0, x1 at once (out[0..3] for x0,
 * out[4..7] for x1): each weight load serves both, and eight chains of adds
 * hide their latency */
#define HW_PAIR2_TILE(NAME, TGT, MAC)                                                                                  \
    __attribute__((target(TGT))) static int64_t NAME(__m256 *out, const float *x0, const float *x1,                    \
                                                     const float *const *w, int64_t n) {                               \
        __m256 a0[HW_R / 2], a1[HW_R / 2];                                                                             \
        const float *wr[HW_R];                                                                                         \
        _Pragma("GCC unroll 8") for (int r = 0; r < HW_R; r++) wr[r] = w[r];                                           \
        _Pragma("GCC unroll 4") for (int i = 0; i < HW_R / 2; i++) a0[i] = a1[i] = _mm256_setzero_ps();                \
        int64_t k = 0;                                                                                                 \
        for (; k + 4 <= n; k += 4) {                                                                                   \
            __m256 xv0 = _mm256_broadcast_ps((const __m128 *)(const void *)(x0 + k));                                  \
            __m256 xv1 = _mm256_broadcast_ps((const __m128 *)(const void *)(x1 + k));                                  \
            _Pragma("GCC unroll 4") for (int i = 0; i < HW_R / 2; i++) {                                               \
                __m256 wv = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(wr[2 * i] + k)),                  \
                                                 _mm_loadu_ps(wr[2 * i + 1] + k), 1);                                  \
                a0[i] = MAC(xv0, wv, a0[i]);                                                                           \
                a1[i] = MAC(xv1, wv, a1[i]);                                                                           \
            }                                                                                                          \
        }                                                                                                              \
        _Pragma("GCC unroll 4") for (int i = 0; i < HW_R / 2; i++) out[i] = a0[i], out[HW_R / 2 + i] = a1[i];         \
        return k;                                                                                                      \
    }

#define HW_MAC_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define HW_MAC_MULADD(a, b, c) _mm256_add_ps(c, _mm256_mul_ps(a, b))
/* the product-then-add tiles live in functions compiled without FMA, where
 * GCC cannot contract them */
HW_F32_TILE(hw_tile_fma, "avx2,fma", HW_MAC_FMA)
HW_F32_TILE(hw_tile_nofma, "avx2", HW_MAC_MULADD)
HW_PAIR_TILE(hw_pairs_fma, "avx2,fma", HW_MAC_FMA)
HW_PAIR_TILE(hw_pairs_nofma, "avx2", HW_MAC_MULADD)
HW_PAIR2_TILE(hw_pairs2_fma, "avx2,fma", HW_MAC_FMA)
HW_PAIR2_TILE(hw_pairs2_nofma, "avx2", HW_MAC_MULADD)

/* dot=bf16 steps (VDPBF16PS), rows w[0..R-1], V vectors of 8 lanes */
__attribute__((target("avx2"), always_inline)) static inline int64_t hw_tile_bf16(__m256 *out, const int R, const int V,
                                                                                 const float *x, const float *const *w,
                                                                                 int64_t n) {
    const __m256i perm = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
    __m256 acc[HW_R][2];
    const float *wr[HW_R];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
        wr[r] = w[r];
#pragma GCC unroll 2
        for (int v = 0; v < V; v++) acc[r][v] = _mm256_setzero_ps();
    }
    int64_t k = 0;
    for (; k + 16 * V <= n; k += 16 * V) {
#pragma GCC unroll 2
        for (int v = 0; v < V; v++) {
            const float *xs = x + k + 16 * v;
            __m256 x0 = bf16_daz_v(_mm256_loadu_ps(xs)), x1 = bf16_daz_v(_mm256_loadu_ps(xs + 8));
            __m256 xe = _mm256_permutevar8x32_ps(_mm256_shuffle_ps(x0, x1, _MM_SHUFFLE(2, 0, 2, 0)), perm);
            __m256 xo = _mm256_permutevar8x32_ps(_mm256_shuffle_ps(x0, x1, _MM_SHUFFLE(3, 1, 3, 1)), perm);
#pragma GCC unroll 8
            for (int r = 0; r < R; r++) {
                const float *ws = wr[r] + k + 16 * v;
                __m256 w0 = bf16_daz_v(_mm256_loadu_ps(ws)), w1 = bf16_daz_v(_mm256_loadu_ps(ws + 8));
                __m256 we = _mm256_permutevar8x32_ps(_mm256_shuffle_ps(w0, w1, _MM_SHUFFLE(2, 0, 2, 0)), perm);
                __m256 wo = _mm256_permutevar8x32_ps(_mm256_shuffle_ps(w0, w1, _MM_SHUFFLE(3, 1, 3, 1)), perm);
                acc[r][v] = ftz_v(_mm256_add_ps(acc[r][v], _mm256_mul_ps(xo, wo)));
                acc[r][v] = ftz_v(_mm256_add_ps(acc[r][v], _mm256_mul_ps(xe, we)));
            }
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 2
        for (int v = 0; v < V; v++) out[r * V + v] = acc[r][v];
    return k;
}

/* the instances: R x V accumulators, at most 8 */
__attribute__((target("avx2,fma"))) static int64_t hw_fma_8x1(__m256 *o, const float *x, const float *const *w, int64_t n) {
    return hw_tile_fma(o, 8, 1, x, w, n);
}
__attribute__((target("avx2,fma"))) static int64_t hw_fma_4x2(__m256 *o, const float *x, const float *const *w, int64_t n) {
    return hw_tile_fma(o, 4, 2, x, w, n);
}
__attribute__((target("avx2"))) static int64_t hw_nofma_8x1(__m256 *o, const float *x, const float *const *w, int64_t n) {
    return hw_tile_nofma(o, 8, 1, x, w, n);
}
__attribute__((target("avx2"))) static int64_t hw_nofma_4x2(__m256 *o, const float *x, const float *const *w, int64_t n) {
    return hw_tile_nofma(o, 4, 2, x, w, n);
}
__attribute__((target("avx2"))) static int64_t hw_bf16_4x1(__m256 *o, const float *x, const float *const *w, int64_t n) {
    return hw_tile_bf16(o, 4, 1, x, w, n);
}
__attribute__((target("avx2"))) static int64_t hw_bf16_4x2(__m256 *o, const float *x, const float *const *w, int64_t n) {
    return hw_tile_bf16(o, 4, 2, x, w, n);
}

/* eight outputs of one activation row from its four pair vectors */
__attribute__((target("avx2"))) static void hw8_pairs_finish(const drift_numeric_profile *p, const __m256 *acc,
                                                             const float *x, const float *const *w, int64_t k,
                                                             int64_t n, float *y) {
    if (k == n && !p->tree) { /* the halving tree of four rows at once */
        _mm_storeu_ps(y, hsum4x4_pairs(acc[0], acc[1]));
        _mm_storeu_ps(y + 4, hsum4x4_pairs(acc[2], acc[3]));
        return;
    }
    for (int i = 0; i < HW_R / 2; i++) {
        y[2 * i] = hw_finish4(p, _mm256_castps256_ps128(acc[i]), x, w[2 * i], k, n);
        y[2 * i + 1] = hw_finish4(p, _mm256_extractf128_ps(acc[i], 1), x, w[2 * i + 1], k, n);
    }
}

/* y[r] = the lanes dot of x and w[r] over n, r < 8 */
__attribute__((target("avx2"))) static void hw8_lanes(const drift_numeric_profile *p, const float *x, const float *const *w,
                                                      int64_t n, float *y) {
    int L = p->lanes;
    __m256 acc[HW_R];
    if (L == 4) { /* dot=f32 only (validated) */
        int64_t k = p->fma ? hw_pairs_fma(acc, x, w, n) : hw_pairs_nofma(acc, x, w, n);
        hw8_pairs_finish(p, acc, x, w, k, n, y);
        return;
    }
    if (L > 16) { /* 32 or 64 lanes: one row at a time */
        for (int r = 0; r < HW_R; r++) y[r] = hw_lanes_avx2(p, x, w[r], n);
        return;
    }
    int V = L / 8, R = p->dot_bf16 || V == 2 ? 4 : 8;
    for (int r0 = 0; r0 < HW_R; r0 += R) {
        const float *const *wt = w + r0;
        int64_t k = p->dot_bf16 ? (V == 1 ? hw_bf16_4x1(acc, x, wt, n) : hw_bf16_4x2(acc, x, wt, n))
                    : p->fma    ? (V == 1 ? hw_fma_8x1(acc, x, wt, n) : hw_fma_4x2(acc, x, wt, n))
                                : (V == 1 ? hw_nofma_8x1(acc, x, wt, n) : hw_nofma_4x2(acc, x, wt, n));
        if (k == n && !p->tree) { /* the halving tree of four rows at once (a[i] += a[i + 8] first for 16 lanes) */
            for (int r = 0; r < R; r += 4) {
                __m256 t[4];
                for (int q = 0; q < 4; q++)
                    t[q] = V == 2 ? _mm256_add_ps(acc[(r + q) * 2], acc[(r + q) * 2 + 1]) : acc[r + q];
                _mm_storeu_ps(y + r0 + r, hsum4x8(t[0], t[1], t[2], t[3]));
            }
            continue;
        }
        for (int r = 0; r < R; r++) y[r0 + r] = hw_finish(p, acc + r * V, V, x, wt[r], k, n);
    }
}

__attribute__((target("avx2,fma"))) static void hw8_mma(const drift_numeric_profile *p, const float *x, const float *const *w,
                                                        int64_t n, float *y) {
    float acc[HW_R] = {0}, hi[HW_R] = {0};
    const float *wr[HW_R];
    for (int r = 0; r < HW_R; r++) wr[r] = w[r];
    int64_t since = 0;
    for (int64_t c0 = 0; c0 < n; c0 += p->mma) {
        int64_t c1 = c0 + p->mma < n ? c0 + p->mma : n, k = c0;
        __m256d d[HW_R];
#pragma GCC unroll 8
        for (int r = 0; r < HW_R; r++) d[r] = _mm256_setzero_pd();
        for (; k + 4 <= c1; k += 4) {
            __m256d xv = _mm256_cvtps_pd(_mm_loadu_ps(x + k));
#pragma GCC unroll 8
            for (int r = 0; r < HW_R; r++) d[r] = _mm256_fmadd_pd(xv, _mm256_cvtps_pd(_mm_loadu_ps(wr[r] + k)), d[r]);
        }
        int promote = 0;
        if (p->promote) {
            since += c1 - c0;
            if (since >= p->promote) promote = 1, since = 0;
        }
        for (int r = 0; r < HW_R; r++) {
            double dl[4];
            _mm256_storeu_pd(dl, d[r]);
            hw_mma_tail(dl, x, wr[r], c0, k, c1);
            double s = ((dl[0] + dl[1]) + (dl[2] + dl[3])) + (double)acc[r];
            acc[r] = num_hw_trunc(s, p->acc_bits);
            if (promote) {
                hi[r] = hi[r] + acc[r];
                acc[r] = 0.0f;
            }
        }
    }
    for (int r = 0; r < HW_R; r++) y[r] = p->promote ? hi[r] + acc[r] : acc[r];
}

/* num_hw_dot of x with eight weight rows at once */
static void num_hw_dot8(const drift_numeric_profile *p, const float *x, const float *const *w, int64_t K, int S, float *y) {
    if (!hw_avx2_ok() || num_fast_generic_only) {
        for (int r = 0; r < HW_R; r++) y[r] = num_hw_dot_ref(p, x, w[r], K, S);
        return;
    }
    int64_t clen = chunk_len(K, S);
    for (int64_t c0 = 0; c0 < K; c0 += clen) {
        int64_t c1 = c0 + clen < K ? c0 + clen : K;
        const float *wc[HW_R];
        float c[HW_R];
        for (int r = 0; r < HW_R; r++) wc[r] = w[r] + c0;
        if (p->mma) hw8_mma(p, x + c0, wc, c1 - c0, c);
        else hw8_lanes(p, x + c0, wc, c1 - c0, c);
        for (int r = 0; r < HW_R; r++) y[r] = c0 == 0 ? c[r] : y[r] + c[r];
    }
}


/* num_hw_dot8 of two activation rows x0, x1 (y0, y1): 4 lanes take both
 * rows in one pass (hw_pairs2_*), the other levels one row after the other */
static void num_hw_dot8x2(const drift_numeric_profile *p, const float *x0, const float *x1, const float *const *w,
                          int64_t K, int S, float *y0, float *y1) {
    if (!hw_avx2_ok() || num_fast_generic_only || p->mma || p->lanes != 4) {
        num_hw_dot8(p, x0, w, K, S, y0);
        num_hw_dot8(p, x1, w, K, S, y1);
        return;
    }
    int64_t clen = chunk_len(K, S);
    for (int64_t c0 = 0; c0 < K; c0 += clen) {
        int64_t c1 = c0 + clen < K ? c0 + clen : K, n = c1 - c0;
        const float *wc[HW_R];
        float c[2][HW_R];
        __m256 acc[HW_R];
        for (int r = 0; r < HW_R; r++) wc[r] = w[r] + c0;
        int64_t k = p->fma ? hw_pairs2_fma(acc, x0 + c0, x1 + c0, wc, n) : hw_pairs2_nofma(acc, x0 + c0, x1 + c0, wc, n);
        hw8_pairs_finish(p, acc, x0 + c0, wc, k, n, c[0]);
        hw8_pairs_finish(p, acc + HW_R / 2, x1 + c0, wc, k, n, c[1]);
        for (int r = 0; r < HW_R; r++) {
            y0[r] = c0 == 0 ? c[0][r] : y0[r] + c[0][r];
            y1[r] = c0 == 0 ? c[1][r] : y1[r] + c[1][r];
        }
    }
}

/* 4 lanes, four activation rows x0..x3 against HW_T weight rows at once
 * (batched decode and prefill): a vector holds two activation rows' four
 * lanes (x0 | x1, x2 | x3), each weight row's four elements are broadcast to
 * both halves and serve all four rows, 2 x HW_T accumulators. Per output the
 * same lanes, products and adds as hw_pairs*_ (lane l takes k + l). */
#define HW_T 6
#define HW_X4_TILE(NAME, TGT, MAC)                                                                                     \
    __attribute__((target(TGT))) static int64_t NAME(__m256 *out, const float *const *x, const float *const *w,        \
                                                     int64_t n) {                                                      \
        __m256 a0[HW_T], a1[HW_T];                                                                                     \
        const float *x0 = x[0], *x1 = x[1], *x2 = x[2], *x3 = x[3], *wr[HW_T];                                         \
        _Pragma("GCC unroll 6") for (int r = 0; r < HW_T; r++) wr[r] = w[r], a0[r] = a1[r] = _mm256_setzero_ps();      \
        int64_t k = 0;                                                                                                 \
        for (; k + 4 <= n; k += 4) {                                                                                   \
            __m256 xa = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(x0 + k)), _mm_loadu_ps(x1 + k), 1);    \
            __m256 xb = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(x2 + k)), _mm_loadu_ps(x3 + k), 1);    \
            _Pragma("GCC unroll 6") for (int r = 0; r < HW_T; r++) {                                                   \
                __m256 wv = _mm256_broadcast_ps((const __m128 *)(const void *)(wr[r] + k));                            \
                a0[r] = MAC(xa, wv, a0[r]);                                                                            \
                a1[r] = MAC(xb, wv, a1[r]);                                                                            \
            }                                                                                                          \
        }                                                                                                              \
        _Pragma("GCC unroll 6") for (int r = 0; r < HW_T; r++) out[r] = a0[r], out[HW_T + r] = a1[r];                  \
        return k;                                                                                                      \
    }
HW_X4_TILE(hw_x4_fma, "avx2,fma", HW_MAC_FMA)
HW_X4_TILE(hw_x4_nofma, "avx2", HW_MAC_MULADD)

/* lanes=4 (dot=f32, no mma) on AVX2: the levels hw_x4_* computes */
static int hw_x4_ok(const drift_numeric_profile *p) {
    return p->lanes == 4 && !p->mma && !p->dot_bf16 && hw_avx2_ok() && !num_fast_generic_only;
}

/* num_hw_dot of four activation rows x[0..3] with HW_T weight rows w:
 * y[i * HW_T + r] (chunks of chunk_len added in order, as num_hw_dot) */
__attribute__((target("avx2"))) static void num_hw_dot4xT(const drift_numeric_profile *p, const float *const *x,
                                                          const float *const *w, int64_t K, int S, float *y) {
    int64_t clen = chunk_len(K, S);
    for (int64_t c0 = 0; c0 < K; c0 += clen) {
        int64_t c1 = c0 + clen < K ? c0 + clen : K, n = c1 - c0;
        const float *xc[4], *wc[HW_T];
        for (int i = 0; i < 4; i++) xc[i] = x[i] + c0;
        for (int r = 0; r < HW_T; r++) wc[r] = w[r] + c0;
        __m256 acc[2 * HW_T];
        int64_t k = p->fma ? hw_x4_fma(acc, xc, wc, n) : hw_x4_nofma(acc, xc, wc, n);
        for (int h = 0; h < 2; h++)
            for (int r = 0; r < HW_T; r++) {
                float a[8];
                _mm256_storeu_ps(a, acc[h * HW_T + r]);
                for (int half = 0; half < 2; half++) { /* x row 2h + half: lanes a[4 half ..] */
                    int i = 2 * h + half;
                    float *l = a + 4 * half;
                    if (k < n) hw_tail_f32(p, l, xc[i], wc[r], k, n);
                    float c = p->tree ? ((l[0] + l[1]) + l[2]) + l[3] : (l[0] + l[2]) + (l[1] + l[3]); /* hw_combine */
                    y[i * HW_T + r] = c0 == 0 ? c : y[i * HW_T + r] + c;
                }
            }
    }
}

/* One matmul, shared by the threads that run its panels. */
typedef struct mm_job {
    const drift_numeric_profile *p;
    float *y;
    const float *xa, *xpk;     /* act(x) (B, K); packed copy or NULL */
    const num_qmat *W;
    int64_t B, K, Kp, N;
    drift_isa isa;
    int L, S, NR, simd, packed, hw;
    atomic_int failed;         /* a thread's scratch could not be allocated */
} mm_job;

/* Panel pi of a matmul (rows pi * NP ..), on the calling thread's scratch. */
static void mm_panel(void *ctx, int64_t pi, int worker) {
    mm_job *jb = ctx;
    const num_qmat *W = jb->W;
    int64_t B = jb->B, K = jb->K, Kp = jb->Kp, N = jb->N, n0 = pi * NP;
    drift_isa isa = jb->isa;
    /* 64-byte aligned: split cache-line loads halve Intel's load bandwidth */
    float *wbuf = scratch_get(SCR_WBUF, (size_t)(NP * Kp) * sizeof(float));
    float *rowbuf = scratch_get(SCR_ROWBUF, (size_t)Kp * sizeof(float));
    float *cbuf = jb->simd ? scratch_get(SCR_CBUF, (size_t)(MB * NP * LMAX) * sizeof(float)) : NULL;
    if (!wbuf || !rowbuf || (jb->simd && !cbuf)) {
        atomic_store(&jb->failed, 1);
        return;
    }
    if (jb->simd) {
        simd_ops o = {.x = jb->packed ? jb->xpk : jb->xa, .x_packed = jb->packed, .ldx = jb->packed ? Kp : K};
        int direct = n0 + NP <= N &&
                     (W->dtype == DRIFT_DTYPE_F32 || W->dtype == DRIFT_DTYPE_BF16 || W->dtype == DRIFT_DTYPE_F16);
        int direct_q = n0 + NP <= N && isa == DRIFT_ISA_AVX512 &&
                       (W->dtype == DRIFT_DTYPE_Q8_0 || W->dtype == DRIFT_DTYPE_Q4_0);
        /* full panels of f32 / bf16 / f16 read in place at a batch too small
         * to amortise packing them (batched decode), and 16-bit panels at
         * any batch when their rows do not alias in 4 KiB (packing them is a
         * conversion pass that costs more than widening in registers) */
        int row16 = W->dtype == DRIFT_DTYPE_BF16 || W->dtype == DRIFT_DTYPE_F16;
        if (jb->packed && !(direct && (B < MB || (row16 && W->row_bytes % 4096 != 0)))) {
            pack_w(wbuf, W, n0, Kp, jb->NR, jb->L, rowbuf, isa);
            o.w = wbuf;
            o.w_packed = 1;
        } else if (direct) {
            o.w = (const char *)W->data + (size_t)n0 * W->row_bytes;
            o.wkind = W->dtype == DRIFT_DTYPE_BF16 ? 1 : W->dtype == DRIFT_DTYPE_F16 ? 2 : 0;
            o.ldw = K;
        } else if (direct_q) {
            o.w = (const char *)W->data + (size_t)n0 * W->row_bytes;
            o.wkind = W->dtype == DRIFT_DTYPE_Q8_0 ? 3 : 4;
            o.ldw = (int64_t)W->row_bytes;
        } else {
            o.w = panel_get(W, n0, wbuf, isa);
            o.ldw = K;
        }
        simd_panel(isa, jb->y, &o, B, K, Kp, N, n0, cbuf, jb->S);
        return;
    }
    const float *wp = panel_get(W, n0, wbuf, isa);
    if (jb->hw) { /* eight outputs at a time; a short last tile repeats its last row */
        int64_t nj = N - n0 < NP ? N - n0 : NP, b4 = 0;
        if (B >= 4 && hw_x4_ok(jb->p)) { /* 4 lanes: four activation rows x HW_T weight rows a pass */
            b4 = B / 4 * 4;
            for (int64_t j = 0; j < nj; j += HW_T) {
                int64_t nr = nj - j < HW_T ? nj - j : HW_T;
                const float *wr[HW_T];
                for (int r = 0; r < HW_T; r++) wr[r] = wp + (j + (r < nr ? r : nr - 1)) * K;
                for (int64_t b = 0; b < b4; b += 4) {
                    const float *xr[4] = {jb->xa + b * K, jb->xa + (b + 1) * K, jb->xa + (b + 2) * K, jb->xa + (b + 3) * K};
                    float yt[4 * HW_T];
                    num_hw_dot4xT(jb->p, xr, wr, K, jb->S, yt);
                    for (int i = 0; i < 4; i++)
                        for (int64_t r = 0; r < nr; r++) jb->y[(b + i) * N + n0 + j + r] = yt[i * HW_T + r];
                }
            }
        }
        for (int64_t j = 0; j < nj && b4 < B; j += HW_R) {
            int64_t nr = nj - j < HW_R ? nj - j : HW_R;
            const float *wr[HW_R];
            for (int r = 0; r < HW_R; r++) wr[r] = wp + (j + (r < nr ? r : nr - 1)) * K;
            int64_t b = b4;
            for (; b + 2 <= B; b += 2) { /* two activation rows at a time */
                float y0[HW_R], y1[HW_R];
                num_hw_dot8x2(jb->p, jb->xa + b * K, jb->xa + (b + 1) * K, wr, K, jb->S, y0, y1);
                for (int64_t r = 0; r < nr; r++) {
                    jb->y[b * N + n0 + j + r] = y0[r];
                    jb->y[(b + 1) * N + n0 + j + r] = y1[r];
                }
            }
            for (; b < B; b++) {
                float y8[HW_R];
                num_hw_dot8(jb->p, jb->xa + b * K, wr, K, jb->S, y8);
                for (int64_t r = 0; r < nr; r++) jb->y[b * N + n0 + j + r] = y8[r];
            }
        }
        return;
    }
    for (int64_t j = 0; j < NP && n0 + j < N; j++)
        for (int64_t b = 0; b < B; b++)
            jb->y[b * N + n0 + j] = gen_dot(jb->p, jb->xa + b * K, wp + j * K, K, jb->L, isa != DRIFT_ISA_SCALAR, jb->S);
}

drift_status num_fast_matmul(const drift_numeric_profile *p, float *y, const float *x,
                             const num_qmat *W, int64_t B, drift_error *err) {
    int64_t K = W->cols, N = W->rows;
    drift_isa isa = num_isa_resolve(p->isa == DRIFT_ISA_REF ? DRIFT_ISA_SCALAR : p->isa);
    int L = isa_lanes(isa);
    int S = effective_split(p, B);
    int hw = p->lanes || p->mma; /* a hardware level: its own dot products (hw_ref.c) */
    if (hw && num_fast_hw_via_isa && !num_fast_generic_only && !p->mma && !p->dot_bf16 && p->fma && !p->tree &&
        p->acc_bits == 23 && !p->promote && (p->lanes == 8 || p->lanes == 16)) {
        /* the level is an isa's own order (hardware=avx512 is lanes=16): that isa's kernels where the host has it */
        drift_isa want = p->lanes == 16 ? DRIFT_ISA_AVX512 : DRIFT_ISA_AVX2;
        if (num_isa_resolve(want) == want) {
            isa = want;
            L = isa_lanes(isa);
            hw = 0;
        }
    }
    int simd = !hw && isa != DRIFT_ISA_SCALAR && p->accum == DRIFT_ACCUM_F32 &&
               p->reduce != DRIFT_REDUCE_PAIRWISE && !num_fast_generic_only;
    /* act(x): a rounded copy, or x itself when the activations are f32 */
    const float *xa = x;
    if (p->acts != DRIFT_DTYPE_F32) {
        float *xr = scratch_get(SCR_XA, (size_t)(B * K) * sizeof(float));
        if (!xr) return drift_error_set(err, DRIFT_ERR_NOMEM, "matmul: activations %lld x %lld",
                                        (long long)B, (long long)K);
        memcpy(xr, x, (size_t)(B * K) * sizeof(float));
        for (int64_t b = 0; b < B; b++) num_round_acts(p->acts, xr + b * K, K);
        xa = xr;
    }
    int64_t npanels = (N + NP - 1) / NP;
    int MR = isa == DRIFT_ISA_AVX512 ? A512_MR : A2_MR;
    int NR = isa == DRIFT_ISA_AVX512 ? A512_NR : A2_NR;
    int64_t Kp = (K + 15) / 16 * 16;
    /* prefill (some row in a full tile): pack x once and each w panel;
     * decode: plain rows, bf16/f16/f32 weights read in place */
    int packed = simd && B >= MR;
    float *xpk = NULL;
    if (packed) {
        xpk = scratch_get(SCR_XPK, (size_t)(B * Kp) * sizeof(float));
        if (!xpk) {
            return drift_error_set(err, DRIFT_ERR_NOMEM, "matmul: packed activations");
        }
        pack_x(xpk, xa, B, K, Kp, MR, L);
    }
    int nt = p->threads > 0 ? p->threads : omp_get_max_threads();
    if (nt > npanels) nt = (int)npanels;
    /* a matrix too small to pay for waking a second thread runs on this one
     * (the outputs do not depend on the thread count) */
    if ((double)B * (double)N * (double)K < MT_MIN_MACS) nt = 1;
    mm_job job = {.p = p, .y = y, .xa = xa, .xpk = xpk, .W = W, .B = B, .K = K, .Kp = Kp, .N = N,
                  .isa = isa, .L = L, .S = S, .NR = NR, .simd = simd, .packed = packed, .hw = hw};
    num_par_for(nt, npanels, mm_panel, &job);
    if (atomic_load(&job.failed)) return drift_error_set(err, DRIFT_ERR_NOMEM, "matmul: per-thread scratch");
    return DRIFT_OK;
}

/* ---------------------------------------------------------------------------
 * Element-wise fast kernels: float, 8 explicit lanes
 * ------------------------------------------------------------------------- */
/* 8 lanes as two SSE vectors (SSE2 is in every x86-64, so no dispatch and
 * the same bits everywhere): lane l accumulates the elements i = l (mod 8)
 * in increasing i, one multiply then one add each (no FMA), and the lanes
 * are summed by a fixed halving tree: a[i] += a[i + 4], then + 2, then + 1. */
static inline float tree8(__m128 a0, __m128 a1) {
    __m128 v = _mm_add_ps(a0, a1);
    v = _mm_add_ps(v, _mm_movehl_ps(v, v));
    return _mm_cvtss_f32(_mm_add_ss(v, _mm_shuffle_ps(v, v, 1)));
}

/* The elements past the last full step of 8, into lane (i % 8). */
static inline void tail8(__m128 *a0, __m128 *a1, const float *x, const float *y, int64_t i, int64_t n) {
    if (i >= n) return;
    float a[8];
    _mm_storeu_ps(a, *a0);
    _mm_storeu_ps(a + 4, *a1);
    for (; i < n; i++) a[i % 8] += x[i] * (y ? y[i] : 1.0f);
    *a0 = _mm_loadu_ps(a);
    *a1 = _mm_loadu_ps(a + 4);
}

static float sum8(const float *x, int64_t n, int square) {
    __m128 a0 = _mm_setzero_ps(), a1 = _mm_setzero_ps();
    int64_t i = 0;
    if (square) {
        for (; i + 8 <= n; i += 8) {
            __m128 v0 = _mm_loadu_ps(x + i), v1 = _mm_loadu_ps(x + i + 4);
            a0 = _mm_add_ps(a0, _mm_mul_ps(v0, v0));
            a1 = _mm_add_ps(a1, _mm_mul_ps(v1, v1));
        }
        tail8(&a0, &a1, x, x, i, n);
    } else {
        for (; i + 8 <= n; i += 8) {
            a0 = _mm_add_ps(a0, _mm_loadu_ps(x + i));
            a1 = _mm_add_ps(a1, _mm_loadu_ps(x + i + 4));
        }
        tail8(&a0, &a1, x, NULL, i, n);
    }
    return tree8(a0, a1);
}

static float dot8(const float *x, const float *y, int64_t n) {
    __m128 a0 = _mm_setzero_ps(), a1 = _mm_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        a0 = _mm_add_ps(a0, _mm_mul_ps(_mm_loadu_ps(x + i), _mm_loadu_ps(y + i)));
        a1 = _mm_add_ps(a1, _mm_mul_ps(_mm_loadu_ps(x + i + 4), _mm_loadu_ps(y + i + 4)));
    }
    tail8(&a0, &a1, x, y, i, n);
    return tree8(a0, a1);
}

/* out (n) = a (n) * s, element by element. out may alias a. */
static void scale_vec(float *out, const float *a, float s, int n) {
    __m128 sv = _mm_set1_ps(s);
    int i = 0;
    for (; i + 4 <= n; i += 4) _mm_storeu_ps(out + i, _mm_mul_ps(_mm_loadu_ps(a + i), sv));
    for (; i < n; i++) out[i] = a[i] * s;
}

/* acc (n) += e * v (n): a multiply then an add per element. */
static void axpy_vec(float *acc, float e, const float *v, int n) {
    __m128 ev = _mm_set1_ps(e);
    int i = 0;
    for (; i + 4 <= n; i += 4)
        _mm_storeu_ps(acc + i, _mm_add_ps(_mm_loadu_ps(acc + i), _mm_mul_ps(ev, _mm_loadu_ps(v + i))));
    for (; i < n; i++) acc[i] += e * v[i];
}

void num_fast_rmsnorm(const drift_numeric_profile *p, float *out, const float *x, const float *w,
                      int64_t n, float eps) {
    float ss = sum8(x, n, 1);
    float r = 1.0f / sqrtf(ss / (float)n + eps);
    if (p->norm_round) { /* x * r rounded to the dtype before the weight */
        drift_dtype dt = num_dtype_of(p);
        for (int64_t i = 0; i < n; i++) out[i] = num_round1(dt, x[i] * r) * w[i];
        return;
    }
    __m128 rv = _mm_set1_ps(r);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) /* (x * r) * w, as the scalar tail */
        _mm_storeu_ps(out + i, _mm_mul_ps(_mm_mul_ps(_mm_loadu_ps(x + i), rv), _mm_loadu_ps(w + i)));
    for (; i < n; i++) out[i] = x[i] * r * w[i];
}

void num_fast_softmax(const drift_numeric_profile *p, float *x, int64_t n) {
    float m = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        if (x[i] > m) m = x[i];
    for (int64_t i = 0; i < n; i++) x[i] = num_exp(p, x[i] - m);
    float inv = 1.0f / sum8(x, n, 0);
    for (int64_t i = 0; i < n; i++) x[i] *= inv;
}

#define ROPE_MAX_PAIRS 512

void num_fast_rope(const drift_numeric_profile *p, float *x, int n_heads, int64_t pos,
                   const num_rope_params *rp) {
    int half = rp->n_rot / 2;
    assert(half <= ROPE_MAX_PAIRS);
    float cs[ROPE_MAX_PAIRS], sn[ROPE_MAX_PAIRS];
    for (int i = 0; i < half; i++) {
        float freq = powf(rp->theta_base, -2.0f * (float)i / (float)rp->n_rot);
        if (rp->scaling_factor > 1.0f && rp->orig_ctx > 0) {
            float factor = rp->scaling_factor, lo = rp->low_freq_factor, hi = rp->high_freq_factor;
            float wavelen = 2.0f * (float)M_PI / freq;
            float lo_wl = (float)rp->orig_ctx / lo, hi_wl = (float)rp->orig_ctx / hi;
            if (wavelen > lo_wl) {
                freq = freq / factor;
            } else if (wavelen >= hi_wl && hi != lo) {
                float smooth = ((float)rp->orig_ctx / wavelen - lo) / (hi - lo);
                freq = (1.0f - smooth) * freq / factor + smooth * freq;
            }
        }
        if (rp->freq_factors) freq /= rp->freq_factors[i];
        float a = (float)pos * freq;
        cs[i] = cosf(a);
        sn[i] = sinf(a);
    }
    if (p->rope_lowp == DRIFT_ROPE_TABLE) { /* cos/sin rounded to the dtype; f32 arithmetic below */
        drift_dtype dt = num_dtype_of(p);
        for (int i = 0; i < half; i++) {
            cs[i] = num_round1(dt, cs[i]);
            sn[i] = num_round1(dt, sn[i]);
        }
    } else if (p->rope_lowp) { /* cos/sin in the dtype, each product and sum rounded */
        drift_dtype dt = num_dtype_of(p);
        for (int i = 0; i < half; i++) {
            cs[i] = num_round1(dt, cs[i]);
            sn[i] = num_round1(dt, sn[i]);
        }
        for (int h = 0; h < n_heads; h++) {
            float *v = x + (size_t)h * rp->head_dim;
            for (int i = 0; i < half; i++) {
                int i0 = rp->neox ? i : 2 * i, i1 = rp->neox ? i + half : 2 * i + 1;
                float x0 = v[i0], x1 = v[i1];
                float a = num_round1(dt, x0 * cs[i]), b = num_round1(dt, x1 * sn[i]);
                float c = num_round1(dt, x0 * sn[i]), d = num_round1(dt, x1 * cs[i]);
                v[i0] = num_round1(dt, a - b);
                v[i1] = num_round1(dt, c + d);
            }
        }
        return;
    }
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (size_t)h * rp->head_dim;
        for (int i = 0; i < half; i++) {
            int i0 = rp->neox ? i : 2 * i, i1 = rp->neox ? i + half : 2 * i + 1;
            float x0 = v[i0], x1 = v[i1];
            v[i0] = x0 * cs[i] - x1 * sn[i];
            v[i1] = x0 * sn[i] + x1 * cs[i];
        }
    }
}

void num_fast_swiglu(const drift_numeric_profile *p, float *out, const float *gate,
                     const float *up, int64_t n) {
    if (p->swiglu_round) { /* silu(gate) rounded to the dtype before the product */
        drift_dtype dt = num_dtype_of(p);
        for (int64_t i = 0; i < n; i++) {
            float g = gate[i];
            out[i] = num_round1(dt, g / (1.0f + num_exp(p, -g))) * up[i];
        }
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        float g = gate[i];
        out[i] = g / (1.0f + num_exp(p, -g)) * up[i];
    }
}

/* ---------------------------------------------------------------------------
 * Attention with AVX2: the same operations as the SSE path below, in the same
 * order per value, so the same bits (IEEE adds and multiplies do not depend
 * on the vector width):
 *   scores: 8 positions at a time, each an 8-lane accumulator (lane l takes
 *     the elements l (mod 8), a multiply then an add), the 8 x 8 lanes
 *     transposed so that tree8's halving sums run across vectors;
 *   exp(s - max): glibc's expf (the FMA variant libm picks on such a CPU)
 *     4 at a time in double, checked once against this process's expf on
 *     200,000 inputs and every special case; when any differs, expf is called
 *     per position as before (8 at a time with AVX-512F where the CPU has
 *     it and that form passes the same check: the table read by permutes);
 *   the weighted sum of V: the accumulators stay in registers over a run of
 *     positions (one multiply then one add per element and position, in
 *     position order), two query heads at a time; a cache other than f32
 *     has the run's V rows widened to floats once for the query heads;
 *   grouped-query attention: the query heads that share a KV head (up to 8)
 *     take turns on each tile of keys and each run of values, so each K and
 *     V row is read once for the group (num_fast_attention_group).
 * Used for f32 / f16 / bf16 ... caches alike (other formats are loaded into
 * a tile first), head_dim a multiple of 8 up to 128, exp=libm.
 * ------------------------------------------------------------------------- */
#define ATT_MAX_HD 128
#define ATT_MAX_G 8 /* query heads per pass of attend_avx2 (more: in turns of 8) */

/* glibc's expf data (sysdeps/ieee754/flt-32: 2^(i/32) less i << 47, and the
 * scaled cubic), filled once. */
static uint64_t g_exp2f_tab[32];
static int g_vexp_ok; /* 1: vexp8 gives expf's bits */
static pthread_once_t g_vexp_once = PTHREAD_ONCE_INIT;
#define VEXP_N 32.0
static const double g_vexp_invln2n = 0x1.71547652b82fep+0 * VEXP_N, g_vexp_shift = 0x1.8p+52;
static const double g_vexp_c0 = 0x1.c6af84b912394p-5 / VEXP_N / VEXP_N / VEXP_N,
                    g_vexp_c1 = 0x1.ebfce50fac4f3p-3 / VEXP_N / VEXP_N, g_vexp_c2 = 0x1.62e42ff0c52d6p-1 / VEXP_N;

/* expf of 4 values whose magnitudes are below 88 (the main path of glibc's
 * expf: z = x * 32/ln2, k = round(z), r = z - k as one FMA, 2^(k/32) from
 * the table, the cubic in r by FMAs, rounded to float once). */
__attribute__((target("avx2,fma"))) static inline __m128 vexp4(__m128 x) {
    __m256d xd = _mm256_cvtps_pd(x);
    __m256d z = _mm256_mul_pd(_mm256_set1_pd(g_vexp_invln2n), xd);
    __m256d kd = _mm256_add_pd(z, _mm256_set1_pd(g_vexp_shift));
    __m256i ki = _mm256_castpd_si256(kd);
    kd = _mm256_sub_pd(kd, _mm256_set1_pd(g_vexp_shift));
    __m256d r = _mm256_fmadd_pd(_mm256_set1_pd(g_vexp_invln2n), xd, _mm256_sub_pd(_mm256_setzero_pd(), kd));
    __m256i idx = _mm256_and_si256(ki, _mm256_set1_epi64x(31));
    __m256i t = _mm256_i64gather_epi64((const long long *)g_exp2f_tab, idx, 8);
    t = _mm256_add_epi64(t, _mm256_slli_epi64(ki, 47));
    __m256d s = _mm256_castsi256_pd(t);
    __m256d zz = _mm256_fmadd_pd(_mm256_set1_pd(g_vexp_c0), r, _mm256_set1_pd(g_vexp_c1));
    __m256d r2 = _mm256_mul_pd(r, r);
    __m256d y = _mm256_fmadd_pd(_mm256_set1_pd(g_vexp_c2), r, _mm256_set1_pd(1.0));
    y = _mm256_fmadd_pd(zz, r2, y);
    y = _mm256_mul_pd(y, s);
    return _mm256_cvtpd_ps(y);
}

static int g_vexp512; /* 1: vexp_sub takes 8 at a time with AVX-512F (vexp_init) */

/* vexp4's operations on 8 values in 8-lane doubles, the table read by two
 * two-register permutes (16 entries each) in place of the gather. */
__attribute__((target("avx512f"))) static inline __m256 vexp8_512(__m256 x, __m512i ta, __m512i tb, __m512i tc, __m512i td) {
    __m512d xd = _mm512_cvtps_pd(x), sh = _mm512_set1_pd(g_vexp_shift), il = _mm512_set1_pd(g_vexp_invln2n);
    __m512d kd = _mm512_fmadd_pd(il, xd, sh); /* vexp4's z + shift, as the compiler fuses it there */
    __m512i ki = _mm512_castpd_si512(kd);
    kd = _mm512_sub_pd(kd, sh);
    __m512d r = _mm512_fmadd_pd(il, xd, _mm512_sub_pd(_mm512_setzero_pd(), kd));
    __m512i lo = _mm512_permutex2var_epi64(ta, ki, tb), hi = _mm512_permutex2var_epi64(tc, ki, td);
    __m512i t = _mm512_mask_blend_epi64(_mm512_test_epi64_mask(ki, _mm512_set1_epi64(16)), lo, hi);
    t = _mm512_add_epi64(t, _mm512_slli_epi64(ki, 47));
    __m512d sc = _mm512_castsi512_pd(t);
    __m512d zz = _mm512_fmadd_pd(_mm512_set1_pd(g_vexp_c0), r, _mm512_set1_pd(g_vexp_c1));
    __m512d r2 = _mm512_mul_pd(r, r);
    __m512d y = _mm512_fmadd_pd(_mm512_set1_pd(g_vexp_c2), r, _mm512_set1_pd(1.0));
    y = _mm512_fmadd_pd(zz, r2, y);
    y = _mm512_mul_pd(y, sc);
    return _mm512_cvtpd_ps(y);
}

/* vexp_sub's first n8 (a multiple of 8) values with vexp8_512. */
__attribute__((target("avx512f"))) static void vexp_sub512(float *x, int n8, float m) {
    const long long *tab = (const long long *)g_exp2f_tab;
    __m512i ta = _mm512_loadu_si512(tab), tb = _mm512_loadu_si512(tab + 8), tc = _mm512_loadu_si512(tab + 16),
            td = _mm512_loadu_si512(tab + 24);
    __m256 mv = _mm256_set1_ps(m), lim = _mm256_set1_ps(88.0f), absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int i = 0; i < n8; i += 8) {
        __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + i), mv);
        if (_mm256_movemask_ps(_mm256_cmp_ps(_mm256_and_ps(d, absmask), lim, _CMP_NLT_UQ))) {
            float a[8];
            _mm256_storeu_ps(a, d);
            for (int j = 0; j < 8; j++) x[i + j] = expf(a[j]);
        } else {
            _mm256_storeu_ps(x + i, vexp8_512(d, ta, tb, tc, td));
        }
    }
}

/* x[i] = expf(x[i] - m) for i < n; n a multiple of 4 (the caller pads). */
__attribute__((target("avx2,fma"))) static void vexp_sub(float *x, int n, float m) {
    __m128 mv = _mm_set1_ps(m), lim = _mm_set1_ps(88.0f), absmask = _mm_castsi128_ps(_mm_set1_epi32(0x7fffffff));
    int i0 = 0;
    if (g_vexp512) {
        i0 = n & ~7;
        vexp_sub512(x, i0, m);
    }
    for (int i = i0; i < n; i += 4) {
        __m128 d = _mm_sub_ps(_mm_loadu_ps(x + i), mv);
        /* |d| >= 88 or NaN: glibc's special cases; expf itself */
        if (_mm_movemask_ps(_mm_cmp_ps(_mm_and_ps(d, absmask), lim, _CMP_NLT_UQ))) {
            float a[4];
            _mm_storeu_ps(a, d);
            for (int j = 0; j < 4; j++) x[i + j] = expf(a[j]);
        } else {
            _mm_storeu_ps(x + i, vexp4(d));
        }
    }
}

static int vexp_check(void);

static void vexp_init(void) {
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return;
    for (int i = 0; i < 32; i++) {
        double d = exp2((double)i / 32.0);
        uint64_t u;
        memcpy(&u, &d, sizeof u);
        g_exp2f_tab[i] = u - ((uint64_t)i << 47);
    }
    g_vexp_ok = vexp_check();
    /* the 8-wide AVX-512F form where the CPU has it, checked the same way */
    if (g_vexp_ok && __builtin_cpu_supports("avx512f")) {
        g_vexp512 = 1;
        g_vexp512 = vexp_check();
    }
}

/* 1 when vexp_sub gives this process's expf bits: a sweep of [-110, 90]
 * and the edges. */
static int vexp_check(void) {
    enum { NS = 200000 };
    static const float edge[] = {0.0f, -0.0f, 1e-30f, -1e-30f, -87.33654f, -88.0f, -87.99999f, -103.97208f,
                                 88.72283f, -1e-7f, 1e-7f, -1.0f, 1.0f, -0.5f, 0.5f, 87.99999f};
    float buf[64];
    int ok = 1;
    for (int i = 0; ok && i < NS; i += 32) {
        for (int j = 0; j < 32; j++) {
            int k = i + j;
            buf[j] = k < (int)(sizeof edge / sizeof edge[0]) ? edge[k] : -110.0f + 200.0f * (float)k / (float)NS;
            buf[32 + j] = buf[j];
        }
        vexp_sub(buf, 32, 0.0f);
        for (int j = 0; ok && j < 32; j++) {
            float e = expf(buf[32 + j]);
            ok = memcmp(&e, &buf[j], sizeof e) == 0;
        }
    }
    return ok;
}

/* 1 when vexp_sub gives this process's expf bits. */
static int vexp_usable(void) {
    pthread_once(&g_vexp_once, vexp_init);
    return g_vexp_ok;
}

/* s[t] = tree8(q . k_t) * scale for the 8 positions of kp (each head_dim
 * floats), stored in position order. */
__attribute__((target("avx2"))) static inline void scores8(float *s, const float *q, const float *const *kp, int hd,
                                                           float scale) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    const float *k0 = kp[0], *k1 = kp[1], *k2 = kp[2], *k3 = kp[3], *k4 = kp[4], *k5 = kp[5], *k6 = kp[6], *k7 = kp[7];
    for (int d = 0; d < hd; d += 8) {
        __m256 qv = _mm256_loadu_ps(q + d);
        a0 = _mm256_add_ps(a0, _mm256_mul_ps(qv, _mm256_loadu_ps(k0 + d)));
        a1 = _mm256_add_ps(a1, _mm256_mul_ps(qv, _mm256_loadu_ps(k1 + d)));
        a2 = _mm256_add_ps(a2, _mm256_mul_ps(qv, _mm256_loadu_ps(k2 + d)));
        a3 = _mm256_add_ps(a3, _mm256_mul_ps(qv, _mm256_loadu_ps(k3 + d)));
        a4 = _mm256_add_ps(a4, _mm256_mul_ps(qv, _mm256_loadu_ps(k4 + d)));
        a5 = _mm256_add_ps(a5, _mm256_mul_ps(qv, _mm256_loadu_ps(k5 + d)));
        a6 = _mm256_add_ps(a6, _mm256_mul_ps(qv, _mm256_loadu_ps(k6 + d)));
        a7 = _mm256_add_ps(a7, _mm256_mul_ps(qv, _mm256_loadu_ps(k7 + d)));
    }
    __m256 a[8] = {a0, a1, a2, a3, a4, a5, a6, a7};
    /* tree8 per position: lanes (i, i + 4) first (lo + hi halves) */
    __m256 x01 = _mm256_add_ps(_mm256_permute2f128_ps(a[0], a[1], 0x20), _mm256_permute2f128_ps(a[0], a[1], 0x31));
    __m256 x23 = _mm256_add_ps(_mm256_permute2f128_ps(a[2], a[3], 0x20), _mm256_permute2f128_ps(a[2], a[3], 0x31));
    __m256 x45 = _mm256_add_ps(_mm256_permute2f128_ps(a[4], a[5], 0x20), _mm256_permute2f128_ps(a[4], a[5], 0x31));
    __m256 x67 = _mm256_add_ps(_mm256_permute2f128_ps(a[6], a[7], 0x20), _mm256_permute2f128_ps(a[6], a[7], 0x31));
    /* then (i, i + 2): per 128-bit half [P.v0 P.v1 Q.v0 Q.v1] + [P.v2 P.v3 Q.v2 Q.v3] */
    __m256 y02 = _mm256_add_ps(_mm256_shuffle_ps(x01, x23, 0x44), _mm256_shuffle_ps(x01, x23, 0xEE));
    __m256 y46 = _mm256_add_ps(_mm256_shuffle_ps(x45, x67, 0x44), _mm256_shuffle_ps(x45, x67, 0xEE));
    /* then (0, 1): lanes hold positions 0 2 4 6 | 1 3 5 7 */
    __m256 w = _mm256_add_ps(_mm256_shuffle_ps(y02, y46, 0x88), _mm256_shuffle_ps(y02, y46, 0xDD));
    w = _mm256_mul_ps(w, _mm256_set1_ps(scale));
    w = _mm256_permutevar8x32_ps(w, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_ps(s, w);
}

/* acc (hd, in registers for hd <= 32) += e[t] * v_t over t in [t0, t1), a
 * multiply then an add per element, in t order. */
__attribute__((target("avx2"))) static inline float wsum(float *acc, float l, const float *e, const void *v,
                                                         size_t stride_bytes, int t0, int t1, int hd,
                                                         const drift_numeric_profile *p, float *kvbuf) {
    int f32 = p->kv == DRIFT_DTYPE_F32;
    if (hd == 32) {
        __m256 a0 = _mm256_loadu_ps(acc), a1 = _mm256_loadu_ps(acc + 8), a2 = _mm256_loadu_ps(acc + 16),
               a3 = _mm256_loadu_ps(acc + 24);
        for (int t = t0; t < t1; t++) {
            const float *vt = (const float *)((const char *)v + (size_t)t * stride_bytes);
            if (!f32) {
                num_kv_load(p->kv, kvbuf, vt, hd);
                vt = kvbuf;
            }
            l += e[t];
            __m256 ev = _mm256_set1_ps(p->probs_lowp ? num_round1(num_dtype_of(p), e[t]) : e[t]);
            a0 = _mm256_add_ps(a0, _mm256_mul_ps(ev, _mm256_loadu_ps(vt)));
            a1 = _mm256_add_ps(a1, _mm256_mul_ps(ev, _mm256_loadu_ps(vt + 8)));
            a2 = _mm256_add_ps(a2, _mm256_mul_ps(ev, _mm256_loadu_ps(vt + 16)));
            a3 = _mm256_add_ps(a3, _mm256_mul_ps(ev, _mm256_loadu_ps(vt + 24)));
        }
        _mm256_storeu_ps(acc, a0);
        _mm256_storeu_ps(acc + 8, a1);
        _mm256_storeu_ps(acc + 16, a2);
        _mm256_storeu_ps(acc + 24, a3);
        return l;
    }
    for (int t = t0; t < t1; t++) {
        const float *vt = (const float *)((const char *)v + (size_t)t * stride_bytes);
        if (!f32) {
            num_kv_load(p->kv, kvbuf, vt, hd);
            vt = kvbuf;
        }
        l += e[t];
        __m256 ev = _mm256_set1_ps(p->probs_lowp ? num_round1(num_dtype_of(p), e[t]) : e[t]);
        for (int d = 0; d < hd; d += 8)
            _mm256_storeu_ps(acc + d, _mm256_add_ps(_mm256_loadu_ps(acc + d), _mm256_mul_ps(ev, _mm256_loadu_ps(vt + d))));
    }
    return l;
}

/* wsum's operations for head_dim a multiple of 32 and f32 V rows (the
 * cache's, or a run widened from it once for the heads), with the
 * multipliers given: w[t] (e[t] rounded as probs=dtype asks, or e itself),
 * while l sums e[t]. Two heads (a, b) at once when acc_b is set: eight
 * accumulator vectors in registers (four per head and run of 32 values), so
 * the adds of one key do not wait for the last key's, and each V row is
 * loaded once for both. Per value the same multiply then add, in t order. */
#define WSUM_BODY(WITH_B, WITH_L)                                                                                      \
    for (int t = t0; t < t1; t++) {                                                                                    \
        const float *vt = (const float *)((const char *)v + (size_t)t * stride_bytes) + d0;                             \
        __m256 v0 = _mm256_loadu_ps(vt), v1 = _mm256_loadu_ps(vt + 8), v2 = _mm256_loadu_ps(vt + 16),                   \
               v3 = _mm256_loadu_ps(vt + 24);                                                                          \
        if (WITH_L) la += ea[t];                                                                                       \
        __m256 xa = _mm256_set1_ps(wa[t]);                                                                             \
        a0 = _mm256_add_ps(a0, _mm256_mul_ps(xa, v0));                                                                 \
        a1 = _mm256_add_ps(a1, _mm256_mul_ps(xa, v1));                                                                 \
        a2 = _mm256_add_ps(a2, _mm256_mul_ps(xa, v2));                                                                 \
        a3 = _mm256_add_ps(a3, _mm256_mul_ps(xa, v3));                                                                 \
        if (WITH_B) {                                                                                                  \
            if (WITH_L) lb += eb[t];                                                                                   \
            __m256 xb = _mm256_set1_ps(wb[t]);                                                                         \
            b0 = _mm256_add_ps(b0, _mm256_mul_ps(xb, v0));                                                             \
            b1 = _mm256_add_ps(b1, _mm256_mul_ps(xb, v1));                                                             \
            b2 = _mm256_add_ps(b2, _mm256_mul_ps(xb, v2));                                                             \
            b3 = _mm256_add_ps(b3, _mm256_mul_ps(xb, v3));                                                             \
        }                                                                                                              \
    }

__attribute__((target("avx2"))) static void wsum32(float *acc_a, float *la_p, const float *ea, const float *wa, float *acc_b,
                                                   float *lb_p, const float *eb, const float *wb, const void *v,
                                                   size_t stride_bytes, int t0, int t1, int hd) {
    float la = *la_p, lb = lb_p ? *lb_p : 0.0f;
    for (int d0 = 0; d0 < hd; d0 += 32) {
        __m256 a0 = _mm256_loadu_ps(acc_a + d0), a1 = _mm256_loadu_ps(acc_a + d0 + 8), a2 = _mm256_loadu_ps(acc_a + d0 + 16),
               a3 = _mm256_loadu_ps(acc_a + d0 + 24);
        if (acc_b) {
            __m256 b0 = _mm256_loadu_ps(acc_b + d0), b1 = _mm256_loadu_ps(acc_b + d0 + 8),
                   b2 = _mm256_loadu_ps(acc_b + d0 + 16), b3 = _mm256_loadu_ps(acc_b + d0 + 24);
            if (d0 == 0) {
                WSUM_BODY(1, 1)
            } else {
                WSUM_BODY(1, 0)
            }
            _mm256_storeu_ps(acc_b + d0, b0);
            _mm256_storeu_ps(acc_b + d0 + 8, b1);
            _mm256_storeu_ps(acc_b + d0 + 16, b2);
            _mm256_storeu_ps(acc_b + d0 + 24, b3);
        } else {
            __m256 b0, b1, b2, b3;
            (void)b0, (void)b1, (void)b2, (void)b3;
            if (d0 == 0) {
                WSUM_BODY(0, 1)
            } else {
                WSUM_BODY(0, 0)
            }
        }
        _mm256_storeu_ps(acc_a + d0, a0);
        _mm256_storeu_ps(acc_a + d0 + 8, a1);
        _mm256_storeu_ps(acc_a + d0 + 16, a2);
        _mm256_storeu_ps(acc_a + d0 + 24, a3);
    }
    *la_p = la;
    if (lb_p) *lb_p = lb;
}
#undef WSUM_BODY

/* The largest of s[t0..t1) that is a number (-inf when none), as the
 * sequential `if (s[t] > mb) mb = s[t]` finds it (lanes keep their own
 * maxima by the same comparison; only the sign of a zero maximum can
 * differ, and the scores minus either zero give the same exp). */
__attribute__((target("avx2"))) static inline float block_max(const float *s, int t0, int t1) {
    int t = t0;
    float mb = -INFINITY;
    if (t1 - t0 >= 16) {
        __m256 m0 = _mm256_set1_ps(-INFINITY), m1 = m0;
        for (; t + 16 <= t1; t += 16) {
            __m256 x0 = _mm256_loadu_ps(s + t), x1 = _mm256_loadu_ps(s + t + 8);
            m0 = _mm256_blendv_ps(m0, x0, _mm256_cmp_ps(x0, m0, _CMP_GT_OQ));
            m1 = _mm256_blendv_ps(m1, x1, _mm256_cmp_ps(x1, m1, _CMP_GT_OQ));
        }
        float l[16];
        _mm256_storeu_ps(l, m0);
        _mm256_storeu_ps(l + 8, m1);
        for (int j = 0; j < 16; j++)
            if (l[j] > mb) mb = l[j];
    }
    for (; t < t1; t++)
        if (s[t] > mb) mb = s[t];
    return mb;
}

/* One K or V row of the cache as hd floats: bf16 widened 8 at a time (the
 * same exact shift as num_bf16_to_f32), other formats by num_kv_load. */
__attribute__((target("avx2"))) static inline void att_row(drift_dtype kv, float *dst, const void *src, int hd) {
    if (kv != DRIFT_DTYPE_BF16) {
        num_kv_load(kv, dst, src, hd);
        return;
    }
    const uint16_t *h = src;
    for (int d = 0; d < hd; d += 8) {
        __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)(h + d)));
        _mm256_storeu_ps(dst + d, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
    }
}

/* The stride of each query head's scores in attend_avx2's scratch: room for
 * a short last tile of 8 and the 4 values vexp_sub may read past a block. */
static size_t att_sstride(int n_pos) { return (size_t)((n_pos + 7) & ~7) + 8; }

/* Positions per wsum call when several query heads share the pass: their V
 * rows (64 x head_dim floats, at most 32 KiB) stay in L1 while each head's
 * accumulators take them in turn. */
#define ATT_WTILE 64

/* num_fast_attention's contract for G query heads that share k and v (GQA),
 * head g's query at q + g * hd and its output at out + g * hd, for head_dim
 * a multiple of 8 up to ATT_MAX_HD, 1 <= G <= ATT_MAX_G and exp=libm when
 * vexp_usable(); s: G * att_sstride(n_pos) floats. Each head's operations
 * and their order are those of one head alone (G = 1): the heads only take
 * turns on each tile of 8 keys and each run of ATT_WTILE values, so a K or
 * V row is read from memory once for the G heads, not G times. */
__attribute__((target("avx2"))) static void attend_avx2(const drift_numeric_profile *p, float *out, const float *q, int G,
                                                        const void *k, const void *v, size_t stride_bytes, int n_pos,
                                                        int hd, float scale, float *s) {
    float kt[8 * ATT_MAX_HD], acc[ATT_MAX_G][ATT_MAX_HD], m[ATT_MAX_G], l[ATT_MAX_G], wr[ATT_MAX_G][ATT_WTILE];
    float vt[ATT_WTILE * ATT_MAX_HD]; /* a run of V rows as floats (caches other than f32) */
    size_t ss = att_sstride(n_pos);
    drift_dtype dt = num_dtype_of(p);
    int f32 = p->kv == DRIFT_DTYPE_F32;
    int hw = p->lanes || p->mma; /* a hardware level: q.k by its dot product, eight keys at a time */
    for (int t0 = 0; t0 < n_pos; t0 += 8) {
        const float *kp[8];
        for (int j = 0; j < 8; j++) {
            int t = t0 + j < n_pos ? t0 + j : t0; /* a short last tile repeats a position */
            const void *src = (const char *)k + (size_t)t * stride_bytes;
            if (f32) {
                kp[j] = src;
            } else {
                att_row(p->kv, kt + (size_t)j * hd, src, hd);
                kp[j] = kt + (size_t)j * hd;
            }
        }
        for (int g = 0; g < G; g++) {
            float *sg = s + (size_t)g * ss;
            if (hw) {
                float d8[HW_R];
                num_hw_dot8(p, q + (size_t)g * hd, kp, hd, 1, d8);
                for (int j = 0; j < 8 && t0 + j < n_pos; j++) sg[t0 + j] = d8[j] * scale;
            } else {
                scores8(sg + t0, q + (size_t)g * hd, kp, hd, scale);
            }
        }
    }
    for (int g = 0; g < G; g++) {
        float *sg = s + (size_t)g * ss;
        if (p->scores_lowp)
            for (int t = 0; t < n_pos; t++) sg[t] = num_round1(num_dtype_of(p), sg[t]);
        for (int j = n_pos; j < ((n_pos + 7) & ~7) + 4; j++) sg[j] = 0.0f; /* what vexp_sub may read past the end */
        for (int d = 0; d < hd; d++) acc[g][d] = 0.0f;
        m[g] = -INFINITY;
        l[g] = 0.0f;
    }
    int blk = p->attn == DRIFT_ATTN_ONLINE ? p->attn_block : n_pos;
    if (blk <= 0) blk = n_pos;
    for (int t0 = 0; t0 < n_pos; t0 += blk) {
        int t1 = t0 + blk < n_pos ? t0 + blk : n_pos;
        for (int g = 0; g < G; g++) {
            float *sg = s + (size_t)g * ss;
            float mb = block_max(sg, t0, t1);
            float mn = mb > m[g] ? mb : m[g];
            float corr = t0 == 0 ? 0.0f : num_exp(p, m[g] - mn);
            if (t0 > 0) {
                l[g] *= corr;
                for (int d = 0; d < hd; d += 8)
                    _mm256_storeu_ps(acc[g] + d, _mm256_mul_ps(_mm256_loadu_ps(acc[g] + d), _mm256_set1_ps(corr)));
            }
            /* the weights in place of the scores (4 at a time: what lies past
             * t1 in the last group is scratch or the next block's scores, which
             * are saved and put back) */
            int n4 = (t1 - t0 + 3) & ~3;
            float keep[4];
            memcpy(keep, sg + t1, sizeof keep);
            vexp_sub(sg + t0, n4, mn);
            memcpy(sg + t1, keep, sizeof keep);
            m[g] = mn;
        }
        /* each head's sum over the block in t order, the heads taking turns
         * (two at a time where wsum32 applies) on each run of ATT_WTILE
         * positions; the multipliers rounded (probs=dtype) a run at a time */
        int fast = hd % 32 == 0, wt = G > 1 || fast ? ATT_WTILE : t1 - t0;
        for (int w0 = t0; w0 < t1; w0 += wt) {
            int w1 = w0 + wt < t1 ? w0 + wt : t1, n = w1 - w0;
            if (!fast) {
                for (int g = 0; g < G; g++) l[g] = wsum(acc[g], l[g], s + (size_t)g * ss, v, stride_bytes, w0, w1, hd, p, kt);
                continue;
            }
            /* the run's V rows: in place (f32), else widened once for the G
             * heads; positions counted from w0 */
            const void *vr = (const char *)v + (size_t)w0 * stride_bytes;
            size_t vs = stride_bytes;
            if (!f32) {
                for (int t = 0; t < n; t++)
                    att_row(p->kv, vt + (size_t)t * hd, (const char *)v + (size_t)(w0 + t) * stride_bytes, hd);
                vr = vt;
                vs = (size_t)hd * sizeof(float);
            }
            const float *e[ATT_MAX_G], *w[ATT_MAX_G];
            for (int g = 0; g < G; g++) {
                e[g] = s + (size_t)g * ss + w0;
                w[g] = e[g];
                if (p->probs_lowp && (dt == DRIFT_DTYPE_BF16 || dt == DRIFT_DTYPE_F16)) {
                    /* num_round1's bits, as num_round_acts gives them (for
                     * other dtypes num_round1 keeps the value) */
                    memcpy(wr[g], e[g], (size_t)n * sizeof(float));
                    num_round_acts(dt, wr[g], n);
                    w[g] = wr[g];
                }
            }
            int g = 0;
            for (; g + 1 < G; g += 2)
                wsum32(acc[g], &l[g], e[g], w[g], acc[g + 1], &l[g + 1], e[g + 1], w[g + 1], vr, vs, 0, n, hd);
            if (g < G) wsum32(acc[g], &l[g], e[g], w[g], NULL, NULL, NULL, NULL, vr, vs, 0, n, hd);
        }
    }
    for (int g = 0; g < G; g++) {
        float inv = 1.0f / l[g];
        for (int d = 0; d < hd; d += 8)
            _mm256_storeu_ps(out + (size_t)g * hd + d, _mm256_mul_ps(_mm256_loadu_ps(acc[g] + d), _mm256_set1_ps(inv)));
    }
}

int num_fast_attention_sse_only;

int num_fast_attention_avx2_active(void) { return vexp_usable(); }

void num_fast_attention(const drift_numeric_profile *p, float *out, const float *q,
                        const void *k, const void *v, size_t stride_bytes, int n_pos,
                        int head_dim, float scale, float *scratch) {
    drift_dtype dt = num_dtype_of(p);
    /* a hardware level computes the scores q.k with its own dot products */
    int hw = p->lanes || p->mma;
    if (!num_fast_attention_sse_only && n_pos > 0 && head_dim % 8 == 0 && head_dim <= ATT_MAX_HD && p->exp == DRIFT_EXP_LIBM && vexp_usable()) {
        attend_avx2(p, out, q, 1, k, v, stride_bytes, n_pos, head_dim, scale, scratch);
        return;
    }
    float *s = scratch;                 /* (n_pos) scores */
    float *kv = scratch + n_pos;        /* (head_dim) one K or V vector */
    float *acc = kv + head_dim;         /* (head_dim) weighted sum of V */
    int f32 = p->kv == DRIFT_DTYPE_F32; /* f32 cache: vectors read in place */
    for (int d = 0; d < head_dim; d++) acc[d] = 0.0f;
    if (n_pos <= 0) {
        for (int d = 0; d < head_dim; d++) out[d] = 0.0f;
        return;
    }
    for (int t = 0; t < n_pos; t++) {
        const void *kt = (const char *)k + (size_t)t * stride_bytes;
        if (!f32) num_kv_load(p->kv, kv, kt, head_dim);
        const float *kf = f32 ? (const float *)kt : kv;
        s[t] = (hw ? num_hw_dot(p, q, kf, head_dim, 1) : dot8(q, kf, head_dim)) * scale;
        if (p->scores_lowp) s[t] = num_round1(dt, s[t]);
    }
    int blk = p->attn == DRIFT_ATTN_ONLINE ? p->attn_block : n_pos;
    float m = -INFINITY, l = 0.0f;
    for (int t0 = 0; t0 < n_pos; t0 += blk) {
        int t1 = t0 + blk < n_pos ? t0 + blk : n_pos;
        float mb = -INFINITY;
        for (int t = t0; t < t1; t++)
            if (s[t] > mb) mb = s[t];
        float mn = mb > m ? mb : m;
        float corr = t0 == 0 ? 0.0f : num_exp(p, m - mn);
        if (t0 > 0) {
            l *= corr;
            scale_vec(acc, acc, corr, head_dim);
        }
        for (int t = t0; t < t1; t++) {
            float e = num_exp(p, s[t] - mn);
            l += e;
            const void *vt = (const char *)v + (size_t)t * stride_bytes;
            if (!f32) num_kv_load(p->kv, kv, vt, head_dim);
            axpy_vec(acc, p->probs_lowp ? num_round1(dt, e) : e, f32 ? (const float *)vt : kv, head_dim);
        }
        m = mn;
    }
    float inv = 1.0f / l;
    scale_vec(out, acc, inv, head_dim);
}

size_t num_attention_scratch(int n_q, int n_pos, int head_dim) {
    int g = n_q < ATT_MAX_G ? n_q : ATT_MAX_G;
    size_t a = (size_t)(g > 1 ? g : 1) * att_sstride(n_pos > 0 ? n_pos : 0), b = (size_t)n_pos + 2 * (size_t)head_dim + 16;
    return a > b ? a : b;
}

void num_fast_attention_group(const drift_numeric_profile *p, float *out, const float *q, int n_q, const void *k,
                              const void *v, size_t stride_bytes, int n_pos, int head_dim, float scale,
                              float *scratch) {
    if (!num_fast_attention_sse_only && n_pos > 0 && head_dim % 8 == 0 && head_dim <= ATT_MAX_HD && p->exp == DRIFT_EXP_LIBM &&
        vexp_usable()) {
        for (int g0 = 0; g0 < n_q; g0 += ATT_MAX_G) {
            int G = n_q - g0 < ATT_MAX_G ? n_q - g0 : ATT_MAX_G;
            attend_avx2(p, out + (size_t)g0 * head_dim, q + (size_t)g0 * head_dim, G, k, v, stride_bytes, n_pos, head_dim,
                        scale, scratch);
        }
        return;
    }
    for (int g = 0; g < n_q; g++)
        num_fast_attention(p, out + (size_t)g * head_dim, q + (size_t)g * head_dim, k, v, stride_bytes, n_pos, head_dim,
                           scale, scratch);
}

/* ---------------------------------------------------------------------------
 * Dispatchers and shared small kernels
 * ------------------------------------------------------------------------- */
drift_status num_matmul(const drift_numeric_profile *p, float *y, const float *x,
                        const num_qmat *W, int64_t B, drift_error *err) {
    if (p->isa == DRIFT_ISA_REF) return num_ref_matmul(p, y, x, W, B, err);
    return num_fast_matmul(p, y, x, W, B, err);
}

void num_rmsnorm(const drift_numeric_profile *p, float *out, const float *x, const float *w,
                 int64_t n, float eps) {
    if (p->isa == DRIFT_ISA_REF) num_ref_rmsnorm(p, out, x, w, n, eps);
    else num_fast_rmsnorm(p, out, x, w, n, eps);
}

void num_softmax(const drift_numeric_profile *p, float *x, int64_t n) {
    if (p->isa == DRIFT_ISA_REF) num_ref_softmax(p, x, n);
    else num_fast_softmax(p, x, n);
}

void num_rope(const drift_numeric_profile *p, float *x, int n_heads, int64_t pos,
              const num_rope_params *rp) {
    if (p->isa == DRIFT_ISA_REF) num_ref_rope(p, x, n_heads, pos, rp);
    else num_fast_rope(p, x, n_heads, pos, rp);
}

void num_swiglu(const drift_numeric_profile *p, float *out, const float *gate, const float *up,
                int64_t n) {
    if (p->isa == DRIFT_ISA_REF) num_ref_swiglu(p, out, gate, up, n);
    else num_fast_swiglu(p, out, gate, up, n);
}

void num_silu(const drift_numeric_profile *p, float *out, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        if (p->isa == DRIFT_ISA_REF) {
            double g = x[i];
            out[i] = (float)(g / (1.0 + num_ref_exp(-g))); /* not libm: its bits depend on the CPU */
        } else {
            out[i] = x[i] / (1.0f + num_exp(p, -x[i]));
        }
    }
}

void num_add(float *out, const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

void num_attention(const drift_numeric_profile *p, float *out, const float *q, const void *k,
                   const void *v, size_t stride_bytes, int n_pos, int head_dim, float scale,
                   float *scratch) {
    if (p->isa == DRIFT_ISA_REF)
        num_ref_attention(p, out, q, k, v, stride_bytes, n_pos, head_dim, scale, scratch);
    else
        num_fast_attention(p, out, q, k, v, stride_bytes, n_pos, head_dim, scale, scratch);
}

void num_attention_group(const drift_numeric_profile *p, float *out, const float *q, int n_q, const void *k,
                         const void *v, size_t stride_bytes, int n_pos, int head_dim, float scale, float *scratch) {
    if (p->isa == DRIFT_ISA_REF) {
        for (int g = 0; g < n_q; g++)
            num_ref_attention(p, out + (size_t)g * head_dim, q + (size_t)g * head_dim, k, v, stride_bytes, n_pos, head_dim,
                              scale, scratch);
        return;
    }
    num_fast_attention_group(p, out, q, n_q, k, v, stride_bytes, n_pos, head_dim, scale, scratch);
}

void num_embedding(const drift_numeric_profile *p, float *out, const num_qmat *W, int64_t row) {
    if (p->isa == DRIFT_ISA_REF) num_qmat_dequantize_row(W, row, out);
    else deq_row(W, row, out, num_isa_resolve(p->isa));
    num_round_acts(num_resid_of(p), out, W->cols);
}
