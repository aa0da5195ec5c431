/* comm_mpi.c: the MPI communicator (host buffers). Counts above INT_MAX are split into chunks,
 * since MPI 3.1 takes int counts.
 *
 * The watchdog (mt_comm_mpi_watch): every collective stamps its start and clears the stamp when
 * it returns; a thread polls the stamp and ends the job through MT_DIE (MPI_Abort) when one
 * collective has waited longer than the timeout. MPI notices a peer that exited, but not one
 * that is stopped, stuck in a loop or a file system call, or took another path: its peers would
 * wait in the collective for ever. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "core/check.h"
#include "train/comm.h"
#include "train/env.h"

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
static MPI_Comm mpi_world = MPI_COMM_WORLD; /* the world's impl; a split's impl is its own */

static MPI_Comm mpi_of(const mt_comm *c) { return *(const MPI_Comm *)c->impl; }

/* ---- the watchdog ---- */

/* The main thread writes seq, what and count, then publishes the start; the thread reads the
 * start, the rest, and seq again, and trusts what it read only when seq did not move. */
static struct {
    atomic_llong started_ns;    /* 0: not in a collective */
    atomic_llong seq;           /* collectives entered so far */
    _Atomic(const char *) what; /* a format of count: "an all-gather of %lld elements ..." */
    atomic_llong count;
    atomic_llong timeout_ms; /* 0: not watching (mt_comm_mpi_watch) */
    /* what the message says of the limit: label[label_at], rewritten in the other buffer */
    char label[2][192];
    atomic_int label_at;
    atomic_bool stop;
    bool running;
    pthread_t thread;
} mpi_watch;

static long long mpi_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void mpi_watch_enter(const char *what, int64_t count) {
    atomic_fetch_add_explicit(&mpi_watch.seq, 1, memory_order_relaxed);
    atomic_store_explicit(&mpi_watch.what, what, memory_order_relaxed);
    atomic_store_explicit(&mpi_watch.count, (long long)count, memory_order_relaxed);
    atomic_store_explicit(&mpi_watch.started_ns, mpi_now_ns(), memory_order_release);
}

static void mpi_watch_leave(void) {
    atomic_store_explicit(&mpi_watch.started_ns, 0, memory_order_release);
}

static void *mpi_watchdog(void *arg) {
    (void)arg;
    const struct timespec poll = {0, 100 * 1000 * 1000};
    while (!atomic_load(&mpi_watch.stop)) {
        nanosleep(&poll, NULL);
        const long long seq = atomic_load_explicit(&mpi_watch.seq, memory_order_acquire);
        const long long started = atomic_load_explicit(&mpi_watch.started_ns, memory_order_acquire);
        const char *what = atomic_load_explicit(&mpi_watch.what, memory_order_relaxed);
        const long long count = atomic_load_explicit(&mpi_watch.count, memory_order_relaxed);
        const double timeout_s = 1e-3 * (double)atomic_load(&mpi_watch.timeout_ms);
        if (!started || timeout_s == 0 ||
            atomic_load_explicit(&mpi_watch.seq, memory_order_acquire) != seq)
            continue;
        const double age = 1e-9 * (double)(mpi_now_ns() - started);
        if (age <= timeout_s) continue;
        char name[128];
        snprintf(name, sizeof(name), what, count);
        MT_DIE("mpi watchdog: host collective %lld (%s) has not completed after %.0f s "
               "(%s): another rank died, is stopped or stuck, or issued different collectives; "
               "ending the job (dist.timeout = 0 turns the limit off)",
               seq, name, age, mpi_watch.label[atomic_load(&mpi_watch.label_at)]);
    }
    return NULL;
}

void mt_comm_mpi_watch(mt_comm *c, double timeout_s) {
    char label[64];
    snprintf(label, sizeof(label), "dist.timeout = %g s", timeout_s);
    mt_comm_mpi_watch_label(c, timeout_s, label);
}

