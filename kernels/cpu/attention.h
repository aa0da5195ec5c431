/* attention.h: typed CPU kernels for partial NeoX RoPE and causal GQA softmax attention
 * (spec section 5), plus the single-token decode step used by generation.
 * Layouts (contiguous, outermost first): activations (B,T,H,D) / (B,T,Hkv,D); a row of N = B*T
 * rows is one token; the log-sum-exp is (B,H,T); the KV cache is (B,Tmax,Hkv,D).
 * Query head h reads kv head h / (H/Hkv) (consecutive groups, HF repeat_interleave). */
#pragma once
#include <stdbool.h>
#include <stdint.h>

/* Bounds that let the kernels keep per-row buffers on the stack (no malloc inside ops). */
#define CPU_ROPE_MAX_ROTARY 1024
#define CPU_ATTN_MAX_D      1024

/* ---- RoPE ---------------------------------------------------------------------------------- */

/* inv_freq[i] = 1 / theta^(2i/rotary_dim), i < rotary_dim/2, rounded the way HF does it in
 * fp32: exponent (float)(2i) / (float)rotary_dim, fp32 power, fp32 reciprocal. */
void cpu_rope_inv_freq(float *inv_freq, int64_t rotary_dim, float theta);

/* y = rope(x). x, y (N,H,D) with y == x allowed (in place), pos (N) absolute positions (the
 * decode step passes N = B rows of one position each). Angles follow HF in fp32:
 * angle = (float)pos * inv_freq (one fp32 product); cos/sin are the fp32 roundings of the
 * double cos/sin of that fp32 angle; the rotation is done in fp32 like HF's
 * q*cos + rotate_half(q)*sin. Dims >= rotary_dim are copied bit for bit. */
void cpu_rope_fwd(float *y, const float *x, const int32_t *pos, int64_t N, int64_t H, int64_t D,
                  int64_t rotary_dim, float theta);
/* dx += R(pos)^T dy: the inverse rotation; passthrough dims add dy. */
void cpu_rope_bwd(float *dx, const float *dy, const int32_t *pos, int64_t N, int64_t H, int64_t D,
                  int64_t rotary_dim, float theta);

/* ---- causal GQA softmax attention ---------------------------------------------------------- */

/* out (B,T,H,D) = softmax(scale q k^T + mask) v with the causal mask, and with seg (B,T)
 * (NULL: one segment) position t sees s <= t only where seg[s] == seg[t].
 * fp32 tiled GEMMs (attention.c's header): scores and the weighted sum by sgemm on 64 x 64
 * tiles, online max-subtracted softmax in fp32.
 * lse (B,H,T) gets log(sum_s exp(scale q_t.k_s)) in fp32, or is skipped when NULL. */
void cpu_attention_fwd(float *out, float *lse, const float *q, const float *k, const float *v,
                       const int32_t *seg, int64_t B, int64_t T, int64_t H, int64_t Hkv, int64_t D,
                       float scale);
/* Flash-style backward from the saved lse: P = exp(scale q k^T - lse) recomputed,
 * dS = P (dP - rowsum(dO o O)), dq += scale dS k, dk += scale dS^T q, dv += P^T dO, with dk and
 * dv summed over the H/Hkv query heads of each group. Any of dq, dk, dv may be NULL (skipped).
 * delta: scratch of B*H*T doubles. fp32 tiled GEMMs accumulating into dq, dk, dv, parallel
 * over (b, kv head); the bf16 variant below keeps the row-at-a-time double sums. */
void cpu_attention_bwd(float *dq, float *dk, float *dv, double *delta, const float *dout,
                       const float *out, const float *lse, const float *q, const float *k,
                       const float *v, const int32_t *seg, int64_t B, int64_t T, int64_t H,
                       int64_t Hkv, int64_t D, float scale);

/* The bf16 mode (mt_ctx.compute_dtype = MT_BF16; rounding points in attention.c's header):
 * q, k, v (and dout) must arrive rounded to bf16; these round p~ / p and ds themselves. */
