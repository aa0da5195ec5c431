/* wmma_tile.cuh: the warp-level tensor-core tile products that the flash attention
 * (attention_flash.cu) and the fused lightning (lightning_fused.cu) kernels share:
 * nvcuda::wmma m16n16k16, bf16 operands, fp32 accumulators (emu/mma.h in the emulator).
 * A warp owns 16 rows; a tile of the other operand lies in shared memory. */
#pragma once
#include <mma.h>

typedef nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, __nv_bfloat16,
                               nvcuda::wmma::row_major>
    wt_a_row;
typedef nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, __nv_bfloat16,
                               nvcuda::wmma::col_major>
    wt_a_col;
typedef nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, __nv_bfloat16,
                               nvcuda::wmma::row_major>
    wt_b_row;
typedef nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, __nv_bfloat16,
                               nvcuda::wmma::col_major>
    wt_b_col;
typedef nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> wt_acc;

/* s (16 x 16 NB fp32, row-major, ld lds) = A B^T for one warp, with A (16 x 16 ND) the warp's
 * rows as fragments a[ND], and B 16 NB rows of 16 ND bf16 at b (ld ldb), read column-major as
 * B^T. The caller synchronises the warp (__syncwarp) before reading s. */
template <int NB, int ND>
__device__ inline void wt_scores(float *s, int lds, const wt_a_row (&a)[ND], const __nv_bfloat16 *b,
                                 int ldb) {
    wt_acc acc[NB];
#pragma unroll
    for (int n = 0; n < NB; n++) nvcuda::wmma::fill_fragment(acc[n], 0.0f);
#pragma unroll
    for (int kk = 0; kk < ND; kk++)
#pragma unroll
        for (int n = 0; n < NB; n++) {
            wt_b_col bf;
            nvcuda::wmma::load_matrix_sync(bf, b + 16 * n * ldb + 16 * kk, ldb);
            nvcuda::wmma::mma_sync(acc[n], a[kk], bf, acc[n]);
        }
#pragma unroll
    for (int n = 0; n < NB; n++)
        nvcuda::wmma::store_matrix_sync(s + 16 * n, acc[n], lds, nvcuda::wmma::mem_row_major);
}

/* The same with A read from shared memory (16 rows of 16 ND at a, ld lda) one k-step at a time:
 * for kernels whose registers cannot hold A's fragments as well. */
template <int NB, int ND>
__device__ inline void wt_scores_mem(float *s, int lds, const __nv_bfloat16 *a, int lda,
                                     const __nv_bfloat16 *b, int ldb) {
    wt_acc acc[NB];
#pragma unroll
    for (int n = 0; n < NB; n++) nvcuda::wmma::fill_fragment(acc[n], 0.0f);
#pragma unroll
    for (int kk = 0; kk < ND; kk++) {
        wt_a_row af;
        nvcuda::wmma::load_matrix_sync(af, a + 16 * kk, lda);
#pragma unroll
        for (int n = 0; n < NB; n++) {
            wt_b_col bf;
            nvcuda::wmma::load_matrix_sync(bf, b + 16 * n * ldb + 16 * kk, ldb);
            nvcuda::wmma::mma_sync(acc[n], af, bf, acc[n]);
        }
    }
#pragma unroll
    for (int n = 0; n < NB; n++)
        nvcuda::wmma::store_matrix_sync(s + 16 * n, acc[n], lds, nvcuda::wmma::mem_row_major);
}

/* acc[ND] (16 x 16 ND) += P C for one warp: P (16 x 16 NB bf16, row-major at p, ld ldp), C 16 NB
 * rows of 16 ND bf16 at c (ld ldc). */
template <int NB, int ND>
__device__ inline void wt_accumulate(wt_acc (&acc)[ND], const __nv_bfloat16 *p, int ldp,
                                     const __nv_bfloat16 *c, int ldc) {
#pragma unroll
    for (int kk = 0; kk < NB; kk++) {
        wt_a_row pa;
        nvcuda::wmma::load_matrix_sync(pa, p + 16 * kk, ldp);
#pragma unroll
        for (int n = 0; n < ND; n++) {
            wt_b_row cf;
            nvcuda::wmma::load_matrix_sync(cf, c + 16 * kk * ldc + 16 * n, ldc);
            nvcuda::wmma::mma_sync(acc[n], pa, cf, acc[n]);
        }
    }
}
