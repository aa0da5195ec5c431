/* block.h: the blocks a decoder layer is built of (models/family.h, mt_layer_plan), one file
 * each: models/block_lightning.c, models/block_attention.c (token mixers), models/block_moe.c
 * (the MoE with its router), models/block_mlp.c (the dense MLP). Internal to models/: the
 * layout (models/layout.c) asks each block for its parameters, the decoder (models/minimax.c)
 * runs its forward.
 *
 * A block's parameters are named "model.layers.<l>.<...>" (the transformers v4.5x names, which
 * the checkpoints of every family use; models/weights.c maps other layouts onto them). */
#pragma once
#include "models/generate.h"
#include "models/minimax.h"

/* ---- layout (models/layout.c) ---- */

typedef struct {
    mt_minimax *m;
    int bucket;
    int64_t offset; /* next free element in the bucket */
} mt_layout_cursor;

/* Adds parameter fmt(a, b) of shape (d0) or (d0, d1) at the cursor, aligned to
 * MT_PARAM_ALIGN elements unless align is false (experts 1..E-1 of a stack follow their
 * predecessor with no gap). */
void mt_layout_add(mt_layout_cursor *cur, bool align, int ndim, int64_t d0, int64_t d1,
                   mt_param_init init, const char *fmt, int a, int b);
/* The last parameter added is a buffer: kept in its bucket, never given a gradient. */
void mt_layout_mark_buffer(mt_layout_cursor *cur);
/* Closes the cursor's bucket and opens the next. */
void mt_layout_end_bucket(mt_layout_cursor *cur);

/* Parameters of layer l's mixer; an upper bound of how many there are. */
void mt_block_lightning_layout(mt_layout_cursor *cur, const mt_layer_plan *p, int l);
void mt_block_attention_layout(mt_layout_cursor *cur, const mt_layer_plan *p, int l);
/* MSA (models/block_msa.c): the attention's parameters, then the lightning indexer's
 * self_attn.index_q_proj.weight (Hi*Di, C), index_k_proj.weight (Di, C), index_q_norm.weight
 * and index_k_norm.weight (Di; Gemma, initialised 0). */
void mt_block_msa_layout(mt_layout_cursor *cur, const mt_layer_plan *p, int l);
int mt_block_mixer_params(const mt_layer_plan *p);
/* Parameters of layer l's MoE (router, correction bias, experts); with the gather unit
 * "expert" it ends the layer's bucket and gives each expert a bucket of its own. */
void mt_block_moe_layout(mt_layout_cursor *cur, const mt_layer_plan *p, int l);
int mt_block_moe_params(const mt_layer_plan *p);
/* Buckets the MoE adds after the layer's (its experts, then its shared expert, with the
 * gather unit "expert"; none for a dense MLP). */
int mt_block_moe_buckets(const mt_minimax *m, const mt_layer_plan *p);
/* Parameters of layer l's dense MLP (gate, up, down); it ends the layer's bucket. */
void mt_block_mlp_layout(mt_layout_cursor *cur, const mt_layer_plan *p, int l);

/* ---- forward (models/minimax.c) ---- */

typedef struct {
    mt_tensor *pos, *seg; /* (B,T) I32; seg may be NULL */
    /* NULL: whole sequences; else prefill (t_len 0), a decode step (T = 1) or an extension of
     * one filled row (B = 1, any T: each mixer's chunk op, else its decode step per token) */
    mt_minimax_cache *kv;
    const mt_bucket_hooks *hooks;
    int open_bucket;      /* the bucket entered for the layer; -1 once the MoE has left it */
    mt_tensor *router;    /* out: router logits (N,E) */
    mt_tensor *route_idx; /* out: chosen experts (N,K) I32 */
    /* MSA layers, training: the real tokens' queries (B,T) F32 1/0 (NULL: all) and the KL's
     * divisor (minimax.h, aux_denom); index_kl gets the layer's KL (scalar) when the model's
     * index_kl_coef is not 0 and gradients are on */
    mt_tensor *qmask;
    float index_denom;
    mt_tensor *index_kl;
} mt_block_io;

/* Layer l's parameter of this name (printf-style), bound; dies naming it otherwise. */
mt_tensor *mt_block_param(mt_minimax *m, const char *fmt, ...) MT_PRINTF(2, 3);
/* A tensor struct from the context's host arena (views over parameters). */
mt_tensor *mt_block_host_tensor(mt_ctx *c, const char *what);
/* Entering and leaving a parameter bucket (the hooks, and ctx->tag for the tape). */
void mt_block_enter(mt_ctx *c, const mt_bucket_hooks *hooks, int bucket);
void mt_block_leave(mt_ctx *c, const mt_bucket_hooks *hooks, int bucket);

/* Token mixers: h (B,T,C), the layer's normalised input -> (B,T,C). */
mt_tensor *mt_block_lightning_forward(mt_minimax *m, mt_ctx *c, int l, mt_tensor *h,
                                      mt_block_io *io);
mt_tensor *mt_block_attention_forward(mt_minimax *m, mt_ctx *c, int l, mt_tensor *h,
                                      mt_block_io *io);
/* The softmax attention's pieces, which MSA shares: q (B,T,H,D), k, v (B,T,Hkv,D) projected,
 * QK-normed by the plan and roped (appended to the KV cache with io->kv); and the output
 * projection of o (B,T,H,D) -> (B,T,C). */
void mt_block_attention_qkv(mt_minimax *m, mt_ctx *c, int l, mt_tensor *h, mt_block_io *io,
                            mt_tensor **q, mt_tensor **k, mt_tensor **v);
mt_tensor *mt_block_attention_out(mt_minimax *m, mt_ctx *c, int l, mt_tensor *o);
/* MSA sparse attention (MiniMax-M3's sparse layers); in training io->index_kl gets the layer's
 * indexer KL. */
mt_tensor *mt_block_msa_forward(mt_minimax *m, mt_ctx *c, int l, mt_tensor *h, mt_block_io *io);
/* The MoE: h (B,T,C) -> (B,T,C); io->router and io->route_idx get the router's logits and
 * choices (the aux loss). */
mt_tensor *mt_block_moe_forward(mt_minimax *m, mt_ctx *c, int l, mt_tensor *h, mt_block_io *io);
/* The plan's FFN activation (mt_act). */
mt_act mt_block_act(const mt_layer_plan *p);
/* down (act(h gate^T, h up^T)): the dense MLP's and the shared expert's body, h (..., C). */
mt_tensor *mt_block_ffn(mt_ctx *c, const mt_layer_plan *p, mt_tensor *h, mt_tensor *gate,
                        mt_tensor *up, mt_tensor *down);
/* The dense MLP: h (B,T,C) -> (B,T,C); io->router and io->route_idx stay NULL. */
mt_tensor *mt_block_mlp_forward(mt_minimax *m, mt_ctx *c, int l, mt_tensor *h);

/* ---- auxiliary loss terms (models/aux.c) ---- */

/* m's terms for a forward with gradients on or off (grad), in the loss's order, with the
 * values the forward computed (router: the router aux loss; index_kl: the MSA layers' summed
 * KL; either NULL); returns their number. */
int mt_aux_list(const mt_minimax *m, bool grad, mt_tensor *router, mt_tensor *index_kl,
                mt_minimax_aux *aux);
