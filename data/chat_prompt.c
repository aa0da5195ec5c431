/* chat_prompt.c: a conversation rendered and encoded as a prompt (data/chat.h): the generation
 * prompt, or the final message continued (transformers 5.24's continue_final_message), and the
 * control tokens of the input sanitized (data/chat_sanitize.c). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "data/chat_internal.h"

#define CONTINUE_TAG "CONTINUE_FINAL_MESSAGE_TAG "

static bool find(const char *hay, size_t hn, const char *s, size_t n) {
    for (size_t i = 0; n <= hn && i + n <= hn; i++)
        if (!memcmp(hay + i, s, n)) return true;
    return false;
}

/* The final message's content with the tag appended (a copy of the message in place of it);
 * *final: the content before the tag. */
static int tag_final(jinja_heap *h, mt_chat_conv *c, jinja_value *final, char *err, size_t errlen) {
    const int64_t last = c->messages.u.list->n - 1;
    jinja_value m = c->messages.u.list->items[last], copy = jinja_dict_new(h);
    for (int64_t k = 0; k < m.u.dict->n; k++)
        jinja_dict_set(h, copy, m.u.dict->keys[k], m.u.dict->vals[k]);
    jinja_value *content = jinja_dict_get_str(copy, "content");
    jinja_value *text = content;
    if (content && content->type == JINJA_LIST) { /* the last part with a "text" */
        text = NULL;
        jinja_value parts = jinja_list_new(h);
        for (int64_t j = 0; j < content->u.list->n; j++)
            jinja_list_push(h, parts, content->u.list->items[j]);
        for (int64_t j = parts.u.list->n - 1; j >= 0 && !text; j--) {
            jinja_value p = parts.u.list->items[j];
            if (p.type != JINJA_DICT || !jinja_dict_get_str(p, "text")) continue;
            jinja_value pc = jinja_dict_new(h);
            for (int64_t k = 0; k < p.u.dict->n; k++)
                jinja_dict_set(h, pc, p.u.dict->keys[k], p.u.dict->vals[k]);
            parts.u.list->items[j] = pc;
            text = jinja_dict_get_str(pc, "text");
        }
        *content = parts;
        if (!text) {
            snprintf(err, errlen,
                     "continue_final_message is set but the final message has no text to continue");
            return -1;
        }
    }
    if (!text || text->type != JINJA_STR) {
        snprintf(err, errlen,
                 "continue_final_message is set but the final message has no \"content\" to "
                 "continue");
        return -1;
    }
    *final = *text;
    mt_strbuf b = {0};
    mt_strbuf_append(&b, text->u.s.p, text->u.s.len);
    mt_strbuf_append(&b, CONTINUE_TAG, strlen(CONTINUE_TAG));
    *text = jinja_str(h, b.p, b.len);
    mt_strbuf_free(&b);
    c->messages.u.list->items[last] = copy;
    return 0;
}

/* transformers' continue_final_message: the render without the generation prompt, ended right
 * after the final message's content (found by a tag appended to it). */
static int render_continue(mt_chat_template *t, jinja_heap *h, mt_chat_conv *c,
                           mt_chat_rendered *out, char *err, size_t errlen) {
    mt_chat_conv tagged = *c;
    tagged.messages = jinja_list_new(h);
    for (int64_t i = 0; i < c->messages.u.list->n; i++)
        jinja_list_push(h, tagged.messages, c->messages.u.list->items[i]);
    jinja_value final;
    if (tag_final(h, &tagged, &final, err, errlen)) return -1;
    const jinja_template *jt = mt_chat_pick(t, &tagged, err, errlen);
    if (!jt) return -1;
    for (int i = 0; i < t->n; i++)
        if (t->tmpl[i] == jt && !strstr(t->texts[i], "content")) {
            snprintf(err, errlen,
                     "continue_final_message is set to \"content\" but this is not an accepted "
                     "field in the chat template");
            return -1;
        }
    if (mt_chat_render_conv(t, h, &tagged, -1, false, out, err, errlen)) return -1;
    size_t a, b;
    jinja_str_strip(final.u.s.p, final.u.s.len, true, true, &a, &b);
    const char *tag = CONTINUE_TAG;
    const size_t tag_core = strlen(tag) - 1; /* tag.strip() */
    if (!find(out->text, out->len, final.u.s.p + a, b - a) ||
        !find(out->text, out->len, tag, tag_core)) {
        snprintf(err, errlen,
                 "continue_final_message is set but the final message does not appear in the "
                 "chat after applying the chat template");
        return -1;
    }
    size_t loc = out->len - tag_core;
    while (memcmp(out->text + loc, tag, tag_core)) loc--; /* rindex */
    const bool spaced = out->len - loc >= strlen(tag) && out->text[loc + tag_core] == ' ';
    if (!spaced) jinja_str_strip(out->text, loc, false, true, &a, &loc); /* rstrip */
    out->text[loc] = 0;
    out->len = loc;
    return 0;
}

int mt_chat_prompt(mt_chat_template *t, const mt_tokenizer *tok, jinja_heap *h, mt_chat_conv *c,
                   const mt_chat_prompt_opts *o, mt_chat_rendered *text, mt_token_buf *ids,
                   char *err, size_t errlen) {
    if (o->add_generation_prompt && o->continue_final_message) {
        snprintf(err, errlen,
                 "continue_final_message and add_generation_prompt are not compatible: set "
                 "add_generation_prompt false to continue the final message");
        return -1;
    }
    if (o->sanitize && mt_chat_conv_mark(t, tok, h, c, err, errlen)) return -1;
    const int rc =
        o->continue_final_message
            ? render_continue(t, h, c, text, err, errlen)
            : mt_chat_render_conv(t, h, c, -1, o->add_generation_prompt, text, err, errlen);
    if (rc) return -1;
    if (ids) {
        const int64_t k =
            o->sanitize ? mt_chat_encode_marked(tok, text->text, text->len, ids, err, errlen)
                        : mt_tokenizer_encode_err(tok, text->text, text->len, ids, err, errlen);
        if (k < 0) return -1;
    }
    if (o->sanitize) text->len = mt_chat_unmark(text->text, text->len);
    return 0;
}
