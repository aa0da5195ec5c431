/* engine.h: continuous batching for minimax-serve (docs/serving.md).
 *
 * One engine thread owns the model, one cache of max_batch + 1 rows and one context. Requests
 * wait in a queue; between two decode steps the engine prefills at most prefill_tokens prompt
 * tokens: each time the first request of the call that holds the fewest rows (so a call of 64
 * prompts does not keep a later one-prompt call waiting for all of its prompts) is prefilled
 * alone (models/generate.h: a row is its one-prompt run), whole into the next free row when it
 * fits what is left, else a chunk at a time in the spare row (row max_batch, one prompt at a
 * time: a chunk extends the row, mt_minimax_forward_cached), which moves into a free row when its
 * prompt is in; while a row of a call holding fewer rows than the spare row's call decodes, the
 * spare row's chunks wait. Then one decode step runs for every active row, each at its own
 * position. So the rows already decoding, and a short request that arrives while a long prompt
 * fills, wait for one chunk of prefill at most, not for whole long prompts, and the short
 * request's own steps carry no prefill of the long call. A request that
 * finishes (eos, a stop string, its max_tokens) or is cancelled (its client went away) leaves
 * the step batch at once: the last active row's cache moves into its slot, as in
 * mt_minimax_generate_batch. Each request draws its tokens with row id 0 of its own seed
 * (mt_gen_uniform), so its output does not depend on which requests share its steps; greedy
 * outputs equal minimax-generate's token for token.
 *
 * Outputs are published under the engine's mutex; each request has a condition variable its
 * HTTP handler waits on. */
#pragma once
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "data/tokenizer.h"
#include "models/generate.h"
#include "models/minimax.h"

#define MT_SERVE_MAX_STOPS 4
#define MT_SERVE_MAX_TOP   5 /* the most top logprobs a token reports */

typedef enum { MT_REQ_QUEUED, MT_REQ_RUNNING, MT_REQ_DONE } mt_serve_req_state;

typedef struct mt_serve_req {
    /* in: set before mt_serve_submit, read-only afterwards */
    int32_t *prompt;  /* (n_prompt) ids, owned */
    int n_prompt;     /* >= 1 */
    int max_tokens;   /* >= 0 (0: only the prompt's logprobs, for echo) */
    mt_gen_opts opts; /* temperature, top_k, top_p, seed, eos; stop/row_ids set by the engine */
    char *stops[MT_SERVE_MAX_STOPS]; /* owned, searched in the decoded completion */
    int n_stops;
    int logprobs; /* -1: none; else each token's logprob and this many top ones (<= 5) */
    bool echo;    /* logprobs of the prompt's tokens too (the first has none) */
    long group;   /* the call (HTTP request) it belongs to: admission is fair between calls */
    /* out: under the engine's mutex */
    mt_serve_req_state state;
    bool cancelled;   /* set by the client's side: the engine drops the request */
    bool stopped;     /* ended by a stop string or eos (finish_reason "stop"), else "length" */
    int n_out;        /* tokens generated so far */
    int32_t *out;     /* (max_tokens) */
    float *out_lp;    /* (max_tokens) logprob of each generated token, when logprobs >= 0 */
    int32_t *out_top; /* (max_tokens, 5) top ids, when logprobs > 0 */
    float *out_top_lp;
    float *prompt_lp;          /* (n_prompt) with echo and logprobs >= 0: [0] NaN */
    int32_t *prompt_top;       /* (n_prompt, 5) */
    float *prompt_top_lp;      /* (n_prompt, 5) */
    pthread_cond_t cond;       /* signalled after each published token and at the end */
    struct mt_serve_req *next; /* the queue */
} mt_serve_req;

typedef struct {
    mt_minimax *model;
    const mt_tokenizer *tok;
    int max_batch, t_max; /* rows of the cache, positions per row (prompt + completion) */
    mt_ctx ctx;           /* on the backend whose memory holds the weights; the caches there too */
    mt_minimax_cache kv, view;
    float *host_logits;  /* (max_batch, V): a step's logits on the host (a device backend) */
    mt_serve_req **slot; /* (max_batch) the request in each active row */
    int32_t *tok_step;   /* (max_batch) each active row's next input token */
    int n_active;
    mt_serve_req *queue_head, *queue_tail;
    int n_queued;
    float *work_p;
    uint64_t *work_key;
    pthread_mutex_t mu;
    pthread_cond_t wake; /* a request arrived, or shutdown */
    bool shutdown;
    pthread_t thread;
    int64_t n_steps, n_step_rows; /* decode steps run and the rows they held (batching shown) */
    int prefill_tokens;           /* prompt tokens prefilled between two decode steps at most */
    mt_serve_req *fill;           /* the prompt the spare row holds (NULL: none) */
    int fill_done;                /* its tokens prefilled so far */
    int64_t n_prefilled;          /* prompt tokens prefilled so far */
} mt_serve_engine;

#define MT_SERVE_PREFILL_TOKENS 128 /* minimax-serve --prefill-tokens' default */

/* Starts the engine thread decoding on be; the model's buckets must be bound (in be's memory).
 * prefill_tokens >= 1: the prefill between two decode steps (MT_SERVE_PREFILL_TOKENS). */
void mt_serve_engine_start(mt_serve_engine *e, mt_minimax *model, const mt_tokenizer *tok,
                           const mt_backend *be, int max_batch, int t_max, int prefill_tokens);
/* Finishes what is queued and running, then stops the thread and frees the engine. */
void mt_serve_engine_stop(mt_serve_engine *e);

/* A request with its in-fields to fill (prompt copied; out buffers made at submit). */
mt_serve_req *mt_serve_req_new(const int32_t *prompt, int n_prompt);
void mt_serve_req_free(mt_serve_req *r);
/* Queues r (its out buffers allocated here). */
void mt_serve_submit(mt_serve_engine *e, mt_serve_req *r);
/* Waits under e->mu until r has more than `seen` tokens or is done; returns with the mutex
 * held (the caller reads r's outputs and unlocks). */
void mt_serve_wait(mt_serve_engine *e, mt_serve_req *r, int seen);
/* The client went away: the engine drops r at its next step (then the caller may free r after
 * waiting for MT_REQ_DONE). */
void mt_serve_cancel(mt_serve_engine *e, mt_serve_req *r);
/* Active rows and queued requests now; decode steps run so far and the rows they held. */
void mt_serve_load(mt_serve_engine *e, int *active, int *queued, int64_t *steps, int64_t *rows);
/* Prompt tokens prefilled so far (the scheduling test reads it through /health). */
int64_t mt_serve_prefilled(mt_serve_engine *e);

/* The byte length of the completion's text that is final: a trailing U+FFFD (a character whose
 * bytes are still coming) and a suffix that may begin a stop string are held back. */
size_t mt_serve_stable_len(const char *text, size_t n, char *const *stops, int n_stops);
/* The completion's text cut before its first stop string; true when one was found. */
bool mt_serve_cut_stop(char *text, char *const *stops, int n_stops);
