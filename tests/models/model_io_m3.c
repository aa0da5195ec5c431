/* model_io_m3.c: MiniMax-M3's config.json schemas and VL checkpoints (cases of test_model_io,
 * see model_io.c): the release's text keys, transformers' flat keys and the VL config read as
 * the same model and plan; every variant transformers does not build refused by key; the
 * export of a VL checkpoint: config.json as the VL config (the vision keys kept), the vision
 * tensors carried byte for byte, the shared expert written in its separate form, and the
 * export reloading to the same parameters. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/harness.h"
#include "model_io.h"
#include "models/minimax.h"
#include "models/safetensors.h"
#include "models/weights.h"

#define SPARSE_CFG_BODY(init, score, dv)                                                           \
    "{\"use_sparse_attention\": true, \"sparse_index_dim\": 16, \"sparse_num_index_heads\": 2,"    \
    " \"sparse_block_size\": 4, \"sparse_topk_blocks\": 3, \"sparse_init_block\": " init ","       \
    " \"sparse_local_block\": 1, \"sparse_score_type\": " score ","                                \
    " \"sparse_attention_freq\": [0, 1, 0, 1], \"sparse_disable_index_value\": " dv "}"
#define SPARSE_CFG SPARSE_CFG_BODY("0", "\"max\"", "[0, 1, 0, 1]")

/* Spec section 10's tiny M3 in the release's text schema (model_type minimax_m3). */
static const char *TINY_M3 =
    "{\"model_type\": \"minimax_m3\", \"architectures\": [\"MiniMaxM3SparseForCausalLM\"],"
    " \"vocab_size\": 256, \"hidden_size\": 64, \"num_hidden_layers\": 4,"
    " \"num_attention_heads\": 8, \"num_key_value_heads\": 2, \"head_dim\": 16,"
    " \"rotary_dim\": 8, \"partial_rotary_factor\": 0.5, \"rope_theta\": 5000000,"
    " \"rms_norm_eps\": 1e-6, \"use_gemma_norm\": true, \"use_qk_norm\": true,"
    " \"qk_norm_type\": \"per_head\", \"attention_output_gate\": false,"
    " \"tie_word_embeddings\": false, \"hidden_act\": \"swigluoai\", \"swiglu_alpha\": 1.702,"
    " \"swiglu_limit\": 7.0, \"swiglu_beta\": 1.0, \"dense_intermediate_size\": 96,"
    " \"intermediate_size\": 32, \"shared_intermediate_size\": 32, \"n_shared_experts\": 1,"
    " \"num_local_experts\": 8, \"num_experts_per_tok\": 2, \"scoring_func\": \"sigmoid\","
    " \"use_routing_bias\": true, \"routed_scaling_factor\": 2.0, \"moe_layer_freq\": [0, 0, 1, 1],"
    " \"num_mtp_modules\": 0, \"sparse_attention_config\": " SPARSE_CFG "}";

static const char *src_dir(void) { return getenv("MT_SOURCE_DIR") ? getenv("MT_SOURCE_DIR") : "."; }

static bool m3_same(const mt_minimax_config *a, const mt_minimax_config *b) {
    bool same = a->family == b->family && a->hidden_size == b->hidden_size &&
                a->num_hidden_layers == b->num_hidden_layers && a->head_dim == b->head_dim &&
                a->rotary_dim == b->rotary_dim && a->msa_index_heads == b->msa_index_heads &&
                a->msa_index_dim == b->msa_index_dim && a->msa_block == b->msa_block &&
                a->msa_topk == b->msa_topk && a->msa_local_blocks == b->msa_local_blocks;
    for (int l = 0; same && l < a->num_hidden_layers; l++) {
        mt_layer_plan pa, pb;
        mt_config_layer_plan(a, l, &pa);
        mt_config_layer_plan(b, l, &pb);
        same = memcmp(&pa, &pb, sizeof(pa)) == 0;
    }
    return same;
}

