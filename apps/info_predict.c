/* info_predict.c: minimax-info's predicted training step (apps/info_predict.h). */
#include "apps/info_predict.h"

#include <stdio.h>
#include <string.h>

/* Peaks as NVIDIA's datasheets state them (H200: nvidia.com/en-us/data-center/h200, "H200 SXM":
 * BF16 Tensor Core 1,979 TFLOPS with sparsity, i.e. 989 dense; GPU memory bandwidth 4.8 TB/s
 * HBM3e; NVLink 900 GB/s per GPU, bidirectional, so 450 GB/s each way. H100 SXM:
 * nvidia.com/en-us/data-center/h100: 1,979 TFLOPS bf16 with sparsity (989 dense), 3.35 TB/s
 * HBM3, NVLink 900 GB/s). Between nodes one 400 Gb/s InfiniBand NDR port per GPU (DGX
 * H100/H200: 8 ConnectX-7 at 400 Gb/s), 50 GB/s. Efficiencies (assumptions unless cited):
 * GEMM 0.70 of peak (cuBLAS bf16 at large shapes on H100-class parts, assumed; measured here:
 * the grouped expert GEMMs of docs/cuda.md ran at 0.28); flash attention forward 0.60, backward
 * 0.50 (FlashAttention-3, Shah et al. 2024, arXiv:2407.08608: forward up to 740 TFLOP/s = 75 %
 * of an H100 at long sequences, FlashAttention-2 35 %; 4k causal and the backward lower:
 * assumed); the lightning block form 0.50 (small batched GEMMs, assumed; measured here 0.005,
 * docs/cuda.md); HBM 0.80 (assumed); links 1.0 (the link rate itself: an upper bound). */
static const mt_predict_gpu predict_gpus[] = {
    {"h200", "NVIDIA H200 SXM", 989e12, 4.8e12, 450e9, 50e9, 8, 0.70, 0.60, 0.50, 0.50, 0.80, 1.0},
    {"h100", "NVIDIA H100 SXM", 989e12, 3.35e12, 450e9, 50e9, 8, 0.70, 0.60, 0.50, 0.50, 0.80, 1.0},
};

const mt_predict_gpu *mt_predict_gpu_find(const char *name) {
    for (size_t i = 0; i < sizeof(predict_gpus) / sizeof(predict_gpus[0]); i++)
        if (!strcmp(name, predict_gpus[i].name)) return &predict_gpus[i];
    return NULL;
}

static const char *const kind_names[MT_PK_COUNT] = {
    "embedding",
    "RMSNorm, residual adds, RoPE",
    "QKV/O projections (GEMM)",
    "softmax attention (flash)",
    "lightning attention (block form)",
    "MSA (indexer + selected blocks + KL)",
    "router (gate, top-k, dispatch/combine)",
    "expert GEMMs (grouped)",
    "dense MLP / shared expert GEMMs",
    "SwiGLU",
    "lm_head + cross-entropy",
    "optimizer AdamW",
    "ZeRO-3 all-gathers + reduce-scatters",
    "expert all-to-alls",
};

const char *mt_predict_kind_name(int kind) { return kind_names[kind]; }

double mt_predict_roofline(double flops, double bytes, double peak, double eff_f, double bw,
                           double eff_b) {
    const double tf = flops > 0 ? flops / (peak * eff_f) : 0;
    const double tb = bytes > 0 ? bytes / (bw * eff_b) : 0;
    return tf > tb ? tf : tb;
}

double mt_predict_ring_bytes(double bytes, int n) { return n > 1 ? bytes * (n - 1) / n : 0; }

/* The walk's state: the device, the output, the recompute factor of decoder-layer forwards. */
typedef struct {
    const mt_predict_gpu *g;
    mt_predict_out *o;
    double fwd_times; /* 2 with recompute (decoder layers), else 1 */
    int cast_bytes;   /* per weight element per use: 4 + 2 with fp32 gathers, else 0 */
} predict_walk;

/* One op: its forward (fwd_times times) and backward (bf x the FLOPs, bb x the bytes) at the
 * efficiencies ef (forward) and eb (backward) against peak FLOP/s. */
