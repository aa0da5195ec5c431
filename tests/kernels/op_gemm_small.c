/* op_gemm_small.c: the tile products in registers (kernels/cpu/gemm_small.c).
 * op_gemm_small: C = alpha A B (+ C) against an fp64 product (fp32 sums: 1e-5 relative to the
 * products' magnitude) for M across the 6-row tiles and their remainders (1 .. 13, 64, 85), N one
 * and two vectors and past them (8 .. 72), K from 1 to 300, A row-major and transposed (strided
 * reads), with and without the add, inside larger leading dimensions whose padding must stay
 * untouched; a row's bits do not depend on M (each output one sum in k order); and
 * cpu_transpose against its definition. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_ops.h"
#include "tests/support/harness.h"

/* C (M,N) of ldc against alpha A B + (add ? C0 : 0) in fp64; the padding columns equal C0's. */
static double gemm_small_check(int64_t M, int64_t N, int64_t K, bool ta, bool add) {
    const int64_t lda = (ta ? M : K) + 3, ldb = N + 5, ldc = N + 7;
    const int64_t rows_a = ta ? K : M;
    const float alpha = 0.75f;
    mt_rng rng;
    mt_rng_seed(&rng, (uint64_t)(M * 1000003 + N * 1009 + K * 2 + ta * 7 + add));
    float *A = malloc(sizeof(float) * (size_t)(rows_a * lda)),
          *B = malloc(sizeof(float) * (size_t)(K * ldb + 1)),
          *C = malloc(sizeof(float) * (size_t)(M * ldc)),
          *C0 = malloc(sizeof(float) * (size_t)(M * ldc)),
          *C1 = malloc(sizeof(float) * (size_t)(ldc));
    mt_fill_normal(A, rows_a * lda, 1.0f, &rng);
    mt_fill_normal(B, K * ldb + 1, 1.0f, &rng);
    mt_fill_normal(C0, M * ldc, 1.0f, &rng);
    memcpy(C, C0, sizeof(float) * (size_t)(M * ldc));
    const int64_t sa = ta ? 1 : lda, sk = ta ? lda : 1;
    cpu_gemm_small(M, N, K, alpha, A, sa, sk, B, ldb, add, C, ldc);
    double worst = 0;
    for (int64_t i = 0; i < M; i++) {
        for (int64_t j = 0; j < N; j++) {
            double ref = 0, mag = 0;
            for (int64_t k = 0; k < K; k++) {
                const double p = (double)A[i * sa + k * sk] * B[k * ldb + j];
                ref += p;
                mag += fabs(p);
            }
            ref *= alpha;
            mag *= alpha;
            if (add) {
                ref += C0[i * ldc + j];
                mag += fabs((double)C0[i * ldc + j]);
            }
            const double err = fabs(C[i * ldc + j] - ref) / (mag > 0 ? mag : 1);
            worst = fmax(worst, err);
            EXPECT(err <= 1e-5,
                   "M %lld N %lld K %lld ta %d add %d: C[%lld][%lld] = %.9g, fp64 %.9g",
                   (long long)M, (long long)N, (long long)K, ta, add, (long long)i, (long long)j,
                   (double)C[i * ldc + j], ref);
        }
        for (int64_t j = N; j < ldc; j++)
            EXPECT(C[i * ldc + j] == C0[i * ldc + j], "M %lld N %lld K %lld: padding C[%lld][%lld]",
                   (long long)M, (long long)N, (long long)K, (long long)i, (long long)j);
    }
    /* the last row alone: the bits of its run among M rows (only the tile's row count differs) */
    memcpy(C1, C0 + (M - 1) * ldc, sizeof(float) * (size_t)ldc);
    cpu_gemm_small(1, N, K, alpha, A + (M - 1) * sa, sa, sk, B, ldb, add, C1, ldc);
    EXPECT(!memcmp(C1, C + (M - 1) * ldc, sizeof(float) * (size_t)N),
           "M %lld N %lld K %lld ta %d add %d: the last row alone differs", (long long)M,
           (long long)N, (long long)K, ta, add);
    free(A);
    free(B);
    free(C);
    free(C0);
    free(C1);
    return worst;
}

static int test_op_gemm_small(void) {
    const int64_t Ms[] = {1, 2, 3, 4, 5, 6, 7, 11, 12, 13, 64, 85};
    const int64_t Ns[] = {8, 16, 24, 32, 64, 72};
    const int64_t Ks[] = {1, 2, 7, 32, 64, 300};
    double worst = 0;
    int cases = 0;
    for (size_t a = 0; a < sizeof(Ms) / sizeof(Ms[0]); a++)
        for (size_t b = 0; b < sizeof(Ns) / sizeof(Ns[0]); b++)
            for (size_t c = 0; c < sizeof(Ks) / sizeof(Ks[0]); c++)
                for (int v = 0; v < 4; v++, cases++)
                    worst = fmax(worst, gemm_small_check(Ms[a], Ns[b], Ks[c], v & 1, v & 2));
    /* cpu_transpose: dst (cols, rows) of ldd from src (rows, cols) of lds */
    const int64_t rows = 13, cols = 9, lds = 11, ldd = 16;
    float src[13 * 11], dst[9 * 16];
    for (int i = 0; i < rows * lds; i++) src[i] = (float)i;
    for (int i = 0; i < cols * ldd; i++) dst[i] = -1.0f;
    cpu_transpose(dst, ldd, src, lds, rows, cols);
    for (int64_t c = 0; c < cols; c++)
        for (int64_t r = 0; r < ldd; r++)
            EXPECT(dst[c * ldd + r] == (r < rows ? src[r * lds + c] : -1.0f),
                   "transpose: dst[%lld][%lld] = %g", (long long)c, (long long)r,
                   (double)dst[c * ldd + r]);
    printf("cpu_gemm_small: %d cases, max error %.2g of the products' magnitude; last rows alone "
           "bit-equal; cpu_transpose exact\n",
           cases, worst);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {{"op_gemm_small", test_op_gemm_small}};
MT_TEST_MAIN(cases)
