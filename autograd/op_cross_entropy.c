/* op_cross_entropy.c: mean (or sum / denom) token cross-entropy with ignored labels.
 * Node: in[0] = logits (..., V) flattened to N rows, in[1] = labels (N) I32;
 *       saved[0] = lse (N) f32, the log-sum-exp of each row (0 for ignored rows);
 *       fp[0] = denom as given.
 * The loss is scaled by 1/(rows whose label is not ignored) when denom <= 0 (0 when no row
 * counts: the loss and its gradient are then exactly zero), else by 1/denom. The backward
 * recounts the rows from the labels (cheap) rather than storing the count. */
#include "ops.h"

mt_tensor *mt_cross_entropy(mt_ctx *c, mt_tensor *logits, mt_tensor *labels, float denom) {
    MT_CHECK(logits->dtype == MT_F32 && logits->ndim >= 1,
             "cross_entropy: logits %s must be f32 (N,V), got %s %s", logits->name,
             mt_dtype_name(logits->dtype), mt_shape_str(logits));
    MT_CHECK(labels->dtype == MT_I32, "cross_entropy: labels %s must be i32, got %s", labels->name,
             mt_dtype_name(labels->dtype));
    int64_t V = logits->shape[logits->ndim - 1];
    MT_CHECK(V > 0, "cross_entropy: logits %s %s have an empty vocabulary", logits->name,
             mt_shape_str(logits));
    int64_t rows = mt_numel(logits) / V;
    MT_CHECK(mt_numel(labels) == rows,
             "cross_entropy: logits %s %s have %lld rows but labels %s %s have %lld", logits->name,
             mt_shape_str(logits), (long long)rows, labels->name, mt_shape_str(labels),
             (long long)mt_numel(labels));
    mt_tensor *y = mt_tensor_new(c, MT_F32, 0, NULL, "cross_entropy");
    mt_tensor *in[2] = {logits, labels};
    mt_node *n = mt_node_begin(c, MT_OP_CROSS_ENTROPY, y, 2, in);
    n->saved[0] = mt_tensor_new(c, MT_F32, 1, &rows, "cross_entropy.lse");
    n->fp[0] = denom;
    mt_node_run(c, n);
    return y;
}
