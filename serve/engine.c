/* engine.c: continuous batching (serve/engine.h). */
#include "serve/engine.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

mt_serve_req *mt_serve_req_new(const int32_t *prompt, int n_prompt) {
    MT_CHECK(n_prompt >= 1, "serve: an empty prompt");
    mt_serve_req *r = mt_calloc(1, sizeof(*r), "request");
    r->prompt = mt_malloc(sizeof(int32_t) * (size_t)n_prompt, "request prompt");
    memcpy(r->prompt, prompt, sizeof(int32_t) * (size_t)n_prompt);
    r->n_prompt = n_prompt;
    r->logprobs = -1;
    r->opts.eos = -1;
    pthread_cond_init(&r->cond, NULL);
    return r;
}

void mt_serve_req_free(mt_serve_req *r) {
    if (!r) return;
    for (int i = 0; i < r->n_stops; i++) free(r->stops[i]);
    free(r->prompt);
    free(r->out);
    free(r->out_lp);
    free(r->out_top);
    free(r->out_top_lp);
    free(r->prompt_lp);
    free(r->prompt_top);
    free(r->prompt_top_lp);
    pthread_cond_destroy(&r->cond);
    free(r);
}

/* ---- logprobs: log-softmax of one position's logits ---- */

/* The log of the softmax's normaliser, in double. */
static double engine_lse(const float *x, int V) {
    double mx = x[0], s = 0;
    for (int v = 1; v < V; v++) mx = x[v] > mx ? x[v] : mx;
    for (int v = 0; v < V; v++) s += exp((double)x[v] - mx);
    return mx + log(s);
}

/* The k most likely ids (ties to the lower id) and their logprobs. */
static void engine_top(const float *x, int V, double lse, int k, int32_t *ids, float *lp) {
    for (int i = 0; i < k; i++) {
        int best = -1;
        for (int v = 0; v < V; v++) {
            bool taken = false;
            for (int j = 0; j < i && !taken; j++) taken = ids[j] == v;
            if (!taken && (best < 0 || x[v] > x[best])) best = v;
        }
        ids[i] = best;
        lp[i] = (float)((double)x[best] - lse);
    }
}

/* ---- stop strings ---- */

bool mt_serve_cut_stop(char *text, char *const *stops, int n_stops) {
    char *first = NULL;
    for (int i = 0; i < n_stops; i++) {
        char *at = strstr(text, stops[i]);
        if (at && (!first || at < first)) first = at;
    }
    if (first) *first = '\0';
    return first != NULL;
}

size_t mt_serve_stable_len(const char *text, size_t n, char *const *stops, int n_stops) {
    while (n >= 3 && !memcmp(text + n - 3, "\xEF\xBF\xBD", 3)) n -= 3;
    size_t keep = n;
    for (int i = 0; i < n_stops; i++) { /* the longest suffix that is a stop string's prefix */
        const size_t m = strlen(stops[i]);
        for (size_t j = m - 1 < n ? m - 1 : n; j > 0; j--)
            if (!memcmp(text + n - j, stops[i], j)) {
                if (n - j < keep) keep = n - j;
                break;
            }
    }
    return keep;
}

/* ---- the engine thread ---- */

/* What one row's logits give: the next token, and its logprobs when asked (outside the lock). */
typedef struct {
    int32_t id;
    float lp;
    int32_t top[MT_SERVE_MAX_TOP];
    float top_lp[MT_SERVE_MAX_TOP];
} engine_pick;

static void engine_choose(mt_serve_engine *e, const mt_serve_req *r, const float *x,
                          engine_pick *p) {
    const int V = e->model->cfg.vocab_size;
    const double u = r->opts.temperature > 0 ? mt_gen_uniform(r->opts.seed, 0, r->n_out) : 0;
    p->id = mt_gen_sample(x, V, &r->opts, u, e->work_p, e->work_key);
    if (r->logprobs < 0) return;
    const double lse = engine_lse(x, V);
    p->lp = (float)((double)x[p->id] - lse);
    engine_top(x, V, lse, r->logprobs, p->top, p->top_lp);
}

