/* dist_nccl.c: the NCCL communicator (train/comm_nccl.cu) on device buffers. Every rank fills
 * its input with small integers (exact in fp32, so sums are exact in any order) that name the
 * rank and the position, and checks each result against the value it computes by itself.
 *
 * Cases:
 *   gpu_nccl_np1        one rank over the self communicator (no MPI launcher needed): a real GPU
 *                       when the CUDA backend is built and finds one, else skipped (77);
 *   nccl_mpi            over MPI ranks (mpiexec -n 1, 2, 3), on the emulator
 *                       (tests/gpu/nccl.cmake);
 *   nccl_abort          rank 1 dies mid-run: the job must end, non-zero, not hang;
 *   nccl_watchdog       collectives in a loop under an emulated fault (MT_EMU_NCCL_STALL: a
 *                       rank hangs in one; MT_EMU_NCCL_ASYNC_ERROR: NCCL reports a lost peer):
 *                       the watchdog must end the job (timeout 2 s);
 *   nccl_watchdog_a2a   the same with all-to-alls (a rank hangs in one);
 *   nccl_shared_device  two ranks on one device are refused (MT_NCCL_ALLOW_SHARED_DEVICE=0).
 * nccl_mpi and gpu_nccl_np1 also check alltoallv (ragged counts with zeros, fp32 and bf16 bits,
 * against the value each sender wrote and, over MPI, byte for byte against the MPI
 * communicator's alltoallv) and split (two groups by parity in reversed order, their
 * collectives between the world's).
 * Buffers come from the backend (cudaMalloc, cudaMemcpy on the compute stream) and start as
 * NaN bytes, so an element a collective fails to write is caught. */
#include "tests/support/harness.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/cpu/bf16.h"
#include "train/comm.h"
#include "train/zero.h"

static const mt_backend *be;

/* a small integer for (rank, position): distinct per rank for every position */
static float value_of(int rank, int64_t i) {
    return (float)((i * 31 + (int64_t)rank * 977) % 8191 - 4095);
}

static float *dev_alloc(int64_t n) {
    size_t bytes = sizeof(float) * (size_t)(n ? n : 1);
    float *d = be->alloc(bytes);
    void *poison = mt_malloc(bytes, "poison");
    memset(poison, 0xff, bytes);
    be->to_device(d, poison, bytes);
    free(poison);
    return d;
}

static float *host_copy(const float *d, int64_t n) {
    float *h = mt_malloc(sizeof(float) * (size_t)(n ? n : 1), "download");
    be->to_host(h, d, sizeof(float) * (size_t)n);
    return h;
}

/* send (count floats) = value_of(rank, off + i) on the device */
static float *dev_values(int rank, int64_t off, int64_t count) {
    float *h = mt_malloc(sizeof(float) * (size_t)(count ? count : 1), "values");
    for (int64_t i = 0; i < count; i++) h[i] = value_of(rank, off + i);
    float *d = dev_alloc(count);
    be->to_device(d, h, sizeof(float) * (size_t)count);
    free(h);
    return d;
}

/* recv holds value_of(q, i) * scale at q*count + i for every rank q */
static int64_t gather_misses(const float *recv_dev, int P, int64_t count, float scale) {
    float *h = host_copy(recv_dev, (int64_t)P * count);
    int64_t bad = 0;
    for (int q = 0; q < P; q++)
        for (int64_t i = 0; i < count; i++) bad += h[q * count + i] != value_of(q, i) * scale;
    free(h);
    return bad;
}

/* recv holds sum over q of value_of(q, rank*count + i) */
static int64_t scatter_misses(const float *recv_dev, int P, int rank, int64_t count) {
    float *h = host_copy(recv_dev, count);
    int64_t bad = 0;
    for (int64_t i = 0; i < count; i++) {
        double want = 0;
        for (int q = 0; q < P; q++) want += value_of(q, (int64_t)rank * count + i);
        bad += h[i] != (float)want;
    }
    free(h);
    return bad;
}

