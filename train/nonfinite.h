/* nonfinite.h: where a NaN or an infinity is, named by parameter, op and bucket: in the state a
 * run resumes from, and in a training step whose loss or gradient went non-finite. Both look
 * only through the backend table (vec_stats), so they work on every backend, sharded or not. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "train/sharded.h"

/* This rank's owned master weights and AdamW moments (after loading a training state): true
 * when all are finite; else false with the first bad value in err, named by parameter, element
 * and array. Local: one vec_stats per bucket and array. */
bool mt_sharded_check_finite(const mt_sharded *s, char *err, size_t n);

/* The micro-batch m of the step being diagnosed (its device tensors valid until the next call). */
typedef mt_minimax_batch (*mt_micro_batch_fn)(void *user, int64_t m);

/* After a step whose loss or gradient was not finite (the optimizer did not run): runs the
 * step's n_micro micro-batches again with a finiteness check after every kernel (the node hook
 * of autograd/tensor.h; forward: the inputs read and the output, backward: the input gradients)
 * and describes in msg the first non-finite value any rank computed, in execution order: which
 * op, in which bucket (layer, expert), which parameter or tensor, which element, and on which
 * rank and micro-batch. Collective (the re-run gathers and reduce-scatters as a step does):
 * every rank calls it with the same n_micro. The owned gradients are overwritten. false (msg
 * says so) when every value was finite the second time. */
bool mt_sharded_find_nonfinite(mt_sharded *s, int64_t n_micro, mt_micro_batch_fn batch, void *user,
                               char *msg, size_t n);
