/* family_m3.c: MiniMax-M3 (model_type "minimax_m3_vl" with a text_config, or the text model
 * alone: transformers' "minimax_m3_vl_text", the original "minimax_m3"): its config.json
 * schemas, the tensors its checkpoints hold besides the text model's parameters, and its layer
 * plan (models/family.h; spec ../shared/spec/minimax-m3.md sections 1.2, 2, 3.2-3.4, 6, 7, 8.2,
 * 9; docs/models.md).
 *
 * The text model's keys come in two forms that transformers 5.24's MiniMaxM3VLTextConfig both
 * reads: its own flat names (index_n_heads, index_head_dim, index_block_size,
 * index_topk_blocks, index_local_blocks, layer_types, mlp_layer_types) and the release's
 * (sparse_attention_config {sparse_num_index_heads, ...}, moe_layer_freq); a value in
 * sparse_attention_config wins over the flat key, a layer_types list over
 * sparse_attention_freq, as in transformers. Keys of variants transformers does not build
 * (an init block, another block score, the index value projections, a swiglu_beta other than
 * 1) are refused by name. Defaults are transformers' class defaults. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/config_internal.h"

/* A per-layer list of strings (a = the value meaning true, b = false) or of 0/1 numbers into
 * out[L]; absent: def for every layer. */
static bool m3_layer_list(mt_cfg_reader *r, const cJSON *v, const char *key, const char *a,
                          const char *b, int L, bool *out) {
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != L)
        return mt_cfg_fail(r, "key \"%s\": expected a list of num_hidden_layers = %d entries", key,
                           L);
    for (int l = 0; l < L; l++) {
        const cJSON *e = cJSON_GetArrayItem(v, l);
        if (a && cJSON_IsString(e) && strcmp(e->valuestring, a) == 0)
            out[l] = true;
        else if (a && cJSON_IsString(e) && strcmp(e->valuestring, b) == 0)
            out[l] = false;
        else if (!a && cJSON_IsNumber(e) && (e->valuedouble == 0 || e->valuedouble == 1))
            out[l] = e->valuedouble == 1;
        else if (a)
            return mt_cfg_fail(r, "key \"%s\"[%d]: expected \"%s\" or \"%s\"", key, l, a, b);
        else
            return mt_cfg_fail(r, "key \"%s\"[%d]: expected 0 or 1", key, l);
    }
    return true;
}

