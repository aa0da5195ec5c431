/* model_io_m2.c: MiniMax-M2's config.json schemas and FP8 checkpoints (cases of test_model_io,
 * see model_io.c): transformers' schema and the release's remote-code keys read as the same
 * model, the released config with its quantization_config, saving and reading back, every
 * unsupported value rejected by key, other quantisation schemes refused by name, and FP8
 * weights without their scales or without a quantization_config refused naming the tensor. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/harness.h"
#include "model_io.h"
#include "models/safetensors.h"
#include "models/weights.h"

/* tests/fixtures/models/tiny_m2's model in the release's remote-code schema. */
static const char *TINY_M2_REMOTE =
    "{\"architectures\": [\"MiniMaxM2ForCausalLM\"], \"model_type\": \"minimax_m2\","
    " \"vocab_size\": 260, \"hidden_size\": 64, \"intermediate_size\": 16,"
    " \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 2,"
    " \"head_dim\": 16, \"num_local_experts\": 8, \"num_experts_per_tok\": 2,"
    " \"rms_norm_eps\": 1e-06, \"initializer_range\": 0.125, \"max_position_embeddings\": 4096,"
    " \"rope_theta\": 5000000, \"rotary_dim\": 8, \"use_qk_norm\": true,"
    " \"qk_norm_type\": \"per_layer\", \"scoring_func\": \"sigmoid\", \"use_routing_bias\": true,"
    " \"shared_intermediate_size\": 0, \"attn_type_list\": [1, 1], \"use_mtp\": true,"
    " \"num_mtp_modules\": 3, \"mtp_transformer_layers\": 1, \"hidden_act\": \"silu\","
    " \"bos_token_id\": null, \"eos_token_id\": null, \"pad_token_id\": null,"
    " \"tie_word_embeddings\": false}";

static const char *FP8 = "{\"quant_method\": \"fp8\", \"fmt\": \"float8_e4m3fn\","
                         " \"activation_scheme\": \"dynamic\", \"weight_block_size\": [128, 128]}";

static const char *src_dir(void) { return getenv("MT_SOURCE_DIR") ? getenv("MT_SOURCE_DIR") : "."; }

static bool m2_same(const mt_minimax_config *a, const mt_minimax_config *b) {
    bool same = a->family == b->family && a->vocab_size == b->vocab_size &&
                a->hidden_size == b->hidden_size && a->intermediate_size == b->intermediate_size &&
                a->num_hidden_layers == b->num_hidden_layers &&
                a->num_attention_heads == b->num_attention_heads &&
                a->num_key_value_heads == b->num_key_value_heads && a->head_dim == b->head_dim &&
                a->num_local_experts == b->num_local_experts &&
                a->num_experts_per_tok == b->num_experts_per_tok &&
                a->rotary_dim == b->rotary_dim && a->rope_theta == b->rope_theta &&
                a->rms_norm_eps == b->rms_norm_eps && a->bos_token_id == b->bos_token_id &&
                a->eos_token_id == b->eos_token_id;
    for (int l = 0; same && l < a->num_hidden_layers; l++) {
        mt_layer_plan pa, pb;
        mt_config_layer_plan(a, l, &pa);
        mt_config_layer_plan(b, l, &pb);
        same = memcmp(&pa, &pb, sizeof(pa)) == 0;
    }
    return same;
}

