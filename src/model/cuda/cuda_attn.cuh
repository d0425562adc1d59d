/* cuda_attn.cuh - the attention kernels (split-KV, flash-decoding) as
 * templates over the KV format FMT, the values a lane holds NPL and the query
 * heads a block serves GM. cuda_attn_<format>.cu instantiate them, one
 * translation unit per KV format so that a parallel build compiles the
 * formats side by side (they were most of the backend's compile time in one
 * file); cuda_attn.cu is the launcher.
 *
 * Attention (flash-decoding): the positions [start, pos] of a row are cut
 * into splits of `chunk` positions; one block per (split, group of query
 * heads of one KV head, row) of nw warps, nw = min(8, ceil(chunk / 32)) (a
 * function of the chunk only). Tile k of a split (32 positions) belongs to
 * warp k mod nw: lane j scores position j of the tile for each head of the
 * block (q . k with four partial sums by element index, q from shared
 * memory, the K vector loaded once for all the heads, its pieces in flight
 * together), each head's tile max and sum of exp are fixed xor trees over
 * the warp, and lane l accumulates the weighted V of its dimensions over the
 * tile's positions in order (online softmax over the warp's tiles). The
 * warps' partials are merged in warp order; the splits of a (row, head) are
 * merged in split order with the same merge step by the block that finishes
 * last (a counter per row and head group). A row of one split writes its
 * output directly with the same final operation (acc * (1 / l)). The order
 * of every sum depends on (head_dim, chunk, the row's positions) only. When
 * all splits' warps of a row fit one block (splits x nw <= 16 warps, <= 48 KB of shared
 * memory), k_attn_row does that work in one block per (row, head group):
 * the same per-split operations, splits merged in split order through
 * shared memory instead of the global workspace and the counter, so the same
 * bits with fewer round trips (DRIFT_CUDA_FUSE=0: always the split grid).
 * The forward pass has attention write wo's prepared input directly
 * (act() rounding and the bf16/f16 copy: no prep launch) where act() is
 * elementwise, and hands it k_qkv's arguments: for one row served by
 * k_attn_row, each block does k_qkv's operations for its heads itself (bias,
 * RoPE in double with the angles computed before the dependency wait, K and
 * V stored at the row's position; the blocks of a KV head store the same
 * bits) and reads them back, so the pass has no k_qkv launch (the same
 * bits; DRIFT_CUDA_QKA=0 keeps the launch). A one-row pass also prefetches
 * the cache lines of its earlier positions before the wait (stored by
 * earlier passes; the lines of its own position only after it).
 *
 * The chunk is fixed by the profile with batch_invariant=1 (so a row's
 * result depends on its own positions only), and chosen from the batch size
 * and the SM count with batch_invariant=0.
 *
 * Instantiated: NPL 1, 2, 4, 8 and 32 (head_dim up to 32, 64, 128, 256 and
 * 1024); GM (query heads of one KV head per block, sharing the K and V
 * loads) 1, 2 and 4 for the f32 and bf16 caches, 1 for the others
 * (dcu_attn_gm_max): 78 attention kernels instead of 120. See
 * bench/BENCHMARKS.md, "Issue 23: the CUDA build". */
#ifndef DRIFT_MODEL_CUDA_ATTN_CUH
#define DRIFT_MODEL_CUDA_ATTN_CUH

#include "model/cuda/cuda_internal.cuh"

#define ATT_TILE 32 /* positions of a tile: one per lane */

struct att_k {
    const float *q;
    int64_t ldq;
    float *out;
    int64_t ldo;
    const drow *rows;
    float *part;
    unsigned *cnt;
    int layer, n_heads, n_kvh, hd, window, kvfmt, fast, chunk, max_splits;
    size_t vb;
    float scale;
    /* the output as a prepared matmul input (dcu_attn_args.oa): out holds
     * act(o) (acts; F32 leaves o as is), oh (NULL: none) its bf16/f16 bits,
     * rows of okp; rows [B, pad16(B)) of oh and columns [n_heads hd, okp)
     * are zeroed (B: rows of the whole launch, b0: this slice's first) */
    int acts, B, b0;
    uint16_t *oh;
    int64_t okp;
    /* qk = 1 (k_attn_row, one row): k_qkv's work for this block's heads is
     * done here (qa: its arguments; q, k, v unrotated) */
    int qk;
    dcu_qkv_args qa;
};

/* output element (row b of the slice, column col) */
static __device__ __forceinline__ void att_put(const att_k &P, int b, int col, float v) {
    P.out[(size_t)b * P.ldo + col] =
        dcu_prep_elem(P.acts, v, 0.0f, false, P.oh ? P.oh + (size_t)b * P.okp + col : NULL, NULL);
}

/* the zero padding of oh that belongs to row b of the slice, shared by the
 * row's nblk blocks (this one is blk): columns [K, okp) of the row, and
 * after the launch's last row the rows up to pad16(B), in 16-byte stores
 * where aligned. (At batch 1 that is 15 rows of okp zeros: one block storing
 * them two bytes at a time finished microseconds after the others.) */
static __device__ void att_pad(const att_k &P, int b, int blk, int nblk) {
    if (!P.oh) return;
    const int K = P.n_heads * P.hd, gb = P.b0 + b;
    const int64_t t = (int64_t)blk * blockDim.x + threadIdx.x, stride = (int64_t)nblk * blockDim.x;
    for (int64_t i = K + t; i < P.okp; i += stride) P.oh[(size_t)b * P.okp + i] = 0;
    if (gb != P.B - 1) return;
    uint16_t *z = P.oh + (size_t)(b + 1) * P.okp;
    const int64_t n = (dcu_pad16(P.B) - P.B) * P.okp; /* a multiple of 16 */
    if (((uintptr_t)z & 15u) == 0) {
        for (int64_t i = t; i < n / 8; i += stride) ((uint4 *)z)[i] = make_uint4(0u, 0u, 0u, 0u);
    } else {
        for (int64_t i = t; i < n; i += stride) z[i] = 0;
    }
}

