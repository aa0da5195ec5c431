/* minimax.c: the MiniMax-Text-01 forward on the autograd ops (spec sections 2-7), with the
 * backward coming from the tape. The same layer code serves training (whole sequences) and
 * generation (a cached prompt pass, then one token at a time: models/generate.c).
 *
 *   x0 = Embed[ids]                                       (no scaling)
 *   per layer l:  h1 = RMSNorm_in(x)
 *                 a  = lightning(h1) or softmax attention(h1)   (by layer type)
 *                 y  = alpha_mix * h1 + beta_mix * a            (residual = normalised input)
 *                 h2 = RMSNorm_post(y)
 *                 x  = alpha_mlp * h2 + beta_mlp * MoE(h2)
 *   logits = RMSNorm_final(x) lm_head^T;  loss = CE(logits, labels) [+ coef * aux]
 *
 * Buckets (models/minimax.h): every op of a bucket runs with ctx->tag = bucket, inside the
 * hooks' enter/leave, so a sharded owner can gather the bucket before its first use and the
 * tape's tag hook does the same in the backward. With the gather unit "expert" the MoE runs as
 * dispatch, one op per expert (each in its expert's bucket) and combine. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/lightning.h"
#include "models/generate.h"
#include "models/minimax.h"

/* ------------------------------------------------------------------------------------------ */
/* parameters */

static mt_tensor *mm_param(mt_minimax *m, const char *fmt, ...) MT_PRINTF(2, 3);
static mt_tensor *mm_param(mt_minimax *m, const char *fmt, ...) {
    char name[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof(name), fmt, ap);
    va_end(ap);
    int i = mt_minimax_find_param(m, name);
    MT_CHECK(i >= 0, "minimax: the model has no parameter %s", name);
    MT_CHECK(m->params[i].data, "minimax: parameter %s is not bound (bucket %d)", name,
             m->info[i].bucket);
    return &m->params[i];
}

/* Part k of a vocabulary matrix (embed_tokens, lm_head): the k-th parameter of that name, the
 * layout lists them in order. */
static mt_tensor *mm_vocab_part(mt_minimax *m, const char *name, int k) {
    const int i = (int)(mm_param(m, "%s", name) - m->params) + k;
    MT_CHECK(i < m->n_params && strcmp(m->info[i].name, name) == 0 &&
                 m->info[i].src_offset == k * m->vocab_part_rows * m->cfg.hidden_size,
             "minimax: %s has no vocabulary part %d", name, k);
    MT_CHECK(m->params[i].data, "minimax: %s part %d is not bound (bucket %d)", name, k,
             m->info[i].bucket);
    return &m->params[i];
}

static mt_tensor *mm_host_tensor(mt_ctx *c, const char *what) {
    return mt_arena_alloc(&c->host, sizeof(mt_tensor), what);
}

/* All experts' w (w1, w3: (F,C) each; w2: (C,F)) of layer l as one (E,d1,d2) tensor over the
 * bucket: the layout keeps each kind's experts adjacent in expert order. Checked here, since
 * the op reads expert e at offset e*d1*d2 in data and in grad. */
static mt_tensor *mm_experts(mt_minimax *m, mt_ctx *c, int l, const char *w, int64_t d1,
                             int64_t d2) {
    const int E = m->cfg.num_local_experts;
    mt_tensor *p0 = mm_param(m, "model.layers.%d.block_sparse_moe.experts.0.%s.weight", l, w);
    const int i0 = (int)(p0 - m->params);
    for (int e = 1; e < E; e++) {
        /* the layout lists a stack's experts in order: try the next slot before a search */
        char name[160];
        snprintf(name, sizeof(name), "model.layers.%d.block_sparse_moe.experts.%d.%s.weight", l, e,
                 w);
        mt_tensor *pe = i0 + e < m->n_params && strcmp(m->info[i0 + e].name, name) == 0
                            ? &m->params[i0 + e]
                            : mm_param(m, "%s", name);
        const float *want = (const float *)p0->data + (int64_t)e * d1 * d2;
        const float *want_g = p0->grad ? (const float *)p0->grad + (int64_t)e * d1 * d2 : NULL;
        MT_CHECK(
            pe->data == want && pe->grad == want_g,
            "minimax: layer %d expert %d %s is not stored right after expert %d in its "
            "bucket (data and gradient); the MoE op needs the experts stacked as (E,%lld,%lld)",
            l, e, w, e - 1, (long long)d1, (long long)d2);
    }
    mt_tensor *t = mm_host_tensor(c, "experts");
    mt_tensor_wrap(t, MT_F32, 3, (int64_t[]){E, d1, d2}, p0->data, p0->grad, p0->name);
    t->dev = p0->dev;
    return t;
}

