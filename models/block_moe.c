/* block_moe.c: the mixture of experts and its router (Text-01 spec 6; M2: minimax-m3.md 6):
 *
 *   z = h Wgate^T (N,E)
 *   router (plan): softmax(z), top-K renormalised (Text-01) | s = sigmoid(z), the top-K of
 *                  s + e_score_correction_bias chosen, weights = routed_scale * s / sum of the
 *                  chosen s (M2; the bias is a buffer: it chooses, the unbiased scores weight)
 *   y = sum over the chosen e of weight * w2_e (act(w1_e h, w3_e h))  (act: SiLU SwiGLU, or
 *       the plan's clamped one)
 *   [+ the shared expert down (act(gate h, up h)) on every token, weight 1 (M3)]
 *
 * The experts run in expert order 0..E-1, each on its tokens (one that got none contributes
 * exactly zero): as one op over the layer's stacked experts (gather unit "layer"), or as
 * dispatch, one op per expert in the expert's own bucket, combine (gather unit "expert").
 * Parameters (layer l): block_sparse_moe.gate.weight (E, C), [e_score_correction_bias (E)],
 * experts.{e}.w1/w3.weight (F, C), experts.{e}.w2.weight (C, F), [shared_experts.gate_proj and
 * up_proj.weight (Fs, C), down_proj.weight (C, Fs)]. With the gather unit "expert" the shared
 * expert has its own bucket after the routed experts', entered by every rank. */
#include <stdlib.h>

#include "models/block.h"

static void moe_shared_layout(mt_layout_cursor *cur, const mt_layer_plan *p, int l,
                              mt_mlp_params *w) {
    const int64_t C = cur->m->cfg.hidden_size, Fs = p->shared_ffn;
    w->gate_proj =
        mt_layout_add(cur, true, 2, Fs, C, MT_INIT_NORMAL,
                      "model.layers.%d.block_sparse_moe.shared_experts.gate_proj.weight", l, 0);
    w->up_proj =
        mt_layout_add(cur, true, 2, Fs, C, MT_INIT_NORMAL,
                      "model.layers.%d.block_sparse_moe.shared_experts.up_proj.weight", l, 0);
    w->down_proj =
        mt_layout_add(cur, true, 2, C, Fs, MT_INIT_NORMAL,
                      "model.layers.%d.block_sparse_moe.shared_experts.down_proj.weight", l, 0);
}

/* Expert e's matrix k of layer l (k = 0, 1, 2: w1 (F,C), w3 (F,C), w2 (C,F)) into its stack. */
static void moe_expert_add(mt_layout_cursor *cur, const mt_layer_plan *p, int l, int e, int k,
                           bool align, mt_moe_params *w) {
    static const char *const name[3] = {"model.layers.%d.block_sparse_moe.experts.%d.w1.weight",
                                        "model.layers.%d.block_sparse_moe.experts.%d.w3.weight",
                                        "model.layers.%d.block_sparse_moe.experts.%d.w2.weight"};
    mt_tensor **stack[3] = {w->w1, w->w3, w->w2};
    const int64_t C = cur->m->cfg.hidden_size, F = p->expert_ffn;
    stack[k][e] =
        mt_layout_add(cur, align, 2, k == 2 ? C : F, k == 2 ? F : C, MT_INIT_NORMAL, name[k], l, e);
}

