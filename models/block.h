/* block.h: the blocks a decoder layer is built of (models/family.h, mt_layer_plan), one file
 * each: models/block_lightning.c, models/block_attention.c, models/block_msa.c (token mixers),
 * models/block_moe.c (the MoE with its router), models/block_mlp.c (the dense MLP). Internal to
 * models/: the layout (models/layout.c) asks each block for its parameters, the decoder
 * (models/minimax.c) runs its forward.
 *
 * Each token mixer kind is one table (mt_mixer, defined in its block file, looked up by
 * mt_mixer_of): its parameters, its forward, its cached step, its caches, what it needs of a
 * backend. The decoder, the layout, generation and the writer call through it and never ask
 * which kind a layer is.
 *
 * A block's parameters are named "model.layers.<l>.<...>" (the transformers v4.5x names, which
 * the checkpoints of every family use; models/weights.c maps other layouts onto them). Each name
 * is written once, in the block's layout, which binds the parameter to a field of the block's
 * struct (pointers into m->params, reached from m->layers[l]); the forwards read the fields. */
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
 * predecessor with no gap); returns its tensor (its memory comes with mt_minimax_bind_bucket). */
mt_tensor *mt_layout_add(mt_layout_cursor *cur, bool align, int ndim, int64_t d0, int64_t d1,
                         mt_param_init init, const char *fmt, int a, int b);
/* The last parameter added is a buffer: kept in its bucket, never given a gradient. */
void mt_layout_mark_buffer(mt_layout_cursor *cur);
/* Closes the cursor's bucket and opens the next. */
void mt_layout_end_bucket(mt_layout_cursor *cur);
/* models/head.c: a head model's head parameters (score / qa_outputs) after the final norm. */
void mt_head_layout(mt_layout_cursor *cur);
/* The head on the final-norm output h (B,T,C) of ids (B,T), in the final bucket: out->logits
 * (and end_logits, pooled) as minimax.h says. */
void mt_head_forward(mt_minimax *m, mt_ctx *c, mt_tensor *h, mt_tensor *ids, mt_minimax_out *out);
/* The head's loss of batch's targets on out's logits (transformers' losses), or NULL without
 * targets. */
mt_tensor *mt_head_loss(mt_minimax *m, mt_ctx *c, const mt_minimax_batch *batch,
                        const mt_minimax_out *out);
/* RMSNorm weights start at 1, Gemma's (1 + w) at w = 0. */
mt_param_init mt_layout_norm_init(mt_norm_kind k);

/* ---- parameters, bound by the layout ---- */

/* The softmax attention's (models/block_attention.c), which an MSA layer holds too. */
typedef struct {
    mt_tensor *q_proj;          /* (H*D, C) */
    mt_tensor *k_proj, *v_proj; /* (Hkv*D, C) */
    mt_tensor *o_proj;          /* (C, H*D) */
    mt_tensor *q_norm, *k_norm; /* QK norm: (H*D), (Hkv*D) whole; (D) per head; NULL: none */
} mt_attn_params;

/* A dense SwiGLU MLP's (models/block_mlp.c), or the MoE's shared expert. */
typedef struct {
    mt_tensor *gate_proj, *up_proj; /* (F, C) */
    mt_tensor *down_proj;           /* (C, F) */
} mt_mlp_params;

/* The MoE's (models/block_moe.c). */
typedef struct {
    mt_tensor *gate;            /* the router (E, C) */
    mt_tensor *bias;            /* e_score_correction_bias (E), a buffer; NULL: none */
    mt_tensor **w1, **w3, **w2; /* (E): each expert's (F, C), (F, C), (C, F) */
    mt_mlp_params shared;       /* the shared expert's; NULL fields: none */
} mt_moe_params;

struct mt_mixer;

/* Layer l's parameters: m->layers[l]. */
typedef struct mt_layer_params {
    const struct mt_mixer *mixer;      /* the plan's mixer kind (mt_mixer_of) */
    void *mix;                         /* the mixer's parameters, its own struct (its layout's) */
    mt_tensor *input_norm, *post_norm; /* (C) */
    mt_mlp_params mlp;                 /* a dense MLP layer's */
    mt_moe_params moe;                 /* an MoE layer's */
} mt_layer_params;

/* Parameters of layer l's MoE (router, correction bias, experts) into w; with the gather unit
 * "expert" it ends the layer's bucket and gives each expert a bucket of its own. */
void mt_block_moe_layout(mt_layout_cursor *cur, const mt_layer_plan *p, int l, mt_moe_params *w);
/* An upper bound of the parameters of layer l's MLP (dense or MoE). */
int mt_block_moe_params(const mt_layer_plan *p);
/* Buckets the MoE adds after the layer's (its experts, then its shared expert, with the
 * gather unit "expert"; none for a dense MLP). */
int mt_block_moe_buckets(const mt_minimax *m, const mt_layer_plan *p);
/* Parameters of layer l's dense MLP (gate, up, down) into w; it ends the layer's bucket. */
void mt_block_mlp_layout(mt_layout_cursor *cur, const mt_layer_plan *p, int l, mt_mlp_params *w);
/* The softmax attention's parameters of layer l into w (MSA's layout adds its own after). */
void mt_block_attention_add(mt_layout_cursor *cur, const mt_layer_plan *p, int l,
                            mt_attn_params *w);

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
    bool jitter; /* training with router jitter (mt_minimax_batch.jitter) */
    uint64_t jitter_seed;
} mt_block_io;