/* Expert e's w1, w3 or w2 (k = 0, 1, 2) of layer l with the gather unit "expert", whose layout
 * keeps each expert's three matrices together after expert 0's w1 (p0): a direct index,
 * checked by name, since a name search per expert would scan every parameter (Text-01: 7.7k
 * parameters, 7.7k expert matrices per forward). */
static mt_tensor *mm_expert_param(mt_minimax *m, int p0, int l, int e, int k) {
    static const char *const w[3] = {"w1", "w3", "w2"};
    char name[160];
    snprintf(name, sizeof(name), "model.layers.%d.block_sparse_moe.experts.%d.%s.weight", l, e,
             w[k]);
    const int p = p0 + 3 * e + k;
    if (p < m->n_params && strcmp(m->info[p].name, name) == 0 && m->params[p].data)
        return &m->params[p];
    return mm_param(m, "%s", name); /* not where the layout puts it: the search says why */
}

/* An I32 (B,T) tensor with rows t0, t0+1, ... (positions when the batch has none). */
static mt_tensor *mm_positions(mt_ctx *c, int64_t B, int64_t T, int64_t t0) {
    mt_tensor *pos = mt_tensor_new(c, MT_I32, 2, (int64_t[]){B, T}, "positions");
    int32_t *h = mt_arena_alloc(&c->host, (size_t)(B * T) * sizeof(int32_t), "positions.host");
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++) h[b * T + t] = (int32_t)(t0 + t);
    c->be->to_device(pos->data, h, (size_t)(B * T) * sizeof(int32_t));
    return pos;
}

/* ------------------------------------------------------------------------------------------ */
/* one decoder layer */

static void mm_enter(mt_ctx *c, const mt_bucket_hooks *hooks, int bucket) {
    if (hooks && hooks->bucket_enter) hooks->bucket_enter(hooks->user, bucket);
    c->tag = bucket;
}

static void mm_leave(mt_ctx *c, const mt_bucket_hooks *hooks, int bucket) {
    c->tag = -1;
    if (hooks && hooks->bucket_leave) hooks->bucket_leave(hooks->user, bucket);
}

typedef struct {
    mt_tensor *pos, *seg; /* (B,T) I32; seg may be NULL */
    mt_minimax_cache *kv; /* NULL: whole sequences; else prefill (t_len 0) or a decode step */
    const mt_bucket_hooks *hooks;
    int open_bucket;      /* the bucket entered for the layer; -1 once the MoE has left it */
    mt_tensor *router;    /* out: router logits (N,E) */
    mt_tensor *route_idx; /* out: chosen experts (N,K) I32 */
} mm_layer_io;

/* Lightning attention (spec 4): silu(h1 Wqkv^T) -> decayed linear attention -> RMSNorm over
 * H*D (eps 1e-6, as transformers and the original build it) -> sigmoid gate from h1 -> out_proj. */
