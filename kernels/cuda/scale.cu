/* scale.cu: y = s * a for a constant s (node fp[0]). */
#include "cuda_ops.cuh"

__global__ void scale_fwd_kernel(float *y, const float *a, float s, int64_t count) {
    CUDA_FOR(i, count) y[i] = s * a[i];
}

/* da += s * dy. */
__global__ void scale_bwd_kernel(float *da, const float *dy, float s, int64_t count) {
    CUDA_FOR(i, count) da[i] += s * dy[i];
}

void cuda_scale_fwd_node(const mt_node *n) {
    int64_t count = mt_numel(n->out);
    if (count == 0) return;
    scale_fwd_kernel<<<cuda_blocks(count, CUDA_THREADS), CUDA_THREADS>>>(
        cuda_f32(n->out), cuda_f32(n->in[0]), n->fp[0], count);
    CUDA_LAUNCH_CHECK("scale forward");
}

void cuda_scale_bwd_node(const mt_node *n) {
    const mt_tensor *a = n->in[0];
    int64_t count = mt_numel(a);
    if (!a->grad || count == 0) return;
    scale_bwd_kernel<<<cuda_blocks(count, CUDA_THREADS), CUDA_THREADS>>>(
        cuda_grad(a), cuda_grad(n->out), n->fp[0], count);
    CUDA_LAUNCH_CHECK("scale backward");
}
