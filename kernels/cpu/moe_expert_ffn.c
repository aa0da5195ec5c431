/* moe_expert_ffn.c: one SwiGLU expert on its contiguous slots (spec 6.2). The fused experts
 * (moe_experts.c) run this body for e = 0..E-1; the split op (autograd/ops.h,
 * mt_moe_expert_ffn) runs it for one expert, so a sharded optimizer can hold one expert's
 * weights at a time.
 *
 * Node layout (autograd/op_moe.c): in = {xs (N*K,C), weight (N,K), perm (N*K) I32, w1 (F,C),
 * w3 (F,C), w2 (C,F)}; out ys (N*K,C), shared by the E expert nodes of one dispatch, each
 * writing (and, in the backward, reading the gradient of) its rows [r0, r0+rows) only;
 * ip[0] GEMM mode, ip[1] r0, ip[2] rows, ip[3] the expert (messages); saved[0] h1 and saved[1]
 * h3 (rows,F), the pre-activations, when a backward will run.
 * The rows come out weighted, ys[s] = weight[perm[s]] * y_e(xs[s]), so the combine is a plain
 * sum and the weight's gradient is this op's: <dys_s, y_s> = <dys_s w2, g_s>, as in the fused
 * backward. bf16 mode rounds the same operands as moe_experts.c: the slots' x and dout (into
 * copies), the weights, g (after the dw2 path's row scaling), dh1 and dh3. */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "bf16.h"
#include "cpu_math.h"
#include "cpu_ops.h"
#include "moe.h"

/* g = act(h1, h3) over count elements: silu(h1) h3 (the SiLU expression unchanged), or the
 * clamped SwiGLU (cpu_math.h). */
static void moe_expert_act(mt_act act, const float *h1, const float *h3, float *g, int64_t count) {
    if (!act.clamp) {
#pragma omp parallel for simd
        for (int64_t i = 0; i < count; i++) g[i] = h1[i] * cpu_sigmoidf(h1[i]) * h3[i];
        return;
    }
#pragma omp parallel for simd
    for (int64_t i = 0; i < count; i++)
        g[i] = cpu_swiglu_oai(h1[i], h3[i], act.alpha, act.limit, act.beta);
}

void cpu_moe_expert_fwd(int64_t rows, int64_t C, int64_t F, bool bf16, bool infer, mt_act act,
                        const float *xe, const float *w1, const float *w3, const float *w2,
                        float *h1, float *h3, float *g, float *ye) {
    if (rows == 0) return;
    if (infer && rows <= MT_GEMM_ROWS_MAX) { /* decode steps: rows independent of their count */
        cpu_gemm_rows(h1, xe, w1, rows, F, C);
        cpu_gemm_rows(h3, xe, w3, rows, F, C);
        moe_expert_act(act, h1, h3, g, rows * F);
        if (bf16) mt_bf16_round_n(g, g, rows * F);
        cpu_gemm_rows(ye, g, w2, rows, C, F);
        return;
    }
    /* h (rows,F) = xe (rows,C) w^T, w (F,C) */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)F, (int)C, 1.0f, xe,
                (int)C, w1, (int)C, 0.0f, h1, (int)F);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)F, (int)C, 1.0f, xe,
                (int)C, w3, (int)C, 0.0f, h3, (int)F);
    moe_expert_act(act, h1, h3, g, rows * F);
    if (bf16) mt_bf16_round_n(g, g, rows * F);
    /* y (rows,C) = g (rows,F) w2^T, w2 (C,F) */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)C, (int)F, 1.0f, g, (int)F,
                w2, (int)F, 0.0f, ye, (int)C);
}

/* With s the expert's slots (weight w_s = weight[pe[s]]) and U = dpe w2 (rows,F):
 *   dweight[pe[s]] += <U_s, g_s>      dw2 += sum_s dpe_s (w_s g_s)^T
 *   dg_s = w_s U_s;  dh1 = dg h3 silu'(h1);  dh3 = dg silu(h1)  (clamped: dg times the
 *   partial derivatives of cpu_swiglu_oai_grad)
 *   dw1 += dh1^T xe;  dw3 += dh3^T xe;  dxe += dh1 w1 + dh3 w3. */