static void check_allgather(mt_comm *c, int64_t count) {
    int P = c->size, r = c->rank;
    float *send = dev_values(r, 0, count), *recv = dev_alloc((int64_t)P * count);
    /* kernels on the compute stream before and after (x += x doubles x exactly): the collective
     * must sit between them */
    bool kernels = be->vec_add != NULL;
    if (kernels) be->vec_add(send, send, count);
    c->allgather(c, send, recv, count, sizeof(float));
    if (kernels) be->vec_add(recv, recv, (int64_t)P * count);
    int64_t bad = gather_misses(recv, P, count, kernels ? 4.0f : 1.0f);
    EXPECT(bad == 0, "allgather count %lld: %lld wrong elements", (long long)count, (long long)bad);
    if (kernels && be->vec_to_bf16) {
        /* 16-bit words, the bf16 parameter gathers: round on the device, gather, expand */
        uint16_t *s16 = be->alloc(sizeof(uint16_t) * (size_t)(count + 1));
        uint16_t *r16 = be->alloc(sizeof(uint16_t) * (size_t)((int64_t)P * count + 1));
        be->vec_to_bf16(s16, send, count); /* send holds 2 value_of(r, i) */
        c->allgather(c, s16, r16, count, sizeof(uint16_t));
        be->vec_from_bf16(recv, r16, (int64_t)P * count);
        float *h = host_copy(recv, (int64_t)P * count);
        bad = 0;
        for (int q = 0; q < P; q++)
            for (int64_t i = 0; i < count; i++)
                bad += h[q * count + i] != mt_bf16_round(2.0f * value_of(q, i));
        EXPECT(bad == 0, "bf16 allgather count %lld: %lld wrong elements", (long long)count,
               (long long)bad);
        free(h);
        be->free(s16);
        be->free(r16);
    }
    be->free(send);
    be->free(recv);
}

static void check_reduce_scatter(mt_comm *c, int64_t count) {
    int P = c->size, r = c->rank;
    float *send = dev_values(r, 0, (int64_t)P * count), *recv = dev_alloc(count);
    c->reduce_scatter(c, send, recv, count);
    int64_t bad = scatter_misses(recv, P, r, count);
    EXPECT(bad == 0, "reduce_scatter count %lld: %lld wrong elements", (long long)count,
           (long long)bad);
    be->free(send);
    be->free(recv);
}

/* NCCL's in-place layouts: send is this rank's slice of recv (all-gather), recv is this rank's
 * slice of send (reduce-scatter). */
static void check_in_place(mt_comm *c, int64_t count) {
    int P = c->size, r = c->rank;
    float *buf = dev_alloc((int64_t)P * count);
    float *h = mt_malloc(sizeof(float) * (size_t)count, "values");
    for (int64_t i = 0; i < count; i++) h[i] = value_of(r, i);
    be->to_device(buf + (int64_t)r * count, h, sizeof(float) * (size_t)count);
    c->allgather(c, buf + (int64_t)r * count, buf, count, sizeof(float));
    int64_t bad = gather_misses(buf, P, count, 1.0f);
    EXPECT(bad == 0, "in-place allgather: %lld wrong elements", (long long)bad);
    be->free(buf);
    free(h);

    float *sbuf = dev_values(r, 0, (int64_t)P * count);
    c->reduce_scatter(c, sbuf, sbuf + (int64_t)r * count, count);
    bad = scatter_misses(sbuf + (int64_t)r * count, P, r, count);
    EXPECT(bad == 0, "in-place reduce_scatter: %lld wrong elements", (long long)bad);
    be->free(sbuf);
}

