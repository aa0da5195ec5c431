/* emu_nccl.cpp: the emulator's NCCL (tests/cuda_emu/nccl.h) and the stream and device calls
 * of the runtime that the NCCL communicator needs. Emulated device memory is host memory, so a
 * collective is the matching MPI collective on a duplicate of MPI_COMM_WORLD.
 *
 * Streams: the default stream (0) runs everything at once, as the rest of the emulator does. A
 * created stream queues its collectives; the queue runs, in order, when the default stream
 * waits on an event recorded on that stream (cudaStreamWaitEvent(0, e)), the stream is
 * synchronised or destroyed, or at cudaDeviceSynchronize; a wait on an event of the default
 * stream runs every queue. A queue runs whole, so its later work may run early: never later
 * than a GPU could, sometimes earlier. cuBLAS calls on a handle bound to a created stream are
 * queued the same way (emu_blas.cpp). What this shows: a result read before its wait is stale
 * here (on a GPU it may be), and every rank must issue the same collectives in the same order
 * (else MPI reports or hangs, like NCCL). An event recorded on a created stream stays pending
 * (cudaEventQuery) until its queue runs.
 *
 * Faults for the watchdog tests (tests/gpu/nccl.cmake), "rank:n" in the environment:
 *   MT_EMU_NCCL_ASYNC_ERROR  from rank's n-th collective (counted from 1) on,
 *                            ncclCommGetAsyncError reports ncclRemoteError (a lost peer)
 *   MT_EMU_NCCL_STALL        rank's n-th collective never finishes once it runs (a hung
 *                            peer: the others then wait in MPI) */
#define OMPI_SKIP_MPICXX  1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <vector>

#include "cuda_runtime.h"
#include "emu_internal.h"
#include "nccl.h"

struct emu_stream {
    std::vector<std::function<void()>> queue;
    uint64_t waited = 0; /* the default stream's work this stream has waited for (emu.cpp) */
};

struct emu_nccl_comm {
    int nranks = 0, rank = 0;
    bool local = false; /* one rank without MPI: collectives are copies */
    bool split = false; /* made by ncclCommSplit (the abort trace says so) */
    std::atomic<bool> aborted{false};
    MPI_Comm mpi = MPI_COMM_NULL;
    int queued = 0;                     /* collectives waiting in a stream queue */
    int64_t issued = 0;                 /* collectives issued (non-empty) */
    int64_t error_at = 0, stall_at = 0; /* the faults above: this rank's collective, 0 none */
    std::atomic<int> async_error{0};
};

namespace {

std::vector<emu_stream *> live_streams;

void stream_run(emu_stream *s) {
    /* a queued collective never queues another, so the vector is stable while it runs */
    for (auto &op : s->queue) op();
    s->queue.clear();
}

const char id_magic[] = "emu-nccl-id";

uint64_t id_hash(const ncclUniqueId &id) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; i++)
        h = (h ^ (uint8_t)id.internal[i]) * 1099511628211ull;
    return h;
}

void mpi_fail(const char *what, int rc) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    fprintf(stderr, "nccl emulator: %s failed: %s\n", what, msg);
    MPI_Abort(MPI_COMM_WORLD, 1);
    abort();
}

/* [a, a+an) and [b, b+bn) share a byte */
bool overlap(const void *a, size_t an, const void *b, size_t bn) {
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return an && bn && x < y + bn && y < x + an;
}

/* n of MT_EMU_NCCL_* = "rank:n" when rank is this one, else 0 */
int64_t fault_at(const char *var, int rank) {
    const char *v = getenv(var);
    int r = -1;
    long long n = 0;
    if (!v || sscanf(v, "%d:%lld", &r, &n) != 2 || r != rank || n < 1) return 0;
    return n;
}

/* Runs now on the default stream, else queued on s. Strict mode (MT_EMU_STRICT=1): a
 * collective on a created stream must come after that stream waited for all the default
 * stream's earlier work (cudaEventRecord there, cudaStreamWaitEvent here): on a GPU it could
 * otherwise read a send buffer kernels still write or land in a buffer kernels still read,
 * which the emulator, running kernels at once, cannot show. */
void issue(ncclComm_t comm, cudaStream_t s, std::function<void()> op) {
    const int64_t n = ++comm->issued;
    if (n == comm->error_at) comm->async_error = ncclRemoteError;
    if (n == comm->stall_at)
        op = []() {
            for (;;) sleep(1); /* until the watchdog (or the launcher) ends the process */
        };
    if (!s) {
        op();
        return;
    }
    if (emu_strict() && !emu_stream_waited_all(s)) {
        fprintf(stderr, "nccl emulator: a collective queued on a created stream that has not "
                        "waited for the default stream's earlier work (strict mode)\n");
        abort();
    }
    comm->queued++;
    s->queue.push_back([comm, op]() {
        comm->queued--;
        if (!comm->aborted) op();
    });
}

} // namespace

