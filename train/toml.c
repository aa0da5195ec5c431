/* toml.c: see toml.h. A hand-written recursive-descent reader over one buffer. */
#include "toml.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/file_io.h"

typedef struct {
    const char *s, *path;
    size_t pos;
    int line, col;
    char *err;
    size_t errlen;
    bool failed;
} toml_parser;

static bool toml_fail(toml_parser *p, const char *fmt, ...) MT_PRINTF(2, 3);
static bool toml_fail(toml_parser *p, const char *fmt, ...) {
    if (p->failed) return false;
    p->failed = true;
    int n = snprintf(p->err, p->errlen, "%s:%d:%d: ", p->path, p->line, p->col);
    if (n < 0 || (size_t)n >= p->errlen) return false;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err + n, p->errlen - n, fmt, ap);
    va_end(ap);
    return false;
}

static char toml_peek(const toml_parser *p) { return p->s[p->pos]; }

static void toml_advance(toml_parser *p) {
    if (!p->s[p->pos]) return;
    if (p->s[p->pos] == '\n') {
        p->line++;
        p->col = 1;
    } else {
        p->col++;
    }
    p->pos++;
}

static void toml_skip_blank(toml_parser *p) {
    while (toml_peek(p) == ' ' || toml_peek(p) == '\t') toml_advance(p);
}

/* Skips blanks, comments and newlines (inside arrays). */
static void toml_skip_space_lines(toml_parser *p) {
    for (;;) {
        char c = toml_peek(p);
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            toml_advance(p);
        } else if (c == '#') {
            while (toml_peek(p) && toml_peek(p) != '\n') toml_advance(p);
        } else {
            return;
        }
    }
}

/* After a key/value or table header: only blanks and a comment until the end of the line. */
static bool toml_expect_eol(toml_parser *p) {
    toml_skip_blank(p);
    if (toml_peek(p) == '#')
        while (toml_peek(p) && toml_peek(p) != '\n') toml_advance(p);
    if (toml_peek(p) == '\r') toml_advance(p);
    if (toml_peek(p) && toml_peek(p) != '\n')
        return toml_fail(p, "unexpected '%c' after the value (one key = value per line)",
                         toml_peek(p));
    toml_advance(p);
    return true;
}

static void toml_value_free(mt_toml_value *v) {
    if (v->type == MT_TOML_STRING) free(v->s);
    if (v->type == MT_TOML_ARRAY) {
        for (int i = 0; i < v->n_items; i++) toml_value_free(&v->items[i]);
        free(v->items);
    }
    memset(v, 0, sizeof(*v));
}

static bool toml_is_bare(char c) { return isalnum((unsigned char)c) || c == '_' || c == '-'; }

