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

/* The threads the expert loops use: all of them when at least two experts a thread hold rows
 * and some expert has more rows than a decode step's (MT_GEMM_ROWS_MAX: at that size the row
 * kernel split over the threads is faster, measured at batch 8), else 1 (the experts in order,
 * each GEMM threaded inside). */
static int moe_experts_threads(const int32_t *offsets, int E) {
    const int nt = omp_get_max_threads();
    int busy = 0;
    for (int e = 0; e < E; e++) busy += offsets[e + 1] > offsets[e];
    const bool big = cpu_moe_perm_max_rows(offsets, E) > MT_GEMM_ROWS_MAX;
    return nt > 1 && busy >= 2 * nt && big ? nt : 1;
}

/* What every expert of one call shares: the dims, the permutation, the tensors and the
 * scratch (the bf16 weights wr: 3 F C floats a thread; h1, h3 when not kept, g, u, dh3: max rows
 * F floats a thread; NULL where a pass has none). */
typedef struct {
    cpu_moe_dims d;
    cpu_moe_perm pm;
    int64_t max_rows;
    const float *weight, *w1, *w3, *w2;
    float *h1, *h3, *xp, *yp, *dp, *dxp, *g, *u, *dh3, *wr;
    float *dweight, *dw1, *dw3, *dw2;
    int32_t *order; /* E: the experts' order side by side (moe_for_experts) */
    bool keep_h, infer, need_u;
} moe_call;

/* order[0..E) = the experts by rows, most first (ties: lower index), so that side by side the
 * last expert a thread takes is a small one: in index order a large expert taken last kept
 * the other threads waiting for it. */
static void moe_experts_by_rows(const int32_t *offsets, int E, int32_t *order) {
    for (int e = 0; e < E; e++) { /* insertion sort: E is at most a few hundred */
        const int32_t rows = offsets[e + 1] - offsets[e];
        int i = e;
        for (; i > 0 && offsets[order[i - 1] + 1] - offsets[order[i - 1]] < rows; i--)
            order[i] = order[i - 1];
        order[i] = e;
    }
}

/* Runs body(c, e, thread) for every expert e: side by side (dynamic, most rows first) on nt > 1
 * threads, in order on the calling thread otherwise, without a parallel region, so the GEMMs
 * and loops inside keep their own threads (a one-thread region around them would nest their
 * teams). Each expert writes only its own rows and gradients, so the order changes no value. */
static void moe_for_experts(const moe_call *c, int nt,
                            void (*body)(const moe_call *, int, int64_t)) {
    if (nt > 1) {
        moe_experts_by_rows(c->pm.offsets, c->d.E, c->order);
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
        for (int i = 0; i < c->d.E; i++) body(c, c->order[i], omp_get_thread_num());
        return;
    }
    for (int e = 0; e < c->d.E; e++) body(c, e, 0);
}

/* Expert e's forward on thread th (cpu_moe_expert_fwd) into its slots of yp. */
static void moe_expert_fwd_at(const moe_call *c, int e, int64_t th) {
    const int64_t C = c->d.C, F = c->d.F, off = c->pm.offsets[e], rows = c->pm.offsets[e + 1] - off;
    if (rows == 0) return; /* contributes nothing */
    const float *w1e = c->w1 + e * F * C, *w3e = c->w3 + e * F * C, *w2e = c->w2 + e * C * F;
    if (c->wr) {
        float *wt = c->wr + th * 3 * F * C;
        mt_bf16_round_n(wt, w1e, F * C);
        mt_bf16_round_n(wt + F * C, w3e, F * C);
        mt_bf16_round_n(wt + 2 * F * C, w2e, C * F);
        w1e = wt, w3e = wt + F * C, w2e = wt + 2 * F * C;
    }
    const int64_t sc = th * c->max_rows * F;
    float *h1e = c->keep_h ? c->h1 + off * F : c->h1 + sc;
    float *h3e = c->keep_h ? c->h3 + off * F : c->h3 + sc;
    cpu_moe_expert_fwd(rows, C, F, c->wr != NULL, c->infer, c->d.act, c->xp + off * C, w1e, w3e,
                       w2e, h1e, h3e, c->g + sc, c->yp + off * C);
}

