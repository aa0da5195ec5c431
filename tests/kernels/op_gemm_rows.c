/* op_gemm_rows.c: the inference GEMM of a few rows (kernels/cpu/gemm_rows.c).
 * op_gemm_rows: against an fp64 product (fp32 sums: 1e-5 relative to the row's magnitude) for
 * K below, at and past one and two vectors (8 and 16 floats on AVX2, 16 and 32 with AVX-512), N
 * from 1 to MT_GEMM_ROWS_MAX, M = 301 (the last 5 columns outside the 8-column tiles); and a row's
 * bits are the same computed alone (the column-by-column order), among N rows (the k-step order
 * past 4 rows, tiles of 1 to 4 rows) and on 1 or 2 threads: what lets a decode step's rows be their
 * one-prompt runs. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_ops.h"
#include "tests/support/harness.h"

static int test_op_gemm_rows(void) {
    const int64_t Ks[] = {1, 7, 8, 9, 16, 17, 24, 31, 32, 48, 63, 256, 300};
    const int64_t Ns[] = {1, 2, 3, 4, 5, 9, MT_GEMM_ROWS_MAX};
    const int64_t M = 301;
    mt_rng rng;
    mt_rng_seed(&rng, 3);
    double worst = 0;
    for (size_t a = 0; a < sizeof(Ks) / sizeof(Ks[0]); a++)
        for (size_t b = 0; b < sizeof(Ns) / sizeof(Ns[0]); b++) {
            const int64_t K = Ks[a], N = Ns[b];
            float *x = malloc(sizeof(float) * (size_t)(N * K)),
                  *w = malloc(sizeof(float) * (size_t)(M * K)),
                  *y = malloc(sizeof(float) * (size_t)(N * M)),
                  *y1 = malloc(sizeof(float) * (size_t)M);
            mt_fill_normal(x, N * K, 1.0f, &rng);
            mt_fill_normal(w, M * K, 1.0f, &rng);
            cpu_gemm_rows(y, x, w, N, M, K);
            for (int64_t n = 0; n < N; n++) {
                for (int64_t j = 0; j < M; j++) {
                    double ref = 0, mag = 0;
                    for (int64_t k = 0; k < K; k++) {
                        ref += (double)x[n * K + k] * w[j * K + k];
                        mag += fabs((double)x[n * K + k] * w[j * K + k]);
                    }
                    const double err = fabs(y[n * M + j] - ref) / (mag > 0 ? mag : 1);
                    worst = fmax(worst, err);
                    EXPECT(err <= 1e-5, "N %lld K %lld: y[%lld][%lld] = %.9g, fp64 %.9g",
                           (long long)N, (long long)K, (long long)n, (long long)j,
                           (double)y[n * M + j], ref);
                }
                /* the row alone, on one thread and on two */
                for (int threads = 1; threads <= 2; threads++) {
                    omp_set_num_threads(threads);
                    cpu_gemm_rows(y1, x + n * K, w, 1, M, K);
                    EXPECT(!memcmp(y1, y + n * M, sizeof(float) * (size_t)M),
                           "N %lld K %lld: row %lld alone (%d threads) differs from the batch",
                           (long long)N, (long long)K, (long long)n, threads);
                }
            }
            free(x);
            free(w);
            free(y);
            free(y1);
        }
    printf("cpu_gemm_rows: %zu K x %zu N, max error %.2g of the products' magnitude; every row "
           "alone equals its batch's bits on 1 and 2 threads\n",
           sizeof(Ks) / sizeof(Ks[0]), sizeof(Ns) / sizeof(Ns[0]), worst);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {{"op_gemm_rows", test_op_gemm_rows}};
MT_TEST_MAIN(cases)
