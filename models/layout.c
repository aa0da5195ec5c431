/* layout.c: the parameter layout of a MiniMax decoder (spec section 8), walked from the
 * per-layer plan (models/family.h), and the lightning decay rates (spec 4.2).
 *
 * Buckets (unit layer): 0 = embedding, 1 + l = decoder layer l, L + 1 = final norm + lm_head.
 * Inside a bucket the parameters come in this fixed order (names are transformers v4.5x names):
 *   bucket 0:      model.embed_tokens.weight                                 (V, C)
 *   bucket 1 + l:  model.layers.l.input_layernorm.weight                     (C)
 *                  the mixer's parameters (its mt_mixer's layout: models/block_lightning.c,
 *                  block_attention.c, block_msa.c)
 *                  post_attention_layernorm.weight                           (C)
 *                  the MLP's, dense: mlp.{gate,up}_proj.weight (F, C), down_proj (C, F);
 *                  or the MoE's: block_sparse_moe.gate.weight                (E, C)
 *                             [block_sparse_moe.e_score_correction_bias      (E), a buffer]
 *                             block_sparse_moe.experts.{0..E-1}.w1.weight    (F, C) each
 *                             block_sparse_moe.experts.{0..E-1}.w3.weight    (F, C) each
 *                             block_sparse_moe.experts.{0..E-1}.w2.weight    (C, F) each
 *   bucket L + 1:  model.norm.weight (C), lm_head.weight (V, C)
 * Every parameter starts at a multiple of MT_PARAM_ALIGN elements, except experts 1..E-1 of a
 * stack, which follow their predecessor with no gap: the w1 (and w3, w2) of all experts form
 * one contiguous (E, F, C) (resp. (E, C, F)) block starting at expert 0's offset, the layout
 * mt_moe_experts takes. Alignment gaps are part of bucket_numel and hold zeros.
 * Unit expert: the same order, but layer l's bucket ends after its router, and each expert e
 * gets the next bucket of its own: w1 (F,C), w3 (F,C), w2 (C,F), each aligned; and
 * embed_tokens and lm_head are cut into S = ceil(V / 3F) parts of ceil(V / S) rows (the last
 * smaller), each about an expert's size, so that no bucket (and no gather slot) is much larger
 * than an expert: embedding part k is bucket k, then each layer's bucket followed by its
 * experts' (layer l's first bucket is layer_bucket[l]), the final norm with lm_head part 0,
 * lm_head part k the k-th after it. A part is the parameter of its tensor's name covering its
 * rows (src_offset, src_shape0), so checkpoints load and export as the whole tensors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/block.h"

#define MT_PARAM_ALIGN 16 /* elements: 64 bytes */

mt_tensor *mt_layout_add(mt_layout_cursor *cur, bool align, int ndim, int64_t d0, int64_t d1,
                         mt_param_init init, const char *fmt, int a, int b) {
    mt_minimax *m = cur->m;
    mt_param_info *p = &m->info[m->n_params];
    int len = snprintf(p->name, sizeof(p->name), fmt, a, b);
    MT_CHECK(len > 0 && len < (int)sizeof(p->name), "layout: parameter name too long");
    if (align) cur->offset = (cur->offset + MT_PARAM_ALIGN - 1) / MT_PARAM_ALIGN * MT_PARAM_ALIGN;
    p->ndim = ndim;
    p->shape[0] = d0;
    p->shape[1] = d1;
    p->numel = ndim == 1 ? d0 : d0 * d1;
    p->bucket = cur->bucket;
    p->offset = cur->offset;
    p->src_offset = 0;
    p->src_shape0 = d0;
    p->init = init;
    cur->offset += p->numel;
    return &m->params[m->n_params++];
}

void mt_layout_mark_buffer(mt_layout_cursor *cur) {
    cur->m->info[cur->m->n_params - 1].buffer = true;
}

/* Part k of a (V,C) vocabulary matrix: its rows as a parameter of the same name. */
static mt_tensor *layout_add_vocab_part(mt_layout_cursor *cur, const char *name, int k) {
    mt_minimax *m = cur->m;
    const int64_t V = m->cfg.vocab_size, C = m->cfg.hidden_size, row0 = k * m->vocab_part_rows;
    const int64_t rows = k == m->vocab_parts - 1 ? V - row0 : m->vocab_part_rows;
    mt_tensor *t = mt_layout_add(cur, true, 2, rows, C, MT_INIT_NORMAL, name, 0, 0);
    m->info[m->n_params - 1].src_offset = row0 * C;
    m->info[m->n_params - 1].src_shape0 = V;
    return t;
}

void mt_layout_end_bucket(mt_layout_cursor *cur) {
    int64_t n = (cur->offset + MT_PARAM_ALIGN - 1) / MT_PARAM_ALIGN * MT_PARAM_ALIGN;
    cur->m->bucket_numel[cur->bucket] = n;
    cur->bucket++;
    cur->m->bucket_param[cur->bucket] = cur->m->n_params;
    cur->offset = 0;
}