int test_config_m3(void) {
    write_text(tmp_path("orig.json"), TINY_M3);
    const mt_minimax_config o = parse_ok(tmp_path("orig.json"));
    EXPECT(o.family == &mt_family_m3 && o.rotary_dim == 8 && o.msa_index_heads == 2 &&
               o.msa_index_dim == 16 && o.msa_block == 4 && o.msa_topk == 3 &&
               o.msa_local_blocks == 1 && o.dense_intermediate_size == 96 &&
               o.shared_intermediate_size == 32,
           "the release's text schema");
    mt_layer_plan p[4];
    for (int l = 0; l < 4; l++) mt_config_layer_plan(&o, l, &p[l]);
    EXPECT(p[0].mixer == MT_MIXER_SOFTMAX && p[1].mixer == MT_MIXER_MSA &&
               p[2].mixer == MT_MIXER_SOFTMAX && p[3].mixer == MT_MIXER_MSA,
           "sparse_attention_freq [0, 1, 0, 1]");
    EXPECT(p[0].mlp == MT_MLP_DENSE && p[0].expert_ffn == 96 && p[0].n_experts == 0 &&
               p[0].shared_ffn == 0 && p[3].mlp == MT_MLP_MOE && p[3].expert_ffn == 32 &&
               p[3].shared_ffn == 32 && p[3].routed_scale == 2.0f && p[3].router_bias &&
               p[3].router == MT_ROUTER_SIGMOID,
           "moe_layer_freq [0, 0, 1, 1], the shared expert, routed_scaling_factor 2");
    for (int l = 0; l < 4; l++)
        EXPECT(p[l].norm == MT_NORM_GEMMA && p[l].qk_norm == MT_QK_NORM_HEAD &&
                   p[l].residual == MT_RESIDUAL_PLAIN && p[l].act == MT_ACT_SWIGLUOAI &&
                   p[l].act_alpha == 1.702f && p[l].act_limit == 7.0f && p[l].act_beta == 1.0f,
               "layer %d: Gemma norms, per-head QK norm, plain residual, swigluoai", l);

    /* transformers' flat keys (layer_types, mlp_layer_types, index_*) and the VL config
     * transformers saved (tests/fixtures/models/tiny_m3) read as the same model */
    char path[1200];
    snprintf(path, sizeof(path), "%s/tests/fixtures/models/tiny_m3/config.json", src_dir());
    mt_minimax_config vl = parse_ok(path);
    EXPECT(vl.vl_config[0] && strstr(vl.vl_config, "vision_config"),
           "the VL config.json is kept for the export");
    vl.vocab_size = o.vocab_size;
    EXPECT(m3_same(&o, &vl), "the VL config's text model is the release's text config's");

    /* saved and read back (the text schema with the release's keys beside transformers') */
    const char *saved = tmp_path("saved.json");
    mt_minimax_config_save_json(&o, saved, MT_NAMING_HF_V4);
    const mt_minimax_config back = parse_ok(saved);
    EXPECT(m3_same(&o, &back), "saved and read back: the same model");
    snprintf(path, sizeof(path), "%s/recipes/configs/minimax-m3.json", src_dir());
    const mt_minimax_config rel = parse_ok(path);
    EXPECT(rel.num_hidden_layers == 60 && rel.num_mtp_modules == 7 && rel.msa_topk == 16 &&
               rel.msa_block == 128,
           "the released text config");

    /* what transformers does not build, refused by key */
    const char *R = TINY_M3;
    expect_reject("r1.json", R, "sparse_attention_config",
                  SPARSE_CFG_BODY("1", "\"max\"", "[0, 1, 0, 1]"), "sparse_init_block");
    expect_reject("r2.json", R, "sparse_attention_config",
                  SPARSE_CFG_BODY("0", "\"mean\"", "[0, 1, 0, 1]"), "sparse_score_type");
    expect_reject("r3.json", R, "sparse_attention_config",
                  SPARSE_CFG_BODY("0", "\"max\"", "[0, 0, 0, 1]"), "index_v/index_o");
    expect_reject("r4.json", R, "swiglu_beta", "2.0", "swiglu_beta");
    expect_reject("r5.json", R, "n_shared_experts", "2", "n_shared_experts");
    expect_reject("r6.json", R, "num_key_value_heads", "4", "num_key_value_heads");
    expect_reject("r7.json", R, "rotary_dim", "16", "rotary_dim");
    /* transformers' M3 has no sliding window and no router jitter */
    expect_reject("r8.json", R, "sliding_window", "4", "\"sliding_window\": 4 is not supported");
    expect_reject("r9.json", R, "router_jitter_noise", "0.1", "\"router_jitter_noise\": 0.1");
    expect_reject("r8.json", R, "use_gemma_norm", "false", "use_gemma_norm");
    expect_reject("r9.json", R, "qk_norm_type", "\"per_layer\"", "qk_norm_type");
    expect_reject("r10.json", R, "attention_output_gate", "true", "attention_output_gate");
    expect_reject("r11.json", R, "moe_layer_freq", "[0, 1]", "moe_layer_freq");
    expect_reject("r12.json", R, "quantization_config", "{\"quant_method\": \"mxfp8\"}",
                  "\"mxfp8\" is not supported");
    expect_reject("r13.json", R, "hidden_act", "\"gelu\"", "hidden_act");
    tmp_cleanup();
    return MT_TEST_OK;
}

static float *m3_bucket(const mt_minimax *m, int b) {
    for (int p = 0; p < m->n_params; p++)
        if (m->info[p].bucket == b) return (float *)m->params[p].data - m->info[p].offset;
    return NULL;
}