/* The MSA keys: flat names, then sparse_attention_config's, which win (transformers). */
static bool m3_read_sparse(mt_cfg_reader *r, const cJSON *root, mt_minimax_config *cfg) {
    const int L = cfg->num_hidden_layers;
    TRY(mt_cfg_int(r, root, "index_n_heads", 4, &cfg->msa_index_heads));
    TRY(mt_cfg_int(r, root, "index_head_dim", 128, &cfg->msa_index_dim));
    TRY(mt_cfg_int(r, root, "index_block_size", 128, &cfg->msa_block));
    TRY(mt_cfg_int(r, root, "index_topk_blocks", 16, &cfg->msa_topk));
    TRY(mt_cfg_int(r, root, "index_local_blocks", 1, &cfg->msa_local_blocks));
    for (int l = 0; l < L; l++) cfg->layer_msa[l] = false;
    const cJSON *sc = mt_cfg_get(root, "sparse_attention_config");
    if (sc && !cJSON_IsObject(sc))
        return mt_cfg_fail(r, "key \"sparse_attention_config\": expected an object");
    if (sc) {
        struct {
            const char *key;
            int *v;
        } legacy[] = {{"sparse_num_index_heads", &cfg->msa_index_heads},
                      {"sparse_index_dim", &cfg->msa_index_dim},
                      {"sparse_block_size", &cfg->msa_block},
                      {"sparse_topk_blocks", &cfg->msa_topk},
                      {"sparse_local_block", &cfg->msa_local_blocks}};
        for (size_t i = 0; i < sizeof(legacy) / sizeof(legacy[0]); i++)
            TRY(mt_cfg_int(r, sc, legacy[i].key, *legacy[i].v, legacy[i].v));
        int init = 0;
        TRY(mt_cfg_int(r, sc, "sparse_init_block", 0, &init));
        if (init != 0)
            return mt_cfg_fail(r,
                               "key \"sparse_attention_config.sparse_init_block\": %d is not "
                               "supported (transformers has no forced initial blocks: only 0)",
                               init);
        TRY(mt_cfg_string_is(r, sc, "sparse_score_type", "max",
                             "transformers scores a block by its largest key score"));
        const cJSON *freq = mt_cfg_get(sc, "sparse_attention_freq");
        if (freq)
            TRY(m3_layer_list(r, freq, "sparse_attention_config.sparse_attention_freq", NULL, NULL,
                              L, cfg->layer_msa));
        bool use = true;
        TRY(mt_cfg_bool(r, sc, "use_sparse_attention", true, &use));
        for (int l = 0; l < L && !use; l++)
            if (cfg->layer_msa[l])
                return mt_cfg_fail(r,
                                   "key \"sparse_attention_config.use_sparse_attention\": false "
                                   "with sparse layer %d in sparse_attention_freq (transformers "
                                   "builds the sparse layers whatever this key says)",
                                   l);
        const cJSON *dv = mt_cfg_get(sc, "sparse_disable_index_value");
        if (dv) {
            bool disabled[MT_MAX_LAYERS];
            TRY(m3_layer_list(r, dv, "sparse_attention_config.sparse_disable_index_value", NULL,
                              NULL, L, disabled));
            for (int l = 0; l < L; l++)
                if (cfg->layer_msa[l] && !disabled[l])
                    return mt_cfg_fail(
                        r,
                        "key \"sparse_attention_config.sparse_disable_index_value\"[%d]: 0 on a "
                        "sparse layer is not supported (it would need the index_v/index_o "
                        "projections, which transformers does not build)",
                        l);
        }
    }
    const cJSON *lt = mt_cfg_get(root, "layer_types");
    if (lt)
        TRY(m3_layer_list(r, lt, "layer_types", "minimax_m3_sparse", "full_attention", L,
                          cfg->layer_msa));
    return true;
}

