/* add.c: y = a + b. */
#include "cpu_ops.h"

void cpu_add_forward(float *y, const float *a, const float *b, int64_t count) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < count; i++) y[i] = a[i] + b[i];
}

/* da += dy; db += dy. Either may be NULL; da == db (a + a) accumulates twice, as it must. */
void cpu_add_backward(float *da, float *db, const float *dy, int64_t count) {
    if (da) {
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < count; i++) da[i] += dy[i];
    }
    if (db) {
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < count; i++) db[i] += dy[i];
    }
}

void cpu_add_fwd_node(const mt_node *n) {
    cpu_add_forward(n->out->data, n->in[0]->data, n->in[1]->data, mt_numel(n->out));
}

void cpu_add_bwd_node(const mt_node *n) {
    cpu_add_backward(n->in[0]->grad, n->in[1]->grad, n->out->grad, mt_numel(n->out));
}
