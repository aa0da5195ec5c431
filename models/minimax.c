/* minimax.c: a MiniMax decoder on the autograd ops, assembled per layer from the plan
 * (models/family.h), with the backward coming from the tape. The same layer code serves
 * training (whole sequences) and generation (a cached prompt pass, then one token at a time:
 * models/generate.c).
 *
 *   x0 = Embed[ids]                                       (no scaling)
 *   per layer l:  h1 = Norm_in(x)                          (RMSNorm or Gemma, by the plan)
 *                 a  = mixer(h1)                            (lightning or softmax attention)
 *                 y  = alpha_mix * h1 + beta_mix * a        (DeepNorm: residual = normalised input)
 *                      or x + a                             (plain pre-norm residual)
 *                 h2 = Norm_post(y)
 *                 x  = alpha_mlp * h2 + beta_mlp * MLP(h2)  or  y + MLP(h2)
 *                      (MLP: the MoE, or a dense SwiGLU MLP, by the plan)
 *   logits = Norm_final(x) lm_head^T;  loss = CE(logits, labels) [+ coef * term, each
 *            auxiliary term: models/aux.c]
 *
 * The blocks are in models/block_*.c. Buckets (models/minimax.h): every op of a bucket runs
 * with ctx->tag = bucket, inside the hooks' enter/leave, so a sharded owner can gather the
 * bucket before its first use and the tape's tag hook does the same in the backward. With the
 * gather unit "expert" the MoE runs as dispatch, one op per expert (each in its expert's
 * bucket) and combine. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "models/block.h"

/* ------------------------------------------------------------------------------------------ */
/* buckets (models/block.h) */

mt_tensor *mt_block_host_tensor(mt_ctx *c, const char *what) {
    return mt_arena_alloc(&c->host, sizeof(mt_tensor), what);
}

/* Positions I32 (B,T) when the batch has none: row b runs t0[b], t0[b]+1, ... (a cache's per-row
 * lengths), or from 0 (t0 NULL). */
static mt_tensor *mm_positions(mt_ctx *c, int64_t B, int64_t T, const int32_t *t0) {
    mt_tensor *pos = mt_tensor_new(c, MT_I32, 2, (int64_t[]){B, T}, "positions");
    int32_t *h = mt_arena_alloc(&c->host, (size_t)(B * T) * sizeof(int32_t), "positions.host");
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++) h[b * T + t] = (int32_t)((t0 ? t0[b] : 0) + t);
    c->be->to_device(pos->data, h, (size_t)(B * T) * sizeof(int32_t));
    return pos;
}

void mt_block_enter(const mt_minimax *m, mt_ctx *c, const mt_bucket_hooks *hooks, int bucket) {
    if (hooks && hooks->bucket_enter) hooks->bucket_enter(hooks->user, bucket);
    /* the blocks read their parameters' fields: every one of the bucket must have its memory */
    for (int i = m->bucket_param[bucket]; i < m->bucket_param[bucket + 1]; i++)
        MT_CHECK(m->params[i].data, "minimax: parameter %s is not bound (bucket %d)",
                 m->info[i].name, bucket);
    c->tag = bucket;
}

void mt_block_leave(mt_ctx *c, const mt_bucket_hooks *hooks, int bucket) {
    c->tag = -1;
    if (hooks && hooks->bucket_leave) hooks->bucket_leave(hooks->user, bucket);
}

/* ------------------------------------------------------------------------------------------ */
/* one decoder layer */

static mt_tensor *mm_norm(mt_minimax *m, mt_ctx *c, mt_norm_kind kind, mt_tensor *x, mt_tensor *w) {
    return mt_rmsnorm(c, x, w, m->cfg.rms_norm_eps, kind == MT_NORM_GEMMA);
}

/* The residual around a sublayer f of the normalised input h of x. */
static mt_tensor *mm_residual(mt_ctx *c, const mt_layer_plan *p, mt_tensor *x, mt_tensor *h,
                              mt_tensor *f, float alpha, float beta) {
    return p->residual == MT_RESIDUAL_DEEPNORM ? mt_axpby(c, alpha, h, beta, f) : mt_add(c, x, f);
}

