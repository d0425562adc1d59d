/* cuda_matmul.cu - y (B, N) = act(x) (B, K) @ W^T on the GPU.
 *
 * gemm=kernel, the default (DriftBench's kernels; batch-invariant):
 *
 *  WMMA (bf16 or f16 weights with acts of the same type, accum=f32): tensor
 *    cores, 16x16x16 tiles, bf16/f16 in, f32 accumulate. A warp owns a strip
 *    of 16 weight rows and one of KS contiguous segments of the K steps
 *    (16 columns each), for 16 x MT batch rows (MT = 2 tiles, 4 when the
 *    grid still covers the SMs; B padded to 16 with zero rows: MT regroups
 *    tiles, never a sum); it walks its segment in increasing k into one
 *    accumulator tile per batch tile. The KS segment tiles of a strip are
 *    added in segment order through shared memory. The weight strip goes
 *    through shared memory in slices of WM_ST k-steps, copied with 16-byte
 *    cp.async two slices ahead of the tensor cores (memory-level parallelism
 *    for a matvec; the fragments, and so every mma, are the same as loading
 *    them from global memory). KS (1..16) is chosen from N and K only
 *    (enough warps in flight for a matvec to stream the weights), so an output's reduction order is fixed by (N, K): the same
 *    bits for a row alone or in any batch. For B <= 16 (one batch tile,
 *    decode) k_mm_tc1 runs the same products with the activation fragments
 *    loaded into registers a slice at a time before the wait on the weights
 *    (raw m16n8k16 mma, the instruction the WMMA tiles compile to: the same
 *    values in the same order, so the same bits; faster at batch 1).
 *    A stacked gate|up product at B <= 16 runs as k_mm_tc1_gu
 *    (dcu_mm_swiglu): a warp takes one segment of gate strip p and of up
 *    strip p + H / 16 (the unfused launch's KS), two accumulators fed by the
 *    same activation fragments, so a block's epilogue has both sums of its
 *    columns and writes SwiGLU's prepared output itself (no gate|up rows, no
 *    SwiGLU launch; the same values). DRIFT_CUDA_GU=0: k_mm_tc1<SW> instead
 *    (a warp per strip segment; the same bits, 2x the warps).
 *    The activation fragments (the previous kernel's output) are loaded
 *    with ld.global.ca (__ldca), never the non-coherent path (__ldg): under
 *    programmatic dependent launch the kernel is resident while the previous
 *    one writes them, and griddepcontrol.wait makes those writes visible to
 *    ordinary loads only. With __ldg, k_mm_tc1_gu on the H200 gave a
 *    qwen2-7m batch-1 step other bits than the same row in a batch of 200
 *    (two runs of two; with DRIFT_CUDA_PDL=0 the same bits). Both stage
 *    their weights with an L2 evict-first policy (each weight is read once
 *    a launch; what the pass reads again stays in L2; bench/BENCHMARKS.md,
 *    session 9); DRIFT_CUDA_EF=0: the default policy.
 *
 *  SIMT (every other format and accumulator): a row of W is read by R warps
 *    (R from N and K only); the row is cut into units of 16 bytes (4 f32, 8
 *    bf16/f16, 16 fp8/int8, 32 int4 values) or one block (q8_0, q4_0, mxfp4
 *    32 values; nvfp4 16), loaded with 16-byte vector loads where the layout
 *    allows. Lane g of the row's 32R lanes takes units g, g + 32R, ... in
 *    increasing order, dequantizes each in registers (the exact deq() values)
 *    and accumulates x * w element by element (fmaf, or fma in double for
 *    accum=f64) into one partial per batch row; partials are summed by a
 *    fixed xor tree in each warp, then over the R warps in order. The weight
 *    unit is read once per block for up to BT = 8 batch rows; for one batch
 *    row, a lane with more than one round of MM_UNR units issues the next
 *    round's loads before consuming the current one (the same order of
 *    operations). Rows whose K does not fit the vector unit (bf16 K % 8 != 0,
 *    ...) use a one-element unit through the generic dequantizer.
 *
 * gemm=vendor: cublasSgemm (f32 weights; default math mode, no TF32),
 * cublasGemmEx (bf16 / f16 with the same acts; CUBLAS_COMPUTE_32F, f32
 * out), cuBLASLt fp8 e4m3 x e4m3 (TN, f32 out, then y *= act row scale x
 * weight scale). The libraries choose algorithms by shape, so results may
 * depend on B. Other formats use the kernels. */
#include "model/cuda/cuda_internal.cuh"

#include <cuda_pipeline.h>
#include <atomic>
#include <stdlib.h>
#include <string.h>
#include <mma.h>

#define MM_WARPS 8
#define MM_UNR 4
#define WM_MT 2 /* batch tiles per warp (k_mm_wmma's MT: 2, or 4 for large grids) */
#define WM_ST 4                 /* k-steps per staged slice of a warp's weight strip */
#define WM_CPR (WM_ST * 2)      /* 16-byte pieces per strip row in a slice */
#define WM_PPL (16 * WM_CPR / 32) /* pieces per lane and slice */
#define WM_LDS (WM_ST * 16 + 8) /* staged row stride, elements (padded against bank conflicts) */
#define WM_BUF (16 * WM_LDS)    /* elements per slice buffer (a multiple of 16: buffers stay 32-byte aligned) */
#define TC_MAX_ST 4             /* k_mm_tc1's deepest slice pipeline */
/* floats per warp of shared memory: two slice buffers of 2-byte values, or WM_MT partial tiles */
#define WM_REG (WM_BUF > WM_MT * 256 ? WM_BUF : WM_MT * 256)
#define MM_SLICE 8192 /* batch rows per launch (a multiple of 16) */

enum {
    MF_F32,
    MF_F16,
    MF_BF16,
    MF_E4M3,
    MF_E5M2,
    MF_INT8,
    MF_INT4,
    MF_MXFP4,
    MF_NVFP4,
    MF_Q8_0,
    MF_Q4_0,
    MF_GEN
};

/* elements per unit; VEC: the unit is one 16-byte load at row + 16 u */
template <int F> struct mf_traits { static constexpr int E = 1; static constexpr bool VEC = false; };
template <> struct mf_traits<MF_F32> { static constexpr int E = 4; static constexpr bool VEC = true; };
template <> struct mf_traits<MF_F16> { static constexpr int E = 8; static constexpr bool VEC = true; };
template <> struct mf_traits<MF_BF16> { static constexpr int E = 8; static constexpr bool VEC = true; };
template <> struct mf_traits<MF_E4M3> { static constexpr int E = 16; static constexpr bool VEC = true; };
template <> struct mf_traits<MF_E5M2> { static constexpr int E = 16; static constexpr bool VEC = true; };
template <> struct mf_traits<MF_INT8> { static constexpr int E = 16; static constexpr bool VEC = true; };
template <> struct mf_traits<MF_INT4> { static constexpr int E = 32; static constexpr bool VEC = true; };
template <> struct mf_traits<MF_MXFP4> { static constexpr int E = 32; static constexpr bool VEC = false; };
template <> struct mf_traits<MF_NVFP4> { static constexpr int E = 16; static constexpr bool VEC = false; };
template <> struct mf_traits<MF_Q8_0> { static constexpr int E = 32; static constexpr bool VEC = false; };
template <> struct mf_traits<MF_Q4_0> { static constexpr int E = 32; static constexpr bool VEC = false; };

/* the row's scale (fp8, int8), as dq_fp8 / dq_int8 compute it */
template <int F> static __device__ __forceinline__ float mm_row_scale(const dmat &W, int64_t n) {
    if (F == MF_E4M3 || F == MF_E5M2) return W.scales ? __fmul_rn(W.scales[n * W.gpr], W.ts) : W.ts;
    if (F == MF_INT8) return W.scales[n * W.gpr];
    return 1.0f;
}

static __device__ __forceinline__ float fp8_pair_lo(uint32_t pair, __nv_fp8_interpretation_t t, float *hi) {
    __half2_raw r = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)pair, t);
    *hi = __half2float(__ushort_as_half(r.y));
    return __half2float(__ushort_as_half(r.x));
}

