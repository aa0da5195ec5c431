/* sharded.h: a model whose parameters live in ZeRO-3 shards (train/zero.h): the bucket hooks
 * that gather before use (forward and, through the tape's tag hook, backward) and
 * reduce-scatter gradients after each bucket's backward; one micro-step; the optimizer step.
 * The trainer and the distributed tests drive training through this. */
#pragma once
#include <stdbool.h>

#include "models/minimax.h"
#include "models/weights.h"
#include "train/zero.h"

typedef struct {
    mt_minimax *model;
    mt_zero *zero;
    mt_ctx *ctx;
    bool prefetch; /* gather the next bucket while one computes (default true) */
} mt_sharded;

/* The model's weights into z's owned shards: each rank reads (reader) or draws (reader NULL:
 * mt_weights_init_random_range with init_seed) only the elements it owns, through a bounded
 * host buffer. */
void mt_sharded_load(mt_zero *z, mt_minimax *m, mt_weights_reader *reader, uint64_t init_seed);

/* Binds every bucket of the model to its gather slot, sets the weight-decay ranges (matrices
 * decay, norm vectors do not, as HF's Trainer) and installs the tape's tag hook on ctx. */
void mt_sharded_init(mt_sharded *s, mt_minimax *m, mt_zero *z, mt_ctx *c);

/* Binds every bucket to its gather slot with its gradient buffer (training), or without
 * (grads false: generation, whose kernels take operands without gradients as inference,
 * kernels/cpu/gemm_rows.c). */
void mt_sharded_bind(mt_sharded *s, bool grads);

/* The hooks a forward runs with: each bucket gathered on entry (the next one prefetched),
 * released on leaving. Generation on the sharded model decodes through them
 * (train/trainer_generate.c). */
mt_bucket_hooks mt_sharded_forward_hooks(mt_sharded *s);

/* The losses of a micro-step besides the cross-entropy: the model's auxiliary terms, in its
 * order (mt_minimax_aux_terms), each value 0 where the forward gave none. */
typedef struct {
    int n;
    double value[MT_AUX_MAX];
    mt_head_stats head; /* a head model's metrics (models/minimax.h), 0 for a causal LM */
} mt_micro_extra;

/* Forward and backward of one micro-batch; gradients accumulate into the owned shards.
 * Returns the cross-entropy value of this micro-batch (with batch->loss_denom the global
 * count, these add up to the global mean); *extra (may be NULL) gets the auxiliary terms. */
double mt_sharded_micro_step(mt_sharded *s, const mt_minimax_batch *batch, mt_micro_extra *extra);

/* The forward alone of one micro-batch (evaluation: the buckets gathered as in training, no
 * gradients, nothing saved for a backward); returns its cross-entropy value as
 * mt_sharded_micro_step does, without the aux loss; a head model's metrics added into *head
 * (may be NULL). */
double mt_sharded_micro_eval(mt_sharded *s, const mt_minimax_batch *batch, mt_head_stats *head);

/* Global grad norm into *grad_norm; when every gradient is finite: clips to max_grad_norm
 * (<= 0: no clipping), runs AdamW on the owned shards and returns true; else returns false
 * and changes nothing. */
bool mt_sharded_optimizer_step(mt_sharded *s, const mt_adamw *opt, double max_grad_norm,
                               double *grad_norm);
