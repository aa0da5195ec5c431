/* cblas.h: the one CBLAS routine the CPU kernels call (cblas_sgemm), with the standard CBLAS
 * enum values and signature. Used ONLY by launch/gpu-check.sh's standalone build on a GPU
 * machine that has no OpenBLAS (the CPU reference backend still needs a GEMM there); the
 * regular build never sees this directory and links OpenBLAS. */
#pragma once

typedef enum CBLAS_ORDER { CblasRowMajor = 101, CblasColMajor = 102 } CBLAS_ORDER;
typedef enum CBLAS_TRANSPOSE {
    CblasNoTrans = 111,
    CblasTrans = 112,
    CblasConjTrans = 113
} CBLAS_TRANSPOSE;

/* C = alpha op(A) op(B) + beta C, op(A) (M,K), op(B) (K,N); C is not read when beta = 0. */
void cblas_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE trans_a, enum CBLAS_TRANSPOSE trans_b,
                 int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
                 float beta, float *C, int ldc);
