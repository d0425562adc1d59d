/* cuda_blas_lazy.c - cuBLAS and cuBLASLt, loaded on their first call.
 *
 * Linking libcublas and libcublasLt makes every process that holds the CUDA
 * backend load them at start-up, used or not: their relocations and static
 * constructors cost memory and time before main() in every command (issue
 * 23; bench/BENCHMARKS.md has the figures), although only gemm=vendor
 * profiles and the benchmarks call them. So the backend is linked against the functions
 * below instead of the libraries: each has the header's prototype, and
 * forwards to its namesake in libcublas.so.MAJOR / libcublasLt.so.MAJOR
 * (MAJOR = the headers' CUBLAS_VER_MAJOR), which the first call of either
 * library opens (dlopen: the loader's search path, then DCU_BLAS_DIR, the
 * toolkit's library directory found at configure time).
 *
 *   backend .cu --cublasGemmEx()--> here --(once: dlopen + dlsym all)--> libcublas.so.13
 *
 * A library that cannot be opened, or lacks one of the functions, makes every
 * call into it return CUBLAS_STATUS_NOT_INITIALIZED, and
 * cublasGetStatusString's text for that status names what was missing (the
 * backend puts it in its error message). Thread-safe: each library is
 * resolved once (pthread_once); the tables are read-only afterwards.
 *
 * Add a function here when the backend starts calling a new one: the link
 * fails ("undefined reference to cublas...") until it is. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <cublasLt.h>
#include <cublas_v2.h>

#define DCU_STR2(x) #x
#define DCU_STR(x) DCU_STR2(x)
#ifndef DCU_BLAS_DIR
#define DCU_BLAS_DIR ""
#endif

/* libcublas.so.MAJOR's functions the backend calls */
static struct {
    cublasStatus_t (*create)(cublasHandle_t *);
    cublasStatus_t (*destroy)(cublasHandle_t);
    cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t);
    cublasStatus_t (*set_math_mode)(cublasHandle_t, cublasMath_t);
    const char *(*status_string)(cublasStatus_t);
    cublasStatus_t (*sgemm)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const float *,
                            const float *, int, const float *, int, const float *, float *, int);
    cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void *,
                              const void *, cudaDataType, int, const void *, cudaDataType, int, const void *, void *,
                              cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
} g_blas;

/* libcublasLt.so.MAJOR's */
static struct {
    cublasStatus_t (*create)(cublasLtHandle_t *);
    cublasStatus_t (*destroy)(cublasLtHandle_t);
    cublasStatus_t (*matmul)(cublasLtHandle_t, cublasLtMatmulDesc_t, const void *, const void *,
                             cublasLtMatrixLayout_t, const void *, cublasLtMatrixLayout_t, const void *, const void *,
                             cublasLtMatrixLayout_t, void *, cublasLtMatrixLayout_t, const cublasLtMatmulAlgo_t *,
                             void *, size_t, cudaStream_t);
    cublasStatus_t (*algo_get_heuristic)(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t,
                                         cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                         cublasLtMatmulPreference_t, int, cublasLtMatmulHeuristicResult_t[], int *);
    cublasStatus_t (*desc_create)(cublasLtMatmulDesc_t *, cublasComputeType_t, cudaDataType_t);
    cublasStatus_t (*desc_destroy)(cublasLtMatmulDesc_t);
    cublasStatus_t (*desc_set_attribute)(cublasLtMatmulDesc_t, cublasLtMatmulDescAttributes_t, const void *, size_t);
    cublasStatus_t (*pref_create)(cublasLtMatmulPreference_t *);
    cublasStatus_t (*pref_destroy)(cublasLtMatmulPreference_t);
    cublasStatus_t (*pref_set_attribute)(cublasLtMatmulPreference_t, cublasLtMatmulPreferenceAttributes_t,
                                         const void *, size_t);
    cublasStatus_t (*layout_create)(cublasLtMatrixLayout_t *, cudaDataType, uint64_t, uint64_t, int64_t);
    cublasStatus_t (*layout_destroy)(cublasLtMatrixLayout_t);
} g_lt;

static pthread_once_t g_blas_once = PTHREAD_ONCE_INIT, g_lt_once = PTHREAD_ONCE_INIT;
static int g_blas_ok, g_lt_ok;
/* what failed to load, for cublasGetStatusString; written once by load_* */
enum { WHY_BYTES = 512 };
static char g_blas_why[WHY_BYTES], g_lt_why[WHY_BYTES];

