/* context_parallel.h: context parallelism in the trainer (dist.context_parallel = C,
 * docs/training.md "Long sequences"): the world splits into groups of C consecutive ranks;
 * the ranks of a group read the same samples (the sampler's data-parallel rank is rank / C)
 * and each keeps its two chunks of every row (autograd/context_parallel.h; the batch upload,
 * train/trainer_batch.c); the model's ops that cross tokens exchange through the group
 * installed in the context (mt_ctx.cp). ZeRO-3 stays over the whole world: every rank's
 * gradient is its tokens' part of the global batch's, so the reduce-scatter sums them. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "autograd/context_parallel.h"
#include "models/minimax.h"
#include "train/comm.h"

typedef struct {
    int C;               /* 1: none (the rest unset) */
    mt_comm *group;      /* the group on the optimizer's communicator (device buffers for NCCL) */
    mt_comm *host_group; /* the same ranks on the host communicator (the router's counts) */
    mt_cp_group cp;      /* the hooks the ops call */
} mt_context_parallel;

/* Why dist.context_parallel = C cannot run with this world and model (false: it can), one line
 * in why naming the key: C must divide the ranks, the communicator must split, and the model's
 * layers must be ones the ops split (no MSA layer yet) with no router jitter. */
bool mt_context_parallel_refused(int C, const mt_comm *world, const mt_minimax *m, char *why,
                                 size_t len);
/* The groups (C > 1: a split of world and of host, every rank calls it); the caller installs
 * &cp->cp in its context (mt_ctx.cp) when C > 1. */
void mt_context_parallel_init(mt_context_parallel *cp, int C, mt_comm *world, mt_comm *host);
void mt_context_parallel_free(mt_context_parallel *cp);
