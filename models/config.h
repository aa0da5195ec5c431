/* config.h: one internal configuration for every MiniMax family, read from a Hugging Face
 * config.json whose model_type names the family (models/family.h): MiniMax-Text-01 in
 * transformers' `minimax` or the original `minimax_text_01` schema (spec section 1), MiniMax-M2
 * (`minimax_m2`) in transformers' schema or the original remote code's. Values that change
 * numerics are explicit fields, never implied. The reading rules (defaults per schema, which
 * keys are accepted, what is rejected) are in docs/checkpoints.md and docs/models.md. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "models/family.h"

#define MT_MAX_LAYERS 256

typedef enum { MT_LAYER_LINEAR = 0, MT_LAYER_FULL = 1 } mt_layer_type;

/* Checkpoint tensor naming: transformers v4.5x (per-expert w1/w2/w3, block_sparse_moe.gate),
 * transformers v5 (fused mlp.experts.gate_up_proj/down_proj, mlp.gate), original release. */
typedef enum { MT_NAMING_HF_V4, MT_NAMING_HF_V5, MT_NAMING_ORIGINAL } mt_naming;

/* What follows the decoder's final norm (docs/models.md, "Heads"): the lm_head of a causal LM,
 * or one of transformers' generic heads, chosen by config.json's architectures (the family's
 * causal-LM name with ForCausalLM replaced by ForSequenceClassification, ForTokenClassification
 * or ForQuestionAnswering) or set in code (mt_minimax_config_set_head). The head replaces the
 * lm_head, which such a model does not have:
 *   sequence classification: score.weight (num_labels, C), no bias, on the final-norm output at
 *       the rightmost token that is not pad_token_id;
 *   token classification:    score.weight (num_labels, C) and score.bias (num_labels), every token;
 *   question answering:      qa_outputs.weight (2, C) and qa_outputs.bias (2): start | end. */
typedef enum {
    MT_HEAD_CAUSAL_LM = 0,
    MT_HEAD_SEQUENCE_CLASSIFICATION,
    MT_HEAD_TOKEN_CLASSIFICATION,
    MT_HEAD_QUESTION_ANSWERING
} mt_head_kind;
/* config.json's problem_type (sequence classification): null (inferred per batch as transformers
 * does: num_labels 1 regression, integer labels single-label, float labels multi-label), or
 * "regression" (MSE), "single_label_classification" (cross-entropy),
 * "multi_label_classification" (BCE with logits). */
typedef enum {
    MT_PROBLEM_AUTO = 0,
    MT_PROBLEM_REGRESSION,
    MT_PROBLEM_SINGLE_LABEL,
    MT_PROBLEM_MULTI_LABEL
} mt_problem_type;