void cpu_moe_expert_bwd(int64_t rows, int64_t C, int64_t F, bool bf16, mt_act act, const float *dpe,
                        const float *xe, const float *weight, const int32_t *pe, const float *w1,
                        const float *w3, const float *w2, const float *h1, const float *h3,
                        float *g, float *u, float *dh3, float *dxe, float *dweight, float *dw1,
                        float *dw3, float *dw2) {
    const bool need_dh = dxe || dw1 || dw3, need_u = need_dh || dweight;
    if (rows == 0 || (!need_u && !dw2)) return; /* no rows: every gradient stays untouched */
    moe_expert_act(act, h1, h3, g, rows * F);
    if (need_u) /* u (rows,F) = dpe (rows,C) w2 (C,F) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)F, (int)C, 1.0f, dpe,
                    (int)C, w2, (int)F, 0.0f, u, (int)F);
    if (dweight) {
#pragma omp parallel for
        for (int64_t s = 0; s < rows; s++) {
            double acc = 0;
#pragma omp simd reduction(+ : acc) /* double lanes: strict order would keep it scalar */
            for (int64_t f = 0; f < F; f++) acc += (double)u[s * F + f] * g[s * F + f];
            dweight[pe[s]] += (float)acc;
        }
    }
    if (dw2) {
        /* scale g's rows by w_s (g is not needed afterwards), then dw2 (C,F) += dpe^T g */
#pragma omp parallel for
        for (int64_t s = 0; s < rows; s++)
            for (int64_t f = 0; f < F; f++) g[s * F + f] *= weight[pe[s]];
        if (bf16) mt_bf16_round_n(g, g, rows * F);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)C, (int)F, (int)rows, 1.0f, dpe,
                    (int)C, g, (int)F, 1.0f, dw2, (int)F);
    }
    if (!need_dh) return;
        /* dh1 overwrites u in place; dh3 goes to its own buffer (the activation's branch outside
         * the loop over f, so that the loop runs in vector lanes) */
