/* swiglu.c: the gated FFN activation: y = silu(gate) * up, or the clamped SwiGLU of MiniMax-M3
 * (mt_act: node ip[0] = clamp, fp[0..2] = alpha, limit, beta; spec 7). */
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
    const mt_act a = mt_node_act(n, 0);
    const float *gate = n->in[0]->data, *up = n->in[1]->data;
    float *y = n->out->data;
    const int64_t count = mt_numel(n->out);
    if (!a.clamp) {
        cpu_swiglu_forward(y, gate, up, count);
        return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < count; i++)
        y[i] = cpu_swiglu_oai(gate[i], up[i], a.alpha, a.limit, a.beta);
}

void cpu_swiglu_bwd_node(const mt_node *n) {
    const mt_tensor *gate = n->in[0], *up = n->in[1];
    const mt_act a = mt_node_act(n, 0);
    const int64_t count = mt_numel(n->out);
    if (!a.clamp) {
        cpu_swiglu_backward(gate->grad, up->grad, n->out->grad, gate->data, up->data, count);
        return;
    }
    float *dgate = gate->grad, *dup = up->grad;
    const float *dy = n->out->grad, *g = gate->data, *u = up->data;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < count; i++) {
        float dg, du;
        cpu_swiglu_oai_grad(g[i], u[i], a.alpha, a.limit, a.beta, &dg, &du);
        if (dgate) dgate[i] += dy[i] * dg;
        if (dup) dup[i] += dy[i] * du;
    }
}
