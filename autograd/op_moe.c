/* op_moe.c: constructors of the MoE ops (spec sections 6 and 7.2): router, experts (fused, or
 * split into dispatch / one op per expert / combine), aux loss, and the host-side aux coefficient.
 * The node layouts written here are the contract with every backend (kernels/cpu/moe_*.c). */
#include <limits.h>
#include <math.h>

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

mt_tensor *mt_moe_route_sigmoid(mt_ctx *c, mt_tensor *logits, mt_tensor *bias, int k, float scale,
                                mt_tensor **idx_out) {
    MT_CHECK(logits->dtype == MT_F32 && logits->ndim == 2,
             "moe_route_sigmoid: logits %s must be f32 (N,E), got %s %s", logits->name,
             mt_dtype_name(logits->dtype), mt_shape_str(logits));
    int64_t N = logits->shape[0], E = logits->shape[1];
    MT_CHECK(E >= 1 && E <= INT_MAX && k >= 1 && k <= E,
             "moe_route_sigmoid: k = %d experts per token out of E = %lld (logits %s %s)", k,
             (long long)E, logits->name, mt_shape_str(logits));
    MT_CHECK(!bias || (bias->dtype == MT_F32 && bias->ndim == 1 && bias->shape[0] == E),
             "moe_route_sigmoid: bias %s must be f32 (E) with E = %lld, got %s",
             bias ? bias->name : "", (long long)E, bias ? mt_shape_str(bias) : "");
    MT_CHECK(isfinite(scale) && scale > 0, "moe_route_sigmoid: scale %g must be positive",
             (double)scale);
    MT_CHECK(idx_out, "moe_route_sigmoid: idx_out must not be NULL (logits %s)", logits->name);
    int64_t wshape[2] = {N, k}, sshape[2] = {N, E};
    mt_tensor *w = mt_tensor_new(c, MT_F32, 2, wshape, "moe_route_sigmoid.weight");
    mt_tensor *idx = mt_tensor_new(c, MT_I32, 2, wshape, "moe_route_sigmoid.idx");
    mt_tensor *s = mt_tensor_new(c, MT_F32, 2, sshape, "moe_route_sigmoid.s");
    /* the bias is an input without a gradient: only the logits are differentiated */
    mt_tensor *in[2] = {logits, bias};
    mt_node *n = mt_node_begin(c, MT_OP_MOE_ROUTE_SIGMOID, w, 2, in);
    n->saved[0] = s;   /* (N,E) sigmoid scores */
    n->saved[1] = idx; /* (N,K) chosen experts, descending s + bias, ties to the lower index */
    n->ip[0] = k;
    n->fp[0] = scale;
    mt_node_run(c, n);
    *idx_out = idx;
    return w;
}

mt_tensor *mt_moe_experts(mt_ctx *c, mt_tensor *x, mt_tensor *idx, mt_tensor *weight, mt_tensor *w1,
                          mt_tensor *w3, mt_tensor *w2) {
    return mt_moe_experts_act(c, x, idx, weight, w1, w3, w2, NULL);
}

