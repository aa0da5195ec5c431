/* matmul.c: y = x w^T through BLAS sgemm (row-major).
 * x (N,K) rows, w (M,K) as stored by nn.Linear, y (N,M).
 * bf16 mode (node ip[0] == MT_BF16, mt_ctx.compute_dtype): every GEMM operand (x, w, dy) is
 * rounded through bf16 into a scratch copy and the same sgemm runs on the copies, so products
 * are exact and sums fp32: the CPU reference of the CUDA bf16 tensor-core GEMM. */
#include <cblas.h>
#include <omp.h>
#include <string.h>

#include "bf16.h"
#include "cpu_ops.h"

void cpu_matmul_forward(float *y, const float *x, const float *w, int N, int M, int K) {
    if (N == 0 || M == 0) return;
    if (K == 0) { /* an empty sum; BLAS rejects lda = 0 */
        memset(y, 0, sizeof(float) * (size_t)N * (size_t)M);
        return;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, M, K, 1.0f, x, K, w, K, 0.0f, y, M);
}

static void matmul_dx(float *dx, const float *dy, const float *w, int N, int M, int K) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, K, M, 1.0f, dy, M, w, K, 1.0f, dx, K);
}
static void matmul_dw(float *dw, const float *dy, const float *x, int N, int M, int K) {
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, M, K, N, 1.0f, dy, M, x, K, 1.0f, dw, K);
}

/* dx (N,K) += dy w;  dw (M,K) += dy^T x. beta = 1 accumulates; NULL skips that gradient.
 * On exactly 2 threads the two products (the same FLOPs) run side by side, one a thread: BLAS
 * split over the two threads got 1.70-1.76x of one thread on the M2 bench model's projections.
 * Each product then has one-thread BLAS's bits, as at 2 ranks x 1 thread; two-thread BLAS
 * rounds some shapes differently (the M2 bench model's 30 losses moved by up to 2.5e-6). */
void cpu_matmul_backward(float *dx, float *dw, const float *dy, const float *x, const float *w,
                         int N, int M, int K) {
    if (N == 0 || M == 0 || K == 0) return;
    if (dx && dw && omp_get_max_threads() == 2 && !omp_in_parallel()) {
#pragma omp parallel num_threads(2)
        {
            if (omp_get_thread_num() == 0)
                matmul_dx(dx, dy, w, N, M, K);
            else
                matmul_dw(dw, dy, x, N, M, K);
        }
        return;
    }
    if (dx) matmul_dx(dx, dy, w, N, M, K);
    if (dw) matmul_dw(dw, dy, x, N, M, K);
}

static void matmul_dims(const mt_node *n, int *N, int *M, int *K) {
    const mt_tensor *x = n->in[0], *w = n->in[1];
    *K = (int)w->shape[1];
    *M = (int)w->shape[0];
    int64_t rows = 1; /* not numel / K: K may be 0 */
    for (int i = 0; i < x->ndim - 1; i++) rows *= x->shape[i];
    *N = (int)rows;
}

/* In bf16 mode, a scratch copy of src (n floats) rounded through bf16; else src itself. */
static const float *matmul_operand(const mt_node *n, const float *src, int64_t count,
                                   const char *what) {
    if (n->ip[0] != MT_BF16 || count == 0) return src;
    float *r = mt_node_scratch(n, sizeof(float) * (size_t)count, what);
    mt_bf16_round_n(r, src, count);
    return r;
}

void cpu_matmul_fwd_node(const mt_node *n) {
    int N, M, K;
    matmul_dims(n, &N, &M, &K);
    const float *x = matmul_operand(n, n->in[0]->data, (int64_t)N * K, "matmul x bf16");
    const float *w = matmul_operand(n, n->in[1]->data, (int64_t)M * K, "matmul w bf16");
    /* inference (operands without gradients: generation's weights) on a few rows: the decode
     * steps, whose rows must not depend on how many share the step (gemm_rows.c). Training
     * keeps BLAS in every pass, so a recomputed forward repeats the first one bit for bit. */
    if (N > 0 && N <= MT_GEMM_ROWS_MAX && K > 0 && !n->in[0]->grad && !n->in[1]->grad) {
        cpu_gemm_rows(n->out->data, x, w, N, M, K);
        return;
    }
    cpu_matmul_forward(n->out->data, x, w, N, M, K);
}

void cpu_matmul_bwd_node(const mt_node *n) {
    int N, M, K;
    matmul_dims(n, &N, &M, &K);
    const mt_tensor *x = n->in[0], *w = n->in[1];
    if (N == 0 || M == 0 || K == 0) return;
    /* only the operands a requested gradient multiplies: dx needs dy and w, dw needs dy and x */
    const float *dy = matmul_operand(n, n->out->grad, (int64_t)N * M, "matmul dy bf16");
    const float *xr = w->grad ? matmul_operand(n, x->data, (int64_t)N * K, "matmul x bf16") : NULL;
    const float *wr = x->grad ? matmul_operand(n, w->data, (int64_t)M * K, "matmul w bf16") : NULL;
    cpu_matmul_backward(x->grad, w->grad, dy, xr, wr, N, M, K);
}
