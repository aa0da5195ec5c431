/* info_predict.h: minimax-info --predict-step (issue 40 item 5): a roofline prediction of one
 * optimizer step of a full-parameter SFT on a GPU, per kernel kind, from the model's plan
 * (models/family.h: each layer's mixer, MLP, experts) and config shapes. Computed, not measured.
 *
 * One optimizer step = one micro-step per rank (no gradient accumulation) of B x T tokens per
 * rank on N ranks (global batch N B T). Per kernel kind: FLOPs and HBM bytes of the forward, the
 * recomputed forward of every decoder layer (train.gradient_checkpointing; the embedding, final
 * norm and loss are not recomputed) and the backward, by these rules:
 *   GEMMs (projections, router gate, experts, dense MLP, lm_head, the lightning block form, the
 *     MSA indexer's scores): backward = 2 x forward (dX and dW), FLOPs and bytes; operands bf16
 *     (2 bytes) read and written once per GEMM; fp32-gathered weights add their cast to bf16
 *     (4 + 2 bytes a weight element per use); lm_head: the chunked loss forms the logits again
 *     in the backward (one more forward GEMM);
 *   flash attention (softmax and MSA's selected blocks): backward = 2.5 x forward FLOPs (5
 *     matrix products against 2), 2 x forward bytes;
 *   element-wise kinds (RMSNorm, residual adds, RoPE, SwiGLU, router softmax / top-k, dispatch,
 *     combine, cross-entropy rows, embedding): fp32 activations (4 bytes, as this trainer keeps
 *     them), backward = 2 x forward bytes and FLOPs;
 *   AdamW: 28 bytes (read master, grad, m, v; write master, m, v; fp32) and 15 FLOPs a parameter
 *     a rank owns;
 *   collectives: the bytes one rank sends (apps/info_ep.h: ring all-gather / reduce-scatter move
 *     (N - 1) / N of a bucket, EP's all-to-all under uniform routing), plus with recompute and
 *     gather unit expert each layer's attention bucket (and shared expert) gathered once more,
 *     and with EP the forward's exchanges again (rows there and back, weights); a collective over
 * more than one node at the InfiniBand rate per GPU, within a node at NVLink's one-way rate; an
 *     all-to-all over P > node ranks: the node's share on NVLink, the rest on InfiniBand, the
 *     slower setting the time.
 * Time per op: max(FLOPs / (peak x efficiency), bytes / (HBM bandwidth x efficiency)), summed
 * per kind; the step: every kind one after another (no overlap), and the fully overlapped bound
 * max(compute, communication). */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "models/minimax.h"

/* A device's peaks (the vendor's datasheet) and the efficiencies assumed at them. */
typedef struct {
    const char *name, *what;
    double peak_flops;    /* bf16 dense tensor FLOP/s */
    double hbm_bw;        /* bytes/s */
    double nvlink_bw;     /* bytes/s each way per GPU */
    double ib_bw;         /* bytes/s per GPU between nodes */
    int node_gpus;        /* GPUs on NVLink together */
    double eff_gemm;      /* cuBLAS bf16 GEMM */
    double eff_attn_f;    /* flash attention forward */
    double eff_attn_b;    /* flash attention backward */
    double eff_lightning; /* the lightning block form's small batched GEMMs */
    double eff_hbm;       /* streaming kernels against the HBM peak */
    double eff_link;      /* collectives against the link rate */
} mt_predict_gpu;

/* The device named so ("h200", "h100"), or NULL. */
const mt_predict_gpu *mt_predict_gpu_find(const char *name);

enum {
    MT_PK_EMBED,
    MT_PK_NORM,
    MT_PK_PROJ,
    MT_PK_FLASH,
    MT_PK_LIGHTNING,
    MT_PK_MSA,
    MT_PK_ROUTER,
    MT_PK_EXPERTS,
    MT_PK_DENSE,
    MT_PK_SWIGLU,
    MT_PK_LMHEAD,
    MT_PK_ADAMW,
    MT_PK_ZERO3,
    MT_PK_A2A,
    MT_PK_COUNT
};
/* The kind's name in the table. */
const char *mt_predict_kind_name(int kind);

typedef struct {
    const mt_minimax_config *cfg;
    const mt_layer_plan *plan; /* (cfg->num_hidden_layers) */
    int64_t batch, seq;        /* per rank */
    int ranks, ep;
    bool recompute;
    int gather_bytes;      /* 4 (fp32 gathers) or 2 */
    int64_t owned_params;  /* what AdamW updates on a rank */
    double zero3_bytes;    /* all-gathers + reduce-scatters sent per rank */
    double alltoall_bytes; /* EP's all-to-alls sent per rank */
    double params_active;  /* for the MFU: 6 x this x tokens */
    double params_lm_head; /* V x C */
} mt_predict_in;

typedef struct {
    double flops, bytes, seconds;
} mt_predict_cell;

typedef struct {
    mt_predict_cell kind[MT_PK_COUNT];
    double gemm_flops; /* every GEMM's FLOPs (projections, router gate, experts, dense, lm_head) */
    double compute_s, comm_s, step_s, overlap_s, tokens_per_s;
    double mfu, mfu_lm_head, hfu; /* 6 N_active, 6 (N_active + V C), counted FLOPs; per GPU */
} mt_predict_out;

/* max(flops / (peak eff_f), bytes / (bw eff_b)); 0 for no work. */
double mt_predict_roofline(double flops, double bytes, double peak, double eff_f, double bw,
                           double eff_b);
/* What one of n ranks sends in a ring all-gather or reduce-scatter of `bytes`. */
double mt_predict_ring_bytes(double bytes, int n);
void mt_predict_step(const mt_predict_in *in, const mt_predict_gpu *g, mt_predict_out *o);
/* Prints the prediction: the device line, the layout line, a markdown table of the kinds (most
 * time first) and the predict_* totals, one key=value a line. */
void mt_predict_print(const mt_predict_in *in, const mt_predict_gpu *g, const mt_predict_out *o);
