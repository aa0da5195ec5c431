/* trainer_internal.h: the training job's state, shared by trainer.c (setup, the loop),
 * trainer_step.c (an optimizer step, an evaluation) and trainer_checkpoint.c (saving, resuming).
 * Not an interface. */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "data/gsm8k.h"
#include "data/sampler.h"
#include "data/token_cache.h"
#include "models/minimax.h"
#include "models/weights.h"
#include "train/checkpoint.h"
#include "train/comm.h"
#include "train/logger.h"
#include "train/output_dir.h"
#include "train/recipe.h"
#include "train/schedule.h"
#include "train/expert_parallel.h"
#include "train/sharded.h"
#include "train/zero.h"

typedef struct {
    mt_recipe rc;
    mt_comm *host; /* MPI: job control, data, checkpoints */
    mt_comm *comm; /* the sharded optimizer's: host (CPU backend) or NCCL (CUDA) */
    const mt_backend *be;
    mt_minimax_config cfg;
    mt_minimax model;
    mt_naming naming;
    mt_zero zero;
    mt_ctx ctx;
    mt_sharded sharded;
    mt_expert_parallel ep; /* dist.expert_parallel (P = 1: none) */
    mt_token_data data;
    mt_sampler sampler;      /* the training samples (all but the held-out ones) */
    mt_token_data eval_data; /* data.eval_path's samples (when set) */
    mt_sampler eval_sampler; /* the samples to evaluate on (evaluates), one epoch per eval */
    int64_t eval_targets;    /* their labelled tokens: the eval loss's denominator */
    bool evaluates;          /* data.eval_samples > 0 or data.eval_path */
    bool generates;          /* eval.generate_data: accuracy by generation */
    mt_gsm8k_set gen_set;    /* its problems (the first eval.generate_samples), every rank */
    mt_tokenizer *gen_tok;
    struct mt_chat_template *gen_chat; /* renders its prompts (data/chat.h): the recipe's */
    mt_gsm8k_set gen_shots;    /* eval.generate_shots_file's examples (n-shot), every rank */
    int64_t gen_replica_bytes; /* the full replica a rank decodes with */
    bool gen_gathered;         /* decodes through the gathers (eval.generate_weights) */
    char tokenizer_dir[MT_PATH_MAX];
    char config_path[MT_PATH_MAX + 32];                        /* the model's config.json */
    int32_t *batch_ids, *batch_labels, *batch_pos, *batch_seg; /* (B,T) each, host */
    int64_t *batch_real; /* (B) host: real tokens per row (the aux loss leaves padding out) */
    /* the model's auxiliary loss terms in training (mt_minimax_aux_terms): loss.csv's columns
     * after the cross-entropy's, in this order */
    mt_minimax_aux aux_terms[MT_AUX_MAX];
    int n_aux;
    int32_t *dev_batch;  /* (4,B,T) on the backend: ids, labels, positions, segments */
    float *export_stage; /* rank 0, device backends: one gathered bucket on the host */
    mt_train_state state;
    mt_logger log;
    mt_outdir outdir;                  /* rank 0: output.dir's lock */
    int64_t planned_activations;       /* the arena's planned peak of one micro-step (bytes) */
    mt_lr_schedule lr_schedule;        /* resolved once the data (steps per epoch) is known */
    double slowest_step, slowest_save; /* seconds, so far: the automatic dist.timeout */
    double watch_floor, watch_factor;  /* its constants (trainer.c) */
} trainer;

/* dist.expert_parallel on the model and the zero (train/trainer_ep.c): a layout that cannot run
 * stops every rank with one line naming the keys. */
void trainer_ep_init(trainer *t);

#define LOG0(t, ...)                                                                               \
    do {                                                                                           \
        if ((t)->comm->rank == 0) {                                                                \
            printf(__VA_ARGS__);                                                                   \
            fflush(stdout);                                                                        \
        }                                                                                          \
    } while (0)

/* Rank 0 found why the run must not go on (empty: nothing): every rank learns it, rank 0
 * prints it as the one error line, and every rank ends with exit code 2 (trainer.c). */
void trainer_refuse_if(trainer *t, const char *why);
/* the watchdog's limit (trainer_watch.c) */
/* the automatic dist.timeout's limit before anything is timed */
#define TRAINER_WATCH_UNTIMED_S 1800.0
/* Its constants (MT_TEST_WATCHDOG for the tests). */
void trainer_watch_setup(trainer *t);
/* Sets the limit for the training steps (save = false) or a checkpoint. */
void trainer_watch(trainer *t, bool save);
/* After a step (save = false) or a checkpoint of dt seconds. */
void trainer_watch_timed(trainer *t, bool save, double dt);
/* How long a rank may show no sign of life while the others wait for it to finish work of its
 * own (the token cache build): dist.timeout, or the automatic limit's floor. */
double trainer_watch_silence(const trainer *t);

