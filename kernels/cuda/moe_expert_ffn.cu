/* moe_expert_ffn.cu: one SwiGLU expert on its contiguous slots on the GPU (spec 6.2), the
 * per-expert op of the split experts (autograd/ops.h, mt_moe_expert_ffn), so a sharded optimizer
 * can hold one expert's weights at a time; mirrors kernels/cpu/moe_expert_ffn.c step by step.
 *
 * Node (autograd/op_moe.c): in = {xs (N*K,C), weight (N,K), perm (N*K) I32, w1 (F,C), w3 (F,C),
 * w2 (C,F)}; out ys (N*K,C), shared by the E expert nodes of one dispatch: this node writes
 * (and in the backward reads the gradient of) only its rows [r0, r0+rows); ip[0] GEMM mode,
 * ip[1] r0, ip[2] rows, ip[3] the expert (messages); saved[0] h1 and saved[1] h3 (rows,F), the
 * pre-activations, when a backward will run. An expert with no rows does nothing at all: no
 * launch, its output rows do not exist and its gradients stay as they are.
 *
 * The rows come out weighted, ys[s] = weight[perm[s]] * (g_s w2^T), so the combine is a plain
 * sum. GEMMs: one cuda_sgemm_rm (fp32, no TF32) or cuda_gemm_bf16_rm (bf16 mode: bf16 operands,
 * fp32 output and accumulation) per product, with the sizes from ip[1], ip[2]; the elementwise
 * steps are moe_common.cu's kernels, the fused op's. bf16 mode rounds where the CPU does: the
 * slots' x and dout and the three weights (cast copies), g (after the dw2 path's row scaling),
 * dh1 and dh3 (written only rounded by the kernels that compute them). h1, h3, u, ys, dweight
 * and every gradient stay fp32.
 *
 * h1 and h3, and dw1 and dw3, are each one strided-batched call (cuda_gemm_rm_pair).
 * Host synchronisation: none. Launches per non-empty expert (fp32 / bf16): forward 4 / 8,
 * backward with every gradient 9 / 14. */
#include "moe_common.cuh"

/* Row-major C (m,n) = op(A) op(B) + beta C: fp32 operands, or bf16 ones in bf16 mode. */
static void moe_expert_gemm(bool bf16, const char *op, bool ta, bool tb, int64_t m, int64_t nn,
                            int64_t k, const void *A, int64_t lda, const void *B, int64_t ldb,
                            float beta, float *C, int64_t ldc) {
    cuda_prof_begin(CUDA_PROF_GEMM);
    if (bf16)
        cuda_gemm_bf16_rm(op, ta, tb, (int)m, (int)nn, (int)k, 1.0f, (const __nv_bfloat16 *)A,
                          (int)lda, (const __nv_bfloat16 *)B, (int)ldb, beta, C, (int)ldc);
    else
        cuda_sgemm_rm(op, ta, tb, (int)m, (int)nn, (int)k, 1.0f, (const float *)A, (int)lda,
                      (const float *)B, (int)ldb, beta, C, (int)ldc);
    cuda_prof_end(CUDA_PROF_GEMM);
}

