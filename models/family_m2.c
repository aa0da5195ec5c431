/* family_m2.c: MiniMax-M2 (model_type "minimax_m2"): its config.json schemas, the tensors its
 * checkpoints hold besides the parameters, and its layer plan (models/family.h; spec
 * ../shared/spec/minimax-m3.md sections 1.1, 2, 3.1, 3.3, 6, 8.1; docs/models.md).
 *
 * Two schemas share the model_type: transformers 5.24's MiniMaxM2Config (rope_parameters, the
 * numeric reference) and the original remote code's, which the release's config.json uses
 * (rope_theta and rotary_dim at the top level, use_qk_norm, qk_norm_type, scoring_func,
 * use_routing_bias, shared_intermediate_size, attn_type_list, use_mtp, num_mtp_modules,
 * mtp_transformer_layers). transformers maps rotary_dim to partial_rotary_factor and
 * implements exactly one variant of the rest: the keys are accepted with that variant's values
 * and rejected, by name, with any other (transformers would silently build another model).
 * Defaults are transformers' class defaults. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "models/config_internal.h"

/* The remote code's keys: only the values of the variant transformers implements. */
static bool m2_read_remote_keys(mt_cfg_reader *r, const cJSON *root, mt_minimax_config *cfg) {
    bool on = true;
    TRY(mt_cfg_bool(r, root, "use_qk_norm", true, &on));
    if (!on)
        return mt_cfg_fail(r, "key \"use_qk_norm\": false is not supported (transformers' "
                              "minimax_m2 always normalises q and k)");
    TRY(mt_cfg_string_is(r, root, "qk_norm_type", "per_layer",
                         "one RMSNorm over the whole q and k projections, as transformers"));
    TRY(mt_cfg_string_is(r, root, "scoring_func", "sigmoid", "transformers' minimax_m2 router"));
    TRY(mt_cfg_bool(r, root, "use_routing_bias", true, &on));
    if (!on)
        return mt_cfg_fail(r, "key \"use_routing_bias\": false is not supported (transformers' "
                              "minimax_m2 always chooses with e_score_correction_bias)");
    int shared = 0;
    TRY(mt_cfg_int(r, root, "shared_intermediate_size", 0, &shared));
    if (shared != 0)
        return mt_cfg_fail(r, "key \"shared_intermediate_size\": only 0 (no shared expert) is "
                              "supported for MiniMax-M2");
    double rsf = 1.0;
    TRY(mt_cfg_double(r, root, "routed_scaling_factor", 1.0, &rsf));
    if (rsf != 1.0)
        return mt_cfg_fail(r,
                           "key \"routed_scaling_factor\": %g is not supported (transformers' "
                           "minimax_m2 router does not scale: 1.0)",
                           rsf);
    const cJSON *at = mt_cfg_get(root, "attn_type_list");
    if (at) {
        if (!cJSON_IsArray(at) || cJSON_GetArraySize(at) != cfg->num_hidden_layers)
            return mt_cfg_fail(r,
                               "key \"attn_type_list\": expected a list of num_hidden_layers "
                               "= %d entries",
                               cfg->num_hidden_layers);
        for (int l = 0; l < cfg->num_hidden_layers; l++) {
            const cJSON *e = cJSON_GetArrayItem(at, l);
            if (!cJSON_IsNumber(e) || e->valuedouble != 1)
                return mt_cfg_fail(r,
                                   "key \"attn_type_list\"[%d]: only 1 (softmax attention) is "
                                   "supported for MiniMax-M2 (transformers has no lightning layer)",
                                   l);
        }
    }
    bool mtp = false;
    TRY(mt_cfg_bool(r, root, "use_mtp", false, &mtp));
    TRY(mt_cfg_int(r, root, "num_mtp_modules", 0, &cfg->num_mtp_modules));
    TRY(mt_cfg_int(r, root, "mtp_transformer_layers", 0, &cfg->mtp_transformer_layers));
    if (cfg->num_mtp_modules < 0 || cfg->mtp_transformer_layers < 0)
        return mt_cfg_fail(r, "key \"num_mtp_modules\"/\"mtp_transformer_layers\": must not be "
                              "negative");
    if (!mtp) cfg->num_mtp_modules = 0;
    return true;
}

static bool m2_parse(mt_cfg_reader *r, const cJSON *root, mt_minimax_config *cfg) {
    static const mt_cfg_defaults d = {.vocab_size = 200064,
                                      .hidden_size = 3072,
                                      .intermediate_size = 1536,
                                      .num_hidden_layers = 62,
                                      .num_attention_heads = 48,
                                      .num_key_value_heads = 8,
                                      .max_position_embeddings = 196608,
                                      .num_experts_per_tok = 8,
                                      .num_local_experts = 256,
                                      .rms_norm_eps = 1e-6};
    TRY(mt_cfg_read_common(r, root, &d, cfg));
    TRY(mt_cfg_read_m2_m3(r, root, cfg));
    /* the legacy rotary_dim: transformers takes it as partial_rotary_factor = rotary_dim /
     * head_dim when no factor is given; with one, both must agree */
    const cJSON *rd = mt_cfg_get(root, "rotary_dim");
    if (rd) {
        int rot = 0;
        TRY(mt_cfg_int_value(r, rd, "rotary_dim", &rot));
        const cJSON *rp = mt_cfg_get(root, "rope_parameters");
        const bool factor = mt_cfg_get(root, "partial_rotary_factor") ||
                            (rp && mt_cfg_get(rp, "partial_rotary_factor"));
        if (factor && rot != cfg->rotary_dim)
            return mt_cfg_fail(r,
                               "key \"rotary_dim\" = %d disagrees with head_dim * "
                               "partial_rotary_factor = %d",
                               rot, cfg->rotary_dim);
        cfg->rotary_dim = rot;
    }
    TRY(m2_read_remote_keys(r, root, cfg));
    cfg->block_size = 1; /* no lightning layer: unused */
    return true;
}

