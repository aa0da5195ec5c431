/* reply.c: the reply formats' table and the parser every format shares (models/reply.h): a
 * state machine over the reply's bytes (start, reasoning, content with its tool-call blocks)
 * that emits only what is final; the whole-text parse is the same machine fed once. */
#include "models/reply.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/file_io.h"
#include "models/family.h"
#include "models/reply_internal.h"

static const mt_reply_format reply_none = {.name = "none"};

static const mt_reply_format *const reply_formats[] = {&reply_none, &mt_reply_minimax_m2,
                                                       &mt_reply_minimax_m3};
#define N_FORMATS ((int)(sizeof(reply_formats) / sizeof(reply_formats[0])))

const mt_reply_format *mt_reply_format_find(const char *name) {
    for (int i = 0; name && i < N_FORMATS; i++)
        if (!strcmp(reply_formats[i]->name, name)) return reply_formats[i];
    return NULL;
}

const mt_reply_format *mt_reply_format_of(const mt_family *fam) {
    const mt_reply_format *f = fam ? mt_reply_format_find(fam->reply_format) : NULL;
    return f ? f : &reply_none;
}

const mt_reply_format *mt_reply_format_pick(const char *name, const mt_family *fam, char *err,
                                            size_t errlen) {
    if (!name) return mt_reply_format_of(fam);
    const mt_reply_format *f = mt_reply_format_find(name);
    if (!f)
        snprintf(err, errlen, "--reasoning-parser: \"%s\" is not a reply format (%s)", name,
                 mt_reply_format_names());
    return f;
}

char *mt_reply_decode(const mt_reply_format *f, const mt_tokenizer *tok, const int32_t *ids, int n,
                      int32_t eos) {
    if (!mt_reply_format_active(f)) return mt_tokenizer_decode(tok, ids, n, true);
    if (n > 0 && ids[n - 1] == eos) n--; /* the end of the turn, not text of the reply */
    return mt_tokenizer_decode(tok, ids, n, false);
}

const char *mt_reply_format_name(const mt_reply_format *f) { return f->name; }

bool mt_reply_format_active(const mt_reply_format *f) {
    return f && (f->think_open || f->tool_open);
}

const char *mt_reply_format_names(void) {
    static char names[256];
    if (!names[0]) {
        size_t o = 0;
        for (int i = 0; i < N_FORMATS; i++) {
            const size_t n = strlen(reply_formats[i]->name);
            MT_CHECK(o + n + 2 < sizeof(names), "reply format names too long");
            if (i) names[o++] = '|';
            memcpy(names + o, reply_formats[i]->name, n);
            o += n;
        }
        names[o] = 0;
    }
    return names;
}

void mt_reply_calls_push(mt_reply_calls *c, const char *name, size_t name_len, char *args) {
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 4;
        c->v = realloc(c->v, (size_t)c->cap * sizeof(*c->v));
        MT_CHECK(c->v, "out of memory for tool calls");
    }
    char *nm = mt_malloc(name_len + 1, "tool call name");
    memcpy(nm, name, name_len);
    nm[name_len] = 0;
    c->v[c->n++] = (mt_reply_call){.name = nm, .arguments = args};
}

void mt_reply_calls_trim(mt_reply_calls *c, int from) {
    for (int i = from; i < c->n; i++) {
        free(c->v[i].name);
        free(c->v[i].arguments);
    }
    if (from < c->n) c->n = from;
}

/* ---- the stream ---- */

typedef enum { ST_START, ST_REASON, ST_CONTENT, ST_END } reply_state;

struct mt_reply_stream {
    const mt_reply_format *f;
    const struct cJSON *tools;
    bool calls_on;
    reply_state st;
    size_t pos;        /* bytes of the text decided */
    bool in_block;     /* a tool-call block opens at pos */
    bool r_any, c_any; /* reasoning / content text emitted */
    size_t r_nl, c_nl; /* line breaks held back (emitted before the next other byte) */
    bool in_reasoning;
    mt_strbuf rb, cb; /* this feed's new reasoning and content */
    mt_reply_calls calls;
};

mt_reply_stream *mt_reply_stream_new(const mt_reply_format *f, const char *prompt,
                                     const struct cJSON *tools, bool calls_off) {
    mt_reply_stream *s = mt_calloc(1, sizeof(*s), "reply stream");
    s->f = f;
    s->tools = tools;
    s->calls_on = !calls_off && f->tool_open;
    s->st = f->think_open ? ST_START : ST_CONTENT;
    if (f->think_open && prompt) {
        size_t n = strlen(prompt);
        if (n && prompt[n - 1] == '\n') n--;
        const size_t lo = strlen(f->think_open), lc = strlen(f->think_close);
        if (n >= lo && !memcmp(prompt + n - lo, f->think_open, lo))
            s->st = ST_REASON;
        else if (n >= lc && !memcmp(prompt + n - lc, f->think_close, lc))
            s->st = ST_CONTENT;
    }
    return s;
}

/* The first occurrence of tag in s[0, n), or SIZE_MAX. */
static size_t find_tag(const char *s, size_t n, const char *tag) {
    const size_t k = strlen(tag);
    for (size_t i = 0; i + k <= n; i++)
        if (s[i] == tag[0] && !memcmp(s + i, tag, k)) return i;
    return SIZE_MAX;
}

/* The longest proper prefix of tag that s[0, n) ends with (bytes that may begin it). */
static size_t partial_tag(const char *s, size_t n, const char *tag) {
    const size_t k = strlen(tag);
    for (size_t m = k - 1 < n ? k - 1 : n; m > 0; m--)
        if (!memcmp(s + n - m, tag, m)) return m;
    return 0;
}

