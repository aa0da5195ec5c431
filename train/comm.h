/* comm.h: the communicator the sharded optimizer talks to. One interface, three implementations:
 * MPI on host buffers (CPU backend), self (one rank, no MPI) and NCCL on device buffers (CUDA
 * backend, train/comm_nccl.cu). Every collective is issued by every rank in the same order; a
 * failure on any rank aborts the whole job (MPI_Abort / ncclCommAbort), never hangs it.
 *
 * Ordering for device communicators: allgather and reduce_scatter start after every kernel
 * queued so far on the compute stream (the default stream) and every kernel queued after them
 * waits for them; the host is not blocked. allgather_start/wait split an all-gather so it can
 * be issued early (the next bucket's gather prefetched while this one computes). Host
 * communicators run everything at once and return ticket 0. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct mt_comm mt_comm;
struct mt_comm {
    const char *name;
    int rank, size;
    /* recv[r*count .. (r+1)*count) = send of rank r: count elements of elem bytes per rank,
     * elem 4 (fp32) or 2 (bf16 bits: the bf16 parameter gathers); a copy, no arithmetic. */
    void (*allgather)(mt_comm *c, const void *send, void *recv, int64_t count, size_t elem);
    /* recv (count floats) = sum over ranks of send[rank*count .. (rank+1)*count). */
    void (*reduce_scatter)(mt_comm *c, const float *send, float *recv, int64_t count);
    /* acc (count floats) += that sum, in one pass where the peers' send buffers can be read
     * directly (alloc_shared below), with the bits of reduce_scatter into a buffer and an add.
     * Returns false, having done nothing, where it cannot: the caller then runs those two. NULL
     * where a communicator lacks it. */
    bool (*reduce_scatter_add)(mt_comm *c, const float *send, float *acc, int64_t count);
    /* In place sums over ranks (host memory: small scalars such as norms and token counts). */
    void (*allreduce_f64)(mt_comm *c, double *buf, int n);
    void (*allreduce_i64)(mt_comm *c, int64_t *buf, int n);
    void (*bcast)(mt_comm *c, void *buf, size_t bytes, int root);
    void (*barrier)(mt_comm *c);
    void (*abort)(mt_comm *c, int exit_code);
    /* true: allgather/reduce_scatter buffers are device memory (NCCL); false: host memory */
    bool device;
    /* An all-gather issued now, finished by wait(ticket) before its result is read (see above). */
    int (*allgather_start)(mt_comm *c, const void *send, void *recv, int64_t count, size_t elem);
    void (*wait)(mt_comm *c, int ticket);
    /* All-to-all with variable counts (expert parallelism): send holds send_counts[r] elements
     * for each rank r, back to back in rank order; recv gets recv_counts[r] elements from each
     * rank r, back to back in rank order (elem bytes each). Every rank calls it, all counts zero
     * included. Device communicators order it like allgather (after the compute stream's queued
     * work; later work waits for it). NULL where a communicator lacks it. */
    void (*alltoallv)(mt_comm *c, const void *send, const int64_t *send_counts, void *recv,
                      const int64_t *recv_counts, size_t elem);
    /* The ranks of c with the same color, ordered by key, as a new communicator of the same kind
     * (MPI_Comm_split / ncclCommSplit); every rank of c calls it. Freed by free_split. */
    mt_comm *(*split)(mt_comm *c, int color, int key);
    void (*free_split)(mt_comm *c);
    /* Host memory the peers can read (MPI with every rank on one node: an MPI-3 shared window).
     * An all-gather whose send, or a reduce-scatter whose send, lies in such a buffer, at the
     * same offset of the same allocation on every rank, reads the peers' buffers directly: one
     * copy from each, or one summing pass, instead of the transport's staged messages. Every
     * rank calls alloc_shared with the same sizes in the same order (collective); all get NULL
     * where the communicator cannot (one rank, ranks on several nodes, MT_COMM_SHARED=0, too
     * little room in /dev/shm), and then use their own memory. free_shared is collective too and
     * returns false for a pointer it did not allocate. NULL where a communicator lacks them. */
    void *(*alloc_shared)(mt_comm *c, size_t bytes);
    bool (*free_shared)(mt_comm *c, void *p);
    /* One buffer of `bytes` that every rank maps at once (MPI, every rank on one node: a shared
     * window rank 0 holds), for data every rank reads and each writes a part of (zero.h,
     * node-shared parameters); NULL on every rank where it cannot, as alloc_shared; freed by
     * free_shared. node_fence (collective) orders it: what any rank stored there before the
     * fence, every rank loads after it, and no rank passes it before all have arrived. */
    void *(*alloc_node)(mt_comm *c, size_t bytes);
    void (*node_fence)(mt_comm *c, const void *p);
    void *impl;
};

