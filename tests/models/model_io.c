/* model_io.c: config.json in both schemas, the parameter layout and decay, minimax-info's
 * counts; the shared helpers and the case table of test_model_io (safetensors and checkpoint
 * layouts are in model_io_files.c).
 *
 * References: transformers 5.24 (MiniMaxConfig defaults, get_slope_rate values, parameter
 * counts of MiniMaxForCausalLM built on the meta device), the PaddleFormers 1-layer count
 * (issue 3). Every file is written at test time into a temporary directory. */
#define _XOPEN_SOURCE 700
#include <cjson/cJSON.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/support/harness.h"
#include "model_io.h"
#include "models/config.h"
#include "models/minimax.h"
#include "models/weights.h"

/* ---- temporary files ---- */

static char tmp_root[512];

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

const char *tmp_dir(void) {
    if (!tmp_root[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(tmp_root, sizeof(tmp_root), "%s/mt_model_io_XXXXXX", base ? base : "/tmp");
        MT_CHECK(mkdtemp(tmp_root), "cannot create a temporary directory");
        atexit(tmp_cleanup); /* cases that return early leave none behind (twice: a no-op) */
    }
    return tmp_root;
}

void tmp_cleanup(void) {
    if (tmp_root[0]) nftw(tmp_root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    tmp_root[0] = 0;
}

const char *tmp_path(const char *name) {
    static char buf[8][1024];
    static int k = 0;
    char *p = buf[k++ % 8];
    snprintf(p, 1024, "%s/%s", tmp_dir(), name);
    return p;
}

void write_bytes(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    MT_CHECK(f, "cannot write %s", path);
    MT_CHECK(fwrite(data, 1, n, f) == n, "short write %s", path);
    fclose(f);
}

void write_text(const char *path, const char *text) { write_bytes(path, text, strlen(text)); }

/* base with key set to the JSON value raw (or removed when raw is NULL). */
void write_json_with(const char *path, const char *base, const char *key, const char *raw) {
    cJSON *o = cJSON_Parse(base);
    MT_CHECK(o, "test JSON does not parse");
    cJSON_DeleteItemFromObjectCaseSensitive(o, key);
    if (raw) {
        cJSON *v = cJSON_Parse(raw);
        MT_CHECK(v, "test value %s does not parse", raw);
        cJSON_AddItemToObject(o, key, v);
    }
    char *text = cJSON_Print(o);
    write_text(path, text);
    cJSON_free(text);
    cJSON_Delete(o);
}

/* ---- configs ---- */

const char *TINY_HF =
    "{\"architectures\": [\"MiniMaxForCausalLM\"], \"model_type\": \"minimax\","
    " \"vocab_size\": 96, \"hidden_size\": 32, \"intermediate_size\": 24,"
    " \"num_hidden_layers\": 4, \"num_attention_heads\": 4, \"num_key_value_heads\": 2,"
    " \"head_dim\": 16, \"num_local_experts\": 4, \"num_experts_per_tok\": 2, \"block_size\": 16,"
    " \"layer_types\": [\"linear_attention\", \"linear_attention\", \"linear_attention\","
    " \"full_attention\"],"
    " \"full_attn_alpha_factor\": 3.5565588200778455, \"full_attn_beta_factor\": 1.0,"
    " \"linear_attn_alpha_factor\": 3.5565588200778455, \"linear_attn_beta_factor\": 1.0,"
    " \"mlp_alpha_factor\": 3.5565588200778455, \"mlp_beta_factor\": 1.0,"
    " \"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 10000000.0,"
    " \"partial_rotary_factor\": 0.5},"
    " \"rms_norm_eps\": 1e-05, \"initializer_range\": 0.02, \"max_position_embeddings\": 8192,"
    " \"bos_token_id\": null, \"eos_token_id\": null, \"pad_token_id\": null,"
    " \"hidden_act\": \"silu\", \"tie_word_embeddings\": false, \"use_cache\": true}";

/* The same model as TINY_HF, v4.5x keys: top-level rope keys and the num_experts alias. */
static const char *TINY_HF_V4 =
    "{\"model_type\": \"minimax\", \"vocab_size\": 96, \"hidden_size\": 32,"
    " \"intermediate_size\": 24, \"num_hidden_layers\": 4, \"num_attention_heads\": 4,"
    " \"num_key_value_heads\": 2, \"head_dim\": 16, \"num_experts\": 4,"
    " \"num_experts_per_tok\": 2, \"block_size\": 16,"
    " \"layer_types\": [\"linear_attention\", \"linear_attention\", \"linear_attention\","
    " \"full_attention\"],"
    " \"full_attn_alpha_factor\": 3.5565588200778455, \"linear_attn_alpha_factor\": "
    "3.5565588200778455, \"mlp_alpha_factor\": 3.5565588200778455,"
    " \"rope_theta\": 10000000.0, \"partial_rotary_factor\": 0.5, \"max_position_embeddings\": "
    "8192,"
    " \"bos_token_id\": null, \"eos_token_id\": null}";

/* The same model in the original schema. */
static const char *TINY_ORIG =
    "{\"architectures\": [\"MiniMaxText01ForCausalLM\"], \"model_type\": \"minimax_text_01\","
    " \"vocab_size\": 96, \"hidden_size\": 32, \"intermediate_size\": 24,"
    " \"num_hidden_layers\": 4, \"num_attention_heads\": 4, \"num_key_value_heads\": 2,"
    " \"head_dim\": 16, \"num_local_experts\": 4, \"num_experts_per_tok\": 2, \"block_size\": 16,"
    " \"attn_type_list\": [0, 0, 0, 1],"
    " \"layernorm_full_attention_alpha\": 3.5565588200778455, \"layernorm_full_attention_beta\": "
    "1.0, \"layernorm_linear_attention_alpha\": 3.5565588200778455,"
    " \"layernorm_linear_attention_beta\": 1.0, \"layernorm_mlp_alpha\": 3.5565588200778455,"
    " \"layernorm_mlp_beta\": 1.0, \"rope_theta\": 10000000, \"rotary_dim\": 8,"
    " \"postnorm\": true, \"shared_intermediate_size\": 0, \"shared_moe_mode\": \"sigmoid\","
    " \"rms_norm_eps\": 1e-05, \"max_position_embeddings\": 8192, \"bos_token_id\": null,"
    " \"eos_token_id\": null, \"sliding_window\": null}";

mt_minimax_config parse_ok(const char *path) {
    mt_minimax_config cfg;
    char err[1024];
    bool ok = mt_minimax_config_parse(path, &cfg, err, sizeof(err));
    EXPECT(ok, "%s should parse: %s", path, err);
    return cfg;
}

/* Equal apart from the fields that record where the config came from. */
static bool same_model(mt_minimax_config a, mt_minimax_config b, bool same_slope) {
    memset(a.model_type, 0, sizeof(a.model_type));
    memset(b.model_type, 0, sizeof(b.model_type));
    a.original_schema = b.original_schema = false;
    if (!same_slope) a.slope_hf_denominator = b.slope_hf_denominator = false;
    return memcmp(&a, &b, sizeof(a)) == 0;
}

void expect_reject(const char *name, const char *base, const char *key, const char *raw,
                   const char *needle) {
    const char *path = tmp_path(name);
    write_json_with(path, base, key, raw);
    mt_minimax_config cfg;
    char err[1024] = "";
    bool ok = mt_minimax_config_parse(path, &cfg, err, sizeof(err));
    EXPECT(!ok, "%s (%s = %s) should be rejected", name, key, raw ? raw : "removed");
    EXPECT(strstr(err, needle) && strstr(err, path),
           "%s: message \"%s\" should name %s and the file", name, err, needle);
}

static int test_config_schemas(void) {
    write_text(tmp_path("hf.json"), TINY_HF);
    write_text(tmp_path("hf4.json"), TINY_HF_V4);
    write_text(tmp_path("orig.json"), TINY_ORIG);
    mt_minimax_config hf = parse_ok(tmp_path("hf.json")), hf4 = parse_ok(tmp_path("hf4.json"));
    mt_minimax_config orig = parse_ok(tmp_path("orig.json"));
    EXPECT(same_model(hf, hf4, true), "v5 and v4.5x keys of the same config differ");
    EXPECT(same_model(hf, orig, false), "the two schemas of the same config differ");
    /* slope denominator: schema default, overridable by key (spec 4.2) */
    EXPECT(hf.slope_hf_denominator && !orig.slope_hf_denominator, "slope variant by schema");
    write_json_with(tmp_path("hf_o.json"), TINY_HF, "lightning_slope_denominator", "\"original\"");
    mt_minimax_config hf_o = parse_ok(tmp_path("hf_o.json"));
    EXPECT(!hf_o.slope_hf_denominator && same_model(hf_o, orig, true), "slope key override");
    EXPECT(hf.num_hidden_layers == 4 && hf.layer_types[3] == MT_LAYER_FULL &&
               hf.layer_types[2] == MT_LAYER_LINEAR && hf.rotary_dim == 8 && hf.head_dim == 16 &&
               hf.rope_theta == 1e7f && hf.mlp_alpha == 3.5565588f && hf.block_size == 16 &&
               hf.bos_token_id == -1 && hf.num_local_experts == 4 &&
               hf.num_hidden_layers_source == 4,
           "tiny config values");

    /* Defaults: transformers' MiniMaxConfig() and the original MiniMaxText01Config(). */
    write_text(tmp_path("hf_def.json"), "{\"model_type\": \"minimax\"}");
    mt_minimax_config d = parse_ok(tmp_path("hf_def.json"));
    EXPECT(d.vocab_size == 32000 && d.hidden_size == 4096 && d.intermediate_size == 14336 &&
               d.num_hidden_layers == 32 && d.num_attention_heads == 32 &&
               d.num_key_value_heads == 8 && d.head_dim == 128 && d.rotary_dim == 128 &&
               d.num_local_experts == 8 && d.num_experts_per_tok == 2 && d.block_size == 256 &&
               d.rope_theta == 1e6f && d.rms_norm_eps == 1e-5f && d.bos_token_id == 1 &&
               d.eos_token_id == 2 && d.pad_token_id == -1 && d.mlp_alpha == 1 &&
               d.layer_types[0] == MT_LAYER_FULL && d.layer_types[1] == MT_LAYER_LINEAR &&
               d.layer_types[31] == MT_LAYER_LINEAR && d.slope_hf_denominator,
           "transformers defaults");
    char orig_def[512] = "{\"model_type\": \"minimax_text_01\", \"postnorm\": true, "
                         "\"attn_type_list\": [";
    for (int l = 0; l < 32; l++) strcat(orig_def, l ? ", 0" : "0");
    strcat(orig_def, "]}");
    write_text(tmp_path("orig_def.json"), orig_def);
    d = parse_ok(tmp_path("orig_def.json"));
    EXPECT(d.vocab_size == 32000 && d.hidden_size == 4096 && d.num_key_value_heads == 8 &&
               d.head_dim == 128 && d.rotary_dim == 128 && d.rope_theta == 1e6f &&
               d.block_size == 256 && d.bos_token_id == -1 && d.eos_token_id == -1 &&
               d.num_local_experts == 8 && !d.slope_hf_denominator,
           "original defaults");

    /* The released config (recipes/configs, original schema). */
    char released[1024];
    snprintf(released, sizeof(released), "%s/recipes/configs/minimax-text-01.json",
             getenv("MT_SOURCE_DIR") ? getenv("MT_SOURCE_DIR") : ".");
    mt_minimax_config rel = parse_ok(released);
    int n_full = 0;
    for (int l = 0; l < 80; l++) {
        n_full += rel.layer_types[l] == MT_LAYER_FULL;
        EXPECT(rel.layer_types[l] == ((l + 1) % 8 == 0 ? MT_LAYER_FULL : MT_LAYER_LINEAR),
               "released layer %d type", l);
    }
    EXPECT(n_full == 10 && rel.rotary_dim == 64 && rel.rope_theta == 1e7f &&
               rel.linear_attn_alpha == 3.5565588200778455f && rel.vocab_size == 200064 &&
               rel.num_local_experts == 32 && rel.intermediate_size == 9216,
           "released config values");

    /* Saving in either schema and reading back gives the same model. */
    for (int k = 0; k < 3; k++) {
        mt_naming naming = (mt_naming)k;
        const char *path = tmp_path("saved.json");
        mt_minimax_config_save_json(&hf, path, naming);
        mt_minimax_config back = parse_ok(path);
        EXPECT(same_model(hf, back, true), "config saved as %s reads back differently",
               mt_naming_name(naming));
        EXPECT(back.original_schema == (naming == MT_NAMING_ORIGINAL), "schema of saved config");
    }
    mt_minimax_config cut = rel;
    mt_minimax_config_keep_layers(&cut, 1);
    EXPECT(cut.num_hidden_layers == 1 && cut.num_hidden_layers_source == 80, "keep_layers");

    /* Rejections name the key (and the file). */
    expect_reject("b1.json", TINY_HF, "model_type", "\"llama\"", "model_type");
    expect_reject("b2.json", TINY_HF, "architectures", "[\"LlamaForCausalLM\"]", "architectures");
    expect_reject("b3.json", TINY_HF, "layer_types", "[\"linear_attention\", \"full_attention\"]",
                  "layer_types");
    expect_reject("b4.json", TINY_HF, "num_key_value_heads", "3", "num_key_value_heads");
    expect_reject("b5.json", TINY_ORIG, "rotary_dim", "7", "rotary_dim");
    expect_reject("b6.json", TINY_ORIG, "rotary_dim", "32", "rotary_dim");
    expect_reject("b7.json", TINY_HF, "num_experts_per_tok", "5", "num_experts_per_tok");
    expect_reject("b8.json", TINY_ORIG, "postnorm", "false", "postnorm");
    expect_reject("b9.json", TINY_ORIG, "postnorm", NULL, "postnorm");
    expect_reject("b10.json", TINY_ORIG, "shared_intermediate_size", "128",
                  "shared_intermediate_size");
    expect_reject("b11.json", TINY_ORIG, "attn_type_list", NULL, "attn_type_list");
    expect_reject("b12.json", TINY_HF, "hidden_act", "\"gelu\"", "hidden_act");
    expect_reject("b13.json", TINY_HF, "attn_type_list", "[0, 1, 0, 1]", "attn_type_list");
    expect_reject("b14.json", TINY_HF, "num_hidden_layers", "2.5", "num_hidden_layers");
    expect_reject("b15.json", TINY_HF, "rope_parameters",
                  "{\"rope_theta\": 1e7, \"partial_rotary_factor\": 0.3}", "partial_rotary_factor");
    expect_reject("b16.json", TINY_HF, "tie_word_embeddings", "true", "tie_word_embeddings");
    expect_reject("b17.json", TINY_HF, "lightning_slope_denominator", "\"maybe\"",
                  "lightning_slope_denominator");
    expect_reject("b18.json", TINY_ORIG, "num_attention_heads", "6", "num_attention_heads");
    expect_reject("b19.json", TINY_ORIG, "mlp_alpha_factor", "2.0", "mlp_alpha_factor");
    expect_reject("b20.json", TINY_HF, "layer_types",
                  "[\"linear_attention\", \"linear\", \"linear_attention\", \"full_attention\"]",
                  "layer_types");
    expect_reject("b21.json", TINY_HF, "num_experts", "8", "num_experts");
    const char *bad = tmp_path("b22.json");
    write_text(bad, "{\"model_type\": \"minimax\",\n \"vocab_size\": 96,,\n}");
    mt_minimax_config cfg;
    char err[1024] = "";
    EXPECT(!mt_minimax_config_parse(bad, &cfg, err, sizeof(err)) && strstr(err, "line 2") &&
               strstr(err, "JSON"),
           "malformed JSON names the line: %s", err);
    /* a repeated key: transformers (Python's json) takes the last, cJSON's lookups the first */
    char twice[8192];
    snprintf(twice, sizeof(twice), "{\"vocab_size\": 5, %s", strchr(TINY_HF, '{') + 1);
    write_text(tmp_path("twice.json"), twice);
    EXPECT(!mt_minimax_config_parse(tmp_path("twice.json"), &cfg, err, sizeof(err)) &&
               strstr(err, "twice.json: key \"vocab_size\" appears twice"),
           "a repeated key: %s", err);
    /* a model directory whose config.json is a directory */
    const char *cdir = tmp_path("model");
    MT_CHECK(mkdir(cdir, 0755) == 0 && mkdir(tmp_path("model/config.json"), 0755) == 0,
             "cannot create %s/config.json", cdir);
    EXPECT(!mt_minimax_config_parse(cdir, &cfg, err, sizeof(err)) &&
               strstr(err, "config.json: is a directory, not a file"),
           "config.json a directory: %s", err);
    tmp_cleanup();
    return MT_TEST_OK;
}

/* ---- layout and decay ---- */

static int test_layout_decay(void) {
    /* transformers 5.24 MiniMaxLightningAttention.get_slope_rate() (fp32), layer_types all
     * linear: H = 4, L = 3, layers 0..2, all heads; H = 64, L = 80, heads 0, 31, 63. */
    static const double hf4[3][4] = {
        {0.25000250339508057, 0.06250062584877014, 0.015625156462192535, 0.003906289115548134},
        {0.1250031292438507, 0.03125078231096268, 0.00781269557774067, 0.0019531738944351673},
        {3.749993766177795e-06, 9.374984415444487e-07, 2.3437461038611218e-07,
         5.8593652596528045e-08}};
    static const int l64[4] = {0, 41, 78, 79};
    static const double hf64[4][3] = {
        {0.9170132279396057, 0.06250064074993134, 0.003906290512531996},
        {0.44109976291656494, 0.030063927173614502, 0.00187899568118155},
        {0.011616930365562439, 0.0007917722105048597, 4.9485770432511345e-05},
        {9.286117347073741e-06, 6.32911564935057e-07, 3.955697636115474e-08}};
    mt_minimax_config cfg;
    write_text(tmp_path("hf.json"), TINY_HF);
    cfg = parse_ok(tmp_path("hf.json"));
    cfg.num_hidden_layers = cfg.num_hidden_layers_source = 3;
    mt_minimax m;
    mt_minimax_init(&m, &cfg);
    for (int l = 0; l < 3; l++)
        for (int h = 0; h < 4; h++)
            EXPECT(fabs(m.decay[l * 4 + h] - hf4[l][h]) <= 1e-5 * hf4[l][h],
                   "decay H=4 layer %d head %d: %.9g vs transformers %.9g", l, h,
                   (double)m.decay[l * 4 + h], hf4[l][h]);
    mt_minimax_free(&m);
    /* Original release: f_l = 1 - l/(L-1) + 1e-5 (spec 4.2): same at l = 0, s_h * 1e-5 last. */
    cfg.slope_hf_denominator = false;
    mt_minimax_init(&m, &cfg);
    for (int h = 0; h < 4; h++) {
        double s = pow(2.0, -2.0 * (h + 1));
        EXPECT(fabs(m.decay[h] - hf4[0][h]) <= 1e-6 * hf4[0][h], "original decay layer 0");
        EXPECT(fabs(m.decay[4 + h] - s * (0.5 + 1e-5)) <= 1e-6 * s, "original decay layer 1");
        EXPECT(fabs(m.decay[8 + h] - s * 1e-5) <= 1e-6 * s * 1e-5, "original decay layer 2");
    }
    mt_minimax_free(&m);

    char released[1024];
    snprintf(released, sizeof(released), "%s/recipes/configs/minimax-text-01.json",
             getenv("MT_SOURCE_DIR") ? getenv("MT_SOURCE_DIR") : ".");
    mt_minimax_config_load(released, &cfg);
    cfg.slope_hf_denominator = true;
    mt_minimax_init(&m, &cfg);
    for (int i = 0; i < 4; i++)
        for (int k = 0; k < 3; k++) {
            int h = k == 0 ? 0 : k == 1 ? 31 : 63;
            double got = m.decay[l64[i] * 64 + h];
            EXPECT(fabs(got - hf64[i][k]) <= 1e-5 * hf64[i][k],
                   "decay H=64 layer %d head %d: %.9g vs transformers %.9g", l64[i], h, got,
                   hf64[i][k]);
        }
    mt_minimax_free(&m);
    tmp_cleanup();
    return MT_TEST_OK;
}

static int test_layout_buckets(void) {
    write_text(tmp_path("hf.json"), TINY_HF);
    mt_minimax_config cfg = parse_ok(tmp_path("hf.json"));
    mt_minimax m;
    mt_minimax_init(&m, &cfg);
    int L = cfg.num_hidden_layers, E = cfg.num_local_experts;
    EXPECT(m.n_buckets == L + 2 && m.n_params == 1 + L * (7 + 3 * E) + 2, "counts");
    EXPECT(strcmp(m.info[0].name, "model.embed_tokens.weight") == 0 &&
               strcmp(m.info[m.n_params - 1].name, "lm_head.weight") == 0 &&
               m.info[m.n_params - 1].bucket == L + 1,
           "first and last parameters");
    int prev_bucket = 0;
    int64_t end = 0;
    for (int p = 0; p < m.n_params; p++) {
        const mt_param_info *i = &m.info[p];
        if (i->bucket != prev_bucket) end = 0;
        EXPECT(i->bucket >= prev_bucket && i->offset >= end &&
                   i->offset + i->numel <= m.bucket_numel[i->bucket],
               "%s: bucket order, no overlap", i->name);
        EXPECT(mt_minimax_find_param(&m, i->name) == p, "find %s", i->name);
        int layer, e, w;
        bool expert =
            sscanf(i->name, "model.layers.%d.block_sparse_moe.experts.%d.w%d", &layer, &e, &w) == 3;
        if (expert && e > 0)
            EXPECT(i->offset == end, "%s: experts of a stack are contiguous", i->name);
        else
            EXPECT(i->offset % 16 == 0, "%s: aligned start", i->name);
        if (expert) EXPECT(i->bucket == layer + 1, "%s in its layer's bucket", i->name);
        prev_bucket = i->bucket;
        end = i->offset + i->numel;
    }
    EXPECT(mt_minimax_find_param(&m, "model.layers.3.self_attn.q_proj.weight") >= 0 &&
               mt_minimax_find_param(&m, "model.layers.2.self_attn.qkv_proj.weight") >= 0 &&
               mt_minimax_find_param(&m, "model.layers.3.self_attn.qkv_proj.weight") < 0,
           "mixer parameters follow layer_types");
    int q = mt_minimax_find_param(&m, "model.layers.0.self_attn.qkv_proj.weight");
    EXPECT(m.info[q].shape[0] == 3 * 4 * 16 && m.info[q].shape[1] == 32, "qkv shape");
    int k = mt_minimax_find_param(&m, "model.layers.3.self_attn.k_proj.weight");
    EXPECT(m.info[k].shape[0] == 2 * 16, "k_proj shape (GQA)");
    /* binding points every parameter of the bucket into the given memory */
    float *data = calloc((size_t)m.bucket_numel[1], sizeof(float));
    float *grad = calloc((size_t)m.bucket_numel[1], sizeof(float));
    mt_minimax_bind_bucket(&m, 1, data, grad);
    int w2 = mt_minimax_find_param(&m, "model.layers.0.block_sparse_moe.experts.3.w2.weight");
    EXPECT((float *)m.params[w2].data == data + m.info[w2].offset &&
               (float *)m.params[w2].grad == grad + m.info[w2].offset && m.params[w2].requires_grad,
           "bind");
    free(data);
    free(grad);

    /* gather unit "expert": the same parameters, each expert in its own bucket after its
     * layer's, embed_tokens and lm_head in S vocabulary parts of about an expert's 3F rows,
     * buckets in the forward's order */
    mt_minimax x;
    mt_minimax_init_unit(&x, &cfg, MT_GATHER_EXPERT);
    const int S = x.vocab_parts;
    const int64_t V = cfg.vocab_size, F = cfg.intermediate_size;
    EXPECT(S == (V + 3 * F - 1) / (3 * F) && S > 1 && m.vocab_parts == 1 &&
               x.n_buckets == S + L * (E + 1) + S && x.n_params == m.n_params + 2 * (S - 1),
           "expert unit counts: %d vocabulary parts, %d buckets, %d parameters", S, x.n_buckets,
           x.n_params);
    EXPECT(mt_minimax_final_bucket(&x) == x.n_buckets - S && mt_minimax_final_bucket(&m) == L + 1,
           "final buckets");
    int64_t sum_m = 0, sum_x = 0;
    for (int b = 0; b < m.n_buckets; b++) sum_m += m.bucket_numel[b];
    for (int b = 0; b < x.n_buckets; b++) sum_x += x.bucket_numel[b];
    prev_bucket = 0, end = 0;
    for (int p = 0; p < x.n_params; p++) {
        const mt_param_info *i = &x.info[p];
        if (i->bucket != prev_bucket) end = 0;
        EXPECT(i->bucket >= prev_bucket && i->offset >= end && i->offset % 16 == 0 &&
                   i->offset + i->numel <= x.bucket_numel[i->bucket],
               "expert unit %s: bucket order, aligned, no overlap", i->name);
        const int pm = mt_minimax_find_param(&m, i->name);
        EXPECT(pm >= 0 && m.info[pm].numel == i->numel / i->shape[0] * i->src_shape0 &&
                   i->src_offset + i->numel <= m.info[pm].numel,
               "expert unit %s exists in unit layer", i->name);
        if (i->src_shape0 != i->shape[0]) /* a vocabulary part: rows in order, none missing */
            EXPECT(i->src_offset == (p > 0 && !strcmp(x.info[p - 1].name, i->name)
                                         ? x.info[p - 1].src_offset + x.info[p - 1].numel
                                         : 0) &&
                       (i->bucket < S || i->bucket >= mt_minimax_final_bucket(&x)),
                   "%s part at element %lld: out of order or outside the vocabulary buckets",
                   i->name, (long long)i->src_offset);
        int layer, e, w;
        if (sscanf(i->name, "model.layers.%d.block_sparse_moe.experts.%d.w%d", &layer, &e, &w) == 3)
            EXPECT(i->bucket == mt_minimax_expert_bucket(&x, layer, e) &&
                       m.info[pm].bucket == mt_minimax_expert_bucket(&m, layer, e),
                   "%s: its expert's bucket", i->name);
        else if (sscanf(i->name, "model.layers.%d.", &layer) == 1)
            EXPECT(i->bucket == mt_minimax_layer_bucket(&x, layer) &&
                       mt_minimax_bucket_layer(&x, i->bucket) == layer,
                   "%s: its layer's bucket", i->name);
        prev_bucket = i->bucket;
        end = i->offset + i->numel;
    }
    EXPECT(sum_x >= sum_m - 16 * (int64_t)L * E, "expert unit holds every parameter");
    EXPECT(mt_minimax_bucket_layer(&x, mt_minimax_expert_bucket(&x, 1, 0)) == -1 &&
               mt_minimax_bucket_layer(&x, 0) == -1 &&
               mt_minimax_bucket_layer(&x, x.n_buckets - 1) == -1,
           "expert, embedding and final buckets belong to no layer");
    mt_minimax_free(&x);
    mt_minimax_free(&m);
    tmp_cleanup();
    return MT_TEST_OK;
}

/* ---- minimax-info ---- */

static bool info_run(const char *args, int64_t *total, int64_t *active, int64_t *with_emb,
                     char *out, size_t n) {
    const char *exe = getenv("MT_MINIMAX_INFO");
    if (!exe) return false;
    char cmd[2048];
    snprintf(cmd, sizeof(cmd), "%s %s", exe, args);
    FILE *f = popen(cmd, "r");
    if (!f) return false;
    size_t len = fread(out, 1, n - 1, f);
    out[len] = 0;
    int rc = pclose(f);
    long long t = -1, a = -1, w = -1;
    const char *s;
    if ((s = strstr(out, "params_total="))) sscanf(s, "params_total=%lld", &t);
    if ((s = strstr(out, "params_active="))) sscanf(s, "params_active=%lld", &a);
    if ((s = strstr(out, "params_active_with_embeddings=")))
        sscanf(s, "params_active_with_embeddings=%lld", &w);
    *total = t, *active = a, *with_emb = w;
    return rc == 0;
}

static int test_info_counts(void) {
    if (!getenv("MT_MINIMAX_INFO")) {
        printf("MT_MINIMAX_INFO not set (run through ctest)\n");
        return MT_TEST_SKIP;
    }
    char released[1024], args[2048], out[4096];
    snprintf(released, sizeof(released), "%s/recipes/configs/minimax-text-01.json",
             getenv("MT_SOURCE_DIR") ? getenv("MT_SOURCE_DIR") : ".");
    int64_t t, a, w;
    snprintf(args, sizeof(args), "--config %s", released);
    EXPECT(info_run(args, &t, &a, &w, out, sizeof(out)), "minimax-info failed:\n%s", out);
    printf("%s", out);
    /* sum of numel over transformers 5.24 MiniMaxForCausalLM (meta device) with the released
     * dimensions: 456,089,655,296; per token without embed_tokens/lm_head, experts at 2/32:
     * 45,944,920,064 (model card: 45.9B); with both V x C matrices: 48,403,306,496. */
    EXPECT(t == 456089655296ll, "total %lld", (long long)t);
    EXPECT(a == 45944920064ll, "active %lld", (long long)a);
    EXPECT(w == 48403306496ll, "active with embeddings %lld", (long long)w);
    EXPECT(strstr(out, "(456.09B)") && strstr(out, "(45.94B)"), "rounded counts printed");
    snprintf(args, sizeof(args), "--config %s --num-hidden-layers 1", released);
    EXPECT(info_run(args, &t, &a, &w, out, sizeof(out)), "minimax-info -L 1 failed:\n%s", out);
    printf("%s", out);
    EXPECT(t == 8146085888ll, "1-layer total %lld (PaddleFormers: 8,146,085,888)", (long long)t);
    /* the same model from a transformers-schema config */
    mt_minimax_config cfg;
    mt_minimax_config_load(released, &cfg);
    mt_minimax_config_save_json(&cfg, tmp_path("hf.json"), MT_NAMING_HF_V4);
    snprintf(args, sizeof(args), "--config %s", tmp_path("hf.json"));
    EXPECT(info_run(args, &t, &a, &w, out, sizeof(out)) && t == 456089655296ll &&
               a == 45944920064ll,
           "transformers-schema copy: total %lld active %lld", (long long)t, (long long)a);
    /* --seq: the plan of mt_minimax_plan_activations, and with --ranks the sum per rank */
    snprintf(args, sizeof(args), "--config %s --ranks 64 --gather-unit expert --seq 512", released);
    EXPECT(info_run(args, &t, &a, &w, out, sizeof(out)), "minimax-info --seq failed:\n%s", out);
    printf("%s", out);
    long long zb = -1, act = -1, tot = -1;
    const char *p;
    if ((p = strstr(out, "zero3_bytes_per_rank="))) sscanf(p, "zero3_bytes_per_rank=%lld", &zb);
    if ((p = strstr(out, "activation_bytes_recomputed=")))
        sscanf(p, "activation_bytes_recomputed=%lld", &act);
    if ((p = strstr(out, "total_bytes_per_rank_recomputed=")))
        sscanf(p, "total_bytes_per_rank_recomputed=%lld", &tot);
    mt_minimax_config_load(released, &cfg);
    const int64_t plan = mt_minimax_plan_activations(&cfg, MT_GATHER_EXPERT, true, 1, 512);
    EXPECT(act == plan && zb > 0 && tot == zb + act,
           "--seq 512: activations %lld (plan %lld), zero3 %lld, total %lld", act, (long long)plan,
           zb, tot);
    /* --offload: m and v leave the device for host memory, with a staging of 3 x 2 x 2^23 floats */
    long long owned = -1, owned_off = -1, host_off = -1, n_owned = -1;
    if ((p = strstr(out, "zero3_owned_bytes_per_rank=")))
        sscanf(p, "zero3_owned_bytes_per_rank=%lld", &owned);
    if (p && (p = strstr(p, "grad, adam m, v of "))) sscanf(p, "grad, adam m, v of %lld", &n_owned);
    /* with bf16 gathers the fp32 master weights go to the host too: 6 device bytes (gradient,
     * bf16 master) and 12 host bytes (master, m, v) per owned element */
    const struct {
        const char *flags;
        long long device, host;
    } off[2] = {{"", 8, 8}, {" --gather-dtype bf16", 6, 12}};
    for (int k = 0; k < 2; k++) {
        snprintf(args, sizeof(args), "--config %s --ranks 64 --gather-unit expert --offload%s",
                 released, off[k].flags);
        EXPECT(info_run(args, &t, &a, &w, out, sizeof(out)), "minimax-info %s failed:\n%s", args,
               out);
        printf("%s", out);
        if ((p = strstr(out, "zero3_owned_bytes_per_rank=")))
            sscanf(p, "zero3_owned_bytes_per_rank=%lld", &owned_off);
        if ((p = strstr(out, "zero3_host_bytes_per_rank=")))
            sscanf(p, "zero3_host_bytes_per_rank=%lld", &host_off);
        EXPECT(n_owned > (1 << 24) && owned == 16 * n_owned &&
                   owned_off == off[k].device * n_owned &&
                   host_off == off[k].host * n_owned + 24 * (1 << 23),
               "--offload%s: %lld owned elements, %lld device bytes (%lld without offload), %lld "
               "host",
               off[k].flags, n_owned, owned_off, owned, host_off);
    }
    /* --fit-gib: the fewest ranks at which --ranks prints a total within the budget, one fewer
     * exceeding it (unit expert, offload, T = 512 recomputed, an H200's 131.3 GiB) */
    snprintf(args, sizeof(args), "--config %s --fit-gib 131.3 --seq 512", released);
    EXPECT(info_run(args, &t, &a, &w, out, sizeof(out)), "minimax-info --fit-gib failed:\n%s", out);
    printf("%s", out);
    int fit = -1;
    if ((p = strstr(out, "fit_ranks_expert_offload=")))
        sscanf(p, "fit_ranks_expert_offload=%d", &fit);
    const double budget = 131.3 * (double)(1 << 30);
    for (int k = 0; k < 2 && fit > 1; k++) {
        snprintf(args, sizeof(args),
                 "--config %s --ranks %d --gather-unit expert --offload --seq 512", released,
                 fit - k);
        long long total = -1;
        EXPECT(info_run(args, &t, &a, &w, out, sizeof(out)), "minimax-info failed:\n%s", out);
        if ((p = strstr(out, "total_bytes_per_rank_recomputed=")))
            sscanf(p, "total_bytes_per_rank_recomputed=%lld", &total);
        EXPECT(total > 0 && (k == 0 ? (double)total <= budget : (double)total > budget),
               "--fit-gib said %d ranks; at %d ranks a rank holds %lld bytes (budget %.0f)", fit,
               fit - k, total, budget);
    }
    EXPECT(fit > 1, "--fit-gib: fit_ranks_expert_offload missing or 1 (%d)", fit);
    snprintf(args, sizeof(args), "--config %s/missing.json 2>&1", tmp_dir());
    EXPECT(!info_run(args, &t, &a, &w, out, sizeof(out)) && strstr(out, "missing.json"),
           "a missing config fails naming the file: %s", out);
    tmp_cleanup();
    return MT_TEST_OK;
}

/* The value of "key=" at the start of a line of out, or -1. */
static long long info_value(const char *out, const char *key) {
    char k[128];
    snprintf(k, sizeof(k), "\n%.100s=", key);
    const char *s = strstr(out, k);
    long long v = -1;
    if (s) sscanf(s + strlen(k), "%lld", &v);
    return v;
}

/* MiniMax-M2: minimax-info against transformers' own counts, every key of
 * tests/fixtures/info/<name>.txt (tools/count_params.py: MiniMaxM2ForCausalLM on the meta
 * device); the released config's memory per rank with --ranks, and --fit-gib's answer. */
static int test_info_counts_m2(void) {
    if (!getenv("MT_MINIMAX_INFO")) {
        printf("MT_MINIMAX_INFO not set (run through ctest)\n");
        return MT_TEST_SKIP;
    }
    const char *src = getenv("MT_SOURCE_DIR") ? getenv("MT_SOURCE_DIR") : ".";
    const char *names[2] = {"minimax-m2", "tiny-m2"};
    char args[2048], out[8192], path[1024], line[256];
    int64_t t, a, w;
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof(args), "--config %s/recipes/configs/%s.json", src, names[i]);
        EXPECT(info_run(args, &t, &a, &w, out + 1, sizeof(out) - 1), "minimax-info %s failed",
               args);
        out[0] = '\n';
        printf("%s", out + 1);
        snprintf(path, sizeof(path), "%s/tests/fixtures/info/%s.txt", src, names[i]);
        FILE *f = fopen(path, "r");
        EXPECT(f, "cannot read %s", path);
        int keys = 0;
        while (f && fgets(line, sizeof(line), f)) {
            char key[96];
            long long want;
            if (line[0] == '#' || sscanf(line, "%95[a-z_]=%lld", key, &want) != 2) continue;
            const long long have = info_value(out, key);
            printf("  %-30s minimax-info %lld, transformers %lld\n", key, have, want);
            EXPECT(have == want, "%s: %s = %lld, transformers %lld", names[i], key, have, want);
            keys++;
        }
        if (f) fclose(f);
        EXPECT(keys == 6, "%s: %d keys in %s", names[i], keys, path);
    }
    EXPECT(strstr(out, "family=MiniMax-M2") != NULL, "the family is named");
    /* the released config on 64 ranks, one expert gathered at a time: 16 bytes per owned
     * element (fp32 master, gradient, AdamW m and v), buffers included in the shards
     * (activations: op_info_counts, the same code for every family) */
    snprintf(args, sizeof(args),
             "--config %s/recipes/configs/minimax-m2.json --ranks 64 --gather-unit expert", src);
    EXPECT(info_run(args, &t, &a, &w, out + 1, sizeof(out) - 1), "minimax-info %s", args);
    printf("%s", out + 1);
    const char *s = strstr(out, "grad, adam m, v of ");
    long long owned = -1;
    if (s) sscanf(s, "grad, adam m, v of %lld", &owned);
    const long long elems = 228689748992ll + 15872;
    EXPECT(owned >= elems / 64 && owned < elems / 64 + 16022 * 64 &&
               info_value(out, "zero3_owned_bytes_per_rank") == 16 * owned,
           "64 ranks: %lld owned elements of %lld, %lld bytes", owned, elems,
           info_value(out, "zero3_owned_bytes_per_rank"));
    /* --fit-gib: the fewest ranks whose state and slots fit an H200's 131.3 GiB, one fewer
     * beyond it */
    snprintf(args, sizeof(args), "--config %s/recipes/configs/minimax-m2.json --fit-gib 131.3",
             src);
    EXPECT(info_run(args, &t, &a, &w, out + 1, sizeof(out) - 1), "minimax-info %s", args);
    printf("%s", out + 1);
    const long long fit = info_value(out, "fit_ranks_expert");
    for (int k = 0; k < 2 && fit > 1; k++) {
        snprintf(args, sizeof(args),
                 "--config %s/recipes/configs/minimax-m2.json --ranks %lld --gather-unit expert",
                 src, fit - k);
        EXPECT(info_run(args, &t, &a, &w, out + 1, sizeof(out) - 1), "minimax-info %s", args);
        const double total = (double)info_value(out, "zero3_bytes_per_rank");
        const double budget = 131.3 * (double)(1 << 30);
        EXPECT(total > 0 && (k == 0 ? total <= budget : total > budget),
               "--fit-gib said %lld ranks; at %lld a rank holds %.0f bytes", fit, fit - k, total);
    }
    EXPECT(fit > 1, "fit_ranks_expert missing or 1 (%lld)", fit);
    return MT_TEST_OK;
}

