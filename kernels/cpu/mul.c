/* mul.c: y = a * b elementwise. */
#include "cpu_ops.h"

void cpu_mul_forward(float *y, const float *a, const float *b, int64_t count) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < count; i++) y[i] = a[i] * b[i];
}

/* da += dy * b; db += dy * a. Either may be NULL. Separate passes keep a * a right (da == db). */
void cpu_mul_backward(float *da, float *db, const float *dy, const float *a, const float *b,
                      int64_t count) {
    if (da) {
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < count; i++) da[i] += dy[i] * b[i];
    }
    if (db) {
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < count; i++) db[i] += dy[i] * a[i];
    }
}

void cpu_mul_fwd_node(const mt_node *n) {
    cpu_mul_forward(n->out->data, n->in[0]->data, n->in[1]->data, mt_numel(n->out));
}

void cpu_mul_bwd_node(const mt_node *n) {
    const mt_tensor *a = n->in[0], *b = n->in[1];
    cpu_mul_backward(a->grad, b->grad, n->out->grad, a->data, b->data, mt_numel(n->out));
}
