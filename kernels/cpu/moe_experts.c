/* moe_experts.c: the SwiGLU experts (spec 6.2) with sparse dispatch: tokens are permuted by
 * expert (counting sort), each expert runs BLAS GEMMs on its contiguous rows in the fixed order
 * e = 0..E-1 (the body of moe_expert_ffn.c), and the weighted rows are combined back per
 * token (moe_dispatch.c and moe_combine.c hold the permutation and the combine).
 *
 * Node layout (autograd/op_moe.c): in = {x (N,C), idx (N,K) I32, weight (N,K), w1 (E,F,C),
 * w3 (E,F,C), w2 (E,C,F)}; saved[0] offsets (E+1) I32, saved[1] perm (N*K) I32, saved[2] inv
 * (N*K) I32, saved[3] h1 and saved[4] h3 (N*K,F): the pre-activations w1 x and w3 x by slot,
 * NULL when no backward will run.
 * Saved vs recomputed: h1 and h3 are saved (2 N K F floats) because recomputing them costs two
 * of the forward's three GEMMs; the gathered x (N K C) is re-gathered (a copy), and
 * g = silu(h1) * h3 is recomputed elementwise. The forward output of an expert, y_e(x_n), is not
 * needed: dweight = <dout_n, w2_e g> = <w2_e^T dout_n, g>, and w2_e^T dout_n is the product the
 * backward forms anyway.
 *
 * bf16 mode (node ip[0] == MT_BF16, mt_ctx.compute_dtype): every GEMM operand is rounded
 * through bf16 before the same sgemm runs: the gathered x and dout (in place: they are copies),
 * the expert's weights (into a per-expert scratch), g (after the dw2 path's row scaling) and
 * dh1, dh3. GEMM outputs (h1, h3, u, y) and everything elementwise stay fp32, as does dweight,
 * which is a dot product, not a GEMM. kernels/cuda/moe_experts.cu rounds at the same points.
 *
 * Threads: the experts are independent (each writes its own slots' rows, dweight entries and
 * weight gradients), so with enough experts holding rows they run side by side, one thread an
 * expert (dynamic), each GEMM on its calling thread (the OpenMP OpenBLAS inside a parallel
 * region): small experts' GEMMs (M2: 32 experts of F = 128 in the bench model) reach a core's
 * rate, where one GEMM split over the threads pays a fork and join per product. Each expert's
 * arithmetic is the same either way; scratch (g, u, dh3, unkept h1 and h3, bf16 weights) is
 * one set a thread (moe_experts_threads). */
#include <omp.h>
#include <string.h>

#include "bf16.h"
#include "cpu_ops.h"
#include "moe.h"

/* The threads the expert loops use: all of them when at least two experts a thread hold rows,
 * else 1 (the experts in order, each GEMM threaded inside). */
static int moe_experts_threads(const int32_t *offsets, int E) {
    const int nt = omp_get_max_threads();
    int busy = 0;
    for (int e = 0; e < E; e++) busy += offsets[e + 1] > offsets[e];
    return nt > 1 && busy >= 2 * nt ? nt : 1;
}

/* The fp32 kernel when wr is NULL; bf16 mode with wr = 3 F C floats of scratch a thread for one
 * expert's rounded weights. h1, h3 unkept and g: max rows F floats a thread. */
