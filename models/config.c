/* config.c: config.json in either schema -> mt_minimax_config, and back (spec section 1).
 *
 * transformers `minimax` (model_type "minimax"): layer_types, *_alpha_factor, *_beta_factor,
 * rope_parameters{rope_theta, partial_rotary_factor} or top-level rope_theta +
 * partial_rotary_factor, block_size, num_experts alias of num_local_experts. Defaults are
 * transformers' MiniMaxConfig defaults.
 * original (model_type "minimax_text_01", also "minimax_m1"): attn_type_list (required),
 * layernorm_*_alpha/beta, rotary_dim, postnorm (must be true), shared_intermediate_size (must be
 * 0). Defaults are the remote code's (MiniMaxText01Config + the getattr defaults of the
 * modeling file).
 * A key of the other schema is rejected: the reference code of this schema would ignore it and
 * silently build a different model. Unknown keys (use_cache, dtype, auto_map...) are ignored. */
#include "models/config.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "autograd/check.h"
#include "data/data_io.h"
#include "models/safetensors.h"

typedef struct {
    const char *path;
    char *err;
    size_t err_len;
} cfg_reader;

static bool cfg_fail(cfg_reader *r, const char *fmt, ...) MT_PRINTF(2, 3);
static bool cfg_fail(cfg_reader *r, const char *fmt, ...) {
    int n = snprintf(r->err, r->err_len, "%s: ", r->path);
    if (n < 0 || (size_t)n >= r->err_len) return false;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err + n, r->err_len - (size_t)n, fmt, ap);
    va_end(ap);
    return false;
}

/* NULL when the key is absent or JSON null: both mean "use the default" in either schema. */
static const cJSON *cfg_get(const cJSON *root, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    return (v && !cJSON_IsNull(v)) ? v : NULL;
}

static bool cfg_int_value(cfg_reader *r, const cJSON *v, const char *key, int *out) {
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) ||
        fabs(v->valuedouble) > 2147483647.0)
        return cfg_fail(r, "key \"%s\": expected an integer", key);
    *out = (int)v->valuedouble;
    return true;
}

static bool cfg_int(cfg_reader *r, const cJSON *root, const char *key, int def, int *out) {
    const cJSON *v = cfg_get(root, key);
    if (!v) {
        *out = def;
        return true;
    }
    return cfg_int_value(r, v, key, out);
}

static bool cfg_double(cfg_reader *r, const cJSON *root, const char *key, double def, double *out) {
    const cJSON *v = cfg_get(root, key);
    if (!v) {
        *out = def;
        return true;
    }
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return cfg_fail(r, "key \"%s\": expected a number", key);
    *out = v->valuedouble;
    return true;
}

static bool cfg_float(cfg_reader *r, const cJSON *root, const char *key, double def, float *out) {
    double d = 0;
    if (!cfg_double(r, root, key, def, &d)) return false;
    *out = (float)d;
    return true;
}

static bool cfg_bool(cfg_reader *r, const cJSON *root, const char *key, bool def, bool *out) {
    const cJSON *v = cfg_get(root, key);
    if (!v) {
        *out = def;
        return true;
    }
    if (!cJSON_IsBool(v)) return cfg_fail(r, "key \"%s\": expected true or false", key);
    *out = cJSON_IsTrue(v);
    return true;
}

/* Token ids: absent -> the schema default; null -> -1 (None); a list (transformers allows
 * several eos ids) -> its first entry. */
static bool cfg_token(cfg_reader *r, const cJSON *root, const char *key, int def, int *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (cJSON_IsNull(v)) {
        *out = -1;
        return true;
    }
    if (v && cJSON_IsArray(v)) {
        v = cJSON_GetArrayItem(v, 0);
        if (!v) {
            *out = -1;
            return true;
        }
    }
    if (!v) {
        *out = def;
        return true;
    }
    return cfg_int_value(r, v, key, out);
}

#define TRY(x)                                                                                     \
    do {                                                                                           \
        if (!(x)) return false;                                                                    \
    } while (0)