static void m3_model_new(mt_minimax *m, const mt_minimax_config *cfg) {
    mt_minimax_init_unit(m, cfg, MT_GATHER_EXPERT);
    for (int b = 0; b < m->n_buckets; b++)
        mt_minimax_bind_bucket(m, b, calloc((size_t)m->bucket_numel[b], sizeof(float)), NULL);
}

static void m3_model_free(mt_minimax *m) {
    for (int b = 0; b < m->n_buckets; b++) free(m3_bucket(m, b));
    mt_minimax_free(m);
}

/* The packed-shared VL fixture exported: VL config.json, the vision tensors byte for byte, the
 * shared expert in its separate form, and the export reloads to the same buckets. */
int test_weights_export_m3(void) {
    char src[1024];
    snprintf(src, sizeof(src), "%s/tests/fixtures/models/tiny_m3_packed_shared", src_dir());
    mt_minimax_config cfg;
    mt_minimax_config_load(src, &cfg);
    mt_minimax m, e;
    m3_model_new(&m, &cfg);
    const mt_naming naming = mt_weights_load(src, &m);
    mt_weights_reader *r = mt_weights_open(src, &m);
    char what[512];
    mt_weights_describe(r, what, sizeof(what));
    printf("  source: %s\n", what);
    EXPECT(strstr(what, "vision tensors"), "the vision tensors are counted: %s", what);
    mt_weights_close(r);
    const char *dir = tmp_path("m3-export");
    mt_weights_writer *w = mt_weights_writer_open(dir, &m, naming, MT_F32, 0);
    mt_weights_writer_carry(w, src);
    for (int b = 0; b < m.n_buckets; b++) mt_weights_writer_add_bucket(w, b, m3_bucket(&m, b));
    mt_weights_writer_close(w);

    char path[1200], text[16384] = "";
    snprintf(path, sizeof(path), "%s/config.json", dir);
    FILE *f = fopen(path, "r");
    EXPECT(f, "no %s", path);
    if (f) text[fread(text, 1, sizeof(text) - 1, f)] = 0, fclose(f);
    /* the vision keys verbatim: transformers' strict config wants 0.0, not 0 */
    EXPECT(strstr(text, "\"attention_dropout\": 0.0") && strstr(text, "\"layer_norm_eps\": 1e-05"),
           "the vision config's numbers are written as read:\n%s", text);
    EXPECT(strstr(text, "\"model_type\":\t\"minimax_m3_vl\"") && strstr(text, "\"text_config\"") &&
               strstr(text, "\"minimax_m3_vl_vision\"") &&
               strstr(text, "\"projector_hidden_size\""),
           "exported config.json is the VL config with its vision keys:\n%s", text);
    mt_safetensors *in = mt_safetensors_open(src), *out = mt_safetensors_open(dir);
    int vision = 0;
    for (int i = 0; i < mt_safetensors_count(in); i++) {
        const mt_st_tensor *a = mt_safetensors_tensor(in, i);
        if (strncmp(a->name, "language_model.", 15) == 0) continue;
        const mt_st_tensor *b = mt_safetensors_find(out, a->name);
        EXPECT(b && b->numel == a->numel && strcmp(a->dtype_name, b->dtype_name) == 0,
               "export lacks %s or changed it", a->name);
        if (!b) continue;
        float *va = malloc(sizeof(float) * (size_t)a->numel),
              *vb = malloc(sizeof(float) * (size_t)a->numel);
        mt_safetensors_read(in, a, 0, a->numel, va);
        mt_safetensors_read(out, b, 0, b->numel, vb);
        EXPECT(memcmp(va, vb, sizeof(float) * (size_t)a->numel) == 0, "%s changed", a->name);
        free(va);
        free(vb);
        vision++;
    }
    const int E = cfg.num_local_experts;
    char name[200];
    snprintf(name, sizeof(name),
             "language_model.model.layers.1.block_sparse_moe.experts.%d.w1.weight", E);
    EXPECT(
        mt_safetensors_find(in, name) && !mt_safetensors_find(out, name) &&
            mt_safetensors_find(
                out,
                "language_model.model.layers.1.block_sparse_moe.shared_experts.gate_proj.weight") &&
            mt_safetensors_find(out, "language_model.lm_head.weight"),
        "the shared expert: packed in the source, separate (and prefixed) in the export");
    printf("  %d vision tensors carried byte for byte\n", vision);
    EXPECT(vision >= 2, "%d vision tensors", vision);
    mt_safetensors_close(in);
    mt_safetensors_close(out);
    mt_minimax_config ecfg;
    mt_minimax_config_load(dir, &ecfg);
    m3_model_new(&e, &ecfg);
    mt_weights_load(dir, &e);
    bool same = e.n_buckets == m.n_buckets;
    for (int b = 0; same && b < m.n_buckets; b++)
        same = memcmp(m3_bucket(&m, b), m3_bucket(&e, b),
                      sizeof(float) * (size_t)m.bucket_numel[b]) == 0;
    EXPECT(same, "the export reloads to the same parameters");
    m3_model_free(&e);
    m3_model_free(&m);
    tmp_cleanup();
    return MT_TEST_OK;
}

