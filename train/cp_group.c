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

static void cp_comm_allreduce_i64(void *user_host, int64_t *buf, int n) {
    mt_comm *c = user_host;
    c->allreduce_i64(c, buf, n);
}

mt_cp_group mt_cp_group_comm(mt_comm *c) {
    return (mt_cp_group){.size = c->size,
                         .rank = c->rank,
                         .allgather = cp_comm_allgather,
                         .reduce_scatter = cp_comm_reduce_scatter,
                         .user = c,
                         .allreduce_i64 = cp_comm_allreduce_i64,
                         .user_host = c};
}