static void moe_experts_fwd(cpu_moe_dims d, const float *x, const float *weight, const float *w1,
                            const float *w3, const float *w2, cpu_moe_perm pm, float *h1, float *h3,
                            bool keep_h, bool infer, float *xp, float *yp, float *g, float *out,
                            float *wr) {
    const int64_t C = d.C, F = d.F;
    cpu_moe_rows_gather(x, pm.perm, d.N * d.K, d.K, C, xp);
    if (wr) mt_bf16_round_n(xp, xp, d.N * d.K * C);
    const int64_t max_rows = cpu_moe_perm_max_rows(pm.offsets, d.E);
    const int nt = moe_experts_threads(pm.offsets, d.E);
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
    for (int e = 0; e < d.E; e++) {
        int64_t off = pm.offsets[e], rows = pm.offsets[e + 1] - off;
        if (rows == 0) continue; /* contributes nothing */
        const int64_t th = omp_get_thread_num();
        const float *w1e = w1 + e * F * C, *w3e = w3 + e * F * C, *w2e = w2 + e * C * F;
        if (wr) {
            float *wt = wr + th * 3 * F * C;
            mt_bf16_round_n(wt, w1e, F * C);
            mt_bf16_round_n(wt + F * C, w3e, F * C);
            mt_bf16_round_n(wt + 2 * F * C, w2e, C * F);
            w1e = wt, w3e = wt + F * C, w2e = wt + 2 * F * C;
        }
        float *h1e = keep_h ? h1 + off * F : h1 + th * max_rows * F;
        float *h3e = keep_h ? h3 + off * F : h3 + th * max_rows * F;
        cpu_moe_expert_fwd(rows, C, F, wr != NULL, infer, d.act, xp + off * C, w1e, w3e, w2e, h1e,
                           h3e, g + th * max_rows * F, yp + off * C);
    }
    memset(out, 0, sizeof(float) * (size_t)(d.N * C));
    cpu_moe_rows_combine(yp, pm.inv, weight, d.N, d.K, C, out);
}

/* The experts' backward (cpu_moe_expert_bwd, each expert) on the gathered dout, then
 * dx[n] += sum_j dxp[inv[n*K+j]]. The fp32 kernel when wr is NULL; bf16 mode with wr = 3 F C
 * floats of scratch a thread. g, u, dh3: max rows F floats a thread. */
static void moe_experts_bwd(cpu_moe_dims d, const float *dout, const float *x, const float *weight,
                            const float *w1, const float *w3, const float *w2, cpu_moe_perm pm,
                            const float *h1, const float *h3, float *xp, float *dp, float *dxp,
                            float *g, float *u, float *dh3, float *dx, float *dweight, float *dw1,
                            float *dw3, float *dw2, float *wr) {
    const int64_t C = d.C, F = d.F, A = d.N * d.K;
    const bool need_dh = dx || dw1 || dw3;
    const bool need_u = need_dh || dweight;
    if (!need_u && !dw2) return;
    if (dw1 || dw3) cpu_moe_rows_gather(x, pm.perm, A, d.K, C, xp);
    cpu_moe_rows_gather(dout, pm.perm, A, d.K, C, dp);
    if (wr && xp) mt_bf16_round_n(xp, xp, A * C);
    if (wr) mt_bf16_round_n(dp, dp, A * C);
    if (dxp) memset(dxp, 0, sizeof(float) * (size_t)(A * C)); /* the experts add into it */
    const int64_t max_rows = cpu_moe_perm_max_rows(pm.offsets, d.E);
    const int nt = moe_experts_threads(pm.offsets, d.E);
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
    for (int e = 0; e < d.E; e++) {
        int64_t off = pm.offsets[e], rows = pm.offsets[e + 1] - off;
        if (rows == 0) continue; /* no rows: every gradient of this expert stays untouched */
        const int64_t th = omp_get_thread_num(), sc = th * max_rows * F;
        const float *w1e = w1 + e * F * C, *w3e = w3 + e * F * C, *w2e = w2 + e * C * F;
        if (wr) { /* only the weights a requested product reads */
            float *wt = wr + th * 3 * F * C;
            if (dx) {
                mt_bf16_round_n(wt, w1e, F * C);
                mt_bf16_round_n(wt + F * C, w3e, F * C);
                w1e = wt, w3e = wt + F * C;
            }
            if (need_u) {
                mt_bf16_round_n(wt + 2 * F * C, w2e, C * F);
                w2e = wt + 2 * F * C;
            }
        }
        cpu_moe_expert_bwd(rows, C, F, wr != NULL, d.act, dp + off * C, xp ? xp + off * C : NULL,
                           weight, pm.perm + off, w1e, w3e, w2e, h1 + off * F, h3 + off * F, g + sc,
                           u + sc, dh3 + sc, dxp ? dxp + off * C : NULL, dweight,
                           dw1 ? dw1 + e * F * C : NULL, dw3 ? dw3 + e * F * C : NULL,
                           dw2 ? dw2 + e * C * F : NULL);
    }
    if (dx) cpu_moe_rows_combine(dxp, pm.inv, NULL, d.N, d.K, C, dx);
}

