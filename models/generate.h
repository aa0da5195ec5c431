/* generate.h: decoding (greedy or sampled, ragged batches) for every family (models/family.h;
 * Text-01: spec sections 4.7, 5 and 10.10).
 *
 * The prompt runs once through the training forward's ops in no-grad mode (block-form
 * lightning, causal attention) and fills the caches: the roped keys and the values of every
 * softmax layer, and the final DxD state of every lightning layer. Each new token then takes
 * one recurrent step per lightning layer (S = exp(-lambda) S + k^T v, o = q S) and one cached
 * attention row per softmax layer, never re-running the prefix. The decode steps are the
 * backend table's (mt_backend.decode); the caches live in the generating context's backend
 * memory (mt_minimax_cache.be), the logits of the positions sampled come to the host. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "models/minimax.h"
#include "autograd/profile.h"

typedef struct {
    const mt_backend *be; /* whose memory the caches are (the generating context's backend) */
    int n_layers;         /* L */
    int B;                /* batch rows */
    int t_max;            /* capacity in positions */
    int32_t *t_len;       /* (B): positions filled so far in each row (0 before its prompt) */
    /* (B), set by mt_minimax_forward_cached for its layers: t_len + T, the positions each row's
     * queries see once this forward's tokens are in (host arena memory of that forward) */
    const int32_t *t_end;
    float **k;     /* (L): (B,t_max,Hkv,D) roped keys of a softmax layer; NULL for lightning */
    float **v;     /* (L): (B,t_max,Hkv,D) values of a softmax layer; NULL for lightning */
    float **state; /* (L): (B,H,D,D) state S[key dim][value dim] of a lightning layer, else NULL */
    float **ik;    /* (L): (B,t_max,Di) the indexer's roped keys of an MSA layer, else NULL */
    size_t row_kv, row_ik, row_state; /* floats per batch row: t_max*Hkv*D, t_max*Di, H*D*D */
} mt_minimax_cache;

/* Allocates the caches of a model with this config for B rows of up to t_max positions in be's
 * memory (zeroed; the lengths t_len stay in host memory). */
void mt_minimax_cache_init(mt_minimax_cache *kv, const mt_backend *be, const mt_minimax_config *cfg,
                           int B, int t_max);
/* Bytes of backend memory those caches take. */
size_t mt_minimax_cache_bytes(const mt_minimax_config *cfg, int B, int t_max);
void mt_minimax_cache_free(mt_minimax_cache *kv);
/* Row b of kv as a one-row cache sharing its memory (view's pointer arrays: (L) each, owned by
 * the caller, see mt_minimax_cache_view_alloc): a ragged batch fills each row with its own
 * prompt through it. */
void mt_minimax_cache_view_alloc(mt_minimax_cache *view, int n_layers);
void mt_minimax_cache_view_free(mt_minimax_cache *view);
void mt_minimax_cache_row(const mt_minimax_cache *kv, int b, mt_minimax_cache *view);
/* Copies row src of kv over row dst (its filled positions, state and length): generation
 * compacts the rows still decoding into the first ones. */
void mt_minimax_cache_move_row(mt_minimax_cache *kv, int dst, int src);

/* No-grad forward of ids (B,T) I32 that reads and extends the first B <= kv->B rows of the
 * cache: when every one of them is empty any T (the prompt) fills them; when none is, either
 * T = 1 (one decode step; rows may hold different lengths) or B = 1 with any T (an extension:
 * the tokens at positions t_len .. t_len+T-1 of a filled row, a prompt prefilled in chunks).
 * Filled rows with B > 1 and T > 1 are refused. Row b's positions run from t_len[b].
 * An extension's logits are those of a prefill of the whole prompt to fp32 rounding: the
 * projections, norms, MoE and lm_head run batched over the T tokens as in a prefill; each
 * mixer's core runs the backend's chunk op (decode.attention_chunk, lightning_chunk,
 * msa_chunk: one call per layer, as fast per token as a prefill) or, where the backend has
 * none (CUDA), its decode step once per token, on a cache that ends with that token.
 * Returns the logits (B,T,V), carved from c's arena; last_only: (B,1,V), each row's last
 * position only (a prefill that only samples its next token: at a 100-token prompt the lm_head
 * of every position was most of a prefill's products). hooks NULL: the model's buckets must be
 * bound; else each bucket is entered and left around its use, as in the training forward (a
 * sharded owner gathers it: models/minimax.h). */
mt_tensor *mt_minimax_forward_cached(mt_minimax *m, mt_ctx *c, mt_tensor *ids, mt_minimax_cache *kv,
                                     const mt_bucket_hooks *hooks, bool last_only);

/* Greedy decoding of B prompts of T tokens (ids row-major (B,T)): out (B,n_new) gets the argmax
 * of each step (ties: the lowest id, like torch.argmax). eos >= 0: a row that produced eos keeps
 * eos from then on, and decoding stops early when every row has; *n_done (may be NULL) gets the
 * steps taken. c is reset (mt_ctx_reset) between steps; its arena must hold one prompt forward. */
void mt_minimax_generate(mt_minimax *m, mt_ctx *c, const int32_t *ids, int B, int T, int n_new,
                         int eos, int32_t *out, int *n_done);

