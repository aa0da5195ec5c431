/* generate.c: greedy decoding with caches (models/generate.h). The cached forward itself is in
 * models/minimax.c, next to the training forward, so both run the same layer code. */
#include "models/generate.h"

#include "models/block.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Floats per row of each cache kind (k and v each; index keys; a lightning state). */
static void cache_row_floats(const mt_minimax_config *cfg, int t_max, size_t *kv, size_t *ik,
                             size_t *state) {
    const size_t H = (size_t)cfg->num_attention_heads, Hkv = (size_t)cfg->num_key_value_heads,
                 D = (size_t)cfg->head_dim;
    *kv = (size_t)t_max * Hkv * D;
    *ik = (size_t)t_max * (size_t)cfg->msa_index_dim;
    *state = H * D * D;
}

size_t mt_minimax_cache_bytes(const mt_minimax_config *cfg, int B, int t_max) {
    size_t row_kv, row_ik, row_state, floats = 0;
    cache_row_floats(cfg, t_max, &row_kv, &row_ik, &row_state);
    for (int l = 0; l < cfg->num_hidden_layers; l++) {
        mt_layer_plan p;
        mt_config_layer_plan(cfg, l, &p);
        const unsigned caches = mt_mixer_of(p.mixer)->caches;
        floats += (caches & MT_CACHE_KV ? 2 * row_kv : 0) +
                  (caches & MT_CACHE_INDEX_KEYS ? row_ik : 0) +
                  (caches & MT_CACHE_STATE ? row_state : 0);
    }
    return sizeof(float) * floats * (size_t)B;
}

/* n floats of be's memory, zeroed. */
static float *cache_alloc(const mt_backend *be, size_t n) {
    float *p = be->alloc(sizeof(float) * n);
    be->zero(p, sizeof(float) * n);
    return p;
}

void mt_minimax_cache_init(mt_minimax_cache *kv, const mt_backend *be, const mt_minimax_config *cfg,
                           int B, int t_max) {
    const int L = cfg->num_hidden_layers;
    MT_CHECK(B >= 1 && t_max >= 1, "generate: cache for B = %d rows of %d positions", B, t_max);
    memset(kv, 0, sizeof(*kv));
    kv->be = be;
    kv->n_layers = L;
    kv->B = B;
    kv->t_max = t_max;
    cache_row_floats(cfg, t_max, &kv->row_kv, &kv->row_ik, &kv->row_state);
    kv->t_len = mt_calloc((size_t)B, sizeof(int32_t), "kv cache lengths");
    kv->k = mt_calloc((size_t)L, sizeof(float *), "kv cache k");
    kv->v = mt_calloc((size_t)L, sizeof(float *), "kv cache v");
    kv->state = mt_calloc((size_t)L, sizeof(float *), "lightning states");
    kv->ik = mt_calloc((size_t)L, sizeof(float *), "index key caches");
    for (int l = 0; l < L; l++) {
        mt_layer_plan p; /* the caches a layer keeps are its mixer's */
        mt_config_layer_plan(cfg, l, &p);
        const unsigned caches = mt_mixer_of(p.mixer)->caches;
        if (caches & MT_CACHE_KV) {
            kv->k[l] = cache_alloc(be, (size_t)B * kv->row_kv);
            kv->v[l] = cache_alloc(be, (size_t)B * kv->row_kv);
        }
        if (caches & MT_CACHE_INDEX_KEYS) kv->ik[l] = cache_alloc(be, (size_t)B * kv->row_ik);
        if (caches & MT_CACHE_STATE) kv->state[l] = cache_alloc(be, (size_t)B * kv->row_state);
    }
}

void mt_minimax_cache_free(mt_minimax_cache *kv) {
    for (int l = 0; l < kv->n_layers; l++) {
        float *bufs[4] = {kv->k[l], kv->v[l], kv->state[l], kv->ik[l]};
        for (int i = 0; i < 4; i++)
            if (bufs[i]) kv->be->free(bufs[i]);
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
    view->be = kv->be;
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
            kv->be->copy(kv->k[l] + (size_t)dst * kv->row_kv, kv->k[l] + (size_t)src * kv->row_kv,
                         n * per_pos * sizeof(float));
            kv->be->copy(kv->v[l] + (size_t)dst * kv->row_kv, kv->v[l] + (size_t)src * kv->row_kv,
                         n * per_pos * sizeof(float));
        }
        if (kv->ik[l])
            kv->be->copy(kv->ik[l] + (size_t)dst * kv->row_ik, kv->ik[l] + (size_t)src * kv->row_ik,
                         n * per_ik * sizeof(float));
        if (kv->state[l])
            kv->be->copy(kv->state[l] + (size_t)dst * kv->row_state,
                         kv->state[l] + (size_t)src * kv->row_state, kv->row_state * sizeof(float));
    }
    kv->t_len[dst] = kv->t_len[src];
}