/* A tensor struct from the context's host arena (views over parameters). */
mt_tensor *mt_block_host_tensor(mt_ctx *c, const char *what);
/* Entering and leaving a parameter bucket (the hooks, and ctx->tag for the tape); entering
 * checks that the bucket's parameters are bound. */
void mt_block_enter(const mt_minimax *m, mt_ctx *c, const mt_bucket_hooks *hooks, int bucket);
void mt_block_leave(mt_ctx *c, const mt_bucket_hooks *hooks, int bucket);

/* The softmax attention's pieces, which MSA shares: q (B,T,H,D), k, v (B,T,Hkv,D) of layer l
 * projected by w, QK-normed by the plan and roped (appended to the KV cache with io->kv); and
 * the output projection of o (B,T,H,D) -> (B,T,C). */
void mt_block_attention_qkv(mt_minimax *m, mt_ctx *c, int l, const mt_attn_params *w, mt_tensor *h,
                            mt_block_io *io, mt_tensor **q, mt_tensor **k, mt_tensor **v);
mt_tensor *mt_block_attention_out(mt_ctx *c, const mt_attn_params *w, mt_tensor *o);
/* The MoE: h (B,T,C) -> (B,T,C); io->router and io->route_idx get the router's logits and
 * choices (the aux loss). */
mt_tensor *mt_block_moe_forward(mt_minimax *m, mt_ctx *c, int l, mt_tensor *h, mt_block_io *io);
/* h (B,T,C) times the router jitter noise of layer l: element i of h (row-major) times
 * (float)((1 - j) + 2 j u_i), j = the plan's jitter, u_i = (x >> 40) 2^-24 with
 * x = splitmix64(splitmix64(splitmix64(seed) ^ l) ^ i) (mt_gen_uniform's mixer): transformers'
 * uniform_(1 - j, 1 + j) draw, as a function of (seed, layer, element). The noise is a constant:
 * the gradient flows through the product into h only. */
mt_tensor *mt_block_moe_jitter(mt_ctx *c, float jitter, int l, uint64_t seed, mt_tensor *h);
/* The plan's FFN activation (mt_act). */
mt_act mt_block_act(const mt_layer_plan *p);
/* down (act(h gate^T, h up^T)): the dense MLP's and the shared expert's body, h (..., C). */
mt_tensor *mt_block_ffn(mt_ctx *c, const mt_layer_plan *p, mt_tensor *h, const mt_mlp_params *w);
/* The dense MLP: h (B,T,C) -> (B,T,C); io->router and io->route_idx stay NULL. */
mt_tensor *mt_block_mlp_forward(mt_minimax *m, mt_ctx *c, int l, mt_tensor *h);

/* ---- token mixers ---- */

/* The caches a mixer keeps for generation (models/generate.h, mt_minimax_cache): the roped
 * keys and the values (k, v), the indexer's keys (ik), a recurrent state (state). */
enum { MT_CACHE_KV = 1, MT_CACHE_INDEX_KEYS = 2, MT_CACHE_STATE = 4 };

/* Layer l's mixer: h (B,T,C), the layer's normalised input -> (B,T,C). */
typedef mt_tensor *mt_mixer_fn(mt_minimax *m, mt_ctx *c, int l, mt_tensor *h, mt_block_io *io);
/* A tensor written beside the parameters (mt_mixer.export_buffers). */
typedef void mt_buffer_out(void *user, const char *name, int ndim, const int64_t *shape,
                           const float *data);

typedef struct mt_mixer {
    const char *name; /* in messages: "lightning", "softmax", "MSA" */
    /* An upper bound of layer l's parameter count; its parameters added at the cursor and
     * bound into a struct of the block's own (mt_layer_params.mix, freed with the model). */
    int (*n_params)(const mt_layer_plan *p);
    void *(*layout)(mt_layout_cursor *cur, const mt_layer_plan *p, int l);
    /* Whole sequences: training, or a prompt filling empty cache rows (io->kv, t_len 0). */
    mt_mixer_fn *forward;
    /* Over filled cache rows (mt_minimax_forward_cached): a decode step (T = 1, any B) or an
     * extension of one row (B = 1, T > 1: the backend's chunk op, else a step per token). */
    mt_mixer_fn *cached;
    unsigned caches; /* MT_CACHE_* */
    /* Whether be has the cached step (NULL: every backend has). */
    bool (*can_decode)(const mt_backend *be);
    /* It adds an indexer KL in training, over the real tokens' queries (io->qmask). */
    bool index_kl;
    /* Buffers derived from the config that an export in transformers' names carries (NULL:
     * none), written through out. */
    void (*export_buffers)(const mt_minimax *m, int l, mt_buffer_out *out, void *user);
} mt_mixer;

extern const mt_mixer mt_mixer_lightning; /* models/block_lightning.c */
extern const mt_mixer mt_mixer_softmax;   /* models/block_attention.c */
extern const mt_mixer mt_mixer_msa;       /* models/block_msa.c */
/* The table of a mixer kind (models/mixer.c). */
const mt_mixer *mt_mixer_of(mt_mixer_kind kind);

/* ---- auxiliary loss terms (models/aux.c) ---- */

/* m's terms for a forward with gradients on or off (grad), in the loss's order, with the
 * values the forward computed (router: the router aux loss; index_kl: the MSA layers' summed
 * KL; either NULL); returns their number. */
int mt_aux_list(const mt_minimax *m, bool grad, mt_tensor *router, mt_tensor *index_kl,
                mt_minimax_aux *aux);
