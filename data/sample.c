/* sample.c: conversations to tokenized, labelled samples (data/sample.h). */
#include "data/sample.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "data/gsm8k.h"

void mt_sample_opts_default(mt_sample_opts *o) {
    *o = (mt_sample_opts){.system = NULL,
                          .strip_annotations = false,
                          .max_length = 512,
                          .policy = MT_TRUNC_DROP,
                          .history = MT_HISTORY_AS_TEMPLATE};
}

int mt_reasoning_history_parse(const char *name) {
    if (!strcmp(name, "as_template")) return MT_HISTORY_AS_TEMPLATE;
    if (!strcmp(name, "split")) return MT_HISTORY_SPLIT;
    return -1;
}

void mt_sample_builder_init(mt_sample_builder *b, const mt_tokenizer *tok, mt_chat_template *tmpl,
                            const mt_sample_opts *o) {
    *b = (mt_sample_builder){0};
    b->tok = tok;
    b->tmpl = tmpl;
    b->opts = *o;
    b->heap = jinja_heap_new(0);
    MT_CHECK(o->max_length > 1, "sample max_length must be > 1, got %lld",
             (long long)o->max_length);
}

void mt_sample_builder_free(mt_sample_builder *b) {
    mt_chat_rendered_free(&b->rendered);
    mt_token_buf_free(&b->tokens);
    jinja_heap_free(b->heap);
    free(b->mask);
    free(b->labels);
    free(b->piece_end);
    free(b->train);
    *b = (mt_sample_builder){0};
}

static bool role_is(const mt_chat_conv *c, int i, const char *role) {
    return !strcmp(mt_chat_conv_role(c, i), role);
}

/* GSM8K's calculator annotations out of an assistant message's text (a string, or text parts). */
static void strip_message(jinja_heap *h, jinja_value m) {
    jinja_value *content = jinja_dict_get_str(m, "content");
    if (!content) return;
    jinja_value *texts[256];
    int n = 0;
    if (content->type == JINJA_STR) texts[n++] = content;
    for (int64_t k = 0; content->type == JINJA_LIST && k < content->u.list->n && n < 256; k++) {
        jinja_value p = content->u.list->items[k];
        jinja_value *t = p.type == JINJA_DICT ? jinja_dict_get_str(p, "text") : NULL;
        if (t && t->type == JINJA_STR) texts[n++] = t;
    }
    for (int i = 0; i < n; i++) {
        jinja_value s = jinja_str(h, texts[i]->u.s.p, texts[i]->u.s.len); /* a copy to edit */
        s.u.s.len = mt_gsm8k_strip_annotations((char *)s.u.s.p);
        *texts[i] = s;
    }
}

/* The recipe's system text as the first message, unless the conversation has a system message. */
static void insert_system(mt_sample_builder *b) {
    mt_chat_conv *c = &b->conv;
    const int n = mt_chat_conv_len(c);
    for (int i = 0; i < n; i++)
        if (role_is(c, i, "system")) return;
    jinja_value m = jinja_dict_new(b->heap), l = jinja_list_new(b->heap);
    jinja_dict_set_str(b->heap, m, "role", jinja_cstr(b->heap, "system"));
    jinja_dict_set_str(b->heap, m, "content", jinja_cstr(b->heap, b->opts.system));
    jinja_list_push(b->heap, l, m);
    for (int i = 0; i < n; i++) jinja_list_push(b->heap, l, c->messages.u.list->items[i]);
    int8_t *loss = jinja_heap_alloc(b->heap, (size_t)n + 1);
    MT_CHECK(loss, "the conversation's heap is full");
    loss[0] = -1;
    if (n) memcpy(loss + 1, c->loss, (size_t)n);
    c->messages = l;
    c->loss = loss;
}

/* Adds the sample of messages [0, end) that trains the assistant messages in [from, end) (those
 * not marked "loss": false; with last_assistant_only the last of them and those marked true). */
static void plan_piece(mt_sample_builder *b, int from, int end) {
    const mt_chat_conv *c = &b->conv;
    bool *tr = b->train + (size_t)b->n_pieces * (size_t)b->cap_msgs;
    memset(tr, 0, sizeof(bool) * (size_t)b->cap_msgs);
    int last = -1;
    for (int i = from; i < end; i++) {
        if (!role_is(c, i, "assistant") || c->loss[i] == 0) continue;
        tr[i] = true;
        last = i;
    }
    if (last < 0) return;
    if (b->opts.last_assistant_only)
        for (int i = from; i < end; i++) tr[i] = tr[i] && (i == last || c->loss[i] == 1);
    b->piece_end[b->n_pieces++] = end;
}

/* The samples of the open conversation (sample.h): as_template one of all its messages; split
 * one per user message, through the message before the next user message. */
static int plan(mt_sample_builder *b) {
    mt_chat_conv *c = &b->conv;
    if (b->opts.system) insert_system(b);
    const int n = mt_chat_conv_len(c);
    if (b->opts.strip_annotations)
        for (int i = 0; i < n; i++)
            if (role_is(c, i, "assistant")) strip_message(b->heap, c->messages.u.list->items[i]);
    if (n > b->cap_msgs || n + 1 > b->cap_pieces) {
        b->cap_msgs = b->cap_pieces = 2 * n + 2;
        free(b->piece_end);
        free(b->train);
        b->piece_end = mt_malloc(sizeof(int) * (size_t)b->cap_pieces, "sample pieces");
        b->train =
            mt_malloc(sizeof(bool) * (size_t)b->cap_pieces * (size_t)b->cap_msgs, "sample flags");
    }
    b->n_pieces = 0;
    if (b->opts.history == MT_HISTORY_AS_TEMPLATE) {
        plan_piece(b, 0, n);
        return b->n_pieces;
    }
    int user = -1; /* the user message the current sample starts at */
    for (int i = 0; i <= n; i++) {
        if (i < n && !role_is(c, i, "user")) continue;
        if (user >= 0) plan_piece(b, user, i);
        user = i;
    }
    return b->n_pieces;
}