static void op(predict_walk *w, int kind, double flops, double bytes, double fwd_times, double bf,
               double bb, double ef, double eb) {
    const mt_predict_gpu *g = w->g;
    mt_predict_cell *c = &w->o->kind[kind];
    const double tf = mt_predict_roofline(flops, bytes, g->peak_flops, ef, g->hbm_bw, g->eff_hbm);
    const double tb =
        mt_predict_roofline(bf * flops, bb * bytes, g->peak_flops, eb, g->hbm_bw, g->eff_hbm);
    c->flops += fwd_times * flops + bf * flops;
    c->bytes += fwd_times * bytes + bb * bytes;
    c->seconds += fwd_times * tf + tb;
}

/* A GEMM of m rows, n outputs, k inputs, with `weights` weight elements read (n k, or the
 * experts' on this rank): bf16 operands, the backward twice the forward. */
static void gemm(predict_walk *w, int kind, double m, double n, double k, double weights,
                 double fwd_times) {
    const double flops = 2 * m * n * k;
    const double bytes = 2 * (m * k + weights + m * n) + w->cast_bytes * weights;
    op(w, kind, flops, bytes, fwd_times, 2, 2, w->g->eff_gemm, w->g->eff_gemm);
    w->o->gemm_flops += (fwd_times + 2) * flops;
}

/* An element-wise pass over `elems` fp32 elements moving `passes` of them (reads + writes),
 * `per` FLOPs an element; the backward twice. */
static void elementwise(predict_walk *w, int kind, double elems, double passes, double per,
                        double fwd_times) {
    op(w, kind, per * elems, 4 * passes * elems, fwd_times, 2, 2, 1, 1);
}

/* sum over queries i < T of the keys query i attends: min(i + 1, W) (W 0: no window) */
static double keys_causal(double T, double W) {
    if (W <= 0 || W >= T) return T * (T + 1) / 2;
    return W * (W + 1) / 2 + (T - W) * W;
}

/* MSA's keys per query: the local block up to i and topk - 1 earlier blocks (all earlier keys
 * while there are fewer blocks) */
static double keys_msa(int64_t T, int64_t blk, int64_t topk) {
    double s = 0;
    for (int64_t i = 0; i < T; i++) {
        const int64_t local = i % blk + 1, earlier = (i / blk) * blk;
        const int64_t far = (topk - 1) * blk;
        s += (double)local + (double)(earlier < far ? earlier : far);
    }
    return s;
}

