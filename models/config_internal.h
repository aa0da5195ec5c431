/* config_internal.h: the config.json reader's helpers (models/config.c), shared by the family
 * files (models/family_*.c) that read their schema's keys with them. Each returns false with a
 * message naming the file and the key; an absent key or JSON null takes the default. */
#pragma once
#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/check.h"
#include "models/config.h"

typedef struct mt_cfg_reader {
    const char *path;
    char *err;
    size_t err_len;
    const char *text; /* the file as read (len bytes), for a family that keeps keys verbatim */
    size_t len;
} mt_cfg_reader;

#define TRY(x)                                                                                     \
    do {                                                                                           \
        if (!(x)) return false;                                                                    \
    } while (0)

bool mt_cfg_fail(mt_cfg_reader *r, const char *fmt, ...) MT_PRINTF(2, 3);
/* NULL when the key is absent or JSON null: both mean "use the default" in every schema. */
const cJSON *mt_cfg_get(const cJSON *root, const char *key);
bool mt_cfg_int_value(mt_cfg_reader *r, const cJSON *v, const char *key, int *out);
bool mt_cfg_int(mt_cfg_reader *r, const cJSON *root, const char *key, int def, int *out);
bool mt_cfg_double(mt_cfg_reader *r, const cJSON *root, const char *key, double def, double *out);
bool mt_cfg_float(mt_cfg_reader *r, const cJSON *root, const char *key, double def, float *out);
bool mt_cfg_bool(mt_cfg_reader *r, const cJSON *root, const char *key, bool def, bool *out);
/* Token ids: absent -> the default; null -> -1 (None); a list -> its first entry. */
bool mt_cfg_token(mt_cfg_reader *r, const cJSON *root, const char *key, int def, int *out);
/* A string key that must be one of the accepted values (absent: fine). */
bool mt_cfg_string_is(mt_cfg_reader *r, const cJSON *root, const char *key, const char *want,
                      const char *why);
/* head_dim: absent or null means C / H (transformers' getattr(...) or C // H). */
bool mt_cfg_head_dim(mt_cfg_reader *r, const cJSON *root, mt_minimax_config *cfg);
/* The RoPE keys of transformers' schema: rope_parameters {rope_type "default", rope_theta,
 * partial_rotary_factor} or top-level rope_theta / partial_rotary_factor (v4.5x), default
 * theta; sets rope_theta and rotary_dim = head_dim * factor (head_dim read before). */
bool mt_cfg_rope_hf(mt_cfg_reader *r, const cJSON *root, double theta, mt_minimax_config *cfg);
/* What MiniMax-M2 and M3 read alike after mt_cfg_read_common: head_dim (128), the bos, eos and
 * pad tokens (200034, 200020, none), num_hidden_layers in range with every layer softmax-type,
 * the RoPE of transformers' schema (theta 5e6). */
bool mt_cfg_read_m2_m3(mt_cfg_reader *r, const cJSON *root, mt_minimax_config *cfg);

/* The keys every family shares, with a family's class defaults. */
typedef struct {
    int vocab_size, hidden_size, intermediate_size, num_hidden_layers, num_attention_heads;
    int num_key_value_heads, max_position_embeddings, num_experts_per_tok, num_local_experts;
    double rms_norm_eps;
} mt_cfg_defaults;
bool mt_cfg_read_common(mt_cfg_reader *r, const cJSON *root, const mt_cfg_defaults *d,
                        mt_minimax_config *cfg);

/* Writing: the shortest decimal that reads back as the same float, with a ".0" when integral;
 * a token id (null when < 0). */
cJSON *mt_cfg_json_float(float v);
void mt_cfg_json_token(cJSON *o, const char *key, int id);
/* architectures, model_type and the keys every family shares, in transformers' order. */
void mt_cfg_save_common(const mt_minimax_config *cfg, cJSON *o, const char *arch,
                        const char *model_type);

/* models/config_head.c: an architecture with a head's suffix (ForSequenceClassification, ...):
 * its causal-LM name into base (the family checks that) and the kind; false (base = arch) for
 * any other. The head's keys (num_labels, id2label, problem_type) read after the family's; and
 * written into an export's config (architectures renamed, id2label, label2id, problem_type). */
bool mt_cfg_head_arch(const char *arch, char *base, size_t n, mt_head_kind *head);
bool mt_cfg_head_read(mt_cfg_reader *r, const cJSON *root, mt_minimax_config *cfg);
void mt_cfg_head_save(const mt_minimax_config *cfg, cJSON *o);
