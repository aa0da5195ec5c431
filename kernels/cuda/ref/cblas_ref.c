/* cblas_ref.c: a plain sgemm (double accumulation, one OpenMP thread per row of C) behind the
 * CBLAS signature in cblas.h, for launch/gpu-check.sh's standalone build only (see cblas.h).
 * Slow but exact enough to serve as the CPU reference for the small GPU test shapes. */
#include "cblas.h"

#include <stdint.h>

void cblas_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE trans_a, enum CBLAS_TRANSPOSE trans_b,
                 int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
                 float beta, float *C, int ldc) {
    if (order == CblasColMajor) { /* column-major C is row-major C^T = op(B)^T op(A)^T */
        cblas_sgemm(CblasRowMajor, trans_b, trans_a, N, M, K, alpha, B, ldb, A, lda, beta, C, ldc);
        return;
    }
    const int ta = trans_a != CblasNoTrans, tb = trans_b != CblasNoTrans;
#pragma omp parallel for schedule(static)
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            double acc = 0.0;
            for (int k = 0; k < K; k++) {
                float a = ta ? A[(int64_t)k * lda + i] : A[(int64_t)i * lda + k];
                float b = tb ? B[(int64_t)j * ldb + k] : B[(int64_t)k * ldb + j];
                acc += (double)a * b;
            }
            float *c = &C[(int64_t)i * ldc + j];
            *c = beta == 0.0f ? (float)(alpha * acc) : (float)(alpha * acc + (double)beta * *c);
        }
    }
}
