/* cpu_ops.h: the CPU backend's node adapters, one fwd/bwd pair per line of ops.def.
 * An adapter unpacks a tape node and calls the op's typed kernel (kernels/cpu/<op>.c), which
 * tests and benchmarks may also call directly. */
#pragma once
#include "../../autograd/tensor.h"

#define MT_OP(E, name)                                                                             \
    void cpu_##name##_fwd_node(const mt_node *n);                                                  \
    void cpu_##name##_bwd_node(const mt_node *n);
#include "../../autograd/ops.def"
#undef MT_OP

/* the sharded optimizer's vector kernels (kernels/cpu/optim.c), see mt_backend */
void cpu_vec_add(float *dst, const float *src, int64_t n);
void cpu_vec_stats(const float *x, int64_t n, double *sumsq, int64_t *nonfinite);
void cpu_adamw(float *p, float *m, float *v, const float *g, int64_t n, const mt_adamw_args *a);
void cpu_vec_to_bf16(uint16_t *dst, const float *src, int64_t n);
void cpu_vec_from_bf16(float *dst, const uint16_t *src, int64_t n);

/* y (N,M) = x (N,K) w^T, w (M,K), for up to MT_GEMM_ROWS_MAX rows of inference (gemm_rows.c):
 * each element one fixed-order dot product, so a row's result does not depend on N. */
#define MT_GEMM_ROWS_MAX 32
void cpu_gemm_rows(float *y, const float *x, const float *w, int64_t N, int64_t M, int64_t K);

/* C (M,N) = alpha A B (+ C where add) for small tile products (gemm_small.c): A read as
 * A[i sa + k sk] (row-major: sa = lda, sk = 1; its transpose: sa = 1, sk = lda), B (K,N) and C
 * row-major, N a multiple of 8; each output one fp32 sum in k order. */
void cpu_gemm_small(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t sa,
                    int64_t sk, const float *B, int64_t ldb, bool add, float *C, int64_t ldc);
/* dst (cols,rows) = src (rows,cols)^T, leading dimensions ldd and lds */
void cpu_transpose(float *dst, int64_t ldd, const float *src, int64_t lds, int64_t rows,
                   int64_t cols);