void mt_comm_mpi_watch_label(mt_comm *c, double timeout_s, const char *label) {
    MT_CHECK(timeout_s >= 0, "mpi: timeout %g s must be >= 0 (0: none)", timeout_s);
    if (c != &mpi_comm || c->size == 1) return;
    const int next = 1 - atomic_load(&mpi_watch.label_at);
    snprintf(mpi_watch.label[next], sizeof(mpi_watch.label[next]), "%s", label);
    atomic_store(&mpi_watch.label_at, next);
    atomic_store(&mpi_watch.timeout_ms, (long long)(timeout_s * 1e3 + 0.5));
    if (timeout_s == 0 || mpi_watch.running) return;
    MT_CHECK(pthread_create(&mpi_watch.thread, NULL, mpi_watchdog, NULL) == 0,
             "mpi: could not start the watchdog thread");
    mpi_watch.running = true;
}

static void mpi_watch_stop(void) {
    if (!mpi_watch.running) return;
    atomic_store(&mpi_watch.stop, true);
    pthread_join(mpi_watch.thread, NULL);
    mpi_watch.running = false;
}

/* ---- one rank's work the others wait for: a heartbeat file ---- */

static struct {
    bool running;
    atomic_bool stop;
    int fd;
    pthread_t thread;
} heartbeat;

/* The worker's thread: a new counter in the file every 0.2 s. A stopped process stops it too;
 * a process stuck in the file system likely blocks in its next write. */
static void *heartbeat_beat(void *arg) {
    (void)arg;
    const struct timespec period = {0, 200 * 1000 * 1000};
    for (long long n = 1; !atomic_load(&heartbeat.stop); n++) {
        char text[64];
        const int len = snprintf(text, sizeof(text), "%020lld\n", n);
        if (pwrite(heartbeat.fd, text, (size_t)len, 0) != len) { /* the others time out */
        }
        nanosleep(&period, NULL);
    }
    return NULL;
}

void mt_comm_mpi_heartbeat_start(mt_comm *c, const char *path) {
    if (c != &mpi_comm || c->size == 1) return;
    heartbeat.fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    MT_CHECK(heartbeat.fd >= 0, "cannot create the heartbeat file %s: %s", path, strerror(errno));
    atomic_store(&heartbeat.stop, false);
    MT_CHECK(pthread_create(&heartbeat.thread, NULL, heartbeat_beat, NULL) == 0,
             "mpi: could not start the heartbeat thread");
    heartbeat.running = true;
}

/* The file's text, "" when it cannot be read (not written yet). */
static void heartbeat_read(const char *path, char *buf, size_t n) {
    buf[0] = 0;
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    const ssize_t got = read(fd, buf, n - 1);
    close(fd);
    buf[got > 0 ? got : 0] = 0;
}

