/* lightning_fused.cuh: the fused kernels of lightning's block form in the bf16 mode at D = 64 or
 * 128 (kernels/cuda/lightning_fused.cu), called by lightning_block.cu. */
#pragma once
#include "cuda_ops.cuh"

/* Whether a bf16 node of head dim D takes the fused kernels: D = 64 or 128, unless
 * MT_LIGHTNING_FUSED=0 (read once, at the first call) selects the GEMM form. */
bool cuda_lightning_fused_on(int D);
/* Overrides the environment (bench/gpu_ops.cu times both forms): 1 fused, 0 the GEMM form. */
void cuda_lightning_fused_select(int on);

/* An operand's rows where they lie: position t of batch b, head h at p + ((b T + t) H + h) W +
 * off, D fp32 values (qkv: W = 3D and off 0, D or 2D; dout: W = D). */
struct ltf_rows {
    const float *p;
    int W, off;
};
/* The rows of a result: out (or +=) at p + ((b T + t) H + h) W + off. */
struct ltf_out {
    float *p;
    int W, off;
    bool add;
};
/* An operand's decay, as lightning_block.cu's pack folds it in (t in block [b0, e]): none;
 * g^(t - b0 + 1) before the block's first reset (0 from it on); g^(e - t) from its last reset
 * on (0 before it; the block start when it has none). */
enum { LTF_RAW = 0, LTF_DECAY_Q = 1, LTF_DECAY_K = 2 };
/* The block form's geometry and its setup (lightning_block.cu): vis (B, T) the first visible key
 * of each position, info (B, nblk) each block's first and last reset, tab (H, L + 1) g^n. */
struct ltf_geom {
    const int32_t *vis;
    const int2 *info;
    const double *tab;
    int B, T, H, D, L, nblk;
};

/* St (B H nblk, D, D) fp32 = per block A~^T B over its rows, A~ = a with decay akind. */
void cuda_lightning_fused_state(const char *what, float *St, ltf_rows a, int akind, ltf_rows b,
                                const ltf_geom &g);
/* Per block and row x (queries, or keys when key_rows: the mask transposed):
 *   out_x (+)= r~_x op(St_blk) + sum_y R(fl(fl(a_x . b_y) A)) c_y
 * with r~ = r with decay rkind, op(St) = St or St^T (state_t), St (B H nblk, D, D) bf16. */
void cuda_lightning_fused_rows(const char *what, ltf_out out, ltf_rows a, ltf_rows b, ltf_rows c,
                               bool key_rows, ltf_rows r, int rkind, const __nv_bfloat16 *state,
                               bool state_t, const ltf_geom &g);
