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
 * Watchdog: a rank that dies without MT_DIE (killed, a lost node or link) or that never issues
 * the collective its peers wait in leaves the others' NCCL kernels spinning and their host
 * threads blocked in the next CUDA call. A thread per rank therefore polls every 100 ms:
 * ncclCommGetAsyncError (NCCL's report of a peer or network failure), and the oldest collective
 * not yet complete (an event recorded after each one, in a ring of NCCL_WATCH, queried with
 * cudaEventQuery). An error, or a collective pending longer than the timeout (dist.timeout),
 * ends the job through MT_DIE from the watchdog thread (its hook: ncclCommAbort, MPI_Abort).
 * A ring slot reused before the watchdog saw its collective finish names a later collective
 * of the same stream; that one completing implies the earlier did, and its later issue time
 * only delays a timeout, so the watchdog never fires early.
 *
 * Expert parallelism: alltoallv is one group of ncclSend/ncclRecv (bytes, rank order) on comm,
 * ordered like allgather and watched like every collective; split is ncclCommSplit with the host
 * communicator split alongside (its small host collectives), each split with its own stream,
 * events and watchdog, aborted with the world's by the error hook.
 *
 * Verified on the CPU emulator (tests/cuda_emu/emu_nccl.cpp, tests/gpu/dist_nccl.c); compiled
 * against the real NCCL but not yet run on GPUs (docs/cuda.md, "The NCCL communicator"). */
#include <cuda_runtime.h>
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <atomic>

extern "C" {
#include "core/check.h"
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
/* collectives the watchdog tells apart (a ring of completion events) */
#define NCCL_WATCH 256

/* what a watched collective was, for the watchdog's message */
enum nccl_kind { NCCL_GATHER, NCCL_SCATTER, NCCL_ALLTOALL };
static const char *const nccl_kind_name[] = {"an all-gather", "a reduce-scatter", "an all-to-all"};
static const char *const nccl_kind_unit[] = {"elements per rank", "elements per rank",
                                             "elements sent by this rank"};

/* The watchdog's view of the collectives (see the header). The main thread writes a slot and
 * then publishes it by incrementing issued; the watchdog reads slots below issued. */
struct nccl_watch {
    pthread_t thread;
    bool running;
    std::atomic<bool> stop;
    pthread_mutex_t lock; /* held while the watchdog uses the NCCL handle, against an abort */
    std::atomic<double> timeout_s; /* a collective pending longer ends the job; 0: never */
    char label[2][192];            /* the message's text for it: label[label_at] */
    std::atomic<int> label_at;
    std::atomic<int64_t> issued;
    cudaEvent_t event[NCCL_WATCH];          /* recorded on comm after the collective */
    std::atomic<double> stamp[NCCL_WATCH];  /* when it was issued (monotonic seconds) */
    std::atomic<int64_t> count[NCCL_WATCH]; /* its elements per rank */
    std::atomic<int> kind[NCCL_WATCH];      /* nccl_kind: which collective */
};

struct nccl_state {
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
    nccl_watch watch;
};

/* the legacy default stream: every kernel, cuBLAS call and backend memcpy */
static const cudaStream_t nccl_compute = 0;

/* The live communicator, for the error hook (one at a time), the host communicator the hook
 * falls back to once it is freed, and the live splits of it (split), which the hook aborts too. */
static nccl_state *nccl_live = NULL;
static mt_comm *nccl_hook_host = NULL;
#define NCCL_SPLITS 16
static nccl_state *nccl_splits[NCCL_SPLITS];

static nccl_state *nccl_of(mt_comm *c) { return (nccl_state *)c->impl; }

/* ---- failure: abort NCCL, then the host job ---- */

static void nccl_abort_comm(nccl_state *s) {
    /* unchecked: this runs while dying, and a second MT_DIE would recurse */
    if (!s) return;
    pthread_mutex_lock(&s->watch.lock);
    if (s->nccl) {
        ncclComm_t comm = s->nccl;
        s->nccl = NULL;
        (void)ncclCommAbort(comm);
    }
    pthread_mutex_unlock(&s->watch.lock);
}

static void nccl_abort_all(void) {
    for (int i = 0; i < NCCL_SPLITS; i++) nccl_abort_comm(nccl_splits[i]);
    nccl_abort_comm(nccl_live);
}

static void nccl_abort_hook(int exit_code) {
    nccl_abort_all();
    if (nccl_hook_host) nccl_hook_host->abort(nccl_hook_host, exit_code);
    exit(exit_code);
}

static void nccl_abort(mt_comm *c, int exit_code) {
    nccl_state *s = nccl_of(c);
    nccl_abort_comm(s);
    nccl_abort_all();
    s->host->abort(s->host, exit_code);
    exit(exit_code);
}

/* ---- the watchdog ---- */

static double nccl_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* After a collective was queued on comm: its slot in the ring, then published. */
static void nccl_watch_mark(nccl_state *s, nccl_kind kind, int64_t count) {
    nccl_watch *w = &s->watch;
    const int64_t seq = w->issued.load(std::memory_order_relaxed);
    const int slot = (int)(seq % NCCL_WATCH);
    w->stamp[slot].store(nccl_now(), std::memory_order_relaxed);
    w->count[slot].store(count, std::memory_order_relaxed);
    w->kind[slot].store(kind, std::memory_order_relaxed);
    commCudaCheck(cudaEventRecord(w->event[slot], s->stream));
    w->issued.store(seq + 1, std::memory_order_release);
}

/* Advances *done past the collectives that completed; writes why the job must end, if it must:
 * the oldest pending one is older than the timeout, or the device reported an error. */
static void nccl_watch_progress(nccl_state *s, int64_t *done, char *why, size_t len) {
    nccl_watch *w = &s->watch;
    const int64_t issued = w->issued.load(std::memory_order_acquire);
    if (*done >= issued) return;
    /* one stream: the newest complete means all are */
    cudaError_t e = cudaEventQuery(w->event[(issued - 1) % NCCL_WATCH]);
    if (e == cudaSuccess) {
        *done = issued;
        return;
    }
    while (*done < issued && (e = cudaEventQuery(w->event[*done % NCCL_WATCH])) == cudaSuccess)
        (*done)++;
    if (*done == issued) return;
    const int slot = (int)(*done % NCCL_WATCH);
    const int kind = w->kind[slot].load(std::memory_order_relaxed);
    const long long count = (long long)w->count[slot].load(std::memory_order_relaxed);
    const double age = nccl_now() - w->stamp[slot].load(std::memory_order_relaxed);
    if (e != cudaErrorNotReady)
        snprintf(why, len, "CUDA error while collective %lld (%s of %lld %s) was pending: %s",
                 (long long)*done + 1, nccl_kind_name[kind], count, nccl_kind_unit[kind],
                 cudaGetErrorString(e));
    else if (w->timeout_s.load() > 0 && age > w->timeout_s.load())
        snprintf(why, len,
                 "collective %lld (%s of %lld %s) has not completed after %.0f s (%s): another "
                 "rank died, is stuck, or issued different collectives; ending the job",
                 (long long)*done + 1, nccl_kind_name[kind], count, nccl_kind_unit[kind], age,
                 w->label[w->label_at.load()]);
}

static void nccl_watch_set(nccl_state *s, double timeout_s, const char *label) {
    nccl_watch *w = &s->watch;
    const int next = 1 - w->label_at.load();
    if (label)
        snprintf(w->label[next], sizeof(w->label[next]), "%s", label);
    else
        snprintf(w->label[next], sizeof(w->label[next]), "dist.timeout = %g s", timeout_s);
    w->label_at.store(next);
    w->timeout_s.store(timeout_s);
}

/* On the world's communicator it sets its splits' limit too (a split starts with its parent's). */
void mt_comm_nccl_watch(mt_comm *c, double timeout_s, const char *label) {
    if (!c || !c->name || strncmp(c->name, "nccl", 4) != 0) return; /* not this communicator */
    MT_CHECK(timeout_s >= 0, "nccl: timeout %g s must be >= 0 (0: none)", timeout_s);
    nccl_watch_set(nccl_of(c), timeout_s, label);
    if (nccl_of(c) != nccl_live) return;
    for (int i = 0; i < NCCL_SPLITS; i++)
        if (nccl_splits[i]) nccl_watch_set(nccl_splits[i], timeout_s, label);
}

static void *nccl_watchdog(void *arg) {
    nccl_state *s = (nccl_state *)arg;
    nccl_watch *w = &s->watch;
    (void)cudaSetDevice(s->device); /* the runtime's current device is per thread */
    int64_t done = 0;
    char why[512];
    const struct timespec poll = {0, 100 * 1000 * 1000};
    while (!w->stop.load()) {
        nanosleep(&poll, NULL);
        why[0] = '\0';
        pthread_mutex_lock(&w->lock);
        ncclResult_t r = ncclSuccess;
        if (s->nccl && ncclCommGetAsyncError(s->nccl, &r) == ncclSuccess && r != ncclSuccess &&
            r != ncclInProgress)
            snprintf(why, sizeof(why),
                     "asynchronous NCCL error: %s (%d): a peer process exited or the network "
                     "failed; ending the job",
                     ncclGetErrorString(r), (int)r);
        pthread_mutex_unlock(&w->lock); /* the abort below takes it */
        if (!why[0]) nccl_watch_progress(s, &done, why, sizeof(why));
        if (why[0]) MT_DIE("nccl watchdog: %s", why);
    }
    return NULL;
}

static void nccl_watch_start(nccl_state *s, double timeout_s) {
    nccl_watch *w = &s->watch;
    MT_CHECK(timeout_s >= 0, "nccl: timeout %g s must be >= 0 (0: none)", timeout_s);
    w->timeout_s.store(timeout_s);
    snprintf(w->label[0], sizeof(w->label[0]), "dist.timeout = %g s", timeout_s);
    for (int i = 0; i < NCCL_WATCH; i++)
        commCudaCheck(cudaEventCreateWithFlags(&w->event[i], cudaEventDisableTiming));
    MT_CHECK(pthread_create(&w->thread, NULL, nccl_watchdog, s) == 0,
             "nccl: could not start the watchdog thread");
    w->running = true;
}

static void nccl_watch_stop(nccl_state *s) {
    nccl_watch *w = &s->watch;
    if (!w->running) return;
    w->stop.store(true);
    pthread_join(w->thread, NULL);
    w->running = false;
    for (int i = 0; i < NCCL_WATCH; i++) commCudaCheck(cudaEventDestroy(w->event[i]));
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
    if (count == 0) return;
    ncclCheck(ncclAllGather(send, recv, (size_t)count, elem == 4 ? ncclFloat : ncclBfloat16,
                            s->nccl, s->stream));
    nccl_watch_mark(s, NCCL_GATHER, count);
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
    if (count > 0) {
        ncclCheck(
            ncclReduceScatter(send, recv, (size_t)count, ncclFloat, ncclSum, s->nccl, s->stream));
        nccl_watch_mark(s, NCCL_SCATTER, count);
    }
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

/* Grouped sends and receives in rank order, as bytes (elem 2 or 4: a copy, any type moves them
 * unchanged); pairs with zero bytes are left out, so a rank with nothing to move issues an
 * empty group but still orders the streams like any collective. The watchdog counts it like
 * one when it moves anything. */
static void nccl_alltoallv(mt_comm *c, const void *send, const int64_t *send_counts, void *recv,
                           const int64_t *recv_counts, size_t elem) {
    nccl_state *s = nccl_of(c);
    MT_CHECK(elem == 4 || elem == 2, "nccl alltoallv: elements of %zu bytes (4 or 2)", elem);
    int64_t sent = 0, got = 0;
    for (int r = 0; r < c->size; r++) {
        MT_CHECK(send_counts[r] >= 0 && recv_counts[r] >= 0,
                 "nccl alltoallv: negative count for rank %d (send %lld, receive %lld)", r,
                 (long long)send_counts[r], (long long)recv_counts[r]);
        sent += send_counts[r];
        got += recv_counts[r];
    }
    nccl_after_compute(s);
    if (sent + got > 0) {
        const char *src = (const char *)send;
        char *dst = (char *)recv;
        ncclCheck(ncclGroupStart());
        for (int r = 0; r < c->size; r++) {
            const size_t sb = elem * (size_t)send_counts[r], rb = elem * (size_t)recv_counts[r];
            if (sb) ncclCheck(ncclSend(src, sb, ncclUint8, r, s->nccl, s->stream));
            if (rb) ncclCheck(ncclRecv(dst, rb, ncclUint8, r, s->nccl, s->stream));
            src += sb;
            dst += rb;
        }
        ncclCheck(ncclGroupEnd());
        nccl_watch_mark(s, NCCL_ALLTOALL, sent);
    }
    nccl_compute_waits(s);
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

static mt_comm *nccl_open(nccl_state *s, const char *name, double timeout_s);
static void nccl_free_split(mt_comm *c);

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

mt_comm *mt_comm_nccl_init(mt_comm *host, double timeout_s) {
    MT_CHECK(host && host->bcast && host->abort, "nccl: a host communicator is required");
    MT_CHECK(!nccl_live, "nccl: one NCCL communicator at a time (free the previous one)");
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev < 1)
        MT_DIE("nccl: no usable CUDA device on this rank (cudaGetDeviceCount: %s, %d devices); "
               "the NCCL communicator needs one GPU per rank",
               cudaGetErrorString(e), e == cudaSuccess ? ndev : 0);
    nccl_state *s = new nccl_state(); /* value-initialised: zeros, and the atomics */
    pthread_mutex_init(&s->watch.lock, NULL);
    s->host = host;
    s->device = nccl_local_rank(host) % ndev;
    commCudaCheck(cudaSetDevice(s->device));
    nccl_check_device_unique(s);

    ncclUniqueId id;
    memset(&id, 0, sizeof(id));
    if (host->rank == 0) ncclCheck(ncclGetUniqueId(&id));
    host->bcast(host, &id, sizeof(id), 0);
    ncclCheck(ncclCommInitRank(&s->nccl, host->size, id, host->rank));
    mt_comm *c = nccl_open(s, "nccl", timeout_s);
    nccl_live = s;
    nccl_hook_host = host;
    mt_error_set_abort_hook(nccl_abort_hook);
    return c;
}

/* A rank's share of a split: every rank of c calls it (ncclCommSplit is collective over c, as
 * the host's split is over c's host). The split gets its own stream, events and watchdog, with
 * c's limit; it orders against the compute stream like c, but not against c's own stream
 * (both wait for compute and compute waits for both, so only collectives issued between the
 * same two compute points may run concurrently, as NCCL allows on distinct communicators). */
static mt_comm *nccl_split(mt_comm *c, int color, int key) {
    nccl_state *p = nccl_of(c);
    MT_CHECK(color >= 0, "nccl split: color %d must be >= 0", color);
    MT_CHECK(p->host->split, "nccl split: the host communicator %s cannot split", p->host->name);
    int slot = -1;
    for (int i = 0; i < NCCL_SPLITS && slot < 0; i++)
        if (!nccl_splits[i]) slot = i;
    MT_CHECK(slot >= 0, "nccl split: %d splits already live (free some)", NCCL_SPLITS);
    nccl_state *s = new nccl_state();
    pthread_mutex_init(&s->watch.lock, NULL);
    s->device = p->device;
    s->host = p->host->split(p->host, color, key);
    ncclCheck(ncclCommSplit(p->nccl, color, key, &s->nccl, NULL));
    mt_comm *sc = nccl_open(s, "nccl-split", p->watch.timeout_s.load());
    nccl_watch_set(s, p->watch.timeout_s.load(), p->watch.label[p->watch.label_at.load()]);
    MT_CHECK(sc->size == s->host->size && sc->rank == s->host->rank,
             "nccl split: rank %d of %d, the host's split says %d of %d", sc->rank, sc->size,
             s->host->rank, s->host->size);
    nccl_splits[slot] = s;
    return sc;
}

/* Streams, events, the watchdog and the table of a state whose NCCL handle is open. */
static mt_comm *nccl_open(nccl_state *s, const char *name, double timeout_s) {
    commCudaCheck(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
    commCudaCheck(cudaEventCreateWithFlags(&s->ready, cudaEventDisableTiming));
    commCudaCheck(cudaEventCreateWithFlags(&s->done, cudaEventDisableTiming));
    for (int i = 0; i < NCCL_TICKETS; i++)
        commCudaCheck(cudaEventCreateWithFlags(&s->ticket_done[i], cudaEventDisableTiming));
    nccl_watch_start(s, timeout_s);

    mt_comm *c = &s->pub;
    c->name = name;
    c->rank = s->host->rank;
    c->size = s->host->size;
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
    c->alltoallv = nccl_alltoallv;
    c->split = nccl_split;
    c->free_split = nccl_free_split;
    c->impl = s;
    return c;
}

/* Everything but the state itself: queued collectives finish first (still watched). */
static void nccl_close(nccl_state *s) {
    for (int i = 0; i < NCCL_TICKETS; i++)
        MT_CHECK(!s->outstanding[i], "nccl free: all-gather ticket %d was never waited for", i);
    commCudaCheck(cudaStreamSynchronize(s->stream));
    nccl_watch_stop(s);
    ncclCheck(ncclCommDestroy(s->nccl));
    s->nccl = NULL;
    for (int i = 0; i < NCCL_TICKETS; i++) commCudaCheck(cudaEventDestroy(s->ticket_done[i]));
    commCudaCheck(cudaEventDestroy(s->done));
    commCudaCheck(cudaEventDestroy(s->ready));
    commCudaCheck(cudaStreamDestroy(s->stream));
}

void mt_comm_nccl_free(mt_comm *c) {
    if (!c) return;
    nccl_state *s = nccl_of(c);
    for (int i = 0; i < NCCL_SPLITS; i++)
        MT_CHECK(!nccl_splits[i], "nccl free: a split of the communicator is still live");
    nccl_close(s);
    /* from here an error aborts through the host alone (nccl_live NULL, nccl_hook_host kept) */
    nccl_live = NULL;
    pthread_mutex_destroy(&s->watch.lock);
    delete s;
}

static void nccl_free_split(mt_comm *c) {
    if (!c) return;
    nccl_state *s = nccl_of(c);
    MT_CHECK(s != nccl_live, "nccl free_split: the world's communicator (mt_comm_nccl_free)");
    nccl_close(s);
    mt_comm *host = s->host;
    for (int i = 0; i < NCCL_SPLITS; i++)
        if (nccl_splits[i] == s) nccl_splits[i] = NULL;
    pthread_mutex_destroy(&s->watch.lock);
    delete s;
    host->free_split(host);
}
