/* block_attention.c: the softmax attention mixer (spec 5 of Text-01; M2: minimax-m3.md 3.1):
 *
 *   q = h Wq^T (B,T,H*D),  k = h Wk^T, v = h Wv^T (B,T,Hkv*D)
 *   QK norm (plan): none (Text-01) | one RMSNorm over the whole q and the whole k projection,
 *                   before the head split (M2, q_norm (H*D), k_norm (Hkv*D)) | one RMSNorm of
 *                   width D over every head (M3, q_norm/k_norm (D)); Gemma (1 + w) by the plan
 *   partial NeoX RoPE on the first rotary_dim dims of every q and k head
 *   o = causal GQA softmax attention, scale D^-1/2 (query head h reads kv head h / (H/Hkv))
 *   out = o Wo^T
 *
 * Parameters (layer l): self_attn.q_proj.weight (HD, C), k_proj.weight and v_proj.weight
 * (Hkv D, C), o_proj.weight (C, HD), with a QK norm q_norm.weight and k_norm.weight. The
 * whole-width norm is the RMSNorm op over the (B,T,H*D) projection: no op of its own.
 * Generation caches the roped keys and the values (models/generate.h); its table is
 * mt_mixer_softmax. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "models/block.h"

void mt_block_attention_add(mt_layout_cursor *cur, const mt_layer_plan *p, int l,
                            mt_attn_params *w) {
    const mt_minimax_config *cfg = &cur->m->cfg;
    const int64_t C = cfg->hidden_size, D = cfg->head_dim;
    const int64_t HD = (int64_t)cfg->num_attention_heads * D;
    const int64_t KVD = (int64_t)cfg->num_key_value_heads * D;
    w->q_proj = mt_layout_add(cur, true, 2, HD, C, MT_INIT_NORMAL,
                              "model.layers.%d.self_attn.q_proj.weight", l, 0);
    w->k_proj = mt_layout_add(cur, true, 2, KVD, C, MT_INIT_NORMAL,
                              "model.layers.%d.self_attn.k_proj.weight", l, 0);
    w->v_proj = mt_layout_add(cur, true, 2, KVD, C, MT_INIT_NORMAL,
                              "model.layers.%d.self_attn.v_proj.weight", l, 0);
    w->o_proj = mt_layout_add(cur, true, 2, C, HD, MT_INIT_NORMAL,
                              "model.layers.%d.self_attn.o_proj.weight", l, 0);
    if (p->qk_norm == MT_QK_NORM_NONE) return;
    const bool whole = p->qk_norm == MT_QK_NORM_WHOLE;
    const mt_param_init init = mt_layout_norm_init(p->norm);
    w->q_norm = mt_layout_add(cur, true, 1, whole ? HD : D, 0, init,
                              "model.layers.%d.self_attn.q_norm.weight", l, 0);
    w->k_norm = mt_layout_add(cur, true, 1, whole ? KVD : D, 0, init,
                              "model.layers.%d.self_attn.k_norm.weight", l, 0);
}

static void *attn_layout(mt_layout_cursor *cur, const mt_layer_plan *p, int l) {
    mt_attn_params *w = mt_calloc(1, sizeof(*w), "attention parameters");
    mt_block_attention_add(cur, p, l, w);
    return w;
}

static int attn_n_params(const mt_layer_plan *p) { return p->qk_norm == MT_QK_NORM_NONE ? 4 : 6; }

/* The QK norm of x (B,T,n*D) with weight w: over the whole width, or per head. */
static mt_tensor *attn_qk_norm(mt_ctx *c, const mt_layer_plan *p, const mt_minimax_config *cfg,
                               mt_tensor *x, mt_tensor *w, int64_t n) {
    const bool gemma = p->norm == MT_NORM_GEMMA;
    if (p->qk_norm == MT_QK_NORM_WHOLE) return mt_rmsnorm(c, x, w, cfg->rms_norm_eps, gemma);
    const int64_t B = x->shape[0], T = x->shape[1], D = cfg->head_dim;
    x = mt_view(c, x, 4, (int64_t[]){B, T, n, D});
    x = mt_rmsnorm(c, x, w, cfg->rms_norm_eps, gemma);
    return mt_view(c, x, 3, (int64_t[]){B, T, n * D});
}