static bool m3_parse(mt_cfg_reader *r, const cJSON *root, mt_minimax_config *cfg) {
    static const mt_cfg_defaults d = {.vocab_size = 200064,
                                      .hidden_size = 6144,
                                      .intermediate_size = 3072,
                                      .num_hidden_layers = 60,
                                      .num_attention_heads = 64,
                                      .num_key_value_heads = 4,
                                      .max_position_embeddings = 524288,
                                      .num_experts_per_tok = 4,
                                      .num_local_experts = 128,
                                      .rms_norm_eps = 1e-6};
    TRY(mt_cfg_read_common(r, root, &d, cfg));
    TRY(mt_cfg_read_m2_m3(r, root, cfg));
    const int L = cfg->num_hidden_layers;
    /* transformers rotates head_dim * partial_rotary_factor channels and never reads
     * rotary_dim: a rotary_dim the factor does not give would silently differ */
    const cJSON *rd = mt_cfg_get(root, "rotary_dim");
    if (rd) {
        int rot = 0;
        TRY(mt_cfg_int_value(r, rd, "rotary_dim", &rot));
        if (rot != cfg->rotary_dim)
            return mt_cfg_fail(r,
                               "key \"rotary_dim\" = %d disagrees with head_dim * "
                               "partial_rotary_factor = %d (transformers rotates the latter)",
                               rot, cfg->rotary_dim);
    }
    bool on = true;
    TRY(mt_cfg_bool(r, root, "use_gemma_norm", true, &on));
    if (!on)
        return mt_cfg_fail(r, "key \"use_gemma_norm\": false is not supported (transformers' "
                              "MiniMax-M3 norms are all (1 + w) x_hat)");
    TRY(mt_cfg_bool(r, root, "use_qk_norm", true, &on));
    if (!on)
        return mt_cfg_fail(r, "key \"use_qk_norm\": false is not supported (transformers' "
                              "MiniMax-M3 always normalises q and k per head)");
    TRY(mt_cfg_string_is(r, root, "qk_norm_type", "per_head",
                         "one Gemma RMSNorm of width head_dim per head, as transformers"));
    TRY(mt_cfg_bool(r, root, "attention_output_gate", false, &on));
    if (on)
        return mt_cfg_fail(r, "key \"attention_output_gate\": true is not supported "
                              "(transformers' MiniMax-M3 has no output gate)");
    TRY(mt_cfg_string_is(r, root, "scoring_func", "sigmoid", "transformers' MiniMax-M3 router"));
    TRY(mt_cfg_bool(r, root, "use_routing_bias", true, &on));
    if (!on)
        return mt_cfg_fail(r, "key \"use_routing_bias\": false is not supported (transformers' "
                              "MiniMax-M3 always chooses with e_score_correction_bias)");
    /* transformers computes the clamp-SwiGLU whatever hidden_act says (it rewrites it to silu) */
    cfg->act_swigluoai = true;
    TRY(mt_cfg_float(r, root, "swiglu_alpha", 1.702, &cfg->swiglu_alpha));
    TRY(mt_cfg_float(r, root, "swiglu_limit", 7.0, &cfg->swiglu_limit));
    TRY(mt_cfg_float(r, root, "swiglu_beta", 1.0, &cfg->swiglu_beta));
    if (cfg->swiglu_beta != 1.0f)
        return mt_cfg_fail(r,
                           "key \"swiglu_beta\": %g is not supported (transformers adds 1.0 to "
                           "the up projection whatever this key says)",
                           (double)cfg->swiglu_beta);
    if (!(cfg->swiglu_limit > 0) || !(cfg->swiglu_alpha > 0))
        return mt_cfg_fail(r, "key \"swiglu_alpha\"/\"swiglu_limit\": must be positive");
    TRY(mt_cfg_float(r, root, "routed_scaling_factor", 2.0, &cfg->routed_scaling_factor));
    TRY(mt_cfg_int(r, root, "dense_intermediate_size", 12288, &cfg->dense_intermediate_size));
    TRY(mt_cfg_int(r, root, "shared_intermediate_size", 3072, &cfg->shared_intermediate_size));
    TRY(mt_cfg_int(r, root, "n_shared_experts", 1, &cfg->n_shared_experts));
    if (cfg->n_shared_experts != 1)
        return mt_cfg_fail(r,
                           "key \"n_shared_experts\": %d is not supported (transformers builds "
                           "one shared expert of shared_intermediate_size: 1)",
                           cfg->n_shared_experts);
    if (cfg->dense_intermediate_size <= 0 || cfg->shared_intermediate_size <= 0)
        return mt_cfg_fail(r, "key \"dense_intermediate_size\"/\"shared_intermediate_size\": must "
                              "be positive");
    for (int l = 0; l < L; l++) cfg->layer_moe[l] = true;
    const cJSON *mf = mt_cfg_get(root, "moe_layer_freq");
    if (mf) TRY(m3_layer_list(r, mf, "moe_layer_freq", NULL, NULL, L, cfg->layer_moe));
    const cJSON *mt = mt_cfg_get(root, "mlp_layer_types");
    if (mt) TRY(m3_layer_list(r, mt, "mlp_layer_types", "sparse", "dense", L, cfg->layer_moe));
    TRY(m3_read_sparse(r, root, cfg));
    TRY(mt_cfg_int(r, root, "num_mtp_modules", 0, &cfg->num_mtp_modules));
    TRY(mt_cfg_int(r, root, "num_nextn_predict_layers", 0, &cfg->mtp_transformer_layers));
    cfg->block_size = 1; /* no lightning layer: unused */
    return true;
}

