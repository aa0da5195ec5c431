/* ops.h: the differentiable ops model code is written in. Each returns a new tensor carved
 * from the context's arena and records a tape node when gradients are on.
 * Shapes (outermost first): B batch, T sequence, C hidden, H query heads, Hkv key/value heads,
 * D head dim, E experts, K experts per token, F expert FFN width, V vocabulary, N = B*T rows.
 * All float tensors are F32 on the CPU backend; ids, labels, positions and segments are I32. */
#pragma once
#include "context_parallel.h"
#include "tensor.h"

/* Same data, new shape (same numel). Backward adds the gradient back. */
mt_tensor *mt_view(mt_ctx *c, mt_tensor *x, int ndim, const int64_t *shape);

/* out[b,t,:] = table[ids[b,t],:]. ids (B,T) I32, table (V,C) -> (B,T,C). */
/* [a | b] along the last dimension: a (..., Da), b (..., Db) with the same leading dims ->
 * (..., Da + Db) (the logits of an lm_head split by vocabulary rows). */
mt_tensor *mt_concat(mt_ctx *c, mt_tensor *a, mt_tensor *b);
mt_tensor *mt_embedding(mt_ctx *c, mt_tensor *ids, mt_tensor *table);
/* The lookup in rows [row0, row0 + R) of a vocabulary of `vocab` ids split by rows: table (R,C).
 * into NULL: a new output, zero rows for ids outside the table, the ids checked against vocab;
 * else into is the output of the other parts' lookups of the same ids (checked there), whose
 * rows for this table's ids are written. */
mt_tensor *mt_embedding_rows(mt_ctx *c, mt_tensor *ids, mt_tensor *table, int64_t row0,
                             int64_t vocab, mt_tensor *into);

/* out = x w^T. x (..., Kin), w (M, Kin) -> (..., M). Through BLAS. */
mt_tensor *mt_matmul(mt_ctx *c, mt_tensor *x, mt_tensor *w);

/* RMSNorm over the last dim: y = w * x / sqrt(mean(x^2) + eps); gemma: y = (1 + w) * x_hat.
 * x (..., C), w (C). Saves rstd (rows). */
mt_tensor *mt_rmsnorm(mt_ctx *c, mt_tensor *x, mt_tensor *w, float eps, bool gemma);

mt_tensor *mt_silu(mt_ctx *c, mt_tensor *x);
mt_tensor *mt_sigmoid(mt_ctx *c, mt_tensor *x);
/* silu(gate) * up, same shapes. */
mt_tensor *mt_swiglu(mt_ctx *c, mt_tensor *gate, mt_tensor *up);
/* The same op with an activation (mt_act; NULL or !clamp: mt_swiglu bit for bit): the clamped
 * SwiGLU min(g, L) sigmoid(alpha min(g, L)) (clamp(u, -L, L) + beta) of MiniMax-M3, whose
 * backward lets the gradient through where g <= L and -L <= u <= L (torch.clamp's masks). */
mt_tensor *mt_swiglu_act(mt_ctx *c, mt_tensor *gate, mt_tensor *up, const mt_act *act);
/* Elementwise, same shapes. */
mt_tensor *mt_add(mt_ctx *c, mt_tensor *a, mt_tensor *b);
mt_tensor *mt_mul(mt_ctx *c, mt_tensor *a, mt_tensor *b);
mt_tensor *mt_scale(mt_ctx *c, mt_tensor *a, float s);
/* alpha * a + beta * b: the DeepNorm residual alpha * norm(x) + beta * sublayer. */
mt_tensor *mt_axpby(mt_ctx *c, float alpha, mt_tensor *a, float beta, mt_tensor *b);

/* Partial NeoX RoPE: rotate the first rotary_dim dims of each head as rotate_half pairs
 * (j, j + rotary_dim/2), pass the rest through. inv_freq_i = theta^(-2i/rotary_dim).
 * x (B,T,H,D), pos (B,T) I32 absolute positions -> (B,T,H,D). */
mt_tensor *mt_rope(mt_ctx *c, mt_tensor *x, mt_tensor *pos, int rotary_dim, float theta);

/* Causal softmax attention with GQA: query head h reads kv head h / (H/Hkv).
 * q (B,T,H,D), k and v (B,T,Hkv,D), seg (B,T) I32 segment ids or NULL: position t attends to
 * s <= t with seg[s] == seg[t] (packed samples do not see each other).
 * softmax(q k^T * scale) in fp32; saves the log-sum-exp (B,H,T). -> (B,T,H,D). */