static __device__ __forceinline__ void row_window(const drow &R, int window, int *start, int *npos) {
    int s = window > 0 && R.pos + 1 > window ? R.pos + 1 - window : 0;
    *start = s;
    *npos = R.pos - s + 1;
}

/* element d of a KV vector in a format fixed at compile time (= dcu_kv_elem) */
template <int FMT>
static __device__ __forceinline__ float kv_elem_t(const uint8_t *vec, int d) {
    switch (FMT) {
    case DRIFT_DTYPE_F16: return dcu_f16_f32(((const uint16_t *)vec)[d]);
    case DRIFT_DTYPE_BF16: return dcu_bf16_f32(((const uint16_t *)vec)[d]);
    case DRIFT_DTYPE_FP8_E4M3: return __fmul_rn(dcu_e4m3_f32(vec[4 + d]), dcu_kv_scale(FMT, vec));
    case DRIFT_DTYPE_FP8_E5M2: return __fmul_rn(dcu_e5m2_f32(vec[4 + d]), dcu_kv_scale(FMT, vec));
    default: return ((const float *)vec)[d];
    }
}

/* one 16-bit KV element (f16 / bf16 bits) */
template <int FMT>
static __device__ __forceinline__ float kv_h(uint32_t h) {
    return FMT == DRIFT_DTYPE_F16 ? dcu_f16_f32(h & 0xffffu) : dcu_bf16_f32(h & 0xffffu);
}

/* one fp8 code with its vector's scale s (= dcu_kv_elem) */
template <int FMT>
static __device__ __forceinline__ float kv_q(uint32_t c, float s) {
    return __fmul_rn(FMT == DRIFT_DTYPE_FP8_E4M3 ? dcu_e4m3_f32(c & 0xffu) : dcu_e5m2_f32(c & 0xffu), s);
}

/* o[i] = element d0 + i (i < N, all < head_dim) of a KV vector, the very
 * values dcu_kv_elem gives, with the widest loads the address allows (vectors
 * need not be aligned: a KV vector of fp8 starts with its 4-byte scale s,
 * which the caller passes) */
template <int FMT, int N>
static __device__ __forceinline__ void kv_ld(const uint8_t *vec, int d0, float s, float *o) {
    if (FMT == DRIFT_DTYPE_F16 || FMT == DRIFT_DTYPE_BF16) {
        const uint16_t *p = (const uint16_t *)vec + d0;
        uintptr_t a = (uintptr_t)p;
        if (N % 8 == 0 && (a & 15u) == 0) {
#pragma unroll
            for (int i = 0; i < N; i += 8) {
                uint4 w = *(const uint4 *)(p + i);
                o[i + 0] = kv_h<FMT>(w.x), o[i + 1] = kv_h<FMT>(w.x >> 16);
                o[i + 2] = kv_h<FMT>(w.y), o[i + 3] = kv_h<FMT>(w.y >> 16);
                o[i + 4] = kv_h<FMT>(w.z), o[i + 5] = kv_h<FMT>(w.z >> 16);
                o[i + 6] = kv_h<FMT>(w.w), o[i + 7] = kv_h<FMT>(w.w >> 16);
            }
        } else if (N % 2 == 0 && (a & 3u) == 0) {
#pragma unroll
            for (int i = 0; i < N; i += 2) {
                uint32_t w = *(const uint32_t *)(p + i);
                o[i] = kv_h<FMT>(w), o[i + 1] = kv_h<FMT>(w >> 16);
            }
        } else {
#pragma unroll
            for (int i = 0; i < N; i++) o[i] = kv_h<FMT>(p[i]);
        }
    } else if (FMT == DRIFT_DTYPE_FP8_E4M3 || FMT == DRIFT_DTYPE_FP8_E5M2) {
        const uint8_t *p = vec + 4 + d0;
        uintptr_t a = (uintptr_t)p;
        if (N % 4 == 0 && (a & 3u) == 0) {
#pragma unroll
            for (int i = 0; i < N; i += 4) {
                uint32_t w = *(const uint32_t *)(p + i);
                o[i] = kv_q<FMT>(w, s), o[i + 1] = kv_q<FMT>(w >> 8, s);
                o[i + 2] = kv_q<FMT>(w >> 16, s), o[i + 3] = kv_q<FMT>(w >> 24, s);
            }
        } else {
#pragma unroll
            for (int i = 0; i < N; i++) o[i] = kv_q<FMT>(p[i], s);
        }
    } else {
        const float *p = (const float *)vec + d0;
        uintptr_t a = (uintptr_t)p;
        if (N % 4 == 0 && (a & 15u) == 0) {
#pragma unroll
            for (int i = 0; i < N; i += 4) {
                float4 w = *(const float4 *)(p + i);
                o[i] = w.x, o[i + 1] = w.y, o[i + 2] = w.z, o[i + 3] = w.w;
            }
        } else if (N % 2 == 0 && (a & 7u) == 0) {
#pragma unroll
            for (int i = 0; i < N; i += 2) {
                float2 w = *(const float2 *)(p + i);
                o[i] = w.x, o[i + 1] = w.y;
            }
        } else {
#pragma unroll
            for (int i = 0; i < N; i++) o[i] = p[i];
        }
    }
}

/* q . k of one position (q in shared memory, k a KV vector of hd
 * elements): four partial sums (element d into sum d mod 4, each in element
 * order), then (s0 + s1) + (s2 + s3). The order depends on hd only. */
