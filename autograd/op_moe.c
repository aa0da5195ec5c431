/* op_moe.c: constructors of the MoE ops (spec sections 6 and 7.2): router, experts, aux loss,
 * and the host-side aux coefficient. The node layouts written here are the contract with every
 * backend (kernels/cpu/moe_*.c). */
#include <limits.h>

#include "ops.h"

mt_tensor *mt_moe_route(mt_ctx *c, mt_tensor *logits, int k, mt_tensor **idx_out) {
    MT_CHECK(logits->dtype == MT_F32 && logits->ndim == 2,
             "moe_route: logits %s must be f32 (N,E), got %s %s", logits->name,
             mt_dtype_name(logits->dtype), mt_shape_str(logits));
    int64_t N = logits->shape[0], E = logits->shape[1];
    MT_CHECK(E >= 1 && E <= INT_MAX && k >= 1 && k <= E,
             "moe_route: k = %d experts per token out of E = %lld (logits %s %s)", k, (long long)E,
             logits->name, mt_shape_str(logits));
    MT_CHECK(idx_out, "moe_route: idx_out must not be NULL (logits %s)", logits->name);
    int64_t wshape[2] = {N, k}, pshape[2] = {N, E};
    mt_tensor *w = mt_tensor_new(c, MT_F32, 2, wshape, "moe_route.weight");
    mt_tensor *idx = mt_tensor_new(c, MT_I32, 2, wshape, "moe_route.idx");
    mt_tensor *p = mt_tensor_new(c, MT_F32, 2, pshape, "moe_route.p");
    mt_node *n = mt_node_begin(c, MT_OP_MOE_ROUTE, w, 1, &logits);
    n->saved[0] = p;   /* (N,E) softmax probabilities */
    n->saved[1] = idx; /* (N,K) chosen experts, descending p, ties to the lower index */
    n->ip[0] = k;
    mt_node_run(c, n);
    *idx_out = idx;
    return w;
}

mt_tensor *mt_moe_experts(mt_ctx *c, mt_tensor *x, mt_tensor *idx, mt_tensor *weight, mt_tensor *w1,
                          mt_tensor *w3, mt_tensor *w2) {
    MT_CHECK(x->dtype == MT_F32 && x->ndim == 2, "moe_experts: x %s must be f32 (N,C), got %s %s",
             x->name, mt_dtype_name(x->dtype), mt_shape_str(x));
    int64_t N = x->shape[0], C = x->shape[1];
    MT_CHECK(idx->dtype == MT_I32 && idx->ndim == 2 && idx->shape[0] == N,
             "moe_experts: idx %s must be i32 (N,K) with N = %lld, got %s %s", idx->name,
             (long long)N, mt_dtype_name(idx->dtype), mt_shape_str(idx));
    int64_t K = idx->shape[1];
    MT_CHECK(weight->dtype == MT_F32 && mt_same_shape(weight, idx),
             "moe_experts: weight %s %s must be f32 with idx's shape %s", weight->name,
             mt_shape_str(weight), mt_shape_str(idx));
    MT_CHECK(w1->dtype == MT_F32 && w1->ndim == 3 && w1->shape[2] == C,
             "moe_experts: w1 %s must be f32 (E,F,C) with C = %lld, got %s", w1->name, (long long)C,
             mt_shape_str(w1));
    int64_t E = w1->shape[0], F = w1->shape[1];
    MT_CHECK(w3->dtype == MT_F32 && mt_same_shape(w3, w1),
             "moe_experts: w3 %s %s must match w1 %s %s", w3->name, mt_shape_str(w3), w1->name,
             mt_shape_str(w1));
    MT_CHECK(w2->dtype == MT_F32 && w2->ndim == 3 && w2->shape[0] == E && w2->shape[1] == C &&
                 w2->shape[2] == F,
             "moe_experts: w2 %s must be f32 (E,C,F) = (%lld,%lld,%lld), got %s", w2->name,
             (long long)E, (long long)C, (long long)F, mt_shape_str(w2));
    /* slots and BLAS dimensions are int */
    MT_CHECK(N * K <= INT_MAX && N * C <= INT_MAX && F * C <= INT_MAX && E >= 1 && E < INT_MAX,
             "moe_experts: sizes N=%lld K=%lld C=%lld F=%lld E=%lld exceed the int range",
             (long long)N, (long long)K, (long long)C, (long long)F, (long long)E);

    int64_t oshape[2] = {N, C}, eshape[1] = {E + 1}, ashape[1] = {N * K}, hshape[2] = {N * K, F};
    mt_tensor *out = mt_tensor_new(c, MT_F32, 2, oshape, "moe_experts.out");
    mt_tensor *in[6] = {x, idx, weight, w1, w3, w2};
    mt_node *n = mt_node_begin(c, MT_OP_MOE_EXPERTS, out, 6, in);
    n->ip[0] = mt_gemm_mode(c, "moe_experts"); /* GEMM precision, as in matmul */
    n->saved[0] = mt_tensor_new(c, MT_I32, 1, eshape, "moe_experts.offsets");
    n->saved[1] = mt_tensor_new(c, MT_I32, 1, ashape, "moe_experts.perm");
    n->saved[2] = mt_tensor_new(c, MT_I32, 1, ashape, "moe_experts.inv");
    /* the offsets on the host: a device forward copies them there anyway (the GEMM sizes) and
     * leaves them for the backward, which then needs no synchronising copy */
    n->host = mt_arena_alloc(&c->host, sizeof(int32_t) * (size_t)(E + 1), "moe_experts offsets");
    if (out->requires_grad) { /* pre-activations by slot, only when a backward will run */
        n->saved[3] = mt_tensor_new(c, MT_F32, 2, hshape, "moe_experts.h1");
        n->saved[4] = mt_tensor_new(c, MT_F32, 2, hshape, "moe_experts.h3");
    }
    mt_node_run(c, n);
    return out;
}

