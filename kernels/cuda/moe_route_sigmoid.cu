/* moe_route_sigmoid.cu: the sigmoid router of MiniMax-M2 (minimax-m3.md 6.1), mirroring
 * kernels/cpu/moe_route_sigmoid.c operation for operation (so the selection, including ties,
 * is the CPU's). Node (autograd/op_moe.c): in[0] logits (N,E), in[1] bias (E) or NULL, out
 * weights (N,K), saved[0] s (N,E), saved[1] idx (N,K) I32, ip[0] = K, fp[0] = scale.
 * One thread per token row: K is small (8 of E = 256 for MiniMax-M2), the row stays in cache. */
#include "cuda_ops.cuh"

__global__ void moe_route_sigmoid_fwd_kernel(const float *logits, const float *bias, int64_t N,
                                             int E, int K, float scale, float *s, float *w,
                                             int32_t *idx) {
    CUDA_FOR(n, N) {
        const float *z = logits + n * E;
        float *sn = s + n * E;
        int32_t *in = idx + n * K;
        bool finite = true;
        for (int e = 0; e < E; e++) {
            sn[e] = (float)(1.0 / (1.0 + exp(-(double)z[e])));
            finite = finite && isfinite(z[e]);
        }
        if (!finite) {
            /* a diverged model: experts 0..K-1 with NaN weights, as the CPU */
            for (int j = 0; j < K; j++) in[j] = j, w[n * K + j] = NAN;
            continue;
        }
        /* the fp32 sums s + bias ranked; strictly larger replaces: ties to the lower index */
        double ssum = 0;
        for (int j = 0; j < K; j++) {
            int best = -1;
            float vbest = 0;
            for (int e = 0; e < E; e++) {
                bool taken = false;
                for (int i = 0; i < j; i++) taken = taken || in[i] == e;
                const float v = bias ? sn[e] + bias[e] : sn[e];
                if (!taken && (best < 0 || v > vbest)) best = e, vbest = v;
            }
            in[j] = best;
            ssum += sn[best];
        }
        for (int j = 0; j < K; j++) w[n * K + j] = (float)(scale * (double)sn[in[j]] / ssum);
    }
}

/* ds_k = (scale dw_k - sum_j dw_j w_j) / S for the chosen k, dz_k += s_k (1 - s_k) ds_k. */
__global__ void moe_route_sigmoid_bwd_kernel(const float *dw, const float *s, const float *w,
                                             const int32_t *idx, int64_t N, int E, int K,
                                             float scale, float *dlogits) {
    CUDA_FOR(n, N) {
        const float *sn = s + n * E;
        const float *dwn = dw + n * K, *wn = w + n * K;
        const int32_t *in = idx + n * K;
        float *dl = dlogits + n * E;
        double S = 0, dot = 0;
        for (int j = 0; j < K; j++) {
            S += sn[in[j]];
            dot += (double)dwn[j] * wn[j];
        }
        for (int j = 0; j < K; j++) {
            const int e = in[j];
            const double ds = ((double)scale * dwn[j] - dot) / S;
            dl[e] += (float)(ds * (double)sn[e] * (1.0 - (double)sn[e]));
        }
    }
}

void cuda_moe_route_sigmoid_fwd_node(const mt_node *n) {
    const mt_tensor *logits = n->in[0], *bias = n->in[1];
    int64_t N = logits->shape[0];
    int E = (int)logits->shape[1], K = (int)n->ip[0];
    if (N == 0) return;
    cuda_prof_begin(CUDA_PROF_ROUTE);
    moe_route_sigmoid_fwd_kernel<<<cuda_blocks(N, 128), 128>>>(
        cuda_f32(logits), bias ? cuda_f32(bias) : NULL, N, E, K, n->fp[0], cuda_f32(n->saved[0]),
        cuda_f32(n->out), (int32_t *)n->saved[1]->data);
    CUDA_LAUNCH_CHECK("moe_route_sigmoid forward");
    cuda_prof_end(CUDA_PROF_ROUTE);
}

void cuda_moe_route_sigmoid_bwd_node(const mt_node *n) {
    const mt_tensor *logits = n->in[0];
    if (!logits->grad) return;
    int64_t N = logits->shape[0];
    int E = (int)logits->shape[1], K = (int)n->ip[0];
    if (N == 0) return;
    cuda_prof_begin(CUDA_PROF_ROUTE);
    moe_route_sigmoid_bwd_kernel<<<cuda_blocks(N, 128), 128>>>(
        cuda_grad(n->out), cuda_f32(n->saved[0]), cuda_f32(n->out), cuda_i32(n->saved[1]), N, E, K,
        n->fp[0], cuda_grad(logits));
    CUDA_LAUNCH_CHECK("moe_route_sigmoid backward");
    cuda_prof_end(CUDA_PROF_ROUTE);
}
