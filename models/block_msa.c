/* block_msa.c: MiniMax-M3's MSA sparse attention mixer (spec 3.4, 4): the softmax GQA of
 * block_attention.c (per-head Gemma QK norm, partial RoPE) whose keys each query may see are
 * the blocks the lightning indexer selects:
 *
 *   iq = GemmaNorm_Di(index_q_proj(h) (B,T,Hi,Di)),  ik = GemmaNorm_Di(index_k_proj(h) (B,T,1,Di))
 *   iq, ik = partial RoPE (the attention's rotary width and theta)
 *   block scores, top-k blocks plus the local ones per index head = KV group (spec 4)
 *
 * Parameters (layer l): the attention's (mt_block_attention_layout), then
 * self_attn.index_q_proj.weight (Hi*Di, C), index_k_proj.weight (Di, C), index_q_norm.weight
 * and index_k_norm.weight (Di), the released names (spec 8.2). */
#include "models/block.h"

void mt_block_msa_layout(mt_layout_cursor *cur, const mt_layer_plan *p, int l) {
    const mt_minimax_config *cfg = &cur->m->cfg;
    const int64_t C = cfg->hidden_size, Di = cfg->msa_index_dim;
    const int64_t HiDi = (int64_t)cfg->msa_index_heads * Di;
    mt_block_attention_layout(cur, p, l);
    const mt_param_init init = p->norm == MT_NORM_GEMMA ? MT_INIT_ZEROS : MT_INIT_ONES;
    mt_layout_add(cur, true, 2, HiDi, C, MT_INIT_NORMAL,
                  "model.layers.%d.self_attn.index_q_proj.weight", l, 0);
    mt_layout_add(cur, true, 2, Di, C, MT_INIT_NORMAL,
                  "model.layers.%d.self_attn.index_k_proj.weight", l, 0);
    mt_layout_add(cur, true, 1, Di, 0, init, "model.layers.%d.self_attn.index_q_norm.weight", l, 0);
    mt_layout_add(cur, true, 1, Di, 0, init, "model.layers.%d.self_attn.index_k_norm.weight", l, 0);
}

mt_tensor *mt_block_msa_forward(mt_minimax *m, mt_ctx *c, int l, mt_tensor *h, mt_block_io *io) {
    (void)m, (void)c, (void)h, (void)io;
    MT_DIE("minimax: layer %d: MSA sparse attention forward is not built yet", l);
}
