/* block_mlp.c: the dense SwiGLU MLP a layer's plan may take instead of the MoE (models/family.h,
 * MT_MLP_DENSE: MiniMax-M3's first layers), with the plan's activation (SiLU, or the clamped
 * "swigluoai" of minimax-m3.md 7); its body is also the MoE's shared expert (block_moe.c):
 *
 *   y = down (act(h gate^T, h up^T))      h (B,T,C), gate and up (F,C), down (C,F)
 *
 * Parameters (layer l): mlp.gate_proj.weight, mlp.up_proj.weight (F, C), mlp.down_proj.weight
 * (C, F), in the layer's bucket (no expert buckets with either gather unit). It is the MoE's
 * expert with weight 1: `op_mlp_dense` checks it against a one-expert MoE. */
#include "models/block.h"

void mt_block_mlp_layout(mt_layout_cursor *cur, const mt_layer_plan *p, int l, mt_mlp_params *w) {
    const int64_t C = cur->m->cfg.hidden_size, F = p->expert_ffn;
    w->gate_proj = mt_layout_add(cur, true, 2, F, C, MT_INIT_NORMAL,
                                 "model.layers.%d.mlp.gate_proj.weight", l, 0);
    w->up_proj = mt_layout_add(cur, true, 2, F, C, MT_INIT_NORMAL,
                               "model.layers.%d.mlp.up_proj.weight", l, 0);
    w->down_proj = mt_layout_add(cur, true, 2, C, F, MT_INIT_NORMAL,
                                 "model.layers.%d.mlp.down_proj.weight", l, 0);
    mt_layout_end_bucket(cur);
}

mt_act mt_block_act(const mt_layer_plan *p) {
    mt_act a = {p->act == MT_ACT_SWIGLUOAI, p->act_alpha, p->act_limit, p->act_beta};
    return a;
}

mt_tensor *mt_block_ffn(mt_ctx *c, const mt_layer_plan *p, mt_tensor *h, const mt_mlp_params *w) {
    const mt_act act = mt_block_act(p);
    mt_tensor *g = mt_matmul(c, h, w->gate_proj);
    mt_tensor *u = mt_matmul(c, h, w->up_proj);
    return mt_matmul(c, mt_swiglu_act(c, g, u, &act), w->down_proj);
}

mt_tensor *mt_block_mlp_forward(mt_minimax *m, mt_ctx *c, int l, mt_tensor *h) {
    return mt_block_ffn(c, &m->plan[l], h, &m->layers[l].mlp);
}
