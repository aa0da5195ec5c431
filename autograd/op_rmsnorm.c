/* op_rmsnorm.c: RMSNorm over the last dim.
 * Node: in[0] = x (..., C) flattened to N rows, in[1] = w (C);
 *       saved[0] = rstd (N) f32, 1/sqrt(mean(x^2) + eps) per row, written by the forward;
 *       fp[0] = eps; ip[0] = 1 for the gemma form (1 + w) * x_hat, 0 for w * x_hat. */
#include <limits.h>

#include "ops.h"

mt_tensor *mt_rmsnorm(mt_ctx *c, mt_tensor *x, mt_tensor *w, float eps, bool gemma) {
    MT_CHECK(x->dtype == MT_F32 && w->dtype == MT_F32, "rmsnorm: %s and %s must be f32", x->name,
             w->name);
    MT_CHECK(x->ndim >= 1 && w->ndim == 1 && w->shape[0] == x->shape[x->ndim - 1],
             "rmsnorm: x %s %s must be (...,C) and w %s %s (C)", x->name, mt_shape_str(x), w->name,
             mt_shape_str(w));
    MT_CHECK(w->shape[0] <= INT_MAX, "rmsnorm: w %s %s is too wide", w->name, mt_shape_str(w));
    MT_CHECK(eps >= 0.0f, "rmsnorm of %s: eps %g must be >= 0", x->name, (double)eps);
    int64_t C = w->shape[0];
    int64_t rows = C ? mt_numel(x) / C : 0;
    mt_tensor *y = mt_tensor_new(c, MT_F32, x->ndim, x->shape, "rmsnorm");
    mt_tensor *in[2] = {x, w};
    mt_node *n = mt_node_begin(c, MT_OP_RMSNORM, y, 2, in);
    n->saved[0] = mt_tensor_new(c, MT_F32, 1, &rows, "rmsnorm.rstd");
    n->fp[0] = eps;
    n->ip[0] = gemma ? 1 : 0;
    mt_node_run(c, n);
    return y;
}
