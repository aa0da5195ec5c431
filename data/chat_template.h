/* chat_template.h: what the chat-template code shares (data/chat.h renders), and the
 * MiniMax-Text-01 template (spec section 9).
 *
 * Text-01's released template (tokenizer_config.json) takes a message's content as a list of
 * text parts only: transformers fails on a string there (content[0]['text']). data/chat.c
 * replaces it by its extension below, which takes both and renders the same bytes for part
 * lists; exports write the extension. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/file_io.h" /* MT_ERR_LEN */

typedef enum { MT_CHAT_SYSTEM, MT_CHAT_USER, MT_CHAT_ASSISTANT } mt_chat_role;

typedef struct {
    mt_chat_role role;
    const char *text; /* content[0].text, UTF-8 */
    size_t len;
    /* an assistant turn's reasoning (its reasoning_content; NULL: none), which the template
     * renders or drops as it wants (M2 drops it before the last user turn) */
    const char *reasoning;
    size_t reasoning_len;
} mt_chat_msg;

typedef struct {
    char *text; /* NUL-terminated */
    size_t len, cap;
    int64_t *spans; /* 2 per trained part: byte [start, end) in `text` (data/chat.h) */
    int n_spans, span_cap;
} mt_chat_rendered;

/* The released template (the exact text of spec section 9). */
const char *mt_chat_template_minimax(void);

/* Its extension to a message content given as a string; part lists render the same bytes. */
const char *mt_chat_template_minimax_ext(void);

/* Released templates that transformers renders for some message forms only, each with the
 * template data/chat.c puts in its place (the same bytes wherever the released one renders). */
typedef struct {
    const char *model;       /* whose release */
    const char *released;    /* the template as released (compared normalised) */
    const char *replacement; /* renders every message form */
} mt_chat_template_fix;
/* The list (*n entries). */
const mt_chat_template_fix *mt_chat_template_fixes(int *n);
/* The replacement of template text when it is a released template of the list, else NULL. */
const char *mt_chat_template_fixed(const char *text);

/* Canonical form used to recognise the template: text outside Jinja tags is kept byte for byte;
 * inside {{ }} / {% %} whitespace outside string literals is dropped, except one space between
 * two identifier characters; {# #} comments are dropped; one trailing newline of the template is
 * dropped (Jinja does the same). Returns a malloc'ed string. */
char *mt_chat_template_normalize(const char *tmpl);

void mt_chat_rendered_free(mt_chat_rendered *r);

/* Trained mask over tokens given their byte offsets (2 per token, [start, end) into the
 * rendered text): mask[i] = 1 when token i overlaps a span, the rule transformers uses for its
 * assistant_masks. */
void mt_chat_token_mask(const mt_chat_rendered *r, const int64_t *offsets, int64_t n_tokens,
                        uint8_t *mask);