static mt_tensor *mm_layer(mt_minimax *m, mt_ctx *c, int l, mt_tensor *x, mt_block_io *io) {
    const mt_layer_plan *p = &m->plan[l];
    const mt_layer_params *lp = &m->layers[l];
    mt_tensor *h1 = mm_norm(m, c, p->norm, x, lp->input_norm);
    /* filled cache rows (mt_minimax_forward_cached checked all are or none): a decode step or an
     * extension; else whole sequences, or a prompt filling the cache */
    mt_mixer_fn *mixer = io->kv && io->kv->t_len[0] > 0 ? lp->mixer->cached : lp->mixer->forward;
    mt_tensor *a = mixer(m, c, l, h1, io);
    mt_tensor *y = mm_residual(c, p, x, h1, a, p->mix_alpha, p->mix_beta);
    mt_tensor *h2 = mm_norm(m, c, p->norm, y, lp->post_norm);
    /* transformers' SparseMoeBlock multiplies its input in place: the router and the experts
     * see the noisy input, and so does the DeepNorm residual (Text-01's residual is that same
     * tensor); the plain residual adds y, not the MLP's input */
    if (io->jitter && p->jitter > 0 && p->mlp == MT_MLP_MOE)
        h2 = mt_block_moe_jitter(c, p->jitter, l, io->jitter_seed, h2);
    mt_tensor *f = p->mlp == MT_MLP_DENSE ? mt_block_mlp_forward(m, c, l, h2)
                                          : mt_block_moe_forward(m, c, l, h2, io);
    return mm_residual(c, p, y, h2, f, p->mlp_alpha, p->mlp_beta);
}

/* One decoder layer as a segment (mt_checkpoint's fn; also run directly): its buckets entered
 * and left around it; out = {x out, router logits (N,E), chosen experts (N,K), indexer KL}. */
typedef struct {
    mt_minimax *m;
    int l;
    mt_tensor *pos, *seg;
    mt_tensor *qmask; /* (B,T) F32 or NULL: the queries the indexer KL counts */
    float index_denom;
    mt_minimax_cache *kv;
    bool jitter;
    uint64_t jitter_seed;
    mt_bucket_hooks hooks; /* a copy: the backward re-runs the layer after the caller returned */
    bool with_hooks;
} mm_layer_args;

static void mm_layer_segment(mt_ctx *c, void *user, mt_tensor *x, mt_tensor **out) {
    mm_layer_args *a = user;
    const int b = mt_minimax_layer_bucket(a->m, a->l);
    mt_block_io io = {.pos = a->pos,
                      .seg = a->seg,
                      .qmask = a->qmask,
                      .index_denom = a->index_denom,
                      .kv = a->kv,
                      .jitter = a->jitter,
                      .jitter_seed = a->jitter_seed,
                      .hooks = a->with_hooks ? &a->hooks : NULL,
                      .open_bucket = b};
    mt_block_enter(a->m, c, io.hooks, b);
    out[0] = mm_layer(a->m, c, a->l, x, &io);
    if (io.open_bucket >= 0) mt_block_leave(c, io.hooks, io.open_bucket);
    out[1] = io.router;
    out[2] = io.route_idx;
    out[3] = io.index_kl;
}

/* ------------------------------------------------------------------------------------------ */
/* the model */

/* The queries the indexer KL counts: the real tokens of each row (valid_len; all when NULL),
 * as a (B,T) F32 mask (NULL when all count), and its divisor (aux_denom, or their number).
 * Only a model with MSA layers needs them. */
static void mm_index_queries(mt_minimax *m, mt_ctx *c, const mt_minimax_batch *batch, int64_t B,
                             int64_t T, mt_tensor **qmask, float *denom) {
    bool msa = false;
    for (int l = 0; l < m->cfg.num_hidden_layers; l++) msa |= m->layers[l].mixer->index_kl;
    if (!msa) return;
    /* under context parallelism a row holds this rank's T of a sample's C T tokens, real where
     * their global index is below valid_len (which counts the whole sample) */
    const bool cp = c->cp && c->cp->size > 1;
    const int C = cp ? c->cp->size : 1, r = cp ? c->cp->rank : 0;
    int64_t real = B * T;
    if (batch->valid_len) {
        float *h = mt_arena_alloc(&c->host, sizeof(float) * (size_t)(B * T), "index.mask.host");
        real = 0;
        for (int64_t b = 0; b < B; b++)
            for (int64_t t = 0; t < T; t++) {
                const bool in = mt_cp_global_index(r, C, C * T, t) < batch->valid_len[b];
                h[b * T + t] = in ? 1.0f : 0.0f;
                real += in;
            }
        *qmask = mt_tensor_new(c, MT_F32, 2, (int64_t[]){B, T}, "index.mask");
        c->be->to_device((*qmask)->data, h, sizeof(float) * (size_t)(B * T));
    }
    if (cp && batch->aux_denom <= 0) c->cp->allreduce_i64(c->cp->user_host, &real, 1);
    *denom = batch->aux_denom > 0 ? batch->aux_denom : (float)(real > 0 ? real : 1);
}