/* Layer l's token mixer: its projections, norms, RoPE and attention. */
static void predict_mixer(predict_walk *w, const mt_predict_in *in, const mt_layer_plan *p) {
    const mt_minimax_config *cfg = in->cfg;
    const double B = (double)in->batch, T = (double)in->seq, t = B * T, f = w->fwd_times;
    const double C = cfg->hidden_size, H = cfg->num_attention_heads, D = cfg->head_dim;
    const double HD = H * D, Hkv = cfg->num_key_value_heads, KVD = Hkv * D;
    const mt_predict_gpu *g = w->g;
    if (p->mixer == MT_MIXER_LIGHTNING) {
        gemm(w, MT_PK_PROJ, t, 3 * HD, C, 3 * HD * C, f); /* qkv_proj */
        gemm(w, MT_PK_PROJ, t, HD, C, HD * C, f);         /* output_gate */
        gemm(w, MT_PK_PROJ, t, C, HD, C * HD, f);         /* out_proj */
        elementwise(w, MT_PK_NORM, t * HD, 2, 4, f);      /* its RMSNorm over H D */
        /* block form per head and block of b rows: intra Q K^T and (.) V (4 b^2 D), inter
         * Q S and the state update K^T V (4 b D^2); q, k, v read, o written (bf16), one fp32
         * D x D state per block written */
        const double b = cfg->block_size,
                     nb = (double)((in->seq + cfg->block_size - 1) / cfg->block_size);
        const double flops = B * H * nb * (4 * b * b * D + 4 * b * D * D);
        const double bytes = 2 * 4 * t * HD + 4 * B * H * nb * D * D;
        op(w, MT_PK_LIGHTNING, flops, bytes, f, 2, 2, g->eff_lightning, g->eff_lightning);
        elementwise(w, MT_PK_LIGHTNING, t * HD, 3, 5, f); /* sigmoid(gate) * o */
        return;
    }
    gemm(w, MT_PK_PROJ, t, HD, C, HD * C, f);           /* q_proj */
    gemm(w, MT_PK_PROJ, t, 2 * KVD, C, 2 * KVD * C, f); /* k_proj, v_proj */
    gemm(w, MT_PK_PROJ, t, C, HD, C * HD, f);           /* o_proj */
    if (p->qk_norm != MT_QK_NORM_NONE) elementwise(w, MT_PK_NORM, t * (HD + KVD), 2, 4, f);
    const double rot = cfg->rotary_dim;
    elementwise(w, MT_PK_NORM, t * (H + Hkv) * rot, 2, 3, f); /* RoPE on q and k */
    const double attn_bytes = 2 * (2 * t * HD + 2 * t * KVD) + 4 * t * H;
    if (p->mixer == MT_MIXER_SOFTMAX) {
        const double flops = 4 * B * H * D * keys_causal(T, (double)p->window);
        op(w, MT_PK_FLASH, flops, attn_bytes, f, 2.5, 2, g->eff_attn_f, g->eff_attn_b);
        return;
    }
    /* MSA: the indexer's projections, norms and RoPE; its causal scores per index head against
     * every earlier key (a GEMM; the block maxima written, fp32) and the top-k selection; the
     * attention over the selected keys; the sparse KL (training): the teacher's probabilities
     * (Q K^T again) and the student's scores on the same support, whose backward gives the
     * indexer its gradient (the selection itself has none) */
    const double Hi = cfg->msa_index_heads, Di = cfg->msa_index_dim, blk = cfg->msa_block;
    const double nblk = (double)((in->seq + cfg->msa_block - 1) / cfg->msa_block);
    gemm(w, MT_PK_PROJ, t, Hi * Di, C, Hi * Di * C, f);
    gemm(w, MT_PK_PROJ, t, Di, C, Di * C, f);
    elementwise(w, MT_PK_NORM, t * (Hi * Di + Di), 2, 4, f);
    elementwise(w, MT_PK_NORM, t * (Hi + 1) * rot, 2, 3, f);
    const double score_flops = 2 * B * Hi * Di * keys_causal(T, 0);
    const double score_bytes = 2 * t * (Hi * Di + Di) + 4 * B * Hi * T * nblk;
    op(w, MT_PK_MSA, score_flops, score_bytes, f, 0, 0, g->eff_gemm, g->eff_gemm);
    elementwise(w, MT_PK_MSA, B * Hi * T * (nblk + cfg->msa_topk), 1, 2, f); /* top-k select */
    const double sel = keys_msa(in->seq, (int64_t)blk, cfg->msa_topk);
    const double idx_bytes = 4 * B * Hi * T * cfg->msa_topk;
    op(w, MT_PK_MSA, 4 * B * H * D * sel, attn_bytes + idx_bytes, f, 2.5, 2, g->eff_attn_f,
       g->eff_attn_b);
    const double kl_flops = 2 * B * H * D * sel + 2 * B * Hi * Di * sel;
    op(w, MT_PK_MSA, kl_flops, attn_bytes + idx_bytes, f, 2 * (2 * B * Hi * Di * sel) / kl_flops, 1,
       g->eff_attn_f, g->eff_attn_b);
}

/* Layer l's MLP: the routed experts (router, dispatch, grouped GEMMs on the rank's B T K rows
 * of its E / P experts, SwiGLU, combine) and the shared expert, or the dense MLP. */
static void predict_mlp(predict_walk *w, const mt_predict_in *in, const mt_layer_plan *p) {
    const mt_minimax_config *cfg = in->cfg;
    const double t = (double)(in->batch * in->seq), f = w->fwd_times;
    const double C = cfg->hidden_size, F = (double)p->expert_ffn;
    const double act = p->act == MT_ACT_SWIGLUOAI ? 10 : 5; /* FLOPs an element */
    if (p->mlp == MT_MLP_DENSE) {
        gemm(w, MT_PK_DENSE, t, 2 * F, C, 2 * F * C, f);
        gemm(w, MT_PK_DENSE, t, C, F, C * F, f);
        elementwise(w, MT_PK_SWIGLU, t * F, 3, act, f);
        return;
    }
    const double E = p->n_experts, K = p->top_k, r = t * K, local = E / in->ep;
    gemm(w, MT_PK_ROUTER, t, E, C, E * C, f);
    elementwise(w, MT_PK_ROUTER, t * E, 3, 10, f);             /* softmax/sigmoid, top-k */
    elementwise(w, MT_PK_ROUTER, t * C + r * C, 2, 0, f);      /* dispatch: rows to (T K, C) */
    elementwise(w, MT_PK_ROUTER, r * C + t * C, 2, 2, f);      /* combine: weighted sum back */
    gemm(w, MT_PK_EXPERTS, r, 2 * F, C, local * 2 * F * C, f); /* gate and up */
    gemm(w, MT_PK_EXPERTS, r, C, F, local * C * F, f);         /* down */
    elementwise(w, MT_PK_SWIGLU, r * F, 3, act, f);
    if (p->shared_ffn > 0) {
        const double Fs = (double)p->shared_ffn;
        gemm(w, MT_PK_DENSE, t, 2 * Fs, C, 2 * Fs * C, f);
        gemm(w, MT_PK_DENSE, t, C, Fs, C * Fs, f);
        elementwise(w, MT_PK_SWIGLU, t * Fs, 3, act, f);
    }
}

