/* trainer_internal.h: the training job's parts, each owned by one job (the device, the model
 * and its shards, the data, the batch buffers, generation, the outputs, the watchdog, the step's
 * numbers), and the functions of the job's files (train/trainer_*.c), each taking only the parts
 * it reads or changes (const where it only reads). The parts held together are for main and the
 * loop alone (train/trainer_run.h). The calls between the files go one way, no cycle:
 *   trainer.c (main) -> output, resume, generate, setup, batch, watch, eval (--eval-only), run
 *   run -> step, eval, generate, checkpoint, final, resume, output, watch;  final -> checkpoint
 *   setup -> checkpoint, watch;  step -> batch;  eval -> batch, generate;  generate -> watch;
 *   output -> resume
 * Not an interface. */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "data/gsm8k.h"
#include "data/head_data.h"
#include "data/sampler.h"
#include "data/token_cache.h"
#include "eval/messages_eval.h"
#include "models/minimax.h"
#include "models/weights.h"
#include "train/checkpoint.h"
#include "train/comm.h"
#include "train/logger.h"
#include "train/output_dir.h"
#include "train/recipe.h"
#include "train/schedule.h"
#include "train/context_parallel.h"
#include "train/expert_parallel.h"
#include "train/sharded.h"
#include "train/zero.h"

/* Rank 0 of comm (an mt_comm *) prints, at once. */
#define LOG0(comm, ...)                                                                            \
    do {                                                                                           \
        if ((comm)->rank == 0) {                                                                   \
            printf(__VA_ARGS__);                                                                   \
            fflush(stdout);                                                                        \
        }                                                                                          \
    } while (0)

/* ------------------------------------------------------------------------------------------ */
/* the parts */

/* The processes and the device (trainer_setup.c). */
typedef struct {
    mt_comm *host; /* MPI: job control, data, checkpoints */
    mt_comm *comm; /* the sharded optimizer's: host (CPU backend) or NCCL (CUDA) */
    const mt_backend *be;
} trainer_device;

/* The model and its ZeRO-3 shards (trainer_setup.c). */
typedef struct {
    mt_minimax_config cfg;
    mt_minimax model;
    mt_naming naming;
    mt_zero zero;
    mt_ctx ctx;
    mt_sharded sharded;
    mt_expert_parallel ep;              /* dist.expert_parallel (P = 1: none) */
    mt_context_parallel cp;             /* dist.context_parallel (C = 1: none) */
    char config_path[MT_PATH_MAX + 32]; /* the model's config.json */
    /* the model's auxiliary loss terms in training (mt_minimax_aux_terms): loss.csv's columns
     * after the cross-entropy's, in this order */
    mt_minimax_aux aux_terms[MT_AUX_MAX];
    int n_aux;
    int64_t planned_activations; /* the arena's planned peak of one micro-step (bytes) */
    bool head_pad_unset; /* a head model whose config.json has no pad_token_id (the data's) */
} trainer_model;

/* The tokenized data and its samplers (trainer_setup.c). */
typedef struct {
    char tokenizer_dir[MT_PATH_MAX];
    mt_token_data data;
    mt_sampler sampler; /* the training samples (all but the held-out ones) */
    /* train.objective = "reward": the pairs of data and eval_data the samplers draw from
     * (trainer_head_pairs_view); empty otherwise */
    mt_token_data pairs, eval_pairs;
    mt_token_data eval_data; /* data.eval_path's samples (when set) */
    mt_sampler eval_sampler; /* the samples to evaluate on (evaluates), one epoch per eval */
    int64_t eval_targets;    /* their labelled tokens: the eval loss's denominator */
    bool evaluates;          /* data.eval_samples > 0 or data.eval_path */
} trainer_data;