/* A layer list in either form: layer_types strings (hf) or attn_type_list 0/1 (original). */
static bool cfg_layer_list(cfg_reader *r, const cJSON *v, const char *key, bool hf, int L,
                           mt_layer_type *out) {
    if (!cJSON_IsArray(v)) return cfg_fail(r, "key \"%s\": expected a list", key);
    int n = cJSON_GetArraySize(v);
    if (n != L)
        return cfg_fail(r, "key \"%s\" has %d entries but num_hidden_layers is %d", key, n, L);
    for (int l = 0; l < L; l++) {
        const cJSON *e = cJSON_GetArrayItem(v, l);
        if (hf && cJSON_IsString(e) && strcmp(e->valuestring, "linear_attention") == 0)
            out[l] = MT_LAYER_LINEAR;
        else if (hf && cJSON_IsString(e) && strcmp(e->valuestring, "full_attention") == 0)
            out[l] = MT_LAYER_FULL;
        else if (!hf && cJSON_IsNumber(e) && (e->valuedouble == 0 || e->valuedouble == 1))
            out[l] = e->valuedouble == 1 ? MT_LAYER_FULL : MT_LAYER_LINEAR;
        else
            return cfg_fail(r, "key \"%s\"[%d]: expected %s", key, l,
                            hf ? "\"linear_attention\" or \"full_attention\""
                               : "0 (lightning) or 1 (softmax)");
    }
    return true;
}

static bool cfg_shared_zero(cfg_reader *r, const cJSON *shared) {
    int n = cJSON_IsArray(shared) ? cJSON_GetArraySize(shared) : 1;
    for (int i = 0; i < n; i++) {
        const cJSON *v = cJSON_IsArray(shared) ? cJSON_GetArrayItem(shared, i) : shared;
        if (!cJSON_IsNumber(v) || v->valuedouble != 0)
            return cfg_fail(r, "key \"shared_intermediate_size\": only 0 (no shared expert) is "
                               "supported");
    }
    return true;
}

/* Keys of the other schema: that schema's reference code ignores them, so they are accepted
 * only when they describe the same model as the keys that count (a converted config may carry
 * both); otherwise the file is ambiguous and rejected. */
static bool cfg_check_foreign(cfg_reader *r, const cJSON *root, const mt_minimax_config *cfg) {
    bool orig = cfg->original_schema;
    const char *why = orig ? "the original code ignores it" : "transformers' minimax ignores it";
    struct {
        const char *hf, *orig;
        float v;
    } scal[] = {
        {"full_attn_alpha_factor", "layernorm_full_attention_alpha", cfg->full_attn_alpha},
        {"full_attn_beta_factor", "layernorm_full_attention_beta", cfg->full_attn_beta},
        {"linear_attn_alpha_factor", "layernorm_linear_attention_alpha", cfg->linear_attn_alpha},
        {"linear_attn_beta_factor", "layernorm_linear_attention_beta", cfg->linear_attn_beta},
        {"mlp_alpha_factor", "layernorm_mlp_alpha", cfg->mlp_alpha},
        {"mlp_beta_factor", "layernorm_mlp_beta", cfg->mlp_beta}};
    for (size_t i = 0; i < sizeof(scal) / sizeof(scal[0]); i++) {
        const char *key = orig ? scal[i].hf : scal[i].orig;
        float v = 0;
        TRY(cfg_float(r, root, key, scal[i].v, &v));
        if (v != scal[i].v)
            return cfg_fail(r, "key \"%s\" = %g disagrees with \"%s\" = %g (%s)", key, (double)v,
                            orig ? scal[i].orig : scal[i].hf, (double)scal[i].v, why);
    }
    const char *lkey = orig ? "layer_types" : "attn_type_list";
    const cJSON *lv = cfg_get(root, lkey);
    if (lv) {
        mt_layer_type other[MT_MAX_LAYERS];
        TRY(cfg_layer_list(r, lv, lkey, orig, cfg->num_hidden_layers, other));
        for (int l = 0; l < cfg->num_hidden_layers; l++)
            if (other[l] != cfg->layer_types[l])
                return cfg_fail(r, "key \"%s\"[%d] disagrees with \"%s\" (%s)", lkey, l,
                                orig ? "attn_type_list" : "layer_types", why);
    }
    if (orig) {
        const cJSON *rp = cfg_get(root, "rope_parameters");
        double theta = cfg->rope_theta, partial = (double)cfg->rotary_dim / cfg->head_dim;
        double t = theta, p = partial;
        TRY(cfg_double(r, root, "partial_rotary_factor", partial, &p));
        if (rp && cJSON_IsObject(rp)) {
            TRY(cfg_double(r, rp, "rope_theta", theta, &t));
            TRY(cfg_double(r, rp, "partial_rotary_factor", p, &p));
        }
        if ((float)t != (float)theta || p * cfg->head_dim != cfg->rotary_dim)
            return cfg_fail(r,
                            "key \"rope_parameters\"/\"partial_rotary_factor\" disagrees with "
                            "\"rope_theta\"/\"rotary_dim\" (%s)",
                            why);
        int e = cfg->num_local_experts;
        TRY(cfg_int(r, root, "num_experts", e, &e));
        if (e != cfg->num_local_experts)
            return cfg_fail(r, "key \"num_experts\" disagrees with \"num_local_experts\" (%s)",
                            why);
    } else {
        int rot = cfg->rotary_dim;
        TRY(cfg_int(r, root, "rotary_dim", rot, &rot));
        if (rot != cfg->rotary_dim)
            return cfg_fail(r,
                            "key \"rotary_dim\" = %d disagrees with head_dim * "
                            "partial_rotary_factor = %d (%s)",
                            rot, cfg->rotary_dim, why);
        bool postnorm = true;
        TRY(cfg_bool(r, root, "postnorm", true, &postnorm));
        if (!postnorm)
            return cfg_fail(r, "key \"postnorm\": false is not supported (transformers always "
                               "uses the post-norm residual)");
        const cJSON *shared = cfg_get(root, "shared_intermediate_size");
        if (shared) TRY(cfg_shared_zero(r, shared));
    }
    return true;
}