/* 16 bytes of a vector format -> E values (deq() exactly) */
template <int F>
static __device__ __forceinline__ void mm_dec_vec(uint4 raw, float rs, float us, float *w) {
    const uint32_t wd[4] = {raw.x, raw.y, raw.z, raw.w};
    if constexpr (F == MF_F32) {
#pragma unroll
        for (int i = 0; i < 4; i++) w[i] = __uint_as_float(wd[i]);
    } else if constexpr (F == MF_BF16) {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            w[2 * i] = __uint_as_float(wd[i] << 16);
            w[2 * i + 1] = __uint_as_float(wd[i] & 0xffff0000u);
        }
    } else if constexpr (F == MF_F16) {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            w[2 * i] = __half2float(__ushort_as_half((unsigned short)(wd[i] & 0xffffu)));
            w[2 * i + 1] = __half2float(__ushort_as_half((unsigned short)(wd[i] >> 16)));
        }
    } else if constexpr (F == MF_E4M3 || F == MF_E5M2) {
        const __nv_fp8_interpretation_t t = F == MF_E4M3 ? __NV_E4M3 : __NV_E5M2;
#pragma unroll
        for (int i = 0; i < 4; i++) {
#pragma unroll
            for (int p = 0; p < 2; p++) {
                float hi, lo = fp8_pair_lo((wd[i] >> (16 * p)) & 0xffffu, t, &hi);
                w[4 * i + 2 * p] = __fmul_rn(lo, rs);
                w[4 * i + 2 * p + 1] = __fmul_rn(hi, rs);
            }
        }
    } else if constexpr (F == MF_INT8) {
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < 4; j++) w[4 * i + j] = __fmul_rn((float)(int8_t)((wd[i] >> (8 * j)) & 0xffu), rs);
    } else if constexpr (F == MF_INT4) {
#pragma unroll
        for (int bi = 0; bi < 16; bi++) {
            uint32_t byte = (wd[bi / 4] >> (8 * (bi % 4))) & 0xffu;
            w[2 * bi] = __fmul_rn((float)((int)(byte & 15u) - 8), us);
            w[2 * bi + 1] = __fmul_rn((float)((int)(byte >> 4) - 8), us);
        }
    }
}

/* one block of a block format -> E values */
template <int F>
static __device__ __forceinline__ void mm_dec_blk(const dmat &W, const uint8_t *row, int64_t n, int64_t u, float *w) {
    if constexpr (F == MF_MXFP4) {
        const uint8_t *b = row + (size_t)u * 17;
        float s = dcu_e8m0_f32(__ldg(b));
#pragma unroll
        for (int j = 0; j < 16; j++) {
            uint32_t q = __ldg(b + 1 + j);
            w[j] = __fmul_rn(dcu_e2m1_f32(q & 15u), s);
            w[j + 16] = __fmul_rn(dcu_e2m1_f32(q >> 4), s);
        }
    } else if constexpr (F == MF_NVFP4) {
        const uint8_t *b = row + (size_t)u * 9;
        float s = __fmul_rn(dcu_e4m3_f32(__ldg(b)), W.ts);
#pragma unroll
        for (int j = 0; j < 8; j++) {
            uint32_t q = __ldg(b + 1 + j);
            w[j] = __fmul_rn(dcu_e2m1_f32(q & 15u), s);
            w[j + 8] = __fmul_rn(dcu_e2m1_f32(q >> 4), s);
        }
    } else if constexpr (F == MF_Q8_0) {
        const unsigned short *h = (const unsigned short *)(row + (size_t)u * 34); /* 2-byte aligned */
        float d = __half2float(__ushort_as_half(__ldg(h)));
#pragma unroll
        for (int i = 0; i < 16; i++) {
            uint32_t pr = __ldg(h + 1 + i);
            w[2 * i] = __fmul_rn((float)(int8_t)(pr & 0xffu), d);
            w[2 * i + 1] = __fmul_rn((float)(int8_t)(pr >> 8), d);
        }
    } else if constexpr (F == MF_Q4_0) {
        const unsigned short *h = (const unsigned short *)(row + (size_t)u * 18);
        float d = __half2float(__ushort_as_half(__ldg(h)));
#pragma unroll
        for (int i = 0; i < 8; i++) {
            uint32_t pr = __ldg(h + 1 + i);
            uint32_t q0 = pr & 0xffu, q1 = pr >> 8;
            w[2 * i] = __fmul_rn((float)((int)(q0 & 15u) - 8), d);
            w[2 * i + 1] = __fmul_rn((float)((int)(q1 & 15u) - 8), d);
            w[2 * i + 16] = __fmul_rn((float)((int)(q0 >> 4) - 8), d);
            w[2 * i + 17] = __fmul_rn((float)((int)(q1 >> 4) - 8), d);
        }
    } else {
        w[0] = dcu_deq_elem(W, n, u);
    }
}

static __device__ __forceinline__ float mm_mac(float acc, float x, float w) { return fmaf(x, w, acc); }
static __device__ __forceinline__ double mm_mac(double acc, float x, float w) {
    return fma((double)x, (double)w, acc);
}

/* acc[j] += x[j][k0 .. k0 + E) . w, elements in order */
template <int E, typename ACC, int BT>
static __device__ __forceinline__ void mm_fma_unit(ACC (&acc)[BT], const float *w, const float *xb, int64_t ldx,
                                                   int64_t k0, int nb) {
#pragma unroll
    for (int j = 0; j < BT; j++) {
        if (j < nb) {
            const float *xr = xb + (size_t)j * ldx + k0;
            if constexpr (E >= 4) {
#pragma unroll
                for (int e4 = 0; e4 < E / 4; e4++) {
                    float4 xv = __ldca((const float4 *)xr + e4);
                    acc[j] = mm_mac(acc[j], xv.x, w[4 * e4]);
                    acc[j] = mm_mac(acc[j], xv.y, w[4 * e4 + 1]);
                    acc[j] = mm_mac(acc[j], xv.z, w[4 * e4 + 2]);
                    acc[j] = mm_mac(acc[j], xv.w, w[4 * e4 + 3]);
                }
            } else {
                acc[j] = mm_mac(acc[j], __ldca(xr), w[0]);
            }
        }
    }
}

/* raw[i] = unit u0 + i G of the row (units >= U are not read) */
static __device__ __forceinline__ void mm_load_vec(uint4 (&raw)[MM_UNR], const uint8_t *row, int64_t u0, int64_t G,
                                                   int64_t U) {
#pragma unroll
    for (int i = 0; i < MM_UNR; i++) {
        int64_t u = u0 + i * G;
        if (u < U) raw[i] = __ldg((const uint4 *)row + u);
    }
}

/* accumulates units u0, u0 + G, ... (< U) held in raw, in that order */
template <int F, typename ACC, int BT>
static __device__ __forceinline__ void mm_use_vec(ACC (&acc)[BT], const uint4 (&raw)[MM_UNR], const dmat &W, int64_t n,
                                                  float rs, int64_t u0, int64_t G, int64_t U, const float *xb,
                                                  int64_t ldx, int nb) {
    constexpr int E = mf_traits<F>::E;
#pragma unroll
    for (int i = 0; i < MM_UNR; i++) {
        int64_t u = u0 + i * G;
        if (u < U) {
            float w[E];
            float us = F == MF_INT4 ? W.scales[n * W.gpr + (u * E) / W.group] : 1.0f;
            mm_dec_vec<F>(raw[i], rs, us, w);
            mm_fma_unit<E, ACC, BT>(acc, w, xb, ldx, u * E, nb);
        }
    }
}

/* grid (ceil(N / (MM_WARPS / R)), ceil(B / BT)), MM_WARPS warps. PIPE (vector formats): overlap the loads of a
 * lane's next round of units with this round's arithmetic (more registers: used for one batch row and rows of
 * more than one round per lane). */
template <int F, typename ACC, int BT, bool PIPE>
__global__ void __launch_bounds__(MM_WARPS * 32)
    k_mm_simt(dmat W, const float *__restrict__ x, int64_t ldx, int B, float *__restrict__ y, int64_t ldy, int R) {
    DCU_PDL_ENTER();
    constexpr int E = mf_traits<F>::E;
    __shared__ ACC red[MM_WARPS][BT];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int rpb = MM_WARPS / R, rib = warp / R, wr = warp % R;
    const int64_t n = (int64_t)blockIdx.x * rpb + rib;
    const int b0 = blockIdx.y * BT;
    const int nb = min(BT, B - b0);
    ACC acc[BT];
#pragma unroll
    for (int j = 0; j < BT; j++) acc[j] = (ACC)0;
    if (n < W.rows) {
        const uint8_t *row = W.data + (size_t)n * W.ld;
        const int64_t U = W.cols / E;
        const int64_t G = (int64_t)R * 32;
        const float *xb = x + (size_t)b0 * ldx;
        const float rs = mm_row_scale<F>(W, n);
        if constexpr (mf_traits<F>::VEC && PIPE) {
            /* rounds of MM_UNR units alternate between two register sets: the next round's loads are issued
             * before this round's units are consumed (in the same order as in the plain loop below) */
            uint4 ra[MM_UNR], rb[MM_UNR];
            const int64_t S = G * MM_UNR;
            int64_t u0 = wr * 32 + lane;
            mm_load_vec(ra, row, u0, G, U);
            for (; u0 < U; u0 += 2 * S) {
                mm_load_vec(rb, row, u0 + S, G, U);
                mm_use_vec<F, ACC, BT>(acc, ra, W, n, rs, u0, G, U, xb, ldx, nb);
                if (u0 + S >= U) break;
                mm_load_vec(ra, row, u0 + 2 * S, G, U);
                mm_use_vec<F, ACC, BT>(acc, rb, W, n, rs, u0 + S, G, U, xb, ldx, nb);
            }
        } else if constexpr (mf_traits<F>::VEC) {
            for (int64_t u0 = wr * 32 + lane; u0 < U; u0 += G * MM_UNR) {
                uint4 raw[MM_UNR];
                mm_load_vec(raw, row, u0, G, U);
                mm_use_vec<F, ACC, BT>(acc, raw, W, n, rs, u0, G, U, xb, ldx, nb);
            }
        } else {
            for (int64_t u0 = wr * 32 + lane; u0 < U; u0 += G * MM_UNR) {
#pragma unroll
                for (int i = 0; i < MM_UNR; i++) {
                    int64_t u = u0 + i * G;
                    if (u < U) {
                        float w[E];
                        mm_dec_blk<F>(W, row, n, u, w);
                        mm_fma_unit<E, ACC, BT>(acc, w, xb, ldx, u * E, nb);
                    }
                }
            }
        }
    }
#pragma unroll
    for (int j = 0; j < BT; j++) acc[j] = dcu_warp_sum(acc[j]);
    if (lane == 0)
#pragma unroll
        for (int j = 0; j < BT; j++) red[warp][j] = acc[j];
    __syncthreads();
    if (wr == 0 && lane < nb && n < W.rows) {
        ACC s = red[warp][lane];
        for (int g = 1; g < R; g++) s += red[warp + g][lane];
        y[(size_t)(b0 + lane) * ldy + n] = (float)s;
    }
}

