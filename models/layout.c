/* layout.c: the parameter layout of MiniMax-Text-01 (spec section 8) and the lightning decay
 * rates (spec 4.2).
 *
 * Buckets (unit layer): 0 = embedding, 1 + l = decoder layer l, L + 1 = final norm + lm_head.
 * Inside a bucket the parameters come in this fixed order (names are transformers v4.5x names):
 *   bucket 0:      model.embed_tokens.weight                                 (V, C)
 *   bucket 1 + l:  model.layers.l.input_layernorm.weight                     (C)
 *                  lightning layer: self_attn.qkv_proj.weight                (3HD, C)
 *                                   self_attn.output_gate.weight             (HD, C)
 *                                   self_attn.norm.weight                    (HD)
 *                                   self_attn.out_proj.weight                (C, HD)
 *                  softmax layer:   self_attn.q_proj.weight                  (HD, C)
 *                                   self_attn.k_proj.weight                  (KV*D, C)
 *                                   self_attn.v_proj.weight                  (KV*D, C)
 *                                   self_attn.o_proj.weight                  (C, HD)
 *                  post_attention_layernorm.weight                           (C)
 *                  block_sparse_moe.gate.weight                              (E, C)
 *                  block_sparse_moe.experts.{0..E-1}.w1.weight               (F, C) each
 *                  block_sparse_moe.experts.{0..E-1}.w3.weight               (F, C) each
 *                  block_sparse_moe.experts.{0..E-1}.w2.weight               (C, F) each
 *   bucket L + 1:  model.norm.weight (C), lm_head.weight (V, C)
 * Every parameter starts at a multiple of MT_PARAM_ALIGN elements, except experts 1..E-1 of a
 * stack, which follow their predecessor with no gap: the w1 (and w3, w2) of all experts form
 * one contiguous (E, F, C) (resp. (E, C, F)) block starting at expert 0's offset, the layout
 * mt_moe_experts takes. Alignment gaps are part of bucket_numel and hold zeros.
 * Unit expert: the same order, but layer l's bucket ends after its router, and each expert e
 * gets the next bucket of its own: w1 (F,C), w3 (F,C), w2 (C,F), each aligned; and
 * embed_tokens and lm_head are cut into S = ceil(V / 3F) parts of ceil(V / S) rows (the last
 * smaller), each about an expert's size, so that no bucket (and no gather slot) is much larger
 * than an expert: embedding part k is bucket k, layer l's bucket S + l (E + 1), its expert e's
 * S + 1 + l (E + 1) + e, the final norm with lm_head part 0 S + L (E + 1), lm_head part k the
 * k-th after it. A part is the parameter of its tensor's name covering its rows
 * (src_offset, src_shape0), so checkpoints load and export as the whole tensors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/minimax.h"

#define MT_PARAM_ALIGN 16 /* elements: 64 bytes */

typedef struct {
    mt_minimax *m;
    int bucket;
    int64_t offset; /* next free element in the bucket */
} layout_cursor;

static void layout_add(layout_cursor *cur, bool align, int ndim, int64_t d0, int64_t d1,
                       const char *fmt, int a, int b) {
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
    cur->offset += p->numel;
    m->n_params++;
}

/* Part k of a (V,C) vocabulary matrix: its rows as a parameter of the same name. */
static void layout_add_vocab_part(layout_cursor *cur, const char *name, int k) {
    mt_minimax *m = cur->m;
    const int64_t V = m->cfg.vocab_size, C = m->cfg.hidden_size, row0 = k * m->vocab_part_rows;
    const int64_t rows = k == m->vocab_parts - 1 ? V - row0 : m->vocab_part_rows;
    layout_add(cur, true, 2, rows, C, name, 0, 0);
    m->info[m->n_params - 1].src_offset = row0 * C;
    m->info[m->n_params - 1].src_shape0 = V;
}