void mt_comm_mpi_barrier_heartbeat(mt_comm *c, const char *path, double silence_s,
                                   const char *what) {
    if (c != &mpi_comm || c->size == 1) return;
    MPI_Request req;
    MPI_CHECK(MPI_Ibarrier(MPI_COMM_WORLD, &req));
    if (heartbeat.running) { /* the worker: its work is done; the others wait already */
        mpi_watch_enter("the barrier after the work rank 0 does alone", 0);
        MPI_CHECK(MPI_Wait(&req, MPI_STATUS_IGNORE));
        mpi_watch_leave();
        atomic_store(&heartbeat.stop, true);
        pthread_join(heartbeat.thread, NULL);
        close(heartbeat.fd);
        unlink(path);
        heartbeat.running = false;
        return;
    }
    const struct timespec poll = {0, 20 * 1000 * 1000};
    char last[64] = "", now[64];
    const double start = 1e-9 * (double)mpi_now_ns();
    double changed = start;
    for (int done = 0;;) {
        MPI_CHECK(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
        if (done) return;
        nanosleep(&poll, NULL);
        const double t = 1e-9 * (double)mpi_now_ns();
        heartbeat_read(path, now, sizeof(now));
        if (strcmp(now, last)) {
            snprintf(last, sizeof(last), "%s", now);
            changed = t;
        }
        if (silence_s > 0 && t - changed > silence_s)
            MT_DIE("rank 0 %s while this rank waits, but has shown no sign of life for %.0f s "
                   "(its heartbeat file %s %s; the limit, %g s, is dist.timeout or, when that "
                   "is automatic, its floor): it is stopped or stuck; ending the job",
                   what, t - changed, path, last[0] ? "stopped changing" : "never appeared",
                   silence_s);
    }
}

/* ---- the byte tally (mt_comm_mpi_bytes) ---- */

/* bytes this rank sent, as ring collectives move them: an all-gather or reduce-scatter of n
 * elements per rank sends (size - 1) n; an all-to-all what goes to the other ranks */
static int64_t mpi_bytes[MT_COMM_BYTES_KINDS];
/* of the gathers' and reduce-scatters' bytes, those read from node-shared buffers */
static int64_t mpi_bytes_shared;

void mt_comm_mpi_bytes(int64_t out[MT_COMM_BYTES_KINDS]) {
    memcpy(out, mpi_bytes, sizeof(mpi_bytes));
}

/* MT_COMM_BYTES=PATH: each rank writes its tally to PATH.<rank> at mt_comm_finalize
 * (bench/ep_step.sh reads them). */
static void mpi_bytes_write(void) {
    const char *path = getenv("MT_COMM_BYTES");
    if (!path || !*path) return;
    char name[4096];
    snprintf(name, sizeof(name), "%s.%d", path, mpi_comm.rank);
    FILE *f = fopen(name, "w");
    if (!f) return; /* a bench aid: the run itself succeeded */
    fprintf(f, "gather=%lld\nreduce_scatter=%lld\nalltoall=%lld\nsmall=%lld\nshared=%lld\n",
            (long long)mpi_bytes[0], (long long)mpi_bytes[1], (long long)mpi_bytes[2],
            (long long)mpi_bytes[3], (long long)mpi_bytes_shared);
    fclose(f);
}

/* ---- node-shared send buffers (comm.h alloc_shared) ---- */

/* Open MPI's shared-memory transport moves a large message through fragments, and a
 * reduce-scatter through a temporary as well: at 2 ranks and 68 MB of gradients, 27-42 ms
 * against 5-6 ms for one summing pass over the peers' buffers (the 2-core build machine).
 * With every rank on one node, the buffers zero.c sends from live in an MPI-3 shared window,
 * so the collectives read them in place. */
typedef struct {
    MPI_Win win;
    MPI_Comm comm; /* the communicator whose collectives may read it */
    char *base;    /* this rank's segment */
    size_t bytes;
    char **peer; /* (size) each rank's segment, mapped here */
    bool node;   /* alloc_node: base is rank 0's segment, the one buffer every rank uses */
} mpi_shared_block;

#define MPI_SHARED_BLOCKS 16
static mpi_shared_block mpi_shared[MPI_SHARED_BLOCKS];

/* Whether every rank of c shares this node and /dev/shm (osc sm's default backing directory)
 * has room for `bytes` in all (one file holds every segment), with a margin, under the file
 * size limit (a window is a file there: past `ulimit -f` its creation is SIGXFSZ); the same
 * answer on every rank. */
static bool mpi_shared_possible(mt_comm *c, double bytes) {
    if (c->size < 2 || !mt_env_int("MT_COMM_SHARED", 0, 1, 1)) return false;
    MPI_Comm node;
    MPI_CHECK(MPI_Comm_split_type(mpi_of(c), MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    int node_size = 0;
    MPI_CHECK(MPI_Comm_size(node, &node_size));
    MPI_Comm_free(&node);
    struct statvfs fs;
    double room = statvfs("/dev/shm", &fs) == 0 ? (double)fs.f_bavail * (double)fs.f_frsize : 0;
    const double need = 1.25 * bytes;
    struct rlimit fsize;
    const bool fits = getrlimit(RLIMIT_FSIZE, &fsize) == 0 &&
                      (fsize.rlim_cur == RLIM_INFINITY || (double)fsize.rlim_cur > need);
    int64_t ok = node_size == c->size && fits && room > need;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT64_T, MPI_MIN, mpi_of(c)));
    return ok == 1;
}

/* A shared window of `bytes` on this rank (`room` in all, mpi_shared_possible) in the first free
 * block, or NULL on every rank. */
static mpi_shared_block *mpi_window(mt_comm *c, size_t bytes, double room) {
    int slot = 0;
    while (slot < MPI_SHARED_BLOCKS && mpi_shared[slot].base) slot++;
    /* the slot search gives every rank the same answer: allocations are collective */
    if (slot == MPI_SHARED_BLOCKS || !mpi_shared_possible(c, room)) return NULL;
    mpi_shared_block *b = &mpi_shared[slot];
    MPI_Info info;
    MPI_CHECK(MPI_Info_create(&info));
    MPI_CHECK(MPI_Info_set(info, "alloc_shared_noncontig", "true")); /* page-aligned segments */
    mpi_watch_enter("a shared window of %lld bytes", (int64_t)bytes);
    const int rc = MPI_Win_allocate_shared((MPI_Aint)(bytes ? bytes : 64), 1, info, mpi_of(c),
                                           &b->base, &b->win);
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, msg, &len);
        MT_DIE("MPI could not allocate a node-shared window of %zu bytes (%s); MT_COMM_SHARED=0 "
               "sends the collectives through MPI's messages instead",
               bytes, msg);
    }
    mpi_watch_leave();
    MPI_Info_free(&info);
    b->comm = mpi_of(c);
    b->bytes = bytes;
    b->peer = calloc((size_t)c->size, sizeof(char *));
    MT_CHECK(b->peer, "mpi shared window: out of memory");
    for (int r = 0; r < c->size; r++) {
        MPI_Aint size;
        int disp;
        MPI_CHECK(MPI_Win_shared_query(b->win, r, &size, &disp, &b->peer[r]));
    }
    /* a passive epoch for the window's lifetime: MPI_Win_sync orders the stores around the
     * barriers of the collectives below */
    MPI_CHECK(MPI_Win_lock_all(MPI_MODE_NOCHECK, b->win));
    return b;
}

