/* cblas_ref.c: a plain sgemm (double accumulation) behind the CBLAS signature in cblas.h, for
 * launch/gpu-check.sh's standalone build only (see cblas.h). Exact enough to serve as the CPU
 * reference of the GPU checks; each C element is its k-ordered double sum, as a textbook loop.
 * For speed (the mid-size step check's CPU reference is about 50 GFLOP): op(B) is packed, NB
 * columns at a time, into a row-major K x NB panel, and each row of C accumulates a panel's NB
 * columns in a double row (contiguous, vectorised), one OpenMP thread per row. */
#include "cblas.h"

#include <stdint.h>
#include <stdlib.h>

#define NB 256 /* columns of C per panel: the double row is 2 KiB */

void cblas_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE trans_a, enum CBLAS_TRANSPOSE trans_b,
                 int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
                 float beta, float *C, int ldc) {
    if (order == CblasColMajor) { /* column-major C is row-major C^T = op(B)^T op(A)^T */
        cblas_sgemm(CblasRowMajor, trans_b, trans_a, N, M, K, alpha, B, ldb, A, lda, beta, C, ldc);
        return;
    }
    if (M <= 0 || N <= 0) return;
    const int ta = trans_a != CblasNoTrans, tb = trans_b != CblasNoTrans;
    float *panel = malloc(sizeof(float) * (size_t)(K > 0 ? K : 1) * NB);
    if (!panel) abort();
    for (int j0 = 0; j0 < N; j0 += NB) {
        const int nb = N - j0 < NB ? N - j0 : NB;
#pragma omp parallel for schedule(static)
        for (int k = 0; k < K; k++)
            for (int j = 0; j < nb; j++)
                panel[(int64_t)k * nb + j] =
                    tb ? B[(int64_t)(j0 + j) * ldb + k] : B[(int64_t)k * ldb + j0 + j];
#pragma omp parallel for schedule(static)
        for (int i = 0; i < M; i++) {
            double acc[NB];
            for (int j = 0; j < nb; j++) acc[j] = 0.0;
            for (int k = 0; k < K; k++) {
                const double a = ta ? A[(int64_t)k * lda + i] : A[(int64_t)i * lda + k];
                const float *b = panel + (int64_t)k * nb;
#pragma omp simd
                for (int j = 0; j < nb; j++) acc[j] += a * (double)b[j];
            }
            float *c = C + (int64_t)i * ldc + j0;
            for (int j = 0; j < nb; j++)
                c[j] = beta == 0.0f ? (float)(alpha * acc[j])
                                    : (float)(alpha * acc[j] + (double)beta * c[j]);
        }
    }
    free(panel);
}