/* Gathers x by slot, the experts (moe_experts_threads of them at a time), the weighted combine
 * into out (N,C). */
static void moe_experts_fwd(moe_call *c, const float *x, float *out) {
    const cpu_moe_dims d = c->d;
    cpu_moe_rows_gather(x, c->pm.perm, d.N * d.K, d.K, d.C, c->xp);
    if (c->wr) mt_bf16_round_n(c->xp, c->xp, d.N * d.K * d.C);
    c->max_rows = cpu_moe_perm_max_rows(c->pm.offsets, d.E);
    moe_for_experts(c, moe_experts_threads(c->pm.offsets, d.E), moe_expert_fwd_at);
    memset(out, 0, sizeof(float) * (size_t)(d.N * d.C));
    cpu_moe_rows_combine(c->yp, c->pm.inv, c->weight, d.N, d.K, d.C, out);
}

/* Expert e's backward on thread th (cpu_moe_expert_bwd): its slots of dxp, its dweight entries,
 * its weight gradients. */
static void moe_expert_bwd_at(const moe_call *c, int e, int64_t th) {
    const int64_t C = c->d.C, F = c->d.F, off = c->pm.offsets[e], rows = c->pm.offsets[e + 1] - off;
    if (rows == 0) return; /* no rows: every gradient of this expert stays untouched */
    const float *w1e = c->w1 + e * F * C, *w3e = c->w3 + e * F * C, *w2e = c->w2 + e * C * F;
    if (c->wr) { /* only the weights a requested product reads */
        float *wt = c->wr + th * 3 * F * C;
        if (c->dxp) {
            mt_bf16_round_n(wt, w1e, F * C);
            mt_bf16_round_n(wt + F * C, w3e, F * C);
            w1e = wt, w3e = wt + F * C;
        }
        if (c->need_u) {
            mt_bf16_round_n(wt + 2 * F * C, w2e, C * F);
            w2e = wt + 2 * F * C;
        }
    }
    const int64_t sc = th * c->max_rows * F;
    cpu_moe_expert_bwd(rows, C, F, c->wr != NULL, c->d.act, c->dp + off * C,
                       c->xp ? c->xp + off * C : NULL, c->weight, c->pm.perm + off, w1e, w3e, w2e,
                       c->h1 + off * F, c->h3 + off * F, c->g + sc, c->u + sc, c->dh3 + sc,
                       c->dxp ? c->dxp + off * C : NULL, c->dweight,
                       c->dw1 ? c->dw1 + e * F * C : NULL, c->dw3 ? c->dw3 + e * F * C : NULL,
                       c->dw2 ? c->dw2 + e * C * F : NULL);
}