template <int FMT>
static __device__ __forceinline__ float att_dot(const float *qs, const uint8_t *kv, int hd) {
    float s = dcu_kv_scale(FMT, kv);
    float p0 = 0.0f, p1 = 0.0f, p2 = 0.0f, p3 = 0.0f;
    int d = 0;
#pragma unroll 4
    for (; d + 8 <= hd; d += 8) {
        float k[8];
        kv_ld<FMT, 8>(kv, d, s, k);
        float4 qa = *(const float4 *)(qs + d), qb = *(const float4 *)(qs + d + 4);
        p0 = fmaf(qa.x, k[0], p0), p1 = fmaf(qa.y, k[1], p1), p2 = fmaf(qa.z, k[2], p2), p3 = fmaf(qa.w, k[3], p3);
        p0 = fmaf(qb.x, k[4], p0), p1 = fmaf(qb.y, k[5], p1), p2 = fmaf(qb.z, k[6], p2), p3 = fmaf(qb.w, k[7], p3);
    }
    for (; d < hd; d++) {
        float k;
        kv_ld<FMT, 1>(kv, d, s, &k);
        switch (d & 3) {
        case 0: p0 = fmaf(qs[d], k, p0); break;
        case 1: p1 = fmaf(qs[d], k, p1); break;
        case 2: p2 = fmaf(qs[d], k, p2); break;
        default: p3 = fmaf(qs[d], k, p3); break;
        }
    }
    return __fadd_rn(__fadd_rn(p0, p1), __fadd_rn(p2, p3));
}

#define ATT_MAX_WARPS 8 /* warps of a partial-attention block (fewer for short chunks) */
#define ATT_KCH 8       /* 8-element pieces of a K vector loaded together (64 elements) */

/* 8 K elements [d, d + 8) of an aligned KV vector (att_kal): one 16-byte
 * load (f16 / bf16), two (f32) or two 4-byte loads (fp8), decoded to the
 * values dcu_kv_elem gives */
template <int FMT> struct att_kraw { uint4 a, b; };
template <int FMT>
static __device__ __forceinline__ void att_kload(const uint8_t *kv, int d, att_kraw<FMT> &r) {
    if (FMT == DRIFT_DTYPE_F16 || FMT == DRIFT_DTYPE_BF16) {
        r.a = *(const uint4 *)(kv + (size_t)d * 2);
    } else if (FMT == DRIFT_DTYPE_FP8_E4M3 || FMT == DRIFT_DTYPE_FP8_E5M2) {
        const uint32_t *p = (const uint32_t *)(kv + 4 + d);
        r.a.x = p[0], r.a.y = p[1];
    } else {
        r.a = *(const uint4 *)(kv + (size_t)d * 4);
        r.b = *(const uint4 *)(kv + (size_t)d * 4 + 16);
    }
}
template <int FMT>
static __device__ __forceinline__ void att_kdec(const att_kraw<FMT> &r, float s, float *k) {
    if (FMT == DRIFT_DTYPE_F16 || FMT == DRIFT_DTYPE_BF16) {
        k[0] = kv_h<FMT>(r.a.x), k[1] = kv_h<FMT>(r.a.x >> 16), k[2] = kv_h<FMT>(r.a.y), k[3] = kv_h<FMT>(r.a.y >> 16);
        k[4] = kv_h<FMT>(r.a.z), k[5] = kv_h<FMT>(r.a.z >> 16), k[6] = kv_h<FMT>(r.a.w), k[7] = kv_h<FMT>(r.a.w >> 16);
    } else if (FMT == DRIFT_DTYPE_FP8_E4M3 || FMT == DRIFT_DTYPE_FP8_E5M2) {
        k[0] = kv_q<FMT>(r.a.x, s), k[1] = kv_q<FMT>(r.a.x >> 8, s);
        k[2] = kv_q<FMT>(r.a.x >> 16, s), k[3] = kv_q<FMT>(r.a.x >> 24, s);
        k[4] = kv_q<FMT>(r.a.y, s), k[5] = kv_q<FMT>(r.a.y >> 8, s);
        k[6] = kv_q<FMT>(r.a.y >> 16, s), k[7] = kv_q<FMT>(r.a.y >> 24, s);
    } else {
        k[0] = __uint_as_float(r.a.x), k[1] = __uint_as_float(r.a.y), k[2] = __uint_as_float(r.a.z);
        k[3] = __uint_as_float(r.a.w), k[4] = __uint_as_float(r.b.x), k[5] = __uint_as_float(r.b.y);
        k[6] = __uint_as_float(r.b.z), k[7] = __uint_as_float(r.b.w);
    }
}

/* Whether every K and V vector of a (row, kv head) can take att_kload and
 * att_vload: hd a multiple of 8 and the vectors 16-byte (fp8: 4-byte)
 * aligned. Uniform over the block. */
template <int FMT>
static __device__ __forceinline__ bool att_kal(const uint8_t *kb, const uint8_t *vb, size_t pstride, int hd) {
    uintptr_t m = (FMT == DRIFT_DTYPE_FP8_E4M3 || FMT == DRIFT_DTYPE_FP8_E5M2) ? 3u : 15u;
    return hd % 8 == 0 && ((uintptr_t)kb & m) == 0 && ((uintptr_t)vb & m) == 0 && (pstride & m) == 0;
}

/* o[i] = element d0 + i (i < N) of an aligned V vector (att_kal holds, d0 =
 * lane * N, d0 + N <= hd): the values dcu_kv_elem gives, one load of N elements
 * (two or more 4-byte loads for fp8 N >= 8, 16-byte ones for N = 32) */
