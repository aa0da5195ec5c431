/* config.c: config.json -> mt_minimax_config and back, for every family (models/family.h).
 *
 * model_type chooses the family (models/family_*.c), which reads its schema's keys with the
 * helpers here (models/config_internal.h); the keys every family shares are validated here, as
 * is quantization_config. Unknown keys (use_cache, dtype, auto_map...) are ignored; a known key
 * with a value that is not supported is rejected naming it. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "core/file_io.h"
#include "models/config_internal.h"
#include "models/safetensors.h"

bool mt_cfg_fail(mt_cfg_reader *r, const char *fmt, ...) {
    int n = snprintf(r->err, r->err_len, "%s: ", r->path);
    if (n < 0 || (size_t)n >= r->err_len) return false;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err + n, r->err_len - (size_t)n, fmt, ap);
    va_end(ap);
    return false;
}

const cJSON *mt_cfg_get(const cJSON *root, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    return (v && !cJSON_IsNull(v)) ? v : NULL;
}

bool mt_cfg_int_value(mt_cfg_reader *r, const cJSON *v, const char *key, int *out) {
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) ||
        fabs(v->valuedouble) > 2147483647.0)
        return mt_cfg_fail(r, "key \"%s\": expected an integer", key);
    *out = (int)v->valuedouble;
    return true;
}

bool mt_cfg_int(mt_cfg_reader *r, const cJSON *root, const char *key, int def, int *out) {
    const cJSON *v = mt_cfg_get(root, key);
    if (!v) {
        *out = def;
        return true;
    }
    return mt_cfg_int_value(r, v, key, out);
}

bool mt_cfg_double(mt_cfg_reader *r, const cJSON *root, const char *key, double def, double *out) {
    const cJSON *v = mt_cfg_get(root, key);
    if (!v) {
        *out = def;
        return true;
    }
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return mt_cfg_fail(r, "key \"%s\": expected a number", key);
    *out = v->valuedouble;
    return true;
}

bool mt_cfg_float(mt_cfg_reader *r, const cJSON *root, const char *key, double def, float *out) {
    double d = 0;
    if (!mt_cfg_double(r, root, key, def, &d)) return false;
    *out = (float)d;
    return true;
}

bool mt_cfg_bool(mt_cfg_reader *r, const cJSON *root, const char *key, bool def, bool *out) {
    const cJSON *v = mt_cfg_get(root, key);
    if (!v) {
        *out = def;
        return true;
    }
    if (!cJSON_IsBool(v)) return mt_cfg_fail(r, "key \"%s\": expected true or false", key);
    *out = cJSON_IsTrue(v);
    return true;
}

/* Token ids: absent -> the schema default; null -> -1 (None); a list (transformers allows
 * several eos ids) -> its first entry. */
bool mt_cfg_token(mt_cfg_reader *r, const cJSON *root, const char *key, int def, int *out) {
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
    return mt_cfg_int_value(r, v, key, out);
}

bool mt_cfg_head_dim(mt_cfg_reader *r, const cJSON *root, mt_minimax_config *cfg) {
    int head_dim = 0;
    TRY(mt_cfg_int(r, root, "head_dim", 0, &head_dim));
    if (head_dim == 0) {
        if (cfg->num_attention_heads <= 0 || cfg->hidden_size % cfg->num_attention_heads != 0)
            return mt_cfg_fail(r,
                               "key \"head_dim\" is missing and hidden_size %d is not divisible by "
                               "num_attention_heads %d",
                               cfg->hidden_size, cfg->num_attention_heads);
        head_dim = cfg->hidden_size / cfg->num_attention_heads;
    }
    cfg->head_dim = head_dim;
    return true;
}