mt_tensor *mt_attention(mt_ctx *c, mt_tensor *q, mt_tensor *k, mt_tensor *v, mt_tensor *seg,
                        float scale);
/* The same with a sliding window of `window` positions (0: none): t attends to s with
 * t - window < s <= t only (transformers' sliding_window_overlay, kv_idx > q_idx - W). */
mt_tensor *mt_attention_window(mt_ctx *c, mt_tensor *q, mt_tensor *k, mt_tensor *v, mt_tensor *seg,
                               float scale, int64_t window);

/* Lightning attention (spec section 4): o_t = sum_{s<=t, same segment} exp(-lambda_h (t-s))
 * (q_t . k_s) v_s. qkv (B,T,H,3D) with the per-head q|k|v layout of the fused projection,
 * decay (H) F32 lambda per head (no grad), seg (B,T) I32 or NULL (the state resets where the
 * segment id changes). block = 0: the naive O(T^2) form; block > 0: the block-wise form with
 * an fp32 DxD state, T need not be a multiple of block. -> (B,T,H,D). */
mt_tensor *mt_lightning(mt_ctx *c, mt_tensor *qkv, mt_tensor *decay, mt_tensor *seg, int block);

/* Lightning attention under context parallelism (autograd/context_parallel.h's layout; issue 39,
 * LASP-2's scheme): qkv (B,Tl,H,3D) and seg (B,Tl) or NULL are this rank's two chunks of each
 * row (Tl = T / C tokens, even; seg the global segment ids of those tokens). Each chunk's state
 * from zero is all-gathered (one exchange of 2C states of H x D x D per row, with the chunks'
 * segment ids at their ends), every rank scans them in global order (a state crosses a chunk
 * unless the chunk holds a segment start, decayed by exp(-lambda n) over its n tokens), and each
 * chunk runs the block form from its incoming state. Backward: the readout gradients of the
 * incoming states are all-gathered and scanned in reverse into each chunk's final-state
 * gradient. Every rank of the group must call it (both passes are collectives). block = 0 takes
 * the block form with one block per chunk; the CPU's bf16 GEMM mode runs fp32 here (the CUDA
 * backend keeps it). group NULL or of size 1: mt_lightning itself. -> (B,Tl,H,D). */
struct mt_cp_group;
mt_tensor *mt_cp_lightning(mt_ctx *c, mt_tensor *qkv, mt_tensor *decay, mt_tensor *seg, int block,
                           const struct mt_cp_group *group);
/* A backend's kernels for the node work of mt_cp_lightning (autograd/op_cp_lightning.c), all on
 * backend memory; rows of `chunks` equal chunks are taken as B*chunks rows of Tl/chunks tokens. */
typedef struct mt_cp_lightning_kernels {
    /* kernels/cpu/lightning.h: cpu_lightning_state and cpu_lightning_state_grad */
    void (*state)(float *state, const float *qkv, const float *decay, const int32_t *seg, int B,
                  int T, int H, int D);
    void (*state_grad)(float *g, const float *dout, const float *qkv, const float *decay,
                       const int32_t *seg, int B, int T, int H, int D);
    /* y[p*DD + e] = fl(sum_i w[p*ni + i] x[off[p*ni + i] + e]) (double sums; w = 0 skipped) */
    void (*mix)(float *y, const float *x, const double *w, const int64_t *off, int np, int ni,
                int64_t DD);
    /* the node's block form (ip[0] block, ip[1] GEMM mode) from s0 ((B*chunks),H,D,D) into
     * n->out; and its backward with the final-state gradient dsT, into n->in[0]->grad (+=) */
    void (*forward)(const mt_node *n, int chunks, const float *s0);
    void (*backward)(const mt_node *n, int chunks, const float *s0, const float *dsT);
} mt_cp_lightning_kernels;
void mt_cp_lightning_node_fwd(const mt_node *n, const mt_cp_lightning_kernels *k);
void mt_cp_lightning_node_bwd(const mt_node *n, const mt_cp_lightning_kernels *k);