/* What the trunk returns besides the logits: each layer's router logits and choices (routers,
 * idx (L), when not NULL), the fused loss, the MSA layers' summed indexer KL. */
typedef struct {
    mt_tensor **routers, **idx;
    mt_tensor *fused_ce;
    mt_tensor *index_kl;
    mt_minimax_out *head; /* a head model's outputs (models/head.c), else NULL */
    bool last_only;       /* in: the logits of each row's last position only (no grad) */
} mm_trunk_out;

/* x (B,T,C) -> (B,1,C): each row's last position, a copy (no grad, so no op to record). */
static mt_tensor *mm_last_positions(mt_ctx *c, mt_tensor *x) {
    MT_CHECK(!c->grad_enabled && x->ndim == 3, "minimax: last positions of %s %s with grad",
             x->name, mt_shape_str(x));
    const int64_t B = x->shape[0], T = x->shape[1], C = x->shape[2];
    if (T == 1) return x;
    mt_tensor *y = mt_tensor_new(c, x->dtype, 3, (int64_t[]){B, 1, C}, "last positions");
    const size_t row = mt_dtype_size(x->dtype) * (size_t)C;
    for (int64_t b = 0; b < B; b++)
        c->be->copy((char *)y->data + (size_t)b * row,
                    (const char *)x->data + (size_t)(b * T + T - 1) * row, row);
    return y;
}

/* Embedding -> layers -> final norm -> lm_head. With fused (a batch with labels), the lm_head
 * and the cross-entropy run fused and chunked (one op per vocabulary part): o->fused_ce gets the
 * loss and no logits are returned. batch (may be NULL) gives the indexer KL's real queries and
 * divisor. */
static mt_tensor *mm_trunk(mt_minimax *m, mt_ctx *c, mt_tensor *ids, mt_tensor *pos, mt_tensor *seg,
                           mt_minimax_cache *kv, const mt_bucket_hooks *hooks,
                           const mt_minimax_batch *batch, bool fused, mm_trunk_out *o) {
    const mt_minimax_config *cfg = &m->cfg;
    const int L = cfg->num_hidden_layers;
    MT_CHECK(ids->dtype == MT_I32 && ids->ndim == 2, "minimax: ids %s %s must be i32 (B,T)",
             ids->name, mt_shape_str(ids));

    /* the embedding, part by part, each writing its rows of one output */
    const int S = m->vocab_parts;
    const int64_t V = cfg->vocab_size;
    mt_tensor *x = NULL;
    for (int k = 0; k < S; k++) {
        mt_block_enter(m, c, hooks, k);
        x = mt_embedding_rows(c, ids, m->embed[k], k * m->vocab_part_rows, V, x);
        mt_block_leave(c, hooks, k);
    }

    const bool recompute = m->gradient_checkpointing && c->grad_enabled && !kv;
    mt_tensor *qmask = NULL;
    float index_denom = 0;
    if (batch && c->grad_enabled && m->index_kl_coef != 0)
        mm_index_queries(m, c, batch, ids->shape[0], ids->shape[1], &qmask, &index_denom);
    o->index_kl = NULL;
    for (int l = 0; l < L; l++) {
        mm_layer_args a = {.m = m,
                           .l = l,
                           .pos = pos,
                           .seg = seg,
                           .qmask = qmask,
                           .index_denom = index_denom,
                           .kv = kv,
                           .jitter = batch && batch->jitter && c->grad_enabled,
                           .jitter_seed = batch ? batch->jitter_seed : 0};
        if (hooks) a.hooks = *hooks;
        a.with_hooks = hooks != NULL;
        mt_tensor *out[4];
        if (recompute)
            mt_checkpoint(c, mm_layer_segment, &a, sizeof(a), x, 4, out);
        else
            mm_layer_segment(c, &a, x, out);
        x = out[0];
        if (o->routers) o->routers[l] = out[1];
        if (o->idx) o->idx[l] = out[2];
        if (out[3]) o->index_kl = o->index_kl ? mt_add(c, o->index_kl, out[3]) : out[3];
    }

    const int last = mt_minimax_final_bucket(m);
    mt_block_enter(m, c, hooks, last);
    if (o->last_only) x = mm_last_positions(c, x);
    x = mm_norm(m, c, m->plan[L - 1].norm, x, m->final_norm);
    mt_tensor *logits = NULL;
    if (m->lm_parts == 0) { /* a head model: the head instead of the lm_head */
        MT_CHECK(o->head && !fused,
                 "minimax: a %s model has no lm_head (logits of the "
                 "vocabulary, a cached decode)",
                 mt_head_name(cfg->head));
        mt_head_forward(m, c, x, ids, o->head);
        mt_block_leave(c, hooks, last);
        return o->head->logits;
    }
    /* lm_head part by part, each in its bucket: the loss as a chain of fused parts
     * (op_linear_cross_entropy.c), or the logits side by side */
    mt_tensor *chain = NULL;
    for (int k = 0; k < S; k++) {
        if (k) {
            mt_block_leave(c, hooks, last + k - 1);
            mt_block_enter(m, c, hooks, last + k);
        }
        mt_tensor *w = m->lm_head[k];
        if (fused) {
            chain =
                mt_linear_cross_entropy_part(c, x, w, batch->labels, chain, k * m->vocab_part_rows,
                                             V, k == S - 1, batch->loss_denom, 0);
        } else {
            mt_tensor *part = mt_matmul(c, x, w);
            logits = logits ? mt_concat(c, logits, part) : part;
        }
    }
    if (fused) o->fused_ce = chain;
    mt_block_leave(c, hooks, last + S - 1);
    return logits;
}