/* grid (ceil(strips / spb), ceil(B16 / (16 MT))), max(4, KS) warps; dynamic
 * shared memory: WM_REG floats per warp. Each warp's region first stages its
 * weight strip in slices of WM_ST k-steps (16 rows x WM_ST * 32 bytes), two
 * slices in flight: asynchronous 16-byte copies (cp.async) fill one buffer
 * while the tensor cores work on the other. The fragments are read from
 * shared memory, holding the same values as the global ones, so the mma
 * sequence and its results are those of loading them from global memory.
 * The region then holds the warp's partial tiles for the segment reduction. */

/* wm_stage's copies without the commit (k_mm_tc1_gu: the next wm_stage's
 * commit takes both strips' copies into one group) */
template <typename T>
static __device__ __forceinline__ void wm_stage_nc(T *buf, const T *wp, int64_t kp, int64_t kt, int64_t k_end,
                                                   int lane) {
    /* piece c = lane + 32 j: strip row c / WM_CPR, 16-byte column c % WM_CPR (k-step (c % WM_CPR) / 2 of the slice) */
#pragma unroll
    for (int j = 0; j < WM_PPL; j++) {
        int c = lane + 32 * j, r = c / WM_CPR, cc = c % WM_CPR;
        if (kt + cc / 2 < k_end)
            __pipeline_memcpy_async(buf + r * WM_LDS + cc * 8, wp + (int64_t)r * kp + kt * 16 + cc * 8, 16);
    }
}

/* wm_stage_nc's copies, evict-first in L2 when ef (pol: wm_policy()):
 * k_mm_tc1 and k_mm_tc1_gu read each weight once a launch, and a batch-1
 * pass streams some 90 MB a layer through the L2 (50 MB on an H100); evict-first keeps
 * what the pass reads again (activations, norm weights, the KV cache) in
 * it, and the latency-bound kernels between the products (norms,
 * attention) wait less for their loads. Scheduling only: the same values
 * land in shared memory. */
static __device__ __forceinline__ uint64_t wm_policy(void) {
    uint64_t p;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
    return p;
}
template <typename T>
static __device__ __forceinline__ void wm_stage_p(T *buf, const T *wp, int64_t kp, int64_t kt, int64_t k_end,
                                                  int lane, bool ef, uint64_t pol) {
    if (!ef) {
        wm_stage_nc(buf, wp, kp, kt, k_end, lane);
        return;
    }
#pragma unroll
    for (int j = 0; j < WM_PPL; j++) {
        int c = lane + 32 * j, r = c / WM_CPR, cc = c % WM_CPR;
        if (kt + cc / 2 < k_end) {
            const unsigned d = (unsigned)__cvta_generic_to_shared(buf + r * WM_LDS + cc * 8);
            asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(d),
                         "l"(wp + (int64_t)r * kp + kt * 16 + cc * 8), "l"(pol)
                         : "memory");
        }
    }
}

template <typename T>
static __device__ __forceinline__ void wm_stage(T *buf, const T *wp, int64_t kp, int64_t kt, int64_t k_end,
                                                int lane) {
    wm_stage_nc(buf, wp, kp, kt, k_end, lane);
    __pipeline_commit();
}

template <typename T, int MT>
__global__ void __launch_bounds__(512) k_mm_wmma(const T *__restrict__ W, int64_t kp, int64_t N,
                                                 const T *__restrict__ X, int B, float *__restrict__ y, int64_t ldy,
                                                 int KS) {
    static_assert(MT * 256 <= WM_REG, "partial tiles fit a warp's region");
    dcu_pdl_trigger(); /* dcu_pdl_wait below: after the first weight slices are in flight */
    using namespace nvcuda;
    extern __shared__ __align__(128) float wm_part[]; /* (warps, WM_REG): staged slices, then partial tiles */
    const int warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5, lane = threadIdx.x & 31;
    const int spb = nwarps / KS, sib = warp / KS, seg = warp % KS;
    const int64_t np = dcu_pad16(N), bp = dcu_pad16(B);
    const int64_t n0 = ((int64_t)blockIdx.x * spb + sib) * 16;
    const int64_t m0 = (int64_t)blockIdx.y * 16 * MT;
    const int64_t KT = kp / 16;
    const int64_t k_begin = KT * seg / KS, k_end = KT * (seg + 1) / KS;
    const int mtiles = (int)min((int64_t)MT, (bp - m0) / 16);
    float *region = wm_part + (size_t)warp * WM_REG;
    T *stg = (T *)region; /* two buffers of WM_BUF values */
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[MT];
#pragma unroll
    for (int mt = 0; mt < MT; mt++) wmma::fill_fragment(acc[mt], 0.0f);
    if (n0 < np) {
        const T *wp = W + n0 * kp;
        wm_stage(stg, wp, kp, k_begin, k_end, lane);
        wm_stage(stg + WM_BUF, wp, kp, k_begin + WM_ST, k_end, lane);
        dcu_pdl_wait(); /* the weights are constant; X comes from the previous kernel */
        int s = 0;
        for (int64_t kt = k_begin; kt < k_end; kt += WM_ST, s ^= 1) {
            T *buf = stg + s * WM_BUF;
            __pipeline_wait_prior(1); /* this lane's copies of slice kt are done */
            __syncwarp();             /* and every lane's */
#pragma unroll
            for (int i = 0; i < WM_ST; i++) {
                if (kt + i < k_end) {
                    wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> bf;
                    wmma::load_matrix_sync(bf, buf + i * 16, (unsigned)WM_LDS);
#pragma unroll
                    for (int mt = 0; mt < MT; mt++) {
                        if (mt < mtiles) {
                            wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> af;
                            wmma::load_matrix_sync(af, X + (m0 + mt * 16) * kp + (kt + i) * 16, (unsigned)kp);
                            wmma::mma_sync(acc[mt], af, bf, acc[mt]);
                        }
                    }
                }
            }
            __syncwarp(); /* the buffer is read before it is refilled */
            wm_stage(buf, wp, kp, kt + 2 * WM_ST, k_end, lane);
        }
        __pipeline_wait_prior(0);
    }
    dcu_tr(3);
    dcu_pdl_wait(); /* (warps without a strip) before y is written */
    __syncwarp(); /* the staged strip is read before the partials overwrite it */
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
        wmma::store_matrix_sync(region + (size_t)mt * 256, acc[mt], 16, wmma::mem_row_major);
    __syncthreads();
    const int total = spb * MT * 256;
    for (int t = threadIdx.x; t < total; t += blockDim.x) {
        int s = t / (MT * 256), rem = t % (MT * 256), mt = rem / 256, e = rem % 256;
        int64_t row = m0 + mt * 16 + e / 16, col = ((int64_t)blockIdx.x * spb + s) * 16 + e % 16;
        if (row < B && col < N) {
            const float *ps = wm_part + (size_t)s * KS * WM_REG + (size_t)mt * 256 + e;
            float v = ps[0];
            for (int g = 1; g < KS; g++) v = __fadd_rn(v, ps[(size_t)g * WM_REG]);
            y[(size_t)row * ldy + col] = v;
        }
    }
}

/* m16n8k16 tensor-core product, f32 accumulate: the instruction the WMMA
 * 16x16x16 bf16/f16 fragments compile to (two per tile, one per 8 columns) */
static __device__ __forceinline__ void tc_mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1,
                                              const __nv_bfloat16 *) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
static __device__ __forceinline__ void tc_mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1,
                                              const __half *) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* the activation fragments of k-steps k0 .. k0 + WM_ST - 1 for k_mm_tc1
 * and k_mm_tc1_gu: x0 / x1 point at rows g and g + 8, word t; zeros at and
 * past k_end and for a row that r0 / r1 marks as padding. __ldca: see the
 * file's head. */
