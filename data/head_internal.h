/* head_internal.h: what the readers of the head objectives share (data/head_data.c: reward,
 * classification; data/head_spans.c: token classification, question answering). */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "data/dataset_internal.h"
#include "data/head_data.h"

/* The kinds of a classification label (every record of a data set gives the same). */
enum { MT_HEAD_LABEL_NONE = 0, MT_HEAD_LABEL_CLASS, MT_HEAD_LABEL_NUMBER, MT_HEAD_LABEL_LIST };

typedef struct {
    const mt_tokenizer *tok;
    mt_chat_template *tmpl;
    const mt_sample_opts *o;
    const mt_head_data_opts *h;
    mt_token_data *out;
    int32_t src;               /* the file being read */
    int64_t caps[6];           /* ids, labels, offsets, source, head_i32, head_f32 */
    mt_token_buf tb[2];        /* the tokens of a record's samples */
    mt_chat_rendered rendered; /* a conversation's rendering */
    char *text;                /* a record's text (reward strings, words joined, QA) */
    size_t text_cap;
    int32_t *lab; /* token labels of a sample */
    int64_t lab_cap;
    int label_kind;    /* classification: the kind of the first record's label */
    char kind_at[400]; /* and where it was ("path:line") */
} mt_head_build;

/* Appends one sample: ids[0, n), its token labels (NULL: all -100), its head targets (i32:
 * out->i32_width values, f32: out->f32_width; NULL when the width is 0). */
void mt_head_add(mt_head_build *b, const int32_t *ids, const int32_t *labels, int64_t n,
                 const int32_t *i32, const float *f32);
/* text[0, len) into b->text (NUL-terminated, grown as needed); returns b->text. */
char *mt_head_text(mt_head_build *b, size_t len);
/* Tokenizes text[0, len) into tb (cleared first). 0, or -1 with "path:line: FIELD: reason". */
int mt_head_encode(mt_head_build *b, const char *text, size_t len, mt_token_buf *tb,
                   const char *field, const mt_rec_ctx *r);
/* A label given as an integer class id (in [0, num_labels) or -100) or a string of
 * opts->label_names: the id, or -1 with "path:line: FIELD ..." (field names the value). */
int mt_head_class_id(const mt_head_build *b, jinja_value v, const char *field, int32_t *id,
                     const mt_rec_ctx *r);
/* The first token whose bytes hold byte at (last: the last such token), or -1. */
int64_t mt_head_token_at(const mt_token_buf *tb, int64_t at, bool last);

int mt_head_read_token_classification(void *ctx, jinja_heap *h, jinja_value rec,
                                      const mt_rec_ctx *r);
int mt_head_read_question_answering(void *ctx, jinja_heap *h, jinja_value rec, const mt_rec_ctx *r);