/* Several all-gathers outstanding at once, waited for in another order than started. */
static void check_tickets(mt_comm *c) {
    enum { K = 5 };
    const int64_t counts[K] = {3, 0, 1, 100003, 17};
    int P = c->size, r = c->rank;
    float *send[K], *recv[K];
    int ticket[K];
    for (int k = 0; k < K; k++) {
        send[k] = dev_values(r, 0, counts[k]);
        recv[k] = dev_alloc((int64_t)P * counts[k]);
        ticket[k] = c->allgather_start(c, send[k], recv[k], counts[k], sizeof(float));
        for (int j = 0; j < k; j++) EXPECT(ticket[j] != ticket[k], "tickets %d and %d equal", j, k);
    }
#ifdef MT_CUDA_EMU
    /* the emulator runs a started all-gather no earlier than a wait: reading before it gives
     * stale data there (a race on a GPU, so checked only here) */
    EXPECT(gather_misses(recv[3], P, counts[3], 1.0f) == (int64_t)P * counts[3],
           "all-gather visible before its wait");
#endif
    const int order[K] = {3, 0, 4, 2, 1};
    for (int j = 0; j < K; j++) {
        int k = order[j];
        c->wait(c, ticket[k]);
        int64_t bad = gather_misses(recv[k], P, counts[k], 1.0f);
        EXPECT(bad == 0, "allgather_start #%d (count %lld): %lld wrong elements", k,
               (long long)counts[k], (long long)bad);
    }
    for (int k = 0; k < K; k++) {
        be->free(send[k]);
        be->free(recv[k]);
    }
    /* more start/wait pairs than ticket slots: slots are reused */
    float *s1 = dev_values(r, 0, 5), *r1 = dev_alloc((int64_t)P * 5);
    int64_t bad = 0;
    for (int it = 0; it < 150; it++) {
        int t = c->allgather_start(c, s1, r1, 5, sizeof(float));
        c->wait(c, t);
        if (it % 50 == 49) bad += gather_misses(r1, P, 5, 1.0f);
    }
    EXPECT(bad == 0, "ticket reuse: %lld wrong elements", (long long)bad);
    be->free(s1);
    be->free(r1);
}

static void check_host_side(mt_comm *c);

/* Rows rank r sends rank q in round k: ragged, with zeros (a rank that sends some peers
 * nothing, and in round 0 nothing at all from rank 0), the shapes of expert dispatch. */
static int64_t a2a_count(int r, int q, int k) {
    if ((k == 0 && r == 0) || (r + 2 * q + k) % 3 == 0) return 0;
    return (r * 7 + q * 3 + k * 5) % 11 + (k == 2 ? 40000 : 0);
}

/* the k-th element rank r sends rank q (small integers: exact in fp32 and bf16) */
static float a2a_value(int r, int q, int64_t i) { return value_of(r, q * 100003 + i) / 16.0f; }

/* One round of alltoallv with elements of elem bytes (4: fp32, 2: their bf16 bits) on the
 * device, kernels before and after (x += x): each received element against the value its sender
 * wrote, and the bytes against the host communicator's alltoallv of the same rows (MPI), which
 * every rank of `host` calls with the same counts. */
