/* msa.h: typed CPU kernels of MiniMax-M3's block-sparse attention (MSA, spec sections 4-5):
 * the indexer's block selection, the main attention over the selected blocks, the indexer's
 * sparse-KL loss, and the single-token decode steps; plus the support rule they share.
 *
 * Rows and blocks: tokens are packed in rows (B,T); seg (B,T) I32 (NULL: one sample per row)
 * and pos (B,T) I32 with pos = 0 at the first token of each run of equal segment ids and
 * pos[t] = pos[t-1] + 1 inside it (checked: cpu_msa_check_rows). A sample is a run, so its
 * first slot is rs(t) = t - pos[t]. Token j lies in block pos[j] / block of its sample; block
 * blk of query t's sample holds slots [rs(t) + blk*block, rs(t) + (blk+1)*block). Query t sees
 * key j when j is in its sample and j <= t: exactly transformers run on each sample alone (its
 * blocks anchored at slot 0, pos = slot). Unlike mt_attention, a segment id that comes back
 * after a gap starts a new sample.
 * Layouts: iq (B,T,Hi,Di), ik (B,T,1,Di); q (B,T,H,D), k, v (B,T,Hkv,D); idx (B,Hkv,T,topk)
 * I32 (index head h = kv head h selects for query heads h*G .. h*G+G-1, G = H/Hkv); lse (B,H,T).
 * Support of (b, kv head h, t): M_h(t) = {j : j in t's sample, j <= t, block(j) in
 * idx[b,h,t,:]}; every kernel iterates the selected blocks (cost topk*block keys per query).
 *
 * Queries apart from keys (context parallelism, issue 39): the training kernels take Tq query
 * rows and Tk key slots. q_slot (Tq) I32, increasing, gives the slot of the key row that query
 * row i sits at (a rank's local tokens, autograd/context_parallel.h); NULL: Tq = Tk and row i
 * is slot i. Then iq, q, out, dq, idx, lse, delta and mask have Tq rows; ik, k, v, dk, dv, dik,
 * pos and seg have Tk (the whole row's keys, gathered), and query row i is query slot q_slot[i]
 * in every rule above. */
#pragma once
#include <stdint.h>

#include "../../core/check.h"

/* topk bound: the selection keeps its candidates on the stack */
#define CPU_MSA_MAX_TOPK 4096

/* The key slot of query row i (see above). */
static inline int64_t msa_slot(const int32_t *q_slot, int64_t i) { return q_slot ? q_slot[i] : i; }

/* Dies unless pos, seg (NULL: one sample) follow the row rule above. */
void cpu_msa_check_rows(const int32_t *pos, const int32_t *seg, int64_t B, int64_t T);
/* Dies unless q_slot (Tq) is increasing in [0, Tk), or NULL with Tq = Tk. */
void cpu_msa_check_slots(const int32_t *q_slot, int64_t Tq, int64_t Tk);

/* The slots [*j0, *j1] of block blk that query t (at position pos_t) sees: empty (*j1 < *j0)
 * never happens for 0 <= blk <= pos_t / block. */
static inline void msa_block_keys(int64_t t, int32_t pos_t, int32_t blk, int block, int64_t *j0,
                                  int64_t *j1) {
    *j0 = t - pos_t + (int64_t)blk * block;
    const int64_t hi = *j0 + block - 1;
    *j1 = hi < t ? hi : t;
}

/* ---- selection (spec 4.1-4.2) -------------------------------------------------------------- */

/* idx (B,Hi,T,topk): per (b, h, t) the local block pos[t]/block first, then the topk-1
 * highest-scoring earlier blocks of t's sample in descending score, ties to the lower block id,
 * -1 in the trailing slots when fewer blocks are visible. Score of block blk: the maximum over
 * its keys j <= t of the fp32 product iq_h(t) . ik(j) (sgemm, as transformers' fp32 matmul).
 * A NaN block score is never chosen. work: cpu_msa_select_work(T, block) floats. */