/* Parameter `name` whole (every vocabulary part at its rows), malloc'ed. */
static float *m3_whole(const mt_minimax *m, const char *name) {
    float *x = NULL;
    for (int p = 0; p < m->n_params; p++) {
        const mt_param_info *in = &m->info[p];
        if (strcmp(in->name, name) != 0) continue;
        if (!x) x = calloc((size_t)(in->src_shape0 * (in->numel / in->shape[0])), sizeof(float));
        memcpy(x + in->src_offset, m->params[p].data, sizeof(float) * (size_t)in->numel);
    }
    return x;
}

/* A text-only M3 (recipes/configs/tiny-m3.json, random) exported: transformers'
 * MiniMaxM3VLForCausalLM names (its name conversion is the VL layout's only), i.e. fused
 * experts, gate_up_proj of the dense MLP and the shared expert, the bias on mlp.gate, the
 * indexer under self_attn.indexer; it reloads to the same buckets, in both gather units. */
int test_weights_export_m3_text(void) {
    char src[1024];
    snprintf(src, sizeof(src), "%s/recipes/configs/tiny-m3.json", src_dir());
    mt_minimax_config cfg;
    mt_minimax_config_load(src, &cfg);
    mt_minimax m, e;
    m3_model_new(&m, &cfg);
    mt_weights_init_random(&m, 7);
    const char *dir = tmp_path("m3-text-export");
    mt_weights_save(dir, &m, MT_NAMING_HF_V4, MT_F32, 0);
    mt_safetensors *out = mt_safetensors_open(dir);
    static const char *const want[] = {
        "model.layers.0.mlp.gate_up_proj.weight",
        "model.layers.0.mlp.down_proj.weight",
        "model.layers.1.mlp.experts.gate_up_proj",
        "model.layers.1.mlp.experts.down_proj",
        "model.layers.1.mlp.gate.weight",
        "model.layers.1.mlp.gate.e_score_correction_bias",
        "model.layers.1.mlp.shared_experts.gate_up_proj.weight",
        "model.layers.1.mlp.shared_experts.down_proj.weight",
        "model.layers.1.self_attn.indexer.q_proj.weight",
        "model.layers.1.self_attn.indexer.k_norm.weight",
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        EXPECT(mt_safetensors_find(out, want[i]), "the export has no %s", want[i]);
    const mt_st_tensor *gu = mt_safetensors_find(out, "model.layers.0.mlp.gate_up_proj.weight");
    EXPECT(gu && gu->shape[0] == 2 * (int64_t)cfg.dense_intermediate_size &&
               gu->shape[1] == cfg.hidden_size,
           "gate_up_proj is (2F, C)");
    EXPECT(!mt_safetensors_find(out, "model.layers.1.block_sparse_moe.gate.weight") &&
               !mt_safetensors_find(out, "model.layers.1.self_attn.index_q_proj.weight"),
           "released names in a text-only export");
    printf("  %d tensors in transformers' MiniMaxM3VLForCausalLM names\n",
           mt_safetensors_count(out));
    mt_safetensors_close(out);
    for (int unit = 0; unit < 2; unit++) {
        mt_minimax_config ecfg;
        mt_minimax_config_load(dir, &ecfg);
        mt_minimax_init_unit(&e, &ecfg, unit ? MT_GATHER_EXPERT : MT_GATHER_LAYER);
        for (int b = 0; b < e.n_buckets; b++)
            mt_minimax_bind_bucket(&e, b, calloc((size_t)e.bucket_numel[b], sizeof(float)), NULL);
        EXPECT(mt_weights_load(dir, &e) == MT_NAMING_HF_V5, "the export reads as transformers-v5");
        int same = 0, names = 0;
        for (int p = 0; p < m.n_params; p++) {
            if (m.info[p].src_offset != 0) continue; /* a vocabulary part after the first */
            names++;
            float *x = m3_whole(&m, m.info[p].name), *y = m3_whole(&e, m.info[p].name);
            const int64_t n = m.info[p].src_shape0 * (m.info[p].numel / m.info[p].shape[0]);
            same += memcmp(x, y, sizeof(float) * (size_t)n) == 0;
            free(x);
            free(y);
        }
        EXPECT(same == names, "%d of %d tensors reload identically (gather unit %s)", same, names,
               unit ? "expert" : "layer");
        m3_model_free(&e);
    }
    m3_model_free(&m);
    tmp_cleanup();
    return MT_TEST_OK;
}