bool mt_cfg_read_m2_m3(mt_cfg_reader *r, const cJSON *root, mt_minimax_config *cfg) {
    TRY(mt_cfg_int(r, root, "head_dim", 128, &cfg->head_dim));
    TRY(mt_cfg_token(r, root, "bos_token_id", 200034, &cfg->bos_token_id));
    TRY(mt_cfg_token(r, root, "eos_token_id", 200020, &cfg->eos_token_id));
    TRY(mt_cfg_token(r, root, "pad_token_id", -1, &cfg->pad_token_id));
    const int L = cfg->num_hidden_layers;
    if (L < 1 || L > MT_MAX_LAYERS)
        return mt_cfg_fail(r, "key \"num_hidden_layers\": %d is outside [1, %d]", L, MT_MAX_LAYERS);
    for (int l = 0; l < L; l++) cfg->layer_types[l] = MT_LAYER_FULL;
    TRY(mt_cfg_rope_hf(r, root, 5e6, cfg));
    return true;
}

bool mt_cfg_rope_hf(mt_cfg_reader *r, const cJSON *root, double theta, mt_minimax_config *cfg) {
    /* RoPE: rope_parameters (v5) or top-level rope_theta/partial_rotary_factor (v4.5x). */
    double partial = 1.0;
    TRY(mt_cfg_double(r, root, "rope_theta", theta, &theta));
    TRY(mt_cfg_double(r, root, "partial_rotary_factor", partial, &partial));
    if (mt_cfg_get(root, "rope_scaling"))
        return mt_cfg_fail(r, "key \"rope_scaling\": not supported");
    const cJSON *rp = mt_cfg_get(root, "rope_parameters");
    if (rp) {
        if (!cJSON_IsObject(rp))
            return mt_cfg_fail(r, "key \"rope_parameters\": expected an object");
        const cJSON *type = mt_cfg_get(rp, "rope_type");
        if (type && (!cJSON_IsString(type) || strcmp(type->valuestring, "default") != 0))
            return mt_cfg_fail(r,
                               "key \"rope_parameters.rope_type\": only \"default\" is supported");
        double t2 = theta, p2 = partial;
        TRY(mt_cfg_double(r, rp, "rope_theta", theta, &t2));
        TRY(mt_cfg_double(r, rp, "partial_rotary_factor", partial, &p2));
        if (mt_cfg_get(root, "rope_theta") && mt_cfg_get(rp, "rope_theta") && t2 != theta)
            return mt_cfg_fail(r,
                               "key \"rope_parameters.rope_theta\" disagrees with \"rope_theta\"");
        theta = t2;
        partial = p2;
    }
    cfg->rope_theta = (float)theta;
    double rot = cfg->head_dim * partial;
    if (!(partial > 0 && partial <= 1) || rot != floor(rot))
        return mt_cfg_fail(
            r,
            "key \"partial_rotary_factor\": %g times cfg->head_dim %d must be a whole "
            "number in (0, cfg->head_dim]",
            partial, cfg->head_dim);
    cfg->rotary_dim = (int)rot;
    return true;
}

bool mt_cfg_string_is(mt_cfg_reader *r, const cJSON *root, const char *key, const char *want,
                      const char *why) {
    const cJSON *v = mt_cfg_get(root, key);
    if (!v) return true;
    if (!cJSON_IsString(v) || strcmp(v->valuestring, want) != 0)
        return mt_cfg_fail(r, "key \"%s\": only \"%s\" is supported (%s)", key, want, why);
    return true;
}