static void *mpi_alloc_shared(mt_comm *c, size_t bytes) {
    mpi_shared_block *b = mpi_window(c, bytes, (double)bytes * c->size);
    return b ? b->base : NULL;
}

/* comm.h alloc_node: rank 0's segment holds the bytes, the others map it (their own are empty) */
static void *mpi_alloc_node(mt_comm *c, size_t bytes) {
    mpi_shared_block *b = mpi_window(c, c->rank == 0 ? bytes : 0, (double)bytes);
    if (!b) return NULL;
    b->node = true;
    b->base = b->peer[0];
    b->bytes = bytes;
    return b->base;
}

static bool mpi_free_shared(mt_comm *c, void *p) {
    (void)c;
    for (int i = 0; i < MPI_SHARED_BLOCKS; i++) {
        mpi_shared_block *b = &mpi_shared[i];
        if (!b->base || b->base != p) continue;
        MPI_CHECK(MPI_Win_unlock_all(b->win));
        MPI_CHECK(MPI_Win_free(&b->win));
        free(b->peer);
        memset(b, 0, sizeof(*b));
        return true;
    }
    return false;
}

/* The block of c that holds [p, p + bytes), and p's offset in it; NULL if none. */
static const mpi_shared_block *mpi_shared_find(mt_comm *c, const void *p, size_t bytes,
                                               size_t *offset) {
    const char *q = p;
    for (int i = 0; i < MPI_SHARED_BLOCKS; i++) {
        const mpi_shared_block *b = &mpi_shared[i];
        if (b->base && !b->node && b->comm == mpi_of(c) && q >= b->base &&
            q + bytes <= b->base + b->bytes) {
            *offset = (size_t)(q - b->base);
            return b;
        }
    }
    return NULL;
}

/* Every rank's stores to its segment are visible to the others after this (MPI-3's
 * separate-semantics pattern: sync, barrier, sync). */
static void mpi_shared_fence(const mpi_shared_block *b) {
    MPI_CHECK(MPI_Win_sync(b->win));
    MPI_CHECK(MPI_Barrier(b->comm));
    MPI_CHECK(MPI_Win_sync(b->win));
}

/* comm.h node_fence: the stores to the node buffer at p before it are loaded after it. */
static void mpi_node_fence(mt_comm *c, const void *p) {
    for (int i = 0; i < MPI_SHARED_BLOCKS; i++) {
        const mpi_shared_block *b = &mpi_shared[i];
        if (!b->node || b->base != p) continue;
        mpi_watch_enter("the barrier of a node-shared buffer", 0);
        mpi_shared_fence(b);
        mpi_watch_leave();
        return;
    }
    MT_DIE("mpi node_fence: %p is not a node buffer of the %s communicator", p, c->name);
}

/* recv[r*count ..] = rank r's send, read from its segment; the closing fence keeps every rank
 * from rewriting its send before the others have read it. */
