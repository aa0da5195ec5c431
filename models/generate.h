/* generate.h: greedy decoding for every family (models/family.h; Text-01: spec sections 4.7, 5
 * and 10.10).
 *
 * The prompt runs once through the training forward's ops in no-grad mode (block-form
 * lightning, causal attention) and fills the caches: the roped keys and the values of every
 * softmax layer, and the final DxD state of every lightning layer. Each new token then takes
 * one recurrent step per lightning layer (S = exp(-lambda) S + k^T v, o = q S) and one cached
 * attention row per softmax layer, never re-running the prefix. The decode steps are the
 * backend table's (mt_backend.decode); the caches live in host memory, so generation runs on
 * the CPU backend. */
#pragma once
#include <stdint.h>

#include "models/minimax.h"

typedef struct {
    int n_layers;  /* L */
    int B;         /* batch rows */
    int t_max;     /* capacity in positions */
    int t_len;     /* positions filled so far (0 before the prompt) */
    float **k;     /* (L): (B,t_max,Hkv,D) roped keys of a softmax layer; NULL for lightning */
    float **v;     /* (L): (B,t_max,Hkv,D) values of a softmax layer; NULL for lightning */
    float **state; /* (L): (B,H,D,D) state S[key dim][value dim] of a lightning layer, else NULL */
    float **ik;    /* (L): (B,t_max,Di) the indexer's roped keys of an MSA layer, else NULL */
} mt_minimax_cache;

/* Allocates the caches of a model with this config for B rows of up to t_max positions. */
void mt_minimax_cache_init(mt_minimax_cache *kv, const mt_minimax_config *cfg, int B, int t_max);
void mt_minimax_cache_free(mt_minimax_cache *kv);

/* No-grad forward of ids (B,T) I32 that reads and extends the cache: with kv->t_len == 0 any T
 * (the prompt) fills it; afterwards T must be 1 (one decode step). Positions run from t_len.
 * Returns the logits (B,T,V), carved from c's arena. The model's buckets must be bound. */
mt_tensor *mt_minimax_forward_cached(mt_minimax *m, mt_ctx *c, mt_tensor *ids,
                                     mt_minimax_cache *kv);

/* Greedy decoding of B prompts of T tokens (ids row-major (B,T)): out (B,n_new) gets the argmax
 * of each step (ties: the lowest id, like torch.argmax). eos >= 0: a row that produced eos keeps
 * eos from then on, and decoding stops early when every row has; *n_done (may be NULL) gets the
 * steps taken. c is reset (mt_ctx_reset) between steps; its arena must hold one prompt forward. */
void mt_minimax_generate(mt_minimax *m, mt_ctx *c, const int32_t *ids, int B, int T, int n_new,
                         int eos, int32_t *out, int *n_done);
