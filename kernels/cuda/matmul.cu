/* matmul.cu: y = x w^T through cuBLAS in fp32 (cuda_sgemm_rm maps row-major to cuBLAS's
 * column-major). x (N,K) rows, w (M,K) as stored by nn.Linear, y (N,M).
 * Node (autograd/op_matmul.c): in[0] = x (..., K) flattened to N rows, in[1] = w (M,K);
 * ip[0] = MT_BF16 selects the bf16 mode: x, w and dy are cast to bf16 scratch copies (round to
 * nearest even) and multiplied by cuda_gemm_bf16_rm (fp32 accumulation and output), the same
 * operands the CPU reference rounds (kernels/cpu/matmul.c). */
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
    const float *x = cuda_f32(n->in[0]), *w = cuda_f32(n->in[1]);
    float *y = cuda_f32(n->out);
    /* y (N,M) = x (N,K) w^T */
    if (n->ip[0] == MT_BF16) {
        const __nv_bfloat16 *xb = cuda_bf16_operand(n, x, (int64_t)N * K, "matmul forward x bf16");
        const __nv_bfloat16 *wb = cuda_bf16_operand(n, w, (int64_t)M * K, "matmul forward w bf16");
        cuda_gemm_bf16_rm("matmul forward", false, true, N, M, K, 1.0f, xb, K, wb, K, 0.0f, y, M);
        return;
    }
    cuda_sgemm_rm("matmul forward", false, true, N, M, K, 1.0f, x, K, w, K, 0.0f, y, M);
}

/* dx (N,K) += dy w;  dw (M,K) += dy^T x. */
void cuda_matmul_bwd_node(const mt_node *n) {
    int N, M, K;
    matmul_dims(n, &N, &M, &K);
    const mt_tensor *x = n->in[0], *w = n->in[1];
    const float *dy = cuda_grad(n->out);
    if (N == 0 || M == 0 || K == 0) return;
    if (n->ip[0] == MT_BF16) { /* cast only what a requested gradient multiplies */
        const __nv_bfloat16 *dyb =
            cuda_bf16_operand(n, dy, (int64_t)N * M, "matmul backward dy bf16");
        if (x->grad) {
            const __nv_bfloat16 *wb =
                cuda_bf16_operand(n, cuda_f32(w), (int64_t)M * K, "matmul backward w bf16");
            cuda_gemm_bf16_rm("matmul backward dx", false, false, N, K, M, 1.0f, dyb, M, wb, K,
                              1.0f, cuda_grad(x), K);
        }
        if (w->grad) {
            const __nv_bfloat16 *xb =
                cuda_bf16_operand(n, cuda_f32(x), (int64_t)N * K, "matmul backward x bf16");
            cuda_gemm_bf16_rm("matmul backward dw", true, false, M, K, N, 1.0f, dyb, M, xb, K, 1.0f,
                              cuda_grad(w), K);
        }
        return;
    }
    if (x->grad)
        cuda_sgemm_rm("matmul backward dx", false, false, N, K, M, 1.0f, dy, M, cuda_f32(w), K,
                      1.0f, cuda_grad(x), K);
    if (w->grad)
        cuda_sgemm_rm("matmul backward dw", true, false, M, K, N, 1.0f, dy, M, cuda_f32(x), K, 1.0f,
                      cuda_grad(w), K);
}
