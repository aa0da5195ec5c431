/* silu.c: y = x * sigmoid(x). */
#include "cpu_math.h"
#include "cpu_ops.h"

void cpu_silu_forward(float *y, const float *x, int64_t count) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < count; i++) y[i] = x[i] * cpu_sigmoidf(x[i]);
}

/* d silu / dx = s (1 + x (1 - s)), s = sigmoid(x). */
void cpu_silu_backward(float *dx, const float *dy, const float *x, int64_t count) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < count; i++) {
        float s = cpu_sigmoidf(x[i]);
        dx[i] += dy[i] * s * (1.0f + x[i] * (1.0f - s));
    }
}

void cpu_silu_fwd_node(const mt_node *n) {
    cpu_silu_forward(n->out->data, n->in[0]->data, mt_numel(n->out));
}

void cpu_silu_bwd_node(const mt_node *n) {
    const mt_tensor *x = n->in[0];
    if (!x->grad) return;
    cpu_silu_backward(x->grad, n->out->grad, x->data, mt_numel(x));
}
