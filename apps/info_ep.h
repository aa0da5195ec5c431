/* info_ep.h: what minimax-info reports for expert parallelism (issue 26): per-rank memory and
 * bytes moved per step, ZeRO-3 (P = 1) against EP over P ranks per group.
 *
 * Layout (docs/training.md, "Expert parallelism"): N ranks, P divides N and E; each EP group of
 * P ranks owns every layer's E experts, E / P per rank; the D = N / P ranks holding the same
 * experts (one per group) ZeRO-shard them; everything else (attention, norms, routers, shared
 * experts, embeddings) stays ZeRO-3 over all N ranks.
 *
 * Bytes moved are what one rank sends per micro-step (receives are the same by symmetry), ring
 * collectives: an all-gather or reduce-scatter of n elements over R ranks moves n (R - 1) / R of
 * them. A bucket is gathered twice (forward and backward, gather dtype), except the last bucket
 * of each of the two gather slots, which stays gathered from the forward into the backward
 * (once), and its gradient is reduce-scattered once (fp32); without train.gradient_checkpointing
 * (which gathers once more). EP adds, per MoE layer, 4 all-to-alls (dispatch and combine,
 * forward and backward) of the rank's B T top_k routed rows of C elements (act_bytes each), of
 * which (P - 1) / P leave the rank under uniform routing (the assumption: a skewed router moves
 * more on some ranks). Activations are the same as without EP under the same assumption (a rank
 * computes B T top_k expert rows either way) and are left to the caller. */
#pragma once
#include <stdint.h>

#include "autograd/tensor.h"
#include "models/minimax.h"

typedef struct {
    int ranks, ep; /* N, P */
    int n_buckets; /* the model's buckets (models/minimax.h) */
    const int64_t *bucket_numel;
    const int64_t *bucket_expert_numel; /* of which routed experts, per bucket */
    int experts;                        /* E per MoE layer */
    int moe_layers;                     /* layers with routed experts */
    int top_k, hidden;
    int64_t tokens; /* B x T per rank per micro-step */
    mt_dtype gather_dtype;
    int act_bytes; /* bytes per element of the exchanged rows */
    bool offload;
} mt_info_ep_in;

typedef struct {
    int64_t owned_bytes, slot_bytes, host_bytes;        /* per rank, as mt_zero_plan's */
    int64_t gather_bytes, reduce_bytes, alltoall_bytes; /* sent per rank per micro-step */
} mt_info_ep_out;

/* Fails (MT_CHECK) unless P divides N and E. P = 1: mt_zero_plan over the model's buckets and
 * N ranks, exactly today's trainer; P > 1: the non-expert part of each bucket over N ranks plus
 * each bucket's E / P local experts over N / P ranks (two sharded sets, each with its slots). */
mt_info_ep_out mt_info_ep_plan(const mt_info_ep_in *in);

/* The inputs of mt_info_ep_plan for model m: its buckets' routed-expert elements (into
 * expert_numel, n_buckets of them, the caller's) and its MoE layers; fp32 exchanged rows. */
mt_info_ep_in mt_info_ep_in_model(const mt_minimax *m, int64_t *expert_numel, int ranks, int ep,
                                  mt_dtype gather_dtype, bool offload, int64_t tokens);