static __device__ __forceinline__ void tc_load_a(uint32_t (&d)[WM_ST][4], const uint32_t *x0, const uint32_t *x1,
                                                 bool r0, bool r1, int64_t k0, int64_t k_end) {
#pragma unroll
    for (int i = 0; i < WM_ST; i++) {
        const bool in = k0 + i < k_end;
        const int64_t o = (k0 + i) * 8; /* 32-bit words per k-step: 8 */
        d[i][0] = in && r0 ? __ldca(x0 + o) : 0u;
        d[i][1] = in && r1 ? __ldca(x1 + o) : 0u;
        d[i][2] = in && r0 ? __ldca(x0 + o + 4) : 0u;
        d[i][3] = in && r1 ? __ldca(x1 + o + 4) : 0u;
    }
}

/* a warp's 16 x 16 partial tile (accumulators c of n-tiles 0 and 1) into
 * its region, row-major (rows g, g + 8; columns 2t, 2t + 1 of each n-tile) */
static __device__ __forceinline__ void tc_put_tile(float *region, const float (&c)[2][4], int g, int t) {
#pragma unroll
    for (int nt = 0; nt < 2; nt++) {
        region[g * 16 + nt * 8 + 2 * t] = c[nt][0];
        region[g * 16 + nt * 8 + 2 * t + 1] = c[nt][1];
        region[(g + 8) * 16 + nt * 8 + 2 * t] = c[nt][2];
        region[(g + 8) * 16 + nt * 8 + 2 * t + 1] = c[nt][3];
    }
}

/* B <= 16: k_mm_wmma's products with one batch tile, the same warps, strips,
 * segments, staged weight slices and segment sums, but the activation
 * fragments go straight from global memory into registers, issued for a
 * whole slice before the wait on its weights (k_mm_wmma loads them after
 * the wait, one k-step at a time), and rows >= B are zeros in registers
 * (the padding rows hold zeros: the same values). Fragment layout of
 * m16n8k16 (g = lane / 4, t = lane % 4): a = X[g][2t..], X[g+8][2t..],
 * X[g][2t+8..], X[g+8][2t+8..]; b = W[g][2t..], W[g][2t+8..]; c = rows g,
 * g+8, columns 2t, 2t+1. The mma of each k-step (the instruction the WMMA
 * tiles compile to) sees the same values in the same order, so every output
 * has k_mm_wmma's bits (the op tests check it against batches > 16). */
/* SwiGLU in k_mm_tc1's epilogue (SW): W is gate (rows [0, H)) over up
 * (rows [H, 2H)), H % 16 == 0; a block's strips are pairs (gate strip p, up
 * strip p + H / 16), so it holds both sums of its columns and writes
 * act(silu(gate) * up) (dcu_swiglu, dcu_prep_elem: k_swiglu_e's operations)
 * to f (B, H) and, when h is not NULL, its bits to h (rows of H) */
struct mm_sw {
    int H, acts, fast;
    float *f;
    uint16_t *h;
};

/* early bit 0 clear: wait for the previous kernel before staging any
 * weights (no weight traffic while it runs); set: stage the first slices
 * first. Bit 1: the weights are staged evict-first (wm_stage_p). Up to 3
 * slice buffers, at most 64 registers a thread: two 512-thread blocks an
 * SM. With 4 (147 KB of shared memory: one block an SM anyway) the compiler
 * may use up to 128 (the 1B model's wo and down at batch 1: bench/BENCHMARKS.md,
 * session 11). */
