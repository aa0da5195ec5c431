/* op_embedding.c: token embedding lookup (a row gather from the table).
 * Node: in[0] = ids (I32, any shape, no gradient), in[1] = table (V,C); no attributes.
 * The backward scatters rows back and accumulates ids that repeat. */
#include "ops.h"

mt_tensor *mt_embedding(mt_ctx *c, mt_tensor *ids, mt_tensor *table) {
    MT_CHECK(ids->dtype == MT_I32, "embedding: ids %s must be i32, got %s", ids->name,
             mt_dtype_name(ids->dtype));
    MT_CHECK(table->dtype == MT_F32 && table->ndim == 2,
             "embedding: table %s must be f32 (V,C), got %s %s", table->name,
             mt_dtype_name(table->dtype), mt_shape_str(table));
    MT_CHECK(ids->ndim + 1 <= MT_MAX_DIMS, "embedding: ids %s %s have too many dims", ids->name,
             mt_shape_str(ids));
    MT_CHECK(table->shape[0] <= INT32_MAX, "embedding: table %s %s: V does not fit in i32",
             table->name, mt_shape_str(table));
    int64_t shape[MT_MAX_DIMS];
    for (int i = 0; i < ids->ndim; i++) shape[i] = ids->shape[i];
    shape[ids->ndim] = table->shape[1];
    mt_tensor *y = mt_tensor_new(c, MT_F32, ids->ndim + 1, shape, "embedding");
    mt_tensor *in[2] = {ids, table};
    mt_node *n = mt_node_begin(c, MT_OP_EMBEDDING, y, 2, in);
    mt_node_run(c, n);
    return y;
}