/* bf16 mode: 3 F C floats a thread for one expert's rounded w1, w3, w2; NULL in fp32 mode. */
static float *moe_bf16_weights(const mt_node *n, cpu_moe_dims d, int nt) {
    if (n->ip[0] != MT_BF16) return NULL;
    return mt_node_scratch(n, sizeof(float) * (size_t)(nt * 3 * d.F * d.C + 1),
                           "moe_experts w bf16");
}

static cpu_moe_dims moe_node_dims(const mt_node *n) {
    cpu_moe_dims d = {.N = n->in[0]->shape[0],
                      .C = n->in[0]->shape[1],
                      .F = n->in[3]->shape[1],
                      .E = (int)n->in[3]->shape[0],
                      .K = (int)n->in[1]->shape[1],
                      .act = mt_node_act(n, 4)};
    return d;
}

static cpu_moe_perm moe_node_perm(const mt_node *n) {
    cpu_moe_perm pm = {n->saved[0]->data, n->saved[1]->data, n->saved[2]->data};
    return pm;
}

void cpu_moe_experts_fwd_node(const mt_node *n) {
    cpu_moe_dims d = moe_node_dims(n);
    cpu_moe_perm pm = moe_node_perm(n);
    int64_t A = d.N * d.K;
    int64_t max_rows =
        cpu_moe_perm_build(n->in[1]->data, d.N, d.K, d.E, pm.offsets, pm.perm, pm.inv);
    bool keep_h = n->saved[3] != NULL;
    const int nt = moe_experts_threads(pm.offsets, d.E);
    const size_t bf = sizeof(float) * (size_t)(nt * max_rows * d.F);
    float *h1, *h3;
    if (keep_h) {
        h1 = n->saved[3]->data;
        h3 = n->saved[4]->data;
    } else {
        h1 = mt_node_scratch(n, bf, "moe_experts h1");
        h3 = mt_node_scratch(n, bf, "moe_experts h3");
    }
    float *xp = mt_node_scratch(n, sizeof(float) * (size_t)(A * d.C), "moe_experts xp");
    float *yp = mt_node_scratch(n, sizeof(float) * (size_t)(A * d.C), "moe_experts yp");
    float *g = mt_node_scratch(n, bf, "moe_experts g");
    moe_experts_fwd(d, n->in[0]->data, n->in[2]->data, n->in[3]->data, n->in[4]->data,
                    n->in[5]->data, pm, h1, h3, keep_h, !n->in[3]->grad, xp, yp, g, n->out->data,
                    moe_bf16_weights(n, d, nt));
}

void cpu_moe_experts_bwd_node(const mt_node *n) {
    cpu_moe_dims d = moe_node_dims(n);
    cpu_moe_perm pm = moe_node_perm(n);
    MT_CHECK(n->saved[3] && n->saved[4], "moe_experts backward: hidden activations were not saved");
    int64_t A = d.N * d.K, max_rows = cpu_moe_perm_max_rows(pm.offsets, d.E);
    float *dx = n->in[0]->grad, *dweight = n->in[2]->grad;
    float *dw1 = n->in[3]->grad, *dw3 = n->in[4]->grad, *dw2 = n->in[5]->grad;
    const int nt = moe_experts_threads(pm.offsets, d.E);
    size_t bc = sizeof(float) * (size_t)(A * d.C),
           bf = sizeof(float) * (size_t)(nt * max_rows * d.F);
    float *xp = (dw1 || dw3) ? mt_node_scratch(n, bc, "moe_experts xp") : NULL;
    float *dp = mt_node_scratch(n, bc, "moe_experts dout perm");
    float *dxp = dx ? mt_node_scratch(n, bc, "moe_experts dx perm") : NULL;
    float *g = mt_node_scratch(n, bf, "moe_experts g");
    float *u = mt_node_scratch(n, bf, "moe_experts u");
    float *dh3 = mt_node_scratch(n, bf, "moe_experts dh3");
    moe_experts_bwd(d, n->out->grad, n->in[0]->data, n->in[2]->data, n->in[3]->data, n->in[4]->data,
                    n->in[5]->data, pm, n->saved[3]->data, n->saved[4]->data, xp, dp, dxp, g, u,
                    dh3, dx, dweight, dw1, dw3, dw2, moe_bf16_weights(n, d, nt));
}