void cpu_attention_fwd_bf16(float *out, float *lse, const float *q, const float *k, const float *v,
                            const int32_t *seg, int64_t B, int64_t T, int64_t H, int64_t Hkv,
                            int64_t D, float scale);
void cpu_attention_bwd_bf16(float *dq, float *dk, float *dv, double *delta, const float *dout,
                            const float *out, const float *lse, const float *q, const float *k,
                            const float *v, const int32_t *seg, int64_t B, int64_t T, int64_t H,
                            int64_t Hkv, int64_t D, float scale);

/* One generation step: out (B,H,D) = attention of the new query q (B,H,D) (RoPE already applied)
 * over cache positions [0, t_len) of k_cache, v_cache (B,Tmax,Hkv,D), whose last filled
 * position t_len-1 holds the new token's k and v. No segment mask (one sample per batch row).
 * One row in double (attention.c's attn_row), so a step equals row t_len-1 of the full causal
 * forward over the same (roped) q, k, v up to the forward's fp32 rounding. */
void cpu_attention_decode(float *out, const float *q, const float *k_cache, const float *v_cache,
                          const int32_t *t_len, int64_t B, int64_t t_max, int64_t H, int64_t Hkv,
                          int64_t D, float scale);
/* A chunk of one cache row (chunked prefill): out (T,H,D) = the attention of the T queries q
 * (T,H,D) at positions t0 .. t0+T-1 over k_cache, v_cache (Tmax,Hkv,D) of that row, which hold
 * the chunk's keys and values already; query t sees positions [0, t0 + t]. The prefill's fp32
 * tiles (cpu_attention_fwd), so a chunk equals the prefill's rows t0 .. t0+T-1 up to the
 * tiles' fp32 rounding (and the one-token decode step to fp32 rounding). */
void cpu_attention_chunk(float *out, const float *q, const float *k_cache, const float *v_cache,
                         int64_t t0, int64_t T, int64_t t_max, int64_t H, int64_t Hkv, int64_t D,
                         float scale);

/* ---- context parallelism: local queries against gathered keys ------------------------------ */

/* The attention of Tq query rows at positions q_pos (Tq, the same for every batch row, each in
 * [0, Tk)) against Tk keys at positions 0 .. Tk-1: query row i sees key s <= q_pos[i], and with
 * segments (seg_q (B,Tq) and seg_k (B,Tk), both or neither) only where seg_k[s] == seg_q[i].
 * q, out (B,Tq,H,D), k, v (B,Tk,Hkv,D), lse (B,H,Tq). The kernels above on that geometry (fp32
 * tiles, or bf16 rows when bf16): with Tq = Tk, q_pos the identity and seg_q = seg_k they compute
 * cpu_attention_fwd / _bwd (and the _bf16 forms) bit for bit. Key tiles above every position of
 * a query tile are skipped, so a rank of context parallelism's causal layout (autograd/
 * context_parallel.h) does its rows' share of the work only. The backward accumulates into dq
 * (B,Tq,H,D) and dk, dv (B,Tk,Hkv,D); delta: B*H*Tq doubles of scratch. */
void cpu_attention_pos_fwd(float *out, float *lse, const float *q, const float *k, const float *v,
                           const int32_t *seg_q, const int32_t *seg_k, const int32_t *q_pos,
                           int64_t B, int64_t Tq, int64_t Tk, int64_t H, int64_t Hkv, int64_t D,
                           float scale, bool bf16);
void cpu_attention_pos_bwd(float *dq, float *dk, float *dv, double *delta, const float *dout,
                           const float *out, const float *lse, const float *q, const float *k,
                           const float *v, const int32_t *seg_q, const int32_t *seg_k,
                           const int32_t *q_pos, int64_t B, int64_t Tq, int64_t Tk, int64_t H,
                           int64_t Hkv, int64_t D, float scale, bool bf16);
