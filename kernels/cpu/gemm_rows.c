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
 * odd chunks: two dependency chains), each product added in one rounding (FMA where the target
 * has it: this file is compiled with -ffp-contract=fast, CMakeLists.txt), the sums added, the
 * tail's products added lane by lane from lane 0, then the lanes summed pairwise (8 + 8,
 * 4 + 4, 2 + 2, 1 + 1), by shuffles that reduce 8 sums at once, lane for lane the same
 * additions. From 4 rows on, blocks of 4 rows x 2 columns share each load of x and of w (the
 * loads, not the arithmetic, bound these products when w is in cache); fewer rows go one
 * column at a time, reading w row after row (with w streamed from memory, interleaving more
 * rows of w halved the bandwidth). A row's arithmetic is the same in any block. */
#include <string.h>

#include "cpu_ops.h"

typedef float gemm_v16 __attribute__((vector_size(64)));
typedef float gemm_v8 __attribute__((vector_size(32)));

/* A 16-float chunk at p as a vector: a macro, not a function, so that no vector crosses a call
 * by value (whose ABI would depend on the instruction set: -Wpsabi). */
#define GEMM_LOAD(dst, p) memcpy(&(dst), (p), sizeof(gemm_v16))

/* The tail's products a[k] b[k] (k = K16..K-1) added to the lanes of *s from lane 0. */
static inline void gemm_tail(gemm_v16 *s, const float *a, const float *b, int64_t K16, int64_t K) {
    if (K16 == K) return;
    float l[16];
    memcpy(l, s, sizeof(l));
    for (int64_t k = K16; k < K; k++) l[k - K16] += a[k] * b[k];
    memcpy(s, l, sizeof(l));
}

/* out[e] = the pairwise sum of the 16 lanes of s[e], e < 8: lane l + lane l + 8 (l < 8), then
 * l + l + 4, l + l + 2, l + l + 1, each step one add of two shuffled vectors for 2, 4, 8
 * sums at once. */
static inline void gemm_reduce8(float *out, const gemm_v16 *s) {
    gemm_v16 p[4], q[2];
    for (int i = 0; i < 4; i++) /* p[i] = [s[2i] 8 lanes | s[2i+1] 8 lanes] */
        p[i] = __builtin_shufflevector(s[2 * i], s[2 * i + 1], 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18,
                                       19, 20, 21, 22, 23) +
               __builtin_shufflevector(s[2 * i], s[2 * i + 1], 8, 9, 10, 11, 12, 13, 14, 15, 24, 25,
                                       26, 27, 28, 29, 30, 31);
    for (int i = 0; i < 2; i++) /* q[i] = 4 lanes of each of s[4i .. 4i+3] */
        q[i] = __builtin_shufflevector(p[2 * i], p[2 * i + 1], 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18,
                                       19, 24, 25, 26, 27) +
               __builtin_shufflevector(p[2 * i], p[2 * i + 1], 4, 5, 6, 7, 12, 13, 14, 15, 20, 21,
                                       22, 23, 28, 29, 30, 31);
    const gemm_v16 r = /* 2 lanes of each of the 8 */
        __builtin_shufflevector(q[0], q[1], 0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28,
                                29) +
        __builtin_shufflevector(q[0], q[1], 2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23, 26, 27, 30,
                                31);
    const gemm_v8 f = __builtin_shufflevector(r, r, 0, 2, 4, 6, 8, 10, 12, 14) +
                      __builtin_shufflevector(r, r, 1, 3, 5, 7, 9, 11, 13, 15);
    memcpy(out, &f, sizeof(f));
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
    gemm_v16 s[8] = {0};
    for (int r = 0; r < R; r++) {
        s[r] = even[r] + odd[r];
        gemm_tail(&s[r], x + (n0 + r) * K, wj, K16, K);
    }
    float out[8];
    gemm_reduce8(out, s);
    for (int r = 0; r < R; r++) y[(n0 + r) * M + j] = out[r];
}

/* One row's step of gemm_rows_4x2: chunks k and k + 16 of row xr against both columns. */
#define GEMM_ROW_STEP(xr, ea, eb, oa, ob)                                                          \
    do {                                                                                           \
        gemm_v16 u0, u1;                                                                           \
        GEMM_LOAD(u0, (xr) + k);                                                                   \
        GEMM_LOAD(u1, (xr) + k + 16);                                                              \
        ea += u0 * wa0;                                                                            \
        eb += u0 * wb0;                                                                            \
        oa += u1 * wa1;                                                                            \
        ob += u1 * wb1;                                                                            \
    } while (0)

/* Rows n0 .. n0 + 3 of columns j and j + 1: each load of x serves both columns, each load of w
 * four rows (16 running sums, written out so that they stay in registers). */
