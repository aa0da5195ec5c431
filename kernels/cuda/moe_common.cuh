/* moe_common.cuh: the device code the MoE expert ops share, defined in moe_common.cu: the fused
 * experts (moe_experts.cu) and the split ops (moe_dispatch.cu, moe_expert_ffn.cu,
 * moe_combine.cu; autograd/ops.h) run the same kernels, so both forms round and sum alike.
 *
 * Shapes: N tokens, K experts per token, E experts, C hidden, F expert FFN width; A = N*K
 * assignments (a = n*K+j) sorted by expert into slots (kernels/cpu/moe.h).
 *
 * Every function launches nothing when its element count is 0, and none synchronises except
 * cuda_moe_perm_build (one copy). None opens a cuda_prof region: the callers do, by phase. */
#pragma once
#include "cuda_ops.cuh"

/* Builds offsets (E+1), perm (A) and inv (A) into n->saved[0..2] from the (N,K) ids in n->in[1]
 * with the block-parallel stable counting sort (sort.cuh, one pass, E <= 1024 buckets), and
 * returns the offsets on the host: n->host (E+1 int32, allocated by the constructor), kept for
 * the backward and the expert ops. Dies naming the position on an id outside [0,E). One
 * synchronising copy brings the id check and the offsets together; a bad id is left out of the
 * sort, so it never indexes memory. */
const int32_t *cuda_moe_perm_build(const mt_node *n, int64_t N, int K, int E, const char *op);

/* xp[s,:] = x[perm[s] / K, :] for slots s < rows; x (N,C), xp (rows,C). */
void cuda_moe_gather(float *xp, const float *x, const int32_t *perm, int64_t rows, int K, int64_t C,
                     const char *op);

/* out[n,:] (+)= sum_j weight[n,j] * yp[inv[n*K+j], :], j in order, one writer per row
 * (deterministic); weight NULL means 1. yp (N*K,C), out (N,C). */
void cuda_moe_combine_rows(float *out, const float *yp, const int32_t *inv, const float *weight,
                           int64_t N, int K, int64_t C, bool accumulate, const char *op);

/* g = act(h1, h3) (silu(h1) * h3, or the clamped SwiGLU of mt_act) over count elements; into
 * gb, rounded to bf16, when gb is not NULL (bf16 mode: only the rounding is a GEMM operand, as
 * on the CPU), else into g. */
void cuda_moe_act(float *g, __nv_bfloat16 *gb, const float *h1, const float *h3, int64_t count,
                  mt_act act, const char *op);

/* dweight[perm[s]] += <u_s, g_s> (double sum, fp32 result) for slots s < rows; u, g (rows,F). */
void cuda_moe_dweight(float *dweight, const float *u, const float *g, const int32_t *perm,
                      int64_t rows, int64_t F, const char *op);

/* g[s,:] *= weight[perm[s]] for s < rows, g (rows,F), in place or (gb not NULL) rounded to
 * bf16 into gb. */
void cuda_moe_scale_rows(float *g, __nv_bfloat16 *gb, const float *weight, const int32_t *perm,
                         int64_t rows, int64_t F, const char *op);

/* With dg = weight[perm[s]] u: dh3 = dg silu(h1) and, in place of u, dh1 = dg h3 silu'(h1)
 * (the clamped SwiGLU's partial derivatives when act.clamp);
 * in bf16 mode (dh1b not NULL) both only rounded, into dh1b and dh3b (GEMM operands only).
 * u, dh3, h1, h3 (rows,F). */
void cuda_moe_dh(float *u, float *dh3, __nv_bfloat16 *dh1b, __nv_bfloat16 *dh3b, const float *h1,
                 const float *h3, const float *weight, const int32_t *perm, int64_t rows, int64_t F,
                 mt_act act, const char *op);

/* A GEMM operand: src itself in fp32 mode; in bf16 mode (n->ip[0] == MT_BF16) its bf16 copy
 * (count elements of node scratch, cast by one launch). */
const void *cuda_moe_operand(const mt_node *n, const float *src, int64_t count, const char *what);
/* count bf16 / count floats of node scratch (at least one element) */
__nv_bfloat16 *cuda_moe_bf16_scratch(const mt_node *n, int64_t count, const char *what);
float *cuda_moe_f32_scratch(const mt_node *n, int64_t count, const char *what);
