/* messages_eval.h: evaluation on the user's own chat data (minimax-eval --task messages, the
 * trainer's eval.generate_task = "messages"; docs/evaluation.md, "Your own data").
 *
 * A sample is a conversation in any of the pipeline's formats (data/dataset.h: messages,
 * sharegpt, alpaca, gsm8k; the format detected from the first record) whose last message is an
 * assistant message: its content is the reference; the prompt is the conversation before it,
 * rendered with the generation prompt by the model's chat template (with n shots: the shots'
 * conversations, reference included, as earlier turns after the leading system messages). The
 * completion's answer (the content after the reasoning with a reply format, models/reply.h) is
 * compared with the reference by four metrics:
 *   exact       the two strings equal byte for byte (lm-eval's exact_match without options)
 *   normalized  equal after mt_match_normalize: ASCII letters lowercased, whitespace runs
 *               collapsed to one space, then whitespace and ASCII punctuation (Python's
 *               string.punctuation) stripped at both ends, repeatedly
 *   contains    the normalised reference (not empty) occurs in the normalised answer
 *   regex       --answer-regex (POSIX extended): its first group (or the whole match without a
 *               group) at its first match in the answer equals the same taken from the reference;
 *               a reference it does not match is refused up front
 * One of them (mt_match.metric) is the sample's "correct" and the reported accuracy. */
#pragma once
#include <regex.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "data/chat.h"
#include "data/dataset.h"

typedef struct {
    int64_t n;
    mt_conv_set conv; /* the records as conversations (compact JSON) */
    int *upto;        /* (n) the reference's index in its conversation's messages */
    char **reference; /* (n) the reference: the last assistant message's text content */
    char **question;  /* (n) the text of the last user message before it ("" when none) */
    int64_t *line;    /* (n) the record's line (conv.line) */
} mt_msgs_set;

/* Reads path (any format of data/dataset.h). A record whose last message is not an assistant
 * message with text content is an error "path:line: reason". 0, or -1 with one line in err. */
int mt_msgs_read(const char *path, mt_msgs_set *out, char *err, size_t errlen);
void mt_msgs_set_free(mt_msgs_set *s);
/* Keeps the first n samples. */
void mt_msgs_set_truncate(mt_msgs_set *s, int64_t n);

/* Sample i's prompt with the first n_shots conversations of shots before it, rendered (0, or -1
 * with one line in err) or tokenized (ids malloc'ed, *n tokens; NULL with one line in err). */
int mt_msgs_render(mt_chat_template *t, const mt_msgs_set *set, int64_t i, const mt_msgs_set *shots,
                   int n_shots, mt_chat_rendered *out, char *err, size_t errlen);
int32_t *mt_msgs_prompt(mt_chat_template *t, const mt_tokenizer *tok, const mt_msgs_set *set,
                        int64_t i, const mt_msgs_set *shots, int n_shots, int *n, char *err,
                        size_t errlen);

typedef enum {
    MT_MATCH_EXACT,
    MT_MATCH_NORMALIZED,
    MT_MATCH_CONTAINS,
    MT_MATCH_REGEX,
    MT_MATCH_COUNT
} mt_match_metric;

typedef struct {
    mt_match_metric metric; /* the one that is "correct" */
    bool has_regex;
    regex_t re;
} mt_match;

/* metric: "exact", "normalized", "contains", "regex" or NULL (regex when a regex is given, else
 * exact); regex: POSIX extended, or NULL. 0, or -1 with one line in err naming flag (the metric's
 * or the regex's: names[0], names[1], e.g. "--metric", "--answer-regex"). */
int mt_match_init(mt_match *m, const char *metric, const char *regex, const char *const names[2],
                  char *err, size_t errlen);
void mt_match_free(mt_match *m);
const char *mt_match_metric_name(mt_match_metric k);
/* s normalised (above), malloc'ed. */
char *mt_match_normalize(const char *s);
/* The regex's first group (or whole match) at its first match in s, malloc'ed; NULL: none. */
char *mt_match_extract(const mt_match *m, const char *s);
/* hit[k] for each metric (hit[MT_MATCH_REGEX] false without a regex). */
void mt_match_score(const mt_match *m, const char *answer, const char *reference,
                    bool hit[MT_MATCH_COUNT]);
/* Whether the reference can be scored (a regex that finds it): false with one line in err. */
bool mt_match_reference_usable(const mt_match *m, const char *reference, char *err, size_t errlen);
