/* nccl.h (emulator): the NCCL subset train/comm_nccl.cu uses, implemented in emu_nccl.cpp on
 * MPI (emulated device memory is host memory). Signatures follow NCCL 2.28.
 *
 * Model: a communicator is a duplicate of MPI_COMM_WORLD whose size and rank must equal the
 * ones given to ncclCommInitRank (one rank without MPI is allowed: collectives are copies).
 * A collective issued on the legacy default stream runs at once; on a created stream it is
 * queued and runs when the default stream waits on an event (cudaStreamWaitEvent) or the
 * stream is synchronised, so a result read before its wait is visibly stale, as it may be on a
 * GPU. The ranks' collectives run in issue order; buffers that overlap other than in NCCL's
 * in-place layout are an error (ncclInvalidArgument). Strict mode (MT_EMU_STRICT=1) also
 * requires a created stream to have waited for all the default stream's earlier work before
 * each collective (the "comm stream waits for compute" dependency, which running kernels at
 * once would hide). It cannot show timing, overlap or NCCL's own transports (docs/cuda.md). */
#pragma once
#include <stddef.h>

#include "cuda_runtime.h"

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
    char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;
typedef struct emu_nccl_comm *ncclComm_t;

typedef enum {
    ncclSuccess = 0,
    ncclUnhandledCudaError = 1,
    ncclSystemError = 2,
    ncclInternalError = 3,
    ncclInvalidArgument = 4,
    ncclInvalidUsage = 5,
    ncclRemoteError = 6,
    ncclInProgress = 7
} ncclResult_t;
typedef enum { ncclSum = 0 } ncclRedOp_t;
typedef enum {
    ncclInt8 = 0,
    ncclUint8 = 1,
    ncclFloat32 = 7,
    ncclFloat = 7,
    ncclBfloat16 = 9
} ncclDataType_t;
/* ncclCommSplit's config: the emulator takes NULL only */
typedef struct ncclConfig_v22800 ncclConfig_t;

const char *ncclGetErrorString(ncclResult_t result);
ncclResult_t ncclGetUniqueId(ncclUniqueId *id);
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *async_error);
ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream);
/* Point-to-point, grouped (ncclGroupStart/End) into one all-to-all: the emulator runs a group's
 * sends and receives as one queued operation (MPI_Isend/MPI_Irecv, then MPI_Waitall) and needs
 * every operation of a group on one communicator and one stream; an operation outside a group
 * is a group of one. Counts of 0 are no-ops. */
ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);
/* MPI_Comm_split of the communicator's duplicate; config must be NULL. The new communicator
 * has no emulated faults (MT_EMU_NCCL_* name the world's collectives). */
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                           ncclConfig_t *config);