/* checkpoints (trainer_checkpoint.c) */
/* What the state records besides the weights: the recipe hash, the global batch layout, and on
 * rank 0 the digests of the inputs (the model config, and the token cache's key of cc). */
void trainer_state_init(trainer *t, const char *config_path, const mt_token_cache_cfg *cc);
/* <output.dir>/checkpoint-<step>: the export (output.export), recipe.toml and the state,
 * written as checkpoint-<step>.tmp and renamed when complete (removed by a rank that fails
 * meanwhile). */
void trainer_save(trainer *t, int step);

/* before the model (trainer_output.c) */
/* train.global_batch_size: the accumulation steps follow from it and the rank count. Rank 0's
 * reason to stop, if any, into why. */
void trainer_resolve_batch(trainer *t, char *why, size_t n);
/* Rank 0: output.dir checked against the inputs, a resume's train.max_steps against the
 * checkpoint's step, output.dir opened (its lock, another run's results, --overwrite,
 * --rewind: output_dir.h), and the resolved recipe written into it. The reason to stop, if
 * any, into why; nothing when why already holds one. */
void trainer_open_output(trainer *t, const char *resume, bool overwrite, bool rewind, char *why,
                         size_t n);

/* resuming (trainer_resume.c) */
/* The refusal of a resume whose train.max_steps is at or below the checkpoint's step, into
 * why. */
void trainer_resume_steps_refusal(const char *dir, long max_steps, long step, char *why, size_t n);
/* `--resume DIR` with no recipe: DIR/recipe.toml with the overrides sets on top and output.dir
 * the directory DIR is in (unless an override sets it). false and why in err when it fails
 * (DIR/recipe.toml missing, named). Every rank. */
bool trainer_resume_recipe_load(mt_recipe *rc, const char *dir, const char *const *sets, int n_sets,
                                char *err, size_t n);
/* Rank 0, before any model is built: why this run's recipe (t->rc, its batch resolved) must not
 * resume the checkpoint dir, into why (left empty when it may): no manifest, a recipe.toml
 * that does not match its digest, or numerics keys that differ from the checkpoint's recipe,
 * each named with both values. Nothing when why already holds a reason. */
void trainer_resume_check_recipe(trainer *t, const char *dir, char *why, size_t n);
/* Checks the checkpoint of dir against this run (refusing a changed recipe, global batch or
 * input, naming it), then loads it. */
void trainer_resume(trainer *t, const char *dir);

/* one optimizer step (trainer_step.c) */
typedef struct {
    double loss, grad_norm, lr;
    double aux[MT_AUX_MAX]; /* each auxiliary term as logged (trainer aux_terms' order) */
    int64_t tokens, targets;
    bool skipped;
} step_result;

/* Forward and backward of the step's micro-batches, then AdamW (or a skip). */
step_result trainer_run_step(trainer *t, int step);

/* train.num_train_epochs (the steps from the data's steps per epoch, into t->rc's max_steps),
 * the warmup of train.warmup_ratio and t->lr_schedule, printed; after the data is set up. */
void trainer_setup_schedule(trainer *t);

/* The eval loss with the current weights over every held-out sample (t->eval_sampler): the
 * token-level mean over their labelled tokens, equal on every rank. */
double trainer_run_eval(trainer *t);
/* The eval loss (loss) and/or the accuracy by generation (gen) after `step` (0: before the
 * first), into one row of eval.csv, metrics.jsonl and the log (trainer_eval.c). */
void trainer_eval(trainer *t, int step, bool loss, bool gen);
/* --eval-only: the eval loss and the accuracy by generation (whichever the recipe sets up) of
 * the weights as loaded, as step 0 of eval.csv and metrics.jsonl (no loss.csv), and the log. */
void trainer_eval_only(trainer *t);

/* processes sharing this node's memory (trainer.c) */
int trainer_local_ranks(const trainer *t);

/* accuracy by generation (trainer_generate.c) */
/* Rank 0, before any model is built: eval.generate_data's problems read, or why not into why
 * (nothing when why already holds a reason). Sets t->generates on every rank. */
void trainer_generate_read(trainer *t, char *why, size_t n);
/* After the model and the data: the other ranks read the problems, the tokenizer is loaded,
 * and a rank's replica is checked against the node's memory (exit 2 naming the sizes). */
void trainer_generate_setup(trainer *t);
/* Whether step (the last one: last) evaluates by generation (eval.generate_every, _at_end). */
bool trainer_generate_due(const trainer *t, int step, bool last);
/* The accuracy of the current weights into row (has_gen, correct, samples, gen_seconds), the
 * per-sample results into <output.dir>/eval-generate-<step>.jsonl (rank 0, atomically), and
 * the log. Every rank. */
void trainer_generate(trainer *t, int step, mt_eval_row *row);
void trainer_generate_free(trainer *t);
