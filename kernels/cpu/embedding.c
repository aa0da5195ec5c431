/* embedding.c: row gather from the table, and its scatter-add backward. */
#include <string.h>

#include "cpu_ops.h"

/* out (N,C) = table[ids[n]] with table (V,C); ids already checked to lie in [0,V). */
void cpu_embedding_forward(float *out, const int32_t *ids, const float *table, int64_t N,
                           int64_t C) {
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < N; n++)
        memcpy(out + n * C, table + (int64_t)ids[n] * C, sizeof(float) * (size_t)C);
}

/* dtable[ids[n]] += dout[n]. Rows run in order so repeated ids accumulate deterministically. */
void cpu_embedding_backward(float *dtable, const float *dout, const int32_t *ids, int64_t N,
                            int64_t C) {
    for (int64_t n = 0; n < N; n++) {
        float *dst = dtable + (int64_t)ids[n] * C;
        const float *src = dout + n * C;
        for (int64_t c = 0; c < C; c++) dst[c] += src[c];
    }
}

void cpu_embedding_fwd_node(const mt_node *n) {
    const mt_tensor *ids = n->in[0], *table = n->in[1];
    int64_t N = mt_numel(ids), V = table->shape[0], C = table->shape[1];
    const int32_t *id = ids->data;
    for (int64_t i = 0; i < N; i++)
        MT_CHECK(id[i] >= 0 && id[i] < V, "embedding: %s[%lld] = %d is outside [0,%lld) of %s %s",
                 ids->name, (long long)i, id[i], (long long)V, table->name, mt_shape_str(table));
    cpu_embedding_forward(n->out->data, id, table->data, N, C);
}

void cpu_embedding_bwd_node(const mt_node *n) {
    const mt_tensor *ids = n->in[0], *table = n->in[1];
    if (!table->grad) return;
    cpu_embedding_backward(table->grad, n->out->grad, ids->data, mt_numel(ids), table->shape[1]);
}
