/* embedding.c: row gather from the table, and its scatter-add backward
 * (node layout: autograd/op_embedding.c). */
#include <string.h>

#include "cpu_ops.h"

/* out (N,C) = table[ids[n] - row0] with table (R,C) where ids[n] - row0 is in [0,R); other rows
 * zero (all) or untouched; ids already checked against the vocabulary. */
void cpu_embedding_forward(float *out, const int32_t *ids, const float *table, int64_t N, int64_t C,
                           int64_t row0, int64_t R, bool all) {
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < N; n++) {
        const int64_t r = (int64_t)ids[n] - row0;
        if (r >= 0 && r < R)
            memcpy(out + n * C, table + r * C, sizeof(float) * (size_t)C);
        else if (all)
            memset(out + n * C, 0, sizeof(float) * (size_t)C);
    }
}

/* dtable[ids[n] - row0] += dout[n] for the ids inside the table. Rows run in order so repeated
 * ids accumulate deterministically. */
void cpu_embedding_backward(float *dtable, const float *dout, const int32_t *ids, int64_t N,
                            int64_t C, int64_t row0, int64_t R) {
    for (int64_t n = 0; n < N; n++) {
        const int64_t r = (int64_t)ids[n] - row0;
        if (r < 0 || r >= R) continue;
        float *dst = dtable + r * C;
        const float *src = dout + n * C;
        for (int64_t c = 0; c < C; c++) dst[c] += src[c];
    }
}

void cpu_embedding_fwd_node(const mt_node *n) {
    const mt_tensor *ids = n->in[0], *table = n->in[1];
    int64_t N = mt_numel(ids), V = n->ip[1], C = table->shape[1];
    const int32_t *id = ids->data;
    /* checked once, by the node that writes every row (a vocabulary split's other parts look up
     * the same ids) */
    for (int64_t i = 0; i < N && n->ip[2]; i++)
        MT_CHECK(id[i] >= 0 && id[i] < V, "embedding: %s[%lld] = %d is outside [0,%lld) of %s %s",
                 ids->name, (long long)i, id[i], (long long)V, table->name, mt_shape_str(table));
    cpu_embedding_forward(n->out->data, id, table->data, N, C, n->ip[0], table->shape[0],
                          n->ip[2] != 0);
}

void cpu_embedding_bwd_node(const mt_node *n) {
    const mt_tensor *ids = n->in[0], *table = n->in[1];
    if (!table->grad) return;
    cpu_embedding_backward(table->grad, n->out->grad, ids->data, mt_numel(ids), table->shape[1],
                           n->ip[0], table->shape[0]);
}
