/* chat_template.c: the MiniMax-Text-01 chat template's text, template normalisation, renders' spans
 * to a token mask. */
#include "data/chat_template.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/file_io.h"

/* The end both templates below share: the assistant turn's close, the function role, the
 * tools and the generation prompt. */
#define MINIMAX_TEMPLATE_TAIL                                                                      \
    "{{ '<end_of_sentence>\\n' }}{% elif message['role'] == 'function' %}"                         \
    "{{ '<beginning_of_sentence>system function_response=functions\\n' + '{\"name\": \"' + me"     \
    "ssage['name'] + '\", \"response\": ' + message['content'][0]['text'] + '}' + '<end_of_se"     \
    "ntence>\\n'}}{% endif %}{% endfor %}{% if tools %}{% for function in tools %}"                \
    "{{ '<beginning_of_sentence>system function_setting=functions\\n' + function | tojson + '"     \
    "<end_of_sentence>\\n'}}{% endfor %}{% endif %}{% if add_generation_prompt %}"                 \
    "{{ '<beginning_of_sentence>ai name=assistant\\n' }}{% endif %}"

/* Spec section 9, verbatim (one line; the \n inside the Jinja literals are escapes). */
static const char minimax_template[] =
    "{% for message in messages %}{% if message['role'] == 'system' %}"
    "{{ '<beginning_of_sentence>system ai_setting=assistant\\n' + message['content'][0]['text"
    "'] + '<end_of_sentence>\\n'}}{% elif message['role'] == 'user' %}"
    "{{ '<beginning_of_sentence>user name=user\\n' + message['content'][0]['text'] + '<end_of"
    "_sentence>\\n'}}{% elif message['role'] == 'assistant' %}"
    "{{ '<beginning_of_sentence>ai name=assistant\\n' }}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}"
    "{% generation %}{{ content['text'] }}{% endgeneration %}{% endfor %}" MINIMAX_TEMPLATE_TAIL;

/* The same template, made to take a message's content as a string as well as a list of parts
 * (the original indexes content[0]['text'], which fails on a string in transformers): what an
 * export writes, so that both message forms render there. For part lists both templates render
 * the same bytes. */
static const char minimax_template_ext[] =
    "{% for message in messages %}{% if message['role'] == 'system' %}"
    "{{ '<beginning_of_sentence>system ai_setting=assistant\\n' + (message['content'] if "
    "message['content'] is string else message['content'][0]['text']) + '<end_of_sentence>\\n'}}"
    "{% elif message['role'] == 'user' %}"
    "{{ '<beginning_of_sentence>user name=user\\n' + (message['content'] if message['content'] "
    "is string else message['content'][0]['text']) + '<end_of_sentence>\\n'}}"
    "{% elif message['role'] == 'assistant' %}"
    "{{ '<beginning_of_sentence>ai name=assistant\\n' }}"
    "{% if message['content'] is string %}"
    "{% generation %}{{ message['content'] }}{% endgeneration %}{% else %}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}"
    "{% generation %}{{ content['text'] }}{% endgeneration %}{% endfor %}{% endif "
    "%}" MINIMAX_TEMPLATE_TAIL;

const char *mt_chat_template_minimax(void) { return minimax_template; }
const char *mt_chat_template_minimax_ext(void) { return minimax_template_ext; }

static const mt_chat_template_fix fixes[] = {
    {"MiniMax-Text-01", minimax_template, minimax_template_ext}, /* layout: family name ok */
};

const mt_chat_template_fix *mt_chat_template_fixes(int *n) {
    *n = (int)(sizeof(fixes) / sizeof(fixes[0]));
    return fixes;
}

