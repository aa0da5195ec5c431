/* gemm_rows.c: y = x w^T for a few rows (generation's decode steps and short prompts), each
 * output element one fixed-order dot product of its row of x and its row of w.
 *
 * BLAS picks its kernels (and so its order of summation) by the matrix sizes, and a small-M
 * sgemm repacks all of w on every call. Here y[n][j] depends only on x[n], w[j] and K: a row
 * decoded among B others gets the bits it gets alone, whatever B and the thread count. Each
 * row of w is read once per call for all N rows (they stay in cache), which for N = 1 is all a
 * matrix-vector product can do. x (N,K), w (M,K) as nn.Linear stores it, y (N,M).
 *
 * The order of a dot product: 16-float chunks into two running 16-lane sums (even chunks,
 * odd chunks: two dependency chains), the sums added, the tail's products added lane by lane
 * from lane 0, then the lanes summed pairwise (8 + 8, 4 + 4, 2 + 2, 1 + 1). Rows go through in
 * groups of up to 4 sharing each load of w; a row's arithmetic is the same in any group. */
#include <string.h>

#include "cpu_ops.h"

typedef float gemm_v16 __attribute__((vector_size(64)));

/* A 16-float chunk at p as a vector: a macro, not a function, so that no vector crosses a call
 * (whose ABI would depend on the instruction set: -Wpsabi). */
#define GEMM_LOAD(dst, p) memcpy(&(dst), (p), sizeof(gemm_v16))

/* The lanes s (16), with the tail's products a[k] b[k] (k = K16..K-1) added from lane 0, summed
 * pairwise. */
static inline float gemm_finish(float *s, const float *a, const float *b, int64_t K16, int64_t K) {
    for (int64_t k = K16; k < K; k++) s[k - K16] += a[k] * b[k];
    for (int h = 8; h > 0; h /= 2)
        for (int l = 0; l < h; l++) s[l] += s[l + h];
    return s[0];
}

/* Rows n0 .. n0 + R - 1 (R <= 4) of y's column j. */
static inline void gemm_rows_group(float *y, const float *x, const float *wj, int64_t n0, int R,
                                   int64_t M, int64_t j, int64_t K) {
    const int64_t K16 = K / 16 * 16;
    gemm_v16 even[4] = {0}, odd[4] = {0};
    int64_t k = 0;
    for (; k + 32 <= K16; k += 32) {
        gemm_v16 w0, w1, x0, x1;
        GEMM_LOAD(w0, wj + k);
        GEMM_LOAD(w1, wj + k + 16);
        for (int r = 0; r < R; r++) {
            const float *xr = x + (n0 + r) * K;
            GEMM_LOAD(x0, xr + k);
            GEMM_LOAD(x1, xr + k + 16);
            even[r] += x0 * w0;
            odd[r] += x1 * w1;
        }
    }
    if (k < K16) { /* an odd number of chunks: the last one is even */
        gemm_v16 w0, x0;
        GEMM_LOAD(w0, wj + k);
        for (int r = 0; r < R; r++) {
            GEMM_LOAD(x0, x + (n0 + r) * K + k);
            even[r] += x0 * w0;
        }
    }
    for (int r = 0; r < R; r++) {
        const gemm_v16 sum = even[r] + odd[r];
        float lanes[16];
        memcpy(lanes, &sum, sizeof(lanes));
        y[(n0 + r) * M + j] = gemm_finish(lanes, x + (n0 + r) * K, wj, K16, K);
    }
}

void cpu_gemm_rows(float *y, const float *x, const float *w, int64_t N, int64_t M, int64_t K) {
#pragma omp parallel for schedule(static) if (M * K >= 65536)
    for (int64_t j = 0; j < M; j++)
        for (int64_t n0 = 0; n0 < N; n0 += 4)
            gemm_rows_group(y, x, w + j * K, n0, N - n0 < 4 ? (int)(N - n0) : 4, M, j, K);
}