#pragma omp parallel for
    for (int64_t s = 0; s < rows; s++) {
        const float ws = weight[pe[s]];
        const float *a = h1 + s * F, *b = h3 + s * F;
        float *us = u + s * F, *d3 = dh3 + s * F;
        if (act.clamp) {
#pragma omp simd
            for (int64_t f = 0; f < F; f++) {
                float d1, dd3;
                cpu_swiglu_oai_grad(a[f], b[f], act.alpha, act.limit, act.beta, &d1, &dd3);
                d3[f] = ws * us[f] * dd3;
                us[f] = ws * us[f] * d1;
            }
            continue;
        }
#pragma omp simd
        for (int64_t f = 0; f < F; f++) {
            const float z = a[f], sg = cpu_sigmoidf(z), dg = ws * us[f];
            d3[f] = dg * z * sg;
            us[f] = dg * b[f] * sg * (1.0f + z * (1.0f - sg));
        }
    }
    if (bf16) { /* dh1 and dh3 are GEMM operands from here on */
        mt_bf16_round_n(u, u, rows * F);
        mt_bf16_round_n(dh3, dh3, rows * F);
    }
    if (dw1) /* dw1 (F,C) += dh1^T (F,rows) xe (rows,C) */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)F, (int)C, (int)rows, 1.0f, u,
                    (int)F, xe, (int)C, 1.0f, dw1, (int)C);
    if (dw3)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)F, (int)C, (int)rows, 1.0f, dh3,
                    (int)F, xe, (int)C, 1.0f, dw3, (int)C);
    if (dxe) { /* dxe (rows,C) += dh1 w1 + dh3 w3, w (F,C) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)C, (int)F, 1.0f, u,
                    (int)F, w1, (int)C, 1.0f, dxe, (int)C);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)C, (int)F, 1.0f, dh3,
                    (int)F, w3, (int)C, 1.0f, dxe, (int)C);
    }
}

/* ---- the split op's node adapters ---- */

/* src, or in bf16 mode its rounded copy in node scratch. */
static const float *moe_operand(const mt_node *n, const float *src, int64_t count,
                                const char *what) {
    if (n->ip[0] != MT_BF16 || !src) return src;
    float *r = mt_node_scratch(n, sizeof(float) * (size_t)(count ? count : 1), what);
    mt_bf16_round_n(r, src, count);
    return r;
}

void cpu_moe_expert_ffn_fwd_node(const mt_node *n) {
    const int64_t C = n->in[0]->shape[1], F = n->in[3]->shape[0];
    const int64_t r0 = n->ip[1], rows = n->ip[2];
    if (rows == 0) return; /* no slots: nothing to write, the weights are never read */
    const bool keep_h = n->saved[0] != NULL;
    float *h1 = keep_h ? n->saved[0]->data : mt_node_scratch(n, sizeof(float) * rows * F, "h1");
    float *h3 = keep_h ? n->saved[1]->data : mt_node_scratch(n, sizeof(float) * rows * F, "h3");
    float *g = mt_node_scratch(n, sizeof(float) * (size_t)(rows * F), "moe_expert g");
    const float *xe = moe_operand(n, (const float *)n->in[0]->data + r0 * C, rows * C, "xe bf16");
    const float *w1 = moe_operand(n, n->in[3]->data, F * C, "w1 bf16");
    const float *w3 = moe_operand(n, n->in[4]->data, F * C, "w3 bf16");
    const float *w2 = moe_operand(n, n->in[5]->data, C * F, "w2 bf16");
    float *ye = (float *)n->out->data + r0 * C;
    cpu_moe_expert_fwd(rows, C, F, n->ip[0] == MT_BF16, !n->in[3]->grad, mt_node_act(n, 4), xe, w1,
                       w3, w2, h1, h3, g, ye);
    const float *weight = n->in[1]->data;
    const int32_t *pe = (const int32_t *)n->in[2]->data + r0;
#pragma omp parallel for
    for (int64_t s = 0; s < rows; s++)
        for (int64_t c = 0; c < C; c++) ye[s * C + c] *= weight[pe[s]];
}

void cpu_moe_expert_ffn_bwd_node(const mt_node *n) {
    const int64_t C = n->in[0]->shape[1], F = n->in[3]->shape[0];
    const int64_t r0 = n->ip[1], rows = n->ip[2];
    float *dx = n->in[0]->grad, *dweight = n->in[1]->grad;
    float *dw1 = n->in[3]->grad, *dw3 = n->in[4]->grad, *dw2 = n->in[5]->grad;
    const bool need_dh = dx || dw1 || dw3, need_u = need_dh || dweight;
    if (rows == 0 || (!need_u && !dw2)) return;
    MT_CHECK(n->saved[0] && n->saved[1],
             "moe_expert_ffn backward (expert %d): hidden activations "
             "were not saved",
             (int)n->ip[3]);
    const size_t bf = sizeof(float) * (size_t)(rows * F);
    const float *dpe =
        moe_operand(n, (const float *)n->out->grad + r0 * C, rows * C, "moe_expert dout bf16");
    const float *xe = (dw1 || dw3) ? moe_operand(n, (const float *)n->in[0]->data + r0 * C,
                                                 rows * C, "moe_expert xe bf16")
                                   : NULL;
    const float *w1 = dx ? moe_operand(n, n->in[3]->data, F * C, "w1 bf16") : NULL;
    const float *w3 = dx ? moe_operand(n, n->in[4]->data, F * C, "w3 bf16") : NULL;
    const float *w2 = need_u ? moe_operand(n, n->in[5]->data, C * F, "w2 bf16") : NULL;
    float *g = mt_node_scratch(n, bf, "moe_expert g");
    float *u = mt_node_scratch(n, bf, "moe_expert u");
    float *dh3 = mt_node_scratch(n, bf, "moe_expert dh3");
    cpu_moe_expert_bwd(rows, C, F, n->ip[0] == MT_BF16, mt_node_act(n, 4), dpe, xe, n->in[1]->data,
                       (const int32_t *)n->in[2]->data + r0, w1, w3, w2, n->saved[0]->data,
                       n->saved[1]->data, g, u, dh3, dx ? dx + r0 * C : NULL, dweight, dw1, dw3,
                       dw2);
}
