/* comm_mpi.c: the MPI communicator (host buffers). Counts above INT_MAX are split into chunks,
 * since MPI 3.1 takes int counts. */
#include <limits.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/check.h"
#include "train/comm.h"

#define MPI_CHECK(call)                                                                            \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_ != MPI_SUCCESS) {                                                                  \
            char msg_[MPI_MAX_ERROR_STRING];                                                       \
            int len_ = 0;                                                                          \
            MPI_Error_string(rc_, msg_, &len_);                                                    \
            MT_DIE("MPI call %s failed: %s", #call, msg_);                                         \
        }                                                                                          \
    } while (0)

/* Elements per MPI call; MT_MPI_CHUNK overrides it so tests can exercise the chunked path. */
static int64_t mpi_chunk = (int64_t)1 << 30;
#define MPI_CHUNK mpi_chunk

static mt_comm mpi_comm;

static void mpi_allgather(mt_comm *c, const void *send, void *recv, int64_t count, size_t elem) {
    MT_CHECK(elem == 4 || elem == 2, "mpi allgather: elements of %zu bytes (4 or 2)", elem);
    MPI_Datatype type = elem == 4 ? MPI_FLOAT : MPI_UINT16_T;
    if (count <= MPI_CHUNK) {
        MPI_CHECK(MPI_Allgather(send, (int)count, type, recv, (int)count, type, MPI_COMM_WORLD));
        return;
    }
    /* Large: gather chunk by chunk, each rank broadcasting its slice's piece. */
    const char *src = send;
    char *dst0 = recv;
    for (int64_t off = 0; off < count; off += MPI_CHUNK) {
        int n = (int)(count - off < MPI_CHUNK ? count - off : MPI_CHUNK);
        for (int r = 0; r < c->size; r++) {
            char *dst = dst0 + ((int64_t)r * count + off) * (int64_t)elem;
            if (r == c->rank) memcpy(dst, src + off * (int64_t)elem, (size_t)n * elem);
            MPI_CHECK(MPI_Bcast(dst, n, type, r, MPI_COMM_WORLD));
        }
    }
}

static void mpi_reduce_scatter(mt_comm *c, const float *send, float *recv, int64_t count) {
    if (count <= MPI_CHUNK) {
        MPI_CHECK(
            MPI_Reduce_scatter_block(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
        return;
    }
    for (int64_t off = 0; off < count; off += MPI_CHUNK) {
        int n = (int)(count - off < MPI_CHUNK ? count - off : MPI_CHUNK);
        for (int r = 0; r < c->size; r++)
            MPI_CHECK(MPI_Reduce(send + (int64_t)r * count + off, r == c->rank ? recv + off : NULL,
                                 n, MPI_FLOAT, MPI_SUM, r, MPI_COMM_WORLD));
    }
}

/* Host buffers: a started all-gather is a finished one. */
static int mpi_allgather_start(mt_comm *c, const void *send, void *recv, int64_t count,
                               size_t elem) {
    mpi_allgather(c, send, recv, count, elem);
    return 0;
}
static void mpi_wait(mt_comm *c, int ticket) { (void)c, (void)ticket; }

static void mpi_allreduce_f64(mt_comm *c, double *buf, int n) {
    (void)c;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
}

static void mpi_allreduce_i64(mt_comm *c, int64_t *buf, int n) {
    (void)c;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD));
}

static void mpi_bcast(mt_comm *c, void *buf, size_t bytes, int root) {
    (void)c;
    for (size_t off = 0; off < bytes; off += (size_t)INT_MAX) {
        size_t n = bytes - off < (size_t)INT_MAX ? bytes - off : (size_t)INT_MAX;
        MPI_CHECK(MPI_Bcast((char *)buf + off, (int)n, MPI_BYTE, root, MPI_COMM_WORLD));
    }
}

static void mpi_barrier(mt_comm *c) {
    (void)c;
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
}

static void mpi_abort(mt_comm *c, int exit_code) {
    (void)c;
    MPI_Abort(MPI_COMM_WORLD, exit_code);
    exit(exit_code);
}

static void mpi_abort_hook(int exit_code) { mpi_abort(&mpi_comm, exit_code); }

mt_comm *mt_comm_mpi_init(int *argc, char ***argv) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
        int provided;
        MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
    }
    /* Errors come back as codes and go through MT_DIE -> MPI_Abort with a message. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    mpi_comm.name = "mpi";
    const char *chunk = getenv("MT_MPI_CHUNK");
    if (chunk && atoll(chunk) > 0) mpi_chunk = atoll(chunk);
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &mpi_comm.rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &mpi_comm.size));
    mpi_comm.allgather = mpi_allgather;
    mpi_comm.reduce_scatter = mpi_reduce_scatter;
    mpi_comm.allreduce_f64 = mpi_allreduce_f64;
    mpi_comm.allreduce_i64 = mpi_allreduce_i64;
    mpi_comm.bcast = mpi_bcast;
    mpi_comm.barrier = mpi_barrier;
    mpi_comm.abort = mpi_abort;
    mpi_comm.allgather_start = mpi_allgather_start;
    mpi_comm.wait = mpi_wait;
    if (mpi_comm.size > 1) mt_error_set_rank(mpi_comm.rank);
    mt_error_set_abort_hook(mpi_abort_hook);
    return &mpi_comm;
}

#ifndef MT_WITH_CUDA
/* The NCCL communicator is train/comm_nccl.cu, built with the CUDA backend only. */
mt_comm *mt_comm_nccl_init(mt_comm *host, double timeout_s) {
    (void)host;
    (void)timeout_s;
    return NULL;
}
void mt_comm_nccl_free(mt_comm *c) { (void)c; }
#endif

void mt_comm_finalize(mt_comm *c) {
    (void)c;
    mt_error_set_abort_hook(NULL);
    MPI_Finalize();
}
