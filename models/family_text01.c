/* family_text01.c: MiniMax-Text-01 (and MiniMax-M1, the same architecture): its config.json
 * schemas, the tensors its checkpoints hold besides the parameters, and its layer plan
 * (models/family.h; spec section 1, docs/checkpoints.md).
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
 * silently build a different model. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "models/config_internal.h"

/* A layer list in either form: layer_types strings (hf) or attn_type_list 0/1 (original). */
static bool t01_layer_list(mt_cfg_reader *r, const cJSON *v, const char *key, bool hf, int L,
                           mt_layer_type *out) {
    if (!cJSON_IsArray(v)) return mt_cfg_fail(r, "key \"%s\": expected a list", key);
    int n = cJSON_GetArraySize(v);
    if (n != L)
        return mt_cfg_fail(r, "key \"%s\" has %d entries but num_hidden_layers is %d", key, n, L);
    for (int l = 0; l < L; l++) {
        const cJSON *e = cJSON_GetArrayItem(v, l);
        if (hf && cJSON_IsString(e) && strcmp(e->valuestring, "linear_attention") == 0)
            out[l] = MT_LAYER_LINEAR;
        else if (hf && cJSON_IsString(e) && strcmp(e->valuestring, "full_attention") == 0)
            out[l] = MT_LAYER_FULL;
        else if (!hf && cJSON_IsNumber(e) && (e->valuedouble == 0 || e->valuedouble == 1))
            out[l] = e->valuedouble == 1 ? MT_LAYER_FULL : MT_LAYER_LINEAR;
        else
            return mt_cfg_fail(r, "key \"%s\"[%d]: expected %s", key, l,
                               hf ? "\"linear_attention\" or \"full_attention\""
                                  : "0 (lightning) or 1 (softmax)");
    }
    return true;
}

static bool t01_shared_zero(mt_cfg_reader *r, const cJSON *shared) {
    int n = cJSON_IsArray(shared) ? cJSON_GetArraySize(shared) : 1;
    for (int i = 0; i < n; i++) {
        const cJSON *v = cJSON_IsArray(shared) ? cJSON_GetArrayItem(shared, i) : shared;
        if (!cJSON_IsNumber(v) || v->valuedouble != 0)
            return mt_cfg_fail(r, "key \"shared_intermediate_size\": only 0 (no shared expert) is "
                                  "supported");
    }
    return true;
}

/* Keys of the other schema: that schema's reference code ignores them, so they are accepted
 * only when they describe the same model as the keys that count (a converted config may carry
 * both); otherwise the file is ambiguous and rejected. */