static mt_tensor *mm_lightning_mixer(mt_minimax *m, mt_ctx *c, int l, mt_tensor *h1,
                                     mm_layer_io *io) {
    const mt_minimax_config *cfg = &m->cfg;
    const int64_t B = h1->shape[0], T = h1->shape[1], H = cfg->num_attention_heads,
                  D = cfg->head_dim;
    mt_tensor *qkv =
        mt_silu(c, mt_matmul(c, h1, mm_param(m, "model.layers.%d.self_attn.qkv_proj.weight", l)));
    qkv = mt_view(c, qkv, 4, (int64_t[]){B, T, H, 3 * D});
    /* the per-head decay rates live on the host (config); the kernels read them on the backend */
    mt_tensor *decay = mt_tensor_new(c, MT_F32, 1, &H, "decay");
    c->be->to_device(decay->data, m->decay + (int64_t)l * H, sizeof(float) * (size_t)H);

    mt_tensor *o;
    if (io->kv && io->kv->t_len > 0) {
        /* decode: one recurrent step on the cached state (CPU kernel) */
        MT_CHECK(T == 1, "minimax: a cached decode step takes one token, got T = %lld",
                 (long long)T);
        o = mt_tensor_new(c, MT_F32, 4, (int64_t[]){B, T, H, D}, "lightning.step");
        cpu_lightning_decode_step(io->kv->state[l], qkv->data, decay->data, o->data, (int)B, (int)H,
                                  (int)D);
    } else {
        o = mt_lightning(c, qkv, decay, io->seg, cfg->block_size);
        if (io->kv) /* prefill: the final state is the decode cache */
            cpu_lightning_state(io->kv->state[l], qkv->data, decay->data, NULL, (int)B, (int)T,
                                (int)H, (int)D);
    }
    o = mt_view(c, o, 3, (int64_t[]){B, T, H * D});
    o = mt_rmsnorm(c, o, mm_param(m, "model.layers.%d.self_attn.norm.weight", l), 1e-6f, false);
    mt_tensor *gate = mt_sigmoid(
        c, mt_matmul(c, h1, mm_param(m, "model.layers.%d.self_attn.output_gate.weight", l)));
    o = mt_mul(c, gate, o);
    return mt_matmul(c, o, mm_param(m, "model.layers.%d.self_attn.out_proj.weight", l));
}

/* Softmax attention (spec 5): q/k/v projections, partial NeoX RoPE on the first rotary_dim
 * dims of q and k, causal GQA softmax attention with scale D^-1/2, o_proj. */
static mt_tensor *mm_softmax_mixer(mt_minimax *m, mt_ctx *c, int l, mt_tensor *h1,
                                   mm_layer_io *io) {
    const mt_minimax_config *cfg = &m->cfg;
    const int64_t B = h1->shape[0], T = h1->shape[1], H = cfg->num_attention_heads,
                  Hkv = cfg->num_key_value_heads, D = cfg->head_dim;
    const float scale = (float)(1.0 / sqrt((double)D));
    mt_tensor *q = mt_matmul(c, h1, mm_param(m, "model.layers.%d.self_attn.q_proj.weight", l));
    mt_tensor *k = mt_matmul(c, h1, mm_param(m, "model.layers.%d.self_attn.k_proj.weight", l));
    mt_tensor *v = mt_matmul(c, h1, mm_param(m, "model.layers.%d.self_attn.v_proj.weight", l));
    q = mt_view(c, q, 4, (int64_t[]){B, T, H, D});
    k = mt_view(c, k, 4, (int64_t[]){B, T, Hkv, D});
    v = mt_view(c, v, 4, (int64_t[]){B, T, Hkv, D});
    q = mt_rope(c, q, io->pos, cfg->rotary_dim, cfg->rope_theta);
    k = mt_rope(c, k, io->pos, cfg->rotary_dim, cfg->rope_theta);

    mt_tensor *o;
    mt_minimax_cache *kv = io->kv;
    if (kv) {
        /* append the new keys/values at positions t_len .. t_len+T-1 of the cache */
        MT_CHECK(kv->t_len + T <= kv->t_max, "minimax: KV cache full (%d + %lld > %d positions)",
                 kv->t_len, (long long)T, kv->t_max);
        const size_t row = (size_t)(Hkv * D);
        const float *kd = k->data, *vd = v->data;
        for (int64_t b = 0; b < B; b++)
            for (int64_t t = 0; t < T; t++) {
                size_t dst = ((size_t)b * kv->t_max + (size_t)(kv->t_len + t)) * row;
                memcpy(kv->k[l] + dst, kd + (size_t)(b * T + t) * row, row * sizeof(float));
                memcpy(kv->v[l] + dst, vd + (size_t)(b * T + t) * row, row * sizeof(float));
            }
    }
    if (kv && kv->t_len > 0) {
        MT_CHECK(T == 1, "minimax: a cached decode step takes one token, got T = %lld",
                 (long long)T);
        o = mt_tensor_new(c, MT_F32, 4, (int64_t[]){B, T, H, D}, "attention.step");
        cpu_attention_decode(o->data, q->data, kv->k[l], kv->v[l], kv->t_len + 1, B, kv->t_max, H,
                             Hkv, D, scale);
    } else {
        o = mt_attention(c, q, k, v, io->seg, scale);
    }
    o = mt_view(c, o, 3, (int64_t[]){B, T, H * D});
    return mt_matmul(c, o, mm_param(m, "model.layers.%d.self_attn.o_proj.weight", l));
}