static inline void gemm_rows_4x2(float *y, const float *x, const float *w, int64_t n0, int64_t M,
                                 int64_t j, int64_t K) {
    const int64_t K16 = K / 16 * 16;
    const float *wa = w + j * K, *wb = wa + K, *x0 = x + n0 * K, *x1 = x0 + K, *x2 = x1 + K,
                *x3 = x2 + K;
    gemm_v16 ea0 = {0}, ea1 = {0}, ea2 = {0}, ea3 = {0}, eb0 = {0}, eb1 = {0}, eb2 = {0}, eb3 = {0},
             oa0 = {0}, oa1 = {0}, oa2 = {0}, oa3 = {0}, ob0 = {0}, ob1 = {0}, ob2 = {0}, ob3 = {0};
    int64_t k = 0;
    for (; k + 32 <= K16; k += 32) {
        gemm_v16 wa0, wa1, wb0, wb1;
        GEMM_LOAD(wa0, wa + k);
        GEMM_LOAD(wa1, wa + k + 16);
        GEMM_LOAD(wb0, wb + k);
        GEMM_LOAD(wb1, wb + k + 16);
        GEMM_ROW_STEP(x0, ea0, eb0, oa0, ob0);
        GEMM_ROW_STEP(x1, ea1, eb1, oa1, ob1);
        GEMM_ROW_STEP(x2, ea2, eb2, oa2, ob2);
        GEMM_ROW_STEP(x3, ea3, eb3, oa3, ob3);
    }
    if (k < K16) { /* an odd number of chunks: the last one is even */
        gemm_v16 wa0, wb0, u;
        GEMM_LOAD(wa0, wa + k);
        GEMM_LOAD(wb0, wb + k);
        GEMM_LOAD(u, x0 + k);
        ea0 += u * wa0;
        eb0 += u * wb0;
        GEMM_LOAD(u, x1 + k);
        ea1 += u * wa0;
        eb1 += u * wb0;
        GEMM_LOAD(u, x2 + k);
        ea2 += u * wa0;
        eb2 += u * wb0;
        GEMM_LOAD(u, x3 + k);
        ea3 += u * wa0;
        eb3 += u * wb0;
    }
    gemm_v16 s[8] = {ea0 + oa0, eb0 + ob0, ea1 + oa1, eb1 + ob1,
                     ea2 + oa2, eb2 + ob2, ea3 + oa3, eb3 + ob3};
    for (int e = 0; e < 8; e++) gemm_tail(&s[e], x0 + (e / 2) * K, e % 2 ? wb : wa, K16, K);
    float out[8];
    gemm_reduce8(out, s);
    for (int e = 0; e < 8; e++) y[(n0 + e / 2) * M + j + e % 2] = out[e];
}
#undef GEMM_ROW_STEP

/* Column j of all N rows. */
static void gemm_rows_col(float *y, const float *x, const float *w, int64_t N, int64_t M, int64_t K,
                          int64_t j) {
    for (int64_t n0 = 0; n0 < N; n0 += 4)
        gemm_rows_group(y, x, w + j * K, n0, N - n0 < 4 ? (int)(N - n0) : 4, M, j, K);
}

/* Columns j and j + 1 (j + 2 <= M) of all N rows: 4 x 2 blocks, then the rows left one
 * column at a time. */
static void gemm_rows_cols2(float *y, const float *x, const float *w, int64_t N, int64_t M,
                            int64_t K, int64_t j) {
    int64_t n0 = 0;
    for (; n0 + 4 <= N; n0 += 4) gemm_rows_4x2(y, x, w, n0, M, j, K);
    for (int c = 0; c < 2 && n0 < N; c++)
        gemm_rows_group(y, x, w + (j + c) * K, n0, (int)(N - n0), M, j + c, K);
}

void cpu_gemm_rows_span(float *y, const float *x, const float *w, int64_t N, int64_t M, int64_t K,
                        int64_t j0, int64_t j1) {
    int64_t j = j0;
    if (N >= 4)
        for (; j + 2 <= j1; j += 2) gemm_rows_cols2(y, x, w, N, M, K, j);
    for (; j < j1; j++) gemm_rows_col(y, x, w, N, M, K, j);
}

void cpu_gemm_rows(float *y, const float *x, const float *w, int64_t N, int64_t M, int64_t K) {
#pragma omp parallel for schedule(static) if (M * K >= 65536)
    for (int64_t j = 0; j < M; j += MT_GEMM_ROWS_SPAN)
        cpu_gemm_rows_span(y, x, w, N, M, K, j,
                           j + MT_GEMM_ROWS_SPAN < M ? j + MT_GEMM_ROWS_SPAN : M);
}
