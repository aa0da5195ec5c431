/* swiglu.cu: the gated FFN activation: y = silu(gate) * up, or the clamped SwiGLU of MiniMax-M3
 * (mt_act: node ip[0] = clamp, fp[0..2] = alpha, limit, beta; spec 7), kernels/cpu/swiglu.c's
 * expressions. */
#include "cuda_ops.cuh"

/* g' sigmoid(alpha g') (u' + beta), the clamps as comparisons (NaN passes, as torch.clamp) */
__device__ inline float swiglu_oai(float g, float u, const mt_act &a) {
    const float gc = g > a.limit ? a.limit : g;
    const float uc = u > a.limit ? a.limit : u < -a.limit ? -a.limit : u;
    return gc * cuda_sigmoidf(a.alpha * gc) * (uc + a.beta);
}

__global__ void swiglu_fwd_kernel(float *y, const float *gate, const float *up, int64_t count,
                                  mt_act act) {
    CUDA_FOR(i, count) {
        y[i] =
            act.clamp ? swiglu_oai(gate[i], up[i], act) : gate[i] * cuda_sigmoidf(gate[i]) * up[i];
    }
}

/* SiLU: dgate += dy * up * s (1 + g (1 - s));  dup += dy * silu(g). Clamped: dgate +=
 * dy (u' + beta) s (1 + alpha g' (1 - s)) where g <= limit, dup += dy g' s where
 * -limit <= u <= limit (s = sigmoid(alpha g')). Either may be NULL. */
__global__ void swiglu_bwd_kernel(float *dgate, float *dup, const float *dy, const float *gate,
                                  const float *up, int64_t count, mt_act act) {
    CUDA_FOR(i, count) {
        if (!act.clamp) {
            float g = gate[i], s = cuda_sigmoidf(g);
            if (dgate) dgate[i] += dy[i] * up[i] * s * (1.0f + g * (1.0f - s));
            if (dup) dup[i] += dy[i] * g * s;
            continue;
        }
        const float g = gate[i], u = up[i], L = act.limit;
        const float gc = g > L ? L : g, uc = u > L ? L : u < -L ? -L : u;
        const float s = cuda_sigmoidf(act.alpha * gc);
        if (dgate && g <= L)
            dgate[i] += dy[i] * (uc + act.beta) * s * (1.0f + act.alpha * gc * (1.0f - s));
        if (dup && u >= -L && u <= L) dup[i] += dy[i] * gc * s;
    }
}

void cuda_swiglu_fwd_node(const mt_node *n) {
    int64_t count = mt_numel(n->out);
    if (count == 0) return;
    swiglu_fwd_kernel<<<cuda_blocks(count, CUDA_THREADS), CUDA_THREADS>>>(
        cuda_f32(n->out), cuda_f32(n->in[0]), cuda_f32(n->in[1]), count, mt_node_act(n, 0));
    CUDA_LAUNCH_CHECK("swiglu forward");
}

void cuda_swiglu_bwd_node(const mt_node *n) {
    const mt_tensor *gate = n->in[0], *up = n->in[1];
    int64_t count = mt_numel(n->out);
    if ((!gate->grad && !up->grad) || count == 0) return;
    swiglu_bwd_kernel<<<cuda_blocks(count, CUDA_THREADS), CUDA_THREADS>>>(
        cuda_grad(gate), cuda_grad(up), cuda_grad(n->out), cuda_f32(gate), cuda_f32(up), count,
        mt_node_act(n, 0));
    CUDA_LAUNCH_CHECK("swiglu backward");
}