static bool is_prefix(const char *s, size_t n, const char *tag) {
    const size_t k = strlen(tag);
    return n < k && !memcmp(s, tag, n);
}

/* Text into b, line breaks at its start dropped and at its end held (*nl) until other text. */
static void emit(mt_strbuf *b, bool *any, size_t *nl, const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        if (s[i] == '\n') {
            if (*any) ++*nl;
            i++;
            continue;
        }
        for (; *nl; --*nl) mt_strbuf_append(b, "\n", 1);
        size_t j = i;
        while (j < n && s[j] != '\n') j++;
        mt_strbuf_append(b, s + i, j - i);
        *any = true;
        i = j;
    }
}

/* One step of the machine over text[pos, len); false when it needs more text. */
static bool reply_step(mt_reply_stream *s, const char *text, size_t len, bool done) {
    const mt_reply_format *f = s->f;
    const char *p = text + s->pos;
    const size_t n = len - s->pos;
    switch (s->st) {
    case ST_START: {
        const size_t lo = strlen(f->think_open), lc = strlen(f->think_close);
        if (n >= lo && !memcmp(p, f->think_open, lo)) {
            s->pos += lo;
            s->st = ST_REASON;
        } else if (n >= lc && !memcmp(p, f->think_close, lc)) {
            s->pos += lc;
            s->st = ST_CONTENT;
        } else if (!done && (is_prefix(p, n, f->think_open) || is_prefix(p, n, f->think_close))) {
            return false;
        } else {
            s->st = ST_CONTENT;
        }
        return true;
    }
    case ST_REASON: {
        const size_t at = find_tag(p, n, f->think_close);
        if (at != SIZE_MAX) {
            emit(&s->rb, &s->r_any, &s->r_nl, p, at);
            s->r_nl = 0;
            s->pos += at + strlen(f->think_close);
            s->st = ST_CONTENT;
            return true;
        }
        const size_t m = done ? n : n - partial_tag(p, n, f->think_close);
        emit(&s->rb, &s->r_any, &s->r_nl, p, m);
        s->pos += m;
        if (done) {
            s->in_reasoning = true;
            s->st = ST_END;
        }
        return false;
    }
    case ST_CONTENT:
        if (s->in_block) {
            const size_t lo = strlen(f->tool_open);
            const size_t at = find_tag(p + lo, n - lo, f->tool_close);
            if (at == SIZE_MAX && !done) return false;
            const size_t end = at == SIZE_MAX ? n : lo + at + strlen(f->tool_close);
            if (at == SIZE_MAX || !f->block(p + lo, at, s->tools, &s->calls))
                emit(&s->cb, &s->c_any, &s->c_nl, p, end);
            s->pos += end;
            s->in_block = false;
            return true;
        }
        if (s->calls_on) {
            const size_t at = find_tag(p, n, f->tool_open);
            if (at != SIZE_MAX) {
                emit(&s->cb, &s->c_any, &s->c_nl, p, at);
                s->pos += at;
                s->in_block = true;
                return true;
            }
        }
        const size_t m = done || !s->calls_on ? n : n - partial_tag(p, n, f->tool_open);
        emit(&s->cb, &s->c_any, &s->c_nl, p, m);
        s->pos += m;
        if (done) s->st = ST_END;
        return false;
    case ST_END:
        return false;
    }
    return false;
}

void mt_reply_stream_feed(mt_reply_stream *s, const char *text, size_t len, bool done,
                          mt_reply_delta *d) {
    s->rb.len = s->cb.len = 0;
    const int first = s->calls.n;
    MT_CHECK(len >= s->pos, "reply stream: the text shrank (%zu < %zu bytes)", len, s->pos);
    while (reply_step(s, text, len, done)) {
    }
    *d = (mt_reply_delta){.reasoning = s->rb.p ? s->rb.p : "",
                          .reasoning_len = s->rb.len,
                          .content = s->cb.p ? s->cb.p : "",
                          .content_len = s->cb.len,
                          .calls = s->calls.v + first,
                          .n_calls = s->calls.n - first,
                          .first_call = first,
                          .in_reasoning = s->in_reasoning};
}

void mt_reply_stream_free(mt_reply_stream *s) {
    if (!s) return;
    mt_reply_calls_trim(&s->calls, 0);
    free(s->calls.v);
    mt_strbuf_free(&s->rb);
    mt_strbuf_free(&s->cb);
    free(s);
}

static char *dup_or_null(const char *p, size_t n) {
    if (!n) return NULL;
    char *o = mt_malloc(n + 1, "reply text");
    memcpy(o, p, n);
    o[n] = 0;
    return o;
}

void mt_reply_parse(const mt_reply_format *f, const char *prompt, const char *text, size_t len,
                    const struct cJSON *tools, bool calls_off, mt_reply *out) {
    mt_reply_stream *s = mt_reply_stream_new(f, prompt, tools, calls_off);
    mt_reply_delta d;
    mt_reply_stream_feed(s, text, len, true, &d);
    *out = (mt_reply){.reasoning = dup_or_null(d.reasoning, d.reasoning_len),
                      .content = dup_or_null(d.content, d.content_len),
                      .calls = s->calls.v,
                      .n_calls = s->calls.n,
                      .in_reasoning = d.in_reasoning};
    s->calls = (mt_reply_calls){0};
    mt_reply_stream_free(s);
}

void mt_reply_free(mt_reply *r) {
    free(r->reasoning);
    free(r->content);
    mt_reply_calls c = {.v = r->calls, .n = r->n_calls};
    mt_reply_calls_trim(&c, 0);
    free(r->calls);
    *r = (mt_reply){0};
}