static bool t01_check_foreign(mt_cfg_reader *r, const cJSON *root, const mt_minimax_config *cfg) {
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
        TRY(mt_cfg_float(r, root, key, scal[i].v, &v));
        if (v != scal[i].v)
            return mt_cfg_fail(r, "key \"%s\" = %g disagrees with \"%s\" = %g (%s)", key, (double)v,
                               orig ? scal[i].orig : scal[i].hf, (double)scal[i].v, why);
    }
    const char *lkey = orig ? "layer_types" : "attn_type_list";
    const cJSON *lv = mt_cfg_get(root, lkey);
    if (lv) {
        mt_layer_type other[MT_MAX_LAYERS];
        TRY(t01_layer_list(r, lv, lkey, orig, cfg->num_hidden_layers, other));
        for (int l = 0; l < cfg->num_hidden_layers; l++)
            if (other[l] != cfg->layer_types[l])
                return mt_cfg_fail(r, "key \"%s\"[%d] disagrees with \"%s\" (%s)", lkey, l,
                                   orig ? "attn_type_list" : "layer_types", why);
    }
    if (orig) {
        const cJSON *rp = mt_cfg_get(root, "rope_parameters");
        double theta = cfg->rope_theta, partial = (double)cfg->rotary_dim / cfg->head_dim;
        double t = theta, p = partial;
        TRY(mt_cfg_double(r, root, "partial_rotary_factor", partial, &p));
        if (rp && cJSON_IsObject(rp)) {
            TRY(mt_cfg_double(r, rp, "rope_theta", theta, &t));
            TRY(mt_cfg_double(r, rp, "partial_rotary_factor", p, &p));
        }
        if ((float)t != (float)theta || p * cfg->head_dim != cfg->rotary_dim)
            return mt_cfg_fail(r,
                               "key \"rope_parameters\"/\"partial_rotary_factor\" disagrees with "
                               "\"rope_theta\"/\"rotary_dim\" (%s)",
                               why);
        int e = cfg->num_local_experts;
        TRY(mt_cfg_int(r, root, "num_experts", e, &e));
        if (e != cfg->num_local_experts)
            return mt_cfg_fail(r, "key \"num_experts\" disagrees with \"num_local_experts\" (%s)",
                               why);
    } else {
        int rot = cfg->rotary_dim;
        TRY(mt_cfg_int(r, root, "rotary_dim", rot, &rot));
        if (rot != cfg->rotary_dim)
            return mt_cfg_fail(r,
                               "key \"rotary_dim\" = %d disagrees with head_dim * "
                               "partial_rotary_factor = %d (%s)",
                               rot, cfg->rotary_dim, why);
        bool postnorm = true;
        TRY(mt_cfg_bool(r, root, "postnorm", true, &postnorm));
        if (!postnorm)
            return mt_cfg_fail(r, "key \"postnorm\": false is not supported (transformers always "
                                  "uses the post-norm residual)");
        const cJSON *shared = mt_cfg_get(root, "shared_intermediate_size");
        if (shared) TRY(t01_shared_zero(r, shared));
    }
    return true;
}

/* Keys both schemas share, with the defaults of both classes. The original code has no
 * block_size key (a module constant of 256); vLLM reads "block_size". */
static bool t01_read_common(mt_cfg_reader *r, const cJSON *root, mt_minimax_config *cfg) {
    static const mt_cfg_defaults d = {.vocab_size = 32000,
                                      .hidden_size = 4096,
                                      .intermediate_size = 14336,
                                      .num_hidden_layers = 32,
                                      .num_attention_heads = 32,
                                      .num_key_value_heads = 8,
                                      .max_position_embeddings = 4096 * 32,
                                      .num_experts_per_tok = 2,
                                      .num_local_experts = 8,
                                      .rms_norm_eps = 1e-5};
    TRY(mt_cfg_read_common(r, root, &d, cfg));
    TRY(mt_cfg_int(r, root, "block_size", 256, &cfg->block_size));
    return true;
}

/* transformers `minimax` keys. */
static bool t01_read_hf(mt_cfg_reader *r, const cJSON *root, mt_minimax_config *cfg) {
    TRY(t01_read_common(r, root, cfg));
    TRY(mt_cfg_float(r, root, "full_attn_alpha_factor", 1, &cfg->full_attn_alpha));
    TRY(mt_cfg_float(r, root, "full_attn_beta_factor", 1, &cfg->full_attn_beta));
    TRY(mt_cfg_float(r, root, "linear_attn_alpha_factor", 1, &cfg->linear_attn_alpha));
    TRY(mt_cfg_float(r, root, "linear_attn_beta_factor", 1, &cfg->linear_attn_beta));
    TRY(mt_cfg_float(r, root, "mlp_alpha_factor", 1, &cfg->mlp_alpha));
    TRY(mt_cfg_float(r, root, "mlp_beta_factor", 1, &cfg->mlp_beta));
    TRY(mt_cfg_token(r, root, "bos_token_id", 1, &cfg->bos_token_id));
    TRY(mt_cfg_token(r, root, "eos_token_id", 2, &cfg->eos_token_id));
    TRY(mt_cfg_token(r, root, "pad_token_id", -1, &cfg->pad_token_id));

    TRY(mt_cfg_head_dim(r, root, cfg));
    TRY(mt_cfg_rope_hf(r, root, 1e6, cfg));

    /* layer_types; default: transformers' alternating pattern starting with a full layer. */
    int L = cfg->num_hidden_layers;
    if (L < 1 || L > MT_MAX_LAYERS)
        return mt_cfg_fail(r, "key \"num_hidden_layers\": %d is outside [1, %d]", L, MT_MAX_LAYERS);
    const cJSON *lt = mt_cfg_get(root, "layer_types");
    if (!lt) {
        for (int l = 0; l < L; l++)
            cfg->layer_types[l] = ((l + 1) % 2) ? MT_LAYER_FULL : MT_LAYER_LINEAR;
    } else {
        TRY(t01_layer_list(r, lt, "layer_types", true, L, cfg->layer_types));
    }
    cfg->slope_hf_denominator = true;
    return true;
}