void mt_block_attention_qkv(mt_minimax *m, mt_ctx *c, int l, const mt_attn_params *w, mt_tensor *h1,
                            mt_block_io *io, mt_tensor **q_out, mt_tensor **k_out,
                            mt_tensor **v_out) {
    const mt_minimax_config *cfg = &m->cfg;
    const mt_layer_plan *p = &m->plan[l];
    const int64_t B = h1->shape[0], T = h1->shape[1], H = cfg->num_attention_heads,
                  Hkv = cfg->num_key_value_heads, D = cfg->head_dim;
    mt_tensor *q = mt_matmul(c, h1, w->q_proj);
    mt_tensor *k = mt_matmul(c, h1, w->k_proj);
    mt_tensor *v = mt_matmul(c, h1, w->v_proj);
    if (p->qk_norm != MT_QK_NORM_NONE) {
        q = attn_qk_norm(c, p, cfg, q, w->q_norm, H);
        k = attn_qk_norm(c, p, cfg, k, w->k_norm, Hkv);
    }
    q = mt_view(c, q, 4, (int64_t[]){B, T, H, D});
    k = mt_view(c, k, 4, (int64_t[]){B, T, Hkv, D});
    v = mt_view(c, v, 4, (int64_t[]){B, T, Hkv, D});
    q = mt_rope(c, q, io->pos, cfg->rotary_dim, cfg->rope_theta);
    k = mt_rope(c, k, io->pos, cfg->rotary_dim, cfg->rope_theta);

    mt_minimax_cache *kv = io->kv;
    if (kv) {
        /* append the new keys/values at positions t_len[b] .. t_len[b]+T-1 of row b (the cached
         * forward checked the room), all T before any query reads them */
        const size_t row = (size_t)(Hkv * D);
        const float *kd = k->data, *vd = v->data;
        for (int64_t b = 0; b < B; b++)
            for (int64_t t = 0; t < T; t++) {
                size_t dst = ((size_t)b * kv->t_max + (size_t)(kv->t_len[b] + t)) * row;
                c->be->copy(kv->k[l] + dst, kd + (size_t)(b * T + t) * row, row * sizeof(float));
                c->be->copy(kv->v[l] + dst, vd + (size_t)(b * T + t) * row, row * sizeof(float));
            }
    }
    *q_out = q;
    *k_out = k;
    *v_out = v;
}

mt_tensor *mt_block_attention_out(mt_ctx *c, const mt_attn_params *w, mt_tensor *o) {
    const int64_t B = o->shape[0], T = o->shape[1], HD = o->shape[2] * o->shape[3];
    o = mt_view(c, o, 3, (int64_t[]){B, T, HD});
    return mt_matmul(c, o, w->o_proj);
}

static mt_tensor *attn_forward(mt_minimax *m, mt_ctx *c, int l, mt_tensor *h1, mt_block_io *io) {
    const mt_attn_params *w = m->layers[l].mix;
    const float scale = (float)(1.0 / sqrt((double)m->cfg.head_dim));
    mt_tensor *q, *k, *v;
    mt_block_attention_qkv(m, c, l, w, h1, io, &q, &k, &v);
    if (c->cp && c->cp->size > 1) { /* this rank's queries against every rank's keys */
        MT_CHECK(m->plan[l].window == 0,
                 "minimax: layer %d: a sliding window under context parallelism is not "
                 "supported",
                 l);
        return mt_block_attention_out(c, w, mt_cp_attention(c, q, k, v, io->seg, c->cp, scale));
    }
    return mt_block_attention_out(
        c, w, mt_attention_window(c, q, k, v, io->seg, scale, m->plan[l].window));
}