/* MiniMax-M3: minimax-info on the released text config (recipes/configs/minimax-m3.json, spec
 * 1.2) against transformers' own count of the text model (tests/fixtures/info/minimax-m3.txt,
 * tools/count_params.py: MiniMaxM3VLForCausalLM on the meta device; the shared experts and
 * the indexers are active on every token), and its memory per rank on 128 ranks, one expert
 * gathered at a time. */
static int test_info_counts_m3(void) {
    if (!getenv("MT_MINIMAX_INFO")) {
        printf("MT_MINIMAX_INFO not set (run through ctest)\n");
        return MT_TEST_SKIP;
    }
    const char *src = getenv("MT_SOURCE_DIR") ? getenv("MT_SOURCE_DIR") : ".";
    char args[2048], out[8192], path[1024], line[256];
    int64_t t, a, w;
    snprintf(args, sizeof(args), "--config %s/recipes/configs/minimax-m3.json", src);
    EXPECT(info_run(args, &t, &a, &w, out + 1, sizeof(out) - 1), "minimax-info %s failed", args);
    out[0] = '\n';
    printf("%s", out + 1);
    EXPECT(strstr(out, "family=MiniMax-M3") && strstr(out, "(softmax 3, msa sparse 57)"),
           "the family and its 3 dense + 57 MSA layers are named");
    snprintf(path, sizeof(path), "%s/tests/fixtures/info/minimax-m3.txt", src);
    FILE *f = fopen(path, "r");
    EXPECT(f, "cannot read %s", path);
    int keys = 0;
    while (f && fgets(line, sizeof(line), f)) {
        char key[96];
        long long want;
        if (line[0] == '#' || sscanf(line, "%95[a-z_]=%lld", key, &want) != 2) continue;
        const long long have = info_value(out, key);
        printf("  %-30s minimax-info %lld, transformers %lld\n", key, have, want);
        EXPECT(have == want, "minimax-m3: %s = %lld, transformers %lld", key, have, want);
        keys++;
    }
    if (f) fclose(f);
    EXPECT(keys == 6, "minimax-m3: %d keys in %s", keys, path);
    /* 128 ranks: 16 bytes per owned element (fp32 master, gradient, AdamW m and v), the
     * buffers in the shards too */
    snprintf(args, sizeof(args),
             "--config %s/recipes/configs/minimax-m3.json --ranks 128 --gather-unit expert", src);
    EXPECT(info_run(args, &t, &a, &w, out + 1, sizeof(out) - 1), "minimax-info %s", args);
    printf("%s", out + 1);
    const char *s = strstr(out, "grad, adam m, v of ");
    long long owned = -1;
    if (s) sscanf(s, "grad, adam m, v of %lld", &owned);
    const long long elems = 426174565632ll + 7296;
    EXPECT(owned >= elems / 128 && owned < elems / 128 + 20000 * 128 &&
               info_value(out, "zero3_owned_bytes_per_rank") == 16 * owned,
           "128 ranks: %lld owned elements of %lld, %lld bytes", owned, elems,
           info_value(out, "zero3_owned_bytes_per_rank"));
    return MT_TEST_OK;
}

