/* cp_mirror.h: a one-process stand-in for a context-parallel group (autograd/context_parallel.h)
 * for op tests: every rank of the group is taken to hold this rank's own tokens, so allgather
 * copies the send buffer into every rank's slot, and reduce_scatter, its adjoint, sums every
 * rank's block of the send buffer (the gradient of the mirrored keys, so finite differences of
 * the mirrored op agree with its backward). Through the backend's copy and vec_add: it runs on
 * any backend's memory. The real group's semantics (sum over ranks of this rank's block) are
 * checked on MPI ranks (tests/train/dist_cp_attention.c). */
#pragma once
#include "autograd/context_parallel.h"
#include "autograd/tensor.h"

typedef struct {
    const mt_backend *be;
    int size;
} cp_mirror;

static inline void cp_mirror_allgather(void *user, const void *send, void *recv, int64_t count,
                                       size_t elem) {
    const cp_mirror *m = user;
    for (int q = 0; q < m->size; q++)
        m->be->copy((char *)recv + (size_t)q * (size_t)count * elem, send, (size_t)count * elem);
}

static inline void cp_mirror_reduce_scatter(void *user, const float *send, float *recv,
                                            int64_t count) {
    const cp_mirror *m = user;
    m->be->copy(recv, send, sizeof(float) * (size_t)count);
    for (int q = 1; q < m->size; q++) m->be->vec_add(recv, send + q * count, count);
}

/* The group of `size` mirrored ranks as seen by rank `rank`, on backend be. */
static inline mt_cp_group cp_mirror_group(cp_mirror *m, const mt_backend *be, int size, int rank) {
    m->be = be;
    m->size = size;
    return (mt_cp_group){.size = size,
                         .rank = rank,
                         .allgather = cp_mirror_allgather,
                         .reduce_scatter = cp_mirror_reduce_scatter,
                         .user = m};
}
