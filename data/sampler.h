/* sampler.h: the order in which samples are trained, and the rank's micro-batches.
 *
 * Order: epoch e visits every sample of the pool (all samples, or the subset cfg.pool names)
 * once, in index order (shuffle off) or in a permutation drawn from (seed, e) (shuffle on). The
 * order does not depend on the rank or the world size. A global batch (one optimizer step) is the
 * next global_batch samples of the order (the last one of an epoch may be shorter; a global batch
 * never spans two epochs). The global batch is dealt to the N ranks by tokens: rank r gets as
 * many samples as a round robin would give it (one more for r < count % N), the samples going
 * longest first to the rank with the fewest tokens so far among those with room (ties: earlier
 * position, lower rank), the same on every rank; a share keeps the order's positions. So the
 * shares are disjoint, they cover the epoch, their union is the global batch whatever N is, and
 * no rank waits long for the one with the most tokens.
 *
 * Rows of seq_len tokens (B rows make a micro-batch, all (B,T) I32):
 *   padded (pack off): one sample per row;
 *   packed (pack on):  samples placed first-fit into rows in the order of the rank's share.
 * Within a row each sample is a segment: seg = 0, 1, 2, ... in row order, pos restarts at 0 at
 * each sample, and labels are shifted inside the sample: labels[t] = sample_labels[t + 1] (the
 * next token when it is a target, else -100), and -100 at the sample's last token, so nothing is
 * predicted across a boundary. The padding after the last sample is one more segment with
 * ids = pad_id, labels = -100, pos restarting at 0. Every rank runs the same number of
 * micro-batches per step (the largest need over ranks; missing ones are all padding), which
 * collective parameter gathers require.
 *
 * Mixing (cfg.weights over n_sources files): an epoch still has n_pool positions, and file s
 * gets count_s = n_pool * w_s / sum(w) of them (largest remainders). The positions are dealt
 * to the files by a smooth weighted round robin (position j goes to the file furthest behind
 * its share of j + 1), so every prefix of an epoch holds each file's share to within one
 * sample. File s fills its positions from an endless stream of its pool samples: one pass in
 * index order (or a permutation of (seed, s, pass) with shuffle on), then the next pass, ...;
 * epoch e takes stream items [e * count_s, (e + 1) * count_s): a file with less than its share
 * repeats samples, one with more is spread over epochs.
 *
 * The cursor (epoch, position = samples of that epoch already consumed) is all the state:
 * saving it after a step and restoring it continues the exact sequence. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "data/token_cache.h"

typedef struct {
    uint64_t seed;
    bool shuffle;
    bool pack;
    int64_t global_batch; /* samples per optimizer step over all ranks */
    int64_t micro_batch;  /* B: rows per micro-batch */
    int64_t seq_len;      /* T: tokens per row, >= the longest sample */
    int rank, world;
    int32_t pad_id; /* id of padding tokens (labels there are -100); recipes use eos */
    /* the samples to draw from, ascending (copied at init); NULL: all of the data */
    const int64_t *pool;
    int64_t n_pool;
    /* mixing (data.weights): n_sources >= 1 files, data->source says each sample's; weights
     * (n_sources, > 0) set each file's share of an epoch. NULL weights: no mixing. */
    int n_sources;
    const double *weights;
} mt_sampler_cfg;

typedef struct {
    int64_t epoch, position;
} mt_sampler_cursor;

typedef struct {
    mt_sampler_cfg cfg;
    const mt_token_data *data;
    int64_t *pool, n_pool; /* the sample indices an epoch visits, ascending */
    int64_t *targets;      /* (data->n_samples) predicted tokens of each sample after the shift */
    int64_t *order;        /* (n_pool) the order of epoch order_epoch */
    int64_t order_epoch;   /* -1: none yet */
    mt_sampler_cursor cur;
    /* the current step, set by mt_sampler_next */
    int64_t step_epoch, step_first, step_count; /* global batch = order[first, first + count) */
    int64_t n_rows;                             /* this rank's rows */
    int64_t *row_first;     /* (n_rows + 1) row i holds row_items[row_first[i], row_first[i+1]) */
    int64_t *row_items;     /* sample indices */
    int64_t n_micro;        /* micro-batches per rank in this step (same on every rank) */
    int64_t global_targets; /* predicted tokens of the whole global batch (a loss denominator) */
    int64_t local_targets;  /* predicted tokens of this rank's share */
    int64_t global_tokens;  /* real tokens (no padding) of the whole global batch (the
                               denominator of the losses averaged over every real token:
                               mt_minimax_batch.aux_denom) */
    int64_t *scratch;       /* packing work space */
    int64_t *owner;         /* (global batch + 2 world) the rank of each position of the step,
                               then the dealing's tokens and counts per rank */
    /* mixing: the pool grouped by source (src_first: n_sources + 1 offsets into pool), each
     * source's samples per epoch, and the source of each position of an epoch */
    int64_t *src_first, *src_count;
    int32_t *slot_source; /* (n_pool) */
    int64_t *src_perm;    /* work space: a source's permutation */
} mt_sampler;

/* Dies (MT_DIE) on a bad configuration or when a sample is longer than seq_len. */
void mt_sampler_init(mt_sampler *s, const mt_sampler_cfg *cfg, const mt_token_data *data);
void mt_sampler_free(mt_sampler *s);

/* Splits samples 0..n-1 into n - n_eval to train on (into train, unless NULL) and n_eval held
 * out for evaluation, each ascending: the held-out ones are the first n_eval of a permutation
 * drawn from seed (a stream apart from the epoch orders'), so they do not depend on the world
 * size or the batch. Dies unless 0 <= n_eval <= n (the caller decides whether an empty
 * training part is an error). */
void mt_sampler_split(int64_t n, int64_t n_eval, uint64_t seed, int64_t *train, int64_t *eval);

mt_sampler_cursor mt_sampler_get_cursor(const mt_sampler *s);
void mt_sampler_set_cursor(mt_sampler *s, mt_sampler_cursor c);
int64_t mt_sampler_steps_per_epoch(const mt_sampler *s);

/* Plans the next global batch (this rank's rows) and moves the cursor past it. Returns the
 * number of micro-batches to run, equal on every rank. */
int64_t mt_sampler_next(mt_sampler *s);

/* Tokens in row b (0 <= b < micro_batch) of micro-batch m; the rest of the row is padding. */
int64_t mt_sampler_row_len(const mt_sampler *s, int64_t m, int64_t b);

/* Tokens in the longest row of micro-batch m (0 when all of its rows are padding). */
int64_t mt_sampler_micro_len(const mt_sampler *s, int64_t m);

/* Fills micro-batch m (0 <= m < n_micro) of the current step: each array is (B, row_len), with
 * mt_sampler_micro_len(s, m) <= row_len <= seq_len (seq_len: rows of the full length). */
void mt_sampler_fill(const mt_sampler *s, int64_t m, int64_t row_len, int32_t *ids, int32_t *labels,
                     int32_t *pos, int32_t *seg);