int test_config_m2(void) {
    /* transformers' schema (the fixture transformers saved) and the remote code's keys */
    char path[1200];
    snprintf(path, sizeof(path), "%s/tests/fixtures/models/tiny_m2/config.json", src_dir());
    const mt_minimax_config hf = parse_ok(path);
    write_text(tmp_path("remote.json"), TINY_M2_REMOTE);
    const mt_minimax_config rc = parse_ok(tmp_path("remote.json"));
    EXPECT(m2_same(&hf, &rc) && rc.rotary_dim == 8 && rc.num_mtp_modules == 3,
           "the remote-code schema reads as transformers' (rotary_dim %d, mtp %d)", rc.rotary_dim,
           rc.num_mtp_modules);
    mt_layer_plan p;
    mt_config_layer_plan(&rc, 1, &p);
    EXPECT(p.mixer == MT_MIXER_SOFTMAX && p.qk_norm == MT_QK_NORM_WHOLE && p.norm == MT_NORM_RMS &&
               p.residual == MT_RESIDUAL_PLAIN && p.router == MT_ROUTER_SIGMOID && p.router_bias &&
               p.routed_scale == 1.0f && p.n_experts == 8 && p.top_k == 2,
           "the M2 plan");
    /* use_mtp false: no modules, whatever num_mtp_modules says */
    write_json_with(tmp_path("nomtp.json"), TINY_M2_REMOTE, "use_mtp", "false");
    EXPECT(parse_ok(tmp_path("nomtp.json")).num_mtp_modules == 0, "use_mtp false");

    /* the released config: FP8 with 128 x 128 blocks, three MTP modules */
    snprintf(path, sizeof(path), "%s/recipes/configs/minimax-m2.json", src_dir());
    const mt_minimax_config rel = parse_ok(path);
    EXPECT(rel.family == &mt_family_m2 && rel.fp8 && rel.fp8_block[0] == 128 &&
               rel.fp8_block[1] == 128 && rel.num_mtp_modules == 3 && rel.rotary_dim == 64 &&
               rel.rope_theta == 5e6f && rel.num_hidden_layers == 62 && rel.head_dim == 128,
           "released config values");

    /* saved and read back: the same model, both schemas' keys, no quantization_config */
    const char *saved = tmp_path("saved.json");
    mt_minimax_config_save_json(&rel, saved, MT_NAMING_HF_V4);
    const mt_minimax_config back = parse_ok(saved);
    EXPECT(m2_same(&rel, &back) && !back.fp8 && back.num_mtp_modules == 3,
           "the released config saved reads back as the same model, unquantised");
    FILE *f = fopen(saved, "r");
    char text[16384] = "";
    if (f) text[fread(text, 1, sizeof(text) - 1, f)] = 0, fclose(f);
    EXPECT(strstr(text, "\"rope_parameters\"") && strstr(text, "\"rotary_dim\":\t64") &&
               strstr(text, "\"partial_rotary_factor\":\t0.5") &&
               !strstr(text, "quantization_config"),
           "saved config: %s", text);

    /* every value transformers' minimax_m2 does not implement, rejected by key */
    const char *R = TINY_M2_REMOTE;
    expect_reject("m1.json", R, "use_qk_norm", "false", "use_qk_norm");
    expect_reject("m2.json", R, "qk_norm_type", "\"per_head\"", "qk_norm_type");
    expect_reject("m3.json", R, "scoring_func", "\"softmax\"", "scoring_func");
    expect_reject("m4.json", R, "use_routing_bias", "false", "use_routing_bias");
    expect_reject("m5.json", R, "routed_scaling_factor", "2.0", "routed_scaling_factor");
    expect_reject("m6.json", R, "shared_intermediate_size", "16", "shared_intermediate_size");
    expect_reject("m7.json", R, "attn_type_list", "[1, 0]", "attn_type_list");
    expect_reject("m8.json", R, "attn_type_list", "[1, 1, 1]", "attn_type_list");
    expect_reject("m9.json", R, "rope_parameters",
                  "{\"rope_type\": \"default\", \"rope_theta\": 5e6, "
                  "\"partial_rotary_factor\": 0.25}",
                  "rotary_dim");
    expect_reject("m10.json", R, "architectures", "[\"MiniMaxForCausalLM\"]", "architectures");
    /* transformers' M2 builds the plain causal mask whatever sliding_window says */
    expect_reject("m11.json", R, "sliding_window", "4", "transformers' MiniMax-M2 attends");
    expect_reject("m11.json", R, "num_mtp_modules", "-1", "num_mtp_modules");
    expect_reject("m12.json", R, "hidden_act", "\"gelu\"", "hidden_act");
    expect_reject("m13.json", R, "rotary_dim", "7", "rotary_dim");
    /* quantization: only the release's block-scaled FP8, other schemes refused by name */
    expect_reject("q1.json", R, "quantization_config", "{\"quant_method\": \"gptq\", \"bits\": 4}",
                  "\"gptq\" is not supported");
    expect_reject("q2.json", R, "quantization_config", "{\"quant_method\": \"awq\"}",
                  "\"awq\" is not supported");
    expect_reject("q3.json", R, "quantization_config",
                  "{\"quant_method\": \"fp8\", \"fmt\": \"float8_e5m2\", "
                  "\"weight_block_size\": [128, 128]}",
                  "quantization_config");
    expect_reject("q4.json", R, "quantization_config",
                  "{\"quant_method\": \"fp8\", \"fmt\": \"float8_e4m3fn\"}", "weight_block_size");
    expect_reject("q5.json", R, "quantization_config",
                  "{\"quant_method\": \"fp8\", \"fmt\": \"float8_e4m3fn\", "
                  "\"weight_block_size\": [128, 128], \"scale_fmt\": \"ue8m0\"}",
                  "scale_fmt");
    write_json_with(tmp_path("fp8.json"), R, "quantization_config", FP8);
    EXPECT(parse_ok(tmp_path("fp8.json")).fp8, "the release's quantization_config is read");
    tmp_cleanup();
    return MT_TEST_OK;
}