void mt_block_moe_layout(mt_layout_cursor *cur, const mt_layer_plan *p, int l, mt_moe_params *w) {
    const int64_t C = cur->m->cfg.hidden_size;
    const int E = p->n_experts;
    w->gate = mt_layout_add(cur, true, 2, E, C, MT_INIT_NORMAL,
                            "model.layers.%d.block_sparse_moe.gate.weight", l, 0);
    if (p->router_bias) {
        w->bias = mt_layout_add(cur, true, 1, E, 0, MT_INIT_ZEROS,
                                "model.layers.%d.block_sparse_moe.e_score_correction_bias", l, 0);
        mt_layout_mark_buffer(cur);
    }
    w->w1 = mt_calloc((size_t)(3 * E > 0 ? 3 * E : 1), sizeof(mt_tensor *), "expert parameters");
    w->w3 = w->w1 + E;
    w->w2 = w->w3 + E;
    if (cur->m->unit == MT_GATHER_EXPERT) {
        mt_layout_end_bucket(cur);
        for (int e = 0; e < E; e++) {
            for (int k = 0; k < 3; k++) moe_expert_add(cur, p, l, e, k, true, w);
            mt_layout_end_bucket(cur);
        }
        if (p->shared_ffn > 0) {
            moe_shared_layout(cur, p, l, &w->shared);
            mt_layout_end_bucket(cur);
        }
        return;
    }
    for (int k = 0; k < 3; k++)
        for (int e = 0; e < E; e++) moe_expert_add(cur, p, l, e, k, e == 0, w);
    if (p->shared_ffn > 0) moe_shared_layout(cur, p, l, &w->shared);
    mt_layout_end_bucket(cur);
}

int mt_block_moe_params(const mt_layer_plan *p) {
    return p->mlp == MT_MLP_DENSE ? 3
                                  : 1 + p->router_bias + 3 * p->n_experts + 3 * (p->shared_ffn > 0);
}

int mt_block_moe_buckets(const mt_minimax *m, const mt_layer_plan *p) {
    return m->unit == MT_GATHER_EXPERT && p->mlp == MT_MLP_MOE ? p->n_experts + (p->shared_ffn > 0)
                                                               : 0;
}

/* All experts' w (w1, w3: (F,C) each; w2: (C,F)) of layer l as one (E,d1,d2) tensor over the
 * bucket: the layout keeps each kind's experts adjacent in expert order. Checked here, since
 * the op reads expert e at offset e*d1*d2 in data and in grad. */
static mt_tensor *moe_experts(mt_minimax *m, mt_ctx *c, int l, mt_tensor *const *stack,
                              const char *w, int64_t d1, int64_t d2) {
    const int E = m->plan[l].n_experts;
    mt_tensor *p0 = stack[0];
    for (int e = 1; e < E; e++) {
        const mt_tensor *pe = stack[e];
        const float *want = (const float *)p0->data + (int64_t)e * d1 * d2;
        const float *want_g = p0->grad ? (const float *)p0->grad + (int64_t)e * d1 * d2 : NULL;
        MT_CHECK(
            pe->data == want && pe->grad == want_g,
            "minimax: layer %d expert %d %s is not stored right after expert %d in its "
            "bucket (data and gradient); the MoE op needs the experts stacked as (E,%lld,%lld)",
            l, e, w, e - 1, (long long)d1, (long long)d2);
    }
    mt_tensor *t = mt_block_host_tensor(c, "experts");
    mt_tensor_wrap(t, MT_F32, 3, (int64_t[]){E, d1, d2}, p0->data, p0->grad, p0->name);
    t->dev = p0->dev;
    return t;
}

/* The shared expert on every token x (N,C), weight 1 (not routed_scale). */
static mt_tensor *moe_shared(mt_minimax *m, mt_ctx *c, int l, mt_tensor *x) {
    return mt_block_ffn(c, &m->plan[l], x, &m->layers[l].moe.shared);
}

/* The router: chosen experts (io->route_idx) and their weights (N,K). */
static mt_tensor *moe_route(mt_minimax *m, mt_ctx *c, int l, mt_tensor *x, mt_block_io *io) {
    const mt_layer_plan *p = &m->plan[l];
    const mt_moe_params *w = &m->layers[l].moe;
    io->router = mt_matmul(c, x, w->gate);
    if (p->router == MT_ROUTER_SOFTMAX)
        return mt_moe_route(c, io->router, p->top_k, &io->route_idx);
    mt_tensor *bias = p->router_bias ? w->bias : NULL;
    return mt_moe_route_sigmoid(c, io->router, bias, p->top_k, p->routed_scale, &io->route_idx);
}

