/* family.h: model families and the per-layer plan the decoder is assembled from
 * (docs/models.md).
 *
 * A family (MiniMax-Text-01, MiniMax-M2, ...) is data: the config schema it reads and writes,
 * the checkpoint tensors it knows besides the parameters, and, per decoder layer, a plan that
 * names the blocks the layer is built of (models/block_*.c). The decoder (models/minimax.c),
 * the layout (models/layout.c), the loader and the writer (models/weights.c), the trainer and
 * the tools only read the plan; no code outside the family files asks which family a model
 * is. The family comes from config.json's model_type (models/config.c). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cJSON;
struct mt_minimax_config;
struct mt_cfg_reader;

/* Token mixer of a layer (models/block_lightning.c, models/block_attention.c,
 * models/block_msa.c): lightning attention; softmax GQA; MiniMax-M3's MSA: softmax GQA with the
 * per-head Gemma QK norm plus the lightning indexer and its block selection. */
typedef enum { MT_MIXER_LIGHTNING = 0, MT_MIXER_SOFTMAX = 1, MT_MIXER_MSA = 2 } mt_mixer_kind;
/* QK normalisation of a softmax layer: none; one RMSNorm over the whole q projection (H*D) and
 * one over the whole k projection (Hkv*D), before the head split (MiniMax-M2); one RMSNorm of
 * width D shared by every head (MiniMax-M3). */
typedef enum { MT_QK_NORM_NONE = 0, MT_QK_NORM_WHOLE, MT_QK_NORM_HEAD } mt_qk_norm_kind;
/* Router of an MoE layer: softmax over the experts, top-k renormalised (Text-01); sigmoid
 * scores, the top-k of scores + e_score_correction_bias chosen, the unbiased scores of the
 * chosen renormalised and scaled (M2). */
typedef enum { MT_ROUTER_SOFTMAX = 0, MT_ROUTER_SIGMOID } mt_router_kind;
/* MLP of a layer: the routed experts (models/block_moe.c), or one dense SwiGLU MLP
 * (models/block_mlp.c: mlp.gate_proj, mlp.up_proj (F, C), mlp.down_proj (C, F); MiniMax-M3's
 * first layers). */
typedef enum { MT_MLP_MOE = 0, MT_MLP_DENSE } mt_mlp_kind;
/* The gated FFN activation of the layer's dense MLP, routed and shared experts: y = silu(g) u;
 * or the clamped "swigluoai" of MiniMax-M3 (spec 7): g' = min(g, limit), u' = clamp(u, -limit,
 * limit), y = g' sigmoid(alpha g') (u' + beta). */
typedef enum { MT_ACT_SILU = 0, MT_ACT_SWIGLUOAI } mt_act_kind;
/* RMSNorm weights: w * x_hat, or Gemma's (1 + w) * x_hat (weights stored as w, initialised 0). */
typedef enum { MT_NORM_RMS = 0, MT_NORM_GEMMA } mt_norm_kind;
/* Residuals: DeepNorm on the normalised input (y = alpha * norm(x) + beta * f(norm(x)),
 * Text-01), or the plain pre-norm residual y = x + f(norm(x)). */
typedef enum { MT_RESIDUAL_DEEPNORM = 0, MT_RESIDUAL_PLAIN } mt_residual_kind;

/* One decoder layer: norm -> mixer -> residual -> norm -> MLP (MoE or dense) -> residual. */
typedef struct {
    mt_mixer_kind mixer;
    mt_qk_norm_kind qk_norm;
    mt_norm_kind norm;
    mt_residual_kind residual;
    float mix_alpha, mix_beta; /* DeepNorm factors of the mixer's residual */
    float mlp_alpha, mlp_beta; /* and of the MLP's */
    mt_mlp_kind mlp;
    /* MoE only (a dense MLP has n_experts = top_k = 0): */
    mt_router_kind router;
    bool router_bias;   /* the e_score_correction_bias buffer (E): chooses, never weights */
    float routed_scale; /* routed_scaling_factor: the chosen experts' weights times this */
    int n_experts;      /* E */
    int top_k;          /* K */
    int64_t expert_ffn; /* F: each expert's SwiGLU width, or the dense MLP's */
    int64_t shared_ffn; /* the shared expert's width (0: none): it runs on every token with
                           weight 1, not scaled by routed_scale, added to the routed output */
    mt_act_kind act;    /* of the dense MLP, the experts and the shared expert */
    float act_alpha, act_limit, act_beta; /* swigluoai only */
    int64_t window; /* softmax mixer: the sliding window (positions; 0: none) */
    float jitter;   /* MoE: router_jitter_noise in training (0: none; models/minimax.c) */
} mt_layer_plan;

