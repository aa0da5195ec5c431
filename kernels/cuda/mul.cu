/* mul.cu: y = a * b elementwise. */
#include "cuda_ops.cuh"

__global__ void mul_fwd_kernel(float *y, const float *a, const float *b, int64_t count) {
    CUDA_FOR(i, count) y[i] = a[i] * b[i];
}

/* da += dy * b; db += dy * a. Either may be NULL. For a * a (da == db, a == b) both products
 * are formed from the unchanged inputs and added one after the other by the same thread. */
__global__ void mul_bwd_kernel(float *da, float *db, const float *dy, const float *a,
                               const float *b, int64_t count) {
    CUDA_FOR(i, count) {
        float ga = dy[i] * b[i], gb = dy[i] * a[i];
        if (da) da[i] += ga;
        if (db) db[i] += gb;
    }
}

void cuda_mul_fwd_node(const mt_node *n) {
    int64_t count = mt_numel(n->out);
    if (count == 0) return;
    mul_fwd_kernel<<<cuda_blocks(count, CUDA_THREADS), CUDA_THREADS>>>(
        cuda_f32(n->out), cuda_f32(n->in[0]), cuda_f32(n->in[1]), count);
    CUDA_LAUNCH_CHECK("mul forward");
}

void cuda_mul_bwd_node(const mt_node *n) {
    const mt_tensor *a = n->in[0], *b = n->in[1];
    int64_t count = mt_numel(n->out);
    if ((!a->grad && !b->grad) || count == 0) return;
    mul_bwd_kernel<<<cuda_blocks(count, CUDA_THREADS), CUDA_THREADS>>>(
        cuda_grad(a), cuda_grad(b), cuda_grad(n->out), cuda_f32(a), cuda_f32(b), count);
    CUDA_LAUNCH_CHECK("mul backward");
}