/* One micro-batch's buffers, on the host and on the backend (trainer_batch.c). */
typedef struct {
    const mt_backend *be;
    int64_t B, T;                      /* train.per_device_train_batch_size, data.max_length */
    bool trim_padding;                 /* data.trim_padding */
    bool padding_free;                 /* data.padding_free: a micro-batch's rows as one row */
    int32_t *ids, *labels, *pos, *seg; /* (B,T) each, host */
    int64_t *real; /* (B) host: real tokens per row (the aux loss leaves padding out) */
    int32_t *dev;  /* (4,B,T) on the backend: ids, labels, positions, segments */
    /* a head objective's (trainer_head.c; objective 0: SFT): B is the sampler's rows, twice
     * them for reward pairs; the rows' samples, and the targets on the host */
    int objective;
    int64_t num_labels;
    int64_t *item;        /* (B) */
    int32_t *head_class;  /* (B,T): class ids, per row or per token */
    float *head_target;   /* (B,num_labels) */
    int32_t *start, *end; /* (B) QA */
    float *margin;        /* (B/2) reward pairs */
    /* dist.context_parallel: this rank's index among the cp_size ranks that share each row;
     * the upload keeps the row's chunks rank and 2 cp_size - 1 - rank (B, T / cp_size) */
    int cp_size, cp_rank;
} trainer_batch;

/* The tensors of one micro-batch on the backend (in trainer_batch's dev). */
typedef struct {
    mt_tensor ids, labels, pos, seg;
} trainer_micro;

/* Accuracy by generation, eval.generate_* (trainer_generate.c). */
typedef struct {
    bool generates;     /* eval.generate_data is set */
    mt_gsm8k_set set;   /* its problems (the first eval.generate_samples), every rank */
    mt_gsm8k_set shots; /* eval.generate_shots_file's examples (n-shot), every rank */
    mt_tokenizer *tok;
    struct mt_chat_template *chat; /* renders its prompts (data/chat.h): the recipe's */
    int64_t replica_bytes;         /* the full replica a rank decodes with */
    bool gathered;                 /* decodes through the gathers (eval.generate_weights) */
    /* eval.generate_task = "messages": the conversations and shots instead of set and shots,
     * and the metrics (eval/messages_eval.h) */
    bool messages;
    mt_msgs_set msgs, msg_shots;
    mt_match match;
    int64_t n; /* the samples evaluated */
} trainer_gen;

/* What the run writes: the training state, the logs, output.dir (trainer_output.c,
 * trainer_checkpoint.c). */
typedef struct {
    mt_train_state state;
    mt_logger log;
    mt_outdir outdir;    /* rank 0: output.dir's lock */
    float *export_stage; /* rank 0, device backends: one gathered bucket on the host */
} trainer_out;

/* The watchdog's limit, dist.timeout (trainer_watch.c). */
typedef struct {
    double timeout;                    /* dist.timeout: < 0 follows the slowest so far */
    double slowest_step, slowest_save; /* seconds, so far: the automatic dist.timeout */
    double floor, factor;              /* its constants */
} trainer_watchdog;

/* The numbers of an optimizer step (trainer_step.c), from the recipe (trainer_setup.c). */
typedef struct {
    double beta1, beta2, eps, weight_decay; /* train.adam_*, train.weight_decay */
    double max_grad_norm;                   /* train.max_grad_norm (<= 0: no clipping) */
    bool skip_nonfinite;                    /* train.skip_nonfinite_steps */
    mt_lr_schedule lr;                      /* resolved once the data (steps per epoch) is known */
    uint64_t jitter_seed; /* train.seed: the router jitter's draws (trainer_step.c) */
} trainer_step_cfg;

/* ------------------------------------------------------------------------------------------ */
/* setup (trainer_setup.c): the device, the model and its shards, the data, the schedule */

/* dist.backend's device, the model's config, the memory checks (arena, the rank's state), the
 * ZeRO-3 shards, expert parallelism, the weights (model.path, checked, or the init), the
 * activation arena. A run that cannot fit stops every rank with exit 2, naming the remedies. */
void trainer_setup_model(trainer_device *d, trainer_model *m, const mt_recipe *rc);
/* The token caches (rank 0 builds, the others read; w's silence while they wait), the pad
 * token, the samplers; rank 0 records the inputs' digests into st. eval_only (--eval-only) with
 * data.eval_path: only the eval file's cache and sampler (the training data is not read). */
