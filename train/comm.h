/* comm.h: the communicator the sharded optimizer talks to. One interface, two implementations:
 * MPI on host buffers (CPU backend, here) and NCCL on device buffers (CUDA backend).
 * Every collective is issued by every rank in the same order; a failure on any rank aborts
 * the whole job (MPI_Abort / ncclCommAbort), never hangs it. */
#pragma once
#include <stddef.h>
#include <stdint.h>

typedef struct mt_comm mt_comm;
struct mt_comm {
    const char *name;
    int rank, size;
    /* recv[r*count .. (r+1)*count) = send of rank r (count floats per rank). */
    void (*allgather)(mt_comm *c, const float *send, float *recv, int64_t count);
    /* recv (count floats) = sum over ranks of send[rank*count .. (rank+1)*count). */
    void (*reduce_scatter)(mt_comm *c, const float *send, float *recv, int64_t count);
    /* In place sums over ranks (host memory: small scalars such as norms and token counts). */
    void (*allreduce_f64)(mt_comm *c, double *buf, int n);
    void (*allreduce_i64)(mt_comm *c, int64_t *buf, int n);
    void (*bcast)(mt_comm *c, void *buf, size_t bytes, int root);
    void (*barrier)(mt_comm *c);
    void (*abort)(mt_comm *c, int exit_code);
    void *impl;
};

/* MPI_Init (or use the running MPI), rank/size of MPI_COMM_WORLD; installs the error hook so
 * MT_DIE on any rank calls MPI_Abort and error messages carry "[rank r]". */
mt_comm *mt_comm_mpi_init(int *argc, char ***argv);
void mt_comm_finalize(mt_comm *c);
/* One rank, no MPI: for unsharded reference runs (tests) and single-process tools. */
mt_comm *mt_comm_self(void);
