/* lightning_fused.cuh: the fused intra-block kernel of lightning's block form in the bf16 mode
 * (kernels/cuda/lightning_fused.cu), called by lightning_block.cu. */
#pragma once
#include "cuda_ops.cuh"

/* Whether a bf16 node of head dim D takes the fused intra kernel: D = 64 or 128, unless
 * MT_LIGHTNING_FUSED=0 (read once, at the first call) selects the GEMM form. */
bool cuda_lightning_fused_on(int D);
/* Overrides the environment (bench/gpu_ops.cu times both forms): 1 fused, 0 the GEMM form. */
void cuda_lightning_fused_select(int on);
/* out (N, L, ldo) fp32 = per block, the rows x of sum_y R(fl(fl(a_x . b_y) A)) c_y (the decay
 * mask A; key_rows: x are keys and the mask is transposed), written (=), padding rows as 0.
 * a, b, c: packed bf16 operands (N, L, ldx), N = B*H*nblk blocks of L rows; vis (B, T) the first
 * visible key of each position, tab (H, L + 1) the decay powers (lightning_block.cu's setup). */
void cuda_lightning_fused_intra(const char *what, float *out, int ldo, const __nv_bfloat16 *a,
                                const __nv_bfloat16 *b, const __nv_bfloat16 *c, int ldx,
                                bool key_rows, const int32_t *vis, const double *tab, int B, int T,
                                int H, int D, int L, int nblk);
