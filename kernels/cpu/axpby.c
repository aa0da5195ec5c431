/* axpby.c: y = alpha * a + beta * b (node fp[0] = alpha, fp[1] = beta), the DeepNorm residual. */
#include "cpu_ops.h"

void cpu_axpby_forward(float *y, float alpha, const float *a, float beta, const float *b,
                       int64_t count) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < count; i++) y[i] = alpha * a[i] + beta * b[i];
}

/* da += alpha * dy; db += beta * dy. Either may be NULL. */
void cpu_axpby_backward(float *da, float *db, const float *dy, float alpha, float beta,
                        int64_t count) {
    if (da) {
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < count; i++) da[i] += alpha * dy[i];
    }
    if (db) {
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < count; i++) db[i] += beta * dy[i];
    }
}

void cpu_axpby_fwd_node(const mt_node *n) {
    cpu_axpby_forward(n->out->data, n->fp[0], n->in[0]->data, n->fp[1], n->in[1]->data,
                      mt_numel(n->out));
}

void cpu_axpby_bwd_node(const mt_node *n) {
    cpu_axpby_backward(n->in[0]->grad, n->in[1]->grad, n->out->grad, n->fp[0], n->fp[1],
                       mt_numel(n->out));
}
