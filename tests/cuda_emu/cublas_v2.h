/* cublas_v2.h (emulator): the cuBLAS subset kernels/cuda uses, on the CPU, with cuBLAS's
 * column-major semantics and argument checks (leading dimensions, sizes), so the row-major
 * mapping in cuda_sgemm_rm is exercised exactly as cuBLAS would take it. See cuda_runtime.h. */
#pragma once
#include "cuda_runtime.h"

typedef struct emu_blas *cublasHandle_t;
typedef enum {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_NOT_INITIALIZED = 1,
    CUBLAS_STATUS_INVALID_VALUE = 7,
    CUBLAS_STATUS_NOT_SUPPORTED = 15
} cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 } cublasOperation_t;
typedef enum { CUDA_R_32F = 0, CUDA_R_16BF = 14 } cudaDataType;
typedef enum { CUBLAS_COMPUTE_32F = 68 } cublasComputeType_t;
typedef enum { CUBLAS_GEMM_DEFAULT = -1 } cublasGemmAlgo_t;
typedef enum { CUBLAS_DEFAULT_MATH = 0, CUBLAS_PEDANTIC_MATH = 2 } cublasMath_t;

const char *cublasGetStatusString(cublasStatus_t s);
cublasStatus_t cublasCreate(cublasHandle_t *h);
cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t mode);
/* The stream the handle's later calls run on (0: the default stream). On a created stream the
 * GEMMs are queued there (emu_blas.cpp says when they run). */
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s);
/* C (m,n) = alpha op(A) op(B) + beta C, column-major; C not read when beta = 0. A and B both
 * CUDA_R_32F or both CUDA_R_16BF (products exact in double, summed in double); C CUDA_R_32F;
 * CUBLAS_COMPUTE_32F. Anything else is CUBLAS_STATUS_NOT_SUPPORTED. */
cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                            int n, int k, const void *alpha, const void *A, cudaDataType at,
                            int lda, const void *B, cudaDataType bt, int ldb, const void *beta,
                            void *C, cudaDataType ct, int ldc, cublasComputeType_t compute,
                            cublasGemmAlgo_t algo);
/* cublasGemmEx over batch i = 0 .. batch-1 with A + i strideA, B + i strideB, C + i strideC
 * (strides in elements of each matrix's type); the same types, checks and semantics. */
cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
    const void *alpha, const void *A, cudaDataType at, int lda, long long strideA, const void *B,
    cudaDataType bt, int ldb, long long strideB, const void *beta, void *C, cudaDataType ct,
    int ldc, long long strideC, int batch, cublasComputeType_t compute, cublasGemmAlgo_t algo);
/* C (m,n) = alpha op(A) + beta op(B), column-major. */
cublasStatus_t cublasSgeam(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                           int n, const float *alpha, const float *A, int lda, const float *beta,
                           const float *B, int ldb, float *C, int ldc);
/* Grouped GEMM: group g (g < group_count) has group_size[g] problems sharing ta, tb, m, n, k,
 * the leading dimensions and alpha[g], beta[g] (fp32 host arrays, host pointer mode), each
 * C_p = alpha op(A_p) op(B_p) + beta C_p column-major as cublasGemmEx; the problems' pointers
 * are in the DEVICE arrays Aarray, Barray, Carray (problems of group 0 first). Types as cuBLAS
 * documents them: A, B, C all CUDA_R_32F or all CUDA_R_16BF, CUBLAS_COMPUTE_32F; anything else
 * (bf16 A/B with an fp32 C included) is CUBLAS_STATUS_NOT_SUPPORTED. See emu.cpp. */
cublasStatus_t cublasGemmGroupedBatchedEx(
    cublasHandle_t h, const cublasOperation_t ta[], const cublasOperation_t tb[], const int m[],
    const int n[], const int k[], const void *alpha, const void *const Aarray[], cudaDataType at,
    const int lda[], const void *const Barray[], cudaDataType bt, const int ldb[], const void *beta,
    void *const Carray[], cudaDataType ct, const int ldc[], int group_count, const int group_size[],
    cublasComputeType_t compute);
