/* context_parallel.c: see context_parallel.h. */
#include "train/context_parallel.h"

#include <stdio.h>

#include "train/cp_group.h"

bool mt_context_parallel_refused(int C, const mt_comm *world, const mt_minimax *m, char *why,
                                 size_t len) {
    if (C < 1) return snprintf(why, len, "dist.context_parallel = %d must be >= 1", C), true;
    if (C == 1) return false;
    if (world->size % C)
        return snprintf(why, len, "dist.context_parallel = %d does not divide the %d ranks", C,
                        world->size),
               true;
    if (!world->split)
        return snprintf(why, len, "dist.context_parallel = %d: the %s communicator cannot split", C,
                        world->name),
               true;
    if (m->cfg.router_jitter_noise > 0)
        return snprintf(why, len,
                        "dist.context_parallel = %d with router_jitter_noise %g: the jitter's "
                        "draws follow each rank's own token order; set it to 0",
                        C, (double)m->cfg.router_jitter_noise),
               true;
    return false;
}

void mt_context_parallel_init(mt_context_parallel *cp, int C, mt_comm *world, mt_comm *host) {
    MT_CHECK(C >= 1 && world->size % C == 0 && (C == 1 || world->split),
             "context parallelism: %d ranks do not split into groups of %d", world->size, C);
    *cp = (mt_context_parallel){.C = C};
    if (C == 1) return;
    cp->group = world->split(world, world->rank / C, world->rank);
    MT_CHECK(cp->group->size == C && cp->group->rank == world->rank % C,
             "context parallelism: rank %d is rank %d of %d in its group, expected %d of %d",
             world->rank, cp->group->rank, cp->group->size, world->rank % C, C);
    cp->host_group = host == world ? cp->group : host->split(host, host->rank / C, host->rank);
    MT_CHECK(cp->host_group->rank == cp->group->rank && host->rank == world->rank,
             "context parallelism: the host and %s communicators order the ranks differently",
             world->name);
    cp->cp = mt_cp_group_comm(cp->group);
    cp->cp.user_host = cp->host_group; /* the router's counts are host numbers */
}

void mt_context_parallel_free(mt_context_parallel *cp) {
    if (cp->host_group && cp->host_group != cp->group) cp->host_group->free_split(cp->host_group);
    if (cp->group) cp->group->free_split(cp->group);
    *cp = (mt_context_parallel){0};
}