static void mpi_shared_allgather(const mpi_shared_block *b, size_t offset, void *recv, int size,
                                 size_t bytes) {
    mpi_shared_fence(b);
    for (int r = 0; r < size; r++)
        memcpy((char *)recv + (size_t)r * bytes, b->peer[r] + offset, bytes);
    mpi_shared_fence(b);
}

/* recv = the sum over ranks, in rank order, of their send's part `rank`: the same additions on
 * every rank, whoever owns the part; add: recv += that sum instead (the sum formed first, in
 * blocks that stay in cache, so the bits are those of the sum and then the add). */
#define MPI_SUM_BLOCK 2048
static void mpi_shared_reduce_scatter(const mpi_shared_block *b, size_t offset, float *recv,
                                      int rank, int size, int64_t count, bool add) {
    mpi_shared_fence(b);
    const size_t part = offset + sizeof(float) * (size_t)(rank * count);
    const float *first = (const float *)(b->peer[0] + part);
    const float *second = (const float *)(b->peer[1] + part);
#pragma omp parallel for schedule(static) if (count > (1 << 16))
    for (int64_t i0 = 0; i0 < count; i0 += MPI_SUM_BLOCK) {
        const int64_t n = count - i0 < MPI_SUM_BLOCK ? count - i0 : MPI_SUM_BLOCK;
        float sum[MPI_SUM_BLOCK];
#pragma omp simd
        for (int64_t i = 0; i < n; i++) sum[i] = first[i0 + i] + second[i0 + i];
        for (int r = 2; r < size; r++) {
            const float *next = (const float *)(b->peer[r] + part) + i0;
#pragma omp simd
            for (int64_t i = 0; i < n; i++) sum[i] += next[i];
        }
        float *out = recv + i0;
        if (add) {
#pragma omp simd
            for (int64_t i = 0; i < n; i++) out[i] += sum[i];
        } else {
            memcpy(out, sum, sizeof(float) * (size_t)n);
        }
    }
    mpi_shared_fence(b);
}

/* ---- collectives ---- */

static void mpi_allgather(mt_comm *c, const void *send, void *recv, int64_t count, size_t elem) {
    MT_CHECK(elem == 4 || elem == 2, "mpi allgather: elements of %zu bytes (4 or 2)", elem);
    MPI_Datatype type = elem == 4 ? MPI_FLOAT : MPI_UINT16_T;
    mpi_bytes[MT_COMM_BYTES_GATHER] += (int64_t)(c->size - 1) * count * (int64_t)elem;
    mpi_watch_enter("an all-gather of %lld elements per rank", count);
    size_t offset, bytes = (size_t)count * elem;
    const mpi_shared_block *shared = mpi_shared_find(c, send, bytes, &offset);
    if (shared) {
        mpi_bytes_shared += (int64_t)(c->size - 1) * count * (int64_t)elem;
        mpi_shared_allgather(shared, offset, recv, c->size, bytes);
        mpi_watch_leave();
        return;
    }
    if (count <= MPI_CHUNK) {
        MPI_CHECK(MPI_Allgather(send, (int)count, type, recv, (int)count, type, mpi_of(c)));
        mpi_watch_leave();
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
            MPI_CHECK(MPI_Bcast(dst, n, type, r, mpi_of(c)));
        }
    }
    mpi_watch_leave();
}

/* add (only where send lies in a shared window): recv += the sum instead of recv = the sum. */
static void mpi_reduce_scatter_into(mt_comm *c, const float *send, float *recv, int64_t count,
                                    bool add) {
    mpi_bytes[MT_COMM_BYTES_REDUCE] += (int64_t)(c->size - 1) * count * (int64_t)sizeof(float);
    mpi_watch_enter("a reduce-scatter of %lld elements per rank", count);
    size_t offset;
    const mpi_shared_block *shared =
        mpi_shared_find(c, send, sizeof(float) * (size_t)(count * c->size), &offset);
    if (shared) {
        mpi_bytes_shared += (int64_t)(c->size - 1) * count * (int64_t)sizeof(float);
        mpi_shared_reduce_scatter(shared, offset, recv, c->rank, c->size, count, add);
        mpi_watch_leave();
        return;
    }
    MT_CHECK(!add, "mpi reduce-scatter: an add outside a shared window");
    if (count <= MPI_CHUNK) {
        MPI_CHECK(MPI_Reduce_scatter_block(send, recv, (int)count, MPI_FLOAT, MPI_SUM, mpi_of(c)));
        mpi_watch_leave();
        return;
    }
    for (int64_t off = 0; off < count; off += MPI_CHUNK) {
        int n = (int)(count - off < MPI_CHUNK ? count - off : MPI_CHUNK);
        for (int r = 0; r < c->size; r++)
            MPI_CHECK(MPI_Reduce(send + (int64_t)r * count + off, r == c->rank ? recv + off : NULL,
                                 n, MPI_FLOAT, MPI_SUM, r, mpi_of(c)));
    }
    mpi_watch_leave();
}