/* MiniMax-M3 block-sparse attention (MSA, spec sections 4-5; docs/msa.md). Rows (B,T) pack
 * samples: seg (B,T) I32 segment ids or NULL (one sample per row), pos (B,T) I32 positions that
 * restart at 0 with each sample (a run of equal ids) and count up by one (checked). Token j is
 * in block pos[j] / block of its sample; query t sees key j when j is in t's sample and j <= t
 * (transformers run on each sample alone). Index heads Hi = Hkv: index head h selects the
 * blocks of kv head h, read by query heads h*G .. h*G+G-1 (G = H/Hkv).
 * Under context parallelism each op takes a rank's Tq local queries against the row's Tk
 * gathered keys (mt_cp_gather): q_slot (Tq) I32 (mt_cp_local_slots) the key slot of each query
 * row; then iq, q, idx, mask and the outputs have Tq rows, ik, k, v, pos and seg Tk. q_slot
 * NULL: the queries are the keys' own rows (Tq = Tk). */

/* The indexer's block selection: per (b, h, t) block scores max_{j in block, j <= t}
 * iq_h(t).ik(j) (fp32 products), the local block pos[t]/block first, then the topk-1 highest
 * earlier blocks of the sample in descending score (ties: the lower block id), -1 in the
 * trailing slots when fewer blocks are visible (transformers' order when there are no ties).
 * iq (B,T,Hi,Di), ik (B,T,1,Di) F32 (after norm and RoPE), 1 <= topk <= 4096 -> idx
 * (B,Hi,T,topk) I32, which never requires a gradient (the selection is a constant for the ops
 * below; they check that each query's list holds its local block, distinct blocks, -1 last). */
mt_tensor *mt_msa_select(mt_ctx *c, mt_tensor *iq, mt_tensor *ik, mt_tensor *pos, mt_tensor *seg,
                         mt_tensor *q_slot, int block, int topk);

/* Softmax attention over the selected blocks: o_h(t) = softmax over M(t) of scale q_h(t).k(j),
 * times v, with M(t) = {j in t's sample, j <= t, block(j) in idx[b, h/G, t, :]}. q (B,T,H,D),
 * k, v (B,T,Hkv,D), idx (B,Hkv,T,topk) from mt_msa_select -> (B,T,H,D). fp32 (the GEMM mode is
 * not used); saves the lse (B,H,T); dk, dv summed over each group's query heads. Cost: the
 * support, topk*block keys per query. */
mt_tensor *mt_msa_attention(mt_ctx *c, mt_tensor *q, mt_tensor *k, mt_tensor *v, mt_tensor *idx,
                            mt_tensor *pos, mt_tensor *seg, mt_tensor *q_slot, int block,
                            float scale);

/* The indexer's sparse-KL loss: coef / (Hi denom) sum over queries (b,t) with mask != 0 (mask
 * (B,T) F32 or NULL: all) and index heads h of KL(Pbar_h(t) || Q_h(t)), both over the support
 * of idx: Pbar the mean over the G query heads of group h of softmax scale q_g(t).k_h(j), Q the
 * softmax of index_scale iq_h(t).ik(j). q (B,T,H,D), k (B,T,Hkv,D): the main attention's
 * (normed, roped) tensors, stop-gradient (they get no gradient); iq (B,T,Hi,Di), ik
 * (B,T,1,Di) with Hi = Hkv; denom > 0 the global count of counted queries (ranks agree).
 * -> scalar; gradients into iq, ik only (ds = Q - Pbar). */
mt_tensor *mt_msa_kl(mt_ctx *c, mt_tensor *q, mt_tensor *k, mt_tensor *iq, mt_tensor *ik,
                     mt_tensor *idx, mt_tensor *pos, mt_tensor *seg, mt_tensor *mask,
                     mt_tensor *q_slot, int block, float scale, float index_scale, float coef,
                     float denom);

/* MoE router: p = softmax(logits) in fp32, top-k of p, renormalised to sum 1.
 * logits (N,E) -> weights (N,K); *idx_out gets the chosen experts (N,K) I32, in descending
 * probability order (ties: lower expert index first). Differentiable w.r.t. logits. */
mt_tensor *mt_moe_route(mt_ctx *c, mt_tensor *logits, int k, mt_tensor **idx_out);

/* MoE router with sigmoid scores (MiniMax-M2): s = sigmoid(logits) in fp32; the top-k of
 * s + bias choose (bias (E) F32 or NULL for none: e_score_correction_bias, no gradient); the
 * weights are scale * s / (sum of the chosen s), the unbiased scores renormalised.
 * logits (N,E) -> weights (N,K); *idx_out gets the chosen experts (N,K) I32 in descending
 * s + bias order (ties: lower expert index first). Differentiable w.r.t. logits only. */
