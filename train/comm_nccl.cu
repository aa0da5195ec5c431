/* comm_nccl.cu: the NCCL communicator (train/comm.h) for the CUDA backend: fp32 all-gather and
 * reduce-scatter of device buffers over NCCL; the small host all-reduces, bcast and barrier go
 * to the host communicator it was built on (MPI), which also broadcast the ncclUniqueId.
 *
 * Ordering: every kernel runs on the legacy default stream (stream 0, "compute"). A collective
 * goes on its own non-blocking stream ("comm"): an event recorded on compute makes comm wait
 * for everything queued so far, NCCL runs on comm, and an event recorded after it makes compute
 * wait before its next kernel. The host never blocks. allgather_start returns a ticket (the
 * slot of its done event) and leaves compute free to run ahead; wait(ticket) adds the compute
 * wait. Each ticket must be waited exactly once, at most NCCL_TICKETS may be outstanding.
 *
 * Failure: MT_DIE on any rank runs the error hook installed here: ncclCommAbort (so this
 * rank's queued collectives stop) and then the host abort (MPI_Abort), which ends every rank;
 * a failing rank never leaves the others hanging in a collective.
 *
 * Verified on the CPU emulator (kernels/cuda/emu/emu_nccl.cpp, tests/dist_nccl.c); compiled
 * against the real NCCL but not yet run on GPUs (docs/cuda.md, "The NCCL communicator"). */
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "autograd/check.h"
#include "train/comm.h"
}

#define ncclCheck(call)                                                                            \
    do {                                                                                           \
        ncclResult_t nccl_err_ = (call);                                                           \
        if (nccl_err_ != ncclSuccess)                                                              \
            MT_DIE("nccl: %s failed: %s (%d)", #call, ncclGetErrorString(nccl_err_),               \
                   (int)nccl_err_);                                                                \
    } while (0)

#define commCudaCheck(call)                                                                        \
    do {                                                                                           \
        cudaError_t cuda_err_ = (call);                                                            \
        if (cuda_err_ != cudaSuccess)                                                              \
            MT_DIE("nccl comm: %s failed: %s (%s)", #call, cudaGetErrorString(cuda_err_),          \
                   cudaGetErrorName(cuda_err_));                                                   \
    } while (0)

/* all-gathers started and not yet waited for, at most */
#define NCCL_TICKETS 64

typedef struct {
    mt_comm pub;
    mt_comm *host;
    ncclComm_t nccl;
    int device;
    cudaStream_t stream; /* comm */
    cudaEvent_t ready;   /* on compute: what the next collective waits for */
    cudaEvent_t done;    /* on comm: the end of a plain allgather/reduce_scatter */
    cudaEvent_t ticket_done[NCCL_TICKETS];
    bool outstanding[NCCL_TICKETS];
    int next_ticket;
} nccl_state;

/* the legacy default stream: every kernel, cuBLAS call and backend memcpy */
static const cudaStream_t nccl_compute = 0;

/* The live communicator, for the error hook (one at a time), and the host communicator the
 * hook falls back to once it is freed. */
static nccl_state *nccl_live = NULL;
static mt_comm *nccl_hook_host = NULL;

static nccl_state *nccl_of(mt_comm *c) { return (nccl_state *)c->impl; }

/* ---- failure: abort NCCL, then the host job ---- */

static void nccl_abort_comm(nccl_state *s) {
    /* unchecked: this runs while dying, and a second MT_DIE would recurse */
    if (s && s->nccl) {
        ncclComm_t comm = s->nccl;
        s->nccl = NULL;
        (void)ncclCommAbort(comm);
    }
}

static void nccl_abort_hook(int exit_code) {
    nccl_abort_comm(nccl_live);
    if (nccl_hook_host) nccl_hook_host->abort(nccl_hook_host, exit_code);
    exit(exit_code);
}

static void nccl_abort(mt_comm *c, int exit_code) {
    nccl_state *s = nccl_of(c);
    nccl_abort_comm(s);
    s->host->abort(s->host, exit_code);
    exit(exit_code);
}

/* ---- device collectives ---- */

/* comm waits for everything queued on compute so far */
static void nccl_after_compute(nccl_state *s) {
    commCudaCheck(cudaEventRecord(s->ready, nccl_compute));
    commCudaCheck(cudaStreamWaitEvent(s->stream, s->ready, 0));
}