void trainer_setup_data(const mt_recipe *rc, const trainer_device *d, trainer_model *m,
                        const trainer_watchdog *w, bool eval_only, trainer_data *data,
                        mt_train_state *st);
/* train.num_train_epochs (the steps from s's steps per epoch, into rc's max_steps), the warmup
 * of train.warmup_ratio and the schedule, printed, with the step's other numbers into sc. */
void trainer_setup_schedule(mt_recipe *rc, const mt_comm *comm, const mt_sampler *s,
                            trainer_step_cfg *sc);
void trainer_data_free(trainer_data *data);
void trainer_model_free(trainer_model *m);
/* The device's communicator (NCCL); host stays, for the last barrier and MPI_Finalize. */
void trainer_device_free(trainer_device *d);

/* ------------------------------------------------------------------------------------------ */
/* batch buffers (trainer_batch.c) */

/* objective (data/head_data.h) and num_labels: a head objective's buffers (reward: 2B rows). */
void trainer_batch_init(trainer_batch *b, const mt_backend *be, int64_t B, int64_t T,
                        bool trim_padding, bool padding_free, int objective, int64_t num_labels);
/* Fills micro-batch m of sampler s's current step and uploads it; the batch divides its loss
 * by denom. data.trim_padding: rows cut after the longest one's last token (rounded up to 8);
 * data.padding_free: the rows' real tokens one after another in a single row (B = 1), each
 * sample its own segment, padded at the end only (to a multiple of 8). */
mt_minimax_batch trainer_batch_upload(trainer_batch *b, const mt_sampler *s, int64_t m,
                                      int64_t denom, trainer_micro *mt);
void trainer_batch_free(trainer_batch *b);

/* ------------------------------------------------------------------------------------------ */
/* the head objectives (trainer_head.c) */

/* Reward data d (samples 2p chosen, 2p + 1 rejected) as pairs for a sampler: view sample p spans
 * both (d's ids, shared), head_i32 its chosen length, head_f32 its margin. Empty for other
 * objectives. */
void trainer_head_pairs_view(const mt_token_data *d, mt_token_data *view);
void trainer_head_pairs_free(mt_token_data *view);
/* The loss terms of sample i of d (a sampler's data): a reward pair 1, a class id 1 (0 when
 * ignored), float targets their number, token classification its labelled tokens, QA 1. */
int64_t trainer_head_item_terms(const mt_token_data *d, int64_t i);
/* Those of the sampler's current global batch: every head loss's denominator. */
int64_t trainer_head_step_terms(const mt_sampler *s);
/* The metric columns of data's objective: 0 none (SFT, float targets), 1 accuracy, 2 accuracy
 * and margin (reward pairs). */
int trainer_head_columns(const trainer_data *data);
/* trainer_batch_upload for a head objective (b->objective). */
mt_minimax_batch trainer_head_upload(trainer_batch *b, const mt_sampler *s, int64_t m,
                                     int64_t denom, trainer_micro *mt);

/* ------------------------------------------------------------------------------------------ */
/* one optimizer step (trainer_step.c) */

typedef struct {
    double loss, grad_norm, lr;
    double aux[MT_AUX_MAX]; /* each auxiliary term as logged (trainer_model's aux_terms' order) */
    int64_t tokens, targets;
    mt_head_stats head; /* a head model's metrics over the global batch (sums) */
    bool skipped;
} step_result;

/* Forward and backward of the step's micro-batches (the sampler's next step) through m's
 * shards, the global grad norm, clipping, then AdamW (or a skip). */
step_result trainer_step_run(trainer_model *m, mt_comm *comm, mt_sampler *s, trainer_batch *b,
                             const trainer_step_cfg *sc, int step);

/* ------------------------------------------------------------------------------------------ */
/* evaluation (trainer_eval.c) */

