/* gemm_rows.c: y = x w^T for a few rows (generation's decode steps and short prompts), each
 * output element one fixed-order dot product of its row of x and its row of w.
 *
 * BLAS picks its kernels (and so its order of summation) by the matrix sizes, and a small-M
 * sgemm repacks all of w on every call. Here y[n][j] depends only on x[n], w[j] and K: a row
 * decoded among B others gets the bits it gets alone, whatever B and the thread count. Each
 * row of w is read once per call for all N rows (they stay in cache), which for N = 1 is all a
 * matrix-vector product can do. x (N,K), w (M,K) as nn.Linear stores it, y (N,M).
 *
 * The order of a dot product: L-float chunks into two running L-lane sums (even chunks, odd
 * chunks: two dependency chains), the sums added, the tail's products added lane by lane from
 * lane 0, then the lanes summed pairwise (8 + 8 (L = 16 only), 4 + 4, 2 + 2, 1 + 1). L is the
 * machine's vector: 16 with AVX-512, else 8 (AVX2: 16-float vectors there are two registers
 * each, a tile's 16 sums then need 32 of the 16 and spilled: the decode step was 3x slower). So the
 * bits differ between the two builds, never between a row's runs in one.
 *
 * A tile is up to 8 outputs of y (1 row by 8 columns, 2 by 4, 3 or 4 by 2; past 4 rows on AVX2
 * 2 by 2, whose sums and x chunks fit its 16 registers), their pairwise lane sums
 * run side by side in the vector lanes (shuffles, gemm_reduce8): one scalar lane sum per output
 * cost more than the output's whole dot product at K = 256. Up to 4 rows (memory-bound: w is
 * read once, from DRAM) a tile reads its columns of w one after the other, one stream the
 * hardware prefetcher follows; past 4 (compute-bound) it walks k once for all of them, each
 * chunk of x and w loaded once for the tile, the next tile's w prefetched. An output's
 * arithmetic is the same in any tile and either order: the bits of the one-column kernel this
 * replaced. On 2 threads against it: 1.8x at 8 rows from L3; from DRAM 1.2-1.5x at 1 to 8 rows
 * of a 512 x 256 expert matrix, and the same at 1 row of a 6144 x 256 lm_head. */
#include <string.h>

#include "cpu_ops.h"

#if defined(__AVX512F__)
#define GEMM_L 16
#else
#define GEMM_L 8
#endif
typedef float gemm_vec __attribute__((vector_size(4 * GEMM_L)));

/* An L-float chunk at p as a vector: an unaligned load of a type that may alias the floats (a
 * memcpy into an array of vectors was copied through the stack in halves on AVX2, and the loads
 * of the copy then waited on those stores: 40x slower at 8 rows). A macro, not a function, so
 * that no vector crosses a call (whose ABI would depend on the instruction set: -Wpsabi). */
typedef float gemm_vec_u __attribute__((vector_size(4 * GEMM_L), aligned(4), may_alias));
#define GEMM_LOAD(dst, p) ((dst) = *(const gemm_vec_u *)(const void *)(p))

/* Holds a loaded vector in a register: GCC otherwise treats it as the memory it came from and
 * reads that again at every product, and the loads then bound the loop (one core, 8 rows:
 * about 45 GFLOP/s without, 70 with). An empty asm changes no bits. */
#if defined(__GNUC__) && (defined(__AVX512F__) || defined(__AVX__)) /* L floats: one register */
#define GEMM_KEEP(v) __asm__("" : "+v"(v))
#else
#define GEMM_KEEP(v) ((void)0)
#endif

/* out[i] = the pairwise lane sum of s[i], i < 8: each halving step adds the upper half of two
 * outputs' lanes to their lower halves in one vector add. */
