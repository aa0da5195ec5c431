/* checkpoint.h: the resumable training state, written without collectives (docs/checkpoints.md,
 * "Training state"). In <dir>:
 *
 *   state-<r>-of-<N>.h5  rank r's owned range of every bucket (mt_zero_range_of): datasets
 *                        bucket_<b>_master, _m, _v (fp32, chunked, each chunk with HDF5's
 *                        Fletcher32 checksum) and ranges (n_buckets x 2: the [lo, hi) held);
 *                        written by rank r alone, on its own;
 *   state.h5             the manifest, written by rank 0 last, when every rank's file is
 *                        complete: format, step, world size, bucket sizes, recipe hash, data
 *                        cursor, global batch layout, the digests of the run's inputs and
 *                        of the checkpoint's recipe.toml (the resolved recipe that wrote it).
 *
 * A rank never waits inside HDF5 for another: the only waits are the comm's barriers, which the
 * watchdog covers (dist.timeout). Every file is HDF5 1.10 format with metadata checksums, so
 * a damaged header is refused as well as a damaged chunk. The shards are in bucket coordinates,
 * so a run resumes on another number of ranks (each rank reads the parts of the files that
 * overlap its range). The manifest is written as state.h5.tmp and renamed; without it a
 * directory holds no checkpoint. Format 1 (before per-rank files: one state.h5 written
 * collectively, no checksums) still loads. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "train/zero.h"

#define MT_CHECKPOINT_FORMAT 2
#define MT_CURSOR_BYTES      64
#define MT_CHECKPOINT_INPUTS 8

/* One input the numerics depend on, by what it is, its path and a 64-bit FNV-1a digest of its
 * bytes (core/file_io.h). */
typedef struct {
    char what[64]; /* "model.config", "data.path", ... (the recipe key that names it) */
    char path[2112];
    uint64_t digest;
} mt_input_digest;

typedef struct {
    int32_t format;       /* MT_CHECKPOINT_FORMAT when written; 1 for an old checkpoint */
    int64_t step;         /* optimizer steps done */
    uint64_t recipe_hash; /* the trainer's hash of the numerics keys (train/trainer_checkpoint.c) */
    uint64_t rng_state;   /* reserved: a step draws no random numbers of a state (no dropout; the
                             router jitter's draws derive from (train.seed, step, rank,
                             micro-batch)) and the data order derives from (data.seed, epoch) */
    int64_t tokens_seen;
    uint8_t cursor[MT_CURSOR_BYTES]; /* the data sampler's cursor, opaque here */
    int32_t world_size;
    /* the global batch = world_size x micro_batch x accumulation samples (0: format 1) */
    int64_t global_batch, micro_batch, accumulation;
    int n_inputs;
    mt_input_digest inputs[MT_CHECKPOINT_INPUTS];
    uint64_t recipe_digest; /* FNV-1a of <dir>/recipe.toml's bytes; 0: none recorded (older) */
} mt_train_state;

/* Every rank calls it; each writes its own file, then rank 0 the manifest (barriers between). */
void mt_checkpoint_save(const char *dir, mt_zero *z, const mt_train_state *st);
/* The manifest alone (any rank, no collectives): false when <dir>/state.h5 does not exist;
 * dies on a damaged file, naming it. */
bool mt_checkpoint_read_state(const char *dir, mt_train_state *st);
/* This rank's owned ranges from the files of the checkpoint whose manifest st was read from
 * dir (no collectives). Dies on a damaged or mismatching file (bucket count or sizes), naming
 * the file and the dataset. */
void mt_checkpoint_load_shards(const char *dir, mt_zero *z, const mt_train_state *st);
/* Both: false when there is no state.h5. */
bool mt_checkpoint_load(const char *dir, mt_zero *z, mt_train_state *st);
