/* moe_route.cu: the MoE router (spec 6.1): softmax over E experts, top-K of the probabilities,
 * renormalised to sum 1, mirroring kernels/cpu/moe_route.c operation for operation (so the
 * selection, including ties, is the CPU's). Node (autograd/op_moe.c): in[0] logits (N,E),
 * out weights (N,K), saved[0] p (N,E), saved[1] idx (N,K) I32, ip[0] = K.
 * One thread per token row: E and K are small (32 and 2 for MiniMax-Text-01). */
#include "cuda_ops.cuh"

__global__ void moe_route_fwd_kernel(const float *logits, int64_t N, int E, int K, float *p,
                                     float *w, int32_t *idx) {
    CUDA_FOR(n, N) {
        const float *l = logits + n * E;
        float *pn = p + n * E;
        int32_t *in = idx + n * K;
        double mx = l[0];
        for (int e = 1; e < E; e++) mx = l[e] > mx ? l[e] : mx;
        double sum = 0;
        for (int e = 0; e < E; e++) sum += exp((double)l[e] - mx);
        if (!isfinite(mx) || !isfinite(sum)) {
            /* A diverged model: route to experts 0..K-1 with NaN weights, so the NaN reaches
             * the loss and the trainer stops (or skips the step) naming the step (as the CPU) */
            for (int e = 0; e < E; e++) pn[e] = NAN;
            for (int j = 0; j < K; j++) in[j] = j, w[n * K + j] = NAN;
            continue;
        }
        for (int e = 0; e < E; e++) pn[e] = (float)(exp((double)l[e] - mx) / sum);
        /* scanning e upwards and replacing only on a strictly larger p: ties go to the lower
         * expert index */
        double psum = 0;
        for (int j = 0; j < K; j++) {
            int best = -1;
            for (int e = 0; e < E; e++) {
                bool taken = false;
                for (int i = 0; i < j; i++) taken = taken || in[i] == e;
                if (!taken && (best < 0 || pn[e] > pn[best])) best = e;
            }
            in[j] = best;
            psum += pn[best];
        }
        for (int j = 0; j < K; j++) w[n * K + j] = (float)(pn[in[j]] / psum);
    }
}

/* dp_k = (dw_k - sum_j dw_j w_j) / S for the selected k (S = sum of the selected p), then the
 * softmax backward dl_e += p_e (dp_e - sum_e' dp_e' p_e'). */
__global__ void moe_route_bwd_kernel(const float *dw, const float *p, const float *w,
                                     const int32_t *idx, int64_t N, int E, int K, float *dlogits) {
    CUDA_FOR(n, N) {
        const float *pn = p + n * E;
        const float *dwn = dw + n * K, *wn = w + n * K;
        const int32_t *in = idx + n * K;
        float *dl = dlogits + n * E;
        double S = 0, dot = 0;
        for (int j = 0; j < K; j++) {
            S += pn[in[j]];
            dot += (double)dwn[j] * wn[j];
        }
        double dp_p = 0;
        for (int j = 0; j < K; j++) dp_p += ((double)dwn[j] - dot) / S * pn[in[j]];
        for (int e = 0; e < E; e++) {
            double dpe = 0;
            for (int j = 0; j < K; j++)
                if (in[j] == e) dpe = ((double)dwn[j] - dot) / S;
            dl[e] += (float)((double)pn[e] * (dpe - dp_p));
        }
    }
}

void cuda_moe_route_fwd_node(const mt_node *n) {
    const mt_tensor *logits = n->in[0];
    int64_t N = logits->shape[0];
    int E = (int)logits->shape[1], K = (int)n->ip[0];
    if (N == 0) return;
    cuda_prof_begin(CUDA_PROF_ROUTE);
    moe_route_fwd_kernel<<<cuda_blocks(N, 128), 128>>>(cuda_f32(logits), N, E, K,
                                                       cuda_f32(n->saved[0]), cuda_f32(n->out),
                                                       (int32_t *)n->saved[1]->data);
    CUDA_LAUNCH_CHECK("moe_route forward");
    cuda_prof_end(CUDA_PROF_ROUTE);
}

void cuda_moe_route_bwd_node(const mt_node *n) {
    const mt_tensor *logits = n->in[0];
    if (!logits->grad) return;
    int64_t N = logits->shape[0];
    int E = (int)logits->shape[1], K = (int)n->ip[0];
    if (N == 0) return;
    cuda_prof_begin(CUDA_PROF_ROUTE);
    moe_route_bwd_kernel<<<cuda_blocks(N, 128), 128>>>(cuda_grad(n->out), cuda_f32(n->saved[0]),
                                                       cuda_f32(n->out), cuda_i32(n->saved[1]), N,
                                                       E, K, cuda_grad(logits));
    CUDA_LAUNCH_CHECK("moe_route backward");
    cuda_prof_end(CUDA_PROF_ROUTE);
}