/* Decay rate lambda_{l,h} = s_h * f_l (spec 4.2): s_h = base^(h+1), base = 2^(-8/H) (the
 * transformers form; equal to the original get_slopes for power-of-two H, which the config
 * reader requires for the original variant); f_l = 1 - l/(L-1) + 1e-5 (original) or
 * 1 - l/(L-1+1e-5) + 1e-5 (transformers), 1 + 1e-5 when L == 1. l is the global layer index. */
static void layout_decay(mt_minimax *m) {
    const mt_minimax_config *cfg = &m->cfg;
    int L = cfg->num_hidden_layers, H = cfg->num_attention_heads;
    m->decay = mt_malloc(sizeof(float) * (size_t)L * (size_t)H, "decay");
    double base = 1.0 / pow(2.0, 8.0 / H);
    for (int l = 0; l < L; l++) {
        double f;
        if (L <= 1)
            f = 1.0 + 1e-5;
        else if (cfg->slope_hf_denominator)
            f = 1.0 - l / (L - 1 + 1e-5) + 1e-5;
        else
            f = 1.0 - (double)l / (L - 1) + 1e-5;
        for (int h = 0; h < H; h++) m->decay[l * H + h] = (float)(pow(base, h + 1) * f);
    }
}

mt_param_init mt_layout_norm_init(mt_norm_kind k) {
    return k == MT_NORM_GEMMA ? MT_INIT_ZEROS : MT_INIT_ONES;
}

void mt_minimax_init(mt_minimax *m, const mt_minimax_config *cfg) {
    mt_minimax_init_unit(m, cfg, MT_GATHER_LAYER);
}

void mt_minimax_init_unit(mt_minimax *m, const mt_minimax_config *cfg, mt_gather_unit unit) {
    memset(m, 0, sizeof(*m));
    m->cfg = *cfg;
    m->unit = unit;
    m->index_kl_coef = 1.0f;
    m->index_detach = true;
    const int L = cfg->num_hidden_layers;
    MT_CHECK(L >= 1 && L <= MT_MAX_LAYERS, "layout: %d layers", L);
    const int64_t V = cfg->vocab_size, C = cfg->hidden_size, F = cfg->intermediate_size;
    const bool by_expert = unit == MT_GATHER_EXPERT;
    m->plan = mt_calloc((size_t)L, sizeof(mt_layer_plan), "layer plans");
    for (int l = 0; l < L; l++) mt_config_layer_plan(cfg, l, &m->plan[l]);
    /* unit expert: vocabulary parts of about an expert's 3F rows of C */
    const int S = by_expert && F > 0 ? (int)((V + 3 * F - 1) / (3 * F)) : 1;
    m->vocab_parts = S;
    m->vocab_part_rows = (V + S - 1) / S;
    MT_CHECK(S >= 1 && (S - 1) * m->vocab_part_rows < V, "layout: %d parts of %lld rows for V %lld",
             S, (long long)m->vocab_part_rows, (long long)V);
    m->layers = mt_calloc((size_t)L, sizeof(mt_layer_params), "layer parameters");
    /* a head model has no lm_head: one final bucket with the head (models/head.c) */
    const bool head = cfg->head != MT_HEAD_CAUSAL_LM;
    m->lm_parts = head ? 0 : S;
    int cap = S + 1 + (head ? 2 : S), n_buckets = S + (head ? 1 : S);
    for (int l = 0; l < L; l++) {
        m->layers[l].mixer = mt_mixer_of(m->plan[l].mixer);
        cap += 2 + m->layers[l].mixer->n_params(&m->plan[l]) + mt_block_moe_params(&m->plan[l]);
        n_buckets += 1 + mt_block_moe_buckets(m, &m->plan[l]);
    }
    m->info = mt_calloc((size_t)cap, sizeof(mt_param_info), "parameter info");
    m->params = mt_calloc((size_t)cap, sizeof(mt_tensor), "parameters");
    m->embed = mt_calloc((size_t)(2 * S), sizeof(mt_tensor *), "vocabulary parts");
    m->lm_head = m->embed + S;
    m->n_buckets = n_buckets;
    m->bucket_numel = mt_calloc((size_t)m->n_buckets, sizeof(int64_t), "bucket sizes");
    m->bucket_param = mt_calloc((size_t)m->n_buckets + 1, sizeof(int), "bucket parameters");
    m->layer_bucket = mt_calloc((size_t)L, sizeof(int), "layer buckets");
    m->bucket_layer = mt_malloc(sizeof(int) * (size_t)m->n_buckets, "bucket layers");
    for (int b = 0; b < m->n_buckets; b++) m->bucket_layer[b] = -1;

    mt_layout_cursor cur = {m, 0, 0};
    for (int k = 0; k < S; k++) {
        m->embed[k] = layout_add_vocab_part(&cur, "model.embed_tokens.weight", k);
        mt_layout_end_bucket(&cur);
    }
    for (int l = 0; l < L; l++) {
        const mt_layer_plan *p = &m->plan[l];
        mt_layer_params *lp = &m->layers[l];
        m->layer_bucket[l] = cur.bucket;
        m->bucket_layer[cur.bucket] = l;
        lp->input_norm = mt_layout_add(&cur, true, 1, C, 0, mt_layout_norm_init(p->norm),
                                       "model.layers.%d.input_layernorm.weight", l, 0);
        lp->mix = lp->mixer->layout(&cur, p, l);
        lp->post_norm = mt_layout_add(&cur, true, 1, C, 0, mt_layout_norm_init(p->norm),
                                      "model.layers.%d.post_attention_layernorm.weight", l, 0);
        if (p->mlp == MT_MLP_DENSE)
            mt_block_mlp_layout(&cur, p, l, &lp->mlp); /* ends the layer's bucket */
        else
            mt_block_moe_layout(&cur, p, l, &lp->moe); /* ends the layer's bucket(s) */
    }
    /* the final norm is of the last layer's kind */
    m->final_norm = mt_layout_add(&cur, true, 1, C, 0, mt_layout_norm_init(m->plan[L - 1].norm),
                                  "model.norm.weight", 0, 0);
    if (head) {
        mt_head_layout(&cur);
        mt_layout_end_bucket(&cur);
    }
    for (int k = 0; k < m->lm_parts; k++) {
        m->lm_head[k] = layout_add_vocab_part(&cur, "lm_head.weight", k);
        mt_layout_end_bucket(&cur);
    }
    MT_CHECK(m->n_params <= cap && cur.bucket == m->n_buckets,
             "layout: planned at most %d parameters in %d buckets, made %d in %d", cap,
             m->n_buckets, m->n_params, cur.bucket);

    for (int i = 0; i < m->n_params; i++) {
        const mt_param_info *p = &m->info[i];
        mt_tensor_wrap(&m->params[i], MT_F32, p->ndim, p->shape, NULL, NULL, p->name);
    }
    layout_decay(m);
}

