/* moe_dispatch.cu: tokens to expert order on the GPU (spec 6.2), the first of the split expert
 * ops (autograd/ops.h, mt_moe_dispatch), mirroring kernels/cpu/moe_dispatch.c: the stable
 * counting sort of the N*K assignments by expert and the row gather (moe_common.cu, the same
 * kernels as the fused moe_experts.cu).
 *
 * Node (autograd/op_moe.c): in = {x (N,C), idx (N,K) I32}; out xs (N*K,C); ip[0] = E;
 * saved[0] offsets (E+1), saved[1] perm (N*K), saved[2] inv (N*K), all I32; host: the offsets
 * (E+1) on the host, which the constructor hands to the expert ops as their GEMM sizes.
 *
 * Host synchronisation: forward 1 (the bad-id flag and the offsets in one copy, into n->host),
 * backward none. */
#include "moe_common.cuh"

void cuda_moe_dispatch_fwd_node(const mt_node *n) {
    const char *op = "moe_dispatch";
    const int64_t N = n->in[0]->shape[0], C = n->in[0]->shape[1];
    const int K = (int)n->in[1]->shape[1], E = (int)n->ip[0];
    cuda_prof_begin(CUDA_PROF_ROUTE);
    cuda_moe_perm_build(n, N, K, E, op); /* fills n->host */
    cuda_moe_gather(cuda_f32(n->out), cuda_f32(n->in[0]), cuda_i32(n->saved[1]), N * K, K, C, op);
    cuda_prof_end(CUDA_PROF_ROUTE);
}

/* dx[n] += sum_j dxs[inv[n*K+j]], j in order: one writer per token row. */
void cuda_moe_dispatch_bwd_node(const mt_node *n) {
    float *dx = cuda_grad(n->in[0]);
    if (!dx) return;
    const int64_t N = n->in[0]->shape[0], C = n->in[0]->shape[1];
    const int K = (int)n->in[1]->shape[1];
    cuda_prof_begin(CUDA_PROF_ROUTE);
    cuda_moe_combine_rows(dx, cuda_grad(n->out), cuda_i32(n->saved[2]), NULL, N, K, C, true,
                          "moe_dispatch backward");
    cuda_prof_end(CUDA_PROF_ROUTE);
}
