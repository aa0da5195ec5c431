/* view.cu: a view shares its input's data, so the forward does nothing; the backward adds the
 * view's gradient into the input's (separate buffers: a view never aliases gradients). */
#include "cuda_ops.cuh"

__global__ void view_bwd_kernel(float *dx, const float *dy, int64_t count) {
    CUDA_FOR(i, count) dx[i] += dy[i];
}

void cuda_view_fwd_node(const mt_node *n) { (void)n; }

void cuda_view_bwd_node(const mt_node *n) {
    const mt_tensor *x = n->in[0];
    int64_t count = mt_numel(x);
    if (!x->grad || count == 0) return;
    view_bwd_kernel<<<cuda_blocks(count, CUDA_THREADS), CUDA_THREADS>>>(cuda_grad(x),
                                                                        cuda_grad(n->out), count);
    CUDA_LAUNCH_CHECK("view backward");
}
