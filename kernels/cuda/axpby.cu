/* axpby.cu: y = alpha * a + beta * b (node fp[0] = alpha, fp[1] = beta), the DeepNorm
 * residual. */
#include "cuda_ops.cuh"

__global__ void axpby_fwd_kernel(float *y, float alpha, const float *a, float beta, const float *b,
                                 int64_t count) {
    CUDA_FOR(i, count) y[i] = alpha * a[i] + beta * b[i];
}

/* da += alpha * dy; db += beta * dy. Either may be NULL (da == db accumulates both). */
__global__ void axpby_bwd_kernel(float *da, float *db, const float *dy, float alpha, float beta,
                                 int64_t count) {
    CUDA_FOR(i, count) {
        if (da) da[i] += alpha * dy[i];
        if (db) db[i] += beta * dy[i];
    }
}

void cuda_axpby_fwd_node(const mt_node *n) {
    int64_t count = mt_numel(n->out);
    if (count == 0) return;
    axpby_fwd_kernel<<<cuda_blocks(count, CUDA_THREADS), CUDA_THREADS>>>(
        cuda_f32(n->out), n->fp[0], cuda_f32(n->in[0]), n->fp[1], cuda_f32(n->in[1]), count);
    CUDA_LAUNCH_CHECK("axpby forward");
}

void cuda_axpby_bwd_node(const mt_node *n) {
    float *da = cuda_grad(n->in[0]), *db = cuda_grad(n->in[1]);
    int64_t count = mt_numel(n->out);
    if ((!da && !db) || count == 0) return;
    axpby_bwd_kernel<<<cuda_blocks(count, CUDA_THREADS), CUDA_THREADS>>>(da, db, cuda_grad(n->out),
                                                                         n->fp[0], n->fp[1], count);
    CUDA_LAUNCH_CHECK("axpby backward");
}