mt_tensor *mt_moe_route_sigmoid(mt_ctx *c, mt_tensor *logits, mt_tensor *bias, int k, float scale,
                                mt_tensor **idx_out);

/* Experts: out[n] = sum_j weight[n,j] * w2_e (silu(w1_e x_n) * (w3_e x_n)), e = idx[n,j].
 * x (N,C), idx (N,K) I32, weight (N,K), w1 and w3 (E,F,C), w2 (E,C,F) -> (N,C).
 * Tokens are permuted by expert and run per expert in order 0..E-1; an expert with no tokens
 * contributes exactly zero and gets an exactly zero gradient. */
mt_tensor *mt_moe_experts(mt_ctx *c, mt_tensor *x, mt_tensor *idx, mt_tensor *weight, mt_tensor *w1,
                          mt_tensor *w3, mt_tensor *w2);
/* The same with the experts' activation act (mt_swiglu_act; NULL: SiLU). */
mt_tensor *mt_moe_experts_act(mt_ctx *c, mt_tensor *x, mt_tensor *idx, mt_tensor *weight,
                              mt_tensor *w1, mt_tensor *w3, mt_tensor *w2, const mt_act *act);

/* The experts split into one op per expert, so that a sharded optimizer can gather one expert's
 * weights at a time (dist.gather_unit = "expert", models/minimax.c). Together
 *   xs = mt_moe_dispatch(x, idx); mt_moe_expert_ffn(xs, e, ...) for e = 0..E-1 into ys;
 *   y = mt_moe_combine(ys)
 * compute mt_moe_experts (the same products in the same order). An "assignment" a = n*K+j is
 * token n's j-th choice; the dispatch sorts assignments by expert (stable), so "slot" s in
 * [offsets[e], offsets[e+1]) holds expert e's rows contiguously. */
typedef struct {
    mt_tensor *offsets;          /* (E+1) I32: expert e owns slots [offsets[e], offsets[e+1]) */
    mt_tensor *perm;             /* (N*K) I32: slot -> assignment */
    mt_tensor *inv;              /* (N*K) I32: assignment -> slot */
    const int32_t *host_offsets; /* (E+1) the same offsets on the host (the GEMM sizes) */
    int64_t N;
    int E, K;
} mt_moe_plan;

/* x (N,C), idx (N,K) I32 with ids in [0,E) -> xs (N*K,C): xs[s] = x[perm[s] / K]. Fills *plan.
 * The backward adds each slot's gradient back to its token (j in order). */
mt_tensor *mt_moe_dispatch(mt_ctx *c, mt_tensor *x, mt_tensor *idx, int E, mt_moe_plan *plan);
/* The (N*K,C) tensor the expert ops of one dispatch write into (each its own rows). */
mt_tensor *mt_moe_expert_out(mt_ctx *c, const mt_moe_plan *plan, int64_t C);
/* Expert e on its slots: ys[s] = weight[perm[s]] * w2 (silu(w1 xs[s]) * (w3 xs[s])) for s in
 * [offsets[e], offsets[e+1]). xs (N*K,C) from the dispatch, weight (N,K), w1 and w3 (F,C),
 * w2 (C,F), ys from mt_moe_expert_out; returns ys. Call it for every expert, also one with no
 * slots: its node then still marks where the expert's weights are used (the bucket hooks), and
 * its gradients stay exactly zero. GEMM precision as mt_matmul. */
mt_tensor *mt_moe_expert_ffn(mt_ctx *c, mt_tensor *xs, const mt_moe_plan *plan, mt_tensor *weight,
                             int e, mt_tensor *w1, mt_tensor *w3, mt_tensor *w2, mt_tensor *ys);
/* The same with the expert's activation act (NULL: SiLU). */
mt_tensor *mt_moe_expert_ffn_act(mt_ctx *c, mt_tensor *xs, const mt_moe_plan *plan,
                                 mt_tensor *weight, int e, mt_tensor *w1, mt_tensor *w3,
                                 mt_tensor *w2, mt_tensor *ys, const mt_act *act);
/* ys (N*K,C) -> y (N,C): y[n] = sum_j ys[inv[n*K+j]], j in order. */
mt_tensor *mt_moe_combine(mt_ctx *c, mt_tensor *ys, const mt_moe_plan *plan);

/* Expert parallelism's row exchange (installed by train/expert_parallel.h; model code never
 * sees the communicator): rows travel between the P ranks of an expert-parallel group, each
 * owning Eq = E / P experts (rank p: experts p*Eq .. p*Eq + Eq - 1), by a variable-count
 * all-to-all that every rank of the group issues in the same order, zero rows included. */
