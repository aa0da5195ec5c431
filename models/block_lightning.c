/* block_lightning.c: the lightning attention mixer of MiniMax-Text-01 (spec 4):
 *
 *   qkv = silu(h Wqkv^T)              (B,T,H,3D), per head [q|k|v]
 *   o   = decayed linear attention    (B,T,H,D), lambda per (layer, head): models/layout.c
 *   o   = RMSNorm_{H*D}(o) (eps 1e-6, as transformers and the original build it)
 *   out = (sigmoid(h Wgate^T) * o) Wout^T
 *
 * Parameters (layer l): self_attn.qkv_proj.weight (3HD, C), output_gate.weight (HD, C),
 * norm.weight (HD), out_proj.weight (C, HD). Generation keeps the final (H,D,D) state and
 * takes one recurrent step per token (models/generate.h). Its table is mt_mixer_lightning. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "models/block.h"

typedef struct {
    mt_tensor *qkv_proj;    /* (3HD, C) */
    mt_tensor *output_gate; /* (HD, C) */
    mt_tensor *norm;        /* (HD) */
    mt_tensor *out_proj;    /* (C, HD) */
} lightning_params;

static void *lightning_layout(mt_layout_cursor *cur, const mt_layer_plan *p, int l) {
    const mt_minimax_config *cfg = &cur->m->cfg;
    const int64_t C = cfg->hidden_size, HD = (int64_t)cfg->num_attention_heads * cfg->head_dim;
    lightning_params *w = mt_calloc(1, sizeof(*w), "lightning parameters");
    w->qkv_proj = mt_layout_add(cur, true, 2, 3 * HD, C, MT_INIT_NORMAL,
                                "model.layers.%d.self_attn.qkv_proj.weight", l, 0);
    w->output_gate = mt_layout_add(cur, true, 2, HD, C, MT_INIT_NORMAL,
                                   "model.layers.%d.self_attn.output_gate.weight", l, 0);
    w->norm = mt_layout_add(cur, true, 1, HD, 0, MT_INIT_ONES,
                            "model.layers.%d.self_attn.norm.weight", l, 0);
    w->out_proj = mt_layout_add(cur, true, 2, C, HD, MT_INIT_NORMAL,
                                "model.layers.%d.self_attn.out_proj.weight", l, 0);
    return w;
}

static int lightning_n_params(const mt_layer_plan *p) { return 4; }

/* qkv (B,T,H,3D) of h1, and *decay the layer's per-head rates (H) on the backend. */
static mt_tensor *lightning_qkv(mt_minimax *m, mt_ctx *c, int l, const lightning_params *w,
                                mt_tensor *h1, mt_tensor **decay) {
    const int64_t B = h1->shape[0], T = h1->shape[1], H = m->cfg.num_attention_heads,
                  D = m->cfg.head_dim;
    mt_tensor *qkv = mt_silu(c, mt_matmul(c, h1, w->qkv_proj));
    qkv = mt_view(c, qkv, 4, (int64_t[]){B, T, H, 3 * D});
    /* the per-head decay rates live on the host (config); the kernels read them on the backend */
    *decay = mt_tensor_new(c, MT_F32, 1, &H, "decay");
    c->be->to_device((*decay)->data, m->decay + (int64_t)l * H, sizeof(float) * (size_t)H);
    return qkv;
}

/* The output of o (B,T,H,D): normed, gated by h1, projected. */
static mt_tensor *lightning_out(mt_ctx *c, const lightning_params *w, mt_tensor *h1, mt_tensor *o) {
    const int64_t B = o->shape[0], T = o->shape[1], HD = o->shape[2] * o->shape[3];
    o = mt_view(c, o, 3, (int64_t[]){B, T, HD});
    o = mt_rmsnorm(c, o, w->norm, 1e-6f, false);
    mt_tensor *gate = mt_sigmoid(c, mt_matmul(c, h1, w->output_gate));
    o = mt_mul(c, gate, o);
    return mt_matmul(c, o, w->out_proj);
}

static mt_tensor *lightning_forward(mt_minimax *m, mt_ctx *c, int l, mt_tensor *h1,
                                    mt_block_io *io) {
    const lightning_params *w = m->layers[l].mix;
    const int64_t B = h1->shape[0], T = h1->shape[1], H = m->cfg.num_attention_heads,
                  D = m->cfg.head_dim;
    mt_tensor *decay;
    mt_tensor *qkv = lightning_qkv(m, c, l, w, h1, &decay);
    /* under context parallelism the earlier chunks' states come in by a scan over the ranks */
    mt_tensor *o = mt_cp_lightning(c, qkv, decay, io->seg, m->cfg.block_size, c->cp);
    if (io->kv) { /* prefill: the final state is the decode cache */
        MT_CHECK(c->be->decode.lightning_state,
                 "minimax: the %s backend has no lightning state for a cache", c->be->name);
        c->be->decode.lightning_state(io->kv->state[l], qkv->data, decay->data, NULL, (int)B,
                                      (int)T, (int)H, (int)D);
    }
    return lightning_out(c, w, h1, o);
}