/* original `minimax_text_01` keys. */
static bool t01_read_original(mt_cfg_reader *r, const cJSON *root, mt_minimax_config *cfg) {
    TRY(t01_read_common(r, root, cfg));
    TRY(mt_cfg_float(r, root, "layernorm_full_attention_alpha", 1, &cfg->full_attn_alpha));
    TRY(mt_cfg_float(r, root, "layernorm_full_attention_beta", 1, &cfg->full_attn_beta));
    TRY(mt_cfg_float(r, root, "layernorm_linear_attention_alpha", 1, &cfg->linear_attn_alpha));
    TRY(mt_cfg_float(r, root, "layernorm_linear_attention_beta", 1, &cfg->linear_attn_beta));
    TRY(mt_cfg_float(r, root, "layernorm_mlp_alpha", 1, &cfg->mlp_alpha));
    TRY(mt_cfg_float(r, root, "layernorm_mlp_beta", 1, &cfg->mlp_beta));
    TRY(mt_cfg_token(r, root, "bos_token_id", -1, &cfg->bos_token_id));
    TRY(mt_cfg_token(r, root, "eos_token_id", -1, &cfg->eos_token_id));
    TRY(mt_cfg_token(r, root, "pad_token_id", -1, &cfg->pad_token_id));
    double theta = 0;
    TRY(mt_cfg_double(r, root, "rope_theta", 1e6, &theta));
    cfg->rope_theta = (float)theta;
    if (mt_cfg_get(root, "rope_scaling"))
        return mt_cfg_fail(r, "key \"rope_scaling\": not supported");

    TRY(mt_cfg_head_dim(r, root, cfg));
    int head_dim = cfg->head_dim;
    TRY(mt_cfg_int(r, root, "rotary_dim", head_dim, &cfg->rotary_dim));

    bool postnorm = false;
    TRY(mt_cfg_bool(r, root, "postnorm", false, &postnorm));
    if (!postnorm)
        return mt_cfg_fail(r, "key \"postnorm\": only postnorm = true (residual on the normalized "
                              "input, spec 3) is supported; the original code's default is false");
    const cJSON *shared = mt_cfg_get(root, "shared_intermediate_size");
    if (shared) TRY(t01_shared_zero(r, shared));

    int L = cfg->num_hidden_layers;
    if (L < 1 || L > MT_MAX_LAYERS)
        return mt_cfg_fail(r, "key \"num_hidden_layers\": %d is outside [1, %d]", L, MT_MAX_LAYERS);
    const cJSON *at = mt_cfg_get(root, "attn_type_list");
    if (!at)
        return mt_cfg_fail(r, "key \"attn_type_list\" is missing (the original code needs it)");
    TRY(t01_layer_list(r, at, "attn_type_list", false, L, cfg->layer_types));
    cfg->slope_hf_denominator = false;
    return true;
}

static bool is_pow2(int n) { return n > 0 && (n & (n - 1)) == 0; }

/* The project key lightning_slope_denominator, the block size, the slope variant's limits, and
 * the other schema's keys. */