/* head_dim, both schemas: absent or null means C / H (transformers' getattr(...) or C // H). */
static bool cfg_head_dim(cfg_reader *r, const cJSON *root, mt_minimax_config *cfg) {
    int head_dim = 0;
    TRY(cfg_int(r, root, "head_dim", 0, &head_dim));
    if (head_dim == 0) {
        if (cfg->num_attention_heads <= 0 || cfg->hidden_size % cfg->num_attention_heads != 0)
            return cfg_fail(r,
                            "key \"head_dim\" is missing and hidden_size %d is not divisible by "
                            "num_attention_heads %d",
                            cfg->hidden_size, cfg->num_attention_heads);
        head_dim = cfg->hidden_size / cfg->num_attention_heads;
    }
    cfg->head_dim = head_dim;
    return true;
}

/* Keys both schemas share, with the defaults of both classes. The original code has no
 * block_size key (a module constant of 256); vLLM reads "block_size". */
static bool cfg_read_common(cfg_reader *r, const cJSON *root, mt_minimax_config *cfg) {
    TRY(cfg_int(r, root, "vocab_size", 32000, &cfg->vocab_size));
    TRY(cfg_int(r, root, "hidden_size", 4096, &cfg->hidden_size));
    TRY(cfg_int(r, root, "intermediate_size", 14336, &cfg->intermediate_size));
    TRY(cfg_int(r, root, "num_hidden_layers", 32, &cfg->num_hidden_layers));
    TRY(cfg_int(r, root, "num_attention_heads", 32, &cfg->num_attention_heads));
    /* Absent: 8 (the class default); explicit null: H. Same in both schemas. */
    if (cJSON_GetObjectItemCaseSensitive(root, "num_key_value_heads"))
        TRY(cfg_int(r, root, "num_key_value_heads", cfg->num_attention_heads,
                    &cfg->num_key_value_heads));
    else
        cfg->num_key_value_heads = 8;
    TRY(cfg_int(r, root, "max_position_embeddings", 4096 * 32, &cfg->max_position_embeddings));
    TRY(cfg_float(r, root, "rms_norm_eps", 1e-5, &cfg->rms_norm_eps));
    TRY(cfg_float(r, root, "initializer_range", 0.02, &cfg->initializer_range));
    TRY(cfg_float(r, root, "router_aux_loss_coef", 0.001, &cfg->router_aux_loss_coef));
    TRY(cfg_bool(r, root, "output_router_logits", false, &cfg->output_router_logits));
    TRY(cfg_int(r, root, "block_size", 256, &cfg->block_size));
    TRY(cfg_int(r, root, "num_experts_per_tok", 2, &cfg->num_experts_per_tok));
    TRY(cfg_int(r, root, "num_local_experts", 8, &cfg->num_local_experts));
    return true;
}

