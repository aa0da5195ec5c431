/* cross_entropy.c: token cross-entropy, loss_n = lse(logits_n) - logits_n[label_n], over the
 * rows whose label is not MT_IGNORE_INDEX, scaled to a mean (denom <= 0) or by 1/denom. */
#include <math.h>

#include "../../autograd/ops.h"
#include "cpu_ops.h"

/* The factor applied to the summed row losses: 1/denom, else 1/(counted rows), else 0. */
static double cross_entropy_scale(const int32_t *labels, int64_t N, float denom) {
    if (denom > 0.0f) return 1.0 / denom;
    int64_t count = 0;
    for (int64_t n = 0; n < N; n++) count += labels[n] != MT_IGNORE_INDEX;
    return count ? 1.0 / (double)count : 0.0;
}

/* Rows are summed in a fixed number of chunks so the loss does not depend on the thread count. */
#define CE_CHUNKS 64

/* loss (scalar); lse (N) per row (0 for ignored rows); logits (N,V); labels (N) already
 * checked to be MT_IGNORE_INDEX or in [0,V). The log-sum-exp subtracts the row max and sums in
 * double, so no logit overflows. */
void cpu_cross_entropy_forward(float *loss, float *lse, const float *logits, const int32_t *labels,
                               int64_t N, int64_t V, float denom) {
    double part[CE_CHUNKS] = {0};
#pragma omp parallel for schedule(static)
    for (int k = 0; k < CE_CHUNKS; k++) {
        for (int64_t n = N * k / CE_CHUNKS; n < N * (k + 1) / CE_CHUNKS; n++) {
            if (labels[n] == MT_IGNORE_INDEX) {
                lse[n] = 0.0f;
                continue;
            }
            const float *x = logits + n * V;
            float mx = x[0];
            for (int64_t v = 1; v < V; v++) mx = x[v] > mx ? x[v] : mx;
            double sum = 0.0;
            for (int64_t v = 0; v < V; v++) sum += exp((double)x[v] - mx);
            double log_sum = log(sum);
            lse[n] = (float)(mx + log_sum);
            part[k] += log_sum - ((double)x[labels[n]] - mx); /* = lse - x[label], no rounding */
        }
    }
    double total = 0.0;
    for (int k = 0; k < CE_CHUNKS; k++) total += part[k];
    *loss = (float)(total * cross_entropy_scale(labels, N, denom));
}

/* dlogits[n,v] += dloss * scale * (softmax(logits_n)[v] - [v == label_n]) for counted rows,
 * with softmax = exp(x - lse) from the saved lse. */
void cpu_cross_entropy_backward(float *dlogits, float dloss, const float *logits,
                                const int32_t *labels, const float *lse, int64_t N, int64_t V,
                                float denom) {
    double g = dloss * cross_entropy_scale(labels, N, denom);
    if (g == 0.0) return;
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < N; n++) {
        if (labels[n] == MT_IGNORE_INDEX) continue;
        const float *x = logits + n * V;
        float *dx = dlogits + n * V;
        double l = lse[n];
        for (int64_t v = 0; v < V; v++) dx[v] += (float)(g * exp((double)x[v] - l));
        dx[labels[n]] -= (float)g;
    }
}

void cpu_cross_entropy_fwd_node(const mt_node *n) {
    const mt_tensor *logits = n->in[0], *labels = n->in[1];
    int64_t V = logits->shape[logits->ndim - 1], N = mt_numel(labels);
    const int32_t *lab = labels->data;
    for (int64_t i = 0; i < N; i++)
        MT_CHECK(lab[i] == MT_IGNORE_INDEX || (lab[i] >= 0 && lab[i] < V),
                 "cross_entropy: %s[%lld] = %d is neither %d nor in [0,%lld) for logits %s %s",
                 labels->name, (long long)i, lab[i], MT_IGNORE_INDEX, (long long)V, logits->name,
                 mt_shape_str(logits));
    cpu_cross_entropy_forward(n->out->data, n->saved[0]->data, logits->data, lab, N, V, n->fp[0]);
}

void cpu_cross_entropy_bwd_node(const mt_node *n) {
    const mt_tensor *logits = n->in[0], *labels = n->in[1];
    if (!logits->grad) return;
    int64_t V = logits->shape[logits->ndim - 1];
    cpu_cross_entropy_backward(logits->grad, *(const float *)n->out->grad, logits->data,
                               labels->data, n->saved[0]->data, mt_numel(labels), V, n->fp[0]);
}
