/* recipe_validate.c: the checks of a loaded recipe's values, each refusal one line naming the
 * key where the recipe sets it (mt_recipe_validate, train/recipe_internal.h). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/dataset.h"
#include "data/head_data.h"
#include "data/sample.h"
#include "data/tokenizer.h"
#include "eval/messages_eval.h"
#include "jinja/jinja.h"
#include "models/generate.h"
#include "models/minimax.h"
#include "train/recipe.h"
#include "train/recipe_internal.h"
#include "train/schedule.h"

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
    if (strcmp(r->data_synthetic_kind, "gsm8k") && strcmp(r->data_synthetic_kind, "agentic") &&
        strcmp(r->data_synthetic_kind, "pairs"))
        BAD("data.synthetic_kind", "must be gsm8k, agentic or pairs, not \"%s\"",
            r->data_synthetic_kind);
    return true;
}

/* train.objective's value and what a head objective rules out (its head: recipe_check_model). */
static bool recipe_validate_objective(const mt_recipe *r, const mt_toml_doc *doc, char *err,
                                      size_t errlen) {
    const int o = mt_objective_parse(r->train_objective);
    if (o < 0)
        BAD("train.objective", "\"%s\" is none of %s", r->train_objective, mt_objective_list());
    const bool synthetic = !r->data_n_paths && !strcmp(r->data_path, "synthetic");
    const bool pairs = !strcmp(r->data_synthetic_kind, "pairs");
    if (synthetic && pairs != (o == MT_OBJECTIVE_REWARD))
        BAD(pairs ? "data.synthetic_kind" : "train.objective",
            "synthetic data of kind \"%s\" is for train.objective = \"%s\", not \"%s\"",
            r->data_synthetic_kind, pairs ? "reward" : "sft", r->train_objective);
    if (synthetic && o != MT_OBJECTIVE_SFT && o != MT_OBJECTIVE_REWARD)
        BAD("data.path", "train.objective = \"%s\" has no synthetic data: name a jsonl file",
            r->train_objective);
    if (o == MT_OBJECTIVE_SFT) return true;
    if (r->data_packing)
        BAD("data.packing",
            "must be false with train.objective = \"%s\": a head reads one sample a row",
            r->train_objective);
    if (r->data_padding_free)
        BAD("data.padding_free",
            "must be false with train.objective = \"%s\": a head reads one sample a row",
            r->train_objective);
    if (strcmp(r->data_format, "auto"))
        BAD("data.format",
            "is for train.objective = \"sft\"; \"%s\" reads its own records (docs/data.md)",
            r->train_objective);
    if (r->eval_generate_data[0])
        BAD("eval.generate_data",
            "generation needs the causal LM; train.objective = \"%s\" trains a head instead",
            r->train_objective);
    return true;
}

/* dist.context_parallel: each sample's tokens split over C ranks (docs/training.md, "Long
 * sequences"): a row cuts into 2C equal chunks, and only what the context-parallel ops split
 * (the causal LM's loss; a head pools over a whole row). The world, the model's layers and
 * the router jitter are checked where they are known (train/trainer_setup.c). */
