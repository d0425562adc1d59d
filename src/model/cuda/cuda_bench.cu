/* cuda_bench.cu - device figures for bench/cuda.c: copy bandwidth, GEMM
 * throughput, and the profiler switch. */
#include "model/cuda/cuda_internal.cuh"

#include <math.h>
#include <cuda_profiler_api.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- benchmarks */

/* events, stream and buffers of one benchmark, released on every path */
struct bench_res {
    cudaEvent_t e0 = NULL, e1 = NULL;
    cudaStream_t st = NULL;
    cublasHandle_t h = NULL;
    dcu_allocs al;
    ~bench_res() {
        if (st) cudaStreamSynchronize(st);
        if (e0) cudaEventDestroy(e0);
        if (e1) cudaEventDestroy(e1);
        if (h) cublasDestroy(h);
        if (st) cudaStreamDestroy(st);
    }
};

extern "C" drift_status dcu_bench_copy(size_t bytes, int reps, double *gbps, drift_error *err) {
    *gbps = 0;
    if (dcu_device_count() == 0) return drift_error_set(err, DRIFT_ERR_UNSUPPORTED, "cuda: no GPU found");
    if (bytes == 0 || reps < 1) return drift_error_set(err, DRIFT_ERR_INVALID, "cuda: copy of %zu bytes x %d", bytes, reps);
    DCU_TRY(cudaSetDevice(0), "selecting device 0");
    bench_res r;
    drift_status st;
    void *a, *b;
    if ((st = r.al.get(bytes, &a, "copy source", err)) || (st = r.al.get(bytes, &b, "copy destination", err)))
        return st;
    DCU_TRY(cudaMemset(a, 1, bytes), "filling the copy source");
    DCU_TRY(cudaStreamCreateWithFlags(&r.st, cudaStreamNonBlocking), "creating a stream");
    DCU_TRY(cudaEventCreate(&r.e0), "creating an event");
    DCU_TRY(cudaEventCreate(&r.e1), "creating an event");
    DCU_TRY(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, r.st), "warm-up copy");
    DCU_TRY(cudaEventRecord(r.e0, r.st), "recording an event");
    for (int i = 0; i < reps; i++) DCU_TRY(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, r.st), "copying");
    DCU_TRY(cudaEventRecord(r.e1, r.st), "recording an event");
    DCU_TRY(cudaEventSynchronize(r.e1), "waiting for the copies");
    float ms = 0;
    DCU_TRY(cudaEventElapsedTime(&ms, r.e0, r.e1), "reading the timer");
    if (ms <= 0) return drift_error_set(err, DRIFT_ERR_INTERNAL, "cuda: copy timer read %g ms", (double)ms);
    *gbps = 2.0 * (double)bytes * reps / (ms * 1e-3) / 1e9;
    return DRIFT_OK;
}

extern "C" void dcu_profiler(int on) {
    if (on) cudaProfilerStart();
    else cudaProfilerStop();
}

extern "C" drift_status dcu_bench_gemm(int n, int reps, double *tflops, drift_error *err) {
    *tflops = 0;
    if (dcu_device_count() == 0) return drift_error_set(err, DRIFT_ERR_UNSUPPORTED, "cuda: no GPU found");
    if (n < 16 || reps < 1) return drift_error_set(err, DRIFT_ERR_INVALID, "cuda: gemm of n = %d x %d", n, reps);
    DCU_TRY(cudaSetDevice(0), "selecting device 0");
    bench_res r;
    drift_status st;
    void *a, *b, *cc;
    size_t nn = (size_t)n * (size_t)n;
    if ((st = r.al.get(nn * 2, &a, "gemm A", err)) || (st = r.al.get(nn * 2, &b, "gemm B", err)) ||
        (st = r.al.get(nn * 4, &cc, "gemm C", err)))
        return st;
    DCU_TRY(cudaMemset(a, 0x3c, nn * 2), "filling gemm A"); /* bf16 0x3c3c ~ 0.0115 */
    DCU_TRY(cudaMemset(b, 0x3c, nn * 2), "filling gemm B");
    DCU_TRY(cudaStreamCreateWithFlags(&r.st, cudaStreamNonBlocking), "creating a stream");
    DCU_TRY_BLAS(cublasCreate(&r.h), "cublasCreate");
    DCU_TRY_BLAS(cublasSetStream(r.h, r.st), "cublasSetStream");
    DCU_TRY(cudaEventCreate(&r.e0), "creating an event");
    DCU_TRY(cudaEventCreate(&r.e1), "creating an event");
    const float one = 1.0f, zero = 0.0f;
    for (int i = 0; i <= reps; i++) {
        if (i == 1) DCU_TRY(cudaEventRecord(r.e0, r.st), "recording an event"); /* the first is a warm-up */
        DCU_TRY_BLAS(cublasGemmEx(r.h, CUBLAS_OP_T, CUBLAS_OP_N, n, n, n, &one, a, CUDA_R_16BF, n, b, CUDA_R_16BF, n,
                                  &zero, cc, CUDA_R_32F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                     "cublasGemmEx");
    }
    DCU_TRY(cudaEventRecord(r.e1, r.st), "recording an event");
    DCU_TRY(cudaEventSynchronize(r.e1), "waiting for the GEMMs");
    float ms = 0;
    DCU_TRY(cudaEventElapsedTime(&ms, r.e0, r.e1), "reading the timer");
    if (ms <= 0) return drift_error_set(err, DRIFT_ERR_INTERNAL, "cuda: gemm timer read %g ms", (double)ms);
    *tflops = 2.0 * (double)n * n * n * reps / (ms * 1e-3) / 1e12;
    return DRIFT_OK;
}
