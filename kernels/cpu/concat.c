/* concat.c: [a | b] along the last dimension, and the backward's split of the gradient
 * (node layout: autograd/op_concat.c). Rows R = numel / D of widths Da, Db. */
#include <string.h>

#include "cpu_ops.h"

void cpu_concat_fwd_node(const mt_node *n) {
    const mt_tensor *a = n->in[0], *b = n->in[1];
    const int64_t Da = a->shape[a->ndim - 1], Db = b->shape[b->ndim - 1], D = Da + Db;
    const int64_t R = D ? mt_numel(n->out) / D : 0;
    float *y = n->out->data;
    const float *pa = a->data, *pb = b->data;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < R; r++) {
        memcpy(y + r * D, pa + r * Da, sizeof(float) * (size_t)Da);
        memcpy(y + r * D + Da, pb + r * Db, sizeof(float) * (size_t)Db);
    }
}

/* da += dy[:, :Da], db += dy[:, Da:] (either may be absent). */
void cpu_concat_bwd_node(const mt_node *n) {
    const mt_tensor *a = n->in[0], *b = n->in[1];
    const int64_t Da = a->shape[a->ndim - 1], Db = b->shape[b->ndim - 1], D = Da + Db;
    const int64_t R = D ? mt_numel(n->out) / D : 0;
    const float *dy = n->out->grad;
    float *da = a->grad, *db = b->grad;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < R; r++) {
        if (da)
            for (int64_t k = 0; k < Da; k++) da[r * Da + k] += dy[r * D + k];
        if (db)
            for (int64_t k = 0; k < Db; k++) db[r * Db + k] += dy[r * D + Da + k];
    }
}