static bool recipe_validate_context(const mt_recipe *r, const mt_toml_doc *doc, char *err,
                                    size_t errlen) {
    const int C = r->dist_context_parallel;
    if (C < 1 || C > 64) BAD("dist.context_parallel", "%d is not in 1 .. 64", C);
    if (C == 1) return true;
    if (r->data_max_length % (2 * C))
        BAD("data.max_length",
            "%lld is not a multiple of 2 x dist.context_parallel = %d (each rank holds two of "
            "a row's 2C equal chunks)",
            (long long)r->data_max_length, 2 * C);
    if (mt_objective_parse(r->train_objective) != MT_OBJECTIVE_SFT)
        BAD("dist.context_parallel",
            "%d is for train.objective = \"sft\": a head reads whole rows, not \"%s\"", C,
            r->train_objective);
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
    const bool msgs = !strcmp(r->eval_generate_task, "messages");
    if (!msgs && strcmp(r->eval_generate_task, "gsm8k"))
        BAD("eval.generate_task",
            "must be \"gsm8k\" (problems) or \"messages\" (conversations whose last assistant "
            "message is the reference), not \"%s\"",
            r->eval_generate_task);
    if (msgs && gen_synthetic)
        BAD("eval.generate_task", "\"messages\" needs a file of conversations in "
                                  "eval.generate_data (\"synthetic\" makes GSM8K problems)");
    if (!msgs && (r->eval_generate_metric[0] || r->eval_generate_answer_regex[0]))
        BAD(r->eval_generate_metric[0] ? "eval.generate_metric" : "eval.generate_answer_regex",
            "is for eval.generate_task = \"messages\" (GSM8K compares the numbers)");
    if (msgs) { /* the metric's name and the regex, as the trainer will take them */
        static const char *const keys[2] = {"eval.generate_metric", "eval.generate_answer_regex"};
        mt_match m;
        char why[MT_ERR_LEN];
        const int rc =
            mt_match_init(&m, r->eval_generate_metric[0] ? r->eval_generate_metric : NULL,
                          r->eval_generate_answer_regex[0] ? r->eval_generate_answer_regex : NULL,
                          keys, why, sizeof(why));
        mt_match_free(&m);
        if (rc != 0)
            BAD(strncmp(why, keys[0], strlen(keys[0])) ? keys[1] : keys[0], "%s",
                strchr(why, ' ') + 1);
    }
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
    if (strcmp(r->output_export_dtype, "fp32") && strcmp(r->output_export_dtype, "bf16") &&
        strcmp(r->output_export_dtype, "fp8"))
        BAD("output.export_dtype",
            "must be \"fp32\", \"bf16\" or \"fp8\" (the block-FP8 layout of an FP8 model.path)");
    if (!strcmp(r->output_export_dtype, "fp8") && !r->model_path[0])
        BAD("output.export_dtype",
            "\"fp8\" mirrors the layout of an FP8 model.path, and this recipe has none "
            "(model.config: a random initialisation)");
    if (!r->output_export && !r->output_save_optimizer_state)
        BAD("output.save_optimizer_state",
            "false with output.export = false leaves the checkpoints empty: set either true");
    if (r->output_shard_bytes < (1 << 20)) BAD("output.shard_bytes", "must be >= 1 MiB");
    for (int i = 0; i < r->output_n_report_to; i++) {
        const char *to = r->output_report_to[i];
        if (strcmp(to, "csv") && strcmp(to, "tensorboard"))
            BAD("output.report_to",
                "\"%s\" is not a destination: \"csv\" (loss.csv, eval.csv, "
                "metrics.jsonl: always written) or \"tensorboard\" (event files in output.dir)",
                to);
        for (int j = 0; j < i; j++)
            if (!strcmp(to, r->output_report_to[j]))
                BAD("output.report_to", "lists \"%s\" twice", to);
    }
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
    if (!mt_recipe_head_apply(r, &cfg, path, msg, sizeof(msg))) {
        const mt_toml_entry *e = mt_toml_find(doc, "train.objective");
        char where[MT_PATH_MAX + 64] = "recipe";
        if (e) mt_recipe_entry_where(e, where, sizeof(where));
        snprintf(err, errlen, "%s: %s", where, msg);
        return false;
    }
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

bool mt_recipe_validate(const mt_recipe *r, const mt_toml_doc *doc, char *err, size_t errlen) {
    return recipe_validate_inputs(r, doc, err, errlen) &&
           recipe_validate_objective(r, doc, err, errlen) &&
           recipe_validate_context(r, doc, err, errlen) &&
           recipe_validate_generate(r, doc, err, errlen) &&
           recipe_validate_optimizer(r, doc, err, errlen) &&
           recipe_validate_output(r, doc, err, errlen) && recipe_check_model(r, doc, err, errlen);
}

bool mt_recipe_reports_to(const mt_recipe *r, const char *to) {
    for (int i = 0; i < r->output_n_report_to; i++)
        if (!strcmp(r->output_report_to[i], to)) return true;
    return false;
}