/* transformers `minimax` keys. */
static bool cfg_read_hf(cfg_reader *r, const cJSON *root, mt_minimax_config *cfg) {
    TRY(cfg_read_common(r, root, cfg));
    const cJSON *alias = cfg_get(root, "num_experts");
    if (alias) {
        int e = 0;
        TRY(cfg_int_value(r, alias, "num_experts", &e));
        if (cfg_get(root, "num_local_experts") && e != cfg->num_local_experts)
            return cfg_fail(r, "key \"num_experts\" (%d) disagrees with \"num_local_experts\" (%d)",
                            e, cfg->num_local_experts);
        cfg->num_local_experts = e;
    }
    TRY(cfg_float(r, root, "full_attn_alpha_factor", 1, &cfg->full_attn_alpha));
    TRY(cfg_float(r, root, "full_attn_beta_factor", 1, &cfg->full_attn_beta));
    TRY(cfg_float(r, root, "linear_attn_alpha_factor", 1, &cfg->linear_attn_alpha));
    TRY(cfg_float(r, root, "linear_attn_beta_factor", 1, &cfg->linear_attn_beta));
    TRY(cfg_float(r, root, "mlp_alpha_factor", 1, &cfg->mlp_alpha));
    TRY(cfg_float(r, root, "mlp_beta_factor", 1, &cfg->mlp_beta));
    TRY(cfg_token(r, root, "bos_token_id", 1, &cfg->bos_token_id));
    TRY(cfg_token(r, root, "eos_token_id", 2, &cfg->eos_token_id));
    TRY(cfg_token(r, root, "pad_token_id", -1, &cfg->pad_token_id));

    TRY(cfg_head_dim(r, root, cfg));
    int head_dim = cfg->head_dim;

    /* RoPE: rope_parameters (v5) or top-level rope_theta/partial_rotary_factor (v4.5x). */
    double theta = 1e6, partial = 1.0;
    TRY(cfg_double(r, root, "rope_theta", theta, &theta));
    TRY(cfg_double(r, root, "partial_rotary_factor", partial, &partial));
    if (cfg_get(root, "rope_scaling")) return cfg_fail(r, "key \"rope_scaling\": not supported");
    const cJSON *rp = cfg_get(root, "rope_parameters");
    if (rp) {
        if (!cJSON_IsObject(rp)) return cfg_fail(r, "key \"rope_parameters\": expected an object");
        const cJSON *type = cfg_get(rp, "rope_type");
        if (type && (!cJSON_IsString(type) || strcmp(type->valuestring, "default") != 0))
            return cfg_fail(r, "key \"rope_parameters.rope_type\": only \"default\" is supported");
        double t2 = theta, p2 = partial;
        TRY(cfg_double(r, rp, "rope_theta", theta, &t2));
        TRY(cfg_double(r, rp, "partial_rotary_factor", partial, &p2));
        if (cfg_get(root, "rope_theta") && cfg_get(rp, "rope_theta") && t2 != theta)
            return cfg_fail(r, "key \"rope_parameters.rope_theta\" disagrees with \"rope_theta\"");
        theta = t2;
        partial = p2;
    }
    cfg->rope_theta = (float)theta;
    double rot = head_dim * partial;
    if (!(partial > 0 && partial <= 1) || rot != floor(rot))
        return cfg_fail(r,
                        "key \"partial_rotary_factor\": %g times head_dim %d must be a whole "
                        "number in (0, head_dim]",
                        partial, head_dim);
    cfg->rotary_dim = (int)rot;

    /* layer_types; default: transformers' alternating pattern starting with a full layer. */
    int L = cfg->num_hidden_layers;
    if (L < 1 || L > MT_MAX_LAYERS)
        return cfg_fail(r, "key \"num_hidden_layers\": %d is outside [1, %d]", L, MT_MAX_LAYERS);
    const cJSON *lt = cfg_get(root, "layer_types");
    if (!lt) {
        for (int l = 0; l < L; l++)
            cfg->layer_types[l] = ((l + 1) % 2) ? MT_LAYER_FULL : MT_LAYER_LINEAR;
    } else {
        TRY(cfg_layer_list(r, lt, "layer_types", true, L, cfg->layer_types));
    }
    cfg->slope_hf_denominator = true;
    return true;
}

