/* trainer_ep.c: dist.expert_parallel for the trainer (train/expert_parallel.h). */
#include <stdio.h>
#include <stdlib.h>

#include "train/trainer_internal.h"

void trainer_ep_init(trainer *t) {
    const int P = t->rc.dist_expert_parallel;
    char why[256];
    if (mt_expert_parallel_refused(P, t->comm, &t->model, &t->zero, why, sizeof(why))) {
        if (t->comm->rank == 0) fprintf(stderr, "error: %s\n", why);
        mt_comm_finalize(t->host);
        exit(2);
    }
    mt_expert_parallel_init(&t->ep, P, t->comm, t->host, &t->model, &t->zero);
    if (P > 1)
        LOG0(t,
             "expert parallelism: %d groups of %d ranks; each rank computes 1/%d of every MoE "
             "layer's experts, its tokens' rows exchanged by all-to-all\n",
             t->comm->size / P, P, P);
}
