/* gsm8k_eval.h: accuracy by generation, the pieces minimax-eval and the trainer's eval.generate
 * share (docs/evaluation.md), for GSM8K problems and (msgs set: eval/messages_eval.h) for
 * conversations whose last assistant message is the reference. For GSM8K: the prompt (n-shot:
 * solved examples as earlier user/assistant turns, then the question as a user turn with the
 * generation prompt, rendered with the model's chat template, data/chat.h), one ragged batch of
 * samples decoded and scored into JSON result lines, the results of every rank put back in data-set
 * order, and the Wilson interval.
 *
 * Samples are split across ranks as sample i on rank i % N; a rank's result lines are in its
 * samples' order, so rank 0 rebuilds the data-set order from the ranks' concatenated lines. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "data/chat.h"
#include "core/file_io.h"
#include "data/gsm8k.h"
#include "data/tokenizer.h"
#include "eval/messages_eval.h"
#include "models/generate.h"
#include "models/reply.h"

typedef struct {
    mt_minimax *model; /* buckets bound (host memory: generation runs on the CPU backend) */
    mt_ctx *ctx;       /* its arena holds one prompt forward (mt_gsm8k_eval_arena_bytes) */
    const mt_tokenizer *tok;
    mt_chat_template *chat;    /* renders the prompts (data/chat.h) */
    const mt_gsm8k_set *set;   /* the questions and gold answers */
    const mt_gsm8k_set *shots; /* the solved examples (NULL: zero-shot) */
    int n_shots;               /* the first n_shots of shots, in order */
    int n_new;                 /* max new tokens per completion */
    mt_gen_opts opts;          /* eos, sampling, stops; row_ids set per batch */
    /* the model's reply format (models/reply.h; NULL or "none": the whole completion is the
     * answer): the answer is taken from the content after the reasoning */
    const mt_reply_format *reply;
    /* the messages task (eval/messages_eval.h; NULL: GSM8K's, from set and shots): the samples,
     * the shots (n_shots of them) and the metrics */
    const mt_msgs_set *msgs, *msg_shots;
    const mt_match *match;
} mt_gsm8k_eval;

/* What a batch adds up. */
typedef struct {
    int64_t correct, tokens;
    int64_t in_reasoning; /* completions that ended inside their reasoning (no answer after it) */
    int64_t hits[MT_MATCH_COUNT]; /* the messages task: the samples each metric counts right */
} mt_gsm8k_counts;

/* The conversation of a question: shots[0..n_shots) as user (question) / assistant (answer)
 * turns, then the question as a user turn, rendered by t with the generation prompt into out.
 * 0, or -1 with one line in err (the template refused the conversation). */
int mt_gsm8k_eval_render(mt_chat_template *t, const mt_gsm8k_set *shots, int n_shots,
                         const char *question, mt_chat_rendered *out, char *err, size_t errlen);
/* The same, tokenized: ids malloc'ed, *n tokens; NULL with one line in err. */
int32_t *mt_gsm8k_eval_prompt(mt_chat_template *t, const mt_tokenizer *tok,
                              const mt_gsm8k_set *shots, int n_shots, const char *question, int *n,
                              char *err, size_t errlen);

/* The longest prompt (tokens, at least 1) among samples first, first + stride, ... (n of them:
 * a rank's share); -1 with one line in err naming the first sample whose prompt does not render
 * or tokenize, does not fit the model's context (max_position_embeddings: a prompt must leave
 * room for one token), or whose gold answer the scorer cannot use (mt_gsm8k_gold_usable). The
 * callers check every prompt here before decoding any, so that such a sample is a line at the
 * start rather than a failure in the middle of a run or a sample silently scored wrong. */
int mt_gsm8k_eval_longest(const mt_gsm8k_eval *e, int64_t first, int64_t stride, int64_t n,
                          char *err, size_t errlen);
/* Arena bytes for e's context: one prompt forward of the longest of those prompts (which
 * mt_gsm8k_eval_longest has checked). */
size_t mt_gsm8k_eval_arena_bytes(const mt_gsm8k_eval *e, int64_t first, int64_t stride, int64_t n);

/* Decodes the samples ids[0..nb) as one ragged batch (greedy unless e->opts samples) and
 * appends one JSON line per sample to lines, in the order of ids: {"index", "prompt" (the
 * question), "completion" (special tokens left out), with a reply format also "reasoning"
 * (null when none), "content" (what the answer is taken from) and "ended_in_reasoning",
 * then "extracted", "gold", "correct"}. Adds to counts. */
void mt_gsm8k_eval_batch(const mt_gsm8k_eval *e, const int64_t *ids, int nb, mt_strbuf *lines,
                         mt_gsm8k_counts *counts);

/* n result lines in data-set order from the ranks' lines: rank r's lines (its samples r,
 * r + n_ranks, ...) are the len[r] bytes at all + displ[r]. Appends them to out. */
void mt_gsm8k_eval_order(const char *all, const int64_t *displ, const int64_t *len, int n_ranks,
                         int64_t n, mt_strbuf *out);

/* The number of samples among the first n whose question (GSM8K's question; the messages task:
 * the last user message before the reference) is also one of the shots' (the answer is then in
 * the prompt), and the first of them in *first (-1: none). */
int64_t mt_gsm8k_eval_overlap(const mt_gsm8k_eval *e, int64_t n, int64_t *first);
/* Sample i's line in its file (1-based). */
int64_t mt_gsm8k_eval_line(const mt_gsm8k_eval *e, int64_t i);

/* The 95 % Wilson score interval of correct / n, clamped to [0, 1]. */
void mt_gsm8k_eval_wilson(int64_t correct, int64_t n, double *lo, double *hi);
