/* silu.cu: y = x * sigmoid(x). */
#include "cuda_ops.cuh"

__global__ void silu_fwd_kernel(float *y, const float *x, int64_t count) {
    CUDA_FOR(i, count) y[i] = x[i] * cuda_sigmoidf(x[i]);
}

/* d silu / dx = s (1 + x (1 - s)), s = sigmoid(x). */
__global__ void silu_bwd_kernel(float *dx, const float *dy, const float *x, int64_t count) {
    CUDA_FOR(i, count) {
        float s = cuda_sigmoidf(x[i]);
        dx[i] += dy[i] * s * (1.0f + x[i] * (1.0f - s));
    }
}

void cuda_silu_fwd_node(const mt_node *n) {
    int64_t count = mt_numel(n->out);
    if (count == 0) return;
    silu_fwd_kernel<<<cuda_blocks(count, CUDA_THREADS), CUDA_THREADS>>>(cuda_f32(n->out),
                                                                        cuda_f32(n->in[0]), count);
    CUDA_LAUNCH_CHECK("silu forward");
}

void cuda_silu_bwd_node(const mt_node *n) {
    const mt_tensor *x = n->in[0];
    int64_t count = mt_numel(x);
    if (!x->grad || count == 0) return;
    silu_bwd_kernel<<<cuda_blocks(count, CUDA_THREADS), CUDA_THREADS>>>(
        cuda_grad(x), cuda_grad(n->out), cuda_f32(x), count);
    CUDA_LAUNCH_CHECK("silu backward");
}
