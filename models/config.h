/* config.h: one internal configuration for MiniMax-Text-01, read from a Hugging Face
 * config.json in either schema: transformers' `minimax` or the original `minimax_text_01`
 * (spec section 1). Values that change numerics are explicit fields, never implied. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#define MT_MAX_LAYERS 256

typedef enum { MT_LAYER_LINEAR = 0, MT_LAYER_FULL = 1 } mt_layer_type;

/* Checkpoint tensor naming: transformers v4.5x (per-expert w1/w2/w3, block_sparse_moe.gate),
 * transformers v5 (fused mlp.experts.gate_up_proj/down_proj, mlp.gate), original release. */
typedef enum { MT_NAMING_HF_V4, MT_NAMING_HF_V5, MT_NAMING_ORIGINAL } mt_naming;

typedef struct mt_minimax_config {
    char model_type[32]; /* "minimax" or "minimax_text_01" as read */
    int vocab_size;
    int hidden_size;       /* C */
    int intermediate_size; /* F: expert FFN width */
    int num_hidden_layers; /* L */
    int num_attention_heads;
    int num_key_value_heads;
    int head_dim; /* D; H*D need not equal C */
    int num_local_experts;
    int num_experts_per_tok;
    int block_size; /* lightning attention block */
    int rotary_dim; /* partial RoPE width (original: rotary_dim; HF: head_dim * factor) */
    float rms_norm_eps;
    float rope_theta;
    float initializer_range;
    float router_aux_loss_coef;
    bool output_router_logits; /* aux loss on */
    float full_attn_alpha, full_attn_beta;
    float linear_attn_alpha, linear_attn_beta;
    float mlp_alpha, mlp_beta;
    mt_layer_type layer_types[MT_MAX_LAYERS];
    /* Decay layer factor 1 - l/(L-1) + 1e-5 (original release, false) or
     * 1 - l/(L-1+1e-5) + 1e-5 (transformers releases read, true). Spec 4.2. */
    bool slope_hf_denominator;
    bool tie_word_embeddings;
    int bos_token_id, eos_token_id, pad_token_id; /* -1 when null */
} mt_minimax_config;
