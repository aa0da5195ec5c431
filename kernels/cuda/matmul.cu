/* matmul.cu: y = x w^T through cuBLAS in fp32 (cuda_sgemm_rm maps row-major to cuBLAS's
 * column-major). x (N,K) rows, w (M,K) as stored by nn.Linear, y (N,M).
 * Node (autograd/op_matmul.c): in[0] = x (..., K) flattened to N rows, in[1] = w (M,K). */
#include "cuda_ops.cuh"

static void matmul_dims(const mt_node *n, int *N, int *M, int *K) {
    const mt_tensor *x = n->in[0], *w = n->in[1];
    *K = (int)w->shape[1];
    *M = (int)w->shape[0];
    int64_t rows = 1; /* not numel / K: K may be 0 */
    for (int i = 0; i < x->ndim - 1; i++) rows *= x->shape[i];
    *N = (int)rows;
}

void cuda_matmul_fwd_node(const mt_node *n) {
    int N, M, K;
    matmul_dims(n, &N, &M, &K);
    /* y (N,M) = x (N,K) w^T */
    cuda_sgemm_rm("matmul forward", false, true, N, M, K, 1.0f, cuda_f32(n->in[0]), K,
                  cuda_f32(n->in[1]), K, 0.0f, cuda_f32(n->out), M);
}

/* dx (N,K) += dy w;  dw (M,K) += dy^T x. */
void cuda_matmul_bwd_node(const mt_node *n) {
    int N, M, K;
    matmul_dims(n, &N, &M, &K);
    const mt_tensor *x = n->in[0], *w = n->in[1];
    const float *dy = cuda_grad(n->out);
    if (N == 0 || M == 0 || K == 0) return;
    if (x->grad)
        cuda_sgemm_rm("matmul backward dx", false, false, N, K, M, 1.0f, dy, M, cuda_f32(w), K,
                      1.0f, cuda_grad(x), K);
    if (w->grad)
        cuda_sgemm_rm("matmul backward dw", true, false, M, K, N, 1.0f, dy, M, cuda_f32(x), K, 1.0f,
                      cuda_grad(w), K);
}