/* Expert parallelism (m->ep, size P > 1): the slots of this rank's tokens, sorted by expert and
 * so by owner (expert e lives on group rank e / Eq), travel to their owners with their routing
 * weights; on return *xs, *plan and *w describe the rows this rank's experts run on: local
 * expert j's rows contiguous in source-rank order, each its own assignment (K = 1, weight
 * (R,1)), the other experts empty. sent and got (P*Eq each) receive the block counts the way
 * back needs. The experts' products are those of the unsharded run, row by row. */
static void moe_ep_send(mt_minimax *m, mt_ctx *c, mt_tensor **xs, mt_moe_plan *plan, mt_tensor **w,
                        mt_tensor *idx, int64_t *sent, int64_t *got) {
    const mt_exchange *ex = m->ep;
    const int E = plan->E, P = ex->size, Eq = E / P;
    const int64_t A = plan->N * plan->K;
    for (int e = 0; e < E; e++) sent[e] = plan->host_offsets[e + 1] - plan->host_offsets[e];
    mt_exchange_counts(ex, Eq, sent, got);
    /* the weights in slot order: the same stable sort of the same expert ids, one per row */
    mt_moe_plan plan_w;
    mt_tensor *ws = mt_moe_dispatch(c, mt_view(c, *w, 2, (int64_t[]){A, 1}),
                                    mt_view(c, idx, 2, (int64_t[]){A, 1}), E, &plan_w);
    *xs = mt_ep_exchange(c, *xs, ex, Eq, sent, got, true);
    *w = mt_ep_exchange(c, ws, ex, Eq, sent, got, true);
    const int64_t R = (*xs)->shape[0];
    MT_CHECK(R <= INT32_MAX, "moe: expert parallelism: %lld rows arrive, above the int32 slots",
             (long long)R);
    int32_t *off = mt_arena_alloc(&c->host, sizeof(int32_t) * (size_t)(E + 1), "ep offsets");
    int32_t *ident = mt_arena_alloc(&c->host, sizeof(int32_t) * (size_t)(R + 1), "ep slots");
    off[0] = 0;
    for (int e = 0; e < E; e++) {
        const int j = e - ex->rank * Eq;
        int64_t rows = 0;
        if (j >= 0 && j < Eq)
            for (int s = 0; s < P; s++) rows += got[s * Eq + j];
        off[e + 1] = off[e] + (int32_t)rows;
    }
    for (int64_t r = 0; r < R; r++) ident[r] = (int32_t)r;
    mt_tensor *offsets = mt_tensor_new(c, MT_I32, 1, (int64_t[]){E + 1}, "ep.offsets");
    mt_tensor *perm = mt_tensor_new(c, MT_I32, 1, (int64_t[]){R}, "ep.perm");
    c->be->to_device(offsets->data, off, sizeof(int32_t) * (size_t)(E + 1));
    if (R > 0) c->be->to_device(perm->data, ident, sizeof(int32_t) * (size_t)R);
    *plan = (mt_moe_plan){offsets, perm, perm, off, R, E, 1};
}

