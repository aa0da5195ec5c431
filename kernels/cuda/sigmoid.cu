/* sigmoid.cu: y = 1 / (1 + exp(-x)); the backward reads y, not x. */
#include "cuda_ops.cuh"

__global__ void sigmoid_fwd_kernel(float *y, const float *x, int64_t count) {
    CUDA_FOR(i, count) y[i] = cuda_sigmoidf(x[i]);
}

/* dx += dy * y (1 - y). */
__global__ void sigmoid_bwd_kernel(float *dx, const float *dy, const float *y, int64_t count) {
    CUDA_FOR(i, count) dx[i] += dy[i] * y[i] * (1.0f - y[i]);
}

void cuda_sigmoid_fwd_node(const mt_node *n) {
    int64_t count = mt_numel(n->out);
    if (count == 0) return;
    sigmoid_fwd_kernel<<<cuda_blocks(count, CUDA_THREADS), CUDA_THREADS>>>(
        cuda_f32(n->out), cuda_f32(n->in[0]), count);
    CUDA_LAUNCH_CHECK("sigmoid forward");
}

void cuda_sigmoid_bwd_node(const mt_node *n) {
    const mt_tensor *x = n->in[0];
    int64_t count = mt_numel(x);
    if (!x->grad || count == 0) return;
    sigmoid_bwd_kernel<<<cuda_blocks(count, CUDA_THREADS), CUDA_THREADS>>>(
        cuda_grad(x), cuda_grad(n->out), cuda_f32(n->out), count);
    CUDA_LAUNCH_CHECK("sigmoid backward");
}