/* The collectives' seconds: `bytes` sent per rank in a group of n ranks (one node at NVLink's
 * rate, more at InfiniBand's); an all-to-all over a group of n: the node's share of the peers
 * on NVLink, the rest on InfiniBand. */
static double link_seconds(const mt_predict_gpu *g, double bytes, int n, bool alltoall) {
    if (bytes <= 0 || n <= 1) return 0;
    if (n <= g->node_gpus) return bytes / (g->nvlink_bw * g->eff_link);
    if (!alltoall) return bytes / (g->ib_bw * g->eff_link);
    const double in_node = (double)(g->node_gpus - 1) / (n - 1);
    const double tn = bytes * in_node / (g->nvlink_bw * g->eff_link);
    const double ti = bytes * (1 - in_node) / (g->ib_bw * g->eff_link);
    return tn > ti ? tn : ti;
}

void mt_predict_step(const mt_predict_in *in, const mt_predict_gpu *g, mt_predict_out *o) {
    memset(o, 0, sizeof(*o));
    const mt_minimax_config *cfg = in->cfg;
    predict_walk w = {.g = g,
                      .o = o,
                      .fwd_times = in->recompute ? 2 : 1,
                      .cast_bytes = in->gather_bytes == 4 ? 6 : 0};
    const double t = (double)(in->batch * in->seq), C = cfg->hidden_size, V = cfg->vocab_size;
    /* embedding: rows read and written; backward: the gradient rows read, added into the
     * table's (read and write) */
    op(&w, MT_PK_EMBED, 0, 2 * 4 * t * C, 1, 0, 1.5, 1, 1);
    for (int l = 0; l < cfg->num_hidden_layers; l++) {
        const mt_layer_plan *p = &in->plan[l];
        elementwise(&w, MT_PK_NORM, 2 * t * C, 2, 4, w.fwd_times); /* input and post norms */
        elementwise(&w, MT_PK_NORM, 2 * t * C, 3, 2, w.fwd_times); /* two residual adds */
        predict_mixer(&w, in, p);
        predict_mlp(&w, in, p);
    }
    elementwise(&w, MT_PK_NORM, t * C, 2, 4, 1); /* final norm */
    /* lm_head: forward, the logits formed again in the backward, dX and dW; cross-entropy over
     * the fp32 logit rows (written and read; the backward writes their gradient) */
    gemm(&w, MT_PK_LMHEAD, t, V, C, V * C, 2);
    elementwise(&w, MT_PK_LMHEAD, t * V, 2, 5, 1);
    /* AdamW over the parameters this rank owns */
    op(&w, MT_PK_ADAMW, 15 * (double)in->owned_params, 28 * (double)in->owned_params, 1, 0, 0, 1,
       1);
    o->kind[MT_PK_ZERO3].bytes = in->zero3_bytes;
    o->kind[MT_PK_ZERO3].seconds = link_seconds(g, in->zero3_bytes, in->ranks, false);
    o->kind[MT_PK_A2A].bytes = in->alltoall_bytes;
    o->kind[MT_PK_A2A].seconds = link_seconds(g, in->alltoall_bytes, in->ep, true);
    for (int k = 0; k < MT_PK_COUNT; k++)
        *(k == MT_PK_ZERO3 || k == MT_PK_A2A ? &o->comm_s : &o->compute_s) += o->kind[k].seconds;
    o->step_s = o->compute_s + o->comm_s;
    o->overlap_s = o->compute_s > o->comm_s ? o->compute_s : o->comm_s;
    double counted = 0;
    for (int k = 0; k < MT_PK_COUNT; k++) counted += o->kind[k].flops;
    const double denom = o->step_s * g->peak_flops;
    o->tokens_per_s = o->step_s > 0 ? t * in->ranks / o->step_s : 0;
    o->mfu = denom > 0 ? 6 * in->params_active * t / denom : 0;
    o->mfu_lm_head = denom > 0 ? 6 * (in->params_active + in->params_lm_head) * t / denom : 0;
    o->hfu = denom > 0 ? counted / denom : 0;
}

