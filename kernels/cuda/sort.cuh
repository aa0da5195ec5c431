/* sort.cuh: a stable counting sort of int32 keys on the device (sort.cu), block-parallel: the
 * MoE's permutation by expert (moe_common.cu, one pass with a bucket per expert) and the
 * embedding backward's grouping of positions by vocabulary row (embedding.cu, an LSD radix sort:
 * a pass per digit). Stable: elements of one bucket keep their order, so the result is the CPU
 * reference's permutation exactly (kernels/cpu/moe.h: tokens of an expert in token order), the
 * same on every run whatever order the blocks run in.
 *
 * One pass over n elements, element i having the key keys[order[i]] (order NULL: keys[i]) and
 * the digit d = (key >> shift) & (2^bits - 1) in [0, nb), nb <= CUDA_SORT_MAX_BUCKETS:
 *   1. count: chunks of CUDA_SORT_CHUNK elements, a block each, a histogram in shared memory:
 *      counts[d, ch] (bucket-major);
 *   2. scan: a warp per bucket d (8 a block) turns counts[d, 0..nchunks) into its exclusive
 *      prefix sum (32 chunks a step, the carry from lane 31) and writes the bucket's size
 *      totals[d];
 *   3. place: each chunk's block scans the totals into the buckets' first slots, gives each warp
 *      its base per bucket (the warps of the chunk in order), and each warp walks its 128
 *      elements 32 at a time: lanes with one digit rank among themselves by ballot, so element i
 *      goes to slot offsets[d] + (elements of bucket d in earlier chunks, warps, rounds and
 *      lanes), ascending i within a bucket. */
#pragma once
#include "cuda_ops.cuh"

#define CUDA_SORT_MAX_BITS    10
#define CUDA_SORT_MAX_BUCKETS (1 << CUDA_SORT_MAX_BITS) /* 1024 */
#define CUDA_SORT_CHUNK       1024                      /* elements per block */

/* Chunks (blocks of the count and place kernels) for n elements: at least 1. */
int64_t cuda_sort_chunks(int64_t n);

/* One stable pass (see above): perm[slot] = the element that lands there (order[i], or i when
 * order is NULL); inv[element] = slot and sorted[slot] = its key when they are not NULL.
 * counts: nb * cuda_sort_chunks(n) int32, totals: nb int32 (scratch). offsets (nb + 1 int32:
 * each bucket's first slot, then n') may be NULL; view, when not NULL, gets *flag and then the
 * nb + 1 offsets (what the MoE reads back in one copy). flag not NULL: a key outside [0, nb) is
 * raised into it at its position (cuda_flag_raise) and left out (then shift must be 0 and order
 * NULL; n' < n counts the rest). Launches 3 kernels; no synchronisation. */
void cuda_sort_pass(const char *op, int32_t *perm, int32_t *inv, int32_t *sorted,
                    const int32_t *keys, const int32_t *order, int64_t n, int shift, int bits,
                    int nb, int32_t *counts, int32_t *totals, int32_t *offsets,
                    unsigned long long *flag, unsigned long long *view);

/* perm[0..n) = 0..n-1 stably sorted by keys[i] in [0, bound), and sorted[j] = keys[perm[j]]
 * when sorted is not NULL: LSD radix, ceil(log2 bound / 10) passes of up to 10 bits (3 launches
 * each); scratch from node n_scratch. n < 2^31. */
void cuda_sort_stable(const char *op, const mt_node *n_scratch, int32_t *perm, int32_t *sorted,
                      const int32_t *keys, int64_t n, int64_t bound);