/* One recurrent step on the cached state per token: a decode step (T = 1, any B), or an
 * extension of one row (B = 1, any T: the backend's chunk op, else the recurrence token by
 * token). */
static mt_tensor *lightning_cached(mt_minimax *m, mt_ctx *c, int l, mt_tensor *h1,
                                   mt_block_io *io) {
    const lightning_params *w = m->layers[l].mix;
    const int64_t B = h1->shape[0], T = h1->shape[1], H = m->cfg.num_attention_heads,
                  D = m->cfg.head_dim;
    mt_tensor *decay;
    mt_tensor *qkv = lightning_qkv(m, c, l, w, h1, &decay);
    MT_CHECK(T == 1 || B == 1,
             "minimax: a cached step takes one token per row or one row, got B = %lld, "
             "T = %lld",
             (long long)B, (long long)T);
    MT_CHECK(c->be->decode.lightning_step, "minimax: the %s backend has no cached lightning step",
             c->be->name);
    mt_tensor *o = mt_tensor_new(c, MT_F32, 4, (int64_t[]){B, T, H, D}, "lightning.step");
    if (T > 1 && c->be->decode.lightning_chunk) /* an extension in one call */
        c->be->decode.lightning_chunk(io->kv->state[l], qkv->data, decay->data, o->data, (int)T,
                                      (int)H, (int)D);
    else
        for (int64_t t = 0; t < T; t++)
            c->be->decode.lightning_step(io->kv->state[l], (const float *)qkv->data + t * H * 3 * D,
                                         decay->data, (float *)o->data + t * H * D, (int)B, (int)H,
                                         (int)D);
    return lightning_out(c, w, h1, o);
}

/* transformers saves four buffers per lightning layer that it derives from the config
 * (modeling_minimax.py: get_slope_rate, decay_factors) and reports them missing when a checkpoint
 * lacks them; they are written here the same way, from the layer's decay lambda (fp32 products,
 * as torch computes them). The loader checks them and never loads them (models/weights.c). */
static void lightning_export_buffers(const mt_minimax *m, int l, mt_buffer_out *out, void *user) {
    const int H = m->cfg.num_attention_heads, Bk = m->cfg.block_size;
    const float *lambda = m->decay + (int64_t)l * H;
    float *slope = mt_malloc(sizeof(float) * (size_t)H, "slope_rate");
    float *qd = mt_malloc(sizeof(float) * (size_t)H * Bk, "query_decay");
    float *kd = mt_malloc(sizeof(float) * (size_t)H * Bk, "key_decay");
    float *dd = mt_malloc(sizeof(float) * (size_t)H * Bk * Bk, "diagonal_decay");
    for (int h = 0; h < H; h++) {
        float s = lambda[h];
        slope[h] = s;
        for (int j = 0; j < Bk; j++) {
            qd[(int64_t)h * Bk + j] = expf(-(s * (float)(j + 1)));
            kd[(int64_t)h * Bk + j] = expf(-(s * (float)(Bk - (j + 1))));
            for (int i = 0; i < Bk; i++)
                dd[((int64_t)h * Bk + i) * Bk + j] = i >= j ? expf(-(s * (float)(i - j))) : 0.0f;
        }
    }
    char name[160];
    const char *kinds[4] = {"slope_rate", "query_decay", "key_decay", "diagonal_decay"};
    const float *vals[4] = {slope, qd, kd, dd};
    int64_t shapes[4][4] = {{H, 1, 1}, {H, Bk, 1}, {H, Bk, 1}, {1, H, Bk, Bk}};
    int ndims[4] = {3, 3, 3, 4};
    for (int k = 0; k < 4; k++) {
        snprintf(name, sizeof(name), "model.layers.%d.self_attn.%s", l, kinds[k]);
        out(user, name, ndims[k], shapes[k], vals[k]);
    }
    free(slope);
    free(qd);
    free(kd);
    free(dd);
}

const mt_mixer mt_mixer_lightning = {
    .name = "lightning",
    .n_params = lightning_n_params,
    .layout = lightning_layout,
    .forward = lightning_forward,
    .cached = lightning_cached,
    .caches = MT_CACHE_STATE,
    .export_buffers = lightning_export_buffers,
};
