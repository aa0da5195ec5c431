/* moe_aux.c: the differentiable part of the load-balancing loss (spec 7.2):
 * sum_n sum_e coef[e] * softmax(logits[n])[e]. The softmax is recomputed in the backward
 * (N x E exps) instead of saving p. Node layout (autograd/op_moe.c): in = {logits (N,E),
 * coef (E)}, out scalar. */
#include <math.h>

#include "cpu_ops.h"
#include "moe.h"

/* The row's max and sum of exp(l - max) in double: p[e] = exp(l[e] - max) / sum. */
static void moe_aux_softmax_stats(const float *l, int E, int64_t n, double *mx_out,
                                  double *sum_out) {
    double mx = l[0];
    for (int e = 1; e < E; e++) mx = l[e] > mx ? l[e] : mx;
    double sum = 0;
    for (int e = 0; e < E; e++) sum += exp((double)l[e] - mx);
    MT_CHECK(isfinite(mx) && isfinite(sum), "moe_aux: router logits row %lld is not finite",
             (long long)n);
    *mx_out = mx;
    *sum_out = sum;
}

double cpu_moe_aux_fwd(const float *logits, const float *coef, int64_t N, int E) {
    double total = 0;
    for (int64_t n = 0; n < N; n++) {
        const float *l = logits + n * E;
        double mx, sum;
        moe_aux_softmax_stats(l, E, n, &mx, &sum);
        for (int e = 0; e < E; e++) total += coef[e] * (exp((double)l[e] - mx) / sum);
    }
    return total;
}

void cpu_moe_aux_bwd(float dloss, const float *logits, const float *coef, int64_t N, int E,
                     float *dlogits) {
    for (int64_t n = 0; n < N; n++) {
        const float *l = logits + n * E;
        double mx, sum, dot = 0;
        moe_aux_softmax_stats(l, E, n, &mx, &sum);
        for (int e = 0; e < E; e++) dot += coef[e] * (exp((double)l[e] - mx) / sum);
        for (int e = 0; e < E; e++) {
            double p = exp((double)l[e] - mx) / sum;
            dlogits[n * E + e] += (float)((double)dloss * p * (coef[e] - dot));
        }
    }
}

void cpu_moe_aux_fwd_node(const mt_node *n) {
    const mt_tensor *logits = n->in[0];
    float *out = n->out->data;
    out[0] = (float)cpu_moe_aux_fwd(logits->data, n->in[1]->data, logits->shape[0],
                                    (int)logits->shape[1]);
}

void cpu_moe_aux_bwd_node(const mt_node *n) {
    const mt_tensor *logits = n->in[0];
    if (!logits->grad) return;
    const float *dout = n->out->grad;
    cpu_moe_aux_bwd(dout[0], logits->data, n->in[1]->data, logits->shape[0], (int)logits->shape[1],
                    logits->grad);
}