void cuda_moe_expert_ffn_fwd_node(const mt_node *n) {
    const char *op = "moe_expert_ffn forward";
    const int64_t C = n->in[0]->shape[1], F = n->in[3]->shape[0];
    const int64_t r0 = n->ip[1], rows = n->ip[2];
    if (rows == 0) return; /* no slots: nothing to write, the weights are never read */
    const bool bf16 = n->ip[0] == MT_BF16, keep_h = n->saved[0] != NULL;
    float *h1 = keep_h ? cuda_f32(n->saved[0]) : cuda_moe_f32_scratch(n, rows * F, "moe_expert h1");
    float *h3 = keep_h ? cuda_f32(n->saved[1]) : cuda_moe_f32_scratch(n, rows * F, "moe_expert h3");
    /* bf16 mode: only the rounded g exists */
    float *g = bf16 ? NULL : cuda_moe_f32_scratch(n, rows * F, "moe_expert g");
    __nv_bfloat16 *gb = bf16 ? cuda_moe_bf16_scratch(n, rows * F, "moe_expert g bf16") : NULL;
    const void *xe =
        cuda_moe_operand(n, cuda_f32(n->in[0]) + r0 * C, rows * C, "moe_expert xe bf16");
    const void *w1 = cuda_moe_operand(n, cuda_f32(n->in[3]), F * C, "moe_expert w1 bf16");
    const void *w3 = cuda_moe_operand(n, cuda_f32(n->in[4]), F * C, "moe_expert w3 bf16");
    const void *w2 = cuda_moe_operand(n, cuda_f32(n->in[5]), C * F, "moe_expert w2 bf16");
    float *ye = cuda_f32(n->out) + r0 * C;
    const int32_t *pe = cuda_i32(n->in[2]) + r0;
    /* h1, h3 (rows,F) = xe (rows,C) w1^T, w3^T, w (F,C): one call for the pair */
    cuda_prof_begin(CUDA_PROF_GEMM);
    cuda_gemm_rm_pair(op, bf16, false, true, (int)rows, (int)F, (int)C, 1.0f, xe, xe, (int)C, w1,
                      w3, (int)C, 0.0f, h1, h3, (int)F);
    cuda_prof_end(CUDA_PROF_GEMM);
    cuda_prof_begin(CUDA_PROF_ACT);
    cuda_moe_act(g, gb, h1, h3, rows * F, mt_node_act(n, 4), op);
    cuda_prof_end(CUDA_PROF_ACT);
    /* ye (rows,C) = g (rows,F) w2^T, w2 (C,F), then each row times its routing weight */
    moe_expert_gemm(bf16, op, false, true, rows, C, F, bf16 ? (const void *)gb : g, F, w2, F, 0.0f,
                    ye, C);
    cuda_prof_begin(CUDA_PROF_ACT);
    cuda_moe_scale_rows(ye, NULL, cuda_f32(n->in[1]), pe, rows, C, op);
    cuda_prof_end(CUDA_PROF_ACT);
}

/* With s the expert's slots (w_s = weight[perm[s]]) and U = dye w2 (rows,F), as on the CPU:
 *   dweight[perm[s]] += <U_s, g_s>      dw2 += sum_s dye_s (w_s g_s)^T
 *   dg_s = w_s U_s;  dh1 = dg h3 silu'(h1);  dh3 = dg silu(h1)
 *   dw1 += dh1^T xe;  dw3 += dh3^T xe;  dxe += dh1 w1 + dh3 w3. */