#if GEMM_L == 16
static inline void gemm_reduce8(const gemm_vec *s, float *out) {
    gemm_vec t[4], q[2];
    for (int i = 0; i < 4; i++) /* 8 + 8: t[i] = s[2i]'s 8 lanes, then s[2i+1]'s */
        t[i] = __builtin_shufflevector(s[2 * i], s[2 * i + 1], 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18,
                                       19, 20, 21, 22, 23) +
               __builtin_shufflevector(s[2 * i], s[2 * i + 1], 8, 9, 10, 11, 12, 13, 14, 15, 24, 25,
                                       26, 27, 28, 29, 30, 31);
    for (int i = 0; i < 2; i++) /* 4 + 4: q[i] holds outputs 4i, 4i+2, 4i+1, 4i+3, 4 lanes each */
        q[i] = __builtin_shufflevector(t[2 * i], t[2 * i + 1], 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10,
                                       11, 24, 25, 26, 27) +
               __builtin_shufflevector(t[2 * i], t[2 * i + 1], 4, 5, 6, 7, 20, 21, 22, 23, 12, 13,
                                       14, 15, 28, 29, 30, 31);
    /* 2 + 2: outputs 0, 4, 2, 6, 1, 5, 3, 7, 2 lanes each */
    const gemm_vec z = __builtin_shufflevector(q[0], q[1], 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25,
                                               12, 13, 28, 29) +
                       __builtin_shufflevector(q[0], q[1], 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26,
                                               27, 14, 15, 30, 31);
    /* 1 + 1 */
    const gemm_vec r =
        __builtin_shufflevector(z, z, 0, 2, 4, 6, 8, 10, 12, 14, 0, 2, 4, 6, 8, 10, 12, 14) +
        __builtin_shufflevector(z, z, 1, 3, 5, 7, 9, 11, 13, 15, 1, 3, 5, 7, 9, 11, 13, 15);
    float lanes[16];
    memcpy(lanes, &r, sizeof(lanes));
    static const int order[8] = {0, 4, 2, 6, 1, 5, 3, 7};
    for (int p = 0; p < 8; p++) out[order[p]] = lanes[p];
}
#else
static inline void gemm_reduce8(const gemm_vec *s, float *out) {
    gemm_vec t[4], q[2];
    for (int i = 0; i < 4; i++) /* 4 + 4: t[i] = s[2i]'s 4 lanes, then s[2i+1]'s */
        t[i] = __builtin_shufflevector(s[2 * i], s[2 * i + 1], 0, 1, 2, 3, 8, 9, 10, 11) +
               __builtin_shufflevector(s[2 * i], s[2 * i + 1], 4, 5, 6, 7, 12, 13, 14, 15);
    for (int i = 0; i < 2; i++) /* 2 + 2: q[i] holds outputs 4i, 4i+2, 4i+1, 4i+3, 2 lanes each */
        q[i] = __builtin_shufflevector(t[2 * i], t[2 * i + 1], 0, 1, 8, 9, 4, 5, 12, 13) +
               __builtin_shufflevector(t[2 * i], t[2 * i + 1], 2, 3, 10, 11, 6, 7, 14, 15);
    /* 1 + 1: outputs 0, 4, 2, 6, 1, 5, 3, 7 */
    const gemm_vec r = __builtin_shufflevector(q[0], q[1], 0, 8, 2, 10, 4, 12, 6, 14) +
                       __builtin_shufflevector(q[0], q[1], 1, 9, 3, 11, 5, 13, 7, 15);
    float lanes[8];
    memcpy(lanes, &r, sizeof(lanes));
    static const int order[8] = {0, 4, 2, 6, 1, 5, 3, 7};
    for (int p = 0; p < 8; p++) out[order[p]] = lanes[p];
}
#endif

/* Rows n0 .. n0 + R - 1 and columns j0 .. j0 + J - 1 of y (R J <= 8): up to 8 pairs of
 * running L-lane sums, in registers when inlined with literal R and J; by_column: the columns
 * one after the other, else each k-step for all of them (see the top of the file). */