/* MoE (spec 6): router logits -> softmax -> top-K renormalised -> SwiGLU experts. */
static mt_tensor *mm_moe(mt_minimax *m, mt_ctx *c, int l, mt_tensor *h2, mm_layer_io *io) {
    const mt_minimax_config *cfg = &m->cfg;
    const int64_t B = h2->shape[0], T = h2->shape[1], C = cfg->hidden_size,
                  F = cfg->intermediate_size;
    mt_tensor *x = mt_view(c, h2, 2, (int64_t[]){B * T, C});
    io->router = mt_matmul(c, x, mm_param(m, "model.layers.%d.block_sparse_moe.gate.weight", l));
    mt_tensor *w = mt_moe_route(c, io->router, cfg->num_experts_per_tok, &io->route_idx);
    mt_tensor *y;
    if (m->unit == MT_GATHER_EXPERT) {
        /* each expert in its own bucket: leave the layer's, then enter the experts' in order
         * (every one, also those without tokens, so every rank makes the same collectives);
         * the combine and the residual use no parameters and run in no bucket. A layer being
         * recomputed in the backward defers its experts' forwards to their backwards (the
         * layer's output is kept, nothing reads these values): each expert is gathered once,
         * by the tape's hook, for both; ys is zeroed so the combine reads defined values. */
        mt_moe_plan plan;
        mt_tensor *xs = mt_moe_dispatch(c, x, io->route_idx, cfg->num_local_experts, &plan);
        mt_tensor *ys = mt_moe_expert_out(c, &plan, C);
        mm_leave(c, io->hooks, io->open_bucket);
        io->open_bucket = -1;
        const bool defer = c->recomputing > 0;
        const mt_bucket_hooks *hooks = defer ? NULL : io->hooks;
        if (defer) c->be->zero(ys->data, mt_nbytes(ys));
        c->defer_forward = defer;
        const int p0 =
            (int)(mm_param(m, "model.layers.%d.block_sparse_moe.experts.0.w1.weight", l) -
                  m->params);
        for (int e = 0; e < cfg->num_local_experts; e++) {
            const int b = mt_minimax_expert_bucket(m, l, e);
            mm_enter(c, hooks, b);
            mt_moe_expert_ffn(c, xs, &plan, w, e, mm_expert_param(m, p0, l, e, 0),
                              mm_expert_param(m, p0, l, e, 1), mm_expert_param(m, p0, l, e, 2), ys);
            mm_leave(c, hooks, b);
        }
        c->defer_forward = false;
        y = mt_moe_combine(c, ys, &plan);
    } else {
        mt_tensor *w1 = mm_experts(m, c, l, "w1", F, C);
        mt_tensor *w3 = mm_experts(m, c, l, "w3", F, C);
        mt_tensor *w2 = mm_experts(m, c, l, "w2", C, F);
        y = mt_moe_experts(c, x, io->route_idx, w, w1, w3, w2);
    }
    return mt_view(c, y, 3, (int64_t[]){B, T, C});
}