bool mt_cfg_read_common(mt_cfg_reader *r, const cJSON *root, const mt_cfg_defaults *d,
                        mt_minimax_config *cfg) {
    TRY(mt_cfg_int(r, root, "vocab_size", d->vocab_size, &cfg->vocab_size));
    TRY(mt_cfg_int(r, root, "hidden_size", d->hidden_size, &cfg->hidden_size));
    TRY(mt_cfg_int(r, root, "intermediate_size", d->intermediate_size, &cfg->intermediate_size));
    TRY(mt_cfg_int(r, root, "num_hidden_layers", d->num_hidden_layers, &cfg->num_hidden_layers));
    TRY(mt_cfg_int(r, root, "num_attention_heads", d->num_attention_heads,
                   &cfg->num_attention_heads));
    /* Absent: the class default; explicit null: H. */
    if (cJSON_GetObjectItemCaseSensitive(root, "num_key_value_heads"))
        TRY(mt_cfg_int(r, root, "num_key_value_heads", cfg->num_attention_heads,
                       &cfg->num_key_value_heads));
    else
        cfg->num_key_value_heads = d->num_key_value_heads;
    TRY(mt_cfg_int(r, root, "max_position_embeddings", d->max_position_embeddings,
                   &cfg->max_position_embeddings));
    TRY(mt_cfg_float(r, root, "rms_norm_eps", d->rms_norm_eps, &cfg->rms_norm_eps));
    TRY(mt_cfg_float(r, root, "initializer_range", 0.02, &cfg->initializer_range));
    TRY(mt_cfg_float(r, root, "router_aux_loss_coef", 0.001, &cfg->router_aux_loss_coef));
    TRY(mt_cfg_bool(r, root, "output_router_logits", false, &cfg->output_router_logits));
    TRY(mt_cfg_int(r, root, "num_experts_per_tok", d->num_experts_per_tok,
                   &cfg->num_experts_per_tok));
    TRY(mt_cfg_int(r, root, "num_local_experts", d->num_local_experts, &cfg->num_local_experts));
    /* transformers' attribute_map alias of num_local_experts (the original schema's code
     * ignores it: its family checks that it agrees) */
    const cJSON *alias = cfg->original_schema ? NULL : mt_cfg_get(root, "num_experts");
    if (alias) {
        int e = 0;
        TRY(mt_cfg_int_value(r, alias, "num_experts", &e));
        if (mt_cfg_get(root, "num_local_experts") && e != cfg->num_local_experts)
            return mt_cfg_fail(r,
                               "key \"num_experts\" (%d) disagrees with \"num_local_experts\" (%d)",
                               e, cfg->num_local_experts);
        cfg->num_local_experts = e;
    }
    return true;
}

/* Keys every family shares, and the consistency of the values read. */
static bool cfg_validate(mt_cfg_reader *r, const cJSON *root, mt_minimax_config *cfg) {
    const cJSON *act = mt_cfg_get(root, "hidden_act");
    if (act && (!cJSON_IsString(act) ||
                (strcmp(act->valuestring, "silu") != 0 &&
                 !(cfg->act_swigluoai && strcmp(act->valuestring, "swigluoai") == 0))))
        return mt_cfg_fail(r, "key \"hidden_act\": only \"silu\" is supported%s",
                           cfg->act_swigluoai ? " (or \"swigluoai\")" : "");
    bool tie = false;
    TRY(mt_cfg_bool(r, root, "tie_word_embeddings", false, &tie));
    if (tie)
        return mt_cfg_fail(r, "key \"tie_word_embeddings\": tied embeddings are not supported "
                              "(MiniMax models have an untied lm_head)");
    cfg->tie_word_embeddings = false;
    /* null or absent: no window (the family's check refuses a window it does not apply) */
    cfg->sliding_window = 0;
    if (mt_cfg_get(root, "sliding_window")) {
        TRY(mt_cfg_int(r, root, "sliding_window", 0, &cfg->sliding_window));
        if (cfg->sliding_window < 1)
            return mt_cfg_fail(r, "key \"sliding_window\": %d must be positive (or null)",
                               cfg->sliding_window);
    }
    double x = 0;
    TRY(mt_cfg_double(r, root, "attention_dropout", 0, &x));
    if (x != 0) return mt_cfg_fail(r, "key \"attention_dropout\": only 0 is supported");
    TRY(mt_cfg_double(r, root, "router_jitter_noise", 0, &x));
    if (!(x >= 0 && x < 1))
        return mt_cfg_fail(r, "key \"router_jitter_noise\": %g must be in [0, 1)", x);
    cfg->router_jitter_noise = (float)x;

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
               {"max_position_embeddings", cfg->max_position_embeddings}};
    for (size_t i = 0; i < sizeof(pos) / sizeof(pos[0]); i++)
        if (pos[i].v <= 0)
            return mt_cfg_fail(r, "key \"%s\": %d must be positive", pos[i].key, pos[i].v);
    if (cfg->num_attention_heads % cfg->num_key_value_heads != 0)
        return mt_cfg_fail(
            r,
            "key \"num_key_value_heads\": num_attention_heads %d is not divisible by "
            "num_key_value_heads %d",
            cfg->num_attention_heads, cfg->num_key_value_heads);
    if (cfg->num_experts_per_tok > cfg->num_local_experts)
        return mt_cfg_fail(r, "key \"num_experts_per_tok\": top-k %d exceeds the %d experts",
                           cfg->num_experts_per_tok, cfg->num_local_experts);
    if (cfg->rotary_dim <= 0 || cfg->rotary_dim % 2 != 0 || cfg->rotary_dim > cfg->head_dim)
        return mt_cfg_fail(r, "key \"%s\": rotary width %d must be even and in (0, head_dim %d]",
                           cfg->original_schema || mt_cfg_get(root, "rotary_dim")
                               ? "rotary_dim"
                               : "partial_rotary_factor",
                           cfg->rotary_dim, cfg->head_dim);
    if (!(cfg->rms_norm_eps > 0)) return mt_cfg_fail(r, "key \"rms_norm_eps\": must be positive");
    if (!(cfg->rope_theta > 0)) return mt_cfg_fail(r, "key \"rope_theta\": must be positive");
    if (!(cfg->initializer_range >= 0))
        return mt_cfg_fail(r, "key \"initializer_range\": must not be negative");
    if (cfg->pad_token_id >= cfg->vocab_size)
        return mt_cfg_fail(r, "key \"pad_token_id\": %d is outside the vocabulary (%d)",
                           cfg->pad_token_id, cfg->vocab_size);
    return true;
}

