/* generate.c: greedy decoding with caches (models/generate.h). The cached forward itself is in
 * models/minimax.c, next to the training forward, so both run the same layer code. */
#include "models/generate.h"

#include <stdlib.h>
#include <string.h>

void mt_minimax_cache_init(mt_minimax_cache *kv, const mt_minimax_config *cfg, int B, int t_max) {
    const int L = cfg->num_hidden_layers;
    const size_t H = (size_t)cfg->num_attention_heads, Hkv = (size_t)cfg->num_key_value_heads,
                 D = (size_t)cfg->head_dim;
    MT_CHECK(B >= 1 && t_max >= 1, "generate: cache for B = %d rows of %d positions", B, t_max);
    memset(kv, 0, sizeof(*kv));
    kv->n_layers = L;
    kv->B = B;
    kv->t_max = t_max;
    kv->k = mt_calloc((size_t)L, sizeof(float *), "kv cache k");
    kv->v = mt_calloc((size_t)L, sizeof(float *), "kv cache v");
    kv->state = mt_calloc((size_t)L, sizeof(float *), "lightning states");
    kv->ik = mt_calloc((size_t)L, sizeof(float *), "index key caches");
    for (int l = 0; l < L; l++) {
        mt_layer_plan p; /* the cache a layer keeps is its mixer's */
        mt_config_layer_plan(cfg, l, &p);
        if (p.mixer != MT_MIXER_LIGHTNING) { /* softmax and MSA: keys, values */
            const size_t n = (size_t)B * (size_t)t_max * Hkv * D;
            kv->k[l] = mt_calloc(n, sizeof(float), "kv cache k");
            kv->v[l] = mt_calloc(n, sizeof(float), "kv cache v");
            if (p.mixer == MT_MIXER_MSA) /* and the index keys, one head */
                kv->ik[l] = mt_calloc((size_t)B * (size_t)t_max * (size_t)cfg->msa_index_dim,
                                      sizeof(float), "index key cache");
        } else {
            kv->state[l] = mt_calloc((size_t)B * H * D * D, sizeof(float), "lightning state");
        }
    }
}

void mt_minimax_cache_free(mt_minimax_cache *kv) {
    for (int l = 0; l < kv->n_layers; l++) {
        free(kv->k[l]);
        free(kv->v[l]);
        free(kv->state[l]);
        free(kv->ik[l]);
    }
    free(kv->k);
    free(kv->v);
    free(kv->state);
    free(kv->ik);
    memset(kv, 0, sizeof(*kv));
}

/* argmax over the last position's logits of each row; ties go to the lowest id. */
static void gen_argmax(const mt_tensor *logits, int32_t *tok) {
    const int64_t B = logits->shape[0], T = logits->shape[1], V = logits->shape[2];
    const float *x = logits->data;
    for (int64_t b = 0; b < B; b++) {
        const float *row = x + (b * T + T - 1) * V;
        int64_t best = 0;
        for (int64_t v = 1; v < V; v++)
            if (row[v] > row[best]) best = v;
        tok[b] = (int32_t)best;
    }
}

void mt_minimax_generate(mt_minimax *m, mt_ctx *c, const int32_t *ids, int B, int T, int n_new,
                         int eos, int32_t *out, int *n_done) {
    MT_CHECK(B >= 1 && T >= 1 && n_new >= 0, "generate: B = %d, T = %d, n_new = %d", B, T, n_new);
    const int V = m->cfg.vocab_size;
    for (int64_t i = 0; i < (int64_t)B * T; i++)
        MT_CHECK(ids[i] >= 0 && ids[i] < V,
                 "generate: prompt token %d at row %lld position %lld "
                 "is outside the vocabulary [0, %d)",
                 ids[i], (long long)(i / T), (long long)(i % T), V);
    mt_minimax_cache kv;
    mt_minimax_cache_init(&kv, &m->cfg, B, T + (n_new > 0 ? n_new : 1));
    int32_t *tok = mt_malloc((size_t)B * sizeof(int32_t), "generate tokens");
    bool *done = mt_calloc((size_t)B, sizeof(bool), "generate done");

    int steps = 0;
    mt_ctx_reset(c);
    mt_tensor *x = mt_tensor_new(c, MT_I32, 2, (int64_t[]){B, T}, "prompt");
    c->be->to_device(x->data, ids, (size_t)B * (size_t)T * sizeof(int32_t));
    while (steps < n_new) {
        mt_tensor *logits = mt_minimax_forward_cached(m, c, x, &kv);
        gen_argmax(logits, tok);
        bool all_done = true;
        for (int b = 0; b < B; b++) {
            if (done[b]) tok[b] = eos; /* a finished row repeats eos */
            out[(size_t)b * (size_t)n_new + (size_t)steps] = tok[b];
            if (eos >= 0 && tok[b] == eos) done[b] = true;
            all_done = all_done && done[b];
        }
        steps++;
        if (eos >= 0 && all_done) break;
        mt_ctx_reset(c); /* the step's activations are dead; the caches live outside c */
        x = mt_tensor_new(c, MT_I32, 2, (int64_t[]){B, 1}, "next token");
        c->be->to_device(x->data, tok, (size_t)B * sizeof(int32_t));
    }
    mt_ctx_reset(c);
    for (int b = 0; b < B; b++) /* rows that stopped early: eos to the end */
        for (int s = steps; s < n_new; s++) out[(size_t)b * (size_t)n_new + (size_t)s] = eos;
    if (n_done) *n_done = steps;
    free(tok);
    free(done);
    mt_minimax_cache_free(&kv);
}
