/* recipe.c: the key table and the checks behind mt_recipe_load. */
#include "recipe.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/dataset.h"
#include "data/sample.h"
#include "data/tokenizer.h"
#include "jinja/jinja.h"
#include "models/generate.h"
#include "models/minimax.h"
#include "train/recipe_internal.h"
#include "train/schedule.h"

typedef enum {
    KEY_STRING,
    KEY_INT,
    KEY_INT64,
    KEY_FLOAT,
    KEY_BOOL,
    KEY_STRINGS,
    KEY_FLOATS
} key_type;

typedef struct {
    const char *key;
    key_type type;
    size_t offset, size;   /* size: for strings, the buffer size */
    const char *def;       /* default, in TOML syntax */
    mt_resume_rule resume; /* numerics (true): part of the resume hash; may change (false) */
    size_t count_offset;   /* arrays: where their length is */
} recipe_key;

#define STR(k, field, def, num)                                                                    \
    { k, KEY_STRING, offsetof(mt_recipe, field), sizeof(((mt_recipe *)0)->field), def, num, 0 }
#define INT(k, field, def, num)                                                                    \
    { k, KEY_INT, offsetof(mt_recipe, field), sizeof(int), def, num, 0 }
#define I64(k, field, def, num)                                                                    \
    { k, KEY_INT64, offsetof(mt_recipe, field), sizeof(int64_t), def, num, 0 }
#define FLT(k, field, def, num)                                                                    \
    { k, KEY_FLOAT, offsetof(mt_recipe, field), sizeof(double), def, num, 0 }
#define BOOL(k, field, def, num)                                                                   \
    { k, KEY_BOOL, offsetof(mt_recipe, field), sizeof(bool), def, num, 0 }
/* arrays: the items, then their count in field `count` (an int) */
#define STRS(k, field, count, def, num)                                                            \
    {                                                                                              \
        k, KEY_STRINGS, offsetof(mt_recipe, field), sizeof(((mt_recipe *)0)->field[0]), def, num,  \
            offsetof(mt_recipe, count)                                                             \
    }
#define FLTS(k, field, count, def, num)                                                            \
    {                                                                                              \
        k, KEY_FLOATS, offsetof(mt_recipe, field), sizeof(double), def, num,                       \
            offsetof(mt_recipe, count)                                                             \
    }

/* the batch layout: numerics, but a resume compares the global batch it gives instead */
#define LAYOUT MT_RESUME_LAYOUT
static const recipe_key recipe_keys[] = {
    STR("model.path", model_path, "\"\"", true),
    STR("model.config", model_config, "\"\"", true),
    INT("model.num_hidden_layers", model_num_hidden_layers, "0", true),
    STR("model.dtype", model_dtype, "\"fp32\"", true),
    I64("model.init_seed", model_init_seed, "42", true),
    STR("data.path", data_path, "\"synthetic\"", true),
    STRS("data.paths", data_paths, data_n_paths, "[]", true),
    FLTS("data.weights", data_weights, data_n_weights, "[]", true),
    STR("data.format", data_format, "\"auto\"", true),
    STR("data.train_on", data_train_on, "\"all_assistant\"", true),
    STR("data.reasoning_history", data_reasoning_history, "\"as_template\"", true),
    BOOL("data.sanitize_control_tokens", data_sanitize_control_tokens, "false", true),
    STR("data.chat_template", data_chat_template, "\"\"", true),
    STR("data.template_kwargs", data_template_kwargs, "\"\"", true),
    INT("data.synthetic_samples", data_synthetic_samples, "2000", true),
    STR("data.synthetic_kind", data_synthetic_kind, "\"gsm8k\"", true),
    STR("data.tokenizer_dir", data_tokenizer_dir, "\"\"", true),
    STR("data.cache_dir", data_cache_dir, "\"\"", false),
    STR("data.system_prompt", data_system_prompt, "\"\"", true),
    INT("data.max_length", data_max_length, "512", true),
    STR("data.truncation", data_truncation, "\"drop\"", true),
    BOOL("data.packing", data_packing, "false", true),
    BOOL("data.trim_padding", data_trim_padding, "true", true),
    BOOL("data.shuffle", data_shuffle, "false", true),
    I64("data.seed", data_seed, "42", true),
    BOOL("data.strip_annotations", data_strip_annotations, "false", true),
    INT("data.eval_samples", data_eval_samples, "0", true),
    STR("data.eval_path", data_eval_path, "\"\"", false),
    INT("train.max_steps", train_max_steps, "300", false),
    INT("train.eval_steps", train_eval_steps, "0", false),
    BOOL("train.eval_on_start", train_eval_on_start, "false", false),
    INT("train.per_device_train_batch_size", train_per_device_train_batch_size, "1", LAYOUT),
    INT("train.gradient_accumulation_steps", train_gradient_accumulation_steps, "1", LAYOUT),
    INT("train.global_batch_size", train_global_batch_size, "0", false),
    FLT("train.learning_rate", train_learning_rate, "1e-5", true),
    FLT("train.num_train_epochs", train_num_train_epochs, "0.0", false),
    STR("train.lr_scheduler_type", train_lr_scheduler_type, "\"constant\"", true),
    INT("train.warmup_steps", train_warmup_steps, "0", true),
    FLT("train.warmup_ratio", train_warmup_ratio, "0.0", true),
    FLT("train.min_lr_ratio", train_min_lr_ratio, "0.0", true),
    FLT("train.wsd_decay_ratio", train_wsd_decay_ratio, "0.1", true),
    FLT("train.weight_decay", train_weight_decay, "0.0", true),
    FLT("train.adam_beta1", train_adam_beta1, "0.9", true),
    FLT("train.adam_beta2", train_adam_beta2, "0.999", true),
    FLT("train.adam_epsilon", train_adam_epsilon, "1e-8", true),
    FLT("train.max_grad_norm", train_max_grad_norm, "1.0", true),
    I64("train.seed", train_seed, "42", true),
    FLT("train.router_aux_loss_coef", train_router_aux_loss_coef, "-1.0", true),
    BOOL("train.skip_nonfinite_steps", train_skip_nonfinite_steps, "false", true),
    BOOL("train.gradient_checkpointing", train_gradient_checkpointing, "false", false),
    STR("eval.generate_data", eval_generate_data, "\"\"", false),
    INT("eval.generate_samples", eval_generate_samples, "0", false),
    INT("eval.generate_max_new_tokens", eval_generate_max_new_tokens, "256", false),
    INT("eval.generate_batch", eval_generate_batch, "8", false),
    INT("eval.generate_every", eval_generate_every, "0", false),
    BOOL("eval.generate_at_end", eval_generate_at_end, "true", false),
    INT("eval.generate_shots", eval_generate_shots, "0", false),
    STR("eval.generate_shots_file", eval_generate_shots_file, "\"\"", false),
    FLT("eval.generate_temperature", eval_generate_temperature, "0.0", false),
    FLT("eval.generate_top_p", eval_generate_top_p, "1.0", false),
    INT("eval.generate_top_k", eval_generate_top_k, "0", false),
    I64("eval.generate_seed", eval_generate_seed, "0", false),
    STR("eval.generate_weights", eval_generate_weights, "\"auto\"", false),
    STR("output.dir", output_dir, "\"runs/out\"", false),
    INT("output.save_steps", output_save_steps, "0", false),
    INT("output.save_total_limit", output_save_total_limit, "0", false),
    BOOL("output.export", output_export, "true", false),
    STR("output.export_dtype", output_export_dtype, "\"bf16\"", false),
    I64("output.shard_bytes", output_shard_bytes, "5000000000", false),
    STR("dist.backend", dist_backend, "\"mpi\"", false),
    BOOL("dist.prefetch", dist_prefetch, "true", false),
    STR("dist.gather_unit", dist_gather_unit, "\"layer\"", true),
    STR("dist.gather_dtype", dist_gather_dtype, "\"fp32\"", true),
    I64("dist.arena_mb", dist_arena_mb, "1024", false),
    INT("dist.expert_parallel", dist_expert_parallel, "1", true),
    BOOL("dist.offload_optimizer", dist_offload_optimizer, "false", false),
    FLT("dist.timeout", dist_timeout, "-1", false),
};
#define N_RECIPE_KEYS ((int)(sizeof(recipe_keys) / sizeof(recipe_keys[0])))