static bool t01_check(mt_cfg_reader *r, const cJSON *root, mt_minimax_config *cfg) {
    const cJSON *den = mt_cfg_get(root, "lightning_slope_denominator");
    if (den) {
        if (cJSON_IsString(den) && strcmp(den->valuestring, "original") == 0)
            cfg->slope_hf_denominator = false;
        else if (cJSON_IsString(den) && strcmp(den->valuestring, "transformers") == 0)
            cfg->slope_hf_denominator = true;
        else
            return mt_cfg_fail(r, "key \"lightning_slope_denominator\": expected \"original\" "
                                  "(l/(L-1)) or \"transformers\" (l/(L-1+1e-5))");
    }

    if (cfg->block_size <= 0)
        return mt_cfg_fail(r, "key \"block_size\": %d must be positive", cfg->block_size);
    /* The original release's slopes for a head count that is not a power of two use the ALiBi
     * interleave (spec 4.2), which is not implemented: refuse rather than differ. */
    bool any_linear = false;
    for (int l = 0; l < cfg->num_hidden_layers; l++)
        any_linear |= cfg->layer_types[l] == MT_LAYER_LINEAR;
    if (any_linear && !cfg->slope_hf_denominator && !is_pow2(cfg->num_attention_heads))
        return mt_cfg_fail(r,
                           "key \"num_attention_heads\": %d is not a power of two; the original "
                           "release's ALiBi slope interleave for it is not implemented",
                           cfg->num_attention_heads);
    return t01_check_foreign(r, root, cfg);
}

static void t01_save(const mt_minimax_config *cfg, cJSON *o, bool orig) {
    const int L = cfg->num_hidden_layers;
    mt_cfg_save_common(cfg, o, orig ? "MiniMaxText01ForCausalLM" : "MiniMaxForCausalLM",
                       orig ? "minimax_text_01" : "minimax");
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
        cJSON_AddItemToObject(o, "rope_theta", mt_cfg_json_float(cfg->rope_theta));
        cJSON_AddNumberToObject(o, "rotary_dim", cfg->rotary_dim);
        cJSON_AddBoolToObject(o, "postnorm", true);
        cJSON_AddNumberToObject(o, "shared_intermediate_size", 0);
        cJSON_AddItemToObject(o, "layernorm_full_attention_alpha",
                              mt_cfg_json_float(cfg->full_attn_alpha));
        cJSON_AddItemToObject(o, "layernorm_full_attention_beta",
                              mt_cfg_json_float(cfg->full_attn_beta));
        cJSON_AddItemToObject(o, "layernorm_linear_attention_alpha",
                              mt_cfg_json_float(cfg->linear_attn_alpha));
        cJSON_AddItemToObject(o, "layernorm_linear_attention_beta",
                              mt_cfg_json_float(cfg->linear_attn_beta));
        cJSON_AddItemToObject(o, "layernorm_mlp_alpha", mt_cfg_json_float(cfg->mlp_alpha));
        cJSON_AddItemToObject(o, "layernorm_mlp_beta", mt_cfg_json_float(cfg->mlp_beta));
    } else {
        cJSON *rp = cJSON_CreateObject();
        cJSON_AddStringToObject(rp, "rope_type", "default");
        cJSON_AddItemToObject(rp, "rope_theta", mt_cfg_json_float(cfg->rope_theta));
        cJSON_AddItemToObject(rp, "partial_rotary_factor",
                              mt_cfg_json_float((float)cfg->rotary_dim / (float)cfg->head_dim));
        cJSON_AddItemToObject(o, "rope_parameters", rp);
        cJSON_AddItemToObject(o, "full_attn_alpha_factor", mt_cfg_json_float(cfg->full_attn_alpha));
        cJSON_AddItemToObject(o, "full_attn_beta_factor", mt_cfg_json_float(cfg->full_attn_beta));
        cJSON_AddItemToObject(o, "linear_attn_alpha_factor",
                              mt_cfg_json_float(cfg->linear_attn_alpha));
        cJSON_AddItemToObject(o, "linear_attn_beta_factor",
                              mt_cfg_json_float(cfg->linear_attn_beta));
        cJSON_AddItemToObject(o, "mlp_alpha_factor", mt_cfg_json_float(cfg->mlp_alpha));
        cJSON_AddItemToObject(o, "mlp_beta_factor", mt_cfg_json_float(cfg->mlp_beta));
    }
    /* Only a variant that differs from what the schema implies is written (spec 4.2). */
    if (cfg->slope_hf_denominator == orig)
        cJSON_AddStringToObject(o, "lightning_slope_denominator",
                                cfg->slope_hf_denominator ? "transformers" : "original");
}