/* original `minimax_text_01` keys. */
static bool cfg_read_original(cfg_reader *r, const cJSON *root, mt_minimax_config *cfg) {
    TRY(cfg_read_common(r, root, cfg));
    TRY(cfg_float(r, root, "layernorm_full_attention_alpha", 1, &cfg->full_attn_alpha));
    TRY(cfg_float(r, root, "layernorm_full_attention_beta", 1, &cfg->full_attn_beta));
    TRY(cfg_float(r, root, "layernorm_linear_attention_alpha", 1, &cfg->linear_attn_alpha));
    TRY(cfg_float(r, root, "layernorm_linear_attention_beta", 1, &cfg->linear_attn_beta));
    TRY(cfg_float(r, root, "layernorm_mlp_alpha", 1, &cfg->mlp_alpha));
    TRY(cfg_float(r, root, "layernorm_mlp_beta", 1, &cfg->mlp_beta));
    TRY(cfg_token(r, root, "bos_token_id", -1, &cfg->bos_token_id));
    TRY(cfg_token(r, root, "eos_token_id", -1, &cfg->eos_token_id));
    TRY(cfg_token(r, root, "pad_token_id", -1, &cfg->pad_token_id));
    double theta = 0;
    TRY(cfg_double(r, root, "rope_theta", 1e6, &theta));
    cfg->rope_theta = (float)theta;
    if (cfg_get(root, "rope_scaling")) return cfg_fail(r, "key \"rope_scaling\": not supported");

    TRY(cfg_head_dim(r, root, cfg));
    int head_dim = cfg->head_dim;
    TRY(cfg_int(r, root, "rotary_dim", head_dim, &cfg->rotary_dim));

    bool postnorm = false;
    TRY(cfg_bool(r, root, "postnorm", false, &postnorm));
    if (!postnorm)
        return cfg_fail(r, "key \"postnorm\": only postnorm = true (residual on the normalized "
                           "input, spec 3) is supported; the original code's default is false");
    const cJSON *shared = cfg_get(root, "shared_intermediate_size");
    if (shared) TRY(cfg_shared_zero(r, shared));

    int L = cfg->num_hidden_layers;
    if (L < 1 || L > MT_MAX_LAYERS)
        return cfg_fail(r, "key \"num_hidden_layers\": %d is outside [1, %d]", L, MT_MAX_LAYERS);
    const cJSON *at = cfg_get(root, "attn_type_list");
    if (!at) return cfg_fail(r, "key \"attn_type_list\" is missing (the original code needs it)");
    TRY(cfg_layer_list(r, at, "attn_type_list", false, L, cfg->layer_types));
    cfg->slope_hf_denominator = false;
    return true;
}

static bool is_pow2(int n) { return n > 0 && (n & (n - 1)) == 0; }