bool mt_recipe_key_at(int i, const char **key, const char **def, bool *numerics) {
    if (i < 0 || i >= N_RECIPE_KEYS) return false;
    *key = recipe_keys[i].key;
    *def = recipe_keys[i].def;
    *numerics = recipe_keys[i].resume != MT_RESUME_FREE;
    return true;
}

mt_resume_rule mt_recipe_key_rule(int i) {
    return i >= 0 && i < N_RECIPE_KEYS ? recipe_keys[i].resume : MT_RESUME_FREE;
}

static const recipe_key *recipe_key_find(const char *key) {
    for (int i = 0; i < N_RECIPE_KEYS; i++)
        if (!strcmp(recipe_keys[i].key, key)) return &recipe_keys[i];
    return NULL;
}

void mt_recipe_entry_where(const mt_toml_entry *e, char *buf, size_t len) {
    if (e->line > 0)
        snprintf(buf, len, "%s:%d:%d", e->origin, e->line, e->col);
    else
        snprintf(buf, len, "--set %s", e->key);
}

/* data.paths, data.weights: a TOML array of at most MT_DATA_FILES strings or numbers. */
static bool recipe_assign_list(mt_recipe *r, const recipe_key *k, const mt_toml_entry *e,
                               const char *where, char *err, size_t errlen) {
    const mt_toml_value *v = &e->value;
    const bool strings = k->type == KEY_STRINGS;
    bool ok = v->type == MT_TOML_ARRAY && v->n_items <= MT_DATA_FILES;
    for (int i = 0; ok && i < v->n_items; i++) {
        const mt_toml_type t = v->items[i].type;
        ok = strings ? t == MT_TOML_STRING && strlen(v->items[i].s) < k->size
                     : t == MT_TOML_FLOAT || t == MT_TOML_INT;
    }
    if (!ok) {
        if (strings)
            snprintf(err, errlen,
                     "%s: %s must be a list of at most %d paths (each shorter than %d "
                     "bytes)",
                     where, k->key, MT_DATA_FILES, MT_PATH_MAX);
        else
            snprintf(err, errlen, "%s: %s must be a list of at most %d numbers", where, k->key,
                     MT_DATA_FILES);
        return false;
    }
    char *dst = (char *)r + k->offset;
    for (int i = 0; i < v->n_items; i++) {
        const mt_toml_value *it = &v->items[i];
        if (strings)
            memcpy(dst + (size_t)i * k->size, it->s, strlen(it->s) + 1);
        else
            ((double *)dst)[i] = it->type == MT_TOML_INT ? (double)it->i : it->f;
    }
    *(int *)((char *)r + k->count_offset) = v->n_items;
    return true;
}