/* Under the lock: appends p to r's completion; true when r is finished. */
static bool engine_publish(mt_serve_engine *e, mt_serve_req *r, const engine_pick *p) {
    const int i = r->n_out++;
    r->out[i] = p->id;
    if (r->logprobs >= 0) r->out_lp[i] = p->lp;
    for (int j = 0; j < r->logprobs; j++) {
        r->out_top[i * MT_SERVE_MAX_TOP + j] = p->top[j];
        r->out_top_lp[i * MT_SERVE_MAX_TOP + j] = p->top_lp[j];
    }
    bool stop = r->opts.eos >= 0 && p->id == r->opts.eos;
    if (!stop && r->n_stops > 0) {
        char *text = mt_tokenizer_decode(e->tok, r->out, r->n_out, true);
        stop = mt_serve_cut_stop(text, r->stops, r->n_stops);
        free(text);
    }
    r->stopped = stop;
    pthread_cond_broadcast(&r->cond);
    return stop || r->n_out == r->max_tokens || r->cancelled;
}

static void engine_finish(mt_serve_req *r) {
    r->state = MT_REQ_DONE;
    pthread_cond_broadcast(&r->cond);
}

/* Slot s leaves the step batch: the last active row moves into it. Under the lock. */
static void engine_remove(mt_serve_engine *e, int s) {
    engine_finish(e->slot[s]);
    e->n_active--;
    mt_minimax_cache_move_row(&e->kv, s, e->n_active);
    e->slot[s] = e->slot[e->n_active];
    e->tok_step[s] = e->tok_step[e->n_active];
}

/* Prompt tokens [a, b) of r through row s of the cache (called without the lock: only the engine
 * touches the cache and r's prompt-side outputs until r is done): a = 0 fills the empty row (a
 * prefill), a > 0 extends it (models/generate.h). The echo logprobs of the positions the chunk
 * predicts; when b ends the prompt, its first token in *p. Returns whether *p was drawn (not for
 * an earlier chunk, nor when r wants no token: max_tokens 0). */
static bool engine_prefill(mt_serve_engine *e, mt_serve_req *r, int s, int a, int b,
                           engine_pick *p) {
    mt_ctx *c = &e->ctx;
    const int T = b - a, V = e->model->cfg.vocab_size;
    mt_ctx_reset(c);
    if (a == 0) e->kv.t_len[s] = 0; /* the row's last request is gone: an empty row */
    mt_minimax_cache_row(&e->kv, s, &e->view);
    mt_tensor *x = mt_tensor_new(c, MT_I32, 2, (int64_t[]){1, T}, "prompt");
    c->be->to_device(x->data, r->prompt + a, (size_t)T * sizeof(int32_t));
    const bool echo = r->echo && r->logprobs >= 0; /* every position's logits, else the last's */
    const mt_tensor *logits = mt_minimax_forward_cached(e->model, c, x, &e->view, NULL, !echo);
    if (echo) { /* position t predicts prompt token t + 1 */
        if (a == 0) r->prompt_lp[0] = NAN;
        for (int t = a; t < b && t + 1 < r->n_prompt; t++) {
            const float *row = mt_gen_logits_host(c, logits, t - a, 1, e->host_logits);
            const double lse = engine_lse(row, V);
            r->prompt_lp[t + 1] = (float)((double)row[r->prompt[t + 1]] - lse);
            engine_top(row, V, lse, r->logprobs, r->prompt_top + (t + 1) * MT_SERVE_MAX_TOP,
                       r->prompt_top_lp + (t + 1) * MT_SERVE_MAX_TOP);
        }
    }
    if (b < r->n_prompt || r->max_tokens == 0) return false;
    engine_choose(e, r, mt_gen_logits_host(c, logits, echo ? T - 1 : 0, 1, e->host_logits), p);
    return true;
}

/* One decode step of every active row; publishes each row's token. Called with the lock held;
 * computes without it. */