/* Keys common to both schemas, and consistency of the values read. */
static bool cfg_validate(cfg_reader *r, const cJSON *root, mt_minimax_config *cfg) {
    const cJSON *act = cfg_get(root, "hidden_act");
    if (act && (!cJSON_IsString(act) || strcmp(act->valuestring, "silu") != 0))
        return cfg_fail(r, "key \"hidden_act\": only \"silu\" is supported");
    bool tie = false;
    TRY(cfg_bool(r, root, "tie_word_embeddings", false, &tie));
    if (tie)
        return cfg_fail(r, "key \"tie_word_embeddings\": tied embeddings are not supported "
                           "(MiniMax-Text-01 has an untied lm_head)");
    cfg->tie_word_embeddings = false;
    if (cfg_get(root, "sliding_window"))
        return cfg_fail(r, "key \"sliding_window\": only null is supported");
    double x = 0;
    TRY(cfg_double(r, root, "attention_dropout", 0, &x));
    if (x != 0) return cfg_fail(r, "key \"attention_dropout\": only 0 is supported");
    TRY(cfg_double(r, root, "router_jitter_noise", 0, &x));
    if (x != 0) return cfg_fail(r, "key \"router_jitter_noise\": only 0 is supported");

    const cJSON *den = cfg_get(root, "lightning_slope_denominator");
    if (den) {
        if (cJSON_IsString(den) && strcmp(den->valuestring, "original") == 0)
            cfg->slope_hf_denominator = false;
        else if (cJSON_IsString(den) && strcmp(den->valuestring, "transformers") == 0)
            cfg->slope_hf_denominator = true;
        else
            return cfg_fail(r, "key \"lightning_slope_denominator\": expected \"original\" "
                               "(l/(L-1)) or \"transformers\" (l/(L-1+1e-5))");
    }

    struct {
        const char *key;
        int v;
    } pos[] = {{"vocab_size", cfg->vocab_size},
               {"hidden_size", cfg->hidden_size},
               {"intermediate_size", cfg->intermediate_size},
               {"num_attention_heads", cfg->num_attention_heads},
               {"num_key_value_heads", cfg->num_key_value_heads},
               {"head_dim", cfg->head_dim},
               {"num_local_experts", cfg->num_local_experts},
               {"num_experts_per_tok", cfg->num_experts_per_tok},
               {"block_size", cfg->block_size}};
    for (size_t i = 0; i < sizeof(pos) / sizeof(pos[0]); i++)
        if (pos[i].v <= 0)
            return cfg_fail(r, "key \"%s\": %d must be positive", pos[i].key, pos[i].v);
    if (cfg->num_attention_heads % cfg->num_key_value_heads != 0)
        return cfg_fail(r,
                        "key \"num_key_value_heads\": num_attention_heads %d is not divisible by "
                        "num_key_value_heads %d",
                        cfg->num_attention_heads, cfg->num_key_value_heads);
    if (cfg->num_experts_per_tok > cfg->num_local_experts)
        return cfg_fail(r, "key \"num_experts_per_tok\": top-k %d exceeds the %d experts",
                        cfg->num_experts_per_tok, cfg->num_local_experts);
    if (cfg->rotary_dim <= 0 || cfg->rotary_dim % 2 != 0 || cfg->rotary_dim > cfg->head_dim)
        return cfg_fail(r, "key \"%s\": rotary width %d must be even and in (0, head_dim %d]",
                        cfg->original_schema ? "rotary_dim" : "partial_rotary_factor",
                        cfg->rotary_dim, cfg->head_dim);
    if (!(cfg->rms_norm_eps > 0)) return cfg_fail(r, "key \"rms_norm_eps\": must be positive");
    if (!(cfg->rope_theta > 0)) return cfg_fail(r, "key \"rope_theta\": must be positive");
    if (!(cfg->initializer_range >= 0))
        return cfg_fail(r, "key \"initializer_range\": must not be negative");
    if (cfg->pad_token_id >= cfg->vocab_size)
        return cfg_fail(r, "key \"pad_token_id\": %d is outside the vocabulary (%d)",
                        cfg->pad_token_id, cfg->vocab_size);
    /* The original release's slopes for a head count that is not a power of two use the ALiBi
     * interleave (spec 4.2), which is not implemented: refuse rather than differ. */
    bool any_linear = false;
    for (int l = 0; l < cfg->num_hidden_layers; l++)
        any_linear |= cfg->layer_types[l] == MT_LAYER_LINEAR;
    if (any_linear && !cfg->slope_hf_denominator && !is_pow2(cfg->num_attention_heads))
        return cfg_fail(r,
                        "key \"num_attention_heads\": %d is not a power of two; the original "
                        "release's ALiBi slope interleave for it is not implemented",
                        cfg->num_attention_heads);
    return true;
}

static char *cfg_read_file(cfg_reader *r, const char *path, size_t *len) {
    return mt_file_read_max(path, len, (size_t)64 << 20, r->err, r->err_len); /* names path */
}

bool mt_minimax_config_parse(const char *path, mt_minimax_config *cfg, char *err, size_t err_len) {
    char full[4096];
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(full, sizeof(full), "%s/config.json", path);
        path = full;
    }
    cfg_reader r = {path, err, err_len};
    memset(cfg, 0, sizeof(*cfg));
    size_t len = 0;
    char *text = cfg_read_file(&r, path, &len);
    if (!text) return false;
    cJSON *root = cJSON_ParseWithLength(text, len);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        int line = 1;
        for (const char *p = text; at && p < at && *p; p++) line += *p == '\n';
        free(text);
        return cfg_fail(&r, "line %d: malformed JSON", line);
    }
    free(text);
    bool ok = false;
    const cJSON *mt = cfg_get(root, "model_type");
    char dup[256];
    if (!cJSON_IsObject(root)) {
        cfg_fail(&r, "expected a JSON object");
    } else if (mt_json_duplicate_key(root, NULL, dup, sizeof(dup))) {
        cfg_fail(&r, "key \"%s\" appears twice (transformers would take the last)", dup);
    } else if (!mt || !cJSON_IsString(mt)) {
        cfg_fail(&r, "key \"model_type\" is missing");
    } else {
        const char *type = mt->valuestring;
        bool hf = strcmp(type, "minimax") == 0;
        bool orig = strcmp(type, "minimax_text_01") == 0 || strcmp(type, "minimax_m1") == 0;
        const cJSON *arch = cfg_get(root, "architectures");
        const char *arch_ok = NULL;
        if (arch) {
            const cJSON *a = cJSON_IsArray(arch) ? cJSON_GetArrayItem(arch, 0) : NULL;
            const char *name = cJSON_IsString(a) ? a->valuestring : "";
            if (hf && strcmp(name, "MiniMaxForCausalLM") == 0) arch_ok = name;
            if (orig && (strcmp(name, "MiniMaxText01ForCausalLM") == 0 ||
                         strcmp(name, "MiniMaxM1ForCausalLM") == 0))
                arch_ok = name;
            if (!arch_ok || cJSON_GetArraySize(arch) != 1)
                cfg_fail(&r,
                         "key \"architectures\": \"%s\" is not a MiniMax-Text-01 causal LM for "
                         "model_type \"%s\"",
                         name, type);
        }
        if (!hf && !orig) {
            cfg_fail(&r,
                     "key \"model_type\": \"%s\" is not MiniMax-Text-01 (expected \"minimax\" "
                     "or \"minimax_text_01\")",
                     type);
        } else if (!arch || arch_ok) {
            snprintf(cfg->model_type, sizeof(cfg->model_type), "%s", type);
            cfg->original_schema = orig;
            ok = orig ? cfg_read_original(&r, root, cfg) : cfg_read_hf(&r, root, cfg);
            ok = ok && cfg_validate(&r, root, cfg) && cfg_check_foreign(&r, root, cfg);
            cfg->num_hidden_layers_source = cfg->num_hidden_layers;
        }
    }
    cJSON_Delete(root);
    return ok;
}