/* quantization_config: only the block-scaled FP8 of the MiniMax-M2 release (quant_method "fp8",
 * fmt float8_e4m3fn, weight_block_size [rows, columns]); the weights are dequantised on load
 * (models/weights.c), the activation scheme does not matter to a trainer. Every other scheme is
 * refused by name. */
static bool cfg_quantization(mt_cfg_reader *r, const cJSON *root, mt_minimax_config *cfg) {
    const cJSON *q = mt_cfg_get(root, "quantization_config");
    if (!q) return true;
    if (!cJSON_IsObject(q))
        return mt_cfg_fail(r, "key \"quantization_config\": expected an object");
    const cJSON *method = mt_cfg_get(q, "quant_method");
    const char *name = cJSON_IsString(method) ? method->valuestring : "(none)";
    if (strcmp(name, "fp8") != 0)
        return mt_cfg_fail(
            r,
            "key \"quantization_config.quant_method\": \"%s\" is not supported (only "
            "\"fp8\": e4m3 weights with block scales, dequantised on load)",
            name);
    const cJSON *fmt = mt_cfg_get(q, "fmt");
    if (fmt && (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "float8_e4m3fn") != 0))
        return mt_cfg_fail(r, "key \"quantization_config.fmt\": only \"float8_e4m3fn\" is "
                              "supported (the only FP8 format read)");
    const cJSON *scale_fmt = mt_cfg_get(q, "scale_fmt");
    if (scale_fmt)
        return mt_cfg_fail(r, "key \"quantization_config.scale_fmt\": only fp32 block scales "
                              "(no scale_fmt) are supported");
    const cJSON *bs = mt_cfg_get(q, "weight_block_size");
    if (!cJSON_IsArray(bs) || cJSON_GetArraySize(bs) != 2)
        return mt_cfg_fail(r, "key \"quantization_config.weight_block_size\": expected [rows, "
                              "columns] (per-tensor FP8 scales are not supported)");
    for (int i = 0; i < 2; i++) {
        TRY(mt_cfg_int_value(r, cJSON_GetArrayItem(bs, i), "quantization_config.weight_block_size",
                             &cfg->fp8_block[i]));
        if (cfg->fp8_block[i] < 1)
            return mt_cfg_fail(r,
                               "key \"quantization_config.weight_block_size\": %d must be "
                               "positive",
                               cfg->fp8_block[i]);
    }
    cfg->fp8 = true;
    return true;
}