/* idx (N,K) host: the top-K of each row of logits (N,E), descending, ties to the lower index
 * (the ranking of softmax(logits)). */
static void mm_topk_logits(mt_ctx *c, const mt_tensor *logits, int K, int32_t *idx) {
    const int64_t N = logits->shape[0], E = logits->shape[1];
    float *z = mt_arena_alloc(&c->host, sizeof(float) * (size_t)(N * E), "aux.logits");
    c->be->to_host(z, logits->data, sizeof(float) * (size_t)(N * E));
    for (int64_t n = 0; n < N; n++) {
        const float *row = z + n * E;
        int32_t *out = idx + n * K;
        for (int j = 0; j < K; j++) {
            int64_t best = -1;
            for (int64_t e = 0; e < E; e++) {
                bool taken = false;
                for (int i = 0; i < j; i++) taken = taken || out[i] == e;
                if (!taken && (best < 0 || row[e] > row[best])) best = e;
            }
            out[j] = (int32_t)best;
        }
    }
}

/* The load-balancing loss of transformers' load_balancing_loss_func over all layers' router
 * rows (spec 7.2): E * sum_{k,e} f[k,e] Pbar[e] = sum over rows of coef . softmax(row) with
 * coef[e] = E count[e] / R^2; the counts carry no gradient. With padding (valid_len), only the
 * real tokens' rows count, in R, the counts and the sum (transformers with an attention_mask):
 * their router rows are gathered first (an embedding lookup, so the gradient scatters back).
 * Layers with a dense MLP have no router and do not count (transformers collects the router
 * logits of its sparse layers only).
 * The counts are of the top-K of softmax(logits), as transformers counts them: for a softmax
 * router these are its choices; a sigmoid router with a correction bias may choose others
 * (transformers' minimax_m2 counts the unbiased top-K all the same, docs/parity.md).
 * Under context parallelism (c->cp) a row holds this rank's T of the sample's C T tokens, real
 * where their global index is below valid_len (which counts the whole sample), and the counts
 * and R are summed over the group: each rank's sum is its rows' part of the whole. */
static bool mm_token_real(const mt_ctx *c, const int64_t *valid_len, int64_t b, int64_t T,
                          int64_t t) {
    if (!valid_len) return true;
    if (!c->cp || c->cp->size == 1) return t < valid_len[b];
    const int C = c->cp->size;
    return mt_cp_global_index(c->cp->rank, C, C * T, t) < valid_len[b];
}