void cpu_msa_select_forward(int32_t *idx, float *work, const float *iq, const float *ik,
                            const int32_t *pos, const int32_t *seg, const int32_t *q_slot,
                            int64_t B, int64_t Tq, int64_t Tk, int64_t Hi, int64_t Di, int block,
                            int topk);
int64_t cpu_msa_select_work(int64_t Tk, int block);

/* One generation step: idx (B,Hi,topk) for the new query iq (B,Hi,Di) of row b at position
 * t_len[b]-1 of a one-sample row whose index keys are ik_cache (B,t_max,Di) positions
 * [0, t_len[b]) (the last the new token's); t_len (B) host memory, rows may differ (ragged
 * batches). The same rule as the forward (row t_len-1 of it). work: B*Hi*((t_max-1)/block+1)
 * floats (cpu_msa_select_decode_work). */
void cpu_msa_select_decode(int32_t *idx, float *work, const float *iq, const float *ik_cache,
                           const int32_t *t_len, int64_t B, int64_t t_max, int64_t Hi, int64_t Di,
                           int block, int topk);
int64_t cpu_msa_select_decode_work(int64_t B, int64_t Hi, int64_t t_max, int block);

/* The top-k rule on one row's block scores bs[0 .. local] (local = pos_t / block): out (topk). */
void cpu_msa_topk_row(int32_t *out, const float *bs, int32_t local, int topk);

/* ---- attention over the selection (spec 4.3) ----------------------------------------------- */

/* Dies unless every idx[b,h,t,:] holds distinct blocks 0 .. pos[t]/block, the local block
 * among them, then only -1 (the kernels stop at the first -1). */
void cpu_msa_check_idx(const int32_t *idx, const int32_t *pos, const int32_t *q_slot, int64_t B,
                       int64_t Hkv, int64_t Tq, int64_t Tk, int block, int topk);

/* out (B,T,H,D) = softmax over M_h(t) of scale q_g(t) . k_h(j), times v; lse (B,H,T) or NULL.
 * fp32 products (sgemm per selected block) and exp (cpu_expf), the row sums in double. work:
 * cpu_msa_attention_work(H/Hkv, block, topk) floats. */
void cpu_msa_attention_forward(float *out, float *lse, float *work, const float *q, const float *k,
                               const float *v, const int32_t *idx, const int32_t *pos,
                               const int32_t *seg, const int32_t *q_slot, int64_t B, int64_t Tq,
                               int64_t Tk, int64_t H, int64_t Hkv, int64_t D, int block, int topk,
                               float scale);
int64_t cpu_msa_attention_work(int64_t G, int block, int topk);

/* The inverse of a selection, per (b, h): for each block-start slot jb (of Tk), the query rows t
 * (in increasing order) whose idx[b,h,t,:] holds that block: queries of (b, h, jb) are
 * list[off[jb] .. off[jb+1]) with off = inv + (b*Hs + h)*(Tk+1) and list = inv + B*Hs*(Tk+1) +
 * (b*Hs + h)*Tq*topk. inv: cpu_msa_inverse_ints(B, Hs, Tq, Tk, topk) ints. */
void cpu_msa_inverse(int32_t *inv, const int32_t *idx, const int32_t *pos, const int32_t *q_slot,
                     int64_t B, int64_t Hs, int64_t Tq, int64_t Tk, int block, int topk);
int64_t cpu_msa_inverse_ints(int64_t B, int64_t Hs, int64_t Tq, int64_t Tk, int topk);

/* dq += scale sum_j ds k_j, dk_j += scale sum ds q, dv_j += sum p dout over the support only
 * (dk, dv summed over the group's query heads), from the saved lse; any gradient may be NULL.
 * dq by query; dk, dv by key block through the selection's inverse (one thread owns a key
 * block: no atomics, deterministic). work: cpu_msa_attention_bwd_work(...) bytes. */
void cpu_msa_attention_backward(float *dq, float *dk, float *dv, void *work, const float *dout,
                                const float *out, const float *lse, const float *q, const float *k,
                                const float *v, const int32_t *idx, const int32_t *pos,
                                const int32_t *seg, const int32_t *q_slot, int64_t B, int64_t Tq,
                                int64_t Tk, int64_t H, int64_t Hkv, int64_t D, int block, int topk,
                                float scale);
