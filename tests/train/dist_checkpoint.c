/* dist_checkpoint.c: the training state (train/checkpoint.h): save on 2 ranks, load on 1, 2
 * and 3 ranks (a different world size re-shards from bucket coordinates, reading the parts of
 * every rank file that overlap its range), and a format-1 checkpoint (tests/fixtures/
 * checkpoint-format1/state.h5: one file written collectively by the code before per-rank
 * files, the same values) on 2 and 3 ranks. */
#include "tests/support/harness.h"

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
    mt_train_state st = {.step = 17,
                         .recipe_hash = 0xABCDEF0123456789ull,
                         .rng_state = 99,
                         .tokens_seen = 123456,
                         .global_batch = 8,
                         .micro_batch = 2,
                         .accumulation = 2,
                         .n_inputs = 2,
                         .inputs = {{"model.config", "a/config.json", 0x0123456789abcdefull},
                                    {"data.path", "b c/train.jsonl", 42}}};
    memcpy(st.cursor, "cursor-bytes", 12);
    mt_checkpoint_save(ckpt_dir(), &z, &st);
    mt_zero_free(&z);
    mt_comm_finalize(comm);
    return MT_TEST_OK;
}

static int load_from(const char *dir, int format) {
    int argc = 0;
    char **argv = NULL;
    mt_comm *comm = mt_comm_mpi_init(&argc, &argv);
    mt_zero z;
    mt_zero_init(&z, comm, mt_backend_cpu(), N_BUCKETS, bucket_numel);
    mt_train_state st;
    bool ok = mt_checkpoint_load(dir, &z, &st);
    EXPECT(ok, "no checkpoint in %s", dir);
    EXPECT(st.format == format && st.step == 17 && st.recipe_hash == 0xABCDEF0123456789ull &&
               st.rng_state == 99 && st.tokens_seen == 123456 &&
               !memcmp(st.cursor, "cursor-bytes", 12) && st.world_size == 2,
           "scalars (format %d)", st.format);
    if (format >= 2)
        EXPECT(st.global_batch == 8 && st.micro_batch == 2 && st.accumulation == 2 &&
                   st.n_inputs == 2 && !strcmp(st.inputs[0].what, "model.config") &&
                   !strcmp(st.inputs[0].path, "a/config.json") &&
                   st.inputs[0].digest == 0x0123456789abcdefull &&
                   !strcmp(st.inputs[1].path, "b c/train.jsonl") && st.inputs[1].digest == 42,
               "layout and inputs");
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

static int test_load(void) { return load_from(ckpt_dir(), MT_CHECKPOINT_FORMAT); }

static int test_load_format1(void) { return load_from("tests/fixtures/checkpoint-format1", 1); }

static const mt_test_case cases[] = {
    {"dist_checkpoint_save_np2", test_save},
    {"dist_checkpoint_load_np2", test_load},
    {"dist_checkpoint_load_np3", test_load},
    {"dist_checkpoint_load_np1", test_load},
    {"dist_checkpoint_format1_np2", test_load_format1},
    {"dist_checkpoint_format1_np3", test_load_format1},
};
MT_TEST_MAIN(cases)
