/* recipe.c: the key table and mt_recipe_load (its checks: train/recipe_validate.c). */
#include "recipe.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
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
    bool input_path;       /* a file or directory the run reads: relative to the recipe's folder */
} recipe_key;

#define STR(k, field, def, num)                                                                    \
    {                                                                                              \
        k, KEY_STRING, offsetof(mt_recipe, field), sizeof(((mt_recipe *)0)->field), def, num, 0,   \
            false                                                                                  \
    }
#define INT(k, field, def, num)                                                                    \
    { k, KEY_INT, offsetof(mt_recipe, field), sizeof(int), def, num, 0, false }
#define I64(k, field, def, num)                                                                    \
    { k, KEY_INT64, offsetof(mt_recipe, field), sizeof(int64_t), def, num, 0, false }
#define FLT(k, field, def, num)                                                                    \
    { k, KEY_FLOAT, offsetof(mt_recipe, field), sizeof(double), def, num, 0, false }
#define BOOL(k, field, def, num)                                                                   \
    { k, KEY_BOOL, offsetof(mt_recipe, field), sizeof(bool), def, num, 0, false }
/* arrays: the items, then their count in field `count` (an int) */
#define STRS(k, field, count, def, num)                                                            \
    {                                                                                              \
        k, KEY_STRINGS, offsetof(mt_recipe, field), sizeof(((mt_recipe *)0)->field[0]), def, num,  \
            offsetof(mt_recipe, count), false                                                      \
    }
#define FLTS(k, field, count, def, num)                                                            \
    {                                                                                              \
        k, KEY_FLOATS, offsetof(mt_recipe, field), sizeof(double), def, num,                       \
            offsetof(mt_recipe, count), false                                                      \
    }

/* paths the run reads (recipe_path_resolve): as STR and STRS */
#define PATH(k, field, def, num)                                                                   \
    {                                                                                              \
        k, KEY_STRING, offsetof(mt_recipe, field), sizeof(((mt_recipe *)0)->field), def, num, 0,   \
            true                                                                                   \
    }
#define PATHS(k, field, count, def, num)                                                           \
    {                                                                                              \
        k, KEY_STRINGS, offsetof(mt_recipe, field), sizeof(((mt_recipe *)0)->field[0]), def, num,  \
            offsetof(mt_recipe, count), true                                                       \
    }

