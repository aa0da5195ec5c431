/* recipe.h: the training recipe: TOML file + --set overrides -> one checked struct.
 * Every key is listed once in recipe.c's table (name, type, default, help); unknown keys and
 * wrong types are rejected with file:line:col before anything is allocated. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "models/config.h"
#include "train/toml.h"

#define MT_PATH_MAX   1024
#define MT_DATA_FILES 16 /* the most data.paths */
#define MT_RECIPE_AUX 8  /* the most terms named in model.aux_coef and model.aux_detach */

/* How a recipe key may change when a run resumes from a checkpoint (recipe.c's table). */
typedef enum {
    MT_RESUME_FREE = 0,     /* may change: the step count, cadences, outputs, the device */
    MT_RESUME_NUMERICS = 1, /* changes the numerics: must equal the checkpoint's */
    MT_RESUME_LAYOUT = 2,   /* the batch layout: may change while the global batch stays */
} mt_resume_rule;

/* One auxiliary loss term of the model, by the name its forward gives it (models/minimax.h):
 * what [model.aux_coef] and [model.aux_detach] set for it, passed through to the model, which
 * decides which names it has. */
typedef struct {
    char name[32];
    bool has_coef, has_detach;
    double coef; /* its weight in the loss (0: not computed) */
    bool detach; /* its gradient stays in the tensors that compute it */
} mt_recipe_aux;