static mt_tensor *mm_layer(mt_minimax *m, mt_ctx *c, int l, mt_tensor *x, mm_layer_io *io) {
    const mt_minimax_config *cfg = &m->cfg;
    const float eps = cfg->rms_norm_eps;
    mt_tensor *h1 =
        mt_rmsnorm(c, x, mm_param(m, "model.layers.%d.input_layernorm.weight", l), eps, false);
    mt_tensor *y;
    if (cfg->layer_types[l] == MT_LAYER_LINEAR) {
        mt_tensor *a = mm_lightning_mixer(m, c, l, h1, io);
        y = mt_axpby(c, cfg->linear_attn_alpha, h1, cfg->linear_attn_beta, a);
    } else {
        mt_tensor *a = mm_softmax_mixer(m, c, l, h1, io);
        y = mt_axpby(c, cfg->full_attn_alpha, h1, cfg->full_attn_beta, a);
    }
    mt_tensor *h2 = mt_rmsnorm(
        c, y, mm_param(m, "model.layers.%d.post_attention_layernorm.weight", l), eps, false);
    mt_tensor *moe = mm_moe(m, c, l, h2, io);
    return mt_axpby(c, cfg->mlp_alpha, h2, cfg->mlp_beta, moe);
}

/* One decoder layer as a segment (mt_checkpoint's fn; also run directly): its buckets entered
 * and left around it; out = {x out, router logits (N,E), chosen experts (N,K)}. */
typedef struct {
    mt_minimax *m;
    int l;
    mt_tensor *pos, *seg;
    mt_minimax_cache *kv;
    mt_bucket_hooks hooks; /* a copy: the backward re-runs the layer after the caller returned */
    bool with_hooks;
} mm_layer_args;

static void mm_layer_segment(mt_ctx *c, void *user, mt_tensor *x, mt_tensor **out) {
    mm_layer_args *a = user;
    const int b = mt_minimax_layer_bucket(a->m, a->l);
    mm_layer_io io = {.pos = a->pos,
                      .seg = a->seg,
                      .kv = a->kv,
                      .hooks = a->with_hooks ? &a->hooks : NULL,
                      .open_bucket = b};
    mm_enter(c, io.hooks, b);
    out[0] = mm_layer(a->m, c, a->l, x, &io);
    if (io.open_bucket >= 0) mm_leave(c, io.hooks, io.open_bucket);
    out[1] = io.router;
    out[2] = io.route_idx;
}

/* ------------------------------------------------------------------------------------------ */
/* the model */

/* Embedding -> layers -> final norm -> lm_head. routers/idx (L) get each layer's router logits
 * and choices when not NULL. With fused (a batch with labels), the lm_head and the
 * cross-entropy run fused and chunked (one op per vocabulary part): *fused_ce gets the loss and
 * no logits are returned. */
static mt_tensor *mm_trunk(mt_minimax *m, mt_ctx *c, mt_tensor *ids, mt_tensor *pos, mt_tensor *seg,
                           mt_minimax_cache *kv, const mt_bucket_hooks *hooks, mt_tensor **routers,
                           mt_tensor **idx, const mt_minimax_batch *fused, mt_tensor **fused_ce) {
    const mt_minimax_config *cfg = &m->cfg;
    const int L = cfg->num_hidden_layers;
    MT_CHECK(ids->dtype == MT_I32 && ids->ndim == 2, "minimax: ids %s %s must be i32 (B,T)",
             ids->name, mt_shape_str(ids));

    /* the embedding, part by part, each writing its rows of one output */
    const int S = m->vocab_parts;
    const int64_t V = cfg->vocab_size;
    mt_tensor *x = NULL;
    for (int k = 0; k < S; k++) {
        mm_enter(c, hooks, k);
        x = mt_embedding_rows(c, ids, mm_vocab_part(m, "model.embed_tokens.weight", k),
                              k * m->vocab_part_rows, V, x);
        mm_leave(c, hooks, k);
    }

    const bool recompute = m->gradient_checkpointing && c->grad_enabled && !kv;
    for (int l = 0; l < L; l++) {
        mm_layer_args a = {.m = m, .l = l, .pos = pos, .seg = seg, .kv = kv};
        if (hooks) a.hooks = *hooks;
        a.with_hooks = hooks != NULL;
        mt_tensor *out[3];
        if (recompute)
            mt_checkpoint(c, mm_layer_segment, &a, sizeof(a), x, 3, out);
        else
            mm_layer_segment(c, &a, x, out);
        x = out[0];
        if (routers) routers[l] = out[1];
        if (idx) idx[l] = out[2];
    }

    const int last = mt_minimax_final_bucket(m);
    mm_enter(c, hooks, last);
    x = mt_rmsnorm(c, x, mm_param(m, "model.norm.weight"), cfg->rms_norm_eps, false);
    mt_tensor *logits = NULL;
    /* lm_head part by part, each in its bucket: the loss as a chain of fused parts
     * (op_linear_cross_entropy.c), or the logits side by side */
    mt_tensor *chain = NULL;
    for (int k = 0; k < S; k++) {
        if (k) {
            mm_leave(c, hooks, last + k - 1);
            mm_enter(c, hooks, last + k);
        }
        mt_tensor *w = mm_vocab_part(m, "lm_head.weight", k);
        if (fused) {
            chain =
                mt_linear_cross_entropy_part(c, x, w, fused->labels, chain, k * m->vocab_part_rows,
                                             V, k == S - 1, fused->loss_denom, 0);
        } else {
            mt_tensor *part = mt_matmul(c, x, w);
            logits = logits ? mt_concat(c, logits, part) : part;
        }
    }
    if (fused) *fused_ce = chain;
    mm_leave(c, hooks, last + S - 1);
    return logits;
}

