/* cp_group.c: the context-parallel group's hooks on a communicator (cp_group.h). */
#include "train/cp_group.h"

static void cp_comm_allgather(void *user, const void *send, void *recv, int64_t count,
                              size_t elem) {
    mt_comm *c = user;
    c->allgather(c, send, recv, count, elem);
}

static void cp_comm_reduce_scatter(void *user, const float *send, float *recv, int64_t count) {
    mt_comm *c = user;
    c->reduce_scatter(c, send, recv, count);
}

mt_cp_group mt_cp_group_comm(mt_comm *c) {
    return (mt_cp_group){c->size, c->rank, cp_comm_allgather, cp_comm_reduce_scatter, c};
}