/* Opens lib (a soname) from the loader's path, else from DCU_BLAS_DIR. NULL
 * and why set when neither works. */
static void *open_lib(const char *lib, char *why, size_t why_bytes) {
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h && DCU_BLAS_DIR[0]) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", DCU_BLAS_DIR, lib);
        h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    }
    if (!h) {
        const char *e = dlerror();
        snprintf(why, why_bytes, "cannot load %s (%s)", lib, e ? e : "not found");
    }
    return h;
}

/* *fn = symbol name of h; returns 0 (why set) when it is missing. Copied
 * through a void * because ISO C has no cast from object to function
 * pointers; POSIX guarantees this works for dlsym's results. */
static int resolve(void *h, const char *lib, const char *name, void *fn, size_t fn_bytes, char *why, size_t why_bytes) {
    void *p = dlsym(h, name);
    if (!p) {
        snprintf(why, why_bytes, "%s has no %s", lib, name);
        return 0;
    }
    memcpy(fn, &p, fn_bytes);
    return 1;
}
#define RESOLVE(h, lib, field, name) resolve(h, lib, name, &(field), sizeof(field), why, WHY_BYTES)

static void load_blas(void) {
    static const char lib[] = "libcublas.so." DCU_STR(CUBLAS_VER_MAJOR);
    char *why = g_blas_why;
    void *h = open_lib(lib, g_blas_why, sizeof g_blas_why);
    g_blas_ok = h && RESOLVE(h, lib, g_blas.create, "cublasCreate_v2") &&
                RESOLVE(h, lib, g_blas.destroy, "cublasDestroy_v2") &&
                RESOLVE(h, lib, g_blas.set_stream, "cublasSetStream_v2") &&
                RESOLVE(h, lib, g_blas.set_math_mode, "cublasSetMathMode") &&
                RESOLVE(h, lib, g_blas.status_string, "cublasGetStatusString") &&
                RESOLVE(h, lib, g_blas.sgemm, "cublasSgemm_v2") && RESOLVE(h, lib, g_blas.gemm_ex, "cublasGemmEx");
}

static void load_lt(void) {
    static const char lib[] = "libcublasLt.so." DCU_STR(CUBLAS_VER_MAJOR);
    char *why = g_lt_why;
    void *h = open_lib(lib, g_lt_why, sizeof g_lt_why);
    g_lt_ok = h && RESOLVE(h, lib, g_lt.create, "cublasLtCreate") && RESOLVE(h, lib, g_lt.destroy, "cublasLtDestroy") &&
              RESOLVE(h, lib, g_lt.matmul, "cublasLtMatmul") &&
              RESOLVE(h, lib, g_lt.algo_get_heuristic, "cublasLtMatmulAlgoGetHeuristic") &&
              RESOLVE(h, lib, g_lt.desc_create, "cublasLtMatmulDescCreate") &&
              RESOLVE(h, lib, g_lt.desc_destroy, "cublasLtMatmulDescDestroy") &&
              RESOLVE(h, lib, g_lt.desc_set_attribute, "cublasLtMatmulDescSetAttribute") &&
              RESOLVE(h, lib, g_lt.pref_create, "cublasLtMatmulPreferenceCreate") &&
              RESOLVE(h, lib, g_lt.pref_destroy, "cublasLtMatmulPreferenceDestroy") &&
              RESOLVE(h, lib, g_lt.pref_set_attribute, "cublasLtMatmulPreferenceSetAttribute") &&
              RESOLVE(h, lib, g_lt.layout_create, "cublasLtMatrixLayoutCreate") &&
              RESOLVE(h, lib, g_lt.layout_destroy, "cublasLtMatrixLayoutDestroy");
}

static int blas_ready(void) {
    pthread_once(&g_blas_once, load_blas);
    return g_blas_ok;
}

static int lt_ready(void) {
    pthread_once(&g_lt_once, load_lt);
    return g_lt_ok;
}

#define NOT_LOADED CUBLAS_STATUS_NOT_INITIALIZED

/* ---- cuBLAS ---- */

cublasStatus_t CUBLASWINAPI cublasCreate_v2(cublasHandle_t *handle) {
    return blas_ready() ? g_blas.create(handle) : NOT_LOADED;
}