static void toml_append_utf8(char *out, size_t *n, uint32_t cp) {
    if (cp < 0x80) {
        out[(*n)++] = (char)cp;
    } else if (cp < 0x800) {
        out[(*n)++] = (char)(0xC0 | (cp >> 6));
        out[(*n)++] = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out[(*n)++] = (char)(0xE0 | (cp >> 12));
        out[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[(*n)++] = (char)(0x80 | (cp & 0x3F));
    } else {
        out[(*n)++] = (char)(0xF0 | (cp >> 18));
        out[(*n)++] = (char)(0x80 | ((cp >> 12) & 0x3F));
        out[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[(*n)++] = (char)(0x80 | (cp & 0x3F));
    }
}

/* A basic "..." or literal '...' single-line string; returns a malloc'ed copy. */
static char *toml_parse_string(toml_parser *p) {
    char quote = toml_peek(p);
    toml_advance(p);
    size_t start = p->pos, cap = 16;
    while (p->s[start] && p->s[start] != '\n') start++, cap++;
    char *out = mt_malloc(cap * 4 + 1, "toml string");
    size_t n = 0;
    for (;;) {
        char c = toml_peek(p);
        if (!c || c == '\n') {
            free(out);
            toml_fail(p, "unterminated string");
            return NULL;
        }
        if (c == quote) {
            toml_advance(p);
            break;
        }
        if (quote == '"' && c == '\\' &&
            (!p->s[p->pos + 1] || p->s[p->pos + 1] == '\n' || p->s[p->pos + 1] == '\r')) {
            free(out);
            toml_fail(p, "a '\\' at the end of the line: strings in recipes are single-line (a "
                         "line-ending backslash continues only multi-line strings, which recipes "
                         "do not support)");
            return NULL;
        }
        if (quote == '"' && c == '\\') {
            toml_advance(p);
            char e = toml_peek(p);
            toml_advance(p);
            switch (e) {
            case 'n':
                out[n++] = '\n';
                break;
            case 't':
                out[n++] = '\t';
                break;
            case 'r':
                out[n++] = '\r';
                break;
            case 'b':
                out[n++] = '\b';
                break;
            case 'f':
                out[n++] = '\f';
                break;
            case '"':
                out[n++] = '"';
                break;
            case '\\':
                out[n++] = '\\';
                break;
            case 'u':
            case 'U': {
                int digits = e == 'u' ? 4 : 8;
                uint32_t cp = 0;
                for (int i = 0; i < digits; i++) {
                    char h = toml_peek(p);
                    if (!isxdigit((unsigned char)h)) {
                        free(out);
                        toml_fail(p, "bad \\%c escape: expected %d hex digits", e, digits);
                        return NULL;
                    }
                    cp = cp * 16 +
                         (uint32_t)(isdigit((unsigned char)h) ? h - '0' : tolower(h) - 'a' + 10);
                    toml_advance(p);
                }
                if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
                    free(out);
                    toml_fail(p, "escape \\%c is not a Unicode scalar value", e);
                    return NULL;
                }
                toml_append_utf8(out, &n, cp);
                break;
            }
            default:
                free(out);
                toml_fail(p, "unknown escape \\%c in string", e ? e : ' ');
                return NULL;
            }
            continue;
        }
        out[n++] = c;
        toml_advance(p);
    }
    out[n] = 0;
    return out;
}

static bool toml_parse_value(toml_parser *p, mt_toml_value *v, int depth);

static bool toml_parse_array(toml_parser *p, mt_toml_value *v, int depth) {
    toml_advance(p); /* [ */
    v->type = MT_TOML_ARRAY;
    int cap = 0;
    for (;;) {
        toml_skip_space_lines(p);
        if (toml_peek(p) == ']') {
            toml_advance(p);
            return true;
        }
        if (v->n_items == cap) {
            cap = cap ? 2 * cap : 8;
            mt_toml_value *items = realloc(v->items, sizeof(mt_toml_value) * cap);
            MT_CHECK(items, "out of memory reading a TOML array");
            v->items = items;
        }
        mt_toml_value *item = &v->items[v->n_items];
        memset(item, 0, sizeof(*item));
        if (!toml_parse_value(p, item, depth + 1)) {
            toml_value_free(item); /* a nested array may hold items already */
            return false;
        }
        v->n_items++;
        toml_skip_space_lines(p);
        if (toml_peek(p) == ',') {
            toml_advance(p);
        } else if (toml_peek(p) != ']') {
            return toml_fail(p, "expected ',' or ']' in array");
        }
    }
}

static bool toml_parse_number_or_word(toml_parser *p, mt_toml_value *v) {
    char buf[128];
    size_t n = 0;
    while (toml_peek(p) &&
           strchr("+-._0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
                  toml_peek(p))) {
        if (n + 1 >= sizeof(buf)) return toml_fail(p, "value too long");
        char c = toml_peek(p);
        if (c != '_') buf[n++] = c;
        toml_advance(p);
    }
    buf[n] = 0;
    if (!n) return toml_fail(p, "expected a value (string, number, true/false or array)");
    if (!strcmp(buf, "true") || !strcmp(buf, "false")) {
        v->type = MT_TOML_BOOL;
        v->b = buf[0] == 't';
        return true;
    }
    const char *w = buf + (buf[0] == '+' || buf[0] == '-');
    if (!strcmp(w, "inf") || !strcmp(w, "nan")) {
        v->type = MT_TOML_FLOAT;
        v->f = w[0] == 'i' ? INFINITY : NAN;
        if (buf[0] == '-') v->f = -v->f;
        return true;
    }
    char *end = NULL;
    errno = 0;
    if (!strpbrk(buf, ".eE")) {
        long long i = strtoll(buf, &end, 10);
        if (*end || errno) return toml_fail(p, "'%s' is not a valid integer", buf);
        if (w[0] == '0' && w[1]) return toml_fail(p, "leading zeros are not allowed: '%s'", buf);
        v->type = MT_TOML_INT;
        v->i = i;
        return true;
    }
    double f = strtod(buf, &end);
    if (*end || errno || !isdigit((unsigned char)w[0]))
        return toml_fail(p, "'%s' is not a valid number", buf);
    v->type = MT_TOML_FLOAT;
    v->f = f;
    return true;
}

static bool toml_parse_value(toml_parser *p, mt_toml_value *v, int depth) {
    if (depth > 8) return toml_fail(p, "arrays nested too deeply");
    char c = toml_peek(p);
    if (c == '"' || c == '\'') {
        if (p->s[p->pos + 1] == c && p->s[p->pos + 2] == c)
            return toml_fail(p, "multi-line strings are not supported in recipes");
        v->type = MT_TOML_STRING;
        v->s = toml_parse_string(p);
        return v->s != NULL;
    }
    if (c == '[') return toml_parse_array(p, v, depth);
    if (c == '{') return toml_fail(p, "inline tables are not supported in recipes");
    return toml_parse_number_or_word(p, v);
}

/* key = bare | "quoted" | 'literal', possibly dotted; appended to prefix. */
static bool toml_parse_key(toml_parser *p, char *out, size_t len) {
    size_t n = strlen(out);
    for (;;) {
        toml_skip_blank(p);
        if (n) {
            if (n + 1 >= len) return toml_fail(p, "key too long");
            out[n++] = '.';
        }
        char c = toml_peek(p);
        if (c == '"' || c == '\'') {
            char *s = toml_parse_string(p);
            if (!s) return false;
            size_t sl = strlen(s);
            if (n + sl >= len || strchr(s, '.')) {
                free(s);
                return toml_fail(p, "quoted key too long or containing '.'");
            }
            memcpy(out + n, s, sl);
            n += sl;
            free(s);
        } else {
            size_t k0 = n;
            while (toml_is_bare(toml_peek(p))) {
                if (n + 1 >= len) return toml_fail(p, "key too long");
                out[n++] = toml_peek(p);
                toml_advance(p);
            }
            if (n == k0) return toml_fail(p, "expected a key");
        }
        out[n] = 0;
        toml_skip_blank(p);
        if (toml_peek(p) != '.') return true;
        toml_advance(p);
    }
}

static mt_toml_entry *toml_doc_add(mt_toml_doc *doc) {
    if (doc->n == doc->cap) {
        doc->cap = doc->cap ? 2 * doc->cap : 32;
        mt_toml_entry *e = realloc(doc->entries, sizeof(mt_toml_entry) * doc->cap);
        MT_CHECK(e, "out of memory reading a TOML document");
        doc->entries = e;
    }
    mt_toml_entry *e = &doc->entries[doc->n++];
    memset(e, 0, sizeof(*e));
    return e;
}

const mt_toml_entry *mt_toml_find(const mt_toml_doc *doc, const char *key) {
    for (int i = 0; i < doc->n; i++)
        if (!strcmp(doc->entries[i].key, key)) return &doc->entries[i];
    return NULL;
}

/* The document's lines; tables[] and table_line[] (max entries) record the [table] headers. */
static bool toml_parse_doc(mt_toml_doc *doc, toml_parser *pp, char (*tables)[256], int *table_line,
                           int max_tables) {
    toml_parser p = *pp; /* a copy: err is shared */
    const char *path = p.path;
    char table[256] = "";
    int n_tables = 0;
    for (;;) {
        toml_skip_space_lines(&p);
        if (!toml_peek(&p)) return true;
        if (toml_peek(&p) == '[') {
            toml_advance(&p);
            if (toml_peek(&p) == '[') return toml_fail(&p, "arrays of tables are not supported");
            table[0] = 0;
            const int line = p.line, col = p.col;
            if (!toml_parse_key(&p, table, sizeof(table))) return false;
            if (toml_peek(&p) != ']') return toml_fail(&p, "expected ']' after the table name");
            for (int i = 0; i < n_tables; i++)
                if (!strcmp(tables[i], table)) {
                    p.line = line, p.col = col;
                    toml_fail(&p, "table [%s] is defined twice (first at line %d)", table,
                              table_line[i]);
                    return false;
                }
            if (n_tables < max_tables) {
                snprintf(tables[n_tables], 256, "%s", table);
                table_line[n_tables++] = line;
            }
            toml_advance(&p);
            if (!toml_expect_eol(&p)) return false;
            continue;
        }
        char key[512];
        snprintf(key, sizeof(key), "%s", table);
        int line = p.line, col = p.col;
        if (!toml_parse_key(&p, key, sizeof(key))) return false;
        if (toml_peek(&p) != '=') return toml_fail(&p, "expected '=' after key '%s'", key);
        toml_advance(&p);
        toml_skip_blank(&p);
        if (mt_toml_find(doc, key)) {
            p.line = line, p.col = col;
            return toml_fail(&p, "key '%s' is defined twice", key);
        }
        mt_toml_value v = {0};
        int vline = p.line, vcol = p.col;
        if (!toml_parse_value(&p, &v, 0)) {
            toml_value_free(&v);
            return false;
        }
        mt_toml_entry *e = toml_doc_add(doc);
        e->key = strdup(key);
        e->value = v;
        e->origin = path;
        e->line = vline;
        e->col = vcol;
        if (!toml_expect_eol(&p)) return false;
    }
}

bool mt_toml_parse(mt_toml_doc *doc, const char *text, const char *path, char *err, size_t errlen) {
    toml_parser p = {.s = text, .path = path, .line = 1, .col = 1, .err = err, .errlen = errlen};
    /* the [table] headers seen, with their lines: one defined twice is refused (TOML 1.0) */
    enum { MAX_TABLES = 64 };
    char(*tables)[256] = mt_calloc(MAX_TABLES, 256, "toml tables");
    int table_line[MAX_TABLES];
    const bool ok = toml_parse_doc(doc, &p, tables, table_line, MAX_TABLES);
    free(tables);
    return ok;
}

bool mt_toml_load(mt_toml_doc *doc, const char *path, char *err, size_t errlen) {
    size_t got;
    char *text = mt_file_read_max(path, &got, 0, err, errlen);
    if (!text) return false;
    if (strlen(text) != got) {
        free(text);
        snprintf(err, errlen, "%s: contains a NUL byte", path);
        return false;
    }
    bool ok = mt_toml_parse(doc, text, path, err, errlen);
    free(text);
    return ok;
}

bool mt_toml_set(mt_toml_doc *doc, const char *assignment, char *err, size_t errlen) {
    const char *eq = strchr(assignment, '=');
    if (!eq || eq == assignment) {
        snprintf(err, errlen, "--set %s: expected table.key=value", assignment);
        return false;
    }
    char key[512];
    size_t kl = (size_t)(eq - assignment);
    if (kl >= sizeof(key)) kl = sizeof(key) - 1;
    memcpy(key, assignment, kl);
    key[kl] = 0;
    const char *text = eq + 1;
    toml_parser p = {.s = text, .path = "--set", .line = 1, .col = 1, .err = err, .errlen = errlen};
    mt_toml_value v = {0};
    bool ok = toml_parse_value(&p, &v, 0);
    toml_skip_blank(&p);
    if (!ok || toml_peek(&p)) {
        /* Not TOML: take the whole text as a string (paths, names). */
        toml_value_free(&v);
        v.type = MT_TOML_STRING;
        v.s = strdup(text);
    }
    mt_toml_entry *e = (mt_toml_entry *)mt_toml_find(doc, key);
    if (e) {
        toml_value_free(&e->value);
    } else {
        e = toml_doc_add(doc);
        e->key = strdup(key);
    }
    e->value = v;
    e->origin = "--set";
    e->line = e->col = 0;
    return true;
}

void mt_toml_free(mt_toml_doc *doc) {
    for (int i = 0; i < doc->n; i++) {
        free(doc->entries[i].key);
        toml_value_free(&doc->entries[i].value);
    }
    free(doc->entries);
    memset(doc, 0, sizeof(*doc));
}

const char *mt_toml_type_name(mt_toml_type t) {
    static const char *names[] = {"string", "integer", "float", "boolean", "array"};
    return names[t];
}

void mt_toml_value_format(const mt_toml_value *v, char *buf, size_t len) {
    size_t n = strlen(buf);
    if (n >= len) return;
    switch (v->type) {
    case MT_TOML_STRING: {
        snprintf(buf + n, len - n, "\"");
        for (const char *c = v->s; *c; c++) {
            n = strlen(buf);
            if (*c == '"' || *c == '\\')
                snprintf(buf + n, len - n, "\\%c", *c);
            else if (*c == '\n')
                snprintf(buf + n, len - n, "\\n");
            else
                snprintf(buf + n, len - n, "%c", *c);
        }
        n = strlen(buf);
        snprintf(buf + n, len - n, "\"");
        break;
    }
    case MT_TOML_INT:
        snprintf(buf + n, len - n, "%lld", (long long)v->i);
        break;
    case MT_TOML_FLOAT:
        /* the shortest digits that read back as the same double: 0.0002, not
         * 0.00020000000000000001 */
        for (int prec = 1; prec <= 17; prec++) {
            snprintf(buf + n, len - n, "%.*g", prec, v->f);
            if (strtod(buf + n, NULL) == v->f || isnan(v->f)) break;
        }
        /* keep it a float when read back: 1 -> 1.0 (inf/nan are words TOML knows) */
        if (!strpbrk(buf + n, ".eEin")) snprintf(buf + strlen(buf), len - strlen(buf), ".0");
        break;
    case MT_TOML_BOOL:
        snprintf(buf + n, len - n, "%s", v->b ? "true" : "false");
        break;
    case MT_TOML_ARRAY:
        snprintf(buf + n, len - n, "[");
        for (int i = 0; i < v->n_items; i++) {
            if (i) {
                n = strlen(buf);
                snprintf(buf + n, len - n, ", ");
            }
            mt_toml_value_format(&v->items[i], buf, len);
        }
        n = strlen(buf);
        snprintf(buf + n, len - n, "]");
        break;
    }
}
