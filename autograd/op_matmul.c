/* op_matmul.c: y = x w^T, the linear layer without bias (nn.Linear's weight layout).
 * Node: in[0] = x (..., Kin) flattened to N rows, in[1] = w (M, Kin); ip[0] = the GEMM
 * precision (mt_dtype: MT_F32 or MT_BF16, ctx->compute_dtype when the node was created, so the
 * backward uses the forward's mode).
 * BLAS takes int dimensions, so N, M and Kin must each fit in an int. */
#include <limits.h>

#include "ops.h"

mt_tensor *mt_matmul(mt_ctx *c, mt_tensor *x, mt_tensor *w) {
    MT_CHECK(x->dtype == MT_F32 && w->dtype == MT_F32, "matmul: %s and %s must be f32", x->name,
             w->name);
    MT_CHECK(x->ndim >= 1 && w->ndim == 2, "matmul: x %s %s must be (...,Kin), w %s %s (M,Kin)",
             x->name, mt_shape_str(x), w->name, mt_shape_str(w));
    int64_t kin = x->shape[x->ndim - 1];
    MT_CHECK(w->shape[1] == kin, "matmul: x %s %s and w %s %s disagree on Kin", x->name,
             mt_shape_str(x), w->name, mt_shape_str(w));
    int64_t rows = 1; /* not numel / Kin: Kin may be 0 */
    for (int i = 0; i < x->ndim - 1; i++) rows *= x->shape[i];
    MT_CHECK(rows <= INT_MAX && kin <= INT_MAX && w->shape[0] <= INT_MAX,
             "matmul: x %s %s, w %s %s: a dimension exceeds BLAS's int range", x->name,
             mt_shape_str(x), w->name, mt_shape_str(w));
    int64_t shape[MT_MAX_DIMS];
    for (int i = 0; i < x->ndim - 1; i++) shape[i] = x->shape[i];
    shape[x->ndim - 1] = w->shape[0];
    mt_tensor *y = mt_tensor_new(c, MT_F32, x->ndim, shape, "matmul");
    mt_tensor *in[2] = {x, w};
    mt_node *n = mt_node_begin(c, MT_OP_MATMUL, y, 2, in);
    n->ip[0] = mt_gemm_mode(c, "matmul");
    mt_node_run(c, n);
    return y;
}
