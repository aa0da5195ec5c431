/* chat_sanitize.c: control tokens in untrusted input encoded as text, as transformers 5.24's
 * apply_chat_template(..., sanitize_control_tokens=True) does (data/chat.h).
 *
 * transformers' rule: the control tokens are the tokenizer's added tokens that are special, plus
 * the others that tokenizer_config.json's chat_control_tokens lists, or (without that list) that
 * the template's text contains and are not whitespace. Every string value (not dict keys) of
 * the messages, tools, documents and template variables first loses the two private-use
 * markers U+F0000 / U+F0001, then has each control token wrapped in them (longest token first
 * at each position, left to right). The render is cut at the markers: a marked added token
 * (U+F0000 token U+F0001) is encoded as plain text (special added tokens not matched), a lone
 * marker is dropped, and each piece after the first is encoded apart, after a "\n" that is then
 * removed again (encode("\n" + piece) when it starts with encode("\n"), else encode(piece)). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "data/chat_internal.h"

#define MARK_START "\xf3\xb0\x80\x80" /* U+F0000 */
#define MARK_END   "\xf3\xb0\x80\x81" /* U+F0001 */
#define MARK_LEN   4

typedef struct {
    const char *p;
    size_t len;
} span;

typedef struct {
    span *tok; /* longest first */
    int n;
} token_set;

static int by_len_desc(const void *a, const void *b) {
    const span *x = a, *y = b;
    return x->len < y->len ? 1 : x->len > y->len ? -1 : 0;
}

static bool all_space(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!strchr(" \t\n\r\f\v", s[i])) return false;
    return n > 0;
}

static bool contains(const char *hay, const char *needle, size_t n) {
    const size_t hn = strlen(hay);
    for (size_t i = 0; n <= hn && i + n <= hn; i++)
        if (!memcmp(hay + i, needle, n)) return true;
    return false;
}

/* control (true): the control tokens of t's template text for tok; else every added token. */
static void tokens_collect(const mt_chat_template *t, const char *text, const mt_tokenizer *tok,
                           bool control, token_set *out) {
    const int32_t n = mt_tokenizer_n_added(tok);
    out->tok = mt_calloc((size_t)(n > 0 ? n : 1), sizeof(span), "control tokens");
    out->n = 0;
    for (int32_t i = 0; i < n; i++) {
        size_t len;
        bool special;
        const char *s = mt_tokenizer_added(tok, i, &len, NULL, &special);
        bool take = !control || special;
        if (!take && t->n_listed_controls >= 0) {
            for (int k = 0; k < t->n_listed_controls && !take; k++)
                take =
                    strlen(t->listed_controls[k]) == len && !memcmp(t->listed_controls[k], s, len);
        } else if (!take) {
            take = !all_space(s, len) && contains(text, s, len);
        }
        if (take) out->tok[out->n++] = (span){s, len};
    }
    qsort(out->tok, (size_t)out->n, sizeof(span), by_len_desc);
}

/* The longest token of set at s[0, n), or NULL. */
static const span *token_at(const token_set *set, const char *s, size_t n) {
    for (int k = 0; k < set->n; k++)
        if (set->tok[k].len <= n && !memcmp(s, set->tok[k].p, set->tok[k].len)) return &set->tok[k];
    return NULL;
}

/* The first token of set (longest first) at s[0, n) that the end marker follows, or NULL: the
 * regex START(token|...)END backtracks to a shorter token when the longest is not closed. */
static const span *marked_at(const token_set *set, const char *s, size_t n) {
    for (int k = 0; k < set->n; k++) {
        const size_t m = set->tok[k].len;
        if (m + MARK_LEN <= n && !memcmp(s, set->tok[k].p, m) && !memcmp(s + m, MARK_END, MARK_LEN))
            return &set->tok[k];
    }
    return NULL;
}