typedef struct mt_minimax_config {
    const mt_family *family; /* from model_type; NULL (a config built in code): Text-01 */
    char model_type[32];     /* "minimax", "minimax_text_01", "minimax_m1", "minimax_m2" as read */
    bool original_schema;    /* Text-01 read from the original schema: saved back in it */
    int vocab_size;          /* V */
    int hidden_size;         /* C */
    int intermediate_size;   /* F: expert FFN width */
    int num_hidden_layers;   /* L: layers of this model (after mt_minimax_config_keep_layers) */
    int num_hidden_layers_source; /* layers in the config file: checkpoint tensors of layers
                                     in [L, source) are skipped when loading, not errors */
    int num_attention_heads;      /* H, both mixer types */
    int num_key_value_heads;      /* softmax layers only */
    int head_dim;                 /* D; H*D need not equal C */
    int num_local_experts;        /* E */
    int num_experts_per_tok;      /* K */
    int block_size;               /* lightning attention block */
    int rotary_dim; /* partial RoPE width (original: rotary_dim; HF: head_dim * factor) */
    int max_position_embeddings; /* not used by the math (RoPE is computed on the fly) */
    float rms_norm_eps;
    float rope_theta;
    float initializer_range;
    float router_aux_loss_coef;
    bool output_router_logits; /* aux loss on */
    float full_attn_alpha, full_attn_beta;
    float linear_attn_alpha, linear_attn_beta;
    float mlp_alpha, mlp_beta;
    mt_layer_type layer_types[MT_MAX_LAYERS]; /* the token mixer of each layer */
    /* Decay layer factor 1 - l/(L-1) + 1e-5 (original release, false) or
     * 1 - l/(L-1+1e-5) + 1e-5 (transformers releases read, true). Spec 4.2. Chosen by the
     * schema (original: false, transformers: true) unless the config has the project key
     * "lightning_slope_denominator": "original" | "transformers". */
    bool slope_hf_denominator;
    bool tie_word_embeddings; /* always false (tied configs are rejected) */
    /* sliding_window: the softmax layers' query t attends to keys t - W < s <= t only
     * (transformers' sliding_window_overlay); 0 when null. Text-01 only (transformers' M2 and
     * M3 models build the full causal mask whatever the key says: refused there). */
    int sliding_window;
    /* router_jitter_noise: in training (mt_minimax_batch.jitter), the MoE block's input is
     * multiplied by U(1 - j, 1 + j) per element before the router and the experts (transformers'
     * SparseMoeBlock); 0: none. Text-01 and M2 (transformers' M3 ignores it: refused there). */
    float router_jitter_noise;
    int bos_token_id, eos_token_id, pad_token_id; /* -1 when null (eos: first of a list) */
    /* MiniMax-M2: the released multi-token-prediction modules (num_mtp_modules,
     * mtp_transformer_layers): read for the log, never built; their checkpoint tensors are
     * carried into exports unchanged (models/weights.c). */
    int num_mtp_modules, mtp_transformer_layers;
    /* quantization_config of an FP8 release ("fp8", e4m3, block scales weight_scale_inv of
     * fp8_block rows x columns): the weights are dequantised to fp32 on load; exports are
     * written unquantised and without the key. Other schemes are refused by name. */
    bool fp8;
    int fp8_block[2];
    /* MiniMax-M3 (models/family_m3.c): the MSA indexer (transformers' index_n_heads,
     * index_head_dim, index_block_size, index_topk_blocks, index_local_blocks; the original
     * sparse_attention_config's sparse_num_index_heads, sparse_index_dim, sparse_block_size,
     * sparse_topk_blocks, sparse_local_block), read on every M3 config, used by MT_MIXER_MSA
     * layers only */
    int msa_index_heads, msa_index_dim, msa_block, msa_topk, msa_local_blocks;
    /* the dense MLP layers' width, the shared expert's width and count (one: n_shared_experts
     * is checked) */
    int dense_intermediate_size, shared_intermediate_size, n_shared_experts;
    /* per layer: MSA (transformers' layer_types "minimax_m3_sparse"; sparse_attention_freq 1)
     * or dense softmax attention; MoE (mlp_layer_types "sparse"; moe_layer_freq 1) or the
     * dense MLP */
    bool layer_msa[MT_MAX_LAYERS], layer_moe[MT_MAX_LAYERS];
    /* the clamp-SwiGLU (hidden_act "swigluoai"): swiglu_alpha, swiglu_limit, swiglu_beta */
    bool act_swigluoai;
    float swiglu_alpha, swiglu_limit, swiglu_beta;
    float routed_scaling_factor; /* the routed experts' weights times this (M3: 2.0) */
    /* VL checkpoints (model_type "minimax_m3_vl"): the text model is text_config, its weights
     * are under "language_model."; the file as read, so that an export writes its other keys
     * back verbatim (number formats included: transformers' strict configs tell 0.0 from 0)
     * around the model's text_config; "" for a text-only config */
    char vl_config[16384];
    /* The head (above): its kind, num_labels (2 for QA's start | end), problem_type, and
     * config.json's id2label as compact JSON ("" : LABEL_0 ... written on export) */
    mt_head_kind head;
    int num_labels;
    mt_problem_type problem_type;
    char id2label[4096];
} mt_minimax_config;

/* dir/config.json can be read; else false with "<dir>/config.json: cannot read the model's
 * config (--model DIR)" in err (the generation tools' first check of --model). */
bool mt_minimax_config_readable(const char *dir, char *err, size_t n);
/* Reads config.json (a file, or a directory holding config.json) in any family's schemas; dies
 * with a message naming the file and the key when the file is malformed, model_type or the
 * architecture is no family's, or values are inconsistent or not supported. */
void mt_minimax_config_load(const char *path, mt_minimax_config *cfg);
/* Same, but returns false with the message in err instead of dying. */
bool mt_minimax_config_parse(const char *path, mt_minimax_config *cfg, char *err, size_t err_len);
/* Keeps only the first n layers (1 <= n <= L): the reduced models that validate training on
 * few GPUs. The slope layer factor then uses the new L, as transformers does for a model built
 * with num_hidden_layers = n. */
void mt_minimax_config_keep_layers(mt_minimax_config *cfg, int n);
/* Writes config.json atomically in the family's schema (models/family.h, save): Text-01 in the
 * transformers `minimax` schema for HF naming (v4 and v5), the original `minimax_text_01`
 * schema for original naming; M2 in transformers' schema with the remote code's keys beside
 * it. Never a quantization_config: the weights are written unquantised. */
void mt_minimax_config_save_json(const mt_minimax_config *cfg, const char *path, mt_naming naming);
const char *mt_naming_name(mt_naming naming);

/* models/config_head.c: the head's names and settings. */
/* "causal_lm", "sequence_classification", "token_classification", "question_answering" */
const char *mt_head_name(mt_head_kind head);
/* The kind named so (the names above), false for none. */
bool mt_head_parse(const char *name, mt_head_kind *head);
/* "regression", "single_label_classification", "multi_label_classification", or NULL (auto). */
const char *mt_problem_type_name(mt_problem_type p);
/* Makes cfg a model with this head (a causal-LM config turned into a head model's, or back):
 * num_labels (>= 1; QA: 2) and problem_type; id2label cleared when the count changes. */
void mt_minimax_config_set_head(mt_minimax_config *cfg, mt_head_kind head, int num_labels,
                                mt_problem_type problem_type);
