/* cp_group.h: a context-parallel group (autograd/context_parallel.h) on a communicator: the
 * group's allgather and reduce_scatter hooks call the communicator's (train/comm.h: the same
 * rank-major semantics, on host buffers for MPI and device buffers for NCCL, as the backend's
 * memory requires). The trainer splits the world into context groups and installs one such
 * group per rank; the ops (mt_cp_attention) exchange through it. */
#pragma once
#include "autograd/context_parallel.h"
#include "train/comm.h"

/* Every rank of c in c's order: size c->size, rank c->rank, all three hooks on c (a caller
 * whose c is a device communicator points user_host at a host one); c must outlive the
 * group's use. */
mt_cp_group mt_cp_group_comm(mt_comm *c);
