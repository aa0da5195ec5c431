/* block_lightning.c: the lightning attention mixer of MiniMax-Text-01 (spec 4):
 *
 *   qkv = silu(h Wqkv^T)              (B,T,H,3D), per head [q|k|v]
 *   o   = decayed linear attention    (B,T,H,D), lambda per (layer, head): models/layout.c
 *   o   = RMSNorm_{H*D}(o) (eps 1e-6, as transformers and the original build it)
 *   out = (sigmoid(h Wgate^T) * o) Wout^T
 *
 * Parameters (layer l): self_attn.qkv_proj.weight (3HD, C), output_gate.weight (HD, C),
 * norm.weight (HD), out_proj.weight (C, HD). Generation keeps the final (H,D,D) state and
 * takes one recurrent step per token (models/generate.h). */
#include "models/block.h"

void mt_block_lightning_layout(mt_layout_cursor *cur, const mt_layer_plan *p, int l) {
    const mt_minimax_config *cfg = &cur->m->cfg;
    const int64_t C = cfg->hidden_size, HD = (int64_t)cfg->num_attention_heads * cfg->head_dim;
    mt_layout_add(cur, true, 2, 3 * HD, C, MT_INIT_NORMAL,
                  "model.layers.%d.self_attn.qkv_proj.weight", l, 0);
    mt_layout_add(cur, true, 2, HD, C, MT_INIT_NORMAL,
                  "model.layers.%d.self_attn.output_gate.weight", l, 0);
    mt_layout_add(cur, true, 1, HD, 0, MT_INIT_ONES, "model.layers.%d.self_attn.norm.weight", l, 0);
    mt_layout_add(cur, true, 2, C, HD, MT_INIT_NORMAL, "model.layers.%d.self_attn.out_proj.weight",
                  l, 0);
}

mt_tensor *mt_block_lightning_forward(mt_minimax *m, mt_ctx *c, int l, mt_tensor *h1,
                                      mt_block_io *io) {
    const mt_minimax_config *cfg = &m->cfg;
    const int64_t B = h1->shape[0], T = h1->shape[1], H = cfg->num_attention_heads,
                  D = cfg->head_dim;
    mt_tensor *qkv = mt_silu(
        c, mt_matmul(c, h1, mt_block_param(m, "model.layers.%d.self_attn.qkv_proj.weight", l)));
    qkv = mt_view(c, qkv, 4, (int64_t[]){B, T, H, 3 * D});
    /* the per-head decay rates live on the host (config); the kernels read them on the backend */
    mt_tensor *decay = mt_tensor_new(c, MT_F32, 1, &H, "decay");
    c->be->to_device(decay->data, m->decay + (int64_t)l * H, sizeof(float) * (size_t)H);

    mt_tensor *o;
    if (io->kv && io->kv->t_len[0] > 0) { /* every row is filled */
        /* decode: one recurrent step on the cached state per token (a decode step, T = 1, any
         * B; or an extension of one row, B = 1, any T: the recurrence token by token) */
        MT_CHECK(T == 1 || B == 1,
                 "minimax: a cached step takes one token per row or one row, got B = %lld, "
                 "T = %lld",
                 (long long)B, (long long)T);
        MT_CHECK(c->be->decode.lightning_step,
                 "minimax: the %s backend has no cached lightning step", c->be->name);
        o = mt_tensor_new(c, MT_F32, 4, (int64_t[]){B, T, H, D}, "lightning.step");
        if (T > 1 && c->be->decode.lightning_chunk) /* an extension in one call */
            c->be->decode.lightning_chunk(io->kv->state[l], qkv->data, decay->data, o->data, (int)T,
                                          (int)H, (int)D);
        else
            for (int64_t t = 0; t < T; t++)
                c->be->decode.lightning_step(io->kv->state[l],
                                             (const float *)qkv->data + t * H * 3 * D, decay->data,
                                             (float *)o->data + t * H * D, (int)B, (int)H, (int)D);
    } else {
        o = mt_lightning(c, qkv, decay, io->seg, cfg->block_size);
        if (io->kv) { /* prefill: the final state is the decode cache */
            MT_CHECK(c->be->decode.lightning_state,
                     "minimax: the %s backend has no lightning state for a cache", c->be->name);
            c->be->decode.lightning_state(io->kv->state[l], qkv->data, decay->data, NULL, (int)B,
                                          (int)T, (int)H, (int)D);
        }
    }
    o = mt_view(c, o, 3, (int64_t[]){B, T, H * D});
    o = mt_rmsnorm(c, o, mt_block_param(m, "model.layers.%d.self_attn.norm.weight", l), 1e-6f,
                   false);
    mt_tensor *gate = mt_sigmoid(
        c, mt_matmul(c, h1, mt_block_param(m, "model.layers.%d.self_attn.output_gate.weight", l)));
    o = mt_mul(c, gate, o);
    return mt_matmul(c, o, mt_block_param(m, "model.layers.%d.self_attn.out_proj.weight", l));
}