int mt_minimax_layer_bucket(const mt_minimax *m, int l) {
    MT_CHECK(l >= 0 && l < m->cfg.num_hidden_layers, "layout: layer %d of %d", l,
             m->cfg.num_hidden_layers);
    return m->layer_bucket[l];
}

int mt_minimax_expert_bucket(const mt_minimax *m, int l, int e) {
    const int lb = mt_minimax_layer_bucket(m, l);
    MT_CHECK(e >= 0 && e < m->plan[l].n_experts, "layout: expert %d of %d (layer %d)", e,
             m->plan[l].n_experts, l);
    return m->unit == MT_GATHER_EXPERT ? lb + 1 + e : lb;
}

int mt_minimax_layer_last_bucket(const mt_minimax *m, int l) {
    return mt_minimax_layer_bucket(m, l) + mt_block_moe_buckets(m, &m->plan[l]);
}

int mt_minimax_final_bucket(const mt_minimax *m) {
    return m->n_buckets - (m->lm_parts > 0 ? m->lm_parts : 1);
}

int mt_minimax_bucket_layer(const mt_minimax *m, int bucket) {
    return bucket >= 0 && bucket < m->n_buckets ? m->bucket_layer[bucket] : -1;
}

void mt_minimax_free(mt_minimax *m) {
    for (int l = 0; m->layers && l < m->cfg.num_hidden_layers; l++) {
        free(m->layers[l].mix);
        free(m->layers[l].moe.w1); /* w3 and w2 share its allocation */
    }
    free(m->layers);
    free(m->embed); /* and lm_head */
    free(m->bucket_param);
    free(m->info);
    free(m->params);
    free(m->bucket_numel);
    free(m->layer_bucket);
    free(m->bucket_layer);
    free(m->plan);
    free(m->decay);
    memset(m, 0, sizeof(*m));
}

void mt_minimax_bind_bucket(mt_minimax *m, int bucket, float *data, float *grad) {
    MT_CHECK(bucket >= 0 && bucket < m->n_buckets, "bind: bucket %d of %d", bucket, m->n_buckets);
    for (int i = 0; i < m->n_params; i++) {
        const mt_param_info *p = &m->info[i];
        if (p->bucket != bucket) continue;
        m->params[i].data = data ? data + p->offset : NULL;
        m->params[i].grad = grad && !p->buffer ? grad + p->offset : NULL;
        m->params[i].requires_grad = grad && !p->buffer;
    }
}

int mt_minimax_find_param(const mt_minimax *m, const char *name) {
    for (int i = 0; i < m->n_params; i++)
        if (strcmp(m->info[i].name, name) == 0) return i;
    return -1;
}

bool mt_minimax_param_overlap(const mt_minimax *m, int p, int bucket, int64_t lo, int64_t hi,
                              int64_t *a, int64_t *b) {
    const mt_param_info *info = &m->info[p];
    if (info->bucket != bucket) return false;
    *a = info->offset > lo ? info->offset : lo;
    *b = info->offset + info->numel < hi ? info->offset + info->numel : hi;
    return *a < *b;
}
