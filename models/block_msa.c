/* block_msa.c: MiniMax-M3's MSA sparse attention mixer (spec 3.4, 4, 5; docs/msa.md): the
 * softmax GQA of block_attention.c (per-head Gemma QK norm, partial RoPE) whose keys each query
 * may see are the blocks the lightning indexer selects:
 *
 *   q, k, v   = the attention's projections, QK norm and RoPE           (B,T,H,D), (B,T,Hkv,D)
 *   x         = h, or a detached copy of it (m->index_detach: the indexer trains only itself)
 *   iq = RoPE(GemmaNorm_Di(x index_q_proj^T  (B,T,Hi,Di)))     Hi = Hkv: head h selects for group h
 *   ik = RoPE(GemmaNorm_Di(x index_k_proj^T  (B,T,1,Di)))      one index key per token
 *   idx = the local block plus the topk-1 best earlier blocks by max_j iq.ik  (B,Hi,T,topk)
 *   o   = softmax attention of q over the selected blocks' keys (causal in the local block)
 *   out = o o_proj^T
 *   training: index_kl = the sparse KL of the group-mean attention probabilities (teacher, no
 *   gradient) against softmax(iq.ik Di^-1/2) on the same support (student), per real query,
 *   divided by io->index_denom; the decoder adds index_kl_coef times the layers' sum to the loss
 *
 * The selection is an integer constant for the backward: q, k, v get their gradients from the
 * attention over the support, the indexer's tensors from the KL alone.
 * Generation: the prompt runs the same ops and fills an index-key cache beside the KV cache;
 * each new token scores its query against the cached index keys. While its topk blocks cover
 * every cached block the step is the dense cached attention (the same support), beyond that the
 * block-sparse step over the selected blocks (docs/msa.md, "Decode").
 *
 * Parameters (layer l): the attention's (mt_block_attention_add), then
 * self_attn.index_q_proj.weight (Hi*Di, C), index_k_proj.weight (Di, C), index_q_norm.weight
 * and index_k_norm.weight (Di), the released names (spec 8.2). Its table is mt_mixer_msa. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "models/block.h"

typedef struct {
    mt_attn_params attn;
    mt_tensor *index_q_proj;                /* (Hi*Di, C) */
    mt_tensor *index_k_proj;                /* (Di, C) */
    mt_tensor *index_q_norm, *index_k_norm; /* (Di), Gemma */
} msa_params;

static void *msa_layout(mt_layout_cursor *cur, const mt_layer_plan *p, int l) {
    const mt_minimax_config *cfg = &cur->m->cfg;
    const int64_t C = cfg->hidden_size, Di = cfg->msa_index_dim;
    const int64_t HiDi = (int64_t)cfg->msa_index_heads * Di;
    msa_params *w = mt_calloc(1, sizeof(*w), "MSA parameters");
    mt_block_attention_add(cur, p, l, &w->attn);
    const mt_param_init init = mt_layout_norm_init(p->norm);
    w->index_q_proj = mt_layout_add(cur, true, 2, HiDi, C, MT_INIT_NORMAL,
                                    "model.layers.%d.self_attn.index_q_proj.weight", l, 0);
    w->index_k_proj = mt_layout_add(cur, true, 2, Di, C, MT_INIT_NORMAL,
                                    "model.layers.%d.self_attn.index_k_proj.weight", l, 0);
    w->index_q_norm = mt_layout_add(cur, true, 1, Di, 0, init,
                                    "model.layers.%d.self_attn.index_q_norm.weight", l, 0);
    w->index_k_norm = mt_layout_add(cur, true, 1, Di, 0, init,
                                    "model.layers.%d.self_attn.index_k_norm.weight", l, 0);
    return w;
}

/* the attention's (with its QK norm) and the indexer's 4 */
static int msa_n_params(const mt_layer_plan *p) { return 6 + 4; }

static bool msa_can_decode(const mt_backend *be) {
    return be->decode.msa_select && be->decode.msa_select_work && be->decode.msa_attention;
}

/* x (B,T,n*Di) -> (B,T,n,Di), Gemma-normed per head and roped. */
static mt_tensor *msa_index_heads(mt_minimax *m, mt_ctx *c, mt_tensor *x, mt_tensor *norm,
                                  int64_t n, mt_tensor *pos) {
    const mt_minimax_config *cfg = &m->cfg;
    const int64_t B = x->shape[0], T = x->shape[1], Di = cfg->msa_index_dim;
    x = mt_view(c, x, 4, (int64_t[]){B, T, n, Di});
    x = mt_rmsnorm(c, x, norm, cfg->rms_norm_eps, true);
    return mt_rope(c, x, pos, cfg->rotary_dim, cfg->rope_theta);
}

/* Whether row b's step is dense: the selection covers every block its query sees. */
static bool msa_step_dense(const int32_t *t_end, int64_t b, int block, int topk) {
    return (t_end[b] - 1) / block + 1 <= topk;
}