void cuda_moe_expert_ffn_bwd_node(const mt_node *n) {
    const char *op = "moe_expert_ffn backward";
    const int64_t C = n->in[0]->shape[1], F = n->in[3]->shape[0];
    const int64_t r0 = n->ip[1], rows = n->ip[2];
    float *dx = cuda_grad(n->in[0]), *dweight = cuda_grad(n->in[1]);
    float *dw1 = cuda_grad(n->in[3]), *dw3 = cuda_grad(n->in[4]), *dw2 = cuda_grad(n->in[5]);
    const bool need_dh = dx || dw1 || dw3, need_u = need_dh || dweight;
    if (rows == 0 || (!need_u && !dw2)) return; /* no rows: every gradient stays untouched */
    MT_CHECK(n->saved[0] && n->saved[1],
             "moe_expert_ffn backward (expert %d): hidden activations were not saved",
             (int)n->ip[3]);
    const bool bf16 = n->ip[0] == MT_BF16;
    const float *h1 = cuda_f32(n->saved[0]), *h3 = cuda_f32(n->saved[1]);
    const float *weight = cuda_f32(n->in[1]);
    const int32_t *pe = cuda_i32(n->in[2]) + r0;
    /* the GEMM operands: the slots' dout and x, the weights a requested product reads */
    const void *dye =
        cuda_moe_operand(n, cuda_grad(n->out) + r0 * C, rows * C, "moe_expert dout bf16");
    const void *xe = (dw1 || dw3) ? cuda_moe_operand(n, cuda_f32(n->in[0]) + r0 * C, rows * C,
                                                     "moe_expert xe bf16")
                                  : NULL;
    const void *w1 =
        dx ? cuda_moe_operand(n, cuda_f32(n->in[3]), F * C, "moe_expert w1 bf16") : NULL;
    const void *w3 =
        dx ? cuda_moe_operand(n, cuda_f32(n->in[4]), F * C, "moe_expert w3 bf16") : NULL;
    const void *w2 =
        need_u ? cuda_moe_operand(n, cuda_f32(n->in[5]), C * F, "moe_expert w2 bf16") : NULL;
    const int64_t count = rows * F;
    float *g = (dweight || dw2) ? cuda_moe_f32_scratch(n, count, "moe_expert g") : NULL;
    float *u = need_u ? cuda_moe_f32_scratch(n, count, "moe_expert u") : NULL;
    float *dh3 = need_dh && !bf16 ? cuda_moe_f32_scratch(n, count, "moe_expert dh3") : NULL;
    __nv_bfloat16 *gb = bf16 && dw2 ? cuda_moe_bf16_scratch(n, count, "moe_expert g bf16") : NULL;
    __nv_bfloat16 *dh1b =
        bf16 && need_dh ? cuda_moe_bf16_scratch(n, count, "moe_expert dh1 bf16") : NULL;
    __nv_bfloat16 *dh3b =
        bf16 && need_dh ? cuda_moe_bf16_scratch(n, count, "moe_expert dh3 bf16") : NULL;
    /* g, dh1 (in u's place in fp32 mode) and dh3 as GEMM operands */
    const void *go = bf16 ? (const void *)gb : g, *dh1o = bf16 ? (const void *)dh1b : u;
    const void *dh3o = bf16 ? (const void *)dh3b : dh3;
    if (g) {
        cuda_prof_begin(CUDA_PROF_ACT);
        cuda_moe_act(g, NULL, h1, h3, count, mt_node_act(n, 4), op);
        cuda_prof_end(CUDA_PROF_ACT);
    }
    /* u (rows,F) = dye (rows,C) w2 (C,F) */
    if (need_u) moe_expert_gemm(bf16, op, false, false, rows, F, C, dye, C, w2, F, 0.0f, u, F);
    cuda_prof_begin(CUDA_PROF_ACT);
    if (dweight) cuda_moe_dweight(dweight, u, g, pe, rows, F, op);
    if (dw2) cuda_moe_scale_rows(g, gb, weight, pe, rows, F, op); /* g is not needed afterwards */
    cuda_prof_end(CUDA_PROF_ACT);
    /* dw2 (C,F) += dye^T (C,rows) g (rows,F) */
    if (dw2) moe_expert_gemm(bf16, op, true, false, C, F, rows, dye, C, go, F, 1.0f, dw2, F);
    if (!need_dh) return;
    cuda_prof_begin(CUDA_PROF_ACT);
    cuda_moe_dh(u, dh3, dh1b, dh3b, h1, h3, weight, pe, rows, F, mt_node_act(n, 4), op);
    cuda_prof_end(CUDA_PROF_ACT);
    /* dw1 (F,C) += dh1^T (F,rows) xe (rows,C); the same for dw3 with dh3 (one call for both) */
    if (dw1 && dw3) {
        cuda_prof_begin(CUDA_PROF_GEMM);
        cuda_gemm_rm_pair(op, bf16, true, false, (int)F, (int)C, (int)rows, 1.0f, dh1o, dh3o,
                          (int)F, xe, xe, (int)C, 1.0f, dw1, dw3, (int)C);
        cuda_prof_end(CUDA_PROF_GEMM);
    } else if (dw1) {
        moe_expert_gemm(bf16, op, true, false, F, C, rows, dh1o, F, xe, C, 1.0f, dw1, C);
    } else if (dw3) {
        moe_expert_gemm(bf16, op, true, false, F, C, rows, dh3o, F, xe, C, 1.0f, dw3, C);
    }
    if (dx) { /* dxe (rows,C) += dh1 w1 + dh3 w3, w (F,C) */
        float *dxe = dx + r0 * C;
        moe_expert_gemm(bf16, op, false, false, rows, C, F, dh1o, F, w1, C, 1.0f, dxe, C);
        moe_expert_gemm(bf16, op, false, false, rows, C, F, dh3o, F, w3, C, 1.0f, dxe, C);
    }
}