static void engine_step(mt_serve_engine *e, engine_pick *picks) {
    const int n = e->n_active, V = e->model->cfg.vocab_size;
    pthread_mutex_unlock(&e->mu);
    mt_ctx *c = &e->ctx;
    mt_ctx_reset(c);
    mt_tensor *x = mt_tensor_new(c, MT_I32, 2, (int64_t[]){n, 1}, "next tokens");
    c->be->to_device(x->data, e->tok_step, (size_t)n * sizeof(int32_t));
    const mt_tensor *logits = mt_minimax_forward_cached(e->model, c, x, &e->kv, NULL, false);
    const float *rows = mt_gen_logits_host(c, logits, 0, n, e->host_logits);
    for (int s = 0; s < n; s++)
        engine_choose(e, e->slot[s], rows + (size_t)s * (size_t)V, &picks[s]);
    pthread_mutex_lock(&e->mu);
    e->n_steps++;
    e->n_step_rows += n;
    /* slot order is stable until the first removal: publish from the end backwards, so a
     * removal only moves an already-published row into the hole */
    for (int s = n - 1; s >= 0; s--) {
        e->tok_step[s] = picks[s].id;
        if (engine_publish(e, e->slot[s], &picks[s])) engine_remove(e, s);
    }
}

/* Rows the call `group` holds: its decoding rows, and the spare row when its prompt fills it. */
static int engine_rows_of(const mt_serve_engine *e, long group) {
    int rows = e->fill && e->fill->group == group;
    for (int s = 0; s < e->n_active; s++) rows += e->slot[s]->group == group;
    return rows;
}

/* The queued request to admit next (*prev: the one before it), or NULL: the first one of the
 * call holding the fewest rows, so that one request of 64 prompts does not keep a later
 * one-prompt request waiting for all of its prompts; *rows: how many its call holds. Under the
 * lock. */
static mt_serve_req *engine_next(mt_serve_engine *e, mt_serve_req **prev, int *rows) {
    mt_serve_req *best = NULL;
    *rows = INT32_MAX;
    for (mt_serve_req *r = e->queue_head, *p = NULL; r && *rows > 0; p = r, r = r->next) {
        const int n = engine_rows_of(e, r->group);
        if (n < *rows) best = r, *prev = p, *rows = n;
    }
    return best;
}

static void engine_unlink(mt_serve_engine *e, mt_serve_req *r, mt_serve_req *prev) {
    if (prev)
        prev->next = r->next;
    else
        e->queue_head = r->next;
    if (e->queue_tail == r) e->queue_tail = prev;
    e->n_queued--;
}

/* Prompt tokens [a, b) of r into row s, the lock released meanwhile; when they end the prompt,
 * r joins the step batch in row n_active (row s moved there), or is done. Under the lock. */
static void engine_fill(mt_serve_engine *e, mt_serve_req *r, int s, int a, int b) {
    pthread_mutex_unlock(&e->mu);
    engine_pick p;
    const bool more = engine_prefill(e, r, s, a, b, &p);
    pthread_mutex_lock(&e->mu);
    e->n_prefilled += b - a;
    if (b < r->n_prompt) return;
    if (!more || engine_publish(e, r, &p)) {
        engine_finish(r);
        return;
    }
    mt_minimax_cache_move_row(&e->kv, e->n_active, s);
    e->slot[e->n_active] = r;
    e->tok_step[e->n_active] = p.id;
    e->n_active++;
}

/* Whether the prompt in the spare row waits this step: a row of a call holding fewer rows than
 * its own is decoding (a short request beside a long call gets its steps without the long
 * call's prefill between them; the long call's chunks go on when it is done). */
static bool engine_fill_waits(const mt_serve_engine *e) {
    const int own = engine_rows_of(e, e->fill->group);
    for (int s = 0; s < e->n_active; s++)
        if (engine_rows_of(e, e->slot[s]->group) < own) return true;
    return false;
}

/* The prefill work between two decode steps: at most prefill_tokens prompt tokens (an idle
 * engine's too, so that a request arriving meanwhile waits for one chunk at most). A prompt that
 * fits what is left is prefilled whole into the next free row; a longer one goes into the spare
 * row (row max_batch) and is prefilled there a chunk at a time, then moved into a free row. Calls
 * are served fairly: the request of the call holding the fewest rows goes first (the prompt in
 * the spare row counts as one of its call's rows, and goes on before requests of calls holding
 * as many). Under the lock. */