template <int FMT, int N>
static __device__ __forceinline__ void att_vload(const uint8_t *vec, int d0, float *o) {
    if (FMT == DRIFT_DTYPE_F16 || FMT == DRIFT_DTYPE_BF16) {
        const uint16_t *p = (const uint16_t *)vec + d0;
        if (N == 1) {
            o[0] = kv_h<FMT>(p[0]);
        } else if (N == 2) {
            uint32_t w = *(const uint32_t *)p;
            o[0] = kv_h<FMT>(w), o[1] = kv_h<FMT>(w >> 16);
        } else if (N == 4) {
            uint2 w = *(const uint2 *)p;
            o[0] = kv_h<FMT>(w.x), o[1] = kv_h<FMT>(w.x >> 16), o[2] = kv_h<FMT>(w.y), o[3] = kv_h<FMT>(w.y >> 16);
        } else {
#pragma unroll
            for (int i = 0; i < N; i += 8) {
                uint4 w = *(const uint4 *)(p + i);
                o[i + 0] = kv_h<FMT>(w.x), o[i + 1] = kv_h<FMT>(w.x >> 16);
                o[i + 2] = kv_h<FMT>(w.y), o[i + 3] = kv_h<FMT>(w.y >> 16);
                o[i + 4] = kv_h<FMT>(w.z), o[i + 5] = kv_h<FMT>(w.z >> 16);
                o[i + 6] = kv_h<FMT>(w.w), o[i + 7] = kv_h<FMT>(w.w >> 16);
            }
        }
    } else if (FMT == DRIFT_DTYPE_FP8_E4M3 || FMT == DRIFT_DTYPE_FP8_E5M2) {
        float s = __uint_as_float(*(const uint32_t *)vec);
        const uint8_t *p = vec + 4 + d0;
        if (N == 1) {
            o[0] = kv_q<FMT>(p[0], s);
        } else if (N == 2) {
            uint32_t w = *(const uint16_t *)p;
            o[0] = kv_q<FMT>(w, s), o[1] = kv_q<FMT>(w >> 8, s);
        } else {
#pragma unroll
            for (int i = 0; i < N; i += 4) {
                uint32_t w = *(const uint32_t *)(p + i);
                o[i] = kv_q<FMT>(w, s), o[i + 1] = kv_q<FMT>(w >> 8, s);
                o[i + 2] = kv_q<FMT>(w >> 16, s), o[i + 3] = kv_q<FMT>(w >> 24, s);
            }
        }
    } else {
        const float *p = (const float *)vec + d0;
        if (N == 1) {
            o[0] = p[0];
        } else if (N == 2) {
            float2 w = *(const float2 *)p;
            o[0] = w.x, o[1] = w.y;
        } else {
#pragma unroll
            for (int i = 0; i < N; i += 4) {
                float4 w = *(const float4 *)(p + i);
                o[i] = w.x, o[i + 1] = w.y, o[i + 2] = w.z, o[i + 3] = w.w;
            }
        }
    }
}

/* q . k for GM query heads sharing one K vector (att_kal holds): the
 * vector's pieces are loaded ATT_KCH at a time, all in flight together, and
 * each head's sum is att_dot's exactly (element d into partial d mod 4, in
 * element order; then (s0 + s1) + (s2 + s3)). qs: head g at qs + g * hq. */
template <int FMT, int GM>
static __device__ __forceinline__ void att_dot_al(const float *qs, int hq, const uint8_t *kv, int hd, float *out) {
    float s = dcu_kv_scale(FMT, kv);
    float p[GM][4];
#pragma unroll
    for (int g = 0; g < GM; g++) p[g][0] = p[g][1] = p[g][2] = p[g][3] = 0.0f;
    for (int c0 = 0; c0 < hd; c0 += 8 * ATT_KCH) {
        att_kraw<FMT> r[ATT_KCH];
#pragma unroll
        for (int c = 0; c < ATT_KCH; c++)
            if (c0 + 8 * c < hd) att_kload<FMT>(kv, c0 + 8 * c, r[c]);
#pragma unroll
        for (int c = 0; c < ATT_KCH; c++) {
            int d = c0 + 8 * c;
            if (d < hd) {
                float k[8];
                att_kdec<FMT>(r[c], s, k);
#pragma unroll
                for (int g = 0; g < GM; g++) {
                    float4 qa = *(const float4 *)(qs + g * hq + d), qb = *(const float4 *)(qs + g * hq + d + 4);
                    p[g][0] = fmaf(qa.x, k[0], p[g][0]), p[g][1] = fmaf(qa.y, k[1], p[g][1]);
                    p[g][2] = fmaf(qa.z, k[2], p[g][2]), p[g][3] = fmaf(qa.w, k[3], p[g][3]);
                    p[g][0] = fmaf(qb.x, k[4], p[g][0]), p[g][1] = fmaf(qb.y, k[5], p[g][1]);
                    p[g][2] = fmaf(qb.z, k[6], p[g][2]), p[g][3] = fmaf(qb.w, k[7], p[g][3]);
                }
            }
        }
    }
#pragma unroll
    for (int g = 0; g < GM; g++) out[g] = __fadd_rn(__fadd_rn(p[g][0], p[g][1]), __fadd_rn(p[g][2], p[g][3]));
}

/* merges a split / warp partial (mi, li, ai) into (M, L, a): the combine
 * step, the same for the warps of a block and for the splits of a row */
static __device__ __forceinline__ void att_merge(int fast, float &M, float &L, float &a, float mi, float li,
                                                 float ai) {
    float mn = fmaxf(M, mi);
    float c1 = dcu_exp(fast, M - mn), c2 = dcu_exp(fast, mi - mn);
    L = __fadd_rn(__fmul_rn(L, c1), __fmul_rn(li, c2));
    a = __fadd_rn(__fmul_rn(a, c1), __fmul_rn(ai, c2));
    M = mn;
}

/* A warp's tiles of one split for GM query heads of one KV head (see
 * k_attn_part): per head the online softmax of the previous kernel, with
 * the K and V loads shared by the heads. AL: att_kal holds. */
