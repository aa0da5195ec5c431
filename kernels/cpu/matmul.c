/* matmul.c: y = x w^T through BLAS sgemm (row-major).
 * x (N,K) rows, w (M,K) as stored by nn.Linear, y (N,M). */
#include <cblas.h>
#include <string.h>

#include "cpu_ops.h"

void cpu_matmul_forward(float *y, const float *x, const float *w, int N, int M, int K) {
    if (N == 0 || M == 0) return;
    if (K == 0) { /* an empty sum; BLAS rejects lda = 0 */
        memset(y, 0, sizeof(float) * (size_t)N * (size_t)M);
        return;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, M, K, 1.0f, x, K, w, K, 0.0f, y, M);
}

/* dx (N,K) += dy w;  dw (M,K) += dy^T x. beta = 1 accumulates; NULL skips that gradient. */
void cpu_matmul_backward(float *dx, float *dw, const float *dy, const float *x, const float *w,
                         int N, int M, int K) {
    if (N == 0 || M == 0 || K == 0) return;
    if (dx)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, K, M, 1.0f, dy, M, w, K, 1.0f, dx,
                    K);
    if (dw)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, M, K, N, 1.0f, dy, M, x, K, 1.0f, dw,
                    K);
}

static void matmul_dims(const mt_node *n, int *N, int *M, int *K) {
    const mt_tensor *x = n->in[0], *w = n->in[1];
    *K = (int)w->shape[1];
    *M = (int)w->shape[0];
    int64_t rows = 1; /* not numel / K: K may be 0 */
    for (int i = 0; i < x->ndim - 1; i++) rows *= x->shape[i];
    *N = (int)rows;
}

void cpu_matmul_fwd_node(const mt_node *n) {
    int N, M, K;
    matmul_dims(n, &N, &M, &K);
    cpu_matmul_forward(n->out->data, n->in[0]->data, n->in[1]->data, N, M, K);
}

void cpu_matmul_bwd_node(const mt_node *n) {
    int N, M, K;
    matmul_dims(n, &N, &M, &K);
    const mt_tensor *x = n->in[0], *w = n->in[1];
    cpu_matmul_backward(x->grad, w->grad, n->out->grad, x->data, w->data, N, M, K);
}
