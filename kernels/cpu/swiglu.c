/* swiglu.c: y = silu(gate) * up, the gated FFN activation. */
#include "cpu_math.h"
#include "cpu_ops.h"

void cpu_swiglu_forward(float *y, const float *gate, const float *up, int64_t count) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < count; i++) y[i] = gate[i] * cpu_sigmoidf(gate[i]) * up[i];
}

/* dgate += dy * up * s (1 + g (1 - s));  dup += dy * silu(g). Either may be NULL. */
void cpu_swiglu_backward(float *dgate, float *dup, const float *dy, const float *gate,
                         const float *up, int64_t count) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < count; i++) {
        float g = gate[i], s = cpu_sigmoidf(g);
        if (dgate) dgate[i] += dy[i] * up[i] * s * (1.0f + g * (1.0f - s));
        if (dup) dup[i] += dy[i] * g * s;
    }
}

void cpu_swiglu_fwd_node(const mt_node *n) {
    cpu_swiglu_forward(n->out->data, n->in[0]->data, n->in[1]->data, mt_numel(n->out));
}

void cpu_swiglu_bwd_node(const mt_node *n) {
    const mt_tensor *gate = n->in[0], *up = n->in[1];
    cpu_swiglu_backward(gate->grad, up->grad, n->out->grad, gate->data, up->data, mt_numel(n->out));
}
