/* op_attention.c: the softmax-attention layer's ops (spec section 5): partial NeoX RoPE and
 * causal GQA attention with optional segment ids. */
#include <math.h>

#include "ops.h"

static void check_bt_ids(const char *op, const mt_tensor *ids, const mt_tensor *x) {
    MT_CHECK(ids->dtype == MT_I32 && ids->ndim == 2 && ids->shape[0] == x->shape[0] &&
                 ids->shape[1] == x->shape[1],
             "%s: %s %s %s must be I32 (B,T) matching %s %s", op, ids->name, mt_shape_str(ids),
             mt_dtype_name(ids->dtype), x->name, mt_shape_str(x));
}

mt_tensor *mt_rope(mt_ctx *c, mt_tensor *x, mt_tensor *pos, int rotary_dim, float theta) {
    MT_CHECK(x->dtype == MT_F32 && x->ndim == 4, "rope: %s %s %s must be F32 (B,T,H,D)", x->name,
             mt_shape_str(x), mt_dtype_name(x->dtype));
    check_bt_ids("rope", pos, x);
    MT_CHECK(rotary_dim > 0 && rotary_dim % 2 == 0 && rotary_dim <= x->shape[3],
             "rope: rotary_dim %d must be even and in (0, D] for %s %s", rotary_dim, x->name,
             mt_shape_str(x));
    MT_CHECK(theta > 0 && isfinite(theta), "rope: theta %g must be positive", (double)theta);
    mt_tensor *y = mt_tensor_new(c, MT_F32, 4, x->shape, "rope");
    mt_tensor *in[2] = {x, pos};
    mt_node *n = mt_node_begin(c, MT_OP_ROPE, y, 2, in);
    n->ip[0] = rotary_dim;
    n->fp[0] = theta;
    mt_node_run(c, n);
    return y;
}

mt_tensor *mt_attention(mt_ctx *c, mt_tensor *q, mt_tensor *k, mt_tensor *v, mt_tensor *seg,
                        float scale) {
    return mt_attention_window(c, q, k, v, seg, scale, 0);
}

mt_tensor *mt_attention_window(mt_ctx *c, mt_tensor *q, mt_tensor *k, mt_tensor *v, mt_tensor *seg,
                               float scale, int64_t window) {
    MT_CHECK(q->dtype == MT_F32 && k->dtype == MT_F32 && v->dtype == MT_F32 && q->ndim == 4 &&
                 k->ndim == 4 && mt_same_shape(k, v),
             "attention: q %s %s, k %s %s, v %s %s must be F32 (B,T,H,D), (B,T,Hkv,D) x2", q->name,
             mt_shape_str(q), k->name, mt_shape_str(k), v->name, mt_shape_str(v));
    int64_t B = q->shape[0], T = q->shape[1], H = q->shape[2], Hkv = k->shape[2];
    MT_CHECK(k->shape[0] == B && k->shape[1] == T && k->shape[3] == q->shape[3] && Hkv > 0 &&
                 H % Hkv == 0,
             "attention: q %s %s and k %s %s: B, T, D must match and H a multiple of Hkv", q->name,
             mt_shape_str(q), k->name, mt_shape_str(k));
    if (seg) check_bt_ids("attention", seg, q);
    MT_CHECK(isfinite(scale), "attention: scale %g", (double)scale);
    MT_CHECK(window >= 0, "attention: sliding window %lld must be >= 0", (long long)window);
    mt_tensor *out = mt_tensor_new(c, MT_F32, 4, q->shape, "attention");
    mt_tensor *in[4] = {q, k, v, seg};
    mt_node *n = mt_node_begin(c, MT_OP_ATTENTION, out, 4, in);
    n->fp[0] = scale;
    /* the products' precision (kernels/cpu/attention.c): fixed now, so the backward matches */
    n->ip[0] = mt_gemm_mode(c, "attention");
    n->ip[1] = window;
    /* the log-sum-exp is only needed by a backward */
    if (out->requires_grad)
        n->saved[0] = mt_tensor_new(c, MT_F32, 3, (int64_t[]){B, H, T}, "attention lse");
    mt_node_run(c, n);
    return out;
}