/* The experts' backward on the gathered dout (c->dp), then dx[n] += sum_j dxp[inv[n*K+j]]. */
static void moe_experts_bwd(moe_call *c, const float *dout, const float *x, float *dx) {
    const cpu_moe_dims d = c->d;
    const int64_t A = d.N * d.K;
    const bool need_dh = dx || c->dw1 || c->dw3;
    c->need_u = need_dh || c->dweight;
    if (!c->need_u && !c->dw2) return;
    if (c->dw1 || c->dw3) cpu_moe_rows_gather(x, c->pm.perm, A, d.K, d.C, c->xp);
    cpu_moe_rows_gather(dout, c->pm.perm, A, d.K, d.C, c->dp);
    if (c->wr && c->xp) mt_bf16_round_n(c->xp, c->xp, A * d.C);
    if (c->wr) mt_bf16_round_n(c->dp, c->dp, A * d.C);
    if (c->dxp) memset(c->dxp, 0, sizeof(float) * (size_t)(A * d.C)); /* the experts add in */
    c->max_rows = cpu_moe_perm_max_rows(c->pm.offsets, d.E);
    moe_for_experts(c, moe_experts_threads(c->pm.offsets, d.E), moe_expert_bwd_at);
    if (dx) cpu_moe_rows_combine(c->dxp, c->pm.inv, NULL, d.N, d.K, d.C, dx);
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

/* The call's shared part from the node: dims, permutation, router weights and expert weights
 * (the passes add their buffers). */
static moe_call moe_call_of(const mt_node *n) {
    moe_call c = {.d = moe_node_dims(n),
                  .pm = moe_node_perm(n),
                  .weight = n->in[2]->data,
                  .w1 = n->in[3]->data,
                  .w3 = n->in[4]->data,
                  .w2 = n->in[5]->data};
    c.order = mt_node_scratch(n, sizeof(int32_t) * (size_t)c.d.E, "moe_experts order");
    return c;
}

void cpu_moe_experts_fwd_node(const mt_node *n) {
    moe_call c = moe_call_of(n);
    const cpu_moe_dims d = c.d;
    const cpu_moe_perm pm = c.pm;
    int64_t A = d.N * d.K;
    int64_t max_rows =
        cpu_moe_perm_build(n->in[1]->data, d.N, d.K, d.E, pm.offsets, pm.perm, pm.inv);
    bool keep_h = n->saved[3] != NULL;
    const int nt = moe_experts_threads(pm.offsets, d.E);
    const size_t bf = sizeof(float) * (size_t)(nt * max_rows * d.F);
    c.h1 = keep_h ? n->saved[3]->data : mt_node_scratch(n, bf, "moe_experts h1");
    c.h3 = keep_h ? n->saved[4]->data : mt_node_scratch(n, bf, "moe_experts h3");
    c.xp = mt_node_scratch(n, sizeof(float) * (size_t)(A * d.C), "moe_experts xp");
    c.yp = mt_node_scratch(n, sizeof(float) * (size_t)(A * d.C), "moe_experts yp");
    c.g = mt_node_scratch(n, bf, "moe_experts g");
    c.wr = moe_bf16_weights(n, d, nt);
    c.keep_h = keep_h;
    c.infer = !n->in[3]->grad;
    moe_experts_fwd(&c, n->in[0]->data, n->out->data);
}

void cpu_moe_experts_bwd_node(const mt_node *n) {
    moe_call c = moe_call_of(n);
    const cpu_moe_dims d = c.d;
    const cpu_moe_perm pm = c.pm;
    MT_CHECK(n->saved[3] && n->saved[4], "moe_experts backward: hidden activations were not saved");
    int64_t A = d.N * d.K, max_rows = cpu_moe_perm_max_rows(pm.offsets, d.E);
    float *dx = n->in[0]->grad;
    const int nt = moe_experts_threads(pm.offsets, d.E);
    size_t bc = sizeof(float) * (size_t)(A * d.C),
           bf = sizeof(float) * (size_t)(nt * max_rows * d.F);
    c.h1 = n->saved[3]->data;
    c.h3 = n->saved[4]->data;
    c.dweight = n->in[2]->grad;
    c.dw1 = n->in[3]->grad;
    c.dw3 = n->in[4]->grad;
    c.dw2 = n->in[5]->grad;
    c.xp = (c.dw1 || c.dw3) ? mt_node_scratch(n, bc, "moe_experts xp") : NULL;
    c.dp = mt_node_scratch(n, bc, "moe_experts dout perm");
    c.dxp = dx ? mt_node_scratch(n, bc, "moe_experts dx perm") : NULL;
    c.g = mt_node_scratch(n, bf, "moe_experts g");
    c.u = mt_node_scratch(n, bf, "moe_experts u");
    c.dh3 = mt_node_scratch(n, bf, "moe_experts dh3");
    c.wr = moe_bf16_weights(n, d, nt);
    moe_experts_bwd(&c, n->out->grad, n->in[0]->data, dx);
}
