/* op_concat.c: two tensors side by side along the last dimension.
 * Node: in[0] = a (..., Da), in[1] = b (..., Db) with the same leading dims; out (..., Da + Db).
 * The backward adds each input's columns of the output's gradient into it. */
#include "ops.h"

mt_tensor *mt_concat(mt_ctx *c, mt_tensor *a, mt_tensor *b) {
    bool same = a->dtype == MT_F32 && b->dtype == MT_F32 && a->ndim == b->ndim && a->ndim >= 1;
    for (int i = 0; same && i < a->ndim - 1; i++) same = a->shape[i] == b->shape[i];
    MT_CHECK(same, "concat: %s %s and %s %s must be f32 with the same leading dims", a->name,
             mt_shape_str(a), b->name, mt_shape_str(b));
    int64_t shape[MT_MAX_DIMS];
    for (int i = 0; i < a->ndim; i++) shape[i] = a->shape[i];
    shape[a->ndim - 1] += b->shape[a->ndim - 1];
    mt_tensor *y = mt_tensor_new(c, MT_F32, a->ndim, shape, "concat");
    mt_tensor *in[2] = {a, b};
    mt_node *n = mt_node_begin(c, MT_OP_CONCAT, y, 2, in);
    mt_node_run(c, n);
    return y;
}
