/* expert_parallel.h: expert parallelism beside ZeRO-3 (dist.expert_parallel = P, docs/training.md
 * "Expert parallelism"). The world splits into groups of P consecutive ranks; within a group,
 * rank p computes experts p*E/P .. (p+1)*E/P - 1 of every MoE layer, and the group's tokens
 * travel to them and back by all-to-all (mt_ep_exchange). Every parameter stays ZeRO-3 sharded
 * over the whole world (zero.h: mt_zero_set_expert_parallel): an expert is gathered only to the
 * ranks that own it, one per group, and its gradient returns to the shard owners from them.
 * Checkpoints, exports and resumes are those of P = 1, whatever P was. */
#pragma once

#include "models/minimax.h"
#include "train/comm.h"
#include "train/zero.h"

typedef struct {
    int P;
    mt_comm *group;      /* this rank's group (world ranks g*P .. g*P + P - 1); NULL when P = 1 */
    mt_comm *host_group; /* the same ranks on the host communicator (group itself on the CPU) */
    mt_exchange ex;      /* what the model's MoE layers call (m->ep) */
} mt_expert_parallel;

/* Why P cannot run this model on this communicator, into why (a message naming the recipe
 * keys), or false when it can. */
bool mt_expert_parallel_refused(int P, const mt_comm *world, const mt_minimax *m, const mt_zero *z,
                                char *why, size_t len);
/* Sets it up (every rank calls it; P = 1 changes nothing): the groups, m->ep, z's owners.
 * world is z's communicator (MPI, or NCCL on a device backend), host the MPI one over the same
 * ranks (world itself on the CPU): the row counts travel there. Dies with the refusal's
 * message when it cannot. */
void mt_expert_parallel_init(mt_expert_parallel *ep, int P, mt_comm *world, mt_comm *host,
                             mt_minimax *m, mt_zero *z);
void mt_expert_parallel_free(mt_expert_parallel *ep, mt_minimax *m);
