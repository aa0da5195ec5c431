/* op_lightning.c: lightning attention (spec section 4), naive or block form. The block form
 * saves nothing: its backward recomputes the state a block at a time.
 * Node: in = {qkv, decay, seg or NULL}; ip[0] = block (0: naive); ip[1] = the GEMM precision
 * (ctx->compute_dtype when the node was created, like matmul's ip[0]): with MT_BF16 the block
 * form rounds its GEMM operands to bf16 (kernels/cpu/lightning_bf16.c, docs/cuda.md); the
 * naive form has no GEMMs and stays fp32 in either mode. */
#include <limits.h>

#include "ops.h"

mt_tensor *mt_lightning(mt_ctx *c, mt_tensor *qkv, mt_tensor *decay, mt_tensor *seg, int block) {
    MT_CHECK(qkv->dtype == MT_F32 && qkv->ndim == 4 && qkv->shape[3] % 3 == 0,
             "lightning: qkv %s %s %s must be f32 (B,T,H,3D)", qkv->name, mt_shape_str(qkv),
             mt_dtype_name(qkv->dtype));
    const int64_t B = qkv->shape[0], T = qkv->shape[1], H = qkv->shape[2], D = qkv->shape[3] / 3;
    MT_CHECK(B >= 1 && T >= 1 && H >= 1 && D >= 1 && B * T <= INT_MAX,
             "lightning: qkv %s %s has an empty or oversized dimension", qkv->name,
             mt_shape_str(qkv));
    MT_CHECK(decay->dtype == MT_F32 && decay->ndim == 1 && decay->shape[0] == H,
             "lightning: decay %s %s %s must be f32 (H) with H = %lld", decay->name,
             mt_shape_str(decay), mt_dtype_name(decay->dtype), (long long)H);
    MT_CHECK(!decay->requires_grad,
             "lightning: decay %s is a fixed buffer and cannot require a gradient", decay->name);
    if (seg)
        MT_CHECK(seg->dtype == MT_I32 && seg->ndim == 2 && seg->shape[0] == B && seg->shape[1] == T,
                 "lightning: seg %s %s %s must be i32 (B,T) = (%lld,%lld)", seg->name,
                 mt_shape_str(seg), mt_dtype_name(seg->dtype), (long long)B, (long long)T);
    MT_CHECK(block >= 0, "lightning: block = %d must be >= 0 (0: naive form)", block);

    mt_tensor *out = mt_tensor_new(c, MT_F32, 4, (int64_t[]){B, T, H, D}, "lightning");
    mt_tensor *in[3] = {qkv, decay, seg};
    mt_node *n = mt_node_begin(c, MT_OP_LIGHTNING, out, 3, in);
    n->ip[0] = block;
    n->ip[1] = mt_gemm_mode(c, "lightning");
    mt_node_run(c, n);
    return out;
}