static char *cfg_read_file(mt_cfg_reader *r, const char *path, size_t *len) {
    return mt_file_read_max(path, len, (size_t)64 << 20, r->err, r->err_len); /* names path */
}

/* The family of model_type, its architecture, then its schema. */
static bool cfg_parse_family(mt_cfg_reader *r, const cJSON *root, const char *type,
                             mt_minimax_config *cfg) {
    static const mt_family *const families[] = {&mt_family_text01, &mt_family_m2, &mt_family_m3};
    const mt_family *f = NULL;
    bool orig = false;
    for (size_t i = 0; i < sizeof(families) / sizeof(families[0]) && !f; i++)
        if (families[i]->matches(type, &orig)) f = families[i];
    if (!f)
        return mt_cfg_fail(r,
                           "key \"model_type\": \"%s\" is not a supported MiniMax model (expected "
                           "\"minimax\" or \"minimax_text_01\" for MiniMax-Text-01, \"minimax_m2\" "
                           "for MiniMax-M2, \"minimax_m3_vl\", \"minimax_m3_vl_text\" or "
                           "\"minimax_m3\" for MiniMax-M3)",
                           type);
    const cJSON *arch = mt_cfg_get(root, "architectures");
    if (arch) {
        const cJSON *a = cJSON_IsArray(arch) ? cJSON_GetArrayItem(arch, 0) : NULL;
        char name[160];
        mt_cfg_head_arch(cJSON_IsString(a) ? a->valuestring : "", name, sizeof(name), &cfg->head);
        if (!f->arch_ok(name, orig) || cJSON_GetArraySize(arch) != 1)
            return mt_cfg_fail(r,
                               "key \"architectures\": \"%s\" is not a %s causal LM for model_type "
                               "\"%s\" (expected %s)",
                               name, f->name, type, f->arch_expected);
    }
    cfg->family = f;
    snprintf(cfg->model_type, sizeof(cfg->model_type), "%s", type);
    cfg->original_schema = orig;
    const cJSON *text = root; /* a VL config: its text_config */
    if (f->text_root) TRY(f->text_root(r, root, &text, cfg));
    TRY(f->parse(r, text, cfg));
    if (text != root) TRY(cfg_quantization(r, root, cfg));
    TRY(cfg_quantization(r, text, cfg));
    TRY(cfg_validate(r, text, cfg));
    if (f->check) TRY(f->check(r, text, cfg));
    TRY(mt_cfg_head_read(r, root, cfg));
    cfg->num_hidden_layers_source = cfg->num_hidden_layers;
    return true;
}