bool mt_gen_backend_can_decode(const mt_minimax *m, const mt_backend *be, char *why, size_t n) {
    for (int l = 0; l < m->cfg.num_hidden_layers; l++) {
        const mt_mixer *mixer = m->layers[l].mixer;
        if (mixer->can_decode && !mixer->can_decode(be)) {
            snprintf(why, n, "the %s backend has no %s decode step (layer %d is %s)", be->name,
                     mixer->name, l, mixer->name);
            return false;
        }
    }
    return true;
}

const mt_backend *mt_gen_backend_named(const char *name, const mt_minimax *m, char *err, size_t n) {
    if (m->cfg.head != MT_HEAD_CAUSAL_LM) {
        snprintf(err, n,
                 "a %s model (config.json's architectures) has no lm_head to generate with; "
                 "minimax-forward runs its head",
                 mt_head_name(m->cfg.head));
        return NULL;
    }
    const mt_backend *be = mt_backend_named(name, err, n);
    char why[160];
    if (be && !mt_gen_backend_can_decode(m, be, why, sizeof(why)))
        snprintf(err, n, "--backend %s: %s", name, why), be = NULL;
    return be;
}

/* One no-grad prompt forward: a few live activations of the widest layer plus the logits. */
size_t mt_minimax_generate_arena_bytes(const mt_minimax_config *cfg, int64_t B, int64_t T) {
    const int64_t N = B * T, C = cfg->hidden_size,
                  HD = (int64_t)cfg->num_attention_heads * cfg->head_dim;
    const int64_t K = cfg->num_experts_per_tok, F = cfg->intermediate_size;
    int64_t per_layer = N * (12 * C + 10 * HD + 4 * cfg->num_local_experts) +
                        N * K * (4 * C + 6 * F) + 2 * B * cfg->num_attention_heads * T +
                        (int64_t)B * cfg->num_attention_heads * cfg->head_dim * cfg->head_dim;
    int64_t floats = per_layer * cfg->num_hidden_layers + 2 * N * cfg->vocab_size;
    return (size_t)floats * sizeof(float) + ((size_t)64 << 20);
}

/* argmax of one row of logits (V); ties go to the lowest id, like torch.argmax. */
static int32_t gen_argmax(const float *row, int V) {
    int best = 0;
    for (int v = 1; v < V; v++)
        if (row[v] > row[best]) best = v;
    return (int32_t)best;
}

static uint64_t gen_splitmix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

double mt_gen_uniform(uint64_t seed, int64_t row, int64_t step) {
    /* each key chained through the mixer, so (row, step) pairs never collide by a sum */
    uint64_t x = gen_splitmix64(seed);
    x = gen_splitmix64(x ^ (uint64_t)row);
    x = gen_splitmix64(x ^ (uint64_t)step);
    return (double)(x >> 11) * 0x1.0p-53;
}