/* One decode step of B rows (one query each, qd (B,H,D), iqd (B,Hkv,Di)) at positions
 * t_end[b] - 1: its key, value and index key are already in the caches; then the dense cached
 * attention for the rows whose selection covers every block, else the sparse step. A ragged
 * batch can hold rows of both kinds: each run of consecutive rows of one kind is one call on the
 * rows' slices of the caches, so each row takes exactly the path its one-prompt run would.
 * idd (B,Hkv,topk) and wd (msa_select_work) are scratch. */
static void msa_decode_rows(mt_minimax *m, const mt_backend *be, int l, float *od, const float *qd,
                            const float *iqd, const int32_t *t_end, int64_t B, mt_minimax_cache *kv,
                            int32_t *idd, float *wd) {
    const mt_minimax_config *cfg = &m->cfg;
    const int64_t H = cfg->num_attention_heads, Hkv = cfg->num_key_value_heads, D = cfg->head_dim,
                  Di = cfg->msa_index_dim;
    const int block = cfg->msa_block, topk = cfg->msa_topk;
    const float scale = (float)(1.0 / sqrt((double)D));
    for (int64_t b0 = 0, b1; b0 < B; b0 = b1) {
        const bool dense = msa_step_dense(t_end, b0, block, topk);
        for (b1 = b0 + 1; b1 < B && msa_step_dense(t_end, b1, block, topk) == dense; b1++) {
        }
        const int64_t n = b1 - b0;
        float *kc = kv->k[l] + (size_t)b0 * kv->row_kv, *vc = kv->v[l] + (size_t)b0 * kv->row_kv;
        if (dense) {
            MT_CHECK(be->decode.attention, "minimax: the %s backend has no cached attention step",
                     be->name);
            be->decode.attention(od + b0 * H * D, qd + b0 * H * D, kc, vc, t_end + b0, n, kv->t_max,
                                 H, Hkv, D, scale);
            continue;
        }
        be->decode.msa_select(idd + b0 * Hkv * topk, wd, iqd + b0 * Hkv * Di,
                              kv->ik[l] + (size_t)b0 * kv->row_ik, t_end + b0, n, kv->t_max, Hkv,
                              Di, block, topk);
        be->decode.msa_attention(od + b0 * H * D, qd + b0 * H * D, kc, vc, idd + b0 * Hkv * topk,
                                 t_end + b0, n, kv->t_max, H, Hkv, D, block, topk, scale);
    }
}

/* The cached forward's MSA core over filled rows: a decode step (T = 1, the rows' positions
 * kv->t_len[b]) or an extension of one row (B = 1, any T): token t, at position t_len + t, is a
 * decode step whose cache ends with it (every new key, value and index key is in already), so
 * each token selects and attends exactly as its prefill would. */
static mt_tensor *msa_decode(mt_minimax *m, mt_ctx *c, int l, mt_tensor *q, mt_tensor *iq,
                             mt_minimax_cache *kv) {
    const mt_minimax_config *cfg = &m->cfg;
    const int64_t B = q->shape[0], T = q->shape[1], H = cfg->num_attention_heads,
                  Hkv = cfg->num_key_value_heads, D = cfg->head_dim, Di = cfg->msa_index_dim;
    const int block = cfg->msa_block, topk = cfg->msa_topk;
    mt_tensor *o = mt_tensor_new(c, MT_F32, 4, (int64_t[]){B, T, H, D}, "msa.step");
    const mt_backend *be = c->be;
    MT_CHECK(msa_can_decode(be),
             "minimax: the %s backend has no MSA decode step (generation of MSA layers runs on the "
             "CPU backend)",
             be->name);
    mt_tensor *idx = mt_tensor_new(c, MT_I32, 3, (int64_t[]){B, Hkv, topk}, "msa.step.idx");
    const int64_t nw = be->decode.msa_select_work(B, Hkv, kv->t_max, block);
    mt_tensor *work = mt_tensor_new(c, MT_F32, 1, &nw, "msa.step.work");
    float *od = o->data;
    const float *qd = q->data, *iqd = iq->data;
    if (T == 1) {
        msa_decode_rows(m, be, l, od, qd, iqd, kv->t_end, B, kv, idx->data, work->data);
        return o;
    }
    MT_CHECK(B == 1, "minimax: a cached MSA extension takes one row, got B = %lld", (long long)B);
    if (be->decode.msa_chunk) { /* the whole extension in one call */
        be->decode.msa_chunk(od, qd, iqd, kv->k[l], kv->v[l], kv->ik[l], kv->t_len[0], T, kv->t_max,
                             H, Hkv, D, Di, block, topk, (float)(1.0 / sqrt((double)D)));
        return o;
    }
    for (int64_t t = 0; t < T; t++) {
        const int32_t end = kv->t_len[0] + (int32_t)t + 1;
        msa_decode_rows(m, be, l, od + t * H * D, qd + t * H * D, iqd + t * Hkv * Di, &end, 1, kv,
                        idx->data, work->data);
    }
    return o;
}

