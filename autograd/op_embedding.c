/* op_embedding.c: token embedding lookup (a row gather from the table).
 * Node: in[0] = ids (I32, any shape, no gradient), in[1] = table (R,C): the rows of ids
 * [row0, row0 + R) of a vocabulary of `vocab` ids; ip[0] = row0, ip[1] = vocab.
 * Every id must lie in [0, vocab); one outside the table's rows gives a zero row (a table split
 * by vocabulary rows sums its parts' lookups). The backward scatters rows back and accumulates
 * ids that repeat. */
#include "ops.h"

mt_tensor *mt_embedding_rows(mt_ctx *c, mt_tensor *ids, mt_tensor *table, int64_t row0,
                             int64_t vocab) {
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
    mt_tensor *y = mt_tensor_new(c, MT_F32, ids->ndim + 1, shape, "embedding");
    mt_tensor *in[2] = {ids, table};
    mt_node *n = mt_node_begin(c, MT_OP_EMBEDDING, y, 2, in);
    n->ip[0] = row0;
    n->ip[1] = vocab;
    mt_node_run(c, n);
    return y;
}

mt_tensor *mt_embedding(mt_ctx *c, mt_tensor *ids, mt_tensor *table) {
    return mt_embedding_rows(c, ids, table, 0, table->shape[0]);
}