cublasStatus_t CUBLASWINAPI cublasDestroy_v2(cublasHandle_t handle) {
    return blas_ready() ? g_blas.destroy(handle) : NOT_LOADED;
}

cublasStatus_t CUBLASWINAPI cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
    return blas_ready() ? g_blas.set_stream(handle, stream) : NOT_LOADED;
}

cublasStatus_t CUBLASWINAPI cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
    return blas_ready() ? g_blas.set_math_mode(handle, mode) : NOT_LOADED;
}

/* For NOT_INITIALIZED, names the library that could not be loaded, when
 * one could not (the backend's error messages quote this string). */
const char *CUBLASWINAPI cublasGetStatusString(cublasStatus_t status) {
    if (!blas_ready()) return g_blas_why;
    if (status == NOT_LOADED && !lt_ready()) return g_lt_why;
    return g_blas.status_string(status);
}

cublasStatus_t CUBLASWINAPI cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                           int m, int n, int k, const float *alpha, const float *A, int lda,
                                           const float *B, int ldb, const float *beta, float *C, int ldc) {
    if (!blas_ready()) return NOT_LOADED;
    return g_blas.sgemm(handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

cublasStatus_t CUBLASWINAPI cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                         int m, int n, int k, const void *alpha, const void *A, cudaDataType Atype,
                                         int lda, const void *B, cudaDataType Btype, int ldb, const void *beta, void *C,
                                         cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                                         cublasGemmAlgo_t algo) {
    if (!blas_ready()) return NOT_LOADED;
    return g_blas.gemm_ex(handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc,
                          computeType, algo);
}

/* ---- cuBLASLt ---- */

cublasStatus_t CUBLASWINAPI cublasLtCreate(cublasLtHandle_t *handle) {
    return lt_ready() ? g_lt.create(handle) : NOT_LOADED;
}

cublasStatus_t CUBLASWINAPI cublasLtDestroy(cublasLtHandle_t handle) {
    return lt_ready() ? g_lt.destroy(handle) : NOT_LOADED;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void *alpha,
                                           const void *A, cublasLtMatrixLayout_t Adesc, const void *B,
                                           cublasLtMatrixLayout_t Bdesc, const void *beta, const void *C,
                                           cublasLtMatrixLayout_t Cdesc, void *D, cublasLtMatrixLayout_t Ddesc,
                                           const cublasLtMatmulAlgo_t *algo, void *workspace,
                                           size_t workspace_bytes, cudaStream_t stream) {
    if (!lt_ready()) return NOT_LOADED;
    return g_lt.matmul(handle, desc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo, workspace,
                       workspace_bytes, stream);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                                           cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                                           cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                                           cublasLtMatmulPreference_t pref, int requested,
                                                           cublasLtMatmulHeuristicResult_t results[], int *returned) {
    if (!lt_ready()) return NOT_LOADED;
    return g_lt.algo_get_heuristic(handle, desc, Adesc, Bdesc, Cdesc, Ddesc, pref, requested, results, returned);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *desc, cublasComputeType_t compute,
                                                     cudaDataType_t scale) {
    return lt_ready() ? g_lt.desc_create(desc, compute, scale) : NOT_LOADED;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
    return lt_ready() ? g_lt.desc_destroy(desc) : NOT_LOADED;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                                           cublasLtMatmulDescAttributes_t attr, const void *buf,
                                                           size_t size_bytes) {
    return lt_ready() ? g_lt.desc_set_attribute(desc, attr, buf, size_bytes) : NOT_LOADED;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref) {
    return lt_ready() ? g_lt.pref_create(pref) : NOT_LOADED;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
    return lt_ready() ? g_lt.pref_destroy(pref) : NOT_LOADED;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                                 cublasLtMatmulPreferenceAttributes_t attr,
                                                                 const void *buf, size_t size_bytes) {
    return lt_ready() ? g_lt.pref_set_attribute(pref, attr, buf, size_bytes) : NOT_LOADED;
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *layout, cudaDataType type,
                                                       uint64_t rows, uint64_t cols, int64_t ld) {
    return lt_ready() ? g_lt.layout_create(layout, type, rows, cols, ld) : NOT_LOADED;
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
    return lt_ready() ? g_lt.layout_destroy(layout) : NOT_LOADED;
}