/* The load-balancing loss of transformers' load_balancing_loss_func over all layers' router
 * rows (spec 7.2): E * sum_{k,e} f[k,e] Pbar[e] = sum over rows of coef . softmax(row) with
 * coef[e] = E count[e] / R^2; the counts carry no gradient. With padding (valid_len), only the
 * real tokens' rows count, in R, the counts and the sum (transformers with an attention_mask):
 * their router rows are gathered first (an embedding lookup, so the gradient scatters back). */
static mt_tensor *mm_aux_loss(mt_minimax *m, mt_ctx *c, mt_tensor **routers, mt_tensor **idx,
                              const int64_t *valid_len, int64_t B, int64_t T) {
    const int L = m->cfg.num_hidden_layers, E = m->cfg.num_local_experts;
    const int K = m->cfg.num_experts_per_tok;
    /* the real rows of one layer, in row order, or all of them */
    int64_t n_real = B * T;
    mt_tensor *real = NULL;
    if (valid_len) {
        int64_t nr = 0;
        for (int64_t b = 0; b < B; b++) {
            MT_CHECK(valid_len[b] >= 0 && valid_len[b] <= T,
                     "minimax: row %lld has %lld real tokens of %lld", (long long)b,
                     (long long)valid_len[b], (long long)T);
            nr += valid_len[b];
        }
        if (nr > 0 && nr < B * T) {
            real = mt_tensor_new(c, MT_I32, 1, &nr, "aux.real_rows");
            int32_t *h = mt_arena_alloc(&c->host, (size_t)nr * sizeof(int32_t), "aux.rows.host");
            for (int64_t b = 0, i = 0; b < B; b++)
                for (int64_t t = 0; t < valid_len[b]; t++) h[i++] = (int32_t)(b * T + t);
            c->be->to_device(real->data, h, (size_t)nr * sizeof(int32_t));
        }
        n_real = nr;
    }
    int64_t *count = mt_arena_alloc(&c->host, (size_t)E * sizeof(int64_t), "aux.count");
    memset(count, 0, (size_t)E * sizeof(int64_t));
    for (int l = 0; l < L; l++) {
        MT_CHECK(routers[l]->shape[0] == B * T && mt_numel(idx[l]) == B * T * K,
                 "minimax: layer %d router rows %lld, expected B*T = %lld", l,
                 (long long)routers[l]->shape[0], (long long)(B * T));
        int32_t *h = mt_arena_alloc(&c->host, (size_t)(B * T * K) * sizeof(int32_t), "aux.idx");
        c->be->to_host(h, idx[l]->data, (size_t)(B * T * K) * sizeof(int32_t));
        for (int64_t b = 0; b < B; b++)
            for (int64_t t = 0; t < (valid_len ? valid_len[b] : T); t++)
                for (int k = 0; k < K; k++) {
                    const int32_t e = h[(b * T + t) * K + k];
                    MT_CHECK(e >= 0 && e < E, "minimax: layer %d routed to expert %d of %d", l,
                             (int)e, E);
                    count[e]++;
                }
    }
    float *coef_h = mt_arena_alloc(&c->host, (size_t)E * sizeof(float), "aux.coef.host");
    if (n_real > 0)
        mt_moe_aux_coef(coef_h, count, E, (int64_t)L * n_real);
    else /* nothing but padding: no aux loss (and no gradient), not transformers' 0/0 */
        memset(coef_h, 0, (size_t)E * sizeof(float));
    int64_t e64 = E;
    mt_tensor *coef = mt_tensor_new(c, MT_F32, 1, &e64, "aux.coef");
    c->be->to_device(coef->data, coef_h, (size_t)E * sizeof(float));
    mt_tensor *aux = NULL;
    for (int l = 0; l < L; l++) {
        mt_tensor *rows = real ? mt_embedding(c, real, routers[l]) : routers[l];
        mt_tensor *a = mt_moe_aux(c, rows, coef);
        aux = aux ? mt_add(c, aux, a) : a;
    }
    return aux;
}