/* transformers' schema with the remote code's keys beside it (the same values), so that the
 * export loads in transformers and in the release's remote code alike. */
static void m2_save(const mt_minimax_config *cfg, cJSON *o, bool original) {
    mt_cfg_save_common(cfg, o, "MiniMaxM2ForCausalLM", "minimax_m2");
    cJSON *rp = cJSON_CreateObject();
    cJSON_AddStringToObject(rp, "rope_type", "default");
    cJSON_AddItemToObject(rp, "rope_theta", mt_cfg_json_float(cfg->rope_theta));
    cJSON_AddItemToObject(rp, "partial_rotary_factor",
                          mt_cfg_json_float((float)cfg->rotary_dim / (float)cfg->head_dim));
    cJSON_AddItemToObject(o, "rope_parameters", rp);
    cJSON_AddItemToObject(o, "rope_theta", mt_cfg_json_float(cfg->rope_theta));
    cJSON_AddNumberToObject(o, "rotary_dim", cfg->rotary_dim);
    cJSON_AddBoolToObject(o, "use_qk_norm", true);
    cJSON_AddStringToObject(o, "qk_norm_type", "per_layer");
    cJSON_AddStringToObject(o, "scoring_func", "sigmoid");
    cJSON_AddBoolToObject(o, "use_routing_bias", true);
    cJSON_AddNumberToObject(o, "shared_intermediate_size", 0);
    cJSON *layers = cJSON_CreateArray();
    for (int l = 0; l < cfg->num_hidden_layers; l++)
        cJSON_AddItemToArray(layers, cJSON_CreateNumber(1));
    cJSON_AddItemToObject(o, "attn_type_list", layers);
    cJSON_AddBoolToObject(o, "use_mtp", cfg->num_mtp_modules > 0);
    cJSON_AddNumberToObject(o, "num_mtp_modules", cfg->num_mtp_modules);
    cJSON_AddNumberToObject(o, "mtp_transformer_layers", cfg->mtp_transformer_layers);
}

/* Every layer: RMSNorm -> softmax GQA attention with whole-width QK RMSNorm and partial RoPE ->
 * plain residual -> RMSNorm -> sigmoid-routed MoE with the correction bias -> plain residual. */
static void m2_plan(const mt_minimax_config *cfg, int l, mt_layer_plan *p) {
    p->mixer = MT_MIXER_SOFTMAX;
    p->qk_norm = MT_QK_NORM_WHOLE;
    p->norm = MT_NORM_RMS;
    p->residual = MT_RESIDUAL_PLAIN;
    p->mix_alpha = p->mix_beta = p->mlp_alpha = p->mlp_beta = 1.0f;
    p->mlp = MT_MLP_MOE;
    p->router = MT_ROUTER_SIGMOID;
    p->router_bias = true;
    p->routed_scale = 1.0f;
    p->n_experts = cfg->num_local_experts;
    p->top_k = cfg->num_experts_per_tok;
    p->expert_ffn = cfg->intermediate_size;
    p->jitter = cfg->router_jitter_noise;
}

/* The multi-token-prediction modules of the release (num_mtp_modules): tensors under an "mtp"
 * name component, or decoder layers numbered after the last (the DeepSeek-V3 convention), with
 * their FP8 scales; they are carried into exports unchanged, never trained. */
static mt_extra_kind m2_extra(const mt_minimax_config *cfg, const char *name, int *layer,
                              const char **what) {
    int used = 0;
    *layer = -1;
    if (strstr(name, "rotary_emb.inv_freq")) {
        *what = "inv_freq";
        return MT_EXTRA_DERIVED;
    }
    if (strncmp(name, "mtp.", 4) == 0 || strstr(name, ".mtp.") || strstr(name, ".mtp_")) {
        *what = "mtp";
        return MT_EXTRA_CARRIED;
    }
    if (sscanf(name, "model.layers.%d.%n", layer, &used) == 1 && used > 0 &&
        *layer >= cfg->num_hidden_layers_source &&
        *layer < cfg->num_hidden_layers_source + cfg->num_mtp_modules) {
        *what = "mtp";
        return MT_EXTRA_CARRIED;
    }
    return MT_EXTRA_UNEXPECTED;
}

/* transformers' MiniMaxM2Model builds the plain causal mask ("no sliding window opposed to
 * mixtral"): a window would change the numerics against it. */
static bool m2_check(mt_cfg_reader *r, const cJSON *root, mt_minimax_config *cfg) {
    (void)root;
    if (cfg->sliding_window > 0)
        return mt_cfg_fail(r,
                           "key \"sliding_window\": %d is not supported for MiniMax-M2 "
                           "(transformers' MiniMax-M2 attends to the whole causal prefix whatever "
                           "the key says); use null",
                           cfg->sliding_window);
    return true;
}

static bool m2_matches(const char *model_type, bool *original) {
    *original = false;
    return strcmp(model_type, "minimax_m2") == 0;
}

static bool m2_arch_ok(const char *arch, bool original) {
    return strcmp(arch, "MiniMaxM2ForCausalLM") == 0;
}

const mt_family mt_family_m2 = {
    .id = "m2",
    .name = "MiniMax-M2",
    .matches = m2_matches,
    .arch_ok = m2_arch_ok,
    .arch_expected = "MiniMaxM2ForCausalLM",
    .parse = m2_parse,
    .check = m2_check,
    .save = m2_save,
    .plan = m2_plan,
    .extra = m2_extra,
    .v5_router_bias = "model.layers.%d.mlp.e_score_correction_bias",
    .reply_format = "minimax_m2",
};