static bool m3_check(mt_cfg_reader *r, const cJSON *root, mt_minimax_config *cfg) {
    /* transformers' MiniMax-M3 reads neither (its attention masks are causal, its MoE block
     * has no jitter): a value would silently differ from it */
    if (cfg->sliding_window > 0)
        return mt_cfg_fail(r,
                           "key \"sliding_window\": %d is not supported for MiniMax-M3 "
                           "(transformers' MiniMax-M3 has no sliding window, softmax or MSA "
                           "layers); use null",
                           cfg->sliding_window);
    if (cfg->router_jitter_noise > 0)
        return mt_cfg_fail(r,
                           "key \"router_jitter_noise\": %g is not supported for MiniMax-M3 "
                           "(transformers' MiniMax-M3 MoE block applies no jitter); use 0",
                           (double)cfg->router_jitter_noise);
    bool any_msa = false;
    for (int l = 0; l < cfg->num_hidden_layers; l++) any_msa = any_msa || cfg->layer_msa[l];
    if (any_msa) {
        if (cfg->msa_index_heads != cfg->num_key_value_heads)
            return mt_cfg_fail(r,
                               "key \"index_n_heads\" (sparse_num_index_heads): %d must equal "
                               "num_key_value_heads %d (index head h selects the blocks of KV "
                               "group h)",
                               cfg->msa_index_heads, cfg->num_key_value_heads);
        if (cfg->msa_index_dim <= 0 || cfg->msa_block <= 0 || cfg->msa_topk <= 0 ||
            cfg->msa_local_blocks < 0)
            return mt_cfg_fail(r, "key \"index_head_dim\"/\"index_block_size\"/"
                                  "\"index_topk_blocks\"/\"index_local_blocks\": must be positive");
    }
    if (cfg->num_mtp_modules > 0)
        fprintf(stderr,
                "config: %s: %d multi-token-prediction modules (num_mtp_modules, "
                "num_nextn_predict_layers %d) are not built; their tensors, if any, are carried "
                "into exports\n",
                r->path, cfg->num_mtp_modules, cfg->mtp_transformer_layers);
    return true;
}

/* A VL config: the text model is text_config; everything else is kept for the save. */
static bool m3_text_root(mt_cfg_reader *r, const cJSON *root, const cJSON **text,
                         mt_minimax_config *cfg) {
    cfg->vl_config[0] = 0;
    if (strcmp(cfg->model_type, "minimax_m3_vl") != 0) return true;
    const cJSON *t = mt_cfg_get(root, "text_config");
    if (!t || !cJSON_IsObject(t))
        return mt_cfg_fail(r, "key \"text_config\": a minimax_m3_vl config needs the text model's "
                              "config object");
    bool tie = false;
    TRY(mt_cfg_bool(r, root, "tie_word_embeddings", false, &tie));
    if (tie)
        return mt_cfg_fail(r, "key \"tie_word_embeddings\": tied embeddings are not supported "
                              "(MiniMax models have an untied lm_head)");
    if (!r->text || r->len >= sizeof(cfg->vl_config) || memchr(r->text, 0, r->len))
        return mt_cfg_fail(r, "a VL config.json of more than %zu bytes is not supported",
                           sizeof(cfg->vl_config) - 1);
    memcpy(cfg->vl_config, r->text, r->len);
    cfg->vl_config[r->len] = 0;
    *text = t;
    return true;
}

static cJSON *m3_int_list(const mt_minimax_config *cfg, const bool *v) {
    cJSON *a = cJSON_CreateArray();
    for (int l = 0; l < cfg->num_hidden_layers; l++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber(v[l]));
    return a;
}

static cJSON *m3_str_list(const mt_minimax_config *cfg, const bool *v, const char *a,
                          const char *b) {
    cJSON *o = cJSON_CreateArray();
    for (int l = 0; l < cfg->num_hidden_layers; l++)
        cJSON_AddItemToArray(o, cJSON_CreateString(v[l] ? a : b));
    return o;
}