/* elem 4: fp32; 2: bf16 bits (a copy: any 16-bit type moves them unchanged) */
static void nccl_issue_allgather(nccl_state *s, const void *send, void *recv, int64_t count,
                                 size_t elem) {
    MT_CHECK(count >= 0 && (elem == 4 || elem == 2),
             "nccl allgather: count %lld of %zu-byte elements (4 or 2)", (long long)count, elem);
    nccl_after_compute(s);
    if (count > 0)
        ncclCheck(ncclAllGather(send, recv, (size_t)count, elem == 4 ? ncclFloat : ncclBfloat16,
                                s->nccl, s->stream));
}

/* compute waits for everything queued on comm so far */
static void nccl_compute_waits(nccl_state *s) {
    commCudaCheck(cudaEventRecord(s->done, s->stream));
    commCudaCheck(cudaStreamWaitEvent(nccl_compute, s->done, 0));
}

static void nccl_allgather(mt_comm *c, const void *send, void *recv, int64_t count, size_t elem) {
    nccl_state *s = nccl_of(c);
    nccl_issue_allgather(s, send, recv, count, elem);
    nccl_compute_waits(s);
}

static void nccl_reduce_scatter(mt_comm *c, const float *send, float *recv, int64_t count) {
    nccl_state *s = nccl_of(c);
    MT_CHECK(count >= 0, "nccl reduce_scatter: count %lld < 0", (long long)count);
    nccl_after_compute(s);
    if (count > 0)
        ncclCheck(
            ncclReduceScatter(send, recv, (size_t)count, ncclFloat, ncclSum, s->nccl, s->stream));
    nccl_compute_waits(s);
}

static int nccl_allgather_start(mt_comm *c, const void *send, void *recv, int64_t count,
                                size_t elem) {
    nccl_state *s = nccl_of(c);
    int t = -1;
    for (int i = 0; i < NCCL_TICKETS && t < 0; i++) {
        int k = (s->next_ticket + i) % NCCL_TICKETS;
        if (!s->outstanding[k]) t = k;
    }
    MT_CHECK(t >= 0, "nccl allgather_start: %d all-gathers already outstanding (wait for some)",
             NCCL_TICKETS);
    nccl_issue_allgather(s, send, recv, count, elem);
    commCudaCheck(cudaEventRecord(s->ticket_done[t], s->stream));
    s->outstanding[t] = true;
    s->next_ticket = (t + 1) % NCCL_TICKETS;
    return t;
}

static void nccl_wait(mt_comm *c, int ticket) {
    nccl_state *s = nccl_of(c);
    MT_CHECK(ticket >= 0 && ticket < NCCL_TICKETS && s->outstanding[ticket],
             "nccl wait: ticket %d is not an outstanding all-gather", ticket);
    commCudaCheck(cudaStreamWaitEvent(nccl_compute, s->ticket_done[ticket], 0));
    s->outstanding[ticket] = false;
}

/* ---- small host values: the host communicator ---- */

static void nccl_allreduce_f64(mt_comm *c, double *buf, int n) {
    mt_comm *h = nccl_of(c)->host;
    h->allreduce_f64(h, buf, n);
}
static void nccl_allreduce_i64(mt_comm *c, int64_t *buf, int n) {
    mt_comm *h = nccl_of(c)->host;
    h->allreduce_i64(h, buf, n);
}
static void nccl_bcast(mt_comm *c, void *buf, size_t bytes, int root) {
    mt_comm *h = nccl_of(c)->host;
    h->bcast(h, buf, bytes, root);
}
static void nccl_barrier(mt_comm *c) {
    mt_comm *h = nccl_of(c)->host;
    h->barrier(h);
}

/* ---- setup ---- */

/* The rank within its node, from the launcher (Open MPI, MPICH/Intel MPI, Slurm), else the
 * global rank (one node). */
static int nccl_local_rank(const mt_comm *host) {
    const char *vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"};
    for (int i = 0; i < 3; i++) {
        const char *v = getenv(vars[i]);
        if (!v || !*v) continue;
        char *end = NULL;
        long r = strtol(v, &end, 10);
        MT_CHECK(*end == '\0' && r >= 0 && r < (1L << 20), "nccl: %s='%s' is not a local rank",
                 vars[i], v);
        return (int)r;
    }
    return host->rank;
}

/* Two ranks on one GPU make NCCL hang or fail obscurely (and share its memory): refuse unless
 * MT_NCCL_ALLOW_SHARED_DEVICE=1. The emulator has one device for all ranks, so there sharing is
 * allowed unless the variable is 0 (the test of this check). Devices are told apart by UUID,
 * which holds across nodes and CUDA_VISIBLE_DEVICES renumbering. */