mt_tensor *mt_moe_aux(mt_ctx *c, mt_tensor *logits, mt_tensor *coef) {
    MT_CHECK(logits->dtype == MT_F32 && logits->ndim == 2,
             "moe_aux: logits %s must be f32 (N,E), got %s %s", logits->name,
             mt_dtype_name(logits->dtype), mt_shape_str(logits));
    MT_CHECK(coef->dtype == MT_F32 && coef->ndim == 1 && coef->shape[0] == logits->shape[1],
             "moe_aux: coef %s %s must be f32 (E) with E = %lld", coef->name, mt_shape_str(coef),
             (long long)logits->shape[1]);
    MT_CHECK(!coef->requires_grad, "moe_aux: coef %s is a constant and must not require a gradient",
             coef->name);
    mt_tensor *out = mt_tensor_new(c, MT_F32, 0, NULL, "moe_aux");
    mt_tensor *in[2] = {logits, coef};
    mt_node *n = mt_node_begin(c, MT_OP_MOE_AUX, out, 2, in);
    mt_node_run(c, n);
    return out;
}

/* Why sum over layers of mt_moe_aux with this coef is HF's load_balancing_loss_func:
 * HF concatenates the router rows of all layers (R rows in all) and computes
 *   aux = E * sum_{k,e} f[k,e] * Pbar[e],  f[k,e] = (1/R) #{rows whose slot k chose e},
 *   Pbar[e] = (1/R) sum_rows p[row,e].
 * Summing over k first, sum_k f[k,e] = count[e] / R with count[e] = the times e was chosen in any
 * slot, so aux = sum_e (E count[e] / R^2) sum_rows p[row,e] = sum_rows sum_e coef[e] p[row,e]:
 * linear in p, so it splits over the layers' rows, which is the sum of mt_moe_aux per layer.
 * f comes from topk indices, which carry no gradient in HF either, so holding coef constant
 * gives the same gradient: d aux / d p[row,e] = coef[e], for every layer's rows. */
void mt_moe_aux_coef(float *coef, const int64_t *count, int E, int64_t rows) {
    MT_CHECK(E >= 1 && rows > 0, "moe_aux_coef: E = %d experts and %lld router rows", E,
             (long long)rows);
    double r = (double)rows;
    for (int e = 0; e < E; e++) {
        MT_CHECK(count[e] >= 0, "moe_aux_coef: count[%d] = %lld is negative", e,
                 (long long)count[e]);
        coef[e] = (float)((double)E * (double)count[e] / (r * r));
    }
}