static bool recipe_assign(mt_recipe *r, const recipe_key *k, const mt_toml_entry *e, char *err,
                          size_t errlen) {
    char where[MT_PATH_MAX + 64];
    mt_recipe_entry_where(e, where, sizeof(where));
    const mt_toml_value *v = &e->value;
    void *dst = (char *)r + k->offset;
    static const char *want[] = {"a string", "an integer", "an integer", "a number",
                                 "true or false"};
    if (k->type == KEY_STRINGS || k->type == KEY_FLOATS)
        return recipe_assign_list(r, k, e, where, err, errlen);
    bool ok = (k->type == KEY_STRING && v->type == MT_TOML_STRING) ||
              ((k->type == KEY_INT || k->type == KEY_INT64) && v->type == MT_TOML_INT) ||
              (k->type == KEY_FLOAT && (v->type == MT_TOML_FLOAT || v->type == MT_TOML_INT)) ||
              (k->type == KEY_BOOL && v->type == MT_TOML_BOOL);
    if (!ok) {
        snprintf(err, errlen, "%s: %s must be %s, not %s", where, k->key, want[k->type],
                 mt_toml_type_name(v->type));
        return false;
    }
    switch (k->type) {
    case KEY_STRING:
        if (strlen(v->s) >= k->size) {
            snprintf(err, errlen, "%s: %s is longer than %zu bytes", where, k->key, k->size - 1);
            return false;
        }
        memcpy(dst, v->s, strlen(v->s) + 1);
        break;
    case KEY_INT:
        if (v->i < -2147483647 || v->i > 2147483647) {
            snprintf(err, errlen, "%s: %s = %lld is out of range", where, k->key, (long long)v->i);
            return false;
        }
        *(int *)dst = (int)v->i;
        break;
    case KEY_INT64:
        *(int64_t *)dst = v->i;
        break;
    case KEY_FLOAT:
        *(double *)dst = v->type == MT_TOML_INT ? (double)v->i : v->f;
        break;
    case KEY_BOOL:
        *(bool *)dst = v->b;
        break;
    default:
        break;
    }
    return true;
}

/* Why directory `path` cannot be made or written into, or NULL when it is one, or can be made:
 * a file there, or a file where one of its parents should be. */
static const char *recipe_dir_problem(const char *path) {
    struct stat st;
    if (stat(path, &st) == 0) return S_ISDIR(st.st_mode) ? NULL : "is a file, not a directory";
    return errno == ENOTDIR ? "cannot be a directory: a part of its path is a file" : NULL;
}

/* One line "where: key: reason" into err, and false from the function. */
#define BAD(key, ...)                                                                              \
    do {                                                                                           \
        const mt_toml_entry *e_ = mt_toml_find(doc, key);                                          \
        char where_[MT_PATH_MAX + 64] = "recipe";                                                  \
        if (e_) mt_recipe_entry_where(e_, where_, sizeof(where_));                                 \
        int n_ = snprintf(err, errlen, "%s: %s: ", where_, key);                                   \
        snprintf(err + n_, errlen - n_, __VA_ARGS__);                                              \
        return false;                                                                              \
    } while (0)

/* The chat-template keys (docs/templates.md) and the synthetic data's kind. */
static bool recipe_validate_chat(const mt_recipe *r, const mt_toml_doc *doc, char *err,
                                 size_t errlen) {
    if (mt_reasoning_history_parse(r->data_reasoning_history) < 0)
        BAD("data.reasoning_history", "must be as_template or split, not \"%s\"",
            r->data_reasoning_history);
    if (r->data_chat_template[0] && access(r->data_chat_template, R_OK) != 0)
        BAD("data.chat_template", "cannot read %s", r->data_chat_template);
    if (r->data_template_kwargs[0]) {
        jinja_heap *h = jinja_heap_new(0);
        jinja_value v = {0};
        char why[256] = "not an object";
        const bool json =
            jinja_json_parse(h, r->data_template_kwargs, strlen(r->data_template_kwargs), &v, why,
                             sizeof(why)) == 0;
        jinja_heap_free(h);
        if (!json || v.type != JINJA_DICT)
            BAD("data.template_kwargs",
                "a [data.template_kwargs] table, or a JSON object as a string, is expected (%s)",
                json ? "not an object" : why);
    }
    if (strcmp(r->data_synthetic_kind, "gsm8k") && strcmp(r->data_synthetic_kind, "agentic"))
        BAD("data.synthetic_kind", "must be gsm8k or agentic, not \"%s\"", r->data_synthetic_kind);
    return true;
}

