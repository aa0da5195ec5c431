/* comm_self.c: a one-rank communicator without MPI (a single process owns everything). Used for
 * unsharded reference runs inside a distributed test. */
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "autograd/tensor.h"
#include "train/comm.h"

static void self_allgather(mt_comm *c, const void *send, void *recv, int64_t count, size_t elem) {
    (void)c;
    if (recv != send) memmove(recv, send, elem * (size_t)count);
}

static void self_reduce_scatter(mt_comm *c, const float *send, float *recv, int64_t count) {
    (void)c;
    if (recv != send) memmove(recv, send, sizeof(float) * (size_t)count);
}

static int self_allgather_start(mt_comm *c, const void *send, void *recv, int64_t count,
                                size_t elem) {
    self_allgather(c, send, recv, count, elem);
    return 0;
}
static void self_wait(mt_comm *c, int ticket) { (void)c, (void)ticket; }

/* One rank sends its rows to itself. */
static void self_alltoallv(mt_comm *c, const void *send, const int64_t *send_counts, void *recv,
                           const int64_t *recv_counts, size_t elem) {
    (void)c;
    MT_CHECK(send_counts[0] == recv_counts[0], "self alltoallv: sends %lld, receives %lld",
             (long long)send_counts[0], (long long)recv_counts[0]);
    if (recv != send) memmove(recv, send, elem * (size_t)send_counts[0]);
}
/* Every split of one rank is that rank again. */
static mt_comm *self_split(mt_comm *c, int color, int key) {
    (void)color, (void)key;
    return c;
}
static void self_free_split(mt_comm *c) { (void)c; }

static void self_allreduce_f64(mt_comm *c, double *buf, int n) { (void)c, (void)buf, (void)n; }
static void self_allreduce_i64(mt_comm *c, int64_t *buf, int n) { (void)c, (void)buf, (void)n; }
static void self_bcast(mt_comm *c, void *buf, size_t bytes, int root) {
    (void)c, (void)buf, (void)bytes, (void)root;
}
static void self_barrier(mt_comm *c) { (void)c; }
static void self_abort(mt_comm *c, int exit_code) {
    (void)c;
    exit(exit_code);
}

mt_comm *mt_comm_self(void) {
    static mt_comm self = {.name = "self",
                           .rank = 0,
                           .size = 1,
                           .allgather = self_allgather,
                           .reduce_scatter = self_reduce_scatter,
                           .allreduce_f64 = self_allreduce_f64,
                           .allreduce_i64 = self_allreduce_i64,
                           .bcast = self_bcast,
                           .barrier = self_barrier,
                           .abort = self_abort,
                           .allgather_start = self_allgather_start,
                           .wait = self_wait,
                           .alltoallv = self_alltoallv,
                           .split = self_split,
                           .free_split = self_free_split};
    return &self;
}

/* ---- one rank on device buffers: the collectives are device-to-device copies ---- */

static void self_device_allgather(mt_comm *c, const void *send, void *recv, int64_t count,
                                  size_t elem) {
    const mt_backend *be = c->impl;
    if (recv != send) be->copy(recv, send, elem * (size_t)count);
}

static void self_device_reduce_scatter(mt_comm *c, const float *send, float *recv, int64_t count) {
    self_device_allgather(c, send, recv, count, sizeof(float));
}

static int self_device_allgather_start(mt_comm *c, const void *send, void *recv, int64_t count,
                                       size_t elem) {
    self_device_allgather(c, send, recv, count, elem);
    return 0;
}

static void self_device_alltoallv(mt_comm *c, const void *send, const int64_t *send_counts,
                                  void *recv, const int64_t *recv_counts, size_t elem) {
    MT_CHECK(send_counts[0] == recv_counts[0], "self alltoallv: sends %lld, receives %lld",
             (long long)send_counts[0], (long long)recv_counts[0]);
    self_device_allgather(c, send, recv, send_counts[0], elem);
}

mt_comm *mt_comm_self_device(const mt_backend *be) {
    static mt_comm dev;
    dev = *mt_comm_self();
    dev.name = "self-device";
    dev.device = true;
    dev.allgather = self_device_allgather;
    dev.reduce_scatter = self_device_reduce_scatter;
    dev.allgather_start = self_device_allgather_start;
    dev.alltoallv = self_device_alltoallv;
    dev.impl = (void *)be;
    return &dev;
}
