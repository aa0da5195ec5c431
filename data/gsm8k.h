/* gsm8k.h: GSM8K-style jsonl reader and SFT sample building (chat template + labels).
 *
 * One line = one JSON object with string fields "question" and "answer" (other fields are
 * ignored; blank lines are skipped). One sample = [optional system turn] user: question,
 * assistant: answer, rendered with the MiniMax-Text-01 template (data/chat_template.h) and
 * tokenized as a whole, like apply_chat_template(tokenize=True).
 *
 * Labels (HF convention, not shifted): labels[i] = ids[i] for the tokens of the assistant
 * text and its closing <end_of_sentence>, -100 elsewhere (system, user, the assistant header and
 * the "\n" after <end_of_sentence>: that newline belongs to the template's turn separator,
 * which the model never has to produce because generation stops at <end_of_sentence>).
 * The sampler (data/sampler.h) shifts labels so position t predicts token t + 1. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "data/chat_template.h"
#include "data/data_io.h"
#include "data/tokenizer.h"

#define MT_IGNORE_INDEX (-100)

typedef struct {
    int64_t n;
    char **question, **answer;   /* (n) NUL-terminated UTF-8 */
    int64_t *line;               /* (n) 1-based line number of each record in the file */
    int64_t n_lines;             /* non-blank lines seen */
    int64_t n_skipped;           /* bad lines skipped (skip_bad) */
    char first_skip[MT_ERR_LEN]; /* why the first skipped line was bad */
} mt_gsm8k_set;

/* Reads a jsonl file. A bad line (malformed JSON, not an object, a missing or non-string
 * field, invalid UTF-8, an empty question or answer) is an error "path:line: reason" unless
 * skip_bad, where it is counted in n_skipped. Returns 0, or -1 with err set (out is then
 * empty). */
int mt_gsm8k_read(const char *path, bool skip_bad, mt_gsm8k_set *out, char *err);
void mt_gsm8k_set_free(mt_gsm8k_set *s);

/* Parses one line (len bytes, no newline). Returns 0 with malloc'ed *question and *answer,
 * or -1 with "path:line_no: reason" in err. */
int mt_gsm8k_parse_line(const char *path, int64_t line_no, const char *line, size_t len,
                        char **question, char **answer, char *err);

/* Removes the calculator annotations "<<expr=value>>" (no newline inside, contains '=') in
 * place: "48/2 = <<48/2=24>>24" becomes "48/2 = 24". Returns the new length. */
size_t mt_gsm8k_strip_annotations(char *s);

typedef enum { MT_TRUNC_DROP, MT_TRUNC_TRUNCATE } mt_trunc_policy;

typedef struct {
    const char *system;     /* text of a system turn, or NULL for none */
    bool strip_annotations; /* remove <<expr=value>> from the answer */
    int64_t max_length;     /* tokens per sample (default 512) */
    mt_trunc_policy policy; /* longer samples: dropped, or cut to max_length (default drop) */
} mt_sample_opts;
void mt_sample_opts_default(mt_sample_opts *o);

enum { MT_SAMPLE_OK = 0, MT_SAMPLE_TRUNCATED = 1, MT_SAMPLE_DROPPED = 2, MT_SAMPLE_ERROR = -1 };

/* Reusable buffers for building samples one after another. */
typedef struct {
    const mt_tokenizer *tok;
    mt_sample_opts opts;
    int32_t eos_id; /* <end_of_sentence> */
    mt_chat_rendered rendered;
    mt_token_buf tokens;
    mt_strbuf answer;
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

/* Dies (MT_DIE) when the tokenizer has no <end_of_sentence>. */
void mt_sample_builder_init(mt_sample_builder *b, const mt_tokenizer *tok, const mt_sample_opts *o);
void mt_sample_builder_free(mt_sample_builder *b);

/* Renders, tokenizes and labels one problem. Returns MT_SAMPLE_OK, MT_SAMPLE_TRUNCATED (cut to
 * max_length), MT_SAMPLE_DROPPED (longer than max_length under the drop policy) or
 * MT_SAMPLE_ERROR with err set (the text is not valid UTF-8, or the tokenizer's regex fails on
 * it: mt_tokenizer_encode_err). */
int mt_sample_build(mt_sample_builder *b, const char *question, const char *answer, char *err);