/* Value checks that need no files: ranges and enumerations. */
/* [model], [data] and the batch: the files there before any rank allocates a model. */
static bool recipe_validate_inputs(const mt_recipe *r, const mt_toml_doc *doc, char *err,
                                   size_t errlen) {
    if (!r->model_path[0] && !r->model_config[0])
        BAD("model.path", "set model.path (an HF model dir) or model.config (random init)");
    /* the files must be there before any rank allocates a model */
    char file[MT_PATH_MAX + 64];
    if (r->model_path[0]) {
        snprintf(file, sizeof(file), "%s/config.json", r->model_path);
        if (access(r->model_path, F_OK) != 0)
            BAD("model.path", "directory %s does not exist", r->model_path);
        if (access(file, R_OK) != 0)
            BAD("model.path", "%s is not a model directory (no readable config.json)",
                r->model_path);
    } else if (access(r->model_config, R_OK) != 0) {
        BAD("model.config", "cannot read %s", r->model_config);
    }
    /* an empty data.path would read as "both set" below, and data.paths = [] as "unset" (the
     * synthetic data): both name no file. A resolved recipe (recipe.toml) lists data.paths =
     * [] beside its data.path, which says what to read. */
    if (!r->data_path[0])
        BAD("data.path", "is empty: name a jsonl file or \"synthetic\"%s",
            r->data_n_paths ? " (with data.paths, leave data.path out)" : "");
    const mt_toml_entry *paths_e = mt_toml_find(doc, "data.paths");
    if (paths_e && r->data_n_paths == 0 && !mt_toml_find(doc, "data.path"))
        BAD("data.paths", "is an empty list: name the files to read (or leave data.paths out "
                          "and set data.path)");
    if (r->data_n_paths > 0 && strcmp(r->data_path, "synthetic"))
        BAD("data.paths", "set data.path or data.paths, not both (data.path is \"%s\")",
            r->data_path);
    if (r->data_n_paths == 0 && strcmp(r->data_path, "synthetic") &&
        access(r->data_path, R_OK) != 0)
        BAD("data.path", "cannot read %s", r->data_path);
    for (int i = 0; i < r->data_n_paths; i++)
        if (access(r->data_paths[i], R_OK) != 0)
            BAD("data.paths", "cannot read %s (entry %d)", r->data_paths[i], i);
    if (r->data_n_weights > 0 && r->data_n_weights != r->data_n_paths)
        BAD("data.weights",
            "%d weights for %d data.paths (one per file, or none: the files "
            "concatenated)",
            r->data_n_weights, r->data_n_paths);
    for (int i = 0; i < r->data_n_weights; i++)
        if (!(r->data_weights[i] > 0) || !isfinite(r->data_weights[i]))
            BAD("data.weights", "entry %d is %g; weights must be finite and > 0", i,
                r->data_weights[i]);
    if (mt_data_format_parse(r->data_format) < 0)
        BAD("data.format", "\"%s\" is not a format; one of %s", r->data_format,
            mt_data_format_list());
    if (strcmp(r->data_train_on, "all_assistant") && strcmp(r->data_train_on, "last_assistant"))
        BAD("data.train_on", "must be all_assistant or last_assistant, not \"%s\"",
            r->data_train_on);
    if (!recipe_validate_chat(r, doc, err, errlen)) return false;
    snprintf(file, sizeof(file), "%s/tokenizer.json",
             r->data_tokenizer_dir[0] ? r->data_tokenizer_dir : r->model_path);
    if ((r->data_tokenizer_dir[0] || r->model_path[0]) && access(file, R_OK) != 0)
        BAD(r->data_tokenizer_dir[0] ? "data.tokenizer_dir" : "model.path", "cannot read %s", file);
    if (r->model_num_hidden_layers < 0) BAD("model.num_hidden_layers", "must be >= 0");
    if (strcmp(r->model_dtype, "fp32") && strcmp(r->model_dtype, "bf16"))
        BAD("model.dtype", "must be \"fp32\" or \"bf16\", not \"%s\"", r->model_dtype);
    if (r->data_synthetic_samples <= 0) BAD("data.synthetic_samples", "must be > 0");
    if (!r->data_tokenizer_dir[0] && !r->model_path[0])
        BAD("data.tokenizer_dir", "set it (or model.path, whose tokenizer files are used)");
    if (r->data_max_length < 2) BAD("data.max_length", "must be >= 2");
    if (strcmp(r->data_truncation, "drop") && strcmp(r->data_truncation, "truncate"))
        BAD("data.truncation", "must be \"drop\" or \"truncate\", not \"%s\"", r->data_truncation);
    if (r->data_eval_samples < 0)
        BAD("data.eval_samples", "must be >= 0 (0: no evaluation, or all of data.eval_path)");
    if (r->data_eval_path[0] && access(r->data_eval_path, R_OK) != 0)
        BAD("data.eval_path", "cannot read %s", r->data_eval_path);
    if (r->train_max_steps <= 0) BAD("train.max_steps", "must be > 0");
    if (r->train_eval_steps < 0)
        BAD("train.eval_steps", "must be >= 0 (0: evaluate after the last step only)");
    if (r->train_eval_steps > 0 && r->data_eval_samples == 0 && !r->data_eval_path[0])
        BAD("train.eval_steps", "needs data.eval_samples > 0 or data.eval_path: the samples to "
                                "evaluate on");
    if (r->train_eval_on_start && r->data_eval_samples == 0 && !r->data_eval_path[0])
        BAD("train.eval_on_start", "needs data.eval_samples > 0 or data.eval_path: the samples "
                                   "to evaluate on");
    if (r->train_per_device_train_batch_size <= 0)
        BAD("train.per_device_train_batch_size", "must be > 0");
    return true;
}