void emu_stream_enqueue(cudaStream_t s, std::function<void()> op) {
    s->queue.push_back(std::move(op));
}
bool emu_stream_waited_all(cudaStream_t s) { return s->waited >= emu_default_work(); }
void emu_streams_run_all(void) {
    for (emu_stream *q : live_streams) stream_run(q);
}

/* ---- runtime: streams, events ---- */

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags) {
    if (!s || (flags & ~(unsigned)cudaStreamNonBlocking)) return cudaErrorInvalidValue;
    *s = new emu_stream;
    live_streams.push_back(*s);
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    if (s) stream_run(s);
    return cudaSuccess;
}

/* As on a GPU, queued work still completes. */
cudaError_t cudaStreamDestroy(cudaStream_t s) {
    auto it = std::find(live_streams.begin(), live_streams.end(), s);
    if (!s || it == live_streams.end()) return cudaErrorInvalidValue;
    stream_run(s);
    live_streams.erase(it);
    delete s;
    return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags) {
    if (!e || flags) return cudaErrorInvalidValue;
    if (!s) {
        /* the queue of the created stream e was recorded on, else (an event of the default
         * stream, where a GPU has nothing to wait for) every queue */
        cudaStream_t q = emu_event_stream(e);
        if (q && std::find(live_streams.begin(), live_streams.end(), q) != live_streams.end())
            stream_run(q);
        else
            emu_streams_run_all();
    } else if (emu_event_work(e) > s->waited)
        s->waited = emu_event_work(e);
    return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags) {
    if (flags & ~(unsigned)cudaEventDisableTiming) return cudaErrorInvalidValue;
    return cudaEventCreate(e);
}

/* ---- NCCL ---- */

const char *ncclGetErrorString(ncclResult_t r) {
    switch (r) {
    case ncclSuccess:
        return "no error";
    case ncclUnhandledCudaError:
        return "unhandled cuda error (emulator)";
    case ncclSystemError:
        return "unhandled system error (emulator)";
    case ncclInternalError:
        return "internal error (emulator)";
    case ncclInvalidArgument:
        return "invalid argument (emulator)";
    case ncclInvalidUsage:
        return "invalid usage (emulator)";
    case ncclRemoteError:
        return "remote process exited or there was a network error (emulator)";
    case ncclInProgress:
        return "NCCL operation in progress (emulator)";
    }
    return "unknown result code (emulator)";
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
    if (!id) return ncclInvalidArgument;
    memset(id, 0, sizeof(*id));
    memcpy(id->internal, id_magic, sizeof(id_magic));
    long stamp[2] = {(long)getpid(), (long)time(nullptr)};
    memcpy(id->internal + 16, stamp, sizeof(stamp));
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
    if (!comm || nranks < 1 || rank < 0 || rank >= nranks) return ncclInvalidArgument;
    if (memcmp(id.internal, id_magic, sizeof(id_magic)) != 0) {
        fprintf(stderr,
                "nccl emulator: rank %d: the unique id did not come from ncclGetUniqueId "
                "(not broadcast?)\n",
                rank);
        return ncclInvalidArgument;
    }
    emu_nccl_comm *c = new emu_nccl_comm();
    c->nranks = nranks;
    c->rank = rank;
    c->error_at = fault_at("MT_EMU_NCCL_ASYNC_ERROR", rank);
    c->stall_at = fault_at("MT_EMU_NCCL_STALL", rank);
    int init = 0;
    MPI_Initialized(&init);
    if (!init) {
        if (nranks != 1) {
            fprintf(stderr, "nccl emulator: %d ranks need MPI (not initialised)\n", nranks);
            delete c;
            return ncclInvalidUsage;
        }
        c->local = true;
        *comm = c;
        return ncclSuccess;
    }
    int wsize = 0, wrank = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    if (wsize != nranks || wrank != rank) {
        fprintf(stderr,
                "nccl emulator: ncclCommInitRank(nranks %d, rank %d) on MPI rank %d of %d: "
                "the emulator runs on MPI_COMM_WORLD and needs the same size and rank\n",
                nranks, rank, wrank, wsize);
        delete c;
        return ncclInvalidArgument;
    }
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, &c->mpi);
    if (rc != MPI_SUCCESS) mpi_fail("MPI_Comm_dup", rc);
    MPI_Comm_set_errhandler(c->mpi, MPI_ERRORS_RETURN);
    /* every rank must hold the same id (the host broadcast worked) */
    uint64_t h = id_hash(id), lo = h, hi = h;
    rc = MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_UINT64_T, MPI_MIN, c->mpi);
    if (rc == MPI_SUCCESS) rc = MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_UINT64_T, MPI_MAX, c->mpi);
    if (rc != MPI_SUCCESS) mpi_fail("MPI_Allreduce (unique id check)", rc);
    if (lo != hi) {
        fprintf(stderr, "nccl emulator: rank %d: the ranks hold different unique ids\n", rank);
        MPI_Comm_free(&c->mpi);
        delete c;
        return ncclInvalidUsage;
    }
    *comm = c;
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    if (!comm) return ncclInvalidArgument;
    if (comm->queued) {
        fprintf(stderr,
                "nccl emulator: ncclCommDestroy with %d collectives still queued "
                "(synchronise the stream first)\n",
                comm->queued);
        return ncclInvalidUsage;
    }
    if (!comm->local) MPI_Comm_free(&comm->mpi);
    delete comm;
    return ncclSuccess;
}