static void check_alltoallv_round(mt_comm *c, mt_comm *host, int k, size_t elem) {
    const int P = c->size, r = c->rank;
    int64_t sc[64], rc[64], ns = 0, nr = 0;
    EXPECT(P <= 64, "%d ranks", P);
    for (int q = 0; q < P; q++) {
        sc[q] = a2a_count(r, q, k);
        rc[q] = a2a_count(q, r, k);
        ns += sc[q];
        nr += rc[q];
    }
    float *hs = mt_malloc(sizeof(float) * (size_t)(ns + 1), "a2a send");
    for (int q = 0, o = 0; q < P; q++)
        for (int64_t i = 0; i < sc[q]; i++) hs[o++] = a2a_value(r, q, i);
    void *ds = be->alloc(sizeof(float) * (size_t)(ns + 1));
    void *dr = dev_alloc(nr);
    be->to_device(ds, hs, sizeof(float) * (size_t)ns);
    const bool kernels = be->vec_add != NULL && elem == 4;
    if (kernels) be->vec_add(ds, ds, ns);
    uint16_t *hs16 = NULL;
    if (elem == 2) { /* the fp32 rows as bf16 bits (exact: the values fit bf16) */
        hs16 = mt_malloc(sizeof(uint16_t) * (size_t)(ns + 1), "a2a send16");
        for (int64_t i = 0; i < ns; i++) hs16[i] = mt_bf16_bits(hs[i]);
        be->to_device(ds, hs16, sizeof(uint16_t) * (size_t)ns);
    }
    c->alltoallv(c, ds, sc, dr, rc, elem);
    if (kernels) be->vec_add(dr, dr, nr);
    unsigned char *got = mt_malloc(elem * (size_t)(nr + 1), "a2a got");
    be->to_host(got, dr, elem * (size_t)nr);
    int64_t bad = 0;
    for (int q = 0, o = 0; q < P; q++)
        for (int64_t i = 0; i < rc[q]; i++, o++) {
            const float want = a2a_value(q, r, i) * (kernels ? 4.0f : 1.0f);
            if (elem == 4) {
                float v;
                memcpy(&v, got + 4 * o, 4);
                bad += v != want;
            } else {
                uint16_t v;
                memcpy(&v, got + 2 * o, 2);
                bad += v != mt_bf16_bits(want);
            }
        }
    EXPECT(bad == 0, "alltoallv round %d (%zu-byte elements, %d ranks): %lld of %lld wrong", k,
           elem, P, (long long)bad, (long long)nr);
    if (host && host->alltoallv && !kernels) { /* MPI on the same host rows: the same bytes */
        unsigned char *ref = mt_malloc(elem * (size_t)(nr + 1), "a2a ref");
        host->alltoallv(host, elem == 4 ? (const void *)hs : (const void *)hs16, sc, ref, rc, elem);
        EXPECT(memcmp(ref, got, elem * (size_t)nr) == 0,
               "alltoallv round %d: the NCCL bytes differ from MPI's", k);
        free(ref);
    }
    free(hs);
    free(hs16);
    free(got);
    be->free(ds);
    be->free(dr);
}

static void check_alltoallv(mt_comm *c, mt_comm *host) {
    EXPECT(c->alltoallv != NULL, "%s has no alltoallv", c->name);
    for (int k = 0; k < 3; k++) {
        check_alltoallv_round(c, host, k, 4);
        check_alltoallv_round(c, host, k, 2);
    }
    /* every count zero: still called by every rank, nothing moves */
    int64_t zero[64] = {0};
    c->alltoallv(c, NULL, zero, NULL, zero, 4);
}

/* Two groups, ranks of equal parity, each ordered by descending world rank (key = -rank): the
 * split's rank and size, its collectives (on its own stream, between the world's), and the
 * host communicator split alongside. */
static void check_split(mt_comm *c, mt_comm *host) {
    const int P = c->size, r = c->rank, color = r % 2;
    mt_comm *s = c->split(c, color, -r);
    int size = 0, rank = 0;
    for (int q = 0; q < P; q++)
        if (q % 2 == color) {
            size++;
            rank += q > r;
        }
    EXPECT(s->size == size && s->rank == rank, "split: rank %d of %d, want %d of %d", s->rank,
           s->size, rank, size);
    EXPECT(s->device, "a split of a device communicator works on device buffers");
    mt_comm *hs = host && host->split ? host->split(host, color, -r) : NULL;
    check_allgather(s, 4099);
    check_alltoallv(s, hs);
    check_allgather(c, 7); /* the world's between the split's */
    check_reduce_scatter(s, 1001);
    check_host_side(s);
    if (hs) host->free_split(hs);
    c->free_split(s);
}

static void check_host_side(mt_comm *c) {
    int P = c->size, r = c->rank;
    int64_t k[2] = {r, 1};
    c->allreduce_i64(c, k, 2);
    EXPECT(k[0] == (int64_t)P * (P - 1) / 2 && k[1] == P, "allreduce_i64 %lld %lld",
           (long long)k[0], (long long)k[1]);
    double d = r + 0.25;
    c->allreduce_f64(c, &d, 1);
    EXPECT(d == P * (P - 1) / 2.0 + 0.25 * P, "allreduce_f64 %g", d);
    int v = r == P - 1 ? 4242 : -1;
    c->bcast(c, &v, sizeof(v), P - 1);
    EXPECT(v == 4242, "bcast got %d", v);
    c->barrier(c);
}