static void mpi_reduce_scatter(mt_comm *c, const float *send, float *recv, int64_t count) {
    mpi_reduce_scatter_into(c, send, recv, count, false);
}

static bool mpi_reduce_scatter_add(mt_comm *c, const float *send, float *acc, int64_t count) {
    size_t offset;
    if (!mpi_shared_find(c, send, sizeof(float) * (size_t)(count * c->size), &offset)) return false;
    mpi_reduce_scatter_into(c, send, acc, count, true);
    return true;
}

/* Host buffers: a started all-gather is a finished one. */
static int mpi_allgather_start(mt_comm *c, const void *send, void *recv, int64_t count,
                               size_t elem) {
    mpi_allgather(c, send, recv, count, elem);
    return 0;
}
static void mpi_wait(mt_comm *c, int ticket) { (void)c, (void)ticket; }

static void mpi_allreduce_f64(mt_comm *c, double *buf, int n) {
    mpi_bytes[MT_COMM_BYTES_SMALL] += (int64_t)n * 8 * (c->size > 1);
    mpi_watch_enter("an all-reduce of %lld elements", n);
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_DOUBLE, MPI_SUM, mpi_of(c)));
    mpi_watch_leave();
}

static void mpi_allreduce_i64(mt_comm *c, int64_t *buf, int n) {
    mpi_bytes[MT_COMM_BYTES_SMALL] += (int64_t)n * 8 * (c->size > 1);
    mpi_watch_enter("an all-reduce of %lld elements", n);
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_INT64_T, MPI_SUM, mpi_of(c)));
    mpi_watch_leave();
}

static void mpi_bcast(mt_comm *c, void *buf, size_t bytes, int root) {
    if (c->rank == root) mpi_bytes[MT_COMM_BYTES_SMALL] += (int64_t)bytes * (c->size > 1);
    mpi_watch_enter("a broadcast of %lld bytes", (int64_t)bytes);
    for (size_t off = 0; off < bytes; off += (size_t)INT_MAX) {
        size_t n = bytes - off < (size_t)INT_MAX ? bytes - off : (size_t)INT_MAX;
        MPI_CHECK(MPI_Bcast((char *)buf + off, (int)n, MPI_BYTE, root, mpi_of(c)));
    }
    mpi_watch_leave();
}

static void mpi_barrier(mt_comm *c) {
    mpi_watch_enter("a barrier", 0);
    MPI_CHECK(MPI_Barrier(mpi_of(c)));
    mpi_watch_leave();
}

/* MPI 3.1 takes int counts and displacements: an exchange whose counts or offsets pass INT_MAX
 * elements is refused (an expert exchange that large means a micro-batch far beyond any plan). */
static void mpi_alltoallv_ints(const mt_comm *c, const int64_t *counts, int *n, int *displ,
                               const char *side) {
    int64_t off = 0;
    for (int r = 0; r < c->size; r++) {
        MT_CHECK(counts[r] >= 0 && counts[r] <= INT_MAX && off <= INT_MAX,
                 "mpi alltoallv: %s count %lld for rank %d at offset %lld passes MPI's int limit",
                 side, (long long)counts[r], r, (long long)off);
        n[r] = (int)counts[r];
        displ[r] = (int)off;
        off += counts[r];
    }
}