void mt_minimax_config_load(const char *path, mt_minimax_config *cfg) {
    char err[1024];
    if (!mt_minimax_config_parse(path, cfg, err, sizeof(err))) MT_DIE("config: %s", err);
}

void mt_minimax_config_keep_layers(mt_minimax_config *cfg, int n) {
    MT_CHECK(n >= 1 && n <= cfg->num_hidden_layers,
             "config: cannot keep %d layers of a %d-layer model", n, cfg->num_hidden_layers);
    cfg->num_hidden_layers = n;
}

const char *mt_naming_name(mt_naming naming) {
    switch (naming) {
    case MT_NAMING_HF_V4:
        return "transformers-v4";
    case MT_NAMING_HF_V5:
        return "transformers-v5";
    case MT_NAMING_ORIGINAL:
        return "original";
    }
    return "?";
}

/* ---- writing ---- */

/* The shortest decimal that reads back as the same float, with a ".0" when integral (some
 * strict transformers configs type these keys as float). */
static cJSON *json_float(float v) {
    char buf[48];
    for (int p = 6; p <= 9; p++) {
        snprintf(buf, sizeof(buf), "%.*g", p, (double)v);
        if (strtof(buf, NULL) == v) break;
    }
    if (v == floorf(v) && fabsf(v) < 1e15f)
        snprintf(buf, sizeof(buf), "%.1f", (double)v); /* 10000000.0, not 1e+07 */
    else if (!strpbrk(buf, ".eEn"))
        strcat(buf, ".0");
    return cJSON_CreateRaw(buf);
}

static void json_token(cJSON *o, const char *key, int id) {
    cJSON_AddItemToObject(o, key, id < 0 ? cJSON_CreateNull() : cJSON_CreateNumber(id));
}

