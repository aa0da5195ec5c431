/* head_spans.c: the readers of the head objectives whose targets are tokens of the text
 * (data/head_data.h): token classification (a label on each word's first token) and question
 * answering (the tokens holding the answer's first and last byte). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "data/head_internal.h"

/* The token labels buffer of b, n entries, all -100. */
static int32_t *labels_of(mt_head_build *b, int64_t n) {
    if (n > b->lab_cap) {
        free(b->lab);
        b->lab_cap = n + n / 2;
        b->lab = mt_malloc(sizeof(int32_t) * (size_t)b->lab_cap, "token labels");
    }
    for (int64_t i = 0; i < n; i++) b->lab[i] = MT_IGNORE_INDEX;
    return b->lab;
}

/* ---- token classification ---- */

int mt_head_read_token_classification(void *ctx, jinja_heap *h, jinja_value rec,
                                      const mt_rec_ctx *r) {
    mt_head_build *b = ctx;
    (void)h;
    if (rec.type != JINJA_DICT) return mt_rec_fail(r, "not a JSON object");
    jinja_value *words = jinja_dict_get_str(rec, "tokens");
    jinja_value *labels = jinja_dict_get_str(rec, "labels");
    jinja_value *tags = jinja_dict_get_str(rec, "ner_tags");
    const char *lname = labels ? "labels" : "ner_tags";
    if (!words || words->type != JINJA_LIST)
        return mt_rec_fail(r, "%s \"tokens\" (a list of words)", words ? "not a list:" : "missing");
    if (labels && tags) return mt_rec_fail(r, "has both \"labels\" and \"ner_tags\" (one of them)");
    if (!labels) labels = tags;
    if (!labels || labels->type != JINJA_LIST)
        return mt_rec_fail(r, "%s \"labels\" or \"ner_tags\" (a list, one label per word)",
                           labels ? "not a list:" : "missing");
    const int64_t nw = words->u.list->n;
    if (labels->u.list->n != nw)
        return mt_rec_fail(r, "%s: %lld labels for %lld words in \"tokens\"", lname,
                           (long long)labels->u.list->n, (long long)nw);
    if (nw == 0) return mt_rec_fail(r, "tokens: no words");
    size_t len = 0;
    for (int64_t i = 0; i < nw; i++) {
        jinja_value w = words->u.list->items[i];
        if (w.type != JINJA_STR || w.u.s.len == 0)
            return mt_rec_fail(r, "tokens[%lld]: %s", (long long)i,
                               w.type == JINJA_STR ? "an empty word" : "must be a string");
        len += w.u.s.len + (i > 0);
    }
    /* the words joined by single spaces; word i starts at byte start[i] */
    int64_t *start = mt_malloc(sizeof(int64_t) * (size_t)nw, "word starts");
    char *t = mt_head_text(b, len);
    size_t at = 0;
    for (int64_t i = 0; i < nw; i++) {
        jinja_value w = words->u.list->items[i];
        if (i > 0) t[at++] = ' ';
        start[i] = (int64_t)at;
        memcpy(t + at, w.u.s.p, w.u.s.len);
        at += w.u.s.len;
    }
    mt_token_buf *tb = &b->tb[0];
    int rc = mt_head_encode(b, t, len, tb, "tokens", r);
    int32_t *lab = rc == 0 ? labels_of(b, tb->n) : NULL;
    int64_t prev = -1; /* the first token of the word before */
    for (int64_t i = 0; rc == 0 && i < nw; i++) {
        char field[64];
        snprintf(field, sizeof(field), "%s[%lld]", lname, (long long)i);
        int32_t id;
        rc = mt_head_class_id(b, labels->u.list->items[i], field, &id, r);
        const int64_t tk = rc == 0 ? mt_head_token_at(tb, start[i], false) : -1;
        if (rc == 0 && (tk < 0 || tk == prev))
            rc = mt_rec_fail(r,
                             "tokens[%lld]: its first byte is in the token of the word before "
                             "(the tokenizer joins the words)",
                             (long long)i);
        if (rc == 0) lab[tk] = id;
        prev = tk;
    }
    free(start);
    if (rc != 0) return rc;
    int64_t n = tb->n;
    if (n > b->o->max_length) {
        if (b->o->policy == MT_TRUNC_DROP) {
            b->out->n_dropped++;
            return 0;
        }
        n = b->o->max_length;
        b->out->n_truncated++;
    }
    for (int64_t i = 0; i < n; i++) b->out->n_targets += lab[i] != MT_IGNORE_INDEX;
    mt_head_add(b, tb->ids, lab, n, NULL, NULL);
    return 0;
}

/* ---- question answering ---- */

/* The byte offset of character (code point) ch of s[0, len), or -1 past its end. */
static int64_t char_to_byte(const char *s, size_t len, int64_t ch) {
    size_t at = 0;
    for (int64_t c = 0; c < ch; c++) {
        if (at >= len) return -1;
        at++;
        while (at < len && ((unsigned char)s[at] & 0xC0) == 0x80) at++;
    }
    return (int64_t)at;
}