static void check_all(mt_comm *c) {
    EXPECT(c->device, "the NCCL communicator works on device buffers");
    EXPECT(!strcmp(c->name, "nccl"), "name %s", c->name);
    const int64_t sizes[] = {0, 1, 7, 4099, ((int64_t)3 << 20) + 5};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        check_allgather(c, sizes[i]);
        check_reduce_scatter(c, sizes[i]);
    }
    check_in_place(c, 1001);
    check_tickets(c);
    check_host_side(c);
}

/* alltoallv and split, with the host communicator the NCCL one was built on (MPI: its
 * alltoallv is the reference for the bytes; self: none) */
static void check_ep(mt_comm *c, mt_comm *host) {
    check_alltoallv(c, host);
    check_split(c, host);
}

static int test_np1_self(void) {
    be = mt_backend_cuda();
    if (!be) return MT_TEST_SKIP; /* not built with CUDA, or no device */
    mt_comm *c = mt_comm_nccl_init(mt_comm_self(), 60);
    if (!c) return MT_TEST_SKIP;
    EXPECT(c->size == 1 && c->rank == 0, "rank %d of %d", c->rank, c->size);
    check_all(c);
    check_ep(c, NULL);
    mt_comm_nccl_free(c);
    return MT_TEST_OK;
}

/* The emulator's ranks (a real multi-GPU run would start the same way: nccl init before the
 * backend probe, since the init selects the device). */
static mt_comm *init_mpi(mt_comm **host, double timeout_s) {
    int argc = 0;
    char **argv = NULL;
    *host = mt_comm_mpi_init(&argc, &argv);
    mt_comm *c = mt_comm_nccl_init(*host, timeout_s);
    if (c) be = mt_backend_cuda();
    return be ? c : NULL;
}

static int test_mpi(void) {
    mt_comm *host;
    mt_comm *c = init_mpi(&host, 60);
    if (!c) return MT_TEST_SKIP;
    EXPECT(c->size == host->size && c->rank == host->rank, "rank %d of %d", c->rank, c->size);
    check_all(c);
    check_ep(c, host);
    mt_comm_nccl_free(c);
    /* the host communicator outlives it and still works */
    check_host_side(host);
    mt_comm_finalize(host);
    return MT_TEST_OK;
}

/* Rank 1 dies with an all-gather outstanding and a split live while the others enter the next
 * collective: the error hook must abort NCCL (the world's communicator and the split) and the
 * MPI job (tests/gpu/nccl.cmake checks the exit and the time). */
static int test_abort(void) {
    mt_comm *host;
    mt_comm *c = init_mpi(&host, 60);
    if (!c) return MT_TEST_SKIP;
    EXPECT(c->size >= 2, "run me with at least 2 ranks");
    check_allgather(c, 1000);
    mt_comm *whole = c->split(c, 0, c->rank); /* a live split: the hook aborts it too */
    check_allgather(whole, 100);
    float *send = dev_values(c->rank, 0, 10), *recv = dev_alloc((int64_t)c->size * 10);
    int t = c->allgather_start(c, send, recv, 10, sizeof(float));
    if (c->rank == 1) MT_DIE("deliberate failure on rank 1 (nccl_abort test)");
    c->wait(c, t);
    check_allgather(c, 1000);
    c->barrier(c);
    printf("rank %d: got past the collective that rank 1 never joined\n", c->rank);
    return 1;
}

/* Collectives in a loop for up to 30 s under the fault the environment sets up: the watchdog
 * must end the job first (tests/gpu/nccl.cmake checks the exit, the message and the time). The
 * limit of 2 s is set after the start, as the trainer's automatic dist.timeout sets it. */
static int test_watchdog(void) {
    mt_comm *host;
    mt_comm *c = init_mpi(&host, 1800);
    if (!c) return MT_TEST_SKIP;
    mt_comm_nccl_watch(c, 2, "dist.timeout automatic: 2 s in this test");
    EXPECT(c->size >= 2, "run me with at least 2 ranks");
    const time_t t0 = time(NULL);
    while (time(NULL) - t0 < 30) {
        check_allgather(c, 1000);
        check_reduce_scatter(c, 1000);
    }
    printf("rank %d: 30 s of collectives and the watchdog never fired\n", c->rank);
    return 1;
}

