/* swiglu.cu: y = silu(gate) * up, the gated FFN activation. */
#include "cuda_ops.cuh"

__global__ void swiglu_fwd_kernel(float *y, const float *gate, const float *up, int64_t count) {
    CUDA_FOR(i, count) y[i] = gate[i] * cuda_sigmoidf(gate[i]) * up[i];
}

/* dgate += dy * up * s (1 + g (1 - s));  dup += dy * silu(g). Either may be NULL. */
__global__ void swiglu_bwd_kernel(float *dgate, float *dup, const float *dy, const float *gate,
                                  const float *up, int64_t count) {
    CUDA_FOR(i, count) {
        float g = gate[i], s = cuda_sigmoidf(g);
        if (dgate) dgate[i] += dy[i] * up[i] * s * (1.0f + g * (1.0f - s));
        if (dup) dup[i] += dy[i] * g * s;
    }
}

void cuda_swiglu_fwd_node(const mt_node *n) {
    int64_t count = mt_numel(n->out);
    if (count == 0) return;
    swiglu_fwd_kernel<<<cuda_blocks(count, CUDA_THREADS), CUDA_THREADS>>>(
        cuda_f32(n->out), cuda_f32(n->in[0]), cuda_f32(n->in[1]), count);
    CUDA_LAUNCH_CHECK("swiglu forward");
}

void cuda_swiglu_bwd_node(const mt_node *n) {
    const mt_tensor *gate = n->in[0], *up = n->in[1];
    int64_t count = mt_numel(n->out);
    if ((!gate->grad && !up->grad) || count == 0) return;
    swiglu_bwd_kernel<<<cuda_blocks(count, CUDA_THREADS), CUDA_THREADS>>>(
        cuda_grad(gate), cuda_grad(up), cuda_grad(n->out), cuda_f32(gate), cuda_f32(up), count);
    CUDA_LAUNCH_CHECK("swiglu backward");
}