static int gen_key_cmp(const void *a, const void *b) {
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

int32_t mt_gen_sample(const float *logits, int V, const mt_gen_opts *o, double u, float *work_p,
                      uint64_t *work_key) {
    if (!o || o->temperature <= 0) return gen_argmax(logits, V);
    const int32_t best = gen_argmax(logits, V);
    const double mx = logits[best], inv_t = 1.0 / (double)o->temperature;
    for (int v = 0; v < V; v++) { /* unnormalised softmax; NaN counts as no mass */
        const double p = exp(((double)logits[v] - mx) * inv_t);
        work_p[v] = p == p ? (float)p : 0.0f;
    }
    const bool top_k = o->top_k > 0 && o->top_k<V, top_p = o->top_p> 0 && o->top_p < 1;
    if (!top_k && !top_p) { /* the whole distribution, in id order */
        double total = 0;
        for (int v = 0; v < V; v++) total += work_p[v];
        double acc = 0, target = u * total;
        for (int v = 0; v < V; v++) {
            acc += work_p[v];
            if (acc > target && work_p[v] > 0) return (int32_t)v;
        }
        return best; /* rounding at the very top: the most likely token */
    }
    /* most likely first, ties to the lower id: a p >= 0's fp32 bits order like p, so the key
     * (~bits << 32 | id) sorts ascending into that order */
    for (int v = 0; v < V; v++) {
        uint32_t bits;
        memcpy(&bits, &work_p[v], sizeof(bits));
        work_key[v] = ((uint64_t)~bits << 32) | (uint32_t)v;
    }
    qsort(work_key, (size_t)V, sizeof(uint64_t), gen_key_cmp);
    int n = top_k ? o->top_k : V;
    double total = 0;
    for (int i = 0; i < n; i++) total += work_p[(uint32_t)work_key[i]];
    if (top_p) { /* the smallest prefix holding top_p of the (top-k) mass; at least one token */
        double acc = 0;
        int keep = 0;
        while (keep < n) {
            acc += work_p[(uint32_t)work_key[keep++]];
            if (acc >= (double)o->top_p * total) break;
        }
        n = keep;
        total = acc;
    }
    double acc = 0, target = u * total;
    for (int i = 0; i < n; i++) {
        const uint32_t v = (uint32_t)work_key[i];
        acc += work_p[v];
        if (acc > target) return (int32_t)v;
    }
    return (int32_t)(uint32_t)work_key[0];
}

const float *mt_gen_logits_host(const mt_ctx *c, const mt_tensor *logits, int64_t first, int64_t n,
                                float *host) {
    const int64_t V = logits->shape[logits->ndim - 1];
    const float *src = (const float *)logits->data + first * V;
    if (c->be->dev == MT_CPU) return src;
    c->be->to_host(host, src, sizeof(float) * (size_t)(n * V));
    return host;
}

/* Step `step`'s token of prompt row r from its last-position logits x (V, host memory). */
static int32_t gen_next(const float *x, int64_t V, int r, int step, const mt_gen_opts *o,
                        float *work_p, uint64_t *work_key) {
    const int64_t id = o && o->row_ids ? o->row_ids[r] : r;
    const double u = o && o->temperature > 0 ? mt_gen_uniform(o->seed, id, step) : 0;
    return mt_gen_sample(x, (int)V, o, u, work_p, work_key);
}

/* One profiled step (a prompt's prefill or a decode step) begun at t0, its forward done at t1:
 * the sampling of its n rows of V logits after t1 as a named row (a pass over each row's
 * logits: its bytes read), and the step's wall time. */
static void gen_profile_step(mt_profile *p, double t0, double t1, int n, int V) {
    const double t2 = mt_profile_now();
    mt_profile_add(p, "sample", MT_PROFILE_STEP, t2 - t1, 0, 4.0 * n * V);
    p->steps++;
    p->step_sec += t2 - t0;
}

void mt_minimax_generate_batch(mt_minimax *m, mt_ctx *c, const int32_t *const *prompts,
                               const int *lens, int B, int n_new, const mt_gen_opts *o,
                               int32_t *out, int *n_out) {
    const mt_gen_sync *sync = o ? o->sync : NULL;
    const mt_bucket_hooks *hooks = sync ? sync->hooks : NULL;
    MT_CHECK(B >= (sync ? 0 : 1) && B <= MT_GEN_BATCH_MAX && n_new >= 0,
             "generate: B = %d rows (%d to %d), n_new = %d", B, sync ? 0 : 1, MT_GEN_BATCH_MAX,
             n_new);
    const int V = m->cfg.vocab_size;
    /* the context: a row holds at most max_position_embeddings tokens, prompt and reply (the
     * tools refuse a prompt that leaves no room and say so when a reply will be cut) */
    const int ctx = m->cfg.max_position_embeddings > 0 ? m->cfg.max_position_embeddings : INT_MAX;
    int t_max = 1;
    for (int b = 0; b < B; b++) {
        MT_CHECK(lens[b] >= 1, "generate: row %d has an empty prompt", b);
        MT_CHECK(lens[b] < ctx,
                 "generate: row %d's prompt is %d tokens, the model's context "
                 "(max_position_embeddings) %d",
                 b, lens[b], ctx);
        for (int t = 0; t < lens[b]; t++)
            MT_CHECK(prompts[b][t] >= 0 && prompts[b][t] < V,
                     "generate: prompt token %d at row %d position %d "
                     "is outside the vocabulary [0, %d)",
                     prompts[b][t], b, t, V);
        const int room = n_new < ctx - lens[b] ? n_new : ctx - lens[b];
        if (lens[b] + room > t_max) t_max = lens[b] + room;
    }
    const int eos = o ? o->eos : -1;
    for (int64_t i = 0; i < (int64_t)B * n_new; i++) out[i] = eos >= 0 ? eos : -1;
    for (int b = 0; b < B; b++) n_out[b] = 0;
    if (n_new == 0) return; /* every rank alike: n_new is the same everywhere */

    mt_minimax_cache kv = {0}, view = {0};
    if (B > 0) {
        mt_minimax_cache_init(&kv, c->be, &m->cfg, B, t_max);
        mt_minimax_cache_view_alloc(&view, kv.n_layers);
    }
    const int nb = B > 0 ? B : 1;
    float *host_logits = mt_malloc(sizeof(float) * (size_t)nb * (size_t)V, "host logits");
    int32_t *tok = mt_malloc((size_t)nb * sizeof(int32_t), "generate tokens");
    int *row = mt_malloc((size_t)nb * sizeof(int), "generate slot rows"); /* slot -> prompt row */
    float *work_p = mt_malloc((size_t)V * sizeof(float), "sampling probabilities");
    uint64_t *work_key = mt_malloc((size_t)V * sizeof(uint64_t), "sampling order");

    /* prefill: each prompt alone through its row of the cache, its own length, no padding (in
     * step with the other ranks: as many as the rank with the most) */
    const int n_fill = sync ? sync->max_all(sync->user, B) : B;
    mt_profile *prof_fill = o ? o->prof_prefill : NULL, *prof_step = o ? o->prof_decode : NULL;
    for (int b = 0; b < n_fill; b++) {
        mt_ctx_reset(c);
        if (b >= B) {
            mt_minimax_walk_buckets(m, hooks);
            continue;
        }
        const double t0 = prof_fill ? mt_profile_now() : 0;
        c->prof = prof_fill;
        mt_minimax_cache_row(&kv, b, &view);
        mt_tensor *x = mt_tensor_new(c, MT_I32, 2, (int64_t[]){1, lens[b]}, "prompt");
        c->be->to_device(x->data, prompts[b], (size_t)lens[b] * sizeof(int32_t));
        const mt_tensor *logits = mt_minimax_forward_cached(m, c, x, &view, hooks, true);
        const float *last = mt_gen_logits_host(c, logits, 0, 1, host_logits);
        const double t1 = prof_fill ? mt_profile_now() : 0;
        tok[b] = gen_next(last, V, b, 0, o, work_p, work_key);
        row[b] = b;
        c->prof = NULL;
        if (prof_fill) gen_profile_step(prof_fill, t0, t1, 1, V);
    }
    int n_act = B;
    for (int step = 0;; step++) {
        /* record this step's tokens; finished rows leave: the last active slot fills the hole */
        const double t_compact = prof_step ? mt_profile_now() : 0;
        for (int s = 0; s < n_act;) {
            const int r = row[s];
            out[(size_t)r * (size_t)n_new + (size_t)step] = tok[s];
            n_out[r] = step + 1;
            const int32_t *mine = out + (size_t)r * (size_t)n_new;
            if ((eos >= 0 && tok[s] == eos) || step + 1 == n_new || lens[r] + step + 1 == ctx ||
                (o && o->stop && o->stop(o->stop_user, r, mine, step + 1))) {
                n_act--;
                mt_minimax_cache_move_row(&kv, s, n_act);
                tok[s] = tok[n_act];
                row[s] = row[n_act];
            } else {
                s++;
            }
        }
        if (prof_step) { /* part of the step's wall time: the steps' rows add up */
            const double dt = mt_profile_now() - t_compact;
            mt_profile_add(prof_step, "cache_compact", MT_PROFILE_STEP, dt, 0, 0);
            prof_step->step_sec += dt;
        }
        /* ends together on every rank: at step n_new - 1 at the latest */
        if ((sync ? sync->max_all(sync->user, n_act) : n_act) == 0) break;
        mt_ctx_reset(c);  /* the step's activations are dead; the caches live outside c */
        if (n_act == 0) { /* this rank is done, others are not: their gathers still need it */
            mt_minimax_walk_buckets(m, hooks);
            continue;
        }
        const double t0 = prof_step ? mt_profile_now() : 0;
        c->prof = prof_step;
        mt_tensor *x = mt_tensor_new(c, MT_I32, 2, (int64_t[]){n_act, 1}, "next tokens");
        c->be->to_device(x->data, tok, (size_t)n_act * sizeof(int32_t));
        mt_tensor *logits = mt_minimax_forward_cached(m, c, x, &kv, hooks, false);
        const float *rows = mt_gen_logits_host(c, logits, 0, n_act, host_logits);
        const double t1 = prof_step ? mt_profile_now() : 0;
        for (int s = 0; s < n_act; s++)
            tok[s] =
                gen_next(rows + (size_t)s * (size_t)V, V, row[s], step + 1, o, work_p, work_key);
        c->prof = NULL;
        if (prof_step) gen_profile_step(prof_step, t0, t1, n_act, V);
    }
    mt_ctx_reset(c);
    free(tok);
    free(row);
    free(work_p);
    free(work_key);
    free(host_logits);
    if (B > 0) {
        mt_minimax_cache_view_free(&view);
        mt_minimax_cache_free(&kv);
    }
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
    const mt_gen_opts o = {.eos = eos};
    mt_minimax_generate_batch(m, c, prompts, lens, B, n_new, &o, out, n_out);
    int steps = 0; /* a finished row repeats eos to the end, which batch's padding already is */
    for (int b = 0; b < B; b++) steps = n_out[b] > steps ? n_out[b] : steps;
    if (n_done) *n_done = steps;
    free(prompts);
    free(lens);
    free(n_out);
}