/* [eval]: accuracy by generation. */
static bool recipe_validate_generate(const mt_recipe *r, const mt_toml_doc *doc, char *err,
                                     size_t errlen) {
    /* [eval]: generation needs eval.generate_data (train/trainer_generate.c); a resolved
     * recipe (recipe.toml) lists every key, so only values that ask for it count */
    const bool gen_synthetic = !strcmp(r->eval_generate_data, "synthetic");
    if (!r->eval_generate_data[0] && r->eval_generate_every > 0)
        BAD("eval.generate_every", "needs eval.generate_data (a GSM8K-style jsonl, or "
                                   "\"synthetic\"): the problems to generate answers for");
    if (!r->eval_generate_data[0] && r->eval_generate_samples > 0)
        BAD("eval.generate_samples", "needs eval.generate_data (a GSM8K-style jsonl, or "
                                     "\"synthetic\"): the problems to generate answers for");
    if (r->eval_generate_data[0] && !gen_synthetic && access(r->eval_generate_data, R_OK) != 0)
        BAD("eval.generate_data", "cannot read %s (a GSM8K-style jsonl, or \"synthetic\")",
            r->eval_generate_data);
    if (r->eval_generate_samples < 0)
        BAD("eval.generate_samples", "must be >= 0 (0: all of eval.generate_data)");
    if (gen_synthetic && r->eval_generate_samples == 0)
        BAD("eval.generate_samples",
            "must be > 0 with eval.generate_data = \"synthetic\" (how many problems)");
    if (r->eval_generate_max_new_tokens < 1 || r->eval_generate_max_new_tokens > 100000)
        BAD("eval.generate_max_new_tokens", "must be in [1, 100000]");
    if (r->eval_generate_batch < 1 || r->eval_generate_batch > MT_GEN_BATCH_MAX)
        BAD("eval.generate_batch", "must be in [1, %d] (a decode step's rows: models/generate.h)",
            MT_GEN_BATCH_MAX);
    if (r->eval_generate_every < 0)
        BAD("eval.generate_every", "must be >= 0 (0: not between steps)");
    if (r->eval_generate_shots < 0 || r->eval_generate_shots > 64)
        BAD("eval.generate_shots", "must be in [0, 64]");
    if (r->eval_generate_shots > 0 && !r->eval_generate_shots_file[0])
        BAD("eval.generate_shots", "needs eval.generate_shots_file (the solved examples, a "
                                   "GSM8K-style jsonl: a train split)");
    if (r->eval_generate_shots_file[0] && access(r->eval_generate_shots_file, R_OK) != 0)
        BAD("eval.generate_shots_file", "cannot read %s", r->eval_generate_shots_file);
    if (strcmp(r->eval_generate_weights, "auto") && strcmp(r->eval_generate_weights, "replica") &&
        strcmp(r->eval_generate_weights, "gathered"))
        BAD("eval.generate_weights", "must be \"auto\", \"replica\" or \"gathered\", not \"%s\"",
            r->eval_generate_weights);
    if (!(r->eval_generate_temperature >= 0) || !isfinite(r->eval_generate_temperature))
        BAD("eval.generate_temperature", "must be a finite number >= 0 (0: greedy)");
    if (!(r->eval_generate_top_p > 0 && r->eval_generate_top_p <= 1))
        BAD("eval.generate_top_p", "must be in (0, 1] (1: no nucleus cut), not %g",
            r->eval_generate_top_p);
    if (r->eval_generate_top_k < 0) BAD("eval.generate_top_k", "must be >= 0 (0: no top-k cut)");
    return true;
}

/* The optimizer and the schedule. */
static bool recipe_validate_optimizer(const mt_recipe *r, const mt_toml_doc *doc, char *err,
                                      size_t errlen) {
    if (r->train_gradient_accumulation_steps <= 0)
        BAD("train.gradient_accumulation_steps", "must be > 0");
    if (r->train_global_batch_size < 0)
        BAD("train.global_batch_size", "must be >= 0 (0: per-device batch x accumulation x ranks)");
    if (!(r->train_learning_rate >= 0) || !isfinite(r->train_learning_rate))
        BAD("train.learning_rate", "must be a finite number >= 0");
    if (!isfinite(r->train_max_grad_norm))
        BAD("train.max_grad_norm", "must be a finite number (<= 0: no clipping), not %g",
            r->train_max_grad_norm);
    if (mt_lr_kind_parse(r->train_lr_scheduler_type) < 0)
        BAD("train.lr_scheduler_type", "must be one of %s, not \"%s\"", mt_lr_kind_list(),
            r->train_lr_scheduler_type);
    if (r->train_warmup_steps < 0) BAD("train.warmup_steps", "must be >= 0");
    if (!(r->train_num_train_epochs >= 0) || !isfinite(r->train_num_train_epochs))
        BAD("train.num_train_epochs", "must be a finite number >= 0 (0: train.max_steps)");
    if (!(r->train_warmup_ratio >= 0 && r->train_warmup_ratio < 1))
        BAD("train.warmup_ratio", "must be in [0, 1)");
    if (r->train_warmup_ratio > 0 && r->train_warmup_steps > 0)
        BAD("train.warmup_ratio", "set train.warmup_steps or train.warmup_ratio, not both");
    if (!(r->train_min_lr_ratio >= 0 && r->train_min_lr_ratio <= 1))
        BAD("train.min_lr_ratio", "must be in [0, 1]");
    if (!(r->train_wsd_decay_ratio > 0 && r->train_wsd_decay_ratio <= 1))
        BAD("train.wsd_decay_ratio", "must be in (0, 1]");
    if (!(r->train_weight_decay >= 0)) BAD("train.weight_decay", "must be >= 0");
    if (!(r->train_adam_beta1 >= 0 && r->train_adam_beta1 < 1))
        BAD("train.adam_beta1", "must be in [0, 1)");
    if (!(r->train_adam_beta2 >= 0 && r->train_adam_beta2 < 1))
        BAD("train.adam_beta2", "must be in [0, 1)");
    if (!(r->train_adam_epsilon > 0)) BAD("train.adam_epsilon", "must be > 0");
    return true;
}

