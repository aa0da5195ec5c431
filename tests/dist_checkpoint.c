/* dist_checkpoint.c: the parallel-HDF5 training state: save on 2 ranks, load on 2 and on 3
 * ranks (a different world size re-shards from bucket coordinates). */
#include "harness.h"

#include <stdlib.h>
#include <string.h>

#include "train/checkpoint.h"

#define N_BUCKETS 3
static const int64_t bucket_numel[N_BUCKETS] = {101, 7, 2050};

static float value(int a, int b, int64_t i) { return (float)(a * 100000 + b * 10000 + i) * 0.25f; }

static const char *ckpt_dir(void) {
    static char dir[1024];
    const char *tmp = getenv("MT_TEST_TMPDIR");
    snprintf(dir, sizeof(dir), "%s/dist_checkpoint", tmp ? tmp : "/tmp");
    return dir;
}

static int test_save(void) {
    int argc = 0;
    char **argv = NULL;
    mt_comm *comm = mt_comm_mpi_init(&argc, &argv);
    mt_zero z;
    mt_zero_init(&z, comm, mt_backend_cpu(), N_BUCKETS, bucket_numel);
    for (int b = 0; b < N_BUCKETS; b++) {
        int64_t lo, hi;
        mt_zero_owned_range(&z, b, &lo, &hi);
        for (int64_t i = lo; i < hi; i++) {
            z.master[z.shard_offset[b] + i - lo] = value(0, b, i);
            z.m[z.shard_offset[b] + i - lo] = value(1, b, i);
            z.v[z.shard_offset[b] + i - lo] = value(2, b, i);
        }
    }
    mt_train_state st = {
        .step = 17, .recipe_hash = 0xABCDEF0123456789ull, .rng_state = 99, .tokens_seen = 123456};
    memcpy(st.cursor, "cursor-bytes", 12);
    mt_checkpoint_save(ckpt_dir(), &z, &st);
    mt_zero_free(&z);
    mt_comm_finalize(comm);
    return MT_TEST_OK;
}

static int test_load(void) {
    int argc = 0;
    char **argv = NULL;
    mt_comm *comm = mt_comm_mpi_init(&argc, &argv);
    mt_zero z;
    mt_zero_init(&z, comm, mt_backend_cpu(), N_BUCKETS, bucket_numel);
    mt_train_state st;
    bool ok = mt_checkpoint_load(ckpt_dir(), &z, &st);
    EXPECT(ok, "no checkpoint in %s", ckpt_dir());
    EXPECT(st.step == 17 && st.recipe_hash == 0xABCDEF0123456789ull && st.rng_state == 99 &&
               st.tokens_seen == 123456 && !memcmp(st.cursor, "cursor-bytes", 12) &&
               st.world_size == 2,
           "scalars");
    int bad = 0;
    for (int b = 0; b < N_BUCKETS; b++) {
        int64_t lo, hi;
        mt_zero_owned_range(&z, b, &lo, &hi);
        for (int64_t i = lo; i < hi; i++) {
            bad += z.master[z.shard_offset[b] + i - lo] != value(0, b, i);
            bad += z.m[z.shard_offset[b] + i - lo] != value(1, b, i);
            bad += z.v[z.shard_offset[b] + i - lo] != value(2, b, i);
        }
    }
    EXPECT(bad == 0, "%d wrong values after loading on %d ranks", bad, comm->size);
    mt_zero_free(&z);
    mt_comm_finalize(comm);
    return MT_TEST_OK;
}

static const mt_test_case cases[] = {
    {"dist_checkpoint_save_np2", test_save},
    {"dist_checkpoint_load_np2", test_load},
    {"dist_checkpoint_load_np3", test_load},
};
MT_TEST_MAIN(cases)