static mt_tensor *mm_aux_loss(mt_minimax *m, mt_ctx *c, mt_tensor **routers, mt_tensor **idx,
                              const int64_t *valid_len, int64_t B, int64_t T) {
    const int L = m->cfg.num_hidden_layers, E = m->cfg.num_local_experts;
    const int K = m->cfg.num_experts_per_tok;
    int n_moe = 0;
    for (int l = 0; l < L; l++) n_moe += routers[l] != NULL;
    if (n_moe == 0) return NULL;
    /* the real rows of one layer, in row order, or all of them */
    int64_t n_real = B * T;
    mt_tensor *real = NULL;
    const int64_t T_all = c->cp ? T * c->cp->size : T; /* a whole sample's tokens */
    if (valid_len) {
        int64_t nr = 0;
        for (int64_t b = 0; b < B; b++) {
            MT_CHECK(valid_len[b] >= 0 && valid_len[b] <= T_all,
                     "minimax: row %lld has %lld real tokens of %lld", (long long)b,
                     (long long)valid_len[b], (long long)T_all);
            for (int64_t t = 0; t < T; t++) nr += mm_token_real(c, valid_len, b, T, t);
        }
        if (nr > 0 && nr < B * T) {
            real = mt_tensor_new(c, MT_I32, 1, &nr, "aux.real_rows");
            int32_t *h = mt_arena_alloc(&c->host, (size_t)nr * sizeof(int32_t), "aux.rows.host");
            for (int64_t b = 0, i = 0; b < B; b++)
                for (int64_t t = 0; t < T; t++)
                    if (mm_token_real(c, valid_len, b, T, t)) h[i++] = (int32_t)(b * T + t);
            c->be->to_device(real->data, h, (size_t)nr * sizeof(int32_t));
        }
        n_real = nr;
    }
    int64_t *count = mt_arena_alloc(&c->host, (size_t)E * sizeof(int64_t), "aux.count");
    memset(count, 0, (size_t)E * sizeof(int64_t));
    for (int l = 0; l < L; l++) {
        if (!routers[l]) continue; /* a dense MLP */
        MT_CHECK(routers[l]->shape[0] == B * T && mt_numel(idx[l]) == B * T * K,
                 "minimax: layer %d router rows %lld, expected B*T = %lld", l,
                 (long long)routers[l]->shape[0], (long long)(B * T));
        int32_t *h = mt_arena_alloc(&c->host, (size_t)(B * T * K) * sizeof(int32_t), "aux.idx");
        if (m->plan[l].router == MT_ROUTER_SOFTMAX)
            c->be->to_host(h, idx[l]->data, (size_t)(B * T * K) * sizeof(int32_t));
        else
            mm_topk_logits(c, routers[l], K, h);
        for (int64_t b = 0; b < B; b++)
            for (int64_t t = 0; t < T; t++) {
                if (!mm_token_real(c, valid_len, b, T, t)) continue;
                for (int k = 0; k < K; k++) {
                    const int32_t e = h[(b * T + t) * K + k];
                    MT_CHECK(e >= 0 && e < E, "minimax: layer %d routed to expert %d of %d", l,
                             (int)e, E);
                    count[e]++;
                }
            }
    }
    int64_t n_all = n_real; /* the whole micro-batch's real rows: every rank's */
    if (c->cp && c->cp->size > 1) {
        c->cp->allreduce_i64(c->cp->user_host, count, E);
        c->cp->allreduce_i64(c->cp->user_host, &n_all, 1);
    }
    float *coef_h = mt_arena_alloc(&c->host, (size_t)E * sizeof(float), "aux.coef.host");
    if (n_all > 0 && n_real > 0) /* a rank with no real row has no part of the sum */
        mt_moe_aux_coef(coef_h, count, E, (int64_t)n_moe * n_all);
    else /* nothing but padding: no aux loss (and no gradient), not transformers' 0/0 */
        memset(coef_h, 0, (size_t)E * sizeof(float));
    int64_t e64 = E;
    mt_tensor *coef = mt_tensor_new(c, MT_F32, 1, &e64, "aux.coef");
    c->be->to_device(coef->data, coef_h, (size_t)E * sizeof(float));
    mt_tensor *aux = NULL;
    for (int l = 0; l < L; l++) {
        if (!routers[l]) continue;
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
    if (c->cp && c->cp->size > 1) /* the rows are parts of samples: what the ops can split */
        MT_CHECK(batch->pos && !(batch->jitter && cfg->router_jitter_noise > 0) && m->lm_parts > 0,
                 "minimax_forward: context parallelism needs the tokens' global positions, and "
                 "takes neither the router jitter nor a head model");
    mt_tensor *pos = batch->pos ? batch->pos : mm_positions(c, B, T, NULL);
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
    const bool head = m->lm_parts == 0;
    MT_CHECK(!head || !batch->labels,
             "minimax_forward: a %s model takes its targets in head_class / head_target / "
             "start_pos and end_pos, not the causal LM's labels",
             mt_head_name(cfg->head));
    const bool fused = batch->labels && batch->fused_loss;
    mm_trunk_out o = {.routers = routers, .idx = idx, .head = head ? out : NULL};
    out->logits = mm_trunk(m, c, ids, pos, batch->seg, NULL, hooks, batch, fused, &o);
    out->ce_loss = o.fused_ce;
    mt_tensor *router_aux = aux_on ? mm_aux_loss(m, c, routers, idx, batch->valid_len, B, T) : NULL;
    out->n_aux = mt_aux_list(m, c->grad_enabled, router_aux, o.index_kl, out->aux);
    if (head) {
        out->ce_loss = mt_head_loss(m, c, batch, out);
        out->loss = out->ce_loss;
        for (int k = 0; out->loss && k < out->n_aux; k++)
            if (out->aux[k].value)
                out->loss = mt_axpby(c, 1.0f, out->loss, out->aux[k].coef, out->aux[k].value);
    } else if (batch->labels) {
        if (!fused)
            out->ce_loss = mt_cross_entropy(c, out->logits, batch->labels, batch->loss_denom);
        out->loss = out->ce_loss;
        for (int k = 0; k < out->n_aux; k++)
            if (out->aux[k].value)
                out->loss = mt_axpby(c, 1.0f, out->loss, out->aux[k].coef, out->aux[k].value);
    }
}

void mt_minimax_walk_buckets(const mt_minimax *m, const mt_bucket_hooks *hooks) {
    for (int b = 0; hooks && b < m->n_buckets; b++) {
        if (hooks->bucket_enter) hooks->bucket_enter(hooks->user, b);
        if (hooks->bucket_leave) hooks->bucket_leave(hooks->user, b);
    }
}

mt_tensor *mt_minimax_forward_cached(mt_minimax *m, mt_ctx *c, mt_tensor *ids, mt_minimax_cache *kv,
                                     const mt_bucket_hooks *hooks, bool last_only) {
    MT_CHECK(ids->dtype == MT_I32 && ids->ndim == 2 && ids->shape[0] >= 1 && ids->shape[0] <= kv->B,
             "minimax_forward_cached: ids %s must be i32 (B,T) with B <= %d", mt_shape_str(ids),
             kv->B);
    MT_CHECK(kv->be == c->be,
             "minimax_forward_cached: the caches are the %s backend's, the context "
             "the %s backend's",
             kv->be ? kv->be->name : "(none)", c->be->name);
    const int64_t B = ids->shape[0], T = ids->shape[1];
    /* all rows empty (a prompt), or none (a step; an extension of one row): the layers take one
     * path */
    int n_empty = 0;
    for (int64_t b = 0; b < B; b++) {
        n_empty += kv->t_len[b] == 0;
        MT_CHECK(kv->t_len[b] + T <= kv->t_max,
                 "minimax: KV cache full (row %lld: %d + %lld > %d positions)", (long long)b,
                 kv->t_len[b], (long long)T, kv->t_max);
    }
    MT_CHECK(n_empty == B || (n_empty == 0 && (T == 1 || B == 1)),
             "minimax_forward_cached: %d of %lld rows empty with T = %lld: a prompt fills empty "
             "rows, a decode step (T = 1) extends filled ones, an extension (T > 1) one filled "
             "row (B = 1)",
             n_empty, (long long)B, (long long)T);
    int32_t *t_end = mt_arena_alloc(&c->host, (size_t)B * sizeof(int32_t), "cache t_end");
    for (int64_t b = 0; b < B; b++) t_end[b] = kv->t_len[b] + (int32_t)T;
    kv->t_end = t_end;
    bool prev = mt_ctx_set_grad(c, false);
    mt_tensor *pos = mm_positions(c, B, T, kv->t_len);
    mm_trunk_out o = {.last_only = last_only};
    mt_tensor *logits = mm_trunk(m, c, ids, pos, NULL, kv, hooks, NULL, false, &o);
    for (int64_t b = 0; b < B; b++) kv->t_len[b] = t_end[b];
    kv->t_end = NULL;
    mt_ctx_set_grad(c, prev);
    return logits;
}