/* Every layer: norm -> lightning or softmax attention -> DeepNorm residual -> norm ->
 * softmax-routed MoE -> DeepNorm residual, RMSNorm weights plain. */
static void t01_plan(const mt_minimax_config *cfg, int l, mt_layer_plan *p) {
    const bool linear = cfg->layer_types[l] == MT_LAYER_LINEAR;
    p->mixer = linear ? MT_MIXER_LIGHTNING : MT_MIXER_SOFTMAX;
    p->qk_norm = MT_QK_NORM_NONE;
    p->norm = MT_NORM_RMS;
    p->residual = MT_RESIDUAL_DEEPNORM;
    p->mix_alpha = linear ? cfg->linear_attn_alpha : cfg->full_attn_alpha;
    p->mix_beta = linear ? cfg->linear_attn_beta : cfg->full_attn_beta;
    p->mlp_alpha = cfg->mlp_alpha;
    p->mlp_beta = cfg->mlp_beta;
    p->mlp = MT_MLP_MOE;
    p->router = MT_ROUTER_SOFTMAX;
    p->router_bias = false;
    p->routed_scale = 1.0f;
    p->n_experts = cfg->num_local_experts;
    p->top_k = cfg->num_experts_per_tok;
    p->expert_ffn = cfg->intermediate_size;
    /* transformers' MiniMaxModel: the sliding-window mask for the full_attention layers only */
    p->window = linear ? 0 : cfg->sliding_window;
    p->jitter = cfg->router_jitter_noise;
}

/* transformers >= 5 saves four buffers per lightning layer that it derives from the config
 * (slope_rate, query_decay, key_decay, diagonal_decay): checked against the config's decay by
 * the loader, never loaded; older transformers saved rotary_emb.inv_freq. */
static mt_extra_kind t01_extra(const mt_minimax_config *cfg, const char *name, int *layer,
                               const char **what) {
    static const char *const buffers[] = {"slope_rate", "query_decay", "key_decay",
                                          "diagonal_decay"};
    int used = 0;
    *layer = -1;
    if (strstr(name, "rotary_emb.inv_freq")) {
        *what = "inv_freq";
        return MT_EXTRA_DERIVED;
    }
    if (sscanf(name, "model.layers.%d.self_attn.%n", layer, &used) != 1 || used == 0 ||
        *layer < 0 || *layer >= cfg->num_hidden_layers ||
        cfg->layer_types[*layer] != MT_LAYER_LINEAR)
        return MT_EXTRA_UNEXPECTED;
    for (int i = 0; i < 4; i++)
        if (strcmp(name + used, buffers[i]) == 0) {
            *what = buffers[i];
            return MT_EXTRA_DERIVED;
        }
    return MT_EXTRA_UNEXPECTED;
}

static bool t01_matches(const char *model_type, bool *original) {
    *original = strcmp(model_type, "minimax_text_01") == 0 || strcmp(model_type, "minimax_m1") == 0;
    return *original || strcmp(model_type, "minimax") == 0;
}

static bool t01_arch_ok(const char *arch, bool original) {
    if (!original) return strcmp(arch, "MiniMaxForCausalLM") == 0;
    return strcmp(arch, "MiniMaxText01ForCausalLM") == 0 ||
           strcmp(arch, "MiniMaxM1ForCausalLM") == 0;
}

static bool t01_parse(mt_cfg_reader *r, const cJSON *root, mt_minimax_config *cfg) {
    return cfg->original_schema ? t01_read_original(r, root, cfg) : t01_read_hf(r, root, cfg);
}

const mt_family mt_family_text01 = {
    .id = "text01",
    .name = "MiniMax-Text-01",
    .matches = t01_matches,
    .arch_ok = t01_arch_ok,
    .arch_expected = "MiniMaxForCausalLM, or MiniMaxText01ForCausalLM / MiniMaxM1ForCausalLM for "
                     "the original schema",
    .parse = t01_parse,
    .check = t01_check,
    .save = t01_save,
    .plan = t01_plan,
    .extra = t01_extra,
    .reply_format = "none",
};