size_t cpu_msa_attention_bwd_work(int64_t B, int64_t Tq, int64_t Tk, int64_t H, int64_t Hkv,
                                  int64_t D, int block, int topk);

/* One generation step: out (B,H,D) for the new query q (B,H,D) of row b at position t_len[b]-1
 * over cache positions [0, t_len[b]) of k_cache, v_cache (B,t_max,Hkv,D), restricted to the blocks
 * of idx (B,Hkv,topk) from cpu_msa_select_decode. Online softmax in double, one row at a time. */
void cpu_msa_attention_decode(float *out, const float *q, const float *k_cache,
                              const float *v_cache, const int32_t *idx, const int32_t *t_len,
                              int64_t B, int64_t t_max, int64_t H, int64_t Hkv, int64_t D,
                              int block, int topk, float scale);
/* A chunk of one cache row (chunked prefill, msa_chunk.c): out (T,H,D) for the T queries q
 * (T,H,D) and index queries iq (T,Hkv,Di) at positions t0 .. t0+T-1 of the caches k_cache,
 * v_cache (t_max,Hkv,D) and ik_cache (t_max,Di), which hold the chunk's keys already (one index
 * head per kv head). Token t is the decode step at t_len = t0 + t + 1: cpu_attention_decode
 * while its blocks number at most topk, else cpu_msa_select_decode and
 * cpu_msa_attention_decode; bit-equal to those calls. */
void cpu_msa_chunk(float *out, const float *q, const float *iq, const float *k_cache,
                   const float *v_cache, const float *ik_cache, int64_t t0, int64_t T,
                   int64_t t_max, int64_t H, int64_t Hkv, int64_t D, int64_t Di, int block,
                   int topk, float scale);

/* ---- the indexer's sparse-KL loss (spec 5.2-5.3) ------------------------------------------- */

/* Returns coef / (Hi denom) sum_{b,t: mask != 0} sum_h KL(Pbar_h(t) || Q_h(t)), with
 * Pbar_h(t,j) the mean over query heads g = h*G .. h*G+G-1 of softmax_{M_h(t)} scale q_g.k_h(j)
 * and Q_h(t,j) = softmax_{M_h(t)} index_scale iq_h(t).ik(j). mask (B,T) or NULL (all).
 * Logits from fp32 products (8 fp32 lanes, then double), softmaxes and the KL in double.
 * work: cpu_msa_kl_work(...) bytes. */
double cpu_msa_kl_forward(void *work, const float *q, const float *k, const float *iq,
                          const float *ik, const int32_t *idx, const int32_t *pos,
                          const int32_t *seg, const float *mask, const int32_t *q_slot, int64_t B,
                          int64_t Tq, int64_t Tk, int64_t H, int64_t Hkv, int64_t D, int64_t Di,
                          int block, int topk, float scale, float index_scale, float coef,
                          float denom);
size_t cpu_msa_kl_work(int64_t B, int64_t Tq, int block, int topk);

/* diq_h(t) += c sum_j ds ik(j), dik(j) += c sum_t sum_h ds iq_h(t), ds = Q - Pbar on the
 * support, c = gout coef index_scale / (Hi denom); diq or dik may be NULL. dik by key block
 * through the inverse (no atomics). work: cpu_msa_kl_bwd_work(...) bytes. */
void cpu_msa_kl_backward(float *diq, float *dik, void *work, float gout, const float *q,
                         const float *k, const float *iq, const float *ik, const int32_t *idx,
                         const int32_t *pos, const int32_t *seg, const float *mask,
                         const int32_t *q_slot, int64_t B, int64_t Tq, int64_t Tk, int64_t H,
                         int64_t Hkv, int64_t D, int64_t Di, int block, int topk, float scale,
                         float index_scale, float coef, float denom);
size_t cpu_msa_kl_bwd_work(int64_t B, int64_t Tq, int64_t Tk, int64_t H, int64_t Hkv, int64_t Di,
                           int block, int topk);