bool mt_minimax_config_parse(const char *path, mt_minimax_config *cfg, char *err, size_t err_len) {
    char full[4096];
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(full, sizeof(full), "%s/config.json", path);
        path = full;
    }
    mt_cfg_reader r = {path, err, err_len, NULL, 0};
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
        return mt_cfg_fail(&r, "line %d: malformed JSON", line);
    }
    r.text = text;
    r.len = len;
    bool ok = false;
    const cJSON *mt = mt_cfg_get(root, "model_type");
    char dup[256];
    if (!cJSON_IsObject(root)) {
        mt_cfg_fail(&r, "expected a JSON object");
    } else if (mt_json_duplicate_key(root, NULL, dup, sizeof(dup))) {
        mt_cfg_fail(&r, "key \"%s\" appears twice (transformers would take the last)", dup);
    } else if (!mt || !cJSON_IsString(mt)) {
        mt_cfg_fail(&r, "key \"model_type\" is missing");
    } else {
        const char *type = mt->valuestring;
        ok = cfg_parse_family(&r, root, type, cfg);
    }
    cJSON_Delete(root);
    free(text);
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
cJSON *mt_cfg_json_float(float v) {
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

void mt_cfg_json_token(cJSON *o, const char *key, int id) {
    cJSON_AddItemToObject(o, key, id < 0 ? cJSON_CreateNull() : cJSON_CreateNumber(id));
}

void mt_cfg_save_common(const mt_minimax_config *cfg, cJSON *o, const char *arch,
                        const char *model_type) {
    cJSON_AddItemToObject(o, "architectures", cJSON_CreateStringArray(&arch, 1));
    cJSON_AddStringToObject(o, "model_type", model_type);
    cJSON_AddNumberToObject(o, "vocab_size", cfg->vocab_size);
    cJSON_AddNumberToObject(o, "hidden_size", cfg->hidden_size);
    cJSON_AddNumberToObject(o, "intermediate_size", cfg->intermediate_size);
    cJSON_AddNumberToObject(o, "num_hidden_layers", cfg->num_hidden_layers);
    cJSON_AddNumberToObject(o, "num_attention_heads", cfg->num_attention_heads);
    cJSON_AddNumberToObject(o, "num_key_value_heads", cfg->num_key_value_heads);
    cJSON_AddNumberToObject(o, "head_dim", cfg->head_dim);
    cJSON_AddStringToObject(o, "hidden_act", "silu");
    cJSON_AddNumberToObject(o, "max_position_embeddings", cfg->max_position_embeddings);
    cJSON_AddItemToObject(o, "initializer_range", mt_cfg_json_float(cfg->initializer_range));
    cJSON_AddItemToObject(o, "rms_norm_eps", mt_cfg_json_float(cfg->rms_norm_eps));
    cJSON_AddNumberToObject(o, "num_local_experts", cfg->num_local_experts);
    cJSON_AddNumberToObject(o, "num_experts_per_tok", cfg->num_experts_per_tok);
    cJSON_AddBoolToObject(o, "output_router_logits", cfg->output_router_logits);
    cJSON_AddItemToObject(o, "router_aux_loss_coef", mt_cfg_json_float(cfg->router_aux_loss_coef));
    if (cfg->router_jitter_noise > 0)
        cJSON_AddItemToObject(o, "router_jitter_noise",
                              mt_cfg_json_float(cfg->router_jitter_noise));
    else
        cJSON_AddItemToObject(o, "router_jitter_noise", cJSON_CreateRaw("0.0"));
    cJSON_AddItemToObject(o, "attention_dropout", cJSON_CreateRaw("0.0"));
    if (cfg->sliding_window > 0)
        cJSON_AddNumberToObject(o, "sliding_window", cfg->sliding_window);
    else
        cJSON_AddNullToObject(o, "sliding_window");
    cJSON_AddBoolToObject(o, "tie_word_embeddings", false);
    mt_cfg_json_token(o, "bos_token_id", cfg->bos_token_id);
    mt_cfg_json_token(o, "eos_token_id", cfg->eos_token_id);
    mt_cfg_json_token(o, "pad_token_id", cfg->pad_token_id);
}

void mt_minimax_config_save_json(const mt_minimax_config *cfg, const char *path, mt_naming naming) {
    cJSON *o = cJSON_CreateObject();
    mt_config_family(cfg)->save(cfg, o, naming == MT_NAMING_ORIGINAL);
    mt_cfg_head_save(cfg, o);
    char *text = cJSON_Print(o);
    MT_CHECK(text, "config: cannot format %s", path);
    size_t n = strlen(text);
    text[n] = '\n'; /* replaces the terminator: the file ends with a newline */
    mt_file_write_atomic(path, text, n + 1);
    cJSON_free(text);
    cJSON_Delete(o);
}

const mt_family *mt_config_family(const mt_minimax_config *cfg) {
    return cfg->family ? cfg->family : &mt_family_text01;
}

void mt_config_layer_plan(const mt_minimax_config *cfg, int l, mt_layer_plan *p) {
    MT_CHECK(l >= 0 && l < cfg->num_hidden_layers, "config: layer %d of %d", l,
             cfg->num_hidden_layers);
    memset(p, 0, sizeof(*p));
    mt_config_family(cfg)->plan(cfg, l, p);
}

bool mt_minimax_config_readable(const char *dir, char *err, size_t n) {
    char path[4200];
    snprintf(path, sizeof(path), "%s/config.json", dir);
    if (access(path, R_OK) == 0) return true;
    snprintf(err, n, "%s: cannot read the model's config (--model DIR)", path);
    return false;
}