/* What a checkpoint tensor that no parameter uses is to a family. */
typedef enum {
    MT_EXTRA_UNEXPECTED = 0, /* an error naming it */
    MT_EXTRA_DERIVED,        /* a buffer derived from the config: checked, never loaded (Text-01's
                                lightning decay tables, weights.c); *what names it */
    MT_EXTRA_CARRIED,        /* not part of the trained model, copied unchanged into exports
                                (M2's multi-token-prediction modules) */
} mt_extra_kind;

typedef struct mt_family {
    const char *id;   /* "text01", "m2": in messages and minimax-info */
    const char *name; /* "MiniMax-Text-01" */
    /* Whether config.json's model_type (and first architecture, may be "") is this family's;
     * *original: the original release's schema (saved back in it by default). */
    bool (*matches)(const char *model_type, bool *original);
    /* The accepted architectures for the message when they do not match. */
    bool (*arch_ok)(const char *arch, bool original);
    const char *arch_expected;
    /* The object holding the text model's keys: root itself, or (a VL config) its text_config,
     * whose remaining keys the family keeps for its save; NULL: root. */
    bool (*text_root)(struct mt_cfg_reader *r, const struct cJSON *root, const struct cJSON **text,
                      struct mt_minimax_config *cfg);
    /* Reads the schema's keys into cfg (config.c's reader helpers); false with the message. */
    bool (*parse)(struct mt_cfg_reader *r, const struct cJSON *root, struct mt_minimax_config *cfg);
    /* After the keys every family shares are validated (config.c): the family's own checks
     * (keys of another schema that would silently differ, combinations not implemented), or
     * NULL. */
    bool (*check)(struct mt_cfg_reader *r, const struct cJSON *root, struct mt_minimax_config *cfg);
    /* Writes config.json's keys (original: the original schema), the shared ones with
     * mt_cfg_save_common (models/config_internal.h). */
    void (*save)(const struct mt_minimax_config *cfg, struct cJSON *o, bool original);
    /* Layer l's plan. */
    void (*plan)(const struct mt_minimax_config *cfg, int l, mt_layer_plan *p);
    /* A checkpoint tensor no parameter uses; *layer gets its layer (or -1), *what the buffer's
     * kind for MT_EXTRA_DERIVED. Tensors of layers dropped by the first-N-layers override are
     * skipped before this is asked. */
    mt_extra_kind (*extra)(const struct mt_minimax_config *cfg, const char *name, int *layer,
                           const char **what);
    /* transformers v5's name of layer %d's e_score_correction_bias (NULL: no such buffer) */
    const char *v5_router_bias;
    /* The naming an export of this config is written in, given the one it was loaded in (or
     * transformers v4 for a random initialisation); NULL: that one. MiniMax-M3's text model
     * alone loads in transformers only under its module names (its name conversion is the VL
     * layout's), so its text-only exports are written in them. */
    int (*export_naming)(const struct mt_minimax_config *cfg, int loaded);
    /* The reply format its chat replies are split by (models/reply.h: "none", "minimax_m2",
     * ...): the default of minimax-serve's --reasoning-parser. */
    const char *reply_format;
} mt_family;

extern const mt_family mt_family_text01;
extern const mt_family mt_family_m2;
extern const mt_family mt_family_m3;

/* The config's family (a config built in code without one is Text-01). */
const mt_family *mt_config_family(const struct mt_minimax_config *cfg);
/* Layer l's plan, from the config's family. */
void mt_config_layer_plan(const struct mt_minimax_config *cfg, int l, mt_layer_plan *p);