typedef struct mt_recipe {
    /* [model] */
    char model_path[MT_PATH_MAX];   /* HF model dir (config.json + safetensors), or "" */
    char model_config[MT_PATH_MAX]; /* config.json for random initialisation when path is "" */
    int model_num_hidden_layers;    /* keep the first N layers; 0 = all */
    char model_dtype[8];            /* "fp32" (CPU) or "bf16" (CUDA compute dtype) */
    int64_t model_init_seed;        /* random initialisation (unset: train.seed) */
    mt_recipe_aux model_aux[MT_RECIPE_AUX]; /* by name; unset: the model's defaults */
    int model_n_aux;
    /* the head a head objective trains (train/recipe_head.c): its label count (0: the
     * checkpoint's, or model.labels'), problem_type ("": the config's, else inferred) and the
     * labels' names (id2label; string labels in the data map through them) */
    int model_num_labels;
    char model_problem_type[32];
    char model_labels[MT_DATA_FILES][64];
    int model_n_labels;
    /* [data] */
    char data_path[MT_PATH_MAX];                 /* a data file (data/dataset.h), or "synthetic" */
    char data_paths[MT_DATA_FILES][MT_PATH_MAX]; /* or several (instead of data.path) */
    int data_n_paths;
    double data_weights[MT_DATA_FILES]; /* mixing weights of data.paths; none: concatenated */
    int data_n_weights;
    char data_format[16];                 /* auto | gsm8k | messages | sharegpt | alpaca */
    char data_train_on[16];               /* all_assistant | last_assistant */
    char data_reasoning_history[16];      /* as_template | split (data/sample.h) */
    bool data_sanitize_control_tokens;    /* control tokens in the data's text as text */
    char data_chat_template[MT_PATH_MAX]; /* a template file; "" = the tokenizer dir's */
    char data_template_kwargs[4096];      /* [data.template_kwargs] as a JSON object; "" = none */
    int data_synthetic_samples;           /* when path = "synthetic" */
    char data_synthetic_kind[16];         /* gsm8k | agentic (data/synth.h) */
    char data_tokenizer_dir[MT_PATH_MAX]; /* tokenizer.json + tokenizer_config.json */
    char data_cache_dir[MT_PATH_MAX];     /* HDF5 token cache; "" = <output.dir>/cache */
    char data_system_prompt[MT_PATH_MAX];
    int data_max_length;
    char data_truncation[16]; /* "drop" or "truncate" */
    bool data_packing;
    bool data_trim_padding; /* run a micro-batch at its longest row's length, not max_length */
    bool data_padding_free; /* run a micro-batch's samples as one row, without their padding */
    bool data_shuffle;
    int64_t data_seed;           /* data order, synthetic data (unset: train.seed) */
    bool data_strip_annotations; /* remove <<expr=value>> calculator annotations */
    int data_eval_samples;       /* held out of training for the eval loss; 0 = no evaluation */
    char data_eval_path[MT_PATH_MAX]; /* evaluate on this jsonl instead ("" = held-out samples) */
    /* [train] */
    char train_objective[24]; /* sft | reward | classification | token_classification |
                                 question_answering (data/head_data.h) */
    int train_max_steps;
    int train_eval_steps;     /* evaluate every N steps (and after the last); 0 = after the last */
    bool train_eval_on_start; /* also evaluate before the first step (not on a resume) */
    int train_per_device_train_batch_size;
    int train_gradient_accumulation_steps;
    int train_global_batch_size; /* > 0: the accumulation steps follow from it and the ranks */
    double train_learning_rate;
    double train_num_train_epochs;    /* > 0: max_steps from the data (replaces max_steps) */
    char train_lr_scheduler_type[24]; /* constant | linear | cosine | cosine_with_min_lr | wsd */
    int train_warmup_steps;
    double train_warmup_ratio;    /* > 0: warmup = ceil(max_steps * ratio) */
    double train_min_lr_ratio;    /* cosine_with_min_lr, wsd: the floor, a fraction of the lr */
    double train_wsd_decay_ratio; /* wsd: the decay phase, a fraction of max_steps */
    double train_weight_decay;
    double train_adam_beta1, train_adam_beta2, train_adam_epsilon;
    double train_max_grad_norm;        /* <= 0: no clipping */
    int64_t train_seed;                /* the default of data.seed and model.init_seed */
    double train_router_aux_loss_coef; /* < 0: from the model config; 0: off */
    bool
        train_skip_nonfinite_steps; /* skip a step with NaN/Inf loss or grads instead of stopping */
    bool train_gradient_checkpointing; /* recompute each layer in the backward (same numbers) */
    /* [eval]: accuracy by generation (train/trainer_generate.c) */
    char eval_generate_data[MT_PATH_MAX]; /* "": none; a GSM8K-style jsonl, or "synthetic" */
    int eval_generate_samples;            /* the first N of them; 0 = all of the file */
    int eval_generate_max_new_tokens;
    int eval_generate_batch;   /* prompts per ragged batch on a rank */
    int eval_generate_every;   /* every N steps; 0 = never between */
    bool eval_generate_at_end; /* after the last step */
    int eval_generate_shots;   /* n-shot: the first N of eval.generate_shots_file as turns */
    char eval_generate_shots_file[MT_PATH_MAX];
    double eval_generate_temperature; /* 0: greedy */
    double eval_generate_top_p;
    int eval_generate_top_k;
    int64_t eval_generate_seed;
    /* how a rank holds the weights it decodes with: "replica" (a full copy in host memory, the CPU
     * backend), "gathered" (the ZeRO-3 gathers, bucket by bucket, on the training backend),
     * "auto" (train/trainer_generate.c) */
    char eval_generate_weights[16];
    /* what the samples are (eval/messages_eval.h): "gsm8k" (problems, the numbers compared) or
     * "messages" (conversations whose last assistant message is the reference), with the metric
     * reported as accuracy ("": regex with an answer regex, else exact) and the regex */
    char eval_generate_task[16];
    char eval_generate_metric[16];
    char eval_generate_answer_regex[512];
    /* [output] */
    char output_dir[MT_PATH_MAX];
    int output_save_steps; /* training-state checkpoint + export every N steps; 0 = only at end */
    int output_save_total_limit; /* checkpoints kept in output.dir, the newest; 0 = all */
    bool output_export;          /* export an HF model directory */
    char output_export_dtype[8]; /* "bf16", "fp32" or "fp8" (the FP8 source's block-FP8 layout) */
    bool output_export_final;    /* a model-only <output.dir>/final/ at the end of the run */
    bool output_save_optimizer_state; /* state-*.h5 + state.h5 in checkpoints (resumable) */
    int64_t output_shard_bytes;
    /* output.report_to: where the logs go besides the CSV files, which are always written:
     * "csv", "tensorboard" (event files in output.dir, train/tboard.h) */
    char output_report_to[MT_DATA_FILES][16];
    int output_n_report_to;
    /* [dist] */
    char dist_backend[8];        /* "mpi" (CPU) or "nccl" (CUDA) */
    bool dist_prefetch;          /* gather the next bucket while the current one computes */
    bool dist_node_params;       /* one node: the parameters once, shared by its ranks */
    char dist_gather_unit[8];    /* "layer" (a decoder layer with its experts) or "expert" */
    char dist_gather_dtype[8];   /* "fp32" or "bf16": the parameters as gathered and used */
    int64_t dist_arena_mb;       /* activation arena per rank */
    int dist_expert_parallel;    /* P: ranks per expert-parallel group (1: none) */
    int dist_context_parallel;   /* C: ranks that split each sample's tokens (1: none) */
    bool dist_offload_optimizer; /* AdamW moments in host memory, the update on the host CPU */
    double dist_timeout;         /* seconds one collective may wait (0: no limit; -1: automatic) */
} mt_recipe;