/* Queued collectives of an aborted communicator are dropped. The struct is kept (queues may
 * still name it); an abort ends the process anyway. */
ncclResult_t ncclCommAbort(ncclComm_t comm) {
    if (!comm) return ncclInvalidArgument;
    comm->aborted = true;
    /* a trace for tests/gpu/nccl.cmake: the error hook reached NCCL before the job ended */
    fprintf(stderr, "nccl emulator: rank %d: %scommunicator aborted\n", comm->rank,
            comm->split ? "split " : "");
    return ncclSuccess;
}

/* Safe from another thread (the watchdog). */
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *async_error) {
    if (!comm || !async_error) return ncclInvalidArgument;
    *async_error = (ncclResult_t)comm->async_error.load();
    return ncclSuccess;
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
    if (!comm || comm->aborted || (datatype != ncclFloat && datatype != ncclBfloat16))
        return ncclInvalidArgument;
    if (sendcount > (size_t)INT32_MAX) {
        fprintf(stderr, "nccl emulator: count %zu above one MPI call\n", sendcount);
        return ncclInvalidArgument;
    }
    if (sendcount == 0) return ncclSuccess;
    if (!sendbuff || !recvbuff) return ncclInvalidArgument;
    /* a copy: bf16 moves as 16-bit words */
    const size_t elem = datatype == ncclFloat ? sizeof(float) : sizeof(uint16_t);
    const MPI_Datatype type = datatype == ncclFloat ? MPI_FLOAT : MPI_UINT16_T;
    size_t bytes = sendcount * elem;
    const char *send = (const char *)sendbuff;
    char *recv = (char *)recvbuff;
    bool in_place = send == recv + (size_t)comm->rank * bytes;
    if (!in_place && overlap(send, bytes, recv, bytes * comm->nranks)) {
        fprintf(stderr, "nccl emulator: ncclAllGather buffers overlap, not in place\n");
        return ncclInvalidArgument;
    }
    issue(comm, stream, [=]() {
        if (comm->local) {
            if (!in_place) memcpy(recv, send, bytes);
            return;
        }
        int rc = MPI_Allgather(in_place ? MPI_IN_PLACE : send, (int)sendcount, type, recv,
                               (int)sendcount, type, comm->mpi);
        if (rc != MPI_SUCCESS) mpi_fail("MPI_Allgather (ncclAllGather)", rc);
    });
    return ncclSuccess;
}

ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
    if (!comm || comm->aborted || datatype != ncclFloat || op != ncclSum)
        return ncclInvalidArgument;
    if (recvcount > (size_t)INT32_MAX) {
        fprintf(stderr, "nccl emulator: count %zu above one MPI call\n", recvcount);
        return ncclInvalidArgument;
    }
    if (recvcount == 0) return ncclSuccess;
    if (!sendbuff || !recvbuff) return ncclInvalidArgument;
    size_t bytes = recvcount * sizeof(float);
    const float *send = (const float *)sendbuff;
    float *recv = (float *)recvbuff;
    bool in_place = recv == send + (size_t)comm->rank * recvcount;
    if (!in_place && overlap(send, bytes * comm->nranks, recv, bytes)) {
        fprintf(stderr, "nccl emulator: ncclReduceScatter buffers overlap, not in place\n");
        return ncclInvalidArgument;
    }
    issue(comm, stream, [=]() {
        if (comm->local) {
            if (!in_place) memcpy(recv, send, bytes);
            return;
        }
        /* in place: MPI wants distinct buffers, so reduce into a copy first */
        std::vector<float> tmp(in_place ? recvcount : 0);
        float *dst = in_place ? tmp.data() : recv;
        int rc = MPI_Reduce_scatter_block(send, dst, (int)recvcount, MPI_FLOAT, MPI_SUM, comm->mpi);
        if (rc != MPI_SUCCESS) mpi_fail("MPI_Reduce_scatter_block (ncclReduceScatter)", rc);
        if (in_place) memcpy(recv, dst, bytes);
    });
    return ncclSuccess;
}

