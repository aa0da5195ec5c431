/* checkpoint.h: the resumable training state as ONE parallel HDF5 file written collectively by
 * all ranks (MPI-IO). Per bucket b: datasets bucket_<b>/master, m, v of the bucket's true size,
 * each rank writing the range it owns; scalar attributes hold the step, the recipe hash, the
 * data cursor and the RNG state. Shards are stored unpadded in bucket coordinates, so a run
 * may resume with a different number of ranks.
 * Atomic: written as <dir>/state.h5.tmp, then renamed over <dir>/state.h5. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "train/zero.h"

#define MT_CURSOR_BYTES 64

typedef struct {
    int64_t step;         /* optimizer steps done */
    uint64_t recipe_hash; /* mt_recipe_hash of the run that wrote it */
    uint64_t rng_state;   /* reserved: a step draws no random numbers today (no dropout, router
                             jitter 0) and the data order derives from (data.seed, epoch) */
    int64_t tokens_seen;
    uint8_t cursor[MT_CURSOR_BYTES]; /* the data sampler's cursor, opaque here */
    int32_t world_size;              /* informational */
} mt_train_state;

/* Collective: every rank calls it. */
void mt_checkpoint_save(const char *dir, mt_zero *z, const mt_train_state *st);
/* Collective. false when <dir>/state.h5 does not exist; dies on a damaged or mismatching file
 * (bucket count or sizes differ), naming the file and dataset. */
bool mt_checkpoint_load(const char *dir, mt_zero *z, mt_train_state *st);