static void mpi_alltoallv(mt_comm *c, const void *send, const int64_t *send_counts, void *recv,
                          const int64_t *recv_counts, size_t elem) {
    MPI_Datatype type = elem == 8   ? MPI_INT64_T
                        : elem == 4 ? MPI_FLOAT
                        : elem == 2 ? MPI_UINT16_T
                        : elem == 1 ? MPI_BYTE
                                    : MPI_DATATYPE_NULL;
    MT_CHECK(type != MPI_DATATYPE_NULL, "mpi alltoallv: elements of %zu bytes (1, 2, 4 or 8)",
             elem);
    int *ints = malloc(sizeof(int) * 4 * (size_t)c->size);
    MT_CHECK(ints, "mpi alltoallv: out of memory for %d ranks' counts", c->size);
    int *sn = ints, *sd = ints + c->size, *rn = ints + 2 * c->size, *rd = ints + 3 * c->size;
    mpi_alltoallv_ints(c, send_counts, sn, sd, "send");
    mpi_alltoallv_ints(c, recv_counts, rn, rd, "receive");
    int64_t total = 0;
    for (int r = 0; r < c->size; r++) total += send_counts[r];
    mpi_bytes[MT_COMM_BYTES_ALLTOALL] += (total - send_counts[c->rank]) * (int64_t)elem;
    mpi_watch_enter("an all-to-all sending %lld elements", total);
    MPI_CHECK(MPI_Alltoallv(send, sn, sd, type, recv, rn, rd, type, mpi_of(c)));
    mpi_watch_leave();
    free(ints);
}

static void mpi_set_ops(mt_comm *c);

static mt_comm *mpi_split(mt_comm *c, int color, int key) {
    mt_comm *s = calloc(1, sizeof(*s));
    MPI_Comm *sub = malloc(sizeof(*sub));
    MT_CHECK(s && sub, "mpi split: out of memory");
    mpi_watch_enter("a communicator split (%lld)", color);
    MPI_CHECK(MPI_Comm_split(mpi_of(c), color, key, sub));
    mpi_watch_leave();
    MPI_Comm_set_errhandler(*sub, MPI_ERRORS_RETURN);
    s->name = "mpi-split";
    s->impl = sub;
    MPI_CHECK(MPI_Comm_rank(*sub, &s->rank));
    MPI_CHECK(MPI_Comm_size(*sub, &s->size));
    mpi_set_ops(s);
    return s;
}

static void mpi_free_split(mt_comm *c) {
    if (!c || c == &mpi_comm) return;
    MPI_Comm *sub = c->impl;
    MPI_Comm_free(sub);
    free(sub);
    free(c);
}

static void mpi_abort(mt_comm *c, int exit_code) {
    (void)c;
    MPI_Abort(MPI_COMM_WORLD, exit_code);
    exit(exit_code);
}

static void mpi_abort_hook(int exit_code) { mpi_abort(&mpi_comm, exit_code); }

/* The same collectives for the world and its splits; abort always ends the whole job. */
static void mpi_set_ops(mt_comm *c) {
    c->allgather = mpi_allgather;
    c->reduce_scatter = mpi_reduce_scatter;
    c->reduce_scatter_add = mpi_reduce_scatter_add;
    c->allreduce_f64 = mpi_allreduce_f64;
    c->allreduce_i64 = mpi_allreduce_i64;
    c->bcast = mpi_bcast;
    c->barrier = mpi_barrier;
    c->abort = mpi_abort;
    c->allgather_start = mpi_allgather_start;
    c->wait = mpi_wait;
    c->alltoallv = mpi_alltoallv;
    c->split = mpi_split;
    c->free_split = mpi_free_split;
    c->alloc_shared = mpi_alloc_shared;
    c->free_shared = mpi_free_shared;
    c->alloc_node = mpi_alloc_node;
    c->node_fence = mpi_node_fence;
}

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
    mpi_chunk = mt_env_int("MT_MPI_CHUNK", 1, mpi_chunk, mpi_chunk);
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &mpi_comm.rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &mpi_comm.size));
    mpi_comm.impl = &mpi_world;
    mpi_set_ops(&mpi_comm);
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
void mt_comm_nccl_watch(mt_comm *c, double timeout_s, const char *label) {
    (void)c, (void)timeout_s, (void)label;
}
#endif

void mt_comm_finalize(mt_comm *c) {
    (void)c;
    mpi_bytes_write();
    mpi_watch_stop();
    mt_error_set_abort_hook(NULL);
    MPI_Finalize();
}