typedef struct mt_exchange {
    int size, rank; /* P, and this rank's index in its group */
    /* on the backend's memory (device buffers for a CUDA backend) */
    void (*alltoallv)(void *user, const void *send, const int64_t *send_counts, void *recv,
                      const int64_t *recv_counts, size_t elem);
    void *user;
    /* on host memory: the row counts (the same group; user_host its communicator) */
    void (*alltoallv_host)(void *user_host, const void *send, const int64_t *send_counts,
                           void *recv, const int64_t *recv_counts, size_t elem);
    void *user_host;
} mt_exchange;

/* got[s*Eq + j] = the rows rank s sends this rank for its local expert j, from sent[q*Eq + j]
 * (the rows this rank sends rank q for q's local expert j): one all-to-all of Eq counts. */
void mt_exchange_counts(const mt_exchange *ex, int Eq, const int64_t *sent, int64_t *got);

/* to_experts: x holds sum(sent) rows of W floats in (q, j) order (the dispatch's slots, which
 * sort by expert, so by owner) -> sum(got) rows in (j, s) order: each local expert's rows
 * contiguous, by source rank. !to_experts: the way back, (j, s) rows -> (q, j) rows. The
 * backward is the other direction, its result added to x's gradient. sent, got (P*Eq) host
 * arrays, copied into the node. */
mt_tensor *mt_ep_exchange(mt_ctx *c, mt_tensor *x, const mt_exchange *ex, int Eq,
                          const int64_t *sent, const int64_t *got, bool to_experts);
/* The backend-independent node work (backend memory copies and the exchange hook): the CPU and
 * CUDA tables both point here (kernels/cpu/ep_exchange.c, kernels/cuda/ep_exchange.cu). */
void mt_ep_exchange_node_fwd(const mt_node *n);
void mt_ep_exchange_node_bwd(const mt_node *n);

/* Context parallelism's causal GQA softmax attention (issue 39; autograd/context_parallel.h:
 * each rank of a group of C holds Tl = T / C tokens of every row, chunks r and 2C-1-r of 2C).
 * q (B,Tl,H,D), k, v (B,Tl,Hkv,D) the local tokens (RoPE already applied at their global
 * positions), seg (B,Tl) I32 segment ids or NULL -> (B,Tl,H,D): local query i (global position
 * p_i = mt_cp_global_index) attends to every global key s <= p_i with seg[s] == seg[i], packed
 * samples crossing chunk borders included; softmax in fp32 (the GEMM mode as mt_attention);
 * saves the lse (B,H,Tl). The forward all-gathers K, V and seg over the group (one call of its
 * allgather hook) and attends the local queries to all T keys in global order; the backward
 * gathers them again (nothing of size T is kept between the passes), computes dq locally and
 * dk, dv for all T keys, and reduce-scatters those to their owners (one call), added into k's
 * and v's gradients. group NULL or of size 1: mt_attention bit for bit. Every rank of the group
 * must run it in the same order, also in the backward (the collectives). The gathered form is
 * chosen over a ring because GQA makes K and V small: docs/training.md "Long sequences". */
mt_tensor *mt_cp_attention(mt_ctx *c, mt_tensor *q, mt_tensor *k, mt_tensor *v, mt_tensor *seg,
                           const mt_cp_group *group, float scale);
/* The backend-independent node work the CPU and CUDA adapters share (kernels/cpu/cp_attention.c,
 * kernels/cuda/cp_attention.cu): the gathered keys, values and segments (B,T,...) in global
 * order from the local ones (k, v: the local keys and values as the kernel will read them, e.g.
 * rounded to bf16), in backend memory carved as node scratch; with one rank they are k, v and
 * seg themselves. */
typedef struct {
    const float *k, *v;   /* (B,T,Hkv,D) */
    const int32_t *seg;   /* (B,T) or NULL */
    const int32_t *q_pos; /* (Tl): the global positions of the local rows */
    int64_t T;            /* C Tl */
    float *buf;           /* the rank-major receive buffer (NULL with one rank) */
} mt_cp_kv;
void mt_cp_attention_gather(const mt_node *n, const float *k, const float *v, mt_cp_kv *kv);
/* The backward's exchange: dkv (2,B,T,Hkv,D) the gradients of the gathered keys and values;
 * each rank's rows summed over the group and added into k's and v's gradients (where they have
 * one). kv: from mt_cp_attention_gather of the same kernel call (its buffer is reused). */
