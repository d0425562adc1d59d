/* cuda_attn_f32.cu - the attention kernels (cuda_attn.cuh) for KV caches of
 * f32: k_attn_part and k_attn_row at every lane width. One unit per KV
 * format, so that a parallel build compiles the formats side by side. */
#include "model/cuda/cuda_attn.cuh"

template void dcu_attn_launch_fmt<DRIFT_DTYPE_F32>(int, int, bool, dim3, int, size_t, cudaStream_t,
                                                         const att_k &);

#ifdef DCU_TRACE
DCU_TRACE_HOST(dcu_trace_a_f32, "k")
#endif