/* ---- point-to-point in groups: the all-to-all of expert parallelism ---- */

namespace {

struct p2p_op {
    bool send;
    void *buf;
    size_t bytes;
    int peer;
    ncclComm_t comm;
    cudaStream_t stream;
};

int group_depth = 0;
std::vector<p2p_op> group_ops;

size_t type_bytes(ncclDataType_t t) {
    return t == ncclFloat ? 4 : t == ncclBfloat16 ? 2 : t == ncclUint8 || t == ncclInt8 ? 1 : 0;
}

/* One group's operations, all on comm and stream: receives posted first, then sends, then one
 * wait for all (a rank's send to itself matches its own receive). */
ncclResult_t group_issue(std::vector<p2p_op> ops) {
    if (ops.empty()) return ncclSuccess;
    ncclComm_t comm = ops[0].comm;
    cudaStream_t stream = ops[0].stream;
    for (const p2p_op &o : ops)
        if (o.comm != comm || o.stream != stream) {
            fprintf(stderr, "nccl emulator: a group's sends and receives must share one "
                            "communicator and one stream\n");
            return ncclInvalidUsage;
        }
    issue(comm, stream, [comm, ops]() {
        if (comm->local) { /* one rank: the k-th send to itself lands in the k-th receive */
            std::vector<const p2p_op *> sends, recvs;
            for (const p2p_op &o : ops) (o.send ? sends : recvs).push_back(&o);
            if (sends.size() != recvs.size()) {
                fprintf(stderr, "nccl emulator: unmatched send/receive on one rank\n");
                abort();
            }
            for (size_t k = 0; k < sends.size(); k++)
                memmove(recvs[k]->buf, sends[k]->buf, std::min(sends[k]->bytes, recvs[k]->bytes));
            return;
        }
        std::vector<MPI_Request> req(ops.size());
        size_t n = 0;
        for (int pass = 0; pass < 2; pass++)
            for (const p2p_op &o : ops) {
                if (o.send != (pass == 1)) continue;
                int rc =
                    o.send
                        ? MPI_Isend(o.buf, (int)o.bytes, MPI_BYTE, o.peer, 0, comm->mpi, &req[n++])
                        : MPI_Irecv(o.buf, (int)o.bytes, MPI_BYTE, o.peer, 0, comm->mpi, &req[n++]);
                if (rc != MPI_SUCCESS) mpi_fail(o.send ? "MPI_Isend (ncclSend)" : "MPI_Irecv", rc);
            }
        int rc = MPI_Waitall((int)n, req.data(), MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS) mpi_fail("MPI_Waitall (ncclGroupEnd)", rc);
    });
    return ncclSuccess;
}

ncclResult_t p2p_add(bool send, const void *buf, size_t count, ncclDataType_t datatype, int peer,
                     ncclComm_t comm, cudaStream_t stream) {
    const size_t elem = type_bytes(datatype);
    if (!comm || comm->aborted || !elem || peer < 0 || peer >= comm->nranks)
        return ncclInvalidArgument;
    if (count * elem > (size_t)INT32_MAX) {
        fprintf(stderr, "nccl emulator: %zu bytes above one MPI call\n", count * elem);
        return ncclInvalidArgument;
    }
    if (count == 0) return ncclSuccess;
    if (!buf) return ncclInvalidArgument;
    p2p_op o = {send, (void *)buf, count * elem, peer, comm, stream};
    if (group_depth == 0) return group_issue({o});
    group_ops.push_back(o);
    return ncclSuccess;
}

} // namespace

ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
    return p2p_add(true, sendbuff, count, datatype, peer, comm, stream);
}

ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
    return p2p_add(false, recvbuff, count, datatype, peer, comm, stream);
}

ncclResult_t ncclGroupStart(void) {
    group_depth++;
    return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void) {
    if (group_depth == 0) return ncclInvalidUsage;
    if (--group_depth > 0) return ncclSuccess;
    std::vector<p2p_op> ops;
    ops.swap(group_ops);
    return group_issue(std::move(ops));
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                           ncclConfig_t *config) {
    if (!comm || comm->aborted || !newcomm || config || color < 0) return ncclInvalidArgument;
    emu_nccl_comm *c = new emu_nccl_comm();
    c->local = comm->local;
    c->split = true;
    if (!comm->local) {
        int rc = MPI_Comm_split(comm->mpi, color, key, &c->mpi);
        if (rc != MPI_SUCCESS) mpi_fail("MPI_Comm_split (ncclCommSplit)", rc);
        MPI_Comm_set_errhandler(c->mpi, MPI_ERRORS_RETURN);
        MPI_Comm_size(c->mpi, &c->nranks);
        MPI_Comm_rank(c->mpi, &c->rank);
    } else {
        c->nranks = 1;
    }
    *newcomm = c;
    return ncclSuccess;
}
