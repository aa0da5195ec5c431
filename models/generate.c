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
    kv->row_kv = (size_t)t_max * Hkv * D;
    kv->row_ik = (size_t)t_max * (size_t)cfg->msa_index_dim;
    kv->row_state = H * D * D;
    kv->t_len = mt_calloc((size_t)B, sizeof(int32_t), "kv cache lengths");
    kv->k = mt_calloc((size_t)L, sizeof(float *), "kv cache k");
    kv->v = mt_calloc((size_t)L, sizeof(float *), "kv cache v");
    kv->state = mt_calloc((size_t)L, sizeof(float *), "lightning states");
    kv->ik = mt_calloc((size_t)L, sizeof(float *), "index key caches");
    for (int l = 0; l < L; l++) {
        mt_layer_plan p; /* the cache a layer keeps is its mixer's */
        mt_config_layer_plan(cfg, l, &p);
        if (p.mixer != MT_MIXER_LIGHTNING) { /* softmax and MSA: keys, values */
            kv->k[l] = mt_calloc((size_t)B * kv->row_kv, sizeof(float), "kv cache k");
            kv->v[l] = mt_calloc((size_t)B * kv->row_kv, sizeof(float), "kv cache v");
            if (p.mixer == MT_MIXER_MSA) /* and the index keys, one head */
                kv->ik[l] = mt_calloc((size_t)B * kv->row_ik, sizeof(float), "index key cache");
        } else {
            kv->state[l] = mt_calloc((size_t)B * kv->row_state, sizeof(float), "lightning state");
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
    free(kv->t_len);
    memset(kv, 0, sizeof(*kv));
}

void mt_minimax_cache_view_alloc(mt_minimax_cache *view, int n_layers) {
    memset(view, 0, sizeof(*view));
    view->n_layers = n_layers;
    view->k = mt_calloc((size_t)n_layers, sizeof(float *), "cache view k");
    view->v = mt_calloc((size_t)n_layers, sizeof(float *), "cache view v");
    view->state = mt_calloc((size_t)n_layers, sizeof(float *), "cache view states");
    view->ik = mt_calloc((size_t)n_layers, sizeof(float *), "cache view index keys");
}

void mt_minimax_cache_view_free(mt_minimax_cache *view) {
    free(view->k);
    free(view->v);
    free(view->state);
    free(view->ik);
    memset(view, 0, sizeof(*view));
}

void mt_minimax_cache_row(const mt_minimax_cache *kv, int b, mt_minimax_cache *view) {
    MT_CHECK(b >= 0 && b < kv->B && view->n_layers == kv->n_layers,
             "generate: cache row %d of %d (view of %d layers, cache %d)", b, kv->B, view->n_layers,
             kv->n_layers);
    for (int l = 0; l < kv->n_layers; l++) {
        view->k[l] = kv->k[l] ? kv->k[l] + (size_t)b * kv->row_kv : NULL;
        view->v[l] = kv->v[l] ? kv->v[l] + (size_t)b * kv->row_kv : NULL;
        view->ik[l] = kv->ik[l] ? kv->ik[l] + (size_t)b * kv->row_ik : NULL;
        view->state[l] = kv->state[l] ? kv->state[l] + (size_t)b * kv->row_state : NULL;
    }
    view->B = 1;
    view->t_max = kv->t_max;
    view->row_kv = kv->row_kv;
    view->row_ik = kv->row_ik;
    view->row_state = kv->row_state;
    view->t_len = kv->t_len + b;
    view->t_end = NULL;
}

void mt_minimax_cache_move_row(mt_minimax_cache *kv, int dst, int src) {
    MT_CHECK(dst >= 0 && dst < kv->B && src >= 0 && src < kv->B,
             "generate: cache row move %d -> %d of %d", src, dst, kv->B);
    if (dst == src) return;
    /* only the filled positions: what lies past t_len is never read */
    const size_t n = (size_t)kv->t_len[src], per_pos = kv->row_kv / (size_t)kv->t_max,
                 per_ik = kv->row_ik / (size_t)kv->t_max;
    for (int l = 0; l < kv->n_layers; l++) {
        if (kv->k[l]) {
            memcpy(kv->k[l] + (size_t)dst * kv->row_kv, kv->k[l] + (size_t)src * kv->row_kv,
                   n * per_pos * sizeof(float));
            memcpy(kv->v[l] + (size_t)dst * kv->row_kv, kv->v[l] + (size_t)src * kv->row_kv,
                   n * per_pos * sizeof(float));
        }
        if (kv->ik[l])
            memcpy(kv->ik[l] + (size_t)dst * kv->row_ik, kv->ik[l] + (size_t)src * kv->row_ik,
                   n * per_ik * sizeof(float));
        if (kv->state[l])
            memcpy(kv->state[l] + (size_t)dst * kv->row_state,
                   kv->state[l] + (size_t)src * kv->row_state, kv->row_state * sizeof(float));
    }
    kv->t_len[dst] = kv->t_len[src];
}

/* argmax over the last position's logits of row b; ties go to the lowest id. */
static int32_t gen_argmax(const mt_tensor *logits, int64_t b) {
    const int64_t T = logits->shape[1], V = logits->shape[2];
    const float *row = (const float *)logits->data + (b * T + T - 1) * V;
    int64_t best = 0;
    for (int64_t v = 1; v < V; v++)
        if (row[v] > row[best]) best = v;
    return (int32_t)best;
}

void mt_minimax_generate_batch(mt_minimax *m, mt_ctx *c, const int32_t *const *prompts,
                               const int *lens, int B, int n_new, int eos, int32_t *out,
                               int *n_out) {
    MT_CHECK(B >= 1 && n_new >= 0, "generate: B = %d, n_new = %d", B, n_new);
    const int V = m->cfg.vocab_size;
    int t_max = 1;
    for (int b = 0; b < B; b++) {
        MT_CHECK(lens[b] >= 1, "generate: row %d has an empty prompt", b);
        for (int t = 0; t < lens[b]; t++)
            MT_CHECK(prompts[b][t] >= 0 && prompts[b][t] < V,
                     "generate: prompt token %d at row %d position %d "
                     "is outside the vocabulary [0, %d)",
                     prompts[b][t], b, t, V);
        if (lens[b] + n_new > t_max) t_max = lens[b] + n_new;
    }
    for (int64_t i = 0; i < (int64_t)B * n_new; i++) out[i] = eos >= 0 ? eos : -1;
    for (int b = 0; b < B; b++) n_out[b] = 0;
    if (n_new == 0) return;

    mt_minimax_cache kv, view;
    mt_minimax_cache_init(&kv, &m->cfg, B, t_max);
    mt_minimax_cache_view_alloc(&view, kv.n_layers);
    int32_t *tok = mt_malloc((size_t)B * sizeof(int32_t), "generate tokens");
    int *row = mt_malloc((size_t)B * sizeof(int), "generate slot rows"); /* slot -> prompt row */

    /* prefill: each prompt alone through its row of the cache, its own length, no padding */
    for (int b = 0; b < B; b++) {
        mt_ctx_reset(c);
        mt_minimax_cache_row(&kv, b, &view);
        mt_tensor *x = mt_tensor_new(c, MT_I32, 2, (int64_t[]){1, lens[b]}, "prompt");
        c->be->to_device(x->data, prompts[b], (size_t)lens[b] * sizeof(int32_t));
        tok[b] = gen_argmax(mt_minimax_forward_cached(m, c, x, &view), 0);
        row[b] = b;
    }
    int n_act = B;
    for (int step = 0; n_act > 0; step++) {
        /* record this step's tokens; finished rows leave: the last active slot fills the hole */
        for (int s = 0; s < n_act;) {
            const int r = row[s];
            out[(size_t)r * (size_t)n_new + (size_t)step] = tok[s];
            n_out[r] = step + 1;
            if ((eos >= 0 && tok[s] == eos) || step + 1 == n_new) {
                n_act--;
                mt_minimax_cache_move_row(&kv, s, n_act);
                tok[s] = tok[n_act];
                row[s] = row[n_act];
            } else {
                s++;
            }
        }
        if (n_act == 0) break;
        mt_ctx_reset(c); /* the step's activations are dead; the caches live outside c */
        mt_tensor *x = mt_tensor_new(c, MT_I32, 2, (int64_t[]){n_act, 1}, "next tokens");
        c->be->to_device(x->data, tok, (size_t)n_act * sizeof(int32_t));
        mt_tensor *logits = mt_minimax_forward_cached(m, c, x, &kv);
        for (int s = 0; s < n_act; s++) tok[s] = gen_argmax(logits, s);
    }
    mt_ctx_reset(c);
    free(tok);
    free(row);
    mt_minimax_cache_view_free(&view);
    mt_minimax_cache_free(&kv);
}

void mt_minimax_generate(mt_minimax *m, mt_ctx *c, const int32_t *ids, int B, int T, int n_new,
                         int eos, int32_t *out, int *n_done) {
    MT_CHECK(B >= 1 && T >= 1 && n_new >= 0, "generate: B = %d, T = %d, n_new = %d", B, T, n_new);
    const int32_t **prompts = mt_malloc((size_t)B * sizeof(*prompts), "generate prompts");
    int *lens = mt_malloc((size_t)B * sizeof(int), "generate lengths");
    int *n_out = mt_malloc((size_t)B * sizeof(int), "generate counts");
    for (int b = 0; b < B; b++) {
        prompts[b] = ids + (size_t)b * (size_t)T;
        lens[b] = T;
    }
    mt_minimax_generate_batch(m, c, prompts, lens, B, n_new, eos, out, n_out);
    int steps = 0; /* a finished row repeats eos to the end, which batch's padding already is */
    for (int b = 0; b < B; b++) steps = n_out[b] > steps ? n_out[b] : steps;
    if (n_done) *n_done = steps;
    free(prompts);
    free(lens);
    free(n_out);
}
