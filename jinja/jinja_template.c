/* jinja_template.c: loading a template (UTF-8 check, lexing, parsing) and its arena. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "jinja/jinja_ast.h"

#define TCHUNK (64 * 1024)

struct jinja_tchunk {
    struct jinja_tchunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

void *jinja_talloc(struct jinja_template *t, size_t n) {
    n = (n + 15) & ~(size_t)15;
    struct jinja_tchunk *c = t->chunks;
    if (!c || c->used + n > c->cap) {
        size_t cap = n > TCHUNK ? n : TCHUNK;
        c = malloc(sizeof(*c) + cap);
        MT_CHECK(c, "out of memory loading a template");
        c->next = t->chunks;
        c->used = 0;
        c->cap = cap;
        t->chunks = c;
    }
    void *p = c->data + c->used;
    c->used += n;
    return p;
}

char *jinja_tstrdup(struct jinja_template *t, const char *s, size_t n) {
    char *d = jinja_talloc(t, n + 1);
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

/* The offset of the first byte that is not well-formed UTF-8 in s[0, n), or n. */
static size_t utf8_bad_at(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t k = c < 0x80             ? 1
                   : (c & 0xE0) == 0xC0 ? 2
                   : (c & 0xF0) == 0xE0 ? 3
                   : (c & 0xF8) == 0xF0 ? 4
                                        : 0;
        if (!k || i + k > n || (k == 2 && c < 0xC2)) return i;
        uint32_t cp = k == 1 ? c : c & (0x7F >> k);
        for (size_t j = 1; j < k; j++) {
            if ((s[i + j] & 0xC0) != 0x80) return i;
            cp = cp << 6 | (s[i + j] & 0x3F);
        }
        if ((k == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
            (k == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
            return i;
        i += k;
    }
    return n;
}

jinja_template *jinja_template_load(const char *name, const char *src, size_t len, char *err,
                                    size_t errlen) {
    jinja_template *t = calloc(1, sizeof(*t));
    MT_CHECK(t, "out of memory loading a template");
    t->name = jinja_tstrdup(t, name, strlen(name));
    size_t bad = utf8_bad_at((const unsigned char *)src, len);
    if (bad < len) {
        int line = 1;
        for (size_t i = 0; i < bad; i++) line += src[i] == '\n';
        snprintf(err, errlen, "%s:%d: not valid UTF-8 (byte %zu)", name, line, bad);
        jinja_template_free(t);
        return NULL;
    }
    if (memchr(src, 0, len)) {
        snprintf(err, errlen, "%s: contains a NUL byte", name);
        jinja_template_free(t);
        return NULL;
    }
    jinja_tokens toks = {0};
    int rc = jinja_lex(t, src, len, &toks, err, errlen);
    if (rc == 0) rc = jinja_parse(t, &toks, err, errlen);
    free(toks.t);
    if (rc != 0) {
        jinja_template_free(t);
        return NULL;
    }
    return t;
}

void jinja_template_free(jinja_template *t) {
    if (!t) return;
    for (struct jinja_tchunk *c = t->chunks, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    free(t);
}

bool jinja_template_has_generation(const jinja_template *t) { return t->has_generation; }
