/* moe_route_sigmoid.c: the sigmoid router of MiniMax-M2 (minimax-m3.md 6.1, transformers'
 * MiniMaxM2TopKRouter): s = sigmoid(z) in fp32, the top-K of s + bias choose (the correction
 * bias is a buffer, no gradient), the weights are scale * s_k / S over the chosen, S = the sum of
 * their unbiased s. Node layout (autograd/op_moe.c): in[0] logits (N,E), in[1] bias (E) or NULL,
 * out weights (N,K), saved[0] s (N,E), saved[1] idx (N,K) I32, ip[0] = K, fp[0] = scale. */
#include <math.h>

#include "cpu_ops.h"
#include "moe.h"

void cpu_moe_route_sigmoid_fwd(const float *logits, const float *bias, int64_t N, int E, int K,
                               float scale, float *s, float *w, int32_t *idx) {
    /* rows are independent: each is the same serial computation on any thread */
#pragma omp parallel for schedule(static) if (N * E >= 4096)
    for (int64_t n = 0; n < N; n++) {
        const float *z = logits + n * E;
        float *sn = s + n * E;
        int32_t *in = idx + n * K;
        bool finite = true;
        for (int e = 0; e < E; e++) {
            sn[e] = (float)(1.0 / (1.0 + exp(-(double)z[e])));
            finite = finite && isfinite(z[e]);
        }
        if (!finite) {
            /* A diverged model: experts 0..K-1 with NaN weights (as the softmax router), so the
             * NaN reaches the loss and the trainer stops (or skips the step) naming the step. */
            for (int j = 0; j < K; j++) in[j] = j, w[n * K + j] = NAN;
            continue;
        }
        /* Selection on the fp32 sums s + bias (what transformers ranks); scanning e upwards
         * and replacing only on a strictly larger value gives ties to the lower index. */
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

/* w_k = scale s_k / S: ds_k = (scale dw_k - sum_j dw_j w_j) / S for the chosen k, 0 elsewhere
 * (the bias and the selection carry no gradient); then dz_e = s_e (1 - s_e) ds_e. */
void cpu_moe_route_sigmoid_bwd(const float *dw, const float *s, const float *w, const int32_t *idx,
                               int64_t N, int E, int K, float scale, float *dlogits) {
    for (int64_t n = 0; n < N; n++) {
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

void cpu_moe_route_sigmoid_fwd_node(const mt_node *n) {
    const mt_tensor *logits = n->in[0], *bias = n->in[1];
    int64_t N = logits->shape[0];
    int E = (int)logits->shape[1], K = (int)n->ip[0];
    cpu_moe_route_sigmoid_fwd(logits->data, bias ? bias->data : NULL, N, E, K, n->fp[0],
                              n->saved[0]->data, n->out->data, n->saved[1]->data);
}

void cpu_moe_route_sigmoid_bwd_node(const mt_node *n) {
    const mt_tensor *logits = n->in[0];
    if (!logits->grad) return;
    int64_t N = logits->shape[0];
    int E = (int)logits->shape[1], K = (int)n->ip[0];
    cpu_moe_route_sigmoid_bwd(n->out->grad, n->saved[0]->data, n->out->data, n->saved[1]->data, N,
                              E, K, n->fp[0], logits->grad);
}