/* The attention's q, k, v (B,T,H|Hkv,D) and the indexer's iq (B,T,Hkv,Di), ik (B,T,1,Di) of h1;
 * with io->kv the keys, values and index keys join their caches. */
static void msa_project(mt_minimax *m, mt_ctx *c, int l, const msa_params *w, mt_tensor *h1,
                        mt_block_io *io, mt_tensor **q, mt_tensor **k, mt_tensor **v,
                        mt_tensor **iq, mt_tensor **ik) {
    const mt_minimax_config *cfg = &m->cfg;
    const int64_t B = h1->shape[0], T = h1->shape[1], Hkv = cfg->num_key_value_heads,
                  Di = cfg->msa_index_dim;
    MT_CHECK(cfg->msa_index_heads == Hkv,
             "minimax: layer %d: %d index heads, the MSA ops need one per kv head (%lld)", l,
             cfg->msa_index_heads, (long long)Hkv);
    mt_block_attention_qkv(m, c, l, &w->attn, h1, io, q, k, v);

    mt_tensor *x = h1;
    if (m->index_detach && h1->requires_grad) { /* the same values, no way back to h1 */
        x = mt_block_host_tensor(c, "msa.index_input");
        *x = *h1;
        x->grad = NULL;
        x->requires_grad = false;
    }
    *iq = msa_index_heads(m, c, mt_matmul(c, x, w->index_q_proj), w->index_q_norm, Hkv, io->pos);
    *ik = msa_index_heads(m, c, mt_matmul(c, x, w->index_k_proj), w->index_k_norm, 1, io->pos);

    mt_minimax_cache *kv = io->kv;
    if (kv) { /* the index keys join their cache, as the keys and values did */
        const float *src = (*ik)->data;
        for (int64_t b = 0; b < B; b++) /* backend memory on both sides */
            c->be->copy(kv->ik[l] + ((size_t)b * kv->t_max + (size_t)kv->t_len[b]) * (size_t)Di,
                        src + (size_t)(b * T) * (size_t)Di, sizeof(float) * (size_t)(T * Di));
    }
}

static mt_tensor *msa_forward(mt_minimax *m, mt_ctx *c, int l, mt_tensor *h1, mt_block_io *io) {
    const mt_minimax_config *cfg = &m->cfg;
    const msa_params *w = m->layers[l].mix;
    const int64_t D = cfg->head_dim, Di = cfg->msa_index_dim;
    const int block = cfg->msa_block, topk = cfg->msa_topk;
    mt_tensor *q, *k, *v, *iq, *ik;
    msa_project(m, c, l, w, h1, io, &q, &k, &v, &iq, &ik);
    /* Under context parallelism this rank's queries (and index queries) score, select and
     * attend over the whole row's keys, values and index keys, gathered in global order: the
     * blocks and the selection are one rank's, and the gathers' backward returns each rank's
     * key gradients (docs/training.md "Long sequences") */
    const mt_cp_group *cp = c->cp && c->cp->size > 1 ? c->cp : NULL;
    mt_tensor *pos = io->pos, *seg = io->seg, *slots = NULL;
    if (cp) {
        slots = mt_cp_local_slots(c, cp, q->shape[1]);
        pos = mt_cp_gather(c, pos, cp);
        seg = seg ? mt_cp_gather(c, seg, cp) : NULL;
        k = mt_cp_gather(c, k, cp);
        v = mt_cp_gather(c, v, cp);
        ik = mt_cp_gather(c, ik, cp);
    }
    mt_tensor *idx = mt_msa_select(c, iq, ik, pos, seg, slots, block, topk);
    const float scale = (float)(1.0 / sqrt((double)D));
    mt_tensor *o = mt_msa_attention(c, q, k, v, idx, pos, seg, slots, block, scale);
    if (!io->kv && c->grad_enabled && m->index_kl_coef != 0)
        io->index_kl = mt_msa_kl(c, q, k, iq, ik, idx, pos, seg, io->qmask, slots, block, scale,
                                 (float)(1.0 / sqrt((double)Di)), 1.0f, io->index_denom);
    return mt_block_attention_out(c, &w->attn, o);
}

/* A step or an extension: every row is filled. */
static mt_tensor *msa_cached(mt_minimax *m, mt_ctx *c, int l, mt_tensor *h1, mt_block_io *io) {
    const msa_params *w = m->layers[l].mix;
    mt_tensor *q, *k, *v, *iq, *ik;
    msa_project(m, c, l, w, h1, io, &q, &k, &v, &iq, &ik);
    return mt_block_attention_out(c, &w->attn, msa_decode(m, c, l, q, iq, io->kv));
}

const mt_mixer mt_mixer_msa = {
    .name = "MSA",
    .n_params = msa_n_params,
    .layout = msa_layout,
    .forward = msa_forward,
    .cached = msa_cached,
    .caches = MT_CACHE_KV | MT_CACHE_INDEX_KEYS,
    .can_decode = msa_can_decode,
    .index_kl = true,
};
