/* moe.h: typed CPU kernels of the MoE ops (spec sections 6 and 7.2): router, experts and the
 * load-balancing aux loss, plus the token permutation helpers the experts use (exposed so the
 * sharded trainer and the CUDA port can reuse and test them).
 *
 * Shapes: N router rows (tokens), E experts, K experts per token, C hidden, F expert FFN width.
 * An "assignment" a = n*K + j is token n's j-th choice; the permutation sorts assignments by
 * expert (stable: ascending a within an expert), so "slot" s in [offsets[e], offsets[e+1])
 * holds expert e's rows contiguously. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "autograd/tensor.h"

/* ---- router ---- */

/* p = softmax(logits[n]) (double sums, stored fp32); idx[n] = the K largest p in descending
 * order, ties going to the lower expert index (strict > while scanning e = 0..E-1); w[n,j] =
 * p[idx[n,j]] / sum_j p[idx[n,j]] (double). logits, p (N,E); w (N,K); idx (N,K). */
void cpu_moe_route_fwd(const float *logits, int64_t N, int E, int K, float *p, float *w,
                       int32_t *idx);
/* dlogits (N,E) += the gradient through the renormalisation and the softmax; the selection
 * itself is piecewise constant (no gradient). dw, w, idx (N,K); p (N,E) from the forward. */
void cpu_moe_route_bwd(const float *dw, const float *p, const float *w, const int32_t *idx,
                       int64_t N, int E, int K, float *dlogits);

/* s = sigmoid(logits[n]) (double, stored fp32); idx[n] = the K largest s + bias (fp32 sums;
 * bias (E) may be NULL) in descending order, ties to the lower expert index; w[n,j] =
 * scale * s[idx[n,j]] / sum_j s[idx[n,j]] (double). logits, s (N,E); w, idx (N,K). */
void cpu_moe_route_sigmoid_fwd(const float *logits, const float *bias, int64_t N, int E, int K,
                               float scale, float *s, float *w, int32_t *idx);
/* dlogits (N,E) += the gradient through the renormalisation and the sigmoid, the chosen
 * experts only (the selection and the bias carry no gradient). */
void cpu_moe_route_sigmoid_bwd(const float *dw, const float *s, const float *w, const int32_t *idx,
                               int64_t N, int E, int K, float scale, float *dlogits);

/* ---- permutation helpers (moe_dispatch.c, moe_combine.c) ---- */

/* Counting sort of the N*K assignments by expert. offsets (E+1): expert e owns slots
 * [offsets[e], offsets[e+1]); perm (N*K): slot -> assignment; inv (N*K): assignment -> slot.
 * Dies naming the position when an expert id is outside [0, E). Returns the largest count. */
int64_t cpu_moe_perm_build(const int32_t *idx, int64_t N, int K, int E, int32_t *offsets,
                           int32_t *perm, int32_t *inv);
/* The largest expert row count of a built permutation. */
int64_t cpu_moe_perm_max_rows(const int32_t *offsets, int E);
/* xp[s,:] = x[perm[s] / K, :] for slots s in [0, rows). x (N,C), xp (rows,C). */
void cpu_moe_rows_gather(const float *x, const int32_t *perm, int64_t rows, int K, int64_t C,
                         float *xp);
/* out[n,:] += sum_j weight[n,j] * yp[inv[n*K+j], :] for j = 0..K-1 in order (one writer per
 * row: deterministic). weight NULL means 1 (the dx path). yp (N*K,C), out (N,C). */
void cpu_moe_rows_combine(const float *yp, const int32_t *inv, const float *weight, int64_t N,
                          int K, int64_t C, float *out);

/* ---- one expert (moe_expert_ffn.c) ---- */

/* Expert rows xe (rows,C) -> h1 = xe w1^T, h3 = xe w3^T (rows,F), g = act(h1, h3) (rows,F;
 * silu(h1) h3, or the clamped SwiGLU of mt_act;
 * rounded through bf16 when bf16), ye = g w2^T (rows,C). infer (weights without gradients:
 * generation): up to MT_GEMM_ROWS_MAX rows through cpu_gemm_rows, each row's result
 * independent of the count. w1, w3 (F,C), w2 (C,F) and xe are
 * the GEMM operands as given: in bf16 mode the caller passes rounded copies. */
void cpu_moe_expert_fwd(int64_t rows, int64_t C, int64_t F, bool bf16, bool infer, mt_act act,
                        const float *xe, const float *w1, const float *w3, const float *w2,
                        float *h1, float *h3, float *g, float *ye);
/* Accumulates into every non-NULL gradient of one expert whose rows' output entered the loss
 * weighted: dpe (rows,C) = the gradient of w_s y_s, w_s = weight[pe[s]] (weight flat (N*K),
 * pe the rows' assignments), h1, h3 (rows,F) from the forward. dxe (rows,C), dweight (N*K),
 * dw1, dw3 (F,C), dw2 (C,F). Operands as in the forward (rounded copies in bf16 mode; xe only
 * read for dw1/dw3, w1 and w3 only for dxe). Scratch g, u, dh3 (rows,F). */
void cpu_moe_expert_bwd(int64_t rows, int64_t C, int64_t F, bool bf16, mt_act act, const float *dpe,
                        const float *xe, const float *weight, const int32_t *pe, const float *w1,
                        const float *w3, const float *w2, const float *h1, const float *h3,
                        float *g, float *u, float *dh3, float *dxe, float *dweight, float *dw1,
                        float *dw3, float *dw2);

/* ---- experts ---- */

typedef struct {
    int64_t N, C, F;
    int E, K;
    mt_act act; /* the experts' activation (autograd/tensor.h) */
} cpu_moe_dims;

/* The permutation of one call, saved for the backward. */
typedef struct {
    int32_t *offsets; /* (E+1) */
    int32_t *perm;    /* (N*K) */
    int32_t *inv;     /* (N*K) */
} cpu_moe_perm;

/* ---- aux loss ---- */

/* sum_n sum_e coef[e] * softmax(logits[n])[e], in double. logits (N,E), coef (E). */
double cpu_moe_aux_fwd(const float *logits, const float *coef, int64_t N, int E);
/* dlogits[n,e] += dloss * p[e] * (coef[e] - sum_e' coef[e'] p[e']). */
void cpu_moe_aux_bwd(float dloss, const float *logits, const float *coef, int64_t N, int E,
                     float *dlogits);