void mt_cp_attention_scatter(const mt_node *n, const float *dkv, const mt_cp_kv *kv);

/* The whole rows of a context group from each rank's part: x (B,Tl,...) F32 or I32 -> (B,C Tl,
 * ...) in global token order (autograd/context_parallel.h), by one allgather. The backward
 * reduce-scatters the gradient of the whole rows back to their owners (F32 only; an I32 x takes
 * no gradient). group NULL or of size 1: x itself. Every rank of the group runs it in the same
 * order, the backward too. The MSA layers gather their keys with it (models/block_msa.c). */
mt_tensor *mt_cp_gather(mt_ctx *c, mt_tensor *x, const mt_cp_group *group);
/* The key slots (global indices) of this rank's Tl local tokens: (Tl) I32 on the backend. */
mt_tensor *mt_cp_local_slots(mt_ctx *c, const mt_cp_group *group, int64_t Tl);
/* The node work of mt_cp_gather, shared by every backend's adapters (backend copies and the
 * group's hooks only). */
void mt_cp_gather_node_fwd(const mt_node *n);
void mt_cp_gather_node_bwd(const mt_node *n);
/* Copies the rows of every rank between the rank-major buffer `ranks` (rank q's rows at
 * ranks + q * stride, (B,Tl,W) each, W 4-byte elements a token) and `full` (B,C Tl,W) in global
 * order, by chunks, with the backend's copies. */
void mt_cp_rows_move(const mt_backend *be, float *full, float *ranks, int64_t stride, int C,
                     int64_t B, int64_t Tl, int64_t W, bool to_full);

/* The differentiable part of the Switch/Mixtral load-balancing loss:
 * sum_n sum_e coef[e] * softmax(logits[n])[e]; logits (N,E), coef (E) (no grad) -> scalar.
 * With coef = mt_moe_aux_coef(...) and summed over layers this is HF's
 * E * sum_{k,e} f[k,e] * Pbar[e] over all layers' rows. */
mt_tensor *mt_moe_aux(mt_ctx *c, mt_tensor *logits, mt_tensor *coef);
/* coef[e] = E * count[e] / R^2, count[e] = times expert e was chosen in any top-k slot over all
 * R router rows (all layers). Host arrays; not differentiable (HF: f carries no gradient). */
void mt_moe_aux_coef(float *coef, const int64_t *count, int E, int64_t rows);

/* Cross-entropy over the vocabulary, labels == -100 ignored. logits (N,V), labels (N) I32.
 * denom <= 0: mean over non-ignored rows (0 if none); denom > 0: sum / denom (a caller that
 * normalises by a global token count). -> scalar. */
#define MT_IGNORE_INDEX (-100)
mt_tensor *mt_cross_entropy(mt_ctx *c, mt_tensor *logits, mt_tensor *labels, float denom);

/* mt_cross_entropy(mt_matmul(x, w), labels, denom) without the (N,V) logits: the labelled
 * rows go R at a time (R chosen for the backend's logits_chunk_bytes of fp32 logits: 64 MiB on
 * the CPU, 1 GiB on CUDA; chunk_rows > 0 sets R, for tests),
 * their logits are formed again in the backward, ignored rows cost nothing.
 * x (...,C) N rows, w (V,C), labels (N) I32 -> scalar. GEMM precision as mt_matmul. */
mt_tensor *mt_linear_cross_entropy(mt_ctx *c, mt_tensor *x, mt_tensor *w, mt_tensor *labels,
                                   float denom);
mt_tensor *mt_linear_cross_entropy_chunked(mt_ctx *c, mt_tensor *x, mt_tensor *w, mt_tensor *labels,
                                           float denom, int64_t chunk_rows);
/* One part of an lm_head split by vocabulary rows: w (V_k,C) = rows [row0, row0 + V_k) of a
 * vocabulary of `vocab`; labels in [0, vocab). prev: the previous part's output (2,M), NULL for
 * the first. Not final -> (2,M): per labelled row the running log-sum-exp and target logit;
 * final -> the scalar loss, as mt_linear_cross_entropy over all parts' rows
 * (autograd/op_linear_cross_entropy.c). */
mt_tensor *mt_linear_cross_entropy_part(mt_ctx *c, mt_tensor *x, mt_tensor *w, mt_tensor *labels,
                                        mt_tensor *prev, int64_t row0, int64_t vocab, bool final,
                                        float denom, int64_t chunk_rows);