/* the batch layout: numerics, but a resume compares the global batch it gives instead */
#define LAYOUT MT_RESUME_LAYOUT
static const recipe_key recipe_keys[] = {
    PATH("model.path", model_path, "\"\"", true),
    PATH("model.config", model_config, "\"\"", true),
    INT("model.num_hidden_layers", model_num_hidden_layers, "0", true),
    STR("model.dtype", model_dtype, "\"fp32\"", true),
    INT("model.num_labels", model_num_labels, "0", true),
    STR("model.problem_type", model_problem_type, "\"\"", true),
    STRS("model.labels", model_labels, model_n_labels, "[]", true),
    I64("model.init_seed", model_init_seed, "42", true),
    PATH("data.path", data_path, "\"synthetic\"", true),
    PATHS("data.paths", data_paths, data_n_paths, "[]", true),
    FLTS("data.weights", data_weights, data_n_weights, "[]", true),
    STR("data.format", data_format, "\"auto\"", true),
    STR("data.train_on", data_train_on, "\"all_assistant\"", true),
    STR("data.reasoning_history", data_reasoning_history, "\"as_template\"", true),
    BOOL("data.sanitize_control_tokens", data_sanitize_control_tokens, "false", true),
    PATH("data.chat_template", data_chat_template, "\"\"", true),
    STR("data.template_kwargs", data_template_kwargs, "\"\"", true),
    INT("data.synthetic_samples", data_synthetic_samples, "2000", true),
    STR("data.synthetic_kind", data_synthetic_kind, "\"gsm8k\"", true),
    PATH("data.tokenizer_dir", data_tokenizer_dir, "\"\"", true),
    STR("data.cache_dir", data_cache_dir, "\"\"", false),
    STR("data.system_prompt", data_system_prompt, "\"\"", true),
    INT("data.max_length", data_max_length, "512", true),
    STR("data.truncation", data_truncation, "\"drop\"", true),
    BOOL("data.packing", data_packing, "false", true),
    BOOL("data.trim_padding", data_trim_padding, "true", true),
    BOOL("data.padding_free", data_padding_free, "false", true),
    BOOL("data.shuffle", data_shuffle, "false", true),
    I64("data.seed", data_seed, "42", true),
    BOOL("data.strip_annotations", data_strip_annotations, "false", true),
    INT("data.eval_samples", data_eval_samples, "0", true),
    PATH("data.eval_path", data_eval_path, "\"\"", false),
    STR("train.objective", train_objective, "\"sft\"", true),
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
    PATH("eval.generate_data", eval_generate_data, "\"\"", false),
    INT("eval.generate_samples", eval_generate_samples, "0", false),
    INT("eval.generate_max_new_tokens", eval_generate_max_new_tokens, "256", false),
    INT("eval.generate_batch", eval_generate_batch, "8", false),
    INT("eval.generate_every", eval_generate_every, "0", false),
    BOOL("eval.generate_at_end", eval_generate_at_end, "true", false),
    INT("eval.generate_shots", eval_generate_shots, "0", false),
    PATH("eval.generate_shots_file", eval_generate_shots_file, "\"\"", false),
    FLT("eval.generate_temperature", eval_generate_temperature, "0.0", false),
    FLT("eval.generate_top_p", eval_generate_top_p, "1.0", false),
    INT("eval.generate_top_k", eval_generate_top_k, "0", false),
    I64("eval.generate_seed", eval_generate_seed, "0", false),
    STR("eval.generate_weights", eval_generate_weights, "\"auto\"", false),
    STR("eval.generate_task", eval_generate_task, "\"gsm8k\"", false),
    STR("eval.generate_metric", eval_generate_metric, "\"\"", false),
    STR("eval.generate_answer_regex", eval_generate_answer_regex, "\"\"", false),
    STR("output.dir", output_dir, "\"runs/out\"", false),
    INT("output.save_steps", output_save_steps, "0", false),
    INT("output.save_total_limit", output_save_total_limit, "0", false),
    BOOL("output.export", output_export, "true", false),
    STR("output.export_dtype", output_export_dtype, "\"bf16\"", false),
    BOOL("output.export_final", output_export_final, "true", false),
    BOOL("output.save_optimizer_state", output_save_optimizer_state, "true", false),
    I64("output.shard_bytes", output_shard_bytes, "5000000000", false),
    STRS("output.report_to", output_report_to, output_n_report_to, "[\"csv\"]", false),
    STR("dist.backend", dist_backend, "\"mpi\"", false),
    BOOL("dist.prefetch", dist_prefetch, "true", false),
    BOOL("dist.node_params", dist_node_params, "true", false),
    STR("dist.gather_unit", dist_gather_unit, "\"layer\"", true),
    STR("dist.gather_dtype", dist_gather_dtype, "\"fp32\"", true),
    I64("dist.arena_mb", dist_arena_mb, "1024", false),
    INT("dist.expert_parallel", dist_expert_parallel, "1", true),
    INT("dist.context_parallel", dist_context_parallel, "1", true),
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
        if (strings && k->size == MT_PATH_MAX)
            snprintf(err, errlen,
                     "%s: %s must be a list of at most %d paths (each shorter than %d "
                     "bytes)",
                     where, k->key, MT_DATA_FILES, MT_PATH_MAX);
        else if (strings)
            snprintf(err, errlen,
                     "%s: %s must be a list of at most %d names (each shorter than %zu "
                     "bytes)",
                     where, k->key, MT_DATA_FILES, k->size);
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

/* base/rel with "." and "x/.." taken out as written (Python's os.path.normpath), into out
 * (n bytes): false when it does not fit. */
static bool recipe_path_join(const char *base, const char *rel, char *out, size_t n) {
    char joined[2 * MT_PATH_MAX + 2];
    if (snprintf(joined, sizeof(joined), "%s/%s", base, rel) >= (int)sizeof(joined)) return false;
    const bool absolute = joined[0] == '/';
    char *parts[MT_PATH_MAX + 2]; /* a component takes 2 bytes or more */
    int np = 0;
    for (char *save = NULL, *p = strtok_r(joined, "/", &save); p; p = strtok_r(NULL, "/", &save)) {
        if (!strcmp(p, ".")) continue;
        if (!strcmp(p, "..") && np > 0 && strcmp(parts[np - 1], "..")) {
            np--;
            continue;
        }
        if (!strcmp(p, "..") && absolute) continue; /* /.. is / */
        parts[np++] = p;
    }
    size_t at = 0;
    out[0] = 0;
    if (absolute) at += (size_t)snprintf(out, n, "/");
    for (int i = 0; i < np && at < n; i++)
        at += (size_t)snprintf(out + at, n - at, "%s%s", i ? "/" : "", parts[i]);
    if (at == 0 && n > 1) at = (size_t)snprintf(out, n, ".");
    return at < n;
}

/* A path key's value made absolute against dir (absolute itself): values that name no file
 * ("", "synthetic") and absolute paths stay. */
static bool recipe_path_resolve(const char *dir, const char *key, char *value, size_t size,
                                const char *where, char *err, size_t errlen) {
    if (!value[0] || value[0] == '/' || !strcmp(value, "synthetic")) return true;
    char out[MT_PATH_MAX];
    if (!recipe_path_join(dir, value, out, sizeof(out)) || strlen(out) >= size) {
        snprintf(err, errlen, "%s: %s: %s/%s is longer than %zu bytes", where, key, dir, value,
                 size - 1);
        return false;
    }
    memcpy(value, out, strlen(out) + 1);
    return true;
}

/* Entry e that k, a path key, assigned: its values made absolute against dir (the recipe's
 * folder for the file's entries, the working directory for the overrides'). */
static bool recipe_assign_paths(mt_recipe *r, const recipe_key *k, const mt_toml_entry *e,
                                const char *dir, char *err, size_t errlen) {
    if (!k->input_path) return true;
    char where[MT_PATH_MAX + 64];
    mt_recipe_entry_where(e, where, sizeof(where));
    char *dst = (char *)r + k->offset;
    const int n = k->type == KEY_STRINGS ? *(int *)((char *)r + k->count_offset) : 1;
    for (int i = 0; i < n; i++)
        if (!recipe_path_resolve(dir, k->key, dst + (size_t)i * k->size, k->size, where, err,
                                 errlen))
            return false;
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

/* model.path (a checkpoint) and model.config (a random initialisation) exclude each other: both
 * set where the recipe sets them is an error naming both; one given by --set over the recipe's
 * other replaces it (--set model.path=EXPORT on a recipe of model.config: evaluate the export). */
static bool recipe_model_source(mt_recipe *r, const mt_toml_doc *doc, char *err, size_t errlen) {
    const mt_toml_entry *p = mt_toml_find(doc, "model.path"),
                        *c = mt_toml_find(doc, "model.config");
    if (!r->model_path[0] || !r->model_config[0] || !p || !c) return true;
    if ((p->line > 0) != (c->line > 0)) { /* the --set one wins */
        if (p->line > 0)
            r->model_path[0] = 0;
        else
            r->model_config[0] = 0;
        return true;
    }
    char wp[MT_PATH_MAX + 64], wc[MT_PATH_MAX + 64];
    mt_recipe_entry_where(p, wp, sizeof(wp));
    mt_recipe_entry_where(c, wc, sizeof(wc));
    snprintf(err, errlen,
             "%s: model.path and model.config are both set (model.config at %s): model.path "
             "loads a checkpoint, model.config initialises a model at random; keep one",
             wp, wc);
    return false;
}

/* mt_recipe_load; resolve: the recipe file's relative input paths against its folder (a
 * resolved recipe, recipe.toml, has them as the run used them). */
static bool recipe_load(mt_recipe *r, const char *path, bool resolve, const char *const *overrides,
                        int n_overrides, char *err, size_t errlen) {
    memset(r, 0, sizeof(*r));
    /* the bases of relative paths: the working directory, and the recipe's folder (absolute) */
    char cwd[MT_PATH_MAX], dir[MT_PATH_MAX];
    if (!getcwd(cwd, sizeof(cwd))) {
        snprintf(err, errlen, "cannot read the working directory: %s", strerror(errno));
        return false;
    }
    const char *slash = path ? strrchr(path, '/') : NULL;
    if (!resolve || !slash)
        snprintf(dir, sizeof(dir), "%s", cwd);
    else if (!recipe_path_join(path[0] == '/' ? "" : cwd, path, dir, sizeof(dir))) {
        snprintf(err, errlen, "%s: the path is longer than %d bytes", path, MT_PATH_MAX - 1);
        return false;
    } else { /* the file's name off (dir is absolute, normalised) */
        char *name = strrchr(dir, '/');
        name[name == dir] = 0;
    }
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
        ok = recipe_assign(r, k, e, err, errlen) &&
             recipe_assign_paths(r, k, e, e->line > 0 ? dir : cwd, err, errlen);
    }
    if (ok) recipe_default_seeds(r, &doc);
    if (ok) ok = recipe_model_source(r, &doc, err, errlen);
    if (ok) ok = mt_recipe_validate(r, &doc, err, errlen);
    mt_toml_free(&defaults);
    mt_toml_free(&doc);
    return ok;
}

bool mt_recipe_load(mt_recipe *r, const char *path, const char *const *overrides, int n_overrides,
                    char *err, size_t errlen) {
    return recipe_load(r, path, true, overrides, n_overrides, err, errlen);
}

bool mt_recipe_load_resolved(mt_recipe *r, const char *path, const char *const *overrides,
                             int n_overrides, char *err, size_t errlen) {
    return recipe_load(r, path, false, overrides, n_overrides, err, errlen);
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

/* Whether path key k names the same files in a and b by other names (a recipe given by
 * another path: "recipes/configs/tiny.json" and "/abs/recipes/configs/tiny.json"). */
static bool recipe_same_files(const mt_recipe *a, const mt_recipe *b, const recipe_key *k) {
    if (!k->input_path) return false;
    const bool list = k->type == KEY_STRINGS;
    const int n = list ? *(const int *)((const char *)a + k->count_offset) : 1;
    if (list && n != *(const int *)((const char *)b + k->count_offset)) return false;
    for (int i = 0; i < n; i++) {
        const char *pa = (const char *)a + k->offset + (size_t)i * k->size,
                   *pb = (const char *)b + k->offset + (size_t)i * k->size;
        char ra[PATH_MAX], rb[PATH_MAX];
        if (strcmp(pa, pb) && (!realpath(pa, ra) || !realpath(pb, rb) || strcmp(ra, rb)))
            return false;
    }
    return true;
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
        if (!strcmp(va, vb) || recipe_same_files(was, now, &recipe_keys[i])) continue;
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