static bool is_ident(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* Copies the Jinja string literal starting at t[i] (a quote) to out in a canonical spelling
 * ('...' with \\, \' and \n, \t, \r escaped), so that "a\nb", 'a\nb' and a literal with a raw
 * newline compare equal. Returns the index after the closing quote. */
static size_t copy_literal(const char *t, size_t n, size_t i, mt_strbuf *out) {
    char q = t[i++];
    mt_strbuf_append(out, "'", 1);
    while (i < n && t[i] != q) {
        char c = t[i++];
        if (c == '\\' && i < n) {
            char e = t[i++];
            switch (e) {
            case 'n':
                c = '\n';
                break;
            case 't':
                c = '\t';
                break;
            case 'r':
                c = '\r';
                break;
            case '\\':
            case '\'':
            case '"':
                c = e;
                break;
            default:
                /* other escapes (\x, \u, ...) are kept marked, so they only equal themselves */
                mt_strbuf_append(out, "\x01", 1);
                mt_strbuf_append(out, &e, 1);
                continue;
            }
        }
        switch (c) {
        case '\n':
            mt_strbuf_append(out, "\\n", 2);
            break;
        case '\t':
            mt_strbuf_append(out, "\\t", 2);
            break;
        case '\r':
            mt_strbuf_append(out, "\\r", 2);
            break;
        case '\\':
            mt_strbuf_append(out, "\\\\", 2);
            break;
        case '\'':
            mt_strbuf_append(out, "\\'", 2);
            break;
        default:
            mt_strbuf_append(out, &c, 1);
        }
    }
    mt_strbuf_append(out, "'", 1);
    return i < n ? i + 1 : n;
}

char *mt_chat_template_normalize(const char *t) {
    size_t n = strlen(t);
    if (n > 0 && t[n - 1] == '\n') n--; /* Jinja drops one trailing newline */
    mt_strbuf out = {0};
    mt_strbuf_append(&out, "", 0);
    size_t i = 0;
    while (i < n) {
        char k = i + 1 < n && t[i] == '{' ? t[i + 1] : 0;
        if (k == '#') { /* comment: dropped */
            const char *end = strstr(t + i + 2, "#}");
            i = end && (size_t)(end - t) + 2 <= n ? (size_t)(end - t) + 2 : n;
            continue;
        }
        if (k != '{' && k != '%') {
            mt_strbuf_append(&out, t + i, 1);
            i++;
            continue;
        }
        char close = k == '{' ? '}' : '%';
        mt_strbuf_append(&out, t + i, 2);
        i += 2;
        bool space = false;
        while (i < n && !(t[i] == close && i + 1 < n && t[i + 1] == '}')) {
            char c = t[i];
            if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
                space = true;
                i++;
                continue;
            }
            if (c == '\'' || c == '"') {
                i = copy_literal(t, n, i, &out);
            } else {
                if (space && out.len > 0 && is_ident(out.p[out.len - 1]) && is_ident(c))
                    mt_strbuf_append(&out, " ", 1);
                mt_strbuf_append(&out, &c, 1);
                i++;
            }
            space = false;
        }
        if (i < n) {
            mt_strbuf_append(&out, t + i, 2);
            i += 2;
        }
    }
    return out.p;
}

void mt_chat_rendered_free(mt_chat_rendered *r) {
    free(r->text);
    free(r->spans);
    *r = (mt_chat_rendered){0};
}

void mt_chat_token_mask(const mt_chat_rendered *r, const int64_t *offsets, int64_t n_tokens,
                        uint8_t *mask) {
    /* spans and tokens are both in order: one pass, as transformers does */
    int s = 0;
    for (int64_t i = 0; i < n_tokens; i++) {
        int64_t start = offsets[2 * i], end = offsets[2 * i + 1];
        while (s < r->n_spans && start >= r->spans[2 * s + 1]) s++;
        mask[i] = s < r->n_spans && end > r->spans[2 * s] && start < r->spans[2 * s + 1];
    }
}

const char *mt_chat_template_fixed(const char *text) {
    char *norm = mt_chat_template_normalize(text);
    const char *out = NULL;
    for (size_t i = 0; i < sizeof(fixes) / sizeof(fixes[0]) && !out; i++) {
        char *released = mt_chat_template_normalize(fixes[i].released);
        if (!strcmp(norm, released)) out = fixes[i].replacement;
        free(released);
    }
    free(norm);
    return out;
}