template <typename T, bool SW, int NST, bool TWO>
__global__ void __launch_bounds__(512, NST == 4 ? 1 : 2) k_mm_tc1(const T *__restrict__ W, int64_t kp, int64_t N,
                                                   const T *__restrict__ X, int B, float *__restrict__ y,
                                                   int64_t ldy, int KS, mm_sw sw, int early) {
    DCU_TR_EXIT();
    dcu_pdl_trigger(); /* dcu_pdl_wait below: after the first weight slices are in flight */
    if (!(early & 1)) dcu_pdl_wait();
    const bool ef = early & 2;
    const uint64_t pol = ef ? wm_policy() : 0;
    constexpr int RS = NST * WM_BUF / 2; /* floats per warp: NST slice buffers of 2-byte values */
    static_assert(RS >= 256, "a partial tile fits a warp's region");
    extern __shared__ __align__(128) float wm_part[]; /* (warps, RS): staged slices, then partial tiles */
    const int warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, t = lane & 3;
    const int spb = nwarps / KS, sib = warp / KS, seg = warp % KS;
    const int64_t np = SW ? 2 * (int64_t)sw.H : dcu_pad16(N);
    const int64_t pair = (int64_t)blockIdx.x * (spb / 2) + sib / 2;
    const int64_t n0 = SW ? (pair < sw.H / 16 ? (pair + (sib & 1) * (sw.H / 16)) * 16 : np)
                          : ((int64_t)blockIdx.x * spb + sib) * 16;
    const int64_t KT = kp / 16;
    const int64_t k_begin = KT * seg / KS, k_end = KT * (seg + 1) / KS;
    float *region = wm_part + (size_t)warp * RS;
    T *stg = (T *)region; /* NST buffers of WM_BUF values */
    float c[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
    if (n0 < np) {
        const T *wp = W + n0 * kp;
        const bool r0 = g < B, r1 = TWO && g + 8 < B; /* !TWO: B <= 8, rows g + 8 are padding (zeros) */
        const uint32_t *x0 = (const uint32_t *)(X + (int64_t)g * kp) + t; /* kp % 16 == 0: 4-byte aligned */
        const uint32_t *x1 = (const uint32_t *)(X + (int64_t)(g + 8) * kp) + t;
#pragma unroll
        for (int q = 0; q < NST; q++) {
            wm_stage_p(stg + q * WM_BUF, wp, kp, k_begin + q * WM_ST, k_end, lane, ef, pol);
            __pipeline_commit();
        }
        dcu_pdl_wait(); /* the weights are constant; X comes from the previous kernel */
        /* the activation fragments of a slice: loaded one slice ahead (a, then an) */
        uint32_t a[WM_ST][4], an[WM_ST][4];
        tc_load_a(a, x0, x1, r0, r1, k_begin, k_end);
        int s = 0;
        for (int64_t kt = k_begin; kt < k_end; kt += WM_ST, s = s + 1 == NST ? 0 : s + 1) {
            tc_load_a(an, x0, x1, r0, r1, kt + WM_ST, k_end);
            const T *buf = stg + s * WM_BUF;
            __pipeline_wait_prior(NST - 1); /* this lane's copies of slice kt are done */
            __syncwarp();                   /* and every lane's */
#pragma unroll
            for (int i = 0; i < WM_ST; i++) {
                if (kt + i < k_end) {
#pragma unroll
                    for (int nt = 0; nt < 2; nt++) {
                        const uint32_t *bp = (const uint32_t *)(buf + (nt * 8 + g) * WM_LDS + i * 16) + t;
                        tc_mma(c[nt], a[i], bp[0], bp[4], (const T *)0);
                    }
                }
            }
            __syncwarp(); /* the buffer is read before it is refilled */
            wm_stage_p(stg + s * WM_BUF, wp, kp, kt + NST * WM_ST, k_end, lane, ef, pol);
            __pipeline_commit();
#pragma unroll
            for (int i = 0; i < WM_ST; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) a[i][j] = an[i][j];
        }
        __pipeline_wait_prior(0);
    }
    dcu_tr(3);
    dcu_pdl_wait(); /* (warps without a strip) before y is written */
    __syncwarp(); /* the staged strip is read before the partials overwrite it */
    tc_put_tile(region, c, g, t);
    __syncthreads();
    if (SW) {
        const int total = spb / 2 * B * 16;
        for (int i = threadIdx.x; i < total; i += blockDim.x) {
            int pi = i / (B * 16), e = i % (B * 16);
            int64_t col = ((int64_t)blockIdx.x * (spb / 2) + pi) * 16 + e % 16;
            if (col < sw.H) {
                const float *pg = wm_part + (size_t)(2 * pi) * KS * RS + e;
                const float *pu = wm_part + (size_t)(2 * pi + 1) * KS * RS + e;
                float vg = pg[0], vu = pu[0];
                for (int q = 1; q < KS; q++) vg = __fadd_rn(vg, pg[(size_t)q * RS]);
                for (int q = 1; q < KS; q++) vu = __fadd_rn(vu, pu[(size_t)q * RS]);
                size_t o = (size_t)(e / 16) * sw.H + col;
                sw.f[o] = dcu_prep_elem(sw.acts, dcu_swiglu(sw.fast, vg, vu), 0.0f, false, sw.h ? sw.h + o : NULL, NULL);
            }
        }
        return;
    }
    const int total = spb * B * 16;
    for (int i = threadIdx.x; i < total; i += blockDim.x) {
        int si = i / (B * 16), e = i % (B * 16);
        int64_t col = ((int64_t)blockIdx.x * spb + si) * 16 + e % 16;
        if (col < N) {
            const float *ps = wm_part + (size_t)si * KS * RS + e;
            float v = ps[0];
            for (int q = 1; q < KS; q++) v = __fadd_rn(v, ps[(size_t)q * RS]);
            y[(size_t)(e / 16) * ldy + col] = v;
        }
    }
}

/* The stacked gate|up product with SwiGLU for B <= 16, one warp per
 * segment of a pair (k_mm_tc1<SW>: one warp per segment of each strip):
 * warp w of a block takes segment w % KS of pair blockIdx.x * (nwarps / KS)
 * + w / KS, stages the slices of the gate strip and of the up strip side by
 * side and applies each k-step's activation fragments (loaded once) to both
 * strips, into two accumulators. Every accumulator sees k_mm_tc1<SW>'s mma
 * sequence and the segment sums are added in the same order, so the same
 * bits with half the warps a pair: 256-thread blocks, three an SM, so a
 * 1B model's 352 pairs run in one wave (k_mm_tc1<SW> takes 1.33 waves of
 * 512-thread blocks, two an SM). */
template <typename T, int NST, bool TWO>
__global__ void __launch_bounds__(256, 3) k_mm_tc1_gu(const T *__restrict__ W, int64_t kp,
                                                      const T *__restrict__ X, int B, int KS, mm_sw sw, int early) {
    DCU_TR_EXIT();
    dcu_pdl_trigger();
    if (!(early & 1)) dcu_pdl_wait();
    const bool ef = early & 2;
    const uint64_t pol = ef ? wm_policy() : 0;
    constexpr int RS = NST * WM_BUF; /* floats per warp: NST x 2 slice buffers of 2-byte values */
    static_assert(RS >= 512, "two partial tiles fit a warp's region");
    extern __shared__ __align__(128) float wm_part[];
    const int warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, t = lane & 3;
    const int ppb = nwarps / KS, pib = warp / KS, seg = warp % KS;
    const int64_t HS = sw.H / 16, pair = (int64_t)blockIdx.x * ppb + pib;
    const int64_t KT = kp / 16;
    const int64_t k_begin = KT * seg / KS, k_end = KT * (seg + 1) / KS;
    float *region = wm_part + (size_t)warp * RS;
    T *stg = (T *)region; /* NST x (gate buffer, up buffer) */
    float cg[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
    float cu[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
    if (pair < HS) {
        const T *wg = W + pair * 16 * kp, *wu = W + (pair + HS) * 16 * kp;
        const bool r0 = g < B, r1 = TWO && g + 8 < B;
        const uint32_t *x0 = (const uint32_t *)(X + (int64_t)g * kp) + t;
        const uint32_t *x1 = (const uint32_t *)(X + (int64_t)(g + 8) * kp) + t;
#pragma unroll
        for (int q = 0; q < NST; q++) {
            wm_stage_p(stg + (2 * q) * WM_BUF, wg, kp, k_begin + q * WM_ST, k_end, lane, ef, pol);
            wm_stage_p(stg + (2 * q + 1) * WM_BUF, wu, kp, k_begin + q * WM_ST, k_end, lane, ef, pol);
            __pipeline_commit();
        }
        dcu_pdl_wait();
        uint32_t a[WM_ST][4], an[WM_ST][4];
        tc_load_a(a, x0, x1, r0, r1, k_begin, k_end);
        int s = 0;
        for (int64_t kt = k_begin; kt < k_end; kt += WM_ST, s = s + 1 == NST ? 0 : s + 1) {
            tc_load_a(an, x0, x1, r0, r1, kt + WM_ST, k_end);
            const T *bg = stg + (2 * s) * WM_BUF, *bu = bg + WM_BUF;
            __pipeline_wait_prior(NST - 1);
            __syncwarp();
#pragma unroll
            for (int i = 0; i < WM_ST; i++) {
                if (kt + i < k_end) {
#pragma unroll
                    for (int nt = 0; nt < 2; nt++) {
                        const uint32_t *pg = (const uint32_t *)(bg + (nt * 8 + g) * WM_LDS + i * 16) + t;
                        const uint32_t *pu = (const uint32_t *)(bu + (nt * 8 + g) * WM_LDS + i * 16) + t;
                        tc_mma(cg[nt], a[i], pg[0], pg[4], (const T *)0);
                        tc_mma(cu[nt], a[i], pu[0], pu[4], (const T *)0);
                    }
                }
            }
            __syncwarp();
            wm_stage_p(stg + (2 * s) * WM_BUF, wg, kp, kt + NST * WM_ST, k_end, lane, ef, pol);
            wm_stage_p(stg + (2 * s + 1) * WM_BUF, wu, kp, kt + NST * WM_ST, k_end, lane, ef, pol);
            __pipeline_commit();
#pragma unroll
            for (int i = 0; i < WM_ST; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) a[i][j] = an[i][j];
        }
        __pipeline_wait_prior(0);
    }
    dcu_tr(3);
    dcu_pdl_wait();
    __syncwarp();
    tc_put_tile(region, cg, g, t);
    tc_put_tile(region + 256, cu, g, t);
    __syncthreads();
    const int total = ppb * B * 16;
    for (int i = threadIdx.x; i < total; i += blockDim.x) {
        int pi = i / (B * 16), e = i % (B * 16);
        int64_t col = ((int64_t)blockIdx.x * ppb + pi) * 16 + e % 16;
        if (col < sw.H) {
            const float *pg = wm_part + (size_t)pi * KS * RS + e, *pu = pg + 256;
            float vg = pg[0], vu = pu[0];
            for (int q = 1; q < KS; q++) vg = __fadd_rn(vg, pg[(size_t)q * RS]);
            for (int q = 1; q < KS; q++) vu = __fadd_rn(vu, pu[(size_t)q * RS]);
            size_t o = (size_t)(e / 16) * sw.H + col;
            sw.f[o] = dcu_prep_elem(sw.acts, dcu_swiglu(sw.fast, vg, vu), 0.0f, false, sw.h ? sw.h + o : NULL, NULL);
        }
    }
}

/* y = y * act row scale * weight scale (after the cuBLASLt fp8 product) */
__global__ void k_fp8_scale(float *y, int64_t ldy, int64_t N, int64_t B, const float *qs, const float *wsc, int gpr,
                            float ts) {
    DCU_PDL_ENTER();
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= B * N) return;
    int64_t b = i / N, n = i % N;
    float sw = wsc ? __fmul_rn(wsc[n * gpr], ts) : ts;
    float *p = y + (size_t)b * ldy + n;
    *p = __fmul_rn(__fmul_rn(*p, qs[b]), sw);
}

/* ---------------------------------------------------------------- host */

static int simt_format(const dmat *W) {
    int64_t K = W->cols;
    switch (W->dt) {
    case DRIFT_DTYPE_F32: return K % 4 == 0 ? MF_F32 : MF_GEN;
    case DRIFT_DTYPE_F16: return K % 8 == 0 ? MF_F16 : MF_GEN;
    case DRIFT_DTYPE_BF16: return K % 8 == 0 ? MF_BF16 : MF_GEN;
    case DRIFT_DTYPE_FP8_E4M3: return K % 16 == 0 ? MF_E4M3 : MF_GEN;
    case DRIFT_DTYPE_FP8_E5M2: return K % 16 == 0 ? MF_E5M2 : MF_GEN;
    case DRIFT_DTYPE_INT8: return K % 16 == 0 ? MF_INT8 : MF_GEN;
    case DRIFT_DTYPE_INT4: return K % 32 == 0 && W->group % 32 == 0 ? MF_INT4 : MF_GEN;
    case DRIFT_DTYPE_MXFP4: return K % 32 == 0 ? MF_MXFP4 : MF_GEN;
    case DRIFT_DTYPE_NVFP4: return K % 16 == 0 ? MF_NVFP4 : MF_GEN;
    case DRIFT_DTYPE_Q8_0: return K % 32 == 0 ? MF_Q8_0 : MF_GEN;
    case DRIFT_DTYPE_Q4_0: return K % 32 == 0 ? MF_Q4_0 : MF_GEN;
    default: return MF_GEN;
    }
}

static int format_units(int f) {
    switch (f) {
    case MF_F32: return 4;
    case MF_F16:
    case MF_BF16: return 8;
    case MF_E4M3:
    case MF_E5M2:
    case MF_INT8:
    case MF_NVFP4: return 16;
    case MF_INT4:
    case MF_MXFP4:
    case MF_Q8_0:
    case MF_Q4_0: return 32;
    default: return 1;
    }
}

template <int F, typename ACC, int BT, bool PIPE = false>
static void launch_simt_t(dim3 g, cudaStream_t st, const dmat &W, const float *x, int64_t ldx, int B, float *y,
                          int64_t ldy, int R) {
    dcu_launch(k_mm_simt<F, ACC, BT, PIPE>, g, MM_WARPS * 32, 0, st, W, x, ldx, B, y, ldy, R);
}

template <int F>
static void launch_simt_f(dim3 g, cudaStream_t st, const dmat &W, const float *x, int64_t ldx, int B, float *y,
                          int64_t ldy, int R, bool f64, int bt) {
    /* the overlapped loop where a lane of a batch-1 launch has more than one round of units (the same sums) */
    constexpr int E = mf_traits<F>::E;
    bool pipe = mf_traits<F>::VEC && bt == 1 && W.cols / E > (int64_t)R * 32 * MM_UNR;
    if (f64) {
        if (bt != 1) launch_simt_t<F, double, 8>(g, st, W, x, ldx, B, y, ldy, R);
        else if (pipe) launch_simt_t<F, double, 1, mf_traits<F>::VEC>(g, st, W, x, ldx, B, y, ldy, R);
        else launch_simt_t<F, double, 1>(g, st, W, x, ldx, B, y, ldy, R);
    } else {
        if (bt != 1) launch_simt_t<F, float, 8>(g, st, W, x, ldx, B, y, ldy, R);
        else if (pipe) launch_simt_t<F, float, 1, mf_traits<F>::VEC>(g, st, W, x, ldx, B, y, ldy, R);
        else launch_simt_t<F, float, 1>(g, st, W, x, ldx, B, y, ldy, R);
    }
}

static drift_status mm_simt(dcu_ctx *c, const drift_numeric_profile *p, const dmat *W, const float *x, int64_t B,
                            float *y, int64_t ldy, drift_error *err) {
    int f = simt_format(W);
    int64_t N = W->rows, U = W->cols / format_units(f);
    int R = 1;
    while (R < MM_WARPS && N * R < 8192 && U >= 64 * R) R *= 2;
    int bt = B == 1 ? 1 : 8;
    int rpb = MM_WARPS / R;
    dim3 g((unsigned)((N + rpb - 1) / rpb), (unsigned)((B + bt - 1) / bt));
    bool f64 = p->accum == DRIFT_ACCUM_F64;
    int Bi = (int)B;
    switch (f) {
    case MF_F32: launch_simt_f<MF_F32>(g, c->st, *W, x, W->cols, Bi, y, ldy, R, f64, bt); break;
    case MF_F16: launch_simt_f<MF_F16>(g, c->st, *W, x, W->cols, Bi, y, ldy, R, f64, bt); break;
    case MF_BF16: launch_simt_f<MF_BF16>(g, c->st, *W, x, W->cols, Bi, y, ldy, R, f64, bt); break;
    case MF_E4M3: launch_simt_f<MF_E4M3>(g, c->st, *W, x, W->cols, Bi, y, ldy, R, f64, bt); break;
    case MF_E5M2: launch_simt_f<MF_E5M2>(g, c->st, *W, x, W->cols, Bi, y, ldy, R, f64, bt); break;
    case MF_INT8: launch_simt_f<MF_INT8>(g, c->st, *W, x, W->cols, Bi, y, ldy, R, f64, bt); break;
    case MF_INT4: launch_simt_f<MF_INT4>(g, c->st, *W, x, W->cols, Bi, y, ldy, R, f64, bt); break;
    case MF_MXFP4: launch_simt_f<MF_MXFP4>(g, c->st, *W, x, W->cols, Bi, y, ldy, R, f64, bt); break;
    case MF_NVFP4: launch_simt_f<MF_NVFP4>(g, c->st, *W, x, W->cols, Bi, y, ldy, R, f64, bt); break;
    case MF_Q8_0: launch_simt_f<MF_Q8_0>(g, c->st, *W, x, W->cols, Bi, y, ldy, R, f64, bt); break;
    case MF_Q4_0: launch_simt_f<MF_Q4_0>(g, c->st, *W, x, W->cols, Bi, y, ldy, R, f64, bt); break;
    default: launch_simt_f<MF_GEN>(g, c->st, *W, x, W->cols, Bi, y, ldy, R, f64, bt); break;
    }
    DCU_LAUNCHED("matmul kernel (SIMT)");
    return DRIFT_OK;
}

/* T = __nv_bfloat16 or __half: k_mm_tc1 for B <= 16 (one batch tile, activations in registers: the same bits),
 * k_mm_wmma above */
/* segments per strip: from (N, K) only */
static int wm_ks(const dmat *W) {
    int64_t strips = W->np / 16, KT = W->kp / 16;
    int KS = 1;
    while (KS < 16 && strips * KS < 4096 && KT >= 8 * KS) KS *= 2;
    return KS;
}

/* Per-product overrides (read once): DRIFT_CUDA_TC_STAGES is one digit
 * 2..4 (that depth for every k_mm_tc1 grid) or five characters for the
 * forward pass's q|k|v, wo, gate|up, down and output-head products, each
 * 2..4 or 0 (chosen from the grid); DRIFT_CUDA_EARLY is five 0/1 for the
 * same products (default all 1; 0: that product's kernel stages no weights
 * before the previous kernel has finished). */
struct tc_env {
    int st[DCU_MM_NTAGS];    /* 0: from the grid */
    int early[DCU_MM_NTAGS];
    int ef; /* k_mm_tc1 / k_mm_tc1_gu stage weights evict-first (DRIFT_CUDA_EF=0: off) */
    int smem_sm;
};
static const tc_env &tc_env_get(void) {
    static tc_env v;
    static bool ready;
    if (ready) return v;
    for (int t = 0; t < DCU_MM_NTAGS; t++) v.st[t] = 0, v.early[t] = 1;
    const char *e = getenv("DRIFT_CUDA_TC_STAGES");
    if (e && e[0] >= '2' && e[0] <= '0' + TC_MAX_ST && !e[1]) {
        for (int t = 0; t < DCU_MM_NTAGS; t++) v.st[t] = e[0] - '0';
    } else if (e && strlen(e) == DCU_MM_NTAGS - 1) {
        for (int t = 1; t < DCU_MM_NTAGS; t++) {
            char ch = e[t - 1];
            v.st[t] = ch >= '2' && ch <= '0' + TC_MAX_ST ? ch - '0' : 0;
        }
    }
    v.ef = dcu_env_not_zero("DRIFT_CUDA_EF");
    e = getenv("DRIFT_CUDA_EARLY");
    if (e && strlen(e) == DCU_MM_NTAGS - 1)
        for (int t = 1; t < DCU_MM_NTAGS; t++) v.early[t] = e[t - 1] != '0';
    if (cudaDeviceGetAttribute(&v.smem_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, 0) != cudaSuccess)
        v.smem_sm = 0;
    ready = true;
    return v;
}

/* the early argument of k_mm_tc1 / k_mm_tc1_gu for product tag: bit 0
 * DRIFT_CUDA_EARLY's choice, bit 1 evict-first staging (DRIFT_CUDA_EF) */
static int tc_early(int tag) {
    const tc_env &v = tc_env_get();
    return v.early[tag] | (v.ef ? 2 : 0);
}

/* k_mm_tc1's slice buffers per warp: 2, or 3 / 4 when the grid still fits
 * in one wave with the larger shared memory (more of each warp's weights in
 * flight; the same mma sequence, so the same bits), unless tc_env forces a
 * depth for the product (tag) */
static int tc_stages(const dcu_ctx *c, unsigned gx, int nwarps, int tag) {
    const tc_env &v = tc_env_get();
    if (tag >= 0 && tag < DCU_MM_NTAGS && v.st[tag]) return v.st[tag];
    for (int nst = TC_MAX_ST; nst > 2; nst--) {
        size_t smem = (size_t)nwarps * nst * WM_BUF * 2;
        long by_smem = v.smem_sm > 0 ? (long)v.smem_sm / (long)(smem + 1024) : 0;
        const long regs = nst == 4 ? 128 : 64; /* k_mm_tc1's launch bounds (at most) */
        long by_regs = 65536L / (nwarps * 32L * regs), by_thr = 2048L / (nwarps * 32L);
        long bps = by_smem < by_regs ? by_smem : by_regs;
        if (by_thr < bps) bps = by_thr;
        if ((long)gx <= bps * c->sm_count) return nst;
    }
    return 2;
}

template <typename T, bool SW, int NST>
static cudaError_t tc1_attr() {
    const int mx = (int)(16 * NST * WM_BUF * 2);
    cudaError_t e = cudaFuncSetAttribute(k_mm_tc1<T, SW, NST, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, mx);
    if (e == cudaSuccess)
        e = cudaFuncSetAttribute(k_mm_tc1<T, SW, NST, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, mx);
    return e;
}

template <typename T, int NST>
static cudaError_t gu_attr() {
    const int mx = (int)(8 * NST * WM_BUF * 4); /* 8 warps, NST x 2 slice buffers of 2-byte values */
    cudaError_t e = cudaFuncSetAttribute(k_mm_tc1_gu<T, NST, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, mx);
    if (e == cudaSuccess)
        e = cudaFuncSetAttribute(k_mm_tc1_gu<T, NST, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, mx);
    return e;
}

template <typename T>
static drift_status wm_smem_attr(drift_error *err) {
    static bool smem_set;
    if (!smem_set) { /* once per process and type, on the first (eager, never captured) launch */
        const int mx = (int)(16 * WM_REG * sizeof(float));
        cudaError_t e = cudaFuncSetAttribute(k_mm_wmma<T, WM_MT>, cudaFuncAttributeMaxDynamicSharedMemorySize, mx);
        if (e == cudaSuccess) e = cudaFuncSetAttribute(k_mm_wmma<T, 4>, cudaFuncAttributeMaxDynamicSharedMemorySize, mx);
        if (e == cudaSuccess) e = tc1_attr<T, false, 2>();
        if (e == cudaSuccess) e = tc1_attr<T, false, 3>();
        if (e == cudaSuccess) e = tc1_attr<T, false, 4>();
        if (e == cudaSuccess) e = tc1_attr<T, true, 2>();
        if (e == cudaSuccess) e = tc1_attr<T, true, 3>();
        if (e == cudaSuccess) e = tc1_attr<T, true, 4>();
        if (e == cudaSuccess) e = gu_attr<T, 2>();
        if (e == cudaSuccess) e = gu_attr<T, 3>();
        if (e == cudaSuccess) e = gu_attr<T, 4>();
        if (e != cudaSuccess) return dcu_fail(err, e, "matmul kernel (WMMA) shared memory");
        smem_set = true;
    }
    return DRIFT_OK;
}

/* k_mm_tc1 for B <= 16: grid gx, nwarps warps (c->mm_tag: the product) */
template <typename T, bool SW>
static void launch_tc1(dcu_ctx *c, unsigned gx, int nwarps, const T *w, int64_t kp, int64_t N, const T *xh, int B,
                       float *y, int64_t ldy, int KS, mm_sw sw) {
    const int tag = c->mm_tag >= 0 && c->mm_tag < DCU_MM_NTAGS ? c->mm_tag : DCU_MM_OTHER;
    const int nst = tc_stages(c, gx, nwarps, tag);
    const int early = tc_early(tag);
    const size_t smem = (size_t)nwarps * nst * WM_BUF * 2;
    const bool two = B > 8;
    const unsigned th = (unsigned)nwarps * 32;
#define TC1_GO(NST, TWO) \
    dcu_launch(k_mm_tc1<T, SW, NST, TWO>, gx, th, smem, c->st, w, kp, N, xh, B, y, ldy, KS, sw, early)
    if (nst == 4 && two) TC1_GO(4, true);
    else if (nst == 4) TC1_GO(4, false);
    else if (nst == 3 && two) TC1_GO(3, true);
    else if (nst == 3) TC1_GO(3, false);
    else if (two) TC1_GO(2, true);
    else TC1_GO(2, false);
#undef TC1_GO
}

/* k_mm_tc1_gu for B <= 16: the deepest slice pipeline (4, 3, 2) whose
 * blocks all fit on the GPU at once (the occupancy API's blocks an SM, asked
 * once per depth and block size), else 2, unless DRIFT_CUDA_TC_STAGES sets
 * gate|up's */
template <typename T, bool TWO>
static int gu_stages(const dcu_ctx *c, unsigned gx, int nwarps) {
    const tc_env &v = tc_env_get();
    if (v.st[DCU_MM_GU]) return v.st[DCU_MM_GU];
    static std::atomic<int> per_sm[2][9] = {}; /* [nst - 3][nwarps]: blocks an SM + 1 (0: not asked yet) */
    for (int nst = TC_MAX_ST; nst > 2 && nwarps <= 8; nst--) {
        int per = per_sm[nst - 3][nwarps].load(std::memory_order_relaxed) - 1;
        if (per < 0) {
            size_t smem = (size_t)nwarps * nst * WM_BUF * 4;
            cudaError_t e = nst == 4 ? cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, k_mm_tc1_gu<T, 4, TWO>,
                                                                                     nwarps * 32, smem)
                                     : cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, k_mm_tc1_gu<T, 3, TWO>,
                                                                                     nwarps * 32, smem);
            if (e != cudaSuccess) {
                cudaGetLastError();
                continue;
            }
            per_sm[nst - 3][nwarps].store(per + 1, std::memory_order_relaxed);
        }
        if ((long)gx <= (long)per * c->sm_count) return nst;
    }
    return 2;
}

