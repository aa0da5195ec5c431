/* op_elementwise.c: the pointwise ops. Inputs of binary ops must have the same shape (no
 * broadcasting). Nodes:
 *   silu, sigmoid: in[0] = x.
 *   swiglu: in[0] = gate, in[1] = up; ip[0] = clamp, fp[0..2] = alpha, limit, beta (mt_act).
 *   add, mul: in[0] = a, in[1] = b.
 *   scale: in[0] = a; fp[0] = s.
 *   axpby: in[0] = a, in[1] = b; fp[0] = alpha, fp[1] = beta. */
#include "ops.h"

static void elementwise_check(const char *op, const mt_tensor *a, const mt_tensor *b) {
    MT_CHECK(a->dtype == MT_F32, "%s: %s must be f32, got %s", op, a->name,
             mt_dtype_name(a->dtype));
    if (!b) return;
    MT_CHECK(b->dtype == MT_F32, "%s: %s must be f32, got %s", op, b->name,
             mt_dtype_name(b->dtype));
    MT_CHECK(mt_same_shape(a, b), "%s: %s %s and %s %s must have the same shape", op, a->name,
             mt_shape_str(a), b->name, mt_shape_str(b));
}

static mt_node *elementwise_node(mt_ctx *c, mt_op op, mt_tensor *a, mt_tensor *b) {
    elementwise_check(mt_op_name(op), a, b);
    mt_tensor *y = mt_tensor_new(c, MT_F32, a->ndim, a->shape, mt_op_name(op));
    mt_tensor *in[2] = {a, b};
    return mt_node_begin(c, op, y, b ? 2 : 1, in);
}

mt_tensor *mt_silu(mt_ctx *c, mt_tensor *x) {
    mt_node *n = elementwise_node(c, MT_OP_SILU, x, NULL);
    mt_node_run(c, n);
    return n->out;
}

mt_tensor *mt_sigmoid(mt_ctx *c, mt_tensor *x) {
    mt_node *n = elementwise_node(c, MT_OP_SIGMOID, x, NULL);
    mt_node_run(c, n);
    return n->out;
}

mt_tensor *mt_swiglu(mt_ctx *c, mt_tensor *gate, mt_tensor *up) {
    return mt_swiglu_act(c, gate, up, NULL);
}

/* Stores act in n: ip[k] = clamp, fp[0..2] (mt_node_act). */
void mt_node_set_act(mt_node *n, int k, const mt_act *act) {
    const bool clamp = act && act->clamp;
    n->ip[k] = clamp;
    if (!clamp) return;
    MT_CHECK(act->limit > 0 && act->alpha > 0, "%s: clamped SwiGLU needs alpha %g and limit %g > 0",
             mt_op_name(n->op), (double)act->alpha, (double)act->limit);
    n->fp[0] = act->alpha;
    n->fp[1] = act->limit;
    n->fp[2] = act->beta;
}

mt_tensor *mt_swiglu_act(mt_ctx *c, mt_tensor *gate, mt_tensor *up, const mt_act *act) {
    mt_node *n = elementwise_node(c, MT_OP_SWIGLU, gate, up);
    mt_node_set_act(n, 0, act);
    mt_node_run(c, n);
    return n->out;
}

mt_tensor *mt_add(mt_ctx *c, mt_tensor *a, mt_tensor *b) {
    mt_node *n = elementwise_node(c, MT_OP_ADD, a, b);
    mt_node_run(c, n);
    return n->out;
}

mt_tensor *mt_mul(mt_ctx *c, mt_tensor *a, mt_tensor *b) {
    mt_node *n = elementwise_node(c, MT_OP_MUL, a, b);
    mt_node_run(c, n);
    return n->out;
}

mt_tensor *mt_scale(mt_ctx *c, mt_tensor *a, float s) {
    mt_node *n = elementwise_node(c, MT_OP_SCALE, a, NULL);
    n->fp[0] = s;
    mt_node_run(c, n);
    return n->out;
}

mt_tensor *mt_axpby(mt_ctx *c, float alpha, mt_tensor *a, float beta, mt_tensor *b) {
    mt_node *n = elementwise_node(c, MT_OP_AXPBY, a, b);
    n->fp[0] = alpha;
    n->fp[1] = beta;
    mt_node_run(c, n);
    return n->out;
}