/* [output] and [dist]. */
static bool recipe_validate_output(const mt_recipe *r, const mt_toml_doc *doc, char *err,
                                   size_t errlen) {
    if (!r->output_dir[0]) BAD("output.dir", "must not be empty");
    /* else the first write says "recipe.toml.tmp.PID: cannot create: Not a directory" */
    const char *why = recipe_dir_problem(r->output_dir);
    if (why) BAD("output.dir", "%s %s", r->output_dir, why);
    if (r->data_cache_dir[0] && (why = recipe_dir_problem(r->data_cache_dir)))
        BAD("data.cache_dir", "%s %s", r->data_cache_dir, why);
    if (r->output_save_steps < 0) BAD("output.save_steps", "must be >= 0");
    if (r->output_save_total_limit < 0)
        BAD("output.save_total_limit", "must be >= 0 (0: keep every checkpoint)");
    if (strcmp(r->output_export_dtype, "fp32") && strcmp(r->output_export_dtype, "bf16"))
        BAD("output.export_dtype", "must be \"fp32\" or \"bf16\"");
    if (r->output_shard_bytes < (1 << 20)) BAD("output.shard_bytes", "must be >= 1 MiB");
    if (strcmp(r->dist_backend, "mpi") && strcmp(r->dist_backend, "nccl"))
        BAD("dist.backend", "must be \"mpi\" or \"nccl\", not \"%s\"", r->dist_backend);
    if (r->dist_arena_mb <= 0) BAD("dist.arena_mb", "must be > 0");
    if (r->dist_arena_mb > ((int64_t)1 << 30)) /* in bytes it must fit an int64 */
        BAD("dist.arena_mb", "%lld MiB is more than any machine has (at most 2^30 MiB)",
            (long long)r->dist_arena_mb);
    if ((int64_t)r->train_per_device_train_batch_size * r->data_max_length > INT_MAX)
        BAD("data.max_length",
            "train.per_device_train_batch_size x data.max_length = %d x %d = %lld tokens per "
            "micro-batch; positions and kernel dimensions are int (at most %d)",
            r->train_per_device_train_batch_size, r->data_max_length,
            (long long)r->train_per_device_train_batch_size * r->data_max_length, INT_MAX);
    if (!(r->dist_timeout >= 0 || r->dist_timeout == -1))
        BAD("dist.timeout", "must be >= 0 seconds (0: no limit), or -1 (automatic)");
    if (strcmp(r->dist_gather_dtype, "fp32") && strcmp(r->dist_gather_dtype, "bf16"))
        BAD("dist.gather_dtype", "must be \"fp32\" or \"bf16\", not \"%s\"", r->dist_gather_dtype);
    if (strcmp(r->dist_gather_unit, "layer") && strcmp(r->dist_gather_unit, "expert"))
        BAD("dist.gather_unit", "must be \"layer\" or \"expert\", not \"%s\"", r->dist_gather_unit);
    return true;
}
#undef BAD

/* Checks against the model config and the tokenizer, when both read (a file that does not
 * read is reported where the trainer loads it): the tokens of one micro-batch within what the
 * kernels index, and no token id beyond the model's vocabulary. Before anything is written or
 * allocated: otherwise these fail in an op deep inside the first forward, or at step 1 in the
 * embedding, or never (ids the data happens not to use). */
static bool recipe_check_model(const mt_recipe *r, const mt_toml_doc *doc, char *err,
                               size_t errlen) {
    char path[MT_PATH_MAX + 64], why[1024];
    if (r->model_path[0])
        snprintf(path, sizeof(path), "%s/config.json", r->model_path);
    else
        snprintf(path, sizeof(path), "%s", r->model_config);
    mt_minimax_config cfg;
    if (!mt_minimax_config_parse(path, &cfg, why, sizeof(why))) return true;
    if (!mt_recipe_aux_check(r, doc, &cfg, err, errlen)) return false;
    const char *where_key = NULL;
    char msg[4096];
    const mt_gather_unit unit =
        strcmp(r->dist_gather_unit, "expert") == 0 ? MT_GATHER_EXPERT : MT_GATHER_LAYER;
    const int64_t tokens = (int64_t)r->train_per_device_train_batch_size * r->data_max_length,
                  most = mt_minimax_max_tokens(&cfg, unit);
    if (tokens > most) {
        where_key = "data.max_length";
        snprintf(msg, sizeof(msg),
                 "train.per_device_train_batch_size x data.max_length = %d x %d = %lld tokens per "
                 "micro-batch; the kernels of %s (hidden_size %d, num_experts_per_tok %d, "
                 "dist.gather_unit \"%s\") index at most %lld",
                 r->train_per_device_train_batch_size, r->data_max_length, (long long)tokens, path,
                 cfg.hidden_size, cfg.num_experts_per_tok, r->dist_gather_unit, (long long)most);
    } else {
        const char *dir = r->data_tokenizer_dir[0] ? r->data_tokenizer_dir : r->model_path;
        char tok_path[MT_PATH_MAX + 64];
        snprintf(tok_path, sizeof(tok_path), "%s/tokenizer.json", dir);
        mt_tokenizer *tok = mt_tokenizer_try_load(tok_path, why, sizeof(why));
        const int32_t ids = tok ? mt_tokenizer_vocab_size(tok) : 0;
        mt_tokenizer_free(tok);
        if (ids > cfg.vocab_size) {
            where_key = r->data_tokenizer_dir[0] ? "data.tokenizer_dir" : "model.path";
            snprintf(msg, sizeof(msg),
                     "%s has %d token ids but the model's vocab_size is %d (%s): ids %d to %d "
                     "would have no embedding row",
                     tok_path, ids, cfg.vocab_size, path, cfg.vocab_size, ids - 1);
        }
    }
    if (!where_key) return true;
    const mt_toml_entry *e = mt_toml_find(doc, where_key);
    char where[MT_PATH_MAX + 64] = "recipe";
    if (e) mt_recipe_entry_where(e, where, sizeof(where));
    snprintf(err, errlen, "%s: %s: %s", where, where_key, msg);
    return false;
}

/* train.seed, as HF's TrainingArguments.seed: the one seed of a run. data.seed and
 * model.init_seed, where the recipe and the overrides leave them unset, take its value. */
#define KWARGS_PREFIX "data.template_kwargs."