template <int FMT, int NPL, int GM, bool AL>
static __device__ __forceinline__ void att_tiles(const att_k &P, const float *qs, int hq, const uint8_t *kb,
                                                 const uint8_t *vbp, size_t pstride, int t0, int t1, int hd,
                                                 float (&m)[GM], float (&l)[GM], float (&acc)[GM][NPL], int warp,
                                                 int nw) {
    const int lane = threadIdx.x & 31;
    const int ntiles = (t1 - t0 + ATT_TILE - 1) / ATT_TILE;
    const int d0 = lane * NPL;
    const bool full = d0 + NPL <= hd;
    bool first = true;
    for (int k = warp; k < ntiles; k += nw) {
        int tt = t0 + k * ATT_TILE, nt = min(ATT_TILE, t1 - tt);
        float s[GM];
        if (lane < nt) {
            const uint8_t *kv = kb + (size_t)(tt + lane) * pstride;
            if (AL) {
                att_dot_al<FMT, GM>(qs, hq, kv, hd, s);
            } else {
#pragma unroll
                for (int g = 0; g < GM; g++) s[g] = att_dot<FMT>(qs + g * hq, kv, hd);
            }
#pragma unroll
            for (int g = 0; g < GM; g++) s[g] = __fmul_rn(s[g], P.scale);
        } else {
#pragma unroll
            for (int g = 0; g < GM; g++) s[g] = -INFINITY;
        }
        float pw[GM];
#pragma unroll
        for (int g = 0; g < GM; g++) {
            float mt = dcu_warp_max(s[g]);
            float mn = first ? mt : fmaxf(m[g], mt);
            float corr = first ? 0.0f : dcu_exp(P.fast, m[g] - mn);
            pw[g] = lane < nt ? dcu_exp(P.fast, s[g] - mn) : 0.0f;
            float ls = dcu_warp_sum(pw[g]);
            l[g] = first ? ls : __fadd_rn(__fmul_rn(l[g], corr), ls);
#pragma unroll
            for (int i = 0; i < NPL; i++) acc[g][i] = first ? 0.0f : __fmul_rn(acc[g][i], corr);
            m[g] = mn;
        }
        const uint8_t *vt = vbp + (size_t)tt * pstride;
        /* weighted V, positions in order; U positions' loads issued together: on the aligned path one
         * straight run of loads without a branch per position (positions past the tile load the tile's
         * last vector, a valid address, and are not used), so no load waits for the one before it */
        constexpr int U = NPL <= 1 ? 32 : NPL <= 2 ? 16 : NPL <= 4 ? 8 : NPL <= 8 ? 4 : 1;
        for (int j0 = 0; j0 < nt; j0 += U) {
            float v[U][NPL];
            if (AL && full) {
#pragma unroll
                for (int u = 0; u < U; u++)
                    att_vload<FMT, NPL>(vt + (size_t)min(j0 + u, nt - 1) * pstride, d0, v[u]);
            } else
#pragma unroll
            for (int u = 0; u < U; u++) {
                int j = j0 + u;
                const uint8_t *vec = vt + (size_t)j * pstride;
                if (j < nt && full) {
                    kv_ld<FMT, NPL>(vec, d0, dcu_kv_scale(FMT, vec), v[u]);
                } else {
#pragma unroll
                    for (int i = 0; i < NPL; i++) v[u][i] = j < nt && d0 + i < hd ? kv_elem_t<FMT>(vec, d0 + i) : 0.0f;
                }
            }
#pragma unroll
            for (int u = 0; u < U; u++) {
                float pj[GM];
#pragma unroll
                for (int g = 0; g < GM; g++) pj[g] = __shfl_sync(0xffffffffu, pw[g], (j0 + u) & 31);
                if (j0 + u < nt)
#pragma unroll
                    for (int g = 0; g < GM; g++)
#pragma unroll
                        for (int i = 0; i < NPL; i++) acc[g][i] = fmaf(pj[g], v[u][i], acc[g][i]);
            }
        }
        first = false;
    }
}

/* Split-KV attention, grid (splits, heads / GM, rows), 32 * nw threads with
 * nw = min(ATT_MAX_WARPS, ceil(chunk / ATT_TILE)): a function of the chunk
 * only. A block serves GM query heads of one KV head (GM divides the group;
 * the launcher picks it from the grid size: it changes which block does a
 * head's work, never the operations). Tile k of the split (positions t0 +
 * 32k ...) belongs to warp k mod nw; in a tile lane j scores position j for
 * every head (att_dot / att_dot_al: the K vector loaded once for the GM
 * heads), each head's tile max and sum of exp are fixed xor trees over the
 * warp, and lane l accumulates the weighted V of its NPL dimensions l * NPL
 * ... over the tile's positions in order (online softmax across the warp's
 * tiles). The warps' partials are merged in warp order (att_merge). A row of
 * one split writes acc * (1 / l) directly; otherwise each split writes its
 * (m, l, acc) and the block that finishes last (a counter per row and head
 * group, reset by that block) merges the row's splits in split order and
 * writes the output with the same final operation. So the order of every
 * sum depends on (head_dim, chunk, the row's positions) only. */
