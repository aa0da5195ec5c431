/* op_view.c: reshape without copying (contiguous tensors only). */
#include "ops.h"

mt_tensor *mt_view(mt_ctx *c, mt_tensor *x, int ndim, const int64_t *shape) {
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++) numel *= shape[i];
    MT_CHECK(numel == mt_numel(x), "view of %s %s: %lld elements cannot take a shape of %lld",
             x->name, mt_shape_str(x), (long long)mt_numel(x), (long long)numel);
    mt_tensor *y = mt_arena_alloc(&c->host, sizeof(mt_tensor), "view");
    mt_tensor_wrap(y, x->dtype, ndim, shape, x->data, NULL, x->name);
    y->dev = x->dev;
    mt_node *n = mt_node_begin(c, MT_OP_VIEW, y, 1, &x);
    mt_node_run(c, n);
    return y;
}
