/* expert_parallel.c: see expert_parallel.h. */
#include "train/expert_parallel.h"

#include <stdio.h>
#include <stdlib.h>

#include "core/check.h"

static void ep_alltoallv(void *user, const void *send, const int64_t *send_counts, void *recv,
                         const int64_t *recv_counts, size_t elem) {
    mt_comm *g = user;
    g->alltoallv(g, send, send_counts, recv, recv_counts, elem);
}

bool mt_expert_parallel_refused(int P, const mt_comm *world, const mt_minimax *m, const mt_zero *z,
                                char *why, size_t len) {
    if (P < 1) return snprintf(why, len, "dist.expert_parallel = %d must be >= 1", P), true;
    if (P == 1) return false;
    if (world->size % P)
        return snprintf(why, len, "dist.expert_parallel = %d does not divide the %d ranks", P,
                        world->size),
               true;
    if (P > 64)
        return snprintf(why, len, "dist.expert_parallel = %d: at most 64 ranks per group", P), true;
    if (m->unit != MT_GATHER_EXPERT)
        return snprintf(why, len,
                        "dist.expert_parallel = %d needs dist.gather_unit = \"expert\" (each "
                        "expert its own bucket, gathered to its owners only)",
                        P),
               true;
    if (m->gradient_checkpointing)
        return snprintf(why, len,
                        "dist.expert_parallel = %d with train.gradient_checkpointing is not "
                        "supported yet (a recomputed layer would exchange its rows again)",
                        P),
               true;
    if (z->gather_bf16)
        return snprintf(why, len,
                        "dist.expert_parallel = %d gathers fp32 parameters only: set "
                        "dist.gather_dtype = \"fp32\"",
                        P),
               true;
    if (!world->alltoallv || !world->split)
        return snprintf(why, len,
                        "dist.expert_parallel = %d: the %s communicator has no all-to-all", P,
                        world->name),
               true;
    for (int l = 0; l < m->cfg.num_hidden_layers; l++)
        if (m->plan[l].mlp == MT_MLP_MOE && m->plan[l].n_experts % P)
            return snprintf(why, len,
                            "dist.expert_parallel = %d does not divide layer %d's %d experts", P, l,
                            m->plan[l].n_experts),
                   true;
    return false;
}

void mt_expert_parallel_init(mt_expert_parallel *ep, int P, mt_comm *world, mt_comm *host,
                             mt_minimax *m, mt_zero *z) {
    char why[256];
    MT_CHECK(!mt_expert_parallel_refused(P, world, m, z, why, sizeof(why)), "%s", why);
    *ep = (mt_expert_parallel){.P = P};
    if (P == 1) return;
    ep->group = world->split(world, world->rank / P, world->rank);
    MT_CHECK(ep->group->size == P && ep->group->rank == world->rank % P,
             "expert parallelism: rank %d is rank %d of %d in its group, expected %d of %d",
             world->rank, ep->group->rank, ep->group->size, world->rank % P, P);
    ep->host_group = host == world ? ep->group : host->split(host, host->rank / P, host->rank);
    MT_CHECK(ep->host_group->rank == ep->group->rank && host->rank == world->rank,
             "expert parallelism: the host and %s communicators order the ranks differently",
             world->name);
    ep->ex =
        (mt_exchange){P, ep->group->rank, ep_alltoallv, ep->group, ep_alltoallv, ep->host_group};
    m->ep = &ep->ex;
    int *owner = mt_malloc(sizeof(int) * (size_t)m->n_buckets, "ep owners");
    for (int b = 0; b < m->n_buckets; b++) owner[b] = -1;
    for (int l = 0; l < m->cfg.num_hidden_layers; l++) {
        const mt_layer_plan *p = &m->plan[l];
        if (p->mlp != MT_MLP_MOE) continue;
        const int Eq = p->n_experts / P;
        for (int e = 0; e < p->n_experts; e++) owner[mt_minimax_expert_bucket(m, l, e)] = e / Eq;
    }
    mt_zero_set_expert_parallel(z, P, owner);
    free(owner);
}

void mt_expert_parallel_free(mt_expert_parallel *ep, mt_minimax *m) {
    if (ep->host_group && ep->host_group != ep->group) ep->host_group->free_split(ep->host_group);
    if (ep->group) ep->group->free_split(ep->group);
    if (m && m->ep == &ep->ex) m->ep = NULL;
    *ep = (mt_expert_parallel){0};
}