static void engine_admit(mt_serve_engine *e) {
    int budget = e->prefill_tokens;
    while (budget > 0) {
        if (e->fill && e->fill->cancelled) {
            engine_finish(e->fill);
            e->fill = NULL;
        }
        mt_serve_req *prev = NULL;
        int rows;
        mt_serve_req *r = engine_next(e, &prev, &rows);
        if (r && r->cancelled) {
            engine_unlink(e, r, prev);
            engine_finish(r);
            continue;
        }
        const bool ahead = r && (!e->fill || rows < engine_rows_of(e, e->fill->group));
        const bool free_row = e->n_active < e->max_batch;
        if (ahead && free_row && r->n_prompt <= budget) { /* whole, into the next free row */
            engine_unlink(e, r, prev);
            r->state = MT_REQ_RUNNING;
            budget -= r->n_prompt;
            engine_fill(e, r, e->n_active, 0, r->n_prompt);
            continue;
        }
        if (ahead && !e->fill) { /* a long prompt: into the spare row, chunk by chunk */
            engine_unlink(e, r, prev);
            r->state = MT_REQ_RUNNING;
            e->fill = r;
            e->fill_done = 0;
            continue;
        }
        if (!e->fill) return;
        if (engine_fill_waits(e)) return;
        const int a = e->fill_done, left = e->fill->n_prompt - a;
        const int b = a + (left < budget ? left : budget);
        if (b == e->fill->n_prompt && !free_row) return; /* its last chunk waits for a row */
        mt_serve_req *f = e->fill;
        budget -= b - a;
        engine_fill(e, f, e->max_batch, a, b);
        e->fill_done = b;
        if (b == f->n_prompt) e->fill = NULL;
    }
}

static void *engine_main(void *arg) {
    mt_serve_engine *e = arg;
    engine_pick *picks = mt_calloc((size_t)e->max_batch, sizeof(engine_pick), "picks");
    pthread_mutex_lock(&e->mu);
    for (;;) {
        while (!e->shutdown && e->n_active == 0 && !e->queue_head && !e->fill)
            pthread_cond_wait(&e->wake, &e->mu);
        if (e->shutdown && e->n_active == 0 && !e->queue_head && !e->fill) break;
        for (int s = e->n_active - 1; s >= 0; s--) /* the clients that went away */
            if (e->slot[s]->cancelled) engine_remove(e, s);
        engine_admit(e);
        if (e->n_active == 0) continue;
        engine_step(e, picks);
    }
    pthread_mutex_unlock(&e->mu);
    free(picks);
    return NULL;
}

void mt_serve_engine_start(mt_serve_engine *e, mt_minimax *model, const mt_tokenizer *tok,
                           const mt_backend *be, int max_batch, int t_max, int prefill_tokens) {
    MT_CHECK(prefill_tokens >= 1, "serve: a prefill budget of %d tokens", prefill_tokens);
    memset(e, 0, sizeof(*e));
    e->prefill_tokens = prefill_tokens;
    e->model = model;
    e->tok = tok;
    e->max_batch = max_batch;
    e->t_max = t_max;
    const mt_minimax_config *cfg = &model->cfg;
    const size_t prefill = mt_minimax_generate_arena_bytes(cfg, 1, t_max),
                 step = mt_minimax_generate_arena_bytes(cfg, max_batch, 1);
    mt_ctx_init(&e->ctx, be, prefill > step ? prefill : step, 64 * (cfg->num_hidden_layers + 4));
    /* the rows of the step batch and the spare row long prompts fill a chunk at a time */
    mt_minimax_cache_init(&e->kv, e->ctx.be, cfg, max_batch + 1, t_max);
    mt_minimax_cache_view_alloc(&e->view, e->kv.n_layers);
    e->slot = mt_calloc((size_t)max_batch, sizeof(mt_serve_req *), "engine slots");
    e->tok_step = mt_calloc((size_t)max_batch, sizeof(int32_t), "engine tokens");
    e->host_logits =
        be->dev == MT_CPU
            ? NULL
            : mt_malloc(sizeof(float) * (size_t)max_batch * (size_t)cfg->vocab_size, "host logits");
    e->work_p = mt_malloc(sizeof(float) * (size_t)cfg->vocab_size, "sampling probabilities");
    e->work_key = mt_malloc(sizeof(uint64_t) * (size_t)cfg->vocab_size, "sampling order");
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->wake, NULL);
    MT_CHECK(pthread_create(&e->thread, NULL, engine_main, e) == 0, "serve: no engine thread");
}