void mt_minimax_config_save_json(const mt_minimax_config *cfg, const char *path, mt_naming naming) {
    bool orig = naming == MT_NAMING_ORIGINAL;
    int L = cfg->num_hidden_layers;
    cJSON *o = cJSON_CreateObject();
    const char *arch = orig ? "MiniMaxText01ForCausalLM" : "MiniMaxForCausalLM";
    cJSON_AddItemToObject(o, "architectures", cJSON_CreateStringArray(&arch, 1));
    cJSON_AddStringToObject(o, "model_type", orig ? "minimax_text_01" : "minimax");
    cJSON_AddNumberToObject(o, "vocab_size", cfg->vocab_size);
    cJSON_AddNumberToObject(o, "hidden_size", cfg->hidden_size);
    cJSON_AddNumberToObject(o, "intermediate_size", cfg->intermediate_size);
    cJSON_AddNumberToObject(o, "num_hidden_layers", L);
    cJSON_AddNumberToObject(o, "num_attention_heads", cfg->num_attention_heads);
    cJSON_AddNumberToObject(o, "num_key_value_heads", cfg->num_key_value_heads);
    cJSON_AddNumberToObject(o, "head_dim", cfg->head_dim);
    cJSON_AddStringToObject(o, "hidden_act", "silu");
    cJSON_AddNumberToObject(o, "max_position_embeddings", cfg->max_position_embeddings);
    cJSON_AddItemToObject(o, "initializer_range", json_float(cfg->initializer_range));
    cJSON_AddItemToObject(o, "rms_norm_eps", json_float(cfg->rms_norm_eps));
    cJSON_AddNumberToObject(o, "num_local_experts", cfg->num_local_experts);
    cJSON_AddNumberToObject(o, "num_experts_per_tok", cfg->num_experts_per_tok);
    cJSON_AddBoolToObject(o, "output_router_logits", cfg->output_router_logits);
    cJSON_AddItemToObject(o, "router_aux_loss_coef", json_float(cfg->router_aux_loss_coef));
    cJSON_AddItemToObject(o, "router_jitter_noise", cJSON_CreateRaw("0.0"));
    cJSON_AddItemToObject(o, "attention_dropout", cJSON_CreateRaw("0.0"));
    cJSON_AddNullToObject(o, "sliding_window");
    cJSON_AddBoolToObject(o, "tie_word_embeddings", false);
    json_token(o, "bos_token_id", cfg->bos_token_id);
    json_token(o, "eos_token_id", cfg->eos_token_id);
    json_token(o, "pad_token_id", cfg->pad_token_id);
    cJSON_AddNumberToObject(o, "block_size", cfg->block_size);
    cJSON *layers = cJSON_CreateArray();
    for (int l = 0; l < L; l++) {
        bool full = cfg->layer_types[l] == MT_LAYER_FULL;
        cJSON_AddItemToArray(
            layers, orig ? cJSON_CreateNumber(full)
                         : cJSON_CreateString(full ? "full_attention" : "linear_attention"));
    }
    cJSON_AddItemToObject(o, orig ? "attn_type_list" : "layer_types", layers);
    if (orig) {
        cJSON_AddItemToObject(o, "rope_theta", json_float(cfg->rope_theta));
        cJSON_AddNumberToObject(o, "rotary_dim", cfg->rotary_dim);
        cJSON_AddBoolToObject(o, "postnorm", true);
        cJSON_AddNumberToObject(o, "shared_intermediate_size", 0);
        cJSON_AddItemToObject(o, "layernorm_full_attention_alpha",
                              json_float(cfg->full_attn_alpha));
        cJSON_AddItemToObject(o, "layernorm_full_attention_beta", json_float(cfg->full_attn_beta));
        cJSON_AddItemToObject(o, "layernorm_linear_attention_alpha",
                              json_float(cfg->linear_attn_alpha));
        cJSON_AddItemToObject(o, "layernorm_linear_attention_beta",
                              json_float(cfg->linear_attn_beta));
        cJSON_AddItemToObject(o, "layernorm_mlp_alpha", json_float(cfg->mlp_alpha));
        cJSON_AddItemToObject(o, "layernorm_mlp_beta", json_float(cfg->mlp_beta));
    } else {
        cJSON *rp = cJSON_CreateObject();
        cJSON_AddStringToObject(rp, "rope_type", "default");
        cJSON_AddItemToObject(rp, "rope_theta", json_float(cfg->rope_theta));
        cJSON_AddItemToObject(rp, "partial_rotary_factor",
                              json_float((float)cfg->rotary_dim / (float)cfg->head_dim));
        cJSON_AddItemToObject(o, "rope_parameters", rp);
        cJSON_AddItemToObject(o, "full_attn_alpha_factor", json_float(cfg->full_attn_alpha));
        cJSON_AddItemToObject(o, "full_attn_beta_factor", json_float(cfg->full_attn_beta));
        cJSON_AddItemToObject(o, "linear_attn_alpha_factor", json_float(cfg->linear_attn_alpha));
        cJSON_AddItemToObject(o, "linear_attn_beta_factor", json_float(cfg->linear_attn_beta));
        cJSON_AddItemToObject(o, "mlp_alpha_factor", json_float(cfg->mlp_alpha));
        cJSON_AddItemToObject(o, "mlp_beta_factor", json_float(cfg->mlp_beta));
    }
    /* Only a variant that differs from what the schema implies is written (spec 4.2). */
    if (cfg->slope_hf_denominator == orig)
        cJSON_AddStringToObject(o, "lightning_slope_denominator",
                                cfg->slope_hf_denominator ? "transformers" : "original");
    char *text = cJSON_Print(o);
    MT_CHECK(text, "config: cannot format %s", path);
    size_t n = strlen(text);
    text[n] = '\n'; /* replaces the terminator: the file ends with a newline */
    mt_file_write_atomic(path, text, n + 1);
    cJSON_free(text);
    cJSON_Delete(o);
}