static jinja_value mark_value(jinja_heap *h, jinja_value v, const token_set *set, mt_strbuf *b) {
    if (v.type == JINJA_STR) {
        const char *s = v.u.s.p;
        const size_t n = v.u.s.len;
        mt_strbuf c = {0}; /* without the markers */
        for (size_t i = 0; i < n;)
            if (n - i >= MARK_LEN &&
                (!memcmp(s + i, MARK_START, MARK_LEN) || !memcmp(s + i, MARK_END, MARK_LEN)))
                i += MARK_LEN;
            else
                mt_strbuf_append(&c, s + i++, 1);
        b->len = 0;
        for (size_t i = 0; i < c.len;) {
            const span *tk = token_at(set, c.p + i, c.len - i);
            if (!tk) {
                mt_strbuf_append(b, c.p + i++, 1);
                continue;
            }
            mt_strbuf_append(b, MARK_START, MARK_LEN);
            mt_strbuf_append(b, tk->p, tk->len);
            mt_strbuf_append(b, MARK_END, MARK_LEN);
            i += tk->len;
        }
        jinja_value r = jinja_str(h, b->p ? b->p : "", b->len);
        mt_strbuf_free(&c);
        return r;
    }
    if (v.type == JINJA_LIST) {
        jinja_value l = jinja_list_new(h);
        for (int64_t i = 0; i < v.u.list->n; i++)
            jinja_list_push(h, l, mark_value(h, v.u.list->items[i], set, b));
        return l;
    }
    if (v.type == JINJA_DICT) {
        jinja_value d = jinja_dict_new(h);
        for (int64_t i = 0; i < v.u.dict->n; i++)
            jinja_dict_set(h, d, v.u.dict->keys[i], mark_value(h, v.u.dict->vals[i], set, b));
        return d;
    }
    return v;
}

/* The template's text less its {# comments #} (a byte 1 in their place, so that no token spans
 * one): transformers searches the template's literal text (its data and string constants),
 * which comments are not part of. Malloc'ed. */
static char *without_comments(const char *s) {
    mt_strbuf b = {0};
    for (const char *p = s; *p;) {
        const char *open = strstr(p, "{#");
        const char *close = open ? strstr(open + 2, "#}") : NULL;
        if (!open || !close) {
            mt_strbuf_append(&b, p, strlen(p));
            break;
        }
        mt_strbuf_append(&b, p, (size_t)(open - p));
        mt_strbuf_append(&b, "\x01", 1);
        p = close + 2;
    }
    char *r = strdup(b.p ? b.p : "");
    MT_CHECK(r, "out of memory for a template's text");
    mt_strbuf_free(&b);
    return r;
}

int mt_chat_conv_mark(const mt_chat_template *t, const mt_tokenizer *tok, jinja_heap *h,
                      mt_chat_conv *c, char *err, size_t errlen) {
    const jinja_template *jt = mt_chat_pick(t, c, err, errlen);
    if (!jt) return -1;
    const char *text = t->texts[0];
    for (int i = 0; i < t->n; i++)
        if (t->tmpl[i] == jt) text = t->texts[i];
    char *literal = without_comments(text);
    token_set set;
    tokens_collect(t, literal, tok, true, &set);
    free(literal);
    mt_strbuf b = {0};
    c->messages = mark_value(h, c->messages, &set, &b);
    c->tools = mark_value(h, c->tools, &set, &b);
    c->documents = mark_value(h, c->documents, &set, &b);
    /* the template variables: the template's kwargs, then the conversation's own over them */
    jinja_value vars = jinja_dict_new(h);
    if (t->kwargs.type == JINJA_DICT)
        for (int64_t i = 0; i < t->kwargs.u.dict->n; i++)
            jinja_dict_set(h, vars, t->kwargs.u.dict->keys[i], t->kwargs.u.dict->vals[i]);
    if (c->vars.type == JINJA_DICT)
        for (int64_t i = 0; i < c->vars.u.dict->n; i++)
            jinja_dict_set(h, vars, c->vars.u.dict->keys[i], c->vars.u.dict->vals[i]);
    c->vars = mark_value(h, vars, &set, &b);
    mt_strbuf_free(&b);
    free(set.tok);
    return 0;
}

/* One piece after the first: encode("\n" + piece) less encode("\n") when it starts so, else
 * encode(piece); plain: special added tokens as text. */