/* A TOML value as JSON text appended to out (n bytes); false for a value JSON has not (nan). */
static bool toml_to_json(const mt_toml_value *v, char *out, size_t n) {
    size_t at = strlen(out);
    switch (v->type) {
    case MT_TOML_STRING:
        snprintf(out + at, n - at, "\"");
        for (const unsigned char *c = (const unsigned char *)v->s; *c; c++) {
            at = strlen(out);
            if (*c == '"' || *c == '\\')
                snprintf(out + at, n - at, "\\%c", *c);
            else if (*c < 0x20)
                snprintf(out + at, n - at, "\\u%04x", *c);
            else
                snprintf(out + at, n - at, "%c", *c);
        }
        snprintf(out + strlen(out), n - strlen(out), "\"");
        return true;
    case MT_TOML_INT:
        snprintf(out + at, n - at, "%lld", (long long)v->i);
        return true;
    case MT_TOML_FLOAT:
        if (!isfinite(v->f)) return false;
        snprintf(out + at, n - at, "%.17g%s", v->f,
                 v->f == floor(v->f) && fabs(v->f) < 1e16 ? ".0" : "");
        return true;
    case MT_TOML_BOOL:
        snprintf(out + at, n - at, "%s", v->b ? "true" : "false");
        return true;
    case MT_TOML_ARRAY:
        snprintf(out + at, n - at, "[");
        for (int i = 0; i < v->n_items; i++) {
            if (i) snprintf(out + strlen(out), n - strlen(out), ", ");
            if (!toml_to_json(&v->items[i], out, n)) return false;
        }
        snprintf(out + strlen(out), n - strlen(out), "]");
        return true;
    }
    return false;
}

/* The keys of a [data.template_kwargs] table into data.template_kwargs as one JSON object (the
 * template variables of data/chat.h). */
static bool recipe_collect_kwargs(mt_recipe *r, const mt_toml_doc *doc, char *err, size_t errlen) {
    char json[sizeof(r->data_template_kwargs)] = "{";
    int n = 0;
    for (int i = 0; i < doc->n; i++) {
        const mt_toml_entry *e = &doc->entries[i];
        if (strncmp(e->key, KWARGS_PREFIX, strlen(KWARGS_PREFIX))) continue;
        const char *name = e->key + strlen(KWARGS_PREFIX);
        char where[MT_PATH_MAX + 64];
        mt_recipe_entry_where(e, where, sizeof(where));
        if (mt_toml_find(doc, "data.template_kwargs")) {
            snprintf(err, errlen,
                     "%s: data.template_kwargs is set as a string and as a table: keep one", where);
            return false;
        }
        if (strchr(name, '.')) {
            snprintf(err, errlen,
                     "%s: %s: nested tables are not taken here; give data.template_kwargs as a "
                     "JSON object string",
                     where, e->key);
            return false;
        }
        mt_toml_value key = {.type = MT_TOML_STRING, .s = (char *)name};
        if (n++) snprintf(json + strlen(json), sizeof(json) - strlen(json), ", ");
        toml_to_json(&key, json, sizeof(json));
        snprintf(json + strlen(json), sizeof(json) - strlen(json), ": ");
        if (!toml_to_json(&e->value, json, sizeof(json))) {
            snprintf(err, errlen, "%s: %s: not a value JSON can hold (nan, inf)", where, e->key);
            return false;
        }
        if (strlen(json) + 2 >= sizeof(json)) {
            snprintf(err, errlen, "%s: data.template_kwargs is longer than %zu bytes", where,
                     sizeof(json) - 2);
            return false;
        }
    }
    snprintf(json + strlen(json), sizeof(json) - strlen(json), "}");
    if (n) memcpy(r->data_template_kwargs, json, strlen(json) + 1);
    return true;
}

static void recipe_default_seeds(mt_recipe *r, const mt_toml_doc *doc) {
    if (!mt_toml_find(doc, "data.seed")) r->data_seed = r->train_seed;
    if (!mt_toml_find(doc, "model.init_seed")) r->model_init_seed = r->train_seed;
}

bool mt_recipe_load(mt_recipe *r, const char *path, const char *const *overrides, int n_overrides,
                    char *err, size_t errlen) {
    memset(r, 0, sizeof(*r));
    mt_toml_doc defaults = {0}, doc = {0};
    bool ok = true;
    for (int i = 0; i < N_RECIPE_KEYS && ok; i++) {
        char line[256];
        snprintf(line, sizeof(line), "%s=%s", recipe_keys[i].key, recipe_keys[i].def);
        ok = mt_toml_set(&defaults, line, err, errlen) &&
             recipe_assign(r, &recipe_keys[i], &defaults.entries[i], err, errlen);
    }
    if (ok && path) ok = mt_toml_load(&doc, path, err, errlen);
    for (int i = 0; ok && i < n_overrides; i++) ok = mt_toml_set(&doc, overrides[i], err, errlen);
    if (ok) ok = mt_recipe_moved_keys_apply(&doc, err, errlen);
    if (ok) ok = recipe_collect_kwargs(r, &doc, err, errlen);
    if (ok) ok = mt_recipe_aux_collect(r, &doc, err, errlen);
    for (int i = 0; ok && i < doc.n; i++) {
        const mt_toml_entry *e = &doc.entries[i];
        if (!strncmp(e->key, KWARGS_PREFIX, strlen(KWARGS_PREFIX)) || mt_recipe_aux_key(e->key))
            continue;
        const recipe_key *k = recipe_key_find(e->key);
        if (!k) {
            char where[MT_PATH_MAX + 64];
            mt_recipe_entry_where(e, where, sizeof(where));
            snprintf(err, errlen, "%s: unknown key '%s' (see docs/recipes.md for the keys)", where,
                     e->key);
            ok = false;
            break;
        }
        ok = recipe_assign(r, k, e, err, errlen);
    }
    if (ok) recipe_default_seeds(r, &doc);
    if (ok) ok = recipe_validate_inputs(r, &doc, err, errlen);
    if (ok) ok = recipe_validate_generate(r, &doc, err, errlen);
    if (ok) ok = recipe_validate_optimizer(r, &doc, err, errlen);
    if (ok) ok = recipe_validate_output(r, &doc, err, errlen);
    if (ok) ok = recipe_check_model(r, &doc, err, errlen);
    mt_toml_free(&defaults);
    mt_toml_free(&doc);
    return ok;
}