/* The kinds in decreasing time: ranks[0..n) */
static int predict_order(const mt_predict_out *o, int *ranks) {
    int n = 0;
    for (int k = 0; k < MT_PK_COUNT; k++) {
        int i = n++;
        while (i > 0 && o->kind[ranks[i - 1]].seconds < o->kind[k].seconds) {
            ranks[i] = ranks[i - 1];
            i--;
        }
        ranks[i] = k;
    }
    return n;
}

void mt_predict_print(const mt_predict_in *in, const mt_predict_gpu *g, const mt_predict_out *o) {
    printf("predict_gpu=%s  # %s: bf16 dense %.0f TFLOP/s, HBM %.2f TB/s, NVLink %.0f GB/s each "
           "way, InfiniBand %.0f GB/s per GPU between nodes of %d; efficiencies GEMM %.2f, flash "
           "forward %.2f / backward %.2f, lightning block form %.2f, HBM %.2f, links %.2f "
           "(apps/info_predict.c, docs/benchmarks.md)\n",
           g->name, g->what, g->peak_flops * 1e-12, g->hbm_bw * 1e-12, g->nvlink_bw * 1e-9,
           g->ib_bw * 1e-9, g->node_gpus, g->eff_gemm, g->eff_attn_f, g->eff_attn_b,
           g->eff_lightning, g->eff_hbm, g->eff_link);
    printf("predict_layout=ranks %d ep %d gather %s recompute %s tokens_per_rank %lld (B %lld x T "
           "%lld)  # one optimizer step = one micro-step per rank; %lld tokens a step\n",
           in->ranks, in->ep, in->gather_bytes == 4 ? "fp32" : "bf16", in->recompute ? "on" : "off",
           (long long)(in->batch * in->seq), (long long)in->batch, (long long)in->seq,
           (long long)(in->batch * in->seq * in->ranks));
    printf("| kernel kind | TFLOP | GB | ms | share |\n|---|---:|---:|---:|---:|\n");
    int order[MT_PK_COUNT];
    const int n = predict_order(o, order);
    for (int i = 0; i < n; i++) {
        const mt_predict_cell *c = &o->kind[order[i]];
        printf("| %s | %.2f | %.2f | %.2f | %.1f %% |\n", kind_names[order[i]], c->flops * 1e-12,
               c->bytes * 1e-9, c->seconds * 1e3, o->step_s > 0 ? 100 * c->seconds / o->step_s : 0);
    }
    printf("predict_compute_s=%.4f  # every kernel kind above but the collectives, one after "
           "another\n",
           o->compute_s);
    printf("predict_comm_s=%.4f  # ZeRO-3 and all-to-all bytes sent per rank at the link rate\n",
           o->comm_s);
    printf("predict_step_s=%.4f  # no overlap\n", o->step_s);
    printf("predict_step_overlapped_s=%.4f  # communication fully hidden behind compute (or the "
           "reverse): max of the two\n",
           o->overlap_s);
    printf("predict_tokens_per_s=%.0f  # all %d ranks, no overlap (%.0f overlapped)\n",
           o->tokens_per_s, in->ranks,
           o->overlap_s > 0 ? o->tokens_per_s * o->step_s / o->overlap_s : 0);
    const double ov = o->overlap_s > 0 ? o->step_s / o->overlap_s : 0;
    printf("predict_mfu=%.4f  # 6 x params_active (model card: no embeddings, no lm_head) x "
           "tokens / (step x peak x GPUs), no overlap (%.4f overlapped)\n",
           o->mfu, o->mfu * ov);
    printf("predict_mfu_with_lm_head=%.4f  # the same with 6 x (params_active + lm_head)\n",
           o->mfu_lm_head);
    printf("predict_hfu=%.4f  # every FLOP counted above (recompute, attention, re-formed "
           "logits) / (step x peak x GPUs)\n",
           o->hfu);
    double sum = 0;
    printf("predict_decided_by=");
    for (int i = 0; i < n && sum < 0.75 * o->step_s; i++) {
        sum += o->kind[order[i]].seconds;
        printf("%s%s (%.1f %%)", i ? ", " : "", kind_names[order[i]],
               o->step_s > 0 ? 100 * o->kind[order[i]].seconds / o->step_s : 0);
    }
    printf("  # the kinds that make up three quarters of the step\n");
}
