/* moe_combine.cu: expert rows back to tokens on the GPU (spec 6.2), the last of the split
 * expert ops (autograd/ops.h, mt_moe_combine), mirroring kernels/cpu/moe_combine.c. The rows
 * arrive already weighted (moe_expert_ffn.cu), so y[n] = sum_j ys[inv[n*K+j]], j in order, by
 * the fused op's combine kernel (moe_common.cu) with weight 1: one writer per row.
 *
 * Node (autograd/op_moe.c): in = {ys (N*K,C), inv (N*K) I32}; out y (N,C); ip[0] = K.
 *
 * Host synchronisation: none. */
#include "moe_common.cuh"

void cuda_moe_combine_fwd_node(const mt_node *n) {
    const int K = (int)n->ip[0];
    const int64_t N = n->out->shape[0], C = n->out->shape[1];
    cuda_prof_begin(CUDA_PROF_COMBINE);
    cuda_moe_combine_rows(cuda_f32(n->out), cuda_f32(n->in[0]), cuda_i32(n->in[1]), NULL, N, K, C,
                          false, "moe_combine");
    cuda_prof_end(CUDA_PROF_COMBINE);
}

/* dys[inv[a], c] += dy[a / K, c] over assignments a: inv is a bijection, so every slot element
 * has one writer. */
__global__ void moe_combine_bwd_kernel(float *dys, const float *dy, const int32_t *inv, int64_t A,
                                       int K, int64_t C) {
    CUDA_FOR(i, A * C) {
        int64_t a = i / C, c = i % C;
        dys[(int64_t)inv[a] * C + c] += dy[(a / K) * C + c];
    }
}

void cuda_moe_combine_bwd_node(const mt_node *n) {
    float *dys = cuda_grad(n->in[0]);
    if (!dys) return;
    const char *op = "moe_combine backward";
    const int K = (int)n->ip[0];
    const int64_t N = n->out->shape[0], C = n->out->shape[1], A = N * K;
    if (A * C == 0) return;
    cuda_prof_begin(CUDA_PROF_COMBINE);
    moe_combine_bwd_kernel<<<cuda_blocks(A * C, CUDA_THREADS), CUDA_THREADS>>>(
        dys, cuda_grad(n->out), cuda_i32(n->in[1]), A, K, C);
    CUDA_LAUNCH_CHECK(op);
    cuda_prof_end(CUDA_PROF_COMBINE);
}