/* Defaults, then the file (if path is not NULL), then each "table.key=value" override.
 * The paths to what the run reads (model.path, model.config, data.path(s), data.eval_path,
 * data.tokenizer_dir, data.chat_template, eval.generate_data, eval.generate_shots_file) are
 * made absolute ("." and ".." taken out as written, as Python's os.path.normpath does): the
 * file's relative to the file's folder, the overrides' relative to the working directory. The
 * paths the run writes (output.dir, data.cache_dir) stay as given: the working directory's.
 * On error: false and "file:line:col: message" (or "--set key: message") in err. */
bool mt_recipe_load(mt_recipe *r, const char *path, const char *const *overrides, int n_overrides,
                    char *err, size_t errlen);
/* Whether output.report_to lists `to` ("tensorboard"; the CSV files are always written). */
bool mt_recipe_reports_to(const mt_recipe *r, const char *to);
/* mt_recipe_load of a resolved recipe (a run's recipe.toml, mt_recipe_format's text): its
 * relative paths (written by builds before paths were made absolute) are the working
 * directory's, as the run used them. */
bool mt_recipe_load_resolved(mt_recipe *r, const char *path, const char *const *overrides,
                             int n_overrides, char *err, size_t errlen);
/* The resolved recipe as TOML text (saved next to the outputs, printed with --verbose). */
void mt_recipe_format(const mt_recipe *r, char *buf, size_t len);
/* 64-bit hash of the resolved recipe's fields that change training numerics (for resume). */
uint64_t mt_recipe_hash(const mt_recipe *r);
/* The numerics keys whose values differ between the checkpoint's recipe (was) and this run's
 * (now), the batch layout keys only when with_layout, as "key = NOW differs from the
 * checkpoint's WAS; ..." in out (n bytes); returns how many. */
int mt_recipe_resume_diff(const mt_recipe *was, const mt_recipe *now, bool with_layout, char *out,
                          size_t n);
/* The keys that may change on a resume, from the table: "a, b, ..., and the layout keys keeping
 * the global batch" in out (n bytes). */
void mt_recipe_resume_free_keys(char *out, size_t n);
/* Key i of the table (0 ..): its name ("table.key"), default (TOML text) and whether it is
 * part of the resume hash. false past the last key. (tests/train/data_recipe.c checks the table
 * against docs/recipes.md.) */
bool mt_recipe_key_at(int i, const char **key, const char **def, bool *numerics);
/* How key i may change on a resume (MT_RESUME_FREE past the last key). */
mt_resume_rule mt_recipe_key_rule(int i);

/* train.objective on cfg, the model's config as read (from config_path, for messages): a causal
 * LM gets the objective's head (reward: sequence classification with one label, TRL's reward
 * model; classification: sequence classification; token_classification; question_answering),
 * with model.num_labels or model.labels' count, model.problem_type and model.labels as
 * id2label; a head checkpoint must have the objective's head and agree with the keys that are
 * set; "sft" needs a causal LM. false with one line naming the keys in why (n bytes). */
bool mt_recipe_head_apply(const mt_recipe *r, mt_minimax_config *cfg, const char *config_path,
                          char *why, size_t n);