mt_tensor *mt_block_moe_forward(mt_minimax *m, mt_ctx *c, int l, mt_tensor *h2, mt_block_io *io) {
    const mt_layer_plan *p = &m->plan[l];
    const mt_moe_params *wp = &m->layers[l].moe;
    const int64_t B = h2->shape[0], T = h2->shape[1], C = m->cfg.hidden_size, F = p->expert_ffn;
    mt_tensor *x = mt_view(c, h2, 2, (int64_t[]){B * T, C});
    mt_tensor *w = moe_route(m, c, l, x, io);
    const mt_act act = mt_block_act(p);
    mt_tensor *y;
    if (m->unit == MT_GATHER_EXPERT) {
        /* each expert in its own bucket: leave the layer's, then enter the experts' in order
         * (every one, also those without tokens, so every rank makes the same collectives);
         * the combine and the residual use no parameters and run in no bucket. A layer being
         * recomputed in the backward defers its experts' forwards to their backwards (the
         * layer's output is kept, nothing reads these values): each expert is gathered once,
         * by the tape's hook, for both; ys is zeroed so the combine reads defined values. */
        mt_moe_plan plan, run;
        mt_tensor *xs = mt_moe_dispatch(c, x, io->route_idx, p->n_experts, &plan), *wr = w;
        run = plan;
        const bool ep = m->ep && m->ep->size > 1;
        int64_t *sent = NULL, *got = NULL;
        if (ep) {
            sent = mt_arena_alloc(&c->host, sizeof(int64_t) * 2 * (size_t)p->n_experts, "ep");
            got = sent + p->n_experts;
            moe_ep_send(m, c, &xs, &run, &wr, io->route_idx, sent, got);
        }
        mt_tensor *ys = mt_moe_expert_out(c, &run, C);
        mt_block_leave(c, io->hooks, io->open_bucket);
        io->open_bucket = -1;
        const bool defer = c->recomputing > 0;
        const mt_bucket_hooks *hooks = defer ? NULL : io->hooks;
        if (defer) c->be->zero(ys->data, mt_nbytes(ys));
        c->defer_forward = defer;
        for (int e = 0; e < p->n_experts; e++) {
            const int b = mt_minimax_expert_bucket(m, l, e);
            mt_block_enter(m, c, hooks, b);
            mt_moe_expert_ffn_act(c, xs, &run, wr, e, wp->w1[e], wp->w3[e], wp->w2[e], ys, &act);
            mt_block_leave(c, hooks, b);
        }
        c->defer_forward = false;
        if (ep) ys = mt_ep_exchange(c, ys, m->ep, p->n_experts / m->ep->size, sent, got, false);
        y = mt_moe_combine(c, ys, &plan);
        if (p->shared_ffn > 0) {
            /* its own bucket, entered with the hooks also when recomputing: the shared expert
             * is three ops, whose forwards cannot wait for their backwards as one expert op's
             * can, so a recomputed layer gathers it for the forward and again (the tape's
             * hook) for the backward */
            const int b = mt_minimax_layer_last_bucket(m, l);
            mt_block_enter(m, c, io->hooks, b);
            y = mt_add(c, y, moe_shared(m, c, l, x));
            mt_block_leave(c, io->hooks, b);
        }
    } else {
        mt_tensor *w1 = moe_experts(m, c, l, wp->w1, "w1", F, C);
        mt_tensor *w3 = moe_experts(m, c, l, wp->w3, "w3", F, C);
        mt_tensor *w2 = moe_experts(m, c, l, wp->w2, "w2", C, F);
        y = mt_moe_experts_act(c, x, io->route_idx, w, w1, w3, w2, &act);
        if (p->shared_ffn > 0) y = mt_add(c, y, moe_shared(m, c, l, x));
    }
    return mt_view(c, y, 3, (int64_t[]){B, T, C});
}

static uint64_t moe_splitmix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

mt_tensor *mt_block_moe_jitter(mt_ctx *c, float jitter, int l, uint64_t seed, mt_tensor *h) {
    const int64_t n = mt_numel(h);
    float *host = mt_malloc((size_t)(n ? n : 1) * sizeof(float), "router jitter");
    const uint64_t key = moe_splitmix64(moe_splitmix64(seed) ^ (uint64_t)l);
    const double j = (double)jitter;
    for (int64_t i = 0; i < n; i++) {
        const double u = (double)(moe_splitmix64(key ^ (uint64_t)i) >> 40) * 0x1.0p-24;
        host[i] = (float)((1.0 - j) + 2.0 * j * u);
    }
    mt_tensor *noise = mt_tensor_new(c, MT_F32, h->ndim, h->shape, "router jitter");
    c->be->to_device(noise->data, host, (size_t)n * sizeof(float));
    free(host);
    return mt_mul(c, h, noise);
}
