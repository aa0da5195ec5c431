/* dist_comm_bytes.c: the MPI communicator's byte tally (mt_comm_mpi_bytes, train/comm.h) on 3
 * ranks: an all-gather of 10 fp32 per rank sends 2 x 10 x 4 = 80 bytes per rank; of 6 bf16
 * words 2 x 6 x 2 = 24; a reduce-scatter of 5 floats per rank 2 x 5 x 4 = 40; an alltoallv
 * where rank r sends r + q + 1 fp32 to rank q sends what goes to the two others:
 * sum over q != r of (r + q + 1) x 4 bytes (rank 0: (2 + 3) x 4 = 20; 1: (2 + 4) x 4 = 24;
 * 2: (3 + 4) x 4 = 28); on a split the same rules with the split's size. */
#include "tests/support/harness.h"

#include <string.h>

#include "train/comm.h"

static int test_bytes(void) {
    int argc = 0;
    char **argv = NULL;
    mt_comm *c = mt_comm_mpi_init(&argc, &argv);
    EXPECT(c->size == 3, "run me on 3 ranks");
    const int r = c->rank;
    float send[32] = {0}, recv[96];
    int64_t b[MT_COMM_BYTES_KINDS], b0[MT_COMM_BYTES_KINDS];
    mt_comm_mpi_bytes(b0);
    c->allgather(c, send, recv, 10, 4);
    c->allgather(c, send, recv, 6, 2);
    c->reduce_scatter(c, send, recv, 5);
    int64_t sc[3], rc[3];
    for (int q = 0; q < 3; q++) sc[q] = r + q + 1, rc[q] = q + r + 1;
    c->alltoallv(c, send, sc, recv, rc, 4);
    mt_comm_mpi_bytes(b);
    const int64_t a2a[3] = {20, 24, 28};
    EXPECT(b[MT_COMM_BYTES_GATHER] - b0[MT_COMM_BYTES_GATHER] == 80 + 24, "gather %lld",
           (long long)(b[MT_COMM_BYTES_GATHER] - b0[MT_COMM_BYTES_GATHER]));
    EXPECT(b[MT_COMM_BYTES_REDUCE] - b0[MT_COMM_BYTES_REDUCE] == 40, "reduce %lld",
           (long long)(b[MT_COMM_BYTES_REDUCE] - b0[MT_COMM_BYTES_REDUCE]));
    EXPECT(b[MT_COMM_BYTES_ALLTOALL] - b0[MT_COMM_BYTES_ALLTOALL] == a2a[r], "alltoall %lld",
           (long long)(b[MT_COMM_BYTES_ALLTOALL] - b0[MT_COMM_BYTES_ALLTOALL]));
    /* ranks 0 and 2 together (size 2): an all-gather of 10 floats sends 1 x 40 bytes */
    mt_comm *s = c->split(c, r == 1, r);
    mt_comm_mpi_bytes(b0);
    s->allgather(s, send, recv, 10, 4);
    mt_comm_mpi_bytes(b);
    EXPECT(b[MT_COMM_BYTES_GATHER] - b0[MT_COMM_BYTES_GATHER] == (r == 1 ? 0 : 40),
           "split gather %lld", (long long)(b[MT_COMM_BYTES_GATHER] - b0[MT_COMM_BYTES_GATHER]));
    c->free_split(s);
    mt_comm_finalize(c);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {{"dist_comm_bytes_np3", test_bytes}};
MT_TEST_MAIN(cases)
