/* lightning.h: typed CPU kernels for lightning attention (spec section 4).
 *
 * Per (batch b, head h), with gamma = exp(-lambda_h) and rows q_t, k_t, v_t of length D:
 *   S_t = gamma S_{t-1} + k_t^T v_t,  o_t = q_t S_t
 *   <=> o_t = sum_{s = start_t .. t} gamma^(t-s) (q_t . k_s) v_s
 * where start_t is the first position of t's segment: the state resets at every t > 0 with
 * seg[b,t] != seg[b,t-1] (seg NULL: one segment per row).
 *
 * Layouts: qkv (B,T,H,3D) with q|k|v per head (the fused projection's head-major layout),
 * out and dout (B,T,H,D), decay (H) lambda per head, seg (B,T) or NULL, state (B,H,D,D) with
 * S[c][d]: c indexes the key dim, d the value dim. fp32 storage; the naive form and the decode
 * kernels accumulate in double, the block form in fp32 (sgemm, lightning_block.c).
 * Backwards ACCUMULATE (+=) into dqkv. D <= CPU_LIGHTNING_MAX_D. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CPU_LIGHTNING_MAX_D 256

/* Naive O(T^2) form: the direct sum over s, weights exp(-lambda (t-s)) in double. */
void cpu_lightning_forward_naive(float *out, const float *qkv, const float *decay,
                                 const int32_t *seg, int B, int T, int H, int D);
void cpu_lightning_backward_naive(float *dqkv, const float *dout, const float *qkv,
                                  const float *decay, const int32_t *seg, int B, int T, int H,
                                  int D);

/* Block form (spec 4.4): per block of `block` positions (the last may be shorter) an exact
 * intra-block term plus the inter-block readout of an fp32 DxD state carried across blocks.
 * state (B,H,D,D) is a workspace that holds the final state S_{T-1} on return (the decode
 * cache; equal to cpu_lightning_state up to fp32 rounding). */
void cpu_lightning_forward_block(float *out, float *state, const float *qkv, const float *decay,
                                 const int32_t *seg, int B, int T, int H, int D, int block);
/* Backward of the block form (spec 4.9): a forward sweep over blocks recomputes the state for
 * dq's inter term; a reverse sweep carries dS (gradient of the state at a block's end) for the
 * inter terms of dk and dv. state and dstate (B,H,D,D) are workspaces. */
void cpu_lightning_backward_block(float *dqkv, float *state, float *dstate, const float *dout,
                                  const float *qkv, const float *decay, const int32_t *seg, int B,
                                  int T, int H, int D, int block);

/* The block form from an initial state s0 (B,H,D,D), the state after a position before the row
 * (NULL: zero): every query before the row's first reset also reads gamma^(t+1) q_t s0, and s0
 * reaches the final state (gamma^T s0) when the row has no reset. Equal to running the row after
 * the positions that built s0 (context parallelism's chunks, autograd/op_cp_lightning.c). */
void cpu_lightning_forward_block_from(float *out, float *state, const float *s0, const float *qkv,
                                      const float *decay, const int32_t *seg, int B, int T, int H,
                                      int D, int block);
/* Its backward, given dsT (B,H,D,D), the gradient of the final state from what follows the row
 * (NULL: zero): dqkv += as above; dstate holds on return the gradient of s0 (both paths: the
 * queries' readout and, without a reset, dsT through gamma^T s0). */
void cpu_lightning_backward_block_from(float *dqkv, float *state, float *dstate, const float *s0,
                                       const float *dsT, const float *dout, const float *qkv,
                                       const float *decay, const int32_t *seg, int B, int T, int H,
                                       int D, int block);
/* The gradient of s0 through the row's readout alone (dsT = 0), in double:
 * g (B,H,D,D) = sum over t before the row's first reset of gamma^(t+1) q_t^T do_t. */
void cpu_lightning_state_grad(float *g, const float *dout, const float *qkv, const float *decay,
                              const int32_t *seg, int B, int T, int H, int D);

/* The block form in the bf16 GEMM mode (node ip[1] = MT_BF16): the rounding points of
 * lightning_bf16.c's header, which the CUDA path shares. work: B*H times
 * cpu_lightning_bf16_scratch_floats(T, D, block) floats. */
size_t cpu_lightning_bf16_scratch_floats(int T, int D, int block);
void cpu_lightning_forward_block_bf16(float *out, float *work, const float *qkv, const float *decay,
                                      const int32_t *seg, int B, int T, int H, int D, int block);
void cpu_lightning_backward_block_bf16(float *dqkv, float *work, const float *dout,
                                       const float *qkv, const float *decay, const int32_t *seg,
                                       int B, int T, int H, int D, int block);

/* Decode support (generation). The final state S_{T-1} of each (b,h) after T >= 1 positions
 * (only its last segment counts), accumulated in double: state (B,H,D,D). */
void cpu_lightning_state(float *state, const float *qkv, const float *decay, const int32_t *seg,
                         int B, int T, int H, int D);
/* One recurrent step for the next token: S = gamma S + k^T v (fp32 state), then o = q S.
 * state (B,H,D,D) updated in place, qkv_t (B,H,3D), out (B,H,D). */
void cpu_lightning_decode_step(float *state, const float *qkv_t, const float *decay, float *out,
                               int B, int H, int D);
/* T recurrent steps of one row (chunked prefill), cpu_lightning_decode_step's arithmetic in
 * token order, bit-equal to T calls of it: state (H,D,D) in place, qkv (T,H,3D), out (T,H,D). */
void cpu_lightning_chunk(float *state, const float *qkv, const float *decay, float *out, int T,
                         int H, int D);

/* ---- helpers shared by lightning.c and lightning_block.c ---- */

/* Dies naming the kernel when a dimension is out of range. */
void cpu_lightning_check_dims(const char *kernel, int B, int T, int H, int D);

/* Does the state reset at position t of this row? seg_row NULL: never. */
static inline bool cpu_lightning_resets(const int32_t *seg_row, int t) {
    return seg_row && t > 0 && seg_row[t] != seg_row[t - 1];
}

static inline double cpu_lightning_dot(const float *a, const float *b, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}