/* The eval loss with the current weights over every held-out sample (data's eval_sampler): the
 * token-level mean over their labelled tokens, equal on every rank, into row (has_loss, loss,
 * tokens, seconds). */
void trainer_eval_loss(mt_eval_row *row, mt_comm *comm, mt_sharded *sh, trainer_data *data,
                       trainer_batch *b);
/* --eval-only: the eval loss and the accuracy by generation (whichever the recipe sets up) of
 * the weights as loaded, as step 0 of eval.csv and metrics.jsonl (no loss.csv), and the log. */
void trainer_eval_only(const mt_recipe *rc, const trainer_device *d, trainer_model *m,
                       trainer_data *data, trainer_batch *b, trainer_gen *g,
                       const trainer_watchdog *w, mt_logger *log);

/* ------------------------------------------------------------------------------------------ */
/* accuracy by generation (trainer_generate.c) */

/* Rank 0, before any model is built: eval.generate_data's problems read, or why not into why
 * (nothing when why already holds a reason). Sets g->generates on every rank. */
void trainer_generate_read(const mt_recipe *rc, const mt_comm *comm, trainer_gen *g, char *why,
                           size_t n);
/* After the model and the data: the other ranks read the problems, the tokenizer is loaded,
 * and a rank's replica is checked against the node's memory (exit 2 naming the sizes). */
void trainer_generate_setup(const mt_recipe *rc, const trainer_device *d, trainer_model *m,
                            const char *tokenizer_dir, trainer_gen *g);
/* Whether step (the last one: last) evaluates by generation (eval.generate_every, _at_end). */
bool trainer_generate_due(const mt_recipe *rc, const trainer_gen *g, int step, bool last);
/* The accuracy of the current weights into row (has_gen, correct, samples, gen_seconds), the
 * per-sample results into <output.dir>/eval-generate-<step>.jsonl (rank 0, atomically), and
 * the log; w re-arms the watchdog after the replica's uneven shares. Every rank. */
void trainer_generate(const mt_recipe *rc, const trainer_device *d, trainer_model *m,
                      trainer_gen *g, const trainer_watchdog *w, int step, mt_eval_row *row);
void trainer_generate_free(trainer_gen *g);

/* ------------------------------------------------------------------------------------------ */
/* checkpoints (trainer_checkpoint.c) */

/* What the state records besides the weights: the recipe hash, the global batch layout, and on
 * rank 0 the digests of the inputs (the model config, and the token cache's key of cc). */
void trainer_state_init(mt_train_state *st, const mt_comm *comm, const mt_recipe *rc,
                        const char *config_path, const mt_token_cache_cfg *cc);
/* <output.dir>/checkpoint-<step>: the export (output.export), recipe.toml and the state (with
 * data's sampler position), written as checkpoint-<step>.tmp and renamed when complete
 * (removed by a rank that fails meanwhile). */
void trainer_checkpoint_save(const mt_recipe *rc, const trainer_device *d, trainer_model *m,
                             const trainer_data *data, trainer_out *out, int step);
/* The HF export into dir (every rank: full buckets, gathered one at a time, written by rank 0
 * through *stage, one bucket on the host, from a device backend) in output.export_dtype (fp8:
 * the FP8 source's layout, models/weights.h mt_weights_writer_mirror), with the tokenizer's
 * and the chat template's files of tokenizer_dir and generation_config.json. */
void trainer_export(const mt_recipe *rc, const trainer_device *d, trainer_model *m,
                    const char *tokenizer_dir, float **stage, const char *dir);

/* ------------------------------------------------------------------------------------------ */
/* what ships (trainer_final.c) */

/* output.export_final: <output.dir>/final/, the model of the run's last step without the
 * training state: the files of checkpoint-<step>'s export hard-linked (copied across file
 * systems), or with output.export = false exported there. Every rank, after the checkpoint. */
void trainer_final_write(const mt_recipe *rc, const trainer_device *d, trainer_model *m,
                         const trainer_data *data, trainer_out *out, int step);

/* ------------------------------------------------------------------------------------------ */
/* resuming (trainer_resume.c) */

