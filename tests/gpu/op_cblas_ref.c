/* op_cblas_ref.c: tests/cuda_ref/cblas_ref.c (launch/gpu-check.sh's sgemm where a GPU image
 * has no OpenBLAS) against the textbook loop, C[i][j] = alpha sum_k op(A)[i][k] op(B)[k][j]
 * (+ beta C) in double in k order, which its panels must reproduce bit for bit: both orders,
 * all four transposes, beta 0 (C not read: NaN there stays unread) and not, padded leading
 * dimensions, K = 0 and shapes across the 256-column panel edge. Built with
 * -Dcblas_sgemm=ref_sgemm (tests/gpu/gpu_check.cmake), apart from OpenBLAS. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cblas.h"

static float at(const float *X, int ld, int t, int r, int c) { /* op(X)[r][c], row-major */
    return t ? X[(int64_t)c * ld + r] : X[(int64_t)r * ld + c];
}

int main(void) {
    const int shapes[][3] = {{1, 1, 1}, {37, 300, 5}, {64, 513, 130}, {3, 1000, 0}, {129, 257, 77}};
    uint64_t s = 12345;
    int bad = 0, runs = 0;
    for (int sh = 0; sh < 5; sh++)
        for (int col = 0; col < 2; col++)
            for (int ta = 0; ta < 2; ta++)
                for (int tb = 0; tb < 2; tb++)
                    for (int be = 0; be < 2; be++) {
                        const int M = shapes[sh][0], N = shapes[sh][1], K = shapes[sh][2];
                        /* row-major storage of op(A) (M,K), op(B) (K,N), C (M,N); a column-major
                         * call gets the same matrices as their transposes */
                        const int lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 2, ldc = N + 1;
                        const size_t na = (size_t)lda * (ta ? K : M) + 1,
                                     nb = (size_t)ldb * (tb ? N : K) + 1, nc = (size_t)ldc * M;
                        float *A = malloc(4 * na), *B = malloc(4 * nb), *C = malloc(4 * nc),
                              *R = malloc(4 * nc);
                        for (size_t i = 0; i < na; i++)
                            A[i] =
                                (float)((s = s * 6364136223846793005ull + 1) >> 40) / 8388608.0f -
                                1;
                        for (size_t i = 0; i < nb; i++)
                            B[i] =
                                (float)((s = s * 6364136223846793005ull + 1) >> 40) / 8388608.0f -
                                1;
                        for (size_t i = 0; i < nc; i++) C[i] = be ? (float)i / (float)nc : NAN;
                        memcpy(R, C, 4 * nc);
                        const float alpha = 1.3f, beta = be ? 0.7f : 0.0f;
                        for (int i = 0; i < M; i++)
                            for (int j = 0; j < N; j++) {
                                double acc = 0;
                                for (int k = 0; k < K; k++)
                                    acc += (double)at(A, lda, ta, i, k) * at(B, ldb, tb, k, j);
                                float *r = &R[(int64_t)i * ldc + j];
                                *r = be ? (float)(alpha * acc + (double)beta * *r)
                                        : (float)(alpha * acc);
                            }
                        const enum CBLAS_TRANSPOSE tA = ta ? CblasTrans : CblasNoTrans,
                                                   tB = tb ? CblasTrans : CblasNoTrans;
                        if (col) /* C^T = op(B)^T op(A)^T in column-major terms */
                            cblas_sgemm(CblasColMajor, tB, tA, N, M, K, alpha, B, ldb, A, lda, beta,
                                        C, ldc);
                        else
                            cblas_sgemm(CblasRowMajor, tA, tB, M, N, K, alpha, A, lda, B, ldb, beta,
                                        C, ldc);
                        int64_t diff = 0;
                        for (int i = 0; i < M; i++)
                            diff += memcmp(&C[(int64_t)i * ldc], &R[(int64_t)i * ldc],
                                           4 * (size_t)N) != 0;
                        if (diff) {
                            printf("FAIL M=%d N=%d K=%d %s ta=%d tb=%d beta=%g: %lld rows differ\n",
                                   M, N, K, col ? "col-major" : "row-major", ta, tb, beta,
                                   (long long)diff);
                            bad++;
                        }
                        runs++;
                        free(A), free(B), free(C), free(R);
                    }
    printf("%d of %d sgemm calls bit-identical to the textbook loop\n", runs - bad, runs);
    return bad != 0;
}
