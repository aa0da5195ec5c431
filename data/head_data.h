/* head_data.h: the datasets of the objectives that train a head instead of the causal LM
 * (train.objective, docs/data.md "Datasets of the head objectives"), tokenized into an
 * mt_token_data (data/token_cache.h) whose samples carry their targets:
 *
 *   reward                {"chosen", "rejected", "prompt"?, "margin"?, "tools"?,
 *                         "chat_template_kwargs"?}: TRL's preference format, implicit prompt
 *                         (chosen and rejected whole conversations sharing their first messages)
 *                         or explicit ("prompt" put before each); conversational (lists of
 *                         messages, each rendered whole by the chat template, as TRL's
 *                         apply_chat_template) or standard (strings, the tokenizer's eos text
 *                         appended unless already there, as TRL). Record p gives samples 2p
 *                         (chosen) and 2p + 1 (rejected); a pair with either side over
 *                         max_length is dropped (TRL filters it; truncation cuts both).
 *                         head_f32 (width 1): the pair's "margin" on both samples (0 without).
 *   classification        {"text" | "messages", "label"}: one sample (text tokenized as is;
 *                         messages rendered whole); label an integer class id (-100: ignored), a
 *                         string named in opts->label_names, a number (regression) or a list of
 *                         num_labels numbers (multi-label or multi-target regression).
 *                         Class ids: head_i32 (width 1). Numbers: head_f32 (width num_labels).
 *                         Every record of a data set must give the same kind.
 *   token_classification  {"tokens": [words], "labels" | "ner_tags": [one per word]}: the words
 *                         joined by single spaces and tokenized; each word's label (an integer,
 *                         or a string of label_names) on the first token of the word, -100 on
 *                         its other tokens (transformers' run_ner with label_all_tokens off),
 *                         in the labels column (not shifted).
 *   question_answering    SQuAD's {"question", "context", "answers": {"text": [...],
 *                         "answer_start": [...]}}: the text question + "\n" + context; the first
 *                         answer's byte span in the context gives start and end, the tokens
 *                         that hold its first and last byte (head_i32, width 2). A record whose
 *                         answer is not at answer_start, or whose answer is cut by max_length, is
 *                         an error ("path:line: ..."), unless skip_bad.
 * The labels column is all -100 except for token classification. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "data/sample.h"
#include "data/token_cache.h"

typedef enum {
    MT_OBJECTIVE_SFT = 0, /* the causal LM's next-token loss (data/sample.h) */
    MT_OBJECTIVE_REWARD,
    MT_OBJECTIVE_CLASSIFICATION,
    MT_OBJECTIVE_TOKEN_CLASSIFICATION,
    MT_OBJECTIVE_QUESTION_ANSWERING,
    MT_OBJECTIVE_COUNT
} mt_objective;

/* "sft", "reward", "classification", "token_classification", "question_answering": the value,
 * or -1. */
int mt_objective_parse(const char *name);
const char *mt_objective_name(mt_objective o);
/* the names above, comma-separated (for error messages) */
const char *mt_objective_list(void);

typedef struct mt_head_data_opts_s {
    mt_objective objective;
    int num_labels; /* classification / token classification: >= 1; list labels need it */
    /* model.labels: label i's name (string labels map through it), or NULL / 0 */
    const char *const *label_names;
    int n_label_names;
} mt_head_data_opts;

/* Tokenizes every record of the n files (format by opts->objective, not data.format) into out:
 * ids, labels, offsets, source, and head_i32 / head_f32 as above. Errors "path:line: reason"
 * (skip_bad: counted in n_skipped instead). Returns 0, or -1 with err set. */
int mt_head_data_build_files(const char *const *paths, int n, const mt_tokenizer *tok,
                             mt_chat_template *tmpl, const mt_sample_opts *o,
                             const mt_head_data_opts *h, bool skip_bad, mt_token_data *out,
                             char *err);