/* The refusal of a resume whose train.max_steps is at or below the checkpoint's step, into
 * why. */
void trainer_resume_steps_refusal(const char *dir, long max_steps, long step, char *why, size_t n);
/* `--resume DIR` with no recipe: DIR/recipe.toml with the overrides sets on top and output.dir
 * the directory DIR is in (unless an override sets it). false and why in err when it fails
 * (DIR/recipe.toml missing, named). Every rank. */
bool trainer_resume_recipe_load(mt_recipe *rc, const char *dir, const char *const *sets, int n_sets,
                                char *err, size_t n);
/* Rank 0, before any model is built: why this run's recipe (rc, its batch resolved) must not
 * resume the checkpoint dir, into why (left empty when it may): no manifest, a recipe.toml
 * that does not match its digest, or numerics keys that differ from the checkpoint's recipe,
 * each named with both values. Nothing when why already holds a reason. */
void trainer_resume_check_recipe(const mt_recipe *rc, const mt_comm *comm, const char *dir,
                                 char *why, size_t n);
/* Every rank: the checkpoint dir's manifest into st; rank 0: why this run (its recipe rc and
 * state now) must not resume it (a changed recipe, global batch or input, named), into why. */
void trainer_resume_read(const mt_recipe *rc, const mt_comm *comm, const mt_train_state *now,
                         const char *dir, mt_train_state *st, char *why, size_t n);
/* Loads the checkpoint dir (manifest st, checked) into m's shards, the step and the data
 * position into state and s. */
void trainer_resume_load(const mt_comm *comm, trainer_model *m, mt_sampler *s,
                         mt_train_state *state, const mt_train_state *st, const char *dir);

/* ------------------------------------------------------------------------------------------ */
/* before the model (trainer_output.c) */

/* train.global_batch_size: the accumulation steps follow from it and the rank count. Rank 0's
 * reason to stop, if any, into why. */
void trainer_resolve_batch(mt_recipe *rc, const mt_comm *comm, char *why, size_t n);
/* Rank 0: output.dir checked against the inputs, a resume's train.max_steps against the
 * checkpoint's step, output.dir opened into od (its lock, another run's results, --overwrite,
 * --rewind: output_dir.h), and the resolved recipe written into it (printed too when verbose,
 * else named). The reason to stop, if any, into why; nothing when why already holds one. */
void trainer_open_output(const mt_recipe *rc, const mt_comm *comm, mt_outdir *od,
                         const char *resume, bool overwrite, bool rewind, bool verbose, char *why,
                         size_t n);
/* Rank 0 found why the run must not go on (empty: nothing): every rank learns it, rank 0
 * prints it as the one error line (and releases od's lock), and every rank ends with exit
 * code 2. */
void trainer_refuse_if(const trainer_device *d, mt_outdir *od, const char *why);

/* ------------------------------------------------------------------------------------------ */
/* the watchdog's limit (trainer_watch.c) */

/* the automatic dist.timeout's limit before anything is timed */
#define TRAINER_WATCH_UNTIMED_S 1800.0
/* dist.timeout (timeout) and the automatic limit's constants (MT_TEST_WATCHDOG for the
 * tests). */
void trainer_watch_init(trainer_watchdog *w, double timeout);
/* The limit of the steps: dist.timeout when set, else the automatic one (trainer_watch_arm). */
void trainer_watch_start(const trainer_watchdog *w, const trainer_device *d);
/* Sets the automatic limit for the training steps (save = false) or a checkpoint. */
void trainer_watch_arm(const trainer_watchdog *w, const trainer_device *d, bool save);
/* After a step (save = false) or a checkpoint of dt seconds. */
void trainer_watch_timed(trainer_watchdog *w, const trainer_device *d, bool save, double dt);
/* How long a rank may show no sign of life while the others wait for it to finish work of its
 * own (the token cache build): dist.timeout, or the automatic limit's floor. */
double trainer_watch_silence(const trainer_watchdog *w);