void mt_minimax_forward(mt_minimax *m, mt_ctx *c, const mt_minimax_batch *batch,
                        const mt_bucket_hooks *hooks, mt_minimax_out *out) {
    const mt_minimax_config *cfg = &m->cfg;
    const int L = cfg->num_hidden_layers;
    mt_tensor *ids = batch->ids;
    MT_CHECK(ids && ids->dtype == MT_I32 && ids->ndim == 2,
             "minimax_forward: ids must be i32 (B,T), got %s", ids ? mt_shape_str(ids) : "NULL");
    const int64_t B = ids->shape[0], T = ids->shape[1];
    mt_tensor *pos = batch->pos ? batch->pos : mm_positions(c, B, T, 0);
    const bool aux_on = cfg->output_router_logits;
    mt_tensor **routers = NULL, **idx = NULL;
    if (aux_on) {
        routers = mt_arena_alloc(&c->host, (size_t)L * sizeof(mt_tensor *), "routers");
        idx = mt_arena_alloc(&c->host, (size_t)L * sizeof(mt_tensor *), "route_idx");
    }
    memset(out, 0, sizeof(*out));
    if (batch->labels)
        MT_CHECK(batch->labels->dtype == MT_I32 && mt_same_shape(batch->labels, ids),
                 "minimax_forward: labels %s must be i32 shaped like ids %s",
                 mt_shape_str(batch->labels), mt_shape_str(ids));
    const bool fused = batch->labels && batch->fused_loss;
    out->logits = mm_trunk(m, c, ids, pos, batch->seg, NULL, hooks, routers, idx,
                           fused ? batch : NULL, &out->ce_loss);
    if (aux_on) out->aux_loss = mm_aux_loss(m, c, routers, idx, batch->valid_len, B, T);
    if (batch->labels) {
        if (!fused)
            out->ce_loss = mt_cross_entropy(c, out->logits, batch->labels, batch->loss_denom);
        out->loss = out->ce_loss;
        if (aux_on)
            out->loss = mt_axpby(c, 1.0f, out->ce_loss, cfg->router_aux_loss_coef, out->aux_loss);
    }
}

mt_tensor *mt_minimax_forward_cached(mt_minimax *m, mt_ctx *c, mt_tensor *ids,
                                     mt_minimax_cache *kv) {
    MT_CHECK(ids->dtype == MT_I32 && ids->ndim == 2 && ids->shape[0] == kv->B,
             "minimax_forward_cached: ids %s must be i32 (B,T) with B = %d", mt_shape_str(ids),
             kv->B);
    MT_CHECK(c->be->dev == MT_CPU, "minimax_forward_cached: generation runs on the CPU backend");
    bool prev = mt_ctx_set_grad(c, false);
    mt_tensor *pos = mm_positions(c, ids->shape[0], ids->shape[1], kv->t_len);
    mt_tensor *logits = mm_trunk(m, c, ids, pos, NULL, kv, NULL, NULL, NULL, NULL, NULL);
    kv->t_len += (int)ids->shape[1];
    mt_ctx_set_grad(c, prev);
    return logits;
}
