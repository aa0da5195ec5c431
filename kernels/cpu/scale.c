/* scale.c: y = s * a for a constant s (node fp[0]). */
#include "cpu_ops.h"

void cpu_scale_forward(float *y, const float *a, float s, int64_t count) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < count; i++) y[i] = s * a[i];
}

/* da += s * dy. */
void cpu_scale_backward(float *da, const float *dy, float s, int64_t count) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < count; i++) da[i] += s * dy[i];
}

void cpu_scale_fwd_node(const mt_node *n) {
    cpu_scale_forward(n->out->data, n->in[0]->data, n->fp[0], mt_numel(n->out));
}

void cpu_scale_bwd_node(const mt_node *n) {
    const mt_tensor *a = n->in[0];
    if (!a->grad) return;
    cpu_scale_backward(a->grad, n->out->grad, n->fp[0], mt_numel(a));
}