/* A decode step of the rows [b0, b0 + n) that ends at t_end[b] (the new token's position + 1)
 * under a sliding window W: row b's query sees cache positions [t_end - W, t_end) only, i.e.
 * the backend's step over a cache that starts at position t_end - W (one row at a time, since
 * the rows start at different positions). */
static void attn_step_window(mt_ctx *c, float *out, const float *q, const float *kc,
                             const float *vc, const int32_t *t_end, int64_t B, int64_t t_max,
                             int64_t H, int64_t Hkv, int64_t D, float scale, int64_t win) {
    for (int64_t b = 0; b < B; b++) {
        const int64_t lo = t_end[b] > win ? t_end[b] - win : 0;
        const int32_t len = (int32_t)(t_end[b] - lo);
        const size_t off = (size_t)((b * t_max + lo) * Hkv * D);
        c->be->decode.attention(out + b * H * D, q + b * H * D, kc + off, vc + off, &len, 1,
                                t_max - lo, H, Hkv, D, scale);
    }
}

static mt_tensor *attn_cached(mt_minimax *m, mt_ctx *c, int l, mt_tensor *h1, mt_block_io *io) {
    const mt_minimax_config *cfg = &m->cfg;
    const mt_attn_params *w = m->layers[l].mix;
    const int64_t B = h1->shape[0], T = h1->shape[1], H = cfg->num_attention_heads,
                  Hkv = cfg->num_key_value_heads, D = cfg->head_dim;
    const float scale = (float)(1.0 / sqrt((double)D));
    mt_tensor *q, *k, *v;
    mt_block_attention_qkv(m, c, l, w, h1, io, &q, &k, &v);
    mt_minimax_cache *kv = io->kv;
    mt_tensor *o = mt_tensor_new(c, MT_F32, 4, (int64_t[]){B, T, H, D}, "attention.step");
    MT_CHECK(c->be->decode.attention, "minimax: the %s backend has no cached attention step",
             c->be->name);
    const int64_t win = m->plan[l].window;
    if (win > 0) { /* each token a windowed step: token t's query sees [t + 1 - W, t] */
        int32_t *end = mt_arena_alloc(&c->host, sizeof(int32_t) * (size_t)B, "attention.window");
        for (int64_t t = 0; t < T; t++) {
            for (int64_t b = 0; b < B; b++)
                end[b] = T == 1 ? kv->t_end[b] : kv->t_len[0] + (int32_t)t + 1;
            attn_step_window(c, (float *)o->data + t * B * H * D,
                             (const float *)q->data + t * B * H * D, kv->k[l], kv->v[l], end, B,
                             kv->t_max, H, Hkv, D, scale, win);
        }
    } else if (T == 1) { /* a decode step */
        c->be->decode.attention(o->data, q->data, kv->k[l], kv->v[l], kv->t_end, B, kv->t_max, H,
                                Hkv, D, scale);
    } else if (c->be->decode.attention_chunk) { /* an extension of one row (B = 1) */
        c->be->decode.attention_chunk(o->data, q->data, kv->k[l], kv->v[l], kv->t_len[0], T,
                                      kv->t_max, H, Hkv, D, scale);
    } else { /* an extension, one step per token: token t's query sees the cache to itself */
        const int64_t n = H * D;
        for (int64_t t = 0; t < T; t++) {
            const int32_t end = kv->t_len[0] + (int32_t)t + 1;
            c->be->decode.attention((float *)o->data + t * n, (const float *)q->data + t * n,
                                    kv->k[l], kv->v[l], &end, 1, kv->t_max, H, Hkv, D, scale);
        }
    }
    return mt_block_attention_out(c, w, o);
}

const mt_mixer mt_mixer_softmax = {
    .name = "softmax",
    .n_params = attn_n_params,
    .layout = attn_layout,
    .forward = attn_forward,
    .cached = attn_cached,
    .caches = MT_CACHE_KV,
};