/* answers' first answer: its text and the byte where it starts in context. */
static int qa_answer(jinja_value rec, jinja_value ctx, jinja_value *text, int64_t *byte,
                     const mt_rec_ctx *r) {
    jinja_value *ans = jinja_dict_get_str(rec, "answers");
    if (!ans || ans->type != JINJA_DICT)
        return mt_rec_fail(r,
                           "%s \"answers\" (an object {\"text\": [...], \"answer_start\": "
                           "[...]})",
                           ans ? "not an object:" : "missing");
    jinja_value *texts = jinja_dict_get_str(*ans, "text");
    jinja_value *starts = jinja_dict_get_str(*ans, "answer_start");
    if (!texts || texts->type != JINJA_LIST)
        return mt_rec_fail(r, "answers.text: %s", texts ? "must be a list" : "missing");
    if (!starts || starts->type != JINJA_LIST)
        return mt_rec_fail(r, "answers.answer_start: %s", starts ? "must be a list" : "missing");
    if (texts->u.list->n == 0)
        return mt_rec_fail(r, "answers.text: empty (a question without an answer is not "
                              "supported)");
    if (starts->u.list->n != texts->u.list->n)
        return mt_rec_fail(r, "answers.answer_start: %lld entries for %lld in answers.text",
                           (long long)starts->u.list->n, (long long)texts->u.list->n);
    *text = texts->u.list->items[0];
    jinja_value s = starts->u.list->items[0];
    if (text->type != JINJA_STR || text->u.s.len == 0)
        return mt_rec_fail(r, "answers.text[0]: must be a non-empty string");
    if (s.type != JINJA_INT || s.u.i < 0)
        return mt_rec_fail(r, "answers.answer_start[0]: must be a character offset (an integer "
                              ">= 0)");
    *byte = char_to_byte(ctx.u.s.p, ctx.u.s.len, s.u.i);
    if (*byte < 0 || (size_t)*byte + text->u.s.len > ctx.u.s.len ||
        memcmp(ctx.u.s.p + *byte, text->u.s.p, text->u.s.len) != 0)
        return mt_rec_fail(r,
                           "answers.text[0] \"%.60s\" is not at answers.answer_start[0] = %lld "
                           "of \"context\" (a character offset)",
                           text->u.s.p, (long long)s.u.i);
    return 0;
}

int mt_head_read_question_answering(void *ctx, jinja_heap *h, jinja_value rec,
                                    const mt_rec_ctx *r) {
    mt_head_build *b = ctx;
    (void)h;
    if (rec.type != JINJA_DICT) return mt_rec_fail(r, "not a JSON object");
    jinja_value *q = jinja_dict_get_str(rec, "question"), *c = jinja_dict_get_str(rec, "context");
    if (!q || q->type != JINJA_STR)
        return mt_rec_fail(r, "question: %s", q ? "must be a string" : "missing");
    if (!c || c->type != JINJA_STR)
        return mt_rec_fail(r, "context: %s", c ? "must be a string" : "missing");
    jinja_value answer = {0};
    int64_t at = 0;
    if (qa_answer(rec, *c, &answer, &at, r) != 0) return -1;
    /* question + "\n" + context; the answer's bytes [first, last] in it */
    const size_t nq = q->u.s.len, len = nq + 1 + c->u.s.len;
    char *t = mt_head_text(b, len);
    memcpy(t, q->u.s.p, nq);
    t[nq] = '\n';
    memcpy(t + nq + 1, c->u.s.p, c->u.s.len);
    mt_token_buf *tb = &b->tb[0];
    if (mt_head_encode(b, t, len, tb, "question + context", r) != 0) return -1;
    const int64_t first = (int64_t)nq + 1 + at, last = first + (int64_t)answer.u.s.len - 1;
    const int32_t span[2] = {(int32_t)mt_head_token_at(tb, first, false),
                             (int32_t)mt_head_token_at(tb, last, true)};
    MT_CHECK(span[0] >= 0 && span[1] >= span[0], "the answer's bytes have no tokens");
    int64_t n = tb->n;
    if (n > b->o->max_length) {
        if (b->o->policy == MT_TRUNC_DROP) {
            b->out->n_dropped++;
            return 0;
        }
        if (span[1] >= b->o->max_length)
            return mt_rec_fail(r,
                               "the answer (tokens %d..%d) is cut by max_length %lld (of %lld "
                               "tokens)",
                               span[0], span[1], (long long)b->o->max_length, (long long)n);
        n = b->o->max_length;
        b->out->n_truncated++;
    }
    mt_head_add(b, tb->ids, NULL, n, span, NULL);
    b->out->n_targets++;
    return 0;
}
