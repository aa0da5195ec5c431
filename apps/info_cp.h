/* info_cp.h: what minimax-info reports for context parallelism (issue 39; the layout of
 * autograd/context_parallel.h): each sample row of T tokens is cut into 2C equal chunks and
 * rank r of a context group of C ranks holds chunks r and 2C-1-r, Tl = T / C tokens of every
 * row. Per rank, one micro-step of B rows needs
 *
 *   activations(C) = plan(B, T / C) + exchange(C)
 *
 * plan: the dry run of the model code on B x Tl tokens (mt_minimax_plan_activations, the
 * activation_* lines without context parallelism); exchange: the largest set of buffers the
 * exchanges of one layer keep live while that layer runs (layers run one at a time, so the
 * largest kind counts, not the sum), fp32 (4 bytes an element), C > 1:
 *   softmax layer:   4 B T Hkv D x 4: K and V of the whole row (B,T,Hkv,D) all-gathered, and in
 *                    the backward their gradients dK, dV (B,T,Hkv,D), reduce-scattered
 *   lightning layer: 2 C B H D D x 4: the all-gather of every rank's two chunk states
 *                    (B,H,D,D) in the forward (and of their gradients, the same size, in the
 *                    backward)
 *   MSA layer:       (5 Hkv D + 2 Di) B T x 4: the row's K, V and index keys (B,T,Di)
 *                    gathered (mt_cp_gather), in the backward their gradients, and the
 *                    reduce-scatter's rank-major copy of dK or dV (models/block_msa.c)
 * The gathered K, V and index keys are the MSA ops' inputs, so without recompute every MSA
 * layer keeps its (2 Hkv D + Di) B T x 4 until its backward (msa_kept, all MSA layers summed);
 * with recompute only the running layer holds them (in the peak above).
 * exchange(1) = 0 and plan(B, T / 1) is the plan without context parallelism, so C = 1 prints
 * exactly what no flag prints. The ZeRO-3 state is sharded over all N ranks as without it (N a
 * multiple of C, and of P with expert parallelism); the expert all-to-all moves B Tl rows. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "models/minimax.h"

typedef struct {
    int64_t softmax, lightning, msa; /* bytes live during one layer of that kind (0: none) */
    int64_t peak;                    /* the largest of them */
    int64_t msa_kept;                /* kept between the passes without recompute */
} mt_info_cp_exchange;

/* T splits into 2C equal chunks (C >= 1; C = 1: any T, no context parallelism). */
bool mt_info_cp_divides(int64_t T, int C);

/* The exchange buffers of model m (its layers' mixers) for C ranks, B rows of T tokens. */
mt_info_cp_exchange mt_info_cp_exchange_plan(const mt_minimax *m, int C, int64_t B, int64_t T);

/* What the exchanges add to the dry run's activations: the peak, plus msa_kept without
 * recompute. */
int64_t mt_info_cp_exchange_bytes(const mt_info_cp_exchange *x, bool recompute);

/* plan(B, T / C) + mt_info_cp_exchange_bytes, with the given gather unit and recompute. */
int64_t mt_info_cp_activations(const mt_minimax_config *cfg, mt_gather_unit unit, bool recompute,
                               int64_t B, int64_t T, int C);

/* The least common multiple of a and b (both >= 1). */
int mt_info_lcm(int a, int b);

/* --context-parallel auto: over C in {1, 2, 4, ...} (T splitting into 2C chunks) and every
 * expert-parallel size P dividing E, the fewest ranks N (a multiple of C and P) whose per-rank
 * state, slots (gather unit expert, fp32 gathers, no offload: fit_ranks_ep's settings) and
 * recomputed activations fit gib GiB; prints best_cp<C>=... per C and best_layout=... (ties:
 * the smaller C, then the least ZeRO-3/EP traffic), and best_layout_nodes=... for whole
 * 8-GPU nodes. */
void mt_info_cp_best(const mt_minimax_config *cfg, int64_t B, int64_t T, double gib);