static void nccl_check_device_unique(nccl_state *s) {
    mt_comm *h = s->host;
    const char *allow = getenv("MT_NCCL_ALLOW_SHARED_DEVICE");
#ifdef MT_CUDA_EMU
    bool allowed = !allow || strcmp(allow, "0") != 0;
#else
    bool allowed = allow && strcmp(allow, "1") == 0;
#endif
    if (allowed || h->size == 1) return;
    cudaDeviceProp prop;
    commCudaCheck(cudaGetDeviceProperties(&prop, s->device));
    /* an all-gather of 16 bytes per rank through the host's integer all-reduce (one non-zero
     * term per slot, so the sums are exact) */
    int64_t *ids = (int64_t *)mt_calloc((size_t)h->size * 2, sizeof(int64_t), "device ids");
    memcpy(&ids[2 * h->rank], prop.uuid.bytes, 16);
    h->allreduce_i64(h, ids, 2 * h->size);
    for (int r = 0; r < h->size; r++)
        for (int q = r + 1; q < h->size; q++)
            if (ids[2 * r] == ids[2 * q] && ids[2 * r + 1] == ids[2 * q + 1]) {
                free(ids);
                MT_DIE("nccl: ranks %d and %d share one GPU (this rank uses device %d of its node; "
                       "local rank from OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID or "
                       "SLURM_LOCALID, else the global rank): run one rank per GPU, or set "
                       "MT_NCCL_ALLOW_SHARED_DEVICE=1 to try anyway",
                       r, q, s->device);
            }
    free(ids);
}

mt_comm *mt_comm_nccl_init(mt_comm *host) {
    MT_CHECK(host && host->bcast && host->abort, "nccl: a host communicator is required");
    MT_CHECK(!nccl_live, "nccl: one NCCL communicator at a time (free the previous one)");
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev < 1)
        MT_DIE("nccl: no usable CUDA device on this rank (cudaGetDeviceCount: %s, %d devices); "
               "the NCCL communicator needs one GPU per rank",
               cudaGetErrorString(e), e == cudaSuccess ? ndev : 0);
    nccl_state *s = (nccl_state *)mt_calloc(1, sizeof(nccl_state), "nccl communicator");
    s->host = host;
    s->device = nccl_local_rank(host) % ndev;
    commCudaCheck(cudaSetDevice(s->device));
    nccl_check_device_unique(s);

    ncclUniqueId id;
    memset(&id, 0, sizeof(id));
    if (host->rank == 0) ncclCheck(ncclGetUniqueId(&id));
    host->bcast(host, &id, sizeof(id), 0);
    ncclCheck(ncclCommInitRank(&s->nccl, host->size, id, host->rank));

    commCudaCheck(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
    commCudaCheck(cudaEventCreateWithFlags(&s->ready, cudaEventDisableTiming));
    commCudaCheck(cudaEventCreateWithFlags(&s->done, cudaEventDisableTiming));
    for (int i = 0; i < NCCL_TICKETS; i++)
        commCudaCheck(cudaEventCreateWithFlags(&s->ticket_done[i], cudaEventDisableTiming));

    mt_comm *c = &s->pub;
    c->name = "nccl";
    c->rank = host->rank;
    c->size = host->size;
    c->allgather = nccl_allgather;
    c->reduce_scatter = nccl_reduce_scatter;
    c->allreduce_f64 = nccl_allreduce_f64;
    c->allreduce_i64 = nccl_allreduce_i64;
    c->bcast = nccl_bcast;
    c->barrier = nccl_barrier;
    c->abort = nccl_abort;
    c->device = true;
    c->allgather_start = nccl_allgather_start;
    c->wait = nccl_wait;
    c->impl = s;
    nccl_live = s;
    nccl_hook_host = host;
    mt_error_set_abort_hook(nccl_abort_hook);
    return c;
}

void mt_comm_nccl_free(mt_comm *c) {
    if (!c) return;
    nccl_state *s = nccl_of(c);
    for (int i = 0; i < NCCL_TICKETS; i++)
        MT_CHECK(!s->outstanding[i], "nccl free: all-gather ticket %d was never waited for", i);
    /* queued collectives finish before the communicator goes */
    commCudaCheck(cudaStreamSynchronize(s->stream));
    ncclCheck(ncclCommDestroy(s->nccl));
    s->nccl = NULL;
    for (int i = 0; i < NCCL_TICKETS; i++) commCudaCheck(cudaEventDestroy(s->ticket_done[i]));
    commCudaCheck(cudaEventDestroy(s->done));
    commCudaCheck(cudaEventDestroy(s->ready));
    commCudaCheck(cudaStreamDestroy(s->stream));
    /* from here an error aborts through the host alone (nccl_live NULL, nccl_hook_host kept) */
    nccl_live = NULL;
    free(s);
}
