/* dist_comm.c: the MPI communicator on real ranks: each collective against the value every
 * rank can compute by itself, including the chunked path for counts above one MPI call. */
#include "tests/support/harness.h"

#include <stdlib.h>
#include <string.h>

#include "train/comm.h"

static float value_of(int rank, int64_t i) { return (float)(rank * 1000 + (i % 997)) * 0.5f; }

/* What rank `from` sends rank `to` (ragged, zero for some pairs) and the value of element i. */
static int64_t a2a_count(int from, int to) { return (from * 3 + to * 5) % 4 * 3; }
static int32_t a2a_value(int from, int to, int64_t i) { return from * 100000 + to * 1000 + (int)i; }

/* alltoallv on c: every rank's rows arrive in rank order, the zero-count pairs included. */
static int check_alltoallv(mt_comm *c) {
    const int P = c->size, r = c->rank;
    int64_t scount[64] = {0}, rcount[64] = {0}, stotal = 0, rtotal = 0;
    EXPECT(P <= 64, "alltoallv check: at most 64 ranks (got %d)", P);
    for (int q = 0; q < P; q++) {
        scount[q] = a2a_count(r, q);
        rcount[q] = a2a_count(q, r);
        stotal += scount[q];
        rtotal += rcount[q];
    }
    int32_t *send = calloc((size_t)stotal + 1, sizeof(int32_t)),
            *recv = calloc((size_t)rtotal + 1, sizeof(int32_t));
    for (int q = 0, at = 0; q < P; q++)
        for (int64_t i = 0; i < scount[q]; i++) send[at++] = a2a_value(r, q, i);
    c->alltoallv(c, send, scount, recv, rcount, sizeof(int32_t));
    int bad = 0;
    for (int q = 0, at = 0; q < P; q++)
        for (int64_t i = 0; i < rcount[q]; i++) bad += recv[at++] != a2a_value(q, r, i);
    free(send);
    free(recv);
    EXPECT(bad == 0, "alltoallv over %d ranks: %d wrong elements of %lld", P, bad,
           (long long)rtotal);
    return MT_TEST_OK;
}

static int test_comm_collectives(void) {
    int argc = 0;
    char **argv = NULL;
    mt_comm *c = mt_comm_mpi_init(&argc, &argv);
    int P = c->size, r = c->rank;
    EXPECT(P >= 2, "run me with at least 2 ranks (got %d)", P);
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) { /* the chunked path: MT_MPI_CHUNK is read at init */
            setenv("MT_MPI_CHUNK", "7", 1);
            c = mt_comm_mpi_init(&argc, &argv);
        }
        int64_t count = 1000 + 3;
        float *send = malloc(sizeof(float) * count * P), *recv = malloc(sizeof(float) * count * P);
        for (int64_t i = 0; i < count; i++) send[i] = value_of(r, i);
        c->allgather(c, send, recv, count, sizeof(float));
        int bad = 0;
        for (int q = 0; q < P; q++)
            for (int64_t i = 0; i < count; i++) bad += recv[q * count + i] != value_of(q, i);
        EXPECT(bad == 0, "allgather: %d wrong elements", bad);
        /* 16-bit elements (the bf16 parameter gathers): bit patterns move unchanged */
        uint16_t *s16 = malloc(sizeof(uint16_t) * count),
                 *r16 = malloc(sizeof(uint16_t) * count * P);
        for (int64_t i = 0; i < count; i++) s16[i] = (uint16_t)(r * 7919 + i * 31);
        c->allgather(c, s16, r16, count, sizeof(uint16_t));
        bad = 0;
        for (int q = 0; q < P; q++)
            for (int64_t i = 0; i < count; i++)
                bad += r16[q * count + i] != (uint16_t)(q * 7919 + i * 31);
        EXPECT(bad == 0, "allgather of 16-bit elements: %d wrong", bad);
        free(s16);
        free(r16);

        for (int64_t i = 0; i < count * P; i++) send[i] = value_of(r, i);
        c->reduce_scatter(c, send, recv, count);
        bad = 0;
        for (int64_t i = 0; i < count; i++) {
            double want = 0; /* small integers/2: exact in fp32 for any summation order */
            for (int q = 0; q < P; q++) want += value_of(q, r * count + i);
            bad += recv[i] != (float)want;
        }
        EXPECT(bad == 0, "reduce_scatter: %d wrong elements", bad);
        free(send);
        free(recv);
    }
    double d[2] = {r + 0.5, 1.0};
    c->allreduce_f64(c, d, 2);
    EXPECT(d[0] == P * (P - 1) / 2.0 + 0.5 * P && d[1] == P, "allreduce_f64 %g %g", d[0], d[1]);
    int64_t k = (int64_t)1 << 40;
    c->allreduce_i64(c, &k, 1);
    EXPECT(k == ((int64_t)P << 40), "allreduce_i64");
    char msg[32] = "";
    if (r == P - 1) snprintf(msg, sizeof(msg), "hi %d", r);
    c->bcast(c, msg, sizeof(msg), P - 1);
    char want[32];
    snprintf(want, sizeof(want), "hi %d", P - 1);
    EXPECT(!strcmp(msg, want), "bcast got '%s'", msg);
    EXPECT(check_alltoallv(c) == MT_TEST_OK, "alltoallv on the world");
    /* a split: even and odd ranks, each group ordered backwards (key -r) */
    mt_comm *g = c->split(c, r % 2, -r);
    const int gsize = (P - r % 2 + 1) / 2;
    EXPECT(g->size == gsize && g->rank == gsize - 1 - r / 2, "split: rank %d of %d, want %d of %d",
           g->rank, g->size, gsize - 1 - r / 2, gsize);
    int64_t members = (int64_t)1 << r;
    g->allreduce_i64(g, &members, 1);
    int64_t want_members = 0;
    for (int q = r % 2; q < P; q += 2) want_members += (int64_t)1 << q;
    EXPECT(members == want_members, "split: the group sums ranks %llx, want %llx",
           (long long)members, (long long)want_members);
    EXPECT(check_alltoallv(g) == MT_TEST_OK, "alltoallv on the split");
    c->free_split(g);
    mt_comm_finalize(c);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"dist_comm_np2", test_comm_collectives},
    {"dist_comm_np3", test_comm_collectives},
};
MT_TEST_MAIN(cases)