int mt_sample_conv_open(mt_sample_builder *b, const char *json, size_t len, char *err) {
    jinja_heap_reset(b->heap);
    if (mt_chat_conv_parse(b->heap, json, len, false, &b->conv, err, MT_ERR_LEN) != 0) return -1;
    if (b->opts.sanitize && mt_chat_conv_mark(b->tmpl, b->tok, b->heap, &b->conv, err, MT_ERR_LEN))
        return -1;
    return plan(b);
}

int mt_sample_conv_open_msgs(mt_sample_builder *b, const mt_chat_msg *msgs, int n, char *err) {
    jinja_heap_reset(b->heap);
    (void)err;
    mt_chat_conv_from_msgs(b->heap, msgs, n, &b->conv);
    return plan(b);
}

/* A message whose content is several text parts: each part's text must be in the rendering
 * (Text-01's template, for one, renders only the first part of a user message: the rest would
 * be lost silently). */
static int check_parts(const mt_sample_builder *b, int end, char *err) {
    for (int i = 0; i < end; i++) {
        jinja_value *c = jinja_dict_get_str(b->conv.messages.u.list->items[i], "content");
        if (!c || c->type != JINJA_LIST || c->u.list->n < 2) continue;
        for (int64_t k = 0; k < c->u.list->n; k++) {
            jinja_value p = c->u.list->items[k];
            jinja_value *t = p.type == JINJA_DICT ? jinja_dict_get_str(p, "text") : NULL;
            if (!t || t->type != JINJA_STR || t->u.s.len == 0) continue;
            if (!memmem(b->rendered.text, b->rendered.len, t->u.s.p, t->u.s.len)) {
                snprintf(err, MT_ERR_LEN,
                         "messages[%d].content[%lld]: its text is not in what the chat template "
                         "renders (it renders part of the part list only): join the parts into "
                         "one string",
                         i, (long long)k);
                return -1;
            }
        }
    }
    return 0;
}

int mt_sample_build_piece(mt_sample_builder *b, int k, char *err) {
    MT_CHECK(k >= 0 && k < b->n_pieces, "sample %d of %d", k, b->n_pieces);
    const bool *tr = b->train + (size_t)k * (size_t)b->cap_msgs;
    char why[MT_ERR_LEN - 64];
    if (mt_chat_render_trained(b->tmpl, b->heap, &b->conv, b->piece_end[k], tr, &b->rendered, why,
                               sizeof(why)) != 0) {
        snprintf(err, MT_ERR_LEN, "the chat template: %s", why);
        return MT_SAMPLE_ERROR;
    }
    if (check_parts(b, b->piece_end[k], err) != 0) return MT_SAMPLE_ERROR;
    mt_token_buf_clear(&b->tokens);
    /* sanitized: the text holds the marks around the data's control tokens, the spans and the
     * token offsets are both in it */
    if ((b->opts.sanitize ? mt_chat_encode_marked(b->tok, b->rendered.text, b->rendered.len,
                                                  &b->tokens, why, sizeof(why))
                          : mt_tokenizer_encode_err(b->tok, b->rendered.text, b->rendered.len,
                                                    &b->tokens, why, sizeof(why))) < 0) {
        snprintf(err, MT_ERR_LEN, "the rendered sample cannot be tokenized: %s", why);
        return MT_SAMPLE_ERROR;
    }
    int64_t n = b->tokens.n;
    if (n > b->cap) {
        free(b->mask);
        free(b->labels);
        b->cap = n + n / 2;
        b->mask = mt_malloc((size_t)b->cap, "sample mask");
        b->labels = mt_malloc(sizeof(int32_t) * (size_t)b->cap, "sample labels");
    }
    const int32_t *ids = b->tokens.ids;
    mt_chat_token_mask(&b->rendered, b->tokens.offsets, n, b->mask);
    b->n_full = n;
    int rc = MT_SAMPLE_OK;
    if (n > b->opts.max_length) {
        if (b->opts.policy == MT_TRUNC_DROP) return MT_SAMPLE_DROPPED;
        n = b->opts.max_length;
        rc = MT_SAMPLE_TRUNCATED;
    }
    b->n_targets = 0;
    for (int64_t i = 0; i < n; i++) {
        b->labels[i] = b->mask[i] ? ids[i] : MT_IGNORE_INDEX;
        b->n_targets += b->mask[i];
    }
    b->ids = ids;
    b->lab = b->labels;
    b->n = n;
    return rc;
}

int mt_sample_build(mt_sample_builder *b, const char *question, const char *answer, char *err) {
    const mt_chat_msg msgs[2] = {
        {.role = MT_CHAT_USER, .text = question, .len = strlen(question)},
        {.role = MT_CHAT_ASSISTANT, .text = answer, .len = strlen(answer)}};
    int k = mt_sample_conv_open_msgs(b, msgs, 2, err);
    if (k < 0) return MT_SAMPLE_ERROR;
    MT_CHECK(k == 1, "a question and its answer make one sample, not %d", k);
    return mt_sample_build_piece(b, 0, err);
}