template <int FMT, int NPL, int GM>
__global__ void __launch_bounds__(32 * ATT_MAX_WARPS) k_attn_part(att_k P) {
    DCU_PDL_ENTER();
    extern __shared__ __align__(16) float smf[];
    __shared__ unsigned s_last;
    const int sp = blockIdx.x, hg = blockIdx.y, b = blockIdx.z;
    const int hd = P.hd, hq = (hd + 3) & ~3, h0 = hg * GM;
    const drow R = P.rows[b]; /* loads in flight with q's */
    float *qs = smf;          /* GM x hq, then per warp and head (2 + hd): m, l, acc */
    const float *q = P.q + (size_t)b * P.ldq + (size_t)h0 * hd;
    for (int i = threadIdx.x; i < GM * hd; i += blockDim.x) qs[(i / hd) * hq + i % hd] = q[i];
    att_pad(P, b, hg * gridDim.x + sp, gridDim.x * gridDim.y);
    int start, npos;
    row_window(R, P.window, &start, &npos);
    const int t0 = sp * P.chunk;
    if (t0 >= npos) return;
    const int t1 = min(npos, t0 + P.chunk), ns = (npos + P.chunk - 1) / P.chunk;
    const int kvh = h0 / (P.n_heads / P.n_kvh);
    const size_t pstride = (size_t)P.n_kvh * P.vb;
    const size_t base = (((size_t)P.layer * (size_t)R.n_ctx + (size_t)start) * (size_t)P.n_kvh + (size_t)kvh) * P.vb;
    const uint8_t *kb = R.kc + base, *vbp = R.vc + base;
    __syncthreads();
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
    const int nused = min(nw, (t1 - t0 + ATT_TILE - 1) / ATT_TILE);
    float m[GM], l[GM], acc[GM][NPL];
#pragma unroll
    for (int g = 0; g < GM; g++) {
        m[g] = -INFINITY, l[g] = 0.0f;
#pragma unroll
        for (int i = 0; i < NPL; i++) acc[g][i] = 0.0f;
    }
    if (att_kal<FMT>(kb, vbp, pstride, hd))
        att_tiles<FMT, NPL, GM, true>(P, qs, hq, kb, vbp, pstride, t0, t1, hd, m, l, acc, warp, nw);
    else att_tiles<FMT, NPL, GM, false>(P, qs, hq, kb, vbp, pstride, t0, t1, hd, m, l, acc, warp, nw);
    float *wbase = smf + GM * hq;
    const int d0 = lane * NPL;
    if (warp < nused) {
#pragma unroll
        for (int g = 0; g < GM; g++) {
            float *wb = wbase + (size_t)(warp * GM + g) * (hd + 2);
            if (lane == 0) wb[0] = m[g], wb[1] = l[g];
#pragma unroll
            for (int i = 0; i < NPL; i++)
                if (d0 + i < hd) wb[2 + d0 + i] = acc[g][i];
        }
    }
    __syncthreads();
    for (int e = threadIdx.x; e < GM * hd; e += blockDim.x) {
        int g = e / hd, d = e % hd;
        const float *w0 = wbase + (size_t)g * (hd + 2);
        float M = w0[0], L = w0[1], a = w0[2 + d];
        for (int w = 1; w < nused; w++) {
            const float *wi = wbase + (size_t)(w * GM + g) * (hd + 2);
            att_merge(P.fast, M, L, a, wi[0], wi[1], wi[2 + d]);
        }
        if (ns == 1) {
            att_put(P, b, h0 * hd + e, __fmul_rn(a, __fdiv_rn(1.0f, L)));
        } else {
            float *pp = P.part + (((size_t)b * P.n_heads + h0 + g) * P.max_splits + sp) * (size_t)(hd + 2);
            if (d == 0) pp[0] = M, pp[1] = L;
            pp[2 + d] = a;
        }
    }
    if (ns == 1) return;
    /* the last split of (row, head group) to finish combines them */
    __threadfence();
    __syncthreads();
    unsigned *cnt = P.cnt + (size_t)b * P.n_heads + hg;
    if (threadIdx.x == 0) s_last = atomicAdd(cnt, 1u) == (unsigned)ns - 1;
    __syncthreads();
    if (!s_last) return;
    __threadfence();
    for (int e = threadIdx.x; e < GM * hd; e += blockDim.x) {
        int g = e / hd, d = e % hd;
        const float *p0 = P.part + (((size_t)b * P.n_heads + h0 + g) * P.max_splits) * (size_t)(hd + 2);
        float M = __ldcg(p0), L = __ldcg(p0 + 1), a = __ldcg(p0 + 2 + d);
        for (int s = 1; s < ns; s++) {
            const float *ps = p0 + (size_t)s * (hd + 2);
            att_merge(P.fast, M, L, a, __ldcg(ps), __ldcg(ps + 1), __ldcg(ps + 2 + d));
        }
        att_put(P, b, h0 * hd + e, __fmul_rn(a, __fdiv_rn(1.0f, L)));
    }
    if (threadIdx.x == 0) *cnt = 0u;
}

/* L1 prefetch of the KV vector at cache + off (the loads att_tiles issues
 * next, started earlier), its lines split at the one that holds byte cur:
 * below = 1 the lines wholly before that one, 0 the others */
static __device__ __forceinline__ void att_prefetch_split(const uint8_t *cache, size_t off, size_t vb, size_t cur,
                                                          int below) {
    const uintptr_t lim = ((uintptr_t)(cache + cur)) & ~(uintptr_t)127;
    for (size_t o = 0; o < vb; o += 128) {
        const uint8_t *a = cache + off + o;
        if ((((uintptr_t)a | 127u) < lim) == (below != 0)) asm volatile("prefetch.L1 [%0];" ::"l"(a));
    }
}
/* k_attn_part's work for one (row, head group) in one block: grid (heads /
 * GM, rows), ATT_RW = splits x nw warps (splits = ceil(max_npos / chunk)).
 * Warp w does what warp w % nw of split w / nw's block does in k_attn_part
 * (att_tiles over the same tiles, the same operations); the warps of a split
 * are merged in warp order, then the splits in split order, with the same
 * merge step and final operation, through shared memory instead of the
 * global workspace: the same values (floats stored and read back exactly),
 * so the same bits, without the counter and the second round trip. Each
 * lane first prefetches the K and V vectors of its positions, so their
 * loads overlap the q load. Used when splits x nw <= ATT_RW_MAX. */