static inline __attribute__((always_inline)) void
gemm_rows_tile(float *y, const float *x, const float *w, int64_t n0, const int R, int64_t j0,
               const int J, int64_t M, int64_t K, const bool by_column) {
    const int64_t KL = K / GEMM_L * GEMM_L; /* whole chunks */
    gemm_vec even[8] = {0}, odd[8] = {0};   /* [r J + c] */
    if (by_column) {
        for (int c = 0; c < J; c++) { /* one column after the other: w read as one stream */
            const float *wc = w + (j0 + c) * K;
            gemm_vec ev[4] = {0}, od[4] = {0}; /* this column's sums: registers (c varies) */
            int64_t k = 0;
            for (; k + 2 * GEMM_L <= KL; k += 2 * GEMM_L) {
                gemm_vec w0, w1, x0, x1;
                GEMM_LOAD(w0, wc + k);
                GEMM_LOAD(w1, wc + k + GEMM_L);
                GEMM_KEEP(w0);
                GEMM_KEEP(w1);
                for (int r = 0; r < R; r++) {
                    GEMM_LOAD(x0, x + (n0 + r) * K + k);
                    GEMM_LOAD(x1, x + (n0 + r) * K + k + GEMM_L);
                    ev[r] += x0 * w0;
                    od[r] += x1 * w1;
                }
            }
            if (k < KL) { /* an odd number of chunks: the last one is even */
                gemm_vec w0, x0;
                GEMM_LOAD(w0, wc + k);
                for (int r = 0; r < R; r++) {
                    GEMM_LOAD(x0, x + (n0 + r) * K + k);
                    ev[r] += x0 * w0;
                }
            }
            for (int r = 0; r < R; r++) {
                even[r * J + c] = ev[r];
                odd[r * J + c] = od[r];
            }
        }
    } else {
        const float *next = j0 + 2 * J <= M ? w + (j0 + J) * K : NULL;
        int64_t k = 0;
        for (; k + 2 * GEMM_L <= KL; k += 2 * GEMM_L) {
            gemm_vec x0[4], x1[4];
            for (int r = 0; r < R; r++) {
                GEMM_LOAD(x0[r], x + (n0 + r) * K + k);
                GEMM_LOAD(x1[r], x + (n0 + r) * K + k + GEMM_L);
                GEMM_KEEP(x0[r]);
                GEMM_KEEP(x1[r]);
            }
            for (int c = 0; c < J; c++) {
                gemm_vec w0, w1;
                if (next) { /* the next tile's rows, the same chunk: J rows read side by side are
                             * J short streams, too short for the hardware prefetcher to learn */
                    __builtin_prefetch(next + c * K + k);
                    __builtin_prefetch(next + c * K + k + GEMM_L);
                }
                GEMM_LOAD(w0, w + (j0 + c) * K + k);
                GEMM_LOAD(w1, w + (j0 + c) * K + k + GEMM_L);
                GEMM_KEEP(w0);
                GEMM_KEEP(w1);
                for (int r = 0; r < R; r++) {
                    even[r * J + c] += x0[r] * w0;
                    odd[r * J + c] += x1[r] * w1;
                }
            }
        }
        if (k < KL) { /* an odd number of chunks: the last one is even */
            for (int c = 0; c < J; c++) {
                gemm_vec w0, x0;
                GEMM_LOAD(w0, w + (j0 + c) * K + k);
                for (int r = 0; r < R; r++) {
                    GEMM_LOAD(x0, x + (n0 + r) * K + k);
                    even[r * J + c] += x0 * w0;
                }
            }
        }
    }
    gemm_vec sum[8];
    for (int i = 0; i < 8; i++) sum[i] = even[i] + odd[i];
    if (KL < K)
        for (int r = 0; r < R; r++)
            for (int c = 0; c < J; c++) {
                float lanes[GEMM_L]; /* the tail's products, lane by lane from lane 0 */
                memcpy(lanes, &sum[r * J + c], sizeof(lanes));
                const float *a = x + (n0 + r) * K, *b = w + (j0 + c) * K;
                for (int64_t t = KL; t < K; t++) lanes[t - KL] += a[t] * b[t];
                memcpy(&sum[r * J + c], lanes, sizeof(lanes));
            }
    float out[8];
    gemm_reduce8(sum, out);
    for (int r = 0; r < R; r++)
        for (int c = 0; c < J; c++) y[(n0 + r) * M + j0 + c] = out[r * J + c];
}

/* Columns j0 .. j0 + 7 of every row (fewer at the end of y: one at a time there); 8 outputs a
 * tile: 1 row by 8 columns, 2 by 4, 3 or 4 by 2. */
static inline __attribute__((always_inline)) void gemm_rows_block(float *y, const float *x,
                                                                  const float *w, int64_t N,
                                                                  int64_t j0, int64_t M, int64_t K,
                                                                  const bool by_column) {
    const int64_t cols = M - j0 < 8 ? M - j0 : 8;
#if GEMM_L == 8
    if (!by_column && cols == 8) { /* AVX2: a 4 x 2 tile's 16 sums and 8 x chunks would need 24 of
                                    * the 16 registers; 2 x 2 tiles (8 sums, 4 x, 2 w) fit */
        for (int64_t n0 = 0; n0 < N; n0 += 2)
            for (int64_t j = j0; j < j0 + 8; j += 2) {
                if (N - n0 >= 2)
                    gemm_rows_tile(y, x, w, n0, 2, j, 2, M, K, false);
                else
                    gemm_rows_tile(y, x, w, n0, 1, j, 2, M, K, false);
            }
        return;
    }
#endif
    for (int64_t n0 = 0; n0 < N; n0 += 4) {
        const int64_t R = N - n0 < 4 ? N - n0 : 4;
        if (cols < 8) {
            for (int64_t j = j0; j < j0 + cols; j++)
                gemm_rows_tile(y, x, w, n0, (int)R, j, 1, M, K, by_column);
            continue;
        }
        switch (R) {
        case 1:
            gemm_rows_tile(y, x, w, n0, 1, j0, 8, M, K, by_column);
            break;
        case 2:
            for (int64_t j = j0; j < j0 + 8; j += 4)
                gemm_rows_tile(y, x, w, n0, 2, j, 4, M, K, by_column);
            break;
        case 3:
            for (int64_t j = j0; j < j0 + 8; j += 2)
                gemm_rows_tile(y, x, w, n0, 3, j, 2, M, K, by_column);
            break;
        default:
            for (int64_t j = j0; j < j0 + 8; j += 2)
                gemm_rows_tile(y, x, w, n0, 4, j, 2, M, K, by_column);
            break;
        }
    }
}

void cpu_gemm_rows(float *y, const float *x, const float *w, int64_t N, int64_t M, int64_t K) {
    const int64_t blocks = (M + 7) / 8;
#pragma omp parallel for schedule(static) if (M * K >= 65536)
    for (int64_t b = 0; b < blocks; b++) {
        if (N <= 4)
            gemm_rows_block(y, x, w, N, 8 * b, M, K, true);
        else
            gemm_rows_block(y, x, w, N, 8 * b, M, K, false);
    }
}
