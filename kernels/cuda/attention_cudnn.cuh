/* attention_cudnn.cuh: the cuDNN SDPA graphs of the attention op (kernels/cuda/
 * attention_cudnn_graph.cu builds them through the cuDNN 9 backend API) and what
 * attention_cudnn.cu needs to run them. */
#pragma once
#ifndef MT_NO_CUDNN
#include <cudnn.h>
#endif

#include "attention_cudnn.h"
#include "cuda_ops.cuh"

#ifndef MT_NO_CUDNN /* a build without cuDNN (launch/gpu-check.sh when none is found) */

/* The graphs' non-virtual tensors by unique id: the variant pack's keys (sdpa_plan.uids lists
 * the ones a plan takes). Ragged offsets: Q and dQ take OFF_Q, O and dO OFF_O, K and dK OFF_K,
 * V and dV OFF_V, the statistics OFF_STATS (and the backend-side buffers their tensor's). */
enum sdpa_uid {
    SDPA_Q = 1,
    SDPA_K,
    SDPA_V,
    SDPA_O,
    SDPA_DO,
    SDPA_STATS,
    SDPA_DQ,
    SDPA_DK,
    SDPA_DV,
    SDPA_SCALE,          /* by value: the node's scale */
    SDPA_NEG_INF_PAD,    /* by value: -inf, the padding mask's fill */
    SDPA_NEG_INF_CAUSAL, /* by value: -inf, the causal mask's fill */
    SDPA_ONE,            /* by value: 1, the backward's (dropout-free) scale of dO.O */
    SDPA_SEQ_Q,
    SDPA_SEQ_KV,
    SDPA_OFF_Q,
    SDPA_OFF_K,
    SDPA_OFF_V,
    SDPA_OFF_O,
    SDPA_OFF_STATS,
    SDPA_SOFTMAX_SUM, /* backward: rowsum(dO o O), fp32, the caller's memory */
    SDPA_DQ_ACCUM,    /* backward: dQ in fp32 before its bf16 rounding, the caller's memory */
    SDPA_DK_FULL,     /* backward, ragged GQA: dK per query head before the group sum */
    SDPA_DV_FULL,
    SDPA_N_UID
};

/* One graph's shape. Dense (not ragged): b = B sequences of s = T positions, q (B,T,H,D) as
 * it lies (cuDNN's BSHD strides), statistics (B,H,T) = the node's lse. Ragged (packed samples):
 * b sequences (a bucket; the unused ones have length 0) over a buffer of s positions, each
 * sequence at its ragged offset with its own length (padding mask) and causal inside it.
 * lens: the graph takes per-sequence lengths (SDPA_SEQ_Q, SDPA_SEQ_KV) and the padding mask:
 * always when ragged; dense only for cudnn-frontend's workaround on cuDNN <= 9.15, a backward
 * whose s is not a multiple of 128 gets a padding mask with every length s (sdpa_pad_workaround
 * in attention_cudnn.cu). */
struct sdpa_shape {
    bool bwd, ragged, lens;
    int64_t b, s, H, Hkv, D;
};

#define SDPA_MAX_DESC 224

/* A graph's execution plan and every descriptor it references (freed together). */
struct sdpa_plan {
    sdpa_shape shape;
    cudnnBackendDescriptor_t desc[SDPA_MAX_DESC];
    int n_desc;
    cudnnBackendDescriptor_t plan;
    int64_t workspace; /* bytes the plan needs at execution */
    int64_t engine;    /* cuDNN's global engine index (logs) */
    int64_t uids[SDPA_N_UID];
    int n_uids;
};

/* Byte sizes of the backward's fp32 buffers that the graph keeps in the caller's memory
 * (cudnn-frontend's sdpa_backward node does the same): softmax_sum, dq_accum, dk_full, dv_full
 * (the last two 0 unless ragged with H != Hkv). */
void sdpa_bwd_buffers(const sdpa_shape &sh, int64_t bytes[4]);

/* Builds shape sh's operation graph, asks cuDNN's heuristics (mode A, then FALLBACK) for
 * engine configs and finalizes the first plan that cuDNN accepts. false (everything freed)
 * with the failing call, file:line and cuDNN's messages in why. */
bool sdpa_plan_build(cudnnHandle_t h, const sdpa_shape &sh, sdpa_plan *p, char *why, size_t len);
void sdpa_plan_free(sdpa_plan *p);
/* Queues p on h's stream: ptr[uid] for every uid the plan takes (host pointers for the
 * by-value scalars), workspace of p->workspace bytes. false with the reason in why. */
bool sdpa_plan_run(cudnnHandle_t h, const sdpa_plan &p, void *const ptr[SDPA_N_UID],
                   void *workspace, char *why, size_t len);
#endif
