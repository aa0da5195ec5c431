/* op_embedding.c: token embedding lookup (a row gather from the table).
 * Node: in[0] = ids (I32, any shape, no gradient), in[1] = table (R,C): the rows of ids
 * [row0, row0 + R) of a vocabulary of `vocab` ids; ip[0] = row0, ip[1] = vocab, ip[2] = 1
 * when the node writes every row of its output (an id outside the table's rows: a zero row),
 * 0 when it fills only its rows of an output an earlier part's node made (a table split by
 * vocabulary rows: every part's node has the same output, so the parts cost one buffer and one
 * gradient). Every id must lie in [0, vocab), checked by the node that writes every row. The
 * backward scatters the table's rows back and accumulates ids that repeat. */
#include <string.h>

#include "ops.h"

mt_tensor *mt_embedding_rows(mt_ctx *c, mt_tensor *ids, mt_tensor *table, int64_t row0,
                             int64_t vocab, mt_tensor *into) {
    MT_CHECK(ids->dtype == MT_I32, "embedding: ids %s must be i32, got %s", ids->name,
             mt_dtype_name(ids->dtype));
    MT_CHECK(table->dtype == MT_F32 && table->ndim == 2,
             "embedding: table %s must be f32 (V,C), got %s %s", table->name,
             mt_dtype_name(table->dtype), mt_shape_str(table));
    MT_CHECK(ids->ndim + 1 <= MT_MAX_DIMS, "embedding: ids %s %s have too many dims", ids->name,
             mt_shape_str(ids));
    MT_CHECK(row0 >= 0 && row0 + table->shape[0] <= vocab && vocab <= INT32_MAX,
             "embedding: table %s %s as rows %lld.. of a vocabulary of %lld ids (at most 2^31 - "
             "1)",
             table->name, mt_shape_str(table), (long long)row0, (long long)vocab);
    int64_t shape[MT_MAX_DIMS];
    for (int i = 0; i < ids->ndim; i++) shape[i] = ids->shape[i];
    shape[ids->ndim] = table->shape[1];
    MT_CHECK(!into || (into->dtype == MT_F32 && into->ndim == ids->ndim + 1 &&
                       !memcmp(into->shape, shape, sizeof(int64_t) * (size_t)into->ndim)),
             "embedding: into %s %s must be the f32 output of the ids' other parts", into->name,
             mt_shape_str(into));
    mt_tensor *y = into ? into : mt_tensor_new(c, MT_F32, ids->ndim + 1, shape, "embedding");
    const bool y_grad = into && into->requires_grad; /* the earlier parts' need of a gradient */
    mt_tensor *in[2] = {ids, table};
    mt_node *n = mt_node_begin(c, MT_OP_EMBEDDING, y, 2, in);
    y->requires_grad = y->requires_grad || y_grad;
    n->ip[0] = row0;
    n->ip[1] = vocab;
    n->ip[2] = into == NULL;
    mt_node_run(c, n);
    return y;
}

mt_tensor *mt_embedding(mt_ctx *c, mt_tensor *ids, mt_tensor *table) {
    return mt_embedding_rows(c, ids, table, 0, table->shape[0], NULL);
}