/* The text model's keys: transformers' schema with the release's beside it (the same values),
 * so that the export loads in transformers and in the release's own code alike. */
static void m3_save_text(const mt_minimax_config *cfg, cJSON *o) {
    mt_cfg_save_common(cfg, o,
                       cfg->vl_config[0] ? "MiniMaxM3SparseForCausalLM" : "MiniMaxM3VLForCausalLM",
                       "minimax_m3_vl_text");
    cJSON_ReplaceItemInObjectCaseSensitive(o, "hidden_act", cJSON_CreateString("swigluoai"));
    cJSON *rp = cJSON_CreateObject();
    cJSON_AddStringToObject(rp, "rope_type", "default");
    cJSON_AddItemToObject(rp, "rope_theta", mt_cfg_json_float(cfg->rope_theta));
    cJSON_AddItemToObject(rp, "partial_rotary_factor",
                          mt_cfg_json_float((float)cfg->rotary_dim / (float)cfg->head_dim));
    cJSON_AddItemToObject(o, "rope_parameters", rp);
    cJSON_AddItemToObject(o, "rope_theta", mt_cfg_json_float(cfg->rope_theta));
    cJSON_AddNumberToObject(o, "rotary_dim", cfg->rotary_dim);
    cJSON_AddBoolToObject(o, "use_gemma_norm", true);
    cJSON_AddBoolToObject(o, "use_qk_norm", true);
    cJSON_AddStringToObject(o, "qk_norm_type", "per_head");
    cJSON_AddBoolToObject(o, "attention_output_gate", false);
    cJSON_AddItemToObject(o, "swiglu_alpha", mt_cfg_json_float(cfg->swiglu_alpha));
    cJSON_AddItemToObject(o, "swiglu_limit", mt_cfg_json_float(cfg->swiglu_limit));
    cJSON_AddItemToObject(o, "swiglu_beta", mt_cfg_json_float(cfg->swiglu_beta));
    cJSON_AddNumberToObject(o, "dense_intermediate_size", cfg->dense_intermediate_size);
    cJSON_AddNumberToObject(o, "shared_intermediate_size", cfg->shared_intermediate_size);
    cJSON_AddNumberToObject(o, "n_shared_experts", cfg->n_shared_experts);
    cJSON_AddStringToObject(o, "scoring_func", "sigmoid");
    cJSON_AddBoolToObject(o, "use_routing_bias", true);
    cJSON_AddItemToObject(o, "routed_scaling_factor",
                          mt_cfg_json_float(cfg->routed_scaling_factor));
    cJSON_AddItemToObject(o, "mlp_layer_types",
                          m3_str_list(cfg, cfg->layer_moe, "sparse", "dense"));
    cJSON_AddItemToObject(o, "moe_layer_freq", m3_int_list(cfg, cfg->layer_moe));
    cJSON_AddItemToObject(o, "layer_types",
                          m3_str_list(cfg, cfg->layer_msa, "minimax_m3_sparse", "full_attention"));
    cJSON_AddNumberToObject(o, "index_n_heads", cfg->msa_index_heads);
    cJSON_AddNumberToObject(o, "index_head_dim", cfg->msa_index_dim);
    cJSON_AddNumberToObject(o, "index_block_size", cfg->msa_block);
    cJSON_AddNumberToObject(o, "index_topk_blocks", cfg->msa_topk);
    cJSON_AddNumberToObject(o, "index_local_blocks", cfg->msa_local_blocks);
    cJSON *sc = cJSON_CreateObject();
    bool any = false;
    for (int l = 0; l < cfg->num_hidden_layers; l++) any = any || cfg->layer_msa[l];
    cJSON_AddBoolToObject(sc, "use_sparse_attention", any);
    cJSON_AddNumberToObject(sc, "sparse_num_index_heads", cfg->msa_index_heads);
    cJSON_AddNumberToObject(sc, "sparse_index_dim", cfg->msa_index_dim);
    cJSON_AddNumberToObject(sc, "sparse_block_size", cfg->msa_block);
    cJSON_AddNumberToObject(sc, "sparse_topk_blocks", cfg->msa_topk);
    cJSON_AddNumberToObject(sc, "sparse_init_block", 0);
    cJSON_AddNumberToObject(sc, "sparse_local_block", cfg->msa_local_blocks);
    cJSON_AddStringToObject(sc, "sparse_score_type", "max");
    cJSON_AddItemToObject(sc, "sparse_attention_freq", m3_int_list(cfg, cfg->layer_msa));
    cJSON_AddItemToObject(sc, "sparse_disable_index_value", m3_int_list(cfg, cfg->layer_msa));
    cJSON_AddItemToObject(o, "sparse_attention_config", sc);
    cJSON_AddNumberToObject(o, "num_mtp_modules", cfg->num_mtp_modules);
    cJSON_AddNumberToObject(o, "num_nextn_predict_layers", cfg->mtp_transformer_layers);
}