/* mt_minimax_plan_activations (a dry run on the plan backend) against the arena of a real CPU
 * micro-step of the same shapes (random weights and tokens, every token labelled, the router aux
 * loss on): the peak of live tensors agrees up to allocation padding, which only the experts'
 * token counts move (the plan splits the rows evenly): each expert's two saved (rows, F) buffers
 * may round differently to 64 bytes, over every layer. Both gather units, kept and recomputed. */
static int test_plan_activations(void) {
    char path[1024];
    snprintf(path, sizeof(path), "%s/recipes/configs/tiny.json",
             getenv("MT_SOURCE_DIR") ? getenv("MT_SOURCE_DIR") : ".");
    mt_minimax_config cfg;
    mt_minimax_config_load(path, &cfg);
    cfg.output_router_logits = true;
    const int64_t B = 2, T = 96, L = cfg.num_hidden_layers, E = cfg.num_local_experts;
    mt_rng rng;
    mt_rng_seed(&rng, 5);
    mt_tensor *io[4];
    const char *names[4] = {"ids", "labels", "positions", "segments"};
    for (int i = 0; i < 4; i++) {
        io[i] = mt_test_tensor(MT_I32, 2, (int64_t[]){B, T}, false, names[i]);
        int32_t *d = io[i]->data;
        for (int64_t j = 0; j < B * T; j++)
            d[j] = i < 2    ? (int32_t)(mt_rng_u64(&rng) % (uint64_t)cfg.vocab_size)
                   : i == 2 ? (int32_t)(j % T)
                            : 0;
    }
    const int64_t valid[2] = {T, T};
    for (int u = 0; u < 2; u++)
        for (int r = 0; r < 2; r++) {
            const mt_gather_unit unit = u ? MT_GATHER_EXPERT : MT_GATHER_LAYER;
            mt_minimax m;
            mt_minimax_init_unit(&m, &cfg, unit);
            m.gradient_checkpointing = r == 1;
            float **data = mt_calloc((size_t)m.n_buckets, sizeof(float *), "buckets");
            float **grad = mt_calloc((size_t)m.n_buckets, sizeof(float *), "grads");
            for (int b = 0; b < m.n_buckets; b++) {
                data[b] = mt_calloc((size_t)m.bucket_numel[b], sizeof(float), "bucket");
                grad[b] = mt_calloc((size_t)m.bucket_numel[b], sizeof(float), "grad");
                mt_minimax_bind_bucket(&m, b, data[b], grad[b]);
            }
            mt_weights_init_random(&m, 11);
            mt_ctx c;
            mt_test_ctx_init(&c);
            mt_minimax_batch batch = {.ids = io[0],
                                      .labels = io[1],
                                      .pos = io[2],
                                      .seg = io[3],
                                      .valid_len = valid,
                                      .loss_denom = (float)(B * T),
                                      .fused_loss = true};
            mt_minimax_out out;
            mt_minimax_forward(&m, &c, &batch, NULL, &out);
            mt_backward(&c, out.loss, NULL);
            const int64_t real = (int64_t)c.arena.peak_live;
            const int64_t plan = mt_minimax_plan_activations(&cfg, unit, r == 1, B, T);
            const int64_t slack = u ? 2 * 64 * E * L : 0;
            printf("  unit %-6s %-10s live peak %lld bytes, plan %lld (|diff| %lld, padding bound "
                   "%lld); with kernels' scratch %zu\n",
                   u ? "expert" : "layer", r ? "recomputed" : "kept", (long long)real,
                   (long long)plan, (long long)llabs(real - plan), (long long)slack, c.arena.peak);
            EXPECT(llabs(real - plan) <= slack, "plan %lld bytes, the real step %lld",
                   (long long)plan, (long long)real);
            mt_ctx_free(&c);
            for (int b = 0; b < m.n_buckets; b++) free(data[b]), free(grad[b]);
            free(data);
            free(grad);
            mt_minimax_free(&m);
        }
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"op_config_schemas", test_config_schemas},
    {"op_layout_decay", test_layout_decay},
    {"op_layout_buckets", test_layout_buckets},
    {"op_safetensors_digest", test_safetensors_digest},
    {"op_safetensors_roundtrip", test_safetensors_roundtrip},
    {"op_safetensors_errors", test_safetensors_errors},
    {"op_weights_layouts", test_weights_layouts},
    {"op_weights_gather_units", test_weights_gather_units},
    {"op_weights_export_m2", test_weights_export_m2},
    {"op_config_m2", test_config_m2},
    {"op_weights_fp8_errors", test_weights_fp8_errors},
    {"op_info_counts", test_info_counts},
    {"op_info_counts_m2", test_info_counts_m2},
    {"op_info_counts_m3", test_info_counts_m3},
    {"op_config_m3", test_config_m3},
    {"op_config_window_jitter", test_config_window_jitter},
    {"op_weights_export_m3", test_weights_export_m3},
    {"op_weights_export_m3_text", test_weights_export_m3_text},
    {"op_plan_activations", test_plan_activations},
};
MT_TEST_MAIN(cases)