template <typename T, bool TWO>
static void launch_gu(dcu_ctx *c, unsigned gx, int nwarps, const T *w, int64_t kp, const T *xh, int B, int KS,
                      mm_sw sw) {
    const int nst = gu_stages<T, TWO>(c, gx, nwarps);
    const int early = tc_early(DCU_MM_GU);
    const size_t smem = (size_t)nwarps * nst * WM_BUF * 4;
    if (nst == 4) dcu_launch(k_mm_tc1_gu<T, 4, TWO>, gx, nwarps * 32, smem, c->st, w, kp, xh, B, KS, sw, early);
    else if (nst == 3) dcu_launch(k_mm_tc1_gu<T, 3, TWO>, gx, nwarps * 32, smem, c->st, w, kp, xh, B, KS, sw, early);
    else dcu_launch(k_mm_tc1_gu<T, 2, TWO>, gx, nwarps * 32, smem, c->st, w, kp, xh, B, KS, sw, early);
}

/* launch_gu with the second batch tile where B > 8 */
template <typename T>
static void launch_gu_b(dcu_ctx *c, unsigned gx, int nwarps, const T *w, int64_t kp, const T *xh, int B, int KS,
                        mm_sw sw) {
    if (B > 8) launch_gu<T, true>(c, gx, nwarps, w, kp, xh, B, KS, sw);
    else launch_gu<T, false>(c, gx, nwarps, w, kp, xh, B, KS, sw);
}