/* items: room for MT_DATA_FILES values, used by array keys. */
static void recipe_value(const mt_recipe *r, const recipe_key *k, mt_toml_value *v,
                         mt_toml_value *items) {
    const void *src = (const char *)r + k->offset;
    memset(v, 0, sizeof(*v));
    switch (k->type) {
    case KEY_STRINGS:
    case KEY_FLOATS:
        v->type = MT_TOML_ARRAY, v->items = items;
        v->n_items = *(const int *)((const char *)r + k->count_offset);
        for (int i = 0; i < v->n_items; i++)
            if (k->type == KEY_STRINGS)
                items[i] =
                    (mt_toml_value){.type = MT_TOML_STRING, .s = (char *)src + (size_t)i * k->size};
            else
                items[i] = (mt_toml_value){.type = MT_TOML_FLOAT, .f = ((const double *)src)[i]};
        break;
    case KEY_STRING:
        v->type = MT_TOML_STRING, v->s = (char *)src;
        break;
    case KEY_INT:
        v->type = MT_TOML_INT, v->i = *(const int *)src;
        break;
    case KEY_INT64:
        v->type = MT_TOML_INT, v->i = *(const int64_t *)src;
        break;
    case KEY_FLOAT:
        v->type = MT_TOML_FLOAT, v->f = *(const double *)src;
        break;
    case KEY_BOOL:
        v->type = MT_TOML_BOOL, v->b = *(const bool *)src;
        break;
    }
}

void mt_recipe_format(const mt_recipe *r, char *buf, size_t len) {
    buf[0] = 0;
    char table[32] = "";
    for (int i = 0; i < N_RECIPE_KEYS; i++) {
        const char *key = recipe_keys[i].key, *dot = strchr(key, '.');
        size_t tl = (size_t)(dot - key);
        if (strlen(table) != tl || strncmp(table, key, tl)) {
            memcpy(table, key, tl);
            table[tl] = 0;
            snprintf(buf + strlen(buf), len - strlen(buf), "%s[%s]\n", i ? "\n" : "", table);
        }
        snprintf(buf + strlen(buf), len - strlen(buf), "%s = ", dot + 1);
        mt_toml_value v, items[MT_DATA_FILES];
        recipe_value(r, &recipe_keys[i], &v, items);
        mt_toml_value_format(&v, buf, len);
        snprintf(buf + strlen(buf), len - strlen(buf), "\n");
        /* the model's auxiliary terms close the [model] table */
        if (!strcmp(table, "model") &&
            (i + 1 == N_RECIPE_KEYS || strncmp(recipe_keys[i + 1].key, "model.", 6)))
            mt_recipe_aux_format(r, buf, len);
    }
}

/* Key k's value in r as TOML text into buf (n bytes; the format appends). */
static void recipe_value_text(const mt_recipe *r, const recipe_key *k, char *buf, size_t n) {
    mt_toml_value v, items[MT_DATA_FILES];
    buf[0] = 0;
    recipe_value(r, k, &v, items);
    mt_toml_value_format(&v, buf, n);
}

int mt_recipe_resume_diff(const mt_recipe *was, const mt_recipe *now, bool with_layout, char *out,
                          size_t n) {
    int count = 0;
    out[0] = 0;
    for (int i = 0; i < N_RECIPE_KEYS; i++) {
        const mt_resume_rule rule = recipe_keys[i].resume;
        if (rule == MT_RESUME_FREE || (rule == MT_RESUME_LAYOUT && !with_layout)) continue;
        /* a list key (data.paths) formats as up to MT_DATA_FILES quoted paths */
        static char va[MT_DATA_FILES * (MT_PATH_MAX + 4)], vb[sizeof(va)];
        recipe_value_text(was, &recipe_keys[i], va, sizeof(va));
        recipe_value_text(now, &recipe_keys[i], vb, sizeof(vb));
        if (!strcmp(va, vb)) continue;
        const size_t at = strlen(out);
        snprintf(out + at, n - at, "%s%s = %s differs from the checkpoint's %s", count ? "; " : "",
                 recipe_keys[i].key, vb, va);
        count++;
    }
    return mt_recipe_aux_diff(was, now, out, n, count);
}

void mt_recipe_resume_free_keys(char *out, size_t n) {
    out[0] = 0;
    for (int i = 0; i < N_RECIPE_KEYS; i++)
        if (recipe_keys[i].resume == MT_RESUME_FREE)
            snprintf(out + strlen(out), n - strlen(out), "%s, ", recipe_keys[i].key);
    const char *sep = "";
    for (int i = 0; i < N_RECIPE_KEYS; i++)
        if (recipe_keys[i].resume == MT_RESUME_LAYOUT) {
            snprintf(out + strlen(out), n - strlen(out), "%s%s", sep, recipe_keys[i].key);
            sep = " and ";
        }
    snprintf(out + strlen(out), n - strlen(out), " keeping the global batch");
}

uint64_t mt_recipe_hash(const mt_recipe *r) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a over "key=value" of numerics keys */
    for (int i = 0; i < N_RECIPE_KEYS; i++) {
        if (recipe_keys[i].resume == MT_RESUME_FREE) continue;
        char buf[MT_DATA_FILES * (MT_PATH_MAX + 4) + 128];
        snprintf(buf, sizeof(buf), "%s=", recipe_keys[i].key);
        mt_toml_value v, items[MT_DATA_FILES];
        recipe_value(r, &recipe_keys[i], &v, items);
        mt_toml_value_format(&v, buf, sizeof(buf));
        for (const char *c = buf; *c; c++) h = (h ^ (uint8_t)*c) * 1099511628211ull;
    }
    return mt_recipe_aux_hash(r, h);
}
