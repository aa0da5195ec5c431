/* context_parallel.h: the context-parallel group and the token layout its ops share (issue 39;
 * docs/training.md "Long sequences"). Context parallelism splits each sample row of T tokens
 * over the C ranks of a group: the row is cut into 2C equal chunks of T / (2C) tokens, and rank
 * r holds chunks r and 2C-1-r, in that order (Megatron-Core's causal load balance: every rank
 * holds one early and one late chunk, so causal attention costs each rank the same). A rank's
 * activations are (B, Tl, ...) with Tl = T / C local tokens; positions stay global (RoPE reads
 * the global position of each local token), and packed segments may cross chunk borders.
 * Model code never sees the communicator: the trainer installs the group (train/), the ops
 * exchange through its hooks, as expert parallelism's mt_exchange does. */
#pragma once
#include <stddef.h>
#include <stdint.h>

typedef struct mt_cp_group {
    int size, rank; /* C, and this rank's index in its context group */
    /* On the backend's memory (device buffers for a CUDA backend), every rank of the group in
     * the same order. allgather: recv[q*count .. (q+1)*count) = send of rank q (elem bytes an
     * element; a copy). reduce_scatter: recv (count floats) = sum over ranks q of rank q's
     * send[rank*count .. (rank+1)*count). */
    void (*allgather)(void *user, const void *send, void *recv, int64_t count, size_t elem);
    void (*reduce_scatter)(void *user, const float *send, float *recv, int64_t count);
    void *user;
    /* On host memory: in-place sums over the group (the router's expert counts). */
    void (*allreduce_i64)(void *user_host, int64_t *buf, int n);
    void *user_host;
} mt_cp_group;

/* The chunk (0 .. 2C-1) of the whole row that local chunk j (0 or 1) of rank r holds. */
static inline int mt_cp_chunk_of(int r, int C, int j) { return j == 0 ? r : 2 * C - 1 - r; }

/* The global position (0 .. T-1) of local token i (0 .. T/C - 1) of rank r; T a multiple of
 * 2C. */
static inline int64_t mt_cp_global_index(int r, int C, int64_t T, int64_t i) {
    const int64_t n = T / (2 * C); /* tokens a chunk */
    return i < n ? (int64_t)r * n + i : (int64_t)(2 * C - 1 - r) * n + (i - n);
}
