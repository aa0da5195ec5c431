/* concat.cu: [a | b] along the last dimension, and the backward's split of the gradient, as
 * kernels/cpu/concat.c (node layout: autograd/op_concat.c). One thread per output element. */
#include "cuda_ops.cuh"

__global__ void concat_fwd_kernel(float *y, const float *a, const float *b, int64_t R, int64_t Da,
                                  int64_t Db) {
    const int64_t D = Da + Db;
    CUDA_FOR(i, R * D) {
        const int64_t r = i / D, k = i % D;
        y[i] = k < Da ? a[r * Da + k] : b[r * Db + k - Da];
    }
}

__global__ void concat_bwd_kernel(float *da, float *db, const float *dy, int64_t R, int64_t Da,
                                  int64_t Db) {
    const int64_t D = Da + Db;
    CUDA_FOR(i, R * D) {
        const int64_t r = i / D, k = i % D;
        if (k < Da) {
            if (da) da[r * Da + k] += dy[i];
        } else if (db) {
            db[r * Db + k - Da] += dy[i];
        }
    }
}

void cuda_concat_fwd_node(const mt_node *n) {
    const mt_tensor *a = n->in[0], *b = n->in[1];
    const int64_t Da = a->shape[a->ndim - 1], Db = b->shape[b->ndim - 1];
    const int64_t R = Da + Db ? mt_numel(n->out) / (Da + Db) : 0;
    if (R * (Da + Db) == 0) return;
    concat_fwd_kernel<<<cuda_blocks(R * (Da + Db), CUDA_THREADS), CUDA_THREADS>>>(
        cuda_f32(n->out), cuda_f32(a), cuda_f32(b), R, Da, Db);
    CUDA_LAUNCH_CHECK("concat forward");
}

void cuda_concat_bwd_node(const mt_node *n) {
    const mt_tensor *a = n->in[0], *b = n->in[1];
    const int64_t Da = a->shape[a->ndim - 1], Db = b->shape[b->ndim - 1];
    const int64_t R = Da + Db ? mt_numel(n->out) / (Da + Db) : 0;
    if ((!a->grad && !b->grad) || R * (Da + Db) == 0) return;
    concat_bwd_kernel<<<cuda_blocks(R * (Da + Db), CUDA_THREADS), CUDA_THREADS>>>(
        cuda_grad(a), cuda_grad(b), cuda_grad(n->out), R, Da, Db);
    CUDA_LAUNCH_CHECK("concat backward");
}