/* MPI_Init (or use the running MPI), rank/size of MPI_COMM_WORLD; installs the error hook so
 * MT_DIE on any rank calls MPI_Abort and error messages carry "[rank r]". */
mt_comm *mt_comm_mpi_init(int *argc, char ***argv);
/* Starts the host watchdog of the MPI communicator: a thread that ends the job (MT_DIE, so
 * MPI_Abort) when one collective has waited longer than timeout_s, as it does when a peer is
 * stopped or stuck outside the collectives (the recipe's dist.timeout; 0: none). Called again
 * it sets a new limit, 0 pausing the watch. A no-op for one rank and for the other
 * communicators. */
void mt_comm_mpi_watch(mt_comm *c, double timeout_s);
/* The same, with the text its message gives for the limit instead of "dist.timeout = T s"
 * (the trainer's automatic limit says how it was derived). */
void mt_comm_mpi_watch_label(mt_comm *c, double timeout_s, const char *label);
/* Work rank 0 does alone while the others wait (building the token cache): MPI cannot tell a
 * slow rank from a stopped one, so the worker shows it is alive through a heartbeat
 * file on a file system every rank sees (a thread rewrites it every 0.2 s), and the others
 * end the job when it has not changed for silence_s (0: they wait for ever). The worker calls
 * mt_comm_mpi_heartbeat_start(c, path) before the work; then every rank calls
 * mt_comm_mpi_barrier_heartbeat (the worker's heartbeat stops there, and its own wait there is
 * watched like any collective: a peer stopped meanwhile ends the job); `what` names the work in
 * the message ("builds the token cache"). One rank: nothing happens. */
void mt_comm_mpi_heartbeat_start(mt_comm *c, const char *path);
void mt_comm_mpi_barrier_heartbeat(mt_comm *c, const char *path, double silence_s,
                                   const char *what);
void mt_comm_finalize(mt_comm *c);
/* The bytes this process sent through the MPI communicators (the world and its splits) so far,
 * by kind: all-gathers, reduce-scatters, all-to-alls (to other ranks), and the small host
 * collectives (all-reduces: 8 bytes an element, broadcasts: the root's bytes). With
 * MT_COMM_BYTES=PATH in the environment, mt_comm_finalize writes them to PATH.<rank> (key=value
 * lines; bench/ep_step.sh), and shared=: of the gathers' and reduce-scatters' bytes, those read
 * from the peers' node-shared buffers (alloc_shared). */
enum {
    MT_COMM_BYTES_GATHER,
    MT_COMM_BYTES_REDUCE,
    MT_COMM_BYTES_ALLTOALL,
    MT_COMM_BYTES_SMALL,
    MT_COMM_BYTES_KINDS
};
void mt_comm_mpi_bytes(int64_t out[MT_COMM_BYTES_KINDS]);
/* One rank, no MPI: for unsharded reference runs (tests) and single-process tools. */
mt_comm *mt_comm_self(void);
/* One rank on device buffers of backend be (not the CPU) without NCCL: the all-gather and the
 * reduce-scatter are be->copy on the compute stream, so the ordering rule above holds and
 * nothing overlaps; the host side is mt_comm_self's. For single-GPU runs where NCCL is missing
 * or fails (bench-gpu-step --comm self, launch/gpu-check.sh). */
struct mt_backend;
mt_comm *mt_comm_self_device(const struct mt_backend *be);
/* NCCL over the ranks of `host` (an MPI communicator: it broadcasts the ncclUniqueId and keeps
 * serving the small host all-reduces, bcast and barrier). Binds rank r to device
 * local_rank % device_count first. A watchdog thread ends the job when NCCL reports an
 * asynchronous error or a collective stays pending longer than timeout_s (0: no limit;
 * the recipe's dist.timeout). NULL when the CUDA backend was not built. */
mt_comm *mt_comm_nccl_init(mt_comm *host, double timeout_s);
/* A new limit for that watchdog, described in its message by label ("dist.timeout = T s" when
 * NULL), as mt_comm_mpi_watch_label does for the host collectives (the trainer's automatic
 * dist.timeout). A no-op for the other communicators. */
void mt_comm_nccl_watch(mt_comm *c, double timeout_s, const char *label);
/* ncclCommDestroy, streams, events and the watchdog; the host communicator stays. */
void mt_comm_nccl_free(mt_comm *c);
