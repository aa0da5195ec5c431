/* gemm_small.c: C = alpha A B (+ C) for the small products inside attention's tiles (softmax
 * attention, MSA), where an sgemm call costs more than its arithmetic: OpenBLAS packs both
 * operands and pays its set-up on every call. At the training benchmark's shape (64 x 64 x 32
 * tiles) bench-attention's forward + backward went from 8.9 to 6.3-6.7 ms on the 2-core build
 * machine (docs/benchmarks.md, "Attention's tile products in registers"). At the experts' and
 * the lightning block form's shapes it was no faster than the sgemm, so they keep BLAS.
 *
 * The form: B (K,N) is read by rows of 8 floats (a vector), A element by element (a broadcast),
 * so A may be row-major (sa = lda, sk = 1) or a transpose (sa = 1, sk = lda) without a copy; B
 * must have its N direction contiguous, N a multiple of 8. A tile of 6 rows by 16 columns keeps
 * its 12 vector sums in registers across the whole k loop (6 broadcasts and 2 loads per 12
 * multiply-adds); the last rows (M mod 6, two at a time) and the last 8 columns run the same
 * loop with fewer. Each output is one running fp32 sum over k = 0 .. K-1 in order, the same for any
 * M, N and any thread, then scaled by alpha and added to C. */
#include "cpu_math.h"
#include "cpu_ops.h"

typedef float small_v8 __attribute__((vector_size(32)));
typedef float small_v8u __attribute__((vector_size(32), aligned(4), may_alias));
#define SMALL_LOAD(p) (*(const small_v8u *)(const void *)(p))

/* Holds a loaded vector in a register (see gemm_rows.c's GEMM_KEEP: without it GCC reloads B
 * at every product and the loads bound the loop). */
#if defined(__GNUC__) && defined(__AVX__)
#define SMALL_KEEP(v) __asm__("" : "+v"(v))
#else
#define SMALL_KEEP(v) ((void)0)
#endif

/* C's rows 0 .. nr-1, columns 0 .. 8 nv - 1 (nr <= 6, nv <= 2: literals after inlining). */
static inline __attribute__((always_inline)) void
gemm_small_tile(const int nr, const int nv, int64_t K, float alpha, const float *A, int64_t sa,
                int64_t sk, const float *B, int64_t ldb, bool add, float *C, int64_t ldc) {
    small_v8 c[6][2];
    for (int r = 0; r < 6; r++)
        for (int v = 0; v < 2; v++) c[r][v] = (small_v8){0};
    for (int64_t k = 0; k < K; k++) {
        small_v8 b0 = SMALL_LOAD(B + k * ldb), b1 = b0;
        SMALL_KEEP(b0);
        if (nv > 1) {
            b1 = SMALL_LOAD(B + k * ldb + 8);
            SMALL_KEEP(b1);
        }
        for (int r = 0; r < nr; r++) {
            const float x = A[r * sa + k * sk];
            const small_v8 a = {x, x, x, x, x, x, x, x}; /* a broadcast */
            CPU_FMA8(c[r][0], a, b0);
            if (nv > 1) CPU_FMA8(c[r][1], a, b1);
        }
    }
    for (int r = 0; r < nr; r++)
        for (int v = 0; v < nv; v++) {
            float *p = C + r * ldc + 8 * v;
            small_v8 o = alpha * c[r][v];
            if (add) o += SMALL_LOAD(p);
            *(small_v8u *)(void *)p = o;
        }
}

/* One column panel (8 nv columns) for all M rows: 6 at a time, then 2, then the last one. */
static inline __attribute__((always_inline)) void
gemm_small_panel(const int nv, int64_t M, int64_t K, float alpha, const float *A, int64_t sa,
                 int64_t sk, const float *B, int64_t ldb, bool add, float *C, int64_t ldc) {
    int64_t i = 0;
    for (; i + 6 <= M; i += 6)
        gemm_small_tile(6, nv, K, alpha, A + i * sa, sa, sk, B, ldb, add, C + i * ldc, ldc);
    for (; i + 2 <= M; i += 2)
        gemm_small_tile(2, nv, K, alpha, A + i * sa, sa, sk, B, ldb, add, C + i * ldc, ldc);
    if (i < M) gemm_small_tile(1, nv, K, alpha, A + i * sa, sa, sk, B, ldb, add, C + i * ldc, ldc);
}

void cpu_gemm_small(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t sa,
                    int64_t sk, const float *B, int64_t ldb, bool add, float *C, int64_t ldc) {
    MT_CHECK(N % 8 == 0, "gemm_small: N = %lld is not a multiple of 8", (long long)N);
    int64_t j = 0;
    for (; j + 16 <= N; j += 16)
        gemm_small_panel(2, M, K, alpha, A, sa, sk, B + j, ldb, add, C + j, ldc);
    if (j < N) gemm_small_panel(1, M, K, alpha, A, sa, sk, B + j, ldb, add, C + j, ldc);
}

void cpu_transpose(float *dst, int64_t ldd, const float *src, int64_t lds, int64_t rows,
                   int64_t cols) {
    for (int64_t c = 0; c < cols; c++) /* dst's rows in turn: contiguous stores */
        for (int64_t r = 0; r < rows; r++) dst[c * ldd + r] = src[r * lds + c];
}
