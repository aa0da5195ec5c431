/* gsm8k.h: GSM8K problems (question, gold answer) for evaluation, and the calculator
 * annotations of its answers.
 *
 * One record = one JSON object with string fields "question" and "answer" (other fields are
 * ignored; read by the gsm8k format of data/dataset.h: jsonl or a JSON array). Training turns
 * them into conversations (user: question, assistant: answer) like any data set
 * (data/sample.h). */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "data/dataset.h"

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
/* Removes the calculator annotations "<<expr=value>>" (no newline inside, contains '=') in
 * place: "48/2 = <<48/2=24>>24" becomes "48/2 = 24". Returns the new length. */
size_t mt_gsm8k_strip_annotations(char *s);
