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
/* C (m,n) = alpha op(A) op(B) + beta C, column-major; C not read when beta = 0. A and B both
 * CUDA_R_32F or both CUDA_R_16BF (products exact in double, summed in double); C CUDA_R_32F;
 * CUBLAS_COMPUTE_32F. Anything else is CUBLAS_STATUS_NOT_SUPPORTED. */
cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                            int n, int k, const void *alpha, const void *A, cudaDataType at,
                            int lda, const void *B, cudaDataType bt, int ldb, const void *beta,
                            void *C, cudaDataType ct, int ldc, cublasComputeType_t compute,
                            cublasGemmAlgo_t algo);
/* C (m,n) = alpha op(A) + beta op(B), column-major. */
cublasStatus_t cublasSgeam(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                           int n, const float *alpha, const float *A, int lda, const float *beta,
                           const float *B, int ldb, float *C, int ldc);