/* tiny_m2_fp8's tensors copied into dir (all but `skip`), with config.json text cfg. */
static void fp8_variant(const char *dir, const char *skip, const char *cfg) {
    char src[1200], path[1200];
    snprintf(src, sizeof(src), "%s/tests/fixtures/models/tiny_m2_fp8", src_dir());
    mt_safetensors *st = mt_safetensors_open(src);
    mt_safetensors_writer *w = mt_safetensors_writer_open(dir, 0);
    for (int i = 0; i < mt_safetensors_count(st); i++) {
        const mt_st_tensor *t = mt_safetensors_tensor(st, i);
        if (!skip || strcmp(t->name, skip) != 0) mt_safetensors_writer_copy(w, st, t);
    }
    mt_safetensors_writer_close(w);
    mt_safetensors_close(st);
    snprintf(path, sizeof(path), "%s/config.json", dir);
    write_text(path, cfg);
}

static void expect_weights_refused(const char *dir, const char *needle, const char *needle2) {
    mt_minimax_config cfg;
    mt_minimax_config_load(dir, &cfg);
    mt_minimax m;
    mt_minimax_init(&m, &cfg);
    char err[1024] = "";
    mt_weights_reader *r = mt_weights_try_open(dir, &m, err, sizeof(err));
    EXPECT(!r && strstr(err, needle) && strstr(err, needle2), "%s: \"%s\" should name %s, %s", dir,
           err, needle, needle2);
    mt_weights_close(r);
    mt_minimax_free(&m);
}

int test_weights_fp8_errors(void) {
    char path[1200], text[8192] = "";
    snprintf(path, sizeof(path), "%s/tests/fixtures/models/tiny_m2_fp8/config.json", src_dir());
    FILE *f = fopen(path, "r");
    EXPECT(f, "cannot read %s", path);
    if (f) text[fread(text, 1, sizeof(text) - 1, f)] = 0, fclose(f);
    /* a copy loads (the copy itself is byte for byte) */
    fp8_variant(tmp_path("copy"), NULL, text);
    mt_minimax_config cfg;
    mt_minimax_config_load(tmp_path("copy"), &cfg);
    mt_minimax m;
    mt_minimax_init(&m, &cfg);
    mt_weights_close(mt_weights_open(tmp_path("copy"), &m));
    mt_minimax_free(&m);
    /* an FP8 matrix without its block scales */
    fp8_variant(tmp_path("noscale"), "model.layers.1.self_attn.q_proj.weight_scale_inv", text);
    expect_weights_refused(tmp_path("noscale"), "model.layers.1.self_attn.q_proj.weight",
                           "no block scales");
    /* FP8 tensors under a config without a quantization_config */
    write_json_with(tmp_path("plain.json"), text, "quantization_config", NULL);
    FILE *g = fopen(tmp_path("plain.json"), "r");
    char plain[8192] = "";
    if (g) plain[fread(plain, 1, sizeof(plain) - 1, g)] = 0, fclose(g);
    fp8_variant(tmp_path("noquant"), NULL, plain);
    expect_weights_refused(tmp_path("noquant"), "F8_E4M3", "no fp8 quantization_config");
    tmp_cleanup();
    return MT_TEST_OK;
}