#define ATT_RW_MAX 16
template <int FMT, int NPL, int GM>
__global__ void __launch_bounds__(32 * ATT_RW_MAX) k_attn_row(att_k P) {
    DCU_TR_EXIT();
    dcu_pdl_trigger();
    extern __shared__ __align__(16) float smf[];
    const int hg = blockIdx.x, b = blockIdx.y;
    const int hd = P.hd, hq = (hd + 3) & ~3, h0 = hg * GM;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nwt = blockDim.x >> 5;
    const int nw = nwt / P.max_splits, sp = warp / nw, wi = warp % nw;
    /* before the wait: the row (uploaded before the pass) and, in a pass of
     * one row, the cache lines of the positions before its own, which
     * earlier passes stored (k_qkv stores this pass's position only: the
     * lines from the one holding it on are prefetched after the wait, so no
     * stale line sits in L1). Passes of several rows (a prefill's rows
     * share a cache) prefetch after the wait. */
    const drow R = P.rows[b];
    int start, npos;
    row_window(R, P.window, &start, &npos);
    const int ns = (npos + P.chunk - 1) / P.chunk;
    const int t0 = sp * P.chunk, t1 = min(npos, t0 + P.chunk);
    const int kvh = h0 / (P.n_heads / P.n_kvh);
    const size_t pstride = (size_t)P.n_kvh * P.vb;
    const size_t rbase = ((size_t)P.layer * (size_t)R.n_ctx + (size_t)start) * (size_t)P.n_kvh * P.vb;
    const size_t base = rbase + (size_t)kvh * P.vb;
    const uint8_t *kb = R.kc + base, *vbp = R.vc + base;
    /* the row's own position (all KV heads); 0 when the pass has other rows: no line is below it */
    const size_t cur = P.B == 1 ? rbase + (size_t)(npos - 1) * pstride : 0;
    const int tw0 = t0 + wi * ATT_TILE, tw1 = min(t1, t0 + (wi + 1) * ATT_TILE); /* this warp's first tile */
    if (sp < ns && P.B == 1)
        for (int t = tw0 + lane; t < tw1; t += 32) {
            att_prefetch_split(R.kc, base + (size_t)t * pstride, P.vb, cur, 1);
            att_prefetch_split(R.vc, base + (size_t)t * pstride, P.vb, cur, 1);
        }
    float *qs = smf; /* GM x hq, then per warp and head (2 + hd): m, l, acc; with qk: k, v (hq each), sin, cos */
    float *kx = smf + GM * hq + (size_t)nwt * GM * (hd + 2), *vx = kx + hq;
    double *rsn = (double *)(smf + ((GM * hq + (size_t)nwt * GM * (hd + 2) + 2 * hq + 1) & ~(size_t)1));
    const int npair = P.qk ? P.qa.n_rot / 2 : 0; /* <= blockDim.x (the launcher checks) */
    if ((int)threadIdx.x < npair) /* the rotation's angles need only the position */
        sincos(__dmul_rn((double)R.pos, P.qa.freq[threadIdx.x]), rsn + threadIdx.x, rsn + npair + threadIdx.x);
    dcu_pdl_wait();
    if (sp < ns && !P.qk) /* (with qk the row's own position is stored below, then loaded) */
        for (int t = tw0 + lane; t < tw1; t += 32) {
            att_prefetch_split(R.kc, base + (size_t)t * pstride, P.vb, cur, 0);
            att_prefetch_split(R.vc, base + (size_t)t * pstride, P.vb, cur, 0);
        }
    if (P.qk) {
        /* k_qkv's operations for query heads h0 .. h0 + GM - 1 and KV head
         * kvh: bias, RoPE in double, K and V into the cache. Every block of
         * the KV head stores the same bits at position pos, then reads them
         * back as its own stores. */
        __shared__ float ssm[32];
        const dcu_qkv_args &A = P.qa;
        const float *q = A.q + (size_t)b * A.ldq + (size_t)h0 * hd, *bq = A.bq ? A.bq + (size_t)h0 * hd : NULL;
        for (int e = threadIdx.x; e < GM * hd; e += blockDim.x)
            qs[(e / hd) * hq + e % hd] = bq ? __fadd_rn(q[e], bq[e]) : q[e];
        const float *k = A.k + (size_t)b * A.ldk + (size_t)kvh * hd, *v = A.v + (size_t)b * A.ldv + (size_t)kvh * hd;
        const float *bk = A.bk ? A.bk + (size_t)kvh * hd : NULL, *bv = A.bv ? A.bv + (size_t)kvh * hd : NULL;
        for (int d = threadIdx.x; d < hd; d += blockDim.x) {
            kx[d] = bk ? __fadd_rn(k[d], bk[d]) : k[d];
            vx[d] = bv ? __fadd_rn(v[d], bv[d]) : v[d];
        }
        __syncthreads();
        for (int e = threadIdx.x; e < (GM + 1) * npair; e += blockDim.x) {
            const int g = e / npair, i = e % npair;
            dcu_rope_pair(g < GM ? qs + (size_t)g * hq : kx, i, npair, A.neox, rsn[i], rsn[npair + i]);
        }
        __syncthreads();
        const size_t off = (((size_t)A.layer * (size_t)R.n_ctx + (size_t)R.pos) * (size_t)A.n_kvh + (size_t)kvh) * A.vb;
        dcu_kv_store(A.kvfmt, R.kc + off, kx, hd, ssm);
        __syncthreads();
        dcu_kv_store(A.kvfmt, R.vc + off, vx, hd, ssm);
    } else {
        const float *q = P.q + (size_t)b * P.ldq + (size_t)h0 * hd;
        float qv[4];
#pragma unroll
        for (int k = 0; k < 4; k++) {
            int i = threadIdx.x + k * blockDim.x;
            qv[k] = i < GM * hd ? q[i] : 0.0f;
        }
#pragma unroll
        for (int k = 0; k < 4; k++) {
            int i = threadIdx.x + k * blockDim.x;
            if (i < GM * hd) qs[(i / hd) * hq + i % hd] = qv[k];
        }
        for (int i = threadIdx.x + 4 * blockDim.x; i < GM * hd; i += blockDim.x) qs[(i / hd) * hq + i % hd] = q[i];
    }
    att_pad(P, b, hg, gridDim.x);
    __syncthreads();
    float m[GM], l[GM], acc[GM][NPL];
#pragma unroll
    for (int g = 0; g < GM; g++) {
        m[g] = -INFINITY, l[g] = 0.0f;
#pragma unroll
        for (int i = 0; i < NPL; i++) acc[g][i] = 0.0f;
    }
    if (sp < ns) {
        if (att_kal<FMT>(kb, vbp, pstride, hd))
            att_tiles<FMT, NPL, GM, true>(P, qs, hq, kb, vbp, pstride, t0, t1, hd, m, l, acc, wi, nw);
        else att_tiles<FMT, NPL, GM, false>(P, qs, hq, kb, vbp, pstride, t0, t1, hd, m, l, acc, wi, nw);
    }
    float *wbase = smf + GM * hq;
    const int d0 = lane * NPL;
    if (sp < ns && wi < (t1 - t0 + ATT_TILE - 1) / ATT_TILE) {
#pragma unroll
        for (int g = 0; g < GM; g++) {
            float *wb = wbase + (size_t)(warp * GM + g) * (hd + 2);
            if (lane == 0) wb[0] = m[g], wb[1] = l[g];
#pragma unroll
            for (int i = 0; i < NPL; i++)
                if (d0 + i < hd) wb[2 + d0 + i] = acc[g][i];
        }
    }
    __syncthreads();
    for (int e = threadIdx.x; e < GM * hd; e += blockDim.x) {
        int g = e / hd, d = e % hd;
        float M = 0.0f, L = 0.0f, a = 0.0f;
        for (int s = 0; s < ns; s++) {
            int s0 = s * P.chunk, s1 = min(npos, s0 + P.chunk);
            int nused = min(nw, (s1 - s0 + ATT_TILE - 1) / ATT_TILE);
            const float *w0 = wbase + (size_t)(s * nw * GM + g) * (hd + 2);
            float Ms = w0[0], Ls = w0[1], as = w0[2 + d];
            for (int w = 1; w < nused; w++) {
                const float *wx = wbase + (size_t)((s * nw + w) * GM + g) * (hd + 2);
                att_merge(P.fast, Ms, Ls, as, wx[0], wx[1], wx[2 + d]);
            }
            if (s == 0) M = Ms, L = Ls, a = as;
            else att_merge(P.fast, M, L, a, Ms, Ls, as);
        }
        att_put(P, b, h0 * hd + e, __fmul_rn(a, __fdiv_rn(1.0f, L)));
    }
}