void mt_serve_engine_stop(mt_serve_engine *e) {
    pthread_mutex_lock(&e->mu);
    e->shutdown = true;
    pthread_cond_signal(&e->wake);
    pthread_mutex_unlock(&e->mu);
    pthread_join(e->thread, NULL);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->wake);
    free(e->slot);
    free(e->tok_step);
    free(e->work_p);
    free(e->host_logits);
    free(e->work_key);
    mt_minimax_cache_view_free(&e->view);
    mt_minimax_cache_free(&e->kv);
    mt_ctx_free(&e->ctx);
}

void mt_serve_submit(mt_serve_engine *e, mt_serve_req *r) {
    const int n = r->max_tokens > 0 ? r->max_tokens : 1;
    r->out = mt_calloc((size_t)n, sizeof(int32_t), "completion");
    if (r->logprobs >= 0) {
        r->out_lp = mt_calloc((size_t)n, sizeof(float), "logprobs");
        r->out_top = mt_calloc((size_t)n * MT_SERVE_MAX_TOP, sizeof(int32_t), "top ids");
        r->out_top_lp = mt_calloc((size_t)n * MT_SERVE_MAX_TOP, sizeof(float), "top logprobs");
        if (r->echo) {
            const size_t T = (size_t)r->n_prompt;
            r->prompt_lp = mt_calloc(T, sizeof(float), "prompt logprobs");
            r->prompt_top = mt_calloc(T * MT_SERVE_MAX_TOP, sizeof(int32_t), "prompt top ids");
            r->prompt_top_lp = mt_calloc(T * MT_SERVE_MAX_TOP, sizeof(float), "prompt top");
        }
    }
    MT_CHECK(r->n_prompt + r->max_tokens <= e->t_max && r->logprobs <= MT_SERVE_MAX_TOP,
             "serve: a request of %d + %d tokens (context %d), %d top logprobs", r->n_prompt,
             r->max_tokens, e->t_max, r->logprobs);
    pthread_mutex_lock(&e->mu);
    r->state = MT_REQ_QUEUED;
    r->next = NULL;
    if (e->queue_tail)
        e->queue_tail->next = r;
    else
        e->queue_head = r;
    e->queue_tail = r;
    e->n_queued++;
    pthread_cond_signal(&e->wake);
    pthread_mutex_unlock(&e->mu);
}

void mt_serve_wait(mt_serve_engine *e, mt_serve_req *r, int seen) {
    pthread_mutex_lock(&e->mu);
    while (r->state != MT_REQ_DONE && r->n_out <= seen) pthread_cond_wait(&r->cond, &e->mu);
}

void mt_serve_cancel(mt_serve_engine *e, mt_serve_req *r) {
    pthread_mutex_lock(&e->mu);
    r->cancelled = true;
    pthread_cond_signal(&e->wake);
    pthread_mutex_unlock(&e->mu);
}

void mt_serve_load(mt_serve_engine *e, int *active, int *queued, int64_t *steps, int64_t *rows) {
    pthread_mutex_lock(&e->mu);
    *active = e->n_active;
    *queued = e->n_queued;
    *steps = e->n_steps;
    *rows = e->n_step_rows;
    pthread_mutex_unlock(&e->mu);
}

int64_t mt_serve_prefilled(mt_serve_engine *e) {
    pthread_mutex_lock(&e->mu);
    const int64_t n = e->n_prefilled;
    pthread_mutex_unlock(&e->mu);
    return n;
}