/* DRIFT_CUDA_GU=0: gate|up with SwiGLU through k_mm_tc1<SW> (a warp per
 * strip segment) instead of k_mm_tc1_gu (read once; the same bits) */
static bool gu_pairs_on(void) {
    static int on = -1;
    if (on < 0) on = dcu_env_not_zero("DRIFT_CUDA_GU");
    return on != 0;
}

template <typename T>
static drift_status mm_wmma_t(dcu_ctx *c, const dmat *W, const T *xh, int64_t B, float *y, int64_t ldy,
                              drift_error *err) {
    int64_t strips = W->np / 16;
    int KS = wm_ks(W);
    int nwarps = KS < 4 ? 4 : KS, spb = nwarps / KS;
    /* batch tiles per warp: 4 when the grid still covers the SMs (a weight slice then serves 64 rows; every
     * output's sums are the same: MT only regroups the tiles), else 2 */
    unsigned gx = (unsigned)((strips + spb - 1) / spb);
    int mt = B > 32 && (int64_t)gx * ((dcu_pad16(B) + 63) / 64) >= c->sm_count ? 4 : WM_MT;
    dim3 g(gx, (unsigned)((dcu_pad16(B) + 16 * mt - 1) / (16 * mt)));
    size_t smem = (size_t)nwarps * WM_REG * sizeof(float); /* <= 72 KB: above the 48 KB default */
    drift_status st = wm_smem_attr<T>(err);
    if (st) return st;
    const T *w = (const T *)W->data;
    const mm_sw nosw = {0, 0, 0, NULL, NULL};
    if (B <= 16) launch_tc1<T, false>(c, g.x, nwarps, w, W->kp, W->rows, xh, (int)B, y, ldy, KS, nosw);
    else if (mt == 4) dcu_launch(k_mm_wmma<T, 4>, g, nwarps * 32, smem, c->st, w, W->kp, W->rows, xh, (int)B, y, ldy, KS);
    else dcu_launch(k_mm_wmma<T, WM_MT>, g, nwarps * 32, smem, c->st, w, W->kp, W->rows, xh, (int)B, y, ldy, KS);
    DCU_LAUNCHED("matmul kernel (WMMA)");
    return DRIFT_OK;
}

static drift_status mm_wmma(dcu_ctx *c, const dmat *W, const uint16_t *xh, int64_t B, float *y, int64_t ldy,
                            drift_error *err) {
    if (W->dt == DRIFT_DTYPE_BF16) return mm_wmma_t(c, W, (const __nv_bfloat16 *)xh, B, y, ldy, err);
    return mm_wmma_t(c, W, (const __half *)xh, B, y, ldy, err);
}