/* The most query heads a block serves (GM) for KV format FMT: 4 for the KV
 * formats of the named GPU profiles (f32; bf16, which cuda-bf16 and
 * cuda-fp8 keep), where sharing the K/V loads pays in prefill and batched
 * decode; 1 for f16, e4m3 and e5m2 (reachable through kv= only), which
 * cost the most to compile. Per head the same operations either way. */
static inline __host__ __device__ constexpr int dcu_attn_gm_max(int fmt) {
    return fmt == DRIFT_DTYPE_F32 || fmt == DRIFT_DTYPE_BF16 ? 4 : 1;
}

/* k_attn_part / k_attn_row <FMT, NPL, gm> (gm 4 or 2 where FMT and NPL
 * allow it, else 1) */
template <int FMT, int NPL>
static void att_launch_gm(int gm, bool row, dim3 g, int threads, size_t smem, cudaStream_t st, const att_k &S) {
    constexpr int G4 = dcu_attn_gm_max(FMT) >= 4 && NPL <= 4 ? 4 : 1;
    constexpr int G2 = dcu_attn_gm_max(FMT) >= 2 && NPL <= 8 ? 2 : 1;
    if (row) {
        if (G4 > 1 && gm == 4) dcu_launch(k_attn_row<FMT, NPL, G4>, g, threads, smem, st, S);
        else if (G2 > 1 && gm == 2) dcu_launch(k_attn_row<FMT, NPL, G2>, g, threads, smem, st, S);
        else dcu_launch(k_attn_row<FMT, NPL, 1>, g, threads, smem, st, S);
    } else {
        if (G4 > 1 && gm == 4) dcu_launch(k_attn_part<FMT, NPL, G4>, g, threads, smem, st, S);
        else if (G2 > 1 && gm == 2) dcu_launch(k_attn_part<FMT, NPL, G2>, g, threads, smem, st, S);
        else dcu_launch(k_attn_part<FMT, NPL, 1>, g, threads, smem, st, S);
    }
}

/* Launches attention for KV format FMT on stream st: k_attn_row (grid
 * (heads / gm, rows)) when row, else k_attn_part (grid (splits, heads / gm,
 * rows)); npl 1, 2, 4, 8, or 32 for any other value; gm as the launcher
 * chose it (<= dcu_attn_gm_max(FMT)). Defined here, instantiated by
 * cuda_attn_<format>.cu only (the extern declarations below keep every
 * other unit from instantiating it). */
template <int FMT>
void dcu_attn_launch_fmt(int npl, int gm, bool row, dim3 g, int threads, size_t smem, cudaStream_t st,
                         const att_k &S) {
    switch (npl) {
    case 1: att_launch_gm<FMT, 1>(gm, row, g, threads, smem, st, S); break;
    case 2: att_launch_gm<FMT, 2>(gm, row, g, threads, smem, st, S); break;
    case 4: att_launch_gm<FMT, 4>(gm, row, g, threads, smem, st, S); break;
    case 8: att_launch_gm<FMT, 8>(gm, row, g, threads, smem, st, S); break;
    default: att_launch_gm<FMT, 32>(gm, row, g, threads, smem, st, S); break;
    }
}
extern template void dcu_attn_launch_fmt<DRIFT_DTYPE_F32>(int, int, bool, dim3, int, size_t, cudaStream_t,
                                                         const att_k &);
extern template void dcu_attn_launch_fmt<DRIFT_DTYPE_F16>(int, int, bool, dim3, int, size_t, cudaStream_t,
                                                         const att_k &);
extern template void dcu_attn_launch_fmt<DRIFT_DTYPE_BF16>(int, int, bool, dim3, int, size_t, cudaStream_t,
                                                         const att_k &);
extern template void dcu_attn_launch_fmt<DRIFT_DTYPE_FP8_E4M3>(int, int, bool, dim3, int, size_t, cudaStream_t,
                                                         const att_k &);
extern template void dcu_attn_launch_fmt<DRIFT_DTYPE_FP8_E5M2>(int, int, bool, dim3, int, size_t, cudaStream_t,
                                                         const att_k &);

#endif