/* Decoding in step with other ranks, for a model whose buckets are gathered collectively
 * (ZeRO-3 shards: train/trainer_generate.c). Every forward enters the buckets through hooks, and
 * every rank runs as many forwards as the others: the prompts are prefilled one by one, as many
 * as the rank with the most (a rank with fewer enters the buckets without computing:
 * mt_minimax_walk_buckets); then each decode step runs every active row of the rank in one
 * forward, so one gather of a bucket serves the rank's whole batch, until no rank has a row
 * left. A rank may bring no prompt at all. */
typedef struct {
    const mt_bucket_hooks *hooks;
    int (*max_all)(void *user, int v); /* the largest v of any rank (a collective) */
    void *user;
} mt_gen_sync;

/* How each next token is chosen, and when a row stops. */
typedef struct {
    float temperature; /* 0: greedy (argmax, ties to the lowest id); else softmax(logits / t) */
    int top_k;         /* > 0: sample among the k most likely tokens only (ties: lower id) */
    float top_p;       /* in (0, 1): among the smallest most-likely-first set of mass >= top_p */
    uint64_t seed;     /* the draws: splitmix64 of (seed, row id, step), see mt_gen_uniform */
    /* Row b's id for the draws (NULL: b): give each prompt its own (its index in the data set)
     * and its tokens do not depend on the batch it ran in. */
    const int64_t *row_ids;
    int eos; /* >= 0: a row stops after producing it (kept) */
    /* Non-NULL: called after each token of row b (toks, n: its tokens so far); true stops the
     * row (stop strings: the caller decodes and searches, the model knows no tokenizer). */
    bool (*stop)(void *user, int b, const int32_t *toks, int n);
    void *stop_user;
    const mt_gen_sync *sync; /* NULL: this rank alone, the buckets bound */
    /* Non-NULL: the op profile (autograd/profile.h) of the prefills (a "step" is one prompt's)
     * and of the decode steps, each with the host work around its forwards as named rows
     * (sampling, the cache compaction); minimax-eval --profile prints them. */
    mt_profile *prof_prefill, *prof_decode;
} mt_gen_opts;

/* Whether be has a decode step for every layer of m (a device may lack MSA's); if not, why. */
bool mt_gen_backend_can_decode(const mt_minimax *m, const mt_backend *be, char *why, size_t n);
/* --backend NAME of the generation tools for model m (mt_backend_named, autograd/tensor.h): the
 * backend, or NULL with one line in err, also when a layer has no decode step there or m is a
 * head model (no lm_head: models/head.c). */
const mt_backend *mt_gen_backend_named(const char *name, const mt_minimax *m, char *err, size_t n);

/* Arena bytes for generation's context: one no-grad prompt forward of B rows of T tokens. */
size_t mt_minimax_generate_arena_bytes(const mt_minimax_config *cfg, int64_t B, int64_t T);

/* Rows [first, first + n) of logits (..., V) readable on the host: the tensor's own memory on the
 * CPU backend, else copied into host (n V floats) and host returned. */
const float *mt_gen_logits_host(const mt_ctx *c, const mt_tensor *logits, int64_t first, int64_t n,
                                float *host);

/* A uniform double in [0, 1) for (seed, row id, step): counter-based (no state carried from one
 * draw to the next), so a row's draws do not depend on which rows share its batch. */
double mt_gen_uniform(uint64_t seed, int64_t row, int64_t step);

/* The next token from one position's logits (V) under o (o->temperature > 0: drawn with u, a
 * uniform in [0, 1)); greedy when o is NULL or o->temperature == 0. Top-k, then top-p on what is
 * left (renormalised), like transformers' warpers. work: V floats and V uint64 (scratch, so
 * nothing is allocated per token). */
int32_t mt_gen_sample(const float *logits, int V, const mt_gen_opts *o, double u, float *work_p,
                      uint64_t *work_key);

/* The most rows one decode step holds: up to this many the CPU kernels compute each row exactly
 * as alone (kernels/cpu/gemm_rows.c: inference GEMMs of up to MT_GEMM_ROWS_MAX rows), so a
 * prompt's tokens do not depend on the batch it ran in. */
#define MT_GEN_BATCH_MAX 32

/* Decoding of B <= MT_GEN_BATCH_MAX prompts (B >= 1; >= 0 with o->sync) of their own lengths
 * (ragged): prompts[b] holds lens[b]
 * >= 1 tokens. Each row's prompt fills its row of one cache (per-row prefill, so no padding and no
 * mask: each row is exactly its one-prompt run); then one decode step per position for the rows
 * still active. A row stops after eos, when o->stop says so, after n_new tokens, or when prompt and
 * reply fill the model's context (max_position_embeddings; a prompt must be shorter); finished rows
 * leave the step batch (compaction: the last active row's cache moves into the freed slot, so a
 * step costs only what is still running). o NULL: greedy, no eos. out (B,n_new) row-major; n_out[b]
 * gets the tokens row b produced, the rest of its out row is eos (or -1 without one). */
void mt_minimax_generate_batch(mt_minimax *m, mt_ctx *c, const int32_t *const *prompts,
                               const int *lens, int B, int n_new, const mt_gen_opts *o,
                               int32_t *out, int *n_out);