/* The same for the all-to-all (MT_EMU_NCCL_STALL on rank 1's 3rd one). */
static int test_watchdog_a2a(void) {
    mt_comm *host;
    mt_comm *c = init_mpi(&host, 1800);
    if (!c) return MT_TEST_SKIP;
    mt_comm_nccl_watch(c, 2, "dist.timeout automatic: 2 s in this test");
    EXPECT(c->size >= 2, "run me with at least 2 ranks");
    const time_t t0 = time(NULL);
    while (time(NULL) - t0 < 30) check_alltoallv_round(c, NULL, 1, 4);
    printf("rank %d: 30 s of all-to-alls and the watchdog never fired\n", c->rank);
    return 1;
}

static int test_shared_device(void) {
    mt_comm *host;
    mt_comm *c = init_mpi(&host, 60);
    (void)c;
    printf("rank %d: two ranks on one device were accepted\n", host->rank);
    return 1;
}

/* The optimizer offload's copy thread on the rank's device (train/zero.c): one rank bound to a
 * device other than 0 (the emulator with MT_CUDA_EMU_DEVICES=2 and OMPI_COMM_WORLD_LOCAL_RANK=1,
 * whose copies refuse memory of another device than the calling thread's: tests/gpu/nccl.cmake),
 * three buckets, so three chunks and the thread fetches and stores some, and one offloaded AdamW
 * step against the CPU backend's: the host runs the same AdamW kernel, so the same bits. */
static int test_offload_device(void) {
    mt_comm *c = mt_comm_nccl_init(mt_comm_self(), 60); /* selects the device first */
    if (!c) return MT_TEST_SKIP;
    be = mt_backend_cuda();
    if (!be) return MT_TEST_SKIP;
    const int64_t numel[3] = {1000, 2001, 517};
    mt_zero zd, zc;
    mt_zero_init_gather(&zd, c, be, 3, numel, MT_F32, true);
    mt_zero_init_gather(&zc, mt_comm_self(), mt_backend_cpu(), 3, numel, MT_F32, false);
    printf("offload on device %d: %d chunks\n", be->thread_device ? be->thread_device() : -1, 3);
    float *h = mt_malloc(sizeof(float) * 2001, "values");
    for (int b = 0; b < 3; b++) {
        for (int64_t i = 0; i < numel[b]; i++) h[i] = value_of(b, i) / 4096.0f;
        mt_zero_set_master(&zd, b, 0, numel[b], h);
        mt_zero_set_master(&zc, b, 0, numel[b], h);
        for (int64_t i = 0; i < numel[b]; i++) h[i] = value_of(b + 1, i) / 512.0f;
        be->to_device(mt_zero_slot_grad(&zd, b), h, sizeof(float) * (size_t)numel[b]);
        memcpy(mt_zero_slot_grad(&zc, b), h, sizeof(float) * (size_t)numel[b]);
    }
    const mt_adamw opt = {
        .lr = 1e-2, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1, .step = 1};
    mt_zero_adamw_step(&zd, &opt);
    mt_zero_adamw_step(&zc, &opt);
    int64_t bad = 0;
    for (int b = 0; b < 3; b++) {
        be->to_host(h, mt_zero_gather_master(&zd, b), sizeof(float) * (size_t)numel[b]);
        bad += memcmp(h, mt_zero_gather_master(&zc, b), sizeof(float) * (size_t)numel[b]) != 0;
    }
    EXPECT(bad == 0, "offloaded AdamW on the device: %lld of 3 buckets differ from the CPU's",
           (long long)bad);
    free(h);
    mt_zero_free(&zd);
    mt_zero_free(&zc);
    mt_comm_nccl_free(c);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"gpu_nccl_np1", test_np1_self},
    {"nccl_offload_device", test_offload_device},
    {"nccl_mpi", test_mpi},
    {"nccl_abort", test_abort},
    {"nccl_watchdog", test_watchdog},
    {"nccl_shared_device", test_shared_device},
    {"nccl_watchdog_a2a", test_watchdog_a2a},
};
MT_TEST_MAIN(cases)