static int encode_piece(const mt_tokenizer *tok, const char *p, size_t n, bool plain,
                        const mt_token_buf *nl, int64_t base, mt_token_buf *out, char *err,
                        size_t errlen) {
    mt_token_buf b = {0};
    char *s = mt_malloc(n + 2, "chat piece");
    s[0] = '\n';
    memcpy(s + 1, p, n);
    int64_t k = plain ? mt_tokenizer_encode_plain(tok, s, n + 1, &b, err, errlen)
                      : mt_tokenizer_encode_err(tok, s, n + 1, &b, err, errlen);
    int64_t skip = 0;
    if (k >= 0 && b.n >= nl->n && !memcmp(b.ids, nl->ids, sizeof(int32_t) * (size_t)nl->n))
        skip = nl->n;
    else if (k >= 0) {
        mt_token_buf_clear(&b);
        k = plain ? mt_tokenizer_encode_plain(tok, p, n, &b, err, errlen)
                  : mt_tokenizer_encode_err(tok, p, n, &b, err, errlen);
    }
    free(s);
    if (k < 0) {
        mt_token_buf_free(&b);
        return -1;
    }
    if (plain) { /* transformers: "Can't sanitize ...: the tokenizer produces it from plain text" */
        char tk[256];
        snprintf(tk, sizeof(tk), "%.*s", (int)(n < 255 ? n : 255), p);
        const int32_t id = mt_tokenizer_token_to_id(tok, tk);
        for (int64_t i = skip; id >= 0 && i < b.n; i++)
            if (b.ids[i] == id) {
                snprintf(err, errlen,
                         "cannot sanitize the control token \"%s\": the tokenizer produces it "
                         "from plain text (an added token not marked special)",
                         tk);
                mt_token_buf_free(&b);
                return -1;
            }
    }
    for (int64_t i = skip; i < b.n; i++) {
        if (out->n == out->cap) {
            out->cap = out->cap ? 2 * out->cap : 64;
            out->ids = realloc(out->ids, sizeof(int32_t) * (size_t)out->cap);
            out->offsets = realloc(out->offsets, sizeof(int64_t) * 2 * (size_t)out->cap);
            MT_CHECK(out->ids && out->offsets, "out of memory for token ids");
        }
        out->ids[out->n] = b.ids[i];
        /* offsets into the whole text: the piece's, less the "\n" put before it */
        const int64_t shift = skip ? 1 : 0;
        for (int e = 0; e < 2; e++) {
            const int64_t o = b.offsets[2 * i + e] - shift;
            out->offsets[2 * out->n + e] = base + (o > 0 ? o : 0);
        }
        out->n++;
    }
    mt_token_buf_free(&b);
    return 0;
}

int64_t mt_chat_encode_marked(const mt_tokenizer *tok, const char *text, size_t len,
                              mt_token_buf *out, char *err, size_t errlen) {
    token_set all;
    tokens_collect(NULL, NULL, tok, false, &all);
    mt_token_buf nl = {0};
    const int64_t n0 = out->n;
    int rc = mt_tokenizer_encode_err(tok, "\n", 1, &nl, err, errlen) < 0 ? -1 : 0;
    size_t at = 0; /* start of the current text piece */
    bool first = true;
    for (size_t i = 0; rc == 0 && i <= len;) {
        const bool start = len - i >= MARK_LEN && !memcmp(text + i, MARK_START, MARK_LEN);
        const bool end = len - i >= MARK_LEN && !memcmp(text + i, MARK_END, MARK_LEN);
        if (i < len && !start && !end) {
            i++;
            continue;
        }
        /* the text piece [at, i) */
        if (first)
            rc = mt_tokenizer_encode_err(tok, text + at, i - at, out, err, errlen) < 0 ? -1 : 0;
        else if (i > at)
            rc = encode_piece(tok, text + at, i - at, false, &nl, (int64_t)at, out, err, errlen);
        first = false;
        if (rc || i == len) break;
        const span *tk = start ? marked_at(&all, text + i + MARK_LEN, len - i - MARK_LEN) : NULL;
        if (tk) {
            rc = encode_piece(tok, tk->p, tk->len, true, &nl, (int64_t)(i + MARK_LEN), out, err,
                              errlen);
            i += 2 * MARK_LEN + tk->len;
        } else {
            i += MARK_LEN; /* a lone marker: dropped, but it cuts the text */
        }
        at = i;
    }
    mt_token_buf_free(&nl);
    free(all.tok);
    if (rc) {
        out->n = n0;
        return -1;
    }
    return out->n - n0;
}

size_t mt_chat_unmark(char *text, size_t len) {
    size_t o = 0;
    for (size_t i = 0; i < len;)
        if (len - i >= MARK_LEN &&
            (!memcmp(text + i, MARK_START, MARK_LEN) || !memcmp(text + i, MARK_END, MARK_LEN)))
            i += MARK_LEN;
        else
            text[o++] = text[i++];
    if (o < len) text[o] = 0;
    return o;
}