mt_tensor *mt_moe_experts_act(mt_ctx *c, mt_tensor *x, mt_tensor *idx, mt_tensor *weight,
                              mt_tensor *w1, mt_tensor *w3, mt_tensor *w2, const mt_act *act) {
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
    mt_node_set_act(n, 4, act);                /* ip[4], fp[0..2] */
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

mt_tensor *mt_moe_dispatch(mt_ctx *c, mt_tensor *x, mt_tensor *idx, int E, mt_moe_plan *plan) {
    MT_CHECK(x->dtype == MT_F32 && x->ndim == 2, "moe_dispatch: x %s must be f32 (N,C), got %s %s",
             x->name, mt_dtype_name(x->dtype), mt_shape_str(x));
    const int64_t N = x->shape[0], C = x->shape[1];
    MT_CHECK(idx->dtype == MT_I32 && idx->ndim == 2 && idx->shape[0] == N,
             "moe_dispatch: idx %s must be i32 (N,K) with N = %lld, got %s %s", idx->name,
             (long long)N, mt_dtype_name(idx->dtype), mt_shape_str(idx));
    const int64_t K = idx->shape[1], A = N * K;
    MT_CHECK(E >= 1 && K >= 1 && A <= INT_MAX && A * C <= INT64_MAX / 4,
             "moe_dispatch: sizes N=%lld K=%lld C=%lld E=%d out of range", (long long)N,
             (long long)K, (long long)C, E);
    MT_CHECK(plan, "moe_dispatch: plan must not be NULL (x %s)", x->name);
    int64_t oshape[2] = {A, C}, eshape[1] = {E + 1};
    mt_tensor *out = mt_tensor_new(c, MT_F32, 2, oshape, "moe_dispatch.xs");
    mt_tensor *in[2] = {x, idx};
    mt_node *n = mt_node_begin(c, MT_OP_MOE_DISPATCH, out, 2, in);
    n->ip[0] = E;
    n->saved[0] = mt_tensor_new(c, MT_I32, 1, eshape, "moe_dispatch.offsets");
    n->saved[1] = mt_tensor_new(c, MT_I32, 1, &A, "moe_dispatch.perm");
    n->saved[2] = mt_tensor_new(c, MT_I32, 1, &A, "moe_dispatch.inv");
    n->host = mt_arena_alloc(&c->host, sizeof(int32_t) * (size_t)(E + 1), "moe_dispatch offsets");
    *plan = (mt_moe_plan){n->saved[0], n->saved[1], n->saved[2], n->host, N, E, (int)K};
    mt_node_run(c, n); /* the forward fills the host offsets: the experts' sizes */
    return out;
}

mt_tensor *mt_moe_expert_out(mt_ctx *c, const mt_moe_plan *plan, int64_t C) {
    int64_t shape[2] = {plan->N * plan->K, C};
    mt_tensor *ys = mt_tensor_new(c, MT_F32, 2, shape, "moe_expert.ys");
    ys->requires_grad = false; /* becomes true with the first expert op that needs a gradient */
    return ys;
}

mt_tensor *mt_moe_expert_ffn(mt_ctx *c, mt_tensor *xs, const mt_moe_plan *plan, mt_tensor *weight,
                             int e, mt_tensor *w1, mt_tensor *w3, mt_tensor *w2, mt_tensor *ys) {
    return mt_moe_expert_ffn_act(c, xs, plan, weight, e, w1, w3, w2, ys, NULL);
}

mt_tensor *mt_moe_expert_ffn_act(mt_ctx *c, mt_tensor *xs, const mt_moe_plan *plan,
                                 mt_tensor *weight, int e, mt_tensor *w1, mt_tensor *w3,
                                 mt_tensor *w2, mt_tensor *ys, const mt_act *act) {
    const int64_t A = plan->N * plan->K;
    MT_CHECK(xs->dtype == MT_F32 && xs->ndim == 2 && xs->shape[0] == A,
             "moe_expert_ffn: xs %s must be f32 (N*K,C) with N*K = %lld, got %s", xs->name,
             (long long)A, mt_shape_str(xs));
    const int64_t C = xs->shape[1];
    MT_CHECK(e >= 0 && e < plan->E, "moe_expert_ffn: expert %d of %d", e, plan->E);
    MT_CHECK(weight->dtype == MT_F32 && weight->ndim == 2 && weight->shape[0] == plan->N &&
                 weight->shape[1] == plan->K,
             "moe_expert_ffn: weight %s %s must be f32 (N,K) = (%lld,%d)", weight->name,
             mt_shape_str(weight), (long long)plan->N, plan->K);
    MT_CHECK(w1->dtype == MT_F32 && w1->ndim == 2 && w1->shape[1] == C,
             "moe_expert_ffn: expert %d w1 %s must be f32 (F,C) with C = %lld, got %s", e, w1->name,
             (long long)C, mt_shape_str(w1));
    const int64_t F = w1->shape[0];
    MT_CHECK(w3->dtype == MT_F32 && mt_same_shape(w3, w1),
             "moe_expert_ffn: expert %d w3 %s %s must match w1 %s", e, w3->name, mt_shape_str(w3),
             mt_shape_str(w1));
    MT_CHECK(w2->dtype == MT_F32 && w2->ndim == 2 && w2->shape[0] == C && w2->shape[1] == F,
             "moe_expert_ffn: expert %d w2 %s must be f32 (C,F) = (%lld,%lld), got %s", e, w2->name,
             (long long)C, (long long)F, mt_shape_str(w2));
    MT_CHECK(ys->dtype == MT_F32 && mt_same_shape(ys, xs),
             "moe_expert_ffn: ys %s %s must be f32 shaped like xs %s (mt_moe_expert_out)", ys->name,
             mt_shape_str(ys), mt_shape_str(xs));
    MT_CHECK(F * C <= INT_MAX, "moe_expert_ffn: F*C = %lld exceeds the int range",
             (long long)(F * C));
    const int64_t r0 = plan->host_offsets[e], rows = plan->host_offsets[e + 1] - r0;
    MT_CHECK(r0 >= 0 && rows >= 0 && r0 + rows <= A,
             "moe_expert_ffn: expert %d slots [%lld, %lld) outside [0, %lld)", e, (long long)r0,
             (long long)(r0 + rows), (long long)A);
    /* ys is the output of every expert node of the dispatch: it needs a gradient as soon as one
     * of them does */
    const bool ys_grad = ys->requires_grad;
    mt_tensor *in[6] = {xs, weight, plan->perm, w1, w3, w2};
    mt_node *n = mt_node_begin(c, MT_OP_MOE_EXPERT_FFN, ys, 6, in);
    ys->requires_grad = ys->requires_grad || ys_grad;
    n->ip[0] = mt_gemm_mode(c, "moe_expert_ffn");
    n->ip[1] = r0;
    n->ip[2] = rows;
    n->ip[3] = e;
    mt_node_set_act(n, 4, act); /* ip[4], fp[0..2] */
    if (ys->requires_grad) {    /* the pre-activations w1 x and w3 x of the expert's slots */
        int64_t hshape[2] = {rows, F};
        n->saved[0] = mt_tensor_new(c, MT_F32, 2, hshape, "moe_expert.h1");
        n->saved[1] = mt_tensor_new(c, MT_F32, 2, hshape, "moe_expert.h3");
    }
    mt_node_run(c, n);
    return ys;
}

mt_tensor *mt_moe_combine(mt_ctx *c, mt_tensor *ys, const mt_moe_plan *plan) {
    const int64_t A = plan->N * plan->K;
    MT_CHECK(ys->dtype == MT_F32 && ys->ndim == 2 && ys->shape[0] == A,
             "moe_combine: ys %s must be f32 (N*K,C) with N*K = %lld, got %s", ys->name,
             (long long)A, mt_shape_str(ys));
    int64_t oshape[2] = {plan->N, ys->shape[1]};
    mt_tensor *out = mt_tensor_new(c, MT_F32, 2, oshape, "moe_combine.out");
    mt_tensor *in[2] = {ys, plan->inv};
    mt_node *n = mt_node_begin(c, MT_OP_MOE_COMBINE, out, 2, in);
    n->ip[0] = plan->K;
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
