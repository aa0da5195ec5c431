/* moe_route.c: the MoE router (spec 6.1): softmax in fp32 over E experts, top-K of the
 * probabilities, renormalised to sum 1. Node layout (autograd/op_moe.c): in[0] logits (N,E),
 * out weights (N,K), saved[0] p (N,E), saved[1] idx (N,K) I32, ip[0] = K. */
#include <math.h>

#include "cpu_ops.h"
#include "moe.h"

void cpu_moe_route_fwd(const float *logits, int64_t N, int E, int K, float *p, float *w,
                       int32_t *idx) {
    /* rows are independent: each is the same serial computation on any thread */
#pragma omp parallel for schedule(static) if (N * E >= 4096)
    for (int64_t n = 0; n < N; n++) {
        const float *l = logits + n * E;
        float *pn = p + n * E;
        int32_t *in = idx + n * K;
        double mx = l[0];
        for (int e = 1; e < E; e++) mx = l[e] > mx ? l[e] : mx;
        double sum = 0;
        for (int e = 0; e < E; e++) sum += exp((double)l[e] - mx);
        if (!isfinite(mx) || !isfinite(sum)) {
            /* A diverged model: route to experts 0..K-1 with NaN weights, so the NaN reaches
             * the loss and the trainer stops (or skips the step) naming the step. */
            for (int e = 0; e < E; e++) pn[e] = NAN;
            for (int j = 0; j < K; j++) in[j] = j, w[n * K + j] = NAN;
            continue;
        }
        for (int e = 0; e < E; e++) pn[e] = (float)(exp((double)l[e] - mx) / sum);
        /* Selection on the fp32 probabilities (what HF ranks). Scanning e upwards and replacing
         * only on a strictly larger p gives ties to the lower expert index. O(K^2 E), K tiny. */
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

/* w_k = p_k / S with S = sum of the selected p: dp_k = (dw_k - sum_j dw_j w_j) / S for the
 * selected k, 0 elsewhere; then the softmax backward dl_e = p_e (dp_e - sum_e' dp_e' p_e'). */
void cpu_moe_route_bwd(const float *dw, const float *p, const float *w, const int32_t *idx,
                       int64_t N, int E, int K, float *dlogits) {
    for (int64_t n = 0; n < N; n++) {
        const float *pn = p + n * E;
        const float *dwn = dw + n * K, *wn = w + n * K;
        const int32_t *in = idx + n * K;
        float *dl = dlogits + n * E;
        double S = 0, dot = 0;
        for (int j = 0; j < K; j++) {
            S += pn[in[j]];
            dot += (double)dwn[j] * wn[j];
        }
        double dp_p = 0; /* sum over selected of dp_k p_k */
        for (int j = 0; j < K; j++) dp_p += ((double)dwn[j] - dot) / S * pn[in[j]];
        for (int e = 0; e < E; e++) {
            double dpe = 0;
            for (int j = 0; j < K; j++)
                if (in[j] == e) dpe = ((double)dwn[j] - dot) / S;
            dl[e] += (float)((double)pn[e] * (dpe - dp_p));
        }
    }
}

void cpu_moe_route_fwd_node(const mt_node *n) {
    const mt_tensor *logits = n->in[0];
    int64_t N = logits->shape[0];
    int E = (int)logits->shape[1], K = (int)n->ip[0];
    cpu_moe_route_fwd(logits->data, N, E, K, n->saved[0]->data, n->out->data, n->saved[1]->data);
}

void cpu_moe_route_bwd_node(const mt_node *n) {
    const mt_tensor *logits = n->in[0];
    if (!logits->grad) return;
    int64_t N = logits->shape[0];
    int E = (int)logits->shape[1], K = (int)n->ip[0];
    cpu_moe_route_bwd(n->out->grad, n->saved[0]->data, n->out->data, n->saved[1]->data, N, E, K,
                      logits->grad);
}
