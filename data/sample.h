/* sample.h: SFT samples from conversations: the model's chat template (data/chat.h), the
 * tokenizer, and labels on the trained tokens.
 *
 * Which assistant messages are trained: every one (data.train_on = "all_assistant"), or the last
 * one of each sample ("last_assistant"); a message's "loss": true / false overrides both. Which
 * samples a conversation gives (data.reasoning_history): "as_template" renders it once, as the
 * template does (M2 drops the reasoning of assistant turns before the last user turn), every
 * trained message in it; "split" gives one sample per user message, the conversation up to the
 * next user message, the assistant messages after this user message trained: each with its own
 * reasoning, in the context it was produced in (what ms-swift and LLaMA-Factory do for
 * reasoning models); assistant messages before the first user message are not trained there,
 * and a sample with nothing trained is not made.
 *
 * Labels (HF convention, not shifted): labels[i] = ids[i] for the tokens that overlap a trained
 * byte span of the rendering, -100 elsewhere. The sampler (data/sampler.h) shifts labels so
 * position t predicts token t + 1. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "data/chat.h"
#include "core/file_io.h"
#include "data/tokenizer.h"

#define MT_IGNORE_INDEX (-100)

typedef enum { MT_TRUNC_DROP, MT_TRUNC_TRUNCATE } mt_trunc_policy;
typedef enum { MT_HISTORY_AS_TEMPLATE = 0, MT_HISTORY_SPLIT } mt_reasoning_history;

typedef struct {
    const char *system;       /* a system message put first unless the conversation has one */
    bool strip_annotations;   /* remove <<expr=value>> from assistant texts (GSM8K) */
    int64_t max_length;       /* tokens per sample (default 512) */
    mt_trunc_policy policy;   /* longer samples: dropped, or cut to max_length (default drop) */
    bool last_assistant_only; /* train the last assistant turn of a sample only (data.train_on) */
    mt_reasoning_history history; /* data.reasoning_history */
    /* data.sanitize_control_tokens: a control token spelled in a conversation's text is
     * trained as text (transformers' sanitize_control_tokens, data/chat.h) */
    bool sanitize;
} mt_sample_opts;
void mt_sample_opts_default(mt_sample_opts *o);
/* "as_template" / "split": the value, or -1. */
int mt_reasoning_history_parse(const char *name);

enum { MT_SAMPLE_OK = 0, MT_SAMPLE_TRUNCATED = 1, MT_SAMPLE_DROPPED = 2, MT_SAMPLE_ERROR = -1 };

/* Reusable buffers for building samples one after another. */
typedef struct {
    const mt_tokenizer *tok;
    mt_chat_template *tmpl; /* not owned */
    mt_sample_opts opts;
    jinja_heap *heap; /* the conversation being built, reset per conversation */
    mt_chat_conv conv;
    int n_pieces;
    int *piece_end; /* (n_pieces) messages of each sample */
    bool *train;    /* (n_pieces x messages) the trained messages of each sample */
    int cap_msgs, cap_pieces;
    mt_chat_rendered rendered;
    mt_token_buf tokens;
    uint8_t *mask;
    int32_t *labels;
    int64_t cap;
    /* the last sample built (valid until the next call) */
    const int32_t *ids; /* (n) */
    const int32_t *lab; /* (n) */
    int64_t n;          /* tokens kept (<= max_length) */
    int64_t n_full;     /* tokens before truncation */
    int64_t n_targets;  /* labels != -100 among the kept tokens */
} mt_sample_builder;

void mt_sample_builder_init(mt_sample_builder *b, const mt_tokenizer *tok, mt_chat_template *tmpl,
                            const mt_sample_opts *o);
void mt_sample_builder_free(mt_sample_builder *b);

/* Takes a conversation (a data set's record, data/dataset.h: JSON text) and plans its samples:
 * returns how many (0: none has a trained message), or -1 with err set. */
int mt_sample_conv_open(mt_sample_builder *b, const char *json, size_t len, char *err);
/* The same for a conversation of role / text messages. */
int mt_sample_conv_open_msgs(mt_sample_builder *b, const mt_chat_msg *msgs, int n, char *err);
/* Renders, tokenizes and labels sample k (< the count) of the open conversation. Returns
 * MT_SAMPLE_OK, MT_SAMPLE_TRUNCATED (cut to max_length), MT_SAMPLE_DROPPED (longer than
 * max_length under the drop policy) or MT_SAMPLE_ERROR with err set (the template fails on it,
 * its trained bytes cannot be told, or the tokenizer fails on the text). */
int mt_sample_build_piece(mt_sample_builder *b, int k, char *err);
/* One GSM8K problem (user: question, assistant: answer) as its one sample. */
int mt_sample_build(mt_sample_builder *b, const char *question, const char *answer, char *err);