static void layout_end_bucket(layout_cursor *cur) {
    int64_t n = (cur->offset + MT_PARAM_ALIGN - 1) / MT_PARAM_ALIGN * MT_PARAM_ALIGN;
    cur->m->bucket_numel[cur->bucket] = n;
    cur->bucket++;
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

void mt_minimax_init(mt_minimax *m, const mt_minimax_config *cfg) {
    mt_minimax_init_unit(m, cfg, MT_GATHER_LAYER);
}

void mt_minimax_init_unit(mt_minimax *m, const mt_minimax_config *cfg, mt_gather_unit unit) {
    memset(m, 0, sizeof(*m));
    m->cfg = *cfg;
    m->unit = unit;
    int L = cfg->num_hidden_layers, E = cfg->num_local_experts;
    MT_CHECK(L >= 1 && L <= MT_MAX_LAYERS, "layout: %d layers", L);
    int64_t V = cfg->vocab_size, C = cfg->hidden_size, F = cfg->intermediate_size;
    int64_t HD = (int64_t)cfg->num_attention_heads * cfg->head_dim;
    int64_t KVD = (int64_t)cfg->num_key_value_heads * cfg->head_dim;
    const bool by_expert = unit == MT_GATHER_EXPERT;
    /* unit expert: vocabulary parts of about an expert's 3F rows of C */
    const int S = by_expert && F > 0 ? (int)((V + 3 * F - 1) / (3 * F)) : 1;
    m->vocab_parts = S;
    m->vocab_part_rows = (V + S - 1) / S;
    MT_CHECK(S >= 1 && (S - 1) * m->vocab_part_rows < V, "layout: %d parts of %lld rows for V %lld",
             S, (long long)m->vocab_part_rows, (long long)V);
    int cap = S + L * (7 + 3 * E) + 1 + S;
    m->info = mt_calloc((size_t)cap, sizeof(mt_param_info), "parameter info");
    m->n_buckets = by_expert ? S + L * (E + 1) + S : L + 2;
    m->bucket_numel = mt_calloc((size_t)m->n_buckets, sizeof(int64_t), "bucket sizes");

    layout_cursor cur = {m, 0, 0};
    for (int k = 0; k < S; k++) {
        layout_add_vocab_part(&cur, "model.embed_tokens.weight", k);
        layout_end_bucket(&cur);
    }
    for (int l = 0; l < L; l++) {
        layout_add(&cur, true, 1, C, 0, "model.layers.%d.input_layernorm.weight", l, 0);
        if (cfg->layer_types[l] == MT_LAYER_LINEAR) {
            layout_add(&cur, true, 2, 3 * HD, C, "model.layers.%d.self_attn.qkv_proj.weight", l, 0);
            layout_add(&cur, true, 2, HD, C, "model.layers.%d.self_attn.output_gate.weight", l, 0);
            layout_add(&cur, true, 1, HD, 0, "model.layers.%d.self_attn.norm.weight", l, 0);
            layout_add(&cur, true, 2, C, HD, "model.layers.%d.self_attn.out_proj.weight", l, 0);
        } else {
            layout_add(&cur, true, 2, HD, C, "model.layers.%d.self_attn.q_proj.weight", l, 0);
            layout_add(&cur, true, 2, KVD, C, "model.layers.%d.self_attn.k_proj.weight", l, 0);
            layout_add(&cur, true, 2, KVD, C, "model.layers.%d.self_attn.v_proj.weight", l, 0);
            layout_add(&cur, true, 2, C, HD, "model.layers.%d.self_attn.o_proj.weight", l, 0);
        }
        layout_add(&cur, true, 1, C, 0, "model.layers.%d.post_attention_layernorm.weight", l, 0);
        layout_add(&cur, true, 2, E, C, "model.layers.%d.block_sparse_moe.gate.weight", l, 0);
        if (by_expert) {
            layout_end_bucket(&cur);
            for (int e = 0; e < E; e++) {
                layout_add(&cur, true, 2, F, C,
                           "model.layers.%d.block_sparse_moe.experts.%d.w1.weight", l, e);
                layout_add(&cur, true, 2, F, C,
                           "model.layers.%d.block_sparse_moe.experts.%d.w3.weight", l, e);
                layout_add(&cur, true, 2, C, F,
                           "model.layers.%d.block_sparse_moe.experts.%d.w2.weight", l, e);
                layout_end_bucket(&cur);
            }
            continue;
        }
        for (int e = 0; e < E; e++)
            layout_add(&cur, e == 0, 2, F, C,
                       "model.layers.%d.block_sparse_moe.experts.%d.w1.weight", l, e);
        for (int e = 0; e < E; e++)
            layout_add(&cur, e == 0, 2, F, C,
                       "model.layers.%d.block_sparse_moe.experts.%d.w3.weight", l, e);
        for (int e = 0; e < E; e++)
            layout_add(&cur, e == 0, 2, C, F,
                       "model.layers.%d.block_sparse_moe.experts.%d.w2.weight", l, e);
        layout_end_bucket(&cur);
    }
    layout_add(&cur, true, 1, C, 0, "model.norm.weight", 0, 0);
    for (int k = 0; k < S; k++) {
        layout_add_vocab_part(&cur, "lm_head.weight", k);
        layout_end_bucket(&cur);
    }
    MT_CHECK(m->n_params == cap && cur.bucket == m->n_buckets,
             "layout: planned %d parameters in %d buckets, made %d in %d", cap, m->n_buckets,
             m->n_params, cur.bucket);

    m->params = mt_calloc((size_t)m->n_params, sizeof(mt_tensor), "parameters");
    for (int i = 0; i < m->n_params; i++) {
        const mt_param_info *p = &m->info[i];
        mt_tensor_wrap(&m->params[i], MT_F32, p->ndim, p->shape, NULL, NULL, p->name);
    }
    layout_decay(m);
}

int mt_minimax_layer_bucket(const mt_minimax *m, int l) {
    MT_CHECK(l >= 0 && l < m->cfg.num_hidden_layers, "layout: layer %d of %d", l,
             m->cfg.num_hidden_layers);
    return m->unit == MT_GATHER_EXPERT ? m->vocab_parts + l * (m->cfg.num_local_experts + 1)
                                       : 1 + l;
}

int mt_minimax_expert_bucket(const mt_minimax *m, int l, int e) {
    MT_CHECK(e >= 0 && e < m->cfg.num_local_experts, "layout: expert %d of %d", e,
             m->cfg.num_local_experts);
    const int lb = mt_minimax_layer_bucket(m, l);
    return m->unit == MT_GATHER_EXPERT ? lb + 1 + e : lb;
}

int mt_minimax_final_bucket(const mt_minimax *m) { return m->n_buckets - m->vocab_parts; }

int mt_minimax_bucket_layer(const mt_minimax *m, int bucket) {
    const int L = m->cfg.num_hidden_layers, first = mt_minimax_layer_bucket(m, 0),
              per = m->unit == MT_GATHER_EXPERT ? m->cfg.num_local_experts + 1 : 1;
    if (bucket < first || bucket >= first + L * per || (bucket - first) % per != 0) return -1;
    return (bucket - first) / per;
}

void mt_minimax_free(mt_minimax *m) {
    free(m->info);
    free(m->params);
    free(m->bucket_numel);
    free(m->decay);
    memset(m, 0, sizeof(*m));
}

void mt_minimax_bind_bucket(mt_minimax *m, int bucket, float *data, float *grad) {
    MT_CHECK(bucket >= 0 && bucket < m->n_buckets, "bind: bucket %d of %d", bucket, m->n_buckets);
    for (int i = 0; i < m->n_params; i++) {
        const mt_param_info *p = &m->info[i];
        if (p->bucket != bucket) continue;
        m->params[i].data = data ? data + p->offset : NULL;
        m->params[i].grad = grad ? grad + p->offset : NULL;
        m->params[i].requires_grad = grad != NULL;
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