/* The end of the JSON value at s (a well-formed file: cJSON parsed it), whitespace before it
 * skipped into *start. */
static const char *m3_json_value_end(const char *s, const char **start) {
    while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r') s++;
    *start = s;
    int depth = 0;
    bool str = false;
    for (; *s; s++) {
        if (str) {
            if (*s == '\\' && s[1])
                s++;
            else if (*s == '"') {
                str = false;
                if (depth == 0) return s + 1;
            }
        } else if (*s == '"') {
            str = true;
        } else if (*s == '{' || *s == '[') {
            depth++;
        } else if (*s == '}' || *s == ']') {
            if (depth == 0) return s; /* a scalar ends at its object's end */
            if (--depth == 0) return s + 1;
        } else if (depth == 0 &&
                   (*s == ',' || *s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')) {
            return s;
        }
    }
    return s;
}

/* A VL model: every top-level key of the file as read, verbatim (raw JSON text), text_config
 * the text model's. */
static void m3_save(const mt_minimax_config *cfg, cJSON *o, bool original) {
    (void)original;
    if (!cfg->vl_config[0]) {
        m3_save_text(cfg, o);
        return;
    }
    const char *s = strchr(cfg->vl_config, '{');
    MT_CHECK(s, "config: the kept VL config is not an object");
    s++;
    for (;;) {
        const char *k0, *k1 = m3_json_value_end(s, &k0);
        if (*k0 != '"') break; /* the closing brace */
        const char *v0, *v1 = m3_json_value_end(strchr(k1, ':') + 1, &v0);
        char key[128], *raw = mt_malloc((size_t)(v1 - v0) + 1, "VL config value");
        snprintf(key, sizeof(key), "%.*s", (int)(k1 - k0 - 2), k0 + 1);
        memcpy(raw, v0, (size_t)(v1 - v0));
        raw[v1 - v0] = 0;
        if (strcmp(key, "text_config") == 0) {
            cJSON *t = cJSON_CreateObject();
            m3_save_text(cfg, t);
            cJSON_AddItemToObject(o, "text_config", t);
        } else {
            cJSON_AddItemToObject(o, key, cJSON_CreateRaw(raw));
        }
        free(raw);
        s = v1;
        while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r') s++;
        if (*s != ',') break;
        s++;
    }
}

/* Gemma norms, per-head QK norm, partial RoPE, plain residuals; MSA or dense softmax attention
 * and the clamp-SwiGLU dense MLP or the sigmoid-routed MoE with its shared expert, per layer. */
static void m3_plan(const mt_minimax_config *cfg, int l, mt_layer_plan *p) {
    p->mixer = cfg->layer_msa[l] ? MT_MIXER_MSA : MT_MIXER_SOFTMAX;
    p->qk_norm = MT_QK_NORM_HEAD;
    p->norm = MT_NORM_GEMMA;
    p->residual = MT_RESIDUAL_PLAIN;
    p->mix_alpha = p->mix_beta = p->mlp_alpha = p->mlp_beta = 1.0f;
    p->act = MT_ACT_SWIGLUOAI;
    p->act_alpha = cfg->swiglu_alpha;
    p->act_limit = cfg->swiglu_limit;
    p->act_beta = cfg->swiglu_beta;
    if (!cfg->layer_moe[l]) {
        p->mlp = MT_MLP_DENSE;
        p->expert_ffn = cfg->dense_intermediate_size;
        return;
    }
    p->mlp = MT_MLP_MOE;
    p->router = MT_ROUTER_SIGMOID;
    p->router_bias = true;
    p->routed_scale = cfg->routed_scaling_factor;
    p->n_experts = cfg->num_local_experts;
    p->top_k = cfg->num_experts_per_tok;
    p->expert_ffn = cfg->intermediate_size;
    p->shared_ffn = (int64_t)cfg->shared_intermediate_size * cfg->n_shared_experts;
}

/* Multi-token prediction (an "mtp" name component) and, in a VL checkpoint, the vision
 * tower, projector and patch-merge MLP (every tensor outside "language_model."): carried into
 * exports unchanged. */
static mt_extra_kind m3_extra(const mt_minimax_config *cfg, const char *name, int *layer,
                              const char **what) {
    *layer = -1;
    if (strstr(name, "rotary_emb.inv_freq")) {
        *what = "inv_freq";
        return MT_EXTRA_DERIVED;
    }
    if (strncmp(name, "mtp.", 4) == 0 || strstr(name, ".mtp.") || strstr(name, ".mtp_")) {
        *what = "mtp";
        return MT_EXTRA_CARRIED;
    }
    static const char *const vision[] = {"vision_tower.", "multi_modal_projector.",
                                         "patch_merge_mlp.", "model.vision_tower.",
                                         "model.multi_modal_projector."};
    for (size_t i = 0; cfg->vl_config[0] && i < sizeof(vision) / sizeof(vision[0]); i++)
        if (strncmp(name, vision[i], strlen(vision[i])) == 0) {
            *what = "vision";
            return MT_EXTRA_CARRIED;
        }
    return MT_EXTRA_UNEXPECTED;
}

/* A VL checkpoint keeps its layout (transformers converts the released names on load); the text
 * model alone is written in transformers' MiniMaxM3VLForCausalLM names. */
static int m3_export_naming(const mt_minimax_config *cfg, int loaded) {
    return cfg->vl_config[0] ? loaded : MT_NAMING_HF_V5;
}

static bool m3_matches(const char *model_type, bool *original) {
    *original = strcmp(model_type, "minimax_m3") == 0;
    return strcmp(model_type, "minimax_m3_vl") == 0 ||
           strcmp(model_type, "minimax_m3_vl_text") == 0 || *original;
}

static bool m3_arch_ok(const char *arch, bool original) {
    (void)original;
    return strcmp(arch, "MiniMaxM3SparseForConditionalGeneration") == 0 ||
           strcmp(arch, "MiniMaxM3VLForCausalLM") == 0 ||
           strcmp(arch, "MiniMaxM3SparseForCausalLM") == 0;
}

const mt_family mt_family_m3 = {
    .id = "m3",
    .name = "MiniMax-M3",
    .matches = m3_matches,
    .arch_ok = m3_arch_ok,
    .arch_expected = "MiniMaxM3SparseForConditionalGeneration (VL), MiniMaxM3VLForCausalLM or "
                     "MiniMaxM3SparseForCausalLM (text)",
    .text_root = m3_text_root,
    .parse = m3_parse,
    .check = m3_check,
    .save = m3_save,
    .plan = m3_plan,
    .extra = m3_extra,
    .v5_router_bias = "model.layers.%d.mlp.gate.e_score_correction_bias",
    .export_naming = m3_export_naming,
    .reply_format = "minimax_m3",
};
