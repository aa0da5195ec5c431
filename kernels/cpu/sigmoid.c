/* sigmoid.c: y = 1 / (1 + exp(-x)); the backward reads y, not x. */
#include "cpu_math.h"
#include "cpu_ops.h"

void cpu_sigmoid_forward(float *y, const float *x, int64_t count) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < count; i++) y[i] = cpu_sigmoidf(x[i]);
}

/* dx += dy * y (1 - y). */
void cpu_sigmoid_backward(float *dx, const float *dy, const float *y, int64_t count) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < count; i++) dx[i] += dy[i] * y[i] * (1.0f - y[i]);
}

void cpu_sigmoid_fwd_node(const mt_node *n) {
    cpu_sigmoid_forward(n->out->data, n->in[0]->data, mt_numel(n->out));
}

void cpu_sigmoid_bwd_node(const mt_node *n) {
    const mt_tensor *x = n->in[0];
    if (!x->grad) return;
    cpu_sigmoid_backward(x->grad, n->out->grad, n->out->data, mt_numel(x));
}