drift_status dcu_mm_swiglu(dcu_ctx *c, const drift_numeric_profile *p, const dmat *W, const dact *x, int64_t B,
                           int64_t H, const dact *out, unsigned needs, int *done, drift_error *err) {
    *done = 0;
    if (!dcu_fuse_on() || B < 1 || B > 16 || dcu_mm_path(p, W) != DCU_PATH_WMMA || H % 16 || W->rows != 2 * H ||
        p->acts == DRIFT_DTYPE_FP8_E4M3 || p->acts == DRIFT_DTYPE_FP8_E5M2 || (needs & DCU_NEED_Q))
        return DRIFT_OK;
    int KS = wm_ks(W); /* the unfused launch's segments: the same sums */
    if (KS > 8) return DRIFT_OK;
    int64_t pairs = H / 16;
    mm_sw sw = {(int)H, p->acts, p->exp == DRIFT_EXP_FAST, out->f, (needs & DCU_NEED_H) ? out->h : NULL};
    drift_status st;
    if (gu_pairs_on()) { /* a warp per pair segment: max(4, KS) warps, (warps / KS) pairs a block */
        int nw2 = KS < 4 ? 4 : KS;
        unsigned gx2 = (unsigned)((pairs + nw2 / KS - 1) / (nw2 / KS));
        if (W->dt == DRIFT_DTYPE_BF16) {
            if ((st = wm_smem_attr<__nv_bfloat16>(err))) return st;
            launch_gu_b<__nv_bfloat16>(c, gx2, nw2, (const __nv_bfloat16 *)W->data, W->kp,
                                       (const __nv_bfloat16 *)x->h, (int)B, KS, sw);
        } else {
            if ((st = wm_smem_attr<__half>(err))) return st;
            launch_gu_b<__half>(c, gx2, nw2, (const __half *)W->data, W->kp, (const __half *)x->h, (int)B, KS, sw);
        }
        DCU_LAUNCHED("matmul kernel (WMMA, gate|up pairs, SwiGLU)");
        *done = 1;
        return DRIFT_OK;
    }
    int nwarps = 2 * KS < 4 ? 4 : 2 * KS, ppb = nwarps / (2 * KS);
    unsigned gx = (unsigned)((pairs + ppb - 1) / ppb);
    if (W->dt == DRIFT_DTYPE_BF16) {
        if ((st = wm_smem_attr<__nv_bfloat16>(err))) return st;
        launch_tc1<__nv_bfloat16, true>(c, gx, nwarps, (const __nv_bfloat16 *)W->data, W->kp, W->rows,
                                        (const __nv_bfloat16 *)x->h, (int)B, (float *)NULL, 0, KS, sw);
    } else {
        if ((st = wm_smem_attr<__half>(err))) return st;
        launch_tc1<__half, true>(c, gx, nwarps, (const __half *)W->data, W->kp, W->rows, (const __half *)x->h, (int)B,
                                 (float *)NULL, 0, KS, sw);
    }
    DCU_LAUNCHED("matmul kernel (WMMA, SwiGLU)");
    *done = 1;
    return DRIFT_OK;
}

/* cuBLASLt fp8; *ran = 0 when the library has no algorithm for the shape */
static drift_status mm_lt(dcu_ctx *c, const dmat *W, const dact *x, int64_t B, float *y, int64_t ldy, int *ran,
                          drift_error *err) {
    *ran = 0;
    int64_t N = W->rows, K = W->cols;
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    drift_status st = DRIFT_OK;
    cublasStatus_t s = cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, (uint64_t)K, (uint64_t)N, K);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, (uint64_t)K, (uint64_t)B, K);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, (uint64_t)N, (uint64_t)B, ldy);
    if (s != CUBLAS_STATUS_SUCCESS) {
        st = dcu_blas_fail(err, s, "cuBLASLt fp8 descriptors");
        goto done;
    }
    {
        dcu_lt_algo *hit = NULL;
        for (int i = 0; i < 32; i++) {
            dcu_lt_algo *e = &c->lt_cache[i];
            if (e->valid && e->n == N && e->b == B && e->k == K && e->ldy == ldy) hit = e;
        }
        if (!hit) {
            cublasLtMatmulHeuristicResult_t res;
            int nres = 0;
            s = cublasLtMatmulPreferenceCreate(&pref);
            if (s == CUBLAS_STATUS_SUCCESS)
                s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                         &c->lt_ws_bytes, sizeof c->lt_ws_bytes);
            if (s == CUBLAS_STATUS_SUCCESS)
                s = cublasLtMatmulAlgoGetHeuristic(c->lt, op, la, lb, lc, lc, pref, 1, &res, &nres);
            bool none = s == CUBLAS_STATUS_NOT_SUPPORTED || s == CUBLAS_STATUS_INVALID_VALUE ||
                        (s == CUBLAS_STATUS_SUCCESS && nres < 1);
            if (s != CUBLAS_STATUS_SUCCESS && !none) {
                st = dcu_blas_fail(err, s, "cuBLASLt fp8 heuristic");
                goto done;
            }
            hit = &c->lt_cache[c->lt_next];
            c->lt_next = (c->lt_next + 1) % 32;
            hit->n = N;
            hit->b = B;
            hit->k = K;
            hit->ldy = ldy;
            if (!none) hit->algo = res.algo;
            hit->valid = none ? 2 : 1;
        }
        if (hit->valid == 2) goto done; /* no fp8 algorithm for this shape: the caller uses the kernels */
        const float one = 1.0f, zero = 0.0f;
        s = cublasLtMatmul(c->lt, op, &one, W->data, la, x->q, lb, &zero, y, lc, y, lc, &hit->algo, c->lt_ws,
                           c->lt_ws_bytes, c->st);
        if (s == CUBLAS_STATUS_NOT_SUPPORTED) { /* the same fall back */
            hit->valid = 0;
            goto done;
        }
        if (s != CUBLAS_STATUS_SUCCESS) {
            st = dcu_blas_fail(err, s, "cuBLASLt fp8 matmul");
            goto done;
        }
        int64_t total = B * N;
        dcu_launch(k_fp8_scale, (unsigned)((total + 255) / 256), 256, 0, c->st, y, ldy, N, B, x->qs, W->scales, W->gpr,
                                                                         W->ts);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) {
            st = dcu_fail(err, e, "fp8 scale kernel");
            goto done;
        }
        *ran = 1;
    }
done:
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (op) cublasLtMatmulDescDestroy(op);
    return st;
}

dcu_path dcu_mm_path(const drift_numeric_profile *p, const dmat *W) {
    bool same16 = (W->dt == DRIFT_DTYPE_BF16 && p->acts == DRIFT_DTYPE_BF16) ||
                  (W->dt == DRIFT_DTYPE_F16 && p->acts == DRIFT_DTYPE_F16);
    if (p->gemm == DRIFT_GEMM_VENDOR) {
        if (W->dt == DRIFT_DTYPE_F32) return DCU_PATH_SGEMM;
        if (same16) return DCU_PATH_GEMMEX;
        if (W->dt == DRIFT_DTYPE_FP8_E4M3 && p->acts == DRIFT_DTYPE_FP8_E4M3 && W->cols % 16 == 0)
            return DCU_PATH_LT;
    }
    if (same16 && p->accum == DRIFT_ACCUM_F32) return DCU_PATH_WMMA;
    return DCU_PATH_SIMT;
}

unsigned dcu_mm_needs(const drift_numeric_profile *p, const dmat *W) {
    switch (dcu_mm_path(p, W)) {
    case DCU_PATH_WMMA:
    case DCU_PATH_GEMMEX: return DCU_NEED_H;
    case DCU_PATH_LT: return DCU_NEED_Q;
    default: return 0;
    }
}

drift_status dcu_mm(dcu_ctx *c, const drift_numeric_profile *p, const dmat *W, const dact *x, int64_t B, float *y,
                    int64_t ldy, drift_error *err) {
    if (B <= 0 || W->rows <= 0) return DRIFT_OK;
    dcu_path path = dcu_mm_path(p, W);
    int64_t K = W->cols, kp = dcu_pad16(K), N = W->rows;
    const float one = 1.0f, zero = 0.0f;
    for (int64_t b0 = 0; b0 < B; b0 += MM_SLICE) {
        int64_t nb = B - b0 < MM_SLICE ? B - b0 : MM_SLICE;
        dact xs = *x;
        xs.f = x->f + (size_t)b0 * K;
        if (xs.h) xs.h = x->h + (size_t)b0 * kp;
        if (xs.q) xs.q = x->q + (size_t)b0 * K;
        if (xs.qs) xs.qs = x->qs + b0;
        float *ys = y + (size_t)b0 * ldy;
        drift_status st = DRIFT_OK;
        switch (path) {
        case DCU_PATH_SGEMM:
            DCU_TRY_BLAS(cublasSgemm(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)N, (int)nb, (int)K, &one,
                                     (const float *)W->data, (int)(W->ld / sizeof(float)), xs.f, (int)K, &zero, ys,
                                     (int)ldy),
                         "cublasSgemm");
            break;
        case DCU_PATH_GEMMEX: {
            cudaDataType_t t = W->dt == DRIFT_DTYPE_BF16 ? CUDA_R_16BF : CUDA_R_16F;
            DCU_TRY_BLAS(cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)N, (int)nb, (int)K, &one, W->data, t,
                                      (int)W->kp, xs.h, t, (int)kp, &zero, ys, CUDA_R_32F, (int)ldy,
                                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                         "cublasGemmEx");
            break;
        }
        case DCU_PATH_LT: {
            int ran = 0;
            st = mm_lt(c, W, &xs, nb, ys, ldy, &ran, err);
            if (!st && !ran) st = mm_simt(c, p, W, xs.f, nb, ys, ldy, err);
            break;
        }
        case DCU_PATH_WMMA: st = mm_wmma(c, W, xs.h, nb, ys, ldy, err); break;
        default: st = mm_simt(c, p, W, xs.f, nb, ys, ldy, err); break;
        }
        if (st) return st;
    }
    return DRIFT_OK;
}

#ifdef DCU_TRACE
DCU_TRACE_HOST(dcu_trace_m, "m")
#endif
